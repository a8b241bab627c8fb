"""Front ends: one module per input language, each turning source text into an expression tree.

`KINDS` lists every grammar kind grammarc knows; `kind_for_path` picks one from a file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..automaton.expr import Expr
from ..errors import GrammarcError

KINDS = ("regex", "json-schema", "lark", "gbnf", "fsm")

# longest suffixes first, so ".fsm.json" wins over ".json"
_SUFFIXES = (
    (".fsm.yaml", "fsm"), (".fsm.yml", "fsm"), (".fsm.json", "fsm"),
    (".schema.json", "json-schema"), (".json", "json-schema"),
    (".regex", "regex"), (".lark", "lark"), (".gbnf", "gbnf"),
)


def kind_for_path(path: str | Path) -> str | None:
    """The grammar kind a file name implies, or None."""
    name = Path(path).name.lower()
    for suffix, kind in _SUFFIXES:
        if name.endswith(suffix):
            return kind
    return None


def grammar_stem(path: str | Path) -> str:
    """The file name without its grammar suffix: `person.schema.json` -> `person`."""
    name = Path(path).name
    for suffix, _kind in _SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem


def source_text(kind: str, text: str) -> str:
    """The source as the front end reads it (a regex file's trailing newline is not part of it)."""
    if kind == "regex":
        return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    return text


def parser_for(kind: str) -> Callable[[str, str | None], Expr]:
    """The front end's parse function `(text, source_name) -> Expr`."""
    if kind not in KINDS:
        raise GrammarcError(f"unknown grammar kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "regex":
        from .regex import parse_regex

        return parse_regex
    raise GrammarcError(f"the {kind} front end is not available in this version of grammarc "
                        "(supported now: regex)")
