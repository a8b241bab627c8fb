"""Integrations with generation loops.

`GrammarProcessor` (numpy or torch, imports neither itself) masks logits with the
Outlines-style call `process_logits(input_ids, logits)`, for any loop: llama-cpp-python's
`logits_processor`, a custom sampler. `grammarc.integrations.transformers` wraps it as a
transformers `LogitsProcessor`; `grammarc.integrations.hf` loads models for `grammarc generate`.
"""

from .processor import GrammarProcessor

__all__ = ["GrammarProcessor"]
