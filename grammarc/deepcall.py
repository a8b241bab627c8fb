"""Deeply nested grammars on a deep stack.

Front ends and the NFA builder recurse once or a few times per level of nesting, and Python
stops at 1,000 frames: a schema of objects nested 200 deep, or a GBNF rule with 2,000 nested
parentheses, is a fair grammar that would fail. `call_with_deep_stack` runs a function on a
thread whose stack is large enough for a recursion limit of `RECURSION_LIMIT` frames (about
10 KB of C stack per frame, several times what CPython's deepest C paths were measured to
need), so such grammars compile, and deeper ones still end in a clean `RecursionError`, never
a crash.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

STACK_BYTES = 512 << 20
RECURSION_LIMIT = 50_000

_state = threading.local()
_limit_lock = threading.Lock()
_limit_users = 0
_limit_before = 0


def call_with_deep_stack(function: Callable[[], T]) -> T:
    """`function()` run on a thread with a `STACK_BYTES` stack and the interpreter's
    recursion limit raised to `RECURSION_LIMIT` while it runs (the limit is interpreter-wide;
    it is put back when the last such call ends). Its result or exception comes back to the
    caller; a call made from inside one runs in place."""
    if getattr(_state, "deep", False):
        return function()
    outcome: dict[str, object] = {}

    def target() -> None:
        _state.deep = True
        try:
            outcome["value"] = function()
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread
            outcome["error"] = exc

    with _limit_lock:
        _raise_limit()
        previous_size = threading.stack_size(STACK_BYTES)
        thread = threading.Thread(target=target, name="grammarc-deep-stack", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no room for such a stack (a tight address-space limit)
            _restore_limit()
            thread = None
        finally:
            threading.stack_size(previous_size)
    if thread is None:
        return function()  # in place: a deep grammar ends in a RecursionError
    try:
        thread.join()
    finally:
        with _limit_lock:
            _restore_limit()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _raise_limit() -> None:
    global _limit_users, _limit_before
    if _limit_users == 0:
        _limit_before = sys.getrecursionlimit()
        sys.setrecursionlimit(max(_limit_before, RECURSION_LIMIT))
    _limit_users += 1


def _restore_limit() -> None:
    global _limit_users
    _limit_users -= 1
    if _limit_users == 0:
        sys.setrecursionlimit(_limit_before)
