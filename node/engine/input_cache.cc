#include "node/engine/input_cache.h"

namespace consensor::node {
namespace {

CacheMetrics InputCacheMetrics(NodeMetrics* metrics) {
  if (!metrics) return {};
  return {metrics->input_cache_hits, metrics->input_cache_misses, metrics->input_cache_evictions,
          metrics->input_cache_bytes, metrics->input_cache_entries};
}

}  // namespace

InputCache::InputCache(int64_t budget_bytes, NodeMetrics* metrics)
    : max_entry_bytes_(budget_bytes < 0 ? 0 : budget_bytes / 4), lru_(budget_bytes, InputCacheMetrics(metrics)) {}

std::shared_ptr<const Tensor> InputCache::Find(const Hash256& sha256) {
  if (lru_.budget_bytes() == 0) return nullptr;  // disabled: neither a hit nor a miss to count
  return lru_.Find(sha256);
}

bool InputCache::Insert(const Hash256& sha256, std::shared_ptr<const Tensor> tensor) {
  if (!tensor) return false;
  const int64_t cost = CostOf(tensor->byte_size());
  if (cost > max_entry_bytes_) return false;
  // A blob decoded meanwhile by another reader is kept as it is: the same bytes.
  return lru_.Insert(sha256, std::move(tensor), cost);
}

}  // namespace consensor::node
