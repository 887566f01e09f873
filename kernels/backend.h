// The backend interface (in the spirit of ggml's backend table): a backend says which
// calls it supports and runs them on memory it owns. The executor's runtime is written
// against this interface only, so CPU and CUDA backends are interchangeable and must
// produce identical bits for every supported call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

// One contiguous memory region owned by a backend (host memory for the CPU backend,
// device memory for CUDA). The executor's memory planner assigns offsets inside it.
class Arena {
 public:
  virtual ~Arena() = default;
  virtual uint8_t* base() = 0;  // pointer usable in TensorView::data for this backend
  virtual int64_t size() const = 0;
  virtual Status CopyIn(int64_t offset, const void* src, int64_t bytes) = 0;
  virtual Status CopyOut(int64_t offset, void* dst, int64_t bytes) const = 0;
  // The arena's bytes as host memory, readable once the backend is synchronized; null when
  // they live elsewhere (a GPU). Lets the runtime hash values where they are instead of
  // copying each one out.
  virtual const uint8_t* host_data() const { return nullptr; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Stable name, e.g. "cpu-avx2" or "cpu-portable"; reported by the CLI.
  virtual std::string name() const = 0;
  // One line for logs and node info: the name, plus the hardware where there is some to name
  // (the GPU's model, compute capability and memory).
  virtual std::string description() const { return name(); }
  virtual bool Supports(const KernelCall& call) const = 0;
  // Whether Run accepts `call` with its fused epilogue (call.epilogue set; docs/DETERMINISM.md
  // 3.1). A backend that says no is given the unfused instructions instead, with the same bits.
  virtual bool SupportsEpilogue(const KernelCall& call) const {
    (void)call;
    return false;
  }
  virtual StatusOr<std::unique_ptr<Arena>> AllocateArena(int64_t bytes) = 0;
  // For a call whose input `input` is a constant of the program (its view already holds the
  // value), the backend's prepared copy of it to pass back as KernelCall::prepared on every run,
  // or null when the backend has none for this call (the default). The caller keeps it as long
  // as it runs the call.
  virtual StatusOr<std::unique_ptr<PreparedOperand>> PrepareConstant(const KernelCall& call, int input) {
    (void)call;
    (void)input;
    return std::unique_ptr<PreparedOperand>();
  }
  // Runs one call whose views point into an arena of this backend.
  virtual Status Run(const KernelCall& call) = 0;
  // Waits for all submitted work (no-op for synchronous backends).
  virtual Status Synchronize() { return OkStatus(); }
};

}  // namespace consensor::kernels
