// An in-memory Store for unit tests, with the contract of node/storage/store.h and no disk.
// Everything written stays until the MemoryStore is destroyed, so a test simulates a restart by
// destroying the component that used it and starting a new one over the same MemoryStore.
// Hooks inject faults or hold a caller at a chosen point; the write log shows what was persisted.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "node/storage/store.h"

namespace consensor::node::fakes {

class MemoryStore final : public Store {
 public:
  // Runs at the start of GetBlob, outside the store's lock. A non-OK status is returned instead
  // of the blob; a hook may also block to hold the caller there.
  using GetBlobHook = std::function<Status(const Hash256& sha256)>;
  // Runs at the start of PutTask with the record about to be written, outside the store's lock.
  // A non-OK status fails the write and nothing is stored.
  using PutTaskHook = std::function<Status(const std::string& task_id, const std::string& record)>;

  struct TaskWrite {
    std::string task_id;
    std::string record;
    bool with_result = false;
    Durability durability = Durability::kSynced;  // what the caller asked for
  };

  // Runs at the start of WaitDurable, outside the store's lock: a test holds a caller at the
  // sync there, or fails the sync with a non-OK status.
  using WaitDurableHook = std::function<Status()>;

  void SetGetBlobHook(GetBlobHook hook);
  // The same for ReadBlob (a streamed read): the test of a blob damaged at rest sets both.
  void SetReadBlobHook(GetBlobHook hook);
  void SetPutTaskHook(PutTaskHook hook);
  void SetWaitDurableHook(WaitDurableHook hook);
  // How many WaitDurable calls returned OK, and how many task writes (TaskWrites) the last of
  // them covered: every write before it, as a WAL sync covers every earlier write.
  uint64_t SyncCount() const;
  size_t TaskWritesCoveredBySync() const;

  // Every successful PutTask, in order: lets a test check the sequence of records a component
  // persisted, not just the last one.
  std::vector<TaskWrite> TaskWrites() const;

  // How many blob writers were created (PutBlob creates one per call): lets a test check that a
  // component did not write a blob at all, not just that the store deduplicated it.
  uint64_t BlobWritersCreated() const;

  // How many task and result records were read (GetTask, GetResult): lets a test check that a
  // component answered from what it already held.
  uint64_t TaskReads() const;

  StatusOr<std::unique_ptr<BlobWriter>> NewBlobWriter(std::optional<Hash256> expected_sha256,
                                                      int64_t max_bytes) override;
  StatusOr<int64_t> BlobSize(const Hash256& sha256) override;
  Status ReadBlob(const Hash256& sha256, const std::function<Status(std::span<const uint8_t>)>& sink) override;
  StatusOr<std::vector<uint8_t>> GetBlob(const Hash256& sha256, int64_t max_bytes) override;
  Status ForEachBlob(
      const std::function<Status(const Hash256& sha256, int64_t size, uint64_t upload_id)>& visit) override;
  Status DeleteBlob(const Hash256& sha256) override;
  StatusOr<bool> DeleteBlobUnlessStoredAgain(const Hash256& sha256, uint64_t stored_id) override;
  std::optional<uint64_t> BlobDeletionEpoch() override;
  uint64_t NextUploadId() override;
  Status WaitDurable() override;
  Status DeleteTask(const std::string& task_id) override;

  Status PutTask(const std::string& task_id, const std::string& task_record,
                 const std::optional<std::string>& result_record = std::nullopt,
                 Durability durability = Durability::kSynced) override;
  Status CreateTask(const std::string& task_id, const std::string& task_record, Durability durability) override;
  StatusOr<std::optional<std::string>> GetTask(const std::string& task_id) override;
  StatusOr<std::optional<std::string>> GetResult(const std::string& task_id) override;
  Status ForEachTask(
      const std::function<Status(const std::string& task_id, const std::string& record)>& visit) override;

  Status PutMeta(const std::string& key, const std::string& value) override;
  StatusOr<std::optional<std::string>> GetMeta(const std::string& key) override;
  Status DeleteMeta(const std::string& key) override;
  Status ForEachMeta(const std::string& prefix,
                     const std::function<Status(const std::string& key, const std::string& value)>& visit) override;

  Stats GetStats() override;

 private:
  friend class MemoryBlobWriter;
  // Makes a finished upload visible; already_present when identical bytes were stored before.
  BlobInfo CommitBlob(const Hash256& sha256, std::vector<uint8_t> bytes);

  mutable std::mutex mu_;
  uint64_t blob_deletions_ = 0;  // guarded by mu_
  WaitDurableHook wait_durable_hook_;
  uint64_t sync_count_ = 0;
  size_t task_writes_covered_ = 0;
  // std::shared_ptr so readers can stream a blob after releasing the lock.
  std::map<Hash256, std::shared_ptr<const std::vector<uint8_t>>> blobs_;
  std::map<Hash256, uint64_t> upload_ids_;  // when last stored: stands in for the real store's stored ids
  uint64_t next_upload_id_ = 1;
  uint64_t blob_writers_created_ = 0;
  uint64_t task_reads_ = 0;
  // Ordered maps: ForEachTask visits keys in byte order, as RocksDB's default comparator does.
  std::map<std::string, std::string> tasks_;
  std::map<std::string, std::string> results_;
  std::map<std::string, std::string> meta_;
  std::vector<TaskWrite> task_writes_;
  GetBlobHook get_blob_hook_;
  GetBlobHook read_blob_hook_;
  PutTaskHook put_task_hook_;
};

}  // namespace consensor::node::fakes
