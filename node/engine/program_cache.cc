#include "node/engine/program_cache.h"

namespace consensor::node {
namespace {

CacheMetrics ProgramCacheMetrics(NodeMetrics* metrics) {
  if (!metrics) return {};
  return {metrics->program_cache_hits, metrics->program_cache_misses, metrics->program_cache_evictions,
          metrics->program_cache_bytes, metrics->program_cache_entries};
}

}  // namespace

ProgramCache::ProgramCache(int64_t budget_bytes, NodeMetrics* metrics)
    : lru_(budget_bytes, ProgramCacheMetrics(metrics)) {}

int64_t ProgramCache::CostOf(const executor::Program& program) {
  int64_t cost = program.arena_bytes;
  for (const auto& [buffer, tensor] : program.constants) cost += tensor.byte_size();
  return cost;
}

std::shared_ptr<const executor::Program> ProgramCache::Find(const Hash256& graph_sha256) {
  return lru_.Find(graph_sha256);
}

bool ProgramCache::Insert(const Hash256& graph_sha256, std::shared_ptr<const executor::Program> program) {
  if (!program) return false;
  // A graph compiled meanwhile by another worker is kept as it is: both programs are identical.
  const int64_t cost = CostOf(*program);
  return lru_.Insert(graph_sha256, std::move(program), cost);
}

bool ProgramCache::SetPreparedBytes(const Hash256& graph_sha256, const executor::Program* program,
                                    int64_t prepared_bytes) {
  if (!program || prepared_bytes < 0) return false;
  return lru_.Reprice(graph_sha256, program, CostOf(*program) + prepared_bytes);
}

}  // namespace consensor::node
