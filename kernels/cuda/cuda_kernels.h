// Entry points of the CUDA kernel families, one .cu file per family (the same split as
// kernels/cpu/). Declared in CNSR_CUDA_NS: cuda_device for the nvcc build, cuda_emu for
// the emulated build of the same sources (kernels/cuda/simt.h).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/cuda_ns.h"
#include "kernels/op.h"

namespace consensor::kernels {

// Temporary device memory for one kernel call (e.g. reduction partials, im2col tiles).
// The buffer stays valid until the next call on the same backend.
class DeviceScratch {
 public:
  virtual ~DeviceScratch() = default;
  virtual StatusOr<void*> Get(int64_t bytes) = 0;
};

namespace CNSR_CUDA_NS {

struct LaunchContext {
  void* stream = nullptr;  // cudaStream_t; unused by the emulation
  DeviceScratch* scratch = nullptr;
  // The f32 copies of a call's f16/bf16 operands (RunThroughF32), held while the f32 kernel
  // runs and uses `scratch` for its own needs.
  DeviceScratch* widening = nullptr;
  int multiprocessors = 1;  // for sizing grids; never changes results
};

Status RunElementwise(const KernelCall& call, const LaunchContext& ctx);
Status RunReduce(const KernelCall& call, const LaunchContext& ctx);
Status RunMatMul(const KernelCall& call, const LaunchContext& ctx);
Status RunConv(const KernelCall& call, const LaunchContext& ctx);
Status RunPool(const KernelCall& call, const LaunchContext& ctx);
Status RunNormalization(const KernelCall& call, const LaunchContext& ctx);
Status RunDataMovement(const KernelCall& call, const LaunchContext& ctx);

// f16/bf16 (docs/DETERMINISM.md 1.3, 1.4): runs `call`, one for which ComputesThroughF32 holds
// (kernels/checks/half_plan.h), through the family's f32 kernel `run`, between an exact widening
// of each 16-bit input and one rounding of each 16-bit output, a block of rows at a time where
// PlanHalfRowSplit splits the call (half_operands.cu).
using FamilyRunner = Status (*)(const KernelCall& call, const LaunchContext& ctx);
Status RunThroughF32(const KernelCall& call, const LaunchContext& ctx, FamilyRunner run);

// Ok, or the error of the last launch (cudaGetLastError / the emulator's check), naming `what`.
Status CheckLaunch(const char* what);

}  // namespace CNSR_CUDA_NS
}  // namespace consensor::kernels
