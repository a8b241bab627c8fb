"""The runtime of grammars whose machines call each other (artifact format versions 2, 3).

A runtime state is a *configuration* held by the sequence, not by the grammar: a `CallState`
value of a table state, a stack of return states and, inside the loop of a counted machine,
the count of repetitions started in its frame. Stacks are persistent (`call_state.Frame`: a return
state over the frames below, shared by every state that extends it), so a step makes at most
a few frames, a fork or a rollback is keeping another reference, and memory follows the
states alive. States are immutable: one grammar object serves any number of sequences and
threads. `Grammar.state_to_ints` / `state_from_ints` carry a state to another process.

Masks: the ordinary table gives the tokens that stay in the state's machine frame without a
call; each *stack token* of the state either ends in a state with return states pushed
(whatever the stack), or returns past the frame with a suffix read from the return state on
top of the stack (docs/FORMAT.md). Per table state and top return state the returning tokens
are resolved once (`call_tables.Top`): alive or dead there, or returning again with a rest
that the frames further down decide (from a few to 32,000 distinct rests: resolved all at
once, once per frame and kept on it, `Rests`). A mask, budgeted or not, is therefore a
function of a short key (table state, top return state, the rests alive with their costs,
acceptance, the count's distance to its bounds and, with a budget, how many distinct token
costs fit), and is cached by it; where the budget cuts nothing, the mask is also kept on the
state's top frame (`_settled_mask`), so that the table state's next mask or fill over the
same frames is one lookup. Tokens are kept ordered by cost, or ranked over the vocabulary
where they are many (`Needs`), so that a new key is a few vectorised passes.
`CallGrammar.plan` computes every per-state and per-pair table at once (the compiler calls
it), `warm` too every mask of a row and every first read of a rest. Numpy only.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..format.artifact import suffix_count
from ..format.table import TokenTable, positions_within
from .arrays import (budgets_per_row, check_logits, integer, integer_array, is_torch,
                     python_ints, read_only)
from .bitmask import pack, write_bitmask
from .call_state import DEAD, EMPTY_STACK, CallState, Frame
from .call_tables import (NO_NEEDS, NO_TOP, NONE, Needs, Read, ReadTables, Rests, Runs,
                          StateInfo, StateTables, Top, TopTables, read_suffixes)
from .counts import Counts
from .grammar import Grammar
from .masks import MaskCache

# `plan` reads the rests of every pair from every return state below it ahead when they are
# at most this many in all (c.gbnf over SmolLM2 has 3.4 million: those are read on first use,
# or by `warm`)
PLANNED_READS = 1 << 20

# a number per grammar object, never reused in the process: what its memos on stack frames are
# keyed by (an `id` may be reused by a grammar made after one is dropped, whose states' frames
# a caller may still hold)
_SERIALS = itertools.count(1)


class CallGrammar(Grammar):
    """A compiled grammar with machines linked by calls: the API of `Grammar`, where a state
    is a `CallState` value (table state, stack of return states, count) instead of an int."""

    def __init__(self, metadata: dict[str, Any], table: TokenTable) -> None:
        super().__init__(metadata, table)
        self.initial_state = CallState(1)
        self.dead_state = DEAD
        calls = table.calls
        self._machine_start = calls.machine_start
        self._call_ptr = calls.call_ptr
        self._call_machine = calls.call_machine
        self._call_return = calls.call_return
        self._machine_first = calls.machine_first.astype(np.bool_)
        self._stack_ptr = calls.stack_ptr
        self._stack_token = calls.stack_token
        self._stack_next = calls.stack_next
        self._stack_arg = calls.stack_arg
        self._suffix_next = calls.suffix_next
        self._suffix_arg = calls.suffix_arg
        self._push_ptr = calls.push_ptr
        self._push_states = calls.push_states
        self._num_suffixes = max(suffix_count(calls.suffix_id, self._stack_next,
                                              self._stack_arg, self._suffix_next,
                                              self._suffix_arg), 1)
        self._suffix_key = calls.suffix_state * self._num_suffixes + calls.suffix_id
        self._eos = np.asarray(self.eos_token_ids, np.int64)
        self._eos_set = frozenset(self.eos_token_ids)
        self._eos_list = [int(token) for token in self._eos]
        self._counts = Counts(calls, self.table.min_tokens_to_accept)
        self._counted = python_ints(self._counts.row >= 0)  # 1: a state of a counted loop
        # per table state, its row where its mask can be the row's (no stack token, no
        # count), -1 where the mask is always built
        self._plain_row = python_ints(np.where(
            (np.diff(self._stack_ptr) == 0) & (self._counts.row < 0), self.table.state_row, -1))
        self._accepting = python_ints(self.table.accepting)  # 0 or 1
        self._min_tokens = python_ints(self.table.min_tokens_to_accept)
        # tokens to finish the frames a push sequence pushes (-1: never)
        lengths = np.diff(self._push_ptr)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        cost = self.table.min_tokens_to_accept[self._push_states]
        self._push_cost = np.where(np.bincount(owner, cost < 0, len(lengths)) > 0, -1,
                                   np.bincount(owner, cost, len(lengths))).astype(np.int64)
        self._is_return = np.zeros(self.num_states, np.bool_)
        self._is_return[self._call_return] = self._is_return[self._push_states] = True
        # returns by exit class (format version 5): per state its exit class, per site its
        # return states; a grammar without unions has no site
        exits = calls.exits
        self._site_ptr = np.zeros(self.num_states + 1, np.int64) if exits is None \
            else exits.site_ptr
        self._site_next = np.zeros(0, np.int64) if exits is None else exits.site_next
        self._suffix_class = np.zeros(self._num_suffixes, np.int64) if exits is None \
            else exits.suffix_class
        self._has_sites = bool(len(self._site_next))
        self._exit_class = python_ints(np.zeros(self.num_states, np.int64) if exits is None
                                       else exits.exit_class)
        self._site_ptr_list = python_ints(self._site_ptr)
        self._site_next_list = python_ints(self._site_next)
        # caches shared by every sequence, bounded by the tables, not by the stacks met: per
        # table state, per (table state, top return state) and, for the rests of that pair,
        # their first step read from the return state below it
        self._infos: dict[int, StateInfo] = {}
        self._tops: dict[tuple[int, int], Top] = {}
        self._reads: dict[tuple[int, int, int], Read] = {}
        # every state's and every possible pair's tables, once `plan` computed them
        self._planned_states: StateTables | None = None
        self._planned_tops: tuple[dict[tuple[int, int], int], TopTables] | None = None
        self._planned_reads: tuple[dict[tuple[int, int, int], int], ReadTables] | None = None
        self._state_masks = MaskCache(self.vocab_size)
        self._serial = next(_SERIALS)  # the key of its memos on frames (`_rests`, masks)
        # `_settled_mask`'s memo of the states with an empty stack (their frame is shared)
        self._root_settled: dict[tuple[int, int], tuple] = {}

    # ------------------------------------------------------------ configurations
    @property
    def machine_names(self) -> tuple[str, ...]:
        return tuple(self.metadata.get("machines", ()))

    def stack(self, state: CallState) -> tuple[int, tuple[int, ...]]:
        """The table state of a state and its stack of return states (bottom first)."""
        state = self._check_state(state)
        return state.table_state, state.stack

    def count(self, state: CallState) -> int:
        """The repetitions started in the counted loop a state is in (0 outside loops)."""
        return self._check_state(state).count

    def state_to_ints(self, state: CallState) -> list[int]:
        """`[table state, count, return states bottom first...]` (docs/FORMAT.md)."""
        state = self._check_state(state)
        return [state.table_state, state.count, *state.frames.returns()]

    def state_from_ints(self, values) -> CallState:
        """The state `state_to_ints` wrote, checked against this grammar's tables (a
        `ValueError` for a list no state of it writes)."""
        ints = integer_array(values, "a state").reshape(-1).tolist()
        if len(ints) < 2:
            raise ValueError("a state of a grammar with calls is [table state, count, "
                             f"return states...], not {ints}")
        q, count, returns = ints[0], ints[1], ints[2:]
        if not 0 <= q < self.num_states:
            raise ValueError(f"table state {q} out of range 0..{self.num_states - 1}")
        if q == 0:
            if count or returns:
                raise ValueError("the dead state has no count and no stack")
            return DEAD
        high = int(self._counts.high[q])
        if count < 0 or count and (not self._counted[q] or 0 <= high < count):
            raise ValueError(f"count {count} is not one table state {q} can hold")
        frames = EMPTY_STACK
        for ret in returns:
            if not (0 < ret < self.num_states and self._is_return[ret]):
                raise ValueError(f"{ret} is not a return state of this grammar")
            frames = self._frame(frames, ret)
        return CallState(q, frames, count)

    def _frame(self, below: Frame, ret: int) -> Frame:
        """A frame of return state `ret` over `below`: whether the text may end after
        returning to it (for a site, after each exit class), and the tokens that finish
        every frame (an upper bound; a site's covers each of its returns)."""
        cost, rest = self._min_tokens[ret], below.cost
        lo, hi = self._site_ptr_list[ret], self._site_ptr_list[ret + 1]
        ends = self._ends(ret, below) if lo == hi else tuple(
            bool(nxt and self._ends(nxt, below)) for nxt in self._site_next_list[lo:hi])
        return Frame(ret, below, ends, -1 if cost < 0 or rest < 0 else cost + rest)

    def _ends(self, q: int, frames: Frame) -> bool:
        """Whether the text may end in table state q over `frames`: q final, and every
        frame's return (a site's for the exit class of the state below it) too."""
        if not self._accepting[q]:
            return False
        ends = frames.ends
        if type(ends) is tuple:  # a site: its return for q's exit class
            exit_class = self._exit_class[q]
            return exit_class < len(ends) and ends[exit_class]
        return bool(ends)

    def _returned(self, ret: int, exit_class: int) -> int:
        """The state a return to `ret` from a final state of `exit_class` leads to (0:
        none): `format.table.returns_after` for one."""
        lo, hi = self._site_ptr_list[ret], self._site_ptr_list[ret + 1]
        if lo == hi:
            return ret
        return self._site_next_list[lo + exit_class] if exit_class < hi - lo else 0

    def _push(self, frames: Frame, sequence: int) -> Frame:
        lo, hi = self._push_ptr[sequence], self._push_ptr[sequence + 1]
        if lo != hi:
            for ret in self._push_states[lo:hi].tolist():
                frames = self._frame(frames, ret)
        return frames

    def _suffix_entry(self, ret: int, suffix: int) -> int:
        """The suffix entry of `suffix` read from return state `ret` (a site: its state for
        the suffix's exit class), -1 if none."""
        ret = self._returned(ret, int(self._suffix_class[suffix]))
        key = ret * self._num_suffixes + suffix
        j = int(self._suffix_key.searchsorted(key))
        return j if j < len(self._suffix_key) and self._suffix_key[j] == key else -1

    def _resolve(self, suffix: int, frames: Frame) -> CallState:
        """The state after returning to the top of `frames` and reading the suffix (DEAD
        when the text dies)."""
        while frames.depth:
            j = self._suffix_entry(frames.top, suffix)
            if j < 0:
                return DEAD
            nxt, arg = int(self._suffix_next[j]), int(self._suffix_arg[j])
            if nxt >= 0:
                return CallState(nxt, self._push(frames.below, arg),
                                 self._counts.reps_after_suffix(j, nxt))
            suffix, frames = arg, frames.below
        return DEAD

    def _stack_entry(self, table_state: int, token: int) -> int:
        lo, hi = self._stack_ptr[table_state], self._stack_ptr[table_state + 1]
        j = lo + int(self._stack_token[lo:hi].searchsorted(token))
        return j if j < hi and self._stack_token[j] == token else -1

    # ------------------------------------------------------------ warming
    def plan(self) -> None:
        """Compute every table state's stack tokens split and every possible pair's
        returning tokens resolved (`possible_tops`), each in one vectorised pass, so that a
        first use of a state or a pair is a few slices (`runtime.call_tables`); no masks.
        The compiler calls it for a grammar it compiles; `warm` calls it. Calling it again
        computes nothing."""
        if self._planned_tops is not None:
            return
        states = StateTables(self, np.arange(self.num_states))
        tops = self.possible_tops
        pairs = [(q, ret) for q in states.with_returns().tolist() if q for ret in tops[q] if ret]
        qs = np.array([q for q, _ in pairs], np.int64)
        rets = np.array([ret for _, ret in pairs], np.int64)
        tables = TopTables(self, rets, qs, states.returning)
        index = {pair: i for i, pair in enumerate(pairs)}
        rests = tables.rests.lengths(np.arange(len(pairs))).tolist()
        triples = [(q, ret, below) for (q, ret), n in zip(pairs, rests) if n
                   for below in tops[ret] if below]
        of_pair = np.array([index[(q, ret)] for q, ret, _ in triples], np.int64)
        if triples and int(np.take(rests, of_pair).sum()) <= PLANNED_READS:
            reads = ReadTables(self, np.array([below for *_, below in triples], np.int64),
                               of_pair, tables.rests)
            self._planned_reads = ({triple: i for i, triple in enumerate(triples)}, reads)
        self._planned_states = states
        self._planned_tops = (index, tables)

    def warm(self, limit: int | None = None) -> int:
        """`Grammar.warm` (every distinct row's mask, at most `limit`; returns how many), and
        what a step otherwise computes the first time it meets a table state or a pair of
        one and a return state on top: per table state its stack tokens split with their
        budget costs, per table state and return state that can lie on top of the stack
        there (`possible_tops`) its returning tokens resolved, and for the rests those leave,
        their first step read from each return state that can lie below. After it a step
        costs dictionary lookups and, for a mask not met yet, one vectorised build.

        What it holds is per state, per pair and per triple, never per stack: bounded by the
        artifact's stack tables (at most 16 bytes a stack token; c.gbnf over SmolLM2, 1.3
        million stack tokens: 0.26 s, +17 MB resident, benchmarks/README.md), computed
        whatever the `limit`; masks stay in the bounded mask caches. Calling it again computes nothing.
        For a server, once after loading; thread-safe, like every method (it fills the
        caches a step fills, with the same values)."""
        done = super().warm(limit)
        self.plan()
        for compute, *args in self._warm_items():
            compute(*args)
        return done

    def _warm_items(self) -> Iterator[tuple]:
        """What `warm` computes after the rows' masks, as (function, arguments...)."""
        tops = self.possible_tops
        states = range(1, self.num_states)
        yield from ((StateInfo.warm, self._info(q)) for q in states)
        pairs = [(q, ret) for q in states if len(self._info(q).ret_tokens)
                 for ret in tops[q] if ret]
        yield from ((Needs.warm, self._top(q, ret).stop) for q, ret in pairs)
        yield from ((self._first_read, q, ret, below) for q, ret in pairs
                    if len(self._top(q, ret).deep_suffixes) for below in tops[ret] if below)

    @property
    def possible_tops(self) -> tuple[tuple[int, ...], ...]:
        """Per table state, the return states that can lie on top of the stack in it (0: the
        empty stack): those of the call edges (q, m, r) to its machine m, or, in the root,
        nothing. A frame of machine m is only ever entered by one of its calls (the byte
        rules of docs/FORMAT.md), and machine m's states are `machine_start[m]` up to the
        next machine's start. Computed at each read (`plan` and `warm` read it once), not
        kept: a tuple per state would stay for the garbage collector to walk."""
        starts = self._machine_start
        callers: list[set[int]] = [set() for _ in range(len(starts))]
        callers[0].add(0)
        for m, ret in zip(self._call_machine.tolist(), self._call_return.tolist()):
            callers[m].add(ret)
        listed = [tuple(sorted(c)) for c in callers]
        by_start = np.argsort(starts, kind="stable")
        # a site (after the machines' states) lies where its returns do
        place = np.arange(self.num_states)
        sites = np.flatnonzero(np.diff(self._site_ptr))
        place[sites] = self._site_next[self._site_ptr[sites]]
        machine = by_start[np.searchsorted(starts[by_start], place, side="right") - 1]
        return ((), *map(listed.__getitem__, machine[1:].tolist()))

    # ------------------------------------------------------------ per table state
    def _info(self, q: int) -> StateInfo:
        info = self._infos.get(q)
        if info is None:
            planned = self._planned_states
            if planned is not None:
                info = planned.info(q, q)
            elif self._stack_ptr[q] == self._stack_ptr[q + 1]:  # most states: no stack token
                info = StateInfo(self.table, q, NO_NEEDS, NONE, NONE)
            else:
                info = StateTables(self, np.array([q])).info(0, q)
            self._infos[q] = info
        return info

    def _top(self, q: int, ret: int) -> Top:
        top = self._tops.get((q, ret))
        if top is None:
            info = self._info(q)
            if ret == 0 or not len(info.ret_tokens):  # nothing to return, or to return to
                return NO_TOP
            planned = self._planned_tops
            i = planned[0].get((q, ret)) if planned is not None else None
            top = self._tops[(q, ret)] = planned[1].top(i) if i is not None else TopTables(
                self, np.array([ret]), np.array([0]),
                Runs([0, len(info.ret_tokens)], info.ret_tokens, info.ret_suffix)).top(0)
        return top

    def _first_read(self, q: int, ret: int, below: int) -> Read:
        """The rests of (q, ret) read from return state `below` (`warm` computes it ahead)."""
        read = self._reads.get((q, ret, below))
        if read is None:
            planned = self._planned_reads
            i = planned[0].get((q, ret, below)) if planned is not None else None
            read = self._reads[(q, ret, below)] = planned[1].read(i) if i is not None else \
                read_suffixes(self, below, self._top(q, ret).deep_suffixes)
        return read

    def _rests(self, q: int, ret: int, top: Top, below: Frame) -> Rests:
        """The rests of `top` (table state q under return state ret) resolved on the frames
        `below`: once per frame and pair, kept on the frame (frames are shared by the states
        of a walk; nothing per stack is kept in the grammar)."""
        if not len(top.deep_suffixes) or not below.depth:  # no rest, or nowhere to return
            return top.dead
        key = (self._serial, q, ret)
        memo = below.rests
        found = memo.get(key) if memo is not None else None
        if found is None:
            found = self._resolve_all(top.deep_suffixes, below,
                                      self._first_read(q, ret, below.top))
            if memo is None:
                memo = below.rests = {}
            memo[key] = found
        return found

    def _resolve_all(self, suffixes: np.ndarray, frames: Frame, read: Read) -> Rests:
        """docs/FORMAT.md's `resolve` of many suffixes at once on `frames` (not empty),
        `read` its first step."""
        alive, need = [], []
        at = None  # the positions of the rests still returning (None: all of them, in order)
        while True:
            below = frames.below.cost
            alive.append(read.stops if at is None else at[read.stops])
            need.append(np.where((read.stop_need < 0) | (below < 0), -1,
                                 read.stop_need + below))
            if not len(read.further) or not frames.below.depth:
                break
            at, frames = read.further if at is None else at[read.further], frames.below
            read = read_suffixes(self, frames.top, read.rests)
        if len(alive) == 1:  # the usual case: decided on the first frame, in order
            return Rests(len(suffixes), alive[0], need[0])
        alive, need = np.concatenate(alive), np.concatenate(need)
        order = np.argsort(alive)
        return Rests(len(suffixes), alive[order], need[order])

    # ------------------------------------------------------------ the Grammar API
    def _check_state(self, state) -> CallState:
        if type(state) is not CallState:
            raise TypeError("a state of a grammar with calls is a CallState (its "
                            "initial_state, or what next_state returns), not "
                            f"{type(state).__name__}")
        if not 0 <= state.table_state < self._num_states:
            raise ValueError(f"table state {state.table_state} out of range "
                             f"0..{self.num_states - 1}")
        return state

    def _state_list(self, states) -> list[CallState]:
        """States given one, as a list or tuple, or as an object array: a checked list."""
        if isinstance(states, CallState):
            return [states]
        items = states.reshape(-1).tolist() if isinstance(states, np.ndarray) else list(states)
        return [self._check_state(s) for s in items]

    def is_accepting(self, state: CallState) -> bool:
        state = self._check_state(state)
        return self._ends(state.table_state, state.frames)

    def state_name(self, state: CallState) -> str | None:
        self._check_state(state)
        return None

    def tokens_to_accept(self, state: CallState) -> int:
        """Tokens that reach an accepting state from `state` (an upper bound of the fewest;
        -1: none), the final EOS not counted."""
        return self._cost(self._check_state(state))

    def _cost(self, state: CallState) -> int:
        if not state.table_state:
            return -1
        cost, below = self._counts.cost(state.table_state, state.count), state.frames.cost
        return -1 if cost < 0 or below < 0 else cost + below

    def mask(self, state: CallState, *, budget: int | None = None) -> np.ndarray:
        """Read-only booleans over the vocabulary (with `budget`: `mask_within`'s tokens),
        cached by what decides them (module docstring)."""
        state = self._check_state(state)
        return self._settled_mask(state, budget, False)

    def _mask_packed(self, state: CallState, budget: int | None) -> np.ndarray:
        """`mask(state, budget=budget)` packed for a bitmask (`MaskCache.packed`)."""
        return self._settled_mask(state, budget, True)

    def _settled_mask(self, state: CallState, budget: int | None, packed: bool) -> np.ndarray:
        """The mask of `state` under `budget` (packed or boolean). Where the budget cuts
        nothing (`_free_from`), a state's mask is a function of the state alone: where it
        is cached (its mask row, or its key in the state masks' cache) is kept on the
        state's top frame (the grammar's memo for an empty stack) with the least budget that
        cuts nothing, so that the next mask or fill of that table state over the same
        frames, of either kind, is a lookup, not the few dozen calls of its key. The memo
        holds no mask: the caches stay the only bound on the masks' memory."""
        if budget is not None:
            budget = integer(budget, "budget")
        q, frames = state.table_state, state.frames
        memo = frames.settled if frames.depth else self._root_settled
        found = memo.get((self._serial, q)) if memo is not None else None
        free_from = None
        if found is not None:
            free_from, where = found
            if budget is not None and free_from is None:  # kept without a budget
                free_from = self._free_from(state)
                memo[(self._serial, q)] = (free_from, where)
            if budget is None or budget >= free_from:
                cache = self._allowed_masks if type(where) is int else self._state_masks
                mask = cache.packed(where, None) if packed else cache.get(where, None)
                if mask is not None:
                    return mask
            else:
                return self._build(state, budget, packed)[0]
        elif budget is not None:
            free_from = self._free_from(state)
            if budget < free_from:
                return self._build(state, budget, packed)[0]
        elif self._counted[q]:  # in a counted loop: the count decides the mask
            return self._build(state, None, packed)[0]
        mask, where = self._build(state, None, packed)
        if where is not None:
            if memo is None:
                memo = frames.settled = {}
            memo[(self._serial, q)] = (free_from, where)
        return mask

    def _build(self, state: CallState, budget: int | None, packed: bool) -> tuple:
        """The mask of `state` (`budget` None: a budget that cuts nothing), packed or
        boolean, and where it is cached: the row's mask row (an int), the key of the state
        masks' cache, or None (a budget inside a counted loop)."""
        row = self._plain_row[state.table_state] if budget is None else -1
        if row >= 0:
            mask = self._cached_packed(row) if packed else self._cached_mask(row, allowed=True)
            if self._eos_agrees(mask.item, 3 if packed else 0, state):
                return mask, self.table.mask_row(row)
        key, build = self._mask_source(state, budget)
        if key is None:
            return (pack(build()) if packed else read_only(build())), None
        cache = self._state_masks
        return (cache.packed(key, build) if packed else cache.get(key, build)), key

    def _free_from(self, state: CallState) -> float:
        """The least budget that cuts nothing from the state's mask: every token it allows
        can still finish within it, EOS too where the state may end (inf: every budget
        cuts, as in a counted loop, whose needs follow the count). Below it a mask is built
        for its budget; from it the mask without a budget serves, with its caches."""
        q, frames = state.table_state, state.frames
        if self._counted[q]:
            return float("inf")
        most = self._info(q).most_need  # its ordinary and pushing tokens, over every frame
        least = max(1, most + 2 + frames.cost if frames.cost >= 0 else
                    1 if most < 0 else float("inf"))
        top = self._top(q, frames.top)
        if top.stop.size:  # its tokens returning into the top frame, over the ones below
            below = frames.below.cost if frames.depth else -1
            least = max(least, top.stop.most_need + 2 + below if below >= 0 else float("inf"))
        if len(top.deep_tokens):  # its tokens returning past it: their rests' needs
            least = max(least, self._rests(q, frames.top, top, frames.below).most_need + 2)
        return least

    def _eos_agrees(self, item: Callable[[int], int], shift: int, state: CallState) -> bool:
        """Whether a row's mask (its `item`: of booleans, shift 0, or of packed bytes,
        shift 3) allows EOS exactly where `state` may end. A state with no stack token,
        outside counted loops (`_plain_row`), then has its row's mask: shared with every
        state of that row, and never held twice in the caches."""
        ends = self._ends(state.table_state, state.frames)
        return all((item(token >> shift) >> (token & 7 if shift else 0)) & 1 == ends
                   for token in self._eos_list)

    def _mask_source(self, state: CallState, budget: int | None) -> tuple[Any, Callable]:
        """The cache key of a state's mask (None: not cached, a budget inside a counted loop)
        and what builds it."""
        q, frames, count = state.table_state, state.frames, state.count
        info = self._info(q)
        top = self._top(q, frames.top)
        rests = self._rests(q, frames.top, top, frames.below)
        ends = self._ends(q, frames)
        if budget is None:
            key = (q, frames.top, ends, *self._counts.key(q, count), rests.alive_key)
            twin = self._counts.twin_list[q]
            if twin:  # where the count forbids, the mask is its twin's: keyed by it too
                key = (*key, self._build(CallState(twin, frames), None, False)[1])
            return key, \
                lambda: self._build_mask(state, info, top, None, None, rests.within(), ends)
        eos = ends and budget >= 1
        if self._counted[q]:  # the need of ordinary tokens follows the count
            return None, lambda: self._build_mask(state, info, top, budget, None,
                                                  rests.within(budget - 2), eos)
        room = _room(budget, frames.cost)
        room_below = _room(budget, frames.below.cost) if frames.depth else -1
        levels = bisect_right(info.levels, room)
        stop_levels = bisect_right(top.stop.levels, room_below)
        deep_levels = bisect_right(rests.levels, budget - 2)
        key = (q, frames.top, eos, levels, stop_levels, "within", deep_levels, rests.need_key)
        return key, lambda: self._build_mask(
            state, info, top, info.levels[levels - 1] if levels else -1,
            top.stop.levels[stop_levels - 1] if stop_levels else -1, rests.within(budget - 2),
            eos)

    def _build_mask(self, state: CallState, info: StateInfo, top: Top, within: int | None,
                    stop_within: int | None, deep: np.ndarray, eos: bool) -> np.ndarray:
        """The mask of `state`: unbudgeted (`within` None), or keeping the tokens whose need
        is at most `within` (ordinary, pushing) or `stop_within` (returning to the top
        frame), or, inside a counted loop, the budget `within` itself (`stop_within` None);
        `deep`: which rests of `top` are allowed."""
        q, count = state.table_state, state.count
        counted = self._counted[q]
        if within is None:
            row = self._cached_mask(int(self.table.state_row[q]), allowed=True)
            if not (info.push.size or top.stop.size or len(top.deep_tokens) or counted) \
                    and all(row.item(token) == eos for token in self._eos_list):
                return row  # the row's own mask, shared (`Grammar.warm` computes it ahead)
            mask = row.copy()
            info.push.add(mask)
            top.stop.add(mask)
        elif counted and stop_within is None:
            budget, below = within, state.frames.cost
            mask = self._counts.row_within(self.table, q, count, budget - below) if below >= 0 \
                else np.zeros(self.vocab_size, np.bool_)
            info.push.add(mask, _room(budget, below))
            top.stop.add(mask, _room(budget, state.frames.below.cost)
                         if state.frames.depth else -1)
        else:
            mask = self._ordinary_within(q, info, within)
            info.push.add(mask, within)
            top.stop.add(mask, stop_within)
        if len(top.deep_tokens):
            mask[top.deep_tokens[deep[top.deep_group]]] = True
        if counted:
            ok = self._counts.allowed(q, count)
            mask &= ok
            twin = self._counts.twin_list[q]
            if twin and not ok.all():  # the tokens the count forbids, as its twin reads them
                mask |= self._build(CallState(twin, state.frames), within, False)[0] & ~ok
        mask[self._eos] = eos
        return mask

    def _ordinary_within(self, q: int, info: StateInfo, within: int) -> np.ndarray:
        """The ordinary tokens of q whose need is at most `within`, a fresh array: the row's
        cached mask with the tokens of the classes that do not fit cleared, or those that
        fit written (`classes_mask`), whichever writes fewer tokens (a budget far from its
        end clears none)."""
        row = self._cached_mask(int(self.table.state_row[q]), allowed=True)
        if within >= info.row_fits:
            return row.copy()
        keep = (info.row_need >= 0) & (info.row_need <= within)
        dropped = info.row_classes[~keep]
        order, class_ptr = self.table.tokens_by_class
        sizes = class_ptr[dropped + 1] - class_ptr[dropped]
        cleared = int(sizes.sum())
        kept = info.row_tokens - cleared
        if cleared > min(kept, self.vocab_size - kept):
            return self.table.classes_mask(info.row_classes[keep])
        mask = row.copy()
        mask[order[np.repeat(class_ptr[dropped], sizes) + positions_within(sizes)]] = False
        return mask

    def mask_within(self, state: CallState, budget: int) -> np.ndarray:
        """`mask(state)` restricted to tokens after which the text can still end within
        `budget` more tokens, the final EOS included, counting by `tokens_to_accept` (an
        upper bound here: a token may be refused that a shorter ending would allow). A fresh
        array."""
        return self.mask(state, budget=budget).copy()

    def next_state(self, state: CallState, token_id: int) -> CallState:
        state = self._check_state(state)
        token_id = integer(token_id, "a token id")
        if not 0 <= token_id < self._vocab_size or not state.table_state:
            return DEAD
        if token_id in self._eos_set:
            return state if self.is_accepting(state) else DEAD
        q, frames = state.table_state, state.frames
        count = self._counts.after(q, state.count, token_id)
        if count is None:  # past the count's bounds: its twin reads the token, if any
            twin = self._counts.twin_list[q]
            return self.next_state(CallState(twin, frames), token_id) if twin else DEAD
        plain = self._table_next(q, token_id)
        if plain:
            return CallState(plain, frames, count if self._counted[plain] else 0)
        j = self._stack_entry(q, token_id)
        if j < 0:
            return DEAD
        nxt, arg = int(self._stack_next[j]), int(self._stack_arg[j])
        if nxt >= 0:
            return CallState(nxt, self._push(frames, arg), self._counts.reps_after_stack(j, nxt))
        return self._resolve(arg, frames)

    def advance(self, states, tokens):
        """Batched `next_state`: states (a sequence or object array of `CallState`) and
        tokens (numpy, torch or a list) of as many; an object array of states back."""
        if is_torch(tokens):
            tokens = tokens.detach().cpu().numpy()
        tokens = integer_array(tokens, "tokens").reshape(-1)
        states = self._state_list(states)
        if len(states) != len(tokens):
            raise ValueError(f"{len(states)} states but {len(tokens)} tokens")
        out = np.empty(len(states), object)
        out[:] = [self.next_state(s, t) for s, t in zip(states, tokens.tolist())]
        return out

    def apply(self, logits, states, *, budget: int | None = None, inplace: bool = False):
        check_logits(logits)
        if is_torch(logits):
            from ._torch import masked_by_numpy

            return masked_by_numpy(self, logits, states, budget, inplace)
        states, batched = self.states_for(logits.ndim, logits.shape, states)
        out = logits if inplace else logits.copy()
        view = out if batched else out[None, :]
        for i, state in enumerate(states):
            np.copyto(view[i, :self.vocab_size], -np.inf,
                      where=~self.mask(state, budget=budget))
        view[:, self.vocab_size:] = -np.inf
        return out

    def states_for(self, ndim: int, shape: tuple, states) -> tuple[list[CallState], bool]:
        if ndim not in (1, 2):
            raise ValueError(f"logits must have shape (V,) or (B, V), not {shape}")
        states = self._state_list(states)
        if ndim == 1 and len(states) != 1:
            raise ValueError(f"logits of shape (V,) take one state, not {len(states)}")
        if ndim == 2 and len(states) != shape[0]:
            raise ValueError(f"{shape[0]} rows of logits but {len(states)} states")
        if shape[-1] < self.vocab_size:
            raise ValueError(f"logits have {shape[-1]} columns but the vocabulary has "
                             f"{self.vocab_size} tokens")
        return states, ndim == 2

    def fill_bitmask(self, states, out, *, budget=None):
        states = self._state_list(states)
        budgets = budgets_per_row(budget, len(states))
        packed = (self._mask_packed(state, limit) for state, limit in zip(states, budgets))
        return write_bitmask(out, (len(states),), self.vocab_size, packed)

    def allowed_counts(self) -> np.ndarray:
        """Tokens each table state may allow: its ordinary tokens and all its stack tokens
        (whether a returning one is allowed depends on the stack)."""
        return super().allowed_counts() + np.diff(self._stack_ptr)

    def _next_bytes(self, state: CallState) -> np.ndarray:
        """Bytes that may come next: the frame's transitions, the first bytes of the machines
        it may call, and where it may return, those of the frames below."""
        table = self._byte_dfa()
        q, frames = state.table_state, state.frames
        following = np.zeros(256, np.bool_)
        while q:
            following |= table[q] != 0
            for k in range(self._call_ptr[q], self._call_ptr[q + 1]):
                following |= self._machine_first[self._call_machine[k]]
            if not (self._accepting[q] and frames.depth):
                break
            q, frames = self._returned(frames.top, self._exit_class[q]), frames.below
        return following

    def _byte_edges(self, state: CallState) -> list[tuple[int, int, CallState]]:
        """The live byte edges of a configuration, one per byte (`_byte_move` is the rule)."""
        following = np.flatnonzero(self._next_bytes(state)).tolist()
        return [(b, b, nxt) for b in following if (nxt := self._byte_step(state, b))]

    def _position(self, state: CallState) -> CallState:
        return state

    def _state_at(self, position: CallState) -> CallState:
        return position

    def _byte_move(self, position: CallState, byte: int) -> CallState | None:
        """One byte by the machines' rules: a transition (within the count's bounds), else a
        call its first byte opens, else a return when the state is final (docs/FORMAT.md);
        None when the text dies."""
        table = self._byte_dfa()
        q, frames, count = position.table_state, position.frames, position.count
        while q:
            nxt = int(table[q, byte])
            if nxt:
                nxt, after = self._counts.byte_step(q, nxt, count)
                if nxt:
                    return CallState(nxt, frames, after)
                q, count = self._counts.twin_list[q], 0  # past the count: the twin, if any
                continue
            callee = next((k for k in range(self._call_ptr[q], self._call_ptr[q + 1])
                           if self._machine_first[self._call_machine[k], byte]), None)
            if callee is not None:
                frames = self._frame(frames, int(self._call_return[callee]))
                q, count = int(self._machine_start[self._call_machine[callee]]), 0
                continue
            if self._accepting[q] and frames.depth:
                q, frames, count = self._returned(frames.top, self._exit_class[q]), \
                    frames.below, 0
                continue
            return None
        return None


def _room(budget: int, below: int) -> int:
    """The largest need of a token that fits `budget` over frames needing `below` more
    tokens (-1: none fits)."""
    return budget - 2 - below if below >= 0 else -1
