// Ethereum addresses in text: lowercase hex and the EIP-55 checksum form.
#pragma once

#include <string>
#include <string_view>

#include "common/secp256k1_sign.h"  // Address20
#include "common/status.h"

namespace consensor {

// "0x" + 40 lowercase hex digits, or the EIP-55 mixed-case checksum form.
std::string AddressToHex(const Address20& address);
std::string AddressToChecksumHex(const Address20& address);

// "0x"-prefixed or bare 40 hex digits. All-lowercase and all-uppercase are accepted as they are;
// mixed case must be a valid EIP-55 checksum (a mistyped address is rejected, not used).
StatusOr<Address20> AddressFromHex(std::string_view hex);

}  // namespace consensor
