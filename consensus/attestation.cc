#include "consensus/attestation.h"

#include <algorithm>

#include "common/keccak.h"

namespace consensor::consensus {

Hash256 Eip712WordU64(uint64_t v) {
  Hash256 w{};
  for (int i = 0; i < 8; ++i) w[31 - i] = static_cast<uint8_t>(v >> (8 * i));
  return w;
}

Hash256 Eip712WordAddress(const Address20& a) {
  Hash256 w{};
  std::copy(a.begin(), a.end(), w.begin() + 12);
  return w;
}

Hash256 Eip712WordString(std::string_view s) { return Keccak256(s); }

Hash256 Eip712HashStruct(const Hash256& type_hash, std::span<const Hash256> words) {
  Keccak256Hasher h;
  h.Update(type_hash);
  for (const Hash256& w : words) h.Update(w);
  return h.Finish();
}

Hash256 Eip712DomainSeparator(std::string_view name, std::string_view version, uint64_t chain_id,
                              const Address20& verifying_contract) {
  const Hash256 words[] = {Eip712WordString(name), Eip712WordString(version), Eip712WordU64(chain_id),
                           Eip712WordAddress(verifying_contract)};
  return Eip712HashStruct(Keccak256(kEip712DomainType), words);
}

Hash256 Eip712Digest(const Hash256& domain_separator, const Hash256& struct_hash) {
  Keccak256Hasher h;
  const uint8_t prefix[2] = {0x19, 0x01};
  h.Update(prefix);
  h.Update(domain_separator);
  h.Update(struct_hash);
  return h.Finish();
}

Hash256 DomainSeparator(const Eip712Domain& domain) {
  return Eip712DomainSeparator(kDomainName, kDomainVersion, domain.chain_id, domain.verifying_contract);
}

Hash256 AttestationStructHash(const Attestation& a) {
  // The type hash is a constant; compute it once.
  static const Hash256 kTypeHash = Keccak256(kAttestationType);
  const Hash256 words[] = {a.task_id, a.result_root, a.trace_root, Eip712WordU64(a.reference_block)};
  return Eip712HashStruct(kTypeHash, words);
}

Hash256 AttestationDigest(const Eip712Domain& domain, const Attestation& a) {
  return Eip712Digest(DomainSeparator(domain), AttestationStructHash(a));
}

StatusOr<std::array<uint8_t, 65>> SignAttestation(const Secp256k1Secret& secret, const Eip712Domain& domain,
                                                  const Attestation& a) {
  ASSIGN_OR_RETURN(EcdsaSignature sig, SignDigest(secret, AttestationDigest(domain, a)));
  return ToBytes65(sig);
}

StatusOr<Address20> RecoverAttestationSigner(const Eip712Domain& domain, const Attestation& a,
                                             std::span<const uint8_t> sig65) {
  ASSIGN_OR_RETURN(EcdsaSignature sig, FromBytes65(sig65));
  return RecoverAddress(AttestationDigest(domain, a), sig);
}

}  // namespace consensor::consensus
