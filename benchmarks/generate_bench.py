"""Generation benchmark: SmolLM2-135M-Instruct with and without a grammarc processor.

    python benchmarks/generate_bench.py [--seeds 5] [--max-new-tokens 128]

For each JSON schema with a prompt in grammars/prompts.json, samples `--seeds` outputs at
temperature 1.0 unconstrained and constrained by the compiled schema (same prompt, same
seeds), then prints per schema: the share of outputs that are JSON as a whole, and valid
against the schema (jsonschema), and generation speed in tokens per second; for grammarc,
also the processor's own time per token, replayed on the generated ids (budget-aware masks of
torch logits, as in generation). Needs
`pip install -e '.[hf,test]'` (transformers, accelerate, jsonschema).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jsonschema
import torch

import grammarc
from grammarc.integrations.hf import generate, load_model
from grammarc.integrations.transformers import GrammarLogitsProcessor

ROOT = Path(__file__).resolve().parent.parent


def verdict(text: str, schema: dict) -> tuple[bool, bool]:
    """Whether `text` is one JSON value, and whether that value is valid against `schema`."""
    try:
        value = json.loads(text)
    except ValueError:
        return False, False
    return True, jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.FormatChecker()).is_valid(value)


def processor_seconds(grammar: grammarc.Grammar, token_ids: list[int], budget: int) -> float:
    """Time the processor takes over a generation of `token_ids`, best of 3 replays."""
    ids = torch.tensor([[7] + token_ids])  # one prompt token: only generated ids are walked
    logits = torch.zeros(1, grammar.vocab_size)
    best = float("inf")
    for _ in range(3):
        processor = GrammarLogitsProcessor(grammar, budget)
        start = time.perf_counter()
        for step in range(1, len(token_ids) + 1):
            processor(ids[:, :step], logits)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--show", action="store_true", help="print every output")
    args = parser.parse_args()

    model = load_model("smollm2")
    prompts = json.loads((ROOT / "grammars" / "prompts.json").read_text())
    print(f"SmolLM2-135M-Instruct, CPU float32, temperature 1.0, {args.seeds} seeds, "
          f"max {args.max_new_tokens} new tokens\n")
    print(f"{'schema':<14} {'mode':<13} {'JSON':>6} {'valid':>6} {'tokens':>7} {'tokens/s':>9} "
          f"{'mask ms/token':>13}")
    for name, prompt in prompts.items():
        if not name.endswith(".schema.json"):
            continue
        path = ROOT / "grammars" / name
        schema = json.loads(path.read_text())
        grammar = grammarc.compile(path, tokenizer=model.vocabulary)
        for mode, constraint in (("unconstrained", None), ("grammarc", grammar)):
            parsed = valid = tokens = 0
            seconds = masking = 0.0
            for seed in range(args.seeds):
                out = generate(model, prompt, constraint, max_new_tokens=args.max_new_tokens,
                               temperature=1.0, seed=seed)
                is_json, is_valid = verdict(out.text, schema)
                parsed, valid = parsed + is_json, valid + is_valid
                tokens, seconds = tokens + len(out.token_ids), seconds + out.seconds
                if constraint is not None:
                    masking += processor_seconds(constraint, out.token_ids, args.max_new_tokens)
                if args.show:
                    print(f"  [{mode} seed {seed}] {out.text!r}")
            print(f"{name.removesuffix('.schema.json'):<14} {mode:<13} "
                  f"{parsed / args.seeds:>6.0%} {valid / args.seeds:>6.0%} "
                  f"{tokens / args.seeds:>7.1f} {tokens / seconds:>9.1f} "
                  f"{f'{masking / tokens * 1e3:.2f}' if constraint is not None else '':>13}")


if __name__ == "__main__":
    main()
