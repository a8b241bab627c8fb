"""Token alignment: from a byte DFA and a vocabulary to the token-level transition table.

`T[state, token]` is the DFA state reached by walking the token's bytes from `state`, or 0 when
the walk dies; EOS tokens go from an accepting state to itself and are forbidden elsewhere.
It is computed by walking a pre-order trie of the vocabulary from every live state, skipping a
whole subtree as soon as the DFA dies (numba kernels, compile side only). The byte trie is built
once per tokenizer; per grammar it is folded into a trie over the DFA's *byte classes* (bytes
every state treats alike), whose nodes group the tokens that no state can tell apart. For a
regex like `[^eE]{1,200}` that turns 49k tokens into about a thousand groups.

The table is never materialised. It comes out factored:

* **token classes**: tokens whose columns are equal in every state share a class, found exactly
  by partition refinement (each state splits classes by next state). Class 0 holds the tokens
  that are never allowed.
* **rows**: each state's allowed classes with the *relative* next state `next - state`. Rows of a
  counter chain (state k goes to k + chars(token)) are then equal, so rows are deduplicated
  and shared between states.

Finally the table is trimmed at token level: a token is only allowed if some continuation of
tokens can still reach acceptance (a vocabulary without some byte can make a byte-level live
state a dead end), and `min_tokens_to_accept[state]` is the length of the shortest token path
to an accepting state (-1: none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numba
import numpy as np

from .automaton import ByteDFA
from .errors import GrammarError

_CHUNK = 64  # states per kernel call, so progress can be reported


@dataclass(frozen=True)
class VocabTrie:
    """Pre-order byte trie of a vocabulary. Node 0 is the root (the empty string)."""

    node_byte: np.ndarray   # uint8 [N]: the byte on the edge into the node
    node_depth: np.ndarray  # int32 [N]
    node_end: np.ndarray    # int32 [N]: one past the node's last descendant
    tok_ptr: np.ndarray     # int64 [N + 1]: tokens ending at node i are toks[tok_ptr[i]:tok_ptr[i+1]]
    toks: np.ndarray        # int32 [T]

    @property
    def num_nodes(self) -> int:
        return int(self.node_byte.shape[0])


@dataclass(frozen=True)
class TokenTable:
    """The factored token-level table (see the module docstring and docs/FORMAT.md)."""

    token_class: np.ndarray          # int32 [V]
    state_row: np.ndarray            # int32 [S]
    row_ptr: np.ndarray              # int64 [R + 1]
    row_class: np.ndarray            # int32 [N], sorted within each row
    row_delta: np.ndarray            # int32 [N]: next state - state
    min_tokens_to_accept: np.ndarray  # int32 [S], -1 where acceptance is out of reach

    @property
    def num_classes(self) -> int:
        return int(self.token_class.max(initial=0)) + 1


def build_trie(token_bytes: list[bytes | None] | tuple[bytes | None, ...],
               exclude: tuple[int, ...] = ()) -> VocabTrie:
    """The pre-order trie of all tokens with bytes, leaving out the ids in `exclude`."""
    skip = set(exclude)
    items = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in skip)
    ids = np.fromiter((i for _, i in items), np.int32, len(items))
    lengths = np.fromiter((len(b) for b, _ in items), np.int64, len(items))
    offsets = np.zeros(len(items) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(b for b, _ in items), np.uint8)
    node_byte, node_depth, node_end, node_of_item = _build_trie(data, offsets)
    tok_ptr = np.zeros(len(node_byte) + 1, np.int64)
    np.cumsum(np.bincount(node_of_item, minlength=len(node_byte)), out=tok_ptr[1:])
    return VocabTrie(node_byte, node_depth, node_end, tok_ptr, ids)


def tokenizer_trie(tokenizer) -> VocabTrie:
    """The tokenizer's trie (EOS tokens left out), built once and kept on the tokenizer."""
    trie = getattr(tokenizer, "_grammarc_trie", None)
    if trie is None:
        trie = build_trie(tokenizer.token_bytes, exclude=tuple(tokenizer.eos_token_ids))
        tokenizer._grammarc_trie = trie
    return trie


def align(dfa: ByteDFA, trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...],
          progress: Callable[[int, int], None] | None = None) -> TokenTable:
    """The factored token table of `dfa` over the vocabulary in `trie`.

    `progress(done, total)` is called between chunks of states, if given.
    """
    num_states = dfa.num_states
    trans = np.ascontiguousarray(dfa.trans, dtype=np.int32)
    accepting = np.ascontiguousarray(dfa.accepting, dtype=np.bool_)
    label, depth, end, node_of_byte_node = _class_trie(
        trie.node_byte, trie.node_depth, dfa.byte_class.astype(np.int32), dfa.num_classes)
    # items: class-trie nodes that end a token, plus one item for all EOS tokens
    item_of_token = np.full(vocab_size, -1, np.int64)
    byte_node_of_token = np.repeat(np.arange(trie.num_nodes), np.diff(trie.tok_ptr))
    item_of_token[trie.toks] = node_of_byte_node[byte_node_of_token]
    is_item = np.zeros(len(label), np.bool_)
    is_item[item_of_token[trie.toks]] = True
    eos_item = len(label)
    eos = sorted(set(eos_token_ids))
    item_of_token[eos] = eos_item
    walk_args = (depth, end, label, is_item, trans, accepting, eos_item if eos else -1)

    # pass 1: refine item classes state by state
    refiner = _Refiner(eos_item + 1)
    total = 2 * (num_states - 1)
    for lo in range(1, num_states, _CHUNK):
        hi = min(lo + _CHUNK, num_states)
        refiner.next_id = _refine(*walk_args, lo, hi, *refiner.arrays(), refiner.next_id)
        if progress:
            progress(hi - 1, total)
    token_class, item_class, rep = _canonical_classes(refiner.cls, item_of_token)

    # pass 2: each state's allowed classes with their (absolute) next states
    chunks = []
    for lo in range(1, num_states, _CHUNK):
        hi = min(lo + _CHUNK, num_states)
        chunks.append(_rows(*walk_args, lo, hi, item_class, rep))
        if progress:
            progress(num_states - 1 + hi - 1, total)
    counts = np.concatenate([np.zeros(1, np.int64)] + [c[0] for c in chunks])
    entry_class = np.concatenate([np.zeros(0, np.int32)] + [c[1] for c in chunks])
    entry_next = np.concatenate([np.zeros(0, np.int32)] + [c[2] for c in chunks])
    state_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(counts, out=state_ptr[1:])

    min_tokens = _min_tokens_to_accept(state_ptr, entry_next, accepting)
    if min_tokens[1] < 0:
        raise GrammarError("no sequence of this vocabulary's tokens spells a string of the "
                           "grammar's language")
    state_row, row_ptr, row_class, row_delta = _dedupe_rows(state_ptr, entry_class, entry_next,
                                                            min_tokens)
    return TokenTable(token_class, state_row, row_ptr, row_class, row_delta, min_tokens)


class _Refiner:
    """The mutable partition of items carried across chunks of pass 1."""

    def __init__(self, num_items: int) -> None:
        cap = 2 * num_items + 2
        self.cls = np.zeros(num_items, np.int32)
        self.size = np.zeros(cap, np.int64)
        self.size[0] = num_items
        self.free = np.zeros(cap, np.int32)
        self.n_free = np.zeros(1, np.int64)
        table = 1 << max(4, int(2 * num_items).bit_length())
        self.ht_stamp = np.full(table, -1, np.int64)
        self.ht_class = np.zeros(table, np.int32)
        self.ht_next = np.zeros(table, np.int32)
        self.ht_new = np.zeros(table, np.int32)
        self.pending = np.zeros(cap, np.int32)
        self.next_id = 1

    def arrays(self):
        return (self.cls, self.size, self.free, self.n_free, self.ht_stamp, self.ht_class,
                self.ht_next, self.ht_new, self.pending)


@numba.njit(cache=True)
def _build_trie(data, offsets):
    """Pre-order trie of byte strings given in sorted order; returns node arrays."""
    n_items = len(offsets) - 1
    cap = len(data) + 1
    node_byte = np.zeros(cap, np.uint8)
    node_depth = np.zeros(cap, np.int32)
    node_end = np.zeros(cap, np.int32)
    node_of_item = np.zeros(n_items, np.int32)
    max_len = 0
    for i in range(n_items):
        max_len = max(max_len, offsets[i + 1] - offsets[i])
    path = np.zeros(max_len + 1, np.int32)  # path[d] = node at depth d on the current branch
    n = 1
    prev_lo = 0
    prev_len = 0
    for i in range(n_items):
        lo = offsets[i]
        length = offsets[i + 1] - lo
        common = 0
        while common < length and common < prev_len and data[lo + common] == data[prev_lo + common]:
            common += 1
        # nodes deeper than the common prefix are finished
        for d in range(prev_len, common, -1):
            node_end[path[d]] = n
        for d in range(common + 1, length + 1):
            node_byte[n] = data[lo + d - 1]
            node_depth[n] = d
            path[d] = n
            n += 1
        node_of_item[i] = path[length]
        prev_lo = lo
        prev_len = length
    for d in range(prev_len, 0, -1):
        node_end[path[d]] = n
    node_end[0] = n
    return node_byte[:n].copy(), node_depth[:n].copy(), node_end[:n].copy(), node_of_item


@numba.njit(cache=True)
def _class_trie(node_byte, node_depth, byte_class, n_classes):
    """Fold the byte trie into a pre-order trie over byte classes.

    Returns (label, depth, end) of the class trie and, for each byte-trie node, its class-trie
    node. Children are ordered by class, so the result is deterministic.
    """
    n = len(node_byte)
    path = np.zeros(int(node_depth.max()) + 1, np.int64)
    table_size = 16
    while table_size < 2 * n:
        table_size *= 2
    keys = np.full(table_size, -1, np.int64)
    vals = np.zeros(table_size, np.int64)
    parent = np.full(n, -1, np.int64)
    c_label = np.zeros(n, np.int32)
    created = np.zeros(n, np.int64)  # class node of each byte node, in creation numbering
    n_c = 1
    for i in range(1, n):
        p = path[node_depth[i] - 1]
        lab = byte_class[node_byte[i]]
        key = p * n_classes + lab
        slot = (key * 2654435761) & (table_size - 1)
        while keys[slot] != -1 and keys[slot] != key:
            slot = (slot + 1) & (table_size - 1)
        if keys[slot] == -1:
            keys[slot] = key
            vals[slot] = n_c
            parent[n_c] = p
            c_label[n_c] = lab
            n_c += 1
        node = vals[slot]
        path[node_depth[i]] = node
        created[i] = node
    # children lists ordered by label, then an iterative pre-order traversal
    child_count = np.zeros(n_c + 1, np.int64)
    for c in range(1, n_c):
        child_count[parent[c] + 1] += 1
    for c in range(n_c):
        child_count[c + 1] += child_count[c]
    fill = child_count[:-1].copy()
    children = np.zeros(max(n_c - 1, 1), np.int64)
    for c in range(1, n_c):
        children[fill[parent[c]]] = c
        fill[parent[c]] += 1
    for c in range(n_c):
        lo, hi = child_count[c], child_count[c + 1]
        if hi - lo > 1:
            order = np.argsort(c_label[children[lo:hi]], kind="mergesort")
            children[lo:hi] = children[lo:hi][order]
    size = np.ones(n_c, np.int64)
    for c in range(n_c - 1, 0, -1):  # children are created after their parent
        size[parent[c]] += size[c]
    pre = np.zeros(n_c, np.int64)
    depth = np.zeros(n_c, np.int32)
    stack = np.zeros(n_c, np.int64)
    sp = 1
    counter = 0
    while sp > 0:
        sp -= 1
        c = stack[sp]
        pre[c] = counter
        counter += 1
        for j in range(child_count[c + 1] - 1, child_count[c] - 1, -1):
            child = children[j]
            depth[child] = depth[c] + 1
            stack[sp] = child
            sp += 1
    label = np.zeros(n_c, np.int32)
    out_depth = np.zeros(n_c, np.int32)
    end = np.zeros(n_c, np.int32)
    for c in range(n_c):
        label[pre[c]] = c_label[c]
        out_depth[pre[c]] = depth[c]
        end[pre[c]] = pre[c] + size[c]
    node_of_byte_node = np.zeros(n, np.int64)
    for i in range(n):
        node_of_byte_node[i] = pre[created[i]]
    return label, out_depth, end, node_of_byte_node


@numba.njit(cache=True)
def _walk_state(s, depth, end, label, is_item, trans, accepting, eos_item, stack, out_item,
                out_next):
    """All (item, next state) pairs allowed in state `s`; returns how many were written."""
    n_nodes = len(depth)
    n_out = 0
    stack[0] = s
    i = 1
    while i < n_nodes:
        t = trans[stack[depth[i] - 1], label[i]]
        if t == 0:
            i = end[i]
            continue
        stack[depth[i]] = t
        if is_item[i]:
            out_item[n_out] = i
            out_next[n_out] = t
            n_out += 1
        i += 1
    if accepting[s] and eos_item >= 0:
        out_item[n_out] = eos_item
        out_next[n_out] = s
        n_out += 1
    return n_out


@numba.njit(cache=True)
def _refine(depth, end, label, is_item, trans, accepting, eos_item, lo, hi, cls, size, free,
            n_free, ht_stamp, ht_class, ht_next, ht_new, pending, next_id):
    """Split item classes by the next state each item reaches, for states lo..hi-1."""
    mask = len(ht_stamp) - 1
    stack = np.zeros(int(depth.max()) + 1, np.int32)
    out_item = np.empty(len(depth) + 1, np.int32)
    out_next = np.empty(len(depth) + 1, np.int32)
    for s in range(lo, hi):
        n_out = _walk_state(s, depth, end, label, is_item, trans, accepting, eos_item, stack,
                            out_item, out_next)
        n_pending = 0
        for k in range(n_out):
            item = out_item[k]
            t = out_next[k]
            c = cls[item]
            slot = ((np.int64(c) * 1000003 + np.int64(t) * 7919) * 2654435761) & mask
            while ht_stamp[slot] == s and (ht_class[slot] != c or ht_next[slot] != t):
                slot = (slot + 1) & mask
            if ht_stamp[slot] != s:
                ht_stamp[slot] = s
                ht_class[slot] = c
                ht_next[slot] = t
                if n_free[0] > 0:
                    n_free[0] -= 1
                    ht_new[slot] = free[n_free[0]]
                else:
                    ht_new[slot] = next_id
                    next_id += 1
            new = ht_new[slot]
            cls[item] = new
            size[new] += 1
            size[c] -= 1
            if size[c] == 0 and c != 0:
                pending[n_pending] = c
                n_pending += 1
        # classes emptied in this state may be reused from the next state on
        for p in range(n_pending):
            free[n_free[0]] = pending[p]
            n_free[0] += 1
    return next_id


def _canonical_classes(item_cls: np.ndarray, item_of_token: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Canonical class numbers: 0 = never allowed, the others by their smallest token id.

    Returns (class of each token, class of each item, one representative item per class).
    """
    raw = np.where(item_of_token >= 0, item_cls[np.maximum(item_of_token, 0)], 0)
    ids, first_token = np.unique(raw, return_index=True)
    nonzero = ids != 0
    ids, first_token = ids[nonzero], first_token[nonzero]
    order = np.argsort(first_token, kind="stable")
    new_of_old = np.zeros(int(item_cls.max(initial=0)) + 1, np.int32)
    new_of_old[ids[order]] = np.arange(1, len(ids) + 1, dtype=np.int32)
    item_class = new_of_old[item_cls]
    rep = np.full(len(ids) + 1, -1, np.int32)
    rep[new_of_old[ids]] = item_of_token[first_token]
    return new_of_old[raw], item_class, rep


@numba.njit(cache=True)
def _rows(depth, end, label, is_item, trans, accepting, eos_item, lo, hi, item_class, rep):
    """For states lo..hi-1: (entries per state, class of each entry, next state of each entry).

    One entry per allowed class (its representative item stands for it), sorted by class.
    """
    stack = np.zeros(int(depth.max()) + 1, np.int32)
    out_item = np.empty(len(depth) + 1, np.int32)
    out_next = np.empty(len(depth) + 1, np.int32)
    counts = np.zeros(hi - lo, np.int64)
    chunk_class = []
    chunk_next = []
    for s in range(lo, hi):
        n_out = _walk_state(s, depth, end, label, is_item, trans, accepting, eos_item, stack,
                            out_item, out_next)
        n_rep = 0
        for k in range(n_out):
            c = item_class[out_item[k]]
            if rep[c] == out_item[k]:
                out_item[n_rep] = c
                out_next[n_rep] = out_next[k]
                n_rep += 1
        order = np.argsort(out_item[:n_rep], kind="mergesort")
        chunk_class.append(out_item[:n_rep][order])
        chunk_next.append(out_next[:n_rep][order])
        counts[s - lo] = n_rep
    total = 0
    for c in counts:
        total += c
    all_class = np.empty(total, np.int32)
    all_next = np.empty(total, np.int32)
    pos = 0
    for j in range(len(chunk_class)):
        m = len(chunk_class[j])
        all_class[pos:pos + m] = chunk_class[j]
        all_next[pos:pos + m] = chunk_next[j]
        pos += m
    return counts, all_class, all_next


@numba.njit(cache=True)
def _min_tokens_to_accept(state_ptr, entry_next, accepting):
    """Breadth-first search backwards from accepting states over the token graph."""
    n = len(accepting)
    indeg = np.zeros(n + 1, np.int64)
    for e in range(len(entry_next)):
        indeg[entry_next[e] + 1] += 1
    for v in range(n):
        indeg[v + 1] += indeg[v]
    fill = indeg[:-1].copy()
    src = np.empty(len(entry_next), np.int32)
    for s in range(n):
        for e in range(state_ptr[s], state_ptr[s + 1]):
            t = entry_next[e]
            src[fill[t]] = s
            fill[t] += 1
    dist = np.full(n, -1, np.int32)
    queue = np.empty(n, np.int32)
    head = 0
    tail = 0
    for s in range(1, n):
        if accepting[s]:
            dist[s] = 0
            queue[tail] = s
            tail += 1
    while head < tail:
        t = queue[head]
        head += 1
        for e in range(indeg[t], indeg[t + 1]):
            s = src[e]
            if dist[s] == -1:
                dist[s] = dist[t] + 1
                queue[tail] = s
                tail += 1
    return dist


@numba.njit(cache=True)
def _dedupe_rows(state_ptr, entry_class, entry_next, min_tokens):
    """Trim entries into dead ends, make them relative, and share equal rows between states."""
    n = len(state_ptr) - 1
    state_row = np.zeros(n, np.int32)
    row_ptr = np.zeros(n + 2, np.int64)
    row_class = np.empty(len(entry_class), np.int32)
    row_delta = np.empty(len(entry_class), np.int32)
    row_hash = np.zeros(n + 1, np.uint64)
    table_size = 1
    while table_size < 4 * (n + 1):
        table_size *= 2
    table = np.full(table_size, -1, np.int32)
    # row 0: the empty row
    n_rows = 1
    h0 = np.uint64(1469598103934665603)
    row_hash[0] = h0
    slot0 = np.int64(h0 & np.uint64(table_size - 1))
    table[slot0] = 0
    n_entries = 0
    for s in range(n):
        start = n_entries
        if min_tokens[s] >= 0:
            for e in range(state_ptr[s], state_ptr[s + 1]):
                t = entry_next[e]
                if min_tokens[t] >= 0:
                    row_class[n_entries] = entry_class[e]
                    row_delta[n_entries] = t - s
                    n_entries += 1
        h = np.uint64(1469598103934665603)
        for e in range(start, n_entries):
            h = (h ^ np.uint64(row_class[e])) * np.uint64(1099511628211)
            h = (h ^ np.uint64(np.uint32(row_delta[e]))) * np.uint64(1099511628211)
            h ^= h >> np.uint64(31)
        length = n_entries - start
        slot = np.int64(h & np.uint64(table_size - 1))
        found = -1
        while table[slot] != -1:
            r = table[slot]
            if row_hash[r] == h and row_ptr[r + 1] - row_ptr[r] == length:
                same = True
                base = row_ptr[r]
                for j in range(length):
                    if row_class[base + j] != row_class[start + j] or \
                            row_delta[base + j] != row_delta[start + j]:
                        same = False
                        break
                if same:
                    found = r
                    break
            slot = (slot + 1) & (table_size - 1)
        if found == -1:
            found = n_rows
            table[slot] = found
            row_hash[found] = h
            row_ptr[found + 1] = n_entries
            n_rows += 1
        else:
            n_entries = start  # drop the duplicate entries just written
        state_row[s] = found
    return state_row, row_ptr[:n_rows + 1].copy(), row_class[:n_entries].copy(), \
        row_delta[:n_entries].copy()

