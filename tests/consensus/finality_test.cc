#include "consensus/finality.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace consensor::consensus {
namespace {

TEST(Finality, WindowFollowsTheLastPossibleAnnouncement) {
  // Reference block 100, announcements accepted until block 108, window of 4 blocks.
  EXPECT_EQ(FinalityBlock(100, 8, 4), 112u);
  EXPECT_FALSE(IsFinalAt(100, 112));
  EXPECT_FALSE(IsFinalAt(112, 112));  // the window's last block: evidence may still land in it
  EXPECT_TRUE(IsFinalAt(113, 112));
}

TEST(Finality, OverflowNeverFinalizes) {
  EXPECT_EQ(FinalityBlock(UINT64_MAX - 3, 2, 2), UINT64_MAX);
  EXPECT_EQ(FinalityBlock(UINT64_MAX - 3, 2, 1), UINT64_MAX);
  EXPECT_EQ(FinalityBlock(5, UINT64_MAX, 1), UINT64_MAX);
  EXPECT_FALSE(IsFinalAt(UINT64_MAX, UINT64_MAX));
}

}  // namespace
}  // namespace consensor::consensus
