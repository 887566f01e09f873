// ONNX quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// ConvInteger, QLinearMatMul and QLinearConv, lowered to section-4 ops (docs/DETERMINISM.md
// 6.6; the op sequences are in docs/ONNX.md). Quantized tensors are i8 or u8, scales f32,
// accumulators i32. Integer products run on `matmul_i8`: a u8 operand is shifted to i8 by
// subtracting 128, and the zero points and that shift come back as exact i32 correction
// terms, so the sum is the spec's modulo 2^32 whatever the operand dtypes.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

bool IsQuantizedDType(DType d) { return d == DType::kI8 || d == DType::kU8; }

std::string Name(DType d) { return std::string(DTypeName(d)); }

// A scale or zero point: rank 0, [1], or (when per_axis_len > 0) [per_axis_len]. Returns it
// as a scalar or as a 1-D value of per_axis_len elements; nullopt when the input is absent.
// `want` is the dtype it must have.
StatusOr<std::optional<ValueId>> ReadParam(NodeContext& ctx, int i, std::string_view role, DType want,
                                           int64_t per_axis_len) {
  if (!ctx.has_input(i)) return std::optional<ValueId>();
  const ValueId v = ctx.input(i);
  const TypeInfo t = ctx.type(v);
  if (t.dtype != want) {
    return ctx.Invalid(std::string(role) + " must be " + Name(want) + ", got " + Name(t.dtype));
  }
  if (t.shape.empty()) return std::optional<ValueId>(v);
  if (t.shape.size() == 1 && t.shape[0] == 1) {
    ASSIGN_OR_RETURN(ValueId s, ReshapeTo(ctx, v, {}));
    return std::optional<ValueId>(s);
  }
  if (t.shape.size() == 1 && per_axis_len > 0 && t.shape[0] == per_axis_len) return std::optional<ValueId>(v);
  std::string allowed = "a scalar or a one-element 1-D tensor";
  if (per_axis_len > 0) allowed += " or [" + std::to_string(per_axis_len) + "]";
  return ctx.Invalid(std::string(role) + " has shape " + ShapeToString(t.shape) + "; it must be " + allowed);
}

// A 1-D per-axis parameter reshaped to [n, 1, ...] so that it broadcasts along dim `axis` of a
// rank-`rank` tensor; a scalar is returned unchanged.
StatusOr<ValueId> AlongAxis(NodeContext& ctx, ValueId v, int64_t rank, int64_t axis) {
  const Shape s = ctx.type(v).shape;
  if (s.empty()) return v;
  Shape target = {s[0]};
  for (int64_t d = axis + 1; d < rank; ++d) target.push_back(1);
  return ReshapeTo(ctx, v, target);
}

// The quantized dtype of a zero point input, or `fallback` when it is absent.
StatusOr<DType> QuantizedDType(NodeContext& ctx, int i, std::string_view role, DType fallback) {
  if (!ctx.has_input(i)) return fallback;
  const DType d = ctx.type(ctx.input(i)).dtype;
  if (!IsQuantizedDType(d)) return ctx.Unsupported(std::string(role) + " dtype " + Name(d) + " (i8 or u8 only)");
  return d;
}

// sat_T(rounded + f32(zero_point)): the tail shared by QuantizeLinear and the requantization
// of QLinearMatMul / QLinearConv (docs/DETERMINISM.md 6.6). `rounded` is an integral f32.
StatusOr<ValueId> AddZeroPointAndSaturate(NodeContext& ctx, ValueId rounded, std::optional<ValueId> zero_point,
                                          DType out) {
  ValueId v = rounded;
  if (zero_point) {
    ASSIGN_OR_RETURN(ValueId zf, ctx.Emit("cast", {*zero_point}, {{"to", DType::kF32}}));
    ASSIGN_OR_RETURN(v, ctx.Emit("add", {v, zf}));
  }
  return ctx.Emit("cast", {v}, {{"to", out}});
}

// q(x, s, z) = sat_T(rhe(x / s) + f32(z)).
StatusOr<ValueId> Quantize(NodeContext& ctx, ValueId x, ValueId scale, std::optional<ValueId> zero_point, DType out) {
  ASSIGN_OR_RETURN(ValueId q, ctx.Emit("div", {x, scale}));
  ASSIGN_OR_RETURN(q, ctx.Emit("round", {q}));
  return AddZeroPointAndSaturate(ctx, q, zero_point, out);
}

// The `axis` attribute (default 1) and the length of that dim of x. The axis only matters for
// per-axis parameters: when it is outside x's rank (a rank-1 x with the default), len is 0 and
// only scalar parameters are accepted.
struct QuantAxis {
  int64_t axis = 0;
  int64_t len = 0;
};
StatusOr<QuantAxis> ReadQuantAxis(const NodeContext& ctx, const Shape& x) {
  QuantAxis a;
  ASSIGN_OR_RETURN(int64_t attr, ctx.AttrInt("axis", 1));
  const int64_t rank = static_cast<int64_t>(x.size());
  if (attr < -rank || attr >= rank) return a;
  a.axis = attr < 0 ? attr + rank : attr;
  a.len = x[a.axis];
  return a;
}

Status QuantizeLinear(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(ctx.RequiredInput(1).status());
  RETURN_IF_ERROR(RequireF32(ctx, x, "input x"));
  const Shape xs = ctx.type(x).shape;
  const int64_t rank = static_cast<int64_t>(xs.size());
  ASSIGN_OR_RETURN(QuantAxis axis, ReadQuantAxis(ctx, xs));
  ASSIGN_OR_RETURN(DType out, QuantizedDType(ctx, 2, "y_zero_point", DType::kU8));
  ASSIGN_OR_RETURN(std::optional<ValueId> scale, ReadParam(ctx, 1, "y_scale", DType::kF32, axis.len));
  ASSIGN_OR_RETURN(std::optional<ValueId> zp, ReadParam(ctx, 2, "y_zero_point", out, axis.len));
  ASSIGN_OR_RETURN(ValueId s, AlongAxis(ctx, *scale, rank, axis.axis));
  if (zp) {
    ASSIGN_OR_RETURN(zp, AlongAxis(ctx, *zp, rank, axis.axis));
  }
  return SetResult(ctx, Quantize(ctx, x, s, zp, out));
}

Status DequantizeLinear(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(ctx.RequiredInput(1).status());
  const DType xt = ctx.type(x).dtype;
  if (!IsQuantizedDType(xt) && xt != DType::kI32) {
    return ctx.Unsupported(std::string("input x dtype ") + Name(xt) + " (i8, u8 or i32 only)");
  }
  const Shape xs = ctx.type(x).shape;
  const int64_t rank = static_cast<int64_t>(xs.size());
  ASSIGN_OR_RETURN(QuantAxis axis, ReadQuantAxis(ctx, xs));
  ASSIGN_OR_RETURN(std::optional<ValueId> scale, ReadParam(ctx, 1, "x_scale", DType::kF32, axis.len));
  ASSIGN_OR_RETURN(std::optional<ValueId> zp, ReadParam(ctx, 2, "x_zero_point", xt, axis.len));
  ASSIGN_OR_RETURN(ValueId s, AlongAxis(ctx, *scale, rank, axis.axis));
  ValueId v = x;
  if (zp) {
    ASSIGN_OR_RETURN(ValueId z, AlongAxis(ctx, *zp, rank, axis.axis));
    ASSIGN_OR_RETURN(v, ctx.Emit("cast", {v}, {{"to", DType::kI32}}));
    ASSIGN_OR_RETURN(z, ctx.Emit("cast", {z}, {{"to", DType::kI32}}));
    ASSIGN_OR_RETURN(v, ctx.Emit("sub", {v, z}));
  }
  ASSIGN_OR_RETURN(v, ctx.Emit("cast", {v}, {{"to", DType::kF32}}));
  return SetResult(ctx, ctx.Emit("mul", {v, s}));
}

// The ONNX function body of DynamicQuantizeLinear, operation by operation.
Status DynamicQuantizeLinear(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "input x"));
  const Attributes all = {{"keepdims", int64_t{0}}};
  ASSIGN_OR_RETURN(ValueId lo, ctx.Emit("reduce_min", {x}, all));
  ASSIGN_OR_RETURN(lo, ctx.Emit("min", {lo, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId hi, ctx.Emit("reduce_max", {x}, all));
  ASSIGN_OR_RETURN(hi, ctx.Emit("max", {hi, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(ValueId scale, ctx.Emit("sub", {hi, lo}));
  ASSIGN_OR_RETURN(scale, ctx.Emit("div", {scale, ctx.ScalarF32(255.0f)}));
  ASSIGN_OR_RETURN(ValueId zf, ctx.Emit("div", {lo, scale}));
  ASSIGN_OR_RETURN(zf, ctx.Emit("sub", {ctx.ScalarF32(0.0f), zf}));
  ASSIGN_OR_RETURN(zf, ctx.Emit("max", {zf, ctx.ScalarF32(0.0f)}));
  ASSIGN_OR_RETURN(zf, ctx.Emit("min", {zf, ctx.ScalarF32(255.0f)}));
  ASSIGN_OR_RETURN(zf, ctx.Emit("round", {zf}));
  ASSIGN_OR_RETURN(ValueId zp, ctx.Emit("cast", {zf}, {{"to", DType::kU8}}));
  ASSIGN_OR_RETURN(ValueId y, Quantize(ctx, x, scale, zp, DType::kU8));
  ctx.SetOutput(0, y);
  ctx.SetOutput(1, scale);
  ctx.SetOutput(2, zp);
  return OkStatus();
}

// --- integer products ---

// An integer operand as matmul_i8 takes it: `shifted` (i8) plus an i32 `offset` such that
// int32(v) - int32(zero_point) == int32(shifted) + offset. u8 values are shifted by -128, so
// offset = 128 - zp; i8 values are used as they are, offset = -zp. No offset when it is a
// constant 0.
struct ShiftedOperand {
  ValueId shifted;
  std::optional<ValueId> offset;
};

bool IsConstantZero(const NodeContext& ctx, ValueId v) {
  const Tensor* t = ctx.constant(v);
  if (t == nullptr) return false;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    if (t->data_as<int32_t>()[i] != 0) return false;
  }
  return true;
}

StatusOr<ShiftedOperand> ShiftToI8(NodeContext& ctx, ValueId v, std::optional<ValueId> zero_point) {
  const bool is_u8 = ctx.type(v).dtype == DType::kU8;
  ShiftedOperand op{v, std::nullopt};
  if (is_u8) {
    ASSIGN_OR_RETURN(ValueId moved, ctx.Emit("sub", {v, ctx.Scalar(DType::kU8, 128)}));
    ASSIGN_OR_RETURN(op.shifted, ctx.Emit("cast", {moved}, {{"to", DType::kI8}}));
  }
  const ValueId base = ctx.Scalar(DType::kI32, is_u8 ? 128 : 0);
  if (!zero_point) {
    if (is_u8) op.offset = base;
    return op;
  }
  ASSIGN_OR_RETURN(ValueId z, ctx.Emit("cast", {*zero_point}, {{"to", DType::kI32}}));
  ASSIGN_OR_RETURN(ValueId offset, ctx.Emit("sub", {base, z}));
  if (!IsConstantZero(ctx, offset)) op.offset = offset;
  return op;
}

// sum_k (a_s + ca)(b_s + cb) = matmul_i8(a_s, b_s) + rowsum(a_s) * cb + ca * colsum(b_s)
// + K * ca * cb, all in i32 with wrap, which is exact modulo 2^32. a_s [..., M, K], b_s
// [..., K, N] (rank >= 2); ca broadcasts against [..., M, 1], cb against [..., 1, N].
StatusOr<ValueId> ShiftedMatMul(NodeContext& ctx, const ShiftedOperand& a, const ShiftedOperand& b) {
  const Shape as = ctx.type(a.shifted).shape;
  const Shape bs = ctx.type(b.shifted).shape;
  const int64_t k = as.back();
  ASSIGN_OR_RETURN(ValueId acc, ctx.Emit("matmul_i8", {a.shifted, b.shifted}));
  if (b.offset) {
    ASSIGN_OR_RETURN(ValueId wide, ctx.Emit("cast", {a.shifted}, {{"to", DType::kI32}}));
    ASSIGN_OR_RETURN(ValueId rows,
                     ctx.Emit("reduce_sum", {wide},
                              {{"axes", Ints{static_cast<int64_t>(as.size()) - 1}}, {"keepdims", int64_t{1}}}));
    ASSIGN_OR_RETURN(ValueId term, ctx.Emit("mul", {rows, *b.offset}));
    ASSIGN_OR_RETURN(acc, ctx.Emit("add", {acc, term}));
  }
  if (a.offset) {
    ASSIGN_OR_RETURN(ValueId wide, ctx.Emit("cast", {b.shifted}, {{"to", DType::kI32}}));
    ASSIGN_OR_RETURN(ValueId cols,
                     ctx.Emit("reduce_sum", {wide},
                              {{"axes", Ints{static_cast<int64_t>(bs.size()) - 2}}, {"keepdims", int64_t{1}}}));
    ASSIGN_OR_RETURN(ValueId term, ctx.Emit("mul", {*a.offset, cols}));
    ASSIGN_OR_RETURN(acc, ctx.Emit("add", {acc, term}));
  }
  if (a.offset && b.offset) {
    ASSIGN_OR_RETURN(ValueId both, ctx.Emit("mul", {*a.offset, *b.offset}));
    // K modulo 2^32 as an i32 (the product wraps anyway; K is below the element cap).
    const auto k_i32 = static_cast<int32_t>(static_cast<uint32_t>(k));
    ASSIGN_OR_RETURN(both, ctx.Emit("mul", {both, ctx.Scalar(DType::kI32, static_cast<double>(k_i32))}));
    ASSIGN_OR_RETURN(acc, ctx.Emit("add", {acc, both}));
  }
  return acc;
}

// The exact i32 product of MatMulInteger and QLinearMatMul. Inputs a, b (i8 / u8, numpy
// matmul shapes, rank-1 operands promoted and the added dim removed) with zero points
// (scalar; a's may be [M], b's [N]). `a_zp` and `b_zp` are input indices.
StatusOr<ValueId> IntegerMatMul(NodeContext& ctx, ValueId a, int a_zp, ValueId b, int b_zp) {
  const TypeInfo at = ctx.type(a);
  const TypeInfo bt = ctx.type(b);
  if (!IsQuantizedDType(at.dtype) || !IsQuantizedDType(bt.dtype)) {
    return ctx.Unsupported(std::string("operand dtypes ") + Name(at.dtype) + " x " + Name(bt.dtype) +
                           " (i8 or u8 only)");
  }
  if (at.shape.empty() || bt.shape.empty()) return ctx.Invalid("A and B must have rank 1 or more");
  const bool a_vector = at.shape.size() == 1;
  const bool b_vector = bt.shape.size() == 1;
  Shape as = at.shape;
  Shape bs = bt.shape;
  if (a_vector) as.insert(as.begin(), 1);
  if (b_vector) bs.push_back(1);
  ASSIGN_OR_RETURN(a, ReshapeTo(ctx, a, as));
  ASSIGN_OR_RETURN(b, ReshapeTo(ctx, b, bs));
  const int64_t m = as[as.size() - 2];
  const int64_t n = bs.back();
  ASSIGN_OR_RETURN(std::optional<ValueId> za, ReadParam(ctx, a_zp, "a_zero_point", at.dtype, m));
  ASSIGN_OR_RETURN(std::optional<ValueId> zb, ReadParam(ctx, b_zp, "b_zero_point", bt.dtype, n));
  ASSIGN_OR_RETURN(ShiftedOperand sa, ShiftToI8(ctx, a, za));
  ASSIGN_OR_RETURN(ShiftedOperand sb, ShiftToI8(ctx, b, zb));
  if (sa.offset) {
    ASSIGN_OR_RETURN(sa.offset, AlongAxis(ctx, *sa.offset, 2, 0));  // per row: [M, 1]
  }
  ASSIGN_OR_RETURN(ValueId acc, ShiftedMatMul(ctx, sa, sb));
  Shape out = ctx.type(acc).shape;
  if (a_vector) out.erase(out.end() - 2);
  if (b_vector) out.pop_back();
  return ReshapeTo(ctx, acc, out);
}

Status MatMulInteger(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(1));
  return SetResult(ctx, IntegerMatMul(ctx, a, 2, b, 3));
}

// sat_T(rhe(f32(acc) * m) + f32(y_zp)) with m = (s_a * s_b) / s_y.
StatusOr<ValueId> Requantize(NodeContext& ctx, ValueId acc, ValueId scale_a, ValueId scale_b, ValueId scale_y,
                             std::optional<ValueId> y_zp, DType out) {
  ASSIGN_OR_RETURN(ValueId m, ctx.Emit("mul", {scale_a, scale_b}));
  ASSIGN_OR_RETURN(m, ctx.Emit("div", {m, scale_y}));
  ASSIGN_OR_RETURN(ValueId v, ctx.Emit("cast", {acc}, {{"to", DType::kF32}}));
  ASSIGN_OR_RETURN(v, ctx.Emit("mul", {v, m}));
  ASSIGN_OR_RETURN(v, ctx.Emit("round", {v}));
  return AddZeroPointAndSaturate(ctx, v, y_zp, out);
}

Status QLinearMatMul(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(3));
  for (int i : {1, 4, 6}) RETURN_IF_ERROR(ctx.RequiredInput(i).status());
  ASSIGN_OR_RETURN(DType out, QuantizedDType(ctx, 7, "y_zero_point", DType::kU8));
  ASSIGN_OR_RETURN(ValueId acc, IntegerMatMul(ctx, a, 2, b, 5));
  const Shape as = ctx.type(a).shape;
  const Shape bs = ctx.type(b).shape;
  const int64_t m = as.size() >= 2 ? as[as.size() - 2] : 0;
  const int64_t n = bs.size() >= 2 ? bs.back() : 0;
  ASSIGN_OR_RETURN(std::optional<ValueId> sa, ReadParam(ctx, 1, "a_scale", DType::kF32, m));
  ASSIGN_OR_RETURN(std::optional<ValueId> sb, ReadParam(ctx, 4, "b_scale", DType::kF32, n));
  ASSIGN_OR_RETURN(std::optional<ValueId> sy, ReadParam(ctx, 6, "y_scale", DType::kF32, n));
  ASSIGN_OR_RETURN(std::optional<ValueId> zy, ReadParam(ctx, 7, "y_zero_point", out, n));
  ASSIGN_OR_RETURN(ValueId sa_rows, AlongAxis(ctx, *sa, 2, 0));  // per row: [M, 1]
  return SetResult(ctx, Requantize(ctx, acc, sa_rows, *sb, *sy, zy, out));
}

// Elements of one band of ConvInteger's im2col matrix (IntegerConv): 16 Mi i8, so its i32 row
// sums take 64 MiB.
constexpr int64_t kIm2colBandElements = int64_t{1} << 24;

// The exact i32 convolution of ConvInteger and QLinearConv, 1-D or 2-D: x [N, C, (H,) W],
// w [F, C/group, (KH,) KW], zero points at input indices x_zp (scalar) and w_zp (scalar or
// [F]). Padding positions take the zero point's value, so they add 0. im2col by two gathers
// of the padded input, then one batched matmul_i8 over the groups. Returns [N, F, (OH,) OW].
StatusOr<ValueId> IntegerConv(NodeContext& ctx, ValueId x, int x_zp, ValueId w, int w_zp) {
  const TypeInfo xt = ctx.type(x);
  const TypeInfo wt = ctx.type(w);
  if (!IsQuantizedDType(xt.dtype) || !IsQuantizedDType(wt.dtype)) {
    return ctx.Unsupported(std::string("operand dtypes ") + Name(xt.dtype) + " x " + Name(wt.dtype) +
                           " (i8 or u8 only)");
  }
  const Shape xs0 = xt.shape;
  const Shape ws0 = wt.shape;
  if (xs0.size() != ws0.size() || xs0.size() < 3) return ctx.Invalid("X and W must have the same rank, at least 3");
  if (xs0.size() > 4) {
    return ctx.Unsupported("attribute kernel_shape with " + std::to_string(xs0.size() - 2) + " spatial dims");
  }
  Ints kernel(ws0.begin() + 2, ws0.end());
  ASSIGN_OR_RETURN(Ints kernel_attr, ctx.AttrInts("kernel_shape", kernel));
  if (kernel_attr != kernel) return ctx.Invalid("kernel_shape does not match the weight's shape");
  ASSIGN_OR_RETURN(int64_t group, ctx.AttrInt("group", 1));
  ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, xs0, kernel));
  // Bounded before any arithmetic on them, so no size below can overflow.
  for (int64_t p : win.pads) {
    if (p < 0 || p > ctx.limits().max_elements_per_tensor) {
      return ctx.Invalid("pads must be in [0, " + std::to_string(ctx.limits().max_elements_per_tensor) + "]");
    }
  }
  for (size_t i = 0; i < win.strides.size(); ++i) {
    if (win.strides[i] > 4096 || win.dilations[i] > 4096)
      return ctx.Invalid("strides and dilations must be in [1, 4096]");
  }
  const bool one_d = xs0.size() == 3;
  if (one_d) {  // a height of 1
    win = Window{{1, win.kernel[0]}, {1, win.strides[0]}, {1, win.dilations[0]}, {0, win.pads[0], 0, win.pads[1]}};
  }
  const int64_t n = xs0[0], c = xs0[1], f = ws0[0];
  const int64_t h = one_d ? 1 : xs0[2], wd = xs0.back();
  const int64_t kh = win.kernel[0], kw = win.kernel[1];
  if (group < 1 || c % group != 0 || f % group != 0 || ws0[1] != c / group) {
    return ctx.Invalid("W " + ShapeToString(ws0) + " does not fit X " + ShapeToString(xs0) + " with group " +
                       std::to_string(group));
  }
  const int64_t top = win.pads[0], left = win.pads[1], bottom = win.pads[2], right = win.pads[3];
  const int64_t hp = h + top + bottom, wp = wd + left + right;
  // Bounds every size below (an empty batch still builds the tables, so it counts as 1).
  const double images = static_cast<double>(std::max<int64_t>(n, 1));
  const double cap = static_cast<double>(ctx.limits().max_elements_per_tensor);
  if (images * static_cast<double>(c) * static_cast<double>(hp) * static_cast<double>(wp) > cap ||
      static_cast<double>(hp) * static_cast<double>(wp) > cap) {
    return ctx.Invalid("the padded input " + std::to_string(hp) + " x " + std::to_string(wp) +
                       " exceeds the element cap");
  }
  const int64_t oh_span = hp - win.dilations[0] * (kh - 1) - 1;
  const int64_t ow_span = wp - win.dilations[1] * (kw - 1) - 1;
  if (oh_span < 0 || ow_span < 0) return ctx.Invalid("the kernel is larger than the padded input");
  const int64_t oh = oh_span / win.strides[0] + 1, ow = ow_span / win.strides[1] + 1;
  const int64_t cg = c / group, fg = f / group, q = cg * kh * kw;
  // The im2col matrix is built in bands of output rows of at most kIm2colBandElements each (at
  // least one row), a constant, so the graph does not depend on the local caps; the i32
  // products are exact, so bands change no bit. A single row must fit the element cap.
  const double row_elements =
      static_cast<double>(ow) * static_cast<double>(c) * static_cast<double>(kh) * static_cast<double>(kw) * images;
  if (row_elements > cap) {
    return ctx.Invalid("the im2col matrix of one output row, " + std::to_string(ow) + " x " +
                       std::to_string(c * kh * kw) + " per image, exceeds the element cap");
  }
  const int64_t band_rows =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(kIm2colBandElements) / row_elements));
  ASSIGN_OR_RETURN(std::optional<ValueId> zx, ReadParam(ctx, x_zp, "x_zero_point", xt.dtype, 0));
  ASSIGN_OR_RETURN(std::optional<ValueId> zw, ReadParam(ctx, w_zp, "w_zero_point", wt.dtype, f));

  ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, {n, c, h, wd}));
  if (top + left + bottom + right > 0) {
    // Padding takes the zero point's value (0 without one): pad with 0, then `where` over a
    // constant mask of the in-input positions puts the zero point in the border.
    ASSIGN_OR_RETURN(x, ctx.Emit("pad", {x}, {{"pads", Ints{0, 0, top, left, 0, 0, bottom, right}}, {"value", 0.0f}}));
    if (zx) {
      Tensor inside(DType::kBool, {1, 1, hp, wp});
      for (int64_t i = 0; i < hp; ++i) {
        for (int64_t j = 0; j < wp; ++j) {
          inside.data()[i * wp + j] = i >= top && i < top + h && j >= left && j < left + wd;
        }
      }
      ASSIGN_OR_RETURN(x, ctx.Emit("where", {ctx.Constant(std::move(inside)), x, *zx}));
    }
  }
  ASSIGN_OR_RETURN(ShiftedOperand sx, ShiftToI8(ctx, x, zx));
  ASSIGN_OR_RETURN(ShiftedOperand sw, ShiftToI8(ctx, w, zw));

  // weights [F, C/g, KH, KW] -> [g, Q, F/g]
  ASSIGN_OR_RETURN(ValueId wq, ReshapeTo(ctx, sw.shifted, {group, fg, q}));
  ASSIGN_OR_RETURN(wq, ctx.Emit("transpose", {wq}, {{"perm", Ints{0, 2, 1}}}));
  ShiftedOperand b{wq, sw.offset};
  if (b.offset && !ctx.type(*b.offset).shape.empty()) {
    ASSIGN_OR_RETURN(b.offset, ReshapeTo(ctx, *b.offset, {group, 1, fg}));
  }
  Ints columns;
  for (int64_t z = 0; z < ow; ++z) {
    for (int64_t j = 0; j < kw; ++j) columns.push_back(z * win.strides[1] + j * win.dilations[1]);
  }
  ASSIGN_OR_RETURN(ValueId column_index, ReshapeTo(ctx, ctx.Constant(Int64Vector(columns)), {ow, kw}));
  std::vector<ValueId> bands;
  for (int64_t y0 = 0; y0 < oh; y0 += band_rows) {
    const int64_t rows_here = std::min(band_rows, oh - y0), p = rows_here * ow;
    // cols [N, group, P, Q]: row (g, oh, ow) holds the window of group g, in (c, kh, kw) order.
    // Two gathers with small tables (the rows, then the columns each output position reads)
    // give [N, C, OH, KH, OW, KW]; a transpose orders it.
    Ints rows;
    for (int64_t y = y0; y < y0 + rows_here; ++y) {
      for (int64_t i = 0; i < kh; ++i) rows.push_back(y * win.strides[0] + i * win.dilations[0]);
    }
    ASSIGN_OR_RETURN(ValueId row_index, ReshapeTo(ctx, ctx.Constant(Int64Vector(rows)), {rows_here, kh}));
    ASSIGN_OR_RETURN(ValueId cols, ctx.Emit("gather", {sx.shifted, row_index}, {{"axis", int64_t{2}}}));
    ASSIGN_OR_RETURN(cols, ctx.Emit("gather", {cols, column_index}, {{"axis", int64_t{4}}}));
    ASSIGN_OR_RETURN(cols, ReshapeTo(ctx, cols, {n, group, cg, rows_here, kh, ow, kw}));
    ASSIGN_OR_RETURN(cols, ctx.Emit("transpose", {cols}, {{"perm", Ints{0, 1, 3, 5, 2, 4, 6}}}));
    ASSIGN_OR_RETURN(cols, ReshapeTo(ctx, cols, {n, group, p, q}));
    ASSIGN_OR_RETURN(ValueId acc, ShiftedMatMul(ctx, ShiftedOperand{cols, sx.offset}, b));  // [N, g, P, F/g]
    ASSIGN_OR_RETURN(acc, ctx.Emit("transpose", {acc}, {{"perm", Ints{0, 1, 3, 2}}}));
    ASSIGN_OR_RETURN(acc, ReshapeTo(ctx, acc, {n, f, rows_here, ow}));
    bands.push_back(acc);
  }
  ValueId acc = bands[0];
  if (bands.size() > 1) {
    ASSIGN_OR_RETURN(acc, ctx.Emit("concat", bands, {{"axis", int64_t{2}}}));
  }
  return ReshapeTo(ctx, acc, one_d ? Shape{n, f, ow} : Shape{n, f, oh, ow});
}

Status ConvInteger(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId w, ctx.RequiredInput(1));
  return SetResult(ctx, IntegerConv(ctx, x, 2, w, 3));
}

Status QLinearConv(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId w, ctx.RequiredInput(3));
  for (int i : {1, 4, 6}) RETURN_IF_ERROR(ctx.RequiredInput(i).status());
  ASSIGN_OR_RETURN(DType out, QuantizedDType(ctx, 7, "y_zero_point", DType::kU8));
  ASSIGN_OR_RETURN(ValueId acc, IntegerConv(ctx, x, 2, w, 5));
  const Shape ys = ctx.type(acc).shape;
  const int64_t rank = static_cast<int64_t>(ys.size());
  const int64_t f = ys[1];
  if (ctx.has_input(8)) {
    const TypeInfo bt = ctx.type(ctx.input(8));
    if (bt.dtype != DType::kI32 || bt.shape != Shape{f}) {
      return ctx.Invalid("B must be i32 [" + std::to_string(f) + "], got " + Name(bt.dtype) + " " +
                         ShapeToString(bt.shape));
    }
    ASSIGN_OR_RETURN(ValueId bias, AlongAxis(ctx, ctx.input(8), rank, 1));
    ASSIGN_OR_RETURN(acc, ctx.Emit("add", {acc, bias}));
  }
  ASSIGN_OR_RETURN(std::optional<ValueId> sx, ReadParam(ctx, 1, "x_scale", DType::kF32, 0));
  ASSIGN_OR_RETURN(std::optional<ValueId> sw, ReadParam(ctx, 4, "w_scale", DType::kF32, f));
  ASSIGN_OR_RETURN(std::optional<ValueId> sy, ReadParam(ctx, 6, "y_scale", DType::kF32, 0));
  ASSIGN_OR_RETURN(std::optional<ValueId> zy, ReadParam(ctx, 7, "y_zero_point", out, 0));
  ASSIGN_OR_RETURN(ValueId sw_channels, AlongAxis(ctx, *sw, rank, 1));
  return SetResult(ctx, Requantize(ctx, acc, *sx, sw_channels, *sy, zy, out));
}

}  // namespace

const std::vector<OpConverter>& QuantConverters() {
  static const auto* table = new std::vector<OpConverter>{
      {"QuantizeLinear", QuantizeLinear},
      {"DequantizeLinear", DequantizeLinear},
      {"DynamicQuantizeLinear", DynamicQuantizeLinear},
      {"MatMulInteger", MatMulInteger},
      {"ConvInteger", ConvInteger},
      {"QLinearMatMul", QLinearMatMul},
      {"QLinearConv", QLinearConv},
  };
  return *table;
}

}  // namespace consensor::executor::onnx_import
