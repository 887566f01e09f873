// ONNX Resize (opsets 10, 11, 13) and Upsample (opsets 7, 9). Shapes are static, so the
// scales or sizes, and the roi of tf_crop_and_resize, must be known at import. Every resized
// axis then is a fixed linear map: each output index reads K source indices (1 for nearest,
// 2 for linear, 4 for cubic) with fixed weights. The importer computes those indices and
// weights on the host, in f64 with the operation sequence of docs/DETERMINISM.md 6.2, rounds
// the weights to f32 once, and emits per axis K constant-index `gather`s, K `mul`s by the
// weights and K - 1 `add`s in ascending tap order. Nearest is one `gather` (a bit copy).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

enum class Mode { kNearest, kLinear, kCubic };

enum class Coordinates { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn, kTfCrop };

enum class NearestRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kFloorUpCeilDown };

struct ResizeSpec {
  Mode mode = Mode::kNearest;
  Coordinates coordinates = Coordinates::kHalfPixel;
  NearestRounding rounding = NearestRounding::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation_value = 0.0f;
};

// The source taps of one output index along one axis.
struct AxisTaps {
  Ints index;                  // K indices, clamped into [0, n)
  std::vector<double> weight;  // K weights (f64, before the one rounding to f32)
  bool extrapolated = false;   // tf_crop_and_resize: the coordinate lies outside [0, n - 1]
};

// Far beyond any dim the element cap allows, and small enough that every integer up to it
// is exact in f64 and the conversion to int64 is defined.
constexpr double kCoordinateBound = 1099511627776.0;  // 2^40

// The source coordinate of output index i (DETERMINISM.md 6.2). s: the scale, n and m: the
// input and output lengths, length = s * n in f64 (ONNX's reference compares it with 1).
double SourceCoordinate(const ResizeSpec& spec, int64_t i, double s, int64_t n, double roi_start, double roi_end) {
  const double x = static_cast<double>(i);
  const double length = s * static_cast<double>(n);
  const double n_minus_1 = static_cast<double>(n - 1);
  switch (spec.coordinates) {
    case Coordinates::kHalfPixel: return (x + 0.5) / s - 0.5;
    case Coordinates::kPytorchHalfPixel: return length == 1.0 ? -0.5 : (x + 0.5) / s - 0.5;
    case Coordinates::kAlignCorners: return length == 1.0 ? 0.0 : (x * n_minus_1) / (length - 1.0);
    case Coordinates::kAsymmetric: return x / s;
    case Coordinates::kTfHalfPixelForNn: return (x + 0.5) / s;
    case Coordinates::kTfCrop: {
      const double extent = roi_end - roi_start;
      const double c = length == 1.0 ? (extent * n_minus_1) / 2.0 : ((x * extent) * n_minus_1) / (length - 1.0);
      return c + roi_start * n_minus_1;
    }
  }
  return 0.0;
}

int64_t Clamp(int64_t j, int64_t n) { return j < 0 ? 0 : (j >= n ? n - 1 : j); }

// Weights of the cubic convolution kernel for the fraction r in (0, 1], ONNX's formulas
// evaluated left to right in f64.
std::vector<double> CubicWeights(double r, double a) {
  const double t0 = r + 1.0;
  const double t3 = (1.0 - r) + 1.0;
  const double u = 1.0 - r;
  return {
      (((a * t0) - (5.0 * a)) * t0 + (8.0 * a)) * t0 - (4.0 * a),
      ((((a + 2.0) * r) - (a + 3.0)) * r) * r + 1.0,
      ((((a + 2.0) * u) - (a + 3.0)) * u) * u + 1.0,
      (((a * t3) - (5.0 * a)) * t3 + (8.0 * a)) * t3 - (4.0 * a),
  };
}

StatusOr<AxisTaps> TapsFor(const NodeContext& ctx, const ResizeSpec& spec, int64_t i, double s, int64_t n,
                           double roi_start, double roi_end) {
  const double c = SourceCoordinate(spec, i, s, n, roi_start, roi_end);
  if (!(c >= -kCoordinateBound && c <= kCoordinateBound)) {
    return ctx.Invalid("the scales or roi put output index " + std::to_string(i) +
                       " at a source coordinate out of range");
  }
  AxisTaps taps;
  if (spec.coordinates == Coordinates::kTfCrop) {
    taps.extrapolated = c < 0.0 || c > static_cast<double>(n - 1);
  }
  const double fl = std::floor(c);
  if (spec.mode == Mode::kNearest) {
    const double frac = c - fl;  // exact: c and fl are within 2^40
    int64_t j = static_cast<int64_t>(fl);
    if (frac != 0.0) {
      switch (spec.rounding) {
        case NearestRounding::kRoundPreferFloor: j += frac > 0.5 ? 1 : 0; break;
        case NearestRounding::kRoundPreferCeil: j += frac >= 0.5 ? 1 : 0; break;
        case NearestRounding::kFloor: break;
        case NearestRounding::kCeil: j += 1; break;
        case NearestRounding::kFloorUpCeilDown: j += s < 1.0 ? 1 : 0; break;
      }
    }
    taps.index = {Clamp(j, n)};
    taps.weight = {1.0};
    return taps;
  }
  // The tap left of c (c itself counts as right of it), so the fraction r is in (0, 1].
  const int64_t left = static_cast<int64_t>(std::ceil(c)) - 1;
  const double r = c - static_cast<double>(left);
  int64_t first = left;
  if (spec.mode == Mode::kLinear) {
    taps.weight = {1.0 - r, r};
  } else {
    taps.weight = CubicWeights(r, spec.cubic_a);
    first = left - 1;
  }
  double total = 0.0;
  for (size_t k = 0; k < taps.weight.size(); ++k) {
    const int64_t j = first + static_cast<int64_t>(k);
    if (spec.exclude_outside && (j < 0 || j >= n)) taps.weight[k] = 0.0;
    total = total + taps.weight[k];
    taps.index.push_back(Clamp(j, n));
  }
  if (spec.exclude_outside && total != 0.0) {  // 0 only far outside, where tf_crop_and_resize extrapolates
    for (double& w : taps.weight) w = w / total;
  }
  // Defensive: the cubic weights stay below 0.2 * |a| + 1 and a nonzero f64 total of them is
  // not tiny, so a finite f32 cubic_coeff_a cannot get here; the cast to f32 below must not overflow.
  for (double w : taps.weight) {
    if (!(std::fabs(w) <= static_cast<double>(std::numeric_limits<float>::max()))) {
      return ctx.Invalid("cubic_coeff_a and exclude_outside give a weight beyond the float range");
    }
  }
  return taps;
}

// Resizes axis `axis` of v from n to m elements. Returns v unchanged when the axis maps
// every output index to itself (then every weight but one is 0 and that one is 1).
StatusOr<ValueId> ResizeAxis(NodeContext& ctx, const ResizeSpec& spec, ValueId v, int64_t axis, double s, int64_t m,
                             double roi_start, double roi_end, std::vector<ValueId>& extrapolation_masks) {
  const Shape shape = ctx.type(v).shape;  // a copy: Emit may move the value table
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t n = shape[static_cast<size_t>(axis)];
  if (n == 0 && m > 0)
    return ctx.Invalid("cannot resize the empty axis " + std::to_string(axis) + " to " + std::to_string(m));
  // Flat tables, tap-major (k * m + i): a few bytes per output index and tap, since m may be
  // as large as the element cap.
  const size_t taps = spec.mode == Mode::kNearest ? 1 : (spec.mode == Mode::kLinear ? 2 : 4);
  const auto count = static_cast<size_t>(m);
  std::vector<int64_t> index(taps * count);
  std::vector<float> weight(taps * count);
  std::vector<uint8_t> extrapolated(count);
  bool identity = m == n && spec.coordinates != Coordinates::kTfCrop;
  bool any_extrapolated = false;
  for (size_t i = 0; i < count; ++i) {
    const auto out_index = static_cast<int64_t>(i);
    ASSIGN_OR_RETURN(AxisTaps t, TapsFor(ctx, spec, out_index, s, n, roi_start, roi_end));
    if (SourceCoordinate(spec, out_index, s, n, roi_start, roi_end) != static_cast<double>(out_index)) identity = false;
    any_extrapolated = any_extrapolated || t.extrapolated;
    extrapolated[i] = t.extrapolated ? 1 : 0;
    for (size_t k = 0; k < taps; ++k) {
      index[k * count + i] = t.index[k];
      weight[k * count + i] = static_cast<float>(t.weight[k]);  // round to nearest even, once
    }
  }
  if (identity) return v;

  // Tables broadcast along the axis: shape [m, 1, ..., 1] over the dims from `axis` on.
  Shape table_shape(static_cast<size_t>(rank - axis), 1);
  table_shape[0] = m;
  if (any_extrapolated) {
    Tensor mask(DType::kBool, table_shape);
    std::memcpy(mask.data(), extrapolated.data(), count);
    extrapolation_masks.push_back(ctx.Constant(std::move(mask)));
  }
  ValueId sum = -1;
  for (size_t k = 0; k < taps; ++k) {
    Ints tap_index(index.begin() + static_cast<std::ptrdiff_t>(k * count),
                   index.begin() + static_cast<std::ptrdiff_t>((k + 1) * count));
    ASSIGN_OR_RETURN(ValueId tap, ctx.Emit("gather", {v, ctx.Constant(Int64Vector(tap_index))}, {{"axis", axis}}));
    if (spec.mode == Mode::kNearest) return tap;
    Tensor w(DType::kF32, table_shape);
    if (count > 0) std::memcpy(w.data(), weight.data() + k * count, count * sizeof(float));
    ASSIGN_OR_RETURN(ValueId term, ctx.Emit("mul", {tap, ctx.Constant(std::move(w))}));
    if (k == 0) {
      sum = term;
    } else {
      ASSIGN_OR_RETURN(sum, ctx.Emit("add", {sum, term}));
    }
  }
  return sum;
}

// The scale as given (f32, exact in f64), or m / n for sizes; checked before any table is built.
struct AxisPlan {
  double scale = 1.0;
  int64_t out = 0;
};

StatusOr<std::vector<float>> ConstantF32s(const NodeContext& ctx, int i, std::string_view what) {
  const Tensor* t = ctx.input_constant(i);
  if (!t) {
    return ctx.Unsupported(std::string(what) + " " + std::string(kComputedAtRunTime) + " (input " + std::to_string(i) +
                           " must be known at import time)");
  }
  if (t->dtype() != DType::kF32) return ctx.Invalid(std::string(what) + " must be float");
  return std::vector<float>(t->data_as<float>(), t->data_as<float>() + t->num_elements());
}

bool PresentAndNonEmpty(const NodeContext& ctx, int i) {
  return ctx.has_input(i) && ctx.input_type(i).shape != Shape{0};
}

Status ResizeImpl(NodeContext& ctx, const ResizeSpec& spec, int scales_input, int sizes_input, int roi_input,
                  const std::vector<float>* attr_scales) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const Shape in = ctx.type(x).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const DType dtype = ctx.type(x).dtype;
  if (spec.mode != Mode::kNearest) RETURN_IF_ERROR(RequireF32(ctx, x, "linear or cubic interpolation"));

  const bool has_scales = attr_scales != nullptr || (scales_input >= 0 && PresentAndNonEmpty(ctx, scales_input));
  const bool has_sizes = sizes_input >= 0 && PresentAndNonEmpty(ctx, sizes_input);
  if (has_scales == has_sizes) return ctx.Invalid("exactly one of scales and sizes must be given");

  std::vector<double> roi(static_cast<size_t>(2 * rank), 0.0);
  for (int64_t d = 0; d < rank; ++d) roi[static_cast<size_t>(rank + d)] = 1.0;
  if (spec.coordinates == Coordinates::kTfCrop) {
    if (roi_input < 0 || !PresentAndNonEmpty(ctx, roi_input)) {
      return ctx.Invalid("tf_crop_and_resize needs the roi input");
    }
    ASSIGN_OR_RETURN(std::vector<float> r, ConstantF32s(ctx, roi_input, "roi"));
    if (static_cast<int64_t>(r.size()) != 2 * rank) {
      return ctx.Invalid("roi must have 2 values per dim of the input " + ShapeToString(in));
    }
    for (size_t k = 0; k < r.size(); ++k) {
      if (!std::isfinite(r[k])) return ctx.Invalid("roi values must be finite");
      roi[k] = static_cast<double>(r[k]);
    }
  }

  std::vector<AxisPlan> plan(static_cast<size_t>(rank));
  const double cap = static_cast<double>(ctx.limits().max_elements_per_tensor);
  if (has_scales) {
    std::vector<float> scales;
    if (attr_scales) {
      scales = *attr_scales;
    } else {
      ASSIGN_OR_RETURN(scales, ConstantF32s(ctx, scales_input, "scales"));
    }
    if (static_cast<int64_t>(scales.size()) != rank) {
      return ctx.Invalid("scales must have one value per dim of the input " + ShapeToString(in));
    }
    for (int64_t d = 0; d < rank; ++d) {
      const double s = static_cast<double>(scales[static_cast<size_t>(d)]);
      if (!(s > 0.0) || !std::isfinite(s)) return ctx.Invalid("scales must be finite and positive");
      double extent = static_cast<double>(in[static_cast<size_t>(d)]);
      if (spec.coordinates == Coordinates::kTfCrop) {
        extent = extent * (roi[static_cast<size_t>(rank + d)] - roi[static_cast<size_t>(d)]);
      }
      const double out = std::floor(extent * s);
      if (!(out >= 0.0)) return ctx.Invalid("the roi gives a negative output size");
      if (out > cap) return ctx.Invalid("the scales give an output dim above the element cap");
      plan[static_cast<size_t>(d)] = {s, static_cast<int64_t>(out)};
    }
  } else {
    ASSIGN_OR_RETURN(Ints sizes, ctx.ConstantInts(sizes_input, "sizes"));
    if (static_cast<int64_t>(sizes.size()) != rank) {
      return ctx.Invalid("sizes must have one value per dim of the input " + ShapeToString(in));
    }
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t m = sizes[static_cast<size_t>(d)];
      const int64_t n = in[static_cast<size_t>(d)];
      if (m < 0) return ctx.Invalid("sizes must not be negative");
      if (static_cast<double>(m) > cap) return ctx.Invalid("sizes give an output dim above the element cap");
      const double s = n == 0 ? 1.0 : static_cast<double>(m) / static_cast<double>(n);
      plan[static_cast<size_t>(d)] = {s, m};
    }
  }
  double total = 1.0;
  for (const AxisPlan& p : plan) total = total * static_cast<double>(p.out);
  if (total > cap) return ctx.Invalid("the output has more elements than the element cap");

  // The innermost axis first, as ONNX's reference interpolates.
  ValueId v = x;
  std::vector<ValueId> masks;
  for (int64_t d = rank - 1; d >= 0; --d) {
    const AxisPlan& p = plan[static_cast<size_t>(d)];
    ASSIGN_OR_RETURN(v, ResizeAxis(ctx, spec, v, d, p.scale, p.out, roi[static_cast<size_t>(d)],
                                   roi[static_cast<size_t>(rank + d)], masks));
  }
  for (ValueId mask : masks) {
    ASSIGN_OR_RETURN(v, ctx.Emit("where", {mask, ctx.Scalar(dtype, spec.extrapolation_value), v}));
  }
  if (v == x) {
    ASSIGN_OR_RETURN(v, ctx.Emit("identity", {x}));
  }
  return SetResult(ctx, v);
}

StatusOr<Mode> ParseMode(const NodeContext& ctx, bool cubic_allowed) {
  ASSIGN_OR_RETURN(std::string mode, ctx.AttrString("mode", "nearest"));
  if (mode == "nearest") return Mode::kNearest;
  if (mode == "linear" || mode == "bilinear") return Mode::kLinear;
  if (mode == "cubic" && cubic_allowed) return Mode::kCubic;
  return ctx.Invalid("unknown mode '" + mode + "'");
}

// Upsample (opsets 7 and 9) and Resize-10: asymmetric coordinates; nearest takes the floor
// when upsampling and the ceiling when downsampling, as ONNX Runtime and ONNX's opset-10
// test cases do.
Status Upsample(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"mode", "scales"}));
  ResizeSpec spec;
  ASSIGN_OR_RETURN(spec.mode, ParseMode(ctx, false));
  spec.coordinates = Coordinates::kAsymmetric;
  spec.rounding = NearestRounding::kFloorUpCeilDown;
  if (ctx.opset() < 9) {
    if (!ctx.has_attr("scales")) return ctx.Invalid("the scales attribute is required");
    ASSIGN_OR_RETURN(std::vector<float> scales, ctx.AttrFloats("scales", {}));
    for (float s : scales) {
      if (!(s >= 1.0f)) return ctx.Invalid("Upsample scales must be at least 1");
    }
    return ResizeImpl(ctx, spec, -1, -1, -1, &scales);
  }
  if (ctx.has_attr("scales")) return ctx.Invalid("scales is an input from opset 9");
  ASSIGN_OR_RETURN(std::vector<float> scales, ConstantF32s(ctx, 1, "scales"));
  for (float s : scales) {
    if (!(s >= 1.0f)) return ctx.Invalid("Upsample scales must be at least 1");
  }
  return ResizeImpl(ctx, spec, 1, -1, -1, nullptr);
}

Status Resize(NodeContext& ctx) {
  ResizeSpec spec;
  if (ctx.opset() < 11) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"mode"}));
    ASSIGN_OR_RETURN(spec.mode, ParseMode(ctx, false));
    spec.coordinates = Coordinates::kAsymmetric;
    spec.rounding = NearestRounding::kFloorUpCeilDown;
    return ResizeImpl(ctx, spec, 1, -1, -1, nullptr);
  }
  RETURN_IF_ERROR(
      ctx.CheckAttributes({"mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                           "extrapolation_value", "nearest_mode", "antialias", "axes", "keep_aspect_ratio_policy"}));
  // Opset 18's additions are accepted at their defaults only (ONNX Runtime's behaviour then is
  // the opset-13 one); anything else is refused by name.
  ASSIGN_OR_RETURN(int64_t antialias, ctx.AttrInt("antialias", 0));
  if (antialias != 0) return ctx.Unsupported("attribute antialias = " + std::to_string(antialias));
  ASSIGN_OR_RETURN(std::string policy, ctx.AttrString("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch") return ctx.Unsupported("attribute keep_aspect_ratio_policy = '" + policy + "'");
  if (ctx.has_attr("axes")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.AttrInts("axes", {}));
    const int64_t rank = ctx.has_input(0) ? static_cast<int64_t>(ctx.input_type(0).shape.size()) : 0;
    bool every_axis = static_cast<int64_t>(axes.size()) == rank;
    for (size_t i = 0; every_axis && i < axes.size(); ++i) {
      every_axis = axes[i] == static_cast<int64_t>(i) || axes[i] == static_cast<int64_t>(i) - rank;
    }
    if (!every_axis) return ctx.Unsupported("attribute axes (only every axis, in order, is supported)");
  }
  ASSIGN_OR_RETURN(spec.mode, ParseMode(ctx, true));
  ASSIGN_OR_RETURN(std::string coordinates, ctx.AttrString("coordinate_transformation_mode", "half_pixel"));
  if (coordinates == "half_pixel") spec.coordinates = Coordinates::kHalfPixel;
  else if (coordinates == "pytorch_half_pixel") spec.coordinates = Coordinates::kPytorchHalfPixel;
  else if (coordinates == "align_corners") spec.coordinates = Coordinates::kAlignCorners;
  else if (coordinates == "asymmetric") spec.coordinates = Coordinates::kAsymmetric;
  else if (coordinates == "tf_crop_and_resize") spec.coordinates = Coordinates::kTfCrop;
  else if (coordinates == "tf_half_pixel_for_nn" && ctx.opset() < 13) spec.coordinates = Coordinates::kTfHalfPixelForNn;
  else if (coordinates == "half_pixel_symmetric" && ctx.opset() >= 19)
    return ctx.Unsupported("coordinate_transformation_mode 'half_pixel_symmetric'");
  else return ctx.Invalid("unknown coordinate_transformation_mode '" + coordinates + "'");
  ASSIGN_OR_RETURN(std::string rounding, ctx.AttrString("nearest_mode", "round_prefer_floor"));
  if (rounding == "round_prefer_floor") spec.rounding = NearestRounding::kRoundPreferFloor;
  else if (rounding == "round_prefer_ceil") spec.rounding = NearestRounding::kRoundPreferCeil;
  else if (rounding == "floor") spec.rounding = NearestRounding::kFloor;
  else if (rounding == "ceil") spec.rounding = NearestRounding::kCeil;
  else return ctx.Invalid("unknown nearest_mode '" + rounding + "'");
  ASSIGN_OR_RETURN(float a, ctx.AttrFloat("cubic_coeff_a", -0.75f));
  if (!std::isfinite(a)) return ctx.Invalid("cubic_coeff_a must be finite");
  spec.cubic_a = static_cast<double>(a);
  ASSIGN_OR_RETURN(int64_t exclude, ctx.AttrInt("exclude_outside", 0));
  if (exclude != 0 && exclude != 1) return ctx.Invalid("exclude_outside must be 0 or 1");
  spec.exclude_outside = exclude == 1;
  ASSIGN_OR_RETURN(spec.extrapolation_value, ctx.AttrFloat("extrapolation_value", 0.0f));
  return ResizeImpl(ctx, spec, 2, 3, 1, nullptr);
}

}  // namespace

const std::vector<OpConverter>& ResizeConverters() {
  static const std::vector<OpConverter> table = {
      {"Resize", Resize},
      {"Upsample", Upsample},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
