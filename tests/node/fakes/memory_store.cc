#include "tests/node/fakes/memory_store.h"

#include <algorithm>
#include <tuple>

namespace consensor::node::fakes {

// Buffers an upload and hands it to the store at Commit, so an abandoned writer leaves nothing.
class MemoryBlobWriter final : public BlobWriter {
 public:
  MemoryBlobWriter(MemoryStore* store, std::optional<Hash256> expected, int64_t max_bytes)
      : store_(store), expected_(expected), max_bytes_(max_bytes) {}

  Status Append(std::span<const uint8_t> bytes) override {
    if (state_ != State::kOpen) return FailedPrecondition("blob writer is already committed or failed");
    if (bytes.size() > static_cast<uint64_t>(max_bytes_) - bytes_.size()) {
      state_ = State::kFailed;
      bytes_.clear();
      return ResourceExhausted("blob exceeds the cap of " + std::to_string(max_bytes_) + " bytes");
    }
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
    return OkStatus();
  }

  // Memory has no durability levels: every commit counts as synced.
  StatusOr<BlobInfo> Commit(Durability /*durability*/ = Durability::kSynced) override {
    if (state_ != State::kOpen) return FailedPrecondition("blob writer is already committed or failed");
    const Hash256 got = Sha256Of(bytes_);
    if (expected_ && *expected_ != got) {
      state_ = State::kFailed;
      return InvalidArgument("blob hash mismatch: expected " + ToHex(*expected_) + ", got " + ToHex(got));
    }
    state_ = State::kCommitted;
    return store_->CommitBlob(got, std::move(bytes_));
  }

 private:
  enum class State { kOpen, kCommitted, kFailed };
  MemoryStore* store_;
  const std::optional<Hash256> expected_;
  const int64_t max_bytes_;
  State state_ = State::kOpen;
  std::vector<uint8_t> bytes_;
};

void MemoryStore::SetGetBlobHook(GetBlobHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  get_blob_hook_ = std::move(hook);
}

void MemoryStore::SetReadBlobHook(GetBlobHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  read_blob_hook_ = std::move(hook);
}

void MemoryStore::SetPutTaskHook(PutTaskHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  put_task_hook_ = std::move(hook);
}

void MemoryStore::SetWaitDurableHook(WaitDurableHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_durable_hook_ = std::move(hook);
}

Status MemoryStore::WaitDurable() {
  WaitDurableHook hook;
  size_t writes_before = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = wait_durable_hook_;
    writes_before = task_writes_.size();  // what a reader could see when it asked
  }
  if (hook) RETURN_IF_ERROR(hook());
  std::lock_guard<std::mutex> lock(mu_);
  ++sync_count_;
  task_writes_covered_ = std::max(task_writes_covered_, writes_before);
  return OkStatus();
}

uint64_t MemoryStore::SyncCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sync_count_;
}

size_t MemoryStore::TaskWritesCoveredBySync() const {
  std::lock_guard<std::mutex> lock(mu_);
  return task_writes_covered_;
}

std::vector<MemoryStore::TaskWrite> MemoryStore::TaskWrites() const {
  std::lock_guard<std::mutex> lock(mu_);
  return task_writes_;
}

StatusOr<std::unique_ptr<BlobWriter>> MemoryStore::NewBlobWriter(std::optional<Hash256> expected_sha256,
                                                                 int64_t max_bytes) {
  if (max_bytes < 0) return InvalidArgument("blob cap must be non-negative, got " + std::to_string(max_bytes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++blob_writers_created_;
  }
  return std::unique_ptr<BlobWriter>(std::make_unique<MemoryBlobWriter>(this, expected_sha256, max_bytes));
}

uint64_t MemoryStore::BlobWritersCreated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blob_writers_created_;
}

BlobInfo MemoryStore::CommitBlob(const Hash256& sha256, std::vector<uint8_t> bytes) {
  BlobInfo info;
  info.sha256 = sha256;
  info.size = static_cast<int64_t>(bytes.size());
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = blobs_.emplace(sha256, nullptr);
  if (inserted) {
    it->second = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  } else {
    info.already_present = true;
  }
  upload_ids_[sha256] = next_upload_id_++;  // stored (again) now: retention's grace starts over
  return info;
}

StatusOr<int64_t> MemoryStore::BlobSize(const Hash256& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blobs_.find(sha256);
  if (it == blobs_.end()) return NotFound("blob " + ToHex(sha256) + " not found");
  return static_cast<int64_t>(it->second->size());
}

Status MemoryStore::ReadBlob(const Hash256& sha256, const std::function<Status(std::span<const uint8_t>)>& sink) {
  GetBlobHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = read_blob_hook_;
  }
  if (hook) RETURN_IF_ERROR(hook(sha256));
  std::shared_ptr<const std::vector<uint8_t>> bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blobs_.find(sha256);
    if (it == blobs_.end()) return NotFound("blob " + ToHex(sha256) + " not found");
    bytes = it->second;
  }
  // Pieces of at most kBlobChunkBytes, like the real store, so callers see realistic chunking.
  std::span<const uint8_t> rest(*bytes);
  while (!rest.empty()) {
    const size_t take = std::min(rest.size(), static_cast<size_t>(kBlobChunkBytes));
    RETURN_IF_ERROR(sink(rest.first(take)));
    rest = rest.subspan(take);
  }
  return OkStatus();
}

StatusOr<std::vector<uint8_t>> MemoryStore::GetBlob(const Hash256& sha256, int64_t max_bytes) {
  GetBlobHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = get_blob_hook_;
  }
  if (hook) RETURN_IF_ERROR(hook(sha256));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blobs_.find(sha256);
  if (it == blobs_.end()) return NotFound("blob " + ToHex(sha256) + " not found");
  const int64_t size = static_cast<int64_t>(it->second->size());
  if (size > max_bytes) {
    return ResourceExhausted("blob " + ToHex(sha256) + " has " + std::to_string(size) + " bytes, over the cap of " +
                             std::to_string(max_bytes));
  }
  return *it->second;
}

Status MemoryStore::PutTask(const std::string& task_id, const std::string& task_record,
                            const std::optional<std::string>& result_record, Durability durability) {
  if (task_id.empty()) return InvalidArgument("task id is empty");
  PutTaskHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = put_task_hook_;
  }
  if (hook) RETURN_IF_ERROR(hook(task_id, task_record));
  std::lock_guard<std::mutex> lock(mu_);
  tasks_[task_id] = task_record;
  if (result_record) results_[task_id] = *result_record;
  task_writes_.push_back(TaskWrite{task_id, task_record, result_record.has_value(), durability});
  return OkStatus();
}

Status MemoryStore::CreateTask(const std::string& task_id, const std::string& task_record, Durability durability) {
  if (task_id.empty()) return InvalidArgument("task id is empty");
  PutTaskHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.count(task_id)) return AlreadyExists("task is stored");
    hook = put_task_hook_;
  }
  if (hook) RETURN_IF_ERROR(hook(task_id, task_record));
  std::lock_guard<std::mutex> lock(mu_);
  // Checked again with the write: the hook ran outside the lock.
  if (!tasks_.emplace(task_id, task_record).second) return AlreadyExists("task is stored");
  task_writes_.push_back(TaskWrite{task_id, task_record, false, durability});
  return OkStatus();
}

uint64_t MemoryStore::TaskReads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return task_reads_;
}

StatusOr<std::optional<std::string>> MemoryStore::GetTask(const std::string& task_id) {
  std::lock_guard<std::mutex> lock(mu_);
  ++task_reads_;
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

StatusOr<std::optional<std::string>> MemoryStore::GetResult(const std::string& task_id) {
  std::lock_guard<std::mutex> lock(mu_);
  ++task_reads_;
  auto it = results_.find(task_id);
  if (it == results_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status MemoryStore::ForEachTask(
    const std::function<Status(const std::string& task_id, const std::string& record)>& visit) {
  // A snapshot, like the real store's iterator: visitors may write tasks while it runs.
  std::map<std::string, std::string> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot = tasks_;
  }
  for (const auto& [id, record] : snapshot) RETURN_IF_ERROR(visit(id, record));
  return OkStatus();
}

Status MemoryStore::PutMeta(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  meta_[key] = value;
  return OkStatus();
}

StatusOr<std::optional<std::string>> MemoryStore::GetMeta(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = meta_.find(key);
  if (it == meta_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status MemoryStore::DeleteMeta(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  meta_.erase(key);
  return OkStatus();
}

Status MemoryStore::ForEachMeta(const std::string& prefix,
                                const std::function<Status(const std::string& key, const std::string& value)>& visit) {
  std::vector<std::pair<std::string, std::string>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = meta_.lower_bound(prefix); it != meta_.end() && it->first.starts_with(prefix); ++it) {
      snapshot.emplace_back(it->first, it->second);
    }
  }
  for (const auto& [key, value] : snapshot) RETURN_IF_ERROR(visit(key, value));
  return OkStatus();
}

Status MemoryStore::ForEachBlob(
    const std::function<Status(const Hash256& sha256, int64_t size, uint64_t upload_id)>& visit) {
  std::vector<std::tuple<Hash256, int64_t, uint64_t>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [hash, bytes] : blobs_) {
      snapshot.emplace_back(hash, static_cast<int64_t>(bytes->size()), upload_ids_[hash]);
    }
  }
  for (const auto& [hash, size, id] : snapshot) RETURN_IF_ERROR(visit(hash, size, id));
  return OkStatus();
}

Status MemoryStore::DeleteBlob(const Hash256& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  if (blobs_.erase(sha256) > 0) ++blob_deletions_;
  upload_ids_.erase(sha256);
  return OkStatus();
}

StatusOr<bool> MemoryStore::DeleteBlobUnlessStoredAgain(const Hash256& sha256, uint64_t stored_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto id = upload_ids_.find(sha256);
  if (id == upload_ids_.end() || id->second != stored_id) return false;
  upload_ids_.erase(id);
  blobs_.erase(sha256);
  ++blob_deletions_;
  return true;
}

std::optional<uint64_t> MemoryStore::BlobDeletionEpoch() {
  std::lock_guard<std::mutex> lock(mu_);  // a deletion is never under way outside mu_
  return blob_deletions_;
}

uint64_t MemoryStore::NextUploadId() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_upload_id_;
}

Status MemoryStore::DeleteTask(const std::string& task_id) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.erase(task_id);
  results_.erase(task_id);
  return OkStatus();
}

Store::Stats MemoryStore::GetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats stats;
  stats.blob_count = static_cast<int64_t>(blobs_.size());
  for (const auto& [hash, bytes] : blobs_) stats.blob_bytes += static_cast<int64_t>(bytes->size());
  stats.task_count = static_cast<int64_t>(tasks_.size());
  for (const auto& [id, record] : tasks_) stats.task_bytes += static_cast<int64_t>(id.size() + record.size());
  for (const auto& [id, record] : results_) stats.result_bytes += static_cast<int64_t>(id.size() + record.size());
  return stats;
}

}  // namespace consensor::node::fakes
