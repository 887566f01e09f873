// EIP-712 typed-data signatures over result attestations. The AVS contract verifies the same
// digest, so the type strings below are part of the protocol and must not change:
//
//   EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)
//     name = "Consensor", version = "1"
//   Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)
//
//   digest = keccak256(0x19 0x01 || domainSeparator || hashStruct(attestation))
//
// Signatures are 65 bytes r || s || v with v in {27, 28} and low s (what OpenZeppelin's
// ECDSA.recover accepts).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "common/status.h"

namespace consensor::consensus {

inline constexpr std::string_view kEip712DomainType =
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)";
inline constexpr std::string_view kAttestationType =
    "Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)";
inline constexpr std::string_view kDomainName = "Consensor";
inline constexpr std::string_view kDomainVersion = "1";

struct Attestation {
  // Stays a Hash256: it is the signed bytes32, hashed and ABI-encoded like the roots beside it.
  Hash256 task_id{};
  Hash256 result_root{};
  Hash256 trace_root{};
  uint64_t reference_block = 0;
  bool operator==(const Attestation&) const = default;
};

struct Eip712Domain {
  uint64_t chain_id = 0;
  Address20 verifying_contract{};
  bool operator==(const Eip712Domain&) const = default;
};

// ---- General EIP-712 building blocks (also used by the tests against the EIP's own example).

// 32-byte ABI words as EIP-712's encodeData uses them.
Hash256 Eip712WordU64(uint64_t v);              // uintN, left-padded
Hash256 Eip712WordAddress(const Address20& a);  // address, left-padded
Hash256 Eip712WordString(std::string_view s);   // string/bytes: keccak256 of the contents
// keccak256(typeHash || words...), i.e. hashStruct for a struct whose fields are already words.
Hash256 Eip712HashStruct(const Hash256& type_hash, std::span<const Hash256> words);
// The domain separator for EIP712Domain(string name,string version,uint256 chainId,address verifyingContract).
Hash256 Eip712DomainSeparator(std::string_view name, std::string_view version, uint64_t chain_id,
                              const Address20& verifying_contract);
// keccak256(0x19 0x01 || domain_separator || struct_hash).
Hash256 Eip712Digest(const Hash256& domain_separator, const Hash256& struct_hash);

// ---- Consensor attestations.

Hash256 DomainSeparator(const Eip712Domain& domain);
Hash256 AttestationStructHash(const Attestation& a);
Hash256 AttestationDigest(const Eip712Domain& domain, const Attestation& a);

// 65-byte r || s || v (v = 27 or 28). INVALID_ARGUMENT for an invalid secret key.
StatusOr<std::array<uint8_t, 65>> SignAttestation(const Secp256k1Secret& secret, const Eip712Domain& domain,
                                                  const Attestation& a);
// The signer's address. INVALID_ARGUMENT for a signature that is not 65 bytes, has v outside
// {27, 28}, high s, or r/s out of range.
StatusOr<Address20> RecoverAttestationSigner(const Eip712Domain& domain, const Attestation& a,
                                             std::span<const uint8_t> sig65);

}  // namespace consensor::consensus
