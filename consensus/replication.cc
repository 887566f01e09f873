#include "consensus/replication.h"

#include <string>

namespace consensor::consensus {

bool IsMajorityQuorum(uint64_t replicas, uint64_t quorum) { return quorum * 2 > replicas && quorum <= replicas; }

uint64_t SmallestMajority(uint64_t replicas) { return replicas / 2 + 1; }

Status CheckReplication(uint32_t replicas, uint32_t quorum, uint32_t max_replicas) {
  if (replicas == 0 || replicas > max_replicas) {
    return InvalidArgument("replicas must be between 1 and " + std::to_string(max_replicas) + " (got " +
                           std::to_string(replicas) + ")");
  }
  if (!IsMajorityQuorum(replicas, quorum)) {
    return InvalidArgument("quorum must be a majority of the replicas: between " +
                           std::to_string(SmallestMajority(replicas)) + " and " + std::to_string(replicas) + " (got " +
                           std::to_string(quorum) + ")");
  }
  return OkStatus();
}

uint32_t DefaultQuorum(uint32_t replicas, uint32_t default_replicas, uint32_t default_quorum) {
  return replicas == default_replicas ? default_quorum : static_cast<uint32_t>(SmallestMajority(replicas));
}

}  // namespace consensor::consensus
