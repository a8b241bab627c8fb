"""Byte-level DFA: subset construction over byte classes, Hopcroft minimisation, canonical form.

The result is a `ByteDFA` (bytedfa.py), what the rest of grammarc consumes: the remaining
states are numbered in breadth-first order from the start, visiting byte classes in byte
order. Every state except 0 can reach an accepting state, and equal languages give identical
`ByteDFA`s (the minimal DFA in canonical numbering).

The hot loops (subset construction, minimisation) are kernels of the compiled core
(`grammarc._core`, csrc/dfa.cpp); they are compile-side only and never imported by the runtime.

When the NFA labels its states (the nodes of a `Graph`), every DFA state carries the one label
of its NFA states, and minimisation never merges states of different labels; a DFA state whose
NFA states have two labels means the text read so far does not determine the node, which is
reported as a `GrammarError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import _core
from ..errors import AmbiguityError, EmptyLanguageError, TooManyStatesError
from . import DEFAULT_MAX_STATES
from .bytedfa import ByteDFA, DFATable
from .expr import Expr
from .nfa import Fragment, build_nfa

_NO_LIMIT = np.iinfo(np.int32).max
_NO_LABELS = np.zeros(0, np.int32)
# The subset construction may pass through more states than the minimal result has (copies
# of an ambiguous item in a bounded repeat); it may use this many times --max-states, and
# SUBSET_ENTRIES times as many NFA states summed over its subsets (which bounds its memory and
# time when the NFA is large, e.g. deeply unrolled recursive rules).
SUBSET_FACTOR = 10
SUBSET_ENTRIES = 32


def build_dfa(expr: Expr, max_states: int = DEFAULT_MAX_STATES,
              call_codes: dict[str, bytes] | None = None) -> ByteDFA:
    """The minimal byte DFA of `expr`: UTF-8 text, dead = 0, start = 1.

    `max_states` bounds the DFA (and, scaled, the NFA it is built from) so that a grammar that
    blows up fails with `TooManyStatesError` instead of exhausting memory. `call_codes` spells
    the expression's `Call`s (callgraph.py).
    """
    fragment, label_names = build_nfa(expr, _nfa_limit(max_states), call_codes,
                                      dfa_states=max_states)
    return determinize(fragment, max_states=max_states, label_names=label_names)


def _nfa_limit(max_states: int) -> int:
    """The NFA states a DFA of at most `max_states` states may be built from."""
    return min(max(20 * max_states, 1_000_000), _NO_LIMIT)


@dataclass(frozen=True)
class SubsetDFA(DFATable):
    """A DFA as the subset construction leaves it: every state reachable, but neither
    minimised nor trimmed; what a product reads as an operand (the product's result is
    minimised anyway)."""

    def minimal(self, max_states: int = _NO_LIMIT) -> ByteDFA:
        """The canonical minimal DFA (`EmptyLanguageError` for the empty language,
        `TooManyStatesError` past `max_states` states)."""
        return _within(minimize(self.trans, self.byte_class, self.accepting), max_states)


def subset_dfa(expr: Expr, max_states: int = DEFAULT_MAX_STATES) -> SubsetDFA:
    """The DFA of `expr` (which calls nothing) before minimisation, within the bounds of
    `build_dfa`."""
    fragment, label_names = build_nfa(expr, _nfa_limit(max_states), None,
                                      dfa_states=max_states)
    trans, byte_class, accepting, _ = _subsets(fragment, max_states, label_names)
    return SubsetDFA(trans, byte_class, accepting)


def determinize(frag: Fragment, max_states: int = _NO_LIMIT,
                label_names: tuple[str, ...] = ()) -> ByteDFA:
    """The canonical minimal DFA of an NFA fragment (entry 0, accepting exit 1).

    `label_names` name the fragment's labels (see nfa.py); a DFA state whose NFA states carry
    two different labels raises `GrammarError` with a text that reaches it.
    """
    trans, byte_class, accepting, labels = _subsets(frag, max_states, label_names)
    return _within(minimize(trans, byte_class, accepting, labels, label_names), max_states)


def _within(dfa: ByteDFA, max_states: int) -> ByteDFA:
    if dfa.num_states > max_states:
        raise TooManyStatesError(
            f"the automaton needs {dfa.num_states:,} DFA states, more than --max-states "
            f"{max_states:,}")
    return dfa


def _subsets(frag: Fragment, max_states: int, label_names: tuple[str, ...]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The subset construction of `determinize`: (trans, byte_class, accepting, the labels
    of the states or None where the fragment has none)."""
    edges = frag.edges
    byte_class = _byte_classes(edges[:, 1], edges[:, 2])
    num_classes = int(byte_class[-1]) + 1
    eps_ptr, eps_dst = _csr(frag.num_states, frag.eps[:, 0], frag.eps[:, 1:2])
    edge_ptr, edge_cols = _csr(frag.num_states, edges[:, 0],
                               np.stack([byte_class[edges[:, 1]], byte_class[edges[:, 2]],
                                         edges[:, 3]], axis=1))
    tag_ptr, tag_cols = _csr(frag.num_states, frag.tags[:, 0], frag.tags[:, 1:3])
    num_families = max(frag.num_families, 1)
    nfa_label = np.full(frag.num_states, -1, np.int32)
    nfa_label[frag.labels[:, 0]] = frag.labels[:, 1]
    limit = min(SUBSET_FACTOR * max_states, _NO_LIMIT)
    entries = SUBSET_ENTRIES * limit
    # what those limits could allocate (a transition row, flags, offsets, hash slots per
    # state; 4 bytes per subset entry; arrays grow by doubling), kept within memory
    worst = 3 * (limit * (4 * num_classes + 40) + 4 * entries)
    budget = memory_budget()
    bounded = worst > budget
    if bounded:
        limit = max(int(limit * budget / worst), 2)
        entries = max(int(entries * budget / worst), 2)
    trans, accepting, labels, status, conflict = _core.subset_construction(
        frag.num_states, eps_ptr, eps_dst[:, 0], edge_ptr,
        np.ascontiguousarray(edge_cols[:, 0]), np.ascontiguousarray(edge_cols[:, 1]),
        np.ascontiguousarray(edge_cols[:, 2]), tag_ptr, np.ascontiguousarray(tag_cols[:, 0]),
        np.ascontiguousarray(tag_cols[:, 1]), num_families, num_classes, limit, entries,
        nfa_label)
    if status == 1:
        bound = f"bounded by half the memory available, {budget / 2 ** 30:.1f} GiB" \
            if bounded else f"{SUBSET_FACTOR} x --max-states {max_states:,}"
        raise TooManyStatesError(
            f"determinising needs more than {limit:,} intermediate DFA states or {entries:,} "
            f"NFA states in their subsets ({bound}); "
            + ("lower --max-states or simplify the grammar" if bounded else "raise --max-states"))
    if status == 2:
        state, cls, first, second = (int(v) for v in conflict)
        text = _witness(trans, byte_class, state, cls).decode("utf-8", "backslashreplace")
        first_name, second_name = sorted((label_names[first], label_names[second]))
        error = AmbiguityError(f"ambiguous state machine: after {text!r} the state could be "
                               f"{first_name!r} or {second_name!r}; no text of a transition "
                               "may be read, or begin a longer text, by another path out of "
                               "the same state (end free text with a delimiter)")
        error.states = (first_name, second_name)
        raise error
    return trans, byte_class, accepting, labels if len(frag.labels) else None


def memory_budget() -> int:
    """Bytes one automaton construction may plan to use: half of the smaller of physical
    memory and the address-space limit (`ulimit -v`), where the platform tells them."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except ImportError:  # Windows
        pass
    return min(limits) // 2 if limits else 8 * 2 ** 30


def minimize(trans: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray,
             labels: np.ndarray | None = None, label_names: tuple[str, ...] = ()) -> ByteDFA:
    """Minimise a complete DFA whose state 0 is dead and state 1 the start; canonical result
    (one compiled kernel, `_core.minimize_dfa`).

    States that cannot reach acceptance fall into the dead state, so the result is trimmed as
    well. States with different `labels` are never merged. An empty language raises
    `GrammarError`.
    """
    trans, byte_class, accepting, rep, status = _core.minimize_dfa(
        np.ascontiguousarray(trans, dtype=np.int32), np.ascontiguousarray(byte_class,
                                                                          dtype=np.int32),
        np.ascontiguousarray(accepting, dtype=np.bool_),
        _NO_LABELS if labels is None else np.ascontiguousarray(labels, dtype=np.int32))
    if status:
        raise EmptyLanguageError("the grammar matches no string at all (its language is empty)")
    if labels is None:
        return ByteDFA(trans, byte_class, accepting)
    state_labels = np.asarray(labels, dtype=np.int32)[rep]
    state_labels[0] = -1  # the dead state; every other one can reach acceptance
    return ByteDFA(trans, byte_class, accepting, state_labels, label_names)


def _witness(trans: np.ndarray, byte_class: np.ndarray, state: int, cls: int) -> bytes:
    """Bytes leading from the start to `state` and then over a byte of class `cls` (none when
    `state` is -1: the start state itself)."""
    if state < 0:
        return b""
    _, first_byte = np.unique(byte_class, return_index=True)
    parent = {1: (-1, -1)}
    queue = [1]
    for s in queue:
        if s == state:
            break
        for c in range(trans.shape[1]):
            t = int(trans[s, c])
            if t not in parent:
                parent[t] = (s, c)
                queue.append(t)
    path = [cls]
    s = state
    while parent[s][0] != -1:
        s, c = parent[s]
        path.append(c)
    return bytes(int(first_byte[c]) for c in reversed(path))


def _byte_classes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Split 0..255 into the coarsest intervals no edge range cuts."""
    cuts = np.zeros(257, np.bool_)
    cuts[0] = True
    cuts[lo] = True
    cuts[hi + 1] = True
    return (np.cumsum(cuts[:256]) - 1).astype(np.int32)


def _csr(n: int, src: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, np.ascontiguousarray(cols[order], dtype=np.int32)
