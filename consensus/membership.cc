#include "consensus/membership.h"

#include <algorithm>

namespace consensor::consensus {

Replacement ReplaceSilentMembers(std::span<const Address20> order, size_t committee_size,
                                 const std::set<Address20>& voters) {
  Replacement step;
  committee_size = std::min(committee_size, order.size());
  step.new_size = committee_size;
  if (committee_size >= order.size()) return step;
  for (size_t i = 0; i < committee_size; ++i) step.silent += voters.count(order[i]) ? 0 : 1;
  step.new_size = std::min(order.size(), committee_size + step.silent);
  return step;
}

bool ReplacementDue(int64_t now_ms, int64_t last_step_ms, int64_t member_timeout_ms) {
  return now_ms - last_step_ms >= member_timeout_ms;
}

std::vector<WeightedOperator> DisputeCommittee(std::span<const Address20> order, const OperatorSet& operators,
                                               size_t max_size) {
  std::vector<WeightedOperator> committee;
  const size_t size = std::min(order.size(), max_size);
  for (size_t i = 0; i < size; ++i) {
    if (const WeightedOperator* op = operators.Find(order[i])) committee.push_back(*op);
  }
  return committee;
}

}  // namespace consensor::consensus
