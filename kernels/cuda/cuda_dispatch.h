// Routes a kernel call to its family in the CUDA sources of this build (cuda_device or
// cuda_emu); shared by the GPU backend and the emulated backend.
#pragma once

#include "kernels/checks/half_plan.h"
#include "kernels/cuda/cuda_kernels.h"

namespace consensor::kernels::CNSR_CUDA_NS {

// The CUDA kernels are written for f32, every integer dtype and bool; f16 and bf16 run through
// the f32 kernels (RunThroughF32) or, where an op only copies bits, on their 2-byte elements.
// f64 runs on the CPU backend only: a call that reads or writes it is refused
// (docs/DETERMINISM.md section 2), and a task using it runs with --backend cpu. A kernel that
// has no path for an integer dtype it is given says so in its own status.
inline bool HasCudaDTypes(const KernelCall& call) {
  auto ok = [](DType t) { return IsValidDType(t) && t != DType::kF64; };
  for (int i = 0; i < call.num_inputs; ++i) {
    if (!ok(call.in(i).dtype)) return false;
  }
  for (int i = 0; i < call.num_outputs; ++i) {
    if (!ok(call.out(i).dtype)) return false;
  }
  return true;
}

// A conv2d over a zero-stuffed input (OpParams::input_stuffing) or with its relu
// (OpParams::relu_output), the fused im2col transpose
// (OpParams::im2col_groups), the widening sum (OpParams::sum_widens_i8) and the one-pass
// quantize (a cast with three inputs) and the Resize lowering's two taps in one pass (a gather
// with five inputs), made only in a
// program's fused list, are the CPU backend's:
// refusing them makes the runtime give this backend the canonical list.
inline bool Supports(const KernelCall& call) {
  if (call.op == Op::kConv2D && call.params && !call.params->input_stuffing.empty()) return false;
  if (call.op == Op::kConv2D && call.params && call.params->relu_output) return false;
  if (call.op == Op::kTranspose && call.params && call.params->im2col_groups != 0) return false;
  if (call.op == Op::kReduceSum && call.params && call.params->sum_widens_i8) return false;
  if (call.op == Op::kCast && call.num_inputs == 3) return false;
  if (call.op == Op::kGather && call.num_inputs == 5) return false;
  return FamilyOf(call.op) != OpFamily::kNone && HasCudaDTypes(call);
}

inline FamilyRunner RunnerOf(OpFamily family) {
  switch (family) {
    case OpFamily::kElementwise: return RunElementwise;
    case OpFamily::kReduce: return RunReduce;
    case OpFamily::kMatMul: return RunMatMul;
    case OpFamily::kConv: return RunConv;
    case OpFamily::kPool: return RunPool;
    case OpFamily::kNormalization: return RunNormalization;
    case OpFamily::kDataMovement: return RunDataMovement;
    case OpFamily::kNone: break;
  }
  return nullptr;
}

inline Status Dispatch(const KernelCall& call, const LaunchContext& ctx) {
  if (!HasCudaDTypes(call)) {
    return Unimplemented("the CUDA backend has no f64 kernels (op " + std::string(OpName(call.op)) + ")");
  }
  // The CUDA backends run the unfused program (SupportsEpilogue is false): the runtime never
  // hands them an epilogue, and one that arrives anyway is refused rather than ignored.
  if (call.epilogue != nullptr) return Unimplemented("the CUDA backend runs no fused epilogues");
  const FamilyRunner run = RunnerOf(FamilyOf(call.op));
  if (run == nullptr) return Unimplemented("no CUDA kernel for op " + std::string(OpName(call.op)));
  // f16/bf16 (DETERMINISM.md 1.3, 1.4): the f32 kernel between an exact widening and one rounding.
  if (ComputesThroughF32(call)) return RunThroughF32(call, ctx, run);
  return run(call, ctx);
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
