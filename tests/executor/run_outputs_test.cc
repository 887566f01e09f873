// A run's outputs left in the arena (RunOptions::copy_outputs = false, what the node runs with):
// hashed where they are, read from there, and right again when the next run reuses the arena.
#include <gtest/gtest.h>

#include "executor/graph.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

// Outputs of three dtypes, one of them an alias (a reshape that copies nothing) and one an
// output that is also read by a later instruction.
Graph BuildOutputs() {
  Graph g;
  Value x = g.input("x", DType::kF32, {6, 40});
  Value y = matmul(x, g.constant(RandomF32({40, 24}, 1), "w"));
  Value z = tanh(y);
  g.output("y", y);
  g.output("z_flat", reshape(z, {-1}));
  g.output("z_f16", cast(z, DType::kF16));
  g.output("z_i32", cast(matmul(z, g.constant(RandomF32({24, 5}, 2, 8.0f), "v")), DType::kI32));
  return g;
}

TEST(RunOutputsTest, OutputsLeftInTheArenaHashAndReadAsCopiesWhenTheNextRunReusesIt) {
  auto p = CompileGraph(BuildOutputs(), nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::vector<Tensor> xs = {RandomF32({6, 40}, 3, 2.0f), RandomF32({6, 40}, 4, 2.0f)};
  for (int threads : {1, 2, 8}) {
    SCOPED_TRACE(threads);
    auto backend = MakeCpu(threads);
    ASSERT_NE(backend, nullptr);
    // What each input gives on a program of its own, copied out.
    std::vector<RunResult> want;
    for (const Tensor& x : xs) {
      auto fresh = LoadedProgram::Load(*p, backend.get());
      ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
      auto r = (*fresh)->Run({{"x", x}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      want.push_back(std::move(*r));
    }
    auto loaded = LoadedProgram::Load(*p, backend.get());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    // One arena, the inputs alternating: each run's outputs are read before the next one.
    for (size_t i : {0, 1, 0, 1}) {
      SCOPED_TRACE(i);
      for (bool copy : {false, true}) {
        RunOptions o;
        o.copy_outputs = copy;
        auto got = (*loaded)->Run({{"x", xs[i]}}, o);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(got->result_root, want[i].result_root);
        ASSERT_EQ(got->outputs.size(), want[i].outputs.size());
        for (size_t k = 0; k < got->outputs.size(); ++k) {
          const NamedTensor& g = got->outputs[k];
          const NamedTensor& w = want[i].outputs[k];
          SCOPED_TRACE(w.name);
          EXPECT_EQ(g.name, w.name);
          EXPECT_EQ(g.dtype, w.tensor.dtype());
          EXPECT_EQ(g.shape, w.tensor.shape());
          EXPECT_EQ(g.hash, w.hash);
          // Not copied unless asked; the bytes are the value's either way.
          EXPECT_EQ(g.tensor.dtype(), copy ? w.tensor.dtype() : DType::kInvalid);
          ASSERT_EQ(g.bytes().size(), w.tensor.bytes().size());
          EXPECT_TRUE(std::equal(g.bytes().begin(), g.bytes().end(), w.tensor.bytes().begin()));
          EXPECT_EQ(TensorHash(g.dtype, g.shape, g.bytes()), w.hash);
        }
      }
    }
  }
}

TEST(RunOutputsTest, TracedRunWithoutCopiesGivesTheSameRoots) {
  auto p = CompileGraph(BuildOutputs(), nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto backend = MakeCpu(2);
  auto loaded = LoadedProgram::Load(*p, backend.get());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Tensor x = RandomF32({6, 40}, 5);
  RunOptions copied, in_place;
  copied.trace = in_place.trace = true;
  in_place.copy_outputs = false;
  auto a = (*loaded)->Run({{"x", x}}, copied);
  auto b = (*loaded)->Run({{"x", x}}, in_place);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->result_root, b->result_root);
  EXPECT_EQ(a->trace_root, b->trace_root);
  EXPECT_EQ(a->trace, b->trace);
}

}  // namespace
}  // namespace consensor::executor
