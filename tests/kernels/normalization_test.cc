// Normalization family (docs/DETERMINISM.md 4.5): softmax and layer_norm on every CPU path
// (portable and AVX2, 1/2/8 threads) must match a naive reference written from the spec,
// bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/detmath.h"
#include "kernels/reduction_order.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

class NormTest : public BackendTest {};

void Split(const std::vector<int64_t>& shape, int64_t axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t i = 0; i < axis; ++i) *outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) *inner *= shape[i];
  *n = shape[axis];
}

HostTensor RefSoftmax(const HostTensor& x, int64_t axis) {
  HostTensor y(DType::kF32, x.shape);
  int64_t outer, n, inner;
  Split(x.shape, axis, &outer, &n, &inner);
  const float* d = x.as<float>();
  std::vector<float> e(static_cast<size_t>(n));
  for (int64_t p = 0; p < outer; ++p) {
    for (int64_t c = 0; c < inner; ++c) {
      auto at = [&](int64_t a) { return (p * n + a) * inner + c; };
      float m = d[at(0)];
      for (int64_t a = 1; a < n; ++a) m = RefMax(m, d[at(a)]);
      for (int64_t a = 0; a < n; ++a) e[a] = detmath::exp(d[at(a)] - m);
      const float s = RefCsum([&](int64_t i) { return e[i]; }, n);
      for (int64_t a = 0; a < n; ++a) y.as<float>()[at(a)] = Canon(e[a] / s);
    }
  }
  return y;
}

HostTensor RefLayerNorm(const HostTensor& x, const HostTensor& scale, const HostTensor* bias, int64_t axis, float eps) {
  HostTensor y(DType::kF32, x.shape);
  int64_t outer = 1, n = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
  for (size_t i = axis; i < x.shape.size(); ++i) n *= x.shape[i];
  std::vector<float> d(static_cast<size_t>(n));
  for (int64_t p = 0; p < outer; ++p) {
    const float* row = x.as<float>() + p * n;
    const float mean = RefCsum([&](int64_t i) { return row[i]; }, n) / static_cast<float>(n);
    for (int64_t i = 0; i < n; ++i) d[i] = row[i] - mean;
    const float var = RefCsum([&](int64_t i) { return d[i] * d[i]; }, n) / static_cast<float>(n);
    const float r = 1.0f / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i) {
      float v = (d[i] * r) * scale.as<float>()[i];
      if (bias) v = v + bias->as<float>()[i];
      y.as<float>()[p * n + i] = Canon(v);
    }
  }
  return y;
}

std::string ShapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (int64_t d : s) r += std::to_string(d) + ",";
  return r + "]";
}

void ExpectSameBits(const HostTensor& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
  if (std::memcmp(got.bytes.data(), want.bytes.data(), want.bytes.size()) != 0) {
    size_t i = 0;
    while (got.as<uint32_t>()[i] == want.as<uint32_t>()[i]) ++i;
    FAIL() << what << ": element " << i << " got 0x" << std::hex << got.as<uint32_t>()[i] << " want 0x"
           << want.as<uint32_t>()[i];
  }
}

void CheckSoftmax(NormTest* t, HostTensor& x, int64_t axis) {
  OpParams p;
  p.axis = axis;
  HostTensor want = RefSoftmax(x, axis);
  HostTensor got(DType::kF32, x.shape);
  Status s = t->Run(Op::kSoftmax, p, {&x}, got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameBits(got, want, "softmax " + ShapeStr(x.shape) + " axis " + std::to_string(axis));
}

void CheckLayerNorm(NormTest* t, HostTensor& x, int64_t axis, bool with_bias, uint32_t seed, float eps = 1e-5f) {
  std::vector<int64_t> tail(x.shape.begin() + axis, x.shape.end());
  HostTensor scale(DType::kF32, tail), bias(DType::kF32, tail);
  FillF32(scale, seed);
  FillF32(bias, seed + 1);
  OpParams p;
  p.axis = axis;
  p.epsilon = eps;
  HostTensor want = RefLayerNorm(x, scale, with_bias ? &bias : nullptr, axis, eps);
  HostTensor got(DType::kF32, x.shape);
  std::vector<HostTensor*> ins = {&x, &scale};
  if (with_bias) ins.push_back(&bias);
  Status s = t->Run(Op::kLayerNorm, p, ins, got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameBits(got, want, "layer_norm " + ShapeStr(x.shape) + " axis " + std::to_string(axis));
}

// Softmax inputs of moderate magnitude so exp neither always overflows nor underflows.
void FillLogits(HostTensor& t, uint32_t seed, double special_rate = 0.0) {
  FillF32(t, seed, special_rate);
  std::mt19937 rng(seed * 3 + 1);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  float* d = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(d[i]) && d[i] != 0.0f && (rng() & 1)) d[i] = u(rng);
}

const int64_t kLengths[] = {1, 63, 64, 65, 4095, 4096, 4097, 3 * 4096 + 17, 1 << 20};

TEST_P(NormTest, SoftmaxRows) {
  for (int64_t n : kLengths) {
    HostTensor x(DType::kF32, {n});
    FillLogits(x, static_cast<uint32_t>(n));
    CheckSoftmax(this, x, 0);
    if (n <= 4097) {
      HostTensor x2(DType::kF32, {5, n});
      FillLogits(x2, static_cast<uint32_t>(n) + 5);
      CheckSoftmax(this, x2, 1);
      CheckSoftmax(this, x2, 0);
    }
  }
}

TEST_P(NormTest, SoftmaxEveryAxis) {
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 4, 5}, {3, 70, 9}, {2, 300, 260}, {4097, 3}};
  uint32_t seed = 10;
  for (const auto& shape : shapes)
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      HostTensor x(DType::kF32, shape);
      FillLogits(x, ++seed);
      CheckSoftmax(this, x, axis);
    }
}

TEST_P(NormTest, SoftmaxSpecials) {
  uint32_t seed = 50;
  for (double rate : {0.001, 0.05, 0.5}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{40, 65}, {6, 70, 5}, {3, 5000}}) {
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        HostTensor x(DType::kF32, shape);
        FillLogits(x, ++seed, rate);
        CheckSoftmax(this, x, axis);
      }
    }
  }
  // Hand cases: all -inf row (-inf - -inf = NaN), +inf present, -0 / +0 maxima, one element.
  HostTensor x(DType::kF32, {4, 3});
  const float v[] = {-INFINITY, -INFINITY, -INFINITY, 1.0f, INFINITY, 2.0f, -0.0f, 0.0f, -1.0f, 5.0f, 5.0f, 5.0f};
  std::memcpy(x.as<float>(), v, sizeof(v));
  CheckSoftmax(this, x, 1);
  OpParams p;
  p.axis = 1;
  HostTensor y(DType::kF32, {4, 3});
  ASSERT_TRUE(Run(Op::kSoftmax, p, {&x}, y).ok());
  // Row 0: -inf - -inf = NaN. Row 1: inf - inf = NaN makes s NaN, so the whole row is NaN.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Bits(y.as<float>()[i]), 0x7FC00000u) << i;
  for (int i = 9; i < 12; ++i) EXPECT_EQ(y.as<float>()[i], 1.0f / 3.0f);
}

TEST_P(NormTest, LayerNorm) {
  uint32_t seed = 100;
  for (int64_t n : kLengths) {
    if (n > 4096 * 4) continue;
    HostTensor x(DType::kF32, {3, n});
    FillF32(x, ++seed);
    CheckLayerNorm(this, x, 1, true, ++seed);
    CheckLayerNorm(this, x, 1, false, ++seed);
    CheckLayerNorm(this, x, 0, true, ++seed);
  }
  for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 3, 4, 5}, {3, 4, 70}, {1, 1}}) {
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      HostTensor x(DType::kF32, shape);
      FillF32(x, ++seed);
      CheckLayerNorm(this, x, axis, axis % 2 == 0, ++seed);
    }
  }
  HostTensor big(DType::kF32, {2, 70000});  // long rows on several threads
  FillF32(big, ++seed);
  CheckLayerNorm(this, big, 1, true, ++seed);
  // Constant rows: var = 0, r = 1/sqrt(eps); zero epsilon gives 0 * inf = NaN.
  HostTensor c(DType::kF32, {2, 100});
  for (int64_t i = 0; i < c.numel(); ++i) c.as<float>()[i] = 3.0f;
  CheckLayerNorm(this, c, 1, true, ++seed);
  CheckLayerNorm(this, c, 1, false, ++seed, 0.0f);
}

TEST_P(NormTest, LayerNormSpecials) {
  uint32_t seed = 300;
  for (double rate : {0.001, 0.05}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{40, 65}, {6, 70, 5}, {3, 5000}}) {
      HostTensor x(DType::kF32, shape);
      FillF32(x, ++seed, rate);
      CheckLayerNorm(this, x, static_cast<int64_t>(shape.size()) - 1, true, ++seed);
      CheckLayerNorm(this, x, 1, false, ++seed);
    }
  }
  // Subnormal inputs survive (no FTZ/DAZ).
  HostTensor x(DType::kF32, {4, 64});
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = FromBits(static_cast<uint32_t>(1 + i % 7));
  CheckLayerNorm(this, x, 1, true, ++seed, 0.0f);
}

TEST_P(NormTest, ZeroSizesAndBadCalls) {
  OpParams p;
  p.axis = 1;
  HostTensor x(DType::kF32, {0, 5}), y(DType::kF32, {0, 5});
  EXPECT_TRUE(Run(Op::kSoftmax, p, {&x}, y).ok());
  HostTensor x2(DType::kF32, {3, 0}), y2(DType::kF32, {3, 0});
  EXPECT_TRUE(Run(Op::kSoftmax, p, {&x2}, y2).ok());
  HostTensor s0(DType::kF32, {0});
  EXPECT_TRUE(Run(Op::kLayerNorm, p, {&x2, &s0}, y2).ok());
  HostTensor s5(DType::kF32, {5});
  EXPECT_TRUE(Run(Op::kLayerNorm, p, {&x, &s5}, y).ok());
  // Wrong dtype, wrong scale shape, axis out of range.
  HostTensor xi(DType::kI32, {2, 5}), yi(DType::kI32, {2, 5});
  EXPECT_EQ(Run(Op::kSoftmax, p, {&xi}, yi).code(), StatusCode::kInvalidArgument);
  HostTensor xf(DType::kF32, {2, 5}), yf(DType::kF32, {2, 5}), s4(DType::kF32, {4});
  EXPECT_EQ(Run(Op::kLayerNorm, p, {&xf, &s4}, yf).code(), StatusCode::kInvalidArgument);
  p.axis = 2;
  EXPECT_EQ(Run(Op::kSoftmax, p, {&xf}, yf).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Cpu, NormTest, testing::ValuesIn(AllConfigs()), ConfigName);

}  // namespace
}  // namespace consensor::kernels
