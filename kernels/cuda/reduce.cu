// The CUDA reduce family: ReduceSum/Mean/Max/Min/Prod, ArgMax, TopK and CumSum (docs/DETERMINISM.md 4.1, 4.3).
// Bits identical to kernels/cpu/reduce_impl.h. Layout (kernels/checks/reduce.h, shared with
// the CPU): dims of size 1 are dropped and adjacent dims of the same kind (kept / reduced)
// merged, which keeps the row-major term order of every output. Then:
//   * no reduced dim left: one term per output (a map);
//   * innermost dim reduced: rows, one warp per chunk of <= 4096 terms of an output
//     (contiguous loads when a single reduced group remains, group offsets otherwise);
//   * innermost dim kept: columns, one thread per output column (coalesced across the
//     columns), running the 64 spec lanes in registers.
// Long outputs go through chunk partials in scratch (canonical_sum_device.cuh).
// ArgMax: one warp per chunk of a row when the axis is innermost, else one thread per
// chunk of a column; rows or columns longer than a chunk combine the chunk results.
#include <type_traits>

#include "kernels/checks/common.h"
#include "kernels/checks/reduce.h"
#include "kernels/cuda/canonical_sum_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

template <class Op>
Status RunReduction(const TensorView& xv, const ReduceLayout* L, TensorView& yv, float divisor,
                    const LaunchContext& ctx) {
  using In = typename Op::In;
  using Out = typename Op::Out;
  Out* out = yv.as<Out>();
  const int64_t n_out = yv.num_elements();
  if (L == nullptr) {  // empty reduction
    const Geometry g = GeometryFor(n_out, ctx);
    CNSR_LAUNCH(FillEmptyKernel<Op>, g.grid, g.block, 0, StreamOf(ctx), out, n_out);
    return CheckLaunch("reduce (empty)");
  }
  const In* x = xv.as<const In>();
  if (L->red.n == 0) {
    const Geometry g = GeometryFor(n_out, ctx);
    CNSR_LAUNCH(SingleTermKernel<Op>, g.grid, g.block, 0, StreamOf(ctx), x, out, n_out, divisor);
    return CheckLaunch("reduce (single term)");
  }
  if (L->inner_reduced) {
    void* scratch = nullptr;
    const int64_t bytes = RowsScratchBytes<Op>(L->n_out, L->n_terms);
    if (bytes > 0) {
      ASSIGN_OR_RETURN(scratch, ctx.scratch->Get(bytes));
    }
    if (L->red.n == 1) {  // every kept dim is outside: contiguous rows
      return RunRows<Op, true>(ctx, x, L->kept, L->red, L->n_out, L->n_terms, out, divisor, scratch);
    }
    return RunRows<Op, false>(ctx, x, L->kept, L->red, L->n_out, L->n_terms, out, divisor, scratch);
  }
  // Innermost dim kept: columns.
  Groups outer = L->kept;
  const int64_t C = outer.size[outer.n - 1];
  --outer.n;
  const int64_t n_outer = L->n_out / C;
  void* scratch = nullptr;
  const int64_t bytes = ColsScratchBytes<Op>(n_outer, C, L->n_terms);
  if (bytes > 0) {
    ASSIGN_OR_RETURN(scratch, ctx.scratch->Get(bytes));
  }
  return RunCols<Op>(ctx, x, outer, L->red, n_outer, C, L->n_terms, out, divisor, scratch);
}

template <template <typename> class IntOp, class F32Op>
Status DispatchDtype(const TensorView& x, const ReduceLayout* L, TensorView& y, float divisor,
                     const LaunchContext& ctx) {
  switch (x.dtype) {
    case DType::kF32: return RunReduction<F32Op>(x, L, y, divisor, ctx);
    case DType::kI32: return RunReduction<IntOp<int32_t>>(x, L, y, divisor, ctx);
    case DType::kI8: return RunReduction<IntOp<int8_t>>(x, L, y, divisor, ctx);
    case DType::kI64: return RunReduction<IntOp<int64_t>>(x, L, y, divisor, ctx);
    case DType::kU8: return RunReduction<IntOp<uint8_t>>(x, L, y, divisor, ctx);
    case DType::kI16: return RunReduction<IntOp<int16_t>>(x, L, y, divisor, ctx);
    case DType::kU16: return RunReduction<IntOp<uint16_t>>(x, L, y, divisor, ctx);
    case DType::kU32: return RunReduction<IntOp<uint32_t>>(x, L, y, divisor, ctx);
    case DType::kU64: return RunReduction<IntOp<uint64_t>>(x, L, y, divisor, ctx);
    default: return InvalidArgument("reduce: unsupported dtype");
  }
}

template <typename T>
using IntMaxOp = IntMaxMinOp<T, true>;
template <typename T>
using IntMinOp = IntMaxMinOp<T, false>;

// ---------------------------------------------------------------------------------------
// ReduceProd: one thread per output runs the sequential chain p = p * term in row-major
// term order (DETERMINISM.md 4.3), as the CPU does; integers wrap. An empty reduction
// (n_terms 0) leaves p = 1.

template <typename T>
CNSR_DEVICE T ProdStep(T acc, T term) {
  if constexpr (std::is_same<T, float>::value) {
    return acc * term;
  } else {
    // At least 32 bits: u16 operands must not promote to int, where 65535 * 65535 overflows.
    using U = typename std::make_unsigned<T>::type;
    using W = typename std::conditional<(sizeof(T) < 4), uint32_t, U>::type;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(acc)) * static_cast<W>(static_cast<U>(term))));
  }
}

template <typename T>
CNSR_GLOBAL void ProdKernel(const T* x, ReduceGroups kept, ReduceGroups red, int64_t n_out, int64_t n_terms, T* out) {
  for (int64_t o = GlobalThread(); o < n_out; o += GlobalThreads()) {
    int64_t base = 0, rest = o;
    for (int k = kept.n - 1; k >= 0; --k) {
      base += (rest % kept.size[k]) * kept.stride[k];
      rest /= kept.size[k];
    }
    T acc = static_cast<T>(1);
    int64_t idx[kMaxRank] = {};
    int64_t off = 0;
    for (int64_t t = 0; t < n_terms; ++t) {
      acc = ProdStep(acc, x[base + off]);
      for (int k = red.n - 1; k >= 0; --k) {
        off += red.stride[k];
        if (++idx[k] < red.size[k]) break;
        off -= red.stride[k] * red.size[k];
        idx[k] = 0;
      }
    }
    if constexpr (std::is_same<T, float>::value) acc = detmath::canonicalize_nan(acc);
    out[o] = acc;
  }
}

template <typename T>
Status RunProdTyped(const TensorView& xv, const ReduceLayout* L, TensorView& yv, const LaunchContext& ctx) {
  const int64_t n_out = yv.num_elements();
  const ReduceGroups none;
  const Geometry g = GeometryFor(n_out, ctx);
  CNSR_LAUNCH(ProdKernel<T>, g.grid, g.block, 0, StreamOf(ctx), xv.as<const T>(), L ? L->kept : none, L ? L->red : none,
              n_out, L ? L->n_terms : int64_t{0}, yv.as<T>());
  return CheckLaunch("reduce_prod");
}

// ---------------------------------------------------------------------------------------
// ArgMax: index of the first maximal element; NaN is larger than everything (first NaN
// wins); -0 == +0 (first wins).

CNSR_DEVICE long long ArgMaxKey(float v) {
  uint32_t b = detmath::as_uint(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return INT64_MAX;
  if (b == 0x80000000u) b = 0;
  return F32OrderKey(b);
}
CNSR_DEVICE long long ArgMaxKey(int32_t v) { return v; }
CNSR_DEVICE long long ArgMaxKey(int8_t v) { return v; }
CNSR_DEVICE long long ArgMaxKey(int64_t v) { return static_cast<long long>(v); }

// Argmax splits the axis into chunks so a few long rows (or columns) still fill the GPU:
// each chunk yields its first best (key, index), then one thread per output takes the
// chunk results in index order. "Larger key wins, equal keys keep the smaller index" is a
// total order, so the chunking never changes the answer.
constexpr int64_t kArgMaxRowChunk = 4096;  // one warp: 128 elements per lane
constexpr int64_t kArgMaxColChunk = 256;   // one thread, strided (coalesced across columns)

CNSR_DEVICE void ArgMaxTake(long long key, int64_t index, long long& best, int64_t& best_index) {
  if (key > best || (key == best && index < best_index)) {
    best = key;
    best_index = index;
  }
}

// One warp per (row r, chunk c) of rows of n contiguous elements, m chunks per row; lane l
// scans i == l (mod 32) of the chunk keeping its first best, then the warp combines. With
// m == 1 the warp writes out[r]; otherwise the chunk's best goes to keys/indices[r*m + c].
template <typename T>
CNSR_GLOBAL void ArgMaxRowsKernel(const T* x, int64_t rows, int64_t n, int64_t m, int64_t* out, long long* keys,
                                  int64_t* indices) {
  const int lane = LaneOf();
  for (int64_t w = GlobalThread() / kWarp; w < rows * m; w += GlobalThreads() / kWarp) {
    const int64_t r = w / m, c = w - r * m;
    const int64_t begin = c * kArgMaxRowChunk;
    const int64_t end = (n - begin < kArgMaxRowChunk) ? n : begin + kArgMaxRowChunk;
    const T* row = x + r * n;
    // A lane that sees no element keeps (INT64_MIN, INT64_MAX): it loses to every real
    // element (lane 0 always has one, and a real INT64_MIN key has a smaller index).
    long long best = INT64_MIN;
    int64_t idx = INT64_MAX;
    for (int64_t i = begin + lane; i < end; i += kWarp) ArgMaxTake(ArgMaxKey(row[i]), i, best, idx);
    for (int s = kWarp / 2; s >= 1; s >>= 1) {
      const long long ob = __shfl_xor_sync(CNSR_FULL_MASK, best, s);
      const long long oi = __shfl_xor_sync(CNSR_FULL_MASK, static_cast<long long>(idx), s);
      ArgMaxTake(ob, static_cast<int64_t>(oi), best, idx);
    }
    if (lane == 0) {
      if (m == 1) {
        out[r] = idx;
      } else {
        keys[w] = best;
        indices[w] = idx;
      }
    }
  }
}

// One thread per (p, chunk c, column j) of [outer, n, inner], m chunks along n. With m == 1
// it writes out[p*inner + j]; otherwise keys/indices[(p*m + c)*inner + j].
template <typename T>
CNSR_GLOBAL void ArgMaxColsKernel(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t m, int64_t* out,
                                  long long* keys, int64_t* indices) {
  const int64_t total = outer * m * inner;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t pc = t / inner, j = t - pc * inner;
    const int64_t p = pc / m, c = pc - p * m;
    const int64_t begin = c * kArgMaxColChunk;
    const int64_t end = (n - begin < kArgMaxColChunk) ? n : begin + kArgMaxColChunk;
    const T* column = x + p * n * inner + j;
    long long best = ArgMaxKey(column[begin * inner]);
    int64_t idx = begin;
    for (int64_t a = begin + 1; a < end; ++a) {
      const long long k = ArgMaxKey(column[a * inner]);
      if (k > best) {  // strictly larger: the first best stays
        best = k;
        idx = a;
      }
    }
    if (m == 1) {
      out[p * inner + j] = idx;
    } else {
      keys[t] = best;
      indices[t] = idx;
    }
  }
}

// One thread per output (p, j): the m chunk results of (p, j), at (p*m + c)*inner + j,
// taken in chunk order (rows are the case inner == 1).
CNSR_GLOBAL void ArgMaxCombineKernel(const long long* keys, const int64_t* indices, int64_t outer, int64_t m,
                                     int64_t inner, int64_t* out) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t p = t / inner, j = t - p * inner;
    const int64_t first = p * m * inner + j;
    long long best = keys[first];
    int64_t idx = indices[first];
    for (int64_t c = 1; c < m; ++c) ArgMaxTake(keys[first + c * inner], indices[first + c * inner], best, idx);
    out[t] = idx;
  }
}

template <typename T>
Status RunArgMaxTyped(const TensorView& xv, int64_t outer, int64_t n, int64_t inner, int64_t* out,
                      const LaunchContext& ctx) {
  const T* x = xv.as<const T>();
  const bool rows = inner == 1;
  const int64_t m = CeilDiv(n, rows ? kArgMaxRowChunk : kArgMaxColChunk);
  long long* keys = nullptr;
  int64_t* indices = nullptr;
  const int64_t partials = outer * m * inner;
  if (m > 1) {
    const int64_t key_bytes = AlignUp(partials * static_cast<int64_t>(sizeof(long long)));
    ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(key_bytes + partials * static_cast<int64_t>(sizeof(int64_t))));
    keys = static_cast<long long*>(scratch);
    indices = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(scratch) + key_bytes);
  }
  if (rows) {
    const Geometry g = GeometryFor(outer * m * kWarp, ctx);
    CNSR_LAUNCH(ArgMaxRowsKernel<T>, g.grid, g.block, 0, StreamOf(ctx), x, outer, n, m, out, keys, indices);
    RETURN_IF_ERROR(CheckLaunch("argmax rows"));
  } else {
    const Geometry g = GeometryFor(partials, ctx);
    CNSR_LAUNCH(ArgMaxColsKernel<T>, g.grid, g.block, 0, StreamOf(ctx), x, outer, n, inner, m, out, keys, indices);
    RETURN_IF_ERROR(CheckLaunch("argmax columns"));
  }
  if (m == 1) return OkStatus();
  const Geometry g = GeometryFor(outer * inner, ctx);
  CNSR_LAUNCH(ArgMaxCombineKernel, g.grid, g.block, 0, StreamOf(ctx), keys, indices, outer, m, inner, out);
  return CheckLaunch("argmax (chunk results)");
}

// TopK: one thread per slice keeps the slice's k first elements sorted in its output row,
// inserting each new element after every kept one whose key is as good (kept indices are
// smaller, so ties keep index order) and dropping the last when the row is full. O(n*k)
// per slice; the order is total, so this gives the CPU's indices.
template <typename T>
CNSR_GLOBAL void TopKKernel(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest,
                            int64_t* out) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t p = t / inner, j = t - p * inner;
    const T* column = x + p * n * inner + j;
    int64_t* row = out + p * k * inner + j;
    int64_t count = 0;
    for (int64_t a = 0; a < n && k > 0; ++a) {
      const long long key = ArgMaxKey(column[a * inner]);
      if (count == k) {
        const long long last = ArgMaxKey(column[row[(k - 1) * inner] * inner]);
        if (!(largest ? key > last : key < last)) continue;
      }
      int64_t pos = count < k ? count : k - 1;
      while (pos > 0) {
        const int64_t prev = row[(pos - 1) * inner];
        const long long prev_key = ArgMaxKey(column[prev * inner]);
        if (!(largest ? key > prev_key : key < prev_key)) break;
        row[pos * inner] = prev;
        --pos;
      }
      row[pos * inner] = a;
      if (count < k) ++count;
    }
  }
}

template <typename T>
Status RunTopKTyped(const TensorView& xv, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest,
                    int64_t* out, const LaunchContext& ctx) {
  const Geometry g = GeometryFor(outer * inner, ctx);
  CNSR_LAUNCH(TopKKernel<T>, g.grid, g.block, 0, StreamOf(ctx), xv.as<const T>(), outer, n, inner, k, largest, out);
  return CheckLaunch("top_k");
}

// ---------------------------------------------------------------------------------------
// CumSum (DETERMINISM.md 4.6a): one thread per line (outer row, inner column), coalesced
// across the inner columns, runs the line's sequential chain as the CPU does: f32 and every
// integer dtype (the CUDA backends have no f64 kernels; Supports() refuses f64).

template <typename T>
CNSR_DEVICE T CumSumStep(T acc, T term) {
  if constexpr (std::is_same<T, float>::value) {
    return acc + term;
  } else {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(term)));
  }
}

template <typename T>
CNSR_DEVICE T CumSumOut(T v) {
  if constexpr (std::is_same<T, float>::value) {
    return detmath::canonicalize_nan(v);
  } else {
    return v;
  }
}

template <typename T>
CNSR_GLOBAL void CumSumKernel(const T* x, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                              T* out) {
  for (int64_t line = GlobalThread(); line < outer * inner; line += GlobalThreads()) {
    const int64_t o = line / inner, j = line % inner;
    const T* xs = x + o * n * inner + j;
    T* ys = out + o * n * inner + j;
    T acc = std::is_same<T, float>::value ? static_cast<T>(-0.0f) : static_cast<T>(0);
    for (int64_t step = 0; step < n; ++step) {
      const int64_t k = reverse ? n - 1 - step : step;
      const T before = step == 0 ? static_cast<T>(0) : CumSumOut(acc);
      acc = CumSumStep(acc, xs[k * inner]);
      ys[k * inner] = exclusive ? before : CumSumOut(acc);
    }
  }
}

template <typename T>
Status RunCumSumTyped(const TensorView& xv, const OpParams& p, TensorView& yv, const LaunchContext& ctx) {
  const AxisSplit split = SplitAtAxis(xv, p.axis);
  const Geometry g = GeometryFor(split.outer * split.inner, ctx);
  CNSR_LAUNCH(CumSumKernel<T>, g.grid, g.block, 0, StreamOf(ctx), xv.as<const T>(), split.outer, split.n, split.inner,
              p.exclusive, p.reverse, yv.as<T>());
  return CheckLaunch("cumsum");
}

}  // namespace

Status RunReduce(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(ValidateReduce(call));
  const TensorView& x = call.in(0);
  TensorView& y = call.out(0);
  const OpParams& p = *call.params;
  if (y.num_elements() == 0) return OkStatus();

  if (call.op == Op::kArgMax) {
    const AxisSplit split = SplitAtAxis(x, p.axis);
    const int64_t outer = split.outer, n = split.n, inner = split.inner;
    int64_t* out = y.as<int64_t>();
    switch (x.dtype) {
      case DType::kF32: return RunArgMaxTyped<float>(x, outer, n, inner, out, ctx);
      case DType::kI32: return RunArgMaxTyped<int32_t>(x, outer, n, inner, out, ctx);
      case DType::kI8: return RunArgMaxTyped<int8_t>(x, outer, n, inner, out, ctx);
      case DType::kI64: return RunArgMaxTyped<int64_t>(x, outer, n, inner, out, ctx);
      default: return InvalidArgument("argmax: unsupported dtype");
    }
  }
  if (call.op == Op::kCumSum) {
    switch (x.dtype) {
      case DType::kF32: return RunCumSumTyped<float>(x, p, y, ctx);
      case DType::kI32: return RunCumSumTyped<int32_t>(x, p, y, ctx);
      case DType::kI8: return RunCumSumTyped<int8_t>(x, p, y, ctx);
      case DType::kI64: return RunCumSumTyped<int64_t>(x, p, y, ctx);
      case DType::kU8: return RunCumSumTyped<uint8_t>(x, p, y, ctx);
      case DType::kI16: return RunCumSumTyped<int16_t>(x, p, y, ctx);
      case DType::kU16: return RunCumSumTyped<uint16_t>(x, p, y, ctx);
      case DType::kU32: return RunCumSumTyped<uint32_t>(x, p, y, ctx);
      case DType::kU64: return RunCumSumTyped<uint64_t>(x, p, y, ctx);
      default: return InvalidArgument("cumsum: unsupported dtype");
    }
  }
  if (call.op == Op::kTopK) {
    const AxisSplit split = SplitAtAxis(x, p.axis);
    const int64_t outer = split.outer, n = split.n, inner = split.inner;
    int64_t* out = y.as<int64_t>();
    switch (x.dtype) {
      case DType::kF32: return RunTopKTyped<float>(x, outer, n, inner, p.k, p.largest, out, ctx);
      case DType::kI32: return RunTopKTyped<int32_t>(x, outer, n, inner, p.k, p.largest, out, ctx);
      case DType::kI8: return RunTopKTyped<int8_t>(x, outer, n, inner, p.k, p.largest, out, ctx);
      case DType::kI64: return RunTopKTyped<int64_t>(x, outer, n, inner, p.k, p.largest, out, ctx);
      default: return InvalidArgument("top_k: unsupported dtype");
    }
  }

  const std::optional<ReduceLayout> layout = PlanReduction(x, p);
  const ReduceLayout* L = layout ? &*layout : nullptr;
  // reduce_mean divides by the term count rounded to nearest even.
  const float divisor = L ? static_cast<float>(L->n_terms) : 0.0f;

  switch (call.op) {
    case Op::kReduceSum: return DispatchDtype<IntSumOp, SumF32Op>(x, L, y, divisor, ctx);
    case Op::kReduceMean: return RunReduction<MeanF32Op>(x, L, y, divisor, ctx);  // f32 only (validated)
    case Op::kReduceMax: return DispatchDtype<IntMaxOp, F32MaxMinOp<true>>(x, L, y, divisor, ctx);
    case Op::kReduceMin: return DispatchDtype<IntMinOp, F32MaxMinOp<false>>(x, L, y, divisor, ctx);
    case Op::kReduceProd:
      switch (x.dtype) {
        case DType::kF32: return RunProdTyped<float>(x, L, y, ctx);
        case DType::kI32: return RunProdTyped<int32_t>(x, L, y, ctx);
        case DType::kI8: return RunProdTyped<int8_t>(x, L, y, ctx);
        case DType::kI64: return RunProdTyped<int64_t>(x, L, y, ctx);
        case DType::kU8: return RunProdTyped<uint8_t>(x, L, y, ctx);
        case DType::kI16: return RunProdTyped<int16_t>(x, L, y, ctx);
        case DType::kU16: return RunProdTyped<uint16_t>(x, L, y, ctx);
        case DType::kU32: return RunProdTyped<uint32_t>(x, L, y, ctx);
        case DType::kU64: return RunProdTyped<uint64_t>(x, L, y, ctx);
        default: return InvalidArgument("reduce_prod: unsupported dtype");
      }
    default: return InvalidArgument("reduce: unsupported op");
  }
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
