"""Byte-level DFA: subset construction over byte classes, Hopcroft minimisation, canonical form.

`ByteDFA` is what the rest of grammarc consumes. Its table is `trans[state, byte_class]`, with
the grammarc state convention: state 0 is the dead state (every transition of it loops to 0),
state 1 is the start, the remaining states are numbered in breadth-first order from the start,
visiting byte classes in byte order. Every state except 0 can reach an accepting state, and
equal languages give identical `ByteDFA`s (the minimal DFA in canonical numbering).

The hot loops (subset construction, minimisation) are numba kernels, compiled once and cached
on disk; they are compile-side only and never imported by the runtime.

When the NFA labels its states (the nodes of a `Graph`), every DFA state carries the one label
of its NFA states, and minimisation never merges states of different labels; a DFA state whose
NFA states have two labels means the text read so far does not determine the node, which is
reported as a `GrammarError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numba
import numpy as np

from ..errors import GrammarError, TooManyStatesError
from . import DEFAULT_MAX_STATES
from .arrays import grown
from .expr import Expr
from .nfa import Fragment, NFABuilder

_NO_LIMIT = np.iinfo(np.int32).max
# The subset construction may pass through more states than the minimal result has (copies
# of an ambiguous item in a bounded repeat); it may use this many times --max-states, and
# SUBSET_ENTRIES times as many NFA states summed over its subsets (which bounds its memory and
# time when the NFA is large, e.g. deeply unrolled recursive rules).
SUBSET_FACTOR = 10
SUBSET_ENTRIES = 32


@dataclass(frozen=True)
class ByteDFA:
    """A minimal, trimmed, canonically numbered DFA over bytes (dead = 0, start = 1)."""

    trans: np.ndarray       # int32 [num_states, num_classes]
    byte_class: np.ndarray  # int32 [256]: the class of each byte value
    accepting: np.ndarray   # bool [num_states]
    labels: np.ndarray | None = None  # int32 [num_states]: index into label_names, -1 for none
    label_names: tuple[str, ...] = ()

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.trans.shape[1])

    def byte_table(self) -> np.ndarray:
        """The full table `next = table[state, byte]` (int32 [num_states, 256])."""
        return np.ascontiguousarray(self.trans[:, self.byte_class])

    def walk(self, data: bytes, state: int = 1) -> int:
        """The state reached from `state` after reading `data` (0 once it dies)."""
        for b in data:
            state = int(self.trans[state, self.byte_class[b]])
            if state == 0:
                break
        return state

    def accepts(self, data: bytes) -> bool:
        return bool(self.accepting[self.walk(data)])

    def ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-state runs of bytes with the same live target: `(ptr, ranges, next)`, where
        state s's runs are `ranges[ptr[s]:ptr[s+1]]` (inclusive `lo, hi`) to `next[...]`."""
        table = self.byte_table()
        starts = np.ones(table.shape, np.bool_)
        starts[:, 1:] = table[:, 1:] != table[:, :-1]
        state, lo = np.nonzero(starts)
        nxt = table[state, lo]
        run_end = np.empty_like(lo)
        run_end[:-1] = np.where(state[1:] == state[:-1], lo[1:] - 1, 255)
        if len(lo):
            run_end[-1] = 255
        live = nxt != 0
        state, lo, run_end, nxt = state[live], lo[live], run_end[live], nxt[live]
        ptr = np.zeros(self.num_states + 1, np.int64)
        np.cumsum(np.bincount(state, minlength=self.num_states), out=ptr[1:])
        return ptr, np.stack([lo, run_end], axis=1), nxt


def build_dfa(expr: Expr, max_states: int = DEFAULT_MAX_STATES,
              call_codes: dict[str, bytes] | None = None) -> ByteDFA:
    """The minimal byte DFA of `expr`: UTF-8 text, dead = 0, start = 1.

    `max_states` bounds the DFA (and, scaled, the NFA it is built from) so that a grammar that
    blows up fails with `TooManyStatesError` instead of exhausting memory. `call_codes` spells
    the expression's `Call`s (machines.py).
    """
    builder = NFABuilder(max_states=max(20 * max_states, 1_000_000), call_codes=call_codes)
    fragment = builder.build(expr)
    return determinize(fragment, max_states=max_states, label_names=tuple(builder.label_names))


def determinize(frag: Fragment, max_states: int = _NO_LIMIT,
                label_names: tuple[str, ...] = ()) -> ByteDFA:
    """The canonical minimal DFA of an NFA fragment (entry 0, accepting exit 1).

    `label_names` name the fragment's labels (see nfa.py); a DFA state whose NFA states carry
    two different labels raises `GrammarError` with a text that reaches it.
    """
    edges = frag.edges
    byte_class = _byte_classes(edges[:, 1], edges[:, 2])
    num_classes = int(byte_class[-1]) + 1
    eps_ptr, eps_dst = _csr(frag.num_states, frag.eps[:, 0], frag.eps[:, 1:2])
    edge_ptr, edge_cols = _csr(frag.num_states, edges[:, 0],
                               np.stack([byte_class[edges[:, 1]], byte_class[edges[:, 2]],
                                         edges[:, 3]], axis=1))
    tag_ptr, tag_cols = _csr(frag.num_states, frag.tags[:, 0], frag.tags[:, 1:3])
    num_families = max(frag.num_families, 1)
    nfa_label = np.full(frag.num_states, -1, np.int32)
    nfa_label[frag.labels[:, 0]] = frag.labels[:, 1]
    limit = min(SUBSET_FACTOR * max_states, _NO_LIMIT)
    entries = SUBSET_ENTRIES * limit
    # what those limits could allocate (a transition row, flags, offsets, hash slots per
    # state; 4 bytes per subset entry; arrays grow by doubling), kept within memory
    worst = 3 * (limit * (4 * num_classes + 40) + 4 * entries)
    budget = memory_budget()
    bounded = worst > budget
    if bounded:
        limit = max(int(limit * budget / worst), 2)
        entries = max(int(entries * budget / worst), 2)
    trans, accepting, labels, status, conflict = _subset_construction(
        frag.num_states, eps_ptr, eps_dst[:, 0], edge_ptr,
        np.ascontiguousarray(edge_cols[:, 0]), np.ascontiguousarray(edge_cols[:, 1]),
        np.ascontiguousarray(edge_cols[:, 2]), tag_ptr, np.ascontiguousarray(tag_cols[:, 0]),
        np.ascontiguousarray(tag_cols[:, 1]), num_families, num_classes, limit, entries,
        nfa_label)
    if status == 1:
        bound = f"bounded by half the memory available, {budget / 2 ** 30:.1f} GiB" \
            if bounded else f"{SUBSET_FACTOR} x --max-states {max_states:,}"
        raise TooManyStatesError(
            f"determinising needs more than {limit:,} intermediate DFA states or {entries:,} "
            f"NFA states in their subsets ({bound}); "
            + ("lower --max-states or simplify the grammar" if bounded else "raise --max-states"))
    if status == 2:
        state, cls, first, second = (int(v) for v in conflict)
        text = _witness(trans, byte_class, state, cls).decode("utf-8", "backslashreplace")
        first_name, second_name = sorted((label_names[first], label_names[second]))
        raise GrammarError(f"ambiguous state machine: after {text!r} the state could be "
                           f"{first_name!r} or {second_name!r}; no text of a transition may "
                           "be read, or begin a longer text, by another path out of the same "
                           "state (end free text with a delimiter)")
    dfa = minimize(trans, byte_class, accepting, labels if len(frag.labels) else None,
                   label_names)
    if dfa.num_states > max_states:
        raise TooManyStatesError(
            f"the automaton needs {dfa.num_states:,} DFA states, more than --max-states "
            f"{max_states:,}")
    return dfa


def memory_budget() -> int:
    """Bytes one automaton construction may plan to use: half of the smaller of physical
    memory and the address-space limit (`ulimit -v`), where the platform tells them."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except ImportError:  # Windows
        pass
    return min(limits) // 2 if limits else 8 * 2 ** 30


def minimize(trans: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray,
             labels: np.ndarray | None = None, label_names: tuple[str, ...] = ()) -> ByteDFA:
    """Minimise a complete DFA whose state 0 is dead and state 1 the start; canonical result.

    States that cannot reach acceptance fall into the dead state's block, so the result is
    trimmed as well. States with different `labels` are never merged. An empty language raises
    `GrammarError`.
    """
    trans = np.ascontiguousarray(trans, dtype=np.int32)
    accepting = np.ascontiguousarray(accepting, dtype=np.bool_)
    if labels is None:
        initial = accepting.astype(np.int32)
    else:
        # a label only separates states that can still reach acceptance
        labels = np.where(_coreachable(trans, accepting), labels, -1).astype(np.int32)
        initial = accepting + 2 * (labels + 1)
    block, num_blocks = _hopcroft(trans, initial.astype(np.int32))
    dead, start = block[0], block[1]
    if dead == start:
        raise GrammarError("the grammar matches no string at all (its language is empty)")
    rep = np.empty(num_blocks, np.int64)
    rep[block] = np.arange(len(block))
    block_trans = block[trans[rep]]
    order = _bfs_order(block_trans, dead, start)  # reachable block ids in new numbering order
    new_id = np.full(num_blocks, -1, np.int32)
    new_id[order] = np.arange(len(order), dtype=np.int32)
    canon = new_id[block_trans[order]]
    canon_accepting = accepting[rep[order]]
    dfa = _merge_byte_classes(canon, byte_class, canon_accepting)
    if labels is None:
        return dfa
    return ByteDFA(dfa.trans, dfa.byte_class, dfa.accepting, labels[rep[order]], label_names)


def _witness(trans: np.ndarray, byte_class: np.ndarray, state: int, cls: int) -> bytes:
    """Bytes leading from the start to `state` and then over a byte of class `cls` (none when
    `state` is -1: the start state itself)."""
    if state < 0:
        return b""
    _, first_byte = np.unique(byte_class, return_index=True)
    parent = {1: (-1, -1)}
    queue = [1]
    for s in queue:
        if s == state:
            break
        for c in range(trans.shape[1]):
            t = int(trans[s, c])
            if t not in parent:
                parent[t] = (s, c)
                queue.append(t)
    path = [cls]
    s = state
    while parent[s][0] != -1:
        s, c = parent[s]
        path.append(c)
    return bytes(int(first_byte[c]) for c in reversed(path))


def _merge_byte_classes(trans: np.ndarray, byte_class: np.ndarray,
                        accepting: np.ndarray) -> ByteDFA:
    """Merge classes with identical columns; number classes by their first byte."""
    columns = np.ascontiguousarray(trans.T)  # [classes, states]
    group_of_column: dict[bytes, int] = {}
    merged_of_class = np.empty(len(columns), np.int32)
    for c, column in enumerate(columns):
        merged_of_class[c] = group_of_column.setdefault(column.tobytes(), len(group_of_column))
    merged_of_byte = merged_of_class[byte_class]
    # renumber merged classes by the first byte that uses them
    _, first = np.unique(merged_of_byte, return_index=True)
    rank = np.empty(len(first), np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int32)
    new_class = rank[merged_of_byte]
    merged = np.empty((trans.shape[0], len(first)), np.int32)
    merged[:, new_class] = trans[:, byte_class]
    return ByteDFA(merged, new_class, accepting.astype(np.bool_))


def _byte_classes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Split 0..255 into the coarsest intervals no edge range cuts."""
    cuts = np.zeros(257, np.bool_)
    cuts[0] = True
    cuts[lo] = True
    cuts[hi + 1] = True
    return (np.cumsum(cuts[:256]) - 1).astype(np.int32)


def _csr(n: int, src: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, np.ascontiguousarray(cols[order], dtype=np.int32)


@numba.njit(cache=True)
def _hash_set(data, lo, hi):
    h = np.uint64(1469598103934665603)
    for i in range(lo, hi):
        h = (h ^ np.uint64(data[i])) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return h


@numba.njit(cache=True)
def _close(buf, k, eps_ptr, eps_dst, mark, stamp, stack):
    """Replace the seeds buf[:k] by their epsilon closure; returns its size (unsorted)."""
    sp = 0
    for i in range(k):
        v = buf[i]
        if mark[v] != stamp:
            mark[v] = stamp
            stack[sp] = v
            sp += 1
    k = 0
    while sp > 0:
        sp -= 1
        u = stack[sp]
        buf[k] = u
        k += 1
        for j in range(eps_ptr[u], eps_ptr[u + 1]):
            v = eps_dst[j]
            if mark[v] != stamp:
                mark[v] = stamp
                stack[sp] = v
                sp += 1
    return k


@numba.njit(cache=True)
def _prune(buf, k, tag_ptr, tag_family, tag_rank, best_stamp, best_rank, stamp):
    """Drop states dominated by a lower-ranked state of the same family (see nfa.py)."""
    has_tags = False
    for i in range(k):
        u = buf[i]
        for j in range(tag_ptr[u], tag_ptr[u + 1]):
            has_tags = True
            family = tag_family[j]
            if best_stamp[family] != stamp or tag_rank[j] < best_rank[family]:
                best_stamp[family] = stamp
                best_rank[family] = tag_rank[j]
    if not has_tags:
        return k
    kept = 0
    for i in range(k):
        u = buf[i]
        dominated = False
        for j in range(tag_ptr[u], tag_ptr[u + 1]):
            if tag_rank[j] > best_rank[tag_family[j]]:
                dominated = True
                break
        if not dominated:
            buf[kept] = u
            kept += 1
    return kept


@numba.njit(cache=True)
def _subset_construction(n_nfa, eps_ptr, eps_dst, edge_ptr, edge_clo, edge_chi, edge_dst,
                         tag_ptr, tag_family, tag_rank, n_families, n_classes, max_states,
                         max_entries, nfa_label):
    """Subset construction; DFA state 0 is the empty set, 1 the start closure.

    Returns (trans, accepting, labels, status, conflict); status 1 means max_states DFA states
    or max_entries NFA states summed over the subsets were exceeded, status 2 that the subset
    reached from DFA state conflict[0] (-1: the start) by class conflict[1] holds NFA states
    labelled conflict[2] and conflict[3].
    """
    cap = 256
    trans = np.zeros((cap, n_classes), np.int32)
    accepting = np.zeros(cap, np.bool_)
    labels = np.full(cap, -1, np.int32)
    conflict = np.full(4, -1, np.int64)
    set_off = np.zeros(cap + 1, np.int64)
    set_data = np.empty(1024, np.int32)
    set_hash = np.zeros(cap, np.uint64)
    table_size = 1024
    table = np.full(table_size, -1, np.int32)
    n_dfa = 0

    mark = np.zeros(n_nfa, np.int64)
    best_stamp = np.zeros(n_families, np.int64)
    best_rank = np.zeros(n_families, np.int32)
    stamp = 0
    stack = np.empty(n_nfa, np.int32)
    buf = np.empty(n_nfa, np.int32)
    head = np.full(n_classes, -1, np.int64)
    touched = np.empty(n_classes, np.int32)
    item_val = np.empty(1024, np.int32)
    item_next = np.empty(1024, np.int64)

    # seed 0: the empty set; seed 1: closure of the NFA entry; then one subset per (state, class)
    d = -2
    n_touched = 0
    ti = 0
    while True:
        if d == -2:
            k = 0
        elif d == -1:
            buf[0] = 0
            stamp += 1
            k = _close(buf, 1, eps_ptr, eps_dst, mark, stamp, stack)
        else:
            if ti == n_touched:
                # next DFA state: bucket the moves of its NFA states by class
                d += 1
                if d >= n_dfa:
                    break
                lo = set_off[d]
                hi = set_off[d + 1]
                need = 0
                for idx in range(lo, hi):
                    u = set_data[idx]
                    for e in range(edge_ptr[u], edge_ptr[u + 1]):
                        need += edge_chi[e] - edge_clo[e] + 1
                if need > len(item_val):
                    item_val = np.empty(2 * need, np.int32)
                    item_next = np.empty(2 * need, np.int64)
                n_items = 0
                n_touched = 0
                for idx in range(lo, hi):
                    u = set_data[idx]
                    for e in range(edge_ptr[u], edge_ptr[u + 1]):
                        for c in range(edge_clo[e], edge_chi[e] + 1):
                            if head[c] == -1:
                                touched[n_touched] = c
                                n_touched += 1
                            item_val[n_items] = edge_dst[e]
                            item_next[n_items] = head[c]
                            head[c] = n_items
                            n_items += 1
                touched[:n_touched].sort()
                ti = 0
                continue
            c = touched[ti]
            k = 0
            it = head[c]
            stamp += 1  # several NFA states may move to the same one: keep it once
            while it != -1:
                v = item_val[it]
                if mark[v] != stamp:
                    mark[v] = stamp
                    buf[k] = v
                    k += 1
                it = item_next[it]
            head[c] = -1
            stamp += 1
            k = _close(buf, k, eps_ptr, eps_dst, mark, stamp, stack)
        k = _prune(buf, k, tag_ptr, tag_family, tag_rank, best_stamp, best_rank, stamp)
        buf[:k].sort()
        h = _hash_set(buf, 0, k)
        slot = np.int64(h & np.uint64(table_size - 1))
        found = -1
        while table[slot] != -1:
            cand = table[slot]
            if set_hash[cand] == h and set_off[cand + 1] - set_off[cand] == k:
                same = True
                base = set_off[cand]
                for i in range(k):
                    if set_data[base + i] != buf[i]:
                        same = False
                        break
                if same:
                    found = cand
                    break
            slot = (slot + 1) & (table_size - 1)
        if found == -1:
            if n_dfa >= max_states or set_off[n_dfa] + k > max_entries:
                return trans[:n_dfa], accepting[:n_dfa], labels[:n_dfa], 1, conflict
            if n_dfa == cap:
                cap *= 2
                trans = grown(trans, n_dfa, cap)
                accepting = grown(accepting, n_dfa, cap)
                labels = grown(labels, n_dfa, cap, -1)
                set_off = grown(set_off, n_dfa + 1, cap + 1)
                set_hash = grown(set_hash, n_dfa, cap)
            end = set_off[n_dfa] + k
            if end > len(set_data):
                set_data = grown(set_data, set_off[n_dfa], max(2 * len(set_data), end))
            set_data[set_off[n_dfa]:end] = buf[:k]
            set_off[n_dfa + 1] = end
            set_hash[n_dfa] = h
            for i in range(k):
                if buf[i] == 1:
                    accepting[n_dfa] = True
                label = nfa_label[buf[i]]
                if label >= 0 and labels[n_dfa] != label:
                    if labels[n_dfa] >= 0:
                        conflict[0] = d
                        conflict[1] = touched[ti] if d >= 0 else -1
                        conflict[2] = labels[n_dfa]
                        conflict[3] = label
                        return trans[:n_dfa], accepting[:n_dfa], labels[:n_dfa], 2, conflict
                    labels[n_dfa] = label
            table[slot] = n_dfa
            found = n_dfa
            n_dfa += 1
            if 2 * n_dfa > table_size:
                table_size *= 2
                table = np.full(table_size, -1, np.int32)
                for s in range(n_dfa):
                    sl = np.int64(set_hash[s] & np.uint64(table_size - 1))
                    while table[sl] != -1:
                        sl = (sl + 1) & (table_size - 1)
                    table[sl] = s
        if d >= 0:
            trans[d, touched[ti]] = found
            ti += 1
        else:
            d += 1
    return trans[:n_dfa].copy(), accepting[:n_dfa].copy(), labels[:n_dfa].copy(), 0, conflict


@numba.njit(cache=True)
def _coreachable(trans, accepting):
    """Which states can reach an accepting state."""
    n, k = trans.shape
    in_ptr = np.zeros(n + 1, np.int64)
    for s in range(n):
        for a in range(k):
            in_ptr[trans[s, a] + 1] += 1
    for i in range(n):
        in_ptr[i + 1] += in_ptr[i]
    fill = in_ptr[:-1].copy()
    in_src = np.empty(n * k, np.int32)
    for s in range(n):
        for a in range(k):
            t = trans[s, a]
            in_src[fill[t]] = s
            fill[t] += 1
    live = accepting.copy()
    stack = np.flatnonzero(accepting).astype(np.int32)
    sp = len(stack)
    stack = np.concatenate((stack, np.empty(n, np.int32)))
    while sp > 0:
        sp -= 1
        t = stack[sp]
        for j in range(in_ptr[t], in_ptr[t + 1]):
            s = in_src[j]
            if not live[s]:
                live[s] = True
                stack[sp] = s
                sp += 1
    return live


@numba.njit(cache=True)
def _hopcroft(trans, initial):
    """Hopcroft's partition refinement from the partition of states by their `initial` class;
    returns (block of each state, number of blocks)."""
    n, k = trans.shape
    inv_ptr = np.zeros(n * k + 1, np.int64)
    for s in range(n):
        for a in range(k):
            inv_ptr[trans[s, a] * k + a + 1] += 1
    for i in range(n * k):
        inv_ptr[i + 1] += inv_ptr[i]
    fill = inv_ptr[:-1].copy()
    inv_src = np.empty(n * k, np.int32)
    for s in range(n):
        for a in range(k):
            key = trans[s, a] * k + a
            inv_src[fill[key]] = s
            fill[key] += 1

    elems = np.empty(n, np.int32)
    pos = np.empty(n, np.int64)
    block = np.empty(n, np.int32)
    bstart = np.zeros(n + 1, np.int64)
    bend = np.zeros(n + 1, np.int64)
    nmark = np.zeros(n + 1, np.int64)
    order = np.argsort(initial, kind="mergesort")
    n_blocks = 0
    largest = 0
    for i in range(n):
        s = order[i]
        elems[i] = s
        pos[s] = i
        if i == 0 or initial[s] != initial[order[i - 1]]:
            bstart[n_blocks] = i
            n_blocks += 1
        bend[n_blocks - 1] = i + 1
        block[s] = n_blocks - 1
        if bend[n_blocks - 1] - bstart[n_blocks - 1] > bend[largest] - bstart[largest]:
            largest = n_blocks - 1

    # every initial block but the largest splits the others
    in_work = np.zeros(n * k, np.bool_)
    work = np.empty(n * k, np.int64)
    n_work = 0
    for b in range(n_blocks):
        if b != largest:
            for a in range(k):
                work[n_work] = b * k + a
                in_work[b * k + a] = True
                n_work += 1

    splitter = np.empty(n, np.int32)
    touched = np.empty(n, np.int32)
    while n_work > 0:
        n_work -= 1
        item = work[n_work]
        in_work[item] = False
        bb = item // k
        a = item % k
        m = 0
        for i in range(bstart[bb], bend[bb]):
            splitter[m] = elems[i]
            m += 1
        n_touched = 0
        for i in range(m):
            key = splitter[i] * k + a
            for j in range(inv_ptr[key], inv_ptr[key + 1]):
                s = inv_src[j]
                b = block[s]
                p = pos[s]
                q = bstart[b] + nmark[b]
                if p < q:
                    continue
                if nmark[b] == 0:
                    touched[n_touched] = b
                    n_touched += 1
                other = elems[q]
                elems[q] = s
                pos[s] = q
                elems[p] = other
                pos[other] = p
                nmark[b] += 1
        for ti in range(n_touched):
            b = touched[ti]
            if nmark[b] < bend[b] - bstart[b]:
                nb = n_blocks
                n_blocks += 1
                bstart[nb] = bstart[b]
                bend[nb] = bstart[b] + nmark[b]
                bstart[b] = bend[nb]
                for i in range(bstart[nb], bend[nb]):
                    block[elems[i]] = nb
                small = nb if bend[nb] - bstart[nb] <= bend[b] - bstart[b] else b
                for c in range(k):
                    if in_work[b * k + c]:
                        target = nb * k + c
                    else:
                        target = small * k + c
                    if not in_work[target]:
                        in_work[target] = True
                        work[n_work] = target
                        n_work += 1
            nmark[b] = 0
    return block, n_blocks


@numba.njit(cache=True)
def _bfs_order(trans, dead, start):
    """Blocks in canonical order: the dead block, then breadth-first from the start."""
    n, k = trans.shape
    order = np.empty(n, np.int32)
    seen = np.zeros(n, np.bool_)
    order[0] = dead
    seen[dead] = True
    order[1] = start
    seen[start] = True
    count = 2
    head = 1
    while head < count:
        s = order[head]
        head += 1
        for a in range(k):
            t = trans[s, a]
            if not seen[t]:
                seen[t] = True
                order[count] = t
                count += 1
    return order[:count]
