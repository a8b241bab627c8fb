"""JSON numbers as exact languages: integer and decimal ranges, `multipleOf`.

Texts follow JSON's number grammar. Numbers under any bound or `multipleOf` are written without
an exponent (`1.5`, never `15e-1`), which keeps bounds exact and regular; an unconstrained
`number` accepts every JSON number text. Negative zero is never written. Bounds are `Decimal`s
(the schema is read with `parse_float=Decimal`), so `0.1` means exactly one tenth.

A number is a value, whatever its spelling, but the spellings of one value are no regular
language (`1`, `10e-1`, `100e-2`, ...: the exponent would have to count the digits). So a
difference of two languages, which must remove every spelling of each value it removes, is
taken over *canonical* spellings only (`canonical_spellings`): no exponent, and no fraction of
zeros alone (`1`, never `1.0`; `1.5` and `1.50`). Every number language here holds either all
or none of the canonical spellings of a value, so a difference of two of them restricted to
canonical spellings is exact, and every value keeps a text; the texts of the minuend that
spell a surviving value with a fraction of zeros alone are then given back (`respelled`).
Draft 4 tells `1.0` (a number) from `1` (an integer) by its spelling, so there a fraction of
one zero is canonical too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ...automaton import (
    DEFAULT_MAX_STATES, EMPTY, NOTHING, Automaton, Expr, Ops, alt, charset, concat, literal,
    repeat,
)
from ...automaton.bytedfa import ByteDFA
from ...automaton.dfa import minimize
from ...errors import GrammarError, UnsupportedError

DIGIT = charset([(48, 57)])
NONZERO = charset([(49, 57)])
MINUS = literal("-")
DOT = literal(".")
FRACTION = concat(DOT, repeat(DIGIT, 1, None))            # \.\d+
EXPONENT = concat(charset([(69, 69), (101, 101)]), repeat(charset([(43, 43), (45, 45)]), 0, 1),
                  repeat(DIGIT, 1, None))                 # [eE][+-]?\d+
NATURAL = alt(literal("0"), concat(NONZERO, repeat(DIGIT, 0, None)))  # 0|[1-9]\d*
ANY_NUMBER = concat(repeat(MINUS, 0, 1), NATURAL, repeat(FRACTION, 0, 1), repeat(EXPONENT, 0, 1))
ZERO_FRACTION = repeat(concat(DOT, repeat(literal("0"), 1, None)), 0, 1)  # (\.0+)?

MAX_MODULUS = 100_000
MAX_SPELLED_DIGITS = 100_000  # a canonical spelling longer than this is not written


@dataclass(frozen=True)
class Bounds:
    """The range a number must lie in: each end a value and whether it is excluded (None: no
    bound on that side)."""

    lo: Decimal | None = None
    lo_exclusive: bool = False
    hi: Decimal | None = None
    hi_exclusive: bool = False

    @classmethod
    def of(cls, node: dict) -> Bounds:
        """The bounds a schema's own keywords put on numbers (`minimum`, `maximum`, and
        `exclusiveMinimum`/`exclusiveMaximum` as numbers or, in draft 4, as booleans)."""
        bounds = cls()
        for key, lower in (("minimum", True), ("maximum", False)):
            value = node.get(key)
            if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
                excluded = node.get("exclusiveM" + key[1:]) is True
                bounds = bounds.meet(cls(Decimal(value), excluded) if lower else
                                     cls(hi=Decimal(value), hi_exclusive=excluded))
        for key, lower in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
            value = node.get(key)
            if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
                bounds = bounds.meet(cls(Decimal(value), True) if lower else
                                     cls(hi=Decimal(value), hi_exclusive=True))
        return bounds

    def meet(self, other: Bounds) -> Bounds:
        """The numbers within both ranges (at an end both share, excluded if either
        excludes it)."""
        lo, lo_exclusive, hi, hi_exclusive = self.lo, self.lo_exclusive, self.hi, self.hi_exclusive
        if other.lo is not None and (lo is None or other.lo > lo or
                                     other.lo == lo and other.lo_exclusive):
            lo, lo_exclusive = other.lo, other.lo_exclusive
        if other.hi is not None and (hi is None or other.hi < hi or
                                     other.hi == hi and other.hi_exclusive):
            hi, hi_exclusive = other.hi, other.hi_exclusive
        return Bounds(lo, lo_exclusive, hi, hi_exclusive)

    @property
    def open(self) -> bool:
        """Whether no end is bounded."""
        return self.lo is None and self.hi is None


@lru_cache(maxsize=None)
def any_number() -> Expr:
    """Every JSON number text but negative zero, as a minimal DFA built once per process
    (nearly every schema has one)."""
    negative_zero = concat(literal("-0"), ZERO_FRACTION, repeat(EXPONENT, 0, 1))
    return Ops(DEFAULT_MAX_STATES).difference(ANY_NUMBER, negative_zero)


def canonical_spellings(draft: int) -> ByteDFA:
    """The byte strings whose numbers are spelled canonically (module docstring): a scanner
    of JSON text that tells strings (and their escapes) from numbers, and reads every other
    byte, call codes included, as a byte between values."""
    out, string, escape, integer, dot, zero, zeros, fraction = range(1, 9)
    table = np.zeros((9, 256), np.int32)
    digits, nonzero = list(range(48, 58)), list(range(49, 58))
    for state in (out, integer, fraction) + ((zero,) if draft == 4 else ()):
        table[state, :] = out
        table[state, ord('"')] = string
        table[state, digits] = integer
    table[string, :] = string
    table[string, ord("\\")] = escape
    table[string, ord('"')] = out
    table[escape, :] = string
    table[integer, digits] = integer
    table[integer, ord(".")] = dot
    table[integer, [ord("e"), ord("E")]] = 0  # an exponent
    table[dot, ord("0")] = zero
    table[dot, nonzero] = fraction
    table[zero if draft == 4 else zeros, [ord("e"), ord("E")]] = 0
    table[zero, ord("0")] = zeros
    table[zeros, ord("0")] = zeros
    for state in (zero, zeros):
        table[state, nonzero] = fraction
    table[fraction, digits] = fraction
    table[fraction, [ord("e"), ord("E")]] = 0
    accepting = np.zeros(9, np.bool_)
    accepting[[out, integer, fraction] + ([zero] if draft == 4 else [])] = True
    return minimize(table, np.arange(256, dtype=np.int32), accepting)


_OUT, _STRING, _ESCAPE, _INTEGER, _DOT, _ZEROS, _FRACTION = range(7)  # `respelled`'s modes
_ZERO, _NONZERO, _POINT, _QUOTE, _BACKSLASH, _OTHER = range(6)  # and its kinds of bytes
_NOTHING, _KEPT, _AFTER_KEPT, _AFTER_PENDING = range(4)  # where `respelled`'s states come from


@lru_cache(maxsize=None)
def _respelling_moves(draft: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`respelled`'s moves by (mode, kind of byte): the next mode, and where `dfa`'s states
    without and with the pending zeros come from (`_NOTHING`: state 0, `_KEPT`: the state
    without them, `_AFTER_KEPT` / `_AFTER_PENDING`: the byte read from either)."""
    shape = (7, 6)
    next_mode = np.zeros(shape, np.int64)
    kept_from = np.full(shape, _AFTER_KEPT, np.int64)
    pending_from = np.full(shape, _NOTHING, np.int64)
    for mode in range(7):
        for kind in range(6):
            at = (mode, kind)
            if mode in (_DOT, _ZEROS) and kind == _NONZERO:  # a fraction not all zeros
                next_mode[at], kept_from[at] = _FRACTION, _AFTER_PENDING
                continue
            if mode in (_DOT, _ZEROS) and kind == _ZERO:
                next_mode[at], pending_from[at] = _ZEROS, _AFTER_PENDING
                # `1.0` is canonical in draft 4: its zero is read
                kept_from[at] = _AFTER_PENDING if mode == _DOT and draft == 4 else _KEPT
                continue
            if mode == _DOT:  # a point without digits: no JSON text
                next_mode[at], kept_from[at] = _OUT, _NOTHING
                continue
            after = _OUT if mode == _ZEROS else mode  # the number ended: without its zeros
            if after == _INTEGER and kind == _POINT:
                next_mode[at], kept_from[at], pending_from[at] = _DOT, _KEPT, _AFTER_KEPT
            elif after == _STRING:
                next_mode[at] = _ESCAPE if kind == _BACKSLASH else \
                    _OUT if kind == _QUOTE else _STRING
            elif after == _ESCAPE:
                next_mode[at] = _STRING
            elif kind in (_ZERO, _NONZERO):
                next_mode[at] = _FRACTION if after == _FRACTION else _INTEGER
            else:
                next_mode[at] = _STRING if kind == _QUOTE else _OUT
    return next_mode, kept_from, pending_from


def respelled(dfa: ByteDFA, draft: int) -> ByteDFA | None:
    """The texts whose numbers, spelled canonically (`canonical_spellings`) by dropping a
    fraction of zeros alone (in draft 4, where `1.0` is no `1`, all of its zeros but the
    first), spell a text of `dfa`, a language of canonical spellings: `1` is spelled also as
    `1.0`, `1.00`, ... (in draft 4 `1.0` as `1.00`, ...); None where there are none. A text
    with an exponent spells none. The DFA reads those zeros without knowing whether a nonzero
    digit follows, so its state holds `dfa`'s state without them (where the number ends
    there) and with them (where it goes on)."""
    kind = np.full(256, _OTHER, np.int64)
    kind[ord("0")], kind[49:58] = _ZERO, _NONZERO
    kind[ord(".")], kind[ord('"')], kind[ord("\\")] = _POINT, _QUOTE, _BACKSLASH
    _, first, byte_class = np.unique(dfa.byte_class.astype(np.int64) * 6 + kind,
                                     return_index=True, return_inverse=True)
    kinds, classes = kind[first], dfa.byte_class[first].astype(np.int64)
    trans = dfa.trans.astype(np.int64)
    size = np.int64(len(trans))

    next_mode, kept_from, pending_from = _respelling_moves(draft)

    def step(mode: np.ndarray, kept: np.ndarray, pending: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The states after each byte class (columns) from each state (rows): the mode,
        `dfa`'s state without the pending zeros (or the point before them), `dfa`'s state
        with them; (`_OUT`, 0, 0) where no text goes on."""
        move = (mode[:, None], kinds)
        kept, pending = kept[:, None], pending[:, None]
        after = (np.zeros_like(kept), kept, trans[kept, classes], trans[pending, classes])
        new_kept = np.choose(kept_from[move], after)
        new_pending = np.choose(pending_from[move], after)
        dead = (new_kept == 0) & (new_pending == 0)
        return np.where(dead, _OUT, next_mode[move]), new_kept, new_pending

    def code(mode: np.ndarray, kept: np.ndarray, pending: np.ndarray) -> np.ndarray:
        return (mode * size + kept) * size + pending

    # breadth first, a frontier of states at a time, each numbered when first found (0 the
    # dead state, 1 the start); `known`: the codes found so far, sorted, with their numbers
    keys = [np.array([[_OUT, 0, 0], [_OUT, 1, 0]], np.int64)]
    known, known_id = code(*keys[0].T), np.array([0, 1], np.int64)
    rows, frontier, found_so_far = [np.zeros((1, len(kinds)), np.int64)], keys[0][1:], 2
    while len(frontier):
        codes = code(*step(*frontier.T))
        distinct, inverse = np.unique(codes, return_inverse=True)
        at = np.minimum(np.searchsorted(known, distinct), len(known) - 1)
        new = known[at] != distinct
        ids = known_id[at]
        ids[new] = found_so_far + np.arange(int(new.sum()))
        found_so_far += int(new.sum())
        rows.append(ids[inverse.reshape(codes.shape)])
        fresh = distinct[new]
        frontier = np.stack([fresh // size // size, fresh // size % size, fresh % size],
                            axis=1)
        keys.append(frontier)
        order = np.argsort(np.concatenate([known, fresh]), kind="stable")
        known = np.concatenate([known, fresh])[order]
        known_id = np.concatenate([known_id, ids[new]])[order]
    table = np.concatenate(rows)
    mode, kept, _ = np.concatenate(keys).T
    accepting = (mode != _DOT) & dfa.accepting[kept]
    if not accepting.any():
        return None
    return minimize(table.astype(np.int32), byte_class.reshape(-1).astype(np.int32),
                    accepting)


def canonical_text(value: int | float | Decimal, draft: int) -> str:
    """The canonical spelling of a number (`canonical_spellings`) read as an `int` (an
    integer's spelling), a `float` or a `Decimal` (a number's): no exponent, no negative zero,
    an integral value without fraction (a number's with `.0` in draft 4), no trailing zero."""
    if isinstance(value, int):
        return str(value)
    number = Decimal(repr(value)) if isinstance(value, float) else value
    if not number.is_finite():
        raise ValueError(f"not a JSON number: {value!r}")
    if number and abs(number.adjusted()) > MAX_SPELLED_DIGITS:
        raise ValueError(f"{value} has more than {MAX_SPELLED_DIGITS:,} digits without an "
                         "exponent")
    text = format(number.copy_abs(), "f")  # (abs() rounds to 28 digits)
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    sign = "-" if number < 0 else ""
    if fraction:
        return f"{sign}{whole}.{fraction}"
    return f"{sign if number else ''}{whole}{'.0' if draft == 4 else ''}"


def digit_class(lo: int, hi: int) -> Expr:
    return charset([(48 + lo, 48 + hi)]) if lo <= hi else NOTHING


def fixed_width(lo: str, hi: str) -> Expr:
    """Digit strings of len(lo) == len(hi) characters between lo and hi (inclusive): O(width)
    nodes, since a bound of all 0s or all 9s is a plain run of digits."""
    if not lo:
        return EMPTY
    if lo == "0" * len(lo) and hi == "9" * len(hi):
        return repeat(DIGIT, len(lo), len(lo))
    a, b = int(lo[0]), int(hi[0])
    if a == b:
        return concat(digit_class(a, a), fixed_width(lo[1:], hi[1:]))
    width = len(lo) - 1
    options = [concat(digit_class(a, a), fixed_width(lo[1:], "9" * width))]
    if b - a > 1:
        options.append(concat(digit_class(a + 1, b - 1), repeat(DIGIT, width, width)))
    options.append(concat(digit_class(b, b), fixed_width("0" * width, hi[1:])))
    return alt(*options)


def naturals(lo: int, hi: int | None) -> Expr:
    """Decimal numerals (no leading zeros) of the integers lo..hi; hi None = unbounded."""
    if hi is not None and hi < lo:
        return NOTHING
    lo = max(lo, 0)
    options = []
    if lo == 0:
        options.append(literal("0"))
        lo = 1
        if hi is not None and hi < 1:
            return alt(*options)
    lo_s = str(lo)
    hi_s = None if hi is None else str(hi)
    top = len(hi_s) if hi_s else len(lo_s)
    for width in range(len(lo_s), top + 1):
        start = lo_s if width == len(lo_s) else "1" + "0" * (width - 1)
        end = hi_s if (hi_s and width == len(hi_s)) else "9" * width
        options.append(fixed_width(start, end))
    if hi is None:
        options.append(concat(NONZERO, repeat(DIGIT, top, None)))
    return alt(*options)


def integers(lo: Decimal | None, hi: Decimal | None, lo_exclusive: bool = False,
             hi_exclusive: bool = False, zero_fraction: bool = True) -> Expr:
    """Integer texts within the bounds, followed by `.0`, `.00`, ... if `zero_fraction`."""
    low = None if lo is None else _ceil(lo, lo_exclusive)
    high = None if hi is None else _floor(hi, hi_exclusive)
    options = []
    if high is None or high >= 0:
        options.append(naturals(max(low or 0, 0) if low is not None else 0, high))
    if low is None or low < 0:
        # negatives: -y with y in [max(1, -high), -low]
        y_lo = 1 if high is None or high >= 0 else -high
        y_hi = None if low is None else -low
        options.append(concat(MINUS, naturals(max(y_lo, 1), y_hi)))
    return concat(alt(*options), ZERO_FRACTION) if zero_fraction else alt(*options)


def _ceil(value: Decimal, exclusive: bool) -> int:
    n = int(value.to_integral_value(rounding="ROUND_CEILING"))
    return n + 1 if exclusive and n == value else n


def _floor(value: Decimal, exclusive: bool) -> int:
    n = int(value.to_integral_value(rounding="ROUND_FLOOR"))
    return n - 1 if exclusive and n == value else n


def decimals(ops: Ops, lo: Decimal | None, hi: Decimal | None, lo_exclusive: bool = False,
             hi_exclusive: bool = False) -> Expr:
    """Decimal texts (no exponent, no negative zero) of the numbers within the bounds."""
    options = []
    if hi is None or hi > 0 or (hi == 0 and not hi_exclusive):
        low = None if lo is None or lo < 0 else lo
        options.append(_nonnegative(ops, low, hi, lo_exclusive if low is not None else False,
                                    hi_exclusive))
    if lo is None or lo < 0:
        # negatives: -y, y > 0, y in [-hi, -lo]
        y_lo = Decimal(0) if hi is None or hi >= 0 else hi.copy_negate()  # (exact, unlike -)
        y_lo_excl = True if hi is None or hi >= 0 else hi_exclusive
        y_hi = None if lo is None else lo.copy_negate()
        options.append(concat(MINUS, _nonnegative(ops, y_lo, y_hi, y_lo_excl, lo_exclusive)))
    return alt(*options)


def _nonnegative(ops: Ops, lo: Decimal | None, hi: Decimal | None, lo_excl: bool,
                 hi_excl: bool) -> Expr:
    """Texts `I(.F)?` of numbers x >= 0 with lo <(=) x <(=) hi."""
    lo = lo or Decimal(0)
    if hi is not None and (hi < lo or (hi == lo and (lo_excl or hi_excl))):
        return NOTHING
    lo_int, lo_frac = _split(lo)
    if hi is not None:
        hi_int, hi_frac = _split(hi)
        if lo_int == hi_int:
            return concat(naturals(lo_int, lo_int),
                          ops.intersect(_fraction_at_least(lo_frac, lo_excl),
                                        _fraction_at_most(hi_frac, hi_excl)))
    options = [concat(naturals(lo_int, lo_int), _fraction_at_least(lo_frac, lo_excl))]
    if hi is None:
        options.append(concat(naturals(lo_int + 1, None), repeat(FRACTION, 0, 1)))
    else:
        options.append(concat(naturals(lo_int + 1, hi_int - 1), repeat(FRACTION, 0, 1)))
        options.append(concat(naturals(hi_int, hi_int), _fraction_at_most(hi_frac, hi_excl)))
    return alt(*options)


def _split(value: Decimal) -> tuple[int, str]:
    """Integer part and fraction digits (trailing zeros removed) of value >= 0."""
    whole, _, fraction = format(value, "f").partition(".")  # exact (subtraction rounds)
    return int(whole), fraction.rstrip("0")


def _fraction_at_least(digits: str, exclusive: bool) -> Expr:
    """The optional `.F` part with 0.F >= 0.digits (> when exclusive)."""
    if not digits:
        nonzero = concat(DOT, repeat(DIGIT, 0, None), NONZERO, repeat(DIGIT, 0, None))
        return nonzero if exclusive else repeat(FRACTION, 0, 1)
    return concat(DOT, _digits_at_least(digits, exclusive))


def _digits_at_least(digits: str, exclusive: bool) -> Expr:
    """Digit strings F (non-empty) with 0.F >= 0.digits; digits has no trailing zero."""
    d = int(digits[0])
    bigger = concat(digit_class(d + 1, 9), repeat(DIGIT, 0, None))
    rest = digits[1:]
    if rest:
        same = concat(digit_class(d, d), _digits_at_least(rest, exclusive))
    elif exclusive:
        same = concat(digit_class(d, d), repeat(DIGIT, 0, None), NONZERO, repeat(DIGIT, 0, None))
    else:
        same = concat(digit_class(d, d), repeat(DIGIT, 0, None))
    return alt(bigger, same)


def _fraction_at_most(digits: str, exclusive: bool) -> Expr:
    """The optional `.F` part with 0.F <= 0.digits (< when exclusive)."""
    if not digits:
        # 0.F <= 0 only for F = 0*; < 0 never
        return NOTHING if exclusive else ZERO_FRACTION
    return repeat(concat(DOT, _digits_at_most(digits, exclusive)), 0, 1)


def _digits_at_most(digits: str, exclusive: bool) -> Expr:
    """Digit strings F (non-empty) with 0.F <= 0.digits; digits has no trailing zero."""
    d = int(digits[0])
    smaller = concat(digit_class(0, d - 1), repeat(DIGIT, 0, None))
    rest = digits[1:]
    if rest:
        same = concat(digit_class(d, d), repeat(_digits_at_most(rest, exclusive), 0, 1))
    else:
        same = NOTHING if exclusive else concat(digit_class(d, d), repeat(literal("0"), 0, None))
    return alt(smaller, same)


def multiple_of(step: Decimal, integer: bool) -> Expr:
    """Texts `-?(0|[1-9]\\d*)(\\.\\d+)?` of multiples of `step` (intersect with a number
    language to exclude negative zero).

    With step = p / 10^k, x is a multiple when x * 10^k is an integer divisible by p: a
    remainder automaton over the digits, with only zeros allowed after the k-th fraction digit.
    For integers it is enough that x * 10^k is divisible by p, i.e. x by p / gcd(p, 10^k).
    """
    if step <= 0:
        raise GrammarError(f"multipleOf must be greater than 0, not {step}")
    fraction = Fraction(step)
    scale = 0
    while (fraction * 10 ** scale).denominator != 1:
        scale += 1
        if scale > 30:
            raise GrammarError(f"multipleOf {step} is not a finite decimal")
    modulus = int(fraction * 10 ** scale)
    if integer:
        modulus //= math.gcd(modulus, 10 ** scale)
        scale = 0
    if modulus > MAX_MODULUS:
        raise UnsupportedError(f"multipleOf {step} needs a remainder automaton of {modulus:,} "
                           f"states (grammarc supports up to {MAX_MODULUS:,})")
    return Automaton(_remainder_dfa(modulus, scale))


def _remainder_dfa(m: int, scale: int):
    """Minimal DFA of number texts whose value * 10^scale is an integer divisible by m."""
    # state blocks: 0 dead, 1 start, 2 after "-", 3 the integer "0", then residues r of
    # int[r] (integer digits), dot[r] (after "."), frac[j][r] (j = 1..scale fraction digits),
    # tail[r] (after `scale` fraction digits: only zeros may follow)
    ZERO, INT = 3, 4
    DOT = INT + m
    FRAC = DOT + m
    TAIL = FRAC + scale * m
    n = TAIL + m
    table = np.zeros((n, 256), np.int32)
    accepting = np.zeros(n, np.bool_)
    digit = [ord(str(d)) for d in range(10)]
    table[1, ord("-")] = 2
    for start in (1, 2):
        table[start, digit[0]] = ZERO
        for d in range(1, 10):
            table[start, digit[d]] = INT + d % m
    table[ZERO, ord(".")] = DOT
    accepting[ZERO] = True
    for r in range(m):
        for d in range(10):
            table[INT + r, digit[d]] = INT + (10 * r + d) % m
        table[INT + r, ord(".")] = DOT + r
        accepting[INT + r] = (r * 10 ** scale) % m == 0
        if scale:
            for d in range(10):
                table[DOT + r, digit[d]] = FRAC + (10 * r + d) % m
        else:
            table[DOT + r, digit[0]] = TAIL + r
        for j in range(1, scale + 1):
            state = FRAC + (j - 1) * m + r
            accepting[state] = (r * 10 ** (scale - j)) % m == 0
            if j < scale:
                for d in range(10):
                    table[state, digit[d]] = FRAC + j * m + (10 * r + d) % m
            else:
                table[state, digit[0]] = TAIL + r
        table[TAIL + r, digit[0]] = TAIL + r
        accepting[TAIL + r] = r == 0
    return minimize(table, np.arange(256, dtype=np.int32), accepting)
