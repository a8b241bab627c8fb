"""Differences over numbers (`not`, overlapping `oneOf`, `if`/`else`, `contains` counts) are
taken over canonical spellings and give the minuend's other spellings back: against
`jsonschema` on exact values, every spelling of many values, the grammar accepts no invalid
text, and every valid one without an exponent or negative zero."""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal

import jsonschema
import pytest
from helpers import accepts, dfa_of

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
VALUES = [Decimal(v) for v in ("-2", "-1", "-0.5", "0", "0.25", "0.5", "1", "1.5", "2", "2.5",
                               "3", "10")]
BOUNDED = {"type": "number", "minimum": 0, "maximum": 1}
CASES = [  # (schema, options, the texts' templates: each {} a number)
    ({"not": {"const": 1}}, {}, ["{}", "[{}]"]),
    ({"type": "number", "not": {"type": "integer"}}, {}, ["{}"]),
    ({"type": "integer", "not": {"enum": [1, 2]}}, {"integer_fractions": True}, ["{}"]),
    ({"type": "number", "oneOf": [{"minimum": 0, "maximum": 2}, {"minimum": 1, "maximum": 3}]},
     {}, ["{}"]),
    ({"type": "number", "oneOf": [{"multipleOf": 0.5}, {"type": "integer"}]},
     {"integer_fractions": True}, ["{}"]),
    ({"type": "number", "if": {"type": "integer"}, "then": {"minimum": 0},
      "else": {"maximum": 1.5}}, {"integer_fractions": True}, ["{}"]),
    ({"type": "object", "properties": {"v": BOUNDED}, "required": ["v"],
      "additionalProperties": False, "not": {"properties": {"v": {"const": 0.5}}}}, {},
     ['{{"v": {}}}']),
    ({"$schema": DRAFT7, "type": "array", "if": {"items": {"type": "string"}},
      "else": {"items": {"type": "object", "properties": {"v": BOUNDED},
                         "additionalProperties": False}}},
     {}, ['[{{"v": {}}}]', '[{{"v": {}}}, {{"v": {}}}]']),
    ({"type": "array", "items": {"type": "number"}, "contains": {"const": 1},
      "maxContains": 1}, {}, ["[{}]", "[{}, {}]"]),
    ({"$schema": DRAFT4, "type": "number", "not": {"type": "integer"}}, {}, ["{}"]),
    ({"$schema": DRAFT4, "not": {"enum": [1, 2.5]}}, {}, ["{}", "[{}]"]),
    ({"$schema": DRAFT4, "type": "object", "properties": {"v": {"type": "number"}},
      "oneOf": [{"properties": {"v": {"type": "integer"}}}, {"properties": {"v": BOUNDED}}]},
     {}, ['{{"v": {}}}']),
]
EXPONENT = re.compile(r"[eE]")
NEGATIVE_ZERO = re.compile(r"-0(\.0*)?(?![.\d])")


def spellings(value: Decimal) -> list[str]:
    """Spellings of `value`: canonical, with trailing zeros, with exponents, negative zero."""
    text = format(value.normalize(), "f")
    out = [text, *(text + zeros for zeros in (("0", "00") if "." in text else (".0", ".00")))]
    out += [text + "e0", text + "E+0", format(value * 10, "f") + "e-1"]
    if value == 0:
        out += ["-0", "-0.0", "-0.00", "-0e0"]
    return out


def _instance(text: str, draft4: bool):
    """The text's value for the oracle: exact numbers; an integral one an integer, except in
    draft 4, where `1.0` is no integer."""
    def number(spelled: str):
        value = Decimal(spelled)
        return int(value) if not draft4 and value == value.to_integral_value() else value
    return json.loads(text, parse_float=number)


@pytest.mark.parametrize("schema,options,templates", CASES,
                         ids=[json.dumps(case[0])[:60] for case in CASES])
def test_differences_over_numbers_keep_every_spelling_without_exponent(schema, options,
                                                                      templates):
    schema = json.loads(json.dumps(schema), parse_float=Decimal)  # exact bounds
    dfa, _ = dfa_of(schema, **options)
    draft4 = schema.get("$schema") == DRAFT4
    validator = jsonschema.validators.validator_for(schema)(schema)
    texts = [spelled for value in VALUES for spelled in spellings(value)]
    checked = refused = 0
    for template in templates:
        count = template.count("{}")
        for numbers in itertools.product(texts, repeat=count) if count == 1 else \
                zip(texts, texts[7:] + texts[:7]):
            text = template.format(*numbers)
            valid = validator.is_valid(_instance(text, draft4))
            accepted = accepts(dfa, text)
            assert valid or not accepted, f"accepts invalid {text}"
            if valid and not any(EXPONENT.search(n) or NEGATIVE_ZERO.match(n)
                                 for n in numbers):
                assert accepted, f"refuses valid {text}"
            checked += 1
            refused += valid and not accepted
    assert checked > 40


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "integer"}, {"const": 1}]},
    {"if": {"const": 1}, "then": False, "else": {"type": "integer"}},
    {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "maxContains": 1},
])
def test_a_difference_gives_back_only_the_minuends_spellings(schema):
    """An integer is written without fraction (without --integer-fractions), in the
    minuend of a difference too: `2` survives the subtraction of 1, but `2.0` is no text of
    the minuend, though it spells a value of the difference."""
    dfa, _ = dfa_of(schema)
    texts = ("[1, 2]", "[1, 2.0]", "[1.0, 2]") if schema.get("type") == "array" else \
        ("2", "2.0", "1")
    assert [accepts(dfa, text) for text in texts] == [True, False, False]
