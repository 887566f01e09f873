// Creates a backend by name, for the CLI and the node's config.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace consensor::kernels {

struct BackendOptions {
  // "cpu", "cuda" (a GPU; FAILED_PRECONDITION without one) or "cuda-emu" (the CUDA kernels
  // under the CPU emulation of the CUDA execution model; slow, for testing).
  std::string name = "cpu";
  int threads = 1;           // cpu
  std::string isa = "auto";  // cpu: auto, avx2, portable
  int device = 0;            // cuda
};

StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

}  // namespace consensor::kernels
