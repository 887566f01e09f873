// Copyright (c) Consensor developers.
//
// Tests for kernels/detmath.h: ULP error against glibc's double-precision functions,
// exact special-value semantics, and bit identity across ISAs (baseline vs AVX2+FMA).
//
// Build (standalone):
//   g++ -std=c++20 -O2 -ffp-contract=off -I. -c tests/kernels/detmath_isa_base.cc
//   g++ -std=c++20 -O3 -ffp-contract=off -mavx2 -mfma -I. -c tests/kernels/detmath_isa_avx2.cc
//   g++ -std=c++20 -O2 -ffp-contract=off -I. tests/kernels/detmath_test.cc
//       detmath_isa_base.o detmath_isa_avx2.o -lgtest -lgtest_main -pthread
// Never build with -ffast-math (the reference functions and NaN tests rely on IEEE).
#include "kernels/detmath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace consensor::detmath_isa {
void ApplyA(int fn, const float* x, const float* y, float* out, size_t n);
void ApplyB(int fn, const float* x, const float* y, float* out, size_t n);
}  // namespace consensor::detmath_isa

namespace {

namespace dm = ::consensor::detmath;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr uint32_t kCanon = 0x7FC00000u;

// Error bounds asserted (ULP, see UlpErr); kernels/detmath.h states the measured maxima
// (exp 0.78, log 0.83, tanh 1.35, erf 0.991, sin/cos 0.72, pow 0.94).
constexpr double kExpBound = 0.78;
constexpr double kLogBound = 0.83;
constexpr double kTanhBound = 1.36;
constexpr double kErfBound = 1.0;
constexpr double kSinCosBound = 0.72;
constexpr double kPowBound = 1.0;  // normal results; subnormal results: 1 (2^-149 units)
const float kInf = std::numeric_limits<float>::infinity();
const float kMaxF = std::numeric_limits<float>::max();
const float kMinDen = std::numeric_limits<float>::denorm_min();
const float kMinNorm = std::numeric_limits<float>::min();

// NaNs with various payloads and signs.
const std::vector<uint32_t> kNaNs = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                     0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA5A5A5u, 0x7FC12345u};

// Error of `got` in ULPs of the float format at the reference value `ref`.
// ulp(v) = 2^(floor(log2|v|) - 23), but at least 2^-149. +-inf results are treated as
// +-2^128 so that a spurious overflow counts as a large error. NaN must match NaN.
double UlpErr(float got, double ref) {
  const bool gn = std::isnan(got), rn = std::isnan(ref);
  if (gn || rn) return (gn && rn) ? 0.0 : 1e30;
  double g = got;
  if (std::isinf(got)) g = std::copysign(std::ldexp(1.0, 128), got);
  if (std::isinf(ref)) return (std::isinf(got) && (got > 0) == (ref > 0)) ? 0.0 : 1e30;
  if (std::isinf(static_cast<float>(ref))) {
    // The correctly rounded result overflows: +-inf is exact, FLT_MAX is a real error.
    if (std::isinf(got) && (got > 0) == (ref > 0)) return 0.0;
  }
  const double aref = std::fabs(ref);
  int e = aref == 0 ? -1000 : std::ilogb(aref);
  if (e < -126) e = -126;
  const double ulp = std::ldexp(1.0, e - 23);
  return std::fabs(g - ref) / ulp;
}

struct Stats {
  double max_err = 0;
  float worst_x = 0;
  float worst_got = 0;
  double worst_ref = 0;
  uint64_t count = 0;
  void Add(float x, float got, double ref) {
    const double e = UlpErr(got, ref);
    ++count;
    if (e > max_err) {
      max_err = e;
      worst_x = x;
      worst_got = got;
      worst_ref = ref;
    }
  }
};

bool HaveAvx2Fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// Function ids of detmath_isa_{a,b}.cc.
enum Fn {
  kExp = 0,
  kLog,
  kTanh,
  kSigmoid,
  kErf,
  kGeluErf,
  kGeluTanh,
  kRsqrt,
  kSin,
  kCos,
  kPow,
  kCanonicalize,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh
};

// Evaluates detmath function `fn` on x[0..n) in bulk through the vectorized AVX2+FMA
// instance when the CPU has it (bit-identical to the baseline instance, see
// IdenticalBitsAcrossIsas), else through the baseline instance.
void Apply(int fn, const float* x, const float* y, float* out, size_t n) {
  if (HaveAvx2Fma()) {
    consensor::detmath_isa::ApplyB(fn, x, y, out, n);
  } else {
    consensor::detmath_isa::ApplyA(fn, x, y, out, n);
  }
}

// Every `stride`-th bit pattern of the whole float space (stride 193: about 22 million
// values, both signs, all binades, subnormals, infinities and NaNs), plus every float in
// the given dense ranges of bit patterns [lo, hi).
template <class R>
Stats Sweep(int fn, R ref, const std::vector<std::pair<uint32_t, uint32_t>>& dense, uint32_t stride = 193) {
  Stats st;
  constexpr size_t kChunk = 1 << 16;
  std::vector<float> in, out(kChunk);
  in.reserve(kChunk);
  auto flush = [&] {
    Apply(fn, in.data(), in.data(), out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) st.Add(in[i], out[i], ref(static_cast<double>(in[i])));
    in.clear();
  };
  auto push = [&](uint32_t b) {
    in.push_back(FromBits(b));
    if (in.size() == kChunk) flush();
  };
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += stride) push(static_cast<uint32_t>(b));
  for (auto [lo, hi] : dense) {
    for (uint64_t b = lo; b < hi; ++b) push(static_cast<uint32_t>(b));
  }
  flush();
  return st;
}

void Report(const char* name, const Stats& st, double bound) {
  std::printf("[detmath] %-10s max %.4f ULP over %llu inputs (worst x=%a got=%a ref=%a)\n", name, st.max_err,
              static_cast<unsigned long long>(st.count), st.worst_x, st.worst_got, st.worst_ref);
  EXPECT_LE(st.max_err, bound) << name << " worst x=" << st.worst_x;
}

// Bit patterns of all floats in [a, b) for 0 <= a < b, and the mirror range if neg.
std::pair<uint32_t, uint32_t> Range(float a, float b) { return {Bits(a), Bits(b)}; }
std::pair<uint32_t, uint32_t> NegRange(float a, float b) {
  return {Bits(-a), Bits(-b)};  // -a .. -b with 0 <= a < b: bits increase with magnitude
}

void ExpectBits(float got, float want, const char* what) {
  EXPECT_EQ(Bits(got), Bits(want)) << what << ": got " << got << " (0x" << std::hex << Bits(got) << "), want " << want
                                   << " (0x" << Bits(want) << ")";
}

void ExpectCanonNaN(float got, const char* what) {
  EXPECT_EQ(Bits(got), kCanon) << what << ": got 0x" << std::hex << Bits(got);
}

template <class F>
void ExpectNaNInNaNOut(F f, const char* name) {
  for (uint32_t n : kNaNs) ExpectCanonNaN(f(FromBits(n)), name);
}

// Common special inputs, whose results are compared against the double reference.
std::vector<float> SpecialInputs() {
  std::vector<float> v = {0.0f,         -0.0f,
                          kMinDen,      -kMinDen,
                          2 * kMinDen,  kMinNorm,
                          -kMinNorm,    FromBits(0x007FFFFFu),
                          kMaxF,        -kMaxF,
                          1.0f,         -1.0f,
                          0.5f,         2.0f,
                          88.72283f,    88.722839f,
                          88.7228394f,  88.72284f,
                          89.0f,        -87.33654f,
                          -87.336548f,  -103.27893f,
                          -103.972076f, -103.97208f,
                          -104.0f,      -150.0f,
                          1e-30f,       -1e-30f,
                          1e30f,        -1e30f,
                          3.9f,         3.92f,
                          4.0f,         10.0f,
                          0.625f,       -0.625f,
                          1e-8f,        0.7853981f,
                          1.5707964f,   3.1415927f,
                          1e10f,        16367173.0f * 4.722366482869645e21f};
  return v;
}

// ------------------------------------------------------------------------------------
// exp

TEST(DetMath, ExpAccuracy) {
  const Stats st = Sweep(kExp, [](double x) { return std::exp(x); },
                         {Range(0x1p-25f, 0x1.4p-25f), NegRange(96.0f, 104.0f), NegRange(86.0f, 88.0f),
                          Range(0.25f, 0.35f), NegRange(0.25f, 0.35f), Range(86.0f, 89.0f)});
  Report("exp", st, kExpBound);
}

TEST(DetMath, ExpSpecials) {
  ExpectNaNInNaNOut([](float x) { return dm::exp(x); }, "exp(NaN)");
  ExpectBits(dm::exp(0.0f), 1.0f, "exp(+0)");
  ExpectBits(dm::exp(-0.0f), 1.0f, "exp(-0)");
  ExpectBits(dm::exp(kInf), kInf, "exp(inf)");
  ExpectBits(dm::exp(-kInf), 0.0f, "exp(-inf)");
  ExpectBits(dm::exp(kMaxF), kInf, "exp(max)");
  ExpectBits(dm::exp(-kMaxF), 0.0f, "exp(-max)");
  // Largest x with a finite result: 0x1.62e42ep+6; the next float overflows.
  EXPECT_FALSE(std::isinf(dm::exp(0x1.62e42ep+6f)));
  ExpectBits(dm::exp(0x1.62e430p+6f), kInf, "exp(0x1.62e430p+6) overflows");
  ExpectBits(dm::exp(-104.0f), 0.0f, "exp(-104)");
  ExpectBits(dm::exp(-0x1.9fe36ap+6f), 0.0f, "exp(-0x1.9fe36ap+6) underflows");
  EXPECT_GT(dm::exp(-0x1.9fe368p+6f), 0.0f);
  ExpectBits(dm::exp(kMinDen), 1.0f, "exp(denorm)");
  ExpectBits(dm::exp(-kMinDen), 1.0f, "exp(-denorm)");
  // Deep subnormal results: correctly computed, not flushed.
  EXPECT_GT(dm::exp(-100.0f), 0.0f);
  EXPECT_LT(dm::exp(-100.0f), kMinNorm);
  EXPECT_LE(UlpErr(dm::exp(-100.0f), std::exp(-100.0)), kExpBound);
  ExpectBits(dm::exp(-103.2789f), kMinDen, "exp(-103.2789) = smallest subnormal");
  for (float x : SpecialInputs()) EXPECT_LE(UlpErr(dm::exp(x), std::exp((double)x)), kExpBound) << x;
}

// ------------------------------------------------------------------------------------
// log

TEST(DetMath, LogAccuracy) {
  const Stats st = Sweep(kLog, [](double x) { return std::log(x); },
                         {Range(0.6f, 0.8f), Range(1.0f, 1.5f), Range(0.0f, 0x1p-130f), Range(0x1.fp127f, kInf)});
  Report("log", st, kLogBound);
}

TEST(DetMath, LogSpecials) {
  ExpectNaNInNaNOut([](float x) { return dm::log(x); }, "log(NaN)");
  ExpectBits(dm::log(0.0f), -kInf, "log(+0)");
  ExpectBits(dm::log(-0.0f), -kInf, "log(-0)");
  ExpectBits(dm::log(kInf), kInf, "log(inf)");
  ExpectCanonNaN(dm::log(-kInf), "log(-inf)");
  ExpectCanonNaN(dm::log(-1.0f), "log(-1)");
  ExpectCanonNaN(dm::log(-kMinDen), "log(-denorm)");
  ExpectBits(dm::log(1.0f), 0.0f, "log(1) = +0");
  EXPECT_LE(UlpErr(dm::log(kMinDen), std::log((double)kMinDen)), kLogBound);
  EXPECT_LE(UlpErr(dm::log(kMaxF), std::log((double)kMaxF)), kLogBound);
  for (float x : SpecialInputs()) EXPECT_LE(UlpErr(dm::log(x), std::log((double)x)), kLogBound) << x;
}

// ------------------------------------------------------------------------------------
// tanh

TEST(DetMath, TanhAccuracy) {
  const Stats st =
      Sweep(kTanh, [](double x) { return std::tanh(x); }, {Range(0.5f, 0.8f), NegRange(0.6f, 0.7f), Range(1.0f, 1.2f)});
  Report("tanh", st, kTanhBound);
}

TEST(DetMath, TanhSpecials) {
  ExpectNaNInNaNOut([](float x) { return dm::tanh(x); }, "tanh(NaN)");
  ExpectBits(dm::tanh(0.0f), 0.0f, "tanh(+0)");
  ExpectBits(dm::tanh(-0.0f), -0.0f, "tanh(-0)");
  ExpectBits(dm::tanh(kInf), 1.0f, "tanh(inf)");
  ExpectBits(dm::tanh(-kInf), -1.0f, "tanh(-inf)");
  ExpectBits(dm::tanh(kMaxF), 1.0f, "tanh(max)");
  ExpectBits(dm::tanh(-kMaxF), -1.0f, "tanh(-max)");
  ExpectBits(dm::tanh(kMinDen), kMinDen, "tanh(denorm)");
  ExpectBits(dm::tanh(-kMinDen), -kMinDen, "tanh(-denorm)");
  ExpectBits(dm::tanh(20.0f), 1.0f, "tanh(20)");
  for (float x : SpecialInputs()) EXPECT_LE(UlpErr(dm::tanh(x), std::tanh((double)x)), kTanhBound) << x;
}

// ------------------------------------------------------------------------------------
// erf

TEST(DetMath, ErfAccuracy) {
  const Stats st = Sweep(
      kErf, [](double x) { return std::erf(x); },
      {Range(0.8f, 1.0f), Range(1.0f, 1.25f), NegRange(2.0f, 2.5f), Range(3.8f, 4.0f)}, 257);
  Report("erf", st, kErfBound);
}

TEST(DetMath, ErfSpecials) {
  ExpectNaNInNaNOut([](float x) { return dm::erf(x); }, "erf(NaN)");
  ExpectBits(dm::erf(0.0f), 0.0f, "erf(+0)");
  ExpectBits(dm::erf(-0.0f), -0.0f, "erf(-0)");
  ExpectBits(dm::erf(kInf), 1.0f, "erf(inf)");
  ExpectBits(dm::erf(-kInf), -1.0f, "erf(-inf)");
  ExpectBits(dm::erf(kMaxF), 1.0f, "erf(max)");
  ExpectBits(dm::erf(-kMaxF), -1.0f, "erf(-max)");
  ExpectBits(dm::erf(10.0f), 1.0f, "erf(10)");
  EXPECT_GT(dm::erf(kMinDen), 0.0f);
  for (float x : SpecialInputs()) EXPECT_LE(UlpErr(dm::erf(x), std::erf((double)x)), kErfBound) << x;
}

// ------------------------------------------------------------------------------------
// sin / cos

TEST(DetMath, SinAccuracy) {
  const Stats st = Sweep(
      kSin, [](double x) { return std::sin(x); },
      {Range(0.7f, 0.9f), NegRange(1.4f, 1.7f), Range(3.0f, 3.3f), Range(0x1p60f, 0x1.1p60f)}, 331);
  Report("sin", st, kSinCosBound);
}

TEST(DetMath, CosAccuracy) {
  const Stats st = Sweep(
      kCos, [](double x) { return std::cos(x); },
      {Range(0.7f, 0.9f), Range(1.5f, 1.65f), NegRange(4.6f, 4.8f), Range(0x1p100f, 0x1.1p100f)}, 331);
  Report("cos", st, kSinCosBound);
}

TEST(DetMath, SinCosSpecials) {
  ExpectNaNInNaNOut([](float x) { return dm::sin(x); }, "sin(NaN)");
  ExpectNaNInNaNOut([](float x) { return dm::cos(x); }, "cos(NaN)");
  ExpectBits(dm::sin(0.0f), 0.0f, "sin(+0)");
  ExpectBits(dm::sin(-0.0f), -0.0f, "sin(-0)");
  ExpectBits(dm::cos(0.0f), 1.0f, "cos(+0)");
  ExpectBits(dm::cos(-0.0f), 1.0f, "cos(-0)");
  ExpectCanonNaN(dm::sin(kInf), "sin(inf)");
  ExpectCanonNaN(dm::sin(-kInf), "sin(-inf)");
  ExpectCanonNaN(dm::cos(kInf), "cos(inf)");
  ExpectCanonNaN(dm::cos(-kInf), "cos(-inf)");
  ExpectBits(dm::sin(kMinDen), kMinDen, "sin(denorm)");
  ExpectBits(dm::sin(-kMinDen), -kMinDen, "sin(-denorm)");
  ExpectBits(dm::cos(kMinDen), 1.0f, "cos(denorm)");
  for (float x : SpecialInputs()) {
    EXPECT_LE(UlpErr(dm::sin(x), std::sin((double)x)), kSinCosBound) << x;
    EXPECT_LE(UlpErr(dm::cos(x), std::cos((double)x)), kSinCosBound) << x;
  }
}

// ------------------------------------------------------------------------------------
// Inverse trigonometric and hyperbolic functions (section 5.15): compositions of the
// functions above with atan's polynomial. Bounds are the measured maxima of the section's
// sweep, rounded up; here a coarser sweep (every 1009th bit pattern) plus dense ranges.

struct InverseCase {
  int fn;
  const char* name;
  double (*ref)(double);
  double bound;
  float dense_lo, dense_hi;
};

const InverseCase kInverseCases[] = {
    {kAsin, "asin", [](double x) { return std::asin(x); }, 3.2, 0.40f, 0.47f},
    {kAcos, "acos", [](double x) { return std::acos(x); }, 2.9, 0.66f, 0.72f},
    {kAtan, "atan", [](double x) { return std::atan(x); }, 2.1, 0.41f, 0.45f},
    {kSinh, "sinh", [](double x) { return std::sinh(x); }, 1.7, 2.0f, 2.2f},
    {kCosh, "cosh", [](double x) { return std::cosh(x); }, 1.7, 0.5f, 0.6f},
    {kAsinh, "asinh", [](double x) { return std::asinh(x); }, 2.1, 0.23f, 0.26f},
    {kAcosh, "acosh", [](double x) { return std::acosh(x); }, 2.9, 1.0f, 1.02f},
    {kAtanh, "atanh", [](double x) { return std::atanh(x); }, 2.2, 0.19f, 0.21f},
};

TEST(DetMath, InverseTrigAndHyperbolicAccuracy) {
  for (const InverseCase& c : kInverseCases) {
    const Stats st = Sweep(c.fn, c.ref, {Range(c.dense_lo, c.dense_hi), NegRange(c.dense_lo, c.dense_hi)}, 1009);
    Report(c.name, st, c.bound);
  }
}

TEST(DetMath, InverseTrigAndHyperbolicSpecials) {
  const float pio2 = 0x1.921fb6p+0f, pi = 0x1.921fb6p+1f;
  for (const InverseCase& c : kInverseCases) {
    std::vector<float> x, out(kNaNs.size());
    for (uint32_t b : kNaNs) x.push_back(FromBits(b));
    Apply(c.fn, x.data(), x.data(), out.data(), x.size());
    for (float v : out) ExpectCanonNaN(v, c.name);
  }
  ExpectBits(dm::atan(0.0f), 0.0f, "atan(+0)");
  ExpectBits(dm::atan(-0.0f), -0.0f, "atan(-0)");
  ExpectBits(dm::atan(kInf), pio2, "atan(inf)");
  ExpectBits(dm::atan(-kInf), -pio2, "atan(-inf)");
  ExpectBits(dm::atan(kMinDen), kMinDen, "atan(denorm)");
  ExpectBits(dm::asin(-0.0f), -0.0f, "asin(-0)");
  ExpectBits(dm::asin(1.0f), pio2, "asin(1)");
  ExpectBits(dm::asin(-1.0f), -pio2, "asin(-1)");
  ExpectBits(dm::acos(1.0f), 0.0f, "acos(1)");
  ExpectBits(dm::acos(-1.0f), pi, "acos(-1)");
  ExpectBits(dm::acos(0.0f), pio2, "acos(0)");
  for (float v : {1.0000001f, -1.0000001f, 2.0f, kInf, -kInf}) {
    ExpectCanonNaN(dm::asin(v), "asin out of domain");
    ExpectCanonNaN(dm::acos(v), "acos out of domain");
    ExpectCanonNaN(dm::atanh(v), "atanh out of domain");
  }
  ExpectBits(dm::sinh(-0.0f), -0.0f, "sinh(-0)");
  ExpectBits(dm::sinh(kInf), kInf, "sinh(inf)");
  ExpectBits(dm::sinh(-kInf), -kInf, "sinh(-inf)");
  ExpectBits(dm::sinh(89.5f), kInf, "sinh overflow");
  ExpectBits(dm::sinh(kMinDen), kMinDen, "sinh(denorm)");
  ExpectBits(dm::cosh(-0.0f), 1.0f, "cosh(-0)");
  ExpectBits(dm::cosh(-kInf), kInf, "cosh(-inf)");
  ExpectBits(dm::asinh(-0.0f), -0.0f, "asinh(-0)");
  ExpectBits(dm::asinh(kInf), kInf, "asinh(inf)");
  ExpectBits(dm::asinh(-kInf), -kInf, "asinh(-inf)");
  ExpectBits(dm::asinh(kMinDen), kMinDen, "asinh(denorm)");
  ExpectBits(dm::acosh(1.0f), 0.0f, "acosh(1)");
  ExpectBits(dm::acosh(kInf), kInf, "acosh(inf)");
  for (float v : {0.9999999f, 0.0f, -0.0f, -2.0f, -kInf}) ExpectCanonNaN(dm::acosh(v), "acosh below 1");
  ExpectBits(dm::atanh(1.0f), kInf, "atanh(1)");
  ExpectBits(dm::atanh(-1.0f), -kInf, "atanh(-1)");
  ExpectBits(dm::atanh(-0.0f), -0.0f, "atanh(-0)");
  ExpectBits(dm::atanh(kMinDen), kMinDen, "atanh(denorm)");
  // Largest and smallest finite arguments stay finite where the function is.
  EXPECT_LE(UlpErr(dm::asinh(kMaxF), std::asinh(static_cast<double>(kMaxF))), 2.1);
  EXPECT_LE(UlpErr(dm::acosh(kMaxF), std::acosh(static_cast<double>(kMaxF))), 2.9);
  EXPECT_LE(UlpErr(dm::cosh(89.4f), std::cosh(static_cast<double>(89.4f))), 1.7);
}

// Hardest arguments for the reduction: the floats closest to a multiple of pi/2 in every
// binade (found by an exhaustive search over all positive floats).
TEST(DetMath, SinCosAllBinadesNearMultiplesOfPiOver2) {
  Stats ss, sc;
  for (uint32_t be = 1; be < 255; ++be) {
    // every float with mantissa pattern close to 0 / close to ones and a few in between
    for (uint32_t mant = 0; mant < (1u << 23); mant += 4099) {
      const float x = FromBits((be << 23) | mant);
      ss.Add(x, dm::sin(x), std::sin((double)x));
      sc.Add(x, dm::cos(x), std::cos((double)x));
    }
  }
  Report("sin-bin", ss, kSinCosBound);
  Report("cos-bin", sc, kSinCosBound);
}

// Exhaustive check over all 2^32 inputs of every univariate function with an accuracy
// claim. Too slow for the default run (about 6 x 4.3e9 evaluations); run it with
//   detmath_test --gtest_also_run_disabled_tests --gtest_filter='*Exhaustive*'
// It uses every hardware thread.
TEST(DetMath, DISABLED_ExhaustiveUnivariate) {
  struct Case {
    int fn;
    const char* name;
    double (*ref)(double);
    double bound;
  };
  const Case cases[] = {{kExp, "exp", [](double x) { return std::exp(x); }, kExpBound},
                        {kLog, "log", [](double x) { return std::log(x); }, kLogBound},
                        {kTanh, "tanh", [](double x) { return std::tanh(x); }, kTanhBound},
                        {kErf, "erf", [](double x) { return std::erf(x); }, kErfBound},
                        {kSin, "sin", [](double x) { return std::sin(x); }, kSinCosBound},
                        {kCos, "cos", [](double x) { return std::cos(x); }, kSinCosBound}};
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  for (const Case& c : cases) {
    std::vector<Stats> normal(nt), sub(nt);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < nt; ++t) {
      threads.emplace_back([&, t] {
        constexpr uint64_t kChunk = 1 << 16;
        std::vector<float> in(kChunk), out(kChunk);
        for (uint64_t base = t * kChunk; base < (uint64_t{1} << 32); base += nt * kChunk) {
          for (uint64_t i = 0; i < kChunk; ++i) in[i] = FromBits(static_cast<uint32_t>(base + i));
          Apply(c.fn, in.data(), in.data(), out.data(), kChunk);
          for (uint64_t i = 0; i < kChunk; ++i) {
            const double r = c.ref(static_cast<double>(in[i]));
            const bool subnormal = r != 0 && std::fabs(r) < kMinNorm;
            (subnormal ? sub[t] : normal[t]).Add(in[i], out[i], r);
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    Stats n, s;
    for (unsigned t = 0; t < nt; ++t) {
      for (auto [dst, src] : {std::pair{&n, &normal[t]}, std::pair{&s, &sub[t]}}) {
        dst->count += src->count;
        if (src->max_err > dst->max_err) {
          const uint64_t cnt = dst->count;
          *dst = *src;
          dst->count = cnt;
        }
      }
    }
    Report(c.name, n, c.bound);
    std::string subname = std::string(c.name) + "-sub";
    Report(subname.c_str(), s, c.bound);
  }
}

// ------------------------------------------------------------------------------------
// sigmoid / gelu / rsqrt: spec-defined compositions; test the exact sequence.

TEST(DetMath, SigmoidIsSpecSequence) {
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 997) {
    const float x = FromBits(static_cast<uint32_t>(b));
    const float e = dm::exp(-x);
    const float want = dm::canonicalize_nan(1.0f / (1.0f + e));
    ExpectBits(dm::sigmoid(x), want, "sigmoid");
    if (::testing::Test::HasFailure()) break;
  }
  ExpectBits(dm::sigmoid(-kInf), 0.0f, "sigmoid(-inf)");
  ExpectBits(dm::sigmoid(kInf), 1.0f, "sigmoid(inf)");
  ExpectBits(dm::sigmoid(0.0f), 0.5f, "sigmoid(0)");
  ExpectNaNInNaNOut([](float x) { return dm::sigmoid(x); }, "sigmoid(NaN)");
}

TEST(DetMath, GeluIsSpecSequence) {
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 997) {
    const float x = FromBits(static_cast<uint32_t>(b));
    {
      const float t = x * 0.70710678118654752f;
      const float e = dm::erf(t);
      const float h = 0.5f * x;
      const float s = 1.0f + e;
      ExpectBits(dm::gelu_erf(x), dm::canonicalize_nan(h * s), "gelu_erf");
    }
    {
      volatile float u = x * x;  // volatile: keep each op separately rounded in the test too
      u = u * x;
      volatile float c = 0.044715f * u;
      volatile float inner = x + c;
      inner = 0.7978845608028654f * inner;
      const float th = dm::tanh(inner);
      const float h = 0.5f * x;
      const float s = 1.0f + th;
      ExpectBits(dm::gelu_tanh(x), dm::canonicalize_nan(h * s), "gelu_tanh");
    }
    if (::testing::Test::HasFailure()) break;
  }
  ExpectBits(dm::gelu_erf(0.0f), 0.0f, "gelu_erf(+0)");
  ExpectBits(dm::gelu_erf(-0.0f), -0.0f, "gelu_erf(-0)");
  ExpectBits(dm::gelu_tanh(-0.0f), -0.0f, "gelu_tanh(-0)");
  ExpectBits(dm::gelu_erf(kInf), kInf, "gelu_erf(inf)");
  ExpectBits(dm::gelu_tanh(kInf), kInf, "gelu_tanh(inf)");
  ExpectCanonNaN(dm::gelu_erf(-kInf), "gelu_erf(-inf) is NaN by the spec formula");
  ExpectCanonNaN(dm::gelu_tanh(-kInf), "gelu_tanh(-inf) is NaN by the spec formula");
  ExpectBits(dm::gelu_tanh(-1e30f), -0.0f, "gelu_tanh(-1e30)");
  ExpectBits(dm::gelu_erf(-1e30f), -0.0f, "gelu_erf(-1e30)");
  ExpectNaNInNaNOut([](float x) { return dm::gelu_erf(x); }, "gelu_erf(NaN)");
  ExpectNaNInNaNOut([](float x) { return dm::gelu_tanh(x); }, "gelu_tanh(NaN)");
}

TEST(DetMath, Rsqrt) {
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 997) {
    const float x = FromBits(static_cast<uint32_t>(b));
    ExpectBits(dm::rsqrt(x), dm::canonicalize_nan(1.0f / std::sqrt(x)), "rsqrt");
    if (::testing::Test::HasFailure()) break;
  }
  ExpectBits(dm::rsqrt(0.0f), kInf, "rsqrt(+0)");
  ExpectBits(dm::rsqrt(-0.0f), -kInf, "rsqrt(-0)");
  ExpectBits(dm::rsqrt(kInf), 0.0f, "rsqrt(inf)");
  ExpectBits(dm::rsqrt(4.0f), 0.5f, "rsqrt(4)");
  ExpectCanonNaN(dm::rsqrt(-1.0f), "rsqrt(-1)");
  ExpectCanonNaN(dm::rsqrt(-kInf), "rsqrt(-inf)");
  ExpectNaNInNaNOut([](float x) { return dm::rsqrt(x); }, "rsqrt(NaN)");
}

TEST(DetMath, CanonicalizeNaN) {
  for (uint32_t n : kNaNs) ExpectCanonNaN(dm::canonicalize_nan(FromBits(n)), "canonicalize");
  for (float x : SpecialInputs()) ExpectBits(dm::canonicalize_nan(x), x, "non-NaN unchanged");
  ExpectBits(dm::canonicalize_nan(kInf), kInf, "inf unchanged");
  ExpectBits(dm::canonicalize_nan(-kInf), -kInf, "-inf unchanged");
}

// ------------------------------------------------------------------------------------
// pow

// Small deterministic PRNG (splitmix64).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * 0x1p-53; }
};

TEST(DetMath, PowAccuracy) {
  Rng rng{12345};
  Stats normal, subnormal;
  auto check = [&](float x, float y) {
    const double ref = std::pow((double)x, (double)y);
    const float got = dm::pow(x, y);
    const double aref = std::fabs(ref);
    if (std::isnan(ref) || aref == 0 || std::isinf(ref)) {
      normal.Add(x, got, ref);
    } else if (aref >= kMinNorm && aref <= kMaxF) {
      normal.Add(x, got, ref);
    } else if (aref < kMinNorm) {
      subnormal.Add(x, got, ref);
    }
  };
  // Random x over all positive finite floats, y chosen so that the result spans the
  // whole range (including overflow and underflow).
  for (int i = 0; i < 1000000; ++i) {
    const float x = FromBits(static_cast<uint32_t>(rng.Next() % 0x7F800000u));
    const double lx = std::log((double)x);
    const double target = -110.0 + 200.0 * rng.Uniform();  // log of the result
    float y = (lx == 0) ? 1.0f : static_cast<float>(target / lx);
    check(x, y);
    check(-x, std::nearbyint(y));  // negative base, integer exponent
  }
  // x near 1 with huge y, and moderate x with moderate y.
  for (int i = 0; i < 500000; ++i) {
    const float x = static_cast<float>(1.0 + (rng.Uniform() - 0.5) * 1e-3);
    const float y = static_cast<float>((rng.Uniform() - 0.5) * 2e5);
    check(x, y);
    const float x2 = static_cast<float>(rng.Uniform() * 100);
    const float y2 = static_cast<float>((rng.Uniform() - 0.5) * 40);
    check(x2, y2);
    check(-x2, std::nearbyint(y2));
  }
  // Every float in a dense range for a few fixed exponents.
  for (float y : {0.5f, 2.0f, 3.0f, -1.0f, 1.0f / 3.0f, 7.5f, -2.5f}) {
    for (uint32_t b = Bits(0.5f); b < Bits(2.0f); b += 41) check(FromBits(b), y);
  }
  Report("pow", normal, kPowBound);
  // Subnormal results: at most one subnormal ULP from the reference (the core rounds
  // twice: once to 24 bits, once to the subnormal grid).
  Report("pow-sub", subnormal, 1.0);
}

TEST(DetMath, PowExactCases) {
  ExpectBits(dm::pow(2.0f, 10.0f), 1024.0f, "2^10");
  ExpectBits(dm::pow(-2.0f, 3.0f), -8.0f, "(-2)^3");
  ExpectBits(dm::pow(-2.0f, 2.0f), 4.0f, "(-2)^2");
  ExpectBits(dm::pow(10.0f, 2.0f), 100.0f, "10^2");
  ExpectBits(dm::pow(4.0f, 0.5f), 2.0f, "4^0.5");
  ExpectBits(dm::pow(2.0f, -149.0f), kMinDen, "2^-149");
  ExpectBits(dm::pow(2.0f, 127.0f), 0x1p127f, "2^127");
  ExpectBits(dm::pow(2.0f, 128.0f), kInf, "2^128");
  ExpectBits(dm::pow(2.0f, -150.0f), 0.0f, "2^-150 ties to even -> 0");
  ExpectBits(dm::pow(3.0f, 5.0f), 243.0f, "3^5");
  ExpectBits(dm::pow(-3.0f, 5.0f), -243.0f, "(-3)^5");
  ExpectBits(dm::pow(0.5f, -3.0f), 8.0f, "0.5^-3");
}

TEST(DetMath, PowSpecials) {
  const float nan = FromBits(0x7FC00000u), nan2 = FromBits(0xFFA5A5A5u);
  // y == 0 -> 1 for any x, including NaN.
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, kInf, -kInf, nan, nan2, 3.5f, -3.5f}) {
    ExpectBits(dm::pow(x, 0.0f), 1.0f, "pow(x, +0)");
    ExpectBits(dm::pow(x, -0.0f), 1.0f, "pow(x, -0)");
  }
  // x == 1 -> 1 for any y, including NaN.
  for (float y : {0.0f, 2.0f, -2.0f, kInf, -kInf, nan, nan2, 0.5f}) {
    ExpectBits(dm::pow(1.0f, y), 1.0f, "pow(1, y)");
  }
  // NaN otherwise.
  ExpectCanonNaN(dm::pow(nan2, 2.0f), "pow(NaN, 2)");
  ExpectCanonNaN(dm::pow(2.0f, nan2), "pow(2, NaN)");
  ExpectCanonNaN(dm::pow(-1.0f, nan), "pow(-1, NaN)");
  ExpectCanonNaN(dm::pow(nan, 1.0f), "pow(NaN, 1)");
  // Negative finite x with non-integer y.
  ExpectCanonNaN(dm::pow(-8.0f, 1.0f / 3.0f), "pow(-8, 1/3)");
  ExpectCanonNaN(dm::pow(-2.0f, 0.5f), "pow(-2, 0.5)");
  ExpectCanonNaN(dm::pow(-kMinDen, 1.5f), "pow(-denorm, 1.5)");
  // y = +-inf.
  ExpectBits(dm::pow(-1.0f, kInf), 1.0f, "pow(-1, inf)");
  ExpectBits(dm::pow(-1.0f, -kInf), 1.0f, "pow(-1, -inf)");
  ExpectBits(dm::pow(0.5f, kInf), 0.0f, "pow(0.5, inf)");
  ExpectBits(dm::pow(-0.5f, kInf), 0.0f, "pow(-0.5, inf)");
  ExpectBits(dm::pow(0.5f, -kInf), kInf, "pow(0.5, -inf)");
  ExpectBits(dm::pow(2.0f, kInf), kInf, "pow(2, inf)");
  ExpectBits(dm::pow(-2.0f, kInf), kInf, "pow(-2, inf)");
  ExpectBits(dm::pow(2.0f, -kInf), 0.0f, "pow(2, -inf)");
  ExpectBits(dm::pow(0.0f, kInf), 0.0f, "pow(0, inf)");
  ExpectBits(dm::pow(0.0f, -kInf), kInf, "pow(0, -inf)");
  ExpectBits(dm::pow(kInf, kInf), kInf, "pow(inf, inf)");
  ExpectBits(dm::pow(kInf, -kInf), 0.0f, "pow(inf, -inf)");
  ExpectBits(dm::pow(-kInf, kInf), kInf, "pow(-inf, inf)");
  // x = +-0.
  ExpectBits(dm::pow(0.0f, -3.0f), kInf, "pow(+0, -3)");
  ExpectBits(dm::pow(-0.0f, -3.0f), -kInf, "pow(-0, -3)");
  ExpectBits(dm::pow(-0.0f, -2.0f), kInf, "pow(-0, -2)");
  ExpectBits(dm::pow(-0.0f, -0.5f), kInf, "pow(-0, -0.5)");
  ExpectBits(dm::pow(0.0f, 3.0f), 0.0f, "pow(+0, 3)");
  ExpectBits(dm::pow(-0.0f, 3.0f), -0.0f, "pow(-0, 3)");
  ExpectBits(dm::pow(-0.0f, 2.0f), 0.0f, "pow(-0, 2)");
  ExpectBits(dm::pow(-0.0f, 0.5f), 0.0f, "pow(-0, 0.5)");
  ExpectBits(dm::pow(-0.0f, 1e30f), 0.0f, "pow(-0, 1e30)");
  // x = +-inf.
  ExpectBits(dm::pow(kInf, -2.0f), 0.0f, "pow(inf, -2)");
  ExpectBits(dm::pow(kInf, 0.5f), kInf, "pow(inf, 0.5)");
  ExpectBits(dm::pow(-kInf, -3.0f), -0.0f, "pow(-inf, -3)");
  ExpectBits(dm::pow(-kInf, -2.0f), 0.0f, "pow(-inf, -2)");
  ExpectBits(dm::pow(-kInf, 3.0f), -kInf, "pow(-inf, 3)");
  ExpectBits(dm::pow(-kInf, 2.0f), kInf, "pow(-inf, 2)");
  ExpectBits(dm::pow(-kInf, 0.5f), kInf, "pow(-inf, 0.5)");
  // Odd/even classification of large and small y.
  ExpectBits(dm::pow(-1.0f, 16777215.0f), -1.0f, "pow(-1, 2^24-1)");
  ExpectBits(dm::pow(-1.0f, 16777216.0f), 1.0f, "pow(-1, 2^24)");
  ExpectBits(dm::pow(-1.0f, 1e30f), 1.0f, "pow(-1, 1e30)");
  ExpectCanonNaN(dm::pow(-1.0f, 0.5f), "pow(-1, 0.5)");
  ExpectCanonNaN(dm::pow(-1.0f, kMinDen), "pow(-1, denorm)");
  ExpectBits(dm::pow(-1.0f, 1.0f), -1.0f, "pow(-1, 1)");
  ExpectBits(dm::pow(-1.0f, -1.0f), -1.0f, "pow(-1, -1)");
  // Overflow / underflow signs.
  ExpectBits(dm::pow(-10.0f, 39.0f), -kInf, "pow(-10, 39)");
  ExpectBits(dm::pow(-10.0f, 40.0f), kInf, "pow(-10, 40)");
  ExpectBits(dm::pow(-10.0f, -51.0f), -0.0f, "pow(-10, -51)");
  ExpectBits(dm::pow(kMaxF, 2.0f), kInf, "pow(max, 2)");
  ExpectBits(dm::pow(kMinDen, 2.0f), 0.0f, "pow(denorm, 2)");
  ExpectBits(dm::pow(kMinDen, -1.0f), kInf, "pow(denorm, -1)");
  ExpectBits(dm::pow(kMaxF, -1.0f), FromBits(0x00200000u), "pow(max, -1) subnormal");
}

// ------------------------------------------------------------------------------------
// Cross-ISA bit identity: the same functions compiled for the baseline ISA and with
// -mavx2 -mfma (vectorized loops, hardware FMA) must give identical bits.

TEST(DetMath, IdenticalBitsAcrossIsas) {
  if (!HaveAvx2Fma()) {
    GTEST_SKIP() << "CPU lacks AVX2/FMA";
  }
  std::vector<float> x, y;
  Rng rng{777};
  for (uint32_t n : kNaNs) x.push_back(FromBits(n));
  for (float v : SpecialInputs()) x.push_back(v);
  for (float v : {kInf, -kInf}) x.push_back(v);
  const size_t nspec = x.size();
  for (size_t i = 0; i < nspec; ++i) {
    for (size_t j = 0; j < nspec; ++j) {
      x.push_back(x[i]);
      y.push_back(x[j]);
    }
  }
  y.insert(y.begin(), x.begin(), x.begin() + nspec);  // align: first nspec pairs (x, x)
  while (x.size() < (1u << 20)) {
    const uint64_t r = rng.Next();
    float v = FromBits(static_cast<uint32_t>(r));
    if ((r >> 32) % 4 == 0) v = static_cast<float>(((r >> 40) * 0x1p-24 - 0.5) * 20.0);  // [-10,10)
    x.push_back(v);
    float w = FromBits(static_cast<uint32_t>(r >> 32));
    if ((r >> 33) % 3 == 0) w = static_cast<float>((r >> 45) % 64) - 32.0f;
    y.push_back(w);
  }
  ASSERT_EQ(x.size(), y.size());
  std::vector<float> a(x.size()), b(x.size());
  const char* names[] = {"exp",       "log",   "tanh", "sigmoid", "erf",  "gelu_erf",
                         "gelu_tanh", "rsqrt", "sin",  "cos",     "pow",  "canonicalize_nan",
                         "asin",      "acos",  "atan", "sinh",    "cosh", "asinh",
                         "acosh",     "atanh"};
  for (int fn = 0; fn < 20; ++fn) {
    consensor::detmath_isa::ApplyA(fn, x.data(), y.data(), a.data(), x.size());
    consensor::detmath_isa::ApplyB(fn, x.data(), y.data(), b.data(), x.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (Bits(a[i]) != Bits(b[i])) {
        if (mismatches++ < 5) {
          ADD_FAILURE() << names[fn] << " differs at x=" << x[i] << " y=" << y[i] << ": 0x" << std::hex << Bits(a[i])
                        << " vs 0x" << Bits(b[i]);
        }
      }
    }
    EXPECT_EQ(mismatches, 0u) << names[fn];
  }
}

}  // namespace
