#include "node/p2p/peer_rate_budget.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace consensor::node {

namespace {

std::string Rate(double per_second) {
  if (per_second == std::floor(per_second) && per_second < 1e15) {
    return std::to_string(static_cast<int64_t>(per_second));
  }
  return std::to_string(per_second);
}

}  // namespace

PeerRateBudget::PeerRateBudget(PeerRateLimits limits, PeerRateNames names, MetricsRegistry* metrics)
    : limits_(limits), names_(std::move(names)) {
  for (const std::string& call : names_.calls) {
    // A budget without a requester rate (signature checks) can only be over its host's.
    Counter* over_requester = limits_.per_requester > 0 ? metrics->AddCounter(names_.metric, names_.help,
                                                                              {{"call", call}, {"budget", "operator"}})
                                                        : nullptr;
    refused_[call] = {over_requester,
                      metrics->AddCounter(names_.metric, names_.help, {{"call", call}, {"budget", "host"}})};
  }
}

PeerRateBudget::Bucket* PeerRateBudget::Refilled(Buckets& buckets, const std::string& key, double rate,
                                                 std::chrono::steady_clock::time_point now) {
  const double burst = 2 * rate;
  auto it = buckets.find(key);
  if (it == buckets.end()) {
    if (buckets.size() >= kMaxBuckets) {
      const auto refill_time = std::chrono::duration<double>(burst / rate);
      std::erase_if(buckets, [&](const auto& entry) { return now - entry.second.last >= refill_time; });
      if (buckets.size() >= kMaxBuckets) return nullptr;
    }
    return &buckets.emplace(key, Bucket{burst, now}).first->second;
  }
  const double elapsed = std::chrono::duration<double>(now - it->second.last).count();
  it->second.tokens = std::min(burst, it->second.tokens + elapsed * rate);
  it->second.last = now;
  return &it->second;
}

Status PeerRateBudget::Take(const std::string& call, const std::string& host, const std::string& requester) {
  const auto counters = refused_.find(call);
  const auto now = std::chrono::steady_clock::now();
  const bool signed_request = !requester.empty();
  // Unsigned requests of one host share one requester's bucket.
  const std::string requester_key = signed_request ? requester : "unsigned@" + host;
  bool over_requester = false, over_host = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Bucket* mine = nullptr;
    Bucket* hosts = nullptr;
    if (limits_.per_requester > 0) {
      mine = Refilled(by_requester_, requester_key, limits_.per_requester, now);
      over_requester = mine == nullptr || mine->tokens < 1;
    }
    if (!over_requester && limits_.per_host > 0) {
      hosts = Refilled(by_host_, host, limits_.per_host, now);
      over_host = hosts == nullptr || hosts->tokens < 1;
    }
    if (!over_requester && !over_host) {
      if (mine != nullptr) mine->tokens -= 1;
      if (hosts != nullptr) hosts->tokens -= 1;
      return OkStatus();
    }
  }
  if (over_requester) {
    if (counters != refused_.end() && counters->second.first != nullptr) counters->second.first->Increment();
    const std::string who = signed_request ? "operator " + requester : "unsigned requests from host " + host;
    return ResourceExhausted(who + (signed_request ? " is" : " are") + " over its budget of " +
                             Rate(limits_.per_requester) + " " + names_.what +
                             " per second on this node's peer port (" + names_.requester_key + "); retry later");
  }
  if (counters != refused_.end()) counters->second.second->Increment();
  return ResourceExhausted("host " + host + " is over its budget of " + Rate(limits_.per_host) + " " + names_.what +
                           " per second on this node's peer port (" + names_.host_key + "); retry later");
}

double PeerRateBudget::refused(const std::string& call, const std::string& budget) const {
  auto it = refused_.find(call);
  if (it == refused_.end()) return 0;
  const Counter* counter = budget == "host" ? it->second.second : it->second.first;
  return counter == nullptr ? 0 : counter->Value();
}

namespace {
constexpr char kCallsRefusedHelp[] =
    "Unary peer-port calls refused over a per-peer rate: the requesting operator's (or a host's unsigned "
    "requests') budget=\"operator\", or the remote host's outer bound budget=\"host\".";
}  // namespace

PeerRateNames LookupBudgetNames() {
  return PeerRateNames{.what = "GetTask and GetNodeInfo calls",
                       .requester_key = "p2p.max_lookups_per_second_per_operator",
                       .host_key = "p2p.max_lookups_per_second_per_host",
                       .metric = "consensor_p2p_calls_refused_total",
                       .help = kCallsRefusedHelp,
                       .calls = {"GetTask", "GetNodeInfo"}};
}

PeerRateNames PullBudgetNames() {
  return PeerRateNames{.what = "Pull requests",
                       .requester_key = "p2p.max_pull_requests_per_second_per_operator",
                       .host_key = "p2p.max_pull_requests_per_second_per_ip",
                       .metric = "consensor_p2p_calls_refused_total",
                       .help = kCallsRefusedHelp,
                       .calls = {"Pull"}};
}

PeerRateNames SignatureCheckBudgetNames() {
  return PeerRateNames{
      .what = "signature checks",
      .requester_key = "",
      .host_key = "p2p.max_signature_checks_per_second_per_host",
      .metric = "consensor_p2p_signature_checks_refused_total",
      .help =
          "Signature checks (ECDSA recoveries) of gossip pushes and signed peer requests not made because "
          "the remote host was over p2p.max_signature_checks_per_second_per_host.",
      .calls = {"Gossip", "Pull", "GetBlob", "GetTask", "GetNodeInfo"}};
}

}  // namespace consensor::node
