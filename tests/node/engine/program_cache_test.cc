// Unit tests of the warm path's cache (node/engine/program_cache.h): LRU order, the byte
// budget, and its metrics.
#include "node/engine/program_cache.h"

#include <gtest/gtest.h>

#include <memory>

#include "node/telemetry/metrics.h"

namespace consensor::node {
namespace {

// A program that costs `weight_bytes` of constants plus `arena_bytes`.
std::shared_ptr<const executor::Program> ProgramOf(int64_t weight_bytes, int64_t arena_bytes) {
  auto program = std::make_shared<executor::Program>();
  program->arena_bytes = arena_bytes;
  if (weight_bytes > 0) program->constants.emplace_back(0, Tensor(DType::kI8, {weight_bytes}));
  return program;
}

Hash256 Key(uint8_t n) {
  Hash256 h{};
  h[0] = n;
  return h;
}

TEST(ProgramCacheTest, CostIsWeightsPlusArena) {
  EXPECT_EQ(ProgramCache::CostOf(*ProgramOf(100, 28)), 128);
  EXPECT_EQ(ProgramCache::CostOf(*ProgramOf(0, 64)), 64);
}

TEST(ProgramCacheTest, FindReturnsTheInsertedProgramAndCountsHitsAndMisses) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  ProgramCache cache(1000, &metrics);
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
  auto program = ProgramOf(100, 100);
  EXPECT_TRUE(cache.Insert(Key(1), program));
  EXPECT_EQ(cache.Find(Key(1)), program);
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_EQ(metrics.program_cache_hits->Value(), 1);
  EXPECT_EQ(metrics.program_cache_misses->Value(), 2);
  EXPECT_EQ(metrics.program_cache_bytes->Value(), 200);
  EXPECT_EQ(metrics.program_cache_entries->Value(), 1);
  EXPECT_EQ(cache.bytes(), 200);
}

TEST(ProgramCacheTest, EvictsTheLeastRecentlyUsedToStayWithinTheBudget) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  ProgramCache cache(300, &metrics);
  ASSERT_TRUE(cache.Insert(Key(1), ProgramOf(100, 0)));
  ASSERT_TRUE(cache.Insert(Key(2), ProgramOf(100, 0)));
  ASSERT_TRUE(cache.Insert(Key(3), ProgramOf(100, 0)));
  ASSERT_NE(cache.Find(Key(1)), nullptr);  // 2 is now the least recently used
  ASSERT_TRUE(cache.Insert(Key(4), ProgramOf(150, 0)));
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_EQ(cache.Find(Key(3)), nullptr);  // 150 more bytes needed two evictions
  EXPECT_NE(cache.Find(Key(1)), nullptr);
  EXPECT_NE(cache.Find(Key(4)), nullptr);
  EXPECT_EQ(cache.bytes(), 250);
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(metrics.program_cache_evictions->Value(), 2);
  EXPECT_EQ(metrics.program_cache_bytes->Value(), 250);
}

TEST(ProgramCacheTest, ProgramOverTheWholeBudgetIsNotCachedAndEvictsNothing) {
  ProgramCache cache(300, nullptr);
  ASSERT_TRUE(cache.Insert(Key(1), ProgramOf(200, 0)));
  EXPECT_FALSE(cache.Insert(Key(2), ProgramOf(200, 101)));
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_NE(cache.Find(Key(1)), nullptr);
  EXPECT_EQ(cache.bytes(), 200);
}

TEST(ProgramCacheTest, ZeroBudgetCachesNothing) {
  ProgramCache cache(0, nullptr);
  EXPECT_FALSE(cache.Insert(Key(1), ProgramOf(1, 0)));
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(ProgramCacheTest, EvictedProgramStaysAliveForItsHolders) {
  ProgramCache cache(100, nullptr);
  ASSERT_TRUE(cache.Insert(Key(1), ProgramOf(100, 0)));
  std::shared_ptr<const executor::Program> held = cache.Find(Key(1));
  ASSERT_TRUE(cache.Insert(Key(2), ProgramOf(100, 0)));
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->constants.size(), 1u);
}

TEST(ProgramCacheTest, SecondInsertOfTheSameGraphKeepsOneEntry) {
  ProgramCache cache(1000, nullptr);
  auto first = ProgramOf(100, 0);
  ASSERT_TRUE(cache.Insert(Key(1), first));
  ASSERT_TRUE(cache.Insert(Key(1), ProgramOf(100, 0)));
  EXPECT_EQ(cache.Find(Key(1)), first);
  EXPECT_EQ(cache.bytes(), 100);
  EXPECT_EQ(cache.entries(), 1u);
}

TEST(ProgramCacheTest, PreparedBytesCountAndEvictOthers) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  ProgramCache cache(400, &metrics);
  auto one = ProgramOf(100, 0), two = ProgramOf(100, 0);
  ASSERT_TRUE(cache.Insert(Key(1), one));
  ASSERT_TRUE(cache.Insert(Key(2), two));
  EXPECT_EQ(cache.bytes(), 200);
  // Program 2's packed weights (150 bytes) fit beside program 1.
  EXPECT_TRUE(cache.SetPreparedBytes(Key(2), two.get(), 150));
  EXPECT_EQ(cache.bytes(), 350);
  EXPECT_EQ(metrics.program_cache_bytes->Value(), 350);
  // Program 1's (200 bytes) do not: the least recently used other entry, 2, is evicted.
  EXPECT_TRUE(cache.SetPreparedBytes(Key(1), one.get(), 200));
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_EQ(cache.Find(Key(1)), one);
  EXPECT_EQ(cache.bytes(), 300);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(metrics.program_cache_evictions->Value(), 1);
  // Setting the same amount again (a second worker's load) changes nothing.
  EXPECT_TRUE(cache.SetPreparedBytes(Key(1), one.get(), 200));
  EXPECT_EQ(cache.bytes(), 300);
}

TEST(ProgramCacheTest, ProgramWhosePreparedBytesExceedTheBudgetIsDropped) {
  ProgramCache cache(300, nullptr);
  auto big = ProgramOf(100, 50), other = ProgramOf(100, 0);
  ASSERT_TRUE(cache.Insert(Key(1), other));
  ASSERT_TRUE(cache.Insert(Key(2), big));  // 150 bytes: fits without its prepared copies
  // With 151 bytes of packed weights it is 301, over the whole budget: refused and dropped,
  // without evicting the other entry.
  EXPECT_FALSE(cache.SetPreparedBytes(Key(2), big.get(), 151));
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_EQ(cache.Find(Key(1)), other);
  EXPECT_EQ(cache.bytes(), 100);
  EXPECT_EQ(cache.entries(), 1u);
}

TEST(ProgramCacheTest, PreparedBytesOfAnUncachedOrReplacedProgramAreRefused) {
  ProgramCache cache(1000, nullptr);
  auto cached = ProgramOf(100, 0), stranger = ProgramOf(100, 0);
  EXPECT_FALSE(cache.SetPreparedBytes(Key(1), cached.get(), 10));  // not cached
  ASSERT_TRUE(cache.Insert(Key(1), cached));
  EXPECT_FALSE(cache.SetPreparedBytes(Key(1), stranger.get(), 10));  // another program object
  EXPECT_FALSE(cache.SetPreparedBytes(Key(1), cached.get(), -1));
  EXPECT_EQ(cache.bytes(), 100);
  EXPECT_TRUE(cache.SetPreparedBytes(Key(1), cached.get(), 0));
  EXPECT_EQ(cache.bytes(), 100);
}

}  // namespace
}  // namespace consensor::node
