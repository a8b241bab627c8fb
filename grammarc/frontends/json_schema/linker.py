"""The linker role: the machines of a document, named, built once each (or once the machines
they need are: a recursion through a boolean operation), called where values are left open
or recurse, and made flat where a boolean operation needs them so (`Ops` sees this registry
as its `Linker`)."""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from ...automaton import NOTHING, Automaton, Expr
from ...automaton.expr import Alt, Call
from ...automaton.callgraph import (
    called_names, reachable_machines, recursive_machines, replace_calls, starting_bytes,
)
from ...automaton.linking import flat_language
from ...automaton.signals import UnresolvedCallError
from .any_value import ANY_MACHINE, AnyValues, nested_at_most
from .node import first_bytes
from .part import Document
from .positions import Position
from .resolution import Ref

CANONICAL = " (canonical numbers)"  # a machine's copy with numbers spelled canonically
_MAX_COPIED_VALUE = 8  # states of a value copied where it would be a machine but is small


class LinkedDocument(Document, Protocol):
    """What the linker reads of the document: what a room does, and its any values (their
    machines are made flat from their positions)."""

    any_values: AnyValues


class Machines:
    """The machines of one document by name (`$ref` targets, array items, any value, products
    that keep calls), and the bytes their values start with where known before their bodies."""

    def __init__(self, compiler: LinkedDocument) -> None:
        self.compiler = compiler
        self.bodies: dict[str, Expr] = {}  # $ref targets, array items, any value; by name
        self.building: set[str] = set()      # machines whose body is not complete yet
        # machines built once the machines they need are: (those names, the builder)
        self.deferred: dict[str, tuple[set[str], Callable[[], Expr]]] = {}
        # bytes a machine's values may start with, known before its body (from types)
        self._first_hints: dict[str, np.ndarray] = {}
        self._meet_parts: dict[str, frozenset[str]] = {}  # the machines each meet meets
        self._product_names: dict[tuple, tuple[str, Expr, Expr]] = {}  # and the operands
        self.products: set[str] = set()  # the names of the machines `later` made
        self._flat: dict[str, Expr] = {}      # machines inlined into boolean operations
        self.flat_unrolled: set[str] = set()
        self._nested: dict[int, Expr] = {}  # nested_at_most, by levels
        self._ref_names: dict[tuple, str] = {}
        self.ref_targets: dict[str, int] = {}  # the id of each $ref machine's target schema
        self._value_names: dict[Expr, str] = {}  # machines of values (`value_machine`)
        # whether a property's value or an array's item is read inline (not a call)
        self.inline_values = False
        # the machines whose body failed to build, and how: asked for again, they fail again
        # (their body is unknown, never the empty language)
        self._failures: dict[str, BaseException] = {}

    @property
    def failed_builds(self) -> int:
        return len(self._failures)

    def value_machine(self, where: str, language: Expr, copy_small: bool = True) -> Expr:
        """A call of a machine of the values `language` (one per language, named after
        `where`), or the language itself where it is a call. With `copy_small`, also where
        it may start with a call, or is small enough to copy (a few states: a call there
        would keep the next byte from choosing between the branches of a union that read
        the value inline)."""
        options = language.options if isinstance(language, Alt) else (language,)
        if language == NOTHING or isinstance(language, Call):
            return language
        if copy_small and (any(isinstance(option, Call) for option in options) or (
                not called_names(language) and
                self.compiler.ops.dfa(language).num_states <= _MAX_COPIED_VALUE)):
            return language
        name = self._value_names.get(language)
        if name is None:
            name = self._value_names[language] = f"{where} (value {len(self._value_names) + 1})"
        return self.machine(name, lambda: language)

    def read_value(self, language: Expr, node: dict, path: str) -> Expr:
        """A property's value or an array's item `language` as its object or array reads
        it: inline (noted in `inline_values` unless a call), or with `value_machines` (the
        document compiled again: `Compiler`), a call of its machine (named after the schema
        `node` and the `path` below it)."""
        if not self.compiler.calls:
            return language
        if self.compiler.value_machines:
            return self.value_machine(f"{self.compiler.registry.pointer(node)}/{path}",
                                      language, copy_small=False)
        if language != NOTHING and not isinstance(language, Call):
            self.inline_values = True
        return language

    def without_empty_machines(self, expr: Expr) -> Expr:
        """`expr` and the machines' bodies with no call of a machine that has no text (the
        object of an allOf whose branches exclude each other's keys, a machine all of whose
        texts call such a machine), and without those machines."""
        while True:
            empty = {name for name, body in self.bodies.items() if body == NOTHING}
            if not empty:
                return expr

            def without(name: str) -> Expr:
                return NOTHING if name in empty else Call(name)

            self.bodies = {name: replace_calls(body, without)
                           for name, body in self.bodies.items() if name not in empty}
            expr = replace_calls(expr, without)

    def machine(self, name: str, build) -> Call:
        """A call of the machine `name`, its body built by `build()` the first time (a call
        of it from inside its own body is recursion); where that build failed, its error."""
        if name in self._failures:
            raise self._failures[name]
        if name not in self.bodies:
            self.bodies[name] = NOTHING
            self.building.add(name)
            try:
                self.bodies[name] = build()
            except BaseException as exc:
                self._failures[name] = exc
                raise
            finally:
                self.building.discard(name)
            self.build_deferred()
        return Call(name)

    def defer(self, name: str, needs: set[str], build: Callable[[], Expr],
              first: np.ndarray | None) -> Call:
        """A call of the machine `name`, its body built by `build()` once none of the
        machines `needs` is being built (it is being built till then); `first`: a superset
        of the bytes its values start with, if known. Where its build failed, its error."""
        if name in self._failures:
            raise self._failures[name]
        if name not in self.bodies:
            self.bodies[name] = NOTHING
            self.building.add(name)
            self.deferred[name] = (needs, build)
            if first is not None:
                self._first_hints[name] = first
            self.build_deferred()
        return Call(name)

    def build_deferred(self) -> None:
        """Build the deferred machines whose machines are built (at once where they are)."""
        progress = True
        while progress:
            progress = False
            for name, (needs, build) in list(self.deferred.items()):
                if name in self.deferred and not needs & self.building:
                    del self.deferred[name]
                    try:
                        self.bodies[name] = build()
                    except BaseException as exc:
                        self._failures[name] = exc
                        raise
                    finally:
                        self.building.discard(name)
                    progress = True

    def body_of(self, name: str) -> Expr | None:
        """The body of a machine, None while it is being built."""
        return None if name in self.building else self.bodies[name]

    def first_of(self, name: str) -> np.ndarray | None:
        """A superset of the bytes the values of a machine start with, known before its
        body (from its schema's types, or those of the operands of a deferred machine)."""
        return self._first_hints.get(name)

    def starting_bytes(self, expr: Expr) -> np.ndarray | None:
        """`starting_bytes` of `expr`: a superset where it calls a machine being built."""
        return starting_bytes(expr, self.body_of, first_of=self.first_of)

    def later(self, a: Expr, b: Expr, difference: bool) -> Call | None:
        """A call of a machine of `a - b` (`difference`) or `a & b`, computed once the
        machines being built that the operands reach are (a recursion through the product:
        its operands cannot be inlined nor made flat before); None where they reach none, or
        this product is the one being computed."""
        key = (id(a), id(b), difference)
        found = self._product_names.get(key)
        if found is not None:
            return Call(found[0]) if found[0] in self.deferred or \
                found[0] not in self.building else None
        waiting = reachable_machines(called_names(a) | called_names(b), self.bodies) & \
            self.building
        if not waiting:
            return None
        name = f"{'difference' if difference else 'intersection'} ({len(self._product_names) + 1})"
        self._product_names[key] = (name, a, b)
        self.products.add(name)
        ops = self.compiler.ops
        return self.defer(name, waiting, lambda: ops.difference(a, b) if difference
                          else ops.intersect(a, b),
                          self._common_first([a] if difference else [a, b]))

    def meet(self, a: str, b: str) -> Call:
        """A call of the machine of the values both machines accept (a product that keeps
        calls, `Ops`), built once both machines are. Such a machine is named by the machines
        it meets, each once (so meets of meets end: a machine met with one of its parts is
        itself)."""
        parts = self._meet_parts.get(a, frozenset([a])) | self._meet_parts.get(b, frozenset([b]))
        for given in (a, b):
            if parts == self._meet_parts.get(given, frozenset([given])):
                return Call(given)
        name = " & ".join(sorted(parts))
        self._meet_parts[name] = parts
        return self.defer(name, {a, b}, lambda: self.compiler.ops.intersect(
            self.bodies[a], self.bodies[b]), self._common_first([Call(a), Call(b)]))

    def _common_first(self, operands: list[Expr]) -> np.ndarray | None:
        """A superset of the bytes the texts all `operands` share start with: the bytes
        common to those whose first bytes are known (None: none is)."""
        starts = [f for f in map(self.starting_bytes, operands) if f is not None]
        return np.logical_and.reduce(starts) if starts else None

    def flat_calls(self, expr: Expr) -> Expr:
        """`expr` with each call replaced by its machine's flat language, for a boolean
        operation: exact for machines that do not recurse, a recursive one unrolled
        --max-depth times (with a notice)."""
        return replace_calls(expr, self._flat_machine)

    def _flat_machine(self, name: str) -> Expr:
        found = self._flat.get(name)
        if found is not None:
            return found
        position = self.compiler.any_values.positions.get(name.removesuffix(CANONICAL))
        if position is not None:  # any value: --max-depth levels below its position
            self.flat_unrolled.add(ANY_MACHINE)
            found = self.compiler.any_values.flat(position)
            found = self._flat[name] = self.compiler.canonical(found) \
                if name.endswith(CANONICAL) else found
            return found
        bodies = self.bodies
        reached = reachable_machines({name}, bodies)
        if reached & self.building:
            raise UnresolvedCallError(f"machine {name!r} is used by a boolean operation "
                                      "inside its own definition")
        recursive = recursive_machines({n: bodies[n] for n in reached})
        if name in recursive:
            self.flat_unrolled.add(name)
            self._flat.update(self._nested_within_bound(recursive))
        else:
            self._flat[name] = flat_language(replace_calls(bodies[name], self._flat_machine),
                                             self.compiler.options.max_states)
        return self._flat[name]

    def nested_at_most(self, levels: int) -> Expr:
        found = self._nested.get(levels)
        if found is None:
            found = self._nested[levels] = nested_at_most(levels)
        return found

    def _nested_within_bound(self, names: set[str]) -> dict[str, Expr]:
        """The values of the recursive machines `names` nested at most --max-depth levels,
        exactly (each a truncated automaton): the least fixpoint of "a machine's body, its
        calls of `names` replaced by the previous round's languages, cut to the bound". Each
        round adds the values one call deeper; as the bound limits the nesting of values and
        no machine calls itself before reading a byte, the rounds stop."""
        depth = self.compiler.options.max_depth
        bound = self.nested_at_most(depth)
        levels: dict[str, Expr] = {name: NOTHING for name in names}

        def callee(name: str) -> Expr:
            return levels[name] if name in levels else self._flat_machine(name)

        # a value within the bound is found in at most (levels + 1) x (chains of calls that
        # read no bracket in between, at most one per machine) rounds
        for _ in range((depth + 1) * len(names) + 1):
            nxt = {}
            for name in names:
                cut = self.compiler.ops.intersect(replace_calls(self.bodies[name], callee), bound)
                nxt[name] = NOTHING if cut == NOTHING else \
                    Automaton(cut.dfa, min(depth, cut.exact_to or depth))
            if all(_same_language(nxt[name], levels[name]) for name in names):
                return nxt
            levels = nxt
        raise RuntimeError("internal error: nested values within the depth bound do not settle")

    def ref_machine(self, target: Ref, position: Position) -> Expr:
        """A call of the machine of a `$ref` target (or a merged allOf that opened one) at
        this kind of position (the schemas that apply there decide its language), compiled
        the first time it is met."""
        registry = self.compiler.registry
        key = (id(target.node), frozenset(id(r.node) for r in position.closure))
        name = self._ref_names.get(key)
        if name is None:
            name = f"{registry.pointer(target.node)} ({len(self._ref_names) + 1})"
            self._ref_names[key] = name
            self.ref_targets[name] = id(target.node)
            self._first_hints[name] = first_bytes(registry.value_types(target))
        return self.machine(name, lambda: self.compiler.value(target, position))


def _same_language(a: Expr, b: Expr) -> bool:
    """Whether two minimal automata (or NOTHING) are the same language (canonical DFAs)."""
    if a == NOTHING or b == NOTHING:
        return a == b
    x, y = a.dfa, b.dfa
    return x.trans.shape == y.trans.shape and np.array_equal(x.byte_class, y.byte_class) and \
        np.array_equal(x.trans, y.trans) and np.array_equal(x.accepting, y.accepting)
