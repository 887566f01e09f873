// Signed GetBlob requests (node/p2p/peer_request_auth.h): what a peer accepts as an operator's.
#include "node/p2p/peer_request_auth.h"

#include <gtest/gtest.h>

#include "common/clock.h"

namespace consensor::node {
namespace {

Secp256k1Secret SecretNumber(uint8_t n) {
  Secp256k1Secret secret{};
  secret[31] = n;
  return secret;
}

constexpr std::chrono::milliseconds kSkew{60000};

TEST(PeerRequestAuthTest, SignedRequestNamesItsOperatorAndNothingElsePasses) {
  const PeerRequestDomain domain{31337, Address20{0xc0, 0x47}};
  const Address20 signer = AddressFromSecretKey(SecretNumber(7)).value();
  auto is_operator = [&](const Address20& a) { return a == signer; };
  v1::GetBlobRequest request;
  request.set_sha256(std::string(64, 'a'));
  ASSERT_TRUE(SignGetBlob(SecretNumber(7), domain, &request).ok());
  const int64_t now = static_cast<int64_t>(request.sent_unix_ms());
  EXPECT_NEAR(static_cast<double>(now), static_cast<double>(UnixMillisNow()), 10000.0);

  GetBlobAuth auth = VerifyGetBlob(domain, request, now, kSkew, is_operator);
  EXPECT_EQ(auth.outcome, GetBlobAuth::Outcome::kOperator) << auth.error;
  EXPECT_EQ(auth.requester, signer);

  using Outcome = GetBlobAuth::Outcome;
  auto outcome = [&](const v1::GetBlobRequest& r, const PeerRequestDomain& d = {31337, Address20{0xc0, 0x47}},
                     int64_t at = -1) { return VerifyGetBlob(d, r, at < 0 ? now : at, kSkew, is_operator).outcome; };
  v1::GetBlobRequest other_blob = request;  // the signature covers the blob asked for
  other_blob.set_sha256(std::string(64, 'b'));
  EXPECT_EQ(outcome(other_blob), Outcome::kBadSignature);
  EXPECT_EQ(outcome(request, PeerRequestDomain{31337, Address20{0xc0, 0x48}}), Outcome::kBadSignature)
      << "another deployment on the same chain";
  EXPECT_EQ(outcome(request, PeerRequestDomain{1, Address20{0xc0, 0x47}}), Outcome::kBadSignature);
  EXPECT_EQ(outcome(request, domain, now + kSkew.count() + 1), Outcome::kBadSignature) << "stale";
  EXPECT_EQ(outcome(request, domain, now - kSkew.count() - 1), Outcome::kBadSignature) << "from the future";
  v1::GetBlobRequest claimed = request;  // someone else's address with this signature
  const Address20 victim = AddressFromSecretKey(SecretNumber(8)).value();
  claimed.set_requester(reinterpret_cast<const char*>(victim.data()), victim.size());
  EXPECT_EQ(outcome(claimed), Outcome::kBadSignature);
  v1::GetBlobRequest half = request;  // a requester without a signature is not "unsigned"
  half.clear_signature();
  EXPECT_EQ(outcome(half), Outcome::kBadSignature);
  v1::GetBlobRequest junk = request;
  junk.set_signature(std::string(65, '\xff'));
  EXPECT_EQ(outcome(junk), Outcome::kBadSignature);

  v1::GetBlobRequest unsigned_request;
  unsigned_request.set_sha256(request.sha256());
  EXPECT_EQ(outcome(unsigned_request), Outcome::kUnsigned);

  v1::GetBlobRequest outsider;
  outsider.set_sha256(request.sha256());
  ASSERT_TRUE(SignGetBlob(SecretNumber(9), domain, &outsider).ok());
  GetBlobAuth refused = VerifyGetBlob(domain, outsider, now, kSkew, is_operator);
  EXPECT_EQ(refused.outcome, Outcome::kNotAnOperator);
  EXPECT_NE(refused.error.find("not an active operator"), std::string::npos) << refused.error;
}

// GetTask and GetNodeInfo are signed the same way, each under its own tag: a signature for one
// call does not pass as another's, and the task asked for is covered.
TEST(PeerRequestAuthTest, GetTaskAndGetNodeInfoAreSignedUnderTheirOwnTags) {
  const PeerRequestDomain domain{31337, Address20{0xc0, 0x47}};
  const Address20 signer = AddressFromSecretKey(SecretNumber(7)).value();
  auto is_operator = [&](const Address20& a) { return a == signer; };
  using Outcome = PeerRequestAuth::Outcome;

  v1::GetTaskRequest task;
  task.set_task_id(std::string(64, 'c'));
  ASSERT_TRUE(SignGetTask(SecretNumber(7), domain, &task).ok());
  const int64_t now = static_cast<int64_t>(task.sent_unix_ms());
  PeerRequestAuth auth = VerifyGetTask(domain, task, now, kSkew, is_operator);
  EXPECT_EQ(auth.outcome, Outcome::kOperator) << auth.error;
  EXPECT_EQ(auth.requester, signer);
  v1::GetTaskRequest other_task = task;
  other_task.set_task_id(std::string(64, 'd'));
  auth = VerifyGetTask(domain, other_task, now, kSkew, is_operator);
  EXPECT_EQ(auth.outcome, Outcome::kBadSignature);
  EXPECT_NE(auth.error.find("GetTask signature"), std::string::npos) << auth.error;
  EXPECT_EQ(VerifyGetTask(PeerRequestDomain{31337, Address20{0xc0, 0x48}}, task, now, kSkew, is_operator).outcome,
            Outcome::kBadSignature);
  EXPECT_EQ(VerifyGetTask(domain, task, now + kSkew.count() + 1, kSkew, is_operator).outcome, Outcome::kBadSignature);
  v1::GetTaskRequest plain;
  plain.set_task_id(task.task_id());
  EXPECT_EQ(VerifyGetTask(domain, plain, now, kSkew, is_operator).outcome, Outcome::kUnsigned);
  EXPECT_FALSE(ClaimsSignature(plain));
  EXPECT_TRUE(ClaimsSignature(task));

  v1::GetNodeInfoRequest info;
  ASSERT_TRUE(SignGetNodeInfo(SecretNumber(7), domain, &info).ok());
  EXPECT_EQ(VerifyGetNodeInfo(domain, info, now, kSkew, is_operator).outcome, Outcome::kOperator);
  // The same requester, time and signature moved onto another call do not verify there.
  v1::GetTaskRequest moved;
  moved.set_requester(info.requester());
  moved.set_sent_unix_ms(info.sent_unix_ms());
  moved.set_signature(info.signature());
  EXPECT_EQ(VerifyGetTask(domain, moved, now, kSkew, is_operator).outcome, Outcome::kBadSignature);
  v1::GetNodeInfoRequest outsider;
  ASSERT_TRUE(SignGetNodeInfo(SecretNumber(9), domain, &outsider).ok());
  EXPECT_EQ(VerifyGetNodeInfo(domain, outsider, now, kSkew, is_operator).outcome, Outcome::kNotAnOperator);
}

}  // namespace
}  // namespace consensor::node
