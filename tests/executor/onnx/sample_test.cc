// ONNX GridSample, RoiAlign (docs/DETERMINISM.md 6.7b), Det (6.7c) and MaxUnpool (6.7d): naive
// references of the spec's scalar operation sequences, compared bit for bit at 1, 2 and 8
// threads, and bad inputs refused with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "executor/onnx/import.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::OneNodeModel;
using consensor::testing::RandomF32;
using consensor::testing::RunOnnxAtThreads;
using consensor::testing::RunOnnxModel;

using Attr = consensor::testing::OnnxAttr;
using Input = consensor::testing::OnnxInput;

void ExpectBits(const std::vector<float>& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(want.size()), got.num_elements()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, got.data_as<float>() + i, 4);
    ASSERT_EQ(a, b) << what << " element " << i << ": want " << want[i] << ", got " << got.data_as<float>()[i];
  }
}

// ---- GridSample: the spec's sequence in scalar f32 ----

struct GridCase {
  std::string mode, padding;
  int64_t align;
};

// max and min of section 1.1 (no NaN in these inputs): max(-0, +0) = +0, min(-0, +0) = -0.
float Max(float a, float b) { return a == b ? (std::signbit(a) ? b : a) : (a > b ? a : b); }
float Min(float a, float b) { return a == b ? (std::signbit(a) ? a : b) : (a < b ? a : b); }
float Clip(float v, float hi) { return Min(Max(v, 0.0f), hi); }

float Pad(float c, int64_t len, const GridCase& g) {
  if (g.padding == "zeros") return c;
  if (g.padding == "reflection") {
    const float lo = g.align ? 0.0f : -0.5f;
    const float span = g.align ? static_cast<float>(len - 1) : static_cast<float>(len);
    if (span == 0.0f) return 0.0f;
    const float d = std::fabs(c - lo);
    const float extra = std::fmod(d, span);
    const float flips = std::floor(d / span);
    c = std::fmod(flips, 2.0f) != 0.0f ? (span - extra) + lo : extra + lo;
  }
  return Clip(c, static_cast<float>(len - 1));
}

std::vector<float> Cubic(float t) {
  const float a = -0.75f;
  auto k1 = [&](float s) { return ((((a + 2.0f) * s) - (a + 3.0f)) * s) * s + 1.0f; };
  auto k2 = [&](float s) { return (((s * a) - 5.0f * a) * s + 8.0f * a) * s - 4.0f * a; };
  const float u = 1.0f - t;
  return {k2(t + 1.0f), k1(t), k1(u), k2(u + 1.0f)};
}

std::vector<float> ReferenceGridSample(const Tensor& x, const Tensor& grid, const GridCase& g) {
  const Shape& xs = x.shape();
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], ho = grid.shape()[1], wo = grid.shape()[2];
  std::vector<float> out(static_cast<size_t>(n * c * ho * wo));
  auto unnormalize = [&](float v, int64_t len) {
    const float l = static_cast<float>(len);
    return g.align ? ((v + 1.0f) / 2.0f) * (l - 1.0f) : (((v + 1.0f) * l) - 1.0f) / 2.0f;
  };
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = x.data_as<float>() + (b * c + ch) * h * w;
      // masked: +0 outside the image; otherwise the coordinates are already inside.
      auto tap = [&](float ty, float tx, bool masked) {
        const bool inside =
            ty >= 0.0f && ty <= static_cast<float>(h - 1) && tx >= 0.0f && tx <= static_cast<float>(w - 1);
        if (masked && !inside) return 0.0f;
        return plane[static_cast<int64_t>(Clip(ty, static_cast<float>(h - 1))) * w +
                     static_cast<int64_t>(Clip(tx, static_cast<float>(w - 1)))];
      };
      for (int64_t i = 0; i < ho * wo; ++i) {
        const float* gp = grid.data_as<float>() + (b * ho * wo + i) * 2;
        float cx = unnormalize(gp[0], w), cy = unnormalize(gp[1], h);
        float y;
        if (g.mode == "bicubic") {
          const float fx = std::floor(cx), fy = std::floor(cy);
          const std::vector<float> wx = Cubic(cx - fx), wy = Cubic(cy - fy);
          float rows[4];
          for (int r = 0; r < 4; ++r) {
            const float py = Pad(fy + static_cast<float>(r - 1), h, g);
            for (int k = 0; k < 4; ++k) {
              const float px = Pad(fx + static_cast<float>(k - 1), w, g);
              const float term = tap(py, px, g.padding == "zeros") * wx[k];
              rows[r] = k == 0 ? term : rows[r] + term;
            }
          }
          y = rows[0] * wy[0];
          for (int r = 1; r < 4; ++r) y = y + rows[r] * wy[r];
        } else {
          cx = Pad(cx, w, g);
          cy = Pad(cy, h, g);
          if (g.mode == "nearest") {
            y = tap(std::nearbyint(cy), std::nearbyint(cx), true);
          } else {
            const float x0 = std::floor(cx), y0 = std::floor(cy), x1 = x0 + 1.0f, y1 = y0 + 1.0f;
            const float wx1 = cx - x0, wx0 = x1 - cx, wy1 = cy - y0, wy0 = y1 - cy;
            y = tap(y0, x0, true) * (wx0 * wy0);
            y = y + tap(y0, x1, true) * (wx1 * wy0);
            y = y + tap(y1, x0, true) * (wx0 * wy1);
            y = y + tap(y1, x1, true) * (wx1 * wy1);
          }
        }
        out[static_cast<size_t>((b * c + ch) * ho * wo + i)] = y;
      }
    }
  }
  return out;
}

TEST(OnnxSample, GridSampleMatchesTheSpecBitForBit) {
  const Tensor x = RandomF32({2, 2, 3, 4}, 7, 2.0f);
  Tensor grid = RandomF32({2, 3, 5, 2}, 8, 1.4f);
  // Exact corners, the centre and points far outside: the padding rules' edges.
  const float special[] = {-1.0f, 1.0f, 0.0f, 0.0f, 1.0f, -1.0f, -3.7f, 2.9f, 5.25f, -6.5f};
  std::copy(std::begin(special), std::end(special), grid.data_as<float>());
  for (const std::string& mode : {"bilinear", "nearest", "bicubic"}) {
    for (const std::string& padding : {"zeros", "border", "reflection"}) {
      for (int64_t align : {0, 1}) {
        const GridCase g{mode, padding, align};
        const auto model = OneNodeModel("GridSample", {{"x", 1, x.shape()}, {"grid", 1, grid.shape()}},
                                        {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}}, 16);
        const std::vector<float> want = ReferenceGridSample(x, grid, g);
        auto got = RunOnnxAtThreads(model, {{"x", x}, {"grid", grid}}, {1, 2, 8});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        for (const Tensor& t : *got) ExpectBits(want, t, mode + " " + padding + " align " + std::to_string(align));
      }
    }
  }
}

TEST(OnnxSample, GridSampleAcceptsOpset20ModeNames) {
  const Tensor x = RandomF32({1, 1, 3, 3}, 1), grid = RandomF32({1, 2, 2, 2}, 2);
  for (auto [old_name, new_name] : {std::pair{"bilinear", "linear"}, std::pair{"bicubic", "cubic"}}) {
    auto a = RunOnnxModel(
        OneNodeModel("GridSample", {{"x", 1, x.shape()}, {"grid", 1, grid.shape()}}, {{"mode", old_name}}, 16),
        {{"x", x}, {"grid", grid}}, 1);
    auto b = RunOnnxModel(
        OneNodeModel("GridSample", {{"x", 1, x.shape()}, {"grid", 1, grid.shape()}}, {{"mode", new_name}}, 16),
        {{"x", x}, {"grid", grid}}, 1);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(TensorHash(*a), TensorHash(*b));
  }
}

// nearest copies bits, so it takes X of any dtype: the f32 result's bits, read as i32.
TEST(OnnxSample, GridSampleNearestCopiesAnyDtype) {
  const Tensor xf = RandomF32({1, 2, 3, 4}, 21), grid = RandomF32({1, 2, 3, 2}, 22, 1.3f);
  Tensor xi(DType::kI32, xf.shape());
  std::memcpy(xi.data_as<int32_t>(), xf.data_as<float>(), static_cast<size_t>(xf.num_elements()) * 4);
  const std::map<std::string, Attr> attrs = {{"mode", std::string("nearest")}, {"padding_mode", std::string("zeros")}};
  auto f = RunOnnxModel(OneNodeModel("GridSample", {{"x", 1, xf.shape()}, {"grid", 1, grid.shape()}}, attrs, 16),
                        {{"x", xf}, {"grid", grid}}, 1);
  auto i = RunOnnxModel(
      OneNodeModel("GridSample", {{"x", onnx::TensorProto::INT32, xi.shape()}, {"grid", 1, grid.shape()}}, attrs, 16),
      {{"x", xi}, {"grid", grid}}, 2);
  ASSERT_TRUE(f.ok() && i.ok());
  ASSERT_EQ(i->dtype(), DType::kI32);
  ASSERT_EQ(f->num_elements(), i->num_elements());
  EXPECT_EQ(std::memcmp(f->data_as<float>(), i->data_as<int32_t>(), static_cast<size_t>(f->num_elements()) * 4), 0);
}

Status ImportStatus(const std::vector<uint8_t>& model, const std::map<std::string, Shape>& shapes = {}) {
  OnnxImportOptions options;
  options.input_shapes = shapes;
  return ImportOnnx(model, options).status();
}

TEST(OnnxSample, GridSampleRefusesBadInputs) {
  const Input x{"x", 1, {1, 1, 3, 3}}, grid{"grid", 1, {1, 2, 2, 2}};
  Status s = ImportStatus(OneNodeModel("GridSample", {x, grid}, {{"mode", std::string("area")}}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mode 'area'"), std::string::npos) << s.ToString();
  s = ImportStatus(OneNodeModel("GridSample", {x, grid}, {{"padding_mode", std::string("wrap")}}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(OneNodeModel("GridSample", {x, grid}, {{"align_corners", int64_t{2}}}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(OneNodeModel("GridSample", {x, {"grid", 1, {1, 2, 2, 3}}}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[N, H_out, W_out, 2]"), std::string::npos) << s.ToString();
  s = ImportStatus(OneNodeModel("GridSample", {x, {"grid", 1, {2, 2, 2, 2}}}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(OneNodeModel("GridSample", {{"x", 1, {1, 1, 2, 3, 3}}, {"grid", 1, {1, 2, 2, 2, 3}}}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  s = ImportStatus(OneNodeModel("GridSample", {{"x", 1, {1, 1, 0, 3}}, grid}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // No channels: X is empty, but N*H*W would still index pixel rows.
  s = ImportStatus(
      OneNodeModel("GridSample", {{"x", 1, {1 << 20, 0, 1 << 20, 1 << 20}}, {"grid", 1, {1 << 20, 1, 1, 2}}}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  s = ImportStatus(OneNodeModel("GridSample", {{"x", onnx::TensorProto::INT32, {1, 1, 3, 3}}, grid}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
}

// ---- RoiAlign ----

std::vector<float> ReferenceRoiAlign(const Tensor& x, const Tensor& rois, const std::vector<int64_t>& batch, int64_t ph,
                                     int64_t pw, int64_t ratio, float scale, bool half_pixel, bool avg) {
  const int64_t c = x.shape()[1], h = x.shape()[2], w = x.shape()[3], r = rois.shape()[0];
  std::vector<float> out;
  const float offset = half_pixel ? 0.5f : 0.0f;
  struct Sample {
    float low, high, l, hl;
    bool outside;
  };
  // ratio 0: ceil(extent / pooled) samples per bin on this axis, none when below 1.
  auto grid = [&](float a, float b, int64_t pooled) -> int64_t {
    if (ratio > 0) return ratio;
    float extent = (b * scale - offset) - (a * scale - offset);
    if (!half_pixel) extent = Max(extent, 1.0f);
    const float g = std::ceil(extent / static_cast<float>(pooled));
    return g < 1.0f ? 0 : static_cast<int64_t>(g);
  };
  auto axis = [&](float a, float b, int64_t pooled, int64_t size, int64_t g) {
    const float start = a * scale - offset, end = b * scale - offset;
    float extent = end - start;
    if (!half_pixel) extent = Max(extent, 1.0f);
    const float bin = extent / static_cast<float>(pooled);
    std::vector<Sample> s;
    for (int64_t p = 0; p < pooled; ++p) {
      for (int64_t i = 0; i < g; ++i) {
        float v =
            (start + static_cast<float>(p) * bin) + ((static_cast<float>(i) + 0.5f) * bin) / static_cast<float>(g);
        Sample q;
        q.outside = v < -1.0f || v > static_cast<float>(size);
        if (v <= 0.0f) v = 0.0f;
        float low = std::floor(v), high = low + 1.0f;
        if (low >= static_cast<float>(size - 1)) {
          low = high = static_cast<float>(size - 1);
          v = low;
        }
        q.low = low;
        q.high = high;
        q.l = v - low;
        q.hl = 1.0f - q.l;
        s.push_back(q);
      }
    }
    return s;
  };
  out.resize(static_cast<size_t>(r * c * ph * pw));
  for (int64_t k = 0; k < r; ++k) {
    const float* roi = rois.data_as<float>() + k * 4;
    int64_t gh = grid(roi[1], roi[3], ph), gw = grid(roi[0], roi[2], pw);
    if (gh == 0 || gw == 0) gh = gw = 0;  // an empty grid: every bin is +0
    const auto ys = axis(roi[1], roi[3], ph, h, gh), xs = axis(roi[0], roi[2], pw, w, gw);
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = x.data_as<float>() + (batch[k] * c + ch) * h * w;
      auto v = [&](float yy, float xx) { return plane[static_cast<int64_t>(yy) * w + static_cast<int64_t>(xx)]; };
      for (int64_t py = 0; py < ph; ++py) {
        for (int64_t px = 0; px < pw; ++px) {
          std::vector<float> terms;
          if (gh == 0) {
            out[static_cast<size_t>(((k * c + ch) * ph + py) * pw + px)] = 0.0f;
            continue;
          }
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              const Sample& sy = ys[py * gh + iy];
              const Sample& sx = xs[px * gw + ix];
              const float p[4] = {(sy.hl * sx.hl) * v(sy.low, sx.low), (sy.hl * sx.l) * v(sy.low, sx.high),
                                  (sy.l * sx.hl) * v(sy.high, sx.low), (sy.l * sx.l) * v(sy.high, sx.high)};
              float t = p[0];
              for (int q = 1; q < 4; ++q) t = avg ? t + p[q] : Max(t, p[q]);
              terms.push_back(sy.outside || sx.outside ? 0.0f : t);
            }
          }
          float y;
          if (avg) {
            // csum (4.1) of at most 64 terms: one term per lane, then the lane tree.
            std::vector<float> lanes(64, -0.0f);
            for (size_t i = 0; i < terms.size(); ++i) lanes[i % 64] = lanes[i % 64] + terms[i];
            for (size_t s = 32; s >= 1; s /= 2) {
              for (size_t j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
            }
            y = lanes[0] / static_cast<float>(gh * gw);
          } else {
            y = terms[0];
            for (float t : terms) y = Max(y, t);
          }
          out[static_cast<size_t>(((k * c + ch) * ph + py) * pw + px)] = y;
        }
      }
    }
  }
  return out;
}

TEST(OnnxSample, RoiAlignMatchesTheSpecBitForBit) {
  const Tensor x = RandomF32({2, 2, 6, 7}, 3, 2.0f);
  // x1, y1, x2, y2: inside, partly outside, degenerate (x2 < x1) and wholly outside.
  const std::vector<float> roi_values = {0.5f, 1.0f, 5.5f, 4.0f, -3.0f, -2.0f, 4.0f,  9.0f,
                                         3.0f, 3.0f, 2.0f, 3.5f, 20.0f, 1.0f,  30.0f, 2.0f};
  const Tensor rois = Tensor::FromVector<float>(DType::kF32, {4, 4}, roi_values);
  const std::vector<int64_t> batch = {0, 1, 1, 0};
  const Tensor batch_t = Tensor::FromVector<int64_t>(DType::kI64, {4}, batch);
  for (const std::string& mode : {"avg", "max"}) {
    for (const std::string& coords : {"half_pixel", "output_half_pixel"}) {
      const auto model = OneNodeModel(
          "RoiAlign", {{"x", 1, x.shape()}, {"rois", 1, rois.shape()}, {"b", onnx::TensorProto::INT64, {4}}},
          {{"mode", mode},
           {"coordinate_transformation_mode", coords},
           {"output_height", int64_t{2}},
           {"output_width", int64_t{3}},
           {"sampling_ratio", int64_t{2}},
           {"spatial_scale", 0.75f}},
          16);
      const auto want = ReferenceRoiAlign(x, rois, batch, 2, 3, 2, 0.75f, coords == "half_pixel", mode == "avg");
      auto got = RunOnnxAtThreads(model, {{"x", x}, {"rois", rois}, {"b", batch_t}}, {1, 2, 8});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (const Tensor& t : *got) ExpectBits(want, t, mode + " " + coords);
    }
  }
}

// sampling_ratio 0 (DETERMINISM.md 6.7b): a grid of ceil(extent / pooled) samples per axis and
// roi, the rois known at import; rois of four different grids (one empty) put back in order.
TEST(OnnxSample, RoiAlignAdaptiveGridMatchesTheSpecBitForBit) {
  const Tensor x = RandomF32({2, 1, 9, 11}, 5, 2.0f);
  // x1, y1, x2, y2: grids up to 8 x 8 samples per bin, a zero-width roi (an empty grid with
  // half_pixel, 1 sample with output_half_pixel), a partly outside one, and two of one grid.
  const std::vector<float> roi_values = {0.5f, 1.0f, 5.5f, 4.0f, -3.0f, -2.0f, 12.0f, 9.0f,  3.0f, 3.0f, 3.0f, 7.5f,
                                         1.0f, 2.0f, 2.5f, 3.0f, 0.0f,  0.0f,  14.0f, 11.0f, 1.5f, 1.0f, 6.5f, 4.0f};
  const Tensor rois = Tensor::FromVector<float>(DType::kF32, {6, 4}, roi_values);
  const std::vector<int64_t> batch = {0, 1, 1, 0, 1, 0};
  const Tensor batch_t = Tensor::FromVector<int64_t>(DType::kI64, {6}, batch);
  for (const std::string& mode : {"avg", "max"}) {
    for (const std::string& coords : {"half_pixel", "output_half_pixel"}) {
      const auto model = OneNodeModel(
          "RoiAlign", {{"x", 1, x.shape()}, {"rois", 1, rois.shape()}, {"b", onnx::TensorProto::INT64, {6}}},
          {{"mode", mode},
           {"coordinate_transformation_mode", coords},
           {"output_height", int64_t{2}},
           {"output_width", int64_t{3}},
           {"spatial_scale", 0.75f}},
          16);
      const auto want = ReferenceRoiAlign(x, rois, batch, 2, 3, 0, 0.75f, coords == "half_pixel", mode == "avg");
      auto got = RunOnnxAtThreads(model, {{"x", x}, {"b", batch_t}}, {1, 2, 8}, {{"rois", rois}});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (const Tensor& t : *got) ExpectBits(want, t, mode + " " + coords + " sampling_ratio 0");
    }
  }
}

TEST(OnnxSample, RoiAlignAdaptiveGridWithoutRois) {
  const auto model = OneNodeModel(
      "RoiAlign", {{"x", 1, {1, 1, 4, 4}}, {"rois", 1, {0, 4}}, {"b", onnx::TensorProto::INT64, {0}}}, {}, 16);
  auto got = RunOnnxAtThreads(model, {{"x", RandomF32({1, 1, 4, 4}, 6)}, {"b", Tensor(DType::kI64, {0})}}, {1},
                              {{"rois", Tensor(DType::kF32, {0, 4})}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].shape(), (Shape{0, 1, 1, 1}));
}

TEST(OnnxSample, RoiAlignRefusesBadInputs) {
  const Input x{"x", 1, {1, 1, 4, 4}}, rois{"rois", 1, {2, 4}}, b{"b", onnx::TensorProto::INT64, {2}};
  // sampling_ratio 0 with rois computed at run time: refused, asking for them at import.
  Status s = ImportStatus(OneNodeModel("RoiAlign", {x, rois, b}, {}, 16));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(NeedsValueAtImport(s)) << s.ToString();
  EXPECT_NE(s.message().find("sampling_ratio 0"), std::string::npos) << s.ToString();
  // ... and a roi whose adaptive grid is NaN or too large.
  for (float far : {std::numeric_limits<float>::quiet_NaN(), 1e9f}) {
    OnnxImportOptions options;
    options.input_shapes = {{"x", {1, 1, 4, 4}}, {"b", {2}}};
    options.constant_inputs["rois"] = Tensor::FromVector<float>(DType::kF32, {2, 4}, {0, 0, 1, 1, 0, 0, far, 1});
    s = ImportOnnx(OneNodeModel("RoiAlign", {x, rois, b}, {}, 16), options).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("roi 1"), std::string::npos) << s.ToString();
  }
  const std::map<std::string, Attr> ok = {{"sampling_ratio", int64_t{1}}};
  s = ImportStatus(OneNodeModel("RoiAlign", {x, {"rois", 1, {2, 5}}, b}, ok, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(OneNodeModel("RoiAlign", {x, rois, {"b", onnx::TensorProto::INT64, {3}}}, ok, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(
      OneNodeModel("RoiAlign", {x, rois, b}, {{"sampling_ratio", int64_t{1}}, {"mode", std::string("min")}}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(
      OneNodeModel("RoiAlign", {x, rois, b}, {{"sampling_ratio", int64_t{1}}, {"output_height", int64_t{0}}}, 16));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // A batch index outside [0, N) at run time fails the task instead of reading another image.
  const auto model = OneNodeModel("RoiAlign", {x, rois, b}, ok, 16);
  const Tensor xv = RandomF32({1, 1, 4, 4}, 5);
  const Tensor rv = Tensor::FromVector<float>(DType::kF32, {2, 4}, {0, 0, 2, 2, 1, 1, 3, 3});
  for (int64_t bad : {int64_t{1}, int64_t{-1}}) {
    auto got = RunOnnxModel(
        model, {{"x", xv}, {"rois", rv}, {"b", Tensor::FromVector<int64_t>(DType::kI64, {2}, {0, bad})}}, 1);
    EXPECT_FALSE(got.ok()) << bad;
  }
}

// ---- Det ----

template <typename T>
T ReferenceDet(std::vector<T> a, int64_t n) {
  bool odd = false;
  T det = 0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for (int64_t r = k + 1; r < n; ++r) {
      // argmax's rule: larger wins, a NaN is larger than every number, the first of equals stays.
      const T c = std::fabs(a[r * n + k]), best = std::fabs(a[p * n + k]);
      if ((std::isnan(c) && !std::isnan(best)) || c > best) p = r;
    }
    if (p != k) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[k * n + j], a[p * n + j]);
      odd = !odd;
    }
    const T pivot = a[k * n + k];
    for (int64_t r = k + 1; r < n; ++r) {
      const T f = pivot == 0 ? T(0) : a[r * n + k] / pivot;
      for (int64_t j = 0; j < n; ++j) a[r * n + j] = a[r * n + j] - f * a[k * n + j];
    }
    det = k == 0 ? pivot : det * pivot;
  }
  return odd ? -det : det;
}

TEST(OnnxSample, DetMatchesTheSpecBitForBit) {
  for (const Shape& shape : {Shape{3, 3}, Shape{2, 3, 5, 5}, Shape{4, 1, 1}, Shape{2, 2, 2}}) {
    Tensor x = RandomF32(shape, 11, 3.0f);
    if (shape == Shape{2, 2, 2}) {  // a singular matrix, and a tie between the pivot candidates
      const float v[] = {1.0f, 2.0f, 2.0f, 4.0f, 2.0f, 1.0f, -2.0f, 5.0f};
      std::copy(std::begin(v), std::end(v), x.data_as<float>());
    }
    const int64_t n = shape.back();
    const int64_t count = x.num_elements() / (n * n);
    std::vector<float> want;
    for (int64_t b = 0; b < count; ++b) {
      want.push_back(
          ReferenceDet(std::vector<float>(x.data_as<float>() + b * n * n, x.data_as<float>() + (b + 1) * n * n), n));
    }
    const auto model = OneNodeModel("Det", {{"x", 1, shape}}, {}, 11);
    auto got = RunOnnxAtThreads(model, {{"x", x}}, {1, 2, 8});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const Tensor& t : *got) {
      EXPECT_EQ(t.shape(), Shape(shape.begin(), shape.end() - 2));
      ExpectBits(want, t, ShapeToString(shape));
    }
  }
}

// f64 picks its pivot without argmax (reduce_max, equal, or NaN, argmax of the marks): the
// same rule, checked with ties, a zero column and a NaN.
TEST(OnnxSample, DetInFloat64MatchesTheSpecBitForBit) {
  const Shape shape = {4, 4, 4};
  const int64_t n = 4;
  std::vector<double> values(64);
  const Tensor r = RandomF32({64}, 12, 3.0f);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(r.data_as<float>()[i]) / 3.0;
  const double tie[16] = {1, 2, 3, 4, -1, 5, 6, 7, 1, 8, 9, 10, -1, 11, 12, 14};  // |pivot| ties
  std::copy(std::begin(tie), std::end(tie), values.begin() + 16);
  for (int64_t i = 0; i < 4; ++i) values[static_cast<size_t>(32 + i * 4)] = 0.0;  // a zero first column
  values[50] = std::nan("");
  const Tensor x = Tensor::FromVector<double>(DType::kF64, shape, values);
  auto got =
      RunOnnxAtThreads(OneNodeModel("Det", {{"x", onnx::TensorProto::DOUBLE, shape}}, {}, 11), {{"x", x}}, {1, 2, 8});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const Tensor& t : *got) {
    ASSERT_EQ(t.dtype(), DType::kF64);
    ASSERT_EQ(t.shape(), Shape{4});
    for (int64_t b = 0; b < 4; ++b) {
      const double want = ReferenceDet(std::vector<double>(values.begin() + b * 16, values.begin() + (b + 1) * 16), n);
      const double have = t.data_as<double>()[b];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(have)) << b;
      } else {
        EXPECT_EQ(std::bit_cast<uint64_t>(want), std::bit_cast<uint64_t>(have)) << b << ": " << want << " vs " << have;
      }
    }
  }
}

TEST(OnnxSample, DetRefusesBadInputs) {
  Status s = ImportStatus(OneNodeModel("Det", {{"x", 1, {2, 3}}}, {}, 11));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("square"), std::string::npos) << s.ToString();
  s = ImportStatus(OneNodeModel("Det", {{"x", 1, {3}}}, {}, 11));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = ImportStatus(OneNodeModel("Det", {{"x", 1, {65, 65}}}, {}, 11));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  s = ImportStatus(OneNodeModel("Det", {{"x", onnx::TensorProto::INT32, {2, 2}}}, {}, 11));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
}

// ---- MaxUnpool ----

TEST(OnnxSample, MaxUnpoolScattersIntoZeros) {
  const Tensor x = RandomF32({1, 2, 2, 2}, 4);
  // Flat over the whole [1, 2, 4, 4] output; 1 twice (the later value wins).
  const std::vector<int64_t> idx = {0, 3, 9, 15, 16, 1, 1, 31};
  const Tensor i = Tensor::FromVector<int64_t>(DType::kI64, {1, 2, 2, 2}, idx);
  const std::map<std::string, Attr> attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                             {"strides", std::vector<int64_t>{2, 2}}};
  for (bool with_shape : {false, true}) {
    std::vector<Input> inputs = {{"x", 1, {1, 2, 2, 2}}, {"i", onnx::TensorProto::INT64, {1, 2, 2, 2}}};
    std::map<std::string, Tensor> bound = {{"i", i}};
    if (with_shape) {
      inputs.push_back({"shape", onnx::TensorProto::INT64, {4}});
      bound["shape"] = Tensor::FromVector<int64_t>(DType::kI64, {4}, {1, 2, 5, 6});
    }
    // The inferred [1, 2, 4, 4] result, in the leading corner of [1, 2, 5, 6] when given.
    const int64_t oh = with_shape ? 5 : 4, ow = with_shape ? 6 : 4;
    std::vector<float> want(static_cast<size_t>(2 * oh * ow), 0.0f);
    for (size_t j = 0; j < idx.size(); ++j) {
      const int64_t c = idx[j] / 16, y = idx[j] / 4 % 4, xx = idx[j] % 4;
      want[static_cast<size_t>((c * oh + y) * ow + xx)] = x.data_as<float>()[j];
    }
    auto got = RunOnnxAtThreads(OneNodeModel("MaxUnpool", inputs, attrs, 11), {{"x", x}}, {1, 2, 8}, bound);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const Tensor& t : *got) {
      EXPECT_EQ(t.shape(), (Shape{1, 2, oh, ow}));
      ExpectBits(want, t, with_shape ? "with output_shape" : "inferred shape");
    }
  }
}

TEST(OnnxSample, MaxUnpoolRefusesBadInputs) {
  const std::map<std::string, Attr> attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                             {"strides", std::vector<int64_t>{2, 2}}};
  const std::vector<Input> inputs = {{"x", 1, {1, 1, 2, 2}}, {"i", onnx::TensorProto::INT64, {1, 1, 2, 2}}};
  auto import = [&](const std::vector<int64_t>& idx, const std::map<std::string, Attr>& a) {
    OnnxImportOptions options;
    options.input_shapes["x"] = {1, 1, 2, 2};
    options.constant_inputs["i"] = Tensor::FromVector<int64_t>(DType::kI64, {1, 1, 2, 2}, idx);
    return ImportOnnx(OneNodeModel("MaxUnpool", inputs, a, 11), options).status();
  };
  Status s = import({0, 1, 2, 16}, attrs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("index 16"), std::string::npos) << s.ToString();
  EXPECT_EQ(import({0, 1, 2, -1}, attrs).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(import({0, 1, 2, 3}, {{"kernel_shape", std::vector<int64_t>{2}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      import({0, 1, 2, 3}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{0, 1}}})
          .code(),
      StatusCode::kInvalidArgument);
  // Run-time indices must be int64.
  s = ImportStatus(
      OneNodeModel("MaxUnpool", {{"x", 1, {1, 1, 2, 2}}, {"i", onnx::TensorProto::INT32, {1, 1, 2, 2}}}, attrs, 11),
      {{"x", {1, 1, 2, 2}}, {"i", {1, 1, 2, 2}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

int64_t ElementCount(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Run-time indices (DETERMINISM.md 6.7d): each index inside its own pooling window, as
// MaxPool's Indices are, chosen at random in 1-D and 2-D windows that overlap (kernel 3,
// stride 2, pads 1) or tile (kernel 2, stride 2), with and without output_shape; compared bit
// for bit with a naive scatter (ascending j, the last one wins) at 1, 2 and 8 threads.
TEST(OnnxSample, MaxUnpoolTakesRunTimeIndicesInsideTheirWindows) {
  struct Case {
    Shape x;
    int64_t k, s, pad;
    Shape out_shape;  // empty: inferred
  };
  const Case cases[] = {{{1, 2, 3, 3}, 3, 2, 1, {}},
                        {{2, 1, 2, 3}, 2, 2, 0, {}},
                        {{1, 2, 3, 3}, 3, 2, 1, {1, 2, 6, 7}},
                        {{1, 1, 4}, 3, 1, 0, {}}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    const size_t spatial = c.x.size() - 2;
    Shape inferred(c.x.begin(), c.x.begin() + 2);
    for (size_t d = 0; d < spatial; ++d) inferred.push_back((c.x[d + 2] - 1) * c.s + c.k - 2 * c.pad);
    const Shape target = c.out_shape.empty() ? inferred : c.out_shape;
    const Tensor x = RandomF32(c.x, seed++);
    const int64_t n = x.num_elements();
    std::mt19937 rng(seed++);
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      // Window j = (n, c, o...): a random in-range position of it, flat over the inferred shape.
      int64_t rest = j;
      std::vector<int64_t> o(spatial);
      for (size_t d = spatial; d-- > 0;) o[d] = rest % c.x[d + 2], rest /= c.x[d + 2];
      int64_t flat = rest;  // n * C + c
      for (size_t d = 0; d < spatial; ++d) {
        const int64_t lo = std::max<int64_t>(0, o[d] * c.s - c.pad);
        const int64_t hi = std::min<int64_t>(inferred[d + 2], o[d] * c.s - c.pad + c.k);
        flat = flat * inferred[d + 2] + lo + static_cast<int64_t>(rng() % static_cast<uint32_t>(hi - lo));
      }
      idx[j] = flat;
    }
    std::vector<float> want(static_cast<size_t>(ElementCount(target)), 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      int64_t rest = idx[j], q = 0, stride = 1;
      for (size_t d = target.size(); d-- > 0;) {
        q += (rest % inferred[d]) * stride;
        rest /= inferred[d];
        stride *= target[d];
      }
      want[static_cast<size_t>(q)] = x.data_as<float>()[j];
    }
    std::map<std::string, Attr> attrs = {{"kernel_shape", std::vector<int64_t>(spatial, c.k)},
                                         {"strides", std::vector<int64_t>(spatial, c.s)},
                                         {"pads", std::vector<int64_t>(2 * spatial, c.pad)}};
    std::vector<Input> inputs = {{"x", 1, c.x}, {"i", onnx::TensorProto::INT64, c.x}};
    std::map<std::string, Tensor> bound;
    if (!c.out_shape.empty()) {
      inputs.push_back({"shape", onnx::TensorProto::INT64, {static_cast<int64_t>(target.size())}});
      bound["shape"] = Tensor::FromVector<int64_t>(DType::kI64, {static_cast<int64_t>(target.size())}, target);
    }
    const Tensor i = Tensor::FromVector<int64_t>(DType::kI64, c.x, idx);
    const auto model = OneNodeModel("MaxUnpool", inputs, attrs, 11);
    auto got = RunOnnxAtThreads(model, {{"x", x}, {"i", i}}, {1, 2, 8}, bound);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const Tensor& t : *got) {
      EXPECT_EQ(t.shape(), target);
      ExpectBits(want, t, "x " + ShapeToString(c.x));
    }
    // An index outside its own window (here: window 0's index moved to the last position)
    // fails the task instead of being dropped.
    std::vector<int64_t> moved = idx;
    moved[0] = ElementCount(inferred) - 1;
    auto bad =
        RunOnnxAtThreads(model, {{"x", x}, {"i", Tensor::FromVector<int64_t>(DType::kI64, c.x, moved)}}, {1}, bound);
    EXPECT_FALSE(bad.ok()) << "x " << ShapeToString(c.x);
  }
}

}  // namespace
}  // namespace consensor::executor
