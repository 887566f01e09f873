// CUDA data-movement family (docs/DETERMINISM.md section 4.6): identity, reshape,
// transpose, slice, concat, gather, expand, pad. Exact bit copies for every dtype; the
// validation and error messages are those of kernels/cpu/data_movement.cc. Copies move
// the widest unit (up to 16 bytes) that the addresses and sizes allow; a swap of the two
// innermost (coalesced) dims goes through 32x32 shared-memory tiles.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/broadcast_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

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
CNSR_GLOBAL void Copy2DKernel(U* dst, int64_t dst_pitch, const U* src, int64_t src_pitch, int64_t rows,
                              int64_t cols) {
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
CNSR_GLOBAL void StridedCopyKernel(T* out, const T* in, DevLayout l, int64_t n) {
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
CNSR_GLOBAL void TransposeKernel(T* out, const T* in, DevLayout l, int64_t rows, int64_t cols, int64_t s,
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
  const int64_t u = UnitFor({reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src),
                             static_cast<uint64_t>(bytes)});
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
  const int64_t u = UnitFor({reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src),
                             static_cast<uint64_t>(dst_pitch), static_cast<uint64_t>(src_pitch),
                             static_cast<uint64_t>(cols)});
  switch (u) {
    case 16: return LaunchCopy2D<U128>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    case 8: return LaunchCopy2D<uint64_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    case 4: return LaunchCopy2D<uint32_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    case 2: return LaunchCopy2D<uint16_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
    default: return LaunchCopy2D<uint8_t>(ctx, dst, dst_pitch, src, src_pitch, rows, cols);
  }
}

template <typename T>
Status LaunchStrided(const LaunchContext& ctx, const DevLayout& l, int64_t n, void* out, const void* in) {
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
Status StridedCopy(const LaunchContext& ctx, DevLayout layout, int64_t esize, void* out, const void* in) {
  int64_t n = 1;
  for (int d = 0; d < layout.rank; ++d) n *= layout.dims[d];
  if (n == 0) return OkStatus();
  layout.num_operands = 1;
  DevCoalesce(layout);
  if (layout.rank == 1 && layout.strides[0][0] == 1) return CopyBytes(ctx, out, in, n * esize);
  switch (esize) {
    case 1: return LaunchStrided<uint8_t>(ctx, layout, n, out, in);
    case 4: return LaunchStrided<uint32_t>(ctx, layout, n, out, in);
    case 8: return LaunchStrided<uint64_t>(ctx, layout, n, out, in);
    default: break;
  }
  return Internal("data movement: unsupported element size " + std::to_string(esize));
}

// ---------------------------------------------------------------------------------------
// Validation (identical to kernels/cpu/data_movement.cc).

std::string Prefix(Op op) { return std::string(OpName(op)) + ": "; }

std::string ShapeOf(const TensorView& v) {
  std::string s = "[";
  for (int i = 0; i < v.rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(v.dims[i]);
  }
  return s + "]";
}

Status CheckView(const TensorView& v, const std::string& what, Op op) {
  if (!IsValidDType(v.dtype)) return InvalidArgument(Prefix(op) + what + " has an invalid dtype");
  if (v.rank < 0 || v.rank > kMaxRank) return InvalidArgument(Prefix(op) + what + " has rank out of range");
  for (int d = 0; d < v.rank; ++d) {
    if (v.dims[d] < 0) return InvalidArgument(Prefix(op) + what + " has a negative dim");
  }
  if (v.data == nullptr && v.num_elements() != 0) return InvalidArgument(Prefix(op) + what + " has no data");
  return OkStatus();
}

Status CheckCall(const KernelCall& call, int min_inputs, int max_inputs) {
  if (call.num_outputs != 1 || call.outputs == nullptr) return InvalidArgument(Prefix(call.op) + "expects 1 output");
  if (call.num_inputs < min_inputs || call.num_inputs > max_inputs || (call.num_inputs > 0 && call.inputs == nullptr)) {
    return InvalidArgument(Prefix(call.op) + "unexpected number of inputs: " + std::to_string(call.num_inputs));
  }
  RETURN_IF_ERROR(CheckView(call.out(), "output", call.op));
  for (int i = 0; i < call.num_inputs; ++i) {
    RETURN_IF_ERROR(CheckView(call.in(i), "input " + std::to_string(i), call.op));
  }
  return OkStatus();
}

Status CheckSameDType(const KernelCall& call, const TensorView& in) {
  if (in.dtype != call.out().dtype) {
    return InvalidArgument(Prefix(call.op) + "output dtype " + std::string(DTypeName(call.out().dtype)) +
                           " differs from input dtype " + std::string(DTypeName(in.dtype)));
  }
  return OkStatus();
}

void ContiguousStrides(const TensorView& v, int64_t* strides) {
  int64_t s = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= v.dims[d];
  }
}

DevLayout OneOperandLayout(const TensorView& out) {
  DevLayout l = EmptyDevLayout();
  l.rank = out.rank;
  l.num_operands = 1;
  for (int d = 0; d < out.rank; ++d) l.dims[d] = out.dims[d];
  return l;
}

// ---------------------------------------------------------------------------------------

Status RunCopy(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.op == Op::kIdentity && in.rank != out.rank) {
    return InvalidArgument(Prefix(call.op) + "output shape " + ShapeOf(out) + " differs from input shape " + ShapeOf(in));
  }
  if (call.op == Op::kIdentity) {
    for (int d = 0; d < in.rank; ++d) {
      if (in.dims[d] != out.dims[d]) {
        return InvalidArgument(Prefix(call.op) + "output shape " + ShapeOf(out) + " differs from input shape " +
                               ShapeOf(in));
      }
    }
  }
  if (in.num_elements() != out.num_elements()) {
    return InvalidArgument(Prefix(call.op) + "element count differs: input " + ShapeOf(in) + ", output " +
                           ShapeOf(out));
  }
  return CopyBytes(ctx, out.data, in.data, out.byte_size());
}

Status RunTranspose(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const std::vector<int64_t>& perm = call.params->perm;
  if (out.rank != in.rank || static_cast<int>(perm.size()) != in.rank) {
    return InvalidArgument(Prefix(call.op) + "perm size " + std::to_string(perm.size()) + " does not match rank " +
                           std::to_string(in.rank));
  }
  bool seen[kMaxRank] = {};
  for (int i = 0; i < in.rank; ++i) {
    if (perm[i] < 0 || perm[i] >= in.rank || seen[perm[i]]) {
      return InvalidArgument(Prefix(call.op) + "perm is not a permutation of [0, " + std::to_string(in.rank) + ")");
    }
    seen[perm[i]] = true;
    if (out.dims[i] != in.dims[perm[i]]) {
      return InvalidArgument(Prefix(call.op) + "output shape " + ShapeOf(out) + " does not match the permuted input " +
                             ShapeOf(in));
    }
  }
  int64_t cs[kMaxRank];
  ContiguousStrides(in, cs);
  DevLayout l = OneOperandLayout(out);
  for (int i = 0; i < out.rank; ++i) l.strides[0][i] = cs[perm[i]];
  return StridedCopy(ctx, l, DTypeSize(in.dtype), out.data, in.data);
}

Status RunSlice(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const auto& starts = call.params->starts;
  const auto& steps = call.params->steps;
  if (out.rank != in.rank || static_cast<int>(starts.size()) != in.rank || static_cast<int>(steps.size()) != in.rank) {
    return InvalidArgument(Prefix(call.op) + "starts/steps must have one entry per input dim (rank " +
                           std::to_string(in.rank) + ")");
  }
  for (int d = 0; d < in.rank; ++d) {
    if (steps[d] == 0) return InvalidArgument(Prefix(call.op) + "step of dim " + std::to_string(d) + " is 0");
  }
  if (out.num_elements() == 0) return OkStatus();
  int64_t cs[kMaxRank];
  ContiguousStrides(in, cs);
  DevLayout l = OneOperandLayout(out);
  int64_t base = 0;
  for (int d = 0; d < in.rank; ++d) {
    const int64_t start = starts[d], step = steps[d], n = out.dims[d];
    int64_t span, last;
    const bool overflow = __builtin_mul_overflow(n - 1, step, &span) || __builtin_add_overflow(start, span, &last);
    if (start < 0 || start >= in.dims[d] || overflow || last < 0 || last >= in.dims[d]) {
      return InvalidArgument(Prefix(call.op) + "dim " + std::to_string(d) + ": start " + std::to_string(start) +
                             ", step " + std::to_string(step) + " and output size " + std::to_string(n) +
                             " read outside the input size " + std::to_string(in.dims[d]));
    }
    base += start * cs[d];
    l.strides[0][d] = step * cs[d];
  }
  const int64_t esize = DTypeSize(in.dtype);
  return StridedCopy(ctx, l, esize, out.data, static_cast<const uint8_t*>(in.data) + base * esize);
}

Status RunConcat(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1 << 30));
  const TensorView& out = call.out();
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const int64_t axis = call.params->axis;
  if (axis < 0 || axis >= out.rank) {
    return InvalidArgument(Prefix(call.op) + "axis " + std::to_string(axis) + " out of range for rank " +
                           std::to_string(out.rank));
  }
  int64_t axis_sum = 0;
  for (int i = 0; i < call.num_inputs; ++i) {
    const TensorView& in = call.in(i);
    RETURN_IF_ERROR(CheckSameDType(call, in));
    if (in.rank != out.rank) {
      return InvalidArgument(Prefix(call.op) + "input " + std::to_string(i) + " has rank " + std::to_string(in.rank) +
                             ", output has rank " + std::to_string(out.rank));
    }
    for (int d = 0; d < out.rank; ++d) {
      if (d != axis && in.dims[d] != out.dims[d]) {
        return InvalidArgument(Prefix(call.op) + "input " + std::to_string(i) + " shape " + ShapeOf(in) +
                               " does not match output " + ShapeOf(out) + " outside the axis");
      }
    }
    axis_sum += in.dims[axis];
  }
  if (axis_sum != out.dims[axis]) {
    return InvalidArgument(Prefix(call.op) + "input sizes along axis sum to " + std::to_string(axis_sum) +
                           ", output has " + std::to_string(out.dims[axis]));
  }
  const int64_t esize = DTypeSize(out.dtype);
  int64_t outer = 1, inner = esize;
  for (int d = 0; d < axis; ++d) outer *= out.dims[d];
  for (int d = static_cast<int>(axis) + 1; d < out.rank; ++d) inner *= out.dims[d];
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
    if (ctx.scratch == nullptr) return Internal(Prefix(call.op) + "no scratch memory");
    ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(static_cast<int64_t>(sizeof(unsigned long long))));
    unsigned long long* flag = static_cast<unsigned long long*>(scratch);
    unsigned long long first_bad = ~0ull;
#if defined(CNSR_SIMT_EMULATION)
    *flag = first_bad;
#else
    if (cudaMemsetAsync(flag, 0xFF, sizeof(unsigned long long), stream) != cudaSuccess) {
      return Internal(Prefix(call.op) + "cudaMemsetAsync failed");
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
      return Internal(Prefix(call.op) + "reading the index check result failed");
    }
    if (first_bad < static_cast<unsigned long long>(n)) {
      if (cudaMemcpyAsync(&bad_value, idx + first_bad, sizeof(I), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
          cudaStreamSynchronize(stream) != cudaSuccess) {
        return Internal(Prefix(call.op) + "reading the bad index failed");
      }
    }
#endif
    if (first_bad < static_cast<unsigned long long>(n)) {
      const int64_t v = static_cast<int64_t>(bad_value);
      return OutOfRange(Prefix(call.op) + "index " + std::to_string(v) + " (at indices position " +
                        std::to_string(first_bad) + ") is out of range for an axis of size " + std::to_string(dim) +
                        "; valid indices are [-" + std::to_string(dim) + ", " + std::to_string(dim) + ")");
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
  RETURN_IF_ERROR(CheckCall(call, 2, 2));
  const TensorView& data = call.in(0);
  const TensorView& indices = call.in(1);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, data));
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return InvalidArgument(Prefix(call.op) + "indices must be i32 or i64, got " + std::string(DTypeName(indices.dtype)));
  }
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const int64_t axis = call.params->axis;
  if (axis < 0 || axis >= data.rank) {
    return InvalidArgument(Prefix(call.op) + "axis " + std::to_string(axis) + " out of range for data rank " +
                           std::to_string(data.rank));
  }
  bool shape_ok = out.rank == data.rank - 1 + indices.rank;
  for (int d = 0; shape_ok && d < out.rank; ++d) {
    int64_t want;
    if (d < axis) want = data.dims[d];
    else if (d < axis + indices.rank) want = indices.dims[d - axis];
    else want = data.dims[d - indices.rank + 1];
    shape_ok = out.dims[d] == want;
  }
  if (!shape_ok) {
    return InvalidArgument(Prefix(call.op) + "output shape " + ShapeOf(out) + " does not match data " + ShapeOf(data) +
                           ", indices " + ShapeOf(indices) + ", axis " + std::to_string(axis));
  }
  const int64_t dim = data.dims[axis];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= data.dims[d];
  for (int d = static_cast<int>(axis) + 1; d < data.rank; ++d) inner *= data.dims[d];
  if (indices.dtype == DType::kI32) return GatherTyped<int32_t>(call, ctx, dim, outer, inner);
  return GatherTyped<int64_t>(call, ctx, dim, outer, inner);
}

Status RunExpand(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  bool ok = in.rank <= out.rank;
  for (int d = 0; ok && d < in.rank; ++d) {
    const int64_t x = in.dims[d], y = out.dims[d + out.rank - in.rank];
    ok = x == y || x == 1;
  }
  if (!ok) {
    return InvalidArgument(Prefix(call.op) + "input shape " + ShapeOf(in) + " does not broadcast to " + ShapeOf(out));
  }
  DevLayout l = OneOperandLayout(out);
  DevBroadcastStrides(in.dims, in.rank, out.dims, out.rank, l.strides[0]);
  return StridedCopy(ctx, l, DTypeSize(in.dtype), out.data, in.data);
}

// The f32 pad value converted like cast (section 4.2); f32 keeps its bits.
template <typename T>
T PadIntValue(float x) {
  constexpr float lo = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float hi = -lo;
  if (x != x) return 0;
  if (x >= hi) return std::numeric_limits<T>::max();
  if (x < lo) return std::numeric_limits<T>::min();
  return static_cast<T>(static_cast<int64_t>(x));
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
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const auto& pb = call.params->pad_begin;
  const auto& pe = call.params->pad_end;
  if (out.rank != in.rank || static_cast<int>(pb.size()) != in.rank || static_cast<int>(pe.size()) != in.rank) {
    return InvalidArgument(Prefix(call.op) + "pad_begin/pad_end must have one entry per dim (rank " +
                           std::to_string(in.rank) + ")");
  }
  for (int d = 0; d < in.rank; ++d) {
    if (pb[d] < 0 || pe[d] < 0 || out.dims[d] != in.dims[d] + pb[d] + pe[d]) {
      return InvalidArgument(Prefix(call.op) + "dim " + std::to_string(d) + ": output size " +
                             std::to_string(out.dims[d]) + " != input " + std::to_string(in.dims[d]) + " + pads " +
                             std::to_string(pb[d]) + " + " + std::to_string(pe[d]) + " (pads must be >= 0)");
    }
  }
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
    default: break;
  }
  return InvalidArgument(Prefix(call.op) + "unsupported dtype");
}

}  // namespace

Status RunDataMovement(const KernelCall& call, const LaunchContext& ctx) {
  switch (call.op) {
    case Op::kIdentity: case Op::kReshape: return RunCopy(call, ctx);
    case Op::kTranspose: return RunTranspose(call, ctx);
    case Op::kSlice: return RunSlice(call, ctx);
    case Op::kConcat: return RunConcat(call, ctx);
    case Op::kGather: return RunGather(call, ctx);
    case Op::kExpand: return RunExpand(call, ctx);
    case Op::kPad: return RunPad(call, ctx);
    default: break;
  }
  return InvalidArgument("data movement: op '" + std::string(OpName(call.op)) + "' is not a data-movement op");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
