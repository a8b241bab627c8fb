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

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable

import numba
import numpy as np

from .automaton import ByteDFA
from .automaton.arrays import grouped, grown
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
    tok_node: np.ndarray    # int64 [T]: the node where toks[j] ends

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
    return VocabTrie(node_byte, node_depth, node_end, tok_ptr, ids, node_of_item.astype(np.int64))


def tokenizer_trie(tokenizer) -> VocabTrie:
    """The tokenizer's trie (EOS tokens left out), built once and kept on the tokenizer."""
    trie = getattr(tokenizer, "_grammarc_trie", None)
    if trie is None:
        trie = build_trie(tokenizer.token_bytes, exclude=tuple(tokenizer.eos_token_ids))
        tokenizer._grammarc_trie = trie
    return trie


def align(dfa: ByteDFA, trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...],
          progress: Callable[[int, int], None] | None = None,
          timings: dict[str, float] | None = None) -> TokenTable:
    """The factored token table of `dfa` over the vocabulary in `trie`.

    `progress(done, total)` is called between chunks of states, if given. `timings`, if given,
    receives the seconds spent walking the trie (`alignment`: the walk and the class
    refinement) and building the factored table from it (`factoring`).
    """
    started = time.perf_counter()
    entries = walk_entries(dfa, trie, vocab_size, eos_token_ids, progress)
    walked = time.perf_counter()
    table = factor(entries, dfa.accepting)
    if timings is not None:
        timings["alignment"] = timings.get("alignment", 0.0) + walked - started
        timings["factoring"] = timings.get("factoring", 0.0) + time.perf_counter() - walked
    return table


@dataclass(frozen=True)
class TokenEntries:
    """Every state's allowed token classes and the states they lead to, before factoring."""

    token_class: np.ndarray  # int32 [V]
    state_ptr: np.ndarray    # int64 [S + 1]
    entry_class: np.ndarray  # int32 [N], sorted within each state
    entry_next: np.ndarray   # int32 [N]


def walk_entries(dfa: ByteDFA, trie: VocabTrie, vocab_size: int,
                 eos_token_ids: tuple[int, ...],
                 progress: Callable[[int, int], None] | None = None) -> TokenEntries:
    """Walk the vocabulary from every state: token classes and each state's entries."""
    num_states, num_classes = dfa.trans.shape
    byte_class = dfa.byte_class.astype(np.int32)
    if _byte_walk_estimate(dfa, trie) < trie.num_nodes:
        # a narrow grammar: walking the byte trie costs less than folding it
        label, depth, end = byte_class[trie.node_byte], trie.node_depth, trie.node_end
        node_of_byte_node = np.arange(trie.num_nodes)
    else:
        label, depth, end, node_of_byte_node = _class_trie(
            trie.node_byte, trie.node_depth, byte_class, num_classes)
    # items: class-trie nodes that end a token, plus one item for all EOS tokens
    item_of_token = np.full(vocab_size, -1, np.int64)
    item_of_token[trie.toks] = node_of_byte_node[trie.tok_node]
    is_item = np.zeros(len(label), np.int32)
    is_item[item_of_token[trie.toks]] = 1
    eos_item = len(label)
    eos = sorted(set(eos_token_ids))
    item_of_token[eos] = eos_item
    # one int32 per node: depth, byte class and "ends a token", read by the walk in one load
    code = (depth.astype(np.int32) << 16) | (label << 1) | is_item
    # transitions as offsets of the next state's row, -1 for the dead state
    offset_type = np.int32 if num_states * num_classes < 2**31 else np.int64
    trans_off = np.where(dfa.trans == 0, -1, dfa.trans.astype(np.int64) * num_classes
                         ).astype(offset_type).reshape(-1)
    accepting = np.ascontiguousarray(dfa.accepting, dtype=np.bool_)

    walk = (code, end, trans_off, num_classes, accepting, eos_item if eos else -1)
    forests = _refine_all(walk, eos_item + 1, num_states, progress)
    token_class, canon_of_item = _canonical_classes(
        np.stack([f.cls for f in forests]), item_of_token)
    state_ptr, entry_class, entry_next = _expand_all(forests, canon_of_item, num_states,
                                                     num_classes)
    return TokenEntries(token_class, state_ptr, entry_class, entry_next)


def factor(entries: TokenEntries, accepting: np.ndarray) -> TokenTable:
    """Trim entries into states that cannot reach `accepting`, then share equal rows."""
    accepting = np.ascontiguousarray(accepting, dtype=np.bool_)
    min_tokens = _min_tokens_to_accept(entries.state_ptr, entries.entry_next, accepting)
    if min_tokens[1] < 0:
        raise GrammarError("no sequence of this vocabulary's tokens spells a string of the "
                           "grammar's language")
    state_row, row_ptr, row_class, row_delta = _dedupe_rows(
        entries.state_ptr, entries.entry_class, entries.entry_next, min_tokens)
    return TokenTable(entries.token_class, state_row, row_ptr, row_class, row_delta, min_tokens)


def _byte_walk_estimate(dfa: ByteDFA, trie: VocabTrie) -> int:
    """An upper bound of the trie nodes a byte-trie walk visits from all states: each state's
    live first bytes times the size of the subtrees below them."""
    first_level = np.flatnonzero(trie.node_depth == 1)
    subtree = np.zeros(256, np.int64)
    subtree[trie.node_byte[first_level]] = trie.node_end[first_level] - first_level
    per_class = np.bincount(dfa.byte_class, weights=subtree, minlength=dfa.num_classes)
    return int(((dfa.trans[1:] != 0).astype(np.int64) @ per_class.astype(np.int64)).sum())


def _refine_all(walk: tuple, num_items: int, num_states: int,
                progress: Callable[[int, int], None] | None) -> list["_SplitForest"]:
    """Refine over all states, on up to two threads, each with its own split forest.

    The final classes do not depend on which forest saw which state: they are the common
    refinement of all forests (see `_canonical_classes`).
    """
    chunks = [(lo, min(lo + _CHUNK, num_states)) for lo in range(1, num_states, _CHUNK)]
    workers = min(len(chunks), os.cpu_count() or 1, 2)
    forests = [_SplitForest(num_items, num_states) for _ in range(workers)]
    if workers <= 1:
        for lo, hi in chunks:
            forests[0].refine(*walk, lo, hi)
            if progress:
                progress(hi - 1, num_states - 1)
        return forests
    queue = iter(chunks)
    lock = threading.Lock()
    done = [0]

    def work(forest: _SplitForest) -> None:
        while True:
            with lock:
                chunk = next(queue, None)
            if chunk is None:
                return
            forest.refine(*walk, *chunk)
            with lock:
                done[0] += chunk[1] - chunk[0]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(work, forest) for forest in forests]
        while not all(f.done() for f in futures):
            wait(futures, timeout=0.1)
            if progress:
                progress(done[0], num_states - 1)
        for future in futures:
            future.result()
    return forests


def _expand_all(forests: list["_SplitForest"], canon_of_item: np.ndarray, num_states: int,
                num_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every state's row, from the forest that walked it: (state_ptr, class, next state)."""
    counts = np.zeros(num_states, np.int64)
    parts = []
    for forest in forests:
        part = _expand_records(forest.parent[:forest.n_ids], forest.cls, canon_of_item,
                               forest.rec_id[:forest.n_rec], forest.rec_next[:forest.n_rec],
                               forest.rec_start, forest.rec_end, num_classes)
        counts += part[0]
        parts.append(part)
    state_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(counts, out=state_ptr[1:])
    entry_class = np.zeros(state_ptr[-1], np.int32)
    entry_next = np.zeros(state_ptr[-1], np.int32)
    for part_counts, part_class, part_next in parts:
        # entries come in state order; each goes to its state's slot in the merged arrays
        local_start = np.repeat(np.cumsum(part_counts) - part_counts, part_counts)
        dest = np.repeat(state_ptr[:-1], part_counts) + np.arange(len(part_class)) - local_start
        entry_class[dest] = part_class
        entry_next[dest] = part_next
    return state_ptr, entry_class, entry_next


class _SplitForest:
    """Partition refinement of items, state by state, remembering every split.

    Each state sorts the items it allows into groups by (current class, next state); every
    group becomes a new class whose parent is the class it came from, and the state records
    (group, next state). At the end, a recorded group stands for all final classes below it in
    the forest, which gives each state's row without walking the trie a second time.
    """

    def __init__(self, num_items: int, num_states: int) -> None:
        self.cls = np.zeros(num_items, np.int32)
        # grown by _refine as needed; small grammars never touch much memory
        self.parent = np.zeros(4096, np.int32)
        self.n_ids = 1  # id 0: the class of items no state has allowed yet
        self.rec_id = np.zeros(4096, np.int32)
        self.rec_next = np.zeros(4096, np.int64)
        self.n_rec = 0
        self.rec_start = np.zeros(num_states, np.int64)  # records of state s: rec_start[s]..
        self.rec_end = np.zeros(num_states, np.int64)    # ..rec_end[s]; empty if not walked here
        self.ht_stamp = np.zeros(1024, np.int64)
        self.ht_class = np.zeros(1024, np.int32)
        self.ht_next = np.zeros(1024, np.int64)
        self.ht_new = np.zeros(1024, np.int32)
        self.first_stamp = np.zeros(4096, np.int64)  # per class, see _refine
        self.first_next = np.zeros(4096, np.int64)
        self.first_new = np.zeros(4096, np.int32)
        self.out_item = np.zeros(num_items + 1, np.int32)
        self.out_next = np.zeros(num_items + 1, np.int64)

    def refine(self, code, end, trans_off, num_classes, accepting, eos_item, lo, hi) -> None:
        stack = np.zeros(int(code.max(initial=0) >> 16) + 1, trans_off.dtype)
        (self.parent, self.rec_id, self.rec_next, self.n_ids, self.n_rec, self.first_stamp,
         self.first_next, self.first_new, self.ht_stamp, self.ht_class, self.ht_next,
         self.ht_new) = _refine(
            code, end, trans_off, num_classes, accepting, eos_item, lo, hi, self.cls,
            self.parent, self.n_ids, self.rec_id, self.rec_next, self.n_rec,
            self.rec_start, self.rec_end, self.ht_stamp, self.ht_class, self.ht_next, self.ht_new,
            self.first_stamp, self.first_next, self.first_new, self.out_item, self.out_next,
            stack)


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
    node. Children are kept in per-node lists (few per node), so the fold is one pass.
    """
    n = len(node_byte)
    path = np.zeros(int(node_depth.max()) + 1, np.int64)
    first_child = np.full(n, -1, np.int64)
    sibling = np.full(n, -1, np.int64)
    parent = np.full(n, -1, np.int64)
    c_label = np.zeros(n, np.int32)
    created = np.zeros(n, np.int64)  # class node of each byte node, in creation numbering
    n_c = 1
    for i in range(1, n):
        d = node_depth[i]
        p = path[d - 1]
        lab = byte_class[node_byte[i]]
        q = first_child[p]
        while q != -1 and c_label[q] != lab:
            q = sibling[q]
        if q == -1:
            q = n_c
            n_c += 1
            c_label[q] = lab
            parent[q] = p
            sibling[q] = first_child[p]
            first_child[p] = q
        path[d] = q
        created[i] = q
    size = np.ones(n_c, np.int64)
    for c in range(n_c - 1, 0, -1):  # children are created after their parent
        size[parent[c]] += size[c]
    # pre-order numbering: a child starts right after its parent or its previous sibling's subtree
    pre = np.zeros(n_c, np.int64)
    depth = np.zeros(n_c, np.int32)
    for c in range(1, n_c):  # parents are numbered before their children
        p = parent[c]
        start = pre[p] + 1
        q = first_child[p]
        while q != c:
            start += size[q]
            q = sibling[q]
        pre[c] = start
        depth[c] = depth[p] + 1
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


@numba.njit(cache=True, nogil=True)
def _refine(code, end, trans_off, n_classes, accepting, eos_item, lo, hi, cls, parent, n_ids,
            rec_id, rec_next, n_rec, rec_start, rec_end, ht_stamp, ht_class, ht_next, ht_new,
            first_stamp, first_next, first_new, out_item, out_next, stack):
    """Walk the trie from states lo..hi-1 and split item classes by next state (see
    `_SplitForest`). Returns the (possibly grown) forest arrays and counters."""
    n_nodes = len(code)
    mask = len(ht_stamp) - 1
    for s in range(lo, hi):
        mark = s + 1  # stamps are 0 until first written
        rec_start[s] = n_rec
        # the walk: descend while the DFA lives, skip a subtree as soon as it dies
        k = 0
        stack[0] = s * n_classes
        i = 1
        while i < n_nodes:
            cd = code[i]
            d = cd >> 16
            t = trans_off[stack[d - 1] + ((cd >> 1) & 0x7FFF)]
            if t < 0:
                i = end[i]
                continue
            stack[d] = t
            out_item[k] = i
            out_next[k] = t
            k += cd & 1
            i += 1
        if accepting[s] and eos_item >= 0:
            out_item[k] = eos_item
            out_next[k] = s * n_classes
            k += 1
        if n_ids + k > len(parent):
            parent = grown(parent, n_ids, 2 * (n_ids + k))
        if n_rec + k > len(rec_id):
            rec_id = grown(rec_id, n_rec, 2 * (n_rec + k))
            rec_next = grown(rec_next, n_rec, 2 * (n_rec + k))
        if 2 * k > len(ht_stamp):
            size = len(ht_stamp)
            while size < 2 * k:
                size *= 2
            ht_stamp = np.zeros(size, np.int64)  # stamps of earlier states are stale anyway
            ht_class = np.zeros(size, np.int32)
            ht_next = np.zeros(size, np.int64)
            ht_new = np.zeros(size, np.int32)
            mask = size - 1
        if n_ids + k > len(first_stamp):
            size = 2 * (n_ids + k)
            first_stamp = grown(first_stamp, n_ids, size)
            first_next = grown(first_next, n_ids, size)
            first_new = grown(first_new, n_ids, size)
        # the split: one new class per (current class, next state) among allowed items. The
        # first next state of each class in this state sits in first_*; others in a hash table.
        for j in range(k):
            item = out_item[j]
            t = out_next[j]
            c = cls[item]
            if first_stamp[c] == mark and first_next[c] == t:
                cls[item] = first_new[c]
                continue
            if first_stamp[c] != mark:
                first_stamp[c] = mark
                first_next[c] = t
                first_new[c] = n_ids
                new = n_ids
            else:
                slot = ((np.int64(c) * 1000003 + t * 7919) * 2654435761) & mask
                while ht_stamp[slot] == mark and (ht_class[slot] != c or ht_next[slot] != t):
                    slot = (slot + 1) & mask
                if ht_stamp[slot] == mark:
                    cls[item] = ht_new[slot]
                    continue
                ht_stamp[slot] = mark
                ht_class[slot] = c
                ht_next[slot] = t
                ht_new[slot] = n_ids
                new = n_ids
            parent[new] = c
            rec_id[n_rec] = new
            rec_next[n_rec] = t
            n_ids += 1
            n_rec += 1
            cls[item] = new
        rec_end[s] = n_rec
    return (parent, rec_id, rec_next, n_ids, n_rec, first_stamp, first_next, first_new,
            ht_stamp, ht_class, ht_next, ht_new)


@numba.njit(cache=True)
def _canonical_classes(forest_cls, item_of_token):
    """Final classes: items are in one class when every forest put them in the same class.
    Numbered 0 = never allowed, the others by their smallest token id.

    `forest_cls[f, item]` is the class of `item` in forest f. Returns (class of each token,
    class of each item).
    """
    n_forests, n_items = forest_cls.shape
    # combine forest by forest: (class so far, class in next forest) -> dense id
    combined = np.zeros(n_items, np.int64)  # dense ids, < n_items
    for f in range(n_forests):
        if n_forests == 1:  # one forest: its classes, renumbered densely in item order
            dense = np.full(forest_cls[0].max() + 1, -1, np.int64)
            n_seen = 0
            for item in range(n_items):
                c = forest_cls[0, item]
                if dense[c] < 0:
                    dense[c] = n_seen
                    n_seen += 1
                combined[item] = dense[c]
            break
        table_size = 16
        while table_size < 2 * n_items:
            table_size *= 2
        keys = np.full(table_size, -1, np.int64)
        vals = np.zeros(table_size, np.int64)
        n_seen = 0
        other = forest_cls[f].astype(np.int64)
        width = other.max() + 1
        for item in range(n_items):
            key = combined[item] * width + other[item]
            slot = (key * 2654435761) & (table_size - 1)
            while keys[slot] != -1 and keys[slot] != key:
                slot = (slot + 1) & (table_size - 1)
            if keys[slot] == -1:
                keys[slot] = key
                vals[slot] = n_seen
                n_seen += 1
            combined[item] = vals[slot]
    # items never allowed anywhere are in class 0 of every forest
    never = np.int64(-1)
    for item in range(n_items):
        all_zero = True
        for f in range(n_forests):
            if forest_cls[f, item] != 0:
                all_zero = False
        if all_zero:
            never = combined[item]
            break
    class_of_combined = np.full(n_items + 1, -1, np.int32)
    if never >= 0:
        class_of_combined[never] = 0
    canon_of_item = np.zeros(n_items, np.int32)
    token_class = np.zeros(len(item_of_token), np.int32)
    n_classes = 1
    for token in range(len(item_of_token)):
        item = item_of_token[token]
        if item < 0:
            continue
        key = combined[item]
        if class_of_combined[key] < 0:
            class_of_combined[key] = n_classes
            n_classes += 1
        token_class[token] = class_of_combined[key]
    for item in range(n_items):
        canon_of_item[item] = class_of_combined[combined[item]]
    return token_class, canon_of_item


@numba.njit(cache=True)
def _expand_records(parent, item_cls, canon_of_item, rec_id, rec_next, rec_start, rec_end,
                    n_classes):
    """Rows of the states this forest walked: a recorded group stands for the final classes
    of the items below it in the split forest. Returns (entries per state, class, next state),
    entries in state order and sorted by class within a state."""
    n_ids = len(parent)
    n_canon = 0
    for item in range(len(item_cls)):
        n_canon = max(n_canon, canon_of_item[item] + 1)
    # each final class lies under exactly one leaf id of this forest
    leaf_of_canon = np.full(n_canon, -1, np.int64)
    for item in range(len(item_cls)):
        leaf_of_canon[canon_of_item[item]] = item_cls[item]
    leaf_ptr, leaf_canon = grouped(leaf_of_canon, 1, n_ids)
    # children lists, then a pre-order walk giving each id the range of leaves below it
    child_ptr, children = grouped(parent, 1, n_ids)
    # the final classes under each id are order[range_lo[id]:range_hi[id]]
    range_lo = np.zeros(n_ids, np.int64)
    range_hi = np.zeros(n_ids, np.int64)
    order = np.zeros(n_canon, np.int32)
    n_listed = 0
    stack = np.zeros(n_ids, np.int64)  # node ids; -1 - id marks "subtree done"
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        if node < 0:
            range_hi[-1 - node] = n_listed
            continue
        range_lo[node] = n_listed
        for j in range(leaf_ptr[node], leaf_ptr[node + 1]):
            order[n_listed] = leaf_canon[j]
            n_listed += 1
        stack[sp] = -1 - node
        sp += 1
        for j in range(child_ptr[node + 1] - 1, child_ptr[node] - 1, -1):
            stack[sp] = children[j]
            sp += 1
    n_states = len(rec_start)
    counts = np.zeros(n_states, np.int64)
    total = 0
    for s in range(n_states):
        for r in range(rec_start[s], rec_end[s]):
            counts[s] += range_hi[rec_id[r]] - range_lo[rec_id[r]]
        total += counts[s]
    out_class = np.zeros(total, np.int32)
    out_next = np.zeros(total, np.int32)
    pos = 0
    for s in range(n_states):
        lo = pos
        for r in range(rec_start[s], rec_end[s]):
            nxt = rec_next[r] // n_classes
            for f in range(range_lo[rec_id[r]], range_hi[rec_id[r]]):
                out_class[pos] = order[f]
                out_next[pos] = nxt
                pos += 1
        if pos - lo > 1:
            perm = np.argsort(out_class[lo:pos], kind="mergesort")
            out_class[lo:pos] = out_class[lo:pos][perm]
            out_next[lo:pos] = out_next[lo:pos][perm]
    return counts, out_class, out_next


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

