#include "node/engine/program_cache.h"

namespace consensor::node {

ProgramCache::ProgramCache(int64_t budget_bytes, NodeMetrics* metrics)
    : budget_bytes_(budget_bytes < 0 ? 0 : budget_bytes), metrics_(metrics) {}

int64_t ProgramCache::CostOf(const executor::Program& program) {
  int64_t cost = program.arena_bytes;
  for (const auto& [buffer, tensor] : program.constants) cost += tensor.byte_size();
  return cost;
}

std::shared_ptr<const executor::Program> ProgramCache::Find(const Hash256& graph_sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(graph_sha256);
  if (it == entries_.end()) {
    if (metrics_) metrics_->program_cache_misses->Increment();
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru_position);
  if (metrics_) metrics_->program_cache_hits->Increment();
  return it->second.program;
}

bool ProgramCache::Insert(const Hash256& graph_sha256, std::shared_ptr<const executor::Program> program) {
  if (!program) return false;
  const int64_t cost = CostOf(*program);
  if (cost > budget_bytes_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto existing = entries_.find(graph_sha256);
  if (existing != entries_.end()) {
    // Another worker compiled the same graph meanwhile: both programs are identical.
    lru_.splice(lru_.begin(), lru_, existing->second.lru_position);
    return true;
  }
  EvictLocked(cost);
  lru_.push_front(graph_sha256);
  entries_.emplace(graph_sha256, Entry{std::move(program), cost, lru_.begin()});
  bytes_ += cost;
  UpdateGaugesLocked();
  return true;
}

bool ProgramCache::SetPreparedBytes(const Hash256& graph_sha256, const executor::Program* program,
                                    int64_t prepared_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(graph_sha256);
  if (it == entries_.end() || it->second.program.get() != program || prepared_bytes < 0) return false;
  const int64_t cost = CostOf(*program) + prepared_bytes;
  if (cost == it->second.cost) return true;
  // Taken out while the others make room, so that it cannot evict itself; it stays the most
  // recently used.
  std::shared_ptr<const executor::Program> entry = std::move(it->second.program);
  bytes_ -= it->second.cost;
  lru_.erase(it->second.lru_position);
  entries_.erase(it);
  if (cost > budget_bytes_) {
    if (metrics_) metrics_->program_cache_evictions->Increment();
    UpdateGaugesLocked();
    return false;
  }
  EvictLocked(cost);
  lru_.push_front(graph_sha256);
  entries_.emplace(graph_sha256, Entry{std::move(entry), cost, lru_.begin()});
  bytes_ += cost;
  UpdateGaugesLocked();
  return true;
}

void ProgramCache::EvictLocked(int64_t needed) {
  while (!lru_.empty() && bytes_ + needed > budget_bytes_) {
    auto it = entries_.find(lru_.back());
    bytes_ -= it->second.cost;
    entries_.erase(it);
    lru_.pop_back();
    if (metrics_) metrics_->program_cache_evictions->Increment();
  }
}

void ProgramCache::UpdateGaugesLocked() {
  if (!metrics_) return;
  metrics_->program_cache_bytes->Set(static_cast<double>(bytes_));
  metrics_->program_cache_entries->Set(static_cast<double>(entries_.size()));
}

int64_t ProgramCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ProgramCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace consensor::node
