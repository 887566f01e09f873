// The backend self-test: its graphs cover the whole op set, it passes on every real backend
// configuration, and it catches (and names) a backend that differs by a single bit.
#include "executor/selftest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/sha256.h"
#include "executor/op_schema.h"
#include "executor/program.h"
#include "executor/validate.h"
#include "kernels/backend_factory.h"
#include "kernels/cpu/cpu_kernels.h"
#include "test_util.h"
#include "tests/faulty_backend.h"

namespace consensor {
namespace {

using executor::SelfTestSize;
using kernels::Op;
using testing::FaultyBackend;

// Names of the self-test graphs whose compiled program runs `op`.
std::set<std::string> GraphsRunning(Op op) {
  std::set<std::string> names;
  for (const auto& g : executor::BuildSelfTestGraphs(SelfTestSize::kQuick)) {
    auto program = executor::CompileGraph(g.graph, nullptr, {});
    EXPECT_TRUE(program.ok()) << g.name << ": " << program.status().ToString();
    if (!program.ok()) continue;
    for (const auto& ins : program->instructions) {
      if (ins.op == op) names.insert(g.name);
    }
  }
  return names;
}

TEST(SelfTestCoverage, EveryOpOfTheOpSetRuns) {
  for (SelfTestSize size : {SelfTestSize::kQuick, SelfTestSize::kFull}) {
    auto missing = executor::SelfTestUncoveredOps(size);
    ASSERT_TRUE(missing.ok()) << missing.status().ToString();
    std::string list;
    for (const auto& m : *missing) list += m + " ";
    EXPECT_TRUE(missing->empty()) << "ops without a self-test case (add one to executor/selftest.cc): " << list;
    // Every kernel op, too (an op added to kernels/op.h before it reaches the schema table).
    auto coverage = executor::SelfTestCoverageOf(size);
    ASSERT_TRUE(coverage.ok());
    for (int i = 0; i < static_cast<int>(Op::kNumOps); ++i) {
      EXPECT_TRUE(coverage->ops.count(static_cast<Op>(i))) << "op " << kernels::OpName(static_cast<Op>(i));
    }
  }
}

// Inputs and attributes each schema accepts when its operand has dtype `t` (the operand as
// SelfTestOperandDType defines it). An op that needs more than this table gives no accepted
// dtype, and the test below says so.
std::pair<std::vector<executor::TypeInfo>, executor::Attributes> Probe(const executor::OpSchema& s, DType t) {
  const Shape cube = {2, 2, 2, 2};
  std::vector<executor::TypeInfo> in(static_cast<size_t>(s.min_inputs), executor::TypeInfo{t, cube});
  executor::Attributes attrs;
  switch (s.op) {
    case Op::kWhere: in[0].dtype = DType::kBool; break;
    case Op::kGather: in[1] = {DType::kI64, {2}}; break;
    case Op::kLayerNorm: in[1].shape = {2}; break;
    case Op::kConv2D: in[1].shape = {2, 2, 1, 1}; break;
    case Op::kCast: attrs["to"] = DType::kF32; break;
    case Op::kReshape: attrs["shape"] = std::vector<int64_t>{16}; break;
    case Op::kSlice:
      attrs["starts"] = std::vector<int64_t>{0};
      attrs["ends"] = std::vector<int64_t>{1};
      break;
    case Op::kExpand: attrs["shape"] = cube; break;
    case Op::kTopK: attrs["k"] = int64_t{1}; break;
    case Op::kPad: attrs["pads"] = std::vector<int64_t>(8, 0); break;
    case Op::kMaxPool2D:
    case Op::kAvgPool2D: attrs["kernel"] = std::vector<int64_t>{1, 1}; break;
    default: break;
  }
  return {in, attrs};
}

TEST(SelfTestCoverage, EveryAcceptedDTypeOfEveryOpRuns) {
  auto coverage = executor::SelfTestCoverageOf(SelfTestSize::kQuick);
  ASSERT_TRUE(coverage.ok()) << coverage.status().ToString();
  for (const executor::OpSchema& s : executor::AllOpSchemas()) {
    int accepted = 0;
    for (DType t : {DType::kF32, DType::kI32, DType::kI8, DType::kI64, DType::kBool, DType::kF16, DType::kBF16}) {
      auto [in, attrs] = Probe(s, t);
      if (!s.infer(in, attrs).ok()) continue;
      ++accepted;
      EXPECT_TRUE(coverage->op_dtypes.count({s.op, t}))
          << s.name << " with " << DTypeName(t) << " has no self-test case";
    }
    EXPECT_GT(accepted, 0) << "the probe in this test cannot build a valid " << s.name << " node; extend Probe()";
  }
  const DType every[] = {DType::kF32, DType::kI32, DType::kI8, DType::kI64, DType::kBool, DType::kF16, DType::kBF16};
  for (DType from : every) {
    for (DType to : every) {
      EXPECT_TRUE(coverage->casts.count({from, to})) << "cast " << DTypeName(from) << " -> " << DTypeName(to);
    }
  }
}

TEST(SelfTestCoverage, QuickSetIsPartOfTheFullSetAndBuildsTheSameBitsEveryTime) {
  auto quick = executor::BuildSelfTestGraphs(SelfTestSize::kQuick);
  auto again = executor::BuildSelfTestGraphs(SelfTestSize::kQuick);
  auto full = executor::BuildSelfTestGraphs(SelfTestSize::kFull);
  ASSERT_EQ(quick.size(), again.size());
  ASSERT_GT(full.size(), quick.size());
  for (size_t i = 0; i < quick.size(); ++i) {
    EXPECT_EQ(full[i].name, quick[i].name);
    auto a = executor::Validate(quick[i].graph, {});
    auto b = executor::Validate(again[i].graph, {});
    ASSERT_TRUE(a.ok() && b.ok()) << quick[i].name;
    EXPECT_EQ(a->id, b->id) << quick[i].name;
    ASSERT_EQ(quick[i].inputs.size(), again[i].inputs.size());
    for (const auto& [name, t] : quick[i].inputs) {
      EXPECT_EQ(TensorHash(t), TensorHash(again[i].inputs.at(name))) << quick[i].name << " " << name;
    }
  }
}

void ExpectPasses(kernels::Backend& backend, SelfTestSize size) {
  int reported = 0;
  executor::SelfTestOptions options;
  options.size = size;
  options.on_case = [&](const executor::SelfTestCase&) { ++reported; };
  auto report = executor::RunBackendSelfTest(backend, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(reported, static_cast<int>(report->cases.size()));
  EXPECT_EQ(report->reference, "cpu-portable x1");
  int ops = 0;
  for (const auto& c : report->cases) {
    ops += c.ops;
    EXPECT_TRUE(c.passed) << backend.name() << " " << c.name << ": " << c.Problem();
    EXPECT_TRUE(c.Problem().empty());
  }
  EXPECT_EQ(report->total_ops, ops);
  EXPECT_TRUE(report->passed());
  EXPECT_EQ(report->first_failure(), nullptr);
}

TEST(SelfTest, PassesOnTheCpuConfigurations) {
  auto portable = testing::MakeCpu(3, "portable");
  ASSERT_NE(portable, nullptr);
  ExpectPasses(*portable, SelfTestSize::kQuick);
  if (!kernels::cpu::CpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2 on this CPU";
  auto avx2 = testing::MakeCpu(2, "avx2");
  ASSERT_NE(avx2, nullptr);
  ExpectPasses(*avx2, SelfTestSize::kFull);
}

TEST(SelfTest, PassesOnTheEmulatedCudaKernels) {
  kernels::BackendOptions o;
  o.name = "cuda-emu";
  auto emu = kernels::CreateBackend(o);
  ASSERT_TRUE(emu.ok()) << emu.status().ToString();
  ExpectPasses(**emu, SelfTestSize::kQuick);
}

TEST(SelfTest, OneFlippedBitFailsTheGraphAndNamesTheOp) {
  FaultyBackend faulty(Op::kMatMulInt8, FaultyBackend::Fault::kFlipFirstCall);
  auto report = executor::RunBackendSelfTest(faulty);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(faulty.flips(), 1);
  EXPECT_FALSE(report->passed());
  ASSERT_EQ(report->failed(), 1);
  const executor::SelfTestCase* c = report->first_failure();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name, "matmul_i8");
  EXPECT_FALSE(c->trace_root_matches);
  EXPECT_FALSE(c->result_root_matches);
  ASSERT_TRUE(c->first_differing_op.has_value());
  EXPECT_EQ(c->first_differing_op->op, "matmul_i8");
  ASSERT_EQ(c->differing_outputs.size(), 1u);
  EXPECT_NE(c->first_difference.find("[0]: expected 0x"), std::string::npos) << c->first_difference;
  EXPECT_NE(c->first_difference.find("(1 of "), std::string::npos) << c->first_difference;
  EXPECT_NE(c->Problem().find("first differing op #"), std::string::npos) << c->Problem();
  EXPECT_NE(c->Problem().find(" matmul_i8 -> i32["), std::string::npos) << c->Problem();
}

// A corrupted op in the middle of a chain is named, not the ops downstream of it, and every
// graph that runs the op fails.
TEST(SelfTest, AnIntermediateOpIsNamedInEveryGraphThatRunsIt) {
  FaultyBackend faulty(Op::kSoftmax, FaultyBackend::Fault::kFlipEveryCall);
  auto report = executor::RunBackendSelfTest(faulty);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::set<std::string> failed;
  for (const auto& c : report->cases) {
    if (c.passed) continue;
    failed.insert(c.name);
    ASSERT_TRUE(c.first_differing_op.has_value()) << c.name;
    EXPECT_EQ(c.first_differing_op->op, "softmax") << c.name;
  }
  EXPECT_EQ(failed, GraphsRunning(Op::kSoftmax));
  EXPECT_TRUE(failed.count("transformer_block"));
}

TEST(SelfTest, ABackendErrorFailsTheCaseWithTheError) {
  FaultyBackend faulty(Op::kConv2D, FaultyBackend::Fault::kFail);
  auto report = executor::RunBackendSelfTest(faulty);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::set<std::string> failed;
  for (const auto& c : report->cases) {
    if (!c.passed) failed.insert(c.name);
  }
  EXPECT_EQ(failed, GraphsRunning(Op::kConv2D));  // conv2d and f16_bf16
  ASSERT_EQ(report->failed(), 2);
  EXPECT_EQ(report->first_failure()->name, "conv2d");
  EXPECT_NE(report->first_failure()->Problem().find("injected launch failure"), std::string::npos)
      << report->first_failure()->Problem();
}

}  // namespace
}  // namespace consensor
