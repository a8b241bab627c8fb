"""Hostile inputs, issue 15, "wrong tables": inputs that once compiled or ran to a table or a
result that was silently wrong. Each case runs as the attacker ran it (the command line under
a time and memory cap) and states its exit code and one-line message or its verdicts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_clean_error, compile_file, run_cli

import grammarc

DRAFT_04 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("schema", [
    {"enum": [1], "const": 2},
    {"type": "integer", "const": 5, "enum": [1, 2, 3]},
])
def test_enum_and_const_in_one_schema_object_both_apply(tmp_path, schema):
    result = compile_file(tmp_path, "s.schema.json", json.dumps(schema))
    assert_clean_error(result, "s.schema.json: the schema accepts no value at all")
    assert [p.name for p in tmp_path.iterdir()] == ["s.schema.json"]


def test_enum_and_const_keep_what_both_allow(tmp_path):
    schema = {"enum": [1, 2, "a"], "const": 2}
    assert compile_file(tmp_path, "s.schema.json", json.dumps(schema)).returncode == 0
    assert check(tmp_path, "2") == 0
    assert check(tmp_path, "1") == 1 and check(tmp_path, '"a"') == 1


@pytest.mark.parametrize("schema,message", [
    ({"properties": []}, "#/properties: invalid schema: [] is not of type 'object'"),
    ({"required": "a"}, "#/required: invalid schema: 'a' is not of type 'array'"),
    ({"pattern": 5}, "#/pattern: invalid schema: 5 is not of type 'string'"),
    ({"minimum": "a"}, "#/minimum: invalid schema: 'a' is not of type 'number'"),
    ({"minimum": True}, "#/minimum: invalid schema: True is not of type 'number'"),
    ({"format": 5}, "#/format: invalid schema: 5 is not of type 'string'"),
    ({"properties": {"a": {"type": "text"}}}, "#/properties/a/type: invalid schema: 'text'"),
])
def test_a_schema_its_meta_schema_rejects_is_an_error_at_the_keyword(tmp_path, schema, message):
    result = compile_file(tmp_path, "s.schema.json", json.dumps(schema))
    assert_clean_error(result, f"s.schema.json: {message}")
    assert [p.name for p in tmp_path.iterdir()] == ["s.schema.json"]


@pytest.mark.parametrize("draft", [DRAFT_04, "https://json-schema.org/draft/2020-12/schema"])
def test_integers_are_written_without_a_fraction(tmp_path, draft):
    """Draft 4 counts 12345.0 as no integer at all; later drafts count it as one, but no user
    wants an id written that way: only --integer-fractions allows it there."""
    schema = json.dumps({"$schema": draft, "type": "integer", "minimum": 0})
    assert compile_file(tmp_path, "s.schema.json", schema).returncode == 0
    assert check(tmp_path, "12345") == 0 and check(tmp_path, "12345.0") == 1
    assert compile_file(tmp_path, "s.schema.json", schema, "--integer-fractions").returncode == 0
    assert check(tmp_path, "12345.0") == (0 if draft != DRAFT_04 else 1)


def check(folder, text: str) -> int:
    """The exit code of `grammarc check out.safetensors TEXT` (0: in the language)."""
    result = run_cli("check", "out.safetensors", text, cwd=folder, seconds=60, memory_gb=4)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode


# ------------------------------------------------------------ the runtime, numpy and torch
@pytest.fixture(scope="module")
def grammar(smollm2) -> grammarc.Grammar:
    return grammarc.compile(r"\d{4}-\d{2}-\d{2}|[^eE]{1,6}", smollm2, kind="regex")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("call,error,message", [
    (lambda g, a, z: g.apply(z(g.vocab_size), -1), ValueError, r"out of range 0\.\."),
    (lambda g, a, z: g.apply(z(g.vocab_size), a([1, 1])), ValueError,
     r"logits of shape \(V,\) take one state, not 2"),
    (lambda g, a, z: g.advance(a([-1]), a([5])), ValueError, "states out of range"),
    (lambda g, a, z: g.apply(z(g.vocab_size), 1.0), TypeError, "states must be integers"),
    (lambda g, a, z: g.apply(z(g.vocab_size), "1"), TypeError, "states must be integers"),
    (lambda g, a, z: g.advance(a([1.0]), a([5])), TypeError, "states must be integers"),
    (lambda g, a, z: g.advance(a([1]), a([5.0])), TypeError, "tokens must be integers"),
    (lambda g, a, z: g.apply(z(g.vocab_size) > 0, 1), TypeError,
     "logits must be floating point"),
])
def test_runtime_misuse_is_the_same_error_on_numpy_and_torch(grammar, backend, call, error,
                                                             message):
    """torch once used the last state's mask for -1, returned negative states, coerced floats
    and strings, and took bool logits, where numpy raised."""
    if backend == "numpy":
        arrays, zeros = np.array, lambda n: np.zeros(n, np.float32)
    else:
        torch = pytest.importorskip("torch")
        arrays, zeros = torch.tensor, lambda n: torch.zeros(n)
    with pytest.raises(error, match=message):
        call(grammar, arrays, zeros)
    assert grammar.advance(arrays([1]), arrays([-5])).tolist() == [0]  # a bad token: dead
