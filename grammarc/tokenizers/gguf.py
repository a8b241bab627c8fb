"""GGUF files: a small metadata reader, and the vocabulary a GGUF file's tokenizer defines.

Reads ``tokenizer.ggml.model`` ``gpt2`` (byte-level) and ``llama`` (SentencePiece) tokenizers;
USER_DEFINED tokens are their literal UTF-8 text, as in llama.cpp.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grammarc.errors import TokenizerError

from .pieces import byte_level, byte_token
from .vocabulary import END_MARKERS, Vocab

# GGUF tokenizer.ggml.token_type values.
_GGUF_NORMAL, _GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_BYTE = 1, 3, 4, 6


def vocab_from_gguf(path: Path) -> Vocab:
    """The vocabulary of a GGUF file, decoded the way llama.cpp's ``token_to_piece`` does."""
    keys = ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
            *(f"tokenizer.ggml.{k}_token_id" for k in ("eos", "eot", "eom")))
    try:
        fields = read_gguf_metadata(path, keys)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"cannot read GGUF file {path}: {exc}") from None
    model = fields.get("tokenizer.ggml.model")
    texts: list[str] | None = fields.get("tokenizer.ggml.tokens")
    types: list[int] | None = fields.get("tokenizer.ggml.token_type")
    eos = [int(v) for k in ("eos", "eot", "eom")
           if (v := fields.get(f"tokenizer.ggml.{k}_token_id")) is not None]
    if texts is None:
        raise TokenizerError(f"GGUF file {path} has no tokenizer (tokenizer.ggml.tokens)")
    if types is None:
        types = [_GGUF_NORMAL] * len(texts)
    if len(types) != len(texts):
        raise TokenizerError(f"GGUF file {path} has {len(texts)} tokens but {len(types)} "
                             "token types")
    if model == "gpt2":
        normal = byte_level
    elif model == "llama":
        def normal(text: str) -> bytes:
            return text.replace("▁", " ").encode("utf-8")
    else:
        raise TokenizerError(f"GGUF file {path} has tokenizer model {model!r}; "
                             "grammarc reads 'gpt2' and 'llama' tokenizers")
    tokens: list[bytes | None] = []
    special_texts: dict[int, str] = {}
    for i, (text, kind) in enumerate(zip(texts, types)):
        if kind == _GGUF_NORMAL:
            tokens.append(normal(text))
        elif kind == _GGUF_USER_DEFINED:
            tokens.append(text.encode("utf-8"))
        elif kind == _GGUF_BYTE:
            tokens.append(byte_token(text, str(path)))
        else:  # UNKNOWN, CONTROL, UNUSED and undefined types: llama.cpp never prints them
            tokens.append(None)
            special_texts[i] = text
            if kind == _GGUF_CONTROL and text in END_MARKERS:
                eos.append(i)
    return Vocab(tokens, eos, special_texts)


# GGUF metadata value types (the GGUF specification): numbers by struct format, strings, and
# arrays of one item type
_GGUF_NUMBERS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_TRUNCATED = "the file ends inside its metadata"


def read_gguf_metadata(path: Path, keys: Iterable[str]) -> dict[str, Any]:
    """The values of `keys` found in a GGUF file's metadata (numbers, strings, lists).

    Written here because the gguf library decodes every metadata element as its own numpy
    view (3 s for SmolLM2's 49,152 tokens and their merges); this reads the key-value section
    once through a memory map, decoding only the wanted values. Raises ValueError for a file
    that is not GGUF version 2 or 3 (little-endian) or ends early.
    """
    wanted = set(keys)
    found: dict[str, Any] = {}
    with open(path, "rb") as file:
        if os.fstat(file.fileno()).st_size < 24 or file.read(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                version, _, count = struct.unpack_from("<IQQ", data, 4)
                if version not in (2, 3):
                    raise ValueError(f"GGUF version {version} is not supported "
                                     "(2 or 3, little-endian)")
                pos = 24
                for _ in range(count):
                    key, pos = _gguf_value(data, pos, _GGUF_STRING, True)
                    kind, = struct.unpack_from("<I", data, pos)
                    value, pos = _gguf_value(data, pos + 4, kind, key in wanted)
                    if key in wanted:
                        found[key] = value
                        if len(found) == len(wanted):
                            break
            except struct.error:
                raise ValueError(_GGUF_TRUNCATED) from None
    return found


def _gguf_value(data: mmap.mmap, pos: int, kind: int, keep: bool) -> tuple[Any, int]:
    """The value of type `kind` at `pos` (None unless `keep`) and the position after it."""
    if kind in _GGUF_NUMBERS:
        value, = struct.unpack_from("<" + _GGUF_NUMBERS[kind], data, pos)
        return value, pos + struct.calcsize(_GGUF_NUMBERS[kind])
    if kind == _GGUF_STRING:
        length, = struct.unpack_from("<Q", data, pos)
        end = pos + 8 + length
        if end > len(data):
            raise ValueError(_GGUF_TRUNCATED)
        return (data[pos + 8:end].decode("utf-8") if keep else None), end
    if kind != _GGUF_ARRAY:
        raise ValueError(f"unknown GGUF value type {kind}")
    item_kind, length = struct.unpack_from("<IQ", data, pos)
    pos += 12
    if item_kind in _GGUF_NUMBERS:
        end = pos + length * struct.calcsize(_GGUF_NUMBERS[item_kind])
        if end > len(data):
            raise ValueError(_GGUF_TRUNCATED)
        items = struct.unpack_from(f"<{length}{_GGUF_NUMBERS[item_kind]}", data, pos) \
            if keep else None
        return (list(items) if keep else None), end
    values = []
    for _ in range(length):  # strings or arrays: each takes at least 8 bytes, so bounded
        item, pos = _gguf_value(data, pos, item_kind, keep)
        if keep:
            values.append(item)
    return (values if keep else None), pos
