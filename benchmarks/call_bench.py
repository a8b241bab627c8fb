"""Budgeted steps of grammars with calls, deep in their stacks: what a serving engine pays per
sequence per step when it passes `max_tokens` (issue 40).

    python benchmarks/call_bench.py [--tokenizer smollm2] [--steps 60] [--cache DIR]
                                    [--modes fresh warm] [--repeat 1]

Cases: llama.cpp's c.gbnf inside `int f(){` and n nested `while(x<1){`, the JSON-value GBNF
inside n nested arrays, and grammars/tree.schema.json n nodes deep, for n = 1, 10, 100. Each
case loads its artifact afresh (first uses included), follows the text's tokens (longest
allowed token first) and then takes `--steps` random allowed steps; every step asks for the
budgeted mask (`mask(state, budget=...)`), the budgeted bitmask (`fill_bitmask(...,
budget=...)`) and steps the state; then what a serving engine's step costs on its own: a
`Matcher` (with that `max_tokens`, on its own copy of the grammar, loaded and warmed alike)
fills its row of the bitmask and accepts the token. Prints, per call, the mean over the walk's
steps (what the engine pays per sequence per step, its first uses included) and the p50 / p99 /
max of a step. Modes:
`fresh` steps a grammar as loaded (first uses included), `warm` calls `g.warm()` after loading
(what a server does once); its time and the resident memory it adds are measured once per
grammar in a fresh process. With
`--repeat n`, each case runs n times, each on a grammar loaded afresh, and each step counts
its fastest run (the walks are the same: the other engineers' processes on a shared machine
stall a step now and then, a first use stalls it every run). Artifacts are compiled once into
`--cache`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import grammarc
from grammarc.runtime import bitmask_width

ROOT = Path(__file__).resolve().parent.parent
GBNF = Path("/work/shared/conformance/gbnf")
CASES = {  # name: (source, kind, the text opening one level, the text before the levels)
    "c.gbnf": (GBNF / "c.gbnf", "gbnf", "while(x<1){", "int f(){"),
    "json.gbnf": (GBNF / "json.gbnf", "gbnf", '{"a": [', ""),
    "tree.schema": (ROOT / "grammars" / "tree.schema.json", "json-schema",
                    '{"value": 1, "children": [', ""),
}


def artifact(name: str, tokenizer, cache: Path) -> Path:
    """The case's artifact, compiled into `cache` the first time."""
    source, kind, _, _ = CASES[name]
    path = cache / f"{name}.{tokenizer.name}.safetensors"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        grammarc.compile(source.read_text(), tokenizer, kind).save(path)
    return path


def prefix_tokens(g, token_ids: dict[bytes, int], text: bytes) -> list[int]:
    """Tokens of `text`, the longest allowed one first at each point (walked with `g`)."""
    tokens, state, at = [], g.initial_state, 0
    while at < len(text):
        for size in range(min(24, len(text) - at), 0, -1):
            token = token_ids.get(text[at:at + size])
            if token is not None and g.mask(state)[token]:
                break
        else:
            raise SystemExit(f"no allowed token at byte {at} of {text!r}")
        tokens.append(token)
        state = g.next_state(state, token)
        at += size
    return tokens


def percentiles(times: list[float]) -> str:
    a = np.asarray(times) * 1e6
    return (f"mean {a.mean():7.1f}  p50 {np.percentile(a, 50):7.1f}  p99 {np.percentile(a, 99):8.1f}"
            f"  max {a.max():8.1f} µs")


WARM_COST = """
import sys, time
from pathlib import Path
import grammarc

def resident():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

g = grammarc.load(sys.argv[1])
before, t0 = resident(), time.perf_counter()
g.warm()
print(time.perf_counter() - t0, resident() - before)
"""


def warm_cost(path: Path) -> tuple[float, float]:
    """Seconds `warm()` takes and the resident memory it adds (MB), in a fresh process (in
    this one, memory the earlier cases freed would be reused)."""
    out = subprocess.run([sys.executable, "-c", WARM_COST, str(path)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1]) / 2**20


def run_case(path: Path, name: str, depth: int, token_ids, steps: int, rng,
             warm: bool) -> dict[str, list]:
    """Per-step times of each call along the case's walk."""
    g = grammarc.load(path)  # afresh: first uses included
    served = grammarc.load(path)  # the serving engine's, its caches its own
    if warm:
        g.warm()
        served.warm()
    _, _, level, head = CASES[name]
    text = (head + level * depth).encode()
    tokens = prefix_tokens(grammarc.load(path), token_ids, text)
    budget = len(tokens) + 3 * depth + steps + 40
    buffer = np.zeros((1, bitmask_width(g.vocab_size)), np.int32)
    eos = set(g.eos_token_ids)
    timing: dict[str, list] = {"mask(budget)": [], "fill_bitmask(budget)": [], "next_state": [],
                               "Matcher.fill_bitmask": [], "Matcher.accept": []}
    state = g.initial_state
    matcher = grammarc.Matcher(served, max_tokens=budget)  # a serving engine's step
    row = np.zeros(bitmask_width(g.vocab_size), np.int32)
    for i in range(len(tokens) + steps):
        t0 = time.perf_counter()
        mask = g.mask(state, budget=budget)
        t1 = time.perf_counter()
        g.fill_bitmask([state], buffer, budget=budget)
        t2 = time.perf_counter()
        if i < len(tokens):
            token = tokens[i]
        else:
            choices = [t for t in np.flatnonzero(mask).tolist() if t not in eos]
            if not choices:
                break
            token = int(rng.choice(choices))
        t3 = time.perf_counter()
        state = g.next_state(state, token)
        t4 = time.perf_counter()
        matcher.fill_bitmask(row)
        t5 = time.perf_counter()
        accepted = matcher.accept(token)
        t6 = time.perf_counter()
        assert accepted and not (row != buffer[0]).any(), "the matcher disagrees with the grammar"
        timing["mask(budget)"].append(t1 - t0)
        timing["fill_bitmask(budget)"].append(t2 - t1)
        timing["next_state"].append(t4 - t3)
        timing["Matcher.fill_bitmask"].append(t5 - t4)
        timing["Matcher.accept"].append(t6 - t5)
        budget -= 1
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/grammarc-call-bench"))
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--modes", nargs="*", choices=("fresh", "warm"),
                        default=["fresh", "warm"])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    tok = grammarc.load_tokenizer(args.tokenizer)
    token_ids = {b: i for i, b in enumerate(tok.token_bytes) if b}
    for name in args.cases:
        path = artifact(name, tok, args.cache)
        if "warm" in args.modes:
            seconds, added = warm_cost(path)
            print(f"{name}: warm() {seconds * 1e3:.0f} ms, +{added:.1f} MB resident")
        for depth in (1, 10, 100):
            for mode in args.modes:
                runs = [run_case(path, name, depth, token_ids, args.steps,
                                 np.random.default_rng(0), mode == "warm")
                        for _ in range(args.repeat)]
                timing = {call: np.min([run[call] for run in runs], axis=0).tolist()
                          for call in runs[0]}
                print(f"{name} nested {depth} {mode} ({len(timing['next_state'])} steps)")
                for call, times in timing.items():
                    print(f"  {call:22s} {percentiles(times)}")


if __name__ == "__main__":
    main()
