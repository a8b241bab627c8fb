"""Expression trees compare by structure: equal trees built apart are equal, and a comparison
visits each pair of shared subtrees once (the sets of keys of an object in any order share
their rests: 2^n nodes, n! paths; comparing by paths did not end)."""

from __future__ import annotations

import pytest

from grammarc.automaton.expr import Alt, CharSet, Concat, alt, concat


def _lattice(depth: int, last: int) -> Concat | Alt:
    """Nodes that share their rests: node k is `ak` followed by node k+1, or `bk` followed by
    node k+1 (2^depth paths, 2 * depth nodes); built afresh on every call."""
    rest = concat(CharSet(((last, last),)))
    for k in range(depth):
        letter_a, letter_b = CharSet(((97, 97),)), CharSet(((98 + k, 98 + k),))
        rest = alt(concat(letter_a, rest), concat(letter_b, rest))
    return rest


def test_equal_trees_built_apart_compare_once_per_pair_of_nodes(monkeypatch):
    first, second, third = _lattice(16, 120), _lattice(16, 120), _lattice(16, 121)
    assert first is not second and hash(first) == hash(second)
    compared = []
    for kind in (Concat, Alt):
        original = kind.__eq__

        def counted(self, other, original=original):
            compared.append(self)
            return original(self, other)
        monkeypatch.setattr(kind, "__eq__", counted)
    assert first == second
    assert len(compared) <= 4 * 16 + 4  # not 2^16
    compared.clear()
    assert first != third  # another last character: another hash, known at once
    assert len(compared) <= 1


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_trees_compare_by_structure(depth):
    assert _lattice(depth, 120) == _lattice(depth, 120)
    assert _lattice(depth, 120) != _lattice(depth + 1, 120)
    assert _lattice(depth, 120) != _lattice(depth, 121)
