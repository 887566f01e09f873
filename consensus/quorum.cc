#include "consensus/quorum.h"

#include <algorithm>

namespace consensor::consensus {

StatusOr<QuorumTracker> QuorumTracker::Create(const Eip712Domain& domain, const Hash256& task_id,
                                              uint64_t reference_block, std::vector<Address20> committee,
                                              size_t quorum) {
  std::sort(committee.begin(), committee.end());
  if (committee.empty()) return InvalidArgument("the committee is empty");
  if (std::adjacent_find(committee.begin(), committee.end()) != committee.end()) {
    return InvalidArgument("the committee lists an operator twice");
  }
  if (quorum == 0 || quorum > committee.size()) {
    return InvalidArgument("quorum " + std::to_string(quorum) + " must be between 1 and the committee size " +
                           std::to_string(committee.size()));
  }
  QuorumTracker t;
  t.domain_ = domain;
  t.task_id_ = task_id;
  t.reference_block_ = reference_block;
  t.committee_ = std::move(committee);
  t.quorum_ = quorum;
  return t;
}

size_t QuorumTracker::votes_for(const Attestation& attestation) const {
  auto it = votes_.find(AttestationStructHash(attestation));
  return it == votes_.end() ? 0 : it->second.size();
}

StatusOr<AddOutcome> QuorumTracker::Add(const SignedAttestation& sa) {
  const Attestation& a = sa.attestation;
  if (a.task_id != task_id_) return InvalidArgument("attestation is for another task (" + ToHex(a.task_id) + ")");
  if (a.reference_block != reference_block_) {
    return InvalidArgument("attestation names reference block " + std::to_string(a.reference_block) + ", the task's is " +
                           std::to_string(reference_block_));
  }
  auto signer = RecoverAttestationSigner(domain_, a, sa.signature);
  if (!signer.ok()) return InvalidArgument("attestation signature: " + signer.status().message());
  if (!std::binary_search(committee_.begin(), committee_.end(), *signer)) {
    return PermissionDenied("signer " + ToHex(*signer) + " is not in the task's committee");
  }
  const Hash256 key = AttestationStructHash(a);
  if (auto prior = vote_of_.find(*signer); prior != vote_of_.end()) {
    if (prior->second == key) return AddOutcome::kDuplicate;
    // Keep one piece of evidence per signer: its counted vote and the first conflicting one
    // with another result root (what the contract's slashEquivocation accepts).
    const SignedAttestation& counted = votes_[prior->second].at(*signer);
    bool recorded = std::any_of(equivocations_.begin(), equivocations_.end(),
                                [&](const Equivocation& e) { return e.signer == *signer; });
    if (!recorded && counted.attestation.result_root != a.result_root) {
      equivocations_.push_back({*signer, counted, sa});
    }
    return AddOutcome::kConflictingVote;
  }
  vote_of_[*signer] = key;
  auto& voters = votes_[key];
  voters.emplace(*signer, sa);
  if (certificate_ || voters.size() < quorum_) return AddOutcome::kCounted;
  Certificate c;
  c.attestation = a;
  for (const auto& [address, vote] : voters) {  // std::map: ascending signer order
    c.signers.push_back(address);
    c.signatures.push_back(vote.signature);
  }
  certificate_ = std::move(c);
  return AddOutcome::kFinalized;
}

}  // namespace consensor::consensus
