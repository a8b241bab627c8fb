"""Checks and helpers for the arrays the runtime is handed: numpy arrays, or torch tensors
recognised without importing torch."""

from __future__ import annotations

import sys
from array import array

import numpy as np


def is_torch(value) -> bool:
    """Whether `value` is a torch tensor (without importing torch)."""
    return type(value).__module__.startswith("torch") and "torch" in sys.modules


def integer_array(values, what: str) -> np.ndarray:
    """`values` (an int, a numpy array, a list) as int64; a `TypeError` for anything that is
    not integers (floats, booleans, strings), which would otherwise be silently converted."""
    array = np.asarray(values)
    if array.dtype.kind not in "iu" and array.size:  # an empty list is no values, not floats
        raise TypeError(f"{what} must be integers, not {array.dtype}")
    return array.astype(np.int64, copy=False)


def integer(value, what: str) -> int:
    """`value` as an int: a Python int (not a bool), a numpy integer, or a 0-d integer array
    or tensor; a `TypeError` for anything else (floats, booleans, strings, None), a
    `ValueError` for an array of several values. The rule of every runtime entry point that
    takes a state, a token id, a budget or a count; a plain int costs one type test."""
    if type(value) is int:
        return value
    if isinstance(value, np.integer):
        return int(value)
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    if array.ndim:
        raise ValueError(f"{what} must be one integer, not an array of shape {array.shape}")
    return int(array)


def budgets_per_row(budget, rows: int) -> list:
    """`fill_bitmask`'s `budget` as one entry per row: None or one int for every row, or
    one per row (a list, numpy array or tensor of `rows` integers; a `ValueError` for
    another count)."""
    if budget is None or type(budget) is int or np.ndim(budget) == 0:
        return [budget] * rows
    budgets = integer_array(budget, "budgets").reshape(-1).tolist()
    if len(budgets) != rows:
        raise ValueError(f"{rows} states but {len(budgets)} budgets")
    return budgets


def byte_string(data, what: str = "data", *, text: bool = False) -> bytes:
    """`data` as bytes: bytes, bytearray or memoryview (with `text`, a str too, as UTF-8); a
    `TypeError` for anything else (an int would be that many NUL bytes to `bytes()`)."""
    if text and isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be {'str or ' * text}bytes, not {type(data).__name__}")


def check_logits(logits) -> None:
    """A `TypeError` unless `logits` is a floating-point numpy array or torch tensor."""
    if is_torch(logits):
        if not logits.is_floating_point():
            raise TypeError(f"logits must be floating point, not {logits.dtype}")
        return
    if not isinstance(logits, np.ndarray):
        raise TypeError(f"logits must be a numpy array or a torch tensor, not "
                        f"{type(logits).__name__}")
    if logits.dtype.kind != "f":
        raise TypeError(f"logits must be floating point, not {logits.dtype}")


def read_only(array: np.ndarray) -> np.ndarray:
    """`array`, made read-only (masks handed out are never written by callers)."""
    array.flags.writeable = False
    return array


def python_ints(values: np.ndarray) -> array:
    """Integer (or boolean) `values` as an `array.array` of int64: indexed, it gives Python
    ints at a list's speed, but it is one object that Python's garbage collector never
    walks, where a list of a grammar's 50,000 states would be walked by every collection
    that reaches it (an in-mask pause of milliseconds)."""
    return array("q", np.ascontiguousarray(values, np.int64).tobytes())
