"""Machines linked by calls: a `MachineSet` to one byte-level pushdown automaton.

Each machine is compiled to a minimal byte DFA on its own, with every `Call(name)` spelled as
a *call code*: the byte 0xFF and digits from bytes that never occur in UTF-8 text (0xFE
excepted: it marks tokens named in a grammar, `tokenizers.special`), so the
ordinary NFA and DFA construction handles calls like any other edge. The codes are then read
back out of the DFA as call edges `(state, machine, return state)`, and the machines' states
are numbered in one table (dead 0, the root's start 1, then each machine's states).

The automaton reads a byte `b` in state `q` with a stack of return states by the first rule
that applies:

1. `q` has a transition on `b`: take it;
2. a call edge of `q` leads to a machine whose first bytes contain `b`: push its return state
   and read `b` from that machine's start;
3. `q` is final in its machine and the stack is not empty: pop a return state and read `b`
   from there;
4. otherwise the text has left the language.

The text may end where `q` and every return state on the stack are final. The rules are
exact only when they never have to choose, which `build_pushdown` checks (LL(1) at the byte
level): no machine accepts the empty text; at each state the bytes of its transitions and the
first bytes of its callees are disjoint; and in a final state, no byte that continues inside
the machine may also follow the machine at any of its call sites. A set of machines that fails
the check raises `NotDeterministicError` naming the machines at fault; `deterministic_pushdown`
calls the copies of a machine (equal DFAs) as one, inlines the machines at fault that do not
recurse and links again; when a recursive one is at fault,
`language_automaton` tries the front end's alternative machines, if it offers some, then falls
back to one flat automaton.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection

import numpy as np

from .. import _core
from ..errors import GrammarError, TooManyStatesError
from .bytedfa import ByteDFA
from .dfa import SUBSET_FACTOR, build_dfa
from .expr import (
    NOTHING, Alt, Automaton, Call, CharSet, Concat, Expr, Graph, MachineSet, Repeat, alt, concat,
    fingerprint, repeat, same_spelling,
)

CALL_PREFIX = 0xFF
CALL_DIGITS = bytes([0xC0, 0xC1, *range(0xF5, 0xFE)])  # never in UTF-8 text, like 0xFF
CODE_BYTES = np.array([CALL_PREFIX, *CALL_DIGITS])  # every byte a call code uses


class NotDeterministicError(GrammarError):
    """The machines' calls and returns cannot be decided by the next byte alone. `machines`
    names the machines whose inlining removes every conflict found (empty: none does)."""

    def __init__(self, message: str, machines: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.machines = machines


@dataclass(frozen=True)
class PushdownDFA:
    """Machines in one numbering: byte transitions, final states and call edges.

    `dfa.accepting[q]` means *final in its machine* (the root's final states are where the
    whole text may end, given an empty stack).
    """

    dfa: ByteDFA
    machine_names: tuple[str, ...]  # machine 0 is the root
    machine_start: np.ndarray       # int32 [M]
    state_machine: np.ndarray       # int32 [S] (the dead state: -1)
    call_ptr: np.ndarray            # int64 [S + 1]: call edges of q are call_ptr[q]..call_ptr[q+1]
    call_machine: np.ndarray        # int32 [C]
    call_return: np.ndarray         # int32 [C]
    first: np.ndarray               # bool [M, 256]: the bytes a machine's text can start with
    follow: np.ndarray              # bool [M, 256]: the bytes that may follow a machine's text
    counters: Counters

    @property
    def has_counters(self) -> bool:
        return bool(self.counters.loop.any())

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    def byte_table(self) -> np.ndarray:
        return self.dfa.byte_table()

    def accepts(self, data: bytes) -> bool:
        """Whether the whole text is in the language (the rules of the module docstring)."""
        table = self.byte_table()
        counters = self.counters
        q, stack, count = 1, [], 0
        for byte in data:
            while q:
                if table[q, byte]:
                    q, count = counters.step(q, int(table[q, byte]), count,
                                             int(self.state_machine[q]))
                    break
                calls = range(self.call_ptr[q], self.call_ptr[q + 1])
                k = next((k for k in calls if self.first[self.call_machine[k], byte]), None)
                if k is not None:
                    stack.append(int(self.call_return[k]))
                    q, count = int(self.machine_start[self.call_machine[k]]), 0
                elif self.dfa.accepting[q] and stack:
                    q = stack.pop()
                else:
                    q = 0
            if not q:
                return False
        return bool(self.dfa.accepting[q]) and all(self.dfa.accepting[r] for r in stack)


@dataclass(frozen=True)
class Counters:
    """Count registers of machines whose body is a counted repeat (`counter_form`).

    Machine m keeps a count when `loop[m]` (its loop state) is not 0: a transition out of the
    loop state into `in_loop` states starts one repetition (the count goes up and may not pass
    `count_max[m]`, -1 for no bound); one out of it to other states leaves the loop (the count
    must be at least `count_min[m]`). A counted machine calls no other.
    """

    loop: np.ndarray       # int32 [M]
    count_min: np.ndarray  # int64 [M]
    count_max: np.ndarray  # int64 [M]
    in_loop: np.ndarray    # bool [S]: the loop state and the states inside one repetition

    def step(self, q: int, nxt: int, count: int, machine: int) -> tuple[int, int]:
        """(next state, count) of the transition q -> nxt in `machine`; (0, 0) if the count
        forbids it. Outside counted machines the count stays 0."""
        if machine < 0 or q != self.loop[machine]:
            return (nxt, count if self.in_loop[nxt] else 0)
        if self.in_loop[nxt]:
            bound = int(self.count_max[machine])
            return (0, 0) if 0 <= bound <= count else (nxt, count + 1)
        return (nxt, 0) if count >= self.count_min[machine] else (0, 0)


def counter_form(body: Expr) -> tuple[tuple[Expr, ...], bytes, Repeat, Expr] | None:
    """(prefix, its bytes, counted repeat, suffix) of a machine body made of one literal
    byte, a counted `Repeat` and a suffix, none of them calling, or None. The prefix is the
    byte that opens the machine's call, so a token that starts repetitions from outside the
    loop opens the call too and its count is that of the frame it pushes (a longer prefix
    would leave such tokens to the machine's own table, which keeps no count)."""
    if not isinstance(body, Concat):
        return None
    at = next((i for i, p in enumerate(body.parts)
               if isinstance(p, Repeat) and p.counted), None)
    if at != 1 or not all(isinstance(p, CharSet) and len(p.ranges) == 1 and
                          p.ranges[0][0] == p.ranges[0][1] < 0x80 for p in body.parts[:at]):
        return None
    prefix = body.parts[:at]
    suffix = concat(*body.parts[at + 1:])
    if called_names(body.parts[at].item) or called_names(suffix):
        return None
    spelled = "".join(chr(p.ranges[0][0]) for p in prefix).encode()
    return prefix, spelled, body.parts[at], suffix


def with_counted_repeat(body: Expr, longer_than: int, most: int) -> Expr | None:
    """`body` with its first repeat marked counted (`Repeat.counted`) when that makes a counter
    form whose repeat reads one character of a set per repetition (UTF-8 is a prefix code;
    the JSON front end's sets are single bytes, other spellings being alternatives) and is
    bounded past `longer_than` (at most `most`); None otherwise."""
    if not isinstance(body, Concat):
        return None
    at = next((i for i, p in enumerate(body.parts) if isinstance(p, Repeat)), None)
    if at is None:
        return None
    node = body.parts[at]
    bound = node.min if node.max is None else node.max
    if not isinstance(node.item, CharSet) or not longer_than < bound <= most:
        return None
    marked = Concat((*body.parts[:at], Repeat(node.item, node.min, node.max, counted=True),
                     *body.parts[at + 1:]))
    return marked if counter_form(marked) is not None else None


def _counter_dfa(body: Expr, counted: bool, max_states: int,
                 codes: dict[str, bytes]) -> tuple[ByteDFA, tuple | None]:
    """The DFA of a machine body; if `counted` and the body has a counter form whose loop the
    next byte tells from its exit, the DFA of its unbounded loop and the counter (loop state,
    min, max, in-loop states); otherwise the body with its bounds, and None."""
    form = counter_form(body) if counted else None
    if form is not None:
        prefix, spelled, repeat_node, suffix = form
        item_first = starting_bytes(repeat_node.item, lambda name: None)
        exit_first = starting_bytes(suffix, lambda name: None)
        if item_first is None or exit_first is None or (item_first & exit_first).any():
            form = None
    if form is None:
        return build_dfa(body, max_states=max_states, call_codes=codes), None
    loop_body = concat(*prefix, Repeat(repeat_node.item, 0, None), suffix)
    dfa = build_dfa(loop_body, max_states=max_states, call_codes=codes)
    table = dfa.byte_table()
    loop = 1
    for byte in spelled:
        loop = int(table[loop, byte])
    in_loop = np.zeros(len(table), bool)
    in_loop[loop] = True
    todo = [int(t) for t in np.unique(table[loop][item_first]) if t]
    while todo:  # the states inside one repetition: until the walk is back at the loop
        q = todo.pop()
        if not in_loop[q]:
            in_loop[q] = True
            todo.extend(int(t) for t in np.unique(table[q]) if t and t != loop)
    if in_loop[np.unique(table[loop][exit_first])].any() or dfa.accepting[in_loop].any():
        raise AssertionError("the item of a counted repeat must be a prefix code")
    bound = -1 if repeat_node.max is None else repeat_node.max
    return dfa, (loop, repeat_node.min, bound, in_loop)


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


def build_pushdown(machines: MachineSet, max_states: int,
                   built: dict[tuple, tuple] | None = None,
                   codes: dict[str, bytes] | None = None) -> PushdownDFA:
    """The pushdown automaton of a machine set; `NotDeterministicError` when the next byte
    cannot decide between a machine's own transitions, its calls and its return. A machine
    whose DFA is the root's (a copy of it, such as a schema's `$ref: "#"`) is the root,
    called: its states are in the table once. `built` keeps each body's DFA and counter (by
    its spelling) for a later call with the same `codes` (call codes of a superset of the
    machines)."""
    codes = call_codes(["", *(name for name, _ in machines.machines)]) if codes is None \
        else codes
    built = {} if built is None else built
    root = _built_dfa(machines.root, False, max_states, built, codes)  # it keeps no count
    hits, names, code_of = [root], [""], {codes[""]: 0}
    for name, body in machines.machines:
        hit = _built_dfa(body, True, max_states, built, codes)
        if hit[3] == root[3]:
            code_of[codes[name]] = 0
            continue
        code_of[codes[name]] = len(names)
        hits.append(hit)
        names.append(name)
    width = len(codes[""]) - 1
    steps, byte_classes, finals, calls, counters = [], [], [], [], []
    for hit in hits:
        dfa = hit[1]
        calls.append([(state, code_of[code], ret)
                      for state, code, ret in code_paths(dfa.trans, dfa.byte_class, width)])
        steps.append(_text_steps(dfa))
        byte_classes.append(dfa.byte_class)
        finals.append(dfa.accepting)
        counters.append(hit[2])
    return _link(names, steps, byte_classes, finals, calls, counters, max_states)


def _built_dfa(body: Expr, counted: bool, max_states: int, built: dict[tuple, tuple],
               codes: dict[str, bytes]) -> tuple:
    """(body, DFA, counter, `_dfa_key` of the two) of `_counter_dfa`, kept in `built` by the
    body's spelling (the same body rebuilt by renaming calls is built once)."""
    key = (fingerprint(body), counted and counter_form(body) is not None)
    hit = built.get(key)
    if hit is None or not same_spelling(hit[0], body):
        dfa, counter = _counter_dfa(body, counted, max_states, codes)
        hit = built[key] = (body, dfa, counter, _dfa_key(dfa, counter))
    return hit


def _dfa_key(dfa: ByteDFA, counter: tuple | None) -> tuple:
    """What tells a machine's DFA and counter from another's (equal: the same machine)."""
    return (dfa.trans.shape, dfa.trans.tobytes(), dfa.byte_class.tobytes(),
            dfa.accepting.tobytes(),
            None if counter is None else (*counter[:3], counter[3].tobytes()))


def _text_steps(dfa: ByteDFA) -> np.ndarray:
    """`dfa`'s transitions per byte class with those of call codes left out (a class of
    code bytes only; a byte of text never moves like a code byte unless both are dead)."""
    code_only = np.ones(dfa.num_classes, bool)
    text_bytes = np.ones(256, bool)
    text_bytes[CODE_BYTES] = False
    code_only[dfa.byte_class[text_bytes]] = False
    return np.where(code_only, 0, dfa.trans) if code_only.any() else dfa.trans


def language_automaton(language: Expr | MachineSet, max_states: int, max_depth: int,
                    notice: Callable[[str], None]) -> ByteDFA | PushdownDFA:
    """The automaton of a front end's result: machines linked by calls when the next byte
    always decides between calling, returning and going on (the front end's alternative
    machines tried in turn); otherwise (with a notice) the calls inlined, recursion unrolled
    `max_depth` levels; a flat language's minimal DFA."""
    while isinstance(language, MachineSet):
        try:
            return deterministic_pushdown(language, max_states)
        except NotDeterministicError as exc:
            if language.alternative is not None:
                language = language.alternative()
            elif language.unrolled is not None:
                language = language.unrolled()
            else:
                notice(f"calls inlined ({exc.message}); recursion unrolled to depth "
                       f"{max_depth} (--max-depth)")
                language = inline_calls(language, max_depth, max_states)
    return build_dfa(language, max_states=max_states)


def deterministic_pushdown(machines: MachineSet, max_states: int) -> PushdownDFA:
    """`build_pushdown`, after inlining the machines whose calls the next byte cannot decide,
    as long as they do not recurse (inlining them is then exact); `NotDeterministicError`
    when a recursive one is at fault."""
    built: dict[tuple, tuple] = {}
    codes = call_codes(["", *(name for name, _ in machines.machines)])
    while True:
        machines = _without_copies(machines, max_states, built, codes)
        try:
            return build_pushdown(machines, max_states, built, codes)
        except NotDeterministicError as exc:
            if not exc.machines or exc.machines & recursive_machines(dict(machines.machines)):
                raise
            machines = _inlined(machines, exc.machines, built, codes)


def _without_copies(machines: MachineSet, max_states: int, built: dict[tuple, tuple],
                    codes: dict[str, bytes]) -> MachineSet:
    """The machine set with each group of machines whose DFAs are equal (so their languages,
    calls included) called as one, the first of the group; again until no two are equal (the
    callers of merged machines may become equal in turn). A machine that recurses and one
    that does not are never merged: the latter stays free to be inlined. A machine whose DFA
    is the root's lends the root its body, so that the two, rewritten alike by later
    inlining, are built once (`build_pushdown` links that machine as the root)."""
    while True:
        first_of: dict[tuple, str] = {}
        alias: dict[str, str] = {}
        keys: dict[str, tuple] = {}
        recursive = recursive_machines(dict(machines.machines))
        for name, body in machines.machines:
            keys[name] = _built_dfa(body, True, max_states, built, codes)[3]
            alias[name] = first_of.setdefault((name in recursive, *keys[name]), name)
        if all(name == kept for name, kept in alias.items()):
            root_key = _built_dfa(machines.root, False, max_states, built, codes)[3]
            copy = next((body for name, body in machines.machines if keys[name] == root_key),
                        machines.root)
            return machines if copy is machines.root else MachineSet(
                copy, machines.machines, machines.unrolled, machines.alternative)

        def renamed(name: str) -> Expr:
            return Call(alias.get(name, name))

        merged = [name for name, kept in alias.items() if name != kept]
        machines = MachineSet(
            replace_calls(machines.root, renamed, merged),
            tuple((name, replace_calls(body, renamed, merged)) for name, body in machines.machines
                  if alias[name] == name), machines.unrolled, machines.alternative)


def _inlined(machines: MachineSet, names: frozenset[str], built: dict[tuple, tuple],
             codes: dict[str, bytes]) -> MachineSet:
    """The machine set with the (non-recursive) machines `names` inlined where called, and
    without the machines no longer called. A body whose DFA is in `built` (the inlined ones,
    and their callers) becomes that DFA with its calls as edges (`_respelled`), so that the
    next build determinises minimal DFAs, not the bodies' expressions again."""
    bodies = dict(machines.machines)
    flat: dict[str, Expr] = {}

    def body_of(name: str) -> Expr:
        if name not in names:
            return Call(name)
        if name not in flat:
            flat[name] = rewritten(bodies[name])
        return flat[name]

    def rewritten(body: Expr) -> Expr:
        respelled = _respelled(body, body_of, built, codes)
        return replace_calls(body, body_of, names) if respelled is None else respelled

    kept = {name: body if names.isdisjoint(_calls_below(body)) else rewritten(body)
            for name, body in bodies.items() if name not in names}
    root = machines.root if names.isdisjoint(_calls_below(machines.root)) else \
        rewritten(machines.root)
    reached = reachable_machines(called_names(root), kept)
    return MachineSet(root, tuple((name, body) for name, body in kept.items()
                                  if name in reached), machines.unrolled,
                      machines.alternative)


def _respelled(body: Expr, replacement: Callable[[str], Expr], built: dict[tuple, tuple],
               codes: dict[str, bytes]) -> Automaton | None:
    """The language of `body` with every `Call(name)` replaced by `replacement(name)`, as
    the body's DFA (in `built`) whose call codes are edges reading the replacements: the
    substitution of a DFA's code symbols, so the same language as the body's expression so
    replaced. None where the DFA was not built or the body keeps a counter (its shape
    matters)."""
    hit = built.get((fingerprint(body), False))
    if hit is None or counter_form(body) is not None or not same_spelling(hit[0], body):
        return None
    dfa = hit[1]
    name_of = {code: name for name, code in codes.items()}
    return Automaton(without_codes(dfa), None, tuple(
        (state, replacement(name_of[code]), ret)
        for state, code, ret in code_paths(dfa.trans, dfa.byte_class, len(codes[""]) - 1)))


def without_codes(dfa: ByteDFA) -> ByteDFA:
    """The DFA with no transition on a byte of a call code (those get a class of their own,
    with no transition)."""
    byte_class = dfa.byte_class.copy()
    byte_class[CODE_BYTES] = dfa.num_classes
    trans = np.zeros((dfa.num_states, dfa.num_classes + 1), np.int32)
    trans[:, :-1] = dfa.trans
    return ByteDFA(trans, byte_class, dfa.accepting)


def inline_calls(machines: MachineSet, depth: int, max_states: int) -> Expr:
    """The root with every call replaced by its machine, nested calls `depth` levels deep at
    most (deeper ones match nothing): the flat under-approximation of recursive machines.
    Each machine level becomes a minimal DFA, so every use embeds it once."""
    bodies = dict(machines.machines)
    levels: dict[tuple[str, int], Expr] = {}

    def machine(name: str, level: int) -> Expr:
        if level <= 0:
            return NOTHING
        if (name, level) not in levels:
            body = replace_calls(bodies[name], lambda callee: machine(callee, level - 1))
            levels[(name, level)] = flat_language(body, max_states)
        return levels[(name, level)]

    return replace_calls(machines.root, lambda callee: machine(callee, depth))


def flat_language(expr: Expr, max_states: int) -> Expr:
    """`expr` (with no call) as one minimal DFA leaf, or NOTHING for the empty language."""
    try:
        return Automaton(build_dfa(expr, max_states=max_states))
    except GrammarError as exc:
        if "matches no string" not in str(exc):
            raise
        return NOTHING


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

    return walk(expr)


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

    found = walk(expr)
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

    return walk(expr)


def reachable_machines(names: set[str], bodies: dict[str, Expr]) -> set[str]:
    """The machines `names` and every machine they call, directly or through others."""
    reached, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(called_names(bodies[name]))
    return reached


def recursive_machines(bodies: dict[str, Expr]) -> set[str]:
    """The machines that can call themselves, directly or through others."""
    return {name for name, body in bodies.items()
            if name in reachable_machines(called_names(body) & bodies.keys(), bodies)}


def code_paths(trans: np.ndarray, byte_class: np.ndarray,
               width: int) -> list[tuple[int, bytes, int]]:
    """The call codes of `width` digits spelled in a DFA (`trans[state, byte_class[byte]]`):
    (state, code, the state after it)."""
    out = []
    prefix = byte_class[CALL_PREFIX]
    digits = [(d, byte_class[d]) for d in CALL_DIGITS]
    for state in np.flatnonzero(trans[:, prefix]):
        frontier = [(int(trans[state, prefix]), bytes([CALL_PREFIX]))]
        for _ in range(width):
            frontier = [(int(trans[s, c]), code + bytes([d])) for s, code in frontier
                        for d, c in digits if trans[s, c]]
        out.extend((int(state), code, ret) for ret, code in frontier)
    return out


def _link(names: list[str], steps: list[np.ndarray], byte_classes: list[np.ndarray],
          finals: list[np.ndarray], calls: list[list[tuple[int, int, int]]],
          counters: list[tuple | None], max_states: int) -> PushdownDFA:
    """Number every machine's live states in one table and check determinism. `steps` are
    the machines' text transitions per byte class of their own (`_text_steps`), the table's
    classes the bytes that every machine's classes put together."""
    # the states of each machine reached from its start by text or by returning from a call
    local_ids = []
    for step, edges in zip(steps, calls):
        # each state's distinct successors, ascending (each row sorted, repeats and the dead
        # state dropped), then its calls' return states
        size = len(step)
        ordered = np.sort(step, axis=1)
        distinct = ordered != 0
        distinct[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
        source, target = np.nonzero(distinct)[0], ordered[distinct]
        if edges:
            call_source = np.array([state for state, _, _ in edges], np.int64)
            source = np.concatenate([source, call_source])
            target = np.concatenate([target, [ret for _, _, ret in edges]])
            by_source = np.argsort(source, kind="stable")  # a state's successors, then returns
            source, target = source[by_source], target[by_source]
        ptr = np.zeros(size + 1, np.int64)
        np.cumsum(np.bincount(source, minlength=size), out=ptr[1:])
        local_ids.append(_core.csr_bfs_order(ptr, target.astype(np.int32), 1))
    total = 1 + sum(len(ids) for ids in local_ids)
    if total > SUBSET_FACTOR * max_states:  # each machine is bounded by --max-states
        raise TooManyStatesError(f"the machines need {total:,} states, more than "
                                 f"{SUBSET_FACTOR} x --max-states {max_states:,}")
    offsets, glob = [], []
    next_id = 1
    for ids, step in zip(local_ids, steps):
        mapping = np.zeros(len(step), np.int32)
        mapping[ids] = np.arange(next_id, next_id + len(ids))
        glob.append(mapping)
        offsets.append(next_id)
        next_id += len(ids)
    # a byte's class in the table: the tuple of its classes in every machine, numbered in the
    # order of their first byte (code bytes are dead in every machine's steps)
    _, first_of_tuple, tuple_of_byte = np.unique(np.stack(byte_classes), axis=1,
                                                 return_index=True, return_inverse=True)
    by_first_byte = np.argsort(first_of_tuple)
    rank = np.empty_like(by_first_byte)
    rank[by_first_byte] = np.arange(len(by_first_byte))
    joint_class, first_byte = rank[tuple_of_byte.reshape(-1)], first_of_tuple[by_first_byte]
    trans = np.zeros((total, len(first_byte)), np.int32)
    accepting = np.zeros(total, bool)
    state_machine = np.full(total, -1, np.int32)
    edges = []
    for m, (ids, step, byte_class, final, mapping) in enumerate(
            zip(local_ids, steps, byte_classes, finals, glob)):
        rows = mapping[ids]
        trans[rows] = mapping[step[ids][:, byte_class[first_byte]]]
        accepting[rows] = final[ids]
        state_machine[rows] = m
        edges.extend((int(mapping[s]), callee, int(mapping[r])) for s, callee, r in calls[m]
                     if mapping[s])
    edges.sort()
    call_ptr = np.zeros(total + 1, np.int64)
    np.cumsum(np.bincount([e[0] for e in edges], minlength=total), out=call_ptr[1:])
    machine_start = np.array(offsets, np.int32)
    call_machine = np.array([e[1] for e in edges], np.int32)
    call_return = np.array([e[2] for e in edges], np.int32)
    dfa = _canonical_dfa(trans, joint_class, accepting)
    first = _first_bytes(dfa, machine_start, call_ptr, call_machine, names)
    follow = _check_deterministic(dfa, state_machine, call_ptr, call_machine, call_return,
                                  first, names)
    loop = np.zeros(len(names), np.int32)
    count_min = np.zeros(len(names), np.int64)
    count_max = np.full(len(names), -1, np.int64)
    in_loop = np.zeros(total, bool)
    for m, (ids, counter, mapping) in enumerate(zip(local_ids, counters, glob)):
        if counter is not None:
            local_loop, count_min[m], count_max[m], local_in_loop = counter
            loop[m] = mapping[local_loop]
            in_loop[mapping[ids][local_in_loop[ids]]] = True
    return PushdownDFA(dfa, tuple(names), machine_start,
                       state_machine, call_ptr, call_machine, call_return, first, follow,
                       Counters(loop, count_min, count_max, in_loop))


def _first_bytes(dfa: ByteDFA, machine_start, call_ptr, call_machine, names) -> np.ndarray:
    """FIRST sets by fixpoint; a machine that accepts the empty text, or calls itself before
    reading a byte, is not deterministic."""
    first = np.zeros((len(machine_start), 256), bool)
    faults = _Faults(names)
    for m, start in enumerate(machine_start):
        if dfa.accepting[start] and (m or m in call_machine):  # an uncalled root may accept
            # the empty text
            faults.add(m, f"machine {names[m]!r} accepts the empty text")
        first[m] = dfa.trans[start, dfa.byte_class] != 0
    callees_at_start = [set(call_machine[call_ptr[s]:call_ptr[s + 1]].tolist())
                        for s in machine_start]
    for m in range(len(machine_start)):  # a machine that calls itself before reading a byte
        reached, todo = set(), list(callees_at_start[m])
        while todo:
            callee = todo.pop()
            if callee == m:
                faults.add(m, f"machine {names[m] or 'root'!r} calls itself before reading a "
                              "byte (left recursion)")
                break
            if callee not in reached:
                reached.add(callee)
                todo.extend(callees_at_start[callee])
    faults.raise_any()
    changed = True
    while changed:
        changed = False
        for m, start in enumerate(machine_start):
            for k in range(call_ptr[start], call_ptr[start + 1]):
                merged = first[m] | first[call_machine[k]]
                if not np.array_equal(merged, first[m]):
                    first[m] = merged
                    changed = True
    return first


def _check_deterministic(dfa: ByteDFA, state_machine, call_ptr, call_machine, call_return,
                         first, names) -> np.ndarray:
    """Raise `NotDeterministicError` where the next byte cannot decide, blaming every
    machine whose calls are in doubt; the FOLLOW sets."""
    num_machines = len(first)
    faults = _Faults(names)
    accepting = dfa.accepting
    # the bytes a state can read next: its transitions and its callees' first bytes
    reads = (dfa.trans != 0)[:, dfa.byte_class]
    for q in np.flatnonzero(np.diff(call_ptr)):
        own = reads[q].copy()
        callees = call_machine[call_ptr[q]:call_ptr[q + 1]]
        for i, callee in enumerate(callees):
            clash = own.copy()
            for j, other in enumerate(callees):
                if j != i:
                    clash |= first[other]
            clash &= first[callee]
            if clash.any():
                faults.add(int(callee), f"in machine {names[state_machine[q]] or 'root'!r}, "
                           f"byte {int(np.flatnonzero(clash)[0]):#04x} may start a call of "
                           f"{names[callee]!r} or continue otherwise")
            reads[q] |= first[callee]
    # FOLLOW sets: what may come after a machine returns, by fixpoint over call sites
    follow = np.zeros((num_machines, 256), bool)
    changed = True
    while changed:
        changed = False
        for k in range(len(call_machine)):
            ret = call_return[k]
            after = reads[ret] | (follow[state_machine[ret]] if accepting[ret] else False)
            merged = follow[call_machine[k]] | after
            if not np.array_equal(merged, follow[call_machine[k]]):
                follow[call_machine[k]] = merged
                changed = True
    final = np.flatnonzero(accepting)
    clashes = reads[final] & follow[state_machine[final]]
    at_fault = clashes.any(axis=1)
    for q, clash in zip(final[at_fault], clashes[at_fault]):
        faults.add(int(state_machine[q]), f"machine {names[state_machine[q]] or 'root'!r} "
                   f"may end or go on with byte {int(np.flatnonzero(clash)[0]):#04x}")
    faults.raise_any()
    return follow


class _Faults:
    """The machines blamed for conflicts, and the first conflict's message."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.blamed: set[str] = set()
        self.message: str | None = None

    def add(self, machine: int, message: str) -> None:
        self.message = self.message or message
        self.blamed.add(self.names[machine])

    def raise_any(self) -> None:
        if self.message is not None:
            # the root is never inlined: a fault of its own cannot be fixed that way
            fixable = frozenset() if "" in self.blamed else frozenset(self.blamed)
            raise NotDeterministicError(self.message, fixable)


def byte_dfa(byte_table: np.ndarray, accepting: np.ndarray) -> ByteDFA:
    """The byte table as a `ByteDFA` over byte classes (bytes with equal columns), numbered
    in the order of their first byte."""
    return _canonical_dfa(byte_table, np.arange(256), accepting)


def _canonical_dfa(trans: np.ndarray, byte_class: np.ndarray,
                   accepting: np.ndarray) -> ByteDFA:
    """`trans` over the classes `byte_class` (numbered in the order of their first byte) as
    a `ByteDFA` whose classes are the bytes with equal columns, numbered so too."""
    table = np.ascontiguousarray(trans, dtype=np.int32)
    group = _core.column_groups(table)  # groups numbered by their first column
    first_column = np.unique(group, return_index=True)[1]
    return ByteDFA(np.ascontiguousarray(table[:, first_column]), group[byte_class].astype(
        np.int32), accepting)
