// The task lifecycle on one node: admission (validation, caps, a bounded queue), durable
// records, a worker pool that executes tasks with the deterministic executor, recovery after
// a crash, and change notification for WatchTask.
//
// Durability: SubmitTask returns only after the task record is synced to the store, so every
// acknowledged task survives kill -9. At startup, tasks found queued or running are queued
// again (running ones count another attempt); results are deterministic, so re-executing a
// task that was interrupted is safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "consensor/v1/node.pb.h"
#include "consensus/task.h"
#include "executor/limits.h"
#include "kernels/backend_factory.h"
#include "node/engine/input_cache.h"
#include "node/engine/program_cache.h"
#include "node/engine/running_journal.h"
#include "node/storage/disk_budget.h"
#include "node/storage/retention.h"
#include "node/storage/store.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {

struct TaskManagerOptions {
  int workers = 2;          // tasks executing at once
  int queue_capacity = 64;  // tasks waiting; beyond this Submit gets RESOURCE_EXHAUSTED
  kernels::BackendOptions backend;
  bool fallback_cpu = false;  // rerun on the CPU when the GPU backend fails
  // Per task: graph size (also the node's blob cap), elements, bytes, FLOPs, ops. A node serves
  // many clients, so its arena and FLOP caps are tighter than executor::Limits' (the CLI's).
  executor::Limits limits = [] {
    executor::Limits node_limits;
    node_limits.max_total_bytes = int64_t{4} << 30;                   // inputs + weights + live values
    node_limits.max_flops = int64_t{10} * 1000 * 1000 * 1000 * 1000;  // 1e13
    return node_limits;
  }();
  // The warm path (program_cache.h): compiled programs and their weights kept between tasks,
  // in bytes of weights plus arenas. 0 disables it.
  int64_t program_cache_bytes = int64_t{1} << 30;
  // Decoded inputs kept in memory between SubmitTask and execution, and for tasks that repeat
  // an input (input_cache.h), in bytes. 0 disables it.
  int64_t input_cache_bytes = int64_t{64} << 20;
  int64_t max_inputs = 1024;       // placeholders per task
  int64_t max_task_seconds = 600;  // wall time per task execution
  // How long Shutdown waits for running tasks before interrupting them (they are then left
  // running in the store and resume after a restart).
  std::chrono::milliseconds drain_timeout{30000};
  // Network mode: a successful execution ends in CERTIFYING (the consensus engine finalizes
  // it) and on_executed runs once the result is written, before its sync: the first synced
  // write after it (on_executed's own, or the worker's sync after on_executed returns) covers
  // it, and readers wait for that sync.
  bool network_mode = false;
  std::function<void(const consensus::TaskId& task_id, const v1::TaskResult& result)> on_executed;
  // Disk budget and retention (docs/NODE.md): new task records and task outputs are checked
  // against `budget` before they are written, and `references` is held shared from a task's blob
  // checks to the record that names the blobs. Either may be null (no quota, no retention).
  DiskBudget* budget = nullptr;
  BlobReferenceGuard* references = nullptr;
  // The running-task journal (running_journal.h), opened by Recover. With it, a task is marked
  // running there, and shown running by this manager, instead of its record being written
  // before it runs; the record's next write (its result, or a consensus update) says running
  // or later. Empty: the record is written running before the task runs.
  std::string running_journal_path;
  // Fault injection only (crash-before-unsynced-record): called just before a new record is
  // written without a sync of its own (Submit with kDeferred, RunTask's), so a test can stop the
  // node with its disk as a power failure after that write would leave it.
  std::function<void(const consensus::TaskId& task_id)> before_unsynced_record;
};

struct SubmitOutcome {
  consensus::TaskId task_id;
  bool already_known = false;
};

// A seated member's task that has not executed here: certifying, this node a member, no result.
// The consensus engine's recovery (ConsensusEngine::Recover) queues such a task again at startup,
// so a write that moves it to queued may be lost to a power failure without losing the execution.
bool RecoveryReexecutes(const v1::Task& task);

class TaskManager {
 public:
  TaskManager(Store* store, NodeMetrics* metrics, TaskManagerOptions options);
  ~TaskManager();  // calls Shutdown

  // Queues every task the store holds in a non-final state. Call once, before Start.
  Status Recover();
  void Start();
  // Stops admission, lets running tasks finish (up to drain_timeout), and joins the workers.
  // Queued tasks stay queued in the store. Idempotent.
  void Shutdown();

  // The task's counted FLOPs (the figure the FLOP cap checks), compiling its graph as Submit would
  // (through the program cache). The errors are Submit's for the same request.
  StatusOr<int64_t> CountFlops(const v1::SubmitTaskRequest& request);
  // Errors carry the gRPC-style code the API returns: INVALID_ARGUMENT (malformed request,
  // invalid graph, missing or extra input, wrong input type), NOT_FOUND (unknown blob),
  // RESOURCE_EXHAUSTED (over a cap, or the queue is full), UNAVAILABLE (shutting down).
  // In network mode `consensus` comes with the task: a member's task is queued, an observer's
  // is stored as CERTIFYING and never runs (unless Requeue'd later). `blobs_here` false (an
  // adopted announcement, docs/NETWORK.md "Adopt"): the blobs are not on this node, so the
  // graph is not checked now; the task is stored CERTIFYING and whoever Requeues it must fetch
  // the blobs first.
  //
  // `record` kDeferred (single node only; RunTask): the new record is written without a sync of
  // its own and Submit returns without waiting for one. The caller then promises the client
  // nothing until a later sync covers the record: the finisher's sync of the task's result, which
  // comes later in the WAL. Until a sync covers it, the record counts as syncing, so GetTask,
  // WatchTask and a duplicate Submit wait for a sync before they report it (docs/NODE.md,
  // "RunTask: the task's record without a sync of its own").
  StatusOr<SubmitOutcome> Submit(const v1::SubmitTaskRequest& request, const v1::TaskConsensus* consensus = nullptr,
                                 bool blobs_here = true, Durability record = Durability::kSynced);
  // Whether Submit of `request` would find its program and every input in memory (the warm
  // path): it then reads no blob and compiles nothing, only the task's record (the store's
  // memtable and cache). Counts no cache hit or miss.
  bool IsWarm(const v1::SubmitTaskRequest& request) const;
  // The task id of a request (consensus/task.h); checks the hashes and the input cap, reads no blobs.
  StatusOr<consensus::TaskId> IdOf(const v1::SubmitTaskRequest& request);
  // Validates a request without storing anything (the same checks as Submit); returns the id.
  StatusOr<consensus::TaskId> Check(const v1::SubmitTaskRequest& request);
  // Read-modify-write of a stored task record, serialized with every other record write.
  // `change` may alter any field; a state change must follow the lifecycle (INTERNAL otherwise).
  // With `result`, the result record is written in the same batch.
  // `durability` kDeferred only for a change that may be lost in a power failure (running), or
  // whose acknowledgement waits for a later sync (a result: Execute and the finisher).
  Status Mutate(const consensus::TaskId& task_id, const std::function<Status(v1::Task*)>& change,
                const v1::TaskResult* result = nullptr, Durability durability = Durability::kSynced);
  // certifying -> queued, and into the work queue (a replacement or dispute member); also
  // succeeded -> queued while the certificate's challenge window is open (a dispute needs this
  // node's own result). `reason` is logged with the state the task left. `durability` kDeferred
  // is honoured only when the record before the write is one that recovery queues again
  // (RecoveryReexecutes); any other requeue is synced.
  Status Requeue(const consensus::TaskId& task_id, std::string_view reason = "executes here",
                 Durability durability = Durability::kSynced);
  // Every stored task, in key order (for the consensus engine's recovery).
  Status ForEach(const std::function<Status(const v1::Task&)>& visit);
  // NOT_FOUND for an unknown id.
  StatusOr<v1::Task> Get(const consensus::TaskId& task_id);
  // The record as it is now, which may hold a write not yet synced: for a caller that reports
  // it only after MayWaitForSync(task_id) turned false after this read (then it is what Get
  // would return), or never (RunTask, deciding whether the task is final yet).
  // On the finisher's thread, while it announces a result it has just synced, this is the
  // record it wrote, without a read (RunTask's answer; see AnnouncedRecord).
  StatusOr<v1::Task> Peek(const consensus::TaskId& task_id);
  // Retention: deletes a task's records unless it is pinned (retention_sweeper.h), under the
  // record lock, so a concurrent Mutate can neither bring it back nor change it meanwhile.
  // FAILED_PRECONDITION when pinned; OK when already gone. `key` is the store key (id.Key()).
  Status DeleteUnpinned(const std::string& key);

  // Blocks until the task's record differs from `last_seen` (see Changed),
  // `deadline` passes, `stop()` returns true, or the manager shuts down; then returns the
  // current record. Used by WatchTask.
  StatusOr<v1::Task> WaitForChange(const consensus::TaskId& task_id, const v1::Task& last_seen,
                                   std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stop);

  // WaitForChange without a thread: calls `on_change(stopping)` once, at the next change of the
  // task's record (stopping = false) or when the manager shuts down (stopping = true; at once when
  // it already is). It runs on the thread that made the change, outside the manager's locks, so
  // it must not block (RunTask's reactor only schedules its next step). Returns the handle for
  // CancelListen. `after_start`: the worker's start of the task (the running mark) does not
  // count as the change; the listener stays for the next one (a caller that waits for a final
  // state, RunTask, is then not woken for nothing).
  using ChangeListener = std::function<void(bool stopping)>;
  uint64_t ListenForChange(const consensus::TaskId& task_id, ChangeListener on_change, bool after_start = false);
  // Drops a listener not yet called; false when it has been (or is being) called.
  bool CancelListen(const consensus::TaskId& task_id, uint64_t handle);
  // Whether Get(task_id) may now wait for a sync (a synced write of the task, or of one that
  // shares its stripe, is under way): a listener that must not block hands the read elsewhere.
  bool MayWaitForSync(const consensus::TaskId& task_id) { return SyncingCount(task_id).load() != 0; }
  // Whether the task's result is written and waits for the finisher's sync (single node): the
  // finisher announces the task's change again after that sync, so a listener may wait for it.
  bool ResultAwaitsSync(const consensus::TaskId& task_id);

  // What WatchTask reports: a new state or attempt, or consensus progress (votes, certificate,
  // committee changes, disputes, slashes).
  static bool Changed(const v1::Task& before, const v1::Task& after);

  // Executes a finished task again with the trace (tasks run without it: docs/DETERMINISM.md,
  // "Trace root") and returns its roots and the per-operation hashes [first_op, first_op +
  // max_ops). One at a time per node (RESOURCE_EXHAUSTED while another runs); the task's wall
  // cap applies. INTERNAL if the recomputed result root is not the stored one.
  StatusOr<v1::TraceResponse> RecomputeTrace(const consensus::TaskId& task_id, uint32_t first_op, uint32_t max_ops);
  static constexpr uint32_t kMaxTraceOpsPerResponse = 4096;

  int queue_depth() const;
  int running() const;
  bool accepting() const { return accepting_.load(); }
  const TaskManagerOptions& options() const { return options_; }

 private:
  void WorkerLoop(int worker_index);
  // What one worker keeps between tasks: its backend and, for the program it ran last (when
  // that program is in the cache), the loaded program whose arena already holds the weights.
  struct WorkerState;
  void Execute(const consensus::TaskId& task_id, WorkerState* worker);
  // kCreate: only when the store has no record of the task (ALREADY_EXISTS otherwise).
  enum class RecordWrite { kReplace, kCreate };
  Status PersistTask(const v1::Task& task, const v1::TaskResult* result, Durability durability = Durability::kSynced,
                     RecordWrite how = RecordWrite::kReplace);
  // A new record without a sync of its own, counted as syncing until the finisher's next sync;
  // ALREADY_EXISTS, and nothing counted, when the store has one.
  Status PersistUnsyncedSubmission(const consensus::TaskId& task_id, const v1::Task& task);
  StatusOr<consensus::TaskSpec> SpecOf(const v1::SubmitTaskRequest& request);
  // The stored record, shown running (with its attempt count and start) when a worker has
  // marked it running in the journal and the record still says queued.
  StatusOr<v1::Task> LoadTask(const consensus::TaskId& task_id);
  // LoadTask for a record that leaves the task manager (Get, WaitForChange, ForEach): the store
  // makes a synced write visible before its sync, so when a synced write of this task may be
  // between the two, this waits for a sync first. A caller never reports a state that a power
  // loss could take back, except the deferred "running".
  StatusOr<v1::Task> LoadDurableTask(const consensus::TaskId& task_id);
  Status WaitDurableIfSyncing(const consensus::TaskId& task_id);
  // Wakes the watchers of `task_id` (and a draining Shutdown).
  // `start`: the change is a worker's start of the task (listeners that wait past it stay).
  void NotifyChanged(const consensus::TaskId& task_id, bool start = false);
  void UpdateGauges();

  Store* store_;
  NodeMetrics* metrics_;
  TaskManagerOptions options_;
  ProgramCache programs_;
  InputCache inputs_;

  // Serialize read-modify-write of one task's record, striped by task id: a write waits for
  // its sync under the lock, so writes of different tasks must not share one lock, or they
  // could never share a sync (the store's group commit).
  static constexpr size_t kRecordStripes = 64;
  std::array<std::mutex, kRecordStripes> record_mu_;
  std::mutex& RecordLock(const consensus::TaskId& task_id);
  std::mutex trace_mu_;  // held while a trace is recomputed
  // Synced record writes under way (written, maybe not yet synced), by stripe of task id. A
  // stripe shared by two tasks only costs a reader a sync it did not need.
  static constexpr size_t kSyncingStripes = 4096;
  std::array<std::atomic<int>, kSyncingStripes> syncing_{};
  std::atomic<int>& SyncingCount(const consensus::TaskId& task_id);

  // Outputs this node stored recently: the .npy blob of each, by the output's tensor hash. The
  // tensor hash covers dtype, shape and data, and the .npy encoding is a function of those, so
  // a task whose output has a remembered tensor hash (the same model on the same inputs, with
  // another nonce) references that blob, if still stored, instead of encoding, hashing and
  // storing the same bytes again. Bounded: the oldest entry goes first.
  struct StoredOutput {
    Hash256 blob_sha256{};
    int64_t blob_size = 0;
    // The store's blob deletion epoch read before the blob was last seen stored: while the
    // store still reports it, no blob has been deleted since (Store::BlobDeletionEpoch).
    std::optional<uint64_t> seen_at_epoch;
  };
  static constexpr size_t kStoredOutputsRemembered = 256;
  std::optional<StoredOutput> FindStoredOutput(const Hash256& tensor_hash);
  void RememberStoredOutput(const Hash256& tensor_hash, const StoredOutput& stored);
  // The journal and the tasks marked running in it whose record may still say queued, by id.
  std::unique_ptr<RunningJournal> journal_;
  std::mutex marks_mu_;
  std::map<consensus::TaskId, RunningJournal::Mark> running_marks_;  // guarded by marks_mu_
  std::mutex stored_outputs_mu_;
  std::map<Hash256, StoredOutput> stored_outputs_;
  std::deque<Hash256> stored_outputs_order_;  // oldest first
  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // workers wait for queued tasks
  std::condition_variable changed_cv_;  // Shutdown waits for running tasks to end
  // The tasks someone watches (WaitForChange), by store key: a change wakes only the watchers of
  // that task, which then re-read its record, instead of every watcher re-reading its own.
  struct Watch {
    uint64_t version = 0;  // bumped on every change of the task
    int watchers = 0;      // WaitForChange calls and listeners
    std::condition_variable cv;
    struct Listener {
      ChangeListener on_change;
      bool after_start = false;  // not called for the worker's start of the task
    };
    std::map<uint64_t, Listener> listeners;  // by handle; each called once
  };
  uint64_t next_listen_handle_ = 1;  // guarded by mu_
  std::map<std::string, std::unique_ptr<Watch>> watches_;
  std::deque<consensus::TaskId> queue_;    // FIFO
  std::set<consensus::TaskId> in_flight_;  // queued or running, to refuse duplicate queueing
  int reserved_slots_ = 0;                 // admissions validated but not yet queued
  int running_ = 0;
  bool stopping_ = false;
  std::atomic<bool> accepting_{false};
  std::atomic<bool> interrupt_{false};  // drain timeout passed: stop running tasks
  std::vector<std::thread> workers_;
  bool shut_down_ = false;

  // Results written but maybe not yet synced. A worker writes a task's result without waiting
  // for the sync and takes the next task; the finisher waits for one sync that covers every
  // result written so far, then completes them (metrics, log). In network mode the worker
  // calls on_executed first and then waits for the sync itself. Until then the
  // task's syncing count makes readers wait for that sync, so no one is told of a result that a
  // power loss could take back.
  struct Finished {
    consensus::TaskId task_id;
    std::function<void()> after_sync;
    // Single node: the record the worker wrote (its result included). Nothing writes a
    // finished single-node record again (retention may delete it), so while the finisher
    // announces the sync it is the stored record, and listeners that Peek on that thread get it
    // without reading it back.
    std::shared_ptr<const v1::Task> record;
  };
  // Mutate that also returns the record it wrote (without its result).
  Status MutateRecord(const consensus::TaskId& task_id, const std::function<Status(v1::Task*)>& change,
                      const v1::TaskResult* result, Durability durability, v1::Task* written);
  void FinisherLoop();
  std::mutex finish_mu_;
  std::condition_variable finish_cv_;
  std::deque<Finished> finished_;  // guarded by finish_mu_
  // New records written without a sync of their own (Submit with kDeferred), each counted as
  // syncing until the finisher's next sync, which covers them (they precede it in the WAL).
  std::vector<consensus::TaskId> unsynced_submissions_;  // guarded by finish_mu_
  std::set<consensus::TaskId> results_awaiting_sync_;    // guarded by finish_mu_
  bool finisher_stop_ = false;                           // guarded by finish_mu_
  std::thread finisher_;
};

}  // namespace consensor::node
