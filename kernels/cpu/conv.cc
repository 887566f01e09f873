// Conv2D (NCHW), docs/DETERMINISM.md 4.4, as im2col + the GEMM of gemm.h, or, for grouped
// and depthwise convolutions with few channels per group and for one filter per group,
// directly (conv_direct_impl.h).
//
// For image n and group g, the GEMM is  Y[f, p] = chain_k fma(W[f, k], COL[k, p], acc)
// with k = (c, kh, kw) in exactly that nesting order (row-major of W's trailing dims),
// which is the spec's chain order; padding positions are +0.0 entries of COL and take part
// in the chain. The bias is one add afterwards, then NaNs are canonicalized. COL is built
// in column tiles so that scratch memory stays bounded (<= 64 MiB per call in total).
// A fused epilogue (DETERMINISM.md 3.1) runs over each block of output right after its bias; on
// the 1x1 path both run on each GEMM block as soon as its chain is complete.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/checks/conv.h"
#include "kernels/checks/elementwise.h"
#include "kernels/checks/half_plan.h"
#include "kernels/cpu/conv_direct_impl.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half_operands.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int64_t kDefaultScratchBudget = int64_t{64} << 20;  // bytes of im2col scratch per call
std::atomic<int64_t> g_scratch_budget{kDefaultScratchBudget};
std::atomic<bool> g_direct_enabled{true};
std::atomic<bool> g_direct_plane_enabled{true};
std::atomic<bool> g_always_skip_stuffed_zeros{false};
std::atomic<bool> g_stuffed_one_tap_enabled{true};
// Preferred size of one im2col tile: small enough to stay in L2/L3 between im2col and the
// GEMM's packing, large enough to amortize packing the weights once per tile.
constexpr int64_t kTileTarget = int64_t{2} << 20;
// With AVX2 and more than kKBlock terms per output, a tile's im2col is written and consumed
// kKBlock rows (terms) at a time, the GEMM carrying each chain through C from one block to the
// next (F32Operands::k_begin/k_end): kKBlock x the tile's columns stays within kKBlockBytes, in
// L2, instead of writing all Kc rows to L3 and reading them back (measured, docs/PERFORMANCE.md).
constexpr int64_t kKBlock = 256;
constexpr int64_t kKBlockBytes = int64_t{1} << 20;
constexpr uint32_t kCanonicalNaN = 0x7FC00000u;
// Grouped convolutions with at most this many input channels per group (depthwise: 1) run
// directly: their per-group GEMMs are too small to pay for im2col and packing.
constexpr int64_t kDirectMaxChannelsPerGroup = 8;
// Outputs of the direct kernel per epilogue pass (16 KiB of f32).
constexpr int64_t kEpilogueBlock = 4096;

// Im2Col when both strides are 1 and output rows are as wide as input rows (OW == W, e.g. 1xK
// with "same" padding, Kx1, 3x3 "same"): then COL row k is the channel's plane shifted by one
// flat offset, (kh*dh - pt)*W + kw*dw - pl, except at the positions whose input row or column lies
// in the padding. One copy per row of COL, then those positions are set to +0.0 (what the general
// walk writes there), instead of a copy and a division per output row.
void Im2ColShifted(const ConvGeom& g, const float* x, int64_t n, int64_t gi, int64_t p0, int64_t ptc, int64_t k0,
                   int64_t k1, float* col) {
  const int64_t khw = g.KH * g.KW, plane = g.H * g.W, p1 = p0 + ptc;
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t c = k / khw, r = k % khw, kh = r / g.KW, kw = r % g.KW;
    const float* xc = x + ((n * g.C) + gi * g.Cg + c) * plane;
    float* dst = col + (k - k0) * ptc - p0;  // dst[p] for p in [p0, p1)
    const int64_t row_off = kh * g.dh - g.pt, col_off = kw * g.dw - g.pl;
    const int64_t shift = row_off * g.W + col_off;
    // Positions whose flat source index lies outside the plane are padding on either count.
    const int64_t lo = std::clamp<int64_t>(-shift, p0, p1), hi = std::clamp<int64_t>(plane - shift, lo, p1);
    std::fill(dst + p0, dst + lo, 0.0f);
    if (hi > lo) std::memcpy(dst + lo, xc + lo + shift, sizeof(float) * (hi - lo));
    std::fill(dst + hi, dst + p1, 0.0f);
    // Valid output columns [jb, je) and rows [ob, oe) of this (kh, kw).
    const int64_t jb = std::clamp<int64_t>(-col_off, 0, g.OW), je = std::clamp<int64_t>(g.W - col_off, jb, g.OW);
    const int64_t ob = std::clamp<int64_t>(-row_off, 0, g.OH), oe = std::clamp<int64_t>(g.H - row_off, ob, g.OH);
    const bool all_columns = jb == 0 && je == g.OW;
    for (int64_t oh = p0 / g.OW; oh * g.OW < p1; ++oh) {
      const int64_t rb = std::max(p0, oh * g.OW), re = std::min(p1, (oh + 1) * g.OW);
      if (oh < ob || oh >= oe) {
        std::fill(dst + rb, dst + re, 0.0f);
      } else if (!all_columns) {
        std::fill(dst + rb, dst + std::max(rb, std::min(re, oh * g.OW + jb)), 0.0f);
        std::fill(dst + std::min(re, std::max(rb, oh * g.OW + je)), dst + re, 0.0f);
      }
    }
  }
}

// At most this many output positions per COL row: Im2Col walks position by position.
constexpr int64_t kIm2ColByPositionMax = 8;

// Im2Col for a few output positions (the few-positions kernel's at most 8, a GEMM tile's last
// columns): one pass per position along its terms, kernel row by kernel row, with the row's
// padding terms found by two divisions per kernel row. The term-by-term walk below costs some
// seven integer divisions per term for a handful of copies: on the mel spectrogram's STFT (512
// terms, 5 positions) it took about a third of the convolution (docs/PERFORMANCE.md, "Im2col
// by position"). Writes exactly what that walk writes: the input's bits, +0.0 for padding.
void Im2ColByPosition(const ConvGeom& g, const float* x, int64_t n, int64_t gi, int64_t p0, int64_t ptc, int64_t k0,
                      int64_t k1, float* col) {
  if (k0 >= k1) return;
  const int64_t khw = g.KH * g.KW;
  const float* image = x + ((n * g.C) + gi * g.Cg) * g.H * g.W;
  for (int64_t j = 0; j < ptc; ++j) {
    const int64_t oh = (p0 + j) / g.OW, ow = (p0 + j) % g.OW;
    const int64_t ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
    int64_t c = k0 / khw, kh = k0 % khw / g.KW, kw = k0 % g.KW;
    float* dst = col + j;
    for (int64_t k = k0; k < k1;) {
      const int64_t run = std::min(g.KW - kw, k1 - k);  // terms left in this kernel row
      const int64_t ih = ih0 + kh * g.dh;
      if (ih < 0 || ih >= g.H) {
        for (int64_t t = 0; t < run; ++t) dst[t * ptc] = 0.0f;
      } else {
        // Terms t in [tb, te) read the row (0 <= iw0 + (kw + t) * dw < W); the others are padding.
        const float* row = image + (c * g.H + ih) * g.W;
        const int64_t first = iw0 + kw * g.dw;
        const int64_t tb = std::clamp<int64_t>(first >= 0 ? 0 : (-first + g.dw - 1) / g.dw, 0, run);
        const int64_t te = std::clamp<int64_t>(g.W - first <= 0 ? 0 : (g.W - first + g.dw - 1) / g.dw, tb, run);
        for (int64_t t = 0; t < tb; ++t) dst[t * ptc] = 0.0f;
        for (int64_t t = tb; t < te; ++t) dst[t * ptc] = row[first + t * g.dw];
        for (int64_t t = te; t < run; ++t) dst[t * ptc] = 0.0f;
      }
      dst += run * ptc;
      k += run;
      kw = 0;
      if (++kh == g.KH) kh = 0, ++c;
    }
  }
}

// COL[k - k0, j] for k in [k0, k1) and output positions p0 + j, j < ptc, of image n, group gi.
void Im2Col(const ConvGeom& g, const float* x, int64_t n, int64_t gi, int64_t p0, int64_t ptc, int64_t k0, int64_t k1,
            float* col) {
  if (g.sh == 1 && g.sw == 1 && g.OW == g.W) return Im2ColShifted(g, x, n, gi, p0, ptc, k0, k1, col);
  if (ptc <= kIm2ColByPositionMax) return Im2ColByPosition(g, x, n, gi, p0, ptc, k0, k1, col);
  const int64_t khw = g.KH * g.KW;
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t c = k / khw, r = k % khw, kh = r / g.KW, kw = r % g.KW;
    const float* xc = x + ((n * g.C) + gi * g.Cg + c) * g.H * g.W;
    float* dst = col + (k - k0) * ptc;
    int64_t oh = p0 / g.OW, ow = p0 % g.OW;
    for (int64_t p = p0; p < p0 + ptc;) {
      const int64_t cnt = std::min(g.OW - ow, p0 + ptc - p);
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.H) {
        std::fill(dst, dst + cnt, 0.0f);
      } else {
        const float* row = xc + ih * g.W;
        const int64_t iw0 = ow * g.sw - g.pl + kw * g.dw;
        // Valid j: 0 <= iw0 + j*sw < W, i.e. jb <= j < je.
        const int64_t jb = std::clamp<int64_t>(iw0 >= 0 ? 0 : (-iw0 + g.sw - 1) / g.sw, 0, cnt);
        const int64_t je = std::clamp<int64_t>(g.W - iw0 <= 0 ? 0 : (g.W - iw0 + g.sw - 1) / g.sw, jb, cnt);
        std::fill(dst, dst + jb, 0.0f);
        if (g.sw == 1) {
          if (je > jb) std::memcpy(dst + jb, row + iw0 + jb, sizeof(float) * (je - jb));
        } else {
          for (int64_t j = jb; j < je; ++j) dst[j] = row[iw0 + j * g.sw];
        }
        std::fill(dst + je, dst + cnt, 0.0f);
      }
      dst += cnt;
      p += cnt;
      ow = 0;
      ++oh;
    }
  }
}

// y = y + bias[f] (one add), then NaN canonicalization, for Fg rows of ptc columns.
void AddBias(float* y, int64_t ldy, int64_t rows, int64_t cols, const float* bias) {
  float nan;
  std::memcpy(&nan, &kCanonicalNaN, sizeof(nan));
  for (int64_t f = 0; f < rows; ++f) {
    float* r = y + f * ldy;
    const float b = bias[f];
    for (int64_t j = 0; j < cols; ++j) {
      const float v = r[j] + b;
      r[j] = v != v ? nan : v;
    }
  }
}

// conv2d weights as the AVX2 GEMM's A panels, group after group (PrepareConvWeights).
class PackedConvWeights final : public PreparedOperand {
 public:
  PackedConvWeights(const float* w, const ConvGeom& g)
      : per_group_(gemm::PackedAPanelsFloats(g.Fg, g.Kc)),
        group_(g.G),
        fg_(g.Fg),
        kc_(g.Kc),
        data_(static_cast<float*>(std::aligned_alloc(64, (sizeof(float) * per_group_ * g.G + 63) / 64 * 64))) {
    if (!data_) return;
    for (int64_t gi = 0; gi < g.G; ++gi) gemm::PackAPanelsF32(w + gi * g.Fg * g.Kc, g.Kc, g.Fg, g.Kc, group(gi));
  }
  ~PackedConvWeights() override { std::free(data_); }
  PackedConvWeights(const PackedConvWeights&) = delete;
  PackedConvWeights& operator=(const PackedConvWeights&) = delete;
  int64_t bytes() const override { return static_cast<int64_t>(sizeof(float)) * per_group_ * group_; }
  bool ok() const { return data_ != nullptr; }
  // Whether these panels were packed for this geometry's weights.
  bool Fits(const ConvGeom& g) const { return g.G == group_ && g.Fg == fg_ && g.Kc == kc_; }
  float* group(int64_t gi) const { return data_ + gi * per_group_; }

 private:
  int64_t per_group_, group_, fg_, kc_;
  float* data_;
};

// conv2d weights as the few-positions kernel's 16-filter panels (conv_avx512.cc), packed once at load.
class FewPositionsPanels final : public PreparedOperand {
 public:
  FewPositionsPanels(const float* w, const ConvGeom& g) : f_(g.F), kc_(g.Kc), panels_(FewPositionsPanelFloats(g)) {
    PackFewPositionsPanels(g, w, panels_.data());
  }
  int64_t bytes() const override { return static_cast<int64_t>(sizeof(float) * panels_.size()); }
  bool Fits(const ConvGeom& g) const { return g.F == f_ && g.Kc == kc_; }
  const float* data() const { return panels_.data(); }

 private:
  int64_t f_, kc_;
  std::vector<float> panels_;
};

bool UsesDirectKernel(const ConvGeom& g) {
  // One filter per group: the GEMM would have a single row, reading each im2col column once.
  return ((g.G > 1 && g.Cg <= kDirectMaxChannelsPerGroup) || g.Fg == 1) && g_direct_enabled.load();
}

// A conv over a zero-stuffed input (ConvGeom::stuffed) skips the stuffed zeros
// (conv_direct_impl.h) where that beats the GEMM over the stuffed input: where the unstuffed
// conv would run the direct kernel anyway, or where at most 1 term in 9 reads x (measured,
// docs/PERFORMANCE.md). Otherwise it builds the stuffed input in scratch memory and runs the
// ordinary conv over it, as the unfused instructions do (same chain, so the same bits).
// With AVX-512F, the register-blocked kernel (conv_stuffed_avx512.cc) skips them for any stride-1 conv.
bool StuffedBlocked(const ConvGeom& g, Isa isa) {
  return isa == Isa::kAvx2 && g.sh == 1 && g.sw == 1 && gemm::UseAvx512Gemm();
}
bool StuffedSkipsZeros(const ConvGeom& g, Isa isa) {
  return g.sh == 1 && g.sw == 1 &&
         (StuffedBlocked(g, isa) || UsesDirectKernel(g) || g.uh * g.uw >= 9 || g_always_skip_stuffed_zeros.load());
}

// Columns per im2col tile so that rows x cols floats fit in `budget` bytes.
int64_t TileColsForRows(const ConvGeom& g, int64_t rows, int64_t budget) {
  if (rows == 0 || g.P == 0) return std::max<int64_t>(g.P, 1);
  const int64_t cols = budget / (rows * int64_t{sizeof(float)});
  if (cols >= g.P) return g.P;
  return std::min(g.P, std::max<int64_t>(16, cols / 16 * 16));
}

// Columns per im2col tile so that Kc x cols floats fit in `budget` bytes.
int64_t TileCols(const ConvGeom& g, int64_t budget) { return TileColsForRows(g, g.Kc, budget); }

}  // namespace

void ConvDirectRowsPortable(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                            int64_t begin, int64_t end) {
  ConvDirectRowsImpl(g, x, w, bias, y, begin, end);
}

void ConvStuffedRowsPortable(const ConvGeom& g, const float* x, const float* w, const float* bias,
                             const uint8_t* finite_filter, float* y, int64_t begin, int64_t end) {
  ConvStuffedRowsImpl(g, x, w, bias, finite_filter, y, begin, end);
}

void SetConvAlwaysSkipStuffedZerosForTesting(bool always) { g_always_skip_stuffed_zeros.store(always); }

void SetConvStuffedOneTapForTesting(bool enabled) { g_stuffed_one_tap_enabled.store(enabled); }

bool StuffedOneTapTaps(const ConvGeom& g, StuffedOneTap* taps) {
  if (!g.stuffed || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1 || g.uh != 2 || g.uw != 2 || g.KH != 2 ||
      g.KW != 2 || g.XH < 1 || g.XW < 1 || g.OH != 2 * g.XH || g.OW != 2 * g.XW) {
    return false;
  }
  // Output index o of one axis must read exactly one x element, o / 2, through a tap that
  // depends only on o % 2 (pad, virtual size, crop offset of that axis).
  auto one_tap = [](int64_t count, int64_t pad, int64_t virtual_size, int64_t crop, int64_t* tap) {
    for (int64_t o = 0; o < count; ++o) {
      int64_t found = 0, k_found = 0;
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t v = o - pad + k;
        if (v < 0 || v >= virtual_size || (v + crop) % 2 != 0) continue;
        if ((v + crop) / 2 != o / 2) return false;
        ++found;
        k_found = k;
      }
      if (found != 1 || (o >= 2 && tap[o % 2] != k_found)) return false;
      if (o < 2) tap[o] = k_found;
    }
    return true;
  };
  return one_tap(g.OH, g.pt, g.H, g.r0, taps->kh) && one_tap(g.OW, g.pl, g.W, g.c0, taps->kw);
}

void SetConvDirectForTesting(bool enabled) { g_direct_enabled.store(enabled); }

void SetConvDirectPlaneForTesting(bool enabled) { g_direct_plane_enabled.store(enabled); }

void SetConvScratchBudgetForTesting(int64_t bytes) {
  g_scratch_budget.store(bytes > 0 ? bytes : kDefaultScratchBudget);
}

StatusOr<std::unique_ptr<PreparedOperand>> PrepareConvWeights(const KernelCall& call, const CpuContext& ctx) {
  if (call.num_inputs < 2 || call.num_inputs > 3 || call.num_outputs != 1 || !call.inputs || !call.outputs) {
    return std::unique_ptr<PreparedOperand>();
  }
  const bool half_weights = IsHalfDType(call.in(1).dtype);
  if (!half_weights && (call.in(0).dtype != DType::kF32 || call.in(1).dtype != DType::kF32)) {
    return std::unique_ptr<PreparedOperand>();
  }
  if (ctx.isa != Isa::kAvx2 || !CpuHasAvx2Fma()) return std::unique_ptr<PreparedOperand>();
  // A zero-stuffed input runs ConvStuffedRows*, which reads the weights as they are.
  const bool stuffed = call.params && !call.params->input_stuffing.empty();
  // f16/bf16 weights: the call runs as its f32 form (half_operands.cc), whose weights are the
  // exactly widened ones; they are widened and packed here once, and RunThroughF32 then leaves
  // them out of its per-call widening.
  KernelCall f32_call = call;
  TensorView views[4];
  std::vector<float> wide;
  if (half_weights) {
    if (!ComputesThroughF32(call) || !CheckHalfCall(call, "conv2d").ok()) return std::unique_ptr<PreparedOperand>();
    for (int i = 0; i < call.num_inputs; ++i) views[i] = call.in(i);
    views[3] = call.out(0);
    for (TensorView& v : views) {
      if (IsHalfDType(v.dtype)) v.dtype = DType::kF32;
    }
    const int64_t n = views[1].num_elements();
    if (n > 0 && call.in(1).data == nullptr) return std::unique_ptr<PreparedOperand>();
    wide.resize(static_cast<size_t>(n));
    WidenToF32(call.in(1).dtype, call.in(1).data, wide.data(), n, ctx);
    views[1].data = wide.data();
    f32_call.inputs = views;
    f32_call.outputs = views + 3;
  }
  ASSIGN_OR_RETURN(const ConvGeom g, ValidateConv(f32_call, false, /*allow_stuffed=*/stuffed));
  // The small dense kernel reads f32 weights as they are (16-bit ones still need their f32 panels).
  const bool small_dense = !half_weights && UsesSmallDenseConvAvx512(g);
  if (UsesDirectKernel(g) || g.F == 0 || g.Kc == 0 || (stuffed && StuffedSkipsZeros(g, ctx.isa)) || small_dense) {
    return std::unique_ptr<PreparedOperand>();
  }
  if (!half_weights && UsesFewPositionsConvAvx512(g)) {
    return std::unique_ptr<PreparedOperand>(std::make_unique<FewPositionsPanels>(f32_call.in(1).as<const float>(), g));
  }
  auto packed = std::make_unique<PackedConvWeights>(f32_call.in(1).as<const float>(), g);
  if (!packed->ok()) return ResourceExhausted("conv2d: cannot allocate the packed weights");
  return std::unique_ptr<PreparedOperand>(std::move(packed));
}

Status RunConvF16Shifted(const KernelCall& call, const CpuContext& ctx, bool* ran) {
  *ran = false;
  if (call.op != Op::kConv2D || call.epilogue != nullptr || ctx.isa != Isa::kAvx2 || call.num_inputs < 2 ||
      call.num_inputs > 3 || call.num_outputs != 1 || !call.inputs || !call.outputs || call.params == nullptr ||
      !call.params->input_stuffing.empty() || !CpuHasAvx2Fma() || !CpuHasF16c()) {
    return OkStatus();
  }
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).dtype != DType::kF16) return OkStatus();
  }
  if (call.out(0).dtype != DType::kF16 || !CheckHalfCall(call, "conv2d").ok()) return OkStatus();
  // The f32 form of the call, as RunThroughF32 would run it; its data pointers are set below.
  TensorView views[4];
  for (int i = 0; i < call.num_inputs; ++i) views[i] = call.in(i);
  views[3] = call.out(0);
  for (TensorView& v : views) v.dtype = DType::kF32;
  KernelCall f32_call = call;
  f32_call.inputs = views;
  f32_call.outputs = views + 3;
  const StatusOr<ConvGeom> geom = ValidateConv(f32_call, /*weights_prepared=*/true, /*allow_stuffed=*/false);
  if (!geom.ok()) return OkStatus();  // the general path refuses it with its own message
  const ConvGeom& g = *geom;
  const int64_t budget = g_scratch_budget.load();
  if (g.N == 0 || g.F == 0 || g.P == 0 || g.Kc == 0 || UsesDirectKernel(g) || !UsesShiftedPlaneConvAvx512(g) ||
      g.KH * g.KW > budget / (2 * ((g.P + 15) / 16))) {
    return OkStatus();
  }
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).num_elements() > 0 && call.in(i).data == nullptr) return OkStatus();
  }
  if (call.out(0).data == nullptr) return OkStatus();
  *ran = true;
  // Weights: the panels widened and packed at load, or widened and packed here.
  const auto* packed = dynamic_cast<const PackedConvWeights*>(call.prepared);
  if (packed && !packed->Fits(g)) packed = nullptr;
  const int64_t per_group = gemm::PackedAPanelsFloats(g.Fg, g.Kc);
  std::vector<float> packed_here;
  if (!packed) {
    KeptF32Copy wide_w;
    float* w = wide_w.Reserve(g.F * g.Kc);
    if (w == nullptr) return ResourceExhausted("conv2d: cannot allocate the f32 copy of an input");
    WidenToF32(DType::kF16, call.in(1).data, w, g.F * g.Kc, ctx);
    packed_here.resize(static_cast<size_t>(per_group * g.G));
    for (int64_t gi = 0; gi < g.G; ++gi) {
      gemm::PackAPanelsF32(w + gi * g.Fg * g.Kc, g.Kc, g.Fg, g.Kc, packed_here.data() + gi * per_group);
    }
  }
  const float* panels = packed ? packed->group(0) : packed_here.data();
  std::vector<float> bias;
  if (call.num_inputs == 3) {
    bias.resize(static_cast<size_t>(g.F));
    WidenToF32(DType::kF16, call.in(2).data, bias.data(), g.F, ctx);
  }
  std::vector<uint16_t> masks;
  ShiftedPlaneMasks(g, &masks);
  // One image at a time, as RunThroughF32 splits a conv into images: its input widened exactly
  // into kept memory; the kernel rounds each output once and writes the f16 output itself, so
  // there is no f32 copy of the output and no separate narrowing pass.
  ConvGeom image = g;
  image.N = 1;
  const int64_t bands = ShiftedBands(g), blocks = ShiftedFilterBlocks(g);
  const int64_t units = g.G * bands * blocks;
  const int64_t image_in = g.C * g.H * g.W, image_out = g.F * g.P;
  KeptF32Copy wide_x;
  float* x = wide_x.Reserve(image_in);
  if (x == nullptr) return ResourceExhausted("conv2d: cannot allocate the f32 copy of an input");
  for (int64_t n = 0; n < g.N; ++n) {
    WidenToF32(DType::kF16, static_cast<const uint16_t*>(call.in(0).data) + n * image_in, x, image_in, ctx);
    uint16_t* y = static_cast<uint16_t*>(call.out(0).data) + n * image_out;
    auto run_units = [&](int64_t b, int64_t e) {
      ConvShiftedPlaneUnitsF16OutAvx512(image, x, panels, per_group, bias.empty() ? nullptr : bias.data(), masks.data(),
                                        call.params->relu_output, y, b, e);
    };
    if (ctx.pool) {
      ctx.pool->ParallelForWork(units, kShiftedBlockFilters * kShiftedBandPositions * g.Kc, run_units);
    } else {
      run_units(0, units);
    }
  }
  return OkStatus();
}

Status RunConv(const KernelCall& call, const CpuContext& ctx) {
  if (ctx.isa == Isa::kAvx2 && !CpuHasAvx2Fma()) return FailedPrecondition("conv2d: CPU lacks AVX2/FMA");
  ASSIGN_OR_RETURN(const ConvGeom g,
                   ValidateConv(call, /*weights_prepared=*/call.prepared != nullptr, /*allow_stuffed=*/true));
  RETURN_IF_ERROR(ValidateEpilogue(call));
  const float* x = call.in(0).as<const float>();
  // Null when the weights are 16-bit ones that were widened and packed at load (RunThroughF32).
  const float* w = call.in(1).as<const float>();
  const float* bias = call.num_inputs == 3 ? call.in(2).as<const float>() : nullptr;
  float* y = call.out(0).as<float>();
  if (g.N == 0 || g.F == 0 || g.P == 0) return OkStatus();
  // Weights packed once when the program was loaded; same values, so the same bits.
  const auto* packed = dynamic_cast<const PackedConvWeights*>(call.prepared);
  if (packed && (ctx.isa != Isa::kAvx2 || !packed->Fits(g))) packed = nullptr;
  const bool weights_missing = w == nullptr && call.in(1).num_elements() > 0;
  if (weights_missing && !packed) return InvalidArgument("conv2d: weights have no data");
  auto a_panels = [&](int64_t gi) -> const float* { return packed ? packed->group(gi) : nullptr; };
  // The GEMM reads the packed panels instead of `a` (every block starts at a multiple of 6 rows).
  auto a_rows = [&](int64_t gi) -> const float* { return packed || !w ? nullptr : w + gi * g.Fg * g.Kc; };
  const int64_t threads = ctx.pool ? ctx.pool->num_threads() : 1;
  const int64_t scratch_budget = g_scratch_budget.load();
  const gemm::Dims gd{g.Fg, 0, g.Kc};
  std::unique_ptr<EpilogueRunner> epilogue;
  if (call.epilogue) epilogue = std::make_unique<EpilogueRunner>(call, ctx.isa);
  // Bias then epilogue for `count` rows of `cols` outputs starting at flat output index `first`,
  // rows `ld` apart (the block_bias rows of the same filters).
  const bool bias_avx512 = ctx.isa == Isa::kAvx2 && UseAvx512DirectConv();
  auto finish_block = [&](float* block, int64_t first, int64_t ld, int64_t count, int64_t cols,
                          const float* block_bias) {
    if (block_bias && bias_avx512) {
      AddBiasRowsAvx512(block, ld, count, cols, block_bias);
    } else if (block_bias) {
      AddBias(block, ld, count, cols, block_bias);
    }
    if (epilogue && cols == ld) {
      epilogue->Apply(first, first + count * cols);  // whole rows: one contiguous range
    } else if (epilogue) {
      for (int64_t r = 0; r < count; ++r) epilogue->Apply(first + r * ld, first + r * ld + cols);
    }
  };

  if (g.stuffed && !StuffedSkipsZeros(g, ctx.isa) && g.N * g.C * g.H * g.W <= scratch_budget / int64_t{sizeof(float)}) {
    // The stuffed input in scratch memory, then the ordinary conv over it.
    gemm::Workspace stuffed_ws;
    auto* stuffed = static_cast<float*>(stuffed_ws.Get(0, sizeof(float) * g.N * g.C * g.H * g.W));
    if (!stuffed) return ResourceExhausted("conv2d: cannot allocate scratch memory");
    // Row by row, so that each row is written while it is in cache: zeros, then x's elements.
    // x column j lands on column j * uw - c0, for j in [jb, je).
    const int64_t jb = (g.c0 + g.uw - 1) / g.uw, je = std::max(jb, (g.W + g.c0 + g.uw - 1) / g.uw);
    for (int64_t nc = 0; nc < g.N * g.C; ++nc) {
      const float* xp = x + nc * g.XH * g.XW;
      float* sp = stuffed + nc * g.H * g.W;
      for (int64_t r = 0; r < g.H; ++r) {
        float* row = sp + r * g.W;
        std::fill(row, row + g.W, 0.0f);
        if ((r + g.r0) % g.uh != 0) continue;
        const float* xrow = xp + (r + g.r0) / g.uh * g.XW;
        for (int64_t j = jb; j < je; ++j) row[j * g.uw - g.c0] = xrow[j];
      }
    }
    OpParams plain = *call.params;
    plain.input_stuffing.clear();
    TensorView inputs[3];
    for (int i = 0; i < call.num_inputs; ++i) inputs[i] = call.in(i);
    inputs[0].dims[2] = g.H;
    inputs[0].dims[3] = g.W;
    inputs[0].data = stuffed;
    KernelCall unstuffed = call;
    unstuffed.params = &plain;
    unstuffed.inputs = inputs;
    return RunConv(unstuffed, ctx);
  }
  if (g.stuffed) {
    // A zero-stuffed input (conv_direct_impl.h): only the terms that read x, -0 recomputed.
    if (!w) return InvalidArgument("conv2d: weights have no data");
    std::vector<uint8_t> finite_filter(static_cast<size_t>(g.F), 1);
    for (int64_t f = 0; f < g.F; ++f) {
      for (int64_t k = 0; k < g.Kc; ++k) finite_filter[f] &= std::isfinite(w[f * g.Kc + k]) ? 1 : 0;
    }
    StuffedOneTap taps;
    const bool all_finite = std::find(finite_filter.begin(), finite_filter.end(), 0) == finite_filter.end();
    if (StuffedBlocked(g, ctx.isa) && g_stuffed_one_tap_enabled.load() && all_finite && StuffedOneTapTaps(g, &taps)) {
      // One x term per channel and output: each x row read once for its two output rows.
      auto run_units = [&](int64_t b, int64_t e) {
        ConvStuffedOneTapAvx512(g, taps, x, w, bias, y, b, e);
        if (!epilogue) return;
        for (int64_t unit = b; unit < e; ++unit) {
          const int64_t first = (unit / g.XH * g.OH + 2 * (unit % g.XH)) * g.OW;
          epilogue->Apply(first, first + 2 * g.OW);
        }
      };
      const int64_t units = g.N * g.F * g.XH;
      if (ctx.pool) {
        ctx.pool->ParallelForWork(units, std::max<int64_t>(1, 4 * g.Cg * g.XW), run_units);
      } else {
        run_units(0, units);
      }
      return OkStatus();
    }
    if (StuffedBlocked(g, ctx.isa)) {
      // Blocks of filters in zmm registers; a unit is one output row of one block.
      std::vector<float> packed(static_cast<size_t>(StuffedPackedFloats(g)));
      PackStuffedFilterBlocks(g, w, packed.data());
      const int64_t blocks = StuffedBlocksPerGroup(g);
      const int64_t units = g.N * g.G * blocks * g.OH;
      auto run_units = [&](int64_t b, int64_t e) {
        ConvStuffedBlocksAvx512(g, x, w, packed.data(), bias, finite_filter.data(), y, b, e);
        if (!epilogue) return;
        for (int64_t unit = b; unit < e; ++unit) {
          const int64_t oh = unit % g.OH, ngb = unit / g.OH, ng = ngb / blocks;
          const int64_t f0 = (ng % g.G) * g.Fg + (ngb % blocks) * kStuffedBlockFilters;
          const int64_t f1 = std::min(f0 + kStuffedBlockFilters, (ng % g.G + 1) * g.Fg);
          for (int64_t f = f0; f < f1; ++f) {
            const int64_t first = (((ng / g.G) * g.F + f) * g.OH + oh) * g.OW;
            epilogue->Apply(first, first + g.OW);
          }
        }
      };
      const int64_t unit_work =
          std::max<int64_t>(1, std::min(kStuffedBlockFilters, g.Fg) * g.OW * g.Kc / (g.uh * g.uw));
      if (ctx.pool) {
        ctx.pool->ParallelForWork(units, unit_work, run_units);
      } else {
        run_units(0, units);
      }
      return OkStatus();
    }
    auto rows = ctx.isa == Isa::kAvx2 ? &ConvStuffedRowsAvx2 : &ConvStuffedRowsPortable;
    const int64_t n_rows = g.N * g.F * g.OH;
    auto run_rows = [&](int64_t b, int64_t e) {
      rows(g, x, w, bias, finite_filter.data(), y, b, e);
      if (epilogue) epilogue->Apply(b * g.OW, e * g.OW);
    };
    if (ctx.pool) {
      // About one term in uh * uw reads x.
      ctx.pool->ParallelForWork(n_rows, std::max<int64_t>(1, g.OW * g.Kc / (g.uh * g.uw)), run_rows);
    } else {
      run_rows(0, n_rows);
    }
    return OkStatus();
  }

  if (UsesDirectKernel(g)) {
    if (weights_missing) return InvalidArgument("conv2d: weights have no data");
    // Both strides 1 and OW == W (conv_avx512.cc): the flattened plane, every lane an output.
    const bool plane_masks_fit = g.KH * g.KW <= scratch_budget / (2 * ((g.P + 15) / 16));
    if (ctx.isa == Isa::kAvx2 && UsesDirectPlaneConvAvx512(g) && plane_masks_fit && g_direct_plane_enabled.load()) {
      std::vector<uint16_t> masks;
      ShiftedPlaneMasks(g, &masks);
      const int64_t blocks = DirectPlaneBlocks(g);
      auto run_units = [&](int64_t b, int64_t e) {
        ConvDirectPlaneUnitsAvx512(g, x, w, bias, masks.data(), y, b, e);
        if (!epilogue) return;
        for (int64_t unit = b; unit < e; ++unit) {
          const int64_t first = unit / blocks * g.P + unit % blocks * 16 * kDirectPlaneBlockVectors;
          epilogue->Apply(first, std::min(first + 16 * kDirectPlaneBlockVectors, (unit / blocks + 1) * g.P));
        }
      };
      const int64_t units = g.N * g.F * blocks;
      if (ctx.pool) {
        ctx.pool->ParallelForWork(units, std::min<int64_t>(g.P, 16 * kDirectPlaneBlockVectors) * g.Kc, run_units);
      } else {
        run_units(0, units);
      }
      return OkStatus();
    }
    auto rows = ctx.isa != Isa::kAvx2   ? &ConvDirectRowsPortable
                : UseAvx512DirectConv() ? &ConvDirectRowsAvx512
                                        : &ConvDirectRowsAvx2;
    const int64_t n_rows = g.N * g.F * g.OH;
    // With an epilogue, rows go in blocks of about kEpilogueBlock outputs, each block's epilogue
    // right after it while its outputs are still in L1.
    const int64_t block_rows = epilogue ? std::max<int64_t>(1, kEpilogueBlock / std::max<int64_t>(1, g.OW)) : n_rows;
    auto run_rows = [&](int64_t b, int64_t e) {
      for (int64_t r0 = b; r0 < e; r0 += block_rows) {
        const int64_t r1 = std::min(e, r0 + block_rows);
        rows(g, x, w, bias, y, r0, r1);
        if (epilogue) epilogue->Apply(r0 * g.OW, r1 * g.OW);
      }
    };
    if (ctx.pool) {
      ctx.pool->ParallelForWork(n_rows, g.OW * g.Kc, run_rows);
    } else {
      run_rows(0, n_rows);
    }
    return OkStatus();
  }

  if (ctx.isa == Isa::kAvx2 && w && UsesSmallDenseConvAvx512(g)) {
    // Few filters and short chains (conv_avx512.cc): eight filters of an output row per pass.
    const int64_t groups = SmallDenseFilterGroups(g);
    const int64_t units = g.N * groups * g.OH;
    const int64_t block_rows = std::max<int64_t>(1, kEpilogueBlock / (8 * std::max<int64_t>(1, g.OW)));
    auto run_units = [&](int64_t b, int64_t e) {
      for (int64_t r0 = b; r0 < e;) {
        // Rows [r0, r1) of one (image, filter group), so each filter's rows are contiguous.
        const int64_t r1 = std::min({e, (r0 / g.OH + 1) * g.OH, r0 + block_rows});
        ConvSmallDenseRowsAvx512(g, x, w, bias, y, r0, r1);
        if (epilogue) {
          const int64_t ng = r0 / g.OH, n = ng / groups, f0 = ng % groups * 8;
          for (int64_t f = f0; f < std::min(g.F, f0 + 8); ++f) {
            const int64_t first = ((n * g.F + f) * g.OH + r0 % g.OH) * g.OW;
            epilogue->Apply(first, first + (r1 - r0) * g.OW);
          }
        }
        r0 = r1;
      }
    };
    if (ctx.pool) {
      ctx.pool->ParallelForWork(units, 8 * g.OW * g.Kc, run_units);
    } else {
      run_units(0, units);
    }
    return OkStatus();
  }

  const auto* few_panels = dynamic_cast<const FewPositionsPanels*>(call.prepared);
  if (few_panels && !few_panels->Fits(g)) few_panels = nullptr;
  if (ctx.isa == Isa::kAvx2 && (few_panels || w) && UsesFewPositionsConvAvx512(g) &&
      g.N * g.Kc * g.P <= scratch_budget / int64_t{sizeof(float)}) {
    // At most 8 positions per image (conv_avx512.cc): filters across the lanes, the terms
    // broadcast from each image's COL.
    std::vector<float> panels_here;
    if (!few_panels) {
      panels_here.resize(static_cast<size_t>(FewPositionsPanelFloats(g)));
      PackFewPositionsPanels(g, w, panels_here.data());
    }
    const float* panels = few_panels ? few_panels->data() : panels_here.data();
    // Every element of COL is written before it is read: kept scratch, not a zeroed vector.
    gemm::Workspace col_ws;
    auto* col =
        static_cast<float*>(col_ws.Get(0, sizeof(float) * static_cast<size_t>(std::max<int64_t>(1, g.N * g.Kc * g.P))));
    if (!col) return ResourceExhausted("conv2d: cannot allocate scratch memory");
    for (int64_t n = 0; n < g.N; ++n) Im2Col(g, x, n, 0, 0, g.P, 0, g.Kc, col + n * g.Kc * g.P);
    const int64_t blocks = FewPositionsBlocks(g), block_filters = FewPositionsBlockFilters(g);
    auto run_units = [&](int64_t b, int64_t e) {
      ConvFewPositionsUnitsAvx512(g, col, panels, bias, y, b, e);
      if (!epilogue) return;
      for (int64_t unit = b; unit < e; ++unit) {
        const int64_t n = unit / blocks, f0 = unit % blocks * block_filters;
        const int64_t first = (n * g.F + f0) * g.P;
        epilogue->Apply(first, first + (std::min(g.F, f0 + block_filters) - f0) * g.P);
      }
    };
    const int64_t units = g.N * blocks;
    if (ctx.pool) {
      ctx.pool->ParallelForWork(units, block_filters * g.P * g.Kc, run_units);
    } else {
      run_units(0, units);
    }
    return OkStatus();
  }
  // The kernel's lane masks (2 bytes per tap and 16 positions) stay within the scratch budget.
  const bool shifted_masks_fit = g.KH * g.KW <= scratch_budget / (2 * ((g.P + 15) / 16));
  if (ctx.isa == Isa::kAvx2 && (packed || w) && UsesShiftedPlaneConvAvx512(g) && shifted_masks_fit) {
    // Every im2col row is a shifted input plane (conv_avx512.cc): the GEMM's register tile
    // reads x itself. The weights are the packed A panels, packed here when not at load.
    const int64_t per_group = gemm::PackedAPanelsFloats(g.Fg, g.Kc);
    std::vector<float> packed_here;
    if (!packed) {
      packed_here.resize(static_cast<size_t>(per_group * g.G));
      for (int64_t gi = 0; gi < g.G; ++gi) {
        gemm::PackAPanelsF32(w + gi * g.Fg * g.Kc, g.Kc, g.Fg, g.Kc, packed_here.data() + gi * per_group);
      }
    }
    const float* panels = packed ? packed->group(0) : packed_here.data();
    std::vector<uint16_t> masks;
    ShiftedPlaneMasks(g, &masks);
    const int64_t bands = ShiftedBands(g), blocks = ShiftedFilterBlocks(g);
    auto run_units = [&](int64_t b, int64_t e) {
      for (int64_t unit = b; unit < e; ++unit) {
        ConvShiftedPlaneUnitsAvx512(g, x, panels, per_group, bias, masks.data(), y, unit, unit + 1);
        if (!epilogue) continue;
        const int64_t block = unit % blocks, band = unit / blocks % bands, ng = unit / (blocks * bands);
        const int64_t f0 = (ng % g.G) * g.Fg + block * kShiftedBlockFilters;
        const int64_t f1 = std::min(f0 + kShiftedBlockFilters, (ng % g.G + 1) * g.Fg);
        const int64_t p0 = band * kShiftedBandPositions, p1 = std::min(g.P, p0 + kShiftedBandPositions);
        for (int64_t f = f0; f < f1; ++f) {
          const int64_t first = ((ng / g.G) * g.F + f) * g.P;
          epilogue->Apply(first + p0, first + p1);
        }
      }
    };
    const int64_t units = g.N * g.G * bands * blocks;
    if (ctx.pool) {
      ctx.pool->ParallelForWork(units, kShiftedBlockFilters * kShiftedBandPositions * g.Kc, run_units);
    } else {
      run_units(0, units);
    }
    return OkStatus();
  }

  // 1x1, stride 1, no padding: the input image is already the GEMM's B operand.
  if (g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0) {
    gemm::Dims d{g.Fg, g.P, g.Kc};
    auto operands = [&](int64_t i) {
      const int64_t n = i / g.G, gi = i % g.G;
      gemm::F32Operands op;
      op.a = a_rows(gi);
      op.lda = g.Kc;
      op.a_panels = a_panels(gi);
      op.b = x + (n * g.C + gi * g.Cg) * g.H * g.W;
      op.ldb = g.P;
      op.c = y + (n * g.F + gi * g.Fg) * g.P;
      op.ldc = g.P;
      return op;
    };
    if (!bias && !epilogue) return gemm::F32Batched(g.N * g.G, d, operands, ctx);
    // Bias and epilogue on each finished GEMM block while it is in cache (no second pass).
    auto done = [&](int64_t i, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      const int64_t n = i / g.G, gi = i % g.G;
      const int64_t first = (n * g.F + gi * g.Fg + m0) * g.P + n0;
      finish_block(y + first, first, g.P, m1 - m0, n1 - n0, bias ? bias + gi * g.Fg + m0 : nullptr);
    };
    return gemm::F32Batched(g.N * g.G, d, operands, ctx, done);
  }

  // Mode A: many (image, group, tile) jobs, each done by one thread with its own scratch.
  const bool k_blocked = ctx.isa == Isa::kAvx2 && g.Kc > kKBlock;
  const int64_t col_rows = k_blocked ? kKBlock : g.Kc;  // im2col rows written at a time
  const int64_t pt_a = k_blocked ? TileColsForRows(g, kKBlock, std::min(kKBlockBytes, scratch_budget / threads))
                                 : TileCols(g, std::min(kTileTarget, scratch_budget / threads));
  const int64_t tiles_a = (g.P + pt_a - 1) / pt_a;
  const int64_t jobs_a = g.N * g.G * tiles_a;
  // Mode A also when the whole convolution is too little work to share: it then runs on the
  // calling thread in one job after another, without mode B's per-tile fork/joins.
  const int64_t job_work_a = (g.Fg + 1) * g.Kc * pt_a;
  const bool too_small_to_share = ctx.pool && jobs_a * job_work_a < 2 * ctx.pool->min_chunk_work();
  if (threads == 1 || jobs_a >= 2 * threads || too_small_to_share) {
    std::atomic<bool> failed{false};
    auto fn = [&](int64_t begin, int64_t end) {
      gemm::Workspace gemm_ws, col_ws;
      auto* col = static_cast<float*>(col_ws.Get(0, sizeof(float) * col_rows * pt_a));
      if (!col) {
        failed.store(true);
        return;
      }
      for (int64_t job = begin; job < end; ++job) {
        const int64_t tile = job % tiles_a, ng = job / tiles_a, n = ng / g.G, gi = ng % g.G;
        const int64_t p0 = tile * pt_a, ptc = std::min(pt_a, g.P - p0);
        gemm::F32Operands op;
        op.a = a_rows(gi);
        op.lda = g.Kc;
        op.a_panels = a_panels(gi);
        op.b = col;
        op.ldb = ptc;
        op.c = y + (n * g.F + gi * g.Fg) * g.P + p0;
        op.ldc = g.P;
        gemm::Dims d = gd;
        d.N = ptc;
        int64_t k0 = 0;
        do {  // once when Kc is 0: the GEMM then writes the +0.0 of an empty chain
          const int64_t k1 = std::min(g.Kc, k0 + col_rows);
          Im2Col(g, x, n, gi, p0, ptc, k0, k1, col);
          if (k_blocked) {
            op.k_begin = k0;
            op.k_end = k1;
          }
          if (!gemm::F32Single(op, d, ctx.isa, &gemm_ws)) failed.store(true);
          k0 = k1;
        } while (k0 < g.Kc);
        finish_block(op.c, (n * g.F + gi * g.Fg) * g.P + p0, g.P, g.Fg, ptc, bias ? bias + gi * g.Fg : nullptr);
      }
    };
    if (ctx.pool) {
      // A job: im2col of its tile, then the tile's GEMM.
      ctx.pool->ParallelForWork(jobs_a, job_work_a, fn);
    } else {
      fn(0, jobs_a);
    }
    if (failed.load()) return ResourceExhausted("conv2d: cannot allocate scratch memory");
    return OkStatus();
  }

  // Mode B: few large jobs, one after another; im2col and the GEMM each use the pool.
  const int64_t pt_b = TileCols(g, std::min(kTileTarget * threads, scratch_budget));
  gemm::Workspace col_ws;
  auto* col = static_cast<float*>(col_ws.Get(0, sizeof(float) * g.Kc * pt_b));
  if (!col) return ResourceExhausted("conv2d: cannot allocate scratch memory");
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t gi = 0; gi < g.G; ++gi) {
      for (int64_t p0 = 0; p0 < g.P; p0 += pt_b) {
        const int64_t ptc = std::min(pt_b, g.P - p0);
        ctx.pool->ParallelForWork(
            g.Kc, ptc, [&](int64_t k0, int64_t k1) { Im2Col(g, x, n, gi, p0, ptc, k0, k1, col + k0 * ptc); });
        gemm::Dims d = gd;
        d.N = ptc;
        gemm::F32Operands op;
        op.a = a_rows(gi);
        op.lda = g.Kc;
        op.a_panels = a_panels(gi);
        op.b = col;
        op.ldb = ptc;
        op.c = y + (n * g.F + gi * g.Fg) * g.P + p0;
        op.ldc = g.P;
        RETURN_IF_ERROR(gemm::F32Batched(
            1, d, [&](int64_t) { return op; }, ctx));
        const int64_t first = (n * g.F + gi * g.Fg) * g.P + p0;
        ctx.pool->ParallelForWork(g.Fg, ptc, [&](int64_t f0, int64_t f1) {
          finish_block(op.c + f0 * g.P, first + f0 * g.P, g.P, f1 - f0, ptc, bias ? bias + gi * g.Fg + f0 : nullptr);
        });
      }
    }
  }
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
