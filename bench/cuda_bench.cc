// GPU benchmarks against the vendor library, measured in the same run on the same GPU:
//   * f32 GEMM (deterministic fma chain) vs cuBLAS SGEMM with TF32 disabled (pedantic math)
//   * int8 GEMM (exact) vs cuBLASLt int8 -> int32
//   * reduce_sum / reduce_max / softmax vs device-to-device copy bandwidth
// Prints a table with ratios. Needs a GPU; exits with a message otherwise.
//   build/bench/cuda_bench [--n 4096] [--reps 20]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend_factory.h"

using namespace consensor;
using namespace consensor::kernels;

namespace {

#define CHECK_CUDA(x)                                                      \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)
#define CHECK_BLAS(x)                                         \
  do {                                                        \
    int s_ = static_cast<int>(x);                             \
    if (s_ != 0) {                                            \
      std::fprintf(stderr, "%s failed: status %d\n", #x, s_); \
      std::exit(1);                                           \
    }                                                         \
  } while (0)

// Median time in milliseconds of `reps` runs of fn, after two warm-ups.
double TimeMs(int reps, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    fn();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

TensorView View(DType t, std::vector<int64_t> dims, void* data) {
  TensorView v;
  v.dtype = t;
  v.rank = static_cast<int>(dims.size());
  for (int i = 0; i < v.rank; ++i) v.dims[i] = dims[i];
  v.data = data;
  return v;
}

void RunOrDie(Backend& backend, Op op, const OpParams& params, std::vector<TensorView> in, TensorView out) {
  KernelCall call{op, &params, in.data(), static_cast<int>(in.size()), &out, 1};
  Status s = backend.Run(call);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", std::string(OpName(op)).c_str(), s.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 4096;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  BackendOptions bo;
  bo.name = "cuda";
  auto backend = CreateBackend(bo);
  if (!backend.ok()) {
    std::fprintf(stderr, "no GPU: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  Backend& gpu = **backend;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::printf("device %s, driver %d, n=%lld, reps=%d\n", prop.name, driver, static_cast<long long>(n), reps);

  // --- f32 GEMM ---
  const int64_t bytes = n * n * 4;
  auto arena = gpu.AllocateArena(3 * bytes);
  if (!arena.ok()) {
    std::fprintf(stderr, "%s\n", arena.status().ToString().c_str());
    return 1;
  }
  uint8_t* base = (*arena)->base();
  std::vector<float> host(static_cast<size_t>(n * n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  (void)(*arena)->CopyIn(0, host.data(), bytes);
  (void)(*arena)->CopyIn(bytes, host.data(), bytes);
  float* a = reinterpret_cast<float*>(base);
  float* b = reinterpret_cast<float*>(base + bytes);
  float* c = reinterpret_cast<float*>(base + 2 * bytes);
  OpParams none;
  double ours = TimeMs(reps, [&] {
    RunOrDie(gpu, Op::kMatMul, none, {View(DType::kF32, {n, n}, a), View(DType::kF32, {n, n}, b)},
             View(DType::kF32, {n, n}, c));
  });
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  CHECK_BLAS(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));  // no TF32
  const float one = 1.0f, zero = 0.0f;
  int ni = static_cast<int>(n);
  double vendor = TimeMs(reps, [&] {
    CHECK_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b, ni, a, ni, &zero, c, ni));
  });
  double flops = 2.0 * n * n * n;
  std::printf("f32 gemm   ours %8.1f GFLOP/s   cuBLAS %8.1f GFLOP/s   ratio %.3f (target >= 0.8)\n", flops / ours / 1e6,
              flops / vendor / 1e6, vendor / ours);

  // --- int8 GEMM ---
  int8_t* a8 = reinterpret_cast<int8_t*>(base);
  int8_t* b8 = reinterpret_cast<int8_t*>(base + n * n);
  int32_t* c32 = reinterpret_cast<int32_t*>(base + 2 * bytes);
  double ours8 = TimeMs(reps, [&] {
    RunOrDie(gpu, Op::kMatMulInt8, none, {View(DType::kI8, {n, n}, a8), View(DType::kI8, {n, n}, b8)},
             View(DType::kI32, {n, n}, c32));
  });
  cublasLtHandle_t lt;
  CHECK_BLAS(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t desc;
  CHECK_BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  cublasOperation_t trans = CUBLAS_OP_T;
  CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_8I, n, n, n));
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8I, n, n, n));
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32I, n, n, n));
  const int32_t one_i = 1, zero_i = 0;
  double vendor8 = TimeMs(reps, [&] {
    CHECK_BLAS(cublasLtMatmul(lt, desc, &one_i, a8, la, b8, lb, &zero_i, c32, lc, c32, lc, nullptr, nullptr, 0, 0));
  });
  std::printf("int8 gemm  ours %8.1f GOP/s     cuBLASLt %8.1f GOP/s   ratio %.3f (target >= 0.5)\n",
              flops / ours8 / 1e6, flops / vendor8 / 1e6, vendor8 / ours8);

  // --- bandwidth-bound ops vs device-to-device copy ---
  double copy = TimeMs(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice)); });
  double copy_gbps = 2.0 * bytes / copy / 1e6;  // read + write
  std::printf("d2d copy   %8.1f GB/s (read + write)\n", copy_gbps);
  OpParams sum_rows;
  sum_rows.axes = {1};
  sum_rows.keepdims = false;
  struct Case {
    const char* name;
    Op op;
    OpParams params;
    std::vector<int64_t> out;
  } cases[] = {{"reduce_sum rows", Op::kReduceSum, sum_rows, {n}},
               {"reduce_max rows", Op::kReduceMax, sum_rows, {n}},
               {"softmax rows",
                Op::kSoftmax,
                [] {
                  OpParams p;
                  p.axis = 1;
                  return p;
                }(),
                {n, n}}};
  for (const Case& k : cases) {
    double ms = TimeMs(reps, [&] {
      RunOrDie(gpu, k.op, k.params, {View(DType::kF32, {n, n}, a)}, View(DType::kF32, k.out, c));
    });
    double moved = static_cast<double>(bytes) + (k.out.size() == 2 ? bytes : n * 4);
    double gbps = moved / ms / 1e6;
    std::printf("%-16s %8.1f GB/s   %.2f of copy bandwidth (target >= 0.8)\n", k.name, gbps, gbps / copy_gbps);
  }
  return 0;
}
