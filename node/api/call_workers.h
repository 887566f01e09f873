// The threads that do the client API's blocking work (authentication, admission, synced writes,
// record reads) for the calls gRPC's callback API serves: gRPC's own threads only hand a call
// over and send its answer, so a call waiting for a sync or a task never holds one of them.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace consensor::node {

class CallWorkers {
 public:
  explicit CallWorkers(int threads);
  ~CallWorkers();  // Stop()

  // Runs `job` on one of the threads. After Stop the job is dropped (false).
  bool Post(std::function<void()> job);
  // Runs the jobs already posted, then joins the threads. Idempotent.
  void Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace consensor::node
