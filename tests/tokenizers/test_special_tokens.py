"""Tokens named in GBNF and Lark grammars (`<|im_start|>`, `<[5]>`) on SmolLM2: at every state
of random walks the whole vocabulary mask equals an independent oracle's (the grammar with each
named token replaced by a placeholder byte that UTF-8 never holds, read by the `regex` module's
partial matching), no other control token is ever allowed, the same text typed as ordinary
tokens follows the text rules, errors are one line with a position, and the artifact records
the tokens, reloads and verifies."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import regex
from grammar_oracles import greedy_tokens
from helpers import assert_clean_error, compile_file, reloaded, run_cli

import grammarc
from grammarc.errors import GrammarError
from grammarc.frontends.gbnf import parse_gbnf
from grammarc.frontends.lark_grammar import parse_lark

# ids 1 <|im_start|>, 2 <|im_end|>, 5 <file_sep>; each named token's placeholder byte
PLACEHOLDER = {1: b"\xf8", 2: b"\xf9", 5: b"\xfa"}
MESSAGE = rb"(?:[a-z ]+|<\|im_start\|>)"
# <|im_end|> is an end token of SmolLM2: these grammars are compiled with EOS <|endoftext|> only
GRAMMARS = {
    "gbnf": ('root ::= <|im_start|> "user\\n" msg (<[5]> msg)* <|im_end|> ("<|im_end|>" | "!")?\n'
             'msg ::= [a-z ]+ | "<|im_start|>"\n',
             rb"\xf8user\n" + MESSAGE + rb"(?:\xfa" + MESSAGE + rb")*\xf9(?:<\|im_end\|>|!)?"),
    "lark": ('start: <[1]> "user\\n" MSG (<file_sep> MSG)* <|im_end|> END?\n'
             'MSG: /[a-z ]+/ | "<|im_start|>"\n'
             'END: "<|im_end|>" | /<[a-z]>/  // <|im_end|> in a comment is no token\n',
             rb"\xf8user\n" + MESSAGE + rb"(?:\xfa" + MESSAGE + rb")*\xf9(?:<\|im_end\|>|<[a-z]>)?"),
}


@pytest.fixture(scope="module")
def tok(smollm2):
    """SmolLM2 with <|endoftext|> as its only end token, so that <|im_end|> can be named."""
    return smollm2.with_eos([0])


@pytest.fixture(scope="module", params=sorted(GRAMMARS))
def case(request, tok):
    text, pattern = GRAMMARS[request.param]
    return request.param, grammarc.compile(text, tok, kind=request.param), regex.compile(pattern)


class Oracle:
    """The tokens allowed after a prefix (bytes, named tokens as placeholders), by partial
    matching of the placeholder pattern: a text token where its bytes continue a prefix of the
    language, a named token where its placeholder does, EOS where the prefix is complete."""

    def __init__(self, tokenizer, pattern: regex.Pattern) -> None:
        self.pattern = pattern
        self.eos = list(tokenizer.eos_token_ids)
        self.size = tokenizer.vocab_size
        marks = set(b"".join(PLACEHOLDER.values()))
        self.by_first: dict[int, list[tuple[int, bytes]]] = {}
        for i, data in enumerate(tokenizer.token_bytes):
            if i not in PLACEHOLDER and data and not marks & set(data):
                self.by_first.setdefault(data[0], []).append((i, data))

    def mask(self, prefix: bytes) -> np.ndarray:
        out = np.zeros(self.size, bool)
        for first, tokens in self.by_first.items():
            if self.pattern.fullmatch(prefix + bytes([first]), partial=True):
                for i, data in tokens:
                    out[i] = bool(self.pattern.fullmatch(prefix + data, partial=True))
        for i, mark in PLACEHOLDER.items():
            out[i] = bool(self.pattern.fullmatch(prefix + mark, partial=True))
        out[self.eos] = bool(self.pattern.fullmatch(prefix))
        return out


def spelled(tokenizer, tokens: list[int]) -> bytes:
    """The tokens' bytes with named tokens as their placeholders."""
    return b"".join(PLACEHOLDER.get(t) or tokenizer.token_bytes[t] for t in tokens)


def test_masks_over_the_whole_vocabulary_match_the_placeholder_oracle(case, tok):
    name, grammar, pattern = case
    oracle = Oracle(tok, pattern)
    control = {i for i, data in enumerate(tok.token_bytes) if data is None}
    rng = random.Random(39)
    states = 0
    for _ in range(3):
        state, tokens = grammar.initial_state, []
        for _ in range(8):
            mask = grammar.mask(state)
            expected = oracle.mask(spelled(tok, tokens))
            assert np.array_equal(mask, expected), (name, tokens, np.flatnonzero(mask != expected))
            assert set(np.flatnonzero(mask)) & control <= {0, *PLACEHOLDER}
            states += 1
            allowed = [t for t in np.flatnonzero(mask) if t != 0]
            if not allowed or (mask[0] and rng.random() < 0.2):
                break
            named = [t for t in allowed if t in PLACEHOLDER]
            token = rng.choice(named) if named and rng.random() < 0.4 else rng.choice(allowed)
            tokens.append(int(token))
            state = grammar.next_state(state, int(token))
    assert states >= 10


def test_the_text_of_a_token_typed_as_text_follows_the_text_rules(case, tok):
    """`<|im_start|>` as ordinary tokens is refused where the token is named and accepted
    where the grammar's text spells it; the token itself is refused where the text is."""
    _, grammar, pattern = case

    def accepts(parts: list[str | int]) -> bool:
        state = grammar.initial_state
        for part in parts:
            for token in [part] if isinstance(part, int) else greedy_tokens(tok, part):
                state = grammar.next_state(state, token)
        return state != 0 and bool(grammar.mask(state)[0])

    assert accepts([1, "user\nhi", 5, "<|im_start|>", 2, "<|im_end|>"])
    assert accepts([1, "user\n<|im_start|>", 2])
    assert not accepts(["<|im_start|>user\nhi", 2])
    assert not accepts([1, "user\nhi<file_sep>hi", 2])
    assert not accepts([1, "user\n", 1, 2])
    assert not accepts([1, "user\nhi", 2, 2])
    assert not grammar.matches("<|im_start|>user\nhi<|im_end|>")
    assert pattern.fullmatch(b"\xf8user\n<|im_start|>\xf9")


def test_the_artifact_records_the_named_tokens_and_reloads(case, tok, tmp_path: Path):
    _, grammar, _ = case
    assert grammar.metadata["special_tokens"] == {"1": "<|im_start|>", "2": "<|im_end|>",
                                                  "5": "<file_sep>"}
    again = reloaded(grammar, tmp_path / "g.safetensors")
    assert again.metadata["special_tokens"] == grammar.metadata["special_tokens"]
    state = again.initial_state
    for token in [1, *greedy_tokens(tok, "user\nab"), 5, *greedy_tokens(tok, "c"), 2]:
        assert np.array_equal(again.mask(state), grammar.mask(state))
        state, before = again.next_state(state, token), state
        assert state == grammar.next_state(before, token) != 0
    assert again.is_accepting(state)


def test_an_artifact_without_named_tokens_records_none(smollm2):
    grammar = grammarc.compile('root ::= "<|im_start|>" [a-z]\n', smollm2, kind="gbnf")
    assert "special_tokens" not in grammar.metadata
    assert not grammar.mask(grammar.initial_state)[1]


def test_verify_passes_for_an_artifact_naming_tokens(tmp_path: Path):
    source = 'root ::= <|im_start|> "hi" <[5]>?\n'
    result = compile_file(tmp_path, "t.gbnf", source)
    assert result.returncode == 0, result.stderr
    result = run_cli("verify", "out.safetensors", "--tokenizer", "smollm2", "--source", "t.gbnf",
                     cwd=tmp_path, seconds=60)
    assert result.returncode == 0, result.stdout + result.stderr
    inspected = run_cli("inspect", "out.safetensors", cwd=tmp_path, seconds=60)
    assert inspected.returncode == 0, inspected.stderr


@pytest.mark.parametrize("suffix,template", [
    (".gbnf", 'root ::= "a" x\nx ::= "b" {ref} "c"\n'),
    (".lark", 'start: "a" x\nx: "b" {ref} "c"\n'),
])
@pytest.mark.parametrize("ref,message", [
    ("<|no_such_token|>", "has no token '<|no_such_token|>'"),
    ("<[49152]>", "token id 49152 is out of range"),
    ("<[99999999]>", "token id 99999999 is out of range"),
    ("<|endoftext|>", "is an end-of-sequence token"),
    ("<|im_end|>", "is an end-of-sequence token"),
])
def test_errors_name_the_line_and_column(tmp_path: Path, suffix, template, ref, message):
    text = template.format(ref=ref)
    result = compile_file(tmp_path, "g" + suffix, text)
    assert_clean_error(result, message)
    column = text.splitlines()[1].index(ref) + 1
    assert f"g{suffix}:2:{column}:" in result.stderr, result.stderr


@pytest.mark.parametrize("parse,text", [
    (parse_gbnf, 'root ::= "a" <|im_start|>\n'),
    (parse_lark, 'start: "a" <[1]>\n'),
])
def test_a_token_without_a_tokenizer_is_an_error_with_a_position(parse, text):
    with pytest.raises(GrammarError) as error:
        parse(text, "g")
    column = text.index("<") + 1
    assert "needs the tokenizer" in str(error.value) and f"g:1:{column}:" in str(error.value)
    assert "\n" not in str(error.value)


def test_lark_token_references_never_take_a_terminal_name_of_the_grammar(smollm2):
    """A reference becomes a terminal of its own name; a grammar's own terminal `Z0000` (the
    first such name for `<[5]>`) keeps its meaning, and a token named twice is one terminal."""
    grammar = grammarc.compile('start: <[5]> Z0000 <[5]>\nZ0000: "x"\n', smollm2, kind="lark")
    state = grammar.initial_state
    for token in [5, *greedy_tokens(smollm2, "x"), 5]:
        state = grammar.next_state(state, token)
    assert state and grammar.is_accepting(state)
    assert grammar.metadata["special_tokens"] == {"5": "<file_sep>"}
