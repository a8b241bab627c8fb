"""The token masks a grammar has computed, kept so that a state's mask is computed once.

Two levels, each bounded in bytes and least recently used first out:

* the recent masks as read-only boolean arrays (a hit is a dictionary lookup);
* the masks the first level let go, and those asked for packed, eight tokens to a byte in a
  bitmask's bit order (a hit is one `np.unpackbits`, a few µs, or, for a bitmask, a copy of
  the bytes). A mask is packed when it leaves the first level, not when it is built: a first
  use does not pay for packing.

One level of boolean arrays alone thrashes as soon as a walk cycles through more masks than
it holds (a 64 MB cache holds 1,365 masks of a 49k vocabulary; a large schema's instances meet
3,000 states or more), and then every mask is computed again. Safe to share between
threads. Numpy only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from .bitmask import pack

RECENT_MASK_BYTES = 64 << 20   # boolean masks of one cache: at most this many bytes
PACKED_MASK_BYTES = 64 << 20   # packed masks of one cache: at most this many bytes


class MaskCache:
    """Boolean token masks over `vocab_size` tokens by key, built by the caller on a miss."""

    def __init__(self, vocab_size: int, recent_bytes: int = RECENT_MASK_BYTES,
                 packed_bytes: int = PACKED_MASK_BYTES) -> None:
        self._vocab_size = vocab_size
        self._recent: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._packed: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._max_recent = max(1, recent_bytes // max(vocab_size, 1))
        self._max_packed = max(1, packed_bytes // max((vocab_size + 7) // 8, 1))
        self._lock = threading.Lock()  # one grammar is shared by threads: misses and evictions

    @property
    def capacity(self) -> int:
        """How many masks the cache holds (packed)."""
        return self._max_packed

    def __len__(self) -> int:
        """How many distinct masks it holds now (either level)."""
        with self._lock:
            return len(self._packed.keys() | self._recent.keys())

    def get(self, key: Hashable, build: Callable[[], np.ndarray] | None) -> np.ndarray | None:
        """The mask of `key`, read-only; `build()` makes it (a fresh boolean array) if it is
        held by neither level (None without a `build`)."""
        mask = self._recent.get(key)  # the hit, without the lock: each call is atomic
        if mask is not None:
            try:
                self._recent.move_to_end(key)
            except KeyError:  # another thread evicted it meanwhile
                pass
            return mask
        with self._lock:
            packed = self._packed.get(key)
            if packed is not None:
                self._packed.move_to_end(key)
        if packed is None:
            if build is None:
                return None
            mask = build()  # outside the lock: two threads may build one mask twice
        else:
            mask = np.unpackbits(packed, count=self._vocab_size,
                                 bitorder="little").view(np.bool_)
        mask.flags.writeable = False
        with self._lock:
            self._remember(key, mask)
        return mask

    def packed(self, key: Hashable, build: Callable[[], np.ndarray] | None
               ) -> np.ndarray | None:
        """The mask of `key` packed (`bitmask.pack`, what `bitmask.write_bitmask` copies
        into an engine's bitmask row), read-only; None if neither level holds it and there
        is no `build`."""
        with self._lock:
            packed = self._packed.get(key)
            if packed is not None:
                self._packed.move_to_end(key)
                return packed
            mask = self._recent.get(key)
        if mask is None:
            if build is None:
                return None
            mask = build()
            mask.flags.writeable = False
        packed = pack(mask)
        with self._lock:
            self._keep_packed(key, packed)
            self._remember(key, mask)
        return packed

    def keep_packed(self, key: Hashable, packed: np.ndarray) -> None:
        """Hold the mask of `key` given packed (as `packed` returns it: read-only bytes),
        computed ahead by the caller; a later `get` unpacks it."""
        with self._lock:
            self._keep_packed(key, packed)

    def _remember(self, key: Hashable, mask: np.ndarray) -> None:
        """Hold `mask` in the recent level; the mask it evicts, if any, moves to the packed
        level (packed only then: a mask met once costs no packing). Under the lock."""
        self._recent[key] = mask
        self._recent.move_to_end(key)
        if len(self._recent) > self._max_recent:
            old_key, old = self._recent.popitem(last=False)
            if old_key not in self._packed:
                self._keep_packed(old_key, pack(old))

    def _keep_packed(self, key: Hashable, packed: np.ndarray) -> None:
        """Hold `packed` in the packed level, least recently used out. Under the lock."""
        self._packed[key] = packed
        self._packed.move_to_end(key)
        if len(self._packed) > self._max_packed:
            self._packed.popitem(last=False)

