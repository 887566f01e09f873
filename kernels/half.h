// kernels/half.h: the exact conversions between f32 and the 16-bit floats f16 (IEEE binary16)
// and bf16 (bfloat16) of docs/DETERMINISM.md sections 1.3 and 1.4. Integer bit manipulation
// only, so the host and the device agree without an FPU rounding mode to trust; one source
// for every backend and for the importer. The f32 bit casts are detmath's (one host/device
// definition).
#pragma once

#include <cstdint>

#include "kernels/detmath.h"
#include "kernels/hd.h"

namespace consensor::half {

inline constexpr uint16_t kCanonicalNaNF16 = 0x7E00;   // positive quiet NaN, zero payload
inline constexpr uint16_t kCanonicalNaNBF16 = 0x7FC0;  // the top half of f32's 0x7FC00000
inline constexpr uint32_t kCanonicalNaNF32 = detmath::kCanonicalNaNBits;

// f16 -> f32 is exact: every binary16 value is a binary32 value. A NaN becomes f32's
// canonical NaN (the f32 value is an op operand, and every op output canonicalizes anyway).
CNSR_HD float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return detmath::as_float(mantissa != 0 ? kCanonicalNaNF32 : (sign | 0x7F800000u));
  if (exponent == 0) {
    if (mantissa == 0) return detmath::as_float(sign);
    // Subnormal m * 2^-24: shift the leading one up to the implicit bit.
    uint32_t e32 = 113;  // biased f32 exponent of 2^-14
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e32;
    }
    return detmath::as_float(sign | (e32 << 23) | ((mantissa & 0x3FFu) << 13));
  }
  return detmath::as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// f32 -> f16, round to nearest even: overflow (|x| >= 65520) gives +-inf, results below
// 2^-14 are subnormal (ties to even, |x| <= 2^-25 gives +-0), NaN gives 0x7E00.
CNSR_HD uint16_t F32ToF16(float x) {
  const uint32_t u = detmath::as_uint(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return kCanonicalNaNF16;
  if (mag >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 65520 and up, inf included
  if (mag < 0x38800000u) {                                               // below 2^-14
    if (mag <= 0x33000000u) return static_cast<uint16_t>(sign);          // <= 2^-25: ties to +-0
    const uint32_t significand = (mag & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - (mag >> 23);  // 14..24: value * 2^24 = significand >> shift
    uint32_t m = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (m & 1u))) ++m;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = (((mag >> 23) - 112u) << 10) | ((mag >> 13) & 0x3FFu);
  const uint32_t rest = mag & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry steps the exponent up
  return static_cast<uint16_t>(sign | h);
}

// bf16 -> f32 is exact (bf16 is the top half of a binary32); a NaN becomes f32's canonical NaN.
CNSR_HD float BF16ToF32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  return detmath::as_float((u & 0x7FFFFFFFu) > 0x7F800000u ? kCanonicalNaNF32 : u);
}

// f32 -> bf16, round to nearest even on the low 16 bits: overflow gives +-inf, subnormals are
// rounded like any other value, NaN gives 0x7FC0.
CNSR_HD uint16_t F32ToBF16(float x) {
  const uint32_t u = detmath::as_uint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return kCanonicalNaNBF16;
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);  // cannot wrap: |x| <= inf here
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace consensor::half
