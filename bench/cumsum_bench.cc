// cumsum (DETERMINISM.md 4.6a) against reduce_sum over the same axis of the same 16 MiB of f32,
// in one run: the sequential chain per line against the canonical sum, which reads the same
// bytes but writes one value per line. Two layouts: the axis innermost ([4096, 1024], axis 1:
// each chain is a scalar dependency chain) and outermost ([1024, 4096], axis 0: 64 lines side
// by side, vectorized in the AVX2 build). Portable and AVX2 builds, 1 and 2 threads.
//
//   cumsum_bench [--benchmark_filter=...]
//
// Compare each cumsum's time with the reduce_sum of the same arguments; the machine's other
// load shows up in every figure.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace consensor::kernels {
namespace {

constexpr int64_t kFloats = int64_t{4} << 20;  // 16 MiB

// args: axis (0 or 1), isa (0 portable, 1 avx2), threads; the op is cumsum or reduce_sum.
void Run(benchmark::State& state, Op op) {
  const int64_t axis = state.range(0);
  const std::string isa = state.range(1) ? "avx2" : "portable";
  auto backend = bench_util::BackendOrSkip(state, {.num_threads = static_cast<int>(state.range(2)), .isa = isa});
  if (!backend) return;
  static std::vector<float> x = [] {
    std::vector<float> v(kFloats);
    std::mt19937 rng(1);
    bench_util::FillUniform(rng, &v);
    return v;
  }();
  std::vector<float> y(kFloats, 0.0f);
  OpParams p;
  p.axis = axis;
  p.axes = {axis};
  p.keepdims = true;
  const TensorView in = bench_util::F32View({axis == 1 ? 4096 : 1024, axis == 1 ? 1024 : 4096}, x.data());
  TensorView out = in;
  if (op == Op::kReduceSum) out.dims[axis] = 1;
  out.data = y.data();
  if (!bench_util::TimeKernel(state, *backend, op, p, &in, 1, &out)) return;
  state.SetBytesProcessed(state.iterations() * kFloats * 4);
}

void BM_CumSum(benchmark::State& state) { Run(state, Op::kCumSum); }
void BM_ReduceSum(benchmark::State& state) { Run(state, Op::kReduceSum); }

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"axis", "avx2", "threads"});
  for (int64_t axis : {1, 0})
    for (int64_t avx2 : {0, 1})
      for (int64_t threads : {1, 2}) b->Args({axis, avx2, threads});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_CumSum)->Apply(Args);
BENCHMARK(BM_ReduceSum)->Apply(Args);

}  // namespace
}  // namespace consensor::kernels
