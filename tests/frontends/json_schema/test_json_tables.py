"""JSON Schemas compiled to real SmolLM2 tables: sampled instances validated by `jsonschema`,
`compile_json_schema` on dicts and Pydantic models, and the command line (compile, check)."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from helpers import run_cli

import grammarc
from grammarc.frontends import FrontendOptions

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = sorted((ROOT / "grammars").glob("*.schema.json"))


def test_cli_records_integer_fractions(tmp_path):
    schema = tmp_path / "age.schema.json"
    schema.write_text('{"type": "integer"}')
    for flags, fraction_ok in (([], False), (["--integer-fractions"], True)):
        out = tmp_path / f"age{len(flags)}.safetensors"
        result = run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o", str(out),
                         *flags)
        assert result.returncode == 0, result.stderr
        grammar = grammarc.load(out)
        assert grammar.metadata["options"]["integer_fractions"] == fraction_ok
        assert grammar.matches("42") and grammar.matches("42.0") == fraction_ok


def test_a_string_past_the_state_limit_is_named_by_its_pointer(tmp_path):
    # a word-count pattern with lengths: too large alone (its texts cut to a minLength above
    # their fewest characters, then counted, are 16,591 states), and the error says which
    # string
    schema = tmp_path / "bio.schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"bio": {
        "type": "string", "pattern": "^(?:\\S+\\s+){0,19}\\S+$", "minLength": 30,
        "maxLength": 100}}}))
    out = tmp_path / "bio.safetensors"
    result = run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o", str(out),
                     "--max-states", "15000")
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "#/properties/bio: the automaton needs" in result.stderr, result.stderr


def test_a_one_of_past_the_state_limit_is_named_by_its_pointer(tmp_path):
    # three open objects that may share a value: exactly one of them is a product of them,
    # and the error says which schema (the deepest one whose product was too large)
    branches = [{"type": "object", "properties": {a: {"type": "string"}, b: {"type": t}},
                 "required": [a]} for a, b, t in (("a", "b", "integer"), ("b", "c", "boolean"),
                                                  ("c", "a", "integer"))]
    schema = tmp_path / "cfg.schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {
        "name": {"type": "string"}, "cfg": {"oneOf": branches}}}))
    out = tmp_path / "cfg.safetensors"
    result = run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o", str(out),
                     "--max-states", "300")
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and \
        "cfg.schema.json: #/properties/cfg: the automaton needs" in result.stderr, result.stderr


def test_schemas_kept_under_keys_no_draft_defines_are_named_by_their_pointer(tmp_path):
    # Vega keeps its definitions under "defs" and "refs": a notice or an error inside one
    # said "?" or "#" (the root) instead of where it was
    bio = {"type": "string", "pattern": "^(?:\\S+\\s+){0,19}\\S+$", "minLength": 30,
           "maxLength": 100}
    schema = {"type": "object", "properties": {"a": {"$ref": "#/defs/a"},
                                               "b": {"$ref": "#/refs/b~1c"}},
              "defs": {"a": {"type": "object", "properties": {"when": {
                  "type": "string", "format": "no-such-format"}}}},
              "refs": {"b/c": {"type": "array", "items": {"allOf": [{"type": "string"}, bio]}}}}
    path = tmp_path / "v.schema.json"
    path.write_text(json.dumps(schema))
    out = tmp_path / "v.safetensors"
    result = run_cli("compile", str(path), "--tokenizer", "smollm2", "-o", str(out),
                     "--max-states", "15000", cwd=tmp_path)
    assert result.returncode == 1 and not out.exists() and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert "notice: format 'no-such-format' at #/defs/a/properties/when is not checked" \
        in lines, result.stderr
    assert lines[-1].startswith("error: v.schema.json: #/refs/b~1c/items/allOf/1: the "
                                "automaton needs"), result.stderr
    schema["refs"]["b/c"]["items"]["allOf"][1] = {"maxLength": 20}  # now small enough
    path.write_text(json.dumps(schema))
    result = run_cli("compile", str(path), "--tokenizer", "smollm2", "-o", str(out),
                     "--max-states", "15000", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert grammarc.load(out).matches('{"b": ["one two"]}')


def test_a_one_of_whose_differences_pass_the_state_limit_says_how_to_tell_branches_apart(
        tmp_path):
    # an open object and a closed one that may share a value (the closed one allows the key
    # the open one requires): each is taken without the other's values
    branches = [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"a": {"type": "string"},
                                                   "b": {"type": "integer"}},
                 "required": ["b"], "additionalProperties": False}]
    schema = tmp_path / "cfg.schema.json"
    schema.write_text(json.dumps({"properties": {"cfg": {"oneOf": branches}}}))
    out = tmp_path / "cfg.safetensors"
    result = run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o", str(out),
                     "--max-states", "150")
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "cfg.schema.json: #/properties/cfg: the automaton needs " in result.stderr
    assert "; it is a oneOf branch without the values of the others it may share one with: " \
        "branches that require a key with different const values, or one of which forbids " \
        "a key another requires, share none\n" in result.stderr, result.stderr
    assert run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o",
                   str(out)).returncode == 0


def test_cli_compiles_a_schema_file_and_reports_json_errors(tmp_path):
    good = ROOT / "grammars" / "person.schema.json"
    out = tmp_path / "person.safetensors"
    result = subprocess.run([sys.executable, "-m", "grammarc", "compile", str(good),
                             "--tokenizer", "smollm2", "-o", str(out)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert grammarc.load(out).kind == "json-schema"
    bad = tmp_path / "bad.schema.json"
    bad.write_text('{\n  "type": "object",\n  "properties": {"a": }\n}\n')
    result = subprocess.run([sys.executable, "-m", "grammarc", "compile", str(bad),
                             "--tokenizer", "smollm2"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "error: bad.schema.json:3:23: invalid JSON: Expecting value"


def test_check_explains_a_valid_value_in_another_key_order(tmp_path):
    out = tmp_path / "person.safetensors"
    grammarc.compile(ROOT / "grammars" / "person.schema.json", "smollm2").save(out)
    swapped = run_cli("check", str(out), '{"age": 30, "name": "Ada"}')
    assert swapped.returncode == 1
    assert 'the table expects: {"name": "Ada", "age": 30}' in swapped.stdout
    invalid = run_cli("check", str(out), '{"name": "Ada", "age": -3}')
    assert invalid.returncode == 1 and "table expects" not in invalid.stdout


# ------------------------------------------------------------------ real tables, sampled
def _exact(text: str):
    """JSON numbers as exact values for the oracle (floats make 0.47 % 0.01 fail)."""
    value = Decimal(text)
    return int(value) if value == value.to_integral_value() else value


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_sampled_instances_validate(path, smollm2):
    """Random token walks through the SmolLM2 table always give valid instances."""
    schema = json.loads(path.read_text(), parse_float=_exact)
    grammar = grammarc.compile_json_schema(schema, smollm2, options=FrontendOptions(
        notice=lambda message: None))
    validator = jsonschema.validators.validator_for(schema)(
        schema, format_checker=jsonschema.FormatChecker())
    rng = np.random.default_rng(0)
    for _ in range(12):
        ids = grammar.sample_tokens(400, rng)
        assert ids is not None
        assert ids[-1] in smollm2.eos_token_ids
        text = smollm2.decode_bytes(ids[:-1]).decode("utf-8")
        instance = json.loads(text, parse_float=_exact)
        validator.validate(instance)


def test_compile_json_schema_records_the_schema(smollm2):
    schema = {"type": "object", "properties": {"z": {"type": "boolean"}, "a": {"const": 1}}}
    grammar = grammarc.compile_json_schema(schema, smollm2)
    assert json.loads(grammar.source) == schema
    assert list(json.loads(grammar.source)["properties"]) == ["z", "a"]  # order kept
    assert grammar.matches('{"z": true, "a": 1}') and not grammar.matches('{"a": 1, "z": true}')


def test_compile_json_schema_takes_json_text(smollm2):
    """A `str` is the schema's JSON text (no schema is a string), kept as given; an error in
    it names its line and column (line:column, as in a file)."""
    text = '{"type": "object",\n "properties": {"z": {"type": "boolean"}, "a": {"const": 1}}}'
    grammar = grammarc.compile_json_schema(text, smollm2)
    assert grammar.source == text
    assert grammar.table.num_states == grammarc.compile_json_schema(
        json.loads(text), smollm2).table.num_states
    assert grammar.matches('{"z": true, "a": 1}') and not grammar.matches('{"a": 1, "z": true}')
    with pytest.raises(grammarc.GrammarError, match=r"^2:22: invalid JSON"):
        grammarc.compile_json_schema('{"type": "object",\n "properties": {"a": }}', smollm2)


def test_compile_json_schema_takes_a_pydantic_model(smollm2):
    """A Pydantic model class compiles to its JSON Schema: sampled texts validate with the
    model itself, and the model's own instances (written as json.dumps writes them) match."""
    from typing import Literal

    import pydantic

    class Address(pydantic.BaseModel):
        city: str = pydantic.Field(max_length=12)
        zip: str = pydantic.Field(pattern=r"^[0-9]{5}$")

    class Order(pydantic.BaseModel):
        id: int = pydantic.Field(ge=1, le=10_000)
        status: Literal["open", "shipped"]
        ship_to: Address
        notes: list[str] | None = None

    grammar = grammarc.compile_json_schema(Order, smollm2)
    assert json.loads(grammar.source) == Order.model_json_schema()
    rng = np.random.default_rng(1)
    for _ in range(20):
        ids = grammar.sample_tokens(120, rng)
        Order.model_validate_json(smollm2.decode_bytes(ids[:-1]))
    order = Order(id=7, status="open", ship_to=Address(city="Lyon", zip="69001"))
    assert grammar.matches(json.dumps(order.model_dump(exclude_none=True)))
    assert not grammar.matches(json.dumps(dict(order.model_dump(), id=0)))
    with pytest.raises(grammarc.GrammarcError, match="without model_json_schema"):
        grammarc.compile_json_schema(int, smollm2)
