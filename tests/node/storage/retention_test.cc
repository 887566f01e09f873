// PlanRetention: what a sweep deletes, from facts alone.
#include "node/storage/retention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace consensor::node {
namespace {

Hash256 H(uint8_t n) {
  Hash256 h{};
  h[0] = n;
  return h;
}

RetainedTask Task(const std::string& id, bool pinned, int64_t finished, std::vector<Hash256> blobs,
                  int64_t record_bytes = 10) {
  return RetainedTask{id, pinned, finished, record_bytes, std::move(blobs)};
}

bool Has(const std::vector<std::string>& v, const std::string& x) { return std::count(v.begin(), v.end(), x) > 0; }
bool Has(const std::vector<Hash256>& v, const Hash256& x) { return std::count(v.begin(), v.end(), x) > 0; }

constexpr int64_t kHour = 3600 * 1000;

TEST(RetentionPlanTest, ExpiredFinishedTasksGoWithTheBlobsOnlyTheyUse) {
  const int64_t now = 100 * kHour;
  std::vector<RetainedTask> tasks = {
      Task("old", false, now - 50 * kHour, {H(1), H(2)}),
      Task("young", false, now - 1 * kHour, {H(2), H(3)}),
  };
  std::vector<RetainedBlob> blobs = {{H(1), 100, 1}, {H(2), 100, 2}, {H(3), 100, 3}};
  RetentionPolicy policy;
  policy.retain_ms = 24 * kHour;
  RetentionPlan plan = PlanRetention(tasks, blobs, 320, now, /*grace_upload_id=*/0, policy);
  EXPECT_EQ(plan.delete_tasks, std::vector<std::string>{"old"});
  EXPECT_EQ(plan.expired_tasks, 1);
  EXPECT_EQ(plan.delete_blobs, std::vector<Hash256>{H(1)});  // H(2) is still the young task's
  EXPECT_EQ(plan.freed_bytes, 110);
  EXPECT_EQ(plan.bytes_after, 210);
}

TEST(RetentionPlanTest, PinnedTasksAndTheirBlobsAreNeverDeletedWhateverTheBudget) {
  const int64_t now = 100 * kHour;
  std::vector<RetainedTask> tasks = {
      Task("unfinished", true, 0, {H(1)}),
      Task("in-window", true, now - 90 * kHour, {H(2)}),
      Task("done", false, now - 90 * kHour, {H(2), H(3)}),
  };
  std::vector<RetainedBlob> blobs = {{H(1), 1000, 1}, {H(2), 1000, 2}, {H(3), 1000, 3}};
  RetentionPolicy policy;
  policy.retain_ms = kHour;
  policy.high_water_bytes = 100;
  policy.low_water_bytes = 50;
  RetentionPlan plan = PlanRetention(tasks, blobs, 3030, now, /*grace_upload_id=*/100, policy);
  EXPECT_EQ(plan.delete_tasks, std::vector<std::string>{"done"});
  EXPECT_EQ(plan.delete_blobs, std::vector<Hash256>{H(3)});
  EXPECT_TRUE(plan.over_budget_after);  // pinned data alone is over; the plan says so
  EXPECT_EQ(plan.bytes_after, 3030 - 10 - 1000);
}

TEST(RetentionPlanTest, UnreferencedBlobsGoOnlyOnceOlderThanTheGraceMark) {
  std::vector<RetainedBlob> blobs = {{H(1), 100, 5}, {H(2), 100, 9}, {H(3), 100, 10}, {H(4), 100, 11}};
  std::vector<RetainedTask> tasks = {Task("t", false, 0, {H(1)})};
  RetentionPlan plan = PlanRetention(tasks, blobs, 410, 0, /*grace_upload_id=*/10, RetentionPolicy{});
  // H(1) is referenced; H(2) is unreferenced and old; H(3), H(4) were uploaded since the last sweep.
  EXPECT_EQ(plan.delete_blobs, std::vector<Hash256>{H(2)});
  EXPECT_TRUE(plan.delete_tasks.empty());  // no age limit, no budget: tasks stay
}

TEST(RetentionPlanTest, OverBudgetDeletesOldestFinishedFirstDownToLowWater) {
  std::vector<RetainedTask> tasks = {
      Task("c", false, 300, {H(3)}), Task("a", false, 100, {H(1)}), Task("pinned", true, 50, {H(9)}),
      Task("b", false, 200, {H(2)}), Task("d", false, 400, {H(4)}),
  };
  std::vector<RetainedBlob> blobs;
  for (uint8_t i : {1, 2, 3, 4, 9}) blobs.push_back({H(i), 1000, i});
  RetentionPolicy policy;
  policy.high_water_bytes = 4000;
  policy.low_water_bytes = 3000;
  const int64_t used = 5 * 1000 + 5 * 10;
  RetentionPlan plan = PlanRetention(tasks, blobs, used, 1000, /*grace_upload_id=*/0, policy);
  // a then b go (each frees 1010): 5050 -> 3030 is still over low water, so c goes too.
  EXPECT_EQ(plan.delete_tasks, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(plan.budget_tasks, 3);
  EXPECT_EQ(plan.delete_blobs, (std::vector<Hash256>{H(1), H(2), H(3)}));
  EXPECT_EQ(plan.bytes_after, 2020);
  EXPECT_FALSE(plan.over_budget_after);
  EXPECT_FALSE(Has(plan.delete_tasks, "pinned"));
  EXPECT_FALSE(Has(plan.delete_blobs, H(9)));
}

TEST(RetentionPlanTest, UnderHighWaterNothingGoesForRoom) {
  std::vector<RetainedTask> tasks = {Task("a", false, 100, {H(1)})};
  std::vector<RetainedBlob> blobs = {{H(1), 1000, 1}};
  RetentionPolicy policy;
  policy.high_water_bytes = 2000;
  policy.low_water_bytes = 10;
  RetentionPlan plan = PlanRetention(tasks, blobs, 1010, 1000, 0, policy);
  EXPECT_TRUE(plan.delete_tasks.empty());
  EXPECT_TRUE(plan.delete_blobs.empty());
}

TEST(RetentionPlanTest, ABlobSharedByTwoTasksGoesWithTheLastOfThem) {
  std::vector<RetainedTask> tasks = {
      Task("a", false, 100, {H(1), H(1), H(2)}),  // duplicates count once
      Task("b", false, 200, {H(1)}),
  };
  std::vector<RetainedBlob> blobs = {{H(1), 1000, 1}, {H(2), 1000, 2}};
  RetentionPolicy policy;
  policy.high_water_bytes = 1500;
  policy.low_water_bytes = 1500;
  RetentionPlan plan = PlanRetention(tasks, blobs, 2020, 1000, 0, policy);
  // Deleting a frees H(2) only (1010 -> 1010 left, under low water): b and H(1) stay.
  EXPECT_EQ(plan.delete_tasks, std::vector<std::string>{"a"});
  EXPECT_EQ(plan.delete_blobs, std::vector<Hash256>{H(2)});
  // A referenced blob that is not stored (fetched later, say) costs nothing and breaks nothing.
  tasks.push_back(Task("c", false, 50, {H(7)}));
  plan = PlanRetention(tasks, blobs, 2030, 1000, 0, policy);
  EXPECT_TRUE(Has(plan.delete_tasks, "c"));
  EXPECT_FALSE(Has(plan.delete_blobs, H(7)));
}

}  // namespace
}  // namespace consensor::node
