"""Expression trees to minimal byte-level DFAs (see `expr`, `nfa`, `dfa`)."""

from __future__ import annotations

from .dfa import DEFAULT_MAX_STATES, ByteDFA, build_dfa, determinize
from .expr import (
    EMPTY, NOTHING, Alt, Automaton, CharSet, Concat, Expr, Repeat, alt, charset, concat, literal,
    repeat,
)
from .ops import Ops


__all__ = [
    "EMPTY", "NOTHING", "Alt", "Automaton", "ByteDFA", "CharSet", "Concat", "DEFAULT_MAX_STATES",
    "Expr", "Ops", "Repeat", "alt", "build_dfa", "charset", "concat", "determinize", "literal",
    "repeat",
]
