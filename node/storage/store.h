// Durable storage of the node: content-addressed blobs, task records, results and metadata.
// The interface is the seam for unit tests; RocksDbStore is the real thing.
//
// Durability contract (see docs/NODE.md): every write that the node acknowledges to a client
// (a committed blob, a new task, a state change) returns only after the RocksDB WAL has been
// fsynced, so it survives kill -9 and power loss. Concurrent synced writes share one fsync
// (group commit). A synced write is visible to readers from the moment it is written, which may
// be before its sync: a reader that reports what it read to a client or a peer as stored calls
// WaitDurable first when that write may still be syncing (the task manager does, per record).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"

namespace consensor::node {

// How durable a write is when the call returns.
enum class Durability {
  // On disk: survives kill -9 and power loss. Everything the node acknowledges is written so.
  kSynced,
  // In the WAL, in the OS's page cache: survives kill -9 of the node but not a power loss, until
  // the next synced write of this store returns (its sync covers every earlier write). Visible
  // to readers at once. For writes that a later synced write makes reachable (a task's output
  // blobs, then its result) or that may be lost without breaking a promise (a task's "running").
  kDeferred,
};

struct BlobInfo {
  Hash256 sha256{};
  int64_t size = 0;
  bool already_present = false;  // Commit found an identical blob already stored
};

// Streams a blob into the store without holding it in memory. The SHA-256 is computed as
// bytes arrive; Commit verifies it against the expected hash (when given) and only then makes
// the blob visible. A writer destroyed without Commit leaves nothing behind.
// One writer is used by one thread at a time; different writers may run concurrently.
class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  // RESOURCE_EXHAUSTED once the total passes the writer's max_bytes.
  virtual Status Append(std::span<const uint8_t> bytes) = 0;
  // INVALID_ARGUMENT on a hash mismatch. At most one call. A synced commit of content that is
  // already stored also waits until that content is durable.
  virtual StatusOr<BlobInfo> Commit(Durability durability = Durability::kSynced) = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // ---- blobs (column family "blobs")
  virtual StatusOr<std::unique_ptr<BlobWriter>> NewBlobWriter(std::optional<Hash256> expected_sha256,
                                                              int64_t max_bytes) = 0;
  // NOT_FOUND when absent.
  virtual StatusOr<int64_t> BlobSize(const Hash256& sha256) = 0;
  // Calls `sink` with consecutive pieces (each at most kBlobChunkBytes); stops at the first
  // error the sink returns. DATA_LOSS if the stored bytes no longer match the hash.
  // The hash can only be checked at the end, so on DATA_LOSS the sink may already have
  // received (some of) the damaged bytes: callers must discard what they got.
  virtual Status ReadBlob(const Hash256& sha256, const std::function<Status(std::span<const uint8_t>)>& sink) = 0;
  // Whole blob in memory; RESOURCE_EXHAUSTED when larger than max_bytes (checked before reading).
  virtual StatusOr<std::vector<uint8_t>> GetBlob(const Hash256& sha256, int64_t max_bytes) = 0;
  // Every committed blob with its size and the id it was last stored under: ids grow with every
  // upload, so they order blobs by when they were last stored (oldest first for retention).
  // Storing content that is already stored again (a commit or PutBlob of it) gives it a new id
  // at least every NextUploadId() returned before. Stops at the first error of `visit`.
  virtual Status ForEachBlob(
      const std::function<Status(const Hash256& sha256, int64_t size, uint64_t upload_id)>& visit) = 0;
  // Removes a committed blob (its record and chunks in one batch); OK when it is absent. Not
  // synced: a deletion lost in a power failure brings back an unreferenced blob, never a
  // dangling reference (the record that referenced it was deleted synced before).
  virtual Status DeleteBlob(const Hash256& sha256) = 0;
  // DeleteBlob, but only while the blob is still stored under `stored_id` (as ForEachBlob
  // reported it): content stored again since is kept. Returns whether it deleted the blob.
  virtual StatusOr<bool> DeleteBlobUnlessStoredAgain(const Hash256& sha256, uint64_t stored_id) = 0;
  // The number of blob deletions begun since the store opened, or nullopt while one is under
  // way. A caller that read epoch E and then saw a blob stored knows that it is still stored for
  // as long as this returns E again: no deletion has begun since. (A warm task's outputs already
  // stored are then not looked up again: docs/NODE.md, "Storing bytes the node already has".)
  virtual std::optional<uint64_t> BlobDeletionEpoch() = 0;
  // The id the next upload gets: every blob committed, or stored again, from now on has an id at
  // least this (retention's grace mark).
  virtual uint64_t NextUploadId() = 0;
  // One-shot put of bytes held in memory. The default is a writer and its commit; a store may
  // do better since the whole content is known up front (RocksDbStore hashes it once and
  // writes nothing when that content is already stored, as a warm task's outputs often are).
  virtual StatusOr<BlobInfo> PutBlob(std::span<const uint8_t> bytes,
                                     std::optional<Hash256> expected_sha256 = std::nullopt,
                                     Durability durability = Durability::kSynced);

  // ---- tasks and results (column families "tasks" and "results")
  // Records are opaque serialized bytes (the node stores consensor.v1 protos).
  // PutTask writes the task record and, when `result` is given, the result record, atomically.
  virtual Status PutTask(const std::string& task_id, const std::string& task_record,
                         const std::optional<std::string>& result_record = std::nullopt,
                         Durability durability = Durability::kSynced) = 0;
  // PutTask of a task the store does not have yet: ALREADY_EXISTS, and nothing written, when it
  // has a record. The existence check and the write are one step against every other write of
  // the task, and the check is the read the store's byte accounting makes anyway (one look-up
  // where a GetTask before a PutTask is two).
  virtual Status CreateTask(const std::string& task_id, const std::string& task_record,
                            Durability durability = Durability::kSynced) = 0;
  // nullopt when the task is unknown.
  virtual StatusOr<std::optional<std::string>> GetTask(const std::string& task_id) = 0;
  virtual StatusOr<std::optional<std::string>> GetResult(const std::string& task_id) = 0;
  // Every task record in key order; stops at the first error the visitor returns.
  virtual Status ForEachTask(
      const std::function<Status(const std::string& task_id, const std::string& record)>& visit) = 0;

  // Removes a task record and its result record in one synced batch; OK when absent.
  virtual Status DeleteTask(const std::string& task_id) = 0;

  // ---- metadata (column family "meta"): schema version, node identity, counters
  virtual Status PutMeta(const std::string& key, const std::string& value) = 0;
  virtual StatusOr<std::optional<std::string>> GetMeta(const std::string& key) = 0;
  // Removes a meta key (synced); OK when absent.
  virtual Status DeleteMeta(const std::string& key) = 0;
  // Every meta key that starts with `prefix`, in key order; stops at the first error of `visit`.
  virtual Status ForEachMeta(const std::string& prefix,
                             const std::function<Status(const std::string& key, const std::string& value)>& visit) = 0;

  struct Stats {
    int64_t blob_count = 0;
    int64_t blob_bytes = 0;
    int64_t task_count = 0;
    int64_t task_bytes = 0;    // keys and values of task records
    int64_t result_bytes = 0;  // keys and values of result records
  };
  virtual Stats GetStats() = 0;
  // Returns once every write that readers could see when it was called is durable (at once
  // when a sync since covers them, otherwise after a sync shared with the writers waiting).
  virtual Status WaitDurable() { return OkStatus(); }
  // Bytes written but still only in memory (and the WAL), which a flush will write out to new
  // files: the free-space reserve must leave room for them. 0 for a store without such a stage.
  virtual int64_t UnflushedBytes() { return 0; }
};

constexpr int64_t kBlobChunkBytes = int64_t{1} << 20;

struct StoreOptions {
  // false only in tests that measure throughput; the node always syncs.
  bool sync_writes = true;
  int64_t block_cache_bytes = int64_t{64} << 20;
};

// Opens (creating if needed) a RocksDB database in `path`. FAILED_PRECONDITION when the database
// is locked by another process or its schema version is newer than this binary understands.
// Uploads interrupted by a crash are garbage-collected here.
StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const std::string& path, const StoreOptions& options = {});

}  // namespace consensor::node
