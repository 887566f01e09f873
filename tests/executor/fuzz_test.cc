// Hostile graph files: thousands of mutations of a valid serialized graph must each end in
// a clear error or a successful run within the caps, never a crash, hang or huge allocation.
// Run under ASan/UBSan by scripts/test.sh.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "executor/serialize.h"
#include "executor/validate.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

std::vector<uint8_t> SeedGraph() {
  Graph g;
  Value x = g.input("x", DType::kF32, {4, 8});
  Value w = g.constant(RandomF32({8, 6}, 1), "w");
  Value h = tanh(matmul(x, w) + g.constant(RandomF32({6}, 2), "b"));
  Value s = softmax(h, -1);
  Value t = transpose(reshape(s, {2, 12}), {1, 0});
  g.output("y", slice(t, {1}, {9}, {0}, {2}));
  g.output("m", reduce_max(layer_norm(h, g.constant(RandomF32({6}, 3))), {0}));
  g.output("c", concat({x, x}, 0));
  g.output("p", max_pool2d(reshape(x, {1, 1, 4, 8}), Pool2DOptions{{2, 2}}));
  return SerializeGraph(g);
}

Tensor InputFor(const TypeInfo& t) {
  Tensor x(t.dtype, t.shape);
  for (int64_t i = 0; i < x.byte_size(); ++i)
    x.data()[i] = t.dtype == DType::kBool ? (i & 1) : static_cast<uint8_t>(i * 37);
  return x;
}

TEST(GraphFuzzTest, MutatedGraphsNeverCrash) {
  const std::vector<uint8_t> seed = SeedGraph();
  Limits limits;
  limits.max_elements_per_tensor = 1 << 16;
  limits.max_total_bytes = 16 << 20;
  limits.max_flops = 100000000;
  limits.max_ops = 1000;
  auto cpu = MakeCpu(2);
  std::mt19937 rng(12345);
  int parsed = 0, validated = 0, ran = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> bytes = seed;
    int mutations = 1 + rng() % 4;
    for (int m = 0; m < mutations; ++m) {
      size_t pos = rng() % bytes.size();
      switch (rng() % 4) {
        case 0: bytes[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: bytes[pos] = static_cast<uint8_t>(rng()); break;
        case 2: bytes.resize(pos + 1); break;
        default: bytes.insert(bytes.begin() + pos, static_cast<uint8_t>(rng())); break;
      }
    }
    auto g = ParseGraph(bytes, false, limits);
    if (!g.ok()) continue;
    ++parsed;
    auto vg = Validate(*g, limits);
    if (!vg.ok()) {
      EXPECT_FALSE(vg.status().message().empty());
      continue;
    }
    ++validated;
    auto p = Compile(*g, *vg, nullptr, limits);
    if (!p.ok()) continue;
    auto loaded = LoadedProgram::Load(*p, cpu.get());
    if (!loaded.ok()) continue;
    std::map<std::string, Tensor> inputs;
    for (int v : vg->placeholders) inputs.emplace(g->values()[v].name, InputFor(vg->types[v]));
    auto r = (*loaded)->Run(inputs);
    if (r.ok()) ++ran;
  }
  std::printf("parsed %d, validated %d, ran %d of 20000\n", parsed, validated, ran);
  // The mutations must reach every stage, or the test proves little.
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(validated, 400);
  EXPECT_GT(ran, 300);
}

}  // namespace
}  // namespace consensor::executor
