// Internal: fast implementations of the canonical sum (docs/DETERMINISM.md 4.1) for the CPU
// kernels (reduce, normalization). Every function here returns exactly the bits of
// CanonicalSumReference (kernels/reduction_order.h), up to the payload of a NaN result;
// callers canonicalize NaN before writing an f32 output.
//
// Everything lives in an anonymous namespace on purpose: this header is included both by
// portable translation units and by *_avx2.cc ones (compiled with -mavx2 -mfma), and each
// must get its own private copy. Shared inline functions would be merged by the linker
// and an AVX2 copy could end up running on a CPU without AVX2. When __AVX2__ is defined
// the hot loops use intrinsics; otherwise plain C++ (which the compiler vectorizes with
// SSE2 since every lane is an independent chain, no reassociation needed).
//
// Exactness notes used throughout:
//  * x + (-0.0) == x bit for bit for every non-NaN x (and stays NaN for NaN), so lanes that
//    receive no term may be skipped and partial vectors may be padded with -0.0 (never
//    with +0.0: -0.0 + +0.0 = +0.0 would change the sign of an all-(-0) sum).
//  * The fold adds lane[j] + lane[j+s] with the lower lane as first operand.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/reduction_order.h"
#include "kernels/thread_pool.h"

namespace consensor::kernels::cpu {
namespace {

inline float CanonicalNaNValue() { return std::bit_cast<float>(uint32_t{0x7FC00000u}); }
// Any NaN becomes 0x7FC00000; everything else unchanged (including -0).
inline float CanonNaN(float v) { return v != v ? CanonicalNaNValue() : v; }

// Folds 64 scalar lanes where only lanes [0, active) may differ from -0.0.
inline float FoldLanesScalar(float* lane, int active) {
  for (int s = kSumLanes / 2; s >= 1; s >>= 1) {
    for (int j = 0; j < s && j + s < active; ++j) lane[j] = lane[j] + lane[j + s];
    active = std::min(active, s);
  }
  return lane[0];
}

// Lane tree of x[0..n), 1 <= n <= kSumChunk, in plain C++. kSquare: the terms are x[i]*x[i]
// (one rounded multiply per term, as layer_norm's variance specifies).
template <bool kSquare>
inline float LaneTreeChunkPortable(const float* x, int64_t n) {
  float lane[kSumLanes];
  for (int j = 0; j < kSumLanes; ++j) lane[j] = -0.0f;
  const int64_t full = n / kSumLanes * kSumLanes;
  for (int64_t i = 0; i < full; i += kSumLanes) {
    for (int j = 0; j < kSumLanes; ++j) {
      float v = x[i + j];
      if constexpr (kSquare) v = v * v;
      lane[j] = lane[j] + v;
    }
  }
  for (int64_t i = full; i < n; ++i) {
    float v = x[i];
    if constexpr (kSquare) v = v * v;
    lane[i - full] = lane[i - full] + v;
  }
  return FoldLanesScalar(lane, n < kSumLanes ? static_cast<int>(n) : kSumLanes);
}

#if defined(__AVX2__)
// Mask with the first r (0..8) int32 lanes set.
inline __m256i FirstLanesMask(int r) {
  alignas(32) static constexpr int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTable + 8 - r));
}

template <bool kSquare>
inline __m256 LoadTerms8(const float* p) {
  __m256 v = _mm256_loadu_ps(p);
  if constexpr (kSquare) v = _mm256_mul_ps(v, v);
  return v;
}

// Loads the first r (1..7) terms at p; the other lanes are -0.0 (the exact identity).
template <bool kSquare>
inline __m256 LoadTermsPartial(const float* p, int r) {
  const __m256i mask = FirstLanesMask(r);
  __m256 v = _mm256_maskload_ps(p, mask);  // masked-out lanes are not read
  if constexpr (kSquare) v = _mm256_mul_ps(v, v);
  return _mm256_blendv_ps(_mm256_set1_ps(-0.0f), v, _mm256_castsi256_ps(mask));
}

// Lane tree with 8 __m256 accumulators: a_k holds lanes 8k..8k+7.
template <bool kSquare>
inline float LaneTreeChunkAvx2(const float* x, int64_t n) {
  const __m256 nz = _mm256_set1_ps(-0.0f);
  __m256 a0 = nz, a1 = nz, a2 = nz, a3 = nz, a4 = nz, a5 = nz, a6 = nz, a7 = nz;
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    a0 = _mm256_add_ps(a0, LoadTerms8<kSquare>(x + i));
    a1 = _mm256_add_ps(a1, LoadTerms8<kSquare>(x + i + 8));
    a2 = _mm256_add_ps(a2, LoadTerms8<kSquare>(x + i + 16));
    a3 = _mm256_add_ps(a3, LoadTerms8<kSquare>(x + i + 24));
    a4 = _mm256_add_ps(a4, LoadTerms8<kSquare>(x + i + 32));
    a5 = _mm256_add_ps(a5, LoadTerms8<kSquare>(x + i + 40));
    a6 = _mm256_add_ps(a6, LoadTerms8<kSquare>(x + i + 48));
    a7 = _mm256_add_ps(a7, LoadTerms8<kSquare>(x + i + 56));
  }
  const int rem = static_cast<int>(n - i);
  if (rem > 0) {
    __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    int k = 0;
    for (; (k + 1) * 8 <= rem; ++k) acc[k] = _mm256_add_ps(acc[k], LoadTerms8<kSquare>(x + i + 8 * k));
    if (rem - 8 * k > 0) acc[k] = _mm256_add_ps(acc[k], LoadTermsPartial<kSquare>(x + i + 8 * k, rem - 8 * k));
    a0 = acc[0];
    a1 = acc[1];
    a2 = acc[2];
    a3 = acc[3];
    a4 = acc[4];
    a5 = acc[5];
    a6 = acc[6];
    a7 = acc[7];
  }
  // s = 32, 16, 8 between registers.
  a0 = _mm256_add_ps(a0, a4);
  a1 = _mm256_add_ps(a1, a5);
  a2 = _mm256_add_ps(a2, a6);
  a3 = _mm256_add_ps(a3, a7);
  a0 = _mm256_add_ps(a0, a2);
  a1 = _mm256_add_ps(a1, a3);
  a0 = _mm256_add_ps(a0, a1);
  // s = 4: lane j + lane j+4.
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
  // s = 2: lane j + lane j+2.
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  // s = 1: lane 0 + lane 1.
  v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}
#endif  // __AVX2__

// Lane tree of 1 <= n <= kSumChunk terms with the ISA of this translation unit.
template <bool kSquare = false>
inline float LaneTreeChunk(const float* x, int64_t n) {
#if defined(__AVX2__)
  return LaneTreeChunkAvx2<kSquare>(x, n);
#else
  return LaneTreeChunkPortable<kSquare>(x, n);
#endif
}

// A float buffer that lives on the stack when small.
class FloatScratch {
 public:
  explicit FloatScratch(int64_t n) {
    if (n > kStack) {
      heap_.resize(static_cast<size_t>(n));
      ptr_ = heap_.data();
    } else {
      ptr_ = stack_;
    }
  }
  float* data() { return ptr_; }

 private:
  static constexpr int64_t kStack = 1024;
  float stack_[kStack];
  std::vector<float> heap_;
  float* ptr_;
};

// csum(x[0..n)) of contiguous terms (x[i]*x[i] when kSquare).
template <bool kSquare = false>
inline float CsumContiguous(const float* x, int64_t n) {
  if (n <= 0) return 0.0f;
  if (n <= kSumChunk) return LaneTreeChunk<kSquare>(x, n);
  const int64_t m = (n + kSumChunk - 1) / kSumChunk;
  FloatScratch partial(m);
  for (int64_t c = 0; c < m; ++c) {
    const int64_t begin = c * kSumChunk;
    partial.data()[c] = LaneTreeChunk<kSquare>(x + begin, std::min(kSumChunk, n - begin));
  }
  return CsumContiguous<false>(partial.data(), m);
}

// The same sum with the chunk lane trees spread over a thread pool (each chunk's tree is
// fixed and the chunk results are combined in the canonical order, so the bits do not
// depend on the thread count). Must not be called from inside a ParallelFor.
template <bool kSquare = false>
inline float CsumContiguousParallel(const float* x, int64_t n, ThreadPool* pool) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= 8 * kSumChunk) return CsumContiguous<kSquare>(x, n);
  const int64_t m = (n + kSumChunk - 1) / kSumChunk;
  std::vector<float> partial(static_cast<size_t>(m));
  pool->ParallelFor(m, 4, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t begin = c * kSumChunk;
      partial[c] = LaneTreeChunk<kSquare>(x + begin, std::min(kSumChunk, n - begin));
    }
  });
  return CsumContiguous<false>(partial.data(), m);
}

// Column lane trees: for each c in [0, ncols), out[c] = lane tree over rows r in
// [0, nrows) of base[off(r) + c], where off(r) = offs ? offs[r] : r * stride.
// 1 <= nrows <= kSumChunk. Vectorized across the columns, so each column keeps its own
// 64 lane accumulators and exactly the canonical term order.
constexpr int64_t kColBlock = 64;

inline void LaneTreeColumns(const float* base, const int64_t* offs, int64_t stride, int64_t nrows, int64_t ncols,
                            float* out) {
  const int active = nrows < kSumLanes ? static_cast<int>(nrows) : kSumLanes;
#if defined(__AVX2__)
  alignas(32) __m256 acc[kSumLanes][kColBlock / 8];
  const __m256 nz = _mm256_set1_ps(-0.0f);
  for (int64_t c0 = 0; c0 < ncols; c0 += kColBlock) {
    const int64_t bw = std::min(kColBlock, ncols - c0);
    const int nfull = static_cast<int>(bw / 8);
    const int tail = static_cast<int>(bw % 8);
    const int nv = nfull + (tail ? 1 : 0);
    const __m256i tmask = FirstLanesMask(tail);
    for (int l = 0; l < active; ++l)
      for (int v = 0; v < nv; ++v) acc[l][v] = nz;
    for (int64_t r = 0; r < nrows; ++r) {
      const float* p = base + (offs ? offs[r] : r * stride) + c0;
      __m256* a = acc[r & (kSumLanes - 1)];
      for (int v = 0; v < nfull; ++v) a[v] = _mm256_add_ps(a[v], _mm256_loadu_ps(p + 8 * v));
      if (tail) {
        __m256 t = _mm256_blendv_ps(nz, _mm256_maskload_ps(p + 8 * nfull, tmask), _mm256_castsi256_ps(tmask));
        a[nfull] = _mm256_add_ps(a[nfull], t);
      }
    }
    int act = active;
    for (int s = kSumLanes / 2; s >= 1; s >>= 1) {
      for (int j = 0; j < s && j + s < act; ++j)
        for (int v = 0; v < nv; ++v) acc[j][v] = _mm256_add_ps(acc[j][v], acc[j + s][v]);
      act = std::min(act, s);
    }
    for (int v = 0; v < nfull; ++v) _mm256_storeu_ps(out + c0 + 8 * v, acc[0][v]);
    if (tail) _mm256_maskstore_ps(out + c0 + 8 * nfull, tmask, acc[0][nfull]);
  }
#else
  float acc[kSumLanes][kColBlock];
  for (int64_t c0 = 0; c0 < ncols; c0 += kColBlock) {
    const int64_t bw = std::min(kColBlock, ncols - c0);
    for (int l = 0; l < active; ++l)
      for (int64_t c = 0; c < bw; ++c) acc[l][c] = -0.0f;
    for (int64_t r = 0; r < nrows; ++r) {
      const float* p = base + (offs ? offs[r] : r * stride) + c0;
      float* a = acc[r & (kSumLanes - 1)];
      for (int64_t c = 0; c < bw; ++c) a[c] = a[c] + p[c];
    }
    int act = active;
    for (int s = kSumLanes / 2; s >= 1; s >>= 1) {
      for (int j = 0; j < s && j + s < act; ++j)
        for (int64_t c = 0; c < bw; ++c) acc[j][c] = acc[j][c] + acc[j + s][c];
      act = std::min(act, s);
    }
    for (int64_t c = 0; c < bw; ++c) out[c0 + c] = acc[0][c];
  }
#endif
}

// out[c] = csum over r in [0, n) of base[off(r) + c] for c in [0, ncols) (sequential).
inline void CsumColumns(const float* base, const int64_t* offs, int64_t stride, int64_t n, int64_t ncols, float* out) {
  if (ncols <= 0) return;
  if (n <= 0) {
    for (int64_t c = 0; c < ncols; ++c) out[c] = 0.0f;
    return;
  }
  if (n <= kSumChunk) {
    LaneTreeColumns(base, offs, stride, n, ncols, out);
    return;
  }
  const int64_t m = (n + kSumChunk - 1) / kSumChunk;
  std::vector<float> partial(static_cast<size_t>(m * ncols));
  for (int64_t c = 0; c < m; ++c) {
    const int64_t begin = c * kSumChunk;
    const int64_t len = std::min(kSumChunk, n - begin);
    if (offs) {
      LaneTreeColumns(base, offs + begin, 0, len, ncols, partial.data() + c * ncols);
    } else {
      LaneTreeColumns(base + begin * stride, nullptr, stride, len, ncols, partial.data() + c * ncols);
    }
  }
  CsumColumns(partial.data(), nullptr, ncols, m, ncols, out);
}

}  // namespace
}  // namespace consensor::kernels::cpu
