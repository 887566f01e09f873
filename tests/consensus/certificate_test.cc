// Certificate validity on hand-made operator sets, without a chain or a wire format.
#include "consensus/certificate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/address.h"
#include "consensus/committee.h"
#include "consensus/task.h"
#include "tests/consensus/operators_fixture.h"

namespace consensor::consensus {
namespace {

using fixture::Addr;
using fixture::Domain;
using fixture::Ether;
using fixture::H;
using fixture::Key;

constexpr uint64_t kRef = 42;
// The hash of the seed block, kRef + R + 1, that the committee is drawn from.
const Hash256 kSeed = [] {
  Hash256 h{};
  h.fill(0x5e);
  return h;
}();
constexpr int kOperators = 6;

class CertificateRules : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= kOperators; ++i) registry_.push_back({Addr(i), Ether(i)});  // unequal weights
    Bind(3, 2);
  }
  // The task the certificates are about; its id is what the signatures cover.
  void Bind(uint32_t replicas, uint32_t quorum) {
    task_ = TaskSpec{H(7), {{"x", H(8)}}, 5, replicas, quorum};
    attestation_.task_id = ComputeTaskId(task_)->bytes();
    order_.clear();
    auto order = CommitteeOrder(attestation_.task_id, kRef, kSeed, registry_, kOperators);
    ASSERT_TRUE(order.ok());
    for (const Address20& a : *order) order_.push_back(fixture::OperatorNumber(a, kOperators));
  }
  OperatorSet Set() const { return OperatorSet::FromRegistry(kRef, registry_); }

  // A result certificate (3 replicas, quorum 2, committee 3) signed by `signers`.
  CertificateClaims Make(std::vector<int> signers, const Eip712Domain& domain = Domain()) const {
    std::sort(signers.begin(), signers.end(), [](int x, int y) { return Addr(x) < Addr(y); });
    CertificateClaims c;
    c.attestation = attestation_;
    for (int s : signers) {
      c.signers.push_back(Addr(s));
      auto sig = *SignAttestation(Key(s), domain, attestation_);
      c.signatures.emplace_back(sig.begin(), sig.end());
    }
    c.task = task_;
    c.replicas = task_.replicas;
    c.quorum = task_.quorum;
    c.committee_size = 3;
    return c;
  }
  std::string Error(const CertificateClaims& c) const {
    auto r = CheckCertificate(c, Domain(), Set(), kSeed);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().message();
  }

  TaskSpec task_;
  Attestation attestation_{H(1), H(2), H(3), kRef};
  std::vector<WeightedOperator> registry_;
  std::vector<int> order_;  // operator numbers in committee order
};

TEST_F(CertificateRules, CommitteeQuorumPasses) {
  auto report = CheckCertificate(Make({order_[0], order_[2]}), Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->operator_count, 6u);
  EXPECT_EQ(Uint256ToDecimal(report->total_stake), "21000000000000000000");
  ASSERT_EQ(report->signers.size(), 2u);
  const uint64_t signed_ether = static_cast<uint64_t>(order_[0] + order_[2]);
  EXPECT_EQ(Uint256ToDecimal(report->signed_stake), std::to_string(signed_ether) + "000000000000000000");
  for (const CertificateSigner& s : report->signers) EXPECT_TRUE(s.position == 0 || s.position == 2);
}

TEST_F(CertificateRules, EveryRuleHasItsFailure) {
  CertificateClaims c = Make({order_[0], order_[1]});
  c.signatures[1] = Make({order_[4]}).signatures[0];  // someone else's valid signature
  EXPECT_NE(Error(c).find("does not recover to its signer"), std::string::npos);

  c = Make({order_[0], order_[1]}, Eip712Domain{1, Address20{0x51}});
  EXPECT_NE(Error(c).find("EIP-712 domain of chain 31337"), std::string::npos) << Error(c);

  c = Make({order_[0], order_[1]});
  std::swap(c.signers[0], c.signers[1]);
  std::swap(c.signatures[0], c.signatures[1]);
  EXPECT_NE(Error(c).find("not strictly ascending"), std::string::npos) << Error(c);

  c = Make({order_[0], order_[1]});
  c.signers.push_back(c.signers[1]);
  c.signatures.push_back(c.signatures[1]);
  EXPECT_NE(Error(c).find("appears twice (signatures 1 and 2)"), std::string::npos) << Error(c);

  c = Make({order_[0], order_[3]});
  EXPECT_NE(Error(c).find("is at position 3 of the task's committee order"), std::string::npos) << Error(c);

  EXPECT_NE(Error(Make({order_[0]})).find("1 signatures are fewer than the quorum of 2"), std::string::npos);

  c = Make({order_[0], order_[1]});
  c.committee_size = 2;
  EXPECT_NE(Error(c).find("committee_size 2 is smaller than replicas 3"), std::string::npos) << Error(c);
  // Replication comes from the signed task: a minority quorum or no replicas in the request
  // itself are refused as such...
  Bind(3, 1);
  c = Make({order_[0], order_[1]});
  EXPECT_NE(Error(c).find("quorum 1 is not a majority of 3 replicas"), std::string::npos) << Error(c);
  Bind(0, 0);
  c = Make({order_[0], order_[1]});
  EXPECT_NE(Error(c).find("replicas is 0"), std::string::npos) << Error(c);
  Bind(3, 2);

  c = Make({order_[0], order_[1]});
  c.signatures.pop_back();
  EXPECT_NE(Error(c).find("2 signers but 1 signatures"), std::string::npos) << Error(c);
  c.signers.clear();
  c.signatures.clear();
  EXPECT_NE(Error(c).find("no signers"), std::string::npos) << Error(c);
}

// Issue 16, hole 1: the unsigned copies of replicas and quorum cannot lower what the signed task
// asks for, and a certificate without its task, or with another task, proves nothing.
TEST_F(CertificateRules, ReplicationComesFromTheSignedTask) {
  CertificateClaims c = Make({order_[0]});
  c.replicas = 1;
  c.quorum = 1;
  EXPECT_NE(Error(c).find("claims quorum 1 of 1 replicas, but its signed task asks for quorum 2 of 3"),
            std::string::npos)
      << Error(c);
  c.task->replicas = 1;
  c.task->quorum = 1;
  EXPECT_NE(Error(c).find("but its signatures are over task " + ToHex(attestation_.task_id)), std::string::npos)
      << Error(c);
  c.task.reset();
  EXPECT_NE(Error(c).find("does not carry its task's request"), std::string::npos) << Error(c);
  // Absent copies are filled from the task.
  c = Make({order_[0], order_[1]});
  c.replicas = c.quorum = 0;
  auto report = CheckCertificate(c, Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->certificate.replicas, 3u);
  EXPECT_EQ(report->certificate.quorum, 2u);
}

TEST_F(CertificateRules, SignerWithoutStakeIsNoOperator) {
  registry_.push_back({Addr(7), Uint256{}});  // registered, zero stake at the reference block
  CertificateClaims c = Make({order_[0], order_[1], 7});
  EXPECT_NE(Error(c).find("signer " + AddressToChecksumHex(Addr(7)) + " is not an operator at reference block 42"),
            std::string::npos)
      << Error(c);
}

TEST_F(CertificateRules, LargerCommitteeAfterReplacementsAdmitsLaterPositions) {
  // A committee of 4 (one replacement) needs ceil(2 * 4 / 3) = 3 signatures.
  CertificateClaims c = Make({order_[1], order_[3], order_[0]});
  c.committee_size = 4;
  EXPECT_TRUE(CheckCertificate(c, Domain(), Set(), kSeed).ok());
  c = Make({order_[1], order_[3]});
  c.committee_size = 4;
  EXPECT_NE(Error(c).find("2 signatures are fewer than the quorum of 3 that a committee of 4 needs"), std::string::npos)
      << Error(c);
}

// The forgery of issue 16 on the committee size: two colluders anywhere in the order claim the
// committee is the whole operator set. The quorum scales with the claimed size, so they need 4
// of 6, not 2.
TEST_F(CertificateRules, ClaimingTheWholeSetAsCommitteeNeedsItsMajority) {
  CertificateClaims c = Make({order_[4], order_[5]});
  c.committee_size = kOperators;
  EXPECT_NE(Error(c).find("fewer than the quorum of 4 that a committee of 6 needs"), std::string::npos) << Error(c);
  c = Make({order_[2], order_[3], order_[4], order_[5]});
  c.committee_size = kOperators;
  EXPECT_TRUE(CheckCertificate(c, Domain(), Set(), kSeed).ok());
}

TEST_F(CertificateRules, DisputeCountsTheWholeSet) {
  CertificateClaims c = Make({order_[3], order_[4], order_[5]});
  c.dispute = true;
  c.quorum = c.replicas = c.committee_size = 0;
  auto report = CheckCertificate(c, Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  for (const CertificateSigner& s : report->signers) EXPECT_GE(s.position, 3u);
}

TEST_F(CertificateRules, TooManySignersIsRefusedBeforeAnyWork) {
  CertificateClaims c = Make({order_[0]});
  c.signers.assign(kMaxCertificateSigners + 1, c.signers[0]);
  c.signatures.assign(kMaxCertificateSigners + 1, c.signatures[0]);
  EXPECT_NE(Error(c).find("more than 1024"), std::string::npos) << Error(c);
}

}  // namespace
}  // namespace consensor::consensus
