#include "node/storage/disk_budget.h"

#include <sys/statvfs.h>

#include <utility>

namespace consensor::node {

namespace {

class StatvfsProbe final : public FreeSpaceProbe {
 public:
  explicit StatvfsProbe(std::string path) : path_(std::move(path)) {}
  StatusOr<int64_t> FreeBytes() override {
    struct statvfs st {};
    if (statvfs(path_.c_str(), &st) != 0) return Internal("statvfs(" + path_ + ") failed");
    const unsigned __int128 bytes = static_cast<unsigned __int128>(st.f_bavail) * st.f_frsize;
    return bytes > INT64_MAX ? INT64_MAX : static_cast<int64_t>(bytes);
  }

 private:
  std::string path_;
};

std::string MiB(int64_t bytes) { return std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)"; }

}  // namespace

std::unique_ptr<FreeSpaceProbe> NewStatvfsProbe(std::string path) {
  return std::make_unique<StatvfsProbe>(std::move(path));
}

std::string_view BudgetLimitName(BudgetLimit limit) {
  return limit == BudgetLimit::kMaxBytes ? "max_bytes" : "min_free_bytes";
}

DiskBudget::DiskBudget(DiskBudgetOptions options, std::function<int64_t()> used_bytes,
                       std::unique_ptr<FreeSpaceProbe> probe,
                       std::function<void(std::string_view, BudgetLimit)> on_refused)
    : options_(options),
      used_bytes_(std::move(used_bytes)),
      probe_(std::move(probe)),
      on_refused_(std::move(on_refused)) {}

int64_t DiskBudget::free_bytes() {
  if (!probe_) return -1;
  auto free = probe_->FreeBytes();
  return free.ok() ? *free : -1;
}

Status DiskBudget::Admit(int64_t bytes, std::string_view write, bool reserve) {
  if (bytes < 0) return InvalidArgument("negative write size");
  std::lock_guard<std::mutex> lock(mu_);
  auto refuse = [&](BudgetLimit limit, std::string why) {
    if (on_refused_) on_refused_(write, limit);
    return ResourceExhausted(std::string(write) + " refused: " + why + "; reads still work, and writes resume when " +
                             "space is freed (retention, or the operator)");
  };
  const int64_t reserved = reserved_.load(std::memory_order_relaxed);
  if (options_.max_bytes > 0) {
    const int64_t used = used_bytes_ ? used_bytes_() : 0;
    if (used + reserved > options_.max_bytes || bytes > options_.max_bytes - used - reserved) {
      return refuse(BudgetLimit::kMaxBytes, "the node's storage quota (storage.max_bytes = " + MiB(options_.max_bytes) +
                                                ") is full: " + MiB(used) + " stored, " + MiB(reserved) +
                                                " in uploads, " + MiB(bytes) + " more asked");
    }
  }
  if (options_.min_free_bytes > 0 && probe_) {
    // The filesystem's free space already excludes what running uploads wrote, but not what
    // they will still write: count their claims as well (conservative).
    auto free = probe_->FreeBytes();
    if (!free.ok()) return free.status().WithContext("checking free disk space");
    const int64_t unflushed = unflushed_ ? unflushed_() : 0;
    if (*free - unflushed - bytes < options_.min_free_bytes) {
      return refuse(BudgetLimit::kMinFree, "the disk is full: " + MiB(*free) + " free, " + MiB(unflushed) +
                                               " of it due to the store's next flush, and the node keeps " +
                                               MiB(options_.min_free_bytes) + " free (storage.min_free_bytes); " +
                                               MiB(bytes) + " asked");
    }
  }
  if (reserve) reserved_.fetch_add(bytes, std::memory_order_relaxed);
  return OkStatus();
}

StatusOr<DiskBudget::Reservation> DiskBudget::Reserve(int64_t bytes, std::string_view write) {
  RETURN_IF_ERROR(Admit(bytes, write, /*reserve=*/true));
  Reservation r(this, std::string(write));
  r.bytes_ = bytes;
  return r;
}

DiskBudget::Reservation& DiskBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    write_ = std::move(other.write_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Status DiskBudget::Reservation::GrowTo(int64_t total) {
  if (budget_ == nullptr) return FailedPrecondition("reservation is released");
  if (total <= bytes_) return OkStatus();
  RETURN_IF_ERROR(budget_->Admit(total - bytes_, write_, /*reserve=*/true));
  bytes_ = total;
  return OkStatus();
}

void DiskBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->reserved_.fetch_sub(bytes_, std::memory_order_relaxed);
  budget_ = nullptr;
  bytes_ = 0;
}

}  // namespace consensor::node
