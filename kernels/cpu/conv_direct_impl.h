// Direct (im2col-free) Conv2D for grouped and depthwise convolutions and for one filter per
// group, written once and compiled twice: by conv.cc for the portable baseline and by
// conv_avx2.cc with -mavx2 -mfma, where the loops over output columns auto-vectorize to
// vfmadd (std::fma is one fused multiply-add with one rounding in both builds;
// -ffp-contract=off adds none). The AVX2 build uses it only for strided widths;
// conv_avx2.cc register-blocks the others.
//
// Order (docs/DETERMINISM.md 4.4): each output element is acc = +0.0, then
// acc = fma(xpad, w, acc) for c, kh, kw in this nesting order, then acc + bias, then NaN
// canonicalization. The loops below run (c, kh, kw) outside and the output columns inside,
// so every element still sees its terms one by one in the spec's order; columns are
// independent, so vector width and the thread split change no bit.
//
// Padding terms are fma(+0.0, w, acc) and are always applied: they are not no-ops. With
// w = +-inf or NaN they give NaN, and acc can be -0 (a product that underflows to -0), which
// the term turns into +0 when w > 0.
//
// Linkage: as elementwise_impl.h, everything TU-local except the two entry points.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/checks/conv.h"

#if defined(__GNUC__)
#define CNSR_CONV_FLATTEN __attribute__((flatten))
#else
#define CNSR_CONV_FLATTEN
#endif

namespace consensor::kernels::cpu {

// Computes the output rows [begin, end) of y, a row being (n, f, oh) with index
// (n * F + f) * OH + oh. The AVX2 one may only be called when CpuHasAvx2Fma() is true.
void ConvDirectRowsPortable(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                            int64_t begin, int64_t end);
void ConvDirectRowsAvx2(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y, int64_t begin,
                        int64_t end);
// conv_avx512.cc: the same rows with 512-bit registers (stride 1 or 2 in width; others go to
// the AVX2 rows). Call only when UseAvx512DirectConv(): AVX-512F present and not turned off by
// SetConvAvx512ForTesting(false) (gemm.h). Same bits.
void ConvDirectRowsAvx512(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y, int64_t begin,
                          int64_t end);
bool UseAvx512DirectConv();
// conv_avx512.cc: the direct kernel's convolutions (grouped, depthwise, one filter per group) with
// both strides 1 and OW == W, over the flattened output plane: each (c, kh, kw) term of position
// p reads x[c, p + shift(kh, kw)] with the lane masks of ShiftedPlaneMasks (padding lanes +0.0),
// 8 vectors of 16 positions in registers across all terms. True only when UseAvx512DirectConv().
// A unit is kDirectPlaneBlockVectors vectors of one (n, f) plane: unit = (n * F + f) *
// DirectPlaneBlocks(g) + block, outputs [block * 16 * kDirectPlaneBlockVectors, ...) of the plane.
inline constexpr int64_t kDirectPlaneBlockVectors = 256;  // 4096 outputs, the epilogue's block
bool UsesDirectPlaneConvAvx512(const ConvGeom& g);
inline int64_t DirectPlaneBlocks(const ConvGeom& g) {
  return (g.P + 16 * kDirectPlaneBlockVectors - 1) / (16 * kDirectPlaneBlockVectors);
}
void ConvDirectPlaneUnitsAvx512(const ConvGeom& g, const float* x, const float* w, const float* bias,
                                const uint16_t* masks, float* y, int64_t begin, int64_t end);
// conv_avx512.cc: dense convolutions (one group) with at most kMaxSmallDenseFilters filters and
// chains of at most kMaxSmallDenseChain terms, stride 1 or 2 in width (the first conv of small
// CNNs), direct, eight filters per pass over the input; true only when UseAvx512DirectConv().
// A unit is (n, filter group of 8, oh), unit = (n * SmallDenseFilterGroups(g) + group) * OH + oh.
inline constexpr int64_t kMaxSmallDenseFilters = 32;
inline constexpr int64_t kMaxSmallDenseChain = 32;
bool UsesSmallDenseConvAvx512(const ConvGeom& g);
int64_t SmallDenseFilterGroups(const ConvGeom& g);
void ConvSmallDenseRowsAvx512(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                              int64_t begin, int64_t end);
// conv_avx512.cc: dense convolutions whose im2col rows are shifted input planes (both strides 1
// and OW == W: 1xK with "same" width padding, Kx1 without it, KxK "same"), other than the
// unpadded 1x1, computed from the input directly: each (c, kh, kw) term of output position p
// reads x[c, p + shift(kh, kw)] (flat index in the plane), a lane whose input row or column lies
// in the padding masked to +0.0. True only when UseAvx512DirectConv() and gemm::UseAvx512Gemm().
// A unit is kShiftedBlockFilters filters of one group times kShiftedBandPositions output
// positions: unit = ((n * G + gi) * ShiftedBands(g) + band) * ShiftedFilterBlocks(g) + block.
// `panels` holds each group's weights as gemm::PackAPanelsF32's 6-row panels, group gi at
// panels + gi * panels_per_group; `masks` is what ShiftedPlaneMasks wrote. Bias add and NaN
// canonicalization as the GEMM path (one add, then canonical NaN).
inline constexpr int64_t kShiftedBlockFilters = 12;
inline constexpr int64_t kShiftedBandPositions = 128;
bool UsesShiftedPlaneConvAvx512(const ConvGeom& g);
inline int64_t ShiftedBands(const ConvGeom& g) { return (g.P + kShiftedBandPositions - 1) / kShiftedBandPositions; }
inline int64_t ShiftedFilterBlocks(const ConvGeom& g) {
  return (g.Fg + kShiftedBlockFilters - 1) / kShiftedBlockFilters;
}
// Per kernel tap t = kh * KW + kw and 16 output positions starting at 16 * v, the lanes whose
// input element lies inside the plane (and whose position is below P): masks[t * vectors + v],
// vectors = (P + 15) / 16.
void ShiftedPlaneMasks(const ConvGeom& g, std::vector<uint16_t>* masks);
void ConvShiftedPlaneUnitsAvx512(const ConvGeom& g, const float* x, const float* panels, int64_t panels_per_group,
                                 const float* bias, const uint16_t* masks, float* y, int64_t begin, int64_t end);
// The same units of an f16 call (DETERMINISM.md 1.3): x, panels and bias are the exactly widened
// operands, and each output is the f32 result above rounded once to f16, written to y directly;
// with `relu`, the f32 relu of that result rounded once (OpParams::relu_output, DETERMINISM.md 3.1).
void ConvShiftedPlaneUnitsF16OutAvx512(const ConvGeom& g, const float* x, const float* panels, int64_t panels_per_group,
                                       const float* bias, const uint16_t* masks, bool relu, uint16_t* y, int64_t begin,
                                       int64_t end);
// conv_avx512.cc: dense convolutions (one group) with at most kFewPositionsMax output positions
// per image (an STFT as a strided 1xK conv, a last conv that reduces the plane to a point): the
// filters run across the lanes, 16 per vector, each term's input broadcast from the im2col
// matrix COL [Kc, P] of the image (conv.cc's Im2Col). `panels` holds the weights as 16-filter
// panels over all of K (PackFewPositionsPanels, FewPositionsPanelFloats(g) floats: filter
// 16 * j + i's term k at panels[(j * Kc + k) * 16 + i], zero past F). A unit is a block of
// FewPositionsBlockFilters(g) filters of one image: unit = n * FewPositionsBlocks(g) + block,
// image n's COL at col + n * Kc * P. True only when UseAvx512DirectConv().
inline constexpr int64_t kFewPositionsMax = 8;
bool UsesFewPositionsConvAvx512(const ConvGeom& g);
int64_t FewPositionsPanelFloats(const ConvGeom& g);
void PackFewPositionsPanels(const ConvGeom& g, const float* w, float* panels);
int64_t FewPositionsBlockFilters(const ConvGeom& g);
inline int64_t FewPositionsBlocks(const ConvGeom& g) {
  return (g.F + FewPositionsBlockFilters(g) - 1) / FewPositionsBlockFilters(g);
}
void ConvFewPositionsUnitsAvx512(const ConvGeom& g, const float* col, const float* panels, const float* bias, float* y,
                                 int64_t begin, int64_t end);
// conv_avx512.cc: y = y + bias[f] (one add), then NaN canonicalization, for `rows` rows of `cols`
// columns, rows ldy apart (as conv.cc's AddBias). Call only when UseAvx512DirectConv().
void AddBiasRowsAvx512(float* y, int64_t ldy, int64_t rows, int64_t cols, const float* bias);
// The same rows for a zero-stuffed input (g.stuffed; see ConvStuffedRowImpl below).
// finite_filter[f] says whether every weight of filter f is finite.
void ConvStuffedRowsPortable(const ConvGeom& g, const float* x, const float* w, const float* bias,
                             const uint8_t* finite_filter, float* y, int64_t begin, int64_t end);
void ConvStuffedRowsAvx2(const ConvGeom& g, const float* x, const float* w, const float* bias,
                         const uint8_t* finite_filter, float* y, int64_t begin, int64_t end);

// conv_stuffed_avx512.cc (call only when gemm::UseAvx512Gemm(), which SetGemmAvx512ForTesting
// turns off as it does the GEMM's 512-bit tiles), stride 1 only: the same outputs
// a block of up to kStuffedBlockFilters filters of one group at a time. Unit
// ((n * G + gi) * StuffedBlocksPerGroup(g) + b) * OH + oh is output row oh of filters
// gi * Fg + b * kStuffedBlockFilters + i, i < min(kStuffedBlockFilters, Fg - b * kStuffedBlockFilters),
// of image n; ConvStuffedBlocksAvx512 computes units [begin, end). `packed` holds
// StuffedPackedFloats(g) floats written by PackStuffedFilterBlocks from w (which it also reads).
constexpr int64_t kStuffedBlockFilters = 12;
inline int64_t StuffedBlocksPerGroup(const ConvGeom& g) {
  return (g.Fg + kStuffedBlockFilters - 1) / kStuffedBlockFilters;
}
int64_t StuffedPackedFloats(const ConvGeom& g);
void PackStuffedFilterBlocks(const ConvGeom& g, const float* w, float* packed);
void ConvStuffedBlocksAvx512(const ConvGeom& g, const float* x, const float* w, const float* packed, const float* bias,
                             const uint8_t* finite_filter, float* y, int64_t begin, int64_t end);

// A stride-1 conv over an input stuffed by 2 x 2 with a 2 x 2 kernel whose every output reads
// exactly one x element per input channel, x[oh / 2, ow / 2], through a kernel tap that depends
// only on (oh % 2, ow % 2): ConvTranspose with stride == kernel == 2, pads 0, no output
// padding, dilation 1 (StuffedOneTapTaps says whether g is one and which taps). The four
// output phases of a 2 x 2 block share their x element, so conv_stuffed_avx512.cc reads each x
// row once for both output rows (ConvStuffedOneTapAvx512). Same chains and bits as the blocks.
struct StuffedOneTap {
  int64_t kh[2], kw[2];  // the kernel row of output rows 2i + q, the kernel column of columns 2j + p
};
bool StuffedOneTapTaps(const ConvGeom& g, StuffedOneTap* taps);
// Unit (n * F + f) * XH + i is output rows 2i and 2i + 1 of filter f of image n; computes units
// [begin, end). Every weight of the filters it is given must be finite (the caller sends a
// filter with a non-finite weight to the other kernels). Call only when gemm::UseAvx512Gemm().
void ConvStuffedOneTapAvx512(const ConvGeom& g, const StuffedOneTap& taps, const float* x, const float* w,
                             const float* bias, float* y, int64_t begin, int64_t end);

namespace {

constexpr int64_t kDirectTile = 128;  // output columns whose accumulators stay in L1

// Output columns [j0, j1) of one output row (n, f, oh), row = (n * F + f) * OH + oh.
CNSR_CONV_FLATTEN inline void ConvDirectSpanImpl(const ConvGeom& g, const float* x, const float* w, const float* bias,
                                                 float* y, int64_t row, int64_t j0, int64_t j1) {
  constexpr uint32_t kCanonicalNaN = 0x7FC00000u;
  float nan;
  std::memcpy(&nan, &kCanonicalNaN, sizeof(nan));
  float acc[kDirectTile];
  const int64_t oh = row % g.OH, nf = row / g.OH, f = nf % g.F, n = nf / g.F;
  const int64_t gi = f / g.Fg;
  const float* wf = w + f * g.Kc;
  float* yrow = y + row * g.OW;
  for (int64_t t0 = j0; t0 < j1; t0 += kDirectTile) {
    const int64_t tn = j1 - t0 < kDirectTile ? j1 - t0 : kDirectTile;
    for (int64_t j = 0; j < tn; ++j) acc[j] = 0.0f;
    for (int64_t c = 0; c < g.Cg; ++c) {
      const float* xc = x + ((n * g.C) + gi * g.Cg + c) * g.H * g.W;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
        const bool row_inside = ih >= 0 && ih < g.H;
        const float* xrow = xc + (row_inside ? ih : 0) * g.W;
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const float wv = wf[(c * g.KH + kh) * g.KW + kw];
          // Columns j of this tile whose input position iw0 + j * sw lies in [0, W).
          const int64_t iw0 = (t0 * g.sw) - g.pl + kw * g.dw;
          int64_t jb = 0, je = 0;
          if (row_inside) {
            jb = iw0 >= 0 ? 0 : (-iw0 + g.sw - 1) / g.sw;
            je = g.W - iw0 <= 0 ? 0 : (g.W - iw0 + g.sw - 1) / g.sw;
            if (jb > tn) jb = tn;
            if (je > tn) je = tn;
            if (je < jb) je = jb;
          }
          for (int64_t j = 0; j < jb; ++j) acc[j] = std::fma(0.0f, wv, acc[j]);
          for (int64_t j = je; j < tn; ++j) acc[j] = std::fma(0.0f, wv, acc[j]);
          if (g.sw == 1) {
            const float* xs = xrow + (iw0 + jb);  // in bounds whenever jb < je
            for (int64_t j = jb; j < je; ++j) acc[j] = std::fma(xs[j - jb], wv, acc[j]);
          } else {
            for (int64_t j = jb; j < je; ++j) acc[j] = std::fma(xrow[iw0 + j * g.sw], wv, acc[j]);
          }
        }
      }
    }
    float* out = yrow + t0;
    if (bias) {
      const float b = bias[f];
      for (int64_t j = 0; j < tn; ++j) {
        const float v = acc[j] + b;
        out[j] = v != v ? nan : v;
      }
    } else {
      for (int64_t j = 0; j < tn; ++j) out[j] = acc[j] != acc[j] ? nan : acc[j];
    }
  }
}

inline void ConvDirectRowsImpl(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                               int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; ++row) ConvDirectSpanImpl(g, x, w, bias, y, row, 0, g.OW);
}

// --- Zero-stuffed input (ConvTranspose's lowering, fused at compilation: DETERMINISM.md 3.1) ---
//
// The conv reads the virtual input V = x with uh - 1 rows and uw - 1 columns of +0.0 after each
// element, cropped (ConvGeom::stuffed). The spec's chain t of an output takes every (c, kh, kw)
// term; the chain s below skips the terms whose V value is a stuffed zero or padding, keeping
// the others in the spec's order. Why s gives t's bits except where s is -0:
//  - a skipped term is fma(+0, w, acc) = acc + (exact signed zero) when w is finite. That leaves
//    every acc but -0 unchanged (a NaN stays NaN), and turns -0 into +0 or keeps it.
//  - so after any prefix, either s == t (bits) or s = -0 and t = +0. A term both chains take,
//    fma(v, w, acc): with an exact product that is nonzero, infinite or NaN, acc = -0 and
//    acc = +0 give the same result (p + 0 = p before the one rounding), so the chains agree
//    again; with an exact zero product, -0 + p and +0 + p either agree or stay -0 and +0.
//  - the bias add keeps it: -0 + b and +0 + b agree unless b is -0; NaNs end canonical in both.
// So with every weight of the filter finite, an output of s that is not -0 is t's output, and
// an output of s that is -0 is recomputed with the whole chain (StuffedFullChain). A filter with
// an infinite or NaN weight (a skipped term would give NaN) runs the whole chain everywhere.

inline int64_t StuffedFloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The spec's chain (DETERMINISM.md 4.4) for output (n, f, oh, ow), every term taken.
inline float StuffedFullChain(const ConvGeom& g, const float* x, const float* w, const float* bias, int64_t n,
                              int64_t f, int64_t oh, int64_t ow) {
  const int64_t gi = f / g.Fg, plane = g.XH * g.XW;
  const float* wf = w + f * g.Kc;
  float acc = 0.0f;
  for (int64_t c = 0; c < g.Cg; ++c) {
    const float* xc = x + ((n * g.C) + gi * g.Cg + c) * plane;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t r = oh * g.sh - g.pt + kh * g.dh;
      const bool row_real = r >= 0 && r < g.H && (r + g.r0) % g.uh == 0;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t q = ow * g.sw - g.pl + kw * g.dw;
        const bool real = row_real && q >= 0 && q < g.W && (q + g.c0) % g.uw == 0;
        const float v = real ? xc[(r + g.r0) / g.uh * g.XW + (q + g.c0) / g.uw] : 0.0f;
        acc = std::fma(v, wf[(c * g.KH + kh) * g.KW + kw], acc);
      }
    }
  }
  if (bias) acc = acc + bias[f];
  if (acc != acc) {
    constexpr uint32_t kCanonicalNaN = 0x7FC00000u;
    std::memcpy(&acc, &kCanonicalNaN, sizeof(acc));
  }
  return acc;
}

// A kernel tap that reads x: kernel row or column k, at x row or column `offset` + the output
// index (rows) or + m (columns of one phase, m in [mb, me)).
struct StuffedTap {
  int64_t k, offset, mb, me;
};

// The kernel columns that read x for the output columns ow = pw + uw * m of phase pw, each with
// its x column (q0 + c0) / uw + m and the m whose V column q0 + uw * m lies in [0, W).
inline void StuffedColumnTaps(const ConvGeom& g, int64_t pw, std::vector<StuffedTap>* taps) {
  taps->clear();
  for (int64_t kw = 0; kw < g.KW; ++kw) {
    const int64_t q0 = pw - g.pl + kw * g.dw;              // V column read at m = 0
    const int64_t sc = q0 + g.c0;                          // its stuffed column
    if (StuffedFloorDiv(sc, g.uw) * g.uw != sc) continue;  // a stuffed zero for every m
    const int64_t mb = -StuffedFloorDiv(q0, g.uw), me = -StuffedFloorDiv(q0 - g.W, g.uw);
    if (me > mb) taps->push_back({kw, StuffedFloorDiv(sc, g.uw), mb, me});
  }
}

// Output row (n, f, oh), row = (n * F + f) * OH + oh, of a stride-1 conv over a stuffed input.
// The output columns of one phase pw (ow = pw + uw * m) read the same kernel columns, at x
// columns m + constant: a dense convolution over x, whose columns run inside.
CNSR_CONV_FLATTEN inline void ConvStuffedRowImpl(const ConvGeom& g, const float* x, const float* w, const float* bias,
                                                 bool finite, const std::vector<std::vector<StuffedTap>>& column_taps,
                                                 std::vector<StuffedTap>* row_taps, float* y, int64_t row) {
  const int64_t oh = row % g.OH, nf = row / g.OH, f = nf % g.F, n = nf / g.F;
  float* yrow = y + row * g.OW;
  if (!finite || g.sh != 1 || g.sw != 1) {
    for (int64_t ow = 0; ow < g.OW; ++ow) yrow[ow] = StuffedFullChain(g, x, w, bias, n, f, oh, ow);
    return;
  }
  constexpr uint32_t kCanonicalNaN = 0x7FC00000u, kNegativeZero = 0x80000000u;
  float nan;
  std::memcpy(&nan, &kCanonicalNaN, sizeof(nan));
  // The kernel rows that read x for this output row (the others are stuffed rows or padding).
  row_taps->clear();
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t r = oh - g.pt + kh * g.dh;
    if (r >= 0 && r < g.H && (r + g.r0) % g.uh == 0) row_taps->push_back({kh, (r + g.r0) / g.uh * g.XW, 0, 0});
  }
  const int64_t plane = g.XH * g.XW;
  const float* xg = x + (n * g.C + (f / g.Fg) * g.Cg) * plane;
  const float* wf = w + f * g.Kc;
  float acc[kDirectTile];
  for (int64_t pw = 0; pw < g.uw && pw < g.OW; ++pw) {
    const std::vector<StuffedTap>& cols = column_taps[pw];
    const int64_t count = (g.OW - pw + g.uw - 1) / g.uw;
    for (int64_t t0 = 0; t0 < count; t0 += kDirectTile) {
      const int64_t tn = count - t0 < kDirectTile ? count - t0 : kDirectTile;
      for (int64_t j = 0; j < tn; ++j) acc[j] = 0.0f;
      for (int64_t c = 0; c < g.Cg; ++c) {
        const float* xc = xg + c * plane;
        const float* wc = wf + c * g.KH * g.KW;
        for (const StuffedTap& rt : *row_taps) {
          const float* xrow = xc + rt.offset;
          const float* wk = wc + rt.k * g.KW;
          for (const StuffedTap& ct : cols) {
            const int64_t mb = ct.mb > t0 ? ct.mb : t0, me = ct.me < t0 + tn ? ct.me : t0 + tn;
            if (me <= mb) continue;
            const float wv = wk[ct.k];
            const float* xs = xrow + (ct.offset + mb);
            float* as = acc + (mb - t0);
            const int64_t len = me - mb;
            for (int64_t j = 0; j < len; ++j) as[j] = std::fma(xs[j], wv, as[j]);
          }
        }
      }
      const float b = bias ? bias[f] : 0.0f;
      uint32_t negative_zero = 0;
      for (int64_t j = 0; j < tn; ++j) {
        float v = bias ? acc[j] + b : acc[j];
        v = v != v ? nan : v;
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof(bits));
        negative_zero |= bits == kNegativeZero ? 1u : 0u;
        acc[j] = v;
      }
      float* out = yrow + pw + g.uw * t0;
      for (int64_t j = 0; j < tn; ++j) out[g.uw * j] = acc[j];
      if (negative_zero == 0) continue;
      // -0 is the one output the skipped terms may have changed: recompute it in full.
      for (int64_t j = 0; j < tn; ++j) {
        uint32_t bits;
        std::memcpy(&bits, &acc[j], sizeof(bits));
        if (bits == kNegativeZero) out[g.uw * j] = StuffedFullChain(g, x, w, bias, n, f, oh, pw + g.uw * (t0 + j));
      }
    }
  }
}

inline void ConvStuffedRowsImpl(const ConvGeom& g, const float* x, const float* w, const float* bias,
                                const uint8_t* finite_filter, float* y, int64_t begin, int64_t end) {
  std::vector<std::vector<StuffedTap>> column_taps(static_cast<size_t>(g.uw < g.OW ? g.uw : g.OW));
  for (size_t pw = 0; pw < column_taps.size(); ++pw) StuffedColumnTaps(g, static_cast<int64_t>(pw), &column_taps[pw]);
  std::vector<StuffedTap> row_taps;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t f = (row / g.OH) % g.F;
    ConvStuffedRowImpl(g, x, w, bias, finite_filter[f] != 0, column_taps, &row_taps, y, row);
  }
}

}  // namespace
}  // namespace consensor::kernels::cpu
