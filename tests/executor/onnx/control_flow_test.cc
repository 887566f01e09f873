// ONNX Loop and Scan, unrolled at import (docs/DETERMINISM.md 6.1b), and the opset 18 to 21
// changes of the ops the importer lowers. The unrolled graphs are checked bit for bit against
// the body's f32 operations done here in the same order, at 1, 2 and 8 threads.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::AddGraphInput;
using consensor::testing::ExpectRefusedAtImport;
using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;
using consensor::testing::StartOnnxModel;

constexpr int32_t kF32 = onnx::TensorProto::FLOAT;
constexpr int32_t kI64 = onnx::TensorProto::INT64;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

onnx::GraphProto* Body(onnx::NodeProto* node) {
  auto* a = node->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("body");
  return a->mutable_g();
}

void ScalarI64(onnx::GraphProto* g, const std::string& name, int64_t v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(kI64);
  t->add_int64_data(v);
}

void ScalarF32(onnx::GraphProto* g, const std::string& name, float v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(kF32);
  t->add_float_data(v);
}

void ScalarBool(onnx::GraphProto* g, const std::string& name, bool v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(kBool);
  t->add_int32_data(v ? 1 : 0);
}

std::vector<uint8_t> Bytes(const onnx::ModelProto& m) {
  const std::string s = m.SerializeAsString();
  return {s.begin(), s.end()};
}

// Runs the imported graph at 1, 2 and 8 threads; every run must give the same bits.
std::vector<Tensor> RunAtEveryThreadCount(const OnnxImport& imported, const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> first;
  for (int threads : {1, 2, 8}) {
    MemoryBlobSource blobs;
    if (!imported.weights.empty()) blobs.Add(imported.weights);
    auto program = CompileGraph(imported.graph, &blobs, Limits{});
    EXPECT_TRUE(program.ok()) << program.status().message();
    if (!program.ok()) return {};
    auto cpu = MakeCpu(threads);
    auto loaded = LoadedProgram::Load(*program, cpu.get());
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
    if (!loaded.ok()) return {};
    auto r = (*loaded)->Run(inputs);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return {};
    std::vector<Tensor> outs;
    for (auto& o : r->outputs) outs.push_back(o.tensor);
    if (first.empty()) {
      first = outs;
      continue;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_EQ(outs[i].shape(), first[i].shape());
      EXPECT_EQ(0, std::memcmp(outs[i].data(), first[i].data(), static_cast<size_t>(outs[i].byte_size())))
          << "output " << i << " at " << threads << " threads";
    }
  }
  return first;
}

void ExpectBits(const Tensor& t, const Shape& shape, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(t.shape(), shape) << what;
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(t.data_as<float>()[i]), std::bit_cast<uint32_t>(want[i])) << what << " " << i;
  }
}

// y, ys = Loop(M, cond, v0 = x): v = v * 0.5 + float(i); ys stacks v * v per iteration.
// `with_cond`: cond is a constant true and the body stops after iteration `stop_after`
// (cond_out = i < stop_after, folded at import); M is `trip`, or absent when negative.
onnx::ModelProto LoopModel(int64_t trip, bool with_cond, int64_t stop_after) {
  onnx::ModelProto m;
  onnx::GraphProto* g = StartOnnxModel(&m, 17);
  AddGraphInput(g, "x", kF32, {3});
  if (trip >= 0) ScalarI64(g, "M", trip);
  if (with_cond) ScalarBool(g, "go", true);
  auto* loop = AddNode(g, "Loop", {trip >= 0 ? "M" : "", with_cond ? "go" : "", "x"}, {"y", "ys"}, "loop");
  onnx::GraphProto* body = Body(loop);
  AddGraphInput(body, "i", kI64, {});
  AddGraphInput(body, "cond_in", kBool, {});
  AddGraphInput(body, "v_in", kF32, {3});
  ScalarF32(body, "half", 0.5f);
  ScalarI64(body, "last", stop_after);
  auto* cast = AddNode(body, "Cast", {"i"}, {"fi"});
  IntAttr(cast, "to", kF32);
  AddNode(body, "Mul", {"v_in", "half"}, {"scaled"});
  AddNode(body, "Add", {"scaled", "fi"}, {"v_out"});
  AddNode(body, "Mul", {"v_in", "v_in"}, {"square"});
  if (with_cond) AddNode(body, "Less", {"i", "last"}, {"cond_out"});
  else AddNode(body, "Identity", {"cond_in"}, {"cond_out"});
  for (const char* o : {"cond_out", "v_out", "square"}) body->add_output()->set_name(o);
  g->add_output()->set_name("y");
  g->add_output()->set_name("ys");
  return m;
}

// The body's operations, one f32 rounding each, for `iterations` iterations.
void LoopReference(std::vector<float> v, int64_t iterations, std::vector<float>* y, std::vector<float>* ys) {
  ys->clear();
  for (int64_t i = 0; i < iterations; ++i) {
    for (float e : v) ys->push_back(e * e);
    for (float& e : v) e = e * 0.5f + static_cast<float>(i);
  }
  *y = v;
}

TEST(OnnxControlFlow, LoopWithAConstantTripCountIsUnrolled) {
  const Tensor x = RandomF32({3}, 7, 4.0f);
  const std::vector<float> x0(x.data_as<float>(), x.data_as<float>() + 3);
  auto imported = ImportOnnx(Bytes(LoopModel(4, false, 0)), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const auto outs = RunAtEveryThreadCount(*imported, {{"x", x}});
  ASSERT_EQ(outs.size(), 2u);
  std::vector<float> y, ys;
  LoopReference(x0, 4, &y, &ys);
  ExpectBits(outs[0], {3}, y, "y");
  ExpectBits(outs[1], {4, 3}, ys, "ys");
  // Four instances of the body's three run-time ops (the Cast of i folds), then the stacking.
  int ops = 0;
  for (const auto& node : imported->graph.nodes()) ops += node.op == "mul" || node.op == "add" ? 1 : 0;
  EXPECT_EQ(ops, 12);
}

TEST(OnnxControlFlow, LoopConditionFoldedFromTheIterationNumberEndsIt) {
  const Tensor x = RandomF32({3}, 8, 4.0f);
  const std::vector<float> x0(x.data_as<float>(), x.data_as<float>() + 3);
  // cond_out = i < 2: iterations 0, 1 and 2 run, although M is 100 (or absent).
  for (int64_t trip : {int64_t{100}, int64_t{-1}}) {
    auto imported = ImportOnnx(Bytes(LoopModel(trip, true, 2)), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    const auto outs = RunAtEveryThreadCount(*imported, {{"x", x}});
    ASSERT_EQ(outs.size(), 2u);
    std::vector<float> y, ys;
    LoopReference(x0, 3, &y, &ys);
    ExpectBits(outs[0], {3}, y, "y");
    ExpectBits(outs[1], {3, 3}, ys, "ys");
  }
  // M = 2 stops it first; M = 0 runs nothing: y is x, and the empty scan output is refused.
  auto two = ImportOnnx(Bytes(LoopModel(2, true, 5)), {});
  ASSERT_TRUE(two.ok()) << two.status().message();
  const auto outs = RunAtEveryThreadCount(*two, {{"x", x}});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[1].shape(), (Shape{2, 3}));
  ExpectRefusedAtImport(Bytes(LoopModel(0, false, 0)), StatusCode::kUnimplemented, "loop",
                        "runs no iteration, so its scan output 'ys'");
}

// A while loop on a loop-carried counter that starts as a constant: k = k + 1 while k < 3,
// beside a run-time value v = v * 0.5. The counter folds, so the trip count is known (3).
TEST(OnnxControlFlow, LoopConditionFoldedFromALoopCarriedCounterEndsIt) {
  onnx::ModelProto m;
  onnx::GraphProto* g = StartOnnxModel(&m, 17);
  AddGraphInput(g, "x", kF32, {2});
  ScalarBool(g, "go", true);
  ScalarI64(g, "k0", 0);
  auto* loop = AddNode(g, "Loop", {"", "go", "k0", "x"}, {"k", "v"}, "while");
  onnx::GraphProto* body = Body(loop);
  AddGraphInput(body, "i", kI64, {});
  AddGraphInput(body, "c", kBool, {});
  AddGraphInput(body, "k_in", kI64, {});
  AddGraphInput(body, "v_in", kF32, {2});
  ScalarI64(body, "one", 1);
  ScalarI64(body, "three", 3);
  ScalarF32(body, "half", 0.5f);
  AddNode(body, "Add", {"k_in", "one"}, {"k_out"});
  AddNode(body, "Less", {"k_out", "three"}, {"c_out"});
  AddNode(body, "Mul", {"v_in", "half"}, {"v_out"});
  for (const char* o : {"c_out", "k_out", "v_out"}) body->add_output()->set_name(o);
  g->add_output()->set_name("k");
  g->add_output()->set_name("v");
  auto imported = ImportOnnx(Bytes(m), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const Tensor x = Tensor::FromVector<float>(DType::kF32, {2}, {3.0f, -1.0e-38f});
  const auto outs = RunAtEveryThreadCount(*imported, {{"x", x}});
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_EQ(outs[0].dtype(), DType::kI64);
  EXPECT_EQ(outs[0].data_as<int64_t>()[0], 3);
  ExpectBits(outs[1], {2}, {((3.0f * 0.5f) * 0.5f) * 0.5f, ((-1.0e-38f * 0.5f) * 0.5f) * 0.5f}, "v");
}

TEST(OnnxControlFlow, LoopRefusesWhatItCannotUnroll) {
  // Over the cap of 256 iterations, with and without a condition.
  ExpectRefusedAtImport(Bytes(LoopModel(1000, false, 0)), StatusCode::kUnimplemented, "loop",
                        "trip count 1000 is over the unrolling cap of 256");
  ExpectRefusedAtImport(Bytes(LoopModel(1000, true, 999)), StatusCode::kUnimplemented, "loop",
                        "runs over 256 iterations, the unrolling cap");
  {
    // A trip count known only at run time: UNIMPLEMENTED, and binding it makes it import.
    onnx::ModelProto m = LoopModel(4, false, 0);
    m.mutable_graph()->clear_initializer();
    AddGraphInput(m.mutable_graph(), "M", kI64, {});
    m.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape();  // rank 0
    auto r = ImportOnnx(Bytes(m), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("trip count M is computed at run time"), std::string::npos)
        << r.status().message();
    EXPECT_TRUE(NeedsValueAtImport(r.status()));
    OnnxImportOptions bound;
    bound.constant_inputs["M"] = Tensor::FromVector<int64_t>(DType::kI64, {}, {3});
    auto imported = ImportOnnx(Bytes(m), bound);
    ASSERT_TRUE(imported.ok()) << imported.status().message();
  }
  {
    // A condition the body computes from run-time values: cond_out = sum(v_in) > 0.5.
    onnx::ModelProto m = LoopModel(4, true, 2);
    auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
    onnx::NodeProto* less = body->mutable_node(4);
    less->set_op_type("ReduceSum");
    less->clear_input();
    less->add_input("v_in");
    less->set_output(0, "total");
    IntAttr(less, "keepdims", 0);
    AddNode(body, "Greater", {"total", "half"}, {"cond_out"});
    ExpectRefusedAtImport(Bytes(m), StatusCode::kUnimplemented, "loop",
                          "the condition its body computes in iteration 0 is computed at run time");
  }
  {
    // An unsupported op in the body: named, with the iteration and the Loop.
    onnx::ModelProto m = LoopModel(4, false, 0);
    auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
    body->mutable_node(3)->set_op_type("Bernoulli");
    body->mutable_node(3)->set_name("coin");
    body->mutable_node(3)->mutable_input()->RemoveLast();
    auto r = ImportOnnx(Bytes(m), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("unsupported op Bernoulli in node 'coin'"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("iteration 0 of the body of node 'loop' (Loop)"), std::string::npos)
        << r.status().message();
  }
  {
    // A sequence-typed loop-carried value.
    onnx::ModelProto m = LoopModel(4, false, 0);
    auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
    body->mutable_input(2)->mutable_type()->mutable_sequence_type();
    ExpectRefusedAtImport(Bytes(m), StatusCode::kUnimplemented, "loop", "non-tensor body input 'v_in'");
  }
  {
    // Neither M nor cond: an endless loop. A body with the wrong number of inputs.
    onnx::ModelProto endless = LoopModel(-1, false, 0);
    ExpectRefusedAtImport(Bytes(endless), StatusCode::kUnimplemented, "loop", "neither a trip count nor a condition");
    onnx::ModelProto m = LoopModel(4, false, 0);
    m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_input()->RemoveLast();
    ExpectRefusedAtImport(Bytes(m), StatusCode::kInvalidArgument, "loop", "the body has 2 inputs");
  }
  {
    // The unrolled ops count against the op cap.
    OnnxImportOptions options;
    options.limits.max_ops = 40;
    auto r = ImportOnnx(Bytes(LoopModel(20, false, 0)), options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(r.status().message().find("(the op cap, --max-ops)"), std::string::npos) << r.status().message();
  }
  {
    // A body without nodes still costs one op of the cap per iteration, so loops nested in
    // loops cannot spin through 256^depth iterations for free: 200 iterations, cap 100.
    onnx::ModelProto m;
    onnx::GraphProto* g = StartOnnxModel(&m, 17);
    AddGraphInput(g, "x", kF32, {1});
    ScalarI64(g, "M", 200);
    auto* loop = AddNode(g, "Loop", {"M", "", "x"}, {"out"}, "empty");
    g->add_output()->set_name("out");
    onnx::GraphProto* body = Body(loop);
    AddGraphInput(body, "i", kI64, {});
    AddGraphInput(body, "c", kBool, {});
    AddGraphInput(body, "v", kF32, {1});
    body->add_output()->set_name("c");
    body->add_output()->set_name("v");
    EXPECT_TRUE(ImportOnnx(Bytes(m), {}).ok());
    OnnxImportOptions options;
    options.limits.max_ops = 100;
    auto r = ImportOnnx(Bytes(m), options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().message();
  }
}

// The body both Scan models share, s_out = s_in + x_t and y_t = s_out * x_t over [2], and the
// graph's outputs s_final and y.
void AddAccumulatingScanBody(onnx::GraphProto* g, onnx::NodeProto* scan) {
  onnx::GraphProto* body = Body(scan);
  AddGraphInput(body, "s_in", kF32, {2});
  AddGraphInput(body, "x_t", kF32, {2});
  AddNode(body, "Add", {"s_in", "x_t"}, {"s_out"});
  AddNode(body, "Mul", {"s_out", "x_t"}, {"y_t"});
  for (const char* o : {"s_out", "y_t"}) body->add_output()->set_name(o);
  g->add_output()->set_name("s_final");
  g->add_output()->set_name("y");
}

// s_T, Y = Scan(s0 = s, X [2, 4] scanned along axis 1 backwards): s = s + x_t; y_t = s * x_t,
// stacked along output axis 1.
onnx::ModelProto ScanModel(int64_t opset, int64_t length) {
  onnx::ModelProto m;
  onnx::GraphProto* g = StartOnnxModel(&m, opset);
  AddGraphInput(g, "s", kF32, {2});
  AddGraphInput(g, "x", kF32, {2, length});
  auto* scan = AddNode(g, "Scan", {"s", "x"}, {"s_final", "y"}, "scan");
  IntAttr(scan, "num_scan_inputs", 1);
  IntsAttr(scan, "scan_input_axes", {1});
  IntsAttr(scan, "scan_input_directions", {1});
  IntsAttr(scan, "scan_output_axes", {-1});
  AddAccumulatingScanBody(g, scan);
  return m;
}

TEST(OnnxControlFlow, ScanOverAStaticAxisIsUnrolled) {
  const Tensor s = RandomF32({2}, 11, 3.0f);
  const Tensor x = RandomF32({2, 4}, 12, 3.0f);
  auto imported = ImportOnnx(Bytes(ScanModel(16, 4)), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const auto outs = RunAtEveryThreadCount(*imported, {{"s", s}, {"x", x}});
  ASSERT_EQ(outs.size(), 2u);
  std::vector<float> state(s.data_as<float>(), s.data_as<float>() + 2);
  std::vector<float> y(8);
  for (int64_t t = 0; t < 4; ++t) {
    const int64_t at = 3 - t;  // reversed input direction; the output is appended in step order
    for (int64_t r = 0; r < 2; ++r) {
      const float xt = x.data_as<float>()[r * 4 + at];
      state[r] = state[r] + xt;
      y[r * 4 + t] = state[r] * xt;
    }
  }
  ExpectBits(outs[0], {2}, state, "s_final");
  ExpectBits(outs[1], {2, 4}, y, "y");
}

// Opset 8: s [B, 2] and x [B, T, 2] with a batch axis; each batch element is scanned on its
// own (forwards here) and the results are stacked along axis 0.
onnx::ModelProto BatchedScanModel(int64_t batch, int64_t length, bool with_lengths, int64_t given_length) {
  onnx::ModelProto m;
  onnx::GraphProto* g = StartOnnxModel(&m, 8);
  AddGraphInput(g, "s", kF32, {batch, 2});
  AddGraphInput(g, "x", kF32, {batch, length, 2});
  if (with_lengths) {
    auto* lens = g->add_initializer();
    lens->set_name("lens");
    lens->set_data_type(onnx::TensorProto::INT32);
    lens->add_dims(batch);
    for (int64_t b = 0; b < batch; ++b) lens->add_int32_data(static_cast<int32_t>(given_length));
  }
  auto* scan = AddNode(g, "Scan", {with_lengths ? "lens" : "", "s", "x"}, {"s_final", "y"}, "scan8");
  IntAttr(scan, "num_scan_inputs", 1);
  AddAccumulatingScanBody(g, scan);
  return m;
}

TEST(OnnxControlFlow, Opset8ScanRunsEachBatchElement) {
  const Tensor s = RandomF32({2, 2}, 13, 3.0f);
  const Tensor x = RandomF32({2, 3, 2}, 14, 3.0f);
  for (bool with_lengths : {false, true}) {
    auto imported = ImportOnnx(Bytes(BatchedScanModel(2, 3, with_lengths, 3)), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    const auto outs = RunAtEveryThreadCount(*imported, {{"s", s}, {"x", x}});
    ASSERT_EQ(outs.size(), 2u);
    std::vector<float> state(s.data_as<float>(), s.data_as<float>() + 4);
    std::vector<float> y(12);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t t = 0; t < 3; ++t) {
        for (int64_t r = 0; r < 2; ++r) {
          const float xt = x.data_as<float>()[(b * 3 + t) * 2 + r];
          state[b * 2 + r] = state[b * 2 + r] + xt;
          y[(b * 3 + t) * 2 + r] = state[b * 2 + r] * xt;
        }
      }
    }
    ExpectBits(outs[0], {2, 2}, state, "s_final");
    ExpectBits(outs[1], {2, 3, 2}, y, "y");
  }
  ExpectRefusedAtImport(Bytes(BatchedScanModel(2, 3, true, 2)), StatusCode::kUnimplemented, "scan8",
                        "sequence_lens other than the full length 3");
  ExpectRefusedAtImport(Bytes(BatchedScanModel(30, 10, false, 0)), StatusCode::kUnimplemented, "scan8",
                        "scan length 10 times its batch 30 is over the unrolling cap");
}

TEST(OnnxControlFlow, ScanRefusesWhatItCannotUnroll) {
  ExpectRefusedAtImport(Bytes(ScanModel(16, 300)), StatusCode::kUnimplemented, "scan",
                        "scan length 300 is over the unrolling cap of 256");
  ExpectRefusedAtImport(Bytes(ScanModel(16, 0)), StatusCode::kUnimplemented, "scan", "its scan length is 0");
  {
    onnx::ModelProto m = ScanModel(16, 4);
    IntAttr(m.mutable_graph()->mutable_node(0), "num_scan_inputs", 3);
    m.mutable_graph()->mutable_node(0)->mutable_attribute()->SwapElements(0, 5);
    m.mutable_graph()->mutable_node(0)->mutable_attribute()->RemoveLast();
    ExpectRefusedAtImport(Bytes(m), StatusCode::kInvalidArgument, "scan", "num_scan_inputs 3 must be in [1, 2]");
  }
  {
    onnx::ModelProto m = ScanModel(16, 4);
    IntsAttr(m.mutable_graph()->mutable_node(0), "scan_output_directions", {2});
    ExpectRefusedAtImport(Bytes(m), StatusCode::kInvalidArgument, "scan", "a scan direction must be 0 or 1");
  }
}

// Opset 18 moved the axes of every Reduce op into an input (ReduceSum had it since 13).
TEST(OnnxControlFlow, Opset18ReduceAxesAreAnInput) {
  for (int64_t opset : {18, 21}) {
    onnx::ModelProto m;
    onnx::GraphProto* g = StartOnnxModel(&m, opset);
    AddGraphInput(g, "x", kF32, {2, 3});
    auto* axes = g->add_initializer();
    axes->set_name("axes");
    axes->set_data_type(kI64);
    axes->add_dims(1);
    axes->add_int64_data(1);
    IntAttr(AddNode(g, "ReduceMax", {"x", "axes"}, {"y"}, "rmax"), "keepdims", 0);
    g->add_output()->set_name("y");
    auto imported = ImportOnnx(Bytes(m), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    const Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 3}, {1, 5, 2, -1, -3, -2});
    const auto outs = RunAtEveryThreadCount(*imported, {{"x", x}});
    ASSERT_EQ(outs.size(), 1u);
    ExpectBits(outs[0], {2}, {5.0f, -1.0f}, "ReduceMax");
    // The opset-17 attribute is refused by name there.
    g->mutable_node(0)->mutable_input()->RemoveLast();
    IntsAttr(g->mutable_node(0), "axes", {1});
    ExpectRefusedAtImport(Bytes(m), StatusCode::kUnimplemented, "rmax", "attribute 'axes'");
  }
  onnx::ModelProto m;
  onnx::GraphProto* g = StartOnnxModel(&m, 22);
  AddGraphInput(g, "x", kF32, {2});
  AddNode(g, "Relu", {"x"}, {"y"});
  g->add_output()->set_name("y");
  auto r = ImportOnnx(Bytes(m), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("unsupported opset 22 (Consensor imports opsets 1 to 21)"), std::string::npos)
      << r.status().message();
}

// Resize gained antialias, axes and keep_aspect_ratio_policy in opset 18: their defaults
// import, anything else is refused by name.
TEST(OnnxControlFlow, Opset18ResizeAttributesAtTheirDefaultsOnly) {
  auto model = [](const std::string& attr, int64_t int_value, const std::string& string_value, int64_t opset = 18) {
    onnx::ModelProto m;
    onnx::GraphProto* g = StartOnnxModel(&m, opset);
    AddGraphInput(g, "x", kF32, {1, 1, 2, 2});
    auto* scales = g->add_initializer();
    scales->set_name("scales");
    scales->set_data_type(kF32);
    scales->add_dims(4);
    for (float s : {1.0f, 1.0f, 2.0f, 2.0f}) scales->add_float_data(s);
    auto* resize = AddNode(g, "Resize", {"x", "", "scales"}, {"y"}, "up");
    auto* a = resize->add_attribute();
    a->set_name(attr);
    if (string_value.empty()) {
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(int_value);
    } else {
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(string_value);
    }
    g->add_output()->set_name("y");
    return Bytes(m);
  };
  EXPECT_TRUE(ImportOnnx(model("antialias", 0, ""), {}).ok());
  EXPECT_TRUE(ImportOnnx(model("keep_aspect_ratio_policy", 0, "stretch"), {}).ok());
  ExpectRefusedAtImport(model("antialias", 1, ""), StatusCode::kUnimplemented, "up", "attribute antialias = 1");
  ExpectRefusedAtImport(model("keep_aspect_ratio_policy", 0, "not_larger"), StatusCode::kUnimplemented, "up",
                        "keep_aspect_ratio_policy = 'not_larger'");
  // Opset 19's new coordinate mode is refused as unsupported; before opset 19 it is no mode.
  ExpectRefusedAtImport(model("coordinate_transformation_mode", 0, "half_pixel_symmetric", 19),
                        StatusCode::kUnimplemented, "up", "coordinate_transformation_mode 'half_pixel_symmetric'");
  ExpectRefusedAtImport(model("coordinate_transformation_mode", 0, "half_pixel_symmetric", 18),
                        StatusCode::kInvalidArgument, "up", "unknown coordinate_transformation_mode");
}

}  // namespace
}  // namespace consensor::executor
