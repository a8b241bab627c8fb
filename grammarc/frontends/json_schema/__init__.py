"""JSON Schema front end: a schema (drafts 4 to 2020-12) to the language of the JSON texts of
its valid instances. See `schema.py` for the serialisation rules and docs/json-schema.md."""

from __future__ import annotations

import json
from decimal import Decimal

from ...automaton import Expr
from ...automaton.expr import MachineSet
from ...errors import GrammarError
from .. import FrontendOptions
from .schema import canonical_dumps, compile_schema


def parse_json_schema(text: str, source_name: str | None = None,
                      options: FrontendOptions | None = None) -> Expr | MachineSet:
    """The language of a schema given as JSON text."""
    try:
        schema = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise GrammarError(f"invalid JSON: {exc.msg}", source_name=source_name, text=text,
                           offset=exc.pos) from None
    try:
        return compile_schema(schema, options or FrontendOptions())
    except GrammarError as exc:
        if source_name and not str(exc).startswith(source_name):
            raise GrammarError(f"{source_name}: {exc}") from None
        raise


__all__ = ["canonical_dumps", "parse_json_schema"]
