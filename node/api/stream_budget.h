// Concurrent streams per remote host on the peer port (docs/NODE.md, p2p.max_blob_streams_per_host).
// A GetBlob stream holds one of the peer listener's threads for as long as the reader takes,
// so one host that opens many and reads nothing could hold every thread of p2p.max_streams and
// silence this node's gossip. Peers' GetBlob calls are not signed, so the key is the remote
// host, the only handle the call gives.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

class StreamBudget {
 public:
  // `max_per_host` <= 0: no limit.
  StreamBudget(int64_t max_per_host, MetricsRegistry* metrics);

  // An open stream of `host`'s; its slot is given back when destroyed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept { *this = std::move(other); }
    Slot& operator=(Slot&& other) noexcept;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class StreamBudget;
    StreamBudget* budget_ = nullptr;
    std::string host_;
  };
  // RESOURCE_EXHAUSTED naming the budget when `host` has max_per_host streams open.
  StatusOr<Slot> Open(const std::string& host);

  int64_t open_streams() const;

 private:
  const int64_t max_per_host_;
  Counter* refused_;
  Gauge* open_gauge_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> open_;  // hosts with a stream open now (bounded by the thread quota)
  int64_t total_ = 0;
};

}  // namespace consensor::node
