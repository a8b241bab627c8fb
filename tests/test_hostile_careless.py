"""Hostile and careless inputs, issue 43: numbers too long for Python's int conversion, manifest
templates and outputs, the build / --check cycle on call grammars, misspelt options and
keywords, signals, the serving surface and a newcomer's first commands. Each runs as a user
runs it: the command line in a subprocess."""

from __future__ import annotations

import pytest
from helpers import assert_clean_error, compile_file, run_cli

HUGE = "9" * 5000  # past Python's 4,300-digit limit on int <-> str conversions
TOO_LONG = "a number of more than 4,300 digits (grammarc's limit)"
WRITTEN_OUT = "has more than 4,300 digits written out (grammarc's limit)"


@pytest.mark.parametrize("name,source,message", [
    ("a.regex", f"a{{{HUGE}}}", "a.regex:1:2: invalid regex: the repetition number is too large"),
    ("a.regex", f"a{{2,{HUGE}}}", "a.regex:1:2: invalid regex: the repetition number is too large"),
    ("a.lark", f"start: A\nA: /a{{{HUGE}}}/\n", f"a.lark:2:7: invalid Lark grammar: {TOO_LONG}"),
    ("a.lark", f'start: "a"~{HUGE}\n', f"a.lark:1:12: invalid Lark grammar: {TOO_LONG}"),
    ("a.gbnf", f'root ::= "a"{{{HUGE}}}\n', f"a.gbnf:1:13: repetition count: {TOO_LONG}"),
    ("a.gbnf", f'root ::= "a"{{1,{HUGE}}}\n', f"a.gbnf:1:13: repetition count: {TOO_LONG}"),
    ("a.fsm.yaml", f"start: {HUGE}\naccept: [a]\nstates:\n  a: []\n",
     f"a.fsm.yaml:1:8: invalid YAML: {TOO_LONG}"),
    ("a.fsm.json", f'{{"start": {HUGE}, "accept": ["a"], "states": {{"a": []}}}}',
     f"a.fsm.json:1:11: invalid JSON: the number 99999999999999999999... {WRITTEN_OUT}"),
    ("a.fsm.yaml", f'start: a\naccept: [a]\nstates:\n  a:\n    - {{to: a, regex: "x{{{HUGE}}}"}}\n',
     "a.fsm.yaml:5:7: a transition of state 'a': invalid regex: the repetition number is too "
     "large"),
    *[("s.schema.json", schema, f"s.schema.json:1:{column}: invalid JSON: the number {shown} "
       f"{WRITTEN_OUT}") for schema, column, shown in [
        (f'{{"type": "integer", "maximum": {HUGE}}}', 32, "99999999999999999999..."),
        (f'{{"type": "integer", "maximum": -{HUGE}.5}}', 32, "-9999999999999999999..."),
        (f'{{"enum": [1, {HUGE}]}}', 14, "99999999999999999999..."),
        ('{"type": "integer", "minimum": 1e5000}', 32, "1e5000"),
        ('{"type": "number", "multipleOf": 1e-5000}', 34, "1e-5000"),
        ('{"const": 1e999999999}', 11, "1e999999999"),  # once an endless int(Decimal(...))
    ]],
    ("s.schema.json", f'{{"type": "string", "pattern": "^a{{{HUGE}}}$"}}',
     "}$': invalid regex: the repetition number is too large"),
])
def test_numbers_past_pythons_digit_limit_are_one_line_errors(tmp_path, name, source, message):
    """Once `ValueError: Exceeds the limit (4300 digits) for integer string conversion`."""
    result = compile_file(tmp_path, name, source)
    assert_clean_error(result, message)
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_number_past_the_digit_limit_in_a_manifest_is_a_one_line_error(tmp_path):
    (tmp_path / "a.regex").write_text("a")
    (tmp_path / "grammarc.toml").write_text(
        f'[[artifact]]\nsource = "a.regex"\noutput = "a.safetensors"\ntokenizer = "smollm2"\n'
        f"max_depth = {HUGE}\n")
    for flags in ([], ["--check"]):
        result = run_cli("build", *flags, cwd=tmp_path, seconds=60)
        assert_clean_error(result, f"grammarc.toml:5:13: invalid TOML: {TOO_LONG}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.regex", "grammarc.toml"]
