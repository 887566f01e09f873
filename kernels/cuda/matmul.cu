// Placeholder until the CUDA matmul family is written.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

Status RunMatMul(const KernelCall& call, const LaunchContext& ctx) {
  return Unimplemented("CUDA kernel family 'matmul' is not implemented yet");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
