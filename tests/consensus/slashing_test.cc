// Whom an honest node accuses, and with what.
#include "consensus/slashing.h"

#include <gtest/gtest.h>

#include "tests/consensus/operators_fixture.h"

namespace consensor::consensus {
namespace {

using fixture::Addr;
using fixture::Domain;
using fixture::H;

constexpr uint64_t kRef = 50;

SignedAttestation V(int signer, uint8_t result) { return fixture::Vote(signer, H(7), kRef, result); }

Certificate DisputeCertificate(uint8_t result, std::vector<int> signers) {
  Certificate c;
  c.attestation = V(signers[0], result).attestation;
  for (int s : signers) {
    c.signers.push_back(Addr(s));
    c.signatures.push_back(V(s, result).signature);
  }
  return c;
}

TEST(Slashing, EquivocatorsAreAccusedOnce) {
  std::vector<Equivocation> equivocations = {{Addr(2), V(2, 1), V(2, 9)}};
  std::set<Address20> reported;
  auto slashes = ChooseSlashes(Domain(), equivocations, nullptr, {}, Addr(1), &reported);
  ASSERT_EQ(slashes.size(), 1u);
  EXPECT_EQ(slashes[0].kind, SlashDecision::Kind::kEquivocation);
  EXPECT_EQ(slashes[0].accused, Addr(2));
  EXPECT_EQ(slashes[0].first.attestation.result_root, H(1));
  EXPECT_EQ(slashes[0].second.attestation.result_root, H(9));
  EXPECT_FALSE(slashes[0].certificate.has_value());
  EXPECT_TRUE(reported.count(Addr(2)));
  // The same evidence again: already reported.
  EXPECT_TRUE(ChooseSlashes(Domain(), equivocations, nullptr, {}, Addr(1), &reported).empty());
}

TEST(Slashing, NeverAccusesItself) {
  std::vector<Equivocation> equivocations = {{Addr(1), V(1, 1), V(1, 9)}};
  std::set<Address20> reported;
  EXPECT_TRUE(ChooseSlashes(Domain(), equivocations, nullptr, {}, Addr(1), &reported).empty());
  const Certificate cert = DisputeCertificate(1, {2, 3, 4});
  std::vector<SignedAttestation> votes = {V(1, 9)};  // this node signed the losing result
  EXPECT_TRUE(ChooseSlashes(Domain(), {}, &cert, votes, Addr(1), &reported).empty());
}

TEST(Slashing, DisputeConvictsEverySignerOfAnotherResult) {
  const Certificate cert = DisputeCertificate(1, {2, 3, 4});
  std::vector<SignedAttestation> votes = {V(2, 1), V(5, 9), V(3, 1), V(6, 8), V(5, 9)};
  std::set<Address20> reported;
  auto slashes = ChooseSlashes(Domain(), {}, &cert, votes, Addr(1), &reported);
  ASSERT_EQ(slashes.size(), 2u);  // 5 and 6, once each, in vote order
  EXPECT_EQ(slashes[0].accused, Addr(5));
  EXPECT_EQ(slashes[1].accused, Addr(6));
  for (const auto& s : slashes) {
    EXPECT_EQ(s.kind, SlashDecision::Kind::kDispute);
    ASSERT_TRUE(s.certificate.has_value());
    EXPECT_EQ(s.certificate->attestation.result_root, H(1));
    EXPECT_NE(s.first.attestation.result_root, H(1));
  }
  // Without a dispute certificate nobody is convicted by votes alone.
  std::set<Address20> fresh;
  EXPECT_TRUE(ChooseSlashes(Domain(), {}, nullptr, votes, Addr(1), &fresh).empty());
}

TEST(Slashing, AnotherTraceRootAloneIsNotAWrongResult) {
  // Only the result root decides; the dispute bisects traces separately.
  const Certificate cert = DisputeCertificate(1, {2, 3});
  std::vector<SignedAttestation> votes = {fixture::Vote(4, H(7), kRef, 1, /*trace=*/99)};
  std::set<Address20> reported;
  EXPECT_TRUE(ChooseSlashes(Domain(), {}, &cert, votes, Addr(1), &reported).empty());
}

TEST(Slashing, UnrecoverableVotesAreIgnored) {
  const Certificate cert = DisputeCertificate(1, {2, 3});
  SignedAttestation broken = V(5, 9);
  broken.signature[64] = 0;  // v = 0: recovers to nobody
  std::set<Address20> reported;
  EXPECT_TRUE(ChooseSlashes(Domain(), {}, &cert, std::vector<SignedAttestation>{broken}, Addr(1), &reported).empty());
}

}  // namespace
}  // namespace consensor::consensus
