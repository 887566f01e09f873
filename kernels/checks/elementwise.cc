#include "kernels/checks/elementwise.h"

#include <string>

namespace consensor::kernels {

namespace {

enum class Kind {
  kNumericUnary,
  kFloatUnary,
  kBoolUnary,
  kCast,
  kNumericBinary,
  kFloatBinary,
  kCompare,
  kLogical,
  kWhere,
  kNone
};

Kind KindOf(Op op) {
  switch (op) {
    case Op::kNeg:
    case Op::kAbs:
    case Op::kRelu: return Kind::kNumericUnary;
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kErf:
    case Op::kGeluErf:
    case Op::kGeluTanh:
    case Op::kSin:
    case Op::kCos:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kRound:
    case Op::kAsin:
    case Op::kAcos:
    case Op::kAtan:
    case Op::kSinh:
    case Op::kCosh:
    case Op::kAsinh:
    case Op::kAcosh:
    case Op::kAtanh: return Kind::kFloatUnary;
    case Op::kNot: return Kind::kBoolUnary;
    case Op::kCast: return Kind::kCast;
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMax:
    case Op::kMin:
    case Op::kFmod:
    case Op::kPow: return Kind::kNumericBinary;
    case Op::kEqual:
    case Op::kNotEqual:
    case Op::kLess:
    case Op::kLessEqual:
    case Op::kGreater:
    case Op::kGreaterEqual: return Kind::kCompare;
    case Op::kAnd:
    case Op::kOr:
    case Op::kXor: return Kind::kLogical;
    case Op::kWhere: return Kind::kWhere;
    default: return Kind::kNone;
  }
}

int ArityOf(Kind k) {
  switch (k) {
    case Kind::kNumericUnary:
    case Kind::kFloatUnary:
    case Kind::kBoolUnary:
    case Kind::kCast: return 1;
    case Kind::kWhere: return 3;
    default: return 2;
  }
}

bool IsNumeric(DType t) { return IsFloatDType(t) || IsIntegerDType(t); }

std::string Prefix(Op op) { return "elementwise op '" + std::string(OpName(op)) + "': "; }

// The output shape must be exactly the numpy broadcast of the input shapes.
Status CheckShapes(const KernelCall& call) {
  const TensorView& out = call.out();
  if (out.rank < 0 || out.rank > kMaxRank) return InvalidArgument(Prefix(call.op) + "output rank out of range");
  for (int d = 0; d < out.rank; ++d) {
    if (out.dims[d] < 0) return InvalidArgument(Prefix(call.op) + "negative output dim");
  }
  for (int d = 0; d < out.rank; ++d) {
    int64_t b = 1;
    for (int i = 0; i < call.num_inputs; ++i) {
      const TensorView& in = call.in(i);
      int id = d - (out.rank - in.rank);
      if (id < 0) continue;
      int64_t x = in.dims[id];
      if (x == 1) continue;
      if (b != 1 && b != x) {
        return InvalidArgument(Prefix(call.op) + "input shapes are not broadcast-compatible at output dim " +
                               std::to_string(d));
      }
      b = x;
    }
    if (b != out.dims[d]) {
      std::string shapes;
      for (int i = 0; i < call.num_inputs; ++i) shapes += (i ? ", " : "") + ShapeString(call.in(i));
      return InvalidArgument(Prefix(call.op) + "output shape " + ShapeString(out) +
                             " is not the broadcast of the input shapes " + shapes);
    }
  }
  return OkStatus();
}

// Arity and dtypes.
Status ValidateOperands(const KernelCall& call, Kind kind) {
  const std::string p = Prefix(call.op);
  if (kind == Kind::kNone) return InvalidArgument(p + "not an elementwise op");
  const int arity = ArityOf(kind);
  if (call.num_inputs != arity || call.inputs == nullptr) {
    return InvalidArgument(p + "expects " + std::to_string(arity) + " input(s), got " +
                           std::to_string(call.num_inputs));
  }
  if (call.num_outputs != 1 || call.outputs == nullptr) return InvalidArgument(p + "expects 1 output");
  for (int i = 0; i < arity; ++i) {
    const TensorView& in = call.in(i);
    if (!IsValidDType(in.dtype)) return InvalidArgument(p + "input " + std::to_string(i) + " has an invalid dtype");
    if (in.rank < 0 || in.rank > call.out().rank) {
      return InvalidArgument(p + "input " + std::to_string(i) + " has rank " + std::to_string(in.rank) +
                             " but the output has rank " + std::to_string(call.out().rank));
    }
    for (int d = 0; d < in.rank; ++d) {
      if (in.dims[d] < 0) return InvalidArgument(p + "negative input dim");
    }
  }
  const DType a = call.in(0).dtype;
  const DType o = call.out().dtype;
  if (!IsValidDType(o)) return InvalidArgument(p + "output has an invalid dtype");
  auto name = [](DType t) { return std::string(DTypeName(t)); };
  auto same_out = [&](DType want) -> Status {
    if (o != want) return InvalidArgument(p + "output dtype must be " + name(want) + ", got " + name(o));
    return OkStatus();
  };
  switch (kind) {
    case Kind::kNumericUnary:
      if (!IsNumeric(a))
        return InvalidArgument(p + "unsupported dtype " + name(a) + " (expects f32, f64 or an integer dtype)");
      return same_out(a);
    case Kind::kFloatUnary:
      if (!IsFloatDType(a)) return InvalidArgument(p + "unsupported dtype " + name(a) + " (expects f32 or f64)");
      return same_out(a);
    case Kind::kBoolUnary:
      if (a != DType::kBool) return InvalidArgument(p + "unsupported dtype " + name(a) + " (expects bool)");
      return same_out(a);
    case Kind::kCast:
      if (call.params != nullptr && call.params->to != DType::kInvalid && call.params->to != o) {
        return InvalidArgument(p + "output dtype " + name(o) + " differs from the cast target " +
                               name(call.params->to));
      }
      return OkStatus();
    case Kind::kNumericBinary:
    case Kind::kFloatBinary:
    case Kind::kCompare:
    case Kind::kLogical: {
      const DType b = call.in(1).dtype;
      if (a != b) return InvalidArgument(p + "input dtypes differ (" + name(a) + " vs " + name(b) + ")");
      if (kind == Kind::kNumericBinary && !IsNumeric(a)) {
        return InvalidArgument(p + "unsupported dtype " + name(a) + " (expects f32, f64 or an integer dtype)");
      }
      if (kind == Kind::kFloatBinary && !IsFloatDType(a)) {
        return InvalidArgument(p + "unsupported dtype " + name(a) + " (expects f32 or f64)");
      }
      if (kind == Kind::kLogical && a != DType::kBool) {
        return InvalidArgument(p + "unsupported dtype " + name(a) + " (expects bool)");
      }
      return same_out(kind == Kind::kCompare || kind == Kind::kLogical ? DType::kBool : a);
    }
    case Kind::kWhere: {
      const DType x = call.in(1).dtype, y = call.in(2).dtype;
      if (a != DType::kBool) return InvalidArgument(p + "condition must be bool, got " + name(a));
      if (x != y) return InvalidArgument(p + "value dtypes differ (" + name(x) + " vs " + name(y) + ")");
      return same_out(x);
    }
    case Kind::kNone: break;
  }
  return InvalidArgument(p + "not an elementwise op");
}

}  // namespace

Status ValidateElementwise(const KernelCall& call) {
  RETURN_IF_ERROR(ValidateOperands(call, KindOf(call.op)));
  RETURN_IF_ERROR(CheckShapes(call));
  if (call.out().num_elements() == 0) return OkStatus();
  if (call.out().data == nullptr) return InvalidArgument(Prefix(call.op) + "output has no data");
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).data == nullptr) return InvalidArgument(Prefix(call.op) + "input has no data");
  }
  return OkStatus();
}

StridedLayout ElementwiseLayout(const KernelCall& call) {
  const TensorView& out = call.out();
  StridedLayout l;
  l.rank = out.rank;
  l.num_operands = call.num_inputs;
  for (int d = 0; d < out.rank; ++d) l.dims[d] = out.dims[d];
  for (int i = 0; i < call.num_inputs; ++i) {
    BroadcastStrides(call.in(i).dims, call.in(i).rank, out.dims, out.rank, l.strides[i]);
  }
  CoalesceLayout(l);
  return l;
}

KernelCall EpilogueStepCall(const KernelCall& call, int s, TensorView* views, TensorView* out) {
  const EpilogueStep& step = call.epilogue->steps[s];
  *out = call.out();
  for (int k = 0; k < step.num_operands; ++k) {
    const EpilogueOperand& o = step.operands[k];
    views[k] = o.is_input ? call.epilogue->inputs[o.index] : call.out();
  }
  KernelCall c;
  c.op = step.op;
  c.inputs = views;
  c.num_inputs = step.num_operands;
  c.outputs = out;
  c.num_outputs = 1;
  return c;
}

Status ValidateEpilogue(const KernelCall& call) {
  const Epilogue* e = call.epilogue;
  if (e == nullptr) return OkStatus();
  const std::string p = "epilogue of " + std::string(OpName(call.op)) + ": ";
  if (call.num_outputs != 1 || call.outputs == nullptr || call.out().dtype != DType::kF32) {
    return InvalidArgument(p + "needs one f32 output");
  }
  if (e->num_steps < 1 || e->num_steps > kMaxEpilogueSteps || e->steps == nullptr) {
    return InvalidArgument(p + "needs 1 to " + std::to_string(kMaxEpilogueSteps) + " steps");
  }
  if (e->num_inputs < 0 || (e->num_inputs > 0 && e->inputs == nullptr)) return InvalidArgument(p + "bad inputs");
  for (int i = 0; i < e->num_inputs; ++i) {
    if (e->inputs[i].dtype != DType::kF32) return InvalidArgument(p + "input " + std::to_string(i) + " is not f32");
  }
  for (int s = 0; s < e->num_steps; ++s) {
    const EpilogueStep& step = e->steps[s];
    if (!EpilogueOpAllowed(step.op, step.num_operands)) {
      return InvalidArgument(p + "step " + std::to_string(s) + " (" + std::string(OpName(step.op)) +
                             ") cannot be fused");
    }
    for (int k = 0; k < step.num_operands; ++k) {
      const EpilogueOperand& o = step.operands[k];
      const int limit = o.is_input ? e->num_inputs : s + 1;
      if (o.index < 0 || o.index >= limit) {
        return InvalidArgument(p + "step " + std::to_string(s) + " reads a value that does not exist");
      }
    }
    TensorView views[2], out;
    RETURN_IF_ERROR(ValidateElementwise(EpilogueStepCall(call, s, views, &out)));
  }
  return OkStatus();
}

}  // namespace consensor::kernels
