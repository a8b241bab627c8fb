"""Aligned machines kept per vocabulary: a called machine met again is not walked again.

The token entries of a machine's states (the classes of tokens each state allows and where
they lead) depend only on the machine's own byte table and the vocabulary: a walk from a
state of a machine stays in it, and a byte where it would call or return leads to the
walk's *stack* state (`calls.align_calls`). So the machines that many grammars share (any
JSON value, any string, a format's strings) are walked once per process and vocabulary, in
their own numbering, and the walk of each compile covers only the rest.

A machine's *key* is its byte table in its own numbering (dead 0, its states from 1, the
stack state after them) and its final states. A key met for the first time is only noted:
most machines are one schema's own (and one of more than `_MOST_STATES` states is not even
keyed). Met again, the machine is walked alone and its entries are kept (`BUDGET_BYTES` per
vocabulary, the least recently used dropped first). Merging
gives exactly the entries a walk of every state gives: the token classes are the common
refinement of the walks' classes, numbered by their smallest token either way
(`_core.canonical_classes`), and each kept entry stands for the finer classes below its
class (`_core.refine_entries`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import _core
from ..automaton.pushdown import PushdownDFA, byte_dfa
from .flat import StateRows, TokenEntries, VocabTrie, walk_entries

BUDGET_BYTES = 64 << 20  # kept entries per vocabulary
_KEYS_NOTED = 4096        # keys met once, remembered per vocabulary
_MOST_STATES = 1024       # a larger machine is one grammar's own: not even keyed


@dataclass(frozen=True)
class KeptMachine:
    """A machine's states `first..first + size - 1` in a grammar's table, and their entries
    from a walk of the machine alone (states 1..size; `size + 1` is the stack state, the
    grammar's `stack`): states walked elsewhere (`flat.walk_entries`)."""

    first: int
    size: int
    entries: TokenEntries
    stack: int

    @property
    def token_class(self) -> np.ndarray:
        return self.entries.token_class

    def rows(self, token_of_class: np.ndarray) -> StateRows:
        """The machine's entries in the grammar's numbering, over the grammar's classes
        (which refine the machine's), given any token of each (-1: none): each kept entry
        stands for the finer classes below its class."""
        own = self.entries
        coarse = np.where(token_of_class >= 0, own.token_class[np.maximum(token_of_class, 0)],
                          0)
        next_map = np.arange(self.first - 1, self.first + self.size + 1, dtype=np.int32)
        next_map[0], next_map[-1] = 0, self.stack
        ptr, entry_class, entry_next = _core.refine_entries(
            own.state_ptr, own.entry_class, own.entry_next, coarse.astype(np.int32), next_map)
        inside = slice(ptr[1], ptr[self.size + 1])
        return StateRows(self.first, ptr[1:self.size + 2] - ptr[1], entry_class[inside],
                         entry_next[inside])


class MachineCache:
    """The kept machines of one vocabulary (`machine_cache`); safe to share between threads."""

    def __init__(self) -> None:
        self._kept: OrderedDict[bytes, TokenEntries] = OrderedDict()
        self._noted: OrderedDict[bytes, None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The number of machines kept."""
        return len(self._kept)

    def get(self, key: bytes) -> TokenEntries | None:
        """The kept entries of `key`, or None."""
        with self._lock:
            entries = self._kept.get(key)
            if entries is not None:
                self._kept.move_to_end(key)
            return entries

    def met_before(self, key: bytes) -> bool:
        """Whether `key` was met before (noted now if not)."""
        with self._lock:
            if key in self._noted:
                return True
            self._noted[key] = None
            if len(self._noted) > _KEYS_NOTED:
                self._noted.popitem(last=False)
            return False

    def keep(self, key: bytes, entries: TokenEntries) -> None:
        """Keep `entries` (read-only from now on) under `key`, dropping the least recently
        used past `BUDGET_BYTES`."""
        for array in (entries.token_class, entries.state_ptr, entries.entry_class,
                      entries.entry_next):
            array.flags.writeable = False
        with self._lock:
            if key in self._kept or _size(entries) > BUDGET_BYTES:
                return
            self._kept[key] = entries
            self._bytes += _size(entries)
            while self._bytes > BUDGET_BYTES:
                self._bytes -= _size(self._kept.popitem(last=False)[1])


def _size(entries: TokenEntries) -> int:
    return sum(array.nbytes for array in (entries.token_class, entries.state_ptr,
                                          entries.entry_class, entries.entry_next))


def machine_cache(trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...]
                  ) -> MachineCache:
    """The kept machines of this vocabulary (its trie, size and EOS tokens)."""
    key = ("machines", vocab_size, tuple(sorted(set(eos_token_ids))))
    with _memo_lock:
        cache = trie.memo.get(key)
        if cache is None:
            cache = trie.memo[key] = MachineCache()
    return cache


_memo_lock = threading.Lock()


def kept_machines(pd: PushdownDFA, augmented: np.ndarray, accepting: np.ndarray, stack: int,
                  trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...]
                  ) -> list[KeptMachine]:
    """The called machines of `pd` whose entries are kept (walked alone now if met before).
    `augmented` is the byte table with the stack state `stack`, `accepting` its final
    states."""
    cache = machine_cache(trie, vocab_size, eos_token_ids)
    starts = pd.machine_start.tolist()
    kept = []
    for first, end in zip(starts[1:], [*starts[2:], pd.num_machine_states]):  # 0: the root
        if end - first > _MOST_STATES:
            continue
        own = _own_table(augmented[first:end], first, end, stack)
        if own is None:
            continue
        final = np.concatenate([[False], accepting[first:end], [True]])
        key = hashlib.blake2b(own.tobytes() + final.tobytes(), digest_size=20).digest()
        entries = cache.get(key)
        if entries is None:
            if not cache.met_before(key):
                continue  # walked with the rest
            entries = walk_entries(byte_dfa(own, final), trie, vocab_size, eos_token_ids,
                                   walked=end - first + 1)
            cache.keep(key, entries)
        kept.append(KeptMachine(first, end - first, entries, stack))
    return kept


def _own_table(rows: np.ndarray, first: int, end: int, stack: int) -> np.ndarray | None:
    """The byte table of a machine's states `rows` (first..end - 1) in its own numbering,
    with the stack state after them and the dead state 0; None if a row leaves them."""
    size = end - first
    inside = (rows >= first) & (rows < end)
    if not (inside | (rows == 0) | (rows == stack)).all():
        return None
    own = np.zeros((size + 2, 256), np.int32)
    own[1:size + 1] = np.where(inside, rows - first + 1, np.where(rows == stack, size + 1, 0))
    own[size + 1] = size + 1
    return own
