"""Tokens named in a grammar: special and control tokens as terminals.

A grammar may name a token of the vocabulary itself (`<|im_end|>` by its text, `<[151648]>` by
id, `{"type": "token"}` in a structural tag). Such a token is allowed exactly where the grammar
names it, and nowhere else; the same characters typed as ordinary text follow the text rules.

At byte level a named token is spelled `SPECIAL_PREFIX` (0xFE, a byte that never occurs in
UTF-8 text nor in a call code) followed by its id in four bytes 0x80 | six bits, high bits
first. For the alignment the vocabulary is seen with each named token spelled so and every
other token holding the byte 0xFE left out (such a token cannot be part of UTF-8 text, so no
text rule allows it): no sequence of other tokens can spell a named token's bytes, and the
named token spells nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from grammarc.errors import GrammarError

from .vocabulary import Tokenizer

SPECIAL_PREFIX = 0xFE
_DIGITS = 4  # six bits each: ids below 2**24
MAX_TOKEN_ID = (1 << (6 * _DIGITS)) - 1
#: `<[123]>`: a token by id, as llguidance writes it
TOKEN_BY_ID = re.compile(r"<\[(\d+)\]>")


def special_token_bytes(token_id: int) -> bytes:
    """The bytes that stand for token `token_id` where a grammar names it."""
    if not 0 <= token_id <= MAX_TOKEN_ID:
        raise ValueError(f"token id {token_id} is out of range")
    digits = [(token_id >> (6 * k)) & 0x3F for k in reversed(range(_DIGITS))]
    return bytes([SPECIAL_PREFIX, *(0x80 | d for d in digits)])


def aligned_token_bytes(tokenizer: Tokenizer,
                        named: Iterable[int]) -> tuple[bytes | None, ...]:
    """The vocabulary as the aligner sees it for a grammar naming the tokens `named`."""
    named = set(named)
    return tuple(special_token_bytes(i) if i in named
                 else None if data is not None and SPECIAL_PREFIX in data else data
                 for i, data in enumerate(tokenizer.token_bytes))


class TokenNames:
    """Resolves the tokens a grammar names against one tokenizer and records them.

    `terminal(spec)` returns the bytes of the named token for `spec`: an int id, the text
    `<[id]>`, or a token's own text (a special token's name such as `<|im_end|>`, or the text
    of an ordinary token such as `<think>`). `named` maps each id named so far to its text.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.named: dict[int, str] = {}
        self._by_text: dict[str, list[int]] | None = None

    def terminal(self, spec: int | str) -> bytes:
        token_id = self.resolve(spec)
        if token_id in self.tokenizer.eos_token_ids:
            raise GrammarError(f"token {spec!r} (id {token_id}) is an end-of-sequence token: "
                               "it ends the text where the grammar may end and cannot be "
                               "named inside it (choose other end tokens with --eos)")
        self.named[token_id] = self.tokenizer.token_text(token_id)
        return special_token_bytes(token_id)

    def resolve(self, spec: int | str) -> int:
        """The id of the token `spec` names, or a `GrammarError` saying why there is none."""
        if isinstance(spec, str):
            by_id = TOKEN_BY_ID.fullmatch(spec)
            if by_id:
                spec = int(by_id.group(1))
        if isinstance(spec, bool) or not isinstance(spec, (int, str)):
            raise GrammarError(f"a token is named by its id or its text, not {spec!r}")
        size = self.tokenizer.vocab_size
        if isinstance(spec, int):
            if not 0 <= spec < size:
                raise GrammarError(f"token id {spec} is out of range for {self.tokenizer.name} "
                                   f"(vocabulary size {size})")
            return spec
        ids = self._texts().get(spec, [])
        if not ids:
            raise GrammarError(f"{self.tokenizer.name} has no token {spec!r}")
        if len(ids) > 1:
            raise GrammarError(f"{self.tokenizer.name} has several tokens {spec!r} (ids "
                               f"{', '.join(map(str, ids))}); name one by id, as <[{ids[0]}]>")
        return ids[0]

    def _texts(self) -> dict[str, list[int]]:
        if self._by_text is None:
            texts: dict[str, list[int]] = {}
            for i in range(self.tokenizer.vocab_size):
                texts.setdefault(self.tokenizer.token_text(i), []).append(i)
            self._by_text = texts
        return self._by_text
