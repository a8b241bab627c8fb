"""Checks and helpers for the arrays the runtime is handed: numpy arrays, or torch tensors
recognised without importing torch."""

from __future__ import annotations

import sys

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
