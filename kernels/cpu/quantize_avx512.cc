// The one-pass quantize on 16 lanes, AVX-512F (compiled with -mavx512f; called only after
// gemm::CpuHasAvx512F()). Each lane performs the ops of kernels/cpu/quantize_impl.h: one IEEE
// division, round half to even (vrndscaleps with imm 0, the IEEE roundToIntegralTiesToEven:
// the same value as section 5.12's for every non-NaN, signed zeros included), one IEEE addition
// and section 4.2's saturating cast (truncation in range, the bound beyond, 0 for NaN). A NaN at
// any step ends as 0, as the canonical NaN does in the cast, so the payload never matters. The
// last partial vector runs the scalar loop.
#include <immintrin.h>

#include "kernels/cpu/quantize_impl.h"

namespace consensor::kernels::cpu {
namespace {

template <bool kSigned>
void QuantizeAvx512(const float* x, float s, float z, void* y, int64_t begin, int64_t end) {
  // The range that truncates to a value of T, and T's bounds.
  const __m512 lo = _mm512_set1_ps(kSigned ? -128.0f : -1.0f);
  const __m512 hi = _mm512_set1_ps(kSigned ? 128.0f : 256.0f);
  const __m512i top = _mm512_set1_epi32(kSigned ? 127 : 255);
  const __m512i bottom = _mm512_set1_epi32(-128);
  const __m512 vs = _mm512_set1_ps(s);
  const __m512 vz = _mm512_set1_ps(z);
  int8_t* out = static_cast<int8_t*>(y);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x + i), vs);
    const __m512 r = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 a = _mm512_add_ps(r, vz);
    // u8: -1 < a < 256; i8: -128 <= a < 128 (false for NaN).
    const __mmask16 in_range =
        _mm512_cmp_ps_mask(a, lo, kSigned ? _CMP_GE_OQ : _CMP_GT_OQ) & _mm512_cmp_ps_mask(a, hi, _CMP_LT_OQ);
    __m512i t = _mm512_cvttps_epi32(_mm512_maskz_mov_ps(in_range, a));
    t = _mm512_mask_mov_epi32(t, _mm512_cmp_ps_mask(a, hi, _CMP_GE_OQ), top);
    if (kSigned) t = _mm512_mask_mov_epi32(t, _mm512_cmp_ps_mask(a, lo, _CMP_LT_OQ), bottom);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(t));
  }
  if (i < end) QuantizeChunkImpl(x, s, z, kSigned ? DType::kI8 : DType::kU8, y, i, end);
}

}  // namespace

void QuantizeChunkAvx512(const float* x, float s, float z, DType to, void* y, int64_t begin, int64_t end) {
  if (to == DType::kU8) {
    QuantizeAvx512<false>(x, s, z, y, begin, end);
  } else {
    QuantizeAvx512<true>(x, s, z, y, begin, end);
  }
}

}  // namespace consensor::kernels::cpu
