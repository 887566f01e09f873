// AVX2+FMA GEMM kernels (compiled with -mavx2 -mfma; called only after a runtime check).
//
// BLIS-style: B is packed in KC x NR micro-panels, A in MR x KC micro-panels, and a 6x16
// register-tiled micro-kernel runs the fma chain over one k-block. For the first k-block
// the accumulators start at +0.0; for every later k-block they are LOADED from C, so each
// output element sees exactly the sequential chain acc = fma(a[m,k], b[k,n], acc) over
// k = 0..K-1 (docs/DETERMINISM.md 4.4). NaNs are canonicalized when the last k-block is
// stored. Zero padding of edge panels only feeds outputs that are discarded. Blocks of few
// rows (small M: the pointwise convolutions of small CNNs) read full B panels in place
// instead of packing them; the chain and its order are the same. A constant B (a MatMul's
// weights) may come packed once over all of K (PackBPanelsF32): the same panels, read in the
// same order.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"

namespace consensor::kernels::cpu::gemm {

namespace {

constexpr int kMR = 6;
constexpr int kNR = 16;
constexpr int64_t kMC = 144;   // A block: kMC x kKC floats (~144 KiB) stays in L2
constexpr int64_t kKC = 256;   // B micro-panel: kKC x 16 floats (16 KiB) stays in L1
constexpr int64_t kNC = 4080;  // B block: kKC x kNC floats (~4 MiB) in L3
// Blocks of at most this many rows read full B panels in place instead of packing them: a
// packed panel would serve at most 4 micro-tiles, too few to repay copying it.
constexpr int64_t kBInPlaceMaxRows = 24;

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---------------------------------------------------------------------------------------
// f32

// Packs A[0:mc, 0:kc] (row stride lda) into ceil(mc/6) panels of kc x 6, zero padded.
void PackAF32(const float* a, int64_t lda, int64_t mc, int64_t kc, float* ap) {
  for (int64_t i = 0; i < mc; i += kMR) {
    const int64_t mr = std::min<int64_t>(kMR, mc - i);
    if (mr == kMR) {
      const float* r0 = a + (i + 0) * lda;
      const float* r1 = a + (i + 1) * lda;
      const float* r2 = a + (i + 2) * lda;
      const float* r3 = a + (i + 3) * lda;
      const float* r4 = a + (i + 4) * lda;
      const float* r5 = a + (i + 5) * lda;
      for (int64_t k = 0; k < kc; ++k) {
        ap[0] = r0[k];
        ap[1] = r1[k];
        ap[2] = r2[k];
        ap[3] = r3[k];
        ap[4] = r4[k];
        ap[5] = r5[k];
        ap += kMR;
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t r = 0; r < kMR; ++r) ap[r] = r < mr ? a[(i + r) * lda + k] : 0.0f;
        ap += kMR;
      }
    }
  }
}

// Packs B[0:kc, 0:nc] (row stride ldb) into ceil(nc/16) panels of kc x 16, zero padded.
void PackBF32(const float* b, int64_t ldb, int64_t kc, int64_t nc, float* bp) {
  for (int64_t j = 0; j < nc; j += kNR) {
    const int64_t nr = std::min<int64_t>(kNR, nc - j);
    if (nr == kNR) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = b + k * ldb + j;
        _mm256_store_ps(bp, _mm256_loadu_ps(src));
        _mm256_store_ps(bp + 8, _mm256_loadu_ps(src + 8));
        bp += kNR;
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = b + k * ldb + j;
        for (int64_t c = 0; c < kNR; ++c) bp[c] = c < nr ? src[c] : 0.0f;
        bp += kNR;
      }
    }
  }
}

// The first k-block's accumulators start at +0.0, a later one's are loaded from the 6x16 tile
// of C; shared by both micro-kernels (operands [c], [c3], [ldcb], [flags]).
// clang-format off
#define CNSR_MK_START_ACCUMULATORS \
  "test $1, %[flags]\n\t" \
  "jz 5f\n\t" \
  "vxorps %%ymm4, %%ymm4, %%ymm4\n\t" \
  "vxorps %%ymm5, %%ymm5, %%ymm5\n\t" \
  "vxorps %%ymm6, %%ymm6, %%ymm6\n\t" \
  "vxorps %%ymm7, %%ymm7, %%ymm7\n\t" \
  "vxorps %%ymm8, %%ymm8, %%ymm8\n\t" \
  "vxorps %%ymm9, %%ymm9, %%ymm9\n\t" \
  "vxorps %%ymm10, %%ymm10, %%ymm10\n\t" \
  "vxorps %%ymm11, %%ymm11, %%ymm11\n\t" \
  "vxorps %%ymm12, %%ymm12, %%ymm12\n\t" \
  "vxorps %%ymm13, %%ymm13, %%ymm13\n\t" \
  "vxorps %%ymm14, %%ymm14, %%ymm14\n\t" \
  "vxorps %%ymm15, %%ymm15, %%ymm15\n\t" \
  "jmp 6f\n\t" \
  "5:\n\t" \
  "vmovups (%[c]), %%ymm4\n\t" \
  "vmovups 32(%[c]), %%ymm5\n\t" \
  "vmovups (%[c],%[ldcb],1), %%ymm6\n\t" \
  "vmovups 32(%[c],%[ldcb],1), %%ymm7\n\t" \
  "vmovups (%[c],%[ldcb],2), %%ymm8\n\t" \
  "vmovups 32(%[c],%[ldcb],2), %%ymm9\n\t" \
  "vmovups (%[c3]), %%ymm10\n\t" \
  "vmovups 32(%[c3]), %%ymm11\n\t" \
  "vmovups (%[c3],%[ldcb],1), %%ymm12\n\t" \
  "vmovups 32(%[c3],%[ldcb],1), %%ymm13\n\t" \
  "vmovups (%[c3],%[ldcb],2), %%ymm14\n\t" \
  "vmovups 32(%[c3],%[ldcb],2), %%ymm15\n\t" \
  "6:\n\t"
// clang-format on

// The last k-block's NaN canonicalization (to 0x7FC00000) and the store of the 6x16 tile, shared
// by both micro-kernels (operands [c], [c3], [ldcb], [flags], [nan]).
// clang-format off
#define CNSR_MK_CANONICALIZE_AND_STORE \
  "test $2, %[flags]\n\t" \
  "jz 7f\n\t" \
  "vbroadcastss %[nan], %%ymm0\n\t" \
  "vcmpunordps %%ymm4, %%ymm4, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm4, %%ymm4\n\t" \
  "vcmpunordps %%ymm5, %%ymm5, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm5, %%ymm5\n\t" \
  "vcmpunordps %%ymm6, %%ymm6, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm6, %%ymm6\n\t" \
  "vcmpunordps %%ymm7, %%ymm7, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm7, %%ymm7\n\t" \
  "vcmpunordps %%ymm8, %%ymm8, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm8, %%ymm8\n\t" \
  "vcmpunordps %%ymm9, %%ymm9, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm9, %%ymm9\n\t" \
  "vcmpunordps %%ymm10, %%ymm10, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm10, %%ymm10\n\t" \
  "vcmpunordps %%ymm11, %%ymm11, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm11, %%ymm11\n\t" \
  "vcmpunordps %%ymm12, %%ymm12, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm12, %%ymm12\n\t" \
  "vcmpunordps %%ymm13, %%ymm13, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm13, %%ymm13\n\t" \
  "vcmpunordps %%ymm14, %%ymm14, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm14, %%ymm14\n\t" \
  "vcmpunordps %%ymm15, %%ymm15, %%ymm1\n\t" \
  "vblendvps %%ymm1, %%ymm0, %%ymm15, %%ymm15\n\t" \
  "7:\n\t" \
  "vmovups %%ymm4, (%[c])\n\t" \
  "vmovups %%ymm5, 32(%[c])\n\t" \
  "vmovups %%ymm6, (%[c],%[ldcb],1)\n\t" \
  "vmovups %%ymm7, 32(%[c],%[ldcb],1)\n\t" \
  "vmovups %%ymm8, (%[c],%[ldcb],2)\n\t" \
  "vmovups %%ymm9, 32(%[c],%[ldcb],2)\n\t" \
  "vmovups %%ymm10, (%[c3])\n\t" \
  "vmovups %%ymm11, 32(%[c3])\n\t" \
  "vmovups %%ymm12, (%[c3],%[ldcb],1)\n\t" \
  "vmovups %%ymm13, 32(%[c3],%[ldcb],1)\n\t" \
  "vmovups %%ymm14, (%[c3],%[ldcb],2)\n\t" \
  "vmovups %%ymm15, 32(%[c3],%[ldcb],2)\n\t" \
  "vzeroupper\n\t"
// clang-format on

// C[0:6, 0:16] (row stride ldc) = chain over kc of the packed panels.
// first: accumulators start at +0.0, else they are loaded from C. last: canonicalize NaN.
//
// Written in inline assembly only to pin the 12 accumulators to ymm4-ymm15 (GCC spills
// them when written with intrinsics); every step is the vfmadd231ps that _mm256_fmadd_ps
// emits (a*b + acc, one rounding), applied in increasing k. x86-64 only (this file is
// compiled for AVX2 targets).
// clang-format off: one instruction per line reads better than what the formatter makes of it.
// One k step once B's row k is in ymm0 (cols 0-7) and ymm1 (cols 8-15): for each of the 6 rows,
// its A value broadcast, then one fma into each of the row's two accumulators. Shared by both
// micro-kernels.
#define CNSR_MK_FMAS(K)                     \
  "vbroadcastss " #K                        \
  "*24+0(%[ap]), %%ymm2\n\t"                \
  "vfmadd231ps %%ymm0, %%ymm2, %%ymm4\n\t"  \
  "vfmadd231ps %%ymm1, %%ymm2, %%ymm5\n\t"  \
  "vbroadcastss " #K                        \
  "*24+4(%[ap]), %%ymm3\n\t"                \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm6\n\t"  \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm7\n\t"  \
  "vbroadcastss " #K                        \
  "*24+8(%[ap]), %%ymm2\n\t"                \
  "vfmadd231ps %%ymm0, %%ymm2, %%ymm8\n\t"  \
  "vfmadd231ps %%ymm1, %%ymm2, %%ymm9\n\t"  \
  "vbroadcastss " #K                        \
  "*24+12(%[ap]), %%ymm3\n\t"               \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm10\n\t" \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm11\n\t" \
  "vbroadcastss " #K                        \
  "*24+16(%[ap]), %%ymm2\n\t"               \
  "vfmadd231ps %%ymm0, %%ymm2, %%ymm12\n\t" \
  "vfmadd231ps %%ymm1, %%ymm2, %%ymm13\n\t" \
  "vbroadcastss " #K                        \
  "*24+20(%[ap]), %%ymm3\n\t"               \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm14\n\t" \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm15\n\t"

// A step of the packed B panel (row k at bp + 64 k bytes).
// clang-format off
#define CNSR_MK_STEP(K) \
  "vmovaps " #K "*64(%[bp]), %%ymm0\n\t" \
  "vmovaps " #K "*64+32(%[bp]), %%ymm1\n\t" \
  CNSR_MK_FMAS(K)
// clang-format on

alignas(4) const uint32_t kCanonNaNBits = 0x7FC00000u;

void MicroF32(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, bool first,
              bool last) {
  int64_t k4 = kc / 4, k1 = kc % 4;
  const int64_t ldcb = ldc * static_cast<int64_t>(sizeof(float));
  float* c3 = c + 3 * ldc;
  const int64_t flags = (first ? 1 : 0) | (last ? 2 : 0);
  asm volatile(
      // Accumulators: row r of the tile in ymm(4+2r) (cols 0-7) and ymm(5+2r) (cols 8-15).
      CNSR_MK_START_ACCUMULATORS
      "test %[k4], %[k4]\n\t"
      "jz 2f\n\t"
      ".p2align 5\n\t"
      "1:\n\t"
      "prefetcht0 384(%[ap])\n\t"
      CNSR_MK_STEP(0) CNSR_MK_STEP(1) CNSR_MK_STEP(2) CNSR_MK_STEP(3)
      "add $96, %[ap]\n\t"
      "add $256, %[bp]\n\t"
      "dec %[k4]\n\t"
      "jnz 1b\n\t"
      "2:\n\t"
      "test %[k1], %[k1]\n\t"
      "jz 4f\n\t"
      "3:\n\t"
      CNSR_MK_STEP(0)
      "add $24, %[ap]\n\t"
      "add $64, %[bp]\n\t"
      "dec %[k1]\n\t"
      "jnz 3b\n\t"
      "4:\n\t"
      CNSR_MK_CANONICALIZE_AND_STORE
      : [ap] "+r"(ap), [bp] "+r"(bp), [k4] "+r"(k4), [k1] "+r"(k1)
      : [c] "r"(c), [c3] "r"(c3), [ldcb] "r"(ldcb), [flags] "r"(flags), [nan] "m"(kCanonNaNBits)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "cc", "memory");
}

// The same chain with B read in place, row k of the panel at bp + k * ldb (no packing): one
// step per k, the B pointer advanced by ldb. Used when M is too small to pay for packing B.
// clang-format off
#define CNSR_MK_SSTEP(K)                    \
  "vmovups (%[bp]), %%ymm0\n\t"             \
  "vmovups 32(%[bp]), %%ymm1\n\t"           \
  "add %[ldbb], %[bp]\n\t"                 \
  CNSR_MK_FMAS(K)
// clang-format on

void MicroF32StridedB(int64_t kc, const float* __restrict ap, const float* __restrict bp, int64_t ldb, float* c,
                      int64_t ldc, bool first, bool last) {
  int64_t k4 = kc / 4, k1 = kc % 4;
  const int64_t ldcb = ldc * static_cast<int64_t>(sizeof(float));
  const int64_t ldbb = ldb * static_cast<int64_t>(sizeof(float));
  float* c3 = c + 3 * ldc;
  const int64_t flags = (first ? 1 : 0) | (last ? 2 : 0);
  asm volatile(
      // Accumulators: row r of the tile in ymm(4+2r) (cols 0-7) and ymm(5+2r) (cols 8-15).
      CNSR_MK_START_ACCUMULATORS
      "test %[k4], %[k4]\n\t"
      "jz 2f\n\t"
      ".p2align 5\n\t"
      "1:\n\t"
      "prefetcht0 384(%[ap])\n\t"
      CNSR_MK_SSTEP(0) CNSR_MK_SSTEP(1) CNSR_MK_SSTEP(2) CNSR_MK_SSTEP(3)
      "add $96, %[ap]\n\t"
      "dec %[k4]\n\t"
      "jnz 1b\n\t"
      "2:\n\t"
      "test %[k1], %[k1]\n\t"
      "jz 4f\n\t"
      "3:\n\t"
      CNSR_MK_SSTEP(0)
      "add $24, %[ap]\n\t"
      "dec %[k1]\n\t"
      "jnz 3b\n\t"
      "4:\n\t"
      CNSR_MK_CANONICALIZE_AND_STORE
      : [ap] "+r"(ap), [bp] "+r"(bp), [k4] "+r"(k4), [k1] "+r"(k1)
      : [c] "r"(c), [c3] "r"(c3), [ldcb] "r"(ldcb), [flags] "r"(flags), [nan] "m"(kCanonNaNBits), [ldbb] "r"(ldbb)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "cc", "memory");
}
#undef CNSR_MK_SSTEP
#undef CNSR_MK_CANONICALIZE_AND_STORE
#undef CNSR_MK_STEP
#undef CNSR_MK_FMAS
#undef CNSR_MK_START_ACCUMULATORS

// Edge tile: runs the micro-kernel on a local 6x16 tile holding the valid mr x nr part.
// ldb = 0: bp is a packed panel; else B is read in place with row stride ldb (nr = 16).
void MicroF32Edge(int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                  int64_t nr, bool first, bool last) {
  alignas(32) float tile[kMR * kNR] = {};
  if (!first) {
    for (int64_t i = 0; i < mr; ++i) std::memcpy(tile + i * kNR, c + i * ldc, sizeof(float) * nr);
  }
  if (ldb == 0) {
    MicroF32(kc, ap, bp, tile, kNR, first, last);
  } else {
    MicroF32StridedB(kc, ap, bp, ldb, tile, kNR, first, last);
  }
  for (int64_t i = 0; i < mr; ++i) std::memcpy(c + i * ldc, tile + i * kNR, sizeof(float) * nr);
}

// A full-width (16-column) tile of only MR < 6 rows (a GEMV-like block: an LSTM step, a batch of
// one), without padding it to the 6-row kernel's tile: the same chain per element, k in order,
// one explicit fma per step. bstride: floats between B rows (16 for a packed panel, else ldb).
template <int MR>
void MicroF32FewRows(int64_t kc, const float* __restrict ap, const float* __restrict bp, int64_t bstride, float* c,
                     int64_t ldc, bool first, bool last) {
  __m256 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + r * ldc);
    acc[r][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + r * ldc + 8);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp + k * bstride);
    const __m256 b1 = _mm256_loadu_ps(bp + k * bstride + 8);
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + k * kMR + r);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  if (last) {
    float nan_value;
    std::memcpy(&nan_value, &kCanonNaNBits, sizeof(nan_value));
    const __m256 nan = _mm256_set1_ps(nan_value);
    for (int r = 0; r < MR; ++r) {
      for (int h = 0; h < 2; ++h)
        acc[r][h] = _mm256_blendv_ps(acc[r][h], nan, _mm256_cmp_ps(acc[r][h], acc[r][h], _CMP_UNORD_Q));
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

void MicroF32FewRowsAny(int64_t mr, int64_t kc, const float* ap, const float* bp, int64_t bstride, float* c,
                        int64_t ldc, bool first, bool last) {
  switch (mr) {
    case 1: return MicroF32FewRows<1>(kc, ap, bp, bstride, c, ldc, first, last);
    case 2: return MicroF32FewRows<2>(kc, ap, bp, bstride, c, ldc, first, last);
    case 3: return MicroF32FewRows<3>(kc, ap, bp, bstride, c, ldc, first, last);
    case 4: return MicroF32FewRows<4>(kc, ap, bp, bstride, c, ldc, first, last);
    default: return MicroF32FewRows<5>(kc, ap, bp, bstride, c, ldc, first, last);
  }
}

// ---------------------------------------------------------------------------------------
// int8: products of sign-extended int16 pairs summed by vpmaddwd (|sum| <= 2^15, exact),
// accumulated with wrapping 32-bit adds. Integer addition is associative, so any order
// gives the spec's bits; k-blocks still carry the sum through C.

// A panel: per k-pair, 6 int32 words each holding (a[r,2p], a[r,2p+1]) as int16.
void PackAI8(const int8_t* a, int64_t lda, int64_t mc, int64_t kc, int32_t* ap) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t i = 0; i < mc; i += kMR) {
    const int64_t mr = std::min<int64_t>(kMR, mc - i);
    for (int64_t p = 0; p < kp; ++p) {
      const int64_t k = 2 * p;
      for (int64_t r = 0; r < kMR; ++r) {
        int32_t lo = 0, hi = 0;
        if (r < mr) {
          lo = a[(i + r) * lda + k];
          if (k + 1 < kc) hi = a[(i + r) * lda + k + 1];
        }
        ap[r] = static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(lo))) |
                                     (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
      }
      ap += kMR;
    }
  }
}

// B panel: per k-pair, 32 int16: (b[2p,n], b[2p+1,n]) for n = 0..15 of the panel.
void PackBI8(const int8_t* b, int64_t ldb, int64_t kc, int64_t nc, int16_t* bp) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t j = 0; j < nc; j += kNR) {
    const int64_t nr = std::min<int64_t>(kNR, nc - j);
    for (int64_t p = 0; p < kp; ++p) {
      const int64_t k = 2 * p;
      const int8_t* r0 = b + k * ldb + j;
      const int8_t* r1 = r0 + ldb;
      const bool has1 = k + 1 < kc;
      if (nr == kNR) {
        const __m256i x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0)));
        const __m256i x1 =
            has1 ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1))) : _mm256_setzero_si256();
        const __m256i lo = _mm256_unpacklo_epi16(x0, x1);  // cols 0-3 | 8-11
        const __m256i hi = _mm256_unpackhi_epi16(x0, x1);  // cols 4-7 | 12-15
        _mm256_store_si256(reinterpret_cast<__m256i*>(bp), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_store_si256(reinterpret_cast<__m256i*>(bp + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
      } else {
        for (int64_t c = 0; c < kNR; ++c) {
          bp[2 * c] = c < nr ? r0[c] : 0;
          bp[2 * c + 1] = (c < nr && has1) ? r1[c] : 0;
        }
      }
      bp += 2 * kNR;
    }
  }
}

// One k-pair for row R (A word at byte offset AOFF): acc += madd(a, b) for both halves.
// clang-format off
#define CNSR_I8_ROW(K, R, ACC0, ACC1)                                   \
  "vpbroadcastd " #K "*24+" #R "*4(%[ap]), %%ymm2\n\t"                  \
  "vpmaddwd %%ymm0, %%ymm2, %%ymm3\n\t"                                 \
  "vpaddd %%ymm3, %%ymm" #ACC0 ", %%ymm" #ACC0 "\n\t"                   \
  "vpmaddwd %%ymm1, %%ymm2, %%ymm2\n\t"                                 \
  "vpaddd %%ymm2, %%ymm" #ACC1 ", %%ymm" #ACC1 "\n\t"
#define CNSR_I8_STEP(K)                                                 \
  "vmovdqa " #K "*64(%[bp]), %%ymm0\n\t"                                \
  "vmovdqa " #K "*64+32(%[bp]), %%ymm1\n\t"                             \
  CNSR_I8_ROW(K, 0, 4, 5) CNSR_I8_ROW(K, 1, 6, 7) CNSR_I8_ROW(K, 2, 8, 9) \
  CNSR_I8_ROW(K, 3, 10, 11) CNSR_I8_ROW(K, 4, 12, 13) CNSR_I8_ROW(K, 5, 14, 15)
// clang-format on

// C[0:6, 0:16] (+)= sum over kp k-pairs; inline assembly to keep the 12 accumulators in
// registers, as for the f32 kernel.
void MicroI8(int64_t kp, const int32_t* __restrict ap, const int16_t* __restrict bp, int32_t* c, int64_t ldc,
             bool first) {
  int64_t k2 = kp / 2, k1 = kp % 2;
  const int64_t ldcb = ldc * static_cast<int64_t>(sizeof(int32_t));
  int32_t* c3 = c + 3 * ldc;
  const int64_t flags = first ? 1 : 0;
  asm volatile(
      "test $1, %[flags]\n\t"
      "jz 5f\n\t"
      "vpxor %%ymm4, %%ymm4, %%ymm4\n\t"
      "vpxor %%ymm5, %%ymm5, %%ymm5\n\t"
      "vpxor %%ymm6, %%ymm6, %%ymm6\n\t"
      "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"
      "vpxor %%ymm8, %%ymm8, %%ymm8\n\t"
      "vpxor %%ymm9, %%ymm9, %%ymm9\n\t"
      "vpxor %%ymm10, %%ymm10, %%ymm10\n\t"
      "vpxor %%ymm11, %%ymm11, %%ymm11\n\t"
      "vpxor %%ymm12, %%ymm12, %%ymm12\n\t"
      "vpxor %%ymm13, %%ymm13, %%ymm13\n\t"
      "vpxor %%ymm14, %%ymm14, %%ymm14\n\t"
      "vpxor %%ymm15, %%ymm15, %%ymm15\n\t"
      "jmp 6f\n\t"
      "5:\n\t"
      "vmovdqu (%[c]), %%ymm4\n\t"
      "vmovdqu 32(%[c]), %%ymm5\n\t"
      "vmovdqu (%[c],%[ldcb],1), %%ymm6\n\t"
      "vmovdqu 32(%[c],%[ldcb],1), %%ymm7\n\t"
      "vmovdqu (%[c],%[ldcb],2), %%ymm8\n\t"
      "vmovdqu 32(%[c],%[ldcb],2), %%ymm9\n\t"
      "vmovdqu (%[c3]), %%ymm10\n\t"
      "vmovdqu 32(%[c3]), %%ymm11\n\t"
      "vmovdqu (%[c3],%[ldcb],1), %%ymm12\n\t"
      "vmovdqu 32(%[c3],%[ldcb],1), %%ymm13\n\t"
      "vmovdqu (%[c3],%[ldcb],2), %%ymm14\n\t"
      "vmovdqu 32(%[c3],%[ldcb],2), %%ymm15\n\t"
      "6:\n\t"
      "test %[k2], %[k2]\n\t"
      "jz 2f\n\t"
      ".p2align 5\n\t"
      "1:\n\t"
      "prefetcht0 384(%[ap])\n\t"
      CNSR_I8_STEP(0) CNSR_I8_STEP(1)
      "add $48, %[ap]\n\t"
      "add $128, %[bp]\n\t"
      "dec %[k2]\n\t"
      "jnz 1b\n\t"
      "2:\n\t"
      "test %[k1], %[k1]\n\t"
      "jz 4f\n\t"
      CNSR_I8_STEP(0)
      "4:\n\t"
      "vmovdqu %%ymm4, (%[c])\n\t"
      "vmovdqu %%ymm5, 32(%[c])\n\t"
      "vmovdqu %%ymm6, (%[c],%[ldcb],1)\n\t"
      "vmovdqu %%ymm7, 32(%[c],%[ldcb],1)\n\t"
      "vmovdqu %%ymm8, (%[c],%[ldcb],2)\n\t"
      "vmovdqu %%ymm9, 32(%[c],%[ldcb],2)\n\t"
      "vmovdqu %%ymm10, (%[c3])\n\t"
      "vmovdqu %%ymm11, 32(%[c3])\n\t"
      "vmovdqu %%ymm12, (%[c3],%[ldcb],1)\n\t"
      "vmovdqu %%ymm13, 32(%[c3],%[ldcb],1)\n\t"
      "vmovdqu %%ymm14, (%[c3],%[ldcb],2)\n\t"
      "vmovdqu %%ymm15, 32(%[c3],%[ldcb],2)\n\t"
      "vzeroupper\n\t"
      : [ap] "+r"(ap), [bp] "+r"(bp), [k2] "+r"(k2), [k1] "+r"(k1)
      : [c] "r"(c), [c3] "r"(c3), [ldcb] "r"(ldcb), [flags] "r"(flags)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "cc", "memory");
}
#undef CNSR_I8_STEP
#undef CNSR_I8_ROW

void MicroI8Edge(int64_t kp, const int32_t* ap, const int16_t* bp, int32_t* c, int64_t ldc, int64_t mr, int64_t nr,
                 bool first) {
  alignas(32) int32_t tile[kMR * kNR] = {};
  if (!first) {
    for (int64_t i = 0; i < mr; ++i) std::memcpy(tile + i * kNR, c + i * ldc, sizeof(int32_t) * nr);
  }
  MicroI8(kp, ap, bp, tile, kNR, first);
  for (int64_t i = 0; i < mr; ++i) std::memcpy(c + i * ldc, tile + i * kNR, sizeof(int32_t) * nr);
}

template <typename Out>
void FillZero(Out* c, int64_t ldc, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t m = m0; m < m1; ++m) std::fill(c + m * ldc + n0, c + m * ldc + n1, Out(0));
}

}  // namespace

bool F32BlockAvx2(const F32Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace* ws,
                  const PartDone* done) {
  if (m0 >= m1 || n0 >= n1) return true;
  if (d.K == 0) {
    FillZero(op.c, op.ldc, m0, m1, n0, n1);
    if (done) (*done)(m0, m1, n0, n1);
    return true;
  }
  // Pre-packed B panels cover all of K, so the panel of columns [16j, 16j + 16) holds k-block pc
  // at offset pc * 16; they serve blocks whose first column is a multiple of 16 (jc then stays
  // one, kNC being a multiple of 16).
  const float* b_panels = n0 % kNR == 0 ? op.b_panels : nullptr;
  const bool b_in_place = !b_panels && m1 - m0 <= kBInPlaceMaxRows;
  // Pre-packed A panels cover all of K, so panel i of rows [6i, 6i + 6) holds k-block pc at
  // offset pc * 6; they serve blocks whose first row is a multiple of 6.
  const float* a_panels = m0 % kMR == 0 ? op.a_panels : nullptr;
  const bool avx512 = UseAvx512Gemm();
  const int64_t ncmax = b_in_place ? kNR : std::min(kNC, n1 - n0);
  // The chains' k range this call runs (all of K unless the operands say otherwise); B holds
  // rows [k_begin, k_end) only.
  const int64_t k_begin = op.k_begin, k_end = op.k_end < 0 ? d.K : op.k_end;
  const int64_t kcmax = std::min(kKC, k_end - k_begin);
  auto* bp = b_panels ? nullptr : static_cast<float*>(ws->Get(0, sizeof(float) * RoundUp(ncmax, kNR) * kcmax));
  auto* ap = a_panels ? nullptr
                      : static_cast<float*>(ws->Get(1, sizeof(float) * RoundUp(std::min(kMC, m1 - m0), kMR) * kcmax));
  if ((!bp && !b_panels) || (!ap && !a_panels)) return false;
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = k_begin; pc < k_end; pc += kKC) {
      const int64_t kc = std::min(kKC, k_end - pc);
      const bool first = pc == 0, last = pc + kc == d.K;
      const float* b_rows = op.b + (pc - k_begin) * op.ldb;  // B's row pc
      if (!b_in_place && !b_panels) PackBF32(b_rows + jc, op.ldb, kc, nc, bp);
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        // The A panel of tile row ir: packed now (kc x 6 each), or pre-packed (K x 6 each).
        const float* a_block = a_panels ? a_panels + ic * d.K + pc * kMR : ap;
        const int64_t a_step = a_panels ? d.K : kc;  // floats between panels, per row
        if (!a_panels) PackAF32(op.a + ic * op.lda + pc, op.lda, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int64_t nr = std::min<int64_t>(kNR, nc - jr);
          // In place: a full panel is read from B with stride ldb; a partial one is packed alone.
          const float* bpanel = b_panels ? b_panels + (jc + jr) * d.K + pc * kNR : bp + jr * kc;
          int64_t ldb = 0;
          if (b_in_place && nr == kNR) {
            bpanel = b_rows + jc + jr;
            ldb = op.ldb;
          } else if (b_in_place) {
            PackBF32(b_rows + jc + jr, op.ldb, kc, nr, bp);
            bpanel = bp;
          }
          // Rows [ir0, mc) of the panel at column jr0 (bpan, row stride ldb_pan or packed if 0).
          auto panel_rows = [&](const float* bpan, int64_t ldb_pan, int64_t jr0, int64_t nr0, int64_t ir0) {
            // Full 12 x 16 tiles go to the 512-bit kernel where there is one.
            const bool twelve_rows = avx512 && nr0 == kNR;
            for (int64_t ir = ir0; ir < mc; ir += kMR) {
              const int64_t mr = std::min<int64_t>(kMR, mc - ir);
              float* c = op.c + (ic + ir) * op.ldc + jc + jr0;
              if (twelve_rows && mc - ir >= 2 * kMR) {
                MicroF32TwelveRowsAvx512(kc, a_block + ir * a_step, a_block + (ir + kMR) * a_step, bpan,
                                         ldb_pan == 0 ? kNR : ldb_pan, c, op.ldc, first, last);
                ir += kMR;  // and kMR more by the loop
                continue;
              }
              if (twelve_rows) {  // the last rows, fewer than 12
                MicroF32FewRowsAvx512(mc - ir, kc, a_block + ir * a_step,
                                      mc - ir > kMR ? a_block + (ir + kMR) * a_step : nullptr, bpan, nullptr,
                                      ldb_pan == 0 ? kNR : ldb_pan, c, op.ldc, first, last);
                break;
              }
              if (ir + kMR < mc) {  // the next tile's C rows, loaded (or written) next
                const float* cn = c + kMR * op.ldc;
                for (int r = 0; r < kMR; ++r) _mm_prefetch(reinterpret_cast<const char*>(cn + r * op.ldc), _MM_HINT_T0);
              }
              if (mr == kMR && nr0 == kNR && ldb_pan == 0) {
                MicroF32(kc, a_block + ir * a_step, bpan, c, op.ldc, first, last);
              } else if (mr == kMR && nr0 == kNR) {
                MicroF32StridedB(kc, a_block + ir * a_step, bpan, ldb_pan, c, op.ldc, first, last);
              } else if (nr0 == kNR) {
                MicroF32FewRowsAny(mr, kc, a_block + ir * a_step, bpan, ldb_pan == 0 ? kNR : ldb_pan, c, op.ldc, first,
                                   last);
              } else {
                MicroF32Edge(kc, a_block + ir * a_step, bpan, ldb_pan, c, op.ldc, mr, nr0, first, last);
              }
            }
          };
          // Two full panels side by side: 12 x 32 tiles, one broadcast of A for two fmas, then
          // each panel's remaining rows as above.
          if (avx512 && nr == kNR && nc - jr >= 2 * kNR) {
            const float* bpanel2 = ldb != 0 ? bpanel + kNR : bpanel + kNR * (b_panels ? d.K : kc);
            int64_t ir = 0;
            for (; mc - ir >= 2 * kMR; ir += 2 * kMR) {
              MicroF32TwelveRowsTwoPanelsAvx512(kc, a_block + ir * a_step, a_block + (ir + kMR) * a_step, bpanel,
                                                bpanel2, ldb == 0 ? kNR : ldb, op.c + (ic + ir) * op.ldc + jc + jr,
                                                op.ldc, first, last);
            }
            if (ir < mc) {  // the last rows, fewer than 12, over both panels
              MicroF32FewRowsAvx512(mc - ir, kc, a_block + ir * a_step,
                                    mc - ir > kMR ? a_block + (ir + kMR) * a_step : nullptr, bpanel, bpanel2,
                                    ldb == 0 ? kNR : ldb, op.c + (ic + ir) * op.ldc + jc + jr, op.ldc, first, last);
            }
            jr += kNR;  // and kNR more by the loop
            continue;
          }
          panel_rows(bpanel, ldb, jr, nr, 0);
        }
        if (last && done) (*done)(ic, ic + mc, jc, jc + nc);  // rows [ic, ic + mc) are final
      }
    }
  }
  return true;
}

void PackAPanelsF32(const float* a, int64_t lda, int64_t M, int64_t K, float* out) { PackAF32(a, lda, M, K, out); }

void PackBPanelsF32(const float* b, int64_t ldb, int64_t K, int64_t N, float* out) { PackBF32(b, ldb, K, N, out); }

bool I8BlockAvx2(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace* ws) {
  if (m0 >= m1 || n0 >= n1) return true;
  if (d.K == 0) {
    FillZero(op.c, op.ldc, m0, m1, n0, n1);
    return true;
  }
  constexpr int64_t kKC8 = 2 * kKC;  // k values per block (kKC pairs)
  const int64_t ncmax = std::min(kNC, n1 - n0);
  const int64_t kpmax = (std::min(kKC8, d.K) + 1) / 2;
  auto* bp = static_cast<int16_t*>(ws->Get(2, sizeof(int16_t) * 2 * RoundUp(ncmax, kNR) * kpmax));
  auto* ap = static_cast<int32_t*>(ws->Get(3, sizeof(int32_t) * RoundUp(std::min(kMC, m1 - m0), kMR) * kpmax));
  if (!bp || !ap) return false;
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = 0; pc < d.K; pc += kKC8) {
      const int64_t kc = std::min(kKC8, d.K - pc);
      const int64_t kp = (kc + 1) / 2;
      const bool first = pc == 0;
      PackBI8(op.b + pc * op.ldb + jc, op.ldb, kc, nc, bp);
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        PackAI8(op.a + ic * op.lda + pc, op.lda, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int64_t nr = std::min<int64_t>(kNR, nc - jr);
          const int16_t* bpanel = bp + jr * 2 * kp;
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t mr = std::min<int64_t>(kMR, mc - ir);
            int32_t* c = op.c + (ic + ir) * op.ldc + jc + jr;
            if (mr == kMR && nr == kNR) {
              MicroI8(kp, ap + ir * kp, bpanel, c, op.ldc, first);
            } else {
              MicroI8Edge(kp, ap + ir * kp, bpanel, c, op.ldc, mr, nr, first);
            }
          }
        }
      }
    }
  }
  return true;
}

}  // namespace consensor::kernels::cpu::gemm
