"""The command line on Lark, GBNF and state-machine sources: artifacts, notices, and one-line
errors with positions (run as real subprocesses)."""

from __future__ import annotations

import json

import pytest
from helpers import assert_clean_error, run_cli

import grammarc

NESTED = 'root ::= "(" root ")" | "x"\n'
AMBIGUOUS = 'root ::= "a" root "a" | "a"\n'  # "a" may open or close: no call can be decided
SPEC = """start: a
accept: [c]
states:
  a:
    - {to: b, text: "go "}
  b:
    - {to: c, regex: "[0-9]+;"}
  c: []
"""


def test_compile_each_kind(tmp_path):
    (tmp_path / "nested.gbnf").write_text(NESTED)
    result = run_cli("compile", "nested.gbnf", "--tokenizer", "smollm2", "--max-depth", "2",
                     cwd=tmp_path)
    assert result.returncode == 0 and "notice" not in result.stderr, result.stderr
    nested = grammarc.load(tmp_path / "nested.safetensors")
    assert nested.metadata["format_version"] == 2 and nested.metadata["options"]["max_depth"] == 2
    assert nested.matches("(" * 30 + "x" + ")" * 30) and not nested.matches("((x)")
    (tmp_path / "ambiguous.gbnf").write_text(AMBIGUOUS)
    result = run_cli("compile", "ambiguous.gbnf", "--tokenizer", "smollm2", "--max-depth", "2",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "notice: recursive rules root unrolled to depth 2 (--max-depth)" in result.stderr
    ambiguous = grammarc.load(tmp_path / "ambiguous.safetensors")
    assert ambiguous.matches("aaaaa") and not ambiguous.matches("aaaaaaa")

    (tmp_path / "flow.fsm.yaml").write_text(SPEC)
    result = run_cli("compile", "flow.fsm.yaml", "--tokenizer", "smollm2", "-o", "flow.npz",
                     "-q", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    flow = grammarc.load(tmp_path / "flow.npz")
    assert flow.state_name(flow.walk_bytes(b"go 12")) == "b"
    assert flow.state_name(flow.walk_bytes(b"go 12;")) == "c"


@pytest.mark.parametrize("name,text,fragment", [
    ("syntax.gbnf", 'root ::= "a" item\nitem ::= [a-z] ::= "b"\n',
     "syntax.gbnf:2:16: GBNF syntax error: unexpected '::='"),
    ("unknown.gbnf", 'root ::= "a" (item | "b")\n', "unknown.gbnf:1:15: undefined rule 'item'"),
    ("state.fsm.yaml", SPEC.replace("{to: c,", "{to: d,"),
     "state.fsm.yaml:7:7: a transition of state 'b' goes to 'd' is not a declared state"),
    ("unreachable.fsm.yaml", SPEC + "  d:\n    - {to: c, text: x}\n",
     "unreachable.fsm.yaml:10:5: state 'd' is unreachable"),
    ("ambiguous.fsm.yaml", SPEC.replace('"[0-9]+;"', '"[0-9]+"'),
     "ambiguous.fsm.yaml:7:5: ambiguous state machine: after 'go 0' the state could be 'b' or 'c'"),
    ("lookahead.lark", 'start: "a" NAME\nNAME: /[a-z]+(?!x)/\n',
     "lookahead.lark:2:14: terminal NAME: unsupported regex construct: lookahead"),
    ("paren.lark", "start: A\nA: /(/\n", "paren.lark:2:4: invalid Lark grammar: invalid regex"),
    ("uri.schema.json", '{"$schema": 5, "type": "string"}',
     "uri.schema.json: #/$schema: invalid schema: 5 is not a meta-schema URI (a string)"),
])
def test_bad_grammars_are_one_line_errors(tmp_path, name, text, fragment):
    (tmp_path / name).write_text(text)
    assert_clean_error(run_cli("compile", name, "--tokenizer", "smollm2", cwd=tmp_path), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_too_many_states_names_the_unrolled_rules(tmp_path):
    (tmp_path / "palindromes.gbnf").write_text('root ::= "a" root "a" | "a" | "b" root "b" | "b"\n')
    result = run_cli("compile", "palindromes.gbnf", "--tokenizer", "smollm2", "--max-states",
                     "20", "-q", cwd=tmp_path)
    assert_clean_error(result, "palindromes.gbnf: the automaton needs 91 DFA states, more than "
                               "--max-states 20; recursive rules root unrolled to depth 4")


def test_max_states_means_the_same_to_compile_and_dot(tmp_path):
    """One bound, one meaning: --max-states limits the automata built on the way (here the
    first operand of an allOf) as much as the final one, for every command."""
    schema = {"allOf": [{"type": "string", "pattern": "^(a|b)*a(a|b){6}$"},
                        {"type": "string", "maxLength": 40}]}
    (tmp_path / "s.schema.json").write_text(json.dumps(schema))
    compiled = run_cli("compile", "s.schema.json", "--tokenizer", "smollm2", "--max-states",
                       "100", "-q", cwd=tmp_path)
    drawn = run_cli("dot", "s.schema.json", "--max-states", "100", "-q", cwd=tmp_path)
    assert_clean_error(compiled, "more than --max-states 100")
    assert_clean_error(drawn, "more than --max-states 100")
    assert compiled.stderr == drawn.stderr
    assert run_cli("dot", "s.schema.json", "-q", cwd=tmp_path).returncode == 0
