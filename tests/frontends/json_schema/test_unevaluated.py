"""`unevaluatedProperties` and `unevaluatedItems` where the schema alone decides what is
evaluated (`frontends/json_schema/unevaluated.py`): hand-picked shapes, random compositions of
`allOf`, `$ref`, `properties`, `patternProperties` and `additionalProperties`, and
discriminated unions, judged by jsonschema on random instances; those that depend on the
instance otherwise are refused."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.errors import UnsupportedError
from grammarc.frontends.json_schema import canonical_dumps

D2020 = "https://json-schema.org/draft/2020-12/schema"
D2019 = "https://json-schema.org/draft/2019-09/schema"
KEYS = ["a", "b", "x1", "c"]
VALUES = [1, "s", None, True, 2.5]
TYPES = ["integer", "string", "null", "boolean", "number"]

SHAPES = [
    # properties of allOf branches and of the schema itself are evaluated
    {"$schema": D2020, "type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}],
     "properties": {"b": {"type": "string"}}, "unevaluatedProperties": False},
    # and those of a $ref beside them, patterns included; the others must be null
    {"$schema": D2020, "$defs": {"base": {"properties": {"a": {"type": "integer"}},
                                          "patternProperties": {"^x": {"type": "boolean"}}}},
     "$ref": "#/$defs/base", "properties": {"b": {"type": "string"}},
     "unevaluatedProperties": {"type": "null"}},
    # additionalProperties evaluates every other property: nothing is left unevaluated
    {"$schema": D2020, "properties": {"a": True}, "additionalProperties": {"type": "integer"},
     "unevaluatedProperties": False},
    # an inner unevaluatedProperties evaluates the rest, for the outer one too
    {"$schema": D2020, "allOf": [{"properties": {"a": True},
                                  "unevaluatedProperties": {"type": "string"}}],
     "unevaluatedProperties": False},
    # an anyOf without evaluating keywords leaves the evaluated properties known
    {"$schema": D2020, "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
     "properties": {"a": True, "b": True}, "unevaluatedProperties": False},
    # items: the longest prefix of the schema and its allOf
    {"$schema": D2020, "type": "array", "prefixItems": [{"type": "integer"}],
     "allOf": [{"prefixItems": [True, {"type": "string"}]}], "unevaluatedItems": False},
    # draft 2019-09: a list of items, additionalItems
    {"$schema": D2019, "type": "array", "items": [{"type": "integer"}],
     "allOf": [{"items": [True, True]}], "unevaluatedItems": {"type": "null"}},
]


def _instance(rng: random.Random, array: bool):
    if array:
        return [rng.choice(VALUES) for _ in range(rng.randint(0, 4))]
    return {key: rng.choice(VALUES) for key in rng.sample(KEYS, rng.randint(0, len(KEYS)))}


def _agree(schema: dict, count: int, seed: str) -> int:
    """Random instances judged by grammarc and jsonschema alike; how many are valid."""
    dfa, _ = dfa_of(schema)
    validator = jsonschema.validators.validator_for(schema)(schema)
    rng = random.Random(seed)
    array = schema.get("type") == "array"
    valid = 0
    for _ in range(count):
        value = _instance(rng, array)
        expected = validator.is_valid(value)
        valid += expected
        assert accepts(dfa, canonical_dumps(schema, value)) == expected, (schema, value)
    return valid


@pytest.mark.parametrize("schema", SHAPES)
def test_shapes_agree_with_jsonschema(schema):
    valid = _agree(schema, 600, json.dumps(schema))
    assert 0 < valid < 600


def _part(rng: random.Random, depth: int) -> dict:
    """A random object schema of the keywords that evaluate properties, applied in place."""
    part: dict = {}
    if rng.random() < 0.7:
        part["properties"] = {key: {"type": rng.choice(TYPES)}
                              for key in rng.sample(KEYS, rng.randint(1, 2))}
    if rng.random() < 0.3:
        part["patternProperties"] = {"^x": {"type": rng.choice(TYPES)}}
    if rng.random() < 0.1:
        part["additionalProperties"] = {"type": rng.choice(TYPES)}
    if rng.random() < 0.3:
        part["required"] = [rng.choice(KEYS)]
    if depth < 2 and rng.random() < 0.6:
        part["allOf"] = [_part(rng, depth + 1) for _ in range(rng.randint(1, 2))]
    if depth == 0 and rng.random() < 0.4:
        part["$ref"] = "#/$defs/shared"
    return part


def test_random_compositions_agree_with_jsonschema():
    """60 random compositions of allOf, $ref, properties, patternProperties and
    additionalProperties under an unevaluatedProperties of false or a type, 150 instances
    each."""
    rng = random.Random(2026)
    for case in range(60):
        schema = {"$schema": D2020, "$defs": {"shared": _part(rng, 1)}, **_part(rng, 0),
                  "unevaluatedProperties": rng.choice([False, {"type": "integer"},
                                                       {"type": ["null", "string"]}])}
        _agree(schema, 150, f"random {case}")


PETS = {"Cat": {"type": "object", "properties": {"petType": {"const": "cat"},
                                                "meow": {"type": "boolean"}},
                "required": ["petType"]},
        "Dog": {"type": "object", "properties": {"petType": {"enum": ["dog", "wolf"]},
                                                "bark": {"type": "integer"}},
                "required": ["petType"]}}
UNION = [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]


@pytest.mark.parametrize("schema", [
    {"$schema": D2020, "$defs": PETS, "oneOf": UNION, "properties": {"name": {"type": "string"}},
     "unevaluatedProperties": False},
    {"$schema": D2020, "$defs": PETS, "anyOf": UNION, "unevaluatedProperties": {"type": "null"}},
    {"$schema": D2020, "$defs": PETS, "oneOf": [*UNION, {"type": "string"}],
     "allOf": [{"properties": {"name": True}}], "unevaluatedProperties": False},
])
def test_a_discriminated_union_agrees_with_jsonschema(schema):
    """A `oneOf`/`anyOf` whose branches a required `const`/`enum` key tells apart (OpenAPI's
    discriminated unions): the properties evaluated are the one valid branch's and the
    schema's own, as jsonschema reads them, on 1,500 random instances."""
    dfa, _ = dfa_of(schema)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(json.dumps(schema))
    keys = ["petType", "meow", "bark", "name", "other"]
    valid = 0
    for _ in range(1500):
        value = rng.choice(["x", 1, None]) if rng.random() < 0.1 else {
            key: rng.choice(["cat", "dog", "wolf", "x"]) if key == "petType" else
            rng.choice(VALUES) for key in rng.sample(keys, rng.randint(0, len(keys)))}
        expected = validator.is_valid(value)
        valid += expected
        assert accepts(dfa, canonical_dumps(schema, value)) == expected, value
    assert 0 < valid < 1500


@pytest.mark.parametrize("schema", [
    # branches that one object may satisfy both: no discriminator
    {"$schema": D2020, "$defs": PETS, "oneOf": [UNION[0], UNION[0]],
     "unevaluatedProperties": False},
    {"$schema": D2020, "oneOf": [{"properties": {"a": True}}, {"properties": {"b": True}}],
     "unevaluatedProperties": False},
    {"$schema": D2020, "anyOf": [{"properties": {"a": True}}, {"required": ["b"]}],
     "unevaluatedProperties": False},
    {"$schema": D2020, "if": {"properties": {"a": {"const": 1}}}, "unevaluatedProperties": False},
    {"$schema": D2020, "dependentSchemas": {"a": {"properties": {"b": True}}},
     "unevaluatedProperties": False},
    {"$schema": D2020, "contains": {"type": "integer"}, "unevaluatedItems": False},
    {"$schema": D2020, "oneOf": [{"prefixItems": [True]}, {"items": False}],
     "unevaluatedItems": False},
])
def test_what_depends_on_the_instance_is_refused(schema):
    with pytest.raises(UnsupportedError, match="depends on the instance"):
        dfa_of(schema)
