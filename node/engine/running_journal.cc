#include "node/engine/running_journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace consensor::node {

namespace {

constexpr size_t kIdOffset = 0;
constexpr size_t kAttemptsOffset = 32;
constexpr size_t kStartedOffset = 40;
constexpr size_t kCheckOffset = 48;

// FNV-1a over the slot's fields, salted so that an all-zero slot never checks.
uint64_t CheckWord(const uint8_t* slot) {
  uint64_t h = 0xcbf29ce484222325ull ^ 0x636e73722d72756eull;  // "cnsr-run"
  for (size_t i = 0; i < kCheckOffset; ++i) {
    h ^= slot[i];
    h *= 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

void StoreU64(uint8_t* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t LoadU64(const uint8_t* at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | at[i];
  return v;
}

Status Errno(const std::string& what, const std::string& path) {
  return Internal(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

StatusOr<std::unique_ptr<RunningJournal>> RunningJournal::Open(const std::string& path, int slots) {
  if (slots < 1) return InvalidArgument("the running-task journal needs at least one slot");
  if (static_cast<int64_t>(slots) * static_cast<int64_t>(kSlotBytes) > kMaxFileBytes) {
    return InvalidArgument("the running-task journal holds at most " + std::to_string(kMaxFileBytes / kSlotBytes) +
                           " workers");
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot open the running-task journal", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = Errno("cannot stat the running-task journal", path);
    ::close(fd);
    return s;
  }
  if (st.st_size > kMaxFileBytes || st.st_size % static_cast<off_t>(kSlotBytes) != 0) {
    ::close(fd);
    return FailedPrecondition("the running-task journal " + path + " is " + std::to_string(st.st_size) +
                              " bytes, not a whole number of " + std::to_string(kSlotBytes) + "-byte slots up to " +
                              std::to_string(kMaxFileBytes) + ": not written by this node; move it away to start");
  }
  const size_t wanted = static_cast<size_t>(slots) * kSlotBytes;
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < wanted) {
    if (::ftruncate(fd, static_cast<off_t>(wanted)) != 0) {
      Status s = Errno("cannot size the running-task journal", path);
      ::close(fd);
      return s;
    }
    bytes = wanted;
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status s = Errno("cannot map the running-task journal", path);
    ::close(fd);
    return s;
  }
  return std::unique_ptr<RunningJournal>(new RunningJournal(fd, static_cast<uint8_t*>(base), bytes));
}

RunningJournal::~RunningJournal() {
  ::munmap(base_, bytes_);
  ::close(fd_);
}

std::vector<RunningJournal::Mark> RunningJournal::Marks() const {
  std::vector<Mark> marks;
  for (size_t offset = 0; offset + kSlotBytes <= bytes_; offset += kSlotBytes) {
    const uint8_t* slot = base_ + offset;
    if (LoadU64(slot + kCheckOffset) != CheckWord(slot)) continue;
    Mark m;
    std::memcpy(m.task_id.data(), slot + kIdOffset, m.task_id.size());
    m.attempts = static_cast<uint32_t>(LoadU64(slot + kAttemptsOffset) & 0xffffffffu);
    m.started_unix_ms = LoadU64(slot + kStartedOffset);
    marks.push_back(m);
  }
  return marks;
}

void RunningJournal::Set(int slot_index, const Mark& mark) {
  uint8_t* slot = base_ + static_cast<size_t>(slot_index) * kSlotBytes;
  // The check word is written last: a slot caught half-written by the end of the process does
  // not check, and the task it was about to start had not started.
  StoreU64(slot + kCheckOffset, 0);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order of these stores
  std::memcpy(slot + kIdOffset, mark.task_id.data(), mark.task_id.size());
  StoreU64(slot + kAttemptsOffset, mark.attempts);
  StoreU64(slot + kStartedOffset, mark.started_unix_ms);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  StoreU64(slot + kCheckOffset, CheckWord(slot));
}

void RunningJournal::Clear(int slot_index) {
  uint8_t* slot = base_ + static_cast<size_t>(slot_index) * kSlotBytes;
  StoreU64(slot + kCheckOffset, 0);  // first: the slot stops checking before its fields change
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memset(slot, 0, kCheckOffset);
}

void RunningJournal::ClearAll() { std::memset(base_, 0, bytes_); }

}  // namespace consensor::node
