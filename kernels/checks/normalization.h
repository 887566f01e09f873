// Checks of the normalization family (Softmax, LayerNorm), shared by
// kernels/cpu/normalization.cc and kernels/cuda/normalization.cu.
#pragma once

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

Status ValidateNormalization(const KernelCall& call);

}  // namespace consensor::kernels
