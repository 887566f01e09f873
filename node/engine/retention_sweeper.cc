#include "node/engine/retention_sweeper.h"

#include <filesystem>
#include <system_error>

#include "common/clock.h"
#include "consensus/task.h"
#include "executor/serialize.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

constexpr char kBytesGauge[] = "consensor_storage_bytes";
constexpr char kBytesHelp[] =
    "Bytes the store holds, by category: blobs, tasks and results (records), other (RocksDB's own "
    "files beyond those: WAL, indexes, space not yet compacted).";

std::optional<Hash256> HashOf(const std::string& hex) {
  auto h = Hash256FromHex(hex);
  if (!h.ok()) return std::nullopt;
  return *h;
}

// Bytes of the files under `dir` (RocksDB's directory is flat, but walk it whole).
int64_t DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  int64_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto size = it->file_size(size_ec);
      if (!size_ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

}  // namespace

bool IsRetentionPinned(const v1::Task& task) {
  if (!consensus::IsFinal(static_cast<consensus::TaskState>(task.state()))) return true;
  if (!task.has_consensus()) return false;
  const v1::TaskConsensus& c = task.consensus();
  // Certified, or disputed, and not yet past the challenge window.
  return (c.has_certificate() || c.disputed()) && !c.final();
}

RetentionSweeper::RetentionSweeper(Store* store, BlobReferenceGuard* guard, DiskBudget* budget,
                                   MetricsRegistry* metrics, RetentionOptions options)
    : store_(store), guard_(guard), budget_(budget), metrics_(metrics), options_(std::move(options)) {
  if (!options_.now_unix_ms) options_.now_unix_ms = [] { return UnixMillisNow(); };
  // Blobs stored before this node started are past their grace at the first sweep.
  grace_upload_id_ = store_->NextUploadId();
  UpdateGauges();
}

RetentionSweeper::~RetentionSweeper() { Stop(); }

void RetentionSweeper::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void RetentionSweeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RetentionSweeper::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, options_.interval, [this] { return stopping_; });
      if (stopping_) return;
    }
    auto plan = SweepOnce();
    if (!plan.ok()) Log(LogLevel::kWarn, "retention sweep failed", {{"error", plan.status().ToString()}});
  }
}

std::vector<Hash256> RetentionSweeper::BlobsOf(const v1::Task& task, const std::optional<std::string>& result_record) {
  std::vector<Hash256> out;
  const v1::SubmitTaskRequest& spec = task.spec();
  if (auto graph = HashOf(spec.graph_sha256())) {
    out.push_back(*graph);
    auto cached = graph_weights_.find(*graph);
    if (cached == graph_weights_.end()) {
      std::vector<Hash256> weights;
      auto bytes = store_->GetBlob(*graph, options_.limits.max_graph_file_bytes);
      if (bytes.ok()) {
        auto parsed = executor::ParseGraph(*bytes, /*text_format=*/false, options_.limits);
        if (parsed.ok()) {
          for (const auto& value : parsed->values()) {
            if (value.blob) weights.push_back(value.blob->sha256);
          }
        }
        // Only a graph that was read is remembered: one that is absent now may arrive later.
        cached = graph_weights_.emplace(*graph, std::move(weights)).first;
      }
    }
    if (cached != graph_weights_.end()) out.insert(out.end(), cached->second.begin(), cached->second.end());
  }
  for (const auto& [name, hex] : spec.inputs()) {
    if (auto h = HashOf(hex)) out.push_back(*h);
  }
  for (const v1::TaskOutput& o : task.result().outputs()) {
    if (auto h = HashOf(o.blob_sha256())) out.push_back(*h);
  }
  if (result_record) {
    v1::TaskResult result;
    // An unreadable result names nothing we can keep; its task is reported when it is read.
    if (result.ParseFromString(*result_record)) {
      for (const v1::TaskOutput& o : result.outputs()) {
        if (auto h = HashOf(o.blob_sha256())) out.push_back(*h);
      }
    }
  }
  return out;
}

Status RetentionSweeper::Gather(std::vector<RetainedTask>* tasks, std::vector<RetainedBlob>* blobs) {
  RETURN_IF_ERROR(store_->ForEachTask([&](const std::string& id, const std::string& record) -> Status {
    v1::Task task;
    RetainedTask facts;
    facts.task_id = id;
    if (!task.ParseFromString(record)) {
      // Unreadable: keep it, and everything, rather than guess what it references.
      facts.pinned = true;
      tasks->push_back(std::move(facts));
      return OkStatus();
    }
    facts.pinned = IsRetentionPinned(task);
    facts.finished_unix_ms = std::max(task.finished_unix_ms(), task.created_unix_ms());
    ASSIGN_OR_RETURN(std::optional<std::string> result, store_->GetResult(id));
    facts.record_bytes = static_cast<int64_t>(id.size() + record.size()) +
                         (result ? static_cast<int64_t>(id.size() + result->size()) : 0);
    facts.blobs = BlobsOf(task, result);
    tasks->push_back(std::move(facts));
    return OkStatus();
  }));
  return store_->ForEachBlob([&](const Hash256& h, int64_t size, uint64_t upload_id) {
    blobs->push_back(RetainedBlob{h, size, upload_id});
    return OkStatus();
  });
}

StatusOr<std::set<Hash256>> RetentionSweeper::ReferencedBlobs() {
  std::set<Hash256> referenced;
  RETURN_IF_ERROR(store_->ForEachTask([&](const std::string& id, const std::string& record) -> Status {
    v1::Task task;
    if (!task.ParseFromString(record)) return DataLoss("unreadable task record: no blob may be deleted now");
    ASSIGN_OR_RETURN(std::optional<std::string> result, store_->GetResult(id));
    for (const Hash256& h : BlobsOf(task, result)) referenced.insert(h);
    return OkStatus();
  }));
  return referenced;
}

StatusOr<RetentionPlan> RetentionSweeper::SweepOnce() {
  std::lock_guard<std::mutex> sweep_lock(sweep_mu_);
  const auto started = std::chrono::steady_clock::now();
  // Blobs stored from now on are not considered unreferenced garbage until the next sweep.
  const uint64_t next_grace = store_->NextUploadId();
  std::vector<RetainedTask> tasks;
  std::vector<RetainedBlob> blobs;
  RETURN_IF_ERROR(Gather(&tasks, &blobs));
  const Store::Stats stats = store_->GetStats();
  const int64_t used = stats.blob_bytes + stats.task_bytes + stats.result_bytes;
  RetentionPolicy policy;
  policy.retain_ms = options_.retain_ms;
  if (options_.max_bytes > 0) {
    policy.high_water_bytes = options_.max_bytes / 10 * 9;
    policy.low_water_bytes = options_.max_bytes / 10 * 8;
  }
  RetentionPlan plan = PlanRetention(tasks, blobs, used, options_.now_unix_ms(), grace_upload_id_, policy);

  int64_t tasks_deleted = 0;
  int64_t blobs_deleted = 0;
  int64_t blob_bytes_deleted = 0;
  Status status = OkStatus();
  for (const std::string& id : plan.delete_tasks) {
    status = options_.delete_task ? options_.delete_task(id) : store_->DeleteTask(id);
    if (status.code() == StatusCode::kFailedPrecondition) {  // pinned meanwhile: it stays
      status = OkStatus();
      continue;
    }
    if (!status.ok()) break;
    ++tasks_deleted;
  }
  if (status.ok() && between_phases_) status = between_phases_();
  if (status.ok() && !plan.delete_blobs.empty()) {
    auto deleting = guard_->Deleting();
    // Read the references again under the guard: a task admitted since the plan may name a
    // blob the plan found unreferenced.
    auto referenced = ReferencedBlobs();
    if (!referenced.ok()) {
      status = referenced.status();
    } else {
      std::map<Hash256, uint64_t> stored_ids;
      for (const RetainedBlob& b : blobs) stored_ids.emplace(b.sha256, b.upload_id);
      for (const Hash256& h : plan.delete_blobs) {
        if (referenced->count(h)) continue;
        auto size = store_->BlobSize(h);
        // Content stored again since the plan (a client's re-upload) has its grace again.
        StatusOr<bool> deleted = store_->DeleteBlobUnlessStoredAgain(h, stored_ids.at(h));
        status = deleted.status();
        if (!status.ok()) break;
        if (!*deleted) continue;
        if (blob_deleted_) blob_deleted_(h);
        ++blobs_deleted;
        if (size.ok()) blob_bytes_deleted += *size;
      }
    }
  }
  // Forget graphs that are gone, so the cache stays as small as the store.
  for (auto it = graph_weights_.begin(); it != graph_weights_.end();) {
    it = store_->BlobSize(it->first).ok() ? std::next(it) : graph_weights_.erase(it);
  }
  if (status.ok()) grace_upload_id_ = next_grace;

  metrics_->AddCounter("consensor_retention_sweeps_total", "Retention sweeps run.")->Increment();
  metrics_
      ->AddCounter("consensor_retention_deleted_tasks_total",
                   "Finished tasks (with their results) deleted by retention.")
      ->Increment(static_cast<double>(tasks_deleted));
  metrics_->AddCounter("consensor_retention_deleted_blobs_total", "Blobs deleted by retention.")
      ->Increment(static_cast<double>(blobs_deleted));
  metrics_->AddCounter("consensor_retention_deleted_bytes_total", "Blob bytes deleted by retention.")
      ->Increment(static_cast<double>(blob_bytes_deleted));
  UpdateGauges();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const Store::Stats after = store_->GetStats();
  Log(status.ok() ? (plan.over_budget_after ? LogLevel::kWarn
                                            : (tasks_deleted + blobs_deleted > 0 ? LogLevel::kInfo : LogLevel::kDebug))
                  : LogLevel::kWarn,
      plan.over_budget_after ? "retention sweep: pinned data alone is over the budget" : "retention sweep",
      {{"tasks_seen", static_cast<int64_t>(tasks.size())},
       {"blobs_seen", static_cast<int64_t>(blobs.size())},
       {"tasks_deleted", tasks_deleted},
       {"tasks_expired", plan.expired_tasks},
       {"tasks_for_room", plan.budget_tasks},
       {"blobs_deleted", blobs_deleted},
       {"blob_bytes_deleted", blob_bytes_deleted},
       {"bytes_before", used},
       {"bytes_after", after.blob_bytes + after.task_bytes + after.result_bytes},
       {"max_bytes", options_.max_bytes},
       {"seconds", seconds},
       {"error", status.ok() ? std::string() : status.ToString()}});
  if (!status.ok()) return status;
  return plan;
}

void RetentionSweeper::UpdateGauges() {
  const Store::Stats stats = store_->GetStats();
  const int64_t logical = stats.blob_bytes + stats.task_bytes + stats.result_bytes;
  const int64_t on_disk = options_.db_path.empty() ? 0 : DirectoryBytes(options_.db_path);
  metrics_->AddGauge(kBytesGauge, kBytesHelp, {{"category", "blobs"}})->Set(static_cast<double>(stats.blob_bytes));
  metrics_->AddGauge(kBytesGauge, kBytesHelp, {{"category", "tasks"}})->Set(static_cast<double>(stats.task_bytes));
  metrics_->AddGauge(kBytesGauge, kBytesHelp, {{"category", "results"}})->Set(static_cast<double>(stats.result_bytes));
  metrics_->AddGauge(kBytesGauge, kBytesHelp, {{"category", "other"}})
      ->Set(static_cast<double>(std::max<int64_t>(0, on_disk - logical)));
  metrics_->AddGauge("consensor_storage_max_bytes", "The storage quota (storage.max_bytes); 0: none.")
      ->Set(static_cast<double>(options_.max_bytes));
  if (budget_ != nullptr) {
    metrics_->AddGauge("consensor_storage_reserved_bytes", "Bytes claimed by uploads and fetches in progress.")
        ->Set(static_cast<double>(budget_->reserved_bytes()));
    metrics_->AddGauge("consensor_storage_free_bytes", "Free bytes on the datadir's filesystem (-1: unknown).")
        ->Set(static_cast<double>(budget_->free_bytes()));
  }
}

}  // namespace consensor::node
