"""Rule expansion shared by the Lark and GBNF front ends: exact solutions of linear recursion,
other recursion as machines linked by calls (exact at any depth), and the depth bound where
the next byte cannot decide a call, checked on every short string against Earley."""

from __future__ import annotations

import itertools
import random

import lark
import pytest
from grammar_oracles import earley_accepts, gbnf_to_lark

from grammarc.automaton.linking import language_automaton
from grammarc.automaton.pushdown import PushdownDFA
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.gbnf import parse_gbnf


def _compile(source: str, depth: int = 4, notices: list[str] | None = None):
    options = FrontendOptions(max_depth=depth, notice=(notices if notices is not None
                                                       else []).append)
    return language_automaton(parse_gbnf(source, "t.gbnf", options), options.max_states,
                              depth, options.notice)


def _strings(alphabet: str, length: int):
    for n in range(length + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


def _earley(source: str) -> lark.Lark:
    return lark.Lark(gbnf_to_lark(source), lexer="dynamic")


@pytest.mark.parametrize("source", [
    'root ::= root "a" | "b"',                              # left recursion
    'root ::= "a" root | "b"',                              # right recursion
    'root ::= ("a" | "b" root)?',                           # right, inside an optional group
    'root ::= x "b"\nx ::= x "a" | "a" | ""',               # left, behind another rule
    'root ::= item ("," item)*\nitem ::= "a" | item "b"',   # Lark's shape of `x+` rules
])
def test_linear_recursion_is_exact_without_notice(source):
    notices: list[str] = []
    dfa = _compile(source, depth=0, notices=notices)
    parser = _earley(source)
    assert notices == []
    for text in _strings("ab,", 6):
        assert dfa.accepts(text.encode()) == earley_accepts(parser, text), text


def test_nesting_is_exact_at_any_depth_through_calls():
    notices: list[str] = []
    automaton = _compile('root ::= "(" root ")" | "x"', 1, notices)
    assert isinstance(automaton, PushdownDFA) and notices == []
    accepted = {t for t in _strings("()x", 13) if automaton.accepts(t.encode())}
    assert accepted == {"(" * k + "x" + ")" * k for k in range(7)}
    assert automaton.accepts(("(" * 40 + "x" + ")" * 40).encode())


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_depth_bounds_nesting_where_the_next_byte_cannot_decide(depth):
    """After "a", another "a" may open a nested root or close this one: no call can be
    decided by the next byte, so the rule is unrolled `depth` levels, with a notice."""
    notices: list[str] = []
    dfa = _compile('root ::= "a" root "a" | "a"', depth, notices)
    accepted = {t for t in _strings("a", 2 * depth + 3) if dfa.accepts(t.encode())}
    assert accepted == {"a" * (2 * k + 1) for k in range(depth + 1)}
    assert notices == [f"recursive rules root unrolled to depth {depth} (--max-depth); "
                       "strings that nest deeper are left out"]


def test_mutual_left_recursion_terminates_and_under_approximates():
    source = 'root ::= x "a" | "c"\nx ::= root "b" | y\ny ::= x "d" | "e"'
    parser = _earley(source)
    dfa = _compile(source, depth=3)
    accepted = [t for t in _strings("abcde", 5) if dfa.accepts(t.encode())]
    assert {"c", "ea", "cba", "cbaba", "edda"} <= set(accepted)
    assert all(earley_accepts(parser, t) for t in accepted)


def _random_grammar(rng: random.Random) -> str:
    """Three rules over a, b where every alternative reads a character and refers to at most
    one rule (in any position), so a string of length n needs at most n nested expansions."""
    rules = []
    for name in ("root", "x", "y"):
        options = []
        for _ in range(rng.randint(1, 3)):
            parts = [rng.choice(['"a"', '"b"', '[ab]'])]
            if rng.random() < 0.8:
                parts.insert(rng.randint(0, 1), rng.choice(["root", "x", "y"]))
            if rng.random() < 0.3:
                parts.insert(rng.randint(0, len(parts)), rng.choice(['"a"', '"b"']))
            options.append(" ".join(parts))
        if rng.random() < 0.3:
            options.append('""')
        rules.append(f"{name} ::= {' | '.join(options)}")
    return "\n".join(rules)


@pytest.mark.parametrize("seed", range(30))
def test_random_recursive_grammars_exact_up_to_the_bound(seed):
    """At depth n, the table accepts exactly the grammar's strings of length <= n (each
    recursion reads a character; with calls, every length), and never a string outside the
    grammar."""
    source = _random_grammar(random.Random(seed))
    parser = _earley(source)
    try:
        dfa = _compile(source, depth=5)
    except GrammarError:  # the grammar derives no string at all
        assert not any(earley_accepts(parser, t) for t in _strings("ab", 5))
        return
    for text in _strings("ab", 5):
        assert dfa.accepts(text.encode()) == earley_accepts(parser, text), (source, text)


def test_more_moves_than_nfa_states():
    """Unrolling makes many NFA states move to the same states on one byte (more moves than
    the NFA has states): the subset construction must keep each once (this wrote past its
    buffer once)."""
    source = 'root ::= x [ab] | [ab] root\nx ::= [ab] x | x [ab] x | "a" "a"'
    parser = _earley(source)
    dfa = _compile(source, depth=3)
    accepted = [t for t in _strings("ab", 7) if dfa.accepts(t.encode())]
    assert {"aaa", "aab", "baab", "aaaaa", "aabaaa"} <= set(accepted)
    assert all(earley_accepts(parser, t) for t in accepted)


def test_bracketed_spans_link_what_the_rule_heads_cannot():
    """With `s` as the machine, after `i{}` the byte `e` may begin the else branch or return
    and begin the next statement `e;`. The span `s* "}"` (after `"{"`) as the machine leaves
    that choice to the caller's DFA: calls, no notice, exact on every short string and 25
    deep, also where `"{" "}"` is written out beside `"{" s+ "}"`."""
    for source in ['root ::= s*\ns ::= "i" "{" s* "}" ("e" "{" s* "}")? | [ex] ";"',
                   'root ::= s*\ns ::= "i" "{" s+ "}" ("e" "{" s* "}")? | "i" "{" "}" | [ex] ";"']:
        parser = _earley(source)
        notices: list[str] = []
        pushdown = _compile(source, notices=notices)
        assert isinstance(pushdown, PushdownDFA) and notices == [], notices
        for text in _strings("ie{};", 6):
            assert pushdown.accepts(text.encode()) == earley_accepts(parser, text), text
        deep = "i{" * 25 + "x;" + "}e{e;}" * 25
        assert pushdown.accepts(deep.encode()) and earley_accepts(parser, deep)
        assert not pushdown.accepts(deep[:-1].encode())
