"""Small numba helpers shared by the compile-side kernels (`dfa`, `ops`, `align`)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def grown(array, used, size, fill=0):
    """A new array of `size` entries (rows, for a 2-D array) starting with `array[:used]`,
    the rest set to `fill`: how the kernels make room as they go."""
    out = np.full((size,) + array.shape[1:], fill, array.dtype)
    out[:used] = array[:used]
    return out


@numba.njit(cache=True)
def grouped(owner, first, n_groups):
    """Indices `first..len(owner)-1` grouped by `owner[i]` (CSR): group g holds
    `members[ptr[g]:ptr[g+1]]`, in increasing order."""
    ptr = np.zeros(n_groups + 1, np.int64)
    for i in range(first, len(owner)):
        ptr[owner[i] + 1] += 1
    for g in range(n_groups):
        ptr[g + 1] += ptr[g]
    fill = ptr[:-1].copy()
    members = np.zeros(max(len(owner) - first, 1), np.int32)
    for i in range(first, len(owner)):
        members[fill[owner[i]]] = i
        fill[owner[i]] += 1
    return ptr, members
