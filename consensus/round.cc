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
  r.last_now_ms_ = now_ms;
  return r;
}

std::optional<Address20> TaskRound::CheckVote(const SignedAttestation& vote, RoundDecisions* out,
                                              const Address20* known_signer) const {
  StatusOr<Address20> signer = known_signer != nullptr
                                   ? StatusOr<Address20>(*known_signer)
                                   : RecoverAttestationSigner(rules_.domain, vote.attestation, vote.signature);
  if (!signer.ok() || vote.attestation.task_id != record_.task_id ||
      vote.attestation.reference_block != record_.reference_block) {
    out->push_back(VoteRefused{});
    return std::nullopt;
  }
  const bool seen = std::any_of(all_votes_.begin(), all_votes_.end(),
                                [&](const SignedAttestation& v) { return v.signature == vote.signature; });
  if (seen) return std::nullopt;
  return *signer;
}

void TaskRound::AddVote(const SignedAttestation& vote, RoundDecisions* out) { CountVote(vote, true, out); }

void TaskRound::CountVote(const SignedAttestation& vote, bool committee_phase, RoundDecisions* out,
                          const Address20* known_signer) {
  auto signer = CheckVote(vote, out, known_signer);
  if (!signer) return;
  bool counted = false;
  if (committee_phase) {
    auto outcome = tracker_->AddVerified(vote, *signer);
    if (outcome.ok()) {
      counted = *outcome != AddOutcome::kDuplicate;
    } else if (outcome.status().code() == StatusCode::kPermissionDenied) {
      // Not in the committee (yet): a replacement this node has not extended to, or a dispute vote.
      if (aside_.size() < rules_.max_aside_votes) aside_.push_back(vote);
      counted = true;
    }
  } else if (!dispute_) {
    // A dispute vote from a node that saw the conflict first: it counts once the dispute starts
    // here. (Never in the committee: it was committed after results were public.)
    if (early_dispute_votes_.size() < rules_.max_aside_votes) early_dispute_votes_.push_back(vote);
    return;
  }
  if (dispute_ && dispute_->AddVerified(vote, *signer).ok()) counted = true;
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
  if (committee_phase) {
    MaybeReopenWindow(out);
    JudgeParkedLateReveals(out);
  }
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
  dispute_started_ms_ = last_now_ms_;
  DisputeStarted started;
  for (const WeightedOperator& op : committee) started.members.push_back(op.address);
  out->push_back(std::move(started));
  for (const SignedAttestation& vote : all_votes_) (void)dispute_->Add(vote);
  if (!record_.observer_only && dispute_->is_member(rules_.self) && !executed_ && !member_) {
    member_ = true;
    out->push_back(ExecuteHere{});
  }
  MaybeCloseWindow(VotePhase::kDispute, out);
  std::vector<SignedAttestation> early = std::move(early_dispute_votes_);
  early_dispute_votes_.clear();
  for (const SignedAttestation& v : early) CountVote(v, false, out);
}

void TaskRound::DecideEvidence(RoundDecisions* out) {
  if (!rules_.report_evidence) return;
  const Certificate* dispute_certificate = dispute_ && dispute_->finalized() ? &*dispute_->certificate() : nullptr;
  std::vector<Equivocation> equivocations = tracker_->equivocations();
  equivocations.insert(equivocations.end(), extra_equivocations_.begin(), extra_equivocations_.end());
  for (SlashDecision& slash :
       ChooseSlashes(rules_.domain, equivocations, dispute_certificate, all_votes_, rules_.self, &reported_)) {
    out->push_back(SendEvidence{std::move(slash)});
  }
}

void TaskRound::OnTimer(int64_t now_ms, RoundDecisions* out) {
  last_now_ms_ = now_ms;
  last_timer_ms_ = now_ms;
  for (CommitWindow& w : windows_) {
    if (w.closed && w.closed_ms < 0) w.closed_ms = now_ms;
  }
  if (dispute_ && !dispute_finalized_) MaybeCloseWindow(VotePhase::kDispute, out);
  if (!finalized_) MaybeCloseWindow(VotePhase::kCommittee, out);
  if (finalized_ || failed_) return;
  const CommitWindow& committee_window = windows_[static_cast<size_t>(VotePhase::kCommittee)];
  if (committee_window.closed) {
    // Every admitted member reveals as soon as the window closes; a newcomer could only copy, so
    // the committee no longer grows. A conflict has its own end (the dispute round).
    // The deadline is the exhausted order's grace (longer than any task may run), counted from
    // the last counted vote: a node with a fast clock must not give up on a round that others
    // are still certifying.
    if (dispute_) return;
    if (exhausted_progress_ms_ < 0 || voters_.size() != exhausted_votes_) {
      exhausted_progress_ms_ = std::max(now_ms, committee_window.closed_ms);
      exhausted_votes_ = voters_.size();
      return;
    }
    if (now_ms - exhausted_progress_ms_ >= rules_.exhausted_grace_ms) {
      failed_ = true;
      out->push_back(RoundFailed{"the commit window closed with " + std::to_string(committee_window.admitted.size()) +
                                 " commitments, but their reveals brought no certificate (" +
                                 std::to_string(voters_.size()) + " counted votes): a member withheld its reveal"});
    }
    return;
  }
  std::set<Address20> active = voters_;  // members that committed or voted are not silent
  for (const auto& [address, c] : committee_window.admitted) active.insert(address);
  if (tracker_->committee_size() >= order_.size()) {
    // Nobody is left to replace anyone. A dispute round has its own end (the stake threshold);
    // otherwise the round waits while votes still come, then gives up.
    if (dispute_) return;
    if (exhausted_progress_ms_ < 0 || active.size() != exhausted_votes_) {
      exhausted_progress_ms_ = now_ms;
      exhausted_votes_ = active.size();
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
  const Replacement step = ReplaceSilentMembers(order_, tracker_->committee_size(), active);
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
  // The grown committee may now be certifiable by the commitments already admitted.
  MaybeCloseWindow(VotePhase::kCommittee, out);
}

std::optional<int64_t> TaskRound::NextTimerMs() const {
  if (failed_ || (finalized_ && (!dispute_ || dispute_finalized_))) return std::nullopt;
  // A deadline that a timer at or after it already saw without deciding (a window that a grown
  // committee keeps open, say) is not news: the periodic timer covers it, with no busy wake-up.
  // So do the exhausted grace's start and the stamping of a window's close, which only the
  // 120 s exhausted grace reads.
  std::optional<int64_t> next;
  auto consider = [this, &next](int64_t deadline_ms) {
    if (deadline_ms > last_timer_ms_) next = next ? std::min(*next, deadline_ms) : deadline_ms;
  };
  const CommitWindow& committee_window = windows_[static_cast<size_t>(VotePhase::kCommittee)];
  if (dispute_ && !dispute_finalized_ && !windows_[static_cast<size_t>(VotePhase::kDispute)].closed) {
    consider(dispute_started_ms_ + rules_.member_timeout_ms);
  }
  if (finalized_) return next;
  if (!committee_window.closed && quorum_committed_ms_ >= 0) consider(quorum_committed_ms_ + rules_.commit_grace_ms);
  const bool exhausted = tracker_->committee_size() >= order_.size();
  if (!committee_window.closed && !exhausted) consider(last_replacement_ms_ + rules_.member_timeout_ms);
  // A dispute round has its own end (the stake threshold), not the exhausted grace.
  if (!dispute_ && exhausted_progress_ms_ >= 0 && (committee_window.closed || exhausted)) {
    consider(exhausted_progress_ms_ + rules_.exhausted_grace_ms);
  }
  return next;
}

// ---- Commit-reveal.

std::set<Address20> TaskRound::Committers(VotePhase phase) const {
  std::set<Address20> committers;
  for (const auto& [address, c] : windows_[static_cast<size_t>(phase)].admitted) committers.insert(address);
  return committers;
}

std::set<Address20> TaskRound::CommittersBesidesEquivocators() const {
  std::set<Address20> committers = Committers(VotePhase::kCommittee);
  std::erase_if(committers, [this](const Address20& a) { return tracker_->equivocated(a); });
  return committers;
}

bool TaskRound::Admit(const SignedCommitment& c, const Address20& signer, RoundDecisions* out) {
  CommitWindow& w = windows_[static_cast<size_t>(c.phase)];
  // Only operators of the task's set: the maps stay bounded by the set's size.
  if (std::find(order_.begin(), order_.end(), signer) == order_.end()) return false;
  if (w.closed) {
    // A closed committee window admits nothing, unless an equivocator reopened it; a member's
    // late commitment is kept for that case.
    if (c.phase != VotePhase::kCommittee || !tracker_->is_member(signer)) return false;
    if (!reopened_) {
      late_commitments_.emplace(signer, c);
      return false;
    }
  }
  if (!w.admitted.emplace(signer, c).second) return false;  // a signer's first commitment holds
  if (signer == rules_.self && !record_.observer_only) w.self_committed = true;
  out->push_back(CommitmentAdmitted{c, signer});
  return true;
}

void TaskRound::MaybeReopenWindow(RoundDecisions* out) {
  const CommitWindow& w = windows_[static_cast<size_t>(VotePhase::kCommittee)];
  if (reopened_ || !w.closed || failed_ || dispute_ || (finalized_ && !tracker_->tainted())) return;
  auto equivocator = std::find_if(w.admitted.begin(), w.admitted.end(),
                                  [this](const auto& admitted) { return tracker_->equivocated(admitted.first); });
  if (equivocator == w.admitted.end() || tracker_->ReachedBy(CommittersBesidesEquivocators())) return;
  reopened_ = true;
  const size_t reopened_at = out->size();
  out->push_back(WindowReopened{equivocator->first, 0});
  std::map<Address20, SignedCommitment> late = std::move(late_commitments_);
  late_commitments_.clear();
  std::vector<Address20> admitted;
  for (const auto& [signer, c] : late) {
    if (Admit(c, signer, out)) admitted.push_back(signer);
  }
  std::get<WindowReopened>((*out)[reopened_at]).late_admitted = admitted.size();
  for (const Address20& signer : admitted) CountRevealOfLateCommitment(signer, out);
}

void TaskRound::CountRevealOfLateCommitment(const Address20& signer, RoundDecisions* out) {
  auto it = uncounted_.find(signer);
  if (it == uncounted_.end()) return;
  const CommitWindow& w = windows_[static_cast<size_t>(VotePhase::kCommittee)];
  auto commitment = w.admitted.find(signer);
  if (commitment == w.admitted.end() || commitment->second.commitment != VoteCommitment(it->second, signer)) return;
  const SignedAttestation vote = it->second;
  uncounted_.erase(it);
  late_reveals_.erase(std::remove_if(late_reveals_.begin(), late_reveals_.end(),
                                     [&](const LateReveal& l) { return l.vote.signature == vote.signature; }),
                      late_reveals_.end());
  CountVote(vote, /*committee_phase=*/true, out);
}

void TaskRound::AddCommitment(const SignedCommitment& c, RoundDecisions* out) {
  auto signer = RecoverCommitmentSigner(rules_.domain, c);
  if (!signer.ok() || c.task_id != record_.task_id || c.reference_block != record_.reference_block) {
    out->push_back(CommitmentRefused{"bad signature, or for another task or reference block"});
    return;
  }
  if (std::find(order_.begin(), order_.end(), *signer) == order_.end()) {
    out->push_back(CommitmentRefused{"the signer is not an operator of the task's set"});
    return;
  }
  if (Admit(c, *signer, out)) {
    MaybeCloseWindow(c.phase, out);
    if (reopened_ && c.phase == VotePhase::kCommittee) {
      MaybeRevealOwn(c.phase, out);  // this node's own, admitted now: its vote is due
      CountRevealOfLateCommitment(*signer, out);
    }
  } else if (*signer == rules_.self && !record_.observer_only) {
    CommitWindow& w = windows_[static_cast<size_t>(c.phase)];
    if (w.self_committed) {
      // This node signed again (after a restart): its vote is due again if the window closed.
      MaybeRevealOwn(c.phase, out, /*again=*/true);
    } else if (w.closed) {
      // It committed too late. Its vote is still revealed: it counts nowhere if it agrees with
      // a revealed result, and opens the dispute if it disagrees with all of them.
      RevealDue due;
      due.phase = c.phase;
      out->push_back(std::move(due));
    }
  }
}

void TaskRound::MaybeCloseWindow(VotePhase phase, RoundDecisions* out, bool by_reveal) {
  CommitWindow& w = windows_[static_cast<size_t>(phase)];
  if (w.closed || failed_) return;
  bool reached = false;
  if (phase == VotePhase::kCommittee) {
    // An equivocator known already backs nothing: the window waits for others in its place.
    const std::set<Address20> committers = CommittersBesidesEquivocators();
    if (!tracker_->ReachedBy(committers)) return;
    if (quorum_committed_ms_ < 0) quorum_committed_ms_ = last_now_ms_;
    // Close at once when the whole committee committed or a revealer's bundle says its window
    // closed; otherwise give the others the grace (a timer closes it).
    bool everyone = true;
    for (size_t i = 0; i < tracker_->committee_size(); ++i) everyone = everyone && committers.count(order_[i]) != 0;
    reached = everyone || by_reveal || last_now_ms_ - quorum_committed_ms_ >= rules_.commit_grace_ms;
  } else if (dispute_) {
    // Votes of the committee round were committed before any result was public: they back the
    // dispute round as they are. A liar's stake is among them, so the window does not close on
    // the threshold alone: it waits a member timeout (or for the whole set), giving honest
    // members the time to execute that the committee round gives them. A reveal closes it
    // sooner only with a bundle of commitments that reaches the threshold.
    std::set<Address20> backers = Committers(phase);
    backers.insert(voters_.begin(), voters_.end());
    bool everyone = true;
    for (const Address20& a : order_) everyone = everyone && backers.count(a) != 0;
    const bool waited = last_now_ms_ - dispute_started_ms_ >= rules_.member_timeout_ms;
    reached = dispute_->ReachedBy(backers) && (by_reveal || everyone || waited);
  }
  if (!reached) return;
  w.closed = true;
  w.closed_ms = -1;  // the deadline counts from the next timer
  out->push_back(WindowClosed{phase});
  MaybeRevealOwn(phase, out);
  std::vector<SignedAttestation> premature = std::move(w.premature);
  w.premature.clear();
  for (const SignedAttestation& v : premature) AddReveal(v, phase, {}, out);
}

void TaskRound::MaybeRevealOwn(VotePhase phase, RoundDecisions* out, bool again) {
  CommitWindow& w = windows_[static_cast<size_t>(phase)];
  if (!w.closed || !w.self_committed || (w.self_revealed && !again)) return;
  w.self_revealed = true;
  RevealDue due;
  due.phase = phase;
  for (const auto& [address, c] : w.admitted) due.bundle.push_back(c);
  out->push_back(std::move(due));
}

void TaskRound::AddReveal(const SignedAttestation& vote, VotePhase phase, const std::vector<SignedCommitment>& bundle,
                          RoundDecisions* out) {
  auto signer = CheckVote(vote, out);
  if (!signer) return;
  CommitWindow& w = windows_[static_cast<size_t>(phase)];
  if (!w.closed) {
    // The commitments the revealer had admitted. Its own is not taken from its bundle: a copier
    // would list the commitment it made after seeing a result. An honest revealer's own
    // commitment reached us before its reveal, on the same link.
    for (const SignedCommitment& c : bundle) {
      if (c.phase != phase || c.task_id != record_.task_id || c.reference_block != record_.reference_block) continue;
      // Admitted already (the same signed commitment reached us on its own): nothing to recover.
      if (std::any_of(w.admitted.begin(), w.admitted.end(), [&](const auto& admitted) {
            return admitted.second.signature == c.signature && admitted.second.commitment == c.commitment;
          })) {
        continue;
      }
      auto committer = RecoverCommitmentSigner(rules_.domain, c);
      if (!committer.ok() || *committer == *signer) continue;
      Admit(c, *committer, out);
    }
    MaybeCloseWindow(phase, out, /*by_reveal=*/true);
  }
  if (!w.closed) {
    // Too early here, but maybe not at its sender: a node catching up pulls messages in any
    // order. It is judged when the window closes, by the same rule (its commitment must have
    // been admitted by then).
    if (w.premature.size() < rules_.max_aside_votes) w.premature.push_back(vote);
    out->push_back(RevealNotCounted{*signer, "revealed before its commit window closed (kept until it closes)"});
    return;
  }
  const bool new_root = revealed_roots_.count(vote.attestation.result_root) == 0;
  if (new_root && revealed_roots_.size() < rules_.max_aside_votes) revealed_roots_.insert(vote.attestation.result_root);
  auto it = w.admitted.find(*signer);
  if (it == w.admitted.end() || it->second.commitment != VoteCommitment(vote, *signer)) {
    // A signer whose counted vote says something else equivocated: keep it as evidence.
    if (voters_.count(*signer) != 0) {
      CountVote(vote, phase == VotePhase::kCommittee, out, &*signer);
      return;
    }
    // A dispute vote whose commitment this node did not admit before its window closed still
    // counts. In the dispute round every result is public already (the votes that conflicted),
    // so a commitment hides nothing and a late one is no sign of copying; refusing it only lets
    // nodes that closed on different commitments (a reveal relayed ahead of its sender's
    // commitment) end with different signers, and one of them below the threshold for good.
    if (phase == VotePhase::kDispute && it == w.admitted.end() && dispute_ && dispute_->is_member(*signer)) {
      CountVote(vote, /*committee_phase=*/false, out, &*signer);
      return;
    }
    // Two uncounted votes for different results are equivocation all the same; such a signer's
    // votes never start a dispute.
    if (NoteUncounted(vote, *signer, out)) return;
    // A member that committed late and disagrees with every result revealed so far: it cannot
    // have copied its result, and a certified result must stay open to challenge (a colluding
    // quorum can close the window before honest members commit). Its vote opens the dispute
    // round and counts there, never toward the committee's certificate. Until a vote counts
    // here there is nothing to disagree with: it waits.
    if (phase == VotePhase::kCommittee && it == w.admitted.end() && tracker_->is_member(*signer)) {
      if (all_votes_.empty()) {
        if (late_reveals_.size() < rules_.max_aside_votes) late_reveals_.push_back({vote, *signer, new_root});
        return;
      }
      if (JudgeLateReveal({vote, *signer, new_root}, out)) return;
    }
    out->push_back(RevealNotCounted{*signer, it == w.admitted.end()
                                                 ? "no commitment of it was seen before the commit window closed"
                                                 : "it does not match its signer's commitment"});
    return;
  }
  CountVote(vote, phase == VotePhase::kCommittee, out, &*signer);
  // Its other result came first and was set aside: now that this one counts, that one is
  // equivocation. The tracker must see it, or the certificate keeps a signature that backs
  // nothing once another node has it slashed.
  if (auto other = uncounted_.find(*signer);
      other != uncounted_.end() && other->second.attestation.result_root != vote.attestation.result_root) {
    const SignedAttestation conflicting = other->second;
    uncounted_.erase(other);
    CountVote(conflicting, phase == VotePhase::kCommittee, out);
  }
}

bool TaskRound::NoteUncounted(const SignedAttestation& vote, const Address20& signer, RoundDecisions* out) {
  auto it = uncounted_.find(signer);
  if (it == uncounted_.end()) {
    if (uncounted_.size() < rules_.max_aside_votes) uncounted_.emplace(signer, vote);
    return false;
  }
  if (it->second.attestation.result_root == vote.attestation.result_root) return false;
  extra_equivocations_.push_back(Equivocation{signer, it->second, vote});
  DecideEvidence(out);
  return true;
}

bool TaskRound::JudgeLateReveal(const LateReveal& late, RoundDecisions* out) {
  const Hash256& root = late.vote.attestation.result_root;
  const bool agrees = std::any_of(all_votes_.begin(), all_votes_.end(),
                                  [&](const SignedAttestation& v) { return v.attestation.result_root == root; });
  if (agrees || !late.new_root) return false;
  if (!dispute_) StartDispute(out);
  CountVote(late.vote, false, out);
  return true;
}

void TaskRound::JudgeParkedLateReveals(RoundDecisions* out) {
  if (late_reveals_.empty() || all_votes_.empty()) return;
  std::vector<LateReveal> parked = std::move(late_reveals_);
  late_reveals_.clear();
  for (const LateReveal& late : parked) {
    if (!JudgeLateReveal(late, out)) {
      out->push_back(RevealNotCounted{late.signer, "no commitment of it was seen before the commit window closed"});
    }
  }
}

void TaskRound::RestoreCommitment(const SignedCommitment& c) {
  auto signer = RecoverCommitmentSigner(rules_.domain, c);
  if (!signer.ok() || c.task_id != record_.task_id) return;
  CommitWindow& w = windows_[static_cast<size_t>(c.phase)];
  if (!w.admitted.emplace(*signer, c).second) return;
  if (*signer == rules_.self && !record_.observer_only) w.self_committed = true;
}

void TaskRound::RestoreClosedWindows(uint32_t mask, int64_t now_ms) {
  for (size_t p = 0; p < kVotePhases; ++p) {
    if ((mask & (1u << p)) == 0) continue;
    windows_[p].closed = true;
    windows_[p].closed_ms = now_ms;
  }
}

}  // namespace consensor::consensus
