#include "consensus/operator_set.h"

namespace consensor::consensus {

OperatorSet OperatorSet::FromRegistry(uint64_t block, std::span<const WeightedOperator> registered) {
  OperatorSet set;
  set.block = block;
  for (const WeightedOperator& op : registered) {
    if (Uint256IsZero(op.stake)) continue;
    set.operators.push_back(op);
    set.total_stake = Uint256Add(set.total_stake, op.stake);
  }
  return set;
}

const WeightedOperator* OperatorSet::Find(const Address20& address) const {
  for (const WeightedOperator& op : operators) {
    if (op.address == address) return &op;
  }
  return nullptr;
}

}  // namespace consensor::consensus
