// The fake keeps the parts of the Store contract (node/storage/store.h) that components rely
// on; tests/node/storage/store_test.cc holds the real store to the same rules.
#include "tests/node/fakes/memory_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace consensor::node::fakes {
namespace {

std::vector<uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

TEST(MemoryStoreTest, BlobsFollowTheStoreContract) {
  MemoryStore store;
  const std::vector<uint8_t> data = Bytes("some blob");
  auto first = store.PutBlob(data);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->sha256, Sha256Of(data));
  EXPECT_EQ(first->size, static_cast<int64_t>(data.size()));
  EXPECT_FALSE(first->already_present);
  EXPECT_TRUE(store.PutBlob(data)->already_present);
  EXPECT_EQ(store.GetStats().blob_count, 1);

  EXPECT_EQ(store.PutBlob(Bytes("other"), Sha256Of("not this")).status().code(), StatusCode::kInvalidArgument);
  auto writer = store.NewBlobWriter(std::nullopt, 4);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->Append(data).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*writer)->Commit().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.GetStats().blob_count, 1);  // a failed writer leaves nothing

  EXPECT_EQ(*store.BlobSize(first->sha256), static_cast<int64_t>(data.size()));
  EXPECT_EQ(*store.GetBlob(first->sha256, 100), data);
  EXPECT_EQ(store.GetBlob(first->sha256, 3).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.GetBlob(Sha256Of("absent"), 100).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.BlobSize(Sha256Of("absent")).status().code(), StatusCode::kNotFound);

  // Streamed in pieces of at most kBlobChunkBytes, stopping at the sink's error.
  std::vector<uint8_t> large(static_cast<size_t>(kBlobChunkBytes) + 10, 7);
  auto big = store.PutBlob(large);
  ASSERT_TRUE(big.ok());
  std::vector<size_t> pieces;
  ASSERT_TRUE(store
                  .ReadBlob(big->sha256,
                            [&](std::span<const uint8_t> piece) {
                              pieces.push_back(piece.size());
                              return OkStatus();
                            })
                  .ok());
  EXPECT_EQ(pieces, (std::vector<size_t>{static_cast<size_t>(kBlobChunkBytes), 10}));
  int calls = 0;
  Status stopped = store.ReadBlob(big->sha256, [&](std::span<const uint8_t>) {
    ++calls;
    return Cancelled("enough");
  });
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

TEST(MemoryStoreTest, TasksAreVisitedInKeyOrderWithResultsKeptApart) {
  MemoryStore store;
  ASSERT_TRUE(store.PutTask("b", "record b").ok());
  ASSERT_TRUE(store.PutTask("a", "record a", std::string("result a")).ok());
  ASSERT_TRUE(store.PutTask("a", "record a2").ok());  // a task write without a result keeps the result
  EXPECT_EQ(store.PutTask("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(**store.GetTask("a"), "record a2");
  EXPECT_EQ(**store.GetResult("a"), "result a");
  EXPECT_FALSE(store.GetResult("b")->has_value());
  EXPECT_FALSE(store.GetTask("c")->has_value());
  EXPECT_EQ(store.GetStats().task_count, 2);

  std::vector<std::string> keys;
  ASSERT_TRUE(store
                  .ForEachTask([&](const std::string& id, const std::string&) {
                    keys.push_back(id);
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(store.TaskWrites().size(), 3u);
  EXPECT_TRUE(store.TaskWrites()[1].with_result);

  ASSERT_TRUE(store.PutMeta("node", "one").ok());
  EXPECT_EQ(**store.GetMeta("node"), "one");
  EXPECT_FALSE(store.GetMeta("other")->has_value());
}

TEST(MemoryStoreTest, HooksInjectFailures) {
  MemoryStore store;
  auto blob = store.PutBlob(Bytes("blob"));
  ASSERT_TRUE(blob.ok());
  store.SetGetBlobHook([](const Hash256&) { return DataLoss("damaged"); });
  EXPECT_EQ(store.GetBlob(blob->sha256, 100).status().code(), StatusCode::kDataLoss);
  store.SetGetBlobHook(nullptr);
  EXPECT_TRUE(store.GetBlob(blob->sha256, 100).ok());

  store.SetPutTaskHook([](const std::string&, const std::string&) { return Unavailable("disk full"); });
  EXPECT_EQ(store.PutTask("a", "record").code(), StatusCode::kUnavailable);
  EXPECT_FALSE(store.GetTask("a")->has_value());
  EXPECT_TRUE(store.TaskWrites().empty());
}

}  // namespace
}  // namespace consensor::node::fakes
