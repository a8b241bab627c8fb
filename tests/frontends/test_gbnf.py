"""GBNF front end: llama.cpp's own grammars compiled for SmolLM2, checked against a Lark Earley
parser of the same grammars (rewritten by an independent reader in grammar_oracles.py)."""

from __future__ import annotations

import random
from pathlib import Path

import lark
import pytest
from grammar_oracles import check_against_earley, earley_accepts, gbnf_to_lark
from helpers import SHARED

import grammarc
from grammarc.automaton.linking import language_automaton
from grammarc.runtime.calls import CallGrammar
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.gbnf import parse_gbnf

GBNF_DIR = SHARED / "conformance" / "gbnf"
GBNF_FILES = sorted(GBNF_DIR.glob("*.gbnf"))
needs_shared = pytest.mark.skipif(not SHARED.is_dir(),
                                  reason="../shared (conformance data) is absent")
# recursion exact at any depth; c.gbnf through its spans (`statement* "}"` after "{",
# `ws expression ws ")"` after "(", ...) and `unaryTerm`
CALLS = {"arithmetic.gbnf", "c.gbnf", "json.gbnf", "json_arr.gbnf"}
ALPHABET = "abxyz019 -+*/()[]{}\"',:.\n\\#=_éぁ"

# hand-written strings: in the language within the depth bound, and not in the language
VALID = {
    "arithmetic.gbnf": ["x= 1\n", "a1 +b_2*(c -3)= (4)\n", "x=y\nz=1\n", "((((1))))= 2\n"],
    "c.gbnf": ["int main(){return 0;}", "float f(int x){while(x<10){x = x+1;}return x;}",
               "char c(){// note\nreturn -1;}", "int g(){/* a * b */h (1, 2);}", "",
               "int f(){return (x);}", "int f(){return ( x );}",
               "int f(){if(a<b){}else{}}", "int f(){if(a<b){}else_x = 1;}",
               "int f(){if(a<b){}elsewhere (2);}"],
    "chess.gbnf": ["1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n12. O-O-O Qxd8+\n",
                   "1. e8=Q# a1\n2. Rxh1 Bb5\n"],
    "english.gbnf": ["Hello, world!", "a\tb\nc", "[x] {y} ~z~"],
    "japanese.gbnf": ["こんにちは", "カタカナ 漢字\nひらがな、"],
    "json.gbnf": ['{}', '{"a": 1}', '{"a": [1, "x", {"b": true}], "c": false}',
                  '{"s": "\\u00e9\\n\\"q\\""}', '{"a":{"b":{"c":{"d":{}}}}}'],
    "json_arr.gbnf": ['[\n]', '[\n1,\n"a",\n{"k": [true, null]}]', '[\n-1.5e3 ]'],
    "list.gbnf": ["- milk\n", "- eggs\n- flour, 500 g\n"],
}
INVALID = {
    "arithmetic.gbnf": ["x=1", "=1\n", "1 + = 2\n", "X=1\n"],
    "c.gbnf": ["int main() {return 0;}", "int main(){return 0}", "main(){}", "int g(){h(1);}",
               "int f(){x = " + "( " * 30 + "y" + " )" * 29 + ";}", "int f(){return (x;}",
               "int f(){if(a<b){}else x = 1;}"],
    "chess.gbnf": ["1. e4\n", "1. e9 e5\n", "e4 e5\n"],
    "english.gbnf": ["", " leading", "trailing ", "naïve"],
    "japanese.gbnf": ["", "abc", "こんにちは "],
    "json.gbnf": ['', '[1]', '{"a": 1,}', "{'a': 1}", '{"a": 1.5}',
                  '{"a":' + "[" * 25 + "]" * 24 + "}"],
    "json_arr.gbnf": ['[]', '[\n1,2]', '{"a": 1}'],
    "list.gbnf": ["", "- milk", "-milk\n", "- \n"],
}
# nested 20 to 30 deep: in the language, and accepted through calls
DEEP = {
    "json.gbnf": ['{"a":{"b":{"c":{"d":{"e":{}}}}}}', '{"a":' + "[" * 25 + "]" * 25 + "}",
                  '{"a":' + '{"b":' * 20 + "1" + "}" * 21],
    "arithmetic.gbnf": ["(" * 30 + "1" + ")" * 30 + "= 2\n"],
    "c.gbnf": ["int f(){" + "while(x<1){" * 25 + "x = 1;" + "}" * 25 + "}",
               "int f(){x = " + "( " * 30 + "y" + " )" * 30 + ";}",
               "int f(){return " + "g(" * 20 + "1" + ")" * 20 + ";}",
               "int f(){x = " + "-" * 30 + "y;}"],
    "json_arr.gbnf": ["[\n" + '{"k":' * 20 + "1" + "}" * 20 + "]"],
}


@pytest.fixture(scope="module")
def compiled(smollm2) -> dict[str, tuple[grammarc.Grammar, list[str]]]:
    """Each conformance grammar compiled for SmolLM2, with the notices it gave."""
    out = {}
    for path in GBNF_FILES:
        notices: list[str] = []
        options = FrontendOptions(notice=notices.append)
        out[path.name] = grammarc.compile(path, smollm2, options=options), notices
    return out


def _oracle(path: Path) -> lark.Lark:
    return lark.Lark(gbnf_to_lark(path.read_text(encoding="utf-8")), lexer="dynamic")


@needs_shared
@pytest.mark.conformance
@pytest.mark.parametrize("path", GBNF_FILES, ids=lambda p: p.name)
def test_conformance_walks_parse_with_earley(path, compiled, smollm2):
    """Texts of random token walks to EOS on SmolLM2 parse with Earley; mutants the table
    accepts do too, and the table is exact: no grammar is unrolled."""
    grammar, notices = compiled[path.name]
    assert notices == []
    assert isinstance(grammar, CallGrammar) == (path.name in CALLS)
    check_against_earley(grammar, smollm2, _oracle(path), random.Random(path.name),
                         exact=True, alphabet=ALPHABET)


@needs_shared
@pytest.mark.conformance
@pytest.mark.parametrize("name", sorted(VALID))
def test_conformance_hand_written_strings(name, compiled):
    grammar, _ = compiled[name]
    oracle = _oracle(GBNF_DIR / name)
    for text in VALID[name]:
        assert grammar.matches(text) and earley_accepts(oracle, text), text
    for text in INVALID[name]:
        assert not grammar.matches(text), text
    for text in DEEP.get(name, []):
        assert earley_accepts(oracle, text) and grammar.matches(text), text


def _language(text: str, start: str | None = None):
    options = FrontendOptions(start=start, notice=lambda m: None)
    return language_automaton(parse_gbnf(text, "t.gbnf", options), options.max_states,
                              options.max_depth, options.notice)


@pytest.mark.parametrize("source,accepted,rejected", [
    # escapes in literals and classes, code points beyond the BMP
    (r'root ::= "a\x41\u00e9\U0001F600\n\t\\\"\[\]"', ['aAé😀\n\t\\"[]'], ["aAé😀"]),
    # ranges, negation, '-' at the edges, escaped ']'
    (r'root ::= [a-c0-1] [^a-z\n] [-x] [\]z-]', ["a!-]", "1Z-]", "cAx-"],
     ["d!-]", "aa-]", "a\n-]"]),
    ('root ::= . "x"', ["\nx", "😀x"], ["x"]),
    # groups, alternatives, repetitions
    ('root ::= ("ab" | "c")+ "d"? [0-9]{2} "e"{1,} "f"{0,2} "g"{2,3}',
     ["ab12egg", "cab34eeeffggg"], ["d12egg", "ab1egg", "ab12gg", "ab12efffgg", "ab12egggg"]),
    # comments, blank lines, a rule continued after ::=, after | and inside parentheses
    ('# a comment\n\nroot ::=\n  item (\n   "," item\n  )* # trailing\nitem ::= "x" |\n  "y"\n',
     ["x", "x,y,x"], ["", "x,", "xy"]),
    ("root ::= ws-x\nws-x ::= [ ]* \"x\"\r\n", ["x", "  x"], [" "]),
])
def test_syntax(source, accepted, rejected):
    dfa = _language(source)
    for text in accepted:
        assert dfa.accepts(text.encode()), text
    for text in rejected:
        assert not dfa.accepts(text.encode()), text


def test_start_rule_option():
    dfa = _language('root ::= "a"\nother ::= "b"\n', start="other")
    assert dfa.accepts(b"b") and not dfa.accepts(b"a")


@pytest.mark.parametrize("source,message", [
    ('root ::= "a"\nitem ::= ("b"\nx ::= "c"\n', "t.gbnf:3:3: GBNF syntax error: unexpected '::='"),
    ('root ::= "a" item ::= "b"\n', "t.gbnf:1:19: GBNF syntax error: unexpected '::='"),
    ('root ::= "a"\n  | "b"\n', "t.gbnf:2:3: GBNF syntax error: unexpected '|'"),
    ('root ::= "a" $\n', "t.gbnf:1:14: GBNF syntax error: unexpected character '$'"),
    ('root ::= "a\\q"\n', "t.gbnf:1:12: unknown escape \\q"),
    ('root ::= [\\x4]\n', "t.gbnf:1:11: \\x needs 2 hex digits"),
    ('root ::= "\\U00110000"\n', "t.gbnf:1:11: \\U00110000 is beyond U+10FFFF"),
    ('root ::= "\\ud800"\n', "t.gbnf:1:11: U+D800 is a surrogate code point"),
    ('root ::= [z-a]\n', "t.gbnf:1:11: character range 'z'-'a' is reversed"),
    ('root ::= "a"{3,1}\n', "t.gbnf:1:13: repetition {3,1} has its maximum below its minimum"),
    ('root ::= "a" item\n\nitem ::= itme "b"\n', "t.gbnf:3:10: undefined rule 'itme'"),
    ('root ::= "a"\nroot ::= "b"\n', "t.gbnf:2:1: rule 'root' is defined twice (first on line 1)"),
    ('main ::= "a"\n', "t.gbnf: the grammar has no rule 'root' (the start rule; choose another "
                       "with --start)"),
    ('root ::= "a" root\n', "the grammar matches no string at all"),
])
def test_errors_name_line_and_column(source, message):
    with pytest.raises(GrammarError) as info:
        _language(source)
    assert message in str(info.value)


def test_example_json_grammar_is_exact_at_any_depth(smollm2):
    """grammars/json-value.gbnf: recursive rules as machines linked by calls. Random values
    nested up to 25 deep and their mutants, judged by json.loads (and the grammar's own
    spacing: json.dumps's separators, ASCII escapes)."""
    import json

    path = Path(__file__).resolve().parents[2] / "grammars" / "json-value.gbnf"
    grammar = grammarc.compile(path, smollm2)
    assert isinstance(grammar, CallGrammar)
    rng = random.Random(4)

    def value(depth: int):
        if depth == 0 or rng.random() < 0.2:
            return rng.choice([0, -12, 3.5, "a\"\\é\n", True, None, [], {}])
        if rng.random() < 0.5:
            return [value(depth - 1) for _ in range(rng.randint(1, 2))]
        return {f"k{i}": value(depth - 1) for i in range(rng.randint(1, 2))}

    for _ in range(40):
        text = json.dumps(value(25))
        assert grammar.matches(text), text
        for _ in range(5):
            i = rng.randrange(len(text))
            mutant = text[:i] + rng.choice('[]{},:"0 \\') + text[i + 1:]
            try:
                expected = json.dumps(json.loads(mutant)) == mutant
            except ValueError:
                expected = False
            assert grammar.matches(mutant) == expected, mutant
