// The replication rule: how many operators execute a task and how many matching signatures
// certify it. A quorum is a strict majority of the replicas, so two certificates for different
// results of one task need at least one member who signed both, and that member is slashable
// for equivocation on its two signatures alone.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace consensor::consensus {

// quorum * 2 > replicas and quorum <= replicas (replicas may be 0: then nothing is a majority).
bool IsMajorityQuorum(uint64_t replicas, uint64_t quorum);
// The smallest majority of `replicas`: replicas / 2 + 1.
uint64_t SmallestMajority(uint64_t replicas);
// Matching signatures a committee of `committee_size` (a prefix of the committee order, grown
// from `replicas` by replacing silent members) needs: ceil(quorum * committee_size / replicas),
// so that growing the committee never lowers the fraction of it the quorum needs. Without this,
// a committee grown while honest members were still executing reaches colluders deep in the
// order, and `quorum` of them certify (issue 16, hole 2). `quorum` for a committee of at most
// `replicas`; 0 when replicas is 0.
uint64_t RequiredSignatures(uint64_t replicas, uint64_t quorum, uint64_t committee_size);
// What a task asks for, checked against the node's bound on replicas. INVALID_ARGUMENT naming
// the allowed range: replicas in [1, max_replicas], quorum a majority of the replicas.
Status CheckReplication(uint32_t replicas, uint32_t quorum, uint32_t max_replicas);
// The quorum a task gets when its client left it 0: the node's default quorum belongs to the
// node's default committee size; any other size gets its smallest majority.
uint32_t DefaultQuorum(uint32_t replicas, uint32_t default_replicas, uint32_t default_quorum);

}  // namespace consensor::consensus
