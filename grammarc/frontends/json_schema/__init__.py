"""JSON Schema front end: a schema (drafts 4 to 2020-12) to the language of the JSON texts of
its valid instances. See `schema.py` for the serialisation rules and docs/json-schema.md."""

from __future__ import annotations

import json
import re
from typing import Any

from ...automaton import Expr
from ...automaton.expr import MachineSet
from ...errors import GrammarError
from .. import FrontendOptions
from ..json_text import TooLongNumber, bare_word_offset, json_decimal, json_integer
from .positions import any_order_fits
from .resolution import escape_token
from .schema import compile_schema
from .serialisation import canonical_dumps


def parse_json_schema(text: str, source_name: str | None = None,
                      options: FrontendOptions | None = None) -> Expr | MachineSet:
    """The language of a schema given as JSON text."""
    schema = read_json(text, source_name)
    try:
        return compile_schema(schema, options or FrontendOptions())
    except GrammarError as exc:
        if source_name and not str(exc).startswith(source_name):
            raise type(exc)(f"{source_name}: {exc}") from None  # the subtype is kept
        raise


def read_json(text: str, source_name: str | None = None) -> Any:
    """A JSON document as the JSON front ends read it (numbers with a fraction or exponent as
    `Decimal`, none longer than `MAX_DIGITS`), its errors one-line `GrammarError`s with their
    position."""
    try:
        return json.loads(text, parse_int=json_integer, parse_float=json_decimal,
                          parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise GrammarError(f"invalid JSON: {exc.msg}", source_name=source_name, text=text,
                           offset=exc.pos) from None
    except _NotJSON as exc:
        raise GrammarError(f"invalid JSON: {exc.args[0]} is not a JSON value",
                           source_name=source_name, text=text,
                           offset=bare_word_offset(text, exc.args[0])) from None
    except TooLongNumber as exc:
        raise GrammarError(f"invalid JSON: {exc}", source_name=source_name, text=text,
                           offset=bare_word_offset(text, exc.args[0])) from None
    except RecursionError:
        depth, offset = _deepest_bracket(text)
        raise GrammarError(f"invalid JSON: nested too deeply to read ({depth:,} levels)",
                           source_name=source_name, text=text, offset=offset) from None


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})


def largest_unordered_objects(text: str, max_states: int,
                              most: int = 3) -> list[tuple[str, int]]:
    """The schema objects of the document `text` with the most `properties` (two or more)
    among those small enough to take their keys in any order (`any_order_fits`; larger ones
    keep the schema's order, with their own notice): `most` of them, the largest first, as
    (JSON pointer, number of properties). What a user splits when the objects in any key
    order need too many states together."""
    found: list[tuple[int, str]] = []
    todo: list[tuple[Any, str]] = [(read_json(text), "#")]
    while todo:
        node, pointer = todo.pop()
        if isinstance(node, list):
            todo.extend((item, f"{pointer}/{i}") for i, item in enumerate(node))
        elif isinstance(node, dict):
            keys = node.get("properties")
            if isinstance(keys, dict) and len(keys) >= 2 and any_order_fits(list(keys),
                                                                             max_states):
                found.append((len(keys), pointer))
            todo.extend((value, f"{pointer}/{escape_token(str(key))}")
                        for key, value in node.items() if key not in _DATA_KEYWORDS)
    found.sort(key=lambda item: (-item[0], item[1]))
    return [(pointer, count) for count, pointer in found[:most]]


class _NotJSON(ValueError):
    """`NaN`, `Infinity` or `-Infinity` in a schema (Python's `json` accepts them)."""


def _not_json(word: str) -> Any:
    raise _NotJSON(word)


def _deepest_bracket(text: str) -> tuple[int, int]:
    """The deepest nesting of `[` and `{` outside JSON strings, and the offset of the first
    bracket that reaches it."""
    depth = deepest = where = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|([\[{])|([\]}])', text):
        if match.group(1):
            depth += 1
            if depth > deepest:
                deepest, where = depth, match.start()
        elif match.group(2):
            depth -= 1
    return deepest, where


__all__ = ["canonical_dumps", "compile_schema", "largest_unordered_objects",
           "parse_json_schema", "read_json"]
