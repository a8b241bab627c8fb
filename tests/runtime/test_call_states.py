"""States of grammars with calls held by the sequence (issue 40): `CallState` values with
persistent stacks, masks and budget masks cached by (table state, top of stack), one grammar
shared by threads, memory that follows the live sequences, forks and rollbacks, and states
carried to another process as ints."""

from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import grammarc
from grammarc import CallState, Matcher
from helpers import random_token_walk

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def grammars(smollm2) -> dict[str, grammarc.Grammar]:
    """A recursive schema, any JSON value (a root that calls itself) and a counted string
    inside a recursive list."""
    counted = {"type": "array", "items": {"anyOf": [
        {"type": "string", "minLength": 140, "maxLength": 150}, {"$ref": "#"}]}}
    return {"tree": grammarc.compile(ROOT / "grammars" / "tree.schema.json", smollm2),
            "any": grammarc.compile_json_schema({}, smollm2),
            "counted": grammarc.compile_json_schema(counted, smollm2)}


OPENINGS = {"tree": b'{"value": 1, "children": [' * 30,
            "any": b'[{"a": ' * 40 + b'[1, "x", ',
            "counted": b'[[["' + b"x" * 135}


@pytest.mark.parametrize("name", list(OPENINGS))
def test_budget_masks_are_exactly_the_brute_force_set(grammars, name):
    """`mask(state, budget=b)` allows exactly the tokens of `mask(state)` whose next state can
    still finish in time (`tokens_to_accept(next) + 2 <= b`), and EOS when accepting and
    b >= 1: the definition, token by token, against the cached vectorised masks."""
    grammar = grammars[name]
    rng = np.random.default_rng(1)
    eos = set(grammar.eos_token_ids)
    for i, state in enumerate(random_token_walk(grammar, rng, 14, OPENINGS[name])):
        plain = np.flatnonzero(grammar.mask(state)).tolist()
        nexts = {t: grammar.tokens_to_accept(grammar.next_state(state, t))
                 for t in plain if t not in eos}
        need = grammar.tokens_to_accept(state)
        for budget in {0, 1, 2, 3, need, need + 1, need + 2, need + 5, 1000}:
            expected = {t for t, n in nexts.items() if 0 <= n and n + 2 <= budget}
            if grammar.is_accepting(state) and budget >= 1:
                expected |= eos
            got = np.flatnonzero(grammar.mask(state, budget=budget)).tolist()
            assert set(got) == expected, (name, i, budget, state)
            bits = grammar.bitmask(state, budget=budget)
            assert np.array_equal(np.flatnonzero(np.unpackbits(
                bits.view(np.uint8), bitorder="little")[:grammar.vocab_size]), got)


@pytest.mark.parametrize("name", list(OPENINGS))
def test_masks_kept_on_frames_equal_masks_built_afresh(grammars, name, tmp_path):
    """A state's mask or bitmask asked again, by budgets in any order and both kinds in
    turn, is read from where its top frame (or, with an empty stack, the grammar) kept it:
    the same tokens as on a second grammar object, where the state is read back from its
    ints (new frames, no memo). Steps of the walk meet their table states again over the
    same frames (the items of an array), with and without a budget that cuts."""
    grammar = grammars[name]
    grammar.save(tmp_path / "g.safetensors")
    fresh = grammarc.load(tmp_path / "g.safetensors")
    rng = np.random.default_rng(5)
    for i, state in enumerate(random_token_walk(grammar, rng, 40, OPENINGS[name])):
        need = grammar.tokens_to_accept(state)
        budgets = [None, 1000, 0, 1, need, need + 1, need + 2, need + 3, 2]
        for budget in [*budgets, *reversed(budgets)]:
            want = fresh.mask(fresh.state_from_ints(grammar.state_to_ints(state)),
                              budget=budget)
            assert np.array_equal(grammar.mask(state, budget=budget), want), (name, i, budget)
            bits = np.unpackbits(grammar.bitmask(state, budget=budget).view(np.uint8),
                                 bitorder="little")[:grammar.vocab_size]
            assert np.array_equal(bits.astype(bool), want), (name, i, budget)


def test_states_are_values_with_shared_stacks(grammars, smollm2):
    grammar = grammars["any"]
    a = grammar.walk_bytes(b"[[[[")
    b = grammar.next_state(grammar.walk_bytes(b"[[["), smollm2.token_bytes.index(b"["))
    assert a == b and hash(a) == hash(b) and a is not b and a.depth == 3
    assert {a: 1}[b] == 1 and grammar.stack(a) == (a.table_state, a.stack)
    assert grammar.dead_state == CallState(0) and not grammar.dead_state and a
    assert grammar.walk_bytes(b"[]]") == grammar.dead_state
    deep = grammar.walk_bytes(b"[" * 5000)
    assert deep.depth == 4999 and "..." in repr(deep)
    # deeper states share the frames below: one frame more each
    assert grammar.walk_bytes(b"[", deep).frames.below is deep.frames


def test_acceptance_is_a_bool(grammars):
    """`is_accepting` answers True or False (the tables hold acceptance as ints), deep in
    the stack too."""
    grammar = grammars["tree"]
    for text, expected in [(b'{"value": 1, "children": [', False),
                           (b'{"value": 1, "children": [{"value": 2, "children": []}]}', True),
                           (b'{"value": 1, "children": []}', True)]:
        assert grammar.is_accepting(grammar.walk_bytes(text)) is expected, text


def test_forks_and_rollbacks_are_independent(grammars):
    grammar = grammars["tree"]
    rng = random.Random(4)
    matcher = Matcher(grammar, max_tokens=80)
    for _ in range(10):
        assert matcher.accept(rng.choice(np.flatnonzero(matcher.mask()).tolist()))
    twin, here = matcher.fork(), matcher.state
    steps = [rng.choice(np.flatnonzero(twin.mask()).tolist()) for _ in range(1)]
    assert twin.accept(steps) and twin.num_tokens == 11 and matcher.num_tokens == 10
    assert matcher.state is here and twin.state != here
    mask = matcher.mask().copy()
    twin.rollback(1)
    assert twin.state == here and np.array_equal(twin.mask(), mask)
    assert np.array_equal(twin.bitmask(), matcher.bitmask()) and twin.budget == matcher.budget


def test_states_travel_as_ints_to_another_process(grammars, tmp_path):
    """`state_to_ints` in this process, `state_from_ints` in a fresh one that loads the
    artifact: the same masks (budgeted too), acceptance, costs and next states."""
    grammar = grammars["counted"]
    path = tmp_path / "g.safetensors"
    grammar.save(path)
    rng = np.random.default_rng(7)
    states = list(random_token_walk(grammar, rng, 25, OPENINGS["counted"]))[::3]
    states.append(grammar.walk_bytes(b"[" * 300))
    probe = rng.choice(grammar.vocab_size, 200, replace=False).tolist()

    def facts(g, state) -> list:
        return [int(g.mask(state).sum()), int(np.flatnonzero(g.mask(state, budget=9)).sum()),
                g.is_accepting(state), g.tokens_to_accept(state),
                [g.state_to_ints(g.next_state(state, t)) for t in probe]]

    ints = [grammar.state_to_ints(s) for s in states]
    assert all(isinstance(i, int) for each in ints for i in each)
    assert [grammar.state_from_ints(i) for i in ints] == states
    script = ("import json, sys, grammarc, numpy as np\n"
              f"g = grammarc.load({str(path)!r})\n"
              f"probe = {probe!r}\n"
              "def facts(g, state):\n"
              "    return [int(g.mask(state).sum()), "
              "int(np.flatnonzero(g.mask(state, budget=9)).sum()), g.is_accepting(state), "
              "g.tokens_to_accept(state), "
              "[g.state_to_ints(g.next_state(state, t)) for t in probe]]\n"
              "print(json.dumps([facts(g, g.state_from_ints(i)) "
              "for i in json.loads(sys.stdin.read())]))\n")
    out = subprocess.run([sys.executable, "-c", script], input=json.dumps(ints),
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == json.loads(json.dumps([facts(grammar, s) for s in states]))


@pytest.mark.parametrize("ints,message", [
    ([], "table state, count, return states"),
    ([10**6, 0], "out of range"),
    ([0, 0, 5], "the dead state"),
    ([1, 3], "count 3"),
    ([1, 0, 1], "not a return state"),
    ([1.5, 0], "must be integers"),
])
def test_restoring_refuses_what_no_state_writes(grammars, ints, message):
    with pytest.raises((ValueError, TypeError), match=message):
        grammars["tree"].state_from_ints(ints)


def test_flat_states_travel_as_one_int():
    flat = grammarc.load(ROOT / "artifacts" / "iso-date.safetensors")
    assert flat.state_to_ints(flat.initial_state) == [1]
    assert flat.state_from_ints([3]) == 3 and type(flat.state_from_ints([3])) is int
    with pytest.raises(ValueError, match="one int"):
        flat.state_from_ints([1, 0])
    matcher = Matcher(flat, state=flat.state_from_ints([1]))
    assert np.array_equal(matcher.mask(), flat.mask(1))


def test_threads_sharing_one_grammar_give_the_masks_one_thread_gives(smollm2):
    """Two threads walk one freshly loaded grammar at once (every mask a first use for one of
    them); each thread's masks, budgeted and not, equal those of a walk alone on another
    grammar object."""
    source = grammarc.compile_json_schema({}, smollm2)
    walks = [source.sample_tokens(60, np.random.default_rng(seed), eos_probability=0.02)
             for seed in range(8)]

    def digests(g, tokens: list[int]) -> list[tuple[int, int]]:
        out, state = [], g.initial_state
        for step, token in enumerate(tokens):
            out.append((hash(g.mask(state).tobytes()),
                        hash(g.mask(state, budget=60 - step).tobytes())))
            state = g.next_state(state, token)
        return out

    alone = [digests(source, w) for w in walks]
    shared = grammarc.compile_json_schema({}, smollm2)
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = [digests(shared, w) for w in walks[index::2]]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(0.005)
    assert not errors, errors
    assert results[0] == alone[0::2] and results[1] == alone[1::2]


def test_memory_stays_flat_after_deep_walks(grammars):
    """Random walks with deep stacks, then none alive: the memory they took is returned (the
    grammar keeps caches bounded by its table and the mask caches' byte limits, not the
    stacks met)."""
    grammar = grammars["any"]
    rng = np.random.default_rng(3)

    def walks(count: int) -> None:
        for _ in range(count):
            depth = int(rng.integers(50, 400))
            for _state in random_token_walk(grammar, rng, 30, b"[" * depth):
                pass

    walks(20)  # caches warm
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        walks(60)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 3_000_000, after - before  # interning kept ~400 kB a deep walk


def test_the_processor_follows_torch_rows_of_a_call_grammar(grammars, smollm2):
    """Torch ids and logits, rows reordered and duplicated as beam search hands them back:
    each row's logits keep exactly the budget mask of the state its own tokens reach."""
    torch = pytest.importorskip("torch")
    from grammarc.integrations import GrammarProcessor

    grammar = grammars["tree"]
    processor = GrammarProcessor(grammar, max_new_tokens=30)
    rng = np.random.default_rng(2)
    ids = torch.zeros((3, 2), dtype=torch.long)
    for step in range(12):
        scores = processor.process_logits(ids, torch.zeros(3, grammar.vocab_size))
        for row in range(3):
            state, eos = grammar.initial_state, list(grammar.eos_token_ids)
            for token in ids[row, 2:].tolist():
                state = grammar.next_state(state, token)
            expected = np.array(grammar.mask(state, budget=30 - step))
            if set(ids[row, 2:].tolist()) & set(eos):  # finished: EOS again, nothing else
                expected[:] = False
                expected[eos] = True
            assert torch.equal(torch.isfinite(scores[row]), torch.from_numpy(expected))
        allowed = torch.isfinite(scores).numpy()
        picks = [int(rng.choice(np.flatnonzero(r))) for r in allowed]
        order = torch.tensor([2, 0, 0]) if step % 3 == 1 else torch.arange(3)
        ids = torch.cat([ids, torch.tensor(picks)[:, None]], 1)[order]
    assert all(isinstance(s, CallState) for s in processor.update(ids))
