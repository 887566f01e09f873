#include "kernels/backend_factory.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emulated_backend.h"

namespace consensor::kernels {

StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name == "cpu") {
    CpuBackendOptions o;
    o.num_threads = options.threads;
    o.isa = options.isa;
    ASSIGN_OR_RETURN(auto cpu, CpuBackend::Create(o));
    return std::unique_ptr<Backend>(std::move(cpu));
  }
  if (options.name == "cuda") {
    CudaBackendOptions o;
    o.device = options.device;
    return CreateCudaBackend(o);
  }
  if (options.name == "cuda-emu") return CreateEmulatedCudaBackend();
  return InvalidArgument("unknown backend '" + options.name + "' (expected cpu, cuda or cuda-emu)");
}

}  // namespace consensor::kernels
