#include "kernels/cpu/cpu_backend.h"

#include "kernels/checks/elementwise.h"
#include "kernels/checks/half_plan.h"
#include "kernels/cpu/half_operands.h"
#include "kernels/host_arena.h"

namespace consensor::kernels {
namespace {

// The ops this backend runs with a fused epilogue (DETERMINISM.md 3.1): elementwise heads, conv2d
// and gather (f32 data; the epilogue's check requires an f32 output).
bool TakesEpilogue(Op op) {
  const OpFamily family = FamilyOf(op);
  return family == OpFamily::kElementwise || family == OpFamily::kConv || op == Op::kGather;
}

}  // namespace

CpuBackend::CpuBackend(int num_threads, int64_t min_chunk_work, cpu::Isa isa)
    : pool_(std::make_unique<ThreadPool>(num_threads, min_chunk_work)) {
  ctx_.pool = pool_.get();
  ctx_.isa = isa;
}

StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuBackendOptions& options) {
  if (options.num_threads < 1 || options.num_threads > 256) {
    return InvalidArgument("thread count must be between 1 and 256, got " + std::to_string(options.num_threads));
  }
  cpu::Isa isa;
  if (options.isa == "auto") {
    isa = cpu::CpuHasAvx2Fma() ? cpu::Isa::kAvx2 : cpu::Isa::kPortable;
  } else if (options.isa == "avx2") {
    if (!cpu::CpuHasAvx2Fma()) return FailedPrecondition("this CPU lacks AVX2/FMA; use --isa portable");
    isa = cpu::Isa::kAvx2;
  } else if (options.isa == "portable") {
    isa = cpu::Isa::kPortable;
  } else {
    return InvalidArgument("unknown ISA '" + options.isa + "' (expected auto, avx2 or portable)");
  }
  return std::unique_ptr<CpuBackend>(new CpuBackend(options.num_threads, options.min_chunk_work, isa));
}

std::string CpuBackend::name() const { return ctx_.isa == cpu::Isa::kAvx2 ? "cpu-avx2" : "cpu-portable"; }

bool CpuBackend::Supports(const KernelCall& call) const { return FamilyOf(call.op) != OpFamily::kNone; }

bool CpuBackend::SupportsEpilogue(const KernelCall& call) const {
  if (!TakesEpilogue(call.op)) return false;
  return call.epilogue != nullptr && ValidateEpilogue(call).ok();
}

StatusOr<std::unique_ptr<Arena>> CpuBackend::AllocateArena(int64_t bytes) { return AllocateHostArena(bytes); }

StatusOr<std::unique_ptr<PreparedOperand>> CpuBackend::PrepareConstant(const KernelCall& call, int input) {
  if (call.op == Op::kConv2D && input == 1) return cpu::PrepareConvWeights(call, ctx_);
  if ((call.op == Op::kMatMul || call.op == Op::kMatMulInt8) && input == 1) return cpu::PrepareMatMulB(call, ctx_);
  return std::unique_ptr<PreparedOperand>();
}

Status CpuBackend::Run(const KernelCall& call) {
  // The caller's thread computes too; pin its float environment as the pool's threads are.
  SetDeterministicFloatEnvironment();
  if (call.epilogue != nullptr && !TakesEpilogue(call.op)) {
    return Unimplemented("CPU backend: " + std::string(OpName(call.op)) + " takes no fused epilogue");
  }
  if (ComputesThroughF32(call)) {
    // f16/bf16 (DETERMINISM.md 1.3, 1.4): the f32 kernel between an exact widening and one rounding.
    cpu::FamilyRunner run = nullptr;
    switch (FamilyOf(call.op)) {
      case OpFamily::kElementwise: run = cpu::RunElementwise; break;
      case OpFamily::kReduce: run = cpu::RunReduce; break;
      case OpFamily::kMatMul: run = cpu::RunMatMul; break;
      case OpFamily::kConv: run = cpu::RunConv; break;
      case OpFamily::kPool: run = cpu::RunPool; break;
      case OpFamily::kNormalization: run = cpu::RunNormalization; break;
      case OpFamily::kDataMovement:
      case OpFamily::kNone: break;
    }
    if (run == nullptr)
      return Unimplemented("CPU backend has no f16/bf16 kernel for op " + std::string(OpName(call.op)));
    bool ran = false;
    if (call.op == Op::kConv2D) RETURN_IF_ERROR(cpu::RunConvF16Shifted(call, ctx_, &ran));
    if (call.op == Op::kRelu) RETURN_IF_ERROR(cpu::RunReluHalf(call, ctx_, &ran));
    if (call.op == Op::kMaxPool2D) RETURN_IF_ERROR(cpu::RunMaxPoolHalf(call, ctx_, &ran));
    if (ran) return OkStatus();
    RETURN_IF_ERROR(cpu::RunThroughF32(call, ctx_, run));
    if (call.op == Op::kConv2D && call.params != nullptr && call.params->relu_output) {
      // A conv with its relu (DETERMINISM.md 3.1) off the kernel that applies it: the relu on the
      // conv's 16-bit output, in place, as the unfused relu computes it.
      TensorView y = call.out();
      const OpParams none;
      KernelCall relu{Op::kRelu, &none, &y, 1, &y, 1};
      RETURN_IF_ERROR(cpu::RunReluHalf(relu, ctx_, &ran));
      if (!ran) return cpu::RunThroughF32(relu, ctx_, cpu::RunElementwise);
    }
    return OkStatus();
  }
  if (call.op == Op::kConv2D && call.params != nullptr && call.params->relu_output) {
    return InvalidArgument("conv2d: relu_output is for f16/bf16 calls only");
  }
  switch (FamilyOf(call.op)) {
    case OpFamily::kElementwise: return cpu::RunElementwise(call, ctx_);
    case OpFamily::kReduce: return cpu::RunReduce(call, ctx_);
    case OpFamily::kMatMul: return cpu::RunMatMul(call, ctx_);
    case OpFamily::kConv: return cpu::RunConv(call, ctx_);
    case OpFamily::kPool: return cpu::RunPool(call, ctx_);
    case OpFamily::kNormalization: return cpu::RunNormalization(call, ctx_);
    case OpFamily::kDataMovement: return cpu::RunDataMovement(call, ctx_);
    case OpFamily::kNone: break;
  }
  return Unimplemented("CPU backend has no kernel for op " + std::string(OpName(call.op)));
}

namespace cpu {
bool CpuHasAvx2Fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
}  // namespace cpu

}  // namespace consensor::kernels
