"""Runtime helpers beyond masking: budget-aware masks and sampling, allowed characters, counts.

Small hand-written tables are checked against brute force over every token sequence; the
character sets of compiled regexes against walking each character through the byte DFA.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

import grammarc
from grammarc.errors import ArtifactError

EOS = 0


def table_grammar(dense: np.ndarray, accepting: list[int], token_class: list[int],
                  min_tokens: list[int] | None = None) -> grammarc.Grammar:
    """A factored `Grammar` from a dense table (column 0 is EOS) and a token-class assignment;
    min_tokens_to_accept by repeated relaxation unless given."""
    num_states, vocab = dense.shape
    classes = np.asarray(token_class)
    for c in set(token_class):
        cols = dense[:, classes == c]
        assert (cols == cols[:, :1]).all(), "tokens of a class must have equal columns"
    entries = [[(c, int(dense[s, list(classes).index(c)]) - s) for c in sorted(set(token_class))
                if c and dense[s, list(classes).index(c)]] for s in range(num_states)]
    row_ptr = np.concatenate([[0], np.cumsum([len(e) for e in entries])])
    flat = [pair for e in entries for pair in e]
    is_accepting = np.isin(np.arange(num_states), accepting)
    distances = np.where(is_accepting, 0, -1)
    for _ in range(num_states):
        for s in range(1, num_states):
            steps = [distances[n] + 1 for n in dense[s, 1:] if n and distances[n] >= 0]
            if distances[s] < 0 and steps:
                distances[s] = min(steps)
    metadata = {"kind": "regex", "tokenizer": {"name": "toy", "fingerprint": "", "vocab_size": vocab,
                                               "eos_token_ids": [EOS]}}
    return grammarc.Grammar(
        metadata, token_class=classes, state_row=np.arange(num_states), row_ptr=row_ptr,
        row_class=[c for c, _ in flat], row_delta=[d for _, d in flat], accepting=is_accepting,
        min_tokens_to_accept=distances if min_tokens is None else min_tokens, byte_ptr=np.zeros(num_states + 1, np.int64),
        byte_ranges=np.zeros((0, 2), np.int64), byte_next=np.zeros(0, np.int64))


def a_up_to_3(min_tokens: list[int] | None = None) -> grammarc.Grammar:
    """`a{1,3}` over tokens EOS, 'a', 'aa', 'b'; states count the a's (1 = none yet)."""
    dense = np.zeros((5, 4), np.int64)
    dense[1, [1, 2]] = [2, 3]
    dense[2, [0, 1, 2]] = [2, 3, 4]
    dense[3, [0, 1]] = [3, 4]
    dense[4, [0]] = [4]
    return table_grammar(dense, [2, 3, 4], [1, 2, 3, 4], min_tokens)


def b_then_a_or_bb() -> grammarc.Grammar:
    """`b(a|bb)*` over tokens EOS, 'a', 'b': 'a' loops in the one accepting state exactly like
    EOS does, so the two share a token class."""
    dense = np.zeros((4, 3), np.int64)
    dense[1, [2]] = [2]
    dense[2, [0, 1, 2]] = [2, 2, 3]
    dense[3, [2]] = [2]
    return table_grammar(dense, [2], [1, 1, 2])


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
