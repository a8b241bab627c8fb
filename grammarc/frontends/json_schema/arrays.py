"""Arrays: positional and repeated items, item counts, `contains` counts, and `uniqueItems`
over small explicit sets of values."""

from __future__ import annotations

from math import comb
from typing import Any

from ...automaton import EMPTY, NOTHING, Automaton, Expr, alt, concat, repeat
from ...errors import GrammarError, UnsupportedError
from .conditions import value_key
from .node import count_keyword
from .part import CompilerPart, Document
from .positions import Position
from .resolution import Ref
from .scalars import Scalars

_MAX_INLINE_REPEAT = 16    # more counted array items than this: the item is a machine
# an item built as an automaton (a product: a pattern with a length, ...) is a machine too where
# the copies of it a bounded repeat would hold pass this many states
_MAX_INLINE_COPIES = 50_000
_MAX_UNIQUE_SETS = 1 << 12  # sets of values an array with uniqueItems may have used


class Arrays(CompilerPart):
    """The texts of the arrays a schema allows."""

    def __init__(self, compiler: Document, scalars: Scalars) -> None:
        super().__init__(compiler)
        self.scalars = scalars
        self._item_names: dict[tuple, str] = {}

    def _item_machine(self, items: Expr, node: dict, position: Position) -> Expr:
        """A call of a machine of the items of an array with many of them, so that each
        counted repetition costs a call, not a copy of the item's automaton."""
        key = (id(node), id(position))
        name = self._item_names.get(key)
        if name is None:
            name = f"{self.registry.pointer(node)}/items ({len(self._item_names) + 1})"
            self._item_names[key] = name
        return self.machines.machine(name, lambda: items)

    def array(self, ref: Ref, position: Position) -> Expr:
        node = ref.node
        if isinstance(node.get("items"), list):  # draft 2019-09 and earlier: a tuple
            prefix, rest = node["items"], node.get("additionalItems", True)
        elif self.draft >= 2020:
            prefix = node.get("prefixItems", [])
            rest = node.get("items", True)
        else:
            prefix, rest = [], node.get("items", True)
        if not isinstance(prefix, list):
            raise GrammarError(f"{self.registry.pointer(node)}: prefixItems must be an array")
        item_pos = position.items
        elements = [self.value(Ref(s, ref.base), item_pos) for s in prefix]
        rest_language = self.value(Ref(rest, ref.base), item_pos)
        min_items = count_keyword(node, "minItems") or 0
        max_items = count_keyword(node, "maxItems")
        contains = None
        if "contains" in node and self.draft >= 6:
            contains = self.value(Ref(node["contains"], ref.base), item_pos)
            if self.draft >= 2019 and count_keyword(node, "maxContains") is not None:
                # (without maxContains, a match the format's subset does not count can
                # only make an array fall short of its minimum: refused, never accepted)
                self.compiler.refuse_approximated_format(
                    "contains", Ref(node["contains"], ref.base), alt(*elements, rest_language))
        # the most items the array can hold: uniqueItems says nothing of arrays of at most one
        longest = max_items if rest_language != NOTHING else \
            len(prefix) if max_items is None else min(max_items, len(prefix))
        if node.get("uniqueItems") is True and (longest is None or longest > 1):
            return self._unique_array(ref, item_pos, prefix, rest, min_items, max_items,
                                      contains)
        tuple_keyword = "items" if isinstance(node.get("items"), list) else "prefixItems"
        elements = [self.machines.read_value(element, node, f"{tuple_keyword}/{i}")
                    for i, element in enumerate(elements)]
        rest_language = self.machines.read_value(rest_language, node, "items")
        if (self.calls and contains is None and max_items is not None
                and rest_language != NOTHING and (max_items > _MAX_INLINE_REPEAT or
                                                  _copied_states(rest_language, max_items)
                                                  > _MAX_INLINE_COPIES)):
            rest_language = self._item_machine(rest_language, node, item_pos)
        return self._array_language(elements, rest_language, min_items, max_items, contains,
                                    node)

    def _array_language(self, elements: list[Expr], rest: Expr, min_items: int,
                        max_items: int | None, contains: Expr | None, node: dict) -> Expr:
        """`[...]`: positional elements, then `rest` elements; item counts; `contains` counts
        (a walk over (index, matches so far), closed by a loop once neither matters)."""
        comma = self.layout.comma
        if contains is not None:
            min_contains = count_keyword(node, "minContains") if self.draft >= 2019 else None
            min_contains = 1 if min_contains is None else min_contains
            max_contains = count_keyword(node, "maxContains") if self.draft >= 2019 else None
        else:
            min_contains, max_contains = 0, None
        cap = max(min_contains, max_contains or 0) + 1  # match counts saturate here

        def split(language: Expr) -> list[tuple[Expr, int]]:
            """(part of the element language, what it adds to the contains count)."""
            if contains is None:
                return [(language, 0)]
            return [(self.ops.intersect(language, contains), 1),
                    (self.compiler.difference(language, contains), 0)]

        parts_at = [split(e) for e in elements]
        rest_parts = split(rest)
        # from index `stable` on, only `rest` elements remain and no count depends on the index
        stable = max(len(elements), min_items, 1) if max_items is None else max_items
        memo: dict[tuple[int, int], Expr] = {}

        def tail(i: int, found: int) -> Expr:
            """The elements from index i on (i > 0: each after a comma), `found` matches."""
            key = (i, found)
            if key in memo:
                return memo[key]
            if contains is None and i >= len(elements):  # only counts left: a repeat
                result = self.layout.sequence(rest, i, min_items, max_items)
            elif i == stable and max_items is None:
                result = self._loop(rest_parts, found, min_contains, max_contains)
            else:
                options = [EMPTY] if i >= min_items and found >= min_contains else []
                if max_items is None or i < max_items:
                    for part, adds in (parts_at[i] if i < len(elements) else rest_parts):
                        counted = min(found + adds, cap)
                        if part != NOTHING and (max_contains is None or counted <= max_contains):
                            options.append(concat(comma if i else EMPTY, part,
                                                  tail(i + 1, counted)))
                result = alt(*options)
            memo[key] = result
            return result

        try:
            body = tail(0, 0)
        finally:
            del tail  # a recursive closure is a cycle: free it now
        if body == NOTHING:
            return NOTHING
        return concat(self.layout.open_array, body, self.layout.close_array)

    def _loop(self, rest_parts: list[tuple[Expr, int]], found: int, min_contains: int,
              max_contains: int | None) -> Expr:
        """Any number of `, element`, bringing the match count from `found` into range."""
        comma = self.layout.comma
        other = alt(*(p for p, adds in rest_parts if not adds))
        match = alt(*(p for p, adds in rest_parts if adds))
        others = repeat(concat(comma, other), 0, None)
        lower = max(0, min_contains - found)
        upper = None if max_contains is None else max_contains - found
        if upper is not None and upper < lower:
            return NOTHING
        if match == NOTHING:
            return others if lower == 0 else NOTHING
        return concat(others, repeat(concat(comma, match, others), lower, upper))

    def _unique_array(self, ref: Ref, item_pos: Position, prefix: list, rest: Any,
                      min_items: int, max_items: int | None, contains: Expr | None) -> Expr:
        """uniqueItems over a small finite set of values: a walk over subsets of used values.
        The values of each position are read off its schema's structure
        (`Scalars.candidate_values`, a superset); each is then spelled as the schema writes
        it (`1`, not `1.0`, for an integer), and those it does not allow dropped."""
        node = ref.node
        pointer = self.registry.pointer(node)
        schemas = list(prefix) + [rest]
        choices = [self.scalars.candidate_values(self.registry.at(s, ref.base))
                   for s in schemas]
        message = None
        if contains is not None:
            message = f"{pointer}: uniqueItems together with contains is not supported"
        elif any(c is None for c in choices):
            message = (f"{pointer}: uniqueItems is supported only for items limited to a few "
                       "values (enum, const, boolean, null, an integer range, strings a pattern "
                       "or lengths leave few of, unions and objects of these)")
        else:
            bits: dict[Any, int] = {}  # each value allowed somewhere (by `value_key`): its bit
            spelled: list[dict[int, Expr]] = []  # per schema: value's bit -> its texts there
            for s, values in zip(schemas, choices):
                language = self.value(Ref(s, ref.base), item_pos)
                texts = {}
                for v in values:
                    spelling = self.ops.intersect(self.scalars.literal_value(v, item_pos),
                                                  language)
                    if spelling != NOTHING:
                        texts[bits.setdefault(value_key(v), len(bits))] = spelling
                spelled.append(texts)
            values_met = len(bits)
            longest = values_met if max_items is None else min(max_items, values_met)
            # the sets of values an array may have used, one state each
            sets = sum(comb(values_met, k) for k in range(longest + 1))
            if sets > _MAX_UNIQUE_SETS:
                message = (f"{pointer}: uniqueItems over {values_met} possible values needs "
                           f"{sets:,} sets of them (grammarc supports up to "
                           f"{_MAX_UNIQUE_SETS:,}; a lower maxItems needs fewer)")
        if message is not None:
            if not self.options.lenient:
                raise UnsupportedError(message + " (--lenient ignores it, allowing repeated "
                                       "items)")
            self.options.notice(message + "; ignored (--lenient)")
            return self._array_language(
                [self.value(Ref(s, ref.base), item_pos) for s in prefix],
                self.value(Ref(rest, ref.base), item_pos), min_items, max_items, contains, node)
        layout = self.layout
        memo: dict[tuple[int, int], Expr] = {}

        def tail(i: int, used: int) -> Expr:
            key = (i, used)
            if key in memo:
                return memo[key]
            options = [EMPTY] if i >= min_items else []
            if i < longest:
                position_allowed = spelled[min(i, len(prefix))]
                for v in sorted(position_allowed):
                    if not used & (1 << v):
                        options.append(concat(layout.comma if i else EMPTY, position_allowed[v],
                                              tail(i + 1, used | (1 << v))))
            memo[key] = result = alt(*options)
            return result

        try:
            body = tail(0, 0)
        finally:
            del tail  # a recursive closure is a cycle: free it now
        return NOTHING if body == NOTHING else concat(layout.open_array, body,
                                                      layout.close_array)


def _copied_states(item: Expr, copies: int) -> int:
    """The states `copies` inline copies of an item built as an exact automaton hold (0 for
    an item that is a tree, whose size is not known before its automaton is built, or a
    truncated automaton)."""
    if not isinstance(item, Automaton) or item.truncated:
        return 0
    return copies * item.dfa.num_states
