// AVX2 + FMA build of the normalization family (compiled with -mavx2 -mfma; called only
// after the runtime CPU check). Same source as the portable build, identical bits.
#include "kernels/cpu/normalization_impl.h"

namespace consensor::kernels::cpu {

Status RunNormalizationAvx2(const KernelCall& call, const CpuContext& ctx) { return RunNormalizationImpl(call, ctx); }

}  // namespace consensor::kernels::cpu
