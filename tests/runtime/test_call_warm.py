"""`CallGrammar.warm` (issue 40): after it, masks and budget masks of grammars with calls are
the masks a grammar computes without it, the per-state and per-pair tables it fills are all a
walk ever meets (no step adds to them), and a second call changes nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import grammarc
from grammarc.runtime import call_tables
from helpers import SHARED, random_token_walk, reloaded

ROOT = Path(__file__).resolve().parents[2]
GBNF_DIR = SHARED / "conformance" / "gbnf"
pytestmark = pytest.mark.skipif(not GBNF_DIR.is_dir(),
                                reason=f"conformance data not at {SHARED}")

# a grammar and the texts its walks start after: deep stacks, and in c.gbnf nested unary
# minus signs (`- - x`), whose frames every rest of 32,000 returning tokens passes through
OPENINGS = {
    "c.gbnf": [b"int f(){" + b"while(x<1){" * 12, b"int f(){x = " + b"-" * 7,
               b"int f(){y = ( 1+( 2*( x"],
    "json.gbnf": [b'{"a": [' * 12, b'{"b": "c", "d": [1, {"e": [{"f": '],
    "tree.schema.json": [b'{"value": 1, "children": [' * 12],
}


@pytest.fixture(scope="module")
def sources(smollm2, tmp_path_factory) -> dict[str, Path]:
    """Each grammar compiled and saved once: every test loads it afresh."""
    folder = tmp_path_factory.mktemp("warm")
    paths = {}
    for name in OPENINGS:
        if name.endswith(".gbnf"):
            grammar = grammarc.compile((GBNF_DIR / name).read_text(), smollm2, "gbnf")
        else:
            grammar = grammarc.compile(ROOT / "grammars" / name, smollm2)
        paths[name] = folder / f"{name}.safetensors"
        reloaded(grammar, paths[name])
    return paths


def _walks(grammar, rng: np.random.Generator, openings: list[bytes], steps: int):
    """States along random token walks after each opening (random allowed tokens, never
    EOS), the budget left with each (the walk's length plus a margin that runs out)."""
    for opening in openings:
        start = grammar.walk_bytes(opening)
        assert start, opening
        budget = grammar.tokens_to_accept(start) + steps // 2
        for taken, state in enumerate(random_token_walk(grammar, rng, steps, opening)):
            yield state, budget - taken


def _sizes(grammar) -> tuple[int, ...]:
    """How many per-state, per-pair and per-triple tables a call grammar holds."""
    return len(grammar._infos), len(grammar._tops), len(grammar._reads)


@pytest.mark.parametrize("name", list(OPENINGS))
def test_warm_masks_are_the_masks_without_it(sources, smollm2, name):
    """Along random walks (deep stacks, deep rests), a warmed grammar's masks, budget masks
    and bitmasks equal a cold one's; its budget masks are the brute-force set (the tokens
    of the plain mask whose next state can still finish in time, EOS when accepting) and its
    plain masks allow exactly the sampled tokens whose bytes a byte walk reads."""
    warm, cold = grammarc.load(sources[name]), grammarc.load(sources[name])
    warm.warm()
    rng = np.random.default_rng(3)
    eos = set(warm.eos_token_ids)
    token_bytes = smollm2.token_bytes
    sample = [t for t in rng.choice(warm.vocab_size, 300, replace=False).tolist()
              if token_bytes[t] and t not in eos]
    bits = np.zeros((2, grammarc.runtime.bitmask_width(warm.vocab_size)), np.int32)
    for i, (state, budget) in enumerate(_walks(warm, rng, OPENINGS[name], 12)):
        other = cold.state_from_ints(warm.state_to_ints(state))
        plain = warm.mask(state)
        assert np.array_equal(plain, cold.mask(other)), (name, i, state)
        for candidate in sample:
            assert bool(plain[candidate]) == bool(warm.walk_bytes(token_bytes[candidate],
                                                                  state)), (state, candidate)
        nexts = {t: warm.tokens_to_accept(warm.next_state(state, t))
                 for t in np.flatnonzero(plain).tolist() if t not in eos}
        need = warm.tokens_to_accept(state)
        for limit in sorted({0, 2, need + 1, need + 2, need + 4, budget, 10_000}):
            got = warm.mask(state, budget=limit)
            assert np.array_equal(got, cold.mask(other, budget=limit)), (name, i, limit)
            expected = {t for t, n in nexts.items() if 0 <= n and n + 2 <= limit}
            if warm.is_accepting(state) and limit >= 1:
                expected |= eos
            assert set(np.flatnonzero(got).tolist()) == expected, (name, i, limit, state)
            warm.fill_bitmask([state], bits[:1], budget=limit)
            warm.fill_bitmask([state], bits[1:])
            unpacked = grammarc.runtime.unpack_bitmask(bits, warm.vocab_size)
            assert np.array_equal(unpacked[0], got) and np.array_equal(unpacked[1], plain)


@pytest.mark.parametrize("name", list(OPENINGS))
def test_warm_holds_every_table_a_walk_meets(sources, name):
    """After `warm`, random walks (each mask, budgeted or not) add nothing to the per-state,
    per-pair and per-triple tables, and every return state met on top of the stack is one
    `possible_tops` lists: its reading of the byte rules holds on the walks (a brute-force
    check that can fail: a pair it misses would be added by the walk)."""
    grammar = grammarc.load(sources[name])
    grammar.warm()
    held = _sizes(grammar)
    assert held[1], "no pair warmed"
    rng = np.random.default_rng(8)
    tops = grammar.possible_tops
    for state, budget in _walks(grammar, rng, [b"", *OPENINGS[name]], 40):
        assert state.frames.top in tops[state.table_state], state
        if state.frames.depth > 1:
            assert state.frames.below.top in tops[state.frames.top], state
        grammar.mask(state, budget=budget)
    assert _sizes(grammar) == held


def test_warm_is_idempotent_and_keeps_its_limit(sources):
    """`warm(limit=n)` computes at most n masks (and returns how many, as `Grammar.warm`),
    the per-state and per-pair tables whatever the limit; calling it again computes nothing
    new and returns the same."""
    grammar = grammarc.load(sources["json.gbnf"])
    rows = len(grammar.table.mask_rows())
    assert rows > 3
    assert grammar.warm(limit=0) == 0 and len(grammar._allowed_masks) == 0
    assert grammar.warm(limit=3) == 3 and len(grammar._allowed_masks) == 3
    held = _sizes(grammar)
    tables = (dict(grammar._infos), dict(grammar._tops), dict(grammar._reads))
    assert grammar.warm() == rows == grammar.warm()
    assert _sizes(grammar) == held and len(grammar._allowed_masks) == rows
    assert all(grammar._infos[k] is v for k, v in tables[0].items())
    assert all(grammar._tops[k] is v for k, v in tables[1].items())
    assert all(grammar._reads[k] is v for k, v in tables[2].items())
    with pytest.raises(ValueError):
        grammar.warm(limit=-1)


def _needs(needs) -> tuple:
    return needs.tokens.tolist(), needs.needs.tolist(), needs.levels


@pytest.mark.parametrize("name", list(OPENINGS))
def test_plan_gives_the_tables_one_state_or_pair_gives(sources, name, monkeypatch):
    """`plan` computes every table state's and every possible pair's tables in one pass
    each (and, but for c.gbnf's 3.4 million, every pair's rests read from every return state
    below it): they are, field for field, what a grammar that did not plan computes for one
    state, pair or read on first use (pushing tokens ordered by need with their levels,
    returning tokens, stopping tokens, deep tokens with their rests, first reads), computed
    in blocks of a few elements or of many."""
    planned, single = grammarc.load(sources[name]), grammarc.load(sources[name])
    if name != "c.gbnf":  # many blocks of a few elements (c.gbnf has many of 65,536)
        monkeypatch.setattr(call_tables, "_BLOCK", 5)
    planned.plan()
    tops = planned.possible_tops
    pairs = 0
    for q in range(1, planned.num_states):
        a, b = planned._info(q), single._info(q)
        assert _needs(a.push) == _needs(b.push), q
        assert a.ret_tokens.tolist() == b.ret_tokens.tolist(), q
        assert a.ret_suffix.tolist() == b.ret_suffix.tolist(), q
        for ret in tops[q]:
            top, alone = planned._top(q, ret), single._top(q, ret)
            assert _needs(top.stop) == _needs(alone.stop), (q, ret)
            for field in ("deep_tokens", "deep_group", "deep_suffixes"):
                assert getattr(top, field).tolist() == getattr(alone, field).tolist(), \
                    (q, ret, field)
            assert top.dead.size == alone.dead.size
            pairs += len(top.stop.tokens) + len(top.deep_tokens)
            for below in tops[ret] if len(top.deep_suffixes) else ():
                read, one = planned._first_read(q, ret, below), single._first_read(q, ret, below)
                for field in ("stops", "stop_need", "further", "rests"):
                    assert getattr(read, field).tolist() == getattr(one, field).tolist(), \
                        (q, ret, below, field)
    assert pairs, "no returning token resolved"
    if name != "tree.schema.json":  # its rests never return past two frames
        assert (planned._planned_reads is None) == (name == "c.gbnf"), "reads planned or not"
