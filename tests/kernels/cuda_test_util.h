// Shared by the CUDA kernel tests: the backends they compare (the CPU reference, the CUDA
// kernels under emulation, and a real GPU when one is usable) and running one kernel call
// with every tensor placed in an arena of the backend under test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emulated_backend.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels::test_util {

struct CudaTestBackends {
  std::unique_ptr<CpuBackend> cpu;  // portable, one thread: the reference
  std::unique_ptr<Backend> emu;
  std::unique_ptr<Backend> gpu;  // null without a usable GPU
};

inline CudaTestBackends& GetBackends() {
  static CudaTestBackends* b = [] {
    auto* r = new CudaTestBackends;
    auto cpu = CpuBackend::Create({.num_threads = 1, .isa = "portable"});
    EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
    if (cpu.ok()) r->cpu = std::move(cpu).value();
    r->emu = CreateEmulatedCudaBackend();
    auto gpu = CreateCudaBackend({});
    if (gpu.ok()) r->gpu = std::move(gpu).value();
    return r;
  }();
  return *b;
}

// Runs one call on `be` with every tensor in an arena of that backend: inputs copied in, the
// output pre-filled with its current bytes (kPoison for a fresh HostTensor) and copied back
// out. Tensors start at 256-byte aligned offsets plus the given number of elements
// (`input_misalign[i]`, `out_misalign`; missing entries are 0), to exercise unaligned paths.
inline Status RunInArena(Backend& be, Op op, const OpParams& params, const std::vector<const HostTensor*>& inputs,
                         HostTensor& out, const std::vector<int>& input_misalign = {}, int out_misalign = 0) {
  auto align = [](int64_t v) { return (v + 255) / 256 * 256; };
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < input_misalign.size()) total += input_misalign[i] * DTypeSize(inputs[i]->dtype);
    offsets.push_back(total);
    total = align(total + static_cast<int64_t>(inputs[i]->bytes.size()));
  }
  const int64_t out_offset = total + out_misalign * DTypeSize(out.dtype);
  total = align(out_offset + static_cast<int64_t>(out.bytes.size())) + 256;
  ASSIGN_OR_RETURN(std::unique_ptr<Arena> arena, be.AllocateArena(total));
  std::vector<TensorView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const HostTensor* t = inputs[i];
    if (!t->bytes.empty())
      RETURN_IF_ERROR(arena->CopyIn(offsets[i], t->bytes.data(), static_cast<int64_t>(t->bytes.size())));
    views.push_back(MakeView(t->dtype, t->shape, arena->base() + offsets[i]));
  }
  if (!out.bytes.empty())
    RETURN_IF_ERROR(arena->CopyIn(out_offset, out.bytes.data(), static_cast<int64_t>(out.bytes.size())));
  TensorView y = MakeView(out.dtype, out.shape, arena->base() + out_offset);
  KernelCall call = MakeCall(op, params, views.data(), static_cast<int>(views.size()), &y);
  RETURN_IF_ERROR(be.Run(call));
  RETURN_IF_ERROR(be.Synchronize());
  if (!out.bytes.empty()) return arena->CopyOut(out_offset, out.bytes.data(), static_cast<int64_t>(out.bytes.size()));
  return OkStatus();
}

// Index of the first element whose bytes differ, or -1 when the tensors are identical.
inline int64_t FirstDifferentElement(const HostTensor& a, const HostTensor& b) {
  const int64_t es = DTypeSize(a.dtype);
  const size_t n = std::min(a.bytes.size(), b.bytes.size());
  for (size_t i = 0; i < n; ++i) {
    if (a.bytes[i] != b.bytes[i]) return static_cast<int64_t>(i) / es;
  }
  return a.bytes.size() == b.bytes.size() ? -1 : static_cast<int64_t>(n) / es;
}

// Pointers for RunInArena.
inline std::vector<const HostTensor*> Ptrs(const std::vector<HostTensor>& tensors) {
  std::vector<const HostTensor*> out;
  for (const HostTensor& t : tensors) out.push_back(&t);
  return out;
}

}  // namespace consensor::kernels::test_util
