// The Resize lowering's two taps in one pass (data_movement.cc's RunResizeTaps) with 512-bit
// vectors. Same bits as the portable loop: each product and the sum is the same IEEE operation,
// lane by lane, and a NaN sum becomes the canonical NaN.
#pragma once

#include <cstdint>

namespace consensor::kernels::cpu {

// rows of `inner` >= 16 outputs: y[k] = canon(r0[k] * a0 + r1[k] * a1) for k < inner.
// Call only when gemm::CpuHasAvx512F().
void ResizeTapsRowAvx512(const float* r0, float a0, const float* r1, float a1, float* y, int64_t inner);
// One output row along the last axis: y[j] = canon(x[i0[j]] * w0[j] + x[i1[j]] * w1[j]) for
// j < m, with every offset in [0, n) of the row x. Call only when gemm::CpuHasAvx512F().
void ResizeTapsElementsAvx512(const float* x, const int32_t* i0, const float* w0, const int32_t* i1, const float* w1,
                              float* y, int64_t m);
// data_movement.cc: false keeps the two taps on the portable loop even where AVX-512F is present
// (for tests comparing the two; the bits are the same).
void SetResizeTapsAvx512ForTesting(bool enabled);

}  // namespace consensor::kernels::cpu
