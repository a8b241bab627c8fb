"""One sequence's progress through a grammar, for serving engines: accept tokens (several at
once for speculative decoding), roll back the ones a verifier rejected, and ask for the mask,
the packed bitmask or the forced continuation of where the sequence stands. Numpy only."""

from __future__ import annotations

import copy
from collections.abc import Iterable

import numpy as np

from .arrays import integer, integer_array
from .bitmask import allows, bitmask_width, pack, write_bitmask
from .grammar import Forced, Grammar


class Matcher:
    """Follows one generated sequence token by token.

    With `max_tokens`, masks keep only the tokens after which the text can still end (EOS
    included) within the tokens left, as `Grammar.mask_within`, so an output is complete when
    the budget runs out. After an EOS token the sequence is finished: masks allow the EOS
    tokens alone and accept them (engines that pad a finished row pick one), and accepting
    any other token fails.
    """

    def __init__(self, grammar: Grammar, *, max_tokens: int | None = None,
                 state=None) -> None:
        """`state`: where the sequence starts (a state `grammar.state_from_ints` restored,
        say) instead of the grammar's start; `max_tokens` counts from there."""
        if max_tokens is not None and integer(max_tokens, "max_tokens") < 0:
            raise ValueError(f"max_tokens must be >= 0, not {max_tokens}")
        self.grammar = grammar
        self._start = grammar.initial_state if state is None else grammar.state_from_ints(
            grammar.state_to_ints(state))  # checked against this grammar
        self.max_tokens = None if max_tokens is None else integer(max_tokens, "max_tokens")
        self._eos = frozenset(grammar.eos_token_ids)
        self._vocab_size = grammar.vocab_size
        self._eos_mask = np.zeros(grammar.vocab_size, np.bool_)
        self._eos_mask[list(self._eos)] = True
        self._eos_mask.flags.writeable = False
        self._eos_packed = pack(self._eos_mask)
        self._last: tuple | None = None  # (state, budget, mask, packed): `_kept`
        self.reset()

    def reset(self) -> None:
        """Back to the start: no token accepted."""
        self._states = [self._start]          # the state after each accepted token
        self._ended_at: int | None = None      # tokens accepted when an EOS came

    def fork(self) -> "Matcher":
        """An independent copy at the same point (beam search, speculative drafts): the
        states are immutable values shared by both, so this copies references only."""
        twin = copy.copy(self)
        twin._states = self._states[:]
        return twin

    
    @property
    def state(self):
        """The grammar state after the tokens accepted so far (an int, or a `CallState` for
        a grammar with calls)."""
        return self._states[-1]

    @property
    def num_tokens(self) -> int:
        """Tokens accepted so far (a final EOS included)."""
        return len(self._states) - 1

    @property
    def budget(self) -> int | None:
        """Tokens left of `max_tokens` (None without one)."""
        return None if self.max_tokens is None else self.max_tokens - self.num_tokens

    def is_finished(self) -> bool:
        """Whether an EOS token was accepted."""
        return self._ended_at is not None

    def is_accepting(self) -> bool:
        """Whether the text so far is complete (an EOS token is allowed now, or came)."""
        return self.is_finished() or self.grammar.is_accepting(self.state)

    def accept(self, tokens: int | Iterable[int]) -> bool:
        """Accept a token id, or several in order, all or none: False, with nothing changed,
        when one of them is not allowed where it comes (the budget counted)."""
        ids = [tokens] if type(tokens) is int else \
            integer_array(tokens, "tokens").reshape(-1).tolist()
        states, ended = [], self._ended_at
        state, count = self.state, self.num_tokens
        for token in ids:
            if ended is not None and token not in self._eos or \
                    ended is None and not self._allowed(state, token, count):
                return False
            if token in self._eos:
                ended = count if ended is None else ended
            else:
                state = self.grammar.next_state(state, token)
            states.append(state)
            count += 1
        self._states.extend(states)
        self._ended_at = ended
        return True

    def rollback(self, count: int = 1) -> None:
        """Forget the last `count` accepted tokens (rejected speculative tokens)."""
        count = integer(count, "count")
        if not 0 <= count <= self.num_tokens:
            raise ValueError(f"cannot roll back {count} tokens: {self.num_tokens} accepted")
        if count:
            del self._states[-count:]
        if self._ended_at is not None and self._ended_at >= self.num_tokens:
            self._ended_at = None

    def mask(self) -> np.ndarray:
        """Read-only booleans over the vocabulary: the tokens allowed next."""
        if self.is_finished():
            return self._eos_mask
        return self._mask_at(self.state, self.budget)

    def bitmask(self) -> np.ndarray:
        """`mask()` packed as int32 words (bit `t % 32` of word `t // 32`)."""
        return self.fill_bitmask(np.zeros(bitmask_width(self.grammar.vocab_size), np.int32))

    def fill_bitmask(self, out):
        """Write the packed `mask()` into `out`, int32 words (one row of an engine's bitmask
        buffer: a numpy array or torch tensor of shape (W,), the rules of
        `Grammar.fill_bitmask`); words past the vocabulary are cleared. Returns `out`."""
        packed = self._eos_packed if self.is_finished() else \
            self._packed_at(self.state, self.budget)
        return write_bitmask(out, (), self._vocab_size, (packed,))

    def forced(self) -> Forced:
        """`Grammar.forced` where the sequence stands (nothing once it is finished)."""
        if self.is_finished():
            return Forced(b"", ())
        return self.grammar.forced(self.state)

    def _allowed(self, state: int, token: int, count: int) -> bool:
        if not 0 <= token < self._vocab_size:
            return False
        budget = None if self.max_tokens is None else self.max_tokens - count
        packed = self._kept(state, budget)[1]
        if packed is not None:
            return allows(packed, token)
        return bool(self._mask_at(state, budget)[token])

    def _kept(self, state, budget: int | None) -> tuple:
        """(mask, packed mask) of the last step, either None where not asked for, both None
        if it was at another state or budget: an engine asks for the mask of a step (boolean
        or packed) and then accepts a token at the same state and budget (a budget-aware
        mask is built, not cached by the grammar)."""
        last = self._last
        if last is None or last[0] is not state and last[0] != state or last[1] != budget:
            return (None, None)
        return last[2:]

    def _mask_at(self, state, budget: int | None) -> np.ndarray:
        """The grammar's mask, the last one kept (`_kept`)."""
        mask, packed = self._kept(state, budget)
        if mask is None:
            mask = self.grammar.mask(state, budget=budget)
            self._last = (state, budget, mask, packed)
        return mask

    def _packed_at(self, state, budget: int | None) -> np.ndarray:
        """The grammar's packed mask, the last one kept (`_kept`)."""
        mask, packed = self._kept(state, budget)
        if packed is None:
            packed = self.grammar._mask_packed(state, budget)
            self._last = (state, budget, mask, packed)
        return packed
