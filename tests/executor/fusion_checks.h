// What every fusion test checks (docs/DETERMINISM.md 3.1): a compiled program's fused list
// against its unfused lowering, bit for bit, in every output, the result root and the trace
// root (a traced run runs the canonical list). No ONNX import here: tests of hand-built graphs
// use it too (tests/executor/fusion_test.cc); tests/executor/onnx/fusion_testing.h adds the
// one-node ONNX models.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "executor/program.h"
#include "executor/runtime.h"
#include "tests/executor/test_util.h"

namespace consensor::executor::testing {

// Every canonical instruction is covered by exactly one fused one.
inline void ExpectFusedListCoversEveryInstruction(const Program& program) {
  int covered = 0;
  for (const Instruction& ins : program.fused_instructions) covered += ins.fused_count;
  EXPECT_EQ(covered, static_cast<int>(program.instructions.size()));
}

// The reference: the unfused lowering, traced, on the portable ISA at one thread.
inline void RunUnfusedReference(const Program& program, const std::map<std::string, Tensor>& inputs,
                                RunResult* reference) {
  auto cpu = consensor::testing::MakeCpu(1, "portable");
  auto loaded = LoadedProgram::Load(program, cpu.get());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  RunOptions unfused;
  unfused.fuse = false;
  unfused.trace = true;
  auto run = (*loaded)->Run(inputs, unfused);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  *reference = std::move(run).value();
}

// Runs `program` fused on a CPU backend of `isa` at `threads`, and then traced, and expects the
// reference's bytes in every output, its result root and its trace root.
inline void ExpectFusedRunGivesReferenceBits(const Program& program, const std::string& isa, int threads,
                                             const std::map<std::string, Tensor>& inputs, const RunResult& reference) {
  auto cpu = consensor::testing::MakeCpu(threads, isa);
  ASSERT_NE(cpu, nullptr);
  auto loaded = LoadedProgram::Load(program, cpu.get());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto got = (*loaded)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->outputs.size(), reference.outputs.size());
  for (size_t o = 0; o < got->outputs.size(); ++o) {
    const Tensor& y = got->outputs[o].tensor;
    const Tensor& want = reference.outputs[o].tensor;
    ASSERT_EQ(y.dtype(), want.dtype());
    ASSERT_EQ(y.shape(), want.shape());
    int64_t first_diff = -1;
    for (int64_t i = 0; i < y.byte_size() && first_diff < 0; ++i) {
      if (y.data()[i] != want.data()[i]) first_diff = i;
    }
    EXPECT_EQ(first_diff, -1) << "output " << o << " byte " << first_diff << ": got 0x" << std::hex
                              << (first_diff >= 0 ? int{y.data()[first_diff]} : 0) << ", want 0x"
                              << (first_diff >= 0 ? int{want.data()[first_diff]} : 0);
  }
  EXPECT_EQ(got->result_root, reference.result_root);
  RunOptions traced;
  traced.trace = true;
  auto trace = (*loaded)->Run(inputs, traced);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->trace_root, reference.trace_root);
}

}  // namespace consensor::executor::testing
