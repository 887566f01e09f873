// Decoded task inputs kept between tasks, so that a worker does not read, re-hash and parse an
// input blob that the node verified moments ago (at SubmitTask) or that an earlier task used.
//
// Keyed by the .npy blob's SHA-256. An entry is only ever made from bytes that were verified
// against that hash when they were read (the store checks every read of a whole blob), and a
// blob's content never changes for its hash, so an entry is exactly what a read of the blob
// would give: using it cannot change a bit of any result. What an entry does not do is notice
// corruption of the blob at rest after it was read: a later cold read (a miss) still does
// (docs/NODE.md, "The warm path").
//
// LRU with a byte budget: an entry costs its tensor's bytes plus a fixed overhead. A tensor
// over a quarter of the budget is not cached, so one large input cannot flush every other
// entry; a budget of 0 disables the cache.
#pragma once

#include <cstdint>
#include <memory>

#include "common/sha256.h"
#include "common/tensor.h"
#include "node/engine/byte_budget_lru.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {

class InputCache {
 public:
  // `metrics` may be null (unit tests).
  InputCache(int64_t budget_bytes, NodeMetrics* metrics);

  // The decoded input of blob `sha256`, now most recently used; null on a miss.
  std::shared_ptr<const Tensor> Find(const Hash256& sha256);
  // Whether it is cached, without counting a hit or a miss.
  bool Contains(const Hash256& sha256) const { return lru_.Contains(sha256); }

  // Caches `tensor`, decoded from the verified bytes of blob `sha256`, evicting least recently
  // used entries until it fits. Returns false (and caches nothing) when it is over the entry cap.
  bool Insert(const Hash256& sha256, std::shared_ptr<const Tensor> tensor);

  // Whether a tensor of `byte_size` bytes could be cached at all (callers skip decoding
  // work done only for the cache).
  bool Admits(int64_t byte_size) const { return CostOf(byte_size) <= max_entry_bytes_; }

  static int64_t CostOf(int64_t tensor_bytes) { return tensor_bytes + kEntryOverheadBytes; }
  // Map node, LRU node, the tensor's object and its shape: an estimate, so that many tiny
  // inputs are bounded too.
  static constexpr int64_t kEntryOverheadBytes = 256;

  int64_t budget_bytes() const { return lru_.budget_bytes(); }
  int64_t bytes() const { return lru_.bytes(); }
  size_t entries() const { return lru_.entries(); }

 private:
  const int64_t max_entry_bytes_;  // a quarter of the budget
  ByteBudgetLru<Tensor> lru_;
};

}  // namespace consensor::node
