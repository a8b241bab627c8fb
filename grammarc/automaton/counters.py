"""Counted repeats: a machine whose body is one byte, a counted `Repeat` and a suffix keeps
a count register instead of a copy of its item per repetition (`Counters`, `counter_form`).
A machine whose body is a `CountedText` (a pattern with lengths) counts the characters of
the pattern's texts the same way, across the pattern's states (`dfa_with_counter`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _core
from .bytedfa import ByteDFA
from .callgraph import called_names, starting_bytes
from .dfa import build_dfa
from .expr import CharSet, Concat, CountedText, Expr, Repeat, concat


@dataclass(frozen=True)
class Counters:
    """Count registers of machines whose body is a counted repeat (`counter_form`) or a
    `CountedText`.

    Machine m keeps a count when `loop[m]` (the loop state its prefix leads to) is not 0. A
    transition out of a `boundary` state (between repetitions) into an `in_loop` state starts
    one repetition. The count is the repetitions started plus `need` of the state (the fewest
    still to start before the machine can leave its loop; 0 for a counted repeat): it may
    not pass `count_max[m]` (-1: no bound), and a transition out of the loop to another
    state must leave it at least `count_min[m]`. A counted machine calls no other, except a
    union holding one (`unions`), which calls none inside its loop; where the count forbids
    a transition of one of its states there, that state's `twin` (0: none), the union
    without the counted machine, reads the byte instead, with no count.
    """

    loop: np.ndarray       # int32 [M]
    count_min: np.ndarray  # int64 [M]
    count_max: np.ndarray  # int64 [M]
    in_loop: np.ndarray    # bool [S]: the states between repetitions and inside one
    boundary: np.ndarray   # bool [S]: the states between repetitions
    need: np.ndarray       # int64 [S]: repetitions still needed to leave (0 outside loops)
    # a `CountedText`'s states: each one's state (-1: none) in the DFA of the spellings it
    # counts (`phase_next`, [P, 256], with its states between and inside repetitions)
    phase: np.ndarray
    phase_next: np.ndarray
    phase_boundary: np.ndarray
    phase_in_loop: np.ndarray
    twin: np.ndarray       # int64 [S]
    # a union's states inside the loop: the counted machine's state each stands for (-1:
    # none), which alone decides what a token does to the count
    member_state: np.ndarray  # int64 [S]

    def step(self, q: int, nxt: int, count: int, machine: int) -> tuple[int, int]:
        """(next state, count) of the transition q -> nxt in `machine`; (0, 0) if the count
        forbids it. Outside counted machines the count stays 0."""
        if machine < 0 or not self.loop[machine]:
            return (nxt, 0)
        total = count + int(self.boundary[q] and self.in_loop[nxt]) + \
            int(self.need[nxt]) - int(self.need[q])
        if self.in_loop[nxt]:
            bound = int(self.count_max[machine])
            return (0, 0) if 0 <= bound < total else (nxt, total)
        if self.in_loop[q] and total < self.count_min[machine]:
            return (0, 0)
        return (nxt, 0)


@dataclass(frozen=True)
class LocalCounter:
    """The count register of one machine's DFA, in its own numbering (see `Counters`)."""

    loop: int
    count_min: int
    count_max: int          # -1: no bound
    in_loop: np.ndarray     # bool [states]
    boundary: np.ndarray    # bool [states]
    need: np.ndarray        # int64 [states]
    # a `CountedText`'s: each state's state in its spelling DFA (-1: none), and that DFA's
    # byte table, states between repetitions and states inside the loop
    phase: np.ndarray | None = None
    spelling: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def key(self) -> tuple:
        return (self.loop, self.count_min, self.count_max, self.in_loop.tobytes(),
                self.boundary.tobytes(), self.need.tobytes())


def is_counted(body: Expr) -> bool:
    """Whether a machine with this body keeps a count (and so must stay a call)."""
    return isinstance(body, CountedText) or counter_form(body) is not None


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


def most_counted(body: Expr) -> int:
    """The largest count a counted machine's body bounds (its most, else its least; 0 for a
    body that counts nothing): what its count spelled out in states would take."""
    form = counter_form(body.lengths if isinstance(body, CountedText) else body)
    if form is None:
        return 0
    node = form[2]
    return node.min if node.max is None else node.max


def at_least(lengths: Expr) -> Expr | None:
    """The texts of a counter form with at least its least count of repetitions, and no most
    (nothing counted); None for a body that is no counter form."""
    form = counter_form(lengths)
    if form is None:
        return None
    prefix, _, repeat_node, suffix = form
    return concat(*prefix, Repeat(repeat_node.item, repeat_node.min, None), suffix)


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
                     codes: dict[str, bytes]) -> tuple[ByteDFA, LocalCounter | None]:
    """The DFA of a machine body; if `counted` and the body has a counter form whose loop the
    next byte tells from its exit, the DFA of its unbounded loop and its counter; a
    `CountedText` whose characters can be counted (`counted_text`), its texts' DFA and
    their counter; otherwise the body with its bounds, and None."""
    if isinstance(body, CountedText):
        found = counted_text(body, max_states) if counted else None
        return found if found is not None else \
            (build_dfa(body.exact(max_states), max_states=max_states, call_codes=codes), None)
    form = counter_form(body) if counted else None
    loop_dfa = _loop_dfa(form, max_states, codes) if form is not None else None
    if loop_dfa is None:
        return build_dfa(body, max_states=max_states, call_codes=codes), None
    dfa, loop, in_loop = loop_dfa
    repeat_node = form[2]
    bound = -1 if repeat_node.max is None else repeat_node.max
    boundary = np.zeros(len(in_loop), bool)
    boundary[loop] = True
    return dfa, LocalCounter(loop, repeat_node.min, bound, in_loop, boundary,
                             np.zeros(len(in_loop), np.int64))


def _loop_dfa(form: tuple, max_states: int, codes: dict[str, bytes]
              ) -> tuple[ByteDFA, int, np.ndarray] | None:
    """(DFA, loop state, states in the loop) of a counter form's body with its repeat
    unbounded, or None where the next byte cannot tell the loop from its exit."""
    prefix, spelled, repeat_node, suffix = form
    item_first = starting_bytes(repeat_node.item, lambda name: None)
    exit_first = starting_bytes(suffix, lambda name: None)
    if item_first is None or exit_first is None or (item_first & exit_first).any():
        return None
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
    return dfa, loop, in_loop


def counted_text(body: CountedText, max_states: int) -> tuple[ByteDFA, LocalCounter] | None:
    """`_count_text`, kept on `body` (the front end asks before the machine is built; the
    texts call nothing, so no call codes enter it)."""
    found = body.__dict__.get("_counted")
    if found is None or found[0] != max_states:
        found = (max_states, _count_text(body, max_states))
        object.__setattr__(body, "_counted", found)
    return found[1]


def _count_text(body: CountedText, max_states: int) -> tuple[ByteDFA, LocalCounter] | None:
    """The DFA of `body.texts` and a counter of the characters of `body.lengths` read along
    it, or None where that is not exact: each state of the texts must be at one place of a
    character's spelling (read beside the lengths' loop DFA), and the fewest characters
    (`need`) must not be below the least length (the register then only checks the most:
    the shortest way on from any state fits whenever a way does)."""
    form = counter_form(body.lengths)
    loop_dfa = _loop_dfa(form, max_states, {}) if form is not None else None
    if loop_dfa is None or body.texts.calls:
        return None
    spelling, spelling_loop, spelling_in_loop = loop_dfa
    dfa = body.texts.dfa
    table, spell = dfa.byte_table(), spelling.byte_table()
    place = np.full(len(table), -1, np.int64)  # each state's state in the spelling DFA
    place[1], todo = 1, np.array([1])
    width = len(spell)
    while len(todo):  # breadth first: every move must agree with the places found
        nxt, spelled = table[todo], spell[place[todo]]
        live = nxt != 0
        if (spelled[live] == 0).any():
            return None
        pairs = np.unique(nxt[live].astype(np.int64) * width + spelled[live])
        targets, first = np.unique(pairs // width, return_index=True)
        if len(targets) < len(pairs):  # a state at two places
            return None
        found = pairs[first] % width
        known = place[targets] >= 0
        if (place[targets[known]] != found[known]).any():
            return None
        todo = targets[~known]
        place[todo] = found[~known]
    reached = place >= 0
    in_loop = reached & spelling_in_loop[np.maximum(place, 0)]
    boundary = reached & (place == spelling_loop)
    if not np.array_equal(dfa.accepting[reached], spelling.accepting[place[reached]]):
        return None
    # fewest characters on to a final state: a starting byte costs one
    unknown = np.int64(1) << 40
    need = _fewest_starts(table, boundary[:, None] & in_loop[table], dfa.accepting)
    need = np.where(need < 0, unknown, need)
    loop = int(table[1, form[1][0]])
    lo, hi = form[2].min, form[2].max
    if not in_loop[loop] or (need[in_loop] >= unknown).any() or lo > need[loop]:
        return None
    need = np.where(in_loop, need, 0)
    spelling_boundary = np.zeros(len(spell), bool)
    spelling_boundary[spelling_loop] = True
    return dfa, LocalCounter(loop, lo, -1 if hi is None else hi, in_loop, boundary, need,
                             np.where(in_loop, place, -1),
                             (spell, spelling_boundary, spelling_in_loop))


def _fewest_starts(table: np.ndarray, starts: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """The fewest repetitions started on the way from each state to an accepting one (-1:
    none), where the move on byte b out of state q starts `starts[q, b]` (0 or 1); the dead
    state 0 leads nowhere (`_core.least_costs` over each state's distinct moves)."""
    num_states = len(table)
    owner = np.repeat(np.arange(num_states, dtype=np.int64), table.shape[1])
    move = (owner * num_states + table.reshape(-1)) * 2 + starts.reshape(-1)
    move = np.unique(move[(table.reshape(-1) != 0) & (owner != 0)])
    option_ptr = np.arange(len(move) + 1, dtype=np.int64)
    return _core.least_costs(np.ascontiguousarray(accepting, np.bool_),
                             (move // 2 // num_states).astype(np.int32), move % 2, option_ptr,
                             (move // 2 % num_states).astype(np.int32))
