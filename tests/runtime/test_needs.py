"""`call_tables.Needs.add` against the set it stands for: the tokens whose need is at most a
limit (all of them without one, never-finishing ones included), for token sets written one
by one and for those past a sixteenth of the vocabulary, cut by their rank (issue 40)."""

from __future__ import annotations

import numpy as np
import pytest

from grammarc.runtime.call_tables import NEVER, Needs

VOCAB = 4096


def needs_of(size: int, levels: int, never: int, seed: int) -> tuple[Needs, dict[int, int]]:
    """A `Needs` of `size` random tokens, `never` of them never finishing, and its brute-force
    view: token -> need (-1: never)."""
    rng = np.random.default_rng(seed)
    tokens = rng.choice(VOCAB, size, replace=False)
    needs = rng.integers(0, levels, size)
    needs[:never] = NEVER
    order = np.lexsort((tokens, needs))
    tokens, needs = tokens[order].astype(np.int32), needs[order].astype(np.int32)
    want = {int(t): (-1 if n == NEVER else int(n)) for t, n in zip(tokens, needs)}
    return Needs(tokens, needs, VOCAB), want


@pytest.mark.parametrize("size", [1, 40, VOCAB // 16 + 1, VOCAB // 2, VOCAB])
@pytest.mark.parametrize("never", [0, 1, 17])
def test_add_allows_exactly_the_tokens_within_the_limit(size: int, never: int) -> None:
    never = min(never, size)
    needs, want = needs_of(size, levels=9, never=never, seed=size * 31 + never)
    base = np.random.default_rng(size).random(VOCAB) < 0.1  # tokens allowed already
    # all of them first written one by one, then (past a sixteenth) by the rank a cut made
    for limit in (None, -1, 0, 3, 8, 100, None):
        mask = base.copy()
        needs.add(mask, limit)
        added = {t for t, need in want.items()
                 if limit is None or 0 <= need <= limit}
        expected = base.copy()
        expected[list(added)] = True
        assert np.array_equal(mask, expected), (size, never, limit)
