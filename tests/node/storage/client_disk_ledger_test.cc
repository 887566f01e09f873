// Per-client disk accounting against the real RocksDB store: charges, refusals, claims of
// running uploads, release on deletion, and the same totals after the store is reopened.
#include "node/storage/client_disk_ledger.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace consensor::node {
namespace {

namespace fs = std::filesystem;

class ClientDiskLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-ledger-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Open();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  void Open() {
    store_.reset();
    auto s = OpenRocksDbStore((dir_ / "db").string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  Hash256 PutBlob(size_t bytes, char fill) {
    std::vector<uint8_t> data(bytes, static_cast<uint8_t>(fill));
    auto info = store_->PutBlob(data);
    EXPECT_TRUE(info.ok());
    return info->sha256;
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(ClientDiskLedgerTest, ChargesRefusesOverTheBudgetAndCountsRunningUploads) {
  ClientDiskLedger ledger(store_.get());
  ASSERT_TRUE(ledger.Load().ok());
  const Hash256 a = PutBlob(600, 'a');
  ASSERT_TRUE(ledger.AddBlob("alice", a, 600).ok());
  ASSERT_TRUE(ledger.AddBlob("alice", a, 600).ok());  // the same blob again: charged once
  EXPECT_EQ(ledger.StoredBytes("alice"), 600);
  EXPECT_TRUE(ledger.Check("alice", 1000, 400, "blob upload").ok());
  Status over = ledger.Check("alice", 1000, 401, "blob upload");
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("client 'alice' is over its disk budget"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("max_disk_bytes = 1000"), std::string::npos) << over.message();
  // Another client is not affected, and 0 means no limit.
  EXPECT_TRUE(ledger.Check("bob", 1000, 1000, "blob upload").ok());
  EXPECT_TRUE(ledger.Check("alice", 0, 1 << 30, "blob upload").ok());

  // Two uploads that each fit alone cannot pass together.
  auto first = ledger.Reserve("alice", 1000, 300, "blob upload");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(ledger.Reserve("alice", 1000, 200, "blob upload").status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(first->GrowTo(401).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(first->GrowTo(400).ok());
  first->Release();
  EXPECT_TRUE(ledger.Check("alice", 1000, 400, "blob upload").ok());
}

TEST_F(ClientDiskLedgerTest, DeletionReleasesAndReopeningRecomputesTheSameTotals) {
  const Hash256 a = PutBlob(500, 'a');
  const Hash256 b = PutBlob(700, 'b');
  const std::string task_key(32, '\x07');
  const std::string task_hex = ToHex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(task_key.data()), 32));
  ASSERT_TRUE(store_->PutTask(task_key, "record").ok());
  {
    ClientDiskLedger ledger(store_.get());
    ASSERT_TRUE(ledger.Load().ok());
    ASSERT_TRUE(ledger.AddBlob("alice", a, 500).ok());
    ASSERT_TRUE(ledger.AddBlob("bob", a, 500).ok());  // both asked for it: both are charged
    ASSERT_TRUE(ledger.AddBlob("alice", b, 700).ok());
    ASSERT_TRUE(ledger.AddTask("alice", task_hex, 300).ok());
    EXPECT_EQ(ledger.StoredBytes("alice"), 1500);
    EXPECT_EQ(ledger.StoredBytes("bob"), 500);
  }
  Open();  // a restart
  {
    ClientDiskLedger ledger(store_.get());
    ASSERT_TRUE(ledger.Load().ok());
    EXPECT_EQ(ledger.StoredBytes("alice"), 1500);
    EXPECT_EQ(ledger.StoredBytes("bob"), 500);
    // Retention deletes blob a and the task: the owners' totals drop at once.
    ASSERT_TRUE(store_->DeleteBlob(a).ok());
    ledger.BlobDeleted(a);
    ASSERT_TRUE(store_->DeleteTask(task_key).ok());
    ledger.TaskDeleted(task_hex);
    EXPECT_EQ(ledger.StoredBytes("alice"), 700);
    EXPECT_EQ(ledger.StoredBytes("bob"), 0);
    EXPECT_EQ(ledger.Totals().count("bob"), 0u);
  }
  // An object deleted while the node was down (its charge left behind) is charged to nobody.
  ASSERT_TRUE(store_->DeleteBlob(b).ok());
  Open();
  ClientDiskLedger ledger(store_.get());
  ASSERT_TRUE(ledger.Load().ok());
  EXPECT_EQ(ledger.StoredBytes("alice"), 0);
  int left = 0;
  ASSERT_TRUE(store_
                  ->ForEachMeta("client/",
                                [&](const std::string&, const std::string&) {
                                  ++left;
                                  return OkStatus();
                                })
                  .ok());
  EXPECT_EQ(left, 0);
}

}  // namespace
}  // namespace consensor::node
