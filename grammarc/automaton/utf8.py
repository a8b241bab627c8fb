"""Code point ranges to UTF-8 byte-range sequences.

A set of characters becomes a small set of byte-range sequences such as
`[E3][81-82][80-BF]`: a byte string is the UTF-8 encoding of a character in the set exactly
when it matches one of the sequences. Sets that span encoded-length boundaries (one-byte to
two-byte, and so on) are split first, then each part is split until every byte position is a
plain range (the construction used by RE2 and Rust's regex-syntax).
"""

from __future__ import annotations

from functools import lru_cache

ByteRangeSeq = tuple[tuple[int, int], ...]

_LENGTH_BOUNDS = ((0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def _split_same_length(lo: int, hi: int, out: list[ByteRangeSeq]) -> None:
    n = len(_encode(lo))
    for i in range(1, n):
        mask = (1 << (6 * i)) - 1
        if lo & ~mask != hi & ~mask:
            if lo & mask:
                _split_same_length(lo, lo | mask, out)
                _split_same_length((lo | mask) + 1, hi, out)
                return
            if hi & mask != mask:
                _split_same_length(lo, (hi & ~mask) - 1, out)
                _split_same_length(hi & ~mask, hi, out)
                return
    out.append(tuple(zip(_encode(lo), _encode(hi))))


@lru_cache(maxsize=4096)
def utf8_sequences(ranges: tuple[tuple[int, int], ...]) -> tuple[ByteRangeSeq, ...]:
    """The byte-range sequences matching exactly the UTF-8 encodings of `ranges`.

    `ranges` must be normalised (sorted, disjoint, surrogate-free), as `CharSet.ranges` are.
    """
    out: list[ByteRangeSeq] = []
    for lo, hi in ranges:
        for b_lo, b_hi in _LENGTH_BOUNDS:
            a, b = max(lo, b_lo), min(hi, b_hi)
            if a <= b:
                _split_same_length(a, b, out)
    return tuple(out)
