// The scratch a thread keeps between kernel calls (kernels/cpu/scratch_cache.h): a Workspace
// released and taken again on the same thread gets the same block back (its pages already
// mapped), another thread never gets it, and what a thread keeps stays within the bounds.
#include "kernels/cpu/scratch_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace consensor::kernels::cpu {
namespace {

// The scratch cache is per thread, and other tests on this thread may leave blocks in it: each
// test runs on a fresh thread.
template <typename Fn>
void OnFreshThread(Fn fn) {
  std::thread t(fn);
  t.join();
}

TEST(ScratchCache, WorkspaceReusesTheBlockOfTheLastCallOnItsThread) {
  OnFreshThread([] {
    void* first = nullptr;
    {
      gemm::Workspace ws;
      first = ws.Get(0, 600 << 10);  // an im2col tile of the size that faulted per task
      ASSERT_NE(first, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    }
    EXPECT_EQ(scratch::KeptBytes(), size_t{600} << 10);
    {
      gemm::Workspace ws;
      EXPECT_EQ(ws.Get(0, 600 << 10), first);  // the next call: same block, no fresh pages
      EXPECT_EQ(scratch::KeptBytes(), 0u);
    }
    {
      gemm::Workspace ws;
      EXPECT_EQ(ws.Get(0, 100 << 10), first);  // a smaller request is served by it too
    }
    std::thread other([first] {
      gemm::Workspace ws;
      EXPECT_NE(ws.Get(0, 600 << 10), first);  // never another thread's block
    });
    other.join();
  });
}

TEST(ScratchCache, TakesTheSmallestBlockThatFits) {
  OnFreshThread([] {
    size_t small_size = 0, large_size = 0;
    void* small = scratch::Take(64 << 10, &small_size);
    void* large = scratch::Take(1 << 20, &large_size);
    scratch::Give(large, large_size);
    scratch::Give(small, small_size);
    size_t got = 0;
    EXPECT_EQ(scratch::Take(32 << 10, &got), small);
    EXPECT_EQ(got, small_size);
    EXPECT_EQ(scratch::Take(512 << 10, &got), large);
    EXPECT_EQ(got, large_size);
    void* fresh = scratch::Take(2 << 20, &got);  // larger than anything kept: newly allocated
    EXPECT_NE(fresh, nullptr);
    EXPECT_GE(got, size_t{2} << 20);
    scratch::Give(fresh, got);
    scratch::Give(small, small_size);
    scratch::Give(large, large_size);
  });
}

TEST(ScratchCache, KeepsAtMostItsBoundsInBlocksAndBytes) {
  OnFreshThread([] {
    // A block over the byte bound is freed at once.
    size_t size = 0;
    void* huge = scratch::Take(scratch::kMaxKeptBytes + 64, &size);
    ASSERT_NE(huge, nullptr);
    scratch::Give(huge, size);
    EXPECT_EQ(scratch::KeptBytes(), 0u);

    // More blocks than the count bound: the smallest go.
    std::vector<std::pair<void*, size_t>> blocks;
    for (size_t i = 0; i < scratch::kMaxKeptBlocks + 2; ++i) {
      size_t got = 0;
      void* p = scratch::Take((i + 1) * (64 << 10), &got);
      blocks.emplace_back(p, got);
    }
    size_t largest_bytes = 0;
    for (size_t i = 2; i < blocks.size(); ++i) largest_bytes += blocks[i].second;
    for (auto& [p, got] : blocks) scratch::Give(p, got);
    EXPECT_EQ(scratch::KeptBytes(), largest_bytes);

    // Blocks that together pass the byte bound: what is kept stays within it.
    std::vector<std::pair<void*, size_t>> big;
    for (int i = 0; i < 3; ++i) {
      size_t got = 0;
      void* p = scratch::Take(scratch::kMaxKeptBytes / 2, &got);
      big.emplace_back(p, got);
    }
    for (auto& [p, got] : big) scratch::Give(p, got);
    EXPECT_LE(scratch::KeptBytes(), scratch::kMaxKeptBytes);
    EXPECT_GE(scratch::KeptBytes(), scratch::kMaxKeptBytes / 2);
  });
}

// The f32 copies of 16-bit operands have their own set: they neither evict nor serve the kernels'
// scratch, and they are bounded by their own, larger byte bound.
TEST(ScratchCache, WidenedCopiesAreKeptApartWithinTheirOwnBound) {
  OnFreshThread([] {
    size_t size = 0;
    void* copy = scratch::Take(size_t{12} << 20, &size, scratch::Kind::kWidened);  // over kMaxKeptBytes
    ASSERT_NE(copy, nullptr);
    scratch::Give(copy, size, scratch::Kind::kWidened);
    EXPECT_EQ(scratch::KeptBytes(scratch::Kind::kWidened), size);
    EXPECT_EQ(scratch::KeptBytes(), 0u);
    size_t got = 0;
    void* tile = scratch::Take(64 << 10, &got);  // a kernel's request is not served by it
    EXPECT_NE(tile, copy);
    scratch::Give(tile, got);
    EXPECT_EQ(scratch::Take(size_t{4} << 20, &got, scratch::Kind::kWidened), copy);  // the same pages again
    EXPECT_EQ(got, size);
    scratch::Give(copy, got, scratch::Kind::kWidened);
    void* huge = scratch::Take(scratch::kMaxKeptWidenedBytes + 64, &got, scratch::Kind::kWidened);
    ASSERT_NE(huge, nullptr);
    scratch::Give(huge, got, scratch::Kind::kWidened);  // over the bound: freed at once
    EXPECT_EQ(scratch::KeptBytes(scratch::Kind::kWidened), size);
  });
}

TEST(ScratchCache, NullIsIgnored) {
  OnFreshThread([] {
    scratch::Give(nullptr, 0);
    EXPECT_EQ(scratch::KeptBytes(), 0u);
  });
}

}  // namespace
}  // namespace consensor::kernels::cpu
