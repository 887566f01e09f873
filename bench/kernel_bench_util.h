// The harness shared by the CPU kernel benchmarks (cumsum_bench, norm_bench): random f32
// inputs, f32 tensor views, a backend or a skipped benchmark, and the timed loop of one kernel
// call.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace consensor::kernels::bench_util {

// Fills `v` with floats uniform in [-8, 8) drawn from `rng`.
inline void FillUniform(std::mt19937& rng, std::vector<float>* v) {
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  for (float& f : *v) f = u(rng);
}

// An f32 view of `data` with dims `dims`.
inline TensorView F32View(std::initializer_list<int64_t> dims, float* data) {
  TensorView v;
  v.dtype = DType::kF32;
  for (int64_t d : dims) v.dims[v.rank++] = d;
  v.data = data;
  return v;
}

// The CPU backend of `options`, or nullptr once the benchmark is marked skipped with the reason.
inline std::unique_ptr<CpuBackend> BackendOrSkip(benchmark::State& state, const CpuBackendOptions& options) {
  auto backend = CpuBackend::Create(options);
  if (!backend.ok()) {
    state.SkipWithError(backend.status().ToString().c_str());
    return nullptr;
  }
  return std::move(backend).value();
}

// Runs `op` on `inputs` into `output` once per iteration; a failing kernel skips the benchmark
// with its error. Returns false then.
inline bool TimeKernel(benchmark::State& state, Backend& backend, Op op, const OpParams& params,
                       const TensorView* inputs, int num_inputs, TensorView* output) {
  KernelCall call;
  call.op = op;
  call.params = &params;
  call.inputs = inputs;
  call.num_inputs = num_inputs;
  call.outputs = output;
  call.num_outputs = 1;
  for (auto _ : state) {
    Status s = backend.Run(call);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return false;
    }
    benchmark::ClobberMemory();
  }
  return true;
}

}  // namespace consensor::kernels::bench_util
