"""Regex front end and byte-DFA construction, checked against Python's `re` (re.ASCII, fullmatch)."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest
from helpers import moore_classes, mutate, sample_dfa_strings

from grammarc.automaton import build_dfa
from grammarc.errors import GrammarError, TooManyStatesError
from grammarc.frontends.regex import parse_regex

PATTERNS = [
    r"\d{4}-\d{2}-\d{2}",
    r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    r"[^eE]+",
    r"[^eE]{1,30}",
    r"[ぁ-ゟ]+",
    r"(?:cat|dog|bird)(?:, (?:cat|dog|bird)){0,3}",
    r"(?i)hello|world!?",
    r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?",
    r"\w+\s\W?",
    r"(?s).{2,5}",
    r".*x.*",
    r"(a|b)*a(a|b){3}",
    r"[\u00e0-\u00ff\u0400-\u04ff]{1,3}z",
    r"\u00e9+|\x41\N{GREEK SMALL LETTER ALPHA}?",
    r"^(?:yes|no)$",
    r"(?:ab)+?c??",
    r"[^\W\d]+",
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
    r"[a-z0-9._%+-]{1,32}@[a-z0-9-]{1,30}(?:\.[a-z0-9-]{1,30}){0,3}\.[a-z]{2,10}",
]

ALPHABET = "abcxyzE e-.,@!?0129\n\t\"\\/éàжぁゟ😀Ab_HWOLDhelowrd"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dfa_agrees_with_re(pattern: str) -> None:
    rng = random.Random(pattern)
    dfa = build_dfa(parse_regex(pattern))
    compiled = re.compile(pattern, re.ASCII)
    accepted = sample_dfa_strings(dfa, rng, 200)
    assert accepted or dfa.accepting[1], "sampling found no accepted string"
    candidates = []
    for data in accepted:
        text = data.decode("utf-8")  # every accepted byte string must be valid UTF-8
        assert compiled.fullmatch(text), f"DFA accepts {text!r}, re does not"
        candidates.extend(mutate(text, rng, ALPHABET) for _ in range(5))
    candidates.extend("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
                      for _ in range(500))
    for text in candidates:
        assert dfa.accepts(text.encode()) == bool(compiled.fullmatch(text)), text


@pytest.mark.parametrize("pattern,alphabet,length", [
    (r"(?i)ab|cd*", "abcdABCD", 4),
    (r"(a|b)*a(a|b){2}", "ab", 8),
    (r"[ab]{2,4}c?|c+", "abc", 6),
    (r"(?:a?){3}b", "ab", 6),
    (r"(?:x|xy|yx)*", "xy", 9),
    # bounded repeats whose copies overlap (the subset construction prunes dominated copies)
    (r"(?:a[ab]*b){0,6}", "ab", 10),
    (r"(?:a[ab]*b){2,4}a?", "ab", 10),
    (r"(?:a|ab|b){2,5}c?", "abc", 7),
    (r"(?:(?:ab?){0,3}c){0,3}", "abc", 8),
    (r"(?:(?:a[ab]*){1,2}b){1,3}", "ab", 10),
    (r"(?:x(?:a|\[[^;]*\])*y,){0,4}", "xa[]y,", 6),
    (r"(?:x(?:a|\[[^;]*\])*y,){2,3}", "xa[]y,", 6),
    # a backreference to a group captured once before it with finitely many texts: each text
    # spelled out twice
    (r"(a|b)\1", "ab", 4), (r"([ab])x\1", "abx", 5), (r"(?P<n>[ab]{1,2})-(?P=n)", "ab-", 6),
    (r"(?i)([ab])\1", "abAB", 3), (r"(?i:(a))\1", "aA", 3), (r"(a)(?i:\1)", "aA", 3),
    (r"(?:([ab])\1)+", "ab", 6), (r"(a|b)(?:x|\1)*", "abx", 5), (r"(?:x([ab]))\1", "abx", 4),
    (r"(a|)\1b", "ab", 4), (r"([ab])(c|d)\2\1", "abcd", 5), (r"((a|b)c)\2\1", "abc", 6),
    (r"(ab?|c)\1{2}", "abc", 7), (r"(['\"])[a-c]*\1", "a'\"b", 5),
])
def test_exhaustive_small_alphabet(pattern: str, alphabet: str, length: int) -> None:
    dfa = build_dfa(parse_regex(pattern))
    compiled = re.compile(pattern, re.ASCII)
    for n in range(length + 1):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            assert dfa.accepts(text.encode()) == bool(compiled.fullmatch(text)), text


@pytest.mark.parametrize("pattern", [
    r"(?!ab)[abc]*", r"(?=a)[ab]{1,4}", r"(?:(?!ab)a|c)b*", r"ab(?!c)[a-d]*", r"(?!a$)[ab]+",
    r"x(?=y)|z[xy]?", r"(?!(?:ab)+$)[ab]*", r"(?=.*c)(?!.*cc)[abc]*", r"a(?:b(?!a)|c)[abc]?",
    r"(?!a)(?!b).*", r"(?=(?!a).$)[abc]",
])
def test_lookaheads_that_reach_the_end_are_exact(pattern: str) -> None:
    dfa = build_dfa(parse_regex(pattern))
    compiled = re.compile(pattern, re.ASCII)
    for n in range(7):
        for chars in itertools.product("abcxyz"[:4], repeat=n):
            text = "".join(chars)
            assert dfa.accepts(text.encode()) == bool(compiled.fullmatch(text)), text


def _random_pattern(rng: random.Random, depth: int) -> str:
    """A random regex over a, b, c with nested bounded repeats, alternation and classes."""
    kind = rng.random()
    if depth == 0 or kind < 0.3:
        return rng.choice(["a", "b", "c", "[ab]", "[^a]", "[bc]", "."])
    if kind < 0.55:
        return "".join(_random_pattern(rng, depth - 1) for _ in range(rng.randint(2, 3)))
    if kind < 0.75:
        return "(?:" + "|".join(_random_pattern(rng, depth - 1)
                                for _ in range(rng.randint(2, 3))) + ")"
    lo = rng.randint(0, 2)
    hi = rng.choice([lo, lo + 1, lo + 2, lo + 3, ""])
    return f"(?:{_random_pattern(rng, depth - 1)}){{{lo},{hi}}}"


@pytest.mark.parametrize("seed", range(200))
def test_random_nested_patterns_exhaustively(seed: int) -> None:
    """Random nesting of bounded repeats, concatenation and alternation, against re on every
    string over {a, b, c} up to length 6: the subset construction's pruning must be exact."""
    rng = random.Random(seed)
    pattern = "".join(_random_pattern(rng, 3) for _ in range(rng.randint(1, 3)))
    compiled = re.compile(pattern, re.ASCII | re.DOTALL)
    try:
        dfa = build_dfa(parse_regex("(?s)" + pattern))
    except GrammarError:
        assert not any(compiled.fullmatch("".join(chars)) for n in range(7)
                       for chars in itertools.product("abc", repeat=n))
        return
    assert moore_classes(dfa.trans, dfa.accepting) == dfa.num_states
    for n in range(7):
        for chars in itertools.product("abc", repeat=n):
            text = "".join(chars)
            assert dfa.accepts(text.encode()) == bool(compiled.fullmatch(text)), (pattern, text)


BOUNDARY_CODE_POINTS = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFD,
                        0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF]


@pytest.mark.parametrize("pattern", [
    r"(?s).", r".", r"[^a]", r"[\x7f-\u0800]", r"[\u07ff-\U00010000]", r"[\ud7ff-\ue000]",
    r"[\U0003ffff-\U00100000]", r"[^\x80-\U0010fffe]",
])
def test_utf8_class_boundaries_are_exact(pattern: str) -> None:
    dfa = build_dfa(parse_regex(pattern))
    compiled = re.compile(pattern, re.ASCII)
    rng = random.Random(0)
    points = BOUNDARY_CODE_POINTS + [rng.randint(0, 0x10FFFF) for _ in range(2000)]
    for cp in points:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        text = chr(cp)
        assert dfa.accepts(text.encode()) == bool(compiled.fullmatch(text)), hex(cp)


@pytest.mark.parametrize("data", [
    b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf0\x80\x80\x80",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xc3", b"\xff",
])
def test_invalid_utf8_is_never_accepted(data: bytes) -> None:
    dfa = build_dfa(parse_regex(r"(?s).*"))
    assert not dfa.accepts(data)
    assert dfa.accepts("aé€😀".encode())


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dfa_is_minimal_and_trimmed(pattern: str) -> None:
    dfa = build_dfa(parse_regex(pattern))
    assert moore_classes(dfa.trans, dfa.accepting) == dfa.num_states
    assert (dfa.trans[0] == 0).all() and not dfa.accepting[0]
    # every state but the dead one can reach acceptance
    reach = dfa.accepting.copy()
    for _ in range(dfa.num_states):
        reach[1:] |= reach[dfa.trans[1:]].any(axis=1)
    assert reach[1:].all()


@pytest.mark.parametrize("left,right", [
    (r"a|b", r"[ab]"), (r"(ab)*a", r"a(ba)*"), (r"x{2,3}", r"xxx?"), (r"(?i)k", r"[kK]"),
    (r"\d", r"[0-9]"), (r"^abc$", r"abc"),
])
def test_equal_languages_give_identical_dfas(left: str, right: str) -> None:
    a, b = build_dfa(parse_regex(left)), build_dfa(parse_regex(right))
    assert np.array_equal(a.trans, b.trans)
    assert np.array_equal(a.byte_class, b.byte_class)
    assert np.array_equal(a.accepting, b.accepting)


@pytest.mark.parametrize("pattern,column", [
    (r"(a)?\1", 5),           # the group may not take part: then \1 is empty
    (r"(a|b)*\1", 7),         # the last repetition's text
    (r"(?:(a)|b)\1", 10),     # a group in one branch
    (r"(\w+) \1", 7),         # infinitely many texts: not regular
    (r"([a-i]{2})\1", 11),    # 81 texts: more than 64
])
def test_other_backreferences_are_refused_with_what_is_supported(pattern, column):
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern)
    message = str(info.value)
    assert f"1:{column}:" in message and "captured once before it" in message


@pytest.mark.parametrize("pattern,construct,column", [
    (r"(?:a(?=b))*", "lookahead", 5),
    (r"x(?<!y)z", "lookbehind", 2),
    (r"(a)*\1", "backreference", 5),
    (r"(?P<n>a)?(?P=n)", "backreference", 10),
    (r"(a)?(?(1)b|c)", "conditional group", 5),
    (r"a\bc", "word boundary", 2),
    (r"(?>ab)c", "atomic group", 1),
    (r"a*+b", "possessive repeat", 2),
    (r"a^b", "anchor", 2),
    (r"[$]x$y", "anchor", 5),
])
def test_unsupported_constructs_name_the_construct_and_position(pattern, construct, column):
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern)
    message = str(info.value)
    assert construct in message
    assert f"1:{column}:" in message
    assert "\n" not in message


@pytest.mark.parametrize("pattern,fragment", [
    ("ab(c", "missing ), unterminated subpattern"),
    ("a{3,2}", "min repeat greater than max repeat"),
    ("[z-a]", "bad character range"),
    ("a\n(b", "2:"),
])
def test_invalid_regex_reports_position(pattern: str, fragment: str) -> None:
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern, source_name="x.regex")
    assert fragment in str(info.value)
    assert str(info.value).startswith("x.regex:")


@pytest.mark.parametrize("pattern", [r"[^\x00-\U0010ffff]", r"a[^\s\S]b", r"(?:[^\d\D])*x[^\w\W]"])
def test_empty_language_is_an_error(pattern: str) -> None:
    with pytest.raises(GrammarError, match="matches no string"):
        build_dfa(parse_regex(pattern))


def test_overlapping_bounded_repeats_do_not_blow_up() -> None:
    """Without pruning dominated copies, x{0,n} of an item whose copies overlap visits
    exponentially many subsets; the minimal DFA is small and must be built directly."""
    # a bracket's content may contain "]y,x": copies overlap. Unpruned, {0,16} passes through
    # more than 50,000 subsets; the minimal DFA has 586 states.
    dfa = build_dfa(parse_regex(r"(?:x(?:a|\[[^;]*\])*y,){0,16}"), max_states=1000)
    assert dfa.num_states == 586
    pattern = re.compile(r"(?:x(?:a|\[[^;]*\])*y,){0,16}")
    for text in ["xay,x[]y,]y,]y,", "x[y,x]y,", "xay,x[]y,]y,y,", "xay;", "x[]y,xay,"]:
        assert dfa.accepts(text.encode()) == bool(pattern.fullmatch(text)), text


def test_a_20000_word_alternation_is_exact() -> None:
    # issue 15: deduplicating options by list search made this take minutes
    words = [f"w{i:05d}" for i in range(20000)]
    rng = random.Random(3)
    dfa = build_dfa(parse_regex("|".join(words + words[:50])), max_states=100_000)
    for word in rng.sample(words, 300):
        assert dfa.accepts(word.encode())
    for text in ("w20000", "w0000", "w000000", "x00001", ""):
        assert not dfa.accepts(text.encode())


def test_determinising_stays_within_the_memory_budget(monkeypatch) -> None:
    # issue 15: --max-states 5000000 ran into a MemoryError at 5.4 GB; the limits now shrink
    # to what the memory budget allows, and the error says so
    from grammarc.automaton import dfa as dfa_module

    monkeypatch.setattr(dfa_module, "memory_budget", lambda: 64 * 2 ** 20)
    with pytest.raises(TooManyStatesError, match=r"bounded by half the memory available, "
                                                 r"0\.1 GiB\); lower --max-states"):
        build_dfa(parse_regex(r"(a|b)*a(a|b){25}"), max_states=5_000_000)
    assert build_dfa(parse_regex(r"(a|b)*a(a|b){5}"), max_states=5_000_000).num_states == 65


def test_state_limit_stops_a_blowup() -> None:
    with pytest.raises(TooManyStatesError, match="more than 10,000 intermediate DFA states"):
        build_dfa(parse_regex(r"(a|b)*a(a|b){20}"), max_states=1000)
    with pytest.raises(TooManyStatesError, match="needs 1,025 DFA states, more than"):
        build_dfa(parse_regex(r"(a|b)*a(a|b){9}"), max_states=1000)
    with pytest.raises(TooManyStatesError, match="NFA states"):
        build_dfa(parse_regex(r"(?:(?:x{1000}){1000}){1000}"), max_states=1000)
