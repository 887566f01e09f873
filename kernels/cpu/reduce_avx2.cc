// AVX2 + FMA build of the reduce family (compiled with -mavx2 -mfma; called only after the
// runtime CPU check). Same source as the portable build, identical bits; plus the widening sums
// of i8 rows on vpsadbw.
#include <immintrin.h>

#include "kernels/cpu/reduce_impl.h"

namespace consensor::kernels::cpu {

Status RunReduceAvx2(const KernelCall& call, const CpuContext& ctx) { return RunReduceImpl(call, ctx); }

// Each x + 128 is a byte 0..255 (x ^ 0x80), summed 32 at a time by vpsadbw into 64-bit lanes;
// subtracting 128 per term gives the sum of the x. All modulo 2^32, as the i32 sum wraps, so
// the bits are those of the cast values added one by one.
void WideningI8RowSumsAvx2(const int8_t* x, int64_t rows, int64_t len, int32_t* out) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* row = x + r * len;
    __m256i acc0 = zero, acc1 = zero;
    int64_t i = 0;
    for (; i + 64 <= len; i += 64) {
      const __m256i a = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)), flip);
      const __m256i b = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i + 32)), flip);
      acc0 = _mm256_add_epi64(acc0, _mm256_sad_epu8(a, zero));
      acc1 = _mm256_add_epi64(acc1, _mm256_sad_epu8(b, zero));
    }
    for (; i + 32 <= len; i += 32) {
      const __m256i a = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)), flip);
      acc0 = _mm256_add_epi64(acc0, _mm256_sad_epu8(a, zero));
    }
    acc0 = _mm256_add_epi64(acc0, acc1);
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc0);
    uint32_t sum = static_cast<uint32_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]) - 128u * static_cast<uint32_t>(i);
    for (; i < len; ++i) sum += static_cast<uint32_t>(static_cast<int32_t>(row[i]));
    out[r] = static_cast<int32_t>(sum);
  }
}

}  // namespace consensor::kernels::cpu
