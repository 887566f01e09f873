// Depthwise Conv2D: the direct kernel (kernels/cpu/conv_direct_impl.h) against im2col + GEMM,
// the path it replaced, timed alternately in the same run on the same data, one AVX2 thread.
// Single-filter Conv2D: the direct kernel against im2col + a one-row GEMM, likewise, on both ISAs.
// Dense 3x3 Conv2D: the GEMM's 512-bit micro-kernel against its 256-bit one, likewise.
// Dense 3x3 Conv2D on f16 operands: the f16 call against the f32 call on the widened operands.
// ConvTranspose's convolution: the conv over the zero-stuffed input as one call that reads x
// (OpParams::input_stuffing) against the unfused pad + conv2d, likewise (CPU time).
//
//   conv_bench [--benchmark_filter=...]
//
// Shapes are the recognizer's depthwise layers (PP-OCRv4, input 48x320). Counters:
// direct_us and im2col_us (median of the iterations), speedup = im2col_us / direct_us. The
// two outputs are compared bit for bit once; a difference aborts the benchmark.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/half.h"

namespace consensor::kernels {
namespace {

TensorView View(DType dtype, void* data, const std::vector<int64_t>& shape) {
  TensorView v;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) v.dims[i] = shape[i];
  v.data = data;
  return v;
}

TensorView View(float* data, const std::vector<int64_t>& shape) { return View(DType::kF32, data, shape); }

// A 3x3 convolution, stride 1, padding 1 ("same"), one group.
OpParams SameConv3x3() {
  OpParams params;
  params.strides = {1, 1};
  params.pads = {1, 1, 1, 1};
  params.dilations = {1, 1};
  params.kernel = {3, 3};
  params.group = 1;
  return params;
}

// Runs `run_new` and `run_old` (each returns its time in us) once each and checks `same()` (on a
// difference: skips with "<what> outputs differ" and returns -1), then alternately once per
// iteration; sets the counters `new_counter` and `old_counter` (medians) and speedup = old /
// new, and returns the new median.
double CompareAlternately(benchmark::State& state, const std::function<double()>& run_new,
                          const std::function<double()>& run_old, const std::function<bool()>& same,
                          const std::string& what, const char* new_counter, const char* old_counter) {
  run_new();
  run_old();
  if (!same()) {
    state.SkipWithError((what + " outputs differ").c_str());
    return -1;
  }
  std::vector<double> t_new, t_old;
  for (auto _ : state) {
    t_new.push_back(run_new());
    t_old.push_back(run_old());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double new_us = median(t_new);
  state.counters[new_counter] = new_us;
  state.counters[old_counter] = median(t_old);
  state.counters["speedup"] = median(t_old) / std::max(1e-9, new_us);
  return new_us;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs the conv `params` over `in` into outputs of `out_dims`, with the direct kernel and with
// im2col + GEMM alternately, after checking once that both give the same bits; sets the
// counters direct_us, im2col_us (medians) and speedup.
void CompareDirectWithIm2col(benchmark::State& state, Backend& backend, const OpParams& params, TensorView* in,
                             const std::vector<int64_t>& out_dims) {
  int64_t n = 1;
  for (int64_t d : out_dims) n *= d;
  std::vector<float> y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
  auto run = [&](std::vector<float>& y, bool direct) {
    TensorView out = View(y.data(), out_dims);
    KernelCall call;
    call.op = Op::kConv2D;
    call.params = &params;
    call.inputs = in;
    call.num_inputs = 3;
    call.outputs = &out;
    call.num_outputs = 1;
    cpu::SetConvDirectForTesting(direct);
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = backend.Run(call);
    const auto t1 = std::chrono::steady_clock::now();
    cpu::SetConvDirectForTesting(true);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  };
  CompareAlternately(
      state, [&] { return run(y1, true); }, [&] { return run(y2, false); }, [&] { return SameBits(y1, y2); },
      "direct and im2col", "direct_us", "im2col_us");
}

// The chains the one-pass epilogue runs in registers (RunRegisterChain), as it runs them after a
// conv over a [C, H, W] output, against the same steps one after another over 256-element tiles
// (SetRegisterChainsForTesting(false)), alternately, same bits. args: C, H, W, chain (0:
// HardSwish x + 3, max 0, min 6, times x, / 6; 1: HardSigmoid x * 0.2, + 0.5, min 1, max 0).
void BM_RegisterChainEpilogue(benchmark::State& state) {
  if (!cpu::gemm::CpuHasAvx512F()) {
    state.SkipWithError("no AVX-512F");
    return;
  }
  const int64_t n = state.range(0) * state.range(1) * state.range(2);
  std::vector<float> x(static_cast<size_t>(n)), y1(x.size()), y2(x.size());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-6.0f, 6.0f);
  for (float& v : x) v = value(rng);
  using O = cpu::FastEpilogueOperand;
  auto operand = [](O::Kind kind, int index, float scalar) {
    O o;
    o.kind = kind;
    o.index = index;
    o.scalar = scalar;
    return o;
  };
  const std::vector<cpu::FastEpilogueStep> steps =
      state.range(3) == 0
          ? std::vector<cpu::FastEpilogueStep>{{Op::kAdd, 2, {operand(O::kValue, 0, 0), operand(O::kScalar, 0, 3.0f)}},
                                               {Op::kMax, 2, {operand(O::kValue, 1, 0), operand(O::kScalar, 0, 0.0f)}},
                                               {Op::kMin, 2, {operand(O::kValue, 2, 0), operand(O::kScalar, 0, 6.0f)}},
                                               {Op::kMul, 2, {operand(O::kValue, 0, 0), operand(O::kValue, 3, 0)}},
                                               {Op::kDiv, 2, {operand(O::kValue, 4, 0), operand(O::kScalar, 0, 6.0f)}}}
          : std::vector<cpu::FastEpilogueStep>{{Op::kMul, 2, {operand(O::kValue, 0, 0), operand(O::kScalar, 0, 0.2f)}},
                                               {Op::kAdd, 2, {operand(O::kValue, 1, 0), operand(O::kScalar, 0, 0.5f)}},
                                               {Op::kMin, 2, {operand(O::kValue, 2, 0), operand(O::kScalar, 0, 1.0f)}},
                                               {Op::kMax, 2, {operand(O::kValue, 3, 0), operand(O::kScalar, 0, 0.0f)}}};
  auto run = [&](std::vector<float>& y, bool chain) {
    std::copy(x.begin(), x.end(), y.begin());
    cpu::SetRegisterChainsForTesting(chain);
    const auto t0 = std::chrono::steady_clock::now();
    cpu::RunFastEpilogueAvx512(steps.data(), static_cast<int>(steps.size()), y.data(), 0, n);
    const auto t1 = std::chrono::steady_clock::now();
    cpu::SetRegisterChainsForTesting(true);
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  };
  CompareAlternately(
      state, [&] { return run(y1, true); }, [&] { return run(y2, false); }, [&] { return SameBits(y1, y2); },
      "chain and steps", "chain_us", "steps_us");
}
// The PP-OCR classifier's [200, 2, 96] and [32, 2, 96], the detector's [16, 160, 160]; the
// classifier's HardSigmoid outputs are its squeeze-excitation scales, [C, 1, 1].
BENCHMARK(BM_RegisterChainEpilogue)
    ->Args({200, 2, 96, 0})
    ->Args({32, 2, 96, 0})
    ->Args({16, 160, 160, 0})
    ->Args({200, 2, 96, 1})
    ->Args({96, 1, 1, 1});

// args: C, H, W, K, stride
void BM_Depthwise(benchmark::State& state) {
  const int64_t C = state.range(0), H = state.range(1), W = state.range(2), K = state.range(3), S = state.range(4);
  const int64_t P = K / 2, OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * H * W), w(C * K * K), b(C);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  auto backend = CpuBackend::Create({.num_threads = 1, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError("no AVX2 backend");
    return;
  }
  OpParams params;
  params.strides = {S, S};
  params.pads = {P, P, P, P};
  params.dilations = {1, 1};
  params.kernel = {K, K};
  params.group = C;
  TensorView in[3] = {View(x.data(), {1, C, H, W}), View(w.data(), {C, 1, K, K}), View(b.data(), {C})};
  CompareDirectWithIm2col(state, **backend, params, in, {1, C, OH, OW});
}

// The direct kernel's 512-bit rows against its 256-bit rows (the same call, alternating; outputs
// compared bit for bit); CPU time of the calling thread. Pads K / 2 on every side.
void DepthwiseAvx512AgainstAvx2(benchmark::State& state, int64_t C, int64_t H, int64_t W, int64_t K, int64_t S,
                                int64_t SW, void (*use_new)(bool) = &cpu::SetConvAvx512ForTesting,
                                const char* labels = "512-bit and 256-bit", const char* new_label = "avx512_us",
                                const char* old_label = "avx2_us") {
  const int64_t P = K / 2, OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / SW + 1;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * H * W), w(C * K * K), b(C), y1(C * OH * OW), y2(C * OH * OW);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  auto backend = CpuBackend::Create({.num_threads = 1, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError("no AVX2 backend");
    return;
  }
  OpParams params;
  params.strides = {S, SW};
  params.pads = {P, P, P, P};
  params.dilations = {1, 1};
  params.kernel = {K, K};
  params.group = C;
  TensorView in[3] = {View(x.data(), {1, C, H, W}), View(w.data(), {C, 1, K, K}), View(b.data(), {C})};
  auto run = [&](std::vector<float>& y, bool avx512) {
    TensorView out = View(y.data(), {1, C, OH, OW});
    KernelCall call;
    call.op = Op::kConv2D;
    call.params = &params;
    call.inputs = in;
    call.num_inputs = 3;
    call.outputs = &out;
    call.num_outputs = 1;
    use_new(avx512);
    timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (int i = 0; i < 20; ++i) {
      const Status s = (*backend)->Run(call);
      if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    use_new(true);
    return ((t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3) / 20;
  };
  CompareAlternately(
      state, [&] { return run(y1, true); }, [&] { return run(y2, false); }, [&] { return SameBits(y1, y2); }, labels,
      new_label, old_label);
}

// args: C, H, W; 3x3, stride 2, pads 1. RowsBlockInterior (the unrolled 4-row block where every
// kernel row is inside the plane) against RowsBlock (both conv_avx512.cc).
void BM_DepthwiseInteriorRowsAvx512(benchmark::State& state) {
  DepthwiseAvx512AgainstAvx2(state, state.range(0), state.range(1), state.range(2), 3, 2, 2,
                             &cpu::SetConvInteriorRowsForTesting, "interior and general rows", "interior_us",
                             "rows_us");
}

BENCHMARK(BM_DepthwiseInteriorRowsAvx512)
    ->Args({32, 160, 160})  // the PP-OCRv4 detector's 3x3 stride-2 depthwise convolutions
    ->Args({48, 80, 80})
    ->Args({96, 40, 40})
    ->Args({8, 160, 160});

// args: C, H, W, K; both strides 1, "same" padding. The flattened-plane kernel against the
// 512-bit rows (both conv_avx512.cc).
void BM_DepthwisePlaneAvx512(benchmark::State& state) {
  DepthwiseAvx512AgainstAvx2(state, state.range(0), state.range(1), state.range(2), state.range(3), 1, 1,
                             &cpu::SetConvDirectPlaneForTesting, "plane and rows", "plane_us", "rows_us");
}

BENCHMARK(BM_DepthwisePlaneAvx512)
    ->Args({16, 160, 160, 3})  // the PP-OCRv4 detector's stride-1 depthwise convolutions
    ->Args({48, 80, 80, 3})
    ->Args({96, 40, 40, 3})
    ->Args({192, 20, 20, 5})
    ->Args({384, 10, 10, 5})
    ->Args({200, 2, 96, 5})  // the PP-OCR direction classifier's
    ->Args({88, 3, 96, 5});

// args: C, H, W, K, stride in height.
void BM_DepthwiseAvx512(benchmark::State& state) {
  DepthwiseAvx512AgainstAvx2(state, state.range(0), state.range(1), state.range(2), state.range(3), state.range(4), 1);
}

// args: C, H, W, K; stride 2 in both dims (the 256-bit rows are the scalar strided loop there).
void BM_DepthwiseStrideTwoAvx512(benchmark::State& state) {
  DepthwiseAvx512AgainstAvx2(state, state.range(0), state.range(1), state.range(2), state.range(3), 2, 2);
}

BENCHMARK(BM_DepthwiseStrideTwoAvx512)
    ->Args({32, 160, 160, 3})  // the PP-OCRv4 detector's stride-2 depthwise convolutions
    ->Args({48, 80, 80, 3})
    ->Args({96, 40, 40, 3})
    ->Args({192, 20, 20, 5});

BENCHMARK(BM_DepthwiseAvx512)
    ->Args({200, 2, 96, 5, 1})  // the PP-OCR direction classifier's depthwise convolutions
    ->Args({88, 3, 96, 5, 1})
    ->Args({104, 3, 96, 5, 2})
    ->Args({32, 6, 96, 5, 2})
    ->Args({24, 12, 96, 3, 2})
    ->Args({128, 6, 40, 5, 1})
    ->Args({16, 24, 160, 3, 1})
    ->Args({16, 160, 160, 3, 1})  // the PP-OCRv4 detector's stride-1 depthwise convolutions
    ->Args({48, 80, 80, 3, 1})
    ->Args({96, 40, 40, 3, 1})
    ->Args({192, 20, 20, 5, 1})
    ->Args({384, 10, 10, 5, 1});

BENCHMARK(BM_Depthwise)
    ->Args({16, 24, 160, 3, 1})
    ->Args({32, 24, 160, 3, 2})
    ->Args({64, 12, 80, 3, 1})
    ->Args({128, 6, 40, 5, 1})
    ->Args({256, 3, 40, 5, 1})
    ->Unit(benchmark::kMicrosecond);

// Convolutions with a single filter (group 1): the direct kernel, which UsesDirectKernel picks
// for them, against im2col + a one-row GEMM, alternately on the same data, one thread, on the
// AVX2 and the portable backend. args: C, H, W, K, avx2. Pads: K - 1 in front (the last
// ConvTranspose of the PP-OCRv4 detector is the first shape), so the output is H x W.
void BM_SingleFilter(benchmark::State& state) {
  const int64_t C = state.range(0), H = state.range(1), W = state.range(2), K = state.range(3);
  const char* isa = state.range(4) ? "avx2" : "portable";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * H * W), w(C * K * K), b(1);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  b[0] = u(rng);
  auto backend = CpuBackend::Create({.num_threads = 1, .isa = isa});
  if (!backend.ok()) {
    state.SkipWithError("no such backend");
    return;
  }
  OpParams params;
  params.strides = {1, 1};
  params.pads = {K - 1, K - 1, 0, 0};
  params.dilations = {1, 1};
  params.kernel = {K, K};
  params.group = 1;
  TensorView in[3] = {View(x.data(), {1, C, H, W}), View(w.data(), {1, C, K, K}), View(b.data(), {1})};
  CompareDirectWithIm2col(state, **backend, params, in, {1, 1, H, W});
}

BENCHMARK(BM_SingleFilter)
    ->Args({24, 320, 320, 2, 1})
    ->Args({64, 160, 160, 3, 1})
    ->Args({256, 40, 40, 3, 1})
    ->Args({96, 80, 80, 1, 1})  // 1x1: the GEMM reads the input in place, without im2col
    ->Args({24, 320, 320, 2, 0})
    ->Args({64, 160, 160, 3, 0})
    ->Args({256, 40, 40, 3, 0})
    ->Unit(benchmark::kMicrosecond);

// Dense 3x3 "same" convolutions (stride 1, pad 1, bias) on the GEMM path with the weights packed
// once (as a loaded program has them), alternately on the same data: `new` (the GEMM's 512-bit
// micro-kernel where the CPU has AVX-512F) and `old` (its 256-bit one only). Times are the
// process's CPU time per call
// (the machine is shared: wall time counts waiting), medians; speedup = old / new. The outputs
// are compared bit for bit once. args: C, H, W, F, threads.
void BM_Dense3x3(benchmark::State& state) {
  const int64_t C = state.range(0), H = state.range(1), W = state.range(2), F = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * H * W), w(F * C * 9), b(F), y(F * H * W), y_ref(F * H * W);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  auto backend = CpuBackend::Create({.num_threads = threads, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError("no AVX2 backend");
    return;
  }
  const OpParams params = SameConv3x3();
  TensorView in[3] = {View(x.data(), {1, C, H, W}), View(w.data(), {F, C, 3, 3}), View(b.data(), {F})};
  KernelCall call;
  call.op = Op::kConv2D;
  call.params = &params;
  call.inputs = in;
  call.num_inputs = 3;
  call.num_outputs = 1;
  TensorView shape_out = View(y.data(), {1, F, H, W});
  call.outputs = &shape_out;
  auto prepared = (*backend)->PrepareConstant(call, 1);
  if (!prepared.ok() || !*prepared) {
    state.SkipWithError("weights not prepared");
    return;
  }
  call.prepared = prepared->get();
  auto cpu_us = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  };
  auto run = [&](std::vector<float>& out_data, bool avx512) {
    TensorView out = View(out_data.data(), {1, F, H, W});
    call.outputs = &out;
    cpu::gemm::SetGemmAvx512ForTesting(avx512);
    const double t0 = cpu_us();
    const Status s = (*backend)->Run(call);
    const double t1 = cpu_us();
    cpu::gemm::SetGemmAvx512ForTesting(true);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return t1 - t0;
  };
  const double new_us = CompareAlternately(
      state, [&] { return run(y, true); }, [&] { return run(y_ref, false); }, [&] { return SameBits(y, y_ref); },
      "the 512-bit and 256-bit", "new_us", "old_us");
  if (new_us < 0) return;
  const double flops = 2.0 * F * C * 9 * H * W;
  state.counters["new_gflops"] = flops / std::max(1e-9, new_us) * 1e-3;
}

// IS-Net's (256 x 256 input) heaviest dense 3x3 layers, at 1 and 2 threads.
BENCHMARK(BM_Dense3x3)
    ->Args({128, 128, 128, 64, 1})
    ->Args({64, 128, 128, 64, 1})
    ->Args({256, 64, 64, 64, 1})
    ->Args({512, 32, 32, 128, 1})
    ->Args({1024, 16, 16, 256, 1})
    ->Args({1024, 8, 8, 512, 1})
    ->Args({128, 128, 128, 64, 2})
    ->Args({1024, 16, 16, 256, 2})
    // The PP-OCRv4 detector's 96 -> 24 convolutions.
    ->Args({96, 80, 80, 24, 1})
    ->Args({96, 40, 40, 24, 1})
    ->Unit(benchmark::kMicrosecond);

// Dense 3x3 "same" convolutions with f16 operands (IS-Net f16), weights prepared once as a
// loaded program has them: the f16 call (DETERMINISM.md 1.3: widened, the f32 rule, rounded once)
// against the f32 call on the widened operands, alternately; its output rounded to f16 must equal
// the f16 call's bit for bit. CPU time of the process per call, medians; overhead = f16 / f32.
// args: C, H, W, F, threads.
void BM_HalfDense3x3(benchmark::State& state) {
  const int64_t C = state.range(0), H = state.range(1), W = state.range(2), F = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> xh(C * H * W), wh(F * C * 9), bh(F), yh(F * H * W);
  std::vector<float> x(xh.size()), w(wh.size()), b(bh.size()), y(yh.size());
  auto fill = [&](std::vector<uint16_t>& h, std::vector<float>& f) {
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = half::F32ToF16(u(rng));
      f[i] = half::F16ToF32(h[i]);
    }
  };
  fill(xh, x);
  fill(wh, w);
  fill(bh, b);
  auto backend = CpuBackend::Create({.num_threads = threads, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError("no AVX2 backend");
    return;
  }
  const OpParams params = SameConv3x3();
  struct Call {
    TensorView in[3], out;
    KernelCall call;
    std::unique_ptr<PreparedOperand> prepared;
  };
  auto make = [&](Call& c, DType dtype, void* xd, void* wd, void* bd, void* yd) {
    c.in[0] = View(dtype, xd, {1, C, H, W});
    c.in[1] = View(dtype, wd, {F, C, 3, 3});
    c.in[2] = View(dtype, bd, {F});
    c.out = View(dtype, yd, {1, F, H, W});
    c.call.op = Op::kConv2D;
    c.call.params = &params;
    c.call.inputs = c.in;
    c.call.num_inputs = 3;
    c.call.outputs = &c.out;
    c.call.num_outputs = 1;
    auto prepared = (*backend)->PrepareConstant(c.call, 1);
    if (prepared.ok()) c.prepared = std::move(*prepared);
    c.call.prepared = c.prepared.get();
    return c.prepared != nullptr;
  };
  Call half_call, f32_call;
  if (!make(half_call, DType::kF16, xh.data(), wh.data(), bh.data(), yh.data()) ||
      !make(f32_call, DType::kF32, x.data(), w.data(), b.data(), y.data())) {
    state.SkipWithError("weights not prepared");
    return;
  }
  auto cpu_us = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  };
  auto run = [&](Call& c) {
    const double t0 = cpu_us();
    const Status s = (*backend)->Run(c.call);
    const double t1 = cpu_us();
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return t1 - t0;
  };
  auto same = [&] {
    for (size_t i = 0; i < y.size(); ++i) {
      if (half::F32ToF16(y[i]) != yh[i]) return false;
    }
    return true;
  };
  const double half_us = CompareAlternately(
      state, [&] { return run(half_call); }, [&] { return run(f32_call); }, same, "the f16 and rounded f32", "f16_us",
      "f32_us");
  if (half_us < 0) return;
  state.counters["f16_gflops"] = 2.0 * F * C * 9 * H * W / std::max(1e-9, half_us) * 1e-3;
}

// IS-Net f16's (256 x 256 input) dense 3x3 layers.
BENCHMARK(BM_HalfDense3x3)
    ->Args({128, 128, 128, 64, 1})
    ->Args({64, 128, 128, 64, 1})
    ->Args({256, 64, 64, 64, 1})
    ->Args({512, 32, 32, 128, 1})
    ->Args({1024, 16, 16, 256, 1})
    ->Args({1024, 8, 8, 512, 1})
    ->Args({64, 128, 128, 16, 1})
    ->Args({128, 128, 128, 64, 2})
    ->Unit(benchmark::kMicrosecond);

// args: C, XH, XW, F, K, stride, threads. ConvTranspose (pads 0) of x [1, C, XH, XW] by
// [C, F, K, K] as lowered (docs/ONNX.md): zero `pad` of x as [1, C, XH, 1, XW, 1] to the
// stride, then a stride-1 conv2d with K - 1 in front and K - stride behind. Against the fused
// call: the same conv2d reading x with input_stuffing. Process CPU time per run, medians.
void BM_StuffedConv(benchmark::State& state) {
  const int64_t C = state.range(0), XH = state.range(1), XW = state.range(2), F = state.range(3), K = state.range(4),
                S = state.range(5);
  const int threads = static_cast<int>(state.range(6));
  const int64_t SH = XH * S, SW = XW * S, front = K - 1, back = K - S;
  const int64_t OH = SH + front + back - K + 1, OW = SW + front + back - K + 1;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * XH * XW), stuffed(C * SH * SW), w(F * C * K * K), b(F);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  auto backend = CpuBackend::Create({.num_threads = threads, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError(backend.status().ToString().c_str());
    return;
  }
  OpParams pad;
  pad.pad_begin = {0, 0, 0, 0, 0, 0};
  pad.pad_end = {0, 0, 0, S - 1, 0, S - 1};
  OpParams conv;
  conv.strides = {1, 1};
  conv.dilations = {1, 1};
  conv.pads = {front, front, back, back};
  OpParams fused = conv;
  fused.input_stuffing = {S, S, 0, 0, SH, SW};
  TensorView pad_in = View(x.data(), {1, C, XH, 1, XW, 1}), pad_out = View(stuffed.data(), {1, C, XH, S, XW, S});
  TensorView conv_in[3] = {View(stuffed.data(), {1, C, SH, SW}), View(w.data(), {F, C, K, K}), View(b.data(), {F})};
  TensorView fused_in[3] = {View(x.data(), {1, C, XH, XW}), conv_in[1], conv_in[2]};
  std::vector<float> y_fused(F * OH * OW), y_unfused(F * OH * OW);
  TensorView out_fused = View(y_fused.data(), {1, F, OH, OW}), out_unfused = View(y_unfused.data(), {1, F, OH, OW});
  KernelCall pad_call{Op::kPad, &pad, &pad_in, 1, &pad_out, 1};
  KernelCall conv_call{Op::kConv2D, &conv, conv_in, 3, &out_unfused, 1};
  KernelCall fused_call{Op::kConv2D, &fused, fused_in, 3, &out_fused, 1};
  // The unfused conv's weights are packed once, as a loaded program does.
  auto prepared = (*backend)->PrepareConstant(conv_call, 1);
  if (!prepared.ok()) {
    state.SkipWithError(prepared.status().ToString().c_str());
    return;
  }
  conv_call.prepared = prepared->get();
  auto fused_prepared = (*backend)->PrepareConstant(fused_call, 1);
  if (!fused_prepared.ok()) {
    state.SkipWithError(fused_prepared.status().ToString().c_str());
    return;
  }
  fused_call.prepared = fused_prepared->get();
  auto cpu_us = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  };
  auto run_fused = [&] {
    const double t0 = cpu_us();
    const Status s = (*backend)->Run(fused_call);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return cpu_us() - t0;
  };
  auto run_unfused = [&] {
    const double t0 = cpu_us();
    Status s = (*backend)->Run(pad_call);
    if (s.ok()) s = (*backend)->Run(conv_call);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return cpu_us() - t0;
  };
  CompareAlternately(
      state, run_fused, run_unfused, [&] { return SameBits(y_fused, y_unfused); }, "the fused and unfused",
      "fused_cpu_us", "unfused_cpu_us");
}

// The PP-OCRv4 detector's two ConvTransposes (2x2, stride 2), a 4x4 stride-2 one (PyTorch's
// usual upsampler without its pad) and a 3x3 stride-3 one; one thread, and two.
BENCHMARK(BM_StuffedConv)
    ->Args({24, 80, 80, 24, 2, 2, 1})
    ->Args({24, 160, 160, 1, 2, 2, 1})
    ->Args({64, 40, 40, 32, 4, 2, 1})
    ->Args({16, 40, 40, 16, 3, 3, 1})
    ->Args({24, 80, 80, 24, 2, 2, 2})
    ->Args({24, 160, 160, 1, 2, 2, 2})
    ->Unit(benchmark::kMicrosecond);

// args: C, XH, XW, F, threads, sigmoid (1: a sigmoid epilogue, as the detector's last one).
// ConvTranspose with stride == kernel == 2, pads 0, fused (x read directly): ConvStuffedOneTapAvx512 (each x row read
// once for its two output rows) against the stuffed-conv blocks it replaced (SetConvStuffedOneTapForTesting(false)),
// alternating, outputs compared bit for bit. Process CPU time per call, medians.
void BM_StuffedOneTap(benchmark::State& state) {
  const int64_t C = state.range(0), XH = state.range(1), XW = state.range(2), F = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const bool sigmoid = state.range(5) != 0;
  const int64_t OH = 2 * XH, OW = 2 * XW;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * XH * XW), w(F * C * 4), b(F), y_new(F * OH * OW), y_old(F * OH * OW);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  auto backend = CpuBackend::Create({.num_threads = threads, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError(backend.status().ToString().c_str());
    return;
  }
  OpParams fused;
  fused.strides = {1, 1};
  fused.dilations = {1, 1};
  fused.pads = {1, 1, 0, 0};
  fused.input_stuffing = {2, 2, 0, 0, 2 * XH, 2 * XW};
  TensorView in[3] = {View(x.data(), {1, C, XH, XW}), View(w.data(), {F, C, 2, 2}), View(b.data(), {F})};
  auto run = [&](std::vector<float>& y, bool one_tap) {
    TensorView out = View(y.data(), {1, F, OH, OW});
    KernelCall call{Op::kConv2D, &fused, in, 3, &out, 1};
    EpilogueStep step;
    step.op = Op::kSigmoid;
    step.num_operands = 1;
    Epilogue epilogue;
    epilogue.steps = &step;
    epilogue.num_steps = 1;
    if (sigmoid) call.epilogue = &epilogue;
    auto prepared = (*backend)->PrepareConstant(call, 1);
    if (prepared.ok()) call.prepared = prepared->get();
    cpu::SetConvStuffedOneTapForTesting(one_tap);
    timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    const Status s = (*backend)->Run(call);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    cpu::SetConvStuffedOneTapForTesting(true);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
  };
  CompareAlternately(
      state, [&] { return run(y_new, true); }, [&] { return run(y_old, false); },
      [&] { return SameBits(y_new, y_old); }, "the one-tap and block", "one_tap_cpu_us", "blocks_cpu_us");
}

// The PP-OCRv4 detector's two ConvTransposes (one filter at 160 x 160 with its sigmoid, 24 filters at 80 x 80),
// rows of 37 columns (a partial vector), one thread and two.
BENCHMARK(BM_StuffedOneTap)
    ->Args({24, 160, 160, 1, 1, 1})
    ->Args({24, 160, 160, 1, 1, 0})
    ->Args({24, 80, 80, 24, 1, 0})
    ->Args({24, 160, 37, 1, 1, 0})
    ->Args({24, 160, 160, 1, 2, 1})
    ->Args({24, 80, 80, 24, 2, 0})
    ->Unit(benchmark::kMicrosecond);

// args: C, H, W, F, KH, KW. A dense stride-1 conv whose output rows are as wide as its input's
// (KW > 1: "same" width padding; KH > 1: no height padding), weights packed at load: the AVX-512
// shifted-plane kernel (conv_avx512.cc) against im2col + the GEMM's 512-bit tiles, the path it
// replaced (SetConvAvx512ForTesting(false)), alternating, outputs compared bit for bit. CPU time
// of the calling thread per call, medians; fma_g = 10^9 multiply-adds per second of the new path.
void BM_ShiftedPlane(benchmark::State& state) {
  const int64_t C = state.range(0), H = state.range(1), W = state.range(2), F = state.range(3);
  const int64_t KH = state.range(4), KW = state.range(5), OH = H - KH + 1;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(C * H * W), w(F * C * KH * KW), b(F), y1(F * OH * W), y2(F * OH * W);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  auto backend = CpuBackend::Create({.num_threads = 1, .isa = "avx2"});
  if (!backend.ok()) {
    state.SkipWithError("no AVX2 backend");
    return;
  }
  OpParams params;
  params.strides = {1, 1};
  params.pads = {0, KW / 2, 0, KW / 2};
  params.dilations = {1, 1};
  params.kernel = {KH, KW};
  params.group = 1;
  TensorView in[3] = {View(x.data(), {1, C, H, W}), View(w.data(), {F, C, KH, KW}), View(b.data(), {F})};
  auto run = [&](std::vector<float>& y, bool shifted) {
    TensorView out = View(y.data(), {1, F, OH, W});
    KernelCall call;
    call.op = Op::kConv2D;
    call.params = &params;
    call.inputs = in;
    call.num_inputs = 3;
    call.outputs = &out;
    call.num_outputs = 1;
    cpu::SetConvAvx512ForTesting(shifted);
    auto prepared = (*backend)->PrepareConstant(call, 1);
    if (prepared.ok()) call.prepared = prepared->get();
    timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (int i = 0; i < 20; ++i) {
      const Status s = (*backend)->Run(call);
      if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    cpu::SetConvAvx512ForTesting(true);
    return ((t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3) / 20;
  };
  const double new_us = CompareAlternately(
      state, [&] { return run(y1, true); }, [&] { return run(y2, false); }, [&] { return SameBits(y1, y2); },
      "shifted-plane and im2col", "shifted_us", "im2col_us");
  if (new_us < 0) return;
  state.counters["fma_g"] = static_cast<double>(F * OH * W * C * KH * KW) / std::max(1e-9, new_us) * 1e-3;
}

// The openWakeWord embedding model's 1x3 and 3x1 layers (input 76 x 32 mel frames).
BENCHMARK(BM_ShiftedPlane)
    ->Args({24, 74, 32, 24, 1, 3})
    ->Args({24, 74, 32, 24, 3, 1})
    ->Args({48, 34, 16, 48, 1, 3})
    ->Args({72, 30, 8, 72, 1, 3})
    ->Args({96, 12, 4, 96, 1, 3})
    ->Args({96, 10, 2, 96, 3, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace consensor::kernels
