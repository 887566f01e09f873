// Graph IR, canonical id, validation, compilation and memory planning.
#include <gtest/gtest.h>

#include "executor/merkle.h"
#include "executor/serialize.h"
#include "executor/validate.h"
#include "kernels/detmath.h"
#include "kernels/half.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::CompileAndRun;
using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

// y = tanh(x @ w + b), z = relu(x @ w) built in two different orders must get one id.
Graph BuildMlp(bool reversed) {
  Graph g;
  Tensor w = RandomF32({16, 8}, 1), b = RandomF32({8}, 2);
  if (!reversed) {
    Value x = g.input("x", DType::kF32, {4, 16});
    Value wv = g.constant(w, "w");
    Value bv = g.constant(b, "b");
    Value h = matmul(x, wv);
    g.output("y", tanh(h + bv));
    g.output("z", relu(h));
  } else {
    Value bv = g.constant(b, "bias");
    Value wv = g.constant(w, "weights");
    Value x = g.input("x", DType::kF32, {4, 16});
    Value h2 = matmul(x, wv);  // duplicate of h1, merged
    Value h1 = matmul(x, wv);
    g.output("z", relu(h2));
    Value dead = exp(h1);  // unreachable: dropped
    (void)dead;
    g.output("y", tanh(h1 + bv));
  }
  return g;
}

TEST(GraphIdTest, IndependentOfBuildOrderNamesAndDeadCode) {
  auto a = Validate(BuildMlp(false), {});
  auto b = Validate(BuildMlp(true), {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(ToHex(a->id), ToHex(b->id));
  EXPECT_EQ(a->order.size(), 4u);  // matmul, add, tanh, relu
  EXPECT_EQ(b->order.size(), 4u);
  std::vector<std::string> ops_a, ops_b;
  for (const auto& n : a->order) ops_a.push_back(std::string(n.schema->name));
  for (const auto& n : b->order) ops_b.push_back(std::string(n.schema->name));
  EXPECT_EQ(ops_a, ops_b);
}

TEST(GraphIdTest, ChangesWithStructure) {
  Graph g1, g2;
  Value x1 = g1.input("x", DType::kF32, {3});
  g1.output("y", exp(x1));
  Value x2 = g2.input("x", DType::kF32, {3});
  g2.output("y", log(x2));
  EXPECT_NE(ToHex(Validate(g1, {})->id), ToHex(Validate(g2, {})->id));
}

TEST(GraphIdTest, InlineAndSameTraceAcrossBuilds) {
  auto cpu = MakeCpu();
  std::map<std::string, Tensor> in{{"x", RandomF32({4, 16}, 7)}};
  auto r1 = CompileAndRun(BuildMlp(false), in, cpu.get(), true);
  auto r2 = CompileAndRun(BuildMlp(true), in, cpu.get(), true);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(ToHex(r1->result_root), ToHex(r2->result_root));
  EXPECT_EQ(ToHex(r1->trace_root), ToHex(r2->trace_root));
  EXPECT_EQ(r1->trace.size(), 4u);
}

TEST(GraphIdTest, SerializationRoundTripKeepsId) {
  Graph g = BuildMlp(false);
  auto bytes = SerializeGraph(g);
  auto back = ParseGraph(bytes, false, {});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToHex(Validate(g, {})->id), ToHex(Validate(*back, {})->id));
}

TEST(ValidateTest, RejectsCycle) {
  Graph g;
  Value x = g.input("x", DType::kF32, {2});
  Value a = exp(x);
  Value b = log(a);
  // Rewire a's input to b: a -> b -> a.
  const_cast<NodeDef&>(g.nodes()[0]).inputs[0] = b.index();
  g.output("y", b);
  auto v = Validate(g, {});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("cycle"), std::string::npos) << v.status().message();
}

TEST(ValidateTest, DeepChainNeedsNoRecursion) {
  Graph g;
  Value v = g.input("x", DType::kF32, {1});
  for (int i = 0; i < 50000; ++i) v = neg(v);
  g.output("y", v);
  auto vg = Validate(g, {});
  ASSERT_TRUE(vg.ok()) << vg.status().ToString();
  EXPECT_EQ(vg->order.size(), 50000u);
}

TEST(ValidateTest, RejectsUnknownOpWithNodeName) {
  Graph g;
  Value x = g.input("x", DType::kF32, {2});
  g.output("y", g.node("frobnicate", {x}, {}, "my_node"));
  auto v = Validate(g, {});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("frobnicate"), std::string::npos);
  EXPECT_NE(v.status().message().find("my_node"), std::string::npos);
}

TEST(ValidateTest, RejectsShapeMismatchAndArity) {
  Graph g;
  Value a = g.input("a", DType::kF32, {4, 16});
  Value b = g.input("b", DType::kF32, {15, 8});
  g.output("y", matmul(a, b));
  EXPECT_EQ(Validate(g, {}).status().code(), StatusCode::kInvalidArgument);

  Graph h;
  Value x = h.input("x", DType::kF32, {2});
  h.output("y", h.node("add", {x}));
  auto v = Validate(h, {});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("inputs"), std::string::npos) << v.status().message();
}

TEST(ValidateTest, Caps) {
  Graph g;
  Value x = g.input("x", DType::kF32, {1024, 1024});
  g.output("y", matmul(x, x));
  Limits elements;
  elements.max_elements_per_tensor = 1000;
  EXPECT_EQ(Validate(g, elements).status().code(), StatusCode::kResourceExhausted);
  Limits flops;
  flops.max_flops = 1000;
  auto v = Validate(g, flops);
  EXPECT_EQ(v.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(v.status().message().find("cap"), std::string::npos);
  Limits ops;
  ops.max_ops = 0;
  EXPECT_EQ(Validate(g, ops).status().code(), StatusCode::kResourceExhausted);
  Limits memory;
  memory.max_total_bytes = 1 << 20;
  EXPECT_EQ(CompileGraph(g, nullptr, memory).status().code(), StatusCode::kResourceExhausted);
}

TEST(PlannerTest, ReusesDeadBuffersAndKnowsPeakUpFront) {
  // A chain of 10 elementwise ops on 1 MiB tensors needs the input plus two live buffers,
  // not eleven, plus the output of the fused run exp x 9 (DETERMINISM.md 3.1), allocated with
  // the run's head.
  Graph g;
  Value v = g.input("x", DType::kF32, {256, 1024});
  for (int i = 0; i < 10; ++i) v = exp(v);
  g.output("y", v);
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const int64_t mib = 1 << 20;
  EXPECT_LE(p->arena_bytes, 4 * mib);
  EXPECT_GE(p->arena_bytes, 4 * mib);
  // Every instruction's output must not overlap any of its inputs.
  for (const auto& ins : p->instructions) {
    const Buffer& o = p->buffers[ins.output];
    for (int in : ins.inputs) {
      const Buffer& b = p->buffers[in];
      bool disjoint = o.offset + o.bytes <= b.offset || b.offset + b.bytes <= o.offset;
      EXPECT_TRUE(disjoint);
    }
  }
}

TEST(PlannerTest, HalfOperandsAreWidenedABlockAtATimeWithinTheCap) {
  // 256K f16 values (512 KiB): x + x needs a 1 MiB arena. Widened whole, its three f32 copies
  // (3 MiB) would not fit a 1.25 MiB cap; a block at a time they take 192 KiB.
  Limits limits;
  limits.max_total_bytes = (int64_t{5} << 20) / 4;
  Graph g;
  Value x = g.input("x", DType::kF16, {64, 4096});
  g.output("y", x + x);
  Tensor in(DType::kF16, {64, 4096});
  for (int64_t i = 0; i < in.num_elements(); ++i) in.data_as<uint16_t>()[i] = static_cast<uint16_t>(i % 0x7C00);
  auto backend = MakeCpu(2);
  auto r = CompileAndRun(g, {{"x", in}}, backend.get(), false, limits);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& y = r->outputs.at(0).tensor;
  for (int64_t i = 0; i < y.num_elements(); i += 997) {
    const float v = half::F16ToF32(in.data_as<uint16_t>()[i]);
    ASSERT_EQ(y.data_as<uint16_t>()[i], half::F32ToF16(v + v)) << i;
  }
  // A sum over all of x is one chain that reads every value: its f32 copy of x (1 MiB) is
  // widened whole and, with the arena, is over the cap. Refused at compile, by name.
  Graph h;
  Value hx = h.input("x", DType::kF16, {64, 4096});
  h.output("s", reduce_sum(hx, {0, 1}));
  auto p = CompileGraph(h, nullptr, limits);
  ASSERT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("f32 copies of the f16/bf16 operands of reduce_sum"), std::string::npos)
      << p.status().message();
}

TEST(PlannerTest, CastFromHalfHeadsNoFusedRun) {
  // cast(f16 -> f32) then exp: the cast computes through the 16-bit widening, which takes no
  // epilogue, so the two run unfused (the pair used to fail at run time).
  Graph g;
  Value x = g.input("x", DType::kF16, {4});
  g.output("y", exp(cast(x, DType::kF32)));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->fused_instructions.empty());
  Tensor in = Tensor::FromVector<uint16_t>(DType::kF16, {4}, {0x0000, 0x3C00, 0xBC00, 0x7E00});  // 0, 1, -1, NaN
  auto backend = MakeCpu(1);
  auto r = CompileAndRun(g, {{"x", in}}, backend.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& y = r->outputs.at(0).tensor;
  EXPECT_EQ(y.data_as<float>()[0], 1.0f);
  EXPECT_EQ(detmath::as_uint(y.data_as<float>()[3]), half::kCanonicalNaNF32);
}

TEST(RuntimeTest, InputMismatchesAreClearErrors) {
  Graph g;
  Value x = g.input("x", DType::kF32, {2, 3});
  g.output("y", exp(x));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok());
  auto cpu = MakeCpu();
  auto loaded = LoadedProgram::Load(*p, cpu.get());
  ASSERT_TRUE(loaded.ok());
  auto missing = (*loaded)->Run({});
  EXPECT_NE(missing.status().message().find("missing input 'x'"), std::string::npos);
  auto wrong_shape = (*loaded)->Run({{"x", RandomF32({3, 2}, 1)}});
  EXPECT_NE(wrong_shape.status().message().find("f32[2, 3]"), std::string::npos) << wrong_shape.status().message();
  auto extra = (*loaded)->Run({{"x", RandomF32({2, 3}, 1)}, {"q", RandomF32({1}, 1)}});
  EXPECT_NE(extra.status().message().find("no input named 'q'"), std::string::npos);
  auto ok = (*loaded)->Run({{"x", RandomF32({2, 3}, 1)}});
  EXPECT_TRUE(ok.ok());
}

TEST(RuntimeTest, GatherIndexOutOfRangeIsARunTimeError) {
  Graph g;
  Value data = g.input("data", DType::kF32, {4, 2});
  Value idx = g.input("idx", DType::kI32, {2});
  g.output("y", gather(data, idx, 0));
  auto cpu = MakeCpu();
  Tensor indices = Tensor::FromVector<int32_t>(DType::kI32, {2}, {1, 9});
  auto r = CompileAndRun(g, {{"data", RandomF32({4, 2}, 3)}, {"idx", indices}}, cpu.get());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gather"), std::string::npos) << r.status().message();
}

TEST(MerkleTest, Shapes) {
  Hash256 a = Sha256Of(std::string_view("a")), b = Sha256Of(std::string_view("b")), c = Sha256Of(std::string_view("c"));
  EXPECT_EQ(MerkleRoot({a}), a);
  Sha256 h;
  h.UpdateU8(1);
  h.Update(a);
  h.Update(b);
  Hash256 ab = h.Finish();
  EXPECT_EQ(MerkleRoot({a, b}), ab);
  Sha256 h2;
  h2.UpdateU8(1);
  h2.Update(ab);
  h2.Update(c);
  EXPECT_EQ(MerkleRoot({a, b, c}), h2.Finish());
  EXPECT_EQ(MerkleRoot({}), Sha256Of(std::string_view()));
}

}  // namespace
}  // namespace consensor::executor
