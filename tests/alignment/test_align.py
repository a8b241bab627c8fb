"""Token tables on real vocabularies, checked against brute-force byte walks and Python's `re`."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import grammarc
from grammarc.alignment import flat as align
from grammarc.alignment.flat import build_trie
from grammarc.automaton import build_dfa
from grammarc.frontends.regex import parse_regex
from grammarc.tokenizers import Tokenizer
from helpers import dfa_of

REGEXES = [
    r"\d{4}-\d{2}-\d{2}",                                   # ISO date
    r"[a-z0-9._%+-]{1,20}@[a-z0-9-]{1,15}\.(?:com|org|net|io)",  # email
    r"[^eE]+",                                              # the seed's poem without e
    r"[^eE]{1,60}",
    r"[ぁ-ゟ]+",                                             # hiragana: 3-byte characters
    r"(?:red|green|blue|yellow)(?:, (?:red|green|blue|yellow)){0,4}",  # alternation
    r"(?i)yes|no|maybe",
    r"-?(?:0|[1-9]\d{0,8})(?:\.\d{1,4})?",                  # bounded number
    r"[A-Z][a-z]{2,10}(?: [A-Z][a-z]{2,10}){1,2}",          # names
    r'\{"name": "[^"\\]{1,20}", "age": \d{1,3}\}',          # tiny JSON object
    r"(?s).{0,12}",                                          # anything short, any bytes
    r"[\u00c0-\u024f\u0400-\u04ff ]{2,16}",                  # 2-byte letters and space
    r"😀{1,3}|[\U0001f300-\U0001f5ff]+",                     # 4-byte characters
]


@pytest.fixture(scope="module")
def tables(smollm2: Tokenizer) -> dict[str, grammarc.Grammar]:
    return {p: grammarc.compile(p, smollm2, kind="regex") for p in REGEXES}


def _column_brute_force(dfa, tokens: list[bytes | None], state: int, eos: tuple[int, ...]):
    """T[state, :] by walking every token's bytes, one by one, in Python."""
    out = np.zeros(len(tokens), np.int64)
    for t, data in enumerate(tokens):
        if t in eos:
            out[t] = state if dfa.accepting[state] else 0
        elif data:
            out[t] = dfa.walk(data, state)
    return out


@pytest.mark.parametrize("pattern", REGEXES)
def test_random_token_walks_match_re(pattern, tables, smollm2):
    grammar = tables[pattern]
    rng = random.Random(pattern)
    compiled = re.compile(pattern, re.ASCII)
    eos = set(smollm2.eos_token_ids)
    finished = 0
    for _ in range(60):
        state, ids = grammar.initial_state, []
        for _ in range(80):
            allowed = grammar.allowed(state)
            assert len(allowed), "a reachable state allows nothing"
            ends = [t for t in allowed if t in eos]
            if ends and rng.random() < 0.3:
                assert grammar.is_accepting(state)
                break
            token = int(rng.choice(allowed))
            state = grammar.next_state(state, token)
            assert state != 0
            if token in eos:
                break
            ids.append(token)
        else:
            continue
        text = smollm2.decode_bytes(ids).decode("utf-8")
        assert compiled.fullmatch(text), (text, ids)
        finished += 1
    assert finished >= 20


@pytest.mark.parametrize("pattern", REGEXES)
def test_table_columns_equal_brute_force_walks(pattern, tables, smollm2):
    grammar = tables[pattern]
    dfa = build_dfa(parse_regex(pattern))
    assert dfa.num_states == grammar.num_states
    rng = random.Random(pattern)
    states = sorted({1, grammar.num_states - 1, *rng.sample(range(1, grammar.num_states),
                                                              min(4, grammar.num_states - 1))})
    tokens = list(smollm2.token_bytes)
    for state in states:
        expected = _column_brute_force(dfa, tokens, state, smollm2.eos_token_ids)
        ids = np.arange(len(tokens))
        actual = grammar.advance(np.full(len(tokens), state), ids)
        assert np.array_equal(actual, expected), f"state {state}: {np.flatnonzero(actual != expected)[:10]}"
        assert np.array_equal(grammar.mask(state), expected != 0)


def test_tokens_that_split_a_character_are_allowed(tables, smollm2):
    """A token ending inside a UTF-8 character is allowed when a next token can finish it."""
    grammar = tables[r"[^eE]+"]
    split = [t for t, b in enumerate(smollm2.token_bytes)
             if b and b[-1] >= 0xC2 and b"e" not in b and b"E" not in b]
    assert split, "SmolLM2 has tokens ending in a UTF-8 lead byte"
    allowed = grammar.mask(grammar.initial_state)
    assert allowed[split].all()
    for t in split[:50]:
        state = grammar.next_state(1, t)
        assert not grammar.is_accepting(state)  # the character is not finished yet


def test_eos_exactly_in_accepting_states(tables, smollm2):
    for grammar in tables.values():
        for state in range(1, grammar.num_states):
            allowed = grammar.mask(state)
            for eos in smollm2.eos_token_ids:
                assert allowed[eos] == grammar.is_accepting(state)
                if allowed[eos]:
                    assert grammar.next_state(state, eos) == state


def test_special_tokens_are_never_allowed(tables, smollm2):
    specials = [t for t, b in enumerate(smollm2.token_bytes)
                if b is None and t not in smollm2.eos_token_ids]
    assert specials
    for grammar in tables.values():
        for state in range(grammar.num_states):
            assert not grammar.mask(state)[specials].any()


def test_min_tokens_to_accept_is_shortest_path(tables):
    for grammar in tables.values():
        dist = grammar.min_tokens_to_accept
        assert dist[0] == -1
        assert (dist[grammar.accepting_states] == 0).all()
        for state in range(1, grammar.num_states):
            if dist[state] > 0:
                steps = grammar.advance(np.full(len(grammar.allowed(state)), state),
                                        grammar.allowed(state))
                assert dist[steps].min() == dist[state] - 1


def test_vocabulary_missing_bytes_is_trimmed_at_token_level():
    """Without a token for 'b', the state after 'a' is a dead end: 'a' must not be allowed."""
    tok = Tokenizer.from_token_bytes([b"a", b"ab", b"c", b"x", None], eos_token_ids=[4])
    grammar = grammarc.compile(r"ab|c|ax(?:b)", tok, kind="regex")
    allowed = set(grammar.allowed(1).tolist())
    assert allowed == {1, 2}  # "ab" and "c"; "a" would need a "b" token next
    assert grammar.next_state(1, 0) == 0


def test_no_tokenization_at_all_is_an_error():
    tok = Tokenizer.from_token_bytes([b"a", b"b", None], eos_token_ids=[2])
    with pytest.raises(grammarc.GrammarError, match="no sequence of this vocabulary"):
        grammarc.compile(r"ac", tok, kind="regex")


def test_duplicate_and_eos_tokens():
    """Equal byte strings behave alike; an EOS id is never treated as text."""
    tok = Tokenizer.from_token_bytes([b"a", b"a", b"b", b"ab", None], eos_token_ids=[4])
    grammar = grammarc.compile(r"a+b?", tok, kind="regex")
    dense = grammar.to_dense()
    assert np.array_equal(dense[:, 0], dense[:, 1])
    assert dense[1, 4] == 0 and dense[dense[1, 0], 4] == dense[1, 0]


def test_trie_is_preorder_with_subtree_ends():
    tokens = [b"ab", b"a", b"abc", b"b", None, b"ab", b""]
    trie = build_trie(tokens)
    n = trie.num_nodes
    assert n == 5  # root, a, ab, abc, b
    for i in range(1, n):
        for j in range(i + 1, trie.node_end[i]):
            assert trie.node_depth[j] > trie.node_depth[i]
        if trie.node_end[i] < n:
            assert trie.node_depth[trie.node_end[i]] <= trie.node_depth[i]
    ends = {tuple(sorted(trie.toks[trie.tok_ptr[i]:trie.tok_ptr[i + 1]].tolist())) for i in range(n)}
    assert (0, 5) in ends and (1,) in ends and (2,) in ends and (3,) in ends


@pytest.mark.parametrize("fixture", ["bpe_tokenizer_json", "sentencepiece_tokenizer_json",
                                     "unigram_tokenizer_json"])
def test_trained_tokenizers_tables_equal_brute_force(fixture, request):
    tok = grammarc.load_tokenizer(request.getfixturevalue(fixture))
    for pattern in [r"[^eE]{1,8}", r"(?:Café|naïve|東京)( \d+)?", r"[ぁ-ゟ]{1,4}|\w+"]:
        grammar = grammarc.compile(pattern, tok, kind="regex")
        dfa = build_dfa(parse_regex(pattern))
        dense = grammar.to_dense()
        live = grammar.min_tokens_to_accept
        for state in range(1, grammar.num_states):
            expected = _column_brute_force(dfa, list(tok.token_bytes), state, tok.eos_token_ids)
            # token-level trimming: a target from which no token path accepts is forbidden
            expected[(expected > 0) & (live[np.maximum(expected, 0)] < 0)] = 0
            if live[state] < 0:
                expected[:] = 0
            assert np.array_equal(dense[state], expected), (pattern, state)


@pytest.mark.parametrize("pattern", [REGEXES[1], REGEXES[3], REGEXES[9], REGEXES[11]])
def test_folding_the_trie_over_byte_classes_changes_no_entry(pattern, smollm2, monkeypatch):
    """Whether the walk folds the trie (a cost estimate decides) never changes its result."""
    dfa = build_dfa(parse_regex(pattern))
    trie = align.tokenizer_trie(smollm2)
    results = []
    for fold in (True, False):
        monkeypatch.setattr(align, "_FOLD_COST", 0)
        monkeypatch.setattr(align, "_worth_folding", lambda *args, fold=fold: fold)
        results.append(align.walk_entries(dfa, trie, smollm2.vocab_size, smollm2.eos_token_ids))
    folded, plain = results
    for name in ("token_class", "state_ptr", "entry_class", "entry_next"):
        assert np.array_equal(getattr(folded, name), getattr(plain, name)), name


@pytest.mark.parametrize("pattern", [r"[a-z0-9 ]{1,300}", REGEXES[9]])
def test_walking_on_two_threads_changes_no_entry(pattern, smollm2, monkeypatch):
    """The states walked by a second thread (a load estimate decides) leave the same result."""
    dfa = build_dfa(parse_regex(pattern))
    trie = align.tokenizer_trie(smollm2)
    results = []
    for busy_bound in (0, 10**9):  # always two threads; never
        monkeypatch.setattr(align, "_PARALLEL_AFTER_BUSY", busy_bound)
        monkeypatch.setattr(align, "_a_core_is_idle", lambda: False)
        results.append(align.walk_entries(dfa, trie, smollm2.vocab_size, smollm2.eos_token_ids))
    two, one = results
    for name in ("token_class", "state_ptr", "entry_class", "entry_next"):
        assert np.array_equal(getattr(two, name), getattr(one, name)), name


# objects whose values are strings alike: the states of each string read it alike (twins)
TWIN_PATTERNS = [
    r'\{"a": "(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*", "b": "(?:[^"\\]|\\["\\/bfnrt]|'
    r'\\u[0-9a-fA-F]{4})*", "c": "(?:[^"\\]|\\.)*"\}',
    r'(?:"[^"]{0,40}"|x"[^"]*"|y"[^"]*"),(?:"[^"]*"|z)',
]


@pytest.mark.parametrize("pattern", TWIN_PATTERNS)
@pytest.mark.parametrize("threads", [1, 2])
def test_twin_walks_change_no_entry(pattern, threads, smollm2, monkeypatch):
    """States walked as their twins' (`_core.component_twins`) get the entries a walk of
    their own gives, on one thread or two."""
    dfa = build_dfa(parse_regex(pattern))
    trie = align.tokenizer_trie(smollm2)
    first = trie.first_level
    weight = (trie.node_end[first] - first).astype(np.int64)
    trans_off = np.where(dfa.trans == 0, -1, dfa.trans.astype(np.int64) * dfa.num_classes
                         ).astype(np.int32).reshape(-1)
    group = grammarc._core.component_twins(
        dfa.byte_class.astype(np.int32)[trie.node_byte[first]], weight, trans_off,
        dfa.num_classes, dfa.accepting, np.ones(dfa.num_states, bool), 0, 256)[0]
    assert np.bincount(group[group >= 0]).max() >= 2, "no twins to test"
    monkeypatch.setattr(align, "_a_core_is_idle", lambda: False)
    monkeypatch.setattr(align, "_PARALLEL_AFTER_BUSY", 0 if threads == 2 else 10**9)
    results = []
    for most_states in (256, 0):  # twins; none
        monkeypatch.setattr(align, "_TWIN_MOST_STATES", most_states)
        monkeypatch.setattr(align, "_TWIN_LIVE_SHARE", 10**9)  # every state a candidate
        monkeypatch.setattr(align, "_TWINS_AFTER", 0)  # however few the walks
        results.append(align.walk_entries(dfa, trie, smollm2.vocab_size, smollm2.eos_token_ids))
    twins, alone = results
    for name in ("token_class", "state_ptr", "entry_class", "entry_next"):
        assert np.array_equal(getattr(twins, name), getattr(alone, name)), name


def test_twins_of_a_json_object_equal_brute_force(smollm2, monkeypatch):
    """Twin walks inside the string values of a JSON object, against byte walks."""
    schema = {"type": "object", "additionalProperties": False,
              "properties": {key: {"type": "string"} for key in ("ab", "cd", "ef", "gh")},
              "required": ["ab", "cd", "ef", "gh"]}
    found = grammarc._core.component_twins
    grouped = []
    monkeypatch.setattr(grammarc._core, "component_twins",
                        lambda *args: grouped.append(found(*args)) or grouped[-1])
    grammar = grammarc.compile_json_schema(schema, smollm2)
    assert any((twins[0] >= 0).sum() >= 8 for twins in grouped), "no twins to test"
    dfa = dfa_of(schema)[0]
    tokens = list(smollm2.token_bytes)
    inside = [q for q in range(1, dfa.num_states)
              if (dfa.trans[q, dfa.byte_class[ord("x")]] == q)]  # a string's own state
    assert len(inside) == 4
    ids = np.arange(len(tokens))
    for state in inside:
        expected = _column_brute_force(dfa, tokens, state, smollm2.eos_token_ids)
        actual = grammar.advance(np.full(len(tokens), state), ids)
        assert np.array_equal(actual, expected), f"state {state}"
