// The quantize step of DynamicQuantizeLinear and QuantizeLinear (div, round, add of the zero
// point, saturating cast), fused at compilation into one cast that reads x, the scale and the
// zero point itself (docs/DETERMINISM.md 3.1, "Quantize in one pass"). The fused program must
// give the unfused lowering's bits (every output, the result root, and the traced run's trace
// root) on both CPU ISAs, with and without the AVX-512 loop, at 1, 2 and 8 threads, for u8 and
// i8 zero points, odd sizes, rounding ties, saturation, +-0, +-inf, NaN, scales of zero,
// negative and subnormal scales, all-zero and all-negative inputs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "kernels/cpu/quantize.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/fusion_testing.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

int32_t OnnxType(DType d) {
  switch (d) {
    case DType::kF32: return onnx::TensorProto::FLOAT;
    case DType::kU8: return onnx::TensorProto::UINT8;
    default: return onnx::TensorProto::INT8;
  }
}

// One node `op` over run-time graph inputs, with `outputs` outputs y0, y1, ...
std::vector<uint8_t> Model(const std::string& op, const std::vector<std::pair<std::string, Tensor>>& inputs,
                           int outputs) {
  onnx::ModelProto model;
  auto* g = consensor::testing::StartOnnxModel(&model, 13);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("quant");
  for (const auto& [name, value] : inputs) {
    n->add_input(name);
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(OnnxType(value.dtype()));
    auto* shape = tt->mutable_shape();
    for (int64_t d : value.shape()) shape->add_dim()->set_dim_value(d);
  }
  for (int i = 0; i < outputs; ++i) {
    const std::string name = "y" + std::to_string(i);
    n->add_output(name);
    g->add_output()->set_name(name);
  }
  std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

int CountQuantizes(const Program& p) {
  int n = 0;
  for (const Instruction& ins : p.fused_instructions)
    n += ins.op == kernels::Op::kCast && ins.inputs.size() == 3 ? 1 : 0;
  return n;
}

Tensor Scalar(DType d, float f32_value, int int_value) {
  Tensor t(d, {});
  if (d == DType::kF32) {
    std::memcpy(t.data(), &f32_value, 4);
  } else {
    t.data()[0] = static_cast<uint8_t>(int_value);
  }
  return t;
}

// Random values of magnitude up to `scale`, with the special values written over the first ones.
Tensor Values(const Shape& shape, uint32_t seed, float scale, const std::vector<float>& specials) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  float* v = t.data_as<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = dist(rng);
  for (size_t i = 0; i < specials.size() && static_cast<int64_t>(i) < t.num_elements(); ++i) v[i] = specials[i];
  return t;
}

void CheckFusedGivesUnfusedBits(const std::string& name, const std::vector<uint8_t>& model,
                                const std::map<std::string, Tensor>& inputs) {
  SCOPED_TRACE(name);
  Program program;
  ASSERT_NO_FATAL_FAILURE(testing::CompileOneNodeModel(model, OnnxImportOptions{}, &program));
  EXPECT_EQ(CountQuantizes(program), 1);
  testing::ExpectFusedListCoversEveryInstruction(program);
  RunResult want;
  ASSERT_NO_FATAL_FAILURE(testing::RunUnfusedReference(program, inputs, &want));
  for (const std::string isa : {"portable", "avx2"}) {
    if (isa == "avx2" && !kernels::cpu::CpuHasAvx2Fma()) continue;
    for (bool avx512 : {false, true}) {
      if (avx512 && isa == "portable") continue;
      kernels::cpu::SetQuantizeAvx512ForTesting(avx512);
      for (int threads : {1, 2, 8}) {
        SCOPED_TRACE(isa + (avx512 ? " with AVX-512" : "") + " at " + std::to_string(threads) + " threads");
        testing::ExpectFusedRunGivesReferenceBits(program, isa, threads, inputs, want);
      }
    }
    kernels::cpu::SetQuantizeAvx512ForTesting(true);
  }
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(QuantizeFusion, DynamicQuantizeLinearGivesTheUnfusedBits) {
  struct Case {
    std::string name;
    Shape shape;
    float scale;
    std::vector<float> specials;
    bool all_negative = false;
  };
  const std::vector<Case> cases = {
      // Large enough to split over 8 threads, an odd length, -0 and exact zeros.
      {"odd_large", {3, 7, 97, 101}, 6.0f, {-0.0f, 0.0f, 1e-30f, -1e-30f, 5.9f, -6.0f}},
      {"one_element", {1}, 1.0f, {0.75f}},
      {"seventeen", {17}, 1e4f, {}},
      // Huge values: the scale is large and every quotient stays in range.
      {"huge", {5, 33}, 3e38f, {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()}},
      // An infinity makes the scale infinite (x / inf is 0 or NaN); a NaN makes everything NaN.
      {"infinity", {4, 9}, 2.0f, {kInf, -1.0f}},
      {"nan", {4, 9}, 2.0f, {kNaN}},
      {"all_negative", {2, 50}, 3.0f, {}, true},
      {"all_zero", {2, 50}, 0.0f, {-0.0f}},
  };
  uint32_t seed = 2400;
  for (const Case& c : cases) {
    Tensor x = Values(c.shape, seed += 7, c.scale, c.specials);
    if (c.all_negative) {
      for (int64_t i = 0; i < x.num_elements(); ++i) x.data_as<float>()[i] = -std::fabs(x.data_as<float>()[i]) - 0.5f;
    }
    CheckFusedGivesUnfusedBits(c.name, Model("DynamicQuantizeLinear", {{"x", x}}, 3), {{"x", x}});
  }
}

TEST(QuantizeFusion, QuantizeLinearGivesTheUnfusedBits) {
  struct Case {
    std::string name;
    float scale;
    DType zero_type;
    int zero;
  };
  // x / s lands on ties (+-0.5, +-2.5, +-3.5), on values far beyond the range (saturation), on
  // +-0, +-inf and NaN; s = 0 makes inf and NaN quotients, a subnormal s overflows to inf.
  const std::vector<float> specials = {0.5f,   -0.5f,  1.5f,    -1.5f,  2.5f,   -2.5f,      3.5f,
                                       1e9f,   -1e9f,  -0.0f,   0.0f,   kInf,   -kInf,      kNaN,
                                       127.5f, 128.5f, -128.5f, 255.5f, 254.5f, 8388609.0f, -8388609.0f};
  const std::vector<Case> cases = {
      {"u8_unit", 1.0f, DType::kU8, 0},       {"u8_half_z200", 0.5f, DType::kU8, 200},
      {"i8_z_minus3", 1.0f, DType::kI8, -3},  {"i8_negative_scale", -0.25f, DType::kI8, 5},
      {"u8_zero_scale", 0.0f, DType::kU8, 7}, {"i8_subnormal_scale", 1e-45f, DType::kI8, 0},
  };
  uint32_t seed = 2500;
  for (const Case& c : cases) {
    Tensor x = Values({3, 1001}, seed += 11, 300.0f, specials);
    const Tensor s = Scalar(DType::kF32, c.scale, 0);
    const Tensor z = Scalar(c.zero_type, 0.0f, c.zero);
    CheckFusedGivesUnfusedBits(c.name, Model("QuantizeLinear", {{"x", x}, {"s", s}, {"z", z}}, 1),
                               {{"x", x}, {"s", s}, {"z", z}});
  }
}

}  // namespace
}  // namespace consensor::executor
