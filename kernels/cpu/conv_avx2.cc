// The AVX2+FMA direct grouped/depthwise Conv2D (compiled with -mavx2 -mfma); called only when
// CpuHasAvx2Fma() is true. Same bits as the portable path in conv.cc.
//
// Rows with stride 1 in width run register-blocked: 8 to 64 output columns keep their
// accumulators in ymm registers across all (c, kh, kw) taps, instead of loading and storing
// the L1 accumulator array of conv_direct_impl.h once per tap. Each column still sees
// acc = +0.0, then acc = fma(x, w, acc) for c, kh, kw in the spec's order, then acc + bias
// and NaN canonicalization. A padding term is fma(+0.0, w, acc) as the spec says: a row in
// the padding multiplies a +0.0 vector, and a column in the left/right padding is a lane
// that the masked load (vmaskmovps) fills with +0.0. Columns are independent, so the block
// sizes change no bit. Strided widths run conv_direct_impl.h.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv_direct_impl.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int kLanes = 8;

// Lanes i of input columns base + i that lie in [0, W).
inline __m256i InsideMask(int64_t base, int64_t W) {
  const __m256i col =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(base)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_and_si256(_mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(W)), col));
}

// Output columns [j, j + 8 * U) of row (n, f, oh), stride 1 in width, every tap inside the
// width; xg points at the group's first input channel of image n.
template <int U>
inline void Block(const ConvGeom& g, const float* xg, const float* wf, const float* bias_f, int64_t oh, int64_t j,
                  float* out) {
  __m256 acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const __m256 zero = _mm256_setzero_ps();
  const int64_t plane = g.H * g.W;
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const float* wk = wf + (c * g.KH + kh) * g.KW;
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.H) {
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const __m256 wv = _mm256_broadcast_ss(wk + kw);
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) acc[u] = _mm256_fmadd_ps(zero, wv, acc[u]);
        }
        continue;
      }
      const float* xrow = xg + c * plane + ih * g.W;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const __m256 wv = _mm256_broadcast_ss(wk + kw);
        const float* xs = xrow + j - g.pl + kw * g.dw;  // the input of the block's first lane
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) acc[u] = _mm256_fmadd_ps(_mm256_loadu_ps(xs + kLanes * u), wv, acc[u]);
      }
    }
  }
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    __m256 v = acc[u];
    if (bias_f) v = _mm256_add_ps(v, _mm256_broadcast_ss(bias_f));
    v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    _mm256_storeu_ps(out + kLanes * u, v);
  }
}

// U masked vectors of output columns of row (n, f, oh), vector u at columns [js[u], js[u] +
// counts[u]): the edges of a row, where some taps fall outside the width. They are computed
// together so that their U fma chains overlap (one masked vector alone waits on the fma latency
// at every tap). Same terms in the same order as Block; a lane outside the width loads +0.0
// (no address outside the row is read), and only the first counts[u] columns are stored.
template <int U>
inline void MaskedBlocks(const ConvGeom& g, const float* xg, const float* wf, const float* bias_f, int64_t oh,
                         const int64_t* js, const int64_t* counts, float* yrow) {
  __m256 acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const __m256 zero = _mm256_setzero_ps();
  const int64_t plane = g.H * g.W;
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const float* wk = wf + (c * g.KH + kh) * g.KW;
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.H) {
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const __m256 wv = _mm256_broadcast_ss(wk + kw);
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) acc[u] = _mm256_fmadd_ps(zero, wv, acc[u]);
        }
        continue;
      }
      const float* xrow = xg + c * plane + ih * g.W;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const __m256 wv = _mm256_broadcast_ss(wk + kw);
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) {
          const int64_t base = js[u] - g.pl + kw * g.dw;
          acc[u] = _mm256_fmadd_ps(_mm256_maskload_ps(xrow + base, InsideMask(base, g.W)), wv, acc[u]);
        }
      }
    }
  }
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    __m256 v = acc[u];
    if (bias_f) v = _mm256_add_ps(v, _mm256_broadcast_ss(bias_f));
    v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(counts[u])),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(yrow + js[u], lanes, v);
  }
}

// Int32 lane arithmetic in InsideMask needs every column index to fit comfortably.
constexpr int64_t kMaxVectorWidth = int64_t{1} << 28;

}  // namespace

void ConvStuffedRowsAvx2(const ConvGeom& g, const float* x, const float* w, const float* bias,
                         const uint8_t* finite_filter, float* y, int64_t begin, int64_t end) {
  ConvStuffedRowsImpl(g, x, w, bias, finite_filter, y, begin, end);
}

void ConvDirectRowsAvx2(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y, int64_t begin,
                        int64_t end) {
  const bool vector_rows = g.sw == 1 && g.W < kMaxVectorWidth && g.OW < kMaxVectorWidth && g.pl < kMaxVectorWidth &&
                           (g.KW - 1) * g.dw < kMaxVectorWidth;
  // Column j reads input columns j - pl + kw * dw, kw < KW: all inside [0, W) for ja <= j < je.
  const int64_t ja = std::min(g.pl, g.OW);
  const int64_t je = vector_rows ? std::clamp<int64_t>(g.W + g.pl - (g.KW - 1) * g.dw, ja, g.OW) : ja;
  for (int64_t row = begin; row < end; ++row) {
    if (!vector_rows) {
      ConvDirectSpanImpl(g, x, w, bias, y, row, 0, g.OW);
      continue;
    }
    const int64_t oh = row % g.OH, nf = row / g.OH, f = nf % g.F, n = nf / g.F;
    const float* xg = x + (n * g.C + (f / g.Fg) * g.Cg) * g.H * g.W;
    const float* wf = w + f * g.Kc;
    const float* bias_f = bias ? bias + f : nullptr;
    float* yrow = y + row * g.OW;
    // Masked edge vectors are collected and computed in pairs after the unmasked blocks.
    int64_t js[2], counts[2];
    int pending = 0;
    for (int64_t j = 0; j < g.OW;) {
      if (j >= ja && j + kLanes <= je) {
        // As many register-blocked vectors (at most 8) as the interior has left.
        const int u = static_cast<int>(std::min<int64_t>(8, (je - j) / kLanes));
        switch (u) {
          case 8: Block<8>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          case 7: Block<7>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          case 6: Block<6>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          case 5: Block<5>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          case 4: Block<4>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          case 3: Block<3>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          case 2: Block<2>(g, xg, wf, bias_f, oh, j, yrow + j); break;
          default: Block<1>(g, xg, wf, bias_f, oh, j, yrow + j); break;
        }
        j += u * kLanes;
      } else {
        const int64_t count = std::min<int64_t>(kLanes, g.OW - j);
        js[pending] = j;
        counts[pending] = count;
        if (++pending == 2) {
          MaskedBlocks<2>(g, xg, wf, bias_f, oh, js, counts, yrow);
          pending = 0;
        }
        j += count;
      }
    }
    if (pending == 1) MaskedBlocks<1>(g, xg, wf, bias_f, oh, js, counts, yrow);
  }
}

}  // namespace consensor::kernels::cpu
