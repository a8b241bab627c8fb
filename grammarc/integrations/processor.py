"""A logits processor for any generation loop, on numpy arrays or torch tensors.

Imports numpy only; torch is used when the caller hands in torch tensors (and has therefore
imported it). The transformers integration and `grammarc generate` build on this class.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from ..errors import BudgetError
from ..runtime import CallState, Grammar
from ..runtime.arrays import is_torch


class GrammarProcessor:
    """Masks each sequence's logits to the tokens the grammar allows after what it generated.

    Call `process_logits(input_ids, logits)` (or the processor itself) at every step with all
    token ids so far, `(B, L)` and `(B, V)`, or `(L,)` and `(V,)` for one sequence. The first
    call fixes the prompt length (left-pad prompts of different lengths); a row's state is the
    state after the tokens it generated since (an int on the logits' device, or for a grammar
    with calls a `CallState` in an object array on the host). A row that extends a row of the
    previous call by one token is advanced by that token, whichever row it was (beam search
    reorders beams); any other row is walked again from its generated tokens. After an EOS token a row is
    finished: later tokens (padding) are ignored and its logits keep only the EOS tokens.

    With `max_new_tokens`, a step after `n` generated tokens keeps only the tokens after which
    the text can still end within the `max_new_tokens - n` tokens left, EOS included
    (`Grammar.mask_within`), so the output is complete when the budget runs out. A budget too
    small for any text of the grammar is a `BudgetError` here, before generating.

    One processor follows one generation; `reset()` starts another.
    """

    def __init__(self, grammar: Grammar, max_new_tokens: int | None = None) -> None:
        if max_new_tokens is not None:
            check_budget(grammar, max_new_tokens)
        self.grammar = grammar
        self.max_new_tokens = max_new_tokens
        # a grammar with calls: states are `CallState` values in an object array, on the host
        self._on_host = isinstance(grammar.initial_state, CallState)
        self._eos: dict[Any, Any] = {}
        self.reset()

    def reset(self) -> None:
        """Forget the sequences followed so far: the next call starts a new generation."""
        self.prompt_length: int | None = None
        self._generated = self._states = self._finished = None

    def update(self, input_ids):
        """Follow `input_ids` (as `process_logits` takes them) and return each row's state:
        `(B,)`, or an int state for one sequence. Call it with the final ids after generation
        for the states the outputs ended in."""
        ids = input_ids if input_ids.ndim == 2 else input_ids[None]
        if self._on_host and is_torch(ids):  # states with stacks live on the host
            ids = ids.detach().cpu().numpy()
        if self.prompt_length is None:
            self.prompt_length = int(ids.shape[1])
        elif ids.shape[1] < self.prompt_length:
            raise ValueError(f"input_ids have {ids.shape[1]} tokens, fewer than the prompt's "
                             f"{self.prompt_length}: call reset() before a new generation")
        generated = ids[:, self.prompt_length:]
        self._states, self._finished = self._follow(generated)
        self._generated = generated
        if input_ids.ndim == 2:
            return self._states
        return self._states[0] if self._on_host else int(self._states[0])

    def process_logits(self, input_ids, logits):
        """The logits with every token the grammar forbids (or the budget excludes) at -inf;
        a new array or tensor of the same shape, type and device."""
        self.update(input_ids)
        scores = logits if logits.ndim == 2 else logits[None]
        if len(scores) != len(self._states):
            raise ValueError(f"{len(scores)} rows of logits but {len(self._states)} sequences")
        budget = None if self.max_new_tokens is None else \
            max(self.max_new_tokens - int(self._generated.shape[1]), 0)
        out = self.grammar.apply(scores, self._states, budget=budget)
        # finished rows, and rows a caller led off the grammar, may only end
        dead = np.fromiter(map(operator.not_, self._states), np.bool_, len(self._states)) \
            if self._on_host else self._states == 0
        ended = (self._finished | dead)[:, None]
        eos = self._eos_ids(scores)
        if is_torch(out):
            if not is_torch(ended):
                ended = sys.modules["torch"].as_tensor(ended, device=out.device)
            out.masked_fill_(ended, float("-inf"))
        else:
            np.copyto(out, -np.inf, where=ended)
        out[:, eos] = _namespace(out).where(ended, scores[:, eos], out[:, eos])
        return out if logits.ndim == 2 else out[0]

    __call__ = process_logits

    def _follow(self, generated):
        """States and finished flags of the rows of `generated` (tokens after the prompt)."""
        previous = self._generated
        if previous is not None and generated.shape[1] == previous.shape[1] + 1:
            head = generated[:, :-1]
            if head.shape == previous.shape and bool((head == previous).all()):
                return self._step(self._states, self._finished, generated[:, -1])
            same = (head[:, None, :] == previous[None, :, :]).all(-1)
            if bool(same.any(1).all()):
                source = (same * 1).argmax(1)  # a previous row each row extends
                return self._step(self._states[source], self._finished[source], generated[:, -1])
        states = self._start_states(generated)
        finished = np.zeros(len(states), np.bool_) if self._on_host else states == 0
        for j in range(generated.shape[1]):
            states, finished = self._step(states, finished, generated[:, j])
        return states, finished

    def _step(self, states, finished, tokens):
        """Advance unfinished rows by `tokens`; an EOS token finishes its row."""
        ends = _namespace(tokens).isin(tokens, self._eos_ids(tokens))
        stop = finished | ends
        return _namespace(tokens).where(stop, states, self.grammar.advance(states, tokens)), stop

    def _start_states(self, generated):
        """The start state for every row, shaped and placed like `generated`'s rows."""
        if self._on_host:
            states = np.empty(len(generated), object)
            states[:] = [self.grammar.initial_state] * len(generated)
            return states
        if is_torch(generated):
            return sys.modules["torch"].ones(len(generated), dtype=sys.modules["torch"].long,
                                             device=generated.device)
        return np.ones(len(generated), np.int64)

    def _eos_ids(self, like):
        """The grammar's EOS ids as an index array or tensor on `like`'s device."""
        key = like.device if is_torch(like) else "numpy"
        eos = self._eos.get(key)
        if eos is None:
            ids = np.asarray(self.grammar.eos_token_ids, np.int64)
            eos = self._eos[key] = sys.modules["torch"].as_tensor(ids, device=key) \
                if is_torch(like) else ids
        return eos


def check_budget(grammar: Grammar, max_new_tokens: int) -> None:
    """Raise `BudgetError` unless some accepted text ends (EOS included) within
    `max_new_tokens` tokens."""
    need = grammar.tokens_to_accept(grammar.initial_state)
    if need < 0:
        raise BudgetError("the grammar accepts no token sequence")
    if need + 1 > max_new_tokens:
        raise BudgetError(f"no text of the grammar fits in {max_new_tokens} new tokens: the "
                          f"shortest takes {need} tokens and an EOS token")


def _namespace(array):
    """numpy, or torch for a tensor: the module whose `where` and `isin` take `array`."""
    return sys.modules["torch"] if is_torch(array) else np
