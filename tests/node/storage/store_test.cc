// Tests for node/storage/store.h against the real RocksDB store, each in a fresh temporary directory.
// Crash and lock tests re-run this binary as a child process (StoreChildProcess.Run) so the
// child starts clean instead of inheriting RocksDB's threads through a bare fork().
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "node/storage/store.h"

extern char** environ;

namespace consensor::node {
namespace {

constexpr int64_t kMiB = kBlobChunkBytes;
constexpr char kChildEnv[] = "CONSENSOR_STORE_TEST_CHILD";

std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

std::unique_ptr<Store> MustOpen(const std::string& path, StoreOptions opts = {}) {
  auto s = OpenRocksDbStore(path, opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return nullptr;
  return std::move(s).value();
}

struct ReadResult {
  Status status;
  std::vector<uint8_t> bytes;
  std::vector<size_t> pieces;
};
ReadResult ReadAll(Store& store, const Hash256& h) {
  ReadResult r;
  r.status = store.ReadBlob(h, [&r](std::span<const uint8_t> piece) {
    r.pieces.push_back(piece.size());
    r.bytes.insert(r.bytes.end(), piece.begin(), piece.end());
    return OkStatus();
  });
  return r;
}

// Direct access to the database, bypassing the store: for inspecting key layout and for
// injecting damage. Opens every column family with default options.
class RawDb {
 public:
  explicit RawDb(const std::string& path, bool read_only = false) {
    rocksdb::Options opts;
    std::vector<std::string> names;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(opts, path, &names);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    s = read_only ? rocksdb::DB::OpenForReadOnly(opts, path, cfs, &handles_, &db_)
                  : rocksdb::DB::Open(opts, path, cfs, &handles_, &db_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    names_ = names;
  }
  ~RawDb() {
    if (db_ == nullptr) return;
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db_->Close().PermitUncheckedError();
    delete db_;
  }
  bool ok() const { return db_ != nullptr; }
  rocksdb::DB* db() { return db_; }
  rocksdb::ColumnFamilyHandle* cf(const std::string& name) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) return handles_[i];
    }
    ADD_FAILURE() << "no column family " << name;
    return nullptr;
  }
  // Keys of the blobs column family starting with `prefix`.
  std::vector<std::string> BlobKeys(char prefix) {
    std::vector<std::string> keys;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf("blobs")));
    for (it->Seek(std::string(1, prefix)); it->Valid() && it->key()[0] == prefix; it->Next()) {
      keys.push_back(it->key().ToString());
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return keys;
  }
  // Upload id of a committed blob, from its "m" record.
  uint64_t UploadIdOf(const Hash256& h) {
    std::string key = "m" + std::string(reinterpret_cast<const char*>(h.data()), h.size());
    std::string v;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf("blobs"), key, &v);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(v.size(), 24u);
    uint64_t id = 0;
    for (size_t i = 8; i < 16 && i < v.size(); ++i) id = (id << 8) | static_cast<uint8_t>(v[i]);
    return id;
  }
  // Rewrites a blob's "m" record as records were before they held a stored id (16 bytes).
  void WriteOldFormatRecord(const Hash256& h) {
    std::string key = "m" + std::string(reinterpret_cast<const char*>(h.data()), h.size());
    std::string v;
    ASSERT_TRUE(db_->Get(rocksdb::ReadOptions(), cf("blobs"), key, &v).ok());
    ASSERT_EQ(v.size(), 24u);
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), cf("blobs"), key, v.substr(0, 16)).ok());
  }
  size_t RecordSize(const Hash256& h) {
    std::string key = "m" + std::string(reinterpret_cast<const char*>(h.data()), h.size());
    std::string v;
    EXPECT_TRUE(db_->Get(rocksdb::ReadOptions(), cf("blobs"), key, &v).ok());
    return v.size();
  }
  static std::string ChunkKey(uint64_t id, uint32_t index) {
    std::string k = "c";
    for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>(id >> (8 * i)));
    for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>(index >> (8 * i)));
    return k;
  }

 private:
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::vector<std::string> names_;
};

// Re-runs this test binary with only StoreChildProcess.Run selected and `spec` in the
// environment. Returns the child's pid, or -1.
pid_t SpawnChild(const std::string& spec) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kChildEnv, std::strlen(kChildEnv)) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back(std::string(kChildEnv) + "=" + spec);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=StoreChildProcess.Run";
  std::vector<char*> argv = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// The id ForEachBlob reports for `h` (0 when absent).
uint64_t StoredIdOf(Store& store, const Hash256& h) {
  uint64_t id = 0;
  EXPECT_TRUE(store
                  .ForEachBlob([&](const Hash256& x, int64_t, uint64_t stored_id) {
                    if (x == h) id = stored_id;
                    return OkStatus();
                  })
                  .ok());
  return id;
}

// The child side. "crash:<dir>": commits one blob (seed 7, 1.5 MiB), then starts another
// upload, writes 2.5 MiB of it and dies by SIGKILL before committing.
// "hold:<dir>": opens the store, creates <dir>.ready, and waits to be killed.
TEST(StoreChildProcess, Run) {
  const char* spec_c = std::getenv(kChildEnv);
  if (spec_c == nullptr) GTEST_SKIP() << "only runs as a child of the crash and lock tests";
  std::string spec = spec_c;
  const size_t colon = spec.find(':');
  ASSERT_NE(colon, std::string::npos);
  const std::string mode = spec.substr(0, colon);
  const std::string dir = spec.substr(colon + 1);
  auto store = MustOpen(dir);
  ASSERT_NE(store, nullptr);
  if (mode == "crash") {
    auto committed = Pattern(kMiB + kMiB / 2, 7);
    ASSERT_TRUE(store->PutBlob(committed).ok());
    auto w = store->NewBlobWriter(std::nullopt, 10 * kMiB);
    ASSERT_TRUE(w.ok());
    auto data = Pattern(2 * kMiB + kMiB / 2, 8);
    ASSERT_TRUE((*w)->Append(data).ok());
    raise(SIGKILL);
  } else if (mode == "hold") {
    int fd = ::open((dir + ".ready").c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // parent kills us long before
    _exit(3);
  }
  FAIL() << "unknown child mode " << mode;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "consensor_store_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    path_ = root_ + "/db";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::string root_;
  std::string path_;
};

TEST_F(StoreTest, RoundTripAcrossChunkBoundaries) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  const std::vector<int64_t> sizes = {0, 1, kMiB - 1, kMiB, kMiB + 1, 3 * kMiB + kMiB / 2};
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto data = Pattern(static_cast<size_t>(sizes[i]), i);
    auto info = store->PutBlob(data);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    const Hash256 h = Sha256Of(data);
    EXPECT_EQ(info->sha256, h);
    EXPECT_EQ(info->size, sizes[i]);
    EXPECT_FALSE(info->already_present);
    total += sizes[i];

    auto size = store->BlobSize(h);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(*size, sizes[i]);
    auto got = store->GetBlob(h, sizes[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == data) << "size " << sizes[i];

    ReadResult r = ReadAll(*store, h);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_TRUE(r.bytes == data);
    // Chunks arrive in order: every piece is a full chunk except the last.
    const size_t expected_pieces = static_cast<size_t>((sizes[i] + kMiB - 1) / kMiB);
    ASSERT_EQ(r.pieces.size(), expected_pieces);
    for (size_t p = 0; p + 1 < r.pieces.size(); ++p) EXPECT_EQ(r.pieces[p], static_cast<size_t>(kMiB));
  }
  auto st = store->GetStats();
  EXPECT_EQ(st.blob_count, static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(st.blob_bytes, total);
}

TEST_F(StoreTest, StreamingAppendsInOddPieces) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto data = Pattern(static_cast<size_t>(2 * kMiB + 12345), 42);
  const Hash256 h = Sha256Of(data);
  auto w = store->NewBlobWriter(h, static_cast<int64_t>(data.size()));
  ASSERT_TRUE(w.ok());
  const std::vector<size_t> steps = {7, static_cast<size_t>(kMiB) + 3, 0, 100000, static_cast<size_t>(kMiB)};
  size_t off = 0;
  for (size_t s : steps) {
    const size_t n = std::min(s, data.size() - off);
    ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(data).subspan(off, n)).ok());
    off += n;
  }
  ASSERT_TRUE((*w)->Append(std::span<const uint8_t>(data).subspan(off)).ok());
  auto info = (*w)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->sha256, h);
  auto again = (*w)->Commit();
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  ReadResult r = ReadAll(*store, h);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.bytes == data);
  EXPECT_EQ(r.pieces, (std::vector<size_t>{static_cast<size_t>(kMiB), static_cast<size_t>(kMiB), 12345}));
}

TEST_F(StoreTest, SinkErrorStopsTheRead) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto data = Pattern(static_cast<size_t>(3 * kMiB), 1);
  ASSERT_TRUE(store->PutBlob(data).ok());
  int calls = 0;
  Status s = store->ReadBlob(Sha256Of(data), [&calls](std::span<const uint8_t>) {
    return ++calls == 2 ? Cancelled("client went away") : OkStatus();
  });
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

TEST_F(StoreTest, MissingBlobIsNotFound) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  const Hash256 h = Sha256Of(std::string_view("nope"));
  EXPECT_EQ(store->BlobSize(h).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->GetBlob(h, 100).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadAll(*store, h).status.code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, BlobDeletionEpochMovesWithEveryDeletionAndNothingElse) {
  // A node skips looking up an output blob it saw stored while the epoch it read before that
  // is still the store's (TaskManager: warm tasks' outputs): every deletion must move it.
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  const std::optional<uint64_t> opened = store->BlobDeletionEpoch();
  ASSERT_TRUE(opened.has_value());
  auto a = store->PutBlob(Pattern(100, 1));
  auto b = store->PutBlob(Pattern(3 * kMiB, 2));  // several chunks
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(store->PutBlob(Pattern(100, 1)).ok());  // already stored
  EXPECT_EQ(store->BlobDeletionEpoch(), opened) << "puts delete nothing";
  ASSERT_TRUE(store->DeleteBlob(Sha256Of(std::string_view("absent"))).ok());
  EXPECT_EQ(store->BlobDeletionEpoch(), opened) << "deleting an absent blob deletes nothing";
  ASSERT_TRUE(store->DeleteBlob(a->sha256).ok());
  const std::optional<uint64_t> after_a = store->BlobDeletionEpoch();
  ASSERT_TRUE(after_a.has_value());
  EXPECT_NE(after_a, opened);
  ASSERT_TRUE(store->DeleteBlob(b->sha256).ok());
  EXPECT_NE(store->BlobDeletionEpoch(), after_a);
  EXPECT_NE(store->BlobDeletionEpoch(), opened);
}

TEST_F(StoreTest, HashMismatchIsRejectedAndLeavesNothing) {
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    auto data = Pattern(static_cast<size_t>(kMiB + 5), 3);
    const Hash256 wrong = Sha256Of(std::string_view("something else"));
    auto info = store->PutBlob(data, wrong);
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(
        info.status().message().find("blob hash mismatch: expected " + ToHex(wrong) + ", got " + ToHex(Sha256Of(data))),
        std::string::npos)
        << info.status().message();
    EXPECT_EQ(store->BlobSize(Sha256Of(data)).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(store->BlobSize(wrong).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(store->GetStats().blob_count, 0);
    EXPECT_EQ(store->GetStats().blob_bytes, 0);
    // The right hash goes through.
    auto ok = store->PutBlob(data, Sha256Of(data));
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ(store->GetStats().blob_count, 1);
  }
  RawDb raw(path_, /*read_only=*/true);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw.BlobKeys('c').size(), 2u);  // only the good upload's two chunks
  EXPECT_TRUE(raw.BlobKeys('u').empty());
  EXPECT_EQ(raw.BlobKeys('m').size(), 1u);
}

TEST_F(StoreTest, IdenticalBlobIsDeduplicated) {
  auto data = Pattern(static_cast<size_t>(kMiB + kMiB / 2), 9);
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    auto first = store->PutBlob(data);
    ASSERT_TRUE(first.ok());
    EXPECT_FALSE(first->already_present);
    auto second = store->PutBlob(data);
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE(second->already_present);
    EXPECT_EQ(second->sha256, first->sha256);
    EXPECT_EQ(second->size, first->size);
    auto st = store->GetStats();
    EXPECT_EQ(st.blob_count, 1);
    EXPECT_EQ(st.blob_bytes, static_cast<int64_t>(data.size()));
    ReadResult r = ReadAll(*store, first->sha256);
    ASSERT_TRUE(r.status.ok());
    EXPECT_TRUE(r.bytes == data);
  }
  RawDb raw(path_, /*read_only=*/true);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw.BlobKeys('c').size(), 2u);  // the duplicate's chunks are gone
  EXPECT_TRUE(raw.BlobKeys('u').empty());
}

// A warm task stores the same outputs again: PutBlob of stored content must not start an upload
// (a marker and up to a chunk of megabytes written, then dropped), yet must still check the
// caller's expected hash and wait for durability.
// Retention's grace counts from when content was last stored (docs/NODE.md, "Disk budget and
// retention"): storing content again after a sweep read the counter gives it a new stored id,
// once per such read; a deletion planned on the old id then deletes nothing.
TEST_F(StoreTest, ContentStoredAgainAfterAGraceMarkGetsANewStoredIdOnce) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  const auto data = Pattern(1000, 21);
  auto first = store->PutBlob(data);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const Hash256 h = first->sha256;
  const uint64_t id0 = StoredIdOf(*store, h);
  ASSERT_GT(id0, 0u);
  ASSERT_TRUE(store->PutBlob(data).ok());
  EXPECT_EQ(StoredIdOf(*store, h), id0) << "no sweep read the counter since: nothing to renew";
  const uint64_t mark = store->NextUploadId();  // what a sweep reads at its start
  auto again = store->PutBlob(data, std::nullopt, Durability::kDeferred);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_present);
  const uint64_t id1 = StoredIdOf(*store, h);
  EXPECT_GE(id1, mark);
  ASSERT_TRUE(store->PutBlob(data).ok());
  EXPECT_EQ(StoredIdOf(*store, h), id1) << "renewed once per mark";
  // Through a writer's commit too.
  const uint64_t mark2 = store->NextUploadId();
  {
    auto w = store->NewBlobWriter(std::nullopt, kMiB);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(data).ok());
    auto committed = (*w)->Commit();
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    EXPECT_TRUE(committed->already_present);
  }
  const uint64_t id2 = StoredIdOf(*store, h);
  EXPECT_GE(id2, mark2);
  // A deletion planned on an earlier id keeps the content.
  auto stale = store->DeleteBlobUnlessStoredAgain(h, id0);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_FALSE(*stale);
  EXPECT_TRUE(store->BlobSize(h).ok());
  // The synced commit's new id survives a reopen, and the counter starts above it.
  store.reset();
  store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(StoredIdOf(*store, h), id2);
  EXPECT_GT(store->NextUploadId(), id2);
  auto current = store->DeleteBlobUnlessStoredAgain(h, id2);
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_TRUE(*current);
  EXPECT_EQ(store->BlobSize(h).status().code(), StatusCode::kNotFound);
  auto absent = store->DeleteBlobUnlessStoredAgain(h, id2);
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(*absent);
}

// An upload that began before a sweep read the counter and committed after it is stored after
// the mark: the sweep after next, not the next one, may collect it.
TEST_F(StoreTest, AnUploadCommittedAfterAGraceMarkIsStoredAfterIt) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  const auto data = Pattern(3 * kMiB + 1, 22);
  auto w = store->NewBlobWriter(std::nullopt, 4 * kMiB);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(data).ok());
  const uint64_t mark = store->NextUploadId();
  auto committed = (*w)->Commit();
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_GE(StoredIdOf(*store, committed->sha256), mark);
}

// Records written before they held a stored id read back, and count as stored under their
// upload id; storing the content again after a mark writes the current format.
TEST_F(StoreTest, BlobRecordsOfTheOlderFormatReadBackAsStoredUnderTheirUploadId) {
  const auto data = Pattern(kMiB + 3, 23);
  Hash256 h{};
  uint64_t upload_id = 0;
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    auto put = store->PutBlob(data);
    ASSERT_TRUE(put.ok());
    h = put->sha256;
  }
  {
    RawDb raw(path_);
    ASSERT_TRUE(raw.ok());
    upload_id = raw.UploadIdOf(h);
    raw.WriteOldFormatRecord(h);
    EXPECT_EQ(raw.RecordSize(h), 16u);
  }
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    ReadResult r = ReadAll(*store, h);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_TRUE(r.bytes == data);
    EXPECT_EQ(StoredIdOf(*store, h), upload_id);
    EXPECT_EQ(store->GetStats().blob_count, 1);
    const uint64_t mark = store->NextUploadId();
    EXPECT_GT(mark, upload_id);
    ASSERT_TRUE(store->PutBlob(data).ok());
    EXPECT_GE(StoredIdOf(*store, h), mark);
  }
  RawDb raw(path_, /*read_only=*/true);
  EXPECT_EQ(raw.RecordSize(h), 24u);
  EXPECT_EQ(raw.UploadIdOf(h), upload_id) << "the chunks stay where they are";
}

TEST_F(StoreTest, PutOfStoredContentWritesNothing) {
  auto data = Pattern(static_cast<size_t>(kMiB + 7), 11);
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto first = store->PutBlob(data, std::nullopt, Durability::kDeferred);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->already_present);
  EXPECT_EQ(first->sha256, Sha256Of(data));
  const uint64_t next_upload = store->NextUploadId();
  for (Durability d : {Durability::kDeferred, Durability::kSynced}) {
    auto again = store->PutBlob(data, Sha256Of(data), d);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(again->already_present);
    EXPECT_EQ(again->sha256, first->sha256);
    EXPECT_EQ(again->size, static_cast<int64_t>(data.size()));
  }
  // The first of these stored the content again after a grace mark (NextUploadId above): a new
  // stored id for retention, and no upload; the second wrote nothing.
  EXPECT_EQ(store->NextUploadId(), next_upload + 1) << "storing present content started an upload";
  const Hash256 wrong = Sha256Of(std::string_view("not these bytes"));
  auto mismatch = store->PutBlob(data, wrong);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("blob hash mismatch: expected " + ToHex(wrong)), std::string::npos);
  // Other content still takes an upload, stored under the hash computed once up front.
  auto other = Pattern(static_cast<size_t>(2 * kMiB + 3), 12);
  auto stored = store->PutBlob(other);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_FALSE(stored->already_present);
  EXPECT_EQ(stored->sha256, Sha256Of(other));
  EXPECT_GT(store->NextUploadId(), next_upload);
  ReadResult r = ReadAll(*store, stored->sha256);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.bytes == other);
  auto st = store->GetStats();
  EXPECT_EQ(st.blob_count, 2);
  EXPECT_EQ(st.blob_bytes, static_cast<int64_t>(data.size() + other.size()));
}

TEST_F(StoreTest, CapsAreEnforced) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto w = store->NewBlobWriter(std::nullopt, 10);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(Pattern(6, 1)).ok());
  Status s = (*w)->Append(Pattern(5, 2));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("blob exceeds the cap of 10 bytes"), std::string::npos) << s.message();
  // The writer is finished after the error: no partial blob can be committed.
  EXPECT_EQ((*w)->Commit().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->GetStats().blob_count, 0);

  // Exactly at the cap is fine.
  auto w2 = store->NewBlobWriter(std::nullopt, 10);
  ASSERT_TRUE(w2.ok());
  ASSERT_TRUE((*w2)->Append(Pattern(10, 3)).ok());
  auto info = (*w2)->Commit();
  ASSERT_TRUE(info.ok());

  // Read cap is checked against the stored size before reading.
  auto got = store->GetBlob(info->sha256, 9);
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(store->GetBlob(info->sha256, 10).ok());

  EXPECT_EQ(store->NewBlobWriter(std::nullopt, -1).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, EmptyBlobIsValid) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto w = store->NewBlobWriter(Sha256Of(std::string_view("")), 0);
  ASSERT_TRUE(w.ok());
  auto info = (*w)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 0);
  auto got = store->GetBlob(info->sha256, 0);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  ReadResult r = ReadAll(*store, info->sha256);
  EXPECT_TRUE(r.status.ok());
  EXPECT_TRUE(r.pieces.empty());
}

TEST_F(StoreTest, WriterDestroyedWithoutCommitLeavesNothing) {
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    auto data = Pattern(static_cast<size_t>(2 * kMiB + kMiB / 2), 5);
    {
      auto w = store->NewBlobWriter(std::nullopt, 10 * kMiB);
      ASSERT_TRUE(w.ok());
      ASSERT_TRUE((*w)->Append(data).ok());
    }
    EXPECT_EQ(store->GetStats().blob_count, 0);
    EXPECT_EQ(store->BlobSize(Sha256Of(data)).status().code(), StatusCode::kNotFound);
  }
  RawDb raw(path_, /*read_only=*/true);
  ASSERT_TRUE(raw.ok());
  EXPECT_TRUE(raw.BlobKeys('c').empty());
  EXPECT_TRUE(raw.BlobKeys('u').empty());
  EXPECT_TRUE(raw.BlobKeys('m').empty());
}

TEST_F(StoreTest, WriterMayOutliveItsStore) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto w = store->NewBlobWriter(std::nullopt, 100);
  ASSERT_TRUE(w.ok());
  store.reset();
  ASSERT_TRUE((*w)->Append(Pattern(50, 1)).ok());
  EXPECT_TRUE((*w)->Commit().ok());
  w = Status(Cancelled("drop the writer"));
  auto reopened = MustOpen(path_);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->GetStats().blob_count, 1);
}

TEST_F(StoreTest, ReopenKeepsBlobsTasksAndMeta) {
  auto data = Pattern(static_cast<size_t>(kMiB + 77), 11);
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutBlob(data).ok());
    ASSERT_TRUE(store->PutTask("t1", "task one", std::string("result one")).ok());
    ASSERT_TRUE(store->PutTask("t2", "task two").ok());
    ASSERT_TRUE(store->PutMeta("node_id", "abc").ok());
  }
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto got = store->GetBlob(Sha256Of(data), 10 * kMiB);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == data);
  auto t1 = store->GetTask("t1");
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(t1->value_or(""), "task one");
  auto r1 = store->GetResult("t1");
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->value_or(""), "result one");
  auto r2 = store->GetResult("t2");
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->has_value());
  auto m = store->GetMeta("node_id");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->value_or(""), "abc");
  auto schema = store->GetMeta("schema_version");
  ASSERT_TRUE(schema.ok());
  EXPECT_EQ(schema->value_or(""), "1");
  auto st = store->GetStats();
  EXPECT_EQ(st.blob_count, 1);
  EXPECT_EQ(st.blob_bytes, static_cast<int64_t>(data.size()));
  EXPECT_EQ(st.task_count, 2);
  // New uploads after reopen do not collide with the old one.
  auto data2 = Pattern(static_cast<size_t>(kMiB + 1), 12);
  ASSERT_TRUE(store->PutBlob(data2).ok());
  auto again = store->GetBlob(Sha256Of(data), 10 * kMiB);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == data);
}

TEST_F(StoreTest, CrashMidUploadIsGarbageCollectedOnOpen) {
  pid_t pid = SpawnChild("crash:" + path_);
  ASSERT_GT(pid, 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) << "child status " << wstatus;
  {
    // The crash left the interrupted upload behind: 2 chunks of the committed blob, 2 of the
    // interrupted one (its half chunk was still buffered), and its marker.
    RawDb raw(path_, /*read_only=*/true);
    ASSERT_TRUE(raw.ok());
    EXPECT_EQ(raw.BlobKeys('c').size(), 4u);
    EXPECT_EQ(raw.BlobKeys('u').size(), 1u);
  }
  auto committed = Pattern(static_cast<size_t>(kMiB + kMiB / 2), 7);
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->GetStats().blob_count, 1);
    auto got = store->GetBlob(Sha256Of(committed), 10 * kMiB);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == committed);
    // A new upload gets a fresh id and does not disturb the committed blob.
    ASSERT_TRUE(store->PutBlob(Pattern(static_cast<size_t>(kMiB + 3), 99)).ok());
    auto still = store->GetBlob(Sha256Of(committed), 10 * kMiB);
    ASSERT_TRUE(still.ok());
    EXPECT_TRUE(*still == committed);
  }
  RawDb raw(path_, /*read_only=*/true);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw.BlobKeys('c').size(), 4u);  // 2 committed + 2 of the new blob
  EXPECT_TRUE(raw.BlobKeys('u').empty());
}

TEST_F(StoreTest, SecondOpenInSameProcessFails) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto second = OpenRocksDbStore(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("is in use"), std::string::npos) << second.status().message();
  store.reset();
  EXPECT_TRUE(OpenRocksDbStore(path_).ok());
}

TEST_F(StoreTest, OpenHeldByAnotherProcessFails) {
  pid_t pid = SpawnChild("hold:" + path_);
  ASSERT_GT(pid, 0);
  const std::string ready = path_ + ".ready";
  bool up = false;
  for (int i = 0; i < 400 && !up; ++i) {
    up = std::filesystem::exists(ready);
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (up) {
    auto second = OpenRocksDbStore(path_);
    EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("in use by another process"), std::string::npos)
        << second.status().message();
  }
  kill(pid, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(up) << "child never opened the store";
  // The kernel drops the lock with the process.
  EXPECT_TRUE(OpenRocksDbStore(path_).ok());
}

TEST_F(StoreTest, CorruptedChunksAreDataLoss) {
  auto changed = Pattern(static_cast<size_t>(2 * kMiB + 100), 21);
  auto truncated = Pattern(static_cast<size_t>(2 * kMiB + 100), 22);
  auto missing = Pattern(static_cast<size_t>(2 * kMiB + 100), 23);
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    for (auto* d : {&changed, &truncated, &missing}) ASSERT_TRUE(store->PutBlob(*d).ok());
  }
  {
    RawDb raw(path_);
    ASSERT_TRUE(raw.ok());
    rocksdb::WriteOptions wo;
    wo.sync = true;
    // Same length, one flipped byte in the middle chunk.
    std::string chunk(reinterpret_cast<const char*>(changed.data()) + kMiB, static_cast<size_t>(kMiB));
    chunk[1000] ^= 0x01;
    ASSERT_TRUE(raw.db()->Put(wo, raw.cf("blobs"), RawDb::ChunkKey(raw.UploadIdOf(Sha256Of(changed)), 1), chunk).ok());
    // Last chunk cut short.
    ASSERT_TRUE(raw.db()->Put(wo, raw.cf("blobs"), RawDb::ChunkKey(raw.UploadIdOf(Sha256Of(truncated)), 2), "xy").ok());
    ASSERT_TRUE(raw.db()->Delete(wo, raw.cf("blobs"), RawDb::ChunkKey(raw.UploadIdOf(Sha256Of(missing)), 0)).ok());
  }
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  for (auto* d : {&changed, &truncated, &missing}) {
    const Hash256 h = Sha256Of(*d);
    ReadResult r = ReadAll(*store, h);
    EXPECT_EQ(r.status.code(), StatusCode::kDataLoss) << r.status.ToString();
    auto got = store->GetBlob(h, 10 * kMiB);
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
    for (size_t p : r.pieces) EXPECT_LE(p, static_cast<size_t>(kMiB));
  }
}

TEST_F(StoreTest, NewerSchemaIsRefused) {
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->PutMeta("schema_version", "2").code(), StatusCode::kInvalidArgument);
  }
  {
    RawDb raw(path_);
    ASSERT_TRUE(raw.ok());
    rocksdb::WriteOptions wo;
    wo.sync = true;
    ASSERT_TRUE(raw.db()->Put(wo, raw.cf("meta"), "schema_version", "2").ok());
  }
  auto s = OpenRocksDbStore(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("schema version 2"), std::string::npos) << s.status().message();
}

TEST_F(StoreTest, UnusablePathIsAnError) {
  const std::string file = root_ + "/plain_file";
  int fd = ::open(file.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto s = OpenRocksDbStore(file);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(OpenRocksDbStore("").ok());
  StoreOptions bad;
  bad.block_cache_bytes = -1;
  EXPECT_EQ(OpenRocksDbStore(path_, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, PutTaskWritesTaskAndResultTogether) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto unknown = store->GetTask("nope");
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE(unknown->has_value());
  EXPECT_EQ(store->PutTask("", "x").code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(store->PutTask("a", "pending").ok());
  EXPECT_FALSE(store->GetResult("a")->has_value());
  ASSERT_TRUE(store->PutTask("a", "final", std::string("result-a")).ok());
  EXPECT_EQ(store->GetTask("a")->value_or(""), "final");
  EXPECT_EQ(store->GetResult("a")->value_or(""), "result-a");
  // A later update without a result keeps the stored result.
  ASSERT_TRUE(store->PutTask("a", "final-2").ok());
  EXPECT_EQ(store->GetTask("a")->value_or(""), "final-2");
  EXPECT_EQ(store->GetResult("a")->value_or(""), "result-a");
  // Binary-safe records.
  const std::string bin("\0\x01\xff", 3);
  ASSERT_TRUE(store->PutTask("b", bin, bin).ok());
  EXPECT_EQ(store->GetTask("b")->value_or(""), bin);
  EXPECT_EQ(store->GetStats().task_count, 2);
}

// CreateTask writes only a task the store does not have: a second create, and every create
// racing with it, is ALREADY_EXISTS and leaves the first record and the counts as they were
// (TaskManager::Submit relies on it instead of reading the record again before its write).
TEST_F(StoreTest, CreateTaskWritesOnlyANewTaskEvenWhenCreatorsRace) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CreateTask("", "x").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->CreateTask("a", "first").ok());
  EXPECT_EQ(store->CreateTask("a", "second").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store->CreateTask("a", "third", Durability::kDeferred).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*store->GetTask("a").value(), "first");
  ASSERT_TRUE(store->PutTask("b", "put", std::string("result-b")).ok());
  EXPECT_EQ(store->CreateTask("b", "create").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*store->GetTask("b").value(), "put");
  EXPECT_EQ(store->GetStats().task_count, 2);

  constexpr int kThreads = 4;
  constexpr int kTasks = 50;
  std::atomic<int> created{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasks; ++i) {
        Status s = store->CreateTask("race-" + std::to_string(i), "from " + std::to_string(t),
                                     t % 2 ? Durability::kDeferred : Durability::kSynced);
        if (s.ok()) {
          created++;
        } else if (s.code() != StatusCode::kAlreadyExists) {
          failures++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(created.load(), kTasks);  // one creator per task
  EXPECT_EQ(store->GetStats().task_count, kTasks + 2);
  store.reset();
  store = MustOpen(path_);  // the reopen scan agrees with the live count
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->GetStats().task_count, kTasks + 2);
  EXPECT_EQ(*store->GetTask("a").value(), "first");
}

TEST_F(StoreTest, ForEachTaskVisitsInKeyOrder) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  for (const char* id : {"m", "b", "z", "a", "ab"}) ASSERT_TRUE(store->PutTask(id, std::string("rec-") + id).ok());
  std::vector<std::string> seen;
  ASSERT_TRUE(store
                  ->ForEachTask([&seen](const std::string& id, const std::string& rec) {
                    EXPECT_EQ(rec, "rec-" + id);
                    seen.push_back(id);
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "ab", "b", "m", "z"}));
  int visited = 0;
  Status s = store->ForEachTask(
      [&visited](const std::string&, const std::string&) { return ++visited == 2 ? Aborted("enough") : OkStatus(); });
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(visited, 2);
}

TEST_F(StoreTest, ConcurrentWritersKeepExactAccounting) {
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 4;
  const auto shared = Pattern(static_cast<size_t>(kMiB + 10), 1000);
  std::atomic<int> fresh_shared{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto data = Pattern(static_cast<size_t>(200000 + 150000 * i + t), static_cast<uint64_t>(t * 100 + i));
        auto info = store->PutBlob(data, Sha256Of(data));
        if (!info.ok() || info->already_present) failures++;
        // Every thread also writes the same task ids.
        if (!store->PutTask("task-" + std::to_string(i), "from " + std::to_string(t)).ok()) failures++;
      }
      auto s = store->PutBlob(shared);
      if (!s.ok()) {
        failures++;
      } else if (!s->already_present) {
        fresh_shared++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(fresh_shared.load(), 1);
  auto st = store->GetStats();
  EXPECT_EQ(st.blob_count, kThreads * kPerThread + 1);
  EXPECT_EQ(st.task_count, kPerThread);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      auto data = Pattern(static_cast<size_t>(200000 + 150000 * i + t), static_cast<uint64_t>(t * 100 + i));
      auto got = store->GetBlob(Sha256Of(data), 10 * kMiB);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(*got == data);
    }
  }
  // The reopen scan agrees with the live counters.
  int64_t bytes = st.blob_bytes;
  store.reset();
  store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->GetStats().blob_count, kThreads * kPerThread + 1);
  EXPECT_EQ(store->GetStats().blob_bytes, bytes);
  EXPECT_EQ(store->GetStats().task_count, kPerThread);
}

}  // namespace
}  // namespace consensor::node

namespace consensor::node {
namespace {

// Deletion for retention: blobs and tasks go with their chunks and results, the byte counts
// follow (and are the same after a reopen), a reader that started before a delete still gets
// the whole blob, and ForEachBlob orders blobs by upload.
TEST_F(StoreTest, DeleteBlobAndTaskKeepCountsExactAcrossReopen) {
  const auto big = Pattern(static_cast<size_t>(3 * kMiB + 5), 1);  // several chunks
  const auto small = Pattern(100, 2);
  Hash256 big_hash{}, small_hash{};
  {
    auto store = MustOpen(path_);
    ASSERT_NE(store, nullptr);
    const uint64_t first_id = store->NextUploadId();
    big_hash = store->PutBlob(big)->sha256;
    small_hash = store->PutBlob(small)->sha256;
    EXPECT_GT(store->NextUploadId(), first_id);
    std::vector<std::pair<Hash256, uint64_t>> seen;
    ASSERT_TRUE(store
                    ->ForEachBlob([&](const Hash256& h, int64_t size, uint64_t id) {
                      EXPECT_EQ(size, h == big_hash ? static_cast<int64_t>(big.size()) : 100);
                      EXPECT_GE(id, first_id);
                      seen.emplace_back(h, id);
                      return OkStatus();
                    })
                    .ok());
    ASSERT_EQ(seen.size(), 2u);
    std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    EXPECT_EQ(seen[0].first, big_hash);  // uploaded first

    ASSERT_TRUE(store->PutTask("t1", std::string(50, 'r'), std::string(30, 's')).ok());
    ASSERT_TRUE(store->PutTask("t1", std::string(70, 'r')).ok());  // rewrite: counted once
    ASSERT_TRUE(store->PutTask("t2", std::string(10, 'r')).ok());
    auto st = store->GetStats();
    EXPECT_EQ(st.task_bytes, (2 + 70) + (2 + 10));
    EXPECT_EQ(st.result_bytes, 2 + 30);

    // A read that is streaming when the blob is deleted still gets all of it.
    bool deleted_mid_read = false;
    std::vector<uint8_t> got;
    Status read = store->ReadBlob(big_hash, [&](std::span<const uint8_t> piece) {
      if (!deleted_mid_read) {
        EXPECT_TRUE(store->DeleteBlob(big_hash).ok());
        deleted_mid_read = true;
      }
      got.insert(got.end(), piece.begin(), piece.end());
      return OkStatus();
    });
    ASSERT_TRUE(read.ok()) << read.ToString();
    EXPECT_TRUE(got == big);
    EXPECT_EQ(store->BlobSize(big_hash).status().code(), StatusCode::kNotFound);
    EXPECT_TRUE(store->DeleteBlob(big_hash).ok());  // absent: OK
    ASSERT_TRUE(store->DeleteTask("t1").ok());
    EXPECT_TRUE(store->DeleteTask("t1").ok());
    EXPECT_FALSE(store->GetTask("t1")->has_value());
    EXPECT_FALSE(store->GetResult("t1")->has_value());
    st = store->GetStats();
    EXPECT_EQ(st.blob_count, 1);
    EXPECT_EQ(st.blob_bytes, 100);
    EXPECT_EQ(st.task_count, 1);
    EXPECT_EQ(st.task_bytes, 2 + 10);
    EXPECT_EQ(st.result_bytes, 0);
  }
  auto store = MustOpen(path_);
  ASSERT_NE(store, nullptr);
  auto st = store->GetStats();
  EXPECT_EQ(st.blob_count, 1);
  EXPECT_EQ(st.blob_bytes, 100);
  EXPECT_EQ(st.task_count, 1);
  EXPECT_EQ(st.task_bytes, 2 + 10);
  EXPECT_EQ(st.result_bytes, 0);
  EXPECT_EQ(store->BlobSize(big_hash).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->GetBlob(small_hash, 100).ok());
  // The same content uploaded again is stored anew.
  auto again = store->PutBlob(big);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->already_present);
  EXPECT_TRUE(*store->GetBlob(big_hash, static_cast<int64_t>(big.size())) == big);
}

}  // namespace
}  // namespace consensor::node
