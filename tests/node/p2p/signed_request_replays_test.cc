// Each signed peer request is served once (node/p2p/signed_request_replays.h): the bookkeeping
// alone, with the clock given by the test.
#include "node/p2p/signed_request_replays.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "common/sha256.h"

namespace consensor::node {
namespace {

Address20 Operator(uint8_t n) {
  Address20 a{};
  a[19] = n;
  return a;
}

Hash256 Digest(int n) { return Sha256Of("request " + std::to_string(n)); }

constexpr int64_t kNow = 1'800'000'000'000;

TEST(SignedRequestReplaysTest, ARepeatIsRefusedAndADifferentRequestIsNot) {
  SignedRequestReplays replays(std::chrono::milliseconds(60000), 100);
  ASSERT_TRUE(replays.Admit("GetTask", Operator(1), Digest(1), kNow, kNow).ok());
  Status again = replays.Admit("GetTask", Operator(1), Digest(1), kNow, kNow + 5);
  EXPECT_EQ(again.code(), StatusCode::kUnauthenticated) << again.ToString();
  EXPECT_NE(again.message().find("served once"), std::string::npos) << again.ToString();
  // Another request at the same millisecond, the same request body from another operator, and
  // the same digest at another time are all new.
  EXPECT_TRUE(replays.Admit("GetTask", Operator(1), Digest(2), kNow, kNow).ok());
  EXPECT_TRUE(replays.Admit("GetTask", Operator(2), Digest(1), kNow, kNow).ok());
  EXPECT_TRUE(replays.Admit("GetTask", Operator(1), Digest(1), kNow + 1, kNow + 1).ok());
  EXPECT_EQ(replays.remembered(), 4u);
}

// A request is remembered for as long as the signature check would let it through (its time
// within the skew of the receiver's clock, in the future too), and forgotten afterwards.
TEST(SignedRequestReplaysTest, RequestsAreRememberedForTheirWholeValidityAndNoLonger) {
  SignedRequestReplays replays(std::chrono::milliseconds(60000), 100);
  const int64_t future = kNow + 59'000;  // a peer whose clock runs 59 s ahead
  ASSERT_TRUE(replays.Admit("Pull", Operator(1), Digest(1), future, kNow).ok());
  ASSERT_TRUE(replays.Admit("Pull", Operator(1), Digest(2), kNow, kNow).ok());
  // Just over 60 s later the first is still valid (its time is 1 s in the past): still a replay.
  EXPECT_EQ(replays.Admit("Pull", Operator(1), Digest(1), future, kNow + 60'001).code(), StatusCode::kUnauthenticated);
  // The second is now just outside the window: forgotten (the skew check refuses it from here on).
  EXPECT_EQ(replays.remembered(), 1u);
  EXPECT_TRUE(replays.Admit("Pull", Operator(1), Digest(3), kNow + 120'000, kNow + 120'000).ok());
  EXPECT_EQ(replays.remembered(), 1u);
}

// One operator's flood fills only its own share: it is refused past the cap, remembers nothing
// it was refused, and another operator is served.
TEST(SignedRequestReplaysTest, EachOperatorHasABoundedShare) {
  SignedRequestReplays replays(std::chrono::milliseconds(60000), 10);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(replays.Admit("GetBlob", Operator(1), Digest(i), kNow, kNow).ok()) << i;
  Status full = replays.Admit("GetBlob", Operator(1), Digest(10), kNow, kNow);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.ToString();
  EXPECT_EQ(replays.remembered(), 10u);
  EXPECT_TRUE(replays.Admit("GetBlob", Operator(2), Digest(10), kNow, kNow).ok());
  // Once its window has passed, the flooder is served again.
  EXPECT_TRUE(replays.Admit("GetBlob", Operator(1), Digest(10), kNow + 61'000, kNow + 61'000).ok());
}

// An honest node never signs two requests at the same millisecond, so two identical requests
// made back to back are never mistaken for a replay.
TEST(SignedRequestReplaysTest, SigningTimesAreUniqueWithinAProcess) {
  std::set<uint64_t> times;
  uint64_t last = 0;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t t = UniqueRequestMillis();
    EXPECT_GT(t, last);
    last = t;
    times.insert(t);
  }
  EXPECT_EQ(times.size(), 5000u);
}

}  // namespace
}  // namespace consensor::node
