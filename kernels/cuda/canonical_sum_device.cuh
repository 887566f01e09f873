// Internal to kernels/cuda/*.cu: the canonical sum (docs/DETERMINISM.md 4.1) and the
// order-free reductions (section 1.1 max/min, wrapping integer sums) on the GPU, written
// against kernels/cuda/simt.h so they compile both with nvcc and under the SIMT emulation.
//
// Two shapes of work, both giving exactly the bits of CanonicalSumReference
// (kernels/reduction_order.h) up to the payload of a NaN (callers canonicalize):
//   * Rows: one warp per chunk of <= 4096 consecutive terms of one output. Lane t of the
//     warp owns spec lanes t and t+32 and accumulates terms i == t and i == t+32 (mod 64)
//     in increasing i, starting from -0.0 (each step the warp reads 64 consecutive terms,
//     coalesced). The fold "lane j += lane j+32" is a per-thread add of its own two lanes;
//     shfl_down 16, 8, 4, 2, 1 then performs exactly the spec fold for s = 16..1.
//   * Columns: one thread per output column (adjacent threads read adjacent addresses),
//     running the 64 spec lanes sequentially in registers.
// Outputs longer than one chunk write chunk partials to scratch (level 1); further levels
// reduce the partials of each output with the same routine (separate launches) until one
// value remains. Order-free ops use the same kernels (any order gives the same bits).
//
// Everything here is in an anonymous namespace: the header is included by several .cu
// files, each of which is compiled twice (nvcc and the emulation wrapper).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/checks/reduce.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/detmath.h"
#include "kernels/op.h"

#if defined(__CUDACC__)
#define CNSR_CSUM_PRAGMA(x) _Pragma(#x)
#define CNSR_CSUM_UNROLL(n) CNSR_CSUM_PRAGMA(unroll n)
#define CNSR_CSUM_UNROLL_FULL _Pragma("unroll")
#else
#define CNSR_CSUM_UNROLL(n)
#define CNSR_CSUM_UNROLL_FULL
#endif

namespace consensor::kernels::CNSR_CUDA_NS {
namespace {

constexpr int kWarp = 32;
constexpr int kLanes = 64;        // spec lanes (kSumLanes)
constexpr int64_t kChunk = 4096;  // spec chunk (kSumChunk)
constexpr int kBlock = 256;       // threads per block of every launch here

// ---------------------------------------------------------------------------------------
// Addressing: the row-major enumeration of up to kMaxRank (size, stride) groups, as the
// host plans them (kernels/checks/reduce.h).

using Groups = ReduceGroups;

// Offset of the idx-th element (row-major) of the groups. n == 0: 0.
CNSR_DEVICE int64_t GroupOffset(const Groups& g, int64_t idx) {
  if (g.n == 1) return idx * g.stride[0];
  int64_t off = 0;
  for (int k = g.n - 1; k >= 0; --k) {
    const int64_t q = idx / g.size[k];
    off += (idx - q * g.size[k]) * g.stride[k];
    idx = q;
  }
  return off;
}

inline Groups OneGroup(int64_t size, int64_t stride) {
  Groups g;
  g.n = 1;
  g.size[0] = size;
  g.stride[0] = stride;
  return g;
}

// ---------------------------------------------------------------------------------------
// Reduction ops. In: element type read from the tensor; A: accumulator (also the type of
// chunk partials in scratch); Out: element type written. Combine is applied as
// Combine(lower lane, higher lane), matching the spec's fold operand order.

CNSR_DEVICE float CanonF(float v) { return detmath::canonicalize_nan(v); }

struct SumF32Op {
  using In = float;
  using A = float;
  using Out = float;
  static constexpr bool kOrderFree = false;
  CNSR_DEVICE static A Init() { return -0.0f; }
  CNSR_DEVICE static A Load(float v) { return v; }
  CNSR_DEVICE static A Combine(A a, A b) { return a + b; }
  CNSR_DEVICE static Out Finish(A a, float) { return CanonF(a); }
  CNSR_DEVICE static Out Empty() { return 0.0f; }
};

// reduce_mean: csum / float(n), n rounded to nearest even on the host.
struct MeanF32Op : SumF32Op {
  CNSR_DEVICE static Out Finish(A a, float divisor) { return CanonF(a / divisor); }
  CNSR_DEVICE static Out Empty() { return detmath::canonical_nan(); }
};

// f32 max/min of section 1.1 on integer keys (as kernels/cpu/reduce_impl.h): a non-NaN
// float maps to a signed key ordered like the float with -0 < +0; NaN maps to the
// absorbing key and finishes as the canonical NaN.
CNSR_DEVICE int32_t F32OrderKey(uint32_t b) {
  return static_cast<int32_t>(b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) & 0x7FFFFFFFu));
}

template <bool kMax>
struct F32MaxMinOp {
  using In = float;
  using A = int32_t;
  using Out = float;
  static constexpr bool kOrderFree = true;
  static constexpr int32_t kNaNKey = kMax ? INT32_MAX : INT32_MIN;
  CNSR_DEVICE static A Init() { return kMax ? INT32_MIN : INT32_MAX; }
  CNSR_DEVICE static A Load(float v) {
    const uint32_t b = detmath::as_uint(v);
    return (b & 0x7FFFFFFFu) > 0x7F800000u ? kNaNKey : F32OrderKey(b);
  }
  CNSR_DEVICE static A Combine(A a, A b) { return kMax ? (a > b ? a : b) : (a < b ? a : b); }
  CNSR_DEVICE static Out Finish(A a, float) {
    if (a == kNaNKey) return detmath::canonical_nan();
    return detmath::as_float(static_cast<uint32_t>(F32OrderKey(static_cast<uint32_t>(a))));
  }
  CNSR_DEVICE static Out Empty() { return detmath::as_float(kMax ? 0xFF800000u : 0x7F800000u); }
};

template <typename T>
struct IntTraits;
template <>
struct IntTraits<int8_t> {
  using Wide = int32_t;  // shuffles need at least 32 bits
  using U = uint32_t;
  static constexpr int8_t kMin = INT8_MIN, kMax = INT8_MAX;
};
template <>
struct IntTraits<int32_t> {
  using Wide = int32_t;
  using U = uint32_t;
  static constexpr int32_t kMin = INT32_MIN, kMax = INT32_MAX;
};
template <>
struct IntTraits<int64_t> {
  using Wide = long long;
  using U = unsigned long long;
  static constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
};
template <>
struct IntTraits<int16_t> {
  using Wide = int32_t;
  using U = uint32_t;
  static constexpr int16_t kMin = INT16_MIN, kMax = INT16_MAX;
};
// Unsigned: Wide keeps the order (u8 and u16 fit in int32; u32 and u64 stay unsigned).
template <>
struct IntTraits<uint8_t> {
  using Wide = int32_t;
  using U = uint32_t;
  static constexpr uint8_t kMin = 0, kMax = UINT8_MAX;
};
template <>
struct IntTraits<uint16_t> {
  using Wide = int32_t;
  using U = uint32_t;
  static constexpr uint16_t kMin = 0, kMax = UINT16_MAX;
};
template <>
struct IntTraits<uint32_t> {
  using Wide = uint32_t;
  using U = uint32_t;
  static constexpr uint32_t kMin = 0, kMax = UINT32_MAX;
};
template <>
struct IntTraits<uint64_t> {
  using Wide = unsigned long long;
  using U = unsigned long long;
  static constexpr uint64_t kMin = 0, kMax = UINT64_MAX;
};

// Integer sums wrap (two's complement): accumulate unsigned, keep the low bits.
template <typename T>
struct IntSumOp {
  using In = T;
  using A = typename IntTraits<T>::U;
  using Out = T;
  static constexpr bool kOrderFree = true;
  CNSR_DEVICE static A Init() { return 0; }
  CNSR_DEVICE static A Load(T v) { return static_cast<A>(static_cast<typename IntTraits<T>::Wide>(v)); }
  CNSR_DEVICE static A Combine(A a, A b) { return a + b; }
  CNSR_DEVICE static Out Finish(A a, float) { return static_cast<T>(a); }
  CNSR_DEVICE static Out Empty() { return 0; }
};

template <typename T, bool kMax>
struct IntMaxMinOp {
  using In = T;
  using A = typename IntTraits<T>::Wide;
  using Out = T;
  static constexpr bool kOrderFree = true;
  CNSR_DEVICE static A Init() { return kMax ? IntTraits<T>::kMin : IntTraits<T>::kMax; }
  CNSR_DEVICE static A Load(T v) { return static_cast<A>(v); }
  CNSR_DEVICE static A Combine(A a, A b) { return kMax ? (a > b ? a : b) : (a < b ? a : b); }
  CNSR_DEVICE static Out Finish(A a, float) { return static_cast<T>(a); }
  CNSR_DEVICE static Out Empty() { return kMax ? IntTraits<T>::kMin : IntTraits<T>::kMax; }
};

// ---------------------------------------------------------------------------------------
// Warp lane tree. Must be called by all 32 lanes of a warp together (uniform control flow).
// term(i) returns the accumulator value of term i, 0 <= i < len <= kChunk. The result is
// valid in lane 0.

template <class Op, class Term>
CNSR_DEVICE typename Op::A WarpLaneTree(const Term& term, int64_t len, int lane) {
  using A = typename Op::A;
  A a = Op::Init(), b = Op::Init();  // spec lanes `lane` and `lane + 32`
  if (len == kChunk) {
    CNSR_CSUM_UNROLL(16)
    for (int k = 0; k < static_cast<int>(kChunk / kLanes); ++k) {
      const int64_t i = static_cast<int64_t>(k) * kLanes + lane;
      a = Op::Combine(a, term(i));
      b = Op::Combine(b, term(i + kWarp));
    }
  } else {
    for (int64_t base = 0; base < len; base += kLanes) {
      const int64_t i = base + lane;
      if (i < len) a = Op::Combine(a, term(i));
      if (i + kWarp < len) b = Op::Combine(b, term(i + kWarp));
    }
  }
  A v = Op::Combine(a, b);  // s = 32: lane j += lane j + 32, both held by this thread
  CNSR_CSUM_UNROLL_FULL
  for (int s = kWarp / 2; s >= 1; s >>= 1) {
    const A o = __shfl_down_sync(CNSR_FULL_MASK, v, s);
    v = Op::Combine(v, o);  // meaningful for lanes j < s: lane j += lane j + s
  }
  return v;
}

// Order-free combine over the whole warp; the result is valid in every lane.
template <class Op>
CNSR_DEVICE typename Op::A WarpAllCombine(typename Op::A v) {
  CNSR_CSUM_UNROLL_FULL
  for (int s = kWarp / 2; s >= 1; s >>= 1) v = Op::Combine(v, __shfl_xor_sync(CNSR_FULL_MASK, v, s));
  return v;
}

// The spec fold "lane[j] += lane[j + s] for j < s", for s = S, S/2, ..., 1. A template
// rather than a loop over s: each step's trip count is then a constant, every index is
// known after unrolling, and nvcc keeps the lanes in registers (with a run-time s the
// array lived in local memory and every term also stored its lane there).
template <class Op, int S>
CNSR_DEVICE void FoldLanes(typename Op::A* lane) {
  if constexpr (S >= 1) {
    CNSR_CSUM_UNROLL_FULL
    for (int j = 0; j < S; ++j) lane[j] = Op::Combine(lane[j], lane[j + S]);
    FoldLanes<Op, S / 2>(lane);
  }
}

// Single-thread lane tree of term(0..len), len <= kChunk: the 64 spec lanes in registers.
template <class Op, class Term>
CNSR_DEVICE typename Op::A ThreadLaneTree(const Term& term, int64_t len) {
  using A = typename Op::A;
  if constexpr (Op::kOrderFree) {
    A acc = Op::Init();
    for (int64_t i = 0; i < len; ++i) acc = Op::Combine(acc, term(i));
    return acc;
  } else {
    A lane[kLanes];
    CNSR_CSUM_UNROLL_FULL
    for (int j = 0; j < kLanes; ++j) lane[j] = Op::Init();
    // One unrolled body serves full rounds and the tail: a lane past the end adds Init()
    // (-0.0), the exact identity, so the bits are those of skipping it (section 4.1), and
    // nvcc compiles the 64 terms once instead of twice.
    for (int64_t base = 0; base < len; base += kLanes) {
      CNSR_CSUM_UNROLL_FULL
      for (int j = 0; j < kLanes; ++j) lane[j] = Op::Combine(lane[j], base + j < len ? term(base + j) : Op::Init());
    }
    FoldLanes<Op, kLanes / 2>(lane);
    return lane[0];
  }
}

// ---------------------------------------------------------------------------------------
// Launch geometry: grid-stride loops over items; block = kBlock threads (fewer for tiny
// launches, always a multiple of 32 so warps are whole).

struct Geometry {
  unsigned grid = 1, block = kBlock;
};

inline Geometry GeometryFor(int64_t threads, const LaunchContext& ctx) {
  Geometry g;
  if (threads < kBlock) g.block = static_cast<unsigned>(((threads + kWarp - 1) / kWarp) * kWarp);
  if (g.block == 0) g.block = kWarp;
  const int64_t cap = static_cast<int64_t>(ctx.multiprocessors > 0 ? ctx.multiprocessors : 1) * 32;
  int64_t blocks = (threads + g.block - 1) / g.block;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  g.grid = static_cast<unsigned>(blocks);
  return g;
}

CNSR_DEVICE int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * static_cast<int64_t>(blockDim.x) + static_cast<int64_t>(threadIdx.x);
}
CNSR_DEVICE int64_t GlobalThreads() { return static_cast<int64_t>(gridDim.x) * static_cast<int64_t>(blockDim.x); }
CNSR_DEVICE int LaneOf() { return static_cast<int>(threadIdx.x) & (kWarp - 1); }

inline cudaStream_t StreamOf(const LaunchContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t AlignUp(int64_t v) { return (v + 255) / 256 * 256; }

// ---------------------------------------------------------------------------------------
// Rows: output o reduces n terms; term i of output o is at
//   kContig:  x[o * n + i]
//   general:  x[GroupOffset(kept, o) + GroupOffset(red, i)]
// kPartialIn: x holds accumulators (Op::A) instead of tensor elements (always kContig).
// One warp per (o, chunk c), c < m = ceil(n / kChunk). final (m == 1): out[o] =
// Finish(sum); otherwise partial[o * m + c] = chunk sum. `final` is a run-time flag, not a
// template parameter: it costs one uniform branch per warp and halves the kernels nvcc
// compiles.

template <class Op, bool kPartialIn, bool kContig>
CNSR_GLOBAL void RowChunksKernel(const void* x, Groups kept, Groups red, int64_t n_out, int64_t n, int64_t m, void* out,
                                 float divisor, bool final) {
  using A = typename Op::A;
  using In = typename Op::In;
  const int lane = LaneOf();
  const int64_t total = n_out * m;
  for (int64_t w = GlobalThread() / kWarp; w < total; w += GlobalThreads() / kWarp) {
    const int64_t o = w / m, c = w - o * m;
    const int64_t begin = c * kChunk;
    const int64_t len = (n - begin < kChunk) ? n - begin : kChunk;
    A v;
    if constexpr (kPartialIn) {
      const A* p = static_cast<const A*>(x) + o * n + begin;
      v = WarpLaneTree<Op>([&](int64_t i) { return p[i]; }, len, lane);
    } else if constexpr (kContig) {
      const In* p = static_cast<const In*>(x) + o * n + begin;
      v = WarpLaneTree<Op>([&](int64_t i) { return Op::Load(p[i]); }, len, lane);
    } else {
      const In* p = static_cast<const In*>(x) + GroupOffset(kept, o);
      v = WarpLaneTree<Op>([&](int64_t i) { return Op::Load(p[GroupOffset(red, begin + i)]); }, len, lane);
    }
    if (lane == 0) {
      if (final) {
        static_cast<typename Op::Out*>(out)[o] = Op::Finish(v, divisor);
      } else {
        static_cast<A*>(out)[w] = v;
      }
    }
  }
}

// Number of partial levels and scratch bytes for rows of n terms.
template <class Op>
int64_t RowsScratchBytes(int64_t n_out, int64_t n) {
  int64_t bytes = 0;
  for (int64_t m = CeilDiv(n, kChunk); m > 1; m = CeilDiv(m, kChunk))
    bytes += AlignUp(n_out * m * static_cast<int64_t>(sizeof(typename Op::A)));
  return bytes;
}

// out[o] = Finish(reduction of the n >= 1 terms of output o), n_out >= 1. `scratch` holds
// RowsScratchBytes<Op>(n_out, n) bytes.
template <class Op, bool kContig>
Status RunRows(const LaunchContext& ctx, const typename Op::In* x, const Groups& kept, const Groups& red, int64_t n_out,
               int64_t n, typename Op::Out* out, float divisor, void* scratch) {
  using A = typename Op::A;
  int64_t m = CeilDiv(n, kChunk);
  Geometry g = GeometryFor(n_out * m * kWarp, ctx);
  if (m == 1) {
    CNSR_LAUNCH((RowChunksKernel<Op, false, kContig>), g.grid, g.block, 0, StreamOf(ctx), x, kept, red, n_out, n, m,
                out, divisor, true);
    return CheckLaunch("reduce rows");
  }
  A* level = static_cast<A*>(scratch);
  CNSR_LAUNCH((RowChunksKernel<Op, false, kContig>), g.grid, g.block, 0, StreamOf(ctx), x, kept, red, n_out, n, m,
              level, divisor, false);
  RETURN_IF_ERROR(CheckLaunch("reduce rows (chunk partials)"));
  uint8_t* next = static_cast<uint8_t*>(scratch) + AlignUp(n_out * m * static_cast<int64_t>(sizeof(A)));
  while (true) {
    const int64_t len = m;
    m = CeilDiv(len, kChunk);
    g = GeometryFor(n_out * m * kWarp, ctx);
    if (m == 1) {
      CNSR_LAUNCH((RowChunksKernel<Op, true, true>), g.grid, g.block, 0, StreamOf(ctx), level, kept, red, n_out, len, m,
                  out, divisor, true);
      return CheckLaunch("reduce rows (final level)");
    }
    A* dst = reinterpret_cast<A*>(next);
    CNSR_LAUNCH((RowChunksKernel<Op, true, true>), g.grid, g.block, 0, StreamOf(ctx), level, kept, red, n_out, len, m,
                dst, divisor, false);
    RETURN_IF_ERROR(CheckLaunch("reduce rows (partial level)"));
    next += AlignUp(n_out * m * static_cast<int64_t>(sizeof(A)));
    level = dst;
  }
}

// ---------------------------------------------------------------------------------------
// Columns: outputs (p, c), p < n_outer, c < C; term r < n of output (p, c) is at
//   kPartialIn: x[(p * n + r) * C + c]                   (accumulators, as written below)
//   otherwise:  x[GroupOffset(outer, p) + GroupOffset(red, r) + c]
// One thread per (p, chunk, c); order-free ops use a single chunk (m == 1). final (run-time,
// as for rows): out[p * C + c] = Finish(sum); otherwise partial[(p * m + chunk) * C + c] =
// chunk sum.

template <class Op, bool kPartialIn>
CNSR_GLOBAL void ColChunksKernel(const void* x, Groups outer, Groups red, int64_t n_outer, int64_t C, int64_t n,
                                 int64_t m, void* out, float divisor, bool final) {
  using A = typename Op::A;
  using In = typename Op::In;
  const int64_t total = n_outer * m * C;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t c = t % C;
    const int64_t pc = t / C;  // p * m + chunk
    const int64_t p = pc / m, chunk = pc - p * m;
    const int64_t begin = chunk * kChunk;
    const int64_t len = (m == 1) ? n : ((n - begin < kChunk) ? n - begin : kChunk);
    A v;
    if constexpr (kPartialIn) {
      const A* base = static_cast<const A*>(x) + (p * n + begin) * C + c;
      v = ThreadLaneTree<Op>([&](int64_t r) { return base[r * C]; }, len);
    } else {
      const In* base = static_cast<const In*>(x) + GroupOffset(outer, p) + c;
      v = ThreadLaneTree<Op>([&](int64_t r) { return Op::Load(base[GroupOffset(red, begin + r)]); }, len);
    }
    if (final) {
      static_cast<typename Op::Out*>(out)[p * C + c] = Op::Finish(v, divisor);
    } else {
      static_cast<A*>(out)[t] = v;
    }
  }
}

template <class Op>
int64_t ColChunkCount(int64_t n) {
  return Op::kOrderFree ? 1 : CeilDiv(n, kChunk);
}

template <class Op>
int64_t ColsScratchBytes(int64_t n_outer, int64_t C, int64_t n) {
  int64_t bytes = 0;
  for (int64_t m = ColChunkCount<Op>(n); m > 1; m = CeilDiv(m, kChunk))
    bytes += AlignUp(n_outer * m * C * static_cast<int64_t>(sizeof(typename Op::A)));
  return bytes;
}

// out[p * C + c] = Finish(reduction over the n >= 1 terms of (p, c)). n_outer, C >= 1.
template <class Op>
Status RunCols(const LaunchContext& ctx, const typename Op::In* x, const Groups& outer, const Groups& red,
               int64_t n_outer, int64_t C, int64_t n, typename Op::Out* out, float divisor, void* scratch) {
  using A = typename Op::A;
  int64_t m = ColChunkCount<Op>(n);
  Geometry g = GeometryFor(n_outer * m * C, ctx);
  if (m == 1) {
    CNSR_LAUNCH((ColChunksKernel<Op, false>), g.grid, g.block, 0, StreamOf(ctx), x, outer, red, n_outer, C, n, m, out,
                divisor, true);
    return CheckLaunch("reduce columns");
  }
  if constexpr (Op::kOrderFree) {
    return Internal("reduce columns: unexpected chunking of an order-free reduction");
  } else {
    A* level = static_cast<A*>(scratch);
    CNSR_LAUNCH((ColChunksKernel<Op, false>), g.grid, g.block, 0, StreamOf(ctx), x, outer, red, n_outer, C, n, m, level,
                divisor, false);
    RETURN_IF_ERROR(CheckLaunch("reduce columns (chunk partials)"));
    uint8_t* next = static_cast<uint8_t*>(scratch) + AlignUp(n_outer * m * C * static_cast<int64_t>(sizeof(A)));
    while (true) {
      const int64_t len = m;
      m = CeilDiv(len, kChunk);
      g = GeometryFor(n_outer * m * C, ctx);
      if (m == 1) {
        CNSR_LAUNCH((ColChunksKernel<Op, true>), g.grid, g.block, 0, StreamOf(ctx), level, outer, red, n_outer, C, len,
                    m, out, divisor, true);
        return CheckLaunch("reduce columns (final level)");
      }
      A* dst = reinterpret_cast<A*>(next);
      CNSR_LAUNCH((ColChunksKernel<Op, true>), g.grid, g.block, 0, StreamOf(ctx), level, outer, red, n_outer, C, len, m,
                  dst, divisor, false);
      RETURN_IF_ERROR(CheckLaunch("reduce columns (partial level)"));
      next += AlignUp(n_outer * m * C * static_cast<int64_t>(sizeof(A)));
      level = dst;
    }
  }
}

// Fills out[0..n) with Op::Empty() (the value of an empty reduction).
template <class Op>
CNSR_GLOBAL void FillEmptyKernel(typename Op::Out* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalThreads()) out[i] = Op::Empty();
}

// out[o] = Finish(Load(x[o])): reductions with a single term per output.
template <class Op>
CNSR_GLOBAL void SingleTermKernel(const typename Op::In* x, typename Op::Out* out, int64_t n, float divisor) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalThreads()) out[i] = Op::Finish(Op::Load(x[i]), divisor);
}

}  // namespace
}  // namespace consensor::kernels::CNSR_CUDA_NS
