// Fused epilogues in one pass, AVX-512F (compiled with -mavx512f; called only after
// gemm::CpuHasAvx512F()).
//
// EpilogueRunner (elementwise.cc) sends an epilogue here when every step is one of the cheap
// f32 ops below and every input it reads is a single element, has the output's own shape, or
// has one value per channel (a tile then ends where a channel's run does).
// Each step is still its own section-4.2 operation (docs/DETERMINISM.md 1.1, 4.2), lane by lane:
// one IEEE add, sub, mul or div rounding to f32, or the spec's max, min, relu, neg or abs, and
// then the canonical NaN, exactly as elementwise_impl.h computes it. What changes is only where
// the intermediate values live: 16 vectors of a tile in a stack buffer, one step after another,
// instead of one generic broadcast pass per step over a 1024-element tile.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>

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
    case FastEpilogueOperand::kChannel: s.scalar = o.data[(first / o.inner) % o.channels]; break;
    case FastEpilogueOperand::kRow: s.ptr = o.data + first % o.channels; break;
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

// ---- Chains in registers: HardSwish and HardSigmoid, which the OCR models end most
// convolutions with, computed per vector with no value stored between their steps, and one NaN
// canonicalization at the end. Each gives its steps' bits for every input; the arguments are
// below, and EpilogueTest.HardSwishChainMatchesItsStepsForEveryFloat and
// EpilogueTest.HardSigmoidChainMatchesItsStepsForEveryFloat run both forms over all 2^32
// inputs (HardSigmoid at the classifier's slope 0.2; others on every 7th or 4099th).
std::atomic<bool> g_register_chains{true};

bool IsScalar(const FastEpilogueOperand& o, float v) {
  return o.kind == FastEpilogueOperand::kScalar && std::memcmp(&o.scalar, &v, sizeof v) == 0;
}
bool IsValue(const FastEpilogueOperand& o, int index) {
  return o.kind == FastEpilogueOperand::kValue && o.index == index;
}
// Binary step `op` over value `value` and the scalar `v`, in either order (commutative ops).
bool StepIs(const FastEpilogueStep& s, Op op, int value, float v) {
  return s.op == op && s.num_operands == 2 &&
         ((IsValue(s.operands[0], value) && IsScalar(s.operands[1], v)) ||
          (IsValue(s.operands[1], value) && IsScalar(s.operands[0], v)));
}
// Binary step `op` over value `value` and any scalar, in either order: the scalar, or nothing.
std::optional<float> StepScalar(const FastEpilogueStep& s, Op op, int value) {
  if (s.op != op || s.num_operands != 2) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    if (IsValue(s.operands[k], value) && s.operands[1 - k].kind == FastEpilogueOperand::kScalar) {
      return s.operands[1 - k].scalar;
    }
  }
  return std::nullopt;
}

// HardSwish: x + 3, max(., +0), min(., 6), x * ., . / 6, computed as a = x + 3;
// r = a > 0 ? a : +0; r = r < 6 ? r : 6; canonical(x * r / 6). a is NaN only when x is (r is
// then +0 where the steps give the canonical NaN, and x * r is NaN either way); a is never -0
// (x + 3 rounds to +0 at x = -3), so max's and min's signed-zero rules have nothing to choose;
// max and min make no NaN, and a NaN from the multiply (-inf * 0) stays NaN to the end.
bool IsHardSwishChain(const FastEpilogueStep* steps, int num_steps) {
  if (num_steps != 5) return false;
  const FastEpilogueStep& mul = steps[3];
  const bool mul_ok = mul.op == Op::kMul && mul.num_operands == 2 &&
                      ((IsValue(mul.operands[0], 0) && IsValue(mul.operands[1], 3)) ||
                       (IsValue(mul.operands[0], 3) && IsValue(mul.operands[1], 0)));
  const FastEpilogueStep& div = steps[4];
  const bool div_ok =
      div.op == Op::kDiv && div.num_operands == 2 && IsValue(div.operands[0], 4) && IsScalar(div.operands[1], 6.0f);
  return StepIs(steps[0], Op::kAdd, 0, 3.0f) && StepIs(steps[1], Op::kMax, 1, 0.0f) &&
         StepIs(steps[2], Op::kMin, 2, 6.0f) && mul_ok && div_ok;
}

inline __m512 HardSwish(__m512 x) {
  const __m512 a = _mm512_add_ps(x, _mm512_set1_ps(3.0f));
  __m512 r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GT_OQ), a);
  r = _mm512_mask_mov_ps(_mm512_set1_ps(6.0f), _mm512_cmp_ps_mask(r, _mm512_set1_ps(6.0f), _CMP_LT_OQ), r);
  return Canonicalize(_mm512_div_ps(_mm512_mul_ps(x, r), _mm512_set1_ps(6.0f)));
}

// HardSigmoid: x * alpha, + beta (any scalars), min(., 1), max(., +0), computed as
// s = x * alpha + beta (two roundings, as the steps); n = s < 1 ? s : 1; n > 0 ? n : +0, and the
// canonical NaN where s is NaN. The steps' min and max turn a NaN s into the canonical NaN and
// make none; at s = 1 both give 1; where s = +-0, n is s and max(+-0, +0) is +0 in both (its
// signed-zero rule: the AND of the bits), and no other value can tie.
struct HardSigmoidChain {
  float alpha = 0, beta = 0;
};
std::optional<HardSigmoidChain> AsHardSigmoidChain(const FastEpilogueStep* steps, int num_steps) {
  if (num_steps != 4 || !StepIs(steps[2], Op::kMin, 2, 1.0f) || !StepIs(steps[3], Op::kMax, 3, 0.0f)) {
    return std::nullopt;
  }
  const std::optional<float> alpha = StepScalar(steps[0], Op::kMul, 0), beta = StepScalar(steps[1], Op::kAdd, 1);
  if (!alpha || !beta) return std::nullopt;
  return HardSigmoidChain{*alpha, *beta};
}

inline __m512 HardSigmoid(__m512 x, __m512 alpha, __m512 beta) {
  const __m512 s = _mm512_add_ps(_mm512_mul_ps(x, alpha), beta);
  __m512 n = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), _mm512_cmp_ps_mask(s, _mm512_set1_ps(1.0f), _CMP_LT_OQ), s);
  n = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_GT_OQ), n);
  return _mm512_mask_mov_ps(n, _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q), CanonicalNaN());
}

// y[begin, end) = f(y), whole vectors then the tail's lanes masked.
template <typename F>
void RunChain(float* y, int64_t begin, int64_t end, const F& f) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(y + i)));
  if (i < end) {
    const __mmask16 m = static_cast<__mmask16>((1u << (end - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, y + i)));
  }
}

// True when the steps are a chain computed in registers, and ran.
bool RunRegisterChain(const FastEpilogueStep* steps, int num_steps, float* y, int64_t begin, int64_t end) {
  if (!g_register_chains.load(std::memory_order_relaxed)) return false;
  if (IsHardSwishChain(steps, num_steps)) {
    RunChain(y, begin, end, [](__m512 x) { return HardSwish(x); });
    return true;
  }
  if (const std::optional<HardSigmoidChain> c = AsHardSigmoidChain(steps, num_steps)) {
    const __m512 alpha = _mm512_set1_ps(c->alpha), beta = _mm512_set1_ps(c->beta);
    RunChain(y, begin, end, [&](__m512 x) { return HardSigmoid(x, alpha, beta); });
    return true;
  }
  return false;
}

}  // namespace

void SetRegisterChainsForTesting(bool enabled) { g_register_chains.store(enabled); }

void RunFastEpilogueAvx512(const FastEpilogueStep* steps, int num_steps, float* y, int64_t begin, int64_t end) {
  if (RunRegisterChain(steps, num_steps, y, begin, end)) return;
  alignas(64) float values[kMaxEpilogueSteps][kTileElements];  // step j's result for the current tile
  for (int64_t first = begin, n = 0; first < end; first += n) {
    n = std::min(end - first, kTileElements);
    // A tile stays within one run of each per-channel operand, which is then a scalar, and
    // within one row of each per-row operand, which is then a pointer into it.
    for (int s = 0; s < num_steps; ++s) {
      for (int k = 0; k < steps[s].num_operands; ++k) {
        const FastEpilogueOperand& o = steps[s].operands[k];
        if (o.kind == FastEpilogueOperand::kChannel) n = std::min(n, o.inner - first % o.inner);
        if (o.kind == FastEpilogueOperand::kRow) n = std::min(n, o.channels - first % o.channels);
      }
    }
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

// --- pow(x, y) on f32, 16 lanes at a time ---
//
// docs/DETERMINISM.md 5.11 (kernels/detmath.h pow, log_dd, exp_core) transcribed operation by
// operation: the same IEEE operations on the same operands in the same order (explicit fmas where
// the spec has them, `fma(-a, b, c)` as vfnmadd and `fma(a, b, -c)` as vfmsub, which round the
// same exact value once), the integer steps on 32-bit lanes, and the special cases as the
// spec's selects in its order. The scalar code's loop does not vectorize (GCC: "control flow in
// loop"); this runs about 16 lanes for the price of one. Then NaN canonicalization, as PowF.

// GCC 12's _mm512_srlv/srli/min/max_epi32 start from _mm512_undefined_epi32(): a false
// -Wmaybe-uninitialized once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

inline __m512 F(float v) { return _mm512_set1_ps(v); }
inline __m512i I(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
inline __m512 AsF(__m512i v) { return _mm512_castsi512_ps(v); }
inline __m512i AsI(__m512 v) { return _mm512_castps_si512(v); }

// detmath::detail::log_dd for every lane (the general case reads only finite a > 0).
inline void LogDd(__m512 x, __m512* out_hi, __m512* out_lo) {
  const __m512i ix = AsI(x);
  const __mmask16 sub = _mm512_cmplt_epu32_mask(ix, I(0x00800000u));
  const __m512 xs = _mm512_mask_mov_ps(x, sub, _mm512_mul_ps(x, F(0x1p23f)));
  const __m512i eadj = _mm512_maskz_mov_epi32(sub, I(static_cast<uint32_t>(-23)));
  const __m512i t = _mm512_sub_epi32(AsI(xs), I(0x3F3504F3u));
  const __m512i e = _mm512_add_epi32(_mm512_srai_epi32(t, 23), eadj);
  const __m512 m = AsF(_mm512_add_epi32(_mm512_and_si512(t, I(0x007FFFFFu)), I(0x3F3504F3u)));
  const __m512 f = _mm512_sub_ps(m, F(1.0f));
  const __m512 ef = _mm512_sub_ps(AsF(_mm512_add_epi32(I(0x4B400000u), e)), F(0x1.8p23f));
  const __m512 dh = _mm512_add_ps(F(2.0f), f);
  const __m512 dl = _mm512_add_ps(_mm512_sub_ps(F(2.0f), dh), f);
  const __m512 sh = _mm512_div_ps(f, dh);
  const __m512 e1 = _mm512_fnmadd_ps(sh, dh, f);
  const __m512 sl = _mm512_div_ps(_mm512_sub_ps(e1, _mm512_mul_ps(sh, dl)), dh);
  const __m512 s2h = _mm512_mul_ps(sh, sh);
  const __m512 s2l = _mm512_add_ps(_mm512_fmsub_ps(sh, sh, s2h), _mm512_mul_ps(F(2.0f), _mm512_mul_ps(sh, sl)));
  const __m512 s3h = _mm512_mul_ps(s2h, sh);
  const __m512 s3l = _mm512_add_ps(_mm512_fmsub_ps(s2h, sh, s3h), _mm512_fmadd_ps(s2l, sh, _mm512_mul_ps(s2h, sl)));
  const __m512 vh = _mm512_mul_ps(s3h, F(0x1.555556p-1f));
  const __m512 vl = _mm512_add_ps(_mm512_fmsub_ps(s3h, F(0x1.555556p-1f), vh),
                                  _mm512_fmadd_ps(s3l, F(0x1.555556p-1f), _mm512_mul_ps(s3h, F(-0x1.555556p-26f))));
  __m512 rr = F(0x1.9083fap-3f);
  rr = _mm512_fmadd_ps(rr, s2h, F(0x1.c63da8p-3f));
  rr = _mm512_fmadd_ps(rr, s2h, F(0x1.2493b6p-2f));
  rr = _mm512_fmadd_ps(rr, s2h, F(0x1.999998p-2f));
  const __m512 w = _mm512_mul_ps(_mm512_mul_ps(s3h, s2h), rr);
  const __m512 a2 = _mm512_mul_ps(F(2.0f), sh);
  const __m512 h1 = _mm512_add_ps(a2, vh);
  const __m512 l1 = _mm512_add_ps(_mm512_add_ps(_mm512_sub_ps(a2, h1), vh),
                                  _mm512_add_ps(_mm512_mul_ps(F(2.0f), sl), _mm512_add_ps(vl, w)));
  const __m512 lh = _mm512_mul_ps(ef, F(0x1.62e400p-1f));
  const __m512 lm = _mm512_mul_ps(ef, F(0x1.7f7d1cp-20f));
  const __m512 lme = _mm512_fmsub_ps(ef, F(0x1.7f7d1cp-20f), lm);
  const __m512 h2 = _mm512_add_ps(lh, h1);
  const __m512 l2 = _mm512_add_ps(_mm512_sub_ps(lh, h2), h1);
  const __m512 lo = _mm512_add_ps(
      l2, _mm512_add_ps(l1, _mm512_add_ps(lm, _mm512_add_ps(lme, _mm512_mul_ps(ef, F(0x1.ef357ap-45f))))));
  const __m512 hi = _mm512_add_ps(h2, lo);
  *out_hi = hi;
  *out_lo = _mm512_sub_ps(lo, _mm512_sub_ps(hi, h2));
}

// detmath::detail::exp_core(xh, xl), xh clamped to [-105, 89].
inline __m512 ExpCore(__m512 xh, __m512 xl) {
  const __m512 magic = F(0x1.8p23f);
  const __m512 t = _mm512_fmadd_ps(xh, F(0x1.715476p+0f), magic);
  const __m512 kf = _mm512_sub_ps(t, magic);
  const __m512i k = _mm512_sub_epi32(AsI(t), AsI(magic));
  __m512 r = _mm512_fnmadd_ps(kf, F(0x1.62e430p-1f), xh);  // fma(kf, -ln2hi, xh)
  r = _mm512_fmadd_ps(kf, F(0x1.05c610p-29f), r);          // fma(kf, -ln2lo, r); ln2lo < 0
  r = _mm512_add_ps(r, xl);
  __m512 q = F(0x1.9e18dep-13f);
  q = _mm512_fmadd_ps(q, r, F(0x1.6d4f58p-10f));
  q = _mm512_fmadd_ps(q, r, F(0x1.111302p-7f));
  q = _mm512_fmadd_ps(q, r, F(0x1.5554e6p-5f));
  q = _mm512_fmadd_ps(q, r, F(0x1.555554p-3f));
  q = _mm512_fmadd_ps(q, r, F(0x1.000000p-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 s = _mm512_add_ps(F(1.0f), r);
  const __m512 e1 = _mm512_add_ps(_mm512_sub_ps(F(1.0f), s), r);
  const __m512 p = _mm512_fmadd_ps(r2, q, e1);
  const __m512 y = _mm512_add_ps(s, p);
  const __m512i k1 = _mm512_srai_epi32(k, 1);
  const __m512i k2 = _mm512_sub_epi32(k, k1);
  const __m512 p1 = AsF(_mm512_slli_epi32(_mm512_add_epi32(k1, I(127)), 23));
  const __m512 p2 = AsF(_mm512_slli_epi32(_mm512_add_epi32(k2, I(127)), 23));
  return _mm512_mul_ps(_mm512_mul_ps(y, p1), p2);
}

inline __m512 Pow16(__m512 x, __m512 y) {
  const __m512i ix = AsI(x), iy = AsI(y);
  const __m512i ax = _mm512_and_si512(ix, I(0x7FFFFFFFu)), ay = _mm512_and_si512(iy, I(0x7FFFFFFFu));
  const __m512i ey = _mm512_sub_epi32(_mm512_srli_epi32(ay, 23), I(127));
  const __m512i ec = _mm512_min_epi32(_mm512_max_epi32(ey, I(0)), I(23));
  const __m512i my = _mm512_or_si512(_mm512_and_si512(ay, I(0x007FFFFFu)), I(0x00800000u));
  const __m512i fracmask = _mm512_srlv_epi32(I(0x00FFFFFFu), _mm512_add_epi32(ec, I(1)));
  const __mmask16 ey_ge0 = _mm512_cmpge_epi32_mask(ey, I(0));
  const __mmask16 ay_zero = _mm512_cmpeq_epi32_mask(ay, I(0));
  const __mmask16 y_int =
      _mm512_cmpge_epi32_mask(ey, I(23)) | (ey_ge0 & _mm512_testn_epi32_mask(my, fracmask)) | ay_zero;
  const __m512i odd_bit = _mm512_and_si512(_mm512_srlv_epi32(my, _mm512_sub_epi32(I(23), ec)), I(1));
  const __mmask16 y_odd = ey_ge0 & _mm512_cmple_epi32_mask(ey, I(23)) & y_int & _mm512_cmpneq_epi32_mask(odd_bit, I(0));
  __m512 lh, ll;
  LogDd(AsF(ax), &lh, &ll);
  const __m512 ph0 = _mm512_mul_ps(y, lh);
  const __m512 pl0 = _mm512_add_ps(_mm512_fmsub_ps(y, lh, ph0), _mm512_mul_ps(y, ll));
  const __mmask16 in_range =
      _mm512_cmp_ps_mask(ph0, F(-105.0f), _CMP_GE_OQ) & _mm512_cmp_ps_mask(ph0, F(89.0f), _CMP_LE_OQ);
  const __m512 out_of_range =
      _mm512_mask_mov_ps(F(-105.0f), _mm512_cmp_ps_mask(ph0, _mm512_setzero_ps(), _CMP_GT_OQ), F(89.0f));
  const __m512 ph = _mm512_mask_mov_ps(out_of_range, in_range, ph0);
  const __m512 pl = _mm512_maskz_mov_ps(in_range, pl0);
  const __m512 mag = ExpCore(ph, pl);
  const __mmask16 xneg = _mm512_cmplt_epi32_mask(ix, I(0));
  __m512 r = AsF(_mm512_mask_xor_epi32(AsI(mag), xneg & y_odd, AsI(mag), I(0x80000000u)));  // -mag
  const __m512i xsign_if_odd = _mm512_maskz_and_epi32(y_odd, ix, I(0x80000000u));
  const __mmask16 ypos = _mm512_cmpge_epi32_mask(iy, I(0));
  const __m512 nan = AsF(I(0x7FC00000u));
  r = _mm512_mask_mov_ps(r, xneg & static_cast<__mmask16>(~y_int), nan);
  const __m512i inf_bits = I(0x7F800000u);
  r = _mm512_mask_mov_ps(r, _mm512_cmpeq_epi32_mask(ax, inf_bits),
                         AsF(_mm512_or_si512(_mm512_maskz_mov_epi32(ypos, inf_bits), xsign_if_odd)));
  r = _mm512_mask_mov_ps(
      r, _mm512_cmpeq_epi32_mask(ax, I(0)),
      AsF(_mm512_or_si512(_mm512_maskz_mov_epi32(static_cast<__mmask16>(~ypos), inf_bits), xsign_if_odd)));
  const __mmask16 below_one = _mm512_cmplt_epu32_mask(ax, I(0x3F800000u));
  const __mmask16 to_zero = static_cast<__mmask16>(~(below_one ^ ypos));  // (ax < 1) == ypos
  __m512 yinf = _mm512_mask_mov_ps(AsF(inf_bits), to_zero, _mm512_setzero_ps());
  yinf = _mm512_mask_mov_ps(yinf, _mm512_cmpeq_epi32_mask(ax, I(0x3F800000u)), F(1.0f));
  r = _mm512_mask_mov_ps(r, _mm512_cmpeq_epi32_mask(ay, inf_bits), yinf);
  r = _mm512_mask_mov_ps(r, _mm512_cmpgt_epu32_mask(ax, inf_bits) | _mm512_cmpgt_epu32_mask(ay, inf_bits), nan);
  r = _mm512_mask_mov_ps(r, _mm512_cmpeq_epi32_mask(ix, I(0x3F800000u)), F(1.0f));
  r = _mm512_mask_mov_ps(r, ay_zero, F(1.0f));
  return Canonicalize(r);
}

// detmath::sigmoid: e = exp(-x) (clamped as detmath::exp, NaN for a NaN x), 1 / (1 + e),
// NaN canonicalized.
inline __m512 Sigmoid16(__m512 x) {
  const __m512 nx = FlipSign(x);
  __m512 c = _mm512_mask_mov_ps(nx, _mm512_cmp_ps_mask(nx, F(89.0f), _CMP_GT_OQ), F(89.0f));
  c = _mm512_mask_mov_ps(F(-105.0f), _mm512_cmp_ps_mask(c, F(-105.0f), _CMP_GE_OQ), c);  // NaN -> -105
  const __m512 nan = AsF(I(0x7FC00000u));
  const __m512 e = _mm512_mask_mov_ps(ExpCore(c, _mm512_setzero_ps()), _mm512_cmp_ps_mask(nx, nx, _CMP_UNORD_Q), nan);
  return Canonicalize(_mm512_div_ps(F(1.0f), _mm512_add_ps(F(1.0f), e)));
}

}  // namespace

void SigmoidF32Avx512(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(out + i, Sigmoid16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, Sigmoid16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void PowF32Avx512(const float* x, const float* y, bool y_scalar, float* out, int64_t n) {
  const __m512 ys = y_scalar ? _mm512_set1_ps(y[0]) : _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    _mm512_storeu_ps(out + i, Pow16(_mm512_loadu_ps(x + i), y_scalar ? ys : _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 yv = y_scalar ? ys : _mm512_maskz_loadu_ps(m, y + i);
    _mm512_mask_storeu_ps(out + i, m, Pow16(_mm512_maskz_loadu_ps(m, x + i), yv));
  }
}

#pragma GCC diagnostic pop

}  // namespace consensor::kernels::cpu
