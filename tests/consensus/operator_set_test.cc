#include "consensus/operator_set.h"

#include <gtest/gtest.h>

#include "tests/consensus/operators_fixture.h"

namespace consensor::consensus {
namespace {

using fixture::Addr;
using fixture::Ether;

TEST(OperatorSet, FromRegistryKeepsStakedOperatorsInOrderAndSums) {
  std::vector<WeightedOperator> registry = {{Addr(3), Ether(2)}, {Addr(1), Uint256{}}, {Addr(2), Ether(5)}};
  OperatorSet set = OperatorSet::FromRegistry(77, registry);
  EXPECT_EQ(set.block, 77u);
  ASSERT_EQ(set.operators.size(), 2u);  // no stake at the block: neither drawn nor a signer
  EXPECT_EQ(set.operators[0].address, Addr(3));
  EXPECT_EQ(set.operators[1].address, Addr(2));
  EXPECT_EQ(Uint256ToDecimal(set.total_stake), "7000000000000000000");
  ASSERT_NE(set.Find(Addr(2)), nullptr);
  EXPECT_EQ(set.Find(Addr(2))->stake, Ether(5));
  EXPECT_EQ(set.Find(Addr(1)), nullptr);
  EXPECT_EQ(set.Find(Addr(9)), nullptr);
}

TEST(OperatorSet, EmptyRegistry) {
  OperatorSet set = OperatorSet::FromRegistry(1, {});
  EXPECT_TRUE(set.operators.empty());
  EXPECT_TRUE(Uint256IsZero(set.total_stake));
}

}  // namespace
}  // namespace consensor::consensus
