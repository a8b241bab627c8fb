"""JSON texts as the front ends read them: numbers of at most MAX_DIGITS digits, and where a
literal stands in the text (for error positions)."""

from __future__ import annotations

import re
from decimal import Decimal

from . import MAX_DIGITS


class TooLongNumber(ValueError):
    """A JSON number of more than MAX_DIGITS digits written out (`1e5000` included): Python
    converts no integer that long to text or back, and no schema needs one."""

    def __str__(self) -> str:
        token = self.args[0]
        shown = token if len(token) <= 24 else f"{token[:20]}..."
        return f"the number {shown} has more than {MAX_DIGITS:,} digits written out " \
               "(grammarc's limit)"


def json_integer(token: str) -> int:
    """`parse_int` for `json.loads`."""
    if len(token.lstrip("-")) > MAX_DIGITS:
        raise TooLongNumber(token)
    return int(token)


def json_decimal(token: str) -> Decimal:
    """`parse_float` for `json.loads`: the exact value."""
    value = Decimal(token)
    _sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # a JSON number is finite
    if max(len(digits) + exponent, 1) + max(-exponent, 0) > MAX_DIGITS:
        raise TooLongNumber(token)
    return value


def bare_word_offset(text: str, word: str) -> int | None:
    """The offset of the first `word` (a literal or a number) outside JSON strings."""
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|-?[0-9][0-9.eE+-]*)', text):
        if match.group(1) == word:
            return match.start()
    return None
