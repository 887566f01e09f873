// Pool family (docs/DETERMINISM.md 4.5): max_pool2d and avg_pool2d on every CPU path
// (portable and AVX2, 1/2/8 threads) must match a naive reference written from the spec,
// bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/pool_avx512.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

class PoolTest : public BackendTest {};

struct PoolCase {
  int64_t N, C, H, W, kh, kw, sh, sw, dh, dw, top, left, bottom, right;
  bool include_pad;
};

bool OutDims(const PoolCase& c, int64_t* oh, int64_t* ow) {
  const int64_t sh = c.H + c.top + c.bottom - c.dh * (c.kh - 1) - 1;
  const int64_t sw = c.W + c.left + c.right - c.dw * (c.kw - 1) - 1;
  if (sh < 0 || sw < 0) return false;
  *oh = sh / c.sh + 1;
  *ow = sw / c.sw + 1;
  return true;
}

OpParams ParamsOf(const PoolCase& c) {
  OpParams p;
  p.kernel = {c.kh, c.kw};
  p.strides = {c.sh, c.sw};
  p.dilations = {c.dh, c.dw};
  p.pads = {c.top, c.left, c.bottom, c.right};
  p.count_include_pad = c.include_pad;
  return p;
}

// Naive reference: visit every window position (padding included) in row-major order.
HostTensor RefPool(bool is_max, const PoolCase& c, const HostTensor& x, int64_t OH, int64_t OW) {
  HostTensor y(DType::kF32, {c.N, c.C, OH, OW});
  const uint32_t* xb = x.as<uint32_t>();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          uint32_t best = 0xFF800000u;  // -inf: window entirely in padding
          bool have = false, nan = false;
          float s = -0.0f;
          int64_t count = 0;
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j) {
              const int64_t h = oh * c.sh - c.top + i * c.dh, w = ow * c.sw - c.left + j * c.dw;
              if (h < 0 || h >= c.H || w < 0 || w >= c.W) continue;
              const uint32_t v = xb[((n * c.C + ch) * c.H + h) * c.W + w];
              const float f = FromBits(v);
              s = s + f;
              ++count;
              if (nan) continue;
              if (IsNaN(f)) {
                best = v;
                nan = true;
              } else if (!have) {
                best = v;
                have = true;
              } else {
                const float b = FromBits(best);
                if (f > b || (f == 0.0f && b == 0.0f && v == 0u)) best = v;
              }
            }
          const int64_t o = ((n * c.C + ch) * OH + oh) * OW + ow;
          if (is_max) {
            y.as<uint32_t>()[o] = best;
          } else {
            const float div = static_cast<float>(c.include_pad ? c.kh * c.kw : count);
            y.as<float>()[o] = Canon(s / div);
          }
        }
  return y;
}

void CheckPool(PoolTest* t, const PoolCase& c, uint32_t seed, double special_rate) {
  int64_t OH, OW;
  if (!OutDims(c, &OH, &OW)) return;
  HostTensor x(DType::kF32, {c.N, c.C, c.H, c.W});
  FillF32(x, seed, special_rate);
  const OpParams p = ParamsOf(c);
  for (bool is_max : {true, false}) {
    HostTensor want = RefPool(is_max, c, x, OH, OW);
    HostTensor got(DType::kF32, {c.N, c.C, OH, OW});
    Status s = t->Run(is_max ? Op::kMaxPool2D : Op::kAvgPool2D, p, x, got);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(0, std::memcmp(got.bytes.data(), want.bytes.data(), want.bytes.size()))
        << (is_max ? "max" : "avg") << " H=" << c.H << " W=" << c.W << " k=" << c.kh << "x" << c.kw << " s=" << c.sh
        << "," << c.sw << " d=" << c.dh << "," << c.dw << " pads=" << c.top << "," << c.left << "," << c.bottom << ","
        << c.right << " include_pad=" << c.include_pad;
  }
}

TEST_P(PoolTest, RandomGeometries) {
  std::mt19937 rng(12345);
  auto r = [&](int lo, int hi) { return static_cast<int64_t>(lo + static_cast<int>(rng() % (hi - lo + 1))); };
  for (int iter = 0; iter < 400; ++iter) {
    PoolCase c{r(1, 2), r(1, 3), r(0, 9), r(0, 9), r(1, 3), r(1, 3), r(1, 3),         r(1, 3),
               r(1, 2), r(1, 2), r(0, 2), r(0, 2), r(0, 2), r(0, 2), (rng() & 1) != 0};
    CheckPool(this, c, static_cast<uint32_t>(iter), iter % 3 == 0 ? 0.1 : 0.0);
  }
  // A typical CNN layer.
  CheckPool(this, PoolCase{2, 16, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false}, 7, 0.0);
  CheckPool(this, PoolCase{2, 16, 32, 32, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, true}, 8, 0.001);
  // Average pools interleave 8 planes: 26 planes leave a remainder in every chunk.
  CheckPool(this, PoolCase{2, 13, 9, 11, 3, 2, 3, 2, 1, 1, 1, 0, 2, 1, false}, 9, 0.05);
  CheckPool(this, PoolCase{1, 24, 3, 80, 3, 2, 3, 2, 1, 1, 0, 0, 0, 0, true}, 10, 0.0);
}

TEST_P(PoolTest, HandCases) {
  // 1x1 kernel with padding: corner outputs see only padding.
  PoolCase c{1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false};
  HostTensor x(DType::kF32, {1, 1, 2, 2});
  const float v[] = {-0.0f, 0.0f, FromBits(0xFFC12345u), 2.0f};
  std::memcpy(x.as<float>(), v, sizeof(v));
  const OpParams p = ParamsOf(c);
  HostTensor y(DType::kF32, {1, 1, 4, 4});
  ASSERT_TRUE(Run(Op::kMaxPool2D, p, x, y).ok());
  EXPECT_EQ(Bits(y.as<float>()[0]), 0xFF800000u);          // all padding: -inf
  EXPECT_EQ(Bits(y.as<float>()[1 * 4 + 1]), 0x80000000u);  // copies -0
  EXPECT_EQ(Bits(y.as<float>()[2 * 4 + 1]), 0xFFC12345u);  // NaN bits copied, not canonicalized
  ASSERT_TRUE(Run(Op::kAvgPool2D, p, x, y).ok());
  EXPECT_EQ(Bits(y.as<float>()[0]), 0x7FC00000u);  // -0 / 0
  EXPECT_EQ(Bits(y.as<float>()[1 * 4 + 1]), 0x80000000u);
  EXPECT_EQ(Bits(y.as<float>()[2 * 4 + 1]), 0x7FC00000u);  // arithmetic: canonical NaN
  OpParams pi = p;
  pi.count_include_pad = true;
  ASSERT_TRUE(Run(Op::kAvgPool2D, pi, x, y).ok());
  EXPECT_EQ(Bits(y.as<float>()[0]), 0x80000000u);  // -0 / 1

  // 2x2 window over {-0, +0, first NaN, second NaN}: max is +0 in a zero-only window, and
  // the first NaN (row-major) wins.
  PoolCase d{1, 1, 2, 4, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false};
  HostTensor x2(DType::kF32, {1, 1, 2, 4});
  const float w[] = {-0.0f, 1.0f, FromBits(0x7FC00005u), 3.0f, 0.0f, -0.0f, 4.0f, FromBits(0xFF800001u)};
  std::memcpy(x2.as<float>(), w, sizeof(w));
  HostTensor y2(DType::kF32, {1, 1, 1, 2});
  ASSERT_TRUE(Run(Op::kMaxPool2D, ParamsOf(d), x2, y2).ok());
  EXPECT_EQ(y2.as<float>()[0], 1.0f);
  EXPECT_EQ(Bits(y2.as<float>()[1]), 0x7FC00005u);
  const float z[] = {-0.0f, 0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f};
  std::memcpy(x2.as<float>(), z, sizeof(z));
  ASSERT_TRUE(Run(Op::kMaxPool2D, ParamsOf(d), x2, y2).ok());
  EXPECT_EQ(Bits(y2.as<float>()[0]), 0u);
  EXPECT_EQ(Bits(y2.as<float>()[1]), 0x80000000u);
  ASSERT_TRUE(Run(Op::kAvgPool2D, ParamsOf(d), x2, y2).ok());
  EXPECT_EQ(Bits(y2.as<float>()[0]), 0u);           // -0 + -0 + +0 + -0 = +0
  EXPECT_EQ(Bits(y2.as<float>()[1]), 0x80000000u);  // all -0
}

// Max pools take a branch-free max of order-preserving keys across the columns whose windows
// lie inside the width (64 at a time) and redo a window that holds a NaN: planes of few
// distinct values (ties, -0 against +0, -inf, infinities, NaN payloads) and rows wider than 64
// columns, with and without padding and strides.
TEST_P(PoolTest, MaxPoolTiesAndWideRows) {
  const uint32_t values[] = {0x80000000u, 0x00000000u, 0xFF800000u, 0x7F800000u, 0x3F800000u,
                             0xBF800000u, 0x00000001u, 0x80000001u, 0x7FC00007u, 0xFF812345u};
  std::mt19937 rng(99);
  const PoolCase cases[] = {{1, 3, 4, 150, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},
                            {1, 3, 4, 150, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false},
                            {1, 2, 5, 131, 3, 2, 2, 3, 1, 2, 1, 2, 0, 1, false},
                            {1, 2, 2, 96, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false}};
  for (const PoolCase& c : cases) {
    for (int nan_values : {0, 2}) {  // without NaNs, then with the two NaN payloads
      int64_t OH, OW;
      ASSERT_TRUE(OutDims(c, &OH, &OW));
      HostTensor x(DType::kF32, {c.N, c.C, c.H, c.W});
      const int choices = 8 + nan_values;
      for (int64_t i = 0; i < x.numel(); ++i) {
        // Mostly zeros of both signs, so that many windows are ties; NaNs only occasionally.
        const int r = static_cast<int>(rng() % 64);
        x.as<uint32_t>()[i] = r < 48 ? values[r % 2] : values[rng() % choices];
      }
      HostTensor want = RefPool(true, c, x, OH, OW);
      HostTensor got(DType::kF32, {c.N, c.C, OH, OW});
      ASSERT_TRUE(Run(Op::kMaxPool2D, ParamsOf(c), x, got).ok());
      ASSERT_EQ(0, std::memcmp(got.bytes.data(), want.bytes.data(), want.bytes.size()))
          << "W=" << c.W << " k=" << c.kh << "x" << c.kw << " nan_values=" << nan_values;
    }
  }
}

// Max pools whose every window lies inside the input run 16 outputs at a time across rows with
// 512-bit gathers where the CPU has AVX-512F (pool_avx512.cc): the openWakeWord and PP-OCR
// shapes (2 to 48 columns, strides (2, 2) and (1, 2)), dilations, tails of 1 to 15 outputs,
// ties of signed zeros and NaN payloads, with that path and without it.
TEST_P(PoolTest, MaxPoolInsideWindowsAcrossRows) {
  const uint32_t values[] = {0x80000000u, 0x00000000u, 0xFF800000u, 0x7F800000u, 0x3F800000u,
                             0xBF800000u, 0x00000001u, 0x80000001u, 0x7FC00007u, 0xFF812345u};
  std::mt19937 rng(7);
  const PoolCase cases[] = {
      {1, 5, 72, 32, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false}, {1, 3, 32, 16, 1, 2, 1, 2, 1, 1, 0, 0, 0, 0, false},
      {1, 4, 28, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false},  {1, 6, 10, 4, 1, 2, 1, 2, 1, 1, 0, 0, 0, 0, false},
      {1, 7, 2, 96, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false},  {2, 3, 9, 7, 3, 2, 2, 1, 2, 3, 0, 0, 1, 0, false},
      {1, 1, 3, 5, 3, 5, 1, 1, 1, 1, 0, 0, 0, 0, false}};
  for (bool avx512 : {true, false}) {
    cpu::SetPoolAvx512ForTesting(avx512);
    for (const PoolCase& c : cases) {
      for (int nan_values : {0, 2}) {
        int64_t OH, OW;
        ASSERT_TRUE(OutDims(c, &OH, &OW));
        HostTensor x(DType::kF32, {c.N, c.C, c.H, c.W});
        const int choices = 8 + nan_values;
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int r = static_cast<int>(rng() % 64);
          x.as<uint32_t>()[i] = r < 40 ? values[r % 2] : values[rng() % choices];
        }
        HostTensor want = RefPool(true, c, x, OH, OW);
        HostTensor got(DType::kF32, {c.N, c.C, OH, OW});
        ASSERT_TRUE(Run(Op::kMaxPool2D, ParamsOf(c), x, got).ok());
        ASSERT_EQ(0, std::memcmp(got.bytes.data(), want.bytes.data(), want.bytes.size()))
            << "H=" << c.H << " W=" << c.W << " k=" << c.kh << "x" << c.kw << " nan_values=" << nan_values
            << " avx512=" << avx512;
      }
    }
  }
  cpu::SetPoolAvx512ForTesting(true);
}

TEST_P(PoolTest, ZeroSizesAndBadCalls) {
  PoolCase c{0, 3, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, false};
  HostTensor x(DType::kF32, {0, 3, 4, 4}), y(DType::kF32, {0, 3, 3, 3});
  EXPECT_TRUE(Run(Op::kMaxPool2D, ParamsOf(c), x, y).ok());
  // H = 0 with padding: every window is padding.
  PoolCase e{1, 1, 0, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, false};
  HostTensor xe(DType::kF32, {1, 1, 0, 2}), ye(DType::kF32, {1, 1, 1, 2});
  ASSERT_TRUE(Run(Op::kMaxPool2D, ParamsOf(e), xe, ye).ok());
  EXPECT_EQ(Bits(ye.as<float>()[0]), 0xFF800000u);
  // Wrong output shape, rank, dtype, non-positive stride, window larger than the input.
  HostTensor xf(DType::kF32, {1, 1, 4, 4}), bad(DType::kF32, {1, 1, 2, 2});
  PoolCase k{1, 1, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, false};
  EXPECT_EQ(Run(Op::kMaxPool2D, ParamsOf(k), xf, bad).code(), StatusCode::kInvalidArgument);
  HostTensor x3(DType::kF32, {1, 4, 4}), y3(DType::kF32, {1, 3, 3});
  EXPECT_EQ(Run(Op::kAvgPool2D, ParamsOf(k), x3, y3).code(), StatusCode::kInvalidArgument);
  HostTensor xi(DType::kI32, {1, 1, 4, 4}), yi(DType::kI32, {1, 1, 3, 3});
  EXPECT_EQ(Run(Op::kMaxPool2D, ParamsOf(k), xi, yi).code(), StatusCode::kInvalidArgument);
  OpParams p0 = ParamsOf(k);
  p0.strides = {0, 1};
  HostTensor y33(DType::kF32, {1, 1, 3, 3});
  EXPECT_EQ(Run(Op::kMaxPool2D, p0, xf, y33).code(), StatusCode::kInvalidArgument);
  OpParams big = ParamsOf(k);
  big.kernel = {5, 5};
  EXPECT_EQ(Run(Op::kMaxPool2D, big, xf, y33).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Cpu, PoolTest, testing::ValuesIn(AllConfigs()), ConfigName);

}  // namespace
}  // namespace consensor::kernels
