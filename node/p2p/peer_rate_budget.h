// Per-peer rates on the peer port (docs/NODE.md, p2p.*): token buckets for requests that hold no
// stream, keyed like the GetBlob stream budget (node/api/stream_budget.h):
// - per requester: the operator a verified signature names, wherever it connects from, so
//   operators sharing a host (every operator of a devnet is 127.0.0.1) do not share a bucket;
//   unsigned requests of one host share one requester's bucket;
// - per remote host, the outer bound over all of them, charged only by requests their requester's
//   own bucket let through: an operator over its own rate spends nothing of its host's, so its
//   flood does not starve the other operators on that host.
// Each bucket holds up to 2x its rate per second (the burst) and starts full. A budget with only
// a host rate (per_requester <= 0) is a plain per-host bound, used before any signature is
// checked, where the requester is not known yet.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

struct PeerRateLimits {
  double per_requester = 0;  // requests per second; <= 0: no bound per requester
  double per_host = 0;       // requests per second; <= 0: no bound per host
};

// How a budget names itself in refusals and metrics.
struct PeerRateNames {
  std::string what;           // "GetTask and GetNodeInfo calls", "signature checks", ...
  std::string requester_key;  // the config key of the requester rate, e.g. "p2p.max_lookups_per_second_per_operator"
  std::string host_key;       // the config key of the host rate
  std::string metric;         // counter name; labels call=<one of calls> and budget="operator"|"host"
  std::string help;
  std::vector<std::string> calls;  // the values of the call label
};

class PeerRateBudget {
 public:
  PeerRateBudget(PeerRateLimits limits, PeerRateNames names, MetricsRegistry* metrics);

  // Charges one request of `call` (one of names.calls) from `requester` (a verified operator,
  // "0x...", or empty: unsigned) at `host`. OK, or RESOURCE_EXHAUSTED naming the budget and its
  // config key; a refusal takes nothing from either bucket.
  Status Take(const std::string& call, const std::string& host, const std::string& requester);

  // Refusals counted so far for `call` over the requester's ("operator") or the host's ("host")
  // budget.
  double refused(const std::string& call, const std::string& budget) const;

  // At most this many buckets of each kind are kept; fully refilled ones are forgotten first
  // (they carry no state), and if that is not enough a new key is refused as over the host's
  // budget: the memory an attacker with many addresses can make us hold is bounded.
  static constexpr size_t kMaxBuckets = 4096;

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };
  using Buckets = std::map<std::string, Bucket>;
  // The bucket of `key` refilled to `now` (created full), or null when the map is full.
  static Bucket* Refilled(Buckets& buckets, const std::string& key, double rate,
                          std::chrono::steady_clock::time_point now);

  const PeerRateLimits limits_;
  const PeerRateNames names_;
  std::map<std::string, std::pair<Counter*, Counter*>> refused_;  // call -> (operator, host)
  mutable std::mutex mu_;
  Buckets by_requester_;
  Buckets by_host_;
};

// The three budgets of the peer port, named as docs/NODE.md and docs/NETWORK.md list them:
// - GetTask and GetNodeInfo calls ("lookups"): p2p.max_lookups_per_second_per_operator and
//   p2p.max_lookups_per_second_per_host, counted in consensor_p2p_calls_refused_total;
// - Pull requests: p2p.max_pull_requests_per_second_per_operator and, as the outer bound,
//   p2p.max_pull_requests_per_second_per_ip, counted in the same metric with call="Pull";
// - signature checks (ECDSA recoveries) per remote host, before any of them is made:
//   p2p.max_signature_checks_per_second_per_host, counted in
//   consensor_p2p_signature_checks_refused_total{call}.
PeerRateNames LookupBudgetNames();
PeerRateNames PullBudgetNames();
PeerRateNames SignatureCheckBudgetNames();

}  // namespace consensor::node
