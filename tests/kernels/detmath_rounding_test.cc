// detmath floor, ceil, round_half_even and fmod (DETERMINISM.md section 5.12): their results
// exist exactly as floats, so they must equal the C library's double-precision evaluation
// bit for bit (zero signs included), apart from the canonical NaN.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/detmath.h"

namespace consensor {
namespace {

namespace dm = detmath;

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

constexpr uint32_t kCanonicalNaN = 0x7FC00000u;

// The reference result: the C library's, with any NaN canonical.
uint32_t Expected(double v) {
  const float f = static_cast<float>(v);
  return std::isnan(f) ? kCanonicalNaN : Bits(f);
}

// Every 251st bit pattern plus the neighbourhood of every small half-integer and of 2^23.
std::vector<uint32_t> UnaryInputs() {
  std::vector<uint32_t> in;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 251) in.push_back(static_cast<uint32_t>(u));
  for (int k = -64; k <= 64; ++k) {
    const uint32_t half = Bits(static_cast<float>(k) * 0.5f);
    for (int d = -2; d <= 2; ++d) in.push_back(half + static_cast<uint32_t>(d));
  }
  for (uint32_t base : {0x4B000000u, 0xCB000000u, 0x3F000000u, 0xBF000000u, 0x3F800000u, 0xBF800000u}) {
    for (int d = -3; d <= 3; ++d) in.push_back(base + static_cast<uint32_t>(d));
  }
  for (uint32_t special : {0u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC12345u, 0x7F800001u, 1u,
                           0x80000001u, 0x007FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu}) {
    in.push_back(special);
  }
  return in;
}

TEST(DetMathRounding, FloorCeilRoundMatchTheExactValue) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);  // std::nearbyint rounds half to even then
  int mismatches = 0;
  for (uint32_t u : UnaryInputs()) {
    const float x = FromBits(u);
    const double xd = x;
    if (Bits(dm::floor(x)) != Expected(std::floor(xd))) ++mismatches;
    if (Bits(dm::ceil(x)) != Expected(std::ceil(xd))) ++mismatches;
    if (Bits(dm::round_half_even(x)) != Expected(std::nearbyint(xd))) ++mismatches;
    if (mismatches > 0) {
      ADD_FAILURE() << "x bits 0x" << std::hex << u;
      return;
    }
  }
}

TEST(DetMathRounding, ZeroSignsAndTies) {
  EXPECT_EQ(Bits(dm::floor(0.3f)), Bits(0.0f));
  EXPECT_EQ(Bits(dm::floor(-0.3f)), Bits(-1.0f));
  EXPECT_EQ(Bits(dm::ceil(-0.3f)), Bits(-0.0f));
  EXPECT_EQ(Bits(dm::round_half_even(0.5f)), Bits(0.0f));
  EXPECT_EQ(Bits(dm::round_half_even(-0.5f)), Bits(-0.0f));
  EXPECT_EQ(Bits(dm::round_half_even(1.5f)), Bits(2.0f));
  EXPECT_EQ(Bits(dm::round_half_even(2.5f)), Bits(2.0f));
  EXPECT_EQ(Bits(dm::round_half_even(-2.5f)), Bits(-2.0f));
  EXPECT_EQ(Bits(dm::round_half_even(8388607.5f)), Bits(8388608.0f));  // carries into the exponent
  EXPECT_EQ(Bits(dm::floor(-0.0f)), Bits(-0.0f));
  EXPECT_EQ(Bits(dm::ceil(-std::numeric_limits<float>::infinity())), Bits(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(Bits(dm::floor(FromBits(0xFFC12345u))), kCanonicalNaN);
}

TEST(DetMathRounding, FmodMatchesTheExactRemainder) {
  std::mt19937 rng(7);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  // Random bit patterns (every exponent distance, subnormals, specials) ...
  for (int i = 0; i < 200000; ++i) pairs.emplace_back(static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()));
  // ... and operands of similar size, where the quotient is small and the result is busy.
  std::uniform_real_distribution<float> small(-50.0f, 50.0f);
  for (int i = 0; i < 100000; ++i) pairs.emplace_back(Bits(small(rng)), Bits(small(rng)));
  const uint32_t specials[] = {0u,          0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFF812345u,
                               1u,          0x80000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x3F800000u,
                               0xC0000000u, 0x40400000u, 0x3E99999Au, 0xC1200000u};
  for (uint32_t a : specials) {
    for (uint32_t b : specials) pairs.emplace_back(a, b);
  }
  for (const auto& [ua, ub] : pairs) {
    const float a = FromBits(ua), b = FromBits(ub);
    const uint32_t want = Expected(std::fmod(static_cast<double>(a), static_cast<double>(b)));
    ASSERT_EQ(Bits(dm::fmod(a, b)), want) << std::hex << "a 0x" << ua << " b 0x" << ub;
  }
}

TEST(DetMathRounding, FmodSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bits(dm::fmod(-4.0f, 2.0f)), Bits(-0.0f));
  EXPECT_EQ(Bits(dm::fmod(5.5f, -2.0f)), Bits(1.5f));
  EXPECT_EQ(Bits(dm::fmod(-5.5f, 2.0f)), Bits(-1.5f));
  EXPECT_EQ(Bits(dm::fmod(3.0f, inf)), Bits(3.0f));
  EXPECT_EQ(Bits(dm::fmod(inf, 3.0f)), kCanonicalNaN);
  EXPECT_EQ(Bits(dm::fmod(3.0f, -0.0f)), kCanonicalNaN);
  EXPECT_EQ(Bits(dm::fmod(FromBits(0x7F7FFFFFu), FromBits(1u))), Bits(0.0f));
  EXPECT_EQ(Bits(dm::fmod(FromBits(0x00000007u), FromBits(0x00000002u))), 1u);  // subnormal remainder
}

}  // namespace
}  // namespace consensor
