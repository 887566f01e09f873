// The CPU backend's f16/bf16 rule (docs/DETERMINISM.md 1.3, 1.4): an op that computes on
// 16-bit floats widens each such operand to f32 exactly, runs the op's f32 kernel, and rounds
// each 16-bit output once (round to nearest even). Ops that copy bits (data movement,
// identity, where, a cast to the same dtype) run on the 2-byte elements directly instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op.h"

namespace consensor::kernels::cpu {

using FamilyRunner = Status (*)(const KernelCall& call, const CpuContext& ctx);

// Runs `call` (one for which ComputesThroughF32 holds, kernels/checks/half_plan.h) through `run`
// (the family's f32 kernel) with every f16/bf16 input widened to f32 and every f16/bf16 output
// computed in f32 and rounded once, a block of rows at a time where PlanHalfRowSplit splits the
// call (about 16K values per operand), so the f32 copies are bounded; operands read whole by
// every row (weights, broadcast operands) and the calls that do not split are widened whole.
// Elementwise blocks run on several threads at once, each with its own block.
Status RunThroughF32(const KernelCall& call, const CpuContext& ctx, FamilyRunner run);

// Elementwise conversions of n values; exact per element, so any split over threads is fine.
// With ctx.isa kAvx2 on a CPU with F16C they run eight values at a time (half_avx2.cc), with
// the same bits as kernels/half.h.
void WidenToF32(DType from, const void* src, float* dst, int64_t n, const CpuContext& ctx);
void NarrowFromF32(DType to, const float* src, void* dst, int64_t n, const CpuContext& ctx);

// The f32 copy of one 16-bit operand or output, in memory this thread keeps between calls
// (scratch_cache.h, Kind::kWidened), 64-byte aligned and not zero-filled: with a fresh
// zero-filled vector per call, IS-Net f16's largest convolution (8 MiB of widened input, 4 MiB
// of f32 output) took a third more of the model's time (docs/PERFORMANCE.md, "IS-Net f16: the
// f32 copies of 16-bit operands in kept memory"). The user writes every element it reads.
class KeptF32Copy {
 public:
  KeptF32Copy() = default;
  ~KeptF32Copy();
  KeptF32Copy(const KeptF32Copy&) = delete;
  KeptF32Copy& operator=(const KeptF32Copy&) = delete;
  // Room for at least n floats, keeping the block when it is large enough; nullptr if the
  // allocation fails.
  float* Reserve(int64_t n);
  float* data() const { return static_cast<float*>(block_); }

 private:
  void* block_ = nullptr;
  size_t size_ = 0;
};

// True when the running CPU has F16C and AVX2.
bool CpuHasF16c();

// half_avx2.cc: the conversions of kernels/half.h over n values, vectorized.
void F16ToF32Avx2(const uint16_t* src, float* dst, int64_t n);
void F32ToF16Avx2(const float* src, uint16_t* dst, int64_t n);
void BF16ToF32Avx2(const uint16_t* src, float* dst, int64_t n);
void F32ToBF16Avx2(const float* src, uint16_t* dst, int64_t n);

}  // namespace consensor::kernels::cpu
