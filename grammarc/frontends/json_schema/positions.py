"""Positions and key ranking: a place in the document, the schemas that may apply to the
value there, and the one order of object keys they imply (docs/json-schema.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property
from graphlib import CycleError, TopologicalSorter
from heapq import heapify, heappop, heappush
from typing import Any, Protocol

from ...errors import GrammarError
from .. import FrontendOptions
from .node import SchemaNode
from .resolution import Ref, Registry

_MAX_KEY_SETS = 1 << 12    # sets of ranked keys an object in any key order may have read


def any_order_fits(keys: Sequence[str], max_states: int, sets: int | None = None) -> bool:
    """Whether an object with these keys may take them in any order: few enough `sets` of
    keys read (each a state; every subset of the keys where not given) and names still to
    come (about half of them, each set its own copy), within a quarter of `max_states`. An
    object that also counts its members or tests the values of some keys tells more than
    sets apart: `sets` is then what it tells apart."""
    sets = 1 << len(keys) if sets is None else sets
    states = sets * (1 + sum(len(json.dumps(k)) + 1 for k in keys) // 2)
    return sets <= _MAX_KEY_SETS and states <= max_states // 4


class TooManyKeyOrders(Exception):
    """The objects at `pointer`, in any key order, tell apart more combinations of keys
    read, member counts and tested values than `any_order_fits` allows: the document is
    compiled again with that position in the schema's order (`schema._compiled`). Not a
    `GrammarError`, so that no step on the way takes it for one and goes on with a compile
    it cut short."""

    def __init__(self, pointer: str, keys: int) -> None:
        super().__init__(f"{pointer}: the {keys} properties of objects here, with their "
                         "property counts or the values they test, are too many to allow "
                         "in any order")
        self.pointer = pointer


class Schemas(Protocol):
    """What a position reads of the document being compiled (`part.Document` reads more)."""

    registry: Registry
    options: FrontendOptions
    draft: int

    def read(self, node: dict) -> SchemaNode:
        """The schema object `node` as dispatch reads it."""

    def key_matches(self, pattern: str, name: str, node: dict) -> bool:
        """Whether the `patternProperties` pattern matches the key `name`."""


class Position:
    """A place in the document: the schemas that may apply to the value there, the key ranking
    they imply, and the positions of the values below it (shared by all branches)."""

    def __init__(self, compiler: Schemas, refs: tuple[Ref, ...]) -> None:
        self.compiler = compiler
        self.refs = refs
        self._children: dict[str, Position] = {}

    @cached_property
    def closure(self) -> list[Ref]:
        """The schemas of this position and those applying in place (each once)."""
        seen: set[int] = set()
        out: list[Ref] = []
        stack = list(reversed(self.refs))
        while stack:
            ref = stack.pop()
            if not isinstance(ref.node, dict) or id(ref.node) in seen:
                continue
            ref = self.compiler.registry.at(ref.node, ref.base)
            seen.add(id(ref.node))
            node = ref.node
            if "$ref" in node and self.compiler.draft <= 7:  # the target replaces the node
                try:
                    stack.append(self.compiler.registry.resolve(ref))
                except GrammarError:
                    out.append(ref)  # reported when the value is compiled
                continue
            out.append(ref)
            inplace: list[Any] = []
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(key), list):
                    inplace.extend(node[key])
            for key in ("not", "if", "then", "else"):
                if key in node:
                    inplace.append(node[key])
            for key in ("dependentSchemas", "dependencies"):
                if isinstance(node.get(key), dict):
                    inplace.extend(v for v in node[key].values() if not isinstance(v, list))
            subs = [self.compiler.registry.at(sub, ref.base) for sub in inplace]
            if "$ref" in node:
                try:
                    subs.insert(0, self.compiler.registry.resolve(ref))
                except GrammarError:
                    pass  # reported when the value is compiled
            stack.extend(reversed(subs))
        return out

    @cached_property
    def is_open(self) -> bool:
        """Whether no schema here constrains the value or anything inside it (only
        annotations and unknown keywords), so that any JSON value is valid at any depth."""
        return not any(self.compiler.read(ref.node).constrains_anything for ref in self.closure)

    @cached_property
    def ranking(self) -> tuple[str, ...]:
        """Every key a schema here names (`properties`, `required`, dependencies, object
        values of `enum`/`const`), in an order that keeps the order of each `properties` and
        each object value where these orders agree; ties and conflicts go by first
        appearance. `required` and dependencies name keys but impose no order."""
        sequences: list[list[str]] = []
        for ref in self.closure:
            node = ref.node
            if isinstance(node.get("properties"), dict):
                sequences.append(list(node["properties"]))
            if isinstance(node.get("required"), list):
                sequences.extend([n] for n in node["required"] if isinstance(n, str))
            for key in ("dependentRequired", "dependentSchemas", "dependencies"):
                if isinstance(node.get(key), dict):
                    for name, value in node[key].items():
                        listed = value if isinstance(value, list) else []
                        sequences.extend([n] for n in [name, *listed] if isinstance(n, str))
            values = list(node["enum"]) if isinstance(node.get("enum"), list) else []
            if "const" in node:
                values.append(node["const"])
            sequences.extend(list(value) for value in values if isinstance(value, dict))
        return _merged_order(sequences)

    @cached_property
    def any_order(self) -> bool:
        """Whether objects here take their ranked keys in any order (`--key-order any`):
        where the sets of keys an object may have read are too many to tell apart in states,
        or the position is in `schema_order_at`, they follow the ranking, with a notice
        (every object here alike, so that products of them stay exact)."""
        compiler = self.compiler
        if compiler.options.key_order != "any" or not self.ranking or \
                self.pointer in compiler.options.schema_order_at:
            return False
        if any_order_fits(self.ranking, compiler.options.max_states):
            return True
        compiler.options.notice(
            f"{self.pointer}: the {len(self.ranking)} "
            f"properties of objects here ({', '.join(self.ranking[:3])}, ...) are too many "
            f"to allow in any order (2^{len(self.ranking)} sets of keys); they follow the "
            "schema's order there (as with --key-order schema); make the object smaller "
            "(nest groups of properties) or raise --max-states")
        return False

    @cached_property
    def pointer(self) -> str:
        """The JSON pointer of the first schema here, which notices name."""
        return self.compiler.registry.pointer(self.closure[0].node)

    def child(self, name: str) -> "Position":
        """The position of the value of key `name`."""
        position = self._children.get(name)
        if position is None:
            refs = []
            for ref in self.closure:
                node = ref.node
                props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
                matched = False
                if name in props:
                    refs.append(self.compiler.registry.at(props[name], ref.base))
                    matched = True
                for pattern, sub in pattern_properties(node).items():
                    if self.compiler.key_matches(pattern, name, node):
                        refs.append(self.compiler.registry.at(sub, ref.base))
                        matched = True
                if not matched and "additionalProperties" in node:
                    refs.append(self.compiler.registry.at(node["additionalProperties"], ref.base))
            position = self._children[name] = Position(self.compiler, tuple(refs))
        return position

    @cached_property
    def additional(self) -> "Position":
        """The position of values of keys outside the ranking."""
        refs = []
        for ref in self.closure:
            for sub in pattern_properties(ref.node).values():
                refs.append(self.compiler.registry.at(sub, ref.base))
            if "additionalProperties" in ref.node:
                refs.append(self.compiler.registry.at(ref.node["additionalProperties"], ref.base))
        return Position(self.compiler, tuple(refs))

    @cached_property
    def items(self) -> "Position":
        """The position of array elements (one for all indices)."""
        refs = []
        for ref in self.closure:
            node = ref.node
            for key in ("prefixItems", "items"):
                value = node.get(key)
                subs = value if isinstance(value, list) else [value] if key in node else []
                refs.extend(self.compiler.registry.at(sub, ref.base) for sub in subs)
            for key in ("additionalItems", "contains"):
                if key in node:
                    refs.append(self.compiler.registry.at(node[key], ref.base))
        return Position(self.compiler, tuple(refs))

    @cached_property
    def keys(self) -> "Position":
        """The position of object keys, as string values for `propertyNames`."""
        refs = [self.compiler.registry.at(r.node["propertyNames"], r.base) for r in self.closure
                if "propertyNames" in r.node]
        return Position(self.compiler, tuple(refs))


def pattern_properties(node: dict) -> dict[str, Any]:
    value = node.get("patternProperties")
    return value if isinstance(value, dict) else {}


def _merged_order(sequences: list[list[str]]) -> tuple[str, ...]:
    """The names of all `sequences`, each once, in an order that keeps every sequence's
    order if they can all be kept (topological; ties by first appearance), else in order of
    first appearance."""
    first_seen = {name: i for i, name in
                  enumerate(dict.fromkeys(n for seq in sequences for n in seq))}
    graph: dict[str, set[str]] = {name: set() for name in first_seen}
    for seq in sequences:
        for before, after in zip(seq, seq[1:]):
            if before != after:
                graph[after].add(before)
    sorter = TopologicalSorter(graph)
    try:
        sorter.prepare()
    except CycleError:
        return tuple(first_seen)
    ready = [(first_seen[n], n) for n in sorter.get_ready()]
    heapify(ready)
    out = []
    while ready:
        _, name = heappop(ready)
        out.append(name)
        sorter.done(name)
        for nxt in sorter.get_ready():
            heappush(ready, (first_seen[nxt], nxt))
    return tuple(out)
