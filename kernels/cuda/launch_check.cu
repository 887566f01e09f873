// CheckLaunch for both builds of the CUDA sources.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"

#include <string>

namespace consensor::kernels::CNSR_CUDA_NS {

Status CheckLaunch(const char* what) {
#if defined(CNSR_SIMT_EMULATION)
  std::string error = ::consensor::simt::emu::TakeLastError();
  if (error.empty()) return OkStatus();
  return Internal(std::string(what) + ": " + error);
#else
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return OkStatus();
  return Internal(std::string(what) + ": kernel launch failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
#endif
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
