"""Conditions on the keys of an object, compiled into the object's own automaton.

Real schemas say which keys an object must or must not have with applicators over small
sub-schemas: `anyOf: [{required: [a]}, {required: [b]}]`, `not: {required: [x]}`, `oneOf` of
`required`, `if: {properties: {kind: {const: k}}}, then: {required: [...]}`, dependencies. As
products of automata, each operand brings its own automaton of the whole object, every value
in it "any JSON value" unrolled several levels deep, and the product of a few of them exceeds
any state limit. As a *condition* they cost the object builder a few digits of state: for each
key they name, whether it is present and, when sub-schemas test its value, which of them the
value satisfies (the value's language split into those regions). The object's texts are then
exactly those whose keys and value regions make the condition true.

A sub-schema reads as a condition when it uses only `required`, `properties`, `type: object`,
`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, dependencies and `$ref`s to such
schemas (any annotation besides); anything else stays a boolean operation on automata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from itertools import combinations
from functools import reduce
from math import prod
from typing import Any, Callable

import numpy as np

from ...errors import GrammarError

# Formulas are tuples: ("present", key), ("in", key, test) (the value of a present key
# satisfies its test schema number `test`), ("object",) (the value is an object),
# ("objects", f) (f, or true for a value that is not an object), ("all", fs), ("any", fs),
# ("one", fs) (exactly one), ("not", f).
Formula = tuple

# the keywords a condition may use (others, annotations aside, make a sub-schema no condition)
_READABLE = frozenset({"type", "required", "properties", "dependentRequired", "dependencies",
                       "dependentSchemas", "$ref", "allOf", "anyOf", "oneOf", "not", "if",
                       "then", "else"})
_MAX_REF_DEPTH = 16      # $refs followed in one condition (deeper: not a condition)
MAX_KEY_STATES = 1 << 16  # combinations of key states one object's condition may track
APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if")  # "if" stands for if/then/else
_KINDS = {"allOf": "all", "anyOf": "any", "oneOf": "one"}

TRUE: Formula = ("all", ())


def holds(formula: Formula, leaf: Callable[[Formula], Any]) -> Any:
    """Whether `formula` holds, given the truth of its leaves ("present", "in", "object") by
    `leaf`: bools, or numpy arrays of bools (then one verdict per element)."""
    kind = formula[0]
    if kind in ("present", "in", "object"):
        return leaf(formula)
    if kind == "objects":
        return np.logical_or(np.logical_not(leaf(("object",))), holds(formula[1], leaf))
    if kind == "not":
        return np.logical_not(holds(formula[1], leaf))
    parts = [holds(part, leaf) for part in formula[1]]
    if kind == "all":
        return reduce(np.logical_and, parts, True)
    if kind == "any":
        return reduce(np.logical_or, parts, False)
    return sum(np.asarray(part, np.int64) for part in parts) == 1  # "one"


@dataclass
class KeyCondition:
    """What the applicators of one schema require of an object's keys: `formula`, and per key
    the sub-schemas (`tests`, as (schema, base URI)) its value is tested against; `listed`
    holds, per key, the tests that only list values (const, enum), with those values (as
    `value_key`s)."""

    formula: Formula = TRUE
    tests: dict[str, list[tuple[Any, str]]] = field(default_factory=dict)
    keys: dict[str, None] = field(default_factory=dict)  # named keys, in order of appearance
    listed: dict[str, dict[int, frozenset]] = field(default_factory=dict)
    targets: set[int] = field(default_factory=set)  # ids of the $ref targets read through

    def holds_for_others(self) -> bool:
        """Whether values that are not objects satisfy the condition."""
        return bool(holds(self.formula, lambda leaf: False))

    def satisfiable(self, key: str) -> list[frozenset[int]]:
        """The sets of `key`'s tests that one value can satisfy together: a value satisfies
        the tests that list it, and the other tests in any combination."""
        listed = self.listed.get(key, {})
        values = frozenset().union(*listed.values())
        signatures = {frozenset(i for i, vs in listed.items() if v in vs) for v in values}
        signatures.add(frozenset())  # a value that no test lists
        others = [i for i in range(len(self.tests.get(key, ()))) if i not in listed]
        found = {signature | frozenset(chosen) for signature in signatures
                 for size in range(len(others) + 1) for chosen in combinations(others, size)}
        return sorted(found, key=lambda tests: (len(tests), sorted(tests)))

    def key_states(self) -> int:
        """The combinations of key states the object builder tracks (a key absent, or which
        set of its tests its value satisfies)."""
        return prod(1 + len(self.satisfiable(key)) for key in self.keys)


class ConditionReader:
    """Reads sub-schemas as key conditions into one `KeyCondition` (its tests numbered per
    key); `read` answers None for a sub-schema that is not a condition."""

    def __init__(self, at: Callable[[Any, str], Any], resolve: Callable[[Any], Any],
                 draft: int, keywords: frozenset[str],
                 in_progress: Callable[[Any], bool] = lambda node: False) -> None:
        self._at = at              # (schema, base) -> Ref with the schema's own base
        self._resolve = resolve    # Ref of a schema with $ref -> Ref of its target
        self._in_progress = in_progress  # whether a $ref target's values are being compiled
        self._draft = draft
        self._keywords = keywords  # the keywords that constrain values (not annotations)
        self.condition = KeyCondition()

    def add(self, formula: Formula) -> None:
        """Require `formula` too."""
        self.condition.formula = ("all", (*self.condition.formula[1], formula))

    def read(self, schema: Any, base: str, depth: int = 0) -> Formula | None:
        if schema is True:
            return TRUE
        if schema is False:
            return ("not", TRUE)
        if not isinstance(schema, dict) or depth > _MAX_REF_DEPTH:
            return None
        if self._keywords.intersection(schema) - _READABLE:
            return None
        ref = self._at(schema, base)
        base = ref.base
        parts: list[Formula] = []
        if "$ref" in schema:
            try:
                target = self._resolve(ref)
            except GrammarError:
                return None  # reported when the schema is compiled
            if self._in_progress(target.node):
                return None  # a recursion: its key tests would compile it again, without end
            self.condition.targets.add(id(target.node))
            found = self.read(target.node, target.base, depth + 1)
            if found is None or self._draft <= 7:
                return found  # draft 7 and earlier: $ref replaces its siblings
            parts.append(found)
        if "type" in schema:
            if schema["type"] not in ("object", ["object"]):
                return None
            parts.append(("object",))
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        if not isinstance(required, list) or not all(isinstance(k, str) for k in required) \
                or not isinstance(properties, dict):
            return None
        parts.extend(("objects", ("present", self._key(k))) for k in required)
        for key, sub in properties.items():
            if sub is not True and sub != {}:
                parts.append(("objects", ("in", self._key(key), self._test(key, sub, base))))
        dependencies = self.dependencies(schema, base, depth)
        if dependencies is None:
            return None
        parts.extend(dependencies)
        for keyword in APPLICATORS:
            if keyword in schema:
                found = self.applicator(schema, keyword, base, depth)
                if found is None:
                    return None
                parts.append(found)
        return ("all", tuple(parts))

    def applicator(self, schema: dict, keyword: str, base: str,
                   depth: int = 0) -> Formula | None:
        """The applicator `keyword` of `schema` ("if" with its then and else) as a condition,
        or None if one of its sub-schemas is not a condition."""
        if keyword == "not":
            found = self.read(schema["not"], base, depth)
            return None if found is None else ("not", found)
        if keyword == "if":
            found = self.read_all([schema["if"], schema.get("then", True),
                                   schema.get("else", True)], base, depth)
            return None if found is None else if_then_else(*found)
        found = self.read_all(schema[keyword], base, depth)
        return None if found is None else (_KINDS[keyword], tuple(found))

    def read_all(self, schemas: Any, base: str, depth: int = 0) -> list[Formula] | None:
        """Each of a list of sub-schemas as a condition, or None if one is not."""
        if not isinstance(schemas, list):
            return None
        formulas = [self.read(schema, base, depth) for schema in schemas]
        return None if any(f is None for f in formulas) else formulas

    def dependencies(self, schema: dict, base: str,
                     depth: int = 0) -> list[Formula] | None:
        """Every dependency of `schema` as a condition, or None if one is not."""
        out = []
        for key, dependency in dependencies_of(schema).items():
            found = self.dependency(key, dependency, base, depth)
            if found is None:
                return None
            out.append(found)
        return out

    def dependency(self, key: str, dependency: Any, base: str,
                   depth: int = 0) -> Formula | None:
        """"Objects with `key` have the keys listed / satisfy the schema `dependency`" as a
        condition, or None if the schema is not one."""
        if isinstance(dependency, list):
            then = ("all", tuple(("present", self._key(n)) for n in dependency
                                 if isinstance(n, str)))
        else:
            then = self.read(dependency, base, depth)
            if then is None:
                return None
        return ("objects", ("any", (("not", ("present", self._key(key))), then)))

    def snapshot(self) -> KeyCondition:
        """A copy of the condition read so far (`restore` returns to it)."""
        kept = self.condition
        return KeyCondition(kept.formula, {k: list(v) for k, v in kept.tests.items()},
                            dict(kept.keys), {k: dict(v) for k, v in kept.listed.items()},
                            set(kept.targets))

    def restore(self, saved: KeyCondition) -> None:
        self.condition = saved

    def _key(self, key: str) -> str:
        self.condition.keys.setdefault(key)
        return key

    def _test(self, key: str, schema: Any, base: str) -> int:
        tests = self.condition.tests.setdefault(key, [])
        for index, (known, _) in enumerate(tests):
            if known is schema:
                return index
        tests.append((schema, base))
        values = _listed_values(schema, self._keywords)
        if values is not None:  # values satisfy it only by being listed
            self.condition.listed.setdefault(key, {})[len(tests) - 1] = values
        return len(tests) - 1


def _listed_values(schema: Any, keywords: frozenset[str]) -> frozenset | None:
    """The values (as `value_key`s) of a schema that only lists them (const, enum, or both),
    or None for another schema."""
    if not isinstance(schema, dict) or not keywords.intersection(schema) or \
            not keywords.intersection(schema) <= {"const", "enum"}:
        return None
    values = schema["enum"] if "enum" in schema else None
    if values is not None and not isinstance(values, list):
        return None
    keys = None if values is None else frozenset(map(value_key, values))
    if "const" in schema:
        const = value_key(schema["const"])
        keys = frozenset({const}) if keys is None or const in keys else frozenset()
    return keys


def value_key(value: Any) -> Any:
    """A hashable identity of a JSON value, with JSON's equality (1 == 1.0 == 1e0, true != 1,
    objects whatever their key order), at any depth."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float, Decimal)):
        return ("number", Decimal(str(value)) if isinstance(value, float) else Decimal(value))
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(value_key(v) for v in value))
    if isinstance(value, dict):  # keys in any order
        return ("object", frozenset((k, value_key(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {value!r}")


def dependencies_of(schema: dict) -> dict[str, Any]:
    """The dependencies of a schema by key: a list of keys or a schema (the keywords
    dependentRequired, dependentSchemas and draft 7's dependencies)."""
    out = {}
    for keyword in ("dependentRequired", "dependentSchemas", "dependencies"):
        entries = schema.get(keyword)
        if isinstance(entries, dict):
            out.update((key, value) for key, value in entries.items()
                       if keyword != "dependentRequired" or isinstance(value, list))
    return out


def if_then_else(condition: Formula, then: Formula, otherwise: Formula) -> Formula:
    return ("any", (("all", (condition, then)), ("all", (("not", condition), otherwise))))
