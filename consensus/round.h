// One task's consensus round: the protocol's decisions for a task, from its announcement to
// its certificate and the evidence against operators that signed something else. The node
// feeds it events (a verified gossip vote, its own signed vote, a timer) and carries out the
// decisions it returns in order (persist, publish, execute, send evidence). Nothing here reads
// a clock, touches the network or storage, or locks: times come in as arguments, so a recorded
// sequence of events replays to the same decisions.
//
// Committee extension: at each member deadline the committee (a prefix of the order) grows by
// as many operators as members that have not voted (consensus/membership.h), so a slow honest
// member is not given up on, only joined. Growth never helps operators deep in the order: a
// prefix of c operators needs RequiredSignatures(replicas, quorum, c) matching votes among
// those c (consensus/replication.h), and votes kept aside from operators outside the committee
// count only once the committee reaches them, under that scaled quorum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/operator_set.h"
#include "consensus/quorum.h"
#include "consensus/slashing.h"

namespace consensor::consensus {

// Node-wide parameters of the rules.
struct RoundRules {
  Eip712Domain domain;
  Address20 self{};                    // this node's operator address
  uint32_t dispute_threshold_bps = 0;  // the contract's stake threshold for dispute certificates
  // Disputes run over the whole operator set; this bounds it (a certificate carries at most
  // kMaxCertificateSigners signatures). A larger set refuses to open a dispute, saying why.
  size_t max_dispute_committee = 1024;
  int64_t member_timeout_ms = 20000;  // a silent member is replaced after this
  // Once every operator is in the committee: how long without a new vote before the round fails.
  // Longer than any task may run, or slow honest members are given up on.
  int64_t exhausted_grace_ms = 120000;
  size_t max_aside_votes = 1024;  // votes kept from operators not (yet) in the committee
  bool report_evidence = true;    // decide slashing evidence (a node that sends none: false)
};

// What the task's record says about its round: the plan made at announcement, and what
// happened before a restart.
struct RoundRecord {
  Hash256 task_id{};
  uint64_t reference_block = 0;
  Hash256 seed_block_hash{};  // of SeedBlock(reference_block, R): it seeds the committee order
  uint32_t replicas = 0;
  uint32_t quorum = 0;
  std::vector<Address20> committee;  // empty: the first `replicas` operators of the order
  bool executed = false;             // this node holds its own result
  // Adopted after its acceptance window (its seed block was already mined): this node only
  // follows the round, never executes or signs, so a committee known in advance gains nothing
  // from it (docs/SECURITY.md, hole 3).
  bool observer_only = false;
  bool finalized = false;  // a certificate is stored
};

// ---- Decisions, in the order the node must carry them out.

// A vote was verified and counted (by the committee, the dispute round, or kept aside for a
// member not yet in the committee); the node stores it with the task.
struct VoteCounted {
  SignedAttestation vote;
  Address20 signer{};
};
// A vote with a bad signature, or for another task or reference block.
struct VoteRefused {};
// The committee reached its quorum: the task's result certificate.
struct Certified {
  Certificate certificate;
  size_t committee_size = 0;
};
// A signer of the certificate equivocated: the same result is now certified by signers that
// did not (its signature would back nothing once it is slashed). Replaces the stored one.
struct CertificateRefreshed {
  Certificate certificate;
  size_t committee_size = 0;
};
// Committee members signed different results: a dispute round over `members` (the first
// operators of the order, with the contract's stake threshold).
struct DisputeStarted {
  std::vector<Address20> members;
};
struct DisputeNotStarted {
  Status error;
};
// The dispute round reached the stake threshold.
struct DisputeCertified {
  Certificate certificate;
  size_t committee_size = 0;
  // It disagrees with the committee's certificate, or there was none: it replaces it, and the
  // result must be stored again.
  bool supersedes = false;
  // The task had no certificate before this one.
  bool first_certificate = false;
};
// Silent members were replaced at the deadline: the committee is now `members` (a prefix of
// the order).
struct CommitteeExtended {
  std::vector<Address20> members;
  size_t silent = 0;
  size_t added = 0;
  bool self_joined = false;  // this node is a member now
};
// This node must execute the task (it joined the committee or the dispute round without a
// result of its own).
struct ExecuteHere {};
// Send this evidence to the contract.
struct SendEvidence {
  SlashDecision slash;
};
// The committee order ran out (every operator is in the committee) and no quorum came within
// RoundRules::exhausted_grace_ms without a new vote: the round is closed and the task fails,
// instead of waiting forever.
struct RoundFailed {
  std::string reason;
};

using RoundDecision =
    std::variant<VoteCounted, VoteRefused, Certified, CertificateRefreshed, DisputeStarted, DisputeNotStarted,
                 DisputeCertified, CommitteeExtended, ExecuteHere, SendEvidence, RoundFailed>;
using RoundDecisions = std::vector<RoundDecision>;

class TaskRound {
 public:
  // The committee order is drawn over the whole operator set at the reference block
  // (consensus/committee.h). `now_ms` starts the member deadline.
  static StatusOr<TaskRound> Open(const RoundRules& rules, std::shared_ptr<const OperatorSet> operators,
                                  const RoundRecord& record, int64_t now_ms);

  // A signed vote from gossip, the store, or this node itself.
  void AddVote(const SignedAttestation& vote, RoundDecisions* out);
  // The round was marked disputed before a restart: reopen the dispute round.
  void ResumeDispute(RoundDecisions* out);
  // Time passes: replaces silent members when the member deadline has passed, and closes the
  // round as failed when the order is exhausted and votes stopped coming.
  void OnTimer(int64_t now_ms, RoundDecisions* out);
  // This node has its own result now.
  void MarkExecuted() { executed_ = true; }

  const Hash256& task_id() const { return record_.task_id; }
  uint64_t reference_block() const { return record_.reference_block; }
  uint32_t replicas() const { return record_.replicas; }
  uint32_t quorum() const { return record_.quorum; }
  bool member() const { return member_; }
  bool executed() const { return executed_; }
  bool finalized() const { return finalized_; }
  bool disputed() const { return dispute_.has_value(); }
  const QuorumTracker& committee() const { return *tracker_; }
  const std::vector<Address20>& order() const { return order_; }

 private:
  TaskRound() = default;
  void StartDispute(RoundDecisions* out);
  void DecideEvidence(RoundDecisions* out);

  RoundRules rules_;
  RoundRecord record_;
  std::shared_ptr<const OperatorSet> operators_;
  std::vector<Address20> order_;  // the committee order over the whole operator set
  std::optional<QuorumTracker> tracker_;
  std::optional<QuorumTracker> dispute_;
  std::vector<SignedAttestation> aside_;      // signers outside the committee so far
  std::vector<SignedAttestation> all_votes_;  // every counted vote, for evidence
  std::set<Address20> voters_;
  std::set<Address20> reported_;  // operators already accused
  bool member_ = false;
  bool executed_ = false;
  bool finalized_ = false;
  bool dispute_finalized_ = false;
  int64_t last_replacement_ms_ = 0;
  // Once the order is exhausted: when the last counted vote was seen by a timer, and how many.
  bool failed_ = false;
  int64_t exhausted_progress_ms_ = -1;
  size_t exhausted_votes_ = 0;
};

}  // namespace consensor::consensus
