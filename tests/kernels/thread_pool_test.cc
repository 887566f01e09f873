// ThreadPool: every index of [0, n) is handed out exactly once, in ranges at least `grain`
// long, whatever the thread count, however small the job and however quickly jobs follow
// each other (workers that wake late for a finished job must not run the next job's chunks
// with the old function).
#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace consensor::kernels {
namespace {

// Runs one ParallelFor and checks that each index was visited exactly once and that every
// range but the last is at least `grain` long.
void ExpectCoversOnce(ThreadPool& pool, int64_t n, int64_t grain, uint32_t tag) {
  std::vector<std::atomic<uint32_t>> hits(static_cast<size_t>(n));
  for (auto& h : hits) h.store(0);
  std::atomic<int64_t> short_ranges{0};
  pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
    ASSERT_LE(0, b);
    ASSERT_LT(b, e);
    ASSERT_LE(e, n);
    if (e - b < grain && e != n) short_ranges.fetch_add(1);
    // A tag per job: a worker running a stale job's function would write another tag.
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(tag);
  });
  EXPECT_EQ(short_ranges.load(), 0) << "n=" << n << " grain=" << grain;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), tag) << "index " << i << " of n=" << n << " grain=" << grain;
  }
}

TEST(ThreadPool, CoversEveryIndexOnceAt1And2And8Threads) {
  for (int threads : {1, 2, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    uint32_t tag = 1;
    for (int64_t n : {1, 2, 3, 7, 8, 31, 64, 1000, 4097}) {
      for (int64_t grain : {1, 2, 5, 64, 5000}) ExpectCoversOnce(pool, n, grain, tag++);
    }
    int calls = 0;
    pool.ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
    EXPECT_EQ(calls, 0);
  }
}

TEST(ThreadPool, BackToBackTinyJobsNeverMixUp) {
  // Thousands of jobs of a few chunks each: the caller usually finishes before a worker
  // joins, which is the case where a late worker could otherwise take the next job's chunks.
  for (int threads : {2, 8}) {
    ThreadPool pool(threads);
    for (uint32_t job = 1; job <= 3000; ++job) ExpectCoversOnce(pool, 1 + job % 9, 1, job);
  }
}

TEST(ThreadPool, LargeJobsAreSharedWithTheWorkers) {
  // Not a timing assertion: a job whose chunks each take a millisecond leaves the workers
  // time to wake, so some job must have run a chunk on a worker.
  ThreadPool pool(2);
  for (int job = 0; job < 500 && pool.jobs_shared() == 0; ++job) {
    pool.ParallelFor(8, 1, [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
  }
  EXPECT_GT(pool.jobs_shared(), 0u);
}

TEST(ThreadPool, CallersOnSeveralThreadsTakeTurns) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  for (uint32_t c = 0; c < 3; ++c) {
    callers.emplace_back([&pool, c] {
      for (uint32_t job = 1; job <= 300; ++job) ExpectCoversOnce(pool, 50 + job % 17, 3, job * 4 + c);
    });
  }
  for (auto& t : callers) t.join();
}

TEST(ThreadPool, DestroyedWhileWorkersSpinOrSleep) {
  for (int round = 0; round < 50; ++round) {
    ThreadPool pool(8);
    ExpectCoversOnce(pool, 100, 1, 7);
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The chunks one ParallelForWork call handed out, and the threads that ran them. Each chunk
// waits (up to a deadline, not a timing assertion) until `threads_wanted` distinct threads have
// entered the call, so a call that is split is seen to run on that many threads.
struct SplitRecord {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::set<std::thread::id> threads;
};
SplitRecord RunRecorded(ThreadPool& pool, int64_t n, int64_t work_per_item, size_t threads_wanted) {
  SplitRecord rec;
  std::mutex mu;
  std::condition_variable cv;
  pool.ParallelForWork(n, work_per_item, [&](int64_t b, int64_t e) {
    std::unique_lock<std::mutex> lock(mu);
    rec.chunks.emplace_back(b, e);
    rec.threads.insert(std::this_thread::get_id());
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return rec.threads.size() >= threads_wanted; });
  });
  return rec;
}

TEST(ThreadPoolSplitRule, CallsBelowTheMinimumWorkRunOnTheCallingThread) {
  for (int threads : {2, 8}) {
    ThreadPool pool(threads, /*min_chunk_work=*/1000);
    EXPECT_EQ(pool.min_chunk_work(), 1000);
    EXPECT_EQ(pool.GrainForWork(10), 100);
    EXPECT_EQ(pool.GrainForWork(3), 334);  // rounded up: a chunk never has less than the minimum
    EXPECT_EQ(pool.GrainForWork(5000), 1);
    // 99 items of 10 units and 100 items of 10 units (exactly the minimum): one chunk, here.
    for (int64_t n : {1, 99, 100}) {
      SplitRecord rec = RunRecorded(pool, n, 10, 1);
      ASSERT_EQ(rec.chunks.size(), 1u) << "n=" << n;
      EXPECT_EQ(rec.chunks[0], std::make_pair(int64_t{0}, n));
      EXPECT_EQ(*rec.threads.begin(), std::this_thread::get_id());
    }
    EXPECT_EQ(pool.jobs_split(), 0u);
  }
  // The shipped minimum: one unit short of it stays on the calling thread.
  ThreadPool pool(2);
  EXPECT_EQ(pool.min_chunk_work(), kMinChunkWork);
  SplitRecord rec = RunRecorded(pool, kMinChunkWork - 1, 1, 1);
  EXPECT_EQ(rec.chunks.size(), 1u);
  EXPECT_EQ(pool.jobs_split(), 0u);
}

TEST(ThreadPoolSplitRule, CallsAboveItSplitIntoChunksOfAtLeastTheMinimumOnSeveralThreads) {
  for (int threads : {2, 8}) {
    ThreadPool pool(threads, /*min_chunk_work=*/1000);
    // 1000 items of 10 units: chunks of at least 100 items, so 2 to 10 of them, on 2 threads.
    SplitRecord rec = RunRecorded(pool, 1000, 10, 2);
    EXPECT_GE(rec.chunks.size(), 2u);
    EXPECT_LE(rec.chunks.size(), 10u);
    int64_t covered = 0;
    for (const auto& [b, e] : rec.chunks) {
      covered += e - b;
      if (e != 1000) {
        EXPECT_GE(e - b, 100) << "chunk [" << b << ", " << e << ")";
      }
    }
    EXPECT_EQ(covered, 1000);
    // Two threads are awaited; once they have entered, more of an 8-thread pool's workers may
    // take the remaining chunks, so the count is bounded, not exact.
    EXPECT_GE(rec.threads.size(), 2u);
    EXPECT_LE(rec.threads.size(), std::min(static_cast<size_t>(threads), rec.chunks.size()));
    EXPECT_EQ(pool.jobs_split(), 1u);
  }
}

// The GEMM counts a block's work as its multiply-adds: a product below the pool's minimum is one
// job on the calling thread, a larger one is split; both give the bits of one thread.
TEST(ThreadPoolSplitRule, GemmSplitsByItsMultiplyAdds) {
  constexpr int64_t kMin = 1 << 12;
  auto run = [](ThreadPool* pool, int64_t M, int64_t N, int64_t K) {
    std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N)), c(static_cast<size_t>(M * N));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6) * 0.37f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 5 % 11) - 5) * 0.61f;
    cpu::gemm::F32Operands op;
    op.a = a.data();
    op.lda = K;
    op.b = b.data();
    op.ldb = N;
    op.c = c.data();
    op.ldc = N;
    const cpu::CpuContext ctx{pool, cpu::Isa::kPortable};
    EXPECT_TRUE(cpu::gemm::F32Batched(
                    1, {M, N, K}, [&](int64_t) { return op; }, ctx)
                    .ok());
    return c;
  };
  ThreadPool one(1), two(2, kMin);
  // 48 x 64 x 1 = 3072 multiply-adds, under the minimum: not split (without the rule, its blocks
  // would shrink to 18 rows to give each thread several).
  EXPECT_EQ(run(&two, 48, 64, 1), run(&one, 48, 64, 1));
  EXPECT_EQ(two.jobs_split(), 0u);
  // 96 x 256 x 16 = 393216 multiply-adds: split (blocks of at least kMin each).
  EXPECT_EQ(run(&two, 96, 256, 16), run(&one, 96, 256, 16));
  EXPECT_EQ(two.jobs_split(), 1u);
}

}  // namespace
}  // namespace consensor::kernels
