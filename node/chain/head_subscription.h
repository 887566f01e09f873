// New chain heads pushed by the chain endpoint (`eth_subscribe` "newHeads" over a WebSocket),
// so that every node learns a block within a round trip of its mining instead of at its next
// poll. It is only a wake-up: the caller re-reads the head over HTTP (RpcChainView::RefreshHead),
// so a lying or broken subscription can delay nothing that the poll does not also deliver.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace consensor::node {

class Counter;
class Gauge;
class MetricsRegistry;

struct HeadSubscriptionOptions {
  std::string url;      // ws:// or wss:// (ParseWsRpcUrl); user info is sent as HTTP Basic auth
  std::string ca_file;  // wss only: PEM CA bundle instead of the system store
  std::chrono::milliseconds connect_timeout{5000};  // TCP + TLS + WebSocket handshake + subscription
  // No frame (a head, or the pong to the ping sent at half of it) for this long: reconnect.
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds min_backoff{500};    // first wait after a failed or lost connection
  std::chrono::milliseconds max_backoff{30000};  // doubled on each failure up to this
  int64_t max_message_bytes = int64_t{1} << 20;  // a newHeads notification is about 1 KiB
};

class HeadSubscription {
 public:
  // Checks the URL and the CA file (INVALID_ARGUMENT) and starts a thread that connects,
  // subscribes and calls `on_head` (on that thread) with each new head's number. It reconnects
  // after any failure with a growing backoff, logging each failure once per connection. With
  // `metrics`: consensor_chain_ws_connected, consensor_chain_ws_heads_total and
  // consensor_chain_ws_failures_total.
  static StatusOr<std::unique_ptr<HeadSubscription>> Start(HeadSubscriptionOptions options,
                                                           std::function<void(uint64_t head)> on_head,
                                                           MetricsRegistry* metrics = nullptr);
  ~HeadSubscription();
  // Stops within about 100 ms, whatever the connection is doing.
  void Shutdown();

  // For tests: subscriptions established and heads delivered so far.
  uint64_t subscriptions() const { return subscriptions_.load(); }
  uint64_t heads() const { return heads_.load(); }
  uint64_t failures() const { return failures_.load(); }
  Status last_failure() const;  // OK before the first

 private:
  HeadSubscription() = default;
  void Run();
  // One connection, from connecting to its loss; OK only when asked to stop.
  Status Session();
  bool WaitBackoff(std::chrono::milliseconds wait);  // false when asked to stop

  struct Impl;
  std::unique_ptr<Impl> impl_;
  HeadSubscriptionOptions options_;
  std::function<void(uint64_t)> on_head_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> subscriptions_{0};
  std::atomic<uint64_t> heads_{0};
  std::atomic<uint64_t> failures_{0};
  mutable std::mutex failure_mu_;
  Status last_failure_;
  Gauge* connected_gauge_ = nullptr;
  Counter* heads_counter_ = nullptr;
  Counter* failures_counter_ = nullptr;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::thread thread_;
};

}  // namespace consensor::node
