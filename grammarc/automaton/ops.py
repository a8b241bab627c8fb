"""Boolean operations on languages: intersection and difference by DFA product construction.

Regular languages are closed under them, which is what makes JSON Schema's `allOf`, `not`,
`oneOf`, `if`/`then`/`else` and combinations like `pattern` with `maxLength` exact. Operands
are expression trees; their DFAs are built (and cached per `Ops` instance), the reachable part
of the product is explored by a compiled kernel (csrc/dfa.cpp), minimised, and returned as an `Automaton` leaf
(or `NOTHING` when the result is empty), ready to be combined further. Operands that call
machines are made flat first, by the `flatten` function the front end gives.

A truncated operand (`Automaton.exact_to`: recursion cut at some depth) is an
under-approximation, exact for texts nested up to some depth. Intersections and unions of
such operands are exact up to the least of those depths; a difference `a - b` with a
truncated `b` would keep the deep texts of `a` that are in `b` but were cut from it, so `a` is
first cut to the depth `b` is exact to (`nested_at_most`, given by the front end). Results on
truncated operands are truncated, so the rule carries through nested operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import _core
from ..errors import GrammarError, TooManyStatesError
from .bytedfa import ByteDFA
from .dfa import SUBSET_FACTOR, build_dfa, minimize
from .expr import NOTHING, Automaton, Expr, exact_to

_AND, _AND_NOT = 0, 1


class Ops:
    """Intersection and difference of expressions, with a cache of the DFAs already built.
    `flatten` replaces the calls of an operand by flat languages (None: a call is an error);
    `nested_at_most(depth)` is the language of texts nested at most `depth` deep (None: the
    front end makes no truncated automaton)."""

    def __init__(self, max_states: int, flatten: Callable[[Expr], Expr] | None = None,
                 nested_at_most: Callable[[int], Expr] | None = None) -> None:
        self.max_states = max_states
        self.flatten = flatten
        self.nested_at_most = nested_at_most
        self._dfas: dict[int, tuple[Expr, _Built]] = {}

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
        if isinstance(expr, Automaton):
            return _Built(expr.dfa, expr.exact_to)
        hit = self._dfas.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        flat = expr if self.flatten is None else self.flatten(expr)
        try:
            dfa = build_dfa(flat, max_states=self.max_states)
        except GrammarError as exc:
            if isinstance(exc, TooManyStatesError) or "matches no string" not in str(exc):
                raise
            dfa = None
        built = _Built(dfa, exact_to(flat))
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
        built_a, built_b = self._built(a), self._built(b)
        if built_a.dfa is None:
            return NOTHING
        if built_b.dfa is None and built_b.exact_to is None:
            return a if op == _AND_NOT else NOTHING
        dfa_a, depths = built_a.dfa, [d for d in (built_a.exact_to, built_b.exact_to)
                                      if d is not None]
        if op == _AND_NOT and built_b.exact_to is not None and \
                self.nested_at_most is not None:  # see the module docstring
            dfa_a = self._combine(dfa_a, self.dfa(self.nested_at_most(built_b.exact_to)), _AND)
        result = self._combine(dfa_a, built_b.dfa, op)
        if result is None:
            return NOTHING
        return Automaton(result, min(depths) if depths else None)

    def _combine(self, dfa_a: ByteDFA | None, dfa_b: ByteDFA | None,
                 op: int) -> ByteDFA | None:
        """The minimal DFA of `a & b` or `a - b` (None: the empty language)."""
        if dfa_a is None or dfa_b is None:
            return dfa_a if op == _AND_NOT else None
        # byte classes of the product: pairs of the operands' classes
        pairs = dfa_a.byte_class.astype(np.int64) * dfa_b.num_classes + dfa_b.byte_class
        _, first, byte_class = np.unique(pairs, return_index=True, return_inverse=True)
        class_a = dfa_a.byte_class[first].astype(np.int32)
        class_b = dfa_b.byte_class[first].astype(np.int32)
        limit = SUBSET_FACTOR * self.max_states
        trans, accepting, status, _, _ = _core.product(dfa_a.trans, dfa_a.accepting, dfa_b.trans,
                                                       dfa_b.accepting, class_a, class_b, op,
                                                       limit)
        if status:
            raise TooManyStatesError(f"a product of automata needs more than {limit:,} states "
                                     "(raise --max-states)")
        if not accepting.any():
            return None
        result = minimize(trans, byte_class.reshape(-1).astype(np.int32), accepting)
        if result.num_states > self.max_states:
            raise TooManyStatesError(f"the automaton needs {result.num_states:,} DFA states, "
                                     f"more than --max-states {self.max_states:,}")
        return result


@dataclass(frozen=True)
class _Built:
    """An operand as `Ops` uses it: the minimal DFA of its flat language (None: empty), and
    the nesting depth up to which that is exact (None: at any depth)."""

    dfa: ByteDFA | None
    exact_to: int | None
