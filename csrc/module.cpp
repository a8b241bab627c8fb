// grammarc._core: the compiled compile-side kernels. Every kernel checks its arguments (a
// malformed one raises ValueError, never a crash), releases the GIL while it runs, and
// returns fresh numpy arrays. The runtime never imports this module.
#include "kernels.hpp"

using namespace grammarc;

PYBIND11_MODULE(_core, m) {
    m.doc() = "grammarc's compiled kernels (compile side only; see grammarc/automaton/dfa.py, "
              "products.py and grammarc/alignment/flat.py, calls.py for their contracts)";
    m.def("subset_construction", &subset_construction, py::arg("n_nfa"), py::arg("eps_ptr"),
          py::arg("eps_dst"), py::arg("edge_ptr"), py::arg("edge_clo"), py::arg("edge_chi"),
          py::arg("edge_dst"), py::arg("tag_ptr"), py::arg("tag_family"), py::arg("tag_rank"),
          py::arg("n_families"), py::arg("n_classes"), py::arg("max_states"),
          py::arg("max_entries"), py::arg("nfa_label"),
          "Subset construction over byte classes; DFA state 0 is the empty set, 1 the start "
          "closure. Returns (trans, accepting, labels, status, conflict): status 1 means "
          "max_states DFA states or max_entries NFA states summed over the subsets were "
          "exceeded; status 2 that the subset reached from DFA state conflict[0] (-1: the "
          "start) by class conflict[1] holds NFA states labelled conflict[2] and conflict[3].");
    m.def("minimize_dfa", &minimize_dfa, py::arg("trans"), py::arg("byte_class"),
          py::arg("accepting"), py::arg("labels"),
          "The minimal DFA of a complete DFA (state 0 dead, 1 the start; `labels` of its "
          "states, or empty): classes every state treats alike made one, states that cannot "
          "reach acceptance trimmed into the dead state, Hopcroft's refinement from the "
          "partition by acceptance and label (the dead state alone, never a splitter), states "
          "numbered dead first then breadth-first from the start visiting classes in order, "
          "classes with equal columns merged and numbered by their first byte. Returns (trans, "
          "byte_class, accepting, representative original state of each state, status): "
          "status 1 means the language is empty.");
    m.def("csr_bfs_order", &csr_bfs_order, py::arg("ptr"), py::arg("target"), py::arg("start"),
          "The states reached from `start` along the edges `ptr`/`target` (CSR), breadth-first, "
          "each state's edges visited in their order.");
    m.def("column_groups", &column_groups, py::arg("trans"),
          "The group of each column of a table: equal columns share one, numbered by their "
          "first column.");
    m.def("product", &product, py::arg("trans_a"), py::arg("acc_a"), py::arg("trans_b"),
          py::arg("acc_b"), py::arg("class_a"), py::arg("class_b"), py::arg("op"),
          py::arg("max_states"),
          "Reachable product of two complete DFAs (0 dead, 1 start) over the product's byte "
          "classes; op 0 intersects, op 1 subtracts b from a. Returns (trans, accepting, "
          "status, pair_a, pair_b), status 1 when more than max_states states were needed; "
          "state i is the pair (pair_a[i], pair_b[i]) of the operands' states.");
    m.def("build_trie", &build_trie, py::arg("data"), py::arg("offsets"),
          "Pre-order trie of the byte strings data[offsets[i]:offsets[i+1]] (any order): "
          "(node_byte, node_depth, node_end, the node where each string ends).");
    m.def("trie_code", &trie_code, py::arg("node_code"), py::arg("node_byte"),
          py::arg("byte_class"),
          "Each node's code for TrieWalk: node_code | byte_class[node_byte] << 1 (its "
          "depth, its byte's class and whether a token ends there, in one int32).");
    m.def("class_trie", &class_trie, py::arg("node_byte"), py::arg("node_depth"),
          py::arg("byte_class"), py::arg("n_classes"),
          "Fold a pre-order byte trie into a trie over byte classes: (label, depth, end, "
          "class-trie node of each byte-trie node).");
    m.def("canonical_classes", &canonical_classes, py::arg("forest_cls"),
          py::arg("item_of_token"),
          "Final token classes from every forest's item classes: (class of each token, "
          "class of each item); 0 = never allowed, the others numbered by smallest token.");
    m.def("min_tokens_to_accept", &min_tokens_to_accept, py::arg("state_ptr"),
          py::arg("entry_next"), py::arg("accepting"),
          "Shortest token path from each state to an accepting state (-1: none).");
    m.def("dedupe_rows", &dedupe_rows, py::arg("state_ptr"), py::arg("entry_class"),
          py::arg("entry_next"), py::arg("min_tokens"),
          py::arg("class_map") = py::array_t<int32_t>(0),
          "Trim entries into dead ends, make them relative and share equal rows: (state_row, "
          "row_ptr, row_class, row_delta), the last two int32; with a class_map, entry "
          "classes are renumbered by it.");
    m.def("row_class_masks", &row_class_masks, py::arg("token_order"), py::arg("class_ptr"),
          py::arg("row_ptr"), py::arg("row_class"),
          "The token masks of a table's distinct sets of row classes, packed eight tokens a "
          "byte in a bitmask's order: (mask_row, rows, packed): mask_row[r] the first row "
          "allowing the classes row r allows, rows those first rows ascending, packed "
          "[len(rows), ceil(V / 8)] uint8, each written from its smaller side.");
    m.def("row_moves", &row_moves, py::arg("state_row"), py::arg("row_ptr"),
          py::arg("row_delta"),
          "The distinct states each state's shared row leads to: (ptr, next), CSR by state.");
    m.def("walk_bases", &walk_bases, py::arg("first_label"), py::arg("first_weight"),
          py::arg("trans_off"), py::arg("n_classes"), py::arg("walked"),
          "(base, visits) for a trie whose first-level nodes have these byte classes and "
          "subtree sizes: a base state for each state below `walked`, -1 where there is "
          "none: the state most of its first-level subtrees lead to, when that state mostly "
          "leads to itself and the two differ on first bytes below which lie at most half "
          "the nodes the state walks (its walk then covers those subtrees, from both); "
          "visits bounds the nodes all these walks visit.");
    m.def("component_twins", &component_twins, py::arg("first_label"), py::arg("first_weight"),
          py::arg("trans_off"), py::arg("n_classes"), py::arg("accepting"), py::arg("candidate"),
          py::arg("min_live"), py::arg("most_states"),
          "(group, order_ptr, order_states, shared): groups of candidate states whose walks agree "
          "up to the edges out of their strongly connected components (the components read "
          "alike from them, class by class: the same place in breadth-first order, the dead "
          "state, or out; with the same acceptance), among those whose live first-level "
          "subtrees hold at least min_live nodes, in components of at most most_states "
          "states with an edge inside; -1 for none or alone. Each grouped state's component "
          "in breadth-first order from it, CSR; shared: the live first-level subtree nodes "
          "of the grouped states but each group's first (walks that twins save).");
    m.def("refine_entries", &refine_entries, py::arg("state_ptr"), py::arg("entry_class"),
          py::arg("entry_next"), py::arg("coarse_of_fine"), py::arg("next_map"),
          "Each state's entries over finer classes: an entry (c, next) stands for every fine "
          "class f with coarse_of_fine[f] == c, and leads to next_map[next]; each row sorted "
          "by fine class. (state_ptr, entry_class, entry_next).");
    m.def("sink_pairs", &sink_pairs, py::arg("state_ptr"), py::arg("entry_class"),
          py::arg("entry_next"), py::arg("sink"), py::arg("n_classes"),
          "The entries of the states below `sink` that lead to it, and the classes of the "
          "others: (new class id of each class, numbered 1.. over the classes the other "
          "entries use and 0 elsewhere; state and class of each entry into the sink).");
    m.def("classes_below", &classes_below, py::arg("table"), py::arg("rows"),
          py::arg("token_class"), py::arg("n_classes"), py::arg("below"),
          "[len(rows), n_classes] bool: whether some token of the class has a value below "
          "`below` in table[rows[i]] (the classes with a token that starts no repetition).");
    m.def("spelled_starts", &spelled_starts, py::arg("node_byte"), py::arg("node_depth"),
          py::arg("tok_ptr"), py::arg("toks"), py::arg("vocab_size"), py::arg("table"),
          py::arg("boundary"), py::arg("in_loop"), py::arg("places"),
          "Each token of a pre-order trie read from each of `places` on a spelling DFA "
          "`table` until it leaves `in_loop`: ([len(places), vocab_size] int32 repetitions "
          "started (a byte from a `boundary` state into the loop), bool whether it left); 0 "
          "and false for tokens not in the trie.");
    m.def("least_costs", &least_costs, py::arg("accepting"), py::arg("option_owner"),
          py::arg("option_cost"), py::arg("option_ptr"), py::arg("option_states"),
          "The least cost of each state to acceptance (0 in accepting states; -1: none), where "
          "option o of state option_owner[o] costs option_cost[o] plus the costs of the states "
          "option_states[option_ptr[o]:option_ptr[o+1]] (a state may be one several times).");
    m.def("pushdown_walk", &pushdown_walk, py::arg("table"), py::arg("final"),
          py::arg("call_row"), py::arg("call_start"), py::arg("call_ret"),
          py::arg("loop_machine"), py::arg("in_loop"), py::arg("count_min"),
          py::arg("count_max"), py::arg("twin"), py::arg("exit_class"), py::arg("site_ptr"),
          py::arg("site_next"), py::arg("starts"), py::arg("data"), py::arg("lo"),
          py::arg("hi"), py::arg("max_push"),
          "Walk data[lo[i]:hi[i]] from starts[i] with an empty frame through machines linked "
          "by calls, count registers and returns by exit class: (kind, next state (for a "
          "return, the state returned from), bytes read before a return, "
          "number pushed, pushed return states, count). Where a frame the walk opened passes "
          "its count's bounds, a state's twin (0: none) reads the byte instead.");
    m.def("build_nfa", &build_nfa, py::arg("kind"), py::arg("child_ptr"), py::arg("children"),
          py::arg("extra_ptr"), py::arg("extra"), py::arg("automata"), py::arg("root"),
          py::arg("max_states"),
          "The NFA fragment of node `root` of a flat expression program (automaton/nfa.py): "
          "(num_states, eps, edges, tags, num_families, labels, Graph nodes in label order). "
          "More than max_states states raise TooManyStatesError, nesting deeper than the "
          "builder follows RecursionError.");
    m.def("utf8_sequences", &utf8_byte_ranges, py::arg("ranges"),
          "The byte-range sequences matching exactly the UTF-8 encodings of the code point "
          "ranges (sorted, disjoint, surrogate-free).");
    register_nfa_errors(m);
    py::class_<TrieWalk>(m, "TrieWalk",
                         "The walk tables of a class trie over a DFA, checked once.")
        .def(py::init<In<int32_t>, In<int32_t>, py::array, int64_t, In<bool>, int64_t>(),
             py::arg("code"), py::arg("end"), py::arg("trans_off"), py::arg("n_classes"),
             py::arg("accepting"), py::arg("eos_item"));
    py::class_<SplitForest>(m, "SplitForest",
                            "Partition refinement of trie items, state by state, remembering "
                            "every split; each thread refines its own forest.")
        .def(py::init<int64_t, int64_t>(), py::arg("num_items"), py::arg("num_states"))
        .def("refine", &SplitForest::refine, py::arg("walk"), py::arg("states"),
             py::arg("bases"), py::arg("twins") = py::array_t<int32_t>(0),
             py::arg("order_ptr") = py::array_t<int64_t>(0),
             py::arg("order_states") = py::array_t<int32_t>(0),
             "Walk the trie from each of `states` in turn and split item classes by next "
             "state (releases the GIL). A state s with bases[s] >= 0 is walked only where it "
             "differs from that base, which this forest must have walked in full before. "
             "With twins (one per state, -1 for none; each grouped state's component in "
             "order_ptr/order_states, as component_twins gives them), a state s with "
             "twins[s] >= 0 is walked only below the edges out of its component that its "
             "twin met, which this forest must have walked in full before.")
        .def_property_readonly("classes", &SplitForest::classes,
                               "The current class of every item.")
        .def("row_counts", &SplitForest::row_counts, py::arg("canon_of_item"),
             "The number of entries of each state's row under the final classes (0 for the "
             "states this forest did not walk); comes before expand.")
        .def("expand", &SplitForest::expand, py::arg("n_classes"), py::arg("state_ptr"),
             py::arg("entry_class"), py::arg("entry_next"),
             "Write the rows of the states this forest walked, sorted by class, into "
             "entry_class/entry_next[state_ptr[s]:state_ptr[s + 1]] (releases the GIL).");
}
