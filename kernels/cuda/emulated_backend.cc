// Compiled with CNSR_SIMT_EMULATION, like the emulated family sources.
#include "kernels/cuda/emulated_backend.h"

#include <vector>

#include "kernels/cuda/cuda_dispatch.h"
#include "kernels/host_arena.h"
#include "kernels/thread_pool.h"

namespace consensor::kernels {

namespace {

class HostScratch final : public DeviceScratch {
 public:
  StatusOr<void*> Get(int64_t bytes) override {
    if (bytes < 0) return InvalidArgument("negative scratch size");
    if (static_cast<size_t>(bytes) > buffer_.size()) buffer_.resize(static_cast<size_t>(bytes));
    return static_cast<void*>(buffer_.data());
  }

 private:
  std::vector<uint8_t> buffer_;
};

class EmulatedCudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda-emu"; }
  std::string description() const override {
    return "cuda-emu (the CUDA kernels under the SIMT emulation, on the CPU)";
  }
  bool Supports(const KernelCall& call) const override { return cuda_emu::Supports(call); }
  StatusOr<std::unique_ptr<Arena>> AllocateArena(int64_t bytes) override { return AllocateHostArena(bytes); }
  Status Run(const KernelCall& call) override {
    SetDeterministicFloatEnvironment();
    cuda_emu::LaunchContext ctx;
    ctx.scratch = &scratch_;
    ctx.widening = &widening_;
    return cuda_emu::Dispatch(call, ctx);
  }

 private:
  HostScratch scratch_;
  HostScratch widening_;  // f32 copies of f16/bf16 operands
};

}  // namespace

std::unique_ptr<Backend> CreateEmulatedCudaBackend() { return std::make_unique<EmulatedCudaBackend>(); }

}  // namespace consensor::kernels
