#include "node/storage/group_commit.h"

#include <utility>
#include <vector>

namespace consensor::node {

struct GroupCommitter::Waiter {
  rocksdb::WriteBatch* batch = nullptr;
  Status status;
  bool done = false;
  // One per waiter, so finishing a group wakes its waiters and the next leader, nobody else.
  std::condition_variable cv;
};

GroupCommitter::GroupCommitter(WriteGroupFn write_group) : write_group_(std::move(write_group)) {}

GroupCommitter::~GroupCommitter() { Close(); }

Status GroupCommitter::Commit(rocksdb::WriteBatch* batch) {
  Waiter self;
  self.batch = batch;
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return Unavailable("the store is closing");
  queue_.push_back(&self);
  self.cv.wait(lock, [&] { return self.done || (!writing_ && queue_.front() == &self); });
  if (self.done) return self.status;

  // Leader: take everything waiting now, write it with one sync, release the group.
  writing_ = true;
  std::vector<Waiter*> group(queue_.begin(), queue_.end());
  queue_.clear();
  lock.unlock();
  std::vector<rocksdb::WriteBatch*> batches;
  batches.reserve(group.size());
  for (Waiter* w : group) batches.push_back(w->batch);
  Status written = write_group_(std::span<rocksdb::WriteBatch* const>(batches));
  lock.lock();
  ++stats_.groups;
  stats_.batches += static_cast<int64_t>(group.size());
  for (Waiter* w : group) {
    w->status = written;
    w->done = true;
    // Under the lock: once done is seen the waiter returns and its condition variable is gone.
    if (w != &self) w->cv.notify_one();
  }
  writing_ = false;
  if (!queue_.empty()) {
    queue_.front()->cv.notify_one();  // it leads the next group
  } else {
    idle_cv_.notify_all();
  }
  return written;
}

void GroupCommitter::Close() {
  std::unique_lock<std::mutex> lock(mu_);
  closed_ = true;
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

GroupCommitter::Stats GroupCommitter::GetStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int GroupCommitter::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

bool GroupCommitter::closing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

}  // namespace consensor::node
