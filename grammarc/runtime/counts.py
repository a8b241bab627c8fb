"""The count registers of counted machines at run time (artifact format versions 3 and 4):
per loop state its bounds, which tokens keep a count within them, the count after a token or
a byte, and the tokens that finish a machine from a count. Numpy only."""

from __future__ import annotations

import numpy as np

from ..format.table import CallTables


class Counts:
    """The count registers of counted machines (docs/FORMAT.md): what a token does to the
    count inside a loop, and the fewest-token bounds that depend on it. Without counters
    every state is outside every loop."""

    def __init__(self, calls: CallTables, min_tokens: np.ndarray) -> None:
        num_states = len(min_tokens)
        self.min_tokens = min_tokens
        counters = calls.counters
        self.row = np.full(num_states, -1, np.int64) if counters is None else counters.count_row
        self.table = np.zeros((0, 0), np.uint8) if counters is None else counters.count_table
        self.stack_reps = None if counters is None else counters.stack_reps
        self.suffix_reps = None if counters is None else counters.suffix_reps
        self.complete_cost = None if counters is None else counters.count_complete_cost
        # per state: between repetitions; repetitions still needed (held in the count)
        self.boundary = np.zeros(num_states, bool) if counters is None else \
            counters.count_loop.astype(bool)
        self.need = np.zeros(num_states, np.int64) if counters is None else counters.count_need
        # per state inside a union's loop: the state that reads on where the count forbids
        # (version 6; 0: none, the text dies)
        self.twin = np.zeros(num_states, np.int64) if counters is None else counters.count_twin
        self.twin_list = self.twin.tolist()
        # per state, its machine's loop state, bounds and cost of one repetition
        self.loop = np.zeros(num_states, np.int64)
        self.low = np.zeros(num_states, np.int64)
        self.high = np.full(num_states, -1, np.int64)
        self.item_cost = np.full(num_states, -1, np.int64)
        if counters is not None:
            machine = np.searchsorted(calls.machine_start, np.arange(num_states),
                                      side="right") - 1
            inside = np.flatnonzero(self.row >= 0)
            self.loop[inside] = counters.machine_loop[machine[inside]]
            self.low[inside] = counters.machine_count_min[machine[inside]]
            self.high[inside] = counters.machine_count_max[machine[inside]]
            self.item_cost[inside] = counters.machine_item_cost[machine[inside]]
        # the most repetitions a token starts: counts further from a bound share a mask
        self.reach = int(self.table.max(initial=0)) // 2 + 1

    def key(self, q: int, count: int) -> tuple[int, int]:
        """What of the count decides the mask of loop state q (nothing outside loops)."""
        if self.row[q] < 0:
            return (0, 0)
        room = self.reach if self.high[q] < 0 else min(int(self.high[q]) - count, self.reach)
        return (room, min(max(int(self.low[q]) - count, 0), self.reach))

    def allowed(self, q: int, count: int) -> np.ndarray:
        """The tokens whose repetitions keep the count of loop state q within bounds."""
        values = self.table[self.row[q]]
        started = values >> 1  # compared with Python ints: uint8 passes, not int64 (4x less)
        ok = ~(((values & 1) == 1) & (started < int(self.low[q]) - count))
        if self.high[q] >= 0:
            ok &= started <= int(self.high[q]) - count
        return ok

    def after(self, q: int, count: int, token: int) -> int | None:
        """The count after `token` from loop state q (None: the bounds forbid it); 0 outside
        loops."""
        if self.row[q] < 0:
            return 0
        value = int(self.table[self.row[q], token])
        total = count + (value >> 1)
        if 0 <= self.high[q] < total or (value & 1 and total < self.low[q]):
            return None
        return total

    def reps_after_stack(self, entry: int, nxt: int) -> int:
        return int(self.stack_reps[entry]) if self.row[nxt] >= 0 else 0

    def reps_after_suffix(self, entry: int, nxt: int) -> int:
        return int(self.suffix_reps[entry]) if self.row[nxt] >= 0 else 0

    def byte_step(self, q: int, nxt: int, count: int) -> tuple[int, int]:
        """(next state, count) of a byte transition; state 0 when the count forbids it (a
        twin of q, if any, then reads the byte)."""
        inside = self.row[nxt] >= 0
        if self.row[q] < 0 and not inside:
            return nxt, 0
        total = count + int(self.boundary[q] and inside) + int(self.need[nxt]) - \
            int(self.need[q])
        if inside:  # within the loop (a repetition started where q lies between two)
            return (0, 0) if 0 <= self.high[nxt] < total else (nxt, total)
        return (nxt, 0) if total >= self.low[q] else (0, 0)

    def cost(self, q: int, count: int) -> int:
        """Tokens that finish q's machine from q with `count` (an upper bound; -1: none):
        below the minimum, end the repetition under way, read the missing ones, then leave;
        or, where fewer, finish from q's twin."""
        if self.row[q] < 0 or count >= self.low[q]:
            return int(self.min_tokens[q])
        parts = (int(self.complete_cost[q]), int(self.item_cost[q]),
                 int(self.min_tokens[self.loop[q]]))
        own = -1 if min(parts) < 0 else parts[0] + parts[1] * (int(self.low[q]) - count) + \
            parts[2]
        twin = self.twin_list[q]
        other = int(self.min_tokens[twin]) if twin else -1
        return own if other < 0 else other if own < 0 else min(own, other)

    def costs(self, states: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """`cost` of each state with its count, vectorised."""
        need = self.min_tokens[states].copy()
        short = (self.row[states] >= 0) & (counts < self.low[states])
        if short.any():
            at = states[short]
            parts = np.stack([self.complete_cost[at], self.item_cost[at],
                              self.min_tokens[self.loop[at]]])
            more = parts[0] + parts[1] * (self.low[at] - counts[short]) + parts[2]
            own = np.where((parts < 0).any(axis=0), -1, more)
            twin = self.twin[at]
            other = np.where(twin > 0, self.min_tokens[twin], -1)
            need[short] = np.where(other < 0, own, np.where(own < 0, other,
                                                            np.minimum(own, other)))
        return need

    def row_within(self, table, q: int, count: int, budget: int) -> np.ndarray:
        """The ordinary tokens of loop state q allowed with `count` after which its machine
        can finish within `budget` tokens (`_row_within` with counts)."""
        lo, hi = table.row_ptr[table.state_row[q]], table.row_ptr[table.state_row[q] + 1]
        delta = np.zeros(table.num_classes, np.int64)
        listed = np.zeros(table.num_classes, np.bool_)
        delta[table.row_class[lo:hi]] = table.row_delta[lo:hi]
        listed[table.row_class[lo:hi]] = True
        nxt = q + delta[table.token_class]
        values = self.table[self.row[q]].astype(np.int64)
        need = self.costs(nxt, count + (values >> 1))
        return listed[table.token_class] & self.allowed(q, count) & (need >= 0) & \
            (need + 2 <= budget)
