// Unit tests of the pool of votes for tasks whose round is not open yet
// (node/engine/orphan_pool.h): bounded by bytes, in total and per signer, refusals keep nothing,
// and what was kept comes back in arrival order or expires.
#include "node/engine/orphan_pool.h"

#include <gtest/gtest.h>

#include <chrono>

namespace consensor::node {
namespace {

using namespace std::chrono_literals;

consensus::TaskId Task(uint8_t n) {
  Hash256 h{};
  h.fill(n);
  return consensus::TaskId(h);
}
Address20 Signer(uint8_t n) {
  Address20 a{};
  a.fill(n);
  return a;
}
// A commitment for `task`, told apart by `tag` (its reference block).
VoteMessage Commitment(uint8_t task, uint64_t tag) {
  VoteMessage m;
  m.task_id = Task(task);
  m.commitment.emplace();
  m.commitment->task_id = Task(task).bytes();
  m.commitment->reference_block = tag;
  return m;
}
// A reveal whose bundle lists `bundle` commitments: bigger than a commitment.
VoteMessage Reveal(uint8_t task, size_t bundle) {
  VoteMessage m;
  m.task_id = Task(task);
  m.vote.emplace();
  m.bundle.resize(bundle);
  return m;
}

const std::chrono::steady_clock::time_point kStart{std::chrono::hours(1)};

TEST(OrphanPoolTest, OneSignerCannotTakeMoreThanItsShare) {
  const size_t one = OrphanBytes(Commitment(1, 0));
  OrphanPool pool({.max_bytes = 10 * one, .max_bytes_per_signer = 3 * one, .lifetime = 2min});
  // The attacker fills its share with commitments for tasks nobody will announce...
  for (uint8_t t = 1; t <= 3; ++t) EXPECT_TRUE(pool.Add(Commitment(t, 0), Signer(9), kStart).ok());
  Status refused = pool.Add(Commitment(4, 0), Signer(9), kStart);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_EQ(pool.bytes_of(Signer(9)), 3 * one);
  // ...and honest signers still have room for their early votes.
  for (uint8_t s = 1; s <= 3; ++s) EXPECT_TRUE(pool.Add(Commitment(5, s), Signer(s), kStart).ok());
  EXPECT_EQ(pool.messages(), 6u);
}

TEST(OrphanPoolTest, TotalIsBoundedByBytesNotCount) {
  const size_t one = OrphanBytes(Commitment(1, 0));
  const size_t big = OrphanBytes(Reveal(1, 100));
  ASSERT_GT(big, 30 * one);  // the bundle is charged
  OrphanPool pool({.max_bytes = big + 2 * one, .max_bytes_per_signer = big + 2 * one, .lifetime = 2min});
  EXPECT_TRUE(pool.Add(Reveal(1, 100), Signer(1), kStart).ok());
  EXPECT_TRUE(pool.Add(Commitment(2, 0), Signer(2), kStart).ok());
  EXPECT_TRUE(pool.Add(Commitment(2, 1), Signer(3), kStart).ok());
  EXPECT_EQ(pool.Add(Commitment(2, 2), Signer(4), kStart).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.Add(Reveal(3, 100), Signer(5), kStart).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.bytes(), big + 2 * one);
  EXPECT_EQ(pool.bytes_of(Signer(4)), 0u);  // a refusal keeps nothing
  EXPECT_EQ(pool.bytes_of(Signer(5)), 0u);
  // Taking a task's messages frees its room: the refused message fits now.
  EXPECT_EQ(pool.Take(Task(1)).size(), 1u);
  EXPECT_TRUE(pool.Add(Commitment(2, 2), Signer(4), kStart).ok());
}

TEST(OrphanPoolTest, TakeReturnsATasksMessagesInArrivalOrderAndFreesTheirRoom) {
  OrphanPool pool;
  ASSERT_TRUE(pool.Add(Commitment(1, 10), Signer(1), kStart).ok());
  ASSERT_TRUE(pool.Add(Commitment(2, 99), Signer(1), kStart).ok());
  ASSERT_TRUE(pool.Add(Commitment(1, 11), Signer(2), kStart).ok());
  ASSERT_TRUE(pool.Add(Commitment(1, 12), Signer(1), kStart).ok());
  auto taken = pool.Take(Task(1));
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken[0].commitment->reference_block, 10u);
  EXPECT_EQ(taken[1].commitment->reference_block, 11u);
  EXPECT_EQ(taken[2].commitment->reference_block, 12u);
  EXPECT_TRUE(pool.Take(Task(1)).empty());
  EXPECT_EQ(pool.messages(), 1u);
  EXPECT_EQ(pool.bytes(), OrphanBytes(Commitment(2, 99)));
  EXPECT_EQ(pool.bytes_of(Signer(2)), 0u);
}

TEST(OrphanPoolTest, TasksExpireFromTheirFirstOrphan) {
  OrphanPool pool({.max_bytes = 1 << 20, .max_bytes_per_signer = 1 << 20, .lifetime = 2min});
  ASSERT_TRUE(pool.Add(Commitment(1, 0), Signer(1), kStart).ok());
  ASSERT_TRUE(pool.Add(Commitment(2, 0), Signer(1), kStart + 1min).ok());
  ASSERT_TRUE(pool.Add(Commitment(1, 1), Signer(1), kStart + 90s).ok());  // does not extend task 1
  pool.Expire(kStart + 2min);
  EXPECT_TRUE(pool.Take(Task(1)).empty());
  EXPECT_EQ(pool.messages(), 1u);
  pool.Expire(kStart + 3min);
  EXPECT_EQ(pool.messages(), 0u);
  EXPECT_EQ(pool.bytes(), 0u);
  EXPECT_EQ(pool.bytes_of(Signer(1)), 0u);
}

}  // namespace
}  // namespace consensor::node
