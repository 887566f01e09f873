// Functional tests of the `consensor` binary: real processes, real files, exit codes and
// messages for every class of bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/npy.h"
#include "executor/graph.h"
#include "executor/selftest.h"
#include "executor/serialize.h"
#include "tests/functional/daemon_harness.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using executor::Graph;
using executor::Value;

using ProcResult = testing_support::CommandResult;

std::string Binary() { return testing_support::CliBinary(); }

ProcResult RunCli(const std::string& args) { return testing_support::RunCommand(Binary(), args); }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-cli-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string SaveGraph(const Graph& g, const std::string& name) {
    EXPECT_TRUE(executor::SaveGraphFile(Path(name), g).ok());
    return Path(name);
  }
  std::string SaveNpy(const Tensor& t, const std::string& name) {
    EXPECT_TRUE(WriteNpyFile(Path(name), t).ok());
    return Path(name);
  }
  std::string WriteBytes(const std::string& name, const std::string& bytes) {
    std::ofstream(Path(name), std::ios::binary) << bytes;
    return Path(name);
  }

  // x[4,8] -> softmax(tanh(x @ w + b)) with reductions and a transcendental mix.
  Graph SmallModel() {
    Graph g;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> d(-1, 1);
    Tensor w(DType::kF32, {8, 6}), b(DType::kF32, {6});
    for (int i = 0; i < w.num_elements(); ++i) w.data_as<float>()[i] = d(rng);
    for (int i = 0; i < b.num_elements(); ++i) b.data_as<float>()[i] = d(rng);
    Value x = g.input("x", DType::kF32, {4, 8});
    Value h = tanh(matmul(x, g.constant(w)) + g.constant(b));
    g.output("y", softmax(h, -1));
    g.output("s", reduce_sum(h, {0}));
    return g;
  }
  Tensor SmallInput() {
    Tensor x(DType::kF32, {4, 8});
    for (int i = 0; i < 32; ++i) x.data_as<float>()[i] = 0.1f * static_cast<float>(i - 16);
    return x;
  }

  fs::path dir_;
};

TEST_F(CliTest, RunPrintsHashesAndWritesOutputs) {
  std::string graph = SaveGraph(SmallModel(), "model.cgraph");
  std::string x = SaveNpy(SmallInput(), "x.npy");
  auto r = RunCli("run " + graph + " --input x=" + x + " --out " + Path("out") + " --trace");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("output   s f32[6] sha256:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output   y f32[4, 6] sha256:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trace    "), std::string::npos);
  auto y = ReadNpyFile(Path("out/y.npy"), {});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->shape(), (Shape{4, 6}));
}

TEST_F(CliTest, IdenticalAcrossThreadsAndIsas) {
  std::string graph = SaveGraph(SmallModel(), "model.cgraph");
  std::string x = SaveNpy(SmallInput(), "x.npy");
  auto strip_backend = [](std::string s) {
    size_t p = s.find("backend");
    size_t e = s.find('\n', p);
    return s.erase(p, e - p);
  };
  auto base = RunCli("run " + graph + " --input x=" + x + " --trace --threads 1 --isa portable");
  ASSERT_EQ(base.exit_code, 0) << base.out;
  for (std::string isa : {"portable", "auto"}) {
    for (int threads : {1, 2, 8}) {
      auto r = RunCli("run " + graph + " --input x=" + x + " --trace --threads " + std::to_string(threads) + " --isa " +
                      isa);
      ASSERT_EQ(r.exit_code, 0) << r.out;
      EXPECT_EQ(strip_backend(r.out), strip_backend(base.out)) << isa << " x" << threads;
    }
  }
}

TEST_F(CliTest, BackendsAgreeAndGpuFallbackIsOptIn) {
  std::string graph = SaveGraph(SmallModel(), "model.cgraph");
  std::string x = SaveNpy(SmallInput(), "x.npy");
  auto result_lines = [](const std::string& s) { return s.substr(s.find("output")); };
  auto cpu = RunCli("run " + graph + " --input x=" + x + " --trace");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out;
  auto emu = RunCli("run " + graph + " --input x=" + x + " --trace --backend cuda-emu");
  ASSERT_EQ(emu.exit_code, 0) << emu.out;
  EXPECT_NE(emu.out.find("backend  cuda-emu"), std::string::npos) << emu.out;
  EXPECT_EQ(result_lines(emu.out), result_lines(cpu.out));

  auto gpu = RunCli("run " + graph + " --input x=" + x + " --trace --backend cuda");
  if (gpu.exit_code == 0) {
    EXPECT_EQ(result_lines(gpu.out), result_lines(cpu.out));  // a machine with a GPU
  } else {
    EXPECT_EQ(gpu.exit_code, 1);
    EXPECT_NE(gpu.out.find("CUDA"), std::string::npos) << gpu.out;
    auto fallback = RunCli("run " + graph + " --input x=" + x + " --trace --backend cuda --fallback-cpu");
    ASSERT_EQ(fallback.exit_code, 0) << fallback.out;
    EXPECT_NE(fallback.out.find("falling back to the CPU"), std::string::npos);
    EXPECT_EQ(result_lines(fallback.out), result_lines(cpu.out));
  }
  // A backend name that does not exist is a usage error, even with --fallback-cpu.
  auto unknown = RunCli("run " + graph + " --input x=" + x + " --backend tpu --fallback-cpu");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.out.find("--backend must be cpu, cuda or cuda-emu, got 'tpu'"), std::string::npos) << unknown.out;
}

// `consensor selftest`: the emulated CUDA kernels reproduce the CPU reference graph by graph;
// a GPU backend that cannot run here is a clear error (exit 1); bad usage exits 2.
TEST_F(CliTest, SelfTestChecksABackendAgainstTheCpuReference) {
  auto emu = RunCli("selftest --backend cuda-emu");
  ASSERT_EQ(emu.exit_code, 0) << emu.out;
  EXPECT_NE(emu.out.find("selftest  cuda-emu against cpu-portable x1 (quick set)\n"
                         "device    cuda-emu (the CUDA kernels under the SIMT emulation, on the CPU)\n"),
            std::string::npos)
      << emu.out;
  const auto graphs = executor::BuildSelfTestGraphs(executor::SelfTestSize::kQuick);
  for (const auto& g : graphs) {
    const size_t line = emu.out.find("\n" + g.name + " ");
    ASSERT_NE(line, std::string::npos) << g.name << "\n" << emu.out;
    const std::string text = emu.out.substr(line + 1, emu.out.find('\n', line + 1) - line - 1);
    EXPECT_NE(text.find(" ops  PASS  "), std::string::npos) << text;
    EXPECT_NE(text.find(" s"), std::string::npos) << text;
  }
  EXPECT_NE(emu.out.find("PASS      " + std::to_string(graphs.size()) + " of " + std::to_string(graphs.size()) +
                         " graphs match the CPU reference bit for bit"),
            std::string::npos)
      << emu.out;

  auto json = RunCli("selftest --json --threads 2 --isa portable");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_NE(json.out.find("\"passed\": true"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"backend\": \"cpu-portable x2\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"device\": \"cpu-portable\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"name\": \"transformer_block\""), std::string::npos) << json.out;

  auto gpu = RunCli("selftest --backend cuda");
  if (gpu.exit_code == 0) {
    EXPECT_NE(gpu.out.find("graphs match the CPU reference bit for bit"), std::string::npos) << gpu.out;  // a GPU
  } else {
    EXPECT_EQ(gpu.exit_code, 1) << gpu.out;
    EXPECT_NE(gpu.out.find("error: backend 'cuda' is not available: "), std::string::npos) << gpu.out;
    EXPECT_EQ(gpu.out.find("PASS"), std::string::npos) << gpu.out;
  }

  for (const char* bad : {"selftest --backend tpu", "selftest --threads 0", "selftest --device -1", "selftest extra",
                          "selftest --isa sse", "selftest --fast"}) {
    auto r = RunCli(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("usage: consensor selftest"), std::string::npos) << bad << "\n" << r.out;
  }
  auto help = RunCli("selftest --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(RunCli("--help").out.find("selftest [--backend"), std::string::npos);
}

TEST_F(CliTest, InspectShowsOpsFlopsAndMemory) {
  std::string graph = SaveGraph(SmallModel(), "model.cgraph");
  auto r = RunCli("inspect " + graph);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s :
       {"graph id", "input        x f32[4, 8]", "peak memory", "flops", "matmul", "softmax", "reduce_sum"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

struct BadCase {
  std::string name;
  std::string expect;  // substring of the message
};

TEST_F(CliTest, MalformedGraphFiles) {
  std::string x = SaveNpy(SmallInput(), "x.npy");
  std::string good = SaveGraph(SmallModel(), "good.cgraph");
  std::string bytes;
  {
    std::ifstream f(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::mt19937 rng(1);
  std::string garbage(300, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  struct Case {
    std::string file;
    std::string expect;
  } cases[] = {
      {WriteBytes("empty.cgraph", ""), "format version"},
      {WriteBytes("garbage.cgraph", garbage), "graph"},
      {WriteBytes("truncated.cgraph", bytes.substr(0, bytes.size() / 2)), "graph"},
      {WriteBytes("text.pbtxt", "format_version: 1\nnodes { op: \"relu\" inputs: \"nope\" outputs: \"y\" }\n"),
       "undefined value 'nope'"},
      {WriteBytes("badtext.pbtxt", "this is { not text proto"), "text format"},
      {WriteBytes("version.pbtxt", "format_version: 7\n"), "version 7"},
      {Path("missing.cgraph"), "cannot open"},
  };
  for (const auto& c : cases) {
    auto r = RunCli("run " + c.file + " --input x=" + x);
    EXPECT_EQ(r.exit_code, 1) << c.file << "\n" << r.out;
    EXPECT_NE(r.out.find("error:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.file << ": " << r.out;
  }
  // Every truncation of a valid file is an error or a valid smaller graph, never a crash.
  for (size_t cut = 0; cut < bytes.size(); cut += std::max<size_t>(1, bytes.size() / 40)) {
    std::string f = WriteBytes("cut.cgraph", bytes.substr(0, cut));
    auto r = RunCli("inspect " + f);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << "cut " << cut << ": " << r.out;
  }
}

TEST_F(CliTest, InvalidGraphsAreRejectedBeforeRunning) {
  std::string x = SaveNpy(SmallInput(), "x.npy");
  auto expect_error = [&](const std::string& text, const std::string& expect) {
    std::string f =
        WriteBytes("g.pbtxt", "format_version: 1\ninputs { name: \"x\" dtype: DTYPE_F32 shape: 4 shape: 8 }\n" + text);
    auto r = RunCli("run " + f + " --input x=" + x);
    EXPECT_EQ(r.exit_code, 1) << text << "\n" << r.out;
    EXPECT_NE(r.out.find(expect), std::string::npos) << text << "\n" << r.out;
  };
  expect_error("nodes { op: \"frobnicate\" inputs: \"x\" outputs: \"y\" }\noutputs { name: \"y\" value: \"y\" }",
               "unknown op 'frobnicate'");
  expect_error("nodes { op: \"add\" inputs: \"x\" outputs: \"y\" }\noutputs { name: \"y\" value: \"y\" }", "inputs");
  expect_error(
      "nodes { op: \"matmul\" inputs: \"x\" inputs: \"x\" outputs: \"y\" }\noutputs { name: \"y\" value: \"y\" }",
      "matmul");
  expect_error(
      "nodes { op: \"exp\" inputs: \"b\" outputs: \"a\" }\nnodes { op: \"exp\" inputs: \"a\" outputs: \"b\" }\n"
      "outputs { name: \"y\" value: \"b\" }",
      "cycle");
  expect_error(
      "nodes { op: \"reduce_sum\" inputs: \"x\" outputs: \"y\" attributes { name: \"axes\" ints { values: 5 } } }\n"
      "outputs { name: \"y\" value: \"y\" }",
      "out of range");
  expect_error(
      "nodes { op: \"slice\" inputs: \"x\" outputs: \"y\" attributes { name: \"starts\" ints { values: 0 } }"
      " attributes { name: \"ends\" ints { values: 2 } } attributes { name: \"axes\" ints { values: 9 } } }\n"
      "outputs { name: \"y\" value: \"y\" }",
      "slice");
  expect_error(
      "nodes { op: \"transpose\" inputs: \"x\" outputs: \"y\" attributes { name: \"perm\" ints { values: 0 values: 0 } } }\n"
      "outputs { name: \"y\" value: \"y\" }",
      "transpose");
  expect_error(
      "nodes { op: \"relu\" inputs: \"x\" outputs: \"y\" attributes { name: \"alpha\" f: 1 } }\n"
      "outputs { name: \"y\" value: \"y\" }",
      "unknown attribute 'alpha'");
  expect_error("outputs { name: \"y\" value: \"nope\" }", "undefined value 'nope'");
  expect_error("", "no outputs");
  expect_error(
      "constants { name: \"c\" inline { dtype: DTYPE_F32 shape: 3 data: \"abc\" } }\noutputs { name: \"y\" value: \"c\" }",
      "needs 12 bytes");
}

TEST_F(CliTest, BadInputsAndCaps) {
  std::string graph = SaveGraph(SmallModel(), "model.cgraph");
  std::string good = SaveNpy(SmallInput(), "x.npy");
  std::string wrong_dtype = SaveNpy(Tensor(DType::kI32, {4, 8}), "xi.npy");
  std::string wrong_shape = SaveNpy(Tensor(DType::kF32, {8, 4}), "xs.npy");
  std::string truncated = WriteBytes("xt.npy", std::string("\x93NUMPY\x01\x00", 8) + "v");
  struct Case {
    std::string args;
    int code;
    std::string expect;
  } cases[] = {
      {"run " + graph + " --input x=" + wrong_dtype, 1, "must be f32[4, 8], got i32[4, 8]"},
      {"run " + graph + " --input x=" + wrong_shape, 1, "must be f32[4, 8], got f32[8, 4]"},
      {"run " + graph + " --input x=" + truncated, 1, "input 'x'"},
      {"run " + graph, 1, "missing input 'x'"},
      {"run " + graph + " --input x=" + good + " --input q=" + good, 1, "no input named 'q'"},
      {"run " + graph + " --input x=" + Path("nope.npy"), 1, "nope.npy"},
      {"run " + graph + " --input x=" + good + " --max-flops 10", 1, "over the cap"},
      {"run " + graph + " --input x=" + good + " --max-elements 16", 1, "over the cap"},
      {"run " + graph + " --input x=" + good + " --max-memory 256", 1, "over the cap"},
      {"run " + graph + " --input x=" + good + " --threads 0", 2, "--threads"},
      {"run " + graph + " --input x=" + good + " --isa sse9", 2, "--isa must be auto, avx2 or portable"},
      {"run " + graph + " --input x=" + good + " --device 1024", 2, "--device"},
      {"run " + graph + " --input x=" + good + " --threads 257", 2, "--threads"},
      {"run " + graph + " --input x", 2, "NAME=FILE.npy"},
      {"run " + graph + " --bogus", 2, "unknown option"},
      {"frobnicate", 2, "unknown command"},
      {"", 2, "usage"},
  };
  for (const auto& c : cases) {
    auto r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST_F(CliTest, ShippedExampleRuns) {
  std::string src = testing_support::SourceDir();
  auto r = RunCli("run " + src + "/examples/mlp.cgraph --input x=" + src + "/examples/mlp_x.npy");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("output   probs f32[8, 10]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output   class i64[8]"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace consensor
