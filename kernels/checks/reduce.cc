#include "kernels/checks/reduce.h"

#include <string>

#include "kernels/checks/common.h"

namespace consensor::kernels {

Status ValidateReduce(const KernelCall& call) {
  const std::string name(OpName(call.op));
  if (call.params == nullptr) return InvalidArgument(name + ": missing parameters");
  if (call.num_inputs != 1 || call.num_outputs != 1)
    return InvalidArgument(name + ": expects one input and one output");
  const TensorView& x = call.in(0);
  const TensorView& y = call.out(0);
  const OpParams& p = *call.params;
  if (x.rank < 0 || x.rank > kMaxRank || y.rank < 0 || y.rank > kMaxRank) return InvalidArgument(name + ": bad rank");
  for (int i = 0; i < x.rank; ++i)
    if (x.dims[i] < 0) return InvalidArgument(name + ": negative dimension");
  // argmax and top_k: f32 and the signed integers; the other reductions: every integer too.
  const bool numeric =
      x.dtype == DType::kF32 || x.dtype == DType::kI32 || x.dtype == DType::kI8 || x.dtype == DType::kI64;
  const bool numeric_any = IsFloatDType(x.dtype) || IsIntegerDType(x.dtype);

  int64_t expect_out = 1;
  if (call.op == Op::kArgMax) {
    if (!numeric) return InvalidArgument(name + ": input must be f32, i32, i8 or i64");
    if (y.dtype != DType::kI64) return InvalidArgument(name + ": output must be i64");
    if (p.axis < 0 || p.axis >= x.rank) return InvalidArgument(name + ": axis out of range");
    if (x.dims[p.axis] == 0) return InvalidArgument(name + ": empty reduction axis");
    for (int i = 0; i < x.rank; ++i)
      if (i != p.axis) expect_out *= x.dims[i];
  } else if (call.op == Op::kTopK) {
    if (!numeric) return InvalidArgument(name + ": input must be f32, i32, i8 or i64");
    if (y.dtype != DType::kI64) return InvalidArgument(name + ": output must be i64");
    if (p.axis < 0 || p.axis >= x.rank) return InvalidArgument(name + ": axis out of range");
    if (p.k < 0 || p.k > x.dims[p.axis]) return InvalidArgument(name + ": k must be in [0, the axis length]");
    if (y.rank != x.rank) return InvalidArgument(name + ": output rank does not match");
    for (int i = 0; i < x.rank; ++i) {
      const int64_t d = i == p.axis ? p.k : x.dims[i];
      if (y.dims[i] != d) return InvalidArgument(name + ": output shape does not match");
      expect_out *= d;
    }
  } else if (call.op == Op::kCumSum) {
    if (!numeric_any) return InvalidArgument(name + ": input must be f32, f64 or an integer dtype");
    if (y.dtype != x.dtype) return InvalidArgument(name + ": output dtype must match the input");
    if (p.axis < 0 || p.axis >= x.rank) return InvalidArgument(name + ": axis out of range");
    if (y.rank != x.rank) return InvalidArgument(name + ": output rank does not match");
    for (int i = 0; i < x.rank; ++i) {
      if (y.dims[i] != x.dims[i]) return InvalidArgument(name + ": output shape does not match");
      expect_out *= x.dims[i];
    }
  } else {
    if (call.op == Op::kReduceMean) {
      if (!IsFloatDType(x.dtype)) return InvalidArgument(name + ": input must be f32 or f64");
    } else if (call.op == Op::kReduceSum || call.op == Op::kReduceMax || call.op == Op::kReduceMin ||
               call.op == Op::kReduceProd) {
      if (!numeric_any) return InvalidArgument(name + ": input must be f32, f64 or an integer dtype");
    } else {
      return InvalidArgument(name + ": not a reduction");
    }
    if (p.sum_widens_i8) {
      if (call.op != Op::kReduceSum || x.dtype != DType::kI8 || y.dtype != DType::kI32) {
        return InvalidArgument(name + ": a widening sum takes i8 and gives i32");
      }
    } else if (y.dtype != x.dtype) {
      return InvalidArgument(name + ": output dtype must match the input");
    }
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

std::optional<ReduceLayout> PlanReduction(const TensorView& x, const OpParams& params) {
  bool is_red[kMaxRank] = {};
  for (int64_t a : params.axes) is_red[a] = true;
  for (int i = 0; i < x.rank; ++i)
    if (is_red[i] && x.dims[i] == 0) return std::nullopt;
  int64_t strides[kMaxRank];
  ContiguousStrides(x, strides);
  // Runs of non-1 dims of the same kind, outermost first.
  struct Run {
    int64_t size, stride;
    bool red;
  };
  Run runs[kMaxRank];
  int num_runs = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (x.dims[i] == 1) continue;
    if (num_runs > 0 && runs[num_runs - 1].red == is_red[i]) {
      runs[num_runs - 1].size *= x.dims[i];
      runs[num_runs - 1].stride = strides[i];
    } else {
      runs[num_runs++] = {x.dims[i], strides[i], is_red[i]};
    }
  }
  ReduceLayout L;
  for (int k = 0; k < num_runs; ++k) {
    ReduceGroups& g = runs[k].red ? L.red : L.kept;
    g.size[g.n] = runs[k].size;
    g.stride[g.n] = runs[k].stride;
    ++g.n;
    (runs[k].red ? L.n_terms : L.n_out) *= runs[k].size;
  }
  L.inner_reduced = num_runs > 0 && runs[num_runs - 1].red;
  return L;
}

}  // namespace consensor::kernels
