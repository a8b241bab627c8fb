"""Token texts to bytes, shared by the GGUF and tokenizer.json loaders.

GPT-2's byte-level alphabet (each byte drawn as a printable character) and ``<0xNN>`` byte
tokens (SentencePiece byte fallback, GGUF BYTE tokens).
"""

from __future__ import annotations

import re

from grammarc.errors import TokenizerError

#: A byte token's text, ``<0xNN>``, as UTF-8 bytes.
BYTE_TOKEN = re.compile(rb"<0x([0-9A-Fa-f]{2})>")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    extra = (b for b in range(256) if b not in printable)
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + n) for n, b in enumerate(extra)})
    return table


_BYTE_LEVEL_CHARS = {c: b for b, c in _bytes_to_unicode().items()}


def byte_level(text: str) -> bytes:
    """Bytes of a byte-level BPE token; text outside the byte alphabet is literal UTF-8."""
    try:
        return bytes(_BYTE_LEVEL_CHARS[c] for c in text)
    except KeyError:  # the tokenizers ByteLevel decoder keeps such tokens as they are
        return text.encode("utf-8")


def byte_token(text: str, where: str) -> bytes:
    """The byte of a ``<0xNN>`` token; `where` names the file in the error for another text."""
    match = BYTE_TOKEN.fullmatch(text.encode("utf-8"))
    if match is None:
        raise TokenizerError(f"{where}: byte token {text!r} is not of the form <0xNN>")
    return bytes([int(match.group(1), 16)])
