"""Calls of machines in expression trees: the call codes that spell a `Call(name)` as bytes
inside a DFA, the call graph (who calls whom, replacing calls), and the bytes a text can start
with, looked up through calls.

Each machine is compiled to a minimal byte DFA on its own, with every `Call(name)` spelled as
a *call code*: the byte 0xFF and digits from bytes that never occur in UTF-8 text (0xFE
excepted: it marks tokens named in a grammar, `tokenizers.special`), so the
ordinary NFA and DFA construction handles calls like any other edge. The codes are then read
back out of the DFA as call edges `(state, machine, return state)` (`code_paths`).
"""

from __future__ import annotations

from typing import Callable, Collection, Hashable, Iterable, Mapping, TypeVar

import numpy as np

from .. import _core
from .bytedfa import ByteDFA
from .expr import (
    NOTHING, Alt, Automaton, Call, CharSet, Concat, CountedText, Expr, Graph, Repeat, alt, concat,
    repeat,
)


CALL_PREFIX = 0xFF
CALL_DIGITS = bytes([0xC0, 0xC1, *range(0xF5, 0xFE)])  # never in UTF-8 text, like 0xFF
CODE_BYTES = np.array([CALL_PREFIX, *CALL_DIGITS])  # every byte a call code uses
DIGIT_BYTES = CODE_BYTES[1:]  # the digits, as an array

Node = TypeVar("Node", bound=Hashable)


def call_codes(names: list[str]) -> dict[str, bytes]:
    """A fixed-width code per machine name: 0xFF, then base-11 digits from CALL_DIGITS."""
    width = 1
    while len(CALL_DIGITS) ** width < len(names):
        width += 1
    codes = {}
    for index, name in enumerate(names):
        digits = []
        for _ in range(width):
            index, digit = divmod(index, len(CALL_DIGITS))
            digits.append(CALL_DIGITS[digit])
        codes[name] = bytes([CALL_PREFIX, *digits])
    return codes


def code_paths(trans: np.ndarray, byte_class: np.ndarray,
               width: int) -> list[tuple[int, bytes, int]]:
    """The call codes of `width` digits spelled in a DFA (`trans[state, byte_class[byte]]`):
    (state, code, the state after it)."""
    prefix = byte_class[CALL_PREFIX]
    digit_class = byte_class[DIGIT_BYTES]
    # the walks under way, all at once: where each started, where it is, its digits so far
    start = np.flatnonzero(trans[:, prefix])
    at = trans[start, prefix]
    digits = np.zeros((len(start), 0), np.int64)
    for _ in range(width):
        walk, digit = np.nonzero(trans[at][:, digit_class])  # walks, then digits, in order
        start, digits = start[walk], np.column_stack([digits[walk], digit])
        at = trans[at[walk], digit_class[digit]]
    spelled = DIGIT_BYTES.astype(np.uint8)[digits]
    return [(state, bytes([CALL_PREFIX]) + code.tobytes(), ret)
            for state, code, ret in zip(start.tolist(), spelled, at.tolist())]


def without_codes(dfa: ByteDFA) -> ByteDFA:
    """The DFA with no transition on a byte of a call code (those get a class of their own,
    with no transition)."""
    byte_class = dfa.byte_class.copy()
    byte_class[CODE_BYTES] = dfa.num_classes
    trans = np.zeros((dfa.num_states, dfa.num_classes + 1), np.int32)
    trans[:, :-1] = dfa.trans
    return ByteDFA(trans, byte_class, dfa.accepting)


def replace_calls(expr: Expr, replacement: Callable[[str], Expr],
                  names: Collection[str] | None = None) -> Expr:
    """`expr` with every `Call(name)` replaced by `replacement(name)` (shared subtrees
    rebuilt once; a tree whose calls are all replaced by equal calls comes back as it is, so
    that what was built from it by identity is found again). With `names`, only those calls
    are replaced, and subtrees that call none of them are not walked."""
    memo: dict[int, Expr] = {}
    wanted = None if names is None else frozenset(names)

    def walk(node: Expr) -> Expr:
        done = memo.get(id(node))
        if done is not None:
            return done
        if wanted is not None and wanted.isdisjoint(_calls_below(node)):
            out = node
        elif isinstance(node, Call):
            out = replacement(node.name)
            out = node if out == node else out
        elif isinstance(node, Concat):
            parts = [walk(p) for p in node.parts]
            same = all(a is b for a, b in zip(parts, node.parts))
            out = node if same else concat(*parts)
        elif isinstance(node, Alt):
            options = [walk(o) for o in node.options]
            same = all(a is b for a, b in zip(options, node.options))
            out = node if same else alt(*options)
        elif isinstance(node, Repeat):
            item = walk(node.item)
            out = node if item is node.item else repeat(item, node.min, node.max)
        elif isinstance(node, Graph):
            edges = tuple((a, b, walk(e)) for a, b, e in node.edges)
            same = all(new[2] is old[2] for new, old in zip(edges, node.edges))
            out = node if same else Graph(node.names, node.start, node.accepting, edges)
        elif isinstance(node, Automaton) and node.calls:
            calls = tuple((a, walk(e), b) for a, e, b in node.calls)
            same = all(new[1] is old[1] for new, old in zip(calls, node.calls))
            out = node if same else Automaton(node.dfa, node.exact_to, calls)
        else:
            out = node
        memo[id(node)] = out
        return out

    try:
        return walk(expr)
    finally:
        del walk  # a recursive closure is a cycle: free it now


def called_names(expr: Expr) -> set[str]:
    """The machines `expr` calls directly."""
    return set(_calls_below(expr))


_NO_CALLS: frozenset[str] = frozenset()


def _calls_below(node: Expr) -> frozenset[str]:
    """The machines `node` calls, kept on each node (trees are immutable, and the same
    subtrees are asked about again and again while machines are linked)."""
    cached = node.__dict__.get("_called")
    if cached is None:
        if isinstance(node, Call):
            cached = frozenset((node.name,))
        else:
            if isinstance(node, (Concat, Alt)):
                children = node.parts if isinstance(node, Concat) else node.options
            elif isinstance(node, Repeat):
                children = (node.item,)
            elif isinstance(node, Graph):
                children = tuple(edge for _, _, edge in node.edges)
            elif isinstance(node, Automaton):
                children = tuple(edge for _, edge, _ in node.calls)
            else:
                children = ()
            below = [_calls_below(child) for child in children]
            below = [names for names in below if names]
            cached = _NO_CALLS if not below else below[0] if len(below) == 1 else \
                frozenset().union(*below)
        object.__setattr__(node, "_called", cached)
    return cached


def reachable_machines(names: set[str], bodies: dict[str, Expr]) -> set[str]:
    """The machines `names` and every machine they call, directly or through others."""
    reached, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(called_names(bodies[name]))
    return reached


def strongly_connected(graph: Mapping[Node, Iterable[Node]]) -> list[list[Node]]:
    """The strongly connected components of `graph` (node -> successors), each after the
    components it reaches (Tarjan's algorithm, iterative: call graphs may be deep)."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    on_stack: set[Node] = set()
    stack: list[Node] = []
    out: list[list[Node]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    out.append(members)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def is_cyclic(members: list[Node], graph: Mapping[Node, Collection[Node]]) -> bool:
    """Whether a strongly connected component of `graph` holds a cycle."""
    return len(members) > 1 or members[0] in graph[members[0]]


def recursive_machines(bodies: dict[str, Expr]) -> set[str]:
    """The machines that can call themselves, directly or through others."""
    return {name for name, body in bodies.items()
            if name in reachable_machines(called_names(body) & bodies.keys(), bodies)}


def starting_bytes(expr: Expr, body_of: Callable[[str], Expr | None],
                   memo: dict | None = None,
                   first_of: Callable[[str], np.ndarray | None] | None = None
                   ) -> np.ndarray | None:
    """The bytes a text of `expr` can start with (bool [256]), or None when `expr` may match
    the empty text or the answer is not known (a call of a machine `body_of` does not know
    and `first_of` gives no bytes for, left recursion, a `Graph`, a truncated automaton):
    languages with disjoint starting bytes are disjoint. `first_of(name)` may give a superset
    of the bytes a machine whose body is not known yet starts with (its texts not empty), so
    the answer may be a superset too. `memo` keeps the answers of subtrees for later
    questions about the same tree."""
    memo = {} if memo is None else memo
    open_calls: set[str] = set()

    def walk(node: Expr) -> tuple[np.ndarray, bool] | None:  # (bytes, may be empty)
        key = id(node)
        if key in memo:
            return memo[key]
        out: tuple[np.ndarray, bool] | None
        if isinstance(node, CharSet):
            first = np.zeros(256, bool)
            for sequence in _core.utf8_sequences(node.ranges):
                first[sequence[0][0]:sequence[0][1] + 1] = True
            out = (first, False)
        elif isinstance(node, Automaton):
            # a truncated one stands for more than its texts (deeper ones): never narrowed
            dfa = node.dfa
            out = None if node.truncated else (dfa.trans[1][dfa.byte_class] != 0,
                                               bool(dfa.accepting[1]))
            for edge in (edge for state, edge, _ in node.calls if state == 1):
                found = None if out is None else walk(edge)
                out = None if found is None or found[1] else (out[0] | found[0], out[1])
        elif isinstance(node, Concat):  # the parts up to the first that cannot be empty
            first, out = np.zeros(256, bool), None
            for part in node.parts:
                found = walk(part)
                if found is None:
                    break
                first |= found[0]
                if not found[1]:
                    out = (first, False)
                    break
            else:
                out = (first, True)
        elif isinstance(node, Alt):
            found_all = [walk(option) for option in node.options]
            out = None if any(f is None for f in found_all) else (
                np.logical_or.reduce([f[0] for f in found_all] or [np.zeros(256, bool)]),
                any(f[1] for f in found_all))
        elif isinstance(node, Repeat):
            found = walk(node.item)
            out = None if found is None else (found[0], found[1] or node.min == 0)
        elif isinstance(node, CountedText):  # a subset of its texts: their bytes or fewer
            out = walk(node.texts)
        elif isinstance(node, Call):
            body = body_of(node.name)
            hint = None if body is not None or first_of is None else first_of(node.name)
            if hint is not None:
                out = (hint, False)
            elif body is None or node.name in open_calls:
                out = None
            else:
                open_calls.add(node.name)
                out = walk(body)
                open_calls.discard(node.name)
        else:
            out = None
        memo[key] = out
        return out

    try:
        found = walk(expr)
    finally:
        del walk  # a recursive closure is a cycle: free it now
    return None if found is None or found[1] else found[0]


def with_first_bytes(expr: Expr, allowed: np.ndarray, body_of: Callable[[str], Expr | None],
                     call_with: Callable[[str], Expr | None],
                     first_of: Callable[[str], np.ndarray | None] | None = None
                     ) -> Expr | None:
    """The texts of `expr` whose first byte is in `allowed` (bool [256]), built by keeping the
    branches that start so, or None where the tree does not separate them (a part that may be
    empty, a character set or automaton that starts both ways). `call_with(name)` gives the
    same for a call whose machine starts both ways (a call of a narrower machine, or None);
    `first_of` is `starting_bytes`'."""
    memo: dict = {}  # every subtree's starting bytes, found once

    def walk(node: Expr) -> Expr | None:
        first = starting_bytes(node, body_of, memo, first_of)
        if first is not None and not (first & ~allowed).any():
            return node
        if first is not None and not (first & allowed).any():
            return NOTHING
        if isinstance(node, Alt):
            options = [walk(option) for option in node.options]
            return None if any(o is None for o in options) else alt(*options)
        if isinstance(node, Concat) and node.parts and first is not None:
            head = starting_bytes(node.parts[0], body_of, memo, first_of)
            if head is None:
                return None
            narrowed = walk(node.parts[0])
            return None if narrowed is None else concat(narrowed, *node.parts[1:])
        if isinstance(node, Call) and first is not None:
            return call_with(node.name)
        return None

    try:
        return walk(expr)
    finally:
        del walk  # a recursive closure is a cycle: free it now
