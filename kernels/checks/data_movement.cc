#include "kernels/checks/data_movement.h"

#include <string>
#include <vector>

namespace consensor::kernels {

namespace {

std::string Prefix(Op op) { return std::string(OpName(op)) + ": "; }

Status CheckView(const TensorView& v, const std::string& what, Op op) {
  if (!IsValidDType(v.dtype)) return InvalidArgument(Prefix(op) + what + " has an invalid dtype");
  if (v.rank < 0 || v.rank > kMaxRank) return InvalidArgument(Prefix(op) + what + " has rank out of range");
  for (int d = 0; d < v.rank; ++d) {
    if (v.dims[d] < 0) return InvalidArgument(Prefix(op) + what + " has a negative dim");
  }
  if (v.data == nullptr && v.num_elements() != 0) return InvalidArgument(Prefix(op) + what + " has no data");
  return OkStatus();
}

Status CheckCall(const KernelCall& call, int min_inputs, int max_inputs) {
  if (call.num_outputs != 1 || call.outputs == nullptr) return InvalidArgument(Prefix(call.op) + "expects 1 output");
  if (call.num_inputs < min_inputs || call.num_inputs > max_inputs || (call.num_inputs > 0 && call.inputs == nullptr)) {
    return InvalidArgument(Prefix(call.op) + "unexpected number of inputs: " + std::to_string(call.num_inputs));
  }
  RETURN_IF_ERROR(CheckView(call.out(), "output", call.op));
  for (int i = 0; i < call.num_inputs; ++i) {
    RETURN_IF_ERROR(CheckView(call.in(i), "input " + std::to_string(i), call.op));
  }
  return OkStatus();
}

Status CheckSameDType(const KernelCall& call, const TensorView& in) {
  if (in.dtype != call.out().dtype) {
    return InvalidArgument(Prefix(call.op) + "output dtype " + std::string(DTypeName(call.out().dtype)) +
                           " differs from input dtype " + std::string(DTypeName(in.dtype)));
  }
  return OkStatus();
}

// Identity and reshape.
Status ValidateCopy(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.op == Op::kIdentity && !SameShape(in, out)) {
    return InvalidArgument(Prefix(call.op) + "output shape " + ShapeString(out) + " differs from input shape " +
                           ShapeString(in));
  }
  if (in.num_elements() != out.num_elements()) {
    return InvalidArgument(Prefix(call.op) + "element count differs: input " + ShapeString(in) + ", output " +
                           ShapeString(out));
  }
  return OkStatus();
}

// The im2col transpose (OpParams::im2col_groups): shapes only; the tables' values are
// checked where they are read, as gather's are.
Status ValidateIm2colTranspose(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 3, 3));
  const TensorView& x = call.in(0);
  const TensorView& rows = call.in(1);
  const TensorView& cols = call.in(2);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, x));
  if (DTypeSize(x.dtype) != 1) return InvalidArgument(Prefix(call.op) + "im2col takes 1-byte elements only");
  for (const TensorView* t : {&rows, &cols}) {
    if (t->dtype != DType::kI32 && t->dtype != DType::kI64) {
      return InvalidArgument(Prefix(call.op) + "im2col tables must be i32 or i64, got " +
                             std::string(DTypeName(t->dtype)));
    }
  }
  const int64_t g = call.params->im2col_groups;
  if (x.rank != 4 || rows.rank != 2 || cols.rank != 2 || out.rank != 7 || x.dims[1] % g != 0 ||
      out.dims[0] != x.dims[0] || out.dims[1] != g || out.dims[2] != rows.dims[0] || out.dims[3] != cols.dims[0] ||
      out.dims[4] != x.dims[1] / g || out.dims[5] != rows.dims[1] || out.dims[6] != cols.dims[1]) {
    return InvalidArgument(Prefix(call.op) + "im2col output " + ShapeString(out) + " does not match x " +
                           ShapeString(x) + ", rows " + ShapeString(rows) + ", columns " + ShapeString(cols) +
                           ", groups " + std::to_string(g));
  }
  return OkStatus();
}

Status ValidateTranspose(const KernelCall& call) {
  if (call.params != nullptr && call.params->im2col_groups != 0) {
    if (call.params->im2col_groups < 0) return InvalidArgument(Prefix(call.op) + "im2col_groups must be positive");
    return ValidateIm2colTranspose(call);
  }
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const std::vector<int64_t>& perm = call.params->perm;
  if (out.rank != in.rank || static_cast<int>(perm.size()) != in.rank) {
    return InvalidArgument(Prefix(call.op) + "perm size " + std::to_string(perm.size()) + " does not match rank " +
                           std::to_string(in.rank));
  }
  bool seen[kMaxRank] = {};
  for (int i = 0; i < in.rank; ++i) {
    if (perm[i] < 0 || perm[i] >= in.rank || seen[perm[i]]) {
      return InvalidArgument(Prefix(call.op) + "perm is not a permutation of [0, " + std::to_string(in.rank) + ")");
    }
    seen[perm[i]] = true;
    if (out.dims[i] != in.dims[perm[i]]) {
      return InvalidArgument(Prefix(call.op) + "output shape " + ShapeString(out) +
                             " does not match the permuted input " + ShapeString(in));
    }
  }
  return OkStatus();
}

Status ValidateSlice(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const auto& starts = call.params->starts;
  const auto& steps = call.params->steps;
  if (out.rank != in.rank || static_cast<int>(starts.size()) != in.rank || static_cast<int>(steps.size()) != in.rank) {
    return InvalidArgument(Prefix(call.op) + "starts/steps must have one entry per input dim (rank " +
                           std::to_string(in.rank) + ")");
  }
  for (int d = 0; d < in.rank; ++d) {
    if (steps[d] == 0) return InvalidArgument(Prefix(call.op) + "step of dim " + std::to_string(d) + " is 0");
  }
  if (out.num_elements() == 0) return OkStatus();  // reads nothing
  for (int d = 0; d < in.rank; ++d) {
    // Every element index start + i * step, i in [0, out_dim), must lie in [0, in_dim).
    const int64_t start = starts[d], step = steps[d], n = out.dims[d];
    int64_t span, last;
    const bool overflow = __builtin_mul_overflow(n - 1, step, &span) || __builtin_add_overflow(start, span, &last);
    if (start < 0 || start >= in.dims[d] || overflow || last < 0 || last >= in.dims[d]) {
      return InvalidArgument(Prefix(call.op) + "dim " + std::to_string(d) + ": start " + std::to_string(start) +
                             ", step " + std::to_string(step) + " and output size " + std::to_string(n) +
                             " read outside the input size " + std::to_string(in.dims[d]));
    }
  }
  return OkStatus();
}

Status ValidateConcat(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1 << 30));
  const TensorView& out = call.out();
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const int64_t axis = call.params->axis;
  if (axis < 0 || axis >= out.rank) {
    return InvalidArgument(Prefix(call.op) + "axis " + std::to_string(axis) + " out of range for rank " +
                           std::to_string(out.rank));
  }
  int64_t axis_sum = 0;
  for (int i = 0; i < call.num_inputs; ++i) {
    const TensorView& in = call.in(i);
    RETURN_IF_ERROR(CheckSameDType(call, in));
    if (in.rank != out.rank) {
      return InvalidArgument(Prefix(call.op) + "input " + std::to_string(i) + " has rank " + std::to_string(in.rank) +
                             ", output has rank " + std::to_string(out.rank));
    }
    for (int d = 0; d < out.rank; ++d) {
      if (d != axis && in.dims[d] != out.dims[d]) {
        return InvalidArgument(Prefix(call.op) + "input " + std::to_string(i) + " shape " + ShapeString(in) +
                               " does not match output " + ShapeString(out) + " outside the axis");
      }
    }
    axis_sum += in.dims[axis];
  }
  if (axis_sum != out.dims[axis]) {
    return InvalidArgument(Prefix(call.op) + "input sizes along axis sum to " + std::to_string(axis_sum) +
                           ", output has " + std::to_string(out.dims[axis]));
  }
  return OkStatus();
}

// The Resize lowering's two taps in one pass (a gather with five inputs, made only by
// compilation, DETERMINISM.md 3.1): x, i0, w0, i1, w1, with y = x[i0] * w0 + x[i1] * w1 along
// `axis`. The tables are 1-D of one length m; each weight holds one f32 value per output index
// along the axis (its shape, aligned to the output's last dims, is 1 everywhere but there).
Status ValidateResizeTaps(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 5, 5));
  const TensorView& x = call.in(0);
  const TensorView& out = call.out();
  if (x.dtype != DType::kF32 || out.dtype != DType::kF32) {
    return InvalidArgument(Prefix(call.op) + "two taps in one pass take f32 data");
  }
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const int64_t axis = call.params->axis;
  const TensorView& i0 = call.in(1);
  const TensorView& i1 = call.in(3);
  bool ok =
      axis >= 0 && axis < x.rank && out.rank == x.rank && i0.rank == 1 && i1.rank == 1 && i0.dims[0] == i1.dims[0];
  for (const TensorView* t : {&i0, &i1}) ok = ok && (t->dtype == DType::kI32 || t->dtype == DType::kI64);
  for (int d = 0; ok && d < out.rank; ++d) ok = out.dims[d] == (d == axis ? i0.dims[0] : x.dims[d]);
  for (const TensorView* w : {&call.in(2), &call.in(4)}) {
    ok = ok && w->dtype == DType::kF32 && w->rank <= out.rank && w->num_elements() == out.dims[axis];
    for (int d = 0; ok && d < w->rank; ++d) {
      const int od = out.rank - w->rank + d;
      ok = w->dims[d] == (od == axis ? out.dims[axis] : 1);
    }
  }
  if (!ok) {
    return InvalidArgument(Prefix(call.op) + "two taps: output " + ShapeString(out) + " does not match data " +
                           ShapeString(x) + ", tables " + ShapeString(i0) + " and " + ShapeString(i1) + ", weights " +
                           ShapeString(call.in(2)) + " and " + ShapeString(call.in(4)) + ", axis " +
                           std::to_string(axis));
  }
  return OkStatus();
}

Status ValidateGather(const KernelCall& call) {
  if (call.num_inputs == 5) return ValidateResizeTaps(call);
  RETURN_IF_ERROR(CheckCall(call, 2, 2));
  const TensorView& data = call.in(0);
  const TensorView& indices = call.in(1);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, data));
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return InvalidArgument(Prefix(call.op) + "indices must be i32 or i64, got " +
                           std::string(DTypeName(indices.dtype)));
  }
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const int64_t axis = call.params->axis;
  if (axis < 0 || axis >= data.rank) {
    return InvalidArgument(Prefix(call.op) + "axis " + std::to_string(axis) + " out of range for data rank " +
                           std::to_string(data.rank));
  }
  // Output shape = data.shape[:axis] + indices.shape + data.shape[axis+1:].
  bool shape_ok = out.rank == data.rank - 1 + indices.rank;
  for (int d = 0; shape_ok && d < out.rank; ++d) {
    int64_t want;
    if (d < axis) want = data.dims[d];
    else if (d < axis + indices.rank) want = indices.dims[d - axis];
    else want = data.dims[d - indices.rank + 1];
    shape_ok = out.dims[d] == want;
  }
  if (!shape_ok) {
    return InvalidArgument(Prefix(call.op) + "output shape " + ShapeString(out) + " does not match data " +
                           ShapeString(data) + ", indices " + ShapeString(indices) + ", axis " + std::to_string(axis));
  }
  return OkStatus();
}

Status ValidateExpand(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  bool ok = in.rank <= out.rank;
  for (int d = 0; ok && d < in.rank; ++d) {
    const int64_t x = in.dims[d], y = out.dims[d + out.rank - in.rank];
    ok = x == y || x == 1;
  }
  if (!ok) {
    return InvalidArgument(Prefix(call.op) + "input shape " + ShapeString(in) + " does not broadcast to " +
                           ShapeString(out));
  }
  return OkStatus();
}

Status ValidatePad(const KernelCall& call) {
  RETURN_IF_ERROR(CheckCall(call, 1, 1));
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  RETURN_IF_ERROR(CheckSameDType(call, in));
  if (call.params == nullptr) return InvalidArgument(Prefix(call.op) + "missing parameters");
  const auto& pb = call.params->pad_begin;
  const auto& pe = call.params->pad_end;
  if (out.rank != in.rank || static_cast<int>(pb.size()) != in.rank || static_cast<int>(pe.size()) != in.rank) {
    return InvalidArgument(Prefix(call.op) + "pad_begin/pad_end must have one entry per dim (rank " +
                           std::to_string(in.rank) + ")");
  }
  for (int d = 0; d < in.rank; ++d) {
    if (pb[d] < 0 || pe[d] < 0 || out.dims[d] != in.dims[d] + pb[d] + pe[d]) {
      return InvalidArgument(Prefix(call.op) + "dim " + std::to_string(d) + ": output size " +
                             std::to_string(out.dims[d]) + " != input " + std::to_string(in.dims[d]) + " + pads " +
                             std::to_string(pb[d]) + " + " + std::to_string(pe[d]) + " (pads must be >= 0)");
    }
  }
  return OkStatus();
}

}  // namespace

Status ValidateDataMovement(const KernelCall& call) {
  switch (call.op) {
    case Op::kIdentity:
    case Op::kReshape: return ValidateCopy(call);
    case Op::kTranspose: return ValidateTranspose(call);
    case Op::kSlice: return ValidateSlice(call);
    case Op::kConcat: return ValidateConcat(call);
    case Op::kGather: return ValidateGather(call);
    case Op::kExpand: return ValidateExpand(call);
    case Op::kPad: return ValidatePad(call);
    default: break;
  }
  return InvalidArgument("data movement: op '" + std::string(OpName(call.op)) + "' is not a data-movement op");
}

Status GatherIndexError(int64_t index, int64_t position, int64_t axis_size) {
  return OutOfRange(Prefix(Op::kGather) + "index " + std::to_string(index) + " (at indices position " +
                    std::to_string(position) + ") is out of range for an axis of size " + std::to_string(axis_size) +
                    "; valid indices are [-" + std::to_string(axis_size) + ", " + std::to_string(axis_size) + ")");
}

StridedRead PlanStridedRead(const KernelCall& call) {
  const TensorView& in = call.in(0);
  const TensorView& out = call.out();
  StridedRead r;
  StridedLayout& l = r.layout;
  l.rank = out.rank;
  l.num_operands = 1;
  for (int d = 0; d < out.rank; ++d) l.dims[d] = out.dims[d];
  if (call.op == Op::kExpand) {
    BroadcastStrides(in.dims, in.rank, out.dims, out.rank, l.strides[0]);
    return r;
  }
  int64_t cs[kMaxRank];
  ContiguousStrides(in, cs);
  if (call.op == Op::kTranspose) {
    for (int d = 0; d < out.rank; ++d) l.strides[0][d] = cs[call.params->perm[d]];
    return r;
  }
  // Slice; starts and steps are only range-checked when the output is not empty.
  if (out.num_elements() == 0) return r;
  for (int d = 0; d < in.rank; ++d) {
    r.offset += call.params->starts[d] * cs[d];
    l.strides[0][d] = call.params->steps[d] * cs[d];
  }
  return r;
}

}  // namespace consensor::kernels
