// A fixed pool of worker threads for CPU kernels. Kernels split work by OUTPUT elements
// only, and each output element is computed by exactly the same operation sequence no
// matter which thread computes it, so the thread count never changes a bit. Neither does
// which thread runs which chunk: the pool may leave every chunk to the calling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace consensor::kernels {

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 means everything runs inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), each at least `grain`
  // long (except the last). Returns when all calls are done. The calling thread takes
  // chunks too and never waits for a worker that has not started: a worker that wakes
  // after the calling thread has taken the last chunk skips the job, so a small job costs
  // one thread's time, not a wake-up round trip.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // How many ParallelFor jobs had a chunk run by a worker thread (for tests and benchmarks).
  uint64_t jobs_shared() const { return jobs_shared_.load(std::memory_order_relaxed); }

 private:
  void WorkerLoop();
  void RunChunks(bool is_worker);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  // generation_ and stop_ change under mu_ (atomic so that a worker may read them unlocked).
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  bool job_open_ = false;  // under mu_: workers may still join the current job
  int sleeping_ = 0;       // under mu_: workers blocked in work_cv_
  int joined_ = 0;         // under mu_: workers inside the current job
  bool caller_waiting_ = false;
  // Current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> worker_ran_chunk_{false};
  std::atomic<uint64_t> jobs_shared_{0};
  std::mutex job_mu_;  // one ParallelFor at a time
};

// Pins the floating-point environment that docs/DETERMINISM.md requires: round to
// nearest even, no flush-to-zero, no denormals-are-zero. Called on every pool thread.
void SetDeterministicFloatEnvironment();

}  // namespace consensor::kernels
