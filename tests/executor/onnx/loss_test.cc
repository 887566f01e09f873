// ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (docs/DETERMINISM.md 6.3):
// the expected bits are recomputed from the spec's text with the reference csum, at 1, 2
// and 8 threads; bad targets and attributes are refused with a named error.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "kernels/detmath.h"
#include "kernels/reduction_order.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

// Cases are designated initializers naming only the fields they change (GCC 12 warns about
// the others, which keep their defaults).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace consensor::executor {
namespace {

using consensor::testing::ImportAndCompileOnnx;
using consensor::testing::RandomF32;
using consensor::testing::RunOnCpu;

struct LossModel {
  std::string op = "NegativeLogLikelihoodLoss";
  Shape x_shape = {2, 4, 3};
  int32_t target_type = onnx::TensorProto::INT64;
  bool weight = false;
  std::optional<int64_t> ignore_index;
  std::string reduction = "mean";
  bool log_prob = false;
  // When set, the target is an initializer with these values instead of a graph input.
  std::optional<std::vector<int64_t>> constant_target;
};

std::vector<uint8_t> Build(const LossModel& m) {
  onnx::ModelProto model;
  auto* g = testing::StartOnnxModel(&model, 17);
  Shape t_shape = m.x_shape;
  if (t_shape.size() >= 2) t_shape.erase(t_shape.begin() + 1);
  testing::AddGraphInput(g, "x", onnx::TensorProto::FLOAT, m.x_shape);
  if (m.constant_target) {
    auto* t = g->add_initializer();
    t->set_name("t");
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : t_shape) t->add_dims(d);
    for (int64_t v : *m.constant_target) t->add_int64_data(v);
  } else {
    testing::AddGraphInput(g, "t", m.target_type, t_shape);
  }
  if (m.weight) testing::AddGraphInput(g, "w", onnx::TensorProto::FLOAT, {m.x_shape.size() >= 2 ? m.x_shape[1] : 1});
  auto* n = g->add_node();
  n->set_op_type(m.op);
  n->set_name("loss");
  n->add_input("x");
  n->add_input("t");
  if (m.weight) n->add_input("w");
  n->add_output("y");
  if (m.log_prob) n->add_output("log_prob");
  auto* r = n->add_attribute();
  r->set_name("reduction");
  r->set_type(onnx::AttributeProto::STRING);
  r->set_s(m.reduction);
  if (m.ignore_index) {
    auto* a = n->add_attribute();
    a->set_name("ignore_index");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*m.ignore_index);
  }
  for (const char* out : {"y", "log_prob"}) {
    if (std::string(out) == "log_prob" && !m.log_prob) continue;
    auto* o = g->add_output();
    o->set_name(out);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

StatusOr<std::vector<Tensor>> RunLoss(const LossModel& m, const std::map<std::string, Tensor>& inputs,
                                      int threads = 1) {
  ASSIGN_OR_RETURN(Program p, ImportAndCompileOnnx(Build(m)));
  ASSIGN_OR_RETURN(RunResult r, RunOnCpu(p, inputs, threads));
  std::vector<Tensor> out;
  for (const char* name : {"y", "log_prob"}) {
    for (const auto& o : r.outputs) {
      if (o.name == name) out.push_back(o.tensor);
    }
  }
  return out;
}

std::vector<uint32_t> Bits(const Tensor& t) {
  std::vector<uint32_t> b(static_cast<size_t>(t.num_elements()));
  if (!b.empty()) std::memcpy(b.data(), t.data(), b.size() * 4);
  return b;
}

uint32_t BitsOf(float f) { return std::bit_cast<uint32_t>(f); }

// DETERMINISM.md 6.3, step by step, on log-probabilities `lp`; a NaN is canonicalized as the
// kernels do (only the sign-and-quiet pattern is compared through BitsOf of a fresh NaN).
std::vector<float> SpecLoss(const Tensor& lp, const std::vector<int64_t>& t, const std::vector<float>* weight,
                            std::optional<int64_t> ii, const std::string& reduction) {
  const Shape& s = lp.shape();
  const int64_t classes = s[1];
  int64_t inner = 1;
  for (size_t i = 2; i < s.size(); ++i) inner *= s[i];
  const float* x = lp.data_as<float>();
  std::vector<float> loss(t.size()), w(t.size());
  int64_t kept = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) / inner, d = static_cast<int64_t>(i) % inner;
    const bool ignored = ii && t[i] == *ii;
    const int64_t c = ignored ? 0 : t[i];
    float l = -x[(n * classes + c) * inner + d];
    float wi = 1.0f;
    if (weight) {
      wi = (*weight)[static_cast<size_t>(c)];
      l = l * wi;
    }
    if (ignored) l = wi = 0.0f;
    kept += ignored ? 0 : 1;
    loss[i] = l;
    w[i] = wi;
  }
  if (reduction == "none") return loss;
  const int64_t count = static_cast<int64_t>(loss.size());
  const float total = kernels::CanonicalSumOfArray(loss.data(), count);
  if (reduction == "sum") return {total};
  if (weight) return {total / kernels::CanonicalSumOfArray(w.data(), count)};
  return {total / static_cast<float>(ii ? kept : count)};
}

// LogSoftmax over axis 1 as ONNX.md lowers it.
Tensor SpecLogSoftmax(const Tensor& x) {
  const Shape& s = x.shape();
  const int64_t classes = s[1], outer = s[0];
  int64_t inner = 1;
  for (size_t i = 2; i < s.size(); ++i) inner *= s[i];
  Tensor out(DType::kF32, s);
  const float* in = x.data_as<float>();
  float* o = out.data_as<float>();
  for (int64_t n = 0; n < outer; ++n) {
    for (int64_t d = 0; d < inner; ++d) {
      auto at = [&](int64_t c) { return (n * classes + c) * inner + d; };
      float m = in[at(0)];
      for (int64_t c = 1; c < classes; ++c) m = std::max(m, in[at(c)]);
      std::vector<float> e(static_cast<size_t>(classes));
      for (int64_t c = 0; c < classes; ++c) e[c] = detmath::exp(in[at(c)] - m);
      const float ls = detmath::log(kernels::CanonicalSumOfArray(e.data(), classes));
      for (int64_t c = 0; c < classes; ++c) o[at(c)] = (in[at(c)] - m) - ls;
    }
  }
  return out;
}

TEST(OnnxLoss, EveryReductionWeightAndIgnoreIndexGivesTheSpecsBits) {
  const Shape x_shape = {3, 5, 2, 3};  // N, C, d1, d2
  const Tensor x = RandomF32(x_shape, 7, 4.0f);
  // -1 and 7 are ignore indices below; every other value is a class.
  const std::vector<int64_t> t = {0, 4, -1, 2, 3, 1, 7, 0, 4, 4, 2, -1, 1, 1, 3, 0, 2, 4};
  const std::vector<float> weight = {0.5f, 2.0f, 1.25f, 0.1f, 3.0f};
  const Tensor w = Tensor::FromVector<float>(DType::kF32, {5}, weight);
  for (const std::string op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    const Tensor lp = op == "SoftmaxCrossEntropyLoss" ? SpecLogSoftmax(x) : x;
    for (const std::string reduction : {"none", "sum", "mean"}) {
      for (bool with_weight : {false, true}) {
        for (int64_t ii : {int64_t{-1}, int64_t{7}}) {
          // Ignoring -1 leaves 7 out of range and vice versa, so use only one of them.
          std::vector<int64_t> targets = t;
          for (auto& v : targets) {
            if (v == -1 || v == 7) v = ii;
          }
          LossModel m{.op = op, .x_shape = x_shape, .weight = with_weight, .ignore_index = ii, .reduction = reduction};
          m.log_prob = op == "SoftmaxCrossEntropyLoss";
          const std::vector<float> want = SpecLoss(lp, targets, with_weight ? &weight : nullptr, ii, reduction);
          std::map<std::string, Tensor> inputs = {{"x", x},
                                                  {"t", Tensor::FromVector<int64_t>(DType::kI64, {3, 2, 3}, targets)}};
          if (with_weight) inputs.emplace("w", w);
          for (int threads : {1, 2, 8}) {
            auto r = RunLoss(m, inputs, threads);
            ASSERT_TRUE(r.ok()) << r.status().message();
            const std::string what = op + " " + reduction + (with_weight ? " weighted" : "") + " ii " +
                                     std::to_string(ii) + " threads " + std::to_string(threads);
            ASSERT_EQ((*r)[0].num_elements(), static_cast<int64_t>(want.size())) << what;
            std::vector<uint32_t> want_bits(want.size());
            for (size_t i = 0; i < want.size(); ++i) want_bits[i] = BitsOf(want[i]);
            EXPECT_EQ(Bits((*r)[0]), want_bits) << what;
            if (reduction != "none") {
              EXPECT_EQ((*r)[0].shape(), Shape{}) << what;
            }
            if (m.log_prob) {
              ASSERT_EQ(r->size(), 2u) << what;
              EXPECT_EQ(Bits((*r)[1]), Bits(lp)) << what;
            }
          }
        }
      }
    }
  }
}

TEST(OnnxLoss, NoIgnoreIndexMeanIsTheMeanAndInt32TargetsWork) {
  const Tensor x = RandomF32({4, 3}, 11);
  const std::vector<int64_t> t = {2, 0, 1, 1};
  LossModel m{.x_shape = {4, 3}, .target_type = onnx::TensorProto::INT32};
  auto r = RunLoss(m, {{"x", x}, {"t", Tensor::FromVector<int32_t>(DType::kI32, {4}, {2, 0, 1, 1})}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Bits((*r)[0]), std::vector<uint32_t>{BitsOf(SpecLoss(x, t, nullptr, std::nullopt, "mean")[0])});
}

TEST(OnnxLoss, IgnoredTargetsAreZeroEvenOverAnInfinityAndAnAllIgnoredMeanIsNaN) {
  Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 2}, {INFINITY, 1.0f, std::nanf(""), 2.0f});
  const Tensor t = Tensor::FromVector<int64_t>(DType::kI64, {2}, {-3, -3});
  const Tensor w = Tensor::FromVector<float>(DType::kF32, {2}, {1.0f, 1.0f});
  {
    auto r = RunLoss({.x_shape = {2, 2}, .ignore_index = -3, .reduction = "none"}, {{"x", x}, {"t", t}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Bits((*r)[0]), (std::vector<uint32_t>{0u, 0u}));
  }
  {
    auto r = RunLoss({.x_shape = {2, 2}, .ignore_index = -3, .reduction = "sum"}, {{"x", x}, {"t", t}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Bits((*r)[0]), std::vector<uint32_t>{0u});
  }
  for (bool weighted : {false, true}) {
    std::map<std::string, Tensor> inputs = {{"x", x}, {"t", t}};
    if (weighted) inputs.emplace("w", w);
    auto r = RunLoss({.x_shape = {2, 2}, .weight = weighted, .ignore_index = -3, .reduction = "mean"}, inputs);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(std::isnan((*r)[0].data_as<float>()[0])) << weighted;
  }
}

TEST(OnnxLoss, OutOfRangeTargetsFailTheTaskAtRunTime) {
  const Tensor x = RandomF32({2, 3, 2}, 3);
  const Tensor w = Tensor::FromVector<float>(DType::kF32, {3}, {1, 2, 3});
  for (int64_t bad : {int64_t{3}, int64_t{-1}, int64_t{-4}, std::numeric_limits<int64_t>::max(),
                      std::numeric_limits<int64_t>::min()}) {
    for (bool weighted : {false, true}) {
      std::map<std::string, Tensor> inputs = {{"x", x},
                                              {"t", Tensor::FromVector<int64_t>(DType::kI64, {2, 2}, {0, 1, bad, 2})}};
      if (weighted) inputs.emplace("w", w);
      auto r = RunLoss({.x_shape = {2, 3, 2}, .weight = weighted, .ignore_index = 5, .reduction = "none"}, inputs);
      ASSERT_FALSE(r.ok()) << bad;
      EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();
    }
  }
  // The same target as the ignore_index is fine, however far out of range.
  auto ok = RunLoss(
      {.x_shape = {2, 3, 2}, .ignore_index = std::numeric_limits<int64_t>::min(), .reduction = "sum"},
      {{"x", x},
       {"t", Tensor::FromVector<int64_t>(DType::kI64, {2, 2}, {0, std::numeric_limits<int64_t>::min(), 2, 1})}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
}

TEST(OnnxLoss, BadOperandsAndAttributesAreRefusedNamingTheNode) {
  auto refused = [](const LossModel& m, StatusCode code, const std::string& phrase) {
    testing::ExpectRefusedAtImport(Build(m), code, "loss", phrase);
  };
  for (const std::string op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    refused({.op = op, .reduction = "avg"}, StatusCode::kInvalidArgument, "reduction 'avg'");
    refused({.op = op, .x_shape = {4}}, StatusCode::kInvalidArgument, "rank 2 or more");
    refused({.op = op, .target_type = onnx::TensorProto::FLOAT}, StatusCode::kInvalidArgument, "int32 or int64");
    refused({.op = op, .x_shape = {2, 4, 3}, .constant_target = std::vector<int64_t>{0, 1, 2, 3, 4, 0}},
            StatusCode::kInvalidArgument, "target 4 at flat position 4");
    refused({.op = op, .x_shape = {2, 4, 3}, .constant_target = std::vector<int64_t>{0, 1, 2, -1, 0, 0}},
            StatusCode::kInvalidArgument, "target -1 at flat position 3");
  }
  // A constant target equal to the ignore_index imports.
  LossModel ok{.x_shape = {2, 4, 3}, .ignore_index = -1, .constant_target = std::vector<int64_t>{0, 1, 2, -1, 3, 0}};
  EXPECT_TRUE(ImportOnnx(Build(ok), {}).ok());
  {
    // Target shape that does not match [N, d1, ...].
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    auto* g = model.mutable_graph();
    testing::AddGraphInput(g, "x", onnx::TensorProto::FLOAT, {2, 4, 3});
    testing::AddGraphInput(g, "t", onnx::TensorProto::INT64, {2, 4});
    testing::AddGraphInput(g, "w", onnx::TensorProto::FLOAT, {3});
    auto* n = g->add_node();
    n->set_op_type("NegativeLogLikelihoodLoss");
    n->set_name("loss");
    n->add_input("x");
    n->add_input("t");
    n->add_output("y");
    g->add_output()->set_name("y");
    std::string s = model.SerializeAsString();
    auto r = ImportOnnx(std::vector<uint8_t>(s.begin(), s.end()), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("needs [2, 3]"), std::string::npos) << r.status().message();
    // A weight of the wrong length.
    n->set_input(1, "t");
    g->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
    n->add_input("w");
    s = model.SerializeAsString();
    r = ImportOnnx(std::vector<uint8_t>(s.begin(), s.end()), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("weight has shape [3], needs [4]"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace consensor::executor
