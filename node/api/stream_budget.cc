#include "node/api/stream_budget.h"

#include <utility>

namespace consensor::node {

StreamBudget::StreamBudget(int64_t max_per_host, MetricsRegistry* metrics) : max_per_host_(max_per_host) {
  refused_ = metrics->AddCounter("consensor_p2p_streams_refused_total",
                                 "Peer-port GetBlob streams refused: the remote host had "
                                 "p2p.max_blob_streams_per_host open.");
  open_gauge_ = metrics->AddGauge("consensor_p2p_blob_streams", "Peer-port GetBlob streams open now.");
}

StreamBudget::Slot& StreamBudget::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    host_ = std::move(other.host_);
  }
  return *this;
}

void StreamBudget::Slot::Release() {
  if (budget_ == nullptr) return;
  StreamBudget* b = std::exchange(budget_, nullptr);
  std::lock_guard<std::mutex> lock(b->mu_);
  if (auto it = b->open_.find(host_); it != b->open_.end() && --it->second <= 0) b->open_.erase(it);
  --b->total_;
  b->open_gauge_->Set(static_cast<double>(b->total_));
}

StatusOr<StreamBudget::Slot> StreamBudget::Open(const std::string& host) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& open = open_[host];
    if (max_per_host_ <= 0 || open < max_per_host_) {
      ++open;
      ++total_;
      open_gauge_->Set(static_cast<double>(total_));
      Slot slot;
      slot.budget_ = this;
      slot.host_ = host;
      return slot;
    }
  }
  refused_->Increment();
  return ResourceExhausted("host " + host + " has " + std::to_string(max_per_host_) +
                           " GetBlob streams open on this node's peer port, its budget "
                           "(p2p.max_blob_streams_per_host); read or close one first");
}

int64_t StreamBudget::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

}  // namespace consensor::node
