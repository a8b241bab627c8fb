"""JSON Schema objects as the table writes them: keys in the ranking's order, whitespace
styles, additional keys after the ranked ones, open values nested without bound, and automata
that grow linearly with the properties."""

from __future__ import annotations

import json

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.frontends import FrontendOptions
from grammarc.frontends.json_schema.schema import compile_schema


@pytest.mark.parametrize("additional", [True, False])
def test_optional_properties_grow_the_automaton_linearly(additional):
    """Each optional property may be present or absent; the NFA builder shares the tail
    after it instead of copying it per choice (which grew like 2^n)."""
    def states(count: int) -> int:
        schema = {"type": "object",
                  "properties": {f"key{i}": {"type": "string"} for i in range(count)}}
        dfa, _ = dfa_of(schema, additional_properties=additional)
        return dfa.num_states
    per_property = [(states(b) - states(a)) / (b - a) for a, b in ((5, 10), (40, 80))]
    assert per_property[1] <= 1.1 * per_property[0]
    dfa, _ = dfa_of({"type": "object", "properties": {f"key{i}": {"type": "string"}
                                                      for i in range(40)}})
    sample = {"key3": "a", "key17": "b", "key39": "c"}
    assert accepts(dfa, json.dumps(sample)) and accepts(dfa, json.dumps({}))
    assert not accepts(dfa, json.dumps({"key17": "b", "key3": "a"}))


def test_nested_inline_objects_grow_the_nfa_linearly():
    """A member value is followed by the same rest of its object whether it is the first
    member (no comma) or not: the NFA builder shares its copy (keyed by the state it ends
    in) instead of copying it per variant, which doubled it at every level of nesting."""
    from grammarc.automaton.nfa import build_nfa

    def nfa_states(levels: int) -> int:
        schema: dict = {"type": "boolean"}
        for i in range(levels):
            schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                                       f"b{i}": schema, "c": {"type": "null"}}}
        flat = compile_schema(schema, FrontendOptions(additional_properties=False))
        return build_nfa(flat, 10**8)[0].num_states
    assert nfa_states(32) - nfa_states(16) <= 1.1 * 2 * (nfa_states(16) - nfa_states(8))


# ------------------------------------------------------------------ serialisation rules
def test_keys_follow_the_ranking_and_whitespace_styles():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
              "required": ["a"]}
    for style, separators in (("default", (", ", ": ")), ("compact", (",", ":"))):
        dfa, _ = dfa_of(schema, whitespace=style)
        assert accepts(dfa, json.dumps({"b": 1, "a": "x"}, separators=separators))
        assert not accepts(dfa, json.dumps({"a": "x", "b": 1}, separators=separators))
    flexible, _ = dfa_of(schema, whitespace="flexible")
    assert accepts(flexible, json.dumps({"b": 1, "a": "x"}, indent=2))
    assert not accepts(flexible, '{"a": "x"' + " " * 25 + "}")  # bounded whitespace
    custom, _ = dfa_of(schema, whitespace="[ ]?")
    assert accepts(custom, '{ "b" :1,"a": "x"}')


def test_additional_keys_come_after_ranked_keys_in_any_order():
    schema = {"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}}
    dfa, _ = dfa_of(schema)
    assert accepts(dfa, '{"a": 1, "y": true, "x": false}')
    assert accepts(dfa, '{"x": false, "y": true}')
    assert not accepts(dfa, '{"x": false, "a": 1}')
    assert not accepts(dfa, '{"a": 1, "x": 3}')
    strict, _ = dfa_of({"properties": {"a": {"type": "integer"}}}, additional_properties=False)
    assert not accepts(strict, '{"a": 1, "x": 3}')


def test_ranking_keeps_each_branch_order_where_the_branches_agree():
    # maskbench Github_trivial o64859: a one-key branch first must not move "state" before
    # "current", which the third branch declares first
    branch = {"type": "object", "properties": {"current": {"type": "number"},
                                               "state": {"enum": ["running"]},
                                               "total": {"type": "number"}}}
    schema = {"allOf": [{"oneOf": [{"properties": {"state": {"enum": ["stopped"]}},
                                    "required": ["state"]}, branch]},
                        {"properties": {"id": {"type": "number"}}, "required": ["id"]}]}
    dfa, _ = dfa_of(schema)
    text = '{"current": 5, "state": "running", "total": 9, "id": 1}'
    assert jsonschema.validators.validator_for(schema)(schema).is_valid(json.loads(text))
    assert accepts(dfa, text) and accepts(dfa, '{"state": "stopped", "id": 2}')
    assert not accepts(dfa, '{"state": "running", "current": 5, "id": 1}')
    # conflicting orders fall back to first appearance; required alone imposes no order
    conflicting = {"anyOf": [{"properties": {"a": {}, "b": {}}},
                             {"properties": {"b": {}, "a": {}}, "required": ["b", "a"]}]}
    dfa, _ = dfa_of(conflicting)
    assert accepts(dfa, '{"a": 1, "b": 2}') and not accepts(dfa, '{"b": 2, "a": 1}')


def test_open_positions_nest_without_bound():
    # `items` whose only keyword is unknown constrains nothing: any value, any depth
    schema = {"type": "object", "properties": {"tools": {"type": "array",
                                                         "items": {"tool": {"type": "object"}}}}}
    dfa, notices = dfa_of(schema, max_depth=3)
    deep = {"tools": [{"a": [[{"b": [[[{"c": [1]}]]]}]]}]}
    assert accepts(dfa, json.dumps(deep)) and not notices
    assert not accepts(dfa, json.dumps({"tools": {}}))


def test_many_counted_items_call_one_item_machine():
    item = {"type": "object", "properties": {"id": {"type": "integer"},
                                             "tags": {"type": "array", "items": {"enum": ["x"]},
                                                      "maxItems": 3}},
            "required": ["id"], "additionalProperties": False}
    schema = {"type": "array", "items": item, "minItems": 2, "maxItems": 1000}
    automaton, _ = dfa_of(schema)
    assert "#/items (1)" in automaton.machine_names
    validator = jsonschema.Draft202012Validator(schema)
    for count in (0, 1, 2, 3, 999, 1000, 1001):
        text = json.dumps([{"id": i, "tags": ["x"] * (i % 4)} for i in range(count)])
        assert accepts(automaton, text) == validator.is_valid(json.loads(text)), count
    assert not accepts(automaton, '[{"id": 1}, {"id": 2, "tags": ["x", "x", "x", "x"]}]')


def test_ref_siblings_name_no_keys_before_2019_09():
    # draft 7: `$ref` replaces its siblings, so "present" is an additional key, not a ranked one
    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              "definitions": {"rules": {"properties": {"level": {"type": "string"}}}},
              "properties": {"rule": {"$ref": "#/definitions/rules",
                                      "properties": {"present": {"type": "boolean"}}}}}
    dfa, _ = dfa_of(schema)
    for text in ('{"rule": {"level": "warning", "present": true}}',
                 '{"rule": {"present": 7}}'):
        assert jsonschema.Draft7Validator(schema).is_valid(json.loads(text))
        assert accepts(dfa, text)


def test_open_values_nest_without_bound():
    """`true`, `{}` and default additionalProperties call one "any value" machine."""
    automaton, notices = dfa_of({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert not notices
    deep = {"a": 1, "x": [[[[[[[[[[[[[[[[[[[[{"y": {"z": [1.5, "s", None, True]}}]]]]]]]]]]]]]]]]]]]]}
    assert accepts(automaton, json.dumps(deep))
    assert not accepts(automaton, json.dumps(deep)[:-3] + "}]}")  # one bracket wrong
    assert not accepts(automaton, '{"x": [1, 2}')
    assert not accepts(automaton, '{"x": 1, "a": 1}')  # ranked keys first
