// Runs a compiled program on a backend: one arena sized by the planner, constants
// uploaded once, then the instructions in canonical order.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/program.h"
#include "kernels/backend.h"

namespace consensor::executor {

struct NamedTensor {
  std::string name;
  Tensor tensor;
  Hash256 hash{};
};

struct RunResult {
  std::vector<NamedTensor> outputs;  // sorted by name
  Hash256 result_root{};
  // Filled when tracing: tensor hash of every instruction's output, and their Merkle root.
  std::vector<Hash256> trace;
  Hash256 trace_root{};
};

struct RunOptions {
  bool trace = false;
  // Run Program::fused_instructions when the backend supports their epilogues. A traced run
  // always runs the canonical instructions, whose outputs are the trace's leaves
  // (docs/DETERMINISM.md 3.1). false forces the unfused instructions (same bits; for tests and
  // benchmarks).
  bool fuse = true;
  // Called before every instruction; a non-OK status stops the run and is returned. The node
  // uses it for wall-time caps and shutdown. A single kernel is never interrupted, which is
  // why the FLOP cap bounds the longest one.
  std::function<Status()> check_continue;
};

class LoadedProgram {
 public:
  // Allocates the arena on `backend` and uploads the constants. The program and backend
  // must outlive the LoadedProgram.
  static StatusOr<std::unique_ptr<LoadedProgram>> Load(const Program& program, kernels::Backend* backend);

  // Inputs must match the placeholders exactly: every name present, no extra names,
  // identical dtype and shape.
  StatusOr<RunResult> Run(const std::map<std::string, Tensor>& inputs, const RunOptions& options = {});

 private:
  LoadedProgram(const Program& program, kernels::Backend* backend) : program_(program), backend_(backend) {}
  kernels::TensorView View(int buffer, const Shape& shape) const;
  // Runs one instruction; `views` and `epilogue_views` are scratch.
  Status RunInstruction(const Instruction& ins, std::vector<kernels::TensorView>& views,
                        std::vector<kernels::TensorView>& epilogue_views);
  StatusOr<Tensor> ReadBuffer(int buffer) const;
  // TensorHash of a buffer's value, in place when the arena is host memory.
  StatusOr<Hash256> HashBuffer(int buffer) const;

  const Program& program_;
  kernels::Backend* backend_;
  std::unique_ptr<kernels::Arena> arena_;
  bool fused_supported_ = false;  // the backend takes every epilogue of fused_instructions
};

}  // namespace consensor::executor
