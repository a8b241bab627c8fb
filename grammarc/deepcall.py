"""Deeply nested grammars on a deep stack.

Front ends and the NFA builder recurse once or a few times per level of nesting, and Python
stops at 1,000 frames: a schema of objects nested 200 deep, or a GBNF rule with 2,000 nested
parentheses, is a fair grammar that would fail. `call_with_deep_stack` runs a function on a
thread whose stack is large enough for a recursion limit of `RECURSION_LIMIT` frames (about
10 KB of C stack per frame, several times what CPython's deepest C paths were measured to
need), so such grammars compile, and deeper ones still end in a clean `RecursionError`, never
a crash.

The threads live for the process and wait for the next call when idle (one per call running
at the same time): starting a thread costs well under a millisecond at the median, but 4-17
ms now and then in the development VM (benchmarks/README.md, fifth pass).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

STACK_BYTES = 512 << 20
RECURSION_LIMIT = 50_000

#: A call handed to a deep thread: the function, the dict its outcome goes to, and the lock
#: released when it is there.
_Job = tuple[Callable[[], Any], dict[str, Any], threading.Lock]

_state = threading.local()
_lock = threading.Lock()  # guards the recursion limit's users and the idle threads
_limit_users = 0
_limit_before = 0
_idle: list[queue.SimpleQueue[_Job]] = []  # the job queues of the deep threads waiting


def call_with_deep_stack(function: Callable[[], T]) -> T:
    """`function()` run on a thread with a `STACK_BYTES` stack and the interpreter's
    recursion limit raised to `RECURSION_LIMIT` while it runs (the limit is interpreter-wide;
    it is put back when the last such call ends). Its result or exception comes back to the
    caller; a call made from inside one runs in place, and so does every call when no such
    thread can be started (a tight address-space limit: a deep grammar then ends in a
    `RecursionError`)."""
    if getattr(_state, "deep", False):
        return function()
    outcome: dict[str, Any] = {}
    done = threading.Lock()
    done.acquire()
    with _lock:
        jobs = _idle.pop() if _idle else _start_deep_thread()
        if jobs is not None:
            _raise_limit()
    if jobs is None:
        return function()
    try:
        jobs.put((function, outcome, done))
        done.acquire()
    finally:
        with _lock:
            _restore_limit()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _start_deep_thread() -> queue.SimpleQueue[_Job] | None:
    """A new deep thread's job queue, or None when the thread cannot be started. Called with
    `_lock` held, which keeps the process-wide stack size ours while the thread starts."""
    jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
    previous_size = threading.stack_size(STACK_BYTES)
    try:
        threading.Thread(target=_serve, args=(jobs,), name="grammarc-deep-stack",
                         daemon=True).start()
    except RuntimeError:
        return None
    finally:
        threading.stack_size(previous_size)
    return jobs


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    """A deep thread's loop: run each job, hand its outcome back, wait idle for the next."""
    _state.deep = True
    while True:
        function, outcome, done = jobs.get()
        try:
            outcome["value"] = function()
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread
            outcome["error"] = exc
        del function, outcome  # the result belongs to the caller alone
        with _lock:
            _idle.append(jobs)
        done.release()


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


def _forget_threads_after_fork() -> None:
    """A forked child has only the thread that forked: the parent's deep threads, their
    lock and their users are not its own."""
    global _lock, _limit_users
    _lock = threading.Lock()
    _idle.clear()
    if _limit_users and not getattr(_state, "deep", False):
        sys.setrecursionlimit(_limit_before)
    _limit_users = 0


os.register_at_fork(after_in_child=_forget_threads_after_fork)
