// The quorum rule, written once (consensus/replication.h) and used by the engine, the daemon's
// config checks and certificate validity.
#include "consensus/replication.h"

#include <gtest/gtest.h>

namespace consensor::consensus {
namespace {

TEST(Replication, MajorityIsStrict) {
  // replicas -> the smallest and largest valid quorum.
  const struct { uint64_t replicas, smallest; } cases[] = {{1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {16, 9}, {17, 9}};
  for (const auto& c : cases) {
    EXPECT_EQ(SmallestMajority(c.replicas), c.smallest) << c.replicas;
    EXPECT_FALSE(IsMajorityQuorum(c.replicas, c.smallest - 1)) << c.replicas;  // half is not enough
    EXPECT_TRUE(IsMajorityQuorum(c.replicas, c.smallest)) << c.replicas;
    EXPECT_TRUE(IsMajorityQuorum(c.replicas, c.replicas)) << c.replicas;
    EXPECT_FALSE(IsMajorityQuorum(c.replicas, c.replicas + 1)) << c.replicas;  // more than can sign
  }
  EXPECT_FALSE(IsMajorityQuorum(0, 0));
  EXPECT_FALSE(IsMajorityQuorum(4, 2));  // two certificates of 2 could share no signer
  // No overflow for absurd values.
  EXPECT_FALSE(IsMajorityQuorum(3, uint64_t{1} << 63));
}

TEST(Replication, CheckNamesTheAllowedRange) {
  EXPECT_TRUE(CheckReplication(3, 2, 16).ok());
  EXPECT_TRUE(CheckReplication(16, 16, 16).ok());
  Status s = CheckReplication(0, 0, 16);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "replicas must be between 1 and 16 (got 0)");
  EXPECT_EQ(CheckReplication(17, 9, 16).message(), "replicas must be between 1 and 16 (got 17)");
  EXPECT_EQ(CheckReplication(4, 2, 16).message(), "quorum must be a majority of the replicas: between 3 and 4 (got 2)");
  EXPECT_EQ(CheckReplication(3, 4, 16).message(), "quorum must be a majority of the replicas: between 2 and 3 (got 4)");
  EXPECT_EQ(CheckReplication(3, 0, 16).code(), StatusCode::kInvalidArgument);
}

TEST(Replication, DefaultQuorumBelongsToTheDefaultCommittee) {
  EXPECT_EQ(DefaultQuorum(3, 3, 3), 3u);  // an operator's stricter default for its default size
  EXPECT_EQ(DefaultQuorum(3, 3, 2), 2u);
  EXPECT_EQ(DefaultQuorum(5, 3, 3), 3u);  // any other size: the smallest majority
  EXPECT_EQ(DefaultQuorum(4, 3, 2), 3u);
  EXPECT_EQ(DefaultQuorum(1, 3, 2), 1u);
}

TEST(Replication, RequiredSignaturesKeepTheQuorumsFractionAsTheCommitteeGrows) {
  EXPECT_EQ(RequiredSignatures(3, 2, 3), 2u);
  EXPECT_EQ(RequiredSignatures(3, 2, 2), 2u);  // never below the quorum
  EXPECT_EQ(RequiredSignatures(3, 2, 4), 3u);
  EXPECT_EQ(RequiredSignatures(3, 2, 6), 4u);
  EXPECT_EQ(RequiredSignatures(3, 2, 12), 8u);
  EXPECT_EQ(RequiredSignatures(4, 3, 5), 4u);
  EXPECT_EQ(RequiredSignatures(0, 0, 5), 0u);
  EXPECT_EQ(RequiredSignatures(1, 1, 1000), 1000u);
  // The fraction never drops, for every small committee.
  for (uint64_t n = 1; n <= 16; ++n) {
    for (uint64_t q = SmallestMajority(n); q <= n; ++q) {
      for (uint64_t c = n; c <= 64; ++c) {
        const uint64_t r = RequiredSignatures(n, q, c);
        EXPECT_GE(r * n, q * c) << n << " " << q << " " << c;
        EXPECT_LT((r - 1) * n, q * c) << n << " " << q << " " << c;  // and is the smallest such
        EXPECT_LE(r, c);
      }
    }
  }
  // Hostile sizes do not wrap.
  EXPECT_EQ(RequiredSignatures(1, UINT64_MAX, 1), UINT64_MAX);
}

}  // namespace
}  // namespace consensor::consensus
