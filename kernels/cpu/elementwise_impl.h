// The elementwise kernels (docs/DETERMINISM.md sections 1 and 4.2), written once and
// compiled twice: by elementwise.cc for the portable baseline and by elementwise_avx2.cc
// with -mavx2 -mfma. The loops are plain scalar C++ that the compiler auto-vectorizes;
// with -ffp-contract=off and no fast-math every lane performs exactly the IEEE operation
// sequence written here, so both builds (and any thread split) produce identical bits.
//
// Linkage discipline: all functions below are in an unnamed namespace (internal linkage),
// and the per-chunk workers are __attribute__((flatten)) so that every helper they call,
// including the inline functions of kernels/detmath.h, is inlined into the TU-local copy.
// Otherwise the linker could pick the AVX2 TU's out-of-line copy of an inline function for
// the portable path. The only cross-TU entry points are EwRunChunkPortable/EwRunChunkAvx2.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/dtype.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/detmath.h"
#include "kernels/detmath64.h"
#include "kernels/op.h"

#if defined(__GNUC__)
#define CNSR_EW_FLATTEN __attribute__((flatten))
#define CNSR_EW_INLINE inline __attribute__((always_inline))
#else
#define CNSR_EW_FLATTEN
#define CNSR_EW_INLINE inline
#endif

namespace consensor::kernels::cpu {

// A validated elementwise call, ready to run on any output range. Built by
// elementwise.cc; operand k of `layout` is input k (the output is contiguous).
struct EwPlan {
  Op op = Op::kNumOps;
  DType in_dtype = DType::kInvalid;  // dtype of the value operands (a and b for where)
  DType out_dtype = DType::kInvalid;
  int num_inputs = 0;
  StridedLayout layout;
  const void* in[3] = {};
  void* out = nullptr;
};

// Computes output elements [begin, end) of a plan. The AVX2 one may only be called when
// CpuHasAvx2Fma() is true.
void EwRunChunkPortable(const EwPlan& plan, int64_t begin, int64_t end);
void EwRunChunkAvx2(const EwPlan& plan, int64_t begin, int64_t end);
// relu of n 16-bit floats on their bits (elementwise.cc's RunReluHalf): `infinity` is the type's
// +inf pattern, `nan` its canonical NaN. The AVX2 one may only be called when CpuHasAvx2Fma().
void ReluHalfBitsPortable(const uint16_t* x, uint16_t* y, int64_t n, uint16_t infinity, uint16_t nan);
void ReluHalfBitsAvx2(const uint16_t* x, uint16_t* y, int64_t n, uint16_t infinity, uint16_t nan);

namespace {

// Branch-free, so that it vectorizes: a NaN (magnitude above +inf) gives `nan`, a set sign bit
// (-0 and every negative value) gives +0, anything else (+0, positive values, +inf) itself.
inline void ReluHalfBitsImpl(const uint16_t* x, uint16_t* y, int64_t n, uint16_t infinity, uint16_t nan) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = x[i];
    const uint16_t is_nan = static_cast<uint16_t>(0u - static_cast<uint16_t>((h & 0x7FFFu) > infinity));
    const uint16_t keep = static_cast<uint16_t>((h >> 15) - 1u);  // 0xFFFF when the sign bit is clear
    y[i] = static_cast<uint16_t>((is_nan & nan) | (~is_nan & keep & h));
  }
}

// ---------------------------------------------------------------------------------------
// Scalar semantics.

constexpr uint32_t kCanonicalNaNBits = 0x7FC00000u;

// DTypeSize, kept TU-local (see the linkage note at the top).
CNSR_EW_INLINE int EwElemSize(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 1;
    case DType::kI16:
    case DType::kU16:
    case DType::kF16:   // where and same-dtype casts only: the f16/bf16 arithmetic runs in f32
    case DType::kBF16:  // (kernels/cpu/half_operands.h)
      return 2;
    case DType::kI64:
    case DType::kU64:
    case DType::kF64: return 8;
    default: return 0;
  }
}

CNSR_EW_INLINE float CanonNaN(float x) { return x != x ? std::bit_cast<float>(kCanonicalNaNBits) : x; }
CNSR_EW_INLINE double CanonNaN(double x) { return x != x ? std::bit_cast<double>(detmath::kCanonicalNaN64Bits) : x; }

template <typename T>
using UnsignedOf = std::make_unsigned_t<T>;
// The unsigned type arithmetic on T is done in: at least 32 bits wide, so that 8- and 16-bit
// operands do not promote to (signed) int, where 65535 * 65535 would overflow.
template <typename T>
using WrapTypeOf = std::conditional_t<(sizeof(T) < 4), uint32_t, UnsignedOf<T>>;

// Two's complement wrapping integer arithmetic without UB: compute in the unsigned type
// (or int for the promoted narrow types, where no overflow is possible), then convert
// back, which is modular since C++20.
template <typename T>
CNSR_EW_INLINE T WrapAdd(T a, T b) {
  using U = UnsignedOf<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
CNSR_EW_INLINE T WrapSub(T a, T b) {
  using U = UnsignedOf<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
CNSR_EW_INLINE T WrapMul(T a, T b) {
  using U = UnsignedOf<T>;
  using W = WrapTypeOf<T>;
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}
template <typename T>
CNSR_EW_INLINE T WrapNeg(T a) {
  using U = UnsignedOf<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(0) - static_cast<U>(a)));
}
// Truncating division; x / 0 == 0 and MIN / -1 == MIN (section 1). For unsigned T the
// second case cannot arise (MIN is 0) and the guard is harmless.
template <typename T>
CNSR_EW_INLINE T SafeDiv(T a, T b) {
  constexpr T kMin = std::numeric_limits<T>::min();
  const bool zero = b == 0;
  const bool ovf = (a == kMin) & (b == static_cast<T>(-1));
  const T d = (zero | ovf) ? static_cast<T>(1) : b;
  const T q = static_cast<T>(a / d);  // a / 1 == a covers MIN / -1
  return zero ? static_cast<T>(0) : q;
}

CNSR_EW_INLINE float FNeg(float x) { return CanonNaN(std::bit_cast<float>(std::bit_cast<uint32_t>(x) ^ 0x80000000u)); }
CNSR_EW_INLINE float FAbs(float x) { return CanonNaN(std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu)); }
// Section 1.1: NaN-propagating; max(-0, +0) = +0, min(-0, +0) = -0.
CNSR_EW_INLINE float FMax(float a, float b) {
  const uint32_t ua = std::bit_cast<uint32_t>(a), ub = std::bit_cast<uint32_t>(b);
  float r = a > b ? a : b;
  r = a == b ? std::bit_cast<float>(ua & ub) : r;
  return (a != a) | (b != b) ? std::bit_cast<float>(kCanonicalNaNBits) : r;
}
CNSR_EW_INLINE float FMin(float a, float b) {
  const uint32_t ua = std::bit_cast<uint32_t>(a), ub = std::bit_cast<uint32_t>(b);
  float r = a < b ? a : b;
  r = a == b ? std::bit_cast<float>(ua | ub) : r;
  return (a != a) | (b != b) ? std::bit_cast<float>(kCanonicalNaNBits) : r;
}

CNSR_EW_INLINE double FNeg(double x) {
  return CanonNaN(std::bit_cast<double>(std::bit_cast<uint64_t>(x) ^ 0x8000000000000000ull));
}
CNSR_EW_INLINE double FAbs(double x) {
  return CanonNaN(std::bit_cast<double>(std::bit_cast<uint64_t>(x) & 0x7FFFFFFFFFFFFFFFull));
}
CNSR_EW_INLINE double FMax(double a, double b) {
  const uint64_t ua = std::bit_cast<uint64_t>(a), ub = std::bit_cast<uint64_t>(b);
  double r = a > b ? a : b;
  r = a == b ? std::bit_cast<double>(ua & ub) : r;
  return (a != a) | (b != b) ? std::bit_cast<double>(detmath::kCanonicalNaN64Bits) : r;
}
CNSR_EW_INLINE double FMin(double a, double b) {
  const uint64_t ua = std::bit_cast<uint64_t>(a), ub = std::bit_cast<uint64_t>(b);
  double r = a < b ? a : b;
  r = a == b ? std::bit_cast<double>(ua | ub) : r;
  return (a != a) | (b != b) ? std::bit_cast<double>(detmath::kCanonicalNaN64Bits) : r;
}

// Cast rules of section 4.2. Bool is uint8_t holding 0 or 1.
template <typename T, typename F>
CNSR_EW_INLINE T FloatToInt(F x) {
  if constexpr (std::is_signed_v<T>) {
    // lo = -2^(bits-1) and hi = 2^(bits-1) are exact in f32 and f64.
    using W = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
    constexpr F lo = static_cast<F>(std::numeric_limits<T>::min());
    constexpr F hi = -lo;
    // In-range values convert by truncation; everything else (NaN included) converts a
    // harmless 0 and is then replaced, so the conversion never has undefined behaviour.
    const F c = (x >= lo) & (x < hi) ? x : F{0};
    W r = static_cast<W>(c);
    r = x >= hi ? static_cast<W>(std::numeric_limits<T>::max()) : r;
    r = x < lo ? static_cast<W>(std::numeric_limits<T>::min()) : r;
    return static_cast<T>(r);
  } else {
    // hi = 2^bits is exact; (-1, 0) truncates to 0, and x <= -1 and NaN give 0.
    using W = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    constexpr F hi = F{2} * static_cast<F>(T{1} << (sizeof(T) * 8 - 1));
    const F c = (x > F{-1}) & (x < hi) ? x : F{0};
    W r = static_cast<W>(c);
    r = x >= hi ? static_cast<W>(std::numeric_limits<T>::max()) : r;
    return static_cast<T>(r);
  }
}

// uint8_t here is u8; bool has its own functors (ToBoolF, FromBoolF) since it shares the
// C++ type.
template <typename From, typename To>
CNSR_EW_INLINE To CastValue(From x) {
  if constexpr (std::is_same_v<From, To>) {
    return x;  // same dtype copies bits
  } else if constexpr (std::is_floating_point_v<To>) {
    // int -> f32/f64 and f64 -> f32 round to nearest even; f32 -> f64 is exact. A NaN
    // (any payload) becomes the target's canonical NaN.
    if constexpr (std::is_floating_point_v<From>) return CanonNaN(static_cast<To>(x));
    else return static_cast<To>(x);
  } else if constexpr (std::is_floating_point_v<From>) {
    return FloatToInt<To>(x);
  } else {
    // int -> int: the value modulo 2^bits of To (exact when it fits; modular since C++20).
    return static_cast<To>(static_cast<UnsignedOf<To>>(x));
  }
}

// A transcendental f64 op (section 1.2): f64 -> f32 (nearest even), the f32 detmath
// function, f32 -> f64 (exact); NaN canonical in f64.
template <typename Fn>
CNSR_EW_INLINE double ViaF32(double x, Fn fn) {
  return CanonNaN(static_cast<double>(fn(static_cast<float>(x))));
}

// ---------------------------------------------------------------------------------------
// Op functors: static Apply. `Out` is the output element type.

struct NegF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T x) {
    if constexpr (std::is_floating_point_v<T>) return FNeg(x);
    else return WrapNeg(x);
  }
};
struct AbsF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T x) {
    if constexpr (std::is_floating_point_v<T>) return FAbs(x);
    else if constexpr (std::is_unsigned_v<T>) return x;
    else return x < 0 ? WrapNeg(x) : x;
  }
};
struct ReluF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T x) {
    if constexpr (std::is_floating_point_v<T>) {
      // x > 0 ? x : +0, with relu(NaN) = NaN (canonical) as the spec states.
      return x != x ? CanonNaN(x) : (x > T{0} ? x : T{0});
    } else {
      return x > 0 ? x : static_cast<T>(0);
    }
  }
};
struct ExpF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::exp(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::exp(v); });
  }
};
struct LogF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::log(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::log(v); });
  }
};
struct TanhF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::tanh(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::tanh(v); });
  }
};
struct ErfF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::erf(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::erf(v); });
  }
};
struct SinF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::sin(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::sin(v); });
  }
};
struct CosF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::cos(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::cos(v); });
  }
};
struct FloorF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::floor(x); }
  static CNSR_EW_INLINE double Apply(double x) { return detmath::floor64(x); }
};
struct CeilF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::ceil(x); }
  static CNSR_EW_INLINE double Apply(double x) { return detmath::ceil64(x); }
};
// detmath::round_half_even's result (DETERMINISM.md 5.12) without branches, so the loop
// vectorizes: for |x| < 2^23 the sum |x| + 2^23 lies in [2^23, 2^24], where the spacing is 1,
// so IEEE round-to-nearest-even makes it 2^23 + rhe(|x|) exactly (2^23 is even) and the
// subtraction is exact. The sign is put back (-0.3 -> -0); |x| >= 2^23 and inf pass through,
// NaN becomes the canonical NaN. elementwise_test compares it with detmath bit for bit.
CNSR_EW_INLINE float RoundHalfEvenBranchFree(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t mag = u & 0x7FFFFFFFu;
  const float rounded = (std::bit_cast<float>(mag) + 0x1p23f) - 0x1p23f;
  uint32_t out = std::bit_cast<uint32_t>(rounded) | (u & 0x80000000u);
  out = mag >= 0x4B000000u ? u : out;
  out = mag > 0x7F800000u ? kCanonicalNaNBits : out;
  return std::bit_cast<float>(out);
}

struct RoundF {
  static CNSR_EW_INLINE float Apply(float x) { return RoundHalfEvenBranchFree(x); }
  static CNSR_EW_INLINE double Apply(double x) { return detmath::round_half_even64(x); }
};
struct SqrtF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::sqrt_rn(x)); }
  static CNSR_EW_INLINE double Apply(double x) { return CanonNaN(detmath::sqrt_rn64(x)); }
};
// rsqrt, sigmoid, gelu and gelu_tanh are the exact sequences of section 4.2, implemented
// once in detmath (shared with the CUDA backend); elementwise_test checks them against
// the spec formulas.
struct RsqrtF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::rsqrt(x)); }
  static CNSR_EW_INLINE double Apply(double x) { return CanonNaN(1.0 / detmath::sqrt_rn64(x)); }
};
struct SigmoidF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::sigmoid(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::sigmoid(v); });
  }
};
struct GeluErfF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::gelu_erf(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::gelu_erf(v); });
  }
};
struct GeluTanhF {
  static CNSR_EW_INLINE float Apply(float x) { return CanonNaN(detmath::gelu_tanh(x)); }
  static CNSR_EW_INLINE double Apply(double x) {
    return ViaF32(x, [](float v) { return detmath::gelu_tanh(v); });
  }
};
struct NotF {
  static CNSR_EW_INLINE uint8_t Apply(uint8_t x) { return static_cast<uint8_t>(x == 0); }
};
template <typename To>
struct CastF {
  template <typename From>
  static CNSR_EW_INLINE To Apply(From x) {
    return CastValue<From, To>(x);
  }
};
// anything -> bool is x != 0 (NaN -> 1, -0 -> 0); bool -> anything gives 0 or 1.
struct ToBoolF {
  template <typename From>
  static CNSR_EW_INLINE uint8_t Apply(From x) {
    return static_cast<uint8_t>(x != static_cast<From>(0));
  }
};
template <typename To>
struct FromBoolF {
  static CNSR_EW_INLINE To Apply(uint8_t x) { return static_cast<To>(x != 0 ? 1 : 0); }
};

struct AddF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return CanonNaN(a + b);
    else return WrapAdd(a, b);
  }
};
struct SubF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return CanonNaN(a - b);
    else return WrapSub(a, b);
  }
};
struct MulF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return CanonNaN(a * b);
    else return WrapMul(a, b);
  }
};
struct DivF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return CanonNaN(a / b);
    else return SafeDiv(a, b);
  }
};
struct PowF {
  // f64: through the f32 detmath pow (DETERMINISM.md 1.2); integers: the exact power (5.11.2).
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, float>) return CanonNaN(detmath::pow(a, b));
    else if constexpr (std::is_same_v<T, double>)
      return CanonNaN(static_cast<double>(detmath::pow(static_cast<float>(a), static_cast<float>(b))));
    else return detmath::int_pow(a, b);
  }
};
struct AsinF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::asin(x); }
};
struct AcosF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::acos(x); }
};
struct AtanF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::atan(x); }
};
struct SinhF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::sinh(x); }
};
struct CoshF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::cosh(x); }
};
struct AsinhF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::asinh(x); }
};
struct AcoshF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::acosh(x); }
};
struct AtanhF {
  static CNSR_EW_INLINE float Apply(float x) { return detmath::atanh(x); }
};
// Remainder with the sign of the dividend; for integers a - div(a, b) * b, wrapping
// (so x fmod 0 == x and MIN fmod -1 == 0, following div's section 1 rules).
struct FmodF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, float>) return detmath::fmod(a, b);
    else if constexpr (std::is_same_v<T, double>) return detmath::fmod64(a, b);
    else return WrapSub(a, WrapMul(SafeDiv(a, b), b));
  }
};
struct MaxF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return FMax(a, b);
    else return a > b ? a : b;
  }
};
struct MinF {
  template <typename T>
  static CNSR_EW_INLINE T Apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return FMin(a, b);
    else return a < b ? a : b;
  }
};
// Comparisons follow IEEE (NaN compares false except !=; -0 == +0): the C++ operators.
struct EqF {
  template <typename T>
  static CNSR_EW_INLINE uint8_t Apply(T a, T b) {
    return a == b;
  }
};
struct NeF {
  template <typename T>
  static CNSR_EW_INLINE uint8_t Apply(T a, T b) {
    return a != b;
  }
};
struct LtF {
  template <typename T>
  static CNSR_EW_INLINE uint8_t Apply(T a, T b) {
    return a < b;
  }
};
struct LeF {
  template <typename T>
  static CNSR_EW_INLINE uint8_t Apply(T a, T b) {
    return a <= b;
  }
};
struct GtF {
  template <typename T>
  static CNSR_EW_INLINE uint8_t Apply(T a, T b) {
    return a > b;
  }
};
struct GeF {
  template <typename T>
  static CNSR_EW_INLINE uint8_t Apply(T a, T b) {
    return a >= b;
  }
};
struct AndF {
  static CNSR_EW_INLINE uint8_t Apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>((a != 0) & (b != 0)); }
};
struct OrF {
  static CNSR_EW_INLINE uint8_t Apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>((a | b) != 0); }
};
struct XorF {
  static CNSR_EW_INLINE uint8_t Apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>((a != 0) ^ (b != 0)); }
};

// ---------------------------------------------------------------------------------------
// Loops. Operand inner strides are 0 (broadcast) or 1 for contiguous inputs; the
// templated runs let the compiler hoist broadcast scalars and vectorize the rest.

template <typename In, typename Out, typename F, bool SA>
CNSR_EW_INLINE void UnaryRun(Out* o, const In* a, int64_t n) {
  const In a0 = a[0];
  for (int64_t i = 0; i < n; ++i) o[i] = F::Apply(SA ? a[i] : a0);
}

template <typename In, typename Out, typename F>
CNSR_EW_FLATTEN void UnaryChunk(const EwPlan& p, int64_t begin, int64_t end) {
  const In* a = static_cast<const In*>(p.in[0]);
  Out* out = static_cast<Out*>(p.out);
  const StridedLayout& l = p.layout;
  const int64_t sa = l.strides[0][l.rank - 1];
  ForEachRun(l, begin, end, [&](int64_t pos, const int64_t* off, int64_t n) {
    const In* pa = a + off[0];
    Out* po = out + pos;
    if (sa == 1) {
      UnaryRun<In, Out, F, true>(po, pa, n);
    } else if (sa == 0) {
      UnaryRun<In, Out, F, false>(po, pa, n);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = F::Apply(pa[i * sa]);
    }
  });
}

template <typename In, typename Out, typename F, bool SA, bool SB>
CNSR_EW_INLINE void BinaryRun(Out* o, const In* a, const In* b, int64_t n) {
  const In a0 = a[0], b0 = b[0];
  for (int64_t i = 0; i < n; ++i) o[i] = F::Apply(SA ? a[i] : a0, SB ? b[i] : b0);
}

template <typename In, typename Out, typename F>
CNSR_EW_FLATTEN void BinaryChunk(const EwPlan& p, int64_t begin, int64_t end) {
  const In* a = static_cast<const In*>(p.in[0]);
  const In* b = static_cast<const In*>(p.in[1]);
  Out* out = static_cast<Out*>(p.out);
  const StridedLayout& l = p.layout;
  const int64_t sa = l.strides[0][l.rank - 1];
  const int64_t sb = l.strides[1][l.rank - 1];
  ForEachRun(l, begin, end, [&](int64_t pos, const int64_t* off, int64_t n) {
    const In* pa = a + off[0];
    const In* pb = b + off[1];
    Out* po = out + pos;
    if (sa == 1 && sb == 1) {
      BinaryRun<In, Out, F, true, true>(po, pa, pb, n);
    } else if (sa == 1 && sb == 0) {
      BinaryRun<In, Out, F, true, false>(po, pa, pb, n);
    } else if (sa == 0 && sb == 1) {
      BinaryRun<In, Out, F, false, true>(po, pa, pb, n);
    } else if (sa == 0 && sb == 0) {
      BinaryRun<In, Out, F, false, false>(po, pa, pb, n);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = F::Apply(pa[i * sa], pb[i * sb]);
    }
  });
}

template <typename T, bool SC, bool SA, bool SB>
CNSR_EW_INLINE void WhereRun(T* o, const uint8_t* c, const T* a, const T* b, int64_t n) {
  const uint8_t c0 = c[0];
  const T a0 = a[0], b0 = b[0];
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t ci = SC ? c[i] : c0;
    const T ai = SA ? a[i] : a0;
    const T bi = SB ? b[i] : b0;
    o[i] = ci != 0 ? ai : bi;
  }
}

template <typename T, bool SC, bool SA>
CNSR_EW_INLINE void WhereRunB(int64_t sb, T* o, const uint8_t* c, const T* a, const T* b, int64_t n) {
  if (sb == 1) WhereRun<T, SC, SA, true>(o, c, a, b, n);
  else WhereRun<T, SC, SA, false>(o, c, a, b, n);
}

// where copies the bits of a or b: T is the unsigned integer of the element size.
template <typename T>
CNSR_EW_FLATTEN void WhereChunk(const EwPlan& p, int64_t begin, int64_t end) {
  const uint8_t* c = static_cast<const uint8_t*>(p.in[0]);
  const T* a = static_cast<const T*>(p.in[1]);
  const T* b = static_cast<const T*>(p.in[2]);
  T* out = static_cast<T*>(p.out);
  const StridedLayout& l = p.layout;
  const int64_t sc = l.strides[0][l.rank - 1];
  const int64_t sa = l.strides[1][l.rank - 1];
  const int64_t sb = l.strides[2][l.rank - 1];
  const bool unit = (sc == 0 || sc == 1) && (sa == 0 || sa == 1) && (sb == 0 || sb == 1);
  ForEachRun(l, begin, end, [&](int64_t pos, const int64_t* off, int64_t n) {
    const uint8_t* pc = c + off[0];
    const T* pa = a + off[1];
    const T* pb = b + off[2];
    T* po = out + pos;
    if (!unit) {
      for (int64_t i = 0; i < n; ++i) po[i] = pc[i * sc] != 0 ? pa[i * sa] : pb[i * sb];
    } else if (sc == 1) {
      if (sa == 1) WhereRunB<T, true, true>(sb, po, pc, pa, pb, n);
      else WhereRunB<T, true, false>(sb, po, pc, pa, pb, n);
    } else {
      if (sa == 1) WhereRunB<T, false, true>(sb, po, pc, pa, pb, n);
      else WhereRunB<T, false, false>(sb, po, pc, pa, pb, n);
    }
  });
}

// ---------------------------------------------------------------------------------------
// Dispatch. elementwise.cc has validated op/dtype combinations; anything else is a no-op
// here (and cannot be reached).

template <typename F>
inline void NumericUnary(const EwPlan& p, int64_t b, int64_t e) {
  switch (p.in_dtype) {
    case DType::kF32: UnaryChunk<float, float, F>(p, b, e); break;
    case DType::kI32: UnaryChunk<int32_t, int32_t, F>(p, b, e); break;
    case DType::kI8: UnaryChunk<int8_t, int8_t, F>(p, b, e); break;
    case DType::kI64: UnaryChunk<int64_t, int64_t, F>(p, b, e); break;
    case DType::kU8: UnaryChunk<uint8_t, uint8_t, F>(p, b, e); break;
    case DType::kI16: UnaryChunk<int16_t, int16_t, F>(p, b, e); break;
    case DType::kU16: UnaryChunk<uint16_t, uint16_t, F>(p, b, e); break;
    case DType::kU32: UnaryChunk<uint32_t, uint32_t, F>(p, b, e); break;
    case DType::kU64: UnaryChunk<uint64_t, uint64_t, F>(p, b, e); break;
    case DType::kF64: UnaryChunk<double, double, F>(p, b, e); break;
    default: break;
  }
}

template <typename F>
inline void FloatUnary(const EwPlan& p, int64_t b, int64_t e) {
  if (p.in_dtype == DType::kF64) UnaryChunk<double, double, F>(p, b, e);
  else UnaryChunk<float, float, F>(p, b, e);
}

template <typename F>
inline void FloatBinary(const EwPlan& p, int64_t b, int64_t e) {
  if (p.in_dtype == DType::kF64) BinaryChunk<double, double, F>(p, b, e);
  else BinaryChunk<float, float, F>(p, b, e);
}

template <typename F>
inline void NumericBinary(const EwPlan& p, int64_t b, int64_t e) {
  switch (p.in_dtype) {
    case DType::kF32: BinaryChunk<float, float, F>(p, b, e); break;
    case DType::kI32: BinaryChunk<int32_t, int32_t, F>(p, b, e); break;
    case DType::kI8: BinaryChunk<int8_t, int8_t, F>(p, b, e); break;
    case DType::kI64: BinaryChunk<int64_t, int64_t, F>(p, b, e); break;
    case DType::kU8: BinaryChunk<uint8_t, uint8_t, F>(p, b, e); break;
    case DType::kI16: BinaryChunk<int16_t, int16_t, F>(p, b, e); break;
    case DType::kU16: BinaryChunk<uint16_t, uint16_t, F>(p, b, e); break;
    case DType::kU32: BinaryChunk<uint32_t, uint32_t, F>(p, b, e); break;
    case DType::kU64: BinaryChunk<uint64_t, uint64_t, F>(p, b, e); break;
    case DType::kF64: BinaryChunk<double, double, F>(p, b, e); break;
    default: break;
  }
}

template <typename F>
inline void CompareBinary(const EwPlan& p, int64_t b, int64_t e) {
  switch (p.in_dtype) {
    case DType::kF32: BinaryChunk<float, uint8_t, F>(p, b, e); break;
    case DType::kI32: BinaryChunk<int32_t, uint8_t, F>(p, b, e); break;
    case DType::kI8: BinaryChunk<int8_t, uint8_t, F>(p, b, e); break;
    case DType::kBool: BinaryChunk<uint8_t, uint8_t, F>(p, b, e); break;
    case DType::kI64: BinaryChunk<int64_t, uint8_t, F>(p, b, e); break;
    case DType::kU8: BinaryChunk<uint8_t, uint8_t, F>(p, b, e); break;
    case DType::kI16: BinaryChunk<int16_t, uint8_t, F>(p, b, e); break;
    case DType::kU16: BinaryChunk<uint16_t, uint8_t, F>(p, b, e); break;
    case DType::kU32: BinaryChunk<uint32_t, uint8_t, F>(p, b, e); break;
    case DType::kU64: BinaryChunk<uint64_t, uint8_t, F>(p, b, e); break;
    case DType::kF64: BinaryChunk<double, uint8_t, F>(p, b, e); break;
    default: break;
  }
}

// Bool inputs are dispatched to FromBool (never here), and bool outputs to ToBoolF.
template <typename From>
inline void CastFrom(const EwPlan& p, int64_t b, int64_t e) {
  switch (p.out_dtype) {
    case DType::kF32: UnaryChunk<From, float, CastF<float>>(p, b, e); break;
    case DType::kI32: UnaryChunk<From, int32_t, CastF<int32_t>>(p, b, e); break;
    case DType::kI8: UnaryChunk<From, int8_t, CastF<int8_t>>(p, b, e); break;
    case DType::kBool: UnaryChunk<From, uint8_t, ToBoolF>(p, b, e); break;
    case DType::kI64: UnaryChunk<From, int64_t, CastF<int64_t>>(p, b, e); break;
    case DType::kU8: UnaryChunk<From, uint8_t, CastF<uint8_t>>(p, b, e); break;
    case DType::kI16: UnaryChunk<From, int16_t, CastF<int16_t>>(p, b, e); break;
    case DType::kU16: UnaryChunk<From, uint16_t, CastF<uint16_t>>(p, b, e); break;
    case DType::kU32: UnaryChunk<From, uint32_t, CastF<uint32_t>>(p, b, e); break;
    case DType::kU64: UnaryChunk<From, uint64_t, CastF<uint64_t>>(p, b, e); break;
    case DType::kF64: UnaryChunk<From, double, CastF<double>>(p, b, e); break;
    default: break;
  }
}

inline void CastFromBool(const EwPlan& p, int64_t b, int64_t e) {
  switch (p.out_dtype) {
    case DType::kF32: UnaryChunk<uint8_t, float, FromBoolF<float>>(p, b, e); break;
    case DType::kI32: UnaryChunk<uint8_t, int32_t, FromBoolF<int32_t>>(p, b, e); break;
    case DType::kI8: UnaryChunk<uint8_t, int8_t, FromBoolF<int8_t>>(p, b, e); break;
    case DType::kI64: UnaryChunk<uint8_t, int64_t, FromBoolF<int64_t>>(p, b, e); break;
    case DType::kU8: UnaryChunk<uint8_t, uint8_t, FromBoolF<uint8_t>>(p, b, e); break;
    case DType::kI16: UnaryChunk<uint8_t, int16_t, FromBoolF<int16_t>>(p, b, e); break;
    case DType::kU16: UnaryChunk<uint8_t, uint16_t, FromBoolF<uint16_t>>(p, b, e); break;
    case DType::kU32: UnaryChunk<uint8_t, uint32_t, FromBoolF<uint32_t>>(p, b, e); break;
    case DType::kU64: UnaryChunk<uint8_t, uint64_t, FromBoolF<uint64_t>>(p, b, e); break;
    case DType::kF64: UnaryChunk<uint8_t, double, FromBoolF<double>>(p, b, e); break;
    default: break;
  }
}

inline void CastChunk(const EwPlan& p, int64_t b, int64_t e) {
  if (p.in_dtype == p.out_dtype) {
    // Same dtype copies bits (no NaN canonicalization): move raw element bits.
    switch (EwElemSize(p.in_dtype)) {
      case 1: UnaryChunk<uint8_t, uint8_t, CastF<uint8_t>>(p, b, e); break;
      case 2: UnaryChunk<uint16_t, uint16_t, CastF<uint16_t>>(p, b, e); break;
      case 4: UnaryChunk<uint32_t, uint32_t, CastF<uint32_t>>(p, b, e); break;
      case 8: UnaryChunk<uint64_t, uint64_t, CastF<uint64_t>>(p, b, e); break;
      default: break;
    }
    return;
  }
  switch (p.in_dtype) {
    case DType::kF32: CastFrom<float>(p, b, e); break;
    case DType::kI32: CastFrom<int32_t>(p, b, e); break;
    case DType::kI8: CastFrom<int8_t>(p, b, e); break;
    case DType::kBool: CastFromBool(p, b, e); break;
    case DType::kI64: CastFrom<int64_t>(p, b, e); break;
    case DType::kU8: CastFrom<uint8_t>(p, b, e); break;
    case DType::kI16: CastFrom<int16_t>(p, b, e); break;
    case DType::kU16: CastFrom<uint16_t>(p, b, e); break;
    case DType::kU32: CastFrom<uint32_t>(p, b, e); break;
    case DType::kU64: CastFrom<uint64_t>(p, b, e); break;
    case DType::kF64: CastFrom<double>(p, b, e); break;
    default: break;
  }
}

inline void EwRunChunkImpl(const EwPlan& p, int64_t b, int64_t e) {
  switch (p.op) {
    case Op::kNeg: NumericUnary<NegF>(p, b, e); break;
    case Op::kAbs: NumericUnary<AbsF>(p, b, e); break;
    case Op::kRelu: NumericUnary<ReluF>(p, b, e); break;
    case Op::kExp: FloatUnary<ExpF>(p, b, e); break;
    case Op::kLog: FloatUnary<LogF>(p, b, e); break;
    case Op::kSqrt: FloatUnary<SqrtF>(p, b, e); break;
    case Op::kRsqrt: FloatUnary<RsqrtF>(p, b, e); break;
    case Op::kTanh: FloatUnary<TanhF>(p, b, e); break;
    case Op::kSigmoid: FloatUnary<SigmoidF>(p, b, e); break;
    case Op::kErf: FloatUnary<ErfF>(p, b, e); break;
    case Op::kGeluErf: FloatUnary<GeluErfF>(p, b, e); break;
    case Op::kGeluTanh: FloatUnary<GeluTanhF>(p, b, e); break;
    case Op::kSin: FloatUnary<SinF>(p, b, e); break;
    case Op::kCos: FloatUnary<CosF>(p, b, e); break;
    case Op::kFloor: FloatUnary<FloorF>(p, b, e); break;
    case Op::kCeil: FloatUnary<CeilF>(p, b, e); break;
    case Op::kRound: FloatUnary<RoundF>(p, b, e); break;
    case Op::kAsin: UnaryChunk<float, float, AsinF>(p, b, e); break;
    case Op::kAcos: UnaryChunk<float, float, AcosF>(p, b, e); break;
    case Op::kAtan: UnaryChunk<float, float, AtanF>(p, b, e); break;
    case Op::kSinh: UnaryChunk<float, float, SinhF>(p, b, e); break;
    case Op::kCosh: UnaryChunk<float, float, CoshF>(p, b, e); break;
    case Op::kAsinh: UnaryChunk<float, float, AsinhF>(p, b, e); break;
    case Op::kAcosh: UnaryChunk<float, float, AcoshF>(p, b, e); break;
    case Op::kAtanh: UnaryChunk<float, float, AtanhF>(p, b, e); break;
    case Op::kNot: UnaryChunk<uint8_t, uint8_t, NotF>(p, b, e); break;
    case Op::kCast: CastChunk(p, b, e); break;
    case Op::kAdd: NumericBinary<AddF>(p, b, e); break;
    case Op::kSub: NumericBinary<SubF>(p, b, e); break;
    case Op::kMul: NumericBinary<MulF>(p, b, e); break;
    case Op::kDiv: NumericBinary<DivF>(p, b, e); break;
    case Op::kPow: NumericBinary<PowF>(p, b, e); break;
    case Op::kFmod: NumericBinary<FmodF>(p, b, e); break;
    case Op::kMax: NumericBinary<MaxF>(p, b, e); break;
    case Op::kMin: NumericBinary<MinF>(p, b, e); break;
    case Op::kEqual: CompareBinary<EqF>(p, b, e); break;
    case Op::kNotEqual: CompareBinary<NeF>(p, b, e); break;
    case Op::kLess: CompareBinary<LtF>(p, b, e); break;
    case Op::kLessEqual: CompareBinary<LeF>(p, b, e); break;
    case Op::kGreater: CompareBinary<GtF>(p, b, e); break;
    case Op::kGreaterEqual: CompareBinary<GeF>(p, b, e); break;
    case Op::kAnd: BinaryChunk<uint8_t, uint8_t, AndF>(p, b, e); break;
    case Op::kOr: BinaryChunk<uint8_t, uint8_t, OrF>(p, b, e); break;
    case Op::kXor: BinaryChunk<uint8_t, uint8_t, XorF>(p, b, e); break;
    case Op::kWhere:
      switch (EwElemSize(p.in_dtype)) {
        case 1: WhereChunk<uint8_t>(p, b, e); break;
        case 2: WhereChunk<uint16_t>(p, b, e); break;
        case 4: WhereChunk<uint32_t>(p, b, e); break;
        case 8: WhereChunk<uint64_t>(p, b, e); break;
        default: break;
      }
      break;
    default: break;
  }
}

}  // namespace
}  // namespace consensor::kernels::cpu
