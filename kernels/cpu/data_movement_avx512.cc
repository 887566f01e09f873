// The Resize lowering's two taps in one pass with 512-bit vectors (data_movement_avx512.h).
// Compiled with -mavx512f; -ffp-contract=off keeps each mul and the add separate.
#include "kernels/cpu/data_movement_avx512.h"

#include <immintrin.h>

namespace consensor::kernels::cpu {
namespace {

inline __m512 TwoTaps(__m512 t0, __m512 a0, __m512 t1, __m512 a1) {
  const __m512 s = _mm512_add_ps(_mm512_mul_ps(t0, a0), _mm512_mul_ps(t1, a1));
  // A NaN in either product or from the sum (inf - inf) gives the canonical NaN, as the add does.
  const __mmask16 nan = _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(s, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

}  // namespace

void ResizeTapsRowAvx512(const float* r0, float a0, const float* r1, float a1, float* y, int64_t inner) {
  const __m512 v0 = _mm512_set1_ps(a0), v1 = _mm512_set1_ps(a1);
  int64_t k = 0;
  for (; k + 16 <= inner; k += 16) {
    _mm512_storeu_ps(y + k, TwoTaps(_mm512_loadu_ps(r0 + k), v0, _mm512_loadu_ps(r1 + k), v1));
  }
  if (k < inner) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (inner - k)) - 1);
    const __m512 t0 = _mm512_maskz_loadu_ps(tail, r0 + k), t1 = _mm512_maskz_loadu_ps(tail, r1 + k);
    _mm512_mask_storeu_ps(y + k, tail, TwoTaps(t0, v0, t1, v1));
  }
}

void ResizeTapsElementsAvx512(const float* x, const int32_t* i0, const float* w0, const int32_t* i1, const float* w1,
                              float* y, int64_t m) {
  const __m512 zero = _mm512_setzero_ps();  // the masked gathers' pass-through (no lane keeps it)
  int64_t j = 0;
  for (; j + 16 <= m; j += 16) {
    const __m512 t0 = _mm512_mask_i32gather_ps(zero, 0xFFFF, _mm512_loadu_si512(i0 + j), x, 4);
    const __m512 t1 = _mm512_mask_i32gather_ps(zero, 0xFFFF, _mm512_loadu_si512(i1 + j), x, 4);
    _mm512_storeu_ps(y + j, TwoTaps(t0, _mm512_loadu_ps(w0 + j), t1, _mm512_loadu_ps(w1 + j)));
  }
  if (j < m) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (m - j)) - 1);
    const __m512 t0 = _mm512_mask_i32gather_ps(zero, tail, _mm512_maskz_loadu_epi32(tail, i0 + j), x, 4);
    const __m512 t1 = _mm512_mask_i32gather_ps(zero, tail, _mm512_maskz_loadu_epi32(tail, i1 + j), x, 4);
    const __m512 a0 = _mm512_maskz_loadu_ps(tail, w0 + j), a1 = _mm512_maskz_loadu_ps(tail, w1 + j);
    _mm512_mask_storeu_ps(y + j, tail, TwoTaps(t0, a0, t1, a1));
  }
}

}  // namespace consensor::kernels::cpu
