// MatMul (f32) and MatMulInt8 (i8 x i8 -> i32) on CUDA, docs/DETERMINISM.md 4.4.
//
// f32: the register-tiled GEMM of gemm_device.cuh (128 x 128 block tiles, K-tiles of 8,
// 256 threads with 8 x 8 micro-tiles, double-buffered shared memory). Each output element
// is one sequential explicit-fma chain over k held in a register, so the bits equal the
// CPU backend's. NaN results are canonicalized at the store.
//
// i8: int8 tensor cores (mma.m16n8k32, tensor_core.cuh), the fast verifiable path. Integer
// sums wrap (two's complement) and are exact in any order, so the MMA's internal order does
// not matter.
//
// Batches: gridDim.z (grid-strided when there are more than 65535), with numpy
// broadcasting of the batch dims through the per-dim batch-index strides of
// kernels/checks/matmul.h, computed on the host.
#include <cstdint>
#include <string>

#include "kernels/checks/matmul.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm_device.cuh"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/tensor_core.cuh"
#include "kernels/detmath.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

using gemm_dev::kBK;
using gemm_dev::kBM;
using gemm_dev::kBN;
using gemm_dev::kThreads;

constexpr int64_t kMaxGridYZ = 65535;

// The batch indices of A and B that output batch i reads.
CNSR_DEVICE void BatchOffsets(const MatMulBatchPlan& plan, int64_t i, int64_t* a_off, int64_t* b_off) {
  int64_t ao = 0, bo = 0;
  for (int j = plan.nb - 1; j >= 0; --j) {
    const int64_t idx = i % plan.dims[j];
    i /= plan.dims[j];
    ao += idx * plan.a_stride[j];
    bo += idx * plan.b_stride[j];
  }
  *a_off = ao;
  *b_off = bo;
}

// ---------------------------------------------------------------------------------------
// f32

struct MatMulLoaderF32 {
  gemm_dev::RowMajorA a;
  const float* b = nullptr;  // B + n0 + BCol (valid while b_cols > 0)
  int64_t K = 0, N = 0;
  int b_k = 0;
  int b_cols = 0;  // valid columns of this thread's 4
  bool vec_b = false;

  CNSR_DEVICE void LoadA(int64_t k0, float* r) const { a.Load(k0, r); }
  CNSR_DEVICE void LoadB(int64_t k0, float* r) const {
    const int64_t k = k0 + b_k;
    if (k < K && b_cols == 4 && vec_b) {
      gemm_dev::Load4(b + k * N, r);
      return;
    }
    CNSR_GEMM_UNROLL
    for (int j = 0; j < 4; ++j) r[j] = (k < K && j < b_cols) ? b[k * N + j] : 0.0f;
  }
};

CNSR_GLOBAL CNSR_GEMM_LAUNCH_BOUNDS void MatMulF32Kernel(const float* A, const float* B, float* C, int64_t M, int64_t N,
                                                         int64_t K, MatMulBatchPlan plan, bool vec_a, bool vec_b) {
  CNSR_SHARED(gemm_dev::Vec4, as_vec, gemm_dev::kSharedAVec4);
  CNSR_SHARED(gemm_dev::Vec4, bs_vec, gemm_dev::kSharedBVec4);
  float* As = reinterpret_cast<float*>(as_vec);
  float* Bs = reinterpret_cast<float*>(bs_vec);
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int64_t m_tiles = (M + kBM - 1) / kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  for (int64_t z = blockIdx.z; z < plan.count; z += gridDim.z) {
    int64_t a_idx = 0, b_idx = 0;
    BatchOffsets(plan, z, &a_idx, &b_idx);
    const int64_t a_off = a_idx * M * K, b_off = b_idx * K * N;
    float* c_batch = C + z * M * N;
    for (int64_t by = blockIdx.y; by < m_tiles; by += gridDim.y) {
      const int64_t m0 = by * kBM;
      MatMulLoaderF32 ld;
      const int64_t a_row = m0 + gemm_dev::ARow(tid);
      ld.a.row = (K > 0 && a_row < M) ? A + a_off + a_row * K : nullptr;
      ld.a.K = K;
      ld.a.a_k = gemm_dev::AK(tid);
      ld.a.vec = vec_a;
      const int64_t b_col = n0 + gemm_dev::BCol(tid);
      const int64_t cols = N - b_col;
      ld.b_cols = cols <= 0 ? 0 : (cols >= 4 ? 4 : static_cast<int>(cols));
      ld.b = (K > 0 && ld.b_cols > 0) ? B + b_off + b_col : B;
      ld.K = K;
      ld.N = N;
      ld.b_k = gemm_dev::BK(tid);
      ld.vec_b = vec_b;

      float acc[8][8];
      gemm_dev::MainLoopF32(ld, K, As, Bs, acc);

      // Scalar stores: the epilogue is a negligible part of the work, and vector stores
      // here cost registers in the main loop.
      CNSR_GEMM_UNROLL
      for (int i = 0; i < 8; ++i) {
        const int64_t row = m0 + gemm_dev::MicroRow(ty, i);
        if (row >= M) continue;
        float* crow = c_batch + row * N + n0;
        CNSR_GEMM_UNROLL
        for (int j = 0; j < 8; ++j) {
          const int col = gemm_dev::MicroCol(tx, j);
          if (n0 + col < N) crow[col] = detmath::canonicalize_nan(acc[i][j]);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// i8: an exact int8 tensor-core GEMM (tensor_core.cuh). The MMA wants both operands with k
// contiguous, so the host side first transposes B (K x N per batch) into scratch as Bt
// (N x kp, kp = K rounded up to 16, zero-padded) and, unless A's rows are already 16-byte
// aligned (K % 16 == 0 and an aligned base), copies A into scratch with rows padded to kp.
// Zero padding is exact for integers, so whole 64-byte K-tiles are always consumed.
//
// GEMM: 128 x 128 output tiles per block of 4 warps, each warp 64 x 64 (4 x 8 MMA tiles of
// 16 x 8, 128 accumulators per thread); K-tiles of 64 bytes flow through a 3-stage cp.async
// pipeline into shared memory, rows of 64 bytes as four 16-byte chunks XOR-swizzled by
// row so the ldmatrix reads of 8 consecutive rows hit 8 different bank groups.

constexpr int kI8BM = 128;
constexpr int kI8BN = 128;
constexpr int kI8BK = 64;  // k bytes per K-tile: 4 chunks of 16
constexpr int kI8Stages = 3;
constexpr int kI8Threads = 128;
constexpr int kI8StageChunks = kI8BM * kI8BK / 16;  // per operand (kI8BM == kI8BN)
constexpr int64_t kI8KAlign = 16;

#if defined(__CUDACC__)
#define CNSR_I8_LAUNCH_BOUNDS __launch_bounds__(kI8Threads)
#else
#define CNSR_I8_LAUNCH_BOUNDS
#endif

struct alignas(16) Chunk16 {
  uint32_t w[4];
};

// Chunk c (0..3) of tile row `row`, swizzled: rows 2r and 2r+1 share an XOR pattern, so any
// 8 consecutive rows starting at a multiple of 8 cover all 8 16-byte bank groups.
CNSR_DEVICE int SwizzledChunk(int row, int c) { return row * 4 + (c ^ ((row >> 1) & 3)); }

// One operand's K-tile (128 rows x 64 bytes) into a stage; rows >= rows_left and chunks at
// k >= kp are zero-filled.
CNSR_DEVICE void LoadI8Stage(Chunk16* stage, const int8_t* rows, int64_t rows_left, int64_t ld, int64_t k0, int64_t kp,
                             int tid, const int8_t* any_valid) {
  CNSR_GEMM_UNROLL
  for (int i = 0; i < kI8StageChunks / kI8Threads; ++i) {
    const int idx = i * kI8Threads + tid;
    const int row = idx >> 2, c = idx & 3;
    const int64_t k = k0 + c * 16;
    const bool valid = row < rows_left && k < kp;
    tensor_core::CpAsync16(stage + SwizzledChunk(row, c), valid ? rows + row * ld + k : any_valid, valid);
  }
}

CNSR_GLOBAL CNSR_I8_LAUNCH_BOUNDS void MatMulI8Kernel(const int8_t* A, int64_t lda, int64_t a_batch_elems,
                                                      const int8_t* Bt, int64_t b_batch_elems, int32_t* C, int64_t M,
                                                      int64_t N, int64_t kp, MatMulBatchPlan plan) {
  CNSR_SHARED(Chunk16, a_sh, kI8Stages * kI8StageChunks);
  CNSR_SHARED(Chunk16, b_sh, kI8Stages * kI8StageChunks);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = (warp >> 1) * 64, wn = (warp & 1) * 64;
  const int64_t m_tiles = (M + kI8BM - 1) / kI8BM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kI8BN;
  const int64_t ntiles = (kp + kI8BK - 1) / kI8BK;
  for (int64_t z = blockIdx.z; z < plan.count; z += gridDim.z) {
    int64_t a_idx = 0, b_idx = 0;
    BatchOffsets(plan, z, &a_idx, &b_idx);
    const int8_t* b_rows = Bt + b_idx * b_batch_elems + n0 * kp;
    int32_t* c_batch = C + z * M * N;
    for (int64_t by = blockIdx.y; by < m_tiles; by += gridDim.y) {
      const int64_t m0 = by * kI8BM;
      const int8_t* a_rows = A + a_idx * a_batch_elems + m0 * lda;
      int32_t acc[4][8][4];
      CNSR_GEMM_UNROLL
      for (int i = 0; i < 4; ++i) {
        CNSR_GEMM_UNROLL
        for (int j = 0; j < 8; ++j) {
          CNSR_GEMM_UNROLL
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;
        }
      }
      CNSR_GEMM_UNROLL
      for (int s = 0; s < kI8Stages - 1; ++s) {
        if (s < ntiles) {
          LoadI8Stage(a_sh + s * kI8StageChunks, a_rows, M - m0, lda, s * kI8BK, kp, tid, A);
          LoadI8Stage(b_sh + s * kI8StageChunks, b_rows, N - n0, kp, s * kI8BK, kp, tid, Bt);
        }
        tensor_core::CpAsyncCommit();
      }
      for (int64_t kt = 0; kt < ntiles; ++kt) {
        // Tile kt has landed (at most kI8Stages - 2 younger groups pending), and every warp
        // is done with the stage the prefetch below overwrites (it held tile kt - 1).
        tensor_core::CpAsyncWait<kI8Stages - 2>();
        __syncthreads();
        const int64_t next = kt + kI8Stages - 1;
        if (next < ntiles) {
          const int stage = static_cast<int>(next % kI8Stages);
          LoadI8Stage(a_sh + stage * kI8StageChunks, a_rows, M - m0, lda, next * kI8BK, kp, tid, A);
          LoadI8Stage(b_sh + stage * kI8StageChunks, b_rows, N - n0, kp, next * kI8BK, kp, tid, Bt);
        }
        tensor_core::CpAsyncCommit();
        const Chunk16* as = a_sh + static_cast<int>(kt % kI8Stages) * kI8StageChunks;
        const Chunk16* bs = b_sh + static_cast<int>(kt % kI8Stages) * kI8StageChunks;
        CNSR_GEMM_UNROLL
        for (int half = 0; half < 2; ++half) {  // two k32 steps per 64-byte K-tile
          uint32_t af[4][4], bf[8][2];
          CNSR_GEMM_UNROLL
          for (int i = 0; i < 4; ++i) {
            // Matrices: rows 0-7 / 8-15 of the m16 tile, times k bytes 0-15 / 16-31.
            const int row = wm + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            tensor_core::LdMatrixX4(af[i], as + SwizzledChunk(row, 2 * half + (lane >> 4)));
          }
          CNSR_GEMM_UNROLL
          for (int jj = 0; jj < 4; ++jj) {
            // Matrices: columns 0-7 (k 0-15, k 16-31), then columns 8-15: two n8 tiles.
            const int row = wn + jj * 16 + (lane & 7) + (lane >> 4) * 8;
            uint32_t r[4];
            tensor_core::LdMatrixX4(r, bs + SwizzledChunk(row, 2 * half + ((lane >> 3) & 1)));
            bf[2 * jj][0] = r[0];
            bf[2 * jj][1] = r[1];
            bf[2 * jj + 1][0] = r[2];
            bf[2 * jj + 1][1] = r[3];
          }
          CNSR_GEMM_UNROLL
          for (int i = 0; i < 4; ++i) {
            CNSR_GEMM_UNROLL
            for (int j = 0; j < 8; ++j) tensor_core::MmaS8(acc[i][j], af[i], bf[j]);
          }
        }
      }
      // No copy in flight and no warp still reading before the next tile's prologue.
      tensor_core::CpAsyncWait<0>();
      __syncthreads();
      CNSR_GEMM_UNROLL
      for (int i = 0; i < 4; ++i) {
        CNSR_GEMM_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int64_t row = m0 + wm + i * 16 + g + 8 * h;
          if (row >= M) continue;
          int32_t* crow = c_batch + row * N;
          CNSR_GEMM_UNROLL
          for (int j = 0; j < 8; ++j) {
            const int64_t col = n0 + wn + j * 8 + 2 * t;
            if (col < N) crow[col] = acc[i][j][2 * h];
            if (col + 1 < N) crow[col + 1] = acc[i][j][2 * h + 1];
          }
        }
      }
    }
  }
}

// Bt[z][n][k] = B[z][k][n] for k < K, 0 for K <= k < kp; 64 x 64 tiles through shared memory.
constexpr int kTransposeTile = 64;
constexpr int kTransposeThreads = 256;

CNSR_GLOBAL void TransposeI8Kernel(const int8_t* B, int8_t* Bt, int64_t K, int64_t N, int64_t kp, int64_t batches) {
  constexpr int kPitch = kTransposeTile + 1;  // odd pitch: a warp reading a column hits distinct words
  CNSR_SHARED(int8_t, tile, kTransposeTile * kPitch);
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const int64_t k_tiles = (kp + kTransposeTile - 1) / kTransposeTile;
  for (int64_t z = blockIdx.z; z < batches; z += gridDim.z) {
    const int8_t* b = B + z * K * N;
    int8_t* bt = Bt + z * N * kp;
    for (int64_t ky = blockIdx.y; ky < k_tiles; ky += gridDim.y) {
      const int64_t k0 = ky * kTransposeTile;
      for (int idx = tid; idx < kTransposeTile * kTransposeTile; idx += kTransposeThreads) {
        const int k = idx / kTransposeTile, n = idx % kTransposeTile;
        tile[k * kPitch + n] = (k0 + k < K && n0 + n < N) ? b[(k0 + k) * N + n0 + n] : int8_t{0};
      }
      __syncthreads();
      for (int idx = tid; idx < kTransposeTile * kTransposeTile; idx += kTransposeThreads) {
        const int n = idx / kTransposeTile, k = idx % kTransposeTile;
        if (n0 + n < N && k0 + k < kp) bt[(n0 + n) * kp + k0 + k] = tile[k * kPitch + n];
      }
      __syncthreads();
    }
  }
}

// Ap[r][k] = A[r][k] for k < K, 0 for K <= k < kp, over rows = batches * M rows.
CNSR_GLOBAL void PadRowsI8Kernel(const int8_t* A, int8_t* Ap, int64_t rows, int64_t K, int64_t kp) {
  const int64_t total = rows * kp;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / kp, k = i % kp;
    Ap[i] = k < K ? A[r * K + k] : int8_t{0};
  }
}

// ---------------------------------------------------------------------------------------
// Host side.

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

unsigned GridDim(int64_t n, int64_t cap) { return static_cast<unsigned>(n < cap ? (n > 0 ? n : 1) : cap); }

// Lays the operands out for the tensor-core kernel in scratch (Bt always; A only when its
// rows are not 16-byte aligned), then runs it. Scratch holds as many bytes as B (plus A).
Status RunMatMulI8(const MatMulDims& d, const MatMulBatchPlan& plan, const int8_t* A, const int8_t* B, int32_t* C,
                   const LaunchContext& ctx) {
  [[maybe_unused]] cudaStream_t stream = (cudaStream_t)ctx.stream;
  const int64_t kp = RoundUp(d.K, kI8KAlign);
  const int8_t* a_op = A;
  const int8_t* bt = B;  // unread when K == 0
  int64_t lda = d.K;
  if (kp > 0) {
    const bool a_in_place = d.K % kI8KAlign == 0 && Aligned16(A);
    const int64_t bt_bytes = RoundUp(plan.b_batches * d.N * kp, 16);
    const int64_t ap_bytes = a_in_place ? 0 : plan.a_batches * d.M * kp;
    if (ctx.scratch == nullptr) return Internal("matmul_i8: no scratch memory");
    ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Get(bt_bytes + ap_bytes));
    int8_t* bt_buf = static_cast<int8_t*>(scratch);
    const int64_t n_tiles = (d.N + kTransposeTile - 1) / kTransposeTile;
    if (n_tiles > 0x7FFFFFFF) return InvalidArgument("matmul_i8: N is too large for the CUDA grid");
    const dim3 tgrid(static_cast<unsigned>(n_tiles), GridDim((kp + kTransposeTile - 1) / kTransposeTile, kMaxGridYZ),
                     GridDim(plan.b_batches, kMaxGridYZ));
    CNSR_LAUNCH(TransposeI8Kernel, tgrid, dim3(kTransposeThreads), 0, stream, B, bt_buf, d.K, d.N, kp, plan.b_batches);
    RETURN_IF_ERROR(CheckLaunch("matmul_i8 (transpose)"));
    bt = bt_buf;
    if (!a_in_place) {
      int8_t* ap = bt_buf + bt_bytes;
      const int64_t total = plan.a_batches * d.M * kp;
      const int64_t blocks = (total + 255) / 256;
      const int64_t max_blocks = static_cast<int64_t>(ctx.multiprocessors > 0 ? ctx.multiprocessors : 1) * 32;
      CNSR_LAUNCH(PadRowsI8Kernel, dim3(GridDim(blocks, max_blocks)), dim3(256), 0, stream, A, ap, plan.a_batches * d.M,
                  d.K, kp);
      RETURN_IF_ERROR(CheckLaunch("matmul_i8 (pad A)"));
      a_op = ap;
      lda = kp;
    }
  }
  const int64_t n_tiles = (d.N + kI8BN - 1) / kI8BN;
  if (n_tiles > 0x7FFFFFFF) return InvalidArgument("matmul_i8: N is too large for the CUDA grid");
  const dim3 grid(static_cast<unsigned>(n_tiles), GridDim((d.M + kI8BM - 1) / kI8BM, kMaxGridYZ),
                  GridDim(plan.count, kMaxGridYZ));
  CNSR_LAUNCH(MatMulI8Kernel, grid, dim3(kI8Threads), 0, stream, a_op, lda, d.M * lda, bt, d.N * kp, C, d.M, d.N, kp,
              plan);
  return CheckLaunch("matmul_i8");
}

}  // namespace

Status RunMatMul(const KernelCall& call, const LaunchContext& ctx) {
  if (call.op != Op::kMatMul && call.op != Op::kMatMulInt8) {
    return InvalidArgument("RunMatMul: unexpected op " + std::string(OpName(call.op)));
  }
  const bool f32 = call.op == Op::kMatMul;
  ASSIGN_OR_RETURN(const MatMulPlan mp, PlanMatMul(call));
  const MatMulDims& d = mp.dims;
  const MatMulBatchPlan& plan = mp.batch;
  if (plan.count == 0 || d.M == 0 || d.N == 0) return OkStatus();
  const TensorView& a = call.in(0);
  const TensorView& b = call.in(1);
  const TensorView& y = call.out(0);
  if (f32) {
    const int64_t n_tiles = (d.N + kBN - 1) / kBN;
    if (n_tiles > 0x7FFFFFFF) return InvalidArgument("matmul: N is too large for the CUDA grid");
    const dim3 grid(static_cast<unsigned>(n_tiles), GridDim((d.M + kBM - 1) / kBM, kMaxGridYZ),
                    GridDim(plan.count, kMaxGridYZ));
    const float* A = a.as<const float>();
    const float* B = b.as<const float>();
    float* C = y.as<float>();
    const bool vec_a = d.K % 4 == 0 && Aligned16(A);
    const bool vec_b = d.N % 4 == 0 && Aligned16(B);
    CNSR_LAUNCH(MatMulF32Kernel, grid, dim3(kThreads), 0, (cudaStream_t)ctx.stream, A, B, C, d.M, d.N, d.K, plan, vec_a,
                vec_b);
    return CheckLaunch("matmul");
  }
  return RunMatMulI8(d, plan, a.as<const int8_t>(), b.as<const int8_t>(), y.as<int32_t>(), ctx);
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
