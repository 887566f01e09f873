// CUDA data-movement family (docs/DETERMINISM.md section 4.6): identity, reshape,
// transpose, slice, concat, gather, expand, pad. Exact bit copies for every dtype; calls are
// validated by kernels/checks/data_movement.h, as on the CPU. Copies move the widest unit
// (up to 16 bytes) that the addresses and sizes allow; a swap of the two innermost
// (coalesced) dims goes through 32x32 shared-memory tiles.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/checks/data_movement.h"
#include "kernels/cuda/broadcast_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/half.h"

namespace consensor::kernels::CNSR_CUDA_NS {
namespace {

struct alignas(16) U128 {
  uint64_t lo, hi;
};

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // block (32, 8): each thread moves 4 elements of a tile

// ---------------------------------------------------------------------------------------
// Kernels.

template <typename U>
CNSR_GLOBAL void Copy1DKernel(U* dst, const U* src, int64_t n) {
  const int64_t nthreads = DevThreadCount();
  for (int64_t i = DevThreadIndex(); i < n; i += nthreads) dst[i] = src[i];
}

// dst[r * dst_pitch + c] = src[r * src_pitch + c] for r < rows, c < cols (units of U).
template <typename U>
CNSR_GLOBAL void Copy2DKernel(U* dst, int64_t dst_pitch, const U* src, int64_t src_pitch, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const int64_t nthreads = DevThreadCount();
  const bool narrow = n <= 0x7FFFFFFF;
  for (int64_t i = DevThreadIndex(); i < n; i += nthreads) {
    int64_t r, c;
    if (narrow) {
      const uint32_t ui = static_cast<uint32_t>(i), uc = static_cast<uint32_t>(cols);
      r = ui / uc;
      c = ui - static_cast<uint32_t>(r) * uc;
    } else {
      r = i / cols;
      c = i - r * cols;
    }
    dst[r * dst_pitch + c] = src[r * src_pitch + c];
  }
}

// out[i] = in[offset of i in the layout] (operand 0).
template <typename T>
CNSR_GLOBAL void StridedCopyKernel(T* out, const T* in, StridedLayout l, int64_t n) {
  const int64_t nthreads = DevThreadCount();
  const bool narrow = n <= 0x7FFFFFFF;
  for (int64_t i = DevThreadIndex(); i < n; i += nthreads) {
    int64_t off[1];
    DevOffsets<1>(l, i, narrow, off);
    out[i] = in[off[0]];
  }
}

// Coalesced layout of rank r >= 2 whose dim r-2 has input stride 1 and dim r-1 input
// stride s: out[b][row][c] = in[base(b) + row + c * s]. Tiles of 32x32 through shared
// memory so that both the reads (along row) and the writes (along c) are coalesced.
template <typename T>
CNSR_GLOBAL void TransposeKernel(T* out, const T* in, StridedLayout l, int64_t rows, int64_t cols, int64_t s,
                                 int64_t row_tiles, int64_t col_tiles, int64_t total_tiles) {
  CNSR_SHARED(T, tile, kTile * (kTile + 1));
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int batch_rank = l.rank - 2;
  for (int64_t t = blockIdx.x; t < total_tiles; t += gridDim.x) {  // uniform per block
    const int64_t ct = t % col_tiles;
    const int64_t rest = t / col_tiles;
    const int64_t rt = rest % row_tiles;
    const int64_t b = rest / row_tiles;
    int64_t base = 0;
    int64_t rem = b;
    CNSR_UNROLL
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < batch_rank) {
        base += (rem % l.dims[d]) * l.strides[0][d];
        rem /= l.dims[d];
      }
    }
    const int64_t r0 = rt * kTile, c0 = ct * kTile;
    for (int cl = ty; cl < kTile; cl += kTileRows) {
      const int64_t r = r0 + tx, c = c0 + cl;
      if (r < rows && c < cols) tile[cl * (kTile + 1) + tx] = in[base + r + c * s];
    }
    __syncthreads();
    T* ob = out + b * rows * cols;
    for (int rl = ty; rl < kTile; rl += kTileRows) {
      const int64_t r = r0 + rl, c = c0 + tx;
      if (r < rows && c < cols) ob[r * cols + c] = tile[tx * (kTile + 1) + rl];
    }
    __syncthreads();
  }
}

// Records the smallest position of an out-of-range index in *first_bad.
template <typename I>
CNSR_GLOBAL void GatherCheckKernel(const I* idx, int64_t n, int64_t dim, unsigned long long* first_bad) {
  const int64_t nthreads = DevThreadCount();
  for (int64_t j = DevThreadIndex(); j < n; j += nthreads) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    const int64_t k = v < 0 ? v + dim : v;
    if (k < 0 || k >= dim) {
#if defined(CNSR_SIMT_EMULATION)
      // Emulated threads run one at a time (fibers switch only at barriers/shuffles).
      if (static_cast<unsigned long long>(j) < *first_bad) *first_bad = static_cast<unsigned long long>(j);
#else
      atomicMin(first_bad, static_cast<unsigned long long>(j));
#endif
    }
  }
}

// out[(o * n + j) * inner + c] = src[(o * dim + norm(idx[j])) * inner + c], in units of U.
// Indices were checked by GatherCheckKernel.
template <typename U, typename I>
CNSR_GLOBAL void GatherKernel(U* out, const U* src, const I* idx, int64_t n, int64_t dim, int64_t inner,
                              int64_t total) {
  const int64_t nthreads = DevThreadCount();
  const bool narrow = total <= 0x7FFFFFFF;
  for (int64_t e = DevThreadIndex(); e < total; e += nthreads) {
    int64_t c, j, o;
    if (narrow) {
      const uint32_t ue = static_cast<uint32_t>(e), ui = static_cast<uint32_t>(inner), un = static_cast<uint32_t>(n);
      const uint32_t r = ue / ui;
      c = ue - r * ui;
      const uint32_t q = r / un;
      j = r - q * un;
      o = q;
    } else {
      const int64_t r = e / inner;
      c = e - r * inner;
      o = r / n;
      j = r - o * n;
    }
    const int64_t v = static_cast<int64_t>(idx[j]);
    const int64_t k = v < 0 ? v + dim : v;
    out[e] = src[(o * dim + k) * inner + c];
  }
}

struct PadArgs {
  int rank;
  int64_t out_dims[kMaxRank];
  int64_t in_dims[kMaxRank];
  int64_t in_strides[kMaxRank];
  int64_t pad_begin[kMaxRank];
};

template <typename T>
CNSR_GLOBAL void PadKernel(T* out, const T* in, PadArgs a, int64_t n, T fill) {
  const int64_t nthreads = DevThreadCount();
  for (int64_t i = DevThreadIndex(); i < n; i += nthreads) {
    uint64_t rem = static_cast<uint64_t>(i);
    int64_t off = 0;
    bool inside = true;
    CNSR_UNROLL
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < a.rank) {
        const uint64_t dim = static_cast<uint64_t>(a.out_dims[d]);
        const uint64_t q = rem / dim;
        const int64_t k = static_cast<int64_t>(rem - q * dim) - a.pad_begin[d];
        rem = q;
        inside = inside && k >= 0 && k < a.in_dims[d];
        off += k * a.in_strides[d];
      }
    }
    T v = fill;
    if (inside) v = in[off];
    out[i] = v;
  }
}

// ---------------------------------------------------------------------------------------
// Launch helpers.

cudaStream_t StreamOf(const LaunchContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

// Largest unit in {16, 8, 4, 2, 1} bytes dividing every value.
int64_t UnitFor(std::initializer_list<uint64_t> values) {
  uint64_t acc = 16;
  for (uint64_t v : values) acc |= v;
  return static_cast<int64_t>(acc & (~acc + 1));  // lowest set bit, at most 16
}

template <typename U>
Status LaunchCopy1D(const LaunchContext& ctx, void* dst, const void* src, int64_t units) {
  const dim3 grid(DevBlocks(units, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  cudaStream_t stream = StreamOf(ctx);
  (void)stream;
  auto* kernel = &Copy1DKernel<U>;
  U* d = static_cast<U*>(dst);
  const U* s = static_cast<const U*>(src);
  CNSR_LAUNCH(kernel, grid, block, 0, stream, d, s, units);
  return CheckLaunch("data movement (copy)");
}

Status CopyBytes(const LaunchContext& ctx, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == src) return OkStatus();
  const int64_t u =
      UnitFor({reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), static_cast<uint64_t>(bytes)});
  switch (u) {
    case 16: return LaunchCopy1D<U128>(ctx, dst, src, bytes / 16);
    case 8: return LaunchCopy1D<uint64_t>(ctx, dst, src, bytes / 8);
    case 4: return LaunchCopy1D<uint32_t>(ctx, dst, src, bytes / 4);
    case 2: return LaunchCopy1D<uint16_t>(ctx, dst, src, bytes / 2);
    default: return LaunchCopy1D<uint8_t>(ctx, dst, src, bytes);
  }
}

template <typename U>
Status LaunchCopy2D(const LaunchContext& ctx, uint8_t* dst, int64_t dst_pitch, const uint8_t* src, int64_t src_pitch,
                    int64_t rows, int64_t cols) {
  const int64_t us = static_cast<int64_t>(sizeof(U));
  const dim3 grid(DevBlocks(rows * (cols / us), ctx.multiprocessors));
  const dim3 block(kDevBlock);
  cudaStream_t stream = StreamOf(ctx);
  (void)stream;
  auto* kernel = &Copy2DKernel<U>;
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  const int64_t dp = dst_pitch / us, sp = src_pitch / us, c = cols / us;
  CNSR_LAUNCH(kernel, grid, block, 0, stream, d, dp, s, sp, rows, c);
  return CheckLaunch("data movement (2-D copy)");
}

// Byte pitches and column counts; picks the widest unit they all allow.
Status Copy2D(const LaunchContext& ctx, uint8_t* dst, int64_t dst_pitch, const uint8_t* src, int64_t src_pitch,
              int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return OkStatus();
  const int64_t u =
      UnitFor({reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), static_cast<uint64_t>(dst_pitch),
               static_cast<uint64_t>(src_pitch), static_cast<uint64_t>(cols)});
  switch (u) {
    case 16: return LaunchCopy2D<U128>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    case 8: return LaunchCopy2D<uint64_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    case 4: return LaunchCopy2D<uint32_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    case 2: return LaunchCopy2D<uint16_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    default: return LaunchCopy2D<uint8_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
  }
}

template <typename T>
Status LaunchStrided(const LaunchContext& ctx, const StridedLayout& l, int64_t n, void* out, const void* in) {
  cudaStream_t stream = StreamOf(ctx);
  (void)stream;
  T* o = static_cast<T*>(out);
  const T* p = static_cast<const T*>(in);
  const int r = l.rank;
  const int64_t inner_stride = l.strides[0][r - 1];
  if (r >= 2 && l.strides[0][r - 2] == 1 && inner_stride != 0 && inner_stride != 1) {
    const int64_t rows = l.dims[r - 2], cols = l.dims[r - 1];
    int64_t batch = 1;
    for (int d = 0; d < r - 2; ++d) batch *= l.dims[d];
    const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
    const int64_t total = batch * row_tiles * col_tiles;
    int64_t blocks = int64_t{ctx.multiprocessors < 1 ? 1 : ctx.multiprocessors} * 8;
    if (blocks > total) blocks = total;
    const dim3 grid(static_cast<unsigned>(blocks));
    const dim3 block(kTile, kTileRows);
    auto* kernel = &TransposeKernel<T>;
    CNSR_LAUNCH(kernel, grid, block, 0, stream, o, p, l, rows, cols, inner_stride, row_tiles, col_tiles, total);
    return CheckLaunch("data movement (tiled transpose)");
  }
  const dim3 grid(DevBlocks(n, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  auto* kernel = &StridedCopyKernel<T>;
  CNSR_LAUNCH(kernel, grid, block, 0, stream, o, p, l, n);
  return CheckLaunch("data movement (strided copy)");
}

// Contiguous output of layout.dims; output multi-index idx reads input element
// sum idx[d] * strides[0][d] relative to `in`. The caller has checked the bounds.
Status StridedCopy(const LaunchContext& ctx, StridedLayout layout, int64_t esize, void* out, const void* in) {
  int64_t n = 1;
  for (int d = 0; d < layout.rank; ++d) n *= layout.dims[d];
  if (n == 0) return OkStatus();
  layout.num_operands = 1;
  CoalesceLayout(layout);
  if (layout.rank == 1 && layout.strides[0][0] == 1) return CopyBytes(ctx, out, in, n * esize);
  switch (esize) {
    case 1: return LaunchStrided<uint8_t>(ctx, layout, n, out, in);
    case 2: return LaunchStrided<uint16_t>(ctx, layout, n, out, in);
    case 4: return LaunchStrided<uint32_t>(ctx, layout, n, out, in);
    case 8: return LaunchStrided<uint64_t>(ctx, layout, n, out, in);
    default: break;
  }
  return Internal("data movement: unsupported element size " + std::to_string(esize));
}

// ---------------------------------------------------------------------------------------
// Ops of calls validated by ValidateDataMovement.

Status RunConcat(const KernelCall& call, const LaunchContext& ctx) {
  const TensorView& out = call.out();
  const int64_t axis = call.params->axis;
  const AxisSplit split = SplitAtAxis(out, axis);
  const int64_t outer = split.outer, inner = split.inner * DTypeSize(out.dtype);  // inner in bytes
  int64_t row = 0;
  for (int i = 0; i < call.num_inputs; ++i) row += call.in(i).dims[axis] * inner;
  if (outer * row == 0) return OkStatus();
  uint8_t* o = static_cast<uint8_t*>(out.data);
  int64_t start = 0;
  for (int i = 0; i < call.num_inputs; ++i) {
    const int64_t block = call.in(i).dims[axis] * inner;
    if (block > 0) {
      RETURN_IF_ERROR(Copy2D(ctx, o + start, row, static_cast<const uint8_t*>(call.in(i).data), block, outer, block));
    }
    start += block;
  }
  return OkStatus();
}

template <typename U, typename I>
Status LaunchGather(const LaunchContext& ctx, void* out, const void* src, const void* idx, int64_t n, int64_t dim,
                    int64_t inner_units, int64_t total) {
  const dim3 grid(DevBlocks(total, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  cudaStream_t stream = StreamOf(ctx);
  (void)stream;
  auto* kernel = &GatherKernel<U, I>;
  U* o = static_cast<U*>(out);
  const U* s = static_cast<const U*>(src);
  const I* ix = static_cast<const I*>(idx);
  CNSR_LAUNCH(kernel, grid, block, 0, stream, o, s, ix, n, dim, inner_units, total);
  return CheckLaunch("gather");
}

template <typename I>
Status GatherTyped(const KernelCall& call, const LaunchContext& ctx, int64_t dim, int64_t outer, int64_t inner) {
  const TensorView& data = call.in(0);
  const TensorView& indices = call.in(1);
  const TensorView& out = call.out();
  const int64_t n = indices.num_elements();
  cudaStream_t stream = StreamOf(ctx);
  (void)stream;
  const I* idx = static_cast<const I*>(indices.data);
  if (n > 0) {
    // Check every index before touching memory; report the first bad one in index order.
    if (ctx.scratch == nullptr) return Internal("gather: no scratch memory");
    ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(static_cast<int64_t>(sizeof(unsigned long long))));
    unsigned long long* flag = static_cast<unsigned long long*>(scratch);
    unsigned long long first_bad = ~0ull;
#if defined(CNSR_SIMT_EMULATION)
    *flag = first_bad;
#else
    if (cudaMemsetAsync(flag, 0xFF, sizeof(unsigned long long), stream) != cudaSuccess) {
      return Internal("gather: cudaMemsetAsync failed");
    }
#endif
    const dim3 grid(DevBlocks(n, ctx.multiprocessors));
    const dim3 block(kDevBlock);
    auto* kernel = &GatherCheckKernel<I>;
    CNSR_LAUNCH(kernel, grid, block, 0, stream, idx, n, dim, flag);
    RETURN_IF_ERROR(CheckLaunch("gather (index check)"));
    I bad_value = 0;
#if defined(CNSR_SIMT_EMULATION)
    first_bad = *flag;
    if (first_bad < static_cast<unsigned long long>(n)) bad_value = idx[first_bad];
#else
    if (cudaMemcpyAsync(&first_bad, flag, sizeof(first_bad), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return Internal("gather: reading the index check result failed");
    }
    if (first_bad < static_cast<unsigned long long>(n)) {
      if (cudaMemcpyAsync(&bad_value, idx + first_bad, sizeof(I), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
          cudaStreamSynchronize(stream) != cudaSuccess) {
        return Internal("gather: reading the bad index failed");
      }
    }
#endif
    if (first_bad < static_cast<unsigned long long>(n)) {
      return GatherIndexError(static_cast<int64_t>(bad_value), static_cast<int64_t>(first_bad), dim);
    }
  }
  const int64_t esize = DTypeSize(data.dtype);
  const int64_t rows = outer * n;
  const int64_t row_bytes = inner * esize;
  if (rows == 0 || row_bytes == 0) return OkStatus();
  const int64_t u = UnitFor({reinterpret_cast<uintptr_t>(data.data), reinterpret_cast<uintptr_t>(out.data),
                             static_cast<uint64_t>(row_bytes)});
  const int64_t inner_units = row_bytes / u;
  const int64_t total = rows * inner_units;
  switch (u) {
    case 16: return LaunchGather<U128, I>(ctx, out.data, data.data, idx, n, dim, inner_units, total);
    case 8: return LaunchGather<uint64_t, I>(ctx, out.data, data.data, idx, n, dim, inner_units, total);
    case 4: return LaunchGather<uint32_t, I>(ctx, out.data, data.data, idx, n, dim, inner_units, total);
    case 2: return LaunchGather<uint16_t, I>(ctx, out.data, data.data, idx, n, dim, inner_units, total);
    default: return LaunchGather<uint8_t, I>(ctx, out.data, data.data, idx, n, dim, inner_units, total);
  }
}

Status RunGather(const KernelCall& call, const LaunchContext& ctx) {
  const AxisSplit split = SplitAtAxis(call.in(0), call.params->axis);
  if (call.in(1).dtype == DType::kI32) return GatherTyped<int32_t>(call, ctx, split.n, split.outer, split.inner);
  return GatherTyped<int64_t>(call, ctx, split.n, split.outer, split.inner);
}

// The f32 pad value converted like cast (section 4.2); f32 keeps its bits.
template <typename T>
T PadIntValue(float x) {
  if constexpr (std::is_signed<T>::value) {
    constexpr float lo = static_cast<float>(std::numeric_limits<T>::min());
    constexpr float hi = -lo;
    if (x != x) return 0;
    if (x >= hi) return std::numeric_limits<T>::max();
    if (x < lo) return std::numeric_limits<T>::min();
    return static_cast<T>(static_cast<int64_t>(x));
  } else {
    // Unsigned: 2^n and above saturate, x <= -1 (and NaN) give 0, (-1, 0) truncates to 0.
    constexpr float hi = 2.0f * static_cast<float>(T{1} << (sizeof(T) * 8 - 1));
    if (!(x > -1.0f)) return 0;
    if (x >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(static_cast<uint64_t>(x));
  }
}

template <typename T>
Status LaunchPad(const LaunchContext& ctx, const TensorView& in, const TensorView& out, const PadArgs& a, T fill) {
  const int64_t n = out.num_elements();
  const dim3 grid(DevBlocks(n, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  cudaStream_t stream = StreamOf(ctx);
  (void)stream;
  auto* kernel = &PadKernel<T>;
  T* o = static_cast<T*>(out.data);
  const T* p = static_cast<const T*>(in.data);
  CNSR_LAUNCH(kernel, grid, block, 0, stream, o, p, a, n, fill);
  return CheckLaunch("pad");
}

Status RunPad(const KernelCall& call, const LaunchContext& ctx) {
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  const auto& pb = call.params->pad_begin;
  if (out.num_elements() == 0) return OkStatus();
  if (out.rank == 0) return CopyBytes(ctx, out.data, in.data, out.byte_size());
  PadArgs a;
  a.rank = out.rank;
  int64_t cs[kMaxRank];
  ContiguousStrides(in, cs);
  for (int d = 0; d < kMaxRank; ++d) {
    const bool used = d < out.rank;
    a.out_dims[d] = used ? out.dims[d] : 1;
    a.in_dims[d] = used ? in.dims[d] : 1;
    a.in_strides[d] = used ? cs[d] : 0;
    a.pad_begin[d] = used ? pb[d] : 0;
  }
  const float v = call.params->pad_value;
  switch (out.dtype) {
    case DType::kF32: {
      uint32_t bits;
      __builtin_memcpy(&bits, &v, sizeof(bits));
      return LaunchPad<uint32_t>(ctx, in, out, a, bits);
    }
    case DType::kI32: return LaunchPad<int32_t>(ctx, in, out, a, PadIntValue<int32_t>(v));
    case DType::kI8: return LaunchPad<int8_t>(ctx, in, out, a, PadIntValue<int8_t>(v));
    case DType::kBool: return LaunchPad<uint8_t>(ctx, in, out, a, static_cast<uint8_t>(v != 0.0f));
    case DType::kI64: return LaunchPad<int64_t>(ctx, in, out, a, PadIntValue<int64_t>(v));
    case DType::kU8: return LaunchPad<uint8_t>(ctx, in, out, a, PadIntValue<uint8_t>(v));
    case DType::kI16: return LaunchPad<int16_t>(ctx, in, out, a, PadIntValue<int16_t>(v));
    case DType::kU16: return LaunchPad<uint16_t>(ctx, in, out, a, PadIntValue<uint16_t>(v));
    case DType::kU32: return LaunchPad<uint32_t>(ctx, in, out, a, PadIntValue<uint32_t>(v));
    case DType::kU64: return LaunchPad<uint64_t>(ctx, in, out, a, PadIntValue<uint64_t>(v));
    // The fill rounded once to nearest even, NaN canonical (DETERMINISM.md 1.3, 1.4).
    case DType::kF16: return LaunchPad<uint16_t>(ctx, in, out, a, half::F32ToF16(v));
    case DType::kBF16: return LaunchPad<uint16_t>(ctx, in, out, a, half::F32ToBF16(v));
    default: break;
  }
  return InvalidArgument("pad: unsupported dtype");
}

}  // namespace

Status RunDataMovement(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(ValidateDataMovement(call));
  const TensorView& out = call.out();
  switch (call.op) {
    case Op::kTranspose:
    case Op::kSlice:
    case Op::kExpand: {
      const StridedRead r = PlanStridedRead(call);
      const int64_t esize = DTypeSize(out.dtype);
      return StridedCopy(ctx, r.layout, esize, out.data,
                         static_cast<const uint8_t*>(call.in(0).data) + r.offset * esize);
    }
    case Op::kConcat: return RunConcat(call, ctx);
    case Op::kGather: return RunGather(call, ctx);
    case Op::kPad: return RunPad(call, ctx);
    default: return CopyBytes(ctx, out.data, call.in(0).data, out.byte_size());  // identity, reshape
  }
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
