"""Shared test helpers: independent oracles and samplers that do not use grammarc's own code paths."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def sample_dfa_strings(dfa, rng: random.Random, count: int, max_len: int = 40) -> list[bytes]:
    """Byte strings accepted by `dfa`, by random walks that stop at accepting states."""
    table = dfa.byte_table()
    live = [np.flatnonzero(table[s]) for s in range(dfa.num_states)]
    out = []
    for _ in range(count * 20):
        if len(out) >= count:
            break
        state, data = 1, bytearray()
        for _ in range(max_len * 4):
            if dfa.accepting[state] and (not len(live[state]) or rng.random() < 0.25):
                out.append(bytes(data))
                break
            if not len(live[state]):
                break
            b = int(rng.choice(live[state]))
            data.append(b)
            state = int(table[state, b])
    return out


def mutate(text: str, rng: random.Random, alphabet: str) -> str:
    """One random edit (insert, delete, replace) of `text`."""
    pos = rng.randint(0, len(text))
    choice = rng.random()
    if choice < 0.33 or not text:
        return text[:pos] + rng.choice(alphabet) + text[pos:]
    pos = min(pos, len(text) - 1)
    if choice < 0.66:
        return text[:pos] + text[pos + 1:]
    return text[:pos] + rng.choice(alphabet) + text[pos + 1:]


def moore_classes(trans: np.ndarray, accepting: np.ndarray) -> int:
    """Number of Nerode classes of a complete DFA by plain Moore refinement (slow, simple)."""
    labels = accepting.astype(np.int64)
    while True:
        signature = np.concatenate([labels[:, None], labels[trans]], axis=1)
        _, new = np.unique(signature, axis=0, return_inverse=True)
        new = new.reshape(-1)
        if len(np.unique(new)) == len(np.unique(labels)):
            return len(np.unique(new))
        labels = new


def run_cli(*args: str, cwd: Path | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
    """`grammarc ARGS...` as a real subprocess (`input` goes to its stdin)."""
    return subprocess.run([sys.executable, "-m", "grammarc", *args], capture_output=True,
                          text=True, cwd=cwd, input=input)


def assert_clean_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    """Exit code 1 and one line `error: ...` holding `fragment` on stderr, no traceback."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr
