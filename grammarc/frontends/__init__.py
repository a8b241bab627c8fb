"""Front ends: one module per input language, each turning source text into an expression tree.

`KINDS` lists every grammar kind grammarc knows; `kind_for_path` picks one from a file name.
"""

from __future__ import annotations

import importlib
import re
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from ..automaton import DEFAULT_MAX_STATES
from ..automaton.expr import Expr, byte_string
from ..errors import GrammarcError, GrammarcNotice, GrammarError

KINDS = ("regex", "json-schema", "lark", "gbnf", "fsm", "structural-tag")

# longest suffixes first, so ".fsm.json" wins over ".json"
_SUFFIXES = (
    (".fsm.yaml", "fsm"), (".fsm.yml", "fsm"), (".fsm.json", "fsm"),
    (".schema.json", "json-schema"), (".tag.json", "structural-tag"), (".json", "json-schema"),
    (".regex", "regex"), (".lark", "lark"), (".gbnf", "gbnf"),
)


def _warn(message: str) -> None:
    warnings.warn(message, GrammarcNotice, stacklevel=3)


@dataclass(frozen=True)
class FrontendOptions:
    """Options of the front ends; each front end reads the ones that apply to it."""

    max_depth: int = 4                 # recursion (JSON Schema $ref, Lark/GBNF rules) unrolled
    start: str | None = None           # start rule (Lark, GBNF); None: the grammar's own
    whitespace: str = "default"        # JSON Schema: default, compact, flexible or a regex
    additional_properties: bool = True  # JSON Schema: False forbids undeclared properties
    lenient: bool = False              # JSON Schema: ignore unsupported keywords, with a notice
    integer_fractions: bool = False    # JSON Schema: "type": "integer" also as 34.0 (draft 6+)
    key_order: str = "schema"          # JSON Schema: object keys in the schema's order, or any
    max_states: int = DEFAULT_MAX_STATES  # bound of every automaton built, intermediate ones too
    # JSON Schema in any key order: the objects at these JSON pointers keep the schema's order
    # (the front end's own choice where any order would tell too much apart, made again from
    # the schema and the other options at each compile: `json_schema.schema._compiled`)
    schema_order_at: frozenset[str] = frozenset()
    notice: Callable[[str], None] = field(default=_warn, compare=False)  # where notices go
    # the bytes of a token a grammar names (`tokenizers.special`); set by the compiler
    tokens: Callable[[int | str], bytes] | None = field(default=None, compare=False)

    # the smallest value of each integer option (command line, manifest and Python alike)
    MINIMUMS: ClassVar[dict[str, int]] = {"max_depth": 0, "max_states": 2}
    # the values of each option that takes one of a few words
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"key_order": ("schema", "any")}

    def __post_init__(self) -> None:
        for name, minimum in self.MINIMUMS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise GrammarcError(f"{name} must be an integer >= {minimum}, not {value!r}")
        for name, choices in self.CHOICES.items():
            if getattr(self, name) not in choices:
                raise GrammarcError(f"{name} must be one of {', '.join(choices)}, "
                                    f"not {getattr(self, name)!r}")

    def to_metadata(self) -> dict[str, Any]:
        """The options as recorded in an artifact. `key_order` only where it is not the
        default, so that artifacts compiled before it existed stay byte for byte the same
        (and fresh for `grammarc build`); never `schema_order_at`, which a compile derives."""
        return {k: v for k, v in asdict(self).items()
                if k not in ("notice", "tokens", "schema_order_at")
                and not (k == "key_order" and v == "schema")}

    def token(self, spec: int | str) -> Expr:
        """The language of the one token `spec` names (an id, `<[id]>` or the token's text):
        allowed exactly there (see `tokenizers.special`)."""
        if self.tokens is None:
            raise GrammarError(f"token {spec!r}: naming a token needs the tokenizer the "
                               "grammar is compiled for")
        return byte_string(self.tokens(spec))


Parser = Callable[[str, "str | None", FrontendOptions], Expr]


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


# Python refuses to convert integers of more digits between text and int (a guard against
# quadratic time); grammarc takes no number longer than that in any source or manifest.
MAX_DIGITS = 4300
TOO_MANY_DIGITS = f"a number of more than {MAX_DIGITS:,} digits (grammarc's limit)"


def too_many_digits(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it was raised from or while handling, is Python's refusal
    of an int <-> str conversion past its digit limit."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ValueError) and str(exc).startswith("Exceeds the limit"):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def long_number_offset(text: str, start: int = 0) -> int | None:
    """Where the first run of more than MAX_DIGITS digits starts in `text`, if any."""
    found = re.compile(rf"\d{{{MAX_DIGITS + 1},}}").search(text, start)
    return found.start() if found else None


_PARSERS = {  # kind -> (module, function), imported on first use
    "regex": ("regex", "parse_regex"),
    "json-schema": ("json_schema", "parse_json_schema"),
    "lark": ("lark_grammar", "parse_lark"),
    "gbnf": ("gbnf", "parse_gbnf"),
    "fsm": ("fsm", "parse_fsm"),
    "structural-tag": ("structural_tag", "parse_structural_tag"),
}


def parser_for(kind: str) -> Parser:
    """The front end's parse function `(text, source_name, options) -> Expr`."""
    if kind not in _PARSERS:
        raise GrammarcError(f"unknown grammar kind {kind!r}; choose one of {', '.join(KINDS)}")
    module, function = _PARSERS[kind]
    return getattr(importlib.import_module(f".{module}", __name__), function)
