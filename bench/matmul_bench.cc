// Single-threaded f32 matmul: Consensor's deterministic AVX2 GEMM vs OpenBLAS cblas_sgemm,
// plus constant weights packed once against packed per call, and the int8 matmul with and
// without the AVX-512 VNNI kernel. Prints a summary table "n ours
// openblas ratio" at the end.
//
//   matmul_bench [--benchmark_repetitions=3] [any Google Benchmark flag]
//
// GFLOP/s counts 2*M*N*K per call; rates use CPU time (both libraries run on the calling
// thread: OpenBLAS is set to 1 thread and our pool has 1 thread).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using consensor::DType;
using namespace consensor::kernels;

CpuBackend& Ours() {
  static std::unique_ptr<CpuBackend> be = [] {
    auto b = CpuBackend::Create({.num_threads = 1, .isa = "avx2"});
    if (!b.ok()) {
      std::fprintf(stderr, "cannot create avx2 backend: %s\n", b.status().ToString().c_str());
      std::exit(1);
    }
    return std::move(b).value();
  }();
  return *be;
}

TensorView View(DType dt, int64_t r, int64_t c, void* data) {
  TensorView v;
  v.dtype = dt;
  v.rank = 2;
  v.dims[0] = r;
  v.dims[1] = c;
  v.data = data;
  return v;
}

template <typename T>
std::vector<T> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_same_v<T, float>) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& x : v) x = u(rng);
  } else {
    for (auto& x : v) x = static_cast<T>(rng() & 0xFF);
  }
  return v;
}

consensor::Status RunOurs(Op op, DType in_dt, DType out_dt, int64_t m, int64_t n, int64_t k, void* a, void* b,
                          void* y) {
  TensorView in[2] = {View(in_dt, m, k, a), View(in_dt, k, n, b)};
  TensorView out = View(out_dt, m, n, y);
  OpParams params;
  KernelCall call;
  call.op = op;
  call.params = &params;
  call.inputs = in;
  call.num_inputs = 2;
  call.outputs = &out;
  call.num_outputs = 1;
  return Ours().Run(call);
}

void BM_Ours_F32(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto a = Random<float>(n * n, 1), b = Random<float>(n * n, 2);
  std::vector<float> y(n * n);
  for (auto _ : state) {
    auto s = RunOurs(Op::kMatMul, DType::kF32, DType::kF32, n, n, n, a.data(), b.data(), y.data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_OpenBLAS_F32(benchmark::State& state) {
  openblas_set_num_threads(1);
  const int64_t n = state.range(0);
  auto a = Random<float>(n * n, 1), b = Random<float>(n * n, 2);
  std::vector<float> y(n * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The recognizer's pointwise convolutions as GEMMs (PP-OCRv4, input 48x320): M = output
// channels, N = H*W, K = input channels, the weights A [M, K] times the image B [K, N].
struct Shape {
  int64_t m, n, k;
};
constexpr Shape kPointwise[] = {{64, 3840, 64}, {128, 1920, 128}, {240, 960, 240}, {480, 480, 480}, {480, 240, 480}};
std::string ShapeName(const Shape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

void BM_Ours_Pointwise(benchmark::State& state, Shape sh) {
  auto a = Random<float>(sh.m * sh.k, 1), b = Random<float>(sh.k * sh.n, 2);
  std::vector<float> y(sh.m * sh.n);
  for (auto _ : state) {
    auto s = RunOurs(Op::kMatMul, DType::kF32, DType::kF32, sh.m, sh.n, sh.k, a.data(), b.data(), y.data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * sh.m * sh.n * sh.k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_OpenBLAS_Pointwise(benchmark::State& state, Shape sh) {
  openblas_set_num_threads(1);
  auto a = Random<float>(sh.m * sh.k, 1), b = Random<float>(sh.k * sh.n, 2);
  std::vector<float> y(sh.m * sh.n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh.m, sh.n, sh.k, 1.0f, a.data(), sh.k, b.data(), sh.n, 0.0f,
                y.data(), sh.n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * sh.m * sh.n * sh.k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Activations times constant weights, A [M, K] x W [K, N], as a loaded program runs them: W
// packed on every call, or once (Backend::PrepareConstant) and passed as KernelCall::prepared.
// Shapes: an LSTM step (1 x 128 -> 4 x 128), the PP-OCRv4 recognizer's SVTR projections (40
// tokens of 120) and its 6625-class head, a 64-row MLP layer.
constexpr Shape kWeights[] = {{1, 512, 128}, {40, 360, 120}, {40, 6625, 120}, {64, 512, 512}};

void BM_Ours_Weights(benchmark::State& state, Shape sh, bool packed_once) {
  auto a = Random<float>(sh.m * sh.k, 1), w = Random<float>(sh.k * sh.n, 2);
  std::vector<float> y(sh.m * sh.n);
  TensorView in[2] = {View(DType::kF32, sh.m, sh.k, a.data()), View(DType::kF32, sh.k, sh.n, w.data())};
  TensorView out = View(DType::kF32, sh.m, sh.n, y.data());
  OpParams params;
  KernelCall call;
  call.op = Op::kMatMul;
  call.params = &params;
  call.inputs = in;
  call.num_inputs = 2;
  call.outputs = &out;
  call.num_outputs = 1;
  std::unique_ptr<PreparedOperand> prepared;
  if (packed_once) {
    auto p = Ours().PrepareConstant(call, 1);
    if (!p.ok() || !*p) {
      state.SkipWithError("no prepared weights");
      return;
    }
    prepared = std::move(p).value();
    call.prepared = prepared.get();
  }
  for (auto _ : state) {
    auto s = Ours().Run(call);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * sh.m * sh.n * sh.k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// int8 (i8 x i8 -> i32) on the AVX2 engine: the AVX2 vpmaddwd kernel, the AVX-512 VNNI kernel
// and the AMX kernel (each where the CPU has it; else the best one it has). B packed per call. Shapes (M x N x K): a
// square one and the largest matmul_i8s of the quantized IS-Net at 256 x 256 (ConvInteger's im2col times its weights: M
// output pixels, N output channels, K = 9 input channels; N = 1 is its one-channel output).
constexpr Shape kI8[] = {{1024, 1024, 1024}, {16384, 64, 576}, {14464, 64, 1152}, {4096, 64, 2304},
                         {256, 256, 9216},   {64, 512, 4608},  {16384, 16, 576},  {16384, 1, 576}};

enum class I8Kernel { kAvx2, kVnni, kAmx };

void BM_Ours_I8(benchmark::State& state, Shape sh, I8Kernel kernel) {
  auto a = Random<int8_t>(sh.m * sh.k, 1), b = Random<int8_t>(sh.k * sh.n, 2);
  std::vector<int32_t> y(sh.m * sh.n);
  consensor::kernels::cpu::gemm::SetGemmVnniForTesting(kernel != I8Kernel::kAvx2);
  consensor::kernels::cpu::gemm::SetGemmAmxForTesting(kernel == I8Kernel::kAmx);
  for (auto _ : state) {
    auto s = RunOurs(Op::kMatMulInt8, DType::kI8, DType::kI32, sh.m, sh.n, sh.k, a.data(), b.data(), y.data());
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  consensor::kernels::cpu::gemm::SetGemmVnniForTesting(true);
  consensor::kernels::cpu::gemm::SetGemmAmxForTesting(true);
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * sh.m * sh.n * sh.k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Interleaved registration so that ours and OpenBLAS at one size run back to back.
void Register() {
  for (int n : {256, 512, 1024, 2048}) {
    benchmark::RegisterBenchmark(("f32/ours/" + std::to_string(n)).c_str(), BM_Ours_F32)
        ->Arg(n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("f32/openblas/" + std::to_string(n)).c_str(), BM_OpenBLAS_F32)
        ->Arg(n)
        ->Unit(benchmark::kMillisecond);
  }
  for (const Shape& sh : kPointwise) {
    benchmark::RegisterBenchmark(("pointwise/ours/" + ShapeName(sh)).c_str(), BM_Ours_Pointwise, sh)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("pointwise/openblas/" + ShapeName(sh)).c_str(), BM_OpenBLAS_Pointwise, sh)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const Shape& sh : kWeights) {
    benchmark::RegisterBenchmark(("weights/per-call/" + ShapeName(sh)).c_str(), BM_Ours_Weights, sh, false)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("weights/packed-once/" + ShapeName(sh)).c_str(), BM_Ours_Weights, sh, true)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const Shape& sh : kI8) {
    benchmark::RegisterBenchmark(("i8/avx2/" + ShapeName(sh)).c_str(), BM_Ours_I8, sh, I8Kernel::kAvx2)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("i8/vnni/" + ShapeName(sh)).c_str(), BM_Ours_I8, sh, I8Kernel::kVnni)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("i8/amx/" + ShapeName(sh)).c_str(), BM_Ours_I8, sh, I8Kernel::kAmx)
        ->Unit(benchmark::kMicrosecond);
  }
}

// Collects the per-repetition GFLOPS/GOPS values while printing the usual console output.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      std::string name = r.run_name.function_name;
      for (const char* key : {"GFLOPS", "GOPS"}) {
        auto it = r.counters.find(key);
        if (it != r.counters.end()) values[name].push_back(it->second.value);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, std::vector<double>> values;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
double Best(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// Sanity: ours and OpenBLAS compute the same product (to rounding).
bool SanityCheck() {
  openblas_set_num_threads(1);
  const int64_t n = 200;
  auto a = Random<float>(n * n, 5), b = Random<float>(n * n, 6);
  std::vector<float> y(n * n), z(n * n);
  if (!RunOurs(Op::kMatMul, DType::kF32, DType::kF32, n, n, n, a.data(), b.data(), y.data()).ok()) return false;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, z.data(), n);
  double worst = 0;
  for (int64_t i = 0; i < n * n; ++i) worst = std::max(worst, std::fabs(double(y[i]) - double(z[i])));
  std::printf("sanity: max |ours - openblas| at n=%lld: %.3g\n", static_cast<long long>(n), worst);
  return worst < 1e-3;
}

}  // namespace

int main(int argc, char** argv) {
  if (!consensor::kernels::cpu::CpuHasAvx2Fma()) {
    std::fprintf(stderr, "this benchmark needs AVX2+FMA\n");
    return 1;
  }
  if (!SanityCheck()) {
    std::fprintf(stderr, "sanity check failed\n");
    return 1;
  }
  Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  benchmark::Shutdown();

  std::printf("\nsingle-threaded f32 GEMM, GFLOP/s (median | best over repetitions)\n");
  std::printf("%6s %18s %18s %14s\n", "n", "ours", "openblas", "ratio(med|best)");
  for (int n : {256, 512, 1024, 2048}) {
    const auto& o = collector.values["f32/ours/" + std::to_string(n)];
    const auto& b = collector.values["f32/openblas/" + std::to_string(n)];
    if (o.empty() || b.empty()) continue;
    std::printf("%6d %8.1f | %7.1f %8.1f | %7.1f %6.3f | %5.3f\n", n, Median(o), Best(o), Median(b), Best(b),
                Median(o) / Median(b), Best(o) / Best(b));
  }
  std::printf("\npointwise-convolution GEMMs (M x N x K), GFLOP/s (median | best over repetitions)\n");
  std::printf("%14s %18s %18s %14s\n", "MxNxK", "ours", "openblas", "ratio(med|best)");
  for (const Shape& sh : kPointwise) {
    const auto& o = collector.values["pointwise/ours/" + ShapeName(sh)];
    const auto& b = collector.values["pointwise/openblas/" + ShapeName(sh)];
    if (o.empty() || b.empty()) continue;
    std::printf("%14s %8.1f | %7.1f %8.1f | %7.1f %6.3f | %5.3f\n", ShapeName(sh).c_str(), Median(o), Best(o),
                Median(b), Best(b), Median(o) / Median(b), Best(o) / Best(b));
  }
  std::printf("\nweights (M x N x K, B constant), GFLOP/s (median | best over repetitions)\n");
  std::printf("%14s %18s %18s %14s\n", "MxNxK", "packed per call", "packed once", "once/per-call");
  for (const Shape& sh : kWeights) {
    const auto& o = collector.values["weights/per-call/" + ShapeName(sh)];
    const auto& p = collector.values["weights/packed-once/" + ShapeName(sh)];
    if (o.empty() || p.empty()) continue;
    std::printf("%14s %8.1f | %7.1f %8.1f | %7.1f %6.3f | %5.3f\n", ShapeName(sh).c_str(), Median(o), Best(o),
                Median(p), Best(p), Median(p) / Median(o), Best(p) / Best(o));
  }
  std::printf("\nint8 matmul (M x N x K), GOP/s (median | best over repetitions)%s%s\n",
              consensor::kernels::cpu::gemm::CpuHasAvx512Vnni() ? "" : "; this CPU has no AVX-512 VNNI: all are AVX2",
              consensor::kernels::cpu::gemm::CpuHasAmxInt8() ? "" : "; no AMX: the amx column is VNNI");
  std::printf("%16s %18s %18s %18s %10s %10s\n", "MxNxK", "avx2 (vpmaddwd)", "avx512 vnni", "amx", "vnni/avx2",
              "amx/vnni");
  for (const Shape& sh : kI8) {
    const auto& o = collector.values["i8/avx2/" + ShapeName(sh)];
    const auto& v = collector.values["i8/vnni/" + ShapeName(sh)];
    const auto& x = collector.values["i8/amx/" + ShapeName(sh)];
    if (o.empty() || v.empty() || x.empty()) continue;
    std::printf("%16s %8.1f | %7.1f %8.1f | %7.1f %8.1f | %7.1f %10.3f %10.3f\n", ShapeName(sh).c_str(), Median(o),
                Best(o), Median(v), Best(v), Median(x), Best(x), Median(v) / Median(o), Median(x) / Median(v));
  }
  return 0;
}
