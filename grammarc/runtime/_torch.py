"""Torch side of the runtime: the grammar's tables on one device, masking without host trips.

Built the first time a grammar meets a tensor on a device. Every row's allowed-token mask is
materialised once (as booleans, or packed 8 per byte when that would be large), so a step is a
row gather plus one `where`, and state steps are a `searchsorted`, all on the device. A
budget-aware step gathers each state's row entries and their distances to acceptance instead.
"""

from __future__ import annotations

import numpy as np
import torch

from ..format.table import TokenTable
from .arrays import integer_array

_BOOL_TABLE_LIMIT = 256 << 20  # bytes; above this the mask table is bit-packed
_ROWS_PER_CHUNK = 64


class TorchTables:
    """A grammar's table (`grammarc.format.table.TokenTable`) on one device."""

    def __init__(self, table: TokenTable, eos_token_ids: tuple[int, ...],
                 device: torch.device) -> None:
        self.device = device
        self.num_states = table.num_states
        self.vocab_size = table.vocab_size
        self.num_classes = table.num_classes
        as_long = lambda a: torch.tensor(np.asarray(a, np.int64), device=device)  # noqa: E731
        self.state_row = as_long(table.state_row)
        self.token_class = as_long(table.token_class)
        self.entry_key = as_long(table.entry_key)
        self.row_delta = as_long(table.row_delta)
        self.packed = table.num_rows * self.vocab_size > _BOOL_TABLE_LIMIT
        chunks = []
        for lo in range(0, table.num_rows, _ROWS_PER_CHUNK):
            rows = range(lo, min(lo + _ROWS_PER_CHUNK, table.num_rows))
            allowed = np.stack([table.row_mask(r) for r in rows])
            chunks.append(np.packbits(allowed, axis=1) if self.packed else allowed)
        self.allowed = torch.as_tensor(np.concatenate(chunks), device=device)
        self.shifts = torch.arange(7, -1, -1, device=device, dtype=torch.uint8)
        self.neg_inf = {}
        # for budget-aware masks: each row's entries, the distances, the EOS ids
        self.row_start = as_long(table.row_ptr[:-1])
        self.row_length = as_long(np.diff(table.row_ptr))
        self.max_row_length = int(self.row_length.max()) if table.num_rows else 0
        self.row_class = as_long(table.row_class)
        self.min_tokens = as_long(table.min_tokens_to_accept)
        self.accepting = torch.tensor(np.asarray(table.accepting), device=device)
        self.eos = as_long(eos_token_ids)

    def _integers(self, values, what: str) -> torch.Tensor:
        """`values` as a long tensor on the device; a `TypeError` for floats and booleans,
        as numpy's side (`grammar.integer_array`) gives."""
        if isinstance(values, torch.Tensor):
            if values.is_floating_point() or values.is_complex() or values.dtype == torch.bool:
                raise TypeError(f"{what} must be integers, not {values.dtype}")
            return values.to(device=self.device, dtype=torch.long)
        return torch.as_tensor(integer_array(values, what), device=self.device)

    def _states(self, states) -> torch.Tensor:
        """Checked states (a host sync when they are on a GPU: a wrong state must be an
        error, not a row of another state's mask)."""
        states = self._integers(states, "states")
        if states.numel() and bool((states.min() < 0) | (states.max() >= self.num_states)):
            raise ValueError(f"states out of range 0..{self.num_states - 1}")
        return states

    def allowed_rows(self, rows: torch.Tensor) -> torch.Tensor:
        picked = self.allowed.index_select(0, rows)
        if not self.packed:
            return picked
        bits = (picked.unsqueeze(-1) >> self.shifts) & 1
        return bits.reshape(*picked.shape[:-1], -1)[..., :self.vocab_size].bool()

    def allowed_within(self, states: torch.Tensor, budget: int) -> torch.Tensor:
        """(B, V) booleans: `Grammar.mask_within(state, budget)` for each of the B states."""
        offsets = torch.arange(self.max_row_length, device=self.device)
        rows = self.state_row[states]
        present = offsets < self.row_length[rows][:, None]
        entries = torch.where(present, self.row_start[rows][:, None] + offsets, 0)
        following = torch.where(present, states[:, None] + self.row_delta[entries], 0)
        reach = self.min_tokens[following]
        fits = present & (reach >= 0) & (reach + 2 <= budget)
        # entries that are absent or do not fit write to class 0, which no allowed token has
        classes = torch.where(fits, self.row_class[entries], 0)
        class_fits = torch.zeros(len(states), self.num_classes, dtype=torch.bool,
                                 device=self.device)
        class_fits.scatter_(1, classes, fits)
        class_fits[:, 0] = False
        allowed = class_fits[:, self.token_class]
        # an EOS token may share its class with text tokens that loop in accepting states
        allowed[:, self.eos] = (self.accepting[states] & (budget >= 1))[:, None]
        return allowed

    def apply(self, logits: torch.Tensor, states, inplace: bool,
              budget: int | None = None) -> torch.Tensor:
        if logits.dim() not in (1, 2):
            raise ValueError(f"logits must have shape (V,) or (B, V), not {tuple(logits.shape)}")
        if logits.shape[-1] < self.vocab_size:
            raise ValueError(f"logits have {logits.shape[-1]} columns but the vocabulary has "
                             f"{self.vocab_size} tokens")
        states = self._states(states).reshape(-1)
        if logits.dim() == 1 and len(states) != 1:
            raise ValueError(f"logits of shape (V,) take one state, not {len(states)}")
        if logits.dim() == 2 and len(states) != logits.shape[0]:
            raise ValueError(f"{logits.shape[0]} rows of logits but {len(states)} states")
        allowed = self.allowed_rows(self.state_row[states]) if budget is None else \
            self.allowed_within(states, budget)
        if logits.dim() == 1:
            allowed = allowed[0]
        neg_inf = self.neg_inf.get(logits.dtype)
        if neg_inf is None:
            neg_inf = self.neg_inf[logits.dtype] = torch.tensor(
                float("-inf"), dtype=logits.dtype, device=self.device)
        if logits.shape[-1] == self.vocab_size:
            return torch.where(allowed, logits, neg_inf, out=logits if inplace else None)
        out = logits if inplace else torch.empty_like(logits)
        torch.where(allowed, logits[..., :self.vocab_size], neg_inf,
                    out=out[..., :self.vocab_size])
        out[..., self.vocab_size:] = float("-inf")
        return out

    def advance(self, states, tokens):
        states = self._states(states)
        tokens = self._integers(tokens, "tokens")
        if states.shape != tokens.shape:
            raise ValueError(f"states {tuple(states.shape)} and tokens {tuple(tokens.shape)} "
                             "differ in shape")
        if len(self.entry_key) == 0:
            return torch.zeros_like(states)
        valid = (tokens >= 0) & (tokens < self.vocab_size)
        keys = self.state_row[states] * self.num_classes + \
            self.token_class[torch.where(valid, tokens, torch.zeros_like(tokens))]
        pos = torch.searchsorted(self.entry_key, keys).clamp_(max=len(self.entry_key) - 1)
        found = valid & (self.entry_key[pos] == keys)
        return torch.where(found, states + self.row_delta[pos], torch.zeros_like(states))


def on_numpy(step, states, tokens):
    """`step` (numpy arrays in and out) on torch tensors: same device and dtype back."""
    like = states if isinstance(states, torch.Tensor) else tokens
    as_numpy = lambda a: a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a  # noqa: E731
    out = step(as_numpy(states), as_numpy(tokens))
    return torch.as_tensor(out, device=like.device)


def masked_by_numpy(grammar, logits: torch.Tensor, states, budget: int | None,
                    inplace: bool) -> torch.Tensor:
    """Mask torch logits with masks computed on the host (grammars with calls: masks depend
    on each sequence's stack)."""
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits must have shape (V,) or (B, V), not {tuple(logits.shape)}")
    if isinstance(states, torch.Tensor):
        states = states.detach().cpu().numpy()
    rows, batched = grammar.states_for(logits.dim(), tuple(logits.shape), states)
    allowed = np.zeros((len(rows), logits.shape[-1]), np.bool_)
    for i, state in enumerate(rows):
        allowed[i, :grammar.vocab_size] = grammar.mask(state, budget=budget)
    keep = torch.as_tensor(allowed if batched else allowed[0], device=logits.device)
    out = logits if inplace else logits.clone()
    return out.masked_fill_(~keep, float("-inf"))
