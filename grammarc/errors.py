"""Errors grammarc reports to users: one line, with a position where the input has one.

Every failure caused by the user's input (a grammar, a tokenizer, an artifact, a path) is a
`GrammarcError`; the CLI prints its message and exits with code 1. Anything else is a bug.
This module imports nothing outside the standard library, so the runtime can use it.
"""

from __future__ import annotations


class GrammarcError(Exception):
    """A problem with the user's input, reported as one line (line breaks the input put in
    the message are shown escaped)."""

    def __str__(self) -> str:
        return super().__str__().replace("\r", "\\r").replace("\n", "\\n")


class GrammarError(GrammarcError):
    """A grammar source that is invalid or uses something grammarc cannot compile exactly.

    `line` and `column` are 1-based positions in the source text, when known; `message` and
    `offset` are the message and character offset as given, so that a front end that embeds
    one language in another (a regex inside a grammar file) can report the error at its place
    in the outer file.
    """

    def __init__(self, message: str, *, source_name: str | None = None,
                 text: str | None = None, offset: int | None = None) -> None:
        self.message = message
        self.offset = offset
        self.line: int | None = None
        self.column: int | None = None
        if text is not None and offset is not None:
            self.line, self.column = line_column(text, offset)
        where = source_name or ""
        if self.line is not None:
            where = f"{where}:{self.line}:{self.column}" if where else f"{self.line}:{self.column}"
        super().__init__(f"{where}: {message}" if where else message)


class UnsupportedError(GrammarError):
    """A construct grammarc cannot compile exactly (lookaround, unevaluatedProperties, ...)."""


class EmptyLanguageError(GrammarError):
    """A grammar, or a machine of it, matches no string at all."""


class TooManyStatesError(GrammarError):
    """The automaton grew past the --max-states limit."""


class AmbiguityError(GrammarError):
    """Transitions of a state machine after which the reached state is not decided; `states`
    are the two candidates (a front end locates them in its source)."""

    states: tuple[str, ...] = ()


class TokenizerError(GrammarcError):
    """A tokenizer that cannot be found or read."""


class ArtifactError(GrammarcError):
    """An artifact file that is missing, corrupted, or of an unknown format version."""


class BudgetError(GrammarcError, ValueError):
    """No text of the grammar fits in the number of tokens allowed."""


class GrammarcNotice(UserWarning):
    """Something the user should know about a compiled grammar, e.g. unrolled recursion (a
    warning, not an error: the grammar compiled)."""


def line_column(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based (line, column) of character `offset` in `text`."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column
