// max_pool2d over planes whose every window lies inside the input, 16 outputs at a time with
// 512-bit gathers (compiled with -mavx512f; called only when gemm::CpuHasAvx512F()).
//
// Same rule as pool.cc (docs/DETERMINISM.md 4.5): without NaNs the max is order-free, and the
// order-preserving integer key b ^ ((b >> 31) >>> 1) orders non-NaN bits exactly as the spec's
// max does (-0 below +0), so the max of keys over the window, mapped back, is the spec's element.
// A vector whose windows hold a NaN redoes those outputs by the row-major walk, so the first
// NaN (payload included) is the one copied. The flat output index runs across rows, so narrow
// outputs (the openWakeWord model's 16 to 2 columns) still fill whole vectors. Windows two
// columns wide (dilation 1) gather each output's pair as one 64-bit lane, half the gathers.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/pool_avx512.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int kLanes = 16;

inline __m512i Keys(__m512i b) { return _mm512_xor_si512(b, _mm512_srli_epi32(_mm512_srai_epi32(b, 31), 1)); }

// The spec's max over the window of output (oh, ow), row-major, first NaN wins.
uint32_t WalkWindow(const uint32_t* x, const PoolGeom& g, int64_t oh, int64_t ow) {
  uint32_t best_key_bits = 0;
  int32_t best = INT32_MIN;
  for (int64_t i = 0; i < g.kh; ++i) {
    const uint32_t* row = x + (oh * g.sh + i * g.dh) * g.W + ow * g.sw;
    for (int64_t j = 0; j < g.kw; ++j) {
      const uint32_t b = row[j * g.dw];
      if ((b & 0x7FFFFFFFu) > 0x7F800000u) return b;
      const int32_t key = static_cast<int32_t>(b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) >> 1));
      if (key >= best) {
        best = key;
        best_key_bits = b;
      }
    }
  }
  return best_key_bits;
}

}  // namespace

bool MaxPoolAllWindowsInside(const PoolGeom& g) {
  return g.top == 0 && g.left == 0 && g.kh > 0 && g.kw > 0 && (g.OH - 1) * g.sh + (g.kh - 1) * g.dh < g.H &&
         (g.OW - 1) * g.sw + (g.kw - 1) * g.dw < g.W && g.H * g.W < (int64_t{1} << 30);
}

void MaxPoolWindowStarts(const PoolGeom& g, std::vector<int32_t>* starts) {
  starts->resize(static_cast<size_t>(g.OH * g.OW));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      (*starts)[static_cast<size_t>(oh * g.OW + ow)] = static_cast<int32_t>(oh * g.sh * g.W + ow * g.sw);
    }
  }
}

void MaxPoolPlaneAvx512(const uint32_t* x, uint32_t* y, const PoolGeom& g, const int32_t* starts) {
  const int64_t outputs = g.OH * g.OW;
  const __m512i lowest = _mm512_set1_epi32(static_cast<int32_t>(0xFF800000u ^ 0x7FFFFFFFu));  // key of -inf
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
  const bool pairs = g.kw == 2 && g.dw == 1;
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t o = 0; o < outputs; o += kLanes) {
    const int64_t n = outputs - o < kLanes ? outputs - o : kLanes;
    const __mmask16 m = n == kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
    const __m512i base = _mm512_maskz_loadu_epi32(m, starts + o);
    __m512i key = lowest;
    __mmask16 nan = 0;
    if (pairs) {
      // Windows two columns wide: each output's pair of elements as one 64-bit gather lane,
      // 8 outputs per gather, then the max of the even and odd lanes' keys.
      const __m256i base_lo = _mm512_castsi512_si256(base), base_hi = _mm512_extracti64x4_epi64(base, 1);
      const __mmask8 m_lo = static_cast<__mmask8>(m & 0xFF), m_hi = static_cast<__mmask8>(m >> 8);
      for (int64_t i = 0; i < g.kh; ++i) {
        const __m256i row = _mm256_set1_epi32(static_cast<int32_t>(i * g.dh * g.W));
        const __m512i lo =
            _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), m_lo, _mm256_add_epi32(base_lo, row), x, 4);
        const __m512i hi =
            _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), m_hi, _mm256_add_epi32(base_hi, row), x, 4);
        // NaN flags per element as all-ones lanes, then per output (either element of its pair).
        const __m512i all = _mm512_set1_epi32(-1);
        const __m512i nlo = _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(_mm512_and_si512(lo, abs_mask), inf), all);
        const __m512i nhi = _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(_mm512_and_si512(hi, abs_mask), inf), all);
        nan |= _mm512_test_epi32_mask(
            _mm512_or_si512(_mm512_permutex2var_epi32(nlo, evens, nhi), _mm512_permutex2var_epi32(nlo, odds, nhi)),
            all);
        const __m512i klo = Keys(lo), khi = Keys(hi);
        key = _mm512_max_epi32(key, _mm512_max_epi32(_mm512_permutex2var_epi32(klo, evens, khi),
                                                     _mm512_permutex2var_epi32(klo, odds, khi)));
      }
    }
    for (int64_t i = 0; i < (pairs ? 0 : g.kh); ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int32_t>(i * g.dh * g.W + j * g.dw)));
        const __m512i b = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, x, 4);
        nan |= _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, abs_mask), inf);
        key = _mm512_max_epi32(key, Keys(b));
      }
    }
    _mm512_mask_storeu_epi32(y + o, m, Keys(key));
    nan &= m;
    while (nan) {
      const int lane = __builtin_ctz(nan);
      nan &= static_cast<__mmask16>(nan - 1);
      const int64_t out = o + lane;
      y[out] = WalkWindow(x, g, out / g.OW, out % g.OW);
    }
  }
}

bool MaxPoolHalfTwoByTwo(const PoolGeom& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 && MaxPoolAllWindowsInside(g);
}

// 16 outputs of one row at a time: each output's window row is one 32-bit lane of a row (the
// pair of 16-bit patterns at columns 2ow, 2ow + 1, little-endian), each pattern sign-extended
// to 32 bits. Its key b ^ ((b >> 31) >>> 17) flips the 15 magnitude bits of a negative value:
// the 16-bit key sign-extended, so the int32 order is the spec's max order of the values (-0
// below +0), and equal keys are equal patterns. A window with a NaN gives the canonical NaN.
void MaxPoolHalfTwoByTwoPlaneAvx512(const uint16_t* x, uint16_t* y, const PoolGeom& g, uint16_t infinity,
                                    uint16_t canonical_nan) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFF), inf = _mm512_set1_epi32(infinity);
  const __m512i nan = _mm512_set1_epi32(canonical_nan);
  auto key = [](__m512i b) { return _mm512_xor_si512(b, _mm512_srli_epi32(_mm512_srai_epi32(b, 31), 17)); };
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const uint16_t* r0 = x + 2 * oh * g.W;
    const uint16_t* r1 = r0 + g.W;
    uint16_t* out = y + oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ow += kLanes) {
      const int64_t n = std::min<int64_t>(kLanes, g.OW - ow);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      const __m512i v0 = _mm512_maskz_loadu_epi32(m, r0 + 2 * ow);
      const __m512i v1 = _mm512_maskz_loadu_epi32(m, r1 + 2 * ow);
      const __m512i a = _mm512_srai_epi32(_mm512_slli_epi32(v0, 16), 16), b = _mm512_srai_epi32(v0, 16);
      const __m512i c = _mm512_srai_epi32(_mm512_slli_epi32(v1, 16), 16), d = _mm512_srai_epi32(v1, 16);
      const __m512i best = _mm512_max_epi32(_mm512_max_epi32(key(a), key(b)), _mm512_max_epi32(key(c), key(d)));
      const __mmask16 has_nan = static_cast<__mmask16>(_mm512_cmpgt_epi32_mask(_mm512_and_si512(a, magnitude), inf) |
                                                       _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, magnitude), inf) |
                                                       _mm512_cmpgt_epi32_mask(_mm512_and_si512(c, magnitude), inf) |
                                                       _mm512_cmpgt_epi32_mask(_mm512_and_si512(d, magnitude), inf));
      const __m512i result = _mm512_mask_mov_epi32(key(best), has_nan, nan);
      _mm512_mask_cvtepi32_storeu_epi16(out + ow, m, result);
    }
  }
}

}  // namespace consensor::kernels::cpu
