// Instructions that keep every element where it is (reshape, identity, a transpose of unit dims,
// ...) share their input's memory and run no kernel (docs/DETERMINISM.md 3.2). The memory plan must keep that memory
// until the last use of every value sharing it, never place a later output over it, and keep fused runs disjoint from
// what they read; every run must still give the bits, trace leaves and roots of a copy.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>

#include "executor/graph.h"
#include "kernels/backend_factory.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

int Owner(const Program& p, int buffer) {
  return p.buffers[buffer].alias_of >= 0 ? p.buffers[buffer].alias_of : buffer;
}

bool Disjoint(const Buffer& a, const Buffer& b) {
  return a.bytes == 0 || b.bytes == 0 || a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset;
}

// Replays `list` over the arena in 64-byte chunks (the planner's alignment), recording which
// buffer's value each chunk holds, and expects every read, and the final read of every output,
// to find the value it reads still there: nothing was written over a live value, a placeholder
// or a constant. An alias writes nothing and reads its owner's chunks.
void ExpectNoLiveValueOverwritten(const Program& p, const std::vector<Instruction>& list) {
  std::vector<int> holder(static_cast<size_t>((p.arena_bytes + 63) / 64), -1);
  auto write = [&](int buffer) {
    const Buffer& b = p.buffers[buffer];
    for (int64_t c = b.offset / 64; c < (b.offset + b.bytes + 63) / 64; ++c) holder[c] = Owner(p, buffer);
  };
  auto intact = [&](int buffer) {
    const Buffer& b = p.buffers[buffer];
    for (int64_t c = b.offset / 64; c < (b.offset + b.bytes + 63) / 64; ++c) {
      if (holder[c] != Owner(p, buffer)) return false;
    }
    return true;
  };
  for (const auto& [name, buffer] : p.inputs) write(buffer);
  for (const auto& [buffer, tensor] : p.constants) write(buffer);
  for (const Instruction& ins : list) {
    std::vector<int> reads = ins.inputs;
    reads.insert(reads.end(), ins.epilogue_inputs.begin(), ins.epilogue_inputs.end());
    for (int r : reads) EXPECT_TRUE(intact(r)) << ins.node_label << " reads an overwritten buffer " << r;
    if (ins.alias) {
      const Buffer& out = p.buffers[ins.output];
      const Buffer& in = p.buffers[ins.inputs.at(0)];
      EXPECT_EQ(Owner(p, ins.output), Owner(p, ins.inputs[0])) << ins.node_label;
      EXPECT_EQ(out.offset, in.offset) << ins.node_label;
      EXPECT_EQ(out.bytes, in.bytes) << ins.node_label;
      continue;
    }
    EXPECT_EQ(p.buffers[ins.output].alias_of, -1) << ins.node_label << " computes into an alias";
    for (int r : reads) EXPECT_TRUE(Disjoint(p.buffers[ins.output], p.buffers[r])) << ins.node_label;
    write(ins.output);
  }
  for (const auto& [name, buffer] : p.outputs) EXPECT_TRUE(intact(buffer)) << "output " << name;
}

void ExpectPlanSound(const Program& p) {
  SCOPED_TRACE("canonical list");
  ExpectNoLiveValueOverwritten(p, p.instructions);
  if (!p.fused_instructions.empty()) {
    SCOPED_TRACE("fused list");
    ExpectNoLiveValueOverwritten(p, p.fused_instructions);
  }
}

int CountAliases(const Program& p) {
  int n = 0;
  for (const Instruction& ins : p.instructions) n += ins.alias ? 1 : 0;
  return n;
}

const NamedTensor& Output(const RunResult& r, const std::string& name) {
  for (const NamedTensor& t : r.outputs) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no output " << name;
  return r.outputs.at(0);
}

int OutputBuffer(const Program& p, const std::string& name) {
  for (const auto& [output, buffer] : p.outputs) {
    if (output == name) return buffer;
  }
  ADD_FAILURE() << "no output " << name;
  return -1;
}

std::vector<float> Floats(const Tensor& t) { return {t.data_as<float>(), t.data_as<float>() + t.num_elements()}; }

void ExpectSameBytes(const Tensor& got, const Tensor& want, const Shape& shape) {
  EXPECT_EQ(got.shape(), shape);
  ASSERT_EQ(got.byte_size(), want.byte_size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.byte_size()), 0);
}

TEST(AliasTest, ReshapesOfAPlaceholderAndAConstantShareTheirMemoryAndNothingWritesThroughThem) {
  Graph g;
  Value x = g.input("x", DType::kF32, {4, 16});
  Tensor c_data = RandomF32({2, 32}, 3);
  Value c = g.constant(c_data, "c");
  Value x_flat = reshape(x, {64});
  Value c_flat = identity(reshape(c, {64}));  // a chain of two over a constant
  g.output("x_flat", x_flat);                 // a graph output that is an alias of an input
  g.output("c_flat", c_flat);
  g.output("sum", relu(x_flat + c_flat));  // a head and its epilogue reading two aliases
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(CountAliases(*p), 3);
  for (const Instruction& ins : p->instructions) {
    if (!ins.alias) continue;
    const BufferRole role = p->buffers[Owner(*p, ins.output)].role;
    EXPECT_TRUE(role == BufferRole::kInput || role == BufferRole::kConstant) << ins.node_label;
    EXPECT_EQ(p->buffers[ins.output].role, role);
  }
  ASSERT_FALSE(p->fused_instructions.empty());
  ExpectPlanSound(*p);

  auto backend = MakeCpu(2);
  auto loaded = LoadedProgram::Load(*p, backend.get());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  // Two runs with different inputs: the alias follows the placeholder, and the constant's
  // memory is unchanged by the first run.
  for (uint32_t seed : {5u, 6u}) {
    Tensor x_data = RandomF32({4, 16}, seed);
    for (bool trace : {false, true}) {
      RunOptions o;
      o.trace = trace;
      auto r = (*loaded)->Run({{"x", x_data}}, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectSameBytes(Output(*r, "x_flat").tensor, x_data, {64});
      ExpectSameBytes(Output(*r, "c_flat").tensor, c_data, {64});
      const std::vector<float> sum = Floats(Output(*r, "sum").tensor);
      for (int i = 0; i < 64; ++i) {
        const float s = x_data.data_as<float>()[i] + c_data.data_as<float>()[i];
        EXPECT_EQ(sum[i], s > 0.0f ? s : 0.0f) << i;
      }
      if (trace) {
        // An alias's leaf hashes its input's bytes with its own shape: the output's hash.
        for (size_t i = 0; i < p->instructions.size(); ++i) {
          if (p->instructions[i].output == OutputBuffer(*p, "x_flat")) {
            EXPECT_EQ(r->trace[i], Output(*r, "x_flat").hash);
            EXPECT_NE(r->trace[i], TensorHash(x_data));
          }
        }
      }
    }
  }
}

// v = relu(x) is reshaped early (r), read by a chain of same-sized ops that makes the planner
// reuse freed memory, and read again through r, r's reshape and an identity at the end. Without
// keeping v's memory to the last use of r's chain, a chain op would be placed over it.
Graph BuildLateReadOfAnEarlyReshape(bool r_is_output) {
  Graph g;
  Value x = g.input("x", DType::kF32, {4, 64});
  Value v = relu(x);
  Value r = reshape(v, {2, 128});
  Value chain = v * g.scalar(2.0f);
  chain = chain + g.scalar(1.0f);
  chain = exp(chain * g.scalar(0.125f));
  chain = chain - g.scalar(1.0f);
  Value r2 = identity(reshape(r, {256}));
  // concat reads r first, so r and v are computed before the chain; r2 and r are read after it.
  g.output("y", concat({reshape(r, {1, 256}), reshape(chain, {1, 256}), reshape(r2, {1, 256})}, 0));
  if (r_is_output) g.output("r", r);  // then v's memory lives to the end
  g.output("tail", tanh(r2));
  return g;
}

TEST(AliasTest, AnEarlyReshapeReadLateKeepsItsInputsMemoryThroughChainsAndSeveralReaders) {
  for (bool r_is_output : {false, true}) {
    SCOPED_TRACE(r_is_output ? "r is an output" : "r is not an output");
    Graph g = BuildLateReadOfAnEarlyReshape(r_is_output);
    auto p = CompileGraph(g, nullptr, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_GE(CountAliases(*p), 6);
    ExpectPlanSound(*p);

    // The same values without any reshape: v and the chain computed into outputs of their own.
    Graph ref;
    Value x = ref.input("x", DType::kF32, {4, 64});
    Value v = relu(x);
    Value chain = v * ref.scalar(2.0f);
    chain = chain + ref.scalar(1.0f);
    chain = exp(chain * ref.scalar(0.125f));
    chain = chain - ref.scalar(1.0f);
    ref.output("v", v);
    ref.output("chain", chain);
    ref.output("tail", tanh(v));
    auto ref_p = CompileGraph(ref, nullptr, {});
    ASSERT_TRUE(ref_p.ok()) << ref_p.status().ToString();
    EXPECT_EQ(CountAliases(*ref_p), 0);

    const Tensor x_data = RandomF32({4, 64}, 11, 3.0f);
    auto ref_backend = MakeCpu(1, "portable");
    auto ref_loaded = LoadedProgram::Load(*ref_p, ref_backend.get());
    ASSERT_TRUE(ref_loaded.ok());
    auto want = (*ref_loaded)->Run({{"x", x_data}});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const std::vector<float> want_v = Floats(Output(*want, "v").tensor);
    const std::vector<float> want_chain = Floats(Output(*want, "chain").tensor);

    std::vector<std::unique_ptr<kernels::Backend>> backends;
    for (int threads : {1, 2, 8}) backends.push_back(MakeCpu(threads));
    kernels::BackendOptions emu;
    emu.name = "cuda-emu";
    auto emulated = kernels::CreateBackend(emu);
    ASSERT_TRUE(emulated.ok()) << emulated.status().ToString();
    backends.push_back(std::move(emulated).value());
    Hash256 trace_root{};
    for (auto& backend : backends) {
      SCOPED_TRACE(backend->name());
      auto loaded = LoadedProgram::Load(*p, backend.get());
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      for (bool trace : {false, true}) {
        for (bool fuse : {false, true}) {
          RunOptions o;
          o.trace = trace;
          o.fuse = fuse;
          auto got = (*loaded)->Run({{"x", x_data}}, o);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          const std::vector<float> y = Floats(Output(*got, "y").tensor);
          ASSERT_EQ(y.size(), 768u);
          EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 256), want_v);
          EXPECT_EQ(std::vector<float>(y.begin() + 256, y.begin() + 512), want_chain);
          EXPECT_EQ(std::vector<float>(y.begin() + 512, y.end()), want_v);
          if (r_is_output) ExpectSameBytes(Output(*got, "r").tensor, Output(*want, "v").tensor, {2, 128});
          EXPECT_EQ(Floats(Output(*got, "tail").tensor), Floats(Output(*want, "tail").tensor));
          if (!trace) continue;
          ASSERT_EQ(got->trace.size(), p->instructions.size());
          if (trace_root == Hash256{}) trace_root = got->trace_root;
          EXPECT_EQ(got->trace_root, trace_root);
          // Every alias leaf is its input's bytes hashed with the alias's own shape: v's bytes,
          // or for the chain's reshape the chain's.
          for (size_t i = 0; i < p->instructions.size(); ++i) {
            const Instruction& ins = p->instructions[i];
            if (!ins.alias) continue;
            const Buffer& out = p->buffers[ins.output];
            const Tensor& v_bytes = Output(*want, "v").tensor;
            const Tensor& chain_bytes = Output(*want, "chain").tensor;
            EXPECT_TRUE(got->trace[i] == TensorHash(out.dtype, out.shape, v_bytes.bytes()) ||
                        got->trace[i] == TensorHash(out.dtype, out.shape, chain_bytes.bytes()))
                << ins.node_label;
            EXPECT_NE(got->trace[i], TensorHash(v_bytes)) << ins.node_label << ": hashed with its input's shape";
          }
        }
      }
    }
  }
}

// Aliases around fused runs: a conv head reading a reshaped placeholder, an epilogue input that
// is a reshaped placeholder, the run's output reshaped (twice) and read by a second run whose
// elementwise head reads that alias. The chain conv -> add -> relu stops at the reshape. The
// reference computes the same values from inputs given in the final shapes, with no reshape.
TEST(AliasTest, FusedRunsReadAndProduceAliasesAndStayDisjointFromWhatTheyRead) {
  Tensor w_data = RandomF32({4, 4, 3, 3}, 21);
  Tensor b_data = RandomF32({4}, 22);
  Conv2DOptions o;
  o.pads = {1, 1, 1, 1};
  Graph g;
  Value x = g.input("x", DType::kF32, {1, 4, 36});
  Value y = g.input("y", DType::kF32, {4, 36});
  Value run1 = relu(conv2d(reshape(x, {1, 4, 6, 6}), g.constant(w_data, "w"), g.constant(b_data, "b"), o) +
                    reshape(y, {1, 4, 6, 6}));
  Value q = reshape(run1, {1, 144});
  g.output("q", q);
  g.output("z", (reshape(q, {1, 4, 36}) + x) * g.scalar(2.0f));
  auto p = CompileGraph(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(CountAliases(*p), 4);
  int epilogues = 0;
  for (const Instruction& ins : p->fused_instructions) {
    epilogues += ins.epilogue.empty() ? 0 : 1;
    EXPECT_FALSE(ins.alias && !ins.epilogue.empty());
  }
  EXPECT_EQ(epilogues, 2);
  ExpectPlanSound(*p);

  Graph ref;
  Value x4 = ref.input("x", DType::kF32, {1, 4, 6, 6});
  Value y4 = ref.input("y", DType::kF32, {1, 4, 6, 6});
  Value o4 = relu(conv2d(x4, ref.constant(w_data, "w"), ref.constant(b_data, "b"), o) + y4);
  ref.output("q", o4);
  ref.output("z", (o4 + x4) * ref.scalar(2.0f));
  auto ref_p = CompileGraph(ref, nullptr, {});
  ASSERT_TRUE(ref_p.ok()) << ref_p.status().ToString();
  Tensor x_data = RandomF32({1, 4, 36}, 23, 2.0f);
  Tensor y_data = RandomF32({4, 36}, 24, 2.0f);
  auto as = [](const Tensor& t, const Shape& shape) {
    Tensor r(t.dtype(), shape);
    std::memcpy(r.data(), t.data(), t.byte_size());
    return r;
  };
  auto ref_backend = MakeCpu(1, "portable");
  auto ref_loaded = LoadedProgram::Load(*ref_p, ref_backend.get());
  ASSERT_TRUE(ref_loaded.ok());
  RunOptions unfused;
  unfused.fuse = false;
  auto want = (*ref_loaded)->Run({{"x", as(x_data, {1, 4, 6, 6})}, {"y", as(y_data, {1, 4, 6, 6})}}, unfused);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  std::vector<std::unique_ptr<kernels::Backend>> backends;
  for (int threads : {1, 2, 8}) backends.push_back(MakeCpu(threads));
  kernels::BackendOptions emu;
  emu.name = "cuda-emu";
  auto emulated = kernels::CreateBackend(emu);
  ASSERT_TRUE(emulated.ok()) << emulated.status().ToString();
  backends.push_back(std::move(emulated).value());
  std::optional<Hash256> trace_root;
  for (auto& backend : backends) {
    SCOPED_TRACE(backend->name());
    auto loaded = LoadedProgram::Load(*p, backend.get());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    for (bool trace : {false, true}) {
      for (bool fuse : {false, true}) {
        RunOptions ro;
        ro.trace = trace;
        ro.fuse = fuse;
        auto got = (*loaded)->Run({{"x", x_data}, {"y", y_data}}, ro);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ExpectSameBytes(Output(*got, "q").tensor, Output(*want, "q").tensor, {1, 144});
        ExpectSameBytes(Output(*got, "z").tensor, Output(*want, "z").tensor, {1, 4, 36});
        if (!trace) continue;
        if (!trace_root) trace_root = got->trace_root;
        EXPECT_EQ(got->trace_root, *trace_root);
      }
    }
  }
}

// Every op that keeps each element where it is becomes an alias, with the bits its kernel
// writes; the same ops moving an element do not.
TEST(AliasTest, DataMovementThatMovesNoElementIsAnAliasWithTheKernelsBits) {
  struct Case {
    const char* name;
    Shape shape;
    std::function<Value(Value)> op;
    bool alias;
  };
  const std::vector<Case> cases = {
      {"transpose of unit dims",
       {1, 5, 1, 7},
       [](Value x) {
         return transpose(x, {2, 0, 1, 3});
       },
       true},
      {"transpose to a row",
       {3, 1},
       [](Value x) {
         return transpose(x, {1, 0});
       },
       true},
      {"transpose of two long dims",
       {1, 5, 1, 7},
       [](Value x) {
         return transpose(x, {0, 3, 2, 1});
       },
       false},
      {"whole slice",
       {4, 6},
       [](Value x) {
         return slice(x, {0, 0}, {4, 6});
       },
       true},
      {"reversing slice", {4, 6}, [](Value x) { return slice(x, {5}, {-100}, {1}, {-1}); }, false},
      {"slice of rows", {4, 6}, [](Value x) { return slice(x, {1}, {3}); }, false},
      {"expand adding a leading 1",
       {3, 1, 4},
       [](Value x) {
         return expand(x, {1, 3, 1, 4});
       },
       true},
      {"expand stretching",
       {3, 1, 4},
       [](Value x) {
         return expand(x, {3, 2, 4});
       },
       false},
      {"pad of nothing",
       {2, 3},
       [](Value x) {
         return pad(x, {0, 0, 0, 0}, 1.0f);
       },
       true},
      {"pad of a column",
       {2, 3},
       [](Value x) {
         return pad(x, {0, 1, 0, 0}, 1.0f);
       },
       false},
      {"concat of one", {2, 3}, [](Value x) { return concat({x}, 1); }, true},
  };
  auto backend = MakeCpu(2);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Graph g;
    Value x = g.input("x", DType::kF32, c.shape);
    Value y = c.op(x);
    g.output("y", y);
    g.output("z", neg(y));  // another reader
    auto p = CompileGraph(g, nullptr, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_EQ(p->instructions.size(), 2u);
    const Instruction& ins = p->instructions[0];
    EXPECT_EQ(ins.alias, c.alias);
    ExpectPlanSound(*p);
    const Tensor x_data = RandomF32(c.shape, 31);
    auto got = consensor::testing::CompileAndRun(g, {{"x", x_data}}, backend.get(), /*trace=*/true);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    // What the op's kernel writes, called on its own.
    const Buffer& out = p->buffers[ins.output];
    Tensor want(out.dtype, out.shape);
    auto view = [](const Tensor& t, const Shape& shape) {
      kernels::TensorView v;
      v.dtype = t.dtype();
      v.rank = static_cast<int>(shape.size());
      for (int i = 0; i < v.rank; ++i) v.dims[i] = shape[i];
      v.data = const_cast<uint8_t*>(t.data());
      return v;
    };
    kernels::TensorView in_view = view(x_data, ins.input_view_shapes[0]);
    kernels::TensorView out_view = view(want, ins.output_view_shape);
    const kernels::KernelCall call{ins.op, &ins.params, &in_view, 1, &out_view, 1};
    ASSERT_TRUE(backend->Run(call).ok());
    ExpectSameBytes(Output(*got, "y").tensor, want, out.shape);
    EXPECT_EQ(got->trace[0], TensorHash(want));
  }
}

}  // namespace
}  // namespace consensor::executor
