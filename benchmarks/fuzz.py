"""Hostile-input fuzzing: random mutations of valid grammars and artifacts, each compiled or
loaded in a worker process under a time and memory limit.

Every case must end in one of two ways: it compiles (or loads), or it raises a one-line
`GrammarcError`. Anything else is counted: a traceback (another exception), a crash (the
worker died), a hang (past the time limit). Where a case compiles, strings sampled from its
table are checked by an independent oracle (Python's `re`, `jsonschema`, Lark's Earley parser,
for GBNF on the tests' own rewriting into Lark, for state-machine specs a walk of their
transitions with `re`): an *invalid accepted* is a sampled string the oracle rejects. Every
table is also checked for *dead ends*: entries (tokens a mask allows) that lead from a state
that can still accept to one that cannot, after which the text has no way to end.

A number is a value, whatever its spelling: the kind `json-numbers` is random schemas of number
keywords under every applicator that subtracts (`not`, `oneOf`, `if`, `contains`, conditions
on keys) and uniqueItems over values equal but spelled apart. For it and for `json-schema`,
values (the sampled ones, and numbers, arrays and objects of them) are written with each
number spelled many ways (`1`, `1.0`, `10e-1`, `0.1E+1`, ...) and judged by `jsonschema` on
exact numbers (`Decimal`): one the table accepts that is invalid is an *invalid accepted*; a
valid value whose canonical text the table refuses is a *valid refused*. Two JSON Schema cases
in five are compiled with `--key-order any`; where no object of theirs fell back to the schema's
order (no notice says so), the values are also written with the keys of every object shuffled
(numbers as they are spelled), and a valid one refused so is a *valid refused* too.

    python benchmarks/fuzz.py --cases 2000 --seed 1

Seeds are the examples in grammars/ and artifacts/ (and the llama.cpp grammars of
../shared/conformance/gbnf when present). Exit status 1 when any traceback, crash, hang,
invalid accepted, valid refused or dead end was seen.
"""

from __future__ import annotations

import argparse
import copy
import decimal
import json
import multiprocessing as mp
import random
import re
import resource
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from grammar_oracles import (  # the tests' independent GBNF reader and JSON number oracle
    dead_end_entries, exact_json, exact_validator, gbnf_to_lark, modest, number_instances,
    random_number_schema, spelled_json,
)

SHARED_GBNF = ROOT.parent / "shared" / "conformance" / "gbnf"
KINDS = ("regex", "json-schema", "json-numbers", "lark", "gbnf", "fsm", "artifact")
JSON_KINDS = ("json-schema", "json-numbers")
SUFFIX_KIND = {".regex": "regex", ".schema.json": "json-schema", ".lark": "lark",
               ".gbnf": "gbnf", ".fsm.yaml": "fsm", ".safetensors": "artifact"}
EXTRA_REGEXES = [r"[a-z]+(\.[a-z]+)*@[a-z]+", r"(?:\d{1,3}\.){3}\d{1,3}", r"(ab|a)*c?",
                 r"[^\s,]{2,8}(,[^\s,]{2,8}){0,3}", r"(?i:hello) (world|there)!?",
                 r"\w+\s*=\s*\"[^\"]*\"", r"x{2,5}y{0,3}|z+", r"(?!ab)[a-c]{2}\d"]
# a value that requires itself (no instance: its machine never returns) beside a union of
# it with a recursion that does end; mutations make either of them end or not
EXTRA_SCHEMAS = [json.dumps({
    "$defs": {"node": {"type": "object", "required": ["next"], "properties": {
        "next": {"$ref": "#/$defs/node"}, "leaf": {"type": "integer"}}}},
    "type": "object", "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"anyOf": [
        {"$ref": "#/$defs/node"}, {"type": "array", "items": {"$ref": "#"}}]}}})]
JSON_KEYWORDS = ["type", "enum", "const", "minimum", "maximum", "exclusiveMinimum",
                 "minLength", "maxLength", "pattern", "items", "prefixItems", "properties",
                 "required", "additionalProperties", "anyOf", "allOf", "oneOf", "not", "$ref",
                 "format", "multipleOf", "minItems", "maxItems", "uniqueItems", "contains",
                 "if", "then", "else", "patternProperties", "propertyNames", "$defs",
                 "dependentRequired", "minProperties", "maxProperties"]
JSON_JUNK: list[Any] = [5, -1, 0, 2 ** 31, 10 ** 20, 1.5, "x", "", "integer", "string",
                        "object", "array", "^[a-z]{2,}$", "(", "#/$defs/a", "#", [], [1, "a"],
                        {}, {"type": "string"}, {"type": "integer", "maximum": 3}, True,
                        False, None, ["a", "b"], {"a": {"type": "boolean"}}]
ALPHABET = list("()[]{}|*+?\\^$.,:;\"'-=<>/#@!~ \n\t0123456789azAZ_") + \
    ["::=", "->", "%ignore", "{0,99999}", "(?=", "(?!", "\\d", "[^", "\\x00", "é", "∀"]
ODD_NUMBERS = ["0", "1", "-1", "99999999999", "4294967296", "65535", "1e400"]


# ----------------------------------------------------------------------------- seeds
def seeds() -> dict[str, list[str | bytes]]:
    found: dict[str, list[str | bytes]] = {kind: [] for kind in KINDS}
    files = sorted((ROOT / "grammars").iterdir()) + sorted((ROOT / "artifacts").iterdir())
    if SHARED_GBNF.is_dir():
        files += sorted(SHARED_GBNF.glob("*.gbnf"))
    for path in files:
        kind = next((k for s, k in SUFFIX_KIND.items() if path.name.endswith(s)), None)
        if kind == "artifact":
            found[kind].append(path.read_bytes())
        elif kind is not None:
            text = path.read_text(encoding="utf-8")
            found[kind].append(text.rstrip("\n") if kind == "regex" else text)
    found["regex"] += EXTRA_REGEXES
    found["json-schema"] += EXTRA_SCHEMAS
    found["json-numbers"] = [""]  # each case is a new random schema
    return found


# ----------------------------------------------------------------------------- mutations
def mutate_text(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        n = len(text)
        i, j = sorted(rng.randrange(n + 1) for _ in range(2))
        choice = rng.randrange(6)
        if choice == 0:
            text = text[:i] + text[j:]
        elif choice == 1:
            text = text[:j] + text[i:j] + text[j:]
        elif choice == 2:
            text = text[:i] + rng.choice(ALPHABET) + text[i:]
        elif choice == 3:
            numbers = list(re.finditer(r"\d+", text))
            if numbers:
                m = rng.choice(numbers)
                text = text[:m.start()] + rng.choice(ODD_NUMBERS) + text[m.end():]
        elif choice == 4:
            depth = rng.choice([2, 20, 300])
            opener, closer = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ("(?:", ")")])
            text = text[:i] + opener * depth + text[i:j] + closer * depth + text[j:]
        elif n >= 2:
            a, b = rng.randrange(n), rng.randrange(n)
            chars = list(text)
            chars[a], chars[b] = chars[b], chars[a]
            text = "".join(chars)
    return text


def mutate_schema(text: str, rng: random.Random) -> str:
    if rng.random() < 0.25:
        return mutate_text(text, rng)
    schema = json.loads(text)
    for _ in range(rng.randint(1, 3)):
        nodes: list[Any] = []
        stack = [schema]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                nodes.append(node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        if not nodes:
            break
        node = rng.choice(nodes)
        action = rng.randrange(3)
        if action == 0 and node:
            del node[rng.choice(list(node))]
        elif action == 1 and node:  # a copy: a later mutation may insert into it
            node[rng.choice(list(node))] = copy.deepcopy(rng.choice(JSON_JUNK))
        else:
            node[rng.choice(JSON_KEYWORDS)] = copy.deepcopy(rng.choice(JSON_JUNK))
    return json.dumps(schema)


def mutate_artifact(data: bytes, rng: random.Random) -> bytes:
    choice = rng.randrange(3)
    if choice == 0:
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    if choice == 1:
        return data[:rng.randrange(len(data))]
    return _reforged(data, rng)


def _reforged(data: bytes, rng: random.Random) -> bytes:
    """The artifact with one metadata value or tensor changed and a valid checksum."""
    from safetensors.numpy import load, save

    from grammarc.format.artifact import METADATA_KEY, checksum

    tensors = load(data)
    header_size = int.from_bytes(data[:8], "little")
    metadata = json.loads(json.loads(data[8:8 + header_size])["__metadata__"][METADATA_KEY])
    metadata.pop("checksum")
    if rng.random() < 0.5:
        key = rng.choice(["num_states", "num_classes", "num_rows", "start_state"])
        if key in metadata:
            metadata[key] = rng.choice([0, 1, 2, -1, 10 ** 9])
        else:
            metadata["tokenizer"]["vocab_size"] = rng.choice([1, 2 ** 24, 2 ** 40])
    else:
        name = rng.choice(sorted(tensors))
        old = tensors[name]
        info = np.iinfo(old.dtype) if old.dtype.kind in "iu" else None
        if info is not None and old.size:
            values = np.random.default_rng(rng.randrange(2 ** 32)).integers(
                info.min, info.max, old.shape, dtype=old.dtype, endpoint=True)
            tensors[name] = values
    metadata["checksum"] = checksum(metadata, tensors)
    return save(tensors, metadata={METADATA_KEY: json.dumps(metadata)})


def make_case(kind: str, seed: str | bytes, rng: random.Random) -> str | bytes:
    if kind == "artifact":
        return mutate_artifact(seed, rng)  # type: ignore[arg-type]
    if kind == "json-schema":
        return mutate_schema(seed, rng)  # type: ignore[arg-type]
    if kind == "json-numbers":
        draft4 = rng.random() < 0.25
        schema = random_number_schema(rng, rng.randint(1, 3), draft4)
        return json.dumps({"$schema": "http://json-schema.org/draft-04/schema#", **schema}
                          if draft4 else schema)
    return mutate_text(seed, rng)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- workers
_TOKENIZER: Any = None


def _init_worker(memory_bytes: int) -> None:
    global _TOKENIZER
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    warnings.simplefilter("ignore")
    import grammarc

    _TOKENIZER = grammarc.load_tokenizer("smollm2")


def run_case(kind: str, source: str | bytes, seed: int) -> dict:
    """Compile or load one case; sample from what compiled and ask the oracle."""
    import grammarc
    from grammarc.deepcall import call_with_deep_stack
    from grammarc.errors import GrammarcError

    # a JSON Schema in any key order two times in five: its texts with the keys of every
    # object shuffled are checked too, where no object fell back to the schema's order
    key_order = "any" if kind in JSON_KINDS and random.Random(seed).random() < 0.4 \
        else "schema"
    notices: list[str] = []
    started = time.perf_counter()
    try:
        if kind == "artifact":
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "case.safetensors"
                path.write_bytes(source)  # type: ignore[arg-type]
                grammar = grammarc.load(path)
                grammar.mask(grammar.initial_state)
        else:
            grammar = grammarc.compile(source, _TOKENIZER, "json-schema"
                                       if kind == "json-numbers" else kind,
                                       options=grammarc.FrontendOptions(
                                           key_order=key_order, notice=notices.append))
    except GrammarcError as exc:
        one_line = "\n" not in str(exc)
        return {"outcome": "error" if one_line else "multi-line error",
                "detail": str(exc)[:160], "seconds": time.perf_counter() - started}
    except Exception as exc:  # noqa: BLE001 - every other exception is what we look for
        return {"outcome": "traceback", "detail": f"{type(exc).__name__}: {exc}"[:200],
                "seconds": time.perf_counter() - started}
    compiled = time.perf_counter() - started
    invalid, refused, checked, samples = [], [], 0, []
    dead_ends = dead_end_entries(grammar.table)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        try:
            tokens = grammar.sample_tokens(48, rng)
        except Exception as exc:  # noqa: BLE001
            return {"outcome": "traceback", "detail": f"sampling: {type(exc).__name__}: {exc}"}
        if tokens is None:
            break
        data = b"".join(_TOKENIZER.token_bytes[t] or b"" for t in tokens
                        if t not in grammar.eos_token_ids)
        # on the deep stack grammarc compiles on: a grammar nested deeply enough for grammarc
        # to need it takes `re`'s parser and Lark's loader past Python's limit too
        verdict = call_with_deep_stack(lambda: oracle(kind, source, data))
        if verdict is not None:
            checked += 1
            if verdict and kind != "artifact":
                samples.append(data)
            if not verdict:
                invalid.append(data[:80].decode("utf-8", "replace"))
    if kind in JSON_KINDS:
        any_order = key_order == "any" and not any(
            "in any order" in notice or "schema's order" in notice for notice in notices)
        respelled = _check_spellings(grammar, str(source), samples, random.Random(seed),
                                     any_order)
        checked += respelled[0]
        invalid += respelled[1]
        refused += respelled[2]
    return {"outcome": "compiled", "checked": checked, "invalid": invalid, "refused": refused,
            "dead_ends": dead_ends, "seconds": compiled, "key_order": key_order}


def _check_spellings(grammar: Any, source: str, samples: list[bytes], rng: random.Random,
                     any_order: bool) -> tuple[int, list[str], list[str]]:
    """Values (the samples, and numbers, arrays and objects of them) with each number spelled
    many ways, and with `any_order` the keys of their objects shuffled: (texts checked,
    invalid ones accepted, valid values whose canonical or shuffled text is refused)."""
    from grammarc.frontends.json_schema import canonical_dumps

    schema = json.loads(source)
    validator = exact_validator(schema)
    values = [v for v in (exact_json(data.decode()) for data in samples) if modest(v)] + \
        number_instances(rng)
    checked, invalid, refused = 0, [], []
    for value in values:
        for _ in range(3):
            text = spelled_json(shuffled(value, rng) if any_order else value, rng)
            checked += 1
            if grammar.matches(text) and not validator.is_valid(exact_json(text)):
                invalid.append(text[:80])
        if validator.is_valid(value):
            texts = [canonical_dumps(schema, value)]
            if any_order:
                texts.append(with_keys_shuffled(texts[0], rng))
            checked += len(texts) - 1
            refused += [text[:80] for text in texts if not grammar.matches(text)]
    return checked, invalid, refused


def shuffled(value: Any, rng: random.Random) -> Any:
    """`value` with the keys of each of its objects in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


class _Spelled(str):
    """A number as its text spells it."""


def with_keys_shuffled(text: str, rng: random.Random) -> str:
    """The JSON text `text` (`json.dumps`'s separators) with the members of each of its
    objects in a random order, every number and string spelled as before."""
    def dumps(value: Any) -> str:
        if isinstance(value, tuple):  # an object's members
            members = list(value)
            rng.shuffle(members)
            return "{" + ", ".join(f"{json.dumps(k)}: {dumps(v)}" for k, v in members) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(dumps(item) for item in value) + "]"
        return str(value) if isinstance(value, _Spelled) else json.dumps(value)

    return dumps(json.loads(text, object_pairs_hook=tuple, parse_int=_Spelled,
                            parse_float=_Spelled))


def oracle(kind: str, source: str | bytes, data: bytes) -> bool | None:
    """Whether an independent implementation accepts `data`: Python's `re`, `jsonschema`,
    Lark's Earley parser (on the Lark grammar, or on the GBNF grammar rewritten as Lark by the
    tests' separate reader), a walk of the spec's transitions with `re`. None: no verdict (an
    artifact's language is what its tables say, even re-forged ones; a GBNF mutant the tests'
    reader cannot rewrite)."""
    if kind == "artifact":
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if kind == "regex":
        return re.fullmatch(str(source), text, re.ASCII) is not None
    if kind in ("json-schema", "json-numbers"):
        try:  # decimals, not floats: 83419.96 is a multiple of 0.01 (float division says no)
            value = exact_json(text)
        except decimal.InvalidOperation:  # a number past Decimal's exponents (1e9999999999999
            return None                   # 999999): valid JSON the oracle cannot judge
        except ValueError:
            return False
        return exact_validator(json.loads(str(source))).is_valid(value)
    if kind == "fsm":
        return _spec_accepts(str(source), text)
    import lark

    grammar = str(source)
    if kind == "gbnf":
        try:
            grammar = gbnf_to_lark(grammar)
            parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
        except Exception:  # noqa: BLE001 - the tests' reader handles the GBNF it was made for
            return None
    else:
        parser = lark.Lark(grammar, parser="earley", lexer="dynamic_complete")
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def _spec_accepts(source: str, text: str) -> bool:
    """Whether `text` spells a path of a state-machine spec's transitions from its start to
    an accepting state (each label a literal or a fully matched ASCII `re` pattern). The spec
    is read by the YAML loader grammarc reads it with: libyaml's where PyYAML has it, which
    takes a tab between tokens where PyYAML's own scanner refuses it."""
    import yaml

    spec = yaml.load(source, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    states, accept = spec["states"], set(spec["accept"])
    seen = {(0, spec["start"])}
    todo = list(seen)
    while todo:
        pos, state = todo.pop()
        for arc in states.get(state) or []:
            if "text" in arc:
                ends = [pos + len(arc["text"])] if text.startswith(arc["text"], pos) else []
            else:
                pattern = re.compile(arc["regex"], re.ASCII)
                ends = [end for end in range(pos + 1, len(text) + 1)
                        if pattern.fullmatch(text[pos:end])]
            for end in ends:
                if (end, arc["to"]) not in seen:
                    seen.add((end, arc["to"]))
                    todo.append((end, arc["to"]))
    return any((len(text), state) in seen for state in accept)


# ----------------------------------------------------------------------------- driver
def run(cases: list[tuple[str, str | bytes]], jobs: int, timeout: float,
        memory_bytes: int, seed: int) -> list[dict]:
    """Every case's result; a batch of `jobs` at a time, the pool replaced after a hang or
    a crash so that one case cannot take the run down."""
    ctx = mp.get_context("spawn")
    results: list[dict] = []
    pool = ctx.Pool(jobs, _init_worker, (memory_bytes,), maxtasksperchild=50)
    try:
        for start in range(0, len(cases), jobs):
            batch = cases[start:start + jobs]
            pending = [pool.apply_async(run_case, (kind, source, seed + start + i))
                       for i, (kind, source) in enumerate(batch)]
            deadline = time.monotonic() + timeout
            broken = False
            for (kind, source), handle in zip(batch, pending):
                try:
                    result = handle.get(max(deadline - time.monotonic(), 0.1))
                except mp.TimeoutError:
                    result, broken = {"outcome": "hang", "detail": f"past {timeout:.0f} s"}, True
                except Exception as exc:  # noqa: BLE001 - the worker died (a crash)
                    result, broken = {"outcome": "crash", "detail": repr(exc)[:160]}, True
                result.update(kind=kind, source=source[:120] if isinstance(source, str)
                              else f"<{len(source)} bytes>")
                results.append(result)
            if broken:
                pool.terminate()
                pool = ctx.Pool(jobs, _init_worker, (memory_bytes,), maxtasksperchild=50)
            done = len(results)
            if done % 100 < jobs:
                print(f"[{done}/{len(cases)}]", file=sys.stderr, flush=True)
    finally:
        pool.terminate()
    return results


def report(results: list[dict]) -> bool:
    """Print the figures per kind; True when nothing bad was seen."""
    bad_outcomes = ("traceback", "multi-line error", "crash", "hang")
    print(f"{'kind':12} {'cases':>6} {'compiled':>9} {'errors':>7} {'traceback':>10} "
          f"{'crash':>6} {'hang':>5} {'checked':>8} {'invalid':>8} {'refused':>8} "
          f"{'dead end':>8} {'max s':>7}")
    clean = True
    for kind in [*KINDS, "TOTAL"]:
        mine = [r for r in results if kind in ("TOTAL", r["kind"])]
        if not mine:
            continue
        count = Counter(r["outcome"] for r in mine)
        checked = sum(r.get("checked", 0) for r in mine)
        invalid = sum(len(r.get("invalid", [])) for r in mine)
        refused = sum(len(r.get("refused", [])) for r in mine)
        dead_ends = sum(1 for r in mine if r.get("dead_ends"))
        slowest = max((r.get("seconds", 0.0) for r in mine), default=0.0)
        tracebacks = count["traceback"] + count["multi-line error"]
        print(f"{kind:12} {len(mine):6} {count['compiled']:9} {count['error']:7} "
              f"{tracebacks:10} {count['crash']:6} {count['hang']:5} {checked:8} "
              f"{invalid:8} {refused:8} {dead_ends:8} {slowest:7.1f}")
    for r in results:
        if r["outcome"] in bad_outcomes or r.get("invalid") or r.get("refused") or \
                r.get("dead_ends"):
            clean = False
            order = f", key order {r['key_order']}" if r.get("key_order") == "any" else ""
            print(f"\n{r['outcome']} ({r['kind']}{order}): {r.get('detail', '')}\n  invalid: "
                  f"{r.get('invalid', [])}\n  refused: {r.get('refused', [])}\n  dead-end "
                  f"entries: {r.get('dead_ends', 0)}\n  source: {r['source']!r}")
    return clean


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--memory-gb", type=float, default=6.0, help="address space per worker")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    pool = seeds()
    kinds = [k for k in args.kinds.split(",") if pool.get(k)]
    cases = []
    for _ in range(args.cases):
        kind = rng.choice(kinds)
        cases.append((kind, make_case(kind, rng.choice(pool[kind]), rng)))
    started = time.perf_counter()
    results = run(cases, args.jobs, args.timeout, int(args.memory_gb * 2 ** 30), args.seed)
    clean = report(results)
    print(f"\n{len(results)} cases in {time.perf_counter() - started:.0f} s")
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
