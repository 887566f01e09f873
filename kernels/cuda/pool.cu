// Placeholder until the CUDA pool family is written.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

Status RunPool(const KernelCall& call, const LaunchContext& ctx) {
  return Unimplemented("CUDA kernel family 'pool' is not implemented yet");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
