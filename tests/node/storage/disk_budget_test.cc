// DiskBudget: the quota and the free-space reserve, with a fake filesystem and a fake store size.
#include "node/storage/disk_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>

namespace consensor::node {
namespace {

class FakeDisk final : public FreeSpaceProbe {
 public:
  explicit FakeDisk(std::atomic<int64_t>* free) : free_(free) {}
  StatusOr<int64_t> FreeBytes() override {
    if (free_->load() < 0) return Internal("statvfs failed");
    return free_->load();
  }

 private:
  std::atomic<int64_t>* free_;
};

struct Harness {
  std::atomic<int64_t> used{0};
  std::atomic<int64_t> free{int64_t{1} << 40};
  std::map<std::string, int> refusals;  // "write/limit"
  DiskBudget budget;
  explicit Harness(DiskBudgetOptions options)
      : budget(
            options, [this] { return used.load(); }, std::make_unique<FakeDisk>(&free),
            [this](std::string_view write, BudgetLimit limit) {
              ++refusals[std::string(write) + "/" + std::string(BudgetLimitName(limit))];
            }) {}
};

TEST(DiskBudgetTest, QuotaRefusesWhatWouldPassItAndNamesTheKey) {
  Harness h({/*max_bytes=*/1000, /*min_free_bytes=*/0});
  h.used = 900;
  EXPECT_TRUE(h.budget.Check(100, "blob upload").ok());
  Status s = h.budget.Check(101, "blob upload");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("storage.max_bytes"), std::string::npos) << s.message();
  EXPECT_EQ(h.refusals["blob upload/max_bytes"], 1);
  // Already over (e.g. the quota was lowered): even an empty write is refused.
  h.used = 1001;
  EXPECT_EQ(h.budget.Check(0, "task submission").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(h.refusals["task submission/max_bytes"], 1);
}

TEST(DiskBudgetTest, NoQuotaAndNoReserveAdmitsEverything) {
  Harness h({0, 0});
  h.used = int64_t{1} << 50;
  h.free = 0;
  EXPECT_TRUE(h.budget.Check(int64_t{1} << 40, "blob upload").ok());
}

TEST(DiskBudgetTest, FreeSpaceReserveRefusesWhatWouldEatIntoIt) {
  Harness h({0, /*min_free_bytes=*/500});
  h.free = 800;
  EXPECT_TRUE(h.budget.Check(300, "blob upload").ok());
  Status s = h.budget.Check(301, "blob upload");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("storage.min_free_bytes"), std::string::npos) << s.message();
  EXPECT_EQ(h.refusals["blob upload/min_free_bytes"], 1);
  // Space returns: writes resume.
  h.free = 10000;
  EXPECT_TRUE(h.budget.Check(301, "blob upload").ok());
  // What the store holds in memory and will flush counts as already written.
  std::atomic<int64_t> unflushed{0};
  h.budget.SetUnflushedBytes([&] { return unflushed.load(); });
  h.free = 900;
  EXPECT_TRUE(h.budget.Check(400, "blob upload").ok());
  unflushed = 100;
  EXPECT_EQ(h.budget.Check(400, "blob upload").code(), StatusCode::kResourceExhausted);
  // statvfs failing is an error, not a silent pass.
  h.free = -1;
  EXPECT_FALSE(h.budget.Check(1, "blob upload").ok());
}

TEST(DiskBudgetTest, ReservationsOfConcurrentUploadsCountTogether) {
  Harness h({/*max_bytes=*/1000, 0});
  auto a = h.budget.Reserve(400, "blob upload");
  ASSERT_TRUE(a.ok());
  auto b = h.budget.Reserve(400, "blob upload");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(h.budget.reserved_bytes(), 800);
  // A third cannot take what the two have claimed, though nothing is stored yet.
  EXPECT_EQ(h.budget.Reserve(300, "blob upload").status().code(), StatusCode::kResourceExhausted);
  // Growing past the quota fails and claims nothing more.
  EXPECT_EQ(a->GrowTo(700).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(a->bytes(), 400);
  EXPECT_TRUE(a->GrowTo(600).ok());
  EXPECT_TRUE(a->GrowTo(500).ok());  // shrinking is a no-op
  EXPECT_EQ(h.budget.reserved_bytes(), 1000);
  b->Release();
  EXPECT_EQ(h.budget.reserved_bytes(), 600);
  {
    DiskBudget::Reservation moved = std::move(*a);
    EXPECT_EQ(moved.bytes(), 600);
    EXPECT_EQ(h.budget.reserved_bytes(), 600);
  }  // destroyed: released
  EXPECT_EQ(h.budget.reserved_bytes(), 0);
  EXPECT_TRUE(h.budget.Reserve(1000, "blob upload").ok());  // and released again at once
  EXPECT_EQ(h.budget.reserved_bytes(), 0);
}

TEST(DiskBudgetTest, NegativeSizeIsInvalid) {
  Harness h({1000, 0});
  EXPECT_EQ(h.budget.Check(-1, "blob upload").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace consensor::node
