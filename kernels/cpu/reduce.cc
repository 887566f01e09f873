// The reduce family: ReduceSum/Mean/Max/Min and ArgMax (docs/DETERMINISM.md 4.1, 4.3).
// This file validates calls and runs the portable build of reduce_impl.h; reduce_avx2.cc
// holds the AVX2 build of the same source. Both give identical bits.
#include <string>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_impl.h"

namespace consensor::kernels::cpu {

namespace {

Status ValidateReduce(const KernelCall& call) {
  const std::string name(OpName(call.op));
  if (call.params == nullptr) return InvalidArgument(name + ": missing parameters");
  if (call.num_inputs != 1 || call.num_outputs != 1) return InvalidArgument(name + ": expects one input and one output");
  const TensorView& x = call.in(0);
  const TensorView& y = call.out(0);
  const OpParams& p = *call.params;
  if (x.rank < 0 || x.rank > kMaxRank || y.rank < 0 || y.rank > kMaxRank) return InvalidArgument(name + ": bad rank");
  for (int i = 0; i < x.rank; ++i)
    if (x.dims[i] < 0) return InvalidArgument(name + ": negative dimension");
  const bool numeric = x.dtype == DType::kF32 || x.dtype == DType::kI32 || x.dtype == DType::kI8 || x.dtype == DType::kI64;

  int64_t expect_out = 1;
  if (call.op == Op::kArgMax) {
    if (!numeric) return InvalidArgument(name + ": input must be f32, i32, i8 or i64");
    if (y.dtype != DType::kI64) return InvalidArgument(name + ": output must be i64");
    if (p.axis < 0 || p.axis >= x.rank) return InvalidArgument(name + ": axis out of range");
    if (x.dims[p.axis] == 0) return InvalidArgument(name + ": empty reduction axis");
    for (int i = 0; i < x.rank; ++i)
      if (i != p.axis) expect_out *= x.dims[i];
  } else {
    if (call.op == Op::kReduceMean) {
      if (x.dtype != DType::kF32) return InvalidArgument(name + ": input must be f32");
    } else if (call.op == Op::kReduceSum || call.op == Op::kReduceMax || call.op == Op::kReduceMin) {
      if (!numeric) return InvalidArgument(name + ": input must be f32, i32, i8 or i64");
    } else {
      return InvalidArgument(name + ": not a reduction");
    }
    if (y.dtype != x.dtype) return InvalidArgument(name + ": output dtype must match the input");
    int64_t prev = -1;
    for (int64_t a : p.axes) {
      if (a <= prev || a >= x.rank) return InvalidArgument(name + ": axes must be sorted, unique and in range");
      prev = a;
    }
    size_t k = 0;
    int out_rank = 0;
    for (int i = 0; i < x.rank; ++i) {
      const bool reduced = k < p.axes.size() && p.axes[k] == i;
      if (reduced) ++k;
      if (reduced && !p.keepdims) continue;
      const int64_t d = reduced ? 1 : x.dims[i];
      if (out_rank >= y.rank || y.dims[out_rank] != d) return InvalidArgument(name + ": output shape does not match");
      ++out_rank;
      expect_out *= d;
    }
    if (out_rank != y.rank) return InvalidArgument(name + ": output rank does not match");
  }
  if (y.num_elements() != expect_out) return InvalidArgument(name + ": output element count does not match");
  if ((x.num_elements() > 0 && x.data == nullptr) || (expect_out > 0 && y.data == nullptr))
    return InvalidArgument(name + ": missing tensor data");
  return OkStatus();
}

}  // namespace

Status RunReduce(const KernelCall& call, const CpuContext& ctx) {
  Status s = ValidateReduce(call);
  if (!s.ok()) return s;
  if (ctx.pool == nullptr) return InvalidArgument("reduce: missing thread pool");
  if (ctx.isa == Isa::kAvx2) return RunReduceAvx2(call, ctx);
  return RunReduceImpl(call, ctx);
}

}  // namespace consensor::kernels::cpu
