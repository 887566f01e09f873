// f32 reduce_max / reduce_min over contiguous runs on 16 lanes, AVX-512F (compiled with
// -mavx512f; called only after gemm::CpuHasAvx512F()). Section 1.1 max/min are order-free, so
// a run is reduced to the lowest and highest order key (F32OrderKey in reduce_impl.h: a signed
// int that orders like the float, -0 below +0) in any order; NaNs get keys above +inf's
// (positive sign) or below -inf's (negative sign), so one pass finds both extremes and whether
// any NaN is present. reduce.cc turns the keys into the result.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/reduce_avx512.h"

// GCC 12's _mm512_srai/min/max_epi32 start from _mm512_undefined_epi32(): a false
// -Wmaybe-uninitialized (or -Wuninitialized) once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace consensor::kernels::cpu {
namespace {

// b ^ ((b >> 31) & 0x7FFFFFFF) on each lane: vpternlogd 0x78 is A ^ (B & C).
inline __m512i OrderKeys(__m512i b, __m512i magnitude) {
  return _mm512_ternarylogic_epi32(b, _mm512_srai_epi32(b, 31), magnitude, 0x78);
}

}  // namespace

void F32KeyRangeAvx512(const float* x, int64_t n, int32_t* lo, int32_t* hi) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i lo0 = _mm512_set1_epi32(*lo), lo1 = lo0, lo2 = lo0, lo3 = lo0;
  __m512i hi0 = _mm512_set1_epi32(*hi), hi1 = hi0, hi2 = hi0, hi3 = hi0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i k0 = OrderKeys(_mm512_loadu_si512(x + i), magnitude);
    const __m512i k1 = OrderKeys(_mm512_loadu_si512(x + i + 16), magnitude);
    const __m512i k2 = OrderKeys(_mm512_loadu_si512(x + i + 32), magnitude);
    const __m512i k3 = OrderKeys(_mm512_loadu_si512(x + i + 48), magnitude);
    lo0 = _mm512_min_epi32(lo0, k0);
    hi0 = _mm512_max_epi32(hi0, k0);
    lo1 = _mm512_min_epi32(lo1, k1);
    hi1 = _mm512_max_epi32(hi1, k1);
    lo2 = _mm512_min_epi32(lo2, k2);
    hi2 = _mm512_max_epi32(hi2, k2);
    lo3 = _mm512_min_epi32(lo3, k3);
    hi3 = _mm512_max_epi32(hi3, k3);
  }
  for (; i < n; i += 16) {
    // The last vectors; lanes past the end keep the accumulator (masked load and masked ops).
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i k = OrderKeys(_mm512_maskz_loadu_epi32(m, x + i), magnitude);
    lo0 = _mm512_mask_min_epi32(lo0, m, lo0, k);
    hi0 = _mm512_mask_max_epi32(hi0, m, hi0, k);
  }
  lo0 = _mm512_min_epi32(_mm512_min_epi32(lo0, lo1), _mm512_min_epi32(lo2, lo3));
  hi0 = _mm512_max_epi32(_mm512_max_epi32(hi0, hi1), _mm512_max_epi32(hi2, hi3));
  alignas(64) int32_t lanes_lo[16], lanes_hi[16];
  _mm512_store_si512(lanes_lo, lo0);
  _mm512_store_si512(lanes_hi, hi0);
  for (int j = 0; j < 16; ++j) {
    *lo = lanes_lo[j] < *lo ? lanes_lo[j] : *lo;
    *hi = lanes_hi[j] > *hi ? lanes_hi[j] : *hi;
  }
}

}  // namespace consensor::kernels::cpu

#pragma GCC diagnostic pop
