// Copyright (c) Consensor developers.
//
// Throughput of detmath::exp / detmath::tanh against glibc expf / tanhf over arrays of
// 4096 floats. Build:
//   g++ -std=c++20 -O3 -mavx2 -mfma -ffp-contract=off -I. bench/detmath_bench.cc
//       -o detmath_bench -lbenchmark -lbenchmark_main -pthread
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/detmath.h"

namespace {

constexpr size_t kN = 4096;

std::vector<float> Inputs(float lo, float hi) {
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i) / kN;
  return v;
}

template <class F>
void Run(benchmark::State& state, F f, float lo, float hi) {
  const std::vector<float> x = Inputs(lo, hi);
  std::vector<float> y(kN);
  for (auto _ : state) {
    const float* __restrict xp = x.data();
    float* __restrict yp = y.data();
    for (size_t i = 0; i < kN; ++i) yp[i] = f(xp[i]);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kN);
}

void BM_DetmathExp(benchmark::State& s) {
  Run(
      s, [](float v) { return consensor::detmath::exp(v); }, -20.0f, 20.0f);
}
void BM_GlibcExpf(benchmark::State& s) {
  Run(
      s, [](float v) { return ::expf(v); }, -20.0f, 20.0f);
}
void BM_DetmathTanh(benchmark::State& s) {
  Run(
      s, [](float v) { return consensor::detmath::tanh(v); }, -5.0f, 5.0f);
}
void BM_GlibcTanhf(benchmark::State& s) {
  Run(
      s, [](float v) { return ::tanhf(v); }, -5.0f, 5.0f);
}

BENCHMARK(BM_DetmathExp);
BENCHMARK(BM_GlibcExpf);
BENCHMARK(BM_DetmathTanh);
BENCHMARK(BM_GlibcTanhf);

}  // namespace
