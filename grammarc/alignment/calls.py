"""Token alignment of machines linked by calls (see `automaton.pushdown`).

Walking a token from state `q` either stays in `q`'s machine without a call (the bulk: the
ordinary factored table), or opens calls inside the token and ends in a callee with return
states pushed, or returns past the frame it started in: then what happens depends on the
stack, and only the rest of the token after the return (its *suffix*) matters.

The ordinary alignment (`align.walk_entries`) finds the tokens of the second and third kind
in one pass: the byte table gets a sink state that a state enters on the bytes where it would
call (its callees' first bytes) or return (the bytes that follow its machine, in final
states), so a token that reaches the sink is one whose walk needs the stack. Those (state,
token) pairs are walked again with a stack by a compiled kernel (csrc/calls.cpp), which records the state and
the pushed return states, or the suffix after the return. Each suffix is then resolved from
every return state it can meet (the return states of calls to the machine it left), which
may return again with a shorter suffix, until every suffix is resolved.

Everything is a table (`format.table.CallTables`); the runtime only looks things up
(docs/FORMAT.md, version 2).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import replace
from typing import Callable

import numpy as np

from .. import _core
from .flat import FactoredRows, TokenEntries, VocabTrie, factor, token_table, walk_entries
from .machines import kept_machines
from ..automaton.pushdown import PushdownDFA, byte_dfa
from ..errors import GrammarError
from ..format.table import (CallTables, CountRegisters, ExitTables, TokenTable,
                            positions_within, returns_after)

_FEW_PUSHES = 4  # room per walk in the first pass; walks that push more are walked again
_DIES, _STAYS, _RETURNS = 0, 1, 2  # the walk kinds of `_core.pushdown_walk`


def align_calls(pd: PushdownDFA, trie: VocabTrie, vocab_size: int,
                eos_token_ids: tuple[int, ...],
                progress: Callable[[int, int], None] | None = None,
                timings: dict[str, float] | None = None) -> TokenTable:
    """The token tables of `pd` over the vocabulary in `trie`: the ordinary table of the
    tokens that stay in their state's machine without a call, and the `CallTables`."""
    started = time.perf_counter()
    table = pd.byte_table()
    num_states = len(table)
    sink = num_states
    augmented = np.zeros((num_states + 1, 256), np.int32)
    augmented[:num_states] = table
    stuck = np.zeros((num_states, 256), bool)
    callers = np.repeat(np.arange(num_states), np.diff(pd.call_ptr))
    np.logical_or.at(stuck, callers, pd.first[pd.call_machine])
    finals = np.flatnonzero(pd.dfa.accepting)
    stuck[finals] |= pd.follow[pd.state_machine[finals]]
    stuck &= table == 0
    augmented[:num_states][stuck] = sink
    augmented[sink] = sink
    accepting = np.append(pd.dfa.accepting, True)
    entries = walk_entries(
        byte_dfa(augmented, accepting), trie, vocab_size, eos_token_ids, progress, walked=sink,
        elsewhere=kept_machines(pd, augmented, accepting, sink, trie, vocab_size,
                                eos_token_ids))
    walked = time.perf_counter()

    kernel = _Kernel(pd, table)
    data, offsets = trie.token_data, trie.token_offsets
    new_class, pair_state, pair_class = _core.sink_pairs(
        entries.state_ptr, entries.entry_class, entries.entry_next, sink,
        int(entries.token_class.max(initial=0)) + 1)
    x_state, x_token = _pairs_into(pair_state, pair_class, entries.token_class)
    kind, nxt, pos, pushes, count = kernel.walk(x_state, data, offsets[x_token],
                                                offsets[x_token + 1])
    push_ids = _PushSequences()
    suffixes = _Suffixes(trie)
    x_next, x_arg = _outcomes(kind, nxt, pos, pushes, x_token, offsets, push_ids, suffixes,
                              pd.exit_class)
    x_count = np.where(kind == _STAYS, count, 0).astype(np.int32)
    live = x_next != -2
    back = x_next == -1
    returned = set(zip(pd.state_machine[x_state[back]].tolist(), x_arg[back].tolist()))
    s_arrays = _resolve_suffixes(pd, kernel, suffixes, returned, push_ids)

    # a class only the sink used (its row allows every token) becomes class 0, "never
    # allowed" by the ordinary table; the entries into the sink, which accepts nothing
    # there, are trimmed
    has_stack_tokens = np.bincount(x_state[live], minlength=num_states) > 0
    ordinary = factor(TokenEntries(new_class[entries.token_class], entries.state_ptr,
                                   entries.entry_class, entries.entry_next),
                      np.append(pd.dfa.accepting | has_stack_tokens, False), new_class)
    ordinary = replace(ordinary, state_row=ordinary.state_row[:sink],
                       min_tokens_to_accept=ordinary.min_tokens_to_accept[:sink])

    x_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(np.bincount(x_state[live], minlength=num_states), out=x_ptr[1:])
    order = np.lexsort((x_token[live], x_state[live]))
    x = (x_token[live][order], x_next[live][order], x_arg[live][order])
    x_count = x_count[live][order]
    push_ptr, push_states = push_ids.arrays()
    counters = _count_registers(pd, kernel, trie, entries, sink, x_count, s_arrays[4]) \
        if pd.has_counters else None
    exits = None
    if pd.has_unions:  # version 5: returns by exit class, with count registers
        exits = ExitTables(exit_class=pd.exit_class, site_ptr=pd.site_ptr,
                           site_next=pd.site_next,
                           suffix_class=np.array(suffixes.classes, np.int64))
        counters = counters or CountRegisters.without_counts(
            len(pd.machine_start), num_states, len(x[0]), len(s_arrays[0]), vocab_size)
    cost = _return_cost(ordinary, pd, x_ptr, x[1], x[2], x_count, push_ptr, push_states,
                        counters)
    calls = CallTables(machine_start=pd.machine_start, machine_first=pd.first,
                       call_ptr=pd.call_ptr, call_machine=pd.call_machine,
                       call_return=pd.call_return, stack_ptr=x_ptr, stack_token=x[0],
                       stack_next=x[1], stack_arg=x[2], suffix_state=s_arrays[0],
                       suffix_id=s_arrays[1], suffix_next=s_arrays[2], suffix_arg=s_arrays[3],
                       push_ptr=push_ptr, push_states=push_states, counters=counters,
                       exits=exits)
    if timings is not None:
        timings["alignment"] = timings.get("alignment", 0.0) + walked - started
        timings["factoring"] = timings.get("factoring", 0.0) + time.perf_counter() - walked
    return token_table(ordinary, pd.dfa, cost, calls)


def _pairs_into(states: np.ndarray, classes: np.ndarray,
                token_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (state, token) pairs of the (state, class) pairs whose entry leads to the sink."""
    # only the tokens of the classes met, by class (equal classes by id): a few hundred of a
    # vocabulary, so far fewer to sort than every token
    num_classes = int(token_class.max(initial=0)) + 1
    met = np.zeros(num_classes, bool)
    met[classes] = True
    tokens = np.flatnonzero(met[token_class])
    by_class = tokens[np.argsort(token_class[tokens], kind="stable")]
    class_ptr = np.zeros(num_classes + 1, np.int64)
    np.cumsum(np.bincount(token_class[tokens], minlength=num_classes), out=class_ptr[1:])
    sizes = class_ptr[classes + 1] - class_ptr[classes]
    pair_state = np.repeat(states, sizes)
    starts = np.repeat(class_ptr[classes] - np.cumsum(sizes) + sizes, sizes)
    pair_token = by_class[starts + np.arange(int(sizes.sum()))]
    return pair_state.astype(np.int32), pair_token.astype(np.int64)


class _PushSequences:
    """Interned push sequences (bottom first); id 0 is the empty sequence."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], int] = {(): 0}

    def id(self, states: tuple[int, ...]) -> int:
        return self.ids.setdefault(states, len(self.ids))

    def ids_of_rows(self, pushes: np.ndarray) -> np.ndarray:
        """The id of each row of `pushes` (its length, then its states), distinct rows
        interned once: rows of one length at a time, so the rows compared are as narrow as
        their sequences (a few tokens push dozens of states, most push one or two)."""
        ids = np.zeros(len(pushes), np.int32)
        for length in np.unique(pushes[:, 0]).tolist():
            if length == 0:
                continue
            rows = np.flatnonzero(pushes[:, 0] == length)
            seqs = pushes[rows, 1:1 + length]
            if length <= 2:  # one int64 key per row (states are below 2**31), in row order
                key = seqs[:, 0].astype(np.int64) << 31
                if length == 2:
                    key |= seqs[:, 1]
                _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
                distinct = seqs[first]
            else:
                distinct, inverse = np.unique(seqs, axis=0, return_inverse=True)
            found = [self.id(tuple(row)) for row in distinct.tolist()]
            ids[rows] = np.asarray(found, np.int32)[inverse.reshape(-1)]
        return ids

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        seqs = sorted(self.ids, key=self.ids.__getitem__)
        ptr = np.zeros(len(seqs) + 1, np.int64)
        np.cumsum([len(s) for s in seqs], out=ptr[1:])
        return ptr, np.array([q for s in seqs for q in s], np.int32)


class _Suffixes:
    """Interned suffixes of tokens (the bytes after a return), by content and by the exit
    class of the state returned from (what the return state reads them from depends on it:
    `returns_after`)."""

    def __init__(self, trie: VocabTrie) -> None:
        self.data = trie.token_data
        raw = trie.memo.get("token_bytes")  # the same bytes as one `bytes`, sliced fast
        if raw is None:
            raw = trie.memo["token_bytes"] = self.data.tobytes()
        self.raw = raw
        self.ids: dict[tuple[int, bytes], int] = {}
        self.spans: list[tuple[int, int]] = []  # (lo, hi) into data
        self.classes: list[int] = []  # the exit class returned from

    def ids_of_spans(self, lo: np.ndarray, hi: np.ndarray, classes: np.ndarray) -> list[int]:
        """The id of each suffix data[lo[i]:hi[i]] after a return from exit class
        `classes[i]`, new ones numbered in order."""
        ids, spans, raw = self.ids, self.spans, self.raw
        found = []
        for start, end, exit_class in zip(lo.tolist(), hi.tolist(), classes.tolist()):
            key = (exit_class, raw[start:end])
            at = ids.get(key)
            if at is None:
                at = ids[key] = len(spans)
                spans.append((start, end))
                self.classes.append(exit_class)
            found.append(at)
        return found


def _outcomes(kind, nxt, pos, pushes, tokens, offsets: np.ndarray, push_ids: _PushSequences,
              suffixes: _Suffixes, exit_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(next, arg) per walked pair: next -1 returns (arg: suffix, with the exit class of the
    state returned from, `nxt`), -2 dies. Push sequences and suffixes are interned once per
    distinct value."""
    next_out = np.full(len(kind), -2, np.int32)
    arg = np.zeros(len(kind), np.int32)
    stays = np.flatnonzero(kind == _STAYS)
    next_out[stays] = nxt[stays]
    if len(stays):
        arg[stays] = push_ids.ids_of_rows(pushes)
    back = np.flatnonzero(kind == _RETURNS)
    next_out[back] = -1
    if len(back):
        width = int(pos[back].max()) + 1  # (token, position, class) as one key: a 1-D unique
        classes = exit_class[nxt[back]].astype(np.int64)
        kinds = int(classes.max()) + 1
        distinct, inverse = np.unique(
            (tokens[back].astype(np.int64) * width + pos[back]) * kinds + classes,
            return_inverse=True)
        spot, exit_of = np.divmod(distinct, kinds)
        token, at = np.divmod(spot, width)
        ids = suffixes.ids_of_spans(offsets[token] + at, offsets[token + 1], exit_of)
        arg[back] = np.asarray(ids, np.int32)[inverse.reshape(-1)]
    return next_out, arg


def _resolve_suffixes(pd: PushdownDFA, kernel: _Kernel, suffixes: _Suffixes,
                      returned: set[tuple[int, int]], push_ids: _PushSequences) -> tuple:
    """Each suffix from each return state it can meet, until no new suffix appears.
    `returned` holds (machine returned from, suffix) of the returning tokens."""
    # the distinct return states of the calls of each machine, ascending
    num_states = len(pd.state_machine)
    calls = np.unique(pd.call_machine.astype(np.int64) * num_states + pd.call_return)
    return_ptr = np.zeros(len(pd.machine_names) + 1, np.int64)
    np.cumsum(np.bincount(calls // num_states, minlength=len(pd.machine_names)),
              out=return_ptr[1:])
    return_states = (calls % num_states).astype(np.int32)
    pending, done = set(returned), set()
    found: list[np.ndarray] = []  # per batch: rows of (state, suffix, next, arg, count)
    while pending:
        batch = np.array(sorted(pending), np.int64).reshape(-1, 2)
        done.update(pending)
        pending = set()
        sizes = return_ptr[batch[:, 0] + 1] - return_ptr[batch[:, 0]]
        if not sizes.sum():
            continue
        # every (state returned to from the machine, suffix) of the batch: a call's return
        # state, or its site's for the suffix's exit class
        within = positions_within(sizes)
        suffix_array = np.repeat(batch[:, 1], sizes)
        starts_array = returns_after(
            return_states[np.repeat(return_ptr[batch[:, 0]], sizes) + within],
            np.asarray(suffixes.classes, np.int64)[suffix_array], pd.site_ptr, pd.site_next)
        # the distinct pairs, by (state, suffix), as one int64 key each (a 1-D unique)
        width = len(suffixes.spans)
        keys = np.unique((starts_array * width + suffix_array)[starts_array > 0])
        if not len(keys):
            continue
        starts_array, suffix_array = np.divmod(keys, width)
        starts_array = starts_array.astype(np.int32)
        spans = np.array(suffixes.spans, np.int64).reshape(-1, 2)
        lo, hi = spans[suffix_array, 0], spans[suffix_array, 1]
        kind, nxt, pos, pushes, count = kernel.walk(starts_array, suffixes.data, lo, hi)
        stays = np.flatnonzero(kind == _STAYS)
        found.append(np.stack([starts_array[stays], suffix_array[stays], nxt[stays],
                               push_ids.ids_of_rows(pushes), count[stays]], axis=1))
        back = np.flatnonzero(kind == _RETURNS)
        rests = np.array(suffixes.ids_of_spans(lo[back] + pos[back], hi[back],
                                               pd.exit_class[nxt[back]]), np.int64)
        found.append(np.stack([starts_array[back], suffix_array[back],
                               np.full(len(back), -1), rests, np.zeros(len(back), np.int64)],
                              axis=1))
        pending = set(zip(pd.state_machine[starts_array[back]].tolist(), rests.tolist())) - done
    # one row per (state, suffix), sorted (a return state of calls to several machines may
    # meet a suffix more than once, always alike)
    rows = np.concatenate([*found, np.zeros((0, 5), np.int64)]).astype(np.int64)
    _, first = np.unique(rows[:, 0] * (len(suffixes.spans) + 1) + rows[:, 1], return_index=True)
    return tuple(c.astype(np.int32) for c in rows[first].T)


class _Kernel:
    """The byte-level pushdown walk, compiled: lookup tables for `_core.pushdown_walk`."""

    def __init__(self, pd: PushdownDFA, table: np.ndarray) -> None:
        self.table = table
        self.num_machines = len(pd.machine_start)
        self.final = np.ascontiguousarray(pd.dfa.accepting, dtype=np.bool_)
        counters = pd.counters
        self.loop_machine = np.full(len(table), -1, np.int32)
        self.loop_machine[counters.boundary] = pd.state_machine[counters.boundary]
        self.in_loop = np.ascontiguousarray(counters.in_loop, dtype=np.bool_)
        self.count_min, self.count_max = counters.count_min, counters.count_max
        self.twin = np.ascontiguousarray(counters.twin, np.int32)
        self.state_machine = pd.state_machine
        self.exit_class = np.ascontiguousarray(pd.exit_class, np.int32)
        self.site_ptr = np.ascontiguousarray(pd.site_ptr, np.int64)
        self.site_next = np.ascontiguousarray(pd.site_next, np.int32)
        # the characters of a pattern counted with the fewest still needed (`Counters`)
        self.need = counters.need if counters.need.any() else None
        callers = np.flatnonzero(np.diff(pd.call_ptr))
        self.call_row = np.full(len(table), -1, np.int32)
        self.call_row[callers] = np.arange(len(callers))
        # [row, byte] -> (callee start, return state) of the call that byte opens, or -1
        self.call_start = np.full((max(len(callers), 1), 256), -1, np.int32)
        self.call_ret = np.zeros((max(len(callers), 1), 256), np.int32)
        # every (call, byte it opens on), in call order; where a state's calls open on one
        # byte, its last call counts
        call, byte = np.nonzero(pd.first[pd.call_machine])
        row = self.call_row[np.repeat(np.arange(len(table)), np.diff(pd.call_ptr))[call]]
        _, last = np.unique((row.astype(np.int64) * 256 + byte)[::-1], return_index=True)
        call, row, byte = (a[len(call) - 1 - last] for a in (call, row, byte))
        self.call_start[row, byte] = pd.machine_start[pd.call_machine[call]]
        self.call_ret[row, byte] = pd.call_return[call]

    def walk(self, starts, data, lo, hi):
        """Walk data[lo[i]:hi[i]] from starts[i] with an empty frame: (kind, next state,
        bytes read before a return, pushes, count) per walk. `pushes` has a row per walk that
        stays (`kind == _STAYS`, in order): the number of return states pushed, then those
        states (bottom first), zero-padded. `count` is the repetitions started in the start
        frame when the walk ends or returns there, else the count of the counted frame it ends
        in (0 when none)."""
        starts = np.ascontiguousarray(starts, np.int32)

        def run(which, room):
            return _core.pushdown_walk(self.table, self.final, self.call_row, self.call_start,
                                       self.call_ret, self.loop_machine, self.in_loop,
                                       self.count_min, self.count_max, self.twin,
                                       self.exit_class,
                                       self.site_ptr, self.site_next, starts[which], data,
                                       lo[which], hi[which], room)

        # most walks push a few states: room for _FEW_PUSHES each, the others walked again
        kind, nxt, pos, push_len, push_buf, count = run(slice(None), _FEW_PUSHES)
        many = np.flatnonzero(push_len > _FEW_PUSHES)
        if len(many):
            # a byte opens at most one call per machine (none calls itself before reading a
            # byte): room for that many per byte is always enough
            longest = int((hi[many] - lo[many]).max())
            room = max(longest * self.num_machines, _FEW_PUSHES + 1)
            kind[many], nxt[many], pos[many], push_len[many], more, count[many] = \
                run(many, room)
        if self.need is not None:
            self._with_need(starts, kind, nxt, push_len, count)
        stays = np.flatnonzero(kind == _STAYS)
        width = int(push_len[stays].max(initial=0))
        pushes = np.zeros((len(stays), width + 1), np.int32)
        pushes[:, 0] = push_len[stays]
        few = min(width, _FEW_PUSHES)
        pushes[:, 1:1 + few] = push_buf[stays, :few]
        if len(many):
            row_of_many = np.searchsorted(stays, many)
            staying = kind[many] == _STAYS
            pushes[row_of_many[staying], 1:] = more[staying, :width]
        return kind, nxt, pos, pushes, count


    def _with_need(self, starts, kind, nxt, push_len, count) -> None:
        """The kernel counts the repetitions started; a count register also holds the
        fewest still needed where it ends (`Counters`): in the frame the walk started in,
        the count is what the token adds to it; in a counted frame the walk opened, the
        register, and a walk past its bound dies (in place)."""
        stays = kind == _STAYS
        ends_inside = stays & self.in_loop[nxt]
        own = self.in_loop[starts] & ((kind == _RETURNS) | (stays & (push_len == 0)))
        count[own] += (np.where(ends_inside[own], self.need[nxt[own]], 0) -
                       self.need[starts[own]]).astype(count.dtype)
        opened = np.flatnonzero(ends_inside & (push_len > 0))
        count[opened] += self.need[nxt[opened]].astype(count.dtype)
        bound = self.count_max[self.state_machine[nxt[opened]]]
        over = opened[(bound >= 0) & (count[opened] > bound)]
        # past the bound, a union's state goes on as its twin (no count), others die
        twin = self.twin[nxt[over]]
        kind[over], nxt[over], count[over] = np.where(twin > 0, _STAYS, _DIES), twin, 0


def _count_registers(pd: PushdownDFA, kernel: _Kernel, trie: VocabTrie,
                     entries: TokenEntries, sink: int, stack_reps: np.ndarray,
                     suffix_reps: np.ndarray) -> CountRegisters:
    """The count registers of `pd`'s counted machines, with the counts its stack tokens and
    suffixes end with: every token walked from every state inside a counted loop. Machines
    with the same tables up to numbering (strings of different bounds) share their rows,
    within a compile and across the compiles of one vocabulary (`LOOP_ROWS`)."""
    counters, accepting = pd.counters, pd.dfa.accepting
    num_states, vocab_size = len(accepting), len(trie.token_offsets) - 1
    ends = np.append(pd.machine_start[1:], pd.num_machine_states)
    row = np.full(num_states, -1, np.int32)
    complete_cost = np.full(num_states, -1, np.int64)
    item_cost = np.full(len(pd.machine_start), -1, np.int64)
    rows: list[np.ndarray] = []
    done: dict[bytes, tuple[int, np.ndarray, np.ndarray, int]] = {}  # see below
    table = kernel.table
    for m in np.flatnonzero(counters.loop).tolist():
        lo, hi = int(pd.machine_start[m]), int(ends[m])
        if counters.twin[lo:hi].any() and counters.phase[counters.loop[m]] < 0:
            # a union that counts repetitions: the rows of its counted member (one that
            # counts a pattern's characters reads them off its spelling, `_text_rows`)
            inside = lo + np.flatnonzero(counters.in_loop[lo:hi])
            member_rows, row_of = _union_rows(kernel, counters, inside, trie, vocab_size)
            row[inside] = len(rows) + row_of
            rows.extend(member_rows)
            continue
        local = table[lo:hi]
        signature = b"".join([np.where(local > 0, local - lo + 1, 0).tobytes(),
                              counters.in_loop[lo:hi].tobytes(), accepting[lo:hi].tobytes(),
                              counters.boundary[lo:hi].tobytes(), counters.need[lo:hi].tobytes(),
                              np.int64(counters.loop[m] - lo).tobytes()])
        if signature not in done and counters.phase[counters.loop[m]] >= 0:
            loop_rows, row_of = _text_rows(counters, lo, hi, trie, entries, sink)
            done[signature] = (len(rows), row_of, np.full(len(row_of), -1, np.int64), -1)
            rows.extend(loop_rows)
        elif signature not in done:  # (first row, row of each state inside, costs, item)
            loop_rows, row_of, costs, item = LOOP_ROWS.get(
                trie, signature,
                lambda: _walk_loop(kernel, counters, m, lo, hi, trie.token_data,
                                   trie.token_offsets, vocab_size))
            done[signature] = (len(rows), row_of, costs, item)
            rows.extend(loop_rows)
        first, row_of, costs, item = done[signature]
        inside = np.flatnonzero(counters.in_loop[lo:hi])
        row[lo + inside] = first + row_of
        complete_cost[lo + inside] = costs
        item_cost[m] = item
    stacked = np.stack(rows)
    dtype = np.uint8 if stacked.max(initial=0) <= np.iinfo(np.uint8).max else np.uint16
    return CountRegisters(machine_loop=counters.loop, machine_count_min=counters.count_min,
                          machine_count_max=counters.count_max,
                          machine_item_cost=item_cost.astype(np.int32), count_row=row,
                          count_table=stacked.astype(dtype),
                          count_complete_cost=complete_cost.astype(np.int32),
                          stack_reps=stack_reps, suffix_reps=suffix_reps,
                          count_loop=counters.boundary, count_need=counters.need,
                          count_twin=counters.twin)


class LoopRows:
    """The count rows of counted loops, kept across compiles per vocabulary: the same bounded
    string recurs in schema after schema (a loop's rows depend only on its machine's tables up
    to numbering, not on its bounds). Least recently used first out, past `max_bytes`. Safe
    for compiles on several threads (a loop two of them meet at once is walked by both)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.trie: weakref.ref[VocabTrie] | None = None
        self.entries: OrderedDict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = \
            OrderedDict()
        self._lock = threading.Lock()

    def get(self, trie: VocabTrie, signature: bytes,
            walk: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, int]]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(rows, row of each state inside, complete costs, item cost) of the loop with
        `signature`, walked if new."""
        with self._lock:
            if self.trie is None or self.trie() is not trie:  # another vocabulary: start over
                self.trie, self.entries, self.size = weakref.ref(trie), OrderedDict(), 0
            found = self.entries.get(signature)
            if found is not None:
                self.entries.move_to_end(signature)
                return found
        found = walk()
        with self._lock:
            if self.trie() is trie and signature not in self.entries:
                self.entries[signature] = found
                self.size += found[0].nbytes
                while self.size > self.max_bytes and len(self.entries) > 1:
                    self.size -= self.entries.popitem(last=False)[1][0].nbytes
        return found

    def clear(self) -> None:
        """Forget every loop's rows."""
        with self._lock:
            self.entries.clear()
            self.size = 0


#: The one cache of count rows of the process (for the vocabulary compiled for last).
LOOP_ROWS = LoopRows(max_bytes=64 << 20)


def _loop_walks(kernel: _Kernel, counters, inside: np.ndarray, data, offsets,
                vocab_size: int) -> tuple[np.ndarray, ...]:
    """Every token walked from each of the states `inside` a loop: the kernel's (kind,
    next state, count) per walk, and the count rows (uint16 [inside, V]: the repetitions a
    token starts, times two, plus one where it leaves the loop)."""
    starts = np.repeat(inside, vocab_size).astype(np.int32)
    token_lo = np.tile(offsets[:-1], len(inside))
    token_hi = np.tile(offsets[1:], len(inside))
    kind, nxt, _, _, count = kernel.walk(starts, data, token_lo, token_hi)
    leaves = (kind == _RETURNS) | ((kind == _STAYS) & ~counters.in_loop[nxt])
    # a count below 0 (the need of the start not met: a union's counted machine died in the
    # token) reads as 0
    value = np.where(kind == _DIES, 0, np.maximum(count.astype(np.int64), 0) * 2 + leaves)
    if value.max(initial=0) > np.iinfo(np.uint16).max:
        raise GrammarError("a token starts more than 32,767 repetitions of a counted repeat")
    return kind, nxt, count, value.reshape(len(inside), vocab_size).astype(np.uint16)


def _union_rows(kernel: _Kernel, counters, inside: np.ndarray, trie: VocabTrie,
                vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The count rows of a union's states `inside` its counted member's loop, and the row of
    each: one per state of the member, walked from one union state that stands for it. What
    a token does to the count is what it does to the member; where the member dies inside
    the token, the union state and its twin read the token alike, so the row may say
    anything there. No costs: below the least count a budget is the twin's."""
    _, first, row_of = np.unique(counters.member_state[inside], return_index=True,
                                 return_inverse=True)
    rows = _loop_walks(kernel, counters, inside[first], trie.token_data, trie.token_offsets,
                       vocab_size)[3]
    return rows, row_of.reshape(-1).astype(np.int32)


def _walk_loop(kernel: _Kernel, counters, machine: int, lo: int, hi: int, data, offsets,
               vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The count rows of one counted repeat's states inside its loop (uint16 [inside, V]),
    the row of each, the tokens that complete the repetition under way from each, and those
    that read one repetition."""
    inside = lo + np.flatnonzero(counters.in_loop[lo:hi])
    loop = int(counters.loop[machine])
    kind, nxt, count, loop_rows = _loop_walks(kernel, counters, inside, data, offsets,
                                              vocab_size)
    # tokens that start no repetition and stay in the loop: back to the loop state by them
    moves = (kind == _STAYS) & counters.in_loop[nxt]
    source = np.repeat(inside, vocab_size).astype(np.int64)
    inf = np.int64(1) << 40
    complete = np.where(np.arange(hi - lo) + lo == loop, 0, inf)[inside - lo]
    at = {int(q): i for i, q in enumerate(inside)}
    index = np.array([at.get(int(q), -1) for q in range(lo, hi)], np.int64)
    free = moves & (count == 0)
    edge_src, edge_dst = index[source[free] - lo], index[nxt[free].astype(np.int64) - lo]
    pairs = np.unique(np.stack([edge_src, edge_dst], axis=1), axis=0)
    for _ in range(len(inside)):
        better = complete.copy()
        np.minimum.at(better, pairs[:, 0], complete[pairs[:, 1]] + 1)
        if np.array_equal(better, complete):
            break
        complete = better
    one = moves & (count == 1) & (source == loop)
    item = int((complete[index[nxt[one].astype(np.int64) - lo]] + 1).min(initial=inf))
    return loop_rows, np.arange(len(inside), dtype=np.int32), \
        np.where(complete >= inf, -1, complete), (-1 if item >= inf else item)


def _text_rows(counters, lo: int, hi: int, trie: VocabTrie, entries: TokenEntries,
               sink: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The count rows of a `CountedText` machine's states inside its loop, and the row of
    each, from the ordinary entries: a token adds the characters it starts, read on the
    spelling DFA alone (`_spelled_starts`), plus the need of the state it ends in (0 where
    it leaves: to a final state, or to the sink, returning), minus the need of its own.
    States whose classes agree wherever both allow them (a word pattern's states, which
    differ in how many words are left) share a row, with no costs: the count of such a
    machine never lies below its least (`automaton.counters.counted_text`)."""
    inside = lo + np.flatnonzero(counters.in_loop[lo:hi])
    num_classes = int(entries.token_class.max(initial=0)) + 1
    places = np.unique(counters.phase[inside])
    started, leaves = _spelled_starts(trie, counters.phase_next, counters.phase_boundary,
                                      counters.phase_in_loop, places)
    # per state: its entries' classes and the need of where they lead
    sizes = np.diff(entries.state_ptr)[inside]
    entry = np.repeat(entries.state_ptr[inside], sizes) + positions_within(sizes)
    nxt = entries.entry_next[entry].astype(np.int64)
    below = np.minimum(nxt, sink - 1)
    need_after = np.where((nxt != sink) & counters.in_loop[below], counters.need[below], 0)
    classes = entries.entry_class[entry]
    kind, starts = _same_entries(sizes, classes, need_after), np.cumsum(sizes) - sizes
    # states by (place, need), the groups in the order they first occur
    keys = np.stack([counters.phase[inside], counters.need[inside]], axis=1)
    _, first_member, group_of = np.unique(keys, axis=0, return_index=True,
                                          return_inverse=True)
    group_of = group_of.reshape(-1)
    rows: list[np.ndarray] = []
    row_of = np.zeros(len(inside), np.int32)
    for g in np.argsort(first_member, kind="stable").tolist():
        members = np.flatnonzero(group_of == g)
        place, need = int(keys[members[0], 0]), int(keys[members[0], 1])
        # members with equal entries share a row anyway: one of each, in order
        _, one, same = np.unique(kind[members], return_index=True, return_inverse=True)
        order = np.argsort(one, kind="stable")
        ones = members[one[order]]
        # need of where each class leads (-1: the class dies there)
        ends = np.full((len(ones), num_classes), -1, np.int64)
        own = np.repeat(starts[ones], sizes[ones]) + positions_within(sizes[ones])
        ends[np.repeat(np.arange(len(ones)), sizes[ones]), classes[own]] = need_after[own]
        merged, one_row = _shared_rows(ends, ends >= 0)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        at = int(np.searchsorted(places, place))
        for ends_of_classes in merged.astype(np.int64):
            value = started[at] + ends_of_classes[entries.token_class] - need
            rows.append(np.where(value >= 0, value * 2 + leaves[at], 0))
        row_of[members] = len(rows) - len(merged) + one_row[rank[same.reshape(-1)]]
    if max(int(row.max(initial=0)) for row in rows) > np.iinfo(np.uint16).max:
        raise GrammarError("a token starts more than 32,767 repetitions of a counted repeat")
    return [row.astype(np.uint16) for row in rows], row_of


def _same_entries(sizes: np.ndarray, classes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """An id per state, equal exactly for states with the same entries (state i's are the
    next `sizes[i]` of `classes` and `values`, values >= 0): the row `_core.dedupe_rows`
    shares between them, each value read as the delta of an entry (into states with no
    entries of their own after them)."""
    count = len(sizes)
    ptr = np.zeros(count + 1, np.int64)
    np.cumsum(sizes, out=ptr[1:])
    after = np.repeat(np.arange(count, dtype=np.int64), sizes) + values
    states = max(count, int(after.max(initial=0)) + 1)
    ptr = np.append(ptr, np.full(states - count, ptr[-1]))
    state_row = _core.dedupe_rows(ptr, classes.astype(np.int32), after.astype(np.int32),
                                  np.zeros(states, np.int32), np.zeros(0, np.int32))[0]
    return state_row[:count].astype(np.int64)


def _spelled_starts(trie: VocabTrie, table: np.ndarray, boundary: np.ndarray,
                    in_loop: np.ndarray, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per place (a state of a spelling DFA) and token: the repetitions the token starts
    from there until it leaves the loop, and whether it leaves ([places, V] int64 each; a
    token the spelling forbids gets anything: no state allows it), by a walk of the trie
    from each place (`_core.spelled_starts`)."""
    started, left = _core.spelled_starts(
        trie.node_byte, trie.node_depth, trie.tok_ptr, trie.toks, len(trie.token_offsets) - 1,
        np.ascontiguousarray(table, np.int32), np.ascontiguousarray(boundary, np.bool_),
        np.ascontiguousarray(in_loop, np.bool_), places.astype(np.int32))
    return started.astype(np.int64), left.astype(np.int64)


def _shared_rows(values: np.ndarray, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows (uint16) that hold each row of `values` wherever it is `alive` (elsewhere the
    table forbids the token, so its value is never read), and the row of each: rows with
    the most live tokens first, each merged into the first it agrees with."""
    merged: list[np.ndarray] = []
    merged_alive: list[np.ndarray] = []
    row_of = np.zeros(len(values), np.int32)
    for i in np.argsort(-alive.sum(axis=1), kind="stable").tolist():
        for j, (row, live) in enumerate(zip(merged, merged_alive)):
            both = live & alive[i]
            if np.array_equal(row[both], values[i][both]):
                row[alive[i]] = values[i][alive[i]]
                live |= alive[i]
                row_of[i] = j
                break
        else:
            row_of[i] = len(merged)
            merged.append(np.where(alive[i], values[i], 0))
            merged_alive.append(alive[i].copy())
    return np.stack(merged).astype(np.uint16), row_of


def _return_cost(table: FactoredRows, pd: PushdownDFA, x_ptr, x_next, x_arg, x_count,
                 push_ptr, push_states, counts: CountRegisters | None) -> np.ndarray:
    """Tokens that take each state to a final state of its machine (`_core.least_costs`): a
    token of the table costs 1 plus finishing from where it goes; a stack token costs 1 plus
    finishing the callee it ends in and every frame it pushed. An upper bound of the
    shortest completion (tokens may also cross frames), used for budgets.

    Inside a counted loop only tokens that start no repetition count (they are allowed at
    any count that may leave); a stack token that ends in a counted frame below its minimum
    costs the repetitions still needed (`count_complete_cost`, `machine_item_cost`) and
    finishing from the loop state instead of from the state it ends in."""
    final = pd.dfa.accepting
    num_states = len(final)
    # a row's many token classes lead to few states, and a distance only needs the states
    entry_ptr, entry_next = _core.row_moves(table.state_row, table.row_ptr, table.row_delta)
    if counts is not None:
        entry_ptr, entry_next = _without_repetitions(table, counts, entry_ptr, entry_next)
    # the stack tokens that stay (end in a state, with return states pushed), per state
    stays = x_next >= 0
    owner = np.repeat(np.arange(num_states, dtype=np.int32), np.diff(x_ptr))[stays]
    target, seq = x_next[stays], x_arg[stays]
    extra = np.zeros(len(target), np.int64)
    if counts is not None:  # ends in a counted frame with fewer repetitions than its minimum
        machine = pd.state_machine[target]
        reps = x_count[stays].astype(np.int64)
        short = np.flatnonzero((counts.count_row[target] >= 0) &
                               (reps < pd.counters.count_min[machine]))
        m = machine[short]
        item = counts.machine_item_cost[m].astype(np.int64)
        complete = counts.count_complete_cost[target[short]].astype(np.int64)
        possible = (item >= 0) & (complete >= 0)
        extra[short] = complete + item * (pd.counters.count_min[m] - reps[short])
        target = target.copy()
        target[short] = pd.counters.loop[m]
        keep = np.ones(len(target), bool)
        keep[short[~possible]] = False
        owner, target, seq, extra = owner[keep], target[keep], seq[keep], extra[keep]
    # each option: its owner, its constant, its states (a stack token's: where it ends, then
    # the frames it pushed)
    pushed = (push_ptr[seq + 1] - push_ptr[seq]).astype(np.int64)
    sizes = np.concatenate([np.ones(len(entry_next), np.int64), 1 + pushed])
    option_ptr = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=option_ptr[1:])
    members = np.empty(option_ptr[-1], np.int32)
    members[:len(entry_next)] = entry_next
    heads = option_ptr[len(entry_next):-1]
    members[heads] = target
    within = positions_within(pushed)
    members[np.repeat(heads + 1, pushed) + within] = \
        push_states[np.repeat(push_ptr[seq], pushed) + within]
    option_owner = np.concatenate([np.repeat(np.arange(num_states, dtype=np.int32),
                                             np.diff(entry_ptr)), owner])
    option_cost = np.concatenate([np.ones(len(entry_next), np.int64), 1 + extra])
    if len(pd.site_next):  # a site: finishing after each of its returns (a bound of any)
        site_owner = np.repeat(np.arange(num_states, dtype=np.int32), np.diff(pd.site_ptr))
        live = pd.site_next > 0
        sites, site_sizes = np.unique(site_owner[live], return_counts=True)
        members = np.concatenate([members, pd.site_next[live].astype(np.int32)])
        option_ptr = np.concatenate([option_ptr, option_ptr[-1] + np.cumsum(site_sizes)])
        option_owner = np.concatenate([option_owner, sites.astype(np.int32)])
        option_cost = np.concatenate([option_cost, np.zeros(len(sites), np.int64)])
    cost = _core.least_costs(np.ascontiguousarray(final, dtype=np.bool_), option_owner,
                             option_cost, option_ptr, members)
    return np.minimum(cost, np.iinfo(np.int32).max).astype(np.int32)


def _without_repetitions(table: FactoredRows, counts: CountRegisters, entry_ptr: np.ndarray,
                         entry_next: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries with those of loop states replaced by the moves of tokens that start no
    repetition there (a class may hold tokens that do and tokens that do not)."""
    num_states = len(entry_ptr) - 1
    loop_states = np.flatnonzero(counts.count_row >= 0)
    owner = np.repeat(np.arange(num_states), np.diff(entry_ptr))
    keep = counts.count_row[owner] < 0
    num_classes = int(table.token_class.max(initial=0)) + 1
    # per count row, the classes with a token that starts no repetition (count 0: value < 2)
    rows, row_of = np.unique(counts.count_row[loop_states], return_inverse=True)
    free = _core.classes_below(counts.count_table, rows.astype(np.int32), table.token_class,
                               num_classes, 2)
    # each loop state's entries of those classes, by where they lead (once each)
    lo = table.row_ptr[table.state_row[loop_states]]
    sizes = table.row_ptr[table.state_row[loop_states] + 1] - lo
    at = np.repeat(lo, sizes) + positions_within(sizes)
    which = np.repeat(np.arange(len(loop_states)), sizes)
    moves = free[row_of.reshape(-1)[which], table.row_class[at]]
    state = loop_states[which[moves]].astype(np.int64)
    pairs = np.unique(state * num_states + state + table.row_delta[at[moves]])
    owner = np.concatenate([owner[keep], pairs // num_states])
    entry_next = np.concatenate([entry_next[keep], pairs % num_states])
    order = np.argsort(owner, kind="stable")
    ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=num_states), out=ptr[1:])
    return ptr, entry_next[order]
