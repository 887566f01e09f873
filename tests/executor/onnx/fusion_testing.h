// What the ONNX fusion tests share (ConvTransposeFusion, ConvIntegerFusion, QuantizeFusion): a
// one-node model compiled; the reference run and the fused run's checks are in
// tests/executor/fusion_checks.h. A fusion may change no bit of any output, of the result
// root, or of the trace root (a traced run runs the canonical list: docs/DETERMINISM.md 3.1).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "tests/executor/fusion_checks.h"
#include "tests/executor/test_util.h"

namespace consensor::executor::testing {

// Imports and compiles `model` into *program. Use with ASSERT_NO_FATAL_FAILURE.
inline void CompileOneNodeModel(const std::vector<uint8_t>& model, const OnnxImportOptions& options, Program* program) {
  auto imported = ImportOnnx(model, options);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  MemoryBlobSource blobs;
  if (!imported->weights.empty()) blobs.Add(imported->weights);
  auto compiled = CompileGraph(imported->graph, &blobs, Limits{});
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  *program = std::move(compiled).value();
}

}  // namespace consensor::executor::testing
