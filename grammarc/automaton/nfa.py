"""Expression tree to byte-level NFA (Thompson construction, built from numpy fragments).

A fragment is a small NFA with local state 0 as its entry and local state 1 as its exit. The
construction keeps two invariants: no edge enters the entry and no edge leaves the exit. Under
them, fragments can be glued by sharing states instead of adding epsilon edges (concatenation
merges one exit with the next entry; alternation shares entry and exit), and a repeated item is
stamped out many times with one vectorised offset instead of being rebuilt per copy.

Edges are byte ranges `(src, lo, hi, dst)`; epsilon edges are `(src, dst)`.

Dominance tags `(state, family, rank)` mark states of the optional copies of a bounded repeat:
states of one family are the same position of the item in different copies, and the one of
lower rank accepts every continuation the other accepts (more copies may still follow it). The
subset construction uses them to keep only the lowest-ranked of such states in a subset, which
does not change the subset's language but stops `x{0,n}` of an item whose copies can overlap
from exploring every combination of copies.

Labels `(state, label)` name the node of a `Graph` that owns a state: the node's own state and
the inner states of the edges that leave it (`NFABuilder.label_names[label]` is the name). The
subset construction gives each DFA state the one label of its NFA states.

Front ends build expression *DAGs*: a sub-expression memoised by the front end is the tail of
several options (an object's remaining optional properties follow both "this property
present" and "this property absent"). Concatenations and unions are laid out inline in the
fragment being built, and a sub-expression referenced more than once is laid out once per
exit state: its other uses jump to that copy's dedicated entry by an epsilon edge. Uses that
end in the same state have the same continuation, so sharing the copy keeps the language, and
the NFA grows with the DAG rather than with its unfolding into a tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..errors import TooManyStatesError, UnresolvedCallError
from .expr import Alt, Automaton, Call, CharSet, Concat, Expr, Graph, Repeat
from .utf8 import utf8_sequences

_EMPTY_EPS = np.zeros((0, 2), np.int32)
_EMPTY_EDGES = np.zeros((0, 4), np.int32)
_EMPTY_TAGS = np.zeros((0, 3), np.int32)
_EMPTY_LABELS = np.zeros((0, 2), np.int32)


@dataclass(frozen=True)
class Fragment:
    """An NFA with entry state 0 and exit state 1."""

    num_states: int
    eps: np.ndarray    # int32 (k, 2): src, dst
    edges: np.ndarray  # int32 (k, 4): src, byte lo, byte hi, dst
    tags: np.ndarray = field(default_factory=lambda: _EMPTY_TAGS)  # (k, 3): state, family, rank
    num_families: int = 0
    labels: np.ndarray = field(default_factory=lambda: _EMPTY_LABELS)  # (k, 2): state, label


class _Stamper:
    """Accumulates copies of fragments into one global NFA numbering."""

    def __init__(self, first_free: int) -> None:
        self.next_free = first_free
        self.eps: list[np.ndarray] = []
        self.edges: list[np.ndarray] = []
        self.tags: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.next_family = 0
        self.char_edges: list[tuple[int, int, int, int]] = []  # written by `char`, no numpy
        self.eps_pairs: list[tuple[int, int]] = []  # written by `epsilon`, no numpy

    def char(self, ranges: tuple[tuple[int, int], ...], entry: int, exit_: int) -> None:
        """One character of the set from `entry` to `exit_` (cheaper than placing a fragment)."""
        for seq in utf8_sequences(ranges):
            src = entry
            for i, (lo, hi) in enumerate(seq):
                if i == len(seq) - 1:
                    dst = exit_
                else:
                    dst = self.next_free
                    self.next_free += 1
                self.char_edges.append((src, lo, hi, dst))
                src = dst

    def byte_path(self, data: bytes, entry: int, exit_: int) -> None:
        """The exact bytes `data` from `entry` to `exit_`."""
        src = entry
        for i, byte in enumerate(data):
            dst = exit_ if i == len(data) - 1 else self.new_state()
            self.char_edges.append((src, byte, byte, dst))
            src = dst

    def epsilon(self, src: int, dst: int) -> None:
        self.eps_pairs.append((src, dst))

    def new_state(self) -> int:
        self.next_free += 1
        return self.next_free - 1

    def new_states(self, count: int) -> np.ndarray:
        ids = np.arange(self.next_free, self.next_free + count, dtype=np.int32)
        self.next_free += count
        return ids

    def place(self, frag: Fragment, entries: np.ndarray, exits: np.ndarray) -> np.ndarray:
        """Place len(entries) copies of `frag`, copy i between entries[i] and exits[i].

        Returns the mapping `[copy, local state] -> global state`.
        """
        copies = len(entries)
        inner = frag.num_states - 2
        base = self.new_states(copies * inner).reshape(copies, inner) if inner else None
        mapping = np.empty((copies, frag.num_states), np.int32)
        mapping[:, 0] = entries
        mapping[:, 1] = exits
        if inner:
            mapping[:, 2:] = base
        if len(frag.eps):
            self.eps.append(np.stack([mapping[:, frag.eps[:, 0]], mapping[:, frag.eps[:, 1]]],
                                     axis=-1).reshape(-1, 2))
        if len(frag.edges):
            e = frag.edges
            block = np.empty((copies, len(e), 4), np.int32)
            block[:, :, 0] = mapping[:, e[:, 0]]
            block[:, :, 1] = e[:, 1]
            block[:, :, 2] = e[:, 2]
            block[:, :, 3] = mapping[:, e[:, 3]]
            self.edges.append(block.reshape(-1, 4))
        if len(frag.tags):
            t = frag.tags
            families = self.new_families(copies * frag.num_families).reshape(copies, -1)
            tags = np.empty((copies, len(t), 3), np.int32)
            tags[:, :, 0] = mapping[:, t[:, 0]]
            tags[:, :, 1] = families[:, t[:, 1]]
            tags[:, :, 2] = t[:, 2]
            self.tags.append(tags.reshape(-1, 3))
        if len(frag.labels):
            labels = np.empty((copies, len(frag.labels), 2), np.int32)
            labels[:, :, 0] = mapping[:, frag.labels[:, 0]]
            labels[:, :, 1] = frag.labels[:, 1]
            self.labels.append(labels.reshape(-1, 2))
        return mapping

    def new_families(self, count: int) -> np.ndarray:
        ids = np.arange(self.next_family, self.next_family + count, dtype=np.int32)
        self.next_family += count
        return ids

    def add_tags(self, states: np.ndarray, families: np.ndarray, ranks: np.ndarray) -> None:
        self.tags.append(np.stack([states, families, ranks], axis=-1).astype(np.int32).reshape(-1, 3))

    def add_labels(self, states: np.ndarray, label: int) -> None:
        self.labels.append(np.stack([states, np.full(len(states), label)], axis=-1)
                           .astype(np.int32).reshape(-1, 2))

    def add_eps(self, src: np.ndarray, dst: np.ndarray) -> None:
        self.eps.append(np.stack([src, dst], axis=-1).astype(np.int32).reshape(-1, 2))

    def fragment(self) -> Fragment:
        if self.char_edges:
            self.edges.append(np.array(self.char_edges, np.int32))
        if self.eps_pairs:
            self.eps.append(np.array(self.eps_pairs, np.int32))
        eps = np.concatenate(self.eps) if self.eps else _EMPTY_EPS
        edges = np.concatenate(self.edges) if self.edges else _EMPTY_EDGES
        tags = np.concatenate(self.tags) if self.tags else _EMPTY_TAGS
        labels = np.concatenate(self.labels) if self.labels else _EMPTY_LABELS
        return Fragment(self.next_free, eps, edges, tags, self.next_family, labels)


class NFABuilder:
    """Builds fragments for expression DAGs, reusing the fragment of a repeated subtree."""

    def __init__(self, max_states: int, call_codes: dict[str, bytes] | None = None) -> None:
        """`call_codes` spells each `Call` as bytes no UTF-8 text contains (see machines.py)."""
        self.max_states = max_states
        self.call_codes = call_codes or {}
        self._memo: dict[int, tuple[Expr, Fragment]] = {}
        self._walked: dict[int, Expr] = {}  # every node seen by `_count_parents`, by id
        self._shared: set[int] = set()  # ids of nodes with several parents
        self.label_names: list[str] = []  # label id -> name, for the Graph nodes built

    def build(self, expr: Expr) -> Fragment:
        self._count_parents(expr)
        key = id(expr)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is expr:
            return hit[1]
        if isinstance(expr, CharSet):
            frag = _charset_fragment(expr.ranges)
        elif isinstance(expr, Concat) and not expr.parts:
            frag = Fragment(2, np.array([[0, 1]], np.int32), _EMPTY_EDGES)
        elif isinstance(expr, (Concat, Alt)):
            stamper = _Stamper(2)
            self._lay_out(stamper, expr, 0, 1, {})
            frag = stamper.fragment()
        elif isinstance(expr, Repeat):
            frag = self._repeat(expr)
        elif isinstance(expr, Automaton):
            frag = _dfa_fragment(expr.dfa)
        elif isinstance(expr, Graph):
            frag = self._graph(expr)
        elif isinstance(expr, Call):
            stamper = _Stamper(2)
            self._lay_out(stamper, expr, 0, 1, {})
            frag = stamper.fragment()
        else:
            raise TypeError(f"not an expression: {expr!r}")
        self._check_size(frag.num_states)
        self._memo[key] = (expr, frag)
        return frag

    def _count_parents(self, root: Expr) -> None:
        """Mark the Concat/Alt nodes below `root` that more than one parent refers to."""
        if id(root) in self._walked:
            return
        self._walked[id(root)] = root
        stack = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, Concat):
                children = node.parts
            elif isinstance(node, Alt):
                children = node.options
            elif isinstance(node, Repeat):
                children = (node.item,)
            elif isinstance(node, Graph):
                children = tuple(label for _, _, label in node.edges)
            else:
                continue
            for child in children:
                if id(child) in self._walked:
                    self._shared.add(id(child))
                else:
                    self._walked[id(child)] = child  # kept alive, so ids stay unique
                    stack.append(child)

    def _check_size(self, num_states: int) -> None:
        if num_states > self.max_states:
            raise TooManyStatesError(
                f"the automaton needs more than {self.max_states:,} NFA states "
                "(raise --max-states, or bound the repetitions)")

    def _lay_out(self, stamper: _Stamper, expr: Expr, entry: int, exit_: int,
                 tails: dict[tuple[int, int], int]) -> None:
        """Lay `expr` out from `entry` to `exit_` in the stamper's fragment. `tails` maps
        (shared node, exit) to the dedicated entry of the copy already laid out."""
        if isinstance(expr, CharSet):
            stamper.char(expr.ranges, entry, exit_)
            return
        if isinstance(expr, Call):
            code = self.call_codes.get(expr.name)
            if code is None:
                raise UnresolvedCallError(f"a call of machine {expr.name!r} cannot be part of "
                                          "a flat automaton")
            stamper.byte_path(code, entry, exit_)
            return
        if not isinstance(expr, (Concat, Alt)):
            stamper.place(self.build(expr), np.array([entry], np.int32),
                          np.array([exit_], np.int32))
            return
        if id(expr) in self._shared:
            key = (id(expr), exit_)
            copy_entry = tails.get(key)
            if copy_entry is None:
                copy_entry = tails[key] = stamper.new_state()
                self._lay_out_inline(stamper, expr, copy_entry, exit_, tails)
            stamper.epsilon(entry, copy_entry)
            return
        self._lay_out_inline(stamper, expr, entry, exit_, tails)

    def _lay_out_inline(self, stamper: _Stamper, expr: Concat | Alt, entry: int, exit_: int,
                        tails: dict[tuple[int, int], int]) -> None:
        self._check_size(stamper.next_free)
        if isinstance(expr, Alt):
            for option in expr.options:
                self._lay_out(stamper, option, entry, exit_, tails)
            return
        if not expr.parts:
            stamper.epsilon(entry, exit_)
            return
        joint = entry
        for i, part in enumerate(expr.parts):
            nxt = exit_ if i == len(expr.parts) - 1 else stamper.new_state()
            self._lay_out(stamper, part, joint, nxt, tails)
            joint = nxt

    def _repeat(self, expr: Repeat) -> Fragment:
        item = self.build(expr.item)
        lo, hi = expr.min, expr.max
        optional = 0 if hi is None else hi - lo
        stamper = _Stamper(2)
        chain_len = lo + optional  # number of item copies laid in a chain
        self._check_size(2 + (chain_len + 1) * item.num_states)
        joints = np.concatenate([[0], stamper.new_states(chain_len)]).astype(np.int32)
        if chain_len:
            mapping = stamper.place(item, joints[:-1], joints[1:])
            if hi is not None:
                self._tag_optional_copies(stamper, mapping, joints, lo)
        if hi is None:
            # after the mandatory copies: a loop through fresh states, then the exit
            loop_in, loop_out = stamper.new_states(2)
            stamper.place(item, np.array([loop_in]), np.array([loop_out]))
            stamper.add_eps(np.array([joints[-1], loop_out, loop_in]),
                            np.array([loop_in, loop_in, 1]))
        else:
            # every joint from the last mandatory one on may leave for the exit
            stamper.add_eps(joints[lo:], np.ones(optional + 1, np.int32))
        return stamper.fragment()

    def _graph(self, expr: Graph) -> Fragment:
        """Node states joined by their edges' fragments; entry and exit reach them by epsilon
        edges, so no edge enters the entry even when an edge returns to the start node."""
        stamper = _Stamper(2)
        nodes = stamper.new_states(len(expr.names))
        labels = list(range(len(self.label_names), len(self.label_names) + len(nodes)))
        self.label_names.extend(expr.names)
        for node, label in zip(nodes, labels):
            stamper.add_labels(node[None], label)
        accepting = nodes[list(expr.accepting)]
        stamper.add_eps(np.concatenate([[0], accepting]),
                        np.concatenate([[nodes[expr.start]], np.ones(len(accepting), np.int32)]))
        for src, dst, label in expr.edges:
            first = stamper.next_free
            if isinstance(label, CharSet):
                stamper.char(label.ranges, int(nodes[src]), int(nodes[dst]))
            else:
                inner = self.build(label)
                if len(inner.labels):
                    raise ValueError("a Graph cannot be nested inside another Graph's edge")
                stamper.place(inner, nodes[src:src + 1], nodes[dst:dst + 1])
            # the edge's inner states belong to its source node
            stamper.add_labels(np.arange(first, stamper.next_free), labels[src])
        return stamper.fragment()

    @staticmethod
    def _tag_optional_copies(stamper: _Stamper, mapping: np.ndarray, joints: np.ndarray,
                             lo: int) -> None:
        """Dominance tags for a bounded repeat: copy c >= lo - 1 dominates later copies (after
        it, at least as many more copies may follow), and so does joint k >= lo. The entry
        (joint 0) is left out: it is shared with what comes before the repeat."""
        first = max(lo - 1, 0)
        copies = len(joints) - 1
        if copies - first >= 2 and mapping.shape[1] > 2:
            inner = mapping[first:, 2:]  # one family per position inside the item
            families = stamper.new_families(inner.shape[1])
            stamper.add_tags(inner, np.broadcast_to(families, inner.shape),
                             np.broadcast_to(np.arange(first, copies)[:, None], inner.shape))
        start = max(lo, 1)
        if len(joints) - start >= 2:
            family = stamper.new_families(1)[0]
            stamper.add_tags(joints[start:], np.full(len(joints) - start, family),
                             np.arange(start, len(joints)))


def _dfa_fragment(dfa) -> Fragment:
    """A byte DFA as a fragment: a fresh entry leads to its start, its accepting states to a
    fresh exit (the DFA's own states may have incoming and outgoing edges)."""
    ptr, ranges, nxt = dfa.ranges()
    src = np.repeat(np.arange(dfa.num_states), np.diff(ptr))
    edges = np.stack([src + 1, ranges[:, 0], ranges[:, 1], nxt + 1], axis=1)
    edges = edges[src != 0].astype(np.int32)  # fragment state = DFA state + 1; drop the dead one
    accepting = np.flatnonzero(dfa.accepting) + 1
    eps = np.concatenate([[[0, 2]], np.stack([accepting, np.ones_like(accepting)], axis=1)])
    return Fragment(dfa.num_states + 1, eps.astype(np.int32), edges)


@lru_cache(maxsize=4096)
def _charset_fragment(ranges: tuple[tuple[int, int], ...]) -> Fragment:
    """One character of the set, as UTF-8 byte-range chains from entry to exit."""
    stamper = _Stamper(2)
    stamper.char(ranges, 0, 1)
    return stamper.fragment()
