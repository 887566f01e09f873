// Checks and geometry of the pool family (MaxPool2D, AvgPool2D), shared by
// kernels/cpu/pool.cc and kernels/cuda/pool.cu.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

// NCHW geometry of a validated call; passed by value to the CUDA kernels.
struct PoolGeom {
  int64_t N, C, H, W, OH, OW;
  int64_t kh, kw, sh, sw, dh, dw, top, left;
};

StatusOr<PoolGeom> ValidatePool(const KernelCall& call);

}  // namespace consensor::kernels
