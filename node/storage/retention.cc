#include "node/storage/retention.h"

#include <algorithm>
#include <set>

namespace consensor::node {

RetentionPlan PlanRetention(const std::vector<RetainedTask>& tasks, const std::vector<RetainedBlob>& blobs,
                            int64_t used_bytes, int64_t now_unix_ms, uint64_t grace_upload_id,
                            const RetentionPolicy& policy) {
  RetentionPlan plan;
  // References by blob, counting each task once.
  std::map<Hash256, int> references;
  std::vector<std::set<Hash256>> task_blobs(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    task_blobs[i] = std::set<Hash256>(tasks[i].blobs.begin(), tasks[i].blobs.end());
    for (const Hash256& h : task_blobs[i]) ++references[h];
  }
  std::map<Hash256, const RetainedBlob*> stored;
  for (const RetainedBlob& b : blobs) stored[b.sha256] = &b;

  // Deletable tasks, oldest first (ties by id, so a plan does not depend on input order).
  std::vector<size_t> candidates;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].pinned) candidates.push_back(i);
  }
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    if (tasks[a].finished_unix_ms != tasks[b].finished_unix_ms) {
      return tasks[a].finished_unix_ms < tasks[b].finished_unix_ms;
    }
    return tasks[a].task_id < tasks[b].task_id;
  });

  std::set<Hash256> doomed_blobs;
  int64_t used = used_bytes;
  // Deletes task i and every stored blob it alone still referenced.
  auto delete_task = [&](size_t i) {
    plan.delete_tasks.push_back(tasks[i].task_id);
    used -= tasks[i].record_bytes;
    plan.freed_bytes += tasks[i].record_bytes;
    for (const Hash256& h : task_blobs[i]) {
      if (--references[h] > 0) continue;
      auto it = stored.find(h);
      if (it != stored.end() && doomed_blobs.insert(h).second) {
        used -= it->second->size;
        plan.freed_bytes += it->second->size;
      }
    }
  };

  size_t next = 0;  // candidates before it are deleted
  // Rule 2: by age. Candidates are sorted by finish time, so the expired ones come first.
  if (policy.retain_ms > 0) {
    while (next < candidates.size() && tasks[candidates[next]].finished_unix_ms + policy.retain_ms <= now_unix_ms) {
      delete_task(candidates[next++]);
      ++plan.expired_tasks;
    }
  }
  // Rule 3: blobs nobody references, past the grace mark.
  for (const RetainedBlob& b : blobs) {
    if (b.upload_id >= grace_upload_id || references[b.sha256] > 0) continue;
    if (doomed_blobs.insert(b.sha256).second) {
      used -= b.size;
      plan.freed_bytes += b.size;
    }
  }
  // Rule 4: for room.
  if (policy.high_water_bytes > 0 && used > policy.high_water_bytes) {
    while (next < candidates.size() && used > policy.low_water_bytes) {
      delete_task(candidates[next++]);
      ++plan.budget_tasks;
    }
  }
  plan.bytes_after = used;
  plan.over_budget_after = policy.high_water_bytes > 0 && used > policy.high_water_bytes;

  std::vector<const RetainedBlob*> doomed;
  for (const Hash256& h : doomed_blobs) doomed.push_back(stored.at(h));
  std::sort(doomed.begin(), doomed.end(),
            [](const RetainedBlob* a, const RetainedBlob* b) { return a->upload_id < b->upload_id; });
  for (const RetainedBlob* b : doomed) plan.delete_blobs.push_back(b->sha256);
  return plan;
}

}  // namespace consensor::node
