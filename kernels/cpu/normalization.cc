// The normalization family: Softmax and LayerNorm (docs/DETERMINISM.md 4.5). This file
// validates calls (kernels/checks/normalization.h) and runs the portable build of
// normalization_impl.h; normalization_avx2.cc holds the AVX2 build of the same source.
// Both give identical bits.
#include "kernels/checks/normalization.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/normalization_impl.h"

namespace consensor::kernels::cpu {

Status RunNormalization(const KernelCall& call, const CpuContext& ctx) {
  RETURN_IF_ERROR(ValidateNormalization(call));
  if (ctx.pool == nullptr) return InvalidArgument("normalization: missing thread pool");
  if (ctx.isa == Isa::kAvx2) return RunNormalizationAvx2(call, ctx);
  return RunNormalizationImpl(call, ctx);
}

}  // namespace consensor::kernels::cpu
