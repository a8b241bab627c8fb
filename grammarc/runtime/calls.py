"""The runtime of grammars whose machines call each other (artifact format version 2).

A runtime state is a *configuration*: a table state, a stack of return states and, inside
the loop of a counted machine, the count of repetitions started in its frame. Callers
keep handing ints around: each configuration met gets an id the first time (0 dead, 1 the
start with an empty stack), interned in the grammar object, and stacks are interned as a
tree (a stack is its top return state and the stack below), so a step costs a dictionary
lookup. Ids are handles into this object: valid in the process that made them.

Masks: the ordinary table gives the tokens that stay in the state's machine frame without a
call; each *stack token* of the state either ends in a state with return states pushed, or
returns past the frame with a suffix that is resolved against the stack (docs/FORMAT.md).
Inside a counted loop, a token is allowed only if the repetitions it starts keep the count
within the machine's bounds. Numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..artifact import suffix_count
from ..table import TokenTable
from .arrays import check_logits, integer, integer_array, is_torch, read_only
from .grammar import Grammar
from .masks import MaskCache

_DEAD = -2  # resolve(): the text dies


class CallGrammar(Grammar):
    """A compiled grammar with machines linked by calls; the API of `Grammar`, where a state
    id stands for a configuration (table state and stack of return states)."""

    def __init__(self, metadata: dict[str, Any], table: TokenTable) -> None:
        super().__init__(metadata, table)
        calls = table.calls
        self._machine_start = calls["machine_start"]
        self._call_ptr = calls["call_ptr"]
        self._call_machine = calls["call_machine"]
        self._call_return = calls["call_return"]
        self._machine_first = calls["machine_first"].astype(np.bool_)
        self._stack_ptr = calls["stack_ptr"]
        self._stack_token = calls["stack_token"]
        self._stack_next = calls["stack_next"]
        self._stack_arg = calls["stack_arg"]
        self._suffix_state = calls["suffix_state"]
        self._suffix_id = calls["suffix_id"]
        self._suffix_next = calls["suffix_next"]
        self._suffix_arg = calls["suffix_arg"]
        self._push_ptr = calls["push_ptr"]
        self._push_states = calls["push_states"]
        self._num_suffixes = suffix_count(self._suffix_id, self._stack_next, self._stack_arg,
                                          self._suffix_next, self._suffix_arg)
        self._suffix_key = self._suffix_state * max(self._num_suffixes, 1) + self._suffix_id
        self._eos = np.asarray(self.eos_token_ids, np.int64)
        self._counts = _Counts(calls, self.table.min_tokens_to_accept)
        # stacks: node 0 is the empty stack; node n is (below, return state)
        self._node_below: list[int] = [0]
        self._node_top: list[int] = [0]
        self._node_ends: list[bool] = [True]   # every return state on the stack is final
        self._node_cost: list[int] = [0]       # tokens to finish the frames on the stack
        self._node_ids: dict[tuple[int, int], int] = {}
        # configurations: id 0 dead, id 1 the start
        self._config_state: list[int] = [0, 1]
        self._config_node: list[int] = [0, 0]
        self._config_count: list[int] = [0, 0]
        self._config_ids: dict[tuple[int, int, int], int] = {(0, 0, 0): 0, (1, 0, 0): 1}
        # masks by configuration, where counts far from the bounds share one (`_Counts.key`)
        self._config_masks = MaskCache(self.vocab_size)

    # ------------------------------------------------------------ configurations
    @property
    def machine_names(self) -> tuple[str, ...]:
        return tuple(self.metadata.get("machines", ()))

    def stack(self, state: int) -> tuple[int, tuple[int, ...]]:
        """The table state of a state id and its stack of return states (bottom first)."""
        config = self._check_state(state)
        node, returns = self._config_node[config], []
        while node:
            returns.append(self._node_top[node])
            node = self._node_below[node]
        return self._config_state[config], tuple(reversed(returns))

    def count(self, state: int) -> int:
        """The repetitions started in the counted loop a state id is in (0 outside loops)."""
        return self._config_count[self._check_state(state)]

    def _config(self, table_state: int, node: int, count: int = 0) -> int:
        if table_state == 0:
            return 0
        key = (table_state, node, count)
        found = self._config_ids.get(key)
        if found is None:
            found = self._config_ids[key] = len(self._config_state)
            self._config_state.append(table_state)
            self._config_node.append(node)
            self._config_count.append(count)
        return found

    def _push(self, node: int, sequence: int) -> int:
        for ret in self._push_states[self._push_ptr[sequence]:self._push_ptr[sequence + 1]]:
            node = self._push_return(node, int(ret))
        return node

    def _push_return(self, node: int, ret: int) -> int:
        found = self._node_ids.get((node, ret))
        if found is None:
            found = self._node_ids[(node, ret)] = len(self._node_below)
            cost, below = int(self.table.min_tokens_to_accept[ret]), self._node_cost[node]
            self._node_below.append(node)
            self._node_top.append(ret)
            self._node_ends.append(self._node_ends[node] and bool(self.table.accepting[ret]))
            self._node_cost.append(-1 if cost < 0 or below < 0 else cost + below)
        return found

    def _resolve(self, suffix: int, node: int) -> tuple[int, int, int]:
        """(table state, stack, count) after returning to the top of `node` and reading the
        suffix; table state _DEAD when the text dies."""
        while node:
            below, ret = self._node_below[node], self._node_top[node]
            key = ret * max(self._num_suffixes, 1) + suffix
            j = int(np.searchsorted(self._suffix_key, key))
            if j == len(self._suffix_key) or self._suffix_key[j] != key:
                return _DEAD, 0, 0
            nxt, arg = int(self._suffix_next[j]), int(self._suffix_arg[j])
            if nxt >= 0:
                return nxt, self._push(below, arg), self._counts.reps_after_suffix(j, nxt)
            suffix, node = arg, below
        return _DEAD, 0, 0

    def _stack_entry(self, table_state: int, token: int) -> int:
        lo, hi = self._stack_ptr[table_state], self._stack_ptr[table_state + 1]
        j = lo + int(np.searchsorted(self._stack_token[lo:hi], token))
        return j if j < hi and self._stack_token[j] == token else -1

    # ------------------------------------------------------------ the Grammar API
    def _state_limit(self) -> int:
        return len(self._config_state)  # the configurations interned so far

    def is_accepting(self, state: int) -> bool:
        config = self._check_state(state)
        return bool(self.table.accepting[self._config_state[config]]) and \
            self._node_ends[self._config_node[config]]

    def state_name(self, state: int) -> str | None:
        self._check_state(state)
        return None

    def tokens_to_accept(self, state: int) -> int:
        """Tokens that reach an accepting state from `state` (an upper bound of the fewest;
        -1: none), the final EOS not counted."""
        config = self._check_state(state)
        return self._cost(self._config_state[config], self._config_node[config],
                          self._config_count[config])

    def _cost(self, table_state: int, node: int, count: int = 0) -> int:
        """`tokens_to_accept` of a configuration, without giving it an id."""
        if table_state == _DEAD:
            return -1
        cost, below = self._counts.cost(table_state, count), self._node_cost[node]
        return -1 if cost < 0 or below < 0 else cost + below

    def mask(self, state: int, *, budget: int | None = None) -> np.ndarray:
        if budget is not None:
            return read_only(self.mask_within(state, budget))
        config = self._check_state(state)
        q, node = self._config_state[config], self._config_node[config]
        key = (q, node, *self._counts.key(q, self._config_count[config]))
        return self._config_masks.get(key, lambda: self._build_mask(config))

    def _build_mask(self, config: int) -> np.ndarray:
        q, node = self._config_state[config], self._config_node[config]
        mask = self._cached_mask(int(self.table.state_row[q]), allowed=True).copy()
        lo, hi = self._stack_ptr[q], self._stack_ptr[q + 1]
        nxt, arg = self._stack_next[lo:hi], self._stack_arg[lo:hi]
        tokens = self._stack_token[lo:hi]
        mask[tokens[nxt >= 0]] = True
        returning = np.flatnonzero(nxt < 0)
        alive = {s: self._resolve(s, node)[0] != _DEAD for s in set(arg[returning].tolist())}
        mask[tokens[returning[[alive[s] for s in arg[returning].tolist()]]]] = True
        if self._counts.row[q] >= 0:
            mask &= self._counts.allowed(q, self._config_count[config])
        mask[self._eos] = self.is_accepting(config)
        return mask

    def next_state(self, state: int, token_id: int) -> int:
        config = self._check_state(state)
        token_id = integer(token_id, "a token id")
        if not 0 <= token_id < self.vocab_size:
            return 0
        if token_id in self.eos_token_ids:
            return config if self.is_accepting(config) else 0
        q, node = self._config_state[config], self._config_node[config]
        count = self._counts.after(q, self._config_count[config], token_id)
        if count is None:
            return 0
        plain = self._table_next(q, token_id)
        if plain:
            return self._config(plain, node, count if self._counts.row[plain] >= 0 else 0)
        j = self._stack_entry(q, token_id)
        if j < 0:
            return 0
        nxt, arg = int(self._stack_next[j]), int(self._stack_arg[j])
        if nxt >= 0:
            return self._config(nxt, self._push(node, arg), self._counts.reps_after_stack(j, nxt))
        table_state, node, count = self._resolve(arg, node)
        return 0 if table_state == _DEAD else self._config(table_state, node, count)

    def advance(self, states, tokens):
        if is_torch(states) or is_torch(tokens):
            from ._torch import on_numpy

            return on_numpy(self.advance, states, tokens)
        states = integer_array(states, "states")
        tokens = integer_array(tokens, "tokens")
        if states.shape != tokens.shape:
            raise ValueError(f"states {states.shape} and tokens {tokens.shape} differ in shape")
        self._check_states(states)
        out = np.fromiter((self.next_state(s, t) for s, t in zip(states.flat, tokens.flat)),
                          np.int64, states.size)
        return out.reshape(states.shape)

    def mask_within(self, state: int, budget: int) -> np.ndarray:
        """`mask(state)` restricted to tokens after which the text can still end within
        `budget` more tokens, the final EOS included, counting by `tokens_to_accept` (an
        upper bound here: a token may be refused that a shorter ending would allow)."""
        config, budget = self._check_state(state), integer(budget, "budget")
        q, node, count = (self._config_state[config], self._config_node[config],
                          self._config_count[config])
        below = self._node_cost[node]  # the frames below finish after the ordinary tokens
        if below < 0:
            mask = np.zeros(self.vocab_size, np.bool_)
        elif self._counts.row[q] >= 0:
            mask = self._counts.row_within(self.table, q, count, budget - below)
        else:
            mask = self._row_within(q, budget - below)
        lo, hi = self._stack_ptr[q], self._stack_ptr[q + 1]
        for j, token, nxt, arg in zip(range(lo, hi), self._stack_token[lo:hi].tolist(),
                                      self._stack_next[lo:hi].tolist(),
                                      self._stack_arg[lo:hi].tolist()):
            if self._counts.after(q, count, token) is None:
                need = -1
            elif nxt >= 0:
                need = self._cost(nxt, self._push(node, arg),
                                  self._counts.reps_after_stack(j, nxt))
            else:
                need = self._cost(*self._resolve(arg, node))
            mask[token] = 0 <= need and need + 2 <= budget
        mask[self._eos] = self.is_accepting(config) and budget >= 1
        return mask

    def apply(self, logits, states, *, budget: int | None = None, inplace: bool = False):
        check_logits(logits)
        if is_torch(logits):
            from ._torch import masked_by_numpy

            return masked_by_numpy(self, logits, states, budget, inplace)
        states, batched = self.states_for(logits.ndim, logits.shape, states)
        out = logits if inplace else logits.copy()
        view = out if batched else out[None, :]
        for i, state in enumerate(states):
            allowed = self.mask(int(state)) if budget is None else \
                self.mask_within(int(state), budget)
            np.copyto(view[i, :self.vocab_size], -np.inf, where=~allowed)
        view[:, self.vocab_size:] = -np.inf
        return out

    def allowed_counts(self) -> np.ndarray:
        """Tokens each table state may allow: its ordinary tokens and all its stack tokens
        (whether a returning one is allowed depends on the stack)."""
        return super().allowed_counts() + np.diff(self._stack_ptr)

    def _next_bytes(self, state: int) -> np.ndarray:
        """Bytes that may come next: the frame's transitions, the first bytes of the machines
        it may call, and where it may return, those of the frames below."""
        table = self._byte_dfa()
        q, node = self._config_state[state], self._config_node[state]
        following = np.zeros(256, np.bool_)
        while q:
            following |= table[q] != 0
            for k in range(self._call_ptr[q], self._call_ptr[q + 1]):
                following |= self._machine_first[self._call_machine[k]]
            if not (self.table.accepting[q] and node):
                break
            q, node = self._node_top[node], self._node_below[node]
        return following

    def _byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        """The live byte edges of a configuration, one per byte (`_byte_move` is the rule)."""
        following = np.flatnonzero(self._next_bytes(state)).tolist()
        return [(b, b, nxt) for b in following if (nxt := self._byte_step(state, b))]

    def _position(self, state: int) -> tuple[int, int, int]:
        return self._config_state[state], self._config_node[state], self._config_count[state]

    def _state_at(self, position: tuple[int, int, int]) -> int:
        return self._config(*position)

    def _byte_move(self, position: tuple[int, int, int],
                   byte: int) -> tuple[int, int, int] | None:
        """One byte by the machines' rules: a transition (within the count's bounds), else a
        call its first byte opens, else a return when the state is final (docs/FORMAT.md);
        None when the text dies. Configurations get no id here: a long text walked is not
        kept (`walk_prefix`)."""
        table = self._byte_dfa()
        q, node, count = position
        while q:
            nxt = int(table[q, byte])
            if nxt:
                nxt, count = self._counts.byte_step(q, nxt, count)
                return (nxt, node, count) if nxt else None
            callee = next((k for k in range(self._call_ptr[q], self._call_ptr[q + 1])
                           if self._machine_first[self._call_machine[k], byte]), None)
            if callee is not None:
                node = self._push_return(node, int(self._call_return[callee]))
                q, count = int(self._machine_start[self._call_machine[callee]]), 0
                continue
            if self.table.accepting[q] and node:
                q, node, count = self._node_top[node], self._node_below[node], 0
                continue
            return None
        return None


class _Counts:
    """The count registers of counted machines (docs/FORMAT.md): what a token does to the
    count inside a loop, and the fewest-token bounds that depend on it. Without counters
    every state is outside every loop."""

    def __init__(self, calls, min_tokens: np.ndarray) -> None:
        num_states = len(min_tokens)
        self.min_tokens = min_tokens
        self.row = calls.get("count_row", np.full(num_states, -1, np.int64))
        self.table = calls.get("count_table", np.zeros((0, 0), np.uint8))
        self.stack_reps = calls.get("stack_reps")
        self.suffix_reps = calls.get("suffix_reps")
        self.complete_cost = calls.get("count_complete_cost")
        loop = calls.get("machine_loop")
        # per state, its machine's loop state, bounds and cost of one repetition
        self.loop = np.zeros(num_states, np.int64)
        self.low = np.zeros(num_states, np.int64)
        self.high = np.full(num_states, -1, np.int64)
        self.item_cost = np.full(num_states, -1, np.int64)
        if loop is not None:
            machine = np.searchsorted(calls["machine_start"], np.arange(num_states),
                                      side="right") - 1
            inside = np.flatnonzero(self.row >= 0)
            self.loop[inside] = loop[machine[inside]]
            self.low[inside] = calls["machine_count_min"][machine[inside]]
            self.high[inside] = calls["machine_count_max"][machine[inside]]
            self.item_cost[inside] = calls["machine_item_cost"][machine[inside]]
        # the most repetitions a token starts: counts further from a bound share a mask
        self.reach = int(self.table.max(initial=0)) // 2 + 1

    def key(self, q: int, count: int) -> tuple[int, int]:
        """What of the count decides the mask of loop state q (nothing outside loops)."""
        if self.row[q] < 0:
            return (0, 0)
        room = self.reach if self.high[q] < 0 else min(int(self.high[q]) - count, self.reach)
        return (room, min(max(int(self.low[q]) - count, 0), self.reach))

    def allowed(self, q: int, count: int) -> np.ndarray:
        """The tokens whose repetitions keep the count of loop state q within bounds."""
        values = self.table[self.row[q]]
        started = values >> 1
        ok = ~(((values & 1) == 1) & (started < self.low[q] - count))
        if self.high[q] >= 0:
            ok &= started <= self.high[q] - count
        return ok

    def after(self, q: int, count: int, token: int) -> int | None:
        """The count after `token` from loop state q (None: the bounds forbid it); 0 outside
        loops."""
        if self.row[q] < 0:
            return 0
        value = int(self.table[self.row[q], token])
        total = count + (value >> 1)
        if 0 <= self.high[q] < total or (value & 1 and total < self.low[q]):
            return None
        return total

    def reps_after_stack(self, entry: int, nxt: int) -> int:
        return int(self.stack_reps[entry]) if self.row[nxt] >= 0 else 0

    def reps_after_suffix(self, entry: int, nxt: int) -> int:
        return int(self.suffix_reps[entry]) if self.row[nxt] >= 0 else 0

    def byte_step(self, q: int, nxt: int, count: int) -> tuple[int, int]:
        """(next state, count) of a byte transition; state 0 when the count forbids it."""
        if self.row[q] < 0 or q != self.loop[q]:
            return nxt, count if self.row[nxt] >= 0 else 0
        if self.row[nxt] >= 0:  # one more repetition
            return (0, 0) if 0 <= self.high[q] <= count else (nxt, count + 1)
        return (nxt, 0) if count >= self.low[q] else (0, 0)

    def cost(self, q: int, count: int) -> int:
        """Tokens that finish q's machine from q with `count` (an upper bound; -1: none):
        below the minimum, end the repetition under way, read the missing ones, then leave."""
        if self.row[q] < 0 or count >= self.low[q]:
            return int(self.min_tokens[q])
        parts = (int(self.complete_cost[q]), int(self.item_cost[q]),
                 int(self.min_tokens[self.loop[q]]))
        if min(parts) < 0:
            return -1
        return parts[0] + parts[1] * (int(self.low[q]) - count) + parts[2]

    def row_within(self, table, q: int, count: int, budget: int) -> np.ndarray:
        """The ordinary tokens of loop state q allowed with `count` after which its machine
        can finish within `budget` tokens (`_row_within` with counts)."""
        lo, hi = table.row_ptr[table.state_row[q]], table.row_ptr[table.state_row[q] + 1]
        delta = np.zeros(table.num_classes, np.int64)
        listed = np.zeros(table.num_classes, np.bool_)
        delta[table.row_class[lo:hi]] = table.row_delta[lo:hi]
        listed[table.row_class[lo:hi]] = True
        nxt = q + delta[table.token_class]
        values = self.table[self.row[q]].astype(np.int64)
        total = count + (values >> 1)
        need = self.min_tokens[nxt].copy()
        short = (self.row[nxt] >= 0) & (total < self.low[nxt])
        if short.any():
            at = nxt[short]
            parts = np.stack([self.complete_cost[at], self.item_cost[at],
                              self.min_tokens[self.loop[at]]])
            more = parts[0] + parts[1] * (self.low[at] - total[short]) + parts[2]
            need[short] = np.where((parts < 0).any(axis=0), -1, more)
        return listed[table.token_class] & self.allowed(q, count) & (need >= 0) & \
            (need + 2 <= budget)
