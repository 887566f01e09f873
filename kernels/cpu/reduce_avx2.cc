// AVX2 + FMA build of the reduce family (compiled with -mavx2 -mfma; called only after the
// runtime CPU check). Same source as the portable build, identical bits.
#include "kernels/cpu/reduce_impl.h"

namespace consensor::kernels::cpu {

Status RunReduceAvx2(const KernelCall& call, const CpuContext& ctx) { return RunReduceImpl(call, ctx); }

}  // namespace consensor::kernels::cpu
