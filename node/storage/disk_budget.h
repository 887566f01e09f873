// The node's disk budget: a byte quota for the datadir and a reserve of free space on its
// filesystem. Writes that a client or a peer drives (uploads, fetched blobs, new tasks, task
// outputs) ask it first and are refused with RESOURCE_EXHAUSTED before anything is written
// (docs/NODE.md, "Disk budget and retention"). Small records of the node's own (state changes,
// certificates) are not asked: the free-space reserve is there for them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/status.h"

namespace consensor::node {

struct DiskBudgetOptions {
  int64_t max_bytes = 0;       // storage.max_bytes: blobs + task and result records; 0 = no quota
  int64_t min_free_bytes = 0;  // storage.min_free_bytes: free space kept on the datadir's filesystem
};

// Free bytes of a filesystem; an interface so unit tests can make a disk "full".
class FreeSpaceProbe {
 public:
  virtual ~FreeSpaceProbe() = default;
  virtual StatusOr<int64_t> FreeBytes() = 0;
};

// statvfs(path): the bytes an unprivileged writer may still use (f_bavail).
std::unique_ptr<FreeSpaceProbe> NewStatvfsProbe(std::string path);

// Which limit refused a write (the label of consensor_storage_refusals_total).
enum class BudgetLimit { kMaxBytes, kMinFree };
std::string_view BudgetLimitName(BudgetLimit limit);

class DiskBudget {
 public:
  // `used_bytes` returns what the store holds now (Store::Stats: blobs, tasks, results).
  // `on_refused(write, limit)` counts refusals; `write` is the caller's kind of write.
  DiskBudget(DiskBudgetOptions options, std::function<int64_t()> used_bytes, std::unique_ptr<FreeSpaceProbe> probe,
             std::function<void(std::string_view write, BudgetLimit limit)> on_refused = nullptr);

  // OK when `bytes` more may be written; RESOURCE_EXHAUSTED naming the limit otherwise.
  // `write` names the kind of write ("blob upload", "task"...) in the message and the metric.
  Status Check(int64_t bytes, std::string_view write) { return Admit(bytes, write, /*reserve=*/false); }

  // The claim of a streaming write (an upload, a blob fetched from a peer). It grows as the bytes
  // arrive and every other check counts it until it is released (destroyed), so concurrent
  // uploads cannot together pass the quota.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(DiskBudget* budget, std::string write) : budget_(budget), write_(std::move(write)) {}
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation() { Release(); }
    // Claims up to `total` bytes in all; RESOURCE_EXHAUSTED (and nothing more claimed) if the
    // growth does not fit. A total at or below the claim is OK at once.
    Status GrowTo(int64_t total);
    void Release();
    int64_t bytes() const { return bytes_; }

   private:
    friend class DiskBudget;
    DiskBudget* budget_ = nullptr;
    std::string write_;
    int64_t bytes_ = 0;
  };
  // A reservation of `bytes` (may be 0: then it only checks there is room at all).
  StatusOr<Reservation> Reserve(int64_t bytes, std::string_view write);

  // Bytes the store will still write out on its own (RocksDB's memtables, which a flush turns
  // into files): the free-space check subtracts them, so a flush on a nearly full disk has room.
  void SetUnflushedBytes(std::function<int64_t()> unflushed) { unflushed_ = std::move(unflushed); }

  int64_t reserved_bytes() const { return reserved_.load(std::memory_order_relaxed); }
  int64_t used_bytes() const { return used_bytes_(); }
  // Free bytes on the filesystem, or -1 when statvfs fails.
  int64_t free_bytes();
  const DiskBudgetOptions& options() const { return options_; }

 private:
  Status Admit(int64_t bytes, std::string_view write, bool reserve);

  const DiskBudgetOptions options_;
  std::function<int64_t()> used_bytes_;
  std::unique_ptr<FreeSpaceProbe> probe_;
  std::function<void(std::string_view, BudgetLimit)> on_refused_;
  std::function<int64_t()> unflushed_;
  std::mutex mu_;  // check-then-reserve is one step
  std::atomic<int64_t> reserved_{0};
};

}  // namespace consensor::node
