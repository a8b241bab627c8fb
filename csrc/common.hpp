// Shared helpers of grammarc's compiled core: numpy arguments in, numpy arrays out, and the
// argument checks that turn a malformed input into a Python ValueError instead of a crash.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>
#ifdef __linux__
#include <sys/mman.h>
#endif

namespace py = pybind11;

namespace grammarc {

// A read-only numpy argument, converted to a C-contiguous array of T when it is not one.
template <class T>
using In = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Raised as ValueError on the Python side.
[[noreturn]] inline void fail(const std::string& message) { throw std::invalid_argument(message); }

inline void require(bool condition, const char* message) {
    if (!condition) fail(message);
}

// Number of elements of a 1-D argument, checked to be `expected` when that is not -1.
template <class T>
int64_t length(const In<T>& array, const char* name, int64_t expected = -1) {
    if (array.ndim() != 1) fail(std::string(name) + " must be one-dimensional");
    const int64_t n = array.shape(0);
    if (expected >= 0 && n != expected)
        fail(std::string(name) + " has " + std::to_string(n) + " entries, expected " +
             std::to_string(expected));
    return n;
}

// Every value of `data[0:n]` lies in [lo, hi).
template <class T>
void require_in_range(const T* data, int64_t n, int64_t lo, int64_t hi, const char* name) {
    if (n == 0) return;
    T least = data[0], most = data[0];  // a branch-free pass first (vectorised)
    for (int64_t i = 1; i < n; ++i) {
        least = std::min(least, data[i]);
        most = std::max(most, data[i]);
    }
    if (static_cast<int64_t>(least) >= lo && static_cast<int64_t>(most) < hi) return;
    for (int64_t i = 0; i < n; ++i)
        if (static_cast<int64_t>(data[i]) < lo || static_cast<int64_t>(data[i]) >= hi)
            fail(std::string(name) + " holds " + std::to_string(static_cast<int64_t>(data[i])) +
                 " at index " + std::to_string(i) + ", outside [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + ")");
}

// `ptr` (n + 1 entries) is a CSR offset array into `size` entries: starts at 0, never
// decreases, ends at `size`.
inline void require_csr(const In<int64_t>& ptr, int64_t n, int64_t size, const char* name) {
    length(ptr, name, n + 1);
    const int64_t* p = ptr.data();
    if (p[0] != 0 || p[n] != size) fail(std::string(name) + " does not span its entries");
    for (int64_t i = 0; i < n; ++i)
        if (p[i + 1] < p[i]) fail(std::string(name) + " decreases at index " + std::to_string(i));
}

// `node_depth` (n >= 1 entries) is the depth sequence of a pre-order trie: the root at depth
// 0 first, then each node at most one deeper than the one before it, never at the root's.
inline void require_trie_depths(const In<int32_t>& node_depth, int64_t n) {
    length(node_depth, "node_depth", n);
    if (n < 1) fail("a trie has its root");
    const int32_t* depth_of = node_depth.data();
    if (depth_of[0] != 0) fail("the root has depth 0");
    for (int64_t i = 1; i < n; ++i)
        if (depth_of[i] < 1 || depth_of[i] > depth_of[i - 1] + 1)
            fail("node_depth is not the depth sequence of a pre-order trie");
}

// The number of rows of CSR offsets `ptr` over `size` entries, checked as `require_csr` does.
inline int64_t csr_rows(const In<int64_t>& ptr, int64_t size, const char* name) {
    const int64_t n = length(ptr, name) - 1;
    if (n < 0) fail(std::string(name) + " has no entry");
    require_csr(ptr, n, size, name);
    return n;
}

// A 1-D numpy array holding a copy of `values[0:count]`.
template <class T>
py::array_t<T> to_numpy(const T* values, int64_t count) {
    py::array_t<T> out(count);
    if (count > 0) std::memcpy(out.mutable_data(), values, count * sizeof(T));
    return out;
}

// A 1-D numpy array holding a copy of `values[0:n]` (all of them when n is -1).
template <class T>
py::array_t<T> to_numpy(const std::vector<T>& values, int64_t n = -1) {
    return to_numpy(values.data(), n < 0 ? static_cast<int64_t>(values.size()) : n);
}

// A 1-D numpy array of `values` that takes over the vector's buffer instead of copying it:
// for results of hundreds of megabytes, the copy and the page faults of a second buffer cost
// as much as the work. Capacity past the size that was never written costs address space
// only.
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& values) {
    auto* owned = new std::vector<T>(std::move(values));
    py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>(static_cast<py::ssize_t>(owned->size()), owned->data(), owner);
}

// An uninitialised buffer for up to n values of a result of hundreds of megabytes, handed to
// numpy without a copy (`release`, with the GIL held; the pages past what was written are
// never touched). On Linux a large one is aligned to 2 MiB and asked for huge pages: its
// writing then takes a page fault per 2 MiB instead of per 4 KiB.
template <class T>
class OutBuffer {
   public:
    explicit OutBuffer(int64_t n) {
        if (n < 0) throw std::bad_alloc();
        size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T);
#ifdef __linux__
        if (bytes >= kHugePage) {
            bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
            data_ = static_cast<T*>(std::aligned_alloc(kHugePage, bytes));
            if (data_ != nullptr) madvise(data_, bytes, MADV_HUGEPAGE);
        } else
#endif
            data_ = static_cast<T*>(std::malloc(bytes));
        if (data_ == nullptr) throw std::bad_alloc();
    }
    ~OutBuffer() { std::free(data_); }
    OutBuffer(const OutBuffer&) = delete;
    OutBuffer& operator=(const OutBuffer&) = delete;
    T* data() { return data_; }
    // A numpy array of the first n values that owns the buffer from now on.
    py::array_t<T> release(int64_t n) {
        T* owned = data_;
        py::capsule owner(owned, [](void* p) { std::free(p); });
        data_ = nullptr;
        return py::array_t<T>(static_cast<py::ssize_t>(n), owned, owner);
    }

   private:
    static constexpr size_t kHugePage = size_t{2} << 20;
    T* data_ = nullptr;
};

// A fixed-size array of zeros from calloc: pages never written cost nothing, which matters
// for arrays as long as a vocabulary's trie of which a narrow grammar touches a few entries.
template <class T>
class ZeroedArray {
   public:
    explicit ZeroedArray(int64_t n)
        : data_(static_cast<T*>(std::calloc(static_cast<size_t>(std::max<int64_t>(n, 1)), sizeof(T)))),
          size_(n) {
        if (n < 0 || data_ == nullptr) throw std::bad_alloc();
    }
    ~ZeroedArray() { std::free(data_); }
    ZeroedArray(const ZeroedArray&) = delete;
    ZeroedArray& operator=(const ZeroedArray&) = delete;
    T& operator[](int64_t i) { return data_[i]; }
    const T& operator[](int64_t i) const { return data_[i]; }
    const T* data() const { return data_; }
    int64_t size() const { return size_; }

   private:
    T* data_;
    int64_t size_;
};

// A 2-D numpy array holding a copy of the first `rows` rows of row-major `values`.
template <class T>
py::array_t<T> to_numpy_2d(const std::vector<T>& values, int64_t rows, int64_t cols) {
    py::array_t<T> out({rows, cols});
    if (rows * cols > 0) std::memcpy(out.mutable_data(), values.data(), rows * cols * sizeof(T));
    return out;
}

// A numpy bool array from bytes that are 0 or 1.
inline py::array_t<bool> bool_numpy(const std::vector<uint8_t>& values, int64_t n) {
    py::array_t<bool> out(n);
    if (n > 0) std::memcpy(out.mutable_data(), values.data(), n);
    return out;
}

// FNV-1a step with an extra shift, the hash of the kernels' open-addressing tables.
inline uint64_t hash_step(uint64_t h, uint64_t value, int shift) {
    h = (h ^ value) * 1099511628211ULL;
    return h ^ (h >> shift);
}
constexpr uint64_t kHashSeed = 1469598103934665603ULL;

// Multiplicative hash of a non-negative key into a power-of-two table.
inline uint64_t slot_of(uint64_t key, uint64_t mask) { return (key * 2654435761ULL) & mask; }

// The open-addressing tables of the kernels: mask + 1 slots (a power of two), linear probing,
// always a free slot left. Each keeps its entries its own way; `is_free(slot)` and
// `holds(slot)` (the slot holds the key sought) say how.

// Find: from `slot`, the first slot that is free or holds the key.
template <class IsFree, class Holds>
inline uint64_t probe(uint64_t slot, uint64_t mask, IsFree is_free, Holds holds) {
    while (!is_free(slot) && !holds(slot)) slot = (slot + 1) & mask;
    return slot;
}

// The first free slot from `slot`, for re-inserting entries known to be distinct.
template <class IsFree>
inline uint64_t free_slot(uint64_t slot, uint64_t mask, IsFree is_free) {
    return probe(slot, mask, is_free, [](uint64_t) { return false; });
}

// Find-or-insert: the slot that holds the key, or the free one where `insert(slot)` has just
// put it (`inserted`).
struct Probed {
    uint64_t slot;
    bool inserted;
};
template <class IsFree, class Holds, class Insert>
inline Probed find_or_insert(uint64_t slot, uint64_t mask, IsFree is_free, Holds holds,
                             Insert insert) {
    slot = probe(slot, mask, is_free, holds);
    if (!is_free(slot)) return {slot, false};
    insert(slot);
    return {slot, true};
}

// Fewest edges from each state to an accepting one (-1: none), by a breadth-first search
// backwards from the accepting states over the edges into each state: those into t come
// from src[in_ptr[t] : in_ptr[t + 1]]. State 0, the dead state, is never a seed.
template <class Accepting>
std::vector<int32_t> distances_over(int64_t n, const Accepting* accepting, const int64_t* in_ptr,
                                    const int32_t* src) {
    std::vector<int32_t> dist(n, -1), queue;
    queue.reserve(n);
    for (int64_t s = 1; s < n; ++s)
        if (accepting[s]) {
            dist[s] = 0;
            queue.push_back(static_cast<int32_t>(s));
        }
    for (size_t head = 0; head < queue.size(); ++head) {
        const int32_t t = queue[head];
        for (int64_t e = in_ptr[t]; e < in_ptr[t + 1]; ++e)
            if (dist[src[e]] == -1) {
                dist[src[e]] = dist[t] + 1;
                queue.push_back(src[e]);
            }
    }
    return dist;
}

// `distances_over` the edges that `each_edge(visit)` gives, calling `visit(source, target)`
// for every edge, the same ones each time.
template <class Accepting, class EachEdge>
std::vector<int32_t> distances_to_accepting(int64_t n, const Accepting* accepting,
                                            EachEdge&& each_edge) {
    std::vector<int64_t> in_ptr(n + 1, 0);
    each_edge([&](int64_t, int64_t t) { in_ptr[t + 1] += 1; });
    for (int64_t v = 0; v < n; ++v) in_ptr[v + 1] += in_ptr[v];
    std::vector<int64_t> fill(in_ptr.begin(), in_ptr.end() - 1);
    std::vector<int32_t> src(in_ptr[n]);
    each_edge([&](int64_t s, int64_t t) { src[fill[t]++] = static_cast<int32_t>(s); });
    return distances_over(n, accepting, in_ptr.data(), src.data());
}

// CSR grouping of indices first..n-1 by owner[i] (groups 0..n_groups-1): group g holds
// members[ptr[g]:ptr[g+1]], in increasing order.
template <class Owner>
void group_by_owner(const Owner* owner, int64_t n, int64_t first, int64_t n_groups,
                    std::vector<int64_t>& ptr, std::vector<int32_t>& members) {
    ptr.assign(n_groups + 1, 0);
    for (int64_t i = first; i < n; ++i) ptr[owner[i] + 1] += 1;
    for (int64_t g = 0; g < n_groups; ++g) ptr[g + 1] += ptr[g];
    std::vector<int64_t> fill(ptr.begin(), ptr.end() - 1);
    members.assign(n > first ? n - first : 0, 0);
    for (int64_t i = first; i < n; ++i) members[fill[owner[i]]++] = static_cast<int32_t>(i);
}

}  // namespace grammarc
