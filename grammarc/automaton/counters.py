"""Counted repeats: a machine whose body is one byte, a counted `Repeat` and a suffix keeps
a count register instead of a copy of its item per repetition (`Counters`, `counter_form`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bytedfa import ByteDFA
from .callgraph import called_names, starting_bytes
from .dfa import build_dfa
from .expr import CharSet, Concat, Expr, Repeat, concat


@dataclass(frozen=True)
class Counters:
    """Count registers of machines whose body is a counted repeat (`counter_form`).

    Machine m keeps a count when `loop[m]` (its loop state) is not 0: a transition out of the
    loop state into `in_loop` states starts one repetition (the count goes up and may not pass
    `count_max[m]`, -1 for no bound); one out of it to other states leaves the loop (the count
    must be at least `count_min[m]`). A counted machine calls no other.
    """

    loop: np.ndarray       # int32 [M]
    count_min: np.ndarray  # int64 [M]
    count_max: np.ndarray  # int64 [M]
    in_loop: np.ndarray    # bool [S]: the loop state and the states inside one repetition

    def step(self, q: int, nxt: int, count: int, machine: int) -> tuple[int, int]:
        """(next state, count) of the transition q -> nxt in `machine`; (0, 0) if the count
        forbids it. Outside counted machines the count stays 0."""
        if machine < 0 or q != self.loop[machine]:
            return (nxt, count if self.in_loop[nxt] else 0)
        if self.in_loop[nxt]:
            bound = int(self.count_max[machine])
            return (0, 0) if 0 <= bound <= count else (nxt, count + 1)
        return (nxt, 0) if count >= self.count_min[machine] else (0, 0)


def counter_form(body: Expr) -> tuple[tuple[Expr, ...], bytes, Repeat, Expr] | None:
    """(prefix, its bytes, counted repeat, suffix) of a machine body made of one literal
    byte, a counted `Repeat` and a suffix, none of them calling, or None. The prefix is the
    byte that opens the machine's call, so a token that starts repetitions from outside the
    loop opens the call too and its count is that of the frame it pushes (a longer prefix
    would leave such tokens to the machine's own table, which keeps no count)."""
    if not isinstance(body, Concat):
        return None
    at = next((i for i, p in enumerate(body.parts)
               if isinstance(p, Repeat) and p.counted), None)
    if at != 1 or not all(isinstance(p, CharSet) and len(p.ranges) == 1 and
                          p.ranges[0][0] == p.ranges[0][1] < 0x80 for p in body.parts[:at]):
        return None
    prefix = body.parts[:at]
    suffix = concat(*body.parts[at + 1:])
    if called_names(body.parts[at].item) or called_names(suffix):
        return None
    spelled = "".join(chr(p.ranges[0][0]) for p in prefix).encode()
    return prefix, spelled, body.parts[at], suffix


def with_counted_repeat(body: Expr, longer_than: int, most: int) -> Expr | None:
    """`body` with its first repeat marked counted (`Repeat.counted`) when that makes a counter
    form whose repeat reads one character of a set per repetition (UTF-8 is a prefix code;
    the JSON front end's sets are single bytes, other spellings being alternatives) and is
    bounded past `longer_than` (at most `most`); None otherwise."""
    if not isinstance(body, Concat):
        return None
    at = next((i for i, p in enumerate(body.parts) if isinstance(p, Repeat)), None)
    if at is None:
        return None
    node = body.parts[at]
    bound = node.min if node.max is None else node.max
    if not isinstance(node.item, CharSet) or not longer_than < bound <= most:
        return None
    marked = Concat((*body.parts[:at], Repeat(node.item, node.min, node.max, counted=True),
                     *body.parts[at + 1:]))
    return marked if counter_form(marked) is not None else None


def dfa_with_counter(body: Expr, counted: bool, max_states: int,
                     codes: dict[str, bytes]) -> tuple[ByteDFA, tuple | None]:
    """The DFA of a machine body; if `counted` and the body has a counter form whose loop the
    next byte tells from its exit, the DFA of its unbounded loop and the counter (loop state,
    min, max, in-loop states); otherwise the body with its bounds, and None."""
    form = counter_form(body) if counted else None
    if form is not None:
        prefix, spelled, repeat_node, suffix = form
        item_first = starting_bytes(repeat_node.item, lambda name: None)
        exit_first = starting_bytes(suffix, lambda name: None)
        if item_first is None or exit_first is None or (item_first & exit_first).any():
            form = None
    if form is None:
        return build_dfa(body, max_states=max_states, call_codes=codes), None
    loop_body = concat(*prefix, Repeat(repeat_node.item, 0, None), suffix)
    dfa = build_dfa(loop_body, max_states=max_states, call_codes=codes)
    table = dfa.byte_table()
    loop = 1
    for byte in spelled:
        loop = int(table[loop, byte])
    in_loop = np.zeros(len(table), bool)
    in_loop[loop] = True
    todo = [int(t) for t in np.unique(table[loop][item_first]) if t]
    while todo:  # the states inside one repetition: until the walk is back at the loop
        q = todo.pop()
        if not in_loop[q]:
            in_loop[q] = True
            todo.extend(int(t) for t in np.unique(table[q]) if t and t != loop)
    if in_loop[np.unique(table[loop][exit_first])].any() or dfa.accepting[in_loop].any():
        raise AssertionError("the item of a counted repeat must be a prefix code")
    bound = -1 if repeat_node.max is None else repeat_node.max
    return dfa, (loop, repeat_node.min, bound, in_loop)
