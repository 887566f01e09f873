// float64 kernels (docs/DETERMINISM.md section 1.2): each op family against a naive
// reference written from the spec, with RunAll checking that portable/AVX2 x 1/2/8 threads
// give identical bytes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/detmath.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

constexpr uint64_t kCanon64 = 0x7FF8000000000000ull;

uint64_t Bits64(double d) { return std::bit_cast<uint64_t>(d); }
double FromBits64(uint64_t u) { return std::bit_cast<double>(u); }
double Canon64(double d) { return d != d ? FromBits64(kCanon64) : d; }

HostTensor F64(Shape s, const std::vector<double>& v) { return Make(DType::kF64, std::move(s), v); }

// Random doubles of widely varying magnitude, with NaN payloads, infinities, signed zeros
// and subnormals mixed in.
std::vector<double> RandomF64(int64_t n, uint32_t seed, double special_rate = 0.05) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-40, 40);
  std::uniform_real_distribution<double> p(0.0, 1.0);
  const uint64_t specials[] = {0x7FF8000000000001ull, 0xFFF8000000000000ull, 0x7FF0000000000001ull,
                               0x7FF0000000000000ull, 0xFFF0000000000000ull, 0x8000000000000000ull,
                               0x0000000000000000ull, 0x0000000000000001ull, 0x800FFFFFFFFFFFFFull};
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    if (p(rng) < special_rate) {
      x = FromBits64(specials[rng() % (sizeof(specials) / sizeof(specials[0]))]);
    } else {
      x = std::ldexp(u(rng), ex(rng));
    }
  }
  return v;
}

// Section 1.1 on binary64.
double RefMax64(double a, double b) {
  if (a != a || b != b) return FromBits64(kCanon64);
  if (a == 0 && b == 0) return (Bits64(a) == 0 || Bits64(b) == 0) ? 0.0 : -0.0;
  return a > b ? a : b;
}
double RefMin64(double a, double b) {
  if (a != a || b != b) return FromBits64(kCanon64);
  if (a == 0 && b == 0) return (Bits64(a) >> 63 || Bits64(b) >> 63) ? -0.0 : 0.0;
  return a < b ? a : b;
}

// Section 4.1 in binary64, written as the spec states it.
double RefCsum64(const std::vector<double>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (n == 0) return 0.0;
  if (n > 4096) {
    std::vector<double> chunks;
    for (int64_t b = 0; b < n; b += 4096) {
      chunks.push_back(RefCsum64(std::vector<double>(x.begin() + b, x.begin() + std::min(n, b + 4096))));
    }
    return RefCsum64(chunks);
  }
  std::vector<double> lane(64, -0.0);
  for (int64_t i = 0; i < n; ++i) lane[i % 64] = lane[i % 64] + x[i];
  for (int s = 32; s >= 1; s /= 2)
    for (int j = 0; j < s; ++j) lane[j] = lane[j] + lane[j + s];
  return lane[0];
}

void ExpectSameBits(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(Bits64(got[i]), Bits64(want[i])) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(F64Test, ArithmeticMatchesTheNaiveReference) {
  const int64_t n = 20011;  // every thread count splits it
  const std::vector<double> a = RandomF64(n, 1), b = RandomF64(n, 2);
  struct Case {
    Op op;
    double (*ref)(double, double);
  };
  const Case cases[] = {
      {Op::kAdd, [](double x, double y) { return Canon64(x + y); }},
      {Op::kSub, [](double x, double y) { return Canon64(x - y); }},
      {Op::kMul, [](double x, double y) { return Canon64(x * y); }},
      {Op::kDiv, [](double x, double y) { return Canon64(x / y); }},
      {Op::kMax, RefMax64},
      {Op::kMin, RefMin64},
      // std::fmod is exact, so any correct implementation is the reference.
      {Op::kFmod, [](double x, double y) { return Canon64(std::fmod(x, y)); }},
  };
  for (const Case& c : cases) {
    const HostTensor out = RunAll(c.op, {F64({n}, a), F64({n}, b)}, DType::kF64, {n});
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[i] = c.ref(a[i], b[i]);
    ExpectSameBits(out.vec<double>(), want, std::string(OpName(c.op)));
  }
  // Broadcast: a [n] against a scalar.
  const HostTensor out = RunAll(Op::kMul, {F64({n}, a), F64({}, {0.1})}, DType::kF64, {n});
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[i] = Canon64(a[i] * 0.1);
  ExpectSameBits(out.vec<double>(), want, "mul by a broadcast scalar");
}

TEST(F64Test, UnaryOpsMatchTheNaiveReference) {
  const int64_t n = 20011;
  const std::vector<double> a = RandomF64(n, 3, 0.1);
  auto via_f32 = [](float (*f)(float), double x) { return Canon64(static_cast<double>(f(static_cast<float>(x)))); };
  struct Case {
    Op op;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {Op::kNeg, [](double x) { return Canon64(FromBits64(Bits64(x) ^ 0x8000000000000000ull)); }},
      {Op::kAbs, [](double x) { return Canon64(FromBits64(Bits64(x) & 0x7FFFFFFFFFFFFFFFull)); }},
      {Op::kRelu, [](double x) { return x != x ? FromBits64(kCanon64) : (x > 0 ? x : 0.0); }},
      {Op::kSqrt, [](double x) { return Canon64(std::sqrt(x)); }},
      {Op::kRsqrt, [](double x) { return Canon64(1.0 / std::sqrt(x)); }},
      {Op::kFloor, [](double x) { return Canon64(std::floor(x)); }},
      {Op::kCeil, [](double x) { return Canon64(std::ceil(x)); }},
      {Op::kRound, [](double x) { return Canon64(std::nearbyint(x)); }},  // default mode: ties to even
      {Op::kExp, [&](double x) { return via_f32(detmath::exp, x); }},
      {Op::kLog, [&](double x) { return via_f32(detmath::log, x); }},
      {Op::kTanh, [&](double x) { return via_f32(detmath::tanh, x); }},
      {Op::kSigmoid, [&](double x) { return via_f32(detmath::sigmoid, x); }},
      {Op::kErf, [&](double x) { return via_f32(detmath::erf, x); }},
      {Op::kSin, [&](double x) { return via_f32(detmath::sin, x); }},
      {Op::kCos, [&](double x) { return via_f32(detmath::cos, x); }},
  };
  for (const Case& c : cases) {
    const HostTensor out = RunAll(c.op, {F64({n}, a)}, DType::kF64, {n});
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[i] = c.ref(a[i]);
    ExpectSameBits(out.vec<double>(), want, std::string(OpName(c.op)));
  }
  // Edges of rounding to an integral value: ties, 2^52 and the largest non-integral values.
  const std::vector<double> edges = {
      0.5, 1.5, 2.5, -0.5, -2.5, 4503599627370495.5, -4503599627370495.5, 4503599627370496.0, 0.49999999999999994,
      -0.0};
  const HostTensor r = RunAll(Op::kRound, {F64({10}, edges)}, DType::kF64, {10});
  ExpectSameBits(r.vec<double>(),
                 {0.0, 2.0, 2.0, -0.0, -2.0, 4503599627370496.0, -4503599627370496.0, 4503599627370496.0, 0.0, -0.0},
                 "round edges");
}

TEST(F64Test, ComparisonsAndWhere) {
  const std::vector<double> a = {1.0, -0.0, std::nan(""), 2.0, -1e300};
  const std::vector<double> b = {1.0, 0.0, std::nan(""), 3.0, -1e-300};
  EXPECT_EQ(RunAll(Op::kEqual, {F64({5}, a), F64({5}, b)}, DType::kBool, {5}).vec<uint8_t>(),
            (std::vector<uint8_t>{1, 1, 0, 0, 0}));
  EXPECT_EQ(RunAll(Op::kNotEqual, {F64({5}, a), F64({5}, b)}, DType::kBool, {5}).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(RunAll(Op::kLess, {F64({5}, a), F64({5}, b)}, DType::kBool, {5}).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 0, 1, 1}));
  // where copies bits, NaN payload included.
  const double payload = FromBits64(0x7FF0000000000123ull);
  const HostTensor w =
      RunAll(Op::kWhere, {Bool({2}, {1, 0}), F64({2}, {payload, 1.0}), F64({}, {-0.0})}, DType::kF64, {2});
  EXPECT_EQ(Bits64(w.at<double>(0)), 0x7FF0000000000123ull);
  EXPECT_EQ(Bits64(w.at<double>(1)), 0x8000000000000000ull);
}

HostTensor CastTo(HostTensor in, DType to) {
  OpParams p;
  p.to = to;
  Shape s = in.shape;
  return RunAll(Op::kCast, {std::move(in)}, to, s, p);
}

TEST(F64Test, CastsFollowTheSpec) {
  const double nan_payload = FromBits64(0xFFF0000000000001ull);
  // f64 -> f32: nearest even, overflow to inf, NaN canonical.
  const std::vector<double> x = {0.1, 1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-52, 1e300, -1e300, 1e-50, nan_payload, -0.0};
  const std::vector<float> want32 = {0.1f, 1.0f, 1.0f + 0x1p-23f, INFINITY, -INFINITY, 0.0f, NAN, -0.0f};
  const HostTensor f = CastTo(F64({8}, x), DType::kF32);
  for (int i = 0; i < 8; ++i) {
    if (i == 6) {
      EXPECT_EQ(Bits(f.at<float>(i)), kCanon);
    } else {
      EXPECT_EQ(Bits(f.at<float>(i)), Bits(want32[i])) << i;
    }
  }
  // f32 -> f64 is exact; a NaN becomes the f64 canonical NaN.
  const HostTensor d = CastTo(F32Bits({3}, {0x3DCCCCCDu, 0x00000001u, 0xFFC00001u}), DType::kF64);
  EXPECT_EQ(d.at<double>(0), static_cast<double>(0.1f));
  EXPECT_EQ(d.at<double>(1), 0x1p-149);
  EXPECT_EQ(Bits64(d.at<double>(2)), kCanon64);
  // f64 -> integers: truncation, NaN 0, saturation; unsigned targets give 0 for x <= -1.
  const std::vector<double> y = {-1.9, 2.9, std::nan(""), 1e20, -1e20, -0.5, 2147483647.9, 9223372036854775807.0};
  EXPECT_EQ(CastTo(F64({8}, y), DType::kI32).vec<int32_t>(),
            (std::vector<int32_t>{-1, 2, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MAX}));
  EXPECT_EQ(CastTo(F64({8}, y), DType::kI64).vec<int64_t>(),
            (std::vector<int64_t>{-1, 2, 0, INT64_MAX, INT64_MIN, 0, 2147483647, INT64_MAX}));
  EXPECT_EQ(CastTo(F64({8}, y), DType::kU8).vec<uint8_t>(), (std::vector<uint8_t>{0, 2, 0, 255, 0, 0, 255, 255}));
  EXPECT_EQ(CastTo(F64({8}, y), DType::kU64).vec<uint64_t>(),
            (std::vector<uint64_t>{0, 2, 0, UINT64_MAX, 0, 0, 2147483647, uint64_t{1} << 63}));
  EXPECT_EQ(CastTo(F64({8}, y), DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1}));
  // integers -> f64: nearest even (exact below 2^53).
  const HostTensor i = CastTo(I64({3}, {(int64_t{1} << 53) + 1, -3, INT64_MAX}), DType::kF64);
  EXPECT_EQ(i.vec<double>(), (std::vector<double>{0x1p53, -3.0, 0x1p63}));
  const HostTensor u = CastTo(U64({1}, {UINT64_MAX}), DType::kF64);
  EXPECT_EQ(u.at<double>(0), 0x1p64);
  EXPECT_EQ(CastTo(Bool({2}, {1, 0}), DType::kF64).vec<double>(), (std::vector<double>{1.0, 0.0}));
  // Same dtype copies bits.
  EXPECT_EQ(Bits64(CastTo(F64({1}, {nan_payload}), DType::kF64).at<double>(0)), 0xFFF0000000000001ull);
}

TEST(F64Test, ReductionsMatchTheNaiveReference) {
  // [3, 5000, 2]: 5000 terms cross the 4096-term chunk; reduce over axis 1 (strided).
  const Shape shape = {3, 5000, 2};
  const std::vector<double> x = RandomF64(30000, 5, 0.0);
  OpParams p;
  p.axes = {1};
  p.keepdims = false;
  const HostTensor sum = RunAll(Op::kReduceSum, {F64(shape, x)}, DType::kF64, {3, 2}, p);
  const HostTensor mean = RunAll(Op::kReduceMean, {F64(shape, x)}, DType::kF64, {3, 2}, p);
  const HostTensor mx = RunAll(Op::kReduceMax, {F64(shape, x)}, DType::kF64, {3, 2}, p);
  const HostTensor mn = RunAll(Op::kReduceMin, {F64(shape, x)}, DType::kF64, {3, 2}, p);
  const HostTensor prod = RunAll(Op::kReduceProd, {F64(shape, x)}, DType::kF64, {3, 2}, p);
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t c = 0; c < 2; ++c) {
      std::vector<double> terms;
      double m = -INFINITY, lo = INFINITY, pr = 1.0;
      for (int64_t r = 0; r < 5000; ++r) {
        const double v = x[(o * 5000 + r) * 2 + c];
        terms.push_back(v);
        m = RefMax64(m, v);
        lo = RefMin64(lo, v);
        pr = pr * v;
      }
      const double s = RefCsum64(terms);
      EXPECT_EQ(Bits64(sum.at<double>(o * 2 + c)), Bits64(Canon64(s)));
      EXPECT_EQ(Bits64(mean.at<double>(o * 2 + c)), Bits64(Canon64(s / 5000.0)));
      EXPECT_EQ(Bits64(mx.at<double>(o * 2 + c)), Bits64(m));
      EXPECT_EQ(Bits64(mn.at<double>(o * 2 + c)), Bits64(lo));
      EXPECT_EQ(Bits64(prod.at<double>(o * 2 + c)), Bits64(Canon64(pr)));
    }
  }
  // Empty reductions and NaN.
  OpParams all;
  all.axes = {0};
  all.keepdims = false;
  EXPECT_EQ(Bits64(RunAll(Op::kReduceSum, {F64({0}, {})}, DType::kF64, {}, all).at<double>(0)), 0u);
  EXPECT_EQ(Bits64(RunAll(Op::kReduceMean, {F64({0}, {})}, DType::kF64, {}, all).at<double>(0)), kCanon64);
  EXPECT_EQ(RunAll(Op::kReduceMax, {F64({0}, {})}, DType::kF64, {}, all).at<double>(0), -INFINITY);
  EXPECT_EQ(
      Bits64(RunAll(Op::kReduceMax, {F64({3}, {1.0, FromBits64(0x7FF0000000000005ull), 2.0})}, DType::kF64, {}, all)
                 .at<double>(0)),
      kCanon64);
}

TEST(F64Test, MatMulIsTheSequentialFmaChain) {
  // Batched and broadcast: a [2, 7, 33], b [33, 5].
  const int64_t M = 7, K = 33, N = 5;
  const std::vector<double> a = RandomF64(2 * M * K, 6, 0.0), b = RandomF64(K * N, 7, 0.0);
  const HostTensor y = RunAll(Op::kMatMul, {F64({2, M, K}, a), F64({1, K, N}, b)}, DType::kF64, {2, M, N});
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k) acc = std::fma(a[(i * M + m) * K + k], b[k * N + n], acc);
        ASSERT_EQ(Bits64(y.at<double>((i * M + m) * N + n)), Bits64(acc)) << i << " " << m << " " << n;
      }
    }
  }
  // Mixed dtypes are refused.
  EXPECT_FALSE(
      RunStatus(Op::kMatMul, {F64({2, 2}, {1, 2, 3, 4}), F32({2, 2}, {1, 2, 3, 4})}, DType::kF64, {2, 2}).ok());
}

TEST(F64Test, DataMovementMovesEightByteElements) {
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i + 0.25;
  x[5] = FromBits64(0x7FF0000000000077ull);  // a NaN payload is copied, not canonicalized
  OpParams t;
  t.perm = {2, 0, 1};
  const HostTensor tr = RunAll(Op::kTranspose, {F64({2, 3, 4}, x)}, DType::kF64, {4, 2, 3}, t);
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(Bits64(tr.at<double>((k * 2 + i) * 3 + j)), Bits64(x[(i * 3 + j) * 4 + k]));
  OpParams g;
  g.axis = 1;
  const HostTensor ga = RunAll(Op::kGather, {F64({2, 3, 4}, x), I64({2}, {2, -3})}, DType::kF64, {2, 2, 4}, g);
  EXPECT_EQ(Bits64(ga.at<double>(4 + 1)), Bits64(x[1]));
  EXPECT_EQ(ga.at<double>(0), x[8]);
  OpParams pad;
  pad.pad_begin = {1};
  pad.pad_end = {1};
  pad.pad_value = 0.1f;
  const HostTensor pd = RunAll(Op::kPad, {F64({2}, {1.0, 2.0})}, DType::kF64, {4}, pad);
  EXPECT_EQ(pd.vec<double>(), (std::vector<double>{static_cast<double>(0.1f), 1.0, 2.0, static_cast<double>(0.1f)}));
}

TEST(F64Test, OpsWithoutF64RefuseIt) {
  OpParams p;
  p.axis = 0;
  EXPECT_FALSE(RunStatus(Op::kSoftmax, {F64({2}, {1, 2})}, DType::kF64, {2}, p).ok());
  EXPECT_FALSE(RunStatus(Op::kArgMax, {F64({2}, {1, 2})}, DType::kI64, {}, p).ok());
  // An f64 operand with an f32 one is refused, not reinterpreted.
  EXPECT_FALSE(RunStatus(Op::kAdd, {F64({1}, {1}), F32({1}, {1})}, DType::kF64, {1}).ok());
}

}  // namespace
}  // namespace consensor::kernels
