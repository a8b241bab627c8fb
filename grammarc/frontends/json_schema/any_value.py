"""Any JSON value: where no schema constrains a value (`true`, `{}`, additional properties,
items without a schema), the texts of any value at a position, keys in its ranking (a machine
called at run time, so exact at any depth, or nested at most `--max-depth` levels where a
boolean operation needs it flat); and texts nested at most so many levels, the bound within
which truncated languages are exact."""

from __future__ import annotations

from functools import cached_property
from typing import Callable

from ...automaton import NOTHING, Automaton, Expr, alt, charset, concat, literal, repeat
from ...automaton.expr import Call
from ...charsets import MAX_CODE_POINT, complement_ranges
from . import numbers, strings
from .objects import Objects
from .part import CompilerPart, Document
from .positions import Position

ANY_MACHINE = "any"  # the machine of any JSON value (where no schema applies)


class AnyValues(CompilerPart):
    """The texts of any JSON value at a position: called machines or flat automata."""

    def __init__(self, compiler: Document, objects: Objects) -> None:
        super().__init__(compiler)
        self.objects = objects
        self._cache: dict[tuple, Expr] = {}  # flat, by position (or "bare") and budget
        self._names: dict[frozenset[int], str] = {}  # machines at positions, by schemas
        self.positions: dict[str, Position] = {}   # the position of each such machine

    def at(self, position: Position) -> Expr:
        """Any JSON value at this position. With calls, a call of the machine of any value at
        positions with the same schemas (keys in their ranking, and so on at every level
        below, so exact at any depth; where no schema applies, the one bare "any value"
        machine); without, the flat language of `flat`."""
        if not self.calls:
            return self.flat(position)
        if position.is_open:
            self.positions.setdefault(ANY_MACHINE, position)
            return self.machines.machine(ANY_MACHINE, lambda: self._any_of(
                position, lambda inner: Call(ANY_MACHINE)))
        key = frozenset(id(ref.node) for ref in position.closure)
        name = self._names.get(key)
        if name is None:
            pointer = self.registry.pointer(position.closure[0].node)
            name = self._names[key] = f"any value at {pointer} ({len(self._names) + 1})"
            self.positions[name] = position
        return self.machines.machine(name, lambda: self._any_of(position, self.at))

    def flat(self, position: Position, budget: int | None = None) -> Expr:
        """Any JSON value at this position, containers nested at most `budget` levels."""
        budget = self.options.max_depth if budget is None else budget
        # where no schema applies, every position has the same "any value": share it
        key = ("bare", budget) if position.is_open else (id(position), budget)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if budget <= 0:
            layout = self.layout
            language = alt(self._scalars, concat(layout.open_array, layout.close_array),
                           concat(layout.open_object, layout.close_object))
        else:
            language = self._any_of(position, lambda inner: self.flat(inner, budget - 1))
        # as a minimal DFA, so the next level up embeds it once per use, not a whole tree;
        # exact for values nested `budget` + 1 levels (see `Ops`)
        dfa = self.ops.dfa(language)
        result = self._cache[key] = NOTHING if dfa is None else Automaton(dfa, budget + 1)
        return result

    def _any_of(self, position: Position, inner: Callable[[Position], Expr]) -> Expr:
        """Any JSON value at this position, the elements and member values below it any
        values by `inner(their position)`; object keys in the position's ranking."""
        layout = self.layout
        item = inner(position.items)
        array = concat(layout.open_array,
                       repeat(concat(item, repeat(concat(layout.comma, item), 0, None)), 0, 1),
                       layout.close_array)
        members = [(k, inner(position.child(k)), False) for k in position.ranking]
        objects = self.objects
        return alt(self._scalars, array, objects.object_language(
            position, members, objects.unranked_key(position), inner(position.additional),
            (0, None)))

    def object_with_key(self, key: str, position: Position) -> Expr:
        """Objects at this position (any values) that contain `key`."""
        budget = self.options.max_depth - 1
        objects = self.objects
        slots = [(k, self.flat(position.child(k), budget), k == key)
                 for k in position.ranking]
        return objects.object_language(position, slots, objects.unranked_key(position),
                                       self.flat(position.additional, budget), (0, None))

    @cached_property
    def _scalars(self) -> Expr:
        return alt(literal("null"), literal("true"), literal("false"), numbers.any_number(),
                   strings.any_string())


def nested_at_most(levels: int) -> Expr:
    """JSON texts whose arrays and objects nest at most `levels` deep (brackets inside strings
    do not count; no text for a negative `levels`): the bound within which truncated
    languages are exact."""
    if levels < 0:
        return NOTHING
    quote, backslash, brackets = ord('"'), ord("\\"), [ord(c) for c in "[]{}"]
    string = concat(literal('"'), repeat(alt(
        charset(complement_ranges([(quote, quote), (backslash, backslash)])),
        concat(literal("\\"), charset([(0, MAX_CODE_POINT)]))), 0, None), literal('"'))
    other = charset(complement_ranges(sorted((b, b) for b in [quote, *brackets])))
    flat = alt(other, string)
    nested = repeat(flat, 0, None)
    for _ in range(levels):
        nested = repeat(alt(flat, concat(charset([(ord("["), ord("[")), (ord("{"), ord("{"))]),
                                         nested,
                                         charset([(ord("]"), ord("]")), (ord("}"), ord("}"))]))),
                        0, None)
    return nested
