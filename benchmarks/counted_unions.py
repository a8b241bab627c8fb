"""Long strings inside unions (issue 41): states and compile time of schemas whose `anyOf`
reads one value as a string with a long `maxLength` and as something else.

    python benchmarks/counted_unions.py [--vocab smollm2] [--bounds 512 4096 20000]

Each shape is compiled with default options at each bound, in this process (the tokenizer's
trie built first); a compile error prints its first line. Before format version 6 the count
of such a string was spelled out in states, or the schema was past `--max-states`; a union
that keeps the count has a few hundred states at any bound (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import time

import grammarc


def shapes(most: int) -> dict[str, dict]:
    """The schemas measured, with the string's `maxLength` at `most`."""
    bounded = {"type": "string", "maxLength": most}
    return {
        "string or email": {"anyOf": [bounded, {"type": "string", "format": "email"}]},
        "string or uri, in an object": {"type": "object", "properties": {"x": {"anyOf": [
            bounded, {"type": "string", "format": "uri"}]}}},
        "two open objects": {"anyOf": [
            {"type": "object", "properties": {"name": bounded}},
            {"type": "object", "properties": {"title": bounded}}]},
        "open objects, values read inline": {"anyOf": [
            {"type": "object", "properties": {"name": bounded, "kind": {"const": "a"}}},
            {"type": "object", "properties": {"kind": {"const": "b"},
                                              "size": {"type": "integer"}}}]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="smollm2", help="tokenizer (default smollm2)")
    parser.add_argument("--bounds", type=int, nargs="+", default=[512, 4096, 20000])
    args = parser.parse_args()
    tokenizer = grammarc.load_tokenizer(args.vocab)
    grammarc.compile_json_schema({"type": "string"}, tokenizer)  # the trie, built once
    print(f"{'shape':<34} {'maxLength':>9} {'states':>9} {'seconds':>8}")
    for most in args.bounds:
        for name, schema in shapes(most).items():
            started = time.perf_counter()
            try:
                states = f"{grammarc.compile_json_schema(schema, tokenizer).num_states:,}"
            except grammarc.GrammarcError as exc:
                states = f"error: {str(exc)[:60]}"
            print(f"{name:<34} {most:>9} {states:>9} {time.perf_counter() - started:>8.2f}")


if __name__ == "__main__":
    main()
