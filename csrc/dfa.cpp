// Byte-DFA kernels: subset construction over byte classes, co-reachability, Hopcroft's
// minimisation, canonical breadth-first order, and the product of two DFAs
// (grammarc/automaton/dfa.py and products.py hold the algorithms' contracts).
#include <algorithm>
#include <numeric>

#include "kernels.hpp"

namespace grammarc {
namespace {

// Replace the seeds buf[0:k] by their epsilon closure; returns its size (unsorted).
int64_t close(int32_t* buf, int64_t k, const int64_t* eps_ptr, const int32_t* eps_dst,
              std::vector<int64_t>& mark, int64_t stamp, std::vector<int32_t>& stack) {
    int64_t sp = 0;
    for (int64_t i = 0; i < k; ++i) {
        const int32_t v = buf[i];
        if (mark[v] != stamp) {
            mark[v] = stamp;
            stack[sp++] = v;
        }
    }
    k = 0;
    while (sp > 0) {
        const int32_t u = stack[--sp];
        buf[k++] = u;
        for (int64_t j = eps_ptr[u]; j < eps_ptr[u + 1]; ++j) {
            const int32_t v = eps_dst[j];
            if (mark[v] != stamp) {
                mark[v] = stamp;
                stack[sp++] = v;
            }
        }
    }
    return k;
}

// Drop states dominated by a lower-ranked state of the same tag family (see nfa.py).
int64_t prune(int32_t* buf, int64_t k, const int64_t* tag_ptr, const int32_t* tag_family,
              const int32_t* tag_rank, std::vector<int64_t>& best_stamp,
              std::vector<int32_t>& best_rank, int64_t stamp) {
    bool has_tags = false;
    for (int64_t i = 0; i < k; ++i) {
        const int32_t u = buf[i];
        for (int64_t j = tag_ptr[u]; j < tag_ptr[u + 1]; ++j) {
            has_tags = true;
            const int32_t family = tag_family[j];
            if (best_stamp[family] != stamp || tag_rank[j] < best_rank[family]) {
                best_stamp[family] = stamp;
                best_rank[family] = tag_rank[j];
            }
        }
    }
    if (!has_tags) return k;
    int64_t kept = 0;
    for (int64_t i = 0; i < k; ++i) {
        const int32_t u = buf[i];
        bool dominated = false;
        for (int64_t j = tag_ptr[u]; j < tag_ptr[u + 1]; ++j)
            if (tag_rank[j] > best_rank[tag_family[j]]) {
                dominated = true;
                break;
            }
        if (!dominated) buf[kept++] = u;
    }
    return kept;
}

uint64_t hash_subset(const int32_t* data, int64_t k) {
    uint64_t h = kHashSeed;
    for (int64_t i = 0; i < k; ++i) h = hash_step(h, static_cast<uint64_t>(data[i]), 29);
    return h;
}

}  // namespace

py::tuple subset_construction(int64_t n_nfa, In<int64_t> eps_ptr, In<int32_t> eps_dst,
                              In<int64_t> edge_ptr, In<int32_t> edge_clo, In<int32_t> edge_chi,
                              In<int32_t> edge_dst, In<int64_t> tag_ptr, In<int32_t> tag_family,
                              In<int32_t> tag_rank, int64_t n_families, int64_t n_classes,
                              int64_t max_states, int64_t max_entries, In<int32_t> nfa_label) {
    require(n_nfa >= 2, "an NFA fragment has at least its entry and exit states");
    require(n_classes >= 1 && n_classes <= 256, "n_classes must be in 1..256");
    require(n_families >= 1, "n_families must be at least 1");
    require(max_states >= 2 && max_entries >= 1, "the limits must allow the first states");
    const int64_t n_eps = length(eps_dst, "eps_dst");
    require_csr(eps_ptr, n_nfa, n_eps, "eps_ptr");
    require_in_range(eps_dst.data(), n_eps, 0, n_nfa, "eps_dst");
    const int64_t n_edges = length(edge_dst, "edge_dst");
    length(edge_clo, "edge_clo", n_edges);
    length(edge_chi, "edge_chi", n_edges);
    require_csr(edge_ptr, n_nfa, n_edges, "edge_ptr");
    require_in_range(edge_dst.data(), n_edges, 0, n_nfa, "edge_dst");
    require_in_range(edge_clo.data(), n_edges, 0, n_classes, "edge_clo");
    require_in_range(edge_chi.data(), n_edges, 0, n_classes, "edge_chi");
    for (int64_t e = 0; e < n_edges; ++e)
        require(edge_clo.data()[e] <= edge_chi.data()[e], "an edge's class range is empty");
    const int64_t n_tags = length(tag_family, "tag_family");
    length(tag_rank, "tag_rank", n_tags);
    require_csr(tag_ptr, n_nfa, n_tags, "tag_ptr");
    require_in_range(tag_family.data(), n_tags, 0, n_families, "tag_family");
    length(nfa_label, "nfa_label", n_nfa);

    const int64_t* e_ptr = eps_ptr.data();
    const int32_t* e_dst = eps_dst.data();
    const int64_t* g_ptr = edge_ptr.data();
    const int32_t* g_clo = edge_clo.data();
    const int32_t* g_chi = edge_chi.data();
    const int32_t* g_dst = edge_dst.data();
    const int64_t* t_ptr = tag_ptr.data();
    const int32_t* t_family = tag_family.data();
    const int32_t* t_rank = tag_rank.data();
    const int32_t* label_of = nfa_label.data();

    std::vector<int32_t> trans;      // [n_dfa, n_classes]
    std::vector<uint8_t> accepting;  // [n_dfa]
    std::vector<int32_t> labels;     // [n_dfa]
    std::vector<int64_t> set_off{0};
    std::vector<int32_t> set_data;
    std::vector<uint64_t> set_hash;
    std::vector<int32_t> table(1024, -1);
    int64_t conflict[4] = {-1, -1, -1, -1};
    int64_t n_dfa = 0;
    int status = 0;
    {
        py::gil_scoped_release released;
        std::vector<int64_t> mark(n_nfa, 0), best_stamp(n_families, 0);
        std::vector<int32_t> best_rank(n_families, 0), stack(n_nfa), buf(n_nfa);
        std::vector<int64_t> head(n_classes, -1);
        std::vector<int32_t> touched(n_classes);
        std::vector<int32_t> item_val;
        std::vector<int64_t> item_next;
        int64_t stamp = 0;
        // seed 0: the empty set; seed 1: closure of the NFA entry; then one per (state, class)
        int64_t d = -2, n_touched = 0, ti = 0;
        while (true) {
            int64_t k;
            if (d == -2) {
                k = 0;
            } else if (d == -1) {
                buf[0] = 0;
                k = close(buf.data(), 1, e_ptr, e_dst, mark, ++stamp, stack);
            } else {
                if (ti == n_touched) {
                    // next DFA state: bucket the moves of its NFA states by class
                    if (++d >= n_dfa) break;
                    const int64_t lo = set_off[d], hi = set_off[d + 1];
                    int64_t need = 0;
                    for (int64_t idx = lo; idx < hi; ++idx) {
                        const int32_t u = set_data[idx];
                        for (int64_t e = g_ptr[u]; e < g_ptr[u + 1]; ++e)
                            need += g_chi[e] - g_clo[e] + 1;
                    }
                    if (need > static_cast<int64_t>(item_val.size())) {
                        item_val.resize(2 * need);
                        item_next.resize(2 * need);
                    }
                    int64_t n_items = 0;
                    n_touched = 0;
                    for (int64_t idx = lo; idx < hi; ++idx) {
                        const int32_t u = set_data[idx];
                        for (int64_t e = g_ptr[u]; e < g_ptr[u + 1]; ++e)
                            for (int32_t c = g_clo[e]; c <= g_chi[e]; ++c) {
                                if (head[c] == -1) touched[n_touched++] = c;
                                item_val[n_items] = g_dst[e];
                                item_next[n_items] = head[c];
                                head[c] = n_items++;
                            }
                    }
                    std::sort(touched.begin(), touched.begin() + n_touched);
                    ti = 0;
                    continue;
                }
                const int32_t c = touched[ti];
                k = 0;
                ++stamp;  // several NFA states may move to the same one: keep it once
                for (int64_t it = head[c]; it != -1; it = item_next[it]) {
                    const int32_t v = item_val[it];
                    if (mark[v] != stamp) {
                        mark[v] = stamp;
                        buf[k++] = v;
                    }
                }
                head[c] = -1;
                k = close(buf.data(), k, e_ptr, e_dst, mark, ++stamp, stack);
            }
            k = prune(buf.data(), k, t_ptr, t_family, t_rank, best_stamp, best_rank, stamp);
            std::sort(buf.begin(), buf.begin() + k);
            const uint64_t h = hash_subset(buf.data(), k);
            uint64_t mask = table.size() - 1;
            auto is_free = [&](uint64_t at) { return table[at] == -1; };
            const uint64_t slot = probe(h & mask, mask, is_free, [&](uint64_t at) {
                const int32_t cand = table[at];
                return set_hash[cand] == h && set_off[cand + 1] - set_off[cand] == k &&
                       std::equal(buf.begin(), buf.begin() + k, set_data.begin() + set_off[cand]);
            });
            int64_t found = table[slot];
            if (found == -1) {
                if (n_dfa >= max_states || set_off[n_dfa] + k > max_entries) {
                    status = 1;
                    break;
                }
                set_data.insert(set_data.end(), buf.begin(), buf.begin() + k);
                set_off.push_back(set_off[n_dfa] + k);
                set_hash.push_back(h);
                trans.resize((n_dfa + 1) * n_classes, 0);
                accepting.push_back(0);
                labels.push_back(-1);
                for (int64_t i = 0; i < k; ++i) {
                    if (buf[i] == 1) accepting[n_dfa] = 1;
                    const int32_t label = label_of[buf[i]];
                    if (label >= 0 && labels[n_dfa] != label) {
                        if (labels[n_dfa] >= 0) {
                            conflict[0] = d;
                            conflict[1] = d >= 0 ? touched[ti] : -1;
                            conflict[2] = labels[n_dfa];
                            conflict[3] = label;
                            status = 2;
                            break;
                        }
                        labels[n_dfa] = label;
                    }
                }
                if (status) break;
                table[slot] = static_cast<int32_t>(n_dfa);
                found = n_dfa++;
                if (2 * n_dfa > static_cast<int64_t>(table.size())) {
                    table.assign(2 * table.size(), -1);
                    mask = table.size() - 1;
                    for (int64_t s = 0; s < n_dfa; ++s)
                        table[free_slot(set_hash[s] & mask, mask, is_free)] =
                            static_cast<int32_t>(s);
                }
            }
            if (d >= 0) {
                trans[d * n_classes + touched[ti]] = static_cast<int32_t>(found);
                ++ti;
            } else {
                ++d;
            }
        }
    }
    py::array_t<int64_t> conflict_out(4);
    std::copy(conflict, conflict + 4, conflict_out.mutable_data());
    return py::make_tuple(to_numpy_2d(trans, n_dfa, n_classes), bool_numpy(accepting, n_dfa),
                          to_numpy(labels, n_dfa), status, conflict_out);
}

namespace {

// trans (n x k) with every value in [0, n).
void require_dfa(const In<int32_t>& trans, const char* name) {
    if (trans.ndim() != 2) fail(std::string(name) + " must be two-dimensional");
    require_in_range(trans.data(), trans.shape(0) * trans.shape(1), 0, trans.shape(0), name);
}

// The moves of a table into states other than the dead state 0, row by row: state s moves by
// class cls[j] to dst[j] for j in ptr[s]..ptr[s + 1], classes ascending. The tables these
// kernels minimise mostly hold the dead state (about one other move per state in an object's
// texts), so every step after the one pass over the table reads these alone.
struct SparseRows {
    std::vector<int64_t> ptr;
    std::vector<int32_t> cls, dst;
};

SparseRows sparse_rows(const int32_t* tr, int64_t n, int64_t k) {
    SparseRows rows;
    rows.ptr.assign(n + 1, 0);
    for (int64_t s = 0; s < n; ++s) {
        const int32_t* row = tr + s * k;
        for (int64_t a = 0; a < k; ++a)
            if (row[a] != 0) {
                rows.cls.push_back(static_cast<int32_t>(a));
                rows.dst.push_back(row[a]);
            }
        rows.ptr[s + 1] = static_cast<int64_t>(rows.cls.size());
    }
    return rows;
}

// The group of each of the k columns of a table given by its `rows`: equal columns share one,
// numbered by their first column. Columns are hashed over their moves, then a column is
// compared, move by move, with the first column of each group of its hash.
std::vector<int32_t> group_columns(const SparseRows& rows, int64_t n, int64_t k) {
    std::vector<uint64_t> hash(k, kHashSeed);
    std::vector<int64_t> col_ptr(k + 1, 0);
    for (int64_t s = 0; s < n; ++s)
        for (int64_t j = rows.ptr[s]; j < rows.ptr[s + 1]; ++j) {
            const int32_t a = rows.cls[j];
            hash[a] = hash_step(hash_step(hash[a], static_cast<uint64_t>(s), 29),
                                static_cast<uint32_t>(rows.dst[j]), 31);
            col_ptr[a + 1] += 1;
        }
    for (int64_t a = 0; a < k; ++a) col_ptr[a + 1] += col_ptr[a];
    // each column's moves as (state, target), states ascending
    std::vector<int64_t> fill(col_ptr.begin(), col_ptr.end() - 1);
    std::vector<std::pair<int32_t, int32_t>> moves(col_ptr[k]);
    for (int64_t s = 0; s < n; ++s)
        for (int64_t j = rows.ptr[s]; j < rows.ptr[s + 1]; ++j)
            moves[fill[rows.cls[j]]++] = {static_cast<int32_t>(s), rows.dst[j]};
    std::vector<int32_t> group(k, 0);
    std::vector<int64_t> first;  // the first column of each group
    for (int64_t a = 0; a < k; ++a) {
        int64_t found = -1;
        for (size_t g = 0; g < first.size() && found < 0; ++g) {
            const int64_t b = first[g];
            if (hash[b] == hash[a] && col_ptr[b + 1] - col_ptr[b] == col_ptr[a + 1] - col_ptr[a] &&
                std::equal(moves.begin() + col_ptr[a], moves.begin() + col_ptr[a + 1],
                           moves.begin() + col_ptr[b]))
                found = static_cast<int64_t>(g);
        }
        if (found < 0) {
            found = static_cast<int64_t>(first.size());
            first.push_back(a);
        }
        group[a] = static_cast<int32_t>(found);
    }
    return group;
}

// The moves of a table given by its `rows` into each state but the dead one, by the first
// column of each class (class a is column `column_of[a]`; `group` gives each column's class):
// the moves into t come from src[ptr[t] : ptr[t + 1]] by class cls[...], in the order of
// (source, class).
struct Incoming {
    std::vector<int64_t> ptr;
    std::vector<int32_t> src, cls;
};

Incoming incoming_moves(const SparseRows& rows, int64_t n, const std::vector<int32_t>& group,
                        const std::vector<int64_t>& column_of) {
    Incoming in;
    in.ptr.assign(n + 2, 0);
    auto first_of_class = [&](int64_t j) { return column_of[group[rows.cls[j]]] == rows.cls[j]; };
    for (int64_t j = 0; j < rows.ptr[n]; ++j)
        if (first_of_class(j)) in.ptr[rows.dst[j] + 2] += 1;
    for (int64_t t = 2; t <= n + 1; ++t) in.ptr[t] += in.ptr[t - 1];
    in.src.resize(in.ptr[n + 1]);
    in.cls.resize(in.ptr[n + 1]);
    for (int64_t s = 0; s < n; ++s)
        for (int64_t j = rows.ptr[s]; j < rows.ptr[s + 1]; ++j) {
            if (!first_of_class(j)) continue;
            const int64_t at = in.ptr[rows.dst[j] + 1]++;
            in.src[at] = static_cast<int32_t>(s);
            in.cls[at] = group[rows.cls[j]];
        }
    in.ptr.pop_back();
    return in;
}

// Which states can reach an accepting state (state 0 is never accepting).
std::vector<uint8_t> live_states(const Incoming& in, int64_t n, const uint8_t* acc) {
    const std::vector<int32_t> dist = distances_over(n, acc, in.ptr.data(), in.src.data());
    std::vector<uint8_t> live(n);
    for (int64_t s = 0; s < n; ++s) live[s] = dist[s] >= 0;
    return live;
}

// Hopcroft's partition refinement of a DFA of n states and k classes, given by its moves
// `in` into each state, from the partition by `init`, with the moves into states that are
// not `live` taken as moves into the dead state 0 (a trimmed DFA): the block of each state
// into `block`, the number of blocks returned. The dead state must have an initial value of
// its own; its block is never used as a splitter, and the moves into it are not indexed
// (same result, far less work on a trimmed grammar).
//
// A block is split by for all its pending classes at once: one pass over the moves into its
// states sorts their sources by class, then each class met splits as in the textbook
// algorithm. Splitting by a block that has since been split (the union of its parts) is
// sound, and the parts are queued by the usual rule, so the result is the coarsest
// partition, as one class at a time would give.
int64_t refine_blocks(const Incoming& in, const uint8_t* live, int64_t n, int64_t k,
                      const int32_t* init, int32_t* block) {
    int64_t n_blocks = 0;
    std::vector<int32_t> elems(n);
    std::vector<int64_t> pos(n), bstart(n + 1, 0), bend(n + 1, 0), nmark(n + 1, 0);
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [init](int64_t x, int64_t y) { return init[x] < init[y]; });
    for (int64_t i = 0; i < n; ++i) {
        const int64_t s = order[i];
        elems[i] = static_cast<int32_t>(s);
        pos[s] = i;
        if (i == 0 || init[s] != init[order[i - 1]]) bstart[n_blocks++] = i;
        bend[n_blocks - 1] = i + 1;
        block[s] = static_cast<int32_t>(n_blocks - 1);
    }
    // the classes pending for each block, a bit per class; every initial block but the
    // dead state's splits the others by all classes
    const int64_t words = (k + 63) / 64;
    std::vector<uint64_t> all(words, ~uint64_t{0});
    if (k % 64) all[words - 1] = (uint64_t{1} << (k % 64)) - 1;
    std::vector<uint64_t> in_work((n + 1) * words, 0);
    std::vector<int64_t> work;  // blocks with pending classes (maybe listed twice)
    for (int64_t b = 0; b < n_blocks; ++b)
        if (b != block[0]) {
            work.push_back(b);
            std::copy(all.begin(), all.end(), in_work.begin() + b * words);
        }
    std::vector<int32_t> touched(n), classes, met;
    std::vector<uint8_t> pending(k, 0);
    std::vector<std::vector<int32_t>> sources(k);
    while (!work.empty()) {
        const int64_t bb = work.back();
        work.pop_back();
        classes.clear();
        for (int64_t w = 0; w < words; ++w) {
            for (uint64_t bits = in_work[bb * words + w]; bits != 0; bits &= bits - 1) {
                const int32_t a = static_cast<int32_t>(w * 64 + __builtin_ctzll(bits));
                pending[a] = 1;
                classes.push_back(a);
            }
            in_work[bb * words + w] = 0;
        }
        if (classes.empty()) continue;
        met.clear();  // the pending classes of moves into the splitter
        for (int64_t i = bstart[bb]; i < bend[bb]; ++i) {
            const int32_t t = elems[i];
            if (!live[t]) continue;
            for (int64_t j = in.ptr[t]; j < in.ptr[t + 1]; ++j) {
                const int32_t a = in.cls[j];
                if (!pending[a]) continue;
                if (sources[a].empty()) met.push_back(a);
                sources[a].push_back(in.src[j]);
            }
        }
        for (const int32_t a : classes) pending[a] = 0;
        std::sort(met.begin(), met.end());
        for (const int32_t a : met) {
            int64_t n_touched = 0;
            for (const int32_t s : sources[a]) {
                const int32_t b = block[s];
                const int64_t p = pos[s], q = bstart[b] + nmark[b];
                if (p < q) continue;
                if (nmark[b] == 0) touched[n_touched++] = b;
                const int32_t other = elems[q];
                elems[q] = s;
                pos[s] = q;
                elems[p] = other;
                pos[other] = p;
                nmark[b] += 1;
            }
            sources[a].clear();
            for (int64_t t = 0; t < n_touched; ++t) {
                const int32_t b = touched[t];
                if (nmark[b] < bend[b] - bstart[b]) {
                    const int64_t nb = n_blocks++;
                    bstart[nb] = bstart[b];
                    bend[nb] = bstart[b] + nmark[b];
                    bstart[b] = bend[nb];
                    for (int64_t i = bstart[nb]; i < bend[nb]; ++i)
                        block[elems[i]] = static_cast<int32_t>(nb);
                    // a class pending for b is now pending for both parts; any other
                    // for the smaller part
                    uint64_t* pending_b = &in_work[b * words];
                    uint64_t* pending_nb = &in_work[nb * words];
                    const bool nb_smaller = bend[nb] - bstart[nb] <= bend[b] - bstart[b];
                    bool queue_b = false, queue_nb = false;
                    for (int64_t w = 0; w < words; ++w) {
                        pending_nb[w] = nb_smaller ? all[w] : pending_b[w];
                        queue_nb |= pending_nb[w] != 0;
                        if (!nb_smaller) {
                            queue_b |= pending_b[w] != all[w];
                            pending_b[w] = all[w];
                        }
                    }
                    if (queue_nb) work.push_back(nb);
                    if (queue_b) work.push_back(b);
                }
                nmark[b] = 0;
            }
        }
    }
    return n_blocks;
}

// States in canonical order: `dead`, then breadth-first from `start` visiting classes in order
// (the moves of `rows`; every other move is into `dead`).
std::vector<int32_t> canonical_order(const SparseRows& rows, int64_t n, int64_t dead,
                                     int64_t start) {
    std::vector<int32_t> order;
    order.reserve(n);
    std::vector<uint8_t> seen(n, 0);
    order.push_back(static_cast<int32_t>(dead));
    order.push_back(static_cast<int32_t>(start));
    seen[dead] = seen[start] = 1;
    for (size_t head = 1; head < order.size(); ++head) {
        const int64_t s = order[head];
        for (int64_t j = rows.ptr[s]; j < rows.ptr[s + 1]; ++j) {
            const int32_t t = rows.dst[j];
            if (!seen[t]) {
                seen[t] = 1;
                order.push_back(t);
            }
        }
    }
    return order;
}

}  // namespace

py::array_t<int32_t> column_groups(In<int32_t> trans) {
    require(trans.ndim() == 2, "trans must be two-dimensional");
    const int64_t n = trans.shape(0), k = trans.shape(1);
    std::vector<int32_t> group;
    {
        py::gil_scoped_release released;
        group = group_columns(sparse_rows(trans.data(), n, k), n, k);
    }
    return to_numpy(group);
}

py::tuple minimize_dfa(In<int32_t> trans, In<int32_t> byte_class, In<bool> accepting,
                       In<int32_t> labels) {
    require_dfa(trans, "trans");
    const int64_t n = trans.shape(0), k0 = trans.shape(1);
    require(n >= 2, "trans must hold the dead state and the start");
    length(byte_class, "byte_class", 256);
    require_in_range(byte_class.data(), 256, 0, k0, "byte_class");
    length(accepting, "accepting", n);
    const bool labelled = labels.shape(0) > 0;
    if (labelled) length(labels, "labels", n);
    const int32_t* tr0 = trans.data();
    const uint8_t* acc = reinterpret_cast<const uint8_t*>(accepting.data());
    const int32_t* lab = labels.data();
    std::vector<int32_t> out_class(256), rep_of;
    py::array_t<int32_t> out_trans(std::vector<int64_t>{0, 0});
    std::vector<uint8_t> out_acc;
    int64_t m = 0, c = 0, status = 0;
    {
        py::gil_scoped_release released;
        // classes every state treats alike are one (Hopcroft's cost grows with classes)
        const SparseRows rows = sparse_rows(tr0, n, k0);
        const std::vector<int32_t> group = group_columns(rows, n, k0);
        const int64_t k = *std::max_element(group.begin(), group.end()) + 1;
        std::vector<int64_t> column_of(k);
        for (int64_t a = k0 - 1; a >= 0; --a) column_of[group[a]] = a;
        // moves to states that cannot reach acceptance go to the dead state (trimmed)
        const Incoming in = incoming_moves(rows, n, group, column_of);
        const std::vector<uint8_t> live = live_states(in, n, acc);
        if (!live[1]) {
            status = 1;
        } else {
            // accepting, and the label of a live state, separate states; the dead state
            // starts in a block of its own (never a splitter)
            std::vector<int32_t> init(n), block(n);
            int32_t highest = 0;
            for (int64_t s = 0; s < n; ++s) {
                init[s] = acc[s] + (labelled && live[s] ? 2 * (lab[s] + 1) : 0);
                highest = std::max(highest, init[s]);
            }
            init[0] = highest + 1;
            const int64_t n_blocks = refine_blocks(in, live.data(), n, k, init.data(),
                                                   block.data());
            const int64_t dead = block[0], start = block[1];
            if (dead == start) {
                status = 1;
            } else {
                std::vector<int32_t> rep(n_blocks);
                for (int64_t s = 0; s < n; ++s) rep[block[s]] = static_cast<int32_t>(s);
                // each block's moves (its representative's, by the first column of each
                // class) into live blocks
                SparseRows block_rows;
                block_rows.ptr.assign(n_blocks + 1, 0);
                for (int64_t b = 0; b < n_blocks; ++b) {
                    const int64_t s = rep[b];
                    for (int64_t j = rows.ptr[s]; j < rows.ptr[s + 1]; ++j) {
                        const int32_t a = group[rows.cls[j]], t = rows.dst[j];
                        if (column_of[a] == rows.cls[j] && live[t]) {
                            block_rows.cls.push_back(a);
                            block_rows.dst.push_back(block[t]);
                        }
                    }
                    block_rows.ptr[b + 1] = static_cast<int64_t>(block_rows.cls.size());
                }
                const std::vector<int32_t> order = canonical_order(block_rows, n_blocks, dead,
                                                                   start);
                m = static_cast<int64_t>(order.size());
                std::vector<int32_t> new_id(n_blocks, -1);
                for (int64_t i = 0; i < m; ++i) new_id[order[i]] = static_cast<int32_t>(i);
                SparseRows canon;  // the minimal DFA's moves, by class, states renumbered
                canon.ptr.assign(m + 1, 0);
                rep_of.resize(m);
                out_acc.resize(m);
                for (int64_t i = 0; i < m; ++i) {
                    const int64_t b = order[i];
                    for (int64_t j = block_rows.ptr[b]; j < block_rows.ptr[b + 1]; ++j) {
                        canon.cls.push_back(block_rows.cls[j]);
                        canon.dst.push_back(new_id[block_rows.dst[j]]);
                    }
                    canon.ptr[i + 1] = static_cast<int64_t>(canon.cls.size());
                    rep_of[i] = rep[b];
                    out_acc[i] = acc[rep_of[i]];
                }
                // classes with equal columns merged, numbered by their first byte
                const std::vector<int32_t> merged = group_columns(canon, m, k);
                std::vector<int32_t> rank(k, -1);
                std::vector<int64_t> column_of_rank;
                for (int64_t b = 0; b < 256; ++b) {
                    const int64_t column = group[byte_class.data()[b]];
                    const int32_t g = merged[column];
                    if (rank[g] < 0) {
                        rank[g] = static_cast<int32_t>(column_of_rank.size());
                        column_of_rank.push_back(column);
                    }
                    out_class[b] = rank[g];
                }
                c = static_cast<int64_t>(column_of_rank.size());
                int32_t* out = nullptr;
                {  // written in place: a large table is not allocated and copied twice
                    py::gil_scoped_acquire acquired;
                    out_trans = py::array_t<int32_t>(std::vector<int64_t>{m, c});
                    out = out_trans.mutable_data();
                }
                std::fill(out, out + m * c, 0);
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = canon.ptr[i]; j < canon.ptr[i + 1]; ++j) {
                        const int32_t a = canon.cls[j], r = rank[merged[a]];
                        if (column_of_rank[r] == a) out[i * c + r] = canon.dst[j];
                    }
            }
        }
    }
    return py::make_tuple(out_trans, to_numpy(out_class),
                          bool_numpy(out_acc, m), to_numpy(rep_of), status);
}

py::array_t<int32_t> csr_bfs_order(In<int64_t> ptr, In<int32_t> target, int64_t start) {
    const int64_t n = ptr.ndim() == 1 ? ptr.shape(0) - 1 : -1;
    require(n >= 1 && start >= 0 && start < n, "ptr must have a row per state, start within");
    const int64_t m = length(target, "target");
    require_csr(ptr, n, m, "ptr");
    require_in_range(target.data(), m, 0, n, "target");
    const int64_t* p = ptr.data();
    const int32_t* tg = target.data();
    std::vector<int32_t> order{static_cast<int32_t>(start)};
    {
        py::gil_scoped_release released;
        std::vector<uint8_t> seen(n, 0);
        seen[start] = 1;
        for (size_t head = 0; head < order.size(); ++head)
            for (int64_t j = p[order[head]]; j < p[order[head] + 1]; ++j)
                if (!seen[tg[j]]) {
                    seen[tg[j]] = 1;
                    order.push_back(tg[j]);
                }
    }
    return to_numpy(order);
}

py::tuple product(In<int32_t> trans_a, In<bool> acc_a, In<int32_t> trans_b, In<bool> acc_b,
                  In<int32_t> class_a, In<int32_t> class_b, int op, int64_t max_states) {
    require_dfa(trans_a, "trans_a");
    require_dfa(trans_b, "trans_b");
    const int64_t n_a = trans_a.shape(0), k_a = trans_a.shape(1);
    const int64_t n_b = trans_b.shape(0), k_b = trans_b.shape(1);
    require(n_a >= 2 && n_b >= 2, "each DFA has a dead and a start state");
    length(acc_a, "acc_a", n_a);
    length(acc_b, "acc_b", n_b);
    const int64_t n_classes = length(class_a, "class_a");
    length(class_b, "class_b", n_classes);
    require_in_range(class_a.data(), n_classes, 0, k_a, "class_a");
    require_in_range(class_b.data(), n_classes, 0, k_b, "class_b");
    require(op == 0 || op == 1, "op is 0 (intersection) or 1 (difference)");
    require(max_states >= 2, "max_states must allow the dead and start states");
    const int32_t *ta = trans_a.data(), *tb = trans_b.data();
    const int32_t *ca = class_a.data(), *cb = class_b.data();
    const bool *aa = acc_a.data(), *ab = acc_b.data();
    auto accepts = [&](int64_t pa, int64_t pb) { return aa[pa] && (op == 0 ? ab[pb] : !ab[pb]); };

    // state 0: dead; state 1: the pair of starts
    std::vector<int32_t> trans(2 * n_classes, 0);
    std::vector<uint8_t> accepting{0, static_cast<uint8_t>(accepts(1, 1))};
    std::vector<int64_t> pair_a{0, 1}, pair_b{0, 1};
    std::vector<int64_t> keys(1024, -1);
    std::vector<int32_t> vals(1024, 0);
    uint64_t mask = keys.size() - 1;
    auto is_free = [&](uint64_t at) { return keys[at] == -1; };
    keys[slot_of(n_b + 1, mask)] = n_b + 1;
    vals[slot_of(n_b + 1, mask)] = 1;
    int status = 0;
    {
        py::gil_scoped_release released;
        for (int64_t d = 1; d < static_cast<int64_t>(pair_a.size()) && !status; ++d) {
            for (int64_t c = 0; c < n_classes; ++c) {
                const int64_t pa = ta[pair_a[d] * k_a + ca[c]];
                const int64_t pb = tb[pair_b[d] * k_b + cb[c]];
                if (pa == 0 || (op == 0 && pb == 0)) continue;
                const int64_t key = pa * n_b + pb;
                const uint64_t slot = probe(slot_of(key, mask), mask, is_free,
                                            [&](uint64_t at) { return keys[at] == key; });
                if (is_free(slot)) {
                    const int64_t n = pair_a.size();
                    if (n >= max_states) {
                        status = 1;
                        break;
                    }
                    keys[slot] = key;
                    vals[slot] = static_cast<int32_t>(n);
                    pair_a.push_back(pa);
                    pair_b.push_back(pb);
                    accepting.push_back(accepts(pa, pb));
                    trans.resize((n + 1) * n_classes, 0);
                    if (2 * (n + 1) > static_cast<int64_t>(keys.size())) {
                        keys.assign(2 * keys.size(), -1);
                        vals.assign(keys.size(), 0);
                        mask = keys.size() - 1;
                        for (int64_t s = 1; s <= n; ++s) {
                            const int64_t k2 = pair_a[s] * n_b + pair_b[s];
                            const uint64_t at = free_slot(slot_of(k2, mask), mask, is_free);
                            keys[at] = k2;
                            vals[at] = static_cast<int32_t>(s);
                        }
                    }
                    trans[d * n_classes + c] = static_cast<int32_t>(n);
                } else {
                    trans[d * n_classes + c] = vals[slot];
                }
            }
        }
    }
    const int64_t n = pair_a.size();
    return py::make_tuple(to_numpy_2d(trans, n, n_classes), bool_numpy(accepting, n), status,
                          to_numpy(pair_a), to_numpy(pair_b));
}

}  // namespace grammarc
