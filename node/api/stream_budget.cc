#include "node/api/stream_budget.h"

#include <utility>

namespace consensor::node {

namespace {

void Decrement(std::map<std::string, int64_t>& counts, const std::string& key) {
  if (auto it = counts.find(key); it != counts.end() && --it->second <= 0) counts.erase(it);
}

int64_t CountOf(const std::map<std::string, int64_t>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

StreamBudget::StreamBudget(StreamBudgetLimits limits, MetricsRegistry* metrics) : limits_(limits) {
  const char* help =
      "Peer-port GetBlob streams refused: the requesting operator (or a host's unsigned requests) had "
      "p2p.max_blob_streams_per_operator open, or the remote host p2p.max_blob_streams_per_host.";
  refused_by_operator_ = metrics->AddCounter("consensor_p2p_streams_refused_total", help, {{"budget", "operator"}});
  refused_by_host_ = metrics->AddCounter("consensor_p2p_streams_refused_total", help, {{"budget", "host"}});
  open_gauge_ = metrics->AddGauge("consensor_p2p_blob_streams", "Peer-port GetBlob streams open now.");
}

std::string StreamBudget::RequesterKey(const std::string& host, const std::string& requester) {
  // Unsigned requests of one host share one requester's budget.
  return requester.empty() ? "unsigned@" + host : requester;
}

StreamBudget::Slot& StreamBudget::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    host_ = std::move(other.host_);
    requester_ = std::move(other.requester_);
  }
  return *this;
}

void StreamBudget::Slot::Release() {
  if (budget_ == nullptr) return;
  StreamBudget* b = std::exchange(budget_, nullptr);
  std::lock_guard<std::mutex> lock(b->mu_);
  Decrement(b->by_host_, host_);
  Decrement(b->by_requester_, requester_);
  --b->total_;
  b->open_gauge_->Set(static_cast<double>(b->total_));
}

StatusOr<StreamBudget::Slot> StreamBudget::Open(const std::string& host, const std::string& requester) {
  const std::string key = RequesterKey(host, requester);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool requester_full = limits_.max_per_operator > 0 && CountOf(by_requester_, key) >= limits_.max_per_operator;
    const bool host_full = limits_.max_per_host > 0 && CountOf(by_host_, host) >= limits_.max_per_host;
    if (!requester_full && !host_full) {
      ++by_host_[host];
      ++by_requester_[key];
      ++total_;
      open_gauge_->Set(static_cast<double>(total_));
      Slot slot;
      slot.budget_ = this;
      slot.host_ = host;
      slot.requester_ = key;
      return slot;
    }
    if (requester_full) {
      refused_by_operator_->Increment();
      const std::string who = requester.empty() ? "unsigned requests from host " + host : "operator " + requester;
      return ResourceExhausted(who + (requester.empty() ? " have " : " has ") +
                               std::to_string(limits_.max_per_operator) +
                               " GetBlob streams open on this node's peer port, the budget "
                               "(p2p.max_blob_streams_per_operator); read or close one first");
    }
  }
  refused_by_host_->Increment();
  return ResourceExhausted("host " + host + " has " + std::to_string(limits_.max_per_host) +
                           " GetBlob streams open on this node's peer port, its budget "
                           "(p2p.max_blob_streams_per_host); read or close one first");
}

int64_t StreamBudget::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

int64_t StreamBudget::open_for(const std::string& host, const std::string& requester) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountOf(by_requester_, RequesterKey(host, requester));
}

}  // namespace consensor::node
