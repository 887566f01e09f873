// EIP-1559 (type 0x02) Ethereum transactions: signing hash, signing, raw encoding, transaction
// hash, and a strict decoder for signed raw transactions that recovers the sender.
//
//   signing hash = keccak256(0x02 || rlp([chainId, nonce, maxPriorityFeePerGas, maxFeePerGas,
//                                         gasLimit, to, value, data, accessList]))
//   raw          = 0x02 || rlp([... same nine fields ..., yParity, r, s])
//   tx hash      = keccak256(raw)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "common/status.h"
#include "node/chain/abi.h"  // Uint256

namespace consensor::node {

struct AccessListEntry {
  Address20 address{};
  std::vector<Hash256> storage_keys;
  bool operator==(const AccessListEntry&) const = default;
};

struct Eip1559Transaction {
  uint64_t chain_id = 0;
  uint64_t nonce = 0;
  Uint256 max_priority_fee_per_gas{};  // wei
  Uint256 max_fee_per_gas{};           // wei
  uint64_t gas_limit = 0;
  std::optional<Address20> to;  // nullopt: contract creation
  Uint256 value{};              // wei
  std::vector<uint8_t> data;
  std::vector<AccessListEntry> access_list;
  bool operator==(const Eip1559Transaction&) const = default;
};

// The unsigned payload 0x02 || rlp([...nine fields...]) and its keccak256.
std::vector<uint8_t> UnsignedTransactionBytes(const Eip1559Transaction& tx);
Hash256 SigningHash(const Eip1559Transaction& tx);

// The raw signed transaction for eth_sendRawTransaction.
std::vector<uint8_t> EncodeSignedTransaction(const Eip1559Transaction& tx, const EcdsaSignature& sig);
StatusOr<std::vector<uint8_t>> SignTransaction(const Secp256k1Secret& secret, const Eip1559Transaction& tx);

// keccak256 of the raw signed transaction.
Hash256 TransactionHash(std::span<const uint8_t> raw);

struct DecodedTransaction {
  Eip1559Transaction tx;
  EcdsaSignature signature;
  Address20 sender{};
  Hash256 hash{};
};

// Decodes a raw type-2 transaction and recovers its sender. Strict: exactly 12 list fields,
// canonical integers (no leading zeros; 64-bit fields at most 8 bytes, 256-bit at most 32),
// `to` empty or 20 bytes, access-list entries [address(20), [key(32)...]], y_parity 0 or 1,
// low s, and no trailing bytes. INVALID_ARGUMENT on any violation.
StatusOr<DecodedTransaction> DecodeSignedTransaction(std::span<const uint8_t> raw);

// ---- Legacy (pre-typed) transactions with EIP-155 replay protection.
//   signing hash = keccak256(rlp([nonce, gasPrice, gasLimit, to, value, data, chainId, 0, 0]))
//   raw          = rlp([nonce, gasPrice, gasLimit, to, value, data, v, r, s]),
//                  v = chainId * 2 + 35 + recovery_id
// Pre-EIP-155 signatures (v = 27/28, no chain id) are neither produced nor accepted.

struct LegacyTransaction {
  uint64_t nonce = 0;
  Uint256 gas_price{};  // wei
  uint64_t gas_limit = 0;
  std::optional<Address20> to;  // nullopt: contract creation
  Uint256 value{};
  std::vector<uint8_t> data;
  uint64_t chain_id = 1;  // >= 1 and small enough that v fits in 64 bits
  bool operator==(const LegacyTransaction&) const = default;
};

std::vector<uint8_t> LegacySigningPayload(const LegacyTransaction& tx);
Hash256 LegacySigningHash(const LegacyTransaction& tx);
// INVALID_ARGUMENT for chain_id 0 or one so large that v would overflow 64 bits.
StatusOr<std::vector<uint8_t>> SignLegacyTransaction(const Secp256k1Secret& secret, const LegacyTransaction& tx);

struct DecodedLegacyTransaction {
  LegacyTransaction tx;
  EcdsaSignature signature;
  Address20 sender{};
  Hash256 hash{};
};
// Strict like DecodeSignedTransaction: exactly 9 fields, canonical integers, v >= 35.
StatusOr<DecodedLegacyTransaction> DecodeSignedLegacyTransaction(std::span<const uint8_t> raw);

}  // namespace consensor::node
