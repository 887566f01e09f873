// The pool family: MaxPool2D and AvgPool2D on NCHW f32 (docs/DETERMINISM.md 4.5).
//   max_pool2d: max (section 1.1) over the window positions inside the input, padding
//     ignored; the bits of the chosen element are copied. A NaN wins over everything and
//     the first NaN in row-major window order is the one copied; max(-0, +0) = +0. A
//     window entirely in padding gives -inf.
//   avg_pool2d: s = -0.0; s = s + x over the in-input window positions in row-major order;
//     s / float(count), count = in-input positions, or KH*KW with count_include_pad.
// No reassociation is possible, so there is no ISA variant. Max pools take the max of order-
// preserving integer keys across columns without branches (exact: max is order-free), and
// redo a window by the scalar row-major walk only if it holds a NaN.
// Average pools interleave the chains of 8 planes (each still sequential) to hide latency.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/checks/pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/pool_avx512.h"
#include "kernels/half.h"

namespace consensor::kernels::cpu {

namespace {

std::atomic<bool> g_pool_avx512_enabled{true};

// Window positions inside the input along one axis: k in [*lo, *hi) with
// 0 <= start + k*dil < size.
void ValidRange(int64_t start, int64_t dil, int64_t k, int64_t size, int64_t* lo, int64_t* hi) {
  if (dil == 1) {  // the common case, without the two integer divisions per output
    const int64_t l = std::clamp<int64_t>(-start, 0, k);
    *lo = l;
    *hi = std::max(l, std::min(k, size - start));
    return;
  }
  int64_t l = 0;
  if (start < 0) l = (-start + dil - 1) / dil;
  int64_t h = 0;
  if (start < size) h = std::min(k, (size - 1 - start) / dil + 1);
  *lo = l;
  *hi = std::max(l, h);
}

inline bool IsNaNBits(uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

// Maps the bits of a non-NaN f32 to an int32 whose order is the spec's max order: numbers by
// value and -0 below +0 (section 1.1). Negative floats have their magnitude bits flipped. The
// map is its own inverse. Equal keys are equal bits, so the max of keys is order-free.
inline int32_t MaxKey(uint32_t b) {
  return static_cast<int32_t>(b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) >> 1));
}

// The spec's max over one window, visiting positions in row-major order (the first NaN wins).
uint32_t MaxWindow(const uint32_t* x, const PoolGeom& g, int64_t h0, int64_t khl, int64_t khh, int64_t w0, int64_t kwl,
                   int64_t kwh) {
  uint32_t best = 0xFF800000u;  // -inf: a window entirely in padding
  bool have = false;
  for (int64_t i = khl; i < khh; ++i) {
    const int64_t row = (h0 + i * g.dh) * g.W + w0;  // index math only: w0 may be negative
    for (int64_t j = kwl; j < kwh; ++j) {
      const uint32_t b = x[row + j * g.dw];
      if (IsNaNBits(b)) return b;
      const float v = std::bit_cast<float>(b), m = std::bit_cast<float>(best);
      // v > m, or equal zeros where v is +0 and m is -0 (max(-0, +0) = +0).
      if (!have || v > m || (v == m && b == 0u)) best = b;
      have = true;
    }
  }
  return best;
}

// Columns whose windows lie inside the input's width, kColumns at a time: a branch-free max of
// keys over the window (vectorizable across columns), with a NaN flag per column. Columns
// that saw a NaN are redone by MaxWindow, which finds the first NaN.
void MaxPoolInteriorColumns(const uint32_t* x, uint32_t* y_row, const PoolGeom& g, int64_t h0, int64_t khl, int64_t khh,
                            int64_t ow_begin, int64_t ow_end) {
  constexpr int64_t kColumns = 64;
  alignas(32) int32_t key[kColumns];
  alignas(32) uint32_t nan[kColumns];
  for (int64_t c0 = ow_begin; c0 < ow_end; c0 += kColumns) {
    const int64_t n = std::min(kColumns, ow_end - c0);
    for (int64_t c = 0; c < n; ++c) {
      key[c] = MaxKey(0xFF800000u);
      nan[c] = 0;
    }
    for (int64_t i = khl; i < khh; ++i) {
      const uint32_t* row = x + (h0 + i * g.dh) * g.W + c0 * g.sw - g.left;
      for (int64_t j = 0; j < g.kw; ++j) {
        const uint32_t* src = row + j * g.dw;
        for (int64_t c = 0; c < n; ++c) {
          const uint32_t b = src[c * g.sw];
          nan[c] |= static_cast<uint32_t>((b & 0x7FFFFFFFu) > 0x7F800000u);
          key[c] = std::max(key[c], MaxKey(b));
        }
      }
    }
    for (int64_t c = 0; c < n; ++c) {
      y_row[c0 + c] = nan[c] ? MaxWindow(x, g, h0, khl, khh, (c0 + c) * g.sw - g.left, 0, g.kw)
                             : static_cast<uint32_t>(MaxKey(static_cast<uint32_t>(key[c])));
    }
  }
}

void MaxPoolPlane(const uint32_t* x, uint32_t* y, const PoolGeom& g) {
  // Output columns [ow_lo, ow_hi) have windows inside the width: w0 >= 0, w0 + dw*(kw-1) < W.
  const int64_t ow_lo = std::min(g.OW, (g.left + g.sw - 1) / g.sw);
  const int64_t last = g.W - 1 - g.dw * (g.kw - 1) + g.left;  // largest ow * sw allowed
  const int64_t ow_hi = std::clamp<int64_t>(last < 0 ? 0 : last / g.sw + 1, ow_lo, g.OW);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t h0 = oh * g.sh - g.top;
    int64_t khl, khh;
    ValidRange(h0, g.dh, g.kh, g.H, &khl, &khh);
    uint32_t* y_row = y + oh * g.OW;
    auto edge = [&](int64_t ow) {
      const int64_t w0 = ow * g.sw - g.left;
      int64_t kwl, kwh;
      ValidRange(w0, g.dw, g.kw, g.W, &kwl, &kwh);
      y_row[ow] = MaxWindow(x, g, h0, khl, khh, w0, kwl, kwh);
    };
    for (int64_t ow = 0; ow < ow_lo; ++ow) edge(ow);
    MaxPoolInteriorColumns(x, y_row, g, h0, khl, khh, ow_lo, ow_hi);
    for (int64_t ow = ow_hi; ow < g.OW; ++ow) edge(ow);
  }
}

// Planes [0, kPlanes) at once, planes in_plane and out_plane elements apart. Each plane's sum
// is the spec's sequential chain; interleaving independent chains only hides the latency of
// each add (a global average over one plane is otherwise one long dependent chain).
template <int kPlanes>
void AvgPoolPlanes(const float* x, int64_t in_plane, float* y, int64_t out_plane, const PoolGeom& g, bool include_pad) {
  const float full = static_cast<float>(g.kh * g.kw);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t h0 = oh * g.sh - g.top;
    int64_t khl, khh;
    ValidRange(h0, g.dh, g.kh, g.H, &khl, &khh);
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t w0 = ow * g.sw - g.left;
      int64_t kwl, kwh;
      ValidRange(w0, g.dw, g.kw, g.W, &kwl, &kwh);
      float s[kPlanes];
      for (int p = 0; p < kPlanes; ++p) s[p] = -0.0f;
      for (int64_t i = khl; i < khh; ++i) {
        const int64_t row = (h0 + i * g.dh) * g.W + w0;
        for (int64_t j = kwl; j < kwh; ++j) {
          const float* xj = x + row + j * g.dw;
          for (int p = 0; p < kPlanes; ++p) s[p] = s[p] + xj[p * in_plane];
        }
      }
      const float count = include_pad ? full : static_cast<float>((khh - khl) * (kwh - kwl));
      for (int p = 0; p < kPlanes; ++p) {
        const float r = s[p] / count;
        y[p * out_plane + oh * g.OW + ow] = r != r ? std::bit_cast<float>(uint32_t{0x7FC00000u}) : r;
      }
    }
  }
}

}  // namespace

void SetPoolAvx512ForTesting(bool enabled) { g_pool_avx512_enabled.store(enabled); }

Status RunPool(const KernelCall& call, const CpuContext& ctx) {
  ASSIGN_OR_RETURN(const PoolGeom g, ValidatePool(call));
  if (ctx.pool == nullptr) return InvalidArgument("pool: missing thread pool");
  const int64_t planes = g.N * g.C;
  if (planes == 0 || g.OH == 0 || g.OW == 0) return OkStatus();
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  const int64_t work = std::max<int64_t>(1, out_plane * std::min<int64_t>(g.kh * g.kw, 1 << 20));
  // Average pools interleave kAvgPlanes planes; chunks of planes are a multiple of it.
  constexpr int64_t kAvgPlanes = 8;
  int64_t grain = ctx.pool->GrainForWork(work);
  if (call.op == Op::kAvgPool2D) grain = (grain + kAvgPlanes - 1) / kAvgPlanes * kAvgPlanes;
  const bool is_max = call.op == Op::kMaxPool2D;
  const bool include_pad = call.params->count_include_pad;
  const TensorView& xv = call.in(0);
  TensorView& yv = call.out(0);
  // Max pools with every window inside the input: 16 outputs at a time, across rows
  // (pool_avx512.cc), on the AVX2 engine of a CPU with AVX-512F.
  if (is_max && ctx.isa == Isa::kAvx2 && g_pool_avx512_enabled.load(std::memory_order_relaxed) &&
      gemm::CpuHasAvx512F() && MaxPoolAllWindowsInside(g)) {
    std::vector<int32_t> starts;
    MaxPoolWindowStarts(g, &starts);
    ctx.pool->ParallelFor(planes, grain, [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        MaxPoolPlaneAvx512(xv.as<const uint32_t>() + pl * in_plane, yv.as<uint32_t>() + pl * out_plane, g,
                           starts.data());
      }
    });
    return OkStatus();
  }
  ctx.pool->ParallelFor(planes, grain, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      // With H or W == 0 the input may have no storage; no element is read then.
      if (is_max) {
        const uint32_t* x = in_plane ? xv.as<const uint32_t>() + pl * in_plane : xv.as<const uint32_t>();
        MaxPoolPlane(x, yv.as<uint32_t>() + pl * out_plane, g);
      } else {
        const float* x = in_plane ? xv.as<const float>() + pl * in_plane : xv.as<const float>();
        float* y = yv.as<float>() + pl * out_plane;
        if (in_plane && pl + kAvgPlanes <= e) {
          AvgPoolPlanes<kAvgPlanes>(x, in_plane, y, out_plane, g, include_pad);
          pl += kAvgPlanes - 1;
        } else {
          AvgPoolPlanes<1>(x, in_plane, y, out_plane, g, include_pad);
        }
      }
    }
  });
  return OkStatus();
}

Status RunMaxPoolHalf(const KernelCall& call, const CpuContext& ctx, bool* ran) {
  *ran = false;
  if (call.op != Op::kMaxPool2D || call.epilogue != nullptr || call.num_inputs != 1 || call.num_outputs != 1 ||
      !call.inputs || !call.outputs || !IsHalfDType(call.in(0).dtype) || call.out(0).dtype != call.in(0).dtype ||
      ctx.pool == nullptr || ctx.isa != Isa::kAvx2 || !g_pool_avx512_enabled.load(std::memory_order_relaxed) ||
      !gemm::CpuHasAvx512F()) {
    return OkStatus();
  }
  // The geometry and shape checks of the f32 call this one computes as (ValidatePool takes f32).
  TensorView in = call.in(0), out = call.out(0);
  in.dtype = out.dtype = DType::kF32;
  KernelCall as_f32 = call;
  as_f32.inputs = &in;
  as_f32.outputs = &out;
  ASSIGN_OR_RETURN(const PoolGeom g, ValidatePool(as_f32));
  const int64_t planes = g.N * g.C;
  if (planes == 0 || g.OH == 0 || g.OW == 0 || !MaxPoolHalfTwoByTwo(g)) return OkStatus();
  *ran = true;
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
  const bool f16 = call.in(0).dtype == DType::kF16;
  const uint16_t infinity = f16 ? 0x7C00 : 0x7F80;
  const uint16_t nan = f16 ? half::kCanonicalNaNF16 : half::kCanonicalNaNBF16;
  const uint16_t* x = call.in(0).as<const uint16_t>();
  uint16_t* y = call.out(0).as<uint16_t>();
  ctx.pool->ParallelFor(planes, ctx.pool->GrainForWork(out_plane * 4), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      MaxPoolHalfTwoByTwoPlaneAvx512(x + pl * in_plane, y + pl * out_plane, g, infinity, nan);
    }
  });
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
