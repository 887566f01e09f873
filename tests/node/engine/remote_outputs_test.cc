// Unit tests of a non-member's on-demand outputs (node/engine/remote_outputs.h): bounds,
// single-flight, per-blob backoff, the in-flight cap and the caller's admission. The fetcher is
// a function the test controls; the clock is one it moves by hand. Persisted backoffs use a real
// RocksDB store, closed and reopened in between like a restart.
#include "node/engine/remote_outputs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
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

// Backoffs outlive a restart: a blob nobody served is refused after the store is reopened
// without dialing, until the persisted retry time; rows are capped, go with their entry, and
// expired, orphaned or malformed rows are dropped at the load.
TEST_F(RemoteOutputsTest, BackoffsArePersistedBoundedAndReloadedAfterARestart) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("consensor-remote-outputs-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::unique_ptr<Store> store;
  auto reopen = [&] {
    store.reset();
    auto s = OpenRocksDbStore((dir / "db").string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(s).value();
  };
  reopen();
  ASSERT_NE(store, nullptr);
  const int64_t wall_base = 1'790'000'000'000;
  auto wall = [&] { return wall_base + now_ms_.load(); };
  auto rows = [&] {
    std::map<std::string, std::string> out;
    EXPECT_TRUE(store
                    ->ForEachMeta(RemoteOutputs::kBackoffPrefix,
                                  [&](const std::string& k, const std::string& v) {
                                    out[k] = v;
                                    return OkStatus();
                                  })
                    .ok());
    return out;
  };
  auto key = [](int i) { return std::string(RemoteOutputs::kBackoffPrefix) + ToHex(Blob(i)); };
  RemoteOutputLimits limits;
  limits.backoff = 60000ms;
  limits.backoff_max = 600000ms;
  limits.max_persisted_backoffs = 2;
  auto clock = [this] { return SteadyClock::time_point(hours_) + now_ms_.load() * 1ms; };
  int fetches = 0;
  bool serve = false;
  auto fetch = [&](const consensus::TaskId&, const Hash256&) -> Status {
    ++fetches;
    return serve ? OkStatus() : Unavailable("no holder served it: holder-1: refused");
  };
  const std::vector<Hash256> blobs = {Blob(1), Blob(2), Blob(3)};
  {
    MetricsRegistry metrics;
    RemoteOutputs before(limits, &metrics, clock, store.get(), wall);
    before.Add(Task(1), blobs);
    for (const Hash256& b : blobs) EXPECT_EQ(before.Fetch(b, {}, fetch).code(), StatusCode::kUnavailable);
    EXPECT_EQ(fetches, 3);
    // Two rows, the cap; the third backoff is kept in memory only.
    EXPECT_EQ(before.persisted_backoffs(), 2u);
    EXPECT_EQ(metrics.AddCounter("consensor_output_backoffs_not_persisted_total", "")->Value(), 1);
    EXPECT_EQ(rows().size(), 2u);
    EXPECT_EQ(rows()[key(1)].rfind("1 " + std::to_string(wall_base + 60000) + "\n", 0), 0u) << rows()[key(1)];
  }  // no shutdown step: the rows were written when the fetches failed, as before a SIGKILL
  // Rows that must not come back: one for an output no longer recorded, one that does not parse.
  ASSERT_TRUE(store->PutMeta(key(9), "1 " + std::to_string(wall_base + 60000) + "\nx").ok());
  ASSERT_TRUE(store->PutMeta(key(2) + "zz", "1 5\nx").ok());
  reopen();
  now_ms_ += 20000;  // the restart took 20 s

  MetricsRegistry metrics;
  RemoteOutputs after(limits, &metrics, clock, store.get(), wall);
  after.Add(Task(1), blobs);
  ASSERT_TRUE(after.LoadBackoffs().ok());
  EXPECT_EQ(after.persisted_backoffs(), 2u);
  EXPECT_EQ(rows().size(), 2u) << "the orphaned and malformed rows are dropped";
  fetches = 0;
  for (int i = 0; i < 50; ++i) {
    Status s = after.Fetch(Blob(1), {}, fetch);
    ASSERT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("holder-1: refused"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("(in 40 s)"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(fetches, 0) << "refused from the persisted backoff without dialing";
  // The one kept in memory only was forgotten: one more round for it.
  EXPECT_EQ(after.Fetch(Blob(3), {}, fetch).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fetches, 1);

  // At the persisted retry time: one more round, then twice as long (failures carried over).
  now_ms_ += 40000;
  EXPECT_EQ(after.Fetch(Blob(1), {}, fetch).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fetches, 2);
  EXPECT_EQ(rows()[key(1)].rfind("2 " + std::to_string(wall() + 120000) + "\n", 0), 0u) << rows()[key(1)];
  // Served: the entry and its row go.
  now_ms_ += 120000;
  serve = true;
  EXPECT_TRUE(after.Fetch(Blob(1), {}, fetch).ok());
  EXPECT_EQ(rows().count(key(1)), 0u);
  EXPECT_EQ(after.persisted_backoffs(), 1u);

  // Expired rows do not come back after a restart: Blob(2)'s ran out long ago.
  reopen();
  MetricsRegistry metrics_again;
  RemoteOutputs later(limits, &metrics_again, clock, store.get(), wall);
  later.Add(Task(1), {Blob(2), Blob(3)});
  ASSERT_TRUE(later.LoadBackoffs().ok());
  EXPECT_EQ(later.persisted_backoffs(), 0u);
  EXPECT_TRUE(rows().empty());
  serve = false;
  const int before_expired = fetches;
  EXPECT_EQ(later.Fetch(Blob(2), {}, fetch).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fetches, before_expired + 1);
  // Retention deleting the task removes its rows with its entries.
  EXPECT_EQ(rows().size(), 1u);
  later.RemoveTask(Task(1));
  EXPECT_TRUE(rows().empty());
  store.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace consensor::node
