// uint256 as 32 big-endian bytes: stakes, token amounts and ABI words.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace consensor {

using Uint256 = std::array<uint8_t, 32>;

Uint256 Uint256FromU64(uint64_t v);
// OUT_OF_RANGE when the value does not fit in 64 bits.
StatusOr<uint64_t> Uint256ToU64(const Uint256& v);
// Decimal digits only (no sign, no whitespace), at most 78 digits; OUT_OF_RANGE above 2^256-1.
StatusOr<Uint256> Uint256FromDecimal(std::string_view s);
// Optional "0x"/"0X" prefix, 1 to 64 hex digits.
StatusOr<Uint256> Uint256FromHex(std::string_view s);
std::string Uint256ToDecimal(const Uint256& v);
std::string Uint256ToHex(const Uint256& v);  // "0x" + minimal lowercase digits ("0x0" for zero)
// a + b modulo 2^256 (stake sums stay far below it).
Uint256 Uint256Add(const Uint256& a, const Uint256& b);
bool Uint256IsZero(const Uint256& v);

}  // namespace consensor
