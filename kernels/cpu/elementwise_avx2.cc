// The AVX2+FMA instantiation of kernels/cpu/elementwise_impl.h (this file is compiled with
// -mavx2 -mfma). Same source as the portable path, auto-vectorized; called only when
// CpuHasAvx2Fma() is true. Keep this TU free of anything but the compute loops.
#include "kernels/cpu/elementwise_impl.h"

namespace consensor::kernels::cpu {

void EwRunChunkAvx2(const EwPlan& plan, int64_t begin, int64_t end) { EwRunChunkImpl(plan, begin, end); }

void ReluHalfBitsAvx2(const uint16_t* x, uint16_t* y, int64_t n, uint16_t infinity, uint16_t nan) {
  ReluHalfBitsImpl(x, y, n, infinity, nan);
}

}  // namespace consensor::kernels::cpu
