#include "consensus/replication.h"

#include <string>

namespace consensor::consensus {

bool IsMajorityQuorum(uint64_t replicas, uint64_t quorum) { return quorum * 2 > replicas && quorum <= replicas; }

uint64_t SmallestMajority(uint64_t replicas) { return replicas / 2 + 1; }

uint64_t RequiredSignatures(uint64_t replicas, uint64_t quorum, uint64_t committee_size) {
  if (replicas == 0) return 0;
  if (committee_size <= replicas) return quorum;
  // Committees and quorums are bounded by the operator set (far below 2^32), so the product
  // cannot overflow; compute in 128 bits anyway so a hostile input cannot wrap it.
  const unsigned __int128 product = static_cast<unsigned __int128>(quorum) * committee_size;
  return static_cast<uint64_t>((product + replicas - 1) / replicas);
}

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
