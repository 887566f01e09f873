// The reduce family: ReduceSum/Mean/Max/Min/Prod, ArgMax and TopK (docs/DETERMINISM.md 4.1, 4.3).
// This file validates calls (kernels/checks/reduce.h) and runs the portable build of
// reduce_impl.h; reduce_avx2.cc holds the AVX2 build of the same source. Both give
// identical bits.
#include "kernels/checks/reduce.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_impl.h"

namespace consensor::kernels::cpu {

Status RunReduce(const KernelCall& call, const CpuContext& ctx) {
  RETURN_IF_ERROR(ValidateReduce(call));
  if (ctx.pool == nullptr) return InvalidArgument("reduce: missing thread pool");
  if (ctx.isa == Isa::kAvx2) return RunReduceAvx2(call, ctx);
  return RunReduceImpl(call, ctx);
}

}  // namespace consensor::kernels::cpu
