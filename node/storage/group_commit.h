// Group commit: concurrent writers that each need a synced write share one fsync.
//
// Each caller hands in a WriteBatch and blocks. The first caller to find no group in flight
// becomes the leader: it takes every batch waiting at that moment (its own first), writes them
// with one synced write, and releases every waiter of the group with that write's status.
// Callers that arrive while a group is being written queue up and form the next group. So a
// sync costs one fsync however many writers wait for it, no thread hand-off is added when
// writers do not overlap, and every Commit returns only after the write that covers its batch
// is durable (or failed: then every waiter of that group gets the error and none of its batches
// is acknowledged).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>

#include "common/status.h"

namespace rocksdb {
class WriteBatch;
}

namespace consensor::node {

class GroupCommitter {
 public:
  // Writes the batches of one group in order with a single sync, all or nothing. A group may
  // contain null batches: those callers only wait for everything written before to be durable.
  using WriteGroupFn = std::function<Status(std::span<rocksdb::WriteBatch* const> batches)>;

  explicit GroupCommitter(WriteGroupFn write_group);
  ~GroupCommitter();  // calls Close
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Blocks until `batch` (nullptr: nothing, only a sync) is durable; returns the status of the
  // group write that carried it. UNAVAILABLE after Close.
  Status Commit(rocksdb::WriteBatch* batch);

  // Refuses new commits, and returns once the commits already waiting have been written.
  void Close();

  struct Stats {
    int64_t groups = 0;   // group writes (syncs)
    int64_t batches = 0;  // commits they carried
  };
  Stats GetStats() const;
  int waiting() const;   // commits queued behind the group being written
  bool closing() const;  // Close was called

 private:
  struct Waiter;

  const WriteGroupFn write_group_;
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;  // Close waits for the queue to drain
  std::deque<Waiter*> queue_;        // waiting, in arrival order; the front leads the next group
  bool writing_ = false;             // a leader is writing a group
  bool closed_ = false;
  Stats stats_;
};

}  // namespace consensor::node
