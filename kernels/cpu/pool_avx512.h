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
// pool.cc: false keeps max pools on the portable walk even where AVX-512F is present (for tests
// comparing the two; the bits are the same).
void SetPoolAvx512ForTesting(bool enabled);

}  // namespace consensor::kernels::cpu
