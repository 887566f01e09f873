// The CUDA normalization family: Softmax and LayerNorm (docs/DETERMINISM.md 4.5), bits
// identical to kernels/cpu/normalization_impl.h.
//   softmax: m = max(x) (section 1.1, order-free); e_i = exp(x_i - m) (detmath);
//     s = csum(e); y_i = canon(e_i / s).
//   layer_norm (rows of the trailing n elements): mean = csum(x) / float(n);
//     d_i = x_i - mean; var = csum(d_i * d_i) / float(n); r = 1 / sqrt(var + eps);
//     y_i = canon((d_i * r) * scale_i [+ bias_i]).
// Kernels:
//   * rows of n <= 4096 (softmax over the innermost axis, every layer_norm that fits): one
//     warp per row, fused: the warp max is a shfl_xor tree, each csum is the warp lane tree
//     of canonical_sum_device.cuh, results broadcast from lane 0.
//   * longer rows: separate launches: row max / mean (warp per chunk + partial levels),
//     a chunk kernel that writes e_i (softmax) or sums d_i^2 per chunk into partials,
//     partial levels, then an elementwise kernel.
//   * softmax over a non-innermost axis: one thread per column (max, then e_i and the
//     64-lane tree per chunk in registers, partial levels, then the division).
#include "kernels/checks/common.h"
#include "kernels/checks/normalization.h"
#include "kernels/cuda/canonical_sum_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/detmath.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

using MaxOp = F32MaxMinOp<true>;

// Sum of the canonical lane tree over a warp, broadcast to every lane.
template <class Term>
CNSR_DEVICE float WarpCsumAll(const Term& term, int64_t n, int lane) {
  const float v = WarpLaneTree<SumF32Op>(term, n, lane);
  return __shfl_sync(CNSR_FULL_MASK, v, 0);
}

// csum of n <= 4096 terms (n >= 1) is one lane tree; longer rows never reach the fused kernels.

// ---------------------------------------------------------------------------------------
// softmax, fused: one warp per row of n <= kChunk contiguous elements.

CNSR_GLOBAL void SoftmaxRowsWarpKernel(const float* x, float* y, int64_t rows, int64_t n) {
  const int lane = LaneOf();
  for (int64_t r = GlobalThread() / kWarp; r < rows; r += GlobalThreads() / kWarp) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    int32_t key = MaxOp::Init();
    for (int64_t i = lane; i < n; i += kWarp) key = MaxOp::Combine(key, MaxOp::Load(xr[i]));
    const float m = MaxOp::Finish(WarpAllCombine<MaxOp>(key), 0.0f);
    const float s = WarpCsumAll(
        [&](int64_t i) {
          const float e = detmath::exp(xr[i] - m);
          yr[i] = e;
          return e;
        },
        n, lane);
    // Each lane divides exactly the elements it wrote (no cross-lane ordering needed).
    for (int64_t base = 0; base < n; base += kLanes) {
      const int64_t i = base + lane;
      if (i < n) yr[i] = CanonF(yr[i] / s);
      if (i + kWarp < n) yr[i + kWarp] = CanonF(yr[i + kWarp] / s);
    }
  }
}

// softmax, long rows: e_i per chunk (one warp per (row, chunk)) with the chunk's lane tree
// written to partial[row * m + chunk]; mx[row] is the row max.
CNSR_GLOBAL void SoftmaxExpChunksKernel(const float* x, float* y, const float* mx, int64_t rows, int64_t n, int64_t m,
                                        float* partial) {
  const int lane = LaneOf();
  const int64_t total = rows * m;
  for (int64_t w = GlobalThread() / kWarp; w < total; w += GlobalThreads() / kWarp) {
    const int64_t r = w / m, c = w - r * m;
    const int64_t begin = c * kChunk;
    const int64_t len = (n - begin < kChunk) ? n - begin : kChunk;
    const float* xr = x + r * n + begin;
    float* yr = y + r * n + begin;
    const float mr = mx[r];
    const float v = WarpLaneTree<SumF32Op>(
        [&](int64_t i) {
          const float e = detmath::exp(xr[i] - mr);
          yr[i] = e;
          return e;
        },
        len, lane);
    if (lane == 0) partial[w] = v;
  }
}

// y[i] = canon(y[i] / s[i / n]) over rows of n contiguous elements.
CNSR_GLOBAL void DivideRowsKernel(float* y, const float* s, int64_t total, int64_t n) {
  for (int64_t i = GlobalThread(); i < total; i += GlobalThreads()) y[i] = CanonF(y[i] / s[i / n]);
}

// ---------------------------------------------------------------------------------------
// softmax over a middle axis of [outer, n, inner], inner > 1: one thread per column.

// mx[p * inner + c] = max over a of x[(p * n + a) * inner + c].
CNSR_GLOBAL void ColMaxKernel(const float* x, float* mx, int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t p = t / inner, c = t - p * inner;
    const float* base = x + p * n * inner + c;
    int32_t key = MaxOp::Init();
    for (int64_t a = 0; a < n; ++a) key = MaxOp::Combine(key, MaxOp::Load(base[a * inner]));
    mx[t] = MaxOp::Finish(key, 0.0f);
  }
}

// One thread per (p, chunk, c): e = exp(x - mx) written to y; the chunk's lane tree goes to
// partial[(p * m + chunk) * inner + c].
CNSR_GLOBAL void ColExpChunksKernel(const float* x, float* y, const float* mx, int64_t outer, int64_t n, int64_t inner,
                                    int64_t m, float* partial) {
  const int64_t total = outer * m * inner;
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t c = t % inner;
    const int64_t pc = t / inner;
    const int64_t p = pc / m, chunk = pc - p * m;
    const int64_t begin = chunk * kChunk;
    const int64_t len = (n - begin < kChunk) ? n - begin : kChunk;
    const float* xb = x + (p * n + begin) * inner + c;
    float* yb = y + (p * n + begin) * inner + c;
    const float mc = mx[p * inner + c];
    partial[t] = ThreadLaneTree<SumF32Op>(
        [&](int64_t a) {
          const float e = detmath::exp(xb[a * inner] - mc);
          yb[a * inner] = e;
          return e;
        },
        len);
  }
}

// y[(p * n + a) * inner + c] /= s[p * inner + c], canonicalized.
CNSR_GLOBAL void DivideColsKernel(float* y, const float* s, int64_t total, int64_t n, int64_t inner) {
  for (int64_t i = GlobalThread(); i < total; i += GlobalThreads()) {
    const int64_t c = i % inner;
    const int64_t p = i / (n * inner);
    y[i] = CanonF(y[i] / s[p * inner + c]);
  }
}

Status SoftmaxGpu(const KernelCall& call, const LaunchContext& ctx) {
  const TensorView& xv = call.in(0);
  const AxisSplit split = SplitAtAxis(xv, call.params->axis);
  const int64_t outer = split.outer, n = split.n, inner = split.inner;
  if (outer == 0 || inner == 0 || n == 0) return OkStatus();
  const float* x = xv.as<const float>();
  float* y = call.out(0).as<float>();
  const int64_t m = CeilDiv(n, kChunk);
  if (inner == 1) {
    if (m == 1) {
      const Geometry g = GeometryFor(outer * kWarp, ctx);
      CNSR_LAUNCH(SoftmaxRowsWarpKernel, g.grid, g.block, 0, StreamOf(ctx), x, y, outer, n);
      return CheckLaunch("softmax rows");
    }
    // Scratch: mx[outer] | s[outer] | partial[outer * m] | max levels | sum levels.
    const int64_t b_mx = AlignUp(outer * 4), b_s = AlignUp(outer * 4), b_part = AlignUp(outer * m * 4);
    const int64_t b_maxl = RowsScratchBytes<MaxOp>(outer, n), b_suml = RowsScratchBytes<SumF32Op>(outer, m);
    ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(b_mx + b_s + b_part + b_maxl + b_suml));
    uint8_t* sp = static_cast<uint8_t*>(scratch);
    float* mx = reinterpret_cast<float*>(sp);
    float* s = reinterpret_cast<float*>(sp + b_mx);
    float* part = reinterpret_cast<float*>(sp + b_mx + b_s);
    void* maxl = sp + b_mx + b_s + b_part;
    void* suml = sp + b_mx + b_s + b_part + b_maxl;
    const Groups none;
    RETURN_IF_ERROR((RunRows<MaxOp, true>(ctx, x, none, none, outer, n, mx, 0.0f, maxl)));
    const Geometry g = GeometryFor(outer * m * kWarp, ctx);
    CNSR_LAUNCH(SoftmaxExpChunksKernel, g.grid, g.block, 0, StreamOf(ctx), x, y, mx, outer, n, m, part);
    RETURN_IF_ERROR(CheckLaunch("softmax exp chunks"));
    RETURN_IF_ERROR((RunRows<SumF32Op, true>(ctx, part, none, none, outer, m, s, 0.0f, suml)));
    const Geometry gd = GeometryFor(outer * n, ctx);
    CNSR_LAUNCH(DivideRowsKernel, gd.grid, gd.block, 0, StreamOf(ctx), y, s, outer * n, n);
    return CheckLaunch("softmax divide");
  }
  // Columns. Scratch: mx[outer*inner] | s[outer*inner] | partial[outer*m*inner] | sum levels.
  const int64_t cols = outer * inner;
  const int64_t b_mx = AlignUp(cols * 4), b_s = AlignUp(cols * 4);
  const int64_t b_part = m > 1 ? AlignUp(cols * m * 4) : 0;
  const int64_t b_suml = m > 1 ? ColsScratchBytes<SumF32Op>(outer, inner, m) : 0;
  ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(b_mx + b_s + b_part + b_suml));
  uint8_t* sp = static_cast<uint8_t*>(scratch);
  float* mx = reinterpret_cast<float*>(sp);
  float* s = reinterpret_cast<float*>(sp + b_mx);
  float* part = m > 1 ? reinterpret_cast<float*>(sp + b_mx + b_s) : s;
  void* suml = sp + b_mx + b_s + b_part;
  const Geometry gm = GeometryFor(cols, ctx);
  CNSR_LAUNCH(ColMaxKernel, gm.grid, gm.block, 0, StreamOf(ctx), x, mx, outer, n, inner);
  RETURN_IF_ERROR(CheckLaunch("softmax column max"));
  const Geometry ge = GeometryFor(cols * m, ctx);
  CNSR_LAUNCH(ColExpChunksKernel, ge.grid, ge.block, 0, StreamOf(ctx), x, y, mx, outer, n, inner, m, part);
  RETURN_IF_ERROR(CheckLaunch("softmax column exp chunks"));
  if (m > 1) {
    // Partials are laid out [p][chunk][c]: columns of the (outer, m, inner) array.
    const Groups outer_g = OneGroup(outer, m * inner), red_g = OneGroup(m, inner);
    RETURN_IF_ERROR(RunCols<SumF32Op>(ctx, part, outer_g, red_g, outer, inner, m, s, 0.0f, suml));
  }
  const Geometry gd = GeometryFor(outer * n * inner, ctx);
  CNSR_LAUNCH(DivideColsKernel, gd.grid, gd.block, 0, StreamOf(ctx), y, s, outer * n * inner, n, inner);
  return CheckLaunch("softmax column divide");
}

// ---------------------------------------------------------------------------------------
// layer_norm.

CNSR_DEVICE float LnOut(float d, float r, const float* scale, const float* bias, int64_t i) {
  const float v = (d * r) * scale[i];
  return CanonF(bias ? v + bias[i] : v);
}

// Fused: one warp per row of n <= kChunk elements.
CNSR_GLOBAL void LayerNormRowsWarpKernel(const float* x, float* y, int64_t rows, int64_t n, const float* scale,
                                         const float* bias, float count, float eps) {
  const int lane = LaneOf();
  for (int64_t r = GlobalThread() / kWarp; r < rows; r += GlobalThreads() / kWarp) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mean = WarpCsumAll([&](int64_t i) { return xr[i]; }, n, lane) / count;
    const float sq = WarpCsumAll(
        [&](int64_t i) {
          const float d = xr[i] - mean;
          return d * d;
        },
        n, lane);
    const float var = sq / count;
    const float rr = 1.0f / detmath::sqrt_rn(var + eps);
    for (int64_t i = lane; i < n; i += kWarp) yr[i] = LnOut(xr[i] - mean, rr, scale, bias, i);
  }
}

// Long rows: partial[row * m + chunk] = lane tree of (x_i - mean)^2 over the chunk.
CNSR_GLOBAL void LayerNormSqChunksKernel(const float* x, const float* mean, int64_t rows, int64_t n, int64_t m,
                                         float* partial) {
  const int lane = LaneOf();
  const int64_t total = rows * m;
  for (int64_t w = GlobalThread() / kWarp; w < total; w += GlobalThreads() / kWarp) {
    const int64_t r = w / m, c = w - r * m;
    const int64_t begin = c * kChunk;
    const int64_t len = (n - begin < kChunk) ? n - begin : kChunk;
    const float* xr = x + r * n + begin;
    const float mu = mean[r];
    const float v = WarpLaneTree<SumF32Op>(
        [&](int64_t i) {
          const float d = xr[i] - mu;
          return d * d;
        },
        len, lane);
    if (lane == 0) partial[w] = v;
  }
}

CNSR_GLOBAL void LayerNormApplyKernel(const float* x, float* y, int64_t total, int64_t n, const float* mean,
                                      const float* sq, const float* scale, const float* bias, float count, float eps) {
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t r = t / n, i = t - r * n;
    const float var = sq[r] / count;
    const float rr = 1.0f / detmath::sqrt_rn(var + eps);
    y[t] = LnOut(x[t] - mean[r], rr, scale, bias, i);
  }
}

Status LayerNormGpu(const KernelCall& call, const LaunchContext& ctx) {
  const TensorView& xv = call.in(0);
  const AxisSplit split = SplitAtAxis(xv, call.params->axis);
  const int64_t outer = split.outer, n = split.n * split.inner;  // rows of the trailing dims
  if (outer == 0 || n == 0) return OkStatus();
  const float* x = xv.as<const float>();
  const float* scale = call.in(1).as<const float>();
  const float* bias = call.num_inputs > 2 ? call.in(2).as<const float>() : nullptr;
  const float eps = call.params->epsilon;
  const float count = static_cast<float>(n);  // round to nearest even
  float* y = call.out(0).as<float>();
  const int64_t m = CeilDiv(n, kChunk);
  if (m == 1) {
    const Geometry g = GeometryFor(outer * kWarp, ctx);
    CNSR_LAUNCH(LayerNormRowsWarpKernel, g.grid, g.block, 0, StreamOf(ctx), x, y, outer, n, scale, bias, count, eps);
    return CheckLaunch("layer_norm rows");
  }
  // Scratch: mean[outer] | sq[outer] | partial[outer * m] | mean levels | sq levels.
  const int64_t b_mean = AlignUp(outer * 4), b_sq = AlignUp(outer * 4), b_part = AlignUp(outer * m * 4);
  const int64_t b_l1 = RowsScratchBytes<SumF32Op>(outer, n), b_l2 = RowsScratchBytes<SumF32Op>(outer, m);
  ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(b_mean + b_sq + b_part + b_l1 + b_l2));
  uint8_t* sp = static_cast<uint8_t*>(scratch);
  float* mean = reinterpret_cast<float*>(sp);
  float* sq = reinterpret_cast<float*>(sp + b_mean);
  float* part = reinterpret_cast<float*>(sp + b_mean + b_sq);
  void* l1 = sp + b_mean + b_sq + b_part;
  void* l2 = sp + b_mean + b_sq + b_part + b_l1;
  const Groups none;
  // mean = csum(x) / count (a NaN mean is canonicalized; it only ever yields NaN outputs).
  RETURN_IF_ERROR((RunRows<MeanF32Op, true>(ctx, x, none, none, outer, n, mean, count, l1)));
  const Geometry g = GeometryFor(outer * m * kWarp, ctx);
  CNSR_LAUNCH(LayerNormSqChunksKernel, g.grid, g.block, 0, StreamOf(ctx), x, mean, outer, n, m, part);
  RETURN_IF_ERROR(CheckLaunch("layer_norm variance chunks"));
  RETURN_IF_ERROR((RunRows<SumF32Op, true>(ctx, part, none, none, outer, m, sq, 0.0f, l2)));
  const Geometry ga = GeometryFor(outer * n, ctx);
  CNSR_LAUNCH(LayerNormApplyKernel, ga.grid, ga.block, 0, StreamOf(ctx), x, y, outer * n, n, mean, sq, scale, bias,
              count, eps);
  return CheckLaunch("layer_norm apply");
}

}  // namespace

Status RunNormalization(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(ValidateNormalization(call));
  if (call.op == Op::kSoftmax) return SoftmaxGpu(call, ctx);
  return LayerNormGpu(call, ctx);
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
