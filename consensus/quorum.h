// The per-task quorum tracker: collects signed attestations from committee members, finalizes
// the task when `quorum` distinct members sign the same result, and keeps the evidence that
// disputes and slashing need (conflicting results, equivocating signers). Pure: signatures are
// verified here, but time, gossip and storage live in node/.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/committee.h"

namespace consensor::consensus {

using Signature65 = std::array<uint8_t, 65>;

struct SignedAttestation {
  Attestation attestation;
  Signature65 signature{};
};

// What the contract's slashDispute takes as a certificate: one result, signatures in strictly
// ascending signer order.
struct Certificate {
  Attestation attestation;
  std::vector<Address20> signers;       // ascending
  std::vector<Signature65> signatures;  // same order
};

// One signer, two different results for the same task: slashable on its own.
struct Equivocation {
  Address20 signer{};
  SignedAttestation first, second;
};

enum class AddOutcome {
  kCounted,    // a new vote for its result
  kDuplicate,  // this signer already voted for this result; nothing changed
  // This signer had voted for a different attestation; not counted. When the result roots
  // differ it is recorded as equivocation evidence.
  kConflictingVote,
  kFinalized,  // this vote completed the quorum
};

class QuorumTracker {
 public:
  // Count mode: `committee` in committee order; its first `replicas` (0: all of it) are the
  // task's replicas and `quorum` of them certify. A committee grown by replacements certifies
  // when, for some prefix c of it, RequiredSignatures(replicas, quorum, c) of the first c members
  // signed the same attestation (consensus/replication.h): the fraction never drops.
  // `quorum` must be in [1, replicas].
  static StatusOr<QuorumTracker> Create(const Eip712Domain& domain, const Hash256& task_id, uint64_t reference_block,
                                        std::vector<Address20> committee, size_t quorum, size_t replicas = 0);
  // Stake mode, for dispute rounds: finalizes when members holding at least threshold_bps /
  // 10000 of `total_stake` (the whole operator set's stake at the reference block) sign the same
  // attestation — the rule the contract's slashDispute applies to a certificate. Stakes are
  // 256-bit big-endian; the total must be below 2^100 wei so the comparison is exact in 128 bits.
  static StatusOr<QuorumTracker> CreateWeighted(const Eip712Domain& domain, const Hash256& task_id,
                                                uint64_t reference_block,
                                                const std::vector<WeightedOperator>& committee,
                                                const std::array<uint8_t, 32>& total_stake, uint32_t threshold_bps);

  // Appends members (a silent member's replacement, the next operators of the order). Votes
  // from non-members were refused, so the caller re-adds what it kept aside. Members already
  // present are ignored. Stake mode: INVALID_ARGUMENT (the dispute committee is fixed).
  Status ExtendCommittee(const std::vector<Address20>& members);
  // Matching signatures the whole current committee needs (count mode; smaller prefixes may
  // need fewer).
  size_t quorum() const;
  // The committee prefix the certificate was drawn from.
  size_t certified_committee_size() const { return certified_committee_size_; }
  size_t committee_size() const { return committee_.size(); }
  bool is_member(const Address20& a) const;

  // INVALID_ARGUMENT for another task or reference block, or a signature that does not
  // recover; PERMISSION_DENIED when the signer is not in the committee.
  StatusOr<AddOutcome> Add(const SignedAttestation& signed_attestation);
  // Add for a vote whose signer the caller has just recovered from this very signature
  // (RecoverAttestationSigner(domain, attestation, signature)): the same checks and outcome
  // without a second signature recovery (tens of microseconds each).
  StatusOr<AddOutcome> AddVerified(const SignedAttestation& signed_attestation, const Address20& signer);

  bool finalized() const { return certificate_.has_value(); }
  // After a signer of the certificate equivocated: rebuilds it from the other signers once they
  // reach the quorum on their own. True when the certificate changed.
  bool RefreshCertificate();
  const std::optional<Certificate>& certificate() const { return certificate_; }
  const std::vector<Equivocation>& equivocations() const { return equivocations_; }
  // This signer voted for two results: it never counts toward a certificate again.
  bool equivocated(const Address20& a) const { return equivocators_.count(a) != 0; }
  // The certificate has an equivocator among its signers (RefreshCertificate has not replaced it).
  bool tainted() const { return tainted_; }
  // True once committee members have signed different result roots: honest nodes then widen
  // the re-execution (a dispute). Attestations that differ only in the trace root are not a
  // conflict: the result is the same, nobody can be slashed for it, and a dispute would be a
  // free way to make the whole operator set re-execute (issue 16, hole 7). Such votes still do
  // not certify together (the signatures are over the whole attestation): a member that signs a
  // wrong trace root does not count toward the quorum, like a silent one.
  bool conflicting() const;
  // Distinct signers of exactly this attestation.
  size_t votes_for(const Attestation& attestation) const;
  // True when `signers` would certify if they all signed the same attestation: what the commit
  // window of commit-reveal waits for (consensus/commitment.h). Non-members are ignored.
  bool ReachedBy(const std::set<Address20>& signers) const;

 private:
  QuorumTracker() = default;

  Eip712Domain domain_{};
  Hash256 task_id_{};
  uint64_t reference_block_ = 0;
  // The committee prefix that certifies these voters, 0 for none (count mode); in stake mode
  // the committee size when the threshold is met.
  size_t Reached(const std::map<Address20, SignedAttestation>& voters) const;
  size_t ReachedByMembers(const std::vector<Address20>& members) const;
  // Builds the certificate from `voters` without equivocators; false when they do not reach it.
  bool Certify(const Attestation& a, const std::map<Address20, SignedAttestation>& voters);

  std::vector<Address20> committee_;  // in committee order
  std::map<Address20, size_t> position_;
  size_t replicas_ = 0;
  size_t quorum_ = 0;  // of the first replicas_
  size_t certified_committee_size_ = 0;
  // Stake mode only.
  bool weighted_ = false;
  std::map<Address20, unsigned __int128> stake_of_;
  unsigned __int128 total_stake_ = 0;
  uint32_t threshold_bps_ = 0;
  // Votes are per whole attestation (struct hash): signatures in one certificate must all be
  // over the same message, trace root included.
  std::map<Hash256, std::map<Address20, SignedAttestation>> votes_;  // struct hash -> signer -> vote
  std::map<Address20, Hash256> vote_of_;                             // signer -> its counted struct hash
  std::vector<Equivocation> equivocations_;
  std::set<Address20> equivocators_;  // never counted toward a certificate
  bool tainted_ = false;              // the certificate has an equivocator among its signers
  std::optional<Certificate> certificate_;
};

}  // namespace consensor::consensus
