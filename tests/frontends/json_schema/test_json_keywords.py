"""JSON Schema keywords and errors: keywords against valid and invalid instances, the
meta-schema check against jsonschema's own, unsupported keywords and --lenient, schemas that
accept no value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import accepts, dfa_of

from grammarc.errors import GrammarError, UnsupportedError
from grammarc.frontends.json_schema import canonical_dumps

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = sorted((ROOT / "grammars").glob("*.schema.json"))


META_SCHEMA_CASES = [
    {"type": 5}, {"properties": []}, {"items": "x"}, {"$defs": {"a": {"minLength": -1}}},
    {"allOf": [{"pattern": 3}]}, {"anyOf": {}}, {"properties": {"a": {"properties": {
        "b": {"enum": 5}}}}}, {"definitions": {"x": {"type": "nope"}}},
    {"dependencies": {"a": [1]}}, {"required": "a"}, {"$id": "#frag"},
    {"$schema": "https://json-schema.org/draft/2019-09/schema", "items": [{"type": 3}]},
    {"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": 1},
    {"$schema": "http://json-schema.org/draft-07/schema#", "additionalItems": 4},
    *(json.loads(path.read_text()) for path in SCHEMAS),
]


@pytest.mark.parametrize("schema", META_SCHEMA_CASES)
def test_meta_schema_errors_are_jsonschemas(schema):
    """The 2019-09 and 2020-12 meta-schemas are checked as one merged schema (their
    vocabularies' dynamic references resolved once): the same verdict and error location as
    jsonschema's own check of the meta-schema as published."""
    from jsonschema import Draft202012Validator, exceptions, validators

    from grammarc.frontends.json_schema.meta import check_against_meta_schema

    cls = validators.validator_for(schema, default=Draft202012Validator)
    expected = exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if expected is None:
        check_against_meta_schema(schema)
        return
    pointer = "#" + "".join(f"/{part}" for part in expected.absolute_path)
    with pytest.raises(GrammarError, match=re.escape(f"{pointer}: invalid schema: ")):
        check_against_meta_schema(schema)


@pytest.mark.parametrize("schema,valid,invalid", [
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5], [3]),
    ({"not": {"type": "string"}}, [1, None, {"a": [1]}], ["x"]),
    ({"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}},
     [6, "x"], [4, 1.5]),
    ({"dependentRequired": {"a": ["b"]}}, [{"b": 1}, {"a": 1, "b": 2}], [{"a": 1}]),
    ({"dependentSchemas": {"a": {"required": ["c"]}}}, [{"a": 1, "c": 2}, {}], [{"a": 1}]),
    ({"propertyNames": {"maxLength": 2}}, [{"ab": 1}], [{"abc": 1}]),
    ({"patternProperties": {"^x": {"type": "integer"}, "y$": {"minimum": 3}}},
     [{"xy": 3, "z": "s"}], [{"xy": 2}, {"x": "s"}]),
    ({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
     [[1, "a", 2], [1, 2, 3]], [[1], [1, 2, 3, 4], ["a"]]),
    ({"items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}, [["a", "c"], []], [["a", "a"]]),
    ({"$defs": {"verb": {"enum": ["GET", "PUT"]}, "alias": {"$ref": "#/$defs/verb"}},
      "items": {"$ref": "#/$defs/alias"}, "uniqueItems": True},
     [["GET", "PUT"], ["PUT"]], [["GET", "GET"], ["POST"]]),
    ({"$defs": {"verb": {"enum": ["GET", "POST"]}}, "uniqueItems": True,
      "items": {"allOf": [{"$ref": "#/$defs/verb"}, {"enum": ["POST", "PUT"]}]}},
     [["POST"], []], [["GET"], ["PUT"], ["POST", "POST"]]),
    ({"items": {"enum": ["a", True], "const": True}, "uniqueItems": True},  # both apply
     [[True], []], [["a"], [True, True]]),
    ({"items": {"enum": ["a", "b"], "const": True}, "uniqueItems": True}, [[]], [[True]]),
    ({"minProperties": 2, "maxProperties": 3}, [{"a": 1, "b": 2}], [{"a": 1}, {"a": 1, "b": 2,
                                                                          "c": 3, "d": 4}]),
    ({"const": {"b": [1, "x"], "a": None}}, [{"b": [1.0, "x"], "a": None}], [{"a": None}]),
    ({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "maxItems": 3},
     [["a", 1, 2], []], [[1], ["a", "b"], ["a", 1, 2, 3]]),
])
def test_keywords(schema, valid, invalid):
    dfa, _ = dfa_of(schema)
    for instance in valid:
        assert accepts(dfa, canonical_dumps(schema, instance)), instance
    for instance in invalid:
        assert not accepts(dfa, canonical_dumps(schema, instance)), instance


def test_unsupported_keywords_are_listed_with_pointers_and_lenient_ignores_them():
    # (an unevaluatedProperties that the schema decides compiles: test_unevaluated.py)
    schema = {"properties": {"a": {"oneOf": [{"anyOf": [{"properties": {"b": True}},
                                                        {"required": ["c"]}]},
                                             {"required": ["d"]}],
                                   "unevaluatedProperties": False}},
              "items": {"$dynamicRef": "https://example.com/other.json#x"}}
    with pytest.raises(UnsupportedError) as info:
        dfa_of(schema)
    assert "unevaluatedProperties at #/properties/a" in str(info.value)
    assert "$dynamicRef at #/items" in str(info.value)
    _, notices = dfa_of(schema, lenient=True)
    assert any("ignored (--lenient)" in n for n in notices)
    for items in ({"type": "string"},
                  {"$ref": "#/$defs/a"}):  # a reference cycle: no set
        with pytest.raises(UnsupportedError, match="uniqueItems is supported only"):
            dfa_of({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                    "items": items, "uniqueItems": True})
    # the enum is a superset of the values: those the other keywords remove are dropped
    automaton, _ = dfa_of({"items": {"enum": ["a", "bbb"], "maxLength": 2},
                           "uniqueItems": True})
    assert accepts(automaton, '["a"]')
    assert not accepts(automaton, '["bbb"]') and not accepts(automaton, '["a", "a"]')
    with pytest.raises(UnsupportedError, match="only references within the schema"):
        dfa_of({"$ref": "https://example.com/other.json"})


def test_empty_language_and_bad_schemas_are_errors():
    with pytest.raises(GrammarError, match="accepts no value"):
        dfa_of({"allOf": [{"type": "string"}, {"type": "integer"}]})
    with pytest.raises(GrammarError, match="#/maxLength: invalid schema: -1 is less than"):
        dfa_of({"maxLength": -1})
    with pytest.raises(GrammarError, match="#/properties/a/type: invalid schema: 'text' is not"):
        dfa_of({"properties": {"a": {"type": "text"}}})


@pytest.mark.parametrize("schema,pointer", [
    ({"properties": []}, "#/properties"), ({"required": "a"}, "#/required"),
    ({"pattern": 5}, "#/pattern"), ({"properties": {"a": {"minimum": "a"}}},
                                    "#/properties/a/minimum"),
    ({"minimum": True}, "#/minimum"), ({"format": 5}, "#/format"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 1, "exclusiveMinimum": 3},
     "#/exclusiveMinimum"),
])
def test_schemas_the_meta_schema_rejects_name_the_keyword(schema, pointer):
    """A keyword of the wrong type is an error at its JSON pointer, never silently ignored."""
    with pytest.raises(GrammarError) as info:
        dfa_of(schema)
    assert str(info.value).startswith(f"{pointer}: invalid schema: ")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("schema,valid,invalid", [
    ({"enum": [1], "const": 2}, [], [1, 2]),
    ({"type": "integer", "const": 5, "enum": [1, 2, 3]}, [], [1, 5]),
    ({"enum": [1, 2, "a"], "const": 2}, [2], [1, "a"]),
])
def test_enum_and_const_both_apply(schema, valid, invalid):
    if not valid:
        with pytest.raises(GrammarError, match="accepts no value"):
            dfa_of(schema)
        return
    dfa, _ = dfa_of(schema)
    assert all(accepts(dfa, json.dumps(v)) for v in valid)
    assert not any(accepts(dfa, json.dumps(v)) for v in invalid)


def test_errors_of_a_named_schema_keep_their_type():
    """The file name is prefixed without turning an UnsupportedError into a plain
    GrammarError (callers tell "cannot compile exactly" from "invalid")."""
    from grammarc.errors import UnsupportedError
    from grammarc.frontends.json_schema import parse_json_schema

    with pytest.raises(UnsupportedError, match=r"^s\.json: #/pattern: .*lookbehind"):
        parse_json_schema('{"type": "string", "pattern": "(?<=a)b"}', "s.json")
