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
    pending_members_ = 0;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

Status AdoptionQueue::Add(const Address20& announcer, std::function<void()> job, AdoptionPriority priority) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the node is shutting down");
    const bool member = priority == AdoptionPriority::kMember;
    const size_t of_kind = member ? pending_members_ : pending_ - pending_members_;
    if (of_kind >= limits_.max_pending) {
      return ResourceExhausted(std::string(member ? "the member fetch queue" : "the adoption queue") + " is full (" +
                               std::to_string(of_kind) + " jobs waiting)");
    }
    auto it = queued_.find(announcer);
    const size_t mine = it == queued_.end() ? 0 : (member ? it->second.member : it->second.adoption).size();
    if (mine >= limits_.max_pending_per_announcer) {
      return ResourceExhausted("this announcer already has " + std::to_string(mine) +
                               (member ? " member fetches" : " announcements") + " waiting");
    }
    Lanes& lanes = queued_[announcer];
    (member ? lanes.member : lanes.adoption).push_back(std::move(job));
    ++pending_;
    if (member) ++pending_members_;
  }
  cv_.notify_one();
  return OkStatus();
}

size_t AdoptionQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

std::map<Address20, AdoptionQueue::Lanes>::iterator AdoptionQueue::NextLocked(bool member) {
  const auto eligible = [&](const auto& entry) {
    return !(member ? entry.second.member : entry.second.adoption).empty() && !running_.contains(entry.first);
  };
  auto after = std::find_if(queued_.upper_bound(last_), queued_.end(), eligible);
  if (after != queued_.end()) return after;
  auto before = std::find_if(queued_.begin(), queued_.upper_bound(last_), eligible);
  return before == queued_.upper_bound(last_) ? queued_.end() : before;
}

void AdoptionQueue::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto next = queued_.end();
    bool member = false;
    cv_.wait(lock, [&] {
      if (stopping_) return true;
      member = true;  // member work first
      next = NextLocked(member);
      if (next != queued_.end()) return true;
      member = false;
      next = NextLocked(member);
      return next != queued_.end();
    });
    if (stopping_) return;
    const Address20 announcer = next->first;
    auto& lane = member ? next->second.member : next->second.adoption;
    std::function<void()> job = std::move(lane.front());
    lane.pop_front();
    if (next->second.empty()) queued_.erase(next);
    --pending_;
    if (member) --pending_members_;
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
