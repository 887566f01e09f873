// Shared by the CUDA kernel tests: the backends they compare (the CPU reference, the CUDA
// kernels under emulation, and a real GPU when one is usable) and running one kernel call
// with every tensor placed in an arena of the backend under test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
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

// How CompareCudaWithCpu places tensors and what it demands.
struct CudaCompareOptions {
  std::vector<int> input_misalign;  // elements, per input (see RunInArena)
  int out_misalign = 0;
  bool cpu_must_succeed = true;  // false: a refused call is fine when every CUDA backend refuses it alike
  bool same_message = false;     // a refusal's message must match too, not only its code
};

// Runs one call on the CPU reference and on every CUDA backend present (the emulator, and the
// GPU when there is one). Fails the test where a CUDA backend's status code differs from the
// CPU's, or where both succeed and a byte differs. `ref` comes in with the output's dtype and
// shape and leaves with the CPU's bytes. Returns the CPU's status.
inline Status CompareCudaWithCpu(const std::string& label, Op op, const OpParams& params,
                                 const std::vector<const HostTensor*>& inputs, HostTensor& ref,
                                 const CudaCompareOptions& options = {}) {
  CudaTestBackends& b = GetBackends();
  if (!b.cpu || !b.emu) {
    ADD_FAILURE() << label << ": the CPU or the emulated CUDA backend is missing";
    return Internal("backends missing");
  }
  const Status cs = RunInArena(*b.cpu, op, params, inputs, ref, options.input_misalign, options.out_misalign);
  if (options.cpu_must_succeed) {
    EXPECT_TRUE(cs.ok()) << label << " on the CPU: " << cs.ToString();
  }
  for (Backend* be : {b.emu.get(), b.gpu.get()}) {
    if (be == nullptr) continue;
    HostTensor got(ref.dtype, ref.shape);
    const Status s = RunInArena(*be, op, params, inputs, got, options.input_misalign, options.out_misalign);
    EXPECT_EQ(cs.code(), s.code()) << label << " on " << be->name() << ": cpu " << cs.ToString() << " vs "
                                   << s.ToString();
    if (options.same_message) {
      EXPECT_EQ(cs.message(), s.message()) << label << " on " << be->name();
    }
    if (cs.ok() && s.ok() && ref.bytes != got.bytes) {
      ADD_FAILURE() << label << " on " << be->name() << ": differs from the CPU backend, first at element "
                    << FirstDifferentElement(ref, got) << " of " << ref.numel();
    }
  }
  return cs;
}

// Pointers for RunInArena.
inline std::vector<const HostTensor*> Ptrs(const std::vector<HostTensor>& tensors) {
  std::vector<const HostTensor*> out;
  for (const HostTensor& t : tensors) out.push_back(&t);
  return out;
}

}  // namespace consensor::kernels::test_util
