"""Runtime helpers beyond masking: budget-aware masks and sampling, allowed characters, counts.

Small hand-written tables are checked against brute force over every token sequence; the
character sets of compiled regexes against walking each character through the byte DFA.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from helpers import EOS, a_up_to_3, b_then_a_or_bb

import grammarc
from grammarc.errors import ArtifactError

try:
    import torch
except ImportError:  # the numpy half still runs
    torch = None


def brute_force_mask(grammar: grammarc.Grammar, state: int, budget: int) -> np.ndarray:
    """Tokens that begin some allowed sequence of at most `budget` tokens ending with EOS."""
    vocab = grammar.vocab_size
    mask = np.zeros(vocab, bool)
    for length in range(1, budget + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            if seq[-1] != EOS or EOS in seq[:-1] or mask[seq[0]]:
                continue
            s = state
            for t in seq:
                s = grammar.next_state(s, t)
                if not s:
                    break
            mask[seq[0]] |= bool(s)
    return mask


@pytest.mark.parametrize("make", [a_up_to_3, b_then_a_or_bb])
def test_mask_within_is_exactly_the_brute_force_set(make):
    grammar = make()
    for state in range(grammar.num_states):
        for budget in range(6):
            expected = brute_force_mask(grammar, state, budget)
            got = grammar.mask_within(state, budget)
            assert np.array_equal(got, expected), (state, budget, got, expected)
            assert np.array_equal(grammar.allowed_within(state, budget), np.flatnonzero(expected))
        assert np.array_equal(grammar.mask_within(state, 10**6), grammar.mask(state))


def test_mask_within_examples():
    g = a_up_to_3()
    assert list(g.allowed_within(1, 1)) == []          # no room for a token and EOS
    assert list(g.allowed_within(1, 2)) == [1, 2]      # 'a' or 'aa', then EOS
    assert list(g.allowed_within(2, 1)) == [EOS]
    assert list(g.allowed_within(2, 2)) == [EOS, 1, 2]
    assert list(g.allowed_within(4, 5)) == [EOS]
    h = b_then_a_or_bb()
    assert list(h.allowed_within(1, 1)) == []
    assert list(h.allowed_within(1, 2)) == [2]
    assert list(h.allowed_within(2, 1)) == [EOS]       # EOS shares its class with 'a'
    assert list(h.allowed_within(2, 2)) == [EOS, 1]    # 'bb' needs two tokens and EOS
    assert list(h.allowed_within(2, 3)) == [EOS, 1, 2]


@pytest.mark.parametrize("make", [a_up_to_3, b_then_a_or_bb])
def test_apply_with_a_budget_keeps_exactly_mask_within(make):
    """numpy and torch, one row and a batch of every state: the kept logits are `mask_within`."""
    grammar = make()
    states = np.arange(grammar.num_states)
    logits = np.arange(1.0, 1 + grammar.num_states * (grammar.vocab_size + 2)).reshape(
        grammar.num_states, -1).astype(np.float32)     # two padding columns
    for budget in range(6):
        expected = np.full(logits.shape, -np.inf, np.float32)
        for s in states:
            keep = np.flatnonzero(grammar.mask_within(int(s), budget))
            expected[s, keep] = logits[s, keep]
        np.testing.assert_array_equal(grammar.apply(logits, states, budget=budget), expected)
        np.testing.assert_array_equal(grammar.apply(logits[2], 2, budget=budget), expected[2])
        if torch is not None:
            out = grammar.apply(torch.from_numpy(logits), torch.from_numpy(states), budget=budget)
            np.testing.assert_array_equal(out.numpy(), expected)


def test_apply_with_a_budget_examples():
    """`b(a|bb)*` over EOS, 'a', 'b' (columns) in states 1 (start), 2 (accepting), 3 (after an
    odd b): the masks a generation sees as its budget shrinks."""
    g = b_then_a_or_bb()
    ones = np.ones((3, 3), np.float32)
    kept = lambda budget: (g.apply(ones, [1, 2, 3], budget=budget) == 1).astype(int).tolist()  # noqa: E731
    assert kept(3) == kept(None) == [[0, 0, 1], [1, 1, 1], [0, 0, 1]]
    assert kept(2) == [[0, 0, 1], [1, 1, 0], [0, 0, 1]]   # 'b' in 2 needs 'b' and EOS after it
    assert kept(1) == [[0, 0, 0], [1, 0, 0], [0, 0, 0]]   # room for EOS only
    assert kept(0) == [[0, 0, 0]] * 3
    if torch is not None:
        out = g.apply(torch.ones(3, 3), torch.tensor([1, 2, 3]), budget=2)
        assert (out == 1).int().tolist() == kept(2)


def test_budgets_on_a_real_table(smollm2):
    """On SmolLM2's table, torch's batched budget masks equal `mask_within` state by state."""
    grammar = grammarc.compile(r'\{"n": \d{1,3}(, "s": "[a-z]{2,5}")?\}', smollm2, kind="regex")
    states = np.arange(grammar.num_states)
    for budget in (1, 2, 4, 7, 12):
        expected = np.stack([grammar.mask_within(int(s), budget) for s in states])
        if torch is not None:
            out = grammar.apply(torch.zeros(len(states), grammar.vocab_size),
                                torch.from_numpy(states), budget=budget)
            assert np.array_equal(out.numpy() == 0, expected), budget
        out = grammar.apply(np.zeros((len(states), grammar.vocab_size), np.float32), states,
                            budget=budget)
        assert np.array_equal(out == 0, expected), budget


def _walk(grammar: grammarc.Grammar, tokens: list[int]) -> int:
    state = grammar.initial_state
    for t in tokens:
        state = grammar.next_state(state, t)
    return state


@pytest.mark.parametrize("make,max_tokens,strings", [
    (a_up_to_3, 4, {(1,), (2,), (1, 1), (1, 2), (2, 1), (1, 1, 1)}),
    (a_up_to_3, 2, {(1,), (2,)}),
    (b_then_a_or_bb, 3, {(2,), (2, 1)}),
    (b_then_a_or_bb, 4, {(2,), (2, 1), (2, 1, 1), (2, 2, 2)}),
])
def test_sampling_reaches_exactly_the_strings_that_fit(make, max_tokens, strings):
    grammar = make()
    rng = np.random.default_rng(7)
    seen = Counter()
    for _ in range(400):
        tokens = grammar.sample_tokens(max_tokens, rng)
        assert len(tokens) <= max_tokens and tokens[-1] == EOS and EOS not in tokens[:-1]
        assert grammar.is_accepting(_walk(grammar, tokens))
        seen[tuple(tokens[:-1])] += 1
    assert set(seen) == strings


def test_sampling_is_seeded_and_says_when_nothing_fits():
    grammar = a_up_to_3()
    first = [grammar.sample_tokens(4, np.random.default_rng(3)) for _ in range(5)]
    again = [grammar.sample_tokens(4, np.random.default_rng(3)) for _ in range(5)]
    assert first == again
    assert grammar.sample_tokens(1, np.random.default_rng(0)) is None
    assert b_then_a_or_bb().sample_tokens(2, np.random.default_rng(0)) == [2, EOS]


def test_sampling_refuses_a_table_whose_distances_lie():
    lying = a_up_to_3(min_tokens=[-1, 0, 0, 0, 0])  # the start state claims to accept
    with pytest.raises(ArtifactError, match="disagrees"):
        lying.sample_tokens(1, np.random.default_rng(0))


def test_allowed_counts_match_masks(smollm2):
    grammar = grammarc.compile(r"[a-c]{2}x|\d+", smollm2, kind="regex")
    counts = grammar.allowed_counts()
    assert list(counts) == [int(grammar.mask(s).sum()) for s in range(grammar.num_states)]


@pytest.mark.parametrize("pattern,prefixes", [
    (r"[ぁ-ゟ]{1,3}|x[^a-c]", ["", "x", "ぁ"]),
    (r"(?i)é|ü+|😀z|[\u07ff-\u0801]", ["", "ü"]),
    (r"[^eE]{1,4}", ["", "ab"]),
    (r"[\ud7ff\ue000\U0010ffff\U00010000]", [""]),
])
def test_allowed_characters_agree_with_the_byte_dfa(smollm2, pattern, prefixes):
    grammar = grammarc.compile(pattern, smollm2, kind="regex")
    for prefix in prefixes:
        state = grammar.walk_bytes(prefix.encode())
        assert state
        ranges = grammar.allowed_characters(state)
        assert all(lo <= hi for lo, hi in ranges)
        assert all(a[1] + 1 < b[0] for a, b in zip(ranges, ranges[1:]))  # sorted and merged
        edges = {c + d for lo, hi in ranges for c in (lo, hi) for d in (-1, 0, 1)}
        probes = set(range(0x800)) | set(range(0x3000, 0x3100)) | edges | {0xD7FF, 0xE000, 0x1F600, 0x10FFFF}
        for cp in probes:
            if not 0 <= cp <= 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                continue
            inside = any(lo <= cp <= hi for lo, hi in ranges)
            assert inside == bool(grammar.walk_bytes(chr(cp).encode(), state)), (prefix, hex(cp))
