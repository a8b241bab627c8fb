"""Expression tree to byte-level NFA (Thompson construction; the builder is compiled,
csrc/nfa.cpp, and this module hands it the expression as a flat program).

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
the NFA grows with the DAG rather than with its unfolding into a tree. A concatenation is laid
out from its last part: a shared part ends where the part after it begins, and the part before
it ends in the copy's own entry, so two concatenations that end alike (a member value and the
rest of its object, after a comma or not) share one copy of their common end.

`flatten` numbers the DAG's nodes once (by identity, and equal subtrees built apart, such
as the bodies of machines inlined in several places, as one node: they then share copies
like any shared node, and the subset construction meets fewer equivalent NFA states) and
writes each as a kind, its children
and a small integer payload (a CharSet's code point ranges, a Repeat's bounds, a Graph's
nodes and edge ends, a Call's bytes, an Automaton's index into the fragments of its DFAs
and the ends of its calls);
the compiled builder finds the shared nodes by counting parents and lays everything out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from .. import _core
from ..errors import TooManyStatesError
from .expr import (
    Alt, Automaton, Call, CharSet, Concat, CountedText, Expr, Graph, Repeat, fingerprint,
    same_spelling,
)
from .signals import UnresolvedCallError

_EMPTY_TAGS = np.zeros((0, 3), np.int32)
_EMPTY_LABELS = np.zeros((0, 2), np.int32)
# node kinds of the flat program (csrc/nfa.cpp, enum Kind)
_CHARSET, _CONCAT, _ALT, _REPEAT, _AUTOMATON, _GRAPH, _CALL = range(7)


@dataclass(frozen=True)
class Fragment:
    """An NFA with entry state 0 and exit state 1."""

    num_states: int
    eps: np.ndarray    # int32 (k, 2): src, dst
    edges: np.ndarray  # int32 (k, 4): src, byte lo, byte hi, dst
    tags: np.ndarray = field(default_factory=lambda: _EMPTY_TAGS)  # (k, 3): state, family, rank
    num_families: int = 0
    labels: np.ndarray = field(default_factory=lambda: _EMPTY_LABELS)  # (k, 2): state, label


def build_nfa(expr: Expr, max_states: int,
              call_codes: dict[str, bytes] | None = None,
              dfa_states: int | None = None) -> tuple[Fragment, tuple[str, ...]]:
    """The NFA fragment of `expr` and the names of its labels (label i is names[i]).

    `call_codes` spells each `Call` as bytes no UTF-8 text contains (see callgraph.py); a call
    without one raises `UnresolvedCallError`. More than `max_states` NFA states raise
    `TooManyStatesError`, and so does a `CountedText` whose product needs more than
    `dfa_states` (default `max_states`); a nesting too deep for the builder raises
    `RecursionError`.
    """
    nodes, kind, children, extra, automata = flatten(
        expr, call_codes or {}, max_states if dfa_states is None else dfa_states)
    counts = [max(node.min, node.max or 0) for node in nodes if isinstance(node, Repeat)]
    if counts and max(counts) > max_states:  # a copy of the item per count: past the bound,
        raise TooManyStatesError(  # and past what the builder's 32-bit counts hold
            f"the automaton needs more than {max_states:,} NFA states (raise --max-states, "
            "or bound the repetitions)")
    child_ptr = np.zeros(len(kind) + 1, np.int64)
    np.cumsum([len(c) for c in children], out=child_ptr[1:])
    extra_ptr = np.zeros(len(kind) + 1, np.int64)
    np.cumsum([len(x) for x in extra], out=extra_ptr[1:])
    num_states, eps, edges, tags, num_families, labels, graph_order = _core.build_nfa(
        np.array(kind, np.int8), child_ptr, np.fromiter(chain.from_iterable(children), np.int32),
        extra_ptr, np.fromiter(chain.from_iterable(extra), np.int32), automata, 0, max_states)
    names = tuple(name for node in graph_order for name in nodes[node].names)
    return Fragment(num_states, eps, edges, tags, num_families, labels), names


def flatten(expr: Expr, call_codes: dict[str, bytes], max_states: int
            ) -> tuple[list[Expr], list[int], list[list[int]], list[list[int]], list[tuple]]:
    """The flat program of an expression DAG, root first: (nodes, kind, children, payload,
    automata fragments), one entry per distinct node (see the module docstring); nodes
    spelled alike (`expr.same_spelling`) are one node, except Graphs. A `CountedText` is its
    product, built within `max_states` DFA states."""
    index: dict[int, int] = {}
    by_spelling: dict[int, list[int]] = {}  # fingerprint -> the numbers of such nodes
    nodes: list[Expr] = []
    kind: list[int] = []
    children: list[list[int]] = []
    extra: list[list[int]] = []
    automata: list[tuple] = []
    agreed: set[tuple[int, int]] = set()  # pairs of nodes spelled alike (all alive till the end)

    def number(node: Expr) -> int:
        if isinstance(node, CountedText):  # kept alive by `node` (`_exact`): its id is its own
            node = node.exact(max_states)
        i = index.get(id(node))
        if i is not None:
            return i
        spelled = None if isinstance(node, Graph) else by_spelling.setdefault(
            fingerprint(node), [])  # a Graph's labels are its own
        i = next((j for j in spelled or () if same_spelling(nodes[j], node, agreed)), None)
        if i is None:
            i = len(nodes)
            nodes.append(node)
            if spelled is not None:
                spelled.append(i)
        index[id(node)] = i
        return i

    number(expr)
    for node in nodes:  # grows while it is walked: every node once, numbered when first met
        if isinstance(node, CharSet):
            kind.append(_CHARSET)
            children.append([])
            extra.append([v for pair in node.ranges for v in pair])
        elif isinstance(node, Concat):
            kind.append(_CONCAT)
            children.append([number(part) for part in node.parts])
            extra.append([])
        elif isinstance(node, Alt):
            kind.append(_ALT)
            children.append([number(option) for option in node.options])
            extra.append([])
        elif isinstance(node, Repeat):
            kind.append(_REPEAT)
            children.append([number(node.item)])
            extra.append([node.min, -1 if node.max is None else node.max])
        elif isinstance(node, Automaton):
            kind.append(_AUTOMATON)
            children.append([number(edge) for _, edge, _ in node.calls])
            extra.append([len(automata), *(end for src, _, dst in node.calls
                                           for end in (src, dst))])
            automata.append(_dfa_fragment(node.dfa))
        elif isinstance(node, Graph):
            kind.append(_GRAPH)
            children.append([number(label) for _, _, label in node.edges])
            extra.append([len(node.names), node.start, len(node.accepting), *node.accepting,
                          *(end for src, dst, _ in node.edges for end in (src, dst))])
        elif isinstance(node, Call):
            code = call_codes.get(node.name)
            if code is None:
                raise UnresolvedCallError(f"a call of machine {node.name!r} cannot be part of "
                                          "a flat automaton")
            kind.append(_CALL)
            children.append([])
            extra.append(list(code))
        else:
            raise TypeError(f"not an expression: {node!r}")
    return nodes, kind, children, extra, automata


def _dfa_fragment(dfa) -> tuple[int, np.ndarray, np.ndarray]:
    """A byte DFA as a fragment (num_states, eps, edges): a fresh entry leads to its start,
    its accepting states to a fresh exit (the DFA's own states may have incoming and outgoing
    edges). Kept on the DFA: the same leaves (a character's spellings) recur in every
    automaton built."""
    fragment = dfa.__dict__.get("_fragment")
    if fragment is None:
        fragment = _new_dfa_fragment(dfa)
        object.__setattr__(dfa, "_fragment", fragment)
    return fragment


def _new_dfa_fragment(dfa) -> tuple[int, np.ndarray, np.ndarray]:
    ptr, ranges, nxt = dfa.ranges()
    src = np.repeat(np.arange(dfa.num_states), np.diff(ptr))
    edges = np.stack([src + 1, ranges[:, 0], ranges[:, 1], nxt + 1], axis=1)
    edges = edges[src != 0].astype(np.int32)  # fragment state = DFA state + 1; drop the dead one
    accepting = np.flatnonzero(dfa.accepting) + 1
    eps = np.concatenate([[[0, 2]], np.stack([accepting, np.ones_like(accepting)], axis=1)])
    return dfa.num_states + 1, eps.astype(np.int32), edges
