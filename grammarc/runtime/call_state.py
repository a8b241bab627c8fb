"""The state of one sequence in a grammar with calls (`CallState`): a table state, a
persistent stack of return states (`Frame`, shared by every state that extends it, so a step
makes at most a few frames and a fork or a rollback is keeping another reference) and a count.
Immutable values, numpy-free; `runtime.calls` gives them their meaning."""

from __future__ import annotations

from typing import Any


class Frame:
    """One frame of a persistent stack: return state `top` over the frames `below`, with
    what the runtime asks of the whole stack kept at hand (depth, whether every return state
    is final, the tokens that finish every frame, a hash)."""

    __slots__ = ("top", "below", "depth", "ends", "cost", "hash", "rests", "settled")

    def __init__(self, top: int, below: "Frame | None", ends: bool, cost: int) -> None:
        self.top, self.below, self.ends, self.cost = top, below, ends, cost
        # the rests that return past a frame above this one resolved on these frames, by
        # (grammar, table state, return state) of that frame: filled by `CallGrammar.mask`
        self.rests: dict[tuple[int, int, int], Any] | None = None
        # where the masks of the states over these frames are cached, by (grammar, table
        # state): filled by `CallGrammar.mask` and its bitmasks
        self.settled: dict[tuple[int, int], Any] | None = None
        self.depth = below.depth + 1 if below is not None else 0
        self.hash = hash((top, below.hash)) if below is not None else 0

    def returns(self) -> list[int]:
        """The return states, the bottom of the stack first."""
        out, frame = [], self
        while frame.depth:
            out.append(frame.top)
            frame = frame.below
        return out[::-1]


EMPTY_STACK = Frame(0, None, True, 0)  # the empty stack


def same_stack(a: Frame, b: Frame) -> bool:
    """Whether two stacks hold the same return states (shared tails compare at once)."""
    while a is not b:
        if a.hash != b.hash or a.depth != b.depth or a.top != b.top:
            return False
        a, b = a.below, b.below
    return True


class CallState:
    """The state of one sequence in a grammar with calls: a table state, a stack of return
    states (`stack`, bottom first) and a count (0 outside counted loops). An immutable value:
    equal states compare and hash equal, and `bool(state)` is False for the dead state only.
    `Grammar.state_to_ints` writes it as a short list of ints."""

    __slots__ = ("table_state", "frames", "count")

    def __init__(self, table_state: int, frames: Frame = EMPTY_STACK, count: int = 0) -> None:
        self.table_state, self.frames, self.count = table_state, frames, count

    @property
    def stack(self) -> tuple[int, ...]:
        return tuple(self.frames.returns())

    @property
    def depth(self) -> int:
        """Return states on the stack."""
        return self.frames.depth

    def __bool__(self) -> bool:
        return self.table_state != 0

    def __eq__(self, other: object) -> bool:
        return self is other or isinstance(other, CallState) and \
            self.table_state == other.table_state and self.count == other.count and \
            same_stack(self.frames, other.frames)

    def __hash__(self) -> int:
        return hash((self.table_state, self.count, self.frames.hash))

    def __repr__(self) -> str:
        returns = self.frames.returns() if self.frames.depth <= 8 else \
            ["...", *self.frames.returns()[-8:]]
        count = f", count={self.count}" if self.count else ""
        return f"CallState({self.table_state}, stack=[{', '.join(map(str, returns))}]{count})"


DEAD = CallState(0)  # the dead configuration
