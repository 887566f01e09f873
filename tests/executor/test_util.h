// Helpers shared by executor tests.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <string>

#include "common/tensor.h"
#include "executor/graph.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "kernels/cpu/cpu_backend.h"

namespace consensor::testing {

inline Tensor RandomF32(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = dist(rng);
  return t;
}

inline std::unique_ptr<kernels::CpuBackend> MakeCpu(int threads = 1, const std::string& isa = "auto") {
  kernels::CpuBackendOptions o;
  o.num_threads = threads;
  o.isa = isa;
  auto b = kernels::CpuBackend::Create(o);
  return b.ok() ? std::move(b).value() : nullptr;
}

// Compiles and runs; returns the status or the result.
inline StatusOr<executor::RunResult> CompileAndRun(const executor::Graph& g,
                                                   const std::map<std::string, Tensor>& inputs,
                                                   kernels::Backend* backend, bool trace = false,
                                                   const executor::Limits& limits = {}) {
  ASSIGN_OR_RETURN(executor::Program p, executor::CompileGraph(g, nullptr, limits));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(p, backend));
  executor::RunOptions o;
  o.trace = trace;
  return loaded->Run(inputs, o);
}

}  // namespace consensor::testing
