#include "node/engine/remote_outputs.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>

#include "common/clock.h"
#include "node/telemetry/log.h"

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

std::string BackoffKey(const Hash256& blob) { return RemoteOutputs::kBackoffPrefix + ToHex(blob); }

// A persisted backoff: "<failures> <retry unix ms>\n<failure text>".
std::string EncodeBackoff(uint32_t failures, int64_t retry_unix_ms, const std::string& failure) {
  return std::to_string(failures) + " " + std::to_string(retry_unix_ms) + "\n" +
         failure.substr(0, RemoteOutputs::kMaxPersistedFailureText);
}

bool DecodeBackoff(const std::string& value, uint32_t* failures, int64_t* retry_unix_ms, std::string* failure) {
  const size_t space = value.find(' ');
  const size_t newline = value.find('\n');
  if (space == std::string::npos || newline == std::string::npos || space > newline) return false;
  const char* begin = value.data();
  auto f = std::from_chars(begin, begin + space, *failures);
  auto r = std::from_chars(begin + space + 1, begin + newline, *retry_unix_ms);
  if (f.ec != std::errc() || f.ptr != begin + space || r.ec != std::errc() || r.ptr != begin + newline) return false;
  if (*failures == 0) return false;
  *failure = value.substr(newline + 1, RemoteOutputs::kMaxPersistedFailureText);
  return true;
}

}  // namespace

RemoteOutputs::RemoteOutputs(RemoteOutputLimits limits, MetricsRegistry* metrics, Clock now, Store* store,
                             WallClock wall)
    : limits_(limits), now_(std::move(now)), store_(store), wall_(wall ? std::move(wall) : WallClock(UnixMillisNow)) {
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
  persisted_gauge_ = metrics->AddGauge("consensor_output_backoffs_persisted",
                                       "Output fetch backoffs kept in the store across restarts.");
  not_persisted_ = metrics->AddCounter(
      "consensor_output_backoffs_not_persisted_total",
      "Output fetch backoffs kept in memory only: the store's rows were at outputs.max_persisted_backoffs.");
}

Status RemoteOutputs::LoadBackoffs() {
  if (store_ == nullptr) return OkStatus();
  struct Row {
    std::string key;
    std::string value;
  };
  std::vector<Row> rows;
  RETURN_IF_ERROR(store_->ForEachMeta(kBackoffPrefix, [&](const std::string& key, const std::string& value) {
    rows.push_back({key, value});
    return OkStatus();
  }));
  int64_t restored = 0, dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t wall_now = wall_();
    const auto now = now_();
    for (const Row& row : rows) {
      uint32_t failures = 0;
      int64_t retry_unix_ms = 0;
      std::string failure;
      auto blob = Hash256FromHex(std::string_view(row.key).substr(std::string_view(kBackoffPrefix).size()));
      auto it = blob.ok() ? entries_.find(*blob) : entries_.end();
      const bool keep = it != entries_.end() && DecodeBackoff(row.value, &failures, &retry_unix_ms, &failure) &&
                        retry_unix_ms > wall_now && persisted_.size() < limits_.max_persisted_backoffs;
      if (!keep) {
        store_writes_.push_back({row.key, std::nullopt});
        ++dropped;
        continue;
      }
      Entry& e = it->second;
      // The wall clock dates the row; a clock set back cannot stretch it past the maximum.
      const auto wait = std::min(std::chrono::milliseconds(retry_unix_ms - wall_now), limits_.backoff_max);
      e.failures = failures;
      e.retry_at = now + wait;
      bytes_ -= CostOf(e);
      e.last_failure = failure;
      bytes_ += CostOf(e);
      persisted_[*blob] = retry_unix_ms;
      ++restored;
    }
    EnforceBoundsLocked();
    UpdateGaugesLocked();
  }
  FlushStoreWrites();
  if (!rows.empty()) {
    Log(LogLevel::kInfo, "output fetch backoffs reloaded", {{"restored", restored}, {"dropped", dropped}});
  }
  return OkStatus();
}

void RemoteOutputs::PersistLocked(const Hash256& blob, const Entry& e, int64_t retry_unix_ms) {
  if (store_ == nullptr || limits_.max_persisted_backoffs == 0) return;
  if (!persisted_.count(blob) && persisted_.size() >= limits_.max_persisted_backoffs) {
    const int64_t wall_now = wall_();
    for (auto it = persisted_.begin(); it != persisted_.end();) {
      if (it->second > wall_now) {
        ++it;
        continue;
      }
      store_writes_.push_back({BackoffKey(it->first), std::nullopt});
      it = persisted_.erase(it);
    }
    if (persisted_.size() >= limits_.max_persisted_backoffs) {
      not_persisted_->Increment();
      return;
    }
  }
  persisted_[blob] = retry_unix_ms;
  store_writes_.push_back({BackoffKey(blob), EncodeBackoff(e.failures, retry_unix_ms, e.last_failure)});
}

void RemoteOutputs::FlushStoreWrites() {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> order(store_write_mu_);
  std::vector<StoreWrite> writes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writes.swap(store_writes_);
  }
  for (const StoreWrite& w : writes) {
    // A lost write costs one more round of dials after a restart, or a stale row dropped at the
    // next load: logged, never a failure of the request that caused it.
    Status s = w.value ? store_->PutMeta(w.key, *w.value) : store_->DeleteMeta(w.key);
    if (!s.ok())
      Log(LogLevel::kWarn, "cannot persist an output fetch backoff", {{"key", w.key}, {"error", s.ToString()}});
  }
}

void RemoteOutputs::UpdateGaugesLocked() {
  in_flight_gauge_->Set(static_cast<double>(flights_.size()));
  persisted_gauge_->Set(static_cast<double>(persisted_.size()));
  entries_gauge_->Set(static_cast<double>(entries_.size()));
  bytes_gauge_->Set(static_cast<double>(bytes_));
}

void RemoteOutputs::EraseLocked(std::map<Hash256, Entry>::iterator it) {
  if (persisted_.erase(it->first) > 0) store_writes_.push_back({BackoffKey(it->first), std::nullopt});
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
  AddEntries(task, blobs);
  FlushStoreWrites();
}

void RemoteOutputs::AddEntries(const consensus::TaskId& task, const std::vector<Hash256>& blobs) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto t = by_task_.find(task);
    if (t == by_task_.end()) return;
    const std::vector<Hash256> blobs = t->second;
    for (const Hash256& blob : blobs) {
      if (auto it = entries_.find(blob); it != entries_.end()) EraseLocked(it);
    }
    UpdateGaugesLocked();
  }
  FlushStoreWrites();
}

void RemoteOutputs::Remove(const consensus::TaskId& task, const std::vector<Hash256>& blobs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Hash256& blob : blobs) {
      if (auto it = entries_.find(blob); it != entries_.end() && it->second.task == task) EraseLocked(it);
    }
    UpdateGaugesLocked();
  }
  FlushStoreWrites();
}

size_t RemoteOutputs::persisted_backoffs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return persisted_.size();
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
        PersistLocked(blob, e, wall_() + backoff.count());
        EnforceBoundsLocked();
      }
    }
    UpdateGaugesLocked();
  }
  flight_done_.notify_all();
  FlushStoreWrites();
}

}  // namespace consensor::node
