"""`grammarc dot`: UTF-8 byte paths folded back into character ranges (checked against the
byte DFA itself), readable labels, and the command on sources and artifacts."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from helpers import assert_clean_error, mutate, run_cli, sample_dfa_strings

import grammarc
from grammarc.automaton import build_dfa
from grammarc.graphviz import char_automaton, describe
from grammarc.frontends.regex import parse_regex

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = [r"[^\n]+\n", r"[a-z0-9_]+@(?:x|y)", r"[ぁ-ゟ]+|é|😀{2}", r"(?s).{1,3}",
            r"[\u0080-\u07ff\u0800-\uffff\U00010000-\U0010ffff]x", r"[^a-zé-ü\U0001F600]+",
            r"[\u00e0-\u00ff\u0400-\u04ff ]{2,4}z", r"\U0010fffe|\U00010000|[\ud7ff\ue000]"]
ALPHABET = "abxyz@_\n é ü ぁゟ 😀 \u0080\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff"


def _walk_chars(automaton, text: str) -> int:
    state = 1
    for ch in text:
        target = next((t for lo, hi, t in automaton.get(state, []) if lo <= ord(ch) <= hi), 0)
        if target == 0:
            return 0
        state = target
    return state


@pytest.mark.parametrize("pattern", PATTERNS)
def test_character_edges_agree_with_the_byte_dfa(pattern):
    """Walking the characters of a text over the folded edges reaches the state the byte DFA
    reaches after the text's UTF-8 bytes (0 for both when the text leaves the language)."""
    dfa = build_dfa(parse_regex(pattern))
    automaton = char_automaton(*dfa.ranges())
    rng = random.Random(pattern)
    texts = [s.decode() for s in sample_dfa_strings(dfa, rng, 100)]
    texts += [mutate(t, rng, ALPHABET) for t in texts for _ in range(3)]
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4))) for _ in range(300)]
    for text in texts:
        assert _walk_chars(automaton, text) == dfa.walk(text.encode()), text
    for edges in automaton.values():  # edges are merged and never overlap
        assert all(a[1] < b[0] and (a[1] + 1 < b[0] or a[2] != b[2])
                   for a, b in zip(edges, edges[1:]))


@pytest.mark.parametrize("ranges,label", [
    ([(97, 97)], "'a'"),
    ([(10, 10)], "'\\n'"),
    ([(97, 99), (48, 57), (95, 95)], "[0-9_a-c]"),
    ([(97, 98)], "[ab]"),
    ([(0, 9), (11, 0x10FFFF)], "[^\\n]"),
    ([(0, 33), (35, 91), (93, 0x10FFFF)], '[^"\\\\]'),
    ([(0, 0xD7FF), (0xE000, 0x10FFFF)], "any"),
    ([(0x3041, 0x309F), (0x2D, 0x2D), (0x5D, 0x5E)], "[\\-\\]\\^ぁ-ゟ]"),
    ([(0x85, 0x85), (0x2028, 0x2028), (0x1F600, 0x1F600)], "[\\x85\\u2028😀]"),
])
def test_describe(ranges, label):
    assert describe(ranges) == label


def test_dot_of_a_source_and_of_its_artifact(tmp_path, smollm2):
    spec = ROOT / "grammars" / "form-filling.fsm.yaml"
    artifact = tmp_path / "form.npz"
    grammarc.compile(spec, smollm2).save(artifact)
    from_source = run_cli("dot", str(spec))
    from_artifact = run_cli("dot", str(artifact), "-o", str(tmp_path / "form.dot"))
    assert from_source.returncode == from_artifact.returncode == 0
    assert from_artifact.stdout == "" and (tmp_path / "form.dot").read_text() == from_source.stdout
    dot = from_source.stdout
    assert dot.startswith("digraph grammar {\n") and dot.endswith("}\n")
    for name in ("start", "awaiting_name", "awaiting_age", "awaiting_confirmation", "complete"):
        assert f'label="{name}";' in dot
    grammar = grammarc.load(artifact)
    accepting = {int(s) for s in re.findall(r"s(\d+) \[label=\"\d+\", shape=doublecircle\]", dot)}
    assert accepting == set(grammar.accepting_states.tolist())
    assert 's1 -> s2 [label="\'n\'"];' in dot
    assert re.search(r'label="\[\^\\\\n\]"', dot)  # the name: any character but a newline


def test_dot_errors_are_one_line(tmp_path):
    (tmp_path / "bad.gbnf").write_text('root ::= "a" (\n')
    assert_clean_error(run_cli("dot", str(tmp_path / "bad.gbnf")),
                       "bad.gbnf:2:1: GBNF syntax error: unexpected end of file")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert_clean_error(run_cli("dot", str(tmp_path / "bad.npz")),
                       "bad.npz: not an .npz archive (not a zip file)")
