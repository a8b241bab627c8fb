"""Hostile inputs, issue 15, "tracebacks where a one-line error is promised": sources that
once ended in a Python traceback. Fair grammars among them (deep nesting, long bounded lists)
must compile exactly; the others must end in one `error:` line with their position, exit
code 1, and nothing written. Each runs as the attacker ran it: the command line under a time
and memory cap."""

from __future__ import annotations

import json
import multiprocessing
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import assert_clean_error, compile_file, run_cli

import grammarc
from grammarc.deepcall import call_with_deep_stack
from grammarc.frontends.json_schema import canonical_dumps


def nested_objects(depth: int) -> dict:
    schema: dict = {"type": "boolean"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"],
                  "additionalProperties": False}
    return schema


def nested_value(depth: int, leaf: object = True) -> object:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


BOOLEANS = {"type": "array", "items": {"type": "boolean"}}


@pytest.mark.parametrize("schema,valid,invalid", [
    ({**BOOLEANS, "maxItems": 250}, [[True] * 250, [], [False]], [[True] * 251, [1]]),
    ({**BOOLEANS, "minItems": 5000}, [[True] * 5000, [False] * 5003], [[True] * 4999]),
    (nested_objects(200), [nested_value(200), nested_value(200, False)],
     [nested_value(199), nested_value(201), nested_value(200, 1)]),
])
def test_deep_and_long_schemas_compile_exactly(tmp_path, schema, valid, invalid):
    """Once a RecursionError in the front end and the NFA builder."""
    result = compile_file(tmp_path, "s.schema.json", json.dumps(schema))
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    for instance in valid:
        assert grammar.matches(canonical_dumps(schema, instance))
    for instance in invalid:
        assert not grammar.matches(json.dumps(instance))
        assert not grammar.matches(canonical_dumps(schema, instance))


@pytest.mark.parametrize("name,source,valid,invalid", [
    ("parens.gbnf", 'root ::= ' + "(" * 2000 + '"a" | "b"' + ")" * 2000 + "\n",
     ["a", "b"], ["", "ab", "c"]),
    ("groups.regex", "(" * 500 + "a|b" + ")" * 500 + "c", ["ac", "bc"], ["a", "abc"]),
])
def test_deeply_nested_grammars_compile_exactly(tmp_path, name, source, valid, invalid):
    result = compile_file(tmp_path, name, source)
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert all(grammar.matches(text) for text in valid)
    assert not any(grammar.matches(text) for text in invalid)


@pytest.mark.parametrize("name,source,message", [
    ("huge.regex", "a{4294967296}",
     "huge.regex:1:2: invalid regex: the repetition number is too large"),
    ("huge.lark", "start: A\nA: /a{4294967296}/\n",
     "huge.lark:2:6: invalid Lark grammar: invalid regex: the repetition number is too large"),
    ("open.lark", "start: /(/\n", "open.lark:1:8: invalid Lark grammar: invalid regex: missing )"),
    ("brackets.schema.json", "[" * 100_000,
     "brackets.schema.json:1:100000: invalid JSON: nested too deeply to read (100,000 levels)"),
    ("items.schema.json", '{"items": ' * 3000 + "{}" + "}" * 3000,
     "items.schema.json: the grammar nests too deeply to compile (Python's recursion limit)"),
    ("nan.schema.json", '{"type": "number", "minimum": NaN}',
     "nan.schema.json:1:31: invalid JSON: NaN is not a JSON value"),
    ("nested.fsm.yaml", "[" * 5000,  # libyaml 0.2.6 and later stop at 1,000 levels
     re.compile(r"nested\.fsm\.yaml:1:(5001: invalid YAML: did not find expected node content|"
                r"1001: invalid YAML: exceeded maximum nesting depth)")),
    ("class.regex", "[^eE]{1,4[00}", "class.regex:1:10: invalid regex: unterminated character set"),
    # found by fuzz.py: Lark's description of this syntax error raised a TypeError
    ("log.lark", "start: TIME\nTIME:WARN [auth.session] user=42\n",
     "log.lark:2:16: invalid Lark grammar: unexpected token '.'"),
    # found by fuzz.py: a newline inside a class was a line break inside the error
    ("range.regex", "[a-\nz]+", r"range.regex:1:2: invalid regex: bad character range a-\n"),
    # found by fuzz.py: a $schema urllib cannot split was a ValueError traceback
    ("ipv6.schema.json", '{"$schema": "http://[x/schema", "type": "string"}',
     'ipv6.schema.json: #/$schema: invalid schema: "http://[x/schema" is not a meta-schema URI'),
    *[(f"count{i}.schema.json", json.dumps(schema), f"count{i}.schema.json: {where}the automaton "
       "needs more than 2,000,000 NFA states") for i, (schema, where) in enumerate([
           # found by fuzz.py; a string too large alone is named by its pointer
           ({"type": "string", "maxLength": 2 ** 31}, "#: "),
           ({"type": "string", "pattern": "^a{0,2147483648}$"}, "#: "),
           ({"type": "array", "items": {"type": "string"}, "maxItems": 2 ** 32 - 1}, ""),
           ({"type": "array", "contains": {"type": "string"}, "minContains": 2 ** 31}, "")])],
])
def test_bad_sources_are_one_line_errors(tmp_path, name, source, message):
    """Python's `re` warnings (FutureWarning on `[[`) never print before the error line."""
    result = compile_file(tmp_path, name, source)
    if isinstance(message, re.Pattern):
        assert_clean_error(result, "")
        assert message.search(result.stderr), result.stderr
    else:
        assert_clean_error(result, message)
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_source_python_re_warns_about_compiles_without_the_warning(tmp_path):
    result = compile_file(tmp_path, "set.regex", "[[a-z]")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert grammar.matches("[") and grammar.matches("q") and not grammar.matches("[a")


def test_a_device_file_is_read_no_further_than_the_size_limit(tmp_path):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    result = run_cli("compile", "/dev/zero", "--kind", "regex", "--tokenizer", "smollm2", "-o",
                     "zero.safetensors", cwd=tmp_path, seconds=60, memory_gb=4)
    assert_clean_error(result, "/dev/zero: the grammar file is larger than 16,777,216 bytes")
    assert not (tmp_path / "zero.safetensors").exists()


def test_the_deep_stack_hands_back_results_and_errors_and_restores_the_limit():
    limit = sys.getrecursionlimit()

    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    assert call_with_deep_stack(lambda: depth(20_000)) == 20_000
    with pytest.raises(RecursionError):
        call_with_deep_stack(lambda: depth(10 ** 6))
    assert sys.getrecursionlimit() == limit
    with pytest.raises(RecursionError):
        depth(20_000)  # the caller's own thread keeps its limit


def test_the_deep_stack_serves_threads_at_once_and_a_forked_child():
    """Deep calls from several threads at once each get their own result on a deep stack
    (the deep threads are kept for the process), the limit comes back after the last, and a
    child forked after them starts deep threads of its own rather than waiting on its
    parent's."""
    limit = sys.getrecursionlimit()

    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: call_with_deep_stack(lambda: depth(n)),
                                [20_000 + i for i in range(8)]))
    assert results == [20_000 + i for i in range(8)]
    assert sys.getrecursionlimit() == limit
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as child:
        assert child.apply_async(_deep_in_child).get(timeout=60) == 20_000


def _deep_in_child() -> int:
    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    return call_with_deep_stack(lambda: depth(20_000))
