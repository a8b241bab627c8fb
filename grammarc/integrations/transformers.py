"""transformers integration: a `LogitsProcessor` for `model.generate`.

    from grammarc.integrations.transformers import GrammarLogitsProcessor

    processor = GrammarLogitsProcessor(grammar, max_new_tokens=64)
    out = model.generate(**inputs, logits_processor=[processor], max_new_tokens=64,
                         eos_token_id=list(grammar.eos_token_ids))

Works with greedy search, sampling, beam search and batches of left-padded prompts; rows that
finished are padded by `generate` and keep their state.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from .processor import GrammarProcessor


class GrammarLogitsProcessor(GrammarProcessor, LogitsProcessor):
    """`GrammarProcessor` as a transformers `LogitsProcessor`: one instance per `generate` call
    (or `reset()` between calls); pass the same `max_new_tokens` to both for outputs that are
    complete when the budget runs out."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return self.process_logits(input_ids, scores)
