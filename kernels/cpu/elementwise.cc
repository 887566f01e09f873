// Elementwise kernels: the portable instantiation of kernels/cpu/elementwise_impl.h, run
// over the layout planned by kernels/checks/elementwise.h. elementwise_avx2.cc compiles the
// same loops with AVX2.
#include "kernels/checks/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_impl.h"

namespace consensor::kernels::cpu {

void EwRunChunkPortable(const EwPlan& plan, int64_t begin, int64_t end) { EwRunChunkImpl(plan, begin, end); }

constexpr int64_t kGrain = 16384;

Status RunElementwise(const KernelCall& call, const CpuContext& ctx) {
  RETURN_IF_ERROR(ValidateElementwise(call));
  const TensorView& out = call.out();
  const int64_t n = out.num_elements();
  if (n == 0) return OkStatus();

  EwPlan plan;
  plan.op = call.op;
  plan.num_inputs = call.num_inputs;
  plan.in_dtype = call.op == Op::kWhere ? call.in(1).dtype : call.in(0).dtype;
  plan.out_dtype = out.dtype;
  plan.out = out.data;
  plan.layout = ElementwiseLayout(call);
  for (int i = 0; i < call.num_inputs; ++i) plan.in[i] = call.in(i).data;

  void (*chunk)(const EwPlan&, int64_t, int64_t) = ctx.isa == Isa::kAvx2 ? &EwRunChunkAvx2 : &EwRunChunkPortable;
  if (ctx.pool == nullptr) {
    chunk(plan, 0, n);
  } else {
    ctx.pool->ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { chunk(plan, b, e); });
  }
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
