// The byte-level pushdown walk of tokens through machines linked by calls and count
// registers (grammarc/alignment/calls.py holds its contract).
//
// Counts: leaving the loop state of a counted machine (loop_machine[q] >= 0) into an in-loop
// state starts a repetition, into another state leaves the loop. In a frame the walk opened,
// the count is known: past count_max the walk dies, leaving below count_min too. In the frame
// the walk starts in, the count is not known: the repetitions started there are counted and
// returned for the caller to check (a counted machine calls none, so that frame is only ever
// the top one before the walk leaves it).
//
// Returns: a frame holds a return state, or a site (site_ptr[r] < site_ptr[r + 1]) whose
// state for the exit class of the final state left is returned to (0: the walk dies).
#include <limits>
#include <queue>
#include <utility>

#include "kernels.hpp"

namespace grammarc {

namespace {
constexpr int8_t kDies = 0, kStays = 1, kReturns = 2;
}

py::tuple pushdown_walk(In<int32_t> table, In<bool> final, In<int32_t> call_row,
                        In<int32_t> call_start, In<int32_t> call_ret, In<int32_t> loop_machine,
                        In<bool> in_loop, In<int64_t> count_min, In<int64_t> count_max,
                        In<int32_t> twin, In<int32_t> exit_class, In<int64_t> site_ptr,
                        In<int32_t> site_next, In<int32_t> starts, In<uint8_t> data,
                        In<int64_t> lo, In<int64_t> hi, int64_t max_push) {
    require(table.ndim() == 2 && table.shape(1) == 256, "table is [states, 256]");
    const int64_t n_states = table.shape(0);
    require_in_range(table.data(), n_states * 256, 0, n_states, "table");
    length(final, "final", n_states);
    length(call_row, "call_row", n_states);
    require(call_start.ndim() == 2 && call_start.shape(1) == 256 && call_ret.ndim() == 2 &&
                call_ret.shape(0) == call_start.shape(0) && call_ret.shape(1) == 256,
            "call_start and call_ret are [callers, 256]");
    const int64_t n_rows = call_start.shape(0);
    require_in_range(call_row.data(), n_states, -1, n_rows, "call_row");
    require_in_range(call_start.data(), n_rows * 256, -1, n_states, "call_start");
    require_in_range(call_ret.data(), n_rows * 256, 0, n_states, "call_ret");
    length(loop_machine, "loop_machine", n_states);
    length(in_loop, "in_loop", n_states);
    const int64_t n_machines = length(count_min, "count_min");
    length(count_max, "count_max", n_machines);
    require_in_range(loop_machine.data(), n_states, -1, n_machines, "loop_machine");
    length(twin, "twin", n_states);
    require_in_range(twin.data(), n_states, 0, n_states, "twin");
    length(exit_class, "exit_class", n_states);
    require_in_range(exit_class.data(), n_states, 0, std::numeric_limits<int32_t>::max(),
                     "exit_class");
    const int64_t n_site_next = length(site_next, "site_next");
    require_csr(site_ptr, n_states, n_site_next, "site_ptr");
    require_in_range(site_next.data(), n_site_next, 0, n_states, "site_next");
    const int64_t n = length(starts, "starts");
    require_in_range(starts.data(), n, 0, n_states, "starts");
    const int64_t n_data = length(data, "data");
    length(lo, "lo", n);
    length(hi, "hi", n);
    for (int64_t i = 0; i < n; ++i)
        require(0 <= lo.data()[i] && lo.data()[i] <= hi.data()[i] && hi.data()[i] <= n_data,
                "each walk's span lies within data");
    require(max_push >= 1, "max_push must be positive");

    py::array_t<int8_t> kind(n);
    py::array_t<int32_t> next(n), push_len(n), count(n);
    py::array_t<int64_t> pos(n);
    py::array_t<int32_t> push_buf({n, max_push});
    int8_t* kind_of = kind.mutable_data();
    int32_t* next_of = next.mutable_data();
    int32_t* pushed = push_len.mutable_data();
    int64_t* pos_of = pos.mutable_data();
    int32_t* buf = push_buf.mutable_data();
    int32_t* count_of = count.mutable_data();
    const int32_t* loop_of = loop_machine.data();
    const int32_t* twin_of = twin.data();
    const int32_t *class_of = exit_class.data(), *site_to = site_next.data();
    const int64_t* site_at = site_ptr.data();
    const bool* looping = in_loop.data();
    const int64_t *at_least = count_min.data(), *at_most = count_max.data();
    const int32_t *tr = table.data(), *row_of = call_row.data(), *start_of = call_start.data(),
                  *ret_of = call_ret.data(), *from = starts.data();
    const bool* is_final = final.data();
    const uint8_t* bytes = data.data();
    const int64_t *begin = lo.data(), *stop = hi.data();
    {
        py::gil_scoped_release released;
        std::fill(buf, buf + n * max_push, 0);
        for (int64_t i = 0; i < n; ++i) {
            int32_t* frames = buf + i * max_push;
            int64_t q = from[i], sp = 0;
            int64_t started = 0, reps = 0;  // repetitions in the start frame; in the top one
            int8_t state = kStays;
            pushed[i] = 0;
            pos_of[i] = 0;
            for (int64_t j = begin[i]; j < stop[i] && state == kStays; ++j) {
                const uint8_t b = bytes[j];
                while (true) {
                    const int32_t t = tr[q * 256 + b];
                    if (t != 0) {
                        const int32_t m = loop_of[q];
                        // past the count's bounds in a frame the walk opened, the state's
                        // twin (its union without the counted machine) reads the byte, or
                        // the walk dies
                        bool beyond = false;
                        if (m >= 0 && looping[t]) {  // one more repetition
                            if (sp == 0) {
                                ++started;
                            } else if (++reps > at_most[m] && at_most[m] >= 0) {
                                beyond = true;
                            }
                        } else if (m >= 0 && sp > 0 && reps < at_least[m]) {  // leaves early
                            beyond = true;
                        }
                        if (beyond) {
                            if (twin_of[q] == 0) {
                                state = kDies;
                                break;
                            }
                            q = twin_of[q];
                            reps = 0;
                            continue;
                        }
                        q = t;
                        break;
                    }
                    const int32_t row = row_of[q];
                    if (row >= 0 && start_of[row * 256 + b] >= 0) {  // the byte opens a call
                        if (sp == max_push) {
                            pushed[i] = static_cast<int32_t>(max_push + 1);
                            state = kDies;
                            break;
                        }
                        frames[sp++] = ret_of[row * 256 + b];
                        q = start_of[row * 256 + b];
                        reps = 0;
                        continue;
                    }
                    if (is_final[q]) {  // the machine ends: return
                        if (sp > 0) {  // to the return state, or a site's for q's class
                            const int32_t ret = frames[--sp];
                            const int64_t first = site_at[ret], size = site_at[ret + 1] - first;
                            q = size == 0 ? ret : class_of[q] < size ? site_to[first + class_of[q]]
                                                                    : 0;
                            if (q == 0) {
                                state = kDies;
                                break;
                            }
                            continue;
                        }
                        state = kReturns;
                        pos_of[i] = j - begin[i];
                        break;
                    }
                    state = kDies;
                    break;
                }
            }
            kind_of[i] = state;
            count_of[i] = static_cast<int32_t>(sp == 0 ? started : (looping[q] ? reps : 0));
            next_of[i] = state == kDies ? 0 : static_cast<int32_t>(q);  // returns: from q
            if (state == kStays) pushed[i] = static_cast<int32_t>(sp);
        }
    }
    return py::make_tuple(kind, next, pos, push_len, push_buf, count);
}

py::array_t<int64_t> least_costs(In<bool> accepting, In<int32_t> option_owner,
                                 In<int64_t> option_cost, In<int64_t> option_ptr,
                                 In<int32_t> option_states) {
    // Knuth's generalisation of Dijkstra's algorithm to options that cost a constant plus
    // the costs of several states: an option costs at least each of its states, so the
    // states are settled in increasing cost, and an option counts once all of its states
    // are settled.
    const int64_t n = length(accepting, "accepting");
    const int64_t n_options = length(option_owner, "option_owner");
    length(option_cost, "option_cost", n_options);
    const int64_t n_members = length(option_states, "option_states");
    require_csr(option_ptr, n_options, n_members, "option_ptr");
    require_in_range(option_owner.data(), n_options, 0, n, "option_owner");
    require_in_range(option_states.data(), n_members, 0, n, "option_states");
    const int64_t *ptr = option_ptr.data(), *constant = option_cost.data();
    const int32_t *owner = option_owner.data(), *member = option_states.data();
    for (int64_t o = 0; o < n_options; ++o) require(constant[o] >= 0, "option costs are >= 0");
    const bool* acc = accepting.data();
    constexpr int64_t kUnknown = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> cost(n, kUnknown);
    {
        py::gil_scoped_release released;
        std::vector<int64_t> use_ptr(n + 1, 0);  // the options each state is a member of
        for (int64_t e = 0; e < n_members; ++e) use_ptr[member[e] + 1] += 1;
        for (int64_t v = 0; v < n; ++v) use_ptr[v + 1] += use_ptr[v];
        std::vector<int64_t> fill(use_ptr.begin(), use_ptr.end() - 1), waiting(n_options),
            total(constant, constant + n_options);
        std::vector<int32_t> use(n_members);
        for (int64_t o = 0; o < n_options; ++o) {
            waiting[o] = ptr[o + 1] - ptr[o];
            for (int64_t e = ptr[o]; e < ptr[o + 1]; ++e)
                use[fill[member[e]]++] = static_cast<int32_t>(o);
        }
        using Entry = std::pair<int64_t, int32_t>;
        std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
        auto offer = [&](int64_t state, int64_t value) {
            if (value < cost[state]) {
                cost[state] = value;
                heap.emplace(value, static_cast<int32_t>(state));
            }
        };
        for (int64_t s = 0; s < n; ++s)
            if (acc[s]) offer(s, 0);
        for (int64_t o = 0; o < n_options; ++o)
            if (waiting[o] == 0) offer(owner[o], total[o]);
        std::vector<uint8_t> settled(n, 0);
        while (!heap.empty()) {
            const auto [value, s] = heap.top();
            heap.pop();
            if (settled[s] || value != cost[s]) continue;
            settled[s] = 1;
            for (int64_t u = use_ptr[s]; u < use_ptr[s + 1]; ++u) {
                const int32_t o = use[u];
                total[o] += value;
                if (--waiting[o] == 0 && !settled[owner[o]]) offer(owner[o], total[o]);
            }
        }
    }
    for (auto& value : cost)
        if (value == kUnknown) value = -1;
    return to_numpy(cost);
}

py::array_t<bool> classes_below(In<uint16_t> table, In<int32_t> rows, In<int32_t> token_class,
                                int64_t n_classes, int64_t below) {
    require(table.ndim() == 2, "table is [rows, tokens]");
    const int64_t n_rows = table.shape(0), n_tokens = table.shape(1);
    const int64_t k = length(rows, "rows");
    length(token_class, "token_class", n_tokens);
    require(n_classes >= 1, "n_classes must be positive");
    require_in_range(rows.data(), k, 0, n_rows, "rows");
    require_in_range(token_class.data(), n_tokens, 0, n_classes, "token_class");
    py::array_t<bool> out_array({k, n_classes});
    bool* out = out_array.mutable_data();
    const uint16_t* values = table.data();
    const int32_t* klass = token_class.data();
    const int32_t* row = rows.data();
    {
        py::gil_scoped_release released;
        std::fill(out, out + k * n_classes, false);
        for (int64_t i = 0; i < k; ++i) {
            const uint16_t* value = values + row[i] * n_tokens;
            bool* found = out + i * n_classes;
            for (int64_t t = 0; t < n_tokens; ++t)
                if (value[t] < below) found[klass[t]] = true;
        }
    }
    return out_array;
}

py::tuple spelled_starts(In<uint8_t> node_byte, In<int32_t> node_depth, In<int64_t> tok_ptr,
                         In<int32_t> toks, int64_t vocab_size, In<int32_t> table,
                         In<bool> boundary, In<bool> in_loop, In<int32_t> places) {
    const int64_t n_nodes = length(node_byte, "node_byte");
    require_trie_depths(node_depth, n_nodes);
    const int64_t n_toks = length(toks, "toks");
    length(tok_ptr, "tok_ptr", n_nodes + 1);
    require_csr(tok_ptr, n_nodes, n_toks, "tok_ptr");
    require(vocab_size >= 0, "vocab_size is not negative");
    require_in_range(toks.data(), n_toks, 0, vocab_size, "toks");
    require(table.ndim() == 2 && table.shape(1) == 256, "table is [states, 256]");
    const int64_t n_states = table.shape(0);
    require_in_range(table.data(), n_states * 256, 0, n_states, "table");
    length(boundary, "boundary", n_states);
    length(in_loop, "in_loop", n_states);
    const int64_t k = length(places, "places");
    require_in_range(places.data(), k, 0, n_states, "places");
    const int32_t* depth_of = node_depth.data();
    py::array_t<int32_t> count_array({k, vocab_size});
    py::array_t<bool> left_array({k, vocab_size});
    int32_t* count_out = count_array.mutable_data();
    bool* left_out = left_array.mutable_data();
    const uint8_t* byte_of = node_byte.data();
    const int64_t* ptr = tok_ptr.data();
    const int32_t* tok = toks.data();
    const int32_t* next = table.data();
    const bool* at_boundary = boundary.data();
    const bool* inside = in_loop.data();
    {
        py::gil_scoped_release released;
        std::fill(count_out, count_out + k * vocab_size, 0);
        std::fill(left_out, left_out + k * vocab_size, false);
        const int64_t max_depth = *std::max_element(depth_of, depth_of + n_nodes);
        // per depth on the current branch: the state, repetitions started, whether it left
        std::vector<int32_t> state(max_depth + 1), count(max_depth + 1);
        std::vector<char> gone(max_depth + 1);
        for (int64_t p = 0; p < k; ++p) {
            int32_t* counts = count_out + p * vocab_size;
            bool* lefts = left_out + p * vocab_size;
            state[0] = places.data()[p];
            count[0] = 0;
            gone[0] = 0;
            for (int64_t i = 1; i < n_nodes; ++i) {
                const int32_t d = depth_of[i];
                const int32_t q = state[d - 1];
                if (gone[d - 1]) {
                    state[d] = q;
                    count[d] = count[d - 1];
                    gone[d] = 1;
                } else {
                    const int32_t to = next[int64_t{q} * 256 + byte_of[i]];
                    count[d] = count[d - 1] + (at_boundary[q] && inside[to] ? 1 : 0);
                    gone[d] = !inside[to];
                    state[d] = to;
                }
                for (int64_t j = ptr[i]; j < ptr[i + 1]; ++j) {
                    counts[tok[j]] = count[d];
                    lefts[tok[j]] = gone[d] != 0;
                }
            }
        }
    }
    return py::make_tuple(count_array, left_array);
}

}  // namespace grammarc
