#include "kernels/checks/half_plan.h"

#include <algorithm>

namespace consensor::kernels {

namespace {

bool TouchesHalf(const KernelCall& call) {
  for (int i = 0; i < call.num_inputs; ++i) {
    if (IsHalfDType(call.in(i).dtype)) return true;
  }
  for (int i = 0; i < call.num_outputs; ++i) {
    if (IsHalfDType(call.out(i).dtype)) return true;
  }
  return call.op == Op::kCast && call.params != nullptr && IsHalfDType(call.params->to);
}

bool IsSplitFamily(Op op) {
  const OpFamily f = FamilyOf(op);
  return f == OpFamily::kElementwise || f == OpFamily::kMatMul || f == OpFamily::kConv || f == OpFamily::kPool ||
         f == OpFamily::kNormalization;
}

std::vector<int64_t> DimsOf(const TensorView& v, int from = 0) {
  return std::vector<int64_t>(v.dims + std::min(std::max(from, 0), v.rank), v.dims + v.rank);
}

int64_t Product(const int64_t* d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= d[i];
  return p;
}

// A split of the first `k` axes of every operand whose leading dims are the output's (sliced),
// other operands whole. Only the elementwise plan passes other operands whose leading dims are 1.
HalfRowSplit LeadingAxes(const KernelCall& call, int k, const std::vector<bool>& sliced_inputs) {
  HalfRowSplit s;
  const TensorView& y = call.out(0);
  s.rows = Product(y.dims, k);
  for (int i = 0; i < call.num_inputs; ++i) {
    const TensorView& v = call.in(i);
    if (sliced_inputs[static_cast<size_t>(i)]) {
      s.row_elems.push_back(Product(v.dims + k, v.rank - k));
      s.dims.push_back(DimsOf(v, k));
    } else {
      s.row_elems.push_back(0);
      s.dims.push_back(DimsOf(v));
    }
  }
  for (int j = 0; j < call.num_outputs; ++j) {
    const TensorView& v = call.out(j);
    s.row_elems.push_back(Product(v.dims + k, v.rank - k));
    s.dims.push_back(DimsOf(v, k));
  }
  return s;
}

int64_t F32Bytes(int64_t elements) { return elements * static_cast<int64_t>(sizeof(float)); }

}  // namespace

HalfRowSplit PlanHalfRowSplit(const KernelCall& call) {
  HalfRowSplit none;
  if (!IsSplitFamily(call.op) || call.num_outputs != 1 || call.num_inputs < 1) return none;
  const TensorView& y = call.out(0);
  if (y.rank < 1 || y.rank > kMaxRank || y.num_elements() <= 0) return none;
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).rank < 0 || call.in(i).rank > kMaxRank) return none;
  }
  const int r = y.rank;
  switch (FamilyOf(call.op)) {
    case OpFamily::kElementwise: {
      for (int i = 0; i < call.num_inputs; ++i) {
        if (call.in(i).rank > r) return none;  // not a valid broadcast: the kernel says so, whole
      }
      // The most leading axes k over which every input either has the output's dims (sliced)
      // or only 1s / no axis (broadcast: passed whole, its leading 1s dropped).
      for (int k = r; k >= 1; --k) {
        std::vector<bool> sliced;
        std::vector<std::vector<int64_t>> whole_dims;
        bool ok = true;
        for (int i = 0; i < call.num_inputs && ok; ++i) {
          const TensorView& v = call.in(i);
          const int offset = r - v.rank;
          bool full = offset == 0;
          bool ones = true;
          for (int a = 0; a < k; ++a) {
            const int ia = a - offset;
            full = full && ia >= 0 && v.dims[ia] == y.dims[a];
            ones = ones && (ia < 0 || v.dims[ia] == 1);
          }
          ok = full || ones;
          sliced.push_back(full);
          whole_dims.push_back(DimsOf(v, k - offset));
        }
        if (!ok) continue;
        HalfRowSplit s = LeadingAxes(call, k, sliced);
        for (int i = 0; i < call.num_inputs; ++i) {
          if (!sliced[static_cast<size_t>(i)]) s.dims[static_cast<size_t>(i)] = whole_dims[static_cast<size_t>(i)];
        }
        return s;
      }
      return none;
    }
    case OpFamily::kMatMul: {
      // [..., M, K] x [K, N]: every row of a (batch dims and M flattened) gives one row of y.
      if (call.op != Op::kMatMul || call.num_inputs != 2) return none;
      const TensorView& a = call.in(0);
      const TensorView& b = call.in(1);
      if (a.rank < 2 || b.rank != 2 || r != a.rank) return none;
      for (int i = 0; i < r - 1; ++i) {
        if (a.dims[i] != y.dims[i]) return none;
      }
      HalfRowSplit s = LeadingAxes(call, r - 1, {true, false});
      return s;
    }
    case OpFamily::kConv: {
      // x [N, C, H, W] and y [N, F, Ho, Wo]: one row per image; weights and bias whole.
      if (r != 4 || call.in(0).rank != 4 || call.in(0).dims[0] != y.dims[0]) return none;
      std::vector<bool> sliced(static_cast<size_t>(call.num_inputs), false);
      sliced[0] = true;
      return LeadingAxes(call, 1, sliced);
    }
    case OpFamily::kPool: {
      // One row per (image, channel) plane; a block of planes is one image of that many channels.
      if (call.num_inputs != 1 || r != 4 || call.in(0).rank != 4 || call.in(0).dims[0] != y.dims[0] ||
          call.in(0).dims[1] != y.dims[1]) {
        return none;
      }
      HalfRowSplit s = LeadingAxes(call, 2, {true});
      s.leading_one = true;
      return s;
    }
    case OpFamily::kNormalization: {
      // The axes before params.axis are independent rows; scale and bias are whole.
      if (call.params == nullptr) return none;
      const int64_t axis = call.params->axis;
      if (axis < 1 || axis >= r || call.in(0).rank != r) return none;
      for (int i = 0; i < r; ++i) {
        if (call.in(0).dims[i] != y.dims[i]) return none;
      }
      std::vector<bool> sliced(static_cast<size_t>(call.num_inputs), false);
      sliced[0] = true;
      HalfRowSplit s = LeadingAxes(call, static_cast<int>(axis), sliced);
      s.axis_is_one = true;
      return s;
    }
    default: return none;
  }
}

int64_t HalfBlockRows(const HalfRowSplit& s) {
  int64_t widest = 1;
  for (int64_t e : s.row_elems) widest = std::max(widest, e);
  return std::max<int64_t>(1, std::min(s.rows, kHalfBlockElems / widest));
}

Status CheckHalfOperands(const KernelCall& call, const std::string& op_name) {
  DType half = DType::kInvalid;
  for (int i = 0; i < call.num_inputs && half == DType::kInvalid; ++i) {
    if (IsHalfDType(call.in(i).dtype)) half = call.in(i).dtype;
  }
  auto is_float = [](DType t) { return IsFloatDType(t) || IsHalfDType(t); };
  if (half != DType::kInvalid) {
    for (int i = 0; i < call.num_inputs; ++i) {
      if (is_float(call.in(i).dtype) && call.in(i).dtype != half) {
        return InvalidArgument(op_name + ": input dtypes differ (" + std::string(DTypeName(half)) + " vs " +
                               std::string(DTypeName(call.in(i).dtype)) + ")");
      }
    }
    if (call.op != Op::kCast) {
      for (int i = 0; i < call.num_outputs; ++i) {
        if (is_float(call.out(i).dtype) && call.out(i).dtype != half) {
          return InvalidArgument(op_name + ": output dtype " + std::string(DTypeName(call.out(i).dtype)) +
                                 " differs from input dtype " + std::string(DTypeName(half)));
        }
      }
    }
  }
  if (half == DType::kInvalid && call.op != Op::kCast) {
    for (int i = 0; i < call.num_outputs; ++i) {
      if (IsHalfDType(call.out(i).dtype)) {
        return InvalidArgument(op_name + ": a " + std::string(DTypeName(call.out(i).dtype)) +
                               " output needs inputs of that dtype");
      }
    }
  }
  if (call.op == Op::kCast &&
      (call.params == nullptr || call.num_outputs != 1 || call.out().dtype != call.params->to)) {
    return InvalidArgument(op_name + ": the output dtype must be the cast's target dtype");
  }
  return OkStatus();
}

Status CheckHalfCall(const KernelCall& call, const std::string& op_name) {
  if (call.epilogue != nullptr) return InvalidArgument(op_name + ": f16/bf16 calls take no fused epilogue");
  if (call.num_inputs < 0 || call.num_outputs < 1 || (call.num_inputs > 0 && call.inputs == nullptr) ||
      call.outputs == nullptr) {
    return InvalidArgument(op_name + ": malformed call");
  }
  return CheckHalfOperands(call, op_name);
}

bool ComputesThroughF32(const KernelCall& call) {
  if (!TouchesHalf(call)) return false;
  if (FamilyOf(call.op) == OpFamily::kDataMovement) return false;
  if (call.op == Op::kIdentity || call.op == Op::kWhere) return false;
  if (call.op == Op::kCast && call.num_inputs == 1 && call.num_outputs == 1 && call.in(0).dtype == call.out().dtype) {
    return false;  // a cast to the same dtype copies bits
  }
  return true;
}

TensorView ViewWithDims(DType dtype, void* data, const std::vector<int64_t>& dims, int64_t lead0, int64_t lead1) {
  TensorView v;
  v.dtype = dtype;
  v.data = data;
  if (lead0 >= 0) v.dims[v.rank++] = lead0;
  if (lead1 >= 0) v.dims[v.rank++] = lead1;
  for (int64_t d : dims) v.dims[v.rank++] = d;
  return v;
}

int64_t HalfWideningBytes(const KernelCall& call) {
  if (!ComputesThroughF32(call)) return 0;
  const HalfRowSplit s = PlanHalfRowSplit(call);
  int64_t bytes = 0;
  const int64_t nb = s.rows > 0 ? HalfBlockRows(s) : 0;
  for (int i = 0; i < call.num_inputs + call.num_outputs; ++i) {
    const TensorView& v = i < call.num_inputs ? call.in(i) : call.out(i - call.num_inputs);
    if (!IsHalfDType(v.dtype)) continue;
    const int64_t row = s.rows > 0 ? s.row_elems[static_cast<size_t>(i)] : 0;
    bytes += F32Bytes(row > 0 ? nb * row : v.num_elements());
  }
  return bytes;
}

}  // namespace consensor::kernels
