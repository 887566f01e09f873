// Adoption jobs (storing an announced task) and member fetches (a committee member fetching the
// task's blobs before it executes), on threads of their own so that a slow fetch never holds up
// evidence, result fetches or other engine jobs.
//
// Member work comes first: a worker takes a queued member job (in announcer turn) before any
// adoption job, and each kind has its own bounds, so a flood of announcements cannot refuse or
// delay the fetches this node needs to execute as a member.
//
// Any registered operator can announce tasks whose blobs it serves at a trickle or never. The
// queue is bounded (in total and per announcer) and fair: each announcer has at most one job
// running, and workers take announcers in turn, so one announcer's stuck fetches occupy one
// thread at most, and the other announcers' tasks are adopted meanwhile on the others. An
// attacker needs one registered (staked) operator per thread it wants to hold.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"

namespace consensor::node {

struct AdoptionQueueLimits {
  int threads = 4;
  size_t max_pending = 1024;              // queued jobs of one kind, all announcers together
  size_t max_pending_per_announcer = 64;  // queued jobs of one kind of one announcer
};

enum class AdoptionPriority {
  kMember,    // a committee (or dispute) member's fetch: before anything else
  kAdoption,  // storing an announcement
};

class AdoptionQueue {
 public:
  explicit AdoptionQueue(AdoptionQueueLimits limits = {}) : limits_(limits) {}
  ~AdoptionQueue() { Shutdown(); }
  AdoptionQueue(const AdoptionQueue&) = delete;
  AdoptionQueue& operator=(const AdoptionQueue&) = delete;

  void Start();
  // Queued jobs are dropped; running ones finish first (they are joined).
  void Shutdown();

  // Queues `job` for `announcer`. RESOURCE_EXHAUSTED (nothing queued) over either bound of its
  // priority; UNAVAILABLE after Shutdown.
  Status Add(const Address20& announcer, std::function<void()> job,
             AdoptionPriority priority = AdoptionPriority::kAdoption);

  size_t pending() const;

 private:
  struct Lanes {
    std::deque<std::function<void()>> member;
    std::deque<std::function<void()>> adoption;
    bool empty() const { return member.empty() && adoption.empty(); }
  };
  void Work();
  // The next announcer in turn after `last_` with a queued job of the lane `member` picks and
  // none running; mu_ held.
  std::map<Address20, Lanes>::iterator NextLocked(bool member);

  const AdoptionQueueLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Address20, Lanes> queued_;
  std::set<Address20> running_;
  Address20 last_{};
  size_t pending_ = 0;          // both kinds
  size_t pending_members_ = 0;  // member jobs among them
  bool started_ = false;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace consensor::node
