"""Regex front end: Python `re` syntax, full-match semantics, ASCII character classes.

The pattern is parsed by Python's own regex parser, so syntax, escapes, flags and error
positions are exactly those of `re`. The language is what `re.fullmatch(pattern, text,
re.ASCII)` accepts: `\\d`, `\\w`, `\\s` and case-insensitive matching are ASCII-only, `.` is any
character but a newline unless `(?s)` is set. Constructs that make the language depend on more
than the text itself (lookbehind, word boundaries, atomic groups, possessive repeats,
conditional groups, anchors other than at the very start or end) are rejected with their
position, and so is the `u` flag, `(?u)` or `(?u:...)`: it asks for Unicode classes, another
language.

A backreference (`\\1`, `(?P=name)`) is exact where its group is captured exactly once before
it (reached through plain groups only, outside repetitions and branches) and matches at most
`BACKREFERENCE_TEXTS` texts: the sequence holding the group is then, for each text the group
may match, that sequence with the text in place of the group and of every reference to it
(`(["'])x\\1` is `"x"|'x'`). Other backreferences are rejected.

Lookaheads are exact where what follows them is known up to the end of the text: in the
pattern's own sequence, in groups and branches of it, not inside a repetition. There
`(?=A)R` is `R ∩ A.*` and `(?!A)R` is `R ∖ A.*`, computed on automata; `R` is the rest of
the text, so a caller that places the pattern before more text passes that text as `after`.
"""

from __future__ import annotations

import re
import re._constants as C  # type: ignore[import-not-found]
import re._parser as P  # type: ignore[import-not-found]
import warnings

from collections.abc import Callable, Iterator

import numpy as np

from ..automaton import DEFAULT_MAX_STATES
from ..automaton.expr import (
    EMPTY, NOTHING, CharSet, Expr, alt, complement_ranges, concat, normalize_ranges, nullable,
    repeat,
)
from ..errors import GrammarError, UnsupportedError
from . import FrontendOptions, too_many_digits

#: The most texts a group referred back to may match: each is a copy of the sequence that
#: holds the group (a backreference is the group's own text again, regular only where the
#: group's texts are finitely many).
BACKREFERENCE_TEXTS = 64
_BACKREFERENCES = (f"only to a group of at most {BACKREFERENCE_TEXTS} texts captured once "
                   "before it, outside repetitions and branches")

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
                options: FrontendOptions | None = None, *, after: Expr | None = EMPTY,
                preceded: bool = False, spell: Callable[[CharSet], Expr] | None = None) -> Expr:
    """The expression tree of `pattern` (Python `re` syntax, full match, ASCII classes).
    No front-end option applies to regexes but `max_states` (for lookaheads).

    For a pattern embedded in more text: `after` is the language of the text that follows it
    (the result is the pattern's language followed by `after`, with `$` and lookaheads
    applied to it; None when that text is not known, which rejects lookaheads), `preceded`
    says text may come before it (so `^` is not a no-op there), and `spell` maps every
    character set to the language that spells it (JSON escapes).
    """
    try:
        with warnings.catch_warnings():  # `re`'s FutureWarnings about `[[` and `--`
            warnings.simplefilter("ignore", FutureWarning)
            tree = P.parse(pattern, re.ASCII)
    except re.error as exc:
        raise GrammarError(f"invalid regex: {exc.msg}", source_name=source_name,
                           text=pattern, offset=exc.pos) from None
    except (OverflowError, ValueError) as exc:
        if isinstance(exc, ValueError) and "flags are incompatible" in str(exc):  # `(?u)`
            raise unicode_flag_error(pattern, source_name) from None
        if isinstance(exc, ValueError) and not too_many_digits(exc):
            raise
        # a repetition count past C's int, or past Python's digits for an int
        raise GrammarError("invalid regex: the repetition number is too large",
                           source_name=source_name, text=pattern,
                           offset=huge_repeat_offset(pattern)) from None
    max_states = options.max_states if options is not None else DEFAULT_MAX_STATES
    converter = _Converter(pattern, source_name, spell, max_states, _refers_to(list(tree)))
    return converter.sequence(list(tree), tree.state.flags, at_start=not preceded, at_end=True,
                              rest=after)


def unicode_flag_error(pattern: str, source_name: str | None) -> UnsupportedError:
    """The error for the `u` flag, `(?u)` or `(?u:...)`, at its group: it asks for Unicode
    `\\d`, `\\w`, `\\s` and case folding, another language than grammarc's ASCII ones."""
    offset = next((i for i, token, in_class in regex_tokens(pattern) if token == "(" and
                   not in_class and re.match(r"\?[aiLmsux]*u", pattern[i + 1:])), None)
    return UnsupportedError("unsupported regex construct: the u flag (Unicode \\d, \\w, \\s and "
                            "case folding) is not supported; grammarc's are ASCII, so write "
                            "the characters as a class instead", source_name=source_name,
                            text=pattern, offset=offset)


def huge_repeat_offset(text: str) -> int | None:
    """Where the first repetition `{…}` with a count of ten digits or more starts in `text`
    (the count Python's regex engines overflow on), if any."""
    found = re.search(r"\{\d*,?\d{10,}", text)
    return found.start() if found else None


class _Converter:
    def __init__(self, pattern: str, source_name: str | None,
                 spell: Callable[[CharSet], Expr] | None, max_states: int,
                 refers_back: bool = False) -> None:
        self.pattern = pattern
        self.source_name = source_name
        self.spell = spell
        self.max_states = max_states
        self.refers_back = refers_back  # whether the pattern holds a backreference
        self._ops = None

    def unsupported(self, construct: str, detail: str = "") -> GrammarError:
        offset = _find_construct(self.pattern, construct)
        what = f"{construct} is not supported" + (f" ({detail})" if detail else "")
        return UnsupportedError(f"unsupported regex construct: {what}; grammarc compiles regular "
                            "languages of the text alone", source_name=self.source_name,
                            text=self.pattern, offset=offset)

    def chars(self, charset: CharSet) -> Expr:
        return charset if self.spell is None else self.spell(charset)

    def sequence(self, items: list, flags: int, at_start: bool, at_end: bool,
                 rest: Expr | None = None) -> Expr:
        """A concatenation; anchors are allowed where nothing can precede / follow them.

        With `rest` (the text that follows, up to the end), the result is the sequence
        followed by `rest`, and lookaheads and `$` inside it apply to `rest` exactly.
        """
        spelled_out = self.backreferences(items, flags, at_start, at_end, rest) \
            if self.refers_back else None
        if spelled_out is not None:
            return spelled_out
        is_anchor = [op is C.AT and arg in _START_ANCHORS + _END_ANCHORS for op, arg in items]
        leading = next((i for i, anchor in enumerate(is_anchor) if not anchor), len(items))
        trailing = next((i for i, anchor in enumerate(reversed(is_anchor)) if not anchor),
                        len(items))
        acc = EMPTY if rest is None else rest
        parts = []
        for i in reversed(range(len(items))):
            op, arg = items[i]
            before_empty = at_start and i <= leading
            after_empty = at_end and i >= len(items) - trailing - 1
            if op is C.AT:
                if arg in _START_ANCHORS and before_empty:
                    continue
                if arg in _END_ANCHORS and after_empty:
                    if rest is not None:  # the text ends here: nothing of `rest` may follow
                        acc = EMPTY if nullable(acc) else NOTHING
                    continue
                if arg in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
                    raise self.unsupported("word boundary")
                raise self.unsupported("anchor", "only at the very start or end of the pattern")
            if rest is not None and op in (C.ASSERT, C.ASSERT_NOT) and arg[0] >= 0:
                acc = concat(*reversed(parts), acc)
                parts = []
                acc = self.lookahead(op is C.ASSERT, arg[1], flags, acc)
            elif rest is not None and op in (C.BRANCH, C.SUBPATTERN) and _looks_at_rest(arg):
                acc = self.node(op, arg, flags, before_empty, after_empty,
                                rest=concat(*reversed(parts), acc))
                parts = []
            else:
                parts.append(self.node(op, arg, flags, before_empty, after_empty))
        return concat(*reversed(parts), acc)

    def backreferences(self, items: list, flags: int, at_start: bool, at_end: bool,
                       rest: Expr | None) -> Expr | None:
        """The sequence with the first group it captures exactly once and refers back to
        spelled out (module docstring): the alternatives, one per text of the group, of the
        sequence with that text in place of the group (as it is, cases and all) and of each
        reference after it (matched with the flags there, as `re` does). None where no
        captured group of the sequence is referred to."""
        referred = [(number, group_flags, sub) for op, arg in items
                    for number, group_flags, sub in _captured_once(op, arg, flags)
                    if _refers_to(items, number)]
        if not referred:
            return None
        number, group_flags, sub = referred[-1]  # a group inside another one first
        if _refers_to(sub, number):
            raise self.unsupported("backreference", "inside the group it refers to")
        options = []
        for text in self.group_texts(sub, group_flags):
            literals = [(C.LITERAL, ord(ch)) for ch in text]
            exact = (C.SUBPATTERN, (None, 0, re.IGNORECASE, literals))
            again = (C.SUBPATTERN, (None, 0, 0, literals))
            spelled = _with_text(items, number, exact, again)
            if spelled is None:
                raise self.unsupported("backreference", "before the group it refers to")
            options.append(self.sequence(spelled, flags, at_start, at_end, rest))
        return alt(*options)

    def group_texts(self, sub, flags: int) -> list[str]:
        """The texts a group matches, at most `BACKREFERENCE_TEXTS` of them (an unsupported
        backreference otherwise)."""
        from ..automaton.dfa import build_dfa  # builds automata: only for patterns that need it

        characters = _Converter(self.pattern, self.source_name, None, self.max_states,
                                self.refers_back)
        expr = characters.sequence(list(sub), flags, at_start=False, at_end=False)
        if expr == NOTHING:
            return []
        texts = _texts(build_dfa(expr, max_states=self.max_states), BACKREFERENCE_TEXTS)
        if texts is None:
            raise self.unsupported("backreference", _BACKREFERENCES)
        return texts

    def lookahead(self, positive: bool, sub, flags: int, rest: Expr) -> Expr:
        """`rest` where the text there starts (or, negative, does not start) with `sub`."""
        any_text = repeat(self.chars(CharSet(normalize_ranges(_ANY))), 0, None)
        ahead = self.sequence(list(sub), flags, at_start=False, at_end=True, rest=any_text)
        if self._ops is None:
            from ..automaton.products import Ops  # builds automata: only for patterns that need it
            self._ops = Ops(self.max_states)
        return self._ops.intersect(rest, ahead) if positive else \
            self._ops.difference(rest, ahead)

    def node(self, op, arg, flags: int, at_start: bool, at_end: bool,
             rest: Expr | None = None) -> Expr:
        """One parsed item; for groups and branches, followed by `rest` when it is given."""
        ignore_case = bool(flags & re.IGNORECASE)
        if op is C.LITERAL:
            return self.chars(_charset(((arg, arg),), ignore_case, negate=False))
        if op is C.NOT_LITERAL:
            return self.chars(_charset(((arg, arg),), ignore_case, negate=True))
        if op is C.ANY:
            return self.chars(CharSet(normalize_ranges(_ANY if flags & re.DOTALL
                                                       else _ANY_BUT_NEWLINE)))
        if op is C.IN:
            return self.chars(self.char_class(arg, ignore_case))
        if op is C.BRANCH:
            return alt(*(self.sequence(list(b), flags, at_start, at_end, rest) for b in arg[1]))
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = arg
            if add_flags & re.UNICODE:
                raise unicode_flag_error(self.pattern, self.source_name)
            return self.sequence(list(sub), (flags | add_flags) & ~del_flags, at_start, at_end,
                                 rest)
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
            if direction < 0:
                raise self.unsupported("lookbehind")
            raise self.unsupported("lookahead", "only where the text after it runs to the end "
                                   "of the pattern, not inside a repetition")
        if op is C.GROUPREF:
            raise self.unsupported("backreference", _BACKREFERENCES)
        if op is C.GROUPREF_EXISTS:
            raise self.unsupported("conditional group")
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


def _captured_once(op, arg, flags: int) -> Iterator[tuple[int, int, list]]:
    """(number, flags, items) of the capturing groups an item of a sequence captures
    exactly once each time the sequence matches: the item itself if it is a group, and those
    reached from it through groups alone (not through a repetition, a branch or a
    lookaround)."""
    if op is not C.SUBPATTERN:
        return
    number, add_flags, del_flags, sub = arg
    flags = (flags | add_flags) & ~del_flags
    if number is not None:
        yield number, flags, list(sub)
    for inner_op, inner_arg in sub:
        yield from _captured_once(inner_op, inner_arg, flags)


def _children(op, arg) -> list[list]:
    """The item lists inside a parsed item, in the pattern's order."""
    if op is C.SUBPATTERN:
        return [list(arg[3])]
    if op is C.BRANCH:
        return [list(branch) for branch in arg[1]]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
        return [list(arg[2])]
    if op in (C.ASSERT, C.ASSERT_NOT):
        return [list(arg[1])]
    if op is getattr(C, "ATOMIC_GROUP", None):
        return [list(arg)]
    if op is C.GROUPREF_EXISTS:
        return [list(part) for part in arg[1:] if part is not None]
    return []


def _refers_to(items: list, number: int | None = None) -> bool:
    """Whether a backreference to group `number` (None: to any group) lies anywhere in
    `items`."""
    return any(op is C.GROUPREF and number in (None, arg) or
               any(_refers_to(child, number) for child in _children(op, arg))
               for op, arg in items)


def _with_text(items: list, number: int, exact: tuple, again: tuple) -> list | None:
    """`items` with group `number` replaced by `exact` and every reference to it after it by
    `again`, in the pattern's order (None: a reference comes before the group)."""
    seen = False

    def rewritten(op, arg) -> tuple | None:
        nonlocal seen
        if op is C.SUBPATTERN and arg[0] == number:
            seen = True
            return exact
        if op is C.GROUPREF and arg == number:
            return again if seen else None
        if not _children(op, arg):
            return (op, arg)
        if op is C.SUBPATTERN:
            sub = rewrite(list(arg[3]))
            return None if sub is None else (op, (*arg[:3], sub))
        if op is C.BRANCH:
            branches = [rewrite(list(branch)) for branch in arg[1]]
            return None if None in branches else (op, (arg[0], branches))
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            sub = rewrite(list(arg[2]))
            return None if sub is None else (op, (arg[0], arg[1], sub))
        if op in (C.ASSERT, C.ASSERT_NOT):
            sub = rewrite(list(arg[1]))
            return None if sub is None else (op, (arg[0], sub))
        return (op, arg)  # a construct rejected when it is converted

    def rewrite(part: list) -> list | None:
        out = [rewritten(op, arg) for op, arg in part]
        return None if None in out else out

    return rewrite(items)


def _texts(dfa, most: int) -> list[str] | None:
    """The texts of a DFA over UTF-8, or None where they are more than `most` (or
    infinitely many)."""
    if dfa.has_cycle():
        return None
    ptr, ranges, nxt = dfa.ranges()
    counts = np.zeros(dfa.num_states, np.int64)  # texts from each state, capped past `most`
    order = []  # states, each after those it leads to
    stack, done = [1], np.zeros(dfa.num_states, bool)
    while stack:
        state = stack[-1]
        pending = [int(t) for t in nxt[ptr[state]:ptr[state + 1]] if not done[t]]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if not done[state]:
            done[state] = True
            order.append(state)
    for state in order:
        runs, targets = ranges[ptr[state]:ptr[state + 1]], nxt[ptr[state]:ptr[state + 1]]
        total = int(dfa.accepting[state]) + int(((runs[:, 1] - runs[:, 0] + 1) *
                                                  counts[targets]).sum())
        counts[state] = min(total, most + 1)
    if counts[1] > most:
        return None
    out: list[str] = []

    def spell(state: int, prefix: bytes) -> None:
        if dfa.accepting[state]:
            out.append(prefix.decode("utf-8", "surrogatepass"))
        for (lo, hi), target in zip(ranges[ptr[state]:ptr[state + 1]].tolist(),
                                    nxt[ptr[state]:ptr[state + 1]].tolist()):
            for byte in range(lo, hi + 1):
                spell(target, prefix + bytes([byte]))

    spell(1, b"")
    return out


def _looks_at_rest(arg) -> bool:
    """Whether a group or branch holds a lookahead or an anchor outside repetitions (then
    its language depends on the text that follows it)."""
    stack = [arg]
    while stack:
        value = stack.pop()
        if isinstance(value, (list, tuple, P.SubPattern)):
            for entry in value:
                if isinstance(entry, tuple) and len(entry) == 2 and \
                        entry[0] in (C.ASSERT, C.ASSERT_NOT, C.AT):
                    return True
                if isinstance(entry, tuple) and len(entry) == 2 and \
                        entry[0] in (C.BRANCH, C.SUBPATTERN):
                    stack.append(entry[1])
                elif isinstance(entry, (list, P.SubPattern)):
                    stack.append(entry)
    return False


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
    for i, _token, in_class in regex_tokens(pattern):
        if not in_class and pattern.startswith(needles, i):
            return i
    return 0


def regex_tokens(pattern: str, ecma: bool = False) -> Iterator[tuple[int, str, bool]]:
    """The pattern cut into `(index, token, in_class)` without parsing it, where a token is an
    escape (a backslash and the character after it; in ECMA-262 syntax also `\\cX` and
    `\\u{...}`), the opening of a character class (`[` or `[^`, with a first `]`, which Python
    reads as a member; ECMA-262 reads `[]` and `[^]` as whole classes), or one character;
    `in_class` says whether the token lies inside a class (its closing `]` does)."""
    i, in_class, n = 0, False, len(pattern)
    while i < n:
        ch = pattern[i]
        end = i + 1
        if ch == "\\":
            end = i + 2
            if ecma and pattern.startswith("c", i + 1) and i + 2 < n and pattern[i + 2].isalpha():
                end = i + 3
            elif ecma and pattern.startswith("u{", i + 1):
                close = pattern.find("}", i + 3)
                end = n if close < 0 else close + 1
            yield i, pattern[i:end], in_class
        elif in_class:
            in_class = ch != "]"
            yield i, ch, True
        elif ch == "[":
            end += pattern.startswith("^", end)
            first_bracket = pattern.startswith("]", end)
            end += first_bracket
            in_class = not (ecma and first_bracket)
            yield i, pattern[i:end], False
        else:
            yield i, ch, False
        i = end
