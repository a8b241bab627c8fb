"""Graphviz DOT of a grammar's character-level automaton, from its byte DFA.

The byte DFA (as stored in artifacts: `byte_ptr`, `byte_ranges`, `byte_next`) reads UTF-8
bytes; here its paths through multi-byte characters are folded back into edges labelled with
ranges of characters, so only the states between characters are drawn. Accepting states are
double circles; the states of a state-machine spec are grouped in a box per named state.
Needs numpy only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = 0xE000 - 0xD800
_CONTINUATION = 0x80
_LEAD_BYTES = ((0xC2, 0xDF, 1, 0x1F), (0xE0, 0xEF, 2, 0x0F), (0xF0, 0xF4, 3, 0x07))
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}

CharEdges = list[tuple[int, int, int]]  # (first code point, last code point, target state)


def dot_source(byte_ptr: np.ndarray, byte_ranges: np.ndarray, byte_next: np.ndarray,
               accepting: np.ndarray, state_labels: np.ndarray | None = None,
               state_names: Sequence[str] = (),
               calls: Sequence[tuple[int, int, str, int]] = ()) -> str:
    """The DOT text of the character automaton of a byte DFA in the artifact's CSR form.
    `calls` are call edges `(state, callee start, callee name, return state)` of machines
    linked by calls: drawn dashed, the callee's states drawn too."""
    automaton = char_automaton(byte_ptr, byte_ranges, byte_next,
                               [r for _, start, _, ret in calls for r in (start, ret)])
    order = sorted(automaton)
    lines = ["digraph grammar {", "  rankdir=LR;", "  node [shape=circle];",
             "  start [shape=point];", "  start -> s1;"]
    for state in order:
        shape = ", shape=doublecircle" if accepting[state] else ""
        lines.append(f"  s{state} [label=\"{state}\"{shape}];")
    if state_labels is not None:
        groups: dict[int, list[int]] = defaultdict(list)
        for state in order:
            groups[int(state_labels[state])].append(state)
        for label, members in sorted(groups.items()):
            if label >= 0:
                name = _quote(state_names[label])
                members_text = " ".join(f"s{s};" for s in members)
                lines.append(f"  subgraph cluster_{label} {{ label=\"{name}\"; {members_text} }}")
    for state in order:
        by_target: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for lo, hi, target in automaton[state]:
            by_target[target].append((lo, hi))
        for target, ranges in sorted(by_target.items()):
            lines.append(f"  s{state} -> s{target} [label=\"{_quote(describe(ranges))}\"];")
    for state, start, name, ret in calls:
        lines.append(f"  s{state} -> s{ret} [style=dashed, label=\"call {_quote(name)}\"];")
        lines.append(f"  s{state} -> s{start} [style=dotted, arrowhead=empty];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def char_automaton(byte_ptr: np.ndarray, byte_ranges: np.ndarray, byte_next: np.ndarray,
                   roots: Sequence[int] = ()) -> dict[int, CharEdges]:
    """The states between characters reachable from the start (1) and `roots`, each with its
    edges `(first code point, last code point, target)`, sorted and merged."""
    folder = _CharFolder(byte_ptr, byte_ranges, byte_next)
    edges: dict[int, CharEdges] = {}
    order = list(dict.fromkeys([1, *roots]))
    seen = set(order)
    for state in order:  # breadth first
        edges[state] = folder.char_edges(state)
        for _, _, target in edges[state]:
            if target not in seen:
                seen.add(target)
                order.append(target)
    return edges


class _CharFolder:
    """Character edges of the states of a byte DFA that lie between characters."""

    def __init__(self, byte_ptr: np.ndarray, byte_ranges: np.ndarray,
                 byte_next: np.ndarray) -> None:
        self.ptr = [int(p) for p in byte_ptr]
        self.ranges = [(int(lo), int(hi)) for lo, hi in byte_ranges]
        self.next = [int(n) for n in byte_next]
        self._suffix_memo: dict[tuple[int, int], CharEdges] = {}

    def byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        return [(*self.ranges[j], self.next[j])
                for j in range(self.ptr[state], self.ptr[state + 1])]

    def char_edges(self, state: int) -> CharEdges:
        out: CharEdges = []
        for lo, hi, target in self.byte_edges(state):
            if lo < 0x80:
                out.append((lo, min(hi, 0x7F), target))
            for first, last, length, mask in _LEAD_BYTES:
                for lead in range(max(lo, first), min(hi, last) + 1):
                    base = (lead & mask) << (6 * length)
                    out.extend((base + a, base + b, t) for a, b, t in self.suffixes(target, length))
        return _merge(out)

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
            self._suffix_memo[key] = _merge(out)
        return self._suffix_memo[key]


def _merge(edges: CharEdges) -> CharEdges:
    """Sort, and join adjacent ranges with the same target."""
    out: CharEdges = []
    for lo, hi, target in sorted(edges):
        if out and out[-1][2] == target and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, target)
        else:
            out.append((lo, hi, target))
    return out


def describe(ranges: list[tuple[int, int]]) -> str:
    """A readable label for a set of characters: `'a'`, `[a-z_]`, `[^"\\n]` or `any`."""
    ranges = _merge([(lo, hi, 0) for lo, hi in ranges])
    spans = [(lo, hi) for lo, hi, _ in ranges]
    size = sum(hi - lo + 1 for lo, hi in spans)
    if len(spans) == 1 and size == 1:
        return "'" + _char(spans[0][0], in_class=False) + "'"
    if size * 2 > _MAX_CODE_POINT + 1 - _SURROGATES:
        complement = _complement(spans)
        if not complement:
            return "any"
        return "[^" + "".join(_class_item(lo, hi) for lo, hi in complement) + "]"
    return "[" + "".join(_class_item(lo, hi) for lo, hi in spans) + "]"


def _complement(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    nxt = 0
    for lo, hi in spans + [(_MAX_CODE_POINT + 1, _MAX_CODE_POINT + 1)]:
        for a, b in ((nxt, min(lo - 1, 0xD7FF)), (max(nxt, 0xE000), lo - 1)):
            if a <= b:
                out.append((a, b))
        nxt = hi + 1
    return out


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


def _quote(text: str) -> str:
    """A DOT double-quoted string's content: backslashes and quotes escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
