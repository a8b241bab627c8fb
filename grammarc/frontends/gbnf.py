"""GBNF front end: llama.cpp's grammar dialect (see llama.cpp's grammars/README.md).

Syntax, as llama.cpp parses it: rules `name ::= alternatives`, one per line (a rule continues
on the next line after `::=`, after `|` and inside parentheses); names of letters, digits and
`-`; string literals `"..."` and character classes `[...]`, `[^...]` with ranges and the
escapes `\\n \\r \\t \\\\ \\" \\[ \\] \\xNN \\uNNNN \\UNNNNNNNN`; `.` for any character; groups,
`|`, `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; `#` comments; a token of the vocabulary by its text,
`<|im_end|>`, or by id, `<[151648]>` (allowed exactly there: `tokenizers.special`). The grammar's
language is that of the `root` rule (or `FrontendOptions.start`), over Unicode code points.
Recursion is unrolled as `rules.expand_rules` describes.

The syntax is parsed by a small Lark grammar; errors name the line and column.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterator

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..automaton.expr import (
    MAX_CODE_POINT, SURROGATES, CharSet, Expr, MachineSet, alt, complement_ranges, concat,
    normalize_ranges, repeat,
)
from ..errors import GrammarError
from . import MAX_DIGITS, TOO_MANY_DIGITS, FrontendOptions
from .rules import Ref, expand_rules

_SYNTAX = r"""
start: _NL? rule*
rule: NAME _DEFINE alternatives _NL
alternatives: sequence (_BAR sequence)*
sequence: item*
item: _atom (QUANTIFIER | BRACES)?
_atom: STRING | CLASS | NAME | ANY | TOKEN | _LPAR alternatives _RPAR

NAME: /[a-zA-Z0-9-]+/
STRING: /"(\\[\s\S]|[^"\\])*"/
CLASS: /\[(\\[\s\S]|[^\]\\])*\]/
ANY: "."
TOKEN: /<\[[0-9]+\]>|<[^\s<>\[\]"]+>/
QUANTIFIER: /[*+?]/
BRACES: /\{[ \t]*\d+[ \t]*(,[ \t]*(\d+[ \t]*)?)?\}/
_DEFINE: "::="
_BAR: "|"
_LPAR: "("
_RPAR: ")"
_NL: /((#[^\n]*)?\r?\n[ \t]*)+/
%ignore /[ \t]+/
"""

_TOKEN_NAMES = {
    "_NL": "end of line", "$END": "end of file", "_DEFINE": "'::='", "_BAR": "'|'",
    "_LPAR": "'('", "_RPAR": "')'", "NAME": "a rule name", "STRING": "a string literal",
    "CLASS": "a character class", "ANY": "'.'", "QUANTIFIER": "a repetition operator",
    "BRACES": "a repetition count", "TOKEN": "a token",
}
_SIMPLE_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Newlines:
    """Lark post-lexer: a newline ends a rule, except after `::=`, after `|` and inside
    parentheses, where it is plain space (as in llama.cpp)."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[lark.Token]) -> Iterator[lark.Token]:
        depth = 0
        previous = None
        for token in stream:
            if token.type == "_NL" and (depth or previous in ("_DEFINE", "_BAR")):
                continue
            if token.type == "_LPAR":
                depth += 1
            elif token.type == "_RPAR":
                depth = max(depth - 1, 0)
            previous = token.type
            yield token


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    return lark.Lark(_SYNTAX, parser="lalr", lexer="contextual", postlex=_Newlines())


def parse_gbnf(text: str, source_name: str | None = None,
               options: FrontendOptions | None = None) -> Expr | MachineSet:
    """The expression tree of a GBNF grammar's start rule (`root` unless `options.start`)."""
    options = options or FrontendOptions()
    builder = _Builder(text, source_name, options)
    try:
        tree = _parser().parse(text if text.endswith("\n") else text + "\n")
    except UnexpectedInput as exc:
        raise builder.syntax_error(exc) from None
    rules: dict[str, Expr] = {}
    defined_at: dict[str, int] = {}
    for rule in tree.children:
        token, body = rule.children
        name = str(token)
        if name in rules:
            line = builder.line_of(defined_at[name])
            raise builder.error(f"rule {name!r} is defined twice (first on line {line})",
                                token.start_pos)
        defined_at[name] = token.start_pos
        rules[name] = builder.alternatives(body)
    for ref in builder.refs:
        if ref.name not in rules:
            raise builder.error(f"undefined rule {ref.name!r}", ref.offset)
    start = options.start or "root"
    if start not in rules:
        raise GrammarError(f"the grammar has no rule {start!r}" +
                           ("" if options.start else " (the start rule; choose another with "
                            "--start)"), source_name=source_name)
    return expand_rules(rules, start, options, source_name)


class _Builder:
    """Parse tree to rule bodies, decoding literals and classes."""

    def __init__(self, text: str, source_name: str | None, options: FrontendOptions) -> None:
        self.text = text
        self.source_name = source_name
        self.options = options
        self.refs: list[Ref] = []

    def error(self, message: str, offset: int) -> GrammarError:
        return GrammarError(message, source_name=self.source_name, text=self.text,
                            offset=offset)

    def line_of(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def syntax_error(self, exc: UnexpectedInput) -> GrammarError:
        if isinstance(exc, UnexpectedCharacters):
            return self.error(f"GBNF syntax error: unexpected character "
                              f"{self.text[exc.pos_in_stream]!r}", exc.pos_in_stream)
        if isinstance(exc, UnexpectedToken):
            token = exc.token
            what = _TOKEN_NAMES.get(token.type, repr(str(token)))
            if token.type in ("NAME", "STRING", "CLASS"):
                what = f"{what} {str(token)!r}"
            expected = sorted({_TOKEN_NAMES.get(t, t) for t in exc.expected})
            hint = f"; expected {' or '.join(expected)}" if len(expected) <= 3 else ""
            offset = len(self.text) if token.type == "$END" else token.start_pos
            return self.error(f"GBNF syntax error: unexpected {what}{hint}", offset)
        return self.error(f"GBNF syntax error: {exc}", len(self.text))

    def alternatives(self, tree: lark.Tree) -> Expr:
        return alt(*(concat(*(self.item(item) for item in seq.children))
                     for seq in tree.children))

    def item(self, tree: lark.Tree) -> Expr:
        atom = self.atom(tree.children[0])
        if len(tree.children) == 1:
            return atom
        op = tree.children[1]
        if op == "*":
            return repeat(atom, 0, None)
        if op == "+":
            return repeat(atom, 1, None)
        if op == "?":
            return repeat(atom, 0, 1)
        lo_text, _, hi_text = op[1:-1].partition(",")
        if max(len(lo_text.strip()), len(hi_text.strip())) > MAX_DIGITS:
            raise self.error(f"repetition count: {TOO_MANY_DIGITS}", op.start_pos)
        lo = int(lo_text)
        hi = lo if "," not in op else int(hi_text) if hi_text.strip() else None
        if hi is not None and hi < lo:
            raise self.error(f"repetition {op} has its maximum below its minimum", op.start_pos)
        return repeat(atom, lo, hi)

    def atom(self, node: lark.Tree | lark.Token) -> Expr:
        if isinstance(node, lark.Tree):
            return self.alternatives(node)
        if node.type == "NAME":
            ref = Ref(str(node), node.start_pos)
            self.refs.append(ref)
            return ref
        if node.type == "ANY":
            return CharSet(normalize_ranges([(0, MAX_CODE_POINT)]))
        if node.type == "TOKEN":
            try:
                return self.options.token(str(node))
            except GrammarError as exc:
                raise self.error(exc.message, node.start_pos) from None
        if node.type == "STRING":
            return concat(*(self.char(cp, offset) for cp, offset in
                            self.chars(node.start_pos + 1, node.end_pos - 1)))
        return self.char_class(node)

    def char(self, cp: int, offset: int) -> CharSet:
        if SURROGATES[0] <= cp <= SURROGATES[1]:
            raise self.error(f"U+{cp:04X} is a surrogate code point, not a character", offset)
        return CharSet(((cp, cp),))

    def char_class(self, token: lark.Token) -> Expr:
        start = token.start_pos + 1
        negate = self.text.startswith("^", start)
        items = list(self.chars(start + negate, token.end_pos - 1))
        ranges = []
        i = 0
        while i < len(items):
            lo, offset = items[i]
            if i + 2 < len(items) and items[i + 1][0] == ord("-"):  # `\-` is no escape
                hi = items[i + 2][0]
                if hi < lo:
                    raise self.error(f"character range {chr(lo)!r}-{chr(hi)!r} is reversed",
                                     offset)
                ranges.append((lo, hi))
                i += 3
            else:
                ranges.append((lo, lo))
                i += 1
        result = normalize_ranges(ranges)
        return CharSet(complement_ranges(result) if negate else result)

    def chars(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """(code point, offset) of each character of text[start:end], escapes decoded."""
        i = start
        while i < end:
            ch = self.text[i]
            if ch != "\\":
                yield ord(ch), i
                i += 1
                continue
            kind = self.text[i + 1] if i + 1 < end else ""
            if kind in _SIMPLE_ESCAPES:
                yield ord(_SIMPLE_ESCAPES[kind]), i
                i += 2
            elif kind in _HEX_ESCAPES:
                digits = self.text[i + 2:i + 2 + _HEX_ESCAPES[kind]]
                if len(digits) != _HEX_ESCAPES[kind] or \
                        any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise self.error(f"\\{kind} needs {_HEX_ESCAPES[kind]} hex digits", i)
                cp = int(digits, 16)
                if cp > MAX_CODE_POINT:
                    raise self.error(f"\\{kind}{digits} is beyond U+10FFFF", i)
                yield cp, i
                i += 2 + len(digits)
            else:
                raise self.error(f"unknown escape \\{kind}", i)
