// The one-pass quantize on 8 lanes, AVX2 (compiled with -mavx2). The lanes perform the ops of
// kernels/cpu/quantize_impl.h exactly as quantize_avx512.cc describes (vroundps with
// _MM_FROUND_TO_NEAREST_INT is the IEEE roundToIntegralTiesToEven); the clamped i32 values are
// narrowed by exact packs. The last partial vector runs the scalar loop.
#include <immintrin.h>

#include "kernels/cpu/quantize_impl.h"

namespace consensor::kernels::cpu {
namespace {

template <bool kSigned>
void QuantizeAvx2(const float* x, float s, float z, void* y, int64_t begin, int64_t end) {
  const __m256 lo = _mm256_set1_ps(kSigned ? -128.0f : -1.0f);
  const __m256 hi = _mm256_set1_ps(kSigned ? 128.0f : 256.0f);
  const __m256i top = _mm256_set1_epi32(kSigned ? 127 : 255);
  const __m256i bottom = _mm256_set1_epi32(-128);
  const __m256 vs = _mm256_set1_ps(s);
  const __m256 vz = _mm256_set1_ps(z);
  int8_t* out = static_cast<int8_t*>(y);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 q = _mm256_div_ps(_mm256_loadu_ps(x + i), vs);
    const __m256 r = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 a = _mm256_add_ps(r, vz);
    // u8: -1 < a < 256; i8: -128 <= a < 128 (false for NaN).
    const __m256 in_range =
        _mm256_and_ps(_mm256_cmp_ps(a, lo, kSigned ? _CMP_GE_OQ : _CMP_GT_OQ), _mm256_cmp_ps(a, hi, _CMP_LT_OQ));
    __m256i t = _mm256_cvttps_epi32(_mm256_and_ps(in_range, a));
    t = _mm256_blendv_epi8(t, top, _mm256_castps_si256(_mm256_cmp_ps(a, hi, _CMP_GE_OQ)));
    if (kSigned) t = _mm256_blendv_epi8(t, bottom, _mm256_castps_si256(_mm256_cmp_ps(a, lo, _CMP_LT_OQ)));
    // Every lane is in [-128, 255]: the packs are exact.
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    const __m128i bytes = kSigned ? _mm_packs_epi16(words, words) : _mm_packus_epi16(words, words);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), bytes);
  }
  if (i < end) QuantizeChunkImpl(x, s, z, kSigned ? DType::kI8 : DType::kU8, y, i, end);
}

}  // namespace

void QuantizeChunkAvx2(const float* x, float s, float z, DType to, void* y, int64_t begin, int64_t end) {
  if (to == DType::kU8) {
    QuantizeAvx2<false>(x, s, z, y, begin, end);
  } else {
    QuantizeAvx2<true>(x, s, z, y, begin, end);
  }
}

}  // namespace consensor::kernels::cpu
