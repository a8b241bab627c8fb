"""JSON strings: value languages over characters, their JSON serialisation, patterns, formats.

A string schema is first a *value* language (which strings are valid: lengths, `pattern`,
`format`, `enum`); `serialized` then turns it into the language of JSON texts of those values,
written the way JSON serialisers write them: printable ASCII characters as themselves, except
`"` and `\\` (`\\"`, `\\\\`) and `/` (itself or `\\/`); control characters escaped (`\\n` and the
other short forms, or `\\u00XX`); other characters as themselves or `\\uXXXX` in either case
(beyond the BMP, a surrogate pair). So `json.dumps` output is accepted with or without
`ensure_ascii`. Each text decodes to exactly one value, so intersections of serialised
languages are the serialisations of the intersected values.

`pattern` uses ECMA-262 syntax and search semantics (a match anywhere unless anchored with
`^`/`$`), translated to Python's syntax and parsed by the regex front end.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from ...automaton import (
    EMPTY, NOTHING, Alt, Automaton, ByteDFA, CharSet, Concat, Expr, Repeat, alt, build_dfa,
    charset, concat, literal, repeat,
)
from ...charsets import MAX_CODE_POINT, complement_ranges, intersect_ranges, normalize_ranges
from ...errors import GrammarError, UnsupportedError
from ..regex import parse_regex, regex_tokens

ANY_CHAR = CharSet(normalize_ranges([(0, MAX_CODE_POINT)]))
QUOTE = literal('"')
_RAW_FORBIDDEN = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
# characters that may be written as \uXXXX: control characters and non-ASCII BMP characters
_U_ESCAPED = normalize_ranges([(0x00, 0x1F), (0x7F, 0xFFFF)])
_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n",
                  0x0D: "r", 0x09: "t"}


def json_string(value: Expr) -> Expr:
    """JSON texts `"..."` of the strings in the value language."""
    return concat(QUOTE, serialized(value), QUOTE)


def serialized(value: Expr) -> Expr:
    """Each character of the value language replaced by all its JSON spellings."""
    if isinstance(value, CharSet):
        return _spellings(value.ranges)
    if isinstance(value, Concat):
        return concat(*(serialized(p) for p in value.parts))
    if isinstance(value, Alt):
        return alt(*(serialized(o) for o in value.options))
    if isinstance(value, Repeat):
        return repeat(serialized(value.item), value.min, value.max)
    if isinstance(value, Automaton):
        raise TypeError("serialise value languages before combining them as automata")
    raise TypeError(f"not an expression: {value!r}")


@lru_cache(maxsize=8192)
def _spellings(ranges: tuple[tuple[int, int], ...]) -> Expr:
    """The JSON spellings of one character of `ranges`: its raw UTF-8 and its escapes. With
    escapes, a minimal DFA: the `\\u` numerals of several ranges share leading digits, which
    as alternatives would leave every copy of the character (one per position of a bounded
    string) to be determinised into many equivalent states."""
    spellings = _spelling_options(ranges)
    return spellings if isinstance(spellings, CharSet) else Automaton(build_dfa(spellings))


def _spelling_options(ranges: tuple[tuple[int, int], ...]) -> Expr:
    raw = intersect_ranges(ranges, complement_ranges(normalize_ranges(_RAW_FORBIDDEN)))
    options: list[Expr] = [CharSet(raw)] if raw else []
    for code, letter in _SHORT_ESCAPES.items():
        if _contains(ranges, code):
            options.append(literal("\\" + letter))
    escapable = intersect_ranges(ranges, _U_ESCAPED)
    if escapable:
        options.append(concat(literal("\\u"), alt(*(_hex4(lo, hi) for lo, hi in escapable))))
    for lo, hi in intersect_ranges(ranges, ((0x10000, MAX_CODE_POINT),)):
        options.extend(_surrogate_pairs(lo, hi))
    return alt(*options)


def _contains(ranges, code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


def _hex_digits(lo: int, hi: int) -> Expr:
    """One hex digit with value lo..hi, either case."""
    ranges = []
    for value_lo, value_hi, base in ((0, 9, 48), (10, 15, 97), (10, 15, 65)):
        a, b = max(lo, value_lo), min(hi, value_hi)
        if a <= b:
            ranges.append((base + a - value_lo, base + b - value_lo))
    return charset(ranges)


def _hex4(lo: int, hi: int, width: int = 4) -> Expr:
    """Hex numerals of exactly `width` digits with values lo..hi."""
    if width == 0:
        return EMPTY
    unit = 16 ** (width - 1)
    a, b = lo // unit, hi // unit
    if a == b:
        return concat(_hex_digits(a, a), _hex4(lo % unit, hi % unit, width - 1))
    options = [concat(_hex_digits(a, a), _hex4(lo % unit, unit - 1, width - 1))]
    if b - a > 1:
        options.append(concat(_hex_digits(a + 1, b - 1), repeat(_hex_digits(0, 15), width - 1,
                                                                 width - 1)))
    options.append(concat(_hex_digits(b, b), _hex4(0, hi % unit, width - 1)))
    return alt(*options)


def _surrogate_pairs(lo: int, hi: int) -> list[Expr]:
    """`\\uHHHH\\uLLLL` spellings of the astral code points lo..hi."""
    u = literal("\\u")
    high_lo, low_lo = divmod(lo - 0x10000, 0x400)
    high_hi, low_hi = divmod(hi - 0x10000, 0x400)

    def pairs(high_a: int, high_b: int, low_a: int, low_b: int) -> Expr:
        return concat(u, _hex4(0xD800 + high_a, 0xD800 + high_b), u,
                      _hex4(0xDC00 + low_a, 0xDC00 + low_b))

    if high_lo == high_hi:
        return [pairs(high_lo, high_lo, low_lo, low_hi)]
    out = [pairs(high_lo, high_lo, low_lo, 0x3FF), pairs(high_hi, high_hi, 0, low_hi)]
    if high_hi - high_lo > 1:
        out.append(pairs(high_lo + 1, high_hi - 1, 0, 0x3FF))
    return out


@lru_cache(maxsize=None)
def any_string() -> Expr:
    """Every JSON string text, as a minimal DFA built once per process (nearly every schema
    has one, and its many escape spellings are slow to lay out again)."""
    return Automaton(build_dfa(json_string(length_between(0, None))))


@lru_cache(maxsize=4096)
def string_literal(text: str) -> Expr:
    """JSON texts of exactly this string value (kept: object keys recur in every schema
    of a family; the last 4,096 only: each is three objects that every full garbage
    collection of a serving process walks, and 65,536 would be 200,000 of them, about
    90 ms of a collection on the development machine)."""
    return json_string(literal(text))


def length_between(lo: int, hi: int | None) -> Expr:
    """Value language: strings of lo..hi characters (code points)."""
    return repeat(ANY_CHAR, lo, hi)


COUNTED_LENGTH = 128  # length bounds past this are counted at run time, not spelled in states


def counted_string(lo: int, hi: int | None) -> Expr:
    """JSON texts of strings of lo..hi characters as a machine body whose count of characters
    is kept at run time (`Repeat.counted`): a few states for any bounds."""
    return concat(QUOTE, Repeat(_spellings(ANY_CHAR.ranges), lo, hi, counted=True), QUOTE)


# ---------------------------------------------------------------------------- patterns
_ECMA_SPACE = ("\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f"
               "\\u3000\\ufeff")
_ECMA_SPACE_RANGES = normalize_ranges([(9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680),
                                       (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
                                       (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])
_NOT_ECMA_SPACE = "".join(
    f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in complement_ranges(_ECMA_SPACE_RANGES))
_LINE_TERMINATORS = "\\n\\r\\u2028\\u2029"


def pattern_texts(pattern: str, where: str, subtracted: str | None = None) -> Expr:
    """JSON texts of the strings in which the ECMA-262 `pattern` finds a match; where the
    keyword `subtracted` also reads the strings it does not match, a pattern with property
    escapes is refused (`UNICODE_VERSION`).

    The pattern is converted with every character set already spelled in JSON, so that its
    lookaheads (boolean operations on automata) act on texts; that is exact because each text
    decodes to one value."""
    if subtracted is not None and uses_unicode_properties(pattern):
        raise UnsupportedError(f"{where}: pattern {pattern!r} in {subtracted}: grammarc reads "
                               f"\\p{{...}} by the categories of Unicode {UNICODE_VERSION}, a "
                               "subset of a later version's, which the strings that do not "
                               "match cannot leave out exactly")
    python = _ecma_to_python(pattern, where)
    any_text = repeat(serialized(ANY_CHAR), 0, None)
    options = []
    for branch, groups_before in _alternatives(python):
        anchored_start = branch.startswith("^")
        anchored_end = branch.endswith("$") and not branch.endswith("\\$")
        # the groups before the branch, empty, so that its backreferences keep their numbers
        # (to a group of another branch, one that took no part: the empty text, as in ECMA)
        body = "()" * groups_before + \
            branch[1 if anchored_start else 0:len(branch) - 1 if anchored_end else None]
        try:
            expr = parse_regex(body, after=EMPTY if anchored_end else any_text,
                               preceded=not anchored_start, spell=_spell)
        except GrammarError as exc:
            kind = UnsupportedError if isinstance(exc, UnsupportedError) else GrammarError
            raise kind(f"{where}: pattern {pattern!r}: {_strip_position(exc)}") from None
        options.append(expr if anchored_start else concat(any_text, expr))
    return concat(QUOTE, alt(*options), QUOTE)


def _spell(charset: CharSet) -> Expr:
    return _spellings(charset.ranges)


def _strip_position(exc: GrammarError) -> str:
    text = str(exc)
    parts = text.split(": ", 1)
    return parts[1] if len(parts) == 2 and parts[0].replace(":", "").isdigit() else text


#: The Unicode version of the general categories `\\p{...}` reads (Python's `unicodedata`).
#: Later versions give categories to code points unassigned here: a pattern that must match
#: is then exact on this version's characters and refuses only those (a subset), but one
#: subtracted would let them through, so a `\\p` where a value must not match is refused.
UNICODE_VERSION = unicodedata.unidata_version
# ECMA-262's names of general categories (long names and aliases) by their short names
_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd", "digit": "Nd",
    "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "punct": "P",
    "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z", "Space_Separator": "Zs",
    "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Control": "Cc", "cntrl": "Cc",
    "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
}
_CATEGORY_GROUPS = {"L": ("Lu", "Ll", "Lt", "Lm", "Lo"), "LC": ("Lu", "Ll", "Lt"),
                    "M": ("Mn", "Mc", "Me"), "N": ("Nd", "Nl", "No"),
                    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
                    "S": ("Sm", "Sc", "Sk", "So"), "Z": ("Zs", "Zl", "Zp")}
_UNICODE_PROPERTIES = ("\\p{...} is read for general categories (L, Lu, Letter, gc=Nd, "
                       "...), Any and ASCII, where a value must match: not \\P, not in a "
                       "negated class or a negative lookahead, not the categories of "
                       "unassigned code points (C, Cn)")


@lru_cache(maxsize=None)
def _category_runs() -> dict[str, tuple[tuple[int, int], ...]]:
    """The code points of each two-letter general category, as runs (one scan of the code
    space, the first time a pattern asks)."""
    runs: dict[str, list[tuple[int, int]]] = {}
    category = unicodedata.category
    start, current = 0, category("\0")
    for code in range(1, MAX_CODE_POINT + 1):
        found = category(chr(code))
        if found != current:
            runs.setdefault(current, []).append((start, code - 1))
            start, current = code, found
    runs.setdefault(current, []).append((start, MAX_CODE_POINT))
    return {name: tuple(found) for name, found in runs.items()}


def unicode_property(name: str) -> tuple[tuple[int, int], ...] | None:
    """The code points of the value of an ECMA-262 property escape `\\p{name}`: a general
    category (`L`, `Letter`, `General_Category=Lu`, `gc=Lu`) by `UNICODE_VERSION`, `Any` or
    `ASCII`; None for one grammarc does not read (scripts, other binary properties, and the
    categories of unassigned code points, whose members change between versions)."""
    if name == "Any":
        return ((0, MAX_CODE_POINT),)
    if name == "ASCII":
        return ((0, 0x7F),)
    for prefix in ("General_Category=", "gc="):
        name = name.removeprefix(prefix)
    short = _CATEGORY_NAMES.get(name, name)
    parts = _CATEGORY_GROUPS.get(short, (short,))
    runs = _category_runs()
    if any(part == "Cn" or part not in runs for part in parts):
        return None
    return normalize_ranges(tuple(run for part in parts for run in runs[part]))


def uses_unicode_properties(pattern: str) -> bool:
    """Whether an ECMA-262 pattern holds a property escape (`\\p{...}`, `\\P{...}`)."""
    return any(token in ("\\p", "\\P") for _, token, _ in regex_tokens(pattern, ecma=True))


_ECMA_GROUPS = ("?:", "?=", "?!", "?<")  # `(?<=`, `(?<!` and named groups start `?<`
_PYTHON_ONLY_ESCAPES = "AZaNU"  # letters Python's `re` reads as escapes, ECMA-262 does not
_HIGH_THEN_LOW = re.compile(r"\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)


def _ecma_to_python(pattern: str, where: str) -> str:
    """Rewrite the ECMA-262 constructs whose meaning differs in Python's `re` (with the `u`
    flag, as JSON Schema reads patterns: a surrogate pair of `\\u` escapes is one character),
    and refuse the Python syntax ECMA-262 does not have (`\\Z`, `{,n}`, `(?P<n>`, `(?i)`)
    rather than read it as Python would."""
    out = []
    previous = ""
    pair_end = 0  # the end of the surrogate pair being written as one character
    negated_class = False
    groups: list[bool] = []  # the groups open here: whether each is a negative lookahead
    for i, token, in_class in regex_tokens(pattern, ecma=True):
        if i < pair_end:
            continue
        if not in_class and token.startswith("["):
            negated_class = token.startswith("[^")
        elif not in_class and token == "(":
            groups.append(pattern.startswith("?!", i + 1))
        elif not in_class and token == ")" and groups:
            groups.pop()
        pair = _HIGH_THEN_LOW.match(pattern, i) if token == "\\u" else None
        if pair is not None:
            high, low = int(pair[1], 16), int(pair[2], 16)
            out.append(f"\\U{0x10000 + (high - 0xD800) * 0x400 + low - 0xDC00:08x}")
            pair_end = pair.end()
        elif token.startswith("\\") and len(token) > 1 and \
                token[1] in _PYTHON_ONLY_ESCAPES:
            instead = "^ and $ for anchors" if token[1] in "AZ" else \
                "the character itself or \\uXXXX"
            raise GrammarError(f"{where}: pattern {pattern!r}: {token} is not an ECMA-262 "
                               f"escape (JSON Schema patterns are ECMA-262: use {instead})")
        elif not in_class and (token == "{" and pattern.startswith("{,", i) or token == "?"
                               and previous == "(" and not pattern.startswith(_ECMA_GROUPS, i)):
            python = pattern[i - 1:i + 2] if token == "?" else "{,"
            raise GrammarError(f"{where}: pattern {pattern!r}: {python!r} at character {i} is "
                               "Python syntax, not ECMA-262")
        elif token.startswith("\\") and len(token) > 1:
            escaped = token[1]
            if escaped == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif escaped == "S":
                out.append(_NOT_ECMA_SPACE if in_class else f"[{_NOT_ECMA_SPACE}]")
            elif escaped == "c" and len(token) == 3:
                out.append(f"\\x{ord(token[2]) % 32:02x}")
            elif token.startswith("\\u{"):
                if not token.endswith("}"):
                    raise GrammarError(f"{where}: pattern {pattern!r}: unterminated \\u{{...}}")
                out.append(f"\\U{int(token[3:-1], 16):08x}")
            elif escaped in "pP":
                close = pattern.find("}", i + 3) if pattern.startswith("{", i + 2) else -1
                ranges = unicode_property(pattern[i + 3:close]) if close > 0 else None
                if ranges is None or escaped == "P" or in_class and negated_class or \
                        any(groups):
                    raise UnsupportedError(f"{where}: pattern {pattern!r}: "
                                           f"{_UNICODE_PROPERTIES}")
                spelled = "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}"
                                  for lo, hi in ranges)
                out.append(spelled if in_class else f"[{spelled}]")
                pair_end = close + 1
            elif escaped == "k":  # a named backreference, `\k<name>`
                close = pattern.find(">", i + 3) if pattern.startswith("<", i + 2) else -1
                if close < 0:
                    raise GrammarError(f"{where}: pattern {pattern!r}: \\k is not followed "
                                       "by a group name in <>")
                out.append(f"(?P={pattern[i + 3:close]})")
                pair_end = close + 1
            else:
                out.append(token)
        elif in_class:
            out.append(token)
        elif token == "[^]":
            out.append("(?s:.)")
        elif token == "[]":
            out.append("[^\\x00-\\U0010ffff]")
        elif token == ".":
            out.append(f"[^{_LINE_TERMINATORS}]")
        elif token == "?" and previous == "(" and pattern.startswith("?<", i) and \
                not pattern.startswith(("?<=", "?<!"), i):
            out.append("?P")  # a named group
        else:
            out.append(token)
        previous = token
    return "".join(out)


def _alternatives(pattern: str, groups_before: int = 0) -> list[tuple[str, int]]:
    """The top-level branches of the pattern, a branch that is one plain group unwrapped and
    split again (`^$|(^a+$)` is `^$`, `^a+$`), so that anchors inside it are seen; each with
    the number of capturing groups the pattern opens before it."""
    out = []
    for branch in _top_level_branches(pattern):
        inner = _group_body(branch)
        if inner is None:
            out.append((branch, groups_before))
        else:
            out.extend(_alternatives(inner, groups_before + (not branch.startswith("(?:"))))
        groups_before += _capturing_groups(branch)
    return out


def _capturing_groups(pattern: str) -> int:
    """The capturing groups a pattern (in Python's syntax) opens: `(`, and `(?P<name>`."""
    return sum(ch == "(" and (not pattern.startswith("?", i + 1) or
                              pattern.startswith("?P<", i + 1))
               for i, ch, _ in _syntax(pattern))


def _group_body(branch: str) -> str | None:
    """The body of a branch that is exactly one capturing or `(?:` group, else None."""
    if branch.startswith("(?:"):
        start = 3
    elif branch.startswith("(") and not branch.startswith("(?"):
        start = 1
    else:
        return None
    for i, ch, depth in _syntax(branch):
        if ch == ")" and depth == 0:
            return branch[start:i] if i == len(branch) - 1 else None
    return None


def _top_level_branches(pattern: str) -> list[str]:
    """Split at `|` outside groups, classes and escapes."""
    cuts = [i for i, ch, depth in _syntax(pattern) if ch == "|" and depth == 0]
    return [pattern[a + 1:b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)])]


def _syntax(pattern: str) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth after it) of the characters outside escapes and
    character classes: the regex syntax that groups and alternation are made of."""
    depth = 0
    for i, token, in_class in regex_tokens(pattern):
        if not in_class and token[0] not in "\\[":
            depth += (token == "(") - (token == ")")
            yield i, token, depth


# ----------------------------------------------------------------------------- formats
_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = ("(?:" + "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
]) + ")")
# a label: letters, digits, hyphens; no hyphen first or last; "--" never in 3rd-4th position
# (reserved for A-labels, which grammarc does not validate)
def _label(max_len: int) -> str:
    a, c = "[A-Za-z0-9]", "[A-Za-z0-9-]"
    return (f"(?:{a}(?:{c}?{a})?"                                  # 1 to 3 characters
            f"|{a}{c}{{2}}{a}"                                     # 4
            f"|{a}{c}(?:{a}{c}|-{a}){c}{{0,{max_len - 5}}}{a})")   # 5 to max_len


_HOSTNAME = rf"{_label(63)}(?:\.{_label(63)}){{0,2}}(?:\.{_label(61)})?"
_TWO = r"[0-9]{2}"
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26]|00)00)"
_FULL_DATE = ("(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
              "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
              f"|{_LEAP_YEAR}-02-29)")
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_FRACTION = r"(?:\.[0-9]+)?"
_FULL_TIME = (rf"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRACTION}{_OFFSET}"
              rf"|23:59:60{_FRACTION}(?:[Zz]|[+-]00:00))")
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = r"(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
_DURATION = rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_QUOTED_LOCAL = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"'
_EMAIL = (rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|{_QUOTED_LOCAL})"
          rf"@(?:{_HOSTNAME}|\[{_IPV4}\]|\[IPv6:{_IPV6}\])")
# RFC 3986
_UNRESERVED = r"[A-Za-z0-9._~-]"
_PCT = r"%[0-9A-Fa-f]{2}"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_PCHAR = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*"
_USERINFO = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*"
_IPVFUTURE = rf"[vV][0-9A-Fa-f]+\.(?:{_UNRESERVED}|{_SUB_DELIMS}|:)+"
_HOST = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*)"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_SEGMENT_NZ_NC = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|@)+"
_PATH_ABEMPTY = rf"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = rf"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_PATH_ROOTLESS = rf"{_SEGMENT_NZ}(?:/{_SEGMENT})*"
_PATH_NOSCHEME = rf"{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*"
_QUERY = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = (rf"{_SCHEME}:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS}|)"
        rf"{_QUERY}")
_RELATIVE_REF = (rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|)"
                 rf"{_QUERY}")
_HEX = "[0-9A-Fa-f]"

FORMATS = {
    "date": _FULL_DATE,
    "time": _FULL_TIME,
    "date-time": rf"{_FULL_DATE}[Tt]{_FULL_TIME}",
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE_REF})",
    "uuid": rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
}


# formats whose language above is a subset of the format's, with what it leaves out: exact
# where a value must have the format, too small to subtract (under a `not`, it would let
# through values that have the format)
APPROXIMATED_FORMATS = {"hostname": "hostnames of at most 4 labels",
                        "email": "addresses whose domain has at most 4 labels"}


@lru_cache(maxsize=None)
def four_dots() -> Expr:
    """JSON texts of the strings with at least four dots: every value an
    `APPROXIMATED_FORMATS` language leaves out of its format is one."""
    return pattern_texts(r"\.[^]*\.[^]*\.[^]*\.", "four_dots")


@lru_cache(maxsize=None)
def format_texts(name: str) -> Expr | None:
    """JSON texts of the strings of a supported `format`, as a minimal DFA built once per
    process; None for formats grammarc does not check."""
    regex = FORMATS.get(name)
    return None if regex is None else Automaton(build_dfa(json_string(parse_regex(regex))))


# what `finite_values` reads after a backslash: the short escapes of the characters that
# have no literal spelling, and `u` for `\\u00XX` below U+0020 (none for the others, which
# are read as themselves): each value is read in one spelling
_ESCAPE_ONLY = frozenset(b'"\\bfnrtu')
_CONTROL_HEX = (b"0", b"0", b"01", b"0123456789abcdef")  # \u00XX below U+0020, lower case


def finite_values(texts: ByteDFA, most: int, steps: int = 1 << 16) -> list[str] | None:
    """The string values of `texts`, a DFA of JSON string texts (quotes included, every
    spelling of a value in it or none), if they are at most `most`; else None, or None when
    more than `steps` bytes would be read to tell (a language without bound, or a wide one:
    `^.$` spells a million characters). Each value is read in one spelling: its characters
    literally, those that must be escaped by their short escape or `\\u00XX`."""
    table = texts.byte_table()
    found: dict[str, None] = {}  # in the order met (a control character spelled two ways once)
    budget = [steps]
    on_path: set[tuple[int, int]] = set()

    def walk(state: int, escape: int, spelled: bytearray) -> bool:
        """Whether every value from here was found within the budgets (`escape`: 0 outside
        an escape, 1 after a backslash, 2..5 inside `\\u00XX`)."""
        if (state, escape) in on_path:  # a loop: values without bound
            return False
        if texts.accepting[state]:  # after the closing quote
            found[json.loads(spelled.decode("utf-8"))] = None
            if len(found) > most:
                return False
        on_path.add((state, escape))
        for byte in np.flatnonzero(table[state]).tolist():
            if escape == 1 and byte not in _ESCAPE_ONLY or \
                    escape >= 2 and bytes([byte]) not in _CONTROL_HEX[escape - 2]:
                continue
            budget[0] -= 1
            if budget[0] < 0:
                return False
            after = 1 if escape == 0 and byte == 0x5C else \
                2 if escape == 1 and byte == 0x75 else \
                escape + 1 if 2 <= escape < 5 else 0
            spelled.append(byte)
            finished = walk(int(table[state, byte]), after, spelled)
            spelled.pop()
            if not finished:
                return False
        on_path.discard((state, escape))
        return True

    return list(found) if walk(1, 0, bytearray()) else None


__all__ = ["ANY_CHAR", "APPROXIMATED_FORMATS", "COUNTED_LENGTH", "FORMATS", "UNICODE_VERSION",
           "counted_string", "finite_values", "format_texts", "four_dots", "json_string",
           "length_between", "pattern_texts", "serialized", "string_literal",
           "uses_unicode_properties", "NOTHING"]
