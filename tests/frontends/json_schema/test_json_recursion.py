"""Recursive JSON Schemas: $refs as machines called through a stack, exact at depth 30 as
judged by `jsonschema`, inside intersections and differences too, and unrolled to --max-depth
with a notice where calls cannot be kept (never accepting an invalid value)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from grammar_oracles import dead_end_entries
from helpers import accepts, dfa_of, table_grammar

import grammarc
from grammarc.automaton import ByteDFA, concat, repeat
from grammarc.automaton.expr import Automaton, Call, MachineSet, alt, literal
from grammarc.automaton.linking import language_automaton
from grammarc.automaton.pushdown import PushdownDFA
from grammarc.errors import EmptyLanguageError, GrammarError, TooManyStatesError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.json_schema import canonical_dumps
from grammarc.frontends.json_schema.schema import Compiler

ROOT = Path(__file__).resolve().parents[3]


LINKED_LIST = {
    "$defs": {"cell": {"type": "object", "properties": {
        "head": {"type": "string", "maxLength": 3}, "tail": {"$ref": "#/$defs/cell"}},
        "required": ["head"], "additionalProperties": False}},
    "$ref": "#/$defs/cell"}


def _tree(depth: int, leaf: Any) -> dict:
    node = {"value": leaf if depth == 0 else depth % 100}
    if depth:
        node["children"] = [_tree(depth - 1, leaf)]
    return node


def _cells(depth: int, head: Any) -> dict:
    return {"head": head} if depth == 0 else {"head": "ab", "tail": _cells(depth - 1, head)}


@pytest.mark.parametrize("schema,build", [
    (json.loads((ROOT / "grammars" / "tree.schema.json").read_text()), _tree),
    (LINKED_LIST, _cells),
])
def test_recursive_refs_are_exact_at_any_depth(schema, build):
    """Recursive $refs become machines called through a stack: depth 30 is as exact as depth
    1, judged by jsonschema, with no notice; a wrong leaf 30 levels down is rejected."""
    automaton, notices = dfa_of(schema)
    assert not notices
    validator = jsonschema.Draft202012Validator(schema)
    for depth in (0, 1, 5, 30):
        for leaf in (7, "ab", "abcd", None):
            instance = build(depth, leaf)
            text = canonical_dumps(schema, instance)
            assert accepts(automaton, text) == validator.is_valid(instance), text
        good = canonical_dumps(schema, build(depth, 7 if build is _tree else "ab"))
        for cut in range(1, len(good), max(len(good) // 40, 1)):
            assert not accepts(automaton, good[:cut] + good[cut + 1:]) or \
                validator.is_valid(json.loads(good[:cut] + good[cut + 1:])), cut


def test_one_of_branches_that_start_differently_keep_their_calls():
    """A oneOf whose branches cannot start with the same byte is their union: no product,
    so a recursive $ref in a branch stays exact at any depth, with no notice."""
    schema = {"$defs": LINKED_LIST["$defs"],
              "oneOf": [{"type": "string"}, {"$ref": "#/$defs/cell"}, {"type": "null"}]}
    automaton, notices = dfa_of(schema)
    assert not notices
    validator = jsonschema.Draft202012Validator(schema)
    for instance in ["text", None, 3, _cells(30, "ab"), _cells(30, "abcd"), _cells(0, 5)]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance


def test_a_type_beside_applicators_narrows_them_by_first_byte():
    """`"type": "object"` beside an anyOf of an untyped (recursive) schema keeps the anyOf's
    object values (a narrower machine) instead of a product: exact at depth 30, no notice."""
    cell = {k: v for k, v in LINKED_LIST["$defs"]["cell"].items() if k != "type"}
    schema = {"$defs": {"cell": cell}, "type": "object", "anyOf": [{"$ref": "#/$defs/cell"}]}
    automaton, notices = dfa_of(schema)
    assert not notices
    validator = jsonschema.Draft202012Validator(schema)
    assert jsonschema.Draft202012Validator(cell).is_valid(None)  # the cell alone takes more
    for instance in [None, "ab", [1], 3, {}, _cells(30, "ab"), _cells(30, "abcd"),
                     _cells(2, None), {"head": "a", "tail": None}]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance


def test_all_of_object_schemas_is_one_schema_exact_at_any_depth():
    """An allOf of schemas with object keywords only (through $refs) is merged into one
    schema, each key's value the conjunction of what every branch says of it: no product,
    so a recursive $ref stays a call, exact at depth 30, with no notice."""
    tree = json.loads((ROOT / "grammars" / "tree.schema.json").read_text())
    schema = {"$defs": tree["$defs"], "allOf": [
        {"$ref": "#/$defs/node"}, {"maxProperties": 2},
        {"properties": {"value": {"maximum": 50}}, "required": ["value"]}]}
    automaton, notices = dfa_of(schema)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(schema)
    for instance in [{"value": 50}, {"value": 51}, {"value": 3, "children": []}, {}, None,
                     {"value": 1, "children": [_tree(30, 7)]}, {"value": 1, "x": 2}, "x", 7]:
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance
    schema = {"allOf": [{"type": "object", "required": ["a"]},
                        {"properties": {"a": {"type": "integer"}}}, {"type": ["object", "string"]}]}
    merged, _ = dfa_of(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for instance in [{"a": 1}, {"a": "1"}, {}, {"a": 1, "b": [2]}, "a", 3]:
        assert accepts(merged, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance


def test_an_intersection_keeps_the_calls_of_a_recursion_exact_at_any_depth():
    """An intersection of a recursive $ref with other keywords keeps the calls of both
    operands (a call of both at one point is a call of a machine of their common values):
    exact at depth 30, no notice; before, the recursion was unrolled to --max-depth there."""
    tree = json.loads((ROOT / "grammars" / "tree.schema.json").read_text())
    schema = {"$defs": tree["$defs"], "allOf": [{"$ref": "#/$defs/node"}, {"maxProperties": 2},
                                                 {"propertyNames": {"maxLength": 8}}]}
    automaton, notices = dfa_of(schema, max_depth=4)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(schema)

    def chain(depth: int, last: dict) -> dict:
        return last if depth == 0 else {"value": depth % 100, "children": [chain(depth - 1,
                                                                                  last)]}

    for last in [{"value": 1}, {"value": 100}, {"value": 1, "children": [], "x": 1}]:
        for depth in (0, 1, 5, 30):
            instance = chain(depth, last)
            assert accepts(automaton, canonical_dumps(schema, instance)) == \
                validator.is_valid(instance), (depth, last)


def _chains(depth: int) -> list[dict]:
    """Chains of objects `depth` levels deep (each level's `c` holds the next), varied at
    the root and at the deepest level."""
    def chain(level: int, last: dict, top: dict) -> dict:
        if level == depth:
            return last
        node = {"v": level, "c": [chain(level + 1, last, top)]}
        return {**node, **top} if level == 0 else node

    leaves = [{"v": 1}, {"v": "s"}, {"x": 1}, {"w": 1}, {"v": 1, "c": [{"v": 2}, {"v": 3},
                                                                          {"v": 4}]}]
    return [chain(0, last, top) for last in leaves for top in ({}, {"w": 1}, {"x": 1})]


def _exact_on_chains(schema: dict) -> PushdownDFA:
    """The schema's machines, checked to come with no notice and to judge `_chains` 1, 6 and
    30 levels deep as jsonschema does (some valid, some not)."""
    automaton, notices = dfa_of(schema, max_depth=4)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = set()
    for depth in (1, 6, 30):
        for instance in _chains(depth):
            valid = validator.is_valid(instance)
            verdicts.add(valid)
            assert accepts(automaton, canonical_dumps(schema, instance)) == valid, instance
    assert verdicts == {True, False}
    return automaton


def test_an_intersection_of_two_recursions_is_a_recursive_machine():
    """Two different recursive $refs intersected: the call of both at one point is a call of
    a machine of their common values, which calls itself where both recurse: exact at depth
    30, no notice, checked with jsonschema."""
    schema = {"$defs": {
        "A": {"type": "object", "properties": {
            "v": {"type": "integer"}, "c": {"type": "array", "items": {"$ref": "#/$defs/A"}}}},
        "B": {"type": "object", "propertyNames": {"enum": ["v", "c", "w"]}, "properties": {
            "c": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/B"}}}}},
        "allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]}
    automaton = _exact_on_chains(schema)
    assert any(" & " in name for name in automaton.machine_names)


def test_a_difference_keeps_the_calls_both_sides_make_alike():
    """`not` beside a recursive $ref: the values of `not` and of the schema it excludes call
    the same "any value" machine, which stays a call, and the recursion meets it: exact at
    depth 30, no notice."""
    schema = {"$defs": {"A": {"type": "object", "properties": {
        "v": {"type": "integer"}, "c": {"type": "array", "items": {"$ref": "#/$defs/A"}}}}},
        "$ref": "#/$defs/A", "not": {"required": ["w"]}}
    _exact_on_chains(schema)


def test_an_any_of_of_recursions_that_start_alike_is_a_machine_of_both():
    """anyOf two object $refs inside their own recursion (with a sibling `type`, as real
    schemas write it): both start with `{`, so neither can stay a call; their union is a
    machine of its own, built once they are: exact at depth 30, no notice."""
    items = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "type": "object"}
    schema = {"$defs": {
        "A": {"type": "object", "required": ["v"], "additionalProperties": False,
              "properties": {"v": {"type": "integer"}, "c": {"$ref": "#/$defs/list"}}},
        "B": {"type": "object", "required": ["x"], "additionalProperties": False,
              "properties": {"x": {}, "w": {"$ref": "#/$defs/list"}}},
        "list": {"type": "array", "items": items}},
        "$ref": "#/$defs/A"}
    automaton = _exact_on_chains(schema)
    assert any(name.startswith("anyOf of") for name in automaton.machine_names)


def test_a_one_of_inside_its_own_recursion_is_a_machine_built_after_it():
    """oneOf of a recursive $ref and another object inside that recursion: the difference
    needs the $ref's body, which is still being built there, so the difference is a machine
    computed once it is: exact at depth 30, no notice."""
    schema = {"$defs": {"A": {"type": "object", "required": ["v"], "properties": {
        "v": {"type": "integer"},
        "c": {"type": "array", "items": {"oneOf": [{"$ref": "#/$defs/A"},
                                                    {"type": "object", "maxProperties": 1}]}}}}},
        "$ref": "#/$defs/A"}
    _exact_on_chains(schema)


@pytest.mark.parametrize("items", [
    {"oneOf": [{"$ref": "#/$defs/A"}, False]},
    {"oneOf": [{"$ref": "#/$defs/A"}, {"not": {}}], "type": "object"},
])
def test_a_recursive_ref_is_no_key_condition_inside_its_own_recursion(items):
    """A $ref that reads as a condition on keys (only `type`, `required`, `properties`),
    inside its own recursion: as a condition, its key tests compiled it again at every level,
    without end ("nests too deeply"); there it is a machine: exact at depth 30, no notice."""
    schema = {"$defs": {"A": {"type": "object", "required": ["v"], "properties": {
        "v": {"type": "integer"}, "c": {"type": "array", "items": items}}}},
        "$ref": "#/$defs/A"}
    _exact_on_chains(schema)


def test_a_ref_read_as_a_condition_is_none_inside_its_own_key_tests():
    """B's items read A as a condition on keys; A's key `c` is tested, and the test reads A
    again: there A is no condition (as one, each level compiled the next, without end). The
    recursion through `oneOf` is then unrolled, with a notice; shallow chains are exact."""
    schema = {"$defs": {
        "A": {"type": "object", "properties": {"v": {"type": "integer"}, "c": {
            "type": "array",
            "items": {"oneOf": [{"$ref": "#/$defs/A"}, {"type": "object", "required": ["w"]}]}}}},
        "B": {"type": "object", "required": ["v"], "properties": {"c": {
            "type": "array", "items": {"allOf": [{"$ref": "#/$defs/A"}, {"required": ["v"]}]}}}}},
        "$ref": "#/$defs/B"}
    automaton, notices = dfa_of(schema, max_depth=4)
    assert any("#/$defs/A" in n for n in notices)
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = set()
    for instance in _chains(1) + _chains(2):
        valid = validator.is_valid(instance)
        verdicts.add(valid)
        assert accepts(automaton, canonical_dumps(schema, instance)) == valid, instance
    assert verdicts == {True, False}


def test_a_container_of_values_cut_inline_is_exact_one_level_deeper_than_they_are():
    """oneOf of B and A inside B compiles without calls: each recursion is cut inline at
    --max-depth, somewhere inside the branches. Each array and object is exact one level
    deeper than the values it holds, so the differences of the oneOf keep the shallow values
    (they kept none: items allowed only `[]`): exact on chains 1 and 2 levels deep; deeper
    ones are refused or right, never an invalid one accepted."""
    schema = {"$defs": {
        "A": {"type": "object", "properties": {"v": {"type": "integer"}, "c": {
            "type": "array", "items": {"$ref": "#/$defs/A"}}}},
        "B": {"type": "object", "required": ["v"], "properties": {"c": {
            "type": "array", "items": {"oneOf": [{"$ref": "#/$defs/B"}, {"$ref": "#/$defs/A"}]}}}}},
        "$ref": "#/$defs/B"}
    automaton, notices = dfa_of(schema, max_depth=4)
    assert any("unrolled to depth 4" in n for n in notices)
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = set()
    for depth in (1, 2, 3, 5):
        for instance in _chains(depth):
            valid = validator.is_valid(instance)
            accepted = accepts(automaton, canonical_dumps(schema, instance))
            assert accepted == valid if depth <= 2 else valid or not accepted, instance
            verdicts.add((depth, valid))
    assert {(1, True), (1, False), (2, True)} <= verdicts


def test_recursion_inside_a_difference_is_unrolled_with_a_notice():
    """A difference whose sides call different machines at one point ("any value" and a
    recursive $ref) all the way down is computed on flat automata: the recursion there is
    unrolled to --max-depth, and no deeper value is accepted."""
    tree = json.loads((ROOT / "grammars" / "tree.schema.json").read_text())
    schema = {"$defs": tree["$defs"], "type": "object", "properties": {"t": {}},
              "not": {"properties": {"t": {"$ref": "#/$defs/node"}}, "required": ["t"]}}
    dfa, notices = dfa_of(schema, max_depth=4)
    assert any("#/$defs/node" in n and "depth 4" in n for n in notices)
    validator = jsonschema.Draft202012Validator(schema)
    shallow = {"t": {"value": 1, "children": [{"value": 2, "x": 1}]}}
    deeper = {"t": {"value": 1, "children": [{"value": 2, "children": [{"value": 3, "children": [
        {"value": 4, "children": [{"value": 5, "x": 1}]}]}]}]}}
    assert validator.is_valid(shallow) and accepts(dfa, canonical_dumps(schema, shallow))
    assert validator.is_valid(deeper) and not accepts(dfa, canonical_dumps(schema, deeper))


# arrays of arrays through two machines per level (u is t with a sibling `type`), so that a
# level of unrolled calls is not a level of nesting
CHAINED = {"t": {"type": "array", "items": {"$ref": "#/$defs/u"}},
           "u": {"$ref": "#/$defs/t", "type": "array"}}


@pytest.mark.parametrize("applicator", ["not-condition", "not-product", "oneOf"])
def test_subtracting_unrolled_recursion_never_accepts_an_invalid_value(applicator):
    """A recursive language inside a boolean operation is cut at --max-depth levels of
    nesting; subtracting it must not let through the deep values it lost (they were
    accepted when the cut counted calls instead of levels)."""
    nested = {"properties": {"a": {"$ref": "#/$defs/t"}}, "required": ["a"]}
    if applicator == "not-product":
        nested = {**nested, "minProperties": 1}  # not a condition on keys: a product
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": CHAINED,
              "type": "object", "properties": {"a": {}}}
    schema.update({"oneOf": [nested, {"required": ["a"]}]} if applicator == "oneOf"
                  else {"not": nested})
    automaton, notices = dfa_of(schema, max_depth=4)
    assert any("unrolled to depth 4" in n for n in notices)
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = []
    for depth in range(7):
        for leaf in ([], [1], 1, "x"):
            value = leaf
            for _ in range(depth):
                value = [value]
            instance = {"a": value}
            valid = validator.is_valid(instance)
            accepted = accepts(automaton, canonical_dumps(schema, instance))
            assert valid or not accepted, instance  # never an invalid one
            if depth <= 2:
                assert accepted == valid, instance  # exact where nothing was cut
            verdicts.append(valid)
    assert True in verdicts and False in verdicts


def test_any_value_below_a_schema_is_exact_at_any_depth():
    """Where a schema constrains something below a value but not the value itself, its any
    value is a machine (keys in that position's ranking) called at every level: depth 30 is
    accepted, with no notice, and the constraint below still holds."""
    schema = {"type": "object", "properties": {"a": {}},
              "allOf": [{"properties": {"a": {"properties": {"b": {"type": "string"}}}}}]}
    automaton, notices = dfa_of(schema)
    assert not notices
    validator = jsonschema.Draft202012Validator(schema)
    deep: Any = 1
    for level in range(30):
        deep = [deep] if level % 2 else {"b": "x", "c": deep}
    for instance in ({"a": {"c": deep}}, {"a": {"b": "y", "c": [deep, deep]}}, {"a": deep},
                     {"a": {"b": 1}}, {"a": {"b": "y", "c": {"b": 2}}}, {"a": [{"b": 3}]}):
        assert accepts(automaton, canonical_dumps(schema, instance)) == \
            validator.is_valid(instance), instance


# chains of `{"a": ...}` whose depth is odd and 4 mod 5 (9, 19, 29, ...), as an allOf of object
# schemas whose merges recur with a period of 10 levels
CHAINS = {"allOf": [{"$ref": "#/$defs/word"}, {"$ref": "#/$defs/x0"}, {"$ref": "#/$defs/z0"}],
          "$defs": {"word": {"type": "object", "additionalProperties": False,
                             "properties": {"a": {"$ref": "#/$defs/word"}}},
                    "x0": {"minProperties": 1, "additionalProperties": {"$ref": "#/$defs/x1"}},
                    "x1": {"additionalProperties": {"$ref": "#/$defs/x0"}},
                    **{f"z{i}": {"minProperties": 1,
                                 "additionalProperties": {"$ref": f"#/$defs/z{i + 1}"}}
                       for i in range(4)},
                    "z4": {"additionalProperties": {"$ref": "#/$defs/z0"}}}}


def _chain(depth: int) -> Any:
    return {} if depth == 0 else {"a": _chain(depth - 1)}


def test_merged_object_schemas_that_recur_are_machines_exact_at_any_depth():
    """Merging the allOf gives key `a` the allOf of the parts' schemas there, and so on: the
    same conjunction is the same schema (it recursed without end before), so the merges
    close into recursive machines."""
    automaton, notices = dfa_of(CHAINS)
    assert not notices and isinstance(automaton, PushdownDFA)
    validator = jsonschema.Draft202012Validator(CHAINS)
    for depth in range(42):
        assert accepts(automaton, json.dumps(_chain(depth))) == \
            validator.is_valid(_chain(depth)) == (depth % 10 == 9), depth


def test_no_value_within_the_unrolled_depth_is_not_called_an_empty_schema():
    """Chains of odd depth 2 mod 3 (5, 11, ...). With a `not`, the product keeps the calls of
    both sides: exact at any depth, no notice. With `dependentSchemas` (whose "objects
    without the key" is a flat "any value", cut at --max-depth), the product is flat, where
    recursion is unrolled to --max-depth 4, and no chain is left, which the error says, with
    the way out; 5 levels deep, the chain of depth 5 is accepted."""
    defs = {"word": CHAINS["$defs"]["word"], "x0": CHAINS["$defs"]["x0"],
            "x1": CHAINS["$defs"]["x1"],
            "y0": {"minProperties": 1, "additionalProperties": {"$ref": "#/$defs/y1"}},
            "y1": {"minProperties": 1, "additionalProperties": {"$ref": "#/$defs/y2"}},
            "y2": {"additionalProperties": {"$ref": "#/$defs/y0"}}}
    chains = [{"$ref": f"#/$defs/{name}"} for name in ("word", "x0", "y0")]
    schema = {"allOf": chains + [{"not": {"type": "string"}}], "$defs": defs}
    automaton, notices = dfa_of(schema)
    assert not notices and isinstance(automaton, PushdownDFA)
    for depth in range(20):
        assert accepts(automaton, json.dumps(_chain(depth))) == (depth % 6 == 5), depth
    schema = {"allOf": chains + [{"dependentSchemas": {"a": {"minProperties": 1}}}],
              "$defs": defs}
    with pytest.raises(GrammarError, match=r"accepts no value nested at most 4 levels where its "
                                           r"recursion is unrolled \(.*\); deeper values may "
                                           r"exist \(raise --max-depth\)"):
        dfa_of(schema)
    dfa, _ = dfa_of(schema, max_depth=5)
    validator = jsonschema.Draft202012Validator(schema)
    for depth in range(8):
        assert accepts(dfa, json.dumps(_chain(depth))) == validator.is_valid(_chain(depth)) == \
            (depth == 5), depth


def test_a_machine_whose_body_failed_to_build_is_never_used_as_empty():
    """A product that keeps calls meets the machines it calls (`Machines.meet`); where that
    meet is past --max-states, its build fails, and the product tries another way. Asked
    again, the meet was a call of a machine with an empty body (the empty language: under a
    `not` or a `oneOf`, values it should have removed would pass). Now it fails again, and a
    failure while a product is computed is not taken for the product's own size."""
    compiler = Compiler({}, FrontendOptions(max_states=50), True)
    machines = compiler.machines
    machines.machine("A", lambda: repeat(literal("a" * 7), 0, None))   # 7 states
    machines.machine("B", lambda: repeat(literal("a" * 11), 0, None))  # 11; together 77
    a, b = concat(literal("["), Call("A")), concat(literal("["), Call("B"))
    for _ in range(2):
        with pytest.raises(TooManyStatesError, match="more than --max-states 50"):
            compiler.ops.intersect(a, b)
    assert machines.failed_builds == 1
    with pytest.raises(TooManyStatesError):
        machines.defer("A & B", {"A", "B"}, lambda: literal("a"), None)


# an object that requires a value of itself has no instance: only texts of infinite depth
ENDLESS = {"type": "object", "required": ["next"],
           "properties": {"next": {"$ref": "#/$defs/endless"}}}


def _no_dead_ends(grammar, prefixes: list[bytes]) -> int:
    """Assert that after each prefix every token the mask allows (EOS aside) leads to a state
    from which the text can still end; how many tokens were checked."""
    checked = 0
    for prefix in prefixes:
        state = grammar.walk_bytes(prefix)
        assert state, prefix
        for token in np.flatnonzero(grammar.mask(state)).tolist():
            if token in grammar.eos_token_ids:
                continue
            after = grammar.next_state(state, token)
            assert after and grammar.tokens_to_accept(after) >= 0, (prefix, token)
            checked += 1
    return checked


def test_a_machine_that_never_returns_is_never_entered(smollm2):
    """A `$ref` to an object that requires itself has no instance (its machine can never
    return), so a key whose value is one can never be written: the tokens that would enter
    it (after `{"a`, the `"` or `":` that end the key) are not allowed, while `"ab"`, an
    additional key, stays. Before, they were: the text then had no way to end. The real
    schema this comes from (maskbench's o74424) requires such keys at its root, where no
    object is valid at all (a string still is); a root that is one has no text."""
    schema = {"$defs": {"endless": ENDLESS}, "type": "object",
              "properties": {"a": {"$ref": "#/$defs/endless"}, "b": {"type": "integer"}}}
    grammar = grammarc.compile_json_schema(schema, smollm2)
    assert _no_dead_ends(grammar, [b"{", b'{"', b'{"a', b'{"b": 1, "a']) > 100
    assert dead_end_entries(grammar.table) == 0
    validator = jsonschema.Draft202012Validator(schema)
    for text in [b"{}", b'{"b": 1}', b'{"ab": {"next": 1}}', b'{"a": {}}', b'{"a": {"next": {}}}']:
        assert grammar.matches(text) == validator.is_valid(json.loads(text)), text
    rooted = {"$defs": {"endless": ENDLESS}, "required": ["a"],
              "properties": {"a": {"$ref": "#/$defs/endless"}}}
    grammar = grammarc.compile_json_schema(rooted, smollm2)
    assert not grammar.walk_bytes(b"{") and grammar.matches(b'"text"')
    assert dead_end_entries(grammar.table) == 0
    with pytest.raises(EmptyLanguageError, match="a machine that never returns"):
        grammarc.compile_json_schema({"$defs": {"endless": ENDLESS}, "$ref": "#/$defs/endless",
                                      "type": "object"}, smollm2)


def test_the_dead_end_oracle_finds_a_token_with_no_way_to_end():
    """`dead_end_entries` (the tests' and fuzz.py's check of a table) counts an entry into a
    state that cannot accept: here 'b' from the start, beside `a{1,3}`."""
    dense = np.zeros((6, 4), np.int64)
    dense[1, [1, 2, 3]] = [2, 3, 5]
    dense[2, [0, 1, 2]] = [2, 3, 4]
    dense[3, [0, 1]] = [3, 4]
    dense[4, [0]] = [4]
    assert dead_end_entries(table_grammar(dense, [2, 3, 4], [1, 2, 3, 4]).table) == 1
    dense[1, 3] = 0
    assert dead_end_entries(table_grammar(dense, [2, 3, 4], [1, 2, 3, 4]).table) == 0


def test_a_machine_whose_text_is_empty_is_dropped_with_its_calls():
    """A machine whose body's automaton accepts nothing (its texts all ruled out once built)
    takes with it only the branches that call it; the language was refused as empty."""
    nothing = Automaton(ByteDFA(np.zeros((2, 1), np.int32), np.zeros(256, np.int32),
                                np.zeros(2, bool)))
    machines = MachineSet(alt(literal("b"), concat(literal("a"), Call("m"), literal("c"))),
                          (("m", concat(literal("x"), nothing)),))
    automaton = language_automaton(machines, 1_000, 4, lambda message: None)
    assert [automaton.accepts(text) for text in (b"b", b"a", b"ax", b"axc")] == \
        [True, False, False, False]
