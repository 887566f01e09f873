// The reduce family: ReduceSum/Mean/Max/Min/Prod, ArgMax and TopK (docs/DETERMINISM.md 4.1, 4.3).
// This file validates calls (kernels/checks/reduce.h) and runs the portable build of
// reduce_impl.h; reduce_avx2.cc holds the AVX2 build of the same source (and the widening i8 row
// sums on vpsadbw), and reduce_avx512.cc the f32 max/min of contiguous runs on AVX-512F. All give identical bits.
#include <algorithm>
#include <atomic>
#include <bit>
#include <vector>

#include "kernels/checks/reduce.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/reduce_avx512.h"
#include "kernels/cpu/reduce_impl.h"

namespace consensor::kernels::cpu {
namespace {

std::atomic<bool> g_max_min_avx512_enabled{true};
std::atomic<bool> g_widening_sum_avx2_enabled{true};

// Every output reduces one contiguous run: out[o] over x[o * len, (o + 1) * len).
bool ContiguousRuns(const ReduceLayout& L) {
  if (!L.inner_reduced || L.red.n != 1 || L.red.stride[0] != 1) return false;
  return L.kept.n == 0 || (L.kept.n == 1 && L.kept.stride[0] == L.red.size[0]);
}

// The section 1.1 max (or min) of a run from its key range: NaN if a key lies beyond an
// infinity's (a NaN of either sign), else the float of the extreme key (F32OrderKey is its own
// inverse).
float FromKeyRange(int32_t lo, int32_t hi, bool max) {
  constexpr int32_t kPlusInf = 0x7F800000;
  constexpr int32_t kMinusInf = static_cast<int32_t>(0x807FFFFFu);  // F32OrderKey(0xFF800000)
  if (hi > kPlusInf || lo < kMinusInf) return CanonicalNaNValue();
  return std::bit_cast<float>(static_cast<uint32_t>(F32OrderKey(static_cast<uint32_t>(max ? hi : lo))));
}

// f32 reduce_max / reduce_min whose outputs each reduce a contiguous run, on AVX-512F. One run
// is split into chunks across the pool (the combine is order-free); several run in parallel.
void MaxMinRunsAvx512(const float* x, const ReduceLayout& L, bool max, float* out, ThreadPool* pool) {
  const int64_t len = L.n_terms;
  constexpr int32_t kLowest = INT32_MIN, kHighest = INT32_MAX;
  if (L.n_out == 1) {
    constexpr int64_t kChunk = 1 << 14;
    const int64_t chunks = (len + kChunk - 1) / kChunk;
    std::vector<int32_t> lo(chunks, kHighest), hi(chunks, kLowest);
    pool->ParallelForWork(chunks, kChunk * 4, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        F32KeyRangeAvx512(x + c * kChunk, std::min(kChunk, len - c * kChunk), &lo[c], &hi[c]);
      }
    });
    out[0] = FromKeyRange(*std::min_element(lo.begin(), lo.end()), *std::max_element(hi.begin(), hi.end()), max);
    return;
  }
  pool->ParallelForWork(L.n_out, len * 4, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int32_t lo = kHighest, hi = kLowest;
      F32KeyRangeAvx512(x + o * len, len, &lo, &hi);
      out[o] = FromKeyRange(lo, hi, max);
    }
  });
}

}  // namespace

void SetReduceMaxMinAvx512ForTesting(bool enabled) { g_max_min_avx512_enabled.store(enabled); }
void SetWideningSumAvx2ForTesting(bool enabled) { g_widening_sum_avx2_enabled.store(enabled); }

Status RunReduce(const KernelCall& call, const CpuContext& ctx) {
  RETURN_IF_ERROR(ValidateReduce(call));
  if (ctx.pool == nullptr) return InvalidArgument("reduce: missing thread pool");
  if (ctx.isa == Isa::kAvx2 && (call.op == Op::kReduceMax || call.op == Op::kReduceMin) &&
      call.in(0).dtype == DType::kF32 && call.out().num_elements() > 0 &&
      g_max_min_avx512_enabled.load(std::memory_order_relaxed) && gemm::CpuHasAvx512F()) {
    const std::optional<ReduceLayout> L = PlanReduction(call.in(0), *call.params);
    if (L && ContiguousRuns(*L)) {
      MaxMinRunsAvx512(call.in(0).as<const float>(), *L, call.op == Op::kReduceMax, call.out().as<float>(), ctx.pool);
      return OkStatus();
    }
  }
  if (ctx.isa == Isa::kAvx2 && call.op == Op::kReduceSum && call.params->sum_widens_i8 &&
      call.out().num_elements() > 0 && g_widening_sum_avx2_enabled.load(std::memory_order_relaxed)) {
    const std::optional<ReduceLayout> L = PlanReduction(call.in(0), *call.params);
    if (L && ContiguousRuns(*L)) {
      const int64_t len = L->n_terms;
      const int8_t* x = call.in(0).as<const int8_t>();
      int32_t* out = call.out().as<int32_t>();
      ctx.pool->ParallelForWork(L->n_out, len,
                                [&](int64_t b, int64_t e) { WideningI8RowSumsAvx2(x + b * len, e - b, len, out + b); });
      return OkStatus();
    }
  }
  if (ctx.isa == Isa::kAvx2) return RunReduceAvx2(call, ctx);
  return RunReduceImpl(call, ctx);
}

}  // namespace consensor::kernels::cpu
