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
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/detmath.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

HostTensor Unary(Op op, HostTensor in) {
  Shape s = in.shape;
  DType t = in.dtype;
  return RunAll(op, {std::move(in)}, t, s);
}
HostTensor Binary(Op op, HostTensor a, HostTensor b, DType out_dtype, Shape out_shape) {
  return RunAll(op, {std::move(a), std::move(b)}, out_dtype, std::move(out_shape));
}
HostTensor Cast(HostTensor in, DType to) {
  OpParams p;
  p.to = to;
  Shape s = in.shape;
  return RunAll(Op::kCast, {std::move(in)}, to, s, p);
}

void ExpectBits(const HostTensor& b, const std::vector<uint32_t>& want, const std::string& what) {
  ASSERT_EQ(b.numel(), static_cast<int64_t>(want.size())) << what;
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
  HostTensor x = F32Bits({13}, kSpecials);
  ExpectBits(Unary(Op::kNeg, x),
             {kCanon, kCanon, kCanon, kCanon, 0xFF800000u, 0x7F800000u, 0x80000000u, 0x00000000u, 0x80000001u,
              0x00000001u, 0x807FFFFFu, 0xBFC00000u, 0x40200000u},
             "neg");
  ExpectBits(
      Unary(Op::kAbs, x),
      {kCanon, kCanon, kCanon, kCanon, 0x7F800000u, 0x7F800000u, 0u, 0u, 1u, 1u, 0x007FFFFFu, 0x3FC00000u, 0x40200000u},
      "abs");
  // relu(-0) = +0, relu(NaN) = canonical NaN, relu(-denormal) = +0.
  ExpectBits(Unary(Op::kRelu, x),
             {kCanon, kCanon, kCanon, kCanon, 0x7F800000u, 0u, 0u, 0u, 1u, 0u, 0x007FFFFFu, 0x3FC00000u, 0u}, "relu");
}

TEST(ElementwiseTest, SqrtRsqrt) {
  HostTensor x = F32({6}, {4.0f, -1.0f, 0.0f, -0.0f, std::numeric_limits<float>::infinity(), 2.0f});
  ExpectBits(Unary(Op::kSqrt, x), {Bits(2.0f), kCanon, 0u, 0x80000000u, 0x7F800000u, Bits(std::sqrt(2.0f))}, "sqrt");
  ExpectBits(Unary(Op::kRsqrt, x), {Bits(0.5f), kCanon, 0x7F800000u, 0xFF800000u, 0u, Bits(1.0f / std::sqrt(2.0f))},
             "rsqrt");
}

TEST(ElementwiseTest, ArithmeticF32) {
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor a =
      F32Bits({8}, {0x7FC12345u, Bits(inf), Bits(0.0f), Bits(1.0f), 0x00000001u, Bits(1.0f), Bits(3.0f), Bits(-0.0f)});
  HostTensor b = F32Bits(
      {8}, {Bits(1.0f), Bits(-inf), Bits(0.0f), Bits(-0.0f), 0x00000001u, Bits(3.0f), 0xFFC00000u, Bits(-0.0f)});
  ExpectBits(Binary(Op::kAdd, a, b, DType::kF32, {8}),
             {kCanon, kCanon, 0u, Bits(1.0f), 0x00000002u, Bits(4.0f), kCanon, 0x80000000u}, "add");
  ExpectBits(Binary(Op::kSub, a, b, DType::kF32, {8}), {kCanon, Bits(inf), 0u, Bits(1.0f), 0u, Bits(-2.0f), kCanon, 0u},
             "sub");
  ExpectBits(Binary(Op::kMul, a, b, DType::kF32, {8}),
             {kCanon, Bits(-inf), 0u, 0x80000000u, 0u, Bits(3.0f), kCanon, 0u}, "mul");
  ExpectBits(Binary(Op::kDiv, a, b, DType::kF32, {8}),
             {kCanon, kCanon, kCanon, Bits(-inf), Bits(1.0f), Bits(1.0f / 3.0f), kCanon, kCanon}, "div");
}

TEST(ElementwiseTest, MaxMinF32SignedZeroAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor a = F32Bits({7}, {Bits(-0.0f), Bits(0.0f), Bits(-0.0f), 0x7FC00001u, Bits(1.0f), Bits(-inf), Bits(2.0f)});
  HostTensor b = F32Bits({7}, {Bits(0.0f), Bits(-0.0f), Bits(-0.0f), Bits(1.0f), 0xFF800001u, Bits(5.0f), Bits(2.0f)});
  ExpectBits(Binary(Op::kMax, a, b, DType::kF32, {7}), {0u, 0u, 0x80000000u, kCanon, kCanon, Bits(5.0f), Bits(2.0f)},
             "max");
  ExpectBits(Binary(Op::kMin, a, b, DType::kF32, {7}),
             {0x80000000u, 0x80000000u, 0x80000000u, kCanon, kCanon, Bits(-inf), Bits(2.0f)}, "min");
}

TEST(ElementwiseTest, TranscendentalsUseDetmathAndCanonicalNaN) {
  std::vector<float> xs;
  for (uint32_t u : kSpecials) xs.push_back(FromBits(u));
  for (float v : {-100.0f, -10.0f, -3.3f, -1.0f, -0.25f, 0.1f, 0.7f, 1.0f, 2.5f, 9.0f, 88.0f, 1e30f}) xs.push_back(v);
  const int64_t n = static_cast<int64_t>(xs.size());
  HostTensor x = F32({n}, xs);
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
      {Op::kAsin, [](float v) { return detmath::asin(v); }},
      {Op::kAcos, [](float v) { return detmath::acos(v); }},
      {Op::kAtan, [](float v) { return detmath::atan(v); }},
      {Op::kSinh, [](float v) { return detmath::sinh(v); }},
      {Op::kCosh, [](float v) { return detmath::cosh(v); }},
      {Op::kAsinh, [](float v) { return detmath::asinh(v); }},
      {Op::kAcosh, [](float v) { return detmath::acosh(v); }},
      {Op::kAtanh, [](float v) { return detmath::atanh(v); }},
      {Op::kFloor, [](float v) { return static_cast<float>(std::floor(static_cast<double>(v))); }},
      {Op::kCeil, [](float v) { return static_cast<float>(std::ceil(static_cast<double>(v))); }},
      {Op::kRound, [](float v) { return static_cast<float>(std::nearbyint(static_cast<double>(v))); }},
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
    HostTensor y = Unary(c.op, x);
    for (int64_t i = 0; i < n; ++i) {
      float r = c.ref(xs[i]);
      uint32_t want = r != r ? kCanon : Bits(r);
      EXPECT_EQ(y.at<uint32_t>(i), want) << OpName(c.op) << "(" << xs[i] << ")";
    }
  }
  HostTensor base = F32({4}, {2.0f, -8.0f, 0.0f, FromBits(0x7FC00009u)});
  HostTensor ex = F32({4}, {10.0f, 1.0f / 3.0f, -1.0f, 0.0f});
  HostTensor p = Binary(Op::kPow, base, ex, DType::kF32, {4});
  for (int64_t i = 0; i < 4; ++i) {
    float r = detmath::pow(base.at<float>(i), ex.at<float>(i));
    EXPECT_EQ(p.at<uint32_t>(i), r != r ? kCanon : Bits(r)) << "pow " << i;
  }
}

// f32 pow on AVX-512F CPUs runs 16 lanes at a time (elementwise_avx512.cc, DETERMINISM.md 5.11
// transcribed): against detmath::pow with the canonical NaN, on random bit patterns of both
// operands, typical exponents (2 is the mel spectrogram's) over random bases, every pair of
// special values (zeros, subnormals, +-1, infinities, NaN payloads, odd and even integers,
// 2^23, 2^24, the largest float), and every 251st base with the exponent 2; then through the
// backend with a scalar, a same-shape and a broadcast exponent, with and without the kernel.
TEST(ElementwiseTest, PowAvx512MatchesDetmathBitForBit) {
  if (!cpu::gemm::CpuHasAvx512F()) GTEST_SKIP() << "no AVX-512F";
  auto want = [](float x, float y) {
    const float r = detmath::pow(x, y);
    return r != r ? kCanon : Bits(r);
  };
  std::vector<float> xs, ys;
  std::mt19937 rng(51);
  for (int i = 0; i < 1 << 20; ++i) {
    xs.push_back(FromBits(rng()));
    ys.push_back(FromBits(rng()));
  }
  const std::vector<uint32_t> specials = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00800000u,
                                          0x3F800000u, 0xBF800000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
                                          0x7F800001u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x40000000u, 0xC0000000u, 0x40400000u,
                                          0xC0400000u, 0x3F000000u, 0xBF000000u, 0x4B000000u, 0x4B000001u, 0x4B800000u,
                                          0xCB800001u, 0x3F7FFFFFu, 0x3F800001u, 0x42B20000u, 0xC2D20000u, 0x41200000u,
                                          0x3EAAAAABu, 0xBEAAAAABu, 0x4E800000u, 0x33D6BF95u};
  for (uint32_t a : specials) {
    for (uint32_t b : specials) {
      xs.push_back(FromBits(a));
      ys.push_back(FromBits(b));
    }
  }
  for (float y : {2.0f, 0.5f, 3.0f, -1.0f, -2.0f, 1.0f / 3.0f, 10.0f, 2.5f, -0.5f, 0.1f, 23.0f, -7.0f, 1e10f}) {
    for (int i = 0; i < 1 << 14; ++i) {
      xs.push_back(FromBits(rng()));
      ys.push_back(y);
    }
  }
  std::vector<float> out(xs.size());
  cpu::PowF32Avx512(xs.data(), ys.data(), false, out.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(Bits(out[i]), want(xs[i], ys[i])) << "pow(" << std::hex << Bits(xs[i]) << ", " << Bits(ys[i]) << ")";
  }
  // Exponent 2, scalar, every 251st bit pattern of the base; odd lengths leave masked tails.
  std::vector<float> bases;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 251) bases.push_back(FromBits(static_cast<uint32_t>(u)));
  out.assign(bases.size(), 0.0f);
  const float two = 2.0f;
  cpu::PowF32Avx512(bases.data(), &two, true, out.data(), static_cast<int64_t>(bases.size()) - 5);
  for (size_t i = 0; i + 5 < bases.size(); ++i) ASSERT_EQ(Bits(out[i]), want(bases[i], 2.0f)) << i;
  for (size_t i = bases.size() - 5; i < bases.size(); ++i) ASSERT_EQ(Bits(out[i]), 0u) << "wrote past n";
  // Through the backend (every engine, threads), [5, 257] bases as in the mel spectrogram.
  std::vector<float> x(5 * 257), e(5 * 257), row(257);
  for (size_t i = 0; i < x.size(); ++i) x[i] = FromBits(rng() % 5 == 0 ? specials[rng() % specials.size()] : rng());
  for (size_t i = 0; i < e.size(); ++i) e[i] = i % 3 == 0 ? 2.0f : FromBits(rng());
  for (size_t i = 0; i < row.size(); ++i) row[i] = FromBits(rng());
  for (bool kernel : {true, false}) {
    cpu::SetPowAvx512ForTesting(kernel);
    const HostTensor base = F32({1, 1, 5, 257}, x);
    const HostTensor p_scalar = Binary(Op::kPow, base, F32({}, {2.0f}), DType::kF32, {1, 1, 5, 257});
    const HostTensor p_full = Binary(Op::kPow, base, F32({5, 257}, e), DType::kF32, {1, 1, 5, 257});
    const HostTensor p_row = Binary(Op::kPow, base, F32({257}, row), DType::kF32, {1, 1, 5, 257});
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(p_scalar.at<uint32_t>(i), want(x[i], 2.0f)) << i;
      ASSERT_EQ(p_full.at<uint32_t>(i), want(x[i], e[i])) << i;
      ASSERT_EQ(p_row.at<uint32_t>(i), want(x[i], row[i % 257])) << i;
    }
  }
  cpu::SetPowAvx512ForTesting(true);
}

// f32 sigmoid on AVX-512F CPUs runs 16 lanes at a time (elementwise_avx512.cc, DETERMINISM.md 5.6
// and 5.3 transcribed): against detmath::sigmoid with the canonical NaN on every 127th bit
// pattern and on the patterns around the clamps (+-89, +-105), zeros, infinities and NaNs, with a
// masked tail; then the op and a conv's fused sigmoid epilogue through the backend, on and off.
TEST(ElementwiseTest, SigmoidAvx512MatchesDetmathBitForBit) {
  if (!cpu::gemm::CpuHasAvx512F()) GTEST_SKIP() << "no AVX-512F";
  auto want = [](float x) {
    const float r = detmath::sigmoid(x);
    return r != r ? kCanon : Bits(r);
  };
  std::vector<float> xs;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 127) xs.push_back(FromBits(static_cast<uint32_t>(u)));
  for (float edge : {89.0f, -89.0f, 105.0f, -105.0f, 0x1.62e430p+6f, -0x1.62e430p+6f, 0x1.9fe36ap+6f, -0x1.9fe36ap+6f,
                     0.0f, 1.0f, -1.0f}) {
    for (int d = -64; d <= 64; ++d) xs.push_back(FromBits(Bits(edge) + static_cast<uint32_t>(d)));
  }
  for (uint32_t special : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,
                           0x00000001u, 0x807FFFFFu}) {
    xs.push_back(FromBits(special));
  }
  std::vector<float> out(xs.size() + 3, FromBits(0x12345678u));
  cpu::SigmoidF32Avx512(xs.data(), out.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(Bits(out[i]), want(xs[i])) << "sigmoid(" << std::hex << Bits(xs[i]) << ")";
  for (size_t i = xs.size(); i < out.size(); ++i) ASSERT_EQ(Bits(out[i]), 0x12345678u) << "wrote past n";
  // Through the backend: the op (every engine, threads) and a depthwise conv with a sigmoid
  // epilogue (the detector's last ConvTranspose ends in one), with the 16-lane path on and off.
  std::mt19937 rng(77);
  std::vector<float> x(3 * 5 * 211);
  for (auto& v : x)
    v = rng() % 7 == 0 ? FromBits(rng()) : static_cast<float>(static_cast<int32_t>(rng() % 4001) - 2000) / 100.0f;
  const HostTensor xt = F32({3, 5, 211}, x);
  std::vector<float> w(5 * 9);
  for (auto& v : w) v = static_cast<float>(static_cast<int32_t>(rng() % 201) - 100) / 50.0f;
  HostTensor wt = F32({5, 1, 3, 3}, w);
  HostTensor xc = F32({1, 5, 3, 211}, x);
  for (bool kernel : {true, false}) {
    cpu::SetSigmoidAvx512ForTesting(kernel);
    const HostTensor y = Unary(Op::kSigmoid, xt);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y.at<uint32_t>(i), want(x[i])) << i;
    const EpilogueStep step{Op::kSigmoid, 1, {EpilogueOperand{false, 0}}};
    Epilogue epilogue{&step, 1, nullptr, 0};
    OpParams params;
    params.strides = {1, 1};
    params.pads = {1, 1, 1, 1};
    params.dilations = {1, 1};
    params.kernel = {3, 3};
    params.group = 5;
    for (Engine& e : Engines()) {
      HostTensor conv(DType::kF32, {1, 5, 3, 211}), fused(DType::kF32, {1, 5, 3, 211});
      TensorView in[2] = {xc.view(), wt.view()};
      ASSERT_TRUE(RunKernel(*e.backend, Op::kConv2D, params, {in[0], in[1]}, conv.view()).ok());
      TensorView out = fused.view();
      KernelCall call = MakeCall(Op::kConv2D, params, in, 2, &out);
      call.epilogue = &epilogue;
      ASSERT_TRUE(e.backend->Run(call).ok()) << e.label;
      for (int64_t i = 0; i < conv.numel(); ++i) {
        ASSERT_EQ(fused.at<uint32_t>(i), want(conv.at<float>(i))) << e.label << " element " << i;
      }
    }
  }
  cpu::SetSigmoidAvx512ForTesting(true);
}

// round is computed branch-free by the IEEE adder (elementwise_impl.h); detmath's bit
// manipulation (DETERMINISM.md 5.12, shared with CUDA) is the reference, on a sweep of every
// exponent and sign, every tie k + 0.5 near 0 and below 2^23, and the neighbours of each.
TEST(ElementwiseTest, RoundMatchesDetmathBitForBit) {
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65521) bits.push_back(static_cast<uint32_t>(u));
  auto around = [&](float v) {
    const uint32_t b = Bits(v);
    for (uint32_t d : {0u, 1u, 2u}) {
      bits.push_back(b + d);
      bits.push_back(b - d);
      bits.push_back((b + d) ^ 0x80000000u);
      bits.push_back((b - d) ^ 0x80000000u);
    }
  };
  for (int k = 0; k < 4096; ++k) around(static_cast<float>(k) + 0.5f);
  for (int k = 0; k < 4096; ++k) around(8388608.0f - static_cast<float>(k) - 0.5f);
  for (int e = -149; e <= 127; ++e) around(std::ldexp(1.0f, e));
  for (uint32_t u : kSpecials) bits.push_back(u);
  const int64_t n = static_cast<int64_t>(bits.size());
  HostTensor y = Unary(Op::kRound, F32Bits({n}, bits));
  for (int64_t i = 0; i < n; ++i) {
    const float r = detmath::round_half_even(FromBits(bits[i]));
    ASSERT_EQ(y.at<uint32_t>(i), Bits(r)) << "round(bits 0x" << std::hex << bits[i] << ")";
  }
}

// Against the C library's double functions (the naive reference): within the measured
// bounds of DETERMINISM.md 5.15 (at most 3.2 ULP), out-of-domain inputs give the canonical NaN.
TEST(ElementwiseTest, InverseTrigAndHyperbolicMatchDoubleReference) {
  std::vector<float> xs;
  for (int i = -400; i <= 400; ++i) xs.push_back(static_cast<float>(i) * 0.0025f);  // [-1, 1]
  for (float v : {1.5f, -3.25f, 7.0f, 20.0f, -60.0f, 88.5f, 89.4f, 1e-20f, -1e-38f, 5000.0f, -1e20f, 3e38f}) {
    xs.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(xs.size());
  HostTensor x = F32({n}, xs);
  struct Case {
    Op op;
    double (*ref)(double);
  };
  const Case cases[] = {
      {Op::kAsin, [](double v) { return std::asin(v); }},   {Op::kAcos, [](double v) { return std::acos(v); }},
      {Op::kAtan, [](double v) { return std::atan(v); }},   {Op::kSinh, [](double v) { return std::sinh(v); }},
      {Op::kCosh, [](double v) { return std::cosh(v); }},   {Op::kAsinh, [](double v) { return std::asinh(v); }},
      {Op::kAcosh, [](double v) { return std::acosh(v); }}, {Op::kAtanh, [](double v) { return std::atanh(v); }}};
  for (const Case& c : cases) {
    HostTensor y = Unary(c.op, x);
    for (int64_t i = 0; i < n; ++i) {
      const double want = c.ref(static_cast<double>(xs[i]));
      const float got = y.at<float>(i);
      if (std::isnan(want)) {
        EXPECT_EQ(y.at<uint32_t>(i), kCanon) << OpName(c.op) << "(" << xs[i] << ")";
      } else if (std::isinf(static_cast<float>(want))) {
        EXPECT_EQ(got, static_cast<float>(want)) << OpName(c.op) << "(" << xs[i] << ")";
      } else {
        const double ulp = std::ldexp(1.0, std::max(std::ilogb(std::fabs(want)), -126) - 23);
        EXPECT_LE(std::fabs(static_cast<double>(got) - want), 3.2 * ulp) << OpName(c.op) << "(" << xs[i] << ")";
      }
    }
  }
}

// x^e modulo 2^n; a negative exponent gives 1 / x^|e| truncated (1, +-1 for -1, else 0).
template <typename T>
T NaiveIntPow(T x, T e) {
  if (e < 0) return x == 1 ? T{1} : (x == static_cast<T>(-1) ? static_cast<T>((e % 2) != 0 ? -1 : 1) : T{0});
  uint64_t r = 1;
  for (T i = 0; i < e; ++i) r *= static_cast<uint64_t>(x);  // e is small in these tests
  return static_cast<T>(r);
}

template <typename T>
void CheckIntPow(DType t, std::vector<T> xs, std::vector<T> es) {
  const int64_t n = static_cast<int64_t>(xs.size()), m = static_cast<int64_t>(es.size());
  HostTensor a = Make(t, {n, 1}, xs);
  HostTensor b = Make(t, {1, m}, es);
  const HostTensor y = Binary(Op::kPow, a, b, t, {n, m});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      EXPECT_EQ(y.at<T>(i * m + j), NaiveIntPow<T>(xs[i], es[j])) << DTypeName(t) << " " << +xs[i] << " ^ " << +es[j];
    }
  }
}

TEST(ElementwiseTest, IntegerPowIsExactModulo2ToTheN) {
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  CheckIntPow<int32_t>(DType::kI32, {0, 1, -1, 2, -2, 3, 7, -13, 46341, mn, mx},
                       {0, 1, 2, 3, 5, 31, 32, 33, 100, -1, -2, -3, mn});
  CheckIntPow<int8_t>(DType::kI8, {0, 1, -1, 2, 3, -5, 127, -128}, {0, 1, 2, 3, 7, 8, 9, 127, -1, -2, -128});
  CheckIntPow<int64_t>(DType::kI64, {0, 1, -1, 2, -3, 1000003, std::numeric_limits<int64_t>::min()},
                       {0, 1, 2, 13, 63, 64, 65, 200, -1, -4});
  CheckIntPow<uint8_t>(DType::kU8, {0, 1, 2, 3, 255}, {0, 1, 2, 7, 8, 200, 255});
  CheckIntPow<uint64_t>(DType::kU64, {0, 1, 3, 0xFFFFFFFFFFFFFFFFull}, {0, 1, 2, 40, 64, 300});
  // An exponent the naive loop cannot reach: x^(a + 5) = x^a * x^5 modulo 2^64.
  HostTensor base = I64({1}, {3});
  HostTensor big = Binary(Op::kPow, base, I64({1}, {(int64_t{1} << 40) + 5}), DType::kI64, {1});
  HostTensor part = Binary(Op::kPow, base, I64({1}, {int64_t{1} << 40}), DType::kI64, {1});
  EXPECT_EQ(static_cast<uint64_t>(big.at<int64_t>(0)), static_cast<uint64_t>(part.at<int64_t>(0)) * 243u);
}

TEST(ElementwiseTest, FmodF32IsExactWithTheDividendsSign) {
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor a = F32({7}, {5.5f, -5.5f, -4.0f, 3.0f, inf, 3.0f, 1e30f});
  HostTensor b = F32({7}, {2.0f, 2.0f, 2.0f, inf, 1.0f, 0.0f, 7.0f});
  HostTensor y = Binary(Op::kFmod, a, b, DType::kF32, {7});
  for (int64_t i = 0; i < 7; ++i) {
    const float r =
        static_cast<float>(std::fmod(static_cast<double>(a.at<float>(i)), static_cast<double>(b.at<float>(i))));
    EXPECT_EQ(y.at<uint32_t>(i), r != r ? kCanon : Bits(r)) << "fmod " << i;
  }
}

TEST(ElementwiseTest, IntegerWraparound) {
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  HostTensor a = I32({7}, {mx, mn, mn, 7, -7, 5, mn});
  HostTensor b = I32({7}, {1, -1, 1, 0, 2, -3, mn});
  EXPECT_EQ(Binary(Op::kAdd, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mn, mx, mn + 1, 7, -5, 2, 0}));
  EXPECT_EQ(Binary(Op::kSub, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mx - 1, mn + 1, mx, 7, -9, 8, 0}));
  EXPECT_EQ(Binary(Op::kMul, a, b, DType::kI32, {7}).vec<int32_t>(),
            (std::vector<int32_t>{mx, mn, mn, 0, -14, -15, 0}));
  EXPECT_EQ(Binary(Op::kDiv, a, b, DType::kI32, {7}).vec<int32_t>(), (std::vector<int32_t>{mx, mn, mn, 0, -3, -1, 1}));
  EXPECT_EQ(Unary(Op::kAbs, I32({4}, {mn, -5, 5, 0})).vec<int32_t>(), (std::vector<int32_t>{mn, 5, 5, 0}));
  EXPECT_EQ(Unary(Op::kNeg, I32({4}, {mn, -5, 5, 0})).vec<int32_t>(), (std::vector<int32_t>{mn, 5, -5, 0}));
  EXPECT_EQ(Unary(Op::kRelu, I32({4}, {mn, -5, 5, 0})).vec<int32_t>(), (std::vector<int32_t>{0, 0, 5, 0}));
  EXPECT_EQ(Binary(Op::kMax, a, b, DType::kI32, {7}).vec<int32_t>(), (std::vector<int32_t>{mx, -1, 1, 7, 2, 5, mn}));
  EXPECT_EQ(Binary(Op::kMin, a, b, DType::kI32, {7}).vec<int32_t>(), (std::vector<int32_t>{1, mn, mn, 0, -7, -3, mn}));
  // a - div(a, b) * b: x fmod 0 == x, MIN fmod -1 == 0, the dividend's sign.
  EXPECT_EQ(Binary(Op::kFmod, a, b, DType::kI32, {7}).vec<int32_t>(), (std::vector<int32_t>{0, 0, 0, 7, -1, 2, 0}));

  HostTensor c = I8({6}, {127, -128, 16, -128, 100, -7});
  HostTensor d = I8({6}, {1, -1, 16, 0, 100, 2});
  EXPECT_EQ(Binary(Op::kAdd, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{-128, 127, 32, -128, -56, -5}));
  EXPECT_EQ(Binary(Op::kSub, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{126, -127, 0, -128, 0, -9}));
  EXPECT_EQ(Binary(Op::kMul, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{127, -128, 0, 0, 16, -14}));
  EXPECT_EQ(Binary(Op::kDiv, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{127, -128, 1, 0, 1, -3}));
  EXPECT_EQ(Unary(Op::kAbs, I8({3}, {-128, -1, 3})).vec<int8_t>(), (std::vector<int8_t>{-128, 1, 3}));
  EXPECT_EQ(Binary(Op::kFmod, c, d, DType::kI8, {6}).vec<int8_t>(), (std::vector<int8_t>{0, 0, 0, -128, 0, -1}));
  EXPECT_EQ(Unary(Op::kNeg, I8({3}, {-128, -1, 3})).vec<int8_t>(), (std::vector<int8_t>{-128, 1, -3}));

  const int64_t lmn = std::numeric_limits<int64_t>::min(), lmx = std::numeric_limits<int64_t>::max();
  HostTensor e = I64({5}, {lmx, lmn, lmn, 9, lmx});
  HostTensor f = I64({5}, {1, -1, 0, -2, 2});
  EXPECT_EQ(Binary(Op::kAdd, e, f, DType::kI64, {5}).vec<int64_t>(), (std::vector<int64_t>{lmn, lmx, lmn, 7, lmn + 1}));
  EXPECT_EQ(Binary(Op::kMul, e, f, DType::kI64, {5}).vec<int64_t>(), (std::vector<int64_t>{lmx, lmn, 0, -18, -2}));
  EXPECT_EQ(Binary(Op::kDiv, e, f, DType::kI64, {5}).vec<int64_t>(), (std::vector<int64_t>{lmx, lmn, 0, -4, lmx / 2}));
  EXPECT_EQ(Unary(Op::kAbs, I64({2}, {lmn, -3})).vec<int64_t>(), (std::vector<int64_t>{lmn, 3}));
}

TEST(ElementwiseTest, CastFromF32) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {FromBits(0x7FC12345u),
                                 FromBits(0xFFC00000u),
                                 inf,
                                 -inf,
                                 2147483648.0f,
                                 -2147483649.0f,
                                 3.7f,
                                 -3.7f,
                                 0.5f,
                                 -0.5f,
                                 2147483520.0f,
                                 -0.0f,
                                 127.9f,
                                 128.0f,
                                 -129.0f,
                                 9223372036854775808.0f,
                                 -9223372036854775808.0f,
                                 1e-45f};
  const int64_t n = static_cast<int64_t>(xs.size());
  HostTensor x = F32({n}, xs);
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(Cast(x, DType::kI32).vec<int32_t>(),
            (std::vector<int32_t>{0, 0, mx, mn, mx, mn, 3, -3, 0, 0, 2147483520, 0, 127, 128, -129, mx, mn, 0}));
  EXPECT_EQ(Cast(x, DType::kI8).vec<int8_t>(),
            (std::vector<int8_t>{0, 0, 127, -128, 127, -128, 3, -3, 0, 0, 127, 0, 127, 127, -128, 127, -128, 0}));
  const int64_t lmn = std::numeric_limits<int64_t>::min(), lmx = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Cast(x, DType::kI64).vec<int64_t>(),
            (std::vector<int64_t>{0, 0, lmx, lmn, 2147483648LL, -2147483648LL, 3, -3, 0, 0, 2147483520LL, 0, 127, 128,
                                  -129, lmx, lmn, 0}));
  EXPECT_EQ(Cast(x, DType::kBool).vec<uint8_t>(),
            (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}));
  // f32 -> f32 copies bits, NaN payload included.
  EXPECT_EQ(Cast(x, DType::kF32).bytes, x.bytes);
}

TEST(ElementwiseTest, CastFromIntegersAndBool) {
  HostTensor a = I32({6}, {16777217, 16777219, -16777217, 300, -129, 2});
  ExpectBits(Cast(a, DType::kF32),
             {Bits(16777216.0f), Bits(16777220.0f), Bits(-16777216.0f), Bits(300.0f), Bits(-129.0f), Bits(2.0f)},
             "i32->f32");
  EXPECT_EQ(Cast(a, DType::kI8).vec<int8_t>(), (std::vector<int8_t>{1, 3, -1, 44, 127, 2}));
  EXPECT_EQ(Cast(a, DType::kI64).vec<int64_t>(), (std::vector<int64_t>{16777217, 16777219, -16777217, 300, -129, 2}));
  EXPECT_EQ(Cast(a, DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));
  const int64_t lmx = std::numeric_limits<int64_t>::max();
  HostTensor l = I64({4}, {lmx, (int64_t{1} << 32) + 5, -1, 0});
  ExpectBits(Cast(l, DType::kF32), {Bits(9223372036854775808.0f), Bits(4294967296.0f), Bits(-1.0f), 0u}, "i64->f32");
  EXPECT_EQ(Cast(l, DType::kI32).vec<int32_t>(), (std::vector<int32_t>{-1, 5, -1, 0}));
  EXPECT_EQ(Cast(l, DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 0}));
  HostTensor c = I8({3}, {-128, -5, 0});
  EXPECT_EQ(Cast(c, DType::kI64).vec<int64_t>(), (std::vector<int64_t>{-128, -5, 0}));
  EXPECT_EQ(Cast(c, DType::kI32).vec<int32_t>(), (std::vector<int32_t>{-128, -5, 0}));
  ExpectBits(Cast(c, DType::kF32), {Bits(-128.0f), Bits(-5.0f), 0u}, "i8->f32");
  HostTensor t = Bool({2}, {1, 0});
  ExpectBits(Cast(t, DType::kF32), {Bits(1.0f), 0u}, "bool->f32");
  EXPECT_EQ(Cast(t, DType::kI64).vec<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Cast(t, DType::kI8).vec<int8_t>(), (std::vector<int8_t>{1, 0}));
  EXPECT_EQ(Cast(t, DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 0}));
}

// ---------------------------------------------------------------------------------------
// u8, i16, u16, u32, u64 (section 1): modular arithmetic, division by zero, casts.

// Naive reference: the exact result in 128 bits, then reduced modulo 2^bits of T.
template <typename T>
T Mod2n(__int128 v) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<unsigned __int128>(v)));
}
template <typename T>
T RefIntOp(Op op, T a, T b) {
  const __int128 x = a, y = b;
  // Products of two u64 values overflow a signed 128-bit integer: multiply modulo 2^128.
  const unsigned __int128 ux = static_cast<unsigned __int128>(x), uy = static_cast<unsigned __int128>(y);
  switch (op) {
    case Op::kAdd: return Mod2n<T>(x + y);
    case Op::kSub: return Mod2n<T>(x - y);
    case Op::kMul: return static_cast<T>(static_cast<std::make_unsigned_t<T>>(ux * uy));
    case Op::kDiv: return y == 0 ? T{0} : Mod2n<T>(x / y);          // truncation; MIN / -1 wraps to MIN
    case Op::kFmod: return y == 0 ? a : Mod2n<T>(x - (x / y) * y);  // a - div(a, b) * b
    case Op::kMax: return a > b ? a : b;
    case Op::kMin: return a < b ? a : b;
    case Op::kNeg: return Mod2n<T>(-x);
    case Op::kAbs: return Mod2n<T>(x < 0 ? -x : x);
    case Op::kRelu: return x > 0 ? a : T{0};
    default: ADD_FAILURE() << "no reference for " << OpName(op); return T{0};
  }
}

template <typename T>
std::vector<T> EdgeyInts(int64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  const T edges[] = {0, 1, static_cast<T>(-1), std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), 2, 3};
  for (auto& x : v) {
    const uint64_t r = rng();
    x = (r & 3) == 0 ? edges[(r >> 2) % 7] : static_cast<T>(r >> 5);
  }
  return v;
}

template <typename T>
void CheckAgainstReference(DType dt, uint32_t seed) {
  const int64_t n = 20011;  // enough for every thread count to split it
  const std::vector<T> a = EdgeyInts<T>(n, seed), b = EdgeyInts<T>(n, seed + 100);
  for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kFmod, Op::kMax, Op::kMin}) {
    const std::vector<T> got = Binary(op, Make(dt, {n}, a), Make(dt, {n}, b), dt, {n}).template vec<T>();
    ASSERT_EQ(got.size(), a.size());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], RefIntOp<T>(op, a[i], b[i]))
          << OpName(op) << " " << DTypeName(dt) << " " << +a[i] << ", " << +b[i];
    }
  }
  for (Op op : {Op::kNeg, Op::kAbs, Op::kRelu}) {
    const std::vector<T> got = Unary(op, Make(dt, {n}, a)).template vec<T>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], RefIntOp<T>(op, a[i], T{0})) << OpName(op) << " " << DTypeName(dt) << " " << +a[i];
    }
  }
  for (Op op : {Op::kLess, Op::kGreaterEqual, Op::kEqual}) {
    const std::vector<uint8_t> got =
        Binary(op, Make(dt, {n}, a), Make(dt, {n}, b), DType::kBool, {n}).template vec<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      const bool want = op == Op::kLess ? a[i] < b[i] : op == Op::kEqual ? a[i] == b[i] : a[i] >= b[i];
      ASSERT_EQ(got[i], want ? 1 : 0) << OpName(op) << " " << DTypeName(dt) << " " << +a[i] << ", " << +b[i];
    }
  }
}

TEST(ElementwiseTest, NewIntegerTypesMatchTheNaiveReference) {
  CheckAgainstReference<uint8_t>(DType::kU8, 1);
  CheckAgainstReference<int16_t>(DType::kI16, 2);
  CheckAgainstReference<uint16_t>(DType::kU16, 3);
  CheckAgainstReference<uint32_t>(DType::kU32, 4);
  CheckAgainstReference<uint64_t>(DType::kU64, 5);
}

TEST(ElementwiseTest, NewIntegerTypesWrapAndDivideByZero) {
  // 65535 * 65535 must not overflow a promoted int: modulo 2^16 it is 1.
  EXPECT_EQ(Binary(Op::kMul, U16({2}, {65535, 300}), U16({2}, {65535, 300}), DType::kU16, {2}).vec<uint16_t>(),
            (std::vector<uint16_t>{1, 24464}));
  EXPECT_EQ(Binary(Op::kMul, I16({2}, {-32768, 181}), I16({2}, {-1, 182}), DType::kI16, {2}).vec<int16_t>(),
            (std::vector<int16_t>{-32768, -32594}));
  EXPECT_EQ(Binary(Op::kAdd, U8({3}, {255, 200, 0}), U8({3}, {1, 100, 0}), DType::kU8, {3}).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 44, 0}));
  EXPECT_EQ(Binary(Op::kSub, U32({2}, {0, 5}), U32({2}, {1, 7}), DType::kU32, {2}).vec<uint32_t>(),
            (std::vector<uint32_t>{4294967295u, 4294967294u}));
  const uint64_t big = uint64_t{1} << 63;
  EXPECT_EQ(Binary(Op::kAdd, U64({2}, {big, ~uint64_t{0}}), U64({2}, {big, 2}), DType::kU64, {2}).vec<uint64_t>(),
            (std::vector<uint64_t>{0, 1}));
  // Division by zero gives 0 and fmod by zero the dividend; MIN / -1 is MIN for i16.
  EXPECT_EQ(Binary(Op::kDiv, U8({3}, {7, 255, 0}), U8({3}, {0, 2, 0}), DType::kU8, {3}).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 127, 0}));
  EXPECT_EQ(Binary(Op::kFmod, U8({3}, {7, 255, 0}), U8({3}, {0, 2, 0}), DType::kU8, {3}).vec<uint8_t>(),
            (std::vector<uint8_t>{7, 1, 0}));
  EXPECT_EQ(Binary(Op::kDiv, I16({3}, {-32768, -7, 9}), I16({3}, {-1, 2, 0}), DType::kI16, {3}).vec<int16_t>(),
            (std::vector<int16_t>{-32768, -3, 0}));
  EXPECT_EQ(Binary(Op::kFmod, I16({3}, {-32768, -7, 9}), I16({3}, {-1, 2, 0}), DType::kI16, {3}).vec<int16_t>(),
            (std::vector<int16_t>{0, -1, 9}));
  EXPECT_EQ(Binary(Op::kDiv, U64({2}, {~uint64_t{0}, 5}), U64({2}, {2, 0}), DType::kU64, {2}).vec<uint64_t>(),
            (std::vector<uint64_t>{~uint64_t{0} / 2, 0}));
  // neg wraps, abs and relu are the identity; comparisons are unsigned.
  EXPECT_EQ(Unary(Op::kNeg, U32({2}, {1, 0})).vec<uint32_t>(), (std::vector<uint32_t>{4294967295u, 0}));
  EXPECT_EQ(Unary(Op::kAbs, U8({2}, {255, 3})).vec<uint8_t>(), (std::vector<uint8_t>{255, 3}));
  EXPECT_EQ(Binary(Op::kGreater, U64({1}, {big}), U64({1}, {1}), DType::kBool, {1}).vec<uint8_t>(),
            (std::vector<uint8_t>{1}));
  EXPECT_EQ(Binary(Op::kMax, U32({1}, {4294967295u}), U32({1}, {1}), DType::kU32, {1}).vec<uint32_t>(),
            (std::vector<uint32_t>{4294967295u}));
}

TEST(ElementwiseTest, CastF32ToNewIntegerTypesAtTheEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {FromBits(0x7FC12345u),
                                 FromBits(0xFFC00000u),
                                 inf,
                                 -inf,
                                 4294967296.0f,
                                 -1.0f,
                                 -0.5f,
                                 -0.0f,
                                 0.5f,
                                 3.7f,
                                 255.9f,
                                 256.0f,
                                 65535.5f,
                                 65536.0f,
                                 4294967040.0f,
                                 18446742974197923840.0f,  // 2^64 - 2^40, the largest f32 below 2^64
                                 18446744073709551616.0f,  // 2^64
                                 -32768.9f,
                                 32767.9f,
                                 -32769.0f};
  const int64_t n = static_cast<int64_t>(xs.size());
  HostTensor x = F32({n}, xs);
  EXPECT_EQ(Cast(x, DType::kU8).vec<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 255, 0, 255, 0, 0, 0, 0, 3, 255, 255, 255, 255, 255, 255, 255, 0, 255, 0}));
  EXPECT_EQ(Cast(x, DType::kU16).vec<uint16_t>(),
            (std::vector<uint16_t>{0,   0,   65535, 0,     65535, 0,     0,     0, 0,     3,
                                   255, 256, 65535, 65535, 65535, 65535, 65535, 0, 32767, 0}));
  const uint32_t m32 = 4294967295u;
  EXPECT_EQ(Cast(x, DType::kU32).vec<uint32_t>(),
            (std::vector<uint32_t>{0,   0,   m32,   0,     m32,         0,   0,   0, 0,     3,
                                   255, 256, 65535, 65536, 4294967040u, m32, m32, 0, 32767, 0}));
  const uint64_t m64 = ~uint64_t{0};
  EXPECT_EQ(Cast(x, DType::kU64).vec<uint64_t>(),
            (std::vector<uint64_t>{0,   0,     m64,   0,           4294967296u,           0,   0, 0,     0, 3, 255,
                                   256, 65535, 65536, 4294967040u, 18446742974197923840u, m64, 0, 32767, 0}));
  EXPECT_EQ(Cast(x, DType::kI16).vec<int16_t>(),
            (std::vector<int16_t>{0,   0,   32767, -32768, 32767, -1,    0,     0,      0,     3,
                                  255, 256, 32767, 32767,  32767, 32767, 32767, -32768, 32767, -32768}));
}

TEST(ElementwiseTest, CastBetweenIntegerTypesIsModular) {
  // int -> f32 rounds to nearest even, u64 included (2^63 + 2^39 is a tie: down to even;
  // 2^63 + 3 * 2^39 is a tie: up to even).
  const uint64_t big = uint64_t{1} << 63;
  ExpectBits(Cast(U64({4}, {~uint64_t{0}, big + (uint64_t{1} << 39), big + 3 * (uint64_t{1} << 39), 5}), DType::kF32),
             {0x5F800000u, 0x5F000000u, 0x5F000002u, Bits(5.0f)}, "u64->f32");
  ExpectBits(Cast(U32({3}, {4294967295u, 16777217u, 16777219u}), DType::kF32),
             {0x4F800000u, Bits(16777216.0f), Bits(16777220.0f)}, "u32->f32");
  ExpectBits(Cast(I16({2}, {-32768, 7}), DType::kF32), {Bits(-32768.0f), Bits(7.0f)}, "i16->f32");
  ExpectBits(Cast(U8({2}, {255, 0}), DType::kF32), {Bits(255.0f), 0u}, "u8->f32");
  // int -> int: the value modulo 2^bits of the target.
  EXPECT_EQ(Cast(I8({2}, {-1, 5}), DType::kU32).vec<uint32_t>(), (std::vector<uint32_t>{4294967295u, 5}));
  EXPECT_EQ(Cast(U8({2}, {255, 200}), DType::kI8).vec<int8_t>(), (std::vector<int8_t>{-1, -56}));
  EXPECT_EQ(Cast(U8({2}, {255, 200}), DType::kI16).vec<int16_t>(), (std::vector<int16_t>{255, 200}));
  EXPECT_EQ(Cast(U16({2}, {65535, 32768}), DType::kI16).vec<int16_t>(), (std::vector<int16_t>{-1, -32768}));
  EXPECT_EQ(Cast(U64({2}, {big, 7}), DType::kI64).vec<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 7}));
  EXPECT_EQ(Cast(I64({2}, {-1, 65536 + 3}), DType::kU16).vec<uint16_t>(), (std::vector<uint16_t>{65535, 3}));
  EXPECT_EQ(Cast(I16({2}, {-32768, 1}), DType::kU64).vec<uint64_t>(), (std::vector<uint64_t>{big * 2 - 32768, 1}));
  EXPECT_EQ(Cast(U32({2}, {4294967295u, 1}), DType::kI32).vec<int32_t>(), (std::vector<int32_t>{-1, 1}));
  EXPECT_EQ(Cast(I32({2}, {-1, 1}), DType::kU64).vec<uint64_t>(), (std::vector<uint64_t>{~uint64_t{0}, 1}));
  EXPECT_EQ(Cast(U16({2}, {513, 2}), DType::kU8).vec<uint8_t>(), (std::vector<uint8_t>{1, 2}));
  // Bool: x != 0 (u8 2 -> 1, so u8 is not mistaken for bool), and 0 or 1 back.
  EXPECT_EQ(Cast(U8({3}, {2, 0, 255}), DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Cast(U64({2}, {big, 0}), DType::kBool).vec<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Cast(Bool({2}, {1, 0}), DType::kU8).vec<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Cast(Bool({2}, {1, 0}), DType::kU64).vec<uint64_t>(), (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(Cast(Bool({2}, {1, 0}), DType::kI16).vec<int16_t>(), (std::vector<int16_t>{1, 0}));
}

TEST(ElementwiseTest, Comparisons) {
  HostTensor a = F32Bits({5}, {0x7FC00000u, Bits(1.0f), Bits(-0.0f), Bits(1.0f), Bits(2.0f)});
  HostTensor b = F32Bits({5}, {0x7FC00000u, 0xFFC00001u, Bits(0.0f), Bits(2.0f), Bits(1.0f)});
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
  HostTensor a = Bool({4}, {0, 0, 1, 1});
  HostTensor b = Bool({4}, {0, 1, 0, 1});
  EXPECT_EQ(Binary(Op::kAnd, a, b, DType::kBool, {4}).vec<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Binary(Op::kOr, a, b, DType::kBool, {4}).vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Binary(Op::kXor, a, b, DType::kBool, {4}).vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Unary(Op::kNot, a).vec<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0}));
}

TEST(ElementwiseTest, WhereBroadcastCopiesBits) {
  // cond [3,1], a [1,4] (with a NaN payload), b scalar (rank 0) -> [3,4].
  HostTensor c = Bool({3, 1}, {1, 0, 1});
  HostTensor a = F32Bits({1, 4}, {0x7FC0BEEFu, Bits(-0.0f), Bits(1.0f), Bits(2.0f)});
  HostTensor b = F32Bits({}, {0xFF800001u});
  HostTensor y = RunAll(Op::kWhere, {c, a, b}, DType::kF32, {3, 4});
  std::vector<uint32_t> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) want.push_back(c.at<uint8_t>(i) ? a.at<uint32_t>(j) : 0xFF800001u);
  ExpectBits(y, want, "where");
  // Integer and bool payloads (element sizes 8 and 1).
  HostTensor yi = RunAll(Op::kWhere, {Bool({2}, {0, 1}), I64({2}, {1, 2}), I64({1}, {-9})}, DType::kI64, {2});
  EXPECT_EQ(yi.vec<int64_t>(), (std::vector<int64_t>{-9, 2}));
  HostTensor yb =
      RunAll(Op::kWhere, {Bool({3}, {0, 1, 0}), Bool({3}, {1, 1, 1}), Bool({3}, {0, 0, 1})}, DType::kBool, {3});
  EXPECT_EQ(yb.vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(ElementwiseTest, BroadcastShapes) {
  // [3,1,5] + [4,1] -> [3,4,5]
  std::vector<float> av(15), bv(4);
  for (int i = 0; i < 15; ++i) av[i] = static_cast<float>(i) * 100.0f;
  for (int i = 0; i < 4; ++i) bv[i] = static_cast<float>(i);
  HostTensor y = Binary(Op::kAdd, F32({3, 1, 5}, av), F32({4, 1}, bv), DType::kF32, {3, 4, 5});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) EXPECT_EQ(y.at<float>((i * 4 + j) * 5 + k), av[i * 5 + k] + bv[j]);
  // Scalar on the left, i32.
  HostTensor s = Binary(Op::kSub, I32({}, {10}), I32({2, 3}, {1, 2, 3, 4, 5, 6}), DType::kI32, {2, 3});
  EXPECT_EQ(s.vec<int32_t>(), (std::vector<int32_t>{9, 8, 7, 6, 5, 4}));
  // Both operands broadcast: [2,1] * [1,3].
  HostTensor m = Binary(Op::kMul, I64({2, 1}, {2, 3}), I64({1, 3}, {1, 10, 100}), DType::kI64, {2, 3});
  EXPECT_EQ(m.vec<int64_t>(), (std::vector<int64_t>{2, 20, 200, 3, 30, 300}));
  // Comparison with broadcast.
  HostTensor g = Binary(Op::kGreater, F32({3}, {1, 2, 3}), F32({2, 1}, {1.5f, 2.5f}), DType::kBool, {2, 3});
  EXPECT_EQ(g.vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0, 0, 1}));
}

TEST(ElementwiseTest, EmptyTensors) {
  HostTensor y = Binary(Op::kAdd, F32({0, 3}, {}), F32({1, 3}, {1, 2, 3}), DType::kF32, {0, 3});
  EXPECT_EQ(y.numel(), 0);
  HostTensor z = Binary(Op::kAdd, F32({2, 1}, {1, 2}), F32({0}, {}), DType::kF32, {2, 0});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(Unary(Op::kExp, F32({0}, {})).numel(), 0);
  EXPECT_EQ(Cast(I32({3, 0}, {}), DType::kF32).numel(), 0);
  EXPECT_EQ(RunAll(Op::kWhere, {Bool({0}, {}), I8({1}, {1}), I8({0}, {})}, DType::kI8, {0}).numel(), 0);
}

TEST(ElementwiseTest, InvalidCalls) {
  auto code = [](Status s) { return s.code(); };
  EXPECT_EQ(code(RunStatus(Op::kExp, {I32({1}, {1})}, DType::kI32, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAdd, {F32({1}, {1}), I32({1}, {1})}, DType::kF32, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAdd, {Bool({1}, {1}), Bool({1}, {1})}, DType::kBool, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAnd, {F32({1}, {1}), F32({1}, {1})}, DType::kBool, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kNeg, {Bool({1}, {1})}, DType::kBool, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kPow, {Bool({1}, {1}), Bool({1}, {1})}, DType::kBool, {1})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kPow, {I32({1}, {1}), I64({1}, {1})}, DType::kI32, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAsin, {I32({1}, {1})}, DType::kI32, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kLess, {F32({1}, {1}), F32({1}, {1})}, DType::kF32, {1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kWhere, {I32({1}, {1}), F32({1}, {1}), F32({1}, {1})}, DType::kF32, {1})),
            StatusCode::kInvalidArgument);
  // Shapes that do not broadcast, and an output that is not the broadcast shape.
  EXPECT_EQ(code(RunStatus(Op::kAdd, {F32({2}, {1, 2}), F32({3}, {1, 2, 3})}, DType::kF32, {3})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RunStatus(Op::kAdd, {F32({1}, {1}), F32({1}, {1})}, DType::kF32, {4})), StatusCode::kInvalidArgument);
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
  for (int64_t i = 0; i < n; i += 97) v[i] = FromBits(kSpecials[(i / 97) % kSpecials.size()]);
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

HostTensor RandomOf(DType t, Shape shape, uint32_t seed) {
  const int64_t n = NumElements(shape);
  switch (t) {
    case DType::kF32: return F32(shape, RandomF32(n, seed));
    case DType::kI32: return I32(shape, RandomInt<int32_t>(n, seed));
    case DType::kI8: return I8(shape, RandomInt<int8_t>(n, seed));
    case DType::kI64: return I64(shape, RandomInt<int64_t>(n, seed));
    case DType::kU8: return U8(shape, RandomInt<uint8_t>(n, seed));
    case DType::kI16: return I16(shape, RandomInt<int16_t>(n, seed));
    case DType::kU16: return U16(shape, RandomInt<uint16_t>(n, seed));
    case DType::kU32: return U32(shape, RandomInt<uint32_t>(n, seed));
    case DType::kU64: return U64(shape, RandomInt<uint64_t>(n, seed));
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
    {{40009}, {40009}, {40009}},               // same shape, flat
    {{40009}, {}, {40009}},                    // scalar right
    {{}, {33, 1001}, {33, 1001}},              // scalar left
    {{13, 1, 67}, {1, 53, 67}, {13, 53, 67}},  // general broadcast, contiguous inner
    {{61, 1}, {1, 1, 677}, {1, 61, 677}},      // broadcast inner on the left
    {{5, 1, 7, 1}, {3, 7, 1}, {5, 3, 7, 1}},   // trailing 1 dims
};

TEST(ElementwiseTest, AllOpsBitIdenticalAcrossIsaAndThreads) {
  if (!cpu::CpuHasAvx2Fma()) {
    std::cout << "[ INFO ] no AVX2/FMA: comparing portable thread counts only\n";
  }
  const DType numeric[] = {DType::kF32, DType::kI32, DType::kI8,  DType::kI64, DType::kU8,
                           DType::kI16, DType::kU16, DType::kU32, DType::kU64};
  const DType all[] = {DType::kF32, DType::kI32, DType::kI8,  DType::kBool, DType::kI64,
                       DType::kU8,  DType::kI16, DType::kU16, DType::kU32,  DType::kU64};
  uint32_t seed = 1;
  auto next = [&seed] { return seed++; };
  // Unary.
  for (Op op : {Op::kNeg, Op::kAbs, Op::kRelu}) {
    for (DType t : numeric) Unary(op, RandomOf(t, {3, 20011}, next()));
  }
  for (Op op : {Op::kExp,      Op::kLog,  Op::kSqrt, Op::kRsqrt, Op::kTanh,  Op::kSigmoid, Op::kErf,  Op::kGeluErf,
                Op::kGeluTanh, Op::kSin,  Op::kCos,  Op::kFloor, Op::kCeil,  Op::kRound,   Op::kAsin, Op::kAcos,
                Op::kAtan,     Op::kSinh, Op::kCosh, Op::kAsinh, Op::kAcosh, Op::kAtanh}) {
    Unary(op, RandomOf(DType::kF32, {40009}, next()));
  }
  Unary(Op::kNot, RandomOf(DType::kBool, {40009}, next()));
  for (DType from : all) {
    for (DType to : all) Cast(RandomOf(from, {40009}, next()), to);
  }
  // Binary over several broadcast patterns.
  for (const ShapeCase& sc : kShapeCases) {
    for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin, Op::kFmod, Op::kPow}) {
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
      RunAll(Op::kWhere, {RandomOf(DType::kBool, sc.out, next()), RandomOf(t, sc.a, next()), RandomOf(t, sc.b, next())},
             t, sc.out);
    }
  }
}

}  // namespace
}  // namespace consensor::kernels
