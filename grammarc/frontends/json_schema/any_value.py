"""Any JSON value: texts nested at most so many levels, the bound within which truncated
languages are exact."""

from __future__ import annotations

from ...automaton import NOTHING, Expr, alt, charset, concat, literal, repeat
from ...charsets import MAX_CODE_POINT, complement_ranges

def nested_at_most(levels: int) -> Expr:
    """JSON texts whose arrays and objects nest at most `levels` deep (brackets inside strings
    do not count; no text for a negative `levels`): the bound within which truncated
    languages are exact."""
    if levels < 0:
        return NOTHING
    quote, backslash, brackets = ord('"'), ord("\\"), [ord(c) for c in "[]{}"]
    string = concat(literal('"'), repeat(alt(
        charset(complement_ranges([(quote, quote), (backslash, backslash)])),
        concat(literal("\\"), charset([(0, MAX_CODE_POINT)]))), 0, None), literal('"'))
    other = charset(complement_ranges(sorted((b, b) for b in [quote, *brackets])))
    flat = alt(other, string)
    nested = repeat(flat, 0, None)
    for _ in range(levels):
        nested = repeat(alt(flat, concat(charset([(ord("["), ord("[")), (ord("{"), ord("{"))]),
                                         nested,
                                         charset([(ord("]"), ord("]")), (ord("}"), ord("}"))]))),
                        0, None)
    return nested
