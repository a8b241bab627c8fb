"""The runtime API serving engines use: packed bitmasks, forced continuations (jump-forward)
and the per-sequence matcher with rollback, checked against masks and brute-force walks on
flat grammars and on grammars whose machines call each other."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import grammarc
from grammarc.runtime import Matcher, apply_bitmask, bitmask_width, unpack_bitmask
from grammarc.runtime.calls import CallGrammar

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def grammars(smollm2):
    """A flat regex, a flat schema, and two grammars with calls (recursive schema, GBNF)."""
    out = {
        "date": grammarc.compile(r"\d{4}-\d{2}-\d{2}", smollm2, kind="regex"),
        "person": grammarc.load(ROOT / "artifacts" / "person.safetensors"),
        "tree": grammarc.compile(ROOT / "grammars" / "tree.schema.json", smollm2),
        "json-value": grammarc.compile(ROOT / "grammars" / "json-value.gbnf", smollm2),
    }
    assert isinstance(out["tree"], CallGrammar) and isinstance(out["json-value"], CallGrammar)
    assert not isinstance(out["person"], CallGrammar)
    return out


def _visited_states(grammar, rng: random.Random, walks: int = 12, length: int = 30) -> list[int]:
    """States met on random walks through the allowed tokens (EOS excluded)."""
    eos = set(grammar.eos_token_ids)
    seen = [grammar.initial_state]
    for _ in range(walks):
        state = grammar.initial_state
        for _ in range(length):
            ids = [t for t in np.flatnonzero(grammar.mask(state)).tolist() if t not in eos]
            if not ids:
                break
            state = grammar.next_state(state, rng.choice(ids))
            seen.append(state)
    return seen


@pytest.mark.parametrize("name", ["date", "person", "tree", "json-value"])
def test_bitmask_packs_the_mask_bit_for_bit(grammars, name):
    grammar = grammars[name]
    states = _visited_states(grammar, random.Random(1))
    width = bitmask_width(grammar.vocab_size)
    out = np.full((len(states), width + 3), -1, np.int32)  # an engine's wider, dirty buffer
    budgets = [random.Random(s).randrange(1, 12) for s in range(len(states))]
    grammar.fill_bitmask(states, out, budget=budgets)
    for row, (state, budget) in enumerate(zip(states, budgets)):
        expected = grammar.mask_within(state, budget)
        assert (unpack_bitmask(out[row], grammar.vocab_size) == expected).all()
        assert not out[row, width:].any()
        # bit t of word t // 32, least significant first
        ids = np.flatnonzero(expected)
        assert all((int(out[row, t // 32]) >> (t % 32)) & 1 for t in ids.tolist())
        single = grammar.bitmask(state)
        assert single.dtype == np.int32 and single.shape == (width,)
        assert (unpack_bitmask(single, grammar.vocab_size) == grammar.mask(state)).all()


def test_fill_bitmask_into_torch_and_apply_bitmask_agree_with_apply(grammars):
    grammar = grammars["person"]
    states = _visited_states(grammar, random.Random(2))[:16]
    width = bitmask_width(grammar.vocab_size)
    buffer = torch.zeros((len(states), width), dtype=torch.int32)
    grammar.fill_bitmask(torch.tensor(states), buffer, budget=20)
    logits = torch.randn(len(states), grammar.vocab_size + 64)  # padded columns, as models do
    expected = grammar.apply(logits, torch.tensor(states), budget=20)
    assert torch.equal(apply_bitmask(logits, buffer), expected)
    as_numpy = apply_bitmask(logits.numpy(), buffer.numpy())
    assert np.array_equal(as_numpy, expected.numpy())
    one = apply_bitmask(logits[0].numpy(), grammar.bitmask(states[0]))
    assert np.array_equal(one, grammar.apply(logits[0].numpy(), states[0]))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
def test_apply_bitmask_is_a_masked_fill_of_each_bit(dtype):
    """Every byte value, logits that are NaN, infinite or signed zeros, a vocabulary past the
    words and short of them, numpy (where it has the dtype) and torch, in place and not,
    against bits read one by one with Python ints."""
    rng = np.random.default_rng(7)
    for rows, vocab, width in [(4, 2048, 64), (3, 70, 2), (2, 100, 4)]:
        words = rng.integers(-2**31, 2**31, size=(rows, width)).astype(np.int32)
        every = np.arange(256, dtype=np.uint8).view(np.int32)[:words.size]  # every byte value
        words.reshape(-1)[:len(every)] = every
        logits = torch.randn(rows, vocab).to(getattr(torch, dtype))
        logits[0, :5] = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0])
        expected = logits.clone()
        for row, t in np.ndindex(rows, vocab):
            if t >= 32 * width or not (int(words[row, t // 32]) >> (t % 32)) & 1:
                expected[row, t] = float("-inf")
        for inplace in (False, True):
            given = logits.clone()
            with torch.inference_mode():  # as engines call it
                out = apply_bitmask(given, torch.from_numpy(words), inplace=inplace)
            assert (out is given) == inplace
            assert torch.equal(out.isnan(), expected.isnan())
            assert torch.equal(out.nan_to_num(), expected.nan_to_num())
            assert torch.equal(out.signbit(), expected.signbit())
            one = apply_bitmask(logits[1].clone(), words[1])
            assert torch.equal(one.nan_to_num(), expected[1].nan_to_num())
        if dtype != "bfloat16":
            out = apply_bitmask(logits.numpy(), words)
            assert np.array_equal(out, expected.numpy(), equal_nan=True)
            assert np.array_equal(np.signbit(out), np.signbit(expected.numpy()))


def test_fill_bitmask_rejects_what_it_cannot_fill(grammars):
    grammar = grammars["date"]
    with pytest.raises(ValueError, match="int32 array of shape"):
        grammar.fill_bitmask([1, 1], np.zeros((1, bitmask_width(grammar.vocab_size)), np.int32))
    with pytest.raises(ValueError, match="int32 array of shape"):
        grammar.fill_bitmask([1], np.zeros((1, bitmask_width(grammar.vocab_size)), np.int64))
    with pytest.raises(ValueError, match="words holds"):
        grammar.fill_bitmask([1], np.zeros((1, 3), np.int32))
    with pytest.raises(ValueError, match="out of range"):
        grammar.fill_bitmask([10**6], np.zeros((1, bitmask_width(grammar.vocab_size)), np.int32))
    with pytest.raises(TypeError):
        grammar.fill_bitmask([1.5], np.zeros((1, bitmask_width(grammar.vocab_size)), np.int32))


@pytest.mark.parametrize("name", ["date", "person", "tree", "json-value"])
def test_forced_text_is_what_every_continuation_begins_with(grammars, smollm2, name):
    grammar = grammars[name]
    token_bytes = smollm2.token_bytes
    eos = set(grammar.eos_token_ids)
    for state in _visited_states(grammar, random.Random(3), walks=6)[:60]:
        forced = grammar.forced(state)
        text = forced.text
        # every allowed token agrees with the forced text as far as both go
        for token in np.flatnonzero(grammar.mask(state)).tolist():
            if token in eos:
                assert not text  # ending is a choice: nothing is forced
                continue
            data = token_bytes[token]
            assert data[:len(text)] == text[:len(data)], (state, data, text)
        # and the text is maximal: past it the text may end or two bytes may follow
        at = grammar.walk_bytes(text, state)
        assert at != 0
        following = [b for b in range(256) if grammar.walk_bytes(bytes([b]), at)]
        assert grammar.is_accepting(at) or len(following) != 1 or len(text) == 4096
        # forced tokens: each the only one allowed, spelling a prefix of the forced text
        at = state
        for token in forced.tokens:
            assert np.flatnonzero(grammar.mask(at)).tolist() == [token]
            at = grammar.next_state(at, token)
        spelled = b"".join(token_bytes[t] for t in forced.tokens)
        assert spelled[:len(text)] == text[:len(spelled)]


def test_forced_examples(grammars):
    person = grammars["person"]
    assert person.forced(person.initial_state).text == b'{"name": "'
    date = grammars["date"]  # flat: table states are byte-DFA states
    assert date.forced(date.walk_bytes(b"2024")).text == b"-"
    assert date.forced(date.walk_bytes(b"2024-1")) == grammarc.runtime.Forced(b"", ())
    tree = grammars["tree"]
    assert tree.forced(tree.walk_bytes(b'{"value": 1,')).text == b' "children": ['
    nested = tree.walk_bytes(b'{"value": 12, "children": [{"value": 3, "children": [{')
    assert tree.forced(nested).text == b'"value": '
    assert date.forced(0) == grammarc.runtime.Forced(b"", ())


@pytest.mark.parametrize("name", ["person", "tree"])
def test_matcher_agrees_with_masks_and_rolls_back(grammars, name):
    grammar = grammars[name]
    rng = random.Random(4)
    for _ in range(5):
        matcher = Matcher(grammar, max_tokens=40)
        history = []
        while not matcher.is_finished():
            mask = matcher.mask()
            assert np.array_equal(mask, grammar.mask_within(matcher.state, matcher.budget))
            refused = rng.choice(np.flatnonzero(~mask).tolist())
            assert not matcher.accept(refused)
            assert matcher.num_tokens == len(history)  # nothing changed
            token = rng.choice(np.flatnonzero(mask).tolist())
            history.append((matcher.state, token))
            assert matcher.accept(token)
        assert matcher.is_accepting() and matcher.num_tokens <= 40
        assert np.flatnonzero(matcher.mask()).tolist() == sorted(grammar.eos_token_ids)
        assert not matcher.accept(history[0][1])
        assert matcher.accept(grammar.eos_token_ids[0])  # padding a finished row
        matcher.rollback(1)
        # roll back speculative tokens one by one, then accept them again at once
        count = min(5, len(history))
        matcher.rollback(count)
        assert not matcher.is_finished() and matcher.state == history[-count][0]
        assert matcher.accept([token for _, token in history[-count:]])
        assert matcher.is_finished()
        # all or nothing: a good token followed by a refused one changes nothing
        matcher.rollback(count)
        state = matcher.state
        assert not matcher.accept([history[-count][1], -1])
        assert matcher.state == state and matcher.num_tokens == len(history) - count
    with pytest.raises(ValueError, match="cannot roll back"):
        Matcher(grammar).rollback(1)


@pytest.mark.parametrize("name", ["date", "person", "tree", "json-value"])
def test_matcher_accepts_by_its_bitmask_what_its_mask_allows(grammars, name):
    """A serving engine's step: the row's bitmask, then `accept`, which tests the token's bit
    of that bitmask (no boolean mask is built); every answer as the grammar's masks say."""
    grammar = grammars[name]
    rng = random.Random(6)
    eos = grammar.eos_token_ids[0]
    row = np.full(bitmask_width(grammar.vocab_size) + 2, -1, np.int32)
    for _ in range(4):
        matcher = Matcher(grammar, max_tokens=30)
        while not matcher.is_finished():
            matcher.fill_bitmask(row)
            bits = unpack_bitmask(row, grammar.vocab_size)
            assert np.array_equal(bits, grammar.mask_within(matcher.state, matcher.budget))
            assert not row[-2:].any()
            allowed = np.flatnonzero(bits).tolist()
            tried = rng.sample(range(grammar.vocab_size), 40) + allowed[:8] + [eos]
            for token in tried:
                assert matcher.fork().accept(token) == bits[token], token
            assert matcher.accept(rng.choice(allowed))
        matcher.fill_bitmask(row)
        assert np.flatnonzero(unpack_bitmask(row, grammar.vocab_size)).tolist() == \
            sorted(grammar.eos_token_ids)


def test_matcher_budget_ends_every_walk_in_time(grammars):
    grammar = grammars["tree"]
    rng = random.Random(5)
    need = grammar.tokens_to_accept(grammar.initial_state) + 1
    for budget in (need, need + 3, 25):
        matcher = Matcher(grammar, max_tokens=budget)
        while not matcher.is_finished():
            assert matcher.accept(rng.choice(np.flatnonzero(matcher.mask()).tolist()))
        assert matcher.num_tokens <= budget
    matcher = Matcher(grammar, max_tokens=3)
    assert matcher.fill_bitmask(np.zeros(bitmask_width(grammar.vocab_size), np.int32)).any() \
        == bool(need <= 3)
