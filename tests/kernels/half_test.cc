// f16 and bf16 (docs/DETERMINISM.md 1.3, 1.4): the conversions checked exhaustively and
// against independent references, and every op family checked against its definition (the
// f32 rule on the exactly widened inputs, rounded once), with RunAll comparing portable/AVX2
// x 1/2/8 threads byte for byte.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "kernels/checks/half_plan.h"
#include "kernels/cpu/conv_direct_impl.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half_operands.h"
#include "kernels/cpu/scratch_cache.h"
#include "kernels/half.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

float Widen(DType t, uint16_t h) { return t == DType::kF16 ? half::F16ToF32(h) : half::BF16ToF32(h); }
uint16_t Narrow(DType t, float x) { return t == DType::kF16 ? half::F32ToF16(x) : half::F32ToBF16(x); }
bool IsNaN16(DType t, uint16_t h) { return t == DType::kF16 ? (h & 0x7FFFu) > 0x7C00u : (h & 0x7FFFu) > 0x7F80u; }

// binary16 value from its fields, in double (exact), written from the format's definition.
double F16Value(uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 0x1F && m == 0) return (h & 0x8000) ? -INFINITY : INFINITY;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// f32 -> bf16 written as "the nearer of the two neighbours, ties to the even one", in double.
uint16_t RefF32ToBF16(float x) {
  if (x != x) return 0x7FC0;
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  if ((u & 0xFFFFu) == 0) return down;
  const uint16_t up = static_cast<uint16_t>(down + 1);  // away from zero (may become inf)
  const double xd = x;
  const double dd = std::bit_cast<float>(static_cast<uint32_t>(down) << 16);
  // Rounding up past the largest finite value lands on 2^128, which is stored as inf.
  const bool up_is_inf = (up & 0x7FFF) == 0x7F80;
  const double du = up_is_inf ? std::copysign(std::ldexp(1.0, 128), xd)
                              : static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(up) << 16));
  const double a = std::fabs(xd - dd), b = std::fabs(du - xd);
  if (a < b) return down;
  if (b < a) return up;
  return (down & 1) ? up : down;
}

// Random 16-bit patterns, every class included (NaNs with payloads, infinities, subnormals).
std::vector<uint16_t> RandomHalfBits(int64_t n, uint32_t seed, DType t, bool allow_nan = true) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& h : v) {
    do {
      h = static_cast<uint16_t>(rng());
    } while (!allow_nan && IsNaN16(t, h));
  }
  return v;
}

// Values of moderate size for arithmetic where random exponents would only give inf/0.
std::vector<uint16_t> ModerateHalfBits(int64_t n, uint32_t seed, DType t) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& h : v) h = Narrow(t, u(rng));
  return v;
}

HostTensor Half(DType t, Shape s, const std::vector<uint16_t>& bits) { return Make(t, std::move(s), bits); }

HostTensor WidenTensor(const HostTensor& h) {
  HostTensor f(DType::kF32, h.shape);
  for (int64_t i = 0; i < h.numel(); ++i) f.as<float>()[i] = Widen(h.dtype, h.at<uint16_t>(i));
  return f;
}

// The definition of an op on 16-bit floats: the f32 op on the widened inputs, each 16-bit
// output rounded once. Runs both on every engine and compares the bytes.
void ExpectF32Rule(Op op, const std::vector<HostTensor>& inputs, DType out_dtype, const Shape& out_shape,
                   const OpParams& params = {}) {
  const HostTensor got = RunAll(op, inputs, out_dtype, out_shape, params);
  std::vector<HostTensor> wide;
  for (const HostTensor& t : inputs) wide.push_back(IsHalfDType(t.dtype) ? WidenTensor(t) : t);
  OpParams f32_params = params;
  if (op == Op::kCast && IsHalfDType(params.to)) f32_params.to = DType::kF32;
  const DType ref_dtype = IsHalfDType(out_dtype) ? DType::kF32 : out_dtype;
  const HostTensor ref = RunAll(op, wide, ref_dtype, out_shape, f32_params);
  if (IsHalfDType(out_dtype)) {
    for (int64_t i = 0; i < got.numel(); ++i) {
      ASSERT_EQ(got.at<uint16_t>(i), Narrow(out_dtype, ref.at<float>(i)))
          << OpName(op) << " " << DTypeName(out_dtype) << " element " << i;
    }
  } else {
    EXPECT_TRUE(got.bytes == ref.bytes) << OpName(op) << " -> " << DTypeName(out_dtype);
  }
}

const DType kHalfTypes[] = {DType::kF16, DType::kBF16};

// ---------------------------------------------------------------------------------------
// Conversions.

TEST(HalfConversion, EveryF16PatternRoundTripsExceptNaN) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = half::F16ToF32(static_cast<uint16_t>(h));
    if (IsNaN16(DType::kF16, static_cast<uint16_t>(h))) {
      ASSERT_EQ(Bits(f), kCanon) << std::hex << h;
      ASSERT_EQ(half::F32ToF16(f), half::kCanonicalNaNF16);
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), F16Value(static_cast<uint16_t>(h))) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
    ASSERT_EQ(half::F32ToF16(f), h) << std::hex << h;
  }
}

TEST(HalfConversion, EveryBF16PatternRoundTripsExceptNaN) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = half::BF16ToF32(static_cast<uint16_t>(b));
    if (IsNaN16(DType::kBF16, static_cast<uint16_t>(b))) {
      ASSERT_EQ(Bits(f), kCanon) << std::hex << b;
      ASSERT_EQ(half::F32ToBF16(f), half::kCanonicalNaNBF16);
      continue;
    }
    ASSERT_EQ(Bits(f), b << 16) << std::hex << b;
    ASSERT_EQ(half::F32ToBF16(f), b) << std::hex << b;
  }
}

// f32 inputs that probe rounding: every halfway point between neighbouring finite f16
// values, one f32 step either side of it, and random patterns.
std::vector<float> F16RoundingProbes() {
  std::vector<float> probes;
  for (uint32_t h = 0; h < 0x7C00u; ++h) {
    const double lo = F16Value(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7C00u ? 65536.0 : F16Value(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 11 significant bits plus one
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(x);
      probes.push_back(-x);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) probes.push_back(FromBits(static_cast<uint32_t>(rng())));
  for (uint32_t u : {0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x33000000u,
                     0x33000001u, 0xB3000000u, 0x00000001u, 0x38800000u, 0x387FFFFFu, 0x7FC00001u, 0xFF800001u}) {
    probes.push_back(FromBits(u));
  }
  return probes;
}

TEST(HalfConversion, F32ToF16IsRoundToNearestEven) {
  for (float x : F16RoundingProbes()) {
    // The compiler's _Float16 conversion (libgcc, round to nearest even) is the reference.
    const uint16_t want = x != x ? half::kCanonicalNaNF16 : std::bit_cast<uint16_t>(static_cast<_Float16>(x));
    ASSERT_EQ(half::F32ToF16(x), want) << std::hex << Bits(x);
  }
  // The spec's named cases.
  EXPECT_EQ(half::F32ToF16(65504.0f), 0x7BFFu);
  EXPECT_EQ(half::F32ToF16(65519.996f), 0x7BFFu);
  EXPECT_EQ(half::F32ToF16(65520.0f), 0x7C00u);  // the tie goes to the even neighbour, 2^16: inf
  EXPECT_EQ(half::F32ToF16(-1e30f), 0xFC00u);
  EXPECT_EQ(half::F32ToF16(std::ldexp(1.0f, -25)), 0x0000u);  // tie between 0 and 2^-24
  EXPECT_EQ(half::F32ToF16(-std::ldexp(1.0f, -25)), 0x8000u);
  EXPECT_EQ(half::F32ToF16(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(half::F32ToF16(std::ldexp(3.0f, -25)), 0x0002u);     // 1.5 * 2^-24: tie to even 2
  EXPECT_EQ(half::F32ToF16(std::ldexp(2047.0f, -25)), 0x0400u);  // carries into the smallest normal
  EXPECT_EQ(half::F32ToF16(FromBits(0xFFC12345u)), 0x7E00u);
}

TEST(HalfConversion, F32ToBF16IsRoundToNearestEven) {
  std::vector<float> probes;
  for (uint32_t b = 0; b < 0x7F80u; b += 7) {
    const uint32_t mid = (b << 16) | 0x8000u;
    for (uint32_t u : {mid, mid - 1, mid + 1, b << 16}) {
      probes.push_back(FromBits(u));
      probes.push_back(FromBits(u | 0x80000000u));
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) probes.push_back(FromBits(static_cast<uint32_t>(rng())));
  for (float x : probes) ASSERT_EQ(half::F32ToBF16(x), RefF32ToBF16(x)) << std::hex << Bits(x);
  EXPECT_EQ(half::F32ToBF16(FromBits(0x7F7FFFFFu)), 0x7F80u);  // overflow to inf
  EXPECT_EQ(half::F32ToBF16(FromBits(0x00008000u)), 0x0000u);  // subnormal tie to even 0
  EXPECT_EQ(half::F32ToBF16(FromBits(0x00018000u)), 0x0002u);  // tie to even 2
  EXPECT_EQ(half::F32ToBF16(FromBits(0xFFC12345u)), 0x7FC0u);
}

// The vectorized conversions (F16C for f16, AVX2 integer code for bf16) against kernels/half.h:
// every 16-bit pattern, and f32 patterns at every f16 and bf16 rounding boundary (each midpoint
// and its neighbours), overflow, subnormals, NaNs with payloads, both signs, and a stride over
// all 2^32 patterns; at an odd offset and length so the scalar tail runs too.
TEST(HalfConversion, VectorizedConversionsMatchThePortableOnes) {
  if (!cpu::CpuHasF16c()) GTEST_SKIP() << "no F16C/AVX2 on this CPU";
  std::vector<uint16_t> every(0x10000);
  for (uint32_t h = 0; h < 0x10000u; ++h) every[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(every.size());
  cpu::F16ToF32Avx2(every.data(), wide.data(), static_cast<int64_t>(every.size()));
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    ASSERT_EQ(Bits(wide[h]), Bits(half::F16ToF32(static_cast<uint16_t>(h)))) << std::hex << h;
  }
  cpu::BF16ToF32Avx2(every.data(), wide.data(), static_cast<int64_t>(every.size()));
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    ASSERT_EQ(Bits(wide[h]), Bits(half::BF16ToF32(static_cast<uint16_t>(h)))) << std::hex << h;
  }

  std::vector<uint32_t> bits;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7C00u) == 0x7C00u) continue;
    const uint32_t u = Bits(half::F16ToF32(static_cast<uint16_t>(h)));
    // The f32 midpoint between h and the next f16 up in magnitude (65520 for 65504: overflow).
    const double next = (h & 0x7FFFu) == 0x7BFFu ? 65536.0 : F16Value(static_cast<uint16_t>(h + 1));
    const uint32_t mid = Bits(static_cast<float>((F16Value(static_cast<uint16_t>(h)) + next) / 2));
    for (uint32_t b : {u, u + 1, u - 1, mid, mid + 1, mid - 1}) bits.push_back(b);
  }
  for (uint32_t top = 0; top < 0x10000u; ++top) {
    for (uint32_t low : {0x7FFFu, 0x8000u, 0x8001u}) bits.push_back((top << 16) | low);  // bf16 ties
  }
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 16411) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t b : {0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC01234u, 0x7FFFFFFFu, 0x00000001u, 0x80000001u,
                     0x007FFFFFu, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x7F7FFFFFu, 0x33000000u, 0x33000001u}) {
    bits.push_back(b);
  }
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = FromBits(bits[i]);
  std::vector<uint16_t> got(f.size());
  const int64_t n = static_cast<int64_t>(f.size()) - 3;
  cpu::F32ToF16Avx2(f.data() + 3, got.data() + 3, n);
  for (int64_t i = 3; i < n + 3; ++i) {
    ASSERT_EQ(got[static_cast<size_t>(i)], half::F32ToF16(f[static_cast<size_t>(i)]))
        << std::hex << bits[static_cast<size_t>(i)];
  }
  cpu::F32ToBF16Avx2(f.data() + 3, got.data() + 3, n);
  for (int64_t i = 3; i < n + 3; ++i) {
    ASSERT_EQ(got[static_cast<size_t>(i)], half::F32ToBF16(f[static_cast<size_t>(i)]))
        << std::hex << bits[static_cast<size_t>(i)];
  }
}

// ---------------------------------------------------------------------------------------
// Ops: each against the f32 rule, on every engine.

TEST(HalfOps, ElementwiseFollowTheF32Rule) {
  for (DType t : kHalfTypes) {
    const int64_t n = 300;
    const HostTensor a = Half(t, {n}, RandomHalfBits(n, 1, t));
    const HostTensor b = Half(t, {n}, RandomHalfBits(n, 2, t));
    for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin, Op::kPow, Op::kFmod}) {
      ExpectF32Rule(op, {a, b}, t, {n});
    }
    for (Op op : {Op::kLess, Op::kEqual, Op::kNotEqual, Op::kGreaterEqual})
      ExpectF32Rule(op, {a, b}, DType::kBool, {n});
    for (Op op : {Op::kNeg, Op::kAbs, Op::kRelu, Op::kExp, Op::kLog, Op::kSqrt, Op::kTanh, Op::kSigmoid, Op::kErf,
                  Op::kGeluErf, Op::kSin, Op::kFloor, Op::kRound, Op::kAtan}) {
      ExpectF32Rule(op, {a}, t, {n});
    }
    // Broadcasting, and one element written out by hand.
    const HostTensor m = Half(t, {3, 1}, ModerateHalfBits(3, 3, t));
    const HostTensor r = Half(t, {1, 4}, ModerateHalfBits(4, 4, t));
    ExpectF32Rule(Op::kMul, {m, r}, t, {3, 4});
    const HostTensor y = RunAll(Op::kAdd, {m, r}, t, {3, 4});
    EXPECT_EQ(y.at<uint16_t>(5), Narrow(t, Widen(t, m.at<uint16_t>(1)) + Widen(t, r.at<uint16_t>(1))));
  }
}

// relu of 16-bit values runs on their bits in one pass (cpu::RunReluHalf): every f16 and bf16
// pattern gives the f32 rule's bits (NaN payloads and signs, -0, subnormals, infinities), on
// every engine and thread count.
TEST(HalfOps, ReluOnTheBitsFollowsTheF32RuleForEveryPattern) {
  std::vector<uint16_t> every(1 << 16);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  for (DType t : kHalfTypes) {
    HostTensor x = Half(t, {256, 256}, every);
    ExpectF32Rule(Op::kRelu, {x}, t, {256, 256});
    HostTensor y(t, {256, 256});
    TensorView in = x.view(), out = y.view();
    const OpParams none;
    bool ran = false;
    ASSERT_TRUE(cpu::RunReluHalf(MakeCall(Op::kRelu, none, &in, 1, &out), {nullptr, cpu::Isa::kPortable}, &ran).ok());
    EXPECT_TRUE(ran);
    for (int64_t i = 0; i < 4; ++i) {  // +0, a subnormal; then -0 and a negative one give +0
      const uint16_t sign = i < 2 ? 0 : 0x8000;
      const uint16_t h = static_cast<uint16_t>(sign | (i % 2));
      EXPECT_EQ(y.at<uint16_t>(h), sign ? 0 : h) << DTypeName(t) << " " << h;
    }
  }
}

// A 2 x 2 max pool with stride 2 on 16-bit values takes the max on their bits (AVX-512F,
// cpu::RunMaxPoolHalf): the f32 rule's bits (a window with any NaN gives the canonical NaN, -0
// below +0, subnormals, infinities) on every engine and thread count; output rows of 18 (a
// vector and a tail), 16 with an unused last input column and row, and 64; random patterns of
// every kind, then windows written by hand.
TEST(HalfOps, MaxPoolTwoByTwoOnTheBitsFollowsTheF32Rule) {
  const OpParams pool = Pool2x2({0, 0, 0, 0});
  uint32_t seed = 70;
  for (DType t : kHalfTypes) {
    SCOPED_TRACE(DTypeName(t));
    for (const Shape& shape : std::vector<Shape>{{2, 3, 8, 36}, {1, 5, 7, 33}, {1, 9, 20, 128}}) {
      const int64_t n = NumElements(shape);
      const HostTensor x = Half(t, shape, RandomHalfBits(n, ++seed, t));
      const HostTensor xm = Half(t, shape, ModerateHalfBits(n, ++seed, t));
      const Shape out = {shape[0], shape[1], shape[2] / 2, shape[3] / 2};
      ExpectF32Rule(Op::kMaxPool2D, {x}, t, out, pool);
      ExpectF32Rule(Op::kMaxPool2D, {xm}, t, out, pool);
    }
    const uint16_t inf = t == DType::kF16 ? 0x7C00 : 0x7F80;
    const uint16_t ninf = static_cast<uint16_t>(0x8000 | inf);
    const uint16_t nan = t == DType::kF16 ? 0x7E00 : 0x7FC0;
    const uint16_t one = Narrow(t, 1.0f), minus_one = Narrow(t, -1.0f);
    const uint16_t payload_nan = static_cast<uint16_t>(inf | 1), negative_nan = 0xFFFF;
    // Windows (row 0 pair, row 1 pair): -0 and +0 in either order; all -0; a NaN with a payload
    // among numbers; a negative NaN; -inf only; a subnormal above +0; -1 above -inf; +inf.
    const std::vector<std::array<uint16_t, 4>> windows = {
        {0x8000, 0x0000, 0x8000, 0x8000}, {0x0000, 0x8000, 0x8000, 0x8000},       {0x8000, 0x8000, 0x8000, 0x8000},
        {one, payload_nan, one, one},     {0x8000, 0x8000, 0x8000, negative_nan}, {ninf, ninf, ninf, ninf},
        {0x0000, 0x0001, 0x8001, 0x8000}, {minus_one, ninf, ninf, ninf},          {one, inf, 0x0000, 0x8000}};
    const std::vector<uint16_t> want = {0x0000, 0x0000, 0x8000, nan, nan, ninf, 0x0001, minus_one, inf};
    const int64_t w = static_cast<int64_t>(windows.size());
    std::vector<uint16_t> bits(static_cast<size_t>(4 * w));
    for (int64_t k = 0; k < w; ++k) {
      bits[2 * k] = windows[k][0];
      bits[2 * k + 1] = windows[k][1];
      bits[2 * w + 2 * k] = windows[k][2];
      bits[2 * w + 2 * k + 1] = windows[k][3];
    }
    const HostTensor x = Half(t, {1, 1, 2, 2 * w}, bits);
    const HostTensor y = RunAll(Op::kMaxPool2D, {x}, t, {1, 1, 1, w}, pool);
    for (int64_t k = 0; k < w; ++k) EXPECT_EQ(y.at<uint16_t>(k), want[k]) << "window " << k;
    ExpectF32Rule(Op::kMaxPool2D, {x}, t, {1, 1, 1, w}, pool);
    // The bits path runs where it exists.
    if (cpu::CpuHasAvx2Fma() && cpu::gemm::CpuHasAvx512F()) {
      HostTensor out(t, {1, 1, 1, w});
      TensorView in_view = const_cast<HostTensor&>(x).view(), out_view = out.view();
      ThreadPool threads(1);
      bool ran = false;
      ASSERT_TRUE(
          cpu::RunMaxPoolHalf(MakeCall(Op::kMaxPool2D, pool, &in_view, 1, &out_view), {&threads, cpu::Isa::kAvx2}, &ran)
              .ok());
      EXPECT_TRUE(ran);
    }
  }
}

TEST(HalfOps, NaNOutputsAreCanonical) {
  const HostTensor f16 = Half(DType::kF16, {3}, {0x7C01, 0xFE12, 0x3C00});  // sNaN, negative qNaN, 1
  const HostTensor y = RunAll(Op::kAdd, {f16, f16}, DType::kF16, {3});
  EXPECT_EQ(y.at<uint16_t>(0), 0x7E00u);
  EXPECT_EQ(y.at<uint16_t>(1), 0x7E00u);
  EXPECT_EQ(y.at<uint16_t>(2), 0x4000u);
  const HostTensor bf = Half(DType::kBF16, {2}, {0xFF81, 0x3F80});
  const HostTensor z = RunAll(Op::kNeg, {bf}, DType::kBF16, {2});
  EXPECT_EQ(z.at<uint16_t>(0), 0x7FC0u);
  EXPECT_EQ(z.at<uint16_t>(1), 0xBF80u);
}

TEST(HalfOps, ReductionsAccumulateInF32) {
  for (DType t : kHalfTypes) {
    const HostTensor x = Half(t, {5, 700}, RandomHalfBits(5 * 700, 5, t, /*allow_nan=*/false));
    const HostTensor xm = Half(t, {5, 700}, ModerateHalfBits(5 * 700, 6, t));
    OpParams p;
    p.axes = {1};
    p.keepdims = false;
    for (Op op : {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd}) {
      ExpectF32Rule(op, {xm}, t, {5}, p);
      ExpectF32Rule(op, {x}, t, {5}, p);
    }
    OpParams a;
    a.axis = 1;
    a.keepdims = false;
    ExpectF32Rule(Op::kArgMax, {xm}, DType::kI64, {5}, a);
    // A sum whose f16 partial sums would round differently: 2048 + 1 + 1 + ... stays exact in f32.
    std::vector<uint16_t> ones(65, Narrow(t, 1.0f));
    ones[0] = Narrow(t, 2048.0f);
    OpParams all;
    all.axes = {0};
    all.keepdims = false;
    const HostTensor s = RunAll(Op::kReduceSum, {Half(t, {65}, ones)}, t, {}, all);
    EXPECT_EQ(s.at<uint16_t>(0), Narrow(t, 2112.0f));
  }
}

TEST(HalfOps, MatMulSoftmaxLayerNormConvPool) {
  for (DType t : kHalfTypes) {
    const HostTensor a = Half(t, {2, 5, 37}, ModerateHalfBits(2 * 5 * 37, 7, t));
    const HostTensor b = Half(t, {37, 6}, ModerateHalfBits(37 * 6, 8, t));
    ExpectF32Rule(Op::kMatMul, {a, b}, t, {2, 5, 6});

    const HostTensor x = Half(t, {3, 40}, ModerateHalfBits(120, 9, t));
    OpParams sp;
    sp.axis = 1;
    ExpectF32Rule(Op::kSoftmax, {x}, t, {3, 40}, sp);
    const HostTensor scale = Half(t, {40}, ModerateHalfBits(40, 10, t));
    const HostTensor bias = Half(t, {40}, ModerateHalfBits(40, 11, t));
    ExpectF32Rule(Op::kLayerNorm, {x, scale, bias}, t, {3, 40}, sp);

    const HostTensor img = Half(t, {1, 4, 7, 6}, ModerateHalfBits(4 * 7 * 6, 12, t));
    const HostTensor w = Half(t, {6, 2, 3, 3}, ModerateHalfBits(6 * 2 * 9, 15, t));
    const HostTensor cb = Half(t, {6}, ModerateHalfBits(6, 16, t));
    ExpectF32Rule(Op::kConv2D, {img, w, cb}, t, {1, 6, 7, 3}, GroupedConv3x3({1, 0, 1, 1}));

    ExpectF32Rule(Op::kMaxPool2D, {img}, t, {1, 4, 4, 3}, Pool2x2({0, 0, 1, 0}));
    ExpectF32Rule(Op::kAvgPool2D, {img}, t, {1, 4, 4, 3}, Pool2x2({0, 0, 1, 0}));
  }
}

TEST(HalfOps, CastsGoThroughF32) {
  const std::vector<uint16_t> bits = RandomHalfBits(400, 17, DType::kF16);
  for (DType t : kHalfTypes) {
    const HostTensor x = Half(t, {400}, bits);
    for (DType to : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kI8, DType::kU8, DType::kBool}) {
      OpParams p;
      p.to = to;
      ExpectF32Rule(Op::kCast, {x}, to, {400}, p);
    }
    OpParams other;
    other.to = t == DType::kF16 ? DType::kBF16 : DType::kF16;
    ExpectF32Rule(Op::kCast, {x}, other.to, {400}, other);
    // f32 -> 16 bits is the reference conversion; i64 -> f16 rounds to f32 first.
    HostTensor f(DType::kF32, {400});
    FillF32(f, 18, 0.05);
    OpParams to_half;
    to_half.to = t;
    const HostTensor y = RunAll(Op::kCast, {f}, t, {400}, to_half);
    for (int64_t i = 0; i < 400; ++i) ASSERT_EQ(y.at<uint16_t>(i), Narrow(t, f.at<float>(i))) << i;
    const HostTensor big = I64({2}, {int64_t{1} << 40 | 1, -(int64_t{1} << 24) - 3});
    const HostTensor z = RunAll(Op::kCast, {big}, t, {2}, to_half);
    EXPECT_EQ(z.at<uint16_t>(0), Narrow(t, static_cast<float>(int64_t{1} << 40 | 1)));
    EXPECT_EQ(z.at<uint16_t>(1), Narrow(t, static_cast<float>(-(int64_t{1} << 24) - 3)));
    // A cast to the same dtype copies bits, NaN payload included.
    OpParams same;
    same.to = t;
    const HostTensor c = RunAll(Op::kCast, {x}, t, {400}, same);
    EXPECT_TRUE(c.bytes == x.bytes);
  }
}

TEST(HalfOps, BitCopyingOpsKeepPayloads) {
  for (DType t : kHalfTypes) {
    const std::vector<uint16_t> bits = RandomHalfBits(24, 19, t);
    const HostTensor x = Half(t, {2, 3, 4}, bits);
    OpParams tp;
    tp.perm = {2, 0, 1};
    const HostTensor y = RunAll(Op::kTranspose, {x}, t, {4, 2, 3}, tp);
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) ASSERT_EQ(y.at<uint16_t>((k * 2 + i) * 3 + j), bits[(i * 3 + j) * 4 + k]);

    const HostTensor cond = Bool({2, 3, 4}, std::vector<uint8_t>(24, 1));
    const HostTensor other = Half(t, {2, 3, 4}, std::vector<uint16_t>(24, 0));
    const HostTensor w = RunAll(Op::kWhere, {cond, x, other}, t, {2, 3, 4});
    EXPECT_TRUE(w.bytes == x.bytes);

    OpParams pad;
    pad.pad_begin = {0, 1, 0};
    pad.pad_end = {0, 0, 1};
    pad.pad_value = 0.1f;
    const HostTensor p = RunAll(Op::kPad, {x}, t, {2, 4, 5}, pad);
    EXPECT_EQ(p.at<uint16_t>(0), Narrow(t, 0.1f));  // the fill, rounded once
    EXPECT_EQ(p.at<uint16_t>(5), bits[0]);
    pad.pad_value = std::bit_cast<float>(0x7FC01234u);
    const HostTensor pn = RunAll(Op::kPad, {x}, t, {2, 4, 5}, pad);
    EXPECT_EQ(pn.at<uint16_t>(0), t == DType::kF16 ? 0x7E00u : 0x7FC0u);
  }
}

// Calls larger than one block (about 16K values per operand) are computed a block of rows at a
// time; the bits must be those of the whole call (ExpectF32Rule's reference widens whole).
TEST(HalfOps, BlocksOfRowsGiveTheWholeCallsBits) {
  for (DType t : kHalfTypes) {
    const HostTensor a = Half(t, {2, 16400}, ModerateHalfBits(2 * 16400, 20, t));
    const HostTensor row = Half(t, {16400}, ModerateHalfBits(16400, 21, t));
    const HostTensor one = Half(t, {1}, ModerateHalfBits(1, 22, t));
    ExpectF32Rule(Op::kAdd, {a, row}, t, {2, 16400});  // a row per block, the row operand whole
    ExpectF32Rule(Op::kDiv, {one, a}, t, {2, 16400});  // a scalar read by every block
    ExpectF32Rule(Op::kGreater, {a, a}, DType::kBool, {2, 16400});
    ExpectF32Rule(Op::kExp, {a}, t, {2, 16400});
    const HostTensor col = Half(t, {300, 1}, ModerateHalfBits(300, 23, t));
    const HostTensor line = Half(t, {1, 200}, ModerateHalfBits(200, 24, t));
    ExpectF32Rule(Op::kSub, {col, line}, t, {300, 200});  // rows of col, line whole
    OpParams to_f32;
    to_f32.to = DType::kF32;
    ExpectF32Rule(Op::kCast, {a}, DType::kF32, {2, 16400}, to_f32);
    OpParams to_half;
    to_half.to = t;
    ExpectF32Rule(Op::kCast, {WidenTensor(a)}, t, {2, 16400}, to_half);

    const HostTensor m = Half(t, {2, 150, 64}, ModerateHalfBits(2 * 150 * 64, 25, t));
    const HostTensor w = Half(t, {64, 130}, ModerateHalfBits(64 * 130, 26, t));
    ExpectF32Rule(Op::kMatMul, {m, w}, t, {2, 150, 130});

    const HostTensor x = Half(t, {40, 600}, ModerateHalfBits(40 * 600, 27, t));
    OpParams sp;
    sp.axis = 1;
    ExpectF32Rule(Op::kSoftmax, {x}, t, {40, 600}, sp);
    const HostTensor scale = Half(t, {600}, ModerateHalfBits(600, 28, t));
    const HostTensor bias = Half(t, {600}, ModerateHalfBits(600, 29, t));
    ExpectF32Rule(Op::kLayerNorm, {x, scale, bias}, t, {40, 600}, sp);

    const HostTensor img = Half(t, {3, 4, 48, 48}, ModerateHalfBits(3 * 4 * 48 * 48, 30, t));
    const HostTensor cw = Half(t, {6, 2, 3, 3}, ModerateHalfBits(6 * 2 * 9, 31, t));
    const HostTensor cb = Half(t, {6}, ModerateHalfBits(6, 32, t));
    ExpectF32Rule(Op::kConv2D, {img, cw, cb}, t, {3, 6, 48, 24}, GroupedConv3x3({1, 1, 1, 1}));
    ExpectF32Rule(Op::kMaxPool2D, {img}, t, {3, 4, 24, 24}, Pool2x2({0, 0, 0, 0}));
    ExpectF32Rule(Op::kAvgPool2D, {img}, t, {3, 4, 24, 24}, Pool2x2({0, 0, 0, 0}));
  }
}

// A 16-bit conv2d whose weights the backend prepared (widened and packed once, as a loaded
// program does) gives the bits of the same call without them, on every engine: one image (the
// whole call through f32), several images (blocks of rows), special values.
void ExpectPreparedWeightsGiveTheSameBits(const std::vector<HostTensor>& inputs, DType t, const Shape& out_shape,
                                          const OpParams& params) {
  const HostTensor ref = RunAll(Op::kConv2D, inputs, t, out_shape, params);
  std::vector<HostTensor> in = inputs;
  std::vector<TensorView> views;
  for (HostTensor& h : in) views.push_back(h.view());
  const Shape& ws = inputs[1].shape;
  const int64_t kc = ws[1] * ws[2] * ws[3];
  for (Engine& e : Engines()) {
    HostTensor out(t, out_shape);
    TensorView out_view = out.view();
    KernelCall call = MakeCall(Op::kConv2D, params, views.data(), static_cast<int>(views.size()), &out_view);
    auto prepared = e.backend->PrepareConstant(call, 1);
    ASSERT_TRUE(prepared.ok()) << e.label << ": " << prepared.status().ToString();
    const bool expect = e.backend->name() == "cpu-avx2";
    ASSERT_EQ(*prepared != nullptr, expect) << e.label;
    if (*prepared) {
      EXPECT_EQ((*prepared)->bytes(), int64_t{sizeof(float)} * ((ws[0] + 5) / 6 * 6) * kc) << e.label;
    }
    call.prepared = prepared->get();
    const Status st = e.backend->Run(call);
    ASSERT_TRUE(st.ok()) << e.label << ": " << st.ToString();
    EXPECT_TRUE(out.bytes == ref.bytes) << e.label << " " << DTypeName(t) << " " << ::testing::PrintToString(out_shape);
  }
}

TEST(HalfOps, ConvWeightsWidenedAndPackedOnceGiveTheSameBits) {
  const OpParams same = SameConv3x3();
  OpParams odd = same;
  odd.strides = {2, 1};
  odd.dilations = {1, 2};
  odd.pads = {0, 2, 1, 1};
  for (DType t : kHalfTypes) {
    const HostTensor x1 = Half(t, {1, 7, 11, 13}, ModerateHalfBits(7 * 11 * 13, 40, t));
    const HostTensor w = Half(t, {30, 7, 3, 3}, ModerateHalfBits(30 * 63, 41, t));
    const HostTensor b = Half(t, {30}, ModerateHalfBits(30, 42, t));
    ExpectF32Rule(Op::kConv2D, {x1, w, b}, t, {1, 30, 11, 13}, same);
    ExpectPreparedWeightsGiveTheSameBits({x1, w, b}, t, {1, 30, 11, 13}, same);
    ExpectPreparedWeightsGiveTheSameBits({x1, w}, t, {1, 30, 5, 12}, odd);
    // Three images of 48 x 48: blocks of rows, the prepared weights read by every block.
    const HostTensor x3 = Half(t, {3, 7, 48, 48}, ModerateHalfBits(3 * 7 * 48 * 48, 43, t));
    ExpectPreparedWeightsGiveTheSameBits({x3, w, b}, t, {3, 30, 48, 48}, same);
    // Every class of 16-bit value in the weights (NaN payloads, infinities, subnormals).
    const HostTensor wild = Half(t, {30, 7, 3, 3}, RandomHalfBits(30 * 63, 44, t));
    ExpectPreparedWeightsGiveTheSameBits({x1, wild, b}, t, {1, 30, 11, 13}, same);
  }
}

// An f16 conv2d that the AVX-512 shifted-plane kernel computes with its output rounded to f16
// in the kernel (cpu::RunConvF16Shifted: both strides 1, OW == W) gives the f32 rule's bits on
// every engine, with and without weights packed at load: partial filter blocks (13 and 25
// filters for a 12-filter tile), positions that end inside a vector, several bands, a batch,
// and every class of value: NaN payloads, infinities and subnormals in x and w, outputs that
// overflow to inf and outputs that round to f16 subnormals or to +-0.
std::vector<uint16_t> ScaledHalfBits(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& h : v) h = half::F32ToF16(u(rng) * scale);
  return v;
}

TEST(HalfOps, DenseConvRoundsItsOutputToF16InTheKernel) {
  const DType t = DType::kF16;
  struct Case {
    Shape x, w;
    OpParams params;
    Shape y;
  };
  OpParams one_by_three = SameConv3x3();
  one_by_three.kernel = {1, 3};
  one_by_three.pads = {0, 1, 0, 1};
  const std::vector<Case> cases = {
      {{1, 8, 33, 35}, {13, 8, 3, 3}, SameConv3x3(), {1, 13, 33, 35}},
      {{2, 5, 17, 16}, {25, 5, 3, 3}, SameConv3x3(), {2, 25, 17, 16}},
      {{1, 3, 5, 7}, {12, 3, 1, 3}, one_by_three, {1, 12, 5, 7}},
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.x) + " x " + ::testing::PrintToString(c.w));
    const int64_t nx = c.x[0] * c.x[1] * c.x[2] * c.x[3], nw = c.w[0] * c.w[1] * c.w[2] * c.w[3], nb = c.w[0];
    const std::vector<std::vector<uint16_t>> xs = {ModerateHalfBits(nx, seed++, t), RandomHalfBits(nx, seed++, t)};
    // Weights of moderate size, large enough that sums overflow f16, small enough that they
    // round to subnormals or zero, and random patterns.
    const std::vector<std::vector<uint16_t>> ws = {ModerateHalfBits(nw, seed++, t), ScaledHalfBits(nw, seed++, 2048.0f),
                                                   ScaledHalfBits(nw, seed++, 1.0f / 65536),
                                                   RandomHalfBits(nw, seed++, t)};
    const HostTensor b = Half(t, {nb}, ModerateHalfBits(nb, seed++, t));
    for (const auto& xb : xs) {
      for (const auto& wb : ws) {
        const HostTensor x = Half(t, c.x, xb), w = Half(t, c.w, wb);
        ExpectF32Rule(Op::kConv2D, {x, w, b}, t, c.y, c.params);
        ExpectF32Rule(Op::kConv2D, {x, w}, t, c.y, c.params);
        ExpectPreparedWeightsGiveTheSameBits({x, w, b}, t, c.y, c.params);
      }
    }
    // These calls take that path wherever the CPU has AVX-512F.
    if (!cpu::gemm::UseAvx512Gemm() || !cpu::UseAvx512DirectConv()) continue;
    HostTensor x = Half(t, c.x, xs[1]), w = Half(t, c.w, ws[0]), bias = b;
    HostTensor y(t, c.y);
    TensorView in[3] = {x.view(), w.view(), bias.view()};
    TensorView out = y.view();
    const KernelCall call = MakeCall(Op::kConv2D, c.params, in, 3, &out);
    bool ran = false;
    ASSERT_TRUE(cpu::RunConvF16Shifted(call, {nullptr, cpu::Isa::kAvx2}, &ran).ok());
    EXPECT_TRUE(ran);
    EXPECT_TRUE(y.bytes == RunAll(Op::kConv2D, {x, w, bias}, t, c.y, c.params).bytes);
  }
}

// A conv2d of 16-bit values with its relu (OpParams::relu_output, made only by compilation;
// DETERMINISM.md 3.1) against the conv and then the relu, run one by one, on every engine: on
// the AVX-512 kernel that applies the f32 relu before its one rounding (f16, shifted-plane
// shapes: asserted to run there) and on the path that applies the 16-bit relu to the conv's
// output (bf16, a stride of 2, the portable ISA). Weights that make sums overflow, and tiny ones
// whose products round to +-0 or to subnormals; random patterns with NaNs, infinities and -0.
TEST(HalfOps, ConvWithItsReluGivesTheConvThenTheRelu) {
  struct Case {
    Shape x, w;
    OpParams params;
    Shape y;
  };
  OpParams strided = SameConv3x3();
  strided.strides = {2, 2};
  const std::vector<Case> cases = {
      {{1, 8, 33, 35}, {13, 8, 3, 3}, SameConv3x3(), {1, 13, 33, 35}},
      {{2, 5, 17, 16}, {25, 5, 3, 3}, SameConv3x3(), {2, 25, 17, 16}},
      {{1, 4, 9, 11}, {6, 4, 3, 3}, strided, {1, 6, 5, 6}},
  };
  uint32_t seed = 90;
  for (DType t : kHalfTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " " + ::testing::PrintToString(c.x) + " x " +
                   ::testing::PrintToString(c.w));
      const int64_t nx = NumElements(c.x), nw = NumElements(c.w), nb = c.w[0];
      const std::vector<std::vector<uint16_t>> xs = {ModerateHalfBits(nx, seed++, t), RandomHalfBits(nx, seed++, t)};
      const std::vector<std::vector<uint16_t>> ws = {ModerateHalfBits(nw, seed++, t),
                                                     ScaledHalfBits(nw, seed++, 2048.0f),
                                                     ScaledHalfBits(nw, seed++, 1.0f / 65536)};
      const HostTensor b = Half(t, {nb}, ModerateHalfBits(nb, seed++, t));
      OpParams fused = c.params;
      fused.relu_output = true;
      for (const auto& xb : xs) {
        for (const auto& wb : ws) {
          const HostTensor x = Half(t, c.x, xb), w = Half(t, c.w, wb);
          for (bool with_bias : {true, false}) {
            std::vector<HostTensor> in = {x, w};
            if (with_bias) in.push_back(b);
            const HostTensor conv = RunAll(Op::kConv2D, in, t, c.y, c.params);
            const HostTensor want = RunAll(Op::kRelu, {conv}, t, c.y);
            const HostTensor got = RunAll(Op::kConv2D, in, t, c.y, fused);
            int64_t first_diff = -1;
            for (int64_t i = 0; i < got.numel() && first_diff < 0; ++i) {
              if (got.at<uint16_t>(i) != want.at<uint16_t>(i)) first_diff = i;
            }
            EXPECT_EQ(first_diff, -1) << "element " << first_diff << ": got 0x" << std::hex
                                      << (first_diff >= 0 ? got.at<uint16_t>(first_diff) : 0) << ", want 0x"
                                      << (first_diff >= 0 ? want.at<uint16_t>(first_diff) : 0) << ", conv 0x"
                                      << (first_diff >= 0 ? conv.at<uint16_t>(first_diff) : 0);
          }
        }
      }
      // f16 calls of the shifted-plane shapes take the kernel's relu wherever the CPU has AVX-512F.
      if (t != DType::kF16 || c.params.strides[0] != 1 || !cpu::gemm::UseAvx512Gemm() || !cpu::UseAvx512DirectConv()) {
        continue;
      }
      HostTensor x = Half(t, c.x, xs[1]), w = Half(t, c.w, ws[2]), bias = b;
      HostTensor y(t, c.y);
      TensorView in[3] = {x.view(), w.view(), bias.view()};
      TensorView out = y.view();
      const KernelCall call = MakeCall(Op::kConv2D, fused, in, 3, &out);
      bool ran = false;
      ASSERT_TRUE(cpu::RunConvF16Shifted(call, {nullptr, cpu::Isa::kAvx2}, &ran).ok());
      EXPECT_TRUE(ran);
      EXPECT_TRUE(y.bytes == RunAll(Op::kRelu, {RunAll(Op::kConv2D, {x, w, bias}, t, c.y, c.params)}, t, c.y).bytes);
    }
  }
  // The flag is for 16-bit calls only.
  OpParams f32_fused = SameConv3x3();
  f32_fused.relu_output = true;
  EXPECT_EQ(RunStatus(Op::kConv2D,
                      {F32({1, 1, 3, 3}, std::vector<float>(9, 1.0f)), F32({1, 1, 3, 3}, std::vector<float>(9, 1.0f))},
                      DType::kF32, {1, 1, 3, 3}, f32_fused)
                .code(),
            StatusCode::kInvalidArgument);
}

// A 16-bit call's f32 copies come from memory its thread keeps between calls
// (scratch_cache.h, Kind::kWidened), so a large convolution does not fault in fresh pages on
// every call; that memory holds the previous call's values, and every element is written before
// it is read: calls after one on NaN, infinity and subnormal patterns give the f32 rule's bits.
TEST(HalfOps, KeptF32CopiesAreReusedAndOverwritten) {
  std::thread([] {
    for (DType t : kHalfTypes) {
      const OpParams same = SameConv3x3();
      const HostTensor wild_x = Half(t, {1, 8, 33, 35}, RandomHalfBits(8 * 33 * 35, 50, t));
      const HostTensor x = Half(t, {1, 8, 33, 35}, ModerateHalfBits(8 * 33 * 35, 51, t));
      const HostTensor w = Half(t, {13, 8, 3, 3}, ModerateHalfBits(13 * 72, 52, t));
      const HostTensor b = Half(t, {13}, ModerateHalfBits(13, 53, t));
      HostTensor in[3] = {wild_x, w, b};
      HostTensor out(t, {1, 13, 33, 35});
      ASSERT_TRUE(RunKernel(*Engines().front().backend, Op::kConv2D, same, {&in[0], &in[1], &in[2]}, out).ok());
      // Kept on this thread: at least the copies of x and y.
      EXPECT_GE(cpu::scratch::KeptBytes(cpu::scratch::Kind::kWidened), sizeof(float) * (8 + 13) * 33 * 35);
      ExpectF32Rule(Op::kConv2D, {x, w, b}, t, {1, 13, 33, 35}, same);
      ExpectF32Rule(Op::kConv2D, {wild_x, w, b}, t, {1, 13, 33, 35}, same);
      ExpectF32Rule(Op::kConv2D, {x, w, b}, t, {1, 13, 33, 35}, same);
      const HostTensor a = Half(t, {3, 9000}, RandomHalfBits(27000, 54, t));
      const HostTensor c = Half(t, {3, 9000}, ModerateHalfBits(27000, 55, t));
      ExpectF32Rule(Op::kMul, {a, c}, t, {3, 9000});
      ExpectF32Rule(Op::kMul, {c, c}, t, {3, 9000});
    }
  }).join();
}

TensorView ShapeOnly(DType t, std::initializer_list<int64_t> dims) {
  TensorView v;
  v.dtype = t;
  for (int64_t d : dims) v.dims[v.rank++] = d;
  return v;
}

// The f32 copies a 16-bit call needs: bounded where its rows split, the whole operands where not.
TEST(HalfOps, WideningScratchIsBoundedWhereRowsSplit) {
  TensorView in[2] = {ShapeOnly(DType::kF16, {64, 1 << 20}), ShapeOnly(DType::kF16, {64, 1 << 20})};
  TensorView out = ShapeOnly(DType::kF16, {64, 1 << 20});
  OpParams none;
  KernelCall add{Op::kAdd, &none, in, 2, &out, 1};
  EXPECT_EQ(HalfWideningBytes(add), 3 * (int64_t{1} << 14) * 4);  // one 16K-value block per operand
  TensorView w = ShapeOnly(DType::kF16, {1 << 10, 1 << 10});
  TensorView mm_in[2] = {ShapeOnly(DType::kF16, {1 << 12, 1 << 10}), w};
  TensorView mm_out = ShapeOnly(DType::kF16, {1 << 12, 1 << 10});
  KernelCall mm{Op::kMatMul, &none, mm_in, 2, &mm_out, 1};
  EXPECT_EQ(HalfWideningBytes(mm), (2 * 16 * 1024 + (1 << 20)) * int64_t{4});  // 16 rows of a and y, w whole
  OpParams all;
  all.axes = {0, 1};
  all.keepdims = false;
  TensorView scalar = ShapeOnly(DType::kF16, {});
  KernelCall sum{Op::kReduceSum, &all, in, 1, &scalar, 1};
  EXPECT_EQ(HalfWideningBytes(sum), (int64_t{64} << 20) * 4 + 4);  // a reduction widens whole
  TensorView f32 = ShapeOnly(DType::kF32, {64, 1 << 20});
  TensorView f32_out = f32;
  KernelCall f32_add{Op::kNeg, &none, &f32, 1, &f32_out, 1};
  EXPECT_EQ(HalfWideningBytes(f32_add), 0);
}

// Calls that split into blocks are refused as the whole call would be, not run on garbage.
TEST(HalfOps, BadShapesAreRefusedWhenSplitIntoBlocks) {
  const HostTensor a = Half(DType::kF16, {3, 20000}, ModerateHalfBits(60000, 40, DType::kF16));
  const HostTensor b = Half(DType::kF16, {3, 19999}, ModerateHalfBits(3 * 19999, 41, DType::kF16));
  EXPECT_FALSE(RunStatus(Op::kAdd, {a, b}, DType::kF16, {3, 20000}).ok());
  const HostTensor w = Half(DType::kF16, {64, 130}, ModerateHalfBits(64 * 130, 42, DType::kF16));
  const HostTensor m = Half(DType::kF16, {300, 63}, ModerateHalfBits(300 * 63, 43, DType::kF16));
  EXPECT_FALSE(RunStatus(Op::kMatMul, {m, w}, DType::kF16, {300, 130}).ok());
  const HostTensor wide = Half(DType::kF16, {1, 3, 20000}, ModerateHalfBits(60000, 44, DType::kF16));
  EXPECT_FALSE(RunStatus(Op::kExp, {wide}, DType::kF16, {3, 20000}).ok());
}

TEST(HalfOps, MismatchedDTypesAreRefused) {
  const HostTensor h = Half(DType::kF16, {2, 2}, {0x3C00, 0x4000, 0x4200, 0x4400});
  const HostTensor bf = Half(DType::kBF16, {2, 2}, {0x3F80, 0x4000, 0x4040, 0x4080});
  const HostTensor f = F32({2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(RunStatus(Op::kMatMul, {h, f}, DType::kF16, {2, 2}).ok());
  EXPECT_FALSE(RunStatus(Op::kMatMul, {h, bf}, DType::kF16, {2, 2}).ok());
  EXPECT_FALSE(RunStatus(Op::kAdd, {h, h}, DType::kF32, {2, 2}).ok());
  EXPECT_FALSE(RunStatus(Op::kAdd, {f, f}, DType::kF16, {2, 2}).ok());
  OpParams to_f16;
  to_f16.to = DType::kF16;
  EXPECT_FALSE(RunStatus(Op::kCast, {f}, DType::kBF16, {2, 2}, to_f16).ok());
  OpParams sp;
  sp.axis = 1;
  EXPECT_TRUE(RunStatus(Op::kSoftmax, {h}, DType::kF16, {2, 2}, sp).ok());
}

// CheckHalfCall (kernels/checks/half_plan.h), which both backends run before they widen
// anything: a malformed call or one with a fused epilogue is refused by name, and the dtype
// checks still follow. The CPU backend refuses an f16 add that carries an epilogue.
TEST(HalfOps, MalformedCallsAndEpiloguesAreRefusedBeforeWidening) {
  HostTensor a = Half(DType::kF16, {4}, {0x3C00, 0x4000, 0x4200, 0x4400});
  HostTensor f = F32({4}, {1, 2, 3, 4});
  HostTensor y(DType::kF16, {4});
  const TensorView inputs[2] = {a.view(), a.view()};
  TensorView out = y.view();
  const OpParams none;
  const KernelCall call = MakeCall(Op::kAdd, none, inputs, 2, &out);
  EXPECT_TRUE(CheckHalfCall(call, "add").ok());
  auto expect_refused = [](const KernelCall& c, const std::string& phrase) {
    const Status s = CheckHalfCall(c, "add");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << phrase << ": " << s.ToString();
    EXPECT_NE(s.message().find(phrase), std::string::npos) << s.ToString();
  };
  KernelCall no_outputs = call;
  no_outputs.num_outputs = 0;
  expect_refused(no_outputs, "add: malformed call");
  KernelCall null_outputs = call;
  null_outputs.outputs = nullptr;
  expect_refused(null_outputs, "add: malformed call");
  KernelCall null_inputs = call;
  null_inputs.inputs = nullptr;
  expect_refused(null_inputs, "add: malformed call");
  KernelCall negative_inputs = call;
  negative_inputs.num_inputs = -1;
  expect_refused(negative_inputs, "add: malformed call");
  const TensorView mixed[2] = {a.view(), f.view()};
  KernelCall mixed_dtypes = call;
  mixed_dtypes.inputs = mixed;
  expect_refused(mixed_dtypes, "add: input dtypes differ (f16 vs f32)");

  const EpilogueStep relu{Op::kRelu, 1, {}};
  const Epilogue epilogue{&relu, 1, nullptr, 0};
  KernelCall fused = call;
  fused.epilogue = &epilogue;
  expect_refused(fused, "add: f16/bf16 calls take no fused epilogue");
  for (Engine& e : Engines()) {
    const Status s = e.backend->Run(fused);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << e.label << ": " << s.ToString();
    EXPECT_NE(s.message().find("no fused epilogue"), std::string::npos) << e.label << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace consensor::kernels
