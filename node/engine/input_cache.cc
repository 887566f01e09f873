#include "node/engine/input_cache.h"

namespace consensor::node {

InputCache::InputCache(int64_t budget_bytes, NodeMetrics* metrics)
    : budget_bytes_(budget_bytes < 0 ? 0 : budget_bytes), max_entry_bytes_(budget_bytes_ / 4), metrics_(metrics) {}

std::shared_ptr<const Tensor> InputCache::Find(const Hash256& sha256) {
  if (budget_bytes_ == 0) return nullptr;  // disabled: neither a hit nor a miss to count
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(sha256);
  if (it == entries_.end()) {
    if (metrics_) metrics_->input_cache_misses->Increment();
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru_position);
  if (metrics_) metrics_->input_cache_hits->Increment();
  return it->second.tensor;
}

bool InputCache::Insert(const Hash256& sha256, std::shared_ptr<const Tensor> tensor) {
  if (!tensor) return false;
  const int64_t cost = CostOf(tensor->byte_size());
  if (cost > max_entry_bytes_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto existing = entries_.find(sha256);
  if (existing != entries_.end()) {
    // Decoded meanwhile by another reader of the same blob: the same bytes.
    lru_.splice(lru_.begin(), lru_, existing->second.lru_position);
    return true;
  }
  EvictLocked(cost);
  lru_.push_front(sha256);
  entries_.emplace(sha256, Entry{std::move(tensor), cost, lru_.begin()});
  bytes_ += cost;
  UpdateGaugesLocked();
  return true;
}

void InputCache::EvictLocked(int64_t needed) {
  while (!lru_.empty() && bytes_ + needed > budget_bytes_) {
    auto it = entries_.find(lru_.back());
    bytes_ -= it->second.cost;
    entries_.erase(it);
    lru_.pop_back();
    if (metrics_) metrics_->input_cache_evictions->Increment();
  }
}

void InputCache::UpdateGaugesLocked() {
  if (!metrics_) return;
  metrics_->input_cache_bytes->Set(static_cast<double>(bytes_));
  metrics_->input_cache_entries->Set(static_cast<double>(entries_.size()));
}

int64_t InputCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t InputCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace consensor::node
