// CheckCertificate, the chain-free part of `consensor verify`: certificates signed here with
// known keys must pass, and every kind of tampering must fail with a message naming the check.
#include "node/cli/verify_command.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "consensus/attestation.h"
#include "consensus/committee.h"
#include "node/api/task_spec.h"
#include "node/keys/keystore.h"

namespace consensor::node {
namespace {

constexpr size_t kOperators = 6;
constexpr uint64_t kRef = 42;
// The hash of the seed block, kRef + R + 1, that the committee is drawn from.
const Hash256 kSeed = [] {
  Hash256 h{};
  h.fill(0x5e);
  return h;
}();

Secp256k1Secret Key(size_t i) {
  Secp256k1Secret k{};
  k[30] = 0x10;
  k[31] = static_cast<uint8_t>(i + 1);
  return k;
}
Address20 Addr(size_t i) { return *AddressFromSecretKey(Key(i)); }

Hash256 H(uint8_t v) {
  Hash256 h{};
  h[0] = 0xab;
  h[31] = v;
  return h;
}

consensus::Eip712Domain Domain() {
  Address20 manager{};
  manager[19] = 0x51;
  return {31337, manager};
}

// Operators 0..5 with 1..6 ether (different weights, so the order is not just the address order).
std::vector<consensus::WeightedOperator> Operators() {
  std::vector<consensus::WeightedOperator> registry;
  for (size_t i = 0; i < kOperators; ++i) {
    registry.push_back({Addr(i), *Uint256FromDecimal(std::to_string(i + 1) + "000000000000000000")});
  }
  return registry;
}

class CheckCertificateTest : public ::testing::Test {
 protected:
  void SetUp() override { Bind(3, 2); }

  // The task the certificates are about: its id is what the attestation signs.
  void Bind(uint32_t replicas, uint32_t quorum) {
    request_ = v1::SubmitTaskRequest();
    request_.set_graph_sha256(ToHex(H(7)));
    (*request_.mutable_inputs())["x"] = ToHex(H(8));
    request_.mutable_options()->set_nonce(5);
    request_.mutable_options()->set_replicas(replicas);
    request_.mutable_options()->set_quorum(quorum);
    request_.mutable_options()->set_protocol_version(consensus::kProtocolVersion);
    attestation_ = {TaskIdOfRequest(request_)->bytes(), H(2), H(3), kRef};
    order_.clear();
    auto order = consensus::CommitteeOrder(attestation_.task_id, kRef, kSeed, registry_, kOperators);
    ASSERT_TRUE(order.ok()) << order.status().ToString();
    for (const Address20& a : *order) {
      for (size_t i = 0; i < kOperators; ++i) {
        if (Addr(i) == a) order_.push_back(i);
      }
    }
    ASSERT_EQ(order_.size(), kOperators);
  }

  // Signs with `signers` (operator indices) and lists them in ascending address order.
  v1::Certificate Make(std::vector<size_t> signers, const consensus::Eip712Domain& domain = Domain()) {
    std::sort(signers.begin(), signers.end(), [](size_t x, size_t y) { return Addr(x) < Addr(y); });
    v1::Certificate c;
    c.set_task_id(ToHex(attestation_.task_id));
    c.set_result_root(ToHex(attestation_.result_root));
    c.set_trace_root(ToHex(attestation_.trace_root));
    c.set_reference_block(kRef);
    for (size_t i : signers) {
      c.add_signers("0x" + ToHex(Addr(i)));
      c.add_signatures(ToHex(*consensus::SignAttestation(Key(i), domain, attestation_)));
    }
    c.set_replicas(request_.options().replicas());
    c.set_quorum(request_.options().quorum());
    c.set_committee_size(request_.options().replicas());
    *c.mutable_request() = request_;
    return c;
  }

  // The operator set at the reference block, as the registry lists it.
  consensus::OperatorSet Set() const { return consensus::OperatorSet::FromRegistry(kRef, registry_); }

  std::string Error(const v1::Certificate& c) {
    auto r = CheckCertificate(c, Domain(), Set(), kSeed);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().message();
  }

  std::vector<consensus::WeightedOperator> registry_ = Operators();
  v1::SubmitTaskRequest request_;
  consensus::Attestation attestation_;
  std::vector<size_t> order_;  // operator indices in committee order
};

TEST_F(CheckCertificateTest, CommitteeQuorumPasses) {
  auto report = CheckCertificate(Make({order_[0], order_[2]}), Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->certificate.attestation, attestation_);
  EXPECT_EQ(report->operator_count, kOperators);
  EXPECT_EQ(Uint256ToDecimal(report->total_stake), "21000000000000000000");
  ASSERT_EQ(report->signers.size(), 2u);
  for (const CertificateSigner& s : report->signers) {
    EXPECT_TRUE(s.position == 0 || s.position == 2) << s.position;
    EXPECT_EQ(s.address, Addr(order_[s.position]));
    EXPECT_EQ(s.stake, registry_[order_[s.position]].stake);
  }
  EXPECT_LT(report->signers[0].address, report->signers[1].address);
  const uint64_t signed_ether = (order_[0] + 1) + (order_[2] + 1);
  EXPECT_EQ(Uint256ToDecimal(report->signed_stake), std::to_string(signed_ether) + "000000000000000000");
  // The whole committee, and a larger prefix (replacements) that includes position 3.
  EXPECT_TRUE(CheckCertificate(Make({order_[0], order_[1], order_[2]}), Domain(), Set(), kSeed).ok());
  // (A committee of 4 needs 3 signatures: the quorum scales with the committee.)
  v1::Certificate replaced = Make({order_[1], order_[3], order_[0]});
  replaced.set_committee_size(4);
  EXPECT_TRUE(CheckCertificate(replaced, Domain(), Set(), kSeed).ok());
}

TEST_F(CheckCertificateTest, ZeroStakeOperatorsAreNotCounted) {
  registry_.push_back({Addr(9), Uint256{}});
  auto report = CheckCertificate(Make({order_[0], order_[1]}), Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->operator_count, kOperators);
}

TEST_F(CheckCertificateTest, WrongSignatureFails) {
  v1::Certificate c = Make({order_[0], order_[1]});
  // Signer 1's slot carries a valid signature by someone else.
  const size_t other = order_[4];
  c.set_signatures(1, ToHex(*consensus::SignAttestation(Key(other), Domain(), attestation_)));
  std::string e = Error(c);
  EXPECT_NE(e.find("signature 1 (signer " + AddressToChecksumHex(*AddressFromHex(c.signers(1))) + ")"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("does not recover to its signer but to " + AddressToChecksumHex(Addr(other))), std::string::npos)
      << e;
}

TEST_F(CheckCertificateTest, MalformedSignatureFails) {
  v1::Certificate c = Make({order_[0], order_[1]});
  std::string sig = c.signatures(0);
  sig.replace(128, 2, "00");  // v = 0
  c.set_signatures(0, sig);
  EXPECT_NE(Error(c).find("signature 0 (signer "), std::string::npos);
  EXPECT_NE(Error(c).find("is malformed"), std::string::npos) << Error(c);
  c.set_signatures(0, sig.substr(0, 128));
  EXPECT_NE(Error(c).find("signatures[0] must be 130 hex digits, got 128"), std::string::npos) << Error(c);
  c.set_signatures(0, std::string(129, '0') + "g");
  EXPECT_NE(Error(c).find("signatures[0] has a non-hex digit 'g'"), std::string::npos) << Error(c);
}

TEST_F(CheckCertificateTest, TamperedAttestationFails) {
  v1::Certificate c = Make({order_[0], order_[1]});
  c.set_result_root(ToHex(H(9)));
  EXPECT_NE(Error(c).find("does not recover to its signer"), std::string::npos) << Error(c);
  c = Make({order_[0], order_[1]});
  c.set_reference_block(kRef + 1);
  EXPECT_FALSE(CheckCertificate(c, Domain(), Set(), kSeed).ok());
}

TEST_F(CheckCertificateTest, WrongDomainFails) {
  consensus::Eip712Domain other_chain = Domain();
  other_chain.chain_id = 1;
  std::string e = Error(Make({order_[0], order_[1]}, other_chain));
  EXPECT_NE(e.find("does not recover to its signer"), std::string::npos) << e;
  EXPECT_NE(e.find("EIP-712 domain of chain 31337"), std::string::npos) << e;
  consensus::Eip712Domain other_contract = Domain();
  other_contract.verifying_contract[0] = 1;
  EXPECT_NE(Error(Make({order_[0], order_[1]}, other_contract)).find("does not recover"), std::string::npos);
}

TEST_F(CheckCertificateTest, UnsortedFails) {
  v1::Certificate c = Make({order_[0], order_[1]});
  std::string s0 = c.signers(0), g0 = c.signatures(0);
  c.set_signers(0, c.signers(1));
  c.set_signatures(0, c.signatures(1));
  c.set_signers(1, s0);
  c.set_signatures(1, g0);
  std::string e = Error(c);
  EXPECT_NE(e.find("signers are not strictly ascending: signer 1"), std::string::npos) << e;
}

TEST_F(CheckCertificateTest, DuplicateFails) {
  v1::Certificate c = Make({order_[0], order_[1]});
  c.add_signers(c.signers(1));
  c.add_signatures(c.signatures(1));
  std::string e = Error(c);
  EXPECT_NE(e.find("appears twice (signatures 1 and 2)"), std::string::npos) << e;
}

TEST_F(CheckCertificateTest, SignerOutsideCommitteePrefixFails) {
  v1::Certificate c = Make({order_[0], order_[3]});
  std::string e = Error(c);
  EXPECT_NE(
      e.find("signer " + AddressToChecksumHex(Addr(order_[3])) + " is at position 3 of the task's committee order"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("outside the committee (positions 0..2)"), std::string::npos) << e;
}

TEST_F(CheckCertificateTest, BelowQuorumFails) {
  std::string e = Error(Make({order_[0]}));
  EXPECT_NE(e.find("1 signatures are fewer than the quorum of 2"), std::string::npos) << e;
}

TEST_F(CheckCertificateTest, CommitteeParametersChecked) {
  v1::Certificate c = Make({order_[0], order_[1]});
  c.set_committee_size(2);
  EXPECT_NE(Error(c).find("committee_size 2 is smaller than replicas 3"), std::string::npos) << Error(c);
  // A task whose own request asks for a minority quorum is refused as such.
  Bind(3, 1);
  c = Make({order_[0], order_[1]});
  EXPECT_NE(Error(c).find("quorum 1 is not a majority of 3 replicas"), std::string::npos) << Error(c);
  Bind(0, 0);
  c = Make({order_[0], order_[1]});
  EXPECT_NE(Error(c).find("replicas is 0"), std::string::npos) << Error(c);
}

// Issue 16, hole 1: one operator signs alone and writes replicas=1, quorum=1 into the unsigned
// fields. The signed task id covers the request's replication, so the forgery is refused
// whether the forger edits the copies, the request, or drops the request.
TEST_F(CheckCertificateTest, ForgedReplicationIsRefused) {
  v1::Certificate c = Make({order_[0]});
  c.set_replicas(1);
  c.set_quorum(1);
  c.set_committee_size(kOperators);
  std::string e = Error(c);
  EXPECT_NE(e.find("claims quorum 1 of 1 replicas, but its signed task asks for quorum 2 of 3"), std::string::npos)
      << e;
  c.mutable_request()->mutable_options()->set_replicas(1);
  c.mutable_request()->mutable_options()->set_quorum(1);
  e = Error(c);
  EXPECT_NE(e.find("but its signatures are over task " + ToHex(attestation_.task_id)), std::string::npos) << e;
  c.clear_request();
  e = Error(c);
  EXPECT_NE(e.find("does not carry its task's request"), std::string::npos) << e;
  // Leaving the copies out changes nothing: they come from the signed request.
  c = Make({order_[0], order_[1]});
  c.set_replicas(0);
  c.set_quorum(0);
  auto report = CheckCertificate(c, Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->certificate.replicas, 3u);
  EXPECT_EQ(report->certificate.quorum, 2u);
}

TEST_F(CheckCertificateTest, NonOperatorFails) {
  // Key 7 never registered: a valid signature, but no stake at the reference block.
  v1::Certificate c = Make({order_[0], order_[1]});
  c.add_signers("0x" + ToHex(Addr(7)));
  c.add_signatures(ToHex(*consensus::SignAttestation(Key(7), Domain(), attestation_)));
  // Keep the ascending order: rebuild from a set that contains 7.
  registry_.push_back({Addr(7), Uint256{}});  // listed, but zero stake
  std::vector<std::pair<std::string, std::string>> rows;
  for (int i = 0; i < c.signers_size(); ++i) rows.push_back({c.signers(i), c.signatures(i)});
  std::sort(rows.begin(), rows.end(),
            [](const auto& x, const auto& y) { return *AddressFromHex(x.first) < *AddressFromHex(y.first); });
  for (int i = 0; i < c.signers_size(); ++i) {
    c.set_signers(i, rows[i].first);
    c.set_signatures(i, rows[i].second);
  }
  std::string e = Error(c);
  EXPECT_NE(e.find("signer " + AddressToChecksumHex(Addr(7)) + " is not an operator at reference block 42"),
            std::string::npos)
      << e;
}

TEST_F(CheckCertificateTest, DisputeCommitteeIsTheWholeSet) {
  // Positions 3, 4, 5 are outside any result committee of 3, but a dispute counts everyone.
  v1::Certificate c = Make({order_[3], order_[4], order_[5]});
  c.set_dispute(true);
  c.set_quorum(0);
  c.set_replicas(0);
  c.set_committee_size(0);
  auto report = CheckCertificate(c, Domain(), Set(), kSeed);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  for (const CertificateSigner& s : report->signers) EXPECT_GE(s.position, 3u);
  // Still: signatures, order and membership.
  c.set_signatures(0, c.signatures(1));
  EXPECT_NE(Error(c).find("does not recover to its signer"), std::string::npos);
}

TEST_F(CheckCertificateTest, FormatErrorsNameTheField) {
  v1::Certificate c = Make({order_[0], order_[1]});
  c.set_task_id("xyz");
  EXPECT_NE(Error(c).find("task_id must be 64 hex digits, got 3"), std::string::npos) << Error(c);
  c = Make({order_[0], order_[1]});
  c.set_trace_root("0x" + c.trace_root());  // a 0x prefix is fine
  EXPECT_TRUE(CheckCertificate(c, Domain(), Set(), kSeed).ok());
  c.set_signers(1, "0x1234");
  EXPECT_NE(Error(c).find("signers[1]: "), std::string::npos) << Error(c);
  c = Make({order_[0], order_[1]});
  c.add_signatures(c.signatures(0));
  EXPECT_NE(Error(c).find("2 signers but 3 signatures"), std::string::npos) << Error(c);
  EXPECT_NE(Error(v1::Certificate(Make({}))).find("no signers"), std::string::npos);
  v1::Certificate big = Make({order_[0]});
  for (size_t i = 0; i < kMaxCertificateSigners; ++i) {
    big.add_signers(big.signers(0));
    big.add_signatures(big.signatures(0));
  }
  EXPECT_NE(Error(big).find("more than 1024"), std::string::npos) << Error(big);
}

TEST_F(CheckCertificateTest, OperatorListedTwiceIsRejected) {
  // The registry's operator list is one list of (address, stake) now, so it cannot disagree
  // with itself; an operator listed twice still must not count twice.
  registry_.push_back(registry_[0]);
  EXPECT_NE(Error(Make({order_[0], order_[1]})).find("appears twice in the operator set"), std::string::npos)
      << Error(Make({order_[0], order_[1]}));
}

}  // namespace
}  // namespace consensor::node
