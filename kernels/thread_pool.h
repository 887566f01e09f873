// A fixed pool of worker threads for CPU kernels. Kernels split work by OUTPUT elements
// only, and each output element is computed by exactly the same operation sequence no
// matter which thread computes it, so the thread count never changes a bit. Neither does
// which thread runs which chunk: the pool may leave every chunk to the calling thread.
//
// How finely a call is split follows from its work alone (ParallelForWork): a call with less
// than min_chunk_work() units of work runs on the calling thread, and a larger one is cut into
// chunks of at least that much work each. The work comes from the shapes, never from timing or
// the machine's load, so a given call on a given pool always splits the same way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace consensor::kernels {

// Units of work below which handing part of a call to another thread costs more than it saves
// (a futex wake-up, and on a machine with as many threads as cores, a time slice taken from the
// caller). A unit is about one multiply-add or one byte read or written; each kernel counts its
// own (docs/PERFORMANCE.md, "A split rule by work", has the measurements).
// Defined in thread_pool.cc.
extern const int64_t kMinChunkWork;

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 means everything runs inline.
  explicit ThreadPool(int num_threads, int64_t min_chunk_work = kMinChunkWork);
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

  // The split rule: ParallelFor over n items of work_per_item units each, with chunks of at
  // least min_chunk_work() units (so a call of less than that runs on the calling thread).
  void ParallelForWork(int64_t n, int64_t work_per_item, const std::function<void(int64_t, int64_t)>& fn) {
    ParallelFor(n, GrainForWork(work_per_item), fn);
  }
  // The fewest items of work_per_item units that make a chunk worth another thread.
  int64_t GrainForWork(int64_t work_per_item) const;
  int64_t min_chunk_work() const { return min_chunk_work_; }

  // How many ParallelFor jobs were cut into more than one chunk (for tests and benchmarks).
  uint64_t jobs_split() const { return jobs_split_.load(std::memory_order_relaxed); }

  // How many ParallelFor jobs had a chunk run by a worker thread (for tests and benchmarks).
  uint64_t jobs_shared() const { return jobs_shared_.load(std::memory_order_relaxed); }

 private:
  void WorkerLoop();
  void RunChunks(bool is_worker);

  const int64_t min_chunk_work_;
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
  std::atomic<uint64_t> jobs_split_{0};
  std::mutex job_mu_;  // one ParallelFor at a time
};

// Pins the floating-point environment that docs/DETERMINISM.md requires: round to
// nearest even, no flush-to-zero, no denormals-are-zero. Called on every pool thread.
void SetDeterministicFloatEnvironment();

}  // namespace consensor::kernels
