// softmax and layer_norm throughput on one AVX2 thread, against the memory bandwidth
// measured in the same run: memcpy of the same bytes and a plain read-sum of them.
//
//   norm_bench [--benchmark_filter=...]
//
// Each op reads and writes 64 MiB of f32 (rows of 1024 or 4096 floats). Reported:
//   GBps              input bytes per second / 1e9 (for BM_Memcpy: bytes copied; for
//                     BM_ReadSum: bytes read), wall time
//   memcpy_GBps,      best-of-7 memcpy / read-sum rates of the same 64 MiB, measured once
//   readsum_GBps      in this process before the first op
//   vs_memcpy         op GBps / memcpy_GBps
//   vs_readsum        op GBps / readsum_GBps
// (bytes_per_second is google-benchmark's own figure in binary units.) The machine's
// other load shows up in every figure; compare the ratios, not absolute numbers.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "bench/kernel_bench_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace consensor::kernels {
namespace {

constexpr int64_t kBytes = int64_t{64} << 20;
constexpr int64_t kFloats = kBytes / 4;

struct Buffers {
  std::vector<float> x, y, scale, bias;
  Buffers() : x(kFloats), y(kFloats), scale(4096), bias(4096) {
    std::mt19937 rng(1);
    bench_util::FillUniform(rng, &x);
    bench_util::FillUniform(rng, &scale);
    bench_util::FillUniform(rng, &bias);
    std::memset(y.data(), 0, kBytes);  // fault the pages in
  }
};

Buffers& Bufs() {
  static Buffers b;
  return b;
}

__attribute__((noinline)) uint64_t ReadSum(const uint64_t* p, int64_t n) {
  uint64_t s[8] = {};
  for (int64_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  uint64_t t = 0;
  for (uint64_t v : s) t += v;
  return t;
}

// Best-of-7 bandwidth in bytes/s, measured once per process.
template <class F>
double BestRate(const F& f) {
  double best = 0;
  for (int r = 0; r < 7; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, kBytes / s);
  }
  return best;
}

double MemcpyRate() {
  static double r = BestRate([] {
    std::memcpy(Bufs().y.data(), Bufs().x.data(), kBytes);
    benchmark::ClobberMemory();
  });
  return r;
}

double ReadSumRate() {
  static double r = BestRate(
      [] { benchmark::DoNotOptimize(ReadSum(reinterpret_cast<const uint64_t*>(Bufs().x.data()), kBytes / 8)); });
  return r;
}

void BM_Memcpy(benchmark::State& state) {
  Buffers& b = Bufs();
  for (auto _ : state) {
    std::memcpy(b.y.data(), b.x.data(), kBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
  state.counters["GBps"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBytes / 1e9, benchmark::Counter::kIsRate);
}

void BM_ReadSum(benchmark::State& state) {
  Buffers& b = Bufs();
  for (auto _ : state) benchmark::DoNotOptimize(ReadSum(reinterpret_cast<const uint64_t*>(b.x.data()), kBytes / 8));
  state.SetBytesProcessed(state.iterations() * kBytes);
  state.counters["GBps"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBytes / 1e9, benchmark::Counter::kIsRate);
}

void RunNorm(benchmark::State& state, Op op) {
  const int64_t row = state.range(0);
  auto backend = bench_util::BackendOrSkip(state, {.num_threads = 1, .isa = "avx2"});
  if (!backend) return;
  Buffers& b = Bufs();
  const double memcpy_rate = MemcpyRate(), readsum_rate = ReadSumRate();
  OpParams p;
  p.axis = 1;
  p.epsilon = 1e-5f;
  const TensorView in[3] = {bench_util::F32View({kFloats / row, row}, b.x.data()),
                            bench_util::F32View({row}, b.scale.data()), bench_util::F32View({row}, b.bias.data())};
  TensorView out = in[0];
  out.data = b.y.data();
  if (!bench_util::TimeKernel(state, *backend, op, p, in, op == Op::kLayerNorm ? 3 : 1, &out)) return;
  state.SetBytesProcessed(state.iterations() * kBytes);
  state.counters["memcpy_GBps"] = memcpy_rate / 1e9;
  state.counters["readsum_GBps"] = readsum_rate / 1e9;
  // Ratios op bytes/s over reference bytes/s: the time the reference would need for the
  // same bytes, divided by the elapsed (real) time of the op.
  const double bytes = static_cast<double>(state.iterations()) * kBytes;
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["vs_memcpy"] = benchmark::Counter(bytes / memcpy_rate, benchmark::Counter::kIsRate);
  state.counters["vs_readsum"] = benchmark::Counter(bytes / readsum_rate, benchmark::Counter::kIsRate);
}

void BM_Softmax(benchmark::State& state) { RunNorm(state, Op::kSoftmax); }
void BM_LayerNorm(benchmark::State& state) { RunNorm(state, Op::kLayerNorm); }

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReadSum)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Softmax)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LayerNorm)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace consensor::kernels
