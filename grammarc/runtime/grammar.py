"""The runtime view of a compiled grammar: allowed tokens, masks, state steps, logits masking.

Imports numpy only (torch is used when the caller hands in torch tensors, and is then already
imported by the caller). State convention everywhere: 0 is dead, 1 is the start; a token is
allowed in a state exactly when its transition is non-zero; EOS tokens are allowed exactly in
accepting states, where they lead back to the same state. (A grammar with calls takes the same
calls with `CallState` values as states: `calls.py`.)

Internally the table is factored (`token_class`, per-state rows of `(class, next - state)`);
per-row token masks are computed on first use and cached (`MaskCache`), so one state's mask
costs a dictionary lookup, or one unpacking of bits, after the first time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..format.artifact import ArtifactData, encode_table, write_artifact
from ..charsets import CharFolder, csr_byte_edges
from ..errors import ArtifactError
from ..format.table import TokenTable
from .arrays import (budgets_per_row, byte_string, check_logits, integer, integer_array,
                     is_torch, read_only)
from .bitmask import bitmask_width, pack, write_bitmask
from .masks import MaskCache

FORCED_LIMIT = 4096  # bytes and tokens: Grammar.forced looks no further


@dataclass(frozen=True)
class Forced:
    """The only way forward from a state: its text (bytes) and tokens (`Grammar.forced`)."""

    text: bytes
    tokens: tuple[int, ...]


class Grammar:
    """A compiled grammar: `grammarc.compile` and `grammarc.load` both return one."""

    initial_state = 1
    dead_state = 0

    def __init__(self, metadata: dict[str, Any], table: TokenTable) -> None:
        """`metadata` as an artifact records it; `table` the compiled tables (with
        `state_labels[s]` indexing `metadata["state_names"]`, -1: no name, for state-machine
        specs)."""
        self.metadata = metadata
        self.table = table
        # read at every step: kept as ints, not looked up again
        self._num_states = table.num_states
        self._vocab_size = int(metadata["tokenizer"]["vocab_size"])
        # a budget this large never removes a token: 1 + min_tokens_to_accept[t] + 1 <= budget
        self._unlimited_budget = int(self.table.min_tokens_to_accept.max(initial=0)) + 2
        self._allowed_masks = MaskCache(self.vocab_size)    # by row
        self._forbidden_masks = MaskCache(self.vocab_size)  # by row: the allowed negated
        table.class_starts, table.outside_largest  # now, not in a step: masks use them
        self._byte_table: np.ndarray | None = None
        self._torch_tables: dict[Any, Any] = {}

    # ----------------------------------------------------------------- describing
    @property
    def num_states(self) -> int:
        """Number of states, the dead state 0 included."""
        return self._num_states

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def num_classes(self) -> int:
        """Token classes of the table (class 0, never allowed, included)."""
        return self.table.num_classes

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return tuple(self.metadata["tokenizer"]["eos_token_ids"])

    @property
    def kind(self) -> str:
        return str(self.metadata.get("kind", ""))

    @property
    def source(self) -> str:
        return str(self.metadata.get("source", ""))

    @property
    def accepting_states(self) -> np.ndarray:
        return np.flatnonzero(self.table.accepting)

    @property
    def min_tokens_to_accept(self) -> np.ndarray:
        """Shortest number of tokens from each state to an accepting state (-1: unreachable)."""
        return self.table.min_tokens_to_accept

    def __repr__(self) -> str:
        return (f"<Grammar kind={self.kind!r} states={self.num_states} "
                f"vocab={self.vocab_size} classes={self.table.num_classes} rows={self.num_rows}>")

    # ------------------------------------------------------------- single state
    def is_accepting(self, state: int) -> bool:
        return bool(self.table.accepting[self._check_state(state)])

    def state_name(self, state: int) -> str | None:
        """The name of the workflow state the text has reached in `state`, for grammars
        compiled from a state-machine spec (None for other grammars and the dead state)."""
        labels = self.table.state_labels
        label = -1 if labels is None else labels[self._check_state(state)]
        return self.metadata["state_names"][label] if label >= 0 else None

    def mask(self, state: int, *, budget: int | None = None) -> np.ndarray:
        """Boolean array over the vocabulary: True where the token is allowed (read-only).
        With `budget`, only the tokens of `mask_within(state, budget)`."""
        budget = self._budget_cut(budget)
        if budget is not None:
            return read_only(self.mask_within(state, budget))
        return self._cached_mask(int(self.table.state_row[self._check_state(state)]), allowed=True)

    def _budget_cut(self, budget: int | None) -> int | None:
        """`budget`, or None where it cuts no token of any state's mask (no state needs that
        many tokens to end), so that the masks without a budget, and their cache, serve."""
        if budget is None or integer(budget, "budget") >= self._unlimited_budget:
            return None
        return budget

    def allowed(self, state: int) -> np.ndarray:
        """Sorted ids of the tokens allowed in `state` (EOS only when it is accepting)."""
        return np.flatnonzero(self.mask(state))

    def next_state(self, state: int, token_id: int) -> int:
        """The state after `token_id`; 0 (dead) when the token is not allowed."""
        state = self._check_state(state)
        token_id = integer(token_id, "a token id")
        if not 0 <= token_id < self.vocab_size:
            return 0
        return self._table_next(state, token_id)

    def tokens_to_accept(self, state: int) -> int:
        """The fewest tokens that reach an accepting state from `state` (-1: none), the final
        EOS not counted."""
        return int(self.table.min_tokens_to_accept[self._check_state(state)])

    def _table_next(self, state: int, token_id: int) -> int:
        row = self.table.state_row[state]
        lo, hi = self.table.row_ptr[row], self.table.row_ptr[row + 1]
        cls = self.table.token_class[token_id]
        j = lo + int(self.table.row_class[lo:hi].searchsorted(cls))
        if j < hi and self.table.row_class[j] == cls:
            return int(state + self.table.row_delta[j])
        return 0

    def allowed_counts(self) -> np.ndarray:
        """Number of allowed tokens in each state (EOS included), without building masks."""
        class_sizes = np.bincount(self.table.token_class, minlength=self.table.num_classes)
        per_row = np.bincount(self.table.entry_key // self.table.num_classes,
                              weights=class_sizes[self.table.row_class], minlength=self.num_rows)
        return per_row.astype(np.int64)[self.table.state_row]

    # ---------------------------------------------------------------- budgets
    def mask_within(self, state: int, budget: int) -> np.ndarray:
        """`mask(state)` restricted to tokens after which the text can still end within `budget`
        more tokens, the final EOS token included.

        A text token leading to state `t` fits when `1 + min_tokens_to_accept[t] + 1 <= budget`;
        an EOS token (allowed only in accepting states) when `budget >= 1`. A fresh array.
        """
        state, budget = self._check_state(state), integer(budget, "budget")
        mask = self._row_within(state, budget)
        # an EOS token may share its class with text tokens that loop in accepting states
        mask[list(self.eos_token_ids)] = bool(self.table.accepting[state]) and budget >= 1
        return mask

    def _row_within(self, table_state: int, budget: int) -> np.ndarray:
        """The tokens of the table state's row that lead to a state `t` with
        `1 + min_tokens_to_accept[t] + 1 <= budget` (a fresh array)."""
        row = self.table.state_row[table_state]
        lo, hi = self.table.row_ptr[row], self.table.row_ptr[row + 1]
        reach = self.table.min_tokens_to_accept[table_state + self.table.row_delta[lo:hi]]
        class_fits = np.zeros(self.table.num_classes, np.bool_)
        class_fits[self.table.row_class[lo:hi][(reach >= 0) & (reach + 2 <= budget)]] = True
        return class_fits[self.table.token_class]

    def allowed_within(self, state: int, budget: int) -> np.ndarray:
        """Sorted ids of the tokens of `mask_within(state, budget)`."""
        return np.flatnonzero(self.mask_within(state, budget))

    def sample_tokens(self, max_tokens: int, rng: np.random.Generator, *,
                      eos_probability: float = 0.25) -> list[int] | None:
        """A random token sequence of the language, at most `max_tokens` long counting its final
        EOS token (the sequence ends with one when the grammar has EOS ids); None when no
        accepted string fits.

        Each step picks uniformly among the text tokens that still fit the remaining budget
        (`mask_within`); in an accepting state it stops with probability `eos_probability`, or
        when no text token fits.
        """
        eos = np.asarray(self.eos_token_ids, np.int64)
        state, budget, tokens = self.initial_state, integer(max_tokens, "max_tokens"), []
        need = self.tokens_to_accept(state)
        if need < 0 or need + 1 > budget:
            return None
        while True:
            mask = self.mask_within(state, budget)
            mask[eos] = False
            choices = np.flatnonzero(mask)
            if self.is_accepting(state) and (not len(choices) or rng.random() < eos_probability):
                if len(eos):
                    tokens.append(int(eos[rng.integers(len(eos))]))
                return tokens
            if not len(choices):
                raise ArtifactError("min_tokens_to_accept disagrees with the token table")
            token = int(choices[rng.integers(len(choices))])
            tokens.append(token)
            state = self.next_state(state, token)
            budget -= 1

    # ---------------------------------------------------------------- batched
    def advance(self, states, tokens):
        """Batched `next_state`: arrays (numpy or torch) of equal shape, same type back."""
        if is_torch(states) or is_torch(tokens):
            return self._torch(states if is_torch(states) else tokens).advance(states, tokens)
        states = integer_array(states, "states")
        tokens = integer_array(tokens, "tokens")
        if states.shape != tokens.shape:
            raise ValueError(f"states {states.shape} and tokens {tokens.shape} differ in shape")
        self._check_states(states)
        valid = (tokens >= 0) & (tokens < self.vocab_size)
        keys = self.table.state_row[states] * self.table.num_classes + \
            self.table.token_class[np.where(valid, tokens, 0)]
        pos = np.minimum(np.searchsorted(self.table.entry_key, keys), len(self.table.entry_key) - 1)
        if len(self.table.entry_key) == 0:
            return np.zeros_like(states)
        found = valid & (self.table.entry_key[pos] == keys)
        return np.where(found, states + self.table.row_delta[pos], 0)

    def apply(self, logits, states, *, budget: int | None = None, inplace: bool = False):
        """Set forbidden logits to -inf.

        `logits` is a numpy array or torch tensor of shape (V,) with an int state, or (B, V)
        with B states. Columns past the vocabulary (padding in some models) are forbidden.
        With `budget`, every row keeps only the tokens of `mask_within(state, budget)`: the text
        can still end within `budget` more tokens, the final EOS included. Returns the masked
        logits (the same object when `inplace=True`).
        """
        budget = self._budget_cut(budget)
        if is_torch(logits):
            check_logits(logits)
            return self._torch(logits).apply(logits, states, inplace, budget)
        check_logits(logits)
        states, batched = self.states_for(logits.ndim, logits.shape, states)
        out = logits if inplace else logits.copy()
        view = out if batched else out[None, :]
        vocab = self.vocab_size
        for i, state in enumerate(states):
            forbidden = self._cached_mask(int(self.table.state_row[state]), allowed=False) \
                if budget is None else ~self.mask_within(int(state), budget)
            np.copyto(view[i, :vocab], -np.inf, where=forbidden)
        view[:, vocab:] = -np.inf
        return out

    # ---------------------------------------------------------------- engines
    def bitmask(self, state: int, *, budget: int | None = None) -> np.ndarray:
        """The tokens allowed in `state` (with `budget`: those of `mask_within`) as packed
        int32 words, bit `t % 32` of word `t // 32` (docs/runtime.md, "Serving engines")."""
        out = np.zeros((1, bitmask_width(self.vocab_size)), np.int32)
        return self.fill_bitmask([state], out, budget=budget)[0]

    def fill_bitmask(self, states, out, *, budget=None):
        """Write the packed bitmask of each of `states` into the rows of `out`, an int32
        (B, W) numpy array or torch tensor (any device) with W >= ceil(V / 32), as engines
        preallocate it; words past the vocabulary are cleared. `budget`: None, one int for
        every row, or one per row (as `mask_within`). Returns `out`."""
        states = integer_array(states, "states").reshape(-1)
        self._check_states(states)
        budgets = budgets_per_row(budget, len(states))
        masks = (self._mask_packed(state, limit) for state, limit in zip(states.tolist(), budgets))
        return write_bitmask(out, (len(states),), self.vocab_size, masks)

    def _mask_packed(self, state: int, budget: int | None) -> np.ndarray:
        """`mask(state, budget=budget)` packed for a bitmask (`bitmask.pack`), read-only:
        the row's cached bytes (`MaskCache.packed`) unless the budget cuts."""
        budget = self._budget_cut(budget)
        if budget is not None:
            return pack(self.mask_within(state, budget))
        return self._cached_packed(int(self.table.state_row[self._check_state(state)]))

    def warm(self, limit: int | None = None) -> int:
        """Compute and cache the mask of every distinct row now (each set of allowed classes;
        at most `limit`, and at most what the mask cache holds), so that no later step pays
        a row's first mask: for a server, once after loading an artifact. Returns how many
        masks were computed. Thread-safe, like every method."""
        most = self._allowed_masks.capacity
        if limit is not None:
            if integer(limit, "limit") < 0:
                raise ValueError(f"limit must be >= 0, not {limit}")
            most = min(int(limit), most)
        rows = self.table.mask_rows()
        for row in rows[:most].tolist():
            self._cached_mask(row, allowed=True)
        return min(len(rows), most)

    def keep_row_masks(self, mask_row: np.ndarray, rows: np.ndarray,
                       packed: np.ndarray) -> None:
        """Hold the masks of the distinct rows computed ahead (by the compiler, in C++:
        `alignment.row_masks`), packed, so that a row's first mask is one unpacking: every
        row's first row allowing the same classes (`mask_row`), those rows (`rows`) and
        their masks (`packed`, [len(rows), ceil(V / 8)], a bitmask's bit order). At most
        what the mask cache holds, the first rows first."""
        self.table.share_mask_rows(mask_row)
        packed = read_only(packed)
        for row, bits in zip(rows[:self._allowed_masks.capacity].tolist(), packed):
            self._allowed_masks.keep_packed(row, bits)

    def forced(self, state: int) -> "Forced":
        """What every continuation of the text from `state` begins with (jump-forward).

        `text`: the bytes up to the first choice (two possible bytes, or the text may end
        there); `tokens`: the tokens that are each the only one allowed, one after another
        (an EOS token never: ending is a choice of its own). An engine may append `tokens`
        without running the model, or tokenize `text` itself. Each is at most
        `FORCED_LIMIT` long."""
        start = self._check_state(state)
        text, at = bytearray(), start
        while at and len(text) < FORCED_LIMIT and not self.is_accepting(at):
            following = np.flatnonzero(self._next_bytes(at))
            if len(following) != 1:
                break
            text.append(int(following[0]))
            at = self._byte_step(at, int(following[0]))
        tokens, at, eos = [], start, set(self.eos_token_ids)
        while at and len(tokens) < FORCED_LIMIT:
            allowed = np.flatnonzero(self.mask(at))
            if len(allowed) != 1 or int(allowed[0]) in eos:
                break
            tokens.append(int(allowed[0]))
            at = self.next_state(at, tokens[-1])
        return Forced(bytes(text), tuple(tokens))

    def _next_bytes(self, state: int) -> np.ndarray:
        """Booleans over the 256 bytes: which may come next after `state`."""
        return self._byte_dfa()[state] != 0

    # ------------------------------------------------------------- text level
    def walk_bytes(self, data: bytes, state=None) -> int:
        """The byte-DFA state after `data` (bytes, bytearray or memoryview; 0 once the text
        leaves the language's prefixes) from `state` (default: the start)."""
        data = byte_string(data)
        matched, end = self.walk_prefix(data, state)
        return end if matched == len(data) else self.dead_state

    def walk_prefix(self, data: bytes, state=None) -> tuple[int, int]:
        """The longest prefix of `data` (bytes) the language allows after `state`: its length
        and the state after it. One walk in memory independent of the text's length: a
        grammar with calls gives an id to the last configuration only."""
        data = byte_string(data)
        state = self.initial_state if state is None else state
        at = self._position(self._check_state(state))
        for index, byte in enumerate(data):
            following = self._byte_move(at, byte)
            if not following:
                return index, self._state_at(at)
            at = following
        return len(data), self._state_at(at)

    def _byte_step(self, state: int, byte: int) -> int:
        """The state after one byte (0: dead)."""
        following = self._byte_move(self._position(state), byte)
        return self._state_at(following) if following else self.dead_state

    # a walk's position: the state itself here; a configuration without an id with calls
    def _position(self, state: int):
        return state

    def _state_at(self, position) -> int:
        return position

    def _byte_move(self, position, byte: int):
        """The position after one byte; falsy when the text dies."""
        return int(self._byte_dfa()[position, byte])

    def _byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        """The live byte edges `(first byte, last byte, target)` of `state`."""
        table = self.table
        return csr_byte_edges(table.byte_ptr, table.byte_ranges, table.byte_next)(state)

    def allowed_characters(self, state: int) -> list[tuple[int, int]]:
        """Inclusive code point ranges of the characters that may come next in byte-DFA state
        `state` (a state reached at a character boundary), merged and sorted."""
        return CharFolder(self._byte_edges).characters(self._check_state(state))

    def matches(self, text: str | bytes) -> bool:
        """Whether the whole text is in the grammar's language (no tokenizer involved)."""
        return self.is_accepting(self.walk_bytes(byte_string(text, "text", text=True)))

    # ---------------------------------------------------------------- tables
    def to_dense(self) -> np.ndarray:
        """The full table `T[state, token]` (int32, shape (num_states, vocab_size))."""
        return self.table.dense()

    def to_csr(self):
        """The full table as a `scipy.sparse.csr_matrix` (needs scipy: `pip install
        the scipy extra: `pip install -e '.[scipy]'` in a clone)."""
        from scipy.sparse import csr_matrix

        ptr, tokens, nxt = self.table.transitions()
        return csr_matrix((nxt.astype(np.int32), tokens, ptr),
                          shape=(self.num_states, self.vocab_size))

    def save(self, path: str | os.PathLike, layout: str = "factored") -> None:
        """Write the artifact (`.safetensors` or `.npz` by suffix) in the given layout
        (factored, csr or dense; grammars with calls: factored)."""
        write_artifact(path, *encode_table(self.table, self.metadata, layout))

    # ---------------------------------------------------------------- carrying states
    def state_to_ints(self, state: int) -> list[int]:
        """`state` as a short list of ints another process (or language) reads back with
        `state_from_ints`: `[state]` here; a grammar with calls writes its stack too
        (docs/FORMAT.md, "States outside the process")."""
        return [self._check_state(state)]

    def state_from_ints(self, values) -> int:
        """The state `state_to_ints` wrote (a `ValueError` for a list no state writes)."""
        ints = integer_array(values, "a state").reshape(-1).tolist()
        if len(ints) != 1:
            raise ValueError(f"a state of a grammar without calls is one int, not {ints}")
        return self._check_state(ints[0])

    # -------------------------------------------------------------- internals
    def _check_state(self, state) -> int:
        state = integer(state, "a state")
        if not 0 <= state < self.num_states:
            raise ValueError(f"state {state} out of range 0..{self.num_states - 1}")
        return state

    def _check_states(self, states: np.ndarray) -> None:
        if states.size and (states.min() < 0 or states.max() >= self.num_states):
            raise ValueError(f"states out of range 0..{self.num_states - 1}")

    def states_for(self, ndim: int, shape: tuple, states) -> tuple[np.ndarray, bool]:
        """The checked states of each row of `shape` logits, and whether they are batched."""
        if ndim == 1:
            values = integer_array(states, "states")
            if values.size != 1:
                raise ValueError(f"logits of shape (V,) take one state, not {values.size}")
            states = np.asarray([self._check_state(values.reshape(()))])
            batched = False
        elif ndim == 2:
            states = integer_array(states, "states").reshape(-1)
            if len(states) != shape[0]:
                raise ValueError(f"{shape[0]} rows of logits but {len(states)} states")
            self._check_states(states)
            batched = True
        else:
            raise ValueError(f"logits must have shape (V,) or (B, V), not {shape}")
        if shape[-1] < self.vocab_size:
            raise ValueError(f"logits have {shape[-1]} columns but the vocabulary has "
                             f"{self.vocab_size} tokens")
        return states, batched

    def _cached_mask(self, row: int, allowed: bool) -> np.ndarray:
        """The tokens row `row` allows (or, `allowed=False`, forbids), read-only; cached by
        the set of classes allowed (`TokenTable.mask_row`)."""
        row = self.table.mask_row(row)
        if allowed:
            return self._allowed_masks.get(row, lambda: self.table.row_mask(row))
        return self._forbidden_masks.get(row, lambda: ~self._cached_mask(row, allowed=True))

    def _cached_packed(self, row: int) -> np.ndarray:
        """`_cached_mask(row, allowed=True)` packed (`MaskCache.packed`)."""
        row = self.table.mask_row(row)
        return self._allowed_masks.packed(row, lambda: self.table.row_mask(row))

    def _byte_dfa(self) -> np.ndarray:
        if self._byte_table is None:
            table = np.zeros((self.num_states, 256), np.int32)
            owner = np.repeat(np.arange(self.num_states), np.diff(self.table.byte_ptr))
            for (lo, hi), state, nxt in zip(self.table.byte_ranges, owner, self.table.byte_next):
                table[state, lo:hi + 1] = nxt
            self._byte_table = table
        return self._byte_table

    def _torch(self, like):
        from ._torch import TorchTables

        key = like.device
        tables = self._torch_tables.get(key)
        if tables is None:
            tables = self._torch_tables[key] = TorchTables(self.table, self.eos_token_ids, key)
        return tables


def check_tokenizer(grammar: Grammar | ArtifactData, tokenizer,
                    artifact_name: str = "artifact") -> None:
    """Raise `ArtifactError` unless `grammar` (or an artifact's data) was compiled for
    `tokenizer`'s vocabulary."""
    tokenizer = _as_tokenizer(grammar, tokenizer)
    recorded = grammar.metadata["tokenizer"]
    mismatches = tokenizer_mismatches(grammar, tokenizer)
    if not mismatches:
        return
    field, _recorded, actual = mismatches[0]
    if field == "vocab_size":
        raise ArtifactError(f"{artifact_name}: compiled for a vocabulary of "
                            f"{recorded['vocab_size']} tokens ({recorded.get('name')}), but "
                            f"{tokenizer.name} has {actual}")
    raise ArtifactError(f"{artifact_name}: compiled for tokenizer {recorded.get('name')} "
                        f"(fingerprint {recorded['fingerprint'][:12]}), not for "
                        f"{tokenizer.name} (fingerprint {actual[:12]})")


def tokenizer_mismatches(grammar: Grammar | ArtifactData,
                         tokenizer) -> list[tuple[str, Any, Any]]:
    """`(field, recorded in the artifact, of the tokenizer)` for `vocab_size` and `fingerprint`
    where they differ; empty when the artifact was compiled for this vocabulary.

    The fingerprint is taken with the artifact's own EOS ids (chosen at compile time, e.g. by
    --eos), so only the vocabulary itself has to match.
    """
    tokenizer = _as_tokenizer(grammar, tokenizer)
    recorded = grammar.metadata["tokenizer"]
    if tokenizer.vocab_size != recorded["vocab_size"]:
        return [("vocab_size", recorded["vocab_size"], tokenizer.vocab_size)]
    actual = tokenizer.with_eos(_recorded_eos(grammar)).fingerprint
    if actual != recorded["fingerprint"]:
        return [("fingerprint", recorded["fingerprint"], actual)]
    return []


def _recorded_eos(grammar: Grammar | ArtifactData) -> tuple[int, ...]:
    return tuple(grammar.metadata["tokenizer"]["eos_token_ids"])


def _as_tokenizer(grammar: Grammar | ArtifactData, tokenizer):
    """A `Tokenizer` as given, or loaded from anything `load_tokenizer` accepts."""
    if hasattr(tokenizer, "fingerprint"):
        return tokenizer
    from ..tokenizers import load_tokenizer

    return load_tokenizer(tokenizer, eos_token_ids=_recorded_eos(grammar))
