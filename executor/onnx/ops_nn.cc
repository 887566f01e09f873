// ONNX neural-network ops: MatMul, Gemm, Conv, pooling, BatchNormalization, Softmax and
// LogSoftmax, LayerNormalization, reductions and ArgMax/ArgMin. Lowerings are written down
// in docs/ONNX.md; the Consensor ops they use are specified in docs/DETERMINISM.md.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

int64_t Rank(const NodeContext& ctx, ValueId v) { return static_cast<int64_t>(ctx.type(v).shape.size()); }

// --- MatMul, Gemm ---

Status MatMul(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireFloat(ctx, a, "input A"));
  RETURN_IF_ERROR(RequireFloat(ctx, b, "input B"));
  return SetResult(ctx, ctx.Emit("matmul", {a, b}));
}

// alpha * op(A) @ op(B) + beta * C, evaluated as written: the matmul's fma chain, then one
// multiply by alpha (skipped when alpha is 1), then one add of beta * C.
Status Gemm(NodeContext& ctx) {
  // `broadcast` (before opset 7) only allowed C to broadcast, which `add` does anyway.
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha", "beta", "transA", "transB", "broadcast"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(float beta, ctx.AttrFloat("beta", 1.0f));
  ASSIGN_OR_RETURN(int64_t trans_a, ctx.AttrInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, ctx.AttrInt("transB", 0));
  ASSIGN_OR_RETURN(ValueId a, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId b, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireFloat(ctx, a, "input A"));
  RETURN_IF_ERROR(RequireFloat(ctx, b, "input B"));
  const DType dtype = ctx.type(a).dtype;
  if (Rank(ctx, a) != 2 || Rank(ctx, b) != 2) return ctx.Invalid("A and B must be matrices");
  // Constant weights are transposed once, at import.
  if (trans_a) {
    ASSIGN_OR_RETURN(a, ctx.Emit("transpose", {a}, {{"perm", Ints{1, 0}}}));
  }
  if (trans_b) {
    ASSIGN_OR_RETURN(b, ctx.Emit("transpose", {b}, {{"perm", Ints{1, 0}}}));
  }
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("matmul", {a, b}));
  if (alpha != 1.0f) {
    ASSIGN_OR_RETURN(y, ctx.Emit("mul", {y, ctx.Scalar(dtype, alpha)}));
  }
  if (ctx.has_input(2) && beta != 0.0f) {
    ValueId c = ctx.input(2);
    RETURN_IF_ERROR(RequireFloat(ctx, c, "input C"));
    if (beta != 1.0f) {
      ASSIGN_OR_RETURN(c, ctx.Emit("mul", {c, ctx.Scalar(dtype, beta)}));
    }
    ASSIGN_OR_RETURN(y, ctx.Emit("add", {y, c}));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

// --- windows: Conv and pooling share the auto_pad and 1-D handling ---

}  // namespace

StatusOr<Window> ReadWindow(const NodeContext& ctx, const Shape& x, const Ints& kernel) {
  const size_t spatial = kernel.size();
  Window w;
  w.kernel = kernel;
  ASSIGN_OR_RETURN(w.strides, ctx.AttrInts("strides", Ints(spatial, 1)));
  ASSIGN_OR_RETURN(w.dilations, ctx.AttrInts("dilations", Ints(spatial, 1)));
  ASSIGN_OR_RETURN(w.pads, ctx.AttrInts("pads", Ints(2 * spatial, 0)));
  ASSIGN_OR_RETURN(std::string auto_pad, ctx.AttrString("auto_pad", "NOTSET"));
  if (w.strides.size() != spatial || w.dilations.size() != spatial || w.pads.size() != 2 * spatial) {
    return ctx.Invalid("strides, dilations and pads must match the kernel's " + std::to_string(spatial) + " dims");
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (w.strides[i] < 1 || w.dilations[i] < 1 || w.kernel[i] < 1) return ctx.Invalid("non-positive window parameter");
  }
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t in = x[2 + i];
      const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
      const int64_t total =
          std::max<int64_t>((out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - in, 0);
      const int64_t small = total / 2;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pads[i + spatial] = total - w.pads[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    return ctx.Unsupported("auto_pad '" + auto_pad + "'");
  }
  return w;
}

namespace {

// 1-D windows run as 2-D ones over a height of 1.
Window As2D(const Window& w) {
  if (w.kernel.size() == 2) return w;
  return Window{{1, w.kernel[0]}, {1, w.strides[0]}, {1, w.dilations[0]}, {0, w.pads[0], 0, w.pads[1]}};
}

Ints ConsensorPads(const Window& w) { return {w.pads[0], w.pads[1], w.pads[2], w.pads[3]}; }

// --- 3-D windows: the depth window is gathered, the H/W window runs as a 2-D op ---

// The H/W part of a 3-D window.
Window HW2D(const Window& w) {
  return Window{{w.kernel[1], w.kernel[2]},
                {w.strides[1], w.strides[2]},
                {w.dilations[1], w.dilations[2]},
                {w.pads[1], w.pads[2], w.pads[4], w.pads[5]}};
}

// x [N,C,D,H,W] -> depth padded with `pad_value` (only the depth pads) -> one gather on
// axis 2 of the depth positions od*sd + kd*dd, od-major -> [N,C,OD*KD,H,W]. Sets *od.
StatusOr<ValueId> GatherDepthWindows(NodeContext& ctx, ValueId x, const Window& win, float pad_value, int64_t* od) {
  const Shape xs = ctx.type(x).shape;
  const int64_t kd = win.kernel[0], sd = win.strides[0], dd = win.dilations[0];
  const int64_t padded = xs[2] + win.pads[0] + win.pads[3];
  const int64_t span = (kd - 1) * dd + 1;
  if (padded < span) return ctx.Invalid("the depth window is larger than the padded input");
  *od = (padded - span) / sd + 1;
  if (win.pads[0] != 0 || win.pads[3] != 0) {
    ASSIGN_OR_RETURN(
        x,
        ctx.Emit("pad", {x}, {{"pads", Ints{0, 0, win.pads[0], 0, 0, 0, 0, win.pads[3], 0, 0}}, {"value", pad_value}}));
  }
  Ints positions;
  positions.reserve(static_cast<size_t>(*od * kd));
  for (int64_t o = 0; o < *od; ++o) {
    for (int64_t k = 0; k < kd; ++k) positions.push_back(o * sd + k * dd);
  }
  return ctx.Emit("gather", {x, ctx.Constant(Int64Vector(positions))}, {{"axis", int64_t{2}}});
}

// 3-D Conv as one conv2d: the gathered depth slices [N,C,OD*KD,H,W] become
// [N*OD, C*KD, H, W] (channel index c*KD + kd, so each group's channels stay contiguous) and
// W [F, C/g, KD, KH, KW] becomes [F, (C/g)*KD, KH, KW]. Each output element is therefore the
// conv2d fma chain over (c, kd, kh, kw) in this nesting order, depth padding taking part as
// +0.0 terms like conv2d's own padding; then the bias add.
StatusOr<ValueId> Conv3D(NodeContext& ctx, ValueId x, ValueId w, const Window& win, int64_t group) {
  const Shape xs = ctx.type(x).shape;
  const Shape ws = ctx.type(w).shape;
  const int64_t n = xs[0], c = xs[1], h = xs[3], wd = xs[4];
  const int64_t f = ws[0], kd = ws[2];
  if (group < 1 || c % group != 0 || ws[1] != c / group || f % group != 0) {
    return ctx.Invalid("channels of X and W do not match the group");
  }
  int64_t od = 0;
  ASSIGN_OR_RETURN(ValueId g, GatherDepthWindows(ctx, x, win, 0.0f, &od));
  ASSIGN_OR_RETURN(g, ReshapeTo(ctx, g, {n, c, od, kd, h, wd}));
  ASSIGN_OR_RETURN(g, ctx.Emit("transpose", {g}, {{"perm", Ints{0, 2, 1, 3, 4, 5}}}));
  ASSIGN_OR_RETURN(g, ReshapeTo(ctx, g, {n * od, c * kd, h, wd}));
  ASSIGN_OR_RETURN(ValueId w2, ReshapeTo(ctx, w, {f, ws[1] * kd, ws[3], ws[4]}));
  std::vector<ValueId> inputs = {g, w2};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  const Window hw = HW2D(win);
  ASSIGN_OR_RETURN(
      ValueId y,
      ctx.Emit("conv2d", inputs,
               {{"strides", hw.strides}, {"pads", ConsensorPads(hw)}, {"dilations", hw.dilations}, {"group", group}}));
  const Shape ys = ctx.type(y).shape;  // [N*OD, F, OH, OW]
  ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, {n, od, f, ys[2], ys[3]}));
  return ctx.Emit("transpose", {y}, {{"perm", Ints{0, 2, 1, 3, 4}}});
}

// 3-D MaxPool: depth padded with -inf and gathered, max_pool2d over H/W on every
// [N, C*OD*KD] slice, then reduce_max over KD. 3-D AveragePool: depth padded with zeros and
// gathered; the H/W window sums come from a depthwise conv2d with an all-ones kernel (an fma
// with 1 is an exact add, so each sum is +0.0 then the (kh, kw) terms in row-major order,
// H/W padding adding +0.0), then reduce_sum over KD (csum in kd order), then one division
// by a constant count: the in-input positions of the window, or the full window size with
// count_include_pad.
StatusOr<ValueId> Pool3D(NodeContext& ctx, ValueId x, const Window& win, bool is_max, int64_t count_include_pad) {
  const Shape xs = ctx.type(x).shape;
  const int64_t n = xs[0], c = xs[1], h = xs[3], wd = xs[4];
  const int64_t kd = win.kernel[0];
  int64_t od = 0;
  const float pad_value = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
  ASSIGN_OR_RETURN(ValueId g, GatherDepthWindows(ctx, x, win, pad_value, &od));
  const int64_t slices = c * od * kd;
  ASSIGN_OR_RETURN(g, ReshapeTo(ctx, g, {n, slices, h, wd}));
  const Window hw = HW2D(win);
  ValueId y;
  if (is_max) {
    ASSIGN_OR_RETURN(y, ctx.Emit("max_pool2d", {g},
                                 {{"kernel", hw.kernel},
                                  {"strides", hw.strides},
                                  {"pads", ConsensorPads(hw)},
                                  {"dilations", hw.dilations}}));
  } else {
    const int64_t kh = hw.kernel[0], kw = hw.kernel[1];
    ValueId ones = ctx.Constant(Tensor::FromVector<float>(
        DType::kF32, {slices, 1, kh, kw}, std::vector<float>(static_cast<size_t>(slices * kh * kw), 1.0f)));
    ASSIGN_OR_RETURN(
        y, ctx.Emit(
               "conv2d", {g, ones},
               {{"strides", hw.strides}, {"pads", ConsensorPads(hw)}, {"dilations", hw.dilations}, {"group", slices}}));
  }
  const Shape ys = ctx.type(y).shape;  // [N, C*OD*KD, OH, OW]
  const int64_t oh = ys[2], ow = ys[3];
  ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, {n, c, od, kd, oh, ow}));
  Attributes reduce = {{"axes", Ints{3}}, {"keepdims", int64_t{0}}};
  ASSIGN_OR_RETURN(y, ctx.Emit(is_max ? "reduce_max" : "reduce_sum", {y}, reduce));
  if (is_max) return y;
  // Divisor per output position: the product over the three dims of the in-input taps.
  const Ints outs = {od, oh, ow};
  std::vector<Ints> taps(3);
  for (int i = 0; i < 3; ++i) {
    for (int64_t o = 0; o < outs[i]; ++o) {
      int64_t count = 0;
      for (int64_t k = 0; k < win.kernel[i]; ++k) {
        const int64_t pos = o * win.strides[i] - win.pads[i] + k * win.dilations[i];
        if (count_include_pad || (pos >= 0 && pos < xs[2 + i])) ++count;
      }
      taps[i].push_back(count);
    }
  }
  std::vector<float> counts;
  counts.reserve(static_cast<size_t>(od * oh * ow));
  for (int64_t a : taps[0]) {
    for (int64_t b : taps[1]) {
      for (int64_t e : taps[2]) counts.push_back(static_cast<float>(a * b * e));
    }
  }
  ValueId divisor = ctx.Constant(Tensor::FromVector<float>(DType::kF32, {od, oh, ow}, counts));
  return ctx.Emit("div", {y, divisor});
}

// MaxPool's Indices for any number of spatial dims, from the ceil-adjusted window. X becomes
// [N*C, S] (S spatial positions); one gather with a constant index list lays out every
// window's K positions [N*C, P*K] (a position in the padding is replaced by the window's
// first in-input position, so no padding is needed and the chosen element never changes);
// argmax over K (first maximum, NaN largest) gives the window-local k; a constant table maps
// p*K + k to the spatial index (row-major, or column-major for storage_order 1), and the
// constant (n*C + c)*S is added.
StatusOr<ValueId> MaxPoolIndices(NodeContext& ctx, ValueId x, const Window& win, int64_t storage_order) {
  const Shape xs = ctx.type(x).shape;
  const size_t spatial = win.kernel.size();
  const int64_t nc = xs[0] * xs[1];
  int64_t s_total = 1, k_total = 1, p_total = 1;
  Ints outs(spatial), row_stride(spatial), col_stride(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t span = (win.kernel[i] - 1) * win.dilations[i] + 1;
    const int64_t padded = xs[2 + i] + win.pads[i] + win.pads[i + spatial];
    if (padded < span) return ctx.Invalid("the window is larger than the padded input");
    outs[i] = (padded - span) / win.strides[i] + 1;
    col_stride[i] = s_total;
    s_total *= xs[2 + i];
    k_total *= win.kernel[i];
    p_total *= outs[i];
  }
  for (size_t i = spatial; i-- > 0;) row_stride[i] = i + 1 == spatial ? 1 : row_stride[i + 1] * xs[3 + i];
  if (p_total * k_total > (int64_t{1} << 28)) return ctx.Unsupported("output Indices for this many window positions");
  Ints gather_idx, table;
  gather_idx.reserve(static_cast<size_t>(p_total * k_total));
  table.reserve(static_cast<size_t>(p_total * k_total));
  Ints o(spatial, 0), coord(spatial);
  for (int64_t p = 0; p < p_total; ++p) {
    const size_t start = gather_idx.size();
    int64_t first_row = -1, first_col = -1;
    Ints k(spatial, 0);
    for (int64_t kk = 0; kk < k_total; ++kk) {
      bool inside = true;
      int64_t row = 0, col = 0;
      for (size_t i = 0; i < spatial; ++i) {
        const int64_t pos = o[i] * win.strides[i] - win.pads[i] + k[i] * win.dilations[i];
        if (pos < 0 || pos >= xs[2 + i]) inside = false;
        row += pos * row_stride[i];
        col += pos * col_stride[i];
      }
      if (inside && first_row < 0) {
        first_row = row;
        first_col = col;
      }
      gather_idx.push_back(inside ? row : -1);
      table.push_back(inside ? (storage_order ? col : row) : -1);
      for (size_t i = spatial; i-- > 0;) {  // next k, row-major
        if (++k[i] < win.kernel[i]) break;
        k[i] = 0;
      }
    }
    if (first_row < 0) return ctx.Unsupported("output Indices with a window entirely in the padding");
    for (size_t j = start; j < gather_idx.size(); ++j) {
      if (gather_idx[j] < 0) {
        gather_idx[j] = first_row;
        table[j] = storage_order ? first_col : first_row;
      }
    }
    for (size_t i = spatial; i-- > 0;) {  // next output position, row-major
      if (++o[i] < outs[i]) break;
      o[i] = 0;
    }
  }
  ASSIGN_OR_RETURN(ValueId flat, ReshapeTo(ctx, x, {nc, s_total}));
  ASSIGN_OR_RETURN(ValueId windows,
                   ctx.Emit("gather", {flat, ctx.Constant(Int64Vector(gather_idx))}, {{"axis", int64_t{1}}}));
  ASSIGN_OR_RETURN(windows, ReshapeTo(ctx, windows, {nc, p_total, k_total}));
  ASSIGN_OR_RETURN(ValueId local, ctx.Emit("argmax", {windows}, {{"axis", int64_t{2}}, {"keepdims", int64_t{0}}}));
  Ints window_base(static_cast<size_t>(p_total));
  for (int64_t p = 0; p < p_total; ++p) window_base[p] = p * k_total;
  ASSIGN_OR_RETURN(ValueId slot, ctx.Emit("add", {local, ctx.Constant(Int64Vector(window_base))}));
  ASSIGN_OR_RETURN(ValueId idx, ctx.Emit("gather", {ctx.Constant(Int64Vector(table)), slot}, {{"axis", int64_t{0}}}));
  Ints plane_base(static_cast<size_t>(nc));
  for (int64_t i = 0; i < nc; ++i) plane_base[i] = i * s_total;
  ValueId planes = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {nc, 1}, plane_base));
  ASSIGN_OR_RETURN(idx, ctx.Emit("add", {idx, planes}));
  Shape out_shape = {xs[0], xs[1]};
  out_shape.insert(out_shape.end(), outs.begin(), outs.end());
  return ReshapeTo(ctx, idx, out_shape);
}

Status Conv(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId w, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireF32OrHalf(ctx, x, "input X"));
  RETURN_IF_ERROR(RequireF32OrHalf(ctx, w, "input W"));
  const Shape xs = ctx.type(x).shape;
  const Shape ws = ctx.type(w).shape;
  if (xs.size() != ws.size() || xs.size() < 3) return ctx.Invalid("X and W must have the same rank, at least 3");
  if (xs.size() > 5)
    return ctx.Unsupported("attribute kernel_shape with " + std::to_string(xs.size() - 2) + " spatial dims");
  Ints kernel(ws.begin() + 2, ws.end());
  ASSIGN_OR_RETURN(Ints kernel_attr, ctx.AttrInts("kernel_shape", kernel));
  if (kernel_attr != kernel) return ctx.Invalid("kernel_shape does not match the weight's shape");
  ASSIGN_OR_RETURN(int64_t group, ctx.AttrInt("group", 1));
  ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, xs, kernel));
  if (xs.size() == 5) return SetResult(ctx, Conv3D(ctx, x, w, win, group));
  const bool one_d = xs.size() == 3;
  if (one_d) {
    ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, {xs[0], xs[1], 1, xs[2]}));
    ASSIGN_OR_RETURN(w, ReshapeTo(ctx, w, {ws[0], ws[1], 1, ws[2]}));
    win = As2D(win);
  }
  std::vector<ValueId> inputs = {x, w};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  ASSIGN_OR_RETURN(
      ValueId y,
      ctx.Emit(
          "conv2d", inputs,
          {{"strides", win.strides}, {"pads", ConsensorPads(win)}, {"dilations", win.dilations}, {"group", group}}));
  if (one_d) {
    Shape ys = ctx.type(y).shape;
    ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, {ys[0], ys[1], ys[3]}));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

// --- ConvTranspose: a stride-1 convolution of the zero-stuffed input with the flipped kernel ---

// Floor division by 2, also for negative totals (ONNX's reference uses Python's //).
int64_t FloorHalf(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

// The begin/end pads of each spatial dim, after auto_pad and output_shape (ONNX's rule:
// total = natural - wanted; SAME_UPPER puts the smaller half first, NOTSET and SAME_LOWER
// the larger half). Refuses parameters that would overflow or leave no output.
StatusOr<Ints> ConvTransposePads(const NodeContext& ctx, const Shape& xs, const Ints& kernel, const Ints& strides,
                                 const Ints& dilations, const Ints& output_padding) {
  const size_t spatial = kernel.size();
  ASSIGN_OR_RETURN(Ints pads, ctx.AttrInts("pads", Ints(2 * spatial, 0)));
  ASSIGN_OR_RETURN(std::string auto_pad, ctx.AttrString("auto_pad", "NOTSET"));
  if (pads.size() != 2 * spatial) return ctx.Invalid("pads must have " + std::to_string(2 * spatial) + " values");
  constexpr int64_t kMaxExtent = int64_t{1} << 31;
  for (int64_t p : pads) {
    if (p < 0 || p >= kMaxExtent) return ctx.Invalid("pads must be in [0, 2^31)");
  }
  Ints natural(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    const __int128 n = static_cast<__int128>(strides[i]) * (xs[2 + i] - 1) + output_padding[i] +
                       static_cast<__int128>(kernel[i] - 1) * dilations[i] + 1;
    if (n >= kMaxExtent) return ctx.Invalid("the output would be too large");
    natural[i] = static_cast<int64_t>(n);
  }
  const bool has_shape = ctx.has_attr("output_shape");
  if (has_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    Ints wanted(spatial);
    if (has_shape) {
      ASSIGN_OR_RETURN(Ints shape, ctx.AttrInts("output_shape", {}));
      if (shape.size() == spatial + 2) shape.erase(shape.begin(), shape.begin() + 2);
      if (shape.size() != spatial) {
        return ctx.Invalid("output_shape must have " + std::to_string(spatial) + " spatial dims");
      }
      wanted = shape;
    } else {
      for (size_t i = 0; i < spatial; ++i) wanted[i] = xs[2 + i] * strides[i];
    }
    for (size_t i = 0; i < spatial; ++i) {
      if (wanted[i] < 1 || wanted[i] >= kMaxExtent) return ctx.Invalid("output_shape must be in [1, 2^31)");
      const int64_t total = natural[i] - wanted[i];
      const int64_t small = FloorHalf(total);
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[i + spatial] = total - pads[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    return ctx.Unsupported("auto_pad '" + auto_pad + "'");
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (natural[i] - pads[i] - pads[i + spatial] < 1) return ctx.Invalid("the pads leave an empty output");
  }
  return pads;
}

// ConvTranspose (docs/DETERMINISM.md 4.4 conv_transpose, docs/ONNX.md) for 1, 2 or 3 spatial
// dims. Output o of a dim takes input i at kernel tap k when o + pad_begin = i*s + k*d. The
// lowering: x is zero-stuffed (s - 1 zeros after each element: a unit dim after each
// strided dim is padded to s and merged), padded by (K-1)*d - pad_begin in front and
// (K-1)*d - pad_end + output_padding behind (a negative amount is a slice), and convolved
// with stride 1 and dilation d by W [C, F/g, K...] turned into [F, C/g, K...] with every
// spatial axis reversed. Each output is therefore conv2d's fma chain over (c, kernel taps
// from last to first), stuffed zeros and padding entering as +0.0 terms.
Status ConvTranspose(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes(
      {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId w, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireF32(ctx, x, "input X"));
  RETURN_IF_ERROR(RequireF32(ctx, w, "input W"));
  const Shape xs = ctx.type(x).shape;
  const Shape ws = ctx.type(w).shape;
  if (xs.size() != ws.size() || xs.size() < 3) return ctx.Invalid("X and W must have the same rank, at least 3");
  if (xs.size() > 5) {
    return ctx.Unsupported("attribute kernel_shape with " + std::to_string(xs.size() - 2) + " spatial dims");
  }
  const size_t spatial = xs.size() - 2;
  ASSIGN_OR_RETURN(int64_t group, ctx.AttrInt("group", 1));
  const int64_t c = xs[1];
  if (group < 1 || group > c || c % group != 0 || ws[0] != c) {
    return ctx.Invalid("W must have shape [C, F/group, k...] with C divisible by group");
  }
  const int64_t cg = c / group, fg = ws[1], f = fg * group;
  if (fg < 1) return ctx.Invalid("W has no output channels");
  Ints kernel(ws.begin() + 2, ws.end());
  ASSIGN_OR_RETURN(Ints kernel_attr, ctx.AttrInts("kernel_shape", kernel));
  if (kernel_attr != kernel) return ctx.Invalid("kernel_shape does not match the weight's shape");
  ASSIGN_OR_RETURN(Ints strides, ctx.AttrInts("strides", Ints(spatial, 1)));
  ASSIGN_OR_RETURN(Ints dilations, ctx.AttrInts("dilations", Ints(spatial, 1)));
  ASSIGN_OR_RETURN(Ints output_padding, ctx.AttrInts("output_padding", Ints(spatial, 0)));
  if (strides.size() != spatial || dilations.size() != spatial || output_padding.size() != spatial) {
    return ctx.Invalid("strides, dilations and output_padding must have " + std::to_string(spatial) + " values");
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || xs[2 + i] < 1) return ctx.Invalid("empty input or kernel");
    if (strides[i] < 1 || dilations[i] < 1 || strides[i] > 4096 || dilations[i] > 4096) {
      return ctx.Invalid("strides and dilations must be in [1, 4096]");
    }
    if (output_padding[i] < 0 || (output_padding[i] >= strides[i] && output_padding[i] >= dilations[i])) {
      return ctx.Invalid("output_padding must be non-negative and smaller than the stride or the dilation");
    }
  }
  ASSIGN_OR_RETURN(Ints pads, ConvTransposePads(ctx, xs, kernel, strides, dilations, output_padding));

  // Zero-stuffing: [N, C, D0, 1, D1, 1, ...] padded to [N, C, D0, s0, D1, s1, ...], merged.
  Shape stuffed_shape = {xs[0], c}, unit_shape = {xs[0], c};
  Ints stuff_after = {0, 0};
  for (size_t i = 0; i < spatial; ++i) {
    unit_shape.push_back(xs[2 + i]);
    stuff_after.push_back(0);
    if (strides[i] > 1) {
      unit_shape.push_back(1);
      stuff_after.push_back(strides[i] - 1);
    }
    stuffed_shape.push_back(xs[2 + i] * strides[i]);
  }
  if (stuffed_shape != xs) {
    Ints stuff_pads(unit_shape.size(), 0);  // nothing before, s - 1 after each unit dim
    stuff_pads.insert(stuff_pads.end(), stuff_after.begin(), stuff_after.end());
    ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, unit_shape));
    ASSIGN_OR_RETURN(x, ctx.Emit("pad", {x}, {{"pads", stuff_pads}, {"value", 0.0f}}));
    ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, stuffed_shape));
  }
  // Padding of the stuffed input (it already ends in s - 1 zeros); negative amounts are sliced.
  Ints conv_pads(2 * spatial), starts, ends, axes;
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t span = (kernel[i] - 1) * dilations[i];
    const int64_t front = span - pads[i];
    const int64_t back = span - pads[i + spatial] + output_padding[i] - (strides[i] - 1);
    if (front < 0 || back < 0) {
      starts.push_back(std::max<int64_t>(-front, 0));
      ends.push_back(stuffed_shape[2 + i] + std::min<int64_t>(back, 0));
      axes.push_back(static_cast<int64_t>(2 + i));
    }
    conv_pads[i] = std::max<int64_t>(front, 0);
    conv_pads[i + spatial] = std::max<int64_t>(back, 0);
  }
  if (!axes.empty()) {
    ASSIGN_OR_RETURN(x, ctx.Emit("slice", {x}, {{"starts", starts}, {"ends", ends}, {"axes", axes}}));
  }

  // W [C, F/g, K...] -> [F, C/g, K...] (per group), every spatial axis reversed.
  Shape grouped = {group, cg, fg};
  grouped.insert(grouped.end(), kernel.begin(), kernel.end());
  ASSIGN_OR_RETURN(w, ReshapeTo(ctx, w, grouped));
  Ints perm = {0, 2, 1};
  for (size_t i = 0; i < spatial; ++i) perm.push_back(static_cast<int64_t>(3 + i));
  ASSIGN_OR_RETURN(w, ctx.Emit("transpose", {w}, {{"perm", perm}}));
  Shape conv_w = {f, cg};
  conv_w.insert(conv_w.end(), kernel.begin(), kernel.end());
  ASSIGN_OR_RETURN(w, ReshapeTo(ctx, w, conv_w));
  Ints flip_axes;
  for (size_t i = 0; i < spatial; ++i) flip_axes.push_back(static_cast<int64_t>(2 + i));
  ASSIGN_OR_RETURN(w, ctx.Emit("slice", {w},
                               {{"starts", Ints(spatial, -1)},
                                {"ends", Ints(spatial, std::numeric_limits<int64_t>::min())},
                                {"axes", flip_axes},
                                {"steps", Ints(spatial, -1)}}));

  Window win{kernel, Ints(spatial, 1), dilations, conv_pads};
  if (spatial == 3) return SetResult(ctx, Conv3D(ctx, x, w, win, group));
  const bool one_d = spatial == 1;
  if (one_d) {
    const Shape cur = ctx.type(x).shape;
    ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, {cur[0], cur[1], 1, cur[2]}));
    ASSIGN_OR_RETURN(w, ReshapeTo(ctx, w, {f, cg, 1, kernel[0]}));
    win = As2D(win);
  }
  std::vector<ValueId> inputs = {x, w};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  ASSIGN_OR_RETURN(
      ValueId y,
      ctx.Emit(
          "conv2d", inputs,
          {{"strides", win.strides}, {"pads", ConsensorPads(win)}, {"dilations", win.dilations}, {"group", group}}));
  if (one_d) {
    const Shape ys = ctx.type(y).shape;
    ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, {ys[0], ys[1], ys[3]}));
  }
  return SetResult(ctx, y);
}

Status Pool(NodeContext& ctx, bool is_max) {
  if (is_max) {
    RETURN_IF_ERROR(ctx.CheckAttributes(
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}));
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes(
        {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}));
  }
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  // MaxPool on u8 / i8 runs in f32: the cast is exact both ways and max copies one element,
  // so the result is the integer maximum (ONNX.md; a window all in padding gives -inf, which
  // casts to the dtype's minimum).
  const DType in_dtype = ctx.type(x).dtype;
  const bool byte_max = is_max && (in_dtype == DType::kU8 || in_dtype == DType::kI8);
  if (byte_max) {
    ASSIGN_OR_RETURN(x, ctx.Emit("cast", {x}, {{"to", DType::kF32}}));
  } else {
    RETURN_IF_ERROR(RequireF32OrHalf(ctx, x, "input X"));
  }
  const ValueId x_in = x;
  const Shape xs = ctx.type(x).shape;
  if (xs.size() < 3) return ctx.Invalid("X must have rank 3 or more");
  ASSIGN_OR_RETURN(int64_t storage_order, ctx.AttrInt("storage_order", 0));
  if (xs.size() > 5)
    return ctx.Unsupported("attribute kernel_shape with " + std::to_string(xs.size() - 2) + " spatial dims");
  ASSIGN_OR_RETURN(Ints kernel, ctx.AttrInts("kernel_shape", {}));
  if (kernel.size() != xs.size() - 2) return ctx.Invalid("kernel_shape must have one value per spatial dim");
  ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.AttrInt("ceil_mode", 0));
  ASSIGN_OR_RETURN(int64_t count_include_pad, ctx.AttrInt("count_include_pad", 0));
  ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, xs, kernel));
  const size_t spatial = kernel.size();
  if (ceil_mode) {
    // Rounding the output size up equals extra end padding that no window counts: max
    // ignores padding, and so does the average unless count_include_pad asks otherwise.
    if (count_include_pad) return ctx.Unsupported("attribute ceil_mode with count_include_pad");
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t span = (kernel[i] - 1) * win.dilations[i] + 1;
      const int64_t padded = xs[2 + i] + win.pads[i] + win.pads[i + spatial];
      if (padded < span) continue;
      int64_t out = (padded - span + win.strides[i] - 1) / win.strides[i] + 1;
      // As PyTorch (and later ONNX specs): a last window that would start in the end padding
      // is dropped, so models exported with ceil_mode keep their shapes.
      if ((out - 1) * win.strides[i] >= xs[2 + i] + win.pads[i]) --out;
      const int64_t extra = (out - 1) * win.strides[i] + span - padded;  // < 0 only when a window is dropped
      if (win.pads[i + spatial] + extra < 0)
        return ctx.Unsupported("attribute ceil_mode with pads over the kernel size");
      win.pads[i + spatial] += extra;
    }
  }
  const Window nd_win = win;  // after the ceil_mode padding; Indices use it
  ValueId y;
  if (spatial == 3) {
    ASSIGN_OR_RETURN(y, Pool3D(ctx, x, win, is_max, count_include_pad));
  } else {
    const bool one_d = spatial == 1;
    if (one_d) {
      ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, {xs[0], xs[1], 1, xs[2]}));
      win = As2D(win);
    }
    Attributes attrs = {
        {"kernel", win.kernel}, {"strides", win.strides}, {"pads", ConsensorPads(win)}, {"dilations", win.dilations}};
    if (!is_max) attrs["count_include_pad"] = count_include_pad;
    ASSIGN_OR_RETURN(y, ctx.Emit(is_max ? "max_pool2d" : "avg_pool2d", {x}, attrs));
    if (one_d) {
      Shape ys = ctx.type(y).shape;
      ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, {ys[0], ys[1], ys[3]}));
    }
  }
  if (byte_max) {
    ASSIGN_OR_RETURN(y, ctx.Emit("cast", {y}, {{"to", in_dtype}}));
  }
  ctx.SetOutput(0, y);
  if (is_max && ctx.wants_output(1)) {
    if (storage_order != 0 && storage_order != 1) return ctx.Invalid("storage_order must be 0 or 1");
    ASSIGN_OR_RETURN(ValueId indices, MaxPoolIndices(ctx, x_in, nd_win, storage_order));
    ctx.SetOutput(1, indices);
  }
  return OkStatus();
}

Status GlobalPool(NodeContext& ctx, std::string_view reduce_op) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32OrHalf(ctx, x, "input X"));
  const int64_t rank = Rank(ctx, x);
  if (rank < 3) return ctx.Invalid("X must have rank 3 or more");
  Ints axes(static_cast<size_t>(rank - 2));
  std::iota(axes.begin(), axes.end(), int64_t{2});
  return SetResult(ctx, ctx.Emit(reduce_op, {x}, {{"axes", axes}, {"keepdims", int64_t{1}}}));
}

// --- BatchNormalization ---

// X and the four per-channel inputs (scale, B, input_mean, input_var), checked.
struct BatchNormOperands {
  ValueId x = -1;
  Shape xs;
  Shape per_channel;  // [C, 1, ...]: broadcasts along dim 1 of X
  ValueId params[4] = {-1, -1, -1, -1};
};

StatusOr<BatchNormOperands> ReadBatchNormOperands(NodeContext& ctx) {
  BatchNormOperands op;
  ASSIGN_OR_RETURN(op.x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, op.x, "input X"));
  op.xs = ctx.type(op.x).shape;
  if (op.xs.size() < 2) return ctx.Invalid("X must have rank 2 or more");
  const int64_t c = op.xs[1];
  op.per_channel = {c};
  for (size_t i = 2; i < op.xs.size(); ++i) op.per_channel.push_back(1);
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i) {
    ASSIGN_OR_RETURN(op.params[i], ctx.RequiredInput(i + 1));
    RETURN_IF_ERROR(RequireF32(ctx, op.params[i], names[i]));
    if (ctx.type(op.params[i]).shape != Shape{c}) return ctx.Invalid(std::string(names[i]) + " must have shape [C]");
  }
  return op;
}

// training_mode = 1 (opset 14+): the statistics of the batch, over every axis but 1.
// mean = reduce_mean(x); d = x - mean; var = reduce_mean(d * d) (population variance);
// y = d * (scale / sqrt(var + epsilon)) + bias. The optional outputs are
// running_mean = input_mean * momentum + mean * (1 - momentum), running_var likewise with var.
Status BatchNormalizationTraining(NodeContext& ctx) {
  if (ctx.opset() < 14) return ctx.Unsupported("training before opset 14");
  ASSIGN_OR_RETURN(float epsilon, ctx.AttrFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(float momentum, ctx.AttrFloat("momentum", 0.9f));
  ASSIGN_OR_RETURN(BatchNormOperands op, ReadBatchNormOperands(ctx));
  const ValueId x = op.x;
  const Shape& xs = op.xs;
  const Shape& per_channel = op.per_channel;
  const ValueId* params = op.params;
  Ints axes = {0};
  for (int64_t i = 2; i < static_cast<int64_t>(xs.size()); ++i) axes.push_back(i);
  Attributes reduce = {{"axes", axes}, {"keepdims", int64_t{0}}};
  ASSIGN_OR_RETURN(ValueId mean, ctx.Emit("reduce_mean", {x}, reduce));  // [C]
  ASSIGN_OR_RETURN(ValueId mean_pc, ReshapeTo(ctx, mean, per_channel));
  ASSIGN_OR_RETURN(ValueId d, ctx.Emit("sub", {x, mean_pc}));
  ASSIGN_OR_RETURN(ValueId d2, ctx.Emit("mul", {d, d}));
  ASSIGN_OR_RETURN(ValueId var, ctx.Emit("reduce_mean", {d2}, reduce));  // [C]
  ASSIGN_OR_RETURN(ValueId var_eps, ctx.Emit("add", {var, ctx.ScalarF32(epsilon)}));
  ASSIGN_OR_RETURN(ValueId std_dev, ctx.Emit("sqrt", {var_eps}));
  ASSIGN_OR_RETURN(ValueId factor, ctx.Emit("div", {params[0], std_dev}));
  ASSIGN_OR_RETURN(factor, ReshapeTo(ctx, factor, per_channel));
  ASSIGN_OR_RETURN(ValueId bias, ReshapeTo(ctx, params[1], per_channel));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {d, factor}));
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("add", {scaled, bias}));
  ctx.SetOutput(0, y);
  const float keep = momentum;
  const float take = static_cast<float>(1.0 - static_cast<double>(momentum));
  auto running = [&](ValueId input, ValueId current) -> StatusOr<ValueId> {
    ASSIGN_OR_RETURN(ValueId a, ctx.Emit("mul", {input, ctx.ScalarF32(keep)}));
    ASSIGN_OR_RETURN(ValueId b, ctx.Emit("mul", {current, ctx.ScalarF32(take)}));
    return ctx.Emit("add", {a, b});
  };
  if (ctx.wants_output(1)) {
    ASSIGN_OR_RETURN(ValueId rm, running(params[2], mean));
    ctx.SetOutput(1, rm);
  }
  if (ctx.wants_output(2)) {
    ASSIGN_OR_RETURN(ValueId rv, running(params[3], var));
    ctx.SetOutput(2, rv);
  }
  for (int i = 3; i < ctx.num_outputs(); ++i) {
    if (ctx.wants_output(i)) return ctx.Unsupported("output " + std::to_string(i));
  }
  return OkStatus();
}

// Inference, folded into the convolution that computes X (docs/DETERMINISM.md 6.1): when
// X is a conv2d with constant weights (and bias) that nothing else reads and the four
// parameters are constants, with f = scale / sqrt(var + epsilon) per channel,
//   W' = W * f[F]            (one mul per weight)
//   b' = ((b - mean) * f) + B (b = +0.0 without a bias; three ops in this order)
// and the result is conv2d(x, W', b'). Each op is a section-4 op evaluated at import by the
// CPU executor, so the folded constants are the same bits on every machine. A 16-bit conv
// (W, b and X all f16, or all bf16) has W and b widened exactly first and W', b' rounded once
// back to its type; op.params are f32 either way.
// Returns nullopt when the pattern does not apply (the unfolded lowering is used then).
StatusOr<std::optional<ValueId>> FoldBatchNormIntoConv(NodeContext& ctx, const BatchNormOperands& op, float epsilon) {
  const EmittedOp* conv = ctx.producer(op.x);
  if (!conv || conv->op != "conv2d" || !ctx.SoleReader(0)) return std::optional<ValueId>();
  for (int i = 0; i < 4; ++i) {
    if (!ctx.constant(op.params[i]) || ctx.type(op.params[i]).dtype != DType::kF32) return std::optional<ValueId>();
  }
  const ValueId w = conv->inputs[1];
  const DType conv_type = ctx.type(op.x).dtype;
  if (!ctx.constant(w) || ctx.type(w).dtype != conv_type) return std::optional<ValueId>();
  if (conv->inputs.size() == 3 && (!ctx.constant(conv->inputs[2]) || ctx.type(conv->inputs[2]).dtype != conv_type))
    return std::optional<ValueId>();
  const bool half = IsHalfDType(conv_type);
  auto widen = [&](ValueId v) -> StatusOr<ValueId> {
    if (!half) return v;
    return ctx.Emit("cast", {v}, {{"to", DType::kF32}});
  };
  auto narrow = [&](ValueId v) -> StatusOr<ValueId> {
    if (!half) return v;
    return ctx.Emit("cast", {v}, {{"to", conv_type}});
  };
  const Shape ws = ctx.type(w).shape;  // [F, C/group, KH, KW]
  const int64_t f_count = ws[0];
  const EmittedOp conv_op = *conv;  // Emit may grow the importer's tables
  ValueId bias;
  if (conv_op.inputs.size() == 3) {
    ASSIGN_OR_RETURN(bias, widen(conv_op.inputs[2]));
  } else {
    bias = ctx.Constant(Tensor::FromVector<float>(DType::kF32, {f_count}, std::vector<float>(f_count, 0.0f)));
  }
  ASSIGN_OR_RETURN(ValueId w_wide, widen(w));
  ASSIGN_OR_RETURN(ValueId var_eps, ctx.Emit("add", {op.params[3], ctx.ScalarF32(epsilon)}));
  ASSIGN_OR_RETURN(ValueId std_dev, ctx.Emit("sqrt", {var_eps}));
  ASSIGN_OR_RETURN(ValueId factor, ctx.Emit("div", {op.params[0], std_dev}));  // [F]
  ASSIGN_OR_RETURN(ValueId factor_w, ReshapeTo(ctx, factor, {f_count, 1, 1, 1}));
  ASSIGN_OR_RETURN(ValueId w_scaled, ctx.Emit("mul", {w_wide, factor_w}));
  ASSIGN_OR_RETURN(ValueId w_folded, narrow(w_scaled));
  ASSIGN_OR_RETURN(ValueId centered, ctx.Emit("sub", {bias, op.params[2]}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {centered, factor}));
  ASSIGN_OR_RETURN(ValueId b_shifted, ctx.Emit("add", {scaled, op.params[1]}));
  ASSIGN_OR_RETURN(ValueId b_folded, narrow(b_shifted));
  if (!ctx.constant(w_folded) || !ctx.constant(b_folded))
    return Internal(ctx.Where() + ": folding left a run-time value");
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("conv2d", {conv_op.inputs[0], w_folded, b_folded}, conv_op.attrs));
  ctx.Supersede(op.x);
  return std::optional<ValueId>(y);
}

// A BatchNormalization of a 16-bit X, folded into the 16-bit conv2d that computes it
// (DETERMINISM.md 6.1) when every condition of the fold holds: inference, constant
// parameters of shape [C] in f32 or X's type (widened exactly). Returns nullopt otherwise,
// without emitting anything, and the node is lowered through f32 (6.8b), which also reports
// any malformed attribute or input.
StatusOr<std::optional<ValueId>> FoldHalfBatchNormIntoConv(NodeContext& ctx) {
  const std::optional<ValueId> none;
  const ValueId x = ctx.input(0);
  const DType half = ctx.type(x).dtype;
  const Shape& xs = ctx.type(x).shape;
  if (xs.size() != 4) return none;
  auto training = ctx.AttrInt("training_mode", 0);
  auto spatial = ctx.AttrInt("spatial", 1);
  auto epsilon = ctx.AttrFloat("epsilon", 1e-5f);
  if (!training.ok() || *training != 0 || !spatial.ok() || *spatial != 1 || !epsilon.ok()) return none;
  if (!ctx.CheckAttributes({"epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"}).ok())
    return none;
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.wants_output(i)) return none;
  }
  for (int i = 1; i <= 4; ++i) {
    if (!ctx.has_input(i) || !ctx.constant(ctx.input(i))) return none;
    const TypeInfo& t = ctx.input_type(i);
    if ((t.dtype != DType::kF32 && t.dtype != half) || t.shape != Shape{xs[1]}) return none;
  }
  const EmittedOp* conv = ctx.producer(x);
  if (!conv || conv->op != "conv2d" || !ctx.SoleReader(0) || !ctx.constant(conv->inputs[1]) ||
      ctx.type(conv->inputs[1]).dtype != half)
    return none;
  if (conv->inputs.size() == 3 && (!ctx.constant(conv->inputs[2]) || ctx.type(conv->inputs[2]).dtype != half))
    return none;
  BatchNormOperands op;
  op.x = x;
  op.xs = xs;
  for (int i = 0; i < 4; ++i) {
    op.params[i] = ctx.input(i + 1);
    if (ctx.type(op.params[i]).dtype != DType::kF32) {
      ASSIGN_OR_RETURN(op.params[i], ctx.Emit("cast", {op.params[i]}, {{"to", DType::kF32}}));
    }
  }
  return FoldBatchNormIntoConv(ctx, op, *epsilon);
}

}  // namespace

// A constant per-channel scale or shift after a conv2d (DETERMINISM.md 6.1): the constant
// c varies at most along the channel axis of the conv output (scalar, [1], [F, 1, 1],
// [1, F, 1, 1], ...). With c[f] its value for channel f:
//   mul: conv2d(x, W * c[f], b * c[f])   (no bias stays without one)
//   add: conv2d(x, W, b + c[f])          (c[f] itself without a bias: the same bits as
//                                          the unfolded add, acc + c[f])
StatusOr<std::optional<ValueId>> FoldScaleOrShiftIntoConv(NodeContext& ctx, std::string_view op, int conv_input) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return std::optional<ValueId>();
  const ValueId y = ctx.input(conv_input);
  const ValueId c = ctx.input(1 - conv_input);
  const EmittedOp* conv = ctx.producer(y);
  if (!conv || conv->op != "conv2d" || !ctx.SoleReader(conv_input)) return std::optional<ValueId>();
  if (!ctx.constant(c) || ctx.type(c).dtype != DType::kF32) return std::optional<ValueId>();
  const ValueId w = conv->inputs[1];
  const bool has_bias = conv->inputs.size() == 3;
  if (!ctx.constant(w) || (has_bias && !ctx.constant(conv->inputs[2]))) return std::optional<ValueId>();
  const Shape ys = ctx.type(y).shape;  // [N, F, OH, OW]
  const Shape cs = ctx.type(c).shape;
  const int64_t f_count = ys[1];
  if (cs.size() > ys.size()) return std::optional<ValueId>();
  int64_t per_channel = 1;
  for (size_t i = 0; i < cs.size(); ++i) {
    const size_t axis = ys.size() - cs.size() + i;
    if (cs[i] == 1) continue;
    if (axis != 1 || cs[i] != f_count) return std::optional<ValueId>();
    per_channel = f_count;
  }
  const EmittedOp conv_op = *conv;  // Emit may grow the importer's tables
  ASSIGN_OR_RETURN(ValueId cf, ReshapeTo(ctx, c, {per_channel}));
  if (per_channel != f_count) {
    ASSIGN_OR_RETURN(cf, ctx.Emit("expand", {cf}, {{"shape", Ints{f_count}}}));
  }
  std::vector<ValueId> inputs = conv_op.inputs;
  if (op == "mul") {
    ASSIGN_OR_RETURN(ValueId cw, ReshapeTo(ctx, cf, {f_count, 1, 1, 1}));
    ASSIGN_OR_RETURN(inputs[1], ctx.Emit("mul", {w, cw}));
    if (has_bias) {
      ASSIGN_OR_RETURN(inputs[2], ctx.Emit("mul", {inputs[2], cf}));
    }
  } else if (op == "add") {
    if (has_bias) {
      ASSIGN_OR_RETURN(inputs[2], ctx.Emit("add", {inputs[2], cf}));
    } else {
      inputs.push_back(cf);
    }
  } else {
    return std::optional<ValueId>();
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!ctx.constant(inputs[i])) return Internal(ctx.Where() + ": folding left a run-time value");
  }
  ASSIGN_OR_RETURN(ValueId folded, ctx.Emit("conv2d", inputs, conv_op.attrs));
  ctx.Supersede(y);
  return std::optional<ValueId>(folded);
}

namespace {

// Inference, unfolded:

// y = (x - mean) * (scale / sqrt(var + epsilon)) + bias, per channel (dim 1). The factor is a
// per-channel constant folded at import; subtracting the mean first keeps the precision
// when x is close to a large mean.
Status BatchNormalization(NodeContext& ctx) {
  RETURN_IF_ERROR(
      ctx.CheckAttributes({"epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"}));
  ASSIGN_OR_RETURN(int64_t training, ctx.AttrInt("training_mode", 0));
  if (training) return BatchNormalizationTraining(ctx);
  ASSIGN_OR_RETURN(int64_t spatial, ctx.AttrInt("spatial", 1));
  if (!spatial) return ctx.Unsupported("attribute spatial = 0");
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.wants_output(i)) return ctx.Unsupported("training outputs (running mean and variance)");
  }
  ASSIGN_OR_RETURN(float epsilon, ctx.AttrFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(BatchNormOperands op, ReadBatchNormOperands(ctx));
  ASSIGN_OR_RETURN(std::optional<ValueId> folded, FoldBatchNormIntoConv(ctx, op, epsilon));
  if (folded) return SetResult(ctx, *folded);
  const ValueId x = op.x;
  ValueId params[4];
  for (int i = 0; i < 4; ++i) {
    ASSIGN_OR_RETURN(params[i], ReshapeTo(ctx, op.params[i], op.per_channel));
  }
  ASSIGN_OR_RETURN(ValueId var_eps, ctx.Emit("add", {params[3], ctx.ScalarF32(epsilon)}));
  ASSIGN_OR_RETURN(ValueId std_dev, ctx.Emit("sqrt", {var_eps}));
  ASSIGN_OR_RETURN(ValueId factor, ctx.Emit("div", {params[0], std_dev}));
  ASSIGN_OR_RETURN(ValueId centered, ctx.Emit("sub", {x, params[2]}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {centered, factor}));
  return SetResult(ctx, ctx.Emit("add", {scaled, params[1]}));
}

// BatchNormalization of any float type: a 16-bit one folds into its conv when it can, and is
// lowered through f32 otherwise (DETERMINISM.md 6.1, 6.8b).
Status BatchNormalizationAnyFloat(NodeContext& ctx) {
  if (ctx.has_input(0) && IsHalfDType(ctx.input_type(0).dtype)) {
    ASSIGN_OR_RETURN(std::optional<ValueId> folded, FoldHalfBatchNormIntoConv(ctx));
    if (folded) return SetResult(ctx, *folded);
  }
  return LowerThroughF32(ctx, BatchNormalization);
}

// --- Softmax, LogSoftmax ---

// Before opset 13 both ops worked on the input coerced to 2-D at `axis` (default 1).
StatusOr<std::pair<ValueId, int64_t>> SoftmaxOperand(NodeContext& ctx, ValueId x) {
  const int64_t rank = Rank(ctx, x);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", ctx.opset() >= 13 ? -1 : 1));
  if (rank == 0) return ctx.Invalid("input must have rank 1 or more");
  if (ctx.opset() >= 13) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank, "axis"));
    return std::make_pair(x, axis);
  }
  int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis > rank) return ctx.Invalid("axis out of range");
  const Shape& s = ctx.type(x).shape;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= s[i];
  ASSIGN_OR_RETURN(ValueId flat, ReshapeTo(ctx, x, {outer, inner}));
  return std::make_pair(flat, int64_t{1});
}

Status Softmax(NodeContext& ctx, bool log) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireFloat(ctx, x, "the input"));
  ASSIGN_OR_RETURN(auto operand, SoftmaxOperand(ctx, x));
  auto [v, axis] = operand;
  ValueId y;
  if (!log && ctx.type(x).dtype == DType::kF64) {
    // No f64 softmax kernel: the same sequence spelled out (DETERMINISM.md 4.5 and 1.2):
    // m = max, e = exp(x - m), s = csum(e), e / s.
    Attributes reduce = {{"axes", Ints{axis}}, {"keepdims", int64_t{1}}};
    ASSIGN_OR_RETURN(ValueId m, ctx.Emit("reduce_max", {v}, reduce));
    ASSIGN_OR_RETURN(ValueId d, ctx.Emit("sub", {v, m}));
    ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {d}));
    ASSIGN_OR_RETURN(ValueId s, ctx.Emit("reduce_sum", {e}, reduce));
    ASSIGN_OR_RETURN(y, ctx.Emit("div", {e, s}));
  } else if (!log) {
    ASSIGN_OR_RETURN(y, ctx.Emit("softmax", {v}, {{"axis", axis}}));
  } else {
    // (x - max) - log(sum(exp(x - max))): never log(0) for the smallest probabilities.
    Attributes reduce = {{"axes", Ints{axis}}, {"keepdims", int64_t{1}}};
    ASSIGN_OR_RETURN(ValueId m, ctx.Emit("reduce_max", {v}, reduce));
    ASSIGN_OR_RETURN(ValueId d, ctx.Emit("sub", {v, m}));
    ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {d}));
    ASSIGN_OR_RETURN(ValueId s, ctx.Emit("reduce_sum", {e}, reduce));
    ASSIGN_OR_RETURN(ValueId ls, ctx.Emit("log", {s}));
    ASSIGN_OR_RETURN(y, ctx.Emit("sub", {d, ls}));
  }
  return SetResult(ctx, ReshapeTo(ctx, y, ctx.type(x).shape));
}

// Hardmax: 1 at the first maximum along the axis (argmax's tie rule), 0 elsewhere:
// cast(equal(argmax(x, keepdims), iota), f32). Before opset 13 the input is coerced to 2-D
// at `axis`, as for Softmax.
Status Hardmax(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  ASSIGN_OR_RETURN(auto operand, SoftmaxOperand(ctx, x));
  auto [v, axis] = operand;
  const Shape vs = ctx.type(v).shape;  // a copy: Emit may move the value table
  const Ints x_dims(ctx.type(x).shape.begin(), ctx.type(x).shape.end());
  const int64_t n = vs[axis];
  ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(ctx.type(x).shape));
  if (count == 0) {
    // argmax refuses an empty axis; an empty input has an empty result anyway.
    return SetResult(ctx, ctx.Emit("expand", {ctx.ScalarF32(0.0f)}, {{"shape", x_dims}}));
  }
  ASSIGN_OR_RETURN(ValueId first_max, ctx.Emit("argmax", {v}, {{"axis", axis}, {"keepdims", int64_t{1}}}));
  Ints positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
  Shape iota_shape(vs.size() - static_cast<size_t>(axis), 1);
  iota_shape[0] = n;
  ASSIGN_OR_RETURN(ValueId iota, ReshapeTo(ctx, ctx.Constant(Int64Vector(positions)), iota_shape));
  ASSIGN_OR_RETURN(ValueId hit, ctx.Emit("equal", {first_max, iota}));
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("cast", {hit}, {{"to", DType::kF32}}));
  return SetResult(ctx, ReshapeTo(ctx, y, ctx.type(x).shape));
}

// InstanceNormalization: per (n, c), over the spatial axes, the statistics of layer_norm
// spelled out (mean = reduce_mean(x), d = x - mean, var = reduce_mean(d * d),
// r = 1 / sqrt(var + epsilon)), then y = (d * r) * scale[c] + B[c].
Status InstanceNormalization(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"epsilon"}));
  ASSIGN_OR_RETURN(float epsilon, ctx.AttrFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId scale, ctx.RequiredInput(1));
  ASSIGN_OR_RETURN(ValueId bias, ctx.RequiredInput(2));
  RETURN_IF_ERROR(RequireF32(ctx, x, "input"));
  RETURN_IF_ERROR(RequireF32(ctx, scale, "scale"));
  RETURN_IF_ERROR(RequireF32(ctx, bias, "B"));
  const Shape xs = ctx.type(x).shape;
  if (xs.size() < 3) return ctx.Invalid("input must have rank 3 or more ([N, C, D1, ...])");
  const Shape per_channel = {xs[1]};
  if (ctx.type(scale).shape != per_channel || ctx.type(bias).shape != per_channel) {
    return ctx.Invalid("scale and B must have shape [C] = [" + std::to_string(xs[1]) + "]");
  }
  Ints axes;
  for (int64_t i = 2; i < static_cast<int64_t>(xs.size()); ++i) axes.push_back(i);
  Attributes reduce = {{"axes", axes}, {"keepdims", int64_t{1}}};
  ASSIGN_OR_RETURN(ValueId mean, ctx.Emit("reduce_mean", {x}, reduce));
  ASSIGN_OR_RETURN(ValueId d, ctx.Emit("sub", {x, mean}));
  ASSIGN_OR_RETURN(ValueId d2, ctx.Emit("mul", {d, d}));
  ASSIGN_OR_RETURN(ValueId var, ctx.Emit("reduce_mean", {d2}, reduce));
  ASSIGN_OR_RETURN(ValueId ve, ctx.Emit("add", {var, ctx.ScalarF32(epsilon)}));
  ASSIGN_OR_RETURN(ValueId sd, ctx.Emit("sqrt", {ve}));
  ASSIGN_OR_RETURN(ValueId inv, ctx.Emit("div", {ctx.ScalarF32(1.0f), sd}));
  ASSIGN_OR_RETURN(ValueId normalized, ctx.Emit("mul", {d, inv}));
  Shape channel_shape(xs.size() - 1, 1);
  channel_shape[0] = xs[1];
  ASSIGN_OR_RETURN(ValueId scale_c, ReshapeTo(ctx, scale, channel_shape));
  ASSIGN_OR_RETURN(ValueId bias_c, ReshapeTo(ctx, bias, channel_shape));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {normalized, scale_c}));
  return SetResult(ctx, ctx.Emit("add", {scaled, bias_c}));
}

// LRN: s = the sum of x^2 over the channel window [c - (size-1)/2, c + ceil((size-1)/2)]
// (zero-padded), one `reduce_sum` (csum) of `size` terms per output after a constant-index
// `gather` of the windows; y = div(x, pow(add(mul(s, alpha / size), bias), beta)), with
// alpha / size one f32 division at import.
Status Lrn(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"alpha", "beta", "bias", "size"}));
  ASSIGN_OR_RETURN(float alpha, ctx.AttrFloat("alpha", 1e-4f));
  ASSIGN_OR_RETURN(float beta, ctx.AttrFloat("beta", 0.75f));
  ASSIGN_OR_RETURN(float bias, ctx.AttrFloat("bias", 1.0f));
  if (!ctx.has_attr("size")) return ctx.Invalid("attribute size is required");
  ASSIGN_OR_RETURN(int64_t size, ctx.AttrInt("size", 1));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireF32(ctx, x, "the input"));
  const Shape xs = ctx.type(x).shape;  // a copy: Emit may move the value table
  if (xs.size() < 2) return ctx.Invalid("input must have rank 2 or more ([N, C, ...])");
  const int64_t batch = xs[0], channels = xs[1];
  ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(xs));
  const int64_t spatial = batch * channels == 0 ? 0 : count / (batch * channels);
  // The window table and the gathered windows are `size` times larger than x: cap them first.
  const double windows = static_cast<double>(count) * static_cast<double>(size);
  if (size < 1 || windows > static_cast<double>(ctx.limits().max_elements_per_tensor)) {
    return ctx.Invalid("attribute size must be at least 1 and the windows within the element cap");
  }
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  ASSIGN_OR_RETURN(ValueId sq, ctx.Emit("mul", {x, x}));
  ASSIGN_OR_RETURN(sq, ReshapeTo(ctx, sq, {batch, channels, spatial}));
  ASSIGN_OR_RETURN(ValueId padded, ctx.Emit("pad", {sq}, {{"pads", Ints{0, before, 0, 0, after, 0}}}));
  Tensor window_index(DType::kI64, {channels, size});
  int64_t* w = window_index.data_as<int64_t>();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t k = 0; k < size; ++k) w[c * size + k] = c + k;
  }
  ASSIGN_OR_RETURN(ValueId gathered,
                   ctx.Emit("gather", {padded, ctx.Constant(std::move(window_index))}, {{"axis", int64_t{1}}}));
  ASSIGN_OR_RETURN(ValueId sum, ctx.Emit("reduce_sum", {gathered}, {{"axes", Ints{2}}, {"keepdims", int64_t{0}}}));
  ASSIGN_OR_RETURN(sum, ReshapeTo(ctx, sum, xs));
  const float alpha_over_size = alpha / static_cast<float>(size);
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {sum, ctx.ScalarF32(alpha_over_size)}));
  ASSIGN_OR_RETURN(ValueId base, ctx.Emit("add", {scaled, ctx.ScalarF32(bias)}));
  ASSIGN_OR_RETURN(ValueId denominator, ctx.Emit("pow", {base, ctx.ScalarF32(beta)}));
  return SetResult(ctx, ctx.Emit("div", {x, denominator}));
}

// --- LayerNormalization (opset 17) ---

Status LayerNormalization(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "epsilon", "stash_type"}));
  ASSIGN_OR_RETURN(int64_t stash_type, ctx.AttrInt("stash_type", 1));
  if (stash_type != 1) return ctx.Unsupported("attribute stash_type " + std::to_string(stash_type));
  ASSIGN_OR_RETURN(float epsilon, ctx.AttrFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId scale, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireF32OrHalf(ctx, x, "input X"));
  const Shape xs = ctx.type(x).shape;
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", -1));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(xs.size()), "axis"));
  const Shape norm(xs.begin() + axis, xs.end());
  // Scale and bias may be given broadcastable to the normalized shape.
  auto fit = [&](ValueId v) -> StatusOr<ValueId> {
    if (ctx.type(v).shape == norm) return v;
    return ctx.Emit("expand", {v}, {{"shape", Ints(norm.begin(), norm.end())}});
  };
  ASSIGN_OR_RETURN(scale, fit(scale));
  std::vector<ValueId> inputs = {x, scale};
  if (ctx.has_input(2)) {
    ASSIGN_OR_RETURN(ValueId bias, fit(ctx.input(2)));
    inputs.push_back(bias);
  }
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("layer_norm", inputs, {{"axis", axis}, {"epsilon", epsilon}}));
  ctx.SetOutput(0, y);
  if (ctx.wants_output(1) || ctx.wants_output(2)) {
    // The same statistics layer_norm computes (DETERMINISM.md 4.5), spelled out.
    Ints axes;
    for (int64_t i = axis; i < static_cast<int64_t>(xs.size()); ++i) axes.push_back(i);
    Attributes reduce = {{"axes", axes}, {"keepdims", int64_t{1}}};
    ASSIGN_OR_RETURN(ValueId mean, ctx.Emit("reduce_mean", {x}, reduce));
    ASSIGN_OR_RETURN(ValueId d, ctx.Emit("sub", {x, mean}));
    ASSIGN_OR_RETURN(ValueId d2, ctx.Emit("mul", {d, d}));
    ASSIGN_OR_RETURN(ValueId var, ctx.Emit("reduce_mean", {d2}, reduce));
    ASSIGN_OR_RETURN(ValueId ve, ctx.Emit("add", {var, ctx.ScalarF32(epsilon)}));
    ASSIGN_OR_RETURN(ValueId sd, ctx.Emit("sqrt", {ve}));
    ASSIGN_OR_RETURN(ValueId inv, ctx.Emit("div", {ctx.ScalarF32(1.0f), sd}));
    ctx.SetOutput(1, mean);
    ctx.SetOutput(2, inv);
  }
  return OkStatus();
}

// --- reductions ---

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

Status Reduce(NodeContext& ctx, ReduceKind kind) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const int64_t rank = Rank(ctx, x);
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.AttrInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t noop_with_empty_axes, ctx.AttrInt("noop_with_empty_axes", 0));
  Ints axes;
  // ReduceSum takes its axes as an input from opset 13, the others from opset 18; an axes
  // attribute there is refused by the attribute check.
  const bool axes_input = ctx.opset() >= (kind == ReduceKind::kSum ? 13 : 18);
  if (axes_input) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"keepdims", "noop_with_empty_axes"}));
    if (ctx.has_input(1)) {
      ASSIGN_OR_RETURN(axes, ctx.ConstantInts(1, "axes"));
    }
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({"axes", "keepdims"}));
    ASSIGN_OR_RETURN(axes, ctx.AttrInts("axes", {}));
  }
  if (axes.empty()) {
    if (noop_with_empty_axes) return SetResult(ctx, ctx.Emit("identity", {x}));
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank, "axis"));
  }
  if (rank == 0) return SetResult(ctx, ctx.Emit("identity", {x}));
  if (kind != ReduceKind::kSum && kind != ReduceKind::kMax && kind != ReduceKind::kMin && kind != ReduceKind::kProd) {
    RETURN_IF_ERROR(RequireFloat(ctx, x, "the input"));
  }
  Attributes attrs = {{"axes", axes}, {"keepdims", keepdims}};
  ValueId operand = x;
  switch (kind) {
    case ReduceKind::kSumSquare:
    case ReduceKind::kL2: {
      ASSIGN_OR_RETURN(operand, ctx.Emit("mul", {x, x}));
      break;
    }
    case ReduceKind::kL1: {
      ASSIGN_OR_RETURN(operand, ctx.Emit("abs", {x}));
      break;
    }
    case ReduceKind::kLogSumExp: {
      ASSIGN_OR_RETURN(operand, ctx.Emit("exp", {x}));
      break;
    }
    default: break;
  }
  const char* op = kind == ReduceKind::kMean   ? "reduce_mean"
                   : kind == ReduceKind::kMax  ? "reduce_max"
                   : kind == ReduceKind::kMin  ? "reduce_min"
                   : kind == ReduceKind::kProd ? "reduce_prod"
                                               : "reduce_sum";
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit(op, {operand}, attrs));
  if (kind == ReduceKind::kL2) {
    ASSIGN_OR_RETURN(y, ctx.Emit("sqrt", {y}));
  }
  if (kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp) {
    ASSIGN_OR_RETURN(y, ctx.Emit("log", {y}));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

// ArgMax directly; the last index by running it over the axis reversed; ArgMin of floats as
// the ArgMax of the negation (exact: negation only flips the sign bit, NaN still wins).
Status ArgExtreme(NodeContext& ctx, bool is_max) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "keepdims", "select_last_index"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.AttrInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t last, ctx.AttrInt("select_last_index", 0));
  const int64_t rank = Rank(ctx, x);
  if (rank == 0) return ctx.Invalid("the input must have rank 1 or more");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank, "axis"));
  if (!is_max) {
    RETURN_IF_ERROR(RequireF32(ctx, x, "the input of ArgMin"));
    ASSIGN_OR_RETURN(x, ctx.Emit("neg", {x}));
  }
  const int64_t n = ctx.type(x).shape[axis];
  if (last) {
    ASSIGN_OR_RETURN(x, ctx.Emit("slice", {x},
                                 {{"starts", Ints{-1}},
                                  {"ends", Ints{std::numeric_limits<int64_t>::min()}},
                                  {"axes", Ints{axis}},
                                  {"steps", Ints{-1}}}));
  }
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("argmax", {x}, {{"axis", axis}, {"keepdims", keepdims}}));
  if (last) {
    ValueId top = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {n - 1}));
    ASSIGN_OR_RETURN(y, ctx.Emit("sub", {top, y}));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

// TopK: Indices = top_k(x, k, axis, largest), best first, equal values by ascending index,
// NaN above +inf (DETERMINISM.md 4.3); with sorted = 0 ONNX leaves the order open and it is
// the same. Values are copied from X with one gather on X flattened, at
// index * inner + base, base a constant holding each output's offset from its other
// coordinates (inner: the product of the dims after the axis).
Status TopK(NodeContext& ctx) {
  const bool k_is_attribute = ctx.opset() < 10;
  if (k_is_attribute) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "k"}));
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "largest", "sorted"}));
  }
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const TypeInfo& xt = ctx.type(x);
  if (xt.dtype != DType::kF32 && xt.dtype != DType::kI32 && xt.dtype != DType::kI8 && xt.dtype != DType::kI64) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(xt.dtype)) + " of the input (f32, i32, i8, i64 only)");
  }
  const Shape xs = xt.shape;
  const int64_t rank = static_cast<int64_t>(xs.size());
  if (rank == 0) return ctx.Invalid("the input must have rank 1 or more");
  ASSIGN_OR_RETURN(int64_t axis, ctx.AttrInt("axis", -1));
  ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, rank, "axis"));
  ASSIGN_OR_RETURN(int64_t largest, ctx.AttrInt("largest", 1));
  ASSIGN_OR_RETURN(int64_t sorted, ctx.AttrInt("sorted", 1));
  if ((largest != 0 && largest != 1) || (sorted != 0 && sorted != 1)) {
    return ctx.Invalid("largest and sorted must be 0 or 1");
  }
  int64_t k = -1;
  if (k_is_attribute) {
    if (!ctx.has_attr("k")) return ctx.Invalid("attribute k is required");
    ASSIGN_OR_RETURN(k, ctx.AttrInt("k", -1));
  } else {
    ASSIGN_OR_RETURN(Ints ks, ctx.ConstantInts(1, "K"));
    if (ks.size() != 1) return ctx.Invalid("K must hold one value");
    k = ks[0];
  }
  const int64_t n = xs[axis];
  if (k < 0 || k > n) {
    return ctx.Invalid("K = " + std::to_string(k) + " is outside [0, " + std::to_string(n) + "], the axis length");
  }
  ASSIGN_OR_RETURN(ValueId indices, ctx.Emit("top_k", {x}, {{"k", k}, {"axis", axis}, {"largest", largest}}));
  ctx.SetOutput(1, indices);
  if (!ctx.wants_output(0)) return OkStatus();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= xs[d];
  std::vector<int64_t> base;
  base.reserve(static_cast<size_t>(outer * k * inner));
  for (int64_t p = 0; p < outer; ++p) {
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t j = 0; j < inner; ++j) base.push_back(p * n * inner + j);
    }
  }
  Shape out_shape = xs;
  out_shape[axis] = k;
  ASSIGN_OR_RETURN(ValueId flat, ReshapeTo(ctx, x, {outer * n * inner}));
  ValueId position = indices;
  if (inner != 1) {
    ASSIGN_OR_RETURN(position, ctx.Emit("mul", {position, ctx.Scalar(DType::kI64, static_cast<double>(inner))}));
  }
  ASSIGN_OR_RETURN(
      position, ctx.Emit("add", {position, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, out_shape, base))}));
  ASSIGN_OR_RETURN(ValueId values, ctx.Emit("gather", {flat, position}, {{"axis", int64_t{0}}}));
  ctx.SetOutput(0, values);
  return OkStatus();
}

// --- CumSum, MeanVarianceNormalization ---

// CumSum: one `cumsum` (DETERMINISM.md 4.6a); the axis must be known at import.
Status CumSum(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"exclusive", "reverse"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const DType dtype = ctx.type(x).dtype;
  if (!IsFloatDType(dtype) && !IsIntegerDType(dtype)) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(dtype)) + " for input x");
  }
  const int64_t rank = Rank(ctx, x);
  if (rank == 0) return ctx.Invalid("x must have rank 1 or more");
  ASSIGN_OR_RETURN(Ints axis, ctx.ConstantInts(1, "axis"));
  if (axis.size() != 1) return ctx.Invalid("axis must hold exactly one value, got " + std::to_string(axis.size()));
  ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis[0], rank, "axis"));
  ASSIGN_OR_RETURN(int64_t exclusive, ctx.AttrInt("exclusive", 0));
  ASSIGN_OR_RETURN(int64_t reverse, ctx.AttrInt("reverse", 0));
  if (exclusive != 0 && exclusive != 1) return ctx.Invalid("attribute exclusive must be 0 or 1");
  if (reverse != 0 && reverse != 1) return ctx.Invalid("attribute reverse must be 0 or 1");
  return SetResult(ctx, ctx.Emit("cumsum", {x}, {{"axis", a}, {"exclusive", exclusive}, {"reverse", reverse}}));
}

// MeanVarianceNormalization: ONNX's function body op by op, with Pow(v, 2) as mul(v, v)
// (the correctly rounded square): m = mean(x), var = mean(x * x) - m * m,
// y = (x - m) / (sqrt(var) + 1e-9), the means over `axes` with keepdims.
Status MeanVarianceNormalization(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axes", "across_channels", "normalize_variance"}));
  if (ctx.has_attr("across_channels") || ctx.has_attr("normalize_variance")) {
    return ctx.Unsupported("attributes across_channels / normalize_variance (MeanVarianceNormalization-1)");
  }
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireFloat(ctx, x, "input X"));
  const DType dtype = ctx.type(x).dtype;
  const int64_t rank = Rank(ctx, x);
  ASSIGN_OR_RETURN(Ints axes, ctx.AttrInts("axes", {0, 2, 3}));
  for (int64_t& a : axes) {
    ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank, "axes"));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return ctx.Invalid("axes has a repeated axis");
  const Attributes mean = {{"axes", axes}, {"keepdims", int64_t{1}}};
  ASSIGN_OR_RETURN(ValueId m, ctx.Emit("reduce_mean", {x}, mean));
  ASSIGN_OR_RETURN(ValueId m2, ctx.Emit("mul", {m, m}));
  ASSIGN_OR_RETURN(ValueId x2, ctx.Emit("mul", {x, x}));
  ASSIGN_OR_RETURN(ValueId ex2, ctx.Emit("reduce_mean", {x2}, mean));
  ASSIGN_OR_RETURN(ValueId var, ctx.Emit("sub", {ex2, m2}));
  ASSIGN_OR_RETURN(ValueId sd, ctx.Emit("sqrt", {var}));
  ASSIGN_OR_RETURN(ValueId centered, ctx.Emit("sub", {x, m}));
  ASSIGN_OR_RETURN(ValueId denom, ctx.Emit("add", {sd, ctx.Scalar(dtype, 1e-9)}));
  return SetResult(ctx, ctx.Emit("div", {centered, denom}));
}

}  // namespace

const std::vector<OpConverter>& NnConverters() {
  static const std::vector<OpConverter> table = {
      {"MatMul", MatMul},
      {"Gemm", Gemm},
      {"Conv", Conv},
      {"MaxPool", [](NodeContext& c) { return Pool(c, true); }},
      {"AveragePool", [](NodeContext& c) { return Pool(c, false); }},
      {"GlobalAveragePool", [](NodeContext& c) { return GlobalPool(c, "reduce_mean"); }},
      {"GlobalMaxPool", [](NodeContext& c) { return GlobalPool(c, "reduce_max"); }},
      {"BatchNormalization", BatchNormalizationAnyFloat},
      {"Softmax", [](NodeContext& c) { return Softmax(c, false); }},
      {"LogSoftmax", [](NodeContext& c) { return Softmax(c, true); }},
      {"LayerNormalization", LayerNormalization},
      {"Hardmax", ThroughF32<Hardmax>},
      {"LRN", ThroughF32<Lrn>},
      {"InstanceNormalization", ThroughF32<InstanceNormalization>},
      {"ReduceSum", [](NodeContext& c) { return Reduce(c, ReduceKind::kSum); }},
      {"ReduceMean", [](NodeContext& c) { return Reduce(c, ReduceKind::kMean); }},
      {"ReduceMax", [](NodeContext& c) { return Reduce(c, ReduceKind::kMax); }},
      {"ReduceMin", [](NodeContext& c) { return Reduce(c, ReduceKind::kMin); }},
      {"ConvTranspose", ConvTranspose},
      {"TopK", TopK},
      {"ReduceProd", [](NodeContext& c) { return Reduce(c, ReduceKind::kProd); }},
      {"ReduceSumSquare", [](NodeContext& c) { return Reduce(c, ReduceKind::kSumSquare); }},
      {"ReduceL1", [](NodeContext& c) { return Reduce(c, ReduceKind::kL1); }},
      {"ReduceL2", [](NodeContext& c) { return Reduce(c, ReduceKind::kL2); }},
      {"ReduceLogSum", [](NodeContext& c) { return Reduce(c, ReduceKind::kLogSum); }},
      {"ReduceLogSumExp", [](NodeContext& c) { return Reduce(c, ReduceKind::kLogSumExp); }},
      {"ArgMax", [](NodeContext& c) { return ArgExtreme(c, true); }},
      {"ArgMin", [](NodeContext& c) { return ArgExtreme(c, false); }},
      {"CumSum", CumSum},
      {"MeanVarianceNormalization", MeanVarianceNormalization},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
