#include "node/engine/adoption_queue.h"

#include <algorithm>
#include <string>

namespace consensor::node {

void AdoptionQueue::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  for (int i = 0; i < std::max(limits_.threads, 1); ++i) workers_.emplace_back([this] { Work(); });
}

void AdoptionQueue::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    queued_.clear();
    pending_ = 0;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

Status AdoptionQueue::Add(const Address20& announcer, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the node is shutting down");
    if (pending_ >= limits_.max_pending) {
      return ResourceExhausted("the adoption queue is full (" + std::to_string(pending_) + " announcements waiting)");
    }
    auto& mine = queued_[announcer];
    if (mine.size() >= limits_.max_pending_per_announcer) {
      return ResourceExhausted("this announcer already has " + std::to_string(mine.size()) +
                               " announcements waiting for adoption");
    }
    mine.push_back(std::move(job));
    ++pending_;
  }
  cv_.notify_one();
  return OkStatus();
}

size_t AdoptionQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

std::map<Address20, std::deque<std::function<void()>>>::iterator AdoptionQueue::NextLocked() {
  const auto eligible = [&](const auto& entry) { return !entry.second.empty() && !running_.contains(entry.first); };
  auto after = std::find_if(queued_.upper_bound(last_), queued_.end(), eligible);
  if (after != queued_.end()) return after;
  auto before = std::find_if(queued_.begin(), queued_.upper_bound(last_), eligible);
  return before == queued_.upper_bound(last_) ? queued_.end() : before;
}

void AdoptionQueue::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto next = queued_.end();
    cv_.wait(lock, [&] {
      if (stopping_) return true;
      next = NextLocked();
      return next != queued_.end();
    });
    if (stopping_) return;
    const Address20 announcer = next->first;
    std::function<void()> job = std::move(next->second.front());
    next->second.pop_front();
    if (next->second.empty()) queued_.erase(next);
    --pending_;
    running_.insert(announcer);
    last_ = announcer;
    lock.unlock();
    job();
    lock.lock();
    running_.erase(announcer);
    // The announcer's next job may be waiting for this one to end.
    cv_.notify_all();
  }
}

}  // namespace consensor::node
