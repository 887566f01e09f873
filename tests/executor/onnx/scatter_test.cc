// ONNX ScatterElements, ScatterND and Scatter (docs/DETERMINISM.md 6.4): a naive reference of
// the spec (updates applied in ascending update index) at 1, 2 and 8 threads, and bad
// indices and attributes refused at import, naming the node.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
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

struct ScatterModel {
  std::string op = "ScatterElements";
  Shape data_shape;
  Shape index_shape;
  std::vector<int64_t> indices;  // an initializer
  Shape update_shape;
  std::optional<int64_t> axis;
  std::optional<std::string> reduction;
  int64_t opset = 17;
  bool indices_as_input = false;  // a graph input instead: known only at run time
};

std::vector<uint8_t> Build(const ScatterModel& m) {
  onnx::ModelProto model;
  auto* g = testing::StartOnnxModel(&model, m.opset);
  testing::AddGraphInput(g, "data", onnx::TensorProto::FLOAT, m.data_shape);
  testing::AddGraphInput(g, "updates", onnx::TensorProto::FLOAT, m.update_shape);
  if (m.indices_as_input) {
    testing::AddGraphInput(g, "indices", onnx::TensorProto::INT64, m.index_shape);
  } else {
    auto* t = g->add_initializer();
    t->set_name("indices");
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : m.index_shape) t->add_dims(d);
    for (int64_t v : m.indices) t->add_int64_data(v);
  }
  auto* n = g->add_node();
  n->set_op_type(m.op);
  n->set_name("scatter");
  n->add_input("data");
  n->add_input("indices");
  n->add_input("updates");
  n->add_output("y");
  if (m.axis) {
    auto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*m.axis);
  }
  if (m.reduction) {
    auto* a = n->add_attribute();
    a->set_name("reduction");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(*m.reduction);
  }
  auto* o = g->add_output();
  o->set_name("y");
  o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

StatusOr<Tensor> RunScatter(const ScatterModel& m, const Tensor& data, const Tensor& updates, int threads) {
  ASSIGN_OR_RETURN(Program p, ImportAndCompileOnnx(Build(m)));
  ASSIGN_OR_RETURN(RunResult r, RunOnCpu(p, {{"data", data}, {"updates", updates}}, threads));
  return r.outputs.at(0).tensor;
}

float Apply(const std::string& reduction, float a, float b) {
  if (reduction == "add") return a + b;
  if (reduction == "mul") return a * b;
  if (reduction == "max") return std::max(a, b);  // no NaN in these inputs
  if (reduction == "min") return std::min(a, b);
  return b;
}

int64_t Wrap(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

// The naive reference: every update in ascending index order, straight into the data.
std::vector<float> ReferenceElements(const ScatterModel& m, const Tensor& data, const Tensor& updates) {
  std::vector<float> out(data.data_as<float>(), data.data_as<float>() + data.num_elements());
  const Shape& ds = m.data_shape;
  const int64_t rank = static_cast<int64_t>(ds.size());
  const int64_t axis = Wrap(m.axis.value_or(0), rank);
  std::vector<int64_t> coord(static_cast<size_t>(rank), 0);
  for (size_t j = 0; j < m.indices.size(); ++j) {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d) {
      flat = flat * ds[d] + (d == axis ? Wrap(m.indices[j], ds[d]) : coord[d]);
    }
    out[flat] = Apply(m.reduction.value_or("none"), out[flat], updates.data_as<float>()[j]);
    for (int64_t d = rank - 1; d >= 0 && ++coord[d] == m.index_shape[d]; --d) coord[d] = 0;
  }
  return out;
}

std::vector<float> ReferenceNd(const ScatterModel& m, const Tensor& data, const Tensor& updates) {
  std::vector<float> out(data.data_as<float>(), data.data_as<float>() + data.num_elements());
  const int64_t k = m.index_shape.back();
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < m.data_shape.size(); ++d) slice *= m.data_shape[d];
  const size_t tuples = m.indices.size() / static_cast<size_t>(k);
  for (size_t t = 0; t < tuples; ++t) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) row = row * m.data_shape[j] + Wrap(m.indices[t * k + j], m.data_shape[j]);
    for (int64_t e = 0; e < slice; ++e) {
      float& o = out[row * slice + e];
      o = Apply(m.reduction.value_or("none"), o, updates.data_as<float>()[t * slice + e]);
    }
  }
  return out;
}

std::vector<uint32_t> Bits(const float* p, size_t n) {
  std::vector<uint32_t> b(n);
  if (n) std::memcpy(b.data(), p, n * 4);
  return b;
}

void ExpectSpecBits(const ScatterModel& m, bool nd) {
  const Tensor data = RandomF32(m.data_shape, 5, 3.0f);
  const Tensor updates = RandomF32(m.update_shape, 6, 3.0f);
  const std::vector<float> want = nd ? ReferenceNd(m, data, updates) : ReferenceElements(m, data, updates);
  for (int threads : {1, 2, 8}) {
    auto y = RunScatter(m, data, updates, threads);
    ASSERT_TRUE(y.ok()) << m.op << " " << m.reduction.value_or("none") << ": " << y.status().message();
    EXPECT_EQ(y->shape(), m.data_shape);
    EXPECT_EQ(Bits(y->data_as<float>(), static_cast<size_t>(y->num_elements())), Bits(want.data(), want.size()))
        << m.op << " " << m.reduction.value_or("none") << " threads " << threads;
  }
}

TEST(OnnxScatter, ElementsAppliesDuplicatesInAscendingUpdateOrder) {
  for (std::optional<std::string> reduction :
       {std::optional<std::string>{}, std::optional<std::string>{"none"}, std::optional<std::string>{"add"},
        std::optional<std::string>{"mul"}, std::optional<std::string>{"max"}, std::optional<std::string>{"min"}}) {
    // Axis 1 of [3, 4]; rows 0 and 2 hit column 1 three times (as 1, -3 and 1).
    ScatterModel m{.data_shape = {3, 4},
                   .index_shape = {3, 3},
                   .indices = {1, -3, 1, 0, 3, 2, 1, 1, -1},
                   .update_shape = {3, 3},
                   .axis = 1,
                   .reduction = reduction};
    ExpectSpecBits(m, false);
    // Axis 0 (the default), indices smaller than data on the other axis.
    ScatterModel m0{.data_shape = {3, 4}, .index_shape = {2, 2}, .indices = {2, 0, 2, -3}, .update_shape = {2, 2}};
    m0.reduction = reduction;
    ExpectSpecBits(m0, false);
  }
  // The deprecated Scatter (opset 9-10) is ScatterElements without a reduction.
  ScatterModel old{.op = "Scatter",
                   .data_shape = {2, 3},
                   .index_shape = {2, 2},
                   .indices = {2, 2, 0, -1},
                   .update_shape = {2, 2},
                   .axis = -1,
                   .opset = 10};
  ExpectSpecBits(old, false);
}

TEST(OnnxScatter, NdWritesSlicesAndReducesDuplicatesInOrder) {
  for (std::optional<std::string> reduction :
       {std::optional<std::string>{}, std::optional<std::string>{"add"}, std::optional<std::string>{"mul"},
        std::optional<std::string>{"max"}, std::optional<std::string>{"min"}}) {
    // k = 1: whole [4, 2] slices; slice 0 is written three times (0, -3, 0).
    ScatterModel slices{.op = "ScatterND",
                        .data_shape = {3, 4, 2},
                        .index_shape = {4, 1},
                        .indices = {0, -3, 2, 0},
                        .update_shape = {4, 4, 2},
                        .reduction = reduction};
    ExpectSpecBits(slices, true);
    // k = rank: single elements, from a [2, 2, 3] block of tuples.
    ScatterModel elements{.op = "ScatterND",
                          .data_shape = {3, 4, 2},
                          .index_shape = {2, 2, 3},
                          .indices = {0, 1, 1, 2, 3, 0, 0, 1, 1, -1, -1, -1},
                          .update_shape = {2, 2},
                          .reduction = reduction};
    ExpectSpecBits(elements, true);
  }
}

TEST(OnnxScatter, BadIndicesAndAttributesAreRefusedAtImport) {
  auto refused = [](const ScatterModel& m, StatusCode code, const std::string& phrase) {
    testing::ExpectRefusedAtImport(Build(m), code, "scatter", phrase);
  };
  const ScatterModel ok{
      .data_shape = {2, 3}, .index_shape = {1, 2}, .indices = {0, 2}, .update_shape = {1, 2}, .axis = 1};
  ASSERT_TRUE(ImportOnnx(Build(ok), {}).ok());
  for (int64_t bad :
       {int64_t{3}, int64_t{-4}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    ScatterModel m = ok;
    m.indices = {0, bad};
    refused(m, StatusCode::kInvalidArgument, "index " + std::to_string(bad) + " at flat position 1");
    ScatterModel nd{
        .op = "ScatterND", .data_shape = {2, 3}, .index_shape = {1, 2}, .indices = {1, bad}, .update_shape = {1}};
    refused(nd, StatusCode::kInvalidArgument, "index " + std::to_string(bad) + " of tuple 0");
  }
  {
    ScatterModel m = ok;
    m.reduction = "average";
    refused(m, StatusCode::kInvalidArgument, "reduction 'average'");
    m.reduction.reset();
    m.axis = 2;
    refused(m, StatusCode::kInvalidArgument, "axis 2 is out of range");
    m.axis = 1;
    m.update_shape = {2, 1};
    refused(m, StatusCode::kInvalidArgument, "same shape");
    m = ok;
    m.indices_as_input = true;
    refused(m, StatusCode::kUnimplemented, "computed at run time");
    m = ok;
    m.index_shape = {3, 1};
    m.indices = {0, 1, 2};
    m.update_shape = {3, 1};
    refused(m, StatusCode::kInvalidArgument, "exceed data");
    m = ok;
    m.op = "Scatter";
    m.opset = 10;
    m.reduction = "add";  // Scatter has no reduction attribute
    refused(m, StatusCode::kUnimplemented, "reduction");
  }
  {
    ScatterModel nd{
        .op = "ScatterND", .data_shape = {2, 3}, .index_shape = {1, 3}, .indices = {0, 0, 0}, .update_shape = {1}};
    refused(nd, StatusCode::kInvalidArgument, "between 1 and rank(data)");
    nd.index_shape = {1, 1};
    nd.indices = {0};
    nd.update_shape = {1, 2};
    refused(nd, StatusCode::kInvalidArgument, "needs [1, 3]");
  }
}

}  // namespace
}  // namespace consensor::executor
