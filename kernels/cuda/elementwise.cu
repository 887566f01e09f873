// CUDA elementwise family (docs/DETERMINISM.md sections 1 and 4.2). Bit-identical to
// kernels/cpu/elementwise_impl.h: the same scalar semantics (NaN canonicalization, signed
// zeros, wrapping integers, int div by zero -> 0, saturating casts), with two kernel
// shapes per op: a flat one for contiguous/scalar operands (16-byte vector accesses when
// aligned) and a strided one for general broadcasting.
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/checks/elementwise.h"
#include "kernels/cuda/broadcast_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/detmath.h"

namespace consensor::kernels::CNSR_CUDA_NS {
namespace {

// ---------------------------------------------------------------------------------------
// Scalar semantics.

// Per integer type: U is the unsigned type of the same width, W the unsigned type products are
// computed in (at least 32 bits, so that 8- and 16-bit operands never promote to a signed int,
// where 65535 * 65535 would overflow), kMin/kMax the range, kLo/kHi the f32 bounds of section
// 4.2's f32 -> int cast (both exact: -2^(n-1) and 2^(n-1), or 0 and 2^n for unsigned types).
template <typename T>
struct IntTraits;
template <>
struct IntTraits<int8_t> {
  using U = uint8_t;
  using W = uint32_t;
  static constexpr int8_t kMin = -128, kMax = 127;
  static constexpr float kLo = -128.0f;
  static constexpr float kHi = 128.0f;
};
template <>
struct IntTraits<int16_t> {
  using U = uint16_t;
  using W = uint32_t;
  static constexpr int16_t kMin = -32768, kMax = 32767;
  static constexpr float kLo = -32768.0f;
  static constexpr float kHi = 32768.0f;
};
template <>
struct IntTraits<int32_t> {
  using U = uint32_t;
  using W = uint32_t;
  static constexpr int32_t kMin = -2147483647 - 1, kMax = 2147483647;
  static constexpr float kLo = -2147483648.0f;
  static constexpr float kHi = 2147483648.0f;
};
template <>
struct IntTraits<int64_t> {
  using U = uint64_t;
  using W = uint64_t;
  static constexpr int64_t kMin = -9223372036854775807LL - 1, kMax = 9223372036854775807LL;
  static constexpr float kLo = -9223372036854775808.0f;
  static constexpr float kHi = 9223372036854775808.0f;
};
template <>
struct IntTraits<uint8_t> {  // u8 (bool has its own cast functors: ToBoolF, FromBoolF)
  using U = uint8_t;
  using W = uint32_t;
  static constexpr uint8_t kMin = 0, kMax = 255;
  static constexpr float kLo = 0.0f;
  static constexpr float kHi = 256.0f;
};
template <>
struct IntTraits<uint16_t> {
  using U = uint16_t;
  using W = uint32_t;
  static constexpr uint16_t kMin = 0, kMax = 65535;
  static constexpr float kLo = 0.0f;
  static constexpr float kHi = 65536.0f;
};
template <>
struct IntTraits<uint32_t> {
  using U = uint32_t;
  using W = uint32_t;
  static constexpr uint32_t kMin = 0, kMax = 4294967295u;
  static constexpr float kLo = 0.0f;
  static constexpr float kHi = 4294967296.0f;
};
template <>
struct IntTraits<uint64_t> {
  using U = uint64_t;
  using W = uint64_t;
  static constexpr uint64_t kMin = 0, kMax = 18446744073709551615ull;
  static constexpr float kLo = 0.0f;
  static constexpr float kHi = 18446744073709551616.0f;
};

CNSR_DEVICE float CanonNaN(float x) { return detmath::canonicalize_nan(x); }

template <typename T>
CNSR_DEVICE T WrapAdd(T a, T b) {
  using U = typename IntTraits<T>::U;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
CNSR_DEVICE T WrapSub(T a, T b) {
  using U = typename IntTraits<T>::U;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
CNSR_DEVICE T WrapMul(T a, T b) {
  using U = typename IntTraits<T>::U;
  using W = typename IntTraits<T>::W;
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}
template <typename T>
CNSR_DEVICE T WrapNeg(T a) {
  using U = typename IntTraits<T>::U;
  return static_cast<T>(static_cast<U>(static_cast<U>(0) - static_cast<U>(a)));
}
// For unsigned T the MIN / -1 guard never fires (MIN is 0) and is harmless.
template <typename T>
CNSR_DEVICE T SafeDiv(T a, T b) {
  const bool zero = b == 0;
  const bool ovf = (a == IntTraits<T>::kMin) & (b == static_cast<T>(-1));
  const T d = (zero | ovf) ? static_cast<T>(1) : b;
  const T q = static_cast<T>(a / d);
  return zero ? static_cast<T>(0) : q;
}

CNSR_DEVICE float FNeg(float x) { return CanonNaN(detmath::as_float(detmath::as_uint(x) ^ 0x80000000u)); }
CNSR_DEVICE float FAbs(float x) { return CanonNaN(detmath::as_float(detmath::as_uint(x) & 0x7FFFFFFFu)); }
CNSR_DEVICE float FMax(float a, float b) {
  const uint32_t ua = detmath::as_uint(a), ub = detmath::as_uint(b);
  float r = a > b ? a : b;
  r = a == b ? detmath::as_float(ua & ub) : r;
  return (detmath::is_nan(a) | detmath::is_nan(b)) ? detmath::canonical_nan() : r;
}
CNSR_DEVICE float FMin(float a, float b) {
  const uint32_t ua = detmath::as_uint(a), ub = detmath::as_uint(b);
  float r = a < b ? a : b;
  r = a == b ? detmath::as_float(ua | ub) : r;
  return (detmath::is_nan(a) | detmath::is_nan(b)) ? detmath::canonical_nan() : r;
}

// Section 4.2's f32 -> int cast: truncation, NaN -> 0, saturation. An unsigned target takes 0
// for every x <= -1 ((-1, 0) truncates to 0) and its max for x >= 2^n.
template <typename T>
CNSR_DEVICE T F32ToInt(float x) {
  constexpr float lo = IntTraits<T>::kLo;
  constexpr float hi = IntTraits<T>::kHi;
  if constexpr (std::is_signed<T>::value) {
    using W = typename std::conditional<sizeof(T) == 8, int64_t, int32_t>::type;
    const float c = ((x >= lo) & (x < hi)) ? x : 0.0f;
    W r = static_cast<W>(c);
    r = x >= hi ? static_cast<W>(IntTraits<T>::kMax) : r;
    r = x < lo ? static_cast<W>(IntTraits<T>::kMin) : r;
    return static_cast<T>(r);
  } else {
    using W = typename std::conditional<sizeof(T) == 8, uint64_t, uint32_t>::type;
    const float c = ((x > -1.0f) & (x < hi)) ? x : 0.0f;
    W r = static_cast<W>(c);
    r = x >= hi ? static_cast<W>(IntTraits<T>::kMax) : r;
    return static_cast<T>(r);
  }
}

// uint8_t here is u8: casts to and from bool use ToBoolF and FromBoolF.
template <typename From, typename To>
CNSR_DEVICE To CastValue(From x) {
  if constexpr (std::is_same<From, To>::value) {
    return x;
  } else if constexpr (std::is_same<To, float>::value) {
    return static_cast<float>(x);
  } else if constexpr (std::is_same<From, float>::value) {
    return F32ToInt<To>(x);
  } else {
    return static_cast<To>(static_cast<typename IntTraits<To>::U>(x));
  }
}

// ---------------------------------------------------------------------------------------
// Op functors.

struct NegF {
  template <typename T>
  static CNSR_DEVICE T Apply(T x) {
    if constexpr (std::is_same<T, float>::value) return FNeg(x);
    else return WrapNeg(x);
  }
};
struct AbsF {
  template <typename T>
  static CNSR_DEVICE T Apply(T x) {
    if constexpr (std::is_same<T, float>::value) return FAbs(x);
    else if constexpr (std::is_unsigned<T>::value) return x;  // unsigned: the value
    else return x < 0 ? WrapNeg(x) : x;
  }
};
struct ReluF {
  template <typename T>
  static CNSR_DEVICE T Apply(T x) {
    if constexpr (std::is_same<T, float>::value) {
      return detmath::is_nan(x) ? detmath::canonical_nan() : (x > 0.0f ? x : 0.0f);
    } else {
      return x > 0 ? x : static_cast<T>(0);
    }
  }
};
struct ExpF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::exp(x));
  }
};
struct LogF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::log(x));
  }
};
struct TanhF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::tanh(x));
  }
};
struct ErfF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::erf(x));
  }
};
struct SinF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::sin(x));
  }
};
struct FloorF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::floor(x);
  }
};
struct CeilF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::ceil(x);
  }
};
struct RoundF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::round_half_even(x);
  }
};
struct CosF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::cos(x));
  }
};
struct SqrtF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::sqrt_rn(x));
  }
};
struct RsqrtF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::rsqrt(x));
  }
};
struct SigmoidF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::sigmoid(x));
  }
};
struct GeluErfF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::gelu_erf(x));
  }
};
struct GeluTanhF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return CanonNaN(detmath::gelu_tanh(x));
  }
};
struct NotF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(uint8_t x) {
    return static_cast<uint8_t>(x == 0);
  }
};
template <typename To>
struct CastF {
  template <typename From>
  static CNSR_DEVICE To Apply(From x) {
    return CastValue<From, To>(x);
  }
};
// anything -> bool is x != 0 (NaN -> 1, -0 -> 0); bool -> anything gives 0 or 1.
struct ToBoolF {
  template <typename From>
  static CNSR_DEVICE uint8_t Apply(From x) {
    return static_cast<uint8_t>(x != static_cast<From>(0));
  }
};
template <typename To>
struct FromBoolF {
  template <typename From>
  static CNSR_DEVICE To Apply(uint8_t x) {
    return static_cast<To>(x != 0 ? 1 : 0);
  }
};

struct AddF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return CanonNaN(a + b);
    else return WrapAdd(a, b);
  }
};
struct SubF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return CanonNaN(a - b);
    else return WrapSub(a, b);
  }
};
struct MulF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return CanonNaN(a * b);
    else return WrapMul(a, b);
  }
};
struct DivF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return CanonNaN(a / b);
    else return SafeDiv(a, b);
  }
};
struct PowF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return CanonNaN(detmath::pow(a, b));
    else return detmath::int_pow(a, b);
  }
};
struct AsinF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::asin(x);
  }
};
struct AcosF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::acos(x);
  }
};
struct AtanF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::atan(x);
  }
};
struct SinhF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::sinh(x);
  }
};
struct CoshF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::cosh(x);
  }
};
struct AsinhF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::asinh(x);
  }
};
struct AcoshF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::acosh(x);
  }
};
struct AtanhF {
  template <typename T>
  static CNSR_DEVICE float Apply(float x) {
    return detmath::atanh(x);
  }
};
// Remainder with the sign of the dividend; integers: a - div(a, b) * b, wrapping.
struct FmodF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return detmath::fmod(a, b);
    else return WrapSub(a, WrapMul(SafeDiv(a, b), b));
  }
};
struct MaxF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return FMax(a, b);
    else return a > b ? a : b;
  }
};
struct MinF {
  template <typename T>
  static CNSR_DEVICE T Apply(T a, T b) {
    if constexpr (std::is_same<T, float>::value) return FMin(a, b);
    else return a < b ? a : b;
  }
};
struct EqF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(T a, T b) {
    return a == b;
  }
};
struct NeF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(T a, T b) {
    return a != b;
  }
};
struct LtF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(T a, T b) {
    return a < b;
  }
};
struct LeF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(T a, T b) {
    return a <= b;
  }
};
struct GtF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(T a, T b) {
    return a > b;
  }
};
struct GeF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(T a, T b) {
    return a >= b;
  }
};
struct AndF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};
struct OrF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a | b) != 0);
  }
};
struct XorF {
  template <typename T>
  static CNSR_DEVICE uint8_t Apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) ^ (b != 0));
  }
};

// ---------------------------------------------------------------------------------------
// Kernels. Up to three operands (a, b, c) of types A, B, C; NIN says how many are used.
// The functor is called as F::Apply<A>(a[, b]) for unary/binary ops; where (NIN == 3)
// selects the bits of b or c by a.

struct WhereTag {};

template <typename F, typename Out, typename A, typename B, typename C, int NIN>
CNSR_DEVICE Out ApplyOp(A a, B b, C c) {
  if constexpr (NIN == 1) {
    return F::template Apply<A>(a);
  } else if constexpr (NIN == 2) {
    return F::template Apply<A>(a, b);
  } else {
    return a != 0 ? b : c;
  }
}

template <typename A, typename B, typename C, typename Out>
struct EwPtrs {
  const A* a;
  const B* b;
  const C* c;
  Out* out;
};

// Number of elements per vector step: one 16-byte access for the widest operand.
template <typename A, typename B, typename C, typename Out, int NIN>
struct VecWidthOf {
  static constexpr int kOA = sizeof(Out) > sizeof(A) ? static_cast<int>(sizeof(Out)) : static_cast<int>(sizeof(A));
  static constexpr int kB = NIN >= 2 && static_cast<int>(sizeof(B)) > kOA ? static_cast<int>(sizeof(B)) : kOA;
  static constexpr int kC = NIN >= 3 && static_cast<int>(sizeof(C)) > kB ? static_cast<int>(sizeof(C)) : kB;
  static constexpr int value = 16 / kC;
};

// Contiguous output; each operand either contiguous (s* true) or one broadcast scalar.
// With `vec`, every contiguous pointer is aligned to a full vector.
template <typename F, typename Out, typename A, typename B, typename C, int NIN>
CNSR_GLOBAL void EwFlatKernel(EwPtrs<A, B, C, Out> p, bool sa, bool sb, bool sc, int64_t n, bool vec) {
  constexpr int V = VecWidthOf<A, B, C, Out, NIN>::value;
  const int64_t tid = DevThreadIndex();
  const int64_t nthreads = DevThreadCount();
  const A a0 = p.a[0];
  const B b0 = NIN >= 2 ? p.b[0] : B();
  const C c0 = NIN >= 3 ? p.c[0] : C();
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / V;
    for (int64_t v = tid; v < nv; v += nthreads) {
      const int64_t base = v * V;
      A av[V];
      B bv[V];
      C cv[V];
      Out ov[V];
      if (sa) DevLoadVec<A, V>(p.a + base, av);
      else
        for (int i = 0; i < V; ++i) av[i] = a0;
      if constexpr (NIN >= 2) {
        if (sb) DevLoadVec<B, V>(p.b + base, bv);
        else
          for (int i = 0; i < V; ++i) bv[i] = b0;
      } else {
        for (int i = 0; i < V; ++i) bv[i] = b0;
      }
      if constexpr (NIN >= 3) {
        if (sc) DevLoadVec<C, V>(p.c + base, cv);
        else
          for (int i = 0; i < V; ++i) cv[i] = c0;
      } else {
        for (int i = 0; i < V; ++i) cv[i] = c0;
      }
      CNSR_UNROLL
      for (int i = 0; i < V; ++i) ov[i] = ApplyOp<F, Out, A, B, C, NIN>(av[i], bv[i], cv[i]);
      DevStoreVec<Out, V>(p.out + base, ov);
    }
    done = nv * V;
  }
  for (int64_t i = done + tid; i < n; i += nthreads) {
    const A ai = sa ? p.a[i] : a0;
    B bi = b0;
    C ci = c0;
    if constexpr (NIN >= 2) bi = sb ? p.b[i] : b0;
    if constexpr (NIN >= 3) ci = sc ? p.c[i] : c0;
    p.out[i] = ApplyOp<F, Out, A, B, C, NIN>(ai, bi, ci);
  }
}

template <typename F, typename Out, typename A, typename B, typename C, int NIN>
CNSR_GLOBAL void EwStridedKernel(EwPtrs<A, B, C, Out> p, StridedLayout l, int64_t n) {
  const int64_t tid = DevThreadIndex();
  const int64_t nthreads = DevThreadCount();
  const bool narrow = n <= 0x7FFFFFFF;
  for (int64_t i = tid; i < n; i += nthreads) {
    int64_t off[NIN];
    DevOffsets<NIN>(l, i, narrow, off);
    const A ai = p.a[off[0]];
    B bi = B();
    C ci = C();
    if constexpr (NIN >= 2) bi = p.b[off[1]];
    if constexpr (NIN >= 3) ci = p.c[off[2]];
    p.out[i] = ApplyOp<F, Out, A, B, C, NIN>(ai, bi, ci);
  }
}

// ---------------------------------------------------------------------------------------
// Host side.

std::string Prefix(Op op) { return "elementwise op '" + std::string(OpName(op)) + "': "; }

// A validated call with its coalesced layout (operand k = input k).
struct Plan {
  Op op;
  DType in_dtype;  // value operands (a and b for where)
  DType out_dtype;
  int num_inputs;
  StridedLayout layout;
  const void* in[3];
  void* out;
  int64_t n;
};

template <typename F, typename Out, typename A, typename B, typename C, int NIN>
Status Launch(const Plan& p, const LaunchContext& ctx) {
  EwPtrs<A, B, C, Out> ptrs;
  ptrs.a = static_cast<const A*>(p.in[0]);
  ptrs.b = static_cast<const B*>(NIN >= 2 ? p.in[1] : p.in[0]);
  ptrs.c = static_cast<const C*>(NIN >= 3 ? p.in[2] : p.in[0]);
  ptrs.out = static_cast<Out*>(p.out);
  const StridedLayout& l = p.layout;
  cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
  (void)stream;  // unused by the emulation
  bool flat = l.rank == 1;
  for (int k = 0; k < NIN; ++k) flat = flat && (l.strides[k][0] == 0 || l.strides[k][0] == 1);
  const int64_t n = p.n;
  if (flat) {
    constexpr int V = VecWidthOf<A, B, C, Out, NIN>::value;
    const bool sa = l.strides[0][0] == 1;
    const bool sb = NIN >= 2 && l.strides[1][0] == 1;
    const bool sc = NIN >= 3 && l.strides[2][0] == 1;
    bool vec = V > 1 && n >= V && DevAligned(ptrs.out, V * sizeof(Out));
    if (sa) vec = vec && DevAligned(ptrs.a, V * sizeof(A));
    if (sb) vec = vec && DevAligned(ptrs.b, V * sizeof(B));
    if (sc) vec = vec && DevAligned(ptrs.c, V * sizeof(C));
    const dim3 grid(DevBlocks(n, ctx.multiprocessors, vec ? V : 1));
    const dim3 block(kDevBlock);
    auto* kernel = &EwFlatKernel<F, Out, A, B, C, NIN>;
    CNSR_LAUNCH(kernel, grid, block, 0, stream, ptrs, sa, sb, sc, n, vec);
    return CheckLaunch("elementwise (flat)");
  }
  const dim3 grid(DevBlocks(n, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  auto* kernel = &EwStridedKernel<F, Out, A, B, C, NIN>;
  CNSR_LAUNCH(kernel, grid, block, 0, stream, ptrs, l, n);
  return CheckLaunch("elementwise (strided)");
}

template <typename F, typename In, typename Out>
Status Unary(const Plan& p, const LaunchContext& ctx) {
  return Launch<F, Out, In, In, In, 1>(p, ctx);
}
template <typename F, typename In, typename Out>
Status Binary(const Plan& p, const LaunchContext& ctx) {
  return Launch<F, Out, In, In, In, 2>(p, ctx);
}

template <typename F>
Status NumericUnary(const Plan& p, const LaunchContext& ctx) {
  switch (p.in_dtype) {
    case DType::kF32: return Unary<F, float, float>(p, ctx);
    case DType::kI32: return Unary<F, int32_t, int32_t>(p, ctx);
    case DType::kI8: return Unary<F, int8_t, int8_t>(p, ctx);
    case DType::kI64: return Unary<F, int64_t, int64_t>(p, ctx);
    case DType::kU8: return Unary<F, uint8_t, uint8_t>(p, ctx);
    case DType::kI16: return Unary<F, int16_t, int16_t>(p, ctx);
    case DType::kU16: return Unary<F, uint16_t, uint16_t>(p, ctx);
    case DType::kU32: return Unary<F, uint32_t, uint32_t>(p, ctx);
    case DType::kU64: return Unary<F, uint64_t, uint64_t>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

template <typename F>
Status NumericBinary(const Plan& p, const LaunchContext& ctx) {
  switch (p.in_dtype) {
    case DType::kF32: return Binary<F, float, float>(p, ctx);
    case DType::kI32: return Binary<F, int32_t, int32_t>(p, ctx);
    case DType::kI8: return Binary<F, int8_t, int8_t>(p, ctx);
    case DType::kI64: return Binary<F, int64_t, int64_t>(p, ctx);
    case DType::kU8: return Binary<F, uint8_t, uint8_t>(p, ctx);
    case DType::kI16: return Binary<F, int16_t, int16_t>(p, ctx);
    case DType::kU16: return Binary<F, uint16_t, uint16_t>(p, ctx);
    case DType::kU32: return Binary<F, uint32_t, uint32_t>(p, ctx);
    case DType::kU64: return Binary<F, uint64_t, uint64_t>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

template <typename F>
Status CompareBinary(const Plan& p, const LaunchContext& ctx) {
  switch (p.in_dtype) {
    case DType::kF32: return Binary<F, float, uint8_t>(p, ctx);
    case DType::kI32: return Binary<F, int32_t, uint8_t>(p, ctx);
    case DType::kI8: return Binary<F, int8_t, uint8_t>(p, ctx);
    case DType::kBool: return Binary<F, uint8_t, uint8_t>(p, ctx);
    case DType::kI64: return Binary<F, int64_t, uint8_t>(p, ctx);
    case DType::kU8: return Binary<F, uint8_t, uint8_t>(p, ctx);
    case DType::kI16: return Binary<F, int16_t, uint8_t>(p, ctx);
    case DType::kU16: return Binary<F, uint16_t, uint8_t>(p, ctx);
    case DType::kU32: return Binary<F, uint32_t, uint8_t>(p, ctx);
    case DType::kU64: return Binary<F, uint64_t, uint8_t>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

template <typename From>
Status CastFrom(const Plan& p, const LaunchContext& ctx) {
  switch (p.out_dtype) {
    case DType::kF32: return Unary<CastF<float>, From, float>(p, ctx);
    case DType::kI32: return Unary<CastF<int32_t>, From, int32_t>(p, ctx);
    case DType::kI8: return Unary<CastF<int8_t>, From, int8_t>(p, ctx);
    case DType::kBool: return Unary<ToBoolF, From, uint8_t>(p, ctx);
    case DType::kI64: return Unary<CastF<int64_t>, From, int64_t>(p, ctx);
    case DType::kU8: return Unary<CastF<uint8_t>, From, uint8_t>(p, ctx);
    case DType::kI16: return Unary<CastF<int16_t>, From, int16_t>(p, ctx);
    case DType::kU16: return Unary<CastF<uint16_t>, From, uint16_t>(p, ctx);
    case DType::kU32: return Unary<CastF<uint32_t>, From, uint32_t>(p, ctx);
    case DType::kU64: return Unary<CastF<uint64_t>, From, uint64_t>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

Status CastFromBool(const Plan& p, const LaunchContext& ctx) {
  switch (p.out_dtype) {
    case DType::kF32: return Unary<FromBoolF<float>, uint8_t, float>(p, ctx);
    case DType::kI32: return Unary<FromBoolF<int32_t>, uint8_t, int32_t>(p, ctx);
    case DType::kI8: return Unary<FromBoolF<int8_t>, uint8_t, int8_t>(p, ctx);
    case DType::kI64: return Unary<FromBoolF<int64_t>, uint8_t, int64_t>(p, ctx);
    case DType::kU8: return Unary<FromBoolF<uint8_t>, uint8_t, uint8_t>(p, ctx);
    case DType::kI16: return Unary<FromBoolF<int16_t>, uint8_t, int16_t>(p, ctx);
    case DType::kU16: return Unary<FromBoolF<uint16_t>, uint8_t, uint16_t>(p, ctx);
    case DType::kU32: return Unary<FromBoolF<uint32_t>, uint8_t, uint32_t>(p, ctx);
    case DType::kU64: return Unary<FromBoolF<uint64_t>, uint8_t, uint64_t>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

Status Cast(const Plan& p, const LaunchContext& ctx) {
  if (p.in_dtype == p.out_dtype) {
    // Same dtype copies bits (no NaN canonicalization).
    switch (DTypeSize(p.in_dtype)) {
      case 1: return Unary<CastF<uint8_t>, uint8_t, uint8_t>(p, ctx);
      case 2: return Unary<CastF<uint16_t>, uint16_t, uint16_t>(p, ctx);  // f16, bf16
      case 4: return Unary<CastF<uint32_t>, uint32_t, uint32_t>(p, ctx);
      case 8: return Unary<CastF<uint64_t>, uint64_t, uint64_t>(p, ctx);
      default: break;
    }
    return Internal(Prefix(p.op) + "unexpected dtype");
  }
  switch (p.in_dtype) {
    case DType::kF32: return CastFrom<float>(p, ctx);
    case DType::kI32: return CastFrom<int32_t>(p, ctx);
    case DType::kI8: return CastFrom<int8_t>(p, ctx);
    case DType::kBool: return CastFromBool(p, ctx);
    case DType::kI64: return CastFrom<int64_t>(p, ctx);
    case DType::kU8: return CastFrom<uint8_t>(p, ctx);
    case DType::kI16: return CastFrom<int16_t>(p, ctx);
    case DType::kU16: return CastFrom<uint16_t>(p, ctx);
    case DType::kU32: return CastFrom<uint32_t>(p, ctx);
    case DType::kU64: return CastFrom<uint64_t>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

Status Where(const Plan& p, const LaunchContext& ctx) {
  switch (DTypeSize(p.in_dtype)) {
    case 1: return Launch<WhereTag, uint8_t, uint8_t, uint8_t, uint8_t, 3>(p, ctx);
    case 2: return Launch<WhereTag, uint16_t, uint8_t, uint16_t, uint16_t, 3>(p, ctx);  // f16, bf16
    case 4: return Launch<WhereTag, uint32_t, uint8_t, uint32_t, uint32_t, 3>(p, ctx);
    case 8: return Launch<WhereTag, uint64_t, uint8_t, uint64_t, uint64_t, 3>(p, ctx);
    default: break;
  }
  return Internal(Prefix(p.op) + "unexpected dtype");
}

Status Dispatch(const Plan& p, const LaunchContext& ctx) {
  switch (p.op) {
    case Op::kNeg: return NumericUnary<NegF>(p, ctx);
    case Op::kAbs: return NumericUnary<AbsF>(p, ctx);
    case Op::kRelu: return NumericUnary<ReluF>(p, ctx);
    case Op::kExp: return Unary<ExpF, float, float>(p, ctx);
    case Op::kLog: return Unary<LogF, float, float>(p, ctx);
    case Op::kSqrt: return Unary<SqrtF, float, float>(p, ctx);
    case Op::kRsqrt: return Unary<RsqrtF, float, float>(p, ctx);
    case Op::kTanh: return Unary<TanhF, float, float>(p, ctx);
    case Op::kSigmoid: return Unary<SigmoidF, float, float>(p, ctx);
    case Op::kErf: return Unary<ErfF, float, float>(p, ctx);
    case Op::kGeluErf: return Unary<GeluErfF, float, float>(p, ctx);
    case Op::kGeluTanh: return Unary<GeluTanhF, float, float>(p, ctx);
    case Op::kSin: return Unary<SinF, float, float>(p, ctx);
    case Op::kCos: return Unary<CosF, float, float>(p, ctx);
    case Op::kFloor: return Unary<FloorF, float, float>(p, ctx);
    case Op::kCeil: return Unary<CeilF, float, float>(p, ctx);
    case Op::kRound: return Unary<RoundF, float, float>(p, ctx);
    case Op::kAsin: return Unary<AsinF, float, float>(p, ctx);
    case Op::kAcos: return Unary<AcosF, float, float>(p, ctx);
    case Op::kAtan: return Unary<AtanF, float, float>(p, ctx);
    case Op::kSinh: return Unary<SinhF, float, float>(p, ctx);
    case Op::kCosh: return Unary<CoshF, float, float>(p, ctx);
    case Op::kAsinh: return Unary<AsinhF, float, float>(p, ctx);
    case Op::kAcosh: return Unary<AcoshF, float, float>(p, ctx);
    case Op::kAtanh: return Unary<AtanhF, float, float>(p, ctx);
    case Op::kNot: return Unary<NotF, uint8_t, uint8_t>(p, ctx);
    case Op::kCast: return Cast(p, ctx);
    case Op::kAdd: return NumericBinary<AddF>(p, ctx);
    case Op::kSub: return NumericBinary<SubF>(p, ctx);
    case Op::kMul: return NumericBinary<MulF>(p, ctx);
    case Op::kDiv: return NumericBinary<DivF>(p, ctx);
    case Op::kPow: return NumericBinary<PowF>(p, ctx);
    case Op::kFmod: return NumericBinary<FmodF>(p, ctx);
    case Op::kMax: return NumericBinary<MaxF>(p, ctx);
    case Op::kMin: return NumericBinary<MinF>(p, ctx);
    case Op::kEqual: return CompareBinary<EqF>(p, ctx);
    case Op::kNotEqual: return CompareBinary<NeF>(p, ctx);
    case Op::kLess: return CompareBinary<LtF>(p, ctx);
    case Op::kLessEqual: return CompareBinary<LeF>(p, ctx);
    case Op::kGreater: return CompareBinary<GtF>(p, ctx);
    case Op::kGreaterEqual: return CompareBinary<GeF>(p, ctx);
    case Op::kAnd: return Binary<AndF, uint8_t, uint8_t>(p, ctx);
    case Op::kOr: return Binary<OrF, uint8_t, uint8_t>(p, ctx);
    case Op::kXor: return Binary<XorF, uint8_t, uint8_t>(p, ctx);
    case Op::kWhere: return Where(p, ctx);
    default: break;
  }
  return InvalidArgument(Prefix(p.op) + "not an elementwise op");
}

}  // namespace

Status RunElementwise(const KernelCall& call, const LaunchContext& ctx) {
  RETURN_IF_ERROR(ValidateElementwise(call));
  const TensorView& out = call.out();
  const int64_t n = out.num_elements();
  if (n == 0) return OkStatus();
  Plan plan;
  plan.op = call.op;
  plan.num_inputs = call.num_inputs;
  plan.in_dtype = call.op == Op::kWhere ? call.in(1).dtype : call.in(0).dtype;
  plan.out_dtype = out.dtype;
  plan.out = out.data;
  plan.n = n;
  plan.layout = ElementwiseLayout(call);
  for (int i = 0; i < 3; ++i) plan.in[i] = i < call.num_inputs ? call.in(i).data : nullptr;
  return Dispatch(plan, ctx);
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
