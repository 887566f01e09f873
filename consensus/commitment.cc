#include "consensus/commitment.h"

#include "common/keccak.h"

namespace consensor::consensus {

Hash256 VoteCommitment(const SignedAttestation& vote, const Address20& signer) {
  Keccak256Hasher h;
  h.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kCommitmentTag.data()), kCommitmentTag.size()));
  h.Update(vote.attestation.task_id);
  const Hash256 ref = Eip712WordU64(vote.attestation.reference_block);
  h.Update(std::span<const uint8_t>(ref.data() + 24, 8));  // u64 big-endian
  h.Update(vote.attestation.result_root);
  h.Update(vote.attestation.trace_root);
  h.Update(signer);
  h.Update(vote.signature);
  return h.Finish();
}

Hash256 CommitmentDigest(const Eip712Domain& domain, const SignedCommitment& c) {
  static const Hash256 kTypeHash = Keccak256(kResultCommitmentType);
  const Hash256 words[] = {c.task_id, Eip712WordU64(c.reference_block), Eip712WordU64(static_cast<uint64_t>(c.phase)),
                           c.commitment};
  return Eip712Digest(DomainSeparator(domain), Eip712HashStruct(kTypeHash, words));
}

StatusOr<SignedCommitment> SignCommitment(const Secp256k1Secret& secret, const Eip712Domain& domain,
                                          const SignedAttestation& vote, const Address20& signer, VotePhase phase) {
  SignedCommitment c;
  c.task_id = vote.attestation.task_id;
  c.reference_block = vote.attestation.reference_block;
  c.phase = phase;
  c.commitment = VoteCommitment(vote, signer);
  ASSIGN_OR_RETURN(EcdsaSignature sig, SignDigest(secret, CommitmentDigest(domain, c)));
  c.signature = ToBytes65(sig);
  return c;
}

StatusOr<Address20> RecoverCommitmentSigner(const Eip712Domain& domain, const SignedCommitment& c) {
  ASSIGN_OR_RETURN(EcdsaSignature sig, FromBytes65(c.signature));
  return RecoverAddress(CommitmentDigest(domain, c), sig);
}

StatusOr<VotePhase> VotePhaseFromNumber(uint32_t n) {
  if (n >= kVotePhases) return InvalidArgument("unknown vote phase " + std::to_string(n));
  return static_cast<VotePhase>(n);
}

}  // namespace consensor::consensus
