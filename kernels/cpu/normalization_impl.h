// Internal: softmax and layer_norm (docs/DETERMINISM.md 4.5), written once and compiled twice:
// by normalization.cc (portable) and normalization_avx2.cc (-mavx2 -mfma). Without
// contraction or fast-math, the vectorized and scalar versions of these loops perform the
// same IEEE operations per element, so both builds give identical bits. Everything is in
// an anonymous namespace so the two copies never merge at link time. Calls arrive
// validated by RunNormalization in normalization.cc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/checks/common.h"
#include "kernels/cpu/canonical_sum.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_impl.h"  // F32MaxMinOp, CombineRun
#include "kernels/detmath.h"

namespace consensor::kernels::cpu {

// normalization_avx2.cc: the same kernels compiled for AVX2 + FMA.
Status RunNormalizationAvx2(const KernelCall& call, const CpuContext& ctx);

namespace {

// Calls f(i) for i in [b, e). The fixed-width inner loop lets the compiler vectorize even
// with its cheapest cost model (no epilogue decisions); the tail runs scalar, with the same
// per-element operations.
template <class F>
inline void ForEachBlocked(int64_t b, int64_t e, const F& f) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    for (int j = 0; j < 8; ++j) f(i + j);
  }
  for (; i < e; ++i) f(i);
}

inline float RowMax(const float* x, int64_t n) {
  using MaxOp = F32MaxMinOp<true>;
  return MaxOp::Finish(CombineRun<MaxOp>(x, n, MaxOp::Init()));
}

// Rows this long are split across the pool (chunk-exact csum, order-free max).
constexpr int64_t kParallelRow = 1 << 16;

// ---------------------------------------------------------------------------------------
// softmax: m = max(x); e_i = exp(x_i - m); s = csum(e); y_i = e_i / s.

inline void SoftmaxRow(const float* x, float* y, int64_t n) {
  const float m = RowMax(x, n);
  ForEachBlocked(0, n, [&](int64_t i) { y[i] = detmath::exp(x[i] - m); });
  const float s = CsumContiguous(y, n);
  ForEachBlocked(0, n, [&](int64_t i) { y[i] = CanonNaN(y[i] / s); });
}

inline void SoftmaxRowParallel(const float* x, float* y, int64_t n, ThreadPool* pool) {
  using MaxOp = F32MaxMinOp<true>;
  const int64_t nblk = (n + kSumChunk - 1) / kSumChunk;
  std::vector<int32_t> part(static_cast<size_t>(nblk));
  pool->ParallelFor(nblk, 4, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t i0 = c * kSumChunk;
      part[c] = CombineRun<MaxOp>(x + i0, std::min(kSumChunk, n - i0), MaxOp::Init());
    }
  });
  int32_t acc = MaxOp::Init();
  for (int32_t v : part) acc = MaxOp::Combine(acc, v);
  const float m = MaxOp::Finish(acc);
  pool->ParallelFor(n, kSumChunk, [&](int64_t b, int64_t e) {
    ForEachBlocked(b, e, [&](int64_t i) { y[i] = detmath::exp(x[i] - m); });
  });
  const float s = CsumContiguousParallel(y, n, pool);
  pool->ParallelFor(n, kSumChunk,
                    [&](int64_t b, int64_t e) { ForEachBlocked(b, e, [&](int64_t i) { y[i] = CanonNaN(y[i] / s); }); });
}

// Softmax over the middle axis of [outer, n, inner] with inner > 1, for columns
// [c0, c0 + bw) of slice p. Vectorized across columns; each column keeps its exact order.
inline void SoftmaxColumns(const float* x, float* y, int64_t n, int64_t inner, int64_t bw, int32_t* mkey, float* mval,
                           float* s) {
  using MaxOp = F32MaxMinOp<true>;
  for (int64_t c = 0; c < bw; ++c) mkey[c] = MaxOp::Init();
  for (int64_t a = 0; a < n; ++a) {
    const float* row = x + a * inner;
    for (int64_t c = 0; c < bw; ++c) mkey[c] = MaxOp::Combine(mkey[c], MaxOp::Load(row[c]));
  }
  for (int64_t c = 0; c < bw; ++c) mval[c] = MaxOp::Finish(mkey[c]);
  for (int64_t a = 0; a < n; ++a) {
    const float* xr = x + a * inner;
    float* yr = y + a * inner;
    ForEachBlocked(0, bw, [&](int64_t c) { yr[c] = detmath::exp(xr[c] - mval[c]); });
  }
  CsumColumns(y, nullptr, inner, n, bw, s);
  for (int64_t a = 0; a < n; ++a) {
    float* yr = y + a * inner;
    ForEachBlocked(0, bw, [&](int64_t c) { yr[c] = CanonNaN(yr[c] / s[c]); });
  }
}

inline Status SoftmaxImpl(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& xv = call.in(0);
  const AxisSplit split = SplitAtAxis(xv, call.params->axis);
  const int64_t outer = split.outer, n = split.n, inner = split.inner;
  if (outer == 0 || inner == 0 || n == 0) return OkStatus();
  const float* x = xv.as<const float>();
  float* y = call.out(0).as<float>();
  ThreadPool* pool = ctx.pool;
  if (inner == 1) {
    if (n >= kParallelRow && outer < pool->num_threads()) {
      for (int64_t p = 0; p < outer; ++p) SoftmaxRowParallel(x + p * n, y + p * n, n, pool);
      return OkStatus();
    }
    pool->ParallelFor(outer, GrainFor(4 * n), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) SoftmaxRow(x + p * n, y + p * n, n);
    });
    return OkStatus();
  }
  const int64_t nb = (inner + kColWork - 1) / kColWork;
  pool->ParallelFor(outer * nb, GrainFor(4 * n * std::min(inner, kColWork)), [&](int64_t b, int64_t e) {
    int32_t mkey[kColWork];
    float mval[kColWork], s[kColWork];
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / nb, c0 = (t % nb) * kColWork;
      const int64_t off = p * n * inner + c0;
      SoftmaxColumns(x + off, y + off, n, inner, std::min(kColWork, inner - c0), mkey, mval, s);
    }
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------
// layer_norm over the trailing n elements of each row:
//   mean = csum(x) / float(n); d_i = x_i - mean; var = csum(d_i * d_i) / float(n);
//   r = 1 / sqrt(var + eps); y_i = (d_i * r) * scale_i [+ bias_i].

inline void LayerNormRow(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                         ThreadPool* par_pool) {
  const float count = static_cast<float>(n);
  const float sum = par_pool ? CsumContiguousParallel(x, n, par_pool) : CsumContiguous(x, n);
  const float mean = sum / count;
  auto apply = [&](const auto& body) {
    if (par_pool) {
      par_pool->ParallelFor(n, kSumChunk, [&](int64_t b, int64_t e) { ForEachBlocked(b, e, body); });
    } else {
      ForEachBlocked(0, n, body);
    }
  };
  apply([&](int64_t i) { y[i] = x[i] - mean; });  // d_i, kept in y
  const float sq = par_pool ? CsumContiguousParallel<true>(y, n, par_pool) : CsumContiguous<true>(y, n);
  const float var = sq / count;
  const float r = 1.0f / detmath::sqrt_rn(var + eps);
  if (bias) {
    apply([&](int64_t i) { y[i] = CanonNaN(((y[i] * r) * scale[i]) + bias[i]); });
  } else {
    apply([&](int64_t i) { y[i] = CanonNaN((y[i] * r) * scale[i]); });
  }
}

inline Status LayerNormImpl(const KernelCall& call, const CpuContext& ctx) {
  const TensorView& xv = call.in(0);
  const AxisSplit split = SplitAtAxis(xv, call.params->axis);
  const int64_t outer = split.outer, n = split.n * split.inner;  // rows of the trailing dims
  if (outer == 0 || n == 0) return OkStatus();
  const float* x = xv.as<const float>();
  const float* scale = call.in(1).as<const float>();
  const float* bias = call.num_inputs > 2 ? call.in(2).as<const float>() : nullptr;
  const float eps = call.params->epsilon;
  float* y = call.out(0).as<float>();
  ThreadPool* pool = ctx.pool;
  if (n >= kParallelRow && outer < pool->num_threads()) {
    for (int64_t p = 0; p < outer; ++p) LayerNormRow(x + p * n, y + p * n, n, scale, bias, eps, pool);
    return OkStatus();
  }
  pool->ParallelFor(outer, GrainFor(4 * n), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) LayerNormRow(x + p * n, y + p * n, n, scale, bias, eps, nullptr);
  });
  return OkStatus();
}

inline Status RunNormalizationImpl(const KernelCall& call, const CpuContext& ctx) {
  if (call.op == Op::kSoftmax) return SoftmaxImpl(call, ctx);
  return LayerNormImpl(call, ctx);
}

}  // namespace
}  // namespace consensor::kernels::cpu
