// max_pool2d with 512-bit gathers (pool_avx512.cc), for pools whose every window lies inside
// the input. Same bits as pool.cc's walk.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/checks/pool.h"

namespace consensor::kernels::cpu {

// No padding reaches a window, and the plane is small enough for 32-bit gather offsets.
bool MaxPoolAllWindowsInside(const PoolGeom& g);
// The flat input offset of each output's first window position (OH * OW of them).
void MaxPoolWindowStarts(const PoolGeom& g, std::vector<int32_t>* starts);
// One plane; call only when gemm::CpuHasAvx512F() and MaxPoolAllWindowsInside(g).
void MaxPoolPlaneAvx512(const uint32_t* x, uint32_t* y, const PoolGeom& g, const int32_t* starts);
// A 2 x 2 max pool with stride 2 and dilation 1 whose every window lies inside the input.
bool MaxPoolHalfTwoByTwo(const PoolGeom& g);
// One plane of f16 or bf16 patterns (DETERMINISM.md 1.3, 1.4: the compute rule's bits, every
// window with a NaN giving `canonical_nan`; `infinity` is the type's +inf pattern); call only
// when gemm::CpuHasAvx512F() and MaxPoolHalfTwoByTwo(g).
void MaxPoolHalfTwoByTwoPlaneAvx512(const uint16_t* x, uint16_t* y, const PoolGeom& g, uint16_t infinity,
                                    uint16_t canonical_nan);
// pool.cc: false keeps max pools on the portable walk even where AVX-512F is present (for tests
// comparing the two; the bits are the same).
void SetPoolAvx512ForTesting(bool enabled);

}  // namespace consensor::kernels::cpu
