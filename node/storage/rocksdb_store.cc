// RocksDbStore: the node's durable store (see node/storage/store.h for the contract).
//
// Layout. One RocksDB database with column families:
//   "default" - unused (RocksDB requires it).
//   "blobs"   - content-addressed blobs, split in chunks, under three key kinds:
//       "c" + u64be upload_id + u32be chunk_index -> chunk bytes (every chunk is exactly
//                                                    kBlobChunkBytes except the last)
//       "u" + u64be upload_id                     -> "" : upload in progress (not committed)
//       "m" + 32-byte sha256                      -> u64be size + u64be upload_id + u64be stored_id
//     Chunks are keyed by upload id rather than by hash so an upload can write them before its
//     hash is known; the "m" record makes them visible in one atomic write at commit.
//   "tasks", "results" - key = task id as given, value = opaque record.
//   "meta"    - "schema_version" ("1"), "next_upload_id" (u64be) and the node's own keys.
//
// Durability. The WAL is always on. Every write the node acknowledges (blob commit, PutTask,
// PutMeta, schema version) uses WriteOptions::sync = StoreOptions::sync_writes, so it survives
// kill -9 and power loss. Synced writes go through a GroupCommitter: concurrent ones are merged
// into one WriteBatch, written, and covered by one SyncWAL; they are visible from the write on,
// and their writers return only after the sync. Chunk
// writes, upload markers and Durability::kDeferred writes are not synced: the synced write that
// makes them reachable (or acknowledges them) follows them in the WAL, and a synced WAL write
// makes every earlier WAL write durable. A synced commit of a blob that is already present
// syncs first when writes readers can see may not be durable yet (durable_sequence). The WAL
// is replayed as a consistent prefix (kPointInTimeRecovery), so a surviving chunk always has a
// surviving "u" marker or "m" record; markers left by a crash are garbage-collected at open
// together with their chunks.
//
// The "m" record's stored_id is the id the content was last stored under: drawn from the same
// counter when the blob commits, and again when content already stored is stored again and the
// retention sweep has read the counter since (NextUploadId). Retention's grace counts from it, so
// an upload that straddles a sweep's start, or a re-upload of content the node already has, gets
// a whole sweep interval (docs/NODE.md, "Disk budget and retention"). Records written before
// stored_id existed (16 bytes) read as stored under their upload id.
//
// Upload ids come from a counter in meta. Allocation and the write of the marker plus the new
// counter value happen under one mutex, so the persisted counter only grows; at open it is
// also raised past every id still referenced, so an id is never reused while chunks exist.
//
// Concurrency. RocksDB is thread-safe. Our own invariants (one "m" record per hash, exact
// counts) need check-then-write sequences; these are serialized per key by striped mutexes.
// Stats are atomics seeded by a scan at open (fine for node-sized datasets).
//
// Writers hold a shared reference to the open database, so a writer that outlives its Store
// keeps the database open until it is destroyed (no dangling handle).
#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "node/storage/group_commit.h"
#include "node/storage/store.h"

namespace consensor::node {

// The default one-shot put: works with any Store implementation.
StatusOr<BlobInfo> Store::PutBlob(std::span<const uint8_t> bytes, std::optional<Hash256> expected_sha256,
                                  Durability durability) {
  ASSIGN_OR_RETURN(auto writer, NewBlobWriter(expected_sha256, static_cast<int64_t>(bytes.size())));
  RETURN_IF_ERROR(writer->Append(bytes));
  return writer->Commit(durability);
}

namespace {

constexpr int kSchemaVersion = 1;
constexpr char kSchemaKey[] = "schema_version";
constexpr char kNextUploadIdKey[] = "next_upload_id";

constexpr char kChunkPrefix = 'c';
constexpr char kMarkerPrefix = 'u';
constexpr char kMetaPrefix = 'm';
constexpr size_t kChunkKeySize = 1 + 8 + 4;
constexpr size_t kMarkerKeySize = 1 + 8;
constexpr size_t kBlobMetaKeySize = 1 + 32;
constexpr size_t kBlobMetaValueSize = 8 + 8 + 8;
constexpr size_t kOldBlobMetaValueSize = 8 + 8;  // before stored_id
constexpr size_t kChunkBytes = static_cast<size_t>(kBlobChunkBytes);
constexpr uint64_t kMaxChunks = uint64_t{1} << 32;  // 4-byte chunk index

constexpr size_t kLockStripes = 64;

// Column family order inside Core::handles.
enum Cf : size_t { kDefaultCf = 0, kBlobsCf, kTasksCf, kResultsCf, kMetaCf, kNumOwnCfs };
constexpr std::array<const char*, kNumOwnCfs> kCfNames = {"default", "blobs", "tasks", "results", "meta"};

void AppendU64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void AppendU32(std::string* out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t ReadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string ChunkKey(uint64_t upload_id, uint32_t index) {
  std::string k(1, kChunkPrefix);
  AppendU64(&k, upload_id);
  AppendU32(&k, index);
  return k;
}
// Exclusive upper bound of every chunk key of `upload_id`: the prefix followed by a byte string
// that sorts after any 4-byte index.
std::string ChunkRangeEnd(uint64_t upload_id) {
  std::string k(1, kChunkPrefix);
  AppendU64(&k, upload_id);
  k.append(5, '\xff');
  return k;
}
std::string MarkerKey(uint64_t upload_id) {
  std::string k(1, kMarkerPrefix);
  AppendU64(&k, upload_id);
  return k;
}
std::string BlobMetaKey(const Hash256& h) {
  std::string k(1, kMetaPrefix);
  k.append(reinterpret_cast<const char*>(h.data()), h.size());
  return k;
}

struct BlobRecord {
  int64_t size = 0;
  uint64_t upload_id = 0;  // keys the chunks
  uint64_t stored_id = 0;  // when the content was last stored: retention's grace
};
std::string EncodeBlobRecord(const BlobRecord& r) {
  std::string v;
  AppendU64(&v, static_cast<uint64_t>(r.size));
  AppendU64(&v, r.upload_id);
  AppendU64(&v, r.stored_id);
  return v;
}
std::optional<BlobRecord> DecodeBlobRecord(std::string_view v) {
  if (v.size() != kBlobMetaValueSize && v.size() != kOldBlobMetaValueSize) return std::nullopt;
  uint64_t size = ReadU64(v.data());
  if (size > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  const uint64_t upload_id = ReadU64(v.data() + 8);
  const uint64_t stored_id = v.size() == kBlobMetaValueSize ? ReadU64(v.data() + 16) : upload_id;
  return BlobRecord{static_cast<int64_t>(size), upload_id, stored_id};
}

std::string HashHex(const Hash256& h) { return ToHex(h); }

// RocksDB status -> ours, keeping RocksDB's message.
Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsCorruption()) return DataLoss(std::move(msg));
  if (s.IsNoSpace()) return ResourceExhausted(std::move(msg));
  if (s.IsNotFound()) return NotFound(std::move(msg));
  return Internal(std::move(msg));
}

bool LooksLikeLockError(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  // RocksDB reports "While lock file: <dir>/LOCK: ..." (other process) or
  // "lock hold by current process ...: <dir>/LOCK: ..." (same process).
  const std::string m = s.ToString();
  return m.find("/LOCK") != std::string::npos &&
         (m.find("lock file") != std::string::npos || m.find("lock hold") != std::string::npos);
}

// The open database and the state shared by the store and its writers.
struct Core {
  std::string path;
  StoreOptions options;
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // kNumOwnCfs first, then foreign CFs

  rocksdb::WriteOptions sync_write;    // acknowledged writes
  rocksdb::WriteOptions nosync_write;  // chunks, markers, cleanup of garbage

  std::mutex upload_id_mu;
  uint64_t next_upload_id = 1;  // guarded by upload_id_mu
  uint64_t grace_mark = 0;      // what NextUploadId last returned; guarded by upload_id_mu

  // An id for a blob being stored now, at least every NextUploadId() returned so far. Not
  // persisted: ids still in records are above the counter at open (RecoverBlobs), and one
  // drawn for a write that was lost names nothing.
  uint64_t TakeStoredId() {
    std::lock_guard<std::mutex> lock(upload_id_mu);
    return next_upload_id++;
  }
  // Whether content stored under `stored_id` must be stored again to get its grace: only once the
  // sweep has read the counter since, so storing it again and again costs one small write per sweep.
  bool NeedsNewStoredId(uint64_t stored_id) {
    std::lock_guard<std::mutex> lock(upload_id_mu);
    return stored_id < grace_mark;
  }
  // Content already stored (`r`) is stored again: renews its stored_id when needed, with the
  // caller's durability; otherwise waits, for a synced store, until the first write is durable
  // (its commit may have been deferred). Under the content's blob stripe.
  Status StoreAgain(const Hash256& h, const BlobRecord& r, Durability durability) {
    if (!NeedsNewStoredId(r.stored_id)) {
      if (durability == Durability::kSynced) return WaitDurable().WithContext("syncing blob");
      return OkStatus();
    }
    rocksdb::WriteBatch batch;
    rocksdb::Status s =
        batch.Put(cf(kBlobsCf), BlobMetaKey(h), EncodeBlobRecord(BlobRecord{r.size, r.upload_id, TakeStoredId()}));
    if (!s.ok()) return FromRocks(s, "storing blob " + HashHex(h) + " again");
    return Write(&batch, durability).WithContext("storing blob " + HashHex(h) + " again");
  }

  std::array<std::mutex, kLockStripes> blob_stripes;
  std::array<std::mutex, kLockStripes> task_stripes;

  std::atomic<int64_t> blob_count{0};
  // DeleteBlob calls begun and ended that delete a blob (Store::BlobDeletionEpoch).
  std::atomic<uint64_t> blob_deletions_begun{0};
  std::atomic<uint64_t> blob_deletions_ended{0};
  std::atomic<int64_t> blob_bytes{0};
  std::atomic<int64_t> task_count{0};
  std::atomic<int64_t> task_bytes{0};    // keys + values of the tasks CF
  std::atomic<int64_t> result_bytes{0};  // keys + values of the results CF

  // Every synced write goes through here, so concurrent writers share one fsync.
  std::unique_ptr<GroupCommitter> committer;
  // Every write with a sequence number up to this one is synced (written by group leaders).
  std::atomic<uint64_t> durable_sequence{0};

  rocksdb::ColumnFamilyHandle* cf(Cf c) const { return handles[c]; }

  ~Core() {
    if (committer) committer->Close();
    if (db == nullptr) return;
    // Unsynced tail (sync_writes=false, or chunks of live uploads) reaches disk on a clean close.
    db->FlushWAL(/*sync=*/true).PermitUncheckedError();
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db->Close().PermitUncheckedError();
    delete db;
  }

  std::mutex& BlobStripe(const Hash256& h) { return blob_stripes[h[0] % kLockStripes]; }
  std::mutex& TaskStripe(const std::string& id) { return task_stripes[std::hash<std::string>{}(id) % kLockStripes]; }

  // Deletes every chunk of an upload and its marker, in one batch. Unsynced: if it is lost, the
  // marker survives with the chunks and the next open collects both.
  // `chunks`, when known, is how many chunks the upload wrote: a few point deletes then, because
  // every range tombstone in the memtable slows down every later read of the column family.
  Status DropUpload(uint64_t upload_id, std::optional<uint64_t> chunks = std::nullopt) {
    constexpr uint64_t kMaxPointDeletes = 64;
    rocksdb::WriteBatch batch;
    rocksdb::Status s;
    if (chunks && *chunks <= kMaxPointDeletes) {
      for (uint64_t i = 0; s.ok() && i < *chunks; ++i) {
        s = batch.Delete(cf(kBlobsCf), ChunkKey(upload_id, static_cast<uint32_t>(i)));
      }
    } else {
      s = batch.DeleteRange(cf(kBlobsCf), ChunkKey(upload_id, 0), ChunkRangeEnd(upload_id));
    }
    if (s.ok()) s = batch.Delete(cf(kBlobsCf), MarkerKey(upload_id));
    if (s.ok()) s = db->Write(nosync_write, &batch);
    if (!s.ok()) return FromRocks(s, "deleting chunks of upload " + std::to_string(upload_id));
    return OkStatus();
  }

  // The committer's group write: every batch of the group in one WriteBatch, written to the WAL
  // without a sync, then one SyncWAL. The sync runs outside RocksDB's write queue, so unsynced
  // writes (a task's "running", its output blobs) and the next group's write do not wait for
  // this fsync. The group is visible to readers from its write on, before it is durable: what
  // is acknowledged (the writers' Commit, and what the task manager reports) waits for the sync.
  Status WriteGroup(std::span<rocksdb::WriteBatch* const> batches) {
    std::vector<rocksdb::WriteBatch*> real;
    for (rocksdb::WriteBatch* b : batches) {
      if (b != nullptr && b->Count() > 0) real.push_back(b);
    }
    rocksdb::Status s;
    if (real.size() == 1) {
      s = db->Write(nosync_write, real[0]);
    } else if (real.size() > 1) {
      rocksdb::WriteBatch merged;
      BatchAppender appender(&merged, this);
      for (rocksdb::WriteBatch* b : real) {
        s = b->Iterate(&appender);
        if (!s.ok()) break;
      }
      if (s.ok()) s = db->Write(nosync_write, &merged);
    }
    if (!s.ok()) return FromRocks(s, "write of " + std::to_string(real.size()) + " batches");
    // Every write readers can see now (this group's included) was handed to the OS before the
    // sync starts, so the sync covers it.
    const uint64_t published = db->GetLatestSequenceNumber();
    if (options.sync_writes) {
      s = db->SyncWAL();
      if (!s.ok()) return FromRocks(s, "syncing the WAL for " + std::to_string(real.size()) + " batches");
      if (published > durable_sequence.load()) durable_sequence.store(published);
    }
    return OkStatus();
  }

  // Returns once everything readers can see now is durable: at once when a sync since covers it,
  // otherwise after a sync (shared with the other writers waiting).
  Status WaitDurable() {
    if (!options.sync_writes || db->GetLatestSequenceNumber() <= durable_sequence.load()) return OkStatus();
    return committer->Commit(nullptr);
  }

  // One batch with the given durability.
  Status Write(rocksdb::WriteBatch* batch, Durability durability) {
    if (durability == Durability::kSynced) return committer->Commit(batch);
    rocksdb::Status s = db->Write(nosync_write, batch);
    if (!s.ok()) return FromRocks(s, "write");
    return OkStatus();
  }

  // Replays a batch into another one. RocksDB has no public way to concatenate batches; the
  // store only ever writes puts, deletes and range deletes, so anything else is refused.
  class BatchAppender final : public rocksdb::WriteBatch::Handler {
   public:
    BatchAppender(rocksdb::WriteBatch* out, Core* core) : out_(out), core_(core) {}
    rocksdb::Status PutCF(uint32_t cf_id, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
      rocksdb::ColumnFamilyHandle* h = Handle(cf_id);
      return h ? out_->Put(h, key, value) : Unknown(cf_id);
    }
    rocksdb::Status DeleteCF(uint32_t cf_id, const rocksdb::Slice& key) override {
      rocksdb::ColumnFamilyHandle* h = Handle(cf_id);
      return h ? out_->Delete(h, key) : Unknown(cf_id);
    }
    rocksdb::Status DeleteRangeCF(uint32_t cf_id, const rocksdb::Slice& begin, const rocksdb::Slice& end) override {
      rocksdb::ColumnFamilyHandle* h = Handle(cf_id);
      return h ? out_->DeleteRange(h, begin, end) : Unknown(cf_id);
    }

   private:
    rocksdb::ColumnFamilyHandle* Handle(uint32_t cf_id) const {
      for (rocksdb::ColumnFamilyHandle* h : core_->handles) {
        if (h->GetID() == cf_id) return h;
      }
      return nullptr;
    }
    static rocksdb::Status Unknown(uint32_t cf_id) {
      return rocksdb::Status::InvalidArgument("batch names unknown column family " + std::to_string(cf_id));
    }
    rocksdb::WriteBatch* out_;
    Core* core_;
  };

  StatusOr<std::optional<std::string>> GetString(Cf c, const rocksdb::Slice& key) {
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf(c), key, &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, std::string("reading from column family ") + kCfNames[c]);
    return std::optional<std::string>(std::move(value));
  }

  // Size of a stored value (key included, as the byte accounting counts it), or nullopt.
  StatusOr<std::optional<int64_t>> RecordBytes(Cf c, const std::string& key) {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf(c), key, &value);
    if (s.IsNotFound()) return std::optional<int64_t>();
    if (!s.ok()) return FromRocks(s, std::string("reading from column family ") + kCfNames[c]);
    return std::optional<int64_t>(static_cast<int64_t>(key.size() + value.size()));
  }

  StatusOr<std::optional<BlobRecord>> GetBlobRecord(const Hash256& h, const rocksdb::Snapshot* snapshot = nullptr) {
    std::string raw;
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot;
    rocksdb::Status rs = db->Get(ro, cf(kBlobsCf), BlobMetaKey(h), &raw);
    std::optional<std::string> v;
    if (rs.ok()) {
      v = std::move(raw);
    } else if (!rs.IsNotFound()) {
      return FromRocks(rs, "reading blob record");
    }
    if (!v) return std::optional<BlobRecord>();
    std::optional<BlobRecord> r = DecodeBlobRecord(*v);
    if (!r) return DataLoss("blob " + HashHex(h) + ": malformed metadata record");
    return r;
  }
};

class RocksDbBlobWriter final : public BlobWriter {
 public:
  // `known_sha256`: the hash of everything that will be appended, computed by the caller from
  // the same bytes (RocksDbStore::PutBlob), so that the writer does not hash them again.
  RocksDbBlobWriter(std::shared_ptr<Core> core, uint64_t upload_id, std::optional<Hash256> expected, int64_t max_bytes,
                    std::optional<Hash256> known_sha256 = std::nullopt)
      : core_(std::move(core)),
        upload_id_(upload_id),
        expected_(expected),
        max_bytes_(max_bytes),
        known_sha256_(known_sha256) {}

  ~RocksDbBlobWriter() override {
    // Failure here is harmless: the marker survives and the next open collects the chunks.
    if (state_ == State::kOpen) core_->DropUpload(upload_id_, next_chunk_).IgnoreError();
  }

  Status Append(std::span<const uint8_t> bytes) override {
    if (state_ != State::kOpen) return FailedPrecondition("blob writer is already committed or failed");
    if (bytes.size() > static_cast<uint64_t>(max_bytes_ - total_)) {
      return Fail(ResourceExhausted("blob exceeds the cap of " + std::to_string(max_bytes_) + " bytes"));
    }
    if (!known_sha256_) hasher_.Update(bytes);
    total_ += static_cast<int64_t>(bytes.size());
    while (!bytes.empty()) {
      if (buffer_.empty() && bytes.size() >= kChunkBytes) {
        // Whole chunk available in the caller's span: write it without copying.
        Status s = WriteChunk(bytes.first(kChunkBytes));
        if (!s.ok()) return Fail(s);
        bytes = bytes.subspan(kChunkBytes);
        continue;
      }
      if (buffer_.capacity() < kChunkBytes) buffer_.reserve(kChunkBytes);
      const size_t take = std::min(bytes.size(), kChunkBytes - buffer_.size());
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
      bytes = bytes.subspan(take);
      if (buffer_.size() == kChunkBytes) {
        Status s = WriteChunk(buffer_);
        if (!s.ok()) return Fail(s);
        buffer_.clear();
      }
    }
    return OkStatus();
  }

  StatusOr<BlobInfo> Commit(Durability durability = Durability::kSynced) override {
    if (state_ != State::kOpen) return FailedPrecondition("blob writer is already committed or failed");
    BlobInfo info;
    info.sha256 = known_sha256_ ? *known_sha256_ : hasher_.Finish();
    info.size = total_;
    if (expected_ && *expected_ != info.sha256) {
      return Fail(
          InvalidArgument("blob hash mismatch: expected " + HashHex(*expected_) + ", got " + HashHex(info.sha256)));
    }

    Core& core = *core_;
    std::lock_guard<std::mutex> lock(core.BlobStripe(info.sha256));
    StatusOr<std::optional<BlobRecord>> existing = core.GetBlobRecord(info.sha256);
    if (!existing.ok()) return Fail(existing.status());
    if (existing->has_value()) {
      // Identical content is already stored, but its commit may have been deferred.
      // The last chunk was never written: a small blob stored again costs no chunk write.
      state_ = State::kCommitted;
      core.DropUpload(upload_id_, next_chunk_).IgnoreError();  // leftovers are GC'd at open
      buffer_.clear();
      buffer_.shrink_to_fit();
      info.already_present = true;
      RETURN_IF_ERROR(core.StoreAgain(info.sha256, **existing, durability));
      return info;
    }
    if (!buffer_.empty()) {
      Status w = WriteChunk(buffer_);
      if (!w.ok()) return Fail(w);
      buffer_.clear();
      buffer_.shrink_to_fit();
    }
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Put(core.cf(kBlobsCf), BlobMetaKey(info.sha256),
                                  EncodeBlobRecord(BlobRecord{total_, upload_id_, core.TakeStoredId()}));
    if (s.ok()) s = batch.Delete(core.cf(kBlobsCf), MarkerKey(upload_id_));
    if (!s.ok()) return Fail(FromRocks(s, "committing blob " + HashHex(info.sha256)));
    if (Status c = core.Write(&batch, durability); !c.ok()) {
      return Fail(c.WithContext("committing blob " + HashHex(info.sha256)));
    }
    state_ = State::kCommitted;
    core.blob_count.fetch_add(1, std::memory_order_relaxed);
    core.blob_bytes.fetch_add(total_, std::memory_order_relaxed);
    return info;
  }

 private:
  enum class State { kOpen, kCommitted, kFailed };

  Status WriteChunk(std::span<const uint8_t> data) {
    if (next_chunk_ >= kMaxChunks) return ResourceExhausted("blob has too many chunks");
    rocksdb::Slice value(reinterpret_cast<const char*>(data.data()), data.size());
    rocksdb::Status s = core_->db->Put(core_->nosync_write, core_->cf(kBlobsCf),
                                       ChunkKey(upload_id_, static_cast<uint32_t>(next_chunk_)), value);
    if (!s.ok()) return FromRocks(s, "writing blob chunk");
    ++next_chunk_;
    return OkStatus();
  }

  // Ends the upload: drops what was written so a failed writer leaves nothing behind.
  Status Fail(Status why) {
    if (state_ == State::kOpen) {
      state_ = State::kFailed;
      core_->DropUpload(upload_id_, next_chunk_).IgnoreError();
      buffer_.clear();
      buffer_.shrink_to_fit();
    }
    return why;
  }

  std::shared_ptr<Core> core_;
  const uint64_t upload_id_;
  const std::optional<Hash256> expected_;
  const int64_t max_bytes_;
  const std::optional<Hash256> known_sha256_;
  State state_ = State::kOpen;
  Sha256 hasher_;
  int64_t total_ = 0;
  uint64_t next_chunk_ = 0;
  std::vector<uint8_t> buffer_;  // at most one chunk
};

class RocksDbStore final : public Store {
 public:
  explicit RocksDbStore(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  StatusOr<std::unique_ptr<BlobWriter>> NewBlobWriter(std::optional<Hash256> expected_sha256,
                                                      int64_t max_bytes) override {
    return NewRocksDbBlobWriter(expected_sha256, max_bytes, std::nullopt);
  }

  StatusOr<BlobInfo> PutBlob(std::span<const uint8_t> bytes, std::optional<Hash256> expected_sha256,
                             Durability durability) override {
    // The whole content is here: hash it once, before writing anything. Content that is already
    // stored costs no upload at all (no marker, no chunk written and then dropped), which is
    // what a warm task storing the same outputs again would otherwise pay per megabyte.
    const Hash256 sha256 = Sha256Of(bytes);
    if (expected_sha256 && *expected_sha256 != sha256) {
      return InvalidArgument("blob hash mismatch: expected " + HashHex(*expected_sha256) + ", got " + HashHex(sha256));
    }
    {
      Core& core = *core_;
      std::lock_guard<std::mutex> lock(core.BlobStripe(sha256));
      ASSIGN_OR_RETURN(std::optional<BlobRecord> existing, core.GetBlobRecord(sha256));
      if (existing) {
        // As in Commit: the stored copy's own commit may have been deferred.
        RETURN_IF_ERROR(core.StoreAgain(sha256, *existing, durability));
        BlobInfo info;
        info.sha256 = sha256;
        info.size = static_cast<int64_t>(bytes.size());
        info.already_present = true;
        return info;
      }
    }
    // Absent (Commit checks again: another upload of the same content may commit first).
    ASSIGN_OR_RETURN(auto writer, NewRocksDbBlobWriter(sha256, static_cast<int64_t>(bytes.size()), sha256));
    RETURN_IF_ERROR(writer->Append(bytes));
    return writer->Commit(durability);
  }

 private:
  // A writer; with `known_sha256`, one that trusts the caller's hash of the bytes to come.
  StatusOr<std::unique_ptr<BlobWriter>> NewRocksDbBlobWriter(std::optional<Hash256> expected_sha256, int64_t max_bytes,
                                                             std::optional<Hash256> known_sha256) {
    if (max_bytes < 0) return InvalidArgument("blob cap must be non-negative, got " + std::to_string(max_bytes));
    Core& core = *core_;
    uint64_t id = 0;
    {
      // Under the mutex so the persisted counter never goes backwards.
      std::lock_guard<std::mutex> lock(core.upload_id_mu);
      id = core.next_upload_id;
      std::string next;
      AppendU64(&next, id + 1);
      rocksdb::WriteBatch batch;
      rocksdb::Status s = batch.Put(core.cf(kBlobsCf), MarkerKey(id), rocksdb::Slice());
      if (s.ok()) s = batch.Put(core.cf(kMetaCf), kNextUploadIdKey, next);
      if (s.ok()) s = core.db->Write(core.nosync_write, &batch);
      if (!s.ok()) return FromRocks(s, "starting blob upload");
      core.next_upload_id = id + 1;
    }
    return std::unique_ptr<BlobWriter>(
        std::make_unique<RocksDbBlobWriter>(core_, id, expected_sha256, max_bytes, known_sha256));
  }

 public:
  StatusOr<int64_t> BlobSize(const Hash256& sha256) override {
    ASSIGN_OR_RETURN(std::optional<BlobRecord> r, core_->GetBlobRecord(sha256));
    if (!r) return NotFound("blob " + HashHex(sha256) + " not found");
    return r->size;
  }

  Status ReadBlob(const Hash256& sha256, const std::function<Status(std::span<const uint8_t>)>& sink) override {
    // A snapshot: a blob deleted by retention while it streams is still read whole.
    rocksdb::ManagedSnapshot snapshot(core_->db);
    ASSIGN_OR_RETURN(std::optional<BlobRecord> r, core_->GetBlobRecord(sha256, snapshot.snapshot()));
    if (!r) return NotFound("blob " + HashHex(sha256) + " not found");
    return StreamChunks(sha256, *r, sink, snapshot.snapshot());
  }

  StatusOr<std::vector<uint8_t>> GetBlob(const Hash256& sha256, int64_t max_bytes) override {
    rocksdb::ManagedSnapshot snapshot(core_->db);
    ASSIGN_OR_RETURN(std::optional<BlobRecord> r, core_->GetBlobRecord(sha256, snapshot.snapshot()));
    if (!r) return NotFound("blob " + HashHex(sha256) + " not found");
    if (r->size > max_bytes) {
      return ResourceExhausted("blob " + HashHex(sha256) + " has " + std::to_string(r->size) +
                               " bytes, over the cap of " + std::to_string(max_bytes));
    }
    std::vector<uint8_t> out;
    out.reserve(static_cast<size_t>(r->size));
    // StreamChunks checks every chunk's length, so `out` never grows past r->size.
    RETURN_IF_ERROR(StreamChunks(
        sha256, *r,
        [&out](std::span<const uint8_t> piece) {
          out.insert(out.end(), piece.begin(), piece.end());
          return OkStatus();
        },
        snapshot.snapshot()));
    return out;
  }

  Status PutTask(const std::string& task_id, const std::string& task_record,
                 const std::optional<std::string>& result_record, Durability durability) override {
    return WriteTask(task_id, task_record, result_record, durability, /*only_if_new=*/false);
  }

  Status CreateTask(const std::string& task_id, const std::string& task_record, Durability durability) override {
    return WriteTask(task_id, task_record, std::nullopt, durability, /*only_if_new=*/true);
  }

  Status WriteTask(const std::string& task_id, const std::string& task_record,
                   const std::optional<std::string>& result_record, Durability durability, bool only_if_new) {
    if (task_id.empty()) return InvalidArgument("task id is empty");
    Core& core = *core_;
    std::lock_guard<std::mutex> lock(core.TaskStripe(task_id));
    // Existence and size checks under the stripe lock keep task_count and the byte counts exact,
    // and make CreateTask's check and write one step (every write of the task takes this lock).
    ASSIGN_OR_RETURN(std::optional<int64_t> old_task, core.RecordBytes(kTasksCf, task_id));
    if (only_if_new && old_task.has_value()) return AlreadyExists("task " + task_id + " is stored");
    std::optional<int64_t> old_result;
    if (result_record) {
      ASSIGN_OR_RETURN(old_result, core.RecordBytes(kResultsCf, task_id));
    }
    const bool is_new = !old_task.has_value();
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Put(core.cf(kTasksCf), task_id, task_record);
    if (s.ok() && result_record) s = batch.Put(core.cf(kResultsCf), task_id, *result_record);
    if (!s.ok()) return FromRocks(s, "writing task " + task_id);
    RETURN_IF_ERROR(core.Write(&batch, durability).WithContext("writing task " + task_id));
    if (is_new) core.task_count.fetch_add(1, std::memory_order_relaxed);
    core.task_bytes.fetch_add(static_cast<int64_t>(task_id.size() + task_record.size()) - old_task.value_or(0),
                              std::memory_order_relaxed);
    if (result_record) {
      core.result_bytes.fetch_add(static_cast<int64_t>(task_id.size() + result_record->size()) - old_result.value_or(0),
                                  std::memory_order_relaxed);
    }
    return OkStatus();
  }

  Status DeleteTask(const std::string& task_id) override {
    if (task_id.empty()) return InvalidArgument("task id is empty");
    Core& core = *core_;
    std::lock_guard<std::mutex> lock(core.TaskStripe(task_id));
    ASSIGN_OR_RETURN(std::optional<int64_t> old_task, core.RecordBytes(kTasksCf, task_id));
    ASSIGN_OR_RETURN(std::optional<int64_t> old_result, core.RecordBytes(kResultsCf, task_id));
    if (!old_task && !old_result) return OkStatus();
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Delete(core.cf(kTasksCf), task_id);
    if (s.ok()) s = batch.Delete(core.cf(kResultsCf), task_id);
    if (!s.ok()) return FromRocks(s, "deleting task " + task_id);
    RETURN_IF_ERROR(core.Write(&batch, Durability::kSynced).WithContext("deleting task " + task_id));
    if (old_task) {
      core.task_count.fetch_sub(1, std::memory_order_relaxed);
      core.task_bytes.fetch_sub(*old_task, std::memory_order_relaxed);
    }
    if (old_result) core.result_bytes.fetch_sub(*old_result, std::memory_order_relaxed);
    return OkStatus();
  }

  Status ForEachBlob(
      const std::function<Status(const Hash256& sha256, int64_t size, uint64_t upload_id)>& visit) override {
    std::unique_ptr<rocksdb::Iterator> it(core_->db->NewIterator(rocksdb::ReadOptions(), core_->cf(kBlobsCf)));
    for (it->Seek(std::string(1, kMetaPrefix)); it->Valid() && it->key()[0] == kMetaPrefix; it->Next()) {
      if (it->key().size() != kBlobMetaKeySize) continue;
      std::optional<BlobRecord> r = DecodeBlobRecord(std::string_view(it->value().data(), it->value().size()));
      if (!r) continue;  // reported as DATA_LOSS when that blob is read
      Hash256 h{};
      std::memcpy(h.data(), it->key().data() + 1, h.size());
      RETURN_IF_ERROR(visit(h, r->size, r->stored_id));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "iterating blobs");
    return OkStatus();
  }

  Status DeleteBlob(const Hash256& sha256) override { return DeleteBlobRecord(sha256, std::nullopt).status(); }

  StatusOr<bool> DeleteBlobUnlessStoredAgain(const Hash256& sha256, uint64_t stored_id) override {
    return DeleteBlobRecord(sha256, stored_id);
  }

  // Deletes the blob, or with `only_stored_id` only while it is still stored under that id.
  // Returns whether it deleted anything.
  StatusOr<bool> DeleteBlobRecord(const Hash256& sha256, std::optional<uint64_t> only_stored_id) {
    Core& core = *core_;
    std::lock_guard<std::mutex> lock(core.BlobStripe(sha256));
    ASSIGN_OR_RETURN(std::optional<BlobRecord> r, core.GetBlobRecord(sha256));
    if (!r) return false;
    if (only_stored_id && r->stored_id != *only_stored_id) return false;
    // The record goes in the same batch as the chunks, so no record ever names missing chunks.
    constexpr uint64_t kMaxPointDeletes = 64;
    const uint64_t chunks = (static_cast<uint64_t>(r->size) + kChunkBytes - 1) / kChunkBytes;
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Delete(core.cf(kBlobsCf), BlobMetaKey(sha256));
    if (chunks <= kMaxPointDeletes) {
      for (uint64_t i = 0; s.ok() && i < chunks; ++i) {
        s = batch.Delete(core.cf(kBlobsCf), ChunkKey(r->upload_id, static_cast<uint32_t>(i)));
      }
    } else if (s.ok()) {
      s = batch.DeleteRange(core.cf(kBlobsCf), ChunkKey(r->upload_id, 0), ChunkRangeEnd(r->upload_id));
    }
    if (!s.ok()) return FromRocks(s, "deleting blob " + HashHex(sha256));
    // Begun before the write and ended after it, whatever its outcome: an epoch read while the
    // write may be under way is none (BlobDeletionEpoch).
    core.blob_deletions_begun.fetch_add(1);
    Status written = core.Write(&batch, Durability::kDeferred).WithContext("deleting blob " + HashHex(sha256));
    core.blob_deletions_ended.fetch_add(1);
    RETURN_IF_ERROR(written);
    core.blob_count.fetch_sub(1, std::memory_order_relaxed);
    core.blob_bytes.fetch_sub(r->size, std::memory_order_relaxed);
    return true;
  }

  std::optional<uint64_t> BlobDeletionEpoch() override {
    // Begun first: a deletion that begins after this read changes the next epoch; one under way
    // now is either not ended yet (none) or ended, and then visible to a look-up after this call.
    const uint64_t begun = core_->blob_deletions_begun.load();
    if (core_->blob_deletions_ended.load() != begun) return std::nullopt;
    return begun;
  }

  Status WaitDurable() override { return core_->WaitDurable().WithContext("syncing the WAL"); }

  int64_t UnflushedBytes() override {
    uint64_t bytes = 0;
    if (!core_->db->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &bytes)) return 0;
    return static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX));
  }

  uint64_t NextUploadId() override {
    std::lock_guard<std::mutex> lock(core_->upload_id_mu);
    core_->grace_mark = core_->next_upload_id;
    return core_->next_upload_id;
  }

  StatusOr<std::optional<std::string>> GetTask(const std::string& task_id) override {
    return core_->GetString(kTasksCf, task_id);
  }

  StatusOr<std::optional<std::string>> GetResult(const std::string& task_id) override {
    return core_->GetString(kResultsCf, task_id);
  }

  Status ForEachTask(
      const std::function<Status(const std::string& task_id, const std::string& record)>& visit) override {
    // Implicit snapshot: the iterator sees a consistent view while writers go on.
    std::unique_ptr<rocksdb::Iterator> it(core_->db->NewIterator(rocksdb::ReadOptions(), core_->cf(kTasksCf)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      RETURN_IF_ERROR(visit(it->key().ToString(), it->value().ToString()));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "iterating tasks");
    return OkStatus();
  }

  Status PutMeta(const std::string& key, const std::string& value) override {
    if (key == kSchemaKey || key == kNextUploadIdKey) {
      return InvalidArgument("meta key \"" + key + "\" is reserved for the store");
    }
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Put(core_->cf(kMetaCf), key, value);
    if (!s.ok()) return FromRocks(s, "writing meta key " + key);
    return core_->committer->Commit(&batch).WithContext("writing meta key " + key);
  }

  StatusOr<std::optional<std::string>> GetMeta(const std::string& key) override {
    return core_->GetString(kMetaCf, key);
  }

  Status DeleteMeta(const std::string& key) override {
    if (key == kSchemaKey || key == kNextUploadIdKey) {
      return InvalidArgument("meta key \"" + key + "\" is reserved for the store");
    }
    rocksdb::WriteBatch batch;
    rocksdb::Status s = batch.Delete(core_->cf(kMetaCf), key);
    if (!s.ok()) return FromRocks(s, "deleting meta key " + key);
    return core_->committer->Commit(&batch).WithContext("deleting meta key " + key);
  }

  Status ForEachMeta(const std::string& prefix,
                     const std::function<Status(const std::string& key, const std::string& value)>& visit) override {
    std::unique_ptr<rocksdb::Iterator> it(core_->db->NewIterator(rocksdb::ReadOptions(), core_->cf(kMetaCf)));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      RETURN_IF_ERROR(visit(it->key().ToString(), it->value().ToString()));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "iterating meta keys");
    return OkStatus();
  }

  Stats GetStats() override {
    Stats st;
    st.blob_count = core_->blob_count.load(std::memory_order_relaxed);
    st.blob_bytes = core_->blob_bytes.load(std::memory_order_relaxed);
    st.task_count = core_->task_count.load(std::memory_order_relaxed);
    st.task_bytes = core_->task_bytes.load(std::memory_order_relaxed);
    st.result_bytes = core_->result_bytes.load(std::memory_order_relaxed);
    return st;
  }

 private:
  // Streams the chunks of a committed blob in order, re-hashing as it goes. Each chunk must have
  // exactly the expected length, so a damaged record can neither overfeed the sink nor hide.
  Status StreamChunks(const Hash256& sha256, const BlobRecord& r,
                      const std::function<Status(std::span<const uint8_t>)>& sink, const rocksdb::Snapshot* snapshot) {
    const std::string name = "blob " + HashHex(sha256);
    const uint64_t size = static_cast<uint64_t>(r.size);
    const uint64_t chunks = (size + kChunkBytes - 1) / kChunkBytes;
    if (chunks > kMaxChunks) return DataLoss(name + ": stored size " + std::to_string(size) + " is impossible");
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;  // large, streamed once: keep the block cache for metadata
    ro.snapshot = snapshot;
    Sha256 hasher;
    rocksdb::PinnableSlice chunk;
    for (uint64_t i = 0; i < chunks; ++i) {
      chunk.Reset();
      rocksdb::Status s =
          core_->db->Get(ro, core_->cf(kBlobsCf), ChunkKey(r.upload_id, static_cast<uint32_t>(i)), &chunk);
      if (s.IsNotFound()) return DataLoss(name + ": chunk " + std::to_string(i) + " is missing");
      if (!s.ok()) return FromRocks(s, name + ": reading chunk " + std::to_string(i));
      const uint64_t want = (i + 1 < chunks) ? kChunkBytes : size - i * kChunkBytes;
      if (chunk.size() != want) {
        return DataLoss(name + ": chunk " + std::to_string(i) + " has " + std::to_string(chunk.size()) +
                        " bytes, expected " + std::to_string(want));
      }
      std::span<const uint8_t> piece(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size());
      hasher.Update(piece);
      RETURN_IF_ERROR(sink(piece));
    }
    const Hash256 got = hasher.Finish();
    if (got != sha256) return DataLoss(name + ": stored bytes hash to " + HashHex(got));
    return OkStatus();
  }

  std::shared_ptr<Core> core_;
};

rocksdb::CompressionType MetadataCompression() {
  // lz4 when this RocksDB build has it; tiny records otherwise go uncompressed.
  for (rocksdb::CompressionType t : rocksdb::GetSupportedCompressions()) {
    if (t == rocksdb::kLZ4Compression) return t;
  }
  return rocksdb::kNoCompression;
}

rocksdb::ColumnFamilyOptions CfOptions(Cf c, const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  if (cache) {
    t.block_cache = cache;
  } else {
    t.no_block_cache = true;
  }
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));  // point lookups dominate
  t.cache_index_and_filter_blocks = false;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  if (c == kBlobsCf) {
    // Tensor bytes compress poorly; 1 MiB chunks go to blob files so compaction does not keep
    // rewriting them, and garbage collection reclaims space of deleted chunks.
    o.compression = rocksdb::kNoCompression;
    o.enable_blob_files = true;
    o.min_blob_size = 4096;
    o.blob_file_size = uint64_t{256} << 20;
    o.blob_compression_type = rocksdb::kNoCompression;
    o.enable_blob_garbage_collection = true;
  } else {
    o.compression = MetadataCompression();
    // A bloom filter over the memtable's keys: a look-up of a key the memtable does not hold
    // (a new task's existence checks, its first result's size check) skips the skip list.
    o.memtable_prefix_bloom_size_ratio = 0.02;
    o.memtable_whole_key_filtering = true;
  }
  return o;
}

// Scans the blobs CF: garbage-collects interrupted uploads, seeds stats, and finds the highest
// upload id still referenced.
Status RecoverBlobs(Core& core, uint64_t* max_id_seen) {
  std::vector<uint64_t> orphans;
  {
    std::unique_ptr<rocksdb::Iterator> it(core.db->NewIterator(rocksdb::ReadOptions(), core.cf(kBlobsCf)));
    for (it->Seek(std::string(1, kMarkerPrefix)); it->Valid() && it->key()[0] == kMarkerPrefix; it->Next()) {
      if (it->key().size() != kMarkerKeySize) continue;  // not ours; leave it
      orphans.push_back(ReadU64(it->key().data() + 1));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning upload markers");
    for (it->Seek(std::string(1, kMetaPrefix)); it->Valid() && it->key()[0] == kMetaPrefix; it->Next()) {
      if (it->key().size() != kBlobMetaKeySize) continue;
      std::optional<BlobRecord> r = DecodeBlobRecord(std::string_view(it->value().data(), it->value().size()));
      if (!r) continue;  // reported as DATA_LOSS when that blob is read
      core.blob_count.fetch_add(1, std::memory_order_relaxed);
      core.blob_bytes.fetch_add(r->size, std::memory_order_relaxed);
      *max_id_seen = std::max({*max_id_seen, r->upload_id, r->stored_id});
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning blob records");
  }
  for (uint64_t id : orphans) {
    *max_id_seen = std::max(*max_id_seen, id);
    RETURN_IF_ERROR(core.DropUpload(id));
  }
  return OkStatus();
}

Status CountTasks(Core& core) {
  std::unique_ptr<rocksdb::Iterator> it(core.db->NewIterator(rocksdb::ReadOptions(), core.cf(kTasksCf)));
  int64_t n = 0;
  int64_t bytes = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ++n;
    bytes += static_cast<int64_t>(it->key().size() + it->value().size());
  }
  if (!it->status().ok()) return FromRocks(it->status(), "counting tasks");
  core.task_count.store(n, std::memory_order_relaxed);
  core.task_bytes.store(bytes, std::memory_order_relaxed);
  std::unique_ptr<rocksdb::Iterator> results(core.db->NewIterator(rocksdb::ReadOptions(), core.cf(kResultsCf)));
  int64_t result_bytes = 0;
  for (results->SeekToFirst(); results->Valid(); results->Next()) {
    result_bytes += static_cast<int64_t>(results->key().size() + results->value().size());
  }
  if (!results->status().ok()) return FromRocks(results->status(), "counting results");
  core.result_bytes.store(result_bytes, std::memory_order_relaxed);
  return OkStatus();
}

Status CheckSchema(Core& core) {
  ASSIGN_OR_RETURN(std::optional<std::string> v, core.GetString(kMetaCf, kSchemaKey));
  if (!v) {
    rocksdb::Status s = core.db->Put(core.sync_write, core.cf(kMetaCf), kSchemaKey, std::to_string(kSchemaVersion));
    if (!s.ok()) return FromRocks(s, "writing schema version");
    return OkStatus();
  }
  int version = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), version);
  if (ec != std::errc() || end != v->data() + v->size()) {
    return DataLoss("database " + core.path + " has an unreadable schema version \"" + *v + "\"");
  }
  if (version > kSchemaVersion) {
    return FailedPrecondition("database " + core.path + " has schema version " + std::to_string(version) +
                              ", newer than this binary supports (" + std::to_string(kSchemaVersion) + ")");
  }
  if (version < kSchemaVersion) {
    return FailedPrecondition("database " + core.path + " has unsupported schema version " + std::to_string(version));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const std::string& path, const StoreOptions& options) {
  if (path.empty()) return InvalidArgument("store path is empty");
  if (options.block_cache_bytes < 0) return InvalidArgument("block_cache_bytes must be non-negative");

  auto core = std::make_shared<Core>();
  core->path = path;
  core->options = options;
  core->sync_write.sync = options.sync_writes;
  core->nosync_write.sync = false;

  rocksdb::DBOptions dbo;
  dbo.create_if_missing = true;
  dbo.create_missing_column_families = true;
  dbo.max_open_files = 512;
  dbo.keep_log_file_num = 5;
  dbo.max_log_file_size = uint64_t{16} << 20;
  dbo.max_total_wal_size = uint64_t{256} << 20;  // bounds WAL kept alive by idle column families
  dbo.db_write_buffer_size = size_t{256} << 20;
  dbo.max_background_jobs = 4;
  dbo.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // Reopening must not need free space: a node stopped on a full disk replays its WAL into the
  // memtables instead of flushing them to new files first (docs/NODE.md, "A full disk").
  dbo.avoid_flush_during_recovery = true;

  std::shared_ptr<rocksdb::Cache> cache;
  if (options.block_cache_bytes > 0) cache = rocksdb::NewLRUCache(static_cast<size_t>(options.block_cache_bytes));

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (size_t i = 0; i < kNumOwnCfs; ++i) cfs.emplace_back(kCfNames[i], CfOptions(static_cast<Cf>(i), cache));
  // RocksDB refuses to open without every existing CF; open unknown ones (from a newer
  // version) too, so the schema check below can give the real reason.
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(dbo, path, &existing).ok()) {
    for (const std::string& name : existing) {
      if (std::find(kCfNames.begin(), kCfNames.end(), name) == kCfNames.end()) {
        cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
      }
    }
  }

  rocksdb::Status s = rocksdb::DB::Open(dbo, path, cfs, &core->handles, &core->db);
  if (!s.ok()) {
    core->db = nullptr;
    if (LooksLikeLockError(s)) {
      return FailedPrecondition("database " + path +
                                " is in use by another process (or already open): " + s.ToString());
    }
    return FromRocks(s, "opening database " + path);
  }

  RETURN_IF_ERROR(CheckSchema(*core));

  uint64_t max_id_seen = 0;
  RETURN_IF_ERROR(RecoverBlobs(*core, &max_id_seen));
  RETURN_IF_ERROR(CountTasks(*core));

  ASSIGN_OR_RETURN(std::optional<std::string> counter, core->GetString(kMetaCf, kNextUploadIdKey));
  uint64_t next = 1;
  if (counter && counter->size() == 8) next = ReadU64(counter->data());
  if (max_id_seen == UINT64_MAX) return DataLoss("database " + path + ": upload id space exhausted");
  core->next_upload_id = std::max({next, max_id_seen + 1, uint64_t{1}});

  Core* raw = core.get();  // the committer is closed and destroyed before the rest of Core
  core->committer = std::make_unique<GroupCommitter>(
      [raw](std::span<rocksdb::WriteBatch* const> batches) { return raw->WriteGroup(batches); });

  // Make the GC and schema record durable before serving.
  s = core->db->FlushWAL(/*sync=*/true);
  if (!s.ok()) return FromRocks(s, "syncing WAL of " + path);
  return std::unique_ptr<Store>(std::make_unique<RocksDbStore>(std::move(core)));
}

}  // namespace consensor::node
