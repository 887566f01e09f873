#include "common/uint256.h"

#include <algorithm>

#include "common/sha256.h"  // ToHex, HexDigitValue

namespace consensor {
namespace {

// v = v * mul + add; returns false on overflow past 256 bits.
bool MulAdd(Uint256& v, uint32_t mul, uint32_t add) {
  uint32_t carry = add;
  for (int i = 31; i >= 0; --i) {
    uint32_t t = static_cast<uint32_t>(v[i]) * mul + carry;
    v[i] = static_cast<uint8_t>(t & 0xff);
    carry = t >> 8;
  }
  return carry == 0;
}

}  // namespace

Uint256 Uint256Add(const Uint256& a, const Uint256& b) {
  Uint256 sum{};
  unsigned carry = 0;
  for (size_t i = sum.size(); i-- > 0;) {
    const unsigned s = a[i] + b[i] + carry;
    sum[i] = static_cast<uint8_t>(s);
    carry = s >> 8;
  }
  return sum;
}

bool Uint256IsZero(const Uint256& v) {
  for (uint8_t b : v) {
    if (b != 0) return false;
  }
  return true;
}

Uint256 Uint256FromU64(uint64_t v) {
  Uint256 out{};
  for (int i = 0; i < 8; ++i) out[31 - i] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

StatusOr<uint64_t> Uint256ToU64(const Uint256& v) {
  if (!std::all_of(v.begin(), v.begin() + 24, [](uint8_t b) { return b == 0; }))
    return OutOfRange("uint256 value does not fit in 64 bits");
  uint64_t out = 0;
  for (int i = 24; i < 32; ++i) out = (out << 8) | v[i];
  return out;
}

StatusOr<Uint256> Uint256FromDecimal(std::string_view s) {
  if (s.empty()) return InvalidArgument("empty decimal number");
  if (s.size() > 78) return OutOfRange("decimal number has more than 78 digits");
  Uint256 v{};
  for (char c : s) {
    if (c < '0' || c > '9') return InvalidArgument("invalid decimal digit in '" + std::string(s) + "'");
    if (!MulAdd(v, 10, static_cast<uint32_t>(c - '0'))) return OutOfRange("decimal number exceeds 2^256-1");
  }
  return v;
}

StatusOr<Uint256> Uint256FromHex(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  if (s.empty()) return InvalidArgument("empty hex number");
  if (s.size() > 64) return OutOfRange("hex number has more than 64 digits");
  Uint256 v{};
  for (char c : s) {
    int d = HexDigitValue(c);
    if (d < 0) return InvalidArgument("invalid hex digit in '" + std::string(s) + "'");
    if (!MulAdd(v, 16, static_cast<uint32_t>(d))) return OutOfRange("hex number exceeds 2^256-1");
  }
  return v;
}

std::string Uint256ToDecimal(const Uint256& v) {
  Uint256 t = v;
  std::string digits;
  while (!Uint256IsZero(t)) {
    uint32_t rem = 0;
    for (int i = 0; i < 32; ++i) {
      uint32_t cur = (rem << 8) | t[i];
      t[i] = static_cast<uint8_t>(cur / 10);
      rem = cur % 10;
    }
    digits.push_back(static_cast<char>('0' + rem));
  }
  if (digits.empty()) return "0";
  std::reverse(digits.begin(), digits.end());
  return digits;
}

std::string Uint256ToHex(const Uint256& v) {
  std::string hex = ToHex(v);
  size_t i = hex.find_first_not_of('0');
  return "0x" + (i == std::string::npos ? std::string("0") : hex.substr(i));
}

}  // namespace consensor
