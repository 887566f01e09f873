// Committee selection: which operators execute a task. Every node computes the same answer
// from the same inputs (the task id, the reference block, the hash of the seed block, the
// operator set at the reference block), so no coordinator is needed.
//
// The seed block is reference_block + R + 1, R being the deployment's maximum reference age.
// Nodes refuse an announcement once their head is past reference_block + R, so when any honest
// node accepts a task its seed block is not mined yet: neither the client (who fixed the task
// id) nor the entry node (which picked the reference block) knows the committee when it
// commits to the task, and neither can try again with the same task (docs/SECURITY.md, hole 3).
//
// The committee order is a stake-weighted sample without replacement over the whole operator
// set. Draw i (i = 0, 1, ...) takes
//   seed_i,k = keccak256("consensor.committee.v2" || task_id || u64be(reference_block) ||
//                        seed_block_hash || u32be(i) || u32be(k))
// for k = 0, 1, ... (rejection sampling),
// reads its first 16 bytes as a big-endian u128 x, and accepts the first k with
// x < floor((2^128 - 1) / remaining) * remaining, so r = x mod remaining is exactly uniform in
// [0, remaining stake). Walking the remaining operators in ascending address order, the first
// whose cumulative stake exceeds r is drawn and removed. The first `replicas` operators of the
// order form the committee; a member that stays silent is replaced by the next one in the order.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "common/status.h"
#include "consensus/operator_set.h"

namespace consensor::consensus {

// A 256-bit big-endian stake as an integer; INVALID_ARGUMENT when it needs more than 128 bits.
StatusOr<unsigned __int128> StakeToU128(const Uint256& stake);

// The block whose hash seeds the committee of a task announced at `reference_block`:
// reference_block + max_reference_age + 1 (UINT64_MAX when that overflows: never mined).
inline uint64_t SeedBlock(uint64_t reference_block, uint64_t max_reference_age) {
  if (max_reference_age >= UINT64_MAX - 1 || reference_block > UINT64_MAX - 1 - max_reference_age) return UINT64_MAX;
  return reference_block + max_reference_age + 1;
}

// The first `count` operators of the task's committee order (fewer when the set is smaller).
// Operators with zero stake are never drawn. INVALID_ARGUMENT for duplicate addresses or a
// total stake of 2^127 or more.
StatusOr<std::vector<Address20>> CommitteeOrder(const Hash256& task_id, uint64_t reference_block,
                                                const Hash256& seed_block_hash, std::vector<WeightedOperator> operators,
                                                size_t count);

}  // namespace consensor::consensus
