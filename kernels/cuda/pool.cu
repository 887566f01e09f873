// The CUDA pool family: MaxPool2D and AvgPool2D on NCHW f32 (docs/DETERMINISM.md 4.5),
// bits identical to kernels/cpu/pool.cc. One thread per output element (adjacent threads
// take adjacent ow, so loads of one window row are close together), each following the
// spec's row-major window order sequentially:
//   max_pool2d: max (section 1.1) over the in-input positions, bits copied; the first NaN
//     in window order is copied (payload included); an all-padding window gives -inf.
//   avg_pool2d: s = -0.0; s = s + x in window order; s / float(count), canonical NaN.
#include <string>

#include "kernels/cuda/canonical_sum_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

struct PoolGeom {
  int64_t N, C, H, W, OH, OW;
  int64_t kh, kw, sh, sw, dh, dw, top, left;
};

// The same cases as kernels/cpu/pool.cc.
Status ValidatePool(const KernelCall& call, PoolGeom* g) {
  const std::string name(OpName(call.op));
  if (call.op != Op::kMaxPool2D && call.op != Op::kAvgPool2D) return InvalidArgument(name + ": not a pool op");
  if (call.params == nullptr) return InvalidArgument(name + ": missing parameters");
  if (call.num_inputs != 1 || call.num_outputs != 1) return InvalidArgument(name + ": expects one input and one output");
  const TensorView& x = call.in(0);
  const TensorView& y = call.out(0);
  const OpParams& p = *call.params;
  if (x.dtype != DType::kF32 || y.dtype != DType::kF32) return InvalidArgument(name + ": f32 only");
  if (x.rank != 4 || y.rank != 4) return InvalidArgument(name + ": input and output must be rank 4 (NCHW)");
  for (int i = 0; i < 4; ++i)
    if (x.dims[i] < 0 || y.dims[i] < 0) return InvalidArgument(name + ": negative dimension");
  if (p.kernel.size() != 2) return InvalidArgument(name + ": kernel must have 2 entries");
  if (!p.strides.empty() && p.strides.size() != 2) return InvalidArgument(name + ": strides must have 2 entries");
  if (!p.dilations.empty() && p.dilations.size() != 2) return InvalidArgument(name + ": dilations must have 2 entries");
  if (!p.pads.empty() && p.pads.size() != 4) return InvalidArgument(name + ": pads must have 4 entries");
  g->kh = p.kernel[0];
  g->kw = p.kernel[1];
  g->sh = p.strides.empty() ? 1 : p.strides[0];
  g->sw = p.strides.empty() ? 1 : p.strides[1];
  g->dh = p.dilations.empty() ? 1 : p.dilations[0];
  g->dw = p.dilations.empty() ? 1 : p.dilations[1];
  const int64_t top = p.pads.empty() ? 0 : p.pads[0], left = p.pads.empty() ? 0 : p.pads[1];
  const int64_t bottom = p.pads.empty() ? 0 : p.pads[2], right = p.pads.empty() ? 0 : p.pads[3];
  if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1)
    return InvalidArgument(name + ": kernel, strides and dilations must be positive");
  if (top < 0 || left < 0 || bottom < 0 || right < 0) return InvalidArgument(name + ": pads must be non-negative");
  constexpr int64_t kLimit = int64_t{1} << 40;
  if (g->kh > kLimit || g->kw > kLimit || g->sh > kLimit || g->sw > kLimit || g->dh > kLimit || g->dw > kLimit ||
      top > kLimit || left > kLimit || bottom > kLimit || right > kLimit)
    return InvalidArgument(name + ": attribute too large");
  g->N = x.dims[0];
  g->C = x.dims[1];
  g->H = x.dims[2];
  g->W = x.dims[3];
  g->top = top;
  g->left = left;
  const int64_t span_h = g->H + top + bottom - g->dh * (g->kh - 1) - 1;
  const int64_t span_w = g->W + left + right - g->dw * (g->kw - 1) - 1;
  if (span_h < 0 || span_w < 0) return InvalidArgument(name + ": window larger than the padded input");
  g->OH = span_h / g->sh + 1;
  g->OW = span_w / g->sw + 1;
  if (y.dims[0] != g->N || y.dims[1] != g->C || y.dims[2] != g->OH || y.dims[3] != g->OW)
    return InvalidArgument(name + ": output shape does not match");
  if ((x.num_elements() > 0 && x.data == nullptr) || (y.num_elements() > 0 && y.data == nullptr))
    return InvalidArgument(name + ": missing tensor data");
  return OkStatus();
}

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
  PoolGeom g;
  RETURN_IF_ERROR(ValidatePool(call, &g));
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
