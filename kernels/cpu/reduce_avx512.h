// f32 reduce_max / reduce_min on AVX-512F (reduce_avx512.cc), used by reduce.cc, and the
// test switches of reduce.cc's SIMD paths.
#pragma once

#include <cstdint>

namespace consensor::kernels::cpu {

// Lowers *lo to the lowest and raises *hi to the highest order key (F32OrderKey of the bits,
// NaNs included as they are) of x[0..n). Call only when gemm::CpuHasAvx512F().
void F32KeyRangeAvx512(const float* x, int64_t n, int32_t* lo, int32_t* hi);

// Tests: false keeps f32 reduce_max / reduce_min on the AVX2 build's loop on an AVX-512 CPU.
void SetReduceMaxMinAvx512ForTesting(bool enabled);
// Tests: false keeps the widening i8 sums (OpParams::sum_widens_i8) of contiguous rows on the
// AVX2 build's generic loop instead of WideningI8RowSumsAvx2 (reduce_avx2.cc).
void SetWideningSumAvx2ForTesting(bool enabled);

}  // namespace consensor::kernels::cpu
