// The CUDA kernels of kernels/cuda/*.cu compiled for the host and run under an emulation
// of the CUDA execution model (kernels/cuda/simt.h). It exists so that machines without a
// GPU (CI) execute and check the exact kernel code that runs on GPUs. Slow; small shapes.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace consensor::kernels {

std::unique_ptr<Backend> CreateEmulatedCudaBackend();

}  // namespace consensor::kernels
