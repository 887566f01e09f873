#include "node/engine/task_manager.h"

#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>

#include "common/clock.h"
#include "common/npy.h"
#include "common/sha256.h"
#include "consensus/task.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "node/engine/input_cache.h"
#include "node/engine/retention_sweeper.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

using Clock = std::chrono::steady_clock;

// What the worker thread has used so far, for the debug phase log: whether a slow task spent its
// time on the CPU (and faulting pages in) or off it (preempted, waiting).
struct ThreadUsage {
  double cpu_seconds = 0;
  int64_t minor_faults = 0;
  int64_t involuntary_switches = 0;
  int cpu = -1;
  static ThreadUsage Now() {
    ThreadUsage u;
    timespec cpu_time{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_time) == 0) {
      u.cpu_seconds = static_cast<double>(cpu_time.tv_sec) + static_cast<double>(cpu_time.tv_nsec) * 1e-9;
    }
    rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) == 0) {
      u.minor_faults = usage.ru_minflt;
      u.involuntary_switches = usage.ru_nivcsw;
    }
    u.cpu = sched_getcpu();
    return u;
  }
};

// For logging a store key that may not be a valid task id.
std::span<const uint8_t> BytesOf(const std::string& key) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size());
}

StatusOr<Hash256> ParseHash(const std::string& hex, const std::string& what) {
  if (hex.empty()) return InvalidArgument(what + " is missing");
  if (hex.size() != 64) {
    return InvalidArgument(what + " must be a SHA-256 hash as 64 hex digits, got " + std::to_string(hex.size()) +
                           " characters");
  }
  auto h = Hash256FromHex(hex);
  if (!h.ok()) return InvalidArgument(what + " must be a SHA-256 hash as 64 hex digits: " + h.status().message());
  return h;
}

// Reads blob constants of a graph from the node's store.
class StoreBlobSource final : public executor::BlobSource {
 public:
  StoreBlobSource(Store* store, int64_t max_bytes) : store_(store), max_bytes_(max_bytes) {}
  StatusOr<std::vector<uint8_t>> Get(const Hash256& sha256) override {
    auto bytes = store_->GetBlob(sha256, max_bytes_);
    if (!bytes.ok() && bytes.status().code() == StatusCode::kNotFound) {
      return NotFound("weights blob " + ToHex(sha256) + " is not stored on this node; upload it with PutBlob");
    }
    return bytes;
  }

 private:
  Store* store_;
  int64_t max_bytes_;
};

// Everything needed to run a task, loaded from the store and checked against the caps.
struct PreparedTask {
  std::shared_ptr<const executor::Program> program;
  Hash256 graph_hash{};  // the program cache's key
  bool cached = false;   // `program` is (now) in the node's program cache
  bool warm = false;     // found there: no blob was read or compiled
  // Decoded inputs by placeholder, shared with the node's input cache when they are in it.
  std::map<std::string, std::shared_ptr<const Tensor>> inputs;

  std::map<std::string, const Tensor*> BorrowedInputs() const {
    std::map<std::string, const Tensor*> borrowed;
    for (const auto& [name, tensor] : inputs) borrowed.emplace(name, tensor.get());
    return borrowed;
  }
};

// How much of each input PrepareTask reads.
enum class InputLoad {
  kHeader,  // the .npy header only (Check, CountFlops)
  // SubmitTask: the header; but an input that fits in one stored chunk is read whole (the
  // header read streams that chunk anyway), verified, decoded and put in the input cache for
  // the worker that will run the task.
  kSubmit,
  kWhole,  // execution: every input decoded, from the input cache or read and verified
};

// Reads only the start of an .npy blob and checks its header, dtype, shape and size.
StatusOr<NpyHeaderInfo> ReadNpyBlobHeader(Store* store, const Hash256& h, const NpyLimits& limits) {
  ASSIGN_OR_RETURN(int64_t size, store->BlobSize(h));
  std::vector<uint8_t> prefix;
  const Status enough = Cancelled("header read");
  Status s = store->ReadBlob(h, [&](std::span<const uint8_t> piece) -> Status {
    prefix.insert(prefix.end(), piece.begin(), piece.end());
    return prefix.size() >= static_cast<size_t>(kNpyMaxHeaderBytes + 16) ? enough : OkStatus();
  });
  if (!s.ok() && s.code() != StatusCode::kCancelled) return s;
  return ParseNpyHeader(prefix, static_cast<uint64_t>(size), limits);
}

// Reads the graph blob and compiles it, resolving weights through the store.
StatusOr<executor::Program> CompileFromStore(Store* store, const v1::SubmitTaskRequest& spec, const Hash256& graph_hash,
                                             const executor::Limits& limits) {
  auto graph_bytes = store->GetBlob(graph_hash, limits.max_graph_file_bytes);
  if (!graph_bytes.ok()) {
    if (graph_bytes.status().code() == StatusCode::kNotFound) {
      return NotFound("graph blob " + spec.graph_sha256() +
                      " is not stored on this node; upload it with PutBlob first");
    }
    return graph_bytes.status().WithContext("graph blob " + spec.graph_sha256());
  }
  auto graph = executor::ParseGraph(*graph_bytes, /*text_format=*/false, limits);
  if (!graph.ok()) {
    if (graph.status().code() == StatusCode::kResourceExhausted) return graph.status();
    return InvalidArgument("invalid graph: " + graph.status().message());
  }
  StoreBlobSource blobs(store, limits.max_total_bytes);
  auto program = executor::CompileGraph(*graph, &blobs, limits);
  if (!program.ok()) {
    StatusCode code = program.status().code();
    if (code == StatusCode::kResourceExhausted || code == StatusCode::kNotFound || code == StatusCode::kDataLoss) {
      return program.status();
    }
    return InvalidArgument("invalid graph: " + program.status().message());
  }
  return std::move(program).value();
}

// The graph's program comes from the cache when this node compiled it recently; otherwise it is
// read from the store (blobs were verified when they entered, and GetBlob verifies them again
// on this cold read), compiled, and cached. Inputs likewise come decoded from `input_cache`
// (may be null) when a verified read put them there; `load` says how much of the others is
// read (InputLoad).
StatusOr<PreparedTask> PrepareTask(Store* store, ProgramCache* cache, InputCache* input_cache,
                                   const v1::SubmitTaskRequest& spec, const executor::Limits& limits, InputLoad load) {
  ASSIGN_OR_RETURN(Hash256 graph_hash, ParseHash(spec.graph_sha256(), "graph_sha256"));
  PreparedTask prepared;
  prepared.graph_hash = graph_hash;
  prepared.program = cache->Find(graph_hash);
  prepared.warm = prepared.cached = prepared.program != nullptr;
  if (!prepared.program) {
    ASSIGN_OR_RETURN(auto compiled, CompileFromStore(store, spec, graph_hash, limits));
    prepared.program = std::make_shared<const executor::Program>(std::move(compiled));
    prepared.cached = cache->Insert(graph_hash, prepared.program);
  }
  const executor::Program& program = *prepared.program;

  // Inputs must match the placeholders exactly, by name, dtype and shape.
  for (const auto& [name, hex] : spec.inputs()) {
    bool known = false;
    for (const auto& [placeholder, buffer] : program.inputs) known = known || placeholder == name;
    if (!known) return InvalidArgument("the graph has no input named '" + name + "'");
  }
  NpyLimits npy_limits;
  npy_limits.max_bytes = limits.max_total_bytes;
  for (const auto& input : program.inputs) {
    const std::string& name = input.first;  // not a structured binding: clang 14 cannot capture those
    auto it = spec.inputs().find(name);
    if (it == spec.inputs().end()) return InvalidArgument("missing input '" + name + "'");
    ASSIGN_OR_RETURN(Hash256 h, ParseHash(it->second, "input '" + name + "'"));
    auto not_stored = [&](const Status& s) -> Status {
      if (s.code() == StatusCode::kNotFound) {
        return NotFound("input '" + name + "': blob " + it->second +
                        " is not stored on this node; upload it with PutBlob first");
      }
      if (s.code() == StatusCode::kResourceExhausted || s.code() == StatusCode::kDataLoss) {
        return s.WithContext("input '" + name + "'");
      }
      return InvalidArgument("input '" + name + "' is not a valid .npy file: " + s.message());
    };
    DType dtype;
    Shape shape;
    std::shared_ptr<const Tensor> tensor;
    bool from_cache = false;
    if (input_cache != nullptr && load != InputLoad::kHeader) {
      tensor = input_cache->Find(h);
      from_cache = tensor != nullptr;
    }
    if (!tensor && load == InputLoad::kWhole) {
      // An .npy file adds a header of at most kNpyMaxHeaderBytes to the data.
      auto bytes = store->GetBlob(h, limits.max_total_bytes + kNpyMaxHeaderBytes + 16);
      if (!bytes.ok()) return not_stored(bytes.status());
      auto parsed = ParseNpy(*bytes, npy_limits);
      if (!parsed.ok()) return not_stored(parsed.status());
      tensor = std::make_shared<const Tensor>(std::move(parsed).value());
    } else if (!tensor && load == InputLoad::kSubmit && input_cache != nullptr) {
      auto size = store->BlobSize(h);
      if (!size.ok()) return not_stored(size.status());
      if (*size <= kBlobChunkBytes && input_cache->Admits(*size)) {
        std::vector<uint8_t> bytes;
        bytes.reserve(static_cast<size_t>(*size));
        // ReadBlob checks the hash at the end; its pieces never add up to more than the size.
        Status read = store->ReadBlob(h, [&bytes](std::span<const uint8_t> piece) {
          bytes.insert(bytes.end(), piece.begin(), piece.end());
          return OkStatus();
        });
        if (!read.ok()) return not_stored(read);
        auto parsed = ParseNpy(bytes, npy_limits);
        if (!parsed.ok()) return not_stored(parsed.status());
        tensor = std::make_shared<const Tensor>(std::move(parsed).value());
      }
    }
    if (tensor) {
      dtype = tensor->dtype();
      shape = tensor->shape();
    } else {
      auto header = ReadNpyBlobHeader(store, h, npy_limits);
      if (!header.ok()) return not_stored(header.status());
      dtype = header->dtype;
      shape = header->shape;
    }
    const executor::Buffer& b = program.buffers[input.second];
    if (dtype != b.dtype || shape != b.shape) {
      return InvalidArgument("input '" + name + "' must be " + std::string(DTypeName(b.dtype)) +
                             ShapeToString(b.shape) + ", got " + std::string(DTypeName(dtype)) + ShapeToString(shape));
    }
    if (!tensor) continue;
    // Only a tensor that fits its placeholder is kept: a wrong input is refused again next time.
    if (!from_cache && input_cache != nullptr) input_cache->Insert(h, tensor);
    if (load == InputLoad::kWhole) prepared.inputs.emplace(name, std::move(tensor));
  }
  return prepared;
}

// The configured backend, or the CPU when that one cannot be created and fallback_cpu allows.
StatusOr<std::unique_ptr<kernels::Backend>> CreateTaskBackend(const TaskManagerOptions& options) {
  auto created = kernels::CreateBackend(options.backend);
  if (!created.ok() && options.fallback_cpu && options.backend.name != "cpu") {
    kernels::BackendOptions cpu_options = options.backend;
    cpu_options.name = "cpu";
    created = kernels::CreateBackend(cpu_options);
  }
  return created;
}

// Failures of the device itself (not of the task) may fall back to the CPU.
bool IsDeviceFailure(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
    case StatusCode::kResourceExhausted:
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss: return false;
    default: return true;
  }
}

// Applies a state change if the protocol's lifecycle allows it (consensus/task.h).
Status Transition(v1::Task* task, v1::TaskState to) {
  auto from = static_cast<consensus::TaskState>(task->state());
  // succeeded -> queued is a dispute's re-execution: only while a certificate's window is open.
  const bool reopens_final =
      from == consensus::TaskState::kSucceeded && (!task->consensus().has_certificate() || task->consensus().final());
  if (!consensus::IsAllowedTransition(from, static_cast<consensus::TaskState>(to)) || reopens_final) {
    return Internal("task " + task->task_id() + ": transition from " + std::string(consensus::TaskStateName(from)) +
                    " to " + std::string(consensus::TaskStateName(static_cast<consensus::TaskState>(to))) +
                    " is not allowed");
  }
  task->set_state(to);
  return OkStatus();
}

}  // namespace

bool RecoveryReexecutes(const v1::Task& task) {
  return task.has_consensus() && task.consensus().member() && task.state() == v1::TASK_STATE_CERTIFYING &&
         !task.has_result();
}

namespace {
// The result the finisher is announcing on this thread after its sync (see Finished::record).
struct AnnouncedRecord {
  const void* manager = nullptr;
  const consensus::TaskId* task_id = nullptr;
  const v1::Task* record = nullptr;
};
thread_local AnnouncedRecord t_announced;
}  // namespace

TaskManager::TaskManager(Store* store, NodeMetrics* metrics, TaskManagerOptions options)
    : store_(store),
      metrics_(metrics),
      options_(std::move(options)),
      programs_(options_.program_cache_bytes, metrics),
      inputs_(options_.input_cache_bytes, metrics) {}

TaskManager::~TaskManager() { Shutdown(); }

std::mutex& TaskManager::RecordLock(const consensus::TaskId& task_id) {
  // Task ids are SHA-256 outputs: any byte spreads evenly.
  return record_mu_[task_id.bytes()[0] % kRecordStripes];
}

std::atomic<int>& TaskManager::SyncingCount(const consensus::TaskId& task_id) {
  const auto& b = task_id.bytes();
  return syncing_[(static_cast<size_t>(b[1]) << 8 | b[2]) % kSyncingStripes];
}

Status TaskManager::WaitDurableIfSyncing(const consensus::TaskId& task_id) {
  if (SyncingCount(task_id).load() == 0) return OkStatus();
  return store_->WaitDurable();
}

StatusOr<v1::Task> TaskManager::LoadDurableTask(const consensus::TaskId& task_id) {
  ASSIGN_OR_RETURN(v1::Task task, LoadTask(task_id));
  // Checked after the read: a synced write that the read may have seen is counted until synced.
  RETURN_IF_ERROR(WaitDurableIfSyncing(task_id));
  return task;
}

Status TaskManager::PersistTask(const v1::Task& task, const v1::TaskResult* result, Durability durability,
                                RecordWrite how) {
  std::string record;
  if (!task.SerializeToString(&record)) return Internal("cannot serialize task record");
  std::optional<std::string> result_record;
  if (result) {
    result_record.emplace();
    if (!result->SerializeToString(&*result_record)) return Internal("cannot serialize task result");
  }
  ASSIGN_OR_RETURN(Hash256 id, Hash256FromHex(task.task_id()));
  const consensus::TaskId task_id(id);
  if (how == RecordWrite::kCreate && result) return Internal("a new task record is written without a result");
  auto write = [&] {
    return how == RecordWrite::kCreate ? store_->CreateTask(task_id.Key(), record, durability)
                                       : store_->PutTask(task_id.Key(), record, result_record, durability);
  };
  if (durability != Durability::kSynced) return write();
  std::atomic<int>& syncing = SyncingCount(task_id);
  syncing.fetch_add(1);
  Status s = write();
  syncing.fetch_sub(1);
  return s;
}

StatusOr<v1::Task> TaskManager::LoadTask(const consensus::TaskId& id) {
  const std::string key = id.Key();
  ASSIGN_OR_RETURN(auto record, store_->GetTask(key));
  if (!record) return NotFound("unknown task " + id.Hex());
  v1::Task task;
  if (!task.ParseFromString(*record)) return DataLoss("the stored record of task " + id.Hex() + " is corrupt");
  if (task.state() == v1::TASK_STATE_QUEUED && journal_ != nullptr) {
    std::lock_guard<std::mutex> lock(marks_mu_);
    auto mark = running_marks_.find(id);
    if (mark != running_marks_.end()) {
      task.set_state(v1::TASK_STATE_RUNNING);
      task.set_attempts(mark->second.attempts);
      task.set_started_unix_ms(static_cast<int64_t>(mark->second.started_unix_ms));
    }
  }
  if (task.state() == v1::TASK_STATE_SUCCEEDED || task.state() == v1::TASK_STATE_CERTIFYING) {
    ASSIGN_OR_RETURN(auto result_record, store_->GetResult(key));
    // A certifying observer has no result yet; a succeeded task always has one.
    if (result_record && !task.mutable_result()->ParseFromString(*result_record)) {
      return DataLoss("the stored result of task " + id.Hex() + " is corrupt");
    }
    if (!result_record && task.state() == v1::TASK_STATE_SUCCEEDED) {
      return DataLoss("the stored result of task " + id.Hex() + " is missing");
    }
  }
  return task;
}

Status TaskManager::Recover() {
  // Attempts the journal marked running when the node stopped: each is counted in its task's
  // record (attempts, start) below, and the journal is cleared once they are.
  std::map<Hash256, RunningJournal::Mark> marked;
  if (!options_.running_journal_path.empty()) {
    ASSIGN_OR_RETURN(journal_, RunningJournal::Open(options_.running_journal_path, std::max(1, options_.workers)));
    for (const RunningJournal::Mark& m : journal_->Marks()) marked[m.task_id] = m;
  }
  std::vector<v1::Task> pending;
  RETURN_IF_ERROR(store_->ForEachTask([&](const std::string& id, const std::string& record) -> Status {
    v1::Task task;
    if (!task.ParseFromString(record)) {
      Log(LogLevel::kError, "corrupt task record skipped", {{"task", ToHex(BytesOf(id))}});
      return OkStatus();
    }
    if (task.state() == v1::TASK_STATE_QUEUED || task.state() == v1::TASK_STATE_RUNNING) pending.push_back(task);
    return OkStatus();
  }));
  // Oldest first, so recovery keeps the order in which clients submitted.
  std::stable_sort(pending.begin(), pending.end(),
                   [](const v1::Task& a, const v1::Task& b) { return a.created_unix_ms() < b.created_unix_ms(); });
  int64_t interrupted = 0;
  for (v1::Task& task : pending) {
    ASSIGN_OR_RETURN(Hash256 id, Hash256FromHex(task.task_id()));
    bool changed = false;
    if (auto m = marked.find(id); m != marked.end() && m->second.attempts > task.attempts()) {
      task.set_attempts(m->second.attempts);
      task.set_started_unix_ms(static_cast<int64_t>(m->second.started_unix_ms));
      changed = true;
      ++interrupted;
    }
    if (task.state() == v1::TASK_STATE_RUNNING) {
      RETURN_IF_ERROR(Transition(&task, v1::TASK_STATE_QUEUED));
      changed = true;
    }
    if (changed) RETURN_IF_ERROR(PersistTask(task, nullptr));
    std::lock_guard<std::mutex> lock(mu_);
    // Acknowledged tasks are never dropped, so recovery may exceed the queue capacity.
    queue_.push_back(consensus::TaskId(id));
    in_flight_.insert(consensus::TaskId(id));
    metrics_->tasks_recovered->Increment();
  }
  // Synced above: a journal cleared now can no longer take a counted attempt with it.
  if (journal_) journal_->ClearAll();
  if (!pending.empty()) {
    Log(LogLevel::kInfo, "recovered unfinished tasks",
        {{"count", static_cast<int64_t>(pending.size())}, {"interrupted_in_journal", interrupted}});
  }
  UpdateGauges();
  return OkStatus();
}

void TaskManager::Start() {
  accepting_ = true;
  finisher_ = std::thread([this] { FinisherLoop(); });
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

void TaskManager::FinisherLoop() {
  std::vector<consensus::TaskId> submissions;
  while (true) {
    std::deque<Finished> group;
    {
      std::unique_lock<std::mutex> lock(finish_mu_);
      finish_cv_.wait(lock, [this] { return finisher_stop_ || !finished_.empty(); });
      if (finished_.empty()) return;  // stopping, and everything written has been completed
      group.swap(finished_);
      submissions.swap(unsynced_submissions_);
    }
    // One sync for every result written before it, and for every record a RunTask stored
    // without a sync before that (each precedes its own task's result in the WAL).
    Status synced = store_->WaitDurable();
    // A failed sync leaves their counts: readers keep asking for a sync, as for results.
    if (synced.ok()) {
      for (const consensus::TaskId& id : submissions) SyncingCount(id).fetch_sub(1);
    }
    submissions.clear();
    for (Finished& f : group) {
      if (synced.ok()) SyncingCount(f.task_id).fetch_sub(1);
      {
        std::lock_guard<std::mutex> lock(finish_mu_);
        results_awaiting_sync_.erase(f.task_id);
      }
      // Listeners that waited for this sync read the record now (a failed sync: its error);
      // those that Peek on this thread get the record just synced instead of reading it.
      if (synced.ok() && f.record) t_announced = AnnouncedRecord{this, &f.task_id, f.record.get()};
      NotifyChanged(f.task_id);
      t_announced = AnnouncedRecord{};
      if (!synced.ok()) {
        // Not acknowledged: the count stays, so readers keep asking for a sync (and fail while
        // the disk fails); after a restart the task is running and executes again.
        Log(LogLevel::kError, "cannot sync task result", {{"task", f.task_id.Hex()}, {"error", synced.ToString()}});
        continue;
      }
      f.after_sync();
    }
  }
}

void TaskManager::Shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  if (shut_down_) return;
  shut_down_ = true;
  accepting_ = false;
  stopping_ = true;
  work_cv_.notify_all();
  changed_cv_.notify_all();
  // Listeners (RunTask calls waiting without a thread) hear of the shutdown now, as
  // WaitForChange's callers do; none is added after this (stopping_).
  std::vector<ChangeListener> listeners;
  for (auto it = watches_.begin(); it != watches_.end();) {
    Watch& watch = *it->second;
    watch.cv.notify_all();
    for (auto& [handle, listener] : watch.listeners) listeners.push_back(std::move(listener.on_change));
    watch.watchers -= static_cast<int>(watch.listeners.size());
    watch.listeners.clear();
    it = watch.watchers == 0 ? watches_.erase(it) : std::next(it);
  }
  if (!listeners.empty()) {
    lock.unlock();
    for (ChangeListener& on_change : listeners) on_change(/*stopping=*/true);
    lock.lock();
  }
  if (running_ > 0) {
    Log(LogLevel::kInfo, "draining running tasks", {{"running", running_}});
    bool drained = changed_cv_.wait_for(lock, options_.drain_timeout, [this] { return running_ == 0; });
    if (!drained) {
      Log(LogLevel::kWarn, "drain timeout: interrupting running tasks; they resume after restart",
          {{"running", running_}});
      interrupt_ = true;
    }
  }
  lock.unlock();
  for (auto& t : workers_) t.join();
  workers_.clear();
  {
    std::lock_guard<std::mutex> finish_lock(finish_mu_);
    finisher_stop_ = true;
  }
  finish_cv_.notify_all();
  if (finisher_.joinable()) finisher_.join();  // after it has synced and completed every result
}

StatusOr<consensus::TaskSpec> TaskManager::SpecOf(const v1::SubmitTaskRequest& request) {
  consensus::TaskSpec spec;
  ASSIGN_OR_RETURN(spec.graph_sha256, ParseHash(request.graph_sha256(), "graph_sha256"));
  if (static_cast<int64_t>(request.inputs_size()) > options_.max_inputs) {
    return ResourceExhausted("task has " + std::to_string(request.inputs_size()) + " inputs, over the cap of " +
                             std::to_string(options_.max_inputs));
  }
  for (const auto& [name, hex] : request.inputs()) {
    if (name.empty()) return InvalidArgument("an input has an empty placeholder name");
    ASSIGN_OR_RETURN(Hash256 h, ParseHash(hex, "input '" + name + "'"));
    spec.inputs.emplace_back(name, h);
  }
  spec.nonce = request.options().nonce();
  spec.replicas = request.options().replicas();
  spec.quorum = request.options().quorum();
  // A task of another protocol version may have other bits: refuse it rather than attest to
  // something its other signers do not compute (docs/SECURITY.md, versions).
  const uint32_t version = request.options().protocol_version();
  if (version != 0 && version != consensus::kProtocolVersion) {
    return FailedPrecondition("the task asks for protocol version " + std::to_string(version) +
                              "; this node runs protocol version " + std::to_string(consensus::kProtocolVersion));
  }
  spec.protocol_version = consensus::kProtocolVersion;
  return spec;
}

StatusOr<consensus::TaskId> TaskManager::IdOf(const v1::SubmitTaskRequest& request) {
  ASSIGN_OR_RETURN(consensus::TaskSpec spec, SpecOf(request));
  return consensus::ComputeTaskId(spec);
}

StatusOr<consensus::TaskId> TaskManager::Check(const v1::SubmitTaskRequest& request) {
  ASSIGN_OR_RETURN(consensus::TaskId id, IdOf(request));
  ASSIGN_OR_RETURN(PreparedTask prepared,
                   PrepareTask(store_, &programs_, nullptr, request, options_.limits, InputLoad::kHeader));
  (void)prepared;
  return id;
}

StatusOr<int64_t> TaskManager::CountFlops(const v1::SubmitTaskRequest& request) {
  ASSIGN_OR_RETURN(PreparedTask prepared,
                   PrepareTask(store_, &programs_, nullptr, request, options_.limits, InputLoad::kHeader));
  return prepared.program->total_flops;
}

bool TaskManager::IsWarm(const v1::SubmitTaskRequest& request) const {
  auto graph = Hash256FromHex(request.graph_sha256());
  if (!graph.ok() || !programs_.Contains(*graph)) return false;
  for (const auto& [name, hex] : request.inputs()) {
    auto input = Hash256FromHex(hex);
    if (!input.ok() || !inputs_.Contains(*input)) return false;
  }
  return true;
}

Status TaskManager::PersistUnsyncedSubmission(const consensus::TaskId& task_id, const v1::Task& task) {
  // Counted before the write, as a synced write is, so that a reader who sees the record waits
  // for a sync before it reports it.
  if (options_.before_unsynced_record) options_.before_unsynced_record(task_id);
  std::atomic<int>& syncing = SyncingCount(task_id);
  syncing.fetch_add(1);
  Status s = PersistTask(task, nullptr, Durability::kDeferred, RecordWrite::kCreate);
  if (!s.ok()) {
    syncing.fetch_sub(1);
    return s;
  }
  std::lock_guard<std::mutex> lock(finish_mu_);
  unsynced_submissions_.push_back(task_id);
  return OkStatus();
}

StatusOr<SubmitOutcome> TaskManager::Submit(const v1::SubmitTaskRequest& request, const v1::TaskConsensus* consensus,
                                            bool blobs_here, Durability record) {
  if (!accepting_) return Unavailable("the node is not accepting tasks (starting or shutting down)");
  // A network task is announced to peers once stored: its record is always synced first.
  if (record == Durability::kDeferred && (consensus != nullptr || options_.network_mode)) {
    return Internal("only a single node's task record may be written without a sync of its own");
  }
  ASSIGN_OR_RETURN(consensus::TaskId id, IdOf(request));
  const std::string key = id.Key();
  SubmitOutcome outcome{id, false};
  const bool execute = consensus == nullptr || consensus->member();
  if (!blobs_here && execute) return Internal("a task without its blobs cannot be queued for execution");

  // Idempotent: the same content is the same task.
  ASSIGN_OR_RETURN(auto existing, store_->GetTask(key));
  // A known task may be another Submit's write, still syncing: the acknowledgement waits for it.
  // A kDeferred caller acknowledges nothing now (RunTask answers with the durable record later).
  const bool acknowledges = record != Durability::kDeferred;
  if (existing) {
    if (acknowledges) RETURN_IF_ERROR(WaitDurableIfSyncing(id));
    outcome.already_known = true;
    return outcome;
  }

  // A new record on a full disk or over quota is refused before anything is written. The
  // estimate is the record as stored (spec, consensus plan) plus room for its state fields.
  if (options_.budget != nullptr) {
    const int64_t record_bytes =
        static_cast<int64_t>(request.ByteSizeLong() + (consensus ? consensus->ByteSizeLong() : 0)) + 256;
    RETURN_IF_ERROR(options_.budget->Check(record_bytes, consensus ? "adopting a task" : "task submission"));
  }
  // Held from the blob checks to the record write, so retention cannot delete a blob between
  // them (node/storage/retention.h).
  std::shared_lock<std::shared_mutex> references;
  if (options_.references != nullptr) references = options_.references->Writing();

  // Everything the task needs must be here and valid before the node acknowledges it (an
  // adopted announcement's blobs are fetched, and the graph checked, by the members only).
  int64_t ops = -1;
  if (blobs_here) {
    // A member decodes small inputs now, for its worker; an observer never runs the task.
    ASSIGN_OR_RETURN(PreparedTask prepared, PrepareTask(store_, &programs_, execute ? &inputs_ : nullptr, request,
                                                        options_.limits, InputLoad::kSubmit));
    ops = static_cast<int64_t>(prepared.program->instructions.size());
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the node is shutting down");
    if (in_flight_.count(id)) {
      outcome.already_known = true;
      return outcome;
    }
    int waiting = static_cast<int>(queue_.size()) + reserved_slots_;
    if (execute && waiting >= options_.queue_capacity) {
      return ResourceExhausted("the task queue is full (" + std::to_string(waiting) + " tasks waiting, capacity " +
                               std::to_string(options_.queue_capacity) + "); retry later");
    }
    ++reserved_slots_;
    in_flight_.insert(id);
  }

  v1::Task task;
  task.set_task_id(id.Hex());
  task.set_state(execute ? v1::TASK_STATE_QUEUED : v1::TASK_STATE_CERTIFYING);
  *task.mutable_spec() = request;
  task.set_created_unix_ms(UnixMillisNow());
  if (consensus) *task.mutable_consensus() = *consensus;
  Status persisted;
  {
    // Another path (a concurrent Submit of the same content, an adoption) may have stored the
    // task since the check above: the store's create refuses it then (ALREADY_EXISTS), in one
    // step with the write, so the record is never overwritten and no second read is needed.
    std::lock_guard<std::mutex> record_lock(RecordLock(id));
    persisted = record == Durability::kDeferred ? PersistUnsyncedSubmission(id, task)
                                                : PersistTask(task, nullptr, Durability::kSynced, RecordWrite::kCreate);
  }

  {
    std::unique_lock<std::mutex> lock(mu_);
    --reserved_slots_;
    if (!persisted.ok()) {
      in_flight_.erase(id);
      if (persisted.code() == StatusCode::kAlreadyExists) {
        lock.unlock();
        if (acknowledges) RETURN_IF_ERROR(WaitDurableIfSyncing(id));
        outcome.already_known = true;
        return outcome;
      }
      return persisted.WithContext("storing task");
    }
    if (execute) {
      queue_.push_back(id);
    } else {
      in_flight_.erase(id);
    }
  }
  work_cv_.notify_one();
  metrics_->tasks_received->Increment();
  UpdateGauges();
  // Checked first: the line's fields cost allocations per task even when it is not written.
  if (LogEnabled(LogLevel::kInfo)) {
    Log(LogLevel::kInfo, "task accepted", {{"task", id.Hex()}, {"graph", request.graph_sha256()}, {"ops", ops}});
  }
  return outcome;
}

StatusOr<v1::Task> TaskManager::Get(const consensus::TaskId& task_id) { return LoadDurableTask(task_id); }

Status TaskManager::DeleteUnpinned(const std::string& key) {
  if (key.size() != 32) return InvalidArgument("task key is not 32 bytes");
  Hash256 bytes{};
  std::copy(key.begin(), key.end(), bytes.begin());
  const consensus::TaskId id(bytes);
  {
    std::lock_guard<std::mutex> record_lock(RecordLock(id));
    ASSIGN_OR_RETURN(std::optional<std::string> record, store_->GetTask(key));
    if (!record) return OkStatus();
    v1::Task task;
    if (!task.ParseFromString(*record)) return DataLoss("the stored record of task " + id.Hex() + " is corrupt");
    if (IsRetentionPinned(task)) return FailedPrecondition("task " + id.Hex() + " is pinned");
    RETURN_IF_ERROR(store_->DeleteTask(key));
  }
  NotifyChanged(id);  // watchers see it gone (NOT_FOUND)
  return OkStatus();
}

bool TaskManager::Changed(const v1::Task& before, const v1::Task& after) {
  const v1::TaskConsensus& b = before.consensus();
  const v1::TaskConsensus& a = after.consensus();
  return before.state() != after.state() || before.attempts() != after.attempts() ||
         b.attestations_size() != a.attestations_size() || b.has_certificate() != a.has_certificate() ||
         b.certificate().dispute() != a.certificate().dispute() || b.committee_size() != a.committee_size() ||
         b.disputed() != a.disputed() || b.slashes_size() != a.slashes_size() || b.final() != a.final();
}

Status TaskManager::Mutate(const consensus::TaskId& task_id, const std::function<Status(v1::Task*)>& change,
                           const v1::TaskResult* result, Durability durability) {
  return MutateRecord(task_id, change, result, durability, nullptr);
}

Status TaskManager::MutateRecord(const consensus::TaskId& task_id, const std::function<Status(v1::Task*)>& change,
                                 const v1::TaskResult* result, Durability durability, v1::Task* written) {
  {
    std::lock_guard<std::mutex> record_lock(RecordLock(task_id));
    ASSIGN_OR_RETURN(v1::Task task, LoadTask(task_id));
    const v1::TaskState before = task.state();
    RETURN_IF_ERROR(change(&task));
    if (task.state() != before) {
      const v1::TaskState after = task.state();
      task.set_state(before);
      RETURN_IF_ERROR(Transition(&task, after));
    }
    task.clear_result();  // the result has its own record
    RETURN_IF_ERROR(PersistTask(task, result, durability));
    if (written != nullptr) *written = std::move(task);
  }
  NotifyChanged(task_id);
  return OkStatus();
}

StatusOr<v1::Task> TaskManager::Peek(const consensus::TaskId& task_id) {
  if (t_announced.manager == this && *t_announced.task_id == task_id) return *t_announced.record;
  return LoadTask(task_id);
}

Status TaskManager::Requeue(const consensus::TaskId& task_id, std::string_view reason, Durability durability) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the node is shutting down");
    if (in_flight_.count(task_id)) return OkStatus();
    in_flight_.insert(task_id);
  }
  v1::TaskState was = v1::TASK_STATE_UNSPECIFIED;
  // Mutate's steps, with the durability decided on the record it reads: a write that a power
  // failure may take back only when recovery would queue the task again anyway.
  auto requeue = [&]() -> Status {
    std::lock_guard<std::mutex> record_lock(RecordLock(task_id));
    ASSIGN_OR_RETURN(v1::Task task, LoadTask(task_id));
    // A certified task is re-executed when a dispute needs this node's own result (it may hold
    // outputs fetched from signers the dispute overrules); a final one never is.
    const bool disputable =
        task.state() == v1::TASK_STATE_SUCCEEDED && task.consensus().has_certificate() && !task.consensus().final();
    if (task.state() != v1::TASK_STATE_CERTIFYING && !disputable) {
      return FailedPrecondition("task is neither certifying nor certified and disputable");
    }
    const Durability write =
        durability != Durability::kSynced && RecoveryReexecutes(task) ? durability : Durability::kSynced;
    was = task.state();
    RETURN_IF_ERROR(Transition(&task, v1::TASK_STATE_QUEUED));
    task.clear_result();  // the result has its own record
    return PersistTask(task, nullptr, write);
  };
  Status s = requeue();
  if (s.ok()) NotifyChanged(task_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      in_flight_.erase(task_id);
      return s;
    }
    queue_.push_back(task_id);
  }
  Log(LogLevel::kInfo, "task queued again",
      {{"task", task_id.Hex()}, {"from", v1::TaskState_Name(was)}, {"reason", std::string(reason)}});
  work_cv_.notify_one();
  UpdateGauges();
  return OkStatus();
}

Status TaskManager::ForEach(const std::function<Status(const v1::Task&)>& visit) {
  return store_->ForEachTask([&](const std::string& key, const std::string&) -> Status {
    auto id = consensus::TaskId::FromKey(key);
    auto task = id.ok() ? LoadDurableTask(*id) : StatusOr<v1::Task>(id.status());
    if (!task.ok()) {
      Log(LogLevel::kError, "unreadable task record skipped",
          {{"task", ToHex(BytesOf(key))}, {"error", task.status().ToString()}});
      return OkStatus();
    }
    return visit(*task);
  });
}

StatusOr<v1::Task> TaskManager::WaitForChange(const consensus::TaskId& task_id, const v1::Task& last_seen,
                                              Clock::time_point deadline, const std::function<bool()>& stop) {
  const std::string key = task_id.Key();
  Watch* watch = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<Watch>& slot = watches_[key];
    if (!slot) slot = std::make_unique<Watch>();
    watch = slot.get();
    ++watch->watchers;
  }
  struct Unwatch {
    TaskManager* self;
    const std::string& key;
    Watch* watch;
    ~Unwatch() {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (--watch->watchers == 0) self->watches_.erase(key);
    }
  } unwatch{this, key, watch};
  while (true) {
    uint64_t seen_version;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_version = watch->version;
    }
    ASSIGN_OR_RETURN(v1::Task current, LoadDurableTask(task_id));
    if (Changed(last_seen, current)) return current;
    std::unique_lock<std::mutex> lock(mu_);
    // Wake at least every 200 ms to notice a cancelled client.
    auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
    watch->cv.wait_until(lock, until, [&] { return watch->version != seen_version || stopping_; });
    if (stopping_) return Unavailable("the node is shutting down");
    if (Clock::now() >= deadline || (stop && stop())) return current;
  }
}

int TaskManager::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int TaskManager::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

void TaskManager::UpdateGauges() {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_->queue_depth->Set(static_cast<double>(queue_.size()));
  metrics_->tasks_running->Set(running_);
}

void TaskManager::NotifyChanged(const consensus::TaskId& task_id, bool start) {
  std::vector<ChangeListener> called;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watches_.find(task_id.Key());
    if (it == watches_.end()) return;
    Watch& watch = *it->second;
    ++watch.version;
    watch.cv.notify_all();
    for (auto l = watch.listeners.begin(); l != watch.listeners.end();) {
      if (start && l->second.after_start) {
        ++l;
        continue;
      }
      called.push_back(std::move(l->second.on_change));
      l = watch.listeners.erase(l);
    }
    watch.watchers -= static_cast<int>(called.size());
    if (watch.watchers == 0) watches_.erase(it);
  }
  for (ChangeListener& on_change : called) on_change(/*stopping=*/false);
}

uint64_t TaskManager::ListenForChange(const consensus::TaskId& task_id, ChangeListener on_change, bool after_start) {
  uint64_t handle = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      std::unique_ptr<Watch>& slot = watches_[task_id.Key()];
      if (!slot) slot = std::make_unique<Watch>();
      handle = next_listen_handle_++;
      slot->listeners.emplace(handle, Watch::Listener{std::move(on_change), after_start});
      ++slot->watchers;
      return handle;
    }
  }
  on_change(/*stopping=*/true);
  return handle;
}

bool TaskManager::ResultAwaitsSync(const consensus::TaskId& task_id) {
  std::lock_guard<std::mutex> lock(finish_mu_);
  return results_awaiting_sync_.count(task_id) != 0;
}

bool TaskManager::CancelListen(const consensus::TaskId& task_id, uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = watches_.find(task_id.Key());
  if (it == watches_.end() || it->second->listeners.erase(handle) == 0) return false;
  if (--it->second->watchers == 0) watches_.erase(it);
  return true;
}

struct TaskManager::WorkerState {
  // Each worker keeps its backend: creating one (thread pool, GPU context) per task would
  // dominate small tasks.
  std::unique_ptr<kernels::Backend> backend;
  // The program this worker ran last, loaded on `backend`: its arena already holds the weights
  // and its pages are mapped, so the next task of the same program copies in only its inputs.
  // Kept only for programs in the cache, whose budget counts one arena each. Declared after
  // `backend`, so it is released first.
  std::shared_ptr<const executor::Program> warm_program;
  std::unique_ptr<executor::LoadedProgram> warm_loaded;
  int journal_slot = 0;  // this worker's slot in the running-task journal
  // Where an output's .npy is assembled before it is stored, kept between tasks (up to
  // kKeptNpyBytes) so that a large output is not copied into freshly faulted pages every task.
  std::vector<uint8_t> npy;
};

namespace {
constexpr size_t kKeptNpyBytes = size_t{64} << 20;
}  // namespace

void TaskManager::WorkerLoop(int worker_index) {
  WorkerState state;
  state.journal_slot = worker_index;
  while (true) {
    consensus::TaskId id;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // queued tasks stay queued in the store
      id = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    UpdateGauges();
    Execute(id, &state);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      in_flight_.erase(id);
    }
    changed_cv_.notify_all();
    UpdateGauges();
  }
}

void TaskManager::Execute(const consensus::TaskId& id, WorkerState* worker) {
  const std::string id_hex = id.Hex();
  // Sampled only when the phase log is on (two system calls each).
  const bool log_phases = LogEnabled(LogLevel::kDebug);
  // Records are re-read under the record lock for every write: the consensus engine adds
  // attestations to the same record while the task runs. "Running" is not synced: it survives a
  // crash of the node (a task that kills it counts its attempts), and after a power loss the task
  // is queued again, which is where recovery would put it anyway. The result's sync covers it.
  // With the journal, the mark there does what that write did, without a store write: the
  // record says queued until its next write, and LoadTask shows it running meanwhile.
  v1::SubmitTaskRequest spec;
  auto mark_running = [&]() -> Status {
    if (!journal_) {
      return Mutate(
          id,
          [&spec](v1::Task* t) -> Status {
            if (t->state() != v1::TASK_STATE_QUEUED) return Aborted("no longer queued");
            t->set_state(v1::TASK_STATE_RUNNING);
            t->set_attempts(t->attempts() + 1);
            t->set_started_unix_ms(UnixMillisNow());
            spec = t->spec();
            return OkStatus();
          },
          nullptr, Durability::kDeferred);
    }
    {
      // Under the record lock, as a Mutate: no write of this record is between the read and
      // the mark, and every later one (under this lock) sees the mark through LoadTask.
      std::lock_guard<std::mutex> record_lock(RecordLock(id));
      ASSIGN_OR_RETURN(v1::Task t, LoadTask(id));
      if (t.state() != v1::TASK_STATE_QUEUED) return Aborted("no longer queued");
      RunningJournal::Mark mark;
      mark.task_id = id.bytes();
      mark.attempts = t.attempts() + 1;
      mark.started_unix_ms = static_cast<uint64_t>(UnixMillisNow());
      journal_->Set(worker->journal_slot, mark);  // first: from here on a crash counts the attempt
      {
        std::lock_guard<std::mutex> lock(marks_mu_);
        running_marks_[id] = mark;
      }
      spec = std::move(*t.mutable_spec());
    }
    NotifyChanged(id, /*start=*/true);
    return OkStatus();
  };
  // The record is read once, under the record lock, where the task is marked running (a task no
  // longer queued, e.g. recovered twice, is left alone there). The execution clock starts after
  // the mark, so the worker's wake-up after an idle gap stays out of execution_seconds, as the
  // separate first read this replaces kept it out (docs/PERFORMANCE.md, "A warm node task's
  // fixed cost"); the mark itself (a memtable read, the journal's slot) is now out of it too:
  // the figure covers load, compile, run and the outputs' store, as its help text says.
  const auto mark_start = Clock::now();
  Status started = mark_running();
  const auto start = Clock::now();
  const double mark_s = std::chrono::duration<double>(start - mark_start).count();
  const ThreadUsage usage_start = log_phases ? ThreadUsage::Now() : ThreadUsage{};
  if (!started.ok()) {
    if (started.code() != StatusCode::kAborted) {
      Log(LogLevel::kError, "cannot mark task running", {{"task", id_hex}, {"error", started.ToString()}});
    }
    return;
  }

  int64_t cap_ms = options_.max_task_seconds * 1000;
  if (spec.options().max_wall_ms() > 0) {
    cap_ms = std::min<int64_t>(
        cap_ms, static_cast<int64_t>(std::min<uint64_t>(spec.options().max_wall_ms(), uint64_t{1} << 62)));
  }
  const auto deadline = start + std::chrono::milliseconds(cap_ms);

  v1::TaskResult result;
  // Taken before the outputs are stored and held until the result record names them, so
  // retention never sees them unreferenced (they may be identical to an old, unreferenced blob).
  std::shared_lock<std::shared_mutex> references;
  // Phase times for the debug log: where a slow task spends its time.
  double prepare_s = 0, run_s = 0, store_s = 0;
  ThreadUsage usage_run_start, usage_run_end;
  bool warm = false;
  // A CPU backend for a rerun after a device failure; declared before `loaded`, which may run on
  // it and is destroyed first.
  std::unique_ptr<kernels::Backend> cpu;
  // The program that ran, kept until the outputs are stored: the run leaves them in its arena
  // (RunOptions::copy_outputs = false), and only those the store does not hold yet are read.
  // Then it stays loaded on the worker when it may (`keep_resident`).
  std::unique_ptr<executor::LoadedProgram> loaded;
  std::shared_ptr<const executor::Program> loaded_program;
  bool keep_resident = false;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  auto run = [&]() -> Status {
    auto phase = Clock::now();
    ASSIGN_OR_RETURN(PreparedTask prepared,
                     PrepareTask(store_, &programs_, &inputs_, spec, options_.limits, InputLoad::kWhole));
    prepare_s = since(phase);
    warm = prepared.warm;
    if (log_phases) usage_run_start = ThreadUsage::Now();
    phase = Clock::now();
    executor::RunOptions ro;
    // No trace: attestations carry a zero trace root, and the trace is recomputed when asked
    // (RecomputeTrace; docs/DETERMINISM.md, "Trace root").
    ro.trace = false;
    ro.copy_outputs = false;
    ro.check_continue = [&]() -> Status {
      if (interrupt_) return Aborted("interrupted by node shutdown");
      if (Clock::now() > deadline) {
        return DeadlineExceeded("task exceeded its wall-time cap of " + std::to_string(cap_ms) + " ms");
      }
      return OkStatus();
    };
    auto run_on = [&](kernels::Backend* backend) -> StatusOr<executor::RunResult> {
      const bool own_backend = backend == worker->backend.get();
      loaded.reset();
      loaded_program = prepared.program;
      keep_resident = own_backend && prepared.cached;
      if (own_backend && worker->warm_loaded && worker->warm_program == prepared.program) {
        loaded = std::move(worker->warm_loaded);
      } else {
        worker->warm_loaded.reset();  // free the previous arena before allocating the next
        worker->warm_program.reset();
        ASSIGN_OR_RETURN(loaded, executor::LoadedProgram::Load(*prepared.program, backend));
        // The backend's packed weights stay resident with the arena: the cache counts them, and
        // may refuse the program now that it knows its whole size.
        if (keep_resident) {
          keep_resident =
              programs_.SetPreparedBytes(prepared.graph_hash, prepared.program.get(), loaded->prepared_bytes());
        }
      }
      auto outcome = loaded->RunBorrowed(prepared.BorrowedInputs(), ro);
      // Run writes only the inputs and intermediates, never the constants, so the arena can
      // serve the next task of the same program (once the outputs are stored, below); after a
      // failure it is dropped.
      if (!outcome.ok()) loaded.reset();
      return outcome;
    };
    kernels::BackendOptions cpu_options = options_.backend;
    cpu_options.name = "cpu";
    if (!worker->backend) {
      ASSIGN_OR_RETURN(worker->backend, CreateTaskBackend(options_));
    }
    kernels::Backend* backend = worker->backend.get();
    auto outcome = run_on(backend);
    const bool on_cpu = backend->name().rfind("cpu", 0) == 0;
    if (!outcome.ok() && options_.fallback_cpu && !on_cpu && IsDeviceFailure(outcome.status())) {
      Log(LogLevel::kWarn, "backend failed; rerunning on the CPU",
          {{"task", id_hex}, {"backend", options_.backend.name}, {"error", outcome.status().ToString()}});
      ASSIGN_OR_RETURN(cpu, kernels::CreateBackend(cpu_options));
      backend = cpu.get();
      outcome = run_on(backend);
    }
    RETURN_IF_ERROR(outcome.status());
    run_s = since(phase);
    if (log_phases) usage_run_end = ThreadUsage::Now();
    phase = Clock::now();
    std::string backend_name = backend->name();
    if (backend_name.rfind("cpu", 0) == 0) backend_name += " x" + std::to_string(options_.backend.threads);
    result.set_backend(backend_name);
    result.set_graph_id(ToHex(prepared.program->graph_id));
    result.set_result_root(ToHex(outcome->result_root));
    result.set_trace_root(ToHex(consensus::kDeferredTraceRoot));
    // Taken before looking for stored outputs, so that retention cannot delete one between the
    // look-up and the result record that names it.
    if (options_.references != nullptr) references = options_.references->Writing();
    // Outputs already stored (StoredOutput) are referenced; the others are encoded here.
    std::vector<std::optional<StoredOutput>> stored(outcome->outputs.size());
    std::vector<std::vector<uint8_t>> npy_headers(outcome->outputs.size());
    int64_t output_bytes = 0;
    for (size_t k = 0; k < outcome->outputs.size(); ++k) {
      stored[k] = FindStoredOutput(outcome->outputs[k].hash);
      if (stored[k]) {
        // No blob deleted since this one was seen stored: it still is, without a look-up.
        const std::optional<uint64_t> epoch = store_->BlobDeletionEpoch();
        if (epoch && stored[k]->seen_at_epoch == epoch) continue;
        auto size = store_->BlobSize(stored[k]->blob_sha256);
        if (!size.ok() && size.status().code() != StatusCode::kNotFound) return size.status();
        if (size.ok() && *size == stored[k]->blob_size) {
          stored[k]->seen_at_epoch = epoch;
          RememberStoredOutput(outcome->outputs[k].hash, *stored[k]);
          continue;
        }
        stored[k].reset();  // deleted since (retention): store it again
      }
      const executor::NamedTensor& o = outcome->outputs[k];
      npy_headers[k] = EncodeNpyHeader(o.dtype, o.shape);
      if (npy_headers[k].empty()) return Internal("cannot encode output '" + o.name + "' as .npy");
      output_bytes += static_cast<int64_t>(npy_headers[k].size() + o.bytes().size());
    }
    // A full node stores no outputs: the task fails with RESOURCE_EXHAUSTED (in network mode
    // the node then does not attest, which costs liveness, not stake: docs/NODE.md).
    // Outputs the store already has write nothing new: no free-space probe for them.
    if (options_.budget != nullptr && output_bytes > 0) {
      RETURN_IF_ERROR(options_.budget->Check(output_bytes, "task outputs"));
    }
    for (size_t k = 0; k < outcome->outputs.size(); ++k) {
      const auto& o = outcome->outputs[k];
      BlobInfo info;
      if (stored[k]) {
        info.sha256 = stored[k]->blob_sha256;
        info.size = stored[k]->blob_size;
      } else {
        // Deferred: the result record that names this blob is written synced after it (and
        // its sync covers a remembered blob's earlier deferred write too).
        const std::optional<uint64_t> epoch = store_->BlobDeletionEpoch();  // read before the put
        // The .npy assembled in the worker's kept buffer from the bytes where the run left them
        // (`loaded` is still alive); PutBlob copies what it keeps.
        std::vector<uint8_t>& npy = worker->npy;
        npy.reserve(npy_headers[k].size() + o.bytes().size());
        npy.assign(npy_headers[k].begin(), npy_headers[k].end());
        npy.insert(npy.end(), o.bytes().begin(), o.bytes().end());
        auto put = store_->PutBlob(npy, std::nullopt, Durability::kDeferred);
        if (npy.capacity() > kKeptNpyBytes) std::vector<uint8_t>().swap(npy);
        ASSIGN_OR_RETURN(info, std::move(put));
        RememberStoredOutput(o.hash, StoredOutput{info.sha256, info.size, epoch});
      }
      v1::TaskOutput* out = result.add_outputs();
      out->set_name(o.name);
      out->set_dtype(static_cast<v1::DType>(o.dtype));
      for (int64_t d : o.shape) out->add_shape(d);
      out->set_tensor_hash(ToHex(o.hash));
      out->set_blob_sha256(ToHex(info.sha256));
      out->set_blob_size(static_cast<uint64_t>(info.size));
    }
    store_s = since(phase);
    return OkStatus();
  };
  Status status = run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // A program that ran (even if storing its outputs failed) serves the worker's next task.
  if (loaded && keep_resident) {
    worker->warm_program = std::move(loaded_program);
    worker->warm_loaded = std::move(loaded);
  }
  loaded.reset();
  const ThreadUsage usage_end = log_phases ? ThreadUsage::Now() : ThreadUsage{};
  metrics_->execution_seconds->Observe(seconds);

  if (!status.ok() && interrupt_ && status.code() == StatusCode::kAborted) {
    // Left running in the store: recovery queues it again after restart.
    Log(LogLevel::kWarn, "task interrupted by shutdown", {{"task", id_hex}});
    return;
  }
  if (status.ok()) result.set_execution_seconds(seconds);
  // Written without waiting for its sync (the finisher waits, for many results at once); counted
  // as syncing from before the write, so a reader that sees it waits for that sync.
  std::atomic<int>& syncing = SyncingCount(id);
  syncing.fetch_add(1);
  if (!options_.network_mode) {
    std::lock_guard<std::mutex> lock(finish_mu_);
    results_awaiting_sync_.insert(id);
  }
  v1::Task written;
  Status persisted = MutateRecord(
      id,
      [&](v1::Task* t) -> Status {
        t->set_finished_unix_ms(UnixMillisNow());
        if (status.ok()) {
          t->set_state(options_.network_mode ? v1::TASK_STATE_CERTIFYING : v1::TASK_STATE_SUCCEEDED);
        } else {
          t->set_state(v1::TASK_STATE_FAILED);
          t->set_error_code(std::string(StatusCodeName(status.code())));
          t->set_error_message(status.message());
        }
        return OkStatus();
      },
      status.ok() ? &result : nullptr, Durability::kDeferred, options_.network_mode ? nullptr : &written);
  if (references.owns_lock()) references.unlock();  // the result record names the outputs now
  if (!persisted.ok()) {
    syncing.fetch_sub(1);
    {
      std::lock_guard<std::mutex> lock(finish_mu_);
      results_awaiting_sync_.erase(id);
    }
    NotifyChanged(id);
    // The task stays running (in the store, or by its journal mark, which stays) and is retried
    // after a restart.
    Log(LogLevel::kError, "cannot store task result", {{"task", id_hex}, {"error", persisted.ToString()}});
    return;
  }
  if (journal_) {
    // The record says finished now, so the mark shows nothing more; cleared after it, so that
    // a crash in between still finds the record finished.
    {
      std::lock_guard<std::mutex> lock(marks_mu_);
      running_marks_.erase(id);
    }
    journal_->Clear(worker->journal_slot);
  }
  if (log_phases) {
    // Wall and CPU time of the whole bracket (execution_seconds) and of the program's run; minor
    // faults and involuntary context switches of the worker thread; the CPU it ran on.
    Log(LogLevel::kDebug, "task phases",
        {{"task", id_hex},
         {"warm", warm},
         {"seconds", seconds},
         {"cpu_seconds", usage_end.cpu_seconds - usage_start.cpu_seconds},
         {"minor_faults", usage_end.minor_faults - usage_start.minor_faults},
         {"involuntary_switches", usage_end.involuntary_switches - usage_start.involuntary_switches},
         {"mark_running_seconds", mark_s},
         {"prepare_seconds", prepare_s},
         {"run_seconds", run_s},
         {"run_cpu_seconds", usage_run_end.cpu_seconds - usage_run_start.cpu_seconds},
         {"run_minor_faults", usage_run_end.minor_faults - usage_run_start.minor_faults},
         {"store_seconds", store_s},
         {"cpu_at_start", usage_start.cpu},
         {"cpu_at_end", usage_end.cpu}});
  }
  // Single node: the record as LoadTask would return it (with its result when it succeeded),
  // for the finisher's announcement.
  std::shared_ptr<v1::Task> record;
  if (!options_.network_mode) {
    record = std::make_shared<v1::Task>(std::move(written));
    if (status.ok()) *record->mutable_result() = result;
  }
  auto after_sync = [this, id, id_hex, status, seconds, result = std::move(result)] {
    if (status.ok()) {
      metrics_->tasks_completed->Increment();
      if (LogEnabled(LogLevel::kInfo)) {  // its fields are copies, made only for a line written
        Log(LogLevel::kInfo, options_.network_mode ? "task executed" : "task succeeded",
            {{"task", id_hex},
             {"result_root", result.result_root()},
             {"seconds", seconds},
             {"backend", result.backend()}});
      }
      if (options_.on_executed) options_.on_executed(id, result);
    } else {
      metrics_->tasks_failed->Increment();
      Log(LogLevel::kWarn, "task failed", {{"task", id_hex}, {"error", status.ToString()}, {"seconds", seconds}});
    }
  };
  if (options_.network_mode) {
    // on_executed signs, stores and gossips the vote, and fault injection may hold it: it stays
    // on this worker instead of queueing other tasks' votes behind it on the one finisher thread.
    // It runs before the result has a sync of its own, and the member's commitment goes out
    // before one too (its record after the result's in the WAL): the signature is RFC 6979 over
    // a deterministic result, so a result or commitment lost to a power failure is executed and
    // signed again identically (docs/SECURITY.md section 8). Readers keep waiting on the syncing
    // count until the finisher's sync, which covers the result and the commitment.
    after_sync();
    // The sync itself is the finisher's, shared with other results: this worker takes the next
    // task now instead of waiting for an fsync that nothing it does next depends on.
    {
      std::lock_guard<std::mutex> lock(finish_mu_);
      finished_.push_back(Finished{id, [] {}});
    }
    finish_cv_.notify_one();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    finished_.push_back(Finished{id, std::move(after_sync), std::move(record)});
  }
  finish_cv_.notify_one();
}

std::optional<TaskManager::StoredOutput> TaskManager::FindStoredOutput(const Hash256& tensor_hash) {
  std::lock_guard<std::mutex> lock(stored_outputs_mu_);
  auto it = stored_outputs_.find(tensor_hash);
  if (it == stored_outputs_.end()) return std::nullopt;
  return it->second;
}

void TaskManager::RememberStoredOutput(const Hash256& tensor_hash, const StoredOutput& stored) {
  std::lock_guard<std::mutex> lock(stored_outputs_mu_);
  auto [it, inserted] = stored_outputs_.insert_or_assign(tensor_hash, stored);
  if (!inserted) return;
  stored_outputs_order_.push_back(tensor_hash);
  if (stored_outputs_order_.size() > kStoredOutputsRemembered) {
    stored_outputs_.erase(stored_outputs_order_.front());
    stored_outputs_order_.pop_front();
  }
}

StatusOr<v1::TraceResponse> TaskManager::RecomputeTrace(const consensus::TaskId& task_id, uint32_t first_op,
                                                        uint32_t max_ops) {
  if (max_ops > kMaxTraceOpsPerResponse) {
    return InvalidArgument("max_ops " + std::to_string(max_ops) + " is over the limit of " +
                           std::to_string(kMaxTraceOpsPerResponse) + " hashes per response");
  }
  ASSIGN_OR_RETURN(v1::Task task, Get(task_id));
  const std::string id_hex = task_id.Hex();
  if (task.result().result_root().empty()) {
    return FailedPrecondition("task " + id_hex + " has no result on this node (state " +
                              v1::TaskState_Name(task.state()) + "): only an executed task's trace is recomputed");
  }
  std::unique_lock<std::mutex> one_at_a_time(trace_mu_, std::try_to_lock);
  if (!one_at_a_time.owns_lock()) return ResourceExhausted("this node is recomputing another trace; retry later");
  if (!accepting_) return Unavailable("the node is shutting down");

  const auto start = Clock::now();
  auto prepared = PrepareTask(store_, &programs_, &inputs_, task.spec(), options_.limits, InputLoad::kWhole);
  if (!prepared.ok()) {
    if (prepared.status().code() == StatusCode::kNotFound) {
      return FailedPrecondition("this node does not hold the task's blobs: " + prepared.status().message());
    }
    return prepared.status();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::Backend> backend, CreateTaskBackend(options_));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(*prepared->program, backend.get()));
  const auto deadline = start + std::chrono::seconds(options_.max_task_seconds);
  executor::RunOptions ro;
  ro.trace = true;
  ro.copy_outputs = false;  // only the roots are compared
  ro.check_continue = [&]() -> Status {
    if (!accepting_) return Aborted("interrupted by node shutdown");
    if (Clock::now() > deadline) return DeadlineExceeded("the trace took longer than the task wall-time cap");
    return OkStatus();
  };
  ASSIGN_OR_RETURN(executor::RunResult run, loaded->RunBorrowed(prepared->BorrowedInputs(), ro));
  const std::string result_root = ToHex(run.result_root);
  if (result_root != task.result().result_root()) {
    // Execution is deterministic: this node computed another result than the one it stored.
    Log(LogLevel::kError, "recomputed result root differs from the stored one",
        {{"task", id_hex}, {"stored", task.result().result_root()}, {"recomputed", result_root}});
    return Internal("recomputed result root " + result_root + " differs from the stored " +
                    task.result().result_root() + ": this node's execution is not deterministic");
  }
  v1::TraceResponse response;
  response.set_task_id(id_hex);
  response.set_result_root(result_root);
  response.set_trace_root(ToHex(run.trace_root));
  response.set_trace_ops(static_cast<uint32_t>(run.trace.size()));
  response.set_first_op(first_op);
  for (size_t i = first_op; i < run.trace.size() && i < size_t{first_op} + max_ops; ++i) {
    response.add_op_hashes(ToHex(run.trace[i]));
  }
  response.set_backend(backend->name());
  response.set_execution_seconds(std::chrono::duration<double>(Clock::now() - start).count());
  return response;
}

}  // namespace consensor::node
