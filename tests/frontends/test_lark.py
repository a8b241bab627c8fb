"""Lark front end: the example grammars compiled for SmolLM2 and checked against Lark's own
Earley parser (dynamic lexer) of the same files; Lark syntax features and errors."""

from __future__ import annotations

import random
from pathlib import Path

import lark
import pytest
from grammar_oracles import check_against_earley, earley_accepts

import grammarc
from grammarc.automaton.linking import language_automaton
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.lark_grammar import parse_lark

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"
LARK_FILES = sorted(GRAMMARS.glob("*.lark"))
RECURSIVE = {"arithmetic.lark", "json.lark", "tool-call.lark"}
ALPHABET = "abcxyz019 -+*/()[]{}\"',:.=\n\\_TZé"

VALID = {
    "tool-call.lark": ["[get_user_info(user_id=7890, special='black')]",
                       '[get_weather(city="Paris", days=[1, 2]), stop()]',
                       "[f(x=-1.5, y=True, z=None, w=[[], ['a']])]"],
    "arithmetic.lark": ["1", "-2.5 * (3 + 4)", "((1))/2-\t3", "1e3"],
    "csv-row.lark": ["a,b,c\n", '"x, y","say ""hi""",\r\n', ",,\n", "\n"],
    "sql.lark": ["SELECT * FROM users;", "select id, COUNT(*) from t where a >= 1 AND b = 'x' "
                 "order by id desc limit 10 ;", "SELECT a,b FROM t\nWHERE c<>'it''s';"],
    "log-line.lark": ["2024-05-01T12:34:56.789Z WARN [auth.session] user=42 ip=10.0.0.7 "
                      "password expired\n", "1999-12-31T23:59:59Z INFO [a] started\n"],
    "json.lark": ['{"a": [1, -2.5e3, "x\\"y", true, null], "b": {}}', ' [ ] ', '"\\\\"'],
}
INVALID = {
    "tool-call.lark": ["get_user_info(user_id=7890)", "[f(x=1,y=2)]", "[f(x=foo)]", "[f(1)]"],
    "arithmetic.lark": ["", "1 +", "(1", "1 2", "x"],
    "csv-row.lark": ["a,b", '"unterminated\n', 'a"b\n'],
    "sql.lark": ["SELECT FROM t;", "SELECT * FROM t", "SELECT * FROM t WHERE a = b;",
                 "DELETE FROM t;"],
    "log-line.lark": ["2024-13-01T12:34:56Z INFO [a] x\n", "2024-05-01T12:34:56Z TRACE [a] x\n",
                      "2024-05-01T12:34:56Z INFO a x\n", "2024-05-01T12:34:56Z INFO [a] x"],
    "json.lark": ["{'a': 1}", '{"a": 1,}', '"line\nbreak"', "[1, 2"],
}


@pytest.fixture(scope="module")
def compiled(smollm2) -> dict[str, grammarc.Grammar]:
    options = FrontendOptions(notice=lambda message: None)
    return {path.name: grammarc.compile(path, smollm2, options=options) for path in LARK_FILES}


def _oracle(path: Path) -> lark.Lark:
    return lark.Lark(path.read_text(encoding="utf-8"), lexer="dynamic")


def test_there_are_lark_examples():
    assert len(LARK_FILES) >= 5


@pytest.mark.parametrize("path", LARK_FILES, ids=lambda p: p.name)
def test_walks_parse_with_earley(path, compiled, smollm2):
    """Texts of random token walks to EOS on SmolLM2 parse with Lark's Earley parser; so do
    mutants the table accepts, and for grammars without recursion the table is exact."""
    grammar = compiled[path.name]
    check_against_earley(grammar, smollm2, _oracle(path), random.Random(path.name),
                         exact=path.name not in RECURSIVE, alphabet=ALPHABET, budget=15,
                         mutants=4)


@pytest.mark.parametrize("name", sorted(VALID))
def test_hand_written_strings(name, compiled):
    grammar = compiled[name]
    oracle = _oracle(GRAMMARS / name)
    for text in VALID[name]:
        assert grammar.matches(text) and earley_accepts(oracle, text), text
    for text in INVALID[name]:
        assert not grammar.matches(text) and not earley_accepts(oracle, text), text


def _language(text: str, start: str | None = None, notices: list[str] | None = None):
    options = FrontendOptions(start=start, notice=(notices if notices is not None
                                                   else []).append)
    return language_automaton(parse_lark(text, "t.lark", options), options.max_states,
                              options.max_depth, options.notice)


@pytest.mark.parametrize("source,accepted,rejected", [
    # case-insensitive strings and regexes, ~ n and ~ n..m, [..], ?, templates
    ('start: "ab"i /x+/i ("-" | "+") ~ 2 ["!"] "z" ~ 1..2 "?"?',
     ["aBxX-+z", "ABx--!zz?"], ["abx-z", "abx-+zzz", "abx-+"]),
    ('_list{item}: item ("," item)*\nstart: "[" _list{NUMBER} "]"\n%import common.NUMBER',
     ["[1]", "[1,2.5,3e2]"], ["[]", "[1,]"]),
    # %ignore between terminals and at both ends, not inside a terminal
    ('start: WORD ("," WORD)*\n%import common (WORD, WS)\n%ignore WS',
     ["a,b", " a , b\n", "\tab"], ["a b", "a,,b"]),
    # common.ESCAPED_STRING: what Lark's lexer matches (lazily, with a lookbehind)
    ('start: ESCAPED_STRING\n%import common.ESCAPED_STRING',
     ['""', '"a\\"b"', '"\\\\"', '"é"'], ['"a"b"', '"\\"', '"a\nb"']),
    ('start: C_COMMENT\n%import common.C_COMMENT', ["/**/", "/* a * b\n */"], ["/* */ */"]),
    # unicode and flags inside regexes; a rule used twice
    (r'start: pair pair' '\npair: /[ぁ-ゟ]{2}/ NUMBER\n%import common.NUMBER',
     ["ぁぁ1ゟゟ2"], ["ぁ1ぁ2"]),
])
def test_features(source, accepted, rejected):
    dfa = _language(source)
    oracle = lark.Lark(source, lexer="dynamic")
    for text in accepted:
        assert dfa.accepts(text.encode()) and earley_accepts(oracle, text), text
    for text in rejected:
        assert not dfa.accepts(text.encode()) and not earley_accepts(oracle, text), text


def test_start_option_and_recursion_at_any_depth():
    notices: list[str] = []
    dfa = _language('start: "a"\nlist: "(" list* ")"\n', start="list", notices=notices)
    assert dfa.accepts(b"(()(()))") and not dfa.accepts(b"a") and notices == []
    assert dfa.accepts(b"(" * 30 + b")" * 30) and not dfa.accepts(b"(" * 30 + b")" * 29)


@pytest.mark.parametrize("source,message", [
    ('start: "a" )\n', 't.lark:1:12: invalid Lark grammar: unexpected token \')\''),
    ('start: "a"\nfoo bar\n', "t.lark:2:5: invalid Lark grammar: unexpected token 'bar'"),
    ('start: "abc\n', "t.lark:1:8: invalid Lark grammar: Unexpected input"),
    ("start: item\n", "t.lark: invalid Lark grammar: Rule 'item' used but not defined"),
    ("begin: \"a\"\n", "t.lark: invalid Lark grammar: the grammar has no rule 'start'"),
    ("%import nope.X\nstart: X\n", "cannot %import nope.lark: only Lark's bundled grammars"),
    ("start: A\nA: /a*/\n", "zero-width regexps (terminal A)"),
    ("%declare FOO\nstart: FOO\n", "terminal FOO has no pattern (%declare)"),
    ('start: "x" NAME\nNAME: /a(?=b)/\n', "t.lark:2:9: terminal NAME: unsupported regex "
                                         "construct: lookahead"),
    ('start: "x" /\\w(?<!_)/i\n', "t.lark:1:15: terminal: unsupported regex construct: "
                                 "lookbehind"),
    ('start: X\nX: "a" /(b)*\\1/\n', "t.lark:2:1: terminal X: unsupported regex construct: "
                                     "backreference"),
])
def test_errors(source, message):
    with pytest.raises(GrammarError) as info:
        _language(source)
    assert message in str(info.value)
