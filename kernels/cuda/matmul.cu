// MatMul (f32) and MatMulInt8 (i8 x i8 -> i32) on CUDA, docs/DETERMINISM.md 4.4.
//
// f32: the register-tiled GEMM of gemm_device.cuh (128 x 128 block tiles, K-tiles of 8,
// 256 threads with 8 x 8 micro-tiles, double-buffered shared memory). Each output element
// is one sequential explicit-fma chain over k held in a register, so the bits equal the
// CPU backend's. NaN results are canonicalized at the store.
//
// i8: the same tiling with K-tiles of 32 bytes packed 4 per 32-bit word; __dp4a on the
// GPU, an exact host equivalent under the emulation. Integer sums wrap (two's complement)
// and are exact in any order.
//
// Batches: gridDim.z (grid-strided when there are more than 65535), with numpy
// broadcasting of the batch dims through per-dim strides computed on the host.
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm_device.cuh"
#include "kernels/cuda/simt.h"
#include "kernels/detmath.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

using gemm_dev::kBK;
using gemm_dev::kBM;
using gemm_dev::kBN;
using gemm_dev::kThreads;

constexpr int64_t kMaxGridYZ = 65535;

// Output batch dims and each input's element stride per output batch dim (0 = broadcast).
struct BatchPlan {
  int nb = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_stride[kMaxRank] = {};
  int64_t b_stride[kMaxRank] = {};
  int64_t count = 1;
};

CNSR_DEVICE void BatchOffsets(const BatchPlan& plan, int64_t i, int64_t* a_off, int64_t* b_off) {
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

CNSR_GLOBAL CNSR_GEMM_LAUNCH_BOUNDS void MatMulF32Kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K,
                                 BatchPlan plan, bool vec_a, bool vec_b) {
  CNSR_SHARED(gemm_dev::Vec4, as_vec, gemm_dev::kSharedAVec4);
  CNSR_SHARED(gemm_dev::Vec4, bs_vec, gemm_dev::kSharedBVec4);
  float* As = reinterpret_cast<float*>(as_vec);
  float* Bs = reinterpret_cast<float*>(bs_vec);
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int64_t m_tiles = (M + kBM - 1) / kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  for (int64_t z = blockIdx.z; z < plan.count; z += gridDim.z) {
    int64_t a_off = 0, b_off = 0;
    BatchOffsets(plan, z, &a_off, &b_off);
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
// i8

constexpr int kI8BK = 32;             // k bytes per K-tile
constexpr int kI8Words = kI8BK / 4;   // packed words per K-tile
constexpr int kI8AStride = kBM + 4;   // padded row of the transposed A tile (words)
constexpr int kI8AStage = kI8Words * kI8AStride;
constexpr int kI8BStage = kI8Words * kBN;

struct alignas(16) Int4Words {
  int32_t v[4];
};

CNSR_DEVICE int32_t Dp4a(int32_t a, int32_t b, int32_t c) {
#if defined(CNSR_SIMT_EMULATION)
  uint32_t s = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i) {
    const int32_t x = static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(a) >> (8 * i)));
    const int32_t y = static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(b) >> (8 * i)));
    s += static_cast<uint32_t>(x * y);
  }
  return static_cast<int32_t>(s);
#else
  return __dp4a(a, b, c);
#endif
}

CNSR_DEVICE void Load4Words(const int32_t* p, int32_t* out) {
#if defined(CNSR_SIMT_EMULATION)
  out[0] = p[0];
  out[1] = p[1];
  out[2] = p[2];
  out[3] = p[3];
#else
  const int4 v = *reinterpret_cast<const int4*>(p);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
#endif
}

CNSR_DEVICE uint32_t PackByte(int8_t v, int i) { return static_cast<uint32_t>(static_cast<uint8_t>(v)) << (8 * i); }

// Thread mapping of the loads: A row tid / 2, k bytes (tid % 2) * 16 + {0..15} (words
// (tid % 2) * 4 + {0..3}); B column tid % 128, k bytes (tid / 128) * 16 + {0..15}.
CNSR_DEVICE void LoadI8A(const int8_t* row, int64_t K, int64_t k0, int tid, int32_t* w) {
  const int64_t kb = k0 + (tid & 1) * 16;
  for (int q = 0; q < 4; ++q) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
      const int64_t k = kb + q * 4 + i;
      if (row != nullptr && k < K) word |= PackByte(row[k], i);
    }
    w[q] = static_cast<int32_t>(word);
  }
}

CNSR_DEVICE void LoadI8B(const int8_t* col, int64_t K, int64_t N, int64_t k0, int tid, int32_t* w) {
  const int64_t kb = k0 + (tid >> 7) * 16;
  for (int q = 0; q < 4; ++q) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
      const int64_t k = kb + q * 4 + i;
      if (col != nullptr && k < K) word |= PackByte(col[k * N], i);
    }
    w[q] = static_cast<int32_t>(word);
  }
}

CNSR_DEVICE void StoreI8Stage(int32_t* As, int32_t* Bs, int tid, const int32_t* ra, const int32_t* rb) {
  const int a_row = tid >> 1, a_w = (tid & 1) * 4;
  const int b_col = tid & 127, b_w = (tid >> 7) * 4;
  for (int q = 0; q < 4; ++q) {
    As[(a_w + q) * kI8AStride + a_row] = ra[q];
    Bs[(b_w + q) * kBN + b_col] = rb[q];
  }
}

CNSR_GLOBAL CNSR_GEMM_LAUNCH_BOUNDS void MatMulI8Kernel(const int8_t* A, const int8_t* B, int32_t* C, int64_t M, int64_t N, int64_t K,
                                BatchPlan plan) {
  CNSR_SHARED(Int4Words, as_vec, 2 * kI8AStage / 4);
  CNSR_SHARED(Int4Words, bs_vec, 2 * kI8BStage / 4);
  int32_t* As = reinterpret_cast<int32_t*>(as_vec);
  int32_t* Bs = reinterpret_cast<int32_t*>(bs_vec);
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int64_t m_tiles = (M + kBM - 1) / kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t ntiles = (K + kI8BK - 1) / kI8BK;
  for (int64_t z = blockIdx.z; z < plan.count; z += gridDim.z) {
    int64_t a_off = 0, b_off = 0;
    BatchOffsets(plan, z, &a_off, &b_off);
    int32_t* c_batch = C + z * M * N;
    for (int64_t by = blockIdx.y; by < m_tiles; by += gridDim.y) {
      const int64_t m0 = by * kBM;
      const int64_t a_row = m0 + (tid >> 1);
      const int8_t* arow = (K > 0 && a_row < M) ? A + a_off + a_row * K : nullptr;
      const int64_t b_col = n0 + (tid & 127);
      const int8_t* bcol = (K > 0 && b_col < N) ? B + b_off + b_col : nullptr;
      int32_t acc[8][8];
      CNSR_GEMM_UNROLL
      for (int i = 0; i < 8; ++i) {
        CNSR_GEMM_UNROLL
        for (int j = 0; j < 8; ++j) acc[i][j] = 0;
      }
      if (ntiles > 0) {
        int32_t ra[4], rb[4];
        LoadI8A(arow, K, 0, tid, ra);
        LoadI8B(bcol, K, N, 0, tid, rb);
        StoreI8Stage(As, Bs, tid, ra, rb);
        __syncthreads();
        for (int64_t t = 0; t < ntiles; ++t) {
          const int cur = static_cast<int>(t & 1);
          const bool more = t + 1 < ntiles;
          if (more) {
            LoadI8A(arow, K, (t + 1) * kI8BK, tid, ra);
            LoadI8B(bcol, K, N, (t + 1) * kI8BK, tid, rb);
          }
          const int32_t* as = As + cur * kI8AStage;
          const int32_t* bs = Bs + cur * kI8BStage;
          // Zero padding beyond K is exact for integers, so the whole tile is consumed.
          CNSR_GEMM_UNROLL
          for (int w = 0; w < kI8Words; ++w) {
            int32_t a[8], b[8];
            Load4Words(as + w * kI8AStride + ty * 4, a);
            Load4Words(as + w * kI8AStride + 64 + ty * 4, a + 4);
            Load4Words(bs + w * kBN + tx * 4, b);
            Load4Words(bs + w * kBN + 64 + tx * 4, b + 4);
            CNSR_GEMM_UNROLL
            for (int i = 0; i < 8; ++i) {
              CNSR_GEMM_UNROLL
              for (int j = 0; j < 8; ++j) acc[i][j] = Dp4a(a[i], b[j], acc[i][j]);
            }
          }
          if (more) StoreI8Stage(As + (cur ^ 1) * kI8AStage, Bs + (cur ^ 1) * kI8BStage, tid, ra, rb);
          __syncthreads();
        }
      }
      CNSR_GEMM_UNROLL
      for (int i = 0; i < 8; ++i) {
        const int64_t row = m0 + gemm_dev::MicroRow(ty, i);
        if (row >= M) continue;
        int32_t* crow = c_batch + row * N;
        CNSR_GEMM_UNROLL
        for (int j = 0; j < 8; ++j) {
          const int64_t col = n0 + gemm_dev::MicroCol(tx, j);
          if (col < N) crow[col] = acc[i][j];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Host side: validation mirrors kernels/cpu/matmul.cc.

std::string ShapeStr(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.rank; ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

struct Dims {
  int64_t M = 0, N = 0, K = 0;
};

Status PlanMatMul(const KernelCall& call, DType in_dtype, DType out_dtype, Dims* d, BatchPlan* plan) {
  const char* name = call.op == Op::kMatMul ? "matmul" : "matmul_i8";
  if (call.num_inputs != 2 || call.num_outputs != 1 || !call.inputs || !call.outputs) {
    return InvalidArgument(std::string(name) + ": expects 2 inputs and 1 output");
  }
  const TensorView& a = call.in(0);
  const TensorView& b = call.in(1);
  const TensorView& y = call.out(0);
  if (a.dtype != in_dtype || b.dtype != in_dtype || y.dtype != out_dtype) {
    return InvalidArgument(std::string(name) + ": expects " + std::string(DTypeName(in_dtype)) + " inputs and " +
                           std::string(DTypeName(out_dtype)) + " output");
  }
  if (a.rank < 2 || b.rank < 2 || y.rank < 2 || a.rank > kMaxRank || b.rank > kMaxRank || y.rank > kMaxRank ||
      a.rank > y.rank || b.rank > y.rank) {
    return InvalidArgument(std::string(name) + ": bad ranks " + ShapeStr(a) + " x " + ShapeStr(b) + " -> " +
                           ShapeStr(y));
  }
  for (const TensorView* t : {&a, &b, &y}) {
    for (int i = 0; i < t->rank; ++i) {
      if (t->dims[i] < 0) return InvalidArgument(std::string(name) + ": negative dimension");
    }
  }
  d->M = a.dims[a.rank - 2];
  d->K = a.dims[a.rank - 1];
  d->N = b.dims[b.rank - 1];
  if (b.dims[b.rank - 2] != d->K || y.dims[y.rank - 2] != d->M || y.dims[y.rank - 1] != d->N) {
    return InvalidArgument(std::string(name) + ": shape mismatch " + ShapeStr(a) + " x " + ShapeStr(b) + " -> " +
                           ShapeStr(y));
  }
  plan->nb = y.rank - 2;
  int64_t a_el = d->M * d->K, b_el = d->K * d->N;
  for (int i = plan->nb - 1; i >= 0; --i) {
    const int ia = i - (y.rank - a.rank), ib = i - (y.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    const int64_t dy = y.dims[i];
    if ((da != dy && da != 1) || (db != dy && db != 1) || (da == 1 && db == 1 && dy != 1)) {
      return InvalidArgument(std::string(name) + ": batch dims do not broadcast " + ShapeStr(a) + " x " +
                             ShapeStr(b) + " -> " + ShapeStr(y));
    }
    plan->dims[i] = dy;
    plan->a_stride[i] = da == 1 ? 0 : a_el;
    plan->b_stride[i] = db == 1 ? 0 : b_el;
    a_el *= da;
    b_el *= db;
    plan->count *= dy;
  }
  if (y.num_elements() > 0 && (!y.data || (d->K > 0 && (!a.data || !b.data)))) {
    return InvalidArgument(std::string(name) + ": missing tensor data");
  }
  return OkStatus();
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

Status RunMatMul(const KernelCall& call, const LaunchContext& ctx) {
  if (call.op != Op::kMatMul && call.op != Op::kMatMulInt8) {
    return InvalidArgument("RunMatMul: unexpected op " + std::string(OpName(call.op)));
  }
  const bool f32 = call.op == Op::kMatMul;
  Dims d;
  BatchPlan plan;
  RETURN_IF_ERROR(PlanMatMul(call, f32 ? DType::kF32 : DType::kI8, f32 ? DType::kF32 : DType::kI32, &d, &plan));
  if (plan.count == 0 || d.M == 0 || d.N == 0) return OkStatus();
  const int64_t n_tiles = (d.N + kBN - 1) / kBN;
  const int64_t m_tiles = (d.M + kBM - 1) / kBM;
  if (n_tiles > 0x7FFFFFFF) return InvalidArgument("matmul: N is too large for the CUDA grid");
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles < kMaxGridYZ ? m_tiles : kMaxGridYZ),
                  static_cast<unsigned>(plan.count < kMaxGridYZ ? plan.count : kMaxGridYZ));
  const dim3 block(kThreads);
  const TensorView& a = call.in(0);
  const TensorView& b = call.in(1);
  const TensorView& y = call.out(0);
  if (f32) {
    const float* A = a.as<const float>();
    const float* B = b.as<const float>();
    float* C = y.as<float>();
    const bool vec_a = d.K % 4 == 0 && Aligned16(A);
    const bool vec_b = d.N % 4 == 0 && Aligned16(B);
    CNSR_LAUNCH(MatMulF32Kernel, grid, block, 0, (cudaStream_t)ctx.stream, A, B, C, d.M, d.N, d.K, plan, vec_a,
                vec_b);
    return CheckLaunch("matmul");
  }
  CNSR_LAUNCH(MatMulI8Kernel, grid, block, 0, (cudaStream_t)ctx.stream, a.as<const int8_t>(), b.as<const int8_t>(),
              y.as<int32_t>(), d.M, d.N, d.K, plan);
  return CheckLaunch("matmul_i8");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
