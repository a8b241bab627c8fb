"""Calls the next byte cannot decide, made deterministic by *union machines* that return by
their exit class.

Where a state may call machines A and B whose texts start alike (a recursive `$ref` and
another in two branches of an `anyOf`), the next byte cannot tell which call to take. The
union machine `A | B` reads the text once as A and B together: a subset construction over
their states, whose own calls are made alike in turn. Each of its final states has an *exit
class*, the set of the machines that accept the text read ({A}, {B} or {A, B}); the call
pushes a *site* whose return state depends on that class: the states after the calls of the
machines in it, read together. So the callers' states become subsets of their own states
too, in the same construction. Every subset reads what its states read and every return
continues what accepted, so the language is the same; `pushdown` checks the result like any
other (its FOLLOW sets per exit class).

A union may hold one counted machine (a string with a long `maxLength`, or a pattern's
characters counted under one, `counters`): the union keeps its count while the counted
machine is inside its loop, and each such state has a *twin*, the same state without the
counted machine. Where the count leaves its bounds the counted machine can no longer end,
and the twin reads on: the union does not die with it (`anyOf` of a string of at most 512
characters and any value reads a longer string as any value). A union of more than
`MOST_UNITED` machines, or of two counted ones, is not built: the calls stay in doubt
(`NotDeterministicError`, and `linking` takes its fallback).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TooManyStatesError
from .counters import Counters
from .signals import NotDeterministicError

MOST_UNITED = 4  # machines in one union: 2**4 - 1 exit classes


@dataclass(frozen=True)
class United:
    """A linked automaton after `with_unions`: the arrays of `pushdown._link` in a new
    numbering (states of machine m from `machine_start[m]` on, in machine order, then the
    sites), with each state's exit class and the sites' return states per class."""

    trans: np.ndarray           # int32 [S, classes]: the byte classes of the input
    accepting: np.ndarray       # bool [S]
    state_machine: np.ndarray   # int32 [S], -1 for the dead state and the sites
    call_ptr: np.ndarray        # int64 [S + 1]
    call_machine: np.ndarray    # int32 [C]
    call_return: np.ndarray     # int32 [C]: a state, or a site
    machine_start: np.ndarray   # int32 [M]
    names: list[str]
    exit_class: np.ndarray      # int32 [S]
    site_ptr: np.ndarray        # int64 [S + 1]
    site_next: np.ndarray       # int32 [Y]
    num_classes: np.ndarray     # int64 [M]: exit classes of each machine
    old_state: np.ndarray       # int64 [S]: the input's state a state stands for alone, or -1
    old_machine: np.ndarray     # int64 [M]: the input's machine a machine is, or -1 (a union)
    # a union with a counted machine: its counted member (-1: none) and loop state (0: none);
    # per state of such a union, the counted machine's state inside its loop (-1: none) and
    # the twin (0: none)
    counted_member: np.ndarray  # int64 [M]
    union_loop: np.ndarray      # int64 [M]
    counted_state: np.ndarray   # int64 [S]
    twin: np.ndarray            # int64 [S]


def with_unions(trans: np.ndarray, accepting: np.ndarray, state_machine: np.ndarray,
                call_ptr: np.ndarray, call_machine: np.ndarray, call_return: np.ndarray,
                machine_start: np.ndarray, first: np.ndarray, names: list[str],
                counters: Counters, max_states: int) -> United:
    """The automaton with the calls of machines whose first bytes overlap (`first`) at one
    state made one call of their union (module docstring), every machine rebuilt from its
    start by the subset construction; `NotDeterministicError` where a union would be too
    large or hold counts it cannot keep (`counters`: the input's), `TooManyStatesError`
    past `max_states` states."""
    builder = _Builder(trans, accepting, state_machine, call_ptr, call_machine, call_return,
                       machine_start, first, counters, max_states)
    return builder.build(names)


class _Builder:
    """The subset construction of `with_unions`: a state is (machine, the input's states
    it stands for), numbered as met; a machine, the tuple of the input's machines it
    reads at once."""

    def __init__(self, trans: np.ndarray, accepting: np.ndarray, state_machine: np.ndarray,
                 call_ptr: np.ndarray, call_machine: np.ndarray, call_return: np.ndarray,
                 machine_start: np.ndarray, first: np.ndarray, counters: Counters,
                 max_states: int) -> None:
        self.trans, self.accepting, self.state_machine = trans, accepting, state_machine
        self.call_ptr, self.call_machine, self.call_return = call_ptr, call_machine, call_return
        self.machine_start, self.first, self.counters = machine_start, first, counters
        self.max_states = max_states
        self.members: list[tuple[int, ...]] = []  # per new machine, the input's machines
        self.machine_of: dict[tuple[int, ...], int] = {}
        self.counted_member: list[int] = []  # per new machine, its counted member or -1
        self.subsets: list[tuple[int, frozenset[int]]] = []  # per state: (machine, states)
        self.state_of: dict[tuple[int, frozenset[int]], int] = {}
        self.todo: list[int] = []
        # per state of a union with a counted member inside its loop: that member's state
        # and the twin's subset id (-1: none)
        self.counted_state: dict[int, int] = {}
        self.twin: dict[int, int] = {}

    def state(self, machine: int, states: frozenset[int]) -> int:
        key = (machine, states)
        found = self.state_of.get(key)
        if found is None:
            found = self.state_of[key] = len(self.subsets)
            if found >= self.max_states:
                raise TooManyStatesError(f"the machines with unions need more than "
                                         f"--max-states {self.max_states:,} states")
            self.subsets.append(key)
            self.todo.append(found)
        return found

    def machine(self, group: tuple[int, ...]) -> int:
        found = self.machine_of.get(group)
        if found is None:
            counted = [m for m in group if self.counters.loop[m]] if len(group) > 1 else []
            if len(group) > MOST_UNITED or len(counted) > 1:
                raise NotDeterministicError(f"a union of {len(group)} machines, or of two "
                                            "that count, is not built")
            found = self.machine_of[group] = len(self.members)
            self.members.append(group)
            self.counted_member.append(counted[0] if counted else -1)
            self.state(found, frozenset(int(self.machine_start[m]) for m in group))
        return found

    def _count(self, t: int, machine: int, states: frozenset[int]) -> None:
        """Where a union's counted member is inside its loop in state t: its state there, and
        the twin, the same states without it (the union reads on with the twin where the
        count leaves its bounds). Such a state may not call: a frame below the top keeps no
        count."""
        counted = self.counted_member[machine]
        inside = [s for s in states if self.state_machine[s] == counted and
                  self.counters.in_loop[s]]
        if counted < 0 or not inside:
            return
        if any(self.call_ptr[s] != self.call_ptr[s + 1] for s in states):
            raise NotDeterministicError("a union that counts would call inside its count's "
                                        "loop; it is not built")
        self.counted_state[t] = inside[0]
        rest = states - {inside[0]}
        self.twin[t] = self.state(machine, rest) if rest else -1

    def build(self, names: list[str]) -> United:
        self.machine((0,))
        rows: dict[int, np.ndarray] = {}
        calls: dict[int, list[tuple[int, int | tuple[int, ...]]]] = {}
        while self.todo:
            t = self.todo.pop()
            machine, states = self.subsets[t]
            rows[t] = self._row(machine, sorted(states))
            calls[t] = self._calls(machine, sorted(states))
            self._count(t, machine, states)
        return self._numbered(names, rows, calls)

    def _row(self, machine: int, states: list[int]) -> np.ndarray:
        """The subsets each byte class leads to, as subset id + 1 (0: none): one subset per
        distinct column of the states' transitions (for one state, per distinct target:
        most subsets are single states, and a 1-D unique is much cheaper)."""
        block = self.trans[states]
        if len(states) == 1:  # new subsets numbered by target
            distinct, inverse = np.unique(block[0], return_inverse=True)
            distinct, order = distinct[:, None], range(len(distinct))
        else:  # by byte class
            distinct, first, inverse = np.unique(np.sort(block, axis=0).T, axis=0,
                                                 return_index=True, return_inverse=True)
            order = np.argsort(first).tolist()
        ids = np.zeros(len(distinct), np.int64)
        for i in order:
            targets = frozenset(distinct[i][distinct[i] != 0].tolist())
            ids[i] = self.state(machine, targets) + 1 if targets else 0
        return ids[inverse.reshape(-1)]

    def _calls(self, machine: int, states: list[int]) -> list[tuple[int, int | tuple[int, ...]]]:
        """(callee, return) of the subset: one call per group of callees whose first bytes
        overlap, returning to a state or, for a union, to one per exit class."""
        edges = [(int(self.call_machine[k]), int(self.call_return[k])) for s in states
                 for k in range(self.call_ptr[s], self.call_ptr[s + 1])]
        out = []
        for group in _overlapping(sorted({callee for callee, _ in edges}), self.first):
            callee = self.machine(group)
            rets = []
            for mask in range(1, 1 << len(group)):  # exit class mask - 1: these accepted
                accepted = {m for i, m in enumerate(group) if mask >> i & 1}
                rets.append(self.state(machine, frozenset(
                    ret for c, ret in edges if c in accepted)))
            out.append((callee, rets[0] if len(set(rets)) == 1 else tuple(rets)))
        return out

    def _exit_class(self, machine: int, states: frozenset[int]) -> int:
        """The exit class of a final subset of a union: the set of its machines with a
        final state there, as a bit mask less one (0 for any other state)."""
        group = self.members[machine]
        if len(group) == 1:
            return 0
        mask = sum(1 << i for i, m in enumerate(group)
                   if any(self.accepting[s] and self.state_machine[s] == m for s in states))
        return max(mask - 1, 0)

    def _numbered(self, names: list[str], rows: dict, calls: dict) -> United:
        """The arrays, states numbered by machine (each machine's start first), then the
        sites."""
        owner = np.array([m for m, _ in self.subsets], np.int64)
        order = np.lexsort((np.arange(len(owner)), owner))
        new_id = np.empty(len(owner), np.int64)
        new_id[order] = np.arange(1, len(owner) + 1)
        num_states = len(owner) + 1
        machine_start = np.zeros(len(self.members), np.int64)
        machine_start[owner[order][::-1]] = new_id[order][::-1]  # each machine's least id
        sites: dict[tuple[int, ...], int] = {}
        edges = []
        for t, outs in calls.items():
            for callee, ret in outs:
                if isinstance(ret, tuple):
                    ret = sites.setdefault(tuple(int(new_id[r]) for r in ret),
                                           num_states + len(sites))
                else:
                    ret = int(new_id[ret])
                edges.append((int(new_id[t]), callee, ret))
        edges.sort()
        total = num_states + len(sites)
        trans = np.zeros((total, self.trans.shape[1]), np.int32)
        accepting = np.zeros(total, bool)
        state_machine = np.full(total, -1, np.int32)
        exit_class = np.zeros(total, np.int32)
        old_state = np.full(total, -1, np.int64)
        counted_state = np.full(total, -1, np.int64)
        twin = np.zeros(total, np.int64)
        union_loop = np.zeros(len(self.members), np.int64)
        for t, (machine, states) in enumerate(self.subsets):
            q = new_id[t]
            trans[q] = _renumbered(rows[t], new_id)
            accepting[q] = any(self.accepting[s] for s in states)
            state_machine[q] = machine
            exit_class[q] = self._exit_class(machine, states)
            if len(states) == 1:
                old_state[q] = next(iter(states))
            if t in self.counted_state:
                counted_state[q] = c = self.counted_state[t]
                twin[q] = new_id[self.twin[t]] if self.twin[t] >= 0 else 0
                # the loop state: the least of those where the member is at its own
                if c == self.counters.loop[self.counted_member[machine]] and \
                        (not union_loop[machine] or q < union_loop[machine]):
                    union_loop[machine] = q
        call_ptr = np.zeros(total + 1, np.int64)
        np.cumsum(np.bincount([e[0] for e in edges], minlength=total), out=call_ptr[1:])
        site_ptr = np.zeros(total + 1, np.int64)
        site_sizes = np.zeros(total, np.int64)
        site_next: list[int] = []
        for rets, site in sorted(sites.items(), key=lambda item: item[1]):
            site_sizes[site] = len(rets)
            site_next.extend(rets)
        np.cumsum(site_sizes, out=site_ptr[1:])
        return United(
            trans=trans, accepting=accepting, state_machine=state_machine, call_ptr=call_ptr,
            call_machine=np.array([e[1] for e in edges], np.int32),
            call_return=np.array([e[2] for e in edges], np.int32),
            machine_start=machine_start.astype(np.int32),
            names=[" | ".join(names[m] or "root" for m in group) if len(group) > 1
                   else names[group[0]] for group in self.members],
            exit_class=exit_class, site_ptr=site_ptr, site_next=np.array(site_next, np.int32),
            num_classes=np.array([(1 << len(g)) - 1 for g in self.members], np.int64),
            old_state=old_state,
            old_machine=np.array([g[0] if len(g) == 1 else -1 for g in self.members],
                                 np.int64),
            counted_member=np.array([m if len(g) > 1 else -1 for m, g in
                                     zip(self.counted_member, self.members)], np.int64),
            union_loop=union_loop, counted_state=counted_state, twin=twin)


def _renumbered(row: np.ndarray, new_id: np.ndarray) -> np.ndarray:
    """A row of subset ids + 1 (0: none) in the new numbering."""
    out = np.zeros(len(row), np.int64)
    live = row > 0
    out[live] = new_id[row[live] - 1]
    return out


def _overlapping(callees: list[int], first: np.ndarray) -> list[tuple[int, ...]]:
    """The callees grouped by overlapping first bytes (groups of overlaps, transitively)."""
    group = {c: c for c in callees}

    def root(c: int) -> int:
        while group[c] != c:
            c = group[c]
        return c

    for i, a in enumerate(callees):
        for b in callees[i + 1:]:
            if (first[a] & first[b]).any():
                group[root(b)] = root(a)
    groups: dict[int, list[int]] = {}
    for c in callees:
        groups.setdefault(root(c), []).append(c)
    return [tuple(sorted(g)) for g in groups.values()]
