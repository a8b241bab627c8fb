"""Serialisation: the one text grammarc's table for a schema expects for an instance (keys
in the ranking, separators of the whitespace style, canonical numbers), as the CLI's
`canonical` command prints it."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from ...deepcall import call_with_deep_stack
from .. import FrontendOptions
from . import numbers
from .positions import Position
from .resolution import ROOT_URI
from .schema import Compiler

def canonical_dumps(schema: Any, instance: Any, whitespace: str = "default",
                    ensure_ascii: bool = True) -> str:
    """The text grammarc's table for `schema` expects for `instance`: keys in the ranking of
    their position (then the others, sorted), separators of the whitespace style, numbers
    spelled canonically (`numbers.canonical_text`). Runs on the compiler's deep stack:
    schemas and instances nested as deep as compiles are fine."""
    return call_with_deep_stack(lambda: _canonical_dumps(schema, instance, whitespace,
                                                         ensure_ascii))


def _canonical_dumps(schema: Any, instance: Any, whitespace: str, ensure_ascii: bool) -> str:
    compiler = Compiler(schema, FrontendOptions(whitespace=whitespace))
    schema = compiler.root
    comma, colon = (",", ":") if whitespace == "compact" else (", ", ": ")

    def dumps(value: Any, position: Position) -> str:
        if isinstance(value, dict):
            ranking = position.ranking
            keys = sorted(value, key=lambda k: (0, ranking.index(k)) if k in ranking else (1, k))
            return "{" + comma.join(json.dumps(k, ensure_ascii=ensure_ascii) + colon +
                                    dumps(value[k], position.child(k)) for k in keys) + "}"
        if isinstance(value, list):
            return "[" + comma.join(dumps(v, position.items) for v in value) + "]"
        if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return numbers.canonical_text(value, compiler.draft)
        return json.dumps(value, ensure_ascii=ensure_ascii)

    root_ref = compiler.registry.at(schema, ROOT_URI)
    return dumps(instance, Position(compiler, (root_ref,)))
