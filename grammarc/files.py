"""Atomic file writes: the one place grammarc replaces a file through a temporary beside it.

Needs only the standard library, so the runtime side may use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> None:
    """Write `path` through `write(handle)` so that readers see the old file or the whole new one.

    `write` fills a temporary file ``.NAME.XXXX.tmp`` in the target's directory, which is then
    flushed, synced, given the permissions a new file gets under the umask, and renamed over
    `path`. On any exception (an OSError, or KeyboardInterrupt and SystemExit, into which the
    CLI turns SIGTERM) the temporary file is removed and the exception propagates; callers turn
    OSError into their own message.
    """
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    tmp_name = ""
    try:
        # the name is known before the file exists, so a signal the CLI turns into SystemExit
        # as soon as it exists still removes it (`tempfile.mkstemp` may be interrupted
        # between creating the file and returning its name)
        while True:
            tmp_name = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(8)}.tmp")
            try:
                fd = os.open(tmp_name, flags, 0o600)
                break
            except FileExistsError:
                continue
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
    except BaseException:
        if tmp_name:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
        raise

