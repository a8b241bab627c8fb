"""Whitespace layout: where a JSON text's whitespace goes (around `:` and `,`, inside
brackets), by `--whitespace` style or a custom regex of JSON whitespace, and comma-separated
sequences of entries within counts."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from ...automaton import EMPTY, NOTHING, Expr, alt, charset, concat, literal, repeat
from ...automaton.dfa import build_dfa
from ...errors import GrammarError
from ..regex import parse_regex

WHITESPACE_STYLES = ("default", "compact", "flexible")
_JSON_WHITESPACE = frozenset(b"\t\n\r ")


@dataclass(frozen=True)
class Layout:
    """Where whitespace goes: around `:` and `,`, and inside brackets."""

    open_object: Expr
    close_object: Expr
    open_array: Expr
    close_array: Expr
    colon: Expr
    comma: Expr

    @classmethod
    def from_style(cls, style: str) -> "Layout":
        if style == "default":  # json.dumps: ", " and ": "
            return cls(literal("{"), literal("}"), literal("["), literal("]"), literal(": "),
                       literal(", "))
        if style == "compact":
            return cls(literal("{"), literal("}"), literal("["), literal("]"), literal(":"),
                       literal(","))
        if style == "flexible":
            # what JSON allows, bounded: spaces or tabs, or one line break and an indent
            indent = repeat(charset([(9, 9), (32, 32)]), 0, 20)
            ws = alt(indent, concat(repeat(literal("\r"), 0, 1), literal("\n"), indent))
        else:
            ws = _whitespace_regex(style)
        return cls(concat(literal("{"), ws), concat(ws, literal("}")), concat(literal("["), ws),
                   concat(ws, literal("]")), concat(ws, literal(":"), ws),
                   concat(ws, literal(","), ws))

    def sequence(self, entry: Expr, count: int, min_count: int, max_count: int | None) -> Expr:
        """Comma-separated entries after `count` members (object entries or array items), so
        that the total is within the bounds."""
        lo = max(0, min_count - count)
        hi = None if max_count is None else max_count - count
        if hi is not None and hi < lo:
            return NOTHING
        if entry == NOTHING or hi == 0:
            return EMPTY if lo == 0 else NOTHING
        comma = self.comma
        if count:
            return repeat(concat(comma, entry), lo, hi)
        rest = repeat(concat(comma, entry), max(lo - 1, 0), None if hi is None else hi - 1)
        nonempty = concat(entry, rest)
        return alt(EMPTY, nonempty) if lo == 0 else nonempty


def _whitespace_regex(style: str) -> Expr:
    """The language of a custom `--whitespace` regex, which must match JSON whitespace only
    (space, tab, line feed, carriage return): anything else would make the output invalid
    JSON, and a misspelt style (`compcat`) is refused instead of being matched literally."""
    try:
        ws = parse_regex(style, after=None)
    except GrammarError as exc:
        raise GrammarError(f"--whitespace {style!r}: {exc}") from None
    used = (build_dfa(ws).byte_table()[1:] != 0).any(axis=0)
    foreign = [b for b in np.flatnonzero(used) if b not in _JSON_WHITESPACE]
    if foreign:
        shown = repr(chr(foreign[0])) if foreign[0] < 0x80 else "a non-ASCII character"
        close = difflib.get_close_matches(style, WHITESPACE_STYLES, n=1, cutoff=0.6)
        raise GrammarError(
            f"--whitespace {style!r}: not a style ({', '.join(WHITESPACE_STYLES)})" +
            (f" (did you mean {close[0]!r}?)" if close else "") + ", and a regex of whitespace "
            f"must match JSON whitespace only (space, tab, \\n, \\r); this one matches {shown}")
    return ws
