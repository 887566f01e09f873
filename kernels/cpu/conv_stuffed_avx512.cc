// The conv over a zero-stuffed input (ConvTranspose's lowering, DETERMINISM.md 3.1), stride 1,
// register-blocked for AVX-512F (compiled with -mavx512f; called only after gemm::UseAvx512Gemm()).
//
// Per output row oh and column phase pw (ow = pw + uw * m), the outputs read x through the same
// few kernel taps, at x columns m + constant: a small dense convolution over x. A block keeps up
// to 12 filters x 2 (or fewer filters x more) vectors of 16 consecutive m in zmm accumulators
// across all its terms, instead of loading and storing the accumulators once per tap as
// conv_direct_impl.h does, and reads each weight as an embedded broadcast.
//
// Order: each accumulator starts at +0.0 and takes fma(x, w, acc) for c, then the kernel rows
// that read x (kh increasing), then the kernel columns that read x (kw increasing): the spec's
// chain (DETERMINISM.md 4.4) without the stuffed-zero terms, as ConvStuffedRowImpl takes it.
// A lane whose x column lies outside the row loads +0.0 (masked load) and takes that term,
// which is a padding term of the spec's chain. Then acc + bias, NaN canonicalization; outputs
// that end -0 are recomputed with the whole chain (StuffedFullChain), the proof in
// conv_direct_impl.h covering any chain that takes every x term in order and any subset of the
// zero terms. Filters with a non-finite weight run ConvStuffedRowsAvx2 (whole chain).
// Lanes and filters are independent, so block sizes and the thread split change no bit.
//
// ConvStuffedOneTapAvx512 (ConvTranspose with stride == kernel == 2, pads 0): every output reads
// one x element per channel, so the chain s is fma(x[c, i, j], w_c(q, p), acc) for c ascending;
// the four outputs (2i + q, 2j + p) of x element (i, j) share its load. A block keeps the four
// phases of up to 6 vectors of 16 columns in registers across all channels and writes both
// output rows interleaved, so each x row is read once (the blocks read it once per output row
// and went through a phase buffer, an interleave pass and a -0 scan of the stored row).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv_direct_impl.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int kLanes = 16;

// The accumulator width used for a block of `filters` real filters (the rest zero weights).
int BlockWidth(int64_t filters) {
  return filters <= 1 ? 1 : filters <= 2 ? 2 : filters <= 4 ? 4 : filters <= 8 ? 8 : kStuffedBlockFilters;
}

// Vectors of 16 m per block for a block width: at most 24 accumulators and registers for the
// x vectors, and at least 8 independent chains where the row is long enough (the fma latency).
constexpr int MaxVectors(int fb) { return fb >= 12 ? 2 : fb >= 8 ? 3 : fb >= 4 ? 4 : fb >= 2 ? 8 : 12; }

// What a block of one phase reads.
struct PhaseArgs {
  int64_t channels, plane;         // Cg, XH * XW
  int64_t channel_step, row_step;  // floats between packed weights of c, of kh
  const float* xg;                 // the group's first input channel of image n
  const float* wp;                 // the block's packed weights, [k][fb]
  const StuffedTap* rows;          // kernel rows that read x, kh increasing
  int64_t num_rows;
  const StuffedTap* cols;  // kernel columns that read x, kw increasing
  int64_t num_cols;
  const __mmask16* masks;  // [col tap][vector]: lanes whose x column exists
  int64_t num_vectors;
  const float* bias;  // fb values (zero-padded), or null
  int64_t ld;         // floats between the output rows of two filters
};

// kMasked: some lane of the block's vectors has an x column outside the row for some tap
// (otherwise every load is a plain one).
template <int FB, int U, bool kMasked>
void PhaseBlock(const PhaseArgs& a, int64_t v0, float* out) {
  __m512 acc[FB][U];
#pragma GCC unroll 12
  for (int f = 0; f < FB; ++f) {
#pragma GCC unroll 12
    for (int u = 0; u < U; ++u) acc[f][u] = _mm512_setzero_ps();
  }
  const int64_t m0 = v0 * kLanes;
  for (int64_t c = 0; c < a.channels; ++c) {
    const float* xc = a.xg + c * a.plane + m0;
    const float* wc = a.wp + c * a.channel_step;
    for (int64_t r = 0; r < a.num_rows; ++r) {
      const float* xr = xc + a.rows[r].offset;
      const float* wr = wc + a.rows[r].k * a.row_step;
      for (int64_t t = 0; t < a.num_cols; ++t) {
        const float* xs = xr + a.cols[t].offset;
        const float* wk = wr + a.cols[t].k * FB;
        const __mmask16* mk = a.masks + t * a.num_vectors + v0;
        __m512 xv[U];
#pragma GCC unroll 12
        for (int u = 0; u < U; ++u) {
          xv[u] = kMasked ? _mm512_maskz_loadu_ps(mk[u], xs + kLanes * u) : _mm512_loadu_ps(xs + kLanes * u);
        }
#pragma GCC unroll 12
        for (int f = 0; f < FB; ++f) {
          const __m512 wv = _mm512_set1_ps(wk[f]);
#pragma GCC unroll 12
          for (int u = 0; u < U; ++u) acc[f][u] = _mm512_fmadd_ps(xv[u], wv, acc[f][u]);
        }
      }
    }
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
#pragma GCC unroll 12
  for (int f = 0; f < FB; ++f) {
#pragma GCC unroll 12
    for (int u = 0; u < U; ++u) {
      __m512 v = acc[f][u];
      if (a.bias) v = _mm512_add_ps(v, _mm512_set1_ps(a.bias[f]));
      v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
      _mm512_storeu_ps(out + f * a.ld + kLanes * u, v);
    }
  }
}

using PhaseFn = void (*)(const PhaseArgs&, int64_t, float*);

template <int FB, bool kMasked>
PhaseFn PhaseKernel(int u) {
  static_assert(MaxVectors(FB) <= 12);
  switch (u) {
    case 1: return &PhaseBlock<FB, 1, kMasked>;
    case 2: return &PhaseBlock<FB, (MaxVectors(FB) >= 2 ? 2 : 1), kMasked>;
    case 3: return &PhaseBlock<FB, (MaxVectors(FB) >= 3 ? 3 : 1), kMasked>;
    case 4: return &PhaseBlock<FB, (MaxVectors(FB) >= 4 ? 4 : 1), kMasked>;
    case 5: return &PhaseBlock<FB, (MaxVectors(FB) >= 5 ? 5 : 1), kMasked>;
    case 6: return &PhaseBlock<FB, (MaxVectors(FB) >= 6 ? 6 : 1), kMasked>;
    case 7: return &PhaseBlock<FB, (MaxVectors(FB) >= 7 ? 7 : 1), kMasked>;
    case 8: return &PhaseBlock<FB, (MaxVectors(FB) >= 8 ? 8 : 1), kMasked>;
    case 9: return &PhaseBlock<FB, (MaxVectors(FB) >= 9 ? 9 : 1), kMasked>;
    case 10: return &PhaseBlock<FB, (MaxVectors(FB) >= 10 ? 10 : 1), kMasked>;
    case 11: return &PhaseBlock<FB, (MaxVectors(FB) >= 11 ? 11 : 1), kMasked>;
    default: return &PhaseBlock<FB, (MaxVectors(FB) >= 12 ? 12 : 1), kMasked>;
  }
}

template <bool kMasked>
PhaseFn PhaseKernelFor(int fb, int u) {
  switch (fb) {
    case 1: return PhaseKernel<1, kMasked>(u);
    case 2: return PhaseKernel<2, kMasked>(u);
    case 4: return PhaseKernel<4, kMasked>(u);
    case 8: return PhaseKernel<8, kMasked>(u);
    default: return PhaseKernel<kStuffedBlockFilters, kMasked>(u);
  }
}

// out[ow] = phases[ow % uw][ow / uw] for ow < OW; phase p's values start at phases + p * cap.
void Interleave(const float* phases, int64_t cap, int64_t uw, int64_t OW, float* out) {
  if (uw == 1) {
    std::memcpy(out, phases, sizeof(float) * OW);
    return;
  }
  int64_t ow = 0;
  if (uw == 2) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (; ow + 2 * kLanes <= OW; ow += 2 * kLanes) {
      const __m512 even = _mm512_loadu_ps(phases + ow / 2), odd = _mm512_loadu_ps(phases + cap + ow / 2);
      _mm512_storeu_ps(out + ow, _mm512_permutex2var_ps(even, lo, odd));
      _mm512_storeu_ps(out + ow + kLanes, _mm512_permutex2var_ps(even, hi, odd));
    }
  }
  for (; ow < OW; ++ow) out[ow] = phases[(ow % uw) * cap + ow / uw];
}

// ConvStuffedOneTapAvx512's block: U vectors of 16 x columns of one x row, for each of the four
// output phases (q, p) = (output row 2i + q, output column 2j + p) an accumulator per vector,
// across all Cg channels. kTail: the last vector has fewer than 16 columns (tail_mask).
struct OneTapArgs {
  int64_t channels, plane;
  const float* x;   // channel 0 of the group, row i, the block's first column
  const float* wp;  // [c][q * 2 + p]: the weight of channel c's term in phase (q, p)
  float bias;       // unused when has_bias is false
  bool has_bias;
  __mmask16 tail_mask;
  float* out[2];  // output rows 2i and 2i + 1 at the block's first column (2 * j0)
};

// Lanes of [even | odd] that interleave them: out[2k] = even[k], out[2k + 1] = odd[k].
inline __m512i InterleaveLow() { return _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23); }
inline __m512i InterleaveHigh() {
  return _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

// Writes the block's outputs, then in negative_zero[2 * u + q] the outputs of vector u in row q
// that are -0 (bit k: output column 2 * (j0 + 16 * u) + k), which the caller recomputes.
template <int U, bool kTail>
void OneTapBlock(const OneTapArgs& a, uint32_t* negative_zero) {
  __m512 acc[4][U];
#pragma GCC unroll 6
  for (int u = 0; u < U; ++u) {
#pragma GCC unroll 4
    for (int ph = 0; ph < 4; ++ph) acc[ph][u] = _mm512_setzero_ps();
  }
  const float* xc = a.x;
  const float* wc = a.wp;
  for (int64_t c = 0; c < a.channels; ++c, xc += a.plane, wc += 4) {
    __m512 xv[U];
#pragma GCC unroll 6
    for (int u = 0; u < U; ++u) {
      xv[u] =
          kTail && u == U - 1 ? _mm512_maskz_loadu_ps(a.tail_mask, xc + kLanes * u) : _mm512_loadu_ps(xc + kLanes * u);
    }
#pragma GCC unroll 4
    for (int ph = 0; ph < 4; ++ph) {
      const __m512 wv = _mm512_set1_ps(wc[ph]);
#pragma GCC unroll 6
      for (int u = 0; u < U; ++u) acc[ph][u] = _mm512_fmadd_ps(xv[u], wv, acc[ph][u]);
    }
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  const __m512 bias = _mm512_set1_ps(a.bias);
  const __m512i negative = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  const __m512i low = InterleaveLow(), high = InterleaveHigh();
  // Output lanes of the tail vector: 2 per x column, in the low then the high half.
  const uint32_t tail_outputs =
      a.tail_mask == 0xFFFF ? 0xFFFFFFFFu : (1u << (2 * __builtin_popcount(a.tail_mask))) - 1u;
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 6
    for (int u = 0; u < U; ++u) {
      __m512 even = acc[2 * q][u], odd = acc[2 * q + 1][u];
      if (a.has_bias) {
        even = _mm512_add_ps(even, bias);
        odd = _mm512_add_ps(odd, bias);
      }
      even = _mm512_mask_mov_ps(even, _mm512_cmp_ps_mask(even, even, _CMP_UNORD_Q), nan);
      odd = _mm512_mask_mov_ps(odd, _mm512_cmp_ps_mask(odd, odd, _CMP_UNORD_Q), nan);
      const __m512 lo = _mm512_permutex2var_ps(even, low, odd), hi = _mm512_permutex2var_ps(even, high, odd);
      float* out = a.out[q] + 2 * kLanes * u;
      __mmask16 lo_lanes = 0xFFFF, hi_lanes = 0xFFFF;
      if (kTail && u == U - 1) {
        lo_lanes = static_cast<__mmask16>(tail_outputs);
        hi_lanes = static_cast<__mmask16>(tail_outputs >> 16);
      }
      _mm512_mask_storeu_ps(out, lo_lanes, lo);
      _mm512_mask_storeu_ps(out + kLanes, hi_lanes, hi);
      const uint32_t zeros =
          static_cast<uint32_t>(_mm512_mask_cmpeq_epi32_mask(lo_lanes, _mm512_castps_si512(lo), negative)) |
          static_cast<uint32_t>(_mm512_mask_cmpeq_epi32_mask(hi_lanes, _mm512_castps_si512(hi), negative)) << 16;
      negative_zero[2 * u + q] = zeros;
    }
  }
}

using OneTapFn = void (*)(const OneTapArgs&, uint32_t*);
constexpr int kOneTapMaxVectors = 6;  // 24 accumulators

template <bool kTail>
OneTapFn OneTapKernel(int u) {
  switch (u) {
    case 1: return &OneTapBlock<1, kTail>;
    case 2: return &OneTapBlock<2, kTail>;
    case 3: return &OneTapBlock<3, kTail>;
    case 4: return &OneTapBlock<4, kTail>;
    case 5: return &OneTapBlock<5, kTail>;
    default: return &OneTapBlock<6, kTail>;
  }
}

}  // namespace

int64_t StuffedPackedFloats(const ConvGeom& g) { return g.G * StuffedBlocksPerGroup(g) * kStuffedBlockFilters * g.Kc; }

void PackStuffedFilterBlocks(const ConvGeom& g, const float* w, float* packed) {
  const int64_t blocks = StuffedBlocksPerGroup(g);
  for (int64_t gi = 0; gi < g.G; ++gi) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t f0 = gi * g.Fg + b * kStuffedBlockFilters;
      const int64_t size = std::min<int64_t>(kStuffedBlockFilters, (gi + 1) * g.Fg - f0);
      const int fb = BlockWidth(size);
      float* dst = packed + (gi * blocks + b) * kStuffedBlockFilters * g.Kc;
      for (int64_t k = 0; k < g.Kc; ++k) {
        for (int i = 0; i < fb; ++i) dst[k * fb + i] = i < size ? w[(f0 + i) * g.Kc + k] : 0.0f;
      }
    }
  }
}

void ConvStuffedBlocksAvx512(const ConvGeom& g, const float* x, const float* w, const float* packed, const float* bias,
                             const uint8_t* finite_filter, float* y, int64_t begin, int64_t end) {
  const int64_t blocks = StuffedBlocksPerGroup(g);
  const int64_t phases = std::min(g.uw, g.OW);
  const int64_t max_vectors = ((g.OW + g.uw - 1) / g.uw + kLanes - 1) / kLanes;
  const int64_t cap = max_vectors * kLanes;  // floats per phase in the block's buffer
  // Column taps and their lane masks depend on the phase alone.
  std::vector<std::vector<StuffedTap>> column_taps(static_cast<size_t>(phases));
  std::vector<std::vector<__mmask16>> masks(static_cast<size_t>(phases));
  std::vector<std::vector<uint8_t>> full(static_cast<size_t>(phases));  // [vector]: every tap's mask full
  for (int64_t pw = 0; pw < phases; ++pw) {
    StuffedColumnTaps(g, pw, &column_taps[pw]);
    std::vector<__mmask16>& mk = masks[pw];
    mk.resize(column_taps[pw].size() * max_vectors);
    full[pw].assign(static_cast<size_t>(max_vectors), 1);
    for (size_t t = 0; t < column_taps[pw].size(); ++t) {
      for (int64_t v = 0; v < max_vectors; ++v) {
        const int64_t lo = std::clamp<int64_t>(column_taps[pw][t].mb - v * kLanes, 0, kLanes);
        const int64_t hi = std::clamp<int64_t>(column_taps[pw][t].me - v * kLanes, 0, kLanes);
        const uint32_t bits = hi > lo ? ((1u << hi) - 1u) & ~((1u << lo) - 1u) : 0u;
        mk[t * max_vectors + v] = static_cast<__mmask16>(bits);
        if (bits != 0xFFFFu) full[pw][v] = 0;
      }
    }
  }
  std::vector<float> buffer(static_cast<size_t>(kStuffedBlockFilters * phases * cap));
  std::vector<StuffedTap> row_taps;
  const int64_t plane = g.XH * g.XW;
  const float* prefetched = nullptr;  // the first x row the last prefetch asked for
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t oh = unit % g.OH, ngb = unit / g.OH, b = ngb % blocks, ng = ngb / blocks, gi = ng % g.G, n = ng / g.G;
    const int64_t f0 = gi * g.Fg + b * kStuffedBlockFilters;
    const int64_t size = std::min<int64_t>(kStuffedBlockFilters, (gi + 1) * g.Fg - f0);
    bool finite = true;
    for (int64_t i = 0; i < size; ++i) finite = finite && finite_filter[f0 + i] != 0;
    if (!finite) {
      for (int64_t i = 0; i < size; ++i) {
        const int64_t row = (n * g.F + f0 + i) * g.OH + oh;
        ConvStuffedRowsAvx2(g, x, w, bias, finite_filter, y, row, row + 1);
      }
      continue;
    }
    row_taps.clear();
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t r = oh - g.pt + kh * g.dh;
      if (r >= 0 && r < g.H && (r + g.r0) % g.uh == 0) row_taps.push_back({kh, (r + g.r0) / g.uh * g.XW, 0, 0});
    }
    // The x rows below this unit's (the next units' rows, as units of a block run oh upwards),
    // fetched while this one computes: a row of each of Cg channels, too many streams for the
    // hardware prefetcher to pick up in time. Once per x row: with uh output rows per x row,
    // the next uh - 1 units would ask for the same lines again, and a prefetch of a line already
    // on its way still takes a fill buffer.
    if (!row_taps.empty() && (row_taps.back().offset / g.XW) + 1 < g.XH) {
      const float* next = x + (n * g.C + gi * g.Cg) * plane + row_taps.back().offset + g.XW;
      if (next != prefetched) {
        prefetched = next;
        for (int64_t c = 0; c < g.Cg; ++c) {
          for (int64_t j = 0; j < g.XW; j += kLanes)
            _mm_prefetch(reinterpret_cast<const char*>(next + c * plane + j), _MM_HINT_T0);
        }
      }
    }
    const int fb = BlockWidth(size);
    float block_bias[kStuffedBlockFilters] = {};
    if (bias) std::copy(bias + f0, bias + f0 + size, block_bias);
    PhaseArgs a;
    a.channels = g.Cg;
    a.plane = plane;
    a.channel_step = g.KH * g.KW * fb;
    a.row_step = g.KW * fb;
    a.xg = x + (n * g.C + gi * g.Cg) * plane;
    a.wp = packed + (gi * blocks + b) * kStuffedBlockFilters * g.Kc;
    a.rows = row_taps.data();
    a.num_rows = static_cast<int64_t>(row_taps.size());
    a.num_vectors = max_vectors;
    a.bias = bias ? block_bias : nullptr;
    a.ld = phases * cap;
    const int max_u = MaxVectors(fb);
    for (int64_t pw = 0; pw < phases; ++pw) {
      a.cols = column_taps[pw].data();
      a.num_cols = static_cast<int64_t>(column_taps[pw].size());
      a.masks = masks[pw].data();
      const int64_t vectors = ((g.OW - pw + g.uw - 1) / g.uw + kLanes - 1) / kLanes;
      // Blocks of even size: a short last block would wait on the fma latency as long as a full one.
      const int64_t even_u = (vectors + (vectors + max_u - 1) / max_u - 1) / ((vectors + max_u - 1) / max_u);
      for (int64_t v0 = 0; v0 < vectors; v0 += even_u) {
        const int u = static_cast<int>(std::min<int64_t>(even_u, vectors - v0));
        bool masked = false;
        for (int64_t v = v0; v < v0 + u; ++v) masked = masked || full[pw][v] == 0;
        (masked ? PhaseKernelFor<true>(fb, u) : PhaseKernelFor<false>(fb, u))(a, v0,
                                                                              buffer.data() + pw * cap + v0 * kLanes);
      }
    }
    for (int64_t i = 0; i < size; ++i) {
      const int64_t f = f0 + i;
      float* yrow = y + ((n * g.F + f) * g.OH + oh) * g.OW;
      Interleave(buffer.data() + i * a.ld, cap, g.uw, g.OW, yrow);
      // -0 is the one output the skipped terms may have changed: recompute it in full.
      const __m512i negative_zero = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
      for (int64_t ow = 0; ow < g.OW; ow += kLanes) {
        const __mmask16 lanes =
            g.OW - ow >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (g.OW - ow)) - 1u);
        uint32_t hits = _mm512_mask_cmpeq_epi32_mask(lanes, _mm512_maskz_loadu_epi32(lanes, yrow + ow), negative_zero);
        while (hits != 0) {
          const int lane = __builtin_ctz(hits);
          hits &= hits - 1;
          yrow[ow + lane] = StuffedFullChain(g, x, w, bias, n, f, oh, ow + lane);
        }
      }
    }
  }
}

void ConvStuffedOneTapAvx512(const ConvGeom& g, const StuffedOneTap& taps, const float* x, const float* w,
                             const float* bias, float* y, int64_t begin, int64_t end) {
  const int64_t plane = g.XH * g.XW;
  const int64_t vectors = (g.XW + kLanes - 1) / kLanes;
  // Blocks of even size: a short last block would wait on the fma latency as long as a full one.
  const int64_t blocks = (vectors + kOneTapMaxVectors - 1) / kOneTapMaxVectors;
  const int64_t block_vectors = (vectors + blocks - 1) / blocks;
  const int64_t tail = g.XW - (vectors - 1) * kLanes;
  const __mmask16 tail_mask = static_cast<__mmask16>(tail == kLanes ? 0xFFFFu : (1u << tail) - 1u);
  std::vector<float> packed(static_cast<size_t>(4 * g.Cg));
  int64_t packed_filter = -1;
  uint32_t negative_zero[2 * kOneTapMaxVectors];
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t i = unit % g.XH, nf = unit / g.XH, f = nf % g.F, n = nf / g.F;
    if (f != packed_filter) {
      // The spec's weight of channel c in phase (q, p): the conv's tap (kh[q], kw[p]).
      const float* wf = w + f * g.Kc;
      for (int64_t c = 0; c < g.Cg; ++c) {
        for (int q = 0; q < 2; ++q) {
          for (int p = 0; p < 2; ++p) packed[c * 4 + q * 2 + p] = wf[(c * 2 + taps.kh[q]) * 2 + taps.kw[p]];
        }
      }
      packed_filter = f;
    }
    const float* xg = x + (n * g.C + (f / g.Fg) * g.Cg) * plane;
    // The next x row of every channel, fetched while this one computes: Cg streams (planes
    // apart) are more than the hardware prefetcher follows in time.
    if (i + 1 < g.XH) {
      const float* next = xg + (i + 1) * g.XW;
      for (int64_t c = 0; c < g.Cg; ++c) {
        for (int64_t j = 0; j < g.XW; j += kLanes)
          _mm_prefetch(reinterpret_cast<const char*>(next + c * plane + j), _MM_HINT_T0);
      }
    }
    float* y0 = y + (nf * g.OH + 2 * i) * g.OW;
    OneTapArgs a;
    a.channels = g.Cg;
    a.plane = plane;
    a.wp = packed.data();
    a.bias = bias ? bias[f] : 0.0f;
    a.has_bias = bias != nullptr;
    for (int64_t v0 = 0; v0 < vectors; v0 += block_vectors) {
      const int u = static_cast<int>(std::min(block_vectors, vectors - v0));
      const bool has_tail = v0 + u == vectors && tail != kLanes;
      a.tail_mask = has_tail ? tail_mask : static_cast<__mmask16>(0xFFFF);
      a.x = xg + i * g.XW + v0 * kLanes;
      a.out[0] = y0 + 2 * kLanes * v0;
      a.out[1] = y0 + g.OW + 2 * kLanes * v0;
      (has_tail ? OneTapKernel<true>(u) : OneTapKernel<false>(u))(a, negative_zero);
      // -0 is the one output the skipped terms may have changed: recompute it in full.
      for (int k = 0; k < 2 * u; ++k) {
        uint32_t hits = negative_zero[k];
        while (hits != 0) {
          const int lane = __builtin_ctz(hits);
          hits &= hits - 1;
          const int64_t q = k % 2, ow = 2 * kLanes * (v0 + k / 2) + lane;
          y0[q * g.OW + ow] = StuffedFullChain(g, x, w, bias, n, f, 2 * i + q, ow);
        }
      }
    }
  }
}

}  // namespace consensor::kernels::cpu
