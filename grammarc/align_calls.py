"""Token alignment of machines linked by calls (see `automaton.machines`).

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

Everything is a table; the runtime only looks things up (docs/FORMAT.md, version 2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import _core
from .align import FactoredRows, TokenEntries, VocabTrie, factor, walk_entries
from .automaton.machines import PushdownDFA, byte_dfa

_FEW_PUSHES = 4  # room per walk in the first pass; walks that push more are walked again
_STAYS, _RETURNS = 1, 2  # the walk kinds of `_core.pushdown_walk` (0: the token dies)


@dataclass(frozen=True)
class CallTable:
    """The token-level tables of a pushdown automaton (docs/FORMAT.md, version 2).

    `rows` hold the tokens that stay in their state's machine without a call. The stack
    tokens of state q are `x_token[x_ptr[q]:x_ptr[q+1]]` (sorted), each with `x_next` (the
    state it ends in, or -1 when it returns past the frame) and `x_arg` (the push sequence it
    leaves on the stack, or the id of the suffix read after the return). A suffix read from a
    return state has one entry in the `s_*` arrays, sorted by (state, suffix), with the same
    meaning of next and arg; a missing entry means the text dies there.
    """

    rows: FactoredRows
    x_ptr: np.ndarray
    x_token: np.ndarray
    x_next: np.ndarray
    x_arg: np.ndarray
    s_state: np.ndarray
    s_suffix: np.ndarray
    s_next: np.ndarray
    s_arg: np.ndarray
    push_ptr: np.ndarray     # int64 [P + 1]; sequence 0 is empty
    push_states: np.ndarray  # int32, bottom of the stack first
    return_cost: np.ndarray  # int32 [S]: tokens that finish the state's machine, -1 if none


def align_calls(pd: PushdownDFA, trie: VocabTrie, token_bytes, vocab_size: int,
                eos_token_ids: tuple[int, ...],
                progress: Callable[[int, int], None] | None = None,
                timings: dict[str, float] | None = None) -> CallTable:
    """The token tables of `pd` over a vocabulary (`token_bytes[t]`: the bytes of token t)."""
    started = time.perf_counter()
    table = pd.byte_table()
    num_states = len(table)
    sink = num_states
    augmented = np.zeros((num_states + 1, 256), np.int32)
    augmented[:num_states] = table
    stuck = np.zeros((num_states, 256), bool)
    for q in np.flatnonzero(np.diff(pd.call_ptr)):
        for k in range(pd.call_ptr[q], pd.call_ptr[q + 1]):
            stuck[q] |= pd.first[pd.call_machine[k]]
    finals = np.flatnonzero(pd.dfa.accepting)
    stuck[finals] |= pd.follow[pd.state_machine[finals]]
    stuck &= table == 0
    augmented[:num_states][stuck] = sink
    augmented[sink] = sink
    accepting = np.append(pd.dfa.accepting, True)
    entries = walk_entries(byte_dfa(augmented, accepting), trie, vocab_size, eos_token_ids,
                           progress)
    walked = time.perf_counter()

    kernel = _Kernel(pd, table)
    data, offsets = _token_data(token_bytes)
    x_state, x_token = _pairs_into(entries, sink)
    kind, nxt, pos, pushes = kernel.walk(x_state, data, offsets[x_token], offsets[x_token + 1])
    push_ids = _PushSequences()
    suffixes = _Suffixes(data, offsets)
    x_next, x_arg = _outcomes(kind, nxt, pos, pushes, x_token, push_ids, suffixes)
    live = x_next != -2
    returned = {(int(pd.state_machine[q]), int(a)) for q, a in
                zip(x_state[x_next == -1], x_arg[x_next == -1])}
    s_arrays = _resolve_suffixes(pd, kernel, suffixes, returned, push_ids)

    keep = entries.entry_next != sink
    owner = np.repeat(np.arange(num_states + 1), np.diff(entries.state_ptr))
    counts = np.bincount(owner[keep], minlength=num_states)
    state_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(counts, out=state_ptr[1:])
    plain = _without_unused_classes(TokenEntries(entries.token_class, state_ptr,
                                                 entries.entry_class[keep],
                                                 entries.entry_next[keep]))
    has_stack_tokens = np.bincount(x_state[live], minlength=num_states) > 0
    ordinary = factor(plain, pd.dfa.accepting | has_stack_tokens)

    x_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(np.bincount(x_state[live], minlength=num_states), out=x_ptr[1:])
    order = np.lexsort((x_token[live], x_state[live]))
    x = (x_token[live][order], x_next[live][order], x_arg[live][order])
    push_ptr, push_states = push_ids.arrays()
    cost = _return_cost(ordinary, pd.dfa.accepting, x_ptr, x[1], x[2], push_ptr, push_states)
    if timings is not None:
        timings["alignment"] = timings.get("alignment", 0.0) + walked - started
        timings["factoring"] = timings.get("factoring", 0.0) + time.perf_counter() - walked
    return CallTable(ordinary, x_ptr, *x, *s_arrays, push_ptr, push_states, cost)


def _without_unused_classes(entries: TokenEntries) -> TokenEntries:
    """Token classes renumbered over the entries left: a class only the sink used (its own
    row allows every token) becomes class 0, "never allowed" by the ordinary table."""
    used = np.unique(entries.entry_class)
    new_id = np.zeros(int(entries.token_class.max(initial=0)) + 1, np.int32)
    new_id[used] = np.arange(1, len(used) + 1, dtype=np.int32)
    return TokenEntries(new_id[entries.token_class], entries.state_ptr,
                        new_id[entries.entry_class], entries.entry_next)


def _token_data(token_bytes) -> tuple[np.ndarray, np.ndarray]:
    """All tokens' bytes in one array, token t at data[offsets[t]:offsets[t+1]]."""
    chunks = [b or b"" for b in token_bytes]
    offsets = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(c) for c in chunks], out=offsets[1:])
    return np.frombuffer(b"".join(chunks), np.uint8), offsets


def _pairs_into(entries: TokenEntries, sink: int) -> tuple[np.ndarray, np.ndarray]:
    """The (state, token) pairs whose entry leads to the sink."""
    owner = np.repeat(np.arange(len(entries.state_ptr) - 1), np.diff(entries.state_ptr))
    hit = (entries.entry_next == sink) & (owner != sink)
    states, classes = owner[hit], entries.entry_class[hit]
    by_class = np.argsort(entries.token_class, kind="stable")
    class_ptr = np.zeros(int(entries.token_class.max(initial=0)) + 2, np.int64)
    np.cumsum(np.bincount(entries.token_class), out=class_ptr[1:len(class_ptr)])
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
            distinct, inverse = np.unique(pushes[rows, 1:1 + length], axis=0,
                                          return_inverse=True)
            found = [self.id(tuple(row)) for row in distinct.tolist()]
            ids[rows] = np.asarray(found, np.int32)[inverse.reshape(-1)]
        return ids

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        seqs = sorted(self.ids, key=self.ids.__getitem__)
        ptr = np.zeros(len(seqs) + 1, np.int64)
        np.cumsum([len(s) for s in seqs], out=ptr[1:])
        return ptr, np.array([q for s in seqs for q in s], np.int32)


class _Suffixes:
    """Interned suffixes of tokens (the bytes after a return), by content."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray) -> None:
        self.data, self.offsets = data, offsets
        self.ids: dict[bytes, int] = {}
        self.spans: list[tuple[int, int]] = []  # (lo, hi) into data

    def id(self, token: int, pos: int) -> int:
        return self.id_span(int(self.offsets[token]) + pos, int(self.offsets[token + 1]))

    def id_span(self, lo: int, hi: int) -> int:
        key = self.data[lo:hi].tobytes()
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.spans)
            self.spans.append((lo, hi))
        return found


def _outcomes(kind, nxt, pos, pushes, tokens, push_ids: _PushSequences,
              suffixes: _Suffixes) -> tuple[np.ndarray, np.ndarray]:
    """(next, arg) per walked pair: next -1 returns (arg: suffix), -2 dies. Push sequences and
    suffixes are interned once per distinct value."""
    next_out = np.full(len(kind), -2, np.int32)
    arg = np.zeros(len(kind), np.int32)
    stays = np.flatnonzero(kind == _STAYS)
    next_out[stays] = nxt[stays]
    if len(stays):
        arg[stays] = push_ids.ids_of_rows(pushes)
    back = np.flatnonzero(kind == _RETURNS)
    next_out[back] = -1
    if len(back):
        distinct, inverse = np.unique(np.stack([tokens[back], pos[back]], axis=1), axis=0,
                                      return_inverse=True)
        ids = [suffixes.id(int(token), int(at)) for token, at in distinct]
        arg[back] = np.asarray(ids, np.int32)[inverse.reshape(-1)]
    return next_out, arg


def _resolve_suffixes(pd: PushdownDFA, kernel: "_Kernel", suffixes: "_Suffixes",
                      returned: set[tuple[int, int]], push_ids: _PushSequences) -> tuple:
    """Each suffix from each return state it can meet, until no new suffix appears.
    `returned` holds (machine returned from, suffix) of the returning tokens."""
    returns_of = [np.unique(pd.call_return[pd.call_machine == m])
                  for m in range(len(pd.machine_names))]
    return_ptr = np.zeros(len(returns_of) + 1, np.int64)
    np.cumsum([len(r) for r in returns_of], out=return_ptr[1:])
    return_states = np.concatenate([*returns_of, np.zeros(0, np.int32)]).astype(np.int32)
    pending, done = set(returned), set()
    rows: dict[tuple[int, int], tuple[int, int]] = {}  # (state, suffix) -> (next, arg)
    while pending:
        batch = np.array(sorted(pending), np.int64).reshape(-1, 2)
        done.update(pending)
        pending = set()
        sizes = return_ptr[batch[:, 0] + 1] - return_ptr[batch[:, 0]]
        if not sizes.sum():
            continue
        # every (return state of the machine, suffix) of the batch
        within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        starts_array = return_states[np.repeat(return_ptr[batch[:, 0]], sizes) + within]
        suffix_array = np.repeat(batch[:, 1], sizes)
        spans = np.array(suffixes.spans, np.int64).reshape(-1, 2)
        lo, hi = spans[suffix_array, 0], spans[suffix_array, 1]
        kind, nxt, pos, pushes = kernel.walk(starts_array, suffixes.data, lo, hi)
        stays = np.flatnonzero(kind == _STAYS)
        for state, suffix, after, pushed in zip(starts_array[stays].tolist(),
                                                suffix_array[stays].tolist(),
                                                nxt[stays].tolist(),
                                                push_ids.ids_of_rows(pushes).tolist()):
            rows[(state, suffix)] = (after, pushed)
        back = np.flatnonzero(kind == _RETURNS)
        for state, suffix, start, end in zip(starts_array[back].tolist(),
                                             suffix_array[back].tolist(),
                                             (lo[back] + pos[back]).tolist(), hi[back].tolist()):
            rest = suffixes.id_span(start, end)
            rows[(state, suffix)] = (-1, rest)
            key = (int(pd.state_machine[state]), rest)
            if key not in done:
                pending.add(key)
    columns = np.array([(*key, *rows[key]) for key in sorted(rows)], np.int64).reshape(-1, 4).T
    return tuple(c.astype(np.int32) for c in columns)


class _Kernel:
    """The byte-level pushdown walk, compiled: lookup tables for `_core.pushdown_walk`."""

    def __init__(self, pd: PushdownDFA, table: np.ndarray) -> None:
        self.table = table
        self.num_machines = len(pd.machine_start)
        self.final = np.ascontiguousarray(pd.dfa.accepting, dtype=np.bool_)
        callers = np.flatnonzero(np.diff(pd.call_ptr))
        self.call_row = np.full(len(table), -1, np.int32)
        self.call_row[callers] = np.arange(len(callers))
        # [row, byte] -> (callee start, return state) of the call that byte opens, or -1
        self.call_start = np.full((max(len(callers), 1), 256), -1, np.int32)
        self.call_ret = np.zeros((max(len(callers), 1), 256), np.int32)
        for row, q in enumerate(callers):
            for k in range(pd.call_ptr[q], pd.call_ptr[q + 1]):
                opens = pd.first[pd.call_machine[k]]
                self.call_start[row, opens] = pd.machine_start[pd.call_machine[k]]
                self.call_ret[row, opens] = pd.call_return[k]

    def walk(self, starts, data, lo, hi):
        """Walk data[lo[i]:hi[i]] from starts[i] with an empty frame: (kind, next state,
        bytes read before a return, pushes) per walk. `pushes` has a row per walk that stays
        (`kind == _STAYS`, in order): the number of return states pushed, then those states
        (bottom first), zero-padded."""
        starts = np.ascontiguousarray(starts, np.int32)

        def run(which, room):
            return _core.pushdown_walk(self.table, self.final, self.call_row, self.call_start,
                                       self.call_ret, starts[which], data, lo[which],
                                       hi[which], room)

        # most walks push a few states: room for _FEW_PUSHES each, the others walked again
        kind, nxt, pos, push_len, push_buf = run(slice(None), _FEW_PUSHES)
        many = np.flatnonzero(push_len > _FEW_PUSHES)
        if len(many):
            # a byte opens at most one call per machine (none calls itself before reading a
            # byte): room for that many per byte is always enough
            longest = int((hi[many] - lo[many]).max())
            room = max(longest * self.num_machines, _FEW_PUSHES + 1)
            kind[many], nxt[many], pos[many], push_len[many], more = run(many, room)
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
        return kind, nxt, pos, pushes


def _return_cost(table: FactoredRows, final: np.ndarray, x_ptr, x_next, x_arg, push_ptr,
                 push_states) -> np.ndarray:
    """Tokens that take each state to a final state of its machine, by fixpoint: a stack
    token costs 1 plus finishing the callee it ends in and every frame it pushed. An upper
    bound of the shortest completion (tokens may also cross frames), used for budgets."""
    num_states = len(final)
    inf = np.int64(1) << 40
    cost = np.where(final, 0, inf).astype(np.int64)
    lengths = np.diff(table.row_ptr)[table.state_row]
    entry_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(lengths, out=entry_ptr[1:])
    within = np.arange(int(entry_ptr[-1])) - np.repeat(entry_ptr[:-1], lengths)
    entry_next = np.repeat(np.arange(num_states), lengths) + \
        table.row_delta[np.repeat(table.row_ptr[table.state_row], lengths) + within]
    # the stack tokens that stay (end in a state, with return states pushed), per state
    stays = x_next >= 0
    kept = np.zeros(len(x_ptr), np.int64)
    np.cumsum(np.bincount(np.repeat(np.arange(num_states), np.diff(x_ptr))[stays],
                          minlength=num_states), out=kept[1:])
    x_target, x_seq = x_next[stays], x_arg[stays]
    for _ in range(num_states + 1):
        seq_cost = _segment_reduce(np.add, cost[push_states], push_ptr, 0)
        candidate = np.minimum(cost, 1 + _segment_reduce(np.minimum, cost[entry_next],
                                                         entry_ptr, inf))
        candidate = np.minimum(candidate, 1 + _segment_reduce(
            np.minimum, cost[x_target] + seq_cost[x_seq], kept, inf))
        candidate = np.minimum(candidate, inf)
        if np.array_equal(candidate, cost):
            break
        cost = candidate
    return np.where(cost >= inf, -1, cost).astype(np.int32)


def _segment_reduce(ufunc: np.ufunc, values: np.ndarray, ptr: np.ndarray,
                    empty: int) -> np.ndarray:
    """`ufunc` over each segment values[ptr[i]:ptr[i+1]]; `empty` for an empty segment."""
    out = np.full(len(ptr) - 1, empty, np.int64)
    filled = np.flatnonzero(np.diff(ptr))
    if len(filled):
        out[filled] = ufunc.reduceat(values, ptr[filled])
    return out
