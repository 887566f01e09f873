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
  // What the client asked the network for is part of the id, so signatures over the id cover it
  // and an entry node cannot downgrade it (issue 16, hole 3).
  c = a;
  c.replicas = 1;
  EXPECT_NE(*ComputeTaskId(c), *ia);
  c = a;
  c.quorum = 1;
  EXPECT_NE(*ComputeTaskId(c), *ia);
  c = a;
  c.protocol_version = kProtocolVersion + 1;
  EXPECT_NE(*ComputeTaskId(c), *ia);
  // replicas and quorum are separate words: (3, 2) and (2, 3) differ.
  TaskSpec r1 = a, r2 = a;
  r1.replicas = 3, r1.quorum = 2, r2.replicas = 2, r2.quorum = 3;
  EXPECT_NE(*ComputeTaskId(r1), *ComputeTaskId(r2));
  // Name/hash boundaries are length-prefixed: "ab"+h differs from "a"+... shifts.
  TaskSpec d1{H(1), {{"ab", H(2)}}, 0}, d2{H(1), {{"a", H(2)}}, 0};
  EXPECT_NE(*ComputeTaskId(d1), *ComputeTaskId(d2));
}

TEST(TaskId, GoldenValue) {
  // The encoding written out byte by byte, as consensus/task.h specifies it.
  TaskSpec spec{H(0xab), {{"x", H(0xcd)}}, 7, 5, 3, 2};
  Sha256 h;
  h.Update(std::string_view("consensor.task.v2\0", 18));
  h.UpdateU32(2);
  h.Update(H(0xab));
  h.UpdateU32(1);
  h.UpdateU32(1);
  h.Update(std::string_view("x"));
  h.Update(H(0xcd));
  h.UpdateU64(7);
  h.UpdateU32(5);
  h.UpdateU32(3);
  EXPECT_EQ(ComputeTaskId(spec)->bytes(), h.Finish());
  // The same vector as a literal (checked with Python hashlib), so a change to Sha256 or to the
  // encoding shows up here too.
  EXPECT_EQ(ComputeTaskId(spec)->Hex(), "5225ea0ad01ebc3710256f3914e26468d4a7e4a09fa8228d4011ce39e0c52035");
}

TEST(TaskId, RejectsEmptyAndDuplicateNames) {
  EXPECT_EQ(ComputeTaskId({H(1), {{"", H(2)}}, 0}).status().code(), StatusCode::kInvalidArgument);
  auto dup = ComputeTaskId({H(1), {{"x", H(2)}, {"x", H(3)}}, 0});
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("'x'"), std::string::npos);
}

TEST(TaskId, FromHexAcceptsLowerAndUpperCase) {
  const std::string hex(64, 'a');
  auto lower = TaskId::FromHex(hex);
  ASSERT_TRUE(lower.ok()) << lower.status().ToString();
  EXPECT_EQ(lower->bytes(), H(0xaa));
  auto upper = TaskId::FromHex(std::string(64, 'A'));
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(*upper, *lower);
}

TEST(TaskId, FromHexRefusesMalformedIds) {
  auto empty = TaskId::FromHex("");
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "task_id is missing");
  auto short_id = TaskId::FromHex("xyz");
  EXPECT_EQ(short_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(short_id.status().message(), "task_id must be a SHA-256 hash as 64 hex digits, got 3 characters");
  EXPECT_EQ(TaskId::FromHex(std::string(65, 'a')).status().code(), StatusCode::kInvalidArgument);
  auto not_hex = TaskId::FromHex(std::string(63, 'a') + "g");
  EXPECT_EQ(not_hex.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(not_hex.status().message().rfind("task_id must be a SHA-256 hash as 64 hex digits: ", 0), 0u);
}

TEST(TaskId, HexRoundTrips) {
  Hash256 bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 0xa0);
  const TaskId id(bytes);
  const std::string hex = id.Hex();
  EXPECT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex, ToHex(bytes));
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  auto parsed = TaskId::FromHex(hex);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, id);
  auto from_key = TaskId::FromKey(id.Key());
  ASSERT_TRUE(from_key.ok());
  EXPECT_EQ(*from_key, id);
  EXPECT_EQ(TaskId::FromKey("short").status().code(), StatusCode::kDataLoss);
}

TEST(TaskId, OrdersByBytes) {
  Hash256 low = H(1), high = H(1);
  high[31] = 2;
  EXPECT_LT(TaskId(low), TaskId(high));
  EXPECT_GT(TaskId(H(2)), TaskId(high));
  EXPECT_NE(TaskId(low), TaskId(high));
  EXPECT_EQ(TaskId(low), TaskId(H(1)));
  // Hex order is byte order, so a map keyed by TaskId lists ids as the store does.
  EXPECT_LT(TaskId(low).Hex(), TaskId(high).Hex());
  EXPECT_EQ(TaskId().bytes(), Hash256{});
}

TEST(TaskId, ComputedIdWrapsTheHash) {
  TaskSpec spec{H(3), {{"x", H(4)}}, 5};
  auto id = ComputeTaskId(spec);
  ASSERT_TRUE(id.ok());
  auto parsed = TaskId::FromHex(ToHex(id->bytes()));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, *id);
  EXPECT_EQ(TaskId(id->bytes()), *id);
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
    for (S to : {S::kRunning, S::kSucceeded, S::kFailed, S::kCertifying})
      EXPECT_FALSE(IsAllowedTransition(final_state, to));
  }
  // Only a certified task goes back, to be re-executed for a dispute (issue 16); a failed one never.
  EXPECT_TRUE(IsAllowedTransition(S::kSucceeded, S::kQueued));
  EXPECT_FALSE(IsAllowedTransition(S::kFailed, S::kQueued));
  EXPECT_EQ(TaskStateName(S::kRunning), "running");
}

}  // namespace
}  // namespace consensor::consensus
