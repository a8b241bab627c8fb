"""The generic logits processor on numpy and torch: state tracking across calls (batches,
reordered beams, padding after EOS), exact masks, budget-aware endings, errors.

The grammar is `b(a|bb)*` over the tokens EOS (0), 'a' (1), 'b' (2): states 1 (start),
2 (accepting), 3 (after an odd 'b'). Expected states come from walking `next_state` by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import EOS, a_up_to_3, b_then_a_or_bb

from grammarc.integrations import GrammarProcessor
from grammarc.integrations.processor import BudgetError

torch = pytest.importorskip("torch")

PROMPT = [[9, 9], [8, 7]]   # prompt ids are never walked, whatever they are
BACKENDS = [np.array, torch.tensor]


def walked(grammar, tokens: list[int]) -> int:
    """The state after `tokens`, EOS ending the walk (the oracle)."""
    state = grammar.initial_state
    for t in tokens:
        if t == EOS:
            break
        state = grammar.next_state(state, t)
    return state


def kept(scores) -> list[list[int]]:
    """1 where a logit survived, per row."""
    return (np.asarray(scores) > -np.inf).astype(int).tolist()


@pytest.mark.parametrize("make", BACKENDS)
def test_states_and_masks_follow_each_row(make):
    g = b_then_a_or_bb()
    p = GrammarProcessor(g)
    ones = make(np.ones((2, 3), np.float32))
    steps = [([], [[0, 0, 1], [0, 0, 1]], [1, 1]),
             ([2, 2], [[1, 1, 1], [1, 1, 1]], [2, 2]),
             ([1, 2], [[1, 1, 1], [0, 0, 1]], [2, 3]),
             ([EOS, 2], [[1, 0, 0], [1, 1, 1]], [2, 2]),   # row 0 finished: EOS only
             ([1, EOS], [[1, 0, 0], [1, 0, 0]], [2, 2])]   # padding (token 1) is ignored
    ids = np.array(PROMPT)
    for new, mask, states in steps:
        if new:
            ids = np.concatenate([ids, np.array(new)[:, None]], axis=1)
        out = p.process_logits(make(ids), ones)
        assert type(out) is type(ones) and out.shape == ones.shape
        assert kept(out) == mask
        assert np.asarray(p.update(make(ids))).tolist() == states
    assert p.prompt_length == 2


@pytest.mark.parametrize("make", BACKENDS)
def test_reordered_and_unrelated_rows_are_walked_again(make):
    """Beam search hands rows back in any order, duplicated; every row's state must still be
    the state after its own tokens."""
    g = b_then_a_or_bb()
    rng = np.random.default_rng(0)
    p = GrammarProcessor(g)
    ids = np.full((4, 3), 5)
    p.update(make(ids))
    for step in range(12):
        parents = rng.integers(0, len(ids), len(ids))       # beams: each row extends some row
        if step == 6:
            ids[2, 3:] = rng.integers(0, 3, ids.shape[1] - 3)  # and one that extends none
        ids = np.concatenate([ids[parents], rng.integers(0, 3, (len(ids), 1))], axis=1)
        states = np.asarray(p.update(make(ids))).tolist()
        assert states == [walked(g, row[3:].tolist()) for row in ids], step


@pytest.mark.parametrize("make", BACKENDS)
def test_budget_makes_every_step_end_in_time(make):
    """`a{1,3}` over EOS, 'a', 'aa', 'b' with 3 new tokens, then with 2."""
    g = a_up_to_3()
    ones = make(np.ones(4, np.float32))
    p = GrammarProcessor(g, max_new_tokens=3)
    masks = []
    for ids in ([7], [7, 1], [7, 1, 1]):
        masks.append(kept(p(make(np.array(ids)), ones)))
    assert masks == [[0, 1, 1, 0], [1, 1, 1, 0], [1, 0, 0, 0]]   # the last token must be EOS
    p = GrammarProcessor(g, max_new_tokens=2)
    assert kept(p(make(np.array([7])), ones)) == [0, 1, 1, 0]
    assert kept(p(make(np.array([7, 2])), ones)) == [1, 0, 0, 0]
    assert p.update(make(np.array([7, 2, EOS]))) == 3 and g.is_accepting(3)


def test_no_text_fits_the_budget():
    with pytest.raises(BudgetError, match="no text of the grammar fits in 1 new tokens: the "
                                          "shortest takes 1 tokens and an EOS token"):
        GrammarProcessor(b_then_a_or_bb(), max_new_tokens=1)
    assert GrammarProcessor(b_then_a_or_bb(), max_new_tokens=2).max_new_tokens == 2


@pytest.mark.parametrize("make", BACKENDS)
def test_rows_off_the_grammar_may_only_end_and_keep_their_eos_logit(make):
    g = b_then_a_or_bb()
    p = GrammarProcessor(g)
    logits = make(np.array([[0.5, 0.25, 0.125]] * 2, np.float32))
    p(make(np.array([[1], [1]])), logits)
    out = p(make(np.array([[1, 1], [1, 2]])), logits)   # 'a' is forbidden at the start
    assert np.asarray(p.update(make(np.array([[1, 1], [1, 2]])))).tolist() == [0, 2]
    assert np.asarray(out).tolist() == [[0.5, -np.inf, -np.inf], [0.5, 0.25, 0.125]]


def test_one_sequence_as_in_llama_cpp():
    """llama-cpp-python passes the whole sequence (int32, 1-D) and one row of scores."""
    g = b_then_a_or_bb()
    p = GrammarProcessor(g)
    scores = np.zeros(3, np.float32)
    out = p(np.array([4, 4, 4], np.intc), scores)
    assert out.shape == (3,) and kept(out) == [0, 0, 1] and scores.tolist() == [0, 0, 0]
    assert kept(p(np.array([4, 4, 4, 2, 2], np.intc), scores)) == [0, 0, 1]  # walked: 2 tokens
    assert p.update(np.array([4, 4, 4, 2, 2, 2], np.intc)) == 2


def test_misuse_is_a_clear_error():
    p = GrammarProcessor(b_then_a_or_bb())
    p.update(np.zeros((2, 5), np.int64))
    with pytest.raises(ValueError, match="fewer than the prompt's 5: call reset"):
        p.update(np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match="3 rows of logits but 2 sequences"):
        p(np.zeros((2, 6), np.int64), np.zeros((3, 3), np.float32))
    p.reset()
    assert p.update(np.zeros((1, 4), np.int64)).tolist() == [1]
