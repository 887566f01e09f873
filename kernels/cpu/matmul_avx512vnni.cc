// int8 GEMM with AVX-512 VNNI (compiled with -mavx512f -mavx512bw -mavx512vnni; called only after
// CpuHasAvx512Vnni()).
//
// vpdpbusd multiplies four unsigned bytes by four signed bytes and adds the four products to a
// 32-bit lane with wraparound. matmul_i8's operands are both signed, so B is packed as
// u = b + 128 (b XOR 0x80) and each row's sum is corrected by -128 * sum_k a[m,k]:
//   sum_k a*b = sum_k a*(b + 128) - 128 * sum_k a      (mod 2^32).
// Every term and every correction is an integer taken modulo 2^32, so the result is the exact
// wrapping sum of docs/DETERMINISM.md 4.4 whatever the order; k-blocks carry the sum through C
// as the AVX2 kernel does. A is read in place (the signed operand, broadcast four bytes at a
// time); B is packed per k-block into 16-column panels of byte quads, one zmm per 4 k, or, when
// it is a program's constant, once over all of K when the program is loaded.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "kernels/cpu/gemm.h"

namespace consensor::kernels::cpu::gemm {

namespace {

std::atomic<bool> g_vnni_enabled{true};

constexpr int kMR = 12;             // rows of the register tile
constexpr int kPanelCols = 16;      // columns of a B panel: one zmm of int32 lanes
constexpr int64_t kKC = 1024;       // at most this many k per block: two B panels of 1024 x 16 bytes stay in L1
constexpr int64_t kMC = 144;        // rows per A block (at most 144 x 1024 bytes, in L2)
constexpr int64_t kNC = 4096;       // columns per B block
constexpr int64_t kQuadBytes = 64;  // one k-quad of a panel: 16 columns x 4 bytes

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

inline int32_t LoadQuad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Packs B[0:kc, 0:nc] (row stride ldb) into ceil(nc/16) panels of ceil(kc/4) quads: quad q of a
// panel holds, for each of its 16 columns n, the bytes b[4q..4q+3, n] + 128. k beyond kc and
// columns beyond nc hold the packed form of 0 (A supplies 0 for those k, and those columns are
// never stored).
void PackBQuads(const int8_t* b, int64_t ldb, int64_t kc, int64_t nc, uint8_t* bp) {
  const int64_t kq = (kc + 3) / 4;
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t j = 0; j < nc; j += kPanelCols) {
    const int64_t nr = std::min<int64_t>(kPanelCols, nc - j);
    for (int64_t q = 0; q < kq; ++q) {
      const int64_t k = 4 * q;
      if (nr == kPanelCols) {
        __m128i r[4];
        for (int i = 0; i < 4; ++i) {
          r[i] = k + i < kc ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + (k + i) * ldb + j))
                            : _mm_setzero_si128();
        }
        const __m128i p01lo = _mm_unpacklo_epi8(r[0], r[1]);  // (k, k+1) pairs of columns 0-7
        const __m128i p01hi = _mm_unpackhi_epi8(r[0], r[1]);  // columns 8-15
        const __m128i p23lo = _mm_unpacklo_epi8(r[2], r[3]);
        const __m128i p23hi = _mm_unpackhi_epi8(r[2], r[3]);
        __m128i* out = reinterpret_cast<__m128i*>(bp);
        _mm_store_si128(out + 0, _mm_xor_si128(_mm_unpacklo_epi16(p01lo, p23lo), flip));  // columns 0-3
        _mm_store_si128(out + 1, _mm_xor_si128(_mm_unpackhi_epi16(p01lo, p23lo), flip));  // 4-7
        _mm_store_si128(out + 2, _mm_xor_si128(_mm_unpacklo_epi16(p01hi, p23hi), flip));  // 8-11
        _mm_store_si128(out + 3, _mm_xor_si128(_mm_unpackhi_epi16(p01hi, p23hi), flip));  // 12-15
      } else {
        for (int64_t c = 0; c < kPanelCols; ++c) {
          for (int64_t i = 0; i < 4; ++i) {
            const int8_t v = (c < nr && k + i < kc) ? b[(k + i) * ldb + j + c] : int8_t{0};
            bp[4 * c + i] = static_cast<uint8_t>(v) ^ 0x80u;
          }
        }
      }
      bp += kQuadBytes;
    }
  }
}

// -128 * sum_k a[m, k] modulo 2^32 for each row m of A[0:rows, 0:K]: the correction that takes
// the products with b + 128 back to the products with b. sad_epu8 sums the bytes a + 128 (a XOR
// 0x80) in 64-bit lanes; bytes past K load as 0 and count as a + 128 = 128 like the others.
void RowCorrections(const int8_t* a, int64_t lda, int64_t rows, int64_t K, uint32_t* out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t m = 0; m < rows; ++m) {
    const int8_t* row = a + m * lda;
    __m512i sums = _mm512_setzero_si512();
    int64_t loaded = 0;
    for (int64_t k = 0; k < K; k += 64) {
      const int64_t len = std::min<int64_t>(64, K - k);
      const __mmask64 mask = len == 64 ? ~__mmask64{0} : ((__mmask64{1} << len) - 1);
      const __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, row + k), flip);
      sums = _mm512_add_epi64(sums, _mm512_sad_epu8(x, _mm512_setzero_si512()));
      loaded += 64;
    }
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, sums);
    uint64_t biased = 0;
    for (uint64_t lane : lanes) biased += lane;
    const uint64_t sum = biased - 128u * static_cast<uint64_t>(loaded);  // sum_k a, modulo 2^64
    out[m] = static_cast<uint32_t>(0u - 128u * static_cast<uint32_t>(sum));
  }
}

// C[0:MR, 0:16 NV] (row stride ldc) (+)= the products over kq quads of A read in place (row r at
// a + r * lda, four bytes per quad) and NV consecutive B panels (panel v at bp + v * panel_bytes),
// then, if a_tail is set, one more quad from a_tail (row r's four bytes at a_tail + 4 r) against
// the panels' quad kq. first: the accumulators start at the rows' corrections, else they are
// loaded from C. Lanes outside col_mask[v] are neither loaded nor stored. Written with intrinsics
// for the edge tiles (MR < 12); the full 12-row tiles run the assembly kernels below.
template <int MR, int NV>
void MicroI8Vnni(int64_t kq, const int8_t* __restrict a, int64_t lda, const int8_t* __restrict a_tail,
                 const uint8_t* __restrict bp, int64_t panel_bytes, int32_t* c, int64_t ldc, const uint32_t* correction,
                 const __mmask16* col_mask, bool first) {
  __m512i acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      acc[r][v] = first ? _mm512_set1_epi32(static_cast<int32_t>(correction[r]))
                        : _mm512_maskz_loadu_epi32(col_mask[v], c + r * ldc + v * kPanelCols);
    }
  }
  for (int64_t q = 0; q < kq; ++q) {
    __m512i b[NV];
    for (int v = 0; v < NV; ++v) b[v] = _mm512_load_si512(bp + v * panel_bytes + q * kQuadBytes);
    for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(LoadQuad(a + r * lda + 4 * q));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], b[v], av);
    }
  }
  if (a_tail) {
    __m512i b[NV];
    for (int v = 0; v < NV; ++v) b[v] = _mm512_load_si512(bp + v * panel_bytes + kq * kQuadBytes);
    for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(LoadQuad(a_tail + 4 * r));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], b[v], av);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_epi32(c + r * ldc + v * kPanelCols, col_mask[v], acc[r][v]);
  }
}

// The full 12-row tiles in inline assembly, only to pin the accumulators to registers (GCC
// copies and spills them when the same loop is written with intrinsics); each step is the
// vpdpbusd that _mm512_dpbusd_epi32 emits. Accumulators: with two panels, row r in zmm(8+2r)
// (panel 0) and zmm(9+2r) (panel 1); with one panel, row r in zmm(8+r). B's quad in zmm0 (and
// zmm1). Rows of A: a0 = row 0, a3 = row 3, a6 = row 6, a9 = row 9, each plus 0, 1 or 2 lda.
// The operands are as for MicroI8Vnni.
// clang-format off
#define CNSR_VNNI_A0 "(%[a0])"
#define CNSR_VNNI_A1 "(%[a0],%[lda],1)"
#define CNSR_VNNI_A2 "(%[a0],%[lda],2)"
#define CNSR_VNNI_A3 "(%[a3])"
#define CNSR_VNNI_A4 "(%[a3],%[lda],1)"
#define CNSR_VNNI_A5 "(%[a3],%[lda],2)"
#define CNSR_VNNI_A6 "(%[a6])"
#define CNSR_VNNI_A7 "(%[a6],%[lda],1)"
#define CNSR_VNNI_A8 "(%[a6],%[lda],2)"
#define CNSR_VNNI_A9 "(%[a9])"
#define CNSR_VNNI_A10 "(%[a9],%[lda],1)"
#define CNSR_VNNI_A11 "(%[a9],%[lda],2)"

// Two panels: broadcast row r's quad once, one vpdpbusd per panel.
#define CNSR_VNNI_ROW2(ADDR, ACC0, ACC1)             \
  "vpbroadcastd " ADDR ", %%zmm2\n\t"                \
  "vpdpbusd %%zmm2, %%zmm0, %%zmm" #ACC0 "\n\t"      \
  "vpdpbusd %%zmm2, %%zmm1, %%zmm" #ACC1 "\n\t"
// One panel: the quad broadcast straight from memory.
#define CNSR_VNNI_ROW1(ADDR, ACC)                    \
  "vpdpbusd " ADDR "%{1to16%}, %%zmm0, %%zmm" #ACC "\n\t"

// One quad (B at byte D * 64 from bp, A at byte 4 D of each row).
#define CNSR_VNNI_STEP2(D)                                                              \
  "vmovdqa64 " #D "*64(%[bp]), %%zmm0\n\t"                                              \
  "vmovdqa64 " #D "*64(%[bp],%[pb],1), %%zmm1\n\t"                                      \
  CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A0, 8, 9) CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A1, 10, 11) \
  CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A2, 12, 13) CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A3, 14, 15) \
  CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A4, 16, 17) CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A5, 18, 19) \
  CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A6, 20, 21) CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A7, 22, 23) \
  CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A8, 24, 25) CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A9, 26, 27) \
  CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A10, 28, 29) CNSR_VNNI_ROW2(#D "*4" CNSR_VNNI_A11, 30, 31)
#define CNSR_VNNI_STEP1(D)                                                              \
  "vmovdqa64 " #D "*64(%[bp]), %%zmm0\n\t"                                              \
  CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A0, 8) CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A1, 9)         \
  CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A2, 10) CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A3, 11)       \
  CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A4, 12) CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A5, 13)       \
  CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A6, 14) CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A7, 15)       \
  CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A8, 16) CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A9, 17)       \
  CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A10, 18) CNSR_VNNI_ROW1(#D "*4" CNSR_VNNI_A11, 19)
// The tail quad: B at bp (already past the full quads), row r of A at 4 r from the tail
// buffer, whose address is in the (by then free) counter register.
#define CNSR_VNNI_TAIL2                                                                 \
  "vmovdqa64 (%[bp]), %%zmm0\n\t"                                                       \
  "vmovdqa64 (%[bp],%[pb],1), %%zmm1\n\t"                                               \
  CNSR_VNNI_ROW2("0(%[n])", 8, 9) CNSR_VNNI_ROW2("4(%[n])", 10, 11)                       \
  CNSR_VNNI_ROW2("8(%[n])", 12, 13) CNSR_VNNI_ROW2("12(%[n])", 14, 15)                    \
  CNSR_VNNI_ROW2("16(%[n])", 16, 17) CNSR_VNNI_ROW2("20(%[n])", 18, 19)                   \
  CNSR_VNNI_ROW2("24(%[n])", 20, 21) CNSR_VNNI_ROW2("28(%[n])", 22, 23)                   \
  CNSR_VNNI_ROW2("32(%[n])", 24, 25) CNSR_VNNI_ROW2("36(%[n])", 26, 27)                   \
  CNSR_VNNI_ROW2("40(%[n])", 28, 29) CNSR_VNNI_ROW2("44(%[n])", 30, 31)
#define CNSR_VNNI_TAIL1                                                                 \
  "vmovdqa64 (%[bp]), %%zmm0\n\t"                                                       \
  CNSR_VNNI_ROW1("0(%[n])", 8) CNSR_VNNI_ROW1("4(%[n])", 9)                               \
  CNSR_VNNI_ROW1("8(%[n])", 10) CNSR_VNNI_ROW1("12(%[n])", 11)                            \
  CNSR_VNNI_ROW1("16(%[n])", 12) CNSR_VNNI_ROW1("20(%[n])", 13)                           \
  CNSR_VNNI_ROW1("24(%[n])", 14) CNSR_VNNI_ROW1("28(%[n])", 15)                           \
  CNSR_VNNI_ROW1("32(%[n])", 16) CNSR_VNNI_ROW1("36(%[n])", 17)                           \
  CNSR_VNNI_ROW1("40(%[n])", 18) CNSR_VNNI_ROW1("44(%[n])", 19)

// Rows of C: three at t, t + ldcb, t + 2 ldcb, then t advanced by 3 rows. OP(ADDR, ACC0, ACC1)
// loads or stores one row (two panels), OP(ADDR, ACC) one row of one panel; masks in k1 (panel
// 0) and k2 (panel 1).
#define CNSR_VNNI_LOAD2(ADDR, ACC0, ACC1)                       \
  "vmovdqu32 " ADDR ", %%zmm" #ACC0 "%{%%k1%}%{z%}\n\t"         \
  "vmovdqu32 64" ADDR ", %%zmm" #ACC1 "%{%%k2%}%{z%}\n\t"
#define CNSR_VNNI_STORE2(ADDR, ACC0, ACC1)                      \
  "vmovdqu32 %%zmm" #ACC0 ", " ADDR "%{%%k1%}\n\t"              \
  "vmovdqu32 %%zmm" #ACC1 ", 64" ADDR "%{%%k2%}\n\t"
#define CNSR_VNNI_LOAD1(ADDR, ACC) "vmovdqu32 " ADDR ", %%zmm" #ACC "%{%%k1%}%{z%}\n\t"
#define CNSR_VNNI_STORE1(ADDR, ACC) "vmovdqu32 %%zmm" #ACC ", " ADDR "%{%%k1%}\n\t"
#define CNSR_VNNI_NEXT3 "lea (%[t],%[ldcb],2), %[t]\n\t" "add %[ldcb], %[t]\n\t"
#define CNSR_VNNI_C12_2(OP)                                                               \
  OP("(%[t])", 8, 9) OP("(%[t],%[ldcb],1)", 10, 11) OP("(%[t],%[ldcb],2)", 12, 13) CNSR_VNNI_NEXT3  \
  OP("(%[t])", 14, 15) OP("(%[t],%[ldcb],1)", 16, 17) OP("(%[t],%[ldcb],2)", 18, 19) CNSR_VNNI_NEXT3 \
  OP("(%[t])", 20, 21) OP("(%[t],%[ldcb],1)", 22, 23) OP("(%[t],%[ldcb],2)", 24, 25) CNSR_VNNI_NEXT3 \
  OP("(%[t])", 26, 27) OP("(%[t],%[ldcb],1)", 28, 29) OP("(%[t],%[ldcb],2)", 30, 31)
#define CNSR_VNNI_C12_1(OP)                                                               \
  OP("(%[t])", 8) OP("(%[t],%[ldcb],1)", 9) OP("(%[t],%[ldcb],2)", 10) CNSR_VNNI_NEXT3             \
  OP("(%[t])", 11) OP("(%[t],%[ldcb],1)", 12) OP("(%[t],%[ldcb],2)", 13) CNSR_VNNI_NEXT3           \
  OP("(%[t])", 14) OP("(%[t],%[ldcb],1)", 15) OP("(%[t],%[ldcb],2)", 16) CNSR_VNNI_NEXT3           \
  OP("(%[t])", 17) OP("(%[t],%[ldcb],1)", 18) OP("(%[t],%[ldcb],2)", 19)
// The first k-block's start: row r's correction (at 4 r from t) in its accumulators.
#define CNSR_VNNI_INIT2(OFF, ACC0, ACC1) \
  "vpbroadcastd " #OFF "(%[t]), %%zmm" #ACC0 "\n\t" "vmovdqa64 %%zmm" #ACC0 ", %%zmm" #ACC1 "\n\t"
#define CNSR_VNNI_INIT1(OFF, ACC) "vpbroadcastd " #OFF "(%[t]), %%zmm" #ACC "\n\t"

// The loop shared by both kernels: kq quads, two per iteration, each of the four row pointers
// and bp advanced as it goes; then the tail quad if flags bit 1 is set.
#define CNSR_VNNI_LOOP(STEP, TAIL)                                                         \
  "sub $2, %[n]\n\t"                                                                       \
  "jl 2f\n\t"                                                                              \
  ".p2align 5\n\t"                                                                         \
  "1:\n\t"                                                                                 \
  STEP(0) STEP(1)                                                                          \
  "add $8, %[a0]\n\t" "add $8, %[a3]\n\t" "add $8, %[a6]\n\t" "add $8, %[a9]\n\t"          \
  "add $128, %[bp]\n\t"                                                                    \
  "sub $2, %[n]\n\t"                                                                       \
  "jge 1b\n\t"                                                                             \
  "2:\n\t"                                                                                 \
  "test $1, %[n]\n\t" /* n is -1 when one quad is left, -2 when none */                    \
  "jz 3f\n\t"                                                                              \
  STEP(0)                                                                                  \
  "add $64, %[bp]\n\t"                                                                     \
  "3:\n\t"                                                                                 \
  "testl $2, %[flags]\n\t"                                                                 \
  "jz 4f\n\t"                                                                              \
  "mov %[tail], %[n]\n\t"                                                                  \
  TAIL                                                                                     \
  "4:\n\t"
// clang-format on

// Flags: bit 0 first (start from the corrections), bit 1 a tail quad.
struct VnniTileArgs {
  const int8_t* a_tail;
  const uint32_t* correction;
  uint16_t mask0, mask1;
  uint32_t flags;
};

void MicroI8Vnni12x32(int64_t kq, const int8_t* a, int64_t lda, const uint8_t* bp, int64_t panel_bytes, int32_t* c,
                      int64_t ldc, const VnniTileArgs& args) {
  const int8_t* a3 = a + 3 * lda;
  const int8_t* a6 = a + 6 * lda;
  const int8_t* a9 = a + 9 * lda;
  const int64_t ldcb = ldc * static_cast<int64_t>(sizeof(int32_t));
  int64_t n = kq;
  void* t = nullptr;
  asm volatile(
      // clang-format off
      "kmovw %[m0], %%k1\n\t"
      "kmovw %[m1], %%k2\n\t"
      "testl $1, %[flags]\n\t"
      "jz 5f\n\t"
      "mov %[corr], %[t]\n\t"
      CNSR_VNNI_INIT2(0, 8, 9) CNSR_VNNI_INIT2(4, 10, 11) CNSR_VNNI_INIT2(8, 12, 13)
      CNSR_VNNI_INIT2(12, 14, 15) CNSR_VNNI_INIT2(16, 16, 17) CNSR_VNNI_INIT2(20, 18, 19)
      CNSR_VNNI_INIT2(24, 20, 21) CNSR_VNNI_INIT2(28, 22, 23) CNSR_VNNI_INIT2(32, 24, 25)
      CNSR_VNNI_INIT2(36, 26, 27) CNSR_VNNI_INIT2(40, 28, 29) CNSR_VNNI_INIT2(44, 30, 31)
      "jmp 6f\n\t"
      "5:\n\t"
      "mov %[c], %[t]\n\t"
      CNSR_VNNI_C12_2(CNSR_VNNI_LOAD2)
      "6:\n\t"
      CNSR_VNNI_LOOP(CNSR_VNNI_STEP2, CNSR_VNNI_TAIL2)
      "mov %[c], %[t]\n\t"
      CNSR_VNNI_C12_2(CNSR_VNNI_STORE2)
      "vzeroupper\n\t"
      // clang-format on
      : [a0] "+r"(a), [a3] "+r"(a3), [a6] "+r"(a6), [a9] "+r"(a9), [bp] "+r"(bp), [n] "+r"(n), [t] "+r"(t)
      : [lda] "r"(lda), [pb] "r"(panel_bytes), [c] "r"(c), [ldcb] "r"(ldcb), [m0] "m"(args.mask0),
        [m1] "m"(args.mask1), [flags] "m"(args.flags), [corr] "m"(args.correction), [tail] "m"(args.a_tail)
      : "xmm0", "xmm1", "xmm2", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",
        "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29",
        "xmm30", "xmm31", "k1", "k2", "cc", "memory");
}

void MicroI8Vnni12x16(int64_t kq, const int8_t* a, int64_t lda, const uint8_t* bp, int32_t* c, int64_t ldc,
                      const VnniTileArgs& args) {
  const int8_t* a3 = a + 3 * lda;
  const int8_t* a6 = a + 6 * lda;
  const int8_t* a9 = a + 9 * lda;
  const int64_t ldcb = ldc * static_cast<int64_t>(sizeof(int32_t));
  int64_t n = kq;
  void* t = nullptr;
  asm volatile(
      // clang-format off
      "kmovw %[m0], %%k1\n\t"
      "testl $1, %[flags]\n\t"
      "jz 5f\n\t"
      "mov %[corr], %[t]\n\t"
      CNSR_VNNI_INIT1(0, 8) CNSR_VNNI_INIT1(4, 9) CNSR_VNNI_INIT1(8, 10) CNSR_VNNI_INIT1(12, 11)
      CNSR_VNNI_INIT1(16, 12) CNSR_VNNI_INIT1(20, 13) CNSR_VNNI_INIT1(24, 14) CNSR_VNNI_INIT1(28, 15)
      CNSR_VNNI_INIT1(32, 16) CNSR_VNNI_INIT1(36, 17) CNSR_VNNI_INIT1(40, 18) CNSR_VNNI_INIT1(44, 19)
      "jmp 6f\n\t"
      "5:\n\t"
      "mov %[c], %[t]\n\t"
      CNSR_VNNI_C12_1(CNSR_VNNI_LOAD1)
      "6:\n\t"
      CNSR_VNNI_LOOP(CNSR_VNNI_STEP1, CNSR_VNNI_TAIL1)
      "mov %[c], %[t]\n\t"
      CNSR_VNNI_C12_1(CNSR_VNNI_STORE1)
      "vzeroupper\n\t"
      // clang-format on
      : [a0] "+r"(a), [a3] "+r"(a3), [a6] "+r"(a6), [a9] "+r"(a9), [bp] "+r"(bp), [n] "+r"(n), [t] "+r"(t)
      : [lda] "r"(lda), [c] "r"(c), [ldcb] "r"(ldcb), [m0] "m"(args.mask0), [flags] "m"(args.flags),
        [corr] "m"(args.correction), [tail] "m"(args.a_tail)
      : "xmm0", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",
        "xmm19", "k1", "cc", "memory");
}
#undef CNSR_VNNI_LOOP
#undef CNSR_VNNI_INIT1
#undef CNSR_VNNI_INIT2
#undef CNSR_VNNI_C12_1
#undef CNSR_VNNI_C12_2
#undef CNSR_VNNI_NEXT3
#undef CNSR_VNNI_STORE1
#undef CNSR_VNNI_LOAD1
#undef CNSR_VNNI_STORE2
#undef CNSR_VNNI_LOAD2
#undef CNSR_VNNI_TAIL1
#undef CNSR_VNNI_TAIL2
#undef CNSR_VNNI_STEP1
#undef CNSR_VNNI_STEP2
#undef CNSR_VNNI_ROW1
#undef CNSR_VNNI_ROW2
#undef CNSR_VNNI_A0
#undef CNSR_VNNI_A1
#undef CNSR_VNNI_A2
#undef CNSR_VNNI_A3
#undef CNSR_VNNI_A4
#undef CNSR_VNNI_A5
#undef CNSR_VNNI_A6
#undef CNSR_VNNI_A7
#undef CNSR_VNNI_A8
#undef CNSR_VNNI_A9
#undef CNSR_VNNI_A10
#undef CNSR_VNNI_A11

using MicroFn = void (*)(int64_t, const int8_t*, int64_t, const int8_t*, const uint8_t*, int64_t, int32_t*, int64_t,
                         const uint32_t*, const __mmask16*, bool);

template <int NV, int... MR>
constexpr std::array<MicroFn, kMR + 1> MicroTable(std::integer_sequence<int, MR...>) {
  return {nullptr, &MicroI8Vnni<MR + 1, NV>...};
}

// The micro-kernel for `rows` (1..12) rows and NV panels.
template <int NV>
MicroFn Micro(int64_t rows) {
  static constexpr std::array<MicroFn, kMR + 1> table = MicroTable<NV>(std::make_integer_sequence<int, kMR>());
  return table[rows];
}

}  // namespace

void PackBQuadPanelsI8(const int8_t* b, int64_t ldb, int64_t K, int64_t N, uint8_t* out) {
  PackBQuads(b, ldb, K, N, out);
}

bool CpuHasAvx512Vnni() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

bool UseVnniGemm() { return g_vnni_enabled.load(std::memory_order_relaxed) && CpuHasAvx512Vnni(); }

void SetGemmVnniForTesting(bool enabled) { g_vnni_enabled.store(enabled); }

bool I8BlockAvx512Vnni(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       Workspace* ws) {
  if (m0 >= m1 || n0 >= n1) return true;
  if (d.K == 0) {
    // memset, not std::fill: a template instantiated in this file is compiled for AVX-512, and the
    // linker may keep that copy for callers in files that run on any CPU.
    for (int64_t m = m0; m < m1; ++m) std::memset(op.c + m * op.ldc + n0, 0, sizeof(int32_t) * (n1 - n0));
    return true;
  }
  const int64_t ncmax = std::min(kNC, n1 - n0);
  // K in equal blocks of at most kKC (a multiple of 4 but for the last), so that no block is a
  // short remainder that reloads and stores C for little work.
  const int64_t kblocks = (d.K + kKC - 1) / kKC;
  const int64_t kcmax = RoundUp((d.K + kblocks - 1) / kblocks, 4);
  // B packed once over all of K (a constant B): panel j's k-block pc starts at quad pc / 4 (pc is a
  // multiple of 4); it serves blocks whose first column is a multiple of 16, as I8Batched's are.
  const uint8_t* b_packed = n0 % kPanelCols == 0 ? op.b_quad_panels : nullptr;
  const int64_t packed_panel_bytes = RoundUp(d.K, 4) / 4 * kQuadBytes;
  auto* bp = b_packed ? nullptr : static_cast<uint8_t*>(ws->Get(2, RoundUp(ncmax, kPanelCols) * RoundUp(kcmax, 4)));
  auto* correction = static_cast<uint32_t*>(ws->Get(3, sizeof(uint32_t) * (m1 - m0)));
  if ((!bp && !b_packed) || !correction) return false;
  // One streaming pass over the block's rows (measured faster for narrow B than computing each
  // M block's corrections just before its tiles).
  RowCorrections(op.a + m0 * op.lda, op.lda, m1 - m0, d.K, correction);
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = 0; pc < d.K; pc += kcmax) {
      const int64_t kc = std::min(kcmax, d.K - pc);
      const int64_t kq_full = kc / 4, tail = kc % 4;
      const int64_t panel_bytes = b_packed ? packed_panel_bytes : (kc + 3) / 4 * kQuadBytes;
      const bool first = pc == 0;
      if (!b_packed) PackBQuads(op.b + pc * op.ldb + jc, op.ldb, kc, nc, bp);
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        for (int64_t jr = 0; jr < nc;) {
          // Two panels (32 columns) at a time while there are more than 16 columns left.
          const int nv = nc - jr > kPanelCols ? 2 : 1;
          __mmask16 col_mask[2];
          for (int v = 0; v < nv; ++v) {
            const int64_t cols = std::min<int64_t>(kPanelCols, nc - jr - v * kPanelCols);
            col_mask[v] = static_cast<__mmask16>((1u << cols) - 1);
          }
          const uint8_t* panel = b_packed ? b_packed + ((jc + jr) / kPanelCols) * panel_bytes + pc / 4 * kQuadBytes
                                          : bp + (jr / kPanelCols) * panel_bytes;
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t mr = std::min<int64_t>(kMR, mc - ir);
            const int8_t* a = op.a + (ic + ir) * op.lda + pc;
            // The last k-block's partial quad: the rows' last `tail` bytes, zero padded.
            alignas(64) int8_t a_tail[4 * kMR] = {};
            if (tail) {
              for (int64_t r = 0; r < mr; ++r) std::memcpy(a_tail + 4 * r, a + r * op.lda + 4 * kq_full, tail);
            }
            int32_t* c = op.c + (ic + ir) * op.ldc + jc + jr;
            const uint32_t* row_correction = correction + (ic + ir - m0);
            if (mr == kMR) {
              const VnniTileArgs args{a_tail, row_correction, col_mask[0], nv == 2 ? col_mask[1] : uint16_t{0},
                                      (first ? 1u : 0u) | (tail ? 2u : 0u)};
              if (nv == 2) {
                MicroI8Vnni12x32(kq_full, a, op.lda, panel, panel_bytes, c, op.ldc, args);
              } else {
                MicroI8Vnni12x16(kq_full, a, op.lda, panel, c, op.ldc, args);
              }
              continue;
            }
            const MicroFn micro = nv == 2 ? Micro<2>(mr) : Micro<1>(mr);
            micro(kq_full, a, op.lda, tail ? a_tail : nullptr, panel, panel_bytes, c, op.ldc, row_correction, col_mask,
                  first);
          }
          jr += nv * kPanelCols;
        }
      }
    }
  }
  return true;
}

}  // namespace consensor::kernels::cpu::gemm
