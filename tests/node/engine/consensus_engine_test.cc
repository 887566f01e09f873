// Unit tests of the consensus engine (node/engine/consensus_engine.h) through its seams: a
// hand-made operator set behind a fake ChainView, gossip that records what would be published,
// an evidence submitter that records accusations, fake peers served from their own in-memory
// stores, and the in-memory Store. The task manager, the executor and the CPU backend are the
// real ones, so the roots this node signs are the ones the executor computes.
//
// Other operators are played by the test: their votes are signed with keys that are in the
// fake operator set, and a fake peer (a task manager of its own over its own store) executes
// the task when this node needs its blobs or its result. Time for the member deadline comes
// from a clock the test moves (ConsensusOptions::now); the engine's ticker still runs every
// 250 ms of real time, so a test waits at most a few ticks for a deadline it moved past.
//
// Every test also checks that the engine never called the chain while holding its lock: each
// ChainView call that may do I/O in the real view probes, from another thread, whether the
// engine's lock can be taken (see FakeChainView).
#include "node/engine/consensus_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/keccak.h"
#include "common/npy.h"
#include "common/sha256.h"
#include "common/uint256.h"
#include "consensus/attestation.h"
#include "consensus/committee.h"
#include "consensus/operator_set.h"
#include "executor/graph.h"
#include "executor/merkle.h"
#include "executor/serialize.h"
#include "node/engine/fault_injection.h"
#include "node/engine/task_manager.h"
#include "node/telemetry/metrics.h"
#include "node/telemetry/node_metrics.h"
#include "tests/node/engine/task_ids.h"
#include "tests/node/fakes/memory_store.h"

namespace consensor::node {
namespace {

using test_support::Id;

using namespace std::chrono_literals;
using executor::Value;
using fakes::MemoryStore;
using SteadyClock = std::chrono::steady_clock;

// Generous, so that a loaded machine makes a test slow, never failed.
constexpr auto kTimeout = 60s;
constexpr uint64_t kHead = 100;
constexpr uint64_t kConfirmations = 2;
constexpr uint64_t kReference = kHead - kConfirmations;  // what Submit plans against
constexpr uint32_t kThresholdBps = 6600;                 // dispute certificates: 3 of 4 equal stakes
constexpr auto kMemberTimeout = 5000ms;
constexpr auto kExhaustedGrace = 15000ms;
constexpr uint64_t kMaxReferenceAge = 8;
constexpr uint64_t kChallengeWindow = 4;
// The block whose hash seeds kReference's committees, and a head where it is settled.
constexpr uint64_t kSeedBlock = kReference + kMaxReferenceAge + 1;
constexpr uint64_t kSeated = kSeedBlock + kConfirmations;

const consensus::Eip712Domain kDomain{31337, Address20{0x51}};

// Operator i (1-based); operator 1 is the node under test.
Secp256k1Secret Key(int i) { return Keccak256("consensus engine test operator " + std::to_string(i)); }
Address20 Addr(int i) { return *AddressFromSecretKey(Key(i)); }
std::string Endpoint(int i) { return "peer-" + std::to_string(i) + ":7400"; }
Uint256 OneEther() { return *Uint256FromDecimal("1000000000000000000"); }

int OperatorNumber(const Address20& a, int operators) {
  for (int i = 1; i <= operators; ++i) {
    if (Addr(i) == a) return i;
  }
  return 0;
}

template <typename T>
T ValueOf(StatusOr<T> s) {
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : T();
}

// Polls `done` until it holds or kTimeout passes (for effects of the engine's background jobs,
// which have no notification of their own).
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = SteadyClock::now() + kTimeout;
  while (!done()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// ---- fakes

// A hand-made chain: a fixed operator set (equal stakes), domain, threshold and head.
//
// The engine must not call the chain while it holds its lock (docs/ARCHITECTURE.md). Each call
// that may do I/O in RpcChainView (OperatorsAt, RefreshHead, EndpointOf, PeerEndpoints,
// IsActiveOperator) runs `lock_probe_`, which asks another thread to take the engine's lock
// (ConsensusEngine::open_rounds) and waits for it. When the calling thread holds the lock,
// the other thread cannot finish until the call returns, the wait times out, and the call is
// counted in calls_under_lock(). domain() and threshold_bps() are not probed: the real view
// returns values it read once at startup, and the engine reads them under its lock on purpose.
class FakeChainView final : public ChainView {
 public:
  explicit FakeChainView(int operators) : operators_(operators) {
    for (int i = 1; i <= operators; ++i) registry_.push_back({Addr(i), OneEther()});
  }

  // `lock_free` returns false when the engine's lock could not be taken from another thread.
  void SetLockProbe(std::function<bool()> lock_free) {
    std::lock_guard<std::mutex> lock(mu_);
    lock_probe_ = std::move(lock_free);
  }

  consensus::Eip712Domain domain() const override { return kDomain; }
  uint32_t threshold_bps() const override { return kThresholdBps; }
  uint64_t head() const override { return head_.load(); }
  StatusOr<uint64_t> RefreshHead() override {
    Probe("RefreshHead");
    refresh_head_calls_.fetch_add(1);
    uint64_t seen = head_.load();
    const uint64_t chain = chain_head_.load();
    while (chain > seen && !head_.compare_exchange_weak(seen, chain)) {
    }
    return head_.load();
  }
  // The chain's head when it is ahead of what the view has polled (head()): RefreshHead sees it.
  void SetChainHead(uint64_t head) { chain_head_.store(head); }
  int refresh_head_calls() const { return refresh_head_calls_.load(); }
  void SetHead(uint64_t head) { head_.store(head); }
  bool IsActiveOperator(const Address20& address) const override {
    Probe("IsActiveOperator");
    std::lock_guard<std::mutex> lock(mu_);
    return OperatorNumber(address, operators_) != 0 && inactive_.count(address) == 0;
  }
  // The operator is registered but no longer active at the head (slashed or withdrawn).
  void Deactivate(const Address20& address) {
    std::lock_guard<std::mutex> lock(mu_);
    inactive_.insert(address);
  }
  std::vector<std::string> PeerEndpoints(const Address20& self) const override {
    Probe("PeerEndpoints");
    std::vector<std::string> endpoints;
    for (int i = 1; i <= operators_; ++i) {
      if (Addr(i) != self) endpoints.push_back(Endpoint(i));
    }
    return endpoints;
  }
  std::string EndpointOf(const Address20& address) const override {
    Probe("EndpointOf");
    const int i = OperatorNumber(address, operators_);
    return i == 0 ? "" : Endpoint(i);
  }
  size_t active_operators() const override { return static_cast<size_t>(operators_); }
  StatusOr<std::shared_ptr<const consensus::OperatorSet>> OperatorsAt(uint64_t block) override {
    Probe("OperatorsAt");
    const int call = operators_at_calls_.fetch_add(1) + 1;
    std::function<void(int)> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = operators_at_hook_;
    }
    if (hook) hook(call);
    return std::make_shared<const consensus::OperatorSet>(consensus::OperatorSet::FromRegistry(block, registry_));
  }

  // Runs in OperatorsAt with the call's number (1, 2, ...): a slow chain, on demand.
  void SetOperatorsAtHook(std::function<void(int)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    operators_at_hook_ = std::move(hook);
  }

  StatusOr<Hash256> BlockHashAt(uint64_t block) override {
    Probe("BlockHashAt");
    if (block > head_.load()) return NotFound("block " + std::to_string(block) + " is not mined yet");
    return HashOfBlock(block);
  }
  static Hash256 HashOfBlock(uint64_t block) {
    Hash256 h{};
    h.fill(0xb1);
    for (int i = 0; i < 8; ++i) h[31 - i] = static_cast<uint8_t>(block >> (8 * i));
    return h;
  }
  // The seed of tasks announced at kReference.
  Hash256 SeedHash() const { return HashOfBlock(kSeedBlock); }

  const std::vector<consensus::WeightedOperator>& registry() const { return registry_; }
  int operators_at_calls() const { return operators_at_calls_.load(); }
  std::vector<std::string> calls_under_lock() const {
    std::lock_guard<std::mutex> lock(mu_);
    return under_lock_;
  }

 private:
  std::atomic<uint64_t> head_{kHead};
  void Probe(const char* call) const {
    std::function<bool()> probe;
    {
      std::lock_guard<std::mutex> lock(mu_);
      probe = lock_probe_;
    }
    if (probe && !probe()) {
      std::lock_guard<std::mutex> lock(mu_);
      under_lock_.push_back(call);
    }
  }

  const int operators_;
  std::vector<consensus::WeightedOperator> registry_;
  mutable std::mutex mu_;
  std::set<Address20> inactive_;  // guarded by mu_
  std::function<bool()> lock_probe_;
  std::function<void(int)> operators_at_hook_;
  mutable std::vector<std::string> under_lock_;
  std::atomic<int> operators_at_calls_{0};
  std::atomic<int> refresh_head_calls_{0};
  std::atomic<uint64_t> chain_head_{0};
};

// Records what the engine publishes.
class RecordingGossip final : public GossipPublisher {
 public:
  StatusOr<Hash256> Publish(v1::GossipMessage message) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (on_publish_) on_publish_(message);
    const std::string bytes = message.SerializeAsString();
    messages_.push_back(std::move(message));
    cv_.notify_all();
    return Sha256Of(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
  std::vector<v1::GossipMessage> messages() const {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  std::vector<v1::SignedAttestation> attestations() const {
    std::vector<v1::SignedAttestation> out;
    for (const auto& m : messages()) {
      if (m.has_reveal()) out.push_back(m.reveal().attestation());
    }
    return out;
  }
  std::vector<v1::ResultCommitment> commitments() const {
    std::vector<v1::ResultCommitment> out;
    for (const auto& m : messages()) {
      if (m.has_commitment()) out.push_back(m.commitment());
    }
    return out;
  }
  // Waits until at least `count` commitments were published.
  [[nodiscard]] bool WaitForCommitments(size_t count) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] {
      return static_cast<size_t>(std::count_if(messages_.begin(), messages_.end(),
                                               [](const v1::GossipMessage& m) { return m.has_commitment(); })) >= count;
    });
  }
  // Waits until at least `count` attestations (reveals) were published.
  [[nodiscard]] bool WaitForAttestations(size_t count, std::chrono::milliseconds timeout = kTimeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      return static_cast<size_t>(std::count_if(messages_.begin(), messages_.end(),
                                               [](const v1::GossipMessage& m) { return m.has_reveal(); })) >= count;
    });
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.clear();
  }
  // Runs as each message is published (before it is recorded): a test looks at the store then.
  void SetOnPublish(std::function<void(const v1::GossipMessage&)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    on_publish_ = std::move(hook);
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<v1::GossipMessage> messages_;
  std::function<void(const v1::GossipMessage&)> on_publish_;
};

// Records every accusation the engine sends, with the accused recovered from the evidence the
// way the contract does.
class RecordingEvidence final : public EvidenceSubmitter {
 public:
  struct Accusation {
    std::string kind;
    Address20 accused{};
  };

  StatusOr<std::string> SlashEquivocation(const consensus::SignedAttestation& a,
                                          const consensus::SignedAttestation& b) override {
    auto first = consensus::RecoverAttestationSigner(kDomain, a.attestation, a.signature);
    auto second = consensus::RecoverAttestationSigner(kDomain, b.attestation, b.signature);
    EXPECT_TRUE(first.ok() && second.ok() && *first == *second) << "equivocation evidence from two signers";
    EXPECT_NE(a.attestation.result_root, b.attestation.result_root) << "equivocation over one result";
    return Record("equivocation", first.ok() ? *first : Address20{});
  }
  StatusOr<std::string> SlashDispute(const consensus::SignedAttestation& accused,
                                     const consensus::Certificate& certificate) override {
    auto signer = consensus::RecoverAttestationSigner(kDomain, accused.attestation, accused.signature);
    EXPECT_TRUE(signer.ok());
    EXPECT_NE(accused.attestation.result_root, certificate.attestation.result_root)
        << "accused of the certified result";
    return Record("dispute", signer.ok() ? *signer : Address20{});
  }

  std::vector<Accusation> accusations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return accusations_;
  }
  [[nodiscard]] bool WaitFor(size_t count) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return accusations_.size() >= count; });
  }

 private:
  StatusOr<std::string> Record(std::string kind, const Address20& accused) {
    std::lock_guard<std::mutex> lock(mu_);
    accusations_.push_back({std::move(kind), accused});
    cv_.notify_all();
    return "0x" + std::string(64, 'a' + static_cast<char>(accusations_.size() % 6));
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Accusation> accusations_;
};

// Another operator's node as far as this one can see it: a store with the task's blobs and a
// task manager (not in network mode) that executes the task, so its record carries the result
// and its output blobs.
struct PeerNode {
  MemoryStore store;
  MetricsRegistry registry;
  NodeMetrics metrics{&registry};
  std::unique_ptr<TaskManager> tasks;  // last: stops before the rest goes away

  PeerNode() {
    TaskManagerOptions options;
    options.workers = 1;
    tasks = std::make_unique<TaskManager>(&store, &metrics, options);
    EXPECT_TRUE(tasks->Recover().ok());
    tasks->Start();
  }
};

// Serves peers' stores and records over the PeerClient interface, as the gRPC client would:
// a failed request is UNAVAILABLE naming the endpoint, a sink error comes back as it is.
// `tamper` may rewrite a record before it is returned (a dishonest peer).
class FakePeerClient final : public PeerClient {
 public:
  void Add(const std::string& endpoint, PeerNode* peer) { peers_[endpoint] = peer; }
  void SetTamper(std::function<void(const std::string& endpoint, v1::Task*)> tamper) {
    std::lock_guard<std::mutex> lock(mu_);
    tamper_ = std::move(tamper);
  }

  // Fetches from `endpoint` hang until Release: an announcer that never serves its blobs.
  void Hold(const std::string& endpoint) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(endpoint);
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.clear();
    }
    released_.notify_all();
  }

  // Every peer answers blob requests UNAVAILABLE while set: outputs nobody serves.
  void RefuseBlobs(bool refuse) { refuse_blobs_.store(refuse); }

  Status FetchBlob(const std::string& endpoint, const Hash256& sha256, const BlobSink& sink) override {
    Log("blob " + ToHex(sha256) + " from " + endpoint);
    {
      std::unique_lock<std::mutex> lock(mu_);
      released_.wait(lock, [&] { return !held_.contains(endpoint); });
    }
    if (refuse_blobs_.load()) return Unavailable(endpoint + ": refuses to serve blobs");
    auto it = peers_.find(endpoint);
    if (it == peers_.end()) return Unavailable(endpoint + ": connection refused");
    Status sink_error = OkStatus();
    Status read = it->second->store.ReadBlob(sha256, [&](std::span<const uint8_t> bytes) {
      sink_error = sink(bytes);
      return sink_error;
    });
    if (!sink_error.ok()) return sink_error;
    if (!read.ok()) return Unavailable(endpoint + ": " + read.message());
    return OkStatus();
  }

  StatusOr<v1::Task> GetTask(const std::string& endpoint, const std::string& task_id_hex) override {
    Log("task " + task_id_hex + " from " + endpoint);
    auto it = peers_.find(endpoint);
    if (it == peers_.end()) return Unavailable(endpoint + ": connection refused");
    auto task = it->second->tasks->Get(Id(task_id_hex));
    if (!task.ok()) return Unavailable(endpoint + ": " + task.status().message());
    std::function<void(const std::string&, v1::Task*)> tamper;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tamper = tamper_;
    }
    if (tamper) tamper(endpoint, &*task);
    return *task;
  }

  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Log(std::string request) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(std::move(request));
  }

  std::map<std::string, PeerNode*> peers_;  // set before the engine starts
  mutable std::mutex mu_;
  std::function<void(const std::string&, v1::Task*)> tamper_;
  std::vector<std::string> requests_;
  std::set<std::string> held_;
  std::condition_variable released_;
  std::atomic<bool> refuse_blobs_{false};
};

// Passes every question to a real injector and records what the engine asked.
class WatchedInjector final : public FaultInjector {
 public:
  explicit WatchedInjector(FaultMode mode) : inner_(NewFaultInjector(mode)) {}
  void BeforeAnnouncing(uint32_t* replicas, uint32_t* quorum) override { inner_->BeforeAnnouncing(replicas, quorum); }
  uint64_t ReferenceBlock(uint64_t honest, uint64_t head, uint64_t max_reference_age) override {
    return inner_->ReferenceBlock(honest, head, max_reference_age);
  }
  void BeforeAttesting(const std::string& task_id_hex) override {
    inner_->BeforeAttesting(task_id_hex);
    Note();
  }
  void BeforeUnsyncedRecord(const std::string& task_id_hex) override {
    inner_->BeforeUnsyncedRecord(task_id_hex);
    if (before_unsynced_) before_unsynced_(task_id_hex);
  }
  // Runs in BeforeUnsyncedRecord, while that batch's write waits: set before the engine starts.
  void SetBeforeUnsyncedRecord(std::function<void(const std::string&)> hook) { before_unsynced_ = std::move(hook); }
  // True once the engine asked what to sign (it is attesting).
  bool Signed() const { return signed_.load(); }
  bool LosesOwnCommitmentRecord(const std::string& task_id_hex) override {
    return inner_->LosesOwnCommitmentRecord(task_id_hex);
  }
  void AfterOwnCommitmentSent(const std::string& task_id_hex) override { inner_->AfterOwnCommitmentSent(task_id_hex); }
  bool StaySilent(const std::string& task_id_hex) override {
    const bool silent = inner_->StaySilent(task_id_hex);
    Note();
    return silent;
  }
  bool CopiesRevealedVotes() override { return inner_->CopiesRevealedVotes(); }
  bool WithholdsReveal(const std::string& task_id_hex) override { return inner_->WithholdsReveal(task_id_hex); }
  bool StallsServedBlobs() override { return inner_->StallsServedBlobs(); }
  void HoldsOutputs(const std::vector<std::string>& blobs) override { inner_->HoldsOutputs(blobs); }
  bool CorruptsServedBlob(const std::string& blob) override { return inner_->CorruptsServedBlob(blob); }
  bool FailsMemberFetches() override { return inner_->FailsMemberFetches(); }
  bool RefusesAndFloodsPeers() override { return inner_->RefusesAndFloodsPeers(); }
  void SawAnnouncedBlobs(const std::vector<std::string>& blobs) override { inner_->SawAnnouncedBlobs(blobs); }
  std::vector<std::string> AnnouncedBlobs() override { return inner_->AnnouncedBlobs(); }
  std::vector<consensus::Attestation> ToSign(const std::string& task_id_hex,
                                             const consensus::Attestation& honest) override {
    signed_ = true;
    Note();
    return inner_->ToSign(task_id_hex, honest);
  }
  [[nodiscard]] bool WaitForQuestions(int count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return questions_ >= count; });
  }

 private:
  void Note() {
    std::lock_guard<std::mutex> lock(mu_);
    ++questions_;
    cv_.notify_all();
  }
  std::unique_ptr<FaultInjector> inner_;
  std::function<void(const std::string&)> before_unsynced_;
  std::atomic<bool> signed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int questions_ = 0;
};

// ---- the fixture

class ConsensusEngineTest : public ::testing::Test {
 protected:
  // The task: y = tanh(x @ w + b) and its row sums, with the bias in a weights blob, so that a
  // node adopting it fetches a graph, a weights blob and an input.
  void SetUp() override {
    const Tensor bias = Tensor::FromVector(DType::kF32, {3}, std::vector<float>{0.5f, -0.25f, 0.125f});
    bias_bytes_.assign(bias.bytes().begin(), bias.bytes().end());
    bias_hash_ = Sha256Of(bias_bytes_);
    executor::Graph graph;
    Value x = graph.input("x", DType::kF32, {2, 4});
    const Tensor weights = Tensor::FromVector(
        DType::kF32, {4, 3},
        std::vector<float>{0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, 0.9f, -1.0f, 1.1f, 1.2f});
    Value y = tanh(matmul(x, graph.constant(weights, "w")) + graph.constant_blob(bias_hash_, DType::kF32, {3}, "b"));
    graph.output("y", y);
    graph.output("row_sum", reduce_sum(y, {1}));
    graph_bytes_ = executor::SerializeGraph(graph);
    graph_hash_ = Sha256Of(graph_bytes_);
    const Tensor x_value = Tensor::FromVector(DType::kF32, {2, 4},
                                              std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f});
    x_bytes_ = EncodeNpy(x_value);
    x_hash_ = Sha256Of(x_bytes_);
  }

  void TearDown() override {
    peer_client_.Release();
    StopNode();
    for (auto& [i, peer] : peers_) peer->tasks->Shutdown();
  }

  // The network: `operators` operators with equal stake, each with a fake peer node holding the
  // task's blobs; operator 1 is this node. Blobs are in this node's store only if it is the
  // entry node (`entry`).
  void MakeNetwork(int operators, bool entry) {
    operators_ = operators;
    chain_ = std::make_unique<FakeChainView>(operators);
    for (int i = 2; i <= operators; ++i) {
      auto peer = std::make_unique<PeerNode>();
      PutBlobs(peer->store);
      peer_client_.Add(Endpoint(i), peer.get());
      peers_[i] = std::move(peer);
    }
    if (entry) PutBlobs(store_);
  }

  // Starts (or restarts over the same store) this node's task manager and engine, recovered as
  // the daemon does at startup.
  void StartNode(FaultInjector* faults = nullptr) {
    StopNode();
    registry_ = std::make_unique<MetricsRegistry>();
    metrics_ = std::make_unique<NodeMetrics>(registry_.get());
    TaskManagerOptions to;
    to.workers = 1;
    to.network_mode = true;
    to.on_executed = [this](const consensus::TaskId& id, const v1::TaskResult& result) {
      if (engine_) engine_->OnExecuted(id, result);
    };
    to.budget = budget_;
    tasks_ = std::make_unique<TaskManager>(&store_, metrics_.get(), to);
    ASSERT_TRUE(tasks_->Recover().ok());
    ConsensusOptions co;
    co.default_replicas = 3;
    co.default_quorum = 2;
    co.member_timeout = kMemberTimeout;
    co.exhausted_grace = kExhaustedGrace;
    co.commit_grace = commit_grace_;  // 0: windows close at the quorum of commitments
    co.confirmations = kConfirmations;
    co.max_reference_age = kMaxReferenceAge;
    co.reference_margin_blocks = kMaxReferenceAge - kConfirmations;  // new tasks at kReference
    co.challenge_window_blocks = kChallengeWindow;
    co.tick_interval = tick_interval_;
    co.remote_outputs = remote_limits_;
    co.now = [this] {
      return SteadyClock::time_point(std::chrono::hours(1000)) + std::chrono::milliseconds(now_ms_.load());
    };
    EngineParts parts;
    parts.chain = chain_.get();
    parts.tasks = tasks_.get();
    parts.store = &store_;
    parts.metrics = registry_.get();
    parts.peers = &peer_client_;
    parts.evidence = &evidence_;
    parts.faults = faults;
    parts.budget = budget_;
    engine_ = std::make_unique<ConsensusEngine>(co, Key(1), parts, orphan_limits_);
    engine_->SetGossip(&gossip_);
    ConsensusEngine* engine = engine_.get();
    chain_->SetLockProbe([this, engine] { return EngineLockFree(engine); });
    Status recovered = engine_->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.ToString();
    tasks_->Start();
    engine_->Start();
  }

  void StopNode() {
    if (engine_) engine_->Shutdown();
    if (tasks_) tasks_->Shutdown();
    if (chain_) chain_->SetLockProbe(nullptr);
    std::vector<std::thread> probes;
    {
      std::lock_guard<std::mutex> lock(probes_mu_);
      probes.swap(probes_);
    }
    for (auto& t : probes) t.join();
    if (chain_) {
      EXPECT_EQ(chain_->calls_under_lock(), std::vector<std::string>{}) << "chain calls under the engine lock";
    }
    engine_.reset();
    tasks_.reset();
  }

  // True when another thread takes the engine's lock within 5 s. The thread is joined at
  // StopNode: when the lock is held by the caller it can only finish after the call returns.
  bool EngineLockFree(ConsensusEngine* engine) {
    auto taken = std::make_shared<std::promise<void>>();
    std::future<void> done = taken->get_future();
    {
      std::lock_guard<std::mutex> lock(probes_mu_);
      probes_.emplace_back([engine, taken] {
        (void)engine->open_rounds();
        taken->set_value();
      });
    }
    return done.wait_for(5s) == std::future_status::ready;
  }

  void PutBlobs(Store& store) {
    ASSERT_TRUE(store.PutBlob(graph_bytes_).ok());
    ASSERT_TRUE(store.PutBlob(bias_bytes_).ok());
    ASSERT_TRUE(store.PutBlob(x_bytes_).ok());
  }

  v1::SubmitTaskRequest Request(uint64_t nonce, uint32_t replicas, uint32_t quorum) const {
    v1::SubmitTaskRequest request;
    request.set_graph_sha256(ToHex(graph_hash_));
    (*request.mutable_inputs())["x"] = ToHex(x_hash_);
    request.mutable_options()->set_nonce(nonce);
    request.mutable_options()->set_replicas(replicas);
    request.mutable_options()->set_quorum(quorum);
    return request;
  }

  Hash256 TaskId(const v1::SubmitTaskRequest& request) const {
    // Any task manager computes the id; the first peer's needs no blobs for it.
    return ValueOf(peers_.begin()->second->tasks->IdOf(request)).bytes();
  }

  // The committee order of a task at kReference over the whole operator set.
  std::vector<Address20> Order(const v1::SubmitTaskRequest& request) const {
    return ValueOf(consensus::CommitteeOrder(TaskId(request), kReference, chain_->SeedHash(), chain_->registry(),
                                             chain_->registry().size()));
  }

  // The first request (by nonce) whose committee order puts this node at `position` (0-based).
  v1::SubmitTaskRequest RequestWithSelfAt(size_t position, uint32_t replicas, uint32_t quorum) const {
    for (uint64_t nonce = 1; nonce < 1000; ++nonce) {
      v1::SubmitTaskRequest request = Request(nonce, replicas, quorum);
      std::vector<Address20> order = Order(request);
      if (position < order.size() && order[position] == Addr(1)) return request;
    }
    ADD_FAILURE() << "no nonce puts this node at position " << position;
    return Request(0, replicas, quorum);
  }

  // SubmitTask on this node. Execution is held (where the worker loads the input) until Submit
  // has returned, so that the node's own vote finds its round open.
  std::string Submit(const v1::SubmitTaskRequest& request) {
    struct Hold {
      std::mutex mu;
      std::condition_variable cv;
      bool released = false;
    };
    auto hold = std::make_shared<Hold>();  // the hook may run after this frame is gone
    const Hash256 input = x_hash_;
    store_.SetGetBlobHook([hold, input](const Hash256& h) {
      if (h != input) return OkStatus();
      std::unique_lock<std::mutex> lock(hold->mu);
      hold->cv.wait_for(lock, kTimeout, [&] { return hold->released; });
      return OkStatus();
    });
    // Planned at kReference; the committee is drawn once the seed block is settled.
    chain_->SetHead(kHead);
    auto outcome = engine_->Submit(request);
    chain_->SetHead(kSeated);
    {
      std::lock_guard<std::mutex> lock(hold->mu);
      hold->released = true;
    }
    hold->cv.notify_all();
    store_.SetGetBlobHook(nullptr);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.ok() ? outcome->task_id.Hex() : "";
  }

  // SubmitTask on this node with the chain at kHead, left there: the task waits for its seed
  // block, and whatever seats it is up to the test.
  std::string SubmitWaitingForItsSeed(const v1::SubmitTaskRequest& request) {
    chain_->SetHead(kHead);
    auto outcome = engine_->Submit(request);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.ok() ? outcome->task_id.Hex() : "";
  }

  // Three operators, no timer tick during the test (what happens came from an event), and a
  // task submitted here, this node first in its order, that waits for its seed block. Call
  // through ASSERT_NO_FATAL_FAILURE.
  void StartWithATaskWaitingForItsSeed(v1::SubmitTaskRequest* request, std::string* id) {
    MakeNetwork(3, /*entry=*/true);
    tick_interval_ = std::chrono::hours(1);
    ASSERT_NO_FATAL_FAILURE(StartNode());
    *request = RequestWithSelfAt(0, 3, 2);
    *id = SubmitWaitingForItsSeed(*request);
  }

  // A peer's announcement of `request`, as gossip hands it to the engine.
  Status Announce(const v1::SubmitTaskRequest& request, int announcer) {
    v1::GossipMessage message;
    *message.mutable_announcement()->mutable_spec() = request;
    message.mutable_announcement()->set_reference_block(kReference);
    chain_->SetHead(kHead);  // peers accept it until kReference + kMaxReferenceAge
    Status accepted = engine_->OnMessage(message, Hash256{}, Addr(announcer));
    chain_->SetHead(kSeated);
    return accepted;
  }

  // Operator `signer`'s vote for the task, as gossip hands it to the engine under commit-reveal:
  // its commitment, then the reveals of every peer that committed so far (again: a reveal sent
  // before the window closed did not count, one that counted is a no-op), each with every
  // commitment known, this node's own included.
  Status Vote(int signer, const std::string& task_id_hex, const std::string& result_root_hex,
              const std::string& trace_root_hex) {
    consensus::SignedAttestation vote;
    vote.attestation.task_id = ValueOf(Hash256FromHex(task_id_hex));
    vote.attestation.result_root = ValueOf(Hash256FromHex(result_root_hex));
    vote.attestation.trace_root = ValueOf(Hash256FromHex(trace_root_hex));
    vote.attestation.reference_block = kReference;
    vote.signature = ValueOf(consensus::SignAttestation(Key(signer), kDomain, vote.attestation));
    // An honest peer commits in the round the task is in: the dispute's once it saw conflict.
    auto record = tasks_->Get(Id(task_id_hex));
    const consensus::VotePhase phase = record.ok() && record->consensus().disputed() ? consensus::VotePhase::kDispute
                                                                                     : consensus::VotePhase::kCommittee;
    RETURN_IF_ERROR(Commit(signer, vote, phase));
    const std::string key = task_id_hex + "/" + std::to_string(static_cast<int>(phase));
    std::vector<v1::ResultCommitment> bundle;
    for (const auto& [who, c] : peer_votes_[key]) bundle.push_back(c.second);
    for (const auto& m : gossip_.messages()) {
      if (m.has_commitment() && m.commitment().task_id() == task_id_hex &&
          m.commitment().phase() == static_cast<uint32_t>(phase)) {
        bundle.push_back(m.commitment());
      }
    }
    // Peers reveal once the window is closed, which they see when this node does (they admit
    // the same commitments): until then a reveal would not count.
    // (The commitment may have waited as an orphan for the round to open: allow it a moment.)
    const auto closed = [&] {
      auto t = tasks_->Get(Id(task_id_hex));
      return t.ok() && (t->consensus().closed_commit_windows() & (1u << static_cast<int>(phase))) != 0;
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!closed() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
    if (!closed()) return OkStatus();
    for (const auto& [who, c] : peer_votes_[key]) {
      v1::GossipMessage message;
      *message.mutable_reveal()->mutable_attestation() = ToProto(c.first, Addr(who));
      message.mutable_reveal()->set_phase(static_cast<uint32_t>(phase));
      for (const auto& b : bundle) *message.mutable_reveal()->add_commitments() = b;
      RETURN_IF_ERROR(engine_->OnMessage(message, Hash256{}, Addr(who)));
    }
    return OkStatus();
  }
  // Only the commitment of operator `signer` to `vote`; its reveal goes with the next Vote.
  Status Commit(int signer, const consensus::SignedAttestation& vote,
                consensus::VotePhase phase = consensus::VotePhase::kCommittee) {
    auto commitment = consensus::SignCommitment(Key(signer), kDomain, vote, Addr(signer), phase);
    RETURN_IF_ERROR(commitment.status());
    v1::GossipMessage message;
    *message.mutable_commitment() = ToProto(*commitment, Addr(signer));
    const std::string key = ToHex(vote.attestation.task_id) + "/" + std::to_string(static_cast<int>(phase));
    peer_votes_[key][signer] = {vote, message.commitment()};
    return engine_->OnMessage(message, Hash256{}, Addr(signer));
  }
  // Operator `signer` commits to `result` and reveals nothing yet: enough for this node's
  // commit window to close when it is the quorum's other half.
  Status CommitOnly(int signer, const std::string& task_id_hex, const v1::TaskResult& result) {
    consensus::SignedAttestation vote;
    vote.attestation.task_id = ValueOf(Hash256FromHex(task_id_hex));
    vote.attestation.result_root = ValueOf(Hash256FromHex(result.result_root()));
    vote.attestation.trace_root = ValueOf(Hash256FromHex(result.trace_root()));
    vote.attestation.reference_block = kReference;
    vote.signature = ValueOf(consensus::SignAttestation(Key(signer), kDomain, vote.attestation));
    return Commit(signer, vote);
  }
  Status Vote(int signer, const std::string& task_id_hex, const v1::TaskResult& result) {
    return Vote(signer, task_id_hex, result.result_root(), result.trace_root());
  }

  // The honest result, computed by operator `i`'s peer node.
  v1::TaskResult PeerResult(int i, const v1::SubmitTaskRequest& request) {
    TaskManager& tasks = *peers_.at(i)->tasks;
    v1::SubmitTaskRequest plain = request;  // the peer runs it outside network mode
    auto outcome = tasks.Submit(plain);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) return {};
    auto task = WaitUntil(tasks, outcome->task_id.Hex(),
                          [](const v1::Task& t) { return t.state() == v1::TASK_STATE_SUCCEEDED; });
    return task.result();
  }

  static v1::Task WaitUntil(TaskManager& tasks, const std::string& id,
                            const std::function<bool(const v1::Task&)>& done) {
    const auto deadline = SteadyClock::now() + kTimeout;
    auto task = tasks.Get(Id(id));
    while (task.ok() && !done(*task) && SteadyClock::now() < deadline) {
      // Wakes on a change, and re-reads every 200 ms anyway: WaitForChange watches the state
      // and progress fields, not every field a condition may look at (a replaced result).
      task = tasks.WaitForChange(Id(id), *task, std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(200)),
                                 nullptr);
      if (task.ok() && !done(*task)) task = tasks.Get(Id(id));
    }
    EXPECT_TRUE(task.ok() && done(*task)) << (task.ok() ? v1::TaskState_Name(task->state()) : task.status().ToString());
    return task.ok() ? *task : v1::Task();
  }
  v1::Task WaitForTask(const std::string& id, const std::function<bool(const v1::Task&)>& done) {
    return WaitUntil(*tasks_, id, done);
  }
  // For a task this node does not know yet (adoption runs in the background).
  // Adopted and its committee drawn from the seed block.
  v1::Task WaitForAdoption(const std::string& id) {
    EXPECT_TRUE(Eventually([&] {
      auto t = tasks_->Get(Id(id));
      return t.ok() && t->consensus().committee_size() > 0;
    })) << "task "
        << id << " never adopted and seated";
    return ValueOf(tasks_->Get(Id(id)));
  }

  static bool Certified(const v1::Task& t) {
    return t.state() == v1::TASK_STATE_SUCCEEDED && t.consensus().has_certificate();
  }
  static bool HasResult(const v1::Task& t) { return t.has_result(); }

  // SubmitTask on this node, then waits until it has executed the task and gossiped its
  // commitment. Call through ASSERT_NO_FATAL_FAILURE.
  void SubmitAndExecute(const v1::SubmitTaskRequest& request, std::string* id, v1::Task* executed) {
    *id = Submit(request);
    ASSERT_TRUE(gossip_.WaitForCommitments(1));
    *executed = WaitForTask(*id, HasResult);
  }

  // A task that other operators run: the first request whose committee order puts this node at
  // `self_position`, executed on the peer nodes of the first `executed` other operators.
  struct PeersTask {
    v1::SubmitTaskRequest request;
    std::string id;
    std::vector<int> others;  // the operators other than this node, in committee order
    v1::TaskResult result;    // the honest result, as the first of them computed it
  };
  PeersTask PeersTaskWithSelfAt(size_t self_position, uint32_t replicas, uint32_t quorum, size_t executed) {
    PeersTask task;
    task.request = RequestWithSelfAt(self_position, replicas, quorum);
    for (const Address20& a : Order(task.request)) {
      if (a != Addr(1)) task.others.push_back(OperatorNumber(a, operators_));
    }
    for (size_t i = 0; i < executed; ++i) {
      v1::TaskResult result = PeerResult(task.others.at(i), task.request);
      if (i == 0) task.result = result;
    }
    task.id = ToHex(TaskId(task.request));
    return task;
  }

  // `task` announced by the first other operator, and adopted and seated here. Call through
  // ASSERT_NO_FATAL_FAILURE.
  void AdoptPeersTask(const PeersTask& task, v1::Task* adopted = nullptr) {
    ASSERT_TRUE(Announce(task.request, task.others.at(0)).ok());
    v1::Task seated = WaitForAdoption(task.id);
    if (adopted) *adopted = seated;
  }

  // The first two other operators vote for `task`'s honest result; waits until it is certified
  // here. Call through ASSERT_NO_FATAL_FAILURE.
  void CertifyByPeers(const PeersTask& task, v1::Task* certified) {
    ASSERT_TRUE(Vote(task.others.at(0), task.id, task.result).ok());
    ASSERT_TRUE(Vote(task.others.at(1), task.id, task.result).ok());
    *certified = WaitForTask(task.id, Certified);
  }

  static std::set<std::string> Signers(const v1::Certificate& c) { return {c.signers().begin(), c.signers().end()}; }
  // The addresses (hex) of operators `a` and `b`, as Signers lists them.
  static std::set<std::string> AddressesOf(int a, int b) { return {AddressHex(Addr(a)), AddressHex(Addr(b))}; }
  static bool HasCertificate(const v1::Task& t) { return t.consensus().has_certificate(); }

  void AdvanceClock(std::chrono::milliseconds d) { now_ms_.fetch_add(d.count()); }

  std::string SelfHex() const { return AddressHex(Addr(1)); }

  std::vector<uint8_t> graph_bytes_, bias_bytes_, x_bytes_;
  Hash256 graph_hash_{}, bias_hash_{}, x_hash_{};

  int operators_ = 0;
  OrphanPoolLimits orphan_limits_;    // set before StartNode
  RemoteOutputLimits remote_limits_;  // set before StartNode
  DiskBudget* budget_ = nullptr;      // set before StartNode
  // Set before StartNode. Long: no timer runs during the test, so what happens came from an event.
  std::chrono::milliseconds tick_interval_{250};
  std::chrono::milliseconds commit_grace_{0};  // set before StartNode
  std::atomic<int64_t> now_ms_{0};
  std::unique_ptr<FakeChainView> chain_;
  RecordingGossip gossip_;
  // Peer votes sent so far, by "task id/phase" and signer: the vote and its commitment.
  std::map<std::string, std::map<int, std::pair<consensus::SignedAttestation, v1::ResultCommitment>>> peer_votes_;
  RecordingEvidence evidence_;
  FakePeerClient peer_client_;
  std::map<int, std::unique_ptr<PeerNode>> peers_;
  MemoryStore store_;
  std::mutex probes_mu_;
  std::vector<std::thread> probes_;
  std::unique_ptr<MetricsRegistry> registry_;
  std::unique_ptr<NodeMetrics> metrics_;
  std::unique_ptr<TaskManager> tasks_;
  std::unique_ptr<ConsensusEngine> engine_;  // last: goes first
};

// ---- submission

TEST_F(ConsensusEngineTest, SubmitPlansStoresAndAnnouncesThenAttests) {
  MakeNetwork(3, /*entry=*/true);
  // Whether the store held this node's commitment when the commitment was published.
  std::atomic<bool> commitment_written_before_sent{false};
  gossip_.SetOnPublish([&](const v1::GossipMessage& m) {
    if (!m.has_commitment()) return;
    bool written = false;
    for (const MemoryStore::TaskWrite& w : store_.TaskWrites()) {
      v1::Task record;
      if (!record.ParseFromString(w.record)) continue;
      for (const auto& c : record.consensus().commitments())
        written = written || c.signature() == m.commitment().signature();
    }
    commitment_written_before_sent = written;
  });
  StartNode();
  v1::SubmitTaskRequest request = Request(1, 0, 0);  // the node's defaults: 3 replicas, quorum 2
  const std::string id = Submit(request);
  ASSERT_FALSE(id.empty());
  EXPECT_GT(chain_->operators_at_calls(), 0);

  // The announcement goes out first, with the resolved options (the protocol version too: the
  // id covers it) and the reference block.
  std::vector<v1::GossipMessage> sent = gossip_.messages();
  ASSERT_FALSE(sent.empty());
  ASSERT_TRUE(sent[0].has_announcement());
  v1::SubmitTaskRequest resolved = Request(1, 3, 2);
  resolved.mutable_options()->set_protocol_version(consensus::kProtocolVersion);
  EXPECT_EQ(sent[0].announcement().spec().SerializeAsString(), resolved.SerializeAsString());
  EXPECT_EQ(sent[0].announcement().reference_block(), kReference);

  // The stored plan, once the seed block is settled: the committee is the order's first three,
  // this node among them.
  v1::Task task = WaitForAdoption(id);
  const v1::TaskConsensus& plan = task.consensus();
  EXPECT_EQ(plan.reference_block(), kReference);
  EXPECT_EQ(plan.replicas(), 3u);
  EXPECT_EQ(plan.quorum(), 2u);
  std::vector<std::string> expected;
  for (const Address20& a : Order(resolved)) expected.push_back(AddressHex(a));
  EXPECT_EQ(std::vector<std::string>(plan.committee().begin(), plan.committee().end()), expected);
  EXPECT_TRUE(plan.member());
  EXPECT_EQ(plan.announcer(), SelfHex());
  EXPECT_GT(plan.announced_unix_ms(), 0);

  // A member executes and gossips a commitment to its vote first (commit-reveal)...
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  task = WaitForTask(id, HasResult);
  const v1::ResultCommitment commitment = gossip_.commitments().at(0);
  EXPECT_EQ(commitment.task_id(), id);
  // Its own commitment went out after a write of it (first in the WAL: no later write of the task
  // can be durable without it), with no sync of its own; nor had the seated member's `queued`
  // write one: recovery queues such a task again (SeatedMembersWritesBeforeTheRevealMayBeLost...).
  {
    std::optional<MemoryStore::TaskWrite> first_with_commitment, queued;
    for (const MemoryStore::TaskWrite& w : store_.TaskWrites()) {
      v1::Task record;
      if (w.task_id != Id(id).Key() || !record.ParseFromString(w.record)) continue;
      if (!queued && record.state() == v1::TASK_STATE_QUEUED) queued = w;
      if (record.consensus().commitments_size() > 0) {
        first_with_commitment = w;
        break;
      }
    }
    ASSERT_TRUE(first_with_commitment.has_value());
    EXPECT_EQ(first_with_commitment->durability, Durability::kDeferred);
    ASSERT_TRUE(queued.has_value());
    EXPECT_EQ(queued->durability, Durability::kDeferred);
    EXPECT_TRUE(commitment_written_before_sent.load());
  }
  EXPECT_EQ(commitment.phase(), 0u);
  EXPECT_EQ(commitment.signer(), SelfHex());
  EXPECT_TRUE(gossip_.attestations().empty());
  // ...and its signed vote for the executor's roots once another member's commitment closes the
  // window (2 of 3).
  ASSERT_TRUE(CommitOnly(2, id, task.result()).ok());
  ASSERT_TRUE(gossip_.WaitForAttestations(1));
  const v1::SignedAttestation vote = gossip_.attestations().at(0);
  EXPECT_EQ(vote.task_id(), id);
  EXPECT_EQ(vote.result_root(), task.result().result_root());
  EXPECT_EQ(vote.trace_root(), task.result().trace_root());
  EXPECT_EQ(vote.reference_block(), kReference);
  EXPECT_EQ(vote.signer(), SelfHex());
  auto parsed = FromProto(vote);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(ValueOf(consensus::RecoverAttestationSigner(kDomain, parsed->attestation, parsed->signature)), Addr(1));
  auto committed = FromProto(commitment);
  ASSERT_TRUE(committed.ok());
  EXPECT_EQ(committed->commitment, consensus::VoteCommitment(*parsed, Addr(1)));
  EXPECT_EQ(ValueOf(consensus::RecoverCommitmentSigner(kDomain, *committed)), Addr(1));
  EXPECT_EQ(gossip_.messages().back().reveal().commitments_size(), 2);  // the two that closed the window
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().closed_commit_windows() == 1u; });
  EXPECT_EQ(task.consensus().commitments_size(), 2);
  EXPECT_EQ(task.state(), v1::TASK_STATE_CERTIFYING);  // one vote of two

  // The same task again: known, not announced again.
  const size_t before = gossip_.messages().size();
  auto again = engine_->Submit(resolved);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_known);
  EXPECT_EQ(gossip_.messages().size(), before);
  gossip_.SetOnPublish(nullptr);
}

// A node whose operator was slashed (or withdrew) still serves reads, but refuses new tasks with
// the reason: peers would drop its announcement and the task could never be certified.
TEST_F(ConsensusEngineTest, SubmitRefusedWhenThisNodeIsNoLongerAnActiveOperator) {
  MakeNetwork(4, /*entry=*/true);
  StartNode();
  chain_->Deactivate(Addr(1));
  auto outcome = engine_->Submit(Request(1, 3, 2));
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kFailedPrecondition) << outcome.status().ToString();
  EXPECT_NE(outcome.status().message().find("is not an active operator"), std::string::npos)
      << outcome.status().ToString();
  EXPECT_TRUE(gossip_.messages().empty());
}

TEST_F(ConsensusEngineTest, SubmitRefusesMoreReplicasThanOperators) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  auto outcome = engine_->Submit(Request(1, 5, 3));
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kFailedPrecondition) << outcome.status().ToString();
  EXPECT_TRUE(gossip_.messages().empty());
}

// ---- votes and certificates

TEST_F(ConsensusEngineTest, VotesFromPeersCertifyTheTask) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  std::string id;
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(SubmitAndExecute(Request(1, 3, 2), &id, &task));
  EXPECT_EQ(engine_->open_rounds(), 1u);

  ASSERT_TRUE(Vote(2, id, task.result()).ok());
  task = WaitForTask(id, Certified);
  const v1::Certificate& cert = task.consensus().certificate();
  EXPECT_EQ(cert.task_id(), id);
  EXPECT_EQ(cert.result_root(), task.result().result_root());
  EXPECT_EQ(cert.trace_root(), task.result().trace_root());
  EXPECT_EQ(cert.reference_block(), kReference);
  EXPECT_EQ(Signers(cert), (std::set<std::string>{SelfHex(), AddressHex(Addr(2))}));
  EXPECT_EQ(cert.signatures_size(), 2);
  EXPECT_EQ(cert.quorum(), 2u);
  EXPECT_EQ(cert.committee_size(), 3u);
  EXPECT_EQ(cert.replicas(), 3u);
  EXPECT_FALSE(cert.dispute());
  EXPECT_EQ(task.consensus().attestations_size(), 2);
  EXPECT_EQ(engine_->open_rounds(), 0u);
  EXPECT_TRUE(evidence_.accusations().empty());
}

// A peer's commitment that leaves the window open is written without a sync of its own: it gates
// nothing this node sends, and a restart finds the window open either way. The write that closes
// the window on it is synced (a reveal may follow it), and covers the earlier one.
TEST_F(ConsensusEngineTest, PeersCommitmentIsWrittenUnsyncedUntilTheWindowClosesOnIt) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  // Three replicas, this node fourth in the order: it only follows the round.
  const PeersTask peers = PeersTaskWithSelfAt(3, 3, 2, /*executed=*/1);
  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(peers));
  const std::string key = Id(peers.id).Key();
  auto last_write = [&](v1::Task* record) {
    std::optional<MemoryStore::TaskWrite> last;
    for (const MemoryStore::TaskWrite& w : store_.TaskWrites()) {
      if (w.task_id == key) last = w;
    }
    EXPECT_TRUE(last.has_value());
    if (last) EXPECT_TRUE(record->ParseFromString(last->record));
    return last ? last->durability : Durability::kSynced;
  };

  ASSERT_TRUE(CommitOnly(peers.others.at(0), peers.id, peers.result).ok());
  WaitForTask(peers.id, [](const v1::Task& t) { return t.consensus().commitments_size() == 1; });
  v1::Task record;
  EXPECT_EQ(last_write(&record), Durability::kDeferred);
  EXPECT_EQ(record.consensus().commitments_size(), 1);
  EXPECT_EQ(record.consensus().closed_commit_windows(), 0u);

  ASSERT_TRUE(CommitOnly(peers.others.at(1), peers.id, peers.result).ok());
  WaitForTask(peers.id, [](const v1::Task& t) { return t.consensus().closed_commit_windows() == 1u; });
  EXPECT_EQ(last_write(&record), Durability::kSynced);
  EXPECT_EQ(record.consensus().commitments_size(), 2);
  EXPECT_EQ(record.consensus().closed_commit_windows(), 1u);
}

// Certified first, final once the chain passes the challenge window (consensus/finality.h); the
// round stays open meanwhile, so a conflicting vote that arrives late still starts a dispute.
TEST_F(ConsensusEngineTest, CertifiedThenFinalAfterTheChallengeWindow) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  std::string id;
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(SubmitAndExecute(Request(1, 3, 2), &id, &task));
  ASSERT_TRUE(Vote(2, id, task.result()).ok());
  task = WaitForTask(id, Certified);
  const uint64_t final_block = kReference + kMaxReferenceAge + 1 + kChallengeWindow;
  EXPECT_EQ(task.consensus().final_block(), final_block);
  EXPECT_FALSE(task.consensus().final());

  // The window's last block is still inside it.
  chain_->SetHead(final_block);
  std::this_thread::sleep_for(600ms);  // two ticks of the engine's real-time ticker
  EXPECT_FALSE(ValueOf(tasks_->Get(Id(id))).consensus().final());
  // A conflicting vote inside the window is still counted: the round was kept.
  v1::TaskResult other = task.result();
  other.set_result_root(std::string(64, 'e'));
  ASSERT_TRUE(Vote(3, id, other).ok());
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().disputed(); });
  EXPECT_TRUE(task.consensus().disputed());

  chain_->SetHead(final_block + 1);
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().final(); });
  EXPECT_TRUE(task.consensus().final());
  EXPECT_EQ(task.consensus().final_block(), final_block);
  // A restart keeps what is final final...
  StartNode();
  EXPECT_TRUE(ValueOf(tasks_->Get(Id(id))).consensus().final());

  // ...and a node restarted inside another task's window still closes it.
  chain_->SetHead(kHead);
  const std::string second = Submit(Request(2, 3, 2));
  v1::Task t2 = WaitForTask(second, HasResult);
  ASSERT_TRUE(Vote(2, second, t2.result()).ok());
  t2 = WaitForTask(second, Certified);
  EXPECT_FALSE(t2.consensus().final());
  StartNode();
  chain_->SetHead(t2.consensus().final_block() + 1);
  t2 = WaitForTask(second, [](const v1::Task& t) { return t.consensus().final(); });
  EXPECT_TRUE(t2.consensus().final());
}

// Issue 18: a non-member's cost per task is constant. It adopts the announcement without any
// blob, records the certified result (names, tensor hashes, blob names) from a signer without the
// outputs, and fetches an output only when a client asks for it, checked against the certificate.
TEST_F(ConsensusEngineTest, ObserverAdoptsWithoutBlobsAndFetchesOutputsOnDemand) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  // Two replicas, this node third in the order: an observer.
  const PeersTask peers = PeersTaskWithSelfAt(2, 2, 2, /*executed=*/2);
  const int first = peers.others[0], second = peers.others[1];
  const v1::TaskResult& result = peers.result;

  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(peers, &task));
  EXPECT_EQ(task.state(), v1::TASK_STATE_CERTIFYING);
  EXPECT_FALSE(task.consensus().member());
  EXPECT_EQ(task.consensus().announcer(), AddressHex(Addr(first)));
  EXPECT_EQ(task.consensus().committee_size(), 2);
  // Not a member: nothing was fetched.
  EXPECT_FALSE(store_.BlobSize(graph_hash_).ok());
  EXPECT_FALSE(store_.BlobSize(bias_hash_).ok());
  EXPECT_FALSE(store_.BlobSize(x_hash_).ok());
  EXPECT_EQ(peer_client_.requests(), std::vector<std::string>{});

  ASSERT_NO_FATAL_FAILURE(CertifyByPeers(peers, &task));
  EXPECT_EQ(Signers(task.consensus().certificate()), AddressesOf(first, second));
  // The result record came from a signer; its outputs stayed with the committee.
  EXPECT_EQ(task.result().result_root(), result.result_root());
  ASSERT_EQ(task.result().outputs_size(), result.outputs_size());
  for (const auto& out : task.result().outputs()) {
    EXPECT_FALSE(store_.BlobSize(ValueOf(Hash256FromHex(out.blob_sha256()))).ok()) << out.name();
  }
  for (const std::string& r : peer_client_.requests()) EXPECT_EQ(r.rfind("blob ", 0), std::string::npos) << r;
  // A client asks: each output is fetched, checked and kept.
  for (const auto& out : task.result().outputs()) {
    const Hash256 blob = ValueOf(Hash256FromHex(out.blob_sha256()));
    Status fetched = engine_->FetchOutputOnDemand(blob);
    ASSERT_TRUE(fetched.ok()) << fetched.ToString();
    EXPECT_TRUE(store_.BlobSize(blob).ok()) << out.name();
  }
  // A blob that is no certified output is not fetched from anyone.
  EXPECT_EQ(engine_->FetchOutputOnDemand(x_hash_).code(), StatusCode::kNotFound);
  EXPECT_FALSE(store_.BlobSize(x_hash_).ok());
  EXPECT_TRUE(gossip_.attestations().empty());  // an observer never signs
}

// A node that keeps outputs (here a committee member of the extended kind is not needed: the
// observer fetches on demand) never takes an output that does not hold the certified tensor:
// both signers name the input blob as the first output. The record's tensor hashes make up the
// certified root, so the record is taken; the output is refused when a client asks for it, and
// the blob it names is not kept.
TEST_F(ConsensusEngineTest, CertifiedResultWhoseOutputsDoNotMatchIsRefused) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  const PeersTask peers = PeersTaskWithSelfAt(2, 2, 2, /*executed=*/2);
  // Both signers serve a record whose first output names another blob (the input): the blob
  // itself arrives intact, but it does not hold the tensor the certified root commits to.
  peer_client_.SetTamper([&](const std::string&, v1::Task* t) {
    t->mutable_result()->mutable_outputs(0)->set_blob_sha256(ToHex(x_hash_));
  });

  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(peers));
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(CertifyByPeers(peers, &task));
  // Both signers were asked, and neither result was taken.
  auto asked = [&] {
    int n = 0;
    for (const std::string& r : peer_client_.requests()) n += r.rfind("task ", 0) == 0;
    return n;
  };
  EXPECT_GE(asked(), 1);
  ASSERT_EQ(task.result().outputs(0).blob_sha256(), ToHex(x_hash_));
  Status fetched = engine_->FetchOutputOnDemand(x_hash_);
  EXPECT_EQ(fetched.code(), StatusCode::kUnavailable) << fetched.ToString();
  EXPECT_NE(fetched.message().find("matching its certificate"), std::string::npos) << fetched.ToString();
  EXPECT_FALSE(store_.BlobSize(x_hash_).ok()) << "a blob that does not hold the certified tensor was kept";
  // The other output is named right and arrives.
  EXPECT_TRUE(engine_->FetchOutputOnDemand(ValueOf(Hash256FromHex(task.result().outputs(1).blob_sha256()))).ok());
}

// Issue 18, the attacker: clients flood a non-member with GetBlob for an output that no holder
// serves. Concurrent requests share one round of fetches, and once it failed on every holder the
// blob backs off: requests fail at once, naming the failures and the retry time, and nobody is
// dialed until the backoff expires (then one more round, twice as long after it). The node
// keeps certifying other tasks meanwhile, and serves the output once a holder does.
TEST_F(ConsensusEngineTest, FloodForAnOutputNobodyServesDialsTheHoldersABoundedNumberOfTimes) {
  remote_limits_.backoff = 5000ms;
  remote_limits_.backoff_max = 60000ms;
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  const PeersTask peers = PeersTaskWithSelfAt(2, 2, 2, /*executed=*/2);
  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(peers));
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(CertifyByPeers(peers, &task));
  ASSERT_EQ(engine_->remote_outputs(), static_cast<size_t>(task.result().outputs_size()));
  const Hash256 blob = ValueOf(Hash256FromHex(task.result().outputs(0).blob_sha256()));
  const std::string blob_request = "blob " + ToHex(blob) + " from ";
  auto dialed = [&] {
    int n = 0;
    for (const std::string& r : peer_client_.requests()) n += r.rfind(blob_request, 0) == 0;
    return n;
  };
  auto counter = [&](const std::string& name, const MetricsRegistry::Labels& labels = {}) {
    return registry_->AddCounter(name, "", labels)->Value();
  };

  peer_client_.RefuseBlobs(true);
  constexpr int kClients = 8, kRequestsEach = 25;
  std::atomic<int> unavailable{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kRequestsEach; ++i) {
        Status s = engine_->FetchOutputOnDemand(blob);
        if (s.code() == StatusCode::kUnavailable && s.message().find("refuses to serve blobs") != std::string::npos) {
          unavailable.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(unavailable.load(), kClients * kRequestsEach) << "every request fails naming the holders' failures";
  // One round: each holder (the announcer and the two signers, without duplicates) once.
  const int holders = dialed();
  EXPECT_GE(holders, 1);
  EXPECT_LE(holders, 3);
  EXPECT_EQ(counter("consensor_output_fetches_started_total"), 1);
  EXPECT_EQ(counter("consensor_output_fetches_coalesced_total") +
                counter("consensor_output_fetches_refused_total", {{"reason", "backoff"}}),
            kClients * kRequestsEach - 1);
  Status refused = engine_->FetchOutputOnDemand(blob);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("tries again after"), std::string::npos) << refused.ToString();
  EXPECT_EQ(dialed(), holders);

  // The backoff expires: one more round, then twice as long.
  now_ms_ += 5000;
  EXPECT_EQ(engine_->FetchOutputOnDemand(blob).code(), StatusCode::kUnavailable);
  EXPECT_EQ(dialed(), 2 * holders);
  now_ms_ += 9999;
  EXPECT_EQ(engine_->FetchOutputOnDemand(blob).code(), StatusCode::kUnavailable);
  EXPECT_EQ(dialed(), 2 * holders);
  EXPECT_EQ(counter("consensor_output_fetches_started_total"), 2);

  // The node keeps certifying: another task, this node an observer again.
  const PeersTask next = PeersTaskWithSelfAt(3, 2, 2, /*executed=*/2);
  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(next));
  v1::Task next_task;
  ASSERT_NO_FATAL_FAILURE(CertifyByPeers(next, &next_task));
  EXPECT_TRUE(next_task.has_result());

  // A holder serves again: the next attempt after the backoff gets the output.
  peer_client_.RefuseBlobs(false);
  now_ms_ += 1;
  Status served = engine_->FetchOutputOnDemand(blob);
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_TRUE(store_.BlobSize(blob).ok());
}

// Issue 18: the outputs a non-member recorded without their bytes are bounded, forgotten with
// their task when retention deletes it, and rebuilt from the stored results at a restart (the
// newest first within the bounds; backoffs start afresh).
TEST_F(ConsensusEngineTest, RemoteOutputsAreBoundedRebuiltAndForgottenWithTheirTask) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  const PeersTask peers = PeersTaskWithSelfAt(2, 2, 2, /*executed=*/2);
  const std::string& id = peers.id;
  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(peers));
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(CertifyByPeers(peers, &task));
  ASSERT_EQ(task.result().outputs_size(), 2);
  EXPECT_EQ(engine_->remote_outputs(), 2u);
  EXPECT_EQ(registry_->AddGauge("consensor_remote_outputs", "")->Value(), 2);

  StartNode();  // a restart: rebuilt from the stored result
  EXPECT_EQ(engine_->remote_outputs(), 2u);
  remote_limits_.max_entries = 1;
  StartNode();
  EXPECT_EQ(engine_->remote_outputs(), 1u);
  remote_limits_ = RemoteOutputLimits{};
  StartNode();

  // Final, then deleted by retention (as the node's task deleter does): nothing is left to
  // fetch, and nobody is dialed for it.
  chain_->SetHead(task.consensus().final_block() + 1);
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().final(); });
  ASSERT_TRUE(tasks_->DeleteUnpinned(Id(id).Key()).ok());
  engine_->OnTaskDeleted(Id(id));
  EXPECT_EQ(engine_->remote_outputs(), 0u);
  const size_t requests = peer_client_.requests().size();
  EXPECT_EQ(engine_->FetchOutputOnDemand(ValueOf(Hash256FromHex(task.result().outputs(0).blob_sha256()))).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(peer_client_.requests().size(), requests);
}

TEST_F(ConsensusEngineTest, VoteForAnUnknownTaskIsKeptAndCountedOnceAdopted) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  const PeersTask peers = PeersTaskWithSelfAt(2, 2, 2, /*executed=*/1);
  const int first = peers.others[0], second = peers.others[1];
  const v1::SubmitTaskRequest& request = peers.request;
  const v1::TaskResult& result = peers.result;
  const std::string& id = peers.id;

  // The vote outruns the announcement: accepted (so gossip relays it), kept aside.
  ASSERT_TRUE(Vote(first, id, result).ok());
  EXPECT_EQ(tasks_->Get(Id(id)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->open_rounds(), 0u);

  ASSERT_TRUE(Announce(request, second).ok());
  v1::Task task = WaitForTask(WaitForAdoption(id).task_id(),
                              [](const v1::Task& t) { return t.consensus().commitments_size() == 1; });
  EXPECT_EQ(task.consensus().commitments(0).signer(), AddressHex(Addr(first)));
  EXPECT_FALSE(task.consensus().has_certificate());

  // The second committee vote completes the quorum with the kept one.
  ASSERT_TRUE(Vote(second, id, result).ok());
  task = WaitForTask(id, HasCertificate);
  EXPECT_EQ(Signers(task.consensus().certificate()), AddressesOf(first, second));
}

// Votes for a task not open here are kept only once their signature recovers to an active
// operator, and each signer gets a bounded share of the pool: a registered attacker spamming
// commitments for tasks nobody announces cannot crowd out an honest member's early vote, and
// a vote refused for lack of room is welcome again once the attacker's orphans expire.
TEST_F(ConsensusEngineTest, OrphanVotesAreVerifiedAndBoundedPerSigner) {
  MakeNetwork(4, /*entry=*/false);
  VoteMessage a_commitment;
  a_commitment.commitment.emplace();
  const size_t one = OrphanBytes(a_commitment);
  orphan_limits_ = {.max_bytes = 5 * one, .max_bytes_per_signer = 2 * one, .lifetime = std::chrono::minutes(2)};
  StartNode();
  const PeersTask peers = PeersTaskWithSelfAt(2, 2, 2, /*executed=*/1);
  const int first = peers.others[0], second = peers.others[1];
  const int attacker = peers.others[2];  // the operator neither member nor this node
  const v1::SubmitTaskRequest& request = peers.request;
  const v1::TaskResult& result = peers.result;
  const std::string& id = peers.id;
  const auto Junk = [&](int signer, uint8_t task) {
    consensus::SignedAttestation vote;
    vote.attestation.task_id.fill(task);
    vote.attestation.reference_block = kReference;
    vote.signature = ValueOf(consensus::SignAttestation(Key(signer), kDomain, vote.attestation));
    return Commit(signer, vote);
  };

  // Not an operator: refused, and kept nowhere.
  EXPECT_EQ(Junk(9, 0xe0).code(), StatusCode::kPermissionDenied);
  // A signature that does not verify: refused.
  {
    v1::GossipMessage forged;
    consensus::SignedAttestation vote;
    vote.attestation.task_id.fill(0xe1);
    vote.attestation.reference_block = kReference;
    auto commitment = ValueOf(
        consensus::SignCommitment(Key(attacker), kDomain, vote, Addr(attacker), consensus::VotePhase::kCommittee));
    commitment.signature[64] = 99;  // v outside {27, 28}
    *forged.mutable_commitment() = ToProto(commitment, Addr(first));
    EXPECT_EQ(engine_->OnMessage(forged, Hash256{}, Addr(attacker)).code(), StatusCode::kInvalidArgument);
  }
  // A registered attacker fills its share; the next one is refused for lack of room.
  EXPECT_TRUE(Junk(attacker, 0xe2).ok());
  EXPECT_TRUE(Junk(attacker, 0xe3).ok());
  EXPECT_EQ(Junk(attacker, 0xe4).code(), StatusCode::kResourceExhausted);
  // Its share is full, not the pool: others' votes are still kept.
  EXPECT_TRUE(Junk(first, 0xe5).ok());
  EXPECT_TRUE(Junk(second, 0xe6).ok());
  // A minute later the members' early commitments come; the pool is full for the second one.
  AdvanceClock(std::chrono::minutes(1));
  ASSERT_TRUE(CommitOnly(first, id, result).ok());
  EXPECT_EQ(CommitOnly(second, id, result).code(), StatusCode::kResourceExhausted);

  // The junk expires; gossip offers the refused commitment again (it was not marked seen) and
  // it is kept now, with the first member's.
  AdvanceClock(std::chrono::minutes(1) + std::chrono::milliseconds(1));
  ASSERT_TRUE(Eventually([&] { return CommitOnly(second, id, result).ok(); }));
  ASSERT_TRUE(Announce(request, second).ok());
  // The admitted commitments and the closed window are separate record writes: wait for both.
  v1::Task task = WaitForTask(WaitForAdoption(id).task_id(), [](const v1::Task& t) {
    return t.consensus().commitments_size() == 2 && t.consensus().closed_commit_windows() != 0;
  });
  EXPECT_NE(task.consensus().closed_commit_windows(), 0u);
  ASSERT_TRUE(Vote(first, id, result).ok());
  task = WaitForTask(id, HasCertificate);
  EXPECT_EQ(Signers(task.consensus().certificate()), AddressesOf(first, second));
}

// An announcer that never serves its tasks' blobs holds one member-fetch thread, not all of them:
// an honest operator's task seated meanwhile is fetched and executed (before issue 18 the
// attacker's first two tasks held both job threads, and nothing else was adopted for 120 s per
// task). Adoption itself fetches nothing now: every announcement is stored at once.
TEST_F(ConsensusEngineTest, AnnouncerThatNeverServesItsBlobsDoesNotBlockOtherAdoptions) {
  MakeNetwork(4, /*entry=*/false);
  peer_client_.Hold(Endpoint(4));
  StartNode();
  const auto FetchesFromTheAttacker = [&] {
    const auto requests = peer_client_.requests();
    return std::count_if(requests.begin(), requests.end(),
                         [&](const std::string& r) { return r.ends_with(" from " + Endpoint(4)); });
  };
  // Tasks whose committee has this node in it (3 of 4 operators), so that it fetches.
  const auto MemberRequests = [&](uint64_t from, size_t count) {
    std::vector<v1::SubmitTaskRequest> out;
    for (uint64_t nonce = from; out.size() < count && nonce < from + 1000; ++nonce) {
      const v1::SubmitTaskRequest request = Request(nonce, 3, 2);
      const std::vector<Address20> order = Order(request);
      if (std::find(order.begin(), order.begin() + 3, Addr(1)) != order.begin() + 3) out.push_back(request);
    }
    return out;
  };
  std::vector<std::string> attacker_tasks;
  for (const v1::SubmitTaskRequest& request : MemberRequests(500, 4)) {
    ASSERT_TRUE(Announce(request, 4).ok());
    attacker_tasks.push_back(ToHex(TaskId(request)));
  }
  // The first one is stored without a fetch and seated; its member fetch stalls (and, one job
  // per announcer, the attacker's other jobs wait behind it).
  ASSERT_TRUE(Eventually([&] { return FetchesFromTheAttacker() >= 1; }));

  const v1::SubmitTaskRequest honest = MemberRequests(2000, 1).at(0);
  ASSERT_TRUE(Announce(honest, 2).ok());
  WaitForAdoption(ToHex(TaskId(honest)));
  WaitForTask(ToHex(TaskId(honest)), HasResult);
  EXPECT_EQ(FetchesFromTheAttacker(), 1) << "a second member fetch of the same announcer ran at once";
  for (const std::string& id : attacker_tasks) {
    auto t = tasks_->Get(Id(id));
    EXPECT_FALSE(t.ok() && t->has_result()) << id;
  }

  // Once it serves, its tasks are fetched and executed one after another.
  peer_client_.Release();
  for (const std::string& id : attacker_tasks) {
    WaitForAdoption(id);
    WaitForTask(id, HasResult);
  }
}

// A node whose disk is full adopts nothing: the task record is refused before it is written,
// nothing is stored, and the task is not taken up (as a member the node is silent, which costs
// liveness, not stake). Once space returns, the next announcement is adopted.
TEST_F(ConsensusEngineTest, FullNodeAdoptsNothingUntilSpaceReturns) {
  class Disk final : public FreeSpaceProbe {
   public:
    explicit Disk(std::atomic<int64_t>* free) : free_(free) {}
    StatusOr<int64_t> FreeBytes() override { return free_->load(); }

   private:
    std::atomic<int64_t>* free_;
  };
  std::atomic<int64_t> free{10};  // below the reserve: full
  std::atomic<int> refusals{0};
  DiskBudget budget(
      {/*max_bytes=*/0, /*min_free_bytes=*/1000}, [] { return int64_t{0}; }, std::make_unique<Disk>(&free),
      [&](std::string_view write, BudgetLimit) {
        if (write == "adopting a task") ++refusals;
      });
  budget_ = &budget;
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  const v1::SubmitTaskRequest request = Request(700, 3, 2);
  const std::string id = ToHex(TaskId(request));
  ASSERT_TRUE(Announce(request, 2).ok());
  ASSERT_TRUE(Eventually([&] { return refusals.load() >= 1; }));
  EXPECT_FALSE(tasks_->Get(Id(id)).ok());
  EXPECT_EQ(store_.GetStats().blob_count, 0);
  EXPECT_EQ(store_.GetStats().task_count, 0);

  free = int64_t{1} << 40;
  ASSERT_TRUE(Announce(request, 2).ok());
  WaitForAdoption(id);
  StopNode();
  budget_ = nullptr;
}

// ---- disputes and evidence

TEST_F(ConsensusEngineTest, ConflictingVotesOpenADisputeAndTheLiarIsAccused) {
  MakeNetwork(4, /*entry=*/true);
  StartNode();
  // Three replicas with this node first; the fourth operator is outside the committee.
  const v1::SubmitTaskRequest request = RequestWithSelfAt(0, 3, 2);
  const std::vector<Address20> order = Order(request);
  const int liar = OperatorNumber(order[1], 4), honest = OperatorNumber(order[2], 4),
            outsider = OperatorNumber(order[3], 4);
  std::string id;
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(SubmitAndExecute(request, &id, &task));
  Hash256 wrong = ValueOf(Hash256FromHex(task.result().result_root()));
  wrong[5] ^= 0x10;

  ASSERT_TRUE(Vote(liar, id, ToHex(wrong), task.result().trace_root()).ok());
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().disputed(); });
  EXPECT_EQ(task.consensus().dispute_committee_size(), 4);  // the whole (small) operator set
  EXPECT_FALSE(task.consensus().has_certificate());

  // The honest member makes the committee's quorum; the outsider's vote brings the dispute
  // round to 3 of 4 stakes, over the threshold: the liar is accused with the dispute
  // certificate, and nobody else.
  ASSERT_TRUE(Vote(honest, id, task.result()).ok());
  ASSERT_TRUE(Vote(outsider, id, task.result()).ok());
  ASSERT_TRUE(evidence_.WaitFor(1));
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().slashes_size() == 1; });
  const std::vector<RecordingEvidence::Accusation> accused = evidence_.accusations();
  ASSERT_EQ(accused.size(), 1u);
  EXPECT_EQ(accused[0].kind, "dispute");
  EXPECT_EQ(accused[0].accused, Addr(liar));
  EXPECT_EQ(task.consensus().slashes(0).kind(), "dispute");
  EXPECT_EQ(task.consensus().slashes(0).operator_address(), AddressHex(Addr(liar)));
  EXPECT_FALSE(task.consensus().slashes(0).tx_hash().empty());
  task = WaitForTask(id, Certified);
  EXPECT_EQ(task.consensus().certificate().result_root(), task.result().result_root());
}

// Issue 16, holes 2 and 6: two colluding members certify a wrong result whose outputs they
// serve consistently, so this observer fetches and stores them. The honest member's vote opens
// the dispute: the node re-executes although the task is SUCCEEDED, and when the dispute
// certificate supersedes the committee's, the stored wrong outputs are replaced by outputs that
// make up the dispute certificate's root (checked against it), and the colluders are accused.
TEST_F(ConsensusEngineTest, DisputeReexecutesACertifiedTaskAndReplacesItsWrongOutputs) {
  MakeNetwork(6, /*entry=*/false);  // 4 honest of 6 equal stakes: over the dispute threshold
  StartNode();
  // Every other operator executes it; all honest executions give the same result.
  const PeersTask peers = PeersTaskWithSelfAt(3, 3, 2, /*executed=*/5);
  const int colluder_a = peers.others[0], colluder_b = peers.others[1], honest = peers.others[2];
  const v1::TaskResult& right = peers.result;
  const v1::SubmitTaskRequest& request = peers.request;
  const std::string& id = peers.id;

  // The colluders' result: the first output is replaced by another tensor they hold (the
  // input x), with its true hash, so the outputs make up the wrong root they sign.
  const Tensor x = ValueOf(ParseNpy(x_bytes_, NpyLimits{}));
  v1::TaskResult wrong = right;
  v1::TaskOutput* first = wrong.mutable_outputs(0);
  first->set_tensor_hash(ToHex(TensorHash(x)));
  first->set_blob_sha256(ToHex(x_hash_));
  first->clear_shape();
  for (int64_t d : x.shape()) first->add_shape(d);
  std::vector<std::pair<std::string, Hash256>> named;
  for (const auto& out : wrong.outputs()) named.emplace_back(out.name(), ValueOf(Hash256FromHex(out.tensor_hash())));
  wrong.set_result_root(ToHex(executor::ResultRoot(named)));
  ASSERT_NE(wrong.result_root(), right.result_root());
  const std::set<std::string> colluder_endpoints = {Endpoint(colluder_a), Endpoint(colluder_b)};
  peer_client_.SetTamper([&](const std::string& endpoint, v1::Task* t) {
    if (colluder_endpoints.count(endpoint)) *t->mutable_result() = wrong;
  });

  ASSERT_TRUE(Announce(request, colluder_a).ok());
  WaitForAdoption(id);
  ASSERT_TRUE(Vote(colluder_a, id, wrong).ok());
  ASSERT_TRUE(Vote(colluder_b, id, wrong).ok());
  v1::Task task = WaitForTask(id, [&](const v1::Task& t) { return Certified(t); });
  // The attack worked this far: this node serves the colluders' outputs.
  EXPECT_EQ(task.consensus().certificate().result_root(), wrong.result_root());
  EXPECT_EQ(task.result().result_root(), wrong.result_root());

  // The honest member conflicts: a dispute over all six, and this node executes it itself.
  ASSERT_TRUE(Vote(honest, id, right).ok());
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().disputed(); });
  EXPECT_EQ(task.consensus().dispute_committee_size(), 6);
  // It commits to its own vote after re-executing, in the dispute round's window.
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  EXPECT_EQ(gossip_.commitments()[0].phase(), 1u);

  // Two more honest members commit: the whole set backs the window, which closes; the votes
  // are revealed, 4 of 6 stakes, over the threshold.
  ASSERT_TRUE(Vote(peers.others[3], id, right).ok());
  ASSERT_TRUE(Vote(peers.others[4], id, right).ok());
  ASSERT_TRUE(gossip_.WaitForAttestations(1));  // its own vote
  EXPECT_EQ(gossip_.attestations()[0].result_root(), right.result_root());
  task = WaitForTask(id, [&](const v1::Task& t) {
    return t.consensus().certificate().dispute() && t.state() == v1::TASK_STATE_SUCCEEDED &&
           t.result().result_root() == right.result_root();
  });
  EXPECT_EQ(task.consensus().certificate().result_root(), right.result_root());
  ASSERT_EQ(task.result().outputs_size(), right.outputs_size());
  for (int i = 0; i < right.outputs_size(); ++i) {
    EXPECT_EQ(task.result().outputs(i).tensor_hash(), right.outputs(i).tensor_hash());
    const Hash256 blob = ValueOf(Hash256FromHex(task.result().outputs(i).blob_sha256()));
    auto bytes = store_.GetBlob(blob, 1 << 20);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(CheckNpyTensorHash(*bytes, right.outputs(i).tensor_hash(), NpyLimits{}).ok());
  }
  ASSERT_TRUE(evidence_.WaitFor(2));
  std::set<Address20> accused;
  for (const auto& a : evidence_.accusations()) {
    EXPECT_EQ(a.kind, "dispute");
    accused.insert(a.accused);
  }
  EXPECT_EQ(accused, (std::set<Address20>{Addr(colluder_a), Addr(colluder_b)}));
  EXPECT_EQ(task.attempts(), 1u);  // the dispute's execution, the only one here
}

TEST_F(ConsensusEngineTest, EquivocatorsAreAccusedButNeverThisNode) {
  MakeNetwork(3, /*entry=*/true);
  // This node equivocates too (fault injection): an honest node's evidence never names itself.
  auto faults = NewFaultInjector(FaultMode::kEquivocate);
  StartNode(faults.get());
  std::string id;
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(SubmitAndExecute(Request(1, 3, 2), &id, &task));  // to its first vote
  Hash256 other = ValueOf(Hash256FromHex(task.result().result_root()));
  other[9] ^= 0x01;

  ASSERT_TRUE(Vote(2, id, task.result()).ok());
  ASSERT_TRUE(Vote(2, id, ToHex(other), task.result().trace_root()).ok());
  ASSERT_TRUE(evidence_.WaitFor(1));
  WaitForTask(id, [](const v1::Task& t) { return t.consensus().slashes_size() >= 1; });
  for (const auto& a : evidence_.accusations()) {
    EXPECT_NE(a.accused, Addr(1)) << "this node accused itself";
  }
  const std::vector<RecordingEvidence::Accusation> accused = evidence_.accusations();
  ASSERT_EQ(accused.size(), 1u);
  EXPECT_EQ(accused[0].kind, "equivocation");
  EXPECT_EQ(accused[0].accused, Addr(2));
}

// ---- silent members

TEST_F(ConsensusEngineTest, SilentMembersAreReplacedAtTheMemberDeadline) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  // Three replicas, this node fourth in the order: it joins only when a member stays silent.
  const PeersTask peers = PeersTaskWithSelfAt(3, 3, 2, /*executed=*/1);
  const int voter = peers.others[0];
  const v1::TaskResult& result = peers.result;
  const std::string& id = peers.id;
  ASSERT_NO_FATAL_FAILURE(AdoptPeersTask(peers));
  ASSERT_TRUE(Vote(voter, id, result).ok());  // a commitment: 1 of the 2 the window needs
  WaitForTask(id, [](const v1::Task& t) { return t.consensus().commitments_size() == 1; });

  // Just before the deadline, a few ticks change nothing.
  AdvanceClock(kMemberTimeout - 1ms);
  std::this_thread::sleep_for(600ms);  // two ticks of the engine's real-time ticker
  v1::Task task = ValueOf(tasks_->Get(Id(id)));
  EXPECT_EQ(task.consensus().committee_size(), 3);
  EXPECT_FALSE(task.consensus().member());
  EXPECT_TRUE(gossip_.attestations().empty());

  // Past it: the two silent members (no commitment) are replaced by the rest of the order (this
  // node), which executes and commits. The committee of 4 needs 3 votes (2 of 3, scaled:
  // growing it never lowers the fraction), so the window waits for one of the slow members too.
  AdvanceClock(2ms);
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  EXPECT_EQ(gossip_.commitments()[0].signer(), SelfHex());
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().commitments_size() == 2; });
  EXPECT_TRUE(gossip_.attestations().empty());
  EXPECT_FALSE(task.consensus().has_certificate());
  EXPECT_EQ(task.consensus().committee_size(), 4);
  EXPECT_TRUE(task.consensus().member());
  // The slow member's vote makes 2 of the original 3: the task's own quorum certifies, in the
  // smallest committee prefix that reaches its (scaled) quorum.
  const int slow = peers.others[1];
  ASSERT_TRUE(Vote(slow, id, result).ok());
  task = WaitForTask(id, Certified);
  EXPECT_EQ(Signers(task.consensus().certificate()), AddressesOf(voter, slow));
  EXPECT_EQ(task.consensus().certificate().committee_size(), 3u);
  EXPECT_EQ(task.result().result_root(), result.result_root());
  EXPECT_TRUE(evidence_.accusations().empty());  // silence is not slashable
  EXPECT_NE(registry_->RenderPrometheusText().find("consensor_committee_extensions_total 1"), std::string::npos);
}

// Every operator is in the committee and the others never vote: the round does not wait
// forever. Once votes stop for the grace period the task fails with the reason.
TEST_F(ConsensusEngineTest, ExhaustedOrderWithoutQuorumFailsTheTask) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  const std::string id = Submit(Request(1, 3, 2));
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  WaitForTask(id, [](const v1::Task& t) { return t.state() == v1::TASK_STATE_CERTIFYING; });
  std::this_thread::sleep_for(600ms);  // ticks see the exhausted order and this node's vote
  AdvanceClock(kExhaustedGrace + 1ms);
  v1::Task task = WaitForTask(id, [](const v1::Task& t) { return t.state() == v1::TASK_STATE_FAILED; });
  EXPECT_EQ(task.error_code(), "ABORTED");
  EXPECT_NE(task.error_message().find("the committee order is exhausted (all 3 operators)"), std::string::npos)
      << task.error_message();
  EXPECT_FALSE(task.consensus().has_certificate());
  EXPECT_EQ(engine_->open_rounds(), 0u);
}

// The round fails (order exhausted, no quorum) while this node is still executing the task: the
// record cannot leave RUNNING then, so the task is failed once the execution ends, and this
// node never signs for a round that is over.
TEST_F(ConsensusEngineTest, RoundThatFailsWhileExecutingFailsTheTaskWhenExecutionEnds) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  struct Hold {
    std::mutex mu;
    std::condition_variable cv;
    bool loading = false, released = false;
  };
  auto hold = std::make_shared<Hold>();
  const Hash256 input = x_hash_;
  store_.SetGetBlobHook([hold, input](const Hash256& h) {
    if (h != input) return OkStatus();
    std::unique_lock<std::mutex> lock(hold->mu);
    hold->loading = true;
    hold->cv.notify_all();
    hold->cv.wait_for(lock, kTimeout, [&] { return hold->released; });
    return OkStatus();
  });
  chain_->SetHead(kHead);
  auto outcome = engine_->Submit(Request(1, 3, 2));
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const std::string id = outcome->task_id.Hex();
  chain_->SetHead(kSeated);
  {
    std::unique_lock<std::mutex> lock(hold->mu);
    ASSERT_TRUE(hold->cv.wait_for(lock, kTimeout, [&] { return hold->loading; })) << "never started executing";
  }
  std::this_thread::sleep_for(600ms);  // ticks see the exhausted order
  AdvanceClock(kExhaustedGrace + 1ms);
  std::this_thread::sleep_for(600ms);  // the round fails; the task is still running here
  EXPECT_EQ(ValueOf(tasks_->Get(Id(id))).state(), v1::TASK_STATE_RUNNING);
  {
    std::lock_guard<std::mutex> lock(hold->mu);
    hold->released = true;
  }
  hold->cv.notify_all();
  v1::Task task = WaitForTask(id, [](const v1::Task& t) { return t.state() == v1::TASK_STATE_FAILED; });
  store_.SetGetBlobHook(nullptr);
  EXPECT_NE(task.error_message().find("the committee order is exhausted"), std::string::npos) << task.error_message();
  EXPECT_FALSE(task.consensus().has_certificate());
  EXPECT_TRUE(gossip_.attestations().empty()) << "signed for a round that had failed";
  EXPECT_EQ(engine_->open_rounds(), 0u);
}

// ---- fault injection through the seam

TEST_F(ConsensusEngineTest, CorruptOutputSignsAResultRootWithOneBitFlipped) {
  MakeNetwork(3, /*entry=*/true);
  auto faults = NewFaultInjector(FaultMode::kCorruptOutput);
  StartNode(faults.get());
  std::string id;
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(SubmitAndExecute(Request(1, 3, 2), &id, &task));
  ASSERT_TRUE(CommitOnly(2, id, task.result()).ok());  // closes the window: the vote is revealed
  ASSERT_TRUE(gossip_.WaitForAttestations(1));
  const std::vector<v1::SignedAttestation> votes = gossip_.attestations();
  ASSERT_EQ(votes.size(), 1u);
  Hash256 flipped = ValueOf(Hash256FromHex(task.result().result_root()));
  flipped[31] ^= 1;
  EXPECT_EQ(votes[0].result_root(), ToHex(flipped));
  EXPECT_EQ(votes[0].trace_root(), task.result().trace_root());
  EXPECT_EQ(votes[0].signer(), SelfHex());
}

TEST_F(ConsensusEngineTest, EquivocateSignsTheResultAndAnotherOne) {
  MakeNetwork(3, /*entry=*/true);
  auto faults = NewFaultInjector(FaultMode::kEquivocate);
  StartNode(faults.get());
  std::string id;
  v1::Task task;
  ASSERT_NO_FATAL_FAILURE(SubmitAndExecute(Request(1, 3, 2), &id, &task));
  ASSERT_TRUE(CommitOnly(2, id, task.result()).ok());
  ASSERT_TRUE(gossip_.WaitForAttestations(2));
  EXPECT_EQ(gossip_.commitments().size(), 1u);  // one commitment, to the first
  const std::vector<v1::SignedAttestation> votes = gossip_.attestations();
  ASSERT_EQ(votes.size(), 2u);
  Hash256 other = ValueOf(Hash256FromHex(task.result().result_root()));
  other[0] ^= 0x80;
  EXPECT_EQ(votes[0].result_root(), task.result().result_root());
  EXPECT_EQ(votes[1].result_root(), ToHex(other));
  for (const auto& v : votes) {
    auto parsed = FromProto(v);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(ValueOf(consensus::RecoverAttestationSigner(kDomain, parsed->attestation, parsed->signature)), Addr(1));
  }
}

TEST_F(ConsensusEngineTest, SilentSignsNothing) {
  MakeNetwork(3, /*entry=*/true);
  WatchedInjector faults(FaultMode::kSilent);
  StartNode(&faults);
  const std::string id = Submit(Request(1, 3, 2));
  // Asked twice (crash? then silent?), never what to sign.
  ASSERT_TRUE(faults.WaitForQuestions(2));
  const v1::Task task = WaitForTask(id, HasResult);
  EXPECT_EQ(task.state(), v1::TASK_STATE_CERTIFYING);
  EXPECT_EQ(task.consensus().attestations_size(), 0);
  EXPECT_TRUE(gossip_.attestations().empty());
  ASSERT_EQ(gossip_.messages().size(), 1u);
  EXPECT_TRUE(gossip_.messages()[0].has_announcement());
}

TEST_F(ConsensusEngineTest, CrashMidTaskExitsAfterExecutingBeforeAttesting) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MakeNetwork(3, /*entry=*/true);
        auto faults = NewFaultInjector(FaultMode::kCrashMidTask);
        StartNode(faults.get());
        Submit(Request(1, 3, 2));
        std::this_thread::sleep_for(kTimeout);  // the worker exits the process before this ends
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(86), "fault injection: crashing before attesting");
}

// ---- restart

// Submit queues the task before it opens the round. When the chain is slow there, this node's
// execution ends first and finds no round to vote in; the round must still get its vote.
// The committee is drawn from the hash of block kReference + R + 1 (consensus/committee.h): until
// that block is mined and settled, a task is stored but nobody knows its committee, and no
// member executes it. (Before the seed existed this test held the round's opening back while
// the task executed; a member now executes only after its round is open.)
TEST_F(ConsensusEngineTest, MemberWaitsForTheSeedBlockBeforeExecuting) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  const v1::SubmitTaskRequest request = RequestWithSelfAt(0, 3, 2);
  const std::string id = ToHex(TaskId(request));
  chain_->SetHead(kHead);
  auto outcome = engine_->Submit(request);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  v1::Task task = ValueOf(tasks_->Get(Id(id)));
  EXPECT_EQ(task.consensus().seed_block(), kSeedBlock);
  EXPECT_EQ(task.consensus().committee_size(), 0);
  EXPECT_FALSE(task.consensus().member());
  // Mined but not yet settled: still waiting.
  chain_->SetHead(kSeedBlock);
  std::this_thread::sleep_for(600ms);  // two ticks of the engine's ticker
  task = ValueOf(tasks_->Get(Id(id)));
  EXPECT_EQ(task.consensus().committee_size(), 0);
  EXPECT_FALSE(task.has_result());
  EXPECT_TRUE(gossip_.attestations().empty());

  chain_->SetHead(kSeated);
  ASSERT_TRUE(gossip_.WaitForCommitments(1)) << "this node never signed its own result";
  task = WaitForTask(id, HasResult);
  ASSERT_TRUE(CommitOnly(OperatorNumber(Order(request)[1], 3), id, task.result()).ok());
  ASSERT_TRUE(gossip_.WaitForAttestations(1));
  task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().attestations_size() == 1; });
  EXPECT_TRUE(task.consensus().member());
  EXPECT_EQ(task.consensus().seed_block_hash(), ToHex(chain_->SeedHash()));
  std::vector<std::string> expected;
  for (const Address20& a : Order(request)) {
    if (expected.size() < 3) expected.push_back(AddressHex(a));
  }
  EXPECT_EQ(std::vector<std::string>(task.consensus().committee().begin(), task.consensus().committee().end()),
            expected);
  EXPECT_EQ(gossip_.attestations().at(0).signer(), SelfHex());
  EXPECT_EQ(gossip_.attestations().at(0).result_root(), task.result().result_root());
}

// A new chain head seats the committee at once: with no tick during the test, the head's
// notification is the only way the member gets to execute and commit.
TEST_F(ConsensusEngineTest, NewChainHeadSeatsTheCommitteeWithoutATick) {
  v1::SubmitTaskRequest request;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartWithATaskWaitingForItsSeed(&request, &id));
  // The submission asked for a seat check of its own: let it see the old head first.
  for (int i = 0; i < 2000 && engine_->SeatCheckPending(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_FALSE(engine_->SeatCheckPending());
  chain_->SetHead(kSeated);  // the engine is not told
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(ValueOf(tasks_->Get(Id(id))).consensus().committee_size(), 0);
  EXPECT_TRUE(gossip_.commitments().empty());

  engine_->OnChainHead(kSeated);
  ASSERT_TRUE(gossip_.WaitForCommitments(1)) << "the new head did not seat the committee";
  const v1::Task task = ValueOf(tasks_->Get(Id(id)));
  EXPECT_EQ(task.consensus().committee_size(), 3);
  EXPECT_TRUE(task.consensus().member());
}

// A peer's vote for a task whose seed block this node has not seen settle yet means the peer
// has seated it: the node asks the chain for its head at once (no tick, no head notification
// during the test), seats the committee, executes, commits, and counts the kept vote.
TEST_F(ConsensusEngineTest, VoteForATaskWaitingForItsSeedBlockRefreshesTheHead) {
  v1::SubmitTaskRequest request;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartWithATaskWaitingForItsSeed(&request, &id));
  const int other = OperatorNumber(Order(request)[1], 3);
  const v1::TaskResult result = PeerResult(other, request);
  chain_->SetHead(kSeedBlock);    // the last poll saw the seed block mined, not yet settled
  chain_->SetChainHead(kSeated);  // the chain has moved on since
  const int refreshes_before = chain_->refresh_head_calls();

  ASSERT_TRUE(CommitOnly(other, id, result).ok());  // kept aside: the round is not open here
  ASSERT_TRUE(gossip_.WaitForCommitments(1)) << "the peer's vote did not make the node look at the chain";
  EXPECT_GT(chain_->refresh_head_calls(), refreshes_before);
  // Its commitment, kept while the committee was not drawn, was admitted when the round opened.
  const v1::Task task = WaitForTask(id, [](const v1::Task& t) { return t.consensus().commitments_size() == 2; });
  EXPECT_EQ(task.consensus().committee_size(), 3);
}

// The commit grace ends between periodic timers: the window closes when the grace ends, not at
// the node's next tick (the ticker waits for the round's deadline). Here there is no tick at all
// during the test, so only that deadline can close the window.
TEST_F(ConsensusEngineTest, CommitGraceEndsAtItsDeadlineNotAtTheNextTick) {
  commit_grace_ = 300ms;
  v1::SubmitTaskRequest request;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartWithATaskWaitingForItsSeed(&request, &id));
  const int other = OperatorNumber(Order(request)[1], 3);
  const v1::TaskResult result = PeerResult(other, request);
  for (int i = 0; i < 2000 && engine_->SeatCheckPending(); ++i) std::this_thread::sleep_for(5ms);
  chain_->SetHead(kSeated);
  engine_->OnChainHead(kSeated);
  ASSERT_TRUE(gossip_.WaitForCommitments(1));  // this node's own
  ASSERT_TRUE(CommitOnly(other, id, result).ok());
  // 2 of 3 could certify; the third member has the grace, and nothing is revealed meanwhile.
  WaitForTask(id, [](const v1::Task& t) { return t.consensus().commitments_size() == 2; });
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(gossip_.attestations().empty());
  EXPECT_FALSE(ValueOf(tasks_->Get(Id(id))).consensus().closed_commit_windows() & 1u);
  AdvanceClock(commit_grace_);
  ASSERT_TRUE(gossip_.WaitForAttestations(1)) << "the window did not close when the commit grace ended";
  EXPECT_TRUE(ValueOf(tasks_->Get(Id(id))).consensus().closed_commit_windows() & 1u);
}

// A refused vote gives no head refresh: only votes that were kept (a registered operator's,
// well signed) can make the node ask the chain.
TEST_F(ConsensusEngineTest, RefusedVoteForAWaitingTaskRefreshesNothing) {
  v1::SubmitTaskRequest request;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartWithATaskWaitingForItsSeed(&request, &id));
  const int refreshes_before = chain_->refresh_head_calls();
  consensus::SignedAttestation vote;
  vote.attestation.task_id = ValueOf(Hash256FromHex(id));
  vote.attestation.reference_block = kReference;
  vote.signature = ValueOf(consensus::SignAttestation(Key(9), kDomain, vote.attestation));  // not an operator
  auto commitment =
      ValueOf(consensus::SignCommitment(Key(9), kDomain, vote, Addr(9), consensus::VotePhase::kCommittee));
  v1::GossipMessage message;
  *message.mutable_commitment() = ToProto(commitment, Addr(9));
  EXPECT_EQ(engine_->OnMessage(message, Hash256{}, Addr(9)).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(chain_->refresh_head_calls(), refreshes_before);
  EXPECT_EQ(ValueOf(tasks_->Get(Id(id))).consensus().committee_size(), 0);
}

// A registered operator floods well-signed commitments (each a different result, so each is new
// and kept) for a task waiting for its seed block: every kept vote asks for a head read, but the
// chain is read at most once per 20 ms, however fast the votes come.
TEST_F(ConsensusEngineTest, VoteFloodForAWaitingTaskReadsTheHeadAtABoundedRate) {
  v1::SubmitTaskRequest request;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartWithATaskWaitingForItsSeed(&request, &id));
  const int flooder = OperatorNumber(Order(request)[1], 3);
  constexpr int kVotes = 400;
  std::vector<v1::GossipMessage> flood(kVotes);
  for (int i = 0; i < kVotes; ++i) {
    consensus::SignedAttestation vote;
    vote.attestation.task_id = ValueOf(Hash256FromHex(id));
    vote.attestation.result_root.fill(static_cast<uint8_t>(i));
    vote.attestation.result_root[0] = static_cast<uint8_t>(i >> 8);
    vote.attestation.reference_block = kReference;
    vote.signature = ValueOf(consensus::SignAttestation(Key(flooder), kDomain, vote.attestation));
    auto commitment = ValueOf(
        consensus::SignCommitment(Key(flooder), kDomain, vote, Addr(flooder), consensus::VotePhase::kCommittee));
    *flood[i].mutable_commitment() = ToProto(commitment, Addr(flooder));
  }
  const int refreshes_before = chain_->refresh_head_calls();
  const auto start = SteadyClock::now();
  int kept = 0;
  for (const v1::GossipMessage& message : flood) {
    if (engine_->OnMessage(message, Hash256{}, Addr(flooder)).ok()) ++kept;
  }
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
  EXPECT_EQ(kept, kVotes);  // all within the signer's share of the orphan pool
  // One read may be running when the flood starts and one may start as it ends.
  const int refreshes = chain_->refresh_head_calls() - refreshes_before;
  EXPECT_LE(refreshes, 2 + elapsed_ms / 20) << kVotes << " votes in " << elapsed_ms << " ms";
  EXPECT_EQ(ValueOf(tasks_->Get(Id(id))).consensus().committee_size(), 0);
}

// While a task waits for the very next block only, the engine reads the head itself every
// seat_poll_interval (no tick, no vote, and the view's poll never reports the settling block
// during the test): members seat as the block settles, not up to a chain poll apart.
TEST_F(ConsensusEngineTest, ImminentSeatReadsTheHeadUntilTheBlockSettles) {
  v1::SubmitTaskRequest request;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartWithATaskWaitingForItsSeed(&request, &id));
  chain_->SetHead(kSeated - 1);  // the view's last poll: one block short of settling the seed
  chain_->SetChainHead(kSeated);
  const int refreshes_before = chain_->refresh_head_calls();
  engine_->OnChainHead(kSeated - 1);  // what that poll reported

  ASSERT_TRUE(gossip_.WaitForCommitments(1)) << "the engine never read the head that settles the seed block";
  EXPECT_GT(chain_->refresh_head_calls(), refreshes_before);
  EXPECT_EQ(ValueOf(tasks_->Get(Id(id))).consensus().committee_size(), 3);
}

// The engine writes a batch of round decisions to a task's record in one synced write; each
// change still applies or not on its own, as if it were written alone.
TEST(ApplyRecordChangesTest, EachChangeAppliesOrNotOnItsOwn) {
  const RecordChange dispute = [](v1::Task* t) {
    t->mutable_consensus()->set_disputed(true);
    return OkStatus();
  };
  const RecordChange refused = [](v1::Task* t) {
    t->mutable_consensus()->set_final(true);  // half-done, then refused: must not stay
    return Aborted("refused");
  };
  const RecordChange replicas = [](v1::Task* t) {
    t->mutable_consensus()->set_replicas(t->consensus().disputed() ? 5 : 3);  // sees the changes before it
    return OkStatus();
  };
  v1::Task task;
  task.set_task_id("t");
  ASSERT_TRUE(ApplyRecordChanges({dispute, refused, replicas}, &task).ok());
  EXPECT_TRUE(task.consensus().disputed());
  EXPECT_FALSE(task.consensus().final());
  EXPECT_EQ(task.consensus().replicas(), 5u);

  v1::Task untouched;
  EXPECT_EQ(ApplyRecordChanges({refused, refused}, &untouched).code(), StatusCode::kAborted);
  EXPECT_FALSE(untouched.consensus().final());
  // A single change is the change itself.
  EXPECT_EQ(ApplyRecordChanges({refused}, &untouched).code(), StatusCode::kAborted);
}

// An announcement that arrives after its seed block was mined: whoever picked the reference
// block knew the committee. The node follows the task and stores the certified result, but
// never executes or signs it, even as a first member of the order.
TEST_F(ConsensusEngineTest, LateAnnouncementIsOnlyObserved) {
  MakeNetwork(4, /*entry=*/false);
  StartNode();
  const PeersTask peers = PeersTaskWithSelfAt(0, 3, 2, /*executed=*/2);
  const int second = peers.others[0];
  const v1::SubmitTaskRequest& request = peers.request;
  const std::string& id = peers.id;

  v1::GossipMessage message;
  *message.mutable_announcement()->mutable_spec() = request;
  message.mutable_announcement()->set_reference_block(kReference);
  chain_->SetHead(kSeated);  // past kReference + R: the seed block is mined
  ASSERT_TRUE(engine_->OnMessage(message, Hash256{}, Addr(second)).ok());
  v1::Task task = WaitForAdoption(id);
  EXPECT_TRUE(task.consensus().observer_only());
  EXPECT_FALSE(task.consensus().member());
  EXPECT_EQ(task.consensus().committee(0), SelfHex());  // first in the order, yet not a member
  std::this_thread::sleep_for(600ms);
  EXPECT_FALSE(ValueOf(tasks_->Get(Id(id))).has_result());

  // The other two members certify; this node fetches their result.
  ASSERT_NO_FATAL_FAILURE(CertifyByPeers(peers, &task));
  EXPECT_EQ(task.result().result_root(), peers.result.result_root());
  EXPECT_TRUE(gossip_.attestations().empty());  // never signed

  // Older than the evidence deadline: refused outright.
  chain_->SetHead(kReference + 7200 + 1);
  v1::GossipMessage ancient = message;
  ancient.mutable_announcement()->mutable_spec()->mutable_options()->set_nonce(request.options().nonce() + 1);
  EXPECT_EQ(engine_->OnMessage(ancient, Hash256{}, Addr(second)).code(), StatusCode::kInvalidArgument);
}

TEST_F(ConsensusEngineTest, RecoverReopensTheRoundAndResendsThisNodesMessages) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  const std::string id = Submit(Request(1, 3, 2));
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  ASSERT_TRUE(CommitOnly(2, id, WaitForTask(id, HasResult).result()).ok());
  ASSERT_TRUE(gossip_.WaitForAttestations(1));
  const v1::SignedAttestation before = gossip_.attestations().at(0);
  WaitForTask(id, [](const v1::Task& t) { return t.consensus().attestations_size() == 1; });

  // A restart over the same store, the gossip log lost: the round is rebuilt from the record,
  // the announcement and this node's vote are sent again (the same signature: RFC 6979).
  gossip_.Clear();
  const int calls = chain_->operators_at_calls();
  StartNode();
  EXPECT_GT(chain_->operators_at_calls(), calls);
  EXPECT_EQ(engine_->open_rounds(), 1u);
  const std::vector<v1::GossipMessage> resent = gossip_.messages();
  ASSERT_EQ(resent.size(), 3u);
  ASSERT_TRUE(resent[0].has_announcement());
  EXPECT_EQ(resent[0].announcement().spec().options().nonce(), 1u);
  EXPECT_EQ(resent[0].announcement().reference_block(), kReference);
  ASSERT_TRUE(resent[1].has_commitment());
  ASSERT_TRUE(resent[2].has_reveal());
  EXPECT_EQ(resent[2].reveal().attestation().signature(), before.signature());

  // The reopened round still counts: the reveal of the member whose commitment was admitted
  // before the restart certifies.
  v1::Task task = ValueOf(tasks_->Get(Id(id)));
  ASSERT_TRUE(Vote(2, id, task.result()).ok());
  task = WaitForTask(id, Certified);
  EXPECT_EQ(Signers(task.consensus().certificate()), (std::set<std::string>{SelfHex(), AddressHex(Addr(2))}));
}

// A seated member's writes up to its commitment have no sync of their own: its `queued` write,
// its result and its commitment. A power failure may take them all back after the commitment went
// out. The disk then holds the seated task, certifying with no result: recovery queues it again,
// and the member executes and commits again to the very same commitment (deterministic result,
// RFC 6979 signatures), so nothing two-faced ever leaves the node.
// This node's commitment goes out after its (unsynced) write. A peer's commitment that closes
// the window meanwhile makes the reveal in another batch, whose synced write may end first: the
// reveal must still leave after the commitment, or a peer that gets it first counts it nowhere
// (seen in CI: the lost vote left a node below its quorum once an equivocator was disqualified).
TEST_F(ConsensusEngineTest, RevealNeverOvertakesThisNodesCommitment) {
  MakeNetwork(3, /*entry=*/true);
  commit_grace_ = std::chrono::hours(1);  // the window closes only once all three committed
  const v1::SubmitTaskRequest request = RequestWithSelfAt(0, 3, 2);
  const std::string id = ToHex(TaskId(request));
  std::vector<int> others;
  for (const Address20& a : Order(request)) {
    if (a != Addr(1)) others.push_back(OperatorNumber(a, operators_));
  }
  const v1::TaskResult result = PeerResult(others.at(0), request);
  WatchedInjector injector(FaultMode::kNone);
  std::atomic<bool> fired{false};
  std::thread closer;
  injector.SetBeforeUnsyncedRecord([&](const std::string& task) {
    // The first unsynced write of the task after this node signed: its commitment's batch.
    if (task != id || !injector.Signed() || fired.exchange(true)) return;
    closer = std::thread([&] { EXPECT_TRUE(CommitOnly(others.at(1), id, result).ok()); });
    // Without the rule the other batch's reveal goes out now, while this write waits.
    (void)gossip_.WaitForAttestations(1, 2s);
  });
  // However the test ends: the closer joined, and the engine stopped before the injector goes.
  struct AtExit {
    std::function<void()> run;
    ~AtExit() { run(); }
  } finish{[&] {
    if (closer.joinable()) closer.join();
    StopNode();
  }};
  StartNode(&injector);
  ASSERT_TRUE(CommitOnly(others.at(0), id, result).ok());  // kept until the round opens
  ASSERT_EQ(Submit(request), id);
  ASSERT_TRUE(gossip_.WaitForAttestations(1));
  ASSERT_TRUE(fired.load());
  closer.join();
  const std::vector<v1::GossipMessage> sent = gossip_.messages();
  auto first = [&](bool reveal) {
    return std::find_if(sent.begin(), sent.end(),
                        [&](const v1::GossipMessage& m) {
                          return reveal ? m.has_reveal() : m.has_commitment() && m.commitment().task_id() == id;
                        }) -
           sent.begin();
  };
  EXPECT_LT(first(false), first(true));
  EXPECT_LT(first(true), static_cast<std::ptrdiff_t>(sent.size()));
}

TEST_F(ConsensusEngineTest, SeatedMembersWritesBeforeTheRevealMayBeLostAndAreMadeAgainIdentically) {
  MakeNetwork(3, /*entry=*/true);
  StartNode();
  const std::string id = Submit(Request(1, 3, 2));
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  const v1::ResultCommitment sent = gossip_.commitments().at(0);
  WaitForTask(id, HasResult);

  // What the disk holds after a power failure right after the commitment went out: the last
  // record before the member's `queued` write (seated, certifying), and no result.
  std::optional<std::string> seated;
  for (const MemoryStore::TaskWrite& w : store_.TaskWrites()) {
    v1::Task record;
    if (w.task_id != Id(id).Key() || !record.ParseFromString(w.record)) continue;
    if (record.state() == v1::TASK_STATE_QUEUED) break;
    if (record.consensus().committee_size() > 0) seated = w.record;
  }
  ASSERT_TRUE(seated.has_value());
  StopNode();
  ASSERT_TRUE(store_.DeleteTask(Id(id).Key()).ok());
  ASSERT_TRUE(store_.PutTask(Id(id).Key(), *seated, std::nullopt, Durability::kSynced).ok());
  v1::Task lost;
  ASSERT_TRUE(lost.ParseFromString(*seated));
  ASSERT_TRUE(RecoveryReexecutes(lost)) << lost.DebugString();

  gossip_.Clear();
  StartNode();
  ASSERT_TRUE(gossip_.WaitForCommitments(1));
  EXPECT_EQ(gossip_.commitments().at(0).SerializeAsString(), sent.SerializeAsString());
  v1::Task task = WaitForTask(id, HasResult);
  EXPECT_EQ(task.attempts(), 1u);  // the lost attempt left no trace

  // The peers admitted the first copy; the round goes on as if nothing happened.
  ASSERT_TRUE(Vote(2, id, task.result()).ok());
  task = WaitForTask(id, Certified);
  EXPECT_EQ(Signers(task.consensus().certificate()), (std::set<std::string>{SelfHex(), AddressHex(Addr(2))}));
}

}  // namespace
}  // namespace consensor::node
