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
//
// Commit-reveal (consensus/commitment.h): votes from gossip are reveals. A reveal counts only
// when its signer's commitment was admitted, that is, seen by this node while the commit window
// of its phase was open. The window closes once the admitted commitments could certify
// (QuorumTracker::ReachedBy: the committee's quorum, or the dispute round's stake threshold);
// then this node reveals its own vote if it committed one. A reveal carries the commitments its
// sender admitted, so every node closes the window on the same commitments as the first
// revealer. Once the committee's window is closed the committee no longer grows (a newcomer
// could only copy), and if no certificate comes and no vote counts for exhausted_grace_ms (an
// admitted member withheld its reveal) the round fails. A member whose result differs from
// every revealed one cannot have copied it: its late vote opens the dispute round.
//
// An admitted committer that equivocates counts toward nothing. When the other admitted
// commitments then could no longer certify (or the certificate made with it can no longer be
// rebuilt without it), the committee's window reopens: the members' commitments that came after
// it closed are admitted, as are later ones, and their reveals count. Copying pays there only
// after a slashable equivocation (docs/SECURITY.md, "equivocator inside a certificate").
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/commitment.h"
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
  // Once the commitments could certify, the committee's window stays open this long for the
  // other members (it closes at once when all committed): a spare commitment keeps one
  // withholding or equivocating member from blocking the certificate.
  int64_t commit_grace_ms = 500;
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
// A commitment was admitted (seen while its window was open); the node stores it with the task.
struct CommitmentAdmitted {
  SignedCommitment commitment;
  Address20 signer{};
};
// A commitment with a bad signature, for another task, or from an operator outside the order.
struct CommitmentRefused {
  std::string reason;
};
// The commit window of `phase` closed at this node; the node stores that with the task.
struct WindowClosed {
  VotePhase phase = VotePhase::kCommittee;
};
// An admitted committer equivocated and the rest could not certify: the committee's window
// admits the members' late commitments again (the node logs it; a restart decides it again from
// the stored votes).
struct WindowReopened {
  Address20 equivocator{};
  size_t late_admitted = 0;  // commitments that came after the close, admitted now
};
// This node committed a vote for `phase` and the window closed: gossip the vote now, with the
// commitments that closed the window.
struct RevealDue {
  VotePhase phase = VotePhase::kCommittee;
  std::vector<SignedCommitment> bundle;
};
// A well-signed reveal that does not count: no admitted commitment (a copy made after results
// were public), a commitment for something else, or sent before its window closed.
struct RevealNotCounted {
  Address20 signer{};
  std::string reason;
};
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
                 DisputeCertified, CommitteeExtended, ExecuteHere, SendEvidence, RoundFailed, CommitmentAdmitted,
                 CommitmentRefused, WindowClosed, RevealDue, RevealNotCounted, WindowReopened>;
using RoundDecisions = std::vector<RoundDecision>;

class TaskRound {
 public:
  // The committee order is drawn over the whole operator set at the reference block
  // (consensus/committee.h). `now_ms` starts the member deadline.
  static StatusOr<TaskRound> Open(const RoundRules& rules, std::shared_ptr<const OperatorSet> operators,
                                  const RoundRecord& record, int64_t now_ms);

  // The time a message arrives. Messages come between timer events: the commit grace must count
  // from when the quorum's commitments really were in, not from the last timer, or a node whose
  // timer lags closes its window early and reveals while its peers' windows are still open
  // (where a copier's commitment could then still be admitted). Never moves the clock back.
  void AdvanceClock(int64_t now_ms) { last_now_ms_ = std::max(last_now_ms_, now_ms); }
  // A commitment from gossip or this node itself.
  void AddCommitment(const SignedCommitment& commitment, RoundDecisions* out);
  // A revealed vote from gossip or this node itself, for `phase`, with the commitments its
  // sender had admitted (they are admitted here first if the window is still open).
  void AddReveal(const SignedAttestation& vote, VotePhase phase, const std::vector<SignedCommitment>& bundle,
                 RoundDecisions* out);
  // From the store after a restart: a commitment admitted before, the windows closed before
  // (bit i: phase i). Call before AddVote for the stored votes.
  void RestoreCommitment(const SignedCommitment& commitment);
  void RestoreClosedWindows(uint32_t mask, int64_t now_ms);
  // A vote whose commitment was already checked: a stored vote after a restart. (Unit tests
  // of the other rules feed votes here directly.)
  void AddVote(const SignedAttestation& vote, RoundDecisions* out);
  // The round was marked disputed before a restart: reopen the dispute round.
  void ResumeDispute(RoundDecisions* out);
  // Time passes: replaces silent members when the member deadline has passed, and closes the
  // round as failed when the order is exhausted and votes stopped coming.
  void OnTimer(int64_t now_ms, RoundDecisions* out);
  // The earliest time at which OnTimer may decide something no message brings: the end of the
  // commit grace, the dispute window's wait, the member deadline, the exhausted order's grace.
  // A node calls OnTimer then rather than at its next periodic timer, so a round waiting on a
  // deadline moves when the deadline passes. Nothing when the round is over.
  std::optional<int64_t> NextTimerMs() const;
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
  bool window_closed(VotePhase phase) const { return windows_[static_cast<size_t>(phase)].closed; }
  // The phase this node's next vote is for.
  VotePhase current_phase() const { return dispute_ ? VotePhase::kDispute : VotePhase::kCommittee; }

 private:
  struct CommitWindow {
    std::map<Address20, SignedCommitment> admitted;
    bool closed = false;
    int64_t closed_ms = -1;  // -1: closed before a restart, or by a vote and not yet by a timer
    bool self_committed = false;
    bool self_revealed = false;
    std::vector<SignedAttestation> premature;  // reveals that came before it closed, bounded
  };

  TaskRound() = default;
  // Admits `c` if its window is open; false when it is not admitted.
  bool Admit(const SignedCommitment& c, const Address20& signer, RoundDecisions* out);
  // Closes the window of `phase` once its admitted commitments could certify.
  // `by_reveal`: a reveal's bundle brought the commitments (the dispute window then closes
  // without waiting).
  void MaybeCloseWindow(VotePhase phase, RoundDecisions* out, bool by_reveal = false);
  // Reveals this node's own vote once its commitment is admitted and the window is closed.
  // `again`: also when it was due before (this node signed its vote again after a restart).
  void MaybeRevealOwn(VotePhase phase, RoundDecisions* out, bool again = false);
  // The signer of a vote for this task, or nothing when it is refused (decided here) or was
  // counted before.
  // `known_signer`: the signer already recovered from this vote's signature in this same event
  // (not recovered again).
  std::optional<Address20> CheckVote(const SignedAttestation& vote, RoundDecisions* out,
                                     const Address20* known_signer = nullptr) const;
  // Counts a vote whose commitment holds. `committee_phase` false: a dispute-round vote, which
  // never counts toward the committee's certificate (it was made after results were public).
  void CountVote(const SignedAttestation& vote, bool committee_phase, RoundDecisions* out,
                 const Address20* known_signer = nullptr);
  std::set<Address20> Committers(VotePhase phase) const;
  // The committee window's admitted committers, without those found equivocating.
  std::set<Address20> CommittersBesidesEquivocators() const;
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
  // A late member's vote that arrived before any vote counted here: judged once one does.
  struct LateReveal {
    SignedAttestation vote;
    Address20 signer{};
    bool new_root = false;  // its result differed from every one revealed before it
  };
  // True when `vote` is a second uncounted vote of `signer` for another result (evidence sent).
  bool NoteUncounted(const SignedAttestation& vote, const Address20& signer, RoundDecisions* out);
  // A late member's vote that disagrees with every counted and revealed result opens the
  // dispute and counts there: true. Otherwise it counts nowhere: false.
  bool JudgeLateReveal(const LateReveal& late, RoundDecisions* out);
  void JudgeParkedLateReveals(RoundDecisions* out);
  // Reopens the committee's window when an admitted committer equivocated and the others could
  // not certify without it.
  void MaybeReopenWindow(RoundDecisions* out);
  // A commitment admitted after the window reopened: its signer's uncounted reveal counts now.
  void CountRevealOfLateCommitment(const Address20& signer, RoundDecisions* out);

  std::vector<SignedAttestation> early_dispute_votes_;  // before this node started the dispute
  std::vector<LateReveal> late_reveals_;
  std::map<Address20, SignedAttestation> uncounted_;  // each signer's first uncounted vote, bounded
  std::vector<Equivocation> extra_equivocations_;     // found among uncounted votes
  std::set<Hash256> revealed_roots_;                  // every result root revealed here, bounded
  // Committee members' commitments that came after the committee's window closed (the first of
  // each): admitted if it reopens.
  std::map<Address20, SignedCommitment> late_commitments_;
  bool reopened_ = false;  // the committee's window admits members' commitments again
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
  std::array<CommitWindow, kVotePhases> windows_;
  int64_t last_now_ms_ = 0;                                      // the latest time a timer brought
  int64_t last_timer_ms_ = std::numeric_limits<int64_t>::min();  // the last OnTimer's time
  int64_t dispute_started_ms_ = 0;
  int64_t quorum_committed_ms_ = -1;  // when the committee's commitments first could certify
};

}  // namespace consensor::consensus
