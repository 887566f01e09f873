// f16/bf16 <-> f32 conversions (DETERMINISM.md 1.3, 1.4) and a 16-bit op end to end, in one run:
//   BM_Widen / BM_Narrow: 4M values converted on one thread, portable (kernels/half.h, integer
//     operations) against the AVX2 build (F16C for f16, AVX2 integer code for bf16).
//   BM_Add: y = x + x over 4M values through the CPU backend, f16 and bf16 against f32 (what the
//     16-bit rule costs over plain f32), portable and AVX2, 1 and 2 threads.
//   BM_AddWholeTensor: the same f16/bf16 add as the CPU backend did it before blocks and F16C:
//     both operands widened whole into fresh heap vectors by the portable conversion, the f32
//     kernel, one portable narrowing.
//
//   half_bench [--benchmark_filter=...]
//
// Compare each BM_Add f16/bf16 row with its f32 row and with BM_AddWholeTensor's row of the same
// arguments; the machine's other load shows up in every figure.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/half_operands.h"
#include "kernels/half.h"
#include "kernels/thread_pool.h"

namespace consensor::kernels {
namespace {

constexpr int64_t kValues = int64_t{4} << 20;

DType DTypeArg(int64_t code) { return code == 0 ? DType::kF32 : code == 1 ? DType::kF16 : DType::kBF16; }

const std::vector<float>& Floats() {
  static const std::vector<float> v = [] {
    std::vector<float> f(kValues);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-8.0f, 8.0f);
    for (float& x : f) x = u(rng);
    return f;
  }();
  return v;
}

std::vector<uint16_t> Halves(DType t) {
  std::vector<uint16_t> h(kValues);
  for (int64_t i = 0; i < kValues; ++i)
    h[i] = t == DType::kF16 ? half::F32ToF16(Floats()[i]) : half::F32ToBF16(Floats()[i]);
  return h;
}

// args: dtype (1 f16, 2 bf16), avx2 (0, 1)
void BM_Widen(benchmark::State& state) {
  const DType t = DTypeArg(state.range(0));
  const cpu::CpuContext ctx{nullptr, state.range(1) ? cpu::Isa::kAvx2 : cpu::Isa::kPortable};
  if (state.range(1) && !cpu::CpuHasF16c()) return state.SkipWithError("no F16C/AVX2");
  const std::vector<uint16_t> h = Halves(t);
  std::vector<float> f(kValues);
  for (auto _ : state) {
    cpu::WidenToF32(t, h.data(), f.data(), kValues, ctx);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kValues);
}

void BM_Narrow(benchmark::State& state) {
  const DType t = DTypeArg(state.range(0));
  const cpu::CpuContext ctx{nullptr, state.range(1) ? cpu::Isa::kAvx2 : cpu::Isa::kPortable};
  if (state.range(1) && !cpu::CpuHasF16c()) return state.SkipWithError("no F16C/AVX2");
  std::vector<uint16_t> h(kValues);
  for (auto _ : state) {
    cpu::NarrowFromF32(t, Floats().data(), h.data(), kValues, ctx);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kValues);
}

TensorView Flat(DType t, void* data) {
  TensorView v;
  v.dtype = t;
  v.rank = 1;
  v.dims[0] = kValues;
  v.data = data;
  return v;
}

// args: dtype (0 f32, 1 f16, 2 bf16), avx2, threads
void BM_Add(benchmark::State& state) {
  const DType t = DTypeArg(state.range(0));
  auto backend = CpuBackend::Create(
      {.num_threads = static_cast<int>(state.range(2)), .isa = state.range(1) ? "avx2" : "portable"});
  if (!backend.ok()) return state.SkipWithError(backend.status().ToString().c_str());
  std::vector<uint16_t> h = t == DType::kF32 ? std::vector<uint16_t>() : Halves(t);
  std::vector<float> f = Floats();
  std::vector<uint8_t> y(static_cast<size_t>(kValues * DTypeSize(t)));
  TensorView in[2] = {Flat(t, t == DType::kF32 ? static_cast<void*>(f.data()) : h.data()), {}};
  in[1] = in[0];
  TensorView out = Flat(t, y.data());
  OpParams p;
  KernelCall call{Op::kAdd, &p, in, 2, &out, 1};
  for (auto _ : state) {
    Status s = (*backend)->Run(call);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kValues);
}

// The pre-block, pre-F16C path for the same call, for the before/after ratio: as RunThroughF32
// did before, each operand widened whole into a fresh heap vector by the portable conversion
// (split over the threads), the f32 kernel, one portable narrowing.
void BM_AddWholeTensor(benchmark::State& state) {
  const DType t = DTypeArg(state.range(0));
  const int threads = static_cast<int>(state.range(2));
  auto backend = CpuBackend::Create({.num_threads = threads, .isa = state.range(1) ? "avx2" : "portable"});
  if (!backend.ok()) return state.SkipWithError(backend.status().ToString().c_str());
  ThreadPool pool(threads);
  const cpu::CpuContext portable{&pool, cpu::Isa::kPortable};
  const std::vector<uint16_t> h = Halves(t);
  std::vector<uint16_t> y(kValues);
  OpParams p;
  for (auto _ : state) {
    std::vector<float> a(kValues), b(kValues), out(kValues);
    cpu::WidenToF32(t, h.data(), a.data(), kValues, portable);
    cpu::WidenToF32(t, h.data(), b.data(), kValues, portable);
    TensorView in[2] = {Flat(DType::kF32, a.data()), Flat(DType::kF32, b.data())};
    TensorView o = Flat(DType::kF32, out.data());
    KernelCall call{Op::kAdd, &p, in, 2, &o, 1};
    Status s = (*backend)->Run(call);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
    cpu::NarrowFromF32(t, out.data(), y.data(), kValues, portable);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kValues);
}

void ConvertArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "avx2"});
  for (int64_t t : {1, 2})
    for (int64_t avx2 : {0, 1}) b->Args({t, avx2});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

void AddArgs(benchmark::internal::Benchmark* b, std::initializer_list<int64_t> dtypes) {
  b->ArgNames({"dtype", "avx2", "threads"});
  for (int64_t t : dtypes)
    for (int64_t avx2 : {0, 1})
      for (int64_t threads : {1, 2}) b->Args({t, avx2, threads});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Widen)->Apply(ConvertArgs);
BENCHMARK(BM_Narrow)->Apply(ConvertArgs);
BENCHMARK(BM_Add)->Apply([](benchmark::internal::Benchmark* b) { AddArgs(b, {0, 1, 2}); });
BENCHMARK(BM_AddWholeTensor)->Apply([](benchmark::internal::Benchmark* b) { AddArgs(b, {1, 2}); });

}  // namespace
}  // namespace consensor::kernels
