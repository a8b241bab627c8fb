"""Boolean operations on languages: intersection and difference by DFA product construction.

Regular languages are closed under them, which is what makes JSON Schema's `allOf`, `not`,
`oneOf`, `if`/`then`/`else` and combinations like `pattern` with `maxLength` exact. Operands
are expression trees; their DFAs are built (and cached per `Ops` instance), the reachable part
of the product is explored by a numba kernel, minimised, and returned as an `Automaton` leaf
(or `NOTHING` when the result is empty), ready to be combined further. Operands that call
machines are made flat first, by the `flatten` function the front end gives.
"""

from __future__ import annotations

from typing import Callable

import numba
import numpy as np

from ..errors import GrammarError, TooManyStatesError
from .arrays import grown
from .dfa import SUBSET_FACTOR, ByteDFA, build_dfa, minimize
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
        trans, accepting, status = _product_kernel(dfa_a.trans, dfa_a.accepting, dfa_b.trans,
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


@numba.njit(cache=True)
def _product_kernel(trans_a, acc_a, trans_b, acc_b, class_a, class_b, op, max_states):
    """Reachable product of two complete DFAs (state 0 dead, 1 start), state 0 dead, 1 start.

    op 0: both accept; op 1: a accepts and b does not. Pairs that can no longer accept under
    the operation (a dead, or for op 0 also b dead) collapse into the dead state.
    """
    n_classes = len(class_a)
    n_b = trans_b.shape[0]
    cap = 256
    trans = np.zeros((cap, n_classes), np.int32)
    accepting = np.zeros(cap, np.bool_)
    pair_a = np.zeros(cap, np.int64)
    pair_b = np.zeros(cap, np.int64)
    table_size = 1024
    keys = np.full(table_size, -1, np.int64)
    vals = np.zeros(table_size, np.int32)
    # state 0: dead; state 1: (1, 1)
    pair_a[1] = 1
    pair_b[1] = 1
    key = np.int64(1) * n_b + 1
    slot = (key * 2654435761) & (table_size - 1)
    keys[slot] = key
    vals[slot] = 1
    accepting[1] = acc_a[1] and (acc_b[1] if op == 0 else not acc_b[1])
    n = 2
    d = 1
    while d < n:
        for c in range(n_classes):
            pa = trans_a[pair_a[d], class_a[c]]
            pb = trans_b[pair_b[d], class_b[c]]
            if pa == 0 or (op == 0 and pb == 0):
                continue
            key = np.int64(pa) * n_b + pb
            slot = (key * 2654435761) & (table_size - 1)
            while keys[slot] != -1 and keys[slot] != key:
                slot = (slot + 1) & (table_size - 1)
            if keys[slot] == -1:
                if n >= max_states:
                    return trans[:n], accepting[:n], 1
                if n == cap:
                    cap *= 2
                    trans = grown(trans, n, cap)
                    accepting = grown(accepting, n, cap)
                    pair_a = grown(pair_a, n, cap)
                    pair_b = grown(pair_b, n, cap)
                keys[slot] = key
                vals[slot] = n
                pair_a[n] = pa
                pair_b[n] = pb
                accepting[n] = acc_a[pa] and (acc_b[pb] if op == 0 else not acc_b[pb])
                n += 1
                if 2 * n > table_size:
                    table_size *= 2
                    keys = np.full(table_size, -1, np.int64)
                    vals = np.zeros(table_size, np.int32)
                    for s in range(1, n):
                        k2 = pair_a[s] * n_b + pair_b[s]
                        sl = (k2 * 2654435761) & (table_size - 1)
                        while keys[sl] != -1:
                            sl = (sl + 1) & (table_size - 1)
                        keys[sl] = k2
                        vals[sl] = s
                    slot = -1  # re-looked up below
            if slot == -1:
                sl = (key * 2654435761) & (table_size - 1)
                while keys[sl] != key:
                    sl = (sl + 1) & (table_size - 1)
                slot = sl
            trans[d, c] = vals[slot]
        d += 1
    return trans[:n].copy(), accepting[:n].copy(), 0
