// The CUDA pool family: MaxPool2D and AvgPool2D on NCHW f32 (docs/DETERMINISM.md 4.5),
// bits identical to kernels/cpu/pool.cc. One thread per output element (adjacent threads
// take adjacent ow, so loads of one window row are close together), each following the
// spec's row-major window order sequentially:
//   max_pool2d: max (section 1.1) over the in-input positions, bits copied; the first NaN
//     in window order is copied (payload included); an all-padding window gives -inf.
//   avg_pool2d: s = -0.0; s = s + x in window order; s / float(count), canonical NaN.
#include "kernels/checks/pool.h"
#include "kernels/cuda/canonical_sum_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

// Window positions inside the input along one axis: k in [*lo, *hi) with
// 0 <= start + k*dil < size.
CNSR_DEVICE void ValidRange(int64_t start, int64_t dil, int64_t k, int64_t size, int64_t* lo, int64_t* hi) {
  int64_t l = 0;
  if (start < 0) l = (-start + dil - 1) / dil;
  int64_t h = 0;
  if (start < size) {
    h = (size - 1 - start) / dil + 1;
    if (h > k) h = k;
  }
  *lo = l;
  *hi = l > h ? l : h;
}

CNSR_GLOBAL void MaxPoolKernel(const uint32_t* x, uint32_t* y, PoolGeom g, int64_t total) {
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t ow = t % g.OW;
    const int64_t oh = (t / g.OW) % g.OH;
    const int64_t plane = t / (g.OW * g.OH);
    const int64_t h0 = oh * g.sh - g.top, w0 = ow * g.sw - g.left;
    int64_t khl, khh, kwl, kwh;
    ValidRange(h0, g.dh, g.kh, g.H, &khl, &khh);
    ValidRange(w0, g.dw, g.kw, g.W, &kwl, &kwh);
    const uint32_t* xp = x + plane * g.H * g.W;
    uint32_t best = 0xFF800000u;  // -inf: a window entirely in padding
    bool have = false, nan = false;
    for (int64_t i = khl; i < khh && !nan; ++i) {
      const int64_t row = (h0 + i * g.dh) * g.W + w0;  // index math only: w0 may be negative
      for (int64_t j = kwl; j < kwh; ++j) {
        const uint32_t b = xp[row + j * g.dw];
        if ((b & 0x7FFFFFFFu) > 0x7F800000u) {  // the first NaN wins, bits copied
          best = b;
          nan = true;
          break;
        }
        const float v = detmath::as_float(b), m = detmath::as_float(best);
        // v > m, or equal zeros where v is +0 and m is -0 (max(-0, +0) = +0).
        if (!have || v > m || (v == m && b == 0u)) best = b;
        have = true;
      }
    }
    y[t] = best;
  }
}

CNSR_GLOBAL void AvgPoolKernel(const float* x, float* y, PoolGeom g, int64_t total, bool include_pad) {
  const float full = static_cast<float>(g.kh * g.kw);
  for (int64_t t = GlobalThread(); t < total; t += GlobalThreads()) {
    const int64_t ow = t % g.OW;
    const int64_t oh = (t / g.OW) % g.OH;
    const int64_t plane = t / (g.OW * g.OH);
    const int64_t h0 = oh * g.sh - g.top, w0 = ow * g.sw - g.left;
    int64_t khl, khh, kwl, kwh;
    ValidRange(h0, g.dh, g.kh, g.H, &khl, &khh);
    ValidRange(w0, g.dw, g.kw, g.W, &kwl, &kwh);
    const float* xp = x + plane * g.H * g.W;
    float s = -0.0f;
    for (int64_t i = khl; i < khh; ++i) {
      const int64_t row = (h0 + i * g.dh) * g.W + w0;
      for (int64_t j = kwl; j < kwh; ++j) s = s + xp[row + j * g.dw];
    }
    const float count = include_pad ? full : static_cast<float>((khh - khl) * (kwh - kwl));
    y[t] = CanonF(s / count);
  }
}

}  // namespace

Status RunPool(const KernelCall& call, const LaunchContext& ctx) {
  ASSIGN_OR_RETURN(const PoolGeom g, ValidatePool(call));
  const int64_t total = g.N * g.C * g.OH * g.OW;
  if (total == 0) return OkStatus();
  const Geometry geo = GeometryFor(total, ctx);
  // With H or W == 0 the input may have no storage; no element is read then.
  if (call.op == Op::kMaxPool2D) {
    CNSR_LAUNCH(MaxPoolKernel, geo.grid, geo.block, 0, StreamOf(ctx), call.in(0).as<const uint32_t>(),
                call.out(0).as<uint32_t>(), g, total);
    return CheckLaunch("max_pool2d");
  }
  CNSR_LAUNCH(AvgPoolKernel, geo.grid, geo.block, 0, StreamOf(ctx), call.in(0).as<const float>(),
              call.out(0).as<float>(), g, total, call.params->count_include_pad);
  return CheckLaunch("avg_pool2d");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
