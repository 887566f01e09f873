// Unit tests of the adoption queue (node/engine/adoption_queue.h): bounded in total and per
// announcer, one running job per announcer, announcers served in turn.
#include "node/engine/adoption_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace consensor::node {
namespace {

using namespace std::chrono_literals;

Address20 Announcer(uint8_t n) {
  Address20 a{};
  a.fill(n);
  return a;
}

bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// A gate jobs wait at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(AdoptionQueueTest, FullQueueAndFullAnnouncerAreResourceExhausted) {
  AdoptionQueue queue({.threads = 1, .max_pending = 3, .max_pending_per_announcer = 2});
  // Not started: everything stays queued.
  EXPECT_TRUE(queue.Add(Announcer(1), [] {}).ok());
  EXPECT_TRUE(queue.Add(Announcer(1), [] {}).ok());
  EXPECT_EQ(queue.Add(Announcer(1), [] {}).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(queue.Add(Announcer(2), [] {}).ok());
  EXPECT_EQ(queue.Add(Announcer(3), [] {}).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(queue.pending(), 3u);
  queue.Start();
  ASSERT_TRUE(Eventually([&] { return queue.pending() == 0; }));
  EXPECT_TRUE(queue.Add(Announcer(3), [] {}).ok());  // room again
  queue.Shutdown();
  EXPECT_EQ(queue.Add(Announcer(3), [] {}).code(), StatusCode::kUnavailable);
}

// Member fetches come before any queued adoption, and have bounds of their own: a full
// adoption queue refuses no member work.
TEST(AdoptionQueueTest, MemberWorkRunsFirstAndHasItsOwnBounds) {
  AdoptionQueue queue({.threads = 1, .max_pending = 2, .max_pending_per_announcer = 2});
  std::mutex order_mu;
  std::vector<std::string> order;
  auto job = [&](std::string name) {
    return [&, name] {
      std::lock_guard<std::mutex> lock(order_mu);
      order.push_back(name);
    };
  };
  // Not started: everything stays queued. Adoptions fill their queue first.
  ASSERT_TRUE(queue.Add(Announcer(1), job("adopt-1")).ok());
  ASSERT_TRUE(queue.Add(Announcer(2), job("adopt-2")).ok());
  EXPECT_EQ(queue.Add(Announcer(3), job("adopt-3")).code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(queue.Add(Announcer(2), job("member-2"), AdoptionPriority::kMember).ok());
  ASSERT_TRUE(queue.Add(Announcer(1), job("member-1"), AdoptionPriority::kMember).ok());
  EXPECT_EQ(queue.Add(Announcer(3), job("member-3"), AdoptionPriority::kMember).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(queue.pending(), 4u);
  queue.Start();
  ASSERT_TRUE(Eventually([&] { return queue.pending() == 0; }));
  queue.Shutdown();
  ASSERT_EQ(order.size(), 4u);
  // Both member jobs ran before either adoption (announcers in turn within each kind).
  EXPECT_EQ(order[0].substr(0, 6), "member");
  EXPECT_EQ(order[1].substr(0, 6), "member");
  EXPECT_EQ(order[2].substr(0, 5), "adopt");
  EXPECT_EQ(order[3].substr(0, 5), "adopt");
}

TEST(AdoptionQueueTest, AStuckAnnouncerHoldsOneThreadAndOthersAreServed) {
  AdoptionQueue queue({.threads = 2, .max_pending = 100, .max_pending_per_announcer = 50});
  Gate stuck;
  std::atomic<int> attacker_running{0}, attacker_started{0}, honest_done{0};
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(queue
                    .Add(Announcer(9),
                         [&] {
                           ++attacker_started;
                           EXPECT_EQ(++attacker_running, 1) << "two jobs of one announcer ran at once";
                           stuck.Wait();
                           --attacker_running;
                         })
                    .ok());
  }
  queue.Start();
  ASSERT_TRUE(Eventually([&] { return attacker_started.load() == 1; }));
  for (uint8_t a = 1; a <= 5; ++a) ASSERT_TRUE(queue.Add(Announcer(a), [&] { ++honest_done; }).ok());
  ASSERT_TRUE(Eventually([&] { return honest_done.load() == 5; }));
  EXPECT_EQ(attacker_started.load(), 1);
  stuck.Open();
  ASSERT_TRUE(Eventually([&] { return attacker_started.load() == 10 && queue.pending() == 0; }));
  queue.Shutdown();
}

TEST(AdoptionQueueTest, AnnouncersAreServedInTurn) {
  AdoptionQueue queue({.threads = 1, .max_pending = 100, .max_pending_per_announcer = 50});
  std::mutex mu;
  std::vector<int> order;
  // Announcer 1 queues five jobs before announcer 2 queues two: they alternate anyway.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(queue
                    .Add(Announcer(1),
                         [&] {
                           std::lock_guard<std::mutex> lock(mu);
                           order.push_back(1);
                         })
                    .ok());
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(queue
                    .Add(Announcer(2),
                         [&] {
                           std::lock_guard<std::mutex> lock(mu);
                           order.push_back(2);
                         })
                    .ok());
  }
  queue.Start();
  ASSERT_TRUE(Eventually([&] { return queue.pending() == 0; }));
  queue.Shutdown();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 1, 2, 1, 1, 1}));
}

}  // namespace
}  // namespace consensor::node
