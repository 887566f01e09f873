// Elementwise kernels (docs/DETERMINISM.md sections 1 and 4.2): hand-computed edge cases,
// and bit-identity across portable/AVX2 and 1/2/8 threads for every op.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/detmath.h"

namespace consensor::kernels {
namespace {

constexpr uint32_t kCanon = 0x7FC00000u;

struct Buf {
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<uint8_t> bytes;

  int64_t n() const { return NumElements(shape); }
  template <typename T> T at(int64_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T> std::vector<T> vec() const {
    std::vector<T> v(static_cast<size_t>(n()));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  TensorView view() {
    TensorView v;
    v.dtype = dtype;
    v.rank = static_cast<int>(shape.size());
    for (int i = 0; i < v.rank; ++i) v.dims[i] = shape[i];
    v.data = bytes.empty() ? nullptr : bytes.data();
    return v;
  }
};

template <typename T>
Buf Make(DType dtype, Shape shape, const std::vector<T>& values) {
  Buf b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), b.n());
  EXPECT_EQ(static_cast<int64_t>(sizeof(T)), DTypeSize(dtype));
  b.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
  return b;
}
Buf F32(Shape s, const std::vector<float>& v) { return Make(DType::kF32, std::move(s), v); }
Buf F32Bits(Shape s, const std::vector<uint32_t>& v) { return Make(DType::kF32, std::move(s), v); }
Buf I32(Shape s, const std::vector<int32_t>& v) { return Make(DType::kI32, std::move(s), v); }
Buf I8(Shape s, const std::vector<int8_t>& v) { return Make(DType::kI8, std::move(s), v); }
Buf I64(Shape s, const std::vector<int64_t>& v) { return Make(DType::kI64, std::move(s), v); }
Buf Bool(Shape s, const std::vector<uint8_t>& v) { return Make(DType::kBool, std::move(s), v); }

float Bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t U(float f) { return std::bit_cast<uint32_t>(f); }

struct Config {
  std::string isa;
  int threads;
};

std::vector<Config> Configs() {
  std::vector<Config> c = {{"portable", 1}, {"portable", 2}, {"portable", 8}};
  if (cpu::CpuHasAvx2Fma()) {
    for (int t : {1, 2, 8}) c.push_back({"avx2", t});
  }
  return c;
}

std::vector<std::unique_ptr<CpuBackend>>& Backends() {
  static auto* backends = [] {
    auto* v = new std::vector<std::unique_ptr<CpuBackend>>();
    for (const Config& c : Configs()) {
      auto b = CpuBackend::Create({.num_threads = c.threads, .isa = c.isa});
      EXPECT_TRUE(b.ok()) << b.status().ToString();
      v->push_back(std::move(b).value());
    }
    return v;
  }();
  return *backends;
}

Status RunOn(CpuBackend& backend, Op op, const OpParams& params, std::vector<Buf> inputs, Buf& out) {
  std::vector<TensorView> in_views;
  for (Buf& b : inputs) in_views.push_back(b.view());
  TensorView out_view = out.view();
  KernelCall call;
  call.op = op;
  call.params = &params;
  call.inputs = in_views.data();
  call.num_inputs = static_cast<int>(in_views.size());
  call.outputs = &out_view;
  call.num_outputs = 1;
  return backend.Run(call);
}

// Runs on every backend configuration, checks that all produce identical bytes, and
// returns the result.
Buf RunAll(Op op, std::vector<Buf> inputs, DType out_dtype, Shape out_shape, const OpParams& params = {}) {
  Buf first;
  bool have = false;
  for (size_t i = 0; i < Backends().size(); ++i) {
    Buf out;
    out.dtype = out_dtype;
    out.shape = out_shape;
    out.bytes.assign(static_cast<size_t>(NumElements(out_shape) * DTypeSize(out_dtype)), 0xCD);
    Status s = RunOn(*Backends()[i], op, params, inputs, out);
    EXPECT_TRUE(s.ok()) << OpName(op) << ": " << s.ToString();
    if (!have) {
      first = out;
      have = true;
    } else {
      const Config c = Configs()[i];
      EXPECT_TRUE(first.bytes == out.bytes)
          << OpName(op) << " differs on isa=" << c.isa << " threads=" << c.threads;
    }
  }
  return first;
}

Status RunStatus(Op op, std::vector<Buf> inputs, DType out_dtype, Shape out_shape, const OpParams& params = {}) {
  Buf out;
  out.dtype = out_dtype;
  out.shape = out_shape;
  out.bytes.assign(static_cast<size_t>(std::max<int64_t>(0, NumElements(out_shape)) * DTypeSize(out_dtype)), 0);
  return RunOn(*Backends()[0], op, params, std::move(inputs), out);
}

Buf Unary(Op op, Buf in) {
  Shape s = in.shape;
  DType t = in.dtype;
  return RunAll(op, {std::move(in)}, t, s);
}
Buf Binary(Op op, Buf a, Buf b, DType out_dtype, Shape out_shape) {
  return RunAll(op, {std::move(a), std::move(b)}, out_dtype, std::move(out_shape));
}
Buf Cast(Buf in, DType to) {
  OpParams p;
  p.to = to;
  Shape s = in.shape;
  return RunAll(Op::kCast, {std::move(in)}, to, s, p);
}

void ExpectBits(const Buf& b, const std::vector<uint32_t>& want, const std::string& what) {
  ASSERT_EQ(b.n(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(b.at<uint32_t>(static_cast<int64_t>(i)), want[i]) << what << " element " << i;
  }
}

// Special f32 inputs: NaN payloads of both signs, signaling NaN, infinities, zeros,
// denormals, normal values.
const std::vector<uint32_t> kSpecials = {
    0x7FC00001u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu,  // NaNs
    0x7F800000u, 0xFF800000u,                            // +-inf
    0x00000000u, 0x80000000u,                            // +-0
    0x00000001u, 0x80000001u, 0x007FFFFFu,               // denormals
    0x3FC00000u, 0xC0200000u,                            // 1.5, -2.5
};

// ---------------------------------------------------------------------------------------

TEST(ElementwiseTest, NegAbsReluF32) {
  Buf x = F32Bits({13}, kSpecials);
  ExpectBits(Unary(Op::kNeg, x),
             {kCanon, kCanon, kCanon, kCanon, 0xFF800000u, 0x7F800000u, 0x80000000u, 0x00000000u, 0x80000001u,
              0x00000001u, 0x807FFFFFu, 0xBFC00000u, 0x40200000u},
             "neg");
  ExpectBits(Unary(Op::kAbs, x),
             {kCanon, kCanon, kCanon, kCanon, 0x7F800000u, 0x7F800000u, 0u, 0u, 1u, 1u, 0x007FFFFFu, 0x3FC00000u,
              0x40200000u},
             "abs");
  // relu(-0) = +0, relu(NaN) = canonical NaN, relu(-denormal) = +0.
  ExpectBits(Unary(Op::kRelu, x),
             {kCanon, kCanon, kCanon, kCanon, 0x7F800000u, 0u, 0u, 0u, 1u, 0u, 0x007FFFFFu, 0x3FC00000u, 0u},
             "relu");
}

TEST(ElementwiseTest, SqrtRsqrt) {
  Buf x = F32({6}, {4.0f, -1.0f, 0.0f, -0.0f, std::numeric_limits<float>::infinity(), 2.0f});
  ExpectBits(Unary(Op::kSqrt, x), {U(2.0f), kCanon, 0u, 0x80000000u, 0x7F800000u, U(std::sqrt(2.0f))}, "sqrt");
  ExpectBits(Unary(Op::kRsqrt, x),
             {U(0.5f), kCanon, 0x7F800000u, 0xFF800000u, 0u, U(1.0f / std::sqrt(2.0f))}, "rsqrt");
}

TEST(ElementwiseTest, ArithmeticF32) {
  const float inf = std::numeric_limits<float>::infinity();
  Buf a = F32Bits({8}, {0x7FC12345u, U(inf), U(0.0f), U(1.0f), 0x00000001u, U(1.0f), U(3.0f), U(-0.0f)});
  Buf b = F32Bits({8}, {U(1.0f), U(-inf), U(0.0f), U(-0.0f), 0x00000001u, U(3.0f), 0xFFC00000u, U(-0.0f)});
  ExpectBits(Binary(Op::kAdd, a, b, DType::kF32, {8}),
             {kCanon, kCanon, 0u, U(1.0f), 0x00000002u, U(4.0f), kCanon, 0x80000000u}, "add");
  ExpectBits(Binary(Op::kSub, a, b, DType::kF32, {8}),
             {kCanon, U(inf), 0u, U(1.0f), 0u, U(-2.0f), kCanon, 0u}, "sub");
  ExpectBits(Binary(Op::kMul, a, b, DType::kF32, {8}),
             {kCanon, U(-inf), 0u, 0x80000000u, 0u, U(3.0f), kCanon, 0u}, "mul");
  ExpectBits(Binary(Op::kDiv, a, b, DType::kF32, {8}),
             {kCanon, kCanon, kCanon, U(-inf), U(1.0f), U(1.0f / 3.0f), kCanon, kCanon}, "div");
}

TEST(ElementwiseTest, MaxMinF32SignedZeroAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  Buf a = F32Bits({7}, {U(-0.0f), U(0.0f), U(-0.0f), 0x7FC00001u, U(1.0f), U(-inf), U(2.0f)});
  Buf b = F32Bits({7}, {U(0.0f), U(-0.0f), U(-0.0f), U(1.0f), 0xFF800001u, U(5.0f), U(2.0f)});
  ExpectBits(Binary(Op::kMax, a, b, DType::kF32, {7}),
             {0u, 0u, 0x80000000u, kCanon, kCanon, U(5.0f), U(2.0f)}, "max");
  ExpectBits(Binary(Op::kMin, a, b, DType::kF32, {7}),
             {0x80000000u, 0x80000000u, 0x80000000u, kCanon, kCanon, U(-inf), U(2.0f)}, "min");
}

TEST(ElementwiseTest, TranscendentalsUseDetmathAndCanonicalNaN) {
  std::vector<float> xs;
  for (uint32_t u : kSpecials) xs.push_back(Bits(u));
  for (float v : {-100.0f, -10.0f, -3.3f, -1.0f, -0.25f, 0.1f, 0.7f, 1.0f, 2.5f, 9.0f, 88.0f, 1e30f}) xs.push_back(v);
  const int64_t n = static_cast<int64_t>(xs.size());
  Buf x = F32({n}, xs);
  struct Case {
    Op op;
    float (*ref)(float);
  };
  const Case cases[] = {
      {Op::kExp, [](float v) { return detmath::exp(v); }},
      {Op::kLog, [](float v) { return detmath::log(v); }},
      {Op::kTanh, [](float v) { return detmath::tanh(v); }},
      {Op::kErf, [](float v) { return detmath::erf(v); }},
      {Op::kSin, [](float v) { return detmath::sin(v); }},
      {Op::kCos, [](float v) { return detmath::cos(v); }},
      // Spec formulas of section 4.2, written out here independently of detmath.
      {Op::kSigmoid, [](float v) { return 1.0f / (1.0f + detmath::exp(-v)); }},
      {Op::kGeluErf,
       [](float v) {
         const float t = v * 0x1.6a09e6p-1f;
         return (0.5f * v) * (1.0f + detmath::erf(t));
       }},
      {Op::kGeluTanh,
       [](float v) {
         const float u = (v * v) * v;
         // sqrt(2/pi) = 0x1.988454p-1f. NOTE: DETERMINISM.md 4.2 currently writes the
         // constant as 0x1.8ba83ep-1 (= 0.7728, not sqrt(2/pi)); detmath::gelu_tanh uses
         // 0.7978845608028654f. Flagged for the spec owner; the kernel follows detmath.
         const float i = 0x1.988454p-1f * (v + 0.044715f * u);
         return (0.5f * v) * (1.0f + detmath::tanh(i));
       }},
      {Op::kRsqrt, [](float v) { return 1.0f / std::sqrt(v); }},
  };
  for (const Case& c : cases) {
    Buf y = Unary(c.op, x);
    for (int64_t i = 0; i < n; ++i) {
      float r = c.ref(xs[i]);
      uint32_t want = r != r ? kCanon : U(r);
      EXPECT_EQ(y.at<uint32_t>(i), want) << OpName(c.op) << "(" << xs[i] << ")";
    }
  }
  Buf base = F32({4}, {2.0f, -8.0f, 0.0f, Bits(0x7FC00009u)});
  Buf ex = F32({4}, {10.0f, 1.0f / 3.0f, -1.0f, 0.0f});
  Buf p = Binary(Op::kPow, base, ex, DType::kF32, {4});
  for (int64_t i = 0; i < 4; ++i) {
    float r = detmath::pow(base.at<float>(i), ex.at<float>(i));
    EXPECT_EQ(p.at<uint32_t>(i), r != r ? kCanon : U(r)) << "pow " << i;
  }
}

TEST(ElementwiseTest, IntegerWraparound) {
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  Buf a = I32({7}, {mx, mn, mn, 7, -7, 5, mn});
  Buf b = I32({7}, {1, -1, 1, 0, 2, -3, mn});
  EXPECT_EQ(Binary(Op::kAdd, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mn, mx, mn + 1, 7, -5, 2, 0}));
  EXPECT_EQ(Binary(Op::kSub, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mx - 1, mn + 1, mx, 7, -9, 8, 0}));
  EXPECT_EQ(Binary(Op::kMul, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mx, mn, mn, 0, -14, -15, 0}));
  EXPECT_EQ(Binary(Op::kDiv, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mx, mn, mn, 0, -3, -1, 1}));
  EXPECT_EQ(Unary(Op::kAbs, I32({4}, {mn, -5, 5, 0})).vec<int32_t>(), (std::vector<int32_t>{mn, 5, 5, 0}));
  EXPECT_EQ(Unary(Op::kNeg, I32({4}, {mn, -5, 5, 0})).vec<int32_t>(), (std::vector<int32_t>{mn, 5, -5, 0}));
  EXPECT_EQ(Unary(Op::kRelu, I32({4}, {mn, -5, 5, 0})).vec<int32_t>(), (std::vector<int32_t>{0, 0, 5, 0}));
  EXPECT_EQ(Binary(Op::kMax, a, b, DType::kI32, {7}).vec<int32_t>(), (std::vector<int32_t>{mx, -1, 1, 7, 2, 5, mn}));
  EXPECT_EQ(Binary(Op::kMin, a, b, DType::kI32, {7}).vec<int32_t>(), (std::vector<int32_t>{1, mn, mn, 0, -7, -3, mn}));

  Buf c = I8({6}, {127, -128, 16, -128, 100, -7});
  Buf d = I8({6}, {1, -1, 16, 0, 100, 2});
  EXPECT_EQ(Binary(Op::kAdd, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{-128, 127, 32, -128, -56, -5}));
  EXPECT_EQ(Binary(Op::kSub, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{126, -127, 0, -128, 0, -9}));
  EXPECT_EQ(Binary(Op::kMul, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{127, -128, 0, 0, 16, -14}));
  EXPECT_EQ(Binary(Op::kDiv, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{127, -128, 1, 0, 1, -3}));
  EXPECT_EQ(Unary(Op::kAbs, I8({3}, {-128, -1, 3})).vec<int8_t>(), (std::vector<int8_t>{-128, 1, 3}));
  EXPECT_EQ(Unary(Op::kNeg, I8({3}, {-128, -1, 3})).vec<int8_t>(), (std::vector<int8_t>{-128, 1, -3}));

  const int64_t lmn = std::numeric_limits<int64_t>::min(), lmx = std::numeric_limits<int64_t>::max();
  Buf e = I64({5}, {lmx, lmn, lmn, 9, lmx});
  Buf f = I64({5}, {1, -1, 0, -2, 2});
  EXPECT_EQ(Binary(Op::kAdd, e, f, DType::kI64, {5}).vec<int64_t>(), (std::vector<int64_t>{lmn, lmx, lmn, 7, lmn + 1}));
  EXPECT_EQ(Binary(Op::kMul, e, f, DType::kI64, {5}).vec<int64_t>(), (std::vector<int64_t>{lmx, lmn, 0, -18, -2}));
  EXPECT_EQ(Binary(Op::kDiv, e, f, DType::kI64, {5}).vec<int64_t>(), (std::vector<int64_t>{lmx, lmn, 0, -4, lmx / 2}));
  EXPECT_EQ(Unary(Op::kAbs, I64({2}, {lmn, -3})).vec<int64_t>(), (std::vector<int64_t>{lmn, 3}));
}

TEST(ElementwiseTest, CastFromF32) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {Bits(0x7FC12345u), Bits(0xFFC00000u), inf, -inf, 2147483648.0f, -2147483649.0f,
                                 3.7f, -3.7f, 0.5f, -0.5f, 2147483520.0f, -0.0f, 127.9f, 128.0f, -129.0f,
                                 9223372036854775808.0f, -9223372036854775808.0f, 1e-45f};
  const int64_t n = static_cast<int64_t>(xs.size());
  Buf x = F32({n}, xs);
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(Cast(x, DType::kI32).vec<int32_t>(),
            (std::vector<int32_t>{0, 0, mx, mn, mx, mn, 3, -3, 0, 0, 2147483520, 0, 127, 128, -129, mx, mn, 0}));
  EXPECT_EQ(Cast(x, DType::kI8).vec<int8_t>(),
            (std::vector<int8_t>{0, 0, 127, -128, 127, -128, 3, -3, 0, 0, 127, 0, 127, 127, -128, 127, -128, 0}));
  const int64_t lmn = std::numeric_limits<int64_t>::min(), lmx = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Cast(x, DType::kI64).vec<int64_t>(),
            (std::vector<int64_t>{0, 0, lmx, lmn, 2147483648LL, -2147483648LL, 3, -3, 0, 0, 2147483520LL, 0, 127,
                                  128, -129, lmx, lmn, 0}));
  EXPECT_EQ(Cast(x, DType::kBool).vec<uint8_t>(),
            (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}));
  // f32 -> f32 copies bits, NaN payload included.
  EXPECT_EQ(Cast(x, DType::kF32).bytes, x.bytes);
}

TEST(ElementwiseTest, CastFromIntegersAndBool) {
  Buf a = I32({6}, {16777217, 16777219, -16777217, 300, -129, 2});
  ExpectBits(Cast(a, DType::kF32),
             {U(16777216.0f), U(16777220.0f), U(-16777216.0f), U(300.0f), U(-129.0f), U(2.0f)}, "i32->f32");
  EXPECT_EQ(Cast(a, DType::kI8).vec<int8_t>(), (std::vector<int8_t>{1, 3, -1, 44, 127, 2}));
  EXPECT_EQ(Cast(a, DType::kI64).vec<int64_t>(), (std::vector<int64_t>{16777217, 16777219, -16777217, 300, -129, 2}));
  EXPECT_EQ(Cast(a, DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));
  const int64_t lmx = std::numeric_limits<int64_t>::max();
  Buf l = I64({4}, {lmx, (int64_t{1} << 32) + 5, -1, 0});
  ExpectBits(Cast(l, DType::kF32), {U(9223372036854775808.0f), U(4294967296.0f), U(-1.0f), 0u}, "i64->f32");
  EXPECT_EQ(Cast(l, DType::kI32).vec<int32_t>(), (std::vector<int32_t>{-1, 5, -1, 0}));
  EXPECT_EQ(Cast(l, DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 0}));
  Buf c = I8({3}, {-128, -5, 0});
  EXPECT_EQ(Cast(c, DType::kI64).vec<int64_t>(), (std::vector<int64_t>{-128, -5, 0}));
  EXPECT_EQ(Cast(c, DType::kI32).vec<int32_t>(), (std::vector<int32_t>{-128, -5, 0}));
  ExpectBits(Cast(c, DType::kF32), {U(-128.0f), U(-5.0f), 0u}, "i8->f32");
  Buf t = Bool({2}, {1, 0});
  ExpectBits(Cast(t, DType::kF32), {U(1.0f), 0u}, "bool->f32");
  EXPECT_EQ(Cast(t, DType::kI64).vec<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Cast(t, DType::kI8).vec<int8_t>(), (std::vector<int8_t>{1, 0}));
  EXPECT_EQ(Cast(t, DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 0}));
}

TEST(ElementwiseTest, Comparisons) {
  Buf a = F32Bits({5}, {0x7FC00000u, U(1.0f), U(-0.0f), U(1.0f), U(2.0f)});
  Buf b = F32Bits({5}, {0x7FC00000u, 0xFFC00001u, U(0.0f), U(2.0f), U(1.0f)});
  auto cmp = [&](Op op) { return Binary(op, a, b, DType::kBool, {5}).vec<uint8_t>(); };
  EXPECT_EQ(cmp(Op::kEqual), (std::vector<uint8_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(cmp(Op::kNotEqual), (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  EXPECT_EQ(cmp(Op::kLess), (std::vector<uint8_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(cmp(Op::kLessEqual), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(cmp(Op::kGreater), (std::vector<uint8_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(cmp(Op::kGreaterEqual), (std::vector<uint8_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(Binary(Op::kLess, I8({3}, {-128, 5, 127}), I8({3}, {127, 5, -128}), DType::kBool, {3}).vec<uint8_t>(),
            (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(Binary(Op::kGreater, I64({2}, {-1, 1}), I64({2}, {0, 0}), DType::kBool, {2}).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(Binary(Op::kLess, Bool({4}, {0, 0, 1, 1}), Bool({4}, {0, 1, 0, 1}), DType::kBool, {4}).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 1, 0, 0}));
}

TEST(ElementwiseTest, Logical) {
  Buf a = Bool({4}, {0, 0, 1, 1});
  Buf b = Bool({4}, {0, 1, 0, 1});
  EXPECT_EQ(Binary(Op::kAnd, a, b, DType::kBool, {4}).vec<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Binary(Op::kOr, a, b, DType::kBool, {4}).vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Binary(Op::kXor, a, b, DType::kBool, {4}).vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Unary(Op::kNot, a).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0}));
}

TEST(ElementwiseTest, WhereBroadcastCopiesBits) {
  // cond [3,1], a [1,4] (with a NaN payload), b scalar (rank 0) -> [3,4].
  Buf c = Bool({3, 1}, {1, 0, 1});
  Buf a = F32Bits({1, 4}, {0x7FC0BEEFu, U(-0.0f), U(1.0f), U(2.0f)});
  Buf b = F32Bits({}, {0xFF800001u});
  Buf y = RunAll(Op::kWhere, {c, a, b}, DType::kF32, {3, 4});
  std::vector<uint32_t> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) want.push_back(c.at<uint8_t>(i) ? a.at<uint32_t>(j) : 0xFF800001u);
  ExpectBits(y, want, "where");
  // Integer and bool payloads (element sizes 8 and 1).
  Buf yi = RunAll(Op::kWhere, {Bool({2}, {0, 1}), I64({2}, {1, 2}), I64({1}, {-9})}, DType::kI64, {2});
  EXPECT_EQ(yi.vec<int64_t>(), (std::vector<int64_t>{-9, 2}));
  Buf yb = RunAll(Op::kWhere, {Bool({3}, {0, 1, 0}), Bool({3}, {1, 1, 1}), Bool({3}, {0, 0, 1})}, DType::kBool, {3});
  EXPECT_EQ(yb.vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(ElementwiseTest, BroadcastShapes) {
  // [3,1,5] + [4,1] -> [3,4,5]
  std::vector<float> av(15), bv(4);
  for (int i = 0; i < 15; ++i) av[i] = static_cast<float>(i) * 100.0f;
  for (int i = 0; i < 4; ++i) bv[i] = static_cast<float>(i);
  Buf y = Binary(Op::kAdd, F32({3, 1, 5}, av), F32({4, 1}, bv), DType::kF32, {3, 4, 5});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) EXPECT_EQ(y.at<float>((i * 4 + j) * 5 + k), av[i * 5 + k] + bv[j]);
  // Scalar on the left, i32.
  Buf s = Binary(Op::kSub, I32({}, {10}), I32({2, 3}, {1, 2, 3, 4, 5, 6}), DType::kI32, {2, 3});
  EXPECT_EQ(s.vec<int32_t>(), (std::vector<int32_t>{9, 8, 7, 6, 5, 4}));
  // Both operands broadcast: [2,1] * [1,3].
  Buf m = Binary(Op::kMul, I64({2, 1}, {2, 3}), I64({1, 3}, {1, 10, 100}), DType::kI64, {2, 3});
  EXPECT_EQ(m.vec<int64_t>(), (std::vector<int64_t>{2, 20, 200, 3, 30, 300}));
  // Comparison with broadcast.
  Buf g = Binary(Op::kGreater, F32({3}, {1, 2, 3}), F32({2, 1}, {1.5f, 2.5f}), DType::kBool, {2, 3});
  EXPECT_EQ(g.vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0, 0, 1}));
}

TEST(ElementwiseTest, EmptyTensors) {
  Buf y = Binary(Op::kAdd, F32({0, 3}, {}), F32({1, 3}, {1, 2, 3}), DType::kF32, {0, 3});
  EXPECT_EQ(y.n(), 0);
  Buf z = Binary(Op::kAdd, F32({2, 1}, {1, 2}), F32({0}, {}), DType::kF32, {2, 0});
  EXPECT_EQ(z.n(), 0);
  EXPECT_EQ(Unary(Op::kExp, F32({0}, {})).n(), 0);
  EXPECT_EQ(Cast(I32({3, 0}, {}), DType::kF32).n(), 0);
  EXPECT_EQ(RunAll(Op::kWhere, {Bool({0}, {}), I8({1}, {1}), I8({0}, {})}, DType::kI8, {0}).n(), 0);
}

TEST(ElementwiseTest, InvalidCalls) {
  auto code = [](Status s) { return s.code(); };
  EXPECT_EQ(code(RunStatus(Op::kExp, {I32({1}, {1})}, DType::kI32, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAdd, {F32({1}, {1}), I32({1}, {1})}, DType::kF32, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAdd, {Bool({1}, {1}), Bool({1}, {1})}, DType::kBool, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAnd, {F32({1}, {1}), F32({1}, {1})}, DType::kBool, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kNeg, {Bool({1}, {1})}, DType::kBool, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kPow, {I32({1}, {1}), I32({1}, {1})}, DType::kI32, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kLess, {F32({1}, {1}), F32({1}, {1})}, DType::kF32, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kWhere, {I32({1}, {1}), F32({1}, {1}), F32({1}, {1})}, DType::kF32, {1})),
            StatusCode::kInvalidArgument);
  // Shapes that do not broadcast, and an output that is not the broadcast shape.
  EXPECT_EQ(code(RunStatus(Op::kAdd, {F32({2}, {1, 2}), F32({3}, {1, 2, 3})}, DType::kF32, {3})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAdd, {F32({1}, {1}), F32({1}, {1})}, DType::kF32, {4})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kExp, {F32({2}, {1, 2})}, DType::kF32, {2, 2})), StatusCode::kInvalidArgument);
  OpParams p;
  p.to = DType::kI32;
  EXPECT_EQ(code(RunStatus(Op::kCast, {F32({1}, {1})}, DType::kI8, {1}, p)), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------
// Bit-identity across ISAs and thread counts on larger, irregular inputs (sizes are not
// multiples of the vector width and span several parallel chunks).

std::vector<float> RandomF32(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  for (int64_t i = 0; i < n; i += 97) v[i] = Bits(kSpecials[(i / 97) % kSpecials.size()]);
  for (int64_t i = 13; i < n; i += 1013) v[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  return v;
}

template <typename T>
std::vector<T> RandomInt(int64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) {
    uint64_t r = rng();
    x = (r & 3) == 0 ? static_cast<T>(static_cast<int64_t>(r >> 8) % 5 - 2) : static_cast<T>(r >> 3);
  }
  for (int64_t i = 0; i < n; i += 101) v[i] = std::numeric_limits<T>::min();
  for (int64_t i = 1; i < n; i += 103) v[i] = -1;
  for (int64_t i = 2; i < n; i += 107) v[i] = 0;
  return v;
}

Buf RandomOf(DType t, Shape shape, uint32_t seed) {
  const int64_t n = NumElements(shape);
  switch (t) {
    case DType::kF32: return F32(shape, RandomF32(n, seed));
    case DType::kI32: return I32(shape, RandomInt<int32_t>(n, seed));
    case DType::kI8: return I8(shape, RandomInt<int8_t>(n, seed));
    case DType::kI64: return I64(shape, RandomInt<int64_t>(n, seed));
    default: {
      std::vector<uint8_t> v(static_cast<size_t>(n));
      std::mt19937 rng(seed);
      for (auto& x : v) x = rng() & 1;
      return Bool(shape, v);
    }
  }
}

struct ShapeCase {
  Shape a, b, out;
};
const ShapeCase kShapeCases[] = {
    {{40009}, {40009}, {40009}},                // same shape, flat
    {{40009}, {}, {40009}},                     // scalar right
    {{}, {33, 1001}, {33, 1001}},               // scalar left
    {{13, 1, 67}, {1, 53, 67}, {13, 53, 67}},  // general broadcast, contiguous inner
    {{61, 1}, {1, 1, 677}, {1, 61, 677}},       // broadcast inner on the left
    {{5, 1, 7, 1}, {3, 7, 1}, {5, 3, 7, 1}},    // trailing 1 dims
};

TEST(ElementwiseTest, AllOpsBitIdenticalAcrossIsaAndThreads) {
  if (!cpu::CpuHasAvx2Fma()) {
    std::cout << "[ INFO ] no AVX2/FMA: comparing portable thread counts only\n";
  }
  const DType numeric[] = {DType::kF32, DType::kI32, DType::kI8, DType::kI64};
  const DType all[] = {DType::kF32, DType::kI32, DType::kI8, DType::kBool, DType::kI64};
  uint32_t seed = 1;
  auto next = [&seed] { return seed++; };
  // Unary.
  for (Op op : {Op::kNeg, Op::kAbs, Op::kRelu}) {
    for (DType t : numeric) Unary(op, RandomOf(t, {3, 20011}, next()));
  }
  for (Op op : {Op::kExp, Op::kLog, Op::kSqrt, Op::kRsqrt, Op::kTanh, Op::kSigmoid, Op::kErf, Op::kGeluErf,
                Op::kGeluTanh, Op::kSin, Op::kCos}) {
    Unary(op, RandomOf(DType::kF32, {40009}, next()));
  }
  Unary(Op::kNot, RandomOf(DType::kBool, {40009}, next()));
  for (DType from : all) {
    for (DType to : all) Cast(RandomOf(from, {40009}, next()), to);
  }
  // Binary over several broadcast patterns.
  for (const ShapeCase& sc : kShapeCases) {
    for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin}) {
      for (DType t : numeric) Binary(op, RandomOf(t, sc.a, next()), RandomOf(t, sc.b, next()), t, sc.out);
    }
    Binary(Op::kPow, RandomOf(DType::kF32, sc.a, next()), RandomOf(DType::kF32, sc.b, next()), DType::kF32, sc.out);
    for (Op op : {Op::kEqual, Op::kNotEqual, Op::kLess, Op::kLessEqual, Op::kGreater, Op::kGreaterEqual}) {
      for (DType t : all) {
        Binary(op, RandomOf(t, sc.a, next()), RandomOf(t, sc.b, next()), DType::kBool, sc.out);
      }
    }
    for (Op op : {Op::kAnd, Op::kOr, Op::kXor}) {
      Binary(op, RandomOf(DType::kBool, sc.a, next()), RandomOf(DType::kBool, sc.b, next()), DType::kBool, sc.out);
    }
    for (DType t : all) {
      RunAll(Op::kWhere,
          {RandomOf(DType::kBool, sc.out, next()), RandomOf(t, sc.a, next()), RandomOf(t, sc.b, next())}, t, sc.out);
    }
  }
}

}  // namespace
}  // namespace consensor::kernels
