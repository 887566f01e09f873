// Fused epilogues in one pass, AVX-512F (compiled with -mavx512f; called only after
// gemm::CpuHasAvx512F()).
//
// EpilogueRunner (elementwise.cc) sends an epilogue here when every step is one of the cheap
// f32 ops below and every input it reads is a single element or has the output's own shape.
// Each step is still its own section-4.2 operation (docs/DETERMINISM.md 1.1, 4.2), lane by lane:
// one IEEE add, sub, mul or div rounding to f32, or the spec's max, min, relu, neg or abs, and
// then the canonical NaN, exactly as elementwise_impl.h computes it. What changes is only where
// the intermediate values live: 16 vectors of a tile in a stack buffer, one step after another,
// instead of one generic broadcast pass per step over a 1024-element tile.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int kTileVectors = 16;
constexpr int64_t kTileElements = kLanes * kTileVectors;

inline __m512 CanonicalNaN() { return _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)); }

// NaN lanes of v replaced by the canonical NaN.
inline __m512 Canonicalize(__m512 v) {
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), CanonicalNaN());
}

// Section 1.1: NaN if either is NaN; max(-0, +0) = +0 (equal values: the AND of their bits).
inline __m512 SpecMax(__m512 a, __m512 b) {
  __m512 r = _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), a);
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ),
                         _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))));
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), CanonicalNaN());
}

// min(-0, +0) = -0 (equal values: the OR of their bits).
inline __m512 SpecMin(__m512 a, __m512 b) {
  __m512 r = _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), a);
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ),
                         _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))));
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), CanonicalNaN());
}

// x > 0 ? x : +0, NaN canonical.
inline __m512 SpecRelu(__m512 x) {
  const __m512 r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), x);
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), CanonicalNaN());
}

inline __m512 FlipSign(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

inline __m512 ClearSign(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MAX)));
}

template <Op kOp>
inline __m512 Apply(__m512 a, __m512 b) {
  if constexpr (kOp == Op::kAdd) return Canonicalize(_mm512_add_ps(a, b));
  if constexpr (kOp == Op::kSub) return Canonicalize(_mm512_sub_ps(a, b));
  if constexpr (kOp == Op::kMul) return Canonicalize(_mm512_mul_ps(a, b));
  if constexpr (kOp == Op::kDiv) return Canonicalize(_mm512_div_ps(a, b));
  if constexpr (kOp == Op::kMax) return SpecMax(a, b);
  if constexpr (kOp == Op::kMin) return SpecMin(a, b);
  if constexpr (kOp == Op::kRelu) return SpecRelu(a);
  if constexpr (kOp == Op::kNeg) return Canonicalize(FlipSign(a));
  if constexpr (kOp == Op::kAbs) return Canonicalize(ClearSign(a));
  return a;
}

// Where operand k of a step reads from for the tile at `first`: a pointer, or (null) the scalar.
struct Source {
  const float* ptr = nullptr;
  float scalar = 0.0f;
};

inline Source OperandSource(const FastEpilogueOperand& o, const float* y, const float (*values)[kTileElements],
                            int64_t first) {
  Source s;
  switch (o.kind) {
    case FastEpilogueOperand::kValue: s.ptr = o.index == 0 ? y + first : values[o.index - 1]; break;
    case FastEpilogueOperand::kScalar: s.scalar = o.scalar; break;
    case FastEpilogueOperand::kFullInput: s.ptr = o.data + first; break;
  }
  return s;
}

// n elements of one step; kScalarA / kScalarB: that operand is a broadcast scalar. Whole vectors
// unmasked, then the tail's lanes masked.
template <Op kOp, bool kScalarA, bool kScalarB>
inline void RunStepOver(const Source& a, const Source& b, float* out, int64_t n) {
  const __m512 sa = _mm512_set1_ps(a.scalar), sb = _mm512_set1_ps(b.scalar);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 va = kScalarA ? sa : _mm512_loadu_ps(a.ptr + i);
    const __m512 vb = kScalarB ? sb : _mm512_loadu_ps(b.ptr + i);
    _mm512_storeu_ps(out + i, Apply<kOp>(va, vb));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 va = kScalarA ? sa : _mm512_maskz_loadu_ps(m, a.ptr + i);
    const __m512 vb = kScalarB ? sb : _mm512_maskz_loadu_ps(m, b.ptr + i);
    _mm512_mask_storeu_ps(out + i, m, Apply<kOp>(va, vb));
  }
}

template <Op kOp>
inline void RunStep(const Source& a, const Source& b, float* out, int64_t n) {
  const bool scalar_a = a.ptr == nullptr, scalar_b = b.ptr == nullptr;
  if (scalar_a && scalar_b) return RunStepOver<kOp, true, true>(a, b, out, n);
  if (scalar_a) return RunStepOver<kOp, true, false>(a, b, out, n);
  if (scalar_b) return RunStepOver<kOp, false, true>(a, b, out, n);
  RunStepOver<kOp, false, false>(a, b, out, n);
}

}  // namespace

void RunFastEpilogueAvx512(const FastEpilogueStep* steps, int num_steps, float* y, int64_t begin, int64_t end) {
  alignas(64) float values[kMaxEpilogueSteps][kTileElements];  // step j's result for the current tile
  for (int64_t first = begin; first < end; first += kTileElements) {
    const int64_t n = std::min(end - first, kTileElements);
    for (int s = 0; s < num_steps; ++s) {
      const FastEpilogueStep& st = steps[s];
      const Source a = OperandSource(st.operands[0], y, values, first);
      const Source b = st.num_operands == 2 ? OperandSource(st.operands[1], y, values, first) : a;
      // Only the last step writes the output: until then it holds the op's result (value 0).
      float* out = s + 1 == num_steps ? y + first : values[s];
      switch (st.op) {
        case Op::kAdd: RunStep<Op::kAdd>(a, b, out, n); break;
        case Op::kSub: RunStep<Op::kSub>(a, b, out, n); break;
        case Op::kMul: RunStep<Op::kMul>(a, b, out, n); break;
        case Op::kDiv: RunStep<Op::kDiv>(a, b, out, n); break;
        case Op::kMax: RunStep<Op::kMax>(a, b, out, n); break;
        case Op::kMin: RunStep<Op::kMin>(a, b, out, n); break;
        case Op::kRelu: RunStep<Op::kRelu>(a, b, out, n); break;
        case Op::kNeg: RunStep<Op::kNeg>(a, b, out, n); break;
        case Op::kAbs: RunStep<Op::kAbs>(a, b, out, n); break;
        default: break;  // not a fast op: FastEpilogueOpSupported keeps these out
      }
    }
  }
}

}  // namespace consensor::kernels::cpu
