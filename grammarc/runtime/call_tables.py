"""The tables behind the masks of a grammar with calls (`runtime.calls`): per table state, its
stack tokens split into those that push, ordered by the tokens that finish the frames after
them, and those that return (`StateTables`); per table state and top return state, its
returning tokens resolved on that return state (`TopTables`). Each is computed for many
states or pairs at once, in one vectorised pass: every table state and every possible pair
when a grammar is compiled in the process or warmed (`CallGrammar.plan`), or one state or pair
on its first use otherwise. A state's or a pair's tables are then slices. Numpy only."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..format.table import positions_within

if TYPE_CHECKING:
    from .calls import CallGrammar

NONE = np.zeros(0, np.int64)
NEVER = np.iinfo(np.int64).max  # the sort key of a need of -1 (never finishes)
_FEW = 128  # up to this many values, Python's set and sort cost less than np.unique's


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


def _offsets(owner: np.ndarray, rows: int) -> list[int]:
    """The offsets of `rows` consecutive runs, each element's run given (nondecreasing)."""
    return [0, *np.cumsum(np.bincount(owner, minlength=rows)).tolist()]


def _gather(offsets: list[int], values: tuple[np.ndarray, ...],
            runs: np.ndarray) -> tuple[np.ndarray, ...]:
    """The lengths of runs `runs` (of those `offsets` delimit), and their elements of each
    of `values`, run after run."""
    ptr = np.asarray(offsets, np.int64)
    lengths = ptr[runs + 1] - ptr[runs]
    entries = np.repeat(ptr[runs], lengths) + positions_within(lengths)
    return (lengths, *(v[entries] for v in values))


class Needs:
    """Tokens ordered by need (`needs`: the tokens that finish the frames after each, NEVER
    when they never do), so that the tokens within a need are a prefix. Where they are more
    than a sixteenth of the vocabulary, a cut is one comparison over a rank of every token
    (the index of its need among `levels`; 254: never, 255: not one of them; made on the
    first cut), not thousands of tokens written."""

    __slots__ = ("tokens", "needs", "size", "_vocab_size", "_levels", "_rank")

    def __init__(self, tokens: np.ndarray, needs: np.ndarray, vocab_size: int) -> None:
        self.tokens, self.needs, self.size = tokens, needs, len(tokens)
        self._vocab_size = vocab_size
        self._levels: tuple[int, ...] | None = None
        self._rank: np.ndarray | None = None

    @classmethod
    def ordering(cls, tokens: np.ndarray, need: np.ndarray, vocab_size: int) -> "Needs":
        """Needs of `tokens` in any order, `need` -1 where they never finish."""
        key = np.where(need < 0, NEVER, need)
        order = np.argsort(key, kind="stable")
        return cls(tokens[order], key[order], vocab_size)

    @property
    def levels(self) -> tuple[int, ...]:
        """The sorted distinct needs, never excluded."""
        if self._levels is None:
            kept = self.needs[:int(np.searchsorted(self.needs, NEVER))]
            self._levels = tuple(dict.fromkeys(kept.tolist())) if len(kept) <= _FEW else \
                tuple(kept[np.r_[True, kept[1:] != kept[:-1]]].tolist())
        return self._levels

    def add(self, mask: np.ndarray, limit: int | None = None) -> None:
        """Allow in `mask` the tokens whose need is at most `limit` (None: all of them)."""
        if not self.size:
            return
        if limit is None:
            mask[self.tokens] = True
        elif (rank := self._ranked()) is not None:
            mask |= rank < bisect_right(self.levels, limit)
        else:
            mask[self.tokens[:int(np.searchsorted(self.needs, limit, "right"))]] = True

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
    ordinary tokens and the distinct needs of both (`levels`); the frames below excluded."""

    def __init__(self, grammar: "CallGrammar", q: int, push: Needs, ret_tokens: np.ndarray,
                 ret_suffix: np.ndarray) -> None:
        table = grammar.table
        self._grammar, self._q = grammar, q
        self._lo, self._hi = table.row_ptr[table.state_row[q]], \
            table.row_ptr[table.state_row[q] + 1]
        self.push, self.ret_tokens, self.ret_suffix = push, ret_tokens, ret_suffix

    @property
    def row_classes(self) -> np.ndarray:
        """The classes of its ordinary tokens."""
        return self._grammar.table.row_class[self._lo:self._hi]

    @cached_property
    def row_need(self) -> np.ndarray:
        """Tokens to finish the frame after each ordinary token (-1: never)."""
        table = self._grammar.table
        return table.min_tokens_to_accept[self._q + table.row_delta[self._lo:self._hi]]

    @cached_property
    def row_fits(self) -> float:
        """The least budget need within which every ordinary token fits (inf: never)."""
        need = self.row_need
        return float("inf") if (need < 0).any() else int(need.max(initial=0))

    @cached_property
    def row_tokens(self) -> int:
        """How many ordinary tokens it has."""
        class_ptr = self._grammar.table.tokens_by_class[1]
        return int((class_ptr[self.row_classes + 1] - class_ptr[self.row_classes]).sum())

    @cached_property
    def levels(self) -> tuple[int, ...]:
        """The sorted distinct needs >= 0 of the ordinary and pushing tokens."""
        return tuple(sorted(set(levels_of(self.row_need)) | set(self.push.levels)))

    def warm(self) -> None:
        """Compute now what budgets use."""
        self.levels, self.row_tokens, self.row_fits  # noqa: B018 (cached properties)


class StateTables:
    """The stack tokens of the table states `states`, split (docs/FORMAT.md): those that
    push, ordered by need per state, and those that return, with their suffixes."""

    def __init__(self, grammar: "CallGrammar", states: np.ndarray) -> None:
        self._grammar = grammar
        lo = grammar._stack_ptr[states]
        lengths = grammar._stack_ptr[states + 1] - lo
        entries = np.repeat(lo, lengths) + positions_within(lengths)
        owner = np.repeat(np.arange(len(states)), lengths)
        nxt, arg = grammar._stack_next[entries], grammar._stack_arg[entries]
        pushing = nxt >= 0
        pushes, after, counts = entries[pushing], nxt[pushing], grammar._counts
        reps = np.where(counts.row[after] >= 0, counts.stack_reps[pushes], 0) \
            if counts.stack_reps is not None else np.zeros(len(after), np.int64)
        own, pushed = counts.costs(after, reps), grammar._push_cost[arg[pushing]]
        need = np.where((own < 0) | (pushed < 0), NEVER, own + pushed)
        push_owner = owner[pushing]
        order = np.lexsort((need, push_owner))
        self._push_token = grammar._stack_token[pushes][order]
        self._push_need = need[order]
        self._push_ptr = _offsets(push_owner, len(states))
        returning = ~pushing
        self._ret_token = grammar._stack_token[entries[returning]]
        self._ret_suffix = arg[returning]
        self._ret_ptr = _offsets(owner[returning], len(states))

    def info(self, i: int, q: int) -> StateInfo:
        """The `StateInfo` of table state q, `states[i]`."""
        a, b = self._push_ptr[i], self._push_ptr[i + 1]
        c, d = self._ret_ptr[i], self._ret_ptr[i + 1]
        grammar = self._grammar
        return StateInfo(grammar, q, Needs(self._push_token[a:b], self._push_need[a:b],
                                           grammar.vocab_size),
                         self._ret_token[c:d], self._ret_suffix[c:d])

    def with_returns(self) -> np.ndarray:
        """The indices i of `states` with returning tokens."""
        return np.flatnonzero(np.diff(self._ret_ptr))

    def returning(self, states: np.ndarray) -> tuple[np.ndarray, ...]:
        """How many returning tokens each of `states[i]` has (`i` given), and those tokens
        with their suffixes, state after state."""
        return _gather(self._ret_ptr, (self._ret_token, self._ret_suffix), states)


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
    """`Read` of `suffixes` from return state `rets` (one for all, or one per suffix)."""
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
    `need_key`s (the mask cache's keys); `levels`: the sorted distinct needs >= 0."""

    __slots__ = ("size", "alive", "need", "alive_key", "need_key", "levels")

    def __init__(self, size: int, alive: np.ndarray, need: np.ndarray) -> None:
        self.size = size
        self.alive, self.need = alive.astype(np.int32), need.astype(np.int32)
        self.alive_key = self.alive.tobytes()  # bytes keep their hash once taken
        self.need_key = self.alive_key + self.need.tobytes()
        self.levels = levels_of(self.need)

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
    `lengths[i]` returning tokens, the `tokens` with their `suffixes` pair after pair."""

    def __init__(self, grammar: "CallGrammar", rets: np.ndarray, lengths: np.ndarray,
                 tokens: np.ndarray, suffixes: np.ndarray) -> None:
        self._vocab_size = grammar.vocab_size
        pairs = len(rets)
        owner = np.repeat(np.arange(pairs), lengths)
        read = read_suffixes(grammar, rets[owner], suffixes)
        stop_owner = owner[read.stops]
        need = np.where(read.stop_need < 0, NEVER, read.stop_need)
        order = np.lexsort((need, stop_owner))
        self._stop_token, self._stop_need = tokens[read.stops][order], need[order]
        self._stop_ptr = _offsets(stop_owner, pairs)
        deep_owner = owner[read.further]
        self._deep_token = tokens[read.further]
        self._deep_ptr = _offsets(deep_owner, pairs)
        width = grammar._num_suffixes
        distinct, inverse = distinct_inverse(deep_owner * width + read.rests)
        self._suffix = distinct % width
        self._suffix_ptr = _offsets(distinct // width, pairs)
        self._group = inverse - np.asarray(self._suffix_ptr, np.int64)[deep_owner]

    def deep_suffixes(self, pairs: np.ndarray) -> tuple[np.ndarray, ...]:
        """How many rests each pair of `pairs` leaves (`Top.deep_suffixes`), and those
        rests, pair after pair."""
        return _gather(self._suffix_ptr, (self._suffix,), pairs)

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
    i reads `lengths[i]` rests from return state `rets[i]`, the `suffixes` read after read
    (the first step of resolving a pair's rests on a frame, `CallGrammar._first_read`)."""

    def __init__(self, grammar: "CallGrammar", rets: np.ndarray, lengths: np.ndarray,
                 suffixes: np.ndarray) -> None:
        owner = np.repeat(np.arange(len(rets)), lengths)
        start = np.repeat(np.cumsum(lengths) - lengths, lengths)
        read = read_suffixes(grammar, rets[owner], suffixes)
        self._stops, self._stop_need = read.stops - start[read.stops], read.stop_need
        self._stop_ptr = _offsets(owner[read.stops], len(rets))
        self._further, self._rests = read.further - start[read.further], read.rests
        self._further_ptr = _offsets(owner[read.further], len(rets))

    def read(self, i: int) -> Read:
        """The `Read` of read i."""
        a, b = self._stop_ptr[i], self._stop_ptr[i + 1]
        c, d = self._further_ptr[i], self._further_ptr[i + 1]
        return Read(self._stops[a:b], self._stop_need[a:b], self._further[c:d],
                    self._rests[c:d])
