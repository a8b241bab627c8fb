"""Lark front end: grammars in Lark's syntax, loaded by the `lark` library itself.

Lark reads the grammar (rules, terminals, `%import` of its bundled grammars, `%ignore`,
templates, `?`/`*`/`+`/`[..]`/`~ n..m`) and turns it into plain rules over terminals; this
module compiles those. The language is the set of terminal sequences the start rule derives,
each terminal spelled by a string of its own language, with the `%ignore`d terminals allowed
(any number of times) before, between and after them. A terminal's language is its regex under
grammarc's regex semantics (full match, ASCII classes); Lark's lexers match differently
(longest or lazy match, contextual), so they may reject a few strings of this language. The
terminals of Lark's `common` grammar that rely on lazy matching or lookbehind
(`ESCAPED_STRING`, `C_COMMENT`) are replaced by exact equivalents. Recursion is unrolled as
`rules.expand_rules` describes.

A token of the vocabulary is written by its text, `<|im_end|>`, or by id, `<[151648]>`, as
llguidance writes them (allowed exactly there: `tokenizers.special`); before Lark reads the
grammar, each becomes a terminal of its own whose name has the reference's length, so Lark's
positions stay those of the text.
"""

from __future__ import annotations

import re
from functools import lru_cache

import lark
from lark.exceptions import LarkError, UnexpectedInput

from ..automaton.expr import Expr, MachineSet, alt, concat, repeat
from ..errors import GrammarError
from . import TOO_MANY_DIGITS, FrontendOptions, long_number_offset, too_many_digits
from .regex import huge_repeat_offset, parse_regex
from .rules import Ref, expand_rules

_POSITION = re.compile(r" at line (\d+),? column (\d+)")
try:  # Lark compiles terminals with the `regex` package when it is installed
    import regex as _regex_package

    _REGEX_ERRORS: tuple[type[Exception], ...] = (re.error, _regex_package.error)
except ImportError:  # pragma: no cover - depends on the environment
    _REGEX_ERRORS = (re.error,)


def parse_lark(text: str, source_name: str | None = None,
               options: FrontendOptions | None = None) -> Expr | MachineSet:
    """The expression tree of a Lark grammar's start rule (`start` unless `options.start`)."""
    options = options or FrontendOptions()
    lark_text, token_refs = _token_terminals(text, source_name)
    loaded = _load(lark_text, text, source_name, options.start or "start")
    terminals = {t.name: t for t in loaded.terminals}
    ignored = alt(*(_terminal(terminals[name], text, source_name)
                    for name in loaded.ignore_tokens))
    skip = repeat(ignored, 0, None)
    spelled: dict[str, Expr] = {}  # terminal name -> its language, then what may be ignored

    def symbol(sym) -> Expr:
        if not sym.is_term:
            return Ref(sym.name)
        if sym.name not in spelled:
            if sym.name in token_refs:
                offset, spec = token_refs[sym.name]
                try:
                    token = options.token(spec)
                except GrammarError as exc:
                    raise GrammarError(exc.message, source_name=source_name, text=text,
                                       offset=offset) from None
                spelled[sym.name] = concat(token, skip)
            elif sym.name not in terminals:
                raise GrammarError(f"terminal {sym.name} has no pattern (%declare); grammarc "
                                   "cannot compile it", source_name=source_name)
            else:
                spelled[sym.name] = concat(_terminal(terminals[sym.name], text, source_name),
                                           skip)
        return spelled[sym.name]

    bodies: dict[str, list[Expr]] = {}
    for rule in loaded.rules:
        bodies.setdefault(rule.origin.name, []).append(
            concat(*(symbol(sym) for sym in rule.expansion)))
    rules = {name: alt(*options_) for name, options_ in bodies.items()}
    start = loaded.options.start[0]
    return _skipping(expand_rules(rules, start, options, source_name), skip)


def _skipping(language: Expr | MachineSet, skip: Expr) -> Expr | MachineSet:
    """`language` after the ignored text `skip`, in each of its machine sets and fallbacks."""
    if not isinstance(language, MachineSet):
        return concat(skip, language)
    unrolled, alternative = language.unrolled, language.alternative
    return MachineSet(concat(skip, language.root), language.machines,
                      unrolled and (lambda: _skipping(unrolled(), skip)),
                      alternative and (lambda: _skipping(alternative(), skip)))


_TOKEN_REF = re.compile(r'"(?:\\.|[^"\\])*"i?|/(?:\\.|[^/\\\n])+/[imslux]*|//[^\n]*|'
                        r'(<\[[0-9]+\]>|<[^\s<>\[\]"]+>)')
_BASE36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _token_terminals(text: str, source_name: str | None) -> tuple[str, dict[str, tuple[int, str]]]:
    """The grammar with each token reference (outside strings, regexes and comments) replaced
    by a terminal name of the same length that the grammar does not use (one per distinct
    reference), the terminals defined at the end; and, per name, the offset of the
    reference's first occurrence and its text."""
    refs: dict[str, tuple[int, str]] = {}
    names: dict[str, str] = {}
    used = set(re.findall(r"\w+", text))
    index = 0
    pieces: list[str] = []
    last = 0
    for match in _TOKEN_REF.finditer(text):
        ref = match.group(1)
        if ref is None:
            continue
        if ref not in names:
            while True:
                name = _name(index, len(ref))
                index += 1
                if name is None:
                    raise GrammarError("too many distinct token references of this length",
                                       source_name=source_name, text=text,
                                       offset=match.start(1))
                if name not in used:
                    break
            names[ref] = name
            refs[name] = (match.start(1), ref)
        pieces += [text[last:match.start(1)], names[ref]]
        last = match.end(1)
    if not refs:
        return text, refs
    pieces.append(text[last:])
    definitions = "".join(f'\n{name}: "grammarc token {n}"' for n, name in enumerate(refs))
    return "".join(pieces) + definitions + "\n", refs


def _name(index: int, length: int) -> str | None:
    """The `index`-th terminal name of `length` characters: Z and base-36 digits (None when
    there are fewer names of that length)."""
    digits = []
    for _ in range(length - 1):
        index, digit = divmod(index, 36)
        digits.append(_BASE36[digit])
    return None if index else "Z" + "".join(reversed(digits))


def _load(lark_text: str, text: str, source_name: str | None, start: str) -> lark.Lark:
    """Lark's own loading of the grammar (`lark_text`: `text` with token references as
    terminals), its errors turned into one-line `GrammarError`s that point into `text`."""
    try:
        try:
            return lark.Lark(lark_text, start=start, parser="earley", lexer="dynamic")
        except TypeError as exc:  # Lark's own description of a syntax error failed (its
            # logging formats a parser state with %d) while it matched the error against
            # examples: the syntax error it was describing is the first in the chain
            described = None
            context = exc.__context__
            while context is not None:
                if isinstance(context, UnexpectedInput):
                    described = context
                context = context.__context__
            if described is None:
                raise
            raise described from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        what = f"token {str(token)!r}" if token is not None else "input"
        raise GrammarError(f"invalid Lark grammar: unexpected {what}", source_name=source_name,
                           text=text, offset=exc.pos_in_stream) from None
    except LarkError as exc:
        if too_many_digits(exc):  # a count in `~ N` or in a terminal's regex
            raise GrammarError(f"invalid Lark grammar: {TOO_MANY_DIGITS}",
                               source_name=source_name, text=text,
                               offset=long_number_offset(text)) from None
        message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        if len(exc.args) > 1 and hasattr(exc.args[1], "name"):
            message += f" (terminal {exc.args[1].name})"
        if message == f"Using an undefined rule: NonTerminal({start!r})":
            message = f"the grammar has no rule {start!r} (the start rule; choose another " \
                      "with --start)"
        offset = None
        position = _POSITION.search(message)
        if position:
            offset = _offset(text, int(position.group(1)), int(position.group(2)))
        message = message.splitlines()[0] if message.strip() else message
        message = _POSITION.split(message)[0].rstrip(" :.")
        raise GrammarError(f"invalid Lark grammar: {message}", source_name=source_name,
                           text=text, offset=offset) from None
    except (*_REGEX_ERRORS, OverflowError) as exc:  # a terminal Lark's regex engine rejects
        pattern = getattr(exc, "pattern", None)
        if isinstance(exc, OverflowError):
            offset = huge_repeat_offset(text)
        else:
            found = text.find(f"/{pattern}/") if isinstance(pattern, str) else -1
            offset = found if found >= 0 else None
        raise GrammarError(f"invalid Lark grammar: invalid regex: {getattr(exc, 'msg', exc)}",
                           source_name=source_name, text=text, offset=offset) from None
    except OSError as exc:  # an %import of a grammar file Lark cannot find
        raise GrammarError(f"invalid Lark grammar: cannot %import {exc.filename or exc}: only "
                           "Lark's bundled grammars (common, unicode, ...) can be imported",
                           source_name=source_name) from None


def _offset(text: str, line: int, column: int) -> int:
    """Character offset of a 1-based line and column."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
    return start + column - 1


def _terminal(terminal, text: str, source_name: str | None) -> Expr:
    """A terminal's language, through the regex front end; errors point into the grammar."""
    pattern = terminal.pattern
    value = pattern.to_regexp()
    value = _exact_common().get(value, value)
    try:
        return parse_regex(value, after=None)
    except GrammarError as exc:
        offset = _terminal_offset(terminal, text)
        raw = getattr(pattern, "raw", None)
        if raw and raw.startswith("/") and exc.offset is not None:
            found = text.find(raw, offset or 0)
            if found >= 0:
                offset = found + 1 + max(exc.offset - 4 * len(pattern.flags), 0)
        name = "" if terminal.name.startswith("__") else f" {terminal.name}"
        raise GrammarError(f"terminal{name}: {exc.message}", source_name=source_name,
                           text=text, offset=offset) from None


def _terminal_offset(terminal, text: str) -> int | None:
    """Where a named terminal is defined (None for Lark's anonymous or imported ones)."""
    found = re.search(rf"(?m)^[ \t]*{re.escape(terminal.name)}\b", text)
    return found.start() if found else None


@lru_cache(maxsize=1)
def _exact_common() -> dict[str, str]:
    """Regexes of Lark's `common` terminals that rely on lazy matching or lookbehind, as Lark
    writes them, mapped to regexes of the strings Lark's lexer actually matches."""
    loaded = lark.Lark("%import common (ESCAPED_STRING, C_COMMENT)\n"
                       "start: ESCAPED_STRING C_COMMENT\n", lexer="dynamic")
    patterns = {t.name: t.pattern.to_regexp() for t in loaded.terminals}
    return {patterns["ESCAPED_STRING"]: r'"(?:[^"\\\n]|\\[^\n])*"',
            patterns["C_COMMENT"]: r"/\*(?:[^*]|\*+[^*/])*\*+/"}
