"""`unevaluatedProperties` and `unevaluatedItems` (`frontends/json_schema/unevaluated.py`):
hand-picked shapes, random compositions of `allOf`, `$ref`, `properties`, `patternProperties`
and `additionalProperties`, under the schema's own `oneOf`, `anyOf` or `if` too, and
discriminated unions, judged by jsonschema on random instances; those that depend on the
instance otherwise are refused."""

from __future__ import annotations

import json
import random
from itertools import combinations, product

import jsonschema
import pytest
from helpers import dfa_of, judged_like_jsonschema

from grammarc.errors import GrammarError, UnsupportedError

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
    # anyOf: the properties of every branch that validates, two together too
    {"$schema": D2020, "anyOf": [{"properties": {"a": {"type": "integer"}}},
                                 {"properties": {"b": {"type": "string"}}}],
     "unevaluatedProperties": False},
    # oneOf: those of the one branch that validates
    {"$schema": D2020, "oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                 {"properties": {"b": {"type": "string"}}}],
     "properties": {"c": True}, "unevaluatedProperties": {"type": "null"}},
    # if: those of `if` and `then` where `if` validates, else those of `else`
    {"$schema": D2020, "if": {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
     "then": {"properties": {"b": True}}, "else": {"properties": {"c": True}},
     "unevaluatedProperties": False},
    # dependentSchemas: those of the schemas of the keys present
    {"$schema": D2020, "properties": {"a": True},
     "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}},
                          "x1": {"properties": {"c": True}}},
     "unevaluatedProperties": {"type": "null"}},
    # an applicator in a schema applied in place, beside a $ref: the oneOf of an allOf branch
    {"$schema": D2020, "$defs": {"base": {"properties": {"c": True}}},
     "allOf": [{"$ref": "#/$defs/base"},
               {"oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                          {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}],
     "unevaluatedProperties": False},
    # the if of a $ref's target
    {"$schema": D2020, "$defs": {"cond": {"if": {"required": ["a"]},
                                          "then": {"properties": {"b": True}},
                                          "else": {"properties": {"c": True}}}},
     "$ref": "#/$defs/cond", "properties": {"a": True}, "unevaluatedProperties": False},
    # items: those a contains matches (2020-12), past the prefix
    {"$schema": D2020, "type": "array", "prefixItems": [True], "contains": {"type": "string"},
     "unevaluatedItems": {"type": "null"}},
    {"$schema": D2020, "type": "array", "contains": {"type": "string"}, "minContains": 0,
     "allOf": [{"contains": {"type": "integer"}}], "unevaluatedItems": False},
    # and where an if's contains validates
    {"$schema": D2020, "type": "array", "if": {"contains": {"const": 1}},
     "then": {"prefixItems": [True, True]}, "else": {"contains": {"type": "boolean"}},
     "unevaluatedItems": {"type": "string"}},
    # items: the longest prefix among the branches that validate
    {"$schema": D2020, "type": "array", "anyOf": [{"prefixItems": [{"type": "integer"}]},
                                                  {"prefixItems": [True, {"type": "string"}]}],
     "unevaluatedItems": {"type": "null"}},
]


def _instance(rng: random.Random, array: bool):
    if array:
        return [rng.choice(VALUES) for _ in range(rng.randint(0, 4))]
    return {key: rng.choice(VALUES) for key in rng.sample(KEYS, rng.randint(0, len(KEYS)))}


def _agree(schema: dict, count: int, seed: str) -> int:
    """Random instances judged by grammarc and jsonschema alike; how many are valid."""
    rng = random.Random(seed)
    array = schema.get("type") == "array"
    return judged_like_jsonschema(schema, [_instance(rng, array) for _ in range(count)])


def _every_instance(array: bool) -> list:
    """Every object of the keys `KEYS` with values of `VALUES` (1,296), or every array of up
    to three of them (156)."""
    if array:
        return [list(items) for size in range(4) for items in product(VALUES, repeat=size)]
    return [dict(zip(keys, values)) for size in range(len(KEYS) + 1)
            for keys in combinations(KEYS, size) for values in product(VALUES, repeat=size)]


@pytest.mark.parametrize("schema", SHAPES)
def test_shapes_agree_with_jsonschema(schema):
    """Each shape judged on every small instance, as jsonschema judges it."""
    instances = _every_instance(schema.get("type") == "array")
    assert 0 < judged_like_jsonschema(schema, instances) < len(instances)


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
    rng = random.Random(json.dumps(schema))
    keys = ["petType", "meow", "bark", "name", "other"]
    instances = [rng.choice(["x", 1, None]) if rng.random() < 0.1 else {
        key: rng.choice(["cat", "dog", "wolf", "x"]) if key == "petType" else
        rng.choice(VALUES) for key in rng.sample(keys, rng.randint(0, len(keys)))}
        for _ in range(1500)]
    assert 0 < judged_like_jsonschema(schema, instances) < 1500


def _items_part(rng: random.Random) -> dict:
    """A random array schema of the keywords that evaluate items (draft 2020-12)."""
    part: dict = {}
    if rng.random() < 0.8:
        part["prefixItems"] = [{"type": rng.choice(TYPES)} if rng.random() < 0.6 else True
                               for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.15:
        part["items"] = {"type": rng.choice(TYPES)}
    if rng.random() < 0.3:
        part["minItems"] = rng.randint(1, 2)
    if rng.random() < 0.25:
        part["contains"] = {"type": rng.choice(TYPES)}
    return part


@pytest.mark.parametrize("kind", ["oneOf", "anyOf", "if", "dependentSchemas"])
def test_compositions_under_an_applicator_agree_with_jsonschema(kind):
    """The `oneOf`, `anyOf` (every nonempty set of branches that may validate together),
    `if`/`then`/`else` or `dependentSchemas` of the schema, or (every other case) of an `allOf`
    branch, decides what is evaluated: 40 random compositions of each for properties and 15
    for items, 150 instances each."""
    rng = random.Random(f"applicator {kind}")
    for case in range(55):
        array = case >= 40
        part = (lambda: _items_part(rng)) if array else (lambda: _part(rng, 1))
        schema = {"$schema": D2020, **({"type": "array"} if array else
                                       {"$defs": {"shared": part()}, **_part(rng, 1)})}
        if kind == "if":
            schema["if"] = part()
            for key in ("then", "else"):
                if rng.random() < 0.7:
                    schema[key] = part()
        elif kind == "dependentSchemas":
            if array:
                continue  # (it applies to objects only)
            schema[kind] = {key: part() for key in rng.sample(KEYS, rng.randint(1, 3))}
        else:
            schema[kind] = [part() for _ in range(rng.randint(2, 3))]
        if case % 2:  # the applicator in an allOf branch instead, with the schema's own
            moved = {key: schema.pop(key) for key in ("if", "then", "else", kind)
                     if key in schema}
            schema["allOf"] = [*schema.get("allOf", []), moved]
        keyword = "unevaluatedItems" if array else "unevaluatedProperties"
        schema[keyword] = rng.choice([False, {"type": "integer"}, {"type": ["null", "string"]}])
        try:
            _agree(schema, 150, f"{kind} {case}")
        except GrammarError as exc:  # e.g. branches no instance satisfies exactly one of
            assert "accepts no value" in str(exc), (schema, exc)
            validator = jsonschema.Draft202012Validator(schema)
            rng_values = random.Random(f"{kind} {case}")
            assert not any(validator.is_valid(_instance(rng_values, array))
                           for _ in range(150)), schema


@pytest.mark.parametrize("schema", [
    # a set of properties known only from the instance, through two applicators at once
    {"$schema": D2020, "oneOf": [{"properties": {"a": True}}, {"required": ["b"]}],
     "if": {"properties": {"b": {"const": 1}}}, "unevaluatedProperties": False},
    # or from an applicator below a branch
    {"$schema": D2020, "oneOf": [{"anyOf": [{"properties": {"a": True}}, {"required": ["b"]}]},
                                 {"required": ["c"]}], "unevaluatedProperties": False},
    # an anyOf of more than four branches that evaluate (a case per set of them)
    {"$schema": D2020, "anyOf": [{"properties": {key: True}} for key in "abcde"],
     "unevaluatedProperties": False},
    # a dependentSchemas of more than four keys whose schemas evaluate
    {"$schema": D2020, "dependentSchemas": {key: {"properties": {key * 2: True}}
                                            for key in "abcde"},
     "unevaluatedProperties": False},
    # before 2020-12, the items a contains matches are not said to be evaluated
    {"$schema": D2019, "contains": {"type": "integer"}, "unevaluatedItems": False},
])
def test_what_depends_on_the_instance_is_refused(schema):
    with pytest.raises(UnsupportedError, match="depends on the instance"):
        dfa_of(schema)
