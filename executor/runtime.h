// Runs a compiled program on a backend: one arena sized by the planner, constants
// uploaded once, then the instructions in canonical order.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/program.h"
#include "kernels/backend.h"

namespace consensor::executor {

struct NamedTensor {
  std::string name;
  // The value copied out of the arena; empty (DType::kInvalid, no data) when the run was asked
  // not to copy it (RunOptions::copy_outputs), and then `in_arena` holds its bytes.
  Tensor tensor;
  Hash256 hash{};
  DType dtype = DType::kInvalid;
  Shape shape;
  // Without a copy: the value where the run left it, valid until the LoadedProgram runs again
  // or is destroyed.
  std::span<const uint8_t> in_arena;

  std::span<const uint8_t> bytes() const { return tensor.dtype() != DType::kInvalid ? tensor.bytes() : in_arena; }
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
  // Copy each output out of the arena into its own tensor. Each output's hash is taken in the
  // arena either way; a caller that keeps the LoadedProgram until it is done with the outputs
  // (the node, which stores only outputs it does not already hold) reads NamedTensor::bytes()
  // instead of paying for a copy of every output (IS-Net: 7 MiB a run). Ignored, and copied,
  // when the arena is not host memory.
  bool copy_outputs = true;
};

class LoadedProgram {
 public:
  // Allocates the arena on `backend` and uploads the constants. The program and backend
  // must outlive the LoadedProgram.
  static StatusOr<std::unique_ptr<LoadedProgram>> Load(const Program& program, kernels::Backend* backend);

  // Inputs must match the placeholders exactly: every name present, no extra names,
  // identical dtype and shape.
  StatusOr<RunResult> Run(const std::map<std::string, Tensor>& inputs, const RunOptions& options = {});
  // The same, with inputs the caller keeps (a node's decoded-input cache): nothing is copied
  // but into the arena. Every pointer must be non-null.
  StatusOr<RunResult> RunBorrowed(const std::map<std::string, const Tensor*>& inputs, const RunOptions& options = {});

  // Memory held besides the arena: the backend's prepared copies of constant operands (the CPU
  // GEMM's packed conv weights), made once at Load and shared by both instruction lists.
  int64_t prepared_bytes() const { return prepared_bytes_; }

 private:
  LoadedProgram(const Program& program, kernels::Backend* backend) : program_(program), backend_(backend) {}
  kernels::TensorView View(int buffer, const Shape& shape) const;
  // Runs one instruction; `views` and `epilogue_views` are scratch.
  Status RunInstruction(const Instruction& ins, const kernels::PreparedOperand* prepared,
                        std::vector<kernels::TensorView>& views, std::vector<kernels::TensorView>& epilogue_views);
  // Asks the backend for a prepared copy of each constant input of `list`'s instructions;
  // fills `out` (one pointer per instruction, null for none).
  Status PrepareConstants(const std::vector<Instruction>& list, std::vector<const kernels::PreparedOperand*>* out);
  StatusOr<Tensor> ReadBuffer(int buffer) const;
  // TensorHash of a buffer's value, in place when the arena is host memory.
  StatusOr<Hash256> HashBuffer(int buffer) const;

  const Program& program_;
  kernels::Backend* backend_;
  std::unique_ptr<kernels::Arena> arena_;
  bool fused_supported_ = false;  // the backend takes every epilogue of fused_instructions
  // Prepared constants, one per (op, params, input buffer, view shape) so that the canonical and
  // fused lists share them; and each list's pointer per instruction.
  std::map<std::string, std::unique_ptr<kernels::PreparedOperand>> prepared_;
  std::vector<const kernels::PreparedOperand*> prepared_canonical_, prepared_fused_;
  int64_t prepared_bytes_ = 0;
};

}  // namespace consensor::executor
