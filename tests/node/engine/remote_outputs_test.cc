// Unit tests of a non-member's on-demand outputs (node/engine/remote_outputs.h): bounds,
// single-flight, per-blob backoff, the in-flight cap and the caller's admission. The fetcher is
// a function the test controls; the clock is one it moves by hand.
#include "node/engine/remote_outputs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace consensor::node {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

Hash256 Blob(int i) {
  Hash256 h{};
  h[0] = 0xb0;
  h[30] = static_cast<uint8_t>(i >> 8);
  h[31] = static_cast<uint8_t>(i);
  return h;
}

consensus::TaskId Task(int i) {
  Hash256 h{};
  h[0] = 0x7a;
  h[31] = static_cast<uint8_t>(i);
  return consensus::TaskId(h);
}

class RemoteOutputsTest : public ::testing::Test {
 protected:
  RemoteOutputs Make(RemoteOutputLimits limits) {
    return RemoteOutputs(limits, &metrics_, [this] { return SteadyClock::time_point(hours_) + now_ms_.load() * 1ms; });
  }
  double Metric(const std::string& name, const MetricsRegistry::Labels& labels = {}) {
    return metrics_.AddCounter(name, "", labels)->Value();
  }

  MetricsRegistry metrics_;
  std::chrono::hours hours_{1000};
  std::atomic<int64_t> now_ms_{0};
};

TEST_F(RemoteOutputsTest, BoundedByEntriesAndBytesOldestDroppedFirst) {
  RemoteOutputLimits limits;
  limits.max_entries = 3;
  RemoteOutputs outputs = Make(limits);
  outputs.Add(Task(1), {Blob(1), Blob(2)});
  outputs.Add(Task(2), {Blob(3), Blob(4)});
  EXPECT_EQ(outputs.entries(), 3u);
  EXPECT_EQ(outputs.bytes(), 3 * RemoteOutputs::kEntryBytes);
  EXPECT_EQ(Metric("consensor_remote_outputs_evicted_total"), 1);
  auto fetched = [](const consensus::TaskId&, const Hash256&) { return OkStatus(); };
  // The oldest entry went; its blob is no output of this node's any more.
  EXPECT_EQ(outputs.Fetch(Blob(1), {}, fetched).code(), StatusCode::kNotFound);
  EXPECT_TRUE(outputs.Fetch(Blob(2), {}, fetched).ok());
  EXPECT_EQ(outputs.entries(), 2u) << "a fetched output is stored here: its entry goes";

  // Bytes bound: failure texts count, so a long failure makes room by dropping older entries.
  limits.max_entries = 100;
  limits.max_bytes = 4 * RemoteOutputs::kEntryBytes + 600;
  RemoteOutputs small = Make(limits);
  small.Add(Task(1), {Blob(1), Blob(2), Blob(3), Blob(4)});
  auto fails = [](const consensus::TaskId&, const Hash256&) { return Unavailable(std::string(1000, 'x')); };
  EXPECT_EQ(small.Fetch(Blob(4), {}, fails).code(), StatusCode::kUnavailable);
  EXPECT_LE(small.bytes(), limits.max_bytes);
  EXPECT_EQ(small.entries(), 2u);  // blobs 1 and 2 made room for blob 4's failure text
  EXPECT_EQ(small.Fetch(Blob(1), {}, fetched).code(), StatusCode::kNotFound);

  // Retention deleted task 1: its entries go, the other task's stay.
  RemoteOutputs two = Make(RemoteOutputLimits{});
  two.Add(Task(1), {Blob(1), Blob(2)});
  two.Add(Task(2), {Blob(3)});
  two.RemoveTask(Task(1));
  EXPECT_EQ(two.entries(), 1u);
  EXPECT_EQ(two.Fetch(Blob(2), {}, fetched).code(), StatusCode::kNotFound);
  EXPECT_TRUE(two.Fetch(Blob(3), {}, fetched).ok());
  EXPECT_EQ(two.entries(), 0u);
  EXPECT_EQ(two.bytes(), 0);
}

TEST_F(RemoteOutputsTest, ConcurrentRequestsShareOneFetch) {
  RemoteOutputs outputs = Make(RemoteOutputLimits{});
  outputs.Add(Task(1), {Blob(1)});
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> fetches{0};
  std::atomic<int> admitted{0};
  auto fetch = [&](const consensus::TaskId& task, const Hash256& blob) -> Status {
    EXPECT_EQ(task, Task(1));
    EXPECT_EQ(blob, Blob(1));
    fetches.fetch_add(1);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
    return Unavailable("holder-1: connection refused");
  };
  auto admit = [&] {
    admitted.fetch_add(1);
    return OkStatus();
  };
  constexpr int kClients = 8;
  std::vector<Status> results(kClients);
  std::vector<std::thread> clients;
  clients.emplace_back([&] { results[0] = outputs.Fetch(Blob(1), admit, fetch); });
  while (fetches.load() == 0) std::this_thread::sleep_for(1ms);
  for (int i = 1; i < kClients; ++i)
    clients.emplace_back([&, i] { results[i] = outputs.Fetch(Blob(1), admit, fetch); });
  while (Metric("consensor_output_fetches_coalesced_total") < kClients - 1) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(metrics_.AddGauge("consensor_output_fetches_in_flight", "")->Value(), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& t : clients) t.join();
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ(admitted.load(), 1) << "only the request that dials is charged";
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("holder-1: connection refused"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(Metric("consensor_output_fetches_started_total"), 1);
  EXPECT_EQ(metrics_.AddGauge("consensor_output_fetches_in_flight", "")->Value(), 0);
}

TEST_F(RemoteOutputsTest, FailedFetchBacksOffExponentiallyPerBlob) {
  RemoteOutputLimits limits;
  limits.backoff = 1000ms;
  limits.backoff_max = 3000ms;
  RemoteOutputs outputs = Make(limits);
  outputs.Add(Task(1), {Blob(1), Blob(2)});
  int fetches = 0;
  bool serve = false;
  auto fetch = [&](const consensus::TaskId&, const Hash256&) -> Status {
    ++fetches;
    return serve ? OkStatus() : Unavailable("no holder served output 'y': holder-1: stalled");
  };
  EXPECT_EQ(outputs.Fetch(Blob(1), {}, fetch).code(), StatusCode::kUnavailable);
  // A flood within the backoff dials nobody and names the earlier failure and the retry time.
  for (int i = 0; i < 100; ++i) {
    Status s = outputs.Fetch(Blob(1), {}, fetch);
    ASSERT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("holder-1: stalled"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("tries again after"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("(in 1 s)"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(fetches, 1);
  EXPECT_EQ(Metric("consensor_output_fetches_refused_total", {{"reason", "backoff"}}), 100);
  // Another blob has no backoff of its own yet.
  EXPECT_EQ(outputs.Fetch(Blob(2), {}, fetch).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fetches, 2);

  // Expired: one more attempt, then twice as long, then capped at the maximum.
  const std::vector<int64_t> expected_backoff = {2000, 3000, 3000};
  for (size_t i = 0; i < expected_backoff.size(); ++i) {
    const int64_t backoff = expected_backoff[i];
    now_ms_ += 1000000;  // far past any backoff
    const int before = fetches;
    EXPECT_EQ(outputs.Fetch(Blob(1), {}, fetch).code(), StatusCode::kUnavailable);
    EXPECT_EQ(fetches, before + 1);
    now_ms_ += backoff - 1;
    EXPECT_EQ(outputs.Fetch(Blob(1), {}, fetch).code(), StatusCode::kUnavailable);
    EXPECT_EQ(fetches, before + 1) << "still backing off " << backoff << " ms";
    now_ms_ += 1;
    serve = i + 1 == expected_backoff.size();  // the last attempt is served
    Status s = outputs.Fetch(Blob(1), {}, fetch);
    EXPECT_EQ(fetches, before + 2);
    EXPECT_EQ(s.ok(), serve) << s.ToString();
    serve = false;
  }
  EXPECT_EQ(outputs.entries(), 1u) << "the served blob is stored here now";
  EXPECT_EQ(Metric("consensor_output_fetches_started_total"), fetches);
}

TEST_F(RemoteOutputsTest, InFlightCapAndAdmissionRefuseWithoutDialing) {
  RemoteOutputLimits limits;
  limits.max_fetches_in_flight = 1;
  RemoteOutputs outputs = Make(limits);
  outputs.Add(Task(1), {Blob(1), Blob(2)});
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> fetches{0};
  auto fetch = [&](const consensus::TaskId&, const Hash256&) -> Status {
    fetches.fetch_add(1);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
    return OkStatus();
  };
  Status first;
  std::thread leader([&] { first = outputs.Fetch(Blob(1), {}, fetch); });
  while (fetches.load() == 0) std::this_thread::sleep_for(1ms);
  Status busy = outputs.Fetch(Blob(2), {}, fetch);
  EXPECT_EQ(busy.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(busy.message().find("outputs.max_fetches_in_flight"), std::string::npos) << busy.ToString();
  EXPECT_EQ(Metric("consensor_output_fetches_refused_total", {{"reason", "in_flight_cap"}}), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  leader.join();
  EXPECT_TRUE(first.ok()) << first.ToString();
  // The caller's budget refuses: nobody is dialed, and the blob is not put into backoff.
  Status refused = outputs.Fetch(
      Blob(2), [] { return ResourceExhausted("over output_fetches_per_minute"); }, fetch);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_TRUE(outputs.Fetch(Blob(2), {}, fetch).ok());
  EXPECT_EQ(fetches.load(), 2);
}

}  // namespace
}  // namespace consensor::node
