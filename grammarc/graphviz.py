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

from .charsets import CharEdges, CharFolder, csr_byte_edges, describe

__all__ = ["char_automaton", "describe", "dot_source"]


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
    folder = CharFolder(csr_byte_edges(byte_ptr, byte_ranges, byte_next))
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


def _quote(text: str) -> str:
    """A DOT double-quoted string's content: backslashes and quotes escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
