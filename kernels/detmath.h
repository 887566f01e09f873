// Copyright (c) Consensor developers.
//
// kernels/detmath.h: deterministic float32 transcendental functions.
//
// Every function here produces the same bits on every conforming host CPU and on every
// NVIDIA GPU, because it is a fixed sequence of IEEE-754 binary32 operations that are
// correctly rounded (round-to-nearest-even) everywhere:
//   + - * /, sqrt, explicit fused multiply-add (fma_rn), exact bit manipulation,
//   integer arithmetic, comparisons and selects, and exact int->float conversions of
//   integers below 2^24.
// No libm call, no double precision, no lookup table that differs between host and
// device. The normative description is docs/detmath-spec.md (to be merged into
// docs/DETERMINISM.md); the constants and polynomial coefficients are produced by
// scripts/fit_detmath.py.
//
// Build requirements (results are NOT reproducible otherwise):
//   host: -ffp-contract=off, no -ffast-math / -Ofast / -ffinite-math-only,
//         default rounding mode, no FTZ/DAZ (MXCSR default).
//   nvcc: --fmad=false, no --use_fast_math, no -ftz=true (the default -ftz=false is fine).
// Only fma_rn() fuses. On a host without -mfma, __builtin_fmaf becomes a call to the C
// library's fmaf, which is correctly rounded, so results stay identical (just slower).
//
// Error bounds quoted per function are the maxima MEASURED against glibc's
// double-precision functions over every float in the ranges where the error peaks
// (exp: [-104,-87], [0.25,1); log: [0.5,2); tanh: [1/16,4); erf: [0.5,4); sin, cos:
// [0.5,2)) plus every 193rd bit pattern of all 2^32 and the dense ranges of
// tests/kernels/detmath_test.cc. An exhaustive run over all 2^32 inputs exists as the
// disabled test DetMath.DISABLED_ExhaustiveUnivariate (not yet run). One ULP of a
// reference value v is 2^(floor(log2|v|) - 23), but never below 2^-149.
//
// NaN policy: every NaN result is the canonical quiet NaN 0x7FC00000, whatever the input
// NaN payload or sign. Signed zeros, infinities and subnormals (inputs and outputs) are
// handled exactly as documented per function; nothing is flushed to zero.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace consensor::detmath {

// ---------------------------------------------------------------------------------------
// Primitives.

CNSR_HD uint32_t as_uint(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return __builtin_bit_cast(uint32_t, x);
#endif
}

CNSR_HD float as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

// The only fused operation: a*b+c with a single rounding.
CNSR_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

// Correctly rounded square root.
CNSR_HD float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);
#endif
}

inline constexpr uint32_t kCanonicalNaNBits = 0x7FC00000u;

CNSR_HD bool is_nan(float x) { return (as_uint(x) & 0x7FFFFFFFu) > 0x7F800000u; }

CNSR_HD float canonical_nan() { return as_float(kCanonicalNaNBits); }

// c ? a : b, written as an integer mask blend. Used where the "expensive" operand is only
// needed on one side: with a plain ?:, GCC sinks the whole computation into a branch and
// then refuses to if-convert it (possibly trapping FP ops), which blocks vectorization.
CNSR_HD float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return as_float((as_uint(a) & m) | (as_uint(b) & ~m));
}

// Any NaN -> 0x7FC00000; every other value unchanged (including -0).
CNSR_HD float canonicalize_nan(float x) { return select(is_nan(x), canonical_nan(), x); }

namespace detail {

CNSR_HD float fabs_bits(float x) { return as_float(as_uint(x) & 0x7FFFFFFFu); }

// x with the sign bit of s XORed in.
CNSR_HD float xor_sign(float x, uint32_t sign_bit) { return as_float(as_uint(x) ^ sign_bit); }

// 2^k for integer -126 <= k <= 127, exact.
CNSR_HD float pow2i(int32_t k) { return as_float(static_cast<uint32_t>(k + 127) << 23); }

// Integer |v| < 2^22 to float, exactly, by the 1.5*2^23 bit trick.
CNSR_HD float small_int_to_float(int32_t v) { return as_float(0x4B400000u + static_cast<uint32_t>(v)) - 0x1.8p23f; }

// ln 2 split for exp's Cody-Waite reduction: hi has its last set bit at 2^-21, so
// k*hi is exact and x - k*hi is exact in one fma for the reduced range used here.
inline constexpr float kLn2Hi = 0x1.62e430p-1f;
inline constexpr float kLn2Lo = -0x1.05c610p-29f;
// ln 2 split for log: hi has 16 significant bits, so e*hi is exact for |e| <= 255.
inline constexpr float kLn2Hi16 = 0x1.62e400p-1f;
inline constexpr float kLn2Lo16 = 0x1.7f7d1cp-20f;
// Remainder ln2 - kLn2Hi16 - kLn2Lo16 (only pow needs it).
inline constexpr float kLn2Lo16b = 0x1.ef357ap-45f;
inline constexpr float kLog2e = 0x1.715476p+0f;

// e^(xh + xl) for xh already clamped to [-105, 89] (never NaN), |xl| <= 2^-20 |xh| or so.
// Reduction: k = rint(xh*log2e) (one fma with the 1.5*2^23 magic), r = xh - k*ln2hi
// (exact), r = r - k*ln2lo, r = r + xl.  e^r = 1 + r + r^2 Q(r), Q degree 5, evaluated as
// s = 1 + r with its exact error e1 (Fast2Sum), y = s + fma(r*r, Q(r), e1).
// Scaling by 2^k = 2^k1 * 2^k2 (k1 = k>>1): the first product is exact, the second is the
// only rounding, so subnormal results are correctly derived from y.
CNSR_HD float exp_core(float xh, float xl) {
  constexpr float kMagic = 0x1.8p23f;
  const float t = fma_rn(xh, kLog2e, kMagic);
  const float kf = t - kMagic;
  const int32_t k = static_cast<int32_t>(as_uint(t) - as_uint(kMagic));
  float r = fma_rn(kf, -kLn2Hi, xh);
  r = fma_rn(kf, -kLn2Lo, r);
  r = r + xl;
  float q = 0x1.9e18dep-13f;
  q = fma_rn(q, r, 0x1.6d4f58p-10f);
  q = fma_rn(q, r, 0x1.111302p-7f);
  q = fma_rn(q, r, 0x1.5554e6p-5f);
  q = fma_rn(q, r, 0x1.555554p-3f);
  q = fma_rn(q, r, 0x1.000000p-1f);
  const float r2 = r * r;
  const float s = 1.0f + r;
  const float e1 = (1.0f - s) + r;  // exact error of s (Fast2Sum, |r| < 1)
  const float p = fma_rn(r2, q, e1);
  const float y = s + p;
  const int32_t k1 = k >> 1;  // floor(k/2); k in [-152, 129]
  const int32_t k2 = k - k1;
  return (y * pow2i(k1)) * pow2i(k2);
}

CNSR_HD float clamp_exp_arg(float x) {
  float c = x > 89.0f ? 89.0f : x;
  c = c >= -105.0f ? c : -105.0f;  // also maps NaN to -105 (result replaced later)
  return c;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// exp(x) = e^x.
// Algorithm: detail::exp_core (Cody-Waite reduction to |r| <= ln2/2, e^r = 1 + r + r^2 Q(r)
// with Q of degree 5 fitted by weighted minimax in scripts/fit_detmath.py, scaling by two
// exact powers of two so that subnormal results get one rounding).
// Specials: exp(NaN) = canonical NaN, exp(+inf) = +inf, exp(-inf) = +0, exp(+-0) = 1.
// Measured max error: 0.61 ULP for normal results, 0.78 ULP for subnormal results (those
// are rounded twice: to 24 bits, then to the subnormal grid).
// x >= 0x1.62e430p+6 gives +inf; x <= -0x1.9fe36ap+6 gives +0.
CNSR_HD float exp(float x) {
  const float y = detail::exp_core(detail::clamp_exp_arg(x), 0.0f);
  return select(is_nan(x), canonical_nan(), y);
}

// ---------------------------------------------------------------------------------------
// log(x) = natural logarithm.
// Algorithm: subnormals are scaled by 2^23 (exact). x = 2^e * m with m in
// [sqrt(1/2), sqrt(2)) from integer bit arithmetic; f = m - 1 (exact).
// log(x) = e*ln2 + log1p(f), log1p(f) = f + f^2 Q(f), Q of degree 9 (weighted minimax).
// e*ln2hi16 + f is summed exactly (Fast2Sum); the tail collects the rounding error, the
// polynomial term and e*ln2lo16.
// Specials: log(NaN) = NaN, log(x<0) = NaN (including -inf), log(+-0) = -inf,
// log(+inf) = +inf, log(1) = +0.
// Measured max error: 0.83 ULP.
CNSR_HD float log(float x) {
  using namespace detail;
  const uint32_t ix = as_uint(x);
  const bool sub = ix < 0x00800000u;  // +0 or positive subnormal
  const float xs = select(sub, x * 0x1p23f, x);
  const int32_t eadj = sub ? -23 : 0;
  const uint32_t iy = as_uint(xs);
  constexpr uint32_t kSqrtHalfBits = 0x3F3504F3u;  // 0x1.6a09e6p-1f
  const uint32_t t = iy - kSqrtHalfBits;
  const int32_t e = (static_cast<int32_t>(t) >> 23) + eadj;
  const float m = as_float((t & 0x007FFFFFu) + kSqrtHalfBits);
  const float f = m - 1.0f;
  const float ef = small_int_to_float(e);
  float q = 0x1.147334p-4f;
  q = fma_rn(q, f, -0x1.de01d8p-4f);
  q = fma_rn(q, f, 0x1.e6c00ap-4f);
  q = fma_rn(q, f, -0x1.fc28cap-4f);
  q = fma_rn(q, f, 0x1.233ba2p-3f);
  q = fma_rn(q, f, -0x1.555c44p-3f);
  q = fma_rn(q, f, 0x1.99a476p-3f);
  q = fma_rn(q, f, -0x1.000006p-2f);
  q = fma_rn(q, f, 0x1.555548p-2f);
  q = fma_rn(q, f, -0x1.000000p-1f);
  const float hi = ef * kLn2Hi16;  // exact
  const float s = hi + f;
  const float lo = (hi - s) + f;  // exact error of s (|hi| >= |f| or hi == 0)
  const float f2 = f * f;
  const float tail = lo + fma_rn(f2, q, ef * kLn2Lo16);
  float y = s + tail;
  // Specials.
  y = select(ix > 0x7F800000u, canonical_nan(), y);               // NaN or x < 0 -> NaN
  y = select((ix & 0x7FFFFFFFu) == 0, as_float(0xFF800000u), y);  // +-0 -> -inf
  y = select(ix == 0x7F800000u, x, y);                            // +inf -> +inf
  return y;
}

// ---------------------------------------------------------------------------------------
// tanh(x).
// Algorithm on a = |x| (sign restored by OR-ing the sign bit of x, so tanh(-0) = -0):
//   a < 0.625: tanh(a) = a + a^3 P(a^2), P of degree 6 (weighted minimax);
//   otherwise: tanh(a) = 1 - 2 / (exp(2a) + 1)  (exp as above; 2a is exact; for
//              a >= 44.4 exp overflows to +inf and the result is exactly 1).
// Both branches are evaluated and selected (branch-free).
// Specials: tanh(NaN) = NaN, tanh(+-inf) = +-1, tanh(+-0) = +-0, subnormal x -> x.
// Measured max error: 1.35 ULP.
CNSR_HD float tanh(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  const float a2 = a * a;
  float p = -0x1.28074ap-10f;
  p = fma_rn(p, a2, 0x1.e1ea6cp-9f);
  p = fma_rn(p, a2, -0x1.26ab88p-7f);
  p = fma_rn(p, a2, 0x1.670a5cp-6f);
  p = fma_rn(p, a2, -0x1.ba29e0p-5f);
  p = fma_rn(p, a2, 0x1.11114ep-3f);
  p = fma_rn(p, a2, -0x1.555556p-2f);
  const float a3 = a2 * a;
  const float small = fma_rn(a3, p, a);
  const float e = exp(a + a);
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float y = select(a < 0.625f, small, big);
  const float r = as_float(as_uint(y) | sign);
  return select(is_nan(x), canonical_nan(), r);
}

// ---------------------------------------------------------------------------------------
// sigmoid(x) := 1.0f / (1.0f + exp(-x)), exactly this sequence (exp is detmath::exp),
// then NaN canonicalized. sigmoid(-inf) = +0, sigmoid(+inf) = 1.
CNSR_HD float sigmoid(float x) {
  const float e = exp(-x);
  const float y = 1.0f / (1.0f + e);
  return canonicalize_nan(y);
}

// ---------------------------------------------------------------------------------------
// erf(x).
// Algorithm on a = |x| (sign restored by OR, so erf(-0) = -0):
//   a < 1: erf(a) = a + a Q(a^2), Q of degree 7 (weighted minimax);
//   a >= 1: erf(a) = 1 - exp(P(u)), u = min(a,4) - c (exact), with P approximating
//           log(erfc(x)) of degree 9 on two pieces: c = 1 for a < 2.25, c = 2.25 above
//           (coefficients selected per piece). For a >= 3.92 the result rounds to 1.
// Specials: erf(NaN) = NaN, erf(+-inf) = +-1, erf(+-0) = +-0.
// Measured max error: 0.991 ULP.
CNSR_HD float erf(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  // Small piece.
  const float t = a * a;
  float q = -0x1.238cdap-19f;
  q = fma_rn(q, t, 0x1.69b1b2p-14f);
  q = fma_rn(q, t, -0x1.a998eep-11f);
  q = fma_rn(q, t, 0x1.5482fep-8f);
  q = fma_rn(q, t, -0x1.b8044ep-6f);
  q = fma_rn(q, t, 0x1.ce2d74p-4f);
  q = fma_rn(q, t, -0x1.812740p-2f);
  q = fma_rn(q, t, 0x1.06eba8p-3f);
  const float small = fma_rn(a, q, a);
  // Large pieces.
  const bool lo_piece = a < 2.25f;
  const float ac = select(a < 4.0f, a, 4.0f);  // also maps +inf to 4
  const float u = ac - select(lo_piece, 1.0f, 2.25f);
  float p = select(lo_piece, 0x1.09d6aap-7f, 0x1.258644p-5f);
  p = fma_rn(p, u, select(lo_piece, -0x1.455ca2p-5f, -0x1.8a9254p-3f));
  p = fma_rn(p, u, select(lo_piece, 0x1.460e2ap-4f, 0x1.a7b3fcp-2f));
  p = fma_rn(p, u, select(lo_piece, -0x1.585578p-4f, -0x1.d4906ep-2f));
  p = fma_rn(p, u, select(lo_piece, 0x1.9026dep-5f, 0x1.1ec43cp-2f));
  p = fma_rn(p, u, select(lo_piece, -0x1.e96910p-8f, -0x1.7c7c4ep-4f));
  p = fma_rn(p, u, select(lo_piece, -0x1.39a2f6p-5f, 0x1.02250ap-8f));
  p = fma_rn(p, u, select(lo_piece, -0x1.afd274p-1f, -0x1.df661cp-1f));
  p = fma_rn(p, u, select(lo_piece, -0x1.51c95ep+1f, -0x1.3880f0p+2f));
  p = fma_rn(p, u, select(lo_piece, -0x1.d97fc0p+0f, -0x1.a1c1e8p+2f));
  const float big = 1.0f - exp(p);
  const float y = select(a < 1.0f, small, big);
  const float r = as_float(as_uint(y) | sign);
  return select(is_nan(x), canonical_nan(), r);
}

// gelu_erf(x) := t = x * 0x1.6a09e6p-1f (0.70710678118654752f); e = erf(t);
//               return (0.5f * x) * (1.0f + e);   then NaN canonicalized.
// Note: gelu_erf(-inf) = (-inf) * 0 = NaN by this definition.
CNSR_HD float gelu_erf(float x) {
  const float t = x * 0.70710678118654752f;
  const float e = erf(t);
  const float y = (0.5f * x) * (1.0f + e);
  return canonicalize_nan(y);
}

// gelu_tanh(x) := u = x*x; u = u*x; inner = x + 0.044715f*u;
//                 inner = 0.7978845608028654f*inner;
//                 return (0.5f*x) * (1.0f + tanh(inner));   then NaN canonicalized.
// Every operator is one rounded float op (no fusion). gelu_tanh(-inf) = NaN.
CNSR_HD float gelu_tanh(float x) {
  float u = x * x;
  u = u * x;
  float inner = x + 0.044715f * u;
  inner = 0.7978845608028654f * inner;
  const float y = (0.5f * x) * (1.0f + tanh(inner));
  return canonicalize_nan(y);
}

// rsqrt(x) := 1.0f / sqrt(x) (correctly rounded sqrt, then correctly rounded division),
// NaN canonicalized. rsqrt(+0) = +inf, rsqrt(-0) = -inf, rsqrt(x<0) = NaN, rsqrt(inf) = 0.
CNSR_HD float rsqrt(float x) { return canonicalize_nan(1.0f / sqrt_rn(x)); }

// ---------------------------------------------------------------------------------------
// sin / cos.
namespace detail {

// Bits of 2/pi after the binary point, preceded by one zero word (so that the window
// arithmetic below never needs a negative index). Derived with exact integer arithmetic
// in scripts/fit_detmath.py. Host and device read the same numbers.
#define CNSR_DETMATH_TWO_OVER_PI_WORDS \
  0x00000000u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u
#if defined(__CUDACC__)
static __device__ __constant__ const uint32_t kTwoOverPiDev[9] = {CNSR_DETMATH_TWO_OVER_PI_WORDS};
#endif
inline constexpr uint32_t kTwoOverPiHost[9] = {CNSR_DETMATH_TWO_OVER_PI_WORDS};

CNSR_HD uint32_t two_over_pi_word(uint32_t i) {
#if defined(__CUDA_ARCH__)
  return kTwoOverPiDev[i];
#else
  return kTwoOverPiHost[i];
#endif
}

CNSR_HD int clz64(uint64_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(v));
#else
  return __builtin_clzll(v);
#endif
}

CNSR_HD uint32_t window32(uint32_t q, uint32_t sh) {  // 32 bits of the table from bit 32q+sh
  const uint64_t two = (static_cast<uint64_t>(two_over_pi_word(q)) << 32) | two_over_pi_word(q + 1);
  return static_cast<uint32_t>(two >> (32 - sh));
}

inline constexpr float kPio2Hi = 0x1.921fb6p+0f;
inline constexpr float kPio2Lo = -0x1.777a5cp-25f;

struct Reduced {
  uint32_t q;    // quadrant mod 4
  float rh, rl;  // a - q*pi/2 = rh + rl (|rl| <= ulp(rh)/2), |rh| <= pi/4 (+tiny)
};

// Reduction of finite a >= 0 modulo pi/2, Payne-Hanek style in integer arithmetic for
// a >= pi/4 (all exponents, no Cody-Waite path); a < pi/4 is returned as is.
// a = m * 2^e (m 24-bit integer). With the window W of 96 bits of 2/pi starting at bit
// e-1 after the binary point, a*2/pi == m*W*2^-94 (mod 4) with an error below 2^-70.
// The 64 bits of m*W from 2^95 down to 2^32 give a*2/pi mod 4 in fixed point with 62
// fraction bits (truncation error < 2^-61). Round to the nearest quadrant, normalize the
// signed remainder with clz, take 48 bits as a float pair and multiply by pi/2 in
// double-float arithmetic.
CNSR_HD Reduced reduce_pio2(float a) {
  const uint32_t ia = as_uint(a);
  uint32_t be = ia >> 23;      // biased exponent
  be = be < 126u ? 126u : be;  // a < 0.5 takes the other path; keep indices valid
  be = be > 254u ? 254u : be;  // inf/NaN: garbage, replaced by the caller
  const uint32_t m = (ia & 0x007FFFFFu) | 0x00800000u;
  const uint32_t p0 = be - 150u + 30u;  // table bit position of 2/pi bit (e-1); e = be-150
  const uint32_t qw = p0 >> 5, sh = p0 & 31u;
  const uint32_t w0 = window32(qw, sh);
  const uint32_t w1 = window32(qw + 1, sh);
  const uint32_t w2 = window32(qw + 2, sh);
  const uint64_t m64 = m;
  const uint64_t hi64 = ((m64 * w0) << 32) + m64 * w1 + ((m64 * w2) >> 32);
  const uint64_t qq = (hi64 + (uint64_t{1} << 61)) >> 62;
  const int64_t rem = static_cast<int64_t>(hi64 - (qq << 62));  // in [-2^61, 2^61)
  const uint64_t neg = rem < 0 ? 1u : 0u;
  const uint64_t ua = neg ? uint64_t{0} - static_cast<uint64_t>(rem) : static_cast<uint64_t>(rem);
  const int n = clz64(ua | 1u);
  const uint64_t v = ua << n;  // leading one at bit 63 (unless ua == 0)
  // |rem| * 2^-62 = v * 2^(-62-n); hi takes bits 63..40, lo bits 39..16.
  const uint32_t hm = static_cast<uint32_t>(v >> 40);
  const float fh = as_float((static_cast<uint32_t>(128 - n) << 23) | (hm & 0x007FFFFFu));
  const float fl = static_cast<float>(static_cast<int32_t>((v >> 16) & 0xFFFFFFu)) *
                   pow2i(-46 - n);  // exact: 24-bit integer times a normal power of two
  const float fhz = ua == 0 ? 0.0f : fh;
  // (fhz + fl) * (kPio2Hi + kPio2Lo)
  const float ph = fhz * kPio2Hi;
  const float pe = fma_rn(fhz, kPio2Hi, -ph);
  const float pl = pe + fma_rn(fhz, kPio2Lo, fl * kPio2Hi);
  float rh = ph + pl;
  float rl = pl - (rh - ph);
  const uint32_t sgn = neg ? 0x80000000u : 0u;
  rh = as_float(as_uint(rh) ^ sgn);
  rl = as_float(as_uint(rl) ^ sgn);
  const bool tiny = a < 0x1.921fb6p-1f;  // a < pi/4 (rounded up)
  Reduced out;
  out.q = tiny ? 0u : static_cast<uint32_t>(qq & 3u);
  out.rh = tiny ? a : rh;
  out.rl = tiny ? 0.0f : rl;
  return out;
}

// sin(rh + rl) for |rh| <= pi/4: rh + (rh^3 S(rh^2) + rl (1 - rh^2/2)), S degree 3.
CNSR_HD float sin_poly(float rh, float rl) {
  const float t = rh * rh;
  float s = 0x1.7c2da4p-19f;
  s = fma_rn(s, t, -0x1.a05956p-13f);
  s = fma_rn(s, t, 0x1.111174p-7f);
  s = fma_rn(s, t, -0x1.555556p-3f);
  const float rl2 = fma_rn(-0.5f * t, rl, rl);
  return rh + fma_rn(rh * t, s, rl2);
}

// cos(rh + rl) for |rh| <= pi/4:
// 1 - rh^2/2 + rh^4 C(rh^2) - rh*rl, with 1 - rh^2/2 evaluated as an exact pair.
CNSR_HD float cos_poly(float rh, float rl) {
  const float t = rh * rh;
  const float tl = fma_rn(rh, rh, -t);  // exact error of t
  const float hx = 0.5f * t;
  const float w = 1.0f - hx;
  const float c1 = (1.0f - w) - hx;  // exact error of w
  float c = -0x1.361c24p-22f;
  c = fma_rn(c, t, 0x1.a071c6p-16f);
  c = fma_rn(c, t, -0x1.6c175ep-10f);
  c = fma_rn(c, t, 0x1.555556p-5f);
  const float corr = c1 - fma_rn(rh, rl, 0.5f * tl);
  return w + fma_rn(t * t, c, corr);
}

}  // namespace detail

// sin(x).
// Algorithm: a = |x|; reduce a modulo pi/2 (detail::reduce_pio2: exact integer
// Payne-Hanek for every a >= pi/4, giving r = rh + rl); quadrant q selects
// +-sin_poly / +-cos_poly (both evaluated); the sign of x is XORed in at the end.
// Polynomials: sin degree 9 (S degree 3 in r^2), cos degree 10 (C degree 3 in r^2),
// weighted minimax. Specials: sin(+-0) = +-0, sin(+-inf) = NaN, sin(NaN) = NaN,
// subnormal x -> x.
// Measured max error: 0.72 ULP over the whole float range.
CNSR_HD float sin(float x) {
  using namespace detail;
  const uint32_t ix = as_uint(x);
  const float a = fabs_bits(x);
  const Reduced r = reduce_pio2(a);
  const float s = sin_poly(r.rh, r.rl);
  const float c = cos_poly(r.rh, r.rl);
  const float y = select((r.q & 1u) != 0u, c, s);
  const uint32_t flip = ((r.q & 2u) << 30) ^ (ix & 0x80000000u);
  const float out = xor_sign(y, flip);
  return select((ix & 0x7FFFFFFFu) >= 0x7F800000u, canonical_nan(), out);
}

// cos(x). Same reduction and polynomials as sin; quadrant q gives
// cos, -sin, -cos, sin. Specials: cos(+-0) = 1, cos(+-inf) = NaN, cos(NaN) = NaN.
// Measured max error: 0.72 ULP over the whole float range.
CNSR_HD float cos(float x) {
  using namespace detail;
  const uint32_t ix = as_uint(x);
  const float a = fabs_bits(x);
  const Reduced r = reduce_pio2(a);
  const float s = sin_poly(r.rh, r.rl);
  const float c = cos_poly(r.rh, r.rl);
  const float y = select((r.q & 1u) != 0u, s, c);
  const uint32_t flip = ((r.q + 1u) & 2u) << 30;
  const float out = xor_sign(y, flip);
  return select((ix & 0x7FFFFFFFu) >= 0x7F800000u, canonical_nan(), out);
}

// ---------------------------------------------------------------------------------------
// pow(x, y).
namespace detail {

// log(a) as a double-float (hi + lo) with relative error ~2^-40, for finite a > 0
// (subnormals included). a = 2^e m, f = m - 1 as in log(); log1p(f) = 2 atanh(s),
// s = f / (2 + f) as a pair; 2 atanh(s) = 2s + (2/3)s^3 + s^5 R(s^2), R degree 3,
// with the first two terms in double-float arithmetic.
struct Pair {
  float hi, lo;
};

inline constexpr float k2Over3Hi = 0x1.555556p-1f;
inline constexpr float k2Over3Lo = -0x1.555556p-26f;

CNSR_HD Pair log_dd(float x) {
  const uint32_t ix = as_uint(x);
  const bool sub = ix < 0x00800000u;
  const float xs = select(sub, x * 0x1p23f, x);
  const int32_t eadj = sub ? -23 : 0;
  const uint32_t iy = as_uint(xs);
  constexpr uint32_t kSqrtHalfBits = 0x3F3504F3u;
  const uint32_t t = iy - kSqrtHalfBits;
  const int32_t e = (static_cast<int32_t>(t) >> 23) + eadj;
  const float m = as_float((t & 0x007FFFFFu) + kSqrtHalfBits);
  const float f = m - 1.0f;
  const float ef = small_int_to_float(e);
  // s = f / (2 + f) as sh + sl.
  const float dh = 2.0f + f;
  const float dl = (2.0f - dh) + f;
  const float sh = f / dh;
  const float e1 = fma_rn(-sh, dh, f);  // exact remainder
  const float sl = (e1 - sh * dl) / dh;
  // s^2, s^3 as pairs.
  const float s2h = sh * sh;
  const float s2l = fma_rn(sh, sh, -s2h) + 2.0f * (sh * sl);
  const float s3h = s2h * sh;
  const float s3l = fma_rn(s2h, sh, -s3h) + fma_rn(s2l, sh, s2h * sl);
  // (2/3) s^3 as a pair.
  const float vh = s3h * k2Over3Hi;
  const float vl = fma_rn(s3h, k2Over3Hi, -vh) + fma_rn(s3l, k2Over3Hi, s3h * k2Over3Lo);
  // s^5 R(s^2).
  float rr = 0x1.9083fap-3f;
  rr = fma_rn(rr, s2h, 0x1.c63da8p-3f);
  rr = fma_rn(rr, s2h, 0x1.2493b6p-2f);
  rr = fma_rn(rr, s2h, 0x1.999998p-2f);
  const float w = (s3h * s2h) * rr;
  // log1p(f) = 2sh + vh + (2sl + vl + w)
  const float a2 = 2.0f * sh;
  const float h1 = a2 + vh;
  const float l1 = ((a2 - h1) + vh) + (2.0f * sl + (vl + w));
  // + e ln2: e*kLn2Hi16 exact, e*kLn2Lo16 as an exact pair, e*kLn2Lo16b rounded.
  const float lh = ef * kLn2Hi16;
  const float lm = ef * kLn2Lo16;
  const float lme = fma_rn(ef, kLn2Lo16, -lm);
  const float h2 = lh + h1;
  const float l2 = (lh - h2) + h1;  // exact (|lh| >= |h1| or lh == 0)
  const float lo = l2 + (l1 + (lm + (lme + ef * kLn2Lo16b)));
  Pair out;
  out.hi = h2 + lo;
  out.lo = lo - (out.hi - h2);
  return out;
}

}  // namespace detail

// pow(x, y) with ONNX / numpy / C99 Annex F special cases.
// Algorithm (general case): |x|^y = exp(y * log|x|), with log|x| from detail::log_dd as a
// pair, the product y*log|x| as a pair (ph = y*lh, pl = fma(y,lh,-ph) + y*ll), and
// detail::exp_core(ph, pl); the sign is negative iff x < 0 and y is an odd integer.
// Special cases, in priority order:
//   y == +-0            -> 1 (even for NaN x)
//   x == 1              -> 1 (even for NaN y)
//   x or y NaN          -> NaN
//   y == +-inf          -> |x| == 1: 1; |x| < 1: +0 for +inf, +inf for -inf;
//                          |x| > 1: +inf for +inf, +0 for -inf
//   x == +-0            -> y < 0: +-inf if y is an odd integer (sign of x) else +inf;
//                          y > 0: +-0 if y is an odd integer (sign of x) else +0
//   x == +-inf          -> y < 0: -0 if x = -inf and y odd integer, else +0;
//                          y > 0: -inf if x = -inf and y odd integer, else +inf
//   x < 0 finite, y finite non-integer -> NaN
// Measured max error: 0.94 ULP for normal results, 0.84 ULP (units of 2^-149) for
// subnormal results, on ~6 million sampled pairs (see PowAccuracy in the test; the test
// asserts 1 ULP). Exact cases such as pow(2,10), pow(3,5), pow(4,0.5) are exact.
CNSR_HD float pow(float x, float y) {
  using namespace detail;
  const uint32_t ix = as_uint(x), iy = as_uint(y);
  const uint32_t ax = ix & 0x7FFFFFFFu, ay = iy & 0x7FFFFFFFu;
  const float absx = as_float(ax);
  // Integer / odd-integer classification of y.
  const int32_t ey = static_cast<int32_t>(ay >> 23) - 127;  // unbiased exponent of y
  const int32_t ec = ey < 0 ? 0 : (ey > 23 ? 23 : ey);      // clamped: shifts stay valid
  const uint32_t my = (ay & 0x007FFFFFu) | 0x00800000u;
  const uint32_t fracmask = 0x00FFFFFFu >> (ec + 1);  // mantissa bits below 2^0 when ey=ec
  const bool y_int = (ey >= 23) | ((ey >= 0) & ((my & fracmask) == 0u)) | (ay == 0u);
  const bool y_odd = (ey >= 0) & (ey <= 23) & y_int & (((my >> (23 - ec)) & 1u) != 0u);
  // General case.
  const Pair l = log_dd(absx);
  const float ph0 = y * l.hi;
  const float pl0 = fma_rn(y, l.hi, -ph0) + y * l.lo;
  const bool in_range = ph0 >= -105.0f && ph0 <= 89.0f;  // false for NaN
  const float ph = in_range ? ph0 : (ph0 > 0.0f ? 89.0f : -105.0f);
  const float pl = in_range ? pl0 : 0.0f;
  const float mag = exp_core(ph, pl);
  const bool xneg = (ix >> 31) != 0;
  const float gen = (xneg && y_odd) ? -mag : mag;
  const float inf = as_float(0x7F800000u);
  const uint32_t xsign_if_odd = y_odd ? (ix & 0x80000000u) : 0u;
  const bool ypos = (iy >> 31) == 0;
  float r = gen;
  // x negative finite, y non-integer finite -> NaN.
  r = (xneg && !y_int) ? canonical_nan() : r;
  // x == +-inf.
  r = ax == 0x7F800000u ? as_float((ypos ? 0x7F800000u : 0u) | xsign_if_odd) : r;
  // x == +-0.
  r = ax == 0u ? as_float((ypos ? 0u : 0x7F800000u) | xsign_if_odd) : r;
  // y == +-inf.
  const float yinf_val = ax == 0x3F800000u ? 1.0f : (((ax < 0x3F800000u) == ypos) ? 0.0f : inf);
  r = ay == 0x7F800000u ? yinf_val : r;
  // NaNs.
  r = (ax > 0x7F800000u || ay > 0x7F800000u) ? canonical_nan() : r;
  r = ix == 0x3F800000u ? 1.0f : r;
  r = ay == 0u ? 1.0f : r;
  return r;
}

// ---------------------------------------------------------------------------------------
// Rounding to an integral value and the exact remainder (DETERMINISM.md section 5.12).
// Each result is a float that exists exactly, so these are pure bit and integer
// manipulation: no floating-point operation, and no rounding error to agree on.

enum class IntegralMode { kFloor, kCeil, kHalfEven };

// x rounded to an integral float by `mode`. A zero result keeps the sign of x
// (floor(+0.3) = +0, ceil(-0.3) = -0, round(-0.5) = -0); +-0, +-inf and every |x| >= 2^23
// are returned unchanged; NaN -> canonical NaN.
CNSR_HD float round_integral(float x, IntegralMode mode) {
  const uint32_t u = as_uint(x);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t mag = u & 0x7FFFFFFFu;
  const bool negative = sign != 0u;
  if (mag > 0x7F800000u) return canonical_nan();
  if (mag >= 0x4B000000u || mag == 0u) return x;  // |x| >= 2^23 (inf included) or +-0
  // Whether the magnitude moves up to the next integer when x is not integral.
  const bool up_if_inexact =
      mode == IntegralMode::kFloor ? negative : (mode == IntegralMode::kCeil ? !negative : false);
  if (mag < 0x3F800000u) {  // 0 < |x| < 1: the result is +-0 or +-1
    bool up = up_if_inexact;
    if (mode == IntegralMode::kHalfEven) up = mag > 0x3F000000u;  // |x| > 0.5 (0.5 ties to 0)
    return as_float(sign | (up ? 0x3F800000u : 0u));
  }
  const uint32_t frac_bits = 150u - (mag >> 23);  // 1..23 fraction bits below the unit
  const uint32_t frac_mask = (1u << frac_bits) - 1u;
  const uint32_t frac = mag & frac_mask;
  if (frac == 0u) return x;
  const uint32_t truncated = mag & ~frac_mask;
  bool up = up_if_inexact;
  if (mode == IntegralMode::kHalfEven) {
    const uint32_t half = 1u << (frac_bits - 1u);
    const bool odd = ((truncated >> frac_bits) & 1u) != 0u;
    up = frac > half || (frac == half && odd);
  }
  // Adding one unit to the bit pattern carries into the exponent when needed (1.5 -> 2).
  return as_float(sign | (up ? truncated + (1u << frac_bits) : truncated));
}

CNSR_HD float floor(float x) { return round_integral(x, IntegralMode::kFloor); }
CNSR_HD float ceil(float x) { return round_integral(x, IntegralMode::kCeil); }
CNSR_HD float round_half_even(float x) { return round_integral(x, IntegralMode::kHalfEven); }

// C's fmod: x - trunc(x / y) * y computed exactly (the result always exists as a float),
// with the sign of x. NaN in, x infinite or y zero -> canonical NaN; y infinite -> x;
// a zero result keeps the sign of x. Binary long division on the significands: at most
// 277 shift-subtract steps.
CNSR_HD float fmod(float x, float y) {
  const uint32_t ux = as_uint(x), uy = as_uint(y);
  const uint32_t sign = ux & 0x80000000u;
  const uint32_t ax = ux & 0x7FFFFFFFu, ay = uy & 0x7FFFFFFFu;
  if (ax > 0x7F800000u || ay > 0x7F800000u || ax == 0x7F800000u || ay == 0u) return canonical_nan();
  if (ax < ay) return x;  // |x| < |y| (y = inf included): the quotient truncates to 0
  // Unpack to significand m (bit 23 set) and unbiased-plus-127 exponent e.
  int32_t ex = static_cast<int32_t>(ax >> 23), ey = static_cast<int32_t>(ay >> 23);
  uint32_t mx = ax & 0x007FFFFFu, my = ay & 0x007FFFFFu;
  if (ex == 0) {  // subnormal: normalize, letting the exponent go below 1
    ex = 1;
    while (mx < 0x00800000u) {
      mx <<= 1;
      --ex;
    }
  } else {
    mx |= 0x00800000u;
  }
  if (ey == 0) {
    ey = 1;
    while (my < 0x00800000u) {
      my <<= 1;
      --ey;
    }
  } else {
    my |= 0x00800000u;
  }
  // Invariant: mx < 2 * my < 2^25. Each step takes one more quotient bit.
  for (; ex > ey; --ex) {
    if (mx >= my) mx -= my;
    mx <<= 1;
  }
  if (mx >= my) mx -= my;
  if (mx == 0u) return as_float(sign);
  while (mx < 0x00800000u) {
    mx <<= 1;
    --ey;
  }
  if (ey >= 1) return as_float(sign | (static_cast<uint32_t>(ey) << 23) | (mx & 0x007FFFFFu));
  // Subnormal result: the remainder is a multiple of the smallest subnormal, so the
  // shift drops only zero bits.
  return as_float(sign | (mx >> static_cast<uint32_t>(1 - ey)));
}

// ---------------------------------------------------------------------------------------
// Inverse trigonometric and hyperbolic functions (DETERMINISM.md section 5.15). Each is a
// fixed composition of the functions above with one new polynomial (atan's); the errors
// quoted are measured against glibc's double functions (section 5.15 lists the sweep).

namespace detail {

inline constexpr float kPio4Hi = 0x1.921fb6p-1f;
inline constexpr float kPio4Lo = -0x1.777a5cp-26f;

// atan(u) for |u| <= tan(pi/8) (and any u where u^3 underflows): u + u^3 P(u^2), P of
// degree 4 fitted for relative error 0.05 ULP (coefficients rounded to float).
CNSR_HD float atan_poly(float u) {
  const float z = u * u;
  float p = -0x1.f1ed4ap-5f;
  p = fma_rn(p, z, 0x1.b1ec22p-4f);
  p = fma_rn(p, z, -0x1.23b522p-3f);
  p = fma_rn(p, z, 0x1.999196p-3f);
  p = fma_rn(p, z, -0x1.55554ap-2f);
  return fma_rn(u * z, p, u);
}

// log(1 + u) for u >= 0 (or u > -1): log of the rounded w = 1 + u, plus the first-order
// correction for the rounding of w, (u - (w - 1)) / w. log1p(+inf) = +inf.
CNSR_HD float log1p_nonneg(float u) {
  const float w = 1.0f + u;
  const float corr = (u - (w - 1.0f)) / w;
  const float y = log(w) + corr;
  return select(u == as_float(0x7F800000u), u, y);
}

inline constexpr float kAsinhBig = 0x1p12f;  // from here on, asinh(a) = log(a) + ln2 in float

}  // namespace detail

// atan(x). On a = |x|: t = a > 1 ? 1/a : a; u = t > tan(pi/8) ? (t - 1)/(t + 1) : t;
// r = atan_poly(u), plus pi/4 when u was shifted, then pi/2 - r when t was inverted (pi/4
// and pi/2 as a float pair, the low part added first); the sign of x is OR-ed back.
// Specials: atan(+-0) = +-0, atan(+-inf) = +-0x1.921fb6p+0, NaN -> NaN.
CNSR_HD float atan(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  const bool inv = a > 1.0f;
  const float t = select(inv, 1.0f / a, a);
  const bool mid = t > 0x1.a8279ap-2f;  // tan(pi/8) = 0.41421356
  const float u = select(mid, (t - 1.0f) / (t + 1.0f), t);
  const float r0 = atan_poly(u);
  const float r1 = select(mid, (r0 + kPio4Lo) + kPio4Hi, r0);
  const float r2 = select(inv, (kPio2Lo - r1) + kPio2Hi, r1);
  const float r = as_float(as_uint(r2) | sign);
  return select(is_nan(x), canonical_nan(), r);
}

// asin(x) = sign(x) * atan(a / sqrt((1 - a) * (1 + a))), a = |x|; asin(+-1) = +-pi/2
// (a / +0 = +inf); |x| > 1 and NaN -> NaN; asin(+-0) = +-0.
CNSR_HD float asin(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  const float d = sqrt_rn((1.0f - a) * (1.0f + a));
  const float r = as_float(as_uint(atan(a / d)) | sign);
  return select(a <= 1.0f, r, canonical_nan());  // false for NaN
}

// acos(x) = 2 * atan(sqrt((1 - x) / (1 + x))); acos(1) = +0, acos(-1) = 2 * pi/2 (the
// division gives +inf); |x| > 1 and NaN -> NaN.
CNSR_HD float acos(float x) {
  using namespace detail;
  const float r = 2.0f * atan(sqrt_rn((1.0f - x) / (1.0f + x)));
  return select(fabs_bits(x) <= 1.0f, r, canonical_nan());
}

// sinh(x) on a = |x|, sign OR-ed back:
//   a < 2:     a + a^3 P(a^2), P the Taylor coefficients 1/3! .. 1/15! rounded to float;
//   a < 88:    (e - 1/e) * 0.5 with e = exp(a);
//   otherwise: (0.5 * h) * h with h = exp(0.5 * a) (exp(a) would overflow first).
// Specials: sinh(+-0) = +-0, sinh(+-inf) = +-inf, NaN -> NaN; |x| > 89.4159851 -> +-inf.
CNSR_HD float sinh(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  const float z = a * a;
  float p = 0x1.ae7f3ep-41f;          // 1/15!
  p = fma_rn(p, z, 0x1.612462p-33f);  // 1/13!
  p = fma_rn(p, z, 0x1.ae6456p-26f);  // 1/11!
  p = fma_rn(p, z, 0x1.71de3ap-19f);  // 1/9!
  p = fma_rn(p, z, 0x1.a01a02p-13f);  // 1/7!
  p = fma_rn(p, z, 0x1.111112p-7f);   // 1/5!
  p = fma_rn(p, z, 0x1.555556p-3f);   // 1/3!
  const float small = fma_rn(a * z, p, a);
  const float e = exp(a);
  const float mid = (e - 1.0f / e) * 0.5f;
  const float h = exp(0.5f * a);
  const float big = (0.5f * h) * h;
  const float y = select(a < 2.0f, small, select(a < 88.0f, mid, big));
  const float r = as_float(as_uint(y) | sign);
  return select(is_nan(x), canonical_nan(), r);
}

// cosh(x) on a = |x|: a < 88: (e + 1/e) * 0.5 with e = exp(a); otherwise (0.5 * h) * h
// with h = exp(0.5 * a). cosh(+-0) = 1, cosh(+-inf) = +inf, NaN -> NaN.
CNSR_HD float cosh(float x) {
  using namespace detail;
  const float a = fabs_bits(x);
  const float e = exp(a);
  const float mid = (e + 1.0f / e) * 0.5f;
  const float h = exp(0.5f * a);
  const float big = (0.5f * h) * h;
  const float y = select(a < 88.0f, mid, big);
  return select(is_nan(x), canonical_nan(), y);
}

// asinh(x) on a = |x|, sign OR-ed back:
//   a < 2^12:  log1p(a + a^2 / (1 + sqrt(1 + a^2)))   (detail::log1p_nonneg);
//   otherwise: log(a) + ln2 (ln2 = 0x1.62e430p-1f).
// asinh(+-0) = +-0, asinh(+-inf) = +-inf, NaN -> NaN.
CNSR_HD float asinh(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  const float a2 = a * a;
  const float small = log1p_nonneg(a + a2 / (1.0f + sqrt_rn(1.0f + a2)));
  const float big = log(a) + kLn2Hi;
  const float y = select(a < kAsinhBig, small, big);
  const float r = as_float(as_uint(y) | sign);
  return select(is_nan(x), canonical_nan(), r);
}

// acosh(x) for x >= 1: t = x - 1; x < 2^12: log1p(t + sqrt(t * (t + 2))); otherwise
// log(x) + ln2. acosh(1) = +0, acosh(+inf) = +inf; x < 1 (-0, -inf included) and NaN -> NaN.
CNSR_HD float acosh(float x) {
  using namespace detail;
  const float t = x - 1.0f;
  const float small = log1p_nonneg(t + sqrt_rn(t * (t + 2.0f)));
  const float big = log(x) + kLn2Hi;
  const float y = select(x < kAsinhBig, small, big);
  return select(x >= 1.0f, y, canonical_nan());  // false for NaN
}

// atanh(x) = sign(x) * 0.5 * log1p((a + a) / (1 - a)), a = |x|; atanh(+-1) = +-inf,
// atanh(+-0) = +-0, |x| > 1 and NaN -> NaN.
CNSR_HD float atanh(float x) {
  using namespace detail;
  const uint32_t sign = as_uint(x) & 0x80000000u;
  const float a = fabs_bits(x);
  const float y = 0.5f * log1p_nonneg((a + a) / (1.0f - a));
  const float r = as_float(as_uint(y) | sign);
  return select(a <= 1.0f, r, canonical_nan());
}

// x^e for integers of one type T (DETERMINISM.md section 4.2): for e >= 0 the exact power
// modulo 2^n (read in T), 0^0 = 1; for a negative e (signed T) the quotient 1 / x^|e|
// truncated toward zero: 1 for x = 1, -1 or 1 for x = -1 (odd or even e), 0 otherwise
// (x = 0 included, as division by zero gives 0 in section 1). Square-and-multiply in
// uint64 arithmetic (wrapping, so the low n bits are exact).
template <typename T>
CNSR_HD T int_pow(T x, T e) {
  const bool negative_e = static_cast<T>(-1) < static_cast<T>(0) && e < static_cast<T>(0);
  uint64_t r = 1u, b = static_cast<uint64_t>(x), ue = static_cast<uint64_t>(e);
  for (int i = 0; i < 64 && !negative_e; ++i) {
    if ((ue & 1u) != 0u) r *= b;
    b *= b;
    ue >>= 1;
  }
  const T pos = static_cast<T>(r);
  const bool odd = (static_cast<uint64_t>(e) & 1u) != 0u;
  const T neg = x == static_cast<T>(1)
                    ? static_cast<T>(1)
                    : (x == static_cast<T>(-1) ? (odd ? static_cast<T>(-1) : static_cast<T>(1)) : static_cast<T>(0));
  return negative_e ? neg : pos;
}

}  // namespace consensor::detmath
