// Token-alignment kernels: the vocabulary's byte trie, its fold over byte classes, the walk
// from every DFA state with partition refinement of token classes, and the factored rows
// (grammarc/alignment/flat.py holds the algorithms' contracts).
#include <algorithm>
#include <memory>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>

#include "kernels.hpp"

namespace grammarc {

py::tuple build_trie(In<uint8_t> data, In<int64_t> offsets) {
    const int64_t n_data = length(data, "data");
    const int64_t n_items = length(offsets, "offsets") - 1;
    require(n_items >= 0, "offsets has at least one entry");
    require_csr(offsets, n_items, n_data, "offsets");
    const uint8_t* bytes = data.data();
    const int64_t* off = offsets.data();
    const int64_t cap = n_data + 1;
    std::vector<uint8_t> node_byte(cap, 0);
    std::vector<int32_t> node_depth(cap, 0), node_end(cap, 0), node_of_item(n_items, 0);
    int64_t n = 1;
    {
        py::gil_scoped_release released;
        // the strings in byte order (a prefix first), equal strings in input order
        std::vector<int64_t> sorted(n_items);
        std::iota(sorted.begin(), sorted.end(), 0);
        std::stable_sort(sorted.begin(), sorted.end(), [&](int64_t x, int64_t y) {
            const int64_t lx = off[x + 1] - off[x], ly = off[y + 1] - off[y];
            const int c = std::memcmp(bytes + off[x], bytes + off[y], std::min(lx, ly));
            return c < 0 || (c == 0 && lx < ly);
        });
        int64_t max_len = 0;
        for (int64_t i = 0; i < n_items; ++i) max_len = std::max(max_len, off[i + 1] - off[i]);
        std::vector<int32_t> path(max_len + 1, 0);  // path[d]: node at depth d on this branch
        int64_t prev_lo = 0, prev_len = 0;
        for (int64_t item : sorted) {
            const int64_t lo = off[item], len = off[item + 1] - lo;
            int64_t common = 0;
            while (common < len && common < prev_len && bytes[lo + common] == bytes[prev_lo + common])
                ++common;
            // nodes deeper than the common prefix are finished
            for (int64_t d = prev_len; d > common; --d) node_end[path[d]] = static_cast<int32_t>(n);
            for (int64_t d = common + 1; d <= len; ++d) {
                node_byte[n] = bytes[lo + d - 1];
                node_depth[n] = static_cast<int32_t>(d);
                path[d] = static_cast<int32_t>(n++);
            }
            node_of_item[item] = path[len];
            prev_lo = lo;
            prev_len = len;
        }
        for (int64_t d = prev_len; d > 0; --d) node_end[path[d]] = static_cast<int32_t>(n);
        node_end[0] = static_cast<int32_t>(n);
    }
    return py::make_tuple(to_numpy(node_byte, n), to_numpy(node_depth, n), to_numpy(node_end, n),
                          to_numpy(node_of_item));
}

py::array_t<int32_t> trie_code(In<int32_t> node_code, In<uint8_t> node_byte,
                               In<int32_t> byte_class) {
    const int64_t n = length(node_code, "node_code");
    length(node_byte, "node_byte", n);
    length(byte_class, "byte_class", 256);
    require_in_range(byte_class.data(), 256, 0, 0x8000, "byte_class");
    py::array_t<int32_t> out(n);
    int32_t* code = out.mutable_data();
    const int32_t* known = node_code.data();
    const uint8_t* byte_of = node_byte.data();
    const int32_t* class_of = byte_class.data();
    {
        py::gil_scoped_release released;
        for (int64_t i = 0; i < n; ++i) code[i] = known[i] | (class_of[byte_of[i]] << 1);
    }
    return out;
}

py::tuple class_trie(In<uint8_t> node_byte, In<int32_t> node_depth, In<int32_t> byte_class,
                     int64_t n_classes) {
    const int64_t n = length(node_byte, "node_byte");
    require_trie_depths(node_depth, n);
    length(byte_class, "byte_class", 256);
    require_in_range(byte_class.data(), 256, 0, n_classes, "byte_class");
    const int32_t* depth_of = node_depth.data();
    const uint8_t* byte_of = node_byte.data();
    const int32_t* class_of = byte_class.data();
    std::vector<int32_t> label, out_depth, end;
    std::vector<int64_t> node_of_byte_node(n, 0);
    {
        py::gil_scoped_release released;
        const int64_t max_depth = *std::max_element(depth_of, depth_of + n);
        std::vector<int64_t> path(max_depth + 1, 0), first_child(n, -1), sibling(n, -1),
            parent(n, -1), created(n, 0);
        std::vector<int32_t> c_label(n, 0);
        int64_t n_c = 1;
        for (int64_t i = 1; i < n; ++i) {
            const int64_t d = depth_of[i], p = path[d - 1];
            const int32_t lab = class_of[byte_of[i]];
            int64_t q = first_child[p];
            while (q != -1 && c_label[q] != lab) q = sibling[q];
            if (q == -1) {
                q = n_c++;
                c_label[q] = lab;
                parent[q] = p;
                sibling[q] = first_child[p];
                first_child[p] = q;
            }
            path[d] = q;
            created[i] = q;
        }
        std::vector<int64_t> size(n_c, 1);
        for (int64_t c = n_c - 1; c > 0; --c) size[parent[c]] += size[c];  // children after parents
        // pre-order: a child starts right after its parent or its previous sibling's subtree
        std::vector<int64_t> pre(n_c, 0);
        std::vector<int32_t> depth(n_c, 0);
        for (int64_t c = 1; c < n_c; ++c) {
            const int64_t p = parent[c];
            int64_t start = pre[p] + 1;
            for (int64_t q = first_child[p]; q != c; q = sibling[q]) start += size[q];
            pre[c] = start;
            depth[c] = depth[p] + 1;
        }
        label.assign(n_c, 0);
        out_depth.assign(n_c, 0);
        end.assign(n_c, 0);
        for (int64_t c = 0; c < n_c; ++c) {
            label[pre[c]] = c_label[c];
            out_depth[pre[c]] = depth[c];
            end[pre[c]] = static_cast<int32_t>(pre[c] + size[c]);
        }
        for (int64_t i = 0; i < n; ++i) node_of_byte_node[i] = pre[created[i]];
    }
    return py::make_tuple(to_numpy(label), to_numpy(out_depth), to_numpy(end),
                          to_numpy(node_of_byte_node));
}

namespace {

// `num_items` checked before any allocation depends on it.
int64_t checked_size(int64_t num_items) {
    require(num_items >= 1, "a forest needs items");
    return num_items;
}

}  // namespace

namespace {

// Every value of `trans_off` (n_off entries, int64 if `wide`, else int32) is -1 or the offset
// of a state's row.
// Division by `d` of its multiples, and the test that a value is one, without a division
// per value: d = odd * 2^shift, and a multiple of d shifted right is the quotient times odd,
// whose inverse modulo 2^64 gives the quotient back (and a product past UINT64_MAX / odd for
// any other value).
class ExactDivisor {
   public:
    explicit ExactDivisor(int64_t d) {
        uint64_t odd = static_cast<uint64_t>(d);
        while (!(odd & 1)) {
            odd >>= 1;
            ++shift_;
        }
        inverse_ = odd;  // Newton's iteration doubles the correct low bits: 3, 6, ..., 96
        for (int i = 0; i < 5; ++i) inverse_ *= 2 - odd * inverse_;
        most_ = UINT64_MAX / odd;
    }
    bool divides(uint64_t t) const {
        return (t & ((uint64_t{1} << shift_) - 1)) == 0 && (t >> shift_) * inverse_ <= most_;
    }
    int64_t quotient(uint64_t multiple) const {
        return static_cast<int64_t>((multiple >> shift_) * inverse_);
    }

   private:
    int shift_ = 0;
    uint64_t inverse_ = 0, most_ = 0;
};

template <class Offset>
bool row_offsets(const Offset* t, int64_t n_off, int64_t n_classes) {
    const ExactDivisor row(n_classes);
    bool bad = false;  // one branch-free pass (this runs per walk, over the whole table)
    for (int64_t i = 0; i < n_off; ++i)
        bad |= t[i] != -1 && (t[i] < 0 || t[i] >= n_off || !row.divides(t[i]));
    return !bad;
}

void require_row_offsets(const py::array& trans_off, bool wide, int64_t n_off,
                         int64_t n_classes) {
    require(wide ? row_offsets(static_cast<const int64_t*>(trans_off.data()), n_off, n_classes)
                 : row_offsets(static_cast<const int32_t*>(trans_off.data()), n_off, n_classes),
            "trans_off holds a value that is not -1 or the offset of a state's row");
}

}  // namespace

TrieWalk::TrieWalk(In<int32_t> code_, In<int32_t> end_, py::array trans_off_,
                   int64_t n_classes_, In<bool> accepting_, int64_t eos_item_)
    : code(std::move(code_)), end(std::move(end_)), trans_off(std::move(trans_off_)),
      accepting(std::move(accepting_)), n_classes(n_classes_), eos_item(eos_item_) {
    n_nodes = length(code, "code");
    length(end, "end", n_nodes);
    n_states = length(accepting, "accepting");
    require(n_classes >= 1 && n_classes <= 0x7FFF, "n_classes must be in 1..32767");
    require(trans_off.ndim() == 1 && trans_off.shape(0) == n_states * n_classes,
            "trans_off must hold num_states * n_classes entries");
    const bool wide = py::isinstance<py::array_t<int64_t>>(trans_off);
    require(wide || py::isinstance<py::array_t<int32_t>>(trans_off),
            "trans_off must be an int32 or int64 array");
    require(trans_off.flags() & py::array::c_style, "trans_off must be C-contiguous");
    require_row_offsets(trans_off, wide, n_states * n_classes, n_classes);
    const int32_t* c = code.data();
    const int32_t* e = end.data();
    // one branch-free pass over every node (this runs per grammar, over the whole trie);
    // only a malformed trie pays for the second pass that names the fault
    require(n_nodes < INT32_MAX, "a trie has fewer than 2**31 nodes");
    const int32_t nodes = static_cast<int32_t>(n_nodes), classes = static_cast<int32_t>(n_classes);
    int32_t bad = 0, deepest = 0;
    for (int32_t i = 1; i < nodes; ++i) {  // int32 throughout, so that it vectorises
        const int32_t d = c[i] >> 16, label = (c[i] >> 1) & 0x7FFF;
        bad |= (d < 1) | (d > (c[i - 1] >> 16) + 1) | (label >= classes) | (e[i] <= i) |
               (e[i] > nodes);
        deepest = std::max(deepest, d);
    }
    for (int64_t i = 1; bad && i < n_nodes; ++i) {
        const int64_t d = c[i] >> 16, label = (c[i] >> 1) & 0x7FFF;
        require(d >= 1 && d <= (c[i - 1] >> 16) + 1, "code does not encode a pre-order trie");
        require(label < n_classes, "code holds a byte class outside n_classes");
        require(e[i] > i && e[i] <= n_nodes, "end must point past each node, within the trie");
    }
    max_depth = deepest;
    require(eos_item >= -1, "eos_item is an item or -1");
    for (int64_t i = 1; i < n_nodes; i = e[i]) first_nodes.push_back(static_cast<int32_t>(i));
}

namespace {

template <class Offset>
int64_t choose_bases(const std::vector<int64_t>& weight, const Offset* trans_off,
                     int64_t n_classes, int64_t walked, int32_t* base) {
    std::vector<int32_t> labels;  // the classes some first byte of the trie has
    for (int32_t label = 0; label < n_classes; ++label)
        if (weight[label] > 0) labels.push_back(label);
    std::vector<int64_t> live(walked, 0), reached(walked + 1, 0), stamp(walked + 1, 0);
    std::vector<int32_t> dominant(walked, -1);
    for (int64_t s = 1; s < walked; ++s) {
        int64_t best = 0;
        for (const int32_t label : labels) {
            const Offset t = trans_off[s * n_classes + label];
            if (t < 0) continue;
            live[s] += weight[label];
            const int64_t next = std::min<int64_t>(t / n_classes, walked);  // past `walked`: none
            if (stamp[next] != s) {
                stamp[next] = s;
                reached[next] = 0;
            }
            reached[next] += weight[label];
            if (next < walked && reached[next] > best) {
                best = reached[next];
                dominant[s] = static_cast<int32_t>(next);
            }
        }
    }
    int64_t visits = 0;
    for (int64_t s = 1; s < walked; ++s) {
        const int32_t q = dominant[s];
        int64_t differing = -1;
        if (q > 0 && q != s && dominant[q] == q) {
            differing = 0;
            for (const int32_t label : labels)
                if (trans_off[s * n_classes + label] != trans_off[q * n_classes + label])
                    differing += weight[label];
        }
        if (differing >= 0 && 2 * differing <= live[s]) {
            base[s] = q;
            visits += 2 * differing;
        } else {
            visits += live[s];
        }
    }
    return visits;
}

}  // namespace

namespace {

// The checked arguments of `walk_bases` and `component_twins`: the trie nodes below the first
// bytes of each class, and whether `trans_off` is int64 (else int32), of whole rows.
std::vector<int64_t> class_weights(const In<int32_t>& first_label, const In<int64_t>& first_weight,
                                   const py::array& trans_off, int64_t n_classes, bool& wide) {
    const int64_t n_first = length(first_label, "first_label");
    length(first_weight, "first_weight", n_first);
    require(n_classes >= 1, "n_classes must be positive");
    require_in_range(first_label.data(), n_first, 0, n_classes, "first_label");
    require_in_range(first_weight.data(), n_first, 0, INT64_MAX, "first_weight");
    wide = py::isinstance<py::array_t<int64_t>>(trans_off);
    require((wide || py::isinstance<py::array_t<int32_t>>(trans_off)) && trans_off.ndim() == 1 &&
                (trans_off.flags() & py::array::c_style) && trans_off.shape(0) % n_classes == 0,
            "trans_off must be a flat int32 or int64 array of whole rows");
    std::vector<int64_t> weight(n_classes, 0);
    for (int64_t f = 0; f < n_first; ++f) weight[first_label.data()[f]] += first_weight.data()[f];
    return weight;
}

}  // namespace

py::tuple walk_bases(In<int32_t> first_label, In<int64_t> first_weight, py::array trans_off,
                     int64_t n_classes, int64_t walked) {
    bool wide = false;
    const std::vector<int64_t> weight =
        class_weights(first_label, first_weight, trans_off, n_classes, wide);
    const int64_t n_states = trans_off.shape(0) / n_classes;
    require(0 <= walked && walked <= n_states, "walked must be at most the number of states");
    // trans_off's values are not checked here (TrieWalk checks them, SplitForest.refine the
    // bases): any value reads within bounds below, and bases are only hints of where to walk
    std::vector<int32_t> base(n_states, -1);
    int64_t visits = 0;
    {
        py::gil_scoped_release released;
        visits = wide ? choose_bases(weight, static_cast<const int64_t*>(trans_off.data()),
                                     n_classes, walked, base.data())
                      : choose_bases(weight, static_cast<const int32_t*>(trans_off.data()),
                                     n_classes, walked, base.data());
    }
    return py::make_tuple(to_numpy(base), visits);
}

namespace {

// Each state's distinct successors, CSR (one pass over the table: a row's repeats dropped).
template <class Offset>
void successors(const Offset* trans_off, int64_t n_states, int64_t n_classes,
                std::vector<int64_t>& ptr, std::vector<int32_t>& next) {
    const ExactDivisor row(n_classes);
    std::vector<int64_t> seen(n_states, -1);  // the last state that listed each
    ptr.assign(n_states + 1, 0);
    for (int64_t s = 0; s < n_states; ++s) {
        Offset last = -1;
        for (int64_t j = 0; j < n_classes; ++j) {
            const Offset t = trans_off[s * n_classes + j];
            if (t < 0 || t == last) continue;
            last = t;
            const int64_t w = row.quotient(t);
            if (seen[w] == s) continue;
            seen[w] = s;
            next.push_back(static_cast<int32_t>(w));
        }
        ptr[s + 1] = next.size();
    }
}

// The strongly connected component of each state (Tarjan's, without recursion): ids from 0.
std::vector<int32_t> components(const std::vector<int64_t>& ptr, const std::vector<int32_t>& next) {
    const int64_t n_states = static_cast<int64_t>(ptr.size()) - 1;
    std::vector<int32_t> index(n_states, -1), low(n_states, 0), comp(n_states, -1), held;
    std::vector<std::pair<int32_t, int64_t>> calls;  // (state, next edge to follow)
    int32_t counter = 0, n_comp = 0;
    for (int64_t root = 0; root < n_states; ++root) {
        if (index[root] >= 0) continue;
        index[root] = low[root] = counter++;
        held.push_back(static_cast<int32_t>(root));
        calls.emplace_back(static_cast<int32_t>(root), ptr[root]);
        while (!calls.empty()) {
            const int32_t v = calls.back().first;
            if (calls.back().second < ptr[v + 1]) {
                const int32_t w = next[calls.back().second++];
                if (index[w] < 0) {
                    index[w] = low[w] = counter++;
                    held.push_back(w);
                    calls.emplace_back(w, ptr[w]);
                } else if (comp[w] < 0) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            calls.pop_back();
            if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
            if (low[v] != index[v]) continue;
            int32_t w;
            do {
                w = held.back();
                held.pop_back();
                comp[w] = n_comp;
            } while (w != v);
            ++n_comp;
        }
    }
    return comp;
}

template <class Offset>
void find_twins(const Offset* trans_off, int64_t n_states, int64_t n_classes,
                const bool* accepting, const bool* candidate, const std::vector<int64_t>& weight,
                int64_t min_live, int64_t most_states, std::vector<int32_t>& group,
                std::vector<int64_t>& order_ptr, std::vector<int32_t>& order_states,
                int64_t& shared) {
    order_ptr.assign(n_states + 1, 0);
    const ExactDivisor row(n_classes);  // trans_off holds row offsets (checked)
    std::vector<int64_t> live(n_states, 0);  // of the candidates: their walks' first subtrees
    int64_t heavy = 0;
    for (int64_t s = 0; s < n_states; ++s) {
        if (!candidate[s]) continue;
        for (int64_t j = 0; j < n_classes; ++j)
            if (trans_off[s * n_classes + j] >= 0) live[s] += weight[j];
        heavy += live[s] >= min_live;
    }
    if (heavy < 2) return;  // no group of two
    std::vector<int64_t> ptr;
    std::vector<int32_t> next;
    successors(trans_off, n_states, n_classes, ptr, next);
    const std::vector<int32_t> comp = components(ptr, next);
    std::vector<int64_t> comp_size(n_states, 0);
    std::vector<uint8_t> comp_inner(n_states, 0);  // some edge stays inside the component
    for (int64_t s = 0; s < n_states; ++s) {
        ++comp_size[comp[s]];
        for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e) comp_inner[comp[s]] |= comp[next[e]] == comp[s];
    }
    // each candidate's reading of its component, from it: its acceptance, then per state in
    // breadth-first order and per class the state's place in that order, -1 (dead) or -2 (out)
    std::unordered_map<std::string, int32_t> group_of_reading;
    std::vector<int32_t> first_member, members, pos(n_states, -1), order;
    std::vector<int64_t> member_ptr{0}, member_live;
    std::vector<int32_t> member_order;
    std::vector<int32_t> reading;
    for (int64_t s = 0; s < n_states; ++s) {
        if (!candidate[s] || live[s] < min_live || comp_size[comp[s]] > most_states ||
            !comp_inner[comp[s]])
            continue;
        reading.assign(1, accepting[s] ? 1 : 0);
        order.assign(1, static_cast<int32_t>(s));
        pos[s] = 0;
        for (size_t k = 0; k < order.size(); ++k) {
            const int64_t q = order[k];
            for (int64_t j = 0; j < n_classes; ++j) {
                const Offset t = trans_off[q * n_classes + j];
                if (t < 0) {
                    reading.push_back(-1);
                    continue;
                }
                const int64_t w = row.quotient(t);
                if (comp[w] != comp[s]) {
                    reading.push_back(-2);
                    continue;
                }
                if (pos[w] < 0) {
                    pos[w] = static_cast<int32_t>(order.size());
                    order.push_back(static_cast<int32_t>(w));
                }
                reading.push_back(pos[w]);
            }
        }
        for (const int32_t q : order) pos[q] = -1;
        const std::string key(reinterpret_cast<const char*>(reading.data()),
                              reading.size() * sizeof(int32_t));
        const auto [found, fresh] = group_of_reading.emplace(key, first_member.size());
        if (fresh) first_member.push_back(static_cast<int32_t>(s));
        members.push_back(found->second);
        member_live.push_back(live[s]);
        member_order.insert(member_order.end(), order.begin(), order.end());
        member_ptr.push_back(member_order.size());
        group[s] = found->second;  // a provisional id: the reading's, alone or not
    }
    // groups of one state are none; the others numbered by their first state
    std::vector<int32_t> size(first_member.size(), 0), final_id(first_member.size(), -1);
    for (size_t m = 0; m < members.size(); ++m)  // every member's walk but the first's
        if (size[members[m]]++ > 0) shared += member_live[m];
    int32_t n_groups = 0;
    for (size_t g = 0; g < size.size(); ++g)
        if (size[g] > 1) final_id[g] = n_groups++;
    int64_t m = 0;
    for (int64_t s = 0; s < n_states; ++s) {
        if (group[s] >= 0) {
            const int32_t g = final_id[members[m]];
            group[s] = g;
            if (g >= 0)
                order_states.insert(order_states.end(), member_order.begin() + member_ptr[m],
                                    member_order.begin() + member_ptr[m + 1]);
            ++m;
        }
        order_ptr[s + 1] = order_states.size();
    }
}

}  // namespace

py::tuple component_twins(In<int32_t> first_label, In<int64_t> first_weight, py::array trans_off,
                          int64_t n_classes, In<bool> accepting, In<bool> candidate,
                          int64_t min_live, int64_t most_states) {
    bool wide = false;
    const std::vector<int64_t> weight =
        class_weights(first_label, first_weight, trans_off, n_classes, wide);
    const int64_t n_states = trans_off.shape(0) / n_classes;
    length(accepting, "accepting", n_states);
    length(candidate, "candidate", n_states);
    // the components follow every edge: each is checked
    require_row_offsets(trans_off, wide, n_states * n_classes, n_classes);
    std::vector<int32_t> group(n_states, -1), order_states;
    std::vector<int64_t> order_ptr;
    int64_t shared = 0;
    {
        py::gil_scoped_release released;
        if (wide)
            find_twins(static_cast<const int64_t*>(trans_off.data()), n_states, n_classes,
                       accepting.data(), candidate.data(), weight, min_live, most_states, group,
                       order_ptr, order_states, shared);
        else
            find_twins(static_cast<const int32_t*>(trans_off.data()), n_states, n_classes,
                       accepting.data(), candidate.data(), weight, min_live, most_states, group,
                       order_ptr, order_states, shared);
    }
    return py::make_tuple(to_numpy(group), to_numpy(order_ptr), to_numpy(order_states), shared);
}

SplitForest::SplitForest(int64_t num_items, int64_t num_states)
    : num_items_(num_items), num_states_(num_states), cls_(checked_size(num_items)),
      out_item_(num_items + 1), out_next_(num_items + 1), base_item_(num_items + 1),
      base_next_(num_items + 1) {
    require(num_states >= 1, "a forest needs states");
    base_.assign(num_states, -1);
    excl_start_.assign(num_states, 0);
    excl_end_.assign(num_states, 0);
    walked_.assign(num_states, 0);
    size_.assign(1, num_items);  // every item starts in class 0
    has_child_.assign(1, 0);
    rec_start_.assign(num_states, 0);
    rec_end_.assign(num_states, 0);  // records of state s: rec_start[s]..rec_end[s]
    exit_start_.assign(num_states, 0);
    exit_end_.assign(num_states, 0);
    exits_kept_.assign(num_states, 0);
    pos_.assign(num_states, -1);
    first_stamp_.assign(4096, 0);
    first_next_.assign(4096, 0);
    first_new_.assign(4096, 0);
    ht_stamp_.assign(1024, 0);
    ht_next_.assign(1024, 0);
    ht_class_.assign(1024, 0);
    ht_new_.assign(1024, 0);
}

void SplitForest::refine(const TrieWalk& walk, In<int32_t> states, In<int32_t> bases,
                         In<int32_t> twins, In<int64_t> order_ptr, In<int32_t> order_states) {
    require(walk.n_states == num_states_, "the walk's DFA is not this forest's");
    require(walk.n_nodes <= num_items_ && walk.eos_item < num_items_,
            "the walk has more items than this forest");
    const int64_t n = length(states, "states");
    length(bases, "bases", num_states_);
    const int32_t* st = states.data();
    const int32_t* base = bases.data();
    const int64_t n_twins = length(twins, "twins");
    require(n_twins == 0 || n_twins == num_states_, "twins has one entry per state, or none");
    Twins twin{nullptr, nullptr, nullptr};
    if (n_twins) {
        // checked for the states of this call alone (a forest refines a grammar in chunks)
        const int64_t n_order = length(order_states, "order_states");
        length(order_ptr, "order_ptr", num_states_ + 1);
        twin = Twins{twins.data(), order_ptr.data(), order_states.data()};
        const int64_t* ptr = twin.order_ptr;
        for (int64_t i = 0; i < n; ++i) {
            const int64_t s = st[i];
            require(0 <= s && s < num_states_, "states holds a state outside this forest's DFA");
            require(0 <= ptr[s] && ptr[s] <= ptr[s + 1] && ptr[s + 1] <= n_order,
                    "order_ptr does not span order_states");
            require_in_range(twin.order + ptr[s], ptr[s + 1] - ptr[s], 0, num_states_,
                             "order_states");
        }
    }
    std::unordered_map<int32_t, int64_t> at;  // each state's place in this call
    at.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t s = st[i];
        require(0 <= s && s < num_states_, "states holds a state outside this forest's DFA");
        require(!walked_[s] && at.emplace(st[i], i).second, "a state is walked once");
    }
    for (int64_t i = 0; i < n; ++i) {
        const int64_t b = base[st[i]];
        if (b < 0) continue;
        const auto found = b < num_states_ ? at.find(static_cast<int32_t>(b)) : at.end();
        require(b < num_states_ && base[b] < 0 && base_[b] < 0 &&
                    (walked_[b] || (found != at.end() && found->second < i)),
                "a state's base is a state walked in full before it, in this forest");
    }
    for (int64_t i = 0; twin.twin && i < n; ++i) {
        const int64_t s = st[i], t = twin.twin[s];
        if (t < 0) continue;
        const auto found = t < num_states_ ? at.find(static_cast<int32_t>(t)) : at.end();
        require(t < num_states_ && base[s] < 0 && base[t] < 0 && twin.twin[t] < 0 &&
                    (exits_kept_[t] || (found != at.end() && found->second < i)),
                "a state's twin is a state without base or twin, walked in full before it, in "
                "this forest");
        const int64_t* ptr = twin.order_ptr;
        require(0 <= ptr[t] && ptr[t] < ptr[t + 1] && ptr[t + 1] <= length(order_states, "") &&
                    ptr[s + 1] - ptr[s] == ptr[t + 1] - ptr[t] && twin.order[ptr[s]] == s &&
                    twin.order[ptr[t]] == t,
                "a state and its twin list components of one size, each from itself");
        require_in_range(twin.order + ptr[t], ptr[t + 1] - ptr[t], 0, num_states_,
                         "order_states");
    }
    if (py::isinstance<py::array_t<int64_t>>(walk.trans_off))
        refine_with(walk, static_cast<const int64_t*>(walk.trans_off.data()), st, n, base, twin);
    else
        refine_with(walk, static_cast<const int32_t*>(walk.trans_off.data()), st, n, base, twin);
}

namespace {

// The items of the trie nodes i..stop - 1 (whole subtrees) reached from the states on `stack`
// (a node of depth d reads from stack[d - 1]): descend while the DFA lives, skip a subtree as
// soon as it dies; `edge(node, from, to)` sees every live edge (offsets of states' rows).
template <class Offset, class Edge>
int64_t walk_nodes(const TrieWalk& walk, const Offset* trans_off, int64_t i, int64_t stop,
                   int32_t* items, int64_t* nexts, std::vector<Offset>& stack, Edge&& edge) {
    const int32_t* code = walk.code.data();
    const int32_t* end = walk.end.data();
    int64_t k = 0;
    while (i < stop) {
        const int32_t cd = code[i];
        const int32_t d = cd >> 16;
        const Offset t = trans_off[stack[d - 1] + ((cd >> 1) & 0x7FFF)];
        if (t < 0) {
            i = end[i];
            continue;
        }
        edge(i, stack[d - 1], t);
        stack[d] = t;
        items[k] = static_cast<int32_t>(i);
        nexts[k] = t;
        k += cd & 1;
        ++i;
    }
    return k;
}

struct NoEdge {
    template <class Offset>
    void operator()(int64_t, Offset, Offset) const {}
};

}  // namespace

template <class Offset>
int64_t SplitForest::walk_subtrees(const TrieWalk& walk, const Offset* trans_off, int64_t state,
                                   const int32_t* first, int64_t n_first, int32_t* items,
                                   int64_t* nexts, std::vector<Offset>& stack) const {
    int64_t k = 0;
    stack[0] = static_cast<Offset>(state * walk.n_classes);
    for (int64_t f = 0; f < n_first; ++f)
        k += walk_nodes(walk, trans_off, first[f], walk.end.data()[first[f]], items + k,
                        nexts + k, stack, NoEdge{});
    return k;
}

template <class Offset>
int64_t SplitForest::walk_recording_exits(const TrieWalk& walk, const Offset* trans_off,
                                          int64_t state, int32_t* items, int64_t* nexts,
                                          std::vector<Offset>& stack) {
    const ExactDivisor row(walk.n_classes);  // TrieWalk checked the row offsets
    int64_t k = 0;
    stack[0] = static_cast<Offset>(state * walk.n_classes);
    auto record = [&](int64_t node, Offset from, Offset to) {
        const int64_t before = row.quotient(from);
        if (pos_[before] >= 0 && pos_[row.quotient(to)] < 0) {
            exit_node_.push_back(static_cast<int32_t>(node));
            exit_from_.push_back(static_cast<int32_t>(before));
        }
    };
    for (const int32_t f : walk.first_nodes)
        k += walk_nodes(walk, trans_off, f, walk.end.data()[f], items + k, nexts + k, stack,
                        record);
    return k;
}

template <class Offset>
int64_t SplitForest::walk_below(const TrieWalk& walk, const Offset* trans_off, int32_t node,
                                Offset from, int32_t* items, int64_t* nexts,
                                std::vector<Offset>& stack) const {
    stack[(walk.code.data()[node] >> 16) - 1] = from;
    return walk_nodes(walk, trans_off, node, walk.end.data()[node], items, nexts, stack,
                      NoEdge{});
}

void SplitForest::split_by_next(int64_t s, const int32_t* items, const int64_t* nexts,
                                int64_t k) {
    const int64_t mark = s + 1;  // stamps are 0 until first written
    const int64_t n_ids = parent_.size();
    start_state(n_ids);
    for (int64_t j = 0; j < k; ++j) {
        int32_t id = group_of(items[j], nexts[j], mark);
        if (id < 0) {
            id = new_group(items[j], n_ids);
            rec_id_.push_back(id);
            rec_next_.push_back(nexts[j]);
        }
        cls_[items[j]] = id;
        ++group_size_[id - n_ids];
    }
    rec_end_[s] = rec_id_.size();
    keep_splits(n_ids, k, n_ids > kCompactIds * num_items_);
}

void SplitForest::start_state(int64_t n_ids) {
    // first_* are indexed by the classes that exist before the state's splits
    if (n_ids > static_cast<int64_t>(first_stamp_.size())) {
        const size_t size = 2 * n_ids;
        first_stamp_.resize(size, 0);
        first_next_.resize(size, 0);
        first_new_.resize(size, 0);
    }
    ht_used_ = 0;
}

void SplitForest::grow_table(int64_t mark) {
    // twice the slots; this state's entries move over, earlier states' are stale
    const size_t size = 2 * ht_stamp_.size();
    std::vector<int64_t> stamp(size, 0), next(size, 0);
    std::vector<int32_t> klass(size, 0), fresh(size, 0);
    const uint64_t mask = size - 1;
    for (size_t at = 0; at < ht_stamp_.size(); ++at) {
        if (ht_stamp_[at] != mark) continue;
        const uint64_t key = static_cast<uint64_t>(ht_class_[at]) * 1000003ULL +
                             static_cast<uint64_t>(ht_next_[at]) * 7919ULL;
        uint64_t slot = slot_of(key, mask);
        while (stamp[slot] == mark) slot = (slot + 1) & mask;
        stamp[slot] = mark;
        next[slot] = ht_next_[at];
        klass[slot] = ht_class_[at];
        fresh[slot] = ht_new_[at];
    }
    ht_stamp_.swap(stamp);
    ht_next_.swap(next);
    ht_class_.swap(klass);
    ht_new_.swap(fresh);
}

int32_t SplitForest::group_of(int32_t item, int64_t t, int64_t mark) {
    // the first next state of each class in this state sits in first_*; others in a hash table
    const int32_t c = cls_[item];
    const int64_t n_ids = static_cast<int64_t>(parent_.size());
    if (first_stamp_[c] == mark && first_next_[c] == t) return first_new_[c];
    const int32_t fresh = static_cast<int32_t>(n_ids);
    if (first_stamp_[c] != mark) {
        first_stamp_[c] = mark;
        first_next_[c] = t;
        first_new_[c] = fresh;
        return -1;
    }
    if (2 * (ht_used_ + 1) > static_cast<int64_t>(ht_stamp_.size())) grow_table(mark);
    const uint64_t mask = ht_stamp_.size() - 1;
    const uint64_t key = static_cast<uint64_t>(c) * 1000003ULL + static_cast<uint64_t>(t) * 7919ULL;
    const Probed found = find_or_insert(
        slot_of(key, mask), mask, [&](uint64_t slot) { return ht_stamp_[slot] != mark; },
        [&](uint64_t slot) { return ht_class_[slot] == c && ht_next_[slot] == t; },
        [&](uint64_t slot) {
            ht_stamp_[slot] = mark;
            ht_class_[slot] = c;
            ht_next_[slot] = t;
            ht_new_[slot] = fresh;
        });
    ht_used_ += found.inserted;
    return found.inserted ? -1 : ht_new_[found.slot];
}

int32_t SplitForest::new_group(int32_t item, int64_t n_ids) {
    const int32_t id = static_cast<int32_t>(parent_.size());
    parent_.push_back(cls_[item]);
    if (id - n_ids >= static_cast<int64_t>(group_size_.size()))
        group_size_.resize(2 * (id - n_ids) + 64);
    group_size_[id - n_ids] = 0;
    return id;
}

template <class Offset>
void SplitForest::refine_with(const TrieWalk& walk, const Offset* trans_off,
                              const int32_t* states, int64_t n, const int32_t* bases,
                              Twins twins) {
    py::gil_scoped_release released;
    const int32_t* code = walk.code.data();
    const bool* accepting = walk.accepting.data();
    const int64_t n_classes = walk.n_classes, eos = walk.eos_item;
    const std::vector<int32_t>& first = walk.first_nodes;
    std::vector<Offset> stack(walk.max_depth + 1, 0);
    std::vector<int32_t> differing;
    const ExactDivisor row(n_classes);  // TrieWalk checked the row offsets
    int32_t* items = &out_item_[0];
    int64_t* nexts = &out_next_[0];
    for (int64_t at = 0; at < n; ++at) {
        const int64_t s = states[at], base = bases[s];
        const int64_t mark = s + 1;  // stamps are 0 until first written
        const int64_t n_ids = parent_.size();
        rec_start_[s] = rec_id_.size();
        walked_[s] = 1;
        const int64_t twin = twins.twin ? twins.twin[s] : -1;
        if (twin >= 0) {
            // A twin's walk is its twin's up to the edges out of the component, with each
            // state of that component read as its own (at the same place in breadth-first
            // order): every class is pure for the twin, so the twin's records inside the
            // component carry over, moved; only the items below the edges out can differ
            // (a walk never comes back into a component it left), walked from here.
            const int32_t* mine = twins.order + twins.order_ptr[s];
            const int32_t* theirs = twins.order + twins.order_ptr[twin];
            const int64_t size = twins.order_ptr[twin + 1] - twins.order_ptr[twin];
            for (int64_t p = 0; p < size; ++p) pos_[theirs[p]] = static_cast<int32_t>(p);
            for (int64_t r = rec_start_[twin]; r < rec_end_[twin]; ++r) {
                const int32_t p = pos_[row.quotient(rec_next_[r])];
                if (p < 0) continue;
                rec_id_.push_back(rec_id_[r]);
                rec_next_.push_back(mine[p] * n_classes);
            }
            int64_t k = 0;
            for (int64_t e = exit_start_[twin]; e < exit_end_[twin]; ++e)
                k += walk_below(walk, trans_off, exit_node_[e],
                                static_cast<Offset>(mine[pos_[exit_from_[e]]] * n_classes),
                                items + k, nexts + k, stack);
            for (int64_t p = 0; p < size; ++p) pos_[theirs[p]] = -1;
            split_by_next(s, items, nexts, k);
            continue;
        }
        if (base < 0) {
            // the split: one new class per (current class, next state) among allowed items;
            // a state whose component has twins keeps the edges out of it for them
            const bool keeps_exits = twins.twin &&
                                     twins.order_ptr[s + 1] > twins.order_ptr[s];
            int64_t k;
            if (keeps_exits) {
                const int32_t* own = twins.order + twins.order_ptr[s];
                const int64_t size = twins.order_ptr[s + 1] - twins.order_ptr[s];
                for (int64_t p = 0; p < size; ++p) pos_[own[p]] = static_cast<int32_t>(p);
                exit_start_[s] = exit_node_.size();
                k = walk_recording_exits(walk, trans_off, s, items, nexts, stack);
                exit_end_[s] = exit_node_.size();
                exits_kept_[s] = 1;
                for (int64_t p = 0; p < size; ++p) pos_[own[p]] = -1;
            } else {
                k = walk_subtrees(walk, trans_off, s, first.data(), first.size(), items, nexts,
                                  stack);
            }
            if (accepting[s] && eos >= 0) {
                items[k] = static_cast<int32_t>(eos);
                nexts[k++] = s * n_classes;
            }
            split_by_next(s, items, nexts, k);
            continue;
        }
        // Walked from its base: only the first-level subtrees whose first byte leads elsewhere
        // can differ. Every class is pure for the base (all its items dead there, or all going
        // to one state), so the items whose next state differs move to new classes (by class
        // and next state here); the state inherits the base's records less those classes.
        base_[s] = static_cast<int32_t>(base);
        excl_start_[s] = excl_id_.size();
        differing.clear();
        for (const int32_t node : first) {
            const int32_t label = (code[node] >> 1) & 0x7FFF;
            if (trans_off[s * n_classes + label] != trans_off[base * n_classes + label])
                differing.push_back(node);
        }
        int32_t* b_items = &base_item_[0];
        int64_t* b_nexts = &base_next_[0];
        int64_t ks = walk_subtrees(walk, trans_off, s, differing.data(), differing.size(), items,
                                   nexts, stack);
        int64_t kb = walk_subtrees(walk, trans_off, base, differing.data(), differing.size(),
                                   b_items, b_nexts, stack);
        if (eos >= 0 && accepting[s]) {
            items[ks] = static_cast<int32_t>(eos);
            nexts[ks++] = s * n_classes;
        }
        if (eos >= 0 && accepting[base]) {
            b_items[kb] = static_cast<int32_t>(eos);
            b_nexts[kb++] = base * n_classes;
        }
        start_state(n_ids);
        for (int64_t i = 0, j = 0; i < ks || j < kb;) {  // both lists are in item order
            int32_t item;
            int64_t here = -1, there = -1;  // next state from s and from the base (-1: dead)
            if (j == kb || (i < ks && items[i] < b_items[j])) {
                item = items[i];
                here = nexts[i++];
            } else if (i == ks || b_items[j] < items[i]) {
                item = b_items[j];
                there = b_nexts[j++];
            } else {
                item = items[i];
                here = nexts[i++];
                there = b_nexts[j++];
            }
            if (here == there) continue;
            int32_t id = group_of(item, here, mark);
            if (id < 0) {
                id = new_group(item, n_ids);
                if (here >= 0) {
                    rec_id_.push_back(id);
                    rec_next_.push_back(here);
                }
                if (there >= 0) excl_id_.push_back(id);
            }
            cls_[item] = id;
            ++group_size_[id - n_ids];
        }
        rec_end_[s] = rec_id_.size();
        excl_end_[s] = excl_id_.size();
        keep_splits(n_ids, 0, false);  // few new classes: none dropped
    }
}

void SplitForest::keep_splits(int64_t first_new, int64_t k, bool compact) {
    // Once the forest is large (its walk in `expand` then misses the cache at every id), a
    // group that holds every item of a class without children splits nothing: the class
    // itself is recorded and the group's id dropped, so ids grow with the classes rather than
    // with states x groups (a grammar of 80,000 states made 10^8 ids otherwise).
    const int64_t made = static_cast<int64_t>(parent_.size()) - first_new;
    if (made == 0) return;
    new_id_.resize(made);
    bool dropped = false;
    for (int64_t g = 0; g < made; ++g) {  // decided on the sizes before this state's splits
        const int32_t c = parent_[first_new + g];
        new_id_[g] = compact && group_size_[g] == size_[c] && !has_child_[c] ? c : -1;
        dropped |= new_id_[g] >= 0;
    }
    int64_t kept = 0;
    for (int64_t g = 0; g < made; ++g) {
        if (new_id_[g] >= 0) continue;
        const int32_t c = parent_[first_new + g];
        const int32_t id = static_cast<int32_t>(first_new + kept++);
        new_id_[g] = id;
        parent_[id] = c;
        size_[c] -= group_size_[g];
        has_child_[c] = 1;
        size_.push_back(group_size_[g]);
        has_child_.push_back(0);
    }
    if (!dropped) return;  // every group kept its id
    parent_.resize(first_new + kept);
    for (int64_t j = 0; j < k; ++j) cls_[out_item_[j]] = new_id_[cls_[out_item_[j]] - first_new];
    // this state's records are the last `made`, one per group
    for (int64_t r = static_cast<int64_t>(rec_id_.size()) - made;
         r < static_cast<int64_t>(rec_id_.size()); ++r)
        rec_id_[r] = new_id_[rec_id_[r] - first_new];
}

py::array_t<int32_t> SplitForest::classes() const { return to_numpy(cls_.data(), num_items_); }

py::array_t<int64_t> SplitForest::row_counts(In<int32_t> canon_of_item) {
    length(canon_of_item, "canon_of_item", num_items_);
    const int32_t* canon = canon_of_item.data();
    std::vector<int64_t> counts(num_states_, 0);
    {
        py::gil_scoped_release released;
        const int64_t n_ids = parent_.size();
        int32_t lowest = 0, highest = -1;
        for (int64_t item = 0; item < num_items_; ++item) {
            lowest = std::min(lowest, canon[item]);
            highest = std::max(highest, canon[item]);
        }
        require(lowest >= 0 && highest <= num_items_, "canon_of_item holds a class out of range");
        const int64_t n_canon = int64_t{highest} + 1;
        // each final class lies under exactly one leaf id of this forest
        std::vector<int64_t> leaf_of_canon(n_canon, -1);
        for (int64_t item = 0; item < num_items_; ++item) leaf_of_canon[canon[item]] = cls_[item];
        for (int64_t c = 1; c < n_canon; ++c)
            require(leaf_of_canon[c] >= 0, "canon_of_item skips a class number");
        std::vector<int64_t> leaf_ptr;
        std::vector<int32_t> leaf_canon;
        group_by_owner(leaf_of_canon.data(), n_canon, 1, n_ids, leaf_ptr, leaf_canon);
        // each id's range of the final classes below it, order_[range_lo_[id]:range_hi_[id]],
        // laid out in pre-order (an id's own classes, then its children's ranges by id), by
        // two scans: a parent's id is below its children's (a class splits into new ids), so
        // subtree sizes add up from the last id down and ranges are handed out from the root
        // up (a walk of the tree missed the cache at every one of 10^7 ids)
        range_lo_.assign(n_ids, 0);
        range_hi_.assign(n_ids, 0);  // first the size of each subtree
        for (int64_t id = n_ids - 1; id >= 0; --id) {
            range_hi_[id] += leaf_ptr[id + 1] - leaf_ptr[id];
            if (id > 0) {
                require(parent_[id] < id, "a class id below its parent's");
                range_hi_[parent_[id]] += range_hi_[id];
            }
        }
        std::vector<int64_t> next_free(n_ids, 0);  // where an id's next child's range starts
        order_.assign(n_canon, 0);
        for (int64_t id = 0; id < n_ids; ++id) {
            if (id > 0) {
                range_lo_[id] = next_free[parent_[id]];
                next_free[parent_[id]] += range_hi_[id];
            }
            range_hi_[id] += range_lo_[id];
            int64_t at = range_lo_[id];
            for (int64_t j = leaf_ptr[id]; j < leaf_ptr[id + 1]; ++j) order_[at++] = leaf_canon[j];
            next_free[id] = at;
        }
        // a state's spans are its base's records less the moved ids, which lie inside them
        // and apart, and its own records, which lie apart from what it inherits: the count
        // is a sum of widths, with no span cut out
        auto width = [&](int32_t id) { return range_hi_[id] - range_lo_[id]; };
        for (int64_t s = 0; s < num_states_; ++s) {
            const int64_t b = base_[s];
            if (b >= 0) {
                for (int64_t r = rec_start_[b]; r < rec_end_[b]; ++r) counts[s] += width(rec_id_[r]);
                for (int64_t x = excl_start_[s]; x < excl_end_[s]; ++x) counts[s] -= width(excl_id_[x]);
            }
            for (int64_t r = rec_start_[s]; r < rec_end_[s]; ++r) counts[s] += width(rec_id_[r]);
        }
    }
    counts_ = counts;
    return to_numpy(counts);
}

template <class Span>
void SplitForest::for_each_span(int64_t s, Span&& span) {
    // the spans of `order_` a state's records cover, each with its next state: a state
    // walked from a base first inherits the base's records, less the classes it moved out
    const int64_t b = base_[s];
    if (b >= 0) {
        excluded_.clear();
        for (int64_t x = excl_start_[s]; x < excl_end_[s]; ++x)
            excluded_.emplace_back(range_lo_[excl_id_[x]], range_hi_[excl_id_[x]]);
        std::sort(excluded_.begin(), excluded_.end());
        for (int64_t r = rec_start_[b]; r < rec_end_[b]; ++r) {
            int64_t lo = range_lo_[rec_id_[r]];
            const int64_t hi = range_hi_[rec_id_[r]];
            auto x = std::lower_bound(excluded_.begin(), excluded_.end(),
                                      std::make_pair(lo, int64_t{-1}));
            for (; x != excluded_.end() && x->first < hi; ++x) {
                if (x->first > lo) span(lo, x->first, rec_next_[r]);
                lo = std::max(lo, x->second);
            }
            if (lo < hi) span(lo, hi, rec_next_[r]);
        }
    }
    for (int64_t r = rec_start_[s]; r < rec_end_[s]; ++r)
        span(range_lo_[rec_id_[r]], range_hi_[rec_id_[r]], rec_next_[r]);
}

void SplitForest::expand(int64_t n_classes, In<int64_t> state_ptr, py::array entry_class,
                         py::array entry_next) {
    require(n_classes >= 1, "n_classes must be positive");
    require(static_cast<int64_t>(counts_.size()) == num_states_, "row_counts comes first");
    for (const py::array* out : {&entry_class, &entry_next})
        require(py::isinstance<py::array_t<int32_t>>(*out) && out->ndim() == 1 &&
                    (out->flags() & py::array::c_style) && out->writeable(),
                "entry_class and entry_next are writable one-dimensional int32 arrays");
    const int64_t total = entry_class.shape(0);
    require(entry_next.shape(0) == total, "entry_class and entry_next have equal lengths");
    require_csr(state_ptr, num_states_, total, "state_ptr");
    const int64_t* ptr = state_ptr.data();
    for (int64_t s = 0; s < num_states_; ++s)
        require(!walked_[s] || ptr[s + 1] - ptr[s] == counts_[s],
                "state_ptr gives a state this forest walked another number of entries");
    int32_t* out_class = static_cast<int32_t*>(entry_class.mutable_data());
    int32_t* out_next = static_cast<int32_t*>(entry_next.mutable_data());
    py::gil_scoped_release released;
    const int64_t n_canon = order_.size();
    // a state's classes are distinct (its spans are disjoint): a long row is scattered by
    // class and read back in order, a short one sorted
    std::vector<int32_t> next_of_class(n_canon, -1);
    std::vector<std::pair<int32_t, int32_t>> row;
    for (int64_t s = 0; s < num_states_; ++s) {
        if (!walked_[s]) continue;
        int64_t pos = ptr[s];
        if (counts_[s] * 16 >= n_canon) {
            // the base's records, the moved ids cleared, then the state's own records (the
            // spans of `for_each_span`, without cutting them)
            auto fill = [&](int32_t id, int32_t next) {
                for (int64_t f = range_lo_[id]; f < range_hi_[id]; ++f) next_of_class[order_[f]] = next;
            };
            const int64_t b = base_[s];
            if (b >= 0) {
                for (int64_t r = rec_start_[b]; r < rec_end_[b]; ++r)
                    fill(rec_id_[r], static_cast<int32_t>(rec_next_[r] / n_classes));
                for (int64_t x = excl_start_[s]; x < excl_end_[s]; ++x) fill(excl_id_[x], -1);
            }
            for (int64_t r = rec_start_[s]; r < rec_end_[s]; ++r)
                fill(rec_id_[r], static_cast<int32_t>(rec_next_[r] / n_classes));
            for (int32_t c = 0; c < n_canon; ++c) {
                if (next_of_class[c] < 0) continue;
                require(pos < ptr[s + 1], "a state's row is longer than row_counts said");
                out_class[pos] = c;
                out_next[pos++] = next_of_class[c];
                next_of_class[c] = -1;
            }
            require(pos == ptr[s + 1], "a state's row is shorter than row_counts said");
            continue;
        }
        row.clear();
        for_each_span(s, [&](int64_t lo, int64_t hi, int64_t offset) {
            const int32_t next = static_cast<int32_t>(offset / n_classes);
            for (int64_t f = lo; f < hi; ++f) row.emplace_back(order_[f], next);
        });
        require(static_cast<int64_t>(row.size()) == ptr[s + 1] - ptr[s],
                "a state's row has another length than row_counts said");
        std::sort(row.begin(), row.end());
        for (const auto& [klass, next] : row) {
            out_class[pos] = klass;
            out_next[pos++] = next;
        }
    }
}

py::tuple canonical_classes(In<int32_t> forest_cls, In<int64_t> item_of_token) {
    require(forest_cls.ndim() == 2 && forest_cls.shape(0) >= 1, "forest_cls is [forests, items]");
    const int64_t n_forests = forest_cls.shape(0), n_items = forest_cls.shape(1);
    require(n_items < INT32_MAX, "fewer than 2**31 items");
    const int64_t n_tokens = length(item_of_token, "item_of_token");
    const int32_t* fc = forest_cls.data();
    const int64_t* item_of = item_of_token.data();
    py::array_t<int32_t> token_class_out(n_tokens), canon_out(n_items);
    int32_t* token_class = token_class_out.mutable_data();
    int32_t* canon_of_item = canon_out.mutable_data();
    {
        py::gil_scoped_release released;
        // combine forest by forest: (class so far, class in the next forest) -> dense id
        std::unique_ptr<int32_t[]> combined(new int32_t[std::max<int64_t>(n_items, 1)]);
        for (int64_t f = 0; f < n_forests; ++f) {
            const int32_t* other = fc + f * n_items;
            int32_t lowest = 0, highest = 0;
            for (int64_t item = 0; item < n_items; ++item) {
                lowest = std::min(lowest, other[item]);
                highest = std::max(highest, other[item]);
            }
            require(lowest >= 0, "forest_cls holds a negative class");
            const int64_t width = int64_t{highest} + 1;
            int32_t n_seen = 0;
            if (f == 0) {  // the first forest's classes, renumbered densely in item order
                std::vector<int32_t> dense(width, -1);
                for (int64_t item = 0; item < n_items; ++item) {
                    int32_t& id = dense[other[item]];
                    if (id < 0) id = n_seen++;
                    combined[item] = id;
                }
                continue;
            }
            uint64_t table_size = 16;
            while (static_cast<int64_t>(table_size) < 2 * n_items) table_size *= 2;
            const uint64_t mask = table_size - 1;
            std::vector<int64_t> keys(table_size, -1);
            std::vector<int32_t> vals(table_size, 0);
            for (int64_t item = 0; item < n_items; ++item) {
                const int64_t key = combined[item] * width + other[item];
                const Probed found = find_or_insert(
                    slot_of(key, mask), mask, [&](uint64_t at) { return keys[at] == -1; },
                    [&](uint64_t at) { return keys[at] == key; },
                    [&](uint64_t at) {
                        keys[at] = key;
                        vals[at] = n_seen++;
                    });
                combined[item] = vals[found.slot];
            }
        }
        // items never allowed anywhere are in class 0 of every forest
        int64_t never = -1;
        for (int64_t item = 0; item < n_items && never < 0; ++item) {
            bool all_zero = true;
            for (int64_t f = 0; f < n_forests; ++f)
                if (fc[f * n_items + item] != 0) all_zero = false;
            if (all_zero) never = combined[item];
        }
        std::vector<int32_t> class_of_combined(n_items + 1, -1);
        if (never >= 0) class_of_combined[never] = 0;
        int32_t n_classes = 1;
        for (int64_t token = 0; token < n_tokens; ++token) {
            const int64_t item = item_of[token];
            if (item < 0) {
                require(item == -1, "item_of_token holds a negative value other than -1");
                token_class[token] = 0;
                continue;
            }
            require(item < n_items, "item_of_token holds an item past the forests' items");
            int32_t& klass = class_of_combined[combined[item]];
            if (klass < 0) klass = n_classes++;
            token_class[token] = klass;
        }
        for (int64_t item = 0; item < n_items; ++item)
            canon_of_item[item] = class_of_combined[combined[item]];
    }
    return py::make_tuple(token_class_out, canon_out);
}

py::array_t<int32_t> min_tokens_to_accept(In<int64_t> state_ptr, In<int32_t> entry_next,
                                          In<bool> accepting) {
    const int64_t n = length(accepting, "accepting");
    const int64_t n_entries = length(entry_next, "entry_next");
    require_csr(state_ptr, n, n_entries, "state_ptr");
    require_in_range(entry_next.data(), n_entries, 0, n, "entry_next");
    const int64_t* ptr = state_ptr.data();
    const int32_t* next = entry_next.data();
    const bool* acc = accepting.data();
    std::vector<int32_t> dist;
    {
        py::gil_scoped_release released;
        // each state's distinct successors only: most of a row's tokens lead to a few states
        std::vector<int64_t> seen_from(n, -1);
        dist = distances_to_accepting(n, acc, [&](auto&& visit) {
            std::fill(seen_from.begin(), seen_from.end(), -1);
            for (int64_t s = 0; s < n; ++s)
                for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e)
                    if (seen_from[next[e]] != s) {
                        seen_from[next[e]] = s;
                        visit(s, next[e]);
                    }
        });
    }
    return to_numpy(std::move(dist));
}

py::tuple dedupe_rows(In<int64_t> state_ptr, In<int32_t> entry_class, In<int32_t> entry_next,
                      In<int32_t> min_tokens, In<int32_t> class_map) {
    const int64_t n = length(min_tokens, "min_tokens");
    const int64_t n_entries = length(entry_class, "entry_class");
    length(entry_next, "entry_next", n_entries);
    require_csr(state_ptr, n, n_entries, "state_ptr");
    require_in_range(entry_next.data(), n_entries, 0, n, "entry_next");
    const int64_t n_mapped = class_map.shape(0);
    if (n_mapped > 0) require_in_range(entry_class.data(), n_entries, 0, n_mapped, "entry_class");
    const int64_t* ptr = state_ptr.data();
    const int32_t *cls = entry_class.data(), *next = entry_next.data(), *dist = min_tokens.data();
    const int32_t* mapped = class_map.data();
    std::vector<int32_t> state_row(n, 0);
    std::vector<int64_t> row_ptr{0, 0};  // row 0: the empty row
    OutBuffer<int32_t> row_class(n_entries), row_delta(n_entries);  // int32: the table's type
    int64_t n_written = 0;
    {
        py::gil_scoped_release released;
        int32_t *out_class = row_class.data(), *out_delta = row_delta.data();
        // one multiply per entry on (class, delta) as one word, mixed once per row
        auto finish = [](uint64_t h) { return hash_step(h ^ (h >> 32), 0, 29); };
        std::vector<uint64_t> row_hash{finish(kHashSeed)};
        uint64_t table_size = 1;
        while (table_size < 4 * static_cast<uint64_t>(n + 1)) table_size *= 2;
        const uint64_t mask = table_size - 1;
        std::vector<int32_t> table(table_size, -1);
        table[row_hash[0] & mask] = 0;
        for (int64_t s = 0; s < n; ++s) {
            // trim entries into dead ends, make them relative, and share equal rows
            const int64_t start = n_written;
            uint64_t h = kHashSeed;
            if (dist[s] >= 0)
                for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e)
                    if (dist[next[e]] >= 0) {
                        const int32_t klass = n_mapped > 0 ? mapped[cls[e]] : cls[e];
                        const int32_t delta = static_cast<int32_t>(next[e] - s);
                        out_class[n_written] = klass;
                        out_delta[n_written++] = delta;
                        h = (h ^ (static_cast<uint64_t>(static_cast<uint32_t>(klass)) << 32 |
                                  static_cast<uint32_t>(delta))) * 0x9E3779B97F4A7C15ULL;
                    }
            h = finish(h);
            const int64_t len = n_written - start;
            const Probed found = find_or_insert(
                h & mask, mask, [&](uint64_t slot) { return table[slot] == -1; },
                [&](uint64_t slot) {
                    const int32_t r = table[slot];
                    return row_hash[r] == h && row_ptr[r + 1] - row_ptr[r] == len &&
                           std::equal(out_class + start, out_class + n_written,
                                      out_class + row_ptr[r]) &&
                           std::equal(out_delta + start, out_delta + n_written,
                                      out_delta + row_ptr[r]);
                },
                [&](uint64_t slot) {
                    table[slot] = static_cast<int32_t>(row_hash.size());
                    row_hash.push_back(h);
                    row_ptr.push_back(n_written);
                });
            if (!found.inserted) n_written = start;  // drop the duplicate entries just written
            state_row[s] = table[found.slot];
        }
    }
    return py::make_tuple(to_numpy(std::move(state_row)), to_numpy(std::move(row_ptr)),
                          row_class.release(n_written), row_delta.release(n_written));
}

py::tuple row_moves(In<int32_t> state_row, In<int64_t> row_ptr, In<int32_t> row_delta) {
    const int64_t n = length(state_row, "state_row");
    const int64_t n_entries = length(row_delta, "row_delta");
    const int64_t n_rows = csr_rows(row_ptr, n_entries, "row_ptr");
    require_in_range(state_row.data(), n, 0, n_rows, "state_row");
    const int32_t* row_of = state_row.data();
    const int64_t* ptr = row_ptr.data();
    const int32_t* delta = row_delta.data();
    std::vector<int64_t> out_ptr(n + 1, 0);
    std::vector<int32_t> out_next;
    {
        py::gil_scoped_release released;
        int64_t low = 0, high = 0;
        for (int64_t e = 0; e < n_entries; ++e) {
            low = std::min<int64_t>(low, delta[e]);
            high = std::max<int64_t>(high, delta[e]);
        }
        // each row's distinct deltas, once per row however many states share it
        std::vector<int64_t> stamp(high - low + 1, -1), distinct_ptr(n_rows + 1, 0);
        std::vector<int32_t> distinct;
        for (int64_t r = 0; r < n_rows; ++r) {
            for (int64_t e = ptr[r]; e < ptr[r + 1]; ++e) {
                int64_t& seen = stamp[delta[e] - low];
                if (seen == r) continue;
                seen = r;
                distinct.push_back(delta[e]);
            }
            distinct_ptr[r + 1] = distinct.size();
        }
        for (int64_t s = 0; s < n; ++s) {
            const int64_t r = row_of[s];
            for (int64_t j = distinct_ptr[r]; j < distinct_ptr[r + 1]; ++j) {
                const int64_t next = s + distinct[j];
                require(next >= 0 && next < n, "a row leads outside the states");
                out_next.push_back(static_cast<int32_t>(next));
            }
            out_ptr[s + 1] = out_next.size();
        }
    }
    return py::make_tuple(to_numpy(out_ptr), to_numpy(out_next));
}

py::tuple sink_pairs(In<int64_t> state_ptr, In<int32_t> entry_class, In<int32_t> entry_next,
                     int64_t sink, int64_t n_classes) {
    const int64_t n_entries = length(entry_class, "entry_class");
    length(entry_next, "entry_next", n_entries);
    require(sink >= 0 && sink < length(state_ptr, "state_ptr"), "sink is a state");
    csr_rows(state_ptr, n_entries, "state_ptr");
    require(n_classes >= 1, "n_classes must be positive");
    require_in_range(entry_class.data(), n_entries, 0, n_classes, "entry_class");
    const int64_t* ptr = state_ptr.data();
    const int32_t *cls = entry_class.data(), *next = entry_next.data();
    std::vector<int32_t> new_id(n_classes, 0), pair_state, pair_class;
    {
        py::gil_scoped_release released;
        for (int64_t s = 0; s < sink; ++s) {
            for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e) {
                if (next[e] != sink) {
                    new_id[cls[e]] = 1;
                } else {
                    pair_state.push_back(static_cast<int32_t>(s));
                    pair_class.push_back(cls[e]);
                }
            }
        }
        int32_t n_used = 0;
        for (int64_t c = 0; c < n_classes; ++c)
            if (new_id[c]) new_id[c] = ++n_used;
    }
    return py::make_tuple(to_numpy(std::move(new_id)), to_numpy(std::move(pair_state)),
                          to_numpy(std::move(pair_class)));
}

}  // namespace grammarc

namespace grammarc {

py::tuple row_class_masks(In<int64_t> token_order, In<int64_t> class_ptr, In<int64_t> row_ptr,
                          In<int32_t> row_class) {
    const int64_t vocab = length(token_order, "token_order");
    const int64_t n_classes = csr_rows(class_ptr, vocab, "class_ptr");
    require_in_range(token_order.data(), vocab, 0, vocab, "token_order");
    const int64_t n_entries = length(row_class, "row_class");
    const int64_t n_rows = csr_rows(row_ptr, n_entries, "row_ptr");
    require_in_range(row_class.data(), n_entries, 0, n_classes, "row_class");
    const int64_t* order = token_order.data();
    const int64_t* cptr = class_ptr.data();
    const int64_t* rptr = row_ptr.data();
    const int32_t* rcls = row_class.data();

    // the first row of each distinct set of classes
    py::array_t<int64_t> mask_row(n_rows);
    int64_t* first_of = mask_row.mutable_data();
    std::unordered_map<std::string, int64_t> first;
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < n_rows; ++r) {
        std::string key(reinterpret_cast<const char*>(rcls + rptr[r]),
                        static_cast<size_t>(rptr[r + 1] - rptr[r]) * sizeof(int32_t));
        auto [it, fresh] = first.emplace(std::move(key), r);
        if (fresh) rows.push_back(r);
        first_of[r] = it->second;
    }

    const int64_t width = (vocab + 7) / 8;
    py::array_t<uint8_t> packed({static_cast<int64_t>(rows.size()), width});
    uint8_t* bits = packed.mutable_data();
    std::vector<uint8_t> allowed(static_cast<size_t>(n_classes), 0);
    for (size_t k = 0; k < rows.size(); ++k) {
        const int64_t r = rows[k];
        uint8_t* out = bits + static_cast<int64_t>(k) * width;
        int64_t count = 0;
        for (int64_t j = rptr[r]; j < rptr[r + 1]; ++j) count += cptr[rcls[j] + 1] - cptr[rcls[j]];
        if (2 * count <= vocab) {  // the allowed tokens set on zeros
            std::memset(out, 0, static_cast<size_t>(width));
            for (int64_t j = rptr[r]; j < rptr[r + 1]; ++j)
                for (int64_t i = cptr[rcls[j]]; i < cptr[rcls[j] + 1]; ++i)
                    out[order[i] >> 3] |= static_cast<uint8_t>(1u << (order[i] & 7));
            continue;
        }
        // the others cleared from ones (bits past the vocabulary stay clear)
        std::memset(out, 0xFF, static_cast<size_t>(width));
        if (vocab & 7) out[width - 1] = static_cast<uint8_t>((1u << (vocab & 7)) - 1);
        for (int64_t j = rptr[r]; j < rptr[r + 1]; ++j) allowed[rcls[j]] = 1;
        for (int64_t c = 0; c < n_classes; ++c) {
            if (allowed[c]) continue;
            for (int64_t i = cptr[c]; i < cptr[c + 1]; ++i)
                out[order[i] >> 3] &= static_cast<uint8_t>(~(1u << (order[i] & 7)));
        }
        for (int64_t j = rptr[r]; j < rptr[r + 1]; ++j) allowed[rcls[j]] = 0;
    }
    return py::make_tuple(mask_row, to_numpy(rows), packed);
}

}  // namespace grammarc

namespace grammarc {

py::tuple refine_entries(In<int64_t> state_ptr, In<int32_t> entry_class, In<int32_t> entry_next,
                         In<int32_t> coarse_of_fine, In<int32_t> next_map) {
    const int64_t n_entries = length(entry_class, "entry_class");
    length(entry_next, "entry_next", n_entries);
    const int64_t n_states = csr_rows(state_ptr, n_entries, "state_ptr");
    const int64_t n_fine = length(coarse_of_fine, "coarse_of_fine");
    require(n_fine >= 1 && n_fine < INT32_MAX, "coarse_of_fine has 1 to 2**31 - 1 entries");
    const int64_t n_next = length(next_map, "next_map");
    require_in_range(entry_next.data(), n_entries, 0, n_next, "entry_next");
    const int32_t* coarse = coarse_of_fine.data();
    require_in_range(coarse, n_fine, 0, n_fine, "coarse_of_fine");
    int32_t n_coarse = 1;
    for (int64_t f = 0; f < n_fine; ++f) n_coarse = std::max(n_coarse, coarse[f] + 1);
    require_in_range(entry_class.data(), n_entries, 0, n_coarse, "entry_class");
    const int64_t* ptr = state_ptr.data();
    const int32_t *cls = entry_class.data(), *next = entry_next.data(), *map = next_map.data();
    std::vector<int64_t> out_ptr(n_states + 1, 0);
    std::vector<int32_t> out_class, out_next;
    {
        py::gil_scoped_release released;
        // the fine classes of each coarse class, ascending
        std::vector<int64_t> child_ptr;
        std::vector<int32_t> children;
        group_by_owner(coarse, n_fine, 0, n_coarse, child_ptr, children);
        for (int64_t s = 0; s < n_states; ++s) {
            int64_t width = 0;
            for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e) width += child_ptr[cls[e] + 1] - child_ptr[cls[e]];
            out_ptr[s + 1] = out_ptr[s] + width;
        }
        out_class.resize(out_ptr[n_states]);
        out_next.resize(out_ptr[n_states]);
        // a state's coarse classes are distinct, so are its fine ones: a long row is
        // scattered by fine class and read back in order, a short one sorted
        std::vector<int32_t> next_of_fine(n_fine, -1);
        std::vector<std::pair<int32_t, int32_t>> row;
        for (int64_t s = 0; s < n_states; ++s) {
            int64_t pos = out_ptr[s];
            const int64_t width = out_ptr[s + 1] - pos;
            if (width * 16 >= n_fine) {
                for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e)
                    for (int64_t j = child_ptr[cls[e]]; j < child_ptr[cls[e] + 1]; ++j)
                        next_of_fine[children[j]] = map[next[e]];
                for (int32_t f = 0; f < n_fine; ++f) {
                    if (next_of_fine[f] < 0) continue;
                    out_class[pos] = f;
                    out_next[pos++] = next_of_fine[f];
                    next_of_fine[f] = -1;
                }
                continue;
            }
            row.clear();
            for (int64_t e = ptr[s]; e < ptr[s + 1]; ++e)
                for (int64_t j = child_ptr[cls[e]]; j < child_ptr[cls[e] + 1]; ++j)
                    row.emplace_back(children[j], map[next[e]]);
            std::sort(row.begin(), row.end());
            for (const auto& [f, n] : row) {
                out_class[pos] = f;
                out_next[pos++] = n;
            }
        }
    }
    return py::make_tuple(to_numpy(out_ptr), to_numpy(out_class), to_numpy(out_next));
}

}  // namespace grammarc
