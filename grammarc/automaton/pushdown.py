"""Machines linked by calls: a `MachineSet` to one byte-level pushdown automaton.

The machines' DFAs (their calls spelled by call codes, `callgraph`) are read back into call
edges `(state, machine, return state)`, and the machines' states are numbered in one table
(dead 0, the root's start 1, then each machine's states).

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
the check raises `NotDeterministicError` naming the machines at fault (what then, `linking`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _core
from ..errors import TooManyStatesError
from .bytedfa import ByteDFA
from .callgraph import CODE_BYTES, call_codes, code_paths
from .counters import Counters, LocalCounter, dfa_with_counter, is_counted
from .dfa import SUBSET_FACTOR
from .expr import Expr, MachineSet, fingerprint, same_spelling
from .signals import NotDeterministicError
from .unions import with_unions


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
    # unions (`unions`): each state's exit class, and per site (a state only pushed) its
    # return state per exit class of the machine called (0: the text dies)
    exit_class: np.ndarray          # int32 [S]
    site_ptr: np.ndarray            # int64 [S + 1]: a site's returns, site_ptr[q]..[q + 1]
    site_next: np.ndarray           # int32 [Y]

    @property
    def has_unions(self) -> bool:
        return bool(len(self.site_next)) or bool(self.exit_class.any())

    @property
    def num_machine_states(self) -> int:
        """The states of the machines, the dead one included: the sites come after them."""
        return self.num_states - int(np.count_nonzero(np.diff(self.site_ptr)))

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
                    nxt, count = counters.step(q, int(table[q, byte]), count,
                                               int(self.state_machine[q]))
                    if nxt or not counters.twin[q]:
                        q = nxt
                        break
                    q, count = int(counters.twin[q]), 0  # past the count: its twin reads
                    continue
                calls = range(self.call_ptr[q], self.call_ptr[q + 1])
                k = next((k for k in calls if self.first[self.call_machine[k], byte]), None)
                if k is not None:
                    stack.append(int(self.call_return[k]))
                    q, count = int(self.machine_start[self.call_machine[k]]), 0
                elif self.dfa.accepting[q] and stack:
                    q = _returned(stack.pop(), int(self.exit_class[q]), self.site_ptr,
                                  self.site_next)
                else:
                    q = 0
            if not q:
                return False
        while q and self.dfa.accepting[q] and stack:
            q = _returned(stack.pop(), int(self.exit_class[q]), self.site_ptr, self.site_next)
        return bool(q and self.dfa.accepting[q])


def _returned(ret: int, exit_class: int, site_ptr: np.ndarray, site_next: np.ndarray) -> int:
    """The state popping return state (or site) `ret` leads to from a final state of
    `exit_class` (0: none)."""
    lo, hi = int(site_ptr[ret]), int(site_ptr[ret + 1])
    if lo == hi:
        return ret
    return int(site_next[lo + exit_class]) if 0 <= exit_class < hi - lo else 0


def build_pushdown(machines: MachineSet, max_states: int,
                   built: dict[tuple, tuple] | None = None,
                   codes: dict[str, bytes] | None = None, unions: bool = False) -> PushdownDFA:
    """The pushdown automaton of a machine set; `NotDeterministicError` when the next byte
    cannot decide between a machine's own transitions, its calls and its return (with
    `unions`, where it cannot decide between calls, a call of their union is tried first:
    `automaton.unions`). A machine
    whose DFA is the root's (a copy of it, such as a schema's `$ref: "#"`) is the root,
    called: its states are in the table once. `built` keeps each body's DFA and counter (by
    its spelling) for a later call with the same `codes` (call codes of a superset of the
    machines)."""
    codes = call_codes(["", *(name for name, _ in machines.machines)]) if codes is None \
        else codes
    built = {} if built is None else built
    root = built_dfa(machines.root, False, max_states, built, codes)  # it keeps no count
    hits, names, code_of = [root], [""], {codes[""]: 0}
    for name, body in machines.machines:
        hit = built_dfa(body, True, max_states, built, codes)
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
    return _link(names, steps, byte_classes, finals, calls, counters, max_states, unions)


def built_dfa(body: Expr, counted: bool, max_states: int, built: dict[tuple, tuple],
              codes: dict[str, bytes]) -> tuple:
    """(body, DFA, counter, `_dfa_key` of the two) of `dfa_with_counter`, kept in `built` by the
    body's spelling (the same body rebuilt by renaming calls is built once)."""
    key = (fingerprint(body), counted and is_counted(body))
    hit = built.get(key)
    if hit is None or not same_spelling(hit[0], body):
        dfa, counter = dfa_with_counter(body, counted, max_states, codes)
        hit = built[key] = (body, dfa, counter, _dfa_key(dfa, counter))
    return hit


def _dfa_key(dfa: ByteDFA, counter: LocalCounter | None) -> tuple:
    """What tells a machine's DFA and counter from another's (equal: the same machine)."""
    return (dfa.trans.shape, dfa.trans.tobytes(), dfa.byte_class.tobytes(),
            dfa.accepting.tobytes(),
            None if counter is None else counter.key())


def _text_steps(dfa: ByteDFA) -> np.ndarray:
    """`dfa`'s transitions per byte class with those of call codes left out (a class of
    code bytes only; a byte of text never moves like a code byte unless both are dead)."""
    code_only = np.ones(dfa.num_classes, bool)
    text_bytes = np.ones(256, bool)
    text_bytes[CODE_BYTES] = False
    code_only[dfa.byte_class[text_bytes]] = False
    return np.where(code_only, 0, dfa.trans) if code_only.any() else dfa.trans


def _link(names: list[str], steps: list[np.ndarray], byte_classes: list[np.ndarray],
          finals: list[np.ndarray], calls: list[list[tuple[int, int, int]]],
          counters: list[LocalCounter | None], max_states: int,
          unions: bool = False) -> PushdownDFA:
    """Number every machine's live states in one table and check determinism (with
    `unions`, where it fails, again after `with_unions`). `steps` are the machines' text
    transitions per byte class of their own (`_text_steps`), the table's classes the bytes
    that every machine's classes put together."""
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
    # order of their first byte (code bytes are dead in every machine's steps): each byte's
    # tuple as the bytes of its column, numbered as first met
    columns = np.ascontiguousarray(np.stack(byte_classes).T, np.int32)
    raw, width = columns.tobytes(), columns.shape[1] * 4
    numbers: dict[bytes, int] = {}
    joint_class = np.array([numbers.setdefault(raw[b * width:(b + 1) * width], len(numbers))
                            for b in range(len(columns))], np.int64)
    first_byte = np.unique(joint_class, return_index=True)[1]
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
    loop = np.zeros(len(names), np.int32)
    count_min = np.zeros(len(names), np.int64)
    count_max = np.full(len(names), -1, np.int64)
    in_loop = np.zeros(total, bool)
    boundary = np.zeros(total, bool)
    need = np.zeros(total, np.int64)
    phase = np.full(total, -1, np.int64)
    spellings: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    phases = 0
    for m, (ids, counter, mapping) in enumerate(zip(local_ids, counters, glob)):
        if counter is not None:
            count_min[m], count_max[m] = counter.count_min, counter.count_max
            loop[m] = mapping[counter.loop]
            in_loop[mapping[ids][counter.in_loop[ids]]] = True
            boundary[mapping[ids][counter.boundary[ids]]] = True
            need[mapping[ids]] = counter.need[ids]
            if counter.spelling is not None:  # its spelling DFA's states after the others'
                table, spelled_boundary, spelled_in_loop = counter.spelling
                local = counter.phase[ids]
                phase[mapping[ids]] = np.where(local >= 0, local + phases, -1)
                spellings.append((np.where(table > 0, table + phases, 0), spelled_boundary,
                                  spelled_in_loop))
                phases += len(table)
    phase_next, phase_boundary, phase_in_loop = (
        np.concatenate([s[i] for s in spellings]) if spellings else
        np.zeros((0, 256) if i == 0 else 0, np.int32 if i == 0 else bool) for i in range(3))
    registers = Counters(loop, count_min, count_max, in_loop, boundary, need, phase,
                         phase_next.astype(np.int32), phase_boundary, phase_in_loop,
                         np.zeros(total, np.int64), np.full(total, -1, np.int64))
    exits = None
    try:
        follow = _check_deterministic(dfa, state_machine, call_ptr, call_machine, call_return,
                                      first, names)
    except NotDeterministicError as failure:
        if not unions:
            raise
        try:
            united = with_unions(trans, accepting, state_machine, call_ptr, call_machine,
                                 call_return, machine_start, first, names, registers,
                                 max_states)
            united_dfa = _canonical_dfa(united.trans, joint_class, united.accepting)
            united_first = _first_bytes(united_dfa, united.machine_start, united.call_ptr,
                                        united.call_machine, united.names)
            exits = (united.exit_class, united.site_ptr, united.site_next, united.num_classes)
            follow = _check_deterministic(united_dfa, united.state_machine, united.call_ptr,
                                          united.call_machine, united.call_return,
                                          united_first, united.names, exits)
        except NotDeterministicError as united_failure:
            # where what is left in doubt lies in machines of the input (not unions), which
            # inlining may fix, say so (`linking` inlines them and unites again); else the
            # calls in doubt are not those of machines alike
            fixable = united_failure.machines and united_failure.machines <= set(names)
            raise (united_failure if fixable else failure) from None
        except TooManyStatesError:
            raise failure from None
        # the count registers of the machines kept alone, in the new numbering, and those
        # of the unions with a counted member, which count as it does in their own states
        kept = np.flatnonzero((united.old_state >= 0) & (united.state_machine >= 0))
        kept = kept[united.old_machine[united.state_machine[kept]] ==
                    state_machine[united.old_state[kept]]]
        new_of_old = np.zeros(total, np.int64)
        new_of_old[united.old_state[kept]] = kept
        alone = united.old_machine >= 0
        member = np.where(alone, united.old_machine, united.counted_member)
        machine_of = np.maximum(member, 0)
        loop = np.where(alone, new_of_old[loop[machine_of]], united.union_loop).astype(np.int32)
        count_min = np.where(member >= 0, count_min[machine_of], 0)
        count_max = np.where(member >= 0, count_max[machine_of], -1)
        per_state = []
        counting = np.flatnonzero(united.counted_state >= 0)
        for values, empty in ((in_loop, False), (boundary, False), (need, 0), (phase, -1)):
            moved = np.full(len(united.accepting), empty, values.dtype)
            moved[kept] = values[united.old_state[kept]]
            moved[counting] = values[united.counted_state[counting]]
            per_state.append(moved)
        in_loop, boundary, need, phase = per_state
        registers = Counters(loop, count_min, count_max, in_loop, boundary, need, phase,
                             registers.phase_next, registers.phase_boundary,
                             registers.phase_in_loop, united.twin, united.counted_state)
        names, machine_start, state_machine = united.names, united.machine_start, \
            united.state_machine
        call_ptr, call_machine, call_return = united.call_ptr, united.call_machine, \
            united.call_return
        dfa, first = united_dfa, united_first
    num_states = dfa.num_states
    exit_class, site_ptr, site_next = exits[:3] if exits is not None else (
        np.zeros(num_states, np.int32), np.zeros(num_states + 1, np.int64),
        np.zeros(0, np.int32))
    return PushdownDFA(dfa, tuple(names), machine_start,
                       state_machine, call_ptr, call_machine, call_return, first, follow,
                       registers, exit_class, site_ptr, site_next)


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
                         first, names, exits: tuple | None = None) -> np.ndarray:
    """Raise `NotDeterministicError` where the next byte cannot decide, blaming every
    machine whose calls are in doubt; the FOLLOW sets (of every exit class together).
    `exits`: (exit class per state, site_ptr, site_next, exit classes per machine) where
    machines return by exit class (`unions`); a final state's return is then checked
    against what follows its own class."""
    num_machines = len(first)
    if exits is None:
        exits = (np.zeros(len(state_machine), np.int32),
                 np.zeros(len(state_machine) + 1, np.int64), np.zeros(0, np.int32),
                 np.ones(num_machines, np.int64))
    exit_class, site_ptr, site_next, num_classes = exits
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
                           f"{names[callee]!r} or continue otherwise",
                           with_text=bool((own & first[callee]).any()))
            reads[q] |= first[callee]
    # FOLLOW sets: what may come after a machine returns in each exit class, by fixpoint
    # over call sites (each set of bytes a 256-bit int while it grows)
    returns = [(int(call_machine[k]), c, ret) for k in range(len(call_machine))
               for c in range(int(num_classes[call_machine[k]]))
               if (ret := _returned(int(call_return[k]), c, site_ptr, site_next))]
    rets = sorted({ret for _, _, ret in returns})
    packed = np.packbits(reads[rets], axis=1).tobytes()
    read_bits = {ret: int.from_bytes(packed[32 * i:32 * (i + 1)], "big")
                 for i, ret in enumerate(rets)}
    # per return: its read bytes, and the (machine, exit class) whose FOLLOW follows it
    steps = [(callee, c, read_bits[ret],
              (int(state_machine[ret]), int(exit_class[ret])) if accepting[ret] else None)
             for callee, c, ret in returns]
    follow_bits: dict[tuple[int, int], int] = {}
    changed = True
    while changed:
        changed = False
        for callee, c, after, then in steps:
            if then is not None:
                after |= follow_bits.get(then, 0)
            known = follow_bits.get((callee, c), 0)
            if after | known != known:
                follow_bits[callee, c] = after | known
                changed = True
    follow = np.zeros((num_machines, int(num_classes.max(initial=1)), 256), bool)
    for (callee, c), bits in follow_bits.items():
        follow[callee, c] = np.unpackbits(np.frombuffer(bits.to_bytes(32, "big"), np.uint8))
    final = np.flatnonzero(accepting)
    clashes = reads[final] & follow[state_machine[final], exit_class[final]]
    at_fault = clashes.any(axis=1)
    for q, clash in zip(final[at_fault], clashes[at_fault]):
        faults.add(int(state_machine[q]), f"machine {names[state_machine[q]] or 'root'!r} "
                   f"may end or go on with byte {int(np.flatnonzero(clash)[0]):#04x}",
                   with_text=True)
    faults.raise_any()
    return follow.any(axis=1)


class _Faults:
    """The machines blamed for conflicts, and the first conflict's message."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.blamed: set[str] = set()
        self.with_text: set[str] = set()
        self.message: str | None = None

    def add(self, machine: int, message: str, with_text: bool = False) -> None:
        self.message = self.message or message
        self.blamed.add(self.names[machine])
        if with_text:
            self.with_text.add(self.names[machine])

    def raise_any(self) -> None:
        if self.message is not None:
            # the root is never inlined: a fault of its own cannot be fixed that way
            fixable = frozenset() if "" in self.blamed else frozenset(self.blamed)
            raise NotDeterministicError(self.message, fixable, frozenset(self.with_text))


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
