// Placeholder until the CUDA data_movement family is written.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS {

Status RunDataMovement(const KernelCall& call, const LaunchContext& ctx) {
  return Unimplemented("CUDA kernel family 'data_movement' is not implemented yet");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
