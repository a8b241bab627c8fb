"""The runtime: load a compiled artifact and mask logits. Needs numpy (and safetensors for
`.safetensors` files); never imports lark, interegular, tokenizers, numba or torch itself."""

from .grammar import Grammar, check_tokenizer, load, tokenizer_mismatches

__all__ = ["Grammar", "check_tokenizer", "load", "tokenizer_mismatches"]
