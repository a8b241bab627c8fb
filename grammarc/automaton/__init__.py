"""Expression trees to minimal byte-level DFAs (see `expr`, `nfa`, `dfa`)."""

from __future__ import annotations

from .dfa import ByteDFA, determinize
from .expr import (
    EMPTY, NOTHING, Alt, CharSet, Concat, Expr, Graph, Repeat, alt, charset, concat, literal,
    repeat,
)
from .nfa import NFABuilder

DEFAULT_MAX_STATES = 100_000


def build_dfa(expr: Expr, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """The minimal byte DFA of `expr`: UTF-8 text, dead = 0, start = 1.

    `max_states` bounds the DFA (and, scaled, the NFA it is built from) so that a grammar that
    blows up fails with `TooManyStatesError` instead of exhausting memory.
    """
    builder = NFABuilder(max_states=max(20 * max_states, 1_000_000))
    fragment = builder.build(expr)
    return determinize(fragment, max_states=max_states, label_names=tuple(builder.label_names))


__all__ = [
    "EMPTY", "NOTHING", "Alt", "ByteDFA", "CharSet", "Concat", "DEFAULT_MAX_STATES", "Expr",
    "Graph", "Repeat", "alt", "build_dfa", "charset", "concat", "determinize", "literal", "repeat",
]
