// Expression DAG to byte-level NFA: the Thompson construction of grammarc/automaton/nfa.py
// (whose module docstring states the invariants and the DAG layout), over the flat program
// that `nfa.flatten` makes of an expression.
#include <array>
#include <map>
#include <optional>

#include "kernels.hpp"

namespace grammarc {
namespace {

enum Kind : int8_t { kCharSet, kConcat, kAlt, kRepeat, kAutomaton, kGraph, kCall };

// Nesting the builder follows before it stops (a C++ stack overflow would crash Python).
constexpr int kMaxNesting = 4000;

struct Fragment {
    int64_t num_states = 2;
    std::vector<std::array<int32_t, 2>> eps;    // src, dst
    std::vector<std::array<int32_t, 4>> edges;  // src, byte lo, byte hi, dst
    std::vector<std::array<int32_t, 3>> tags;   // state, family, rank
    int64_t num_families = 0;
    std::vector<std::array<int32_t, 2>> labels;  // state, label
};

using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

int utf8_encode(uint32_t cp, uint8_t* out) {
    if (cp < 0x80) {
        out[0] = static_cast<uint8_t>(cp);
        return 1;
    }
    if (cp < 0x800) {
        out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
        out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
        out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
        out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 4;
}

// Split a range of code points of one encoded length until every byte position is a plain
// range (the construction used by RE2 and Rust's regex-syntax; see automaton/utf8.py).
void split_same_length(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
    uint8_t a[4], b[4];
    const int n = utf8_encode(lo, a);
    for (int i = 1; i < n; ++i) {
        const uint32_t mask = (1u << (6 * i)) - 1;
        if ((lo & ~mask) != (hi & ~mask)) {
            if (lo & mask) {
                split_same_length(lo, lo | mask, out);
                split_same_length((lo | mask) + 1, hi, out);
                return;
            }
            if ((hi & mask) != mask) {
                split_same_length(lo, (hi & ~mask) - 1, out);
                split_same_length(hi & ~mask, hi, out);
                return;
            }
        }
    }
    utf8_encode(hi, b);
    ByteRangeSeq seq;
    for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
    out.push_back(std::move(seq));
}

std::vector<ByteRangeSeq> utf8_sequences(const int32_t* ranges, int64_t n_ranges) {
    static constexpr uint32_t bounds[4][2] = {
        {0x0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, 0x10FFFF}};
    std::vector<ByteRangeSeq> out;
    for (int64_t r = 0; r < n_ranges; ++r) {
        const uint32_t lo = ranges[2 * r], hi = ranges[2 * r + 1];
        for (const auto& bound : bounds) {
            const uint32_t a = std::max(lo, bound[0]), b = std::min(hi, bound[1]);
            if (a <= b) split_same_length(a, b, out);
        }
    }
    return out;
}

struct TooManyStates : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct TooDeep : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Accumulates copies of fragments into one numbering.
struct Stamper {
    Fragment out;

    explicit Stamper(int64_t first_free) { out.num_states = first_free; }

    int32_t new_state() { return static_cast<int32_t>(out.num_states++); }

    void edge(int32_t src, int32_t lo, int32_t hi, int32_t dst) { out.edges.push_back({src, lo, hi, dst}); }

    void epsilon(int32_t src, int32_t dst) { out.eps.push_back({src, dst}); }

    // One character of the set, from entry to exit.
    void chars(const std::vector<ByteRangeSeq>& sequences, int32_t entry, int32_t exit) {
        for (const auto& seq : sequences) {
            int32_t src = entry;
            for (size_t i = 0; i < seq.size(); ++i) {
                const int32_t dst = i + 1 == seq.size() ? exit : new_state();
                edge(src, seq[i].first, seq[i].second, dst);
                src = dst;
            }
        }
    }

    // The exact bytes from entry to exit.
    void byte_path(const int32_t* bytes, int64_t n, int32_t entry, int32_t exit) {
        int32_t src = entry;
        for (int64_t i = 0; i < n; ++i) {
            const int32_t dst = i + 1 == n ? exit : new_state();
            edge(src, bytes[i], bytes[i], dst);
            src = dst;
        }
    }

    // Copies of `frag`, copy c between entries[c] and exits[c]; returns the first global id
    // of the copies' inner states (copy c's local state j >= 2 is base + c * inner + j - 2).
    int64_t place(const Fragment& frag, const std::vector<int32_t>& entries,
                  const std::vector<int32_t>& exits) {
        const int64_t copies = entries.size(), inner = frag.num_states - 2;
        const int64_t base = out.num_states;
        out.num_states += copies * inner;
        const int64_t family_base = out.num_families;
        out.num_families += copies * frag.num_families;
        for (int64_t c = 0; c < copies; ++c) {
            auto map = [&](int32_t local) {
                return local == 0 ? entries[c]
                       : local == 1 ? exits[c]
                                    : static_cast<int32_t>(base + c * inner + local - 2);
            };
            for (const auto& e : frag.eps) epsilon(map(e[0]), map(e[1]));
            for (const auto& e : frag.edges) edge(map(e[0]), e[1], e[2], map(e[3]));
            for (const auto& t : frag.tags)
                out.tags.push_back({map(t[0]), static_cast<int32_t>(family_base + c * frag.num_families + t[1]), t[2]});
            for (const auto& l : frag.labels) out.labels.push_back({map(l[0]), l[1]});
        }
        return base;
    }

    int32_t new_family() { return static_cast<int32_t>(out.num_families++); }
};

// The flat program of an expression DAG (see nfa.flatten) and the fragments built from it.
class Builder {
   public:
    Builder(const int8_t* kind, const int64_t* child_ptr, const int32_t* children,
            const int64_t* extra_ptr, const int32_t* extra, int64_t n_nodes,
            std::vector<Fragment> automata, int64_t max_states)
        : kind_(kind), child_ptr_(child_ptr), children_(children), extra_ptr_(extra_ptr),
          extra_(extra), automata_(std::move(automata)), max_states_(max_states),
          memo_(n_nodes), shared_(n_nodes, 0) {
        std::vector<int32_t> parents(n_nodes, 0);
        for (int64_t j = 0; j < child_ptr[n_nodes]; ++j) parents[children[j]] += 1;
        for (int64_t i = 0; i < n_nodes; ++i) shared_[i] = parents[i] > 1;
    }

    std::vector<int64_t> graph_order;  // Graph nodes in the order their labels were numbered

    const Fragment& build(int32_t node) {
        if (memo_[node]) return *memo_[node];
        Nesting nesting(depth_);
        Fragment frag;
        switch (kind_[node]) {
            case kCharSet: {
                Stamper stamper(2);
                stamper.chars(sequences(node), 0, 1);
                frag = std::move(stamper.out);
                break;
            }
            case kConcat:
            case kAlt:
            case kCall: {
                if (kind_[node] == kConcat && n_children(node) == 0) {
                    frag.eps.push_back({0, 1});
                    break;
                }
                Stamper stamper(2);
                Tails tails;
                lay_out(stamper, node, 0, 1, tails);
                frag = std::move(stamper.out);
                break;
            }
            case kRepeat:
                frag = repeat(node);
                break;
            case kAutomaton:
                frag = automaton(node);
                break;
            case kGraph:
                frag = graph(node);
                break;
            default:
                fail("not an expression kind: " + std::to_string(kind_[node]));
        }
        check_size(frag.num_states);
        memo_[node] = std::move(frag);
        return *memo_[node];
    }

   private:
    using Tails = std::map<std::pair<int32_t, int32_t>, int32_t>;  // (shared node, exit) -> entry

    // Counts the builder's nesting; past kMaxNesting the grammar is reported too deep.
    struct Nesting {
        explicit Nesting(int& depth) : depth_(depth) {
            if (++depth_ > kMaxNesting) {
                --depth_;
                throw TooDeep("the grammar nests too deeply to compile (more than " +
                              std::to_string(kMaxNesting) + " levels)");
            }
        }
        ~Nesting() { --depth_; }
        int& depth_;
    };

    int64_t n_children(int32_t node) const { return child_ptr_[node + 1] - child_ptr_[node]; }
    int32_t child(int32_t node, int64_t i) const { return children_[child_ptr_[node] + i]; }
    const int32_t* extra(int32_t node) const { return extra_ + extra_ptr_[node]; }
    int64_t n_extra(int32_t node) const { return extra_ptr_[node + 1] - extra_ptr_[node]; }

    const std::vector<ByteRangeSeq>& sequences(int32_t node) {
        auto hit = sequences_.find(node);
        if (hit == sequences_.end())
            hit = sequences_.emplace(node, utf8_sequences(extra(node), n_extra(node) / 2)).first;
        return hit->second;
    }

    void check_size(int64_t num_states) const {
        if (num_states > max_states_)
            throw TooManyStates("the automaton needs more than " + thousands(max_states_) +
                                " NFA states (raise --max-states, or bound the repetitions)");
    }

    static std::string thousands(int64_t n) {
        std::string digits = std::to_string(n), out;
        for (size_t i = 0; i < digits.size(); ++i) {
            if (i && (digits.size() - i) % 3 == 0) out += ',';
            out += digits[i];
        }
        return out;
    }

    void lay_out(Stamper& stamper, int32_t node, int32_t entry, int32_t exit, Tails& tails) {
        Nesting nesting(depth_);
        if (shared_[node] && kind_[node] != kCharSet && kind_[node] != kCall) {
            stamper.epsilon(entry, shared_copy(stamper, node, exit, tails));
            return;
        }
        lay_out_here(stamper, node, entry, exit, tails);
    }

    // A node with several parents is laid out once per exit state, from an entry of its own
    // (the other uses jump there, or end their previous part there): uses that end in the
    // same state have the same continuation, so they may share the copy.
    int32_t shared_copy(Stamper& stamper, int32_t node, int32_t exit, Tails& tails) {
        const auto key = std::make_pair(node, exit);
        auto hit = tails.find(key);
        if (hit != tails.end()) return hit->second;
        const int32_t copy_entry = tails[key] = stamper.new_state();
        lay_out_here(stamper, node, copy_entry, exit, tails);
        return copy_entry;
    }

    void lay_out_here(Stamper& stamper, int32_t node, int32_t entry, int32_t exit, Tails& tails) {
        switch (kind_[node]) {
            case kCharSet:
                stamper.chars(sequences(node), entry, exit);
                return;
            case kCall:
                stamper.byte_path(extra(node), n_extra(node), entry, exit);
                return;
            case kConcat:
            case kAlt:
                lay_out_inline(stamper, node, entry, exit, tails);
                return;
            default:
                stamper.place(build(node), {entry}, {exit});
        }
    }

    void lay_out_inline(Stamper& stamper, int32_t node, int32_t entry, int32_t exit, Tails& tails) {
        check_size(stamper.out.num_states);
        const int64_t n = n_children(node);
        if (kind_[node] == kAlt) {
            for (int64_t i = 0; i < n; ++i) lay_out(stamper, child(node, i), entry, exit, tails);
            return;
        }
        if (n == 0) {
            stamper.epsilon(entry, exit);
            return;
        }
        // Last part first: a shared part's copy is keyed by the state it ends in, so the part
        // before it ends in the copy's own entry, and two concatenations that end alike (a
        // value, then the rest of an object) share the copies of their common end.
        int32_t next = exit;
        for (int64_t i = n - 1; i >= 0; --i) {
            const int32_t part = child(node, i);
            if (i > 0 && shared_[part]) {  // characters too: what comes before may share
                Nesting nesting(depth_);
                next = shared_copy(stamper, part, next, tails);
                continue;
            }
            const int32_t here = i == 0 ? entry : stamper.new_state();
            lay_out(stamper, part, here, next, tails);
            next = here;
        }
    }

    Fragment repeat(int32_t node) {
        const Fragment& item = build(child(node, 0));
        const int64_t lo = extra(node)[0], hi = extra(node)[1];  // hi -1: unbounded
        const int64_t optional = hi < 0 ? 0 : hi - lo;
        const int64_t chain_len = lo + optional;  // item copies laid in a chain
        check_size(2 + (chain_len + 1) * item.num_states);
        Stamper stamper(2);
        std::vector<int32_t> joints{0};
        for (int64_t i = 0; i < chain_len; ++i) joints.push_back(stamper.new_state());
        if (chain_len) {
            const int64_t base = stamper.place(item, std::vector<int32_t>(joints.begin(), joints.end() - 1),
                                               std::vector<int32_t>(joints.begin() + 1, joints.end()));
            if (hi >= 0) tag_optional_copies(stamper, item, base, joints, lo);
        }
        if (hi < 0) {
            // after the mandatory copies: a loop through fresh states, then the exit
            const int32_t loop_in = stamper.new_state(), loop_out = stamper.new_state();
            stamper.place(item, {loop_in}, {loop_out});
            stamper.epsilon(joints.back(), loop_in);
            stamper.epsilon(loop_out, loop_in);
            stamper.epsilon(loop_in, 1);
        } else {
            // every joint from the last mandatory one on may leave for the exit
            for (size_t k = lo; k < joints.size(); ++k) stamper.epsilon(joints[k], 1);
        }
        return std::move(stamper.out);
    }

    // Dominance tags of a bounded repeat: copy c >= lo - 1 dominates later copies (after it,
    // at least as many more copies may follow), and so does joint k >= lo. The entry (joint
    // 0) is left out: it is shared with what comes before the repeat.
    static void tag_optional_copies(Stamper& stamper, const Fragment& item, int64_t base,
                                    const std::vector<int32_t>& joints, int64_t lo) {
        const int64_t first = std::max<int64_t>(lo - 1, 0);
        const int64_t copies = joints.size() - 1, inner = item.num_states - 2;
        if (copies - first >= 2 && inner > 0) {
            const int64_t family_base = stamper.out.num_families;  // one per inner position
            stamper.out.num_families += inner;
            for (int64_t c = first; c < copies; ++c)
                for (int64_t j = 0; j < inner; ++j)
                    stamper.out.tags.push_back({static_cast<int32_t>(base + c * inner + j),
                                                static_cast<int32_t>(family_base + j),
                                                static_cast<int32_t>(c)});
        }
        const int64_t start = std::max<int64_t>(lo, 1);
        if (static_cast<int64_t>(joints.size()) - start >= 2) {
            const int32_t family = stamper.new_family();
            for (int64_t k = start; k < static_cast<int64_t>(joints.size()); ++k)
                stamper.out.tags.push_back({joints[k], family, static_cast<int32_t>(k)});
        }
    }

    // A DFA's fragment (state s is fragment state s + 1), and the fragments of its extra
    // edges (calls, or what replaced them) laid from their source state to their target:
    // edges of one expression to one target share a copy, entered by epsilon edges.
    Fragment automaton(int32_t node) {
        const int32_t* x = extra(node);
        if (n_children(node) == 0) return automata_.at(x[0]);
        Stamper stamper(0);
        stamper.out = automata_.at(x[0]);
        std::map<std::pair<int32_t, int32_t>, int32_t> copies;  // (expression, target) -> entry
        for (int64_t e = 0; e < n_children(node); ++e) {
            const int32_t src = x[1 + 2 * e] + 1, dst = x[2 + 2 * e] + 1;
            const int32_t label = child(node, e);
            auto hit = copies.find({label, dst});
            if (hit == copies.end()) {
                const int32_t entry = stamper.new_state();
                hit = copies.emplace(std::make_pair(label, dst), entry).first;
                if (kind_[label] == kCharSet) {
                    stamper.chars(sequences(label), entry, dst);
                } else if (kind_[label] == kCall) {
                    stamper.byte_path(extra(label), n_extra(label), entry, dst);
                } else {
                    stamper.place(build(label), {entry}, {dst});
                }
                check_size(stamper.out.num_states);
            }
            stamper.epsilon(src, hit->second);
        }
        return std::move(stamper.out);
    }

    // Node states joined by their edges' fragments; entry and exit reach them by epsilon
    // edges, so no edge enters the entry even when an edge returns to the start node.
    Fragment graph(int32_t node) {
        const int32_t* x = extra(node);
        const int64_t n_names = x[0], start = x[1], n_accepting = x[2];
        const int32_t* accepting = x + 3;
        const int32_t* ends = accepting + n_accepting;  // (source, target) per edge
        Stamper stamper(2);
        const int32_t first_node = static_cast<int32_t>(stamper.out.num_states);
        stamper.out.num_states += n_names;
        const int32_t first_label = static_cast<int32_t>(next_label_);
        next_label_ += n_names;
        graph_order.push_back(node);
        for (int64_t i = 0; i < n_names; ++i)
            stamper.out.labels.push_back({static_cast<int32_t>(first_node + i), static_cast<int32_t>(first_label + i)});
        stamper.epsilon(0, first_node + static_cast<int32_t>(start));
        for (int64_t i = 0; i < n_accepting; ++i) stamper.epsilon(first_node + accepting[i], 1);
        for (int64_t e = 0; e < n_children(node); ++e) {
            const int32_t src = first_node + ends[2 * e], dst = first_node + ends[2 * e + 1];
            const int64_t first = stamper.out.num_states;
            const int32_t label = child(node, e);
            if (kind_[label] == kCharSet) {
                stamper.chars(sequences(label), src, dst);
            } else {
                const Fragment& inner = build(label);
                if (!inner.labels.empty()) fail("a Graph cannot be nested inside another Graph's edge");
                stamper.place(inner, {src}, {dst});
            }
            // the edge's inner states belong to its source node
            for (int64_t s = first; s < stamper.out.num_states; ++s)
                stamper.out.labels.push_back({static_cast<int32_t>(s), first_label + ends[2 * e]});
        }
        return std::move(stamper.out);
    }

    const int8_t* kind_;
    const int64_t* child_ptr_;
    const int32_t* children_;
    const int64_t* extra_ptr_;
    const int32_t* extra_;
    std::vector<Fragment> automata_;
    int64_t max_states_;
    std::vector<std::optional<Fragment>> memo_;
    std::vector<uint8_t> shared_;
    std::map<int32_t, std::vector<ByteRangeSeq>> sequences_;
    int64_t next_label_ = 0;
    int depth_ = 0;
};

template <size_t W>
py::array_t<int32_t> rows_numpy(const std::vector<std::array<int32_t, W>>& rows) {
    py::array_t<int32_t> out({static_cast<int64_t>(rows.size()), static_cast<int64_t>(W)});
    if (!rows.empty()) std::memcpy(out.mutable_data(), rows.data(), rows.size() * W * sizeof(int32_t));
    return out;
}

}  // namespace

py::tuple build_nfa(In<int8_t> kind, In<int64_t> child_ptr, In<int32_t> children,
                    In<int64_t> extra_ptr, In<int32_t> extra, std::vector<py::tuple> automata,
                    int64_t root, int64_t max_states) {
    const int64_t n = length(kind, "kind");
    require(n >= 1 && root >= 0 && root < n, "root must be a node of the program");
    const int64_t n_children = length(children, "children");
    require_csr(child_ptr, n, n_children, "child_ptr");
    require_in_range(children.data(), n_children, 0, n, "children");
    const int64_t n_extra = length(extra, "extra");
    require_csr(extra_ptr, n, n_extra, "extra_ptr");
    require_in_range(kind.data(), n, kCharSet, kCall + 1, "kind");
    // every node's payload has the shape its kind needs
    const int8_t* k = kind.data();
    const int64_t *cp = child_ptr.data(), *xp = extra_ptr.data();
    const int32_t* x = extra.data();
    // (a cycle is not checked for: the builder's nesting limit stops it)
    for (int64_t i = 0; i < n; ++i) {
        const int64_t nc = cp[i + 1] - cp[i], nx = xp[i + 1] - xp[i];
        switch (k[i]) {
            case kCharSet:
                require(nc == 0 && nx % 2 == 0, "a CharSet holds (lo, hi) code point pairs");
                for (int64_t j = xp[i]; j < xp[i + 1]; j += 2)
                    require(0 <= x[j] && x[j] <= x[j + 1] && x[j + 1] <= 0x10FFFF,
                            "a CharSet range is not within 0..0x10FFFF");
                break;
            case kConcat:
            case kAlt:
                require(nx == 0, "Concat and Alt have no payload");
                break;
            case kRepeat:
                require(nc == 1 && nx == 2 && x[xp[i]] >= 0 &&
                            (x[xp[i] + 1] == -1 || x[xp[i] + 1] >= x[xp[i]]),
                        "a Repeat has one item and bounds 0 <= min <= max (or max -1)");
                break;
            case kAutomaton:
                require(nx == 1 + 2 * nc && x[xp[i]] >= 0 &&
                            x[xp[i]] < static_cast<int64_t>(automata.size()),
                        "an Automaton names one of the automata, and the ends of its edges");
                break;
            case kGraph: {
                require(nx >= 3, "a Graph holds its node count, start and accepting nodes");
                const int64_t names = x[xp[i]], acc = x[xp[i] + 2];
                require(names >= 1 && x[xp[i] + 1] >= 0 && x[xp[i] + 1] < names && acc >= 0 &&
                            nx == 3 + acc + 2 * nc,
                        "a Graph's payload does not match its edges");
                require_in_range(x + xp[i] + 3, acc + 2 * nc, 0, names, "a Graph's node");
                break;
            }
            case kCall:
                require(nc == 0 && nx >= 1, "a Call is spelled by at least one byte");
                require_in_range(x + xp[i], nx, 0, 256, "a Call's bytes");
                break;
        }
    }
    std::vector<Fragment> fragments;
    for (const py::tuple& automaton : automata) {
        require(automaton.size() == 3, "an automaton is (num_states, eps, edges)");
        Fragment frag;
        frag.num_states = automaton[0].cast<int64_t>();
        require(frag.num_states >= 2, "an automaton fragment has an entry and an exit");
        const auto eps = automaton[1].cast<In<int32_t>>();
        const auto edges = automaton[2].cast<In<int32_t>>();
        require(eps.ndim() == 2 && eps.shape(1) == 2 && edges.ndim() == 2 && edges.shape(1) == 4,
                "an automaton's eps are [k, 2] and its edges [k, 4]");
        const int64_t n_eps = eps.shape(0), n_edges = edges.shape(0);
        require_in_range(eps.data(), 2 * n_eps, 0, frag.num_states, "an automaton's eps");
        for (int64_t e = 0; e < n_edges; ++e) {
            const int32_t* row = edges.data() + 4 * e;
            require(row[0] >= 0 && row[0] < frag.num_states && row[3] >= 0 &&
                        row[3] < frag.num_states && 0 <= row[1] && row[1] <= row[2] && row[2] <= 255,
                    "an automaton's edge is not (src, lo, hi, dst) within its states and bytes");
            frag.edges.push_back({row[0], row[1], row[2], row[3]});
        }
        for (int64_t e = 0; e < n_eps; ++e) frag.eps.push_back({eps.data()[2 * e], eps.data()[2 * e + 1]});
        fragments.push_back(std::move(frag));
    }
    Builder builder(k, cp, children.data(), xp, x, n, std::move(fragments), max_states);
    Fragment result;
    {
        py::gil_scoped_release released;
        result = builder.build(static_cast<int32_t>(root));
    }
    return py::make_tuple(result.num_states, rows_numpy(result.eps), rows_numpy(result.edges),
                          rows_numpy(result.tags), result.num_families, rows_numpy(result.labels),
                          to_numpy(builder.graph_order));
}

std::vector<std::vector<std::pair<int, int>>> utf8_byte_ranges(
    const std::vector<std::pair<int64_t, int64_t>>& ranges) {
    std::vector<int32_t> flat;
    for (const auto& [lo, hi] : ranges) {
        require(0 <= lo && lo <= hi && hi <= 0x10FFFF, "a range is not within 0..0x10FFFF");
        flat.push_back(static_cast<int32_t>(lo));
        flat.push_back(static_cast<int32_t>(hi));
    }
    std::vector<std::vector<std::pair<int, int>>> out;
    for (const auto& seq : utf8_sequences(flat.data(), ranges.size()))
        out.emplace_back(seq.begin(), seq.end());
    return out;
}

void register_nfa_errors(py::module_&) {
    py::register_exception_translator([](std::exception_ptr error) {
        try {
            if (error) std::rethrow_exception(error);
        } catch (const TooManyStates& e) {
            py::object cls = py::module_::import("grammarc.errors").attr("TooManyStatesError");
            PyErr_SetObject(cls.ptr(), py::str(e.what()).ptr());
        } catch (const TooDeep& e) {
            PyErr_SetString(PyExc_RecursionError, e.what());
        }
    });
}

}  // namespace grammarc
