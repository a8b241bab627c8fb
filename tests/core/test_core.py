"""The compiled core's edges: empty inputs, limits hit, and malformed or huge arguments
rejected with a Python error instead of a crash. What its kernels compute is tested
through the stages that use them (test_dfa, test_align, test_calls and the differential
tests)."""

from __future__ import annotations

import numpy as np
import pytest

from grammarc import _core

i32, i64 = np.int32, np.int64


def _dfa(rows: list[list[int]]) -> np.ndarray:
    return np.array(rows, i32)


def _nfa_args(n_nfa: int, eps: list[tuple[int, int]], edges: list[tuple[int, int, int, int]],
              n_classes: int = 2, max_states: int = 100, max_entries: int = 1000) -> dict:
    """Arguments of `subset_construction` for an NFA given as (src, dst) epsilon moves and
    (src, class_lo, class_hi, dst) edges, sorted by source."""
    def csr(src: list[int]) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n_nfa))]).astype(i64)
    return dict(
        n_nfa=n_nfa, eps_ptr=csr([s for s, _ in eps]), eps_dst=np.array([d for _, d in eps], i32),
        edge_ptr=csr([e[0] for e in edges]), edge_clo=np.array([e[1] for e in edges], i32),
        edge_chi=np.array([e[2] for e in edges], i32), edge_dst=np.array([e[3] for e in edges], i32),
        tag_ptr=np.zeros(n_nfa + 1, i64), tag_family=np.zeros(0, i32), tag_rank=np.zeros(0, i32),
        n_families=1, n_classes=n_classes, max_states=max_states, max_entries=max_entries,
        nfa_label=np.full(n_nfa, -1, i32))


def test_subset_construction_of_a_repeat():
    # 0 --class 1--> 2 --eps--> 1 (exit) and 2 --eps--> 0: one or more bytes of class 1
    trans, accepting, labels, status, _ = _core.subset_construction(
        **_nfa_args(3, [(2, 0), (2, 1)], [(0, 1, 1, 2)]))
    assert status == 0
    assert trans.tolist() == [[0, 0], [0, 2], [0, 2]]
    assert accepting.tolist() == [False, False, True] and labels.tolist() == [-1, -1, -1]


def test_subset_construction_stops_at_its_limits():
    args = _nfa_args(3, [(2, 0), (2, 1)], [(0, 1, 1, 2)], max_states=2)
    assert _core.subset_construction(**args)[3] == 1
    args = _nfa_args(3, [(2, 0), (2, 1)], [(0, 1, 1, 2)], max_entries=1)
    assert _core.subset_construction(**args)[3] == 1


@pytest.mark.parametrize("change, message", [
    (dict(eps_dst=np.array([0, 7], i32)), "eps_dst holds 7"),
    (dict(edge_chi=np.array([5], i32)), "edge_chi holds 5"),
    (dict(edge_ptr=np.array([0, 2, 1, 1], i64)), "edge_ptr"),
    (dict(nfa_label=np.zeros(2, i32)), "nfa_label has 2 entries, expected 3"),
    (dict(n_nfa=1), "at least its entry and exit"),
    (dict(n_classes=300), "n_classes"),
])
def test_subset_construction_rejects_malformed_nfas(change, message):
    args = _nfa_args(3, [(2, 0), (2, 1)], [(0, 1, 1, 2)])
    args.update(change)
    with pytest.raises(ValueError, match=message):
        _core.subset_construction(**args)


_HALVES = np.repeat(np.arange(2, dtype=i32), 128)  # bytes 0-127 class 0, 128-255 class 1


def test_minimize_dfa_merges_equivalent_states_and_trims():
    # states 2 and 3 are equivalent accepting loops; 4 cannot accept
    trans = _dfa([[0, 0], [2, 3], [2, 4], [3, 4], [4, 4]])
    accepting = np.array([False, False, True, True, False])
    out, byte_class, out_accepting, rep, status = _core.minimize_dfa(
        trans, _HALVES, accepting, np.zeros(0, i32))
    assert status == 0
    assert out.tolist() == [[0, 0], [2, 2], [2, 0]]
    assert byte_class.tolist() == _HALVES.tolist() and out_accepting.tolist() == [0, 0, 1]
    assert rep.tolist() == [0, 1, 3]
    # labels keep 2 and 3 apart; an empty language is reported, not returned
    labelled = _core.minimize_dfa(trans, _HALVES, accepting, np.array([-1, -1, 0, 1, -1], i32))
    assert labelled[0].shape[0] == 4
    assert _core.minimize_dfa(trans, _HALVES, np.zeros(5, bool), np.zeros(0, i32))[4] == 1


def _reference_minimal(trans, byte_class, accepting, labels):
    """Canonical minimal DFA by Moore's iterated refinement, in plain numpy: trim, refine
    from (accepting, label), number dead then breadth-first by class, merge equal columns
    numbered by first byte."""
    n, k = trans.shape
    live = accepting.copy()
    live[0] = False
    while True:
        grown = live | np.array([live[trans[s]].any() for s in range(n)])
        grown[0] = False
        if (grown == live).all():
            break
        live = grown
    if not live[1]:
        return None
    trans = np.where(live[trans], trans, 0)
    part = accepting.astype(np.int64) + (2 * (labels.astype(np.int64) + 1) * live
                                         if labels is not None else 0)
    part[0] = part.max() + 1
    while True:
        keys = [(part[s], *part[trans[s]]) for s in range(n)]
        ids = {key: i for i, key in enumerate(sorted(set(keys)))}
        refined = np.array([ids[key] for key in keys])
        if len(ids) == len(set(part.tolist())):
            break
        part = refined
    if part[0] == part[1]:
        return None
    order, seen = [part[0], part[1]], {part[0], part[1]}
    rep = {int(part[s]): s for s in range(n)}
    head = 1
    while head < len(order):
        block, head = order[head], head + 1
        for a in range(k):
            t = part[trans[rep[block], a]]
            if t not in seen:
                seen.add(t)
                order.append(t)
    new_id = {b: i for i, b in enumerate(order)}
    canon = np.array([[new_id[part[trans[rep[b], a]]] for a in range(k)] for b in order])
    out_accepting = np.array([accepting[rep[b]] for b in order])
    out_labels = [-1] + [int(labels[rep[b]]) if labels is not None else -1 for b in order[1:]]
    columns: dict[bytes, int] = {}
    out_class = np.array([columns.setdefault(canon[:, byte_class[x]].tobytes(), len(columns))
                          for x in range(256)])
    first = [int(np.flatnonzero(out_class == c)[0]) for c in range(len(columns))]
    return canon[:, byte_class[first]], out_class, out_accepting, out_labels


def test_minimize_dfa_matches_moore_refinement_on_random_dfas():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n, k = int(rng.integers(2, 40)), int(rng.integers(1, 9))
        trans = rng.integers(0, n, size=(n, k)).astype(i32)
        trans[rng.random((n, k)) < rng.random()] = 0  # sparse, like a grammar's
        trans[0] = 0
        if rng.random() < 0.5:  # duplicated columns
            trans[:, -1] = trans[:, 0]
        byte_class = rng.integers(0, k, 256).astype(i32)
        accepting = rng.random(n) < 0.3
        accepting[0] = False
        labels = rng.integers(-1, 2, n).astype(i32) if rng.random() < 0.3 else None
        expected = _reference_minimal(trans, byte_class, accepting, labels)
        out, out_class, out_accepting, rep, status = _core.minimize_dfa(
            trans, byte_class, accepting, np.zeros(0, i32) if labels is None else labels)
        if expected is None:
            assert status == 1
            continue
        assert status == 0
        assert out.tolist() == expected[0].tolist()
        assert out_class.tolist() == expected[1].tolist()
        assert out_accepting.tolist() == expected[2].tolist()
        # each state's representative: accepting and labelled as the state it stands for
        assert accepting[rep].tolist() == expected[2].tolist()
        if labels is not None:
            assert [-1, *labels[rep[1:]].tolist()] == expected[3]


@pytest.mark.parametrize("call", [
    lambda: _core.minimize_dfa(_dfa([[0, 5], [1, 1]]), _HALVES, np.zeros(2, bool),
                               np.zeros(0, i32)),
    lambda: _core.minimize_dfa(_dfa([[0, -1], [1, 1]]), _HALVES, np.zeros(2, bool),
                               np.zeros(0, i32)),
    lambda: _core.minimize_dfa(_dfa([[0], [1]]), _HALVES, np.zeros(2, bool), np.zeros(0, i32)),
    lambda: _core.minimize_dfa(_dfa([[0, 0], [1, 1]]), _HALVES, np.zeros(3, bool),
                               np.zeros(0, i32)),
    lambda: _core.minimize_dfa(_dfa([[0, 0], [1, 1]]), _HALVES[:10], np.zeros(2, bool),
                               np.zeros(0, i32)),
    lambda: _core.minimize_dfa(_dfa([[0, 0], [1, 1]]), _HALVES, np.zeros(2, bool),
                               np.zeros(5, i32)),
    lambda: _core.minimize_dfa(_dfa([[0, 0]]), _HALVES, np.zeros(1, bool), np.zeros(0, i32)),
])
def test_minimize_dfa_rejects_malformed_tables(call):
    with pytest.raises(ValueError):
        call()


def test_product_and_its_limit():
    # a: one or more of class 0; b: exactly one of class 0
    a = _dfa([[0], [2], [2]]), np.array([False, False, True])
    b = _dfa([[0], [2], [0]]), np.array([False, False, True])
    classes = np.zeros(1, i32)
    trans, accepting, status, state_a, state_b = _core.product(*a, *b, classes, classes, 0,
                                                               100)
    assert status == 0 and accepting.tolist() == [False, False, True]
    assert state_a.tolist() == [0, 1, 2] and state_b.tolist() == [0, 1, 2]
    trans, accepting, status, state_a, state_b = _core.product(*a, *b, classes, classes, 1,
                                                               100)
    assert status == 0 and accepting.tolist() == [False, False, False, True]
    assert state_a.tolist() == [0, 1, 2, 2] and state_b.tolist() == [0, 1, 2, 0]
    assert _core.product(*a, *b, classes, classes, 1, 3)[2] == 1
    with pytest.raises(ValueError, match="op"):
        _core.product(*a, *b, classes, classes, 2, 100)
    with pytest.raises(ValueError, match="class_b"):
        _core.product(*a, *b, classes, np.array([3], i32), 0, 100)


def test_trie_of_no_tokens_and_of_some():
    node_byte, depth, end, node_of_item = _core.build_trie(np.zeros(0, np.uint8), np.zeros(1, i64))
    assert node_byte.tolist() == [0] and end.tolist() == [1] and len(node_of_item) == 0
    data = np.frombuffer(b"aabb", np.uint8)  # "a", "ab", "b" sorted
    node_byte, depth, end, node_of_item = _core.build_trie(data, np.array([0, 1, 3, 4], i64))
    assert bytes(node_byte[1:]) == b"abb" and depth.tolist() == [0, 1, 2, 1]
    assert end.tolist() == [4, 3, 3, 4] and node_of_item.tolist() == [1, 2, 3]
    # any order, duplicates included: "b", "ab", "a", "a"
    shuffled = _core.build_trie(np.frombuffer(b"babaa", np.uint8), np.array([0, 1, 3, 4, 5], i64))
    assert bytes(shuffled[0][1:]) == b"abb" and shuffled[3].tolist() == [3, 2, 1, 1]
    with pytest.raises(ValueError, match="offsets"):
        _core.build_trie(data, np.array([0, 3, 1, 4], i64))
    label, c_depth, c_end, node_of = _core.class_trie(node_byte, depth, np.zeros(256, i32), 1)
    assert c_depth.tolist() == [0, 1, 2] and node_of.tolist() == [0, 1, 2, 1]
    with pytest.raises(ValueError, match="depth"):
        _core.class_trie(node_byte, np.array([0, 1, 3, 1], i32), np.zeros(256, i32), 1)


def _walk(code, end, trans_off, n_classes=1, accepting=(False, True), eos_item=-1):
    return _core.TrieWalk(np.array(code, i32), np.array(end, i32), np.array(trans_off, i32),
                          n_classes, np.array(accepting), eos_item)


def _rows(forest, canon, n_classes):
    """(entries per state, class, next state) of the states the forest walked."""
    counts = forest.row_counts(canon)
    state_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(i64)
    classes, nexts = np.zeros(state_ptr[-1], i32), np.zeros(state_ptr[-1], i32)
    forest.expand(n_classes, state_ptr, classes, nexts)
    return counts, classes, nexts


def test_split_forest_on_a_small_trie():
    # one-class trie: root, "x" (a token), "xx" (a token); DFA 0 dead, 1 -x-> 1 accepting
    walk = _walk([0, (1 << 16) | 1, (2 << 16) | 1], [3, 3, 3], [-1, 1])
    forest = _core.SplitForest(4, 2)
    no_bases = np.array([-1, -1], i32)
    forest.refine(walk, np.array([1], i32), no_bases)
    token_class, canon = _core.canonical_classes(forest.classes[None, :], np.array([1, 2], i64))
    assert token_class.tolist() == [1, 1]  # both tokens go from 1 to 1
    counts, classes, nexts = _rows(forest, canon, 1)
    assert counts.tolist() == [0, 1] and classes.tolist() == [1] and nexts.tolist() == [1]
    with pytest.raises(ValueError, match="writable"):
        forest.expand(1, np.array([0, 0, 1], i64), np.zeros(1, i64), np.zeros(1, i32))
    with pytest.raises(ValueError, match="another number"):
        forest.expand(1, np.array([0, 1, 1], i64), np.zeros(1, i32), np.zeros(1, i32))
    forest.refine(walk, np.array([], i32), no_bases)  # no states: nothing happens
    with pytest.raises(ValueError, match="outside"):
        forest.refine(walk, np.array([2], i32), no_bases)
    with pytest.raises(ValueError, match="walked once"):
        forest.refine(walk, np.array([1], i32), no_bases)
    with pytest.raises(ValueError, match="base"):
        _core.SplitForest(4, 2).refine(walk, np.array([1], i32), np.array([-1, 0], i32))
    with pytest.raises(ValueError, match="more items"):
        _core.SplitForest(2, 2).refine(walk, np.array([1], i32), no_bases)


def test_a_state_walked_from_its_base_gets_the_row_of_a_full_walk():
    # tokens "a", "b", "ab", "ba" (one class per byte: 1 = a, 2 = b); DFA over classes 0, a, b:
    # state 1 reads any a/b and stays; state 2 is state 1 except that "b" leads to state 3,
    # where "a" is dead and "b" goes back to 1
    code = [0, (1 << 16) | (1 << 1) | 1, (2 << 16) | (2 << 1) | 1,
            (1 << 16) | (2 << 1) | 1, (2 << 16) | (1 << 1) | 1]
    end = [5, 3, 3, 5, 5]
    trans = np.array([[-1, -1, -1], [-1, 1, 1], [-1, 1, 3], [-1, -1, 1]])
    trans_off = np.where(trans < 0, -1, trans * 3).reshape(-1).astype(i32)
    walk = _core.TrieWalk(np.array(code, i32), np.array(end, i32), trans_off, 3,
                          np.array([False, True, True, True]), -1)
    first = np.array([1, 3])  # "a" and "b", below which lie 2 nodes each
    bases, visits = _core.walk_bases(np.array([1, 2], i32), np.array([2, 2], i64), trans_off, 3, 4)
    assert bases.tolist() == [-1, -1, 1, -1] and visits == 4 + 2 * 2 + 2  # 2 from its base
    with pytest.raises(ValueError, match="walked"):
        _core.walk_bases(np.array([1, 2], i32), np.array([2, 2], i64), trans_off, 3, 5)
    assert first.tolist() == [i for i in range(1, 5) if code[i] >> 16 == 1]
    rows = []
    for order, used in (([1, 2, 3], bases), ([1, 2, 3], np.full(4, -1, i32))):
        forest = _core.SplitForest(5, 4)
        forest.refine(walk, np.array(order, i32), used)
        token_class, canon = _core.canonical_classes(forest.classes[None, :],
                                                     np.array([1, 2, 3, 4], i64))
        counts, classes, nexts = _rows(forest, canon, 3)
        rows.append((token_class.tolist(), counts.tolist(), classes.tolist(), nexts.tolist()))
    assert rows[0] == rows[1]
    # tokens are trie nodes 1-4: "a", "ab", "b", "ba"; from state 2, "a" -> 1, "ab" -> 1,
    # "b" -> 3 and "ba" dies (3 reads no "a")
    token_class, counts, classes, nexts = rows[0]
    row_2 = slice(counts[1], counts[1] + counts[2])
    row = dict(zip(classes[row_2], nexts[row_2]))
    assert {t: row.get(token_class[t]) for t in range(4)} == {0: 1, 1: 1, 2: 3, 3: None}


@pytest.mark.parametrize("change, message", [
    (dict(code=[0, (3 << 16) | 1, (2 << 16) | 1]), "pre-order trie"),
    (dict(code=[0, (1 << 16) | (5 << 1), (2 << 16)]), "byte class"),
    (dict(end=[3, 1, 3]), "end must point"),
    (dict(trans_off=[-1, 7]), "trans_off"),
    (dict(trans_off=[-1]), "num_states"),
])
def test_trie_walk_rejects_malformed_tables(change, message):
    args = dict(code=[0, (1 << 16) | 1, (2 << 16) | 1], end=[3, 3, 3], trans_off=[-1, 1])
    args.update(change)
    with pytest.raises(ValueError, match=message):
        _walk(**args)


def test_huge_sizes_are_a_python_error():
    with pytest.raises((MemoryError, ValueError)):
        _core.SplitForest(2 ** 62, 2)
    with pytest.raises(ValueError):
        _core.SplitForest(0, 0)


def test_row_kernels():
    # state 1 -> 2 by class 1, state 2 -> 2 by class 1 (accepting), state 3 -> 3 (no way out)
    state_ptr = np.array([0, 0, 1, 2, 3], i64)
    entry_next = np.array([2, 2, 3], i32)
    accepting = np.array([False, False, True, False])
    dist = _core.min_tokens_to_accept(state_ptr, entry_next, accepting)
    assert dist.tolist() == [-1, 1, 0, -1]
    state_row, row_ptr, row_class, row_delta = _core.dedupe_rows(
        state_ptr, np.array([1, 1, 1], i32), entry_next, dist)
    assert state_row.tolist() == [0, 1, 2, 0] and row_ptr.tolist() == [0, 0, 1, 2]
    assert row_class.tolist() == [1, 1] and row_delta.tolist() == [1, 0]
    empty = _core.dedupe_rows(np.zeros(1, i64), np.zeros(0, i32), np.zeros(0, i32),
                              np.zeros(0, i32))
    assert [len(a) for a in empty] == [0, 2, 0, 0]
    with pytest.raises(ValueError, match="entry_next"):
        _core.min_tokens_to_accept(state_ptr, np.array([2, 2, 9], i32), accepting)
    # states below a sink (state 3, no entries, accepting nothing): 1 -> 2 by class 2 and
    # -> sink by class 1; 2 -> 2 by class 2 and -> sink by class 3
    state_ptr = np.array([0, 0, 2, 4, 4], i64)
    entry_class, entry_next = np.array([2, 1, 2, 3], i32), np.array([2, 3, 2, 3], i32)
    new_class, pair_state, pair_class = _core.sink_pairs(state_ptr, entry_class, entry_next,
                                                         3, 4)
    assert new_class.tolist() == [0, 0, 1, 0]  # class 2 only leads elsewhere than the sink
    assert pair_state.tolist() == [1, 2] and pair_class.tolist() == [1, 3]
    dist = _core.min_tokens_to_accept(state_ptr, entry_next, accepting)
    state_row, row_ptr, row_class, row_delta = _core.dedupe_rows(
        state_ptr, entry_class, entry_next, dist, new_class)
    assert state_row.tolist() == [0, 1, 2, 0]  # the entries into the sink are trimmed
    assert row_class.tolist() == [1, 1] and row_delta.tolist() == [1, 0]  # renumbered


def test_pushdown_walk_edges():
    # S = "a" | "(" S ")": 1 -a-> 2 (final), 1 -(-> 3, 3 calls S on its first bytes and
    # returns to 4, 4 -)-> 2
    table = np.zeros((5, 256), i32)
    table[1, ord("a")], table[1, ord("(")], table[4, ord(")")] = 2, 3, 2
    final = np.array([False, False, True, False, False])
    call_row = np.array([-1, -1, -1, 0, -1], i32)
    call_start = np.full((1, 256), -1, i32)
    call_start[0, [ord("a"), ord("(")]] = 1
    call_ret = np.zeros((1, 256), i32)
    call_ret[0, [ord("a"), ord("(")]] = 4
    no_counts = (np.full(5, -1, i32), np.zeros(5, bool), np.zeros(1, i64), np.full(1, -1, i64),
                 np.zeros(5, i32), *_no_sites(5))
    data = np.frombuffer(b"((a)" + b"(" * 10, np.uint8)
    starts = np.array([1, 1, 2], i32)
    spans = np.array([0, 4, 3], i64), np.array([3, 14, 4], i64)
    kind, nxt, pos, push_len, pushes, count = _core.pushdown_walk(
        table, final, call_row, call_start, call_ret, *no_counts, starts, data, *spans, 4)
    # "((a" stays in 2 with two returns pushed; ten "(" open more than 4 calls; ")" returns
    assert kind.tolist() == [1, 0, 2] and nxt[0] == 2 and push_len.tolist() == [2, 5, 0]
    assert pushes[0, :2].tolist() == [4, 4] and pos[2] == 0 and count[[0, 2]].tolist() == [0, 0]
    none = _core.pushdown_walk(table, final, call_row, call_start, call_ret, *no_counts,
                               np.zeros(0, i32), data, np.zeros(0, i64), np.zeros(0, i64), 4)
    assert [len(a) for a in none] == [0] * 6
    with pytest.raises(ValueError, match="span"):
        _core.pushdown_walk(table, final, call_row, call_start, call_ret, *no_counts, starts,
                            data, spans[0], spans[1] + 1, 4)
    with pytest.raises(ValueError, match="call_start"):
        _core.pushdown_walk(table, final, call_row, call_start + 5, call_ret, *no_counts,
                            starts, data, *spans, 4)


def _no_sites(num_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pushdown_walk`'s exit classes and sites of machines that return one way."""
    return np.zeros(num_states, i32), np.zeros(num_states + 1, i64), np.zeros(0, i32)


def test_pushdown_walk_returns_by_exit_class():
    # root 1 calls M on "a" or "b", pushing site 5; M: 2 -a-> 3 (final, class 0), 2 -b-> 4
    # (final, class 1); site 5 returns to 6 after class 0 and to 7 after class 1; 6 -x-> 8,
    # 7 -y-> 8 (final): "ax" and "by", not "ay" nor "bx"
    table = np.zeros((9, 256), i32)
    table[2, ord("a")], table[2, ord("b")], table[6, ord("x")], table[7, ord("y")] = 3, 4, 8, 8
    final = np.zeros(9, bool)
    final[[3, 4, 8]] = True
    call_row = np.array([-1, 0, -1, -1, -1, -1, -1, -1, -1], i32)
    call_start = np.full((1, 256), -1, i32)
    call_start[0, [ord("a"), ord("b")]] = 2
    call_ret = np.zeros((1, 256), i32)
    call_ret[0, [ord("a"), ord("b")]] = 5
    no_counts = (np.full(9, -1, i32), np.zeros(9, bool), np.zeros(2, i64), np.full(2, -1, i64),
                 np.zeros(9, i32))
    exit_class = np.array([0, 0, 0, 0, 1, 0, 0, 0, 0], i32)
    site_ptr = np.array([0, 0, 0, 0, 0, 0, 2, 2, 2, 2], i64)
    site_next = np.array([6, 7], i32)
    texts = [b"ax", b"ay", b"by", b"bx", b"bz"]
    data = np.frombuffer(b"".join(texts), np.uint8)
    lo = np.arange(0, 10, 2, dtype=i64)
    starts = np.array([1, 1, 1, 1, 2], i32)
    kind, nxt, pos, _, _, _ = _core.pushdown_walk(
        table, final, call_row, call_start, call_ret, *no_counts, exit_class, site_ptr,
        site_next, starts, data, lo, lo + 2, 4)
    # from M's start, "bz" returns past its frame from state 4, of class 1, after one byte
    assert kind.tolist() == [1, 0, 1, 0, 2] and nxt[[0, 2, 4]].tolist() == [8, 8, 4]
    assert pos[4] == 1
    with pytest.raises(ValueError, match="site_next"):
        _core.pushdown_walk(table, final, call_row, call_start, call_ret, *no_counts,
                            exit_class, site_ptr, site_next + 9, starts, data, lo, lo + 2, 4)


def test_pushdown_walk_counts():
    # root 1 calls C on '"' and returns to 5 (final); C: 2 -"-> 3 (loop), 3 -a-> 3 (one more
    # repetition), 3 -"-> 4 (final): strings of 2 to 3 "a"s
    table = np.zeros((6, 256), i32)
    table[2, ord('"')], table[3, ord("a")], table[3, ord('"')] = 3, 3, 4
    final = np.array([False, False, False, False, True, True])
    call_row = np.array([-1, 0, -1, -1, -1, -1], i32)
    call_start = np.full((1, 256), -1, i32)
    call_start[0, ord('"')] = 2
    call_ret = np.zeros((1, 256), i32)
    call_ret[0, ord('"')] = 5
    loop_machine = np.array([-1, -1, -1, 1, -1, -1], i32)
    in_loop = np.array([False, False, False, True, False, False])
    counts = loop_machine, in_loop, np.array([0, 2], i64), np.array([-1, 3], i64), \
        np.zeros(6, i32), *_no_sites(6)
    texts = [b'"aa"', b'"a"', b'"aaaa"', b'"aa', b'aa"x', b'aaaaaaa']
    data = np.frombuffer(b"".join(texts), np.uint8)
    lo = np.cumsum([0] + [len(t) for t in texts[:-1]]).astype(i64)
    starts = np.array([1, 1, 1, 1, 3, 3], i32)
    kind, nxt, _, _, _, count = _core.pushdown_walk(
        table, final, call_row, call_start, call_ret, *counts, starts, data, lo,
        lo + [len(t) for t in texts], 4)
    # a frame the walk opened is checked (too few, too many); in the start frame the
    # repetitions are only counted, for the caller to check
    assert kind.tolist() == [1, 0, 0, 1, 2, 1]
    assert nxt[[0, 3, 5]].tolist() == [4, 3, 3] and count[[0, 3, 4, 5]].tolist() == [0, 2, 2, 7]


def test_pushdown_walk_twins():
    # as above, C reading 2 to 3 "a"s, but its loop state 3 has a twin, 6, which reads any
    # number (6 -a-> 6, 6 -"-> 4): where the count leaves its bounds in a frame the walk
    # opened, the twin reads the byte instead of the walk dying
    table = np.zeros((7, 256), i32)
    table[2, ord('"')], table[3, ord("a")], table[3, ord('"')] = 3, 3, 4
    table[6, ord("a")], table[6, ord('"')] = 6, 4
    final = np.array([False, False, False, False, True, True, False])
    call_row = np.array([-1, 0, -1, -1, -1, -1, -1], i32)
    call_start = np.full((1, 256), -1, i32)
    call_start[0, ord('"')] = 2
    call_ret = np.zeros((1, 256), i32)
    call_ret[0, ord('"')] = 5
    loop_machine = np.array([-1, -1, -1, 1, -1, -1, -1], i32)
    in_loop = np.array([False, False, False, True, False, False, False])
    twin = np.array([0, 0, 0, 6, 0, 0, 0], i32)
    texts = [b'"aa"', b'"a"', b'"aaaaa"', b'"aaaa', b'"ab']
    data = np.frombuffer(b"".join(texts), np.uint8)
    lo = np.cumsum([0] + [len(t) for t in texts[:-1]]).astype(i64)
    hi = lo + [len(t) for t in texts]
    starts = np.ones(len(texts), i32)
    for twins, alive in ((twin, [1, 1, 1, 1, 0]), (np.zeros(7, i32), [1, 0, 0, 0, 0])):
        kind, nxt, _, _, _, count = _core.pushdown_walk(
            table, final, call_row, call_start, call_ret, loop_machine, in_loop,
            np.array([0, 2], i64), np.array([-1, 3], i64), twins, *_no_sites(7), starts,
            data, lo, hi, 4)
        assert kind.tolist() == alive
    # a walk within the bounds ends in the loop with its count ('"aaaa' ends in the twin)
    kind, nxt, _, _, _, count = _core.pushdown_walk(
        table, final, call_row, call_start, call_ret, loop_machine, in_loop,
        np.array([0, 2], i64), np.array([-1, 3], i64), twin, *_no_sites(7), starts[:1],
        np.frombuffer(b'"aa', np.uint8), np.zeros(1, i64), np.full(1, 3, i64), 4)
    assert nxt.tolist() == [3] and count.tolist() == [2]
    with pytest.raises(ValueError, match="twin"):
        _core.pushdown_walk(table, final, call_row, call_start, call_ret, loop_machine,
                            in_loop, np.array([0, 2], i64), np.array([-1, 3], i64), twin + 7,
                            *_no_sites(7), starts, data, lo, hi, 4)


def _program(kind, children, extra):
    """`build_nfa` arguments for a program given per node: kind, children, payload."""
    child_ptr = np.concatenate([[0], np.cumsum([len(c) for c in children])]).astype(i64)
    extra_ptr = np.concatenate([[0], np.cumsum([len(x) for x in extra])]).astype(i64)
    return (np.array(kind, np.int8), child_ptr, np.array(sum(children, []), i32), extra_ptr,
            np.array(sum(extra, []), i32))


CHARSET, CONCAT, ALT, REPEAT, AUTOMATON, GRAPH, CALL = range(7)


def test_nfa_builder_limits_and_cycles():
    from grammarc.errors import TooManyStatesError

    # "a"{0,1000}: far more states than 100
    program = _program([REPEAT, CHARSET], [[1], []], [[0, 1000], [97, 97]])
    assert _core.build_nfa(*program, [], 0, 10_000)[0] > 1000
    with pytest.raises(TooManyStatesError, match="more than 100 NFA states"):
        _core.build_nfa(*program, [], 0, 100)
    # a Concat that contains itself: stopped by the nesting limit, not a crashed stack
    with pytest.raises(RecursionError):
        _core.build_nfa(*_program([CONCAT], [[0]], [[]]), [], 0, 10_000)


@pytest.mark.parametrize("kind, children, extra, message", [
    ([9], [[]], [[]], "kind holds 9"),
    ([CONCAT], [[3]], [[]], "children holds 3"),
    ([REPEAT, CHARSET], [[1], []], [[5, 2], [97, 97]], "Repeat"),
    ([CHARSET], [[]], [[97]], "pairs"),
    ([CHARSET], [[]], [[0, 0x110000]], "0x10FFFF"),
    ([CALL], [[]], [[300]], "Call's bytes"),
    ([AUTOMATON], [[]], [[0]], "automata"),
    ([GRAPH, CHARSET], [[1], []], [[1, 0, 0, 0, 4], [97, 97]], "Graph's node"),
])
def test_nfa_builder_rejects_malformed_programs(kind, children, extra, message):
    with pytest.raises(ValueError, match=message):
        _core.build_nfa(*_program(kind, children, extra), [], 0, 10_000)


def test_utf8_sequences_match_python_encodings():
    import random

    rng = random.Random(5)
    points = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]
    for _ in range(200):
        lo = rng.choice(points + [rng.randrange(0x110000)])
        hi = min(lo + rng.choice([0, 1, 63, 64, 4095, 70000]), 0x10FFFF)
        ranges = [(a, b) for a, b in [(lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)] if a <= b]
        sequences = _core.utf8_sequences(ranges)
        for cp in {lo, hi, (lo + hi) // 2, max(lo - 1, 0), min(hi + 1, 0x10FFFF)} - set(range(0xD800, 0xE000)):
            data = chr(cp).encode()
            matched = any(len(s) == len(data) and all(a <= b <= c for (a, c), b in zip(s, data))
                          for s in sequences)
            assert matched == any(a <= cp <= b for a, b in ranges), (ranges, hex(cp))


def test_column_groups_number_equal_columns_by_their_first():
    trans = np.array([[0, 1, 0, 2], [2, 1, 2, 2], [1, 1, 1, 0]], i32)
    assert _core.column_groups(trans).tolist() == [0, 1, 0, 2]
    assert _core.column_groups(np.zeros((3, 4), i32)).tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="two-dimensional"):
        _core.column_groups(np.zeros(3, i32))


def test_column_groups_tell_apart_columns_whose_hashes_collide():
    # two columns with the same 64-bit hash (found by a birthday search over the kernel's
    # hash): grouped by hash first, they must be told apart by their values
    a = np.array([3183617638, 5], np.uint32).view(i32)
    b = np.array([1153574501, 3170894284 ^ 5], np.uint32).view(i32)
    c = np.array([7, 7], i32)
    trans = np.ascontiguousarray(np.stack([c, a, b, a, c, b], axis=1))
    assert _core.column_groups(trans).tolist() == [0, 1, 2, 1, 0, 2]
    rng = np.random.default_rng(0)
    for _ in range(200):  # against grouping by the columns' bytes
        base = rng.integers(0, 3, (int(rng.integers(0, 30)), 4)).astype(i32)
        trans = np.ascontiguousarray(base[:, rng.integers(0, 4, int(rng.integers(1, 20)))])
        ids: dict[bytes, int] = {}
        expected = [ids.setdefault(trans[:, j].tobytes(), len(ids)) for j in range(trans.shape[1])]
        assert _core.column_groups(trans).tolist() == expected


def test_csr_bfs_order_visits_each_states_edges_in_their_order():
    # 0 -> 2, 1; 1 -> 3; 2 -> 3, 0; 3 -> nothing; 4 unreachable
    ptr = np.array([0, 2, 3, 5, 5, 6], np.int64)
    target = np.array([2, 1, 3, 3, 0, 0], i32)
    assert _core.csr_bfs_order(ptr, target, 0).tolist() == [0, 2, 1, 3]
    assert _core.csr_bfs_order(ptr, target, 4).tolist() == [4, 0, 2, 1, 3]
    with pytest.raises(ValueError, match="target"):
        _core.csr_bfs_order(ptr, np.array([2, 1, 3, 3, 9, 0], i32), 0)
    with pytest.raises(ValueError, match="start"):
        _core.csr_bfs_order(ptr, target, 5)


def _least_costs_by_fixpoint(accepting, owner, cost, ptr, members):
    """The same costs by rounds of relaxation from infinity (small inputs only)."""
    inf = float("inf")
    best = [0.0 if a else inf for a in accepting]
    for _ in range(len(accepting) + 1):
        for o in range(len(owner)):
            value = cost[o] + sum(best[s] for s in members[ptr[o]:ptr[o + 1]])
            best[owner[o]] = min(best[owner[o]], value)
    return [-1 if b == inf else int(b) for b in best]


def test_least_costs_match_a_fixpoint_on_random_options():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        accepting = rng.random(n) < 0.2
        n_options = int(rng.integers(0, 3 * n))
        owner = rng.integers(0, n, n_options).astype(np.int32)
        cost = rng.integers(0, 4, n_options).astype(np.int64)
        sizes = rng.integers(0, 4, n_options)
        ptr = np.zeros(n_options + 1, np.int64)
        np.cumsum(sizes, out=ptr[1:])
        members = rng.integers(0, n, int(ptr[-1])).astype(np.int32)
        got = _core.least_costs(accepting, owner, cost, ptr, members)
        assert got.tolist() == _least_costs_by_fixpoint(accepting, owner, cost, ptr, members)


def test_least_costs_reject_malformed_options():
    with pytest.raises(ValueError, match="option_states"):
        _core.least_costs(np.array([True]), np.array([0], np.int32), np.array([1], np.int64),
                          np.array([0, 1]), np.array([5], np.int32))
    with pytest.raises(ValueError, match=">= 0"):
        _core.least_costs(np.array([True]), np.array([0], np.int32), np.array([-1], np.int64),
                          np.array([0, 0]), np.zeros(0, np.int32))


def test_trie_code_matches_numpy_on_a_real_trie():
    rng = np.random.default_rng(7)
    tokens = [bytes(rng.integers(0, 256, rng.integers(1, 6)).tolist()) for _ in range(300)]
    node_byte, depth, _, node_of = _core.build_trie(
        np.frombuffer(b"".join(tokens), np.uint8),
        np.concatenate([[0], np.cumsum([len(t) for t in tokens])]).astype(i64))
    node_code = depth.astype(i32) << 16
    node_code[node_of] |= 1
    byte_class = rng.integers(0, 40, 256).astype(i32)
    code = _core.trie_code(node_code, node_byte, byte_class)
    assert np.array_equal(code, node_code | (byte_class[node_byte] << 1))
    with pytest.raises(ValueError, match="byte_class"):
        _core.trie_code(node_code, node_byte, np.full(256, 0x8000, i32))
    with pytest.raises(ValueError, match="node_byte"):
        _core.trie_code(node_code, node_byte[:-1], byte_class)


def test_classes_below_matches_numpy_on_random_tables():
    rng = np.random.default_rng(11)
    for _ in range(20):
        n_rows, n_tokens, n_classes = rng.integers(1, 6), rng.integers(1, 200), rng.integers(1, 30)
        table = rng.integers(0, 6, (n_rows, n_tokens)).astype(np.uint16)
        token_class = rng.integers(0, n_classes, n_tokens).astype(i32)
        rows = rng.integers(0, n_rows, rng.integers(0, 8)).astype(i32)
        expected = np.zeros((len(rows), n_classes), bool)
        for i, r in enumerate(rows):
            expected[i, np.unique(token_class[table[r] < 2])] = True
        found = _core.classes_below(table, rows, token_class, n_classes, 2)
        assert np.array_equal(found, expected)
        # a uint8 table (as count rows are where they fit) reads the same
        assert np.array_equal(_core.classes_below(table.astype(np.uint8), rows, token_class,
                                                  n_classes, 2), expected)
    with pytest.raises(ValueError, match="rows"):
        _core.classes_below(table, np.array([n_rows], i32), token_class, n_classes, 2)
    with pytest.raises(ValueError, match="token_class"):
        _core.classes_below(table, rows, np.full(n_tokens, n_classes, i32), n_classes, 2)


def test_spelled_starts_match_a_walk_of_each_token_on_random_spellings():
    rng = np.random.default_rng(13)
    for _ in range(10):
        tokens = [bytes(rng.integers(97, 101, rng.integers(1, 7)).tolist()) for _ in range(150)]
        vocab = [*tokens, b""]  # the last token is left out of the trie (as EOS is)
        node_byte, depth, _, node_of = _core.build_trie(
            np.frombuffer(b"".join(tokens), np.uint8),
            np.concatenate([[0], np.cumsum([len(t) for t in tokens])]).astype(i64))
        order = np.argsort(node_of, kind="stable")
        tok_ptr = np.concatenate([[0], np.cumsum(np.bincount(node_of, minlength=len(node_byte)))])
        n_states = int(rng.integers(2, 8))
        table = rng.integers(0, n_states, (n_states, 256)).astype(i32)
        boundary, in_loop = rng.random(n_states) < 0.5, rng.random(n_states) < 0.7
        places = rng.integers(0, n_states, 4).astype(i32)
        started, left = _core.spelled_starts(node_byte, depth, tok_ptr.astype(i64),
                                             order.astype(i32), len(vocab), table, boundary,
                                             in_loop, places)
        for p, place in enumerate(places.tolist()):
            for t, text in enumerate(vocab):
                state, count, gone = place, 0, False
                for byte in text:
                    if gone:
                        break
                    after = int(table[state, byte])
                    count += bool(boundary[state] and in_loop[after])
                    gone, state = not in_loop[after], after
                assert (started[p, t], left[p, t]) == (count, gone)
    with pytest.raises(ValueError, match="places"):
        _core.spelled_starts(node_byte, depth, tok_ptr.astype(i64), order.astype(i32),
                             len(vocab), table, boundary, in_loop, np.array([n_states], i32))
    with pytest.raises(ValueError, match="toks"):
        _core.spelled_starts(node_byte, depth, tok_ptr.astype(i64), order.astype(i32), 3,
                             table, boundary, in_loop, places)
    jumped = depth.copy()
    jumped[1] = 2
    with pytest.raises(ValueError, match="depth sequence"):
        _core.spelled_starts(node_byte, jumped, tok_ptr.astype(i64), order.astype(i32),
                             len(vocab), table, boundary, in_loop, places)


def test_refine_entries_spreads_each_entry_over_the_finer_classes_in_order():
    # fine classes 0..4 below coarse ones 0, 1, 2: 1 -> {1, 3}, 2 -> {2, 4}
    coarse_of_fine = np.array([0, 1, 2, 1, 2], i32)
    state_ptr = np.array([0, 2, 2, 3], i64)  # state 0: classes 2 and 1; state 1: none
    ptr, cls, nxt = _core.refine_entries(state_ptr, np.array([2, 1, 1], i32),
                                         np.array([0, 1, 2], i32), coarse_of_fine,
                                         np.array([7, 8, 9], i32))
    assert ptr.tolist() == [0, 4, 4, 6]
    assert cls.tolist() == [1, 2, 3, 4, 1, 3]
    assert nxt.tolist() == [8, 7, 8, 7, 9, 9]
    with pytest.raises(ValueError, match="entry_next"):
        _core.refine_entries(state_ptr, np.array([2, 1, 1], i32), np.array([0, 1, 3], i32),
                             coarse_of_fine, np.array([7, 8, 9], i32))
    with pytest.raises(ValueError, match="entry_class"):
        _core.refine_entries(state_ptr, np.array([2, 3, 1], i32), np.array([0, 1, 2], i32),
                             coarse_of_fine, np.array([7, 8, 9], i32))


@pytest.mark.parametrize("n_classes", [1, 2, 3, 6, 7, 12, 64])
def test_row_offsets_are_checked_whatever_the_number_of_classes(n_classes):
    """An offset must be -1 or a multiple of n_classes within the table (checked by a shift
    and a multiplication, for even and odd counts of classes alike)."""
    states = 3
    good = np.full(states * n_classes, -1, i32)
    good[0] = 2 * n_classes

    def walk(trans_off):
        return _core.TrieWalk(np.zeros(1, i32), np.ones(1, i32), trans_off, n_classes,
                              np.zeros(states, bool), -1)

    walk(good)
    for value in [v for v in range(-3, 4 * states * n_classes) if v != -1]:
        if 0 <= value < states * n_classes and value % n_classes == 0:
            continue
        bad = good.copy()
        bad[-1] = value
        with pytest.raises(ValueError, match="offset of a state's row"):
            walk(bad)


def test_component_twins_group_components_read_alike():
    # classes 0 other, 1 'a', 2 'b', 3 'x', 4 'q'; 1 -a-> 2, 1 -b-> 4; 2 and 4 read 'x' and
    # stay, 'q' leads out (to 3 or 5, accepting): the components {2} and {4} read alike
    trans = np.zeros((6, 5), np.int64)
    trans[1, 1], trans[1, 2] = 2, 4
    trans[2, 3], trans[2, 4], trans[4, 3], trans[4, 4] = 2, 3, 4, 5
    trans_off = np.where(trans == 0, -1, trans * 5).reshape(-1).astype(i32)
    accepting = np.array([False, False, False, True, False, True])
    args = (np.array([3], i32), np.array([10], i64), trans_off, 5, accepting)
    group, order_ptr, order_states, shared = _core.component_twins(
        *args, np.ones(6, bool), 1, 256)
    assert group[2] == group[4] >= 0 and (group[[0, 1, 3, 5]] == -1).all()
    assert order_states[order_ptr[2]:order_ptr[3]].tolist() == [2]
    assert order_states[order_ptr[4]:order_ptr[5]].tolist() == [4] and shared == 10
    # a candidate alone, a walk too short, a component too large: no group
    assert (_core.component_twins(*args, np.arange(6) != 4, 1, 256)[0] == -1).all()
    assert (_core.component_twins(*args, np.ones(6, bool), 11, 256)[0] == -1).all()
    assert (_core.component_twins(*args, np.ones(6, bool), 1, 0)[0] == -1).all()
    accepting[4] = True  # 4 may end where 2 may not: read differently
    assert (_core.component_twins(*args[:4], accepting, np.ones(6, bool), 1, 256)[0]
            == -1).all()
