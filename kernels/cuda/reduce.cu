// The CUDA reduce family: ReduceSum/Mean/Max/Min and ArgMax (docs/DETERMINISM.md 4.1, 4.3).
// Bits identical to kernels/cpu/reduce_impl.h. Layout (kernels/checks/reduce.h, shared with
// the CPU): dims of size 1 are dropped and adjacent dims of the same kind (kept / reduced)
// merged, which keeps the row-major term order of every output. Then:
//   * no reduced dim left: one term per output (a map);
//   * innermost dim reduced: rows, one warp per chunk of <= 4096 terms of an output
//     (contiguous loads when a single reduced group remains, group offsets otherwise);
//   * innermost dim kept: columns, one thread per output column (coalesced across the
//     columns), running the 64 spec lanes in registers.
// Long outputs go through chunk partials in scratch (canonical_sum_device.cuh).
// ArgMax: one warp per row when the axis is innermost, else one thread per column.
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
    default: return InvalidArgument("reduce: unsupported dtype");
  }
}

template <typename T> using IntMaxOp = IntMaxMinOp<T, true>;
template <typename T> using IntMinOp = IntMaxMinOp<T, false>;

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

// One warp per row of n contiguous elements; lane l scans i == l (mod 32) keeping its first
// best, then the warp combines (larger key wins; equal keys: smaller index).
template <typename T>
CNSR_GLOBAL void ArgMaxRowsKernel(const T* x, int64_t rows, int64_t n, int64_t* out) {
  const int lane = LaneOf();
  for (int64_t r = GlobalThread() / kWarp; r < rows; r += GlobalThreads() / kWarp) {
    const T* row = x + r * n;
    long long best = INT64_MIN;
    long long idx = INT64_MAX;
    for (int64_t i = lane; i < n; i += kWarp) {
      const long long k = ArgMaxKey(row[i]);
      if (i == lane || k > best) {  // the lane's first element, or a strictly larger one
        best = k;
        idx = i;
      }
    }
    // A lane that saw no element keeps (INT64_MIN, INT64_MAX); it loses to every real
    // element (n >= 1, so lane 0 has one, and a real INT64_MIN key has a smaller index).
    for (int s = kWarp / 2; s >= 1; s >>= 1) {
      const long long ob = __shfl_xor_sync(CNSR_FULL_MASK, best, s);
      const long long oi = __shfl_xor_sync(CNSR_FULL_MASK, idx, s);
      if (ob > best || (ob == best && oi < idx)) {
        best = ob;
        idx = oi;
      }
    }
    if (lane == 0) out[r] = static_cast<int64_t>(idx);
  }
}

// One thread per (p, c) of [outer, n, inner].
template <typename T>
CNSR_GLOBAL void ArgMaxColsKernel(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t* out) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t p = t / inner, c = t - p * inner;
    const T* base = x + p * n * inner + c;
    long long best = ArgMaxKey(base[0]);
    int64_t idx = 0;
    for (int64_t a = 1; a < n; ++a) {
      const long long k = ArgMaxKey(base[a * inner]);
      if (k > best) {
        best = k;
        idx = a;
      }
    }
    out[t] = idx;
  }
}

template <typename T>
Status RunArgMaxTyped(const TensorView& xv, int64_t outer, int64_t n, int64_t inner, int64_t* out,
                      const LaunchContext& ctx) {
  const T* x = xv.as<const T>();
  if (inner == 1) {
    const Geometry g = GeometryFor(outer * kWarp, ctx);
    CNSR_LAUNCH(ArgMaxRowsKernel<T>, g.grid, g.block, 0, StreamOf(ctx), x, outer, n, out);
    return CheckLaunch("argmax rows");
  }
  const Geometry g = GeometryFor(outer * inner, ctx);
  CNSR_LAUNCH(ArgMaxColsKernel<T>, g.grid, g.block, 0, StreamOf(ctx), x, outer, n, inner, out);
  return CheckLaunch("argmax columns");
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

  const std::optional<ReduceLayout> layout = PlanReduction(x, p);
  const ReduceLayout* L = layout ? &*layout : nullptr;
  // reduce_mean divides by the term count rounded to nearest even.
  const float divisor = L ? static_cast<float>(L->n_terms) : 0.0f;

  switch (call.op) {
    case Op::kReduceSum: return DispatchDtype<IntSumOp, SumF32Op>(x, L, y, divisor, ctx);
    case Op::kReduceMean: return RunReduction<MeanF32Op>(x, L, y, divisor, ctx);  // f32 only (validated)
    case Op::kReduceMax: return DispatchDtype<IntMaxOp, F32MaxMinOp<true>>(x, L, y, divisor, ctx);
    case Op::kReduceMin: return DispatchDtype<IntMinOp, F32MaxMinOp<false>>(x, L, y, divisor, ctx);
    default: return InvalidArgument("reduce: unsupported op");
  }
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
