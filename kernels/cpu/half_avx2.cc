// f16/bf16 <-> f32 conversions of DETERMINISM.md 1.3/1.4 eight values at a time: F16C's
// vcvtph2ps (exact) and vcvtps2ph with round to nearest even for f16, AVX2 integer operations
// for bf16. The hardware keeps NaN payloads and signs, so NaN lanes are replaced by the
// canonical NaNs afterwards; everything else (ties, overflow to inf, subnormals both ways, no
// flush to zero) is the IEEE conversion the spec defines. HalfConversion.* checks every f16
// pattern and a large set of f32 patterns against kernels/half.h bit for bit. Called only
// when CpuHasF16c() is true; keep this TU free of anything but the conversion loops.
#include <immintrin.h>

#include "kernels/cpu/half_operands.h"
#include "kernels/half.h"

namespace consensor::kernels::cpu {

__attribute__((target("avx2,f16c"))) void F16ToF32Avx2(const uint16_t* src, float* dst, int64_t n) {
  const __m256 canonical = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(half::kCanonicalNaNF32)));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(dst + i, _mm256_blendv_ps(v, canonical, nan));
  }
  for (; i < n; ++i) dst[i] = half::F16ToF32(src[i]);
}

__attribute__((target("avx2,f16c"))) void F32ToF16Avx2(const float* src, uint16_t* dst, int64_t n) {
  const __m128i canonical = _mm_set1_epi16(static_cast<short>(half::kCanonicalNaNF16));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    // Rounding mode in the immediate (bit 2 clear): MXCSR is not consulted.
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_blendv_epi8(h, canonical, nan16));
  }
  for (; i < n; ++i) dst[i] = half::F32ToF16(src[i]);
}

__attribute__((target("avx2"))) void BF16ToF32Avx2(const uint16_t* src, float* dst, int64_t n) {
  const __m256i canonical = _mm256_set1_epi32(static_cast<int>(half::kCanonicalNaNF32));
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf = _mm256_set1_epi32(0x7F800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u =
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_blendv_epi8(u, canonical, nan));
  }
  for (; i < n; ++i) dst[i] = half::BF16ToF32(src[i]);
}

__attribute__((target("avx2"))) void F32ToBF16Avx2(const float* src, uint16_t* dst, int64_t n) {
  const __m256i canonical = _mm256_set1_epi32(half::kCanonicalNaNBF16);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf = _mm256_set1_epi32(0x7F800000);
  const __m256i bias = _mm256_set1_epi32(0x7FFF);
  const __m256i one = _mm256_set1_epi32(1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    // (u + 0x7FFF + ((u >> 16) & 1)) >> 16, as the spec writes it (no wrap for non-NaN u).
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), odd), 16);
    r = _mm256_blendv_epi8(r, canonical, nan);
    // 32-bit lanes hold values below 2^16: pack them to 16 bits (unsigned saturation keeps them).
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = half::F32ToBF16(src[i]);
}

}  // namespace consensor::kernels::cpu
