"""A compiled grammar's tables in memory: one numpy-only value that the aligner produces, the
artifact codec writes and reads in every layout (`grammarc.format.artifact`), and the runtime masks
with (`grammarc.runtime`, numpy and torch).

The token table is factored (docs/FORMAT.md): `token_class[t]` is token t's class, state `s`
uses row `state_row[s]`, and row `r`'s entries `row_ptr[r]:row_ptr[r + 1]` are the classes
allowed there (`row_class`, sorted) with the step to the next state (`row_delta`, so the next
state is `s + row_delta[j]`). Class 0 is never allowed. Beside it: acceptance, the fewest
tokens to acceptance, the byte DFA (CSR over byte ranges), optional state labels, and for
grammars with calls (format version 2) their `CallTables`, with `CountRegisters` where machines
keep a count (version 3). Their fields are the artifact's tensor names: the aligner fills them,
the format writes and reads them, the runtime looks them up, all by these names.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import Field, dataclass, field, fields
from functools import cached_property

import numpy as np


INT32_FIELDS = ("row_class", "row_delta")  # `TokenTable`'s arrays kept as int32


@dataclass(frozen=True, eq=False)
class TokenTable:
    """The arrays of a compiled grammar (module docstring), read-only int64/bool, the row
    entries int32 (class ids and state steps stay below 2^31; `frozen`: copies, or the
    aligner's own results)."""

    token_class: np.ndarray           # [V]
    state_row: np.ndarray             # [S]
    row_ptr: np.ndarray               # [R + 1]
    row_class: np.ndarray             # [N] int32, sorted within each row
    row_delta: np.ndarray             # [N] int32: next state - state
    accepting: np.ndarray             # [S] bool
    min_tokens_to_accept: np.ndarray  # [S], -1 where acceptance is out of reach
    byte_ptr: np.ndarray              # [S + 1]
    byte_ranges: np.ndarray           # [E, 2] inclusive byte ranges
    byte_next: np.ndarray             # [E]
    state_labels: np.ndarray | None = None        # [S], index into the state names, -1: none
    calls: CallTables | None = None               # format versions 2 and 3

    def __post_init__(self) -> None:
        for name in ("token_class", "state_row", "row_ptr", "min_tokens_to_accept", "byte_ptr",
                     "byte_ranges", "byte_next"):
            object.__setattr__(self, name, frozen(getattr(self, name), np.int64))
        for name in INT32_FIELDS:  # most of a large table: half the memory
            object.__setattr__(self, name, frozen(getattr(self, name), np.int32))
        object.__setattr__(self, "accepting", frozen(self.accepting, np.bool_))
        if self.state_labels is not None:
            object.__setattr__(self, "state_labels", frozen(self.state_labels, np.int64))

    @property
    def num_states(self) -> int:
        return len(self.accepting)

    @property
    def vocab_size(self) -> int:
        return len(self.token_class)

    @property
    def num_rows(self) -> int:
        return len(self.row_ptr) - 1

    @cached_property
    def num_classes(self) -> int:
        return int(self.token_class.max(initial=0)) + 1

    @cached_property
    def entry_key(self) -> np.ndarray:
        """`row * num_classes + class` of every row entry: sorted, for vectorised steps."""
        rows = np.repeat(np.arange(self.num_rows), np.diff(self.row_ptr))
        return frozen(rows * self.num_classes + self.row_class, np.int64)

    def row_mask(self, row: int) -> np.ndarray:
        """Booleans over the vocabulary: the tokens row `row` allows (a fresh array), written
        as `classes_mask` says."""
        return self.classes_mask(self.row_class[self.row_ptr[row]:self.row_ptr[row + 1]])

    def classes_mask(self, classes: np.ndarray) -> np.ndarray:
        """Booleans over the vocabulary: the tokens of `classes` (distinct class ids; a fresh
        array), written the cheapest of three ways (each cost measured in numpy passes): the
        tokens of the smaller side one by one on zeros or ones (a free-text row allows nearly
        every token, a punctuation row a few); the tokens outside the largest class
        (`outside_largest`, typically a fifth of the vocabulary) by their classes over a fill
        with the largest class's answer; or one gather of every token's class."""
        order, class_ptr = self.tokens_by_class
        sizes = class_ptr[classes + 1] - class_ptr[classes]
        allowed = int(sizes.sum())
        written_on_zeros = 2 * allowed <= self.vocab_size
        largest, outside, outside_class = self.outside_largest
        by_class = min(_OUTSIDE_COST * len(outside), self.vocab_size)
        if _SCATTER_COST * min(allowed, self.vocab_size - allowed) > by_class:
            kept = np.zeros(self.num_classes, np.bool_)
            kept[classes] = True
            if by_class == self.vocab_size:
                return kept[self.token_class]
            mask = np.full(self.vocab_size, kept[largest])
            mask[outside] = kept[outside_class]
            return mask
        if not written_on_zeros:
            kept = np.ones(self.num_classes, np.bool_)
            kept[classes] = False
            classes = np.flatnonzero(kept)
            sizes = class_ptr[classes + 1] - class_ptr[classes]
        mask = np.zeros(self.vocab_size, np.bool_) if written_on_zeros \
            else np.ones(self.vocab_size, np.bool_)
        if len(classes) <= _FEW_CLASSES:  # a write per class costs less than indexing them
            starts = self.class_starts
            for one in classes.tolist():
                mask[order[starts[one]:starts[one + 1]]] = written_on_zeros
        else:
            mask[order[np.repeat(class_ptr[classes], sizes) + positions_within(sizes)]] = \
                written_on_zeros
        return mask

    @cached_property
    def outside_largest(self) -> tuple[int, np.ndarray, np.ndarray]:
        """The largest class, the tokens of every other class (ascending) and their classes."""
        largest = int(np.argmax(np.bincount(self.token_class, minlength=self.num_classes)))
        outside = np.flatnonzero(self.token_class != largest)
        return largest, outside, self.token_class[outside]

    def mask_row(self, row: int) -> int:
        """The first row met that allows the same classes as `row` (itself if none): rows
        that differ only in their next states share one mask (in a tool-call grammar with
        128 tools, 13,231 rows allow 1,551 distinct sets of classes)."""
        seen = self._mask_rows[row]
        if seen < 0:
            classes = self.row_class[self.row_ptr[row]:self.row_ptr[row + 1]].tobytes()
            seen = self._mask_rows[row] = self._class_sets.setdefault(classes, int(row))
        return seen

    def share_mask_rows(self, mask_row: np.ndarray) -> None:
        """Take every row's `mask_row` answer from `mask_row` (computed ahead, by
        `alignment.row_masks`): the first row that allows the same classes, per row."""
        if mask_row.shape != (self.num_rows,):
            raise ValueError(f"mask_row has shape {mask_row.shape}, not ({self.num_rows},)")
        self._mask_rows[:] = array("q", np.ascontiguousarray(mask_row, np.int64).tobytes())

    def mask_rows(self) -> np.ndarray:
        """One row for each distinct set of allowed classes (`mask_row`), in row order."""
        return np.unique([self.mask_row(row) for row in range(self.num_rows)])

    @cached_property
    def _mask_rows(self) -> array:
        """`mask_row`'s answers so far (-1: none), as Python ints by index (read by every
        mask of a state with calls; a numpy scalar read costs several times more)."""
        return array("q", [-1]) * self.num_rows

    @cached_property
    def _class_sets(self) -> dict[bytes, int]:
        return {}  # a row's allowed classes -> the first row met that allows them

    @cached_property
    def tokens_by_class(self) -> tuple[np.ndarray, np.ndarray]:
        """The token ids ordered by class, and each class's start in that order (CSR). About
        0.5 ms for 49k tokens: `Grammar` computes it as it is made, so that no mask pays it."""
        narrow = self.token_class.astype(np.uint16) if self.num_classes <= 1 << 16 \
            else self.token_class  # a stable sort of 16-bit keys is a radix sort
        order = np.argsort(narrow, kind="stable")
        class_ptr = np.zeros(self.num_classes + 1, np.int64)
        np.cumsum(np.bincount(self.token_class, minlength=self.num_classes), out=class_ptr[1:])
        return order, class_ptr

    @cached_property
    def class_starts(self) -> list[int]:
        """`tokens_by_class`'s class starts as Python ints, for slicing one class's tokens."""
        return self.tokens_by_class[1].tolist()

    def _next_by_class(self) -> Iterator[tuple[int, np.ndarray]]:
        """The next states of a block of states at a time, by class (int32 [states, C],
        0 = not allowed), each block about 32 MB once spread over the vocabulary: (its first
        state, the block). The dead state allows nothing."""
        size = max(1, (8 << 20) // max(1, self.vocab_size))
        row_lengths = np.diff(self.row_ptr)
        for lo in range(0, self.num_states, size):
            hi = min(lo + size, self.num_states)
            rows, row_of_state = np.unique(self.state_row[lo:hi], return_inverse=True)
            lengths = row_lengths[rows]
            entry = np.repeat(self.row_ptr[rows], lengths) + positions_within(lengths)
            local = np.repeat(np.arange(len(rows)), lengths)
            listed = np.zeros((len(rows), self.num_classes), np.bool_)
            listed[local, self.row_class[entry]] = True
            step = np.zeros((len(rows), self.num_classes), np.int32)
            step[local, self.row_class[entry]] = self.row_delta[entry]
            row_of_state = row_of_state.reshape(-1)
            by_class = step[row_of_state] + np.arange(lo, hi, dtype=np.int32)[:, None]
            by_class[~listed[row_of_state]] = 0
            if lo == 0:
                by_class[0] = 0
            yield lo, by_class

    def dense(self) -> np.ndarray:
        """The full table `T[state, token]` (int32, shape (num_states, vocab_size)): each
        block of `_next_by_class` spread over the vocabulary in one gather."""
        out = np.empty((self.num_states, self.vocab_size), np.int32)
        for lo, by_class in self._next_by_class():
            np.take(by_class, self.token_class, axis=1, out=out[lo:lo + len(by_class)])
        return out

    def transitions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every allowed (state, token) pair of the ordinary table with its next state, as
        CSR: `ptr` [S + 1] and, per state, its tokens (sorted) and next states."""
        counts, tokens, nxt = [], [], []
        for _, by_class in self._next_by_class():
            block = np.take(by_class, self.token_class, axis=1)
            rows, columns = np.nonzero(block)  # row-major: by state, then token
            counts.append(np.bincount(rows, minlength=len(block)))
            tokens.append(columns)
            nxt.append(block[rows, columns].astype(np.int64))
        ptr = np.zeros(self.num_states + 1, np.int64)
        np.cumsum(np.concatenate(counts), out=ptr[1:])
        return ptr, np.concatenate(tokens).astype(np.int64), np.concatenate(nxt)


def _tensor(sign: str, ndim: int, since: int = 2) -> Field:
    """A field of the call tables: how the artifact stores it, unsigned (`u`) or signed (`i`)
    and its number of dimensions, and the format version that added it (docs/FORMAT.md)."""
    return field(metadata={"stored": (sign, ndim), "since": since})


def stored_tensors(tables: type, version: int | None = None) -> dict[str, tuple[str, int]]:
    """Tensor name -> (signedness, dimensions) of the array fields of `CallTables`,
    `CountRegisters` or `ExitTables` (those a format `version` stores; None: all): the artifact's
    specification of those tensors."""
    return {f.name: f.metadata["stored"] for f in fields(tables) if "stored" in f.metadata and
            (version is None or f.metadata["since"] <= version)}


def _freeze_tensors(tables: CallTables | CountRegisters | ExitTables) -> None:
    """Every array field of `tables` as a read-only int64 array (`count_table` keeps its
    narrow dtype) of the dimensions the format stores; a `ValueError` otherwise."""
    for name, (_, ndim) in stored_tensors(type(tables)).items():
        values = getattr(tables, name)
        array = frozen(values, np.asarray(values).dtype if name == "count_table" else np.int64)
        if array.ndim != ndim:
            raise ValueError(f"{name} must have {ndim} dimension(s), not {array.ndim}")
        object.__setattr__(tables, name, array)


@dataclass(frozen=True, eq=False)
class CountRegisters:
    """The count registers of counted machines (format versions 3 and 4, docs/FORMAT.md).

    `count_row[q]` (-1 outside loops) is a row of `count_table`: token t adds
    `count_table[row, t] >> 1` to the count from q, and leaves the loop when
    `count_table[row, t] & 1`. With count c in a machine bounded by [min, max], t is allowed
    only if c + added <= max, and if it leaves, c + added >= min. For budgets:
    `count_complete_cost[q]` tokens end the repetition under way without starting one,
    `machine_item_cost[m]` tokens read exactly one repetition from the loop state (-1: none
    can). `stack_reps` and `suffix_reps` are the counts a stack token or suffix ends with.
    For bytes: `count_loop[q]` marks the states between repetitions, and `count_need[q]`
    the repetitions still needed from q, which the count includes (version 4: a pattern's
    characters counted across its states; in version 3 the one loop state of each machine,
    and no need). `count_twin[q]` (version 6, 0: none) is the state that reads a token or
    byte from loop state q instead where the count forbids it (a union of machines one of
    which counts: the same union without that one).
    """

    machine_loop: np.ndarray = _tensor("u", 1)         # [M] its loop state, 0: not counted
    machine_count_min: np.ndarray = _tensor("u", 1)    # [M]
    machine_count_max: np.ndarray = _tensor("i", 1)    # [M], -1: no bound
    machine_item_cost: np.ndarray = _tensor("i", 1)    # [M]
    count_row: np.ndarray = _tensor("i", 1)            # [S]
    count_table: np.ndarray = _tensor("u", 2)          # uint8 or uint16 [rows, V]
    count_complete_cost: np.ndarray = _tensor("i", 1)  # [S]
    stack_reps: np.ndarray = _tensor("u", 1)           # [stack tokens]
    suffix_reps: np.ndarray = _tensor("u", 1)          # [suffix entries]
    count_loop: np.ndarray = _tensor("u", 1, since=4)  # [S] 0/1
    count_need: np.ndarray = _tensor("u", 1, since=4)  # [S]
    count_twin: np.ndarray = _tensor("u", 1, since=6)  # [S]

    def __post_init__(self) -> None:
        _freeze_tensors(self)

    @property
    def version(self) -> int:
        """The format version that holds these registers: 6 where a loop state has a twin,
        4 where a machine has more than one state between repetitions or needs
        repetitions, else 3."""
        if self.count_twin.any():
            return 6
        counted = self.machine_loop[self.machine_loop > 0]
        single = int(self.count_loop.sum()) == len(counted) and \
            bool(np.all(self.count_loop[counted]))
        return 3 if single and not self.count_need.any() else 4

    @staticmethod
    def without_counts(num_machines: int, num_states: int, num_stack_tokens: int,
                       num_suffix_entries: int, vocab_size: int) -> "CountRegisters":
        """Registers of machines none of which counts (what version 5 stores for them)."""
        return CountRegisters(
            machine_loop=np.zeros(num_machines, np.int64),
            machine_count_min=np.zeros(num_machines, np.int64),
            machine_count_max=np.full(num_machines, -1, np.int64),
            machine_item_cost=np.full(num_machines, -1, np.int64),
            count_row=np.full(num_states, -1, np.int64),
            count_table=np.zeros((0, vocab_size), np.uint8),
            count_complete_cost=np.full(num_states, -1, np.int64),
            stack_reps=np.zeros(num_stack_tokens, np.int64),
            suffix_reps=np.zeros(num_suffix_entries, np.int64),
            count_loop=np.zeros(num_states, np.int64), count_need=np.zeros(num_states, np.int64),
            count_twin=np.zeros(num_states, np.int64))

    @staticmethod
    def loop_and_need(machine_loop: np.ndarray, num_states: int) -> dict[str, np.ndarray]:
        """`count_loop` and `count_need` of version 3 registers: each machine's loop state,
        no need."""
        loop = np.zeros(num_states, np.int64)
        loop[machine_loop[machine_loop > 0]] = 1
        return {"count_loop": loop, "count_need": np.zeros(num_states, np.int64)}


@dataclass(frozen=True, eq=False)
class ExitTables:
    """Returns chosen by how a machine ends (format version 5, docs/FORMAT.md): a *union*
    machine reads a text as several machines at once, and each of its final states has an
    exit class, `exit_class[q]` (which of those machines accept the text); a call of it
    pushes a *site*, a state whose `site_next[site_ptr[s]:site_ptr[s + 1]]` is the state
    returned to after each exit class (0: the text dies). A state with no site entries is
    returned to whatever the class. `suffix_class[i]` is the exit class of the state a
    token returned from before reading suffix i."""

    exit_class: np.ndarray = _tensor("u", 1, since=5)   # [S]
    site_ptr: np.ndarray = _tensor("u", 1, since=5)     # [S + 1]
    site_next: np.ndarray = _tensor("u", 1, since=5)    # [Y]
    suffix_class: np.ndarray = _tensor("u", 1, since=5)  # [suffix ids]

    def __post_init__(self) -> None:
        _freeze_tensors(self)


def returns_after(rets, classes, site_ptr: np.ndarray, site_next: np.ndarray) -> np.ndarray:
    """The states a return leads to: return state `rets[i]` popped by a machine ending in
    exit class `classes[i]`: a site's state for that class (0 where it has none), any
    other state itself (docs/FORMAT.md, version 5)."""
    rets = np.asarray(rets, np.int64)
    classes = np.broadcast_to(np.asarray(classes, np.int64), rets.shape)
    lo = site_ptr[rets]
    size = site_ptr[rets + 1] - lo
    out = np.where(size == 0, rets, 0)
    chosen = (size > 0) & (classes >= 0) & (classes < size)
    out[chosen] = site_next[lo[chosen] + classes[chosen]]
    return out


@dataclass(frozen=True, eq=False)
class CallTables:
    """The tables of machines linked by calls (format version 2, docs/FORMAT.md), beside the
    ordinary table of the tokens that stay in their state's machine without a call.

    Machine m starts at `machine_start[m]` and begins with the bytes `machine_first[m]`;
    state q calls `call_machine[k]` returning to `call_return[k]`, for k in
    `call_ptr[q]:call_ptr[q + 1]`. The stack tokens of q are
    `stack_token[stack_ptr[q]:stack_ptr[q + 1]]` (sorted), each with `stack_next` (the state it
    ends in, or -1 when it returns past the frame) and `stack_arg` (the push sequence it
    leaves on the stack, or the id of the suffix read after the return). A suffix read from a
    return state has one entry in the `suffix_*` arrays, sorted by (state, suffix id), with the
    same meaning of next and arg; a missing entry means the text dies there. Push sequence p
    is `push_states[push_ptr[p]:push_ptr[p + 1]]`, bottom of the stack first; 0 is empty.
    """

    machine_start: np.ndarray = _tensor("u", 1)  # [M]
    machine_first: np.ndarray = _tensor("u", 2)  # [M, 256] 0/1
    call_ptr: np.ndarray = _tensor("u", 1)       # [S + 1]
    call_machine: np.ndarray = _tensor("u", 1)   # [C]
    call_return: np.ndarray = _tensor("u", 1)    # [C]
    stack_ptr: np.ndarray = _tensor("u", 1)      # [S + 1]
    stack_token: np.ndarray = _tensor("u", 1)    # [X]
    stack_next: np.ndarray = _tensor("i", 1)     # [X]
    stack_arg: np.ndarray = _tensor("u", 1)      # [X]
    suffix_state: np.ndarray = _tensor("u", 1)   # [N]
    suffix_id: np.ndarray = _tensor("u", 1)      # [N]
    suffix_next: np.ndarray = _tensor("i", 1)    # [N]
    suffix_arg: np.ndarray = _tensor("u", 1)     # [N]
    push_ptr: np.ndarray = _tensor("u", 1)       # [P + 1]
    push_states: np.ndarray = _tensor("u", 1)
    counters: CountRegisters | None = None       # format version 3
    exits: ExitTables | None = None              # format version 5 (with counters)

    def __post_init__(self) -> None:
        _freeze_tensors(self)
        if self.exits is not None and self.counters is None:
            raise ValueError("exit tables come with count registers (format version 5)")

    @property
    def version(self) -> int:
        """The format version that holds these tables: 2, 3 or 4 by their count registers,
        5 with exit tables, 6 with twins (which only unions have)."""
        if self.counters is None:
            return 2
        version = self.counters.version
        return max(version, 5) if self.exits is not None else version

    def tensors(self) -> dict[str, np.ndarray]:
        """Every array the artifact's format version stores, by its field name, the
        counters' and exit tables' included: the artifact's tensors."""
        version = self.version
        parts = [part for part in (self, self.counters, self.exits) if part is not None]
        return {name: getattr(part, name) for part in parts
                for name in stored_tensors(type(part), version)}


def frozen(values, dtype) -> np.ndarray:
    """`values` as a read-only array of `dtype`: itself when it already is one that shares
    its memory with no other array (a kernel's result of hundreds of megabytes, say),
    otherwise a copy."""
    if isinstance(values, np.ndarray) and values.dtype == dtype and \
            not values.flags.writeable and not isinstance(values.base, np.ndarray):
        return values
    array = np.array(values, dtype=dtype)
    array.flags.writeable = False
    return array


# costs of `TokenTable.classes_mask`'s ways, per token written, in gathers of one token
_SCATTER_COST = 8   # a token of the smaller side: its position by class, then the write
_OUTSIDE_COST = 3   # a token outside the largest class: its class's answer, then the write
_FEW_CLASSES = 16   # at most this many classes written: one write per class


def positions_within(sizes: np.ndarray) -> np.ndarray:
    """Each element's position in its run, for consecutive runs of `sizes` elements
    (`[2, 0, 3]` -> `[0, 1, 0, 1, 2]`): the offsets that gather ragged rows in one step."""
    sizes = np.asarray(sizes, np.int64)
    return np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
