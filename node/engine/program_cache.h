// The warm path: compiled programs with their resident weights, kept between tasks so that a
// task on a model the node ran recently skips reading the graph and weight blobs, parsing,
// copying and compiling.
//
// Keyed by the graph blob's SHA-256. A graph's placeholders carry static shapes
// (docs/ONNX.md, "Static shapes"), so the graph hash also fixes the input shapes; the node's
// limits, which Compile checks, are fixed for its lifetime. A cached program is exactly what
// Compile returned for those bytes: reusing it cannot change a bit of any result.
//
// LRU with a byte budget: an entry costs the bytes of its constants (the weights) plus its
// planned arena, plus the backend's prepared copies of its constants (the CPU GEMM's packed
// conv and matmul weights, LoadedProgram::prepared_bytes), which is what one worker keeps
// resident to run it warm (TaskManager). The prepared bytes are known only once a worker has
// loaded the program, so they are added then (SetPreparedBytes). A program larger than the
// whole budget is not cached; a budget of 0 disables the cache.
#pragma once

#include <cstdint>
#include <memory>

#include "common/sha256.h"
#include "executor/program.h"
#include "node/engine/byte_budget_lru.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {

class ProgramCache {
 public:
  // `metrics` may be null (unit tests).
  ProgramCache(int64_t budget_bytes, NodeMetrics* metrics);

  // The cached program of `graph_sha256`, now most recently used; null on a miss.
  std::shared_ptr<const executor::Program> Find(const Hash256& graph_sha256);
  // Whether it is cached, without counting a hit or a miss.
  bool Contains(const Hash256& graph_sha256) const { return lru_.Contains(graph_sha256); }

  // Caches `program`, evicting least recently used entries until it fits. Holders of an
  // evicted program keep it alive through their shared_ptr. Returns false (and caches
  // nothing) when the program alone is over the budget.
  bool Insert(const Hash256& graph_sha256, std::shared_ptr<const executor::Program> program);

  // Counts `prepared_bytes` (what loading `program` on a worker's backend prepared besides its
  // arena) in the entry of `graph_sha256`, evicting least recently used entries until it fits.
  // Returns false when the entry is not cached (any more), or is another program, or is now
  // alone over the budget, in which case it is dropped: the caller must not keep the loaded
  // program resident then.
  bool SetPreparedBytes(const Hash256& graph_sha256, const executor::Program* program, int64_t prepared_bytes);

  // What an entry costs against the budget before its prepared bytes are known.
  static int64_t CostOf(const executor::Program& program);

  int64_t budget_bytes() const { return lru_.budget_bytes(); }
  int64_t bytes() const { return lru_.bytes(); }
  size_t entries() const { return lru_.entries(); }

 private:
  ByteBudgetLru<executor::Program> lru_;
};

}  // namespace consensor::node
