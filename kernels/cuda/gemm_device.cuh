// The register-tiled f32 GEMM main loop shared by the matmul and conv families
// (docs/DETERMINISM.md 4.4).
//
// One block of kThreads = 256 threads computes a kBM x kBN = 128 x 128 output tile; each
// thread owns an 8 x 8 register micro-tile (rows ty*4+{0..3} and 64+ty*4+{0..3}, columns
// tx*4+{0..3} and 64+tx*4+{0..3}, with tx = tid % 16, ty = tid / 16). A and B are staged
// through shared memory in K-tiles of kBK = 8 (A transposed, so the micro-tile reads are
// broadcast / conflict-free), double buffered: the next K-tile is fetched from global
// memory into registers while the current one is consumed.
//
// Determinism: the accumulators live in registers for the whole K loop and every one of
// them is updated as acc = fma(a[m,k], b[k,n], acc) for k = 0, 1, ..., K-1 in order,
// starting from +0.0. This is exactly the spec's chain. The last, partial K-tile is
// consumed only up to k < K: out-of-range k never enters a chain (the zeros loaded into
// shared memory for them are never read). Out-of-range m / n lanes compute garbage-free
// chains over zeros and are simply not stored.
#pragma once

#include <cstdint>

#include "kernels/cuda/simt.h"
#include "kernels/detmath.h"

#if defined(__CUDACC__)
#define CNSR_GEMM_UNROLL _Pragma("unroll")
#else
#define CNSR_GEMM_UNROLL
#endif

// Occupancy hint for the GEMM kernels: two 256-thread blocks per SM (<= 128 registers).
#if defined(__CUDACC__)
#define CNSR_GEMM_LAUNCH_BOUNDS __launch_bounds__(256, 2)
#else
#define CNSR_GEMM_LAUNCH_BOUNDS
#endif

namespace consensor::kernels::CNSR_CUDA_NS::gemm_dev {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kThreads = 256;
constexpr int kAStride = kBM + 4;        // padded row of the transposed A tile (floats)
constexpr int kAStage = kBK * kAStride;  // floats per A buffer
constexpr int kBStage = kBK * kBN;       // floats per B buffer

// 16-byte aligned element type for shared arrays that are accessed as float4 on the GPU.
struct alignas(16) Vec4 {
  float v[4];
};
// Shared floats of both double-buffered stages, in Vec4 units.
constexpr int kSharedAVec4 = 2 * kAStage / 4;
constexpr int kSharedBVec4 = 2 * kBStage / 4;

// 4 consecutive floats at p (16-byte aligned on the GPU).
CNSR_DEVICE void Load4(const float* p, float* out) {
#if defined(CNSR_SIMT_EMULATION)
  out[0] = p[0];
  out[1] = p[1];
  out[2] = p[2];
  out[3] = p[3];
#else
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
#endif
}

CNSR_DEVICE void Store4(float* p, const float* in) {
#if defined(CNSR_SIMT_EMULATION)
  p[0] = in[0];
  p[1] = in[1];
  p[2] = in[2];
  p[3] = in[3];
#else
  *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
#endif
}

// Consumes one staged K-tile: kk = 0 .. klen-1 in order (klen == kBK when kFull).
template <bool kFull>
CNSR_DEVICE void ComputeStage(const float* As, const float* Bs, int klen, int tx, int ty, float (&acc)[8][8]) {
  CNSR_GEMM_UNROLL
  for (int kk = 0; kk < kBK; ++kk) {
    if (!kFull && kk >= klen) break;
    float a[8], b[8];
    Load4(As + kk * kAStride + ty * 4, a);
    Load4(As + kk * kAStride + 64 + ty * 4, a + 4);
    Load4(Bs + kk * kBN + tx * 4, b);
    Load4(Bs + kk * kBN + 64 + tx * 4, b + 4);
    CNSR_GEMM_UNROLL
    for (int i = 0; i < 8; ++i) {
      CNSR_GEMM_UNROLL
      for (int j = 0; j < 8; ++j) acc[i][j] = detmath::fma_rn(a[i], b[j], acc[i][j]);
    }
  }
}

// Thread -> tile mapping of the global loads.
//   A: row tid / 2 of the block tile, k offsets (tid % 2) * 4 + {0..3}.
//   B: k offset tid / 32, columns (tid % 32) * 4 + {0..3}.
CNSR_DEVICE int ARow(int tid) { return tid >> 1; }
CNSR_DEVICE int AK(int tid) { return (tid & 1) * 4; }
CNSR_DEVICE int BK(int tid) { return tid >> 5; }
CNSR_DEVICE int BCol(int tid) { return (tid & 31) * 4; }

// Row index (0..127) in the block tile of micro-tile row i (0..7) of thread row ty, and
// likewise for columns.
CNSR_DEVICE int MicroRow(int ty, int i) { return (i < 4 ? 0 : 64) + ty * 4 + (i & 3); }
CNSR_DEVICE int MicroCol(int tx, int j) { return (j < 4 ? 0 : 64) + tx * 4 + (j & 3); }

// Accumulates the block tile over k = 0 .. K-1 into acc (set to +0.0 first). `ld` has
//   void LoadA(int64_t k0, float* r) const  // A[row ARow, k0 + AK + i], i < 4 (0 if out of range)
//   void LoadB(int64_t k0, float* r) const  // B[k0 + BK, col BCol + j], j < 4 (0 if out of range)
// As / Bs: shared buffers of 2 * kAStage / 2 * kBStage floats, 16-byte aligned. Must be
// reached by every thread of the block (it synchronizes).
template <class Loader>
CNSR_DEVICE void MainLoopF32(const Loader& ld, int64_t K, float* As, float* Bs, float (&acc)[8][8]) {
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int a_row = ARow(tid), a_k = AK(tid);
  const int b_k = BK(tid), b_col = BCol(tid);
  CNSR_GEMM_UNROLL
  for (int i = 0; i < 8; ++i) {
    CNSR_GEMM_UNROLL
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  }
  const int64_t ntiles = (K + kBK - 1) / kBK;
  if (ntiles == 0) return;
  float ra[4], rb[4];
  ld.LoadA(0, ra);
  ld.LoadB(0, rb);
  CNSR_GEMM_UNROLL
  for (int i = 0; i < 4; ++i) As[(a_k + i) * kAStride + a_row] = ra[i];
  Store4(Bs + b_k * kBN + b_col, rb);
  __syncthreads();
  for (int64_t t = 0; t < ntiles; ++t) {
    const int cur = static_cast<int>(t & 1);
    const bool more = t + 1 < ntiles;
    if (more) {
      ld.LoadA((t + 1) * kBK, ra);
      ld.LoadB((t + 1) * kBK, rb);
    }
    const int64_t left = K - t * kBK;
    if (left >= kBK) {
      ComputeStage<true>(As + cur * kAStage, Bs + cur * kBStage, kBK, tx, ty, acc);
    } else {
      ComputeStage<false>(As + cur * kAStage, Bs + cur * kBStage, static_cast<int>(left), tx, ty, acc);
    }
    if (more) {
      // Nobody reads buffer cur^1 now: every thread passed the barrier that ended the
      // previous step, which consumed it.
      float* an = As + (cur ^ 1) * kAStage;
      CNSR_GEMM_UNROLL
      for (int i = 0; i < 4; ++i) an[(a_k + i) * kAStride + a_row] = ra[i];
      Store4(Bs + (cur ^ 1) * kBStage + b_k * kBN + b_col, rb);
    }
    __syncthreads();
  }
}

// The A loader of a row-major matrix A[m * lda + k] (matmul's A, conv's weights).
struct RowMajorA {
  const float* row = nullptr;  // start of this thread's A row, or nullptr when it is out of range
  int64_t K = 0;
  int a_k = 0;
  bool vec = false;  // row is 16-byte aligned and K % 4 == 0

  CNSR_DEVICE void Load(int64_t k0, float* r) const {
    const int64_t k = k0 + a_k;
    if (row != nullptr && vec && k + 4 <= K) {
      Load4(row + k, r);
      return;
    }
    CNSR_GEMM_UNROLL
    for (int i = 0; i < 4; ++i) r[i] = (row != nullptr && k + i < K) ? row[k + i] : 0.0f;
  }
};

}  // namespace consensor::kernels::CNSR_CUDA_NS::gemm_dev
