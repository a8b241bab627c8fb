// The kernels of grammarc's compiled core (module grammarc._core), one declaration each;
// module.cpp binds them and documents their arguments for Python.
#pragma once

#include <pybind11/stl.h>

#include "common.hpp"

namespace grammarc {

// dfa.cpp
py::tuple subset_construction(int64_t n_nfa, In<int64_t> eps_ptr, In<int32_t> eps_dst,
                              In<int64_t> edge_ptr, In<int32_t> edge_clo, In<int32_t> edge_chi,
                              In<int32_t> edge_dst, In<int64_t> tag_ptr, In<int32_t> tag_family,
                              In<int32_t> tag_rank, int64_t n_families, int64_t n_classes,
                              int64_t max_states, int64_t max_entries, In<int32_t> nfa_label);
py::tuple minimize_dfa(In<int32_t> trans, In<int32_t> byte_class, In<bool> accepting,
                       In<int32_t> labels);
py::array_t<int32_t> csr_bfs_order(In<int64_t> ptr, In<int32_t> target, int64_t start);
py::array_t<int32_t> column_groups(In<int32_t> trans);
py::tuple product(In<int32_t> trans_a, In<bool> acc_a, In<int32_t> trans_b, In<bool> acc_b,
                  In<int32_t> class_a, In<int32_t> class_b, int op, int64_t max_states);

// align.cpp
py::tuple build_trie(In<uint8_t> data, In<int64_t> offsets);
py::array_t<int32_t> trie_code(In<int32_t> node_code, In<uint8_t> node_byte,
                               In<int32_t> byte_class);
py::tuple class_trie(In<uint8_t> node_byte, In<int32_t> node_depth, In<int32_t> byte_class,
                     int64_t n_classes);
py::tuple canonical_classes(In<int32_t> forest_cls, In<int64_t> item_of_token);
py::array_t<int32_t> min_tokens_to_accept(In<int64_t> state_ptr, In<int32_t> entry_next,
                                          In<bool> accepting);
py::tuple dedupe_rows(In<int64_t> state_ptr, In<int32_t> entry_class, In<int32_t> entry_next,
                      In<int32_t> min_tokens, In<int32_t> class_map);
py::tuple row_moves(In<int32_t> state_row, In<int64_t> row_ptr, In<int32_t> row_delta);
py::tuple refine_entries(In<int64_t> state_ptr, In<int32_t> entry_class, In<int32_t> entry_next,
                         In<int32_t> coarse_of_fine, In<int32_t> next_map);
py::tuple sink_pairs(In<int64_t> state_ptr, In<int32_t> entry_class, In<int32_t> entry_next,
                     int64_t sink, int64_t n_classes);
py::tuple row_class_masks(In<int64_t> token_order, In<int64_t> class_ptr, In<int64_t> row_ptr,
                          In<int32_t> row_class);

// The walk of a class trie from DFA states: validated once, shared by the refining threads.
struct TrieWalk {
    TrieWalk(In<int32_t> code, In<int32_t> end, py::array trans_off, int64_t n_classes,
             In<bool> accepting, int64_t eos_item);
    In<int32_t> code, end;
    py::array trans_off;  // int32 or int64, [num_states * n_classes]
    In<bool> accepting;
    int64_t n_nodes, n_classes, n_states, eos_item, max_depth;
    std::vector<int32_t> first_nodes;  // the root's children, in pre-order
};

// A base state for each state below `walked` (-1: walked in full): the state that most of its
// live first-level subtrees lead to, when that state mostly leads to itself and the two differ
// on first bytes whose subtrees hold at most half the nodes the state walks. With it, a bound
// of the nodes the walks visit.
py::tuple walk_bases(In<int32_t> first_label, In<int64_t> first_weight, py::array trans_off,
                     int64_t n_classes, int64_t walked);

// The groups of states that walk alike up to the edges out of their strongly connected
// components (alignment/flat.py): among the `candidate` states whose live first-level subtrees
// hold at least `min_live` nodes, in a component of at most `most_states` states with an edge
// inside, those whose components read the same from them, class by class (the same state in
// breadth-first order from them, the dead state, or some state outside), with the same
// acceptance. (group per state, -1 for none or alone; for each grouped state its component
// in breadth-first order from it, CSR: order_ptr, order_states; and the live first-level
// nodes of every grouped state but each group's first, which twins do not walk.)
py::tuple component_twins(In<int32_t> first_label, In<int64_t> first_weight, py::array trans_off,
                          int64_t n_classes, In<bool> accepting, In<bool> candidate,
                          int64_t min_live, int64_t most_states);

// Partition refinement of trie items, state by state, remembering every split (alignment/flat.py).
class SplitForest {
   public:
    SplitForest(int64_t num_items, int64_t num_states);
    void refine(const TrieWalk& walk, In<int32_t> states, In<int32_t> bases, In<int32_t> twins,
                In<int64_t> order_ptr, In<int32_t> order_states);
    py::array_t<int32_t> classes() const;
    py::array_t<int64_t> row_counts(In<int32_t> canon_of_item);
    void expand(int64_t n_classes, In<int64_t> state_ptr, py::array entry_class,
                py::array entry_next);

   private:
    // where a state's walk may be its twin's (`refine`): none when `twin` is null
    struct Twins {
        const int32_t* twin;
        const int64_t* order_ptr;
        const int32_t* order;
    };
    template <class Offset>
    void refine_with(const TrieWalk& walk, const Offset* trans_off, const int32_t* states,
                     int64_t n, const int32_t* bases, Twins twins);
    template <class Offset>
    int64_t walk_subtrees(const TrieWalk& walk, const Offset* trans_off, int64_t state,
                          const int32_t* first, int64_t n_first, int32_t* items,
                          int64_t* nexts, std::vector<Offset>& stack) const;
    // walk_subtrees over every first-level node, recording the edges out of the component
    // `pos_` marks
    template <class Offset>
    int64_t walk_recording_exits(const TrieWalk& walk, const Offset* trans_off, int64_t state,
                                 int32_t* items, int64_t* nexts, std::vector<Offset>& stack);
    // the items of `node` and below it, reached from the state at offset `from` before it
    template <class Offset>
    int64_t walk_below(const TrieWalk& walk, const Offset* trans_off, int32_t node, Offset from,
                       int32_t* items, int64_t* nexts, std::vector<Offset>& stack) const;
    // the refinement of one walk's items (items[0:k] to nexts[0:k]): new classes by (class,
    // next state), each recorded for `s`
    void split_by_next(int64_t s, const int32_t* items, const int64_t* nexts, int64_t k);
    // The class of (item's class, next state) made in the current state, -1 when new.
    int32_t group_of(int32_t item, int64_t next, int64_t mark);
    int32_t new_group(int32_t item, int64_t n_ids);  // a new class, child of the item's
    void start_state(int64_t n_ids);
    void grow_table(int64_t mark);
    void keep_splits(int64_t first_new, int64_t k, bool compact);
    template <class Span>
    void for_each_span(int64_t s, Span&& span);
    static constexpr int64_t kCompactIds = 8;  // ids per item past which splits are compacted

    int64_t num_items_, num_states_;
    ZeroedArray<int32_t> cls_, out_item_;  // per item: its class; the items of one walk
    ZeroedArray<int64_t> out_next_;        // the next state of each item of one walk
    std::vector<int32_t> parent_{0}, rec_id_;
    std::vector<int64_t> size_;       // per id: the items whose class it is
    std::vector<uint8_t> has_child_;  // per id: whether a split made children of it
    std::vector<int64_t> group_size_;
    std::vector<int32_t> new_id_;
    std::vector<int64_t> rec_next_, rec_start_, rec_end_;
    // a state walked from a base inherits the base's records less the groups it moved out:
    // base_[s] (-1 if none) and the ids excl_id_[excl_start_[s]:excl_end_[s]]
    std::vector<int32_t> base_, excl_id_;
    std::vector<int64_t> excl_start_, excl_end_;
    std::vector<uint8_t> walked_;
    ZeroedArray<int32_t> base_item_;   // the items of a base's walk over the differing subtrees
    ZeroedArray<int64_t> base_next_;
    // a state walked in full whose component has twins keeps the edges out of it (the node
    // below the edge, the state before it): exit_*[exit_start_[s]:exit_end_[s]]
    std::vector<int64_t> exit_start_, exit_end_;
    std::vector<int32_t> exit_node_, exit_from_;
    std::vector<uint8_t> exits_kept_;
    std::vector<int32_t> pos_;  // per state: its place in the component being read, -1 if none
    // after row_counts: the final classes in pre-order of the ids, each id's range of them,
    // and the entries of each state
    std::vector<int32_t> order_;
    std::vector<int64_t> range_lo_, range_hi_, counts_;
    std::vector<std::pair<int64_t, int64_t>> excluded_;
    std::vector<int64_t> first_stamp_, first_next_;
    std::vector<int32_t> first_new_;
    std::vector<int64_t> ht_stamp_, ht_next_;
    std::vector<int32_t> ht_class_, ht_new_;
    int64_t ht_used_ = 0;  // entries of the current state in the ht_* table
};

// nfa.cpp
py::tuple build_nfa(In<int8_t> kind, In<int64_t> child_ptr, In<int32_t> children,
                    In<int64_t> extra_ptr, In<int32_t> extra, std::vector<py::tuple> automata,
                    int64_t root, int64_t max_states);
std::vector<std::vector<std::pair<int, int>>> utf8_byte_ranges(
    const std::vector<std::pair<int64_t, int64_t>>& ranges);
void register_nfa_errors(py::module_& m);

// calls.cpp
py::tuple pushdown_walk(In<int32_t> table, In<bool> final, In<int32_t> call_row,
                        In<int32_t> call_start, In<int32_t> call_ret, In<int32_t> loop_machine,
                        In<bool> in_loop, In<int64_t> count_min, In<int64_t> count_max,
                        In<int32_t> twin, In<int32_t> exit_class, In<int64_t> site_ptr,
                        In<int32_t> site_next, In<int32_t> starts, In<uint8_t> data,
                        In<int64_t> lo, In<int64_t> hi, int64_t max_push);
py::array_t<bool> classes_below(In<uint16_t> table, In<int32_t> rows, In<int32_t> token_class,
                                int64_t n_classes, int64_t below);
py::array_t<int64_t> least_costs(In<bool> accepting, In<int32_t> option_owner,
                                 In<int64_t> option_cost, In<int64_t> option_ptr,
                                 In<int32_t> option_states);
py::tuple spelled_starts(In<uint8_t> node_byte, In<int32_t> node_depth, In<int64_t> tok_ptr,
                         In<int32_t> toks, int64_t vocab_size, In<int32_t> table,
                         In<bool> boundary, In<bool> in_loop, In<int32_t> places);

}  // namespace grammarc
