// The direct grouped/depthwise Conv2D with 512-bit registers (compiled with -mavx512f; called
// only when gemm::CpuHasAvx512F()). Same bits as conv_direct_impl.h and conv_avx2.cc.
//
// Rows with stride 1 or 2 in width: up to 128 output columns of a row keep their accumulators in
// zmm registers across all (c, kh, kw) taps (with stride 2, a tap's 16 inputs are the even lanes
// of two consecutive masked loads). Every column sees acc = +0.0, then its terms in the
// spec's order (docs/DETERMINISM.md 4.4), then acc + bias and NaN canonicalization. A column in
// the left/right padding is a lane that the masked load (which reads nothing outside the row)
// fills with +0.0, so those padding terms are fma(+0.0, w, acc) as the spec writes them.
//
// A kernel row that falls entirely in the top/bottom padding contributes KW terms
// fma(+0.0, w, acc) in a row. For a filter whose weights are all finite, one such term is
// acc + (+0) when w's sign bit is clear (the exact product is +0) and acc + (-0) when it is set;
// acc + (-0) is acc for every acc, and acc + (+0) is acc except that -0 becomes +0 (a NaN stays
// a NaN, whose payload the final canonicalization erases). Both are idempotent and neither makes
// a -0, so the KW terms together are exactly acc + (+0) if any of the KW weights has its sign bit
// clear, and nothing otherwise: one vaddps of +0 (or none) per padding row instead of KW fmas.
// A filter with an infinite or NaN weight takes every padding term as an fma.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/conv_direct_impl.h"
#include "kernels/cpu/gemm.h"

namespace consensor::kernels::cpu {

namespace {

std::atomic<bool> g_avx512_direct_enabled{true};
std::atomic<bool> g_interior_rows_enabled{true};
constexpr int kLanes = 16;
constexpr int kMaxVectors = 8;  // 128 columns per register block

// A depthwise/grouped output vector's end: the filter's bias added (when it has one), NaN made
// canonical (docs/DETERMINISM.md 1.1) and the lanes in `store` written.
inline void StoreDirectOutputs(float* dst, __mmask16 store, __m512 v, const float* bias_f) {
  if (bias_f) v = _mm512_add_ps(v, _mm512_set1_ps(*bias_f));
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  _mm512_mask_storeu_ps(dst, store, v);
}

// Lanes i of input columns base + i that lie in [0, W).
inline __mmask16 InsideLanes(int64_t base, int64_t W) {
  const int64_t lo = std::clamp<int64_t>(-base, 0, kLanes), hi = std::clamp<int64_t>(W - base, 0, kLanes);
  if (hi <= lo) return 0;
  const uint32_t upto_hi = hi == kLanes ? 0xFFFFu : (1u << hi) - 1u;
  return static_cast<__mmask16>(upto_hi & ~((1u << lo) - 1u));
}

// The 16 inputs of one tap for 16 consecutive output columns, input columns xs[kStride * i]:
// kStride plain vectors from xs, lane l of vector h being column 16 * h + l, loaded where mk[h]
// is set and +0.0 elsewhere (kFull: every lane inside the width, plain loads); for stride 2 the
// even lanes of the pair.
template <int kStride, bool kFull>
inline __m512 TapInputs(const float* xs, const __mmask16* mk) {
  static_assert(kStride == 1 || kStride == 2, "stride 1 or 2 in width");
  const __m512 lo = kFull ? _mm512_loadu_ps(xs) : _mm512_maskz_loadu_ps(mk[0], xs);
  if constexpr (kStride == 1) {
    return lo;
  } else {
    const __m512 hi = kFull ? _mm512_loadu_ps(xs + kLanes) : _mm512_maskz_loadu_ps(mk[1], xs + kLanes);
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, evens, hi);
  }
}

// What the filter's padding rows do: per (c, kh), whether any of its KW weights has a clear sign
// bit; and whether every weight of the filter is finite.
struct FilterPadding {
  bool finite = true;
  std::vector<uint8_t> adds_plus_zero;  // [c * KH + kh]
};

void DescribeFilter(const ConvGeom& g, const float* wf, FilterPadding* out) {
  out->adds_plus_zero.resize(static_cast<size_t>(g.Cg * g.KH));
  uint32_t non_finite = 0;
  for (int64_t ck = 0; ck < g.Cg * g.KH; ++ck) {
    uint32_t sign_clear = 0;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      uint32_t bits;
      std::memcpy(&bits, wf + ck * g.KW + kw, sizeof(bits));
      sign_clear |= ~bits >> 31;
      non_finite |= (bits & 0x7F800000u) == 0x7F800000u ? 1u : 0u;  // infinity or NaN
    }
    out->adds_plus_zero[static_cast<size_t>(ck)] = static_cast<uint8_t>(sign_clear);
  }
  out->finite = non_finite == 0;
}

// Output columns [j0, j0 + 16 * (U - 1) + last_count) of row (n, f, oh), stride S in width;
// masks[(kw * U + u) * S + h] are the lanes of plain vector h of output vector u (TapInputs)
// whose input column for tap kw lies inside the width.
// kInteriorFull: vectors 1 .. U - 2 read inside the width at every tap (unmasked loads).
template <int U, int S, bool kInteriorFull>
inline void RowBlock(const ConvGeom& g, const float* xg, const float* wf, const float* bias_f,
                     const FilterPadding& padding, int64_t oh, int64_t j0, const __mmask16* masks, __mmask16 last_store,
                     float* out) {
  __m512 acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  const int64_t plane = g.H * g.W;
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const float* wk = wf + (c * g.KH + kh) * g.KW;
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.H) {
        if (!padding.finite) {
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const __m512 wv = _mm512_set1_ps(wk[kw]);
#pragma GCC unroll 8
            for (int u = 0; u < U; ++u) acc[u] = _mm512_fmadd_ps(zero, wv, acc[u]);
          }
        } else if (padding.adds_plus_zero[static_cast<size_t>(c * g.KH + kh)]) {
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) acc[u] = _mm512_add_ps(acc[u], zero);
        }
        continue;
      }
      const float* xrow = xg + c * plane + ih * g.W + j0 * S - g.pl;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const __m512 wv = _mm512_set1_ps(wk[kw]);
        const float* xs = xrow + kw * g.dw;
        const __mmask16* mk = masks + kw * U * S;
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) {
          const __m512 xv = kInteriorFull && u > 0 && u + 1 < U ? TapInputs<S, true>(xs + kLanes * S * u, nullptr)
                                                                : TapInputs<S, false>(xs + kLanes * S * u, mk + u * S);
          acc[u] = _mm512_fmadd_ps(xv, wv, acc[u]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    StoreDirectOutputs(out + kLanes * u, u + 1 == U ? last_store : static_cast<__mmask16>(0xFFFF), acc[u], bias_f);
  }
}

// Output rows oh0 .. oh0 + R - 1 of one filter together (dilation 1 in height, every weight of the
// filter finite; stride S in width as RowBlock): each input row's vectors are loaded once per tap and multiplied into
// every output row that reads them, and R x U accumulator chains run side by side. Per output row the terms still come
// in the spec's order: for each channel, its kernel rows in the top padding (one add of +0 or none, as in RowBlock),
// then its real kernel rows in increasing kh (input rows are visited in increasing order, and kh = ih + pt - oh * sh
// grows with ih), each with kw increasing, then its kernel rows in the bottom padding.
template <int U, int R, int S, bool kInteriorFull>
inline void RowsBlock(const ConvGeom& g, const float* xg, const float* wf, const float* bias_f,
                      const FilterPadding& padding, int64_t oh0, int64_t j0, const __mmask16* masks,
                      __mmask16 last_store, float* out) {
  __m512 acc[R][U];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  const __m512 zero = _mm512_setzero_ps();
  const int64_t plane = g.H * g.W;
  // Kernel row kh of output row r reads input row base[r] + kh.
  int64_t base[R];
  for (int r = 0; r < R; ++r) base[r] = (oh0 + r) * g.sh - g.pt;
  auto pad_rows = [&](int64_t c, int r, int64_t kh_begin, int64_t kh_end) {
    bool adds = false;
    for (int64_t kh = std::max<int64_t>(0, kh_begin); kh < std::min(g.KH, kh_end); ++kh) {
      adds |= padding.adds_plus_zero[static_cast<size_t>(c * g.KH + kh)] != 0;
    }
    if (adds) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[r][u] = _mm512_add_ps(acc[r][u], zero);
    }
  };
  const int64_t ih_begin = std::max<int64_t>(0, base[0]), ih_end = std::min(g.H, base[R - 1] + g.KH);
  for (int64_t c = 0; c < g.Cg; ++c) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) pad_rows(c, r, 0, -base[r]);  // kernel rows above the plane
    const float* wc = wf + c * g.KH * g.KW;
    for (int64_t ih = ih_begin; ih < ih_end; ++ih) {
      const float* xrow = xg + c * plane + ih * g.W + j0 * S - g.pl;
      bool valid[R];
      const float* wk[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int64_t kh = ih - base[r];
        valid[r] = kh >= 0 && kh < g.KH;
        wk[r] = wc + (valid[r] ? kh : 0) * g.KW;
      }
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        __m512 wv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) wv[r] = _mm512_set1_ps(wk[r][kw]);
        const float* xs = xrow + kw * g.dw;
        const __mmask16* mk = masks + kw * U * S;
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) {
          const __m512 xv = kInteriorFull && u > 0 && u + 1 < U ? TapInputs<S, true>(xs + kLanes * S * u, nullptr)
                                                                : TapInputs<S, false>(xs + kLanes * S * u, mk + u * S);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            if (valid[r]) acc[r][u] = _mm512_fmadd_ps(xv, wv[r], acc[r][u]);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) pad_rows(c, r, g.H - base[r], g.KH);  // kernel rows below the plane
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      __m512 v = acc[r][u];
      if (bias_f) v = _mm512_add_ps(v, _mm512_set1_ps(*bias_f));
      v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
      _mm512_mask_storeu_ps(out + r * g.OW + kLanes * u, u + 1 == U ? last_store : static_cast<__mmask16>(0xFFFF), v);
    }
  }
}

constexpr int kMaxRows = 4;
constexpr int kMaxRowAccumulators = 24;

// RowsBlock for R output rows whose every kernel row lies inside the plane, with the stride in
// height, KH and KW known at compile time (the detector's 3x3 stride-2 depthwise convolutions):
// which output rows an input row feeds is then known at compile time too, so the loops unroll
// into straight fmas (RowsBlock tests it per row, vector and tap, and those branches, not the
// fmas, set its speed). Per output row the terms come in the spec's order: for each channel,
// input rows t = 0 .. (R - 1) * SH + KH - 1 of the block in increasing order, i.e. kh = t - r * SH
// increasing, each with kw increasing: the chain of RowsBlock with no padding rows.
template <int U, int R, int S, bool kInteriorFull, int SH, int KH, int KW>
inline void RowsBlockInterior(const ConvGeom& g, const float* xg, const float* wf, const float* bias_f, int64_t oh0,
                              int64_t j0, const __mmask16* masks, __mmask16 last_store, float* out) {
  constexpr int kInputRows = (R - 1) * SH + KH;
  __m512 acc[R][U];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  const int64_t plane = g.H * g.W;
  const int64_t ih0 = oh0 * SH - g.pt;  // input row of t = 0
  for (int64_t c = 0; c < g.Cg; ++c) {
    const float* wc = wf + c * KH * KW;
    const float* xc = xg + c * plane + ih0 * g.W + j0 * S - g.pl;
#pragma GCC unroll 16
    for (int t = 0; t < kInputRows; ++t) {
#pragma GCC unroll 8
      for (int kw = 0; kw < KW; ++kw) {
        const float* xs = xc + t * g.W + kw * g.dw;
        const __mmask16* mk = masks + kw * U * S;
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) {
          const __m512 xv = kInteriorFull && u > 0 && u + 1 < U ? TapInputs<S, true>(xs + kLanes * S * u, nullptr)
                                                                : TapInputs<S, false>(xs + kLanes * S * u, mk + u * S);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const int kh = t - r * SH;
            if (kh >= 0 && kh < KH) acc[r][u] = _mm512_fmadd_ps(xv, _mm512_set1_ps(wc[kh * KW + kw]), acc[r][u]);
          }
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      StoreDirectOutputs(out + r * g.OW + kLanes * u, u + 1 == U ? last_store : static_cast<__mmask16>(0xFFFF),
                         acc[r][u], bias_f);
    }
  }
}

constexpr int kInteriorRows = 4;
using RowsBlockInteriorFn = void (*)(const ConvGeom&, const float*, const float*, const float*, int64_t, int64_t,
                                     const __mmask16*, __mmask16, float*);
template <int S, bool kInteriorFull, size_t... I>
constexpr std::array<RowsBlockInteriorFn, sizeof...(I)> InteriorBlocksFor(std::index_sequence<I...>) {
  return {&RowsBlockInterior<static_cast<int>(I) + 1, kInteriorRows, S, kInteriorFull, 2, 3, 3>...};
}
// 3x3, stride 2 in height and width, 4 rows of U = 1 .. 6 vectors: [interior_full][U - 1].
constexpr std::array<RowsBlockInteriorFn, 6> kInteriorStrideTwo3x3[2] = {
    InteriorBlocksFor<2, false>(std::make_index_sequence<6>()),
    InteriorBlocksFor<2, true>(std::make_index_sequence<6>())};
// Whether output rows oh .. oh + kInteriorRows - 1 of g take RowsBlockInterior: a 3x3 kernel,
// strides 2, dilation 1 in height, every kernel row of the block inside the plane.
bool InteriorStrideTwo3x3(const ConvGeom& g, int64_t oh) {
  return g.sh == 2 && g.sw == 2 && g.KH == 3 && g.KW == 3 && g.dh == 1 && oh * 2 - g.pt >= 0 &&
         (oh + kInteriorRows - 1) * 2 - g.pt + 3 <= g.H;
}

using RowsBlockFn = void (*)(const ConvGeom&, const float*, const float*, const float*, const FilterPadding&, int64_t,
                             int64_t, const __mmask16*, __mmask16, float*);

template <int U, int R>
constexpr RowsBlockFn RowsBlockFor(int stride, bool interior_full) {
  if (stride == 2) return interior_full ? &RowsBlock<U, R, 2, true> : &RowsBlock<U, R, 2, false>;
  return interior_full ? &RowsBlock<U, R, 1, true> : &RowsBlock<U, R, 1, false>;
}

// The multi-row block for U vectors and R rows (R * U <= kMaxRowAccumulators) at stride 1 or 2
// in width, or null.
RowsBlockFn PickRowsBlock(int u, int r, int stride, bool interior_full) {
#define CNSR_ROWS_CASE(UU)                                       \
  case UU:                                                       \
    switch (r) {                                                 \
      case 2: return RowsBlockFor<UU, 2>(stride, interior_full); \
      case 3: return RowsBlockFor<UU, 3>(stride, interior_full); \
      case 4: return RowsBlockFor<UU, 4>(stride, interior_full); \
      default: return nullptr;                                   \
    }
  switch (u) {
    CNSR_ROWS_CASE(1)
    CNSR_ROWS_CASE(2)
    CNSR_ROWS_CASE(3)
    CNSR_ROWS_CASE(4)
    CNSR_ROWS_CASE(5)
    CNSR_ROWS_CASE(6)
    default: return nullptr;
  }
#undef CNSR_ROWS_CASE
}

using RowBlockFn = void (*)(const ConvGeom&, const float*, const float*, const float*, const FilterPadding&, int64_t,
                            int64_t, const __mmask16*, __mmask16, float*);
template <int S, bool kInteriorFull, size_t... I>
constexpr std::array<RowBlockFn, kMaxVectors> RowBlocksFor(std::index_sequence<I...>) {
  return {&RowBlock<static_cast<int>(I) + 1, S, kInteriorFull>...};
}
// [stride - 1][interior_full][U - 1]
constexpr std::array<RowBlockFn, kMaxVectors> kRowBlocks[2][2] = {
    {RowBlocksFor<1, false>(std::make_index_sequence<kMaxVectors>()),
     RowBlocksFor<1, true>(std::make_index_sequence<kMaxVectors>())},
    {RowBlocksFor<2, false>(std::make_index_sequence<kMaxVectors>()),
     RowBlocksFor<2, true>(std::make_index_sequence<kMaxVectors>())}};

// --- Dense convolutions with few filters and short chains (the first conv of an RGB or
// spectrogram model: 1 to 3 input channels, a 3x3 kernel, stride 1 or 2 in width) ---
//
// Eight filters of one output row at a time, 32 columns in 2 x 8 zmm accumulators: each (c, kh,
// kw) tap's 32 inputs are loaded once (for stride 2 in width, as the even lanes of two
// consecutive vectors) and multiplied into all eight filters. Each output still sees acc = +0.0
// and then fma(x, w, acc) for c, kh, kw in the spec's order, padding terms included (lanes that
// masked loads fill with +0.0, and a +0.0 vector for kernel rows in the padding).

constexpr int kDenseFilters = 8;
constexpr int kDenseVectors = 2;

// Input columns col + sw * i, i < 16, as one vector; lanes outside [0, W) are +0.0.
template <int kStride>
inline __m512 StridedInputs(const float* row, int64_t col, int64_t W) {
  if constexpr (kStride == 1) {
    return _mm512_maskz_loadu_ps(InsideLanes(col, W), row + col);
  } else {
    const __m512 lo = _mm512_maskz_loadu_ps(InsideLanes(col, W), row + col);
    const __m512 hi = _mm512_maskz_loadu_ps(InsideLanes(col + kLanes, W), row + col + kLanes);
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, evens, hi);
  }
}

// Filters [f0, f0 + NF) of output row (n, oh), columns [j0, j0 + count), count <= 32.
template <int NF, int kStride>
void DenseFilterBlock(const ConvGeom& g, const float* xn, const float* w, const float* bias, int64_t f0, int64_t oh,
                      int64_t j0, int64_t count, float* yn) {
  __m512 acc[NF][kDenseVectors];
#pragma GCC unroll 8
  for (int f = 0; f < NF; ++f) {
    acc[f][0] = _mm512_setzero_ps();
    acc[f][1] = _mm512_setzero_ps();
  }
  const int64_t plane = g.H * g.W;
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      const bool inside = ih >= 0 && ih < g.H;
      const float* row = xn + c * plane + (inside ? ih : 0) * g.W;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t col = j0 * kStride - g.pl + kw * g.dw;
        const __m512 in0 = inside ? StridedInputs<kStride>(row, col, g.W) : _mm512_setzero_ps();
        const __m512 in1 = inside ? StridedInputs<kStride>(row, col + kStride * kLanes, g.W) : _mm512_setzero_ps();
        const float* wk = w + (f0 * g.Cg + c) * g.KH * g.KW + kh * g.KW + kw;
#pragma GCC unroll 8
        for (int f = 0; f < NF; ++f) {
          const __m512 wv = _mm512_set1_ps(wk[f * g.Kc]);
          acc[f][0] = _mm512_fmadd_ps(in0, wv, acc[f][0]);
          acc[f][1] = _mm512_fmadd_ps(in1, wv, acc[f][1]);
        }
      }
    }
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  const __mmask16 m0 = count >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
  const int64_t rest = count - kLanes;
  const __mmask16 m1 = rest >= kLanes ? static_cast<__mmask16>(0xFFFF)
                       : rest > 0     ? static_cast<__mmask16>((1u << rest) - 1u)
                                      : static_cast<__mmask16>(0);
#pragma GCC unroll 8
  for (int f = 0; f < NF; ++f) {
    float* out = yn + ((f0 + f) * g.OH + oh) * g.OW + j0;
    for (int u = 0; u < kDenseVectors; ++u) {
      __m512 v = acc[f][u];
      if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[f0 + f]));
      v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
      _mm512_mask_storeu_ps(out + kLanes * u, u == 0 ? m0 : m1, v);
    }
  }
}

template <int kStride>
using DenseFilterBlockFn = void (*)(const ConvGeom&, const float*, const float*, const float*, int64_t, int64_t,
                                    int64_t, int64_t, float*);

template <int kStride>
constexpr DenseFilterBlockFn<kStride> kDenseBlocks[kDenseFilters] = {
    &DenseFilterBlock<1, kStride>, &DenseFilterBlock<2, kStride>, &DenseFilterBlock<3, kStride>,
    &DenseFilterBlock<4, kStride>, &DenseFilterBlock<5, kStride>, &DenseFilterBlock<6, kStride>,
    &DenseFilterBlock<7, kStride>, &DenseFilterBlock<8, kStride>};

}  // namespace

bool UsesSmallDenseConvAvx512(const ConvGeom& g) {
  return g.G == 1 && !g.stuffed && (g.sw == 1 || g.sw == 2) && g.Fg <= kMaxSmallDenseFilters &&
         g.Kc <= kMaxSmallDenseChain && g.W < (int64_t{1} << 28) && g.OW < (int64_t{1} << 28) &&
         g.pl < (int64_t{1} << 28) && (g.KW - 1) * g.dw < (int64_t{1} << 28) && UseAvx512DirectConv();
}

int64_t SmallDenseFilterGroups(const ConvGeom& g) { return (g.F + kDenseFilters - 1) / kDenseFilters; }

void ConvSmallDenseRowsAvx512(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                              int64_t begin, int64_t end) {
  const int64_t groups = SmallDenseFilterGroups(g);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t oh = unit % g.OH, ng = unit / g.OH, fg = ng % groups, n = ng / groups;
    const int64_t f0 = fg * kDenseFilters, nf = std::min<int64_t>(kDenseFilters, g.F - f0);
    const float* xn = x + n * g.C * g.H * g.W;
    float* yn = y + n * g.F * g.OH * g.OW;
    for (int64_t j0 = 0; j0 < g.OW; j0 += kDenseVectors * kLanes) {
      const int64_t count = std::min<int64_t>(kDenseVectors * kLanes, g.OW - j0);
      if (g.sw == 1) {
        kDenseBlocks<1>[nf - 1](g, xn, w, bias, f0, oh, j0, count, yn);
      } else {
        kDenseBlocks<2>[nf - 1](g, xn, w, bias, f0, oh, j0, count, yn);
      }
    }
  }
}

void AddBiasRowsAvx512(float* y, int64_t ldy, int64_t rows, int64_t cols, const float* bias) {
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  for (int64_t f = 0; f < rows; ++f) {
    float* r = y + f * ldy;
    const __m512 b = _mm512_set1_ps(bias[f]);
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      const __m512 v = _mm512_add_ps(_mm512_loadu_ps(r + j), b);
      _mm512_storeu_ps(r + j, _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan));
    }
    if (j < cols) {
      const __mmask16 m = static_cast<__mmask16>((1u << (cols - j)) - 1u);
      const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, r + j), b);
      _mm512_mask_storeu_ps(r + j, m, _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan));
    }
  }
}

bool UseAvx512DirectConv() { return g_avx512_direct_enabled.load(std::memory_order_relaxed) && gemm::CpuHasAvx512F(); }

void SetConvAvx512ForTesting(bool enabled) { g_avx512_direct_enabled.store(enabled); }

void SetConvInteriorRowsForTesting(bool enabled) { g_interior_rows_enabled.store(enabled); }

void ConvDirectRowsAvx512(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y, int64_t begin,
                          int64_t end) {
  if (g.sw != 1 && g.sw != 2) return ConvDirectRowsAvx2(g, x, w, bias, y, begin, end);
  const int stride = static_cast<int>(g.sw);
  // Column blocks of at most 8 vectors, split evenly (96 columns: one block of 6), with the
  // masks of every (block, tap) computed once for all rows.
  const int64_t vectors = (g.OW + kLanes - 1) / kLanes;
  const int64_t blocks = (vectors + kMaxVectors - 1) / kMaxVectors;
  struct Block {
    int64_t j0, count;
    int u;
    size_t masks;
    bool interior_full;
  };
  std::vector<Block> layout;
  std::vector<__mmask16> masks;
  for (int64_t b = 0, v0 = 0; b < blocks; ++b) {
    const int64_t v1 = vectors * (b + 1) / blocks;
    Block blk{v0 * kLanes, std::min(g.OW, v1 * kLanes) - v0 * kLanes, static_cast<int>(v1 - v0), masks.size(), true};
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      for (int u = 0; u < blk.u; ++u) {
        // The plain vectors that TapInputs loads for output vector u: input columns from
        // (j0 + 16 * u) * sw - pl + kw * dw on.
        const int64_t first = (blk.j0 + kLanes * u) * stride - g.pl + kw * g.dw;
        for (int h = 0; h < stride; ++h) {
          masks.push_back(InsideLanes(first + kLanes * h, g.W));
          if (u > 0 && u + 1 < blk.u && masks.back() != 0xFFFF) blk.interior_full = false;
        }
      }
    }
    layout.push_back(blk);
    v0 = v1;
  }
  FilterPadding padding;
  int64_t described = -1;
  // Row (n, f, oh) stepped along, not divided out of the row index for each block of rows: the
  // divisions cost about as much as a 4-row block of a 3x3 depthwise conv.
  int64_t oh = begin % g.OH, f = begin / g.OH % g.F, n = begin / g.OH / g.F;
  for (int64_t row = begin; row < end;) {
    const float* xg = x + (n * g.C + (f / g.Fg) * g.Cg) * g.H * g.W;
    const float* wf = w + f * g.Kc;
    if (f != described) {
      DescribeFilter(g, wf, &padding);
      described = f;
    }
    const float* bias_f = bias ? bias + f : nullptr;
    float* yrow = y + row * g.OW;
    // Rows of this filter left in the range, taken together where RowsBlock applies.
    const int64_t same_filter = std::min(end - row, g.OH - oh);
    int64_t rows = 1;
    if (g.dh == 1 && padding.finite && same_filter > 1 && layout.size() == 1 && layout[0].u <= 6) {
      rows = std::min<int64_t>({same_filter, kMaxRows, kMaxRowAccumulators / layout[0].u});
    }
    for (const Block& blk : layout) {
      const int64_t tail = blk.count - kLanes * (blk.u - 1);
      const __mmask16 last_store =
          tail >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << tail) - 1u);
      const RowsBlockFn together =
          rows > 1 ? PickRowsBlock(blk.u, static_cast<int>(rows), stride, blk.interior_full) : nullptr;
      if (rows >= kInteriorRows && blk.u <= 6 && InteriorStrideTwo3x3(g, oh) && g_interior_rows_enabled.load()) {
        rows = kInteriorRows;
        kInteriorStrideTwo3x3[blk.interior_full ? 1 : 0][blk.u - 1](
            g, xg, wf, bias_f, oh, blk.j0, masks.data() + blk.masks, last_store, yrow + blk.j0);
      } else if (together) {
        together(g, xg, wf, bias_f, padding, oh, blk.j0, masks.data() + blk.masks, last_store, yrow + blk.j0);
      } else {
        rows = 1;
        kRowBlocks[stride - 1][blk.interior_full ? 1 : 0][blk.u - 1](
            g, xg, wf, bias_f, padding, oh, blk.j0, masks.data() + blk.masks, last_store, yrow + blk.j0);
      }
    }
    row += rows;
    oh += rows;
    if (oh == g.OH) {
      oh = 0;
      if (++f == g.F) {
        f = 0;
        ++n;
      }
    }
  }
}

// --- Grouped and depthwise convolutions over the flattened plane (both strides 1, OW == W) ---
//
// Output position p = oh * W + ow of filter f reads, for term (c, kh, kw), x[c, p + shift], shift =
// (kh * dh - pt) * W + kw * dw - pl, whenever its input row and column lie inside the plane (then
// p + shift is exactly ih * W + iw), and otherwise the lane is masked to +0.0: the spec's padding
// term fma(+0.0, w, acc), applied like any other. These are the shifted-plane kernel's shifts and
// masks (ShiftedPlaneMasks). U vectors of 16 consecutive positions keep their accumulators in zmm
// registers across all terms of the filter, in the spec's order, from +0.0; then acc + bias and
// NaN canonicalization. Every lane holds an output whatever the width (a 10- or 20-column plane
// leaves no lane idle) and no padding row or column is a special case.

namespace {

constexpr int kPlaneVectors = 8;

template <int U>
void PlaneTile(int64_t Cg, int64_t taps, int64_t plane, const int64_t* shift, const float* xg, const float* wf,
               const float* bias_f, const uint16_t* masks, int64_t vectors, int64_t v0, int64_t P, float* yp) {
  __m512 acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  for (int64_t c = 0; c < Cg; ++c) {
    const float* xc = xg + c * plane + kLanes * v0;
    const float* wc = wf + c * taps;
    for (int64_t t = 0; t < taps; ++t) {
      const __m512 wv = _mm512_set1_ps(wc[t]);
      const float* xs = xc + shift[t];
      const uint16_t* mt = masks + t * vectors + v0;
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) {
        acc[u] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mt[u]), xs + kLanes * u), wv, acc[u]);
      }
    }
  }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const int64_t left = P - kLanes * (v0 + u);
    const __mmask16 store = left >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    StoreDirectOutputs(yp + kLanes * (v0 + u), store, acc[u], bias_f);
  }
}

using PlaneTileFn = void (*)(int64_t, int64_t, int64_t, const int64_t*, const float*, const float*, const float*,
                             const uint16_t*, int64_t, int64_t, int64_t, float*);

template <size_t... I>
constexpr std::array<PlaneTileFn, kPlaneVectors> PlaneTilesFor(std::index_sequence<I...>) {
  return {&PlaneTile<static_cast<int>(I) + 1>...};
}
constexpr std::array<PlaneTileFn, kPlaneVectors> kPlaneTiles = PlaneTilesFor(std::make_index_sequence<kPlaneVectors>());

}  // namespace

bool UsesDirectPlaneConvAvx512(const ConvGeom& g) {
  if (g.stuffed || g.sh != 1 || g.sw != 1 || g.OW != g.W || g.P >= (int64_t{1} << 40) || !UseAvx512DirectConv()) {
    return false;
  }
  // Kernel rows that lie entirely in the top or bottom padding cost the plane a masked load and
  // an fma each, where the row kernel takes each as one add or none: on planes of few rows under
  // tall kernels (the PP-OCR classifier's 2 x 96 planes under 5x5) the rows win. The plane when at
  // most a quarter of the (output row, kernel row) pairs are such rows.
  int64_t padding_rows = 0;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh - g.pt + kh * g.dh;
      padding_rows += ih < 0 || ih >= g.H ? 1 : 0;
    }
  }
  return 4 * padding_rows <= g.OH * g.KH;
}

void ConvDirectPlaneUnitsAvx512(const ConvGeom& g, const float* x, const float* w, const float* bias,
                                const uint16_t* masks, float* y, int64_t begin, int64_t end) {
  const int64_t taps = g.KH * g.KW, plane = g.H * g.W, vectors = (g.P + kLanes - 1) / kLanes;
  const int64_t blocks = DirectPlaneBlocks(g);
  std::vector<int64_t> shift(static_cast<size_t>(taps));
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    for (int64_t kw = 0; kw < g.KW; ++kw) shift[kh * g.KW + kw] = (kh * g.dh - g.pt) * g.W + kw * g.dw - g.pl;
  }
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit % blocks, nf = unit / blocks, f = nf % g.F, n = nf / g.F;
    const float* xg = x + (n * g.C + (f / g.Fg) * g.Cg) * plane;
    const float* wf = w + f * g.Kc;
    const float* bias_f = bias ? bias + f : nullptr;
    float* yp = y + nf * g.P;
    const int64_t v_end = std::min(vectors, (block + 1) * kDirectPlaneBlockVectors);
    for (int64_t v0 = block * kDirectPlaneBlockVectors; v0 < v_end; v0 += kPlaneVectors) {
      const int64_t u = std::min<int64_t>(kPlaneVectors, v_end - v0);
      kPlaneTiles[u - 1](g.Cg, taps, plane, shift.data(), xg, wf, bias_f, masks, vectors, v0, g.P, yp);
    }
  }
}

// --- Dense convolutions whose im2col rows are shifted input planes (1xK "same", Kx1, KxK "same";
// both strides 1, OW == W) ---
//
// Output position p = oh * W + ow of channel c's tap (kh, kw) reads x[c, p + shift], shift =
// (kh * dh - pt) * W + kw * dw - pl, whenever its input row and column lie inside the plane (then
// p + shift is exactly ih * W + iw); otherwise the lane is masked to +0.0, the spec's padding
// term. So a tile of 12 filters x 32 positions runs the GEMM's 12 x 32 register tile with B read
// from x itself: per term k = (c, kh, kw), in the spec's order, two masked loads and one fma per
// filter and vector, acc starting at +0.0. No im2col and no packing of B; the weights are the
// GEMM's 6-row A panels (packed once at load). Then acc + bias (one add) and NaN
// canonicalization, as the GEMM path's chain, bias add and canonicalization give.

namespace {

constexpr int kShiftedVectors = 2;
constexpr int kPanelRows = 6;
// The tile (f32 and f16 calls) asks for the input rows of the channel two ahead of the one it
// reads. Its channel planes lie one plane apart (IS-Net's 32 x 32 to 128 x 128 floats, the
// detector's 40 x 40 to 80 x 80), a stride the hardware prefetcher does not follow, and a band's
// rows are in L2 or L3 when the tile starts; without the hint the masked loads wait on them
// (PERFORMANCE.md, "IS-Net f16: the conv tile's input rows prefetched" and "The f32 conv tile's
// input rows prefetched"). A prefetch reads nothing the tile uses and faults on nothing: no bit
// changes.
constexpr int64_t kPrefetchChannels = 2;

// Sixteen f32 results rounded to f16 (docs/DETERMINISM.md 1.3) and stored where `lanes` is set
// (a run of lanes from lane 0, as the tile's store masks are). vcvtps2ph with the rounding mode
// in the immediate rounds to nearest even as half::F32ToF16 (overflow to inf, subnormals, no
// flush to zero; MXCSR not consulted). Its only other difference, NaN payloads, does not arise:
// the tile writes no NaN but the canonical 0x7FC00000, which it turns into 0x7E00 (sign and the
// top ten fraction bits kept), the canonical f16 NaN.
inline void StoreRoundedF16(uint16_t* dst, __mmask16 lanes, __m512 y) {
  const __m256i h =
      _mm512_maskz_cvtps_ph(0xFFFF, y, _MM_FROUND_TO_NEAREST_INT);  // maskz: GCC 12 warns on the unmasked form
  if (lanes == 0xFFFF) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), h);
    return;
  }
  alignas(32) uint16_t rounded[kLanes];
  _mm256_store_si256(reinterpret_cast<__m256i*>(rounded), h);
  for (int i = 0; i < kLanes; ++i) {
    if ((lanes >> i) & 1) dst[i] = rounded[i];
  }
}

// Out is float (the f32 call) or uint16_t (an f16 call's output, each result rounded once).
// kRelu (f16 only, OpParams::relu_output): relu of each result before it is rounded, which gives
// the bits of the f16 relu of the rounded result (DETERMINISM.md 3.1).
template <int R, int V, typename Out, bool kRelu>
void ShiftedTile(int64_t Cg, int64_t taps, int64_t plane, const int64_t* shift, const float* xg, const float* ap0,
                 const float* ap1, const uint16_t* mk, int64_t vectors, const float* bias, const __mmask16* store,
                 Out* out, int64_t P) {
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const float* a0 = ap0;
  const float* a1 = ap1;
  for (int64_t c = 0; c < Cg; ++c) {
    const float* xc = xg + c * plane;
    for (int64_t t = 0; t < taps; ++t) {
      const float* xs = xc + shift[t];
      // Formed as an integer: for the last two channels it points past the input, and a
      // prefetch there is harmless while an out-of-bounds pointer would not be.
      const char* ahead = reinterpret_cast<const char*>(
          reinterpret_cast<uintptr_t>(xs) + sizeof(float) * static_cast<uintptr_t>(kPrefetchChannels * plane));
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + sizeof(float) * (kLanes * V - 1), _MM_HINT_T0);
      __m512 b[V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) b[v] = _mm512_maskz_loadu_ps(mk[t * vectors + v], xs + kLanes * v);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(r < kPanelRows ? a0[r] : a1[r - kPanelRows]);
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(b[v], a, acc[r][v]);
      }
      a0 += kPanelRows;
      a1 += kPanelRows;
    }
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      __m512 y = acc[r][v];
      if (bias) y = _mm512_add_ps(y, _mm512_set1_ps(bias[r]));
      y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), nan);
      if constexpr (kRelu) {
        // The f32 relu: a set sign bit (-0, negatives, -inf) gives +0; the canonical NaN and
        // everything else stay.
        const __mmask16 sign = _mm512_cmplt_epi32_mask(_mm512_castps_si512(y), _mm512_setzero_si512());
        y = _mm512_maskz_mov_ps(static_cast<__mmask16>(~sign), y);
      }
      if constexpr (std::is_same_v<Out, float>) {
        _mm512_mask_storeu_ps(out + r * P + kLanes * v, store[v], y);
      } else {
        StoreRoundedF16(out + r * P + kLanes * v, store[v], y);
      }
    }
  }
}

template <typename Out>
using ShiftedTileFn = void (*)(int64_t, int64_t, int64_t, const int64_t*, const float*, const float*, const float*,
                               const uint16_t*, int64_t, const float*, const __mmask16*, Out*, int64_t);

template <int V, typename Out, bool kRelu>
constexpr ShiftedTileFn<Out> kShiftedTiles[kShiftedBlockFilters] = {
    &ShiftedTile<1, V, Out, kRelu>,  &ShiftedTile<2, V, Out, kRelu>,  &ShiftedTile<3, V, Out, kRelu>,
    &ShiftedTile<4, V, Out, kRelu>,  &ShiftedTile<5, V, Out, kRelu>,  &ShiftedTile<6, V, Out, kRelu>,
    &ShiftedTile<7, V, Out, kRelu>,  &ShiftedTile<8, V, Out, kRelu>,  &ShiftedTile<9, V, Out, kRelu>,
    &ShiftedTile<10, V, Out, kRelu>, &ShiftedTile<11, V, Out, kRelu>, &ShiftedTile<12, V, Out, kRelu>};

}  // namespace

bool UsesShiftedPlaneConvAvx512(const ConvGeom& g) {
  const bool plain_1x1 = g.KH == 1 && g.KW == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0;
  return !g.stuffed && g.sh == 1 && g.sw == 1 && g.OW == g.W && !plain_1x1 && g.P < (int64_t{1} << 40) &&
         UseAvx512DirectConv() && gemm::UseAvx512Gemm();
}

void ShiftedPlaneMasks(const ConvGeom& g, std::vector<uint16_t>* masks) {
  const int64_t vectors = (g.P + kLanes - 1) / kLanes, taps = g.KH * g.KW;
  masks->assign(static_cast<size_t>(taps * vectors), 0xFFFFu);
  uint16_t* m = masks->data();
  auto clear = [&](int64_t t, int64_t p0, int64_t p1) {  // positions [p0, p1) of tap t
    for (int64_t p = p0; p < p1; ++p) m[t * vectors + p / kLanes] &= static_cast<uint16_t>(~(1u << (p % kLanes)));
  };
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t t = kh * g.KW + kw, row_off = kh * g.dh - g.pt, col_off = kw * g.dw - g.pl;
      // Inside output columns [jb, je) and rows [ob, oe) of this tap.
      const int64_t jb = std::clamp<int64_t>(-col_off, 0, g.OW), je = std::clamp<int64_t>(g.W - col_off, jb, g.OW);
      const int64_t ob = std::clamp<int64_t>(-row_off, 0, g.OH), oe = std::clamp<int64_t>(g.H - row_off, ob, g.OH);
      clear(t, 0, ob * g.OW);
      clear(t, oe * g.OW, vectors * kLanes);  // the rows below, and the lanes past P
      for (int64_t oh = ob; oh < oe; ++oh) {
        clear(t, oh * g.OW, oh * g.OW + jb);
        clear(t, oh * g.OW + je, (oh + 1) * g.OW);
      }
    }
  }
}

namespace {

template <typename Out, bool kRelu>
void ShiftedPlaneUnits(const ConvGeom& g, const float* x, const float* panels, int64_t panels_per_group,
                       const float* bias, const uint16_t* masks, Out* y, int64_t begin, int64_t end) {
  const int64_t taps = g.KH * g.KW, plane = g.H * g.W, vectors = (g.P + kLanes - 1) / kLanes;
  const int64_t bands = ShiftedBands(g), blocks = ShiftedFilterBlocks(g);
  int64_t shift[64];
  std::vector<int64_t> many_shifts;
  int64_t* sh = shift;
  if (taps > 64) {
    many_shifts.resize(static_cast<size_t>(taps));
    sh = many_shifts.data();
  }
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    for (int64_t kw = 0; kw < g.KW; ++kw) sh[kh * g.KW + kw] = (kh * g.dh - g.pt) * g.W + kw * g.dw - g.pl;
  }
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t block = unit % blocks, band = unit / blocks % bands, ng = unit / (blocks * bands);
    const int64_t n = ng / g.G, gi = ng % g.G;
    const int64_t f0 = block * kShiftedBlockFilters, rows = std::min(kShiftedBlockFilters, g.Fg - f0);
    const float* ap0 = panels + gi * panels_per_group + f0 * g.Kc;  // f0 is a multiple of 6
    const float* ap1 = ap0 + kPanelRows * g.Kc;
    const float* xg = x + (n * g.C + gi * g.Cg) * plane;
    const float* bias_f = bias ? bias + gi * g.Fg + f0 : nullptr;
    Out* yf = y + (n * g.F + gi * g.Fg + f0) * g.P;
    const int64_t p_end = std::min(g.P, (band + 1) * kShiftedBandPositions);
    for (int64_t p0 = band * kShiftedBandPositions; p0 < p_end; p0 += kShiftedVectors * kLanes) {
      const int64_t left = p_end - p0;
      __mmask16 store[kShiftedVectors];
      for (int v = 0; v < kShiftedVectors; ++v) {
        const int64_t lanes = std::clamp<int64_t>(left - kLanes * v, 0, kLanes);
        store[v] = lanes == kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << lanes) - 1u);
      }
      const ShiftedTileFn<Out> tile =
          left > kLanes ? kShiftedTiles<2, Out, kRelu>[rows - 1] : kShiftedTiles<1, Out, kRelu>[rows - 1];
      tile(g.Cg, taps, plane, sh, xg + p0, ap0, ap1, masks + p0 / kLanes, vectors, bias_f, store, yf + p0, g.P);
    }
  }
}

}  // namespace

void ConvShiftedPlaneUnitsAvx512(const ConvGeom& g, const float* x, const float* panels, int64_t panels_per_group,
                                 const float* bias, const uint16_t* masks, float* y, int64_t begin, int64_t end) {
  ShiftedPlaneUnits<float, false>(g, x, panels, panels_per_group, bias, masks, y, begin, end);
}

void ConvShiftedPlaneUnitsF16OutAvx512(const ConvGeom& g, const float* x, const float* panels, int64_t panels_per_group,
                                       const float* bias, const uint16_t* masks, bool relu, uint16_t* y, int64_t begin,
                                       int64_t end) {
  if (relu) {
    ShiftedPlaneUnits<uint16_t, true>(g, x, panels, panels_per_group, bias, masks, y, begin, end);
  } else {
    ShiftedPlaneUnits<uint16_t, false>(g, x, panels, panels_per_group, bias, masks, y, begin, end);
  }
}

// --- Dense convolutions with few output positions (at most kFewPositionsMax per image) ---
//
// With P <= 8, a GEMM tile of 16 positions would be mostly empty lanes. Here the lanes are 16
// filters: per term k in increasing order, NV vectors of weights (a 16-filter panel row each) and
// one broadcast of COL[k, p] per position, acc[v][p] = fma(COL[k, p], w[f, k], acc) for every
// filter f of the lanes: each output's chain is the spec's (acc from +0.0, the (c, kh, kw) terms
// in order, padding terms the +0.0 entries of COL). Then acc + bias (one add), NaN
// canonicalization, and a scatter of each lane to y[f, p].

namespace {

constexpr int kFewMaxVectors = 8;
constexpr int FewVectorsFor(int positions) {
  return positions <= 3 ? 8 : positions == 4 ? 6 : positions <= 6 ? 4 : 3;  // at most 24 accumulators
}

template <int NP, int NV>
void FewPositionsTile(int64_t Kc, const float* col, const float* panels, const float* bias, int64_t F, int64_t f0,
                      float* yn) {
  __m512 acc[NV][NP];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) acc[v][p] = _mm512_setzero_ps();
  }
  const float* wp = panels + (f0 / kLanes) * Kc * kLanes;  // f0 is a multiple of 16
  for (int64_t k = 0; k < Kc; ++k) {
    __m512 wv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_ps(wp + (v * Kc + k) * kLanes);
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      const __m512 xb = _mm512_set1_ps(col[k * NP + p]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[v][p] = _mm512_fmadd_ps(xb, wv[v], acc[v][p]);
    }
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(NP));
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    const int64_t fv = f0 + kLanes * v, lanes = std::clamp<int64_t>(F - fv, 0, kLanes);
    const __mmask16 live =
        lanes == kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << lanes) - 1u);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(live, bias + fv) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      __m512 y = acc[v][p];
      if (bias) y = _mm512_add_ps(y, b);
      y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), nan);
      _mm512_mask_i32scatter_ps(yn + fv * NP + p, live, rows, y, 4);
    }
  }
}

using FewPositionsTileFn = void (*)(int64_t, const float*, const float*, const float*, int64_t, int64_t, float*);

template <int NP, size_t... I>
constexpr std::array<FewPositionsTileFn, kFewMaxVectors> FewTilesFor(std::index_sequence<I...>) {
  return {&FewPositionsTile<NP, std::min(static_cast<int>(I) + 1, FewVectorsFor(NP))>...};
}

constexpr std::array<FewPositionsTileFn, kFewMaxVectors> kFewTiles[kFewPositionsMax] = {
    FewTilesFor<1>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<2>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<3>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<4>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<5>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<6>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<7>(std::make_index_sequence<kFewMaxVectors>{}),
    FewTilesFor<8>(std::make_index_sequence<kFewMaxVectors>{})};

}  // namespace

bool UsesFewPositionsConvAvx512(const ConvGeom& g) {
  return g.G == 1 && !g.stuffed && g.P >= 1 && g.P <= kFewPositionsMax && g.F < (int64_t{1} << 30) &&
         UseAvx512DirectConv();
}

int64_t FewPositionsPanelFloats(const ConvGeom& g) { return (g.F + kLanes - 1) / kLanes * kLanes * g.Kc; }

void PackFewPositionsPanels(const ConvGeom& g, const float* w, float* panels) {
  const int64_t count = (g.F + kLanes - 1) / kLanes;
  for (int64_t j = 0; j < count; ++j) {
    for (int64_t k = 0; k < g.Kc; ++k) {
      float* row = panels + (j * g.Kc + k) * kLanes;
      for (int64_t i = 0; i < kLanes; ++i) {
        const int64_t f = j * kLanes + i;
        row[i] = f < g.F ? w[f * g.Kc + k] : 0.0f;
      }
    }
  }
}

int64_t FewPositionsBlockFilters(const ConvGeom& g) {
  return kLanes * FewVectorsFor(static_cast<int>(std::clamp<int64_t>(g.P, 1, kFewPositionsMax)));
}

void ConvFewPositionsUnitsAvx512(const ConvGeom& g, const float* col, const float* panels, const float* bias, float* y,
                                 int64_t begin, int64_t end) {
  const int64_t blocks = FewPositionsBlocks(g), block_filters = FewPositionsBlockFilters(g);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t n = unit / blocks, f0 = unit % blocks * block_filters;
    const int64_t vectors = (std::min(g.F, f0 + block_filters) - f0 + kLanes - 1) / kLanes;
    kFewTiles[g.P - 1][vectors - 1](g.Kc, col + n * g.Kc * g.P, panels, bias, g.F, f0, y + n * g.F * g.P);
  }
}

}  // namespace consensor::kernels::cpu
