// ONNX quantization ops (docs/DETERMINISM.md 6.6): each op against a naive reference written
// from the spec, at 1, 2 and 8 threads, with rounding ties, saturation, NaN, per-axis
// parameters, u8 and i8 operands, zero points in the padding, groups; and bad scales and
// zero points refused at import, naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "kernels/backend_factory.h"
#include "onnx/onnx_pb.h"
#include "tests/conformance/backends.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

// Models are aggregates naming only the fields they set (GCC 12 warns about the others).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace consensor::executor {
namespace {

using consensor::testing::ImportAndCompileOnnx;
using consensor::testing::RunOnCpu;

// One node input: a graph input fed at run time, an initializer, or absent (empty name).
struct Arg {
  std::string name;
  Tensor value;
  bool initializer = false;
};

int32_t OnnxType(DType d) {
  switch (d) {
    case DType::kF32: return onnx::TensorProto::FLOAT;
    case DType::kU8: return onnx::TensorProto::UINT8;
    case DType::kI8: return onnx::TensorProto::INT8;
    case DType::kI32: return onnx::TensorProto::INT32;
    default: return onnx::TensorProto::INT64;
  }
}

struct Model {
  std::string op;
  std::vector<Arg> args;
  int outputs = 1;
  std::map<std::string, int64_t> int_attrs;
  std::map<std::string, std::vector<int64_t>> ints_attrs;
};

std::vector<uint8_t> Build(const Model& m) {
  onnx::ModelProto model;
  auto* g = testing::StartOnnxModel(&model, 13);
  auto* n = g->add_node();
  n->set_op_type(m.op);
  n->set_name("quant");
  for (const Arg& a : m.args) {
    n->add_input(a.name);
    if (a.name.empty()) continue;
    if (a.initializer) {
      auto* t = g->add_initializer();
      t->set_name(a.name);
      t->set_data_type(OnnxType(a.value.dtype()));
      for (int64_t d : a.value.shape()) t->add_dims(d);
      t->set_raw_data(
          std::string(reinterpret_cast<const char*>(a.value.data()), static_cast<size_t>(a.value.byte_size())));
    } else {
      auto* in = g->add_input();
      in->set_name(a.name);
      auto* tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(OnnxType(a.value.dtype()));
      auto* shape = tt->mutable_shape();
      for (int64_t d : a.value.shape()) shape->add_dim()->set_dim_value(d);
    }
  }
  for (const auto& [name, v] : m.int_attrs) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  for (const auto& [name, v] : m.ints_attrs) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  for (int i = 0; i < m.outputs; ++i) {
    const std::string name = "y" + std::to_string(i);
    n->add_output(name);
    g->add_output()->set_name(name);
  }
  std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

StatusOr<std::vector<Tensor>> RunModel(const Model& m, int threads) {
  ASSIGN_OR_RETURN(Program p, ImportAndCompileOnnx(Build(m)));
  std::map<std::string, Tensor> feeds;
  for (const Arg& a : m.args) {
    if (!a.name.empty() && !a.initializer) feeds.emplace(a.name, a.value);
  }
  ASSIGN_OR_RETURN(RunResult r, RunOnCpu(p, feeds, threads));
  std::vector<Tensor> out;
  for (auto& o : r.outputs) out.push_back(o.tensor);
  return out;
}

// Runs at 1, 2 and 8 threads and checks output 0 byte for byte against `want`.
void ExpectBits(const Model& m, const Tensor& want, int output = 0) {
  for (int threads : {1, 2, 8}) {
    auto got = RunModel(m, threads);
    ASSERT_TRUE(got.ok()) << m.op << ": " << got.status().message();
    const Tensor& y = got->at(static_cast<size_t>(output));
    ASSERT_EQ(y.dtype(), want.dtype()) << m.op;
    ASSERT_EQ(y.shape(), want.shape()) << m.op;
    ASSERT_EQ(0, std::memcmp(y.data(), want.data(), static_cast<size_t>(want.byte_size())))
        << m.op << " threads " << threads;
  }
}

template <typename T>
Tensor Make(DType d, const Shape& shape, const std::vector<T>& v) {
  return Tensor::FromVector<T>(d, shape, v);
}

template <typename T>
Tensor RandomInts(DType d, const Shape& shape, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(dist(rng));
  return Make<T>(d, shape, v);
}

// --- the naive references, written from docs/DETERMINISM.md 6.6 ---

// rhe of an f32 (the reference uses the C library in its default round-to-nearest-even mode).
float RoundHalfEven(float v) { return std::nearbyint(v); }

// sat_T(v) for an integral f32: clamp, NaN gives 0.
int SaturateTo(float v, DType t) {
  const float lo = t == DType::kU8 ? 0.0f : -128.0f, hi = t == DType::kU8 ? 255.0f : 127.0f;
  if (std::isnan(v)) return 0;
  return static_cast<int>(std::min(std::max(v, lo), hi));
}

int Get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kU8 ? static_cast<int>(t.data_as<uint8_t>()[i]) : static_cast<int>(t.data_as<int8_t>()[i]);
}

Tensor Quantized(DType d, const Shape& shape, const std::vector<int>& v) {
  Tensor t(d, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    if (d == DType::kU8) {
      t.data_as<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
    } else {
      t.data_as<int8_t>()[i] = static_cast<int8_t>(v[i]);
    }
  }
  return t;
}

TEST(OnnxQuant, QuantizeLinearRoundsTiesToEvenAndSaturates) {
  // x / 2: ties at +-0.5, 1.5, 2.5; far out of range; +-inf; NaN (gives 0, not the zero point).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f, -1.0f, 3.0f, 5.0f, -3.0f, -5.0f, 1e9f, -1e9f, inf, -inf, nan, 0.0f, 511.0f};
  for (DType t : {DType::kU8, DType::kI8}) {
    const int zp = t == DType::kU8 ? 10 : -3;
    std::vector<int> want;
    for (float v : x) want.push_back(SaturateTo(RoundHalfEven(v / 2.0f) + static_cast<float>(zp), t));
    Model m{"QuantizeLinear",
            {{"x", Make<float>(DType::kF32, {13}, x)},
             {"s", Make<float>(DType::kF32, {}, {2.0f})},
             {"z", Quantized(t, {}, {zp})}}};
    ExpectBits(m, Quantized(t, {13}, want));
  }
  // Spelled out for u8 with zp 10: 0.5 -> 0, -0.5 -> -0, 1.5 -> 2, 2.5 -> 2, -1.5 -> -2, -2.5 -> -2.
  Model m{"QuantizeLinear",
          {{"x", Make<float>(DType::kF32, {6}, {1.0f, -1.0f, 3.0f, 5.0f, -3.0f, -5.0f})},
           {"s", Make<float>(DType::kF32, {}, {2.0f}), true},
           {"z", Quantized(DType::kU8, {}, {10}), true}}};
  ExpectBits(m, Quantized(DType::kU8, {6}, {10, 10, 12, 12, 8, 8}));
}

TEST(OnnxQuant, QuantizeLinearDividesInF32) {
  // x / 0.1f is not x * (1 / 0.1f) for every x: the division is the spec.
  std::vector<float> x;
  for (int i = 0; i < 200; ++i) x.push_back(static_cast<float>(i) * 0.05f - 5.0f);
  std::vector<int> want;
  for (float v : x) want.push_back(SaturateTo(RoundHalfEven(v / 0.1f) + 0.0f, DType::kI8));
  Model m{"QuantizeLinear",
          {{"x", Make<float>(DType::kF32, {200}, x)},
           {"s", Make<float>(DType::kF32, {1}, {0.1f})},
           {"z", Quantized(DType::kI8, {1}, {0})}}};
  ExpectBits(m, Quantized(DType::kI8, {200}, want));
}

TEST(OnnxQuant, PerAxisQuantizeAndDequantize) {
  const Shape shape = {2, 3, 4};
  const Tensor x = consensor::testing::RandomF32(shape, 7, 40.0f);
  const std::vector<float> scales = {0.5f, 0.25f, 3.0f};
  const std::vector<int> zps = {0, 128, 250};
  std::vector<int> q;
  std::vector<float> back;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const int64_t c = (i / 4) % 3;
    const int v = SaturateTo(RoundHalfEven(x.data_as<float>()[i] / scales[c]) + static_cast<float>(zps[c]), DType::kU8);
    q.push_back(v);
    back.push_back(static_cast<float>(v - zps[c]) * scales[c]);
  }
  const Tensor s = Make<float>(DType::kF32, {3}, scales);
  const Tensor z = Quantized(DType::kU8, {3}, zps);
  ExpectBits({"QuantizeLinear", {{"x", x}, {"s", s}, {"z", z}}, 1, {{"axis", -2}}}, Quantized(DType::kU8, shape, q));
  ExpectBits({"DequantizeLinear", {{"x", Quantized(DType::kU8, shape, q)}, {"s", s}, {"z", z}}, 1, {{"axis", 1}}},
             Make<float>(DType::kF32, shape, back));
  // Without a zero point: i32 input, f32(x) * s.
  ExpectBits({"DequantizeLinear",
              {{"x", Make<int32_t>(DType::kI32, {3}, {-7, 1 << 24, (1 << 24) + 1})},
               {"s", Make<float>(DType::kF32, {}, {0.5f})}}},
             Make<float>(DType::kF32, {3}, {-3.5f, 8388608.0f, 8388608.0f}));
}

TEST(OnnxQuant, DynamicQuantizeLinearFollowsTheFunctionBody) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Tensor x = consensor::testing::RandomF32({3, 5}, seed, 4.0f);
    if (seed == 2) {
      for (int64_t i = 0; i < x.num_elements(); ++i) x.data_as<float>()[i] = std::fabs(x.data_as<float>()[i]) + 1.0f;
    }
    const float* xv = x.data_as<float>();
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      lo = std::min(lo, xv[i]);
      hi = std::max(hi, xv[i]);
    }
    const float scale = (hi - lo) / 255.0f;
    const float zf = std::min(std::max(0.0f - lo / scale, 0.0f), 255.0f);
    const int zp = SaturateTo(RoundHalfEven(zf), DType::kU8);
    std::vector<int> y;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      y.push_back(SaturateTo(RoundHalfEven(xv[i] / scale) + static_cast<float>(zp), DType::kU8));
    }
    Model m{"DynamicQuantizeLinear", {{"x", x}}, 3};
    ExpectBits(m, Quantized(DType::kU8, {3, 5}, y), 0);
    ExpectBits(m, Make<float>(DType::kF32, {}, {scale}), 1);
    ExpectBits(m, Quantized(DType::kU8, {}, {zp}), 2);
  }
  // All zeros: scale 0, zero point 0, y 0.
  Model zeros{"DynamicQuantizeLinear", {{"x", Make<float>(DType::kF32, {4}, {0.0f, 0.0f, -0.0f, 0.0f})}}, 3};
  ExpectBits(zeros, Quantized(DType::kU8, {4}, {0, 0, 0, 0}), 0);
  ExpectBits(zeros, Make<float>(DType::kF32, {}, {0.0f}), 1);
}

// sum_k (a - za[m]) * (b - zb[n]) in i32, a [B, M, K], b [K, N].
std::vector<int32_t> ReferenceMatMul(const Tensor& a, const Tensor& b, const std::vector<int>& za,
                                     const std::vector<int>& zb, int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<int32_t> out;
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int32_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += (Get(a, (bi * m + i) * k + p) - za[za.size() == 1 ? 0 : i]) *
                 (Get(b, p * n + j) - zb[zb.size() == 1 ? 0 : j]);
        }
        out.push_back(acc);
      }
    }
  }
  return out;
}

TEST(OnnxQuant, MatMulIntegerAllDtypeCombinationsAndPerAxisZeroPoints) {
  const int64_t batch = 2, m = 3, k = 37, n = 5;
  for (DType ta : {DType::kU8, DType::kI8}) {
    for (DType tb : {DType::kU8, DType::kI8}) {
      const int alo = ta == DType::kU8 ? 0 : -128, ahi = ta == DType::kU8 ? 255 : 127;
      const int blo = tb == DType::kU8 ? 0 : -128, bhi = tb == DType::kU8 ? 255 : 127;
      const Tensor a = ta == DType::kU8 ? RandomInts<uint8_t>(ta, {batch, m, k}, 11, alo, ahi)
                                        : RandomInts<int8_t>(ta, {batch, m, k}, 11, alo, ahi);
      const Tensor b = tb == DType::kU8 ? RandomInts<uint8_t>(tb, {k, n}, 12, blo, bhi)
                                        : RandomInts<int8_t>(tb, {k, n}, 12, blo, bhi);
      const std::vector<int> za = {alo + 3, ahi, alo};            // per row
      const std::vector<int> zb = {bhi - 1, blo, 0, 7, blo + 1};  // per column
      for (bool weights_constant : {false, true}) {
        Model model{"MatMulInteger",
                    {{"a", a},
                     {"b", b, weights_constant},
                     {"za", Quantized(ta, {m}, za)},
                     {"zb", Quantized(tb, {n}, zb), weights_constant}}};
        ExpectBits(model, Make<int32_t>(DType::kI32, {batch, m, n}, ReferenceMatMul(a, b, za, zb, batch, m, k, n)));
      }
      // No zero points.
      Model plain{"MatMulInteger", {{"a", a}, {"b", b}}};
      ExpectBits(plain, Make<int32_t>(DType::kI32, {batch, m, n}, ReferenceMatMul(a, b, {0}, {0}, batch, m, k, n)));
    }
  }
}

TEST(OnnxQuant, QLinearMatMulRequantizesInF32) {
  const int64_t m = 4, k = 33, n = 6;
  const Tensor a = RandomInts<uint8_t>(DType::kU8, {m, k}, 21, 0, 255);
  const Tensor b = RandomInts<int8_t>(DType::kI8, {k, n}, 22, -128, 127);
  const float sa = 0.02f;
  const std::vector<float> sy = {0.7f, 0.7f, 0.9f, 0.45f, 0.7f, 0.7f};  // per column
  const std::vector<int> zy = {-5, -5, 0, 12, -5, -128};
  const std::vector<float> sb = {0.01f, 0.03f, 0.005f, 0.02f, 0.011f, 0.5f};  // the last one saturates
  const std::vector<int32_t> acc = ReferenceMatMul(a, b, {120}, {0}, 1, m, k, n);
  std::vector<int> want;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float mult = (sa * sb[j]) / sy[j];
      want.push_back(
          SaturateTo(RoundHalfEven(static_cast<float>(acc[i * n + j]) * mult) + static_cast<float>(zy[j]), DType::kI8));
    }
  }
  Model model{"QLinearMatMul",
              {{"a", a},
               {"sa", Make<float>(DType::kF32, {}, {sa})},
               {"za", Quantized(DType::kU8, {}, {120})},
               {"b", b, true},
               {"sb", Make<float>(DType::kF32, {n}, sb), true},
               {"zb", Quantized(DType::kI8, {n}, std::vector<int>(n, 0)), true},
               {"sy", Make<float>(DType::kF32, {n}, sy)},
               {"zy", Quantized(DType::kI8, {n}, zy)}}};
  ExpectBits(model, Quantized(DType::kI8, {m, n}, want));
}

// Naive integer convolution from the spec: padding positions add 0.
std::vector<int32_t> ReferenceConv(const Tensor& x, const Tensor& w, int zx, const std::vector<int>& zw, int64_t group,
                                   int64_t stride, int64_t pad, int64_t dil, int64_t* oh_out, int64_t* ow_out) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], f = ws[0], kh = ws[2], kw = ws[3];
  const int64_t oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
  const int64_t ow = (wd + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
  *oh_out = oh;
  *ow_out = ow;
  const int64_t cg = c / group, fg = f / group;
  std::vector<int32_t> out;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < f; ++o) {
      const int64_t g = o / fg;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t z = 0; z < ow; ++z) {
          int32_t acc = 0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            for (int64_t i = 0; i < kh; ++i) {
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t r = y * stride + i * dil - pad, s = z * stride + j * dil - pad;
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                const int xv = Get(x, ((b * c + g * cg + ci) * h + r) * wd + s) - zx;
                const int wv = Get(w, ((o * cg + ci) * kh + i) * kw + j) - zw[zw.size() == 1 ? 0 : o];
                acc += xv * wv;
              }
            }
          }
          out.push_back(acc);
        }
      }
    }
  }
  return out;
}

TEST(OnnxQuant, ConvIntegerPadsWithTheZeroPointAndHandlesGroups) {
  const Tensor x = RandomInts<uint8_t>(DType::kU8, {2, 4, 5, 6}, 31, 0, 255);
  const Tensor w = RandomInts<uint8_t>(DType::kU8, {6, 2, 3, 3}, 32, 0, 255);
  const std::vector<int> zw = {0, 255, 128, 3, 100, 7};
  for (bool zx_constant : {false, true}) {
    int64_t oh = 0, ow = 0;
    const std::vector<int32_t> want = ReferenceConv(x, w, 131, zw, 2, 2, 1, 1, &oh, &ow);
    Model model{"ConvInteger",
                {{"x", x},
                 {"w", w, true},
                 {"zx", Quantized(DType::kU8, {}, {131}), zx_constant},
                 {"zw", Quantized(DType::kU8, {6}, zw), true}},
                1,
                {{"group", 2}},
                {{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}}};
    ExpectBits(model, Make<int32_t>(DType::kI32, {2, 6, oh, ow}, want));
  }
  // i8 weights, dilation, no zero points.
  const Tensor wi = RandomInts<int8_t>(DType::kI8, {3, 4, 2, 2}, 33, -128, 127);
  int64_t oh = 0, ow = 0;
  const std::vector<int32_t> want = ReferenceConv(x, wi, 0, {0}, 1, 1, 0, 2, &oh, &ow);
  Model model{"ConvInteger", {{"x", x}, {"w", wi}}, 1, {}, {{"dilations", {2, 2}}}};
  ExpectBits(model, Make<int32_t>(DType::kI32, {2, 3, oh, ow}, want));
}

// 180 x 180 outputs of a 64-channel 3x3 window: an im2col matrix of 18.7 Mi elements, built in
// two bands of output rows (161 and 19; ops_quant.cc, kIm2colBandElements is 16 Mi), with a
// run-time x zero point and per-channel w zero points, so every correction term is banded too.
TEST(OnnxQuant, ConvIntegerOverManyOutputRowsIsBuiltInBands) {
  const Tensor x = RandomInts<uint8_t>(DType::kU8, {1, 64, 180, 180}, 35, 0, 255);
  const Tensor w = RandomInts<uint8_t>(DType::kU8, {3, 64, 3, 3}, 36, 0, 255);
  const std::vector<int> zw = {9, 128, 250};
  int64_t oh = 0, ow = 0;
  const std::vector<int32_t> want = ReferenceConv(x, w, 77, zw, 1, 1, 1, 1, &oh, &ow);
  Model model{
      "ConvInteger",
      {{"x", x}, {"w", w, true}, {"zx", Quantized(DType::kU8, {}, {77})}, {"zw", Quantized(DType::kU8, {3}, zw), true}},
      1,
      {},
      {{"pads", {1, 1, 1, 1}}}};
  ExpectBits(model, Make<int32_t>(DType::kI32, {1, 3, oh, ow}, want));
}

TEST(OnnxQuant, QLinearConvAddsTheBiasAndRequantizesPerChannel) {
  const Tensor x = RandomInts<int8_t>(DType::kI8, {1, 3, 4, 4}, 41, -128, 127);
  const Tensor w = RandomInts<int8_t>(DType::kI8, {2, 3, 3, 3}, 42, -128, 127);
  const std::vector<int32_t> bias = {1000, -70000};
  const std::vector<float> sw = {0.004f, 0.002f};
  const float sx = 0.05f, sy = 0.3f;
  int64_t oh = 0, ow = 0;
  const std::vector<int32_t> acc = ReferenceConv(x, w, -4, {0}, 1, 1, 1, 1, &oh, &ow);
  std::vector<int> want;
  for (size_t i = 0; i < acc.size(); ++i) {
    const size_t o = i / static_cast<size_t>(oh * ow);
    const float mult = (sx * sw[o]) / sy;
    want.push_back(
        SaturateTo(RoundHalfEven(static_cast<float>(acc[i] + bias[o]) * mult) + static_cast<float>(17), DType::kU8));
  }
  Model model{"QLinearConv",
              {{"x", x},
               {"sx", Make<float>(DType::kF32, {}, {sx})},
               {"zx", Quantized(DType::kI8, {}, {-4})},
               {"w", w, true},
               {"sw", Make<float>(DType::kF32, {2}, sw), true},
               {"zw", Quantized(DType::kI8, {}, {0}), true},
               {"sy", Make<float>(DType::kF32, {}, {sy})},
               {"zy", Quantized(DType::kU8, {}, {17})},
               {"bias", Make<int32_t>(DType::kI32, {2}, bias), true}},
              1,
              {},
              {{"pads", {1, 1, 1, 1}}}};
  ExpectBits(model, Quantized(DType::kU8, {1, 2, oh, ow}, want));
}

// i8 and u8: the lowerings use only ops the CUDA backends implement (matmul_i8 on int8 MMA;
// casts, sub, pad and where on u8), so every backend configuration, cuda-emu included, must
// give the CPU's bytes on every output.
TEST(OnnxQuant, AllQuantizedModelsGiveOneResultOnEveryBackend) {
  const Tensor x = RandomInts<int8_t>(DType::kI8, {1, 3, 5, 5}, 51, -128, 127);
  const Tensor a = RandomInts<int8_t>(DType::kI8, {5, 40}, 52, -128, 127);
  const Tensor f = consensor::testing::RandomF32({4, 7}, 53, 9.0f);
  const std::vector<Model> models = {
      {"ConvInteger",
       {{"x", x},
        {"w", RandomInts<int8_t>(DType::kI8, {4, 3, 3, 3}, 54, -128, 127), true},
        {"zx", Quantized(DType::kI8, {}, {-7})},
        {"zw", Quantized(DType::kI8, {4}, {0, 1, -128, 127}), true}},
       1,
       {},
       {{"pads", {1, 0, 1, 2}}}},
      {"QLinearMatMul",
       {{"a", a},
        {"sa", Make<float>(DType::kF32, {}, {0.03f})},
        {"za", Quantized(DType::kI8, {}, {5})},
        {"b", RandomInts<int8_t>(DType::kI8, {40, 6}, 55, -128, 127), true},
        {"sb", Make<float>(DType::kF32, {}, {0.02f}), true},
        {"zb", Quantized(DType::kI8, {}, {-1}), true},
        {"sy", Make<float>(DType::kF32, {}, {0.9f})},
        {"zy", Quantized(DType::kI8, {}, {3})}}},
      {"QuantizeLinear",
       {{"x", f}, {"s", Make<float>(DType::kF32, {}, {0.5f})}, {"z", Quantized(DType::kI8, {}, {4})}}},
      // u8 (as published dynamically quantized models use it).
      {"ConvInteger",
       {{"x", RandomInts<uint8_t>(DType::kU8, {1, 3, 5, 5}, 56, 0, 255)},
        {"w", RandomInts<uint8_t>(DType::kU8, {4, 3, 3, 3}, 57, 0, 255), true},
        {"zx", Quantized(DType::kU8, {}, {131})},
        {"zw", Quantized(DType::kU8, {4}, {0, 1, 128, 255}), true}},
       1,
       {},
       {{"pads", {1, 0, 1, 2}}}},
      {"MatMulInteger",
       {{"a", RandomInts<uint8_t>(DType::kU8, {2, 5, 40}, 58, 0, 255)},
        {"b", RandomInts<int8_t>(DType::kI8, {40, 6}, 62, -128, 127), true},
        {"za", Quantized(DType::kU8, {5}, {0, 9, 128, 200, 255})}}},
      {"QLinearMatMul",
       {{"a", RandomInts<uint8_t>(DType::kU8, {5, 40}, 59, 0, 255)},
        {"sa", Make<float>(DType::kF32, {}, {0.03f})},
        {"za", Quantized(DType::kU8, {}, {128})},
        {"b", RandomInts<uint8_t>(DType::kU8, {40, 6}, 60, 0, 255), true},
        {"sb", Make<float>(DType::kF32, {}, {0.02f}), true},
        {"zb", Quantized(DType::kU8, {}, {3}), true},
        {"sy", Make<float>(DType::kF32, {}, {0.9f})},
        {"zy", Quantized(DType::kU8, {}, {100})}}},
      {"QuantizeLinear",
       {{"x", f}, {"s", Make<float>(DType::kF32, {}, {0.05f})}, {"z", Quantized(DType::kU8, {}, {128})}}},
      {"DequantizeLinear",
       {{"x", RandomInts<uint8_t>(DType::kU8, {4, 7}, 61, 0, 255)},
        {"s", Make<float>(DType::kF32, {7}, {0.5f, 0.25f, 3.0f, 1e-3f, 7.0f, 0.1f, 2.0f})},
        {"z", Quantized(DType::kU8, {7}, {0, 1, 128, 255, 7, 64, 200})}},
       1,
       {{"axis", 1}}},
      {"DynamicQuantizeLinear", {{"x", f}}, 3},
  };
  for (const Model& m : models) {
    auto want = RunModel(m, 1);
    ASSERT_TRUE(want.ok()) << m.op << ": " << want.status().message();
    auto imported = ImportOnnx(Build(m), {});
    ASSERT_TRUE(imported.ok());
    MemoryBlobSource blobs;
    if (!imported->weights.empty()) blobs.Add(imported->weights);
    auto program = CompileGraph(imported->graph, &blobs, Limits{});
    ASSERT_TRUE(program.ok());
    std::map<std::string, Tensor> feeds;
    for (const Arg& arg : m.args) {
      if (!arg.initializer) feeds.emplace(arg.name, arg.value);
    }
    for (const auto& config : consensor::testing::AvailableBackends()) {
      auto backend = kernels::CreateBackend(config);
      ASSERT_TRUE(backend.ok()) << config.name;
      auto loaded = LoadedProgram::Load(*program, backend->get());
      ASSERT_TRUE(loaded.ok()) << m.op << " " << config.name << ": " << loaded.status().message();
      auto r = (*loaded)->Run(feeds);
      ASSERT_TRUE(r.ok()) << m.op << " " << config.name << ": " << r.status().message();
      ASSERT_EQ(r->outputs.size(), want->size()) << m.op;
      for (size_t i = 0; i < want->size(); ++i) {
        const Tensor& y = r->outputs[i].tensor;
        ASSERT_EQ(y.dtype(), want->at(i).dtype()) << m.op << " output " << i;
        ASSERT_EQ(y.shape(), want->at(i).shape()) << m.op << " output " << i;
        EXPECT_EQ(0, std::memcmp(y.data(), want->at(i).data(), static_cast<size_t>(y.byte_size())))
            << m.op << " output " << i << " " << config.name << " " << config.isa << " x" << config.threads;
      }
    }
  }
}

TEST(OnnxQuant, BadScalesAndZeroPointsAreRefusedAtImport) {
  auto expect_error = [](const Model& m, StatusCode code, const std::string& phrase) {
    testing::ExpectRefusedAtImport(Build(m), code, "quant", phrase);
  };
  const Tensor x = Make<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor u8 = Quantized(DType::kU8, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor f1 = Make<float>(DType::kF32, {}, {1.0f});
  expect_error({"QuantizeLinear", {{"x", x}, {"s", Quantized(DType::kU8, {}, {1})}}}, StatusCode::kInvalidArgument,
               "y_scale must be f32, got u8");
  expect_error({"QuantizeLinear", {{"x", x}, {"s", Make<float>(DType::kF32, {2}, {1, 2})}}},
               StatusCode::kInvalidArgument, "y_scale has shape [2]; it must be a scalar");
  expect_error({"QuantizeLinear", {{"x", x}, {"s", f1}, {"z", Make<int32_t>(DType::kI32, {}, {0})}}},
               StatusCode::kUnimplemented, "y_zero_point dtype i32");
  expect_error({"QuantizeLinear", {{"x", x}, {"s", Make<float>(DType::kF32, {3}, {1, 2, 3})}}, 1, {{"axis", 0}}},
               StatusCode::kInvalidArgument,
               "y_scale has shape [3]; it must be a scalar or a one-element 1-D tensor or [2]");
  expect_error({"DequantizeLinear", {{"x", u8}, {"s", f1}, {"z", Quantized(DType::kI8, {}, {0})}}},
               StatusCode::kInvalidArgument, "x_zero_point must be u8, got i8");
  expect_error(
      {"MatMulInteger",
       {{"a", u8}, {"b", Quantized(DType::kU8, {3, 2}, {1, 2, 3, 4, 5, 6})}, {"za", Quantized(DType::kI8, {}, {0})}}},
      StatusCode::kInvalidArgument, "a_zero_point must be u8, got i8");
  expect_error({"MatMulInteger", {{"a", x}, {"b", u8}}}, StatusCode::kUnimplemented, "operand dtypes f32 x u8");
  expect_error({"ConvInteger",
                {{"x", Quantized(DType::kU8, {1, 1, 2, 2}, {1, 2, 3, 4})},
                 {"w", Quantized(DType::kU8, {1, 1, 1, 1}, {1})},
                 {"zx", Quantized(DType::kU8, {1, 1}, {0})}}},
               StatusCode::kInvalidArgument, "x_zero_point has shape [1, 1]");
  const Tensor x4 = Quantized(DType::kU8, {1, 1, 2, 2}, {1, 2, 3, 4});
  expect_error({"ConvInteger",
                {{"x", x4}, {"w", Quantized(DType::kU8, {1, 1, 1, 1}, {1})}},
                1,
                {},
                {{"pads", {0, 0, 4000000000000, 0}}}},
               StatusCode::kInvalidArgument, "pads must be in [0, ");
  expect_error({"ConvInteger",
                {{"x", x4}, {"w", Quantized(DType::kU8, {1, 1, 1, 1}, {1})}},
                1,
                {},
                {{"pads", {0, 0, 100000, 100000}}}},
               StatusCode::kInvalidArgument, "exceeds the element cap");
  // The padded input fits the cap, one output row of its im2col matrix (30,000,001 x 9) does not.
  expect_error({"ConvInteger",
                {{"x", Quantized(DType::kU8, {1, 1, 3, 2}, {1, 2, 3, 4, 5, 6})},
                 {"w", Quantized(DType::kU8, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}},
                1,
                {},
                {{"pads", {0, 0, 0, 30000000}}}},
               StatusCode::kInvalidArgument, "the im2col matrix of one output row, 30000000 x 9 per image");
  expect_error({"ConvInteger",
                {{"x", x4}, {"w", Quantized(DType::kU8, {1, 1, 2, 2}, {1, 2, 3, 4})}},
                1,
                {},
                {{"dilations", {4611686018427387904, 1}}}},
               StatusCode::kInvalidArgument, "strides and dilations must be in [1, 4096]");
  expect_error({"ConvInteger", {{"x", x4}, {"w", Quantized(DType::kU8, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}}},
               StatusCode::kInvalidArgument, "the kernel is larger than the padded input");
  expect_error({"ConvInteger", {{"x", x4}, {"w", Quantized(DType::kU8, {1, 2, 1, 1}, {1, 2})}}},
               StatusCode::kInvalidArgument, "does not fit X");
  expect_error({"QLinearConv",
                {{"x", Quantized(DType::kU8, {1, 1, 2, 2}, {1, 2, 3, 4})},
                 {"sx", f1},
                 {"zx", Quantized(DType::kU8, {}, {0})},
                 {"w", Quantized(DType::kU8, {2, 1, 1, 1}, {1, 2})},
                 {"sw", f1},
                 {"zw", Quantized(DType::kU8, {}, {0})},
                 {"sy", f1},
                 {"zy", Quantized(DType::kU8, {}, {0})},
                 {"bias", Make<float>(DType::kF32, {2}, {1, 2})}}},
               StatusCode::kInvalidArgument, "B must be i32 [2], got f32 [2]");
}

}  // namespace
}  // namespace consensor::executor
