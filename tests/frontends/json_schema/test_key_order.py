"""`--key-order any`: an object's properties in any order, each at most once, the required
ones present, judged by `jsonschema` on every permutation of the keys of small instances (and
random orders below them); token by token on SmolLM2; the notice where an object has too many
properties to track; the option on the command line, in manifests and in artifacts."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any, Iterator

import jsonschema
import pytest
from grammar_oracles import greedy_tokens, token_walk
from helpers import accepts, dfa_of, run_cli
from test_json_applicators import _random_object_schema

import grammarc
from grammarc.compiler import build_automaton
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions

POOL = [1, "x", "y", None, [1], {}, 2.5, True, "", {"a": 1, "b": "x"}]


def _shuffled(value: Any, rng: random.Random) -> Any:
    """`value` with the keys of every object below the top in a random order."""
    if isinstance(value, dict):
        items = [(k, _shuffled(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def _orders(instance: Any, rng: random.Random) -> Iterator[str]:
    """The JSON texts of `instance` with its keys in every order (nested keys shuffled)."""
    if not isinstance(instance, dict):
        yield json.dumps(instance)
        return
    for keys in itertools.permutations(instance):
        yield json.dumps({k: _shuffled(instance[k], rng) for k in keys})


def _instances(rng: random.Random, keys: str, count: int) -> Iterator[Any]:
    for _ in range(count):
        yield rng.choice(POOL) if rng.random() < 0.15 else {
            k: rng.choice(POOL) for k in rng.sample(keys, rng.randint(0, len(keys)))}


def _check(schema: Any, rng: random.Random, keys: str, count: int) -> None:
    try:
        automaton, notices = dfa_of(schema, key_order="any")
    except GrammarError as exc:
        assert "no value at all" in str(exc) or "no string at all" in str(exc)
        automaton, notices = None, []
    # (a union may inline a call of any value, unrolled --max-depth levels: deeper than these
    # instances go)
    assert not [n for n in notices if "any order" in n], notices
    validator = jsonschema.Draft202012Validator(schema)
    for instance in _instances(rng, keys, count):
        expected = validator.is_valid(instance)
        for text in _orders(instance, rng):
            assert (automaton is not None and accepts(automaton, text)) == expected, \
                (schema, text)


def test_object_keywords_in_any_order_against_jsonschema():
    """Random schemas of object keywords (allOf/oneOf/anyOf, required, additional and pattern
    properties, property counts, dependentRequired, not/anyOf of required keys): every order
    of the keys of random instances is accepted exactly when the instance is valid."""
    rng = random.Random(5)
    for _ in range(60):
        schema = {"$defs": {"shared": _random_object_schema(rng, 1, refs=False)},
                  **_random_object_schema(rng, 3)}
        _check(schema, rng, "abcd", 25)


def test_nested_objects_and_conditions_in_any_order():
    """Objects inside objects, each level in any order, with conditions on key values
    (if/then, dependentSchemas, oneOf discriminators) and property counts."""
    rng = random.Random(9)
    inner = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
             "required": ["b"], "additionalProperties": False}
    schemas = [
        {"type": "object", "properties": {"a": inner, "b": {"type": "string"}, "c": inner},
         "required": ["a"]},
        {"properties": {"a": {"enum": [1, "x"]}, "b": True, "c": True},
         "if": {"properties": {"a": {"const": 1}}, "required": ["a"]},
         "then": {"required": ["c"]}, "else": {"not": {"required": ["b"]}}},
        {"type": "object", "dependentSchemas": {"a": {"required": ["b"],
                                                      "properties": {"b": {"const": "x"}}}},
         "minProperties": 2, "maxProperties": 3},
        {"oneOf": [{"properties": {"a": {"const": 1}, "b": {"type": "string"}},
                    "required": ["a", "b"]},
                   {"properties": {"a": {"const": "x"}, "c": True}, "required": ["a"],
                    "additionalProperties": False}]},
        {"type": "object", "patternProperties": {"^[cd]$": {"type": "integer"}},
         "properties": {"a": True}, "additionalProperties": {"type": "string"},
         "required": ["a"], "maxProperties": 3},
    ]
    for schema in schemas:
        _check(schema, rng, "abcd", 150)


def test_duplicates_and_missing_required_keys_are_refused():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                               "c": {"type": "integer"}},
              "required": ["a", "b"]}
    automaton, _ = dfa_of(schema, key_order="any")
    for keys in itertools.permutations("abc"):
        assert accepts(automaton, "{" + ", ".join(f'"{k}": 1' for k in keys) + "}")
        assert not accepts(automaton, "{" + ", ".join(f'"{k}": 1' for k in keys[:2]
                                                      if k != "a") + "}")
        for twice in "abc":
            text = ", ".join(f'"{k}": 1' for k in (*keys, twice))
            assert not accepts(automaton, "{" + text + "}"), text
    assert not accepts(automaton, '{"b": 1, "c": 1}')
    # schema order stays the default
    ordered, _ = dfa_of(schema)
    assert accepts(ordered, '{"a": 1, "b": 2}') and not accepts(ordered, '{"b": 2, "a": 1}')


def test_too_many_properties_for_any_order_keep_the_schema_order_with_a_notice():
    """2^n sets of keys for n properties: past the limit, the object follows the schema's
    order, and a notice names its JSON pointer and what to do; other objects stay free."""
    many = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(16)}}
    schema = {"type": "object", "properties": {"big": many, "x": {"type": "integer"},
                                               "y": {"type": "integer"}}}
    automaton, notices = dfa_of(schema, key_order="any")
    assert len(notices) == 1 and notices[0].startswith("#/properties/big: the 16 properties")
    assert "--max-states" in notices[0] and "schema's order" in notices[0]
    assert accepts(automaton, '{"y": 1, "big": {"p0": 1, "p1": 2}, "x": 2}')
    assert not accepts(automaton, '{"big": {"p1": 1, "p0": 2}}')


def test_an_object_whose_conditions_tell_too_much_apart_alone_keeps_the_schema_order():
    """The sets of an object's keys may fit while the values its conditions test multiply
    them past the limit (JSON Schema Store's minecraft-loot-table spent 13 s building such an
    object before the whole schema fell back to the schema's order): that position alone
    takes the schema's order, with its notice, and the document is compiled again; the other
    objects keep any order, and every text is judged as jsonschema judges it."""
    props: dict[str, Any] = {"type": {"enum": ["t0", "t1", "t2", "t3"]}}
    props.update({f"k{i}": {"type": "integer"} for i in range(5)})
    tagged = {"type": "object", "properties": props, "allOf": [
        {"if": {"properties": {"type": {"const": f"t{i}"}}}, "then": {"required": [f"k{i}"]}}
        for i in range(4)]}
    schema = {"type": "object", "properties": {"d": tagged, "p": {
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}}}
    automaton, notices = dfa_of(schema, key_order="any", max_states=5_000)
    assert notices == ["#/properties/d: the 6 properties of objects here, with their property "
                       "counts or the values they test, are too many to allow in any order; "
                       "they follow the schema's order there (as with --key-order schema); "
                       "make the object smaller (nest groups of properties) or raise "
                       "--max-states"]
    assert accepts(automaton, '{"p": {"y": 1, "x": 2}, "d": {"type": "t1", "k1": 3}}')
    assert not accepts(automaton, '{"d": {"k1": 3, "type": "t1"}}')
    assert not accepts(automaton, '{"d": {"type": "t1", "k0": 3}}')
    rng = random.Random(7)
    validator = jsonschema.Draft202012Validator(schema)
    for _ in range(300):
        d = {k: rng.choice(["t0", "t2", 1, "x"]) if k == "type" else rng.choice([1, "x"])
             for k in ["type", *(f"k{i}" for i in range(5))] if rng.random() < 0.5}
        p = {k: rng.choice([1, "x"]) for k in rng.sample("xy", rng.randint(0, 2))}
        instance = dict(rng.sample([("d", d), ("p", p)], 2))
        assert accepts(automaton, json.dumps(instance)) == validator.is_valid(instance), instance
    # within a larger bound the object takes any order
    automaton, notices = dfa_of(schema, key_order="any", max_states=20_000)
    assert not notices and accepts(automaton, '{"d": {"k1": 3, "type": "t1"}}')
    # eight positions are put in the schema's order so, one compile each; a ninth puts the
    # whole schema in the schema's order, with one notice
    for copies, notices_issued in ((8, 9), (9, 1)):
        many = {"type": "object", "properties": {f"d{j}": tagged for j in range(copies)}}
        notices = []
        automaton = build_automaton("json-schema", json.dumps(many), None, FrontendOptions(
            key_order="any", max_states=5_000, notice=notices.append))
        assert len(notices) == notices_issued, notices
        assert accepts(automaton, '{"d0": {"type": "t1", "k1": 3}}')
        assert not accepts(automaton, '{"d0": {"k1": 3, "type": "t1"}}')
    assert notices[0].startswith("#/properties/d8: the 6 properties of objects here, with "
                                 "their property counts or the values they test, are too "
                                 "many to allow in any order, as were those of 8 positions "
                                 "before it with the keys of objects in any order; they "
                                 "follow the schema's order instead")


def test_a_notice_is_issued_once_however_often_its_object_is_read():
    """A union of objects read again for each branch difference and each level of a
    recursion met the same object many times, and said so each time (a composer.json schema
    repeated 6 notices 23 times); each is said once."""
    def strings(prefix: str, count: int) -> dict:
        return {f"{prefix}{i}": {"type": "string"} for i in range(count)}

    schema = {"type": "object", "properties": {"r": {"type": "array", "items": {"oneOf": [
        {"$ref": "#/$defs/repo"},
        {"type": "object", "additionalProperties": {"enum": [False]}, "maxProperties": 1}]}}},
        "$defs": {"repo": {"oneOf": [
            {"type": "object", "required": ["type"],
             "properties": {"type": {"enum": ["a"]}, **strings("p", 10)}},
            {"type": "object", "required": ["type", "pkg"],
             "properties": {"type": {"enum": ["b"]}, "pkg": {"$ref": "#"}, **strings("q", 8)}}]}}}
    notices: list[str] = []
    build_automaton("json-schema", json.dumps(schema), None,
                    FrontendOptions(key_order="any", notice=notices.append))
    assert len(notices) == 1 and notices[0].startswith("#/properties/r/items: the 20 properties")


def test_objects_in_any_order_within_the_limit_each_but_not_together_keep_the_schema_order():
    """Machines linked by calls count together: three objects of 7 properties in any order
    (about 5,000 states each) need 15,587 states in all, so below --max-states 16,000 the
    schema is compiled in the schema's order with a notice, not aligned at any size (a
    JSON Schema Store schema needed 523,206 states, 95 s and 22 GB)."""
    schema = {"type": "object", "properties": {
        f"o{j}": {"type": "array", "items": {"type": "object", "properties": {
            f"k{j}{i}": {"type": "string"} for i in range(7)}}} for j in range(3)}}
    ordered_text, shuffled_text = '{"o0": [{"k00": "a", "k01": "b"}]}', \
        '{"o0": [{"k01": "b", "k00": "a"}]}'
    for max_states, exact in ((16_000, True), (15_000, False)):
        notices: list[str] = []
        automaton = build_automaton("json-schema", json.dumps(schema), None, FrontendOptions(
            key_order="any", max_states=max_states, notice=notices.append))
        assert accepts(automaton, ordered_text)
        assert accepts(automaton, shuffled_text) == exact
        if exact:
            assert automaton.num_states == 15_587 and not notices
        else:
            assert notices == ["the automaton needs 15,587 states, more than --max-states "
                               "15,000 with the keys of objects in any order; they follow the "
                               "schema's order instead (as with --key-order schema): raise "
                               "--max-states, or split large objects and unions of objects "
                               "(the largest in any order: #/properties/o0/items (7 "
                               "properties), #/properties/o1/items (7 properties), "
                               "#/properties/o2/items (7 properties))"]


def test_the_notice_of_a_schema_too_large_in_any_order_names_its_largest_unordered_objects():
    """The objects in any key order that need too many states together are named, the largest
    first: here four arrays of 8-property objects. Those that keep the schema's order
    anyway (9 and 13 properties, past the per-object limit at this --max-states) are not."""
    def properties(prefix: str, count: int) -> dict:
        return {"type": "object",
                "properties": {f"{prefix}{i}": {"type": "integer"} for i in range(count)}}

    schema = {"type": "object", "properties": {
        "a": properties("a", 9), "c": properties("c", 13),
        **{f"o{j}": {"type": "array", "items": properties(f"b{j}", 8)} for j in range(4)}}}
    notices: list[str] = []
    automaton = build_automaton("json-schema", json.dumps(schema), None, FrontendOptions(
        key_order="any", max_states=40_000, notice=notices.append))
    assert accepts(automaton, '{"o0": [{"b00": 1, "b01": 2}]}')
    assert not accepts(automaton, '{"o0": [{"b01": 1, "b00": 2}]}')
    assert len(notices) == 1 and notices[0].startswith("the automaton needs 46,219 states")
    assert notices[0].endswith(
        "split large objects and unions of objects (the largest in any order: "
        "#/properties/o0/items (8 properties), #/properties/o1/items (8 properties), "
        "#/properties/o2/items (8 properties))")


def test_any_order_token_by_token_on_smollm2(smollm2):
    """Every order of valid instances, tokenised, is allowed token by token with EOS only at
    the end; random walks of the table to EOS are valid instances."""
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "home": {"type": "object", "properties": {"city": {"type": "string"},
                                                  "zip": {"type": "string"}},
                 "required": ["city"]}},
        "required": ["name", "age"], "additionalProperties": False}
    grammar = grammarc.compile_json_schema(schema, smollm2,
                                           options=FrontendOptions(key_order="any"))
    assert grammar.metadata["options"]["key_order"] == "any"
    eos = smollm2.eos_token_ids[0]
    validator = jsonschema.Draft202012Validator(schema)
    instances = [{"name": "Ann", "age": 3, "tags": ["a"], "home": {"city": "Oslo", "zip": "1"}},
                 {"age": 40, "name": "Bob"}, {"home": {"zip": "2", "city": "X"}, "age": 1,
                                              "name": ""}]
    rng = random.Random(1)
    for instance in instances:
        for text in _orders(instance, rng):
            state = grammar.initial_state
            for token in greedy_tokens(smollm2, text):
                assert grammar.mask(state)[token], text
                state = grammar.next_state(state, token)
            assert grammar.mask(state)[eos] and grammar.is_accepting(state), text
    refused = ['{"age": 1}', '{"age": 1, "name": "a", "age": 2}',
               '{"name": "a", "x": 1, "age": 1}']
    for text in refused:
        state = grammar.initial_state
        for token in greedy_tokens(smollm2, text):
            state = grammar.next_state(state, token) if grammar.mask(state)[token] else 0
            if not state:
                break
        assert not state or not grammar.is_accepting(state), text
    for seed in range(15):
        ids = token_walk(grammar, random.Random(seed))
        assert validator.is_valid(json.loads(smollm2.decode_bytes(ids)))


def test_key_order_on_the_command_line_and_in_manifests(tmp_path):
    (tmp_path / "s.schema.json").write_text(json.dumps(
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}))
    for flags, recorded in (([], None), (["--key-order", "any"], "any"),
                            (["--key-order", "schema"], None)):
        out = tmp_path / "out.safetensors"
        result = run_cli("compile", "s.schema.json", "--tokenizer", "smollm2", "-o", str(out),
                         *flags, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        grammar = grammarc.load(out)
        assert grammar.metadata["options"].get("key_order") == recorded
        assert grammar.matches('{"b": 1, "a": 2}') == (recorded == "any")
    result = run_cli("compile", "s.schema.json", "--tokenizer", "smollm2", "--key-order",
                     "random", "-o", "x.safetensors", cwd=tmp_path)
    assert result.returncode == 2 and "'random' is not one of 'schema', 'any'" in result.stderr
    with pytest.raises(grammarc.GrammarcError, match="key_order must be one of schema, any"):
        FrontendOptions(key_order="sorted")
    manifest = tmp_path / "grammarc.toml"
    for value, ok in (('"any"', True), ('"sorted"', False)):
        manifest.write_text(f'[[artifact]]\nsource = "s.schema.json"\noutput = "m.safetensors"\n'
                            f'tokenizer = "smollm2"\nkey_order = {value}\n')
        result = run_cli("build", str(manifest), cwd=tmp_path)
        assert (result.returncode == 0) == ok, result.stderr
        if ok:
            grammar = grammarc.load(tmp_path / "m.safetensors")
            assert grammar.metadata["options"]["key_order"] == "any"
        else:
            assert "key_order" in result.stderr and "one of schema, any" in result.stderr


def test_enum_and_const_objects_in_any_order_also_under_not():
    """An object value listed by `enum`/`const` is every order of its keys (nested ones too),
    so that `not` of it refuses each of them."""
    value = {"a": 1, "b": {"x": 1, "y": 2}, "c": "z"}
    rng = random.Random(3)
    for schema in ({"const": value}, {"enum": [value, 2]}, {"not": {"const": value}},
                   {"type": "object", "properties": {"a": True, "b": True},
                    "not": {"enum": [value]}}):
        validator = jsonschema.Draft202012Validator(schema)
        automaton, _ = dfa_of(schema, key_order="any")
        for instance in (value, {"a": 1, "b": {"y": 2, "x": 1}, "c": "z"}, {"a": 1}):
            for text in _orders(instance, rng):
                assert accepts(automaton, text) == validator.is_valid(instance), (schema, text)
