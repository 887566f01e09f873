// An Arena in host memory (CPU backend, emulated CUDA backend).
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace consensor::kernels {

// Fails with RESOURCE_EXHAUSTED when the memory cannot be had.
StatusOr<std::unique_ptr<Arena>> AllocateHostArena(int64_t bytes);

}  // namespace consensor::kernels
