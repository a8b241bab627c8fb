"""Expression trees to minimal byte-level DFAs (see `expr`, `nfa`, `dfa`, `bytedfa`,
`products`).

`dfa` and `products` use the compiled core (`grammarc._core`), so they are imported on first use:
the command line and the front ends' option types import without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bytedfa import ByteDFA
from .expr import (
    EMPTY, NOTHING, Alt, Automaton, CharSet, Concat, Expr, Graph, Repeat, alt, charset, concat,
    literal, repeat,
)

if TYPE_CHECKING:
    from .dfa import build_dfa, determinize
    from .products import Ops

DEFAULT_MAX_STATES = 100_000

_LAZY = {"build_dfa": "dfa", "determinize": "dfa", "Ops": "products"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EMPTY", "NOTHING", "Alt", "Automaton", "ByteDFA", "CharSet", "Concat", "DEFAULT_MAX_STATES",
    "Expr", "Graph", "Ops", "Repeat", "alt", "build_dfa", "charset", "concat", "determinize",
    "literal", "repeat",
]
