"""The on-disk cache of extracted vocabularies: one ``.npz`` per tokenizer file version.

The folder is ``$GRAMMARC_CACHE_DIR``, else ``$XDG_CACHE_HOME/grammarc``, else
``~/.cache/grammarc``. An entry's key covers each source file's resolved path, size and
mtime, so an edited file is read again; an unreadable entry is rebuilt, an unwritable folder
is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grammarc.errors import TokenizerError
from grammarc.files import write_atomically

from .vocabulary import Vocab

_CACHE_VERSION = 1


def _cache_dir() -> Path:
    if os.environ.get("GRAMMARC_CACHE_DIR"):
        return Path(os.environ["GRAMMARC_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "grammarc"


def cache_key(sources: list[Path]) -> str:
    """sha256 of the cache format version and each source's resolved path, size and mtime."""
    stats = []
    for path in sources:
        try:
            st = path.stat()
        except OSError as exc:
            raise TokenizerError(f"cannot read tokenizer file {path}: {exc.strerror}") from None
        stats.append([str(path.resolve()), st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps([_CACHE_VERSION, stats]).encode()).hexdigest()


def _pack(items: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in items], out=offsets[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), offsets


def _unpack(data: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    blob, ends = data.tobytes(), offsets.tolist()
    return [blob[a:b] for a, b in zip(ends, ends[1:])]


def _cache_file(key: str, sources: list[Path]) -> Path:
    """The cache file for `key`; its name starts with a hash of the tokenizer file's path."""
    path_hash = hashlib.sha256(str(sources[0].resolve()).encode()).hexdigest()[:16]
    return _cache_dir() / f"vocab-{path_hash}-{key}.npz"


def write_cache(key: str, sources: list[Path], vocab: Vocab) -> None:
    """Store `vocab` under `key`, dropping entries for older versions of the same file.

    An unwritable cache directory is skipped silently.
    """
    data, offsets = _pack([t or b"" for t in vocab.tokens])
    special_ids = sorted(vocab.special_texts)
    special_data, special_offsets = _pack([vocab.special_texts[i].encode() for i in special_ids])
    target = _cache_file(key, sources)
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(target, lambda f: np.savez(
            f, data=data, offsets=offsets,
            none=np.array([t is None for t in vocab.tokens], dtype=bool),
            eos=np.array(vocab.eos, dtype=np.int64),
            special_ids=np.array(special_ids, dtype=np.int64),
            special_data=special_data, special_offsets=special_offsets,
            sources=np.array([str(p.resolve()) for p in sources])))
    except OSError:
        return
    for stale in folder.glob(target.name.rsplit("-", 1)[0] + "-*.npz"):
        if stale != target:
            with contextlib.suppress(OSError):
                stale.unlink()


def read_cache(key: str, sources: list[Path]) -> Vocab | None:
    """The cached vocabulary under `key`, or None when absent or unreadable."""
    path = _cache_file(key, sources)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            if npz["sources"].tolist() != [str(p.resolve()) for p in sources]:
                return None
            raw = _unpack(npz["data"], npz["offsets"])
            none = npz["none"].tolist()
            if len(none) != len(raw):
                return None
            texts = _unpack(npz["special_data"], npz["special_offsets"])
            special_texts = {int(i): t.decode() for i, t in zip(npz["special_ids"].tolist(), texts)}
            eos = npz["eos"].tolist()
    except Exception:  # a corrupt cache file of any kind is rebuilt, never fatal
        return None
    tokens = [None if n else b for b, n in zip(raw, none)]
    return Vocab(tokens, eos, special_texts)
