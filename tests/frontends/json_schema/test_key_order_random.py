"""`--key-order any` against `jsonschema` on random object schemas (required and optional
properties, additionalProperties, patternProperties, dependencies) and random objects written
in random key orders; and the schema-order fallback where any order needs more than
--max-states states."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.compiler import build_automaton
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions

NAMES = "abcd"
EXTRA_NAMES = ["x1", "xy", "z"]  # "x..." match the pattern below, "z" matches none
VALUE_SCHEMAS = [{"type": "string"}, {"type": "integer"}, {"enum": [1, "x", None]},
                 {"type": "boolean"}, {}, {"type": "array", "items": {"type": "integer"}}]
VALUES = [1, -3, "x", "", None, True, False, [1, 2], ["a"], {}, 2.5]


def _random_schema(rng: random.Random) -> dict[str, Any]:
    """An object schema (draft 7) over a few of NAMES with random keywords."""
    names = rng.sample(NAMES, rng.randint(1, len(NAMES)))
    schema: dict[str, Any] = {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {n: rng.choice(VALUE_SCHEMAS) for n in names}}
    if rng.random() < 0.7:
        schema["required"] = rng.sample(names, rng.randint(1, len(names)))
    if rng.random() < 0.4:
        schema["patternProperties"] = {"^x": rng.choice(VALUE_SCHEMAS[:4])}
    roll = rng.random()
    if roll < 0.3:
        schema["additionalProperties"] = False
    elif roll < 0.5:
        schema["additionalProperties"] = {"type": "integer"}
    if rng.random() < 0.4:
        key, *others = rng.sample(names, min(len(names), rng.randint(2, 3)))
        schema["dependencies"] = {key: others} if rng.random() < 0.5 or not others else \
            {key: {"properties": {others[0]: {"type": "string"}}}}
    if rng.random() < 0.2:
        schema["maxProperties"] = rng.randint(1, 3)
    return schema


def _random_object(rng: random.Random) -> dict[str, Any]:
    """An object of some of NAMES and EXTRA_NAMES, its keys in a random order."""
    keys = rng.sample(list(NAMES) + EXTRA_NAMES, rng.randint(0, 5))
    return {k: rng.choice(VALUES) for k in keys}


@pytest.mark.parametrize("seed", range(6))
def test_random_objects_in_random_key_orders_against_jsonschema(seed: int) -> None:
    rng = random.Random(seed)
    valid_seen = invalid_seen = 0
    for _ in range(8):
        schema = _random_schema(rng)
        try:
            automaton, notices = dfa_of(schema, key_order="any")
        except GrammarError as exc:  # required keys past maxProperties: no object at all
            assert "no value at all" in str(exc)
            automaton, notices = None, []
        assert not [n for n in notices if "any order" in n], notices
        validator = jsonschema.Draft7Validator(schema)
        for _ in range(60):
            instance = _random_object(rng)
            valid = validator.is_valid(instance)
            valid_seen += valid
            invalid_seen += not valid
            # the object as drawn and with its keys reversed: the same verdict
            for order in (instance, dict(reversed(list(instance.items())))):
                text = json.dumps(order)
                assert (automaton is not None and accepts(automaton, text)) == valid, \
                    (schema, text)
    assert valid_seen > 20 and invalid_seen > 20


def test_duplicate_keys_are_refused_in_any_order() -> None:
    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    automaton, _ = dfa_of(schema, key_order="any")
    assert accepts(automaton, '{"b": 1, "a": 2}')
    assert not accepts(automaton, '{"a": 1, "b": 2, "a": 3}')
    assert not accepts(automaton, '{"b": 1, "b": 2}')


def _automaton(schema: Any, key_order: str, max_states: int) -> tuple[Any, list[str]]:
    notices: list[str] = []
    options = FrontendOptions(key_order=key_order, max_states=max_states,
                              notice=notices.append)
    return build_automaton("json-schema", json.dumps(schema), None, options), notices


def test_too_many_states_in_any_order_fall_back_to_the_schema_order() -> None:
    """A union of three objects of six keys each: in any order about 7,000 states, past a
    --max-states of 4,096 (while each object alone is small enough to be allowed in any
    order), so the automaton takes the schema's order (the same as with --key-order schema)
    and says so once."""
    names = list("abcdef")
    schema = {"anyOf": [{"type": "object", "properties": {n: {"type": t} for n in names},
                         "required": [r]}
                        for t, r in (("string", "a"), ("integer", "b"), ("boolean", "c"))]}
    limit = 4096
    with pytest.raises(GrammarError, match="--max-states"):  # any order alone does not fit
        dfa_of(schema, key_order="any", max_states=limit)
    fallback, notices = _automaton(schema, "any", limit)
    in_order, plain = _automaton(schema, "schema", limit)
    assert not plain
    assert len(notices) == 1 and "any order" in notices[0] and "--max-states" in notices[0]
    assert fallback.num_states == in_order.num_states
    assert accepts(fallback, '{"a": "v", "b": "w"}')
    assert not accepts(fallback, '{"b": "w", "a": "v"}')
    # with room enough, the same schema is in any order, without a notice
    roomy, quiet = _automaton(schema, "any", 200_000)
    assert not quiet and accepts(roomy, '{"b": "w", "a": "v"}')
    assert not accepts(roomy, '{"c": "v"}') and not accepts(roomy, '{"b": 1, "b": 2}')


def test_other_errors_in_any_order_are_not_retried() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}
    with pytest.raises(GrammarError, match="nowhere"):
        _automaton(schema, "any", 100_000)
