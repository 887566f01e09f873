// The retention decision (docs/NODE.md, "Disk budget and retention"): which finished tasks and
// which blobs a sweep deletes. Pure logic over facts the sweeper gathers from the store, so the
// rules are tested without a store or a clock.
//
// Rules, in order:
//  1. A pinned task (not finished, or certified and still inside its challenge window) is never
//     deleted, and neither is any blob a kept task references.
//  2. A finished, unpinned task older than retain_ms (since it finished) is deleted.
//  3. A blob no kept task references is deleted once it is older than the grace mark (its upload
//     id is below `grace_upload_id`: it was stored before the previous sweep, or before the node
//     started), so a client has at least one sweep interval between uploading a blob and
//     submitting the task that uses it.
//  4. While the store is over high_water_bytes, the oldest finished unpinned tasks are deleted
//     (and the blobs that only they referenced) until it is at or below low_water_bytes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/sha256.h"

namespace consensor::node {

// Orders "check that blobs exist, then write a record naming them" against the sweep's blob
// deletion: writers take it shared, the sweep takes it exclusive.
class BlobReferenceGuard {
 public:
  std::shared_lock<std::shared_mutex> Writing() { return std::shared_lock<std::shared_mutex>(mu_); }
  std::unique_lock<std::shared_mutex> Deleting() { return std::unique_lock<std::shared_mutex>(mu_); }

 private:
  std::shared_mutex mu_;
};

struct RetentionPolicy {
  int64_t retain_ms = 0;         // 0: finished tasks are kept until the budget needs the room
  int64_t high_water_bytes = 0;  // 0: no budget-driven deletion
  int64_t low_water_bytes = 0;   // where a budget-driven sweep stops
};

struct RetainedTask {
  std::string task_id;
  bool pinned = false;
  int64_t finished_unix_ms = 0;  // when it finished (or was created, if never)
  int64_t record_bytes = 0;      // task and result records
  std::vector<Hash256> blobs;    // graph, inputs and outputs (duplicates allowed)
};

struct RetainedBlob {
  Hash256 sha256{};
  int64_t size = 0;
  uint64_t upload_id = 0;
};

struct RetentionPlan {
  std::vector<std::string> delete_tasks;  // oldest first
  std::vector<Hash256> delete_blobs;      // oldest upload first
  int64_t freed_bytes = 0;
  int64_t expired_tasks = 0;       // of delete_tasks, deleted by age (rule 2)
  int64_t budget_tasks = 0;        // of delete_tasks, deleted for room (rule 4)
  int64_t bytes_after = 0;         // used bytes once the plan is carried out
  bool over_budget_after = false;  // pinned data alone keeps the store over high water
};

RetentionPlan PlanRetention(const std::vector<RetainedTask>& tasks, const std::vector<RetainedBlob>& blobs,
                            int64_t used_bytes, int64_t now_unix_ms, uint64_t grace_upload_id,
                            const RetentionPolicy& policy);

}  // namespace consensor::node
