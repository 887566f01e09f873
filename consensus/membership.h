// Who belongs to a task's committees as time passes: replacement of silent members at the
// member deadline, and the dispute committee once results conflict. Pure functions of the
// committee order (consensus/committee.h), the votes seen and the operator set.
#pragma once

#include <cstddef>
#include <set>
#include <span>
#include <vector>

#include "common/secp256k1_sign.h"
#include "consensus/operator_set.h"

namespace consensor::consensus {

// One replacement step at the member deadline.
struct Replacement {
  size_t silent = 0;    // members of the current committee that have not voted
  size_t new_size = 0;  // committee size after the step (a prefix of the order)
};

// The committee is always a prefix of the order, `committee_size` long. Each deadline adds as
// many operators of the order as members that have not voted, until the order runs out.
// new_size == committee_size when nobody is silent or the order is exhausted.
Replacement ReplaceSilentMembers(std::span<const Address20> order, size_t committee_size,
                                 const std::set<Address20>& voters);

// The deadline for the next replacement step has passed (times in milliseconds on the
// caller's clock; only differences matter).
bool ReplacementDue(int64_t now_ms, int64_t last_step_ms, int64_t member_timeout_ms);

// When committee members sign different results: the first `max_size` operators of the
// committee order, with their stake at the reference block. Operators of the order missing
// from the set (impossible when the order was drawn from it) are skipped.
std::vector<WeightedOperator> DisputeCommittee(std::span<const Address20> order, const OperatorSet& operators,
                                               size_t max_size);

}  // namespace consensor::consensus
