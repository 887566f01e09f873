// int8 GEMM on AMX tiles (compiled with -mamx-tile -mamx-int8; called only after CpuHasAmxInt8(),
// which also asks Linux for the process's permission to use the tile data).
//
// tdpbssd multiplies signed bytes by signed bytes, four per 32-bit lane, and adds the four products
// to the lane with wraparound, so each output is the exact wrapping int32 sum of docs/DETERMINISM.md
// 4.4 with no correction term (the VNNI kernel needs one for its unsigned operand). A tile of C
// stays in a tile register over all of K, so C is written once. A is read in place, 16 rows by 64
// k per tile; B is packed into 16-column panels of byte quads over all of K rounded up to 64, one
// tile row per quad (the VNNI kernel's layout without its +128), per call or, for a program's
// constant, once when the program is loaded.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cpu/gemm.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace consensor::kernels::cpu::gemm {

namespace {

std::atomic<bool> g_amx_enabled{true};
std::atomic<bool> g_amx_every_block{false};

constexpr int64_t kTileRows = 16;   // rows of an A or C tile; quads of a B tile
constexpr int64_t kTileK = 64;      // k per A tile: 16 quads of 4 bytes
constexpr int64_t kPanelCols = 16;  // columns of a B panel and of a C tile
constexpr int64_t kTileBytes = kTileRows * 64;

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The palette-1 tile configuration: tiles of 64 bytes a row. Tiles 0-3 hold C (row tile r, column
// tile c in tile 2r + c), 4 and 5 the two row tiles of A, 6 and 7 the two panels of B. All have 16
// rows but the first row tile of A and C (tiles 0, 1 and 4), which have `first_rows` (1..16): the
// last rows of a block, read and written in place (a tile load or store touches only its rows).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void LoadTileConfig(int64_t first_rows) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = t == 0 || t == 1 || t == 4 ? static_cast<uint8_t>(first_rows) : uint8_t{kTileRows};
  }
  _tile_loadconfig(&cfg);
}

// Below this many multiply-adds a block runs on the VNNI kernel: configuring and releasing the
// tiles costs about what the VNNI kernel takes for a block of this size (measured on a Xeon with
// AMX, 2026-11-27).
constexpr int64_t kMinAmxWork = int64_t{1} << 20;
// At most this many bytes of B packed per call (a program's constant B is packed once, at load).
constexpr int64_t kMaxPackedPerCall = int64_t{8} << 20;

// C[0:16 RT, 0:16 CT] (row stride c_stride bytes; the first row tile has the rows configured) = the
// products over `steps` k-tiles of A (row r at a + r * lda, 64 bytes per step) and CT consecutive B
// panels (panel v at bp + v * panel_bytes, 1 KiB per step), then, if a_last is set, one more k-tile
// of A from a_last (row r at a_last + 64 r) against the panels' tile `steps`.
template <int RT, int CT>
void AmxTiles(int64_t steps, const int8_t* a, int64_t lda, const int8_t* a_last, const uint8_t* bp, int64_t panel_bytes,
              int32_t* c, int64_t c_stride) {
  _tile_zero(0);
  if (CT == 2) _tile_zero(1);
  if (RT == 2) _tile_zero(2);
  if (RT == 2 && CT == 2) _tile_zero(3);
  auto step = [&](const int8_t* a0, int64_t stride, const uint8_t* b) {
    _tile_loadd(6, b, 64);
    if (CT == 2) _tile_loadd(7, b + panel_bytes, 64);
    _tile_loadd(4, a0, stride);
    _tile_dpbssd(0, 4, 6);
    if (CT == 2) _tile_dpbssd(1, 4, 7);
    if (RT == 2) {
      _tile_loadd(5, a0 + kTileRows * stride, stride);
      _tile_dpbssd(2, 5, 6);
      if (CT == 2) _tile_dpbssd(3, 5, 7);
    }
  };
  for (int64_t s = 0; s < steps; ++s) step(a + s * kTileK, lda, bp + s * kTileBytes);
  if (a_last) step(a_last, kTileK, bp + steps * kTileBytes);
  _tile_stored(0, c, c_stride);
  if (CT == 2) _tile_stored(1, c + kPanelCols, c_stride);
  if (RT == 2) _tile_stored(2, reinterpret_cast<int8_t*>(c) + kTileRows * c_stride, c_stride);
  if (RT == 2 && CT == 2) _tile_stored(3, reinterpret_cast<int8_t*>(c) + kTileRows * c_stride + 64, c_stride);
}

using TilesFn = void (*)(int64_t, const int8_t*, int64_t, const int8_t*, const uint8_t*, int64_t, int32_t*, int64_t);

TilesFn Tiles(int rt, int ct) {
  if (rt == 2) return ct == 2 ? &AmxTiles<2, 2> : &AmxTiles<2, 1>;
  return ct == 2 ? &AmxTiles<1, 2> : &AmxTiles<1, 1>;
}

bool RequestTilePermission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023;  // asm/prctl.h ARCH_REQ_XCOMP_PERM
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace

void PackBAmxPanelsI8(const int8_t* b, int64_t ldb, int64_t K, int64_t N, uint8_t* out) {
  const int64_t quads = RoundUp(K, kTileK) / 4;
  for (int64_t j = 0; j < N; j += kPanelCols) {
    const int64_t cols = std::min(kPanelCols, N - j);
    for (int64_t q = 0; q < quads; ++q) {
      const int64_t k = 4 * q;
      if (cols == kPanelCols && k + 4 <= K) {
        // Four rows of 16 bytes interleaved into 16 quads (SSE2, in every x86-64 CPU).
        __m128i r[4];
        for (int i = 0; i < 4; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + (k + i) * ldb + j));
        const __m128i p01lo = _mm_unpacklo_epi8(r[0], r[1]);  // (k, k+1) pairs of columns 0-7
        const __m128i p01hi = _mm_unpackhi_epi8(r[0], r[1]);  // columns 8-15
        const __m128i p23lo = _mm_unpacklo_epi8(r[2], r[3]);
        const __m128i p23hi = _mm_unpackhi_epi8(r[2], r[3]);
        auto* o = reinterpret_cast<__m128i*>(out);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(p01lo, p23lo));  // columns 0-3
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(p01lo, p23lo));  // 4-7
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(p01hi, p23hi));  // 8-11
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(p01hi, p23hi));  // 12-15
        out += 64;
        continue;
      }
      for (int64_t c = 0; c < kPanelCols; ++c) {
        for (int64_t i = 0; i < 4; ++i) {
          out[4 * c + i] = c < cols && k + i < K ? static_cast<uint8_t>(b[(k + i) * ldb + j + c]) : uint8_t{0};
        }
      }
      out += 64;
    }
  }
}

bool CpuHasAmxInt8() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") && CpuHasAvx512Vnni() &&
           RequestTilePermission();
  }();
  return has;
#else
  return false;
#endif
}

bool UseAmxGemm() { return g_amx_enabled.load(std::memory_order_relaxed) && UseVnniGemm() && CpuHasAmxInt8(); }

void SetGemmAmxForTesting(bool enabled) { g_amx_enabled.store(enabled); }

void SetGemmAmxEveryBlockForTesting(bool every_block) { g_amx_every_block.store(every_block); }

bool I8BlockAmx(const I8Operands& op, const Dims& d, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace* ws) {
  if (m0 >= m1 || n0 >= n1) return true;
  if (d.K == 0) {
    for (int64_t m = m0; m < m1; ++m) std::memset(op.c + m * op.ldc + n0, 0, sizeof(int32_t) * (n1 - n0));
    return true;
  }
  if ((m1 - m0) * (n1 - n0) * d.K < kMinAmxWork && !g_amx_every_block.load(std::memory_order_relaxed)) {
    return I8BlockAvx512Vnni(op, d, m0, m1, n0, n1, ws);
  }
  const int64_t k_padded = RoundUp(d.K, kTileK);
  const int64_t panel_bytes = k_padded * kPanelCols;
  const int64_t steps = d.K / kTileK, k_rem = d.K % kTileK;
  const uint8_t* panels = nullptr;  // the panel of columns [n0, n0 + 16)
  if (op.b_amx_panels && n0 % kPanelCols == 0) {
    panels = op.b_amx_panels + n0 / kPanelCols * panel_bytes;
  } else {
    // Packed per call over all of K: past a bound, the VNNI kernel, which packs a k-block at a time.
    const int64_t packed_bytes = RoundUp(n1 - n0, kPanelCols) / kPanelCols * panel_bytes;
    if (packed_bytes > kMaxPackedPerCall) return I8BlockAvx512Vnni(op, d, m0, m1, n0, n1, ws);
    auto* packed = static_cast<uint8_t*>(ws->Get(2, packed_bytes));
    if (!packed) return false;
    PackBAmxPanelsI8(op.b + n0, op.ldb, d.K, n1 - n0, packed);
    panels = packed;
  }
  // Slot 1: the last k-tile of 32 rows (the K % 64 tail, zero padded), then a 32 x 32 C tile for
  // the last columns when they are fewer than a panel's 16.
  auto* tail = static_cast<int8_t*>(ws->Get(1, 2 * kTileBytes + 32 * 32 * sizeof(int32_t)));
  if (!tail) return false;
  auto* edge_c = reinterpret_cast<int32_t*>(tail + 2 * kTileBytes);
  LoadTileConfig(kTileRows);
  for (int64_t i = m0; i < m1;) {
    const int64_t rows_left = m1 - i;
    const int rt = rows_left >= 2 * kTileRows ? 2 : 1;
    const int64_t rows = std::min(rt * kTileRows, rows_left);
    if (rows < kTileRows) LoadTileConfig(rows);  // the block's last tile row
    const int8_t* a = op.a + i * op.lda;
    const int8_t* a_last = nullptr;
    if (k_rem) {
      std::memset(tail, 0, rows * kTileK);
      for (int64_t r = 0; r < rows; ++r) std::memcpy(tail + r * kTileK, a + r * op.lda + steps * kTileK, k_rem);
      a_last = tail;
    }
    for (int64_t j = n0; j < n1;) {
      const int ct = n1 - j > kPanelCols ? 2 : 1;
      const int64_t cols = std::min(ct * kPanelCols, n1 - j);
      const uint8_t* bp = panels + (j - n0) / kPanelCols * panel_bytes;
      int32_t* c = op.c + i * op.ldc + j;
      if (cols == ct * kPanelCols) {
        Tiles(rt, ct)(steps, a, op.lda, a_last, bp, panel_bytes, c, op.ldc * static_cast<int64_t>(sizeof(int32_t)));
      } else {
        Tiles(rt, ct)(steps, a, op.lda, a_last, bp, panel_bytes, edge_c, 32 * sizeof(int32_t));
        for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * op.ldc, edge_c + r * 32, cols * sizeof(int32_t));
      }
      j += cols;
    }
    i += rows;
  }
  _tile_release();
  return true;
}

}  // namespace consensor::kernels::cpu::gemm
