#include "node/engine/remote_outputs.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "common/clock.h"

namespace consensor::node {

namespace {

constexpr size_t kMaxFailureText = 1024;  // what one entry keeps of why its last fetch failed

// "2026-11-26T13:05:07Z": when a steady-clock instant `wait` from now falls, in UTC.
std::string UtcAfter(std::chrono::milliseconds wait) {
  const int64_t at_ms = UnixMillisNow() + wait.count();
  const std::time_t seconds = static_cast<std::time_t>(at_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

RemoteOutputs::RemoteOutputs(RemoteOutputLimits limits, MetricsRegistry* metrics, Clock now)
    : limits_(limits), now_(std::move(now)) {
  started_ = metrics->AddCounter("consensor_output_fetches_started_total",
                                 "On-demand output fetches started (each tries the task's holders once).");
  coalesced_ = metrics->AddCounter("consensor_output_fetches_coalesced_total",
                                   "Client requests for an output that waited for a fetch already in flight.");
  const char* refused_help = "Client requests for an output refused without dialing anyone, by reason.";
  refused_backoff_ =
      metrics->AddCounter("consensor_output_fetches_refused_total", refused_help, {{"reason", "backoff"}});
  refused_busy_ =
      metrics->AddCounter("consensor_output_fetches_refused_total", refused_help, {{"reason", "in_flight_cap"}});
  evicted_ = metrics->AddCounter("consensor_remote_outputs_evicted_total",
                                 "Recorded remote outputs dropped to stay within outputs.max_remote_*.");
  in_flight_gauge_ = metrics->AddGauge("consensor_output_fetches_in_flight", "On-demand output fetches running now.");
  entries_gauge_ = metrics->AddGauge("consensor_remote_outputs",
                                     "Certified outputs recorded without their bytes, fetched when a client asks.");
  bytes_gauge_ = metrics->AddGauge("consensor_remote_output_bytes",
                                   "What those records cost in memory, against outputs.max_remote_bytes.");
}

void RemoteOutputs::UpdateGaugesLocked() {
  in_flight_gauge_->Set(static_cast<double>(flights_.size()));
  entries_gauge_->Set(static_cast<double>(entries_.size()));
  bytes_gauge_->Set(static_cast<double>(bytes_));
}

void RemoteOutputs::EraseLocked(std::map<Hash256, Entry>::iterator it) {
  bytes_ -= CostOf(it->second);
  by_age_.erase(it->second.age);
  if (auto t = by_task_.find(it->second.task); t != by_task_.end()) {
    std::erase(t->second, it->first);
    if (t->second.empty()) by_task_.erase(t);
  }
  entries_.erase(it);
}

void RemoteOutputs::EnforceBoundsLocked() {
  while (!by_age_.empty() && (entries_.size() > limits_.max_entries || bytes_ > limits_.max_bytes)) {
    EraseLocked(entries_.find(by_age_.begin()->second));
    evicted_->Increment();
  }
}

void RemoteOutputs::Add(const consensus::TaskId& task, const std::vector<Hash256>& blobs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Hash256& blob : blobs) {
    if (auto old = entries_.find(blob); old != entries_.end()) {
      if (old->second.task == task) continue;
      EraseLocked(old);  // the same bytes named by another task: the newest record wins
    }
    Entry e;
    e.task = task;
    e.age = next_age_++;
    bytes_ += CostOf(e);
    by_age_[e.age] = blob;
    by_task_[task].push_back(blob);
    entries_.emplace(blob, std::move(e));
  }
  EnforceBoundsLocked();
  UpdateGaugesLocked();
}

void RemoteOutputs::RemoveTask(const consensus::TaskId& task) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = by_task_.find(task);
  if (t == by_task_.end()) return;
  const std::vector<Hash256> blobs = t->second;
  for (const Hash256& blob : blobs) {
    if (auto it = entries_.find(blob); it != entries_.end()) EraseLocked(it);
  }
  UpdateGaugesLocked();
}

void RemoteOutputs::Remove(const consensus::TaskId& task, const std::vector<Hash256>& blobs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Hash256& blob : blobs) {
    if (auto it = entries_.find(blob); it != entries_.end() && it->second.task == task) EraseLocked(it);
  }
  UpdateGaugesLocked();
}

size_t RemoteOutputs::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

int64_t RemoteOutputs::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

Status RemoteOutputs::Fetch(const Hash256& blob, const std::function<Status()>& admit, const Fetcher& fetch) {
  const std::string blob_hex = ToHex(blob);
  std::shared_ptr<Flight> flight;
  consensus::TaskId task;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto joined = flights_.find(blob); joined != flights_.end()) {
      // Single-flight: wait for the fetch that is already dialing the holders.
      std::shared_ptr<Flight> running = joined->second;
      coalesced_->Increment();
      flight_done_.wait(lock, [&] { return running->done; });
      return running->result;
    }
    auto it = entries_.find(blob);
    if (it == entries_.end()) return NotFound("blob " + blob_hex + " is not stored on this node");
    Entry& e = it->second;
    const auto now = now_();
    if (e.failures > 0 && now < e.retry_at) {
      refused_backoff_->Increment();
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(e.retry_at - now);
      return Unavailable("output " + blob_hex + " of task " + e.task.Hex() + ": " + std::to_string(e.failures) +
                         " fetch" + (e.failures == 1 ? "" : "es") +
                         " from its holders failed (last: " + e.last_failure + "); this node tries again after " +
                         UtcAfter(wait) + " (in " + std::to_string((wait.count() + 999) / 1000) + " s)");
    }
    if (flights_.size() >= limits_.max_fetches_in_flight) {
      refused_busy_->Increment();
      return ResourceExhausted("this node is fetching " + std::to_string(flights_.size()) +
                               " outputs on demand, its limit (outputs.max_fetches_in_flight); retry later");
    }
    task = e.task;
    // The caller's budget, only for a request that dials: asked under the lock so that two
    // requests for one blob cannot both lead (the gate's own lock is never held around ours).
    if (admit) RETURN_IF_ERROR(admit());
    flight = std::make_shared<Flight>();
    flights_.emplace(blob, flight);
    started_->Increment();
    UpdateGaugesLocked();
  }
  Status result = fetch(task, blob);
  Finish(blob, flight, result);
  return result;
}

void RemoteOutputs::Finish(const Hash256& blob, const std::shared_ptr<Flight>& flight, const Status& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flights_.erase(blob);
    flight->done = true;
    flight->result = result;
    if (auto it = entries_.find(blob); it != entries_.end()) {
      Entry& e = it->second;
      if (result.ok() || result.code() == StatusCode::kNotFound) {
        EraseLocked(it);  // stored here now, or no longer an output this node can serve
      } else {
        // Every holder failed: back off, doubling per consecutive failure up to the maximum.
        ++e.failures;
        auto backoff = limits_.backoff;
        for (uint32_t i = 1; i < e.failures && backoff < limits_.backoff_max; ++i) backoff *= 2;
        backoff = std::min(backoff, limits_.backoff_max);
        e.retry_at = now_() + backoff;
        bytes_ -= CostOf(e);
        e.last_failure = result.message().substr(0, kMaxFailureText);
        bytes_ += CostOf(e);
        EnforceBoundsLocked();
      }
    }
    UpdateGaugesLocked();
  }
  flight_done_.notify_all();
}

}  // namespace consensor::node
