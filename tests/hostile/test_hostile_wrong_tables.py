"""Hostile inputs, issue 15, "wrong tables": inputs that once compiled or ran to a table or a
result that was silently wrong. Each case runs as the attacker ran it (the command line under
a time and memory cap) and states its exit code and one-line message or its verdicts."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from grammar_oracles import (
    exact_json, exact_validator, number_instances, random_number_schema, spelled_json,
)
from helpers import assert_clean_error, check_number_schema, compile_file, run_cli

import grammarc
from grammarc.frontends.json_schema import canonical_dumps

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
    (5, "#: invalid schema: 5 is not of type 'object', 'boolean'"),
    (None, "#: invalid schema: None is not of type 'object', 'boolean'"),
    (1.5, "#: invalid schema: 1.5 is not of type 'object', 'boolean'"),
    ("abc", "#: invalid schema: 'abc' is not of type 'object', 'boolean'"),
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


# ------------------------------------------------------------ numbers are values (issue 43)
@pytest.mark.parametrize("schema,refused,accepted", [
    ({"not": {"const": 1}}, ["1", "1e0", "1.0", "10e-1", "0.1e1", "100E-2", "1E+0"],
     ["2", "1.5", "[1]", '"1"']),
    ({"type": "number", "not": {"type": "integer"}}, ["1e3", "1.0", "2.50e1", "1", "-0"],
     ["1.5", "1.50", "-0.25"]),
    ({"$schema": DRAFT_04, "type": "number", "not": {"type": "integer"}}, ["1", "1e0"],
     ["1.0", "1.5"]),
    ({"oneOf": [{"minimum": 0}, {"const": 5}]}, ["5", "5e0", "5.0", "0.5e1"], ["6", "4.5"]),
    ({"if": {"const": 4}, "then": False, "else": {"type": "number"}}, ["4", "4E0", "4.0"],
     ["3", "3.5"]),
    ({"type": "array", "contains": {"const": 1}, "maxContains": 1},
     ["[1, 1e0]", "[1, 1.0]", "[10e-1, 1]"], ["[1, 2]", "[1]"]),
    ({"required": ["a"], "not": {"properties": {"a": {"const": 1}}}},
     ['{"a": 1e0}', '{"a": 1.0}'], ['{"a": 2}']),
    ({"type": "array", "items": {"enum": [{"a": 1}, {"a": 1.0}, [2, {"b": 3}]]},
      "uniqueItems": True},
     ['[{"a": 1}, {"a": 1.0}]', '[{"a": 1.0}, {"a": 1}]'], ['[{"a": 1}, [2, {"b": 3}]]']),
    ({"$schema": DRAFT_04, "type": "array", "items": {"type": "integer", "enum": [1, 2]},
      "uniqueItems": True}, ["[1.0]", "[2, 1.0]"], ["[1, 2]"]),
])
def test_a_number_is_its_value_whatever_its_spelling(tmp_path, schema, refused, accepted):
    """Differences (`not`, `oneOf`, `if`/`else`, `contains` counts, conditions on keys) remove
    every spelling of a value they remove, and uniqueItems compares values, not texts. What is
    accepted is valid; a valid value refused (`1e0` in draft 4) has its canonical text
    accepted."""
    assert compile_file(tmp_path, "s.schema.json", json.dumps(schema)).returncode == 0
    grammar = grammarc.load(tmp_path / "out.safetensors")
    validator = exact_validator(schema)
    for text in refused + accepted:
        assert grammar.matches(text) == (text in accepted), text
        value = exact_json(text)
        assert validator.is_valid(value) <= grammar.matches(canonical_dumps(schema, value))
        assert grammar.matches(text) <= validator.is_valid(value), text


@pytest.mark.parametrize("schema,refused,accepted", [
    ({"not": {"const": {"a": {"x": 1, "y": 2}}}},
     ['{"a": {"x": 1, "y": 2}}', '{"a": {"y": 2, "x": 1}}'],
     ['{"a": {"y": 2, "x": 3}}', '{"a": {"x": 3, "y": 2}}']),
    ({"properties": {"a": {"not": {"enum": [{"p": 1, "q": 2, "r": 3}]}}}},
     ['{"a": {"r": 3, "q": 2, "p": 1}}', '{"a": {"q": 2, "p": 1, "r": 3}}'],
     ['{"a": {"p": 4, "q": 2, "r": 3}}', '{"a": {"q": 2}}']),  # the enum ranks p, q, r
])
def test_an_object_is_its_value_whatever_its_key_order(tmp_path, schema, refused, accepted):
    """A const or enum object whose keys objects take in any order (none declared where it
    stands) is every order of them, so a difference removes each: `not` of one once accepted
    the same value with its keys reordered."""
    assert compile_file(tmp_path, "s.schema.json", json.dumps(schema)).returncode == 0
    grammar = grammarc.load(tmp_path / "out.safetensors")
    validator = exact_validator(schema)
    for text in refused + accepted:
        assert grammar.matches(text) == (text in accepted), text
        assert validator.is_valid(exact_json(text)) == (text in accepted), text


def test_check_prints_the_canonical_spelling_of_a_number(tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer"},
                                               "x": {"not": {"const": 2}}}}
    assert compile_file(tmp_path, "s.schema.json", json.dumps(schema)).returncode == 0
    result = run_cli("check", "out.safetensors", '{"n": 1e3, "x": 1.50e0}', cwd=tmp_path,
                     seconds=60, memory_gb=4)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert 'the table expects: {"n": 1000, "x": 1.5}' in result.stdout


@pytest.mark.parametrize("seed", range(4))
def test_numbers_in_every_spelling_against_jsonschema(seed):
    """Random schemas of number keywords under not/oneOf/anyOf/allOf/if/contains and key
    conditions, and values with each number spelled many ways, judged by jsonschema on exact
    numbers: nothing invalid is accepted, and each valid value's canonical text is."""
    rng = random.Random(seed)
    checked = valid_seen = 0
    for _ in range(40):
        draft4 = rng.random() < 0.25
        schema = random_number_schema(rng, 2, draft4)
        if draft4:
            schema = {"$schema": DRAFT_04, **schema}
        texts, valid = check_number_schema(schema, number_instances(rng), rng)
        checked, valid_seen = checked + texts, valid_seen + valid
    assert checked > 5000 and valid_seen > 200


@pytest.fixture(scope="module")
def number_tokens(smollm2) -> list[int]:
    """The tokens made of the bytes of numbers and of the JSON around them."""
    return [t for t, data in enumerate(smollm2.token_bytes)
            if data and set(data) <= set(b'0123456789.eE+-,[]{}": a')]


@pytest.mark.parametrize("schema", [
    {"not": {"const": 1}},
    {"type": "number", "not": {"type": "integer"}},
    {"type": "array", "items": {"oneOf": [{"type": "integer"}, {"minimum": 2.5}]}},
    {"type": "object", "properties": {"a": {"not": {"enum": [10, 0.5]}}}},
])
def test_masks_agree_with_the_values_of_numbers_token_by_token(smollm2, number_tokens, schema):
    """Along texts with numbers spelled many ways, the mask allows a number token exactly
    when its bytes keep the text a prefix of the language, end of text only where the
    language ends, and whole texts are accepted only when jsonschema says valid."""
    grammar = grammarc.compile_json_schema(schema, smollm2)
    validator = exact_validator(schema)
    rng = random.Random(7)
    token_bytes, eos = smollm2.token_bytes, smollm2.eos_token_ids[0]
    for instance in number_instances(rng)[:40]:
        text = spelled_json(instance, rng).encode()
        state = grammar.initial_state
        for end in range(len(text) + 1):
            mask = grammar.mask(state)
            assert bool(mask[eos]) == grammar.is_accepting(state)
            for token in number_tokens[::7]:
                assert bool(mask[token]) == bool(grammar.walk_bytes(token_bytes[token], state))
            if end == len(text):
                assert not grammar.is_accepting(state) or \
                    validator.is_valid(exact_json(text.decode()))
                break
            state = grammar.walk_bytes(text[end:end + 1], state)
            if not state:
                break


@pytest.mark.parametrize("schema,accepted,refused", [
    ('{"const": 0.12345678901234567890123456789012}', "0.12345678901234567890123456789012",
     "0.1234567890123456789012345679"),
    ('{"type": "number", "maximum": -1234567890123456789012345678901.5}',
     "-1234567890123456789012345678901.5", "-1234567890123456789012345678901.4"),
    ('{"not": {"const": 55701891454308724307093603120.25}}', "55701891454308724307093603120.5",
     "55701891454308724307093603120.25"),
])
def test_numbers_longer_than_28_digits_are_exact(tmp_path, schema, accepted, refused):
    """Bounds and constants are not rounded to Decimal's 28 digits (`-x`, `x - n` and
    `abs(x)` round; the exact forms do not)."""
    assert compile_file(tmp_path, "s.schema.json", schema).returncode == 0
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert grammar.matches(accepted) and not grammar.matches(refused)
