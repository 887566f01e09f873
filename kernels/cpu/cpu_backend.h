// The CPU backend: host memory arenas and the kernel families of kernels/cpu/.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/thread_pool.h"

namespace consensor::kernels {

struct CpuBackendOptions {
  int num_threads = 1;
  // "auto" picks AVX2 when the CPU has it; "avx2" fails if it does not; "portable" forces
  // the fallback path. Both paths give identical bits.
  std::string isa = "auto";
  // The split rule's minimum work per chunk (thread_pool.h). Tests lower it so that small shapes
  // still run split across threads; a node always uses the default.
  int64_t min_chunk_work = kMinChunkWork;
};

class CpuBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options);

  std::string name() const override;
  bool Supports(const KernelCall& call) const override;
  // Elementwise ops and conv2d take epilogues.
  bool SupportsEpilogue(const KernelCall& call) const override;
  StatusOr<std::unique_ptr<Arena>> AllocateArena(int64_t bytes) override;
  // conv2d weights on the GEMM paths, packed once into the AVX2 GEMM's panels (conv.cc).
  StatusOr<std::unique_ptr<PreparedOperand>> PrepareConstant(const KernelCall& call, int input) override;
  Status Run(const KernelCall& call) override;
  int num_threads() const { return pool_->num_threads(); }

 private:
  CpuBackend(int num_threads, int64_t min_chunk_work, cpu::Isa isa);
  std::unique_ptr<ThreadPool> pool_;
  cpu::CpuContext ctx_;
};

}  // namespace consensor::kernels
