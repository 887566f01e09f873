// The output blobs a non-member recorded without their bytes (docs/NETWORK.md, "Certify"), and
// the on-demand fetches a client's GetBlob starts for them.
//
// Anyone who reaches the client API can ask for such an output as often as it likes, and any
// registered operator can add entries by getting tasks certified, so everything here is bounded:
//  - entries, and the bytes they cost in memory (failure texts included); the oldest recorded
//    entries are dropped first, and the engine drops a task's entries when retention deletes it;
//  - one outbound fetch per blob at a time: concurrent requests for it wait for that fetch and
//    share its outcome (single-flight);
//  - a fetch that failed on every holder puts its blob into an exponential backoff: until it
//    expires, requests for that blob fail at once with UNAVAILABLE naming the failures and the
//    retry time, and nobody is dialed;
//  - at most `max_fetches_in_flight` blobs are being fetched at once, node-wide;
//  - a request that would start a new fetch is first admitted by the caller (the client's
//    budget, node/api/client_gate.h); joining a fetch or being refused by backoff costs nothing.
// Memory only: the engine rebuilds the entries from the stored results at startup; backoffs
// start afresh.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "consensus/task.h"
#include "node/engine/consensus_options.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

class RemoteOutputs {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Fetches `blob` of `task` from its holders; OK once the checked bytes are stored here.
  using Fetcher = std::function<Status(const consensus::TaskId& task, const Hash256& blob)>;

  // What one entry costs against max_bytes besides its failure text: the blob hash and task id
  // in the three indexes (by blob, by age, by task), with their map nodes.
  static constexpr int64_t kEntryBytes = 256;

  RemoteOutputs(RemoteOutputLimits limits, MetricsRegistry* metrics, Clock now);

  // Records outputs of `task` left with their holders. Older entries are dropped to stay within
  // the bounds (a dropped output answers NOT_FOUND here; the holders still serve it).
  void Add(const consensus::TaskId& task, const std::vector<Hash256>& blobs);
  // Retention deleted the task: its entries go.
  void RemoveTask(const consensus::TaskId& task);
  // Undoes Add for these blobs if they still name `task`.
  void Remove(const consensus::TaskId& task, const std::vector<Hash256>& blobs);

  // A client asked for `blob`, which this node does not store. NOT_FOUND when it is no recorded
  // output; else joins the fetch in flight for it, or refuses at once while its backoff runs
  // (UNAVAILABLE) or while max_fetches_in_flight blobs are fetched (RESOURCE_EXHAUSTED), or
  // asks `admit` and runs `fetch` on this thread. The entry is dropped once a fetch succeeded
  // (the blob is stored) or the fetcher answered NOT_FOUND (the task is gone or was overruled).
  Status Fetch(const Hash256& blob, const std::function<Status()>& admit, const Fetcher& fetch);

  size_t entries() const;
  int64_t bytes() const;

 private:
  struct Flight {
    bool done = false;
    Status result;
  };
  struct Entry {
    consensus::TaskId task;
    uint64_t age = 0;  // insertion order: the smallest is dropped first
    // Backoff after failed fetches: consecutive failures, when the next may start, and why.
    uint32_t failures = 0;
    std::chrono::steady_clock::time_point retry_at{};
    std::string last_failure;
  };

  static int64_t CostOf(const Entry& e) { return kEntryBytes + static_cast<int64_t>(e.last_failure.size()); }
  void EraseLocked(std::map<Hash256, Entry>::iterator it);
  void EnforceBoundsLocked();
  void UpdateGaugesLocked();
  void Finish(const Hash256& blob, const std::shared_ptr<Flight>& flight, const Status& result);

  const RemoteOutputLimits limits_;
  const Clock now_;
  Counter* started_;
  Counter* coalesced_;
  Counter* refused_backoff_;
  Counter* refused_busy_;
  Counter* evicted_;
  Gauge* in_flight_gauge_;
  Gauge* entries_gauge_;
  Gauge* bytes_gauge_;

  mutable std::mutex mu_;
  std::condition_variable flight_done_;
  std::map<Hash256, Entry> entries_;
  std::map<uint64_t, Hash256> by_age_;
  std::map<consensus::TaskId, std::vector<Hash256>> by_task_;
  // Fetches running now, by blob (apart from the entries, which may be dropped meanwhile).
  std::map<Hash256, std::shared_ptr<Flight>> flights_;
  uint64_t next_age_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace consensor::node
