"""Budgeted steps of grammars with calls, deep in their stacks: what a serving engine pays per
sequence per step when it passes `max_tokens` (issue 40).

    python benchmarks/call_bench.py [--tokenizer smollm2] [--steps 60] [--cache DIR]
                                    [--modes fresh warm] [--repeat 1] [--flat] [--peers]

Cases: llama.cpp's c.gbnf inside `int f(){` and n nested `while(x<1){`, the JSON-value GBNF
inside n nested arrays, and grammars/tree.schema.json n nodes deep, for n = 1, 10, 100. Each
case loads its artifact afresh (first uses included), follows the text's tokens (longest
allowed token first) and then takes `--steps` random allowed steps; every step asks for the
budgeted mask (`mask(state, budget=...)`), the budgeted bitmask (`fill_bitmask(...,
budget=...)`) and steps the state; then what a serving engine's step costs on its own: a
`Matcher` (with that `max_tokens`, on its own copy of the grammar, loaded and warmed alike)
fills its row of the bitmask and accepts the token. In the same steps, two references fill
a row too, after the same work between steps: a `Matcher` walking a flat table at random
(`--flat`, grammars/person.schema.json: what a fill costs without calls, cold caches and
all) and, with `--peers`, xgrammar's `GrammarMatcher` on the same grammar text following the
same tokens (it has no budget: its fill is unbudgeted; it stops timing where it refuses a
token). Prints, per call, the mean over the walk's steps (what the engine pays per sequence
per step, its first uses included) and the p50 / p99 / max of a step. Modes:
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
FLAT = ROOT / "grammars" / "person.schema.json"  # a flat table's fill, the reference
CASES = {  # name: (source, kind, the text opening one level, the text before the levels)
    "c.gbnf": (GBNF / "c.gbnf", "gbnf", "while(x<1){", "int f(){"),
    "json.gbnf": (GBNF / "json.gbnf", "gbnf", '{"a": [', ""),
    "tree.schema": (ROOT / "grammars" / "tree.schema.json", "json-schema",
                    '{"value": 1, "children": [', ""),
}


def artifact(name: str, tokenizer, cache: Path) -> Path:
    """The case's artifact (`flat`: the flat reference), compiled into `cache` the first
    time."""
    source, kind = (FLAT, "json-schema") if name == "flat" else CASES[name][:2]
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
    if not times:
        return "no step"
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


class FlatWalk:
    """A `Matcher` on a flat table taking random allowed steps, started again when it ends:
    the reference fill of the same step (`--flat`)."""

    def __init__(self, path: Path, warm: bool, rng) -> None:
        self.grammar = grammarc.load(path)
        if warm:
            self.grammar.warm()
        self.matcher, self.rng = grammarc.Matcher(self.grammar), rng
        self.row = np.zeros(bitmask_width(self.grammar.vocab_size), np.int32)
        self.eos = set(self.grammar.eos_token_ids)

    def fill(self) -> float:
        """Seconds one fill of its row takes."""
        start = time.perf_counter()
        self.matcher.fill_bitmask(self.row)
        return time.perf_counter() - start

    def step(self) -> None:
        choices = [t for t in np.flatnonzero(self.matcher.mask()).tolist() if t not in self.eos]
        if choices:
            self.matcher.accept(int(self.rng.choice(choices)))
        else:
            self.matcher.reset()


class XGrammarWalk:
    """xgrammar's matcher on the case's grammar, following the walk's tokens (`--peers`)."""

    def __init__(self, name: str, tokenizer) -> None:
        import xgrammar

        source, kind, _, _ = CASES[name]
        info = xgrammar.TokenizerInfo([b or b"" for b in tokenizer.token_bytes],
                                      xgrammar.VocabType.RAW, vocab_size=tokenizer.vocab_size,
                                      stop_token_ids=list(tokenizer.eos_token_ids))
        compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        compiled = compiler.compile_grammar(source.read_text()) if kind == "gbnf" else \
            compiler.compile_json_schema(source.read_text(), any_whitespace=False,
                                         separators=(", ", ": "))
        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.bits = np.zeros((1, bitmask_width(tokenizer.vocab_size)), np.int32)
        self.alive = True

    def fill(self) -> float | None:
        """Seconds one fill takes (None once it refused a token of the walk)."""
        if not self.alive:
            return None
        start = time.perf_counter()
        self.matcher.fill_next_token_bitmask(self.bits)
        return time.perf_counter() - start

    def step(self, token: int) -> None:
        self.alive = self.alive and self.matcher.accept_token(token)


def run_case(path: Path, name: str, depth: int, token_ids, steps: int, rng,
             warm: bool, flat: Path | None = None, peer=None) -> dict[str, list]:
    """Per-step times of each call along the case's walk (and of the references' fills in
    the same steps: `flat`, the flat reference's artifact; `peer`, an `XGrammarWalk`)."""
    g = grammarc.load(path)  # afresh: first uses included
    served = grammarc.load(path)  # the serving engine's, its caches its own
    if warm:
        g.warm()
        served.warm()
    reference = FlatWalk(flat, warm, np.random.default_rng(1)) if flat else None
    _, _, level, head = CASES[name]
    text = (head + level * depth).encode()
    tokens = prefix_tokens(grammarc.load(path), token_ids, text)
    budget = len(tokens) + 3 * depth + steps + 40
    buffer = np.zeros((1, bitmask_width(g.vocab_size)), np.int32)
    eos = set(g.eos_token_ids)
    timing: dict[str, list] = {"mask(budget)": [], "fill_bitmask(budget)": [], "next_state": [],
                               "Matcher.fill_bitmask": [], "Matcher.accept": []}
    if reference:
        timing["flat Matcher.fill_bitmask"] = []
    if peer:
        timing["xgrammar fill (no budget)"] = []
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
        if reference:  # its own random choice, then its fill: the same work before it
            reference.step()
            timing["flat Matcher.fill_bitmask"].append(reference.fill())
        if peer and (seconds := peer.fill()) is not None:
            timing["xgrammar fill (no budget)"].append(seconds)
            peer.step(token)
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
    parser.add_argument("--flat", action="store_true",
                        help="time a flat table's fill in the same steps (the reference)")
    parser.add_argument("--peers", action="store_true",
                        help="time xgrammar's fill in the same steps (bench venv)")
    args = parser.parse_args()
    tok = grammarc.load_tokenizer(args.tokenizer)
    token_ids = {b: i for i, b in enumerate(tok.token_bytes) if b}
    flat = artifact("flat", tok, args.cache) if args.flat else None
    for name in args.cases:
        path = artifact(name, tok, args.cache)
        if "warm" in args.modes:
            seconds, added = warm_cost(path)
            print(f"{name}: warm() {seconds * 1e3:.0f} ms, +{added:.1f} MB resident")
        for depth in (1, 10, 100):
            for mode in args.modes:
                runs = [run_case(path, name, depth, token_ids, args.steps,
                                 np.random.default_rng(0), mode == "warm", flat,
                                 XGrammarWalk(name, tok) if args.peers else None)
                        for _ in range(args.repeat)]
                timing = {call: np.min([run[call][:min(len(r[call]) for r in runs)]
                                        for run in runs], axis=0).tolist()
                          for call in runs[0]}
                print(f"{name} nested {depth} {mode} ({len(timing['next_state'])} steps)")
                for call, times in timing.items():
                    print(f"  {call:22s} {percentiles(times)}")


if __name__ == "__main__":
    main()
