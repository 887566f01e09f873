// Entry points of the CPU kernel families, one source file per family. Each returns
// InvalidArgument/Unimplemented for a call it cannot handle instead of misbehaving.
// Files named *_avx2.cc are compiled with -mavx2 -mfma and are only called when the
// CPU supports both; the portable code must produce the same bits.
#pragma once

#include "common/status.h"
#include "kernels/op.h"
#include "kernels/thread_pool.h"

namespace consensor::kernels::cpu {

enum class Isa { kPortable, kAvx2 };

struct CpuContext {
  ThreadPool* pool = nullptr;
  Isa isa = Isa::kPortable;
};

// elementwise.cc: unary, binary (numpy broadcasting), where, cast, logical ops.
Status RunElementwise(const KernelCall& call, const CpuContext& ctx);
// reduce.cc: ReduceSum/Mean/Max/Min/Prod, ArgMax, TopK.
Status RunReduce(const KernelCall& call, const CpuContext& ctx);
// matmul.cc: MatMul (f32), MatMulInt8.
Status RunMatMul(const KernelCall& call, const CpuContext& ctx);
// conv.cc: Conv2D.
Status RunConv(const KernelCall& call, const CpuContext& ctx);
// pool.cc: MaxPool2D, AvgPool2D.
Status RunPool(const KernelCall& call, const CpuContext& ctx);
// normalization.cc: Softmax, LayerNorm.
Status RunNormalization(const KernelCall& call, const CpuContext& ctx);
// data_movement.cc: Identity, Reshape, Transpose, Slice, Concat, Gather, Expand, Pad.
Status RunDataMovement(const KernelCall& call, const CpuContext& ctx);

// True when the running CPU has AVX2 and FMA.
bool CpuHasAvx2Fma();

}  // namespace consensor::kernels::cpu
