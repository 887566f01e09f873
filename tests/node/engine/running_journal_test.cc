// The running-task journal on its own: marks survive closing and reopening the file (as they
// survive the end of the process), cleared or torn slots hold nothing, and a file this node
// did not write is refused with a clear error.
#include "node/engine/running_journal.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/test_files.h"

namespace consensor::node {
namespace {

RunningJournal::Mark MarkOf(uint8_t id_byte, uint32_t attempts, uint64_t started) {
  RunningJournal::Mark m;
  m.task_id.fill(id_byte);
  m.attempts = attempts;
  m.started_unix_ms = started;
  return m;
}

TEST(RunningJournalTest, MarksSurviveReopeningAndClearedSlotsHoldNothing) {
  const std::string path = testing_support::MakeTempDir("journal") + "/running-tasks";
  {
    auto journal = RunningJournal::Open(path, 3);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    EXPECT_EQ((*journal)->slots(), 3);
    EXPECT_TRUE((*journal)->Marks().empty());  // a new file is all zeros
    (*journal)->Set(0, MarkOf(0xa1, 1, 1000));
    (*journal)->Set(2, MarkOf(0xc3, 7, 3000));
    (*journal)->Set(1, MarkOf(0xb2, 2, 2000));
    (*journal)->Clear(1);
  }
  // Fewer workers than last time: every slot of the file is still read.
  auto reopened = RunningJournal::Open(path, 1);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->slots(), 3);
  auto marks = (*reopened)->Marks();
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].task_id, MarkOf(0xa1, 0, 0).task_id);
  EXPECT_EQ(marks[0].attempts, 1u);
  EXPECT_EQ(marks[0].started_unix_ms, 1000u);
  EXPECT_EQ(marks[1].task_id, MarkOf(0xc3, 0, 0).task_id);
  EXPECT_EQ(marks[1].attempts, 7u);
  EXPECT_EQ(marks[1].started_unix_ms, 3000u);
  (*reopened)->ClearAll();
  EXPECT_TRUE((*reopened)->Marks().empty());
}

TEST(RunningJournalTest, TornSlotIsIgnored) {
  const std::string path = testing_support::MakeTempDir("journal") + "/running-tasks";
  {
    auto journal = RunningJournal::Open(path, 2);
    ASSERT_TRUE(journal.ok());
    (*journal)->Set(0, MarkOf(0x11, 1, 5));
    (*journal)->Set(1, MarkOf(0x22, 1, 6));
  }
  // A byte of slot 1's attempts changed behind the check word (a write cut short).
  std::string bytes = testing_support::ReadFile(path);
  ASSERT_EQ(bytes.size(), 2 * RunningJournal::kSlotBytes);
  bytes[RunningJournal::kSlotBytes + 32] = 9;
  testing_support::WriteFile(path, bytes);
  auto journal = RunningJournal::Open(path, 2);
  ASSERT_TRUE(journal.ok());
  auto marks = (*journal)->Marks();
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].task_id, MarkOf(0x11, 0, 0).task_id);
}

TEST(RunningJournalTest, FileNotWrittenByANodeIsRefusedWithAClearError) {
  const std::string dir = testing_support::MakeTempDir("journal");
  testing_support::WriteFile(dir + "/odd", std::string(100, 'x'));  // not whole slots
  auto odd = RunningJournal::Open(dir + "/odd", 1);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(odd.status().message().find("not a whole number of 64-byte slots"), std::string::npos)
      << odd.status().ToString();
  testing_support::WriteFile(dir + "/huge", std::string(RunningJournal::kMaxFileBytes + 64, '\0'));
  EXPECT_EQ(RunningJournal::Open(dir + "/huge", 1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(RunningJournal::Open(dir + "/none", 0).status().code(), StatusCode::kInvalidArgument);
  auto missing_dir = RunningJournal::Open(dir + "/no/such/dir/running-tasks", 1);
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.status().message().find("cannot open the running-task journal"), std::string::npos);
}

}  // namespace
}  // namespace consensor::node
