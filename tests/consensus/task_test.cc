#include "consensus/task.h"

#include <gtest/gtest.h>

namespace consensor::consensus {
namespace {

Hash256 H(uint8_t fill) {
  Hash256 h;
  h.fill(fill);
  return h;
}

TEST(TaskId, DependsOnContentNotOrder) {
  TaskSpec a{H(1), {{"x", H(2)}, {"y", H(3)}}, 0};
  TaskSpec b{H(1), {{"y", H(3)}, {"x", H(2)}}, 0};
  auto ia = ComputeTaskId(a), ib = ComputeTaskId(b);
  ASSERT_TRUE(ia.ok() && ib.ok());
  EXPECT_EQ(*ia, *ib);

  // Each field changes the id.
  TaskSpec c = a;
  c.nonce = 1;
  EXPECT_NE(*ComputeTaskId(c), *ia);
  c = a;
  c.graph_sha256 = H(9);
  EXPECT_NE(*ComputeTaskId(c), *ia);
  c = a;
  c.inputs[0].second = H(9);
  EXPECT_NE(*ComputeTaskId(c), *ia);
  c = a;
  c.inputs[0].first = "z";
  EXPECT_NE(*ComputeTaskId(c), *ia);
  // Name/hash boundaries are length-prefixed: "ab"+h differs from "a"+... shifts.
  TaskSpec d1{H(1), {{"ab", H(2)}}, 0}, d2{H(1), {{"a", H(2)}}, 0};
  EXPECT_NE(*ComputeTaskId(d1), *ComputeTaskId(d2));
}

TEST(TaskId, GoldenValue) {
  // The encoding written out byte by byte, as consensus/task.h specifies it.
  TaskSpec spec{H(0xab), {{"x", H(0xcd)}}, 7};
  Sha256 h;
  h.Update(std::string_view("consensor.task.v1\0", 18));
  h.Update(H(0xab));
  h.UpdateU32(1);
  h.UpdateU32(1);
  h.Update(std::string_view("x"));
  h.Update(H(0xcd));
  h.UpdateU64(7);
  EXPECT_EQ(*ComputeTaskId(spec), h.Finish());
}

TEST(TaskId, RejectsEmptyAndDuplicateNames) {
  EXPECT_EQ(ComputeTaskId({H(1), {{"", H(2)}}, 0}).status().code(), StatusCode::kInvalidArgument);
  auto dup = ComputeTaskId({H(1), {{"x", H(2)}, {"x", H(3)}}, 0});
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("'x'"), std::string::npos);
}

TEST(TaskLifecycle, Transitions) {
  using S = TaskState;
  EXPECT_TRUE(IsAllowedTransition(S::kQueued, S::kRunning));
  EXPECT_TRUE(IsAllowedTransition(S::kQueued, S::kFailed));
  EXPECT_TRUE(IsAllowedTransition(S::kRunning, S::kSucceeded));
  EXPECT_TRUE(IsAllowedTransition(S::kRunning, S::kFailed));
  EXPECT_TRUE(IsAllowedTransition(S::kRunning, S::kQueued));  // recovery
  EXPECT_FALSE(IsAllowedTransition(S::kQueued, S::kSucceeded));
  for (S final_state : {S::kSucceeded, S::kFailed}) {
    EXPECT_TRUE(IsFinal(final_state));
    for (S to : {S::kQueued, S::kRunning, S::kSucceeded, S::kFailed})
      EXPECT_FALSE(IsAllowedTransition(final_state, to));
  }
  EXPECT_EQ(TaskStateName(S::kRunning), "running");
}

}  // namespace
}  // namespace consensor::consensus
