// A test-only backend that delegates to the CPU reference configuration (portable, one
// thread) but corrupts one op: flips the lowest bit of the first byte of its output (on every
// call or only the first), or fails the call. Used to check that the backend self-test
// catches a single differing bit and names the op.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace consensor::testing {

class FaultyBackend final : public kernels::Backend {
 public:
  enum class Fault { kFlipEveryCall, kFlipFirstCall, kFail };
  FaultyBackend(kernels::Op target, Fault fault) : target_(target), fault_(fault) {
    kernels::CpuBackendOptions o;
    o.isa = "portable";
    auto cpu = kernels::CpuBackend::Create(o);
    if (cpu.ok()) cpu_ = std::move(cpu).value();
  }

  std::string name() const override { return "faulty-cpu"; }
  bool Supports(const kernels::KernelCall& call) const override { return cpu_->Supports(call); }
  StatusOr<std::unique_ptr<kernels::Arena>> AllocateArena(int64_t bytes) override { return cpu_->AllocateArena(bytes); }
  Status Run(const kernels::KernelCall& call) override {
    if (call.op == target_ && fault_ == Fault::kFail) return Internal("injected launch failure");
    RETURN_IF_ERROR(cpu_->Run(call));
    const bool flip = call.op == target_ && call.out().byte_size() > 0 &&
                      (fault_ == Fault::kFlipEveryCall || (fault_ == Fault::kFlipFirstCall && flips_ == 0));
    if (flip) {
      static_cast<uint8_t*>(call.out().data)[0] ^= 1;
      ++flips_;
    }
    return OkStatus();
  }
  int flips() const { return flips_; }

 private:
  std::unique_ptr<kernels::CpuBackend> cpu_;
  kernels::Op target_;
  Fault fault_;
  int flips_ = 0;
};

}  // namespace consensor::testing
