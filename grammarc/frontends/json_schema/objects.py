"""Objects: members in the key ranking of their position (or in any order), required keys,
property counts, patternProperties, propertyNames, additional properties, and conditions on
the keys (`conditions.py`) compiled into the object's own automaton; and the keys that tell
the objects of `oneOf` branches apart."""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any, Callable, NamedTuple

import numpy as np

from ...automaton import EMPTY, NOTHING, Expr, alt, concat, repeat
from ...errors import UnsupportedError
from . import strings
from .conditions import (
    APPLICATORS, MAX_KEY_STATES, ConditionReader, Formula, KeyCondition, dependencies_of, holds,
    value_key,
)
from .node import KEYWORDS, TYPES, count_keyword, distinct_schemas, types_tested
from .part import CompilerPart, Document
from .positions import Position, TooManyKeyOrders, any_order_fits, pattern_properties
from .resolution import Ref, escape_token
from .scalars import Scalars

_MAX_PATTERN_REGIONS = 8   # patternProperties per object (2^n key regions)


class Objects(CompilerPart):
    """The texts of the objects a schema allows."""

    def __init__(self, compiler: Document, scalars: Scalars) -> None:
        super().__init__(compiler)
        self.scalars = scalars
        self._key_dfas: dict[str, Any] = {}
        self._unranked_keys: dict[frozenset[str], Expr] = {}  # by the names they leave out

    def key_condition(self, ref: Ref) -> tuple[KeyCondition | None, dict]:
        """The applicators of a schema that read as conditions on an object's keys
        (`conditions.py`: compiled into the schema's object, not as products), and the schema
        with the applicators left to products (dependent schemas under "dependentSchemas").
        A schema with no keyword of its own keeps its `allOf` and `anyOf`: an intersection of
        one operand needs no product, nor does a union, and they keep their operands'
        machines."""
        node = ref.node
        local = self.compiler.read(node).constrains_locally
        reader = ConditionReader(self.registry.at, self.registry.resolve, self.draft,
                                 KEYWORDS, self.compiler.in_progress)
        rest = {k: v for k, v in node.items()
                if k not in ("dependentRequired", "dependentSchemas", "dependencies")}
        rest["dependentSchemas"] = {}  # the dependencies that are not taken, as schemas

        def take(read: Callable[[], Formula | None]) -> bool:
            saved = reader.snapshot()
            formula = read()
            if formula is not None and reader.condition.key_states() <= MAX_KEY_STATES:
                reader.add(formula)
                return True
            reader.restore(saved)
            return False

        for key, dependency in dependencies_of(node).items():
            if not take(lambda k=key, d=dependency: reader.dependency(k, d, ref.base)):
                rest["dependentSchemas"][key] = {"required": dependency} \
                    if isinstance(dependency, list) else dependency
        if isinstance(node.get("allOf"), list) and local:  # each branch on its own
            rest["allOf"] = [b for b in node["allOf"]
                             if not take(lambda b=b: reader.read(b, ref.base))]
        for keyword in APPLICATORS[1:]:
            if keyword in node and (keyword != "if" or "then" in node or "else" in node) and \
                    (local or keyword != "anyOf") and \
                    take(lambda k=keyword: reader.applicator(node, k, ref.base)):
                for taken in (keyword, "then", "else") if keyword == "if" else (keyword,):
                    rest.pop(taken, None)
        condition = reader.condition
        return (condition if condition.keys or condition.formula[1] else None), rest

    def object(self, ref: Ref, position: Position,
               condition: KeyCondition | None = None) -> Expr:
        node = ref.node
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        patterns = pattern_properties(node)
        extra_schema = self.additional(node)
        required = set(node.get("required", []) if isinstance(node.get("required"), list) else [])
        unranked = (set(properties) | required) - set(position.ranking)
        if unranked:  # the ranking comes from every schema here; missing names are a bug
            raise RuntimeError(f"internal error: {sorted(unranked)} missing from the key ranking "
                               f"at {self.registry.pointer(node)}")
        names_pos = position.keys
        names_schema = node.get("propertyNames")
        slots = []
        regions: dict[str, _KeyValues] = {}  # the values of the keys the condition names
        for name in position.ranking:
            child = position.child(name)
            applicable = [properties[name]] if name in properties else []
            applicable += [s for p, s in patterns.items() if self.key_matches(p, name, node)]
            if not applicable:
                applicable = [extra_schema]
            if names_schema is not None and not self._name_allowed(names_schema, ref, name,
                                                                   names_pos):
                applicable = [False]
            language = self.compiler.intersect_all([self.value(Ref(s, ref.base), child)
                                           for s in distinct_schemas(applicable)])
            if condition is None or name not in condition.keys:  # (those split by tests)
                language = self.machines.read_value(language, node,
                                                    f"properties/{escape_token(name)}")
            slots.append((name, language, name in required))
            if condition is not None and name in condition.keys:
                anything = not any(s is False or isinstance(s, dict) and
                                   self.compiler.read(s).constrains_anything for s in applicable)
                regions[name] = _KeyValues(self.compiler, language, anything,
                                           condition.tests.get(name, []),
                                           condition.satisfiable(name), child)
        def unranked() -> Expr:
            """Keys outside the ranking that propertyNames allows."""
            keys = self.unranked_key(position)
            if names_schema is None:
                return keys
            return self.ops.intersect(keys, self._names_language(names_schema, ref, names_pos))

        entries = self._extra_entries(ref, position, unranked, patterns, extra_schema)
        counts = (count_keyword(node, "minProperties") or 0, count_keyword(node, "maxProperties"))
        return self.object_language(position, slots, None, entries, counts, condition,
                                     regions)

    def additional(self, node: dict) -> Any:
        """The schema of an object's keys that no property or pattern names: its
        `additionalProperties`, else any value, or none with `--no-additional-properties`."""
        return node.get("additionalProperties", bool(self.options.additional_properties))

    def unranked_key(self, position: Position) -> Expr:
        """JSON texts of keys that are not in the position's ranking."""
        any_key = strings.any_string()
        if not position.ranking:
            return any_key
        names = frozenset(position.ranking)
        known = self._unranked_keys.get(names)
        if known is None:
            known = self._unranked_keys[names] = self.ops.difference(
                any_key, alt(*(strings.string_literal(k) for k in sorted(names))))
        return known

    def _extra_entries(self, ref: Ref, position: Position, unranked: Callable[[], Expr],
                       patterns: dict[str, Any], extra_schema: Any) -> Expr:
        """`key: value` for keys outside the ranking (the texts `unranked()` gives, not
        computed for a closed object), split by the patterns they match."""
        names = list(patterns)
        if not names and extra_schema is False:
            return NOTHING
        keys = unranked()
        if len(names) > _MAX_PATTERN_REGIONS:
            raise UnsupportedError(f"{self.registry.pointer(ref.node)}: more than "
                               f"{_MAX_PATTERN_REGIONS} patternProperties in one object")
        key_languages = [strings.pattern_texts(
            p, f"{self.registry.pointer(ref.node)}/patternProperties", "patternProperties")
            for p in names]
        options = []
        child = position.additional
        for size in range(len(names) + 1):
            for chosen in combinations(range(len(names)), size):
                region = keys
                for i in range(len(names)):
                    op = self.ops.intersect if i in chosen else self.ops.difference
                    region = op(region, key_languages[i])
                if region == NOTHING:
                    continue
                schemas = [patterns[names[i]] for i in chosen] or [extra_schema]
                value = self.compiler.intersect_all([self.value(Ref(s, ref.base), child)
                                            for s in schemas])
                if value != NOTHING:
                    options.append(concat(region, self.layout.colon, value))
        return alt(*options)

    def object_language(self, position: Position, slots: list[tuple[str, Expr, bool]],
                         unranked_key: Expr | None, extra: Expr, counts: tuple[int, int | None],
                         condition: KeyCondition | None = None,
                         regions: dict[str, _KeyValues] | None = None) -> Expr:
        """`{...}` with the ranked slots in order (each present or absent), then any number of
        `extra` entries, honouring required keys, property counts and the `condition` on the
        keys it names (their values split by the condition's tests in `regions`)."""
        layout = self.layout
        if unranked_key is not None:  # `extra` is a value language; pair it with the keys
            extra = concat(unranked_key, layout.colon, extra) if extra != NOTHING else NOTHING
        min_count, max_count = counts
        counting = bool(min_count) or max_count is not None
        cap = max(min_count, max_count or 0) + 1 if counting else 1
        named = [name for name, _, _ in slots if condition is not None and
                 name in condition.keys]
        if condition is not None and len(named) < len(condition.keys):
            raise RuntimeError(f"internal error: {sorted(set(condition.keys) - set(named))} "
                               "missing from the key ranking of a condition")
        regions = regions or {}
        level = {name: j for j, name in enumerate(named)}
        weights, residual = _residual_states(condition, named, regions)
        if position.any_order:
            return self._any_order_object(position, slots, extra, counts, cap, level,
                                          weights, residual[-1] >= 0, regions)

        memo: dict[tuple[int, int, int], Expr] = {}

        def members(i: int, count: int, state: int) -> Expr:
            """The rest of the object from slot i on, after `count` members, the named keys
            before it in the residual `state` of the condition."""
            key = (i, count, state)
            if key in memo:
                return memo[key]
            if i == len(slots):
                result = self.layout.sequence(extra, count, min_count, max_count)
            else:
                name, language, required = slots[i]
                j = level.get(name)
                following = residual[j + 1] if j is not None else None
                options = []
                if not required:
                    after = state if j is None else following[state]
                    if after >= 0:
                        options.append(members(i + 1, count, after))
                if max_count is None or count + 1 <= max_count:
                    # the values that lead to each next state (only the splits that matter)
                    values = [(language, state)] if j is None else \
                        regions[name].by_next_state(following, state, weights[j])
                    for value, after in values:
                        if value == NOTHING:
                            continue
                        entry = concat(strings.string_literal(name), layout.colon, value)
                        options.append(concat(layout.comma if count else EMPTY, entry,
                                              members(i + 1, min(count + 1, cap), after)))
                result = alt(*options)
            memo[key] = result
            return result

        start = residual[0][0]
        try:
            body = members(0, 0, start) if start >= 0 else NOTHING
        finally:
            del members  # a recursive closure is a cycle: free it now
        if body == NOTHING:
            return NOTHING
        return concat(layout.open_object, body, layout.close_object)

    def _any_order_object(self, position: Position, slots: list[tuple[str, Expr, bool]],
                          extra: Expr,
                          counts: tuple[int, int | None], cap: int, level: dict[str, int],
                          weights: list[int], verdict: np.ndarray,
                          regions: dict[str, _KeyValues]) -> Expr:
        """`{...}` with the slots in any order, each at most once, and `extra` entries
        anywhere among them: a state is the set of slots read, the count of members (up to
        `cap`) and the digits of the condition's keys read (`_residual_states`; `verdict`
        tells, for every combination, whether the object is valid). With calls, each value is
        a machine, so that the states of the sets of keys do not each hold a copy of it.
        Past the states `any_order_fits` allows, `TooManyKeyOrders` (before building more)."""
        layout, max_states = self.layout, self.options.max_states
        if self.calls:
            slots = [(name, self.machines.value_machine(
                f"{position.pointer}/properties/{escape_token(name)}", language), needed)
                     for name, language, needed in slots]
        min_count, max_count = counts
        required = sum(1 << i for i, (_, _, needed) in enumerate(slots) if needed)
        # live[state]: the condition can still hold after the named keys read in `state`
        # (adding the keys not read yet, one at a time, in mixed radix)
        live = verdict.copy()
        states = np.arange(len(verdict))
        for name, j in level.items():
            base = regions[name].num_sets + 1
            absent = states // weights[j] % base == 0
            for m in range(1, base):
                later = np.flatnonzero(absent)
                live[later] |= live[later + m * weights[j]]
        following = np.where(live, states, -1)
        memo: dict[tuple[int, int, int], Expr] = {}

        def members(read: int, count: int, state: int) -> Expr:
            """The rest of the object after the slots in `read`, `count` members and the
            condition's keys in `state`."""
            key = (read, count, state)
            if key in memo:
                return memo[key]
            options = []
            if read & required == required and count >= min_count and verdict[state]:
                options.append(EMPTY)
            comma = layout.comma if count else EMPTY
            if max_count is None or count < max_count:
                after_count = min(count + 1, cap)
                for i, (name, language, _) in enumerate(slots):
                    if read >> i & 1:
                        continue
                    j = level.get(name)
                    values = [(language, state)] if j is None else \
                        regions[name].by_next_state(following, state, weights[j])
                    for value, after in values:
                        if value != NOTHING:
                            options.append(concat(
                                comma, strings.string_literal(name), layout.colon, value,
                                members(read | 1 << i, after_count, after)))
            rest = alt(*options)
            if extra != NOTHING and (max_count is None or count < max_count):
                if after_count == count:  # past every bound: extras loop here
                    rest = concat(repeat(concat(comma, extra), 0, None), rest)
                else:
                    rest = alt(rest, concat(comma, extra, members(read, after_count, state)))
            memo[key] = rest
            if not any_order_fits(position.ranking, max_states, len(memo)):
                raise TooManyKeyOrders(position.pointer, len(position.ranking))
            return rest

        body = members(0, 0, 0) if following[0] >= 0 else NOTHING
        if body == NOTHING:
            return NOTHING
        return concat(layout.open_object, body, layout.close_object)

    def _names_language(self, names_schema: Any, ref: Ref, position: Position) -> Expr:
        strings_only = strings.any_string()
        return self.ops.intersect(self.value(Ref(names_schema, ref.base), position),
                                  strings_only)

    def _name_allowed(self, names_schema: Any, ref: Ref, name: str, position: Position) -> bool:
        language = self._names_language(names_schema, ref, position)
        dfa = self.ops.dfa(language)
        return dfa is not None and dfa.accepts(json.dumps(name).encode())

    def key_matches(self, pattern: str, name: str, node: dict) -> bool:
        """Whether the ECMA-262 `pattern` matches the key `name` (as patternProperties do)."""
        dfa = self._key_dfas.get(pattern)
        if dfa is None:
            where = self.registry.pointer(node) + "/patternProperties"
            dfa = self._key_dfas[pattern] = self.ops.dfa(strings.pattern_texts(
                pattern, where, "patternProperties"))
        text = json.dumps(name, ensure_ascii=False)  # one spelling: the language has them all
        return dfa is not None and dfa.accepts(text.encode("utf-8", "surrogatepass"))

    def object_keys(self, schema: Ref) -> _ObjectKeys | None:
        """For a schema of objects only, each key it requires with the values it allows
        there when some part of it limits them to a small explicit set (`const`, `enum`,
        booleans, `null`; else None), and its parts; None for a schema that may take other
        values."""
        parts = [p for p in self.registry.conjuncts(schema, set()) if p.node is not False]
        if not any(self.compiler.read(p.node).types == {"object"} for p in parts):
            return None
        required = {k for p in parts if isinstance(p.node.get("required"), list)
                    for k in p.node["required"] if isinstance(k, str)}
        return _ObjectKeys({key: self._key_values(parts, key) for key in required}, parts)

    def disjoint_objects(self, a: _ObjectKeys | None, b: _ObjectKeys | None) -> bool:
        """Whether two schemas of objects only share no value: one requires a key the other
        forbids, or both require a key whose explicit values differ."""
        if a is None or b is None:
            return False
        return any(a.required[key] is not None and b.required[key] is not None and
                   not a.required[key] & b.required[key]
                   for key in a.required.keys() & b.required.keys()) or \
            any(self._forbids(b.parts, key) for key in a.required) or \
            any(self._forbids(a.parts, key) for key in b.required)

    def _forbids(self, parts: list[Ref], key: str) -> bool:
        """Whether some part makes an object holding `key` invalid: `false` as the key's
        property or matching pattern, or no property nor pattern for it and no additional
        properties (`false`, or the `--no-additional-properties` default)."""
        for part in parts:
            node = part.node
            properties = node.get("properties")
            if isinstance(properties, dict) and key in properties:
                if properties[key] is False:
                    return True
                continue
            patterns = pattern_properties(node)
            matched = [schema for pattern, schema in patterns.items()
                       if self.key_matches(pattern, key, node)]
            if matched:
                if any(schema is False for schema in matched):
                    return True
                continue
            if self.additional(node) is False:
                return True
        return False

    def _key_values(self, parts: list[Ref], key: str) -> set | None:
        """The values (`value_key`s) the `parts` allow for `key` when some part limits them
        to a small explicit set, else None."""
        allowed = None
        for part in parts:
            properties = part.node.get("properties")
            if not isinstance(properties, dict) or key not in properties:
                continue
            value_schema = self.registry.at(properties[key], part.base)
            for schema in self.registry.conjuncts(value_schema, set()):
                values = self.scalars.finite_values(schema.node)
                if values is not None:
                    found = {value_key(v) for v in values}
                    allowed = found if allowed is None else allowed & found
        return allowed


class _KeyValues:
    """The values of a key that a condition names, split by which of its tests (sub-schemas)
    they satisfy, built only as far as the condition needs: where every set of satisfied tests
    leads to the same state, the values stay whole (no product); a split by one test is one
    product, or none where the first byte decides (a test of types only) or the key's own
    schema accepts any value (then the values that satisfy the test are the test's own)."""

    def __init__(self, compiler: Document, language: Expr, anything: bool,
                 tests: list[tuple[Any, str]], sets: list[frozenset[int]],
                 position: Position) -> None:
        self.compiler = compiler
        self.language = language
        self.anything = anything  # `language` is any JSON value
        self.tests = tests
        self.sets = sets  # the sets of tests a value can satisfy together (numbered)
        self.position = position
        self._compiled: dict[int, Expr] = {}
        self._splits: dict[tuple[int, bool], Expr] = {}
        self._groups: dict[frozenset[int], Expr] = {}

    @property
    def num_sets(self) -> int:
        return len(self.sets)

    def by_next_state(self, following: np.ndarray, state: int,
                      weight: int) -> list[tuple[Expr, int]]:
        """(values, next state) for each live next state of `state`, given the states
        `following` it by the digit of this key (weight `weight`)."""
        groups: dict[int, list[int]] = {}
        for m in range(self.num_sets):
            after = int(following[state + (m + 1) * weight])
            if after >= 0:
                groups.setdefault(after, []).append(m)
        return [(self.values(frozenset(sets)), after) for after, sets in groups.items()]

    def values(self, sets: frozenset[int]) -> Expr:
        """The values whose set of satisfied tests is one of the numbered `sets`."""
        found = self._groups.get(sets)
        if found is None:
            if len(sets) == self.num_sets:
                found = self.language
            else:
                single = [(i, i in self.sets[m]) for m in [min(sets)]
                          for i in range(len(self.tests))
                          if sets == {n for n in range(self.num_sets)
                                      if (i in self.sets[n]) == (i in self.sets[m])}]
                found = self._split(*single[0]) if single else \
                    alt(*(self._exactly(self.sets[m]) for m in sorted(sets)))
            self._groups[sets] = found
        return found

    def _exactly(self, satisfied: frozenset[int]) -> Expr:
        """The values that satisfy the tests `satisfied` and no other."""
        out = self.language
        for i in range(len(self.tests)):
            out = self.compiler.ops.intersect(out, self._split(i, i in satisfied))
        return out

    def _split(self, i: int, satisfied: bool) -> Expr:
        """The values that satisfy test i (or do not)."""
        key = (i, satisfied)
        found = self._splits.get(key)
        if found is None:
            compiler, language = self.compiler, self.language
            schema, _ = self.tests[i]
            types = types_tested(schema)
            by_type = None if types is None else compiler.of_types(
                language, types if satisfied else set(TYPES) - types)
            if by_type is not None:
                found = by_type
            elif satisfied:
                test = self._test(i)
                found = test if self.anything else compiler.ops.intersect(language, test)
            else:
                found = compiler.difference(language, self._test(i))
            self._splits[key] = found
        return found

    def _test(self, i: int) -> Expr:
        """Test i's values at this key, narrowed to the first bytes of the key's values."""
        found = self._compiled.get(i)
        if found is None:
            compiler = self.compiler
            schema, base = self.tests[i]
            found = compiler.value(Ref(schema, base), self.position)
            first = compiler.machines.starting_bytes(self.language)
            if first is not None:
                label = "".join(chr(b) for b in np.flatnonzero(first))
                narrowed = compiler.starting_with(found, first, label)
                found = found if narrowed is None else narrowed
            self._compiled[i] = found
        return found


def _residual_states(condition: KeyCondition | None, named: list[str],
                     regions: dict[str, _KeyValues]) -> tuple[list[int], list[np.ndarray]]:
    """The states an object's automaton needs for `condition` while its `named` keys are read
    in order. A state numbers what the keys read so far hold, in mixed radix (digit j, of
    weight `weights[j]`: 0 when the j-th named key is absent, m + 1 when its value satisfies
    the set of tests numbered m, `_KeyValues.sets`). `residual[j][state]`, for a state of
    the first j keys, is the smallest state with the same verdict for every way the other keys
    can follow (-1: no way satisfies the condition), so that prefixes with the same future
    share the rest of the automaton."""
    weights = [1]
    for name in named:
        weights.append(weights[-1] * (1 + regions[name].num_sets))
    verdict = np.ones(weights[-1], bool)
    if condition is not None:
        states = np.arange(weights[-1])
        digits = {name: states // weights[j] % (1 + regions[name].num_sets)
                  for j, name in enumerate(named)}

        def leaf(formula: Formula) -> Any:
            if formula[0] == "object":
                return True
            digit = digits[formula[1]]
            if formula[0] == "present":
                return digit != 0
            satisfied = [True] + [formula[2] in tests for tests in regions[formula[1]].sets]
            return np.array(satisfied)[digit]  # an absent key satisfies every test

        verdict[:] = holds(condition.formula, leaf)
    residual = []
    for width in weights:
        table = verdict.reshape(-1, width)  # a row per future, a column per state
        # each state's column of verdicts as one opaque value (numpy's row-wise unique goes
        # through a structured type per column, slow on wide tables)
        columns = np.ascontiguousarray(np.packbits(table.T, axis=1))
        keys = columns.view(np.dtype((np.void, columns.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        canonical = first[inverse.reshape(-1)].astype(np.int64)
        canonical[~table.any(axis=0)] = -1
        residual.append(canonical)
    return weights, residual


class _ObjectKeys(NamedTuple):
    """A schema of objects only, as `exactly_one` tells branches apart: each key it requires
    with its explicit values (None: not limited to a few), and the parts it is made of."""

    required: dict[str, set | None]
    parts: list[Ref]
