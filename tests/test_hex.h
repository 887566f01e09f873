// Hex literals for test vectors, shared by the test binaries.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace consensor::testing_support {

// "0x"-optional hex to bytes. Test vectors are trusted input: no validation beyond pairs.
inline std::vector<uint8_t> Hex(std::string_view h) {
  if (h.starts_with("0x")) h.remove_prefix(2);
  std::vector<uint8_t> out;
  auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(nib(h[i]) << 4 | nib(h[i + 1])));
  return out;
}

// Exactly N bytes of hex; a wrong length fails the test.
template <size_t N>
std::array<uint8_t, N> Arr(std::string_view h) {
  std::vector<uint8_t> v = Hex(h);
  EXPECT_EQ(v.size(), N) << h;
  std::array<uint8_t, N> a{};
  std::copy(v.begin(), v.begin() + std::min(N, v.size()), a.begin());
  return a;
}

}  // namespace consensor::testing_support
