"""Scalars: the integer ranges and numeric bounds of enums and small explicit sets of
values."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .node import _json_type

_MAX_UNIQUE_RANGE = 64      # integers a range an array with uniqueItems draws from may hold


def _integer_span(schema: dict) -> tuple[int, int] | None:
    """(lo, hi + 1) of the integers within a schema's numeric bounds when both sides are
    bounded (by numbers: draft 4's boolean exclusives are not read) and the range is small."""
    lo = hi = None
    for key, low in (("minimum", True), ("exclusiveMinimum", True), ("maximum", False),
                     ("exclusiveMaximum", False)):
        bound = schema.get(key)
        if bound is None:
            continue
        if isinstance(bound, bool) or not isinstance(bound, (int, float, Decimal)):
            return None
        bound = Decimal(str(bound)) if isinstance(bound, float) else Decimal(bound)
        exclusive = key.startswith("exclusive")
        if low:
            first = int(bound.to_integral_value(rounding="ROUND_FLOOR")) + 1 if exclusive \
                else int(bound.to_integral_value(rounding="ROUND_CEILING"))
            lo = first if lo is None else max(lo, first)
        else:
            last = int(bound.to_integral_value(rounding="ROUND_CEILING")) - 1 if exclusive \
                else int(bound.to_integral_value(rounding="ROUND_FLOOR"))
            hi = last if hi is None else min(hi, last)
    if lo is None or hi is None or hi - lo + 1 > _MAX_UNIQUE_RANGE:
        return None
    return lo, max(lo, hi + 1)


def _within_bounds(value: Any, schema: dict) -> bool:
    """Whether a value of an enum or const is within the schema's numeric bounds (any value
    that is not a number is)."""
    if _json_type(value) not in ("integer", "number"):
        return True
    number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    tests = {"minimum": number.__ge__, "exclusiveMinimum": number.__gt__,
             "maximum": number.__le__, "exclusiveMaximum": number.__lt__}
    return all(test(Decimal(str(schema[key])) if isinstance(schema[key], float)
                    else Decimal(schema[key]))
               for key, test in tests.items() if key in schema)
