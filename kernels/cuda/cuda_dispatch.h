// Routes a kernel call to its family in the CUDA sources of this build (cuda_device or
// cuda_emu); shared by the GPU backend and the emulated backend.
#pragma once

#include "kernels/cuda/cuda_kernels.h"

namespace consensor::kernels::CNSR_CUDA_NS {

inline Status Dispatch(const KernelCall& call, const LaunchContext& ctx) {
  // The CUDA backends run the unfused program (SupportsEpilogue is false): the runtime never
  // hands them an epilogue, and one that arrives anyway is refused rather than ignored.
  if (call.epilogue != nullptr) return Unimplemented("the CUDA backend runs no fused epilogues");
  switch (FamilyOf(call.op)) {
    case OpFamily::kElementwise: return RunElementwise(call, ctx);
    case OpFamily::kReduce: return RunReduce(call, ctx);
    case OpFamily::kMatMul: return RunMatMul(call, ctx);
    case OpFamily::kConv: return RunConv(call, ctx);
    case OpFamily::kPool: return RunPool(call, ctx);
    case OpFamily::kNormalization: return RunNormalization(call, ctx);
    case OpFamily::kDataMovement: return RunDataMovement(call, ctx);
    case OpFamily::kNone: break;
  }
  return Unimplemented("no CUDA kernel for op " + std::string(OpName(call.op)));
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
