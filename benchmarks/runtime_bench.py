"""Runtime benchmark: masks and logits masking against the plain `where` floor, artifact load.

    python benchmarks/runtime_bench.py [--tokenizer smollm2] [--schema order]

Compiles one realistic grammar (a JSON schema from grammars/, turned into a regex by
outlines-core when it is installed, else the email regex), then times on the same logits:

- `g.mask(state)` for one state after its first use (cached), and the first use;
- `g.apply(logits, states)` for batch 1 and 64, numpy and torch (CPU), copying and in place,
  against `np.where(mask, logits, -inf)` / `torch.where` with the masks already built, which
  is the memory-bound floor of any masking;
- `grammarc.load(path)` for the artifact.
"""

from __future__ import annotations

import argparse
import tempfile
import timeit
from pathlib import Path

import numpy as np

import grammarc

ROOT = Path(__file__).resolve().parent.parent


def best(stmt, number: int, repeat: int = 7) -> float:
    """Best time of one call, in seconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def grammar_source(schema: str) -> str:
    try:
        from outlines_core.json_schema import build_regex_from_schema
    except ImportError:
        print("(outlines-core not installed: using grammars/email.regex)")
        return (ROOT / "grammars" / "email.regex").read_text().rstrip("\n")
    return build_regex_from_schema((ROOT / "grammars" / f"{schema}.schema.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--schema", default="order")
    args = parser.parse_args()

    tok = grammarc.load_tokenizer(args.tokenizer)
    grammar = grammarc.compile(grammar_source(args.schema), tok, kind="regex")
    path = Path(tempfile.mkdtemp()) / "g.safetensors"
    grammar.save(path)
    g = grammarc.load(path)
    vocab = g.vocab_size
    rng = np.random.default_rng(0)
    # states a generation actually visits: a random walk through the table
    states, s = [], 1
    for _ in range(200):
        states.append(s)
        allowed = g.allowed(s)
        s = g.next_state(s, int(rng.choice(allowed)))
        if s == 0 or g.is_accepting(s):
            s = 1
    visited = np.array(states)
    print(f"{args.schema} schema on {args.tokenizer}: {g.num_states} states, {g.num_rows} rows, "
          f"{vocab:,} tokens, artifact {path.stat().st_size:,} bytes\n")
    rows = [("artifact load", best(lambda: grammarc.load(path), 20), None)]

    fresh = grammarc.load(path)
    first = [best(lambda st=st: grammarc.load(path).mask(st), 1, 3) - rows[0][1]
             for st in visited[:5]]
    rows.append(("mask, first use of a state", float(np.median(first)), None))
    g.mask(int(visited[10]))
    rows.append(("mask, one state after first use", best(lambda: g.mask(int(visited[10])), 20000),
                 None))
    del fresh

    for batch in (1, 64):
        st = visited[:batch]
        logits = rng.standard_normal((batch, vocab)).astype(np.float32)
        masks = np.stack([g.mask(int(x)) for x in st])
        floor = best(lambda: np.where(masks, logits, -np.inf), 50)
        ours = best(lambda: g.apply(logits, st), 50)
        work = logits.copy()
        inplace = best(lambda: g.apply(work, st, inplace=True), 50)
        rows.append((f"numpy apply, batch {batch}", ours, floor))
        rows.append((f"numpy apply in place, batch {batch}", inplace, floor))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        for batch in (1, 64):
            st = torch.as_tensor(visited[:batch])
            logits = torch.randn(batch, vocab)
            masks = torch.as_tensor(np.stack([g.mask(int(x)) for x in visited[:batch]]))
            neg = torch.tensor(float("-inf"))
            g.apply(logits, st)  # builds the device tables once
            floor = best(lambda: torch.where(masks, logits, neg), 50)
            ours = best(lambda: g.apply(logits, st), 50)
            work = logits.clone()
            inplace = best(lambda: g.apply(work, st, inplace=True), 50)
            rows.append((f"torch apply, batch {batch}", ours, floor))
            rows.append((f"torch apply in place, batch {batch}", inplace, floor))
        tokens = torch.as_tensor([int(g.allowed(int(x))[0]) for x in visited[:64]])
        rows.append(("torch advance, batch 64", best(lambda: g.advance(st, tokens), 200), None))
    tokens = np.array([int(g.allowed(int(x))[0]) for x in visited[:64]])
    rows.append(("numpy advance, batch 64", best(lambda: g.advance(visited[:64], tokens), 200),
                 None))

    print("| operation | grammarc | plain where (floor) | ratio |")
    print("|---|---|---|---|")
    for name, ours, floor in rows:
        ratio = f"{ours / floor:.2f}x" if floor else "-"
        print(f"| {name} | {fmt(ours)} | {fmt(floor) if floor else '-'} | {ratio} |")


if __name__ == "__main__":
    main()
