"""Boolean operations on languages: intersection and difference by DFA product construction.

Regular languages are closed under them, which is what makes JSON Schema's `allOf`, `not`,
`oneOf`, `if`/`then`/`else` and combinations like `pattern` with `maxLength` exact. Operands
are expression trees; their DFAs are built (and cached per `Ops` instance), the reachable part
of the product is explored by a compiled kernel (csrc/dfa.cpp), minimised, and returned as an `Automaton` leaf
(or `NOTHING` when the result is empty), ready to be combined further.

Operands that call machines are made flat first, by the `flatten` function the front end gives,
unless the front end links machines (a `Linker`): then they keep their calls. The operands'
DFAs are built with each call spelled by its code (callgraph.py), and the product reads a call
of both operands at the same point as one call of a machine of the texts both callees accept
(`Linker.meet`; a machine met with itself is itself). In a difference, a call of the same
machine in both operands stays that call, and a call of `a` where `b` has failed (or cannot
read the callee's first byte) stays a call of `a`'s machine; two different machines called at
one point would need two ways out of the call, and are out of step. Where one operand calls a
machine and the other reads that machine's first bytes itself, the calls are out of step too:
the machine is inlined in that operand (its own calls kept) and the product tried again, a few
times, before both are made flat. Where a machine to inline (or to make flat) is still being
built, the product is a machine of its own, computed once that one is (`Linker.later`).
Recursion through such products stays exact at any depth. Texts of a machine must end where
the syntax says (JSON values do), so that both operands return from a call after the same text.

A truncated operand (`Automaton.exact_to`: recursion cut at some depth) is an
under-approximation, exact for texts nested up to some depth. Intersections and unions of
such operands are exact up to the least of those depths; a difference `a - b` with a
truncated `b` would keep the deep texts of `a` that are in `b` but were cut from it, so `a` is
first cut to the depth `b` is exact to (`nested_at_most`, given by the front end). Results on
truncated operands are truncated, so the rule carries through nested operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Protocol

import numpy as np

from .. import _core
from ..errors import TooManyStatesError
from .bytedfa import ByteDFA, DFATable
from .counters import at_least, counted_text, counter_form
from .dfa import SUBSET_FACTOR, SubsetDFA, build_dfa, minimize, subset_dfa
from .expr import (NOTHING, Automaton, Call, CountedText, Expr, exact_to, fingerprint,
                   same_spelling)
from .callgraph import (
    CALL_PREFIX, CODE_BYTES, DIGIT_BYTES, call_codes, called_names, code_paths, replace_calls,
    starting_bytes, without_codes,
)

_AND, _AND_NOT = 0, 1
# inlinings of calls out of step before a product goes flat: where only one operand calls, the
# other's nesting is finite, and each round reaches a level deeper into it. The rounds stop
# too where the operands have grown by inlining past --max-states / _INLINED_SHARE states, or
# their growth summed over the rounds passes --max-states (inlining may double an operand at
# each round).
_CALL_ROUNDS, _ONE_SIDED_ROUNDS, _INLINED_SHARE = 40, 64, 10
# operands of products of more states than this are read as the subset construction leaves
# them (`_Built.operand`)
_MINIMISED_UP_TO = 4096
_ANY_DIGIT = -1


class Linker(Protocol):
    """The machines of a front end that links them by calls, as products that keep calls
    (module docstring) see them."""

    def body_of(self, name: str) -> Expr | None:
        """A machine's body; None while it is being built."""

    def first_of(self, name: str) -> np.ndarray | None:
        """A superset of the bytes the texts of a machine being built start with (bool
        [256]), if known (`starting_bytes`)."""

    def meet(self, a: str, b: str) -> Expr:
        """A call of a machine of the texts both machines accept."""

    def later(self, a: Expr, b: Expr, difference: bool) -> Expr | None:
        """A call of a machine of `a & b` (or `a - b`) computed once the machines being
        built that the operands reach are; None where they reach none, or that product is
        the one being computed."""

    @property
    def failed_builds(self) -> int:
        """How many machine bodies failed to build so far (a failed body is not known: no
        product may go on as if it were empty)."""


class Ops:
    """Intersection and difference of expressions, with a cache of the DFAs already built (by
    operand, and by how an operand made flat spells its language: a machine made flat again
    for another product is not determinised again).
    `flatten` replaces the calls of an operand by flat languages (None: a call is an error);
    `nested_at_most(depth)` is the language of texts nested at most `depth` deep (None: the
    front end makes no truncated automaton). With a `linker`, products keep calls (module
    docstring)."""

    def __init__(self, max_states: int, flatten: Callable[[Expr], Expr] | None = None,
                 nested_at_most: Callable[[int], Expr] | None = None,
                 linker: Linker | None = None) -> None:
        self.max_states = max_states
        self.flatten = flatten
        self.nested_at_most = nested_at_most
        self.linker = linker
        self._dfas: dict[int, tuple[Expr, _Built]] = {}
        self._flat_dfas: dict[int, list[tuple[Expr, _Built]]] = {}  # by `fingerprint`
        self._call_tables: dict[int, tuple[Expr, _CallTable]] = {}
        self._firsts: dict[str, np.ndarray] = {}

    def dfa(self, expr: Expr) -> ByteDFA | None:
        """The minimal DFA of `expr`, or None for the empty language."""
        return self._built(expr).dfa

    def automaton(self, expr: Expr) -> Expr:
        """`expr` as an `Automaton` leaf (`NOTHING` for the empty language)."""
        built = self._built(expr)
        return NOTHING if built.dfa is None else Automaton(built.dfa, built.exact_to)

    def exact_to(self, expr: Expr) -> int | None:
        """The nesting depth up to which `expr`, its calls made flat, is exact (None: it is
        exact at any depth)."""
        return self._built(expr).exact_to

    def _built(self, expr: Expr) -> _Built:
        if isinstance(expr, Automaton) and not expr.calls:
            return _Built(expr.dfa, expr.exact_to, self.max_states)
        hit = self._dfas.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        flat = expr if self.flatten is None else self.flatten(expr)
        spelled = self._flat_dfas.setdefault(fingerprint(flat), [])
        built = next((b for other, b in spelled if same_spelling(other, flat)), None)
        if built is None:
            built = _Built(subset_dfa(flat, max_states=self.max_states), exact_to(flat),
                           self.max_states)
            spelled.append((flat, built))
        self._dfas[id(expr)] = (expr, built)
        return built

    def intersect(self, a: Expr, b: Expr) -> Expr:
        return self._product(a, b, _AND)

    def difference(self, a: Expr, b: Expr) -> Expr:
        """Strings of `a` that are not in `b`."""
        return self._product(a, b, _AND_NOT)

    def _product(self, a: Expr, b: Expr, op: int) -> Expr:
        if a == NOTHING or b == NOTHING:
            return a if op == _AND_NOT else NOTHING
        if op == _AND:
            counted = self._still_counted(a, b)
            if counted is not None:
                return counted
        kept = self._with_calls(a, b, op)
        if kept is None and self.linker is not None:
            kept = self.linker.later(a, b, op == _AND_NOT)
        if kept is not None:
            return kept
        built_a, built_b = self._built(a), self._built(b)
        if built_a.operand is None:
            return NOTHING
        if built_b.operand is None and built_b.exact_to is None:
            return a if op == _AND_NOT else NOTHING
        dfa_a, depths = built_a.operand, [d for d in (built_a.exact_to, built_b.exact_to)
                                          if d is not None]
        if op == _AND_NOT and built_b.exact_to is not None and \
                self.nested_at_most is not None:  # see the module docstring
            dfa_a = self._combine(dfa_a, self.dfa(self.nested_at_most(built_b.exact_to)), _AND)
        result = self._combine(dfa_a, built_b.operand, op)
        if result is None:
            return NOTHING
        return Automaton(result, min(depths) if depths else None)

    def _still_counted(self, a: Expr, b: Expr) -> Expr | None:
        """`a & b` as a `CountedText` where one operand counts (a `CountedText`, or a counter
        form: a string with a long `maxLength` in one `allOf` branch, a `format` in another)
        and the other calls nothing: the texts of both under the first's lengths (`counted`),
        which anything but a machine reads as their product. None where neither counts, or
        where the texts cannot be counted (the product is computed then, as for any
        operands)."""
        if self.linker is None:  # no machines: nothing counts (and `CountedText.exact` is
            return None          # a product without one)
        for counts, other in ((a, b), (b, a)):
            if not isinstance(counts, CountedText) and counter_form(counts) is None or \
                    called_names(other) or exact_to(other) is not None:
                continue
            if isinstance(counts, CountedText):
                return self.counted(self.intersect(counts.texts, other), counts.lengths)
            return self.counted(self.automaton(other), counts)
        return None

    def counted(self, texts: Expr, lengths: Expr) -> Expr | None:
        """The texts of both as a `CountedText` whose characters a machine counts (`texts`
        first cut to the least length, where some are shorter: the count only checks the
        most), `NOTHING` where none fits the lengths, or None where they cannot be counted
        (`counters.counted_text`) and are a product."""
        if texts == NOTHING:
            return NOTHING
        result = CountedText(texts, lengths)
        found = counted_text(result, self.max_states)
        if found is None and at_least(lengths) is not None:
            try:
                cut = self.intersect(texts, at_least(lengths))
            except TooManyStatesError:
                return None
            if cut == NOTHING:
                return NOTHING
            result = CountedText(cut, lengths)
            found = counted_text(result, self.max_states)
        if found is None:
            return None
        counter = found[1]
        if 0 <= counter.count_max < counter.need[counter.loop]:
            return NOTHING  # every text is longer than the bound
        return result

    def _combine(self, dfa_a: DFATable | None, dfa_b: DFATable | None,
                 op: int) -> ByteDFA | None:
        """The minimal DFA of `a & b` or `a - b` (None: the empty language)."""
        if dfa_a is None or dfa_b is None:
            return dfa_a if op == _AND_NOT else None
        return self._minimal(self._pairs(dfa_a, dfa_b, op))

    def _pairs(self, dfa_a: DFATable, dfa_b: DFATable, op: int) -> _Pairs:
        """The reachable product of two DFAs, not minimised."""
        # byte classes of the product: pairs of the operands' classes
        pairs = dfa_a.byte_class.astype(np.int64) * dfa_b.num_classes + dfa_b.byte_class
        _, first, byte_class = np.unique(pairs, return_index=True, return_inverse=True)
        class_a = dfa_a.byte_class[first].astype(np.int32)
        class_b = dfa_b.byte_class[first].astype(np.int32)
        limit = SUBSET_FACTOR * self.max_states
        trans, accepting, status, state_a, state_b = _core.product(
            dfa_a.trans, dfa_a.accepting, dfa_b.trans, dfa_b.accepting, class_a, class_b, op,
            limit)
        if status:
            raise TooManyStatesError(f"a product of automata needs more than {limit:,} states "
                                     "(raise --max-states)")
        return _Pairs(trans, byte_class.reshape(-1).astype(np.int32), accepting, state_a,
                      state_b)

    def _minimal(self, product: _Pairs) -> ByteDFA | None:
        """The minimal DFA of a product (None: the empty language), within --max-states."""
        if not product.accepting.any():
            return None
        result = minimize(product.trans, product.byte_class, product.accepting)
        if result.num_states > self.max_states:
            raise TooManyStatesError(f"the automaton needs {result.num_states:,} DFA states, "
                                     f"more than --max-states {self.max_states:,}")
        return result

    def restricted(self, expr: Expr, dfa: ByteDFA) -> Expr:
        """The texts of `expr` that `dfa` accepts, where `dfa` reads each call of `expr` as the
        bytes of its code (the callees' texts are not read: restrict the callees themselves
        and call those). Calls are kept."""
        names = ["", *sorted(called_names(expr))]
        if len(names) == 1:
            return self.intersect(expr, Automaton(dfa))
        codes = call_codes(names)
        side = self._call_table(expr, codes)
        product = self._pairs(side.spelled(codes, 0, digits_first=True), dfa, _AND)
        return self._linked(product, names, codes, False, expr, expr)

    def mapped(self, expr: Expr, language: Callable[[ByteDFA], ByteDFA | None]) -> Expr:
        """The texts of `language(dfa)`, a language made from `expr`'s DFA `dfa` that reads
        each call of `expr` as the bytes of its code (`language` must keep each code a code,
        read between values; the callees' texts are not read). Calls are kept."""
        names = ["", *sorted(called_names(expr))]
        if len(names) == 1:
            built = self._built(expr)
            dfa = None if built.dfa is None else language(built.dfa)
            return NOTHING if dfa is None else Automaton(dfa, built.exact_to)
        codes = call_codes(names)
        dfa = language(self._call_table(expr, codes).spelled(codes, 0, digits_first=True))
        if dfa is None:
            return NOTHING
        product = _Pairs(dfa.trans, dfa.byte_class, dfa.accepting, dfa.accepting, dfa.accepting)
        return self._linked(product, names, codes, False, expr, expr)

    # ------------------------------------------------------------ products that keep calls
    def _with_calls(self, a: Expr, b: Expr, op: int) -> Expr | None:
        """`a & b` or `a - b` with the operands' calls kept (module docstring); None where it
        is not computed so: no operand calls, an operand is truncated (so is the result: the
        operands are made flat), a machine is still being built, or the calls stay out of
        step."""
        if self.linker is None or exact_to(a) is not None or exact_to(b) is not None:
            return None
        if op == _AND_NOT:
            if not called_names(a) and not called_names(b):
                return None
        elif not called_names(a):
            if not called_names(b):
                return None
            a, b = b, a
        failed = self.linker.failed_builds
        try:
            return self._calls_in_step(a, b, op)
        except TooManyStatesError:
            # a machine built meanwhile (a meet, or one deferred till then) failed: its body
            # is not known, and the error is not this product's own size
            if self.linker.failed_builds != failed:
                raise
            return None

    def _calls_in_step(self, a: Expr, b: Expr, op: int) -> Expr | None:
        """`_with_calls` once its operands qualify."""
        one_sided = not called_names(a) or not called_names(b)
        first_size, spent = None, 0
        for _ in range(_ONE_SIDED_ROUNDS if one_sided else _CALL_ROUNDS):
            names = ["", *sorted(called_names(a) | called_names(b))]  # code 0 calls nothing
            codes = call_codes(names)
            side_a, side_b = self._call_table(a, codes), self._call_table(b, codes)
            size = side_a.dfa.num_states + side_b.dfa.num_states
            first_size = size if first_size is None else first_size
            spent += size - first_size
            if size - first_size > self.max_states // _INLINED_SHARE or spent > self.max_states:
                return None
            both = bool(side_a.calls) and bool(side_b.calls) and op == _AND
            width = len(codes[""]) - 1
            # where both call, a's code then any digits and any digits then b's code spell
            # every pair of callees as one code of twice the width; in a difference, only
            # equal codes go on together (a call of b's that differs is out of step)
            dfa_a = side_a.spelled(codes, width if both else 0, digits_first=True)
            dfa_b = side_b.spelled(codes, width if both else 0, digits_first=False)
            product = self._pairs(dfa_a, dfa_b, op)
            late_a = side_a.out_of_step(product.state_a, product.state_b, side_b)
            late_b = side_b.out_of_step(product.state_b, product.state_a, side_a)
            if op == _AND_NOT:
                mismatched = side_a.mismatched(product.state_a, product.state_b, side_b)
                late_a |= {x for x, _ in mismatched}
                late_b |= {y for _, y in mismatched}
            if not late_a and not late_b:
                return self._linked(product, names, codes, both, a, b)
            inlined_a = self._inlined(a, late_a)
            inlined_b = self._inlined(b, late_b)
            if inlined_a is None or inlined_b is None:
                return None
            a, b = inlined_a, inlined_b
        return None

    def _call_table(self, expr: Expr, codes: dict[str, bytes]) -> _CallTable:
        """The DFA of `expr` with its calls read out of it (`codes` spell them while it is
        built; cached per operand: the calls read out name their machines, so the table
        serves any set of codes, and a product over it, minimised, is the same whatever
        codes built it). The callees' first bytes are read again each time: those of a
        machine being built are a superset until it is."""
        hit = self._call_tables.get(id(expr))
        if hit is not None and hit[0] is expr:
            known = hit[1]
            if all(np.array_equal(self._first(name), first)
                   for name, first in known.firsts.items()):
                return known
            dfa, calls = known.dfa, known.calls
        elif isinstance(expr, Automaton) and all(isinstance(e, Call) for _, e, _ in expr.calls):
            dfa = expr.dfa  # a product's: its calls are already out of its table
            calls = [(state, edge.name, ret) for state, edge, ret in expr.calls]
        else:
            coded = build_dfa(expr, max_states=self.max_states, call_codes=codes)
            name_of = {code: name for name, code in codes.items()}
            width = len(codes[""]) - 1
            calls = [(state, name_of[code], ret) for state, code, ret in
                     code_paths(coded.trans, coded.byte_class, width)]
            dfa = without_codes(coded)
        states = np.unique(np.array([state for state, _, _ in calls], np.int64))
        firsts = {name: self._first(name) for name in {name for _, name, _ in calls}}
        first = np.zeros((len(states), 256), bool)
        for state, name, _ in calls:
            first[np.searchsorted(states, state)] |= firsts[name]
        built = _CallTable(dfa, calls, states, first, firsts)
        self._call_tables[id(expr)] = (expr, built)
        return built

    def _first(self, name: str) -> np.ndarray:
        """The bytes a machine's texts may start with (every byte where that is not known;
        a superset while it is being built)."""
        found = self._firsts.get(name)
        if found is None:
            linker = self.linker
            found = starting_bytes(Call(name), linker.body_of, first_of=linker.first_of)
            if found is None:
                return np.ones(256, bool)
            if linker.body_of(name) is not None:
                self._firsts[name] = found
        return found

    def _inlined(self, expr: Expr, names: set[str]) -> Expr | None:
        """`expr` with its calls of `names` replaced by their bodies (None: one is being
        built)."""
        bodies = {name: self.linker.body_of(name) for name in names & called_names(expr)}
        if any(body is None for body in bodies.values()):
            return None
        return replace_calls(expr, lambda name: bodies.get(name) or Call(name))

    def _linked(self, product: _Pairs, names: list[str], codes: dict[str, bytes], both: bool,
                a: Expr, b: Expr) -> Expr:
        """The product's minimal DFA with its call codes read out as calls: of the callees'
        meet where both operands call (`both`), else of a's callee (b has failed there)."""
        dfa = self._minimal(product)
        if dfa is None:
            return NOTHING
        width = len(codes[""]) - 1
        index_of = {codes[name][1:]: i for i, name in enumerate(names)}
        calls = []
        for state, code, ret in code_paths(dfa.trans, dfa.byte_class,
                                           2 * width if both else width):
            callee = names[index_of[code[1:width + 1]]]
            if both:
                other = names[index_of[code[width + 1:]]]
                if not (self._first(callee) & self._first(other)).any():
                    continue
                edge = Call(callee) if callee == other else self.linker.meet(callee, other)
            else:
                edge = Call(callee)
            calls.append((state, edge, ret))
        depths = [d for d in (exact_to(a), exact_to(b)) if d is not None]
        depth = min(depths) if depths else None
        if not dfa.trans[:, dfa.byte_class[CALL_PREFIX]].any():
            return Automaton(dfa, depth)  # no call left: the minimal DFA as it is
        return Automaton(without_codes(dfa), depth, tuple(calls))


@dataclass(frozen=True)
class _Pairs:
    """A product of two DFAs: its table over its byte classes, and each state's pair."""

    trans: np.ndarray
    byte_class: np.ndarray
    accepting: np.ndarray
    state_a: np.ndarray
    state_b: np.ndarray


@dataclass(frozen=True)
class _CallTable:
    """An operand's DFA without call codes, its calls (state, callee's name, return state),
    the states that call, and the bytes their callees start with."""

    dfa: ByteDFA
    calls: list[tuple[int, str, int]]  # (state, machine called, return state)
    call_states: np.ndarray  # int64 [K], ascending
    call_first: np.ndarray   # bool [K, 256]
    firsts: dict[str, np.ndarray]  # the bytes each callee starts with

    def spelled(self, codes: dict[str, bytes], width: int, digits_first: bool) -> ByteDFA:
        """The DFA with each call spelled again: its code, then `width` any digits, or
        (not `digits_first`) the code's prefix byte, `width` any digits, then its digits.
        The new states are numbered after the DFA's."""
        dfa = self.dfa
        size = dfa.num_states
        edges: dict[tuple[int, int], int] = {}  # (state, byte or _ANY_DIGIT) -> state
        for state, name, ret in self.calls:
            digits = list(codes[name][1:])
            pad = [_ANY_DIGIT] * width
            labels = [CALL_PREFIX, *(digits + pad if digits_first else pad + digits)]
            for label in labels[:-1]:
                if (state, label) not in edges:
                    edges[(state, label)] = size
                    size += 1
                state = edges[(state, label)]
            edges[(state, labels[-1])] = ret
        # each code byte gets a class of its own, after the DFA's
        byte_class = dfa.byte_class.copy()
        byte_class[CODE_BYTES] = dfa.num_classes + np.arange(len(CODE_BYTES))
        trans = np.zeros((size, dfa.num_classes + len(CODE_BYTES)), np.int32)
        trans[:dfa.num_states, :dfa.num_classes] = dfa.trans
        accepting = np.zeros(size, bool)
        accepting[:dfa.num_states] = dfa.accepting
        for (state, label), target in edges.items():
            trans[state, byte_class[DIGIT_BYTES if label == _ANY_DIGIT else label]] = target
        return ByteDFA(trans, byte_class, accepting)

    def out_of_step(self, mine: np.ndarray, theirs: np.ndarray, other: _CallTable) -> set[str]:
        """The machines this operand calls at a state of the product (its states
        `mine`, the other operand's `theirs`) where the other reads their first bytes itself.
        States past the DFAs (spelling codes) neither read text nor call."""
        if not len(self.call_states):
            return set()
        inside = (mine < self.dfa.num_states) & (theirs < other.dfa.num_states)
        mine, theirs = mine[inside], theirs[inside]
        row = np.searchsorted(self.call_states, mine)
        calling = self.call_states[np.minimum(row, len(self.call_states) - 1)] == mine
        mine, theirs, row = mine[calling], theirs[calling], row[calling]
        reads = other.dfa.trans[theirs][:, other.dfa.byte_class] != 0
        states = set(mine[(self.call_first[row] & reads).any(axis=1)].tolist())
        return {name for state, name, _ in self.calls if state in states}

    def mismatched(self, mine: np.ndarray, theirs: np.ndarray,
                   other: _CallTable) -> set[tuple[str, str]]:
        """Pairs of different machines (this operand's, the other's) called at one state of
        the product that may start with the same byte."""
        both = np.isin(mine, self.call_states) & np.isin(theirs, other.call_states)
        out = set()
        for p, q in set(zip(mine[both].tolist(), theirs[both].tolist())):
            out.update((x, y) for x in self.callees[p] for y in other.callees[q]
                       if x != y and (self.firsts[x] & other.firsts[y]).any())
        return out

    @cached_property
    def callees(self) -> dict[int, list[str]]:
        """The machines each calling state calls."""
        out: dict[int, list[str]] = {}
        for state, name, _ in self.calls:
            out.setdefault(state, []).append(name)
        return out


class _Built:
    """An operand as `Ops` uses it: the DFA of its flat language, minimal (`dfa`, minimised
    when first asked; None: the empty language) or as a product reads it (`operand`), and
    the nesting depth up to which that is exact (`exact_to`; None: at any depth)."""

    def __init__(self, dfa: ByteDFA | SubsetDFA, exact_to: int | None, max_states: int) -> None:
        self.exact_to, self._max_states = exact_to, max_states
        self._subsets = dfa if isinstance(dfa, SubsetDFA) else None
        if isinstance(dfa, ByteDFA):
            self.__dict__["dfa"] = dfa

    @cached_property
    def dfa(self) -> ByteDFA | None:
        subsets = self._subsets
        minimal = subsets.minimal(self._max_states) if subsets.accepting.any() else None
        self._subsets = None  # the minimal one serves from now on
        return minimal

    @property
    def operand(self) -> ByteDFA | SubsetDFA | None:
        """The DFA a product reads (None: the empty language): the subset construction's
        where it is large but within --max-states, otherwise the minimal one (a product
        minimises its result anyway; minimising a large operand, nearly minimal when it is
        an object's texts, costs more than the larger product it may make)."""
        subsets = self._subsets
        if "dfa" in self.__dict__ or not _MINIMISED_UP_TO < subsets.num_states <= \
                self._max_states:
            return self.dfa
        return subsets if subsets.accepting.any() else None
