// pad (DETERMINISM.md 4.6) against identity, a plain copy of the same output bytes, in one run:
// how close each pad shape comes to the machine's copy bandwidth. Shapes: the zero interleaving
// of the PP-OCRv4 detector's ConvTranspose lowering ([1, 24, 160, 1, 160, 1] -> [1, 24, 160,
// 2, 160, 2], f32 and i8), a conv-style border ([1, 64, 128, 128] -> [1, 64, 130, 130]) and
// many small planes padded on every side ([4096, 6, 6] -> [4096, 8, 8]). 1 and 2 threads.
//
//   pad_bench [--benchmark_filter=...]
//
// Compare each BM_Pad's time with the BM_Copy of the same arguments; the machine's other load
// shows up in every figure.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench/kernel_bench_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace consensor::kernels {
namespace {

struct PadCase {
  DType dtype;
  std::vector<int64_t> in, pb, pe;
};

const PadCase kCases[] = {
    {DType::kF32, {1, 24, 160, 1, 160, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1}},
    {DType::kI8, {1, 24, 160, 1, 160, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1}},
    {DType::kF32, {1, 64, 128, 128}, {0, 0, 1, 1}, {0, 0, 1, 1}},
    {DType::kF32, {4096, 6, 6}, {0, 1, 1}, {0, 1, 1}},
};

TensorView View(DType t, const std::vector<int64_t>& dims, void* data) {
  TensorView v;
  v.dtype = t;
  for (int64_t d : dims) v.dims[v.rank++] = d;
  v.data = data;
  return v;
}

// args: case, threads. Pad runs the case; copy moves the same number of output bytes.
void Run(benchmark::State& state, bool pad) {
  const PadCase& c = kCases[state.range(0)];
  auto backend = bench_util::BackendOrSkip(state, {.num_threads = static_cast<int>(state.range(1))});
  if (!backend) return;
  std::vector<int64_t> out_dims = c.in;
  int64_t in_n = 1, out_n = 1;
  for (size_t d = 0; d < c.in.size(); ++d) {
    out_dims[d] += c.pb[d] + c.pe[d];
    in_n *= c.in[d];
    out_n *= out_dims[d];
  }
  const int64_t esize = DTypeSize(c.dtype);
  std::vector<uint8_t> x(static_cast<size_t>((pad ? in_n : out_n) * esize), 1);
  std::vector<uint8_t> y(static_cast<size_t>(out_n * esize), 0);
  OpParams p;
  p.pad_begin = c.pb;
  p.pad_end = c.pe;
  const TensorView in = pad ? View(c.dtype, c.in, x.data()) : View(c.dtype, out_dims, x.data());
  TensorView out = View(c.dtype, out_dims, y.data());
  if (!bench_util::TimeKernel(state, *backend, pad ? Op::kPad : Op::kIdentity, p, &in, 1, &out)) return;
  state.SetBytesProcessed(state.iterations() * out_n * esize);  // output bytes
}

void BM_Pad(benchmark::State& state) { Run(state, true); }
void BM_Copy(benchmark::State& state) { Run(state, false); }

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case", "threads"});
  for (int64_t c = 0; c < static_cast<int64_t>(std::size(kCases)); ++c)
    for (int64_t threads : {1, 2}) b->Args({c, threads});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Pad)->Apply(Args);
BENCHMARK(BM_Copy)->Apply(Args);

}  // namespace
}  // namespace consensor::kernels
