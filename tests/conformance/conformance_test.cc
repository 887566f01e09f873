// Golden conformance vectors: every vector directory under tests/conformance/vectors holds
// graph.cgraph, inputs/*.npy and expected.txt ("output NAME SHA256", "result ROOT",
// "trace ROOT"). Every available backend configuration must reproduce every hash exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/npy.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/backend_factory.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/conformance/backends.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> VectorNames() {
  std::vector<std::string> names;
  fs::path root = fs::path(testing_support::SourceDir()) / "tests/conformance/vectors";
  if (fs::exists(root)) {
    for (const auto& e : fs::directory_iterator(root)) {
      if (e.is_directory()) names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {};

bool UsesCpuOnlyDTypes(const executor::Program& p) {
  for (const auto& b : p.buffers) {
    if (b.dtype == DType::kF64) return true;
  }
  return false;
}

TEST_P(ConformanceTest, AllBackendsMatchGoldenHashes) {
  fs::path dir = fs::path(testing_support::SourceDir()) / "tests/conformance/vectors" / GetParam();
  auto graph = executor::LoadGraphFile((dir / "graph.cgraph").string(), {});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  std::map<std::string, Tensor> inputs;
  if (fs::exists(dir / "inputs")) {
    for (const auto& e : fs::directory_iterator(dir / "inputs")) {
      auto t = ReadNpyFile(e.path().string(), {});
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      inputs.emplace(e.path().stem().string(), std::move(t).value());
    }
  }
  std::map<std::string, std::string> expected;
  std::string result_root, trace_root;
  {
    std::ifstream f(dir / "expected.txt");
    ASSERT_TRUE(f.good()) << "missing expected.txt";
    std::string kind, a, b;
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream s(line);
      s >> kind;
      if (kind == "output") {
        s >> a >> b;
        expected[a] = b;
      } else if (kind == "result") {
        s >> result_root;
      } else if (kind == "trace") {
        s >> trace_root;
      }
    }
  }
  ASSERT_FALSE(expected.empty());
  auto program = executor::CompileGraph(*graph, nullptr, {});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  for (const auto& cfg : testing::AvailableBackends()) {
    SCOPED_TRACE(cfg.name + " " + cfg.isa + " x" + std::to_string(cfg.threads));
    auto backend = kernels::CreateBackend(cfg);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    auto loaded = executor::LoadedProgram::Load(*program, backend->get());
    if (cfg.name != "cpu" && UsesCpuOnlyDTypes(*program)) {
      // The CUDA backends have no f64 kernels (DETERMINISM.md section 2): they must refuse
      // the program at load, not run it. Every integer dtype runs there, checked below.
      EXPECT_EQ(loaded.status().code(), StatusCode::kUnimplemented) << loaded.status().ToString();
      continue;
    }
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    executor::RunOptions ro;
    ro.trace = true;
    auto r = (*loaded)->Run(inputs, ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->outputs.size(), expected.size());
    for (const auto& o : r->outputs) {
      EXPECT_EQ(ToHex(o.hash), expected[o.name]) << "output " << o.name;
    }
    EXPECT_EQ(ToHex(r->result_root), result_root);
    EXPECT_EQ(ToHex(r->trace_root), trace_root);

    // The node's warm path runs many tasks on one loaded program: run it once on other f32
    // values, which leaves different bytes in every intermediate, then on the vector's inputs
    // again. The arena's leftovers must change no bit.
    if (cfg.name != "cpu") continue;  // the CPU configurations are enough; the emulation is slow
    std::map<std::string, Tensor> other_inputs = inputs;
    for (auto& [name, t] : other_inputs) {
      if (t.dtype() != DType::kF32) continue;  // integers may be indices: keep them valid
      for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    }
    ASSERT_TRUE((*loaded)->Run(other_inputs, ro).ok());
    auto again = (*loaded)->Run(inputs, ro);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(ToHex(again->result_root), result_root) << "rerun on the same arena";
    EXPECT_EQ(ToHex(again->trace_root), trace_root) << "rerun on the same arena";
  }
}

TEST(ConformanceSuite, HasVectors) { EXPECT_GE(VectorNames().size(), 40u); }

INSTANTIATE_TEST_SUITE_P(Vectors, ConformanceTest, ::testing::ValuesIn(VectorNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace consensor
