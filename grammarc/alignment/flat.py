"""Token alignment: from a byte DFA and a vocabulary to the token-level transition table.

`T[state, token]` is the DFA state reached by walking the token's bytes from `state`, or 0 when
the walk dies; EOS tokens go from an accepting state to itself and are forbidden elsewhere.
It is computed by walking a pre-order trie of the vocabulary from every live state, skipping a
whole subtree as soon as the DFA dies (kernels of the compiled core, csrc/align.cpp). The byte trie is built
once per tokenizer; for a grammar whose walks are many it is folded into a trie over the DFA's
*byte classes* (bytes every state treats alike), whose nodes group the tokens that no state can
tell apart. For a regex like `[^eE]{1,200}` that turns 49k tokens into about a thousand groups.
A state that mostly behaves like a *base* state is walked only where the two differ, and one
whose strongly connected component reads like another's from it (the strings of a JSON
object's values) only below the edges out of the component, its *twin* walked in full.

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
import weakref
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Collection, Protocol, Sequence

import numpy as np

from .. import _core
from ..automaton import ByteDFA
from ..errors import GrammarError
from ..format.table import CallTables, TokenTable
from ..tokenizers.special import aligned_token_bytes

_CHUNK = 64  # states per kernel call, so progress can be reported
# Folding the trie over byte classes costs about _FOLD_COST + _FOLD_COST_KEPT * k walks of
# it, where k is the share of its nodes the fold keeps, and saves (1 - k) of every walk
# (measured over the corpus grammars: JSON grammars keep 60-98% of the nodes, regular
# expressions over letter classes 1% or less)
_FOLD_COST, _FOLD_COST_KEPT = 10, 40
# Past this many walks of the trie, a second thread saves time (its own forest, then merging
# the forests' classes) where a core is idle; past the second bound, even where every core is
# busy (measured on the corpus schemas: 50-60 walks gain up to 15% alone and lose a few %
# beside a busy core, 300-800 walks gain 8-12% either way)
_PARALLEL_AFTER, _PARALLEL_AFTER_BUSY = 50, 150
# A state walks as its *twin* does (`_core.component_twins`) where its walk covers at least
# 1/_TWIN_LIVE_SHARE of the trie (inside a string: nearly all of it) and its strongly connected
# component has at most _TWIN_MOST_STATES states (a string's, escapes included: about a dozen)
_TWIN_LIVE_SHARE, _TWIN_MOST_STATES = 16, 256
_TWINS_AFTER = 4  # walks of the whole trie below which twins are not looked for


@dataclass(frozen=True)
class VocabTrie:
    """Pre-order byte trie of a vocabulary. Node 0 is the root (the empty string)."""

    node_byte: np.ndarray   # uint8 [N]: the byte on the edge into the node
    node_depth: np.ndarray  # int32 [N]
    node_end: np.ndarray    # int32 [N]: one past the node's last descendant
    tok_ptr: np.ndarray     # int64 [N + 1]: tokens ending at node i are toks[tok_ptr[i]:tok_ptr[i+1]]
    toks: np.ndarray        # int32 [T]
    tok_node: np.ndarray    # int64 [T]: the node where toks[j] ends
    # every token's bytes by id: token t is token_data[token_offsets[t]:token_offsets[t+1]]
    # (empty for the tokens left out of the trie)
    token_data: np.ndarray     # uint8
    token_offsets: np.ndarray  # int64 [V + 1]
    first_level: np.ndarray    # int64: the depth-1 nodes
    # the byte pairs of the depth-2 nodes (first byte * 256 + second), for estimating folds
    second_level: np.ndarray   # int64 [N2]
    node_code: np.ndarray      # int32 [N]: depth << 16, | 1 where a token ends
    # what alignment derives from the trie alone, computed once (`_item_of_token`)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_nodes(self) -> int:
        return int(self.node_byte.shape[0])


@dataclass(frozen=True)
class FactoredRows:
    """What factoring makes of the walk's entries: the factored token table's arrays and the
    fewest tokens to acceptance (docs/FORMAT.md); `align` completes them into a
    `grammarc.format.table.TokenTable`."""

    token_class: np.ndarray          # int32 [V]
    state_row: np.ndarray            # int32 [S]
    row_ptr: np.ndarray              # int64 [R + 1]
    row_class: np.ndarray            # int32 [N], sorted within each row (read-only)
    row_delta: np.ndarray            # int32 [N]: next state - state (read-only)
    min_tokens_to_accept: np.ndarray  # int32 [S], -1 where acceptance is out of reach

    @property
    def num_classes(self) -> int:
        return int(self.token_class.max(initial=0)) + 1


def build_trie(token_bytes: list[bytes | None] | tuple[bytes | None, ...],
               exclude: tuple[int, ...] = ()) -> VocabTrie:
    """The pre-order trie of all tokens with bytes, leaving out the ids in `exclude`."""
    skip = set(exclude)
    ids = np.array([i for i, b in enumerate(token_bytes) if b and i not in skip], np.int32)
    strings = [token_bytes[i] for i in ids.tolist()]
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, strings), np.int64, len(ids)), out=offsets[1:])
    data = np.frombuffer(b"".join(strings), np.uint8)
    node_byte, node_depth, node_end, node_of_item = _core.build_trie(data, offsets)
    order = np.argsort(node_of_item, kind="stable")  # tokens by node, equal bytes by id
    tok_ptr = np.zeros(len(node_byte) + 1, np.int64)
    np.cumsum(np.bincount(node_of_item, minlength=len(node_byte)), out=tok_ptr[1:])
    lengths = np.zeros(len(token_bytes), np.int64)
    lengths[ids] = np.diff(offsets)
    token_offsets = np.zeros(len(token_bytes) + 1, np.int64)
    np.cumsum(lengths, out=token_offsets[1:])  # ids increase: `data` is in id order
    first = np.flatnonzero(node_depth == 1)
    second = np.flatnonzero(node_depth == 2)
    parent = first[np.searchsorted(first, second) - 1]
    second_level = node_byte[parent].astype(np.int64) * 256 + node_byte[second]
    node_code = node_depth.astype(np.int32) << 16
    node_code[node_of_item] |= 1
    return VocabTrie(node_byte, node_depth, node_end, tok_ptr, ids[order],
                     node_of_item[order].astype(np.int64), data, token_offsets, first,
                     second_level, node_code)


#: The trie of each tokenizer object that `tokenizer_trie` has seen, kept as long as it lives.
TOKENIZER_TRIES: weakref.WeakKeyDictionary[object, dict[frozenset[int], VocabTrie]] = \
    weakref.WeakKeyDictionary()
_NAMED_TRIES = 8  # tries kept per tokenizer, the plain one included


def tokenizer_trie(tokenizer, named: Collection[int] = ()) -> VocabTrie:
    """The tokenizer's trie (EOS tokens left out), built once per tokenizer and set of tokens
    a grammar names (`TOKENIZER_TRIES`; the named tokens spelled as `tokenizers.special`
    says)."""
    tries = TOKENIZER_TRIES.setdefault(tokenizer, {})
    key = frozenset(named)
    trie = tries.get(key)
    if trie is None:
        token_bytes = aligned_token_bytes(tokenizer, key) if key else tokenizer.token_bytes
        trie = build_trie(token_bytes, exclude=tuple(tokenizer.eos_token_ids))
        if len(tries) >= _NAMED_TRIES:  # the oldest set of named tokens makes room
            del tries[next(k for k in tries if k)]
        tries[key] = trie
    return trie


def align(dfa: ByteDFA, trie: VocabTrie, vocab_size: int, eos_token_ids: tuple[int, ...],
          progress: Callable[[int, int], None] | None = None,
          timings: dict[str, float] | None = None) -> TokenTable:
    """The token table of `dfa` over the vocabulary in `trie`, with its byte DFA.

    `progress(done, total)` is called between chunks of states, if given. `timings`, if given,
    receives the seconds spent walking the trie (`alignment`: the walk and the class
    refinement) and building the factored table from it (`factoring`).
    """
    started = time.perf_counter()
    entries = walk_entries(dfa, trie, vocab_size, eos_token_ids, progress)
    walked = time.perf_counter()
    rows = factor(entries, dfa.accepting)
    if timings is not None:
        timings["alignment"] = timings.get("alignment", 0.0) + walked - started
        timings["factoring"] = timings.get("factoring", 0.0) + time.perf_counter() - walked
    return token_table(rows, dfa, rows.min_tokens_to_accept)


def token_table(rows: FactoredRows, dfa: ByteDFA, min_tokens_to_accept: np.ndarray,
                calls: CallTables | None = None) -> TokenTable:
    """The grammar's `TokenTable`: factored rows, `dfa`'s acceptance, byte ranges and state
    labels, the distances to acceptance, and the call tables of a grammar with calls."""
    byte_ptr, byte_ranges, byte_next = dfa.ranges()
    return TokenTable(rows.token_class, rows.state_row, rows.row_ptr, rows.row_class,
                      rows.row_delta, dfa.accepting, min_tokens_to_accept, byte_ptr,
                      byte_ranges, byte_next, dfa.labels, calls)


@dataclass(frozen=True)
class TokenEntries:
    """Every state's allowed token classes and the states they lead to, before factoring."""

    token_class: np.ndarray  # int32 [V]
    state_ptr: np.ndarray    # int64 [S + 1]
    entry_class: np.ndarray  # int32 [N], sorted within each state
    entry_next: np.ndarray   # int32 [N]


@dataclass(frozen=True)
class StateRows:
    """The entries of the states `first`, `first + 1`, ...: CSR over them (`ptr` from 0)."""

    first: int
    ptr: np.ndarray          # int64
    entry_class: np.ndarray  # int32
    entry_next: np.ndarray   # int32


class WalkedElsewhere(Protocol):
    """States `first .. first + size - 1` whose entries a walk of their own gave (a kept
    machine's, `machines.KeptMachine`): the classes of that walk, and its entries over a
    refinement of them."""

    first: int
    size: int

    @property
    def token_class(self) -> np.ndarray: ...

    def rows(self, token_of_class: np.ndarray) -> StateRows:
        """Its entries over the grammar's classes, given any token of each (-1: none)."""


def walk_entries(dfa: ByteDFA, trie: VocabTrie, vocab_size: int,
                 eos_token_ids: tuple[int, ...],
                 progress: Callable[[int, int], None] | None = None,
                 walked: int | None = None,
                 elsewhere: Sequence[WalkedElsewhere] = ()) -> TokenEntries:
    """Walk the vocabulary from every state: token classes and each state's entries. With
    `walked`, only the states below it are walked (the others get no entries): a state that
    allows every token and goes to itself splits no class. The states walked `elsewhere` are
    not walked here: the classes returned are the common refinement of this walk's and
    theirs (as if every state had been walked here), and their entries are written beside
    this walk's, over those classes."""
    num_states, num_classes = dfa.trans.shape
    walked = walked or num_states
    skipped = np.zeros(num_states, bool)
    for part in elsewhere:
        skipped[part.first:part.first + part.size] = True
    byte_class = dfa.byte_class.astype(np.int32)
    # transitions as offsets of the next state's row, -1 for the dead state
    offset_type = np.int32 if num_states * num_classes < 2**31 else np.int64
    trans_off = np.where(dfa.trans == 0, -1, dfa.trans.astype(np.int64) * num_classes
                         ).astype(offset_type).reshape(-1)
    accepting = np.ascontiguousarray(dfa.accepting, dtype=np.bool_)
    eos = sorted(set(eos_token_ids))
    states = np.flatnonzero(~skipped[1:walked]).astype(np.int32) + 1

    def bases_of(first_label, weight):
        bases, visits = _core.walk_bases(first_label, weight, trans_off, num_classes, walked)
        # a state walks from its base's records: never from a state not walked here
        bases[(bases >= 0) & skipped[np.maximum(bases, 0)]] = -1
        return bases, visits

    def twins_of(first_label, weight, bases, visits, num_nodes):
        # the states whose walks a twin's gives (`_refine_all`), and the visits that saves;
        # none where the walks are few (finding them would cost more than it saves)
        if visits < _TWINS_AFTER * num_nodes:
            return None, 0
        candidate = np.zeros(num_states, bool)
        candidate[states] = bases[states] < 0
        *twins, shared = _core.component_twins(
            first_label, weight, trans_off, num_classes, accepting, candidate,
            int(weight.sum()) // _TWIN_LIVE_SHARE, _TWIN_MOST_STATES)
        return tuple(twins), shared

    # one int32 per node: depth, byte class and "ends a token", read by the walk in one load
    # (items: the nodes that end a token, plus one item for all EOS tokens)
    end, first = trie.node_end, trie.first_level
    first_label = byte_class[trie.node_byte[first]]
    weight = (end[first] - first).astype(np.int64)  # the trie's nodes below each first one
    bases, visits = bases_of(first_label, weight)
    twins, shared = twins_of(first_label, weight, bases, visits, trie.num_nodes)
    visits -= shared
    if visits > _FOLD_COST * trie.num_nodes and _worth_folding(trie, byte_class, visits):
        # many walks: the trie folded over the DFA's byte classes, whose nodes group the
        # tokens no state can tell apart, is worth building
        label, depth, end, node_of_byte_node = _core.class_trie(
            trie.node_byte, trie.node_depth, byte_class, num_classes)
        first = np.flatnonzero(depth == 1)
        first_label, weight = label[first], (end[first] - first).astype(np.int64)
        bases, folded_visits = bases_of(first_label, weight)
        twins = twins_of(first_label, weight, bases, folded_visits, len(label))[0]
        item_of_node = node_of_byte_node[trie.tok_node]
        code = (depth.astype(np.int32) << 16) | (label << 1)
        code[item_of_node] |= 1
        eos_item = len(code)
        item_of_token = _item_of_token(vocab_size, trie.toks, item_of_node, eos, eos_item)
    else:  # the trie's own codes and items (those depend on the vocabulary alone: memoised)
        code = _core.trie_code(trie.node_code, trie.node_byte, byte_class)
        eos_item = len(code)
        key = ("item_of_token", vocab_size, tuple(eos))
        item_of_token = trie.memo.get(key)
        if item_of_token is None:
            item_of_token = trie.memo[key] = _item_of_token(vocab_size, trie.toks,
                                                            trie.tok_node, eos, eos_item)
            item_of_token.flags.writeable = False
    walk = _core.TrieWalk(code, end, trans_off, num_classes, accepting, eos_item if eos else -1)
    threads = 2 if visits > _PARALLEL_AFTER_BUSY * trie.num_nodes or (
        visits > _PARALLEL_AFTER * trie.num_nodes and _a_core_is_idle()) else 1
    forests = _refine_all(walk, bases, twins, eos_item + 1, num_states, states, threads,
                          progress)
    token_class, canon_of_item = _core.canonical_classes(
        forests[0].classes[None] if len(forests) == 1 else
        np.stack([f.classes for f in forests]), item_of_token)
    if elsewhere:  # the common refinement with the other walks', token by token
        token_class = _core.canonical_classes(
            np.stack([token_class, *(part.token_class for part in elsewhere)]),
            np.arange(vocab_size, dtype=np.int64))[0]
        # a trie item's tokens are those no state tells apart; no token ends at the others
        has_item = item_of_token >= 0
        canon_of_item = np.zeros_like(canon_of_item)
        canon_of_item[item_of_token[has_item]] = token_class[has_item]
    token_of_class = np.full(int(token_class.max(initial=0)) + 1, -1, np.int64)
    token_of_class[token_class] = np.arange(vocab_size)  # any token of each class
    state_ptr, entry_class, entry_next = _expand_all(
        forests, canon_of_item, num_states, num_classes,
        [part.rows(token_of_class) for part in elsewhere])
    return TokenEntries(token_class, state_ptr, entry_class, entry_next)


def _item_of_token(vocab_size: int, toks: np.ndarray, item_of_node: np.ndarray,
                   eos: list[int], eos_item: int) -> np.ndarray:
    """The walk's item of each token: the node where it ends (`item_of_node` of the trie's
    tokens `toks`), `eos_item` for the EOS tokens, -1 for the tokens left out."""
    item_of_token = np.full(vocab_size, -1, np.int64)
    item_of_token[toks] = item_of_node
    item_of_token[eos] = eos_item
    return item_of_token


def factor(entries: TokenEntries, accepting: np.ndarray,
           class_map: np.ndarray | None = None) -> FactoredRows:
    """Trim entries into states that cannot reach `accepting`, then share equal rows. With
    `class_map`, the entries' classes are renumbered by it (`entries.token_class` already is)."""
    accepting = np.ascontiguousarray(accepting, dtype=np.bool_)
    min_tokens = _core.min_tokens_to_accept(entries.state_ptr, entries.entry_next, accepting)
    if min_tokens[1] < 0:
        raise GrammarError("no sequence of this vocabulary's tokens spells a string of the "
                           "grammar's language")
    state_row, row_ptr, row_class, row_delta = _core.dedupe_rows(
        entries.state_ptr, entries.entry_class, entries.entry_next, min_tokens,
        np.zeros(0, np.int32) if class_map is None else class_map)
    for array in (row_class, row_delta):  # the table's type: it keeps them as they are
        array.flags.writeable = False
    return FactoredRows(entries.token_class, state_row, row_ptr, row_class, row_delta,
                        min_tokens)


def _worth_folding(trie: VocabTrie, byte_class: np.ndarray, visits: int) -> bool:
    """Whether folding the trie over `byte_class` saves more of `visits` than it costs. The
    share of nodes it keeps is estimated as twice the share its second level keeps (deeper
    levels, mostly single children, fold less; twice is about right for the corpus
    grammars, and low where the fold keeps little, where it pays most)."""
    pairs = byte_class[trie.second_level >> 8].astype(np.int64) * 256 + \
        byte_class[trie.second_level & 255]
    kept = min(1.0, 2 * np.count_nonzero(np.bincount(pairs)) / max(len(pairs), 1))
    return visits * (1 - kept) > (_FOLD_COST + _FOLD_COST_KEPT * kept) * trie.num_nodes


def _a_core_is_idle() -> bool:
    """Whether the system's load leaves a core for a second thread: the last minute's load
    average is at least half a core below the number of cores (yes where the system keeps
    no load average)."""
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1) - 0.5
    except (AttributeError, OSError):
        return True


def _refine_all(walk: _core.TrieWalk, bases: np.ndarray,
                twins: tuple[np.ndarray, np.ndarray, np.ndarray] | None, num_items: int,
                num_states: int, states: np.ndarray, threads: int,
                progress: Callable[[int, int], None] | None) -> list[_core.SplitForest]:
    """Refine over `states` (ascending), on up to `threads` threads, each with its own split
    forest (the kernel releases the GIL).

    Each forest sorts the items a state allows into groups by (current class, next state);
    every group becomes a new class whose parent is the class it came from, and the state
    records (group, next state); at the end, a recorded group stands for all final classes
    below it, which gives each state's row without walking the trie again. The final classes
    do not depend on which forest saw which state: they are the common refinement of all
    forests (`_core.canonical_classes`).

    A state that mostly behaves like a *base* state (`_core.walk_bases`: inside a property name
    of a JSON object, most bytes lead where they lead from any name's) is walked only below
    the first bytes where the two differ, and keeps the base's records less what moved: so a
    base and the states walked from it go to one forest, the base first.

    A state of a group of *twins* (`twins`, if any: group, components; inside the strings of
    a JSON object's values, the states of each string read it alike) is walked, after
    the group's first state in the same forest (walked in full), only below the edges out of
    its component: so the states of a group are ordered together.
    """
    family = np.where(bases[states] >= 0, bases[states], states)
    group, order_ptr, order_states = twins or (None, None, None)
    num_groups = 0 if group is None else int(group.max(initial=-1)) + 1
    together = family if not num_groups else \
        np.where(group[family] >= 0, group[family], num_groups + family)
    order = np.lexsort((bases[states] >= 0, family, together))
    states, family = states[order], family[order]
    # chunks of about _CHUNK states that end where a family ends
    family_ends = np.append(np.flatnonzero(family[1:] != family[:-1]) + 1, len(states))
    chunks, lo = [], 0
    while lo < len(states):
        hi = int(family_ends[np.searchsorted(family_ends, lo + _CHUNK)]) \
            if lo + _CHUNK < len(states) else len(states)
        chunks.append(states[lo:hi])
        lo = hi
    workers = min(len(chunks), os.cpu_count() or 1, threads)
    forests = [_core.SplitForest(num_items, num_states) for _ in range(workers)]
    twin = _twin_of(chunks if workers > 1 else [states], group, num_groups, num_states)
    twin_args = () if twin is None else (twin, order_ptr, order_states)
    if workers <= 1:
        done = 0
        for chunk in chunks:
            forests[0].refine(walk, chunk, bases, *twin_args)
            done += len(chunk)
            if progress:
                progress(done, len(states))
        return forests
    queue = iter(chunks)
    lock = threading.Lock()
    done = [0]

    def work(forest: _core.SplitForest) -> None:
        while True:
            with lock:
                chunk = next(queue, None)
            if chunk is None:
                return
            forest.refine(walk, chunk, bases, *twin_args)
            with lock:
                done[0] += len(chunk)

    futures = [_refine_pool().submit(work, forest) for forest in forests]
    while not all(f.done() for f in futures):
        wait(futures, timeout=0.1)
        if progress:
            progress(done[0], len(states))
    for future in futures:
        future.result()
    return forests


def _twin_of(runs: list[np.ndarray], group: np.ndarray | None, num_groups: int,
             num_states: int) -> np.ndarray | None:
    """Each grouped state's twin: the first state of its group in its run of states (the
    states one forest refines in turn), -1 for that one; None where no state has a group."""
    if not num_groups:
        return None
    ordered = np.concatenate(runs)
    run_of = np.repeat(np.arange(len(runs)), [len(run) for run in runs])
    grouped = group[ordered] >= 0
    members = ordered[grouped]
    _, first, inverse = np.unique(run_of[grouped].astype(np.int64) * num_groups +
                                  group[members], return_index=True, return_inverse=True)
    source = members[first][inverse.reshape(-1)]
    twin = np.full(num_states, -1, np.int32)
    twin[members] = np.where(source == members, -1, source)
    return twin


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _refine_pool() -> ThreadPoolExecutor:
    """The process's refine threads, started on first use and kept (starting a thread costs
    up to 10 ms in some virtual machines); a forked child starts its own."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                       thread_name_prefix="grammarc-refine")
        return _pool


def _forget_pool_after_fork() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _expand_all(forests: list[_core.SplitForest], canon_of_item: np.ndarray, num_states: int,
                num_classes: int, others: list[StateRows]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every state's row, from the forest that walked it or from `others`, written in place
    (a large grammar's entries run to 10^8): (state_ptr, class, next state)."""
    counts = sum(forest.row_counts(canon_of_item) for forest in forests)
    for rows in others:
        states = slice(rows.first, rows.first + len(rows.ptr) - 1)
        if counts[states].any():
            raise RuntimeError("internal error: states walked elsewhere were walked too")
        counts[states] = np.diff(rows.ptr)
    state_ptr = np.zeros(num_states + 1, np.int64)
    np.cumsum(counts, out=state_ptr[1:])
    entry_class = np.empty(state_ptr[-1], np.int32)
    entry_next = np.empty(state_ptr[-1], np.int32)
    for forest in forests:
        forest.expand(num_classes, state_ptr, entry_class, entry_next)
    for rows in others:
        at = slice(state_ptr[rows.first], state_ptr[rows.first + len(rows.ptr) - 1])
        entry_class[at] = rows.entry_class
        entry_next[at] = rows.entry_next
    return state_ptr, entry_class, entry_next
