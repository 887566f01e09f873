// Per-peer rates on the peer port (node/p2p/peer_rate_budget.h): the bookkeeping alone. The
// rates here are a few per second, so the buckets do not refill measurably while a test runs.
#include "node/p2p/peer_rate_budget.h"

#include <gtest/gtest.h>

#include <string>

namespace consensor::node {
namespace {

PeerRateNames Names() {
  return PeerRateNames{.what = "test calls",
                       .requester_key = "p2p.test_per_operator",
                       .host_key = "p2p.test_per_host",
                       .metric = "consensor_p2p_test_refused_total",
                       .help = "test",
                       .calls = {"A", "B"}};
}

// Operators sharing a host (a devnet: all 127.0.0.1) each get their own rate, a host's unsigned
// requests share one, and the host's rate is the outer bound over all of them. An operator over
// its own rate spends nothing of its host's, so its flood does not starve the others there.
TEST(PeerRateBudgetTest, OperatorsOnOneHostHaveRatesOfTheirOwnWithinTheHostBound) {
  MetricsRegistry metrics;
  PeerRateBudget budget(PeerRateLimits{.per_requester = 2, .per_host = 5}, Names(), &metrics);  // bursts 4, 10
  const std::string host = "127.0.0.1";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(budget.Take("A", host, "0xaa").ok()) << i;
  // The flooder, past its own burst: refused, naming itself and its budget, however often.
  for (int i = 0; i < 100; ++i) {
    Status over = budget.Take(i % 2 ? "A" : "B", host, "0xaa");
    ASSERT_EQ(over.code(), StatusCode::kResourceExhausted);
    EXPECT_NE(over.message().find("operator 0xaa"), std::string::npos) << over.message();
    EXPECT_NE(over.message().find("p2p.test_per_operator"), std::string::npos) << over.message();
  }
  // Another operator on the same host has its whole burst: the flood took nothing of the host's.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(budget.Take("B", host, "0xbb").ok()) << i;
  // Unsigned requests of the host share one requester's rate.
  EXPECT_TRUE(budget.Take("A", host, "").ok());
  EXPECT_TRUE(budget.Take("A", host, "").ok());
  // Ten taken from the host's burst of ten: a fresh operator there is refused by the host bound.
  Status host_full = budget.Take("A", host, "0xcc");
  EXPECT_EQ(host_full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(host_full.message().find("host 127.0.0.1"), std::string::npos) << host_full.message();
  EXPECT_NE(host_full.message().find("p2p.test_per_host"), std::string::npos) << host_full.message();
  // Another host is another bucket, for its unsigned requests too.
  EXPECT_TRUE(budget.Take("A", "10.0.0.2", "").ok());
  EXPECT_TRUE(budget.Take("A", "10.0.0.2", "0xcc").ok());
  EXPECT_EQ(budget.refused("A", "operator"), 50);
  EXPECT_EQ(budget.refused("B", "operator"), 50);
  EXPECT_EQ(budget.refused("A", "host"), 1);
  EXPECT_EQ(metrics.AddCounter("consensor_p2p_test_refused_total", "", {{"call", "A"}, {"budget", "host"}})->Value(),
            1);
}

// Unsigned requests of one host are refused as such, and a refusal by the host bound takes
// nothing from the requester's bucket.
TEST(PeerRateBudgetTest, UnsignedRequestsOfAHostShareOneRate) {
  MetricsRegistry metrics;
  PeerRateBudget budget(PeerRateLimits{.per_requester = 1, .per_host = 100}, Names(), &metrics);
  EXPECT_TRUE(budget.Take("A", "10.0.0.1", "").ok());
  EXPECT_TRUE(budget.Take("A", "10.0.0.1", "").ok());
  Status over = budget.Take("A", "10.0.0.1", "");
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("unsigned requests from host 10.0.0.1"), std::string::npos) << over.message();
  EXPECT_TRUE(budget.Take("A", "10.0.0.1", "0xaa").ok()) << "a signed operator there is not affected";
}

// The signature-check budget: a host rate alone, counted per call.
TEST(PeerRateBudgetTest, HostOnlyBudgetCountsPerCall) {
  MetricsRegistry metrics;
  PeerRateBudget budget(PeerRateLimits{.per_requester = 0, .per_host = 1}, SignatureCheckBudgetNames(), &metrics);
  EXPECT_TRUE(budget.Take("Gossip", "10.0.0.1", "").ok());
  EXPECT_TRUE(budget.Take("Pull", "10.0.0.1", "").ok());
  Status over = budget.Take("GetTask", "10.0.0.1", "");
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("p2p.max_signature_checks_per_second_per_host"), std::string::npos) << over.message();
  EXPECT_TRUE(budget.Take("GetTask", "10.0.0.2", "").ok());
  EXPECT_EQ(budget.refused("GetTask", "host"), 1);
  EXPECT_EQ(budget.refused("GetTask", "operator"), 0);
  EXPECT_EQ(
      metrics.AddCounter("consensor_p2p_signature_checks_refused_total", "", {{"call", "GetTask"}, {"budget", "host"}})
          ->Value(),
      1);
}

// Many addresses cannot make the budget hold unbounded state: past kMaxBuckets live buckets a new
// host is refused (and one that refilled completely would be forgotten first).
TEST(PeerRateBudgetTest, BucketsAreBounded) {
  MetricsRegistry metrics;
  PeerRateBudget budget(PeerRateLimits{.per_requester = 0, .per_host = 1}, Names(), &metrics);
  for (size_t i = 0; i < PeerRateBudget::kMaxBuckets; ++i) {
    ASSERT_TRUE(budget.Take("A", "h" + std::to_string(i), "").ok()) << i;
  }
  Status full = budget.Take("A", "one-more", "");
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(budget.refused("A", "host"), 1);
}

// No rates: nothing is refused.
TEST(PeerRateBudgetTest, ZeroRatesImposeNothing) {
  MetricsRegistry metrics;
  PeerRateBudget budget(PeerRateLimits{}, Names(), &metrics);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(budget.Take("A", "10.0.0.1", "").ok());
}

}  // namespace
}  // namespace consensor::node
