#include "node/chain/chain_view.h"

#include <optional>

#include "node/telemetry/http_server.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

constexpr size_t kMaxCachedSnapshots = 256;

}  // namespace

StatusOr<std::unique_ptr<RpcChainView>> RpcChainView::Open(const ChainViewOptions& options,
                                                           const Deployment& deployment, MetricsRegistry* metrics) {
  std::unique_ptr<RpcChainView> view(new RpcChainView());
  HttpRpcOptions http;
  http.timeout = std::chrono::milliseconds(5000);
  http.ca_file = options.rpc_ca_file;
  // The view only reads (a call sent twice is harmless); one connection instead of one per call
  // saves the node and the chain's RPC a TCP handshake and teardown on each of the many reads.
  http.reuse_connection = true;
  ASSIGN_OR_RETURN(auto transport, NewHttpRpcTransport(options.rpc_url, http));
  view->rpc_ = std::make_unique<EthRpc>(NewMeteredRpcTransport(std::move(transport), metrics, "view"));
  view->client_ = std::make_unique<ChainClient>(view->rpc_.get(), deployment, std::nullopt);
  view->poll_interval_ = options.poll_interval;
  view->ws_url_ = options.ws_url;
  view->ca_file_ = options.rpc_ca_file;
  view->metrics_ = metrics;
  if (!options.ws_url.empty()) RETURN_IF_ERROR(ParseWsRpcUrl(options.ws_url).status());
  RETURN_IF_ERROR(view->client_->CheckChain());
  ASSIGN_OR_RETURN(uint64_t bps, view->client_->ThresholdBps());
  if (bps == 0 || bps > 10000)
    return FailedPrecondition("the service manager's thresholdBps is " + std::to_string(bps));
  view->threshold_bps_ = static_cast<uint32_t>(bps);
  ASSIGN_OR_RETURN(view->params_, view->client_->ReadDeploymentParams());
  return view;
}

RpcChainView::~RpcChainView() { Shutdown(); }

Status RpcChainView::Start(std::function<void()> on_change) {
  bool changed = false;
  RETURN_IF_ERROR(PollOnce(&changed));
  if (on_change) on_change();
  if (!ws_url_.empty()) {
    HeadSubscriptionOptions ws;
    ws.url = ws_url_;
    ws.ca_file = ca_file_;
    // Only a wake-up: the head itself is read over HTTP, like the poll's. The push can come
    // before the HTTP side serves the block (anvil announces it first), so the read is retried
    // briefly until it shows the pushed block; a push that never shows up waits for the poll.
    auto on_head = [this](uint64_t pushed) {
      for (int attempt = 0; attempt < 50 && pushed > head_.load(); ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (StatusOr<uint64_t> head = RefreshHead(); !head.ok()) {
          Log(LogLevel::kDebug, "cannot read the chain head after a pushed one", {{"error", head.status().ToString()}});
          return;
        }
      }
    };
    ASSIGN_OR_RETURN(head_subscription_, HeadSubscription::Start(std::move(ws), std::move(on_head), metrics_));
  }
  poller_ = std::thread([this, on_change = std::move(on_change)] {
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stop_cv_.wait_for(lock, poll_interval_, [this] { return stopping_; })) {
      lock.unlock();
      bool changed_now = false;
      if (Status s = PollOnce(&changed_now); !s.ok()) {
        Log(LogLevel::kWarn, "chain poll failed", {{"error", s.ToString()}});
      } else if (changed_now && on_change) {
        on_change();
      }
      lock.lock();
    }
  });
  return OkStatus();
}

void RpcChainView::Shutdown() {
  if (head_subscription_) head_subscription_->Shutdown();  // it calls RefreshHead
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

StatusOr<uint64_t> RpcChainView::RefreshHead() {
  uint64_t block;
  {
    std::lock_guard<std::mutex> lock(rpc_mu_);
    ASSIGN_OR_RETURN(block, rpc_->BlockNumber());
  }
  uint64_t seen = head_.load();
  while (block > seen && !head_.compare_exchange_weak(seen, block)) {
  }
  // Only the caller whose exchange advanced the head tells the listener.
  if (block > seen && head_listener_) head_listener_(block);
  return std::max(block, seen);
}

Status RpcChainView::DropWhatAReorgReplaced() {
  uint64_t chain_head;
  {
    std::lock_guard<std::mutex> lock(rpc_mu_);
    ASSIGN_OR_RETURN(chain_head, rpc_->BlockNumber());
  }
  std::optional<uint64_t> fork;  // the lowest block whose hash changed
  uint64_t lowest_seen;
  bool seen_any;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen_any = !canonical_.empty();
    lowest_seen = seen_any ? canonical_.begin()->first : 0;
    // Blocks above a shorter new chain's head were replaced too.
    if (auto above = canonical_.upper_bound(chain_head); above != canonical_.end()) {
      fork = above->first;
      canonical_.erase(above, canonical_.end());
    }
  }
  // A block hash commits to every ancestor: walking down from the head, the first block whose
  // hash is unchanged ends the walk, and everything below it is as it was.
  auto lower_fork = [&fork](uint64_t n) { fork = fork ? std::min(*fork, n) : n; };
  std::vector<uint64_t> unverified;
  for (uint64_t n = chain_head; chain_head - n < kReorgHorizon; --n) {
    Hash256 hash;
    {
      std::lock_guard<std::mutex> lock(rpc_mu_);
      ASSIGN_OR_RETURN(hash, rpc_->BlockHash(n));
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = canonical_.find(n);
    const bool known = it != canonical_.end();
    if (known && it->second == hash) break;
    if (known) {
      lower_fork(n);
    } else if (auto cached_hash = block_hashes_.find(n); cached_hash != block_hashes_.end()) {
      // Read since the last poll, above the head it saw: its hash was cached beside it.
      if (cached_hash->second != hash) lower_fork(n);
    } else if (snapshots_.count(n) > 0) {
      unverified.push_back(n);  // no hash to check it against: read it again
    }
    canonical_[n] = hash;
    if (!known && (!seen_any || n < lowest_seen)) break;  // nothing older to compare with
    if (n == 0) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  while (canonical_.size() > kReorgHorizon) canonical_.erase(canonical_.begin());
  for (uint64_t n : unverified) snapshots_.erase(n);
  if (fork) {
    ++reorg_epoch_;  // a read that started before this must not be cached (FetchOperators)
    snapshots_.erase(snapshots_.lower_bound(*fork), snapshots_.end());
    block_hashes_.erase(block_hashes_.lower_bound(*fork), block_hashes_.end());
    Log(LogLevel::kWarn, "chain reorganization: dropped the cached operator sets and block hashes it replaced",
        {{"from_block", std::to_string(*fork)}, {"head", std::to_string(chain_head)}});
  }
  return OkStatus();
}

void RpcChainView::SetHeadListener(std::function<void(uint64_t head)> listener) {
  head_listener_ = std::move(listener);
}

Status RpcChainView::PollOnce(bool* changed) {
  RETURN_IF_ERROR(DropWhatAReorgReplaced());
  ASSIGN_OR_RETURN(uint64_t head, RefreshHead());
  ASSIGN_OR_RETURN(auto snapshot, OperatorsAt(head));
  std::map<Address20, std::string> active;
  for (const auto& op : snapshot->operators) {
    std::string endpoint;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = active_.find(op.address); it != active_.end()) endpoint = it->second;
    }
    // Endpoints can change (operators re-register elsewhere), so they are re-read every poll;
    // devnets and small networks make this cheap, and a failure keeps the last known value.
    StatusOr<OperatorInfo> info = [&]() -> StatusOr<OperatorInfo> {
      std::lock_guard<std::mutex> lock(rpc_mu_);
      return client_->GetOperatorInfo(op.address);
    }();
    if (info.ok()) {
      endpoint = info->endpoint;
      // Anyone can register any string; only a host:port is ever dialed.
      if (Status valid = CheckPeerEndpoint(endpoint); !endpoint.empty() && !valid.ok()) {
        Log(LogLevel::kWarn, "an operator's registered endpoint is not host:port; not dialing it",
            {{"operator", "0x" + ToHex(op.address)}, {"error", valid.message()}});
        endpoint.clear();
      }
    } else {
      Log(LogLevel::kWarn, "cannot read an operator's endpoint",
          {{"operator", "0x" + ToHex(op.address)}, {"error", info.status().ToString()}});
    }
    active[op.address] = endpoint;
  }
  std::lock_guard<std::mutex> lock(mu_);
  *changed = active != active_;
  active_ = std::move(active);
  return OkStatus();
}

Status CheckPeerEndpoint(const std::string& endpoint) {
  constexpr size_t kMaxEndpointBytes = 255;
  if (endpoint.size() > kMaxEndpointBytes) {
    return InvalidArgument("endpoint of " + std::to_string(endpoint.size()) + " bytes; at most " +
                           std::to_string(kMaxEndpointBytes) + " are allowed");
  }
  ASSIGN_OR_RETURN(auto host_port, SplitHostPort(endpoint));
  if (host_port.second == 0) return InvalidArgument("endpoint '" + endpoint + "' has port 0, which nobody can dial");
  return OkStatus();
}

bool RpcChainView::IsActiveOperator(const Address20& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_.count(address) > 0;
}

std::vector<std::string> RpcChainView::PeerEndpoints(const Address20& self) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [address, endpoint] : active_) {
    if (address != self && !endpoint.empty()) out.push_back(endpoint);
  }
  return out;
}

std::string RpcChainView::EndpointOf(const Address20& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(address);
  return it == active_.end() ? std::string() : it->second;
}

size_t RpcChainView::active_operators() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_.size();
}

StatusOr<std::shared_ptr<const consensus::OperatorSet>> RpcChainView::OperatorsAt(uint64_t block) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = snapshots_.find(block); it != snapshots_.end()) return it->second;
  }
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = reorg_epoch_;
  }
  // The block's hash before and after the read ties the set to one block: a set read across a
  // reorganization, or for a block not mined yet, is returned but not kept.
  auto hash_before = BlockHashAt(block);
  ASSIGN_OR_RETURN(auto snapshot, FetchOperators(block));
  StatusOr<Hash256> hash_after = NotFound("");
  if (hash_before.ok()) {
    std::lock_guard<std::mutex> lock(rpc_mu_);
    hash_after = rpc_->BlockHash(block);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch != reorg_epoch_ || !hash_before.ok() || !hash_after.ok() || *hash_before != *hash_after) return snapshot;
  snapshots_[block] = snapshot;
  // Old reference blocks are rarely asked again; keep the newest ones.
  while (snapshots_.size() > kMaxCachedSnapshots) snapshots_.erase(snapshots_.begin());
  return snapshot;
}

StatusOr<Hash256> RpcChainView::BlockHashAt(uint64_t block) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = block_hashes_.find(block); it != block_hashes_.end()) return it->second;
  }
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = reorg_epoch_;
  }
  Hash256 hash;
  {
    std::lock_guard<std::mutex> lock(rpc_mu_);
    ASSIGN_OR_RETURN(hash, rpc_->BlockHash(block));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch != reorg_epoch_) return hash;
  block_hashes_[block] = hash;
  while (block_hashes_.size() > kMaxCachedSnapshots) block_hashes_.erase(block_hashes_.begin());
  return hash;
}

StatusOr<std::shared_ptr<const consensus::OperatorSet>> RpcChainView::FetchOperators(uint64_t block) {
  std::vector<consensus::WeightedOperator> registered;
  {
    std::lock_guard<std::mutex> lock(rpc_mu_);
    ASSIGN_OR_RETURN(registered, client_->OperatorsAt(block));
  }
  return std::make_shared<const consensus::OperatorSet>(consensus::OperatorSet::FromRegistry(block, registered));
}

}  // namespace consensor::node
