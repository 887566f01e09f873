// Placeholder until the CUDA conv family is written.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

Status RunConv(const KernelCall& call, const LaunchContext& ctx) {
  return Unimplemented("CUDA kernel family 'conv' is not implemented yet");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
