// Backend self-test: proves, on this machine, that a backend reproduces the CPU reference.
//
// CI checks the CUDA kernels only under emulation; an operator's actual GPU, driver or build
// could still differ, and one differing bit gets an honest operator slashed. So before a node
// signs anything with a non-CPU backend it runs a fixed set of graphs on that backend and on
// the CPU reference (portable ISA, one thread) and compares the output hashes, the result
// root and the trace root. Together the graphs run every op of the executor's op set with
// every dtype it accepts, special values (±0, ±inf, NaN payloads, subnormals, integer
// extremes) and shapes that cross the CUDA kernels' tile and chunk boundaries.
//
// It is a differential check: it shows that the candidate agrees with the CPU reference on
// these inputs, not that either is right. The CPU reference itself is pinned by the golden
// conformance vectors (tests/conformance).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/graph.h"
#include "kernels/backend.h"
#include "kernels/op.h"

namespace consensor::executor {

// kQuick runs in seconds under the CUDA emulation (what consensord runs at startup);
// kFull adds large shapes (long reductions and rows, big GEMMs) and is meant for real GPUs.
enum class SelfTestSize { kQuick, kFull };

std::string_view SelfTestSizeName(SelfTestSize size);  // "quick" | "full"

// One graph of the fixed set, with its deterministic inputs.
struct SelfTestGraph {
  std::string name;
  Graph graph;
  std::map<std::string, Tensor> inputs;
};

// The fixed set for `size`; the same graphs and input bits on every machine and build.
std::vector<SelfTestGraph> BuildSelfTestGraphs(SelfTestSize size);

// The first instruction (canonical order) whose output hash differs from the reference. The
// instructions before it matched, so its inputs were identical: it is where the backends diverge.
struct SelfTestOpMismatch {
  int index = -1;           // instruction index in the compiled program
  std::string op;           // e.g. "matmul"
  std::string node_label;   // e.g. "node 7 (matmul)"
  std::string output_type;  // e.g. "f32[2, 130, 129]"
};

struct SelfTestCase {
  std::string name;
  int ops = 0;  // instructions executed
  bool passed = false;
  double seconds = 0;            // on the candidate: load, run, trace
  double reference_seconds = 0;  // on the CPU reference
  std::string error;             // the candidate failed to run the graph (empty otherwise)
  std::vector<std::string> differing_outputs;
  bool result_root_matches = false;
  bool trace_root_matches = false;
  std::optional<SelfTestOpMismatch> first_differing_op;
  // The first differing element of the first differing output, e.g.
  // "y[17]: expected 0x3f800000, got 0x3f800001 (3 of 1024 elements differ)".
  std::string first_difference;

  // One line: what went wrong (empty when passed).
  std::string Problem() const;
};

struct SelfTestReport {
  std::string candidate;  // backend name, e.g. "cuda:0"
  std::string reference;  // "cpu-portable x1"
  SelfTestSize size = SelfTestSize::kQuick;
  std::vector<SelfTestCase> cases;
  int total_ops = 0;
  double seconds = 0;  // wall time of the whole self-test, reference runs included

  int failed() const;
  bool passed() const { return failed() == 0 && !cases.empty(); }
  // The first failed case, or null.
  const SelfTestCase* first_failure() const;
};

struct SelfTestOptions {
  SelfTestSize size = SelfTestSize::kQuick;
  // Called after each graph, in order (for progress output; may be empty).
  std::function<void(const SelfTestCase&)> on_case;
};

// Runs every graph of the set on the CPU reference and on `candidate`. A candidate that fails
// to run a graph, or gives different bits, fails that case; the report says which. Returns an
// error only when the self-test itself cannot run (the reference backend cannot be created or
// a self-test graph does not compile or run on the reference: a bug, never a verdict on
// the candidate).
StatusOr<SelfTestReport> RunBackendSelfTest(kernels::Backend& candidate, const SelfTestOptions& options = {});

// What the graphs of a set exercise, read from their compiled programs.
struct SelfTestCoverage {
  std::set<kernels::Op> ops;
  // (op, operand dtype): the dtype of the data operand, i.e. input 0, except `where` (input 1,
  // the values) and `gather` (input 0, the data).
  std::set<std::pair<kernels::Op, DType>> op_dtypes;
  std::set<std::pair<DType, DType>> casts;  // (from, to)
};
StatusOr<SelfTestCoverage> SelfTestCoverageOf(SelfTestSize size);

// The operand dtype used by SelfTestCoverage for an instruction with these input dtypes.
DType SelfTestOperandDType(kernels::Op op, const std::vector<DType>& input_dtypes);

// Names of the ops in the executor's op set (AllOpSchemas) that no graph of the set runs;
// empty when the set covers them all.
StatusOr<std::vector<std::string>> SelfTestUncoveredOps(SelfTestSize size);

}  // namespace consensor::executor
