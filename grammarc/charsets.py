"""Sets of characters as code point ranges, and the characters a byte automaton reads.

Ranges are inclusive `(first, last)` pairs of code points. Surrogates (U+D800..U+DFFF) cannot
appear in UTF-8 text and are left out of normalised sets. Byte automata follow grammarc's
state convention (0 dead, 1 start); `CharFolder` folds their paths over the UTF-8 bytes of a
character back into edges labelled with runs of characters, and `walk_bytes` runs them over
bytes. Pure Python: the runtime (numpy only) and the compiler both use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Ranges = tuple[tuple[int, int], ...]
CharEdges = list[tuple[int, int, int]]  # (first code point or byte, last, target state)
ByteEdges = Callable[[int], Iterable[tuple[int, int, int]]]  # a state's live byte edges
ByteStep = Callable[[int, int], int]  # (state, byte) -> next state, 0 when it dies

_CONTINUATION = 0x80
# (first lead byte, last lead byte, continuation bytes, mask of the lead byte's value bits)
_LEAD_BYTES = ((0xC2, 0xDF, 1, 0x1F), (0xE0, 0xEF, 2, 0x0F), (0xF0, 0xF4, 3, 0x07))
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}


# ------------------------------------------------------------------------------ ranges
def merge_edges(edges: Iterable[tuple[int, int, int]]) -> CharEdges:
    """Sort labelled ranges `(lo, hi, target)` and join the overlapping and adjacent ones of
    the same target."""
    out: CharEdges = []
    for lo, hi, target in sorted(edges):
        if out and out[-1][2] == target and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi), target)
        else:
            out.append((lo, hi, target))
    return out


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted inclusive ranges with empty ones dropped and overlapping and adjacent ones
    joined."""
    return [(lo, hi) for lo, hi, _ in merge_edges((lo, hi, 0) for lo, hi in ranges if lo <= hi)]


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sort and merge code point ranges, dropping surrogates and empty ranges."""
    out: list[tuple[int, int]] = []
    s_lo, s_hi = SURROGATES
    for lo, hi in merge_ranges(ranges):
        lo, hi = max(lo, 0), min(hi, MAX_CODE_POINT)
        if hi < s_lo or lo > s_hi:
            out.append((lo, hi))
            continue
        if lo < s_lo:
            out.append((lo, s_lo - 1))
        if hi > s_hi:
            out.append((s_hi + 1, hi))
    return tuple(out)


def complement_ranges(ranges: Sequence[tuple[int, int]]) -> Ranges:
    """Every code point (surrogates excluded) not in the sorted, disjoint `ranges`."""
    out = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return normalize_ranges(out)


def intersect_ranges(a: Iterable[tuple[int, int]], b: Sequence[tuple[int, int]]) -> Ranges:
    """The code points (surrogates excluded) in both `a` and `b`, normalised."""
    return normalize_ranges((max(lo1, lo2), min(hi1, hi2)) for lo1, hi1 in a for lo2, hi2 in b)


# ---------------------------------------------------------------------- describing
def describe(ranges: Iterable[tuple[int, int]]) -> str:
    """A readable label for a set of characters: `'a'`, `[a-z_]`, `[^"\\n]` or `any` (a
    complement where the set holds more than half of all characters)."""
    spans = merge_ranges(ranges)
    size = sum(hi - lo + 1 for lo, hi in spans)
    if len(spans) == 1 and size == 1:
        return "'" + _char(spans[0][0], in_class=False) + "'"
    if size * 2 > MAX_CODE_POINT + 1 - (SURROGATES[1] + 1 - SURROGATES[0]):
        complement = complement_ranges(spans)
        if not complement:
            return "any"
        return "[^" + "".join(_class_item(lo, hi) for lo, hi in complement) + "]"
    return "[" + "".join(_class_item(lo, hi) for lo, hi in spans) + "]"


def _class_item(lo: int, hi: int) -> str:
    if lo == hi:
        return _char(lo, in_class=True)
    joiner = "" if hi == lo + 1 else "-"
    return _char(lo, in_class=True) + joiner + _char(hi, in_class=True)


def _char(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if in_class and ch in "]^-":
        return "\\" + ch
    if ch.isprintable():
        return ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


# ----------------------------------------------------------------- byte automata
def walk_bytes(step: ByteStep, data: Iterable[int], state: int = 1) -> int:
    """The state `step` reaches from `state` over the bytes of `data` (0 once it dies)."""
    for b in data:
        state = step(state, b)
        if state == 0:
            break
    return state


def csr_byte_edges(byte_ptr: Sequence[int], byte_ranges: Sequence[Sequence[int]],
                   byte_next: Sequence[int]) -> ByteEdges:
    """The byte edges of a DFA in the artifact's CSR form (numpy arrays or lists): state s's
    edges are `byte_ranges[byte_ptr[s]:byte_ptr[s+1]]` (inclusive `lo, hi`) to `byte_next[...]`."""
    def edges(state: int) -> list[tuple[int, int, int]]:
        lo, hi = int(byte_ptr[state]), int(byte_ptr[state + 1])
        return [(int(first), int(last), int(target))
                for (first, last), target in zip(byte_ranges[lo:hi], byte_next[lo:hi])]

    return edges


class CharFolder:
    """Character edges of the states of a byte automaton that lie between characters.

    `byte_edges(state)` gives a state's live edges `(first byte, last byte, target)`; the
    automaton reads valid UTF-8 only (as every grammarc byte DFA does)."""

    def __init__(self, byte_edges: ByteEdges) -> None:
        self.byte_edges = byte_edges
        self._suffix_memo: dict[tuple[int, int], CharEdges] = {}

    def char_edges(self, state: int) -> CharEdges:
        """The edges `(first code point, last code point, target)` of `state`, sorted and
        merged."""
        out: CharEdges = []
        for lo, hi, target in self.byte_edges(state):
            if lo < 0x80:
                out.append((lo, min(hi, 0x7F), target))
            for first, last, length, mask in _LEAD_BYTES:
                for lead in range(max(lo, first), min(hi, last) + 1):
                    base = (lead & mask) << (6 * length)
                    out.extend((base + a, base + b, t) for a, b, t in self.suffixes(target, length))
        return merge_edges(out)

    def suffixes(self, state: int, length: int) -> CharEdges:
        """The values of the `length` continuation bytes read from `state`, with the state
        after them (values are the low 6 bits of each byte, most significant first)."""
        key = (state, length)
        if key not in self._suffix_memo:
            width = 64 ** (length - 1)
            out: CharEdges = []
            for lo, hi, target in self.byte_edges(state):
                lo, hi = lo - _CONTINUATION, hi - _CONTINUATION
                if length == 1:
                    out.append((lo, hi, target))
                    continue
                rest = self.suffixes(target, length - 1)
                if len(rest) == 1 and rest[0][:2] == (0, width - 1):  # every continuation
                    out.append((lo * width, (hi + 1) * width - 1, rest[0][2]))
                else:
                    out.extend((b * width + a, b * width + z, t)
                               for b in range(lo, hi + 1) for a, z, t in rest)
            self._suffix_memo[key] = merge_edges(out)
        return self._suffix_memo[key]

    def characters(self, state: int) -> list[tuple[int, int]]:
        """The code points that may come next in `state`, as merged ranges."""
        return merge_ranges((lo, hi) for lo, hi, _ in self.char_edges(state))
