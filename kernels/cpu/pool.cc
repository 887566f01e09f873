// The pool family: MaxPool2D and AvgPool2D on NCHW f32 (docs/DETERMINISM.md 4.5).
//   max_pool2d: max (section 1.1) over the window positions inside the input, padding
//     ignored; the bits of the chosen element are copied. A NaN wins over everything and
//     the first NaN in row-major window order is the one copied; max(-0, +0) = +0. A
//     window entirely in padding gives -inf.
//   avg_pool2d: s = -0.0; s = s + x over the in-input window positions in row-major order;
//     s / float(count), count = in-input positions, or KH*KW with count_include_pad.
// Pure per-output scalar code: no reassociation is possible, so there is no ISA variant.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cpu/cpu_kernels.h"

namespace consensor::kernels::cpu {

namespace {

struct PoolGeom {
  int64_t N, C, H, W, OH, OW;
  int64_t kh, kw, sh, sw, dh, dw, top, left;
};

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
void ValidRange(int64_t start, int64_t dil, int64_t k, int64_t size, int64_t* lo, int64_t* hi) {
  int64_t l = 0;
  if (start < 0) l = (-start + dil - 1) / dil;
  int64_t h = 0;
  if (start < size) h = std::min(k, (size - 1 - start) / dil + 1);
  *lo = l;
  *hi = std::max(l, h);
}

inline bool IsNaNBits(uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

void MaxPoolPlane(const uint32_t* x, uint32_t* y, const PoolGeom& g) {
  constexpr uint32_t kNegInf = 0xFF800000u;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t h0 = oh * g.sh - g.top;
    int64_t khl, khh;
    ValidRange(h0, g.dh, g.kh, g.H, &khl, &khh);
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t w0 = ow * g.sw - g.left;
      int64_t kwl, kwh;
      ValidRange(w0, g.dw, g.kw, g.W, &kwl, &kwh);
      uint32_t best = kNegInf;
      bool have = false, nan = false;
      for (int64_t i = khl; i < khh && !nan; ++i) {
        const int64_t row = (h0 + i * g.dh) * g.W + w0;  // index math only: w0 may be negative
        for (int64_t j = kwl; j < kwh; ++j) {
          const uint32_t b = x[row + j * g.dw];
          if (IsNaNBits(b)) {  // the first NaN wins
            best = b;
            nan = true;
            break;
          }
          const float v = std::bit_cast<float>(b), m = std::bit_cast<float>(best);
          // v > m, or equal zeros where v is +0 and m is -0 (max(-0, +0) = +0).
          if (!have || v > m || (v == m && b == 0u)) best = b;
          have = true;
        }
      }
      y[oh * g.OW + ow] = best;
    }
  }
}

void AvgPoolPlane(const float* x, float* y, const PoolGeom& g, bool include_pad) {
  const float full = static_cast<float>(g.kh * g.kw);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t h0 = oh * g.sh - g.top;
    int64_t khl, khh;
    ValidRange(h0, g.dh, g.kh, g.H, &khl, &khh);
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t w0 = ow * g.sw - g.left;
      int64_t kwl, kwh;
      ValidRange(w0, g.dw, g.kw, g.W, &kwl, &kwh);
      float s = -0.0f;
      for (int64_t i = khl; i < khh; ++i) {
        const int64_t row = (h0 + i * g.dh) * g.W + w0;
        for (int64_t j = kwl; j < kwh; ++j) s = s + x[row + j * g.dw];
      }
      const float count = include_pad ? full : static_cast<float>((khh - khl) * (kwh - kwl));
      const float r = s / count;
      y[oh * g.OW + ow] = r != r ? std::bit_cast<float>(uint32_t{0x7FC00000u}) : r;
    }
  }
}

}  // namespace

Status RunPool(const KernelCall& call, const CpuContext& ctx) {
  PoolGeom g;
  Status s = ValidatePool(call, &g);
  if (!s.ok()) return s;
  if (ctx.pool == nullptr) return InvalidArgument("pool: missing thread pool");
  const int64_t planes = g.N * g.C;
  if (planes == 0 || g.OH == 0 || g.OW == 0) return OkStatus();
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  const int64_t work = std::max<int64_t>(1, out_plane * std::min<int64_t>(g.kh * g.kw, 1 << 20));
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / work);
  const bool is_max = call.op == Op::kMaxPool2D;
  const bool include_pad = call.params->count_include_pad;
  const TensorView& xv = call.in(0);
  TensorView& yv = call.out(0);
  ctx.pool->ParallelFor(planes, grain, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      // With H or W == 0 the input may have no storage; no element is read then.
      if (is_max) {
        const uint32_t* x = in_plane ? xv.as<const uint32_t>() + pl * in_plane : xv.as<const uint32_t>();
        MaxPoolPlane(x, yv.as<uint32_t>() + pl * out_plane, g);
      } else {
        const float* x = in_plane ? xv.as<const float>() + pl * in_plane : xv.as<const float>();
        AvgPoolPlane(x, yv.as<float>() + pl * out_plane, g, include_pad);
      }
    }
  });
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
