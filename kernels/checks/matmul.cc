#include "kernels/checks/matmul.h"

#include <algorithm>
#include <string>

#include "kernels/checks/common.h"

namespace consensor::kernels {

namespace {

// The rank error prints shapes before their ranks are known to be valid.
std::string UncheckedShapeString(const TensorView& v) {
  TensorView clamped = v;
  clamped.rank = std::clamp(v.rank, 0, kMaxRank);
  return ShapeString(clamped);
}

}  // namespace

StatusOr<MatMulPlan> PlanMatMul(const KernelCall& call) {
  const bool f32 = call.op == Op::kMatMul;
  const std::string name = f32 ? "matmul" : "matmul_i8";
  if (call.num_inputs != 2 || call.num_outputs != 1 || !call.inputs || !call.outputs) {
    return InvalidArgument(name + ": expects 2 inputs and 1 output");
  }
  // matmul takes f32 or f64 (both operands and the output alike); matmul_i8 i8 -> i32.
  const bool f64 = f32 && call.in(0).dtype == DType::kF64;
  const DType in_dtype = f64 ? DType::kF64 : (f32 ? DType::kF32 : DType::kI8);
  const DType out_dtype = f64 ? DType::kF64 : (f32 ? DType::kF32 : DType::kI32);
  const TensorView& a = call.in(0);
  const TensorView& b = call.in(1);
  const TensorView& y = call.out(0);
  if (a.dtype != in_dtype || b.dtype != in_dtype || y.dtype != out_dtype) {
    return InvalidArgument(name + ": expects " + std::string(DTypeName(in_dtype)) + " inputs and " +
                           std::string(DTypeName(out_dtype)) + " output");
  }
  if (a.rank < 2 || b.rank < 2 || y.rank < 2 || a.rank > kMaxRank || b.rank > kMaxRank || y.rank > kMaxRank ||
      a.rank > y.rank || b.rank > y.rank) {
    return InvalidArgument(name + ": bad ranks " + UncheckedShapeString(a) + " x " + UncheckedShapeString(b) + " -> " +
                           UncheckedShapeString(y));
  }
  for (const TensorView* t : {&a, &b, &y}) {
    for (int i = 0; i < t->rank; ++i) {
      if (t->dims[i] < 0) return InvalidArgument(name + ": negative dimension");
    }
  }
  MatMulPlan plan;
  MatMulDims& d = plan.dims;
  d.M = a.dims[a.rank - 2];
  d.K = a.dims[a.rank - 1];
  d.N = b.dims[b.rank - 1];
  if (b.dims[b.rank - 2] != d.K || y.dims[y.rank - 2] != d.M || y.dims[y.rank - 1] != d.N) {
    return InvalidArgument(name + ": shape mismatch " + ShapeString(a) + " x " + ShapeString(b) + " -> " +
                           ShapeString(y));
  }
  MatMulBatchPlan& bp = plan.batch;
  bp.nb = y.rank - 2;
  for (int i = bp.nb - 1; i >= 0; --i) {
    const int ia = i - (y.rank - a.rank), ib = i - (y.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    const int64_t dy = y.dims[i];
    if ((da != dy && da != 1) || (db != dy && db != 1) || (da == 1 && db == 1 && dy != 1)) {
      return InvalidArgument(name + ": batch dims do not broadcast " + ShapeString(a) + " x " + ShapeString(b) +
                             " -> " + ShapeString(y));
    }
    bp.dims[i] = dy;
    bp.a_stride[i] = da == 1 ? 0 : bp.a_batches;
    bp.b_stride[i] = db == 1 ? 0 : bp.b_batches;
    bp.a_batches *= da;
    bp.b_batches *= db;
    bp.count *= dy;
  }
  if (y.num_elements() > 0 && (!y.data || (d.K > 0 && (!a.data || !b.data)))) {
    return InvalidArgument(name + ": missing tensor data");
  }
  return plan;
}

}  // namespace consensor::kernels
