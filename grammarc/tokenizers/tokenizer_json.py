"""tokenizer.json files: their decoders re-implemented per token, giving each token's exact bytes.

Follows the ``tokenizers`` library's decoders (ByteLevel, Metaspace, WordPiece, Replace,
ByteFallback, Fuse, Strip) applied to one token at a time, and reads the end-of-sequence ids
named by the config files beside a tokenizer.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from grammarc.errors import TokenizerError

from .pieces import BYTE_TOKEN, byte_level
from .vocabulary import END_MARKERS, Vocab


def vocab_from_tokenizer_json(sources: list[Path]) -> Vocab:
    """The vocabulary of the tokenizer.json `sources[0]`; `sources[1:]` are configs naming EOS."""
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
    return Vocab(tokens, eos, special_texts)


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
            transforms.append(lambda b: byte_level(b.decode("utf-8", "replace")))
        elif kind == "ByteFallback":
            transforms.append(lambda b: bytes([int(b[3:5], 16)]) if BYTE_TOKEN.fullmatch(b)
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
