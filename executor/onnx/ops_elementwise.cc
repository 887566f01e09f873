// ONNX elementwise ops: unary math, binary arithmetic and comparisons (numpy broadcasting),
// variadic Max/Min/Sum/Mean, activations built from them, Cast, Where, Clip, Dropout.
// Lowerings are written down in docs/ONNX.md.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "executor/onnx/context.h"
#include "onnx/onnx_pb.h"

namespace consensor::executor::onnx_import {

namespace {

Status Unary(NodeContext& ctx, std::string_view op, bool float_only) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  if (float_only) RETURN_IF_ERROR(RequireFloat(ctx, x, "the input"));
  return SetResult(ctx, ctx.Emit(op, {x}));
}

Status Binary(NodeContext& ctx, std::string_view op) {
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(1));
  if (ctx.opset() < 7) {
    // Legacy broadcasting: B aligned with A's dims starting at `axis` (default: the suffix,
    // which is what numpy does anyway).
    RETURN_IF_ERROR(ctx.CheckAttributes({"broadcast", "axis", "consumed_inputs"}));
    ASSIGN_OR_RETURN(int64_t broadcast, ctx.AttrInt("broadcast", 0));
    const Shape as = ctx.type(a).shape, bs = ctx.type(b).shape;
    if (broadcast && ctx.has_attr("axis")) {
      ASSIGN_OR_RETURN(int64_t axis, ctx.AttrInt("axis", 0));
      if (axis < 0) axis += static_cast<int64_t>(as.size());
      const int64_t trailing = static_cast<int64_t>(as.size()) - axis - static_cast<int64_t>(bs.size());
      if (axis < 0 || trailing < 0) return ctx.Invalid("axis does not fit B's rank");
      std::vector<int64_t> aligned(bs.begin(), bs.end());
      aligned.insert(aligned.end(), static_cast<size_t>(trailing), 1);
      ASSIGN_OR_RETURN(b, ctx.Emit("reshape", {b}, {{"shape", aligned}}));
    } else if (!broadcast && as != bs) {
      return ctx.Invalid("inputs of different shapes need broadcast=1 before opset 7");
    }
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({}));
  }
  if (ctx.type(a).dtype != ctx.type(b).dtype) {
    return ctx.Invalid("inputs have different dtypes (" + std::string(DTypeName(ctx.type(a).dtype)) + ", " +
                       std::string(DTypeName(ctx.type(b).dtype)) + ")");
  }
  // A constant per-channel scale or shift right after a Conv is folded into it (opset 7+:
  // numpy broadcasting, which the fold checks).
  if ((op == "mul" || op == "add") && ctx.opset() >= 7) {
    for (int conv_input : {0, 1}) {
      ASSIGN_OR_RETURN(std::optional<ValueId> folded, FoldScaleOrShiftIntoConv(ctx, op, conv_input));
      if (folded) return SetResult(ctx, *folded);
    }
  }
  return SetResult(ctx, ctx.Emit(op, {a, b}));
}

// Max, Min, Sum: a left fold, ((x0 op x1) op x2) ...
Status Variadic(NodeContext& ctx, std::string_view op) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  if (ctx.num_inputs() < 1) return ctx.Invalid("needs at least one input");
  ASSIGN_OR_RETURN(ValueId acc, ctx.RequiredInput(0));
  if (ctx.num_inputs() == 1) return SetResult(ctx, ctx.Emit("identity", {acc}));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(ValueId next, ctx.RequiredInput(i));
    ASSIGN_OR_RETURN(acc, ctx.Emit(op, {acc, next}));
  }
  ctx.SetOutput(0, acc);
  return OkStatus();
}

Status Mean(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId acc, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireFloat(ctx, acc, "the inputs"));
  const DType dtype = ctx.type(acc).dtype;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(ValueId next, ctx.RequiredInput(i));
    ASSIGN_OR_RETURN(acc, ctx.Emit("add", {acc, next}));
  }
  return SetResult(ctx, ctx.Emit("div", {acc, ctx.Scalar(dtype, static_cast<double>(ctx.num_inputs()))}));
}

// Pow with an integer base (DETERMINISM.md 4.2): an exponent of the base's dtype gives the
// exact integer power (pow on integers); another integer exponent computes in i64 and casts
// back (the same low bits); an f32 exponent computes in f32 (base cast to f32, detmath pow)
// and casts the result back (truncation, saturation, NaN -> 0).
Status IntegerPow(NodeContext& ctx, ValueId x, ValueId y) {
  const DType xt = ctx.type(x).dtype, yt = ctx.type(y).dtype;
  if (yt == xt) return SetResult(ctx, ctx.Emit("pow", {x, y}));
  if (IsIntegerDType(yt)) {
    ASSIGN_OR_RETURN(ValueId x64, ctx.Emit("cast", {x}, {{"to", DType::kI64}}));
    ASSIGN_OR_RETURN(ValueId y64, ctx.Emit("cast", {y}, {{"to", DType::kI64}}));
    ASSIGN_OR_RETURN(ValueId p, ctx.Emit("pow", {x64, y64}));
    return SetResult(ctx, ctx.Emit("cast", {p}, {{"to", xt}}));
  }
  if (yt != DType::kF32) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(yt)) + " for the exponent of an integer base");
  }
  ASSIGN_OR_RETURN(ValueId xf, ctx.Emit("cast", {x}, {{"to", DType::kF32}}));
  ASSIGN_OR_RETURN(ValueId p, ctx.Emit("pow", {xf, y}));
  return SetResult(ctx, ctx.Emit("cast", {p}, {{"to", xt}}));
}

Status Pow(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId y, ctx.RequiredInput(1));
  if (IsIntegerDType(ctx.type(x).dtype)) return IntegerPow(ctx, x, y);
  RETURN_IF_ERROR(RequireFloat(ctx, x, "the base"));
  const DType dtype = ctx.type(x).dtype;
  if (ctx.type(y).dtype != dtype) {
    // Other exponent dtypes are converted to the base's (integers exact below 2^24 in f32,
    // 2^53 in f64), then detmath pow.
    ASSIGN_OR_RETURN(y, ctx.Emit("cast", {y}, {{"to", dtype}}));
  }
  return SetResult(ctx, ctx.Emit("pow", {x, y}));
}

Status Reciprocal(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireFloat(ctx, x, "the input"));
  return SetResult(ctx, ctx.Emit("div", {ctx.Scalar(ctx.type(x).dtype, 1.0), x}));
}

// softplus(x) = log(exp(x) + 1)
Status Softplus(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {x}));
  ASSIGN_OR_RETURN(ValueId s, ctx.Emit("add", {e, ctx.ScalarF32(1.0f)}));
  return SetResult(ctx, ctx.Emit("log", {s}));
}

// x < 0 ? alpha * x : x
Status LeakyRelu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 0.01f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("less", {x, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {x, ctx.ScalarF32(alpha)}));
  return SetResult(ctx, ctx.Emit("where", {neg, scaled, x}));
}

// x < 0 ? alpha * (exp(x) - 1) : x
Status Elu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("less", {x, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {x}));
  ASSIGN_OR_RETURN(ValueId em1, ctx.Emit("sub", {e, ctx.ScalarF32(1.0f)}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {em1, ctx.ScalarF32(alpha)}));
  return SetResult(ctx, ctx.Emit("where", {neg, scaled, x}));
}

// x > 0 ? gamma * x : gamma * (alpha * exp(x) - alpha)
Status Selu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha", "gamma"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 1.67326319217681884765625f));
  ASSIGN_OR_RETURN(float gamma, ctx.AttrFloat("gamma", 1.05070102214813232421875f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId pos, ctx.Emit("greater", {x, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {x}));
  ASSIGN_OR_RETURN(ValueId ae, ctx.Emit("mul", {e, ctx.ScalarF32(alpha)}));
  ASSIGN_OR_RETURN(ValueId neg_part, ctx.Emit("sub", {ae, ctx.ScalarF32(alpha)}));
  ASSIGN_OR_RETURN(ValueId chosen, ctx.Emit("where", {pos, x, neg_part}));
  return SetResult(ctx, ctx.Emit("mul", {chosen, ctx.ScalarF32(gamma)}));
}

// max(0, min(1, alpha * x + beta))
Status HardSigmoid(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha", "beta"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 0.2f));
  ASSIGN_OR_RETURN(float beta, ctx.AttrFloat("beta", 0.5f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId ax, ctx.Emit("mul", {x, ctx.ScalarF32(alpha)}));
  ASSIGN_OR_RETURN(ValueId lin, ctx.Emit("add", {ax, ctx.ScalarF32(beta)}));
  ASSIGN_OR_RETURN(ValueId hi, ctx.Emit("min", {lin, ctx.ScalarF32(1.0f)}));
  return SetResult(ctx, ctx.Emit("max", {hi, ctx.ScalarF32(0.0f)}));
}

// min(max(x, lo), hi); bounds are inputs from opset 11, attributes before.
Status Clip(NodeContext& ctx) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const DType dtype = ctx.type(x).dtype;
  std::optional<ValueId> lo, hi;
  if (ctx.opset() < 11) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"min", "max"}));
    if (ctx.has_attr("min")) {
      ASSIGN_OR_RETURN(float v, ctx.AttrFloat("min", 0.0f));
      lo = ctx.Scalar(dtype, v);
    }
    if (ctx.has_attr("max")) {
      ASSIGN_OR_RETURN(float v, ctx.AttrFloat("max", 0.0f));
      hi = ctx.Scalar(dtype, v);
    }
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({}));
    if (ctx.has_input(1)) lo = ctx.input(1);
    if (ctx.has_input(2)) hi = ctx.input(2);
  }
  ValueId y = x;
  if (lo) {
    ASSIGN_OR_RETURN(y, ctx.Emit("max", {y, *lo}));
  }
  if (hi) {
    ASSIGN_OR_RETURN(y, ctx.Emit("min", {y, *hi}));
  }
  if (!lo && !hi) {
    ASSIGN_OR_RETURN(y, ctx.Emit("identity", {x}));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status Where(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId c, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(1));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(2));
  return SetResult(ctx, ctx.Emit("where", {c, a, b}));
}

Status Cast(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"to", "saturate"}));
  ASSIGN_OR_RETURN(int64_t to, ctx.AttrInt("to", 0));
  ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(static_cast<int32_t>(to), "the target of " + ctx.Where()));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  return SetResult(ctx, ctx.Emit("cast", {x}, {{"to", dtype}}));
}

// CastLike: Cast to the dtype of the second input (whose values are not read).
Status CastLike(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"saturate"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId like, ctx.RequiredInput(1));
  return SetResult(ctx, ctx.Emit("cast", {x}, {{"to", ctx.type(like).dtype}}));
}

// Inference: the data passes through; the optional mask is all true.
Status Dropout(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"ratio", "seed", "is_test"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  if (ctx.has_input(2)) {
    const Tensor* training = ctx.input_constant(2);
    if (!training) return ctx.Unsupported("training_mode " + std::string(kComputedAtRunTime));
    // Training drops elements at random, which no two operators could agree on; only a
    // ratio of 0 (nothing dropped) is deterministic.
    if (training->num_elements() != 1 || training->data()[0] != 0) {
      double ratio = 0.5;
      if (ctx.has_input(1)) {
        ASSIGN_OR_RETURN(ratio, ctx.ConstantScalar(1, "ratio"));
      }
      if (ratio != 0.0) return ctx.Unsupported("training_mode = true (random dropout)");
    }
  }
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("identity", {x}));
  ctx.SetOutput(0, y);
  if (ctx.wants_output(1)) {
    Tensor mask(DType::kBool, ctx.type(x).shape);
    std::fill(mask.data(), mask.data() + mask.byte_size(), uint8_t{1});
    ctx.SetOutput(1, ctx.Constant(std::move(mask)));
  }
  return OkStatus();
}

// x < 0 ? slope * x : x, with the slope broadcast.
Status PRelu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId slope, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  const Shape& xs = ctx.type(x).shape;
  const Shape& ss = ctx.type(slope).shape;
  if (ctx.opset() < 7 && ss.size() == 1 && xs.size() >= 2 && ss[0] == xs[1]) {
    // Before opset 7 a [C] slope is per channel (dim 1), not numpy-aligned to the last dim.
    std::vector<int64_t> per_channel(xs.size() - 1, 1);
    per_channel[0] = ss[0];
    ASSIGN_OR_RETURN(slope, ctx.Emit("reshape", {slope}, {{"shape", per_channel}}));
  }
  ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("less", {x, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {x, slope}));
  return SetResult(ctx, ctx.Emit("where", {neg, scaled, x}));
}

// x > alpha ? x : 0
Status ThresholdedRelu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId above, ctx.Emit("greater", {x, ctx.ScalarF32(alpha)}));
  return SetResult(ctx, ctx.Emit("where", {above, x, ctx.ScalarF32(0.0f)}));
}

// x > 0 ? 1 : (x < 0 ? -1 : x * 0); the last term keeps zeros zero and NaN NaN.
Status Sign(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const DType d = ctx.type(x).dtype;
  if (d == DType::kBool) return ctx.Unsupported("dtype bool for the input");
  ASSIGN_OR_RETURN(ValueId pos, ctx.Emit("greater", {x, ctx.Scalar(d, 0)}));
  ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("less", {x, ctx.Scalar(d, 0)}));
  ASSIGN_OR_RETURN(ValueId zero, ctx.Emit("mul", {x, ctx.Scalar(d, 0)}));
  ASSIGN_OR_RETURN(ValueId rest, ctx.Emit("where", {neg, ctx.Scalar(d, -1), zero}));
  return SetResult(ctx, ctx.Emit("where", {pos, ctx.Scalar(d, 1), rest}));
}

Status IsNaN(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  return SetResult(ctx, ctx.Emit("not_equal", {x, x}));
}

Status IsInf(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"detect_negative", "detect_positive"}));
  ASSIGN_OR_RETURN(int64_t negative, ctx.AttrInt("detect_negative", 1));
  ASSIGN_OR_RETURN(int64_t positive, ctx.AttrInt("detect_positive", 1));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  const float inf = std::numeric_limits<float>::infinity();
  ASSIGN_OR_RETURN(ValueId pos, ctx.Emit("equal", {x, ctx.ScalarF32(inf)}));
  ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("equal", {x, ctx.ScalarF32(-inf)}));
  if (positive && negative) return SetResult(ctx, ctx.Emit("or", {pos, neg}));
  if (positive) return SetResult(ctx, ctx.Emit("identity", {pos}));
  if (negative) return SetResult(ctx, ctx.Emit("identity", {neg}));
  return SetResult(ctx, ctx.Emit("and", {pos, neg}));  // never both: all false
}

// x / (1 + |x|)
Status Softsign(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId a, ctx.Emit("abs", {x}));
  ASSIGN_OR_RETURN(ValueId d, ctx.Emit("add", {a, ctx.ScalarF32(1.0f)}));
  return SetResult(ctx, ctx.Emit("div", {x, d}));
}

// x * max(0, min(1, x / 6 + 0.5)), the multiply by 1/6 rounded as a float.
Status HardSwish(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId ax, ctx.Emit("mul", {x, ctx.ScalarF32(1.0f / 6.0f)}));
  ASSIGN_OR_RETURN(ValueId lin, ctx.Emit("add", {ax, ctx.ScalarF32(0.5f)}));
  ASSIGN_OR_RETURN(ValueId hi, ctx.Emit("min", {lin, ctx.ScalarF32(1.0f)}));
  ASSIGN_OR_RETURN(ValueId gate, ctx.Emit("max", {hi, ctx.ScalarF32(0.0f)}));
  return SetResult(ctx, ctx.Emit("mul", {x, gate}));
}

// x < -lambd ? x + bias : (x > lambd ? x - bias : 0)
Status Shrink(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"bias", "lambd"}));
  ASSIGN_OR_RETURN(float bias, ctx.AttrFloat("bias", 0.0f));
  ASSIGN_OR_RETURN(float lambd, ctx.AttrFloat("lambd", 0.5f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId low, ctx.Emit("less", {x, ctx.ScalarF32(-lambd)}));
  ASSIGN_OR_RETURN(ValueId high, ctx.Emit("greater", {x, ctx.ScalarF32(lambd)}));
  ASSIGN_OR_RETURN(ValueId plus, ctx.Emit("add", {x, ctx.ScalarF32(bias)}));
  ASSIGN_OR_RETURN(ValueId minus, ctx.Emit("sub", {x, ctx.ScalarF32(bias)}));
  ASSIGN_OR_RETURN(ValueId upper, ctx.Emit("where", {high, minus, ctx.ScalarF32(0.0f)}));
  return SetResult(ctx, ctx.Emit("where", {low, plus, upper}));
}

// max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
Status Celu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId pos, ctx.Emit("max", {x, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId xa, ctx.Emit("div", {x, ctx.ScalarF32(alpha)}));
  ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {xa}));
  ASSIGN_OR_RETURN(ValueId em1, ctx.Emit("sub", {e, ctx.ScalarF32(1.0f)}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {em1, ctx.ScalarF32(alpha)}));
  ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("min", {scaled, ctx.ScalarF32(0.0f)}));
  return SetResult(ctx, ctx.Emit("add", {pos, neg}));
}

// fmod = 1: `fmod` (the remainder takes the dividend's sign; the only mode ONNX allows for
// floats). fmod = 0, integers: the remainder takes the divisor's sign, so a nonzero `fmod`
// result whose sign differs from the divisor's moves by one divisor.
Status Mod(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"fmod"}));
  ASSIGN_OR_RETURN(int64_t fmod_mode, ctx.AttrInt("fmod", 0));
  if (fmod_mode != 0 && fmod_mode != 1) return ctx.Invalid("attribute fmod must be 0 or 1");
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(1));
  const DType dtype = ctx.type(a).dtype;
  if (dtype != ctx.type(b).dtype) return ctx.Invalid("inputs have different dtypes");
  if ((IsFloatDType(dtype) || IsHalfDType(dtype)) && fmod_mode == 0) {
    return ctx.Invalid("floating-point inputs need fmod = 1");
  }
  ASSIGN_OR_RETURN(ValueId r, ctx.Emit("fmod", {a, b}));
  if (fmod_mode == 1) return SetResult(ctx, StatusOr<ValueId>(r));
  const ValueId zero = ctx.Scalar(dtype, 0.0);
  ASSIGN_OR_RETURN(ValueId nonzero, ctx.Emit("not_equal", {r, zero}));
  ASSIGN_OR_RETURN(ValueId r_negative, ctx.Emit("less", {r, zero}));
  ASSIGN_OR_RETURN(ValueId b_negative, ctx.Emit("less", {b, zero}));
  ASSIGN_OR_RETURN(ValueId signs_differ, ctx.Emit("xor", {r_negative, b_negative}));
  ASSIGN_OR_RETURN(ValueId adjust, ctx.Emit("and", {nonzero, signs_differ}));
  ASSIGN_OR_RETURN(ValueId moved, ctx.Emit("add", {r, b}));
  return SetResult(ctx, ctx.Emit("where", {adjust, moved, r}));
}

// Unsigned integers only (DETERMINISM.md 4.2): x << y = mul(x, p) and x >> y = div(x, p) with
// p = 2^y modulo 2^n, looked up in the constant table [1, 2, ..., 2^(n-1), 0] at min(y, n), so
// a shift by n bits or more gives 0. No kernel of its own: min, cast, gather, mul / div.
Status BitShift(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"direction"}));
  ASSIGN_OR_RETURN(std::string direction, ctx.AttrString("direction", ""));
  if (direction != "LEFT" && direction != "RIGHT") return ctx.Invalid("attribute direction must be LEFT or RIGHT");
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId y, ctx.RequiredInput(1));
  const DType dtype = ctx.type(x).dtype;
  if (ctx.type(y).dtype != dtype) return ctx.Invalid("inputs have different dtypes");
  if (!IsUnsignedIntegerDType(dtype)) {
    return ctx.Unsupported("BitShift of " + std::string(DTypeName(dtype)) + " (ONNX defines it for unsigned integers)");
  }
  const int64_t size = DTypeSize(dtype), bits = 8 * size;
  Tensor table(dtype, {bits + 1});
  for (int64_t k = 0; k <= bits; ++k) {
    const uint64_t p = k < bits ? uint64_t{1} << k : 0;
    std::memcpy(table.data() + k * size, &p, static_cast<size_t>(size));  // the low bytes (little-endian)
  }
  ASSIGN_OR_RETURN(ValueId k, ctx.Emit("min", {y, ctx.Scalar(dtype, static_cast<double>(bits))}));
  ASSIGN_OR_RETURN(ValueId index, ctx.Emit("cast", {k}, {{"to", DType::kI64}}));
  ASSIGN_OR_RETURN(ValueId p, ctx.Emit("gather", {ctx.Constant(std::move(table)), index}, {{"axis", int64_t{0}}}));
  return SetResult(ctx, ctx.Emit(direction == "LEFT" ? "mul" : "div", {x, p}));
}

// sin(x) / cos(x)
Status Tan(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(ValueId s, ctx.Emit("sin", {x}));
  ASSIGN_OR_RETURN(ValueId c, ctx.Emit("cos", {x}));
  return SetResult(ctx, ctx.Emit("div", {s, c}));
}

}  // namespace

const std::vector<OpConverter>& ElementwiseConverters() {
  static const std::vector<OpConverter> table = {
      {"Abs", [](NodeContext& c) { return Unary(c, "abs", false); }},
      {"Neg", [](NodeContext& c) { return Unary(c, "neg", false); }},
      {"Relu", [](NodeContext& c) { return Unary(c, "relu", false); }},
      {"Exp", [](NodeContext& c) { return Unary(c, "exp", true); }},
      {"Log", [](NodeContext& c) { return Unary(c, "log", true); }},
      {"Sqrt", [](NodeContext& c) { return Unary(c, "sqrt", true); }},
      {"Tanh", [](NodeContext& c) { return Unary(c, "tanh", true); }},
      {"Sigmoid", [](NodeContext& c) { return Unary(c, "sigmoid", true); }},
      {"Erf", [](NodeContext& c) { return Unary(c, "erf", true); }},
      {"Sin", [](NodeContext& c) { return Unary(c, "sin", true); }},
      {"Cos", [](NodeContext& c) { return Unary(c, "cos", true); }},
      {"Floor", [](NodeContext& c) { return Unary(c, "floor", true); }},
      {"Ceil", [](NodeContext& c) { return Unary(c, "ceil", true); }},
      {"Round", [](NodeContext& c) { return Unary(c, "round", true); }},
      {"Mod", Mod},
      {"Not", [](NodeContext& c) { return Unary(c, "not", false); }},
      {"Identity", [](NodeContext& c) { return Unary(c, "identity", false); }},
      {"Add", [](NodeContext& c) { return Binary(c, "add"); }},
      {"Sub", [](NodeContext& c) { return Binary(c, "sub"); }},
      {"Mul", [](NodeContext& c) { return Binary(c, "mul"); }},
      {"Div", [](NodeContext& c) { return Binary(c, "div"); }},
      {"Equal", [](NodeContext& c) { return Binary(c, "equal"); }},
      {"Less", [](NodeContext& c) { return Binary(c, "less"); }},
      {"LessOrEqual", [](NodeContext& c) { return Binary(c, "less_equal"); }},
      {"Greater", [](NodeContext& c) { return Binary(c, "greater"); }},
      {"GreaterOrEqual", [](NodeContext& c) { return Binary(c, "greater_equal"); }},
      {"And", [](NodeContext& c) { return Binary(c, "and"); }},
      {"Or", [](NodeContext& c) { return Binary(c, "or"); }},
      {"Xor", [](NodeContext& c) { return Binary(c, "xor"); }},
      {"Max", [](NodeContext& c) { return Variadic(c, "max"); }},
      {"Min", [](NodeContext& c) { return Variadic(c, "min"); }},
      {"Sum", [](NodeContext& c) { return Variadic(c, "add"); }},
      {"Mean", Mean},
      {"Pow", Pow},
      {"Reciprocal", Reciprocal},
      {"Softplus", ThroughF32<Softplus>},
      {"LeakyRelu", ThroughF32<LeakyRelu>},
      {"Elu", ThroughF32<Elu>},
      {"Selu", ThroughF32<Selu>},
      {"HardSigmoid", ThroughF32<HardSigmoid>},
      {"Clip", Clip},
      {"Where", Where},
      {"Cast", Cast},
      {"Dropout", Dropout},
      {"PRelu", ThroughF32<PRelu>},
      {"ThresholdedRelu", ThroughF32<ThresholdedRelu>},
      {"Sign", Sign},
      {"IsNaN", ThroughF32<IsNaN>},
      {"IsInf", ThroughF32<IsInf>},
      {"Softsign", ThroughF32<Softsign>},
      {"HardSwish", ThroughF32<HardSwish>},
      {"Shrink", ThroughF32<Shrink>},
      {"Celu", ThroughF32<Celu>},
      {"Tan", ThroughF32<Tan>},
      {"BitShift", BitShift},
      {"CastLike", CastLike},
      {"Asin", [](NodeContext& c) { return Unary(c, "asin", true); }},
      {"Acos", [](NodeContext& c) { return Unary(c, "acos", true); }},
      {"Atan", [](NodeContext& c) { return Unary(c, "atan", true); }},
      {"Sinh", [](NodeContext& c) { return Unary(c, "sinh", true); }},
      {"Cosh", [](NodeContext& c) { return Unary(c, "cosh", true); }},
      {"Asinh", [](NodeContext& c) { return Unary(c, "asinh", true); }},
      {"Acosh", [](NodeContext& c) { return Unary(c, "acosh", true); }},
      {"Atanh", [](NodeContext& c) { return Unary(c, "atanh", true); }},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
