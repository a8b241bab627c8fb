"""The vocabulary value: `Tokenizer` (exact bytes per token id, EOS ids) and its fingerprint.

Also `Vocab`, what a loader extracts from a file before EOS ids are settled, and `END_MARKERS`,
the texts of special tokens that end generation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from grammarc.errors import TokenizerError

_FINGERPRINT_MAGIC = b"grammarc.tokenizer.v1\n"
_NONE_LENGTH = 0xFFFFFFFF

#: Texts of special tokens that end generation (the kind of list llama.cpp uses).
END_MARKERS = frozenset({
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|end|>",
    "</s>", "<eos>", "<end_of_turn>", "<|return|>", "<EOT>", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
})


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


class Vocab:
    """What a loader extracts from a file: bytes per id, detected EOS ids, special texts."""

    def __init__(self, tokens: list[bytes | None], eos: list[int],
                 special_texts: dict[int, str]) -> None:
        self.tokens = tokens
        self.eos = eos
        self.special_texts = special_texts
