"""JSON Schema to the language of the JSON texts of its valid instances.

Serialisation rules (documented in docs/json-schema.md):

* whitespace follows the layout chosen by `--whitespace`;
* at each position of the document, object keys follow one *ranking*: the property names of
  every schema that can apply there (through `allOf`, `anyOf`, `oneOf`, `not`, `if`, `$ref`,
  dependencies), keeping each `properties` order where they agree (`Position.ranking`); keys
  not in the ranking come after the ranked ones, in any order (with `--key-order any`, the
  ranked ones too, each at most once: `Position.any_order`). Because every branch of a
  position uses the same rule, intersections and complements of branch languages are exact;
* strings may use every JSON escape; numbers follow `numbers.py`;
* recursive `$ref`s and values no schema constrains (`{}`, `true`, additional properties,
  items without a schema) are machines called at run time, so they nest to any depth; where a
  boolean operation needs them flat, they are unrolled / nested at most `--max-depth` levels.

Boolean keywords (`allOf`, `not`, `oneOf`, `if`/`then`/`else`, `dependentSchemas`,
`contains`, patterns with lengths, ...) are computed on automata (`automaton.products`).

`Compiler` here does value dispatch, `allOf` merging and the boolean operations; the other
jobs are rooms beside it: `resolution` ($ref, drafts, the document's checks), `node` (a schema
object read once), `positions` (key ranking), `objects`, `arrays`, `scalars` (with `numbers`
and `strings`), `any_value`, `layout`, `linker` (the machines and their calls) and
`serialisation` (`canonical_dumps`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import combinations
from typing import Any

import numpy as np

from ...automaton import NOTHING, Automaton, ByteDFA, Expr, Ops, alt, charset, concat, repeat
from ...automaton.callgraph import (
    called_names, reachable_machines, recursive_machines, replace_calls, with_first_bytes,
)
from ...automaton.counters import is_counted
from ...automaton.expr import Call, MachineSet, exact_to
from ...automaton.linking import fallback_language
from ...automaton.signals import UnresolvedCallError
from ...charsets import MAX_CODE_POINT
from ...errors import GrammarError, TooManyStatesError, UnsupportedError
from .. import FrontendOptions
from . import numbers, strings
from .any_value import ANY_MACHINE, AnyValues
from .arrays import Arrays
from .conditions import KeyCondition
from .dynamic_refs import rewrite_dynamic_refs
from .layout import Layout
from .linker import CANONICAL, Machines
from .node import (
    KEYWORDS, OBJECT_MERGE_KEYWORDS, TYPES, SchemaNode, bytes_label, count_keyword,
    distinct_schemas, exact_numbers, first_bytes, is_container,
)
from .meta import check_against_meta_schema
from .objects import Objects
from .numbers import Bounds
from .positions import Position, TooManyKeyOrders
from .resolution import (
    ROOT_URI, Ref, Registry, check_spelling, check_supported,
    draft_of, escape_token, subschemas,
)
from .scalars import Scalars
from .unevaluated import rewrite_unevaluated

_NUMBERS_START = np.zeros(256, bool)  # the first bytes of values that may hold a number
_NUMBERS_START[list(b"-0123456789[{")] = True
_ANY_CHARACTER = charset([(0, MAX_CODE_POINT)])
# a recursive $ref cut without calls: no value, and exact for none (an operation that
# subtracts it keeps nothing of its minuend, see `Ops`)
_CUT = Automaton(ByteDFA(np.zeros((2, 1), np.int32), np.zeros(256, np.int32),
                         np.zeros(2, bool)), -1)


_KEY_ORDER_RETRIES = 8  # positions put in the schema's key order, one compile each
_FLAT_STRING_STATES = 256  # string machines this small are inlined where nothing else calls


@dataclass
class Compiler:
    """Compiles one schema document; `value(ref, position)` is the workhorse.

    With `calls`, a value the schema leaves open ("any JSON value" where no schema applies:
    `true`, `{}`, default `additionalProperties`), a recursive `$ref` and a `$ref` to an
    object or array schema are calls of machines, each built once, recursion exact at any
    depth. A boolean operation keeps calls where it can (`Ops`), or inlines the machines its
    operands call (`flat_calls`); one that meets a machine still being built (a recursion
    through the operation itself) is a machine computed once that one is (`later`), or where
    the operation needs flat operands there, the document is compiled again without calls
    (`compile_schema`). With `open_recursions`, a union whose options may start alike opens
    those that recurse (or are still being built, `union`) so that the linker need not inline
    them; where the machines cannot be linked all the same, the alternative is the document
    compiled without such openings (so that its flat fallback does not grow with them).

    Before that, where a recursion's call may be in doubt with a value another branch reads
    inline (`{"b": "x"}` beside `{"b": <a $ref to the schema itself>}` in an `anyOf`), the
    alternative tried first is the document with `value_machines`: every property's value and
    array item a machine of its own (`Machines.read_value`), so that the calls in doubt are
    all calls of machines, which the linker can unite (`automaton.unions`). Where those
    cannot be linked either, their alternative is the `fallback` they retried (so a flat
    fallback never unrolls the value machines, each of which would count as a level)."""

    root: Any
    options: FrontendOptions
    calls: bool = False
    open_recursions: bool = True
    value_machines: bool = False
    fallback: MachineSet | None = None  # with value_machines: what they retry
    registry: Registry = field(init=False)
    ops: Ops = field(init=False)
    machines: Machines = field(init=False)

    def __post_init__(self) -> None:
        check_against_meta_schema(self.root)
        self._original_root = self.root
        self._opened = False  # whether `open_recursions` opened or deferred a union
        self.root = exact_numbers(self.root)
        self.draft = draft_of(self.root)
        self.registry = Registry(self.root, self.draft)
        for rewrite in (rewrite_dynamic_refs, rewrite_unevaluated):
            if rewrite(self.registry):  # new allOf branches: their pointers too
                self.registry = Registry(self.root, self.draft)
        self.machines = Machines(self)
        self.ops = Ops(self.options.max_states, self.machines.flat_calls if self.calls else None,
                       self.machines.nested_at_most, self.machines if self.calls else None)
        self.layout = Layout.from_style(self.options.whitespace)
        self.scalars = Scalars(self)
        self.arrays = Arrays(self, self.scalars)
        self.objects = Objects(self, self.scalars)
        self.any_values = AnyValues(self, self.objects)
        self._nodes: dict[int, SchemaNode] = {}  # each schema object read, by its identity
        self._active: dict[int, int] = {}
        self._tested: dict[int, int] = {}  # $ref targets read as conditions being compiled
        self._unrolled: set[str] = set()
        self._union_names: dict[tuple, tuple[str, list[Expr]]] = {}  # and the options
        # an allOf of object keywords as one schema, by the schema holding it
        self._object_merges: dict[int, tuple[dict | bool, str | None] | None] = {}
        # the `allOf` of the schemas a merge gives one key, by base and the schemas' identities
        self._conjunctions: dict[tuple, dict] = {}
        self._canonical: dict[int, tuple[Expr, Expr]] = {}  # by the identity of the texts
        # a format checked on a subset below each schema subtracted somewhere, by its identity
        self._approximations: dict[int, tuple[str, str, bool] | None] = {}
        check_supported(self.registry, self.options)
        check_spelling(self.registry, self.options)

    # ------------------------------------------------------------------ entry points
    def document(self) -> Expr | MachineSet:
        root_ref = self.registry.at(self.root, ROOT_URI)
        expr = self.value(root_ref, Position(self, (root_ref,)))
        self.machines.build_deferred()
        if self._unrolled:
            self.options.notice(
                f"recursive $ref {', '.join(sorted(self._unrolled))} unrolled to depth "
                f"{self.options.max_depth}; deeper values are not accepted (--max-depth)")
        if self.machines.flat_unrolled:
            self.options.notice(
                f"inside allOf/oneOf/not/if, {', '.join(sorted(self.machines.flat_unrolled))} "
                f"unrolled to depth {self.options.max_depth}; deeper values are not accepted "
                "there (--max-depth)")
        expr = self.machines.without_empty_machines(expr)
        # a recursion of the schema's own cut there may be why no value is left (any value
        # cut below a position is not: each level of it has values of every type)
        recursions = sorted((self._unrolled | self.machines.flat_unrolled) - {ANY_MACHINE})
        if expr == NOTHING and recursions:
            raise GrammarError(
                "the schema accepts no value nested at most "
                f"{self.options.max_depth} levels where its recursion is unrolled "
                f"({', '.join(recursions)}); deeper values may exist (raise --max-depth)")
        if expr == NOTHING:
            raise GrammarError("the schema accepts no value at all")
        if isinstance(expr, Call) and not is_counted(self.machines.bodies[expr.name]):
            expr = self.machines.bodies[expr.name]  # the document is one machine: its body is the
            # root (a counted machine stays called: the root keeps no count)
        used = reachable_machines(called_names(expr), self.machines.bodies)  # products inline some
        bodies = self.machines.bodies
        if used and used <= self.scalars.string_machines and all(
                isinstance(bodies[name], Automaton) and
                bodies[name].dfa.num_states <= _FLAT_STRING_STATES for name in used):
            # small strings alone: one flat automaton costs less than calls
            expr, used = replace_calls(expr, lambda name: bodies[name], used), set()
        machines = tuple((name, body) for name, body in self.machines.bodies.items()
                         if name in used)
        if not machines:
            return expr
        root, options = self._original_root, self.options
        if self.value_machines:  # a retry: where it cannot be linked either, what it retried
            fallback = self.fallback
            return MachineSet(expr, machines, alternative=lambda: fallback)
        later = (lambda: _compiled(root, options, open_recursions=False)) \
            if self.open_recursions and self._opened else None
        linked = MachineSet(expr, machines, alternative=later)
        if self.open_recursions and self.machines.inline_values and \
                recursive_machines(dict(machines)):
            return MachineSet(expr, machines, alternative=lambda: _compiled(
                root, options, value_machines=True, fallback=linked))
        return linked

    def release(self) -> None:
        """Drop the compile's state (the compiler is done with). Its parts refer back to the
        compiler, so it would otherwise stay in memory until a garbage collection, which a
        later mask might pay for: tens of thousands of objects for a large schema."""
        vars(self).clear()

    def difference(self, a: Expr, b: Expr) -> Expr:
        """The values of `a` that are not values of `b`, exact on numbers: `b` need not hold
        every spelling of a value it holds (`1e0`, `1.0` beside `1`), so where both may hold
        a number, both are taken over canonical spellings (`numbers.canonical_spellings`),
        of which each holds all or none of a value's; then the texts of `a` that spell a
        value left without exponent are given back (`respelled`)."""
        if not (self._may_hold_numbers(a) and self._may_hold_numbers(b)):
            return self.ops.difference(a, b)
        return self.respelled(self.ops.difference(self.canonical(a), self.canonical(b)), a)

    def respelled(self, found: Expr, texts: Expr) -> Expr:
        """The texts of `texts` whose numbers, spelled canonically, spell a text of `found`,
        a language of canonical spellings whose machines are canonical copies of those of
        `texts` (`canonical`): `1.0` and `1.00` where `found` holds `1` (`numbers.respelled`);
        a call of a canonical copy becomes a call of its machine, whose texts spell the
        copy's values in every way the machine does. A difference computed once the machines
        it needs are is respelled then."""
        if found == NOTHING:
            return NOTHING
        if isinstance(found, Call) and found.name in self.machines.products:
            name = found.name
            return self.machines.defer(f"{name} (respelled)", {name},
                               lambda: self.respelled(self.machines.bodies[name], texts),
                               self.machines.starting_bytes(found))
        spelled = self.ops.mapped(found, lambda dfa: numbers.respelled(dfa, self.draft))
        return self.ops.intersect(replace_calls(
            spelled, lambda name: Call(name.removesuffix(CANONICAL))), texts)

    def _may_hold_numbers(self, expr: Expr) -> bool:
        """Whether a text of `expr` may hold a number (not where all are strings, booleans
        or null)."""
        first = self.machines.starting_bytes(expr)
        return first is None or bool((first & _NUMBERS_START).any())

    @cached_property
    def _canonical_spellings(self) -> ByteDFA:
        return numbers.canonical_spellings(self.draft)

    def canonical(self, expr: Expr) -> Expr:
        """The texts of `expr` whose numbers are spelled canonically; its calls become calls
        of the machines' canonical copies."""
        hit = self._canonical.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        renamed = replace_calls(expr, self._canonical_machine)
        found = self.ops.restricted(renamed, self._canonical_spellings)
        self._canonical[id(expr)] = (expr, found)
        return found

    def _canonical_machine(self, name: str) -> Call:
        """A call of the machine's copy with numbers spelled canonically (itself where its
        values hold no number, or it is such a copy), built once the machine is."""
        if name.endswith(CANONICAL) or not self._may_hold_numbers(Call(name)):
            return Call(name)
        return self.machines.defer(name + CANONICAL, {name},
                           lambda: self.canonical(self.machines.bodies[name]),
                           self.machines.starting_bytes(Call(name)))

    def value(self, ref: Ref, position: Position, within: Bounds = Bounds()) -> Expr:
        """The JSON texts of the values `ref` accepts at `position`, except that its numbers
        outside `within` may be left out: a range the schema around it puts on the value
        anyway, given to the numbers of its branches so that their products (`multipleOf`
        in an `anyOf`) are taken over that range alone."""
        node = ref.node
        if node is True:
            return self.any_values.at(position)
        if node is False:
            return NOTHING
        ref = self.registry.at(node, ref.base)
        if not isinstance(node, dict):
            raise GrammarError(f"{self.registry.pointer(node)}: a schema must be an object or "
                               f"a boolean, not {json.dumps(node, default=str)[:40]}")
        try:
            return self._object_value(ref, position, within)
        except TooManyStatesError as exc:  # located at the deepest schema that met it
            where = self.registry.pointer(node)
            if str(exc).startswith("#") or not where.startswith("#"):  # located, or unknown
                raise
            raise TooManyStatesError(f"{where}: {exc}") from None

    def _object_value(self, ref: Ref, position: Position, within: Bounds) -> Expr:
        """`value` of a schema that is an object."""
        node = ref.node
        if "allOf" in node and ("$ref" not in node or self.draft > 7):
            merged = self._merged_objects(ref)
            if merged is not None:
                return self.merged_value(Ref(merged[0], ref.base), merged[1], position)
        parts: list[Expr] = []
        schema = self.read(node)
        within = within.meet(self._bounds(node))
        type_only = schema.type_only
        if "$ref" in node:
            target = self.registry.resolve(ref)
            referenced = self._referenced(target, node["$ref"], position,
                                          is_container(target.node), within)
            if referenced is _CUT:
                return _CUT
            if self.draft <= 7:
                return referenced  # draft 7 and earlier: $ref replaces its siblings
            parts.append(referenced)
        self._refuse_subtracted_approximations(ref)
        condition, rest = self.objects.key_condition(ref)
        if condition is not None or (schema.constrains_locally and not type_only):
            with self._testing(condition):
                parts.append(self.local(ref, position, condition, within))
        for branch in rest.get("allOf", []) if isinstance(rest.get("allOf"), list) else []:
            parts.append(self.value(Ref(branch, ref.base), position, within))
        if isinstance(rest.get("anyOf"), list):
            parts.append(self.union([self.value(Ref(b, ref.base), position, within)
                                     for b in rest["anyOf"]], open_calls=False))
        if isinstance(rest.get("oneOf"), list):
            branches = [self.registry.at(b, ref.base) for b in rest["oneOf"]]
            parts.append(self.exactly_one([self.value(b, position, within) for b in branches],
                                          branches))
        if "not" in rest:
            parts.append(self.difference(
                self.any_values.at(position),
                self.value(Ref(rest["not"], ref.base), position, within)))
        if "if" in rest and ("then" in rest or "else" in rest):
            test = self.value(Ref(rest["if"], ref.base), position, within)
            then = self.value(Ref(rest.get("then", True), ref.base), position, within)
            otherwise = self.value(Ref(rest.get("else", True), ref.base), position, within)
            parts.append(alt(self.ops.intersect(test, then),
                             self.difference(otherwise, test)))
        for key, dependency in rest.get("dependentSchemas", {}).items():
            # objects with `key` must also satisfy the schema; others are unaffected
            with_key = self.any_values.object_with_key(key, position)
            parts.append(alt(self.ops.difference(self.any_values.flat(position), with_key),
                             self.ops.intersect(with_key, self.value(
                                 Ref(dependency, ref.base), position, within))))
        if not type_only:
            return self.intersect_all(parts) if parts else self.any_values.at(position)
        if not parts:
            return self.local(ref, position, within=within)
        combined = self.intersect_all(parts)
        typed = self.of_types(combined, schema.types)
        return typed if typed is not None else \
            self.ops.intersect(combined, self.local(ref, position, within=within))

    def _refuse_subtracted_approximations(self, ref: Ref) -> None:
        """Refuse a format checked on a subset of its values (`APPROXIMATED_FORMATS`), or a
        pattern with property escapes (`strings.UNICODE_VERSION`), in a schema subtracted
        where strings may be: under `not`, in `if` (from `else`), in a `oneOf` branch beside
        one that allows strings."""
        node = ref.node
        if "not" in node:
            self.refuse_approximated_format("not", Ref(node["not"], ref.base))
        if "if" in node and ("then" in node or "else" in node):
            self.refuse_approximated_format("if", Ref(node["if"], ref.base))
        # (`oneOf` in `exactly_one`, with the branches' languages; `contains` in `arrays`)

    def refuse_approximated_format(self, keyword: str, ref: Ref,
                                   minuend: Expr | None = None) -> None:
        """Raise if the schema `ref`, which `keyword` subtracts (from `minuend`, else from
        values that may be any string), or one below it holds a format checked on a subset
        of its values, or a pattern with property escapes: its complement would let values
        of the format (characters a later Unicode version gives the category) through. The
        formats' values left out have at least four dots (5 labels), so a `minuend` without
        such strings is safe from a format."""
        key = id(ref.node)
        if key not in self._approximations:
            self._approximations[key] = self._approximation_in(
                self.registry.at(ref.node, ref.base), set())
        found = self._approximations[key]
        if found is None:
            return
        pointer, name, is_format = found
        if not is_format:
            raise UnsupportedError(
                f"{pointer}: pattern {name!r} under {keyword}: grammarc reads \\p{{...}} by "
                f"the categories of Unicode {strings.UNICODE_VERSION}, a subset of a later "
                f"version's, which a {keyword} cannot subtract exactly (a character given the "
                "category since would pass)")
        if minuend is None or self.ops.intersect(minuend, strings.four_dots()) != NOTHING:
            raise UnsupportedError(
                f"{pointer}: format {name!r} under {keyword}: grammarc checks "
                f"{strings.APPROXIMATED_FORMATS[name]}, a subset of the format, which a "
                f"{keyword} cannot subtract exactly (the rest of the format would pass)")

    def _approximation_in(self, ref: Ref, seen: set[int]) -> tuple[str, str, bool] | None:
        """(JSON pointer, the format or pattern, whether a format) of an
        `APPROXIMATED_FORMATS` format or a pattern with property escapes in the schema `ref`
        or below it (through `$ref`s), or None."""
        node = ref.node
        if not isinstance(node, dict) or id(node) in seen:
            return None
        seen.add(id(node))
        name = node.get("format")
        if isinstance(name, str) and name in strings.APPROXIMATED_FORMATS and \
                "string" in self.read(node).types:
            return self.registry.pointer(node), name, True
        pattern = node.get("pattern")
        if isinstance(pattern, str) and strings.uses_unicode_properties(pattern) and \
                "string" in self.read(node).types:
            return self.registry.pointer(node) + "/pattern", pattern, False
        below = [self.registry.resolve(ref)] if isinstance(node.get("$ref"), str) else []
        below += [self.registry.at(child, ref.base) for child in subschemas(node)]
        return next((found for child in below
                     if (found := self._approximation_in(child, seen)) is not None), None)

    def _bounds(self, node: dict) -> Bounds:
        """The range every number a schema accepts lies in by its own keywords and those of
        its `allOf` branches (a branch's own, not through its `$ref` or applicators)."""
        bounds = Bounds.of(node)
        for branch in node.get("allOf", []) if isinstance(node.get("allOf"), list) else []:
            if isinstance(branch, dict) and ("$ref" not in branch or self.draft > 7):
                bounds = bounds.meet(Bounds.of(branch))
        return bounds

    def _referenced(self, target: Ref, reference: str, position: Position,
                    container: bool, within: Bounds = Bounds()) -> Expr:
        """The values of a schema reached through `reference` (a `$ref`): with calls, a call
        of its machine where it recurses or is a `container`; else inline, and nested past
        --max-depth levels no value, in a truncated automaton (see `Ops`), with a notice."""
        depth = self._active.get(id(target.node), 0)
        if self.calls and (depth or container):
            return self.machines.ref_machine(target, position)
        if depth >= self.options.max_depth + 1:
            self._unrolled.add(reference)
            return _CUT
        self._active[id(target.node)] = depth + 1
        try:
            return self.value(target, position, within)
        finally:
            self._active[id(target.node)] = depth

    def merged_value(self, merged: Ref, opened: str | None, position: Position) -> Expr:
        """The values of a schema `_merged_objects` made. One that opened a `$ref` (`opened`)
        may reach itself through its properties, as the `$ref` could: like a `$ref` target
        of an object, it is then a machine, or unrolled to --max-depth without calls."""
        if opened is None or merged.node is False:
            return self.value(merged, position)
        return self._referenced(merged, opened, position, container=True)

    def _merged_objects(self, ref: Ref) -> tuple[dict | bool, str | None] | None:
        """One schema equal to a schema and its `allOf` branches (through `$ref`s and nested
        `allOf`s) when all of them hold only types and object keywords (`properties`,
        `required`, `additionalProperties`, property counts); else None. Each key's value
        must then satisfy the schemas every part gives that key, which a product of the
        parts' automata would find only after making every called machine flat. With the
        schema, the first `$ref` opened (None if none)."""
        owner = id(ref.node)
        if owner in self._object_merges:
            return self._object_merges[owner]
        opened: list[str] = []
        parts = [part.node for part in self.registry.conjuncts(ref, set(), opened)]
        merged = None
        if any(part is False for part in parts):
            merged = (False, None)
        elif all(set(part) & KEYWORDS <= OBJECT_MERGE_KEYWORDS and
                 isinstance(part.get("allOf", []), list) and
                 isinstance(part.get("properties", {}), dict) and
                 isinstance(part.get("required", []), list) for part in parts):
            merged = (self._merge_object_parts(parts, ref), opened[0] if opened else None)
        self._object_merges[owner] = merged
        return merged

    def _merge_object_parts(self, parts: list[dict], ref: Ref) -> dict | bool:
        """One schema for the conjunction of `parts` (see `_merged_objects`)."""
        types = set(TYPES)
        for part in parts:
            if "type" in part:
                types &= self.read(part).types
        if not types:
            return False
        extras = [self.objects.additional(p) for p in parts]
        names = list(dict.fromkeys(name for p in parts for name in p.get("properties", {})))
        pointer = self.registry.pointer(ref.node)

        def conjunction(schemas: list[Any], where: str) -> Any:
            schemas = [s for s in distinct_schemas(schemas) if s is not True]
            if any(s is False for s in schemas):
                return False
            if len(schemas) <= 1:
                return schemas[0] if schemas else True
            key = (ref.base, *(id(s) for s in schemas))
            combined = self._conjunctions.get(key)
            if combined is None:  # one schema per conjunction: merges of merges recur
                combined = self._conjunctions[key] = {"allOf": schemas}
                self.registry.pointer_of[id(combined)] = where
            return combined

        merged: dict[str, Any] = {"type": sorted(types - {"integer"} if "number" in types
                                                  else types)}
        properties = {}
        for name in names:
            properties[name] = conjunction(
                [p["properties"][name] if name in p.get("properties", {}) else extra
                 for p, extra in zip(parts, extras)], f"{pointer}/properties/{escape_token(name)}")
        merged["properties"] = properties
        merged["additionalProperties"] = conjunction(extras, f"{pointer}/additionalProperties")
        merged["required"] = list(dict.fromkeys(n for p in parts for n in p.get("required", [])))
        counts = [count_keyword(p, "minProperties") for p in parts]
        if any(c is not None for c in counts):
            merged["minProperties"] = max(c for c in counts if c is not None)
        counts = [count_keyword(p, "maxProperties") for p in parts]
        if any(c is not None for c in counts):
            merged["maxProperties"] = min(c for c in counts if c is not None)
        self.registry.pointer_of[id(merged)] = pointer
        return merged

    def of_types(self, expr: Expr, types: set[str]) -> Expr | None:
        """The values of `expr` of one of `types`, told apart by their first byte: without a
        product where the tree separates them (a call of a machine that has other values too
        calls a narrower machine), else by one with the texts that start so; None where the
        first byte cannot tell them (integers among other numbers)."""
        if "integer" in types and "number" not in types:
            return None
        allowed = first_bytes(types)
        narrowed = self.starting_with(expr, allowed, bytes_label(allowed))
        if narrowed is not None:
            return narrowed
        first = charset((int(b), int(b)) for b in np.flatnonzero(allowed))  # ASCII bytes
        return self.ops.intersect(expr, concat(first, repeat(_ANY_CHARACTER, 0, None)))

    def starting_with(self, expr: Expr, allowed: np.ndarray, label: str) -> Expr | None:
        """The texts of `expr` that start with an `allowed` byte, without a product (a call
        of a machine that has other texts too calls a narrower machine, named with `label`);
        None where the tree does not tell them apart."""
        def narrower(name: str) -> Expr | None:
            if name in self.machines.building:
                return None
            body = with_first_bytes(self.machines.bodies[name], allowed, self.machines.body_of,
                                    narrower, self.machines.first_of)
            if body is None:
                return None
            return self.machines.machine(f"{name} [{label}]", lambda: body)

        try:
            return with_first_bytes(expr, allowed, self.machines.body_of, narrower,
                                    self.machines.first_of)
        finally:
            del narrower  # a recursive closure is a cycle: free it now

    def intersect_all(self, parts: list[Expr]) -> Expr:
        """The texts of every part. Each part is first narrowed, without a product, to the
        texts that start with a byte every part can start with, so that a machine whose other
        texts no other part has (an object beside a number) is not made flat for nothing."""
        if any(p == NOTHING for p in parts):
            return NOTHING
        if len(parts) > 1:
            firsts = [self.machines.starting_bytes(p) for p in parts]
            if all(f is not None for f in firsts):
                common = np.logical_and.reduce(firsts)
                if not common.any():
                    return NOTHING
                label = bytes_label(common)
                narrowed = [self.starting_with(p, common, label) for p in parts]
                parts = [p if n is None else n for p, n in zip(parts, narrowed)]
                if any(p == NOTHING for p in parts):
                    return NOTHING
        result = parts[0]
        for part in parts[1:]:
            result = self.ops.intersect(result, part)
        return result

    def exactly_one(self, branches: list[Expr], schemas: list[Ref] | None = None) -> Expr:
        """The texts of exactly one branch: each branch minus the others it may share a text
        with. Two branches share none when they cannot start with the same byte, or (given
        their `schemas`) when both describe objects only and one requires a key the other
        forbids, or both require a key with different values (a discriminator); branches that
        share none with any other stay whole, calls kept."""
        starts = [self.machines.starting_bytes(b) for b in branches]
        objects = [self.objects.object_keys(s) for s in schemas] if schemas is not None else \
            [None] * len(branches)
        overlap = [[False] * len(branches) for _ in branches]
        for i, j in combinations(range(len(branches)), 2):
            overlap[i][j] = overlap[j][i] = not (
                starts[i] is not None and starts[j] is not None and
                not (starts[i] & starts[j]).any() or
                self.objects.disjoint_objects(objects[i], objects[j]))
        options = []
        for i, branch in enumerate(branches):
            for j in range(len(branches)) if schemas is not None else ():
                if overlap[i][j]:
                    self.refuse_approximated_format("oneOf", schemas[j], branch)
            others = [other for j, other in enumerate(branches) if overlap[i][j]]
            try:
                options.append(self.difference(branch, alt(*others)) if others else branch)
            except TooManyStatesError as exc:
                raise TooManyStatesError(
                    f"{exc}; it is a oneOf branch without the values of the others it may "
                    "share one with: branches that require a key with different const values, "
                    "or one of which forbids a key another requires, share none") from None
        return self.union(options)

    def union(self, options: list[Expr], open_calls: bool = True) -> Expr:
        """The texts of any option. An option that is a call of a built machine and may
        start with a byte another option may start with is the machine's body instead (its
        own calls kept; a counted machine stays a call): two calls the next byte cannot tell
        apart would leave the caller's machine undecided, and their machines inlined where
        called (without `open_calls`, that is left to the linker, which can for machines
        that do not recurse). Where such a machine is still being built (a recursion through
        the union), the options that share a first byte are a machine of their own, built
        (opened) once it is."""
        starts = [self.machines.starting_bytes(o) for o in options]

        def shares_a_first_byte(i: int) -> bool:
            return any(j != i and (starts[i] is None or starts[j] is None or
                                   (starts[i] & starts[j]).any()) for j in range(len(options)))

        if self.open_recursions and any(
                isinstance(o, Call) and o.name in self.machines.building and shares_a_first_byte(i)
                for i, o in enumerate(options)):
            self._opened = True
            shared = [i for i in range(len(options)) if shares_a_first_byte(i)]
            return alt(self._deferred_union([options[i] for i in shared],
                                            [starts[i] for i in shared]),
                       *(o for i, o in enumerate(options) if i not in shared))
        opened = []
        for i, option in enumerate(options):
            while isinstance(option, Call) and shares_a_first_byte(i) and \
                    (open_calls or self._recursive(option.name)):
                body = self.machines.body_of(option.name)
                if body is None or is_counted(body):
                    break
                option = body
            opened.append(option)
        return alt(*opened)

    def _recursive(self, name: str) -> bool:
        """Whether a built machine reaches itself or a machine being built through calls
        (and `open_recursions` opens it)."""
        if not self.open_recursions:
            return False
        reached = reachable_machines(called_names(self.machines.bodies[name]), self.machines.bodies)
        recursive = name in reached or bool(reached & self.machines.building)
        self._opened |= recursive
        return recursive

    def _deferred_union(self, options: list[Expr], starts: list[np.ndarray | None]) -> Call:
        """A call of a machine of the texts of any option, its body (`union`) built once the
        machines the options call are."""
        key = tuple(o.name if isinstance(o, Call) else id(o) for o in options)
        found = self._union_names.get(key)
        if found is None:
            labels = [o.name if isinstance(o, Call) else "…" for o in options]
            found = self._union_names[key] = (
                f"anyOf of {' | '.join(labels)} ({len(self._union_names) + 1})", options)
        first = None if any(f is None for f in starts) else np.logical_or.reduce(starts)
        needs = set().union(*(called_names(o) for o in options))
        return self.machines.defer(found[0], needs, lambda: self.union(options), first)

    def local(self, ref: Ref, position: Position, condition: KeyCondition | None = None,
              within: Bounds = Bounds()) -> Expr:
        """The language of the schema's own (non-applicator) keywords, and of the `condition`
        its applicators put on an object's keys (its numbers outside `within` may be left
        out, as in `value`)."""
        node = ref.node
        schema = self.read(node)
        types = schema.types
        if condition is not None and not condition.holds_for_others():
            types &= {"object"}
        if schema.enumerates:
            literals = self.scalars.enumerated(node, types, position)
            # an integer has no fraction (draft 4, and by default later ones: the typed
            # language decides), while the value 10 equals 10.0
            integral_spelling = "number" not in types and "integer" in types and \
                (self.draft == 4 or not self.options.integer_fractions)
            if not schema.type_specific and not integral_spelling and condition is None:
                return literals
            return self.ops.intersect(literals,
                                      self._typed(ref, position, types, condition, within))
        return self._typed(ref, position, types, condition, within)

    def read(self, node: dict) -> SchemaNode:
        """The schema object `node` as dispatch reads it (read once)."""
        found = self._nodes.get(id(node))
        if found is None:  # held here, so no other object takes its identity
            found = self._nodes[id(node)] = SchemaNode.read(node, self.registry.pointer(node))
        return found

    def _typed(self, ref: Ref, position: Position, types: frozenset[str],
               condition: KeyCondition | None = None, within: Bounds = Bounds()) -> Expr:
        options = self.scalars.of_types(ref.node, types, within)
        if "array" in types:
            options.append(self._container(self.arrays.array(ref, position)))
        if "object" in types:
            options.append(self._container(self.objects.object(ref, position, condition)))
        return alt(*options)

    def _container(self, texts: Expr) -> Expr:
        """An array's or object's texts. Without calls, a recursion cut inside its values
        (`_CUT`, exact to no depth from its own start) leaves it exact one level deeper than
        the values it holds are: it is then that truncated automaton, so that a difference
        from it keeps the minuend's values as deep as that (`Ops`), not none."""
        depth = None if self.calls else exact_to(texts)
        if depth is None:
            return texts
        built = self.ops.automaton(texts)
        return Automaton(_CUT.dfa if built == NOTHING else built.dfa, depth + 1)

    def key_matches(self, pattern: str, name: str, node: dict) -> bool:
        """Whether the ECMA-262 `pattern` matches the key `name` (for positions)."""
        return self.objects.key_matches(pattern, name, node)

    def in_progress(self, node: Any) -> bool:
        """Whether the values of `node`, a `$ref` target, are being compiled: inline (see
        `_referenced`), as a machine being built, or as a condition on keys whose tests are."""
        return self._active.get(id(node), 0) > 0 or self._tested.get(id(node), 0) > 0 or any(
            self.machines.ref_targets.get(name) == id(node) for name in self.machines.building)

    @contextmanager
    def _testing(self, condition: KeyCondition | None) -> Iterator[None]:
        """While an object is compiled with `condition`, the `$ref` targets it read through
        are in progress (`in_progress`)."""
        targets = condition.targets if condition is not None else set()
        for target in targets:
            self._tested[target] = self._tested.get(target, 0) + 1
        try:
            yield
        finally:
            for target in targets:
                self._tested[target] -= 1


def compile_schema(root: Any, options: FrontendOptions) -> Expr | MachineSet:
    """The language of the JSON texts of the instances `root` accepts: machines linked by
    calls where values are left open, unless a boolean operation needs them flat."""
    return _compiled(root, options)


def _compiled(root: Any, options: FrontendOptions, open_recursions: bool = True,
              value_machines: bool = False, fallback: MachineSet | None = None
              ) -> Expr | MachineSet:
    """`_compiled_once`; in any key order, where the objects of a position would tell too
    much apart (`TooManyKeyOrders`), again with that position in the schema's order (with a
    notice), up to `_KEY_ORDER_RETRIES` positions; past them, a `TooManyStatesError` (and
    `compiler.build_automaton` takes the schema's order everywhere). The document is built
    anew each time: a compile the error cut short is never used."""
    for _ in range(_KEY_ORDER_RETRIES):
        try:
            return _compiled_once(root, options, open_recursions, value_machines, fallback)
        except TooManyKeyOrders as exc:
            if exc.pointer in options.schema_order_at:
                # not expected: objects in the schema's order tell no sets of keys apart
                raise TooManyStatesError(str(exc)) from None
            options.notice(f"{exc}; they follow the schema's order there (as with "
                           "--key-order schema); make the object smaller (nest groups of "
                           "properties) or raise --max-states")
            options = replace(options, schema_order_at=options.schema_order_at | {exc.pointer})
    try:
        return _compiled_once(root, options, open_recursions, value_machines, fallback)
    except TooManyKeyOrders as exc:
        raise TooManyStatesError(f"{exc}, as were those of {_KEY_ORDER_RETRIES} positions "
                                 "before it") from None


def _compiled_once(root: Any, options: FrontendOptions, open_recursions: bool,
                   value_machines: bool, fallback: MachineSet | None) -> Expr | MachineSet:
    try:
        return _document(Compiler(root, options, True, open_recursions, value_machines,
                                  fallback))
    except UnresolvedCallError as failure:
        return fallback_language(failure, lambda: _document(Compiler(root, options)))


def _document(compiler: Compiler) -> Expr | MachineSet:
    """The compiler's document; then its state is dropped (`Compiler.release`)."""
    try:
        return compiler.document()
    finally:
        compiler.release()


__all__ = ["Compiler", "compile_schema"]
