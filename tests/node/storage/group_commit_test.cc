// Tests for node/storage/group_commit.h with a scripted group writer (no RocksDB): grouping,
// error propagation to exactly the waiters of the failed group, and Close with writers pending.
#include "node/storage/group_commit.h"

#include <gtest/gtest.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace consensor::node {
namespace {

// A group writer whose calls a test can hold, fail, and inspect.
class ScriptedWriter {
 public:
  GroupCommitter::WriteGroupFn Fn() {
    return [this](std::span<rocksdb::WriteBatch* const> batches) -> Status {
      std::unique_lock<std::mutex> lock(mu_);
      groups_.emplace_back(batches.begin(), batches.end());
      const int call = ++calls_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !hold_; });
      Status result = call == fail_call_ ? Internal("disk on fire") : OkStatus();
      if (result.ok()) {
        for (rocksdb::WriteBatch* b : batches) durable_.insert(b);
      }
      return result;
    };
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  // The n-th group write (from 1) fails.
  void FailCall(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_call_ = n;
  }
  void WaitForCalls(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return calls_ >= n; });
  }
  bool IsDurable(rocksdb::WriteBatch* b) {
    std::lock_guard<std::mutex> lock(mu_);
    return durable_.count(b) > 0;
  }
  std::vector<std::vector<rocksdb::WriteBatch*>> Groups() {
    std::lock_guard<std::mutex> lock(mu_);
    return groups_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  int fail_call_ = 0;
  int calls_ = 0;
  std::vector<std::vector<rocksdb::WriteBatch*>> groups_;
  std::set<rocksdb::WriteBatch*> durable_;
};

// Waits (without a time limit: a hang is the failure) until `n` commits are queued behind the
// group in flight.
void WaitForWaiting(const GroupCommitter& committer, int n) {
  while (committer.waiting() < n) std::this_thread::yield();
}

TEST(GroupCommitTest, LoneWriterIsItsOwnGroup) {
  ScriptedWriter writer;
  GroupCommitter committer(writer.Fn());
  rocksdb::WriteBatch batch;
  EXPECT_TRUE(committer.Commit(&batch).ok());
  EXPECT_TRUE(writer.IsDurable(&batch));
  ASSERT_EQ(writer.Groups().size(), 1u);
  EXPECT_EQ(writer.Groups()[0], std::vector<rocksdb::WriteBatch*>{&batch});
  EXPECT_EQ(committer.GetStats().groups, 1);
  EXPECT_EQ(committer.GetStats().batches, 1);
}

TEST(GroupCommitTest, WritersThatArriveDuringASyncShareTheNextOne) {
  ScriptedWriter writer;
  GroupCommitter committer(writer.Fn());
  writer.Hold();
  rocksdb::WriteBatch first;
  std::thread leader([&] { EXPECT_TRUE(committer.Commit(&first).ok()); });
  writer.WaitForCalls(1);

  constexpr int kWriters = 6;
  std::vector<rocksdb::WriteBatch> batches(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      EXPECT_TRUE(committer.Commit(&batches[i]).ok());
      // Acknowledged only once the write that carried it is durable.
      EXPECT_TRUE(writer.IsDurable(&batches[i]));
    });
  }
  WaitForWaiting(committer, kWriters);
  writer.Release();
  leader.join();
  for (auto& t : threads) t.join();

  auto groups = writer.Groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], std::vector<rocksdb::WriteBatch*>{&first});
  std::set<rocksdb::WriteBatch*> second(groups[1].begin(), groups[1].end());
  EXPECT_EQ(groups[1].size(), static_cast<size_t>(kWriters));
  for (auto& b : batches) EXPECT_EQ(second.count(&b), 1u);
  EXPECT_EQ(committer.GetStats().groups, 2);
  EXPECT_EQ(committer.GetStats().batches, kWriters + 1);
}

TEST(GroupCommitTest, FailedGroupWriteReachesEachOfItsWaiters) {
  ScriptedWriter writer;
  GroupCommitter committer(writer.Fn());
  writer.Hold();
  rocksdb::WriteBatch first;
  Status first_status;
  std::thread leader([&] { first_status = committer.Commit(&first); });
  writer.WaitForCalls(1);

  constexpr int kWriters = 5;
  std::vector<rocksdb::WriteBatch> batches(kWriters);
  std::vector<Status> results(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) threads.emplace_back([&, i] { results[i] = committer.Commit(&batches[i]); });
  WaitForWaiting(committer, kWriters);
  writer.FailCall(2);  // the first group succeeds, the second (every other writer) fails
  writer.Release();
  leader.join();
  for (auto& t : threads) t.join();
  EXPECT_TRUE(first_status.ok());
  EXPECT_TRUE(writer.IsDurable(&first));
  ASSERT_EQ(writer.Groups().size(), 2u);
  EXPECT_EQ(writer.Groups()[1].size(), static_cast<size_t>(kWriters));
  for (int i = 0; i < kWriters; ++i) {
    EXPECT_EQ(results[i].code(), StatusCode::kInternal) << i << ": " << results[i].ToString();
    EXPECT_NE(results[i].message().find("disk on fire"), std::string::npos);
    EXPECT_FALSE(writer.IsDurable(&batches[i]));
  }
  // The committer goes on: the next commit is a new group.
  rocksdb::WriteBatch after;
  EXPECT_TRUE(committer.Commit(&after).ok());
  EXPECT_TRUE(writer.IsDurable(&after));
}

TEST(GroupCommitTest, CloseWritesPendingCommitsThenRefusesNewOnes) {
  ScriptedWriter writer;
  auto committer = std::make_unique<GroupCommitter>(writer.Fn());
  writer.Hold();
  rocksdb::WriteBatch first;
  std::thread leader([&] { EXPECT_TRUE(committer->Commit(&first).ok()); });
  writer.WaitForCalls(1);
  constexpr int kWriters = 4;
  std::vector<rocksdb::WriteBatch> batches(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      EXPECT_TRUE(committer->Commit(&batches[i]).ok());
      EXPECT_TRUE(writer.IsDurable(&batches[i]));
    });
  }
  WaitForWaiting(*committer, kWriters);
  std::atomic<bool> closed{false};
  std::thread closer([&] {
    committer->Close();
    closed = true;
  });
  // Close must not return while commits it accepted are unwritten.
  while (!committer->closing()) std::this_thread::yield();
  EXPECT_FALSE(closed.load());
  rocksdb::WriteBatch late;
  EXPECT_EQ(committer->Commit(&late).code(), StatusCode::kUnavailable);
  writer.Release();
  closer.join();
  leader.join();
  for (auto& t : threads) t.join();
  EXPECT_TRUE(closed.load());
  EXPECT_FALSE(writer.IsDurable(&late));
  committer.reset();  // the destructor's Close returns at once
}

TEST(GroupCommitTest, ManyThreadsEachBatchWrittenOnceAndAcknowledgedAfterIt) {
  ScriptedWriter writer;
  GroupCommitter committer(writer.Fn());
  constexpr int kThreads = 8, kPerThread = 200;
  std::vector<std::vector<rocksdb::WriteBatch>> batches(kThreads, std::vector<rocksdb::WriteBatch>(kPerThread));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!committer.Commit(&batches[t][i]).ok() || !writer.IsDurable(&batches[t][i])) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::map<rocksdb::WriteBatch*, int> seen;
  for (const auto& group : writer.Groups()) {
    for (auto* b : group) ++seen[b];
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
  for (const auto& [b, n] : seen) EXPECT_EQ(n, 1);
  const auto stats = committer.GetStats();
  EXPECT_EQ(stats.batches, kThreads * kPerThread);
  EXPECT_LE(stats.groups, stats.batches);
}

TEST(GroupCommitTest, NullBatchWaitsForASync) {
  ScriptedWriter writer;
  GroupCommitter committer(writer.Fn());
  EXPECT_TRUE(committer.Commit(nullptr).ok());
  ASSERT_EQ(writer.Groups().size(), 1u);
  EXPECT_EQ(writer.Groups()[0], std::vector<rocksdb::WriteBatch*>{nullptr});
}

}  // namespace
}  // namespace consensor::node
