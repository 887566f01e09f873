#include "kernels/thread_pool.h"

#include <algorithm>
#include <cfenv>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace consensor::kernels {

// Sized by measurement on the published models (docs/PERFORMANCE.md, "A split rule by work").
const int64_t kMinChunkWork = int64_t{1} << 19;

void SetDeterministicFloatEnvironment() {
  std::fesetround(FE_TONEAREST);
#if defined(__x86_64__) || defined(__i386__)
  // 0x1F80: all exceptions masked, round to nearest, FTZ and DAZ off.
  _mm_setcsr(0x1F80);
#endif
}

ThreadPool::ThreadPool(int num_threads, int64_t min_chunk_work)
    : min_chunk_work_(std::max<int64_t>(1, min_chunk_work)) {
  SetDeterministicFloatEnvironment();
  for (int i = 1; i < std::max(1, num_threads); ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ++generation_;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(bool is_worker) {
  for (;;) {
    int64_t begin = next_.fetch_add(chunk_);
    if (begin >= n_) return;
    if (is_worker) worker_ran_chunk_.store(true, std::memory_order_relaxed);
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::WorkerLoop() {
  SetDeterministicFloatEnvironment();
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!stop_ && generation_ == seen) {
      ++sleeping_;
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      --sleeping_;
    }
    if (stop_) return;
    seen = generation_;
    // The job this generation opened may be over already: its caller ran every chunk.
    if (!job_open_) continue;
    ++joined_;
    lock.unlock();
    RunChunks(/*is_worker=*/true);
    lock.lock();
    if (--joined_ == 0 && caller_waiting_) done_cv_.notify_one();
  }
}

int64_t ThreadPool::GrainForWork(int64_t work_per_item) const {
  const int64_t w = std::max<int64_t>(1, work_per_item);
  return (min_chunk_work_ + w - 1) / w;
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> job_lock(job_mu_);
  // About 4 chunks per thread balances load without much scheduling overhead.
  int64_t chunk = std::max(grain, (n + 4 * num_threads() - 1) / (4 * num_threads()));
  jobs_split_.fetch_add(1, std::memory_order_relaxed);  // n > grain and chunk < n: two or more chunks
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_.store(0);
    worker_ran_chunk_.store(false, std::memory_order_relaxed);
    job_open_ = true;
    ++generation_;
    wake = sleeping_ > 0;
  }
  if (wake) work_cv_.notify_all();
  RunChunks(/*is_worker=*/false);
  // Every chunk is taken. Close the job to late workers and wait only for those inside it,
  // which are running their last chunk; after this no worker reads fn_, n_, chunk_ or next_.
  std::unique_lock<std::mutex> lock(mu_);
  job_open_ = false;
  caller_waiting_ = true;
  done_cv_.wait(lock, [&] { return joined_ == 0; });
  caller_waiting_ = false;
  fn_ = nullptr;
  if (worker_ran_chunk_.load(std::memory_order_relaxed)) jobs_shared_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace consensor::kernels
