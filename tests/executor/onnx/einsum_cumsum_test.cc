// ONNX Einsum, CumSum, Compress, ReverseSequence, MeanVarianceNormalization and MaxPool on
// u8 / i8 (docs/DETERMINISM.md 4.6a and 6.8a): each imported model's outputs are recomputed
// from the spec's text (fma chains, canonical sums, sequential running sums) and compared bit
// for bit at 1, 2 and 8 threads; bad equations, axes and conditions give a named error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "kernels/reduction_order.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::RandomF32;
using consensor::testing::RunOnnxAtThreads;
using consensor::testing::RunOnnxModel;
using Ints = std::vector<int64_t>;

using Input = consensor::testing::OnnxInput;

// A one-node model at opset 17 with the output's type declared.
std::vector<uint8_t> OneNode(const std::string& op, const std::vector<Input>& inputs,
                             const std::map<std::string, consensor::testing::OnnxAttr>& attrs, int32_t out_elem) {
  return consensor::testing::OneNodeModel(op, inputs, attrs, /*opset=*/17, out_elem);
}

std::vector<uint8_t> Bytes(const Tensor& t) { return {t.data(), t.data() + t.byte_size()}; }

// Runs at 1, 2 and 8 threads and expects `want`'s dtype, shape and bytes every time.
void ExpectBits(const std::vector<uint8_t>& model, const std::map<std::string, Tensor>& inputs, const Tensor& want,
                const std::map<std::string, Tensor>& bound = {}) {
  const std::vector<int> threads = {1, 2, 8};
  auto got = RunOnnxAtThreads(model, inputs, threads, bound);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), threads.size());
  for (size_t i = 0; i < threads.size(); ++i) {
    EXPECT_EQ((*got)[i].dtype(), want.dtype());
    EXPECT_EQ((*got)[i].shape(), want.shape());
    EXPECT_EQ(Bytes((*got)[i]), Bytes(want)) << "threads " << threads[i];
  }
}

Tensor I64(const Shape& s, const Ints& v) { return Tensor::FromVector<int64_t>(DType::kI64, s, v); }

constexpr int32_t kF32 = onnx::TensorProto::FLOAT;
constexpr int32_t kF64 = onnx::TensorProto::DOUBLE;
constexpr int32_t kI64 = onnx::TensorProto::INT64;
constexpr int32_t kI32 = onnx::TensorProto::INT32;

// --- Einsum ---

TEST(OnnxEinsum, BatchMatMulIsTheFmaChainOverTheContractedLabel) {
  const Tensor a = RandomF32({2, 3, 7}, 1, 3.0f), b = RandomF32({2, 7, 4}, 2, 3.0f);
  Tensor want(DType::kF32, {2, 3, 4});
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t k = 0; k < 4; ++k) {
        float acc = 0.0f;
        for (int64_t j = 0; j < 7; ++j) {
          acc = std::fma(a.data_as<float>()[(n * 3 + i) * 7 + j], b.data_as<float>()[(n * 7 + j) * 4 + k], acc);
        }
        want.data_as<float>()[(n * 3 + i) * 4 + k] = acc;
      }
    }
  }
  auto model = OneNode("Einsum", {{"a", kF32, {2, 3, 7}}, {"b", kF32, {2, 7, 4}}},
                       {{"equation", std::string("bij, bjk -> bik")}}, kF32);
  ExpectBits(model, {{"a", a}, {"b", b}}, want);
}

TEST(OnnxEinsum, ThreeOperandsContractLeftToRight) {
  // ij,jk,kl->il is (A B) C: T = fma chain over j, then the chain over k of T and C.
  const Tensor a = RandomF32({3, 5}, 3, 2.0f), b = RandomF32({5, 4}, 4, 2.0f), c = RandomF32({4, 2}, 5, 2.0f);
  std::vector<float> t(12);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 4; ++k) {
      float acc = 0.0f;
      for (int j = 0; j < 5; ++j) acc = std::fma(a.data_as<float>()[i * 5 + j], b.data_as<float>()[j * 4 + k], acc);
      t[i * 4 + k] = acc;
    }
  }
  Tensor want(DType::kF32, {3, 2});
  for (int i = 0; i < 3; ++i) {
    for (int l = 0; l < 2; ++l) {
      float acc = 0.0f;
      for (int k = 0; k < 4; ++k) acc = std::fma(t[i * 4 + k], c.data_as<float>()[k * 2 + l], acc);
      want.data_as<float>()[i * 2 + l] = acc;
    }
  }
  auto model = OneNode("Einsum", {{"a", kF32, {3, 5}}, {"b", kF32, {5, 4}}, {"c", kF32, {4, 2}}},
                       {{"equation", std::string("ij,jk,kl->il")}}, kF32);
  ExpectBits(model, {{"a", a}, {"b", b}, {"c", c}}, want);
}

TEST(OnnxEinsum, SumsDiagonalsTransposesAndOuterProducts) {
  const Tensor x = RandomF32({3, 70}, 6, 100.0f);
  // ij->i: the canonical sum of each row.
  Tensor sums(DType::kF32, {3});
  for (int i = 0; i < 3; ++i) sums.data_as<float>()[i] = kernels::CanonicalSumOfArray(x.data_as<float>() + i * 70, 70);
  ExpectBits(OneNode("Einsum", {{"x", kF32, {3, 70}}}, {{"equation", std::string("ij->i")}}, kF32), {{"x", x}}, sums);
  // ij->ji and the implicit ji (output letters in ASCII order: ij): copies.
  Tensor tr(DType::kF32, {70, 3});
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 70; ++j) tr.data_as<float>()[j * 3 + i] = x.data_as<float>()[i * 70 + j];
  }
  ExpectBits(OneNode("Einsum", {{"x", kF32, {3, 70}}}, {{"equation", std::string("ij->ji")}}, kF32), {{"x", x}}, tr);
  ExpectBits(OneNode("Einsum", {{"x", kF32, {3, 70}}}, {{"equation", std::string("ji")}}, kF32), {{"x", x}}, tr);
  ExpectBits(OneNode("Einsum", {{"x", kF32, {3, 70}}}, {{"equation", std::string("ij")}}, kF32), {{"x", x}}, x);
  // ...ii->...i: the diagonal of each matrix, bits copied.
  const Tensor m = RandomF32({2, 4, 4}, 7);
  Tensor diag(DType::kF32, {2, 4});
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 4; ++i) diag.data_as<float>()[b * 4 + i] = m.data_as<float>()[(b * 4 + i) * 4 + i];
  }
  ExpectBits(OneNode("Einsum", {{"m", kF32, {2, 4, 4}}}, {{"equation", std::string("...ii ->...i")}}, kF32), {{"m", m}},
             diag);
  // i,j->ij: one rounded product each, so a -0 product stays -0.
  Tensor u = Tensor::FromVector<float>(DType::kF32, {2}, {-0.0f, 3.0f});
  Tensor v = Tensor::FromVector<float>(DType::kF32, {3}, {1.0f, 0.1f, -2.0f});
  Tensor outer(DType::kF32, {2, 3});
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) outer.data_as<float>()[i * 3 + j] = u.data_as<float>()[i] * v.data_as<float>()[j];
  }
  ExpectBits(OneNode("Einsum", {{"u", kF32, {2}}, {"v", kF32, {3}}}, {{"equation", std::string("i,j->ij")}}, kF32),
             {{"u", u}, {"v", v}}, outer);
  EXPECT_TRUE(std::signbit(outer.data_as<float>()[0]));
}

TEST(OnnxEinsum, Float64InnerProductAndWrappingIntegers) {
  Tensor a(DType::kF64, {5}), b(DType::kF64, {5});
  for (int i = 0; i < 5; ++i) {
    a.data_as<double>()[i] = 0.1 * (i + 1) - 0.25;
    b.data_as<double>()[i] = 1.0 / (i + 3);
  }
  double acc = 0.0;
  for (int i = 0; i < 5; ++i) acc = std::fma(a.data_as<double>()[i], b.data_as<double>()[i], acc);
  ExpectBits(OneNode("Einsum", {{"a", kF64, {5}}, {"b", kF64, {5}}}, {{"equation", std::string("i,i")}}, kF64),
             {{"a", a}, {"b", b}}, Tensor::FromVector<double>(DType::kF64, {}, {acc}));
  // i32 ij,jk->ik wraps modulo 2^32.
  Tensor x = Tensor::FromVector<int32_t>(DType::kI32, {1, 2}, {0x40000000, 3});
  Tensor y = Tensor::FromVector<int32_t>(DType::kI32, {2, 1}, {4, -5});
  const int32_t want = static_cast<int32_t>(static_cast<uint32_t>(0x40000000) * 4u + static_cast<uint32_t>(-15));
  ExpectBits(
      OneNode("Einsum", {{"x", kI32, {1, 2}}, {"y", kI32, {2, 1}}}, {{"equation", std::string("ij,jk->ik")}}, kI32),
      {{"x", x}, {"y", y}}, Tensor::FromVector<int32_t>(DType::kI32, {1, 1}, {want}));
}

TEST(OnnxEinsum, BadEquationsAreNamedErrors) {
  struct Case {
    std::string equation;
    std::vector<Input> inputs;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{"a", kF32, {2, 3}}}},                       // two terms, one input
      {"i$->i", {{"a", kF32, {2, 3}}}},                           // invalid character
      {"ij->k", {{"a", kF32, {2, 3}}}},                           // output label in no input
      {"ij->ii", {{"a", kF32, {2, 3}}}},                          // repeated output label
      {"i...j...->ij", {{"a", kF32, {2, 3, 4}}}},                 // two ellipses
      {"ij->i->j", {{"a", kF32, {2, 3}}}},                        // two arrows
      {"ijk->i", {{"a", kF32, {2, 3}}}},                          // rank mismatch
      {"ij,jk->ik", {{"a", kF32, {2, 3}}, {"b", kF32, {4, 2}}}},  // j is 3 and 4
      {"ii->i", {{"a", kF32, {2, 3}}}},                           // diagonal of a non-square
      {"", {{"a", kF32, {2, 3}}}},                                // empty
      {"i.j->i", {{"a", kF32, {2, 3}}}},                          // a lone dot
  };
  for (const Case& c : cases) {
    auto r = ImportOnnx(OneNode("Einsum", c.inputs, {{"equation", c.equation}}, kF32), {});
    ASSERT_FALSE(r.ok()) << c.equation;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.equation << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("node"), std::string::npos) << r.status().ToString();
  }
}

// --- CumSum ---

TEST(OnnxCumSum, EveryFlagAndAxisIsTheSequentialChain) {
  const Tensor x = RandomF32({3, 5}, 8, 1e4f);
  for (int64_t axis : {0, 1, -1}) {
    for (int64_t exclusive : {0, 1}) {
      for (int64_t reverse : {0, 1}) {
        const int64_t a = axis < 0 ? axis + 2 : axis;
        Tensor want(DType::kF32, {3, 5});
        const int64_t n = a == 0 ? 3 : 5, lines = a == 0 ? 5 : 3;
        for (int64_t line = 0; line < lines; ++line) {
          float acc = -0.0f;
          for (int64_t step = 0; step < n; ++step) {
            const int64_t k = reverse ? n - 1 - step : step;
            const int64_t at = a == 0 ? k * 5 + line : line * 5 + k;
            const float before = step == 0 ? 0.0f : acc;
            acc = acc + x.data_as<float>()[at];
            want.data_as<float>()[at] = exclusive ? before : acc;
          }
        }
        auto model = OneNode("CumSum", {{"x", kF32, {3, 5}}, {"axis", kI64, {}}},
                             {{"exclusive", exclusive}, {"reverse", reverse}}, kF32);
        ExpectBits(model, {{"x", x}}, want, {{"axis", I64({}, {axis})}});
      }
    }
  }
}

TEST(OnnxCumSum, BadAxesAreRefused) {
  auto model = OneNode("CumSum", {{"x", kF32, {3, 5}}, {"axis", kI64, {}}}, {}, kF32);
  // A run-time axis: the importer asks for it by the phrase the bind retry looks for.
  auto r = ImportOnnx(model, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("computed at run time"), std::string::npos) << r.status().ToString();
  OnnxImportOptions o;
  o.constant_inputs = {{"axis", I64({}, {2})}};
  r = ImportOnnx(model, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  auto two = OneNode("CumSum", {{"x", kF32, {3, 5}}, {"axis", kI64, {2}}}, {}, kF32);
  o.constant_inputs = {{"axis", I64({2}, {0, 1})}};
  r = ImportOnnx(two, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  auto flag = OneNode("CumSum", {{"x", kF32, {3, 5}}, {"axis", kI64, {}}}, {{"reverse", int64_t{2}}}, kF32);
  o.constant_inputs = {{"axis", I64({}, {0})}};
  r = ImportOnnx(flag, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
}

// --- Compress, ReverseSequence ---

Tensor Bools(const Shape& s, const std::vector<uint8_t>& v) { return Tensor::FromVector<uint8_t>(DType::kBool, s, v); }

TEST(OnnxCompress, ConstantConditionGathersTheTruePositions) {
  const Tensor x = RandomF32({3, 4}, 9);
  auto with_axis =
      OneNode("Compress", {{"x", kF32, {3, 4}}, {"c", onnx::TensorProto::BOOL, {3}}}, {{"axis", int64_t{-1}}}, kF32);
  Tensor want(DType::kF32, {3, 2});
  for (int i = 0; i < 3; ++i) {
    want.data_as<float>()[i * 2] = x.data_as<float>()[i * 4 + 0];
    want.data_as<float>()[i * 2 + 1] = x.data_as<float>()[i * 4 + 2];
  }
  ExpectBits(with_axis, {{"x", x}}, want, {{"c", Bools({3}, {1, 0, 1})}});
  auto flat = OneNode("Compress", {{"x", kF32, {3, 4}}, {"c", onnx::TensorProto::BOOL, {5}}}, {}, kF32);
  ExpectBits(flat, {{"x", x}},
             Tensor::FromVector<float>(DType::kF32, {2}, {x.data_as<float>()[1], x.data_as<float>()[4]}),
             {{"c", Bools({5}, {0, 1, 0, 0, 1})}});
  // Nothing selected: an empty output.
  ExpectBits(flat, {{"x", x}}, Tensor(DType::kF32, {0}), {{"c", Bools({5}, {0, 0, 0, 0, 0})}});
  // A run-time condition is refused with the reason; a true entry past the end is invalid.
  auto r = ImportOnnx(flat, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("output shape depends on its values"), std::string::npos);
  auto wide =
      OneNode("Compress", {{"x", kF32, {3, 4}}, {"c", onnx::TensorProto::BOOL, {5}}}, {{"axis", int64_t{1}}}, kF32);
  OnnxImportOptions o;
  o.constant_inputs = {{"c", Bools({5}, {0, 0, 0, 0, 1})}};
  r = ImportOnnx(wide, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
}

TEST(OnnxReverseSequence, RunTimeAndConstantLengths) {
  const Tensor x = RandomF32({4, 3, 2}, 10);  // time_axis 0, batch_axis 1: T = 4, B = 3
  const Ints lens = {4, 2, 0};
  Tensor want(DType::kF32, {4, 3, 2});
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t src = t < lens[b] ? lens[b] - 1 - t : t;
      for (int r = 0; r < 2; ++r)
        want.data_as<float>()[(t * 3 + b) * 2 + r] = x.data_as<float>()[(src * 3 + b) * 2 + r];
    }
  }
  auto model = OneNode("ReverseSequence", {{"x", kF32, {4, 3, 2}}, {"lens", kI64, {3}}},
                       {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{0}}}, kF32);
  ExpectBits(model, {{"x", x}, {"lens", I64({3}, lens)}}, want);
  ExpectBits(model, {{"x", x}}, want, {{"lens", I64({3}, lens)}});
  // A length above T fails the task (run time) or the import (constant), never reads out of bounds.
  auto r = RunOnnxModel(model, {{"x", x}, {"lens", I64({3}, {5, 1, 1})}});
  EXPECT_FALSE(r.ok());
  OnnxImportOptions o;
  o.constant_inputs = {{"lens", I64({3}, {1, 5, 1})}};
  auto imported = ImportOnnx(model, o);
  if (imported.ok()) {
    EXPECT_FALSE(RunOnnxModel(model, {{"x", x}}, 1, o.constant_inputs).ok());
  }
  auto same_axes = OneNode("ReverseSequence", {{"x", kF32, {4, 3, 2}}, {"lens", kI64, {3}}},
                           {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{0}}}, kF32);
  auto bad = ImportOnnx(same_axes, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

// --- MeanVarianceNormalization, MaxPool on u8 / i8 ---

TEST(OnnxMvn, IsTheFunctionBodyOpByOp) {
  const Tensor x = RandomF32({2, 3, 2, 2}, 11, 5.0f);
  Tensor want(DType::kF32, {2, 3, 2, 2});
  const float* d = x.data_as<float>();
  for (int c = 0; c < 3; ++c) {
    std::vector<float> terms, squares;
    for (int n = 0; n < 2; ++n) {
      for (int s = 0; s < 4; ++s) {
        const float v = d[(n * 3 + c) * 4 + s];
        terms.push_back(v);
        squares.push_back(v * v);
      }
    }
    const float m = kernels::CanonicalSumOfArray(terms.data(), 8) / 8.0f;
    const float var = kernels::CanonicalSumOfArray(squares.data(), 8) / 8.0f - m * m;
    const float denom = std::sqrt(var) + 1e-9f;
    for (int n = 0; n < 2; ++n) {
      for (int s = 0; s < 4; ++s) {
        const int64_t at = (n * 3 + c) * 4 + s;
        want.data_as<float>()[at] = (d[at] - m) / denom;
      }
    }
  }
  ExpectBits(OneNode("MeanVarianceNormalization", {{"x", kF32, {2, 3, 2, 2}}}, {}, kF32), {{"x", x}}, want);
}

TEST(OnnxMaxPool, Uint8AndInt8AreTheIntegerMaximum) {
  for (int32_t elem : {static_cast<int32_t>(onnx::TensorProto::UINT8), static_cast<int32_t>(onnx::TensorProto::INT8)}) {
    const DType dt = elem == onnx::TensorProto::UINT8 ? DType::kU8 : DType::kI8;
    Tensor x(dt, {1, 2, 5, 4});
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data()[i] = static_cast<uint8_t>((i * 97 + 13) % 256);
    Tensor want(dt, {1, 2, 5, 4});
    for (int c = 0; c < 2; ++c) {
      for (int h = 0; h < 5; ++h) {
        for (int w = 0; w < 4; ++w) {
          int best = -1000;
          for (int dh = -1; dh <= 1; ++dh) {
            for (int dw = -1; dw <= 1; ++dw) {
              const int hh = h + dh, ww = w + dw;
              if (hh < 0 || hh >= 5 || ww < 0 || ww >= 4) continue;
              const uint8_t raw = x.data()[(c * 5 + hh) * 4 + ww];
              best =
                  std::max(best, dt == DType::kU8 ? static_cast<int>(raw) : static_cast<int>(static_cast<int8_t>(raw)));
            }
          }
          want.data()[(c * 5 + h) * 4 + w] = static_cast<uint8_t>(best);
        }
      }
    }
    ExpectBits(OneNode("MaxPool", {{"x", elem, {1, 2, 5, 4}}},
                       {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, elem),
               {{"x", x}}, want);
  }
}

}  // namespace
}  // namespace consensor::executor
