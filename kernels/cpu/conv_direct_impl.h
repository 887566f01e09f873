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

}  // namespace
}  // namespace consensor::kernels::cpu
