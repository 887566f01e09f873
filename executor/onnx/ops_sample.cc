// ONNX GridSample and RoiAlign: sampling an image at coordinates computed at run time. Both
// are lowered to section-4 ops (docs/DETERMINISM.md 6.7b): the coordinates, taps and weights
// are f32 elementwise ops, each tap is one `gather` of whole pixels (all channels) from the
// image viewed as [N*H*W, C] at indices clamped into range, and a tap outside the image is
// replaced by +0 with `where`, so no index is ever out of bounds.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

// Largest spatial dim: every pixel coordinate and H*W stay exact in f32 arithmetic.
constexpr int64_t kMaxSpatialDim = int64_t{1} << 24;
// Largest adaptive sampling grid per bin and axis (sampling_ratio 0).
constexpr int64_t kMaxAdaptiveGrid = 1024;

// Short names for the emitted ops; each returns the new value or the error.
class Ops {
 public:
  explicit Ops(NodeContext& ctx) : ctx_(ctx) {}
  StatusOr<ValueId> operator()(std::string_view op, std::vector<ValueId> in, Attributes attrs = {}) {
    return ctx_.Emit(op, std::move(in), std::move(attrs));
  }
  ValueId F(float v) { return ctx_.ScalarF32(v); }
  ValueId I(int64_t v) { return ctx_.Scalar(DType::kI64, static_cast<double>(v)); }
  // min(max(v, lo), hi): section 1.1 max and min.
  StatusOr<ValueId> Clip(ValueId v, float lo, float hi) {
    ASSIGN_OR_RETURN(ValueId m, (*this)("max", {v, F(lo)}));
    return (*this)("min", {m, F(hi)});
  }
  // lo <= v <= hi, false for NaN.
  StatusOr<ValueId> InRange(ValueId v, float lo, float hi) {
    ASSIGN_OR_RETURN(ValueId a, (*this)("greater_equal", {v, F(lo)}));
    ASSIGN_OR_RETURN(ValueId b, (*this)("less_equal", {v, F(hi)}));
    return (*this)("and", {a, b});
  }
  NodeContext& ctx() { return ctx_; }

 private:
  NodeContext& ctx_;
};

// N*H*W indexes the pixel rows in i64; with C = 0 it is not bounded by X's element count.
Status CheckPixelCount(const NodeContext& ctx, const Shape& xs) {
  ASSIGN_OR_RETURN(int64_t pixels, CheckedNumElements({xs[0], xs[2], xs[3]}));
  if (pixels > ctx.limits().max_elements_per_tensor) return ctx.Invalid("N*H*W exceeds the element cap");
  return OkStatus();
}

// x [N, C, H, W] -> [N*H*W, C]: one row per pixel, so a gather fetches all channels.
StatusOr<ValueId> PixelRows(Ops& op, ValueId x, const Shape& s) {
  ASSIGN_OR_RETURN(ValueId t, op("transpose", {x}, {{"perm", Ints{0, 2, 3, 1}}}));
  return ReshapeTo(op.ctx(), t, {s[0] * s[2] * s[3], s[1]});
}

// The pixels at integral f32 row/column coordinates y, x (broadcastable to one shape whose
// last dim is 1) of the images given by `base` (i64, n*H*W, broadcastable too). Coordinates
// are clamped into the image before the cast, so the index is in range even for NaN (cast
// gives 0) and infinities; with `masked`, a tap whose coordinate lies outside the image is +0.
// Result: that shape with its last dim replaced by C.
StatusOr<ValueId> Taps(Ops& op, ValueId rows, ValueId base, ValueId y, ValueId x, int64_t h, int64_t w, bool masked) {
  const float hmax = static_cast<float>(h - 1), wmax = static_cast<float>(w - 1);
  ASSIGN_OR_RETURN(ValueId yc, op.Clip(y, 0.0f, hmax));
  ASSIGN_OR_RETURN(ValueId xc, op.Clip(x, 0.0f, wmax));
  ASSIGN_OR_RETURN(ValueId yi, op("cast", {yc}, {{"to", DType::kI64}}));
  ASSIGN_OR_RETURN(ValueId xi, op("cast", {xc}, {{"to", DType::kI64}}));
  ASSIGN_OR_RETURN(ValueId flat, op("mul", {yi, op.I(w)}));
  ASSIGN_OR_RETURN(flat, op("add", {flat, xi}));
  ASSIGN_OR_RETURN(flat, op("add", {flat, base}));
  Shape shape = op.ctx().type(flat).shape;  // [..., 1]
  shape.pop_back();
  ASSIGN_OR_RETURN(flat, ReshapeTo(op.ctx(), flat, shape));
  ASSIGN_OR_RETURN(ValueId v, op("gather", {rows, flat}, {{"axis", int64_t{0}}}));
  if (!masked) return v;
  ASSIGN_OR_RETURN(ValueId in_y, op.InRange(y, 0.0f, hmax));
  ASSIGN_OR_RETURN(ValueId in_x, op.InRange(x, 0.0f, wmax));
  ASSIGN_OR_RETURN(ValueId inside, op("and", {in_y, in_x}));
  return op("where", {inside, v, op.ctx().Scalar(op.ctx().type(v).dtype, 0.0)});
}

// y = t0 * w0, then y = y + tk * wk in order (two roundings per term).
StatusOr<ValueId> WeightedChain(Ops& op, const std::vector<ValueId>& taps, const std::vector<ValueId>& weights) {
  ASSIGN_OR_RETURN(ValueId y, op("mul", {taps[0], weights[0]}));
  for (size_t k = 1; k < taps.size(); ++k) {
    ASSIGN_OR_RETURN(ValueId term, op("mul", {taps[k], weights[k]}));
    ASSIGN_OR_RETURN(y, op("add", {y, term}));
  }
  return y;
}

enum class Padding { kZeros, kBorder, kReflection };

struct GridSpec {
  enum class Mode { kBilinear, kNearest, kBicubic } mode = Mode::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

// The pixel coordinate of a normalized one (DETERMINISM.md 6.7b), length L:
// align_corners: ((g + 1) / 2) * (L - 1); otherwise (((g + 1) * L) - 1) / 2.
StatusOr<ValueId> Unnormalize(Ops& op, ValueId g, int64_t length, bool align_corners) {
  const float l = static_cast<float>(length);
  ASSIGN_OR_RETURN(ValueId a, op("add", {g, op.F(1.0f)}));
  if (align_corners) {
    ASSIGN_OR_RETURN(a, op("div", {a, op.F(2.0f)}));
    return op("mul", {a, op.F(l - 1.0f)});
  }
  ASSIGN_OR_RETURN(a, op("mul", {a, op.F(l)}));
  ASSIGN_OR_RETURN(a, op("sub", {a, op.F(1.0f)}));
  return op("div", {a, op.F(2.0f)});
}

// border: clip to [0, L - 1]. reflection: fold into [lo, lo + span] (lo = 0, span = L - 1 with
// align_corners, else lo = -0.5, span = L), then clip. zeros: unchanged.
StatusOr<ValueId> PadCoordinate(Ops& op, ValueId c, int64_t length, const GridSpec& spec) {
  const float lmax = static_cast<float>(length - 1);
  if (spec.padding == Padding::kZeros) return c;
  if (spec.padding == Padding::kReflection) {
    const float lo = spec.align_corners ? 0.0f : -0.5f;
    const float span = spec.align_corners ? lmax : static_cast<float>(length);
    if (span == 0.0f) {
      // A single pixel with align_corners: every coordinate reflects onto 0.
      return op("expand", {op.F(0.0f)}, {{"shape", op.ctx().type(c).shape}});
    }
    ASSIGN_OR_RETURN(ValueId d, op("sub", {c, op.F(lo)}));
    ASSIGN_OR_RETURN(d, op("abs", {d}));
    ASSIGN_OR_RETURN(ValueId extra, op("fmod", {d, op.F(span)}));
    ASSIGN_OR_RETURN(ValueId flips, op("div", {d, op.F(span)}));
    ASSIGN_OR_RETURN(flips, op("floor", {flips}));
    ASSIGN_OR_RETURN(ValueId parity, op("fmod", {flips, op.F(2.0f)}));
    ASSIGN_OR_RETURN(ValueId odd, op("not_equal", {parity, op.F(0.0f)}));
    ASSIGN_OR_RETURN(ValueId even_pos, op("add", {extra, op.F(lo)}));
    ASSIGN_OR_RETURN(ValueId odd_pos, op("sub", {op.F(span), extra}));
    ASSIGN_OR_RETURN(odd_pos, op("add", {odd_pos, op.F(lo)}));
    ASSIGN_OR_RETURN(c, op("where", {odd, odd_pos, even_pos}));
  }
  return op.Clip(c, 0.0f, lmax);
}

// The cubic convolution weights (A = -0.75) of fraction t, PyTorch's formulas evaluated left
// to right in f32: w0 = k2(t + 1), w1 = k1(t), w2 = k1(1 - t), w3 = k2((1 - t) + 1), with
// k1(s) = ((((A + 2) * s) - (A + 3)) * s) * s + 1 and k2(s) = (((A * s) - 5A) * s + 8A) * s - 4A.
StatusOr<std::vector<ValueId>> CubicWeights(Ops& op, ValueId t) {
  constexpr float a = -0.75f;
  auto k1 = [&](ValueId s) -> StatusOr<ValueId> {
    ASSIGN_OR_RETURN(ValueId v, op("mul", {s, op.F(a + 2.0f)}));
    ASSIGN_OR_RETURN(v, op("sub", {v, op.F(a + 3.0f)}));
    ASSIGN_OR_RETURN(v, op("mul", {v, s}));
    ASSIGN_OR_RETURN(v, op("mul", {v, s}));
    return op("add", {v, op.F(1.0f)});
  };
  auto k2 = [&](ValueId s) -> StatusOr<ValueId> {
    ASSIGN_OR_RETURN(ValueId v, op("mul", {s, op.F(a)}));
    ASSIGN_OR_RETURN(v, op("sub", {v, op.F(5.0f * a)}));
    ASSIGN_OR_RETURN(v, op("mul", {v, s}));
    ASSIGN_OR_RETURN(v, op("add", {v, op.F(8.0f * a)}));
    ASSIGN_OR_RETURN(v, op("mul", {v, s}));
    return op("sub", {v, op.F(4.0f * a)});
  };
  ASSIGN_OR_RETURN(ValueId t1, op("add", {t, op.F(1.0f)}));
  ASSIGN_OR_RETURN(ValueId u, op("sub", {op.F(1.0f), t}));
  ASSIGN_OR_RETURN(ValueId u1, op("add", {u, op.F(1.0f)}));
  std::vector<ValueId> w(4);
  ASSIGN_OR_RETURN(w[0], k2(t1));
  ASSIGN_OR_RETURN(w[1], k1(t));
  ASSIGN_OR_RETURN(w[2], k1(u));
  ASSIGN_OR_RETURN(w[3], k2(u1));
  return w;
}

StatusOr<GridSpec> ReadGridSpec(const NodeContext& ctx) {
  GridSpec spec;
  ASSIGN_OR_RETURN(std::string mode, ctx.AttrString("mode", "bilinear"));
  // Opset 20 renamed bilinear and bicubic to linear and cubic; both spellings mean the same.
  if (mode == "bilinear" || mode == "linear") {
    spec.mode = GridSpec::Mode::kBilinear;
  } else if (mode == "nearest") {
    spec.mode = GridSpec::Mode::kNearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    spec.mode = GridSpec::Mode::kBicubic;
  } else {
    return ctx.Invalid("mode '" + mode + "' is not one of bilinear, nearest, bicubic (linear, cubic)");
  }
  ASSIGN_OR_RETURN(std::string padding, ctx.AttrString("padding_mode", "zeros"));
  if (padding == "zeros") {
    spec.padding = Padding::kZeros;
  } else if (padding == "border") {
    spec.padding = Padding::kBorder;
  } else if (padding == "reflection") {
    spec.padding = Padding::kReflection;
  } else {
    return ctx.Invalid("padding_mode '" + padding + "' is not one of zeros, border, reflection");
  }
  ASSIGN_OR_RETURN(int64_t align, ctx.AttrInt("align_corners", 0));
  if (align != 0 && align != 1) return ctx.Invalid("align_corners must be 0 or 1");
  spec.align_corners = align == 1;
  return spec;
}

// GridSample (opset 16; the 4-D case of opset 20): X [N, C, H, W], grid [N, Ho, Wo, 2] of
// normalized (x, y) -> [N, C, Ho, Wo].
Status GridSample(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"align_corners", "mode", "padding_mode"}));
  ASSIGN_OR_RETURN(GridSpec spec, ReadGridSpec(ctx));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId grid, ctx.RequiredInput(1));
  // nearest copies bits, so X may have any dtype; the interpolating modes compute in f32.
  if (spec.mode != GridSpec::Mode::kNearest) RETURN_IF_ERROR(RequireF32(ctx, x, "X"));
  RETURN_IF_ERROR(RequireF32(ctx, grid, "grid"));
  const Shape xs = ctx.type(x).shape, gs = ctx.type(grid).shape;
  if (xs.size() != 4) return ctx.Unsupported("only a 4-D X [N, C, H, W] (2 spatial dims) is supported");
  if (gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2) {
    return ctx.Invalid("grid " + ShapeToString(gs) + " must be [N, H_out, W_out, 2] with X's N " + ShapeToString(xs));
  }
  const int64_t n = xs[0], h = xs[2], w = xs[3];
  if (h < 1 || w < 1 || h > kMaxSpatialDim || w > kMaxSpatialDim) {
    return ctx.Invalid("X's spatial dims must be between 1 and 2^24, got " + ShapeToString(xs));
  }
  RETURN_IF_ERROR(CheckPixelCount(ctx, xs));
  Ops op(ctx);
  ASSIGN_OR_RETURN(ValueId rows, PixelRows(op, x, xs));
  Tensor base(DType::kI64, {n, 1, 1, 1});
  for (int64_t i = 0; i < n; ++i) base.data_as<int64_t>()[i] = i * h * w;
  const ValueId base_id = ctx.Constant(std::move(base));
  // gx, gy: [N, Ho, Wo, 1]; the trailing 1 broadcasts against the channels of each tap.
  ASSIGN_OR_RETURN(ValueId gx, op("slice", {grid}, {{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{3}}}));
  ASSIGN_OR_RETURN(ValueId gy, op("slice", {grid}, {{"starts", Ints{1}}, {"ends", Ints{2}}, {"axes", Ints{3}}}));
  ASSIGN_OR_RETURN(ValueId cx, Unnormalize(op, gx, w, spec.align_corners));
  ASSIGN_OR_RETURN(ValueId cy, Unnormalize(op, gy, h, spec.align_corners));
  ValueId y;
  if (spec.mode == GridSpec::Mode::kBicubic) {
    // The coordinate stays unpadded; each of the 4x4 taps is padded on its own.
    ASSIGN_OR_RETURN(ValueId fx, op("floor", {cx}));
    ASSIGN_OR_RETURN(ValueId fy, op("floor", {cy}));
    ASSIGN_OR_RETURN(ValueId tx, op("sub", {cx, fx}));
    ASSIGN_OR_RETURN(ValueId ty, op("sub", {cy, fy}));
    ASSIGN_OR_RETURN(std::vector<ValueId> wx, CubicWeights(op, tx));
    ASSIGN_OR_RETURN(std::vector<ValueId> wy, CubicWeights(op, ty));
    std::vector<ValueId> xs_tap(4), ys_tap(4);
    for (int k = 0; k < 4; ++k) {
      ASSIGN_OR_RETURN(ValueId px, op("add", {fx, op.F(static_cast<float>(k - 1))}));
      ASSIGN_OR_RETURN(ValueId py, op("add", {fy, op.F(static_cast<float>(k - 1))}));
      ASSIGN_OR_RETURN(xs_tap[k], PadCoordinate(op, px, w, spec));
      ASSIGN_OR_RETURN(ys_tap[k], PadCoordinate(op, py, h, spec));
    }
    std::vector<ValueId> row_values(4);
    for (int i = 0; i < 4; ++i) {
      std::vector<ValueId> taps(4);
      for (int j = 0; j < 4; ++j) {
        ASSIGN_OR_RETURN(taps[j], Taps(op, rows, base_id, ys_tap[i], xs_tap[j], h, w, spec.padding == Padding::kZeros));
      }
      ASSIGN_OR_RETURN(row_values[i], WeightedChain(op, taps, wx));
    }
    ASSIGN_OR_RETURN(y, WeightedChain(op, row_values, wy));
  } else {
    ASSIGN_OR_RETURN(cx, PadCoordinate(op, cx, w, spec));
    ASSIGN_OR_RETURN(cy, PadCoordinate(op, cy, h, spec));
    if (spec.mode == GridSpec::Mode::kNearest) {
      ASSIGN_OR_RETURN(ValueId rx, op("round", {cx}));
      ASSIGN_OR_RETURN(ValueId ry, op("round", {cy}));
      ASSIGN_OR_RETURN(y, Taps(op, rows, base_id, ry, rx, h, w, true));
    } else {
      ASSIGN_OR_RETURN(ValueId x0, op("floor", {cx}));
      ASSIGN_OR_RETURN(ValueId y0, op("floor", {cy}));
      ASSIGN_OR_RETURN(ValueId x1, op("add", {x0, op.F(1.0f)}));
      ASSIGN_OR_RETURN(ValueId y1, op("add", {y0, op.F(1.0f)}));
      ASSIGN_OR_RETURN(ValueId wx1, op("sub", {cx, x0}));
      ASSIGN_OR_RETURN(ValueId wx0, op("sub", {x1, cx}));
      ASSIGN_OR_RETURN(ValueId wy1, op("sub", {cy, y0}));
      ASSIGN_OR_RETURN(ValueId wy0, op("sub", {y1, cy}));
      std::vector<ValueId> taps(4), weights(4);
      const ValueId ty[4] = {y0, y0, y1, y1}, tx[4] = {x0, x1, x0, x1};
      const ValueId fy[4] = {wy0, wy0, wy1, wy1}, fx[4] = {wx0, wx1, wx0, wx1};
      for (int k = 0; k < 4; ++k) {
        ASSIGN_OR_RETURN(taps[k], Taps(op, rows, base_id, ty[k], tx[k], h, w, true));
        ASSIGN_OR_RETURN(weights[k], op("mul", {fx[k], fy[k]}));
      }
      ASSIGN_OR_RETURN(y, WeightedChain(op, taps, weights));
    }
  }
  // [N, Ho, Wo, C] -> [N, C, Ho, Wo]
  return SetResult(ctx, op("transpose", {y}, {{"perm", Ints{0, 3, 1, 2}}}));
}

// One axis of RoiAlign's sampling grid for every roi: the sample coordinates (f32, [R, S] with
// S = pooled * grid, bin-major) clamped as ONNX Runtime does, their low and high taps, the
// weights of the high tap (l) and the low one (1 - l), and whether each sample is outside.
struct RoiAxis {
  ValueId low, high, l, hl, outside;
};

StatusOr<RoiAxis> RoiSamples(Ops& op, ValueId start_coord, ValueId end_coord, int64_t pooled, int64_t grid,
                             int64_t size, bool half_pixel, float spatial_scale) {
  NodeContext& ctx = op.ctx();
  const float offset = half_pixel ? 0.5f : 0.0f;
  ASSIGN_OR_RETURN(ValueId start, op("mul", {start_coord, op.F(spatial_scale)}));
  ASSIGN_OR_RETURN(start, op("sub", {start, op.F(offset)}));
  ASSIGN_OR_RETURN(ValueId end, op("mul", {end_coord, op.F(spatial_scale)}));
  ASSIGN_OR_RETURN(end, op("sub", {end, op.F(offset)}));
  ASSIGN_OR_RETURN(ValueId extent, op("sub", {end, start}));
  if (!half_pixel) {
    ASSIGN_OR_RETURN(extent, op("max", {extent, op.F(1.0f)}));
  }
  ASSIGN_OR_RETURN(ValueId bin, op("div", {extent, op.F(static_cast<float>(pooled))}));
  // Per sample column: its bin p and its position (i + 0.5) inside the bin.
  std::vector<float> bins, positions;
  for (int64_t p = 0; p < pooled; ++p) {
    for (int64_t i = 0; i < grid; ++i) {
      bins.push_back(static_cast<float>(p));
      positions.push_back(static_cast<float>(i) + 0.5f);
    }
  }
  const int64_t samples = pooled * grid;
  const ValueId bin_ids = ctx.Constant(Tensor::FromVector<float>(DType::kF32, {1, samples}, bins));
  const ValueId position_ids = ctx.Constant(Tensor::FromVector<float>(DType::kF32, {1, samples}, positions));
  // c = (start + p * bin) + ((i + 0.5) * bin) / grid
  ASSIGN_OR_RETURN(ValueId c, op("mul", {bin_ids, bin}));
  ASSIGN_OR_RETURN(c, op("add", {start, c}));
  ASSIGN_OR_RETURN(ValueId within, op("mul", {position_ids, bin}));
  ASSIGN_OR_RETURN(within, op("div", {within, op.F(static_cast<float>(grid))}));
  ASSIGN_OR_RETURN(c, op("add", {c, within}));
  const float limit = static_cast<float>(size);
  RoiAxis axis;
  ASSIGN_OR_RETURN(ValueId below, op("less", {c, op.F(-1.0f)}));
  ASSIGN_OR_RETURN(ValueId above, op("greater", {c, op.F(limit)}));
  ASSIGN_OR_RETURN(axis.outside, op("or", {below, above}));
  ASSIGN_OR_RETURN(ValueId non_positive, op("less_equal", {c, op.F(0.0f)}));
  ASSIGN_OR_RETURN(c, op("where", {non_positive, op.F(0.0f), c}));
  ASSIGN_OR_RETURN(ValueId low, op("floor", {c}));
  const float last = static_cast<float>(size - 1);
  ASSIGN_OR_RETURN(ValueId at_end, op("greater_equal", {low, op.F(last)}));
  ASSIGN_OR_RETURN(axis.low, op("where", {at_end, op.F(last), low}));
  ASSIGN_OR_RETURN(ValueId high, op("add", {low, op.F(1.0f)}));
  ASSIGN_OR_RETURN(axis.high, op("where", {at_end, op.F(last), high}));
  ASSIGN_OR_RETURN(c, op("where", {at_end, axis.low, c}));
  ASSIGN_OR_RETURN(axis.l, op("sub", {c, axis.low}));
  ASSIGN_OR_RETURN(axis.hl, op("sub", {op.F(1.0f), axis.l}));
  return axis;
}

// RoiAlign of every roi with one sampling grid of grid_h x grid_w samples per bin:
// [R, C, PH, PW].
StatusOr<ValueId> RoiAlignGrid(NodeContext& ctx, ValueId x, ValueId rois, ValueId batch_indices, int64_t ph, int64_t pw,
                               int64_t grid_h, int64_t grid_w, bool half_pixel, float spatial_scale,
                               const std::string& mode) {
  const Shape xs = ctx.type(x).shape;
  const int64_t n = xs[0], h = xs[2], w = xs[3], r = ctx.type(rois).shape[0];
  const int64_t sh = ph * grid_h, sw = pw * grid_w;
  const double terms =
      static_cast<double>(r) * static_cast<double>(sh) * static_cast<double>(sw) * static_cast<double>(xs[1]);
  if (terms > static_cast<double>(ctx.limits().max_elements_per_tensor)) {
    return ctx.Invalid("rois x samples x channels exceed the element cap");
  }
  Ops op(ctx);
  auto column = [&](int64_t c) {
    return op("slice", {rois}, {{"starts", Ints{c}}, {"ends", Ints{c + 1}}, {"axes", Ints{1}}});
  };
  ASSIGN_OR_RETURN(ValueId x1, column(0));
  ASSIGN_OR_RETURN(ValueId y1, column(1));
  ASSIGN_OR_RETURN(ValueId x2, column(2));
  ASSIGN_OR_RETURN(ValueId y2, column(3));
  ASSIGN_OR_RETURN(RoiAxis ya, RoiSamples(op, y1, y2, ph, grid_h, h, half_pixel, spatial_scale));
  ASSIGN_OR_RETURN(RoiAxis xa, RoiSamples(op, x1, x2, pw, grid_w, w, half_pixel, spatial_scale));
  // The image of each roi: a batch index outside [0, N) points past the end of the pixel rows,
  // so the gather fails the task (DETERMINISM.md 4.6) instead of reading another image.
  ASSIGN_OR_RETURN(ValueId bi, op("cast", {batch_indices}, {{"to", DType::kI64}}));
  ASSIGN_OR_RETURN(ValueId negative, op("less", {bi, op.I(0)}));
  ASSIGN_OR_RETURN(ValueId too_big, op("greater_equal", {bi, op.I(n)}));
  ASSIGN_OR_RETURN(ValueId bad, op("or", {negative, too_big}));
  ASSIGN_OR_RETURN(ValueId base, op("mul", {bi, op.I(h * w)}));
  ASSIGN_OR_RETURN(base, op("where", {bad, op.I(n * h * w), base}));
  ASSIGN_OR_RETURN(base, ReshapeTo(ctx, base, {r, 1, 1, 1}));
  ASSIGN_OR_RETURN(ValueId rows, PixelRows(op, x, xs));
  // Broadcast shapes: y quantities [R, SH, 1, 1], x quantities [R, 1, SW, 1].
  auto as_y = [&](ValueId v) { return ReshapeTo(ctx, v, {r, sh, 1, 1}); };
  auto as_x = [&](ValueId v) { return ReshapeTo(ctx, v, {r, 1, sw, 1}); };
  ASSIGN_OR_RETURN(ValueId y_low, as_y(ya.low));
  ASSIGN_OR_RETURN(ValueId y_high, as_y(ya.high));
  ASSIGN_OR_RETURN(ValueId ly, as_y(ya.l));
  ASSIGN_OR_RETURN(ValueId hy, as_y(ya.hl));
  ASSIGN_OR_RETURN(ValueId out_y, as_y(ya.outside));
  ASSIGN_OR_RETURN(ValueId x_low, as_x(xa.low));
  ASSIGN_OR_RETURN(ValueId x_high, as_x(xa.high));
  ASSIGN_OR_RETURN(ValueId lx, as_x(xa.l));
  ASSIGN_OR_RETURN(ValueId hx, as_x(xa.hl));
  ASSIGN_OR_RETURN(ValueId out_x, as_x(xa.outside));
  const ValueId ty[4] = {y_low, y_low, y_high, y_high}, tx[4] = {x_low, x_high, x_low, x_high};
  const ValueId fy[4] = {hy, hy, ly, ly}, fx[4] = {hx, lx, hx, lx};
  std::vector<ValueId> products(4);
  for (int k = 0; k < 4; ++k) {
    ASSIGN_OR_RETURN(ValueId v, Taps(op, rows, base, ty[k], tx[k], h, w, false));
    ASSIGN_OR_RETURN(ValueId weight, op("mul", {fy[k], fx[k]}));
    ASSIGN_OR_RETURN(products[k], op("mul", {weight, v}));
  }
  // Each sample: ((w1*v1 + w2*v2) + w3*v3) + w4*v4 (avg), or the max of the four products.
  const std::string combine = mode == "avg" ? "add" : "max";
  ValueId sample = products[0];
  for (int k = 1; k < 4; ++k) {
    ASSIGN_OR_RETURN(sample, op(combine, {sample, products[k]}));
  }
  ASSIGN_OR_RETURN(ValueId outside, op("or", {out_y, out_x}));
  ASSIGN_OR_RETURN(sample, op("where", {outside, op.F(0.0f), sample}));
  // [R, PH, grid, PW, grid, C]: reduce each bin's samples in row-major (iy, ix) order.
  ASSIGN_OR_RETURN(sample, ReshapeTo(ctx, sample, {r, ph, grid_h, pw, grid_w, xs[1]}));
  Attributes reduce = {{"axes", Ints{2, 4}}, {"keepdims", int64_t{0}}};
  ValueId y;
  if (mode == "avg") {
    ASSIGN_OR_RETURN(y, op("reduce_sum", {sample}, reduce));
    ASSIGN_OR_RETURN(y, op("div", {y, op.F(static_cast<float>(grid_h * grid_w))}));
  } else {
    ASSIGN_OR_RETURN(y, op("reduce_max", {sample}, reduce));
  }
  // [R, PH, PW, C] -> [R, C, PH, PW]
  return op("transpose", {y}, {{"perm", Ints{0, 3, 1, 2}}});
}

// The adaptive grid of one roi axis (sampling_ratio 0, DETERMINISM.md 6.7b), as ONNX Runtime:
// ceil(extent / pooled) in f32, extent as in RoiSamples.
StatusOr<int64_t> AdaptiveGrid(const NodeContext& ctx, float a, float b, int64_t pooled, bool half_pixel,
                               float spatial_scale, int64_t roi) {
  const float offset = half_pixel ? 0.5f : 0.0f;
  const float start = (a * spatial_scale) - offset, end = (b * spatial_scale) - offset;
  float extent = end - start;
  if (!half_pixel) extent = extent < 1.0f ? 1.0f : extent;  // max(extent, 1) of section 1.1
  const float g = std::ceil(extent / static_cast<float>(pooled));
  if (std::isnan(g) || g > static_cast<float>(kMaxAdaptiveGrid)) {
    return ctx.Invalid("roi " + std::to_string(roi) + " needs an adaptive sampling grid above " +
                       std::to_string(kMaxAdaptiveGrid) + " per bin (or NaN)");
  }
  return g < 1.0f ? int64_t{0} : static_cast<int64_t>(g);
}

// sampling_ratio 0: the grid depends on each roi's size, so the rois must be known at import.
// Rois with the same (grid_h, grid_w) are aligned together (RoiAlignGrid), then the rows are
// put back in roi order; a grid of 0 samples gives +0 bins (ONNX Runtime's empty loop).
StatusOr<ValueId> RoiAlignAdaptive(NodeContext& ctx, ValueId x, ValueId rois, ValueId batch_indices, int64_t ph,
                                   int64_t pw, bool half_pixel, float spatial_scale, const std::string& mode) {
  const Tensor* known = ctx.input_constant(1);
  if (known == nullptr) {
    return ctx.Unsupported("sampling_ratio 0 with rois " + std::string(kComputedAtRunTime) +
                           " (input 1 must be known at import: the sampling grid depends on each roi's size; or "
                           "give a fixed sampling_ratio)");
  }
  const Shape xs = ctx.type(x).shape;
  const int64_t r = known->shape()[0];
  const float* v = known->data_as<float>();
  std::map<std::pair<int64_t, int64_t>, Ints> groups;
  for (int64_t i = 0; i < r; ++i) {
    ASSIGN_OR_RETURN(int64_t gh, AdaptiveGrid(ctx, v[i * 4 + 1], v[i * 4 + 3], ph, half_pixel, spatial_scale, i));
    ASSIGN_OR_RETURN(int64_t gw, AdaptiveGrid(ctx, v[i * 4 + 0], v[i * 4 + 2], pw, half_pixel, spatial_scale, i));
    if (gh == 0 || gw == 0) gh = gw = 0;
    groups[{gh, gw}].push_back(i);
  }
  if (groups.empty()) {  // no rois: any grid gives the empty result
    return RoiAlignGrid(ctx, x, rois, batch_indices, ph, pw, 1, 1, half_pixel, spatial_scale, mode);
  }
  if (groups.size() == 1 && groups.begin()->first.first > 0) {
    const auto [gh, gw] = groups.begin()->first;
    return RoiAlignGrid(ctx, x, rois, batch_indices, ph, pw, gh, gw, half_pixel, spatial_scale, mode);
  }
  std::vector<ValueId> parts;
  Ints order;  // roi index of each concatenated row
  for (const auto& [grid, members] : groups) {
    const Shape part_shape = {static_cast<int64_t>(members.size()), xs[1], ph, pw};
    ValueId part;
    if (grid.first == 0) {
      ASSIGN_OR_RETURN(part, ctx.Emit("expand", {ctx.ScalarF32(0.0f)}, {{"shape", part_shape}}));
    } else {
      const ValueId at = ctx.Constant(Int64Vector(members));
      ASSIGN_OR_RETURN(ValueId some_rois, ctx.Emit("gather", {rois, at}, {{"axis", int64_t{0}}}));
      ASSIGN_OR_RETURN(ValueId some_batches, ctx.Emit("gather", {batch_indices, at}, {{"axis", int64_t{0}}}));
      ASSIGN_OR_RETURN(part, RoiAlignGrid(ctx, x, some_rois, some_batches, ph, pw, grid.first, grid.second, half_pixel,
                                          spatial_scale, mode));
    }
    parts.push_back(part);
    order.insert(order.end(), members.begin(), members.end());
  }
  ValueId all = parts[0];
  if (parts.size() > 1) {
    ASSIGN_OR_RETURN(all, ctx.Emit("concat", parts, {{"axis", int64_t{0}}}));
  }
  Ints back(static_cast<size_t>(r));
  for (size_t k = 0; k < order.size(); ++k) back[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  return ctx.Emit("gather", {all, ctx.Constant(Int64Vector(back))}, {{"axis", int64_t{0}}});
}

// RoiAlign (opsets 10, 16): X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R]
// -> [R, C, output_height, output_width]. sampling_ratio 0 (a grid per roi) needs the rois at
// import.
Status RoiAlign(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes(
      {"coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId rois, ctx.RequiredInput(1));
  ASSIGN_OR_RETURN(ValueId batch_indices, ctx.RequiredInput(2));
  RETURN_IF_ERROR(RequireF32(ctx, x, "X"));
  RETURN_IF_ERROR(RequireF32(ctx, rois, "rois"));
  const DType index_type = ctx.type(batch_indices).dtype;
  if (index_type != DType::kI64 && index_type != DType::kI32) return ctx.Invalid("batch_indices must be int64");
  const Shape xs = ctx.type(x).shape, rs = ctx.type(rois).shape, bs = ctx.type(batch_indices).shape;
  if (xs.size() != 4) return ctx.Invalid("X " + ShapeToString(xs) + " must be [N, C, H, W]");
  if (rs.size() != 2 || rs[1] != 4 || bs.size() != 1 || bs[0] != rs[0]) {
    return ctx.Invalid("rois " + ShapeToString(rs) + " must be [R, 4] and batch_indices " + ShapeToString(bs) + " [R]");
  }
  const int64_t h = xs[2], w = xs[3];
  if (h < 1 || w < 1 || h > kMaxSpatialDim || w > kMaxSpatialDim) {
    return ctx.Invalid("X's spatial dims must be between 1 and 2^24, got " + ShapeToString(xs));
  }
  // Opset 10 has no coordinate_transformation_mode and behaves as output_half_pixel.
  ASSIGN_OR_RETURN(std::string coords, ctx.AttrString("coordinate_transformation_mode",
                                                      ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  if (coords != "half_pixel" && coords != "output_half_pixel") {
    return ctx.Invalid("coordinate_transformation_mode '" + coords + "' is not half_pixel or output_half_pixel");
  }
  ASSIGN_OR_RETURN(std::string mode, ctx.AttrString("mode", "avg"));
  if (mode != "avg" && mode != "max") return ctx.Invalid("mode '" + mode + "' is not avg or max");
  ASSIGN_OR_RETURN(int64_t ph, ctx.AttrInt("output_height", 1));
  ASSIGN_OR_RETURN(int64_t pw, ctx.AttrInt("output_width", 1));
  ASSIGN_OR_RETURN(int64_t ratio, ctx.AttrInt("sampling_ratio", 0));
  ASSIGN_OR_RETURN(float spatial_scale, ctx.AttrFloat("spatial_scale", 1.0f));
  constexpr int64_t kMaxGrid = 1 << 16;
  if (ph < 1 || pw < 1 || ph > kMaxGrid || pw > kMaxGrid) {
    return ctx.Invalid("output_height and output_width must be between 1 and 65536");
  }
  if (ratio < 0 || ratio > 64) return ctx.Invalid("sampling_ratio must be between 0 and 64");
  RETURN_IF_ERROR(CheckPixelCount(ctx, xs));
  const bool half_pixel = coords == "half_pixel";
  if (ratio > 0) {
    return SetResult(ctx,
                     RoiAlignGrid(ctx, x, rois, batch_indices, ph, pw, ratio, ratio, half_pixel, spatial_scale, mode));
  }
  return SetResult(ctx, RoiAlignAdaptive(ctx, x, rois, batch_indices, ph, pw, half_pixel, spatial_scale, mode));
}

}  // namespace

const std::vector<OpConverter>& SampleConverters() {
  static const std::vector<OpConverter> table = {
      {"GridSample", GridSample},
      {"RoiAlign", RoiAlign},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
