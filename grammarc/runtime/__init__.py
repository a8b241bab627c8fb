"""The runtime: load a compiled artifact and mask logits. Needs numpy (and safetensors for
`.safetensors` files); never imports lark, tokenizers, torch or the compiled core itself."""

from .calls import CallGrammar, CallState
from .bitmask import apply_bitmask, bitmask_width, unpack_bitmask
from .grammar import Forced, Grammar, check_tokenizer, tokenizer_mismatches
from .loading import load
from .matcher import Matcher

__all__ = ["CallGrammar", "CallState", "Forced", "Grammar", "Matcher", "apply_bitmask",
           "bitmask_width", "check_tokenizer", "load", "tokenizer_mismatches", "unpack_bitmask"]
