#include "common/address.h"

#include <algorithm>

#include "common/keccak.h"
#include "common/sha256.h"  // ToHex, FixedBytesFromHex

namespace consensor {

std::string AddressToHex(const Address20& address) { return "0x" + ToHex(address); }

std::string AddressToChecksumHex(const Address20& address) {
  std::string hex = ToHex(address);
  const Hash256 h = Keccak256(std::string_view(hex));
  // EIP-55: uppercase a letter when the matching nibble of keccak256(lowercase hex) is >= 8.
  for (size_t i = 0; i < hex.size(); ++i) {
    uint8_t nibble = (i % 2 == 0) ? h[i / 2] >> 4 : h[i / 2] & 0x0f;
    if (hex[i] >= 'a' && hex[i] <= 'f' && nibble >= 8) hex[i] = static_cast<char>(hex[i] - 'a' + 'A');
  }
  return "0x" + hex;
}

StatusOr<Address20> AddressFromHex(std::string_view hex) {
  std::string_view digits = hex;
  if (digits.size() >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits.remove_prefix(2);
  if (digits.size() != 40) return InvalidArgument("an address is 40 hex digits, got " + std::to_string(digits.size()));
  auto bytes = FixedBytesFromHex(digits, 20, "address");
  if (!bytes.ok()) return InvalidArgument("address '" + std::string(hex) + "' has a non-hex digit");
  Address20 a{};
  std::copy(bytes->begin(), bytes->end(), a.begin());
  bool has_lower = false, has_upper = false;
  for (char ch : digits) {
    has_lower |= (ch >= 'a' && ch <= 'f');
    has_upper |= (ch >= 'A' && ch <= 'F');
  }
  if (has_lower && has_upper && AddressToChecksumHex(a).substr(2) != digits) {
    return InvalidArgument("address '" + std::string(hex) + "' has an invalid EIP-55 checksum");
  }
  return a;
}

}  // namespace consensor
