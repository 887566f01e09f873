// Internal GEMM interface of the CPU backend, shared by matmul.cc and conv.cc.
//
// Every f32 routine here computes, for each output element,
//   acc = +0.0f; for k in 0..K-1: acc = fma(a[m,k], b[k,n], acc)
// (docs/DETERMINISM.md 4.4) and then canonicalizes a NaN result to 0x7FC00000. Blocked
// implementations carry acc across k-blocks through C (load the running value), so the
// bits never depend on block sizes, SIMD width or which thread computes which block.
// The int8 routines compute the exact wrapping int32 sum of int32(a)*int32(b).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch_cache.h"

namespace consensor::kernels::cpu::gemm {

// Row-major strided operands: A[m*lda + k], B[k*ldb + n], C[m*ldc + n].
template <typename In, typename Out>
struct Operands {
  const In* a = nullptr;
  int64_t lda = 0;
  const In* b = nullptr;
  int64_t ldb = 0;
  Out* c = nullptr;
  int64_t ldc = 0;
  // f32, AVX2 only: A already packed by PackAPanelsF32 over all of K (each row block then starts
  // at a multiple of 6 rows, as F32Batched's blocks do); `a` is not read. Portable code reads `a`.
  const In* a_panels = nullptr;
  // f32, AVX2 only: B already packed by PackBPanelsF32 over all of K (the panel of columns
  // [16j, 16j + 16) at b_panels + 16 * j * K); it serves blocks whose first column is a multiple
  // of 16, as F32Batched's blocks are. Portable code reads `b`.
  const In* b_panels = nullptr;
  // int8, AVX-512 VNNI kernel only: B already packed by PackBQuadPanelsI8 over all of K (the
  // panel of columns [16j, 16j + 16) at byte 16 * j * RoundUp(K, 4)); the other int8 kernels read
  // `b`.
  const uint8_t* b_quad_panels = nullptr;
  // int8, AMX kernel only: B already packed by PackBAmxPanelsI8 over all of K (the panel of
  // columns [16j, 16j + 16) at byte 16 * j * RoundUp(K, 64)); the other int8 kernels read `b`.
  const uint8_t* b_amx_panels = nullptr;
  // f32, AVX2 only: run only the terms k in [k_begin, k_end) of each output's chain (k_end < 0:
  // up to K), B holding just those rows (row k at b + (k - k_begin) * ldb). The chain starts at
  // +0.0 where k_begin is 0 and continues from C otherwise; NaNs are canonicalized where k_end is
  // K. Calls over consecutive ranges give the whole chain's bits.
  int64_t k_begin = 0, k_end = -1;
};
using F32Operands = Operands<float, float>;
using I8Operands = Operands<int8_t, int32_t>;

struct Dims {
  int64_t M = 0, N = 0, K = 0;
};

// Packing scratch reused across calls of one worker chunk; grows on demand. Its blocks come
// from and go back to the thread's kept scratch (scratch_cache.h), so the next call on this
// thread finds pages already mapped.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    for (auto& s : slots_) scratch::Give(s.ptr, s.size);
  }
  // A 64-byte aligned buffer of at least `bytes` bytes in slot `i` (0..3); returns
  // nullptr if the allocation fails.
  void* Get(int i, size_t bytes) {
    Slot& s = slots_[i];
    if (!s.ptr || s.size < bytes) {
      scratch::Give(s.ptr, s.size);
      s.ptr = scratch::Take(bytes, &s.size);
    }
    return s.ptr;
  }

 private:
  struct Slot {
    void* ptr = nullptr;
    size_t size = 0;
  };
  Slot slots_[4];
};

// Called by a block routine for each part C[m0:m1, n0:n1] of its block as soon as that part is
// final (every k of its chains accumulated, NaNs canonicalized), while it is in cache.
using PartDone = std::function<void(int64_t m0, int64_t m1, int64_t n0, int64_t n1)>;

// Computes the block C[m0:m1, n0:n1] of one GEMM on the calling thread, calling `done` (if
// given) on each finished part. Returns false only if scratch memory could not be allocated.
bool F32BlockPortable(const F32Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                      Workspace* ws, const PartDone* done = nullptr);
bool I8BlockPortable(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                     Workspace* ws);
// matmul_avx2.cc: call only when CpuHasAvx2Fma().
bool F32BlockAvx2(const F32Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace* ws,
                  const PartDone* done = nullptr);
bool I8BlockAvx2(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace* ws);

// Work on a finished part of problem i's output: rows [m0, m1), columns [n0, n1) (a conv's bias
// and epilogue). Runs on the thread that computed the part, right after it, while it is in cache.
using BlockDone = std::function<void(int64_t i, int64_t m0, int64_t m1, int64_t n0, int64_t n1)>;

// Batched GEMM of `batch` problems of identical dims; operands(i) gives problem i.
// Splits the work over (batch, N-blocks, M-blocks) on ctx.pool, never over K; `done`, if given,
// runs on every finished part (at most 144 rows of the AVX2 kernel's M blocking).
Status F32Batched(int64_t batch, const Dims& d, const std::function<F32Operands(int64_t)>& operands,
                  const CpuContext& ctx, const BlockDone& done = nullptr);
Status I8Batched(int64_t batch, const Dims& d, const std::function<I8Operands(int64_t)>& operands,
                 const CpuContext& ctx);

// matmul_avx2.cc (call only when CpuHasAvx2Fma()): A[0:M, 0:K] (row stride lda) as the AVX2
// kernel's 6-row panels over all of K, zero padded to a multiple of 6 rows:
// PackedAPanelsFloats(M, K) floats at `out`.
void PackAPanelsF32(const float* a, int64_t lda, int64_t M, int64_t K, float* out);
inline int64_t PackedAPanelsFloats(int64_t M, int64_t K) { return (M + 5) / 6 * 6 * K; }
// matmul_avx2.cc (call only when CpuHasAvx2Fma()): B[0:K, 0:N] (row stride ldb) as the AVX2
// kernel's 16-column panels over all of K, zero padded to a multiple of 16 columns:
// PackedBPanelsFloats(K, N) floats at `out`.
void PackBPanelsF32(const float* b, int64_t ldb, int64_t K, int64_t N, float* out);
inline int64_t PackedBPanelsFloats(int64_t K, int64_t N) { return (N + 15) / 16 * 16 * K; }

// matmul_avx512.cc: whether the CPU (and OS) run AVX-512F, and whether F32BlockAvx2 uses its
// 512-bit micro-kernel on full 12 x 16 tiles of packed operands (AVX-512F present, not turned
// off for a test). The bits are those of the 256-bit kernel either way.
bool CpuHasAvx512F();
bool UseAvx512Gemm();
// C[0:12, 0:16] (row stride ldc) = chain over kc of two consecutive packed 6-row A panels (ap0:
// rows 0-5, ap1: rows 6-11) and 16 columns of B, row k at bp + k * bstride (16 for a packed panel,
// else B's row stride); first: accumulators start at +0.0, else they are loaded from C; last:
// NaNs canonicalized. Call only when UseAvx512Gemm().
void MicroF32TwelveRowsAvx512(int64_t kc, const float* ap0, const float* ap1, const float* bp, int64_t bstride,
                              float* c, int64_t ldc, bool first, bool last);
// The same for C[0:12, 0:32]: two 16-column panels of B, rows k at bp0 + k * bstride and
// bp1 + k * bstride, each broadcast of A feeding both. Call only when UseAvx512Gemm().
void MicroF32TwelveRowsTwoPanelsAvx512(int64_t kc, const float* ap0, const float* ap1, const float* bp0,
                                       const float* bp1, int64_t bstride, float* c, int64_t ldc, bool first, bool last);

// C[0:rows, 0:16] (bp1 null) or C[0:rows, 0:32] for 1 <= rows < 12: the rows after a block's last
// 12-row tile, rows 0-5 from the packed panel ap0 and the others from ap1 (null when rows <= 6),
// B as above. Call only when UseAvx512Gemm().
void MicroF32FewRowsAvx512(int64_t rows, int64_t kc, const float* ap0, const float* ap1, const float* bp0,
                           const float* bp1, int64_t bstride, float* c, int64_t ldc, bool first, bool last);

// matmul_avx512vnni.cc: whether the CPU (and OS) run AVX-512F, BW and VNNI, and whether the AVX2
// engine's int8 GEMM runs on I8BlockAvx512Vnni instead of I8BlockAvx2 (VNNI present, not turned
// off for a test). Both give the exact wrapping sums, so the same bits.
bool CpuHasAvx512Vnni();
bool UseVnniGemm();
// The block C[m0:m1, n0:n1] as I8BlockAvx2 computes it, with vpdpbusd on 512-bit registers. Call
// only when CpuHasAvx512Vnni().
bool I8BlockAvx512Vnni(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       Workspace* ws);

// matmul_avx512vnni.cc (call only when CpuHasAvx512Vnni()): B[0:K, 0:N] (row stride ldb) as the
// VNNI kernel's 16-column panels of byte quads (b + 128) over all of K, zero padded to a multiple
// of 16 columns and 4 k: PackedBQuadPanelsBytes(K, N) bytes at `out`.
void PackBQuadPanelsI8(const int8_t* b, int64_t ldb, int64_t K, int64_t N, uint8_t* out);
inline int64_t PackedBQuadPanelsBytes(int64_t K, int64_t N) { return (N + 15) / 16 * 16 * ((K + 3) / 4 * 4); }

// matmul_amx.cc: whether the CPU runs AMX int8 tiles (and AVX-512 VNNI) and the OS gave this
// process the tile permission (asked for on the first call), and whether the AVX2 engine's int8
// GEMM runs on I8BlockAmx (AMX present, neither it nor VNNI turned off for a test). Every int8
// kernel gives the exact wrapping sums, so the same bits.
bool CpuHasAmxInt8();
bool UseAmxGemm();
// The block C[m0:m1, n0:n1] as I8BlockAvx2 computes it, with tdpbssd on AMX tiles. Call only when
// CpuHasAmxInt8().
bool I8BlockAmx(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace* ws);
// matmul_amx.cc: B[0:K, 0:N] (row stride ldb) as the AMX kernel's 16-column panels of byte quads
// (b itself) over all of K, zero padded to a multiple of 16 columns and 64 k:
// PackedBAmxPanelsBytes(K, N) bytes at `out`. Baseline x86-64 (SSE2) code.
void PackBAmxPanelsI8(const int8_t* b, int64_t ldb, int64_t K, int64_t N, uint8_t* out);
inline int64_t PackedBAmxPanelsBytes(int64_t K, int64_t N) { return (N + 15) / 16 * 16 * ((K + 63) / 64 * 64); }

// Single-threaded whole GEMM with the ISA of ctx (for callers that parallelize above).
bool F32Single(const F32Operands& op, const Dims& d, Isa isa, Workspace* ws);

}  // namespace consensor::kernels::cpu::gemm

namespace consensor::kernels::cpu {
// conv.cc: caps the im2col scratch of one Conv2D call (bytes; 0 restores the default of
// 64 MiB). For tests that exercise column tiling on small inputs. Never changes a bit.
void SetConvScratchBudgetForTesting(int64_t bytes);
// conv.cc: false sends grouped convolutions through im2col + GEMM instead of the direct
// kernel (for benchmarks and tests comparing the two; the bits are the same).
void SetConvDirectForTesting(bool enabled);
// conv.cc: false keeps the direct kernel's stride-1, OW == W convolutions on its row kernels
// instead of the flattened-plane one (conv_avx512.cc) (benchmarks and tests; same bits).
void SetConvDirectPlaneForTesting(bool enabled);
// Tests: a conv over a zero-stuffed input skips the stuffed zeros always (true) or only where
// that is the faster way (false, the default; conv.cc StuffedSkipsZeros).
void SetConvAlwaysSkipStuffedZerosForTesting(bool always);
// conv.cc: false keeps ConvTranspose's stride == kernel == 2 convolutions (StuffedOneTapTaps) on
// the stuffed-conv blocks instead of ConvStuffedOneTapAvx512 (tests and benchmarks; same bits).
void SetConvStuffedOneTapForTesting(bool enabled);
// conv_avx512.cc: false keeps the direct conv kernel on its AVX2 rows, and the bias adds of the
// GEMM paths on the portable loop, even where AVX-512F is present (for tests and benchmarks
// comparing the two; the bits are the same).
void SetConvAvx512ForTesting(bool enabled);
// conv_avx512.cc: false keeps the 3x3 stride-2 depthwise/grouped rows whose kernel rows lie inside
// the plane on RowsBlock instead of its unrolled form RowsBlockInterior (tests, benchmarks; same bits).
void SetConvInteriorRowsForTesting(bool enabled);
namespace gemm {
// matmul_avx512.cc: false keeps the AVX2 GEMM on its 256-bit micro-kernel even where AVX-512F is
// present (for tests and benchmarks comparing the two; the bits are the same).
void SetGemmAvx512ForTesting(bool enabled);
// matmul_avx512vnni.cc: false keeps the AVX2 engine's int8 GEMM on the AVX2 kernel even where
// AVX-512 VNNI is present (for tests and benchmarks comparing the two; the bits are the same).
void SetGemmVnniForTesting(bool enabled);
// matmul_amx.cc: false keeps the int8 GEMM off the AMX kernel (on the VNNI one where present) even
// where AMX is present; SetGemmVnniForTesting(false) turns off both (the bits are the same).
void SetGemmAmxForTesting(bool enabled);
// matmul_amx.cc: true runs even the small blocks (that otherwise go to the VNNI kernel) on AMX
// tiles, so that tests reach every edge of the AMX kernel with small shapes.
void SetGemmAmxEveryBlockForTesting(bool every_block);
}  // namespace gemm
}  // namespace consensor::kernels::cpu
