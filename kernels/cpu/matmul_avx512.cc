// AVX-512F GEMM micro-kernel (compiled with -mavx512f; called only after CpuHasAvx512F()).
//
// A 12 x 16 tile of C in twelve 512-bit accumulators, fed by the AVX2 GEMM's own operands: two
// consecutive packed 6-row A panels and 16 columns of B, a packed panel (whose row k is exactly
// one zmm) or B itself read in place. Each lane runs the chain acc = fma(a[m,k], b[k,n], acc) in increasing k, one
// vfmadd231ps per step, starting at +0.0 on the first k-block and from C on later ones; NaNs
// are canonicalized on the last. So it gives the bits of the 6 x 16 AVX2 kernel (and of
// docs/DETERMINISM.md 4.4); it only does twice the work per instruction on CPUs with 512-bit
// FMA units.
#include <immintrin.h>

#include <atomic>
#include <cstring>

#include "kernels/cpu/gemm.h"

namespace consensor::kernels::cpu::gemm {

namespace {

std::atomic<bool> g_avx512_enabled{true};
constexpr int kPanelRows = 6;
constexpr int kTileRows = 12;
constexpr int kPanelCols = 16;

}  // namespace

bool CpuHasAvx512F() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

bool UseAvx512Gemm() { return g_avx512_enabled.load(std::memory_order_relaxed) && CpuHasAvx512F(); }

void SetGemmAvx512ForTesting(bool enabled) { g_avx512_enabled.store(enabled); }

void MicroF32TwelveRowsAvx512(int64_t kc, const float* __restrict ap0, const float* __restrict ap1,
                              const float* __restrict bp, int64_t bstride, float* c, int64_t ldc, bool first,
                              bool last) {
  __m512 acc[kTileRows];
  for (int r = 0; r < kTileRows; ++r) acc[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc);
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b = _mm512_loadu_ps(bp + k * bstride);
    const float* a0 = ap0 + k * kPanelRows;
    const float* a1 = ap1 + k * kPanelRows;
    for (int r = 0; r < kPanelRows; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a0[r]), b, acc[r]);
    for (int r = 0; r < kPanelRows; ++r)
      acc[kPanelRows + r] = _mm512_fmadd_ps(_mm512_set1_ps(a1[r]), b, acc[kPanelRows + r]);
  }
  if (last) {
    const uint32_t canonical_nan_bits = 0x7FC00000u;
    float canonical_nan;
    std::memcpy(&canonical_nan, &canonical_nan_bits, sizeof(canonical_nan));
    const __m512 nan = _mm512_set1_ps(canonical_nan);
    for (int r = 0; r < kTileRows; ++r)
      acc[r] = _mm512_mask_mov_ps(acc[r], _mm512_cmp_ps_mask(acc[r], acc[r], _CMP_UNORD_Q), nan);
  }
  for (int r = 0; r < kTileRows; ++r) _mm512_storeu_ps(c + r * ldc, acc[r]);
}

void MicroF32TwelveRowsTwoPanelsAvx512(int64_t kc, const float* __restrict ap0, const float* __restrict ap1,
                                       const float* __restrict bp0, const float* __restrict bp1, int64_t bstride,
                                       float* c, int64_t ldc, bool first, bool last) {
  // acc[r] holds row r's columns 0-15, acc[kTileRows + r] its columns 16-31: one broadcast of
  // a[r, k] feeds two fmas.
  __m512 acc[2 * kTileRows];
  for (int r = 0; r < kTileRows; ++r) {
    acc[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc);
    acc[kTileRows + r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc + kPanelCols);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(bp0 + k * bstride);
    const __m512 b1 = _mm512_loadu_ps(bp1 + k * bstride);
    const float* a0 = ap0 + k * kPanelRows;
    const float* a1 = ap1 + k * kPanelRows;
    for (int r = 0; r < kPanelRows; ++r) {
      const __m512 a = _mm512_set1_ps(a0[r]);
      acc[r] = _mm512_fmadd_ps(a, b0, acc[r]);
      acc[kTileRows + r] = _mm512_fmadd_ps(a, b1, acc[kTileRows + r]);
    }
    for (int r = 0; r < kPanelRows; ++r) {
      const __m512 a = _mm512_set1_ps(a1[r]);
      acc[kPanelRows + r] = _mm512_fmadd_ps(a, b0, acc[kPanelRows + r]);
      acc[kTileRows + kPanelRows + r] = _mm512_fmadd_ps(a, b1, acc[kTileRows + kPanelRows + r]);
    }
  }
  if (last) {
    const uint32_t canonical_nan_bits = 0x7FC00000u;
    float canonical_nan;
    std::memcpy(&canonical_nan, &canonical_nan_bits, sizeof(canonical_nan));
    const __m512 nan = _mm512_set1_ps(canonical_nan);
    for (int r = 0; r < 2 * kTileRows; ++r)
      acc[r] = _mm512_mask_mov_ps(acc[r], _mm512_cmp_ps_mask(acc[r], acc[r], _CMP_UNORD_Q), nan);
  }
  for (int r = 0; r < kTileRows; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r]);
    _mm512_storeu_ps(c + r * ldc + kPanelCols, acc[kTileRows + r]);
  }
}

namespace {

// R < 12 rows (rows 0-5 from ap0, 6 and up from ap1) x NP panels of 16 columns: the rows after a
// block's last 12-row tile. The same chain per lane as the 12-row kernels.
template <int R, int NP>
void RowsAvx512(int64_t kc, const float* __restrict ap0, const float* __restrict ap1, const float* __restrict bp0,
                const float* __restrict bp1, int64_t bstride, float* c, int64_t ldc, bool first, bool last) {
  __m512 acc[R][NP];
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < NP; ++p)
      acc[r][p] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc + p * kPanelCols);
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b[NP];
    b[0] = _mm512_loadu_ps(bp0 + k * bstride);
    if constexpr (NP == 2) b[1] = _mm512_loadu_ps(bp1 + k * bstride);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(r < kPanelRows ? ap0[k * kPanelRows + r] : ap1[k * kPanelRows + r - kPanelRows]);
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_ps(a, b[p], acc[r][p]);
    }
  }
  if (last) {
    const uint32_t canonical_nan_bits = 0x7FC00000u;
    float canonical_nan;
    std::memcpy(&canonical_nan, &canonical_nan_bits, sizeof(canonical_nan));
    const __m512 nan = _mm512_set1_ps(canonical_nan);
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < NP; ++p)
        acc[r][p] = _mm512_mask_mov_ps(acc[r][p], _mm512_cmp_ps_mask(acc[r][p], acc[r][p], _CMP_UNORD_Q), nan);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(c + r * ldc + p * kPanelCols, acc[r][p]);
  }
}

template <int NP>
void RowsAvx512Any(int64_t rows, int64_t kc, const float* ap0, const float* ap1, const float* bp0, const float* bp1,
                   int64_t bstride, float* c, int64_t ldc, bool first, bool last) {
  switch (rows) {
    case 1: return RowsAvx512<1, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 2: return RowsAvx512<2, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 3: return RowsAvx512<3, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 4: return RowsAvx512<4, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 5: return RowsAvx512<5, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 6: return RowsAvx512<6, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 7: return RowsAvx512<7, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 8: return RowsAvx512<8, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 9: return RowsAvx512<9, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    case 10: return RowsAvx512<10, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
    default: return RowsAvx512<11, NP>(kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
  }
}

}  // namespace

void MicroF32FewRowsAvx512(int64_t rows, int64_t kc, const float* ap0, const float* ap1, const float* bp0,
                           const float* bp1, int64_t bstride, float* c, int64_t ldc, bool first, bool last) {
  if (bp1) return RowsAvx512Any<2>(rows, kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
  RowsAvx512Any<1>(rows, kc, ap0, ap1, bp0, bp1, bstride, c, ldc, first, last);
}

}  // namespace consensor::kernels::cpu::gemm
