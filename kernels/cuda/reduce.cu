// Placeholder until the CUDA reduce family is written.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

Status RunReduce(const KernelCall& call, const LaunchContext& ctx) {
  return Unimplemented("CUDA kernel family 'reduce' is not implemented yet");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
