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
  int multiprocessors = 1;  // for sizing grids; never changes results
};

Status RunElementwise(const KernelCall& call, const LaunchContext& ctx);
Status RunReduce(const KernelCall& call, const LaunchContext& ctx);
Status RunMatMul(const KernelCall& call, const LaunchContext& ctx);
Status RunConv(const KernelCall& call, const LaunchContext& ctx);
Status RunPool(const KernelCall& call, const LaunchContext& ctx);
Status RunNormalization(const KernelCall& call, const LaunchContext& ctx);
Status RunDataMovement(const KernelCall& call, const LaunchContext& ctx);

// Ok, or the error of the last launch (cudaGetLastError / the emulator's check), naming `what`.
Status CheckLaunch(const char* what);

}  // namespace CNSR_CUDA_NS
}  // namespace consensor::kernels
