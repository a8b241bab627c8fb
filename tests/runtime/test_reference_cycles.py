"""Compiles and grammars leave no reference cycles behind (issue 40: no mask stalls).

Objects in a cycle are freed only by Python's cyclic garbage collector, whose full passes
walk the whole heap: a 300,000-object compile state left for it cost 45 ms inside one mask
of the maskbench walk. So a compile's state must go when the compile returns, and a grammar
a server drops must go at once, with its caches, whatever was asked of it before."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FunctionType

import numpy as np
import pytest

import grammarc
from grammarc.runtime.calls import CallGrammar

ROOT = Path(__file__).resolve().parents[2]

# every front end, and in JSON Schema the recursive walks: recursion (machines linked by
# calls), allOf/not/oneOf products, first bytes narrowed, arrays with counts and unique items,
# const objects with free keys
SOURCES = {
    "tree": (ROOT / "grammars" / "tree.schema.json", None),
    "booleans": ({"type": "object", "properties": {
        "a": {"allOf": [{"type": "string", "maxLength": 9}, {"not": {"const": "x"}}]},
        "b": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 2.5}]},
        "c": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "array", "items": {"$ref": "#"}}]},
        "d": {"type": "array", "items": {"enum": ["p", "q", "r"]}, "uniqueItems": True},
        "f": {"type": "array", "contains": {"const": "q"}, "maxContains": 2, "maxItems": 4},
        "e": {"enum": [{"x": 1, "y": [2]}, {"y": [], "x": 0}]}},
        "$defs": {"n": {"type": "object", "properties": {"k": {"$ref": "#"}}}}}, "json"),
    "json.gbnf": ((ROOT / "grammars" / "json-value.gbnf").read_text(), "gbnf"),
    "sql.lark": (ROOT / "grammars" / "sql.lark", None),
    "email.regex": (ROOT / "grammars" / "email.regex", None),
    "ticket.fsm": (ROOT / "grammars" / "support-ticket.fsm.yaml", None),
    "tools": (ROOT / "grammars" / "weather-tools.json", "tools"),
    # a tool whose parameters link only on the schema's retry (the tag takes it too)
    "tools retried": ([{"type": "function", "function": {"name": "walk", "parameters": {
        "$ref": "#/$defs/node", "$defs": {"node": {"anyOf": [
            {"type": "object", "additionalProperties": False, "required": ["a"],
             "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"enum": ["x", "y"]}}},
            {"type": "object", "additionalProperties": False, "required": ["a", "b"],
             "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"$ref": "#/$defs/node"}}},
            {"type": "string"}]}}}}}], "tools"),
}


@contextmanager
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def compile_source(name: str, tokenizer: grammarc.Tokenizer) -> grammarc.Grammar:
    source, kind = SOURCES[name]
    if isinstance(source, dict):
        return grammarc.compile_json_schema(source, tokenizer)
    if kind == "tools":
        return grammarc.compile_tools(source, tokenizer, reasoning=True)
    return grammarc.compile(source, tokenizer, kind)


def ours(thing: object) -> bool:
    """Whether grammarc made it: an instance of one of its classes, or one of its functions."""
    module = thing.__module__ if isinstance(thing, FunctionType) else type(thing).__module__
    return (module or "").startswith("grammarc")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_compile_leaves_nothing_for_the_garbage_collector(smollm2, name):
    """None of grammarc's objects or closures (the standard library's `ast.literal_eval`,
    which Lark calls, leaves a few closures of its own in Python 3.11)."""
    compile_source(name, smollm2)  # first uses: caches, lazy imports
    with collector_off():
        grammar = compile_source(name, smollm2)
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            left = [type(thing).__qualname__ for thing in gc.garbage if ours(thing)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert grammar.num_states > 1
    assert not left, f"compiling {name} left these in reference cycles: {sorted(set(left))}"


@pytest.mark.parametrize("loaded", [False, True], ids=["compiled", "loaded"])
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_dropped_grammar_is_freed_at_once_after_any_use(smollm2, name, loaded, tmp_path):
    """Compiled, or loaded from its artifact; masks, budget masks, bitmasks, warm tables and a
    matcher's steps (its fork too) all cached first."""
    grammar = compile_source(name, smollm2)
    if loaded:
        grammar.save(tmp_path / "g.safetensors")
        grammar = grammarc.load(tmp_path / "g.safetensors")
    with collector_off():
        if hasattr(grammar, "warm"):
            grammar.warm()
        matcher = grammarc.Matcher(grammar, max_tokens=40)
        rng = np.random.default_rng(0)
        bits = np.zeros((1, (grammar.vocab_size + 31) // 32), np.int32)
        for _ in range(12):
            grammar.mask(matcher.state)
            grammar.fill_bitmask([matcher.state], bits, budget=20)
            allowed = [t for t in np.flatnonzero(matcher.mask()).tolist()
                       if t not in grammar.eos_token_ids]
            if not allowed:
                break
            assert matcher.accept(int(rng.choice(allowed)))
        fork = matcher.fork()
        fork.rollback()
        gone = weakref.ref(grammar)
        del grammar, matcher, fork
        assert gone() is None, f"a dropped {name} grammar lives on in a reference cycle"


def test_a_warmed_grammar_keeps_one_small_object_per_state_for_the_collector(smollm2):
    """What `warm` leaves for Python's garbage collector to walk at each full collection,
    which can fall inside a mask: about one small object per table state (its slotted
    `StateInfo`), not three (object, `__dict__`, tokens that push), and no list or tuple over
    the states (`python_ints`). A warmed 49,903-state maskbench grammar kept 155,000 objects,
    one of 9,181 states 30,000 (a 5.4 ms full collection; 2.5 ms with 12,000)."""
    grammar = grammarc.compile(ROOT / "grammars" / "order.schema.json", smollm2)
    assert isinstance(grammar, CallGrammar) and grammar.num_states > 2000
    with collector_off():
        before = len(gc.get_objects())
        grammar.warm()
        gc.collect()
        kept = len(gc.get_objects()) - before
    assert kept <= 1.2 * grammar.num_states, \
        f"warm left {kept} objects for {grammar.num_states} table states"
