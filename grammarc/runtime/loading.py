"""Loading a compiled grammar: the one place that picks its runtime class, `Grammar` or, for
tables with calls, `CallGrammar`, for an artifact file (`load`) or for the compiler's tables
(`grammar_for`). Numpy only.
"""

from __future__ import annotations

import os
from typing import Any

from ..format.artifact import ArtifactData, decode_table, read_artifact
from ..format.table import TokenTable
from .calls import CallGrammar
from .grammar import Grammar, check_tokenizer


def grammar_for(metadata: dict[str, Any], table: TokenTable) -> Grammar:
    """The grammar of `table` and its artifact `metadata`: a `CallGrammar` when the table
    has call tables, a `Grammar` otherwise."""
    return Grammar(metadata, table) if table.calls is None else CallGrammar(metadata, table)


def grammar_from_artifact(data: ArtifactData) -> Grammar:
    """A grammar from validated artifact content, whatever its layout."""
    meta = {k: v for k, v in data.metadata.items()
            if k not in ("num_classes", "num_rows", "checksum")}
    return grammar_for(meta, decode_table(data))


def load(path: str | os.PathLike, tokenizer=None) -> Grammar:
    """Load an artifact written by `Grammar.save` / `grammarc compile`.

    With `tokenizer` (a `grammarc.Tokenizer` or anything `load_tokenizer` accepts), also check
    that the artifact was compiled for that vocabulary; a mismatch is an `ArtifactError`.
    """
    data = read_artifact(path)
    if tokenizer is not None:  # before any table is built
        check_tokenizer(data, tokenizer, artifact_name=str(path))
    return grammar_from_artifact(data)
