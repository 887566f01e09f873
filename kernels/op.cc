#include "kernels/op.h"

namespace consensor::kernels {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kNeg: return "neg";
    case Op::kAbs: return "abs";
    case Op::kRelu: return "relu";
    case Op::kExp: return "exp";
    case Op::kLog: return "log";
    case Op::kSqrt: return "sqrt";
    case Op::kRsqrt: return "rsqrt";
    case Op::kTanh: return "tanh";
    case Op::kSigmoid: return "sigmoid";
    case Op::kErf: return "erf";
    case Op::kGeluErf: return "gelu";
    case Op::kGeluTanh: return "gelu_tanh";
    case Op::kSin: return "sin";
    case Op::kCos: return "cos";
    case Op::kFloor: return "floor";
    case Op::kCeil: return "ceil";
    case Op::kRound: return "round";
    case Op::kNot: return "not";
    case Op::kIdentity: return "identity";
    case Op::kCast: return "cast";
    case Op::kAdd: return "add";
    case Op::kSub: return "sub";
    case Op::kMul: return "mul";
    case Op::kDiv: return "div";
    case Op::kPow: return "pow";
    case Op::kFmod: return "fmod";
    case Op::kMax: return "max";
    case Op::kMin: return "min";
    case Op::kEqual: return "equal";
    case Op::kNotEqual: return "not_equal";
    case Op::kLess: return "less";
    case Op::kLessEqual: return "less_equal";
    case Op::kGreater: return "greater";
    case Op::kGreaterEqual: return "greater_equal";
    case Op::kAnd: return "and";
    case Op::kOr: return "or";
    case Op::kXor: return "xor";
    case Op::kWhere: return "where";
    case Op::kReduceSum: return "reduce_sum";
    case Op::kReduceMean: return "reduce_mean";
    case Op::kReduceMax: return "reduce_max";
    case Op::kReduceMin: return "reduce_min";
    case Op::kReduceProd: return "reduce_prod";
    case Op::kArgMax: return "argmax";
    case Op::kTopK: return "top_k";
    case Op::kMatMul: return "matmul";
    case Op::kMatMulInt8: return "matmul_i8";
    case Op::kConv2D: return "conv2d";
    case Op::kMaxPool2D: return "max_pool2d";
    case Op::kAvgPool2D: return "avg_pool2d";
    case Op::kSoftmax: return "softmax";
    case Op::kLayerNorm: return "layer_norm";
    case Op::kReshape: return "reshape";
    case Op::kTranspose: return "transpose";
    case Op::kSlice: return "slice";
    case Op::kConcat: return "concat";
    case Op::kGather: return "gather";
    case Op::kExpand: return "expand";
    case Op::kPad: return "pad";
    case Op::kAsin: return "asin";
    case Op::kAcos: return "acos";
    case Op::kAtan: return "atan";
    case Op::kSinh: return "sinh";
    case Op::kCosh: return "cosh";
    case Op::kAsinh: return "asinh";
    case Op::kAcosh: return "acosh";
    case Op::kAtanh: return "atanh";
    case Op::kCumSum: return "cumsum";
    case Op::kNumOps: break;
  }
  return "invalid";
}

OpFamily FamilyOf(Op op) {
  switch (op) {
    case Op::kReduceSum:
    case Op::kReduceMean:
    case Op::kReduceMax:
    case Op::kReduceMin:
    case Op::kReduceProd:
    case Op::kArgMax:
    case Op::kTopK:
    case Op::kCumSum: return OpFamily::kReduce;
    case Op::kMatMul:
    case Op::kMatMulInt8: return OpFamily::kMatMul;
    case Op::kConv2D: return OpFamily::kConv;
    case Op::kMaxPool2D:
    case Op::kAvgPool2D: return OpFamily::kPool;
    case Op::kSoftmax:
    case Op::kLayerNorm: return OpFamily::kNormalization;
    case Op::kIdentity:
    case Op::kReshape:
    case Op::kTranspose:
    case Op::kSlice:
    case Op::kConcat:
    case Op::kGather:
    case Op::kExpand:
    case Op::kPad: return OpFamily::kDataMovement;
    case Op::kNumOps: return OpFamily::kNone;
    default: return OpFamily::kElementwise;
  }
}

bool EpilogueOpAllowed(Op op, int num_operands) {
  switch (op) {
    case Op::kNeg:
    case Op::kAbs:
    case Op::kRelu:
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
    case Op::kRound: return num_operands == 1;
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kPow:
    case Op::kFmod:
    case Op::kMax:
    case Op::kMin: return num_operands == 2;
    default: return false;
  }
}

}  // namespace consensor::kernels
