// secp256k1 ECDSA signing and public-key recovery as Ethereum uses them: RFC 6979 deterministic
// nonces, low-s signatures (EIP-2), recovery ids, and addresses = last 20 bytes of
// keccak256(uncompressed public key without the 0x04 prefix).
//
// Address20 and Secp256k1Secret are the project's one Ethereum address type and one secret-key
// type; they live here, in common, so every layer (consensus, node/keys, node/chain) shares them.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "common/sha256.h"  // Hash256
#include "common/status.h"

namespace consensor {

using Address20 = std::array<uint8_t, 20>;
using Secp256k1Secret = std::array<uint8_t, 32>;

struct EcdsaSignature {
  std::array<uint8_t, 32> r{};
  std::array<uint8_t, 32> s{};
  uint8_t recovery_id = 0;  // 0 or 1 (the parity of R.y)
  bool operator==(const EcdsaSignature&) const = default;
};

// True when 1 <= s <= n/2 (the EIP-2 canonical half of the curve order).
bool IsLowS(const std::array<uint8_t, 32>& s);

// RFC 6979 deterministic signature of a 32-byte digest (libsecp256k1's default nonce function).
// The result is always low-s with recovery_id 0 or 1. INVALID_ARGUMENT for a secret that is zero
// or not below the group order.
StatusOr<EcdsaSignature> SignDigest(const Secp256k1Secret& secret, const Hash256& digest);

// The address whose key produced `sig` over `digest`. INVALID_ARGUMENT when r or s is zero or not
// below the group order, when s is high (malleable twin, rejected as Ethereum does since EIP-2),
// when the recovery id is not 0 or 1, or when no public key recovers.
StatusOr<Address20> RecoverAddress(const Hash256& digest, const EcdsaSignature& sig);
// How many public-key recoveries (RecoverAddress calls that reached libsecp256k1) this process
// has made: a recovery is the costly part of checking a signature, so tests and benchmarks
// count them.
uint64_t SignatureRecoveries();

// The address of a secret key. INVALID_ARGUMENT for an invalid key.
StatusOr<Address20> AddressFromSecretKey(const Secp256k1Secret& secret);

// The address of a 64-byte uncompressed public key (x || y, without the 0x04 prefix).
Address20 AddressFromPublicKey64(std::span<const uint8_t, 64> xy);

// 65-byte "r || s || v" form with v = 27 + recovery_id (what Solidity's ecrecover and
// OpenZeppelin's ECDSA.recover take).
std::array<uint8_t, 65> ToBytes65(const EcdsaSignature& sig);

// Parses r || s || v. By default v must be 27 or 28. With allow_raw_recovery_id, v may also be
// 0 or 1 (the raw recovery id, as some signers emit). Always rejects a wrong length, r or s out
// of range or zero, and high s.
StatusOr<EcdsaSignature> FromBytes65(std::span<const uint8_t> bytes, bool allow_raw_recovery_id = false);

}  // namespace consensor
