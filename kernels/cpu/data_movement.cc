// Data-movement kernels (docs/DETERMINISM.md section 4.6): identity, reshape, transpose,
// slice, concat, gather, expand, pad. They copy element bits exactly (no NaN
// canonicalization) for every dtype, using memcpy for contiguous inner runs, and split
// large copies over the thread pool by output ranges.
#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_impl.h"

namespace consensor::kernels::cpu {
namespace {

constexpr int64_t kCopyGrainBytes = 256 * 1024;

std::string Prefix(Op op) { return std::string(OpName(op)) + ": "; }

std::string ShapeOf(const TensorView& v) {
  std::string s = "[";
  for (int i = 0; i < v.rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(v.dims[i]);
  }
  return s + "]";
}

void Parallel(const CpuContext& ctx, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (ctx.pool == nullptr) {
    fn(0, n);
  } else {
    ctx.pool->ParallelFor(n, grain, fn);
  }
}

// Grain in units of `unit_bytes`-sized items so that a chunk moves about kCopyGrainBytes.
int64_t GrainFor(int64_t unit_bytes) { return std::max<int64_t>(1, kCopyGrainBytes / std::max<int64_t>(1, unit_bytes)); }

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
      case 4: TiledTranspose<uint32_t>(ctx, layout, o, p); return;
      case 8: TiledTranspose<uint64_t>(ctx, layout, o, p); return;
      default: break;
    }
  }
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
        case 4: StridedRun<uint32_t>(dst, src, inner_stride, len); break;
        case 8: StridedRun<uint64_t>(dst, src, inner_stride, len); break;
        default: break;
      }
    });
  });
}

// ---------------------------------------------------------------------------------------

Status RunCopy(const KernelCall& call, const CpuContext& ctx) {
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
  CopyBytes(ctx, out.data, in.data, out.byte_size());
  return OkStatus();
}

Status RunTranspose(const KernelCall& call, const CpuContext& ctx) {
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
  StridedLayout l;
  l.rank = out.rank;
  for (int i = 0; i < out.rank; ++i) {
    l.dims[i] = out.dims[i];
    l.strides[0][i] = cs[perm[i]];
  }
  StridedCopy(ctx, l, DTypeSize(in.dtype), out.data, in.data);
  return OkStatus();
}

Status RunSlice(const KernelCall& call, const CpuContext& ctx) {
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
  StridedLayout l;
  l.rank = out.rank;
  int64_t base = 0;
  for (int d = 0; d < in.rank; ++d) {
    // Every element index start + i * step, i in [0, out_dim), must lie in [0, in_dim).
    const int64_t start = starts[d], step = steps[d], n = out.dims[d];
    int64_t span, last;
    const bool overflow = __builtin_mul_overflow(n - 1, step, &span) || __builtin_add_overflow(start, span, &last);
    if (start < 0 || start >= in.dims[d] || overflow || last < 0 || last >= in.dims[d]) {
      return InvalidArgument(Prefix(call.op) + "dim " + std::to_string(d) + ": start " + std::to_string(start) +
                             ", step " + std::to_string(step) + " and output size " + std::to_string(n) +
                             " read outside the input size " + std::to_string(in.dims[d]));
    }
    base += start * cs[d];
    l.dims[d] = n;
    l.strides[0][d] = step * cs[d];
  }
  const int64_t esize = DTypeSize(in.dtype);
  StridedCopy(ctx, l, esize, out.data, static_cast<const uint8_t*>(in.data) + base * esize);
  return OkStatus();
}

Status RunConcat(const KernelCall& call, const CpuContext& ctx) {
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
Status NormalizeIndices(const TensorView& indices, int64_t dim, Op op, std::vector<int64_t>* out) {
  const I* p = indices.as<I>();
  const int64_t n = indices.num_elements();
  out->resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    int64_t v = static_cast<int64_t>(p[j]);
    int64_t k = v < 0 ? v + dim : v;
    if (k < 0 || k >= dim) {
      return OutOfRange(Prefix(op) + "index " + std::to_string(v) + " (at indices position " + std::to_string(j) +
                        ") is out of range for an axis of size " + std::to_string(dim) + "; valid indices are [-" +
                        std::to_string(dim) + ", " + std::to_string(dim) + ")");
    }
    (*out)[j] = k;
  }
  return OkStatus();
}

Status RunGather(const KernelCall& call, const CpuContext& ctx) {
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
  // Output shape = data.shape[:axis] + indices.shape + data.shape[axis+1:].
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
  // Indices are run-time data: check them all before touching memory (first bad one in
  // index order is reported, independently of the thread count).
  const int64_t dim = data.dims[axis];
  std::vector<int64_t> idx;
  if (indices.dtype == DType::kI32) {
    RETURN_IF_ERROR(NormalizeIndices<int32_t>(indices, dim, call.op, &idx));
  } else {
    RETURN_IF_ERROR(NormalizeIndices<int64_t>(indices, dim, call.op, &idx));
  }
  const int64_t esize = DTypeSize(data.dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= data.dims[d];
  for (int d = static_cast<int>(axis) + 1; d < data.rank; ++d) inner *= data.dims[d];
  const int64_t n = static_cast<int64_t>(idx.size());
  const int64_t rows = outer * n;
  const int64_t row_bytes = inner * esize;
  if (rows == 0 || row_bytes == 0) return OkStatus();
  const uint8_t* src = static_cast<const uint8_t*>(data.data);
  uint8_t* dst = static_cast<uint8_t*>(out.data);
  Parallel(ctx, rows, GrainFor(row_bytes), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / n, j = r - o * n;
      std::memcpy(dst + r * row_bytes, src + (o * dim + idx[j]) * row_bytes, static_cast<size_t>(row_bytes));
    }
  });
  return OkStatus();
}

Status RunExpand(const KernelCall& call, const CpuContext& ctx) {
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
  StridedLayout l;
  l.rank = out.rank;
  for (int d = 0; d < out.rank; ++d) l.dims[d] = out.dims[d];
  BroadcastStrides(in.dims, in.rank, out.dims, out.rank, l.strides[0]);
  StridedCopy(ctx, l, DTypeSize(in.dtype), out.data, in.data);
  return OkStatus();
}

template <typename T>
T PadValueAs(float v) {
  return CastValue<float, T>(v);  // the f32 attribute converted like cast (section 4.2)
}

template <typename T>
void PadRows(const CpuContext& ctx, const TensorView& in, const TensorView& out, const std::vector<int64_t>& pb,
             T fill) {
  const int r = out.rank;
  const int64_t inner = out.dims[r - 1];
  const int64_t rows = out.num_elements() / inner;
  const int64_t in_inner = in.dims[r - 1];
  const int64_t lead = pb[r - 1];
  int64_t in_cs[kMaxRank];
  ContiguousStrides(in, in_cs);
  const T* src = in.as<T>();
  T* dst = out.as<T>();
  Parallel(ctx, rows, GrainFor(inner * static_cast<int64_t>(sizeof(T))), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      T* o = dst + row * inner;
      // Decompose the row index over the output's outer dims [0, r-1).
      int64_t rem = row, in_off = 0;
      bool inside = in_inner > 0;
      for (int d = r - 2; d >= 0; --d) {
        const int64_t i = rem % out.dims[d];
        rem /= out.dims[d];
        const int64_t k = i - pb[d];
        if (k < 0 || k >= in.dims[d]) inside = false;
        in_off += k * in_cs[d];
      }
      if (!inside) {
        std::fill(o, o + inner, fill);
        continue;
      }
      std::fill(o, o + lead, fill);
      std::memcpy(o + lead, src + in_off, static_cast<size_t>(in_inner) * sizeof(T));
      std::fill(o + lead + in_inner, o + inner, fill);
    }
  });
}

Status RunPad(const KernelCall& call, const CpuContext& ctx) {
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
  if (out.rank == 0) {
    CopyBytes(ctx, out.data, in.data, out.byte_size());
    return OkStatus();
  }
  const float v = call.params->pad_value;
  switch (out.dtype) {
    case DType::kF32: PadRows<uint32_t>(ctx, in, out, pb, std::bit_cast<uint32_t>(PadValueAs<float>(v))); break;
    case DType::kI32: PadRows<int32_t>(ctx, in, out, pb, PadValueAs<int32_t>(v)); break;
    case DType::kI8: PadRows<int8_t>(ctx, in, out, pb, PadValueAs<int8_t>(v)); break;
    case DType::kBool: PadRows<uint8_t>(ctx, in, out, pb, PadValueAs<uint8_t>(v)); break;
    case DType::kI64: PadRows<int64_t>(ctx, in, out, pb, PadValueAs<int64_t>(v)); break;
    default: return InvalidArgument(Prefix(call.op) + "unsupported dtype");
  }
  return OkStatus();
}

}  // namespace

Status RunDataMovement(const KernelCall& call, const CpuContext& ctx) {
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

}  // namespace consensor::kernels::cpu
