"""JSON Schema front end: exact numbers and strings, serialisation rules, keywords, errors, and
instances sampled from real SmolLM2 tables validated with the `jsonschema` library."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from helpers import accepts, dfa_of, run_cli

import grammarc
from grammarc.automaton import Ops, build_dfa
from grammarc.automaton.machines import PushdownDFA, language_automaton
from grammarc.errors import GrammarError, UnsupportedError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.json_schema import canonical_dumps, numbers, strings
from grammarc.frontends.json_schema.schema import Compiler, compile_schema

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = sorted((ROOT / "grammars").glob("*.schema.json"))


# ------------------------------------------------------------------ numbers
NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?")
NUMBER_TEXTS = sorted({*(str(i) for i in range(-120, 121)), *(f"{i}.0" for i in range(-30, 31)),
                       *(f"{a}.{f}" for a in range(-12, 13) for f in
                         ("5", "25", "05", "50", "1", "99", "001", "75", "4999", "5001", "0")),
                       *(f"-0.{f}" for f in ("5", "25", "05", "1")), "-0", "-0.0", "00", "01",
                       "1.", ".5", "-", "1e5", "0.0"})
BOUNDS = [None, Decimal(0), Decimal(1), Decimal("1.5"), Decimal("-2.5"), Decimal(10),
          Decimal("0.05"), Decimal("-0.25"), Decimal("9.99"), Decimal(-7)]


def _in_range(text, lo, hi, lo_excl, hi_excl, integer) -> bool:
    if not NUMBER.fullmatch(text) or (text.startswith("-") and Decimal(text) == 0):
        return False
    value = Decimal(text)
    if integer and not re.fullmatch(r"-?\d+(\.0+)?", text):
        return False
    if lo is not None and (value <= lo if lo_excl else value < lo):
        return False
    return not (hi is not None and (value >= hi if hi_excl else value > hi))


@pytest.mark.parametrize("seed", range(12))
def test_number_ranges_against_brute_force(seed):
    rng = random.Random(seed)
    ops = Ops(100_000)
    for _ in range(10):
        lo, hi = rng.choice(BOUNDS), rng.choice(BOUNDS)
        lo_excl, hi_excl = rng.random() < 0.5, rng.random() < 0.5
        for integer in (True, False):
            expr = numbers.integers(lo, hi, lo_excl, hi_excl) if integer else \
                numbers.decimals(ops, lo, hi, lo_excl, hi_excl)
            dfa = ops.dfa(expr)
            for text in NUMBER_TEXTS:
                expected = _in_range(text, lo, hi, lo_excl, hi_excl, integer)
                got = dfa is not None and dfa.accepts(text.encode())
                assert got == expected, (lo, hi, lo_excl, hi_excl, integer, text)


def _nodes(expr) -> int:
    parts = getattr(expr, "parts", None) or getattr(expr, "options", None) or \
        ([expr.item] if hasattr(expr, "item") else [])
    return 1 + sum(_nodes(p) for p in parts)


def test_wide_integer_ranges_are_linear_in_digits_and_exact():
    # issue 15: the int64 range took minutes and gigabytes (a node per number of each width)
    lo, hi = -(2 ** 63), 2 ** 63 - 1
    expr = numbers.integers(Decimal(lo), Decimal(hi))
    assert _nodes(expr) < 3000
    dfa = Ops(100_000).dfa(expr)
    rng = random.Random(7)
    samples = [lo, hi, lo - 1, hi + 1, 0, 10 ** 18, -(10 ** 18), 9 * 10 ** 18, 10 ** 19,
               *(rng.randrange(-(2 ** 64), 2 ** 64) for _ in range(300))]
    for value in samples:
        assert dfa.accepts(str(value).encode()) == (lo <= value <= hi), value
    for lo, hi in ((0, 10 ** 16), (123456789012, 987654321098765)):
        dfa = Ops(100_000).dfa(numbers.integers(Decimal(lo), Decimal(hi)))
        values = [lo, hi, lo - 1, hi + 1, *(rng.randrange(lo - 10, hi * 10) for _ in range(200))]
        for value in values:
            assert dfa.accepts(str(value).encode()) == (lo <= value <= hi), (lo, hi, value)


@pytest.mark.parametrize("step", ["0.5", "0.25", "3", "0.01", "7", "1.5", "10"])
def test_multiple_of_against_brute_force(step):
    ops = Ops(100_000)
    for integer in (True, False):
        base = numbers.integers(None, None) if integer else numbers.decimals(ops, None, None)
        dfa = ops.dfa(ops.intersect(base, numbers.multiple_of(Decimal(step), integer)))
        for text in NUMBER_TEXTS:
            expected = _in_range(text, None, None, False, False, integer) and \
                Decimal(text) % Decimal(step) == 0
            assert dfa.accepts(text.encode()) == expected, (step, integer, text)


def test_multiple_of_with_a_huge_modulus_is_unsupported():
    with pytest.raises(UnsupportedError, match="remainder automaton"):
        dfa_of({"type": "integer", "multipleOf": Decimal("0.123456789")})


# ------------------------------------------------------------------ strings
def test_string_spellings_match_json_dumps():
    dfa = build_dfa(strings.json_string(strings.length_between(0, 3)))
    rng = random.Random(0)
    chars = ["a", '"', "\\", "/", "\n", "\x01", "\x7f", "é", "😀", "\u2028", "\uffff", "\U0010ffff"]
    for _ in range(3000):
        value = "".join(rng.choice(chars) for _ in range(rng.randint(0, 4)))
        for ensure_ascii in (True, False):
            text = json.dumps(value, ensure_ascii=ensure_ascii)
            assert accepts(dfa, text) == (len(value) <= 3), text
    for text, ok in [('"\\u00E9"', True), ('"\\/"', True), ('"\\uD83D\\uDE00"', True),
                     ('"\\u0041"', False), ('"\\ud83d"', False), ('"\\x41"', False),
                     ('"\x01"', False), ('"\\u000a"', True)]:
        assert accepts(dfa, text) == ok, text


@pytest.mark.parametrize("fmt,text,ok", [
    ("date", "2024-02-29", True), ("date", "2023-02-29", False), ("date", "1900-02-29", False),
    ("date", "2000-02-29", True), ("date", "2024-04-31", False),
    ("time", "23:59:60Z", True), ("time", "22:59:60Z", False), ("time", "08:30:06.5+01:00", True),
    ("time", "12:00:00", False), ("date-time", "2024-01-31T23:59:59z", True),
    ("duration", "P4DT12H30M5S", True), ("duration", "P1Y2D", False), ("duration", "P2W", True),
    ("email", "joe.bloggs@example.com", True), ("email", '"joe bloggs"@example.com', True),
    ("email", "te..st@example.com", False), ("email", "joe@[IPv6:::1]", True),
    ("hostname", "a--b.example.com", True), ("hostname", "XN--aa---o47jg78q", False),
    ("hostname", "a" * 63 + ".com", True), ("hostname", "a" * 64 + ".com", False),
    ("ipv4", "192.168.0.1", True), ("ipv4", "192.168.0.01", False),
    ("ipv6", "::ffff:192.168.0.1", True), ("ipv6", "1::2::3", False),
    ("uri", "http://foo.bar/?baz=qux#quux", True), ("uri", "//foo.bar", False),
    ("uri-reference", "//foo.bar", True), ("uuid", "2EB8AA08-AA98-11EA-B4AA-73B441D16380", True),
    ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638", False),
])
def test_formats(fmt, text, ok):
    dfa, _ = dfa_of({"type": "string", "format": fmt})
    assert accepts(dfa, json.dumps(text)) == ok


@pytest.mark.parametrize("pattern,yes,no", [
    ("^a", ["a", "abc"], ["ba"]), ("a$", ["ba"], ["ab"]), ("b", ["abc"], ["ac", ""]),
    ("^a|c$", ["ax", "xc"], ["xa"]), ("^\\s+$", ["\u00a0 \t"], ["x"]), ("^.$", ["é"], ["\n"]),
    ("^(?<word>[a-z]+)-\\d$", ["ab-1"], ["ab-"]), ("^[^]$", ["\n"], [""]),
])
def test_ecma_patterns_search_semantics(pattern, yes, no):
    dfa, _ = dfa_of({"type": "string", "pattern": pattern})
    for value in yes:
        assert accepts(dfa, json.dumps(value)), value
    for value in no:
        assert not accepts(dfa, json.dumps(value)), value


@pytest.mark.parametrize("pattern", [
    r"^(?!internal\.)[a-z][a-z0-9.]*$", r"^(?!a)", r"(?!a)b", r"^(?:(?!ab)a|c)", r"(a$|b)",
    r"^(?=.*x)(?!.*\.\.).{2,}$", r"^(?!.*[\\\"])", r"^x(?!y)",
    r"^$|(^(?:\S+\s+){0,3}\S+$)", r"(?:^x$)|(y$|^a)",
])
def test_ecma_lookaheads_are_exact(pattern):
    """Lookaheads (compiled by difference and intersection) against Python's re.search, on
    random strings spelled by json.dumps with and without ensure_ascii."""
    dfa, _ = dfa_of({"type": "string", "pattern": pattern})
    rng = random.Random(7)
    alphabet = 'abxy.int\\"é'
    values = ["", "internal.a", "internal", "ab", "xy", "x", "a..b"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(1500)]
    for value in values:
        expected = bool(re.search(pattern, value))
        assert accepts(dfa, json.dumps(value)) == expected, value
        assert accepts(dfa, json.dumps(value, ensure_ascii=False)) == expected, value


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
        schema: dict = {"type": "string"}
        for i in range(levels):
            schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                                       f"b{i}": schema, "c": {"type": "null"}}}
        flat = compile_schema(schema, FrontendOptions(additional_properties=False))
        return build_nfa(flat, 10**8)[0].num_states
    assert nfa_states(32) - nfa_states(16) <= 1.1 * 2 * (nfa_states(16) - nfa_states(8))


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

    from grammarc.frontends.json_schema.schema import check_against_meta_schema

    cls = validators.validator_for(schema, default=Draft202012Validator)
    expected = exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if expected is None:
        check_against_meta_schema(schema)
        return
    pointer = "#" + "".join(f"/{part}" for part in expected.absolute_path)
    with pytest.raises(GrammarError, match=re.escape(f"{pointer}: invalid schema: ")):
        check_against_meta_schema(schema)


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

def test_integers_numbers_and_negative_zero():
    integer, _ = dfa_of({"type": "integer", "minimum": 0})
    assert accepts(integer, "0") and not accepts(integer, "7.0") and not accepts(integer, "-0")
    assert not accepts(integer, "-7") and not accepts(integer, "07") and not accepts(integer, "1e2")
    number, _ = dfa_of({"type": "number"})
    assert accepts(number, "-1.5e-3") and not accepts(number, "-0") and not accepts(number, "-0e1")
    bounded, _ = dfa_of({"type": "number", "maximum": 1000})
    assert accepts(bounded, "999.5") and not accepts(bounded, "1e2")  # no exponent when bounded


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


def test_open_values_nest_without_bound():
    """`true`, `{}` and default additionalProperties call one "any value" machine."""
    automaton, notices = dfa_of({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert not notices
    deep = {"a": 1, "x": [[[[[[[[[[[[[[[[[[[[{"y": {"z": [1.5, "s", None, True]}}]]]]]]]]]]]]]]]]]]]]}
    assert accepts(automaton, json.dumps(deep))
    assert not accepts(automaton, json.dumps(deep)[:-3] + "}]}")  # one bracket wrong
    assert not accepts(automaton, '{"x": [1, 2}')
    assert not accepts(automaton, '{"x": 1, "a": 1}')  # ranked keys first


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
    schema = {"properties": {"a": {"unevaluatedProperties": False}},
              "items": {"$dynamicRef": "#x"}}
    with pytest.raises(UnsupportedError) as info:
        dfa_of(schema)
    assert "unevaluatedProperties at #/properties/a" in str(info.value)
    assert "$dynamicRef at #/items" in str(info.value)
    _, notices = dfa_of(schema, lenient=True)
    assert any("ignored (--lenient)" in n for n in notices)
    for items in ({"type": "string"},
                  {"enum": ["a", "bbb"], "maxLength": 2},  # the set is not just the enum
                  {"$ref": "#/$defs/a"}):  # a reference cycle: no set
        with pytest.raises(UnsupportedError, match="uniqueItems is supported only"):
            dfa_of({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                    "items": items, "uniqueItems": True})
    with pytest.raises(UnsupportedError, match="only references within the schema"):
        dfa_of({"$ref": "https://example.com/other.json"})


def test_empty_language_and_bad_schemas_are_errors():
    with pytest.raises(GrammarError, match="accepts no value"):
        dfa_of({"allOf": [{"type": "string"}, {"type": "integer"}]})
    with pytest.raises(GrammarError, match="#/maxLength: invalid schema: -1 is less than"):
        dfa_of({"maxLength": -1})
    with pytest.raises(GrammarError, match="#/properties/a/type: invalid schema: 'text' is not"):
        dfa_of({"properties": {"a": {"type": "text"}}})


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


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_integers_have_no_fraction_unless_asked(draft):
    """Draft 4 counts 12345.0 as a number, not an integer; later drafts count it as both, but
    no one wants a model to write an id that way: only --integer-fractions allows it there."""
    for schema in ({"$schema": draft, "type": "integer"},
                   {"$schema": draft, "type": "integer", "minimum": 0},
                   {"$schema": draft, "type": "integer", "enum": [12345, 7]}):
        dfa, _ = dfa_of(schema)
        assert accepts(dfa, "12345") and not accepts(dfa, "12345.0")
        asked, _ = dfa_of(schema, integer_fractions=True)
        later = "2020-12" in draft
        assert accepts(asked, "12345") and accepts(asked, "12345.0") == later
        validator = jsonschema.validators.validator_for(schema)(schema)
        assert validator.is_valid(json.loads("12345.0")) == later
    number, _ = dfa_of({"$schema": draft, "enum": [12345]})  # no type: any spelling of it
    assert accepts(number, "12345.0")


def test_cli_records_integer_fractions(tmp_path):
    schema = tmp_path / "age.schema.json"
    schema.write_text('{"type": "integer"}')
    for flags, fraction_ok in (([], False), (["--integer-fractions"], True)):
        out = tmp_path / f"age{len(flags)}.safetensors"
        result = run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o", str(out),
                         *flags)
        assert result.returncode == 0, result.stderr
        grammar = grammarc.load(out)
        assert grammar.metadata["options"]["integer_fractions"] == fraction_ok
        assert grammar.matches("42") and grammar.matches("42.0") == fraction_ok


def test_a_string_past_the_state_limit_is_named_by_its_pointer(tmp_path):
    # a word-count pattern with a length: too large alone, and the error says which string
    schema = tmp_path / "bio.schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"bio": {
        "type": "string", "pattern": "^(?:\\S+\\s+){0,19}\\S+$", "maxLength": 100}}}))
    out = tmp_path / "bio.safetensors"
    result = run_cli("compile", str(schema), "--tokenizer", "smollm2", "-o", str(out),
                     "--max-states", "20000")
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "#/properties/bio: the automaton needs" in result.stderr, result.stderr


def test_cli_compiles_a_schema_file_and_reports_json_errors(tmp_path):
    good = ROOT / "grammars" / "person.schema.json"
    out = tmp_path / "person.safetensors"
    result = subprocess.run([sys.executable, "-m", "grammarc", "compile", str(good),
                             "--tokenizer", "smollm2", "-o", str(out)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert grammarc.load(out).kind == "json-schema"
    bad = tmp_path / "bad.schema.json"
    bad.write_text('{\n  "type": "object",\n  "properties": {"a": }\n}\n')
    result = subprocess.run([sys.executable, "-m", "grammarc", "compile", str(bad),
                             "--tokenizer", "smollm2"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "error: bad.schema.json:3:23: invalid JSON: Expecting value"


def test_check_explains_a_valid_value_in_another_key_order(tmp_path):
    out = tmp_path / "person.safetensors"
    grammarc.compile(ROOT / "grammars" / "person.schema.json", "smollm2").save(out)
    swapped = run_cli("check", str(out), '{"age": 30, "name": "Ada"}')
    assert swapped.returncode == 1
    assert 'the table expects: {"name": "Ada", "age": 30}' in swapped.stdout
    invalid = run_cli("check", str(out), '{"name": "Ada", "age": -3}')
    assert invalid.returncode == 1 and "table expects" not in invalid.stdout


# ------------------------------------------------------------------ real tables, sampled
def _exact(text: str):
    """JSON numbers as exact values for the oracle (floats make 0.47 % 0.01 fail)."""
    value = Decimal(text)
    return int(value) if value == value.to_integral_value() else value


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_sampled_instances_validate(path, smollm2):
    """Random token walks through the SmolLM2 table always give valid instances."""
    schema = json.loads(path.read_text(), parse_float=_exact)
    grammar = grammarc.compile_json_schema(schema, smollm2, options=FrontendOptions(
        notice=lambda message: None))
    validator = jsonschema.validators.validator_for(schema)(
        schema, format_checker=jsonschema.FormatChecker())
    rng = np.random.default_rng(0)
    for _ in range(12):
        ids = grammar.sample_tokens(400, rng)
        assert ids is not None
        assert ids[-1] in smollm2.eos_token_ids
        text = smollm2.decode_bytes(ids[:-1]).decode("utf-8")
        instance = json.loads(text, parse_float=_exact)
        validator.validate(instance)


def test_compile_json_schema_records_the_schema(smollm2):
    schema = {"type": "object", "properties": {"z": {"type": "boolean"}, "a": {"const": 1}}}
    grammar = grammarc.compile_json_schema(schema, smollm2)
    assert json.loads(grammar.source) == schema
    assert list(json.loads(grammar.source)["properties"]) == ["z", "a"]  # order kept
    assert grammar.matches('{"z": true, "a": 1}') and not grammar.matches('{"a": 1, "z": true}')


def test_compile_json_schema_takes_a_pydantic_model(smollm2):
    """A Pydantic model class compiles to its JSON Schema: sampled texts validate with the
    model itself, and the model's own instances (written as json.dumps writes them) match."""
    from typing import Literal

    import pydantic

    class Address(pydantic.BaseModel):
        city: str = pydantic.Field(max_length=12)
        zip: str = pydantic.Field(pattern=r"^[0-9]{5}$")

    class Order(pydantic.BaseModel):
        id: int = pydantic.Field(ge=1, le=10_000)
        status: Literal["open", "shipped"]
        ship_to: Address
        notes: list[str] | None = None

    grammar = grammarc.compile_json_schema(Order, smollm2)
    assert json.loads(grammar.source) == Order.model_json_schema()
    rng = np.random.default_rng(1)
    for _ in range(20):
        ids = grammar.sample_tokens(120, rng)
        Order.model_validate_json(smollm2.decode_bytes(ids[:-1]))
    order = Order(id=7, status="open", ship_to=Address(city="Lyon", zip="69001"))
    assert grammar.matches(json.dumps(order.model_dump(exclude_none=True)))
    assert not grammar.matches(json.dumps(dict(order.model_dump(), id=0)))
    with pytest.raises(grammarc.GrammarcError, match="without model_json_schema"):
        grammarc.compile_json_schema(int, smollm2)


def test_errors_of_a_named_schema_keep_their_type():
    """The file name is prefixed without turning an UnsupportedError into a plain
    GrammarError (callers tell "cannot compile exactly" from "invalid")."""
    from grammarc.errors import UnsupportedError
    from grammarc.frontends.json_schema import parse_json_schema

    with pytest.raises(UnsupportedError, match=r"^s\.json: #/pattern: .*lookbehind"):
        parse_json_schema('{"type": "string", "pattern": "(?<=a)b"}', "s.json")
