// Unit tests of the decoded-input cache (node/engine/input_cache.h): LRU order, the byte
// budget, the entry cap, and its metrics.
#include "node/engine/input_cache.h"

#include <gtest/gtest.h>

#include <memory>

#include "node/telemetry/metrics.h"

namespace consensor::node {
namespace {

// A decoded input of `bytes` bytes.
std::shared_ptr<const Tensor> InputOf(int64_t bytes) {
  return std::make_shared<const Tensor>(DType::kI8, Shape{bytes});
}

Hash256 Key(uint8_t n) {
  Hash256 h{};
  h[0] = n;
  return h;
}

constexpr int64_t kOverhead = InputCache::kEntryOverheadBytes;

TEST(InputCacheTest, FindReturnsTheInsertedTensorAndCountsHitsAndMisses) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  InputCache cache(4000, &metrics);
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
  auto x = InputOf(100);
  EXPECT_TRUE(cache.Insert(Key(1), x));
  EXPECT_EQ(cache.Find(Key(1)), x);  // the same object: nothing copied
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_EQ(metrics.input_cache_hits->Value(), 1);
  EXPECT_EQ(metrics.input_cache_misses->Value(), 2);
  EXPECT_EQ(metrics.input_cache_bytes->Value(), 100 + kOverhead);
  EXPECT_EQ(metrics.input_cache_entries->Value(), 1);
  EXPECT_EQ(cache.bytes(), 100 + kOverhead);
  // The same blob decoded again by another reader changes nothing.
  EXPECT_TRUE(cache.Insert(Key(1), InputOf(100)));
  EXPECT_EQ(cache.Find(Key(1)), x);
  EXPECT_EQ(cache.entries(), 1u);
}

TEST(InputCacheTest, EvictsTheLeastRecentlyUsedToStayWithinTheBudget) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  const int64_t entry = 100 + kOverhead;
  InputCache cache(4 * entry, &metrics);  // entries up to one quarter: exactly `entry`
  for (uint8_t k = 1; k <= 4; ++k) ASSERT_TRUE(cache.Insert(Key(k), InputOf(100)));
  ASSERT_NE(cache.Find(Key(1)), nullptr);  // 2 is now the least recently used
  ASSERT_TRUE(cache.Insert(Key(5), InputOf(100)));
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  for (uint8_t k : {1, 3, 4, 5}) EXPECT_NE(cache.Find(Key(k)), nullptr) << int{k};
  EXPECT_EQ(cache.bytes(), 4 * entry);
  EXPECT_EQ(metrics.input_cache_evictions->Value(), 1);
  // Many more inputs than fit: the bytes never exceed the budget.
  for (int k = 6; k < 200; ++k) {
    ASSERT_TRUE(cache.Insert(Key(static_cast<uint8_t>(k)), InputOf(100)));
    ASSERT_LE(cache.bytes(), cache.budget_bytes());
  }
  EXPECT_EQ(cache.entries(), 4u);
  EXPECT_EQ(metrics.input_cache_evictions->Value(), 1 + 194);
}

TEST(InputCacheTest, AnInputOverAQuarterOfTheBudgetIsNotCachedAndEvictsNothing) {
  InputCache cache(4000, nullptr);
  ASSERT_TRUE(cache.Insert(Key(1), InputOf(500)));
  EXPECT_TRUE(cache.Admits(1000 - kOverhead));
  EXPECT_FALSE(cache.Admits(1001 - kOverhead));
  EXPECT_FALSE(cache.Insert(Key(2), InputOf(1001 - kOverhead)));
  EXPECT_EQ(cache.Find(Key(2)), nullptr);
  EXPECT_NE(cache.Find(Key(1)), nullptr);
  EXPECT_EQ(cache.bytes(), 500 + kOverhead);
  EXPECT_FALSE(cache.Insert(Key(3), nullptr));
}

TEST(InputCacheTest, ZeroBudgetCachesNothingAndCountsNoLookUps) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  InputCache cache(0, &metrics);
  EXPECT_FALSE(cache.Admits(0));
  EXPECT_FALSE(cache.Insert(Key(1), InputOf(1)));
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(metrics.input_cache_misses->Value(), 0);
  InputCache negative(-5, nullptr);
  EXPECT_EQ(negative.budget_bytes(), 0);
}

}  // namespace
}  // namespace consensor::node
