// The retention job (docs/NODE.md, "Disk budget and retention"): a background thread that
// deletes what node/storage/retention.h decides, and the storage gauges on /metrics.
//
// Crash safety: a sweep first deletes task records (each task with its result, one synced batch),
// then blobs. Blobs are deleted under the exclusive side of the BlobReferenceGuard after the
// references are read again from the store, while every write that stores a record naming blobs
// (task admission, a task's outputs) holds the shared side from its blob check to its record
// write. So at any kill -9 point a stored task names only blobs that are stored; a blob whose
// deletion was lost is unreferenced and goes at the next sweep.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "consensor/v1/node.pb.h"
#include "executor/limits.h"
#include "node/storage/disk_budget.h"
#include "node/storage/retention.h"
#include "node/storage/store.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

// A task is pinned while it is not finished, and while it is certified but its challenge window
// (and so a dispute) is still open: a dispute re-executes it and needs its blobs.
bool IsRetentionPinned(const v1::Task& task);

struct RetentionOptions {
  int64_t max_bytes = 0;                       // storage.max_bytes; sweeps for room start at 90% and stop at 80%
  int64_t retain_ms = 0;                       // storage.retain_results_hours; 0 keeps finished tasks by age
  std::chrono::milliseconds interval{600000};  // storage.sweep_interval_ms
  std::string db_path;                         // the store's directory, for the "other" bytes gauge
  executor::Limits limits;                     // to read weight references out of graph blobs
  std::function<int64_t()> now_unix_ms;        // default: the wall clock
  // Deletes one task's records; FAILED_PRECONDITION if it became pinned since the plan (the
  // node passes TaskManager::DeleteUnpinned). Default: Store::DeleteTask.
  std::function<Status(const std::string& task_key)> delete_task;
};

class RetentionSweeper {
 public:
  RetentionSweeper(Store* store, BlobReferenceGuard* guard, DiskBudget* budget, MetricsRegistry* metrics,
                   RetentionOptions options);
  ~RetentionSweeper();  // calls Stop

  void Start();
  void Stop();  // idempotent; an ongoing sweep finishes its current deletion

  // One sweep now (the thread's work; tests call it directly).
  StatusOr<RetentionPlan> SweepOnce();
  // Test hook: called after the sweep's task deletions, before its blob deletions; a non-OK
  // status ends the sweep there, as a kill -9 would.
  // Replaces RetentionOptions::delete_task; call before Start.
  void SetTaskDeleter(std::function<Status(const std::string& task_key)> deleter) {
    options_.delete_task = std::move(deleter);
  }
  // Told about every blob the sweep deleted (the clients' disk charges drop); call before Start.
  void SetBlobDeleted(std::function<void(const Hash256&)> on_deleted) { blob_deleted_ = std::move(on_deleted); }
  void SetBetweenPhasesHookForTesting(std::function<Status()> hook) { between_phases_ = std::move(hook); }

  // Bytes by category, free disk, budget: consensor_storage_*.
  void UpdateGauges();

 private:
  void Loop();
  // The blobs a task names: graph, inputs, the graph's weight blobs, and the outputs of its
  // result record (stored apart from the task record) when there is one.
  std::vector<Hash256> BlobsOf(const v1::Task& task, const std::optional<std::string>& result_record);
  Status Gather(std::vector<RetainedTask>* tasks, std::vector<RetainedBlob>* blobs);
  StatusOr<std::set<Hash256>> ReferencedBlobs();

  Store* store_;
  BlobReferenceGuard* guard_;
  DiskBudget* budget_;  // may be null
  MetricsRegistry* metrics_;
  RetentionOptions options_;
  std::function<Status()> between_phases_;
  std::function<void(const Hash256&)> blob_deleted_;

  std::mutex sweep_mu_;           // one sweep at a time
  uint64_t grace_upload_id_ = 0;  // blobs stored at or after it are too new to drop unreferenced
  // Weight blobs named by a graph blob (content-addressed, so never stale), by graph hash.
  std::map<Hash256, std::vector<Hash256>> graph_weights_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace consensor::node
