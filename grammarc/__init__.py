"""grammarc: compile regexes and grammars into exact token-level tables for constrained decoding.

`grammarc.load` and `Grammar` are the runtime (numpy only). `compile`, `load_tokenizer` and
`Tokenizer` are the compile side; they are imported on first use, so a service that only
loads artifacts never imports the compiler's dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    ArtifactError, BudgetError, GrammarcError, GrammarcNotice, GrammarError, TokenizerError,
)
from .runtime import CallState, Grammar, Matcher, load

if TYPE_CHECKING:
    from .compiler import compile, compile_json_schema, compile_tools
    from .frontends.tool_calls import tool_calls_tag
    from .frontends import FrontendOptions
    from .tokenizers import Tokenizer, load_tokenizer

_COMPILE_SIDE = {
    "compile": ("compiler", "compile"),
    "compile_json_schema": ("compiler", "compile_json_schema"),
    "compile_tools": ("compiler", "compile_tools"),
    "tool_calls_tag": ("frontends.tool_calls", "tool_calls_tag"),
    "FrontendOptions": ("frontends", "FrontendOptions"),
    "load_tokenizer": ("tokenizers", "load_tokenizer"),
    "Tokenizer": ("tokenizers", "Tokenizer"),
}


def __getattr__(name: str) -> Any:
    if name in _COMPILE_SIDE:
        import importlib

        module, attr = _COMPILE_SIDE[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grammarc' has no attribute {name!r}")


__all__ = [
    "ArtifactError", "BudgetError", "CallState", "FrontendOptions", "Grammar", "GrammarError",
    "GrammarcError", "GrammarcNotice", "Matcher", "Tokenizer",
    "TokenizerError", "__version__", "compile", "compile_json_schema", "compile_tools", "load",
    "load_tokenizer", "tool_calls_tag",
]
