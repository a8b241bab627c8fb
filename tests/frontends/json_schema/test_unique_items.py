"""uniqueItems over a finite item language (enums of strings and objects, booleans, null,
integer ranges, strings a pattern or lengths leave few of, prefixItems, and unions and objects
of these, with keywords that remove some of their values), judged by `jsonschema` on every array of up to 4 items drawn from the
values (and values next to them), in both key orders; a clear error beyond the limits and
`--lenient` dropping the keyword with a notice."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.errors import UnsupportedError
from grammarc.frontends.json_schema import canonical_dumps

SCHEMAS = [
    {"items": {"enum": ["a", "b", "c", 1, 1.0, 2]}, "uniqueItems": True},
    {"items": {"type": "integer", "minimum": -2, "exclusiveMaximum": 3}, "uniqueItems": True,
     "maxItems": 3},
    {"items": {"type": ["boolean", "null"]}, "uniqueItems": True, "minItems": 2},
    {"items": {"enum": [{"a": 1, "b": [1]}, {"b": [1], "a": 1.0}, {"a": 2}, [1, 2]]},
     "uniqueItems": True},
    {"prefixItems": [{"const": 0}], "items": {"type": "integer", "minimum": 0, "maximum": 2},
     "uniqueItems": True},
    {"$defs": {"small": {"type": "integer", "minimum": 1, "maximum": 3}},
     "items": {"allOf": [{"$ref": "#/$defs/small"}, {"enum": [0, 2, 3, 4, "x"]}]},
     "uniqueItems": True},
    # unions: "b" is in both branches of the oneOf, so no item; 1 and 1.0 are one value
    {"items": {"oneOf": [{"enum": ["a", "b", 1]}, {"anyOf": [{"const": "b"}, {"const": 1.0},
                                                             {"type": "boolean"}]}]},
     "uniqueItems": True},
    {"$defs": {"small": {"type": "integer", "minimum": 1, "maximum": 3}},
     "items": {"anyOf": [{"const": "a"}, {"$ref": "#/$defs/small"}], "not": {"const": 2}},
     "uniqueItems": True, "maxItems": 3},
    # objects of such properties and no other, `b` optional; equal values in any key order
    {"items": {"type": "object", "properties": {"a": {"enum": [1, 2]}, "b": {"const": [1]}},
               "required": ["a"], "additionalProperties": False, "maxProperties": 1},
     "uniqueItems": True},
    {"items": {"type": "object", "properties": {"a": {"enum": [1, 2]}, "b": {"const": [1]}},
               "additionalProperties": False}, "uniqueItems": True, "maxItems": 3},
    # strings a pattern or lengths leave few of (read off their automaton), "" among them
    {"items": {"type": "string", "pattern": "^[a-cé]$"}, "uniqueItems": True},
    {"items": {"anyOf": [{"type": "string", "maxLength": 1, "pattern": "^[abx]?$",
                          "not": {"const": "x"}}, {"const": 1}]},
     "uniqueItems": True, "maxItems": 3},
]
POOL = ["a", "b", "c", "", "é", 1, 1.0, 2, -2, -3, 0, 3, True, False, None, {"a": 1, "b": [1]},
        {"a": 2}, [1, 2], "x", 4, {"a": 1}, {"b": [1], "a": 1.0}, {}, {"a": 1, "c": 0}]


@pytest.mark.parametrize("key_order", ["schema", "any"])
@pytest.mark.parametrize("schema", SCHEMAS)
def test_unique_items_against_jsonschema(schema, key_order):
    automaton, notices = dfa_of(schema, key_order=key_order)
    assert not notices
    validator = jsonschema.Draft202012Validator(schema)
    for size in range(5):
        # every array of up to 2 items; of 3, one in 5 (every 5th of the product), of 4, one
        arrays = itertools.product(POOL, repeat=size)
        for items in itertools.islice(arrays, 0, 1 if size > 3 else None, 5 if size > 2 else 1):
            if size > 2 and len(set(map(json.dumps, items))) < size - 1:
                continue  # (arrays with two repeats: enough of them at sizes 0..2)
            instance = list(items)
            text = canonical_dumps(schema, instance)  # (1.0 as an integer is 1)
            assert accepts(automaton, text) == validator.is_valid(instance), (schema, text)
    # an object value in another key order is the same value, and written so in any order
    if key_order == "any" and schema is SCHEMAS[3]:
        assert accepts(automaton, '[{"b": [1], "a": 1}, {"a": 2}]')
        assert not accepts(automaton, '[{"b": [1], "a": 1}, {"a": 1, "b": [1]}]')
    # a string value spelled with an escape is the same value
    if schema is SCHEMAS[-2]:
        assert accepts(automaton, '["a", "\\u00e9"]') and accepts(automaton, '["\\u00E9"]')
        assert not accepts(automaton, '["\u00e9", "\\u00e9"]')


def test_unique_items_beyond_the_limits_is_an_error_or_dropped_with_lenient():
    wide = {"items": {"type": "integer", "minimum": 0, "maximum": 40}, "uniqueItems": True}
    with pytest.raises(UnsupportedError, match=r"^#: uniqueItems over 41 possible values needs "):
        dfa_of(wide)
    automaton, notices = dfa_of({**wide, "maxItems": 2})  # few sets of at most 2 values
    assert not notices and accepts(automaton, "[3, 40]") and not accepts(automaton, "[3, 3]")
    for items in ({"type": "string"}, {"type": "integer", "minimum": 0},
                  {"type": "integer", "minimum": 0, "maximum": 1000}):
        schema = {"items": items, "uniqueItems": True}
        with pytest.raises(UnsupportedError, match=r"uniqueItems is supported only .*"
                           r"\(--lenient ignores it, allowing repeated items\)$"):
            dfa_of(schema)
        automaton, notices = dfa_of(schema, lenient=True)
        assert len(notices) == 1 and notices[0].endswith("; ignored (--lenient)")
        assert accepts(automaton, "[]")
    with pytest.raises(UnsupportedError, match="^#: uniqueItems together with contains is not"):
        dfa_of({"items": {"enum": [1, 2]}, "contains": {"const": 1}, "uniqueItems": True})


@pytest.mark.parametrize("schema", [
    {"items": {"type": "string"}, "uniqueItems": True, "maxItems": 1},
    {"prefixItems": [{"type": "string"}], "items": False, "uniqueItems": True},
    {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}],
     "additionalItems": False, "uniqueItems": True},
    {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False,
     "uniqueItems": True, "maxItems": 1},
])
def test_unique_items_of_arrays_of_at_most_one_item_is_no_constraint(schema):
    """An array that holds at most one item is unique whatever its item language (an
    unbounded one here, which two items could not be kept unique over)."""
    automaton, notices = dfa_of(schema)
    assert not notices
    assert accepts(automaton, "[]") and accepts(automaton, '["a"]')
    assert not accepts(automaton, '["a", "b"]') and not accepts(automaton, '["a", "a"]')


def test_the_strings_of_a_finite_language_are_read_once_each_and_only_when_few():
    from grammarc.automaton.products import Ops
    from grammarc.frontends.json_schema import strings

    def values(pattern: str, most: int = 256):
        return strings.finite_values(Ops(100_000).dfa(strings.pattern_texts(pattern, "#")),
                                     most)

    assert values("^(GET|POST|PUT)$") == ["GET", "POST", "PUT"]
    assert values("^[\\n\"\\\\/é]?$") is not None
    assert sorted(values("^[\\n\"\\\\/é]?$")) == sorted(["", "\n", '"', "\\", "/", "é"])
    assert values("^a+$") is None                 # without bound
    assert values("^.$") is None                  # a million characters: past the budget
    assert values("^[a-z]{2}$") is None           # 676 values, more than 256
    assert len(values("^[a-z]{2}$", 1000)) == 676

