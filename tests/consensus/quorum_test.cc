#include "consensus/quorum.h"

#include <gtest/gtest.h>

#include "common/keccak.h"
#include "common/secp256k1_sign.h"

namespace consensor::consensus {
namespace {

Secp256k1Secret Key(int i) { return Keccak256("operator key " + std::to_string(i)); }
Address20 Addr(int i) { return *AddressFromSecretKey(Key(i)); }

Hash256 H(uint8_t v) {
  Hash256 h{};
  h[31] = v;
  return h;
}

class QuorumTest : public ::testing::Test {
 protected:
  SignedAttestation Vote(int signer, uint8_t result, uint8_t trace = 3, uint8_t task = 7, uint64_t block = 100) {
    SignedAttestation sa;
    sa.attestation = {H(task), H(result), H(trace), block};
    sa.signature = *SignAttestation(Key(signer), domain_, sa.attestation);
    return sa;
  }
  QuorumTracker Tracker(size_t quorum) {
    return std::move(QuorumTracker::Create(domain_, H(7), 100, {Addr(1), Addr(2), Addr(3), Addr(4)}, quorum)).value();
  }
  Eip712Domain domain_{31337, Address20{0x11}};
};

TEST_F(QuorumTest, FinalizesWithASortedCertificate) {
  QuorumTracker t = Tracker(3);
  EXPECT_EQ(*t.Add(Vote(4, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t.Add(Vote(4, 1)), AddOutcome::kDuplicate);
  EXPECT_EQ(*t.Add(Vote(2, 1)), AddOutcome::kCounted);
  EXPECT_FALSE(t.finalized());
  EXPECT_EQ(*t.Add(Vote(1, 1)), AddOutcome::kFinalized);
  ASSERT_TRUE(t.finalized());
  const Certificate& c = *t.certificate();
  EXPECT_EQ(c.attestation.result_root, H(1));
  ASSERT_EQ(c.signers.size(), 3u);
  EXPECT_TRUE(std::is_sorted(c.signers.begin(), c.signers.end()));
  for (size_t i = 0; i < c.signers.size(); ++i) {
    EXPECT_EQ(*RecoverAttestationSigner(domain_, c.attestation, c.signatures[i]), c.signers[i]);
  }
  // Later votes still count, but the certificate does not change.
  EXPECT_EQ(*t.Add(Vote(3, 1)), AddOutcome::kCounted);
  EXPECT_EQ(t.certificate()->signers.size(), 3u);
  EXPECT_EQ(t.votes_for(Vote(3, 1).attestation), 4u);
  EXPECT_FALSE(t.conflicting());
}

// Issue 16, hole 7: a member signs the right result root with a garbage trace root. That is no
// conflict (no dispute, nobody slashable); the vote simply does not count with the others.
TEST_F(QuorumTest, TraceOnlyDifferenceIsNoConflict) {
  QuorumTracker t = Tracker(3);
  EXPECT_EQ(*t.Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t.Add(Vote(2, 1, /*trace=*/5)), AddOutcome::kCounted);
  EXPECT_FALSE(t.conflicting());
  EXPECT_TRUE(t.equivocations().empty());
  EXPECT_EQ(t.votes_for(Vote(1, 1).attestation), 1u);
  EXPECT_EQ(*t.Add(Vote(3, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t.Add(Vote(4, 1)), AddOutcome::kFinalized);  // the matching three certify
  for (const Address20& s : t.certificate()->signers) EXPECT_NE(s, Addr(2));
  // A different result root is a conflict, whatever the trace roots.
  QuorumTracker other = Tracker(3);
  EXPECT_EQ(*other.Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*other.Add(Vote(2, 9, /*trace=*/5)), AddOutcome::kCounted);
  EXPECT_TRUE(other.conflicting());
}

TEST_F(QuorumTest, ConflictsAndEquivocationAreRecorded) {
  QuorumTracker t = Tracker(3);
  EXPECT_EQ(*t.Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t.Add(Vote(2, 9)), AddOutcome::kCounted);  // another result: a conflict
  EXPECT_TRUE(t.conflicting());
  // Operator 2 also signs result 1: equivocation evidence, and not counted for result 1.
  EXPECT_EQ(*t.Add(Vote(2, 1)), AddOutcome::kConflictingVote);
  ASSERT_EQ(t.equivocations().size(), 1u);
  const Equivocation& e = t.equivocations()[0];
  EXPECT_EQ(e.signer, Addr(2));
  EXPECT_EQ(e.first.attestation.result_root, H(9));
  EXPECT_EQ(e.second.attestation.result_root, H(1));
  EXPECT_EQ(t.votes_for(Vote(1, 1).attestation), 1u);
  // Same result root with another trace root: not counted, not slashable as equivocation.
  EXPECT_EQ(*t.Add(Vote(1, 1, /*trace=*/5)), AddOutcome::kConflictingVote);
  EXPECT_EQ(t.equivocations().size(), 1u);
  EXPECT_EQ(*t.Add(Vote(3, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t.Add(Vote(4, 1)), AddOutcome::kFinalized);
}

TEST_F(QuorumTest, RejectsOutsidersAndMismatches) {
  QuorumTracker t = Tracker(2);
  EXPECT_EQ(t.Add(Vote(9, 1)).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(t.Add(Vote(1, 1, 3, /*task=*/8)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Add(Vote(1, 1, 3, 7, /*block=*/99)).status().code(), StatusCode::kInvalidArgument);
  SignedAttestation forged = Vote(1, 1);
  forged.attestation.result_root = H(2);  // signature no longer matches: recovers someone else
  EXPECT_EQ(t.Add(forged).status().code(), StatusCode::kPermissionDenied);
  SignedAttestation garbage = Vote(1, 1);
  garbage.signature[64] = 5;  // invalid v
  EXPECT_EQ(t.Add(garbage).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(t.finalized());
  EXPECT_EQ(QuorumTracker::Create(domain_, H(7), 100, {}, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QuorumTracker::Create(domain_, H(7), 100, {Addr(1)}, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QuorumTracker::Create(domain_, H(7), 100, {Addr(1), Addr(1)}, 1).status().code(),
            StatusCode::kInvalidArgument);
}

std::array<uint8_t, 32> Stake(uint64_t v) {
  std::array<uint8_t, 32> s{};
  for (int i = 0; i < 8; ++i) s[31 - i] = static_cast<uint8_t>(v >> (8 * i));
  return s;
}

TEST_F(QuorumTest, StakeModeFinalizesAtTheContractsThreshold) {
  // Four operators with 1, 1, 1, 3 units; 6667 bps of 6 needs 4.0002, so 3 + 1 + ... is needed.
  std::vector<WeightedOperator> ops = {
      {Addr(1), Stake(1)}, {Addr(2), Stake(1)}, {Addr(3), Stake(1)}, {Addr(4), Stake(3)}};
  auto t = QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, Stake(6), 6667);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t->Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t->Add(Vote(2, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t->Add(Vote(3, 1)), AddOutcome::kCounted);  // 3 of 6 = 50%: not enough
  EXPECT_FALSE(t->finalized());
  EXPECT_EQ(*t->Add(Vote(4, 1)), AddOutcome::kFinalized);  // 6 of 6
  EXPECT_EQ(t->certificate()->signers.size(), 4u);

  // 4 of 6 is 66.67% > 6667 bps? 4 * 10000 = 40000 < 6 * 6667 = 40002: still not enough.
  auto u = QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, Stake(6), 6667);
  EXPECT_EQ(*u->Add(Vote(4, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*u->Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_FALSE(u->finalized());
  EXPECT_EQ(*u->Add(Vote(2, 1)), AddOutcome::kFinalized);  // 5 of 6
}

TEST_F(QuorumTest, StakeModeRejectsBadParameters) {
  std::vector<WeightedOperator> ops = {{Addr(1), Stake(5)}};
  EXPECT_FALSE(QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, Stake(4), 6667).ok());  // more than total
  EXPECT_FALSE(QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, Stake(9), 0).ok());
  EXPECT_FALSE(QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, Stake(9), 10001).ok());
  std::array<uint8_t, 32> huge{};
  huge[16] = 0x40;  // 2^126
  EXPECT_FALSE(QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, huge, 6667).ok());
  auto t = QuorumTracker::CreateWeighted(domain_, H(7), 100, ops, Stake(9), 6667);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->ExtendCommittee({Addr(2)}).ok());
}

TEST_F(QuorumTest, ExtendedCommitteeAcceptsTheReplacement) {
  auto t = QuorumTracker::Create(domain_, H(7), 100, {Addr(1), Addr(2), Addr(3)}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_EQ(t->Add(Vote(4, 1)).status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(t->ExtendCommittee({Addr(4), Addr(1)}).ok());
  EXPECT_EQ(t->committee_size(), 4u);
  EXPECT_TRUE(t->is_member(Addr(4)));
  EXPECT_EQ(t->quorum(), 3u);                            // 2 of 3, scaled to a committee of 4
  EXPECT_EQ(*t->Add(Vote(4, 1)), AddOutcome::kCounted);  // 2 of the first 4: not enough
  // A late original member: 2 of the first 3 certify, as the task asked.
  EXPECT_EQ(*t->Add(Vote(2, 1)), AddOutcome::kFinalized);
  EXPECT_EQ(t->certified_committee_size(), 3u);
  EXPECT_EQ(t->certificate()->signers.size(), 2u);  // operator 4 is outside that committee
}

// Two of the three replicas stay silent; three replacements join. The first 6 of the order
// need 4 signatures (2 of 3, scaled), so the replacements plus the one live member certify,
// and no smaller group could.
TEST_F(QuorumTest, ReplacementsCertifyOnlyWithTheScaledQuorum) {
  auto t = QuorumTracker::Create(domain_, H(7), 100, {Addr(1), Addr(2), Addr(3)}, 2);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->ExtendCommittee({Addr(4), Addr(5), Addr(6)}).ok());
  EXPECT_EQ(*t->Add(Vote(1, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t->Add(Vote(4, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t->Add(Vote(5, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*t->Add(Vote(6, 1)), AddOutcome::kFinalized);
  EXPECT_EQ(t->certified_committee_size(), 6u);
  EXPECT_EQ(t->certificate()->signers.size(), 4u);
  // Restored with the same committee: the same rule.
  auto restored =
      QuorumTracker::Create(domain_, H(7), 100, {Addr(1), Addr(2), Addr(3), Addr(4), Addr(5), Addr(6)}, 2, 3);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->quorum(), 4u);
  EXPECT_EQ(*restored->Add(Vote(5, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*restored->Add(Vote(6, 1)), AddOutcome::kCounted);
  EXPECT_EQ(*restored->Add(Vote(4, 1)), AddOutcome::kCounted);  // 3 deep in the order: not 4
  EXPECT_FALSE(restored->finalized());
}

}  // namespace
}  // namespace consensor::consensus
