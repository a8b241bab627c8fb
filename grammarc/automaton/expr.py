"""The expression tree every front end produces: sets of characters, concatenation, union and
bounded or unbounded repetition.

It is the one currency between front ends and the automaton builder, so a front end never
goes through a regex string. Intersection and complement are not tree nodes: they are computed
on DFAs (`automaton.products`) and come back as an `Automaton` leaf. Characters are Unicode code
points; surrogates (U+D800..U+DFFF) cannot appear in UTF-8 text and are left out of every set.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Union

import numpy as np

from ..charsets import MAX_CODE_POINT, SURROGATES, complement_ranges, normalize_ranges
from .bytedfa import ByteDFA


@dataclass(frozen=True)
class CharSet:
    """One character out of a set, stored as sorted, disjoint, non-adjacent inclusive ranges."""

    ranges: tuple[tuple[int, int], ...]


_comparison = threading.local()  # the pairs of nodes found equal in this thread's comparison


class _CachedHash:
    """Hashes a tree node once: `alt` deduplicates options in a dict, and the same subtree
    is an option of many unions. Compares two nodes once per comparison too: a tree shares
    subtrees (the sets of keys of an object in any order: 2^n nodes, n! paths), so two equal
    trees built apart are compared node by node, each pair of nodes once, not path by path.
    A subclass assigns `__hash__ = _CachedHash.__hash__` and `__eq__ = _CachedHash.__eq__`
    in its body, so that `@dataclass(frozen=True)` keeps them instead of generating its own."""

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((type(self).__name__, *(getattr(self, f) for f in self._fields)))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self) or hash(self) != hash(other):
            return False
        equal_pairs = getattr(_comparison, "equal_pairs", None)
        outermost = equal_pairs is None
        if outermost:
            equal_pairs = _comparison.equal_pairs = set()
        try:
            pair = (id(self), id(other))
            if pair in equal_pairs:
                return True
            equal = all(getattr(self, f) == getattr(other, f) for f in self._fields)
            if equal:
                equal_pairs.add(pair)  # both stay alive for the comparison: ids hold
            return equal
        finally:
            if outermost:
                _comparison.equal_pairs = None

    def __getstate__(self) -> dict:  # string hashes differ between processes
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


@dataclass(frozen=True)
class Concat(_CachedHash):
    """The parts one after the other. `Concat(())` is the empty string."""

    parts: tuple["Expr", ...]
    _fields = ("parts",)
    __hash__ = _CachedHash.__hash__
    __eq__ = _CachedHash.__eq__


@dataclass(frozen=True)
class Alt(_CachedHash):
    """Any one of the options."""

    options: tuple["Expr", ...]
    _fields = ("options",)
    __hash__ = _CachedHash.__hash__
    __eq__ = _CachedHash.__eq__


@dataclass(frozen=True)
class Repeat(_CachedHash):
    """`item` repeated from `min` to `max` times; `max=None` means without bound.

    A `counted` repeat is the same language, marked for a count register: as the body of a
    machine (a literal prefix, this repeat, a suffix; see `counters.counter_form`) its count
    is kept in the machine's frame at run time instead of one copy of `item` per count. Its
    item must be a prefix code (one character in any spelling), so every return to the loop
    state ends exactly one repetition. Anywhere else it is an ordinary repeat."""

    item: "Expr"
    min: int
    max: int | None
    counted: bool = False
    _fields = ("item", "min", "max", "counted")
    __hash__ = _CachedHash.__hash__
    __eq__ = _CachedHash.__eq__


@dataclass(frozen=True)
class Graph:
    """A state machine with named nodes: the strings that spell a path of edges from `start`
    to a node in `accepting`, each edge reading one string of its label's language.

    The automaton built from it keeps the names: every DFA state knows which node the text
    read so far has reached (an edge's label is read while still in its source node), and
    determinisation fails when a text can reach two different nodes (see `build_dfa`).
    """

    names: tuple[str, ...]                          # node i is called names[i]
    start: int
    accepting: tuple[int, ...]
    edges: tuple[tuple[int, int, "Expr"], ...]      # (source node, target node, label)


@dataclass(frozen=True, eq=False)
class Automaton:
    """A language given by an already built byte DFA (the result of a boolean operation).
    Compared and hashed by identity.

    A truncated automaton stands for a recursive language cut at some depth of nesting (an
    under-approximation): `exact_to` is the nesting depth, counted from its own start, up to
    which its texts are exactly those of the language it stands for (see `automaton.products`);
    None for an automaton that is exact.

    `calls` are edges beside the DFA's own, each reading a text of its expression from one
    state to another: a product that kept its operands' calls (`automaton.products`) links its
    states by `Call`s so; replacing them (`callgraph.replace_calls`) may put any expression
    there."""

    dfa: ByteDFA
    exact_to: int | None = None
    calls: tuple[tuple[int, "Expr", int], ...] = ()

    @property
    def truncated(self) -> bool:
        return self.exact_to is not None


@dataclass(frozen=True)
class Call:
    """The language of the machine `name` of a `MachineSet`, run as a sub-automaton with its
    own frame on a stack (so it may call itself: recursion of any depth)."""

    name: str


@dataclass(frozen=True, eq=False)
class CountedText:
    """The texts of `texts` that are also texts of `lengths`, a counter form (a literal
    prefix, a counted `Repeat` of one character, a suffix; `counters.counter_form`): as the
    body of a machine, `texts`' DFA with the characters counted at run time, so a pattern
    with a long `maxLength` is not a product of its states and the lengths
    (`counters.dfa_with_counter`). Anywhere else it is that product, built when first needed
    (`exact`), within `max_states`. Compared and hashed by identity."""

    texts: Automaton
    lengths: Expr

    def exact(self, max_states: int) -> "Expr":
        """The intersection as an `Automaton` (`NOTHING` if empty; `TooManyStatesError` past
        `max_states`), kept for the last `max_states` asked."""
        found = self.__dict__.get("_exact")
        if found is None or found[0] != max_states:
            from .products import Ops  # the products build on this module
            found = (max_states, Ops(max_states).intersect(self.texts, self.lengths))
            object.__setattr__(self, "_exact", found)
        return found[1]


Expr = Union[CharSet, Concat, Alt, Repeat, Automaton, Graph, Call, CountedText]


@dataclass(frozen=True)
class MachineSet:
    """A grammar as machines linked by calls: `root` and the named machines its `Call`s (and
    theirs) refer to. Front ends return one where a sub-grammar is recursive or shared."""

    root: Expr
    machines: tuple[tuple[str, Expr], ...]
    # the flat under-approximation to use when the calls cannot be decided by the next byte
    # (None: `linking.inline_calls`); it issues its own notice
    unrolled: Callable[[], Expr] | None = field(default=None, compare=False)
    # other machines for the same language, tried before `unrolled`
    alternative: Callable[[], MachineSet] | None = field(default=None, compare=False)

EMPTY = Concat(())
NOTHING = CharSet(())


def charset(ranges: Iterable[tuple[int, int]]) -> CharSet:
    """A character set from possibly overlapping ranges."""
    return CharSet(normalize_ranges(ranges))


def byte_string(data: bytes) -> Automaton:
    """The language of one byte string that need not be UTF-8 text (the bytes of a token a
    grammar names), as a minimal DFA: a chain of states, one class per distinct byte."""
    byte_class = np.zeros(256, np.int32)
    distinct = sorted(set(data))
    byte_class[distinct] = np.arange(1, len(distinct) + 1)
    trans = np.zeros((len(data) + 2, len(distinct) + 1), np.int32)
    trans[np.arange(1, len(data) + 1), byte_class[list(data)]] = np.arange(2, len(data) + 2)
    accepting = np.zeros(len(data) + 2, bool)
    accepting[-1] = True
    return Automaton(ByteDFA(trans, byte_class, accepting))


def literal(text: str) -> Expr:
    """The exact string `text`."""
    return concat(*(CharSet(((ord(c), ord(c)),)) for c in text))


def concat(*parts: Expr) -> Expr:
    """Concatenation, flattened; the empty language absorbs everything."""
    flat: list[Expr] = []
    for part in parts:
        if part == NOTHING:
            return NOTHING
        if isinstance(part, Concat):
            flat.extend(part.parts)
        else:
            flat.append(part)
    return flat[0] if len(flat) == 1 else Concat(tuple(flat))


def alt(*options: Expr) -> Expr:
    """Union, flattened, without empty-language options or repeats."""
    unique: dict[Expr, None] = {}  # insertion-ordered set: linear in the options
    for option in options:
        items = option.options if isinstance(option, Alt) else (option,)
        for item in items:
            if item != NOTHING:
                unique.setdefault(item)
    flat = list(unique)
    if not flat:
        return NOTHING
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(item: Expr, lo: int, hi: int | None) -> Expr:
    """`item{lo,hi}` with the trivial cases folded."""
    if hi is not None and hi < lo:
        return NOTHING
    if hi == 0 or item == EMPTY:
        return EMPTY
    if item == NOTHING:
        return EMPTY if lo == 0 else NOTHING
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


def exact_to(expr: Expr) -> int | None:
    """The nesting depth up to which `expr` is exact: the least `exact_to` of its truncated
    automata (each counted from its own start, so at least this from the start of `expr`);
    None if it holds none. The answer is kept on each node: trees are immutable and asked
    again and again."""
    cached = expr.__dict__.get("_exact_to", False)
    if cached is False:
        if isinstance(expr, Automaton) and not expr.calls:
            cached = expr.exact_to
        else:
            if isinstance(expr, Automaton):
                children = tuple(edge for _, edge, _ in expr.calls)
            elif isinstance(expr, Concat):
                children = expr.parts
            elif isinstance(expr, Alt):
                children = expr.options
            elif isinstance(expr, Repeat):
                children = (expr.item,)
            elif isinstance(expr, Graph):
                children = tuple(label for _, _, label in expr.edges)
            else:
                children = ()
            depths = [d for d in map(exact_to, children) if d is not None]
            if isinstance(expr, Automaton) and expr.exact_to is not None:
                depths.append(expr.exact_to)
            cached = min(depths) if depths else None
        object.__setattr__(expr, "_exact_to", cached)
    return cached


def fingerprint(expr: Expr) -> int:
    """A hash of how the tree spells its language, automata seen by content (`hash(expr)`
    sees them by identity): trees that are the same but for the identity of their automata
    have equal fingerprints, and `same_spelling` tells them from a collision. Kept on each
    node, so a tree with shared subtrees is read once."""
    cached = expr.__dict__.get("_fingerprint")
    if cached is None:
        if isinstance(expr, (CharSet, Call)):
            cached = hash(expr)
        elif isinstance(expr, Concat):
            cached = hash(("concat", *map(fingerprint, expr.parts)))
        elif isinstance(expr, Alt):
            cached = hash(("alt", *map(fingerprint, expr.options)))
        elif isinstance(expr, Repeat):
            cached = hash(("repeat", fingerprint(expr.item), expr.min, expr.max, expr.counted))
        elif isinstance(expr, Graph):
            cached = hash(("graph", expr.names, expr.start, expr.accepting,
                           *((a, b, fingerprint(label)) for a, b, label in expr.edges)))
        elif isinstance(expr, CountedText):
            cached = hash(("counted", fingerprint(expr.texts), fingerprint(expr.lengths)))
        else:
            dfa = expr.dfa
            cached = hash(("automaton", *map(_array_key, _dfa_arrays(dfa)), dfa.label_names,
                           expr.exact_to, *((a, fingerprint(e), b) for a, e, b in expr.calls)))
        object.__setattr__(expr, "_fingerprint", cached)
    return cached


def same_spelling(a: Expr, b: Expr, agreed: set[tuple[int, int]] | None = None) -> bool:
    """Whether two trees spell their language the same way, automata compared by content:
    the check behind equal `fingerprint`s (each pair of nodes is compared once). `agreed`:
    the pairs of nodes (by `id`) found alike so far, for a caller that compares many trees
    sharing subtrees while they all stay alive; it grows with the pairs found here."""
    agreed = set() if agreed is None else agreed

    def same(x: Expr, y: Expr) -> bool:
        if x is y or (id(x), id(y)) in agreed:
            return True
        if type(x) is not type(y) or fingerprint(x) != fingerprint(y):
            return False
        if isinstance(x, (Concat, Alt)):
            ours, theirs = (x.parts, y.parts) if isinstance(x, Concat) else (x.options,
                                                                              y.options)
            equal = len(ours) == len(theirs) and all(map(same, ours, theirs))
        elif isinstance(x, Repeat):
            equal = (x.min, x.max, x.counted) == (y.min, y.max, y.counted) and \
                same(x.item, y.item)
        elif isinstance(x, Graph):
            equal = (x.names, x.start, x.accepting, [e[:2] for e in x.edges]) == \
                (y.names, y.start, y.accepting, [e[:2] for e in y.edges]) and \
                all(same(e[2], f[2]) for e, f in zip(x.edges, y.edges))
        elif isinstance(x, CountedText):
            equal = same(x.texts, y.texts) and same(x.lengths, y.lengths)
        elif isinstance(x, Automaton):
            ours, theirs = _dfa_arrays(x.dfa), _dfa_arrays(y.dfa)
            equal = (x.exact_to, x.dfa.label_names, [(p, q) for p, _, q in x.calls]) == \
                (y.exact_to, y.dfa.label_names, [(p, q) for p, _, q in y.calls]) and \
                all(o is t or (o is not None and t is not None and o.shape == t.shape and
                               np.array_equal(o, t)) for o, t in zip(ours, theirs)) and \
                all(same(e[1], f[1]) for e, f in zip(x.calls, y.calls))
        else:
            equal = x == y
        if equal:
            agreed.add((id(x), id(y)))
        return equal

    try:
        return same(a, b)
    finally:
        del same  # a recursive closure is a cycle: free it now


def _dfa_arrays(dfa: ByteDFA) -> tuple[np.ndarray | None, ...]:
    return dfa.trans, dfa.byte_class, dfa.accepting, dfa.labels


def _array_key(array: np.ndarray | None) -> tuple | None:
    return None if array is None else (array.shape, np.ascontiguousarray(array).tobytes())


def nullable(expr: Expr) -> bool:
    """Whether the language contains the empty string."""
    if isinstance(expr, CharSet):
        return False
    if isinstance(expr, Concat):
        return all(nullable(part) for part in expr.parts)
    if isinstance(expr, Alt):
        return any(nullable(option) for option in expr.options)
    if isinstance(expr, Repeat):
        return expr.min == 0 or nullable(expr.item)
    if isinstance(expr, Automaton):
        return bool(expr.dfa.num_states > 1 and expr.dfa.accepting[1])
    if isinstance(expr, CountedText):
        return nullable(expr.texts) and nullable(expr.lengths)
    reached, todo = {expr.start}, [expr.start]  # a Graph: nodes reached by empty labels
    while todo:
        node = todo.pop()
        for src, dst, label in expr.edges:
            if src == node and dst not in reached and nullable(label):
                reached.add(dst)
                todo.append(dst)
    return any(node in reached for node in expr.accepting)


__all__ = [  # the range helpers are re-exported: front ends import them from here
    "EMPTY", "MAX_CODE_POINT", "NOTHING", "SURROGATES", "Alt", "Automaton", "Call", "CharSet",
    "Concat", "CountedText", "Expr", "Graph", "MachineSet", "Repeat", "alt", "charset", "complement_ranges",
    "concat", "exact_to", "fingerprint", "literal", "normalize_ranges", "nullable", "repeat",
    "same_spelling",
]
