#include "consensus/finality.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace consensor::consensus {
namespace {

TEST(Finality, WindowFollowsTheLastPossibleAnnouncement) {
  // Reference block 100, announcements accepted until block 108, seed block 109, window of 4
  // blocks after it.
  EXPECT_EQ(FinalityBlock(100, 8, 4), 113u);
  EXPECT_FALSE(IsFinalAt(100, 113));
  EXPECT_FALSE(IsFinalAt(113, 113));  // the window's last block: evidence may still land in it
  EXPECT_TRUE(IsFinalAt(114, 113));
}

TEST(Finality, OverflowNeverFinalizes) {
  EXPECT_EQ(FinalityBlock(UINT64_MAX - 3, 2, 1), UINT64_MAX);
  EXPECT_EQ(FinalityBlock(UINT64_MAX - 4, 2, 1), UINT64_MAX);
  EXPECT_EQ(FinalityBlock(UINT64_MAX - 5, 2, 1), UINT64_MAX - 1);
  EXPECT_EQ(FinalityBlock(5, 1, UINT64_MAX), UINT64_MAX);
  EXPECT_EQ(FinalityBlock(5, UINT64_MAX, 1), UINT64_MAX);
  EXPECT_FALSE(IsFinalAt(UINT64_MAX, UINT64_MAX));
}

}  // namespace
}  // namespace consensor::consensus
