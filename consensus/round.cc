#include "consensus/round.h"

#include <algorithm>

#include "consensus/committee.h"
#include "consensus/membership.h"
#include "consensus/replication.h"

namespace consensor::consensus {

StatusOr<TaskRound> TaskRound::Open(const RoundRules& rules, std::shared_ptr<const OperatorSet> operators,
                                    const RoundRecord& record, int64_t now_ms) {
  if (operators == nullptr) return InvalidArgument("no operator set");
  TaskRound r;
  r.rules_ = rules;
  r.record_ = record;
  r.operators_ = std::move(operators);
  ASSIGN_OR_RETURN(r.order_, CommitteeOrder(record.task_id, record.reference_block, record.seed_block_hash,
                                            r.operators_->operators, r.operators_->operators.size()));
  std::vector<Address20> committee = record.committee;
  if (committee.empty()) {
    committee.assign(r.order_.begin(), r.order_.begin() + std::min<size_t>(record.replicas, r.order_.size()));
  }
  // A committee restored after extensions keeps its task's replicas and quorum: the tracker
  // scales the quorum with the committee.
  ASSIGN_OR_RETURN(auto tracker,
                   QuorumTracker::Create(rules.domain, record.task_id, record.reference_block, committee, record.quorum,
                                         std::min<size_t>(record.replicas, committee.size())));
  r.tracker_ = std::move(tracker);
  r.member_ = !record.observer_only && r.tracker_->is_member(rules.self);
  r.executed_ = record.executed;
  r.finalized_ = record.finalized;
  r.last_replacement_ms_ = now_ms;
  return r;
}

void TaskRound::AddVote(const SignedAttestation& vote, RoundDecisions* out) {
  auto signer = RecoverAttestationSigner(rules_.domain, vote.attestation, vote.signature);
  if (!signer.ok() || vote.attestation.task_id != record_.task_id ||
      vote.attestation.reference_block != record_.reference_block) {
    out->push_back(VoteRefused{});
    return;
  }
  const bool seen = std::any_of(all_votes_.begin(), all_votes_.end(),
                                [&](const SignedAttestation& v) { return v.signature == vote.signature; });
  if (seen) return;
  bool counted = false;
  auto outcome = tracker_->Add(vote);
  if (outcome.ok()) {
    counted = *outcome != AddOutcome::kDuplicate;
  } else if (outcome.status().code() == StatusCode::kPermissionDenied) {
    // Not in the committee (yet): a replacement this node has not extended to, or a dispute vote.
    if (aside_.size() < rules_.max_aside_votes) aside_.push_back(vote);
    counted = true;
  }
  if (dispute_ && dispute_->Add(vote).ok()) counted = true;
  if (!counted) return;
  all_votes_.push_back(vote);
  voters_.insert(*signer);
  out->push_back(VoteCounted{vote, *signer});

  if (!finalized_ && tracker_->finalized()) {
    finalized_ = true;
    out->push_back(Certified{*tracker_->certificate(), tracker_->certified_committee_size()});
  } else if (tracker_->RefreshCertificate()) {
    out->push_back(CertificateRefreshed{*tracker_->certificate(), tracker_->certified_committee_size()});
  }
  if (tracker_->conflicting() && !dispute_) StartDispute(out);
  if (dispute_ && dispute_->finalized() && !dispute_finalized_) {
    dispute_finalized_ = true;
    DisputeCertified certified;
    certified.certificate = *dispute_->certificate();
    certified.committee_size = dispute_->committee_size();
    // The dispute certificate carries the contract's stake threshold: it supersedes a committee
    // certificate that disagrees with it.
    certified.supersedes = !tracker_->finalized() || tracker_->certificate()->attestation.result_root !=
                                                         certified.certificate.attestation.result_root;
    certified.first_certificate = !finalized_;
    finalized_ = true;
    out->push_back(std::move(certified));
  }
  DecideEvidence(out);
}

void TaskRound::ResumeDispute(RoundDecisions* out) {
  if (!dispute_) StartDispute(out);
}

void TaskRound::StartDispute(RoundDecisions* out) {
  // The dispute committee is the whole operator set: the contract's threshold is a share of all
  // stake, so a smaller committee could not reach it on a larger network (issue 16, hole 2).
  if (operators_->operators.size() > rules_.max_dispute_committee) {
    out->push_back(DisputeNotStarted{
        FailedPrecondition("the operator set of " + std::to_string(operators_->operators.size()) +
                           " exceeds the dispute committee bound of " + std::to_string(rules_.max_dispute_committee) +
                           ": a dispute certificate over fewer operators could not carry the stake threshold")});
    return;
  }
  std::vector<WeightedOperator> committee = DisputeCommittee(order_, *operators_, order_.size());
  auto tracker = QuorumTracker::CreateWeighted(rules_.domain, record_.task_id, record_.reference_block, committee,
                                               operators_->total_stake, rules_.dispute_threshold_bps);
  if (!tracker.ok()) {
    out->push_back(DisputeNotStarted{tracker.status()});
    return;
  }
  dispute_ = std::move(tracker).value();
  DisputeStarted started;
  for (const WeightedOperator& op : committee) started.members.push_back(op.address);
  out->push_back(std::move(started));
  for (const SignedAttestation& vote : all_votes_) (void)dispute_->Add(vote);
  if (!record_.observer_only && dispute_->is_member(rules_.self) && !executed_ && !member_) {
    member_ = true;
    out->push_back(ExecuteHere{});
  }
}

void TaskRound::DecideEvidence(RoundDecisions* out) {
  if (!rules_.report_evidence) return;
  const Certificate* dispute_certificate = dispute_ && dispute_->finalized() ? &*dispute_->certificate() : nullptr;
  for (SlashDecision& slash : ChooseSlashes(rules_.domain, tracker_->equivocations(), dispute_certificate, all_votes_,
                                            rules_.self, &reported_)) {
    out->push_back(SendEvidence{std::move(slash)});
  }
}

void TaskRound::OnTimer(int64_t now_ms, RoundDecisions* out) {
  if (finalized_ || failed_) return;
  if (tracker_->committee_size() >= order_.size()) {
    // Nobody is left to replace anyone. A dispute round has its own end (the stake threshold);
    // otherwise the round waits while votes still come, then gives up.
    if (dispute_) return;
    if (exhausted_progress_ms_ < 0 || voters_.size() != exhausted_votes_) {
      exhausted_progress_ms_ = now_ms;
      exhausted_votes_ = voters_.size();
      return;
    }
    if (now_ms - exhausted_progress_ms_ >= rules_.exhausted_grace_ms) {
      failed_ = true;
      out->push_back(RoundFailed{"the committee order is exhausted (all " + std::to_string(order_.size()) +
                                 " operators) and no quorum of " + std::to_string(tracker_->quorum()) +
                                 " matching signatures came"});
    }
    return;
  }
  if (!ReplacementDue(now_ms, last_replacement_ms_, rules_.member_timeout_ms)) return;
  last_replacement_ms_ = now_ms;
  const Replacement step = ReplaceSilentMembers(order_, tracker_->committee_size(), voters_);
  if (step.silent == 0) return;
  const size_t old_size = tracker_->committee_size();
  std::vector<Address20> added(order_.begin() + static_cast<std::ptrdiff_t>(old_size),
                               order_.begin() + static_cast<std::ptrdiff_t>(step.new_size));
  // The quorum grows with the committee (the tracker scales it): its fraction never drops.
  tracker_->ExtendCommittee(added).IgnoreError();  // count mode: cannot fail
  CommitteeExtended extended;
  extended.members.assign(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(step.new_size));
  extended.silent = step.silent;
  extended.added = added.size();
  extended.self_joined = !record_.observer_only && !member_ && tracker_->is_member(rules_.self);
  out->push_back(extended);
  if (extended.self_joined) {
    member_ = true;
    if (!executed_) out->push_back(ExecuteHere{});
  }
  // Votes kept aside may count now.
  std::vector<SignedAttestation> aside = std::move(aside_);
  aside_.clear();
  for (const SignedAttestation& v : aside) {
    all_votes_.erase(std::remove_if(all_votes_.begin(), all_votes_.end(),
                                    [&](const SignedAttestation& x) { return x.signature == v.signature; }),
                     all_votes_.end());
    if (auto signer = RecoverAttestationSigner(rules_.domain, v.attestation, v.signature); signer.ok()) {
      voters_.erase(*signer);
    }
    AddVote(v, out);
  }
}

}  // namespace consensor::consensus
