"""Regex front end: Python `re` syntax, full-match semantics, ASCII character classes.

The pattern is parsed by Python's own regex parser, so syntax, escapes, flags and error
positions are exactly those of `re`. The language is what `re.fullmatch(pattern, text,
re.ASCII)` accepts: `\\d`, `\\w`, `\\s` and case-insensitive matching are ASCII-only, `.` is any
character but a newline unless `(?s)` is set. Constructs that make the language depend on more
than the text itself (lookaround, backreferences, word boundaries, atomic groups, possessive
repeats, anchors other than at the very start or end) are rejected with their position.
"""

from __future__ import annotations

import re
import re._constants as C  # type: ignore[import-not-found]
import re._parser as P  # type: ignore[import-not-found]

from ..automaton.expr import (
    CharSet, Expr, alt, complement_ranges, concat, normalize_ranges, repeat,
)
from ..errors import GrammarError, UnsupportedError
from . import FrontendOptions

_ANY = ((0, 0x10FFFF),)
_ANY_BUT_NEWLINE = ((0, 9), (11, 0x10FFFF))
_DIGIT = ((48, 57),)
_SPACE = ((9, 13), (32, 32))
_WORD = ((48, 57), (65, 90), (95, 95), (97, 122))
_CATEGORIES = {
    C.CATEGORY_DIGIT: (_DIGIT, False),
    C.CATEGORY_NOT_DIGIT: (_DIGIT, True),
    C.CATEGORY_SPACE: (_SPACE, False),
    C.CATEGORY_NOT_SPACE: (_SPACE, True),
    C.CATEGORY_WORD: (_WORD, False),
    C.CATEGORY_NOT_WORD: (_WORD, True),
}
_START_ANCHORS = (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
_END_ANCHORS = (C.AT_END, C.AT_END_STRING)

# construct name -> source patterns that introduce it (searched outside classes)
_CONSTRUCT_SYNTAX = {
    "lookahead": ("(?=", "(?!"),
    "lookbehind": ("(?<=", "(?<!"),
    "backreference": ("(?P=", "\\1", "\\2", "\\3", "\\4", "\\5", "\\6", "\\7", "\\8", "\\9"),
    "conditional group": ("(?(",),
    "atomic group": ("(?>",),
    "possessive repeat": ("*+", "++", "?+", "}+"),
    "word boundary": ("\\b", "\\B"),
    "anchor": ("^", "$", "\\A", "\\Z"),
}


def parse_regex(pattern: str, source_name: str | None = None,
                options: FrontendOptions | None = None) -> Expr:
    """The expression tree of `pattern` (Python `re` syntax, full match, ASCII classes).
    No front-end option applies to regexes."""
    try:
        tree = P.parse(pattern, re.ASCII)
    except re.error as exc:
        raise GrammarError(f"invalid regex: {exc.msg}", source_name=source_name,
                           text=pattern, offset=exc.pos) from None
    converter = _Converter(pattern, source_name)
    return converter.sequence(list(tree), tree.state.flags, at_start=True, at_end=True)


class _Converter:
    def __init__(self, pattern: str, source_name: str | None) -> None:
        self.pattern = pattern
        self.source_name = source_name

    def unsupported(self, construct: str, detail: str = "") -> GrammarError:
        offset = _find_construct(self.pattern, construct)
        what = f"{construct} is not supported" + (f" ({detail})" if detail else "")
        return UnsupportedError(f"unsupported regex construct: {what}; grammarc compiles regular "
                            "languages of the text alone", source_name=self.source_name,
                            text=self.pattern, offset=offset)

    def sequence(self, items: list, flags: int, at_start: bool, at_end: bool) -> Expr:
        """A concatenation; anchors are allowed where nothing can precede / follow them."""
        is_anchor = [op is C.AT and arg in _START_ANCHORS + _END_ANCHORS for op, arg in items]
        parts = []
        for i, (op, arg) in enumerate(items):
            before_empty = at_start and all(is_anchor[:i])
            after_empty = at_end and all(is_anchor[i + 1:])
            if op is C.AT:
                if (arg in _START_ANCHORS and before_empty) or (arg in _END_ANCHORS and after_empty):
                    continue
                if arg in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
                    raise self.unsupported("word boundary")
                raise self.unsupported("anchor", "only at the very start or end of the pattern")
            parts.append(self.node(op, arg, flags, before_empty, after_empty))
        return concat(*parts)

    def node(self, op, arg, flags: int, at_start: bool, at_end: bool) -> Expr:
        ignore_case = bool(flags & re.IGNORECASE)
        if op is C.LITERAL:
            return _charset(((arg, arg),), ignore_case, negate=False)
        if op is C.NOT_LITERAL:
            return _charset(((arg, arg),), ignore_case, negate=True)
        if op is C.ANY:
            return CharSet(normalize_ranges(_ANY if flags & re.DOTALL else _ANY_BUT_NEWLINE))
        if op is C.IN:
            return self.char_class(arg, ignore_case)
        if op is C.BRANCH:
            return alt(*(self.sequence(list(b), flags, at_start, at_end) for b in arg[1]))
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = arg
            return self.sequence(list(sub), (flags | add_flags) & ~del_flags, at_start, at_end)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = arg
            item = self.sequence(list(sub), flags, False, False)
            return repeat(item, lo, None if hi is C.MAXREPEAT else hi)
        if op is getattr(C, "POSSESSIVE_REPEAT", None):
            raise self.unsupported("possessive repeat")
        if op is getattr(C, "ATOMIC_GROUP", None):
            raise self.unsupported("atomic group")
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction = arg[0]
            raise self.unsupported("lookahead" if direction >= 0 else "lookbehind")
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            raise self.unsupported("backreference" if op is C.GROUPREF else "conditional group")
        raise self.unsupported(str(op).lower())

    def char_class(self, items: list, ignore_case: bool) -> Expr:
        negate = False
        ranges: list[tuple[int, int]] = []
        for op, arg in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.append((arg, arg))
            elif op is C.RANGE:
                ranges.append(arg)
            elif op is C.CATEGORY:
                base, negated = _CATEGORIES[arg]
                ranges.extend(complement_ranges(base) if negated else base)
            else:
                raise self.unsupported(f"class item {op}")
        return _charset(tuple(ranges), ignore_case, negate)


def _charset(ranges: tuple[tuple[int, int], ...], ignore_case: bool, negate: bool) -> CharSet:
    if ignore_case:
        ranges = tuple(ranges) + _ascii_case_variants(ranges)
    result = normalize_ranges(ranges)
    return CharSet(complement_ranges(result) if negate else result)


def _ascii_case_variants(ranges) -> tuple[tuple[int, int], ...]:
    """The other-case ASCII letters of the letters in `ranges` (re.ASCII | re.IGNORECASE)."""
    out = []
    for lo, hi in ranges:
        for a, b, shift in ((65, 90, 32), (97, 122, -32)):
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                out.append((x + shift, y + shift))
    return tuple(out)


def _find_construct(pattern: str, construct: str) -> int:
    """Offset of the first place `construct` is written in `pattern`, outside classes."""
    needles = _CONSTRUCT_SYNTAX.get(construct, ())
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if not in_class:
            for needle in needles:
                if pattern.startswith(needle, i):
                    return i
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):
                i += 1
            continue
        i += 1
    return 0

