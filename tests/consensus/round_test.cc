// A task's round driven by hand-made votes and times: the decisions the node carries out.
#include "consensus/round.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/consensus/operators_fixture.h"

namespace consensor::consensus {
namespace {

using fixture::Addr;
using fixture::Domain;
using fixture::H;
using fixture::Key;

constexpr uint64_t kRef = 500;
constexpr int kOperators = 6;
constexpr int64_t kStart = 1000;
constexpr int64_t kTimeout = 20000;

// One line per decision, with what identifies it: what a replay must reproduce exactly.
std::string Describe(const RoundDecision& d) {
  std::ostringstream out;
  auto signer_name = [](const Address20& a) { return "op" + std::to_string(fixture::OperatorNumber(a, 9)); };
  if (auto* v = std::get_if<VoteCounted>(&d)) {
    out << "counted " << signer_name(v->signer) << " r" << int(v->vote.attestation.result_root[31]);
  } else if (std::holds_alternative<VoteRefused>(d)) {
    out << "refused";
  } else if (auto* c = std::get_if<Certified>(&d)) {
    out << "certified r" << int(c->certificate.attestation.result_root[31]) << " by";
    for (const auto& s : c->certificate.signers) out << " " << signer_name(s);
    out << " committee " << c->committee_size;
  } else if (auto* s = std::get_if<DisputeStarted>(&d)) {
    out << "dispute over " << s->members.size();
  } else if (auto* n = std::get_if<DisputeNotStarted>(&d)) {
    out << "no dispute: " << n->error.message();
  } else if (auto* dc = std::get_if<DisputeCertified>(&d)) {
    out << "dispute certified r" << int(dc->certificate.attestation.result_root[31])
        << (dc->supersedes ? " supersedes" : "") << (dc->first_certificate ? " first" : "");
  } else if (auto* e = std::get_if<CommitteeExtended>(&d)) {
    out << "extended to " << e->members.size() << " silent " << e->silent << " added " << e->added
        << (e->self_joined ? " self joined" : "");
  } else if (std::holds_alternative<ExecuteHere>(d)) {
    out << "execute here";
  } else if (auto* rc = std::get_if<CertificateRefreshed>(&d)) {
    out << "certificate refreshed r" << int(rc->certificate.attestation.result_root[31]) << " by";
    for (const auto& s : rc->certificate.signers) out << " " << signer_name(s);
  } else if (auto* f = std::get_if<RoundFailed>(&d)) {
    out << "failed: " << f->reason;
  } else if (auto* ca = std::get_if<CommitmentAdmitted>(&d)) {
    out << "admitted " << signer_name(ca->signer) << (ca->commitment.phase == VotePhase::kDispute ? " dispute" : "");
  } else if (auto* cr = std::get_if<CommitmentRefused>(&d)) {
    out << "commitment refused: " << cr->reason;
  } else if (auto* wc = std::get_if<WindowClosed>(&d)) {
    out << "window closed" << (wc->phase == VotePhase::kDispute ? " dispute" : "");
  } else if (auto* wr = std::get_if<WindowReopened>(&d)) {
    out << "window reopened " << signer_name(wr->equivocator) << " late " << wr->late_admitted;
  } else if (auto* rd = std::get_if<RevealDue>(&d)) {
    out << "reveal" << (rd->phase == VotePhase::kDispute ? " dispute" : "") << " with " << rd->bundle.size();
  } else if (auto* nc = std::get_if<RevealNotCounted>(&d)) {
    out << "not counted " << signer_name(nc->signer) << ": " << nc->reason;
  } else if (auto* ev = std::get_if<SendEvidence>(&d)) {
    out << (ev->slash.kind == SlashDecision::Kind::kEquivocation ? "slash equivocation " : "slash dispute ")
        << signer_name(ev->slash.accused);
  }
  return out.str();
}

std::vector<std::string> Describe(const RoundDecisions& decisions) {
  std::vector<std::string> lines;
  for (const auto& d : decisions) lines.push_back(Describe(d));
  return lines;
}

class RoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    operators_ = std::make_shared<OperatorSet>(OperatorSet::FromRegistry(kRef, fixture::Registry(kOperators)));
  }

  // Opens the round with this node at `self_position` of the committee order.
  TaskRound Open(size_t self_position, RoundRecord record = {}) {
    record.task_id = H(7);
    record.reference_block = kRef;
    if (record.replicas == 0) record.replicas = 3;
    if (record.quorum == 0) record.quorum = 2;
    // The order does not depend on who this node is: find it with a throwaway round first.
    rules_.self = Address20{};
    auto probe = TaskRound::Open(rules_, operators_, record, kStart);
    EXPECT_TRUE(probe.ok()) << probe.status().ToString();
    order_ = probe->order();
    rules_.self = order_.at(self_position);
    auto round = TaskRound::Open(rules_, operators_, record, kStart);
    EXPECT_TRUE(round.ok()) << round.status().ToString();
    return std::move(round).value();
  }
  // Operator number of order position `position`.
  int At(size_t position) const { return fixture::OperatorNumber(order_.at(position), kOperators); }
  SignedAttestation VoteAt(size_t position, uint8_t result) const {
    return fixture::Vote(At(position), H(7), kRef, result);
  }
  std::vector<std::string> Add(TaskRound& round, const SignedAttestation& vote) {
    RoundDecisions d;
    round.AddVote(vote, &d);
    return Describe(d);
  }
  std::vector<std::string> Tick(TaskRound& round, int64_t now) {
    RoundDecisions d;
    round.OnTimer(now, &d);
    return Describe(d);
  }
  std::string Op(size_t position) const { return "op" + std::to_string(At(position)); }
  // "by opA opB" for the signers at these positions, in the certificate's ascending order.
  std::string By(std::vector<size_t> positions) const {
    std::sort(positions.begin(), positions.end(), [&](size_t a, size_t b) { return order_[a] < order_[b]; });
    std::string s = "by";
    for (size_t p : positions) s += " " + Op(p);
    return s;
  }

  RoundRules rules_{Domain(),
                    Address20{},
                    /*dispute_threshold_bps=*/6000,
                    /*max_dispute_committee=*/64,
                    kTimeout,
                    /*exhausted_grace_ms=*/3 * kTimeout,
                    /*max_aside_votes=*/1024,
                    /*report_evidence=*/true};
  std::shared_ptr<const OperatorSet> operators_;
  std::vector<Address20> order_;
};

TEST_F(RoundTest, QuorumCertifiesOnce) {
  TaskRound round = Open(/*self_position=*/5);  // an observer
  EXPECT_FALSE(round.member());
  EXPECT_EQ(round.committee().committee_size(), 3u);
  EXPECT_EQ(Add(round, VoteAt(0, 1)), std::vector<std::string>{"counted " + Op(0) + " r1"});
  EXPECT_EQ(Add(round, VoteAt(1, 1)),
            (std::vector<std::string>{"counted " + Op(1) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
  EXPECT_TRUE(round.finalized());
  EXPECT_EQ(Add(round, VoteAt(2, 1)), std::vector<std::string>{"counted " + Op(2) + " r1"});
  // The same vote again changes nothing and says nothing.
  EXPECT_TRUE(Add(round, VoteAt(2, 1)).empty());
}

TEST_F(RoundTest, ForeignVotesAreRefused) {
  TaskRound round = Open(5);
  EXPECT_EQ(Add(round, fixture::Vote(At(0), H(8), kRef, 1)), std::vector<std::string>{"refused"});  // another task
  EXPECT_EQ(Add(round, fixture::Vote(At(0), H(7), kRef + 1, 1)), std::vector<std::string>{"refused"});
  SignedAttestation broken = VoteAt(0, 1);
  broken.signature[64] = 0;
  EXPECT_EQ(Add(round, broken), std::vector<std::string>{"refused"});
  EXPECT_FALSE(round.finalized());
}

TEST_F(RoundTest, HonestDisputeConvictsTheWrongSigner) {
  TaskRound round = Open(5);
  Add(round, VoteAt(0, 1));
  // A member signs another result: the dispute round covers all six, and this node (outside the
  // committee, without a result) must execute.
  EXPECT_EQ(Add(round, VoteAt(1, 9)),
            (std::vector<std::string>{"counted " + Op(1) + " r9", "dispute over 6", "execute here"}));
  EXPECT_TRUE(round.disputed());
  EXPECT_EQ(Add(round, VoteAt(2, 1)),
            (std::vector<std::string>{"counted " + Op(2) + " r1", "certified r1 " + By({0, 2}) + " committee 3"}));
  EXPECT_EQ(Add(round, VoteAt(3, 1)), std::vector<std::string>{"counted " + Op(3) + " r1"});  // 3 of 6: 50%
  // 4 of 6 equal stakes is 66.7% >= 60%: the dispute certificate agrees with the committee's.
  EXPECT_EQ(Add(round, VoteAt(4, 1)),
            (std::vector<std::string>{"counted " + Op(4) + " r1", "dispute certified r1", "slash dispute " + Op(1)}));
}

TEST_F(RoundTest, DisputeSupersedesAColludingCommittee) {
  TaskRound round = Open(5);
  Add(round, VoteAt(0, 9));
  EXPECT_EQ(Add(round, VoteAt(1, 9)),
            (std::vector<std::string>{"counted " + Op(1) + " r9", "certified r9 " + By({0, 1}) + " committee 3"}));
  EXPECT_EQ(Add(round, VoteAt(2, 1)),
            (std::vector<std::string>{"counted " + Op(2) + " r1", "dispute over 6", "execute here"}));
  Add(round, VoteAt(3, 1));
  Add(round, VoteAt(4, 1));
  EXPECT_EQ(Add(round, VoteAt(5, 1)),
            (std::vector<std::string>{"counted " + Op(5) + " r1", "dispute certified r1 supersedes",
                                      "slash dispute " + Op(0), "slash dispute " + Op(1)}));
}

TEST_F(RoundTest, EquivocationIsReportedOnItsOwn) {
  TaskRound round = Open(5);
  Add(round, VoteAt(0, 1));
  EXPECT_EQ(Add(round, VoteAt(0, 9)),
            (std::vector<std::string>{"counted " + Op(0) + " r9", "slash equivocation " + Op(0)}));
  EXPECT_FALSE(round.disputed());  // one signer's two votes are not two results of the committee
  // Reported once per task, however often it repeats itself.
  EXPECT_TRUE(Add(round, VoteAt(0, 8)) == std::vector<std::string>{"counted " + Op(0) + " r8"});
}

TEST_F(RoundTest, NoEvidenceWhenTheNodeSendsNone) {
  rules_.report_evidence = false;
  TaskRound round = Open(5);
  Add(round, VoteAt(0, 1));
  EXPECT_EQ(Add(round, VoteAt(0, 9)), std::vector<std::string>{"counted " + Op(0) + " r9"});
}

TEST_F(RoundTest, SilentMembersAreReplacedAtTheDeadline) {
  TaskRound round = Open(/*self_position=*/3);  // the first replacement
  EXPECT_FALSE(round.member());
  Add(round, VoteAt(0, 1));
  // An early vote from position 4, not yet a member: kept aside, not counted for the quorum.
  EXPECT_EQ(Add(round, VoteAt(4, 1)), std::vector<std::string>{"counted " + Op(4) + " r1"});
  EXPECT_FALSE(round.finalized());
  EXPECT_TRUE(Tick(round, kStart + kTimeout - 1).empty());
  // Two members (positions 1 and 2) are silent: positions 3 and 4 join; this node must execute,
  // and the vote kept aside now counts. A committee of 5 needs 4 of its members (2 of 3, scaled),
  // so two votes no longer certify.
  EXPECT_EQ(Tick(round, kStart + kTimeout), (std::vector<std::string>{"extended to 5 silent 2 added 2 self joined",
                                                                      "execute here", "counted " + Op(4) + " r1"}));
  EXPECT_TRUE(round.member());
  EXPECT_EQ(round.committee().quorum(), 4u);
  EXPECT_EQ(Add(round, VoteAt(3, 1)), std::vector<std::string>{"counted " + Op(3) + " r1"});
  // The slow member at position 1 finishes after all: with position 0 it is 2 of the original 3,
  // which certifies (the smallest committee prefix that reaches its scaled quorum).
  EXPECT_EQ(Add(round, VoteAt(1, 1)),
            (std::vector<std::string>{"counted " + Op(1) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
  // Finalized: no more replacements.
  EXPECT_TRUE(Tick(round, kStart + 5 * kTimeout).empty());
}

TEST_F(RoundTest, ReplacementStepsWaitAFullTimeoutAndStopAtTheEndOfTheOrder) {
  TaskRound round = Open(5);
  // Each deadline is the node's next timer (NextTimerMs), so it is met when it passes.
  EXPECT_EQ(round.NextTimerMs(), std::optional<int64_t>(kStart + kTimeout));
  EXPECT_EQ(Tick(round, kStart + kTimeout),
            (std::vector<std::string>{"extended to 6 silent 3 added 3 self joined", "execute here"}));
  // The order is exhausted: the round waits while votes come, then closes as failed. The
  // exhausted grace starts at the next periodic timer, so no deadline is due before it.
  EXPECT_EQ(round.NextTimerMs(), std::nullopt);
  EXPECT_TRUE(Tick(round, kStart + 2 * kTimeout).empty());
  EXPECT_EQ(round.NextTimerMs(), std::optional<int64_t>(kStart + 2 * kTimeout + 3 * kTimeout));
  Add(round, VoteAt(0, 1));  // progress restarts the grace period
  EXPECT_TRUE(Tick(round, kStart + 4 * kTimeout).empty());
  EXPECT_EQ(round.NextTimerMs(), std::optional<int64_t>(kStart + 4 * kTimeout + 3 * kTimeout));
  EXPECT_TRUE(Tick(round, kStart + 4 * kTimeout + 3 * kTimeout - 1).empty());
  EXPECT_EQ(Tick(round, kStart + 4 * kTimeout + 3 * kTimeout),
            std::vector<std::string>{"failed: the committee order is exhausted (all 6 operators) and no quorum of 4 "
                                     "matching signatures came"});
  EXPECT_EQ(round.NextTimerMs(), std::nullopt);              // over
  EXPECT_TRUE(Tick(round, kStart + 20 * kTimeout).empty());  // once
  TaskRound other = Open(5);
  Add(other, VoteAt(0, 1));
  // Conflicting: a dispute round, in which this node already takes part. Position 2 is silent.
  EXPECT_EQ(Add(other, VoteAt(1, 2)),
            (std::vector<std::string>{"counted " + Op(1) + " r2", "dispute over 6", "execute here"}));
  // The dispute window waits a member timeout from the dispute's start.
  EXPECT_EQ(other.NextTimerMs(), std::optional<int64_t>(kStart + kTimeout));
  EXPECT_EQ(Tick(other, kStart + kTimeout), std::vector<std::string>{"extended to 4 silent 1 added 1"});
  EXPECT_TRUE(Tick(other, kStart + kTimeout + kTimeout - 1).empty());
  // The replacement (position 3) is silent too now: each silent member, old or new, brings one
  // more operator, so the committee keeps growing while members stay silent.
  EXPECT_EQ(Tick(other, kStart + 2 * kTimeout), std::vector<std::string>{"extended to 6 silent 2 added 2"});
}

// Issue 16, hole 2: two colluders deep in the order sign a wrong result at once while the three
// honest members are still executing a long task. Extension reaches the colluders, but the
// quorum grows with the committee (4 of 6), so their two early votes never certify; the honest
// members' votes, when they come, do.
TEST_F(RoundTest, ColludersDeepInTheOrderNeverCertifyWhileHonestMembersAreSlow) {
  TaskRound round = Open(/*self_position=*/5);
  EXPECT_TRUE(Add(round, VoteAt(3, 9)).size() == 1);  // kept aside: not a member yet
  EXPECT_TRUE(Add(round, VoteAt(4, 9)).size() == 1);
  std::vector<std::string> lines = Tick(round, kStart + kTimeout);
  EXPECT_EQ(lines.front(), "extended to 6 silent 3 added 3 self joined");
  for (const std::string& l : lines) EXPECT_EQ(l.find("certified"), std::string::npos) << l;
  EXPECT_EQ(round.committee().quorum(), 4u);
  EXPECT_FALSE(round.finalized());
  // The honest members finish: their result conflicts with the colluders' (a dispute), and two
  // of the original three certify it, as the task asked; the colluders are accused.
  std::vector<std::string> all;
  for (size_t honest : {0u, 1u, 2u, 5u}) {
    for (const std::string& l : Add(round, VoteAt(honest, 1))) all.push_back(l);
  }
  for (const std::string& l : all) EXPECT_EQ(l.find("certified r9"), std::string::npos) << l;
  EXPECT_NE(std::find(all.begin(), all.end(), "certified r1 " + By({0, 1}) + " committee 3"), all.end())
      << ::testing::PrintToString(all);
  EXPECT_NE(std::find(all.begin(), all.end(), "slash dispute " + Op(3)), all.end()) << ::testing::PrintToString(all);
  EXPECT_NE(std::find(all.begin(), all.end(), "slash dispute " + Op(4)), all.end()) << ::testing::PrintToString(all);
}

// A signer of the certificate equivocates: once slashed, its signature backs nothing
// (`consensor verify` checks evidenceUsed). The certificate is rebuilt without it as soon as the
// honest members reach the quorum alone.
TEST_F(RoundTest, CertificateIsRebuiltWithoutAnEquivocator) {
  TaskRound round = Open(5);
  Add(round, VoteAt(0, 1));
  EXPECT_EQ(Add(round, VoteAt(1, 1)),
            (std::vector<std::string>{"counted " + Op(1) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
  std::vector<std::string> lines = Add(round, VoteAt(1, 9));  // the equivocation
  EXPECT_NE(std::find(lines.begin(), lines.end(), "slash equivocation " + Op(1)), lines.end())
      << ::testing::PrintToString(lines);
  lines = Add(round, VoteAt(2, 1));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "certificate refreshed r1 " + By({0, 2})), lines.end())
      << ::testing::PrintToString(lines);
}

TEST_F(RoundTest, ExecutedMemberIsNotAskedToExecuteAgain) {
  RoundRecord record;
  record.executed = true;
  TaskRound round = Open(5, record);
  Add(round, VoteAt(0, 1));
  EXPECT_EQ(Add(round, VoteAt(1, 9)), (std::vector<std::string>{"counted " + Op(1) + " r9", "dispute over 6"}));
}

TEST_F(RoundTest, RestoredRoundKeepsItsCommitteeAndResumesItsDispute) {
  RoundRecord record;
  record.finalized = true;
  TaskRound probe = Open(0);
  record.committee.assign(order_.begin(), order_.begin() + 4);  // one replacement happened
  TaskRound round = Open(0, record);
  EXPECT_EQ(round.committee().committee_size(), 4u);
  EXPECT_TRUE(round.finalized());
  EXPECT_TRUE(round.member());
  RoundDecisions d;
  round.ResumeDispute(&d);
  EXPECT_EQ(Describe(d), std::vector<std::string>{"dispute over 6"});  // a member: no extra execution
  d.clear();
  round.ResumeDispute(&d);
  EXPECT_TRUE(d.empty());
}

// Issue 16, hole 2: the dispute threshold is a share of ALL stake, so the dispute runs over the
// whole set (64 of a larger set could never reach it). Beyond the bound, it is refused, saying why.
TEST_F(RoundTest, DisputeCommitteeIsTheWholeSetUpToItsBound) {
  TaskRound whole = Open(5);
  Add(whole, VoteAt(0, 1));
  EXPECT_EQ(Add(whole, VoteAt(1, 9)),
            (std::vector<std::string>{"counted " + Op(1) + " r9", "dispute over 6", "execute here"}));
  rules_.max_dispute_committee = 4;
  TaskRound round = Open(5);
  Add(round, VoteAt(0, 1));
  auto bounded = Add(round, VoteAt(1, 9));
  ASSERT_EQ(bounded.size(), 2u);
  EXPECT_EQ(bounded[1],
            "no dispute: the operator set of 6 exceeds the dispute committee bound of 4: a dispute certificate over "
            "fewer operators could not carry the stake threshold");
  rules_.max_dispute_committee = 1024;
  rules_.dispute_threshold_bps = 0;  // the contract's threshold is read from chain; 0 is refused
  TaskRound broken = Open(5);
  Add(broken, VoteAt(0, 1));
  auto lines = Add(broken, VoteAt(1, 9));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("no dispute: threshold 0 bps"), std::string::npos) << lines[1];
}

// The standard for consensus/: a recorded sequence of events replays to the same decisions.
TEST_F(RoundTest, ReplayingTheEventsGivesTheSameDecisions) {
  struct Event {
    int64_t now;  // a timer event when vote_position < 0
    int vote_position;
    uint8_t result;
  };
  // (Position 3 equivocates after the dispute certified: an equivocator never counts toward a
  // certificate, so earlier its r1 vote would be missing from the dispute's stake.)
  const std::vector<Event> events = {{kStart + 10, 0, 9},    {kStart + 20, 4, 1},    {kStart + kTimeout, -1, 0},
                                     {kStart + 21000, 1, 9}, {kStart + 21010, 3, 1}, {kStart + 21030, 5, 1},
                                     {kStart + 21040, 2, 1}, {kStart + 21050, 3, 7}, {kStart + 3 * kTimeout, -1, 0}};
  auto run = [&]() {
    TaskRound round = Open(2);
    std::vector<std::string> log;
    for (const Event& e : events) {
      RoundDecisions d;
      if (e.vote_position < 0) {
        round.OnTimer(e.now, &d);
      } else {
        round.AddVote(VoteAt(static_cast<size_t>(e.vote_position), e.result), &d);
      }
      for (const auto& line : Describe(d)) log.push_back(std::to_string(e.now) + ": " + line);
    }
    return log;
  };
  const std::vector<std::string> first = run();
  EXPECT_EQ(first, run());
  // The script exercises the whole rulebook: replacement, certificate, dispute and both kinds
  // of evidence. (r9 is certified by two of the three original members, a valid 2-of-3
  // certificate, which the dispute then supersedes.)
  std::string all;
  for (const auto& line : first) all += line + "\n";
  for (const char* expected : {"extended to", "certified r9", "dispute over 6", "dispute certified r1 supersedes",
                               "slash equivocation", "slash dispute"}) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << " missing from:\n" << all;
  }
}

// ---- Commit-reveal (docs/SECURITY.md, hole 5).

class CommitRevealTest : public RoundTest {
 protected:
  // Most cases close the window at the quorum of commitments; the grace has its own test.
  CommitRevealTest() { rules_.commit_grace_ms = 0; }
  SignedCommitment CommitAt(size_t position, const SignedAttestation& vote,
                            VotePhase phase = VotePhase::kCommittee) const {
    auto c = SignCommitment(Key(At(position)), Domain(), vote, order_.at(position), phase);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }
  std::vector<std::string> Commit(TaskRound& round, const SignedCommitment& c) {
    RoundDecisions d;
    round.AddCommitment(c, &d);
    return Describe(d);
  }
  std::vector<std::string> Reveal(TaskRound& round, const SignedAttestation& vote,
                                  const std::vector<SignedCommitment>& bundle = {},
                                  VotePhase phase = VotePhase::kCommittee) {
    RoundDecisions d;
    round.AddReveal(vote, phase, bundle, &d);
    return Describe(d);
  }
};

TEST_F(CommitRevealTest, CommitmentHidesTheVoteAndBindsItsSigner) {
  Open(5);
  const SignedAttestation a = VoteAt(0, 1);
  EXPECT_EQ(VoteCommitment(a, order_[0]), VoteCommitment(a, order_[0]));
  EXPECT_NE(VoteCommitment(a, order_[0]), VoteCommitment(a, order_[1]));
  EXPECT_NE(VoteCommitment(a, order_[0]), VoteCommitment(VoteAt(0, 2), order_[0]));
  // Another trace root is another commitment.
  EXPECT_NE(VoteCommitment(a, order_[0]), VoteCommitment(fixture::Vote(At(0), H(7), kRef, 1, 4), order_[0]));
  const SignedCommitment c = CommitAt(0, a);
  auto signer = RecoverCommitmentSigner(Domain(), c);
  ASSERT_TRUE(signer.ok());
  EXPECT_EQ(*signer, order_[0]);
  SignedCommitment moved = c;
  moved.phase = VotePhase::kDispute;  // the phase is signed
  EXPECT_NE(*RecoverCommitmentSigner(Domain(), moved), order_[0]);
  EXPECT_FALSE(VotePhaseFromNumber(2).ok());
}

TEST_F(CommitRevealTest, WindowClosesAtAQuorumOfCommitmentsAndTheMemberRevealsThen) {
  TaskRound round = Open(/*self_position=*/1);  // a member
  const SignedAttestation own = VoteAt(1, 1);
  EXPECT_EQ(Commit(round, CommitAt(1, own)), std::vector<std::string>{"admitted " + Op(1)});
  EXPECT_FALSE(round.window_closed(VotePhase::kCommittee));
  // A second commitment makes 2 of 3: the window closes and this node reveals with both.
  EXPECT_EQ(Commit(round, CommitAt(0, VoteAt(0, 1))),
            (std::vector<std::string>{"admitted " + Op(0), "window closed", "reveal with 2"}));
  EXPECT_EQ(Reveal(round, own), std::vector<std::string>{"counted " + Op(1) + " r1"});
  EXPECT_EQ(Reveal(round, VoteAt(0, 1)),
            (std::vector<std::string>{"counted " + Op(0) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
}

TEST_F(CommitRevealTest, CopiedRevealDoesNotCount) {
  TaskRound round = Open(5);  // an observer
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  ASSERT_TRUE(round.window_closed(VotePhase::kCommittee));
  EXPECT_EQ(Reveal(round, a), std::vector<std::string>{"counted " + Op(0) + " r1"});
  // The third member saw that reveal, copied its result and committed to it: too late.
  const SignedAttestation copy = VoteAt(2, 1);
  const SignedCommitment late = CommitAt(2, copy);
  EXPECT_TRUE(Commit(round, late).empty());
  EXPECT_EQ(Reveal(round, copy, {CommitAt(0, a), CommitAt(1, b), late}),
            std::vector<std::string>{"not counted " + Op(2) +
                                     ": no commitment of it was seen before the commit window "
                                     "closed"});
  EXPECT_FALSE(round.finalized());
  EXPECT_EQ(Reveal(round, b),
            (std::vector<std::string>{"counted " + Op(1) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
}

TEST_F(CommitRevealTest, RevealWithoutAClosedWindowOrAMatchingCommitmentDoesNotCount) {
  TaskRound round = Open(5);
  const SignedAttestation a = VoteAt(0, 1);
  Commit(round, CommitAt(0, a));
  // Only one commitment: a reveal now is premature, and does not close the window.
  EXPECT_EQ(Reveal(round, a), std::vector<std::string>{"not counted " + Op(0) +
                                                       ": revealed before its commit window closed (kept until it "
                                                       "closes)"});
  EXPECT_FALSE(round.window_closed(VotePhase::kCommittee));
  // Its own commitment in its bundle does not help either: only the others' are taken.
  const SignedAttestation c = VoteAt(2, 1);
  EXPECT_EQ(Reveal(round, c, {CommitAt(2, c)}),
            std::vector<std::string>{"not counted " + Op(2) +
                                     ": revealed before its commit window closed (kept until it closes)"});
  // Member 1 committed to result 1 but reveals result 2.
  Commit(round, CommitAt(1, VoteAt(1, 1)));
  EXPECT_EQ(Reveal(round, VoteAt(1, 2)),
            std::vector<std::string>{"not counted " + Op(1) + ": it does not match its signer's commitment"});
  // Commitments for another task, or forged, are refused.
  SignedCommitment forged = CommitAt(0, a);
  forged.commitment[0] ^= 1;
  Commit(round, forged);  // recovers to someone else: not an operator
  SignedCommitment other = CommitAt(0, fixture::Vote(At(0), H(8), kRef, 1));
  EXPECT_EQ(Commit(round, other),
            std::vector<std::string>{"commitment refused: bad signature, or for another task or reference block"});
}

// An equivocator's other result reaches this node before the one it committed to: set aside
// at first, it is the evidence once the committed one counts, and the certificate is made by
// the honest members alone (its signature backs nothing once it is slashed).
TEST_F(CommitRevealTest, EquivocationRevealedBeforeTheCommittedVoteKeepsItOutOfTheCertificate) {
  rules_.commit_grace_ms = 60000;  // the window closes when all three have committed
  TaskRound round = Open(5);
  for (size_t i = 0; i < 3; ++i) Commit(round, CommitAt(i, VoteAt(i, 1)));
  ASSERT_TRUE(round.window_closed(VotePhase::kCommittee));
  EXPECT_EQ(Reveal(round, VoteAt(1, 2)),
            std::vector<std::string>{"not counted " + Op(1) + ": it does not match its signer's commitment"});
  std::vector<std::string> lines = Reveal(round, VoteAt(1, 1));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "slash equivocation " + Op(1)), lines.end())
      << ::testing::PrintToString(lines);
  EXPECT_EQ(Reveal(round, VoteAt(0, 1)), std::vector<std::string>{"counted " + Op(0) + " r1"});
  EXPECT_EQ(Reveal(round, VoteAt(2, 1)),
            (std::vector<std::string>{"counted " + Op(2) + " r1", "certified r1 " + By({0, 2}) + " committee 3"}));
}

TEST_F(CommitRevealTest, BundleClosesTheWindowOnTheRevealersCommitments) {
  TaskRound round = Open(5);
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1);
  // This node has seen only a's commitment; b's reveal lists a's and its own (which it sent
  // before, and which this node then holds too).
  Commit(round, CommitAt(1, b));
  EXPECT_EQ(Reveal(round, b, {CommitAt(0, a), CommitAt(1, b)}),
            (std::vector<std::string>{"admitted " + Op(0), "window closed", "counted " + Op(1) + " r1"}));
  EXPECT_EQ(Reveal(round, a),
            (std::vector<std::string>{"counted " + Op(0) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
}

TEST_F(CommitRevealTest, WithheldRevealFailsTheRoundAndTheCommitteeStopsGrowing) {
  TaskRound round = Open(5);
  const SignedAttestation a = VoteAt(0, 1);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, VoteAt(1, 1)));  // member 1 commits and never reveals
  Reveal(round, a);
  EXPECT_TRUE(Tick(round, kStart + 1).empty());  // the deadline starts here: the grace period
  EXPECT_TRUE(Tick(round, kStart + 3 * kTimeout).empty());
  const std::vector<std::string> last = Tick(round, kStart + 1 + 3 * kTimeout);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_NE(last[0].find("failed: the commit window closed with 2 commitments"), std::string::npos) << last[0];
  EXPECT_EQ(round.committee().committee_size(), 3u);  // no extension after the window closed
}

TEST_F(CommitRevealTest, MembersThatCommittedAreNotReplacedAsSilent) {
  TaskRound round = Open(5);
  Commit(round, CommitAt(0, VoteAt(0, 1)));
  // Members 1 and 2 are silent: two operators join; member 0 is not replaced.
  EXPECT_EQ(Tick(round, kStart + kTimeout), std::vector<std::string>{"extended to 5 silent 2 added 2"});
}

TEST_F(CommitRevealTest, DisputeRoundHasItsOwnWindow) {
  TaskRound round = Open(/*self_position=*/4);  // joins the dispute round
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 9);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  Reveal(round, a);
  EXPECT_EQ(Reveal(round, b), (std::vector<std::string>{"counted " + Op(1) + " r9", "dispute over 6", "execute here"}));
  const SignedAttestation mine = VoteAt(4, 1);
  EXPECT_EQ(Commit(round, CommitAt(4, mine, VotePhase::kDispute)),
            std::vector<std::string>{"admitted " + Op(4) + " dispute"});
  // a, b and two dispute commitments hold 4 of 6 equal stakes, above the 60% threshold, but b's
  // stake is a liar's: the window waits a member timeout for the others.
  EXPECT_EQ(Commit(round, CommitAt(3, VoteAt(3, 1), VotePhase::kDispute)),
            std::vector<std::string>{"admitted " + Op(3) + " dispute"});
  EXPECT_EQ(Commit(round, CommitAt(5, VoteAt(5, 1), VotePhase::kDispute)),
            std::vector<std::string>{"admitted " + Op(5) + " dispute"});
  EXPECT_EQ(Tick(round, kStart + kTimeout),
            (std::vector<std::string>{"window closed dispute", "reveal dispute with 3"}));
  EXPECT_EQ(Reveal(round, mine, {}, VotePhase::kDispute), std::vector<std::string>{"counted " + Op(4) + " r1"});
  // A dispute vote never completes the committee's certificate (a's vote is alone there).
  EXPECT_FALSE(round.committee().finalized());
  // Tagged as a committee vote, it does not count: it was not committed in that window.
  EXPECT_EQ(Reveal(round, VoteAt(3, 1)),
            std::vector<std::string>{"not counted " + Op(3) +
                                     ": no commitment of it was seen before the commit window closed"});
  EXPECT_EQ(Reveal(round, VoteAt(3, 1), {}, VotePhase::kDispute), std::vector<std::string>{"counted " + Op(3) + " r1"});
  // Operator 2's commitment comes after the window closed here (another node may have admitted
  // it in time): its vote counts all the same, since in the dispute round every result was
  // public before anyone committed. Three honest votes and a's make 4 of 6.
  const SignedAttestation late = VoteAt(2, 1);
  EXPECT_TRUE(Commit(round, CommitAt(2, late, VotePhase::kDispute)).empty());
  EXPECT_EQ(Reveal(round, late, {}, VotePhase::kDispute),
            (std::vector<std::string>{"counted " + Op(2) + " r1", "dispute certified r1 supersedes first",
                                      "slash dispute " + Op(1)}));
  // A dispute vote that contradicts its admitted commitment still does not count.
  EXPECT_EQ(Reveal(round, VoteAt(5, 7), {}, VotePhase::kDispute),
            std::vector<std::string>{"not counted " + Op(5) + ": it does not match its signer's commitment"});
}

// What failed a real network under ASan: member 5's reveal was relayed ahead of its own
// commitment, closed this node's dispute window on the others' commitments and was refused for
// want of its own. Every other node admitted it in time and certified with it; this one, one vote
// short, would never have certified. Its vote counts here too.
TEST_F(CommitRevealTest, DisputeRevealOutrunningItsCommitmentStillCounts) {
  TaskRound round = Open(/*self_position=*/4);
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 9);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  Reveal(round, a);
  Reveal(round, b);
  ASSERT_TRUE(round.disputed());
  const SignedAttestation mine = VoteAt(4, 1), third = VoteAt(3, 1), fifth = VoteAt(5, 1);
  Commit(round, CommitAt(4, mine, VotePhase::kDispute));
  Commit(round, CommitAt(3, third, VotePhase::kDispute));
  // Member 5's reveal lists 3's, 4's and its own commitment; its own is not taken from it.
  const std::vector<std::string> lines =
      Reveal(round, fifth,
             {CommitAt(3, third, VotePhase::kDispute), CommitAt(4, mine, VotePhase::kDispute),
              CommitAt(5, fifth, VotePhase::kDispute)},
             VotePhase::kDispute);
  ASSERT_TRUE(round.window_closed(VotePhase::kDispute));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "counted " + Op(5) + " r1"), lines.end())
      << ::testing::PrintToString(lines);
  EXPECT_EQ(Reveal(round, mine, {}, VotePhase::kDispute), std::vector<std::string>{"counted " + Op(4) + " r1"});
  EXPECT_EQ(Reveal(round, third, {}, VotePhase::kDispute),
            (std::vector<std::string>{"counted " + Op(3) + " r1", "dispute certified r1 supersedes first",
                                      "slash dispute " + Op(1)}));
}

TEST_F(CommitRevealTest, LateMemberThatDisagreesOpensADispute) {
  TaskRound round = Open(5);
  // Two colluders commit at once and certify a wrong result before the third member commits.
  const SignedAttestation a = VoteAt(0, 9), b = VoteAt(1, 9);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  Reveal(round, a);
  EXPECT_EQ(Reveal(round, b),
            (std::vector<std::string>{"counted " + Op(1) + " r9", "certified r9 " + By({0, 1}) + " committee 3"}));
  // The honest member's late vote was never public: it opens the dispute and counts there.
  EXPECT_EQ(Reveal(round, VoteAt(2, 1)),
            (std::vector<std::string>{"dispute over 6", "execute here", "counted " + Op(2) + " r1"}));
  // A copy of it from an operator outside the committee counts nowhere.
  EXPECT_EQ(Reveal(round, VoteAt(3, 1)),
            std::vector<std::string>{"not counted " + Op(3) +
                                     ": no commitment of it was seen before the commit window closed"});
}

TEST_F(CommitRevealTest, MemberThatCommitsLateStillReveals) {
  TaskRound round = Open(/*self_position=*/2);
  Commit(round, CommitAt(0, VoteAt(0, 9)));
  Commit(round, CommitAt(1, VoteAt(1, 9)));
  ASSERT_TRUE(round.window_closed(VotePhase::kCommittee));
  // This node finishes executing after the window closed: its vote still goes out (a
  // disagreement starts the dispute), without a bundle.
  EXPECT_EQ(Commit(round, CommitAt(2, VoteAt(2, 1))), std::vector<std::string>{"reveal with 0"});
}

TEST_F(CommitRevealTest, LateVotesThatAgreeOrEquivocateStartNoDispute) {
  TaskRound round = Open(5);
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  Reveal(round, a, {CommitAt(1, b)});  // closes the window here and counts
  // The late member reveals its (honest) result before b's reveal arrives: it agrees with a
  // counted vote, so it counts nowhere and opens nothing.
  EXPECT_EQ(Reveal(round, VoteAt(2, 1)),
            std::vector<std::string>{"not counted " + Op(2) +
                                     ": no commitment of it was seen before the commit window closed"});
  // Then it signs another result too: that is equivocation, evidence with no dispute.
  EXPECT_EQ(Reveal(round, VoteAt(2, 7)), std::vector<std::string>{"slash equivocation " + Op(2)});
  EXPECT_FALSE(round.disputed());
}

TEST_F(CommitRevealTest, LateVoteBeforeAnyCountedVoteWaitsToBeJudged) {
  TaskRound round = Open(5);
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  // The late member's reveal outruns the first counted one: nothing to compare it with yet.
  EXPECT_TRUE(Reveal(round, VoteAt(2, 1)).empty());
  // Once a's vote counts, the late vote agrees with it: not counted, and no dispute.
  EXPECT_EQ(Reveal(round, a),
            (std::vector<std::string>{
                "counted " + Op(0) + " r1",
                "not counted " + Op(2) + ": no commitment of it was seen before the commit window closed"}));
  EXPECT_FALSE(round.disputed());
}

TEST_F(CommitRevealTest, WindowWaitsTheGraceForTheRestOfTheCommittee) {
  rules_.commit_grace_ms = 1000;
  TaskRound round = Open(/*self_position=*/0);
  const SignedAttestation own = VoteAt(0, 1);
  Commit(round, CommitAt(0, own));
  // 2 of 3 could certify, but the third member gets the grace: a spare commitment.
  EXPECT_EQ(Commit(round, CommitAt(1, VoteAt(1, 1))), std::vector<std::string>{"admitted " + Op(1)});
  // The node's next timer is the grace's end, not its next periodic one.
  EXPECT_EQ(round.NextTimerMs(), std::optional<int64_t>(kStart + 1000));
  EXPECT_TRUE(Tick(round, kStart + 999).empty());
  EXPECT_EQ(round.NextTimerMs(), std::optional<int64_t>(kStart + 1000));
  EXPECT_EQ(Tick(round, kStart + 1000), (std::vector<std::string>{"window closed", "reveal with 2"}));
  // Then the exhausted grace, counted from that timer.
  EXPECT_EQ(round.NextTimerMs(), std::optional<int64_t>(kStart + 1000 + rules_.exhausted_grace_ms));

  // The grace counts from when the quorum's commitments arrived, not from the last timer: a
  // node whose timer lags must not close early, or it reveals while its peers' windows are
  // still open, where a copier's commitment could then still be admitted.
  TaskRound lagging = Open(0);
  EXPECT_TRUE(Tick(lagging, kStart + 100).empty());
  Commit(lagging, CommitAt(0, own));
  lagging.AdvanceClock(kStart + 900);
  Commit(lagging, CommitAt(1, VoteAt(1, 1)));
  lagging.AdvanceClock(kStart + 500);  // never moves back
  EXPECT_EQ(lagging.NextTimerMs(), std::optional<int64_t>(kStart + 1900));
  EXPECT_TRUE(Tick(lagging, kStart + 1899).empty());
  EXPECT_EQ(Tick(lagging, kStart + 1900), (std::vector<std::string>{"window closed", "reveal with 2"}));

  // When the whole committee commits, it closes at once.
  TaskRound all = Open(0);
  Commit(all, CommitAt(0, own));
  Commit(all, CommitAt(1, VoteAt(1, 1)));
  EXPECT_EQ(Commit(all, CommitAt(2, VoteAt(2, 1))),
            (std::vector<std::string>{"admitted " + Op(2), "window closed", "reveal with 3"}));

  // And a reveal whose bundle could certify closes it too (its sender's grace is over).
  TaskRound revealed = Open(0);
  Commit(revealed, CommitAt(0, own));
  Commit(revealed, CommitAt(1, VoteAt(1, 1)));
  EXPECT_EQ(Reveal(revealed, VoteAt(1, 1), {CommitAt(0, own)}),
            (std::vector<std::string>{"window closed", "reveal with 2", "counted " + Op(1) + " r1"}));
}

// A reveal costs one signature recovery: its signer is recovered once for the round's checks
// and the tracker, and the commitments of its bundle that this node admitted already are not
// recovered again. A commitment it had not seen is still recovered and admitted.
TEST_F(CommitRevealTest, ARevealRecoversItsSignatureOnceAndNoAdmittedCommitmentAgain) {
  rules_.commit_grace_ms = 60000;  // the window stays open for the bundles
  TaskRound round = Open(/*self_position=*/5);
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  ASSERT_FALSE(round.window_closed(VotePhase::kCommittee));
  uint64_t before = SignatureRecoveries();
  EXPECT_EQ(Reveal(round, b, {CommitAt(0, a), CommitAt(1, b)}),
            (std::vector<std::string>{"window closed", "counted " + Op(1) + " r1"}));
  EXPECT_EQ(SignatureRecoveries() - before, 1u);

  TaskRound fresh = Open(/*self_position=*/5);
  Commit(fresh, CommitAt(1, b));
  before = SignatureRecoveries();
  EXPECT_EQ(Reveal(fresh, b, {CommitAt(0, a), CommitAt(1, b)}),
            (std::vector<std::string>{"admitted " + Op(0), "window closed", "counted " + Op(1) + " r1"}));
  EXPECT_EQ(SignatureRecoveries() - before, 2u);  // the reveal's and the unseen commitment's
  EXPECT_EQ(Reveal(fresh, a),
            (std::vector<std::string>{"counted " + Op(0) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
}

// Seen in CI (committee 4, quorum 3): the window closed on exactly a quorum of commitments, one
// of them an equivocator's, and an honest member's came just after. Once the equivocator is out,
// the rest cannot certify: the window reopens, the late commitment is admitted and its vote
// counts. Here the certificate was made with the equivocator first, and is rebuilt.
TEST_F(CommitRevealTest, EquivocatorAmongAQuorumOfCommitmentsReopensTheWindow) {
  rules_.commit_grace_ms = 60000;  // only the first reveal's bundle closes the window
  RoundRecord record;
  record.replicas = 4;
  record.quorum = 3;
  TaskRound round = Open(/*self_position=*/0, record);
  const SignedAttestation own = VoteAt(0, 1), honest = VoteAt(1, 1), late = VoteAt(3, 1);
  const SignedAttestation committed = VoteAt(2, 1), other = VoteAt(2, 2);  // position 2 equivocates
  Commit(round, CommitAt(0, own));
  Commit(round, CommitAt(2, committed));
  Commit(round, CommitAt(1, honest));
  EXPECT_EQ(Reveal(round, honest, {CommitAt(0, own), CommitAt(2, committed)}),
            (std::vector<std::string>{"window closed", "reveal with 3", "counted " + Op(1) + " r1"}));
  EXPECT_TRUE(Commit(round, CommitAt(3, late)).empty());  // after the close: kept, not admitted
  EXPECT_EQ(Reveal(round, own), std::vector<std::string>{"counted " + Op(0) + " r1"});
  // Before any equivocation the late vote counts nowhere, as always (it could be a copy).
  EXPECT_EQ(Reveal(round, late), std::vector<std::string>{"not counted " + Op(3) +
                                                          ": no commitment of it was seen before the commit window "
                                                          "closed"});
  EXPECT_EQ(Reveal(round, other),
            std::vector<std::string>{"not counted " + Op(2) + ": it does not match its signer's commitment"});
  EXPECT_EQ(Reveal(round, committed),
            (std::vector<std::string>{"counted " + Op(2) + " r1", "certified r1 " + By({0, 1, 2}) + " committee 4",
                                      "counted " + Op(2) + " r2", "slash equivocation " + Op(2),
                                      "window reopened " + Op(2) + " late 1", "admitted " + Op(3),
                                      "counted " + Op(3) + " r1", "certificate refreshed r1 " + By({0, 1, 3})}));
  EXPECT_TRUE(round.finalized());
  EXPECT_FALSE(round.disputed());
}

// The same, with the equivocation seen before any certificate and the late member's commitment
// arriving after the window reopened: it is admitted then, and its reveal counts.
TEST_F(CommitRevealTest, ReopenedWindowAdmitsAMembersLaterCommitment) {
  rules_.commit_grace_ms = 60000;
  RoundRecord record;
  record.replicas = 4;
  record.quorum = 3;
  TaskRound round = Open(/*self_position=*/5, record);  // an observer
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1), e = VoteAt(2, 1), late = VoteAt(3, 1);
  Commit(round, CommitAt(0, a));
  Commit(round, CommitAt(1, b));
  Commit(round, CommitAt(2, e));
  EXPECT_EQ(Reveal(round, a, {CommitAt(1, b), CommitAt(2, e)}),
            (std::vector<std::string>{"window closed", "counted " + Op(0) + " r1"}));
  EXPECT_EQ(Reveal(round, e), std::vector<std::string>{"counted " + Op(2) + " r1"});
  EXPECT_EQ(Reveal(round, VoteAt(2, 5)),
            (std::vector<std::string>{"counted " + Op(2) + " r5", "slash equivocation " + Op(2),
                                      "window reopened " + Op(2) + " late 0"}));
  EXPECT_EQ(Commit(round, CommitAt(3, late)), std::vector<std::string>{"admitted " + Op(3)});
  EXPECT_EQ(Reveal(round, late), std::vector<std::string>{"counted " + Op(3) + " r1"});
  EXPECT_EQ(Reveal(round, b),
            (std::vector<std::string>{"counted " + Op(1) + " r1", "certified r1 " + By({0, 1, 3}) + " committee 4"}));
  // An operator outside the committee still counts nowhere.
  EXPECT_TRUE(Commit(round, CommitAt(4, VoteAt(4, 1))).empty());
}

// A window waits past a known equivocator: its commitment does not make the quorum.
TEST_F(CommitRevealTest, KnownEquivocatorsCommitmentDoesNotCloseTheWindow) {
  RoundRecord record;
  record.replicas = 4;
  record.quorum = 3;
  TaskRound round = Open(/*self_position=*/5, record);
  Commit(round, CommitAt(2, VoteAt(2, 1)));
  Commit(round, CommitAt(0, VoteAt(0, 1)));
  RoundDecisions d;
  round.AddVote(VoteAt(2, 1), &d);  // its two votes, as after a restart
  round.AddVote(VoteAt(2, 4), &d);
  EXPECT_EQ(Commit(round, CommitAt(1, VoteAt(1, 1))), std::vector<std::string>{"admitted " + Op(1)});
  EXPECT_FALSE(round.window_closed(VotePhase::kCommittee));
  EXPECT_EQ(Commit(round, CommitAt(3, VoteAt(3, 1))), (std::vector<std::string>{"admitted " + Op(3), "window closed"}));
}

TEST_F(CommitRevealTest, NodeCatchingUpOutOfOrderStillCounts) {
  TaskRound round = Open(5);
  const SignedAttestation a = VoteAt(0, 1), b = VoteAt(1, 1);
  // Pulled from a peer's log after a restart: a's reveal first, its commitment later.
  Reveal(round, a, {CommitAt(0, a)});
  EXPECT_FALSE(round.window_closed(VotePhase::kCommittee));
  Commit(round, CommitAt(1, b));
  EXPECT_EQ(Commit(round, CommitAt(0, a)),
            (std::vector<std::string>{"admitted " + Op(0), "window closed", "counted " + Op(0) + " r1"}));
  EXPECT_EQ(Reveal(round, b),
            (std::vector<std::string>{"counted " + Op(1) + " r1", "certified r1 " + By({0, 1}) + " committee 3"}));
}

TEST_F(CommitRevealTest, RestoredRoundRevealsAgainAfterARestart) {
  TaskRound before = Open(/*self_position=*/1);
  const SignedAttestation own = VoteAt(1, 1);
  const SignedCommitment mine = CommitAt(1, own), theirs = CommitAt(0, VoteAt(0, 1));
  Commit(before, mine);
  Commit(before, theirs);
  ASSERT_TRUE(before.window_closed(VotePhase::kCommittee));
  // After a restart: the stored commitments and the closed window come back; this node's own
  // commitment again says its vote is due (it may never have left before the crash).
  TaskRound after = Open(1);
  after.RestoreCommitment(mine);
  after.RestoreCommitment(theirs);
  after.RestoreClosedWindows(1u, kStart);
  EXPECT_EQ(Commit(after, mine), std::vector<std::string>{"reveal with 2"});
  EXPECT_EQ(Commit(after, mine), std::vector<std::string>{"reveal with 2"});  // each time it signs again
  EXPECT_EQ(Reveal(after, VoteAt(0, 1)), std::vector<std::string>{"counted " + Op(0) + " r1"});
}

}  // namespace
}  // namespace consensor::consensus
