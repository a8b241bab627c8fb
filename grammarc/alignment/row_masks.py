"""The token masks of a table's rows, computed once at compile time in C++ so that a grammar
compiled in this process meets no row's first mask (`Grammar.keep_row_masks`); a loaded
artifact computes them on first use or in `Grammar.warm`, numpy only."""

from __future__ import annotations

import numpy as np

from .. import _core
from ..format.table import TokenTable


def row_masks(table: TokenTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mask_row, rows, packed): per row the first row allowing the same classes, those
    first rows ascending, and their masks packed eight tokens a byte in a bitmask's order
    ([len(rows), ceil(V / 8)] uint8)."""
    order, class_ptr = table.tokens_by_class
    return _core.row_class_masks(order, class_ptr, table.row_ptr, table.row_class)
