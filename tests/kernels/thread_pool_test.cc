// ThreadPool: every index of [0, n) is handed out exactly once, in ranges at least `grain`
// long, whatever the thread count, however small the job and however quickly jobs follow
// each other (workers that wake late for a finished job must not run the next job's chunks
// with the old function).
#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

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
  for (int job = 0; job < 20 && pool.jobs_shared() == 0; ++job) {
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

}  // namespace
}  // namespace consensor::kernels
