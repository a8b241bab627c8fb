"""JSON Schema boolean operations over objects: allOf merged into one schema, oneOf branches
told apart without a product, conditions on keys compiled into the object, and $refs to objects
inside boolean operations, judged by `jsonschema` (random schemas among them)."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.automaton.linking import language_automaton
from grammarc.automaton.pushdown import PushdownDFA
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.json_schema import canonical_dumps
from grammarc.frontends.json_schema.schema import Compiler


def _random_object_schema(rng: random.Random, depth: int, refs: bool = True) -> Any:
    """A schema of object keywords, an allOf/oneOf/anyOf of such, or (with `refs`) a $ref
    to the shared one."""
    values = [{"type": "integer"}, {"type": "string"}, {"const": 1}, {"enum": [1, "x"]},
              {"const": "x"}, True, False, {"type": ["array", "null"]}]
    if depth and rng.random() < 0.4:
        keyword = rng.choice(["allOf", "allOf", "oneOf", "anyOf"])
        node = {keyword: [_random_object_schema(rng, depth - 1, refs)
                          for _ in range(rng.randint(1, 3))]}
        if rng.random() < 0.5:
            node["required"] = rng.sample("abc", rng.randint(0, 2))
        return node
    if refs and rng.random() < 0.15:
        return {"$ref": "#/$defs/shared"}
    node: dict[str, Any] = {}
    if rng.random() < 0.6:
        node["type"] = rng.choice(["object", ["object", "string"], "string"])
    keys = rng.sample("abc", rng.randint(0, 3))
    if keys:
        node["properties"] = {k: rng.choice(values) for k in keys}
    if rng.random() < 0.5:
        node["required"] = rng.sample("abcd", rng.randint(1, 2))
    if rng.random() < 0.4:
        node["additionalProperties"] = rng.choice([False, {"type": "integer"}, True])
    if rng.random() < 0.2:
        node[rng.choice(["minProperties", "maxProperties"])] = rng.randint(0, 2)
    if rng.random() < 0.3:  # keywords that keep an allOf from being merged: products
        extra = rng.choice([("not", {"required": [rng.choice("abc")]}),
                            ("propertyNames", {"enum": ["a", "b", "d"]}),
                            ("anyOf", [{"required": ["b"]}, {"type": "string"}]),
                            ("minLength", 1), ("dependentRequired", {"a": ["b"]})])
        node[extra[0]] = extra[1]
    if rng.random() < 0.15:  # keys forbidden by pattern
        node["patternProperties"] = {"^[cd]$": rng.choice([False, {"type": "integer"}])}
    if rng.random() < 0.3:  # a discriminator key
        node["type"] = "object"
        node["required"] = sorted({*node.get("required", []), "a"})
        node.setdefault("properties", {})["a"] = rng.choice([{"const": 1}, {"const": "x"},
                                                             {"enum": ["x", None]}])
    return node


def test_all_of_and_one_of_over_objects_against_jsonschema():
    """Merged allOfs, discriminated oneOfs and narrowed intersections, differentially:
    random schemas of object keywords and random values, judged by jsonschema."""
    rng = random.Random(11)
    pool = [1, "x", "y", None, [1], {}, 2.5, 1, "x", ""]
    for _ in range(80):
        schema = {"$defs": {"shared": _random_object_schema(rng, 1, refs=False)},
                  **_random_object_schema(rng, 3)}
        try:
            automaton, _ = dfa_of(schema)
        except GrammarError as exc:
            assert "no value at all" in str(exc) or "no string at all" in str(exc)
            automaton = None
        validator = jsonschema.Draft202012Validator(schema)
        for _ in range(40):
            instance: Any = rng.choice(pool) if rng.random() < 0.2 else {
                k: rng.choice(pool) for k in rng.sample("abcd", rng.randint(0, 4))}
            expected = validator.is_valid(instance)
            got = automaton is not None and \
                accepts(automaton, canonical_dumps(schema, instance))
            assert got == expected, (schema, instance)


def test_a_merged_all_of_that_reaches_itself_is_a_machine_or_unrolled():
    """A merged allOf that opened a $ref may recur through its properties: a machine with
    calls (exact at depth 30); in a document compiled flat, unrolled to --max-depth."""
    node = {"type": "object", "properties": {
        "s": {"type": "string"}, "c": {"allOf": [{"$ref": "#/$defs/n"}, {"required": ["s"]}]}}}
    schema = {"$defs": {"n": node}, "$ref": "#/$defs/n"}

    def chain(depth: int, last: dict) -> dict:
        return last if depth == 0 else {"s": "x", "c": chain(depth - 1, last)}

    automaton, notices = dfa_of(schema)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(schema)
    for instance in [chain(30, {"s": "y"}), chain(30, {}), chain(30, {"c": {"s": "z"}})]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance
    node["properties"]["d"] = {"allOf": [{"$ref": "#/$defs/n"},
                                         {"propertyNames": {"maxLength": 1}}]}
    # a product inside the machine it needs: computed once that machine is built
    automaton, notices = dfa_of(schema)
    assert not notices and isinstance(automaton, PushdownDFA)
    for instance in [chain(30, {"d": {"s": "y"}}), chain(30, {"d": {"ss": "y"}}),
                     {"d": chain(30, {"d": {}})}, {"d": {"c": {"s": "y", "d": {"c": {}}}}}]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance
    notices = []  # compiled flat (as where calls cannot be kept): two recursive keys
    options = FrontendOptions(notice=notices.append, max_depth=1)
    flat = language_automaton(Compiler(schema, options).document(), options.max_states,
                              options.max_depth, notices.append)
    assert not isinstance(flat, PushdownDFA) and any("#/$defs/n" in n for n in notices)
    assert accepts(flat, canonical_dumps(schema, chain(1, {"s": "y"})))
    assert not accepts(flat, canonical_dumps(schema, chain(1, {})))
    assert not accepts(flat, canonical_dumps(schema, chain(5, {"s": "y"})))


def test_a_merged_all_of_with_no_value_leaves_the_rest():
    """Array items whose allOf branches exclude each other's required keys have no value (an
    empty machine): the array is then only `[]`, not a compile error."""
    schema = {"$defs": {"p": {"type": "object", "required": ["a"], "properties": {"a": {}},
                              "additionalProperties": False}},
              "type": "array", "items": {"allOf": [{"$ref": "#/$defs/p"}], "required": ["b"],
                                         "additionalProperties": False}}
    automaton, notices = dfa_of(schema)
    assert not notices
    assert accepts(automaton, "[]")
    assert not accepts(automaton, '[{"a": 1}]') and not accepts(automaton, '[{"b": 1}]')


def test_one_of_objects_told_apart_by_a_required_key_keep_their_calls():
    """oneOf branches that are objects requiring a key with different values (a
    discriminator) share no value: their union, no product, so the values of other keys stay
    calls of "any value", exact at depth 30, with no notice. A branch that may share values
    with them is still told apart by a product, which keeps the calls of "any value" both
    sides make alike: exact at depth 30 too."""
    shape = {"oneOf": [
        {"type": "object", "required": ["kind"], "maxProperties": 3,
         "properties": {"kind": {"const": "a"}}},
        {"type": "object", "required": ["kind", "x"],
         "allOf": [{"properties": {"kind": {"enum": ["b", "c"]}, "x": {"type": "array"}}}]}]}
    automaton, notices = dfa_of(shape)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(shape)
    deep: Any = 1
    for _ in range(30):
        deep = {"y": [deep]}
    for instance in [{"kind": "a", "y": deep}, {"kind": "b", "x": [deep]}, {"kind": "c", "x": 1},
                     {"kind": "a", "x": [], "y": 1, "z": deep}, {"kind": "d", "x": []}, {}]:
        assert accepts(automaton, canonical_dumps(shape, instance)) == \
            validator.is_valid(instance), instance
    shape["oneOf"].append({"type": "object", "required": ["x"]})
    automaton, notices = dfa_of(shape)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(shape)
    for instance in [{"kind": "a"}, {"kind": "b", "x": []}, {"kind": "a", "x": 1}, {"x": 1},
                     {"kind": "a", "y": deep}, {"x": [deep]}, {"kind": "b", "x": [deep]},
                     {"kind": "c", "x": deep}, {"kind": "a", "x": deep, "y": deep}]:
        assert accepts(automaton, canonical_dumps(shape, instance)) == \
            validator.is_valid(instance), instance


def test_one_of_objects_where_one_forbids_a_key_the_other_requires_keep_their_calls():
    """A branch that requires a key and one that forbids it (`false` as its property or
    pattern, or no additional properties) share no value: their union, no product, exact at
    depth 30 with no notice."""
    deep: Any = 1
    for _ in range(30):
        deep = {"y": [deep]}
    for forbidding in [{"additionalProperties": False, "properties": {"y": {}}},
                       {"properties": {"kind": False}},
                       {"patternProperties": {"^k": False}}]:
        shape = {"oneOf": [{"type": "object", "required": ["kind"]},
                           {"type": "object", "required": ["y"], **forbidding}]}
        automaton, notices = dfa_of(shape)
        assert not notices and isinstance(automaton, PushdownDFA), forbidding
        validator = jsonschema.Draft202012Validator(shape)
        for instance in [{"kind": deep}, {"y": deep}, {"kind": 1, "y": deep}, {"y": 1, "z": 2},
                         {"kind": 1, "z": deep}, {}]:
            assert accepts(automaton, canonical_dumps(shape, instance)) == \
                validator.is_valid(instance), (forbidding, instance)


def test_one_of_disjoint_machines_opens_them_and_stays_exact_at_any_depth():
    """oneOf branches that are calls of object machines (both start with `{`) and share no
    value: their bodies are the union, their own calls kept, so a recursion through them is
    exact at depth 30 with no notice (as calls, the next byte could not choose a machine)."""
    schema = {"$defs": {
        "leaf": {"type": "object", "required": ["value"], "properties": {
            "value": {"type": "integer"}}, "additionalProperties": False},
        "group": {"type": "object", "required": ["children"], "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
            "additionalProperties": False},
        "item": {"oneOf": [{"$ref": "#/$defs/leaf"}, {"$ref": "#/$defs/group"}]}},
        "$ref": "#/$defs/item"}
    automaton, notices = dfa_of(schema)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(schema)

    def nested(depth: int, last: Any) -> Any:
        return last if depth == 0 else {"children": [{"value": depth}, nested(depth - 1, last)]}

    for instance in [nested(30, {"value": 0}), nested(30, {"children": []}),
                     nested(30, {"value": "x"}), nested(30, {"value": 1, "children": []}),
                     nested(30, {})]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance


def test_a_key_under_a_property_and_a_pattern_of_one_schema_needs_no_product():
    """A key whose property and matching pattern give the same schema (annotations aside) is
    read by that schema once: a recursion through it stays calls, exact with no notice (as an
    intersection of two calls, it was unrolled to --max-depth 4). Depth 12, not 30: jsonschema
    validates such a key twice per level."""
    schema = {"$defs": {"node": {"type": "object", "additionalProperties": False,
                                 "properties": {"next": {"$ref": "#/$defs/holder"}}},
                        "holder": {"type": "object",
                                   "properties": {"link": {"$ref": "#/$defs/node"}},
                                   "patternProperties": {"^l": {"$ref": "#/$defs/node",
                                                                "description": "a link"}},
                                   "additionalProperties": False}},
              "$ref": "#/$defs/holder"}
    automaton, notices = dfa_of(schema)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(schema)

    def chain(depth: int, last: Any) -> Any:
        return last if depth == 0 else {"link": {"next": chain(depth - 1, last)}}

    for instance in [chain(12, {}), chain(12, {"link": {}}), chain(12, {"lx": {}}),
                     chain(12, {"link": {"other": 1}}), chain(12, {"x": 1})]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance


def test_discriminated_conditions_need_no_product():
    """if/then branches keyed by a `type` const over a recursive schema (a number provider,
    as Minecraft's loot tables write it) are one object automaton with the branches as key
    states: judged by jsonschema on every combination of a discriminator and the keys."""
    provider = {"type": "object", "properties": {"type": {"enum": ["const", "uniform", "binomial"]}},
                "required": ["type"], "allOf": [
                    {"if": {"properties": {"type": {"const": "const"}}},
                     "then": {"properties": {"value": {"type": "number"}}, "required": ["value"]}},
                    {"if": {"properties": {"type": {"const": "uniform"}}},
                     "then": {"properties": {"min": {"$ref": "#/$defs/p"},
                                             "max": {"$ref": "#/$defs/p"}}}},
                    {"if": {"properties": {"type": {"const": "binomial"}}},
                     "then": {"properties": {"n": {"type": "integer"}, "p": {"type": "number"}}}}]}
    schema = {"$defs": {"p": {"anyOf": [{"type": "number"}, {"$ref": "#/$defs/provider"}]},
                        "provider": provider}, "$ref": "#/$defs/provider"}
    automaton, notices = dfa_of(schema)
    assert not notices and not isinstance(automaton, type(None))
    validator = jsonschema.Draft202012Validator(schema)
    values = {"value": [1, "x"], "min": [2, {"type": "const", "value": 3},
                                         {"type": "const", "value": "y"}],
              "max": [{"type": "uniform", "min": {"type": "binomial", "n": 1}}],
              "n": [4, 0.5], "p": [0.5, "z"]}
    verdicts = set()
    for kind in ("const", "uniform", "binomial", "other", None):
        objects = [{} if kind is None else {"type": kind}]
        for key, options in values.items():
            objects += [{**o, key: v} for o in objects for v in options][:40]
        for instance in objects:
            valid = validator.is_valid(instance)
            verdicts.add(valid)
            assert accepts(automaton, canonical_dumps(schema, instance)) == valid, instance
    assert verdicts == {True, False}


# ------------------------------------------------------------------ conditions on keys
KEYED = {"type": "object", "properties": {"kind": {"enum": ["a", "b", 3]},
                                          "p": {"type": ["number", "string"]},
                                          "q": {"type": "integer"}, "r": {"type": "string"}}}
KEY_CONDITIONS = [
    {"anyOf": [{"required": ["p"]}, {"required": ["q"]}]},
    {"oneOf": [{"required": ["p"]}, {"required": ["q"]}, {"required": ["r"]}]},
    {"not": {"required": ["p", "q"]}},
    {"not": {"anyOf": [{"required": ["p"]}, {"properties": {"kind": {"const": "a"}}}]}},
    {"if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
     "then": {"required": ["p"]}, "else": {"not": {"required": ["q"]}}},
    {"dependentRequired": {"r": ["p", "q"]}, "dependentSchemas": {
        "p": {"properties": {"kind": {"enum": ["b", 3]}}}}},
    {"allOf": [{"$ref": "#/$defs/needs-p"}, {"properties": {"p": {"type": "number"}}}]},
    {"oneOf": [{"type": "object", "required": ["p"]}, {"required": ["q"]}]},
    {"anyOf": [{"properties": {"kind": {"const": "a"}, "q": {"minimum": 5}}},
               {"properties": {"kind": {"const": "b"}}, "required": ["kind", "r"]}]},
    # tests of types: by the first byte, but integers are not told from other numbers so
    {"oneOf": [{"properties": {"p": {"type": "integer"}}, "required": ["p"]},
               {"properties": {"p": {"type": ["number", "boolean"]}}}]},
    {"not": {"properties": {"p": {"type": "number"}, "kind": {"type": "string"}}}},
]


def _instances():
    """Objects with every combination of the keys (values of several types), and values of
    other types."""
    values = {"kind": ["a", "b", 3], "p": [1, -1, 2.5, "x"], "q": [2, 7], "r": ["s"]}
    objects = [{}]
    for key, options in values.items():
        objects = objects + [{**o, key: v} for o in objects for v in options]
    return objects + [None, 5, "text", [1], True]


@pytest.mark.parametrize("keyword", ["local", "typeless"])
@pytest.mark.parametrize("index", range(len(KEY_CONDITIONS)))
def test_conditions_on_keys_are_exact(index, keyword):
    """anyOf/oneOf/not/if/dependencies over `required` and `properties` are compiled into
    the object (a state per combination of the keys they name), judged by jsonschema on
    every combination of keys and values, and on values that are not objects."""
    condition = KEY_CONDITIONS[index]
    local = KEYED if keyword == "local" else {"properties": KEYED["properties"]}
    schema = {**local, **condition,
              "$defs": {"needs-p": {"required": ["p"], "properties": {"p": {"minimum": 0}}}}}
    automaton, notices = dfa_of(schema)
    assert not notices
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = set()
    for instance in _instances():
        valid = validator.is_valid(instance)
        verdicts.add(valid)
        assert accepts(automaton, canonical_dumps(schema, instance)) == valid, instance
    assert verdicts == {True, False}


def test_conditions_on_keys_need_no_product_of_objects():
    """An object of 60 properties with conditions on 8 of its keys: as products of automata
    each operand was a whole object with "any value" unrolled in every slot; as conditions
    the object's automaton is a small multiple of the plain one."""
    properties = {f"k{i}": {"type": "string", "format": "date"} for i in range(60)}
    plain = {"type": "object", "properties": properties, "additionalProperties": False}
    schema = {**plain, "anyOf": [{"required": [f"k{i}"]} for i in range(0, 40, 8)],
              "not": {"required": ["k1", "k2"]},
              "oneOf": [{"required": ["k50"]}, {"required": ["k59"]}]}
    base, _ = dfa_of(plain)
    conditioned, notices = dfa_of(schema)
    assert not notices and conditioned.num_states <= 8 * base.num_states
    validator = jsonschema.Draft202012Validator(schema)
    for keys in (["k0", "k50"], ["k8", "k1", "k59"], ["k1", "k2", "k8", "k50"], ["k50"],
                 ["k0", "k50", "k59"], ["k3", "k59"]):
        instance = {k: "2024-02-29" for k in keys}
        assert accepts(conditioned, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), keys


SHAPES = {
    "$defs": {
        "point": {"type": "object", "properties": {"x": {"type": "integer"},
                                                   "y": {"type": "integer"}},
                  "required": ["x", "y"], "additionalProperties": False},
        "circle": {"type": "object", "properties": {"center": {"$ref": "#/$defs/point"},
                                                    "r": {"type": "number", "minimum": 0}},
                   "required": ["center", "r"], "additionalProperties": False},
        "polygon": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 3}},
    "type": "object",
    "properties": {"origin": {"$ref": "#/$defs/point"},
                   "shapes": {"type": "array", "items": {"oneOf": [
                       {"$ref": "#/$defs/circle"}, {"$ref": "#/$defs/polygon"},
                       {"$ref": "#/$defs/point"}]}},
                   "label": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/point"}]},
                   "meta": {}},
    "required": ["shapes"]}


def test_refs_to_objects_and_arrays_are_machines_even_inside_boolean_operations():
    """Each $ref to an object or array schema is one machine; a oneOf of them needs flat
    operands, which inline the machines (exact: none recurses) while the rest of the document
    keeps its calls. Judged by jsonschema on valid instances and on mutants."""
    automaton, notices = dfa_of(SHAPES)
    assert not notices
    assert {"#/$defs/point (1)", "any"} <= set(automaton.machine_names)
    validator = jsonschema.Draft202012Validator(SHAPES)
    rng = random.Random(5)
    point = lambda: {"x": rng.randint(-9, 9), "y": rng.randint(-9, 9)}  # noqa: E731
    for _ in range(60):
        shapes = [rng.choice([{"center": point(), "r": rng.choice([0, 2.5, -1])},
                              [point() for _ in range(rng.randint(2, 4))], point(),
                              {"x": 1}, {"center": point(), "r": 1, "extra": 1}])
                  for _ in range(rng.randint(0, 3))]
        instance = {"origin": point(), "shapes": shapes,
                    "label": rng.choice(["hi", point(), 3]), "meta": [[{"a": [point()]}]] * 3}
        text = canonical_dumps(SHAPES, instance)
        assert accepts(automaton, text) == validator.is_valid(instance), text
        for _ in range(5):
            cut = rng.randrange(len(text))
            mutant = text[:cut] + rng.choice(["", "1", "{", "]", ", ", '"x": 0']) + text[cut + 1:]
            try:
                parsed = json.loads(mutant)
            except json.JSONDecodeError:
                assert not accepts(automaton, mutant), mutant
                continue
            valid = validator.is_valid(parsed)
            if accepts(automaton, mutant):
                assert valid, mutant
            elif canonical_dumps(SHAPES, parsed) == mutant:  # open values' keys in any order
                assert not valid, mutant
