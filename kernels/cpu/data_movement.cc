// Data-movement kernels (docs/DETERMINISM.md section 4.6): identity, reshape, transpose,
// slice, concat, gather, expand, pad. They copy element bits exactly (no NaN
// canonicalization) for every dtype, using memcpy for contiguous inner runs, and split
// large copies over the thread pool by output ranges.
#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/checks/data_movement.h"
#include "kernels/checks/elementwise.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement_avx512.h"
#include "kernels/cpu/elementwise_impl.h"
#include "kernels/cpu/gemm.h"
#include "kernels/half.h"

namespace consensor::kernels::cpu {
namespace {

constexpr int64_t kCopyGrainBytes = 256 * 1024;

void Parallel(const CpuContext& ctx, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (ctx.pool == nullptr) {
    fn(0, n);
  } else {
    ctx.pool->ParallelFor(n, grain, fn);
  }
}

// Grain in units of `unit_bytes`-sized items so that a chunk moves about kCopyGrainBytes.
int64_t GrainFor(int64_t unit_bytes) {
  return std::max<int64_t>(1, kCopyGrainBytes / std::max<int64_t>(1, unit_bytes));
}

// Flat byte copy of `bytes` bytes, split across the pool.
void CopyBytes(const CpuContext& ctx, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  uint8_t* d = static_cast<uint8_t*>(dst);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  Parallel(ctx, bytes, kCopyGrainBytes,
           [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, static_cast<size_t>(e - b)); });
}

template <typename T>
void StridedRun(uint8_t* out, const uint8_t* in, int64_t stride, int64_t n) {
  T* o = reinterpret_cast<T*>(out);
  const T* p = reinterpret_cast<const T*>(in);
  if (stride == 0) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    std::fill(o, o + n, v);
  } else {
    for (int64_t i = 0; i < n; ++i) std::memcpy(o + i, p + i * stride, sizeof(T));
  }
}

// Coalesced layout whose dim rank-2 has input stride 1 and dim rank-1 input stride s:
// out[b][r][c] = in[base(b) + r + c * s]. Each output element is written by exactly one
// tile, so the split does not matter.
template <typename T>
void TiledTranspose(const CpuContext& ctx, const StridedLayout& l, uint8_t* out, const uint8_t* in) {
  constexpr int64_t kTile = 32;
  const int r = l.rank;
  const int64_t rows = l.dims[r - 2], cols = l.dims[r - 1], s = l.strides[0][r - 1];
  int64_t batch = 1;
  for (int d = 0; d < r - 2; ++d) batch *= l.dims[d];
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  T* o = reinterpret_cast<T*>(out);
  const T* src = reinterpret_cast<const T*>(in);
  Parallel(ctx, batch * row_tiles, GrainFor(kTile * cols * static_cast<int64_t>(sizeof(T))),
           [&](int64_t ub, int64_t ue) {
             for (int64_t u = ub; u < ue; ++u) {
               const int64_t bi = u / row_tiles;
               const int64_t r0 = (u - bi * row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
               int64_t base = 0, rem = bi;
               for (int d = r - 3; d >= 0; --d) {
                 base += (rem % l.dims[d]) * l.strides[0][d];
                 rem /= l.dims[d];
               }
               T* ob = o + bi * rows * cols;
               for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
                 const int64_t c1 = std::min(cols, c0 + kTile);
                 for (int64_t row = r0; row < r1; ++row) {
                   const T* sp = src + base + row;
                   T* op = ob + row * cols;
                   for (int64_t c = c0; c < c1; ++c) op[c] = sp[c * s];
                 }
               }
             }
           });
}

// Copies whole rows of a layout whose innermost dim is a run of CB contiguous bytes (dropped
// here: `l` has rank >= 1 over those CB-byte chunks, strides in bytes). Rows are the chunks of
// the new innermost dim; the thread's range [row_begin, row_end) walks an odometer instead of
// dividing per run, so runs of a few bytes (im2col transposes) cost a fixed-size copy each.
template <int CB>
void CopyShortRuns(const StridedLayout& l, uint8_t* out, const uint8_t* in, int64_t row_begin, int64_t row_end) {
  const int q = l.rank;
  const int64_t inner = l.dims[q - 1], step = l.strides[0][q - 1];
  int64_t idx[kMaxRank] = {};
  int64_t rem = row_begin, off = 0;
  for (int d = q - 2; d >= 0; --d) {
    idx[d] = rem % l.dims[d];
    rem /= l.dims[d];
    off += idx[d] * l.strides[0][d];
  }
  uint8_t* o = out + row_begin * inner * CB;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const uint8_t* p = in + off;
    for (int64_t i = 0; i < inner; ++i, o += CB, p += step) std::memcpy(o, p, CB);
    for (int d = q - 2; d >= 0; --d) {
      off += l.strides[0][d];
      if (++idx[d] < l.dims[d]) break;
      off -= idx[d] * l.strides[0][d];
      idx[d] = 0;
    }
  }
}

// StridedCopy of a layout (rank >= 2) whose innermost dim is contiguous and at most 16 bytes
// long. Returns false when it does not apply.
bool CopyWithShortRuns(const CpuContext& ctx, const StridedLayout& layout, int64_t esize, uint8_t* out,
                       const uint8_t* in) {
  const int r = layout.rank;
  if (r < 2 || layout.strides[0][r - 1] != 1) return false;
  const int64_t chunk = layout.dims[r - 1] * esize;
  if (chunk > 16) return false;
  StridedLayout chunks;
  chunks.rank = r - 1;
  chunks.num_operands = 1;
  int64_t rows = 1;
  for (int d = 0; d < r - 1; ++d) {
    chunks.dims[d] = layout.dims[d];
    chunks.strides[0][d] = layout.strides[0][d] * esize;
    if (d < r - 2) rows *= layout.dims[d];
  }
  const int64_t row_bytes = chunks.dims[r - 2] * chunk;
  auto run = [&](auto copy) {
    Parallel(ctx, rows, GrainFor(row_bytes), [&](int64_t b, int64_t e) { copy(chunks, out, in, b, e); });
  };
  switch (chunk) {
#define CNSR_SHORT_RUN(B) \
  case B: run(CopyShortRuns<B>); return true;
    CNSR_SHORT_RUN(1)
    CNSR_SHORT_RUN(2)
    CNSR_SHORT_RUN(3)
    CNSR_SHORT_RUN(4)
    CNSR_SHORT_RUN(5)
    CNSR_SHORT_RUN(6)
    CNSR_SHORT_RUN(7)
    CNSR_SHORT_RUN(8)
    CNSR_SHORT_RUN(9)
    CNSR_SHORT_RUN(10)
    CNSR_SHORT_RUN(11)
    CNSR_SHORT_RUN(12)
    CNSR_SHORT_RUN(13)
    CNSR_SHORT_RUN(14)
    CNSR_SHORT_RUN(15)
    CNSR_SHORT_RUN(16)
#undef CNSR_SHORT_RUN
    default: return false;
  }
}

// Writes the contiguous output `out` (layout.dims, `esize`-byte elements) where output
// multi-index idx reads input element `sum idx[d] * layout.strides[0][d]` relative to
// `in` (strides may be 0 or negative). The caller has checked every access is in bounds.
void StridedCopy(const CpuContext& ctx, StridedLayout layout, int64_t esize, void* out, const void* in) {
  int64_t n = 1;
  for (int d = 0; d < layout.rank; ++d) n *= layout.dims[d];
  if (n == 0) return;
  layout.num_operands = 1;
  CoalesceLayout(layout);
  uint8_t* o = static_cast<uint8_t*>(out);
  const uint8_t* p = static_cast<const uint8_t*>(in);
  const int64_t inner_stride = layout.strides[0][layout.rank - 1];
  if (layout.rank >= 2 && layout.strides[0][layout.rank - 2] == 1 && inner_stride != 0 && inner_stride != 1) {
    // A (batched) 2-D transpose of the two innermost dims: copy in cache-friendly tiles.
    switch (esize) {
      case 1: TiledTranspose<uint8_t>(ctx, layout, o, p); return;
      case 2: TiledTranspose<uint16_t>(ctx, layout, o, p); return;
      case 4: TiledTranspose<uint32_t>(ctx, layout, o, p); return;
      case 8: TiledTranspose<uint64_t>(ctx, layout, o, p); return;
      default: break;
    }
  }
  if (CopyWithShortRuns(ctx, layout, esize, o, p)) return;
  Parallel(ctx, n, GrainFor(esize), [&](int64_t b, int64_t e) {
    ForEachRun(layout, b, e, [&](int64_t pos, const int64_t* off, int64_t len) {
      uint8_t* dst = o + pos * esize;
      const uint8_t* src = p + off[0] * esize;
      if (inner_stride == 1) {
        std::memcpy(dst, src, static_cast<size_t>(len * esize));
        return;
      }
      switch (esize) {
        case 1: StridedRun<uint8_t>(dst, src, inner_stride, len); break;
        case 2: StridedRun<uint16_t>(dst, src, inner_stride, len); break;
        case 4: StridedRun<uint32_t>(dst, src, inner_stride, len); break;
        case 8: StridedRun<uint64_t>(dst, src, inner_stride, len); break;
        default: break;
      }
    });
  });
}

// ---------------------------------------------------------------------------------------
// Ops of calls validated by ValidateDataMovement.

Status RunConcat(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& out = call.out();
  const int64_t axis = call.params->axis;
  const AxisSplit split = SplitAtAxis(out, axis);
  const int64_t outer = split.outer, inner = split.inner * DTypeSize(out.dtype);  // inner in bytes
  // Each output row (one outer index) is the concatenation of one block per input.
  std::vector<int64_t> block(static_cast<size_t>(call.num_inputs)), start(static_cast<size_t>(call.num_inputs));
  int64_t row = 0;
  for (int i = 0; i < call.num_inputs; ++i) {
    start[i] = row;
    block[i] = call.in(i).dims[axis] * inner;
    row += block[i];
  }
  const int64_t total = outer * row;
  if (total == 0) return OkStatus();
  uint8_t* o = static_cast<uint8_t*>(out.data);
  // Split the output bytes; each chunk walks the (row, input) segments it overlaps.
  Parallel(ctx, total, kCopyGrainBytes, [&](int64_t b, int64_t e) {
    int64_t pos = b;
    int64_t r = pos / row;
    int64_t within = pos - r * row;
    int i = static_cast<int>(std::upper_bound(start.begin(), start.end(), within) - start.begin()) - 1;
    while (pos < e) {
      while (within >= start[i] + block[i]) ++i;  // skips zero-size blocks
      const int64_t off = within - start[i];
      const int64_t len = std::min(block[i] - off, e - pos);
      const uint8_t* src = static_cast<const uint8_t*>(call.in(i).data) + r * block[i] + off;
      std::memcpy(o + pos, src, static_cast<size_t>(len));
      pos += len;
      within += len;
      if (within == row) {
        ++r;
        within = 0;
        i = 0;
      }
    }
  });
  return OkStatus();
}

template <typename I>
Status NormalizeIndices(const TensorView& indices, int64_t dim, std::vector<int64_t>* out) {
  const I* p = indices.as<I>();
  const int64_t n = indices.num_elements();
  out->resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    int64_t v = static_cast<int64_t>(p[j]);
    int64_t k = v < 0 ? v + dim : v;
    if (k < 0 || k >= dim) return GatherIndexError(v, j, dim);
    (*out)[j] = k;
  }
  return OkStatus();
}

// Gather along the innermost axis (one element per index): out[o, j] = data[o, idx[j]].
template <typename T>
void GatherElements(const CpuContext& ctx, const uint8_t* src, uint8_t* dst, int64_t dim,
                    const std::vector<int64_t>& idx, int64_t rows) {
  const int64_t n = static_cast<int64_t>(idx.size());
  constexpr int64_t kSize = sizeof(T);
  const int64_t* table = idx.data();
  // Fixed-size memcpy rather than T loads: a view's data need not be aligned to T (the
  // compiler still emits one move per element).
  Parallel(ctx, rows, GrainFor(sizeof(T)), [&](int64_t b, int64_t e) {
    int64_t o = b / n, j = b - o * n;
    uint8_t* out = dst + b * kSize;
    for (int64_t r = b; r < e; ++o, j = 0) {  // one index-table pass per outer row
      const uint8_t* base = src + o * dim * kSize;
      const int64_t stop = std::min(n, j + (e - r));
      for (int64_t k = j; k < stop; ++k, out += kSize) std::memcpy(out, base + table[k] * kSize, kSize);
      r += stop - j;
    }
  });
}

// A gather of f32 values with a fused epilogue (DETERMINISM.md 3.1; the Resize lowering's
// gather -> mul -> add): the gathered copy of a block of output elements, then the epilogue on
// that block while it is in cache. The block is about one epilogue tile, whole rows where a
// row is longer.
Status RunGatherWithEpilogue(const KernelCall& call, const CpuContext& ctx, const AxisSplit& split,
                             const std::vector<int64_t>& idx) {
  RETURN_IF_ERROR(ValidateEpilogue(call));  // an f32 output, hence f32 data
  const EpilogueRunner epilogue(call, ctx.isa);
  const int64_t n = static_cast<int64_t>(idx.size());
  const int64_t inner = split.inner;
  const int64_t dim = split.n;
  const int64_t rows = split.outer * n;
  // The bits as the plain gather copies them: 32-bit integers, so no NaN is touched.
  const uint32_t* src = static_cast<const uint32_t*>(call.in(0).data);
  uint32_t* dst = static_cast<uint32_t*>(call.out().data);
  const int64_t* table = idx.data();
  const int64_t block_rows = std::max<int64_t>(1, EpilogueRunner::kTile / inner);
  Parallel(ctx, rows, GrainFor(inner * static_cast<int64_t>(sizeof(float))), [&](int64_t b, int64_t e) {
    for (int64_t rb = b; rb < e; rb += block_rows) {
      const int64_t re = std::min(e, rb + block_rows);
      int64_t o = rb / n, j = rb - o * n;
      uint32_t* to = dst + rb * inner;
      if (inner == 1) {
        for (int64_t r = rb; r < re; ++o, j = 0) {  // one index-table pass per outer row
          const uint32_t* from = src + o * dim;
          const int64_t stop = std::min(n, j + (re - r));
          for (int64_t k = j; k < stop; ++k) *to++ = from[table[k]];
          r += stop - j;
        }
      } else {
        for (int64_t r = rb; r < re; ++r, to += inner) {
          std::memcpy(to, src + (o * dim + table[j]) * inner, static_cast<size_t>(inner) * sizeof(uint32_t));
          if (++j == n) j = 0, ++o;
        }
      }
      epilogue.Apply(rb * inner, re * inner);
    }
  });
  return OkStatus();
}

std::atomic<bool> g_resize_taps_avx512{true};

// canon(t0 * a0 + t1 * a1): the unfused mul, mul and add, each rounded once. A NaN product makes
// the sum NaN, and the unfused add turns any NaN operand into the canonical NaN, so one
// canonicalization of the sum gives the unfused bits.
inline float TwoTaps(float t0, float a0, float t1, float a1) { return CanonNaN(t0 * a0 + t1 * a1); }

// The Resize lowering's two taps of one axis in one pass (a gather with five inputs x, i0, w0, i1,
// w1; DETERMINISM.md 3.1): y = x[i0] * w0 + x[i1] * w1 along the axis, each output written once
// and no product stored. The tables are checked in the order the unfused gathers read them.
Status RunResizeTaps(const KernelCall& call, const CpuContext& ctx, const AxisSplit& split,
                     const std::vector<int64_t>& idx0, const std::vector<int64_t>& idx1) {
  const int64_t m = static_cast<int64_t>(idx0.size());
  const int64_t inner = split.inner, dim = split.n;
  const int64_t rows = split.outer * m;
  if (rows == 0 || inner == 0) return OkStatus();
  const float* x = call.in(0).as<const float>();
  const float* w0 = call.in(2).as<const float>();
  const float* w1 = call.in(4).as<const float>();
  float* y = call.out().as<float>();
  const bool avx512 = ctx.isa == Isa::kAvx2 && g_resize_taps_avx512.load(std::memory_order_relaxed) &&
                      gemm::CpuHasAvx512F() && dim <= INT32_MAX;
  if (inner > 1) {
    Parallel(ctx, rows, GrainFor(inner * static_cast<int64_t>(sizeof(float))), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / m, j = r - o * m;
        const float* r0 = x + (o * dim + idx0[j]) * inner;
        const float* r1 = x + (o * dim + idx1[j]) * inner;
        float* to = y + r * inner;
        if (avx512 && inner >= 16) {
          ResizeTapsRowAvx512(r0, w0[j], r1, w1[j], to, inner);
        } else {
          for (int64_t k = 0; k < inner; ++k) to[k] = TwoTaps(r0[k], w0[j], r1[k], w1[j]);
        }
      }
    });
    return OkStatus();
  }
  // Along the last axis: one element per index, the weights' j-th values.
  std::vector<int32_t> offsets0, offsets1;
  if (avx512) {
    offsets0.assign(idx0.begin(), idx0.end());
    offsets1.assign(idx1.begin(), idx1.end());
  }
  Parallel(ctx, rows, GrainFor(sizeof(float)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e;) {
      const int64_t o = r / m, j = r - o * m;
      const int64_t stop = std::min(m, j + (e - r));
      const float* from = x + o * dim;
      if (avx512) {
        ResizeTapsElementsAvx512(from, offsets0.data() + j, w0 + j, offsets1.data() + j, w1 + j, y + r, stop - j);
      } else {
        for (int64_t k = j; k < stop; ++k) y[r + k - j] = TwoTaps(from[idx0[k]], w0[k], from[idx1[k]], w1[k]);
      }
      r += stop - j;
    }
  });
  return OkStatus();
}

Status RunGather(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& data = call.in(0);
  const TensorView& indices = call.in(1);
  const TensorView& out = call.out();
  const AxisSplit split = SplitAtAxis(data, call.params->axis);
  // Indices are run-time data: check them all before touching memory (first bad one in
  // index order is reported, independently of the thread count).
  const int64_t dim = split.n;
  std::vector<int64_t> idx;
  if (indices.dtype == DType::kI32) {
    RETURN_IF_ERROR(NormalizeIndices<int32_t>(indices, dim, &idx));
  } else {
    RETURN_IF_ERROR(NormalizeIndices<int64_t>(indices, dim, &idx));
  }
  if (call.num_inputs == 5) {  // the two taps of the Resize lowering (ValidateResizeTaps)
    if (call.epilogue != nullptr) return Unimplemented("gather: two taps in one pass take no epilogue");
    std::vector<int64_t> idx1;
    if (call.in(3).dtype == DType::kI32) {
      RETURN_IF_ERROR(NormalizeIndices<int32_t>(call.in(3), dim, &idx1));
    } else {
      RETURN_IF_ERROR(NormalizeIndices<int64_t>(call.in(3), dim, &idx1));
    }
    return RunResizeTaps(call, ctx, split, idx, idx1);
  }
  const int64_t n = static_cast<int64_t>(idx.size());
  const int64_t rows = split.outer * n;
  const int64_t row_bytes = split.inner * DTypeSize(data.dtype);
  if (rows == 0 || row_bytes == 0) return OkStatus();
  const uint8_t* src = static_cast<const uint8_t*>(data.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  if (call.epilogue != nullptr) return RunGatherWithEpilogue(call, ctx, split, idx);
  switch (row_bytes) {  // single elements (im2col's column gathers): typed copies, no division
    case 1: GatherElements<uint8_t>(ctx, src, dst, dim, idx, rows); return OkStatus();
    case 2: GatherElements<uint16_t>(ctx, src, dst, dim, idx, rows); return OkStatus();
    case 4: GatherElements<uint32_t>(ctx, src, dst, dim, idx, rows); return OkStatus();
    case 8: GatherElements<uint64_t>(ctx, src, dst, dim, idx, rows); return OkStatus();
    default: break;
  }
  Parallel(ctx, rows, GrainFor(row_bytes), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / n, j = r - o * n;
      std::memcpy(dst + r * row_bytes, src + (o * dim + idx[j]) * row_bytes, static_cast<size_t>(row_bytes));
    }
  });
  return OkStatus();
}

// --- ConvInteger's im2col in one pass (OpParams::im2col_groups) ---

// Output pixels per tile of the im2col transpose, and the tile's size: a tile holds a block of
// the output's Q columns for up to 64 pixels, so it stays in L1 whatever Q is.
constexpr int64_t kIm2colTileColumns = 64;
constexpr int64_t kIm2colTileBytes = 16 * 1024;

// Transposes the 8 x 8 bytes of rows[0..7] (row r's byte c at bits 8c) in place: byte c of
// row r becomes byte r of row c. Three rounds of swaps of 1, 2 and 4 bytes between row pairs.
inline void TransposeBytes8x8(uint64_t* rows) {
  for (int r = 0; r < 8; r += 2) {
    const uint64_t t = ((rows[r] >> 8) ^ rows[r + 1]) & 0x00FF00FF00FF00FFull;
    rows[r + 1] ^= t;
    rows[r] ^= t << 8;
  }
  for (int r : {0, 1, 4, 5}) {
    const uint64_t t = ((rows[r] >> 16) ^ rows[r + 2]) & 0x0000FFFF0000FFFFull;
    rows[r + 2] ^= t;
    rows[r] ^= t << 16;
  }
  for (int r = 0; r < 4; ++r) {
    const uint64_t t = ((rows[r] >> 32) ^ rows[r + 4]) & 0x00000000FFFFFFFFull;
    rows[r + 4] ^= t;
    rows[r] ^= t << 32;
  }
}

#if defined(__SSE2__)
// The same 8 x 8 byte transpose on SSE2 (part of every x86-64 CPU): byte c of source row r
// (src[r] + z) goes to byte r of destination row c (dst + c * dst_stride). Three rounds of
// interleaves (bytes, then 16-bit pairs, then 32-bit quads) of row pairs: after the last, each
// 16-byte register holds two whole destination rows.
inline void TransposeBytes8x8Sse2(const uint8_t* const* src, int64_t z, uint8_t* dst, int64_t dst_stride) {
  __m128i a[8];
  for (int r = 0; r < 8; ++r) a[r] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src[r] + z));
  const __m128i b0 = _mm_unpacklo_epi8(a[0], a[1]), b1 = _mm_unpacklo_epi8(a[2], a[3]);
  const __m128i b2 = _mm_unpacklo_epi8(a[4], a[5]), b3 = _mm_unpacklo_epi8(a[6], a[7]);
  const __m128i c0 = _mm_unpacklo_epi16(b0, b1), c1 = _mm_unpackhi_epi16(b0, b1);
  const __m128i c2 = _mm_unpacklo_epi16(b2, b3), c3 = _mm_unpackhi_epi16(b2, b3);
  const __m128i d[4] = {_mm_unpacklo_epi32(c0, c2), _mm_unpackhi_epi32(c0, c2), _mm_unpacklo_epi32(c1, c3),
                        _mm_unpackhi_epi32(c1, c3)};
  for (int k = 0; k < 4; ++k) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * k) * dst_stride), d[k]);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * k + 1) * dst_stride), _mm_unpackhi_epi64(d[k], d[k]));
  }
}
#endif

// out[z * out_stride + q] = row[q][z] for q < rows, z < cols.
void TransposeRows(const uint8_t* const* row, int64_t rows, int64_t cols, uint8_t* out, int64_t out_stride) {
  int64_t q = 0;
  if constexpr (std::endian::native == std::endian::little) {
    for (; q + 8 <= rows; q += 8) {
      const uint8_t* const* r8 = row + q;
      int64_t z = 0;
      for (; z + 8 <= cols; z += 8) {
#if defined(__SSE2__)
        TransposeBytes8x8Sse2(r8, z, out + z * out_stride + q, out_stride);
#else
        uint64_t block[8];
        for (int r = 0; r < 8; ++r) std::memcpy(&block[r], r8[r] + z, 8);
        TransposeBytes8x8(block);
        for (int r = 0; r < 8; ++r) std::memcpy(out + (z + r) * out_stride + q, &block[r], 8);
#endif
      }
      for (; z < cols; ++z) {
        for (int64_t r = 0; r < 8; ++r) out[z * out_stride + q + r] = r8[r][z];
      }
    }
  }
  for (; q < rows; ++q) {
    for (int64_t z = 0; z < cols; ++z) out[z * out_stride + q] = row[q][z];
  }
}

Status RunIm2colTranspose(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& x = call.in(0);
  const TensorView& out = call.out();
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  const int64_t groups = out.dims[1], r = out.dims[2], ow = out.dims[3], cg = out.dims[4], kh = out.dims[5],
                kw = out.dims[6];
  // Checked in index order like the two gathers (rows first), before touching memory.
  std::vector<int64_t> rows, cols;
  for (auto [table, dim, idx] : {std::tuple{&call.in(1), h, &rows}, std::tuple{&call.in(2), w, &cols}}) {
    if (table->dtype == DType::kI32) {
      RETURN_IF_ERROR(NormalizeIndices<int32_t>(*table, dim, idx));
    } else {
      RETURN_IF_ERROR(NormalizeIndices<int64_t>(*table, dim, idx));
    }
  }
  const int64_t q_total = cg * kh * kw;
  if (out.num_elements() == 0) return OkStatus();
  // A column j whose table is cols[0, j] + z: the tile row is a contiguous run of x's row.
  std::vector<bool> unit_step(static_cast<size_t>(kw), true);
  for (int64_t j = 0; j < kw; ++j) {
    for (int64_t z = 1; z < ow; ++z) unit_step[j] = unit_step[j] && cols[z * kw + j] == cols[j] + z;
  }
  // Tiles of whole (c, i) pairs (at least one, so a tile is at most one unit's output).
  const int64_t tile_cols = std::min(kIm2colTileColumns, ow);
  const int64_t pair_bytes = kw * tile_cols;
  const int64_t pairs_per_tile = std::max<int64_t>(1, kIm2colTileBytes / pair_bytes);
  const int64_t z_blocks = (ow + tile_cols - 1) / tile_cols;
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  // One unit: image n, group, output row y, a block of output pixels; all of its Q columns.
  const int64_t units = n * groups * r * z_blocks;
  Parallel(ctx, units, GrainFor(tile_cols * q_total), [&](int64_t ub, int64_t ue) {
    std::vector<uint8_t> tile(static_cast<size_t>(pairs_per_tile * pair_bytes));
    // The source of each (c, i, j) row of the block: x's row itself where the column table
    // steps by one (no copy), else its gathered copy in the tile.
    std::vector<const uint8_t*> row_of(static_cast<size_t>(pairs_per_tile * kw));
    for (int64_t u = ub; u < ue; ++u) {
      const int64_t zb = u % z_blocks, y = (u / z_blocks) % r, g = (u / z_blocks / r) % groups;
      const int64_t img = u / z_blocks / r / groups;
      const int64_t z0 = zb * tile_cols, zn = std::min(tile_cols, ow - z0);
      uint8_t* out_block = dst + (((img * groups + g) * r + y) * ow + z0) * q_total;
      for (int64_t p0 = 0; p0 < cg * kh; p0 += pairs_per_tile) {
        const int64_t pn = std::min(pairs_per_tile, cg * kh - p0);
        for (int64_t p = 0; p < pn; ++p) {
          const int64_t ci = (p0 + p) / kh, i = (p0 + p) % kh;
          const uint8_t* x_row = src + ((img * c + g * cg + ci) * h + rows[y * kh + i]) * w;
          for (int64_t j = 0; j < kw; ++j) {
            if (unit_step[j]) {
              row_of[p * kw + j] = x_row + cols[j] + z0;
            } else {
              uint8_t* t = tile.data() + (p * kw + j) * tile_cols;
              for (int64_t z = 0; z < zn; ++z) t[z] = x_row[cols[(z0 + z) * kw + j]];
              row_of[p * kw + j] = t;
            }
          }
        }
        TransposeRows(row_of.data(), pn * kw, zn, out_block + p0 * kw, q_total);
      }
    }
  });
  return OkStatus();
}

template <typename T>
T PadValueAs(float v) {
  return CastValue<float, T>(v);  // the f32 attribute converted like cast (section 4.2)
}

// A pad problem in canonical form: a dim without padding is merged into its outer neighbour
// (its whole extent becomes part of each index of that neighbour), so every dim but the
// outermost is padded. Sizes of blocks are in bytes. ConvTranspose's zero interleaving
// [1, C, H, 1, W, 1] -> [1, C, H, 2, W, 2] becomes [C*H, W -> 2W, 1 -> 2]: rows of one element
// and one fill, a block of them filled at once and then its elements moved in, instead of a
// general walk per output row.
struct PadPlan {
  int rank = 0;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  int64_t lead[kMaxRank] = {};       // indices of fill before the input's, per dim
  int64_t out_block[kMaxRank] = {};  // output bytes per index of the dim
  int64_t in_block[kMaxRank] = {};   // input bytes per index of the dim
};

PadPlan CanonicalPad(const TensorView& in, const TensorView& out, const std::vector<int64_t>& pb, int64_t esize) {
  PadPlan p;
  for (int d = 0; d < out.rank; ++d) {
    const bool padded = out.dims[d] != in.dims[d];
    if (!padded && p.rank > 0) {
      const int q = p.rank - 1;
      p.in_dims[q] *= in.dims[d];
      p.out_dims[q] *= out.dims[d];
      p.lead[q] *= out.dims[d];
      continue;
    }
    p.in_dims[p.rank] = in.dims[d];
    p.out_dims[p.rank] = out.dims[d];
    p.lead[p.rank] = pb[d];
    ++p.rank;
  }
  int64_t ob = esize, ib = esize;
  for (int d = p.rank - 1; d >= 0; --d) {
    p.out_block[d] = ob;
    p.in_block[d] = ib;
    ob *= p.out_dims[d];
    ib *= p.in_dims[d];
  }
  return p;
}

// The fill value as E bytes, and a 64-byte repetition of it for long fills.
template <int E>
struct PadFill {
  uint8_t value[E];
  uint8_t pattern[64];
  bool uniform;  // all bytes equal (zero fill): memset
};

template <int E>
void FillBytes(const PadFill<E>& f, uint8_t* o, int64_t n) {
  if (n <= 4 * E) {
    for (int64_t j = 0; j < n; j += E) std::memcpy(o + j, f.value, E);
  } else if (f.uniform) {
    std::memset(o, f.value[0], static_cast<size_t>(n));
  } else {
    for (; n >= 64; n -= 64, o += 64) std::memcpy(o, f.pattern, 64);
    std::memcpy(o, f.pattern, static_cast<size_t>(n));  // n is a multiple of E
  }
}

// Copies n <= 64 bytes with at most two fixed-size moves (overlapping when n is not a power
// of two), so a short run costs no call into the library.
inline void CopyUpTo64(uint8_t* o, const uint8_t* in, int64_t n) {
  if (n >= 32) {
    std::memcpy(o, in, 32);
    std::memcpy(o + n - 32, in + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(o, in, 16);
    std::memcpy(o + n - 16, in + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(o, in, 8);
    std::memcpy(o + n - 8, in + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(o, in, 4);
    std::memcpy(o + n - 4, in + n - 4, 4);
  } else if (n >= 2) {
    std::memcpy(o, in, 2);
    std::memcpy(o + n - 2, in + n - 2, 2);
  } else if (n == 1) {
    *o = *in;
  }
}

// Short runs (at most kShortRunBytes) in small blocks (at most kSmallBlockBytes) are written a
// group of blocks at a time: one fill over the group's bytes (cache-resident), then each run
// moved over it. That costs a second write of the run bytes, but no per-row fills.
constexpr int64_t kShortRunBytes = 64;
constexpr int64_t kSmallBlockBytes = 1024;  // 4 KiB groups measured 1.5x slower on the detector

// Moves the input runs of `count` innermost rows (of `row` bytes, the run at `lead`). RB is
// the run's length in bytes when known at compile time, else 0 (any run up to 64 bytes).
template <int RB>
void MoveShortRuns(uint8_t* o, const uint8_t* in, int64_t count, int64_t lead, int64_t run, int64_t row) {
  o += lead;
  for (int64_t i = 0; i < count; ++i, o += row, in += run) {
    if constexpr (RB > 0) {
      std::memcpy(o, in, RB);
    } else {
      CopyUpTo64(o, in, run);
    }
  }
}

// Moves only the input runs of `count` whole consecutive blocks of dim d (the fill is there).
template <int E>
void MoveRuns(const PadPlan& p, int d, uint8_t* o, const uint8_t* in, int64_t count) {
  const int64_t ob = p.out_block[d];
  const int64_t lead = p.lead[d] * ob, block = p.out_dims[d] * ob;
  if (d == p.rank - 1) {
    const int64_t run = p.in_dims[d] * ob;
    switch (run) {
#define CNSR_PAD_RUN(B)                                 \
  case B:                                               \
    if constexpr (B % E == 0) {                         \
      MoveShortRuns<B>(o, in, count, lead, run, block); \
      return;                                           \
    }                                                   \
    break;
      CNSR_PAD_RUN(1)
      CNSR_PAD_RUN(2)
      CNSR_PAD_RUN(4)
      CNSR_PAD_RUN(8)
      CNSR_PAD_RUN(16)
#undef CNSR_PAD_RUN
      default: break;
    }
    MoveShortRuns<0>(o, in, count, lead, run, block);
    return;
  }
  const int64_t in_size = p.in_dims[d] * p.in_block[d];
  for (int64_t i = 0; i < count; ++i, o += block, in += in_size) MoveRuns<E>(p, d + 1, o + lead, in, p.in_dims[d]);
}

// Writes `count` whole consecutive blocks of dim d (output at `o`, input at `in`).
template <int E>
void PadFullBlocks(const PadPlan& p, const PadFill<E>& f, int d, uint8_t* o, const uint8_t* in, int64_t count) {
  const int64_t ob = p.out_block[d];
  const int64_t lead = p.lead[d] * ob, body = p.in_dims[d] * ob;
  const int64_t block = p.out_dims[d] * ob, trail = block - lead - body;
  const int64_t in_size = p.in_dims[d] * p.in_block[d];
  const int64_t inner_run = p.in_dims[p.rank - 1] * p.out_block[p.rank - 1];
  if (inner_run <= kShortRunBytes && block <= kSmallBlockBytes) {
    const int64_t group = std::max<int64_t>(1, kSmallBlockBytes / block);
    for (int64_t i0 = 0; i0 < count; i0 += group) {
      const int64_t g = std::min(group, count - i0);
      FillBytes(f, o, g * block);
      MoveRuns<E>(p, d, o, in, g);
      o += g * block;
      in += g * in_size;
    }
    return;
  }
  if (d == p.rank - 1) {
    for (int64_t i = 0; i < count; ++i, in += body) {
      FillBytes(f, o, lead);
      o += lead;
      std::memcpy(o, in, static_cast<size_t>(body));
      o += body;
      FillBytes(f, o, trail);
      o += trail;
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i, in += in_size) {
    FillBytes(f, o, lead);
    o += lead;
    PadFullBlocks(p, f, d + 1, o, in, p.in_dims[d]);
    o += body;
    FillBytes(f, o, trail);
    o += trail;
  }
}

// Writes bytes [lo, hi) of one block of dim d (output block at `o`, its input at `in`).
template <int E>
void PadBlockRange(const PadPlan& p, const PadFill<E>& f, int d, uint8_t* o, const uint8_t* in, int64_t lo,
                   int64_t hi) {
  const int64_t ob = p.out_block[d];
  const int64_t a = p.lead[d] * ob, b = a + p.in_dims[d] * ob;
  if (lo < a) FillBytes(f, o + lo, std::min(hi, a) - lo);
  const int64_t body_lo = std::max(lo, a), body_hi = std::min(hi, b);
  if (body_lo < body_hi) {
    if (d == p.rank - 1) {
      std::memcpy(o + body_lo, in + (body_lo - a), static_cast<size_t>(body_hi - body_lo));
    } else {
      // Sub-blocks k0..k1-1 overlap the range; the middle ones are whole.
      int64_t k = (body_lo - a) / ob;
      const int64_t k1 = (body_hi - a + ob - 1) / ob;
      while (k < k1) {
        const int64_t start = a + k * ob;
        const int64_t sub_lo = std::max<int64_t>(0, lo - start), sub_hi = std::min(ob, hi - start);
        if (sub_lo == 0 && sub_hi == ob) {
          const int64_t whole = std::min(k1, (hi - a) / ob) - k;
          PadFullBlocks(p, f, d + 1, o + start, in + k * p.in_block[d], whole);
          k += whole;
        } else {
          PadBlockRange(p, f, d + 1, o + start, in + k * p.in_block[d], sub_lo, sub_hi);
          ++k;
        }
      }
    }
  }
  const int64_t size = p.out_dims[d] * ob;
  if (hi > b) {
    const int64_t from = std::max(lo, b);
    FillBytes(f, o + from, std::min(hi, size) - from);
  }
}

// Pad of E-byte elements. The output is split by element ranges; each range walks the
// canonical blocks it overlaps, so every output byte is written exactly once.
template <int E>
void PadElements(const CpuContext& ctx, const TensorView& in, const TensorView& out, const std::vector<int64_t>& pb,
                 const void* fill_value) {
  PadFill<E> f;
  std::memcpy(f.value, fill_value, E);
  for (int j = 0; j < 64; ++j) f.pattern[j] = f.value[j % E];
  f.uniform = std::all_of(f.value, f.value + E, [&](uint8_t v) { return v == f.value[0]; });
  const PadPlan plan = CanonicalPad(in, out, pb, E);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  const uint8_t* src = static_cast<const uint8_t*>(in.data);
  const bool all_fill = in.num_elements() == 0;  // its data may be null: never passed to memcpy
  const auto range = [&](int64_t b, int64_t e) {
    if (all_fill) {
      FillBytes(f, dst + b * E, (e - b) * E);
    } else {
      PadBlockRange(plan, f, 0, dst, src, b * E, e * E);
    }
  };
  const int64_t n = out.num_elements();
  if (ctx.pool == nullptr) {
    range(0, n);
  } else {
    ctx.pool->ParallelForWork(n, E, range);  // a unit is a byte written
  }
}

template <typename T>
void PadRows(const CpuContext& ctx, const TensorView& in, const TensorView& out, const std::vector<int64_t>& pb,
             T fill) {
  PadElements<sizeof(T)>(ctx, in, out, pb, &fill);
}

Status RunPad(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  const auto& pb = call.params->pad_begin;
  if (out.num_elements() == 0) return OkStatus();
  if (out.rank == 0) {
    CopyBytes(ctx, out.data, in.data, out.byte_size());
    return OkStatus();
  }
  const float v = call.params->pad_value;
  switch (out.dtype) {
    case DType::kF32: PadRows<uint32_t>(ctx, in, out, pb, std::bit_cast<uint32_t>(PadValueAs<float>(v))); break;
    case DType::kI32: PadRows<int32_t>(ctx, in, out, pb, PadValueAs<int32_t>(v)); break;
    case DType::kI8: PadRows<int8_t>(ctx, in, out, pb, PadValueAs<int8_t>(v)); break;
    case DType::kBool: PadRows<uint8_t>(ctx, in, out, pb, static_cast<uint8_t>(v != 0.0f)); break;
    case DType::kI64: PadRows<int64_t>(ctx, in, out, pb, PadValueAs<int64_t>(v)); break;
    case DType::kU8: PadRows<uint8_t>(ctx, in, out, pb, PadValueAs<uint8_t>(v)); break;
    case DType::kI16: PadRows<int16_t>(ctx, in, out, pb, PadValueAs<int16_t>(v)); break;
    case DType::kU16: PadRows<uint16_t>(ctx, in, out, pb, PadValueAs<uint16_t>(v)); break;
    case DType::kU32: PadRows<uint32_t>(ctx, in, out, pb, PadValueAs<uint32_t>(v)); break;
    case DType::kU64: PadRows<uint64_t>(ctx, in, out, pb, PadValueAs<uint64_t>(v)); break;
    case DType::kF16: PadRows<uint16_t>(ctx, in, out, pb, half::F32ToF16(v)); break;  // RNE, canonical NaN
    case DType::kBF16: PadRows<uint16_t>(ctx, in, out, pb, half::F32ToBF16(v)); break;
    case DType::kF64:
      PadRows<uint64_t>(ctx, in, out, pb, std::bit_cast<uint64_t>(PadValueAs<double>(v)));  // exact widening
      break;
    default: return InvalidArgument("pad: unsupported dtype");
  }
  return OkStatus();
}

}  // namespace

Status RunDataMovement(const KernelCall& call, const CpuContext& ctx) {
  RETURN_IF_ERROR(ValidateDataMovement(call));
  const TensorView& out = call.out();
  switch (call.op) {
    case Op::kTranspose:
      if (call.params->im2col_groups != 0) return RunIm2colTranspose(call, ctx);
      [[fallthrough]];
    case Op::kSlice:
    case Op::kExpand: {
      const StridedRead r = PlanStridedRead(call);
      const int64_t esize = DTypeSize(out.dtype);
      StridedCopy(ctx, r.layout, esize, out.data, static_cast<const uint8_t*>(call.in(0).data) + r.offset * esize);
      return OkStatus();
    }
    case Op::kConcat: return RunConcat(call, ctx);
    case Op::kGather: return RunGather(call, ctx);
    case Op::kPad: return RunPad(call, ctx);
    default:  // identity, reshape
      CopyBytes(ctx, out.data, call.in(0).data, out.byte_size());
      return OkStatus();
  }
}

void SetResizeTapsAvx512ForTesting(bool enabled) { g_resize_taps_avx512.store(enabled); }

}  // namespace consensor::kernels::cpu
