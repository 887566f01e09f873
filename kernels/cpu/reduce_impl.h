// Internal: the reduce family (docs/DETERMINISM.md 4.1, 4.3), written once and compiled twice:
// by reduce.cc (portable) and reduce_avx2.cc (-mavx2 -mfma). Everything is in an anonymous
// namespace so the two copies never merge at link time. Calls arrive validated by
// RunReduce in reduce.cc.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/checks/common.h"
#include "kernels/checks/reduce.h"
#include "kernels/cpu/canonical_sum.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/detmath64.h"

namespace consensor::kernels::cpu {

// reduce_avx2.cc: the same kernels compiled for AVX2 + FMA.
Status RunReduceAvx2(const KernelCall& call, const CpuContext& ctx);
// reduce_avx2.cc (call only when CpuHasAvx2Fma()): out[r] = the wrapping i32 sum of the i8
// values x[r * len, (r + 1) * len) (OpParams::sum_widens_i8), for r < rows.
void WideningI8RowSumsAvx2(const int8_t* x, int64_t rows, int64_t len, int32_t* out);

namespace {

// Offsets of the row-major enumeration of the groups g[0..ng).
inline std::vector<int64_t> EnumerateOffsets(const ReduceGroups& g, int ng) {
  int64_t total = 1;
  for (int k = 0; k < ng; ++k) total *= g.size[k];
  std::vector<int64_t> out(static_cast<size_t>(total));
  int64_t idx[kMaxRank] = {};
  int64_t off = 0;
  for (int64_t t = 0; t < total; ++t) {
    out[t] = off;
    for (int k = ng - 1; k >= 0; --k) {
      off += g.stride[k];
      if (++idx[k] < g.size[k]) break;
      off -= g.stride[k] * g.size[k];
      idx[k] = 0;
    }
  }
  return out;
}

inline int64_t GrainFor(int64_t work_per_item) {
  const int64_t target = kMinChunkWork / 4;  // f32 elements of 4 bytes (thread_pool.h)
  return std::max<int64_t>(1, target / std::max<int64_t>(1, work_per_item));
}

// ---------------------------------------------------------------------------------------
// f32 sum in the canonical order.

// out[o] = csum(x[o*len .. o*len+len)), len >= 1. Chunk trees of long rows run in parallel.
inline void SumRows(const float* x, int64_t rows, int64_t len, float* out, ThreadPool* pool) {
  if (len <= kSumChunk) {
    pool->ParallelFor(rows, GrainFor(len), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) out[o] = LaneTreeChunk(x + o * len, len);
    });
    return;
  }
  const int64_t m = (len + kSumChunk - 1) / kSumChunk;
  std::vector<float> partial(static_cast<size_t>(rows * m));
  pool->ParallelFor(rows * m, GrainFor(kSumChunk), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / m, c = t % m;
      const int64_t begin = c * kSumChunk;
      partial[t] = LaneTreeChunk(x + o * len + begin, std::min(kSumChunk, len - begin));
    }
  });
  SumRows(partial.data(), rows, m, out, pool);
}

// Columns: for p < n_outer and c < C, out[p*C + c] = csum over r < n of
// base[ooff(p) + toff(r) + c], with ooff(p) = outer_off ? outer_off[p] : p * outer_stride and
// toff(r) = term_off ? term_off[r] : r * term_stride. n >= 1.
constexpr int64_t kColWork = 256;

inline void SumCols(const float* base, const int64_t* outer_off, int64_t outer_stride, int64_t n_outer,
                    const int64_t* term_off, int64_t term_stride, int64_t n, int64_t C, float* out, ThreadPool* pool) {
  const int64_t nb = (C + kColWork - 1) / kColWork;
  auto ooff = [&](int64_t p) { return outer_off ? outer_off[p] : p * outer_stride; };
  if (n <= kSumChunk) {
    pool->ParallelFor(n_outer * nb, GrainFor(n * std::min(C, kColWork)), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t p = t / nb, c0 = (t % nb) * kColWork;
        LaneTreeColumns(base + ooff(p) + c0, term_off, term_stride, n, std::min(kColWork, C - c0), out + p * C + c0);
      }
    });
    return;
  }
  const int64_t m = (n + kSumChunk - 1) / kSumChunk;
  std::vector<float> partial(static_cast<size_t>(n_outer * m * C));
  pool->ParallelFor(n_outer * m * nb, GrainFor(kSumChunk * std::min(C, kColWork)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / (m * nb), c = (t / nb) % m, c0 = (t % nb) * kColWork;
      const int64_t begin = c * kSumChunk, len = std::min(kSumChunk, n - begin);
      float* dst = partial.data() + (p * m + c) * C + c0;
      if (term_off) {
        LaneTreeColumns(base + ooff(p) + c0, term_off + begin, 0, len, std::min(kColWork, C - c0), dst);
      } else {
        LaneTreeColumns(base + ooff(p) + c0 + begin * term_stride, nullptr, term_stride, len,
                        std::min(kColWork, C - c0), dst);
      }
    }
  });
  SumCols(partial.data(), nullptr, m * C, n_outer, nullptr, C, m, C, out, pool);
}

// out[o] = csum over the reduced terms of output o (n_out >= 1, n_terms >= 1).
inline void SumF32(const float* x, const ReduceLayout& L, float* out, ThreadPool* pool) {
  if (L.red.n == 0) {  // one term per output: -0 + x == x
    std::memcpy(out, x, static_cast<size_t>(L.n_out) * sizeof(float));
    return;
  }
  if (L.inner_reduced && L.red.n == 1) {  // every kept dim is outside: contiguous rows
    SumRows(x, L.n_out, L.n_terms, out, pool);
    return;
  }
  if (!L.inner_reduced) {  // vectorize across the innermost kept group
    const int64_t C = L.kept.size[L.kept.n - 1];
    std::vector<int64_t> outer_off = EnumerateOffsets(L.kept, L.kept.n - 1);
    std::vector<int64_t> term_off;
    int64_t term_stride = 0;
    if (L.red.n == 1) {
      term_stride = L.red.stride[0];
    } else {
      term_off = EnumerateOffsets(L.red, L.red.n);
    }
    SumCols(x, outer_off.data(), 0, static_cast<int64_t>(outer_off.size()),
            term_off.empty() ? nullptr : term_off.data(), term_stride, L.n_terms, C, out, pool);
    return;
  }
  // Innermost reduced, several reduced groups (e.g. axes {0, 2} of a rank-3 tensor): gather
  // each output's terms in row-major order, then sum them contiguously.
  const int64_t run = L.red.size[L.red.n - 1];
  const std::vector<int64_t> run_off = EnumerateOffsets(L.red, L.red.n - 1);
  const std::vector<int64_t> out_off = EnumerateOffsets(L.kept, L.kept.n);
  pool->ParallelFor(L.n_out, GrainFor(L.n_terms), [&](int64_t b, int64_t e) {
    std::vector<float> buf(static_cast<size_t>(L.n_terms));
    for (int64_t o = b; o < e; ++o) {
      const float* src = x + out_off[o];
      for (size_t q = 0; q < run_off.size(); ++q)
        std::memcpy(buf.data() + q * run, src + run_off[q], static_cast<size_t>(run) * sizeof(float));
      out[o] = CsumContiguous(buf.data(), L.n_terms);
    }
  });
}

// ---------------------------------------------------------------------------------------
// f64 sum: the canonical order of section 4.1 in binary64 (64 lanes from -0, chunks of
// 4096, chunk results summed recursively). Portable scalar code; each output gathers its
// terms in row-major order of the reduced axes, and only the outputs run in parallel.

inline double CanonNaN(double v) { return detmath::canonicalize_nan64(v); }

inline double Csum64(const double* x, int64_t n) {
  if (n == 0) return 0.0;
  if (n > kSumChunk) {
    const int64_t m = (n + kSumChunk - 1) / kSumChunk;
    std::vector<double> partial(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) partial[c] = Csum64(x + c * kSumChunk, std::min(kSumChunk, n - c * kSumChunk));
    return Csum64(partial.data(), m);
  }
  double lane[64];
  for (double& l : lane) l = -0.0;
  for (int64_t i = 0; i < n; ++i) lane[i % 64] = lane[i % 64] + x[i];
  for (int s = 32; s >= 1; s /= 2)
    for (int j = 0; j < s; ++j) lane[j] = lane[j] + lane[j + s];
  return lane[0];
}

inline void SumF64(const double* x, const ReduceLayout& L, double* out, ThreadPool* pool) {
  const std::vector<int64_t> out_off = EnumerateOffsets(L.kept, L.kept.n);
  const std::vector<int64_t> term_off = EnumerateOffsets(L.red, L.red.n);
  pool->ParallelFor(L.n_out, GrainFor(L.n_terms), [&](int64_t b, int64_t e) {
    std::vector<double> buf(static_cast<size_t>(L.n_terms));
    for (int64_t o = b; o < e; ++o) {
      for (size_t q = 0; q < term_off.size(); ++q) buf[q] = x[out_off[o] + term_off[q]];
      out[o] = Csum64(buf.data(), L.n_terms);
    }
  });
}

// ---------------------------------------------------------------------------------------
// Order-free reductions (integer sum with wrap-around, max, min): combine is associative
// and commutative, so any order gives the same bits.

template <typename T>
struct IntSumOp {
  using In = T;
  using Out = T;
  using A = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static A Init() { return 0; }
  static A Load(T v) { return static_cast<A>(v); }  // modular conversion
  static A Combine(A a, A b) { return a + b; }
  static T Finish(A a) { return static_cast<T>(a); }  // keeps the low bits (wrap)
  static T Empty() { return 0; }
};

// The sum of i8 values widened to i32 (OpParams::sum_widens_i8): the same wrapping sum as
// IntSumOp<int32_t> over the cast values.
struct WideningI8SumOp {
  using In = int8_t;
  using Out = int32_t;
  using A = uint32_t;
  static A Init() { return 0; }
  static A Load(int8_t v) { return static_cast<A>(static_cast<int32_t>(v)); }
  static A Combine(A a, A b) { return a + b; }
  static int32_t Finish(A a) { return static_cast<int32_t>(a); }
  static int32_t Empty() { return 0; }
};

template <typename T, bool kMax>
struct IntMaxMinOp {
  using In = T;
  using Out = T;
  using A = T;
  static A Init() { return kMax ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max(); }
  static A Load(T v) { return v; }
  static A Combine(A a, A b) { return kMax ? (a > b ? a : b) : (a < b ? a : b); }
  static T Finish(A a) { return a; }
  static T Empty() { return Init(); }
};

// f32 max/min of section 1.1 on integer keys: a non-NaN float maps to a signed int that
// orders like the float with -0 < +0 (so max(-0, +0) = +0 and min(-0, +0) = -0); any NaN
// maps to the absorbing key (INT32_MAX for max, INT32_MIN for min), and the result is NaN.
inline int32_t F32OrderKey(uint32_t b) {
  return static_cast<int32_t>(b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) & 0x7FFFFFFFu));
}

template <bool kMax>
struct F32MaxMinOp {
  using In = float;
  using Out = float;
  using A = int32_t;
  static constexpr int32_t kNaNKey = kMax ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
  static A Init() { return kMax ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max(); }
  static A Load(float v) {
    const uint32_t b = std::bit_cast<uint32_t>(v);
    const bool nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
    return nan ? kNaNKey : F32OrderKey(b);
  }
  static A Combine(A a, A b) { return kMax ? (a > b ? a : b) : (a < b ? a : b); }
  static float Finish(A a) {
    if (a == kNaNKey) return CanonicalNaNValue();
    return std::bit_cast<float>(static_cast<uint32_t>(F32OrderKey(static_cast<uint32_t>(a))));
  }
  static float Empty() {
    return kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
};

// The f64 twin of F32MaxMinOp (section 1.1 on binary64).
inline int64_t F64OrderKey(uint64_t b) {
  return static_cast<int64_t>(b ^ (static_cast<uint64_t>(static_cast<int64_t>(b) >> 63) & 0x7FFFFFFFFFFFFFFFull));
}

template <bool kMax>
struct F64MaxMinOp {
  using In = double;
  using Out = double;
  using A = int64_t;
  static constexpr int64_t kNaNKey = kMax ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  static A Init() { return kMax ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(); }
  static A Load(double v) {
    const uint64_t b = std::bit_cast<uint64_t>(v);
    const bool nan = (b & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
    return nan ? kNaNKey : F64OrderKey(b);
  }
  static A Combine(A a, A b) { return kMax ? (a > b ? a : b) : (a < b ? a : b); }
  static double Finish(A a) {
    if (a == kNaNKey) return detmath::canonical_nan64();
    return std::bit_cast<double>(static_cast<uint64_t>(F64OrderKey(static_cast<uint64_t>(a))));
  }
  static double Empty() {
    return kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
};

// Combine of a contiguous run into acc, with independent accumulators so it vectorizes.
template <class Op>
inline typename Op::A CombineRun(const typename Op::In* x, int64_t n, typename Op::A acc) {
  using A = typename Op::A;
  constexpr int kAcc = 16;
  A a[kAcc];
  for (int j = 0; j < kAcc; ++j) a[j] = Op::Init();
  int64_t i = 0;
  for (; i + kAcc <= n; i += kAcc)
    for (int j = 0; j < kAcc; ++j) a[j] = Op::Combine(a[j], Op::Load(x[i + j]));
  for (; i < n; ++i) a[0] = Op::Combine(a[0], Op::Load(x[i]));
  for (int j = 0; j < kAcc; ++j) acc = Op::Combine(acc, a[j]);
  return acc;
}

template <class Op>
void ReduceOrderFree(const typename Op::In* x, const ReduceLayout& L, typename Op::Out* out, ThreadPool* pool) {
  using A = typename Op::A;
  if (L.red.n == 0) {
    for (int64_t o = 0; o < L.n_out; ++o) out[o] = Op::Finish(Op::Load(x[o]));
    return;
  }
  if (L.inner_reduced) {
    const int64_t run = L.red.size[L.red.n - 1];
    const std::vector<int64_t> run_off = EnumerateOffsets(L.red, L.red.n - 1);
    const std::vector<int64_t> out_off = EnumerateOffsets(L.kept, L.kept.n);
    pool->ParallelFor(L.n_out, GrainFor(L.n_terms), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        A acc = Op::Init();
        for (int64_t q : run_off) acc = CombineRun<Op>(x + out_off[o] + q, run, acc);
        out[o] = Op::Finish(acc);
      }
    });
    return;
  }
  const int64_t C = L.kept.size[L.kept.n - 1];
  const std::vector<int64_t> outer_off = EnumerateOffsets(L.kept, L.kept.n - 1);
  const std::vector<int64_t> term_off = EnumerateOffsets(L.red, L.red.n);
  const int64_t nb = (C + kColWork - 1) / kColWork;
  const int64_t n_outer = static_cast<int64_t>(outer_off.size());
  pool->ParallelFor(n_outer * nb, GrainFor(L.n_terms * std::min(C, kColWork)), [&](int64_t b, int64_t e) {
    A acc[kColWork];
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / nb, c0 = (t % nb) * kColWork, bw = std::min(kColWork, C - c0);
      const typename Op::In* base = x + outer_off[p] + c0;
      for (int64_t c = 0; c < bw; ++c) acc[c] = Op::Init();
      for (int64_t r : term_off) {
        const typename Op::In* row = base + r;
        for (int64_t c = 0; c < bw; ++c) acc[c] = Op::Combine(acc[c], Op::Load(row[c]));
      }
      for (int64_t c = 0; c < bw; ++c) out[p * C + c0 + c] = Op::Finish(acc[c]);
    }
  });
}

// ---------------------------------------------------------------------------------------
// ReduceProd: p = 1; p = p * term, one rounding per step, in the row-major order of the
// reduced axes (DETERMINISM.md 4.3). The chain is sequential, so only the outputs run in
// parallel; integers wrap (exact in any order, but they share the loop).

template <typename T>
inline T ProdStep(T acc, T term) {
  if constexpr (std::is_floating_point_v<T>) {
    return acc * term;
  } else {
    // At least 32 bits: 16-bit operands would promote to int, where 65535 * 65535 overflows.
    using U = std::make_unsigned_t<T>;
    using W = std::conditional_t<(sizeof(T) < 4), uint32_t, U>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(acc)) * static_cast<W>(static_cast<U>(term))));
  }
}

template <typename T>
void ProdImpl(const T* x, const ReduceLayout& L, T* out, ThreadPool* pool) {
  const std::vector<int64_t> out_off = EnumerateOffsets(L.kept, L.kept.n);
  pool->ParallelFor(L.n_out, GrainFor(L.n_terms), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* base = x + out_off[o];
      T acc = static_cast<T>(1);
      int64_t idx[kMaxRank] = {};
      int64_t off = 0;
      for (int64_t t = 0; t < L.n_terms; ++t) {
        acc = ProdStep(acc, base[off]);
        for (int k = L.red.n - 1; k >= 0; --k) {  // next term, row-major
          off += L.red.stride[k];
          if (++idx[k] < L.red.size[k]) break;
          off -= L.red.stride[k] * L.red.size[k];
          idx[k] = 0;
        }
      }
      if constexpr (std::is_floating_point_v<T>) acc = CanonNaN(acc);
      out[o] = acc;
    }
  });
}

template <typename T>
Status RunProd(const TensorView& x, const ReduceLayout* L, TensorView& y, ThreadPool* pool) {
  T* out = y.as<T>();
  if (L == nullptr) {  // empty reduction: the multiplicative identity
    std::fill(out, out + y.num_elements(), static_cast<T>(1));
    return OkStatus();
  }
  ProdImpl<T>(x.as<const T>(), *L, out, pool);
  return OkStatus();
}

// ---------------------------------------------------------------------------------------
// ArgMax: index of the first maximal element; NaN is larger than everything (first NaN
// wins), -0 == +0 (first wins).

inline int64_t ArgMaxKey(float v) {
  uint32_t b = std::bit_cast<uint32_t>(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return std::numeric_limits<int64_t>::max();
  if (b == 0x80000000u) b = 0;
  return F32OrderKey(b);
}
inline int64_t ArgMaxKey(int32_t v) { return v; }
inline int64_t ArgMaxKey(int8_t v) { return v; }
inline int64_t ArgMaxKey(int64_t v) { return v; }

template <typename T>
void ArgMaxImpl(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t* out, ThreadPool* pool) {
  if (inner == 1) {
    pool->ParallelFor(outer, GrainFor(n), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const T* row = x + p * n;
        int64_t best = ArgMaxKey(row[0]), idx = 0;
        for (int64_t a = 1; a < n; ++a) {
          const int64_t k = ArgMaxKey(row[a]);
          if (k > best) {
            best = k;
            idx = a;
          }
        }
        out[p] = idx;
      }
    });
    return;
  }
  const int64_t nb = (inner + kColWork - 1) / kColWork;
  pool->ParallelFor(outer * nb, GrainFor(n * std::min(inner, kColWork)), [&](int64_t b, int64_t e) {
    int64_t best[kColWork];
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / nb, c0 = (t % nb) * kColWork, bw = std::min(kColWork, inner - c0);
      const T* base = x + p * n * inner + c0;
      int64_t* o = out + p * inner + c0;
      for (int64_t c = 0; c < bw; ++c) {
        best[c] = ArgMaxKey(base[c]);
        o[c] = 0;
      }
      for (int64_t a = 1; a < n; ++a) {
        const T* row = base + a * inner;
        for (int64_t c = 0; c < bw; ++c) {
          const int64_t k = ArgMaxKey(row[c]);
          if (k > best[c]) {
            best[c] = k;
            o[c] = a;
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------
// TopK: the k first elements of each slice along the axis in the order "larger key first"
// (or smaller, for !largest), equal keys by ascending index, with ArgMaxKey's keys (NaN
// above +inf, -0 == +0). That order is total, so the bounded heap below (O(n log k) time,
// O(k) memory per thread) gives the same indices as any other correct selection.

struct TopKEntry {
  int64_t key, index;
};

template <typename T>
void TopKImpl(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest, int64_t* out,
              ThreadPool* pool) {
  // "a comes before b": the heap keeps the k entries that come first, the last one on top.
  auto before = [largest](const TopKEntry& a, const TopKEntry& b) {
    if (a.key != b.key) return largest ? a.key > b.key : a.key < b.key;
    return a.index < b.index;
  };
  pool->ParallelFor(outer * inner, GrainFor(n), [&](int64_t b, int64_t e) {
    std::vector<TopKEntry> heap;
    heap.reserve(static_cast<size_t>(k));
    for (int64_t s = b; s < e; ++s) {
      const int64_t p = s / inner, j = s - p * inner;
      const T* column = x + p * n * inner + j;
      heap.clear();
      for (int64_t a = 0; a < n; ++a) {
        const TopKEntry t{ArgMaxKey(column[a * inner]), a};
        if (static_cast<int64_t>(heap.size()) < k) {
          heap.push_back(t);
          std::push_heap(heap.begin(), heap.end(), before);
        } else if (k > 0 && before(t, heap.front())) {
          std::pop_heap(heap.begin(), heap.end(), before);
          heap.back() = t;
          std::push_heap(heap.begin(), heap.end(), before);
        }
      }
      std::sort_heap(heap.begin(), heap.end(), before);
      int64_t* o = out + p * k * inner + j;
      for (int64_t r = 0; r < k; ++r) o[r * inner] = heap[static_cast<size_t>(r)].index;
    }
  });
}

// ---------------------------------------------------------------------------------------

template <class Op>
Status RunOrderFree(const TensorView& x, const ReduceLayout* L, TensorView& y, ThreadPool* pool) {
  using Out = typename Op::Out;
  Out* out = y.as<Out>();
  if (L == nullptr) {  // empty reduction
    std::fill(out, out + y.num_elements(), Op::Empty());
    return OkStatus();
  }
  ReduceOrderFree<Op>(x.as<const typename Op::In>(), *L, out, pool);
  return OkStatus();
}

template <template <typename> class IntOp, class F32Op, class F64Op>
Status DispatchOrderFree(const TensorView& x, const ReduceLayout* L, TensorView& y, ThreadPool* pool) {
  switch (x.dtype) {
    case DType::kF32: return RunOrderFree<F32Op>(x, L, y, pool);
    case DType::kF64: return RunOrderFree<F64Op>(x, L, y, pool);
    case DType::kI32: return RunOrderFree<IntOp<int32_t>>(x, L, y, pool);
    case DType::kI8: return RunOrderFree<IntOp<int8_t>>(x, L, y, pool);
    case DType::kI64: return RunOrderFree<IntOp<int64_t>>(x, L, y, pool);
    case DType::kU8: return RunOrderFree<IntOp<uint8_t>>(x, L, y, pool);
    case DType::kI16: return RunOrderFree<IntOp<int16_t>>(x, L, y, pool);
    case DType::kU16: return RunOrderFree<IntOp<uint16_t>>(x, L, y, pool);
    case DType::kU32: return RunOrderFree<IntOp<uint32_t>>(x, L, y, pool);
    case DType::kU64: return RunOrderFree<IntOp<uint64_t>>(x, L, y, pool);
    default: return InvalidArgument("reduce: unsupported dtype");
  }
}

template <typename T>
using IntMaxOp = IntMaxMinOp<T, true>;
template <typename T>
using IntMinOp = IntMaxMinOp<T, false>;

// The call has been validated by RunReduce.
// ---------------------------------------------------------------------------------------
// CumSum (DETERMINISM.md 4.6a): per line along the axis, acc = -0.0 (0 for integers), then
// acc = acc + x[k] in scan order (reverse: from the end), one rounding per step; an inclusive
// output is acc after its own term, an exclusive one acc before it (+0.0 for the first).
// Lines are independent, so a task takes a run of lines of one outer row and walks up to
// kCumSumBlock of them side by side (contiguous, so the AVX2 build vectorizes the adds);
// each line's chain stays sequential.

template <typename T>
inline T CumSumStep(T acc, T term) {
  if constexpr (std::is_floating_point_v<T>) {
    return acc + term;
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(term)));
  }
}

template <typename T>
inline T CumSumOut(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return CanonNaN(v);
  } else {
    return v;
  }
}

inline constexpr int64_t kCumSumBlock = 64;

template <typename T>
void CumSumImpl(const T* x, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse, T* out,
                ThreadPool* pool) {
  const T identity = std::is_floating_point_v<T> ? static_cast<T>(-0.0) : static_cast<T>(0);
  pool->ParallelFor(outer * inner, GrainFor(n), [&](int64_t b, int64_t e) {
    T acc[kCumSumBlock];
    T before[kCumSumBlock];
    if (inner == 1) {
      // The axis is innermost: lines are rows of x. Up to 8 rows step together, each its own
      // chain, so the adds of different rows overlap instead of waiting on one another.
      constexpr int64_t kRows = 8;
      for (int64_t row = b; row < e; row += kRows) {
        const int64_t rows = std::min(kRows, e - row);
        for (int64_t r = 0; r < rows; ++r) acc[r] = identity;
        for (int64_t step = 0; step < n; ++step) {
          const int64_t k = reverse ? n - 1 - step : step;
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t at = (row + r) * n + k;
            const T prev = acc[r];
            acc[r] = CumSumStep(acc[r], x[at]);
            out[at] = exclusive ? (step == 0 ? T(0) : CumSumOut(prev)) : CumSumOut(acc[r]);
          }
        }
      }
      return;
    }
    for (int64_t line = b; line < e;) {
      const int64_t o = line / inner, j0 = line % inner;
      const int64_t width = std::min({kCumSumBlock, inner - j0, e - line});
      const T* xs = x + o * n * inner + j0;
      T* ys = out + o * n * inner + j0;
      for (int64_t j = 0; j < width; ++j) acc[j] = identity;
      for (int64_t step = 0; step < n; ++step) {
        const int64_t k = reverse ? n - 1 - step : step;
        const T* xk = xs + k * inner;
        T* yk = ys + k * inner;
        if (exclusive) {
          for (int64_t j = 0; j < width; ++j) before[j] = step == 0 ? T(0) : CumSumOut(acc[j]);
          for (int64_t j = 0; j < width; ++j) acc[j] = CumSumStep(acc[j], xk[j]);
          for (int64_t j = 0; j < width; ++j) yk[j] = before[j];
        } else {
          for (int64_t j = 0; j < width; ++j) {
            acc[j] = CumSumStep(acc[j], xk[j]);
            yk[j] = CumSumOut(acc[j]);
          }
        }
      }
      line += width;
    }
  });
}

template <typename T>
Status RunCumSum(const TensorView& x, const OpParams& p, TensorView& y, ThreadPool* pool) {
  const AxisSplit split = SplitAtAxis(x, p.axis);
  CumSumImpl(x.as<const T>(), split.outer, split.n, split.inner, p.exclusive, p.reverse, y.as<T>(), pool);
  return OkStatus();
}

inline Status DispatchCumSum(const TensorView& x, const OpParams& p, TensorView& y, ThreadPool* pool) {
  switch (x.dtype) {
    case DType::kF32: return RunCumSum<float>(x, p, y, pool);
    case DType::kF64: return RunCumSum<double>(x, p, y, pool);
    case DType::kI8: return RunCumSum<int8_t>(x, p, y, pool);
    case DType::kU8: return RunCumSum<uint8_t>(x, p, y, pool);
    case DType::kI16: return RunCumSum<int16_t>(x, p, y, pool);
    case DType::kU16: return RunCumSum<uint16_t>(x, p, y, pool);
    case DType::kI32: return RunCumSum<int32_t>(x, p, y, pool);
    case DType::kU32: return RunCumSum<uint32_t>(x, p, y, pool);
    case DType::kI64: return RunCumSum<int64_t>(x, p, y, pool);
    case DType::kU64: return RunCumSum<uint64_t>(x, p, y, pool);
    default: return InvalidArgument("cumsum: unsupported dtype");
  }
}

inline Status RunReduceImpl(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& x = call.in(0);
  TensorView& y = call.out(0);
  const OpParams& p = *call.params;
  if (y.num_elements() == 0) return OkStatus();

  if (call.op == Op::kArgMax) {
    const AxisSplit split = SplitAtAxis(x, p.axis);
    const int64_t outer = split.outer, n = split.n, inner = split.inner;
    int64_t* out = y.as<int64_t>();
    switch (x.dtype) {
      case DType::kF32: ArgMaxImpl(x.as<const float>(), outer, n, inner, out, ctx.pool); break;
      case DType::kI32: ArgMaxImpl(x.as<const int32_t>(), outer, n, inner, out, ctx.pool); break;
      case DType::kI8: ArgMaxImpl(x.as<const int8_t>(), outer, n, inner, out, ctx.pool); break;
      case DType::kI64: ArgMaxImpl(x.as<const int64_t>(), outer, n, inner, out, ctx.pool); break;
      default: return InvalidArgument("argmax: unsupported dtype");
    }
    return OkStatus();
  }
  if (call.op == Op::kCumSum) return DispatchCumSum(x, p, y, ctx.pool);
  if (call.op == Op::kTopK) {
    const AxisSplit split = SplitAtAxis(x, p.axis);
    const int64_t outer = split.outer, n = split.n, inner = split.inner;
    int64_t* out = y.as<int64_t>();
    switch (x.dtype) {
      case DType::kF32: TopKImpl(x.as<const float>(), outer, n, inner, p.k, p.largest, out, ctx.pool); break;
      case DType::kI32: TopKImpl(x.as<const int32_t>(), outer, n, inner, p.k, p.largest, out, ctx.pool); break;
      case DType::kI8: TopKImpl(x.as<const int8_t>(), outer, n, inner, p.k, p.largest, out, ctx.pool); break;
      case DType::kI64: TopKImpl(x.as<const int64_t>(), outer, n, inner, p.k, p.largest, out, ctx.pool); break;
      default: return InvalidArgument("top_k: unsupported dtype");
    }
    return OkStatus();
  }

  const std::optional<ReduceLayout> layout = PlanReduction(x, p);
  const ReduceLayout* L = layout ? &*layout : nullptr;

  switch (call.op) {
    case Op::kReduceSum:
    case Op::kReduceMean: {
      if (x.dtype == DType::kF64) {
        double* out = y.as<double>();
        const int64_t n_out = y.num_elements();
        const bool mean = call.op == Op::kReduceMean;
        if (L == nullptr) {  // empty: sum +0, mean 0/0
          std::fill(out, out + n_out, mean ? detmath::canonical_nan64() : 0.0);
          return OkStatus();
        }
        SumF64(x.as<const double>(), *L, out, ctx.pool);
        const double count = static_cast<double>(L->n_terms);  // exact below 2^53
        for (int64_t o = 0; o < n_out; ++o) out[o] = CanonNaN(mean ? out[o] / count : out[o]);
        return OkStatus();
      }
      if (p.sum_widens_i8) return RunOrderFree<WideningI8SumOp>(x, L, y, ctx.pool);
      if (x.dtype != DType::kF32) {  // integers; the float ops are not reached
        return DispatchOrderFree<IntSumOp, F32MaxMinOp<true>, F64MaxMinOp<true>>(x, L, y, ctx.pool);
      }
      float* out = y.as<float>();
      const int64_t n_out = y.num_elements();
      const bool mean = call.op == Op::kReduceMean;
      if (L == nullptr) {  // empty: sum +0, mean 0/0
        std::fill(out, out + n_out, mean ? CanonicalNaNValue() : 0.0f);
        return OkStatus();
      }
      SumF32(x.as<const float>(), *L, out, ctx.pool);
      const float count = static_cast<float>(L->n_terms);  // round to nearest even
      ctx.pool->ParallelFor(n_out, 1 << 14, [&](int64_t b, int64_t e) {
        if (mean) {
          for (int64_t o = b; o < e; ++o) out[o] = CanonNaN(out[o] / count);
        } else {
          for (int64_t o = b; o < e; ++o) out[o] = CanonNaN(out[o]);
        }
      });
      return OkStatus();
    }
    case Op::kReduceMax: return DispatchOrderFree<IntMaxOp, F32MaxMinOp<true>, F64MaxMinOp<true>>(x, L, y, ctx.pool);
    case Op::kReduceMin: return DispatchOrderFree<IntMinOp, F32MaxMinOp<false>, F64MaxMinOp<false>>(x, L, y, ctx.pool);
    case Op::kReduceProd:
      switch (x.dtype) {
        case DType::kF32: return RunProd<float>(x, L, y, ctx.pool);
        case DType::kI32: return RunProd<int32_t>(x, L, y, ctx.pool);
        case DType::kI8: return RunProd<int8_t>(x, L, y, ctx.pool);
        case DType::kI64: return RunProd<int64_t>(x, L, y, ctx.pool);
        case DType::kU8: return RunProd<uint8_t>(x, L, y, ctx.pool);
        case DType::kI16: return RunProd<int16_t>(x, L, y, ctx.pool);
        case DType::kU16: return RunProd<uint16_t>(x, L, y, ctx.pool);
        case DType::kU32: return RunProd<uint32_t>(x, L, y, ctx.pool);
        case DType::kU64: return RunProd<uint64_t>(x, L, y, ctx.pool);
        case DType::kF64: return RunProd<double>(x, L, y, ctx.pool);
        default: return InvalidArgument("reduce_prod: unsupported dtype");
      }
    default: return InvalidArgument("reduce: unsupported op");
  }
}

}  // namespace
}  // namespace consensor::kernels::cpu
