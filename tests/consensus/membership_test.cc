// Member replacement at the deadline and the choice of the dispute committee.
#include "consensus/membership.h"

#include <gtest/gtest.h>

#include "consensus/committee.h"
#include "tests/consensus/operators_fixture.h"

namespace consensor::consensus {
namespace {

using fixture::Addr;
using fixture::Ether;

std::vector<Address20> Order(int n) {
  std::vector<Address20> order;
  for (int i = 1; i <= n; ++i) order.push_back(Addr(i));
  return order;
}

TEST(Replacement, EachSilentMemberBringsTheNextOperator) {
  const std::vector<Address20> order = Order(8);
  // Committee of 3 (operators 1..3); 1 voted, 2 and 3 are silent: two more join.
  Replacement step = ReplaceSilentMembers(order, 3, {Addr(1)});
  EXPECT_EQ(step.silent, 2u);
  EXPECT_EQ(step.new_size, 5u);
  // Everyone voted: nothing changes.
  step = ReplaceSilentMembers(order, 3, {Addr(1), Addr(2), Addr(3)});
  EXPECT_EQ(step.silent, 0u);
  EXPECT_EQ(step.new_size, 3u);
  // Votes from outside the committee do not make a member less silent.
  step = ReplaceSilentMembers(order, 3, {Addr(7), Addr(8)});
  EXPECT_EQ(step.silent, 3u);
  EXPECT_EQ(step.new_size, 6u);
}

TEST(Replacement, StopsAtTheEndOfTheOrder) {
  const std::vector<Address20> order = Order(4);
  Replacement step = ReplaceSilentMembers(order, 3, {});
  EXPECT_EQ(step.silent, 3u);
  EXPECT_EQ(step.new_size, 4u);
  step = ReplaceSilentMembers(order, 4, {});
  EXPECT_EQ(step.new_size, 4u);  // exhausted: no step at all
  EXPECT_EQ(step.silent, 0u);
  step = ReplaceSilentMembers(order, 9, {});  // an inconsistent size is clamped, never past the order
  EXPECT_EQ(step.new_size, 4u);
}

TEST(Replacement, DueExactlyAtTheDeadline) {
  EXPECT_FALSE(ReplacementDue(1000 + 19999, 1000, 20000));
  EXPECT_TRUE(ReplacementDue(1000 + 20000, 1000, 20000));
  EXPECT_TRUE(ReplacementDue(1000 + 90000, 1000, 20000));
  EXPECT_FALSE(ReplacementDue(500, 1000, 20000));  // a clock that went back never replaces
}

TEST(DisputeCommittee, IsThePrefixOfTheOrderWithStakes) {
  std::vector<WeightedOperator> registry;
  for (int i = 1; i <= 6; ++i) registry.push_back({Addr(i), Ether(i)});
  const OperatorSet set = OperatorSet::FromRegistry(10, registry);
  auto order = CommitteeOrder(fixture::H(1), 10, Hash256{}, set.operators, set.operators.size());
  ASSERT_TRUE(order.ok());
  std::vector<WeightedOperator> committee = DisputeCommittee(*order, set, 4);
  ASSERT_EQ(committee.size(), 4u);
  for (size_t i = 0; i < committee.size(); ++i) {
    EXPECT_EQ(committee[i].address, (*order)[i]);
    EXPECT_EQ(committee[i].stake, set.Find((*order)[i])->stake);
  }
  EXPECT_EQ(DisputeCommittee(*order, set, 64).size(), 6u);  // capped by the set
  EXPECT_TRUE(DisputeCommittee(*order, set, 0).empty());
  // An address of the order without stake in the set is skipped, not invented.
  std::vector<Address20> with_stranger = {Addr(99), (*order)[0]};
  committee = DisputeCommittee(with_stranger, set, 2);
  ASSERT_EQ(committee.size(), 1u);
  EXPECT_EQ(committee[0].address, (*order)[0]);
}

}  // namespace
}  // namespace consensor::consensus
