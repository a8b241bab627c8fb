"""The runtime: load a compiled artifact and mask logits. Needs numpy (and safetensors for
`.safetensors` files); never imports lark, tokenizers, torch or the compiled core itself."""

from .grammar import Grammar, check_tokenizer, load, tokenizer_mismatches

__all__ = ["Grammar", "check_tokenizer", "load", "tokenizer_mismatches"]
