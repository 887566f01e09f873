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
// The engine rebuilds the entries from the stored results at startup. Backoffs are also kept in
// the node's store (meta rows "output_backoff/<blob>": failures, the wall-clock retry time, the
// start of the failure text), so a restart, even after SIGKILL, does not buy a flood another
// round of dials: LoadBackoffs() puts them back on the rebuilt entries. The rows are bounded
// (max_persisted_backoffs; expired rows are dropped first, and past the cap a backoff stays in
// memory only) and a row goes with its entry.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "consensus/task.h"
#include "node/engine/consensus_options.h"
#include "node/storage/store.h"
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

  using WallClock = std::function<int64_t()>;  // Unix milliseconds

  // The meta key prefix of the persisted backoffs.
  static constexpr char kBackoffPrefix[] = "output_backoff/";
  // What a persisted row keeps of the failure text.
  static constexpr size_t kMaxPersistedFailureText = 256;

  // `store` (may be null: memory only) keeps the backoffs across restarts; `wall` dates them.
  RemoteOutputs(RemoteOutputLimits limits, MetricsRegistry* metrics, Clock now, Store* store = nullptr,
                WallClock wall = nullptr);

  // At startup, after the entries are rebuilt: puts the persisted backoffs back on the recorded
  // outputs they name. Rows that expired, name no recorded output, do not parse, or exceed
  // max_persisted_backoffs are deleted. Errors only when the store cannot be read.
  Status LoadBackoffs();

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
  size_t persisted_backoffs() const;

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

  void AddEntries(const consensus::TaskId& task, const std::vector<Hash256>& blobs);  // Add without the flush
  static int64_t CostOf(const Entry& e) { return kEntryBytes + static_cast<int64_t>(e.last_failure.size()); }
  void EraseLocked(std::map<Hash256, Entry>::iterator it);
  void EnforceBoundsLocked();
  void UpdateGaugesLocked();
  void Finish(const Hash256& blob, const std::shared_ptr<Flight>& flight, const Status& result);
  // Queues the persisted row of `e`'s backoff (`retry_unix_ms`), unless the rows are at their
  // cap after dropping the expired ones.
  void PersistLocked(const Hash256& blob, const Entry& e, int64_t retry_unix_ms);
  // Runs the queued row writes and deletes, in order, outside mu_.
  void FlushStoreWrites();

  struct StoreWrite {
    std::string key;
    std::optional<std::string> value;  // none: delete
  };

  const RemoteOutputLimits limits_;
  const Clock now_;
  Store* const store_;
  const WallClock wall_;
  Counter* started_;
  Counter* coalesced_;
  Counter* refused_backoff_;
  Counter* refused_busy_;
  Counter* evicted_;
  Gauge* in_flight_gauge_;
  Gauge* entries_gauge_;
  Gauge* bytes_gauge_;
  Gauge* persisted_gauge_;
  Counter* not_persisted_;

  mutable std::mutex mu_;
  std::condition_variable flight_done_;
  std::map<Hash256, Entry> entries_;
  std::map<uint64_t, Hash256> by_age_;
  std::map<consensus::TaskId, std::vector<Hash256>> by_task_;
  // Fetches running now, by blob (apart from the entries, which may be dropped meanwhile).
  std::map<Hash256, std::shared_ptr<Flight>> flights_;
  uint64_t next_age_ = 0;
  int64_t bytes_ = 0;
  // The blobs whose backoff has a row in the store, with its retry time (Unix ms).
  std::map<Hash256, int64_t> persisted_;
  std::vector<StoreWrite> store_writes_;  // queued under mu_, run by FlushStoreWrites
  std::mutex store_write_mu_;             // keeps the runs in queue order; never taken inside mu_
};

}  // namespace consensor::node
