"""Boolean operations on languages: intersection and difference by DFA product construction.

Regular languages are closed under them, which is what makes JSON Schema's `allOf`, `not`,
`oneOf`, `if`/`then`/`else` and combinations like `pattern` with `maxLength` exact. Operands
are expression trees; their DFAs are built (and cached per `Ops` instance), the reachable part
of the product is explored by a compiled kernel (csrc/dfa.cpp), minimised, and returned as an `Automaton` leaf
(or `NOTHING` when the result is empty), ready to be combined further. Operands that call
machines are made flat first, by the `flatten` function the front end gives.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import _core
from ..errors import GrammarError, TooManyStatesError
from .bytedfa import ByteDFA
from .dfa import SUBSET_FACTOR, build_dfa, minimize
from .expr import NOTHING, Automaton, Expr

_AND, _AND_NOT = 0, 1


class Ops:
    """Intersection and difference of expressions, with a cache of the DFAs already built.
    `flatten` replaces the calls of an operand by flat languages (None: a call is an error)."""

    def __init__(self, max_states: int, flatten: Callable[[Expr], Expr] | None = None) -> None:
        self.max_states = max_states
        self.flatten = flatten
        self._dfas: dict[int, tuple[Expr, ByteDFA | None]] = {}

    def dfa(self, expr: Expr) -> ByteDFA | None:
        """The minimal DFA of `expr`, or None for the empty language."""
        if isinstance(expr, Automaton):
            return expr.dfa
        hit = self._dfas.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        try:
            flat = expr if self.flatten is None else self.flatten(expr)
            dfa = build_dfa(flat, max_states=self.max_states)
        except GrammarError as exc:
            if isinstance(exc, TooManyStatesError) or "matches no string" not in str(exc):
                raise
            dfa = None
        self._dfas[id(expr)] = (expr, dfa)
        return dfa

    def intersect(self, a: Expr, b: Expr) -> Expr:
        return self._product(a, b, _AND)

    def difference(self, a: Expr, b: Expr) -> Expr:
        """Strings of `a` that are not in `b`."""
        return self._product(a, b, _AND_NOT)

    def _product(self, a: Expr, b: Expr, op: int) -> Expr:
        if a == NOTHING:
            return NOTHING
        if b == NOTHING:
            return a if op == _AND_NOT else NOTHING
        dfa_a, dfa_b = self.dfa(a), self.dfa(b)
        if dfa_a is None:
            return NOTHING
        if dfa_b is None:
            return a if op == _AND_NOT else NOTHING
        # byte classes of the product: pairs of the operands' classes
        pairs = dfa_a.byte_class.astype(np.int64) * dfa_b.num_classes + dfa_b.byte_class
        _, first, byte_class = np.unique(pairs, return_index=True, return_inverse=True)
        class_a = dfa_a.byte_class[first].astype(np.int32)
        class_b = dfa_b.byte_class[first].astype(np.int32)
        limit = SUBSET_FACTOR * self.max_states
        trans, accepting, status = _core.product(dfa_a.trans, dfa_a.accepting, dfa_b.trans,
                                                 dfa_b.accepting, class_a, class_b, op, limit)
        if status:
            raise TooManyStatesError(f"a product of automata needs more than {limit:,} states "
                                     "(raise --max-states)")
        if not accepting.any():
            return NOTHING
        result = minimize(trans, byte_class.reshape(-1).astype(np.int32), accepting)
        if result.num_states > self.max_states:
            raise TooManyStatesError(f"the automaton needs {result.num_states:,} DFA states, "
                                     f"more than --max-states {self.max_states:,}")
        return Automaton(result)
