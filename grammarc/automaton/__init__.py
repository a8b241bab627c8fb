"""Expression trees to minimal byte-level DFAs (see `expr`, `nfa`, `dfa`).

`dfa` needs numba, so it is imported on first use: the command line and the front ends'
option types can be imported without loading numba.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .expr import EMPTY, NOTHING, Alt, CharSet, Concat, Expr, Repeat, alt, charset, concat, literal, repeat
from .nfa import NFABuilder

if TYPE_CHECKING:
    from .dfa import ByteDFA, determinize

DEFAULT_MAX_STATES = 100_000


def build_dfa(expr: Expr, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """The minimal byte DFA of `expr`: UTF-8 text, dead = 0, start = 1.

    `max_states` bounds the DFA (and, scaled, the NFA it is built from) so that a grammar that
    blows up fails with `TooManyStatesError` instead of exhausting memory.
    """
    from .dfa import determinize

    fragment = NFABuilder(max_states=max(20 * max_states, 1_000_000)).build(expr)
    return determinize(fragment, max_states=max_states)


def __getattr__(name: str) -> Any:
    if name in ("ByteDFA", "determinize"):
        from . import dfa

        return getattr(dfa, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EMPTY", "NOTHING", "Alt", "ByteDFA", "CharSet", "Concat", "DEFAULT_MAX_STATES", "Expr",
    "Repeat", "alt", "build_dfa", "charset", "concat", "determinize", "literal", "repeat",
]
