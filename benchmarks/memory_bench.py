"""Memory of a long-lived grammar with calls under many deep walks (issue 40): do the steps
leave anything behind once no walk is alive?

    python benchmarks/memory_bench.py [--steps 1000000] [--grammar json-value.gbnf]
                                      [--threads 1]

One grammar (grammars/json-value.gbnf by default: any JSON value, a root that calls itself),
loaded once and warmed as a server does. Walks start in an array `d` levels deep (`d` uniform
in 50..400) and take random allowed steps (EOS never) of up to 200 tokens; at every step a
serving engine's calls are made: the mask without a budget (to choose the token), the packed
bitmask with a budget (`fill_bitmask`, the budget counting down from 600) and `next_state`.
Walks follow each other until `--steps` steps are taken, in `--threads` threads sharing the
grammar. Printed every tenth of the run and at its end, after the last walk is dropped:
the process's resident memory (`VmRSS`), the objects Python's collector tracks, and the
grammar's own holdings (the masks its caches keep, the memo of its states with an empty
stack). Memory that follows the walks rises while they run and comes back when they end;
memory interned in the grammar would grow with the steps.
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
from pathlib import Path

import numpy as np

import grammarc
from grammarc.runtime import bitmask_width

ROOT = Path(__file__).resolve().parent.parent


def resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def walk_steps(grammar, rng: np.random.Generator, steps: int, counter: list[int]) -> None:
    """Random deep walks of `grammar` until `steps` steps are taken (counted in `counter`)."""
    eos = list(grammar.eos_token_ids)
    row = np.zeros((1, bitmask_width(grammar.vocab_size)), np.int32)
    taken = 0
    while taken < steps:
        state = grammar.walk_bytes(b"[" * int(rng.integers(50, 401)))
        for budget in range(600, 400, -1):
            mask = grammar.mask(state).copy()
            mask[eos] = False
            allowed = np.flatnonzero(mask)
            if not len(allowed) or taken >= steps:
                break
            grammar.fill_bitmask([state], row, budget=budget)
            state = grammar.next_state(state, int(allowed[rng.integers(len(allowed))]))
            taken += 1
            counter[0] += 1


def report(label: str, grammar, start: float) -> None:
    gc.collect()
    held = len(grammar._state_masks) + len(grammar._allowed_masks)
    print(f"{label:>14}  {time.perf_counter() - start:7.1f} s  RSS {resident_mb():8.1f} MB  "
          f"tracked objects {len(gc.get_objects()):9,d}  cached masks {held:6,d}  "
          f"root memo {len(grammar._root_settled):6,d}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--grammar", default="json-value.gbnf")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    tok = grammarc.load_tokenizer("smollm2")
    source = ROOT / "grammars" / args.grammar
    grammar = grammarc.compile(source.read_text(), tok,
                               "gbnf" if source.suffix == ".gbnf" else "json-schema")
    grammar.warm()
    start = time.perf_counter()
    counter = [0]
    walk_steps(grammar, np.random.default_rng(0), 20_000, counter)  # caches filled
    report("warmed", grammar, start)
    tenth = args.steps // 10
    for part in range(10):
        threads = [threading.Thread(target=walk_steps, args=(
            grammar, np.random.default_rng(100 * part + i), tenth // args.threads, counter))
            for i in range(args.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        report(f"{counter[0] - 20_000:,d} steps", grammar, start)


if __name__ == "__main__":
    main()
