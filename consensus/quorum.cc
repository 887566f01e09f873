#include "consensus/quorum.h"

#include "consensus/replication.h"

#include <algorithm>
#include <string>

namespace consensor::consensus {

StatusOr<QuorumTracker> QuorumTracker::Create(const Eip712Domain& domain, const Hash256& task_id,
                                              uint64_t reference_block, std::vector<Address20> committee, size_t quorum,
                                              size_t replicas) {
  if (committee.empty()) return InvalidArgument("the committee is empty");
  if (replicas == 0) replicas = committee.size();
  if (replicas > committee.size()) {
    return InvalidArgument("replicas " + std::to_string(replicas) + " exceed the committee of " +
                           std::to_string(committee.size()));
  }
  std::vector<Address20> sorted = committee;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return InvalidArgument("the committee lists an operator twice");
  }
  if (quorum == 0 || quorum > replicas) {
    return InvalidArgument("quorum " + std::to_string(quorum) + " must be between 1 and the committee size " +
                           std::to_string(replicas));
  }
  QuorumTracker t;
  t.domain_ = domain;
  t.task_id_ = task_id;
  t.reference_block_ = reference_block;
  for (size_t i = 0; i < committee.size(); ++i) t.position_[committee[i]] = i;
  t.committee_ = std::move(committee);
  t.replicas_ = replicas;
  t.quorum_ = quorum;
  return t;
}

namespace {

using u128 = unsigned __int128;
constexpr int kMaxStakeBits = 100;

StatusOr<u128> SmallStake(const std::array<uint8_t, 32>& be) {
  auto v = StakeToU128(be);
  if (!v.ok() || (*v >> kMaxStakeBits) != 0) return InvalidArgument("stake must be below 2^100 wei");
  return v;
}

}  // namespace

StatusOr<QuorumTracker> QuorumTracker::CreateWeighted(const Eip712Domain& domain, const Hash256& task_id,
                                                      uint64_t reference_block,
                                                      const std::vector<WeightedOperator>& committee,
                                                      const std::array<uint8_t, 32>& total_stake,
                                                      uint32_t threshold_bps) {
  if (threshold_bps == 0 || threshold_bps > 10000) {
    return InvalidArgument("threshold " + std::to_string(threshold_bps) + " bps must be in 1..10000");
  }
  std::vector<Address20> members;
  for (const auto& op : committee) members.push_back(op.address);
  ASSIGN_OR_RETURN(QuorumTracker t, Create(domain, task_id, reference_block, members, 1));
  t.weighted_ = true;
  t.threshold_bps_ = threshold_bps;
  ASSIGN_OR_RETURN(t.total_stake_, SmallStake(total_stake));
  u128 sum = 0;
  for (const auto& op : committee) {
    ASSIGN_OR_RETURN(u128 stake, SmallStake(op.stake));
    t.stake_of_[op.address] = stake;
    sum += stake;
  }
  if (sum > t.total_stake_) return InvalidArgument("the committee holds more stake than the total");
  return t;
}

bool QuorumTracker::is_member(const Address20& a) const { return position_.count(a) != 0; }

Status QuorumTracker::ExtendCommittee(const std::vector<Address20>& members) {
  if (weighted_) return InvalidArgument("a dispute committee cannot be extended");
  for (const Address20& m : members) {
    if (position_.emplace(m, committee_.size()).second) committee_.push_back(m);
  }
  return OkStatus();
}

size_t QuorumTracker::quorum() const {
  return weighted_ ? 0 : RequiredSignatures(replicas_, quorum_, committee_.size());
}

bool QuorumTracker::conflicting() const {
  const Hash256* first_root = nullptr;
  for (const auto& [struct_hash, voters] : votes_) {
    if (voters.empty()) continue;
    const Hash256& root = voters.begin()->second.attestation.result_root;
    if (first_root == nullptr) {
      first_root = &root;
    } else if (root != *first_root) {
      return true;
    }
  }
  return false;
}

size_t QuorumTracker::Reached(const std::map<Address20, SignedAttestation>& voters) const {
  std::vector<Address20> members;
  for (const auto& [address, vote] : voters) members.push_back(address);
  return ReachedByMembers(members);
}

bool QuorumTracker::ReachedBy(const std::set<Address20>& signers) const {
  std::vector<Address20> members;
  for (const Address20& a : signers) {
    if (is_member(a)) members.push_back(a);
  }
  return ReachedByMembers(members) != 0;
}

size_t QuorumTracker::ReachedByMembers(const std::vector<Address20>& members) const {
  if (!weighted_) {
    // The smallest prefix c of the committee order (replicas <= c <= committee size) in which
    // at least RequiredSignatures(replicas, quorum, c) of the first c members signed. Any such c
    // is a valid certificate (consensus/certificate.h), and no c lets votes from deep in the
    // order decide with a smaller fraction than the task asked for.
    std::vector<size_t> positions;
    for (const Address20& address : members) positions.push_back(position_.at(address));
    std::sort(positions.begin(), positions.end());
    for (size_t c = replicas_; c <= committee_.size(); ++c) {
      const size_t within =
          static_cast<size_t>(std::lower_bound(positions.begin(), positions.end(), c) - positions.begin());
      if (within >= RequiredSignatures(replicas_, quorum_, c)) return c;
    }
    return 0;
  }
  u128 signed_stake = 0;
  for (const Address20& address : members) signed_stake += stake_of_.at(address);
  // Both sides stay below 2^114, so the products are exact.
  return signed_stake * 10000 >= total_stake_ * threshold_bps_ ? committee_.size() : 0;
}

size_t QuorumTracker::votes_for(const Attestation& attestation) const {
  auto it = votes_.find(AttestationStructHash(attestation));
  return it == votes_.end() ? 0 : it->second.size();
}

StatusOr<AddOutcome> QuorumTracker::Add(const SignedAttestation& sa) {
  const Attestation& a = sa.attestation;
  if (a.task_id != task_id_) return InvalidArgument("attestation is for another task (" + ToHex(a.task_id) + ")");
  if (a.reference_block != reference_block_) {
    return InvalidArgument("attestation names reference block " + std::to_string(a.reference_block) +
                           ", the task's is " + std::to_string(reference_block_));
  }
  auto signer = RecoverAttestationSigner(domain_, a, sa.signature);
  if (!signer.ok()) return InvalidArgument("attestation signature: " + signer.status().message());
  return AddVerified(sa, *signer);
}

StatusOr<AddOutcome> QuorumTracker::AddVerified(const SignedAttestation& sa, const Address20& signer) {
  const Attestation& a = sa.attestation;
  if (a.task_id != task_id_) return InvalidArgument("attestation is for another task (" + ToHex(a.task_id) + ")");
  if (a.reference_block != reference_block_) {
    return InvalidArgument("attestation names reference block " + std::to_string(a.reference_block) +
                           ", the task's is " + std::to_string(reference_block_));
  }
  if (!is_member(signer)) {
    return PermissionDenied("signer " + ToHex(signer) + " is not in the task's committee");
  }
  const Hash256 key = AttestationStructHash(a);
  if (auto prior = vote_of_.find(signer); prior != vote_of_.end()) {
    if (prior->second == key) return AddOutcome::kDuplicate;
    // Keep one piece of evidence per signer: its counted vote and the first conflicting one
    // with another result root (what the contract's slashEquivocation accepts).
    const SignedAttestation& counted = votes_[prior->second].at(signer);
    bool recorded = std::any_of(equivocations_.begin(), equivocations_.end(),
                                [&](const Equivocation& e) { return e.signer == signer; });
    if (!recorded && counted.attestation.result_root != a.result_root) {
      equivocations_.push_back({signer, counted, sa});
      // An equivocator is slashable and, once slashed, its signature backs nothing
      // (`consensor verify` checks evidenceUsed): it no longer counts toward any certificate.
      equivocators_.insert(signer);
      if (certificate_ && std::binary_search(certificate_->signers.begin(), certificate_->signers.end(), signer)) {
        tainted_ = true;
      }
    }
    return AddOutcome::kConflictingVote;
  }
  vote_of_[signer] = key;
  auto& voters = votes_[key];
  voters.emplace(signer, sa);
  if (certificate_) return AddOutcome::kCounted;
  return Certify(a, voters) ? AddOutcome::kFinalized : AddOutcome::kCounted;
}

bool QuorumTracker::Certify(const Attestation& a, const std::map<Address20, SignedAttestation>& all_voters) {
  std::map<Address20, SignedAttestation> voters;
  for (const auto& [address, vote] : all_voters) {
    if (!equivocators_.count(address)) voters.emplace(address, vote);
  }
  const size_t prefix = Reached(voters);
  if (prefix == 0) return false;
  Certificate c;
  c.attestation = a;
  for (const auto& [address, vote] : voters) {      // std::map: ascending signer order
    if (position_.at(address) >= prefix) continue;  // outside the certificate's committee
    c.signers.push_back(address);
    c.signatures.push_back(vote.signature);
  }
  certificate_ = std::move(c);
  certified_committee_size_ = prefix;
  return true;
}

bool QuorumTracker::RefreshCertificate() {
  if (!certificate_ || !tainted_) return false;
  const Attestation a = certificate_->attestation;
  auto it = votes_.find(AttestationStructHash(a));
  if (it == votes_.end()) return false;
  const Certificate before = *certificate_;
  const size_t before_size = certified_committee_size_;
  if (!Certify(a, it->second)) {
    certificate_ = before;  // not enough honest signers yet: keep it until there are
    certified_committee_size_ = before_size;
    return false;
  }
  tainted_ = false;
  return true;
}

}  // namespace consensor::consensus
