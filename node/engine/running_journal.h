// The running-task journal: which task each worker has started, and its attempt number, in a
// small file mapped into memory (docs/NODE.md, "Recovery").
//
// A worker marks a task running here instead of writing the task's record to the store before
// it runs. A store in a shared mapping is in the kernel's page cache as soon as it is made, so
// the mark survives the end of the process (kill -9, a crash inside a task) as the record's
// unsynced WAL write did, at the cost of a few stores instead of a RocksDB write. Like that
// write it is not synced: after a power loss the mark may be gone and the task is queued again
// with the attempt uncounted, as before. At startup, Recover counts each marked attempt into
// the task's record and clears the journal.
//
// Layout: slots of 64 bytes, one per worker: task id (32 bytes), attempts (u32 LE), 4 zero
// bytes, started_unix_ms (u64 LE), a check word (u64 LE) over the 48 bytes before it, 8 zero
// bytes. A slot whose check does not match (empty, cleared, torn) holds nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"  // Hash256
#include "common/status.h"

namespace consensor::node {

class RunningJournal {
 public:
  static constexpr size_t kSlotBytes = 64;
  // A larger file is not one this node wrote (workers are capped far below this).
  static constexpr int64_t kMaxFileBytes = int64_t{1} << 20;

  struct Mark {
    Hash256 task_id{};
    uint32_t attempts = 0;
    uint64_t started_unix_ms = 0;
  };

  // Opens (creating) the journal at `path` with at least `slots` slots. INVALID_ARGUMENT for
  // slots < 1, FAILED_PRECONDITION for a file over kMaxFileBytes or not a multiple of a slot,
  // INTERNAL for a system call that fails.
  static StatusOr<std::unique_ptr<RunningJournal>> Open(const std::string& path, int slots);
  ~RunningJournal();
  RunningJournal(const RunningJournal&) = delete;
  RunningJournal& operator=(const RunningJournal&) = delete;

  // The marks left in the file (by the run before this one, if it did not clear them).
  std::vector<Mark> Marks() const;
  // `slot` < slots(); one writer per slot (its worker).
  void Set(int slot, const Mark& mark);
  void Clear(int slot);
  void ClearAll();
  int slots() const { return static_cast<int>(bytes_ / kSlotBytes); }

 private:
  RunningJournal(int fd, uint8_t* base, size_t bytes) : fd_(fd), base_(base), bytes_(bytes) {}
  int fd_;
  uint8_t* base_;
  size_t bytes_;
};

}  // namespace consensor::node
