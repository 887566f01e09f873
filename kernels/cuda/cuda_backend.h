// The CUDA backend: one device arena per loaded program (a single cudaMalloc sized by the
// memory planner), pinned host staging for transfers, one stream per backend.
// Available only in builds with the CUDA toolkit (CNSR_HAVE_CUDA).
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace consensor::kernels {

struct CudaBackendOptions {
  int device = 0;
};

// FAILED_PRECONDITION when the build has no CUDA, there is no usable GPU or driver.
StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

}  // namespace consensor::kernels
