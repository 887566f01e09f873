// Placeholder until the CUDA normalization family is written.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

Status RunNormalization(const KernelCall& call, const LaunchContext& ctx) {
  return Unimplemented("CUDA kernel family 'normalization' is not implemented yet");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
