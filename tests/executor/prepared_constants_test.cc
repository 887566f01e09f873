// Constants prepared once when a program is loaded (Backend::PrepareConstant): the CPU backend
// packs conv2d and matmul weights into its GEMM's panels. The loaded program counts what they
// hold (prepared_bytes, which the node's program cache charges), shares one copy between
// instructions reading the same weights, and gives the bits of a backend that packs nothing.
#include <gtest/gtest.h>

#include <random>

#include "executor/graph.h"
#include "kernels/cpu/gemm.h"
#include "kernels/half.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

// Two matmuls by the same constant weights (one copy), one by other weights whose B has its own
// batches, and a conv.
Graph BuildWeighted() {
  Graph g;
  Value x = g.input("x", DType::kF32, {5, 40});
  Value w = g.constant(RandomF32({40, 20}, 1), "w");
  Value w3 = g.constant(RandomF32({3, 20, 17}, 2), "w3");
  Value h = matmul(tanh(matmul(x, w)), g.constant(RandomF32({20, 40}, 3), "back"));
  Value y = matmul(matmul(h, w), w3);  // [3, 5, 17]
  g.output("y", y);
  Value img = g.input("img", DType::kF32, {1, 4, 7, 9});
  Conv2DOptions o;
  o.pads = {1, 1, 1, 1};
  g.output("c", conv2d(img, g.constant(RandomF32({6, 4, 3, 3}, 4), "k"), g.constant(RandomF32({6}, 5), "kb"), o));
  return g;
}

TEST(PreparedConstantsTest, MatMulAndConvWeightsAreCountedOnceAndKeepTheBits) {
  auto p = CompileGraph(BuildWeighted(), nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::map<std::string, Tensor> inputs = {{"x", RandomF32({5, 40}, 7, 3.0f)}, {"img", RandomF32({1, 4, 7, 9}, 8)}};

  auto portable = MakeCpu(1, "portable");
  auto reference = LoadedProgram::Load(*p, portable.get());
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  EXPECT_EQ((*reference)->prepared_bytes(), 0);  // the portable GEMM packs nothing ahead
  auto want = (*reference)->Run(inputs, {});
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  if (!kernels::cpu::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2: nothing is packed";
  // w [40, 20] once (columns padded to 32), back [20, 40] (48), w3 three [20, 17] (32 each),
  // and the conv's 6 filters of 36 taps as one 6-row panel.
  const int64_t expect = int64_t{sizeof(float)} * (40 * 32 + 20 * 48 + 3 * 20 * 32 + 6 * 36);
  for (int threads : {1, 2, 8}) {
    auto avx2 = MakeCpu(threads, "avx2");
    auto loaded = LoadedProgram::Load(*p, avx2.get());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->prepared_bytes(), expect) << threads << " threads";
    for (bool fuse : {true, false}) {
      RunOptions o;
      o.fuse = fuse;
      auto got = (*loaded)->Run(inputs, o);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->result_root, want->result_root) << threads << " threads, fuse " << fuse;
    }
  }
}

Tensor RandomI8(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kI8, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<int8_t>()[i] = static_cast<int8_t>(rng() & 0xFF);
  return t;
}

TEST(PreparedConstantsTest, Int8MatMulWeightsArePackedOnceForTheAmxOrVnniKernel) {
  // matmul_i8 by constant weights (as ConvInteger and MatMulInteger import): on a CPU with AMX the
  // AVX2 engine packs them once into the AMX kernel's panels (K padded to 64), else on a CPU with
  // AVX-512 VNNI into the VNNI kernel's panels of byte quads (K padded to 4); the bits are those
  // of the portable loop either way.
  Graph g;
  Value x = g.input("x", DType::kI8, {13, 301});
  g.output("y", matmul_i8(x, g.constant(RandomI8({301, 40}, 1), "w")));
  Value x2 = g.input("x2", DType::kI8, {2, 5, 37});
  g.output("y2", matmul_i8(x2, g.constant(RandomI8({2, 37, 17}, 2), "w2")));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::map<std::string, Tensor> inputs = {{"x", RandomI8({13, 301}, 3)}, {"x2", RandomI8({2, 5, 37}, 4)}};
  auto portable = MakeCpu(1, "portable");
  auto reference = LoadedProgram::Load(*p, portable.get());
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  EXPECT_EQ((*reference)->prepared_bytes(), 0);
  auto want = (*reference)->Run(inputs, {});
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  if (!kernels::cpu::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2: nothing is packed";
  // w: 48 columns (40 padded) by 304 k (301 padded; 320 for AMX); w2: two batches of 32 columns by
  // 40 k (64 for AMX).
  const int64_t expect = kernels::cpu::gemm::CpuHasAmxInt8()      ? 48 * 320 + 2 * 32 * 64
                         : kernels::cpu::gemm::CpuHasAvx512Vnni() ? 48 * 304 + 2 * 32 * 40
                                                                  : 0;
  for (int threads : {1, 2, 8}) {
    auto avx2 = MakeCpu(threads, "avx2");
    auto loaded = LoadedProgram::Load(*p, avx2.get());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->prepared_bytes(), expect) << threads << " threads";
    auto got = (*loaded)->Run(inputs, {});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->result_root, want->result_root) << threads << " threads";
  }
}

// The values of RandomF32 rounded to f16.
Tensor RandomF16(const Shape& shape, uint32_t seed) {
  const Tensor f = RandomF32(shape, seed);
  Tensor h(DType::kF16, shape);
  for (int64_t i = 0; i < h.num_elements(); ++i)
    h.data_as<uint16_t>()[i] = consensor::half::F32ToF16(f.data_as<float>()[i]);
  return h;
}

TEST(PreparedConstantsTest, HalfConvWeightsArePackedWideOnceAndKeepTheBits) {
  // An f16 conv2d: its weights are widened to f32 and packed once at load on the AVX2 GEMM path
  // (twice their f16 bytes), and the result is the portable backend's, which packs nothing.
  Graph g;
  Value img = g.input("img", DType::kF16, {1, 7, 9, 11});
  Conv2DOptions o;
  o.pads = {1, 1, 1, 1};
  g.output("c", conv2d(img, g.constant(RandomF16({30, 7, 3, 3}, 11), "k"), g.constant(RandomF16({30}, 12), "kb"), o));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::map<std::string, Tensor> inputs = {{"img", RandomF16({1, 7, 9, 11}, 13)}};
  auto portable = MakeCpu(1, "portable");
  auto reference = LoadedProgram::Load(*p, portable.get());
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  EXPECT_EQ((*reference)->prepared_bytes(), 0);
  auto want = (*reference)->Run(inputs, {});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  if (!kernels::cpu::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2: nothing is packed";
  for (int threads : {1, 2, 8}) {
    auto avx2 = MakeCpu(threads, "avx2");
    auto loaded = LoadedProgram::Load(*p, avx2.get());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->prepared_bytes(), int64_t{sizeof(float)} * 30 * 7 * 9) << threads << " threads";
    auto got = (*loaded)->Run(inputs, {});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->result_root, want->result_root) << threads << " threads";
  }
}

}  // namespace
}  // namespace consensor::executor
