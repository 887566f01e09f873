// The bookkeeping shared by the node's warm-path caches (ProgramCache, InputCache): values
// keyed by a blob's SHA-256, least recently used first out, bounded by a byte budget that the
// caller prices each entry against. The caches decide what an entry costs and what may enter;
// this class only keeps the sum within the budget and counts hits, misses and evictions.
//
// Values are shared_ptrs: an evicted value stays alive for whoever still holds it.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/sha256.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

// Any of these may be null (unit tests).
struct CacheMetrics {
  Counter* hits = nullptr;
  Counter* misses = nullptr;
  Counter* evictions = nullptr;
  Gauge* bytes = nullptr;
  Gauge* entries = nullptr;
};

template <typename T>
class ByteBudgetLru {
 public:
  using Value = std::shared_ptr<const T>;

  ByteBudgetLru(int64_t budget_bytes, CacheMetrics metrics)
      : budget_bytes_(budget_bytes < 0 ? 0 : budget_bytes), metrics_(metrics) {}

  // The value of `key`, now most recently used; null on a miss.
  Value Find(const Hash256& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      Increment(metrics_.misses);
      return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second.lru_position);
    Increment(metrics_.hits);
    return it->second.value;
  }

  // Whether `key` is cached; counts no hit or miss and leaves the order as it is (a look before
  // the work that will Find it).
  bool Contains(const Hash256& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.count(key) != 0;
  }

  // Keeps `value` at `cost` bytes, evicting least recently used entries until it fits. A key
  // already present keeps its value (the caches only ever store one value per content hash)
  // and becomes most recently used. Returns false, keeping nothing, when `cost` alone is over
  // the budget.
  bool Insert(const Hash256& key, Value value, int64_t cost) {
    if (!value || cost > budget_bytes_) return false;
    std::lock_guard<std::mutex> lock(mu_);
    auto existing = entries_.find(key);
    if (existing != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, existing->second.lru_position);
      return true;
    }
    AddLocked(key, std::move(value), cost);
    return true;
  }

  // Re-prices the entry of `key` at `cost` if it still holds `expected`, evicting others until
  // it fits; it stays most recently used. Returns false when the entry is gone or holds another
  // value, or when it is now alone over the budget, in which case it is dropped.
  bool Reprice(const Hash256& key, const T* expected, int64_t cost) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.value.get() != expected || cost < 0) return false;
    if (cost == it->second.cost) return true;
    // Taken out while the others make room, so that it cannot evict itself.
    Value value = std::move(it->second.value);
    bytes_ -= it->second.cost;
    lru_.erase(it->second.lru_position);
    entries_.erase(it);
    if (cost > budget_bytes_) {
      Increment(metrics_.evictions);
      UpdateGaugesLocked();
      return false;
    }
    AddLocked(key, std::move(value), cost);
    return true;
  }

  int64_t budget_bytes() const { return budget_bytes_; }
  int64_t bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }
  size_t entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

 private:
  struct Entry {
    Value value;
    int64_t cost = 0;
    typename std::list<Hash256>::iterator lru_position;
  };

  static void Increment(Counter* counter) {
    if (counter) counter->Increment();
  }

  void AddLocked(const Hash256& key, Value value, int64_t cost) {
    while (!lru_.empty() && bytes_ + cost > budget_bytes_) {
      auto oldest = entries_.find(lru_.back());
      bytes_ -= oldest->second.cost;
      entries_.erase(oldest);
      lru_.pop_back();
      Increment(metrics_.evictions);
    }
    lru_.push_front(key);
    entries_.emplace(key, Entry{std::move(value), cost, lru_.begin()});
    bytes_ += cost;
    UpdateGaugesLocked();
  }

  void UpdateGaugesLocked() {
    if (metrics_.bytes) metrics_.bytes->Set(static_cast<double>(bytes_));
    if (metrics_.entries) metrics_.entries->Set(static_cast<double>(entries_.size()));
  }

  const int64_t budget_bytes_;
  const CacheMetrics metrics_;
  mutable std::mutex mu_;
  std::map<Hash256, Entry> entries_;
  std::list<Hash256> lru_;  // front: most recently used
  int64_t bytes_ = 0;
};

}  // namespace consensor::node
