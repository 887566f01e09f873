#include "consensus/committee.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/keccak.h"

namespace consensor::consensus {
namespace {

WeightedOperator Op(uint8_t id, uint64_t stake) {
  WeightedOperator op;
  op.address[19] = id;
  for (int i = 0; i < 8; ++i) op.stake[31 - i] = static_cast<uint8_t>(stake >> (8 * i));
  return op;
}

Hash256 Task(uint32_t n) { return Keccak256(std::string_view(reinterpret_cast<const char*>(&n), sizeof(n))); }

// The seed block's hash: bytes 0, 1, ..., 31 unless another byte is given.
Hash256 Seed(uint8_t first = 0) {
  Hash256 h{};
  for (int i = 0; i < 32; ++i) h[i] = static_cast<uint8_t>(i);
  h[0] = first;
  return h;
}

TEST(Committee, SameInputsSameOrderWhateverTheListOrder) {
  std::vector<WeightedOperator> ops = {Op(1, 5), Op(2, 3), Op(3, 8), Op(4, 1), Op(5, 2)};
  std::vector<WeightedOperator> shuffled = {ops[3], ops[0], ops[4], ops[2], ops[1]};
  auto a = CommitteeOrder(Task(1), 100, Seed(), ops, 5);
  auto b = CommitteeOrder(Task(1), 100, Seed(), shuffled, 5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  // A full order is a permutation of the operators with stake.
  std::set<Address20> seen(a->begin(), a->end());
  EXPECT_EQ(seen.size(), 5u);
  // A prefix is the committee; asking for fewer gives the same prefix.
  auto three = CommitteeOrder(Task(1), 100, Seed(), ops, 3);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, std::vector<Address20>(a->begin(), a->begin() + 3));
}

TEST(Committee, DependsOnTaskAndReferenceBlock) {
  std::vector<WeightedOperator> ops;
  for (uint8_t i = 1; i <= 20; ++i) ops.push_back(Op(i, 10));
  auto base = CommitteeOrder(Task(1), 100, Seed(), ops, 5);
  auto other_task = CommitteeOrder(Task(2), 100, Seed(), ops, 5);
  auto other_block = CommitteeOrder(Task(1), 101, Seed(), ops, 5);
  ASSERT_TRUE(base.ok() && other_task.ok() && other_block.ok());
  EXPECT_NE(*base, *other_task);
  EXPECT_NE(*base, *other_block);
}

TEST(Committee, DependsOnTheSeedBlockHash) {
  // The entry node picks the reference block and the client the task, but the seed block's hash
  // is not known to either when they commit: each new hash is a fresh draw.
  std::vector<WeightedOperator> ops;
  for (uint8_t i = 1; i <= 20; ++i) ops.push_back(Op(i, 10));
  std::set<std::vector<Address20>> committees;
  for (int seed = 0; seed < 8; ++seed) {
    auto order = CommitteeOrder(Task(1), 100, Seed(static_cast<uint8_t>(seed)), ops, 3);
    ASSERT_TRUE(order.ok());
    committees.insert(*order);
  }
  EXPECT_GE(committees.size(), 7u);  // C(20,3) = 1140 committees: a repeat in 8 draws is rare
}

TEST(Committee, SeedBlockFollowsTheLastAcceptedAnnouncement) {
  EXPECT_EQ(SeedBlock(100, 8), 109u);  // announcements accepted until 108
  EXPECT_EQ(SeedBlock(UINT64_MAX - 9, 8), UINT64_MAX);
  EXPECT_EQ(SeedBlock(UINT64_MAX - 10, 8), UINT64_MAX - 1);
  EXPECT_EQ(SeedBlock(1, UINT64_MAX), UINT64_MAX);
}

TEST(Committee, GoldenOrder) {
  // Pinned: every node must draw exactly this; a change here is a protocol change. The same
  // order comes out of scripts/committee_reference.py, an independent implementation of the
  // spec in consensus/committee.h (hashing with Foundry's `cast keccak`).
  std::vector<WeightedOperator> ops = {Op(1, 1000), Op(2, 2000), Op(3, 3000), Op(4, 4000)};
  auto order = CommitteeOrder(Task(42), 7, Seed(), ops, 4);
  ASSERT_TRUE(order.ok());
  std::vector<int> ids;
  for (const auto& a : *order) ids.push_back(a[19]);
  EXPECT_EQ(ids, (std::vector<int>{2, 4, 3, 1}));
}

TEST(Committee, StakeWeighted) {
  // First draws over many tasks follow the stakes 1 : 2 : 7.
  std::vector<WeightedOperator> ops = {Op(1, 1), Op(2, 2), Op(3, 7)};
  std::map<int, int> first;
  const int n = 20000;
  for (int t = 0; t < n; ++t) {
    auto order = CommitteeOrder(Task(static_cast<uint32_t>(t)), 1, Seed(), ops, 1);
    ASSERT_TRUE(order.ok());
    first[(*order)[0][19]]++;
  }
  EXPECT_NEAR(first[1] / double(n), 0.1, 0.015);
  EXPECT_NEAR(first[2] / double(n), 0.2, 0.015);
  EXPECT_NEAR(first[3] / double(n), 0.7, 0.015);
}

TEST(Committee, ZeroStakeSmallSetsAndBadInput) {
  auto order = CommitteeOrder(Task(3), 1, Seed(), {Op(1, 0), Op(2, 5), Op(3, 0)}, 3);
  ASSERT_TRUE(order.ok());
  ASSERT_EQ(order->size(), 1u);
  EXPECT_EQ((*order)[0][19], 2);
  auto empty = CommitteeOrder(Task(3), 1, Seed(), {}, 3);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(CommitteeOrder(Task(3), 1, Seed(), {Op(1, 5), Op(1, 6)}, 2).status().code(), StatusCode::kInvalidArgument);
  WeightedOperator huge = Op(9, 0);
  huge.stake[0] = 1;  // 2^248
  EXPECT_EQ(CommitteeOrder(Task(3), 1, Seed(), {huge}, 1).status().code(), StatusCode::kInvalidArgument);
  WeightedOperator half = Op(8, 0), other = Op(7, 0);
  half.stake[16] = 0x40;  // 2^126
  other.stake[16] = 0x40;
  EXPECT_EQ(CommitteeOrder(Task(3), 1, Seed(), {half, other}, 1).status().code(),
            StatusCode::kInvalidArgument);  // 2^127
  EXPECT_TRUE(CommitteeOrder(Task(3), 1, Seed(), {half}, 1).ok());
}

// Every node must derive the same committee whatever order its chain client listed the
// operators in: thousands of task ids, each against a differently shuffled operator list.
TEST(CommitteeAgreementTest, ThousandsOfTaskIdsAgreeAcrossOperatorListOrders) {
  std::vector<WeightedOperator> ops;
  for (int i = 0; i < 12; ++i) {
    WeightedOperator op;
    op.address[0] = static_cast<uint8_t>(0x10 + i * 7);
    op.address[19] = static_cast<uint8_t>(i);
    op.stake[31] = static_cast<uint8_t>(1 + (i * 37) % 11);
    op.stake[30] = static_cast<uint8_t>(i % 3);
    ops.push_back(op);
  }
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  for (int t = 0; t < 3000; ++t) {
    Hash256 task{};
    for (int b = 0; b < 32; b += 8) {
      uint64_t v = next();
      for (int k = 0; k < 8; ++k) task[b + k] = static_cast<uint8_t>(v >> (8 * k));
    }
    const uint64_t block = 1000 + t % 17;
    auto reference = CommitteeOrder(task, block, Seed(), ops, 5);
    ASSERT_TRUE(reference.ok());
    ASSERT_EQ(reference->size(), 5u);
    std::vector<WeightedOperator> shuffled = ops;
    for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[next() % i]);
    auto other = CommitteeOrder(task, block, Seed(), shuffled, 5);
    ASSERT_TRUE(other.ok());
    ASSERT_EQ(*reference, *other) << "task " << t;
  }
}
}  // namespace
}  // namespace consensor::consensus
