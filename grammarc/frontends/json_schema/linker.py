"""The linker role: the machines of a document, named, called and built once."""

from __future__ import annotations

import numpy as np

from ...automaton import NOTHING, Expr

def _same_language(a: Expr, b: Expr) -> bool:
    """Whether two minimal automata (or NOTHING) are the same language (canonical DFAs)."""
    if a == NOTHING or b == NOTHING:
        return a == b
    x, y = a.dfa, b.dfa
    return x.trans.shape == y.trans.shape and np.array_equal(x.byte_class, y.byte_class) and \
        np.array_equal(x.trans, y.trans) and np.array_equal(x.accepting, y.accepting)
