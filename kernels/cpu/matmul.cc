// MatMul (f32) and MatMulInt8 (i8 x i8 -> i32), docs/DETERMINISM.md 4.4.
//
// Work is split by OUTPUT blocks only: (batch, N-block, M-block) tasks on the pool. Each
// output element is one sequential fma chain over k computed by one thread, so neither
// the thread count nor the ISA changes a bit.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/checks/matmul.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"

namespace consensor::kernels::cpu {

namespace gemm {

namespace {

constexpr uint32_t kCanonicalNaN = 0x7FC00000u;
constexpr int64_t kPortableKC = 256;
constexpr int64_t kPortableNC = 1024;

inline float CanonNaN(float v) {
  if (v != v) {
    float nan;
    std::memcpy(&nan, &kCanonicalNaN, sizeof(nan));
    return nan;
  }
  return v;
}

}  // namespace

// Portable f32: for each row, C[m, nblock] is the accumulator row; k runs in order and
// each element is updated with one explicit fma per k.
bool F32BlockPortable(const F32Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                      Workspace* ws, const PartDone* done) {
  // A range of each chain (k_begin/k_end) is the AVX2 engine's; a whole chain here would be
  // wrong bits, so such a call fails instead.
  if (op.k_begin != 0 || op.k_end >= 0) return false;
  for (int64_t nb = n0; nb < n1; nb += kPortableNC) {
    const int64_t ne = std::min(n1, nb + kPortableNC);
    for (int64_t m = m0; m < m1; ++m) {
      float* c = op.c + m * op.ldc;
      for (int64_t n = nb; n < ne; ++n) c[n] = 0.0f;
    }
    for (int64_t kb = 0; kb < d.K; kb += kPortableKC) {
      const int64_t ke = std::min(d.K, kb + kPortableKC);
      for (int64_t m = m0; m < m1; ++m) {
        float* c = op.c + m * op.ldc;
        const float* a = op.a + m * op.lda;
        for (int64_t k = kb; k < ke; ++k) {
          const float av = a[k];
          const float* b = op.b + k * op.ldb;
          for (int64_t n = nb; n < ne; ++n) c[n] = std::fma(av, b[n], c[n]);
        }
      }
    }
    for (int64_t m = m0; m < m1; ++m) {
      float* c = op.c + m * op.ldc;
      for (int64_t n = nb; n < ne; ++n) c[n] = CanonNaN(c[n]);
    }
    if (done && m0 < m1) (*done)(m0, m1, nb, ne);
  }
  return true;
}

bool I8BlockPortable(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                     Workspace* ws) {
  if (m0 >= m1 || n0 >= n1) return true;
  auto* acc = static_cast<uint32_t*>(ws->Get(0, sizeof(uint32_t) * (n1 - n0)));
  if (!acc) return false;
  for (int64_t m = m0; m < m1; ++m) {
    std::fill(acc, acc + (n1 - n0), 0u);
    const int8_t* a = op.a + m * op.lda;
    for (int64_t k = 0; k < d.K; ++k) {
      const int32_t av = a[k];
      if (av == 0) continue;  // exact integer arithmetic: skipping a zero term is bit-neutral
      const int8_t* b = op.b + k * op.ldb + n0;
      for (int64_t n = 0; n < n1 - n0; ++n) acc[n] += static_cast<uint32_t>(av * static_cast<int32_t>(b[n]));
    }
    int32_t* c = op.c + m * op.ldc + n0;
    for (int64_t n = 0; n < n1 - n0; ++n) c[n] = static_cast<int32_t>(acc[n]);
  }
  return true;
}

bool F32Single(const F32Operands& op, const Dims& d, Isa isa, Workspace* ws) {
  return isa == Isa::kAvx2 ? F32BlockAvx2(op, d, 0, d.M, 0, d.N, ws) : F32BlockPortable(op, d, 0, d.M, 0, d.N, ws);
}

namespace {

// Task grid over (batch, N-blocks, M-blocks), M innermost so that one worker chunk
// processes runs of M-blocks sharing the same packed B panels.
// block(operands, dims, m0, m1, n0, n1, workspace, part_done) computes one block; part_done is
// null without `done`.
template <typename Ops, typename BlockFn>
Status RunBatched(int64_t batch, const Dims& d, const std::function<Ops(int64_t)>& operands, const CpuContext& ctx,
                  BlockFn block, const BlockDone& done = nullptr) {
  if (batch <= 0 || d.M <= 0 || d.N <= 0) return OkStatus();
  const int64_t threads = ctx.pool ? ctx.pool->num_threads() : 1;
  int64_t mb = 144, nb = d.N;
  auto count = [&] { return batch * ((d.M + mb - 1) / mb) * ((d.N + nb - 1) / nb); };
  // A block's work is its multiply-adds. Blocks shrink to give each thread about 4, but never
  // below the pool's minimum chunk of work: a small GEMM stays in few large blocks (and so on
  // the calling thread) instead of many small ones that cost more to pack and finish than to
  // share. Block sizes never change a bit (each output is one k-ordered chain).
  const int64_t k_work = std::max<int64_t>(1, d.K);
  const int64_t min_block_work = ctx.pool ? ctx.pool->min_chunk_work() : 0;
  if (threads > 1) {
    const int64_t want = 4 * threads;
    auto smaller_nb = [&] { return (nb / 2 + 15) / 16 * 16; };
    auto smaller_mb = [&] { return (mb / 2 + 5) / 6 * 6; };
    while (count() < want && nb > 64 && std::min(d.M, mb) * smaller_nb() * k_work >= min_block_work) nb = smaller_nb();
    while (count() < want && mb > 24 && smaller_mb() * std::min(d.N, nb) * k_work >= min_block_work) mb = smaller_mb();
  }
  const int64_t mblocks = (d.M + mb - 1) / mb;
  const int64_t nblocks = (d.N + nb - 1) / nb;
  const int64_t tasks = batch * nblocks * mblocks;
  std::atomic<bool> failed{false};
  auto fn = [&](int64_t begin, int64_t end) {
    Workspace ws;
    for (int64_t t = begin; t < end;) {
      const int64_t row = t / mblocks;  // (batch, nblock) pair
      const int64_t run_end = std::min(end, (row + 1) * mblocks);
      const int64_t b = row / nblocks, nbi = row % nblocks;
      const int64_t m0 = (t % mblocks) * mb;
      const int64_t m1 = std::min(d.M, (t % mblocks + (run_end - t)) * mb);
      const int64_t n0 = nbi * nb, n1 = std::min(d.N, n0 + nb);
      const PartDone part_done = [&](int64_t pm0, int64_t pm1, int64_t pn0, int64_t pn1) {
        done(b, pm0, pm1, pn0, pn1);
      };
      if (!block(operands(b), d, m0, m1, n0, n1, &ws, done ? &part_done : nullptr)) failed.store(true);
      t = run_end;
    }
  };
  if (ctx.pool) {
    ctx.pool->ParallelForWork(tasks, std::min(d.M, mb) * std::min(d.N, nb) * k_work, fn);
  } else {
    fn(0, tasks);
  }
  if (failed.load()) return ResourceExhausted("matmul: cannot allocate packing scratch");
  return OkStatus();
}

}  // namespace

Status F32Batched(int64_t batch, const Dims& d, const std::function<F32Operands(int64_t)>& operands,
                  const CpuContext& ctx, const BlockDone& done) {
  if (ctx.isa == Isa::kAvx2) return RunBatched(batch, d, operands, ctx, F32BlockAvx2, done);
  return RunBatched(batch, d, operands, ctx, F32BlockPortable, done);
}

Status I8Batched(int64_t batch, const Dims& d, const std::function<I8Operands(int64_t)>& operands,
                 const CpuContext& ctx) {
  auto block = ctx.isa != Isa::kAvx2 ? &I8BlockPortable
               : UseAmxGemm()        ? &I8BlockAmx
               : UseVnniGemm()       ? &I8BlockAvx512Vnni
                                     : &I8BlockAvx2;
  return RunBatched(batch, d, operands, ctx,
                    [block](const I8Operands& op, const Dims& dims, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                            Workspace* ws, const PartDone*) { return block(op, dims, m0, m1, n0, n1, ws); });
}

}  // namespace gemm

namespace {

// Element offsets of batch `i` (row-major over the output batch dims) in a and b.
void BatchOffsets(const MatMulBatchPlan& plan, const gemm::Dims& d, int64_t i, int64_t* a_off, int64_t* b_off) {
  int64_t a_idx = 0, b_idx = 0;
  for (int j = plan.nb - 1; j >= 0; --j) {
    const int64_t idx = i % plan.dims[j];
    i /= plan.dims[j];
    a_idx += idx * plan.a_stride[j];
    b_idx += idx * plan.b_stride[j];
  }
  *a_off = a_idx * d.M * d.K;
  *b_off = b_idx * d.K * d.N;
}

// An f32 matmul's constant B, each of its own batch matrices packed once into the AVX2 GEMM's
// 16-column panels over all of K (PrepareMatMulB).
class PackedMatMulB final : public PreparedOperand {
 public:
  PackedMatMulB(const float* b, const gemm::Dims& d, int64_t b_batches)
      : per_batch_(gemm::PackedBPanelsFloats(d.K, d.N)),
        batches_(b_batches),
        n_(d.N),
        k_(d.K),
        data_(static_cast<float*>(std::aligned_alloc(64, (sizeof(float) * per_batch_ * b_batches + 63) / 64 * 64))) {
    if (!data_) return;
    for (int64_t i = 0; i < b_batches; ++i) gemm::PackBPanelsF32(b + i * d.K * d.N, d.N, d.K, d.N, batch(i));
  }
  ~PackedMatMulB() override { std::free(data_); }
  PackedMatMulB(const PackedMatMulB&) = delete;
  PackedMatMulB& operator=(const PackedMatMulB&) = delete;
  int64_t bytes() const override { return static_cast<int64_t>(sizeof(float)) * per_batch_ * batches_; }
  bool ok() const { return data_ != nullptr; }
  // Whether these panels were packed for a B of these dims and batch count.
  bool Fits(const gemm::Dims& d, int64_t b_batches) const { return d.K == k_ && d.N == n_ && b_batches == batches_; }
  const float* batch(int64_t i) const { return data_ + i * per_batch_; }
  float* batch(int64_t i) { return data_ + i * per_batch_; }

 private:
  int64_t per_batch_, batches_, n_, k_;
  float* data_;
};

// An int8 matmul's constant B, each of its own batch matrices packed once over all of K into the
// 16-column panels of byte quads of the AMX kernel (for_amx) or of the VNNI kernel
// (PrepareMatMulB).
class PackedMatMulBI8 final : public PreparedOperand {
 public:
  PackedMatMulBI8(const int8_t* b, const gemm::Dims& d, int64_t b_batches, bool for_amx)
      : per_batch_(for_amx ? gemm::PackedBAmxPanelsBytes(d.K, d.N) : gemm::PackedBQuadPanelsBytes(d.K, d.N)),
        batches_(b_batches),
        n_(d.N),
        k_(d.K),
        for_amx_(for_amx),
        data_(static_cast<uint8_t*>(std::aligned_alloc(64, (per_batch_ * b_batches + 63) / 64 * 64))) {
    if (!data_) return;
    for (int64_t i = 0; i < b_batches; ++i) {
      if (for_amx) {
        gemm::PackBAmxPanelsI8(b + i * d.K * d.N, d.N, d.K, d.N, batch(i));
      } else {
        gemm::PackBQuadPanelsI8(b + i * d.K * d.N, d.N, d.K, d.N, batch(i));
      }
    }
  }
  bool for_amx() const { return for_amx_; }
  ~PackedMatMulBI8() override { std::free(data_); }
  PackedMatMulBI8(const PackedMatMulBI8&) = delete;
  PackedMatMulBI8& operator=(const PackedMatMulBI8&) = delete;
  int64_t bytes() const override { return per_batch_ * batches_; }
  bool ok() const { return data_ != nullptr; }
  bool Fits(const gemm::Dims& d, int64_t b_batches) const { return d.K == k_ && d.N == n_ && b_batches == batches_; }
  const uint8_t* batch(int64_t i) const { return data_ + i * per_batch_; }
  uint8_t* batch(int64_t i) { return data_ + i * per_batch_; }

 private:
  int64_t per_batch_, batches_, n_, k_;
  bool for_amx_;
  uint8_t* data_;
};

}  // namespace

StatusOr<std::unique_ptr<PreparedOperand>> PrepareMatMulB(const KernelCall& call, const CpuContext& ctx) {
  // int8: only for the AMX and AVX-512 VNNI kernels, the ones that read B packed over all of K.
  if (call.op == Op::kMatMulInt8 && call.num_inputs == 2 && call.in(0).dtype == DType::kI8 &&
      call.in(1).dtype == DType::kI8 && ctx.isa == Isa::kAvx2 && gemm::UseVnniGemm()) {
    ASSIGN_OR_RETURN(const MatMulPlan mp, PlanMatMul(call));
    const gemm::Dims d{mp.dims.M, mp.dims.N, mp.dims.K};
    if (d.K == 0 || d.N == 0 || mp.batch.b_batches == 0) return std::unique_ptr<PreparedOperand>();
    auto packed =
        std::make_unique<PackedMatMulBI8>(call.in(1).as<const int8_t>(), d, mp.batch.b_batches, gemm::UseAmxGemm());
    if (!packed->ok()) return ResourceExhausted("matmul_i8: cannot allocate the packed weights");
    return std::unique_ptr<PreparedOperand>(std::move(packed));
  }
  // Only f32 x f32 (f16/bf16 operands are widened per call and take no packed copy), only for
  // the AVX2 GEMM, which is the one that packs B.
  if (call.op != Op::kMatMul || call.num_inputs != 2 || call.in(0).dtype != DType::kF32 ||
      call.in(1).dtype != DType::kF32 || ctx.isa != Isa::kAvx2 || !CpuHasAvx2Fma()) {
    return std::unique_ptr<PreparedOperand>();
  }
  ASSIGN_OR_RETURN(const MatMulPlan mp, PlanMatMul(call));
  const gemm::Dims d{mp.dims.M, mp.dims.N, mp.dims.K};
  if (d.K == 0 || d.N == 0 || mp.batch.b_batches == 0) return std::unique_ptr<PreparedOperand>();
  auto packed = std::make_unique<PackedMatMulB>(call.in(1).as<const float>(), d, mp.batch.b_batches);
  if (!packed->ok()) return ResourceExhausted("matmul: cannot allocate the packed weights");
  return std::unique_ptr<PreparedOperand>(std::move(packed));
}

Status RunMatMul(const KernelCall& call, const CpuContext& ctx) {
  if (call.op != Op::kMatMul && call.op != Op::kMatMulInt8) {
    return InvalidArgument("RunMatMul: unexpected op " + std::string(OpName(call.op)));
  }
  if (ctx.isa == Isa::kAvx2 && !CpuHasAvx2Fma()) return FailedPrecondition("matmul: CPU lacks AVX2/FMA");
  const bool f32 = call.op == Op::kMatMul;
  ASSIGN_OR_RETURN(const MatMulPlan mp, PlanMatMul(call));
  const gemm::Dims d{mp.dims.M, mp.dims.N, mp.dims.K};
  const MatMulBatchPlan& plan = mp.batch;
  if (plan.count == 0 || d.M == 0 || d.N == 0) return OkStatus();
  const TensorView& a = call.in(0);
  const TensorView& b = call.in(1);
  const TensorView& y = call.out(0);
  const int64_t c_stride = d.M * d.N;
  if (a.dtype == DType::kF64) {
    // f64 (section 4.4 in binary64): one sequential fma chain per output element, k in
    // order; portable scalar code on every ISA, rows split across the pool.
    auto rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r / d.M, m = r % d.M;
        int64_t ao, bo;
        BatchOffsets(plan, d, i, &ao, &bo);
        const double* ar = a.as<const double>() + (d.K ? ao : 0) + m * d.K;
        const double* bm = b.as<const double>() + (d.K ? bo : 0);
        double* c = y.as<double>() + i * c_stride + m * d.N;
        for (int64_t n = 0; n < d.N; ++n) c[n] = 0.0;
        for (int64_t k = 0; k < d.K; ++k) {
          const double av = ar[k];
          const double* br = bm + k * d.N;
          for (int64_t n = 0; n < d.N; ++n) c[n] = std::fma(av, br[n], c[n]);
        }
        for (int64_t n = 0; n < d.N; ++n)
          c[n] = c[n] != c[n] ? std::bit_cast<double>(uint64_t{0x7FF8000000000000}) : c[n];
      }
    };
    const int64_t total = plan.count * d.M;
    if (ctx.pool) {
      // Scalar f64 multiply-adds cost several vector lanes' worth each.
      ctx.pool->ParallelForWork(total, 8 * std::max<int64_t>(1, d.N * d.K), rows);
    } else {
      rows(0, total);
    }
    return OkStatus();
  }
  if (f32) {
    // B packed once when the program was loaded; same values, same chains, so the same bits.
    const auto* packed = dynamic_cast<const PackedMatMulB*>(call.prepared);
    if (packed && (ctx.isa != Isa::kAvx2 || !packed->Fits(d, plan.b_batches))) packed = nullptr;
    auto operands = [&](int64_t i) {
      int64_t ao, bo;
      BatchOffsets(plan, d, i, &ao, &bo);
      gemm::F32Operands op;
      op.a = a.as<const float>() + (d.K ? ao : 0);
      op.lda = d.K;
      if (packed && d.K) op.b_panels = packed->batch(bo / (d.K * d.N));
      op.b = b.as<const float>() + (d.K ? bo : 0);
      op.ldb = d.N;
      op.c = y.as<float>() + i * c_stride;
      op.ldc = d.N;
      return op;
    };
    return gemm::F32Batched(plan.count, d, operands, ctx);
  }
  // B packed once when the program was loaded (read only by the kernel it was packed for); the
  // same values.
  const auto* packed = dynamic_cast<const PackedMatMulBI8*>(call.prepared);
  if (packed && (ctx.isa != Isa::kAvx2 || !packed->Fits(d, plan.b_batches))) packed = nullptr;
  auto operands = [&](int64_t i) {
    int64_t ao, bo;
    BatchOffsets(plan, d, i, &ao, &bo);
    gemm::I8Operands op;
    op.a = a.as<const int8_t>() + (d.K ? ao : 0);
    op.lda = d.K;
    if (packed && d.K) (packed->for_amx() ? op.b_amx_panels : op.b_quad_panels) = packed->batch(bo / (d.K * d.N));
    op.b = b.as<const int8_t>() + (d.K ? bo : 0);
    op.ldb = d.N;
    op.c = y.as<int32_t>() + i * c_stride;
    op.ldc = d.N;
    return op;
  };
  return gemm::I8Batched(plan.count, d, operands, ctx);
}

}  // namespace consensor::kernels::cpu
