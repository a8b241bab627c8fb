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

Kept machines are also written to the cache folder (`tokenizers.cache.cache_dir`), one file
per machine in a folder per vocabulary and alignment code, so that a later process (a
command-line compile) takes them from there; a key met once is noted there too, so the
second process to meet it walks and writes it. A file that cannot be read is walked again;
a folder that cannot be written is skipped; the files used least recently go first past
`_DISK_BYTES` (and `_DISK_NOTES` notes), and a folder no process used for `_UNUSED_DAYS`
days (another version of the code's) goes, checked every `_PRUNE_EVERY` files written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _core
from ..automaton.pushdown import PushdownDFA, byte_dfa
from ..files import write_atomically
from ..tokenizers.cache import cache_dir
from . import flat
from .flat import TokenEntries, VocabTrie, walk_entries

BUDGET_BYTES = 64 << 20  # kept entries per vocabulary
_KEYS_NOTED = 4096        # keys met once, remembered per vocabulary
_MOST_STATES = 1024       # a larger machine is one grammar's own: not even keyed
_DISK_BYTES = 64 << 20   # kept machines on disk, per vocabulary folder
_DISK_NOTES = 4096       # keys noted on disk, per vocabulary folder
_PRUNE_EVERY = 16        # files written between two prunings of a folder
_UNUSED_DAYS = 30        # a vocabulary folder no process used for so long is removed
_ARRAYS = ("token_class", "state_ptr", "entry_class", "entry_next")
_DTYPES = (np.int32, np.int64, np.int32, np.int32)


@dataclass(frozen=True)
class KeptMachine:
    """A machine's states `first..first + size - 1` in a grammar's table, and their entries
    from a walk of the machine alone (states 1..size; `size + 1` is the stack state)."""

    first: int
    size: int
    entries: TokenEntries


class MachineCache:
    """The kept machines of one vocabulary (`machine_cache`), in memory and in `folder` (if
    not None); safe to share between threads."""

    def __init__(self, vocab_size: int, folder: Path | None = None) -> None:
        self._kept: OrderedDict[bytes, TokenEntries] = OrderedDict()
        self._noted: OrderedDict[bytes, None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._vocab_size = vocab_size
        self._folder = folder
        self._writes = 0

    def __len__(self) -> int:
        """The number of machines kept in memory."""
        return len(self._kept)

    def get(self, key: bytes, size: int) -> TokenEntries | None:
        """The kept entries of `key` (a machine of `size` states), or None."""
        with self._lock:
            entries = self._kept.get(key)
            if entries is not None:
                self._kept.move_to_end(key)
                return entries
        entries = self._read(key, size)
        if entries is not None:
            self._remember(key, entries)
        return entries

    def met_before(self, key: bytes) -> bool:
        """Whether `key` was met before, in this process or (noted on disk) another (noted now
        if not)."""
        with self._lock:
            if key in self._noted:
                return True
            self._noted[key] = None
            if len(self._noted) > _KEYS_NOTED:
                self._noted.popitem(last=False)
        if self._folder is None:
            return False
        marker = self._folder / f"{key.hex()}.met"
        try:
            if marker.exists():
                return True
            self._folder.mkdir(parents=True, exist_ok=True)
            marker.touch()
            self._written()
        except OSError:
            pass
        return False

    def keep(self, key: bytes, entries: TokenEntries) -> None:
        """Keep `entries` (read-only from now on) under `key`, dropping the least recently
        used past `BUDGET_BYTES`, and write them to the folder."""
        if self._remember(key, entries) and self._folder is not None:
            with contextlib.suppress(OSError):
                self._folder.mkdir(parents=True, exist_ok=True)
                arrays = {name: getattr(entries, name) for name in _ARRAYS}
                if entries.token_class.max(initial=0) < np.iinfo(np.int16).max:
                    arrays["token_class"] = entries.token_class.astype(np.int16)  # half
                write_atomically(self._folder / f"{key.hex()}.npz",
                                 lambda handle: np.savez(handle, **arrays), durable=False)
                (self._folder / f"{key.hex()}.met").unlink(missing_ok=True)
                self._written()

    def _remember(self, key: bytes, entries: TokenEntries) -> bool:
        """Keep `entries` in memory; whether they were new there."""
        for name in _ARRAYS:
            getattr(entries, name).flags.writeable = False
        with self._lock:
            if key in self._kept or _size(entries) > BUDGET_BYTES:
                return False
            self._kept[key] = entries
            self._bytes += _size(entries)
            while self._bytes > BUDGET_BYTES:
                self._bytes -= _size(self._kept.popitem(last=False)[1])
            return True

    def _read(self, key: bytes, size: int) -> TokenEntries | None:
        """The entries of `key` written by an earlier process, if whole and of the shapes a
        machine of `size` states has; its file's time is renewed (the newest stay)."""
        if self._folder is None:
            return None
        path = self._folder / f"{key.hex()}.npz"
        try:
            with np.load(path, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in _ARRAYS}
        except Exception:  # absent, or corrupt in any way: walked again, never fatal
            return None
        if arrays["token_class"].dtype == np.int16:
            arrays["token_class"] = arrays["token_class"].astype(np.int32)
        if any(arrays[name].dtype != dtype for name, dtype in zip(_ARRAYS, _DTYPES)):
            return None
        entries = TokenEntries(**arrays)
        if not _well_formed(entries, self._vocab_size, size):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return entries

    def _written(self) -> None:
        """Count a file written; every `_PRUNE_EVERY` files (the first included), prune."""
        self._writes += 1
        if self._writes % _PRUNE_EVERY == 1:
            self._prune()

    def _prune(self) -> None:
        """Remove the files of the folder used least recently past `_DISK_BYTES` of kept
        machines and `_DISK_NOTES` notes, temporary files an hour old (of writes that were
        cut short), and the folders beside it (other vocabularies, other versions of the
        code) that no process has used for `_UNUSED_DAYS` days."""
        kept, notes = [], []
        stale = time.time() - 3600
        for path in self._folder.iterdir():
            stat = path.stat()
            if path.suffix == ".tmp" and stat.st_mtime < stale:
                path.unlink(missing_ok=True)
            elif path.suffix in (".npz", ".met"):
                (kept if path.suffix == ".npz" else notes).append(
                    (stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in kept)
        for _, size, path in sorted(kept):
            if total <= _DISK_BYTES:
                break
            path.unlink(missing_ok=True)
            total -= size
        for _, _, path in sorted(notes)[:max(0, len(notes) - _DISK_NOTES)]:
            path.unlink(missing_ok=True)
        unused = time.time() - _UNUSED_DAYS * 86400
        for folder in self._folder.parent.iterdir():
            if folder.is_dir() and folder.stat().st_mtime < unused:
                shutil.rmtree(folder, ignore_errors=True)


def _well_formed(entries: TokenEntries, vocab_size: int, size: int) -> bool:
    """Whether read entries have the form a walk of a machine of `size` states gives: a
    class per token (0: never allowed, the others numbered by first token); per state (and
    the dead and stack states) increasing classes, leading to states of the machine."""
    token_class, ptr = entries.token_class, entries.state_ptr
    classes, nexts = entries.entry_class, entries.entry_next
    if token_class.shape != (vocab_size,) or ptr.shape != (size + 3,) or ptr[0] != 0 or \
            (np.diff(ptr) < 0).any() or classes.shape != (ptr[-1],) or \
            nexts.shape != classes.shape or (nexts < 0).any() or (nexts > size + 1).any():
        return False
    numbered, first = np.unique(token_class, return_index=True)
    if numbered[0] < 0 or not np.array_equal(numbered[1:], np.arange(1, len(numbered))) or \
            (np.diff(first[numbered > 0]) <= 0).any():
        return False
    within = np.ones(len(classes), bool)
    within[ptr[1:-1][ptr[1:-1] < len(classes)]] = False  # each state's first entry
    return not ((classes < 0).any() or (classes > numbered[-1]).any() or
                (np.diff(classes) <= 0)[within[1:]].any())


def _size(entries: TokenEntries) -> int:
    return sum(array.nbytes for array in (entries.token_class, entries.state_ptr,
                                          entries.entry_class, entries.entry_next))


def machine_cache(trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...]
                  ) -> MachineCache:
    """The kept machines of this vocabulary (its trie, size and EOS tokens)."""
    eos = tuple(sorted(set(eos_token_ids)))
    key = ("machines", vocab_size, eos)
    with _memo_lock:
        cache = trie.memo.get(key)
        if cache is None:
            identity = hashlib.blake2b(digest_size=16)
            for part in (_code_identity(), trie.token_data.tobytes(),
                         trie.token_offsets.tobytes(), repr((vocab_size, eos)).encode()):
                identity.update(part)
            try:
                folder: Path | None = cache_dir() / "machines" / identity.hexdigest()
            except RuntimeError:  # no home folder to hold the cache: memory only
                folder = None
            else:
                with contextlib.suppress(OSError):
                    os.utime(folder)  # used now (`MachineCache._prune`)
            cache = trie.memo[key] = MachineCache(vocab_size, folder)
    return cache


_memo_lock = threading.Lock()
_code: list[bytes] = []


def _code_identity() -> bytes:
    """A digest of the code that walks machines (the compiled core, this module and
    `flat`): entries written by other code are never read."""
    if not _code:
        digest = hashlib.blake2b(digest_size=16)
        for path in (_core.__file__, flat.__file__, __file__):
            digest.update(Path(path).read_bytes() if path else os.urandom(16))  # no file: once
        _code.append(digest.digest())
    return _code[0]


def kept_machines(pd: PushdownDFA, augmented: np.ndarray, accepting: np.ndarray, stack: int,
                  trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...]
                  ) -> list[KeptMachine]:
    """The called machines of `pd` whose entries are kept (walked alone now if met before).
    `augmented` is the byte table with the stack state `stack`, `accepting` its final
    states."""
    cache = machine_cache(trie, vocab_size, eos_token_ids)
    starts = pd.machine_start.tolist()
    kept = []
    for first, end in zip(starts[1:], [*starts[2:], pd.num_states]):  # machine 0: the root
        if end - first > _MOST_STATES:
            continue
        own = _own_table(augmented[first:end], first, end, stack)
        if own is None:
            continue
        final = np.concatenate([[False], accepting[first:end], [True]])
        key = hashlib.blake2b(own.tobytes() + final.tobytes(), digest_size=20).digest()
        entries = cache.get(key, end - first)
        if entries is None:
            if not cache.met_before(key):
                continue  # walked with the rest
            entries = walk_entries(byte_dfa(own, final), trie, vocab_size, eos_token_ids,
                                   walked=end - first + 1)
            cache.keep(key, entries)
        kept.append(KeptMachine(first, end - first, entries))
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


def merge_entries(walked: TokenEntries, kept: list[KeptMachine], stack: int) -> TokenEntries:
    """The entries of every state: those of `walked` (whose classes already refine the kept
    machines', `walk_entries(refine_by=...)`) and the kept machines', over the same classes."""
    if not kept:
        return walked
    token_class = walked.token_class
    num_classes = int(token_class.max(initial=0)) + 1
    token_of_class = np.full(num_classes, -1, np.int64)
    token_of_class[token_class] = np.arange(len(token_class))  # any token of each class
    has_token = token_of_class >= 0
    counts = np.diff(walked.state_ptr)
    pieces = []
    for machine in kept:
        own = machine.entries
        coarse = np.where(has_token, own.token_class[np.maximum(token_of_class, 0)], 0)
        next_map = np.arange(machine.first - 1, machine.first + machine.size + 1, dtype=np.int32)
        next_map[0], next_map[-1] = 0, stack
        ptr, entry_class, entry_next = _core.refine_entries(
            own.state_ptr, own.entry_class, own.entry_next, coarse.astype(np.int32), next_map)
        rows = slice(machine.first, machine.first + machine.size)
        counts[rows] = np.diff(ptr)[1:machine.size + 1]
        pieces.append((rows, entry_class[ptr[1]:ptr[machine.size + 1]],
                       entry_next[ptr[1]:ptr[machine.size + 1]]))
    state_ptr = np.zeros(len(walked.state_ptr), np.int64)
    np.cumsum(counts, out=state_ptr[1:])
    entry_class = np.empty(state_ptr[-1], np.int32)
    entry_next = np.empty(state_ptr[-1], np.int32)
    own_rows = np.diff(walked.state_ptr)
    at = np.repeat(state_ptr[:-1] - walked.state_ptr[:-1], own_rows) + \
        np.arange(walked.state_ptr[-1])
    entry_class[at], entry_next[at] = walked.entry_class, walked.entry_next
    for rows, classes, nexts in pieces:
        entry_class[state_ptr[rows.start]:state_ptr[rows.stop]] = classes
        entry_next[state_ptr[rows.start]:state_ptr[rows.stop]] = nexts
    return TokenEntries(token_class, state_ptr, entry_class, entry_next)
