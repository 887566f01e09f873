// kernels/detmath64.h: the float64 rules of docs/DETERMINISM.md (section 1.2) that are not
// a single IEEE binary64 operation: NaN canonicalization, rounding to an integral value and
// the exact remainder. Like kernels/detmath.h these are bit and integer manipulation with
// no rounding error to agree on. The transcendental f64 functions are not defined here:
// they go through the f32 detmath with the documented casts (section 1.2).
#pragma once

#include <cstdint>

#include "kernels/detmath.h"

namespace consensor::detmath {

inline constexpr uint64_t kCanonicalNaN64Bits = 0x7FF8000000000000ull;

inline uint64_t as_uint64(double x) { return __builtin_bit_cast(uint64_t, x); }
inline double as_double(uint64_t u) { return __builtin_bit_cast(double, u); }
inline bool is_nan64(double x) { return (as_uint64(x) & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull; }
inline double canonical_nan64() { return as_double(kCanonicalNaN64Bits); }
// Any NaN -> 0x7FF8000000000000; every other value unchanged (including -0).
inline double canonicalize_nan64(double x) { return is_nan64(x) ? canonical_nan64() : x; }

// Correctly rounded binary64 square root (one IEEE operation).
inline double sqrt_rn64(double x) { return __builtin_sqrt(x); }

// x rounded to an integral double by `mode`; the binary64 twin of round_integral: a zero
// result keeps the sign of x, +-0, +-inf and every |x| >= 2^52 are returned unchanged, NaN
// -> canonical NaN.
inline double round_integral64(double x, IntegralMode mode) {
  const uint64_t u = as_uint64(x);
  const uint64_t sign = u & 0x8000000000000000ull;
  const uint64_t mag = u & 0x7FFFFFFFFFFFFFFFull;
  const bool negative = sign != 0u;
  if (mag > 0x7FF0000000000000ull) return canonical_nan64();
  if (mag >= 0x4330000000000000ull || mag == 0u) return x;  // |x| >= 2^52 (inf included) or +-0
  const bool up_if_inexact =
      mode == IntegralMode::kFloor ? negative : (mode == IntegralMode::kCeil ? !negative : false);
  if (mag < 0x3FF0000000000000ull) {  // 0 < |x| < 1: the result is +-0 or +-1
    bool up = up_if_inexact;
    if (mode == IntegralMode::kHalfEven) up = mag > 0x3FE0000000000000ull;  // |x| > 0.5
    return as_double(sign | (up ? 0x3FF0000000000000ull : 0u));
  }
  const uint64_t frac_bits = 1075u - (mag >> 52);  // 1..52 fraction bits below the unit
  const uint64_t frac_mask = (uint64_t{1} << frac_bits) - 1u;
  const uint64_t frac = mag & frac_mask;
  if (frac == 0u) return x;
  const uint64_t truncated = mag & ~frac_mask;
  bool up = up_if_inexact;
  if (mode == IntegralMode::kHalfEven) {
    const uint64_t half = uint64_t{1} << (frac_bits - 1u);
    const bool odd = ((truncated >> frac_bits) & 1u) != 0u;
    up = frac > half || (frac == half && odd);
  }
  return as_double(sign | (up ? truncated + (uint64_t{1} << frac_bits) : truncated));
}

inline double floor64(double x) { return round_integral64(x, IntegralMode::kFloor); }
inline double ceil64(double x) { return round_integral64(x, IntegralMode::kCeil); }
inline double round_half_even64(double x) { return round_integral64(x, IntegralMode::kHalfEven); }

// C's fmod on binary64, exact, by the same long division as the f32 fmod: NaN in, x
// infinite or y zero -> canonical NaN; y infinite -> x; a zero result keeps x's sign.
inline double fmod64(double x, double y) {
  const uint64_t ux = as_uint64(x), uy = as_uint64(y);
  const uint64_t sign = ux & 0x8000000000000000ull;
  const uint64_t ax = ux & 0x7FFFFFFFFFFFFFFFull, ay = uy & 0x7FFFFFFFFFFFFFFFull;
  constexpr uint64_t kInf = 0x7FF0000000000000ull, kHidden = 0x0010000000000000ull;
  if (ax > kInf || ay > kInf || ax == kInf || ay == 0u) return canonical_nan64();
  if (ax < ay) return x;
  int64_t ex = static_cast<int64_t>(ax >> 52), ey = static_cast<int64_t>(ay >> 52);
  uint64_t mx = ax & (kHidden - 1u), my = ay & (kHidden - 1u);
  if (ex == 0) {
    ex = 1;
    while (mx < kHidden) {
      mx <<= 1;
      --ex;
    }
  } else {
    mx |= kHidden;
  }
  if (ey == 0) {
    ey = 1;
    while (my < kHidden) {
      my <<= 1;
      --ey;
    }
  } else {
    my |= kHidden;
  }
  // Invariant: mx < 2 * my < 2^54.
  for (; ex > ey; --ex) {
    if (mx >= my) mx -= my;
    mx <<= 1;
  }
  if (mx >= my) mx -= my;
  if (mx == 0u) return as_double(sign);
  while (mx < kHidden) {
    mx <<= 1;
    --ey;
  }
  if (ey >= 1) return as_double(sign | (static_cast<uint64_t>(ey) << 52) | (mx & (kHidden - 1u)));
  return as_double(sign | (mx >> static_cast<uint64_t>(1 - ey)));
}

}  // namespace consensor::detmath
