// What the consensus engine needs to know about the chain: the head, the active operators with
// their endpoints, and the operator set (with stakes) at any reference block. The interface is
// the seam for unit tests; RpcChainView polls a real chain through the ChainClient.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/committee.h"
#include "consensus/operator_set.h"
#include "node/chain/chain_client.h"
#include "node/chain/head_subscription.h"

namespace consensor::node {

class MetricsRegistry;

class ChainView {
 public:
  virtual ~ChainView() = default;
  virtual consensus::Eip712Domain domain() const = 0;
  virtual uint32_t threshold_bps() const = 0;
  // The deployment's R, W, E and replication floor (read once at start).
  virtual DeploymentParams deployment_params() const { return {}; }
  // The newest head seen by the poller (0 before the first poll).
  virtual uint64_t head() const = 0;
  // Asks the chain now (used when a peer names a block newer than the last poll).
  virtual StatusOr<uint64_t> RefreshHead() = 0;
  // Active operator at the last polled head.
  virtual bool IsActiveOperator(const Address20& address) const = 0;
  // Registered endpoints of the active operators (except `self`), as of the last poll.
  virtual std::vector<std::string> PeerEndpoints(const Address20& self) const = 0;
  virtual std::string EndpointOf(const Address20& address) const = 0;
  virtual size_t active_operators() const = 0;
  // Cached per block: the set at a past block never changes, unless a reorganization replaces
  // the block (RpcChainView drops what one replaced, up to kReorgHorizon blocks deep).
  virtual StatusOr<std::shared_ptr<const consensus::OperatorSet>> OperatorsAt(uint64_t block) = 0;
  // Hash of a mined block (it seeds committees, consensus/committee.h); NOT_FOUND before it is
  // mined.
  virtual StatusOr<Hash256> BlockHashAt(uint64_t block) = 0;
};

struct ChainViewOptions {
  std::string rpc_url;                            // JSON-RPC URL of the chain, e.g. http://127.0.0.1:8545
  std::string rpc_ca_file;                        // https: CA bundle instead of the system store
  std::chrono::milliseconds poll_interval{1000};  // how often the head and operator set are re-read
  // ws:// or wss:// endpoint for an eth_subscribe "newHeads" subscription (HeadSubscription):
  // each pushed head makes the view re-read the head at once instead of at its next poll.
  // Empty: polling only.
  std::string ws_url;
};

// An operator's registered endpoint is what every node dials: `host:port` (or `[v6]:port`),
// a port from 1 to 65535, at most 255 bytes. INVALID_ARGUMENT otherwise, saying why.
Status CheckPeerEndpoint(const std::string& endpoint);

class RpcChainView final : public ChainView {
 public:
  // How deep a reorganization each poll looks for. Deeper ones are not detected: choose
  // `chain.confirmations` so that they cannot happen (docs/NODE.md).
  static constexpr uint64_t kReorgHorizon = 128;

  // Connects, checks the chain id against the deployment and reads the contract's threshold.
  // With `metrics`, its JSON-RPC calls are counted there (NewMeteredRpcTransport, client "view").
  static StatusOr<std::unique_ptr<RpcChainView>> Open(const ChainViewOptions& options, const Deployment& deployment,
                                                      MetricsRegistry* metrics = nullptr);
  ~RpcChainView() override;
  // Polls once synchronously, then in the background; `on_change` runs once at start and after
  // each poll that changed the operator set or endpoints. With options.ws_url, also subscribes
  // to new heads (a failing subscription is retried in the background and never fails Start).
  Status Start(std::function<void()> on_change);
  void Shutdown();
  // Called with the new head each time a poll or a RefreshHead sees the head advance (outside
  // the view's locks), so that whoever waits for a block need not poll the view. Set before Start.
  void SetHeadListener(std::function<void(uint64_t head)> listener);

  consensus::Eip712Domain domain() const override { return client_->domain(); }
  uint32_t threshold_bps() const override { return threshold_bps_; }
  DeploymentParams deployment_params() const override { return params_; }
  uint64_t head() const override { return head_.load(); }
  StatusOr<uint64_t> RefreshHead() override;
  bool IsActiveOperator(const Address20& address) const override;
  std::vector<std::string> PeerEndpoints(const Address20& self) const override;
  std::string EndpointOf(const Address20& address) const override;
  size_t active_operators() const override;
  StatusOr<std::shared_ptr<const consensus::OperatorSet>> OperatorsAt(uint64_t block) override;
  StatusOr<Hash256> BlockHashAt(uint64_t block) override;

 private:
  RpcChainView() = default;
  Status PollOnce(bool* changed);
  StatusOr<std::shared_ptr<const consensus::OperatorSet>> FetchOperators(uint64_t block);
  // Compares the chain's recent block hashes with the ones seen before and drops every cached
  // operator set and block hash from the lowest block that changed on (a reorganization).
  Status DropWhatAReorgReplaced();

  std::unique_ptr<EthRpc> rpc_;
  std::unique_ptr<ChainClient> client_;
  std::mutex rpc_mu_;  // one request at a time on the chain client
  uint32_t threshold_bps_ = 0;
  DeploymentParams params_;
  std::chrono::milliseconds poll_interval_{};  // from ChainViewOptions
  std::atomic<uint64_t> head_{0};
  std::function<void(uint64_t)> head_listener_;  // set before Start, read-only afterwards

  mutable std::mutex mu_;
  std::map<Address20, std::string> active_;                                      // address -> endpoint
  std::map<uint64_t, std::shared_ptr<const consensus::OperatorSet>> snapshots_;  // newest blocks kept
  std::map<uint64_t, Hash256> block_hashes_;                                     // newest blocks kept
  std::map<uint64_t, Hash256> canonical_;  // the chain's recent block hashes as last polled
  uint64_t reorg_epoch_ = 0;               // reorganizations seen so far

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread poller_;
  std::string ws_url_;  // from ChainViewOptions
  std::string ca_file_;
  MetricsRegistry* metrics_ = nullptr;
  std::unique_ptr<HeadSubscription> head_subscription_;  // with ws_url_, from Start
};

}  // namespace consensor::node
