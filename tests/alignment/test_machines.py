"""Machines kept per vocabulary (`alignment.machines`): a compile that takes a called
machine's entries from the cache gives exactly the tables of a compile that walks every
state, on the real SmolLM2 vocabulary."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from grammarc import compile_json_schema
from grammarc.alignment.flat import tokenizer_trie
from grammarc.alignment.machines import machine_cache
from grammarc.tokenizers import Tokenizer

SCHEMAS = [
    # any value (extra keys), plain strings, a format, strings in an array
    {"type": "object", "properties": {
        "name": {"type": "string"}, "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}}, "size": {"type": "integer"}}},
    # a counted string, a pattern, a format for every extra key
    {"type": "object", "properties": {
        "note": {"type": "string", "maxLength": 300},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
     "required": ["note"], "additionalProperties": {"type": "string", "format": "email"}},
    # recursion through a definition, strings and any value inside it
    {"$defs": {"node": {"type": "object", "properties": {
        "label": {"type": "string"}, "data": {},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
     "$ref": "#/$defs/node"},
]


def _arrays(table) -> dict[str, np.ndarray]:
    """Every array of a token table and of its call tables, by name."""
    found = {}
    for part, prefix in ((table, ""), (table.calls, "calls.")):
        for field in dataclasses.fields(part):
            value = getattr(part, field.name)
            if isinstance(value, np.ndarray):
                found[prefix + field.name] = value
    return found


@pytest.mark.parametrize("schema", SCHEMAS, ids=["object", "counted", "recursive"])
def test_kept_machines_give_the_tables_of_a_walk_of_every_state(smollm2: Tokenizer, schema):
    alone = copy.copy(smollm2)  # an object of its own: its own trie, no machine kept for it
    walked = compile_json_schema(schema, alone)
    for _ in range(3):  # met once (noted), twice (walked alone and kept), then taken as kept
        kept = compile_json_schema(schema, smollm2)
    cache = machine_cache(tokenizer_trie(smollm2), smollm2.vocab_size, smollm2.eos_token_ids)
    assert len(cache) > 0
    assert len(machine_cache(tokenizer_trie(alone), alone.vocab_size, alone.eos_token_ids)) == 0
    expected, got = _arrays(walked.table), _arrays(kept.table)
    assert expected.keys() == got.keys()
    for name, array in expected.items():
        assert np.array_equal(array, got[name]), name
