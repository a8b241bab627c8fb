"""`ByteDFA`, the byte-level DFA every automaton construction produces and the rest of grammarc
consumes. Numpy only: the compiled core is needed to build one (dfa.py), not to use it.

Its table is `trans[state, byte_class]`, with the grammarc state convention: state 0 is the
dead state (every transition of it loops to 0), state 1 is the start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..charsets import walk_bytes


@dataclass(frozen=True)
class DFATable:
    """The table of a complete DFA over bytes (dead = 0, start = 1). Its arrays are read-only
    (automata are shared: by the front ends' per-process caches, by products and machines)."""

    trans: np.ndarray       # int32 [num_states, num_classes]
    byte_class: np.ndarray  # int32 [256]: the class of each byte value
    accepting: np.ndarray   # bool [num_states]

    def __post_init__(self) -> None:
        for array in vars(self).values():
            if isinstance(array, np.ndarray):
                array.flags.writeable = False

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.trans.shape[1])


@dataclass(frozen=True)
class ByteDFA(DFATable):
    """A minimal, trimmed, canonically numbered DFA over bytes (dead = 0, start = 1)."""

    labels: np.ndarray | None = None  # int32 [num_states]: index into label_names, -1 for none
    label_names: tuple[str, ...] = ()

    def byte_table(self) -> np.ndarray:
        """The full table `next = table[state, byte]` (int32 [num_states, 256])."""
        return np.ascontiguousarray(self.trans[:, self.byte_class])

    def step(self, state: int, byte: int) -> int:
        """The state after one byte."""
        return int(self.trans[state, self.byte_class[byte]])

    def walk(self, data: bytes, state: int = 1) -> int:
        """The state reached from `state` after reading `data` (0 once it dies)."""
        return walk_bytes(self.step, data, state)

    def has_cycle(self) -> bool:
        """Whether a path from the start comes back to a state it passed (the language has
        texts without bound, in a DFA whose live states all reach a final state)."""
        successors = [np.unique(row[row != 0]).tolist() for row in self.trans]
        colour = [0] * self.num_states  # 0 not seen, 1 on the path, 2 done
        colour[1], path = 1, [(1, iter(successors[1]))]
        while path:
            state, todo = path[-1]
            nxt = next(todo, None)
            if nxt is None:
                colour[state] = 2
                path.pop()
            elif colour[nxt] == 1:
                return True
            elif not colour[nxt]:
                colour[nxt] = 1
                path.append((nxt, iter(successors[nxt])))
        return False

    def longest_text(self) -> int | None:
        """The bytes of the longest text (None: texts without bound), in a DFA whose live
        states all reach a final state."""
        if self.has_cycle():
            return None
        reached, steps = np.array([1]), 0
        while True:
            reached = np.unique(self.trans[reached])
            reached = reached[reached != 0]
            if not len(reached):
                return steps
            steps += 1

    def accepts(self, data: bytes) -> bool:
        return bool(self.accepting[self.walk(data)])

    def ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-state runs of bytes with the same live target: `(ptr, ranges, next)`, where
        state s's runs are `ranges[ptr[s]:ptr[s+1]]` (inclusive `lo, hi`) to `next[...]`."""
        # the runs of bytes of one class first (a few dozen), so the work is states x runs
        class_starts = np.flatnonzero(np.diff(self.byte_class, prepend=-1))
        table = self.trans[:, self.byte_class[class_starts]]
        starts = np.ones(table.shape, np.bool_)
        starts[:, 1:] = table[:, 1:] != table[:, :-1]
        state, run = np.nonzero(starts)
        nxt = table[state, run]
        lo = class_starts[run]
        run_end = np.empty_like(lo)
        run_end[:-1] = np.where(state[1:] == state[:-1], lo[1:] - 1, 255)
        if len(lo):
            run_end[-1] = 255
        live = nxt != 0
        state, lo, run_end, nxt = state[live], lo[live], run_end[live], nxt[live]
        ptr = np.zeros(self.num_states + 1, np.int64)
        np.cumsum(np.bincount(state, minlength=self.num_states), out=ptr[1:])
        return ptr, np.stack([lo, run_end], axis=1), nxt
