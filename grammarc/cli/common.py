"""Helpers the commands share: JSON output, reading TEXT or stdin, token ids, the tokenizer of an
artifact, and one way of showing values and differences."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..errors import TokenizerError
from ..runtime import Grammar, check_tokenizer


def echo_json(value: Any) -> None:
    """Print `value` as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def read_text_argument(text: str) -> bytes:
    """The bytes of a TEXT argument, or of stdin when it is `-` (kept exactly as given)."""
    if text == "-":
        return sys.stdin.buffer.read()
    return text.encode("utf-8", errors="surrogateescape")


def parse_ids(text: str | None) -> list[int] | None:
    """Comma-separated token ids, or a usage error."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated token ids, got {text!r}") from None


def artifact_tokenizer(grammar: Grammar, spec: str | None, artifact_name: str):
    """The tokenizer `spec`, else the one named in the artifact, checked against the artifact's
    fingerprint."""
    from ..tokenizers import load_tokenizer

    named = grammar.metadata["tokenizer"]["name"]
    try:
        tokenizer = load_tokenizer(spec or named, eos_token_ids=grammar.eos_token_ids)
    except TokenizerError as exc:
        if spec is not None:
            raise
        raise TokenizerError(f"{exc} (the tokenizer named in {artifact_name}); "
                             "pass --tokenizer") from None
    check_tokenizer(grammar, tokenizer, artifact_name)
    return tokenizer


def short(value: Any) -> str:
    """A value for one line of a report: hex digests cut to 12 characters, strings quoted."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "…"
    return json.dumps(value)


def flat_differences(recorded: dict[str, Any], wanted: dict[str, Any],
                     prefix: str = "") -> list[tuple[str, Any, Any]]:
    """`(dotted key, recorded value, wanted value)` for each key of `wanted` whose value differs,
    looking into nested objects (`options.max_depth`, `tokenizer.fingerprint`)."""
    out = []
    for key, value in wanted.items():
        have = recorded.get(key)
        if isinstance(value, dict) and isinstance(have, dict):
            out += flat_differences(have, value, f"{prefix}{key}.")
        elif have != value:
            out.append((f"{prefix}{key}", have, value))
    return out


def describe_difference(field: str, recorded: Any, wanted: Any, wanted_label: str) -> str:
    """`field: artifact X, <wanted_label> Y` for a report line."""
    return f"{field}: artifact {short(recorded)}, {wanted_label} {short(wanted)}"


def shown_text(data: bytes) -> str:
    """Decoded bytes as they are when that is unambiguous (printable, not empty, no space at
    either end, no leading quote), else as a Python string literal."""
    text = data.decode("utf-8", errors="backslashreplace")
    plain = text.isprintable() and text.strip() == text and text[:1] not in ("", "'", '"')
    return text if plain else repr(text)
