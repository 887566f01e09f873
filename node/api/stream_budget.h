// Concurrent GetBlob streams on the peer port (docs/NODE.md, p2p.max_blob_streams_per_operator
// and p2p.max_blob_streams_per_host). A GetBlob stream holds one of the peer listener's threads
// for as long as the reader takes, so one party that opens many and reads nothing could hold
// every thread of p2p.max_streams and silence this node's gossip.
//
// Two bounds, both checked when a stream opens:
// - per requester: an operator whose signature the request carries (node.proto,
//   GetBlobRequest) gets its own budget wherever it connects from, so operators sharing a host
//   (every operator of a devnet is 127.0.0.1) do not share one; unsigned requests from one host
//   share one such budget between them;
// - per host, the outer bound: everything from one remote address together, so a host cannot
//   multiply its budget with many keys (each key must also be a staked operator).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

struct StreamBudgetLimits {
  int64_t max_per_host = 32;      // <= 0: no bound per host
  int64_t max_per_operator = 16;  // <= 0: no bound per requester
};

class StreamBudget {
 public:
  StreamBudget(StreamBudgetLimits limits, MetricsRegistry* metrics);

  // An open stream; both its slots are given back when destroyed.
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
    std::string requester_;
  };
  // `requester` is the verified operator ("0x..." address) of a signed request, or empty for an
  // unsigned one. RESOURCE_EXHAUSTED naming the budget when the requester or the host has its
  // maximum open.
  StatusOr<Slot> Open(const std::string& host, const std::string& requester);

  int64_t open_streams() const;
  // Open streams of `requester` ("" with `host`: that host's unsigned ones).
  int64_t open_for(const std::string& host, const std::string& requester) const;

 private:
  static std::string RequesterKey(const std::string& host, const std::string& requester);

  const StreamBudgetLimits limits_;
  Counter* refused_by_operator_;
  Counter* refused_by_host_;
  Gauge* open_gauge_;
  mutable std::mutex mu_;
  // Entries with a stream open now only (bounded by the thread quota).
  std::map<std::string, int64_t> by_host_;
  std::map<std::string, int64_t> by_requester_;
  int64_t total_ = 0;
};

}  // namespace consensor::node
