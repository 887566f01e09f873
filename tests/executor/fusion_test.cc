// Compile-time fusion (docs/DETERMINISM.md 3.1): chains of elementwise instructions fused into
// the conv2d or elementwise instruction that produces their input. The fused program must give
// the unfused program's bits at every thread count and ISA; a traced run must give the unfused
// trace; a value read outside a chain or named as an output must stop the chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "executor/graph.h"
#include "kernels/cpu/data_movement_avx512.h"
#include "kernels/half.h"
#include "tests/executor/fusion_checks.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

// conv -> HardSwish as imported (x * min(max(x + 3, 0), 6) / 6) -> per-channel affine -> a
// residual add with the block's input; twice, the second block depthwise, with odd sizes.
// `tap` also names the first block's HardSwish gate as an output, which must stop that chain.
Graph BuildBlocks(bool tap) {
  Graph g;
  Value x = g.input("x", DType::kF32, {1, 6, 13, 21});
  Value v = x;
  for (int block = 0; block < 2; ++block) {
    const int64_t group = block == 0 ? 1 : 6;
    Value w = g.constant(RandomF32({6, 6 / group, 3, 3}, 10 + block), "w" + std::to_string(block));
    Value b = g.constant(RandomF32({6}, 20 + block), "b" + std::to_string(block));
    Conv2DOptions o;
    o.pads = {1, 1, 1, 1};
    o.group = group;
    Value c = conv2d(v, w, b, o);
    Value gate = minimum(maximum(c + g.scalar(3.0f), g.scalar(0.0f)), g.scalar(6.0f));
    if (tap && block == 0) g.output("gate", gate);
    Value hs = c * gate / g.scalar(6.0f);
    Value scale = g.constant(RandomF32({1, 6, 1, 1}, 30 + block), "s" + std::to_string(block));
    Value shift = g.constant(RandomF32({6, 1, 1}, 40 + block), "t" + std::to_string(block));
    v = hs * scale + shift + v;
  }
  g.output("y", relu(v));
  return g;
}

// The fused program against its unfused lowering (tests/executor/fusion_checks.h) on both ISAs
// at 1, 2 and 8 threads.
void ExpectFusedGivesTheUnfusedBits(const Program& p, const std::map<std::string, Tensor>& inputs) {
  RunResult reference;
  ASSERT_NO_FATAL_FAILURE(testing::RunUnfusedReference(p, inputs, &reference));
  for (const std::string isa : {"portable", "avx2"}) {
    if (isa == "avx2" && !kernels::cpu::CpuHasAvx2Fma()) continue;
    for (int threads : {1, 2, 8}) {
      SCOPED_TRACE(isa + "/t" + std::to_string(threads));
      testing::ExpectFusedRunGivesReferenceBits(p, isa, threads, inputs, reference);
    }
  }
}

int CountEpilogues(const Program& p) {
  int n = 0;
  for (const Instruction& ins : p.fused_instructions) n += ins.epilogue.empty() ? 0 : 1;
  return n;
}

TEST(FusionTest, FusedProgramGivesTheUnfusedBitsOnEveryConfiguration) {
  for (bool tap : {false, true}) {
    SCOPED_TRACE(tap ? "gate is an output" : "plain");
    Graph g = BuildBlocks(tap);
    auto p = CompileGraph(g, nullptr, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    // Each block fuses into its conv (eight steps, the most an epilogue takes; the final relu
    // is left alone). With the gate an output, the first conv's result is read after it, so
    // the first block splits into two runs that start after the conv.
    ASSERT_FALSE(p->fused_instructions.empty());
    EXPECT_LT(p->fused_instructions.size(), p->instructions.size());
    EXPECT_EQ(CountEpilogues(*p), tap ? 3 : 2);
    testing::ExpectFusedListCoversEveryInstruction(*p);
    // Buffers a fused instruction reads never share memory with its output.
    for (const Instruction& ins : p->fused_instructions) {
      const Buffer& o = p->buffers[ins.output];
      std::vector<int> reads = ins.inputs;
      reads.insert(reads.end(), ins.epilogue_inputs.begin(), ins.epilogue_inputs.end());
      for (int in : reads) {
        const Buffer& b = p->buffers[in];
        EXPECT_TRUE(o.offset + o.bytes <= b.offset || b.offset + b.bytes <= o.offset) << ins.node_label;
      }
    }

    ExpectFusedGivesTheUnfusedBits(*p, {{"x", RandomF32({1, 6, 13, 21}, 7, 4.0f)}});
  }
}

// A 2x bilinear upsample of the last two axes as the Resize lowering writes it (DETERMINISM.md
// 6.2): per axis, t0 = gather(x, i0), y = t0 * w0, t1 = gather(x, i1), y = y + t1 * w1. With
// `tap`, the first axis's first product is also a graph output.
Graph BuildBilinearUpsample(const Shape& in_shape, bool tap) {
  Graph g;
  Value v = g.input("x", DType::kF32, in_shape);
  for (int axis : {3, 2}) {
    const int64_t n = in_shape[axis], m = 2 * n;
    std::vector<int64_t> left(m), right(m);
    std::vector<float> w_left(m), w_right(m);
    for (int64_t i = 0; i < m; ++i) {
      // half_pixel at scale 2: c = (i + 0.5) / 2 - 0.5, clamped taps, weights 1 - r and r.
      const double c = (i + 0.5) / 2 - 0.5;
      const int64_t l = static_cast<int64_t>(std::ceil(c)) - 1;
      const double r = c - l;
      left[i] = std::clamp<int64_t>(l, 0, n - 1);
      right[i] = std::clamp<int64_t>(l + 1, 0, n - 1);
      w_left[i] = static_cast<float>(1 - r);
      w_right[i] = static_cast<float>(r);
    }
    Shape w_shape(4 - axis, 1);
    w_shape[0] = m;
    const bool last = axis == 3;
    Value i0 = g.constant(Tensor::FromVector(DType::kI64, {m}, left), last ? "i0_w" : "i0_h");
    Value i1 = g.constant(Tensor::FromVector(DType::kI64, {m}, right), last ? "i1_w" : "i1_h");
    Value w0 = g.constant(Tensor::FromVector(DType::kF32, w_shape, w_left), last ? "w0_w" : "w0_h");
    Value w1 = g.constant(Tensor::FromVector(DType::kF32, w_shape, w_right), last ? "w1_w" : "w1_h");
    Value y = gather(v, i0, axis) * w0;
    if (tap && last) g.output("p0", y);
    v = y + gather(v, i1, axis) * w1;
  }
  g.output("y", v);
  return g;
}

// Each axis's five instructions become one gather with five inputs (DETERMINISM.md 3.1): every
// bit and the trace the unfused program's, on both ISAs (with and without the AVX-512 loops) at
// 1, 2 and 8 threads. x holds NaNs, infinities and signed zeros; the last axis's rows are 48
// long (512-bit gathers), the other axis's 2 x 48 (512-bit rows). With a product read outside
// its axis's pattern, that axis keeps the gather heads (gather -> mul, gather -> mul -> add).
TEST(FusionTest, TheResizeLoweringsTwoTapsRunInOnePass) {
  const Shape in_shape = {1, 3, 12, 24};
  Tensor x = RandomF32(in_shape, 9, 4.0f);
  float* xs = x.data_as<float>();
  const uint32_t specials[] = {0x7FC00001u, 0xFF800000u, 0x7F800000u, 0x80000000u, 0x00000001u, 0x7F800001u};
  for (int k = 0; k < 6; ++k) std::memcpy(&xs[37 * k + 5], &specials[k], sizeof(uint32_t));
  for (bool tap : {false, true}) {
    SCOPED_TRACE(tap ? "a product is an output" : "plain");
    Graph g = BuildBilinearUpsample(in_shape, tap);
    auto p = CompileGraph(g, nullptr, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_EQ(p->instructions.size(), 10u);
    ASSERT_EQ(p->fused_instructions.size(), tap ? 3u : 2u);
    testing::ExpectFusedListCoversEveryInstruction(*p);
    int two_taps = 0;
    for (const Instruction& ins : p->fused_instructions) {
      EXPECT_EQ(ins.op, kernels::Op::kGather);
      if (ins.inputs.size() == 5) {
        ++two_taps;
        EXPECT_TRUE(ins.epilogue.empty());
        EXPECT_EQ(ins.fused_count, 5);
      } else {
        EXPECT_FALSE(ins.epilogue.empty());  // the gather heads of the axis that keeps them
      }
    }
    EXPECT_EQ(two_taps, tap ? 1 : 2);
    for (bool avx512 : {true, false}) {
      SCOPED_TRACE(avx512 ? "avx512" : "no avx512");
      kernels::cpu::SetResizeTapsAvx512ForTesting(avx512);
      ExpectFusedGivesTheUnfusedBits(*p, {{"x", x}});
    }
    kernels::cpu::SetResizeTapsAvx512ForTesting(true);
  }
}

// A conv2d of f16 values followed by a relu becomes one conv with OpParams::relu_output
// (DETERMINISM.md 3.1): the relu's bits, result and trace roots the unfused program's on both
// ISAs at 1, 2 and 8 threads (the AVX-512 kernel's relu and the in-place 16-bit relu). A conv
// whose output is also a graph output keeps its relu apart.
TEST(FusionTest, HalfConvTakesItsRelu) {
  auto half_tensor = [](const Shape& shape, uint32_t seed, float scale) {
    Tensor f = RandomF32(shape, seed, scale);
    Tensor h(DType::kF16, shape);
    for (int64_t i = 0; i < f.num_elements(); ++i) h.data_as<uint16_t>()[i] = half::F32ToF16(f.data_as<float>()[i]);
    return h;
  };
  Graph g;
  const Shape in_shape = {1, 6, 13, 21};
  Value x = g.input("x", DType::kF16, in_shape);
  Conv2DOptions o;
  o.pads = {1, 1, 1, 1};
  Value c0 =
      conv2d(x, g.constant(half_tensor({8, 6, 3, 3}, 11, 1.0f), "w0"), g.constant(half_tensor({8}, 12, 1.0f), "b0"), o);
  Value r0 = relu(c0);
  Value c1 = conv2d(r0, g.constant(half_tensor({5, 8, 3, 3}, 13, 1.0f), "w1"),
                    g.constant(half_tensor({5}, 14, 1.0f), "b1"), o);
  g.output("c1", c1);
  g.output("y", relu(c1));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->instructions.size(), 4u);
  ASSERT_EQ(p->fused_instructions.size(), 3u);
  EXPECT_TRUE(p->fused_instructions[0].params.relu_output);
  EXPECT_EQ(p->fused_instructions[0].fused_count, 2);
  EXPECT_FALSE(p->fused_instructions[1].params.relu_output);
  EXPECT_EQ(p->fused_instructions[2].op, kernels::Op::kRelu);
  testing::ExpectFusedListCoversEveryInstruction(*p);
  Tensor in = half_tensor(in_shape, 15, 4.0f);
  const uint16_t specials[] = {0x7E01, 0xFC00, 0x7C00, 0x8000, 0x0001, 0x8001, 0x7BFF, 0xFBFF};
  for (int k = 0; k < 8; ++k) in.data_as<uint16_t>()[41 * k + 3] = specials[k];
  ExpectFusedGivesTheUnfusedBits(*p, {{"x", in}});
}

TEST(FusionTest, TraceIsTheUnfusedTrace) {
  Graph g = BuildBlocks(false);
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::map<std::string, Tensor> inputs = {{"x", RandomF32({1, 6, 13, 21}, 8)}};
  auto backend = MakeCpu(2);
  auto loaded = LoadedProgram::Load(*p, backend.get());
  ASSERT_TRUE(loaded.ok());
  RunOptions traced;
  traced.trace = true;  // fusion allowed, but a traced run is the canonical instruction list
  auto with_fusion = (*loaded)->Run(inputs, traced);
  traced.fuse = false;
  auto without = (*loaded)->Run(inputs, traced);
  ASSERT_TRUE(with_fusion.ok() && without.ok());
  EXPECT_EQ(with_fusion->trace.size(), p->instructions.size());
  EXPECT_EQ(with_fusion->trace, without->trace);
  EXPECT_EQ(with_fusion->trace_root, without->trace_root);
  // The last leaf is the output the fused run computes.
  auto plain = (*loaded)->Run(inputs);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->result_root, with_fusion->result_root);
  EXPECT_EQ(with_fusion->trace.back(), plain->outputs[0].hash);
}

TEST(FusionTest, ValuesReadOutsideTheChainStopIt) {
  // Canonical order: h, a, b, c, m, y. h is read by c, after a run [h, a] would end; a is an
  // output. So neither h nor a nor b heads a run, and the one run is [c, m, y].
  Graph g;
  Value x = g.input("x", DType::kF32, {5, 7});
  Value h = exp(x);
  Value a = h + g.scalar(1.0f);
  Value b = tanh(a);
  Value c = sigmoid(h);
  g.output("a", a);
  g.output("y", b * c + a);
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->instructions.size(), 6u);
  ASSERT_EQ(p->fused_instructions.size(), 4u);
  EXPECT_EQ(CountEpilogues(*p), 1);
  const Instruction& fused = p->fused_instructions.back();
  EXPECT_EQ(fused.op, kernels::Op::kSigmoid);
  EXPECT_EQ(fused.fused_count, 3);
  EXPECT_EQ(fused.epilogue.size(), 2u);
  EXPECT_EQ(fused.epilogue_inputs.size(), 2u);  // b and a, read from their buffers
  std::map<std::string, Tensor> inputs = {{"x", RandomF32({5, 7}, 9)}};
  auto backend = MakeCpu(1);
  auto loaded = LoadedProgram::Load(*p, backend.get());
  ASSERT_TRUE(loaded.ok());
  RunOptions unfused;
  unfused.fuse = false;
  auto want = (*loaded)->Run(inputs, unfused);
  auto got = (*loaded)->Run(inputs);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(want->result_root, got->result_root);
}

// ONNX LeakyRelu as the importer lowers it (docs/ONNX.md).
Value LeakyRelu(Graph& g, Value v, float alpha) { return where(less(v, g.scalar(0.0f)), v * g.scalar(alpha), v); }

// Runs the fused and the canonical list of `p` on every ISA at 1, 2 and 8 threads and expects
// every output bit of the portable one-thread canonical run.
void ExpectUnfusedBits(const Program& p, const std::map<std::string, Tensor>& inputs) {
  auto reference_backend = MakeCpu(1, "portable");
  auto reference = LoadedProgram::Load(p, reference_backend.get());
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  RunOptions unfused;
  unfused.fuse = false;
  auto want = (*reference)->Run(inputs, unfused);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const char* isa : {"portable", "avx2"}) {
    if (std::string(isa) == "avx2" && !kernels::cpu::CpuHasAvx2Fma()) continue;
    for (int threads : {1, 2, 8}) {
      auto backend = MakeCpu(threads, isa);
      auto loaded = LoadedProgram::Load(p, backend.get());
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      for (bool fuse : {true, false}) {
        RunOptions o;
        o.fuse = fuse;
        auto got = (*loaded)->Run(inputs, o);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(got->result_root, want->result_root) << isa << " x" << threads << (fuse ? " fused" : "");
      }
    }
  }
}

const Instruction* FusedWithEpilogue(const Program& p) {
  for (const Instruction& ins : p.fused_instructions) {
    if (!ins.epilogue.empty()) return &ins;
  }
  return nullptr;
}

TEST(FusionTest, LeakyReluAfterAConvBecomesTwoStepsWithTheUnfusedBits) {
  // conv -> LeakyRelu -> Max with a constant, as in openWakeWord's embedding model.
  Graph g;
  Value x = g.input("x", DType::kF32, {1, 5, 9, 11});
  Conv2DOptions o;
  o.pads = {1, 1, 1, 1};
  Value c = conv2d(x, g.constant(RandomF32({7, 5, 3, 3}, 11), "w"), g.constant(RandomF32({7}, 12), "b"), o);
  g.output("y", maximum(LeakyRelu(g, c, 0.2f), g.scalar(-0.125f)));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->instructions.size(), 5u);  // conv2d, less, mul, where, max
  ASSERT_EQ(p->fused_instructions.size(), 1u);
  const Instruction& fused = p->fused_instructions[0];
  EXPECT_EQ(fused.op, kernels::Op::kConv2D);
  EXPECT_EQ(fused.fused_count, 5);
  ASSERT_EQ(fused.epilogue.size(), 3u);
  EXPECT_EQ(fused.epilogue[0].op, kernels::Op::kMul);
  EXPECT_EQ(fused.epilogue[1].op, kernels::Op::kMax);
  EXPECT_EQ(fused.epilogue[2].op, kernels::Op::kMax);
  // max(v, m): v is the conv's value (chain value 0), m the mul step's (1).
  EXPECT_FALSE(fused.epilogue[1].operands[0].is_input);
  EXPECT_EQ(fused.epilogue[1].operands[0].index, 0);
  EXPECT_EQ(fused.epilogue[1].operands[1].index, 1);
  ExpectUnfusedBits(*p, {{"x", RandomF32({1, 5, 9, 11}, 13, 3.0f)}});
}

TEST(FusionTest, LeakyReluKeepsTheBitsOfEverySpecialValue) {
  // Infinities, signed zeros, subnormals, NaNs with and without a payload, ordinary values; the
  // head (x * 1) writes the canonical NaN, as the pattern requires. Slopes from a subnormal to 1.
  const uint32_t kBits[] = {0xFF800000u, 0xBF800000u, 0x80000001u, 0x807FFFFFu, 0x80000000u, 0x00000000u,
                            0x00000001u, 0x3F800000u, 0x7F800000u, 0x7FC00000u, 0xFFC12345u, 0x7F7FFFFFu,
                            0xFF7FFFFFu, 0xC0490FDBu, 0x3EAAAAABu, 0x00800000u};
  Tensor x(DType::kF32, {4, 4});
  for (int i = 0; i < 16; ++i) std::memcpy(x.data_as<float>() + i, &kBits[i], 4);
  for (float alpha : {1e-40f, 0.01f, 0.2f, 1.0f}) {
    SCOPED_TRACE(alpha);
    Graph g;
    Value v = g.input("x", DType::kF32, {4, 4}) * g.scalar(1.0f);
    g.output("y", LeakyRelu(g, v, alpha));
    auto p = CompileGraph(g, nullptr, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    const Instruction* fused = FusedWithEpilogue(*p);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(fused->fused_count, 4);
    EXPECT_EQ(fused->epilogue.size(), 2u);
    ExpectUnfusedBits(*p, {{"x", x}});
  }
}

TEST(FusionTest, LeakyReluOutsideItsConditionsIsNotFused) {
  Tensor x = RandomF32({3, 8}, 14, 2.0f);
  const uint32_t payload = 0xFFC12345u;
  std::memcpy(x.data_as<float>() + 5, &payload, 4);
  // A slope of 0 (+inf * 0 is NaN where the where keeps +inf) or above 1 (max would pick v), and
  // a head that copies bits (identity keeps a NaN payload that max would canonicalize).
  struct Case {
    float alpha;
    bool copying_head;
  };
  for (const Case& c : {Case{0.0f, false}, Case{1.5f, false}, Case{-0.5f, false}, Case{0.2f, true}}) {
    SCOPED_TRACE(c.alpha);
    Graph g;
    Value in = g.input("x", DType::kF32, {3, 8});
    Value v = c.copying_head ? identity(in) : in * g.scalar(1.0f);
    g.output("y", LeakyRelu(g, v, c.alpha));
    auto p = CompileGraph(g, nullptr, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(FusedWithEpilogue(*p), nullptr);
    ExpectUnfusedBits(*p, {{"x", x}});
  }
}

}  // namespace
}  // namespace consensor::executor
