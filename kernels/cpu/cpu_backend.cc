#include "kernels/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>

namespace consensor::kernels {

namespace {

class HostArena final : public Arena {
 public:
  explicit HostArena(int64_t size) : size_(size) {
    size_t alloc = static_cast<size_t>((size + 63) / 64 * 64);
    base_ = static_cast<uint8_t*>(std::aligned_alloc(64, alloc == 0 ? 64 : alloc));
  }
  ~HostArena() override { std::free(base_); }
  bool valid() const { return base_ != nullptr; }
  uint8_t* base() override { return base_; }
  int64_t size() const override { return size_; }
  Status CopyIn(int64_t offset, const void* src, int64_t bytes) override {
    if (offset < 0 || bytes < 0 || offset + bytes > size_) return OutOfRange("arena copy-in out of range");
    if (bytes) std::memcpy(base_ + offset, src, static_cast<size_t>(bytes));
    return OkStatus();
  }
  Status CopyOut(int64_t offset, void* dst, int64_t bytes) const override {
    if (offset < 0 || bytes < 0 || offset + bytes > size_) return OutOfRange("arena copy-out out of range");
    if (bytes) std::memcpy(dst, base_ + offset, static_cast<size_t>(bytes));
    return OkStatus();
  }

 private:
  uint8_t* base_;
  int64_t size_;
};

enum class Family { kElementwise, kReduce, kMatMul, kConv, kPool, kNormalization, kDataMovement, kNone };

Family FamilyOf(Op op) {
  switch (op) {
    case Op::kReduceSum: case Op::kReduceMean: case Op::kReduceMax: case Op::kReduceMin: case Op::kArgMax:
      return Family::kReduce;
    case Op::kMatMul: case Op::kMatMulInt8:
      return Family::kMatMul;
    case Op::kConv2D:
      return Family::kConv;
    case Op::kMaxPool2D: case Op::kAvgPool2D:
      return Family::kPool;
    case Op::kSoftmax: case Op::kLayerNorm:
      return Family::kNormalization;
    case Op::kIdentity: case Op::kReshape: case Op::kTranspose: case Op::kSlice: case Op::kConcat:
    case Op::kGather: case Op::kExpand: case Op::kPad:
      return Family::kDataMovement;
    case Op::kNumOps:
      return Family::kNone;
    default:
      return Family::kElementwise;
  }
}

}  // namespace

CpuBackend::CpuBackend(int num_threads, cpu::Isa isa) : pool_(std::make_unique<ThreadPool>(num_threads)) {
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
  return std::unique_ptr<CpuBackend>(new CpuBackend(options.num_threads, isa));
}

std::string CpuBackend::name() const { return ctx_.isa == cpu::Isa::kAvx2 ? "cpu-avx2" : "cpu-portable"; }

bool CpuBackend::Supports(const KernelCall& call) const { return FamilyOf(call.op) != Family::kNone; }

StatusOr<std::unique_ptr<Arena>> CpuBackend::AllocateArena(int64_t bytes) {
  auto arena = std::make_unique<HostArena>(bytes);
  if (!arena->valid()) return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  return std::unique_ptr<Arena>(std::move(arena));
}

Status CpuBackend::Run(const KernelCall& call) {
  // The caller's thread computes too; pin its float environment as the pool's threads are.
  SetDeterministicFloatEnvironment();
  switch (FamilyOf(call.op)) {
    case Family::kElementwise: return cpu::RunElementwise(call, ctx_);
    case Family::kReduce: return cpu::RunReduce(call, ctx_);
    case Family::kMatMul: return cpu::RunMatMul(call, ctx_);
    case Family::kConv: return cpu::RunConv(call, ctx_);
    case Family::kPool: return cpu::RunPool(call, ctx_);
    case Family::kNormalization: return cpu::RunNormalization(call, ctx_);
    case Family::kDataMovement: return cpu::RunDataMovement(call, ctx_);
    case Family::kNone: break;
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
