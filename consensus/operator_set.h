// The operator set at one block, as the protocol sees it: who may sign and with what weight.
// One type for every user (the committee draw, the quorum tracker, certificate checks, the
// node's cache of the chain), built from the registry's list in one place.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/uint256.h"

namespace consensor::consensus {

struct WeightedOperator {
  Address20 address{};
  // Stake in wei, as a 256-bit big-endian integer; the total must stay below 2^127.
  Uint256 stake{};
};

struct OperatorSet {
  uint64_t block = 0;
  std::vector<WeightedOperator> operators;  // stake > 0, in the registry's order
  Uint256 total_stake{};                    // the sum, as the contract computes it

  // Keeps the registry's operators that hold stake at `block` and sums their stake: an
  // operator without stake there can neither be drawn nor sign.
  static OperatorSet FromRegistry(uint64_t block, std::span<const WeightedOperator> registered);
  // Null when `address` holds no stake in this set.
  const WeightedOperator* Find(const Address20& address) const;
};

}  // namespace consensor::consensus
