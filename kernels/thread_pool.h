// A fixed pool of worker threads for CPU kernels. Kernels split work by OUTPUT elements
// only, and each output element is computed by exactly the same operation sequence no
// matter which thread computes it, so the thread count never changes a bit.
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
  // long (except the last). Returns when all calls are done.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  void RunChunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  // Current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_{0};
  int active_ = 0;
  std::mutex job_mu_;  // one ParallelFor at a time
};

// Pins the floating-point environment that docs/DETERMINISM.md requires: round to
// nearest even, no flush-to-zero, no denormals-are-zero. Called on every pool thread.
void SetDeterministicFloatEnvironment();

}  // namespace consensor::kernels
