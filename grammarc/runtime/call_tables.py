"""The tables behind the masks of a grammar with calls (`runtime.calls`): per table state, its
stack tokens split into those that push, ordered by the tokens that finish the frames after
them, and those that return (`StateTables`); per table state and top return state, its
returning tokens resolved on that return state (`TopTables`); per such pair and return state
below it, the first read of the rests it leaves (`ReadTables`). Each is computed for many
states, pairs or reads at once, in vectorised passes over blocks of at most `_BLOCK`
elements: all of them when a grammar is compiled in the process or warmed
(`CallGrammar.plan`), or one on its first use otherwise. A state's, a pair's or a read's
tables are then slices. Numpy only."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..format.table import TokenTable, positions_within, returns_after
from .arrays import python_ints

if TYPE_CHECKING:
    from .calls import CallGrammar

NONE = np.zeros(0, np.int64)
NEVER = np.iinfo(np.int32).max  # the sort key of a need of -1 (never finishes)
_FEW = 128  # up to this many values, Python's set and sort cost less than np.unique's
_BLOCK = 1 << 16  # elements computed at once: temporaries stay small and in cache


def levels_of(need: np.ndarray) -> tuple[int, ...]:
    """The sorted distinct needs >= 0 of `need` (-1: never)."""
    kept = need[need >= 0]
    return tuple(sorted(set(kept.tolist())) if len(kept) <= _FEW else np.unique(kept).tolist())


def distinct_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` of a flat array (a few µs when short)."""
    if len(values) > _FEW:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1)
    listed = values.tolist()
    distinct = sorted(set(listed))
    index = {value: position for position, value in enumerate(distinct)}
    return np.array(distinct, values.dtype), np.array([index[v] for v in listed], np.int64)


def _run_sizes(owner: np.ndarray, rows: int) -> np.ndarray:
    """How many elements each of `rows` consecutive runs has, each element's run given."""
    return np.bincount(owner, minlength=rows)


def _offsets(counts: np.ndarray) -> array:
    """The offsets of consecutive runs of `counts` elements (`python_ints`)."""
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return python_ints(offsets)


def _by_blocks(lengths: np.ndarray,
               compute: Callable[[int, int, int, int], tuple[np.ndarray, ...]]
               ) -> list[np.ndarray]:
    """`compute(a, b, lo, hi)` over consecutive rows a..b-1, whose elements (rows have
    `lengths`) are lo..hi-1, of at most `_BLOCK` elements each (or one row), its outputs
    joined block after block."""
    ends = [0, *np.cumsum(lengths).tolist()]
    parts, a = [], 0
    while True:
        b = max(bisect_right(ends, ends[a] + _BLOCK) - 1, a + 1) if a < len(lengths) else a
        parts.append(compute(a, b, ends[a], ends[b]))
        if b >= len(lengths):
            break
        a = b
    return [np.concatenate(column) for column in zip(*parts)]


class Runs:
    """Consecutive runs of elements: run i is `values[k][ptr[i]:ptr[i + 1]]` of each of the
    aligned `values`. The elements of chosen runs are gathered a block at a time."""

    def __init__(self, ptr: list[int] | np.ndarray, *values: np.ndarray) -> None:
        self.ptr, self.values = np.asarray(ptr, np.int64), values

    def lengths(self, runs: np.ndarray) -> np.ndarray:
        """How many elements each of `runs` has."""
        return self.ptr[runs + 1] - self.ptr[runs]

    def gather(self, runs: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """The elements of `runs` (of `lengths`), run after run, of each of `values`."""
        entries = np.repeat(self.ptr[runs], lengths) + positions_within(lengths)
        return [values[entries] for values in self.values]


class Needs:
    """Tokens ordered by need (`needs`: the tokens that finish the frames after each, NEVER
    when they never do; both int32), so that the tokens within a need are a prefix. Where
    they are more than a sixteenth of the vocabulary, a cut is one comparison over a rank of
    every token (the index of its need among `levels`; 254: never, 255: not one of them;
    made on the first cut or by `warm`), not thousands of tokens written."""

    __slots__ = ("tokens", "needs", "size", "_vocab_size", "_levels", "_rank")

    def __init__(self, tokens: np.ndarray, needs: np.ndarray, vocab_size: int) -> None:
        self.tokens, self.needs, self.size = tokens, needs, len(tokens)
        self._vocab_size = vocab_size
        self._levels: tuple[int, ...] | None = None
        self._rank: np.ndarray | None = None

    @property
    def levels(self) -> tuple[int, ...]:
        """The sorted distinct needs, never excluded."""
        if self._levels is None:
            kept = self.needs[:int(np.searchsorted(self.needs, NEVER))]
            self._levels = tuple(dict.fromkeys(kept.tolist())) if len(kept) <= _FEW else \
                tuple(kept[np.r_[True, kept[1:] != kept[:-1]]].tolist())
        return self._levels

    @property
    def most_need(self) -> float:
        """The largest need (inf: one never finishes; -1: no token)."""
        return -1 if not self.size else float("inf") if self.needs[-1] == NEVER else \
            int(self.needs[-1])

    def add(self, mask: np.ndarray, limit: int | None = None) -> None:
        """Allow in `mask` the tokens whose need is at most `limit` (None: all of them)."""
        if not self.size:
            return
        if limit is None:  # every token: with a rank (made by a cut or `warm`) one OR
            if self._rank is None:
                mask[self.tokens] = True
            else:
                np.logical_or(mask, self._rank != 255, out=mask)
        elif (rank := self._ranked()) is not None:
            mask |= rank < bisect_right(self.levels, limit)
        else:
            cut = np.searchsorted(self.needs, min(limit, NEVER - 1), "right")
            mask[self.tokens[:int(cut)]] = True

    def warm(self) -> None:
        """Compute now what budget cuts use."""
        self._ranked()

    def _ranked(self) -> np.ndarray | None:
        if self._rank is None and 16 * self.size > self._vocab_size and len(self.levels) < 254:
            rank = np.full(self._vocab_size, 255, np.uint8)
            rank[self.tokens] = np.where(self.needs == NEVER, 254,
                                         np.searchsorted(self.levels, self.needs))
            self._rank = rank
        return self._rank


NO_NEEDS = Needs(NONE, NONE, 0)


class StateInfo:
    """What a table state's masks need whatever the stack: its tokens that push (`push`,
    with the tokens to finish the frames after each, the pushed ones included) and that
    return (`ret_*`), and, for budgets (computed on first use or by `warm`), the same for its
    ordinary tokens and the distinct needs of both (`levels`); the frames below excluded.
    One per table state met, so slotted: a warmed grammar of 50,000 states keeps one small
    object each for the garbage collector to walk, not three (object, dict, `Needs`)."""

    __slots__ = ("_table", "_q", "_lo", "_hi", "push", "ret_tokens", "ret_suffix",
                 "_row_need", "_row_fits", "_row_tokens", "_most_need", "_levels")

    def __init__(self, table: TokenTable, q: int, push: Needs, ret_tokens: np.ndarray,
                 ret_suffix: np.ndarray) -> None:
        self._table, self._q = table, q
        self._lo, self._hi = table.row_ptr[table.state_row[q]], \
            table.row_ptr[table.state_row[q] + 1]
        self.push, self.ret_tokens, self.ret_suffix = push, ret_tokens, ret_suffix
        self._row_need: np.ndarray | None = None
        self._row_fits: float | None = None
        self._row_tokens: int | None = None
        self._most_need: float | None = None
        self._levels: tuple[int, ...] | None = None

    @property
    def row_classes(self) -> np.ndarray:
        """The classes of its ordinary tokens."""
        return self._table.row_class[self._lo:self._hi]

    @property
    def row_need(self) -> np.ndarray:
        """Tokens to finish the frame after each ordinary token (-1: never)."""
        if self._row_need is None:
            table = self._table
            self._row_need = table.min_tokens_to_accept[self._q + table.row_delta[self._lo:
                                                                                   self._hi]]
        return self._row_need

    @property
    def row_fits(self) -> float:
        """The least budget need within which every ordinary token fits (inf: never)."""
        if self._row_fits is None:
            need = self.row_need
            self._row_fits = float("inf") if (need < 0).any() else int(need.max(initial=0))
        return self._row_fits

    @property
    def row_tokens(self) -> int:
        """How many ordinary tokens it has."""
        if self._row_tokens is None:
            class_ptr = self._table.tokens_by_class[1]
            self._row_tokens = int((class_ptr[self.row_classes + 1]
                                    - class_ptr[self.row_classes]).sum())
        return self._row_tokens

    @property
    def most_need(self) -> float:
        """The largest need of its ordinary and pushing tokens (inf: one never finishes)."""
        if self._most_need is None:
            self._most_need = max(self.row_fits, self.push.most_need)
        return self._most_need

    @property
    def levels(self) -> tuple[int, ...]:
        """The sorted distinct needs >= 0 of the ordinary and pushing tokens."""
        if self._levels is None:
            self._levels = tuple(sorted(set(levels_of(self.row_need)) | set(self.push.levels)))
        return self._levels

    def warm(self) -> None:
        """Compute now what budgets use."""
        self.levels, self.row_tokens, self.most_need  # noqa: B018 (computed once, kept)
        self.push.warm()


class StateTables:
    """The stack tokens of the table states `states`, split (docs/FORMAT.md): those that
    push, ordered by need per state, and those that return, with their suffixes."""

    def __init__(self, grammar: "CallGrammar", states: np.ndarray) -> None:
        self._table, self._vocab_size = grammar.table, grammar.vocab_size  # not the grammar,
        # which holds these tables: a cycle would keep a dropped grammar until a collection
        lo = grammar._stack_ptr[states]
        lengths = grammar._stack_ptr[states + 1] - lo
        token = grammar._stack_token

        def split(a: int, b: int, first: int, last: int) -> tuple[np.ndarray, ...]:
            entries = np.repeat(lo[a:b], lengths[a:b]) + positions_within(lengths[a:b])
            owner = np.repeat(np.arange(b - a), lengths[a:b])
            nxt, arg = grammar._stack_next[entries], grammar._stack_arg[entries]
            pushing = nxt >= 0
            pushes, after, counts = entries[pushing], nxt[pushing], grammar._counts
            reps = np.where(counts.row[after] >= 0, counts.stack_reps[pushes], 0) \
                if counts.stack_reps is not None else np.zeros(len(after), np.int64)
            own, pushed = counts.costs(after, reps), grammar._push_cost[arg[pushing]]
            need = np.where((own < 0) | (pushed < 0), NEVER, own + pushed).astype(np.int32)
            push_owner = owner[pushing]
            order = np.lexsort((need, push_owner))
            returning = ~pushing
            return (token[pushes][order].astype(np.int32), need[order],
                    _run_sizes(push_owner, b - a),
                    token[entries[returning]], arg[returning],
                    _run_sizes(owner[returning], b - a))

        (self._push_token, self._push_need, push_counts, self._ret_token, self._ret_suffix,
         ret_counts) = _by_blocks(lengths, split)
        self._push_ptr, self._ret_ptr = _offsets(push_counts), _offsets(ret_counts)

    def info(self, i: int, q: int) -> StateInfo:
        """The `StateInfo` of table state q, `states[i]`."""
        a, b = self._push_ptr[i], self._push_ptr[i + 1]
        c, d = self._ret_ptr[i], self._ret_ptr[i + 1]
        push = Needs(self._push_token[a:b], self._push_need[a:b], self._vocab_size) \
            if b > a else NO_NEEDS
        return StateInfo(self._table, q, push, self._ret_token[c:d], self._ret_suffix[c:d])

    def with_returns(self) -> np.ndarray:
        """The indices i of `states` with returning tokens."""
        return np.flatnonzero(np.diff(self._ret_ptr))

    @property
    def returning(self) -> Runs:
        """Per state, its returning tokens with their suffixes."""
        return Runs(self._ret_ptr, self._ret_token, self._ret_suffix)


@dataclass(frozen=True)
class Read:
    """Suffixes read each from a return state, one step of docs/FORMAT.md's `resolve` for
    many at once: the positions of those that stop in its frame (`stops`, alive) with the
    tokens that finish the frames from there, those below the return state excluded
    (`stop_need`, -1: never), and of those that return past the frame too (`further`), with
    the `rests` they leave to read below. The others die."""

    stops: np.ndarray
    stop_need: np.ndarray
    further: np.ndarray
    rests: np.ndarray


def read_suffixes(grammar: "CallGrammar", rets: int | np.ndarray,
                  suffixes: np.ndarray) -> Read:
    """`Read` of `suffixes` from return state `rets` (one for all, or one per suffix; a
    site reads each from its state for the suffix's exit class)."""
    if grammar._has_sites:
        rets = returns_after(np.broadcast_to(rets, np.shape(suffixes)),
                             grammar._suffix_class[suffixes], grammar._site_ptr,
                             grammar._site_next)
    keys = rets * grammar._num_suffixes + suffixes
    suffix_key = grammar._suffix_key
    if not len(suffix_key):
        return Read(NONE, NONE, NONE, NONE)
    j = np.minimum(np.searchsorted(suffix_key, keys), len(suffix_key) - 1)
    found = suffix_key[j] == keys
    nxt, arg = grammar._suffix_next[j], grammar._suffix_arg[j]
    stops = np.flatnonzero(found & (nxt >= 1))
    after, entries = nxt[stops], j[stops]
    counts = grammar._counts
    reps = np.where(counts.row[after] >= 0, counts.suffix_reps[entries], 0) \
        if counts.suffix_reps is not None else np.zeros(len(after), np.int64)
    own, pushed = counts.costs(after, reps), grammar._push_cost[arg[stops]]
    further = np.flatnonzero(found & (nxt < 0))
    return Read(stops, np.where((own < 0) | (pushed < 0), -1, own + pushed), further,
                arg[further])


class Rests:
    """The rests of a (table state, top return state) resolved on the frames below the top:
    the positions of those alive (`alive`) and the tokens that finish every frame after
    each (`need`, -1: never). Equal sets give equal `alive_key`s, equal needs too equal
    `need_key`s (the mask cache's keys); `levels`: the sorted distinct needs >= 0;
    `most_need`: the largest need (inf: one never finishes; -1: none alive)."""

    __slots__ = ("size", "alive", "need", "alive_key", "need_key", "levels", "most_need")

    def __init__(self, size: int, alive: np.ndarray, need: np.ndarray) -> None:
        self.size = size
        self.alive, self.need = alive.astype(np.int32), need.astype(np.int32)
        self.alive_key = self.alive.tobytes()  # bytes keep their hash once taken
        self.need_key = self.alive_key + self.need.tobytes()
        self.levels = levels_of(self.need)
        self.most_need = float("inf") if len(self.need) and self.need.min() < 0 else \
            self.levels[-1] if self.levels else -1

    def within(self, limit: int | None = None) -> np.ndarray:
        """Per rest, whether it lives and (unless `limit` is None) finishes every frame in
        at most `limit` tokens."""
        out = np.zeros(self.size, np.bool_)
        out[self.alive if limit is None else
            self.alive[(self.need >= 0) & (self.need <= limit)]] = True
        return out


@dataclass(frozen=True)
class Top:
    """The returning tokens of a table state resolved against one top return state: those
    that stop in it (`stop`, alive whatever lies below; the need excludes the frames below
    the top) and those that return again (`deep_tokens`, with the index of their rest in
    `deep_suffixes`, decided by the frames further down; `dead`: those rests on an empty
    stack). Returning tokens not listed die."""

    stop: Needs
    deep_tokens: np.ndarray
    deep_group: np.ndarray
    deep_suffixes: np.ndarray
    dead: Rests


@lru_cache(maxsize=256)
def _dead_rests(size: int) -> Rests:
    """`size` rests on an empty stack: none alive (one value per size, shared)."""
    return Rests(size, NONE, NONE)


NO_TOP = Top(NO_NEEDS, NONE, NONE, NONE, _dead_rests(0))


class TopTables:
    """The returning tokens of table states resolved each on a return state on top of the
    stack, for many pairs at once: pair i's return state `rets[i]` and its state's
    returning tokens with their suffixes, run `states[i]` of `returning`."""

    def __init__(self, grammar: "CallGrammar", rets: np.ndarray, states: np.ndarray,
                 returning: Runs) -> None:
        self._vocab_size = grammar.vocab_size
        width = grammar._num_suffixes
        lengths = returning.lengths(states)

        def resolve(a: int, b: int, lo: int, hi: int) -> tuple[np.ndarray, ...]:
            owner = np.repeat(np.arange(b - a), lengths[a:b])
            tokens, suffixes = returning.gather(states[a:b], lengths[a:b])
            read = read_suffixes(grammar, rets[a:b][owner], suffixes)
            stop_owner = owner[read.stops]
            need = np.where(read.stop_need < 0, NEVER, read.stop_need).astype(np.int32)
            order = np.lexsort((need, stop_owner))
            deep_owner = owner[read.further]
            distinct, inverse = distinct_inverse(deep_owner * width + read.rests)
            suffix_counts = _run_sizes(distinct // width, b - a)
            first = np.cumsum(suffix_counts) - suffix_counts
            return (tokens[read.stops][order].astype(np.int32), need[order],
                    _run_sizes(stop_owner, b - a),
                    tokens[read.further], inverse - first[deep_owner],
                    _run_sizes(deep_owner, b - a), distinct % width, suffix_counts)

        (self._stop_token, self._stop_need, stop_counts, self._deep_token, self._group,
         deep_counts, self._suffix, suffix_counts) = _by_blocks(lengths, resolve)
        self._stop_ptr, self._deep_ptr = _offsets(stop_counts), _offsets(deep_counts)
        self._suffix_ptr = _offsets(suffix_counts)

    @property
    def rests(self) -> Runs:
        """Per pair, the rests it leaves (`Top.deep_suffixes`)."""
        return Runs(self._suffix_ptr, self._suffix)

    def top(self, i: int) -> Top:
        """The `Top` of pair i."""
        a, b = self._stop_ptr[i], self._stop_ptr[i + 1]
        c, d = self._deep_ptr[i], self._deep_ptr[i + 1]
        e, f = self._suffix_ptr[i], self._suffix_ptr[i + 1]
        return Top(Needs(self._stop_token[a:b], self._stop_need[a:b], self._vocab_size),
                   self._deep_token[c:d], self._group[c:d], self._suffix[e:f],
                   _dead_rests(f - e))


class ReadTables:
    """The rests of many pairs read each from a return state below their top, at once: read
    i reads the rests of pair `pairs[i]` (its run of `rests`) from return state `rets[i]`
    (the first step of resolving a pair's rests on a frame, `CallGrammar._first_read`)."""

    def __init__(self, grammar: "CallGrammar", rets: np.ndarray, pairs: np.ndarray,
                 rests: Runs) -> None:
        lengths = rests.lengths(pairs)

        def read_all(a: int, b: int, lo: int, hi: int) -> tuple[np.ndarray, ...]:
            owner = np.repeat(np.arange(b - a), lengths[a:b])
            start = np.repeat(np.cumsum(lengths[a:b]) - lengths[a:b], lengths[a:b])
            suffixes, = rests.gather(pairs[a:b], lengths[a:b])
            read = read_suffixes(grammar, rets[a:b][owner], suffixes)
            return (read.stops - start[read.stops], read.stop_need,
                    _run_sizes(owner[read.stops], b - a), read.further - start[read.further],
                    read.rests, _run_sizes(owner[read.further], b - a))

        (self._stops, self._stop_need, stop_counts, self._further, self._rests,
         further_counts) = _by_blocks(lengths, read_all)
        self._stop_ptr, self._further_ptr = _offsets(stop_counts), _offsets(further_counts)

    def read(self, i: int) -> Read:
        """The `Read` of read i."""
        a, b = self._stop_ptr[i], self._stop_ptr[i + 1]
        c, d = self._further_ptr[i], self._further_ptr[i + 1]
        return Read(self._stops[a:b], self._stop_need[a:b], self._further[c:d],
                    self._rests[c:d])
