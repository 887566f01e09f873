#include "node/daemon/node.h"
#include "common/file_io.h"
#include "node/storage/datadir_lock.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/sha256.h"
#include "common/version.h"
#include "consensus/task.h"
#include "kernels/backend_factory.h"
#include "node/api/client_gate.h"
#include "node/api/client_service.h"
#include "node/chain/chain_client.h"
#include "node/chain/chain_view.h"
#include "node/chain/eth_rpc.h"
#include "node/daemon/peer_flooder.h"
#include "node/daemon/startup_selftest.h"
#include "node/engine/consensus_engine.h"
#include "node/engine/fault_injection.h"
#include "node/engine/retention_sweeper.h"
#include "node/engine/task_manager.h"
#include "node/keys/keystore.h"
#include "node/p2p/gossip.h"
#include "node/p2p/peer_client.h"
#include "node/p2p/peer_rate_budget.h"
#include "node/p2p/peer_request_auth.h"
#include "node/storage/client_disk_ledger.h"
#include "node/storage/disk_budget.h"
#include "node/storage/store.h"
#include "node/telemetry/http_server.h"
#include "node/telemetry/log.h"
#include "node/telemetry/metrics.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {

namespace {

enum class Health { kStarting, kHealthy, kStopping };

// Threads that do the blocking part of SubmitTask, GetTask and RunTask (ClientService): enough
// for concurrent submissions to share the store's synced writes (group commit), few enough
// not to crowd a small machine.
constexpr int kClientCallWorkers = 8;

// Slashing evidence through the chain client with the operator's key. Sends are serialized,
// so the account nonce is never reused by two concurrent transactions.
class ChainEvidence final : public EvidenceSubmitter {
 public:
  static StatusOr<std::unique_ptr<ChainEvidence>> Open(const ChainViewOptions& chain, const Deployment& deployment,
                                                       const Secp256k1Secret& key, MetricsRegistry* metrics) {
    auto evidence = std::unique_ptr<ChainEvidence>(new ChainEvidence());
    HttpRpcOptions http;
    http.ca_file = chain.rpc_ca_file;
    ASSIGN_OR_RETURN(auto transport, NewHttpRpcTransport(chain.rpc_url, http));
    evidence->rpc_ = std::make_unique<EthRpc>(NewMeteredRpcTransport(std::move(transport), metrics, "evidence"));
    evidence->client_ = std::make_unique<ChainClient>(evidence->rpc_.get(), deployment, key);
    return evidence;
  }
  StatusOr<std::string> SlashEquivocation(const consensus::SignedAttestation& a,
                                          const consensus::SignedAttestation& b) override {
    ASSIGN_OR_RETURN(Address20 accused,
                     consensus::RecoverAttestationSigner(client_->domain(), a.attestation, a.signature));
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(NotYetSlashed(accused, a.attestation.task_id));
    ASSIGN_OR_RETURN(TxOutcome tx, client_->SlashEquivocation(a.attestation, a.signature, b.attestation, b.signature));
    return tx.tx_hash;
  }
  StatusOr<std::string> SlashDispute(const consensus::SignedAttestation& accused,
                                     const consensus::Certificate& certificate) override {
    std::vector<std::vector<uint8_t>> sigs;
    for (const auto& s : certificate.signatures) sigs.emplace_back(s.begin(), s.end());
    ASSIGN_OR_RETURN(Address20 operator_address,
                     consensus::RecoverAttestationSigner(client_->domain(), accused.attestation, accused.signature));
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(NotYetSlashed(operator_address, accused.attestation.task_id));
    ASSIGN_OR_RETURN(TxOutcome tx,
                     client_->SlashDispute(accused.attestation, accused.signature, certificate.attestation, sigs));
    return tx.tx_hash;
  }

 private:
  ChainEvidence() = default;
  // Every honest node that sees the evidence may report it; the first transaction wins and the
  // others would only burn gas on a revert. A random pause spreads the reporters out, then the
  // contract's evidenceUsed tells the later ones to stand down.
  Status NotYetSlashed(const Address20& accused, const Hash256& task_id) {
    thread_local std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
    ASSIGN_OR_RETURN(bool used, client_->EvidenceUsed(accused, task_id));
    if (used) return AlreadyExists("already slashed for this task (another node reported it first)");
    return OkStatus();
  }
  std::mutex mu_;
  std::unique_ptr<EthRpc> rpc_;
  std::unique_ptr<ChainClient> client_;
};

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

Status WriteTextFile(const std::string& path, const std::string& text) {
  return consensor::WriteFileAtomic(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace

struct Node::Impl {
  NodeConfig config;
  std::unique_ptr<DatadirLock> lock;
  std::unique_ptr<Store> store;
  MetricsRegistry registry;
  std::unique_ptr<DiskBudget> budget;
  BlobReferenceGuard references;
  std::unique_ptr<RetentionSweeper> sweeper;
  std::unique_ptr<ClientDiskLedger> client_disk;
  std::unique_ptr<ClientGate> gate;
  std::unique_ptr<NodeMetrics> metrics;
  std::unique_ptr<TaskManager> tasks;
  // Network mode only.
  std::optional<Secp256k1Secret> operator_key;
  std::unique_ptr<RpcChainView> chain;
  std::unique_ptr<ChainEvidence> evidence;
  std::unique_ptr<PeerClient> peers;
  std::unique_ptr<FaultInjector> faults;  // only with [fault] mode (tests and devnets)
  std::unique_ptr<ConsensusEngine> engine;
  std::unique_ptr<GossipNetwork> gossip;
  std::unique_ptr<PeerFlooder> flooder;  // fault refuse-everywhere only
  std::string advertise;
  std::unique_ptr<ClientService> service;
  std::unique_ptr<grpc::Server> server;
  // With p2p.listen: the peers' own server (gossip and the calls peers make), own thread quota.
  std::unique_ptr<StreamBudget> peer_streams;    // before peer_facing, which uses it
  std::unique_ptr<PeerRateBudget> peer_lookups;  // likewise
  std::unique_ptr<PeerFacingClientService> peer_facing;
  std::unique_ptr<grpc::Server> peer_server;
  int peer_port = 0;
  std::unique_ptr<HttpServer> http;
  std::string operator_address;
  std::string backend_device;  // what runs tasks, in words (Backend::description())
  std::string rpc_address;     // as bound
  int rpc_port = 0;
  int64_t started_unix_ms = 0;
  std::atomic<Health> health{Health::kStarting};
  bool shut_down = false;

  HttpResponse ServeHttp(const std::string& path);
};

HttpResponse Node::Impl::ServeHttp(const std::string& path) {
  HttpResponse r;
  const Health h = health.load();
  auto json_response = [&](int status, const nlohmann::json& body) {
    r.status = status;
    r.content_type = "application/json";
    r.body = body.dump();
    return r;
  };
  auto service_status = [&] { return h == Health::kHealthy ? "Up" : h == Health::kStarting ? "Initializing" : "Down"; };
  auto health_code = [&] { return h == Health::kHealthy ? 200 : h == Health::kStarting ? 206 : 503; };
  if (path == "/metrics") {
    sweeper->UpdateGauges();  // bytes by category and free space, as of now
    gate->UpdateGauges();
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = registry.RenderPrometheusText();
    return r;
  }
  if (path == "/eigen/node") {
    return json_response(200,
                         {{"node_name", "consensord"}, {"spec_version", "v0.0.1"}, {"node_version", kProjectVersion}});
  }
  if (path == "/eigen/node/version") return json_response(200, {{"version", kProjectVersion}});
  if (path == "/eigen/node/health") {
    r.status = health_code();
    r.body = "";
    return r;
  }
  if (path == "/eigen/node/services") {
    nlohmann::json services = nlohmann::json::array();
    services.push_back({{"id", "client-api"},
                        {"name", "Consensor client API"},
                        {"description", "gRPC consensor.v1.Client on " + rpc_address},
                        {"status", service_status()}});
    services.push_back({{"id", "executor"},
                        {"name", "Deterministic executor"},
                        {"description", "backend " + config.tasks.backend.name + ", " +
                                            std::to_string(config.tasks.workers) + " workers"},
                        {"status", service_status()}});
    return json_response(200, {{"services", services}});
  }
  if (path == "/eigen/node/services/client-api/health" || path == "/eigen/node/services/executor/health") {
    r.status = health_code();
    r.body = "";
    return r;
  }
  r.status = 404;
  r.body = "not found\n";
  return r;
}

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Node::~Node() { Shutdown(); }

int Node::rpc_port() const { return impl_->rpc_port; }
int Node::metrics_port() const { return impl_->http ? impl_->http->port() : 0; }

StatusOr<std::unique_ptr<Node>> Node::Start(const NodeConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->started_unix_ms = UnixMillisNow();
  ASSIGN_OR_RETURN(impl->lock, DatadirLock::Acquire(config.datadir));

  if (!config.keystore.empty()) {
    auto password = ReadPassword(config.password_file, config.password_env);
    if (!password.ok()) return password.status().WithContext("operator keystore password");
    auto key = DecryptKeystoreFile(config.keystore, *password);
    if (!key.ok()) return key.status().WithContext("operator keystore");
    impl->operator_address = AddressToChecksumHex(key->address);
    impl->operator_key = key->secret;
  }

  auto store = OpenRocksDbStore(config.datadir + "/db");
  if (!store.ok()) return store.status().WithContext("opening the store in " + config.datadir + "/db");
  impl->store = std::move(store).value();
  impl->metrics = std::make_unique<NodeMetrics>(&impl->registry);
  {
    Store* store_raw = impl->store.get();
    MetricsRegistry* registry = &impl->registry;
    DiskBudgetOptions budget_options;
    budget_options.max_bytes = config.storage_max_bytes;
    budget_options.min_free_bytes = config.storage_min_free_bytes;
    impl->budget = std::make_unique<DiskBudget>(
        budget_options,
        [store_raw] {
          const Store::Stats s = store_raw->GetStats();
          return s.blob_bytes + s.task_bytes + s.result_bytes;
        },
        NewStatvfsProbe(config.datadir + "/db"),
        [registry](std::string_view write, BudgetLimit limit) {
          registry
              ->AddCounter("consensor_storage_refusals_total",
                           "Writes refused before anything was stored because the storage quota or the disk was full, "
                           "by kind of write and the limit that refused it.",
                           {{"write", std::string(write)}, {"limit", std::string(BudgetLimitName(limit))}})
              ->Increment();
        });
    impl->budget->SetUnflushedBytes([store_raw] { return store_raw->UnflushedBytes(); });
    RetentionOptions retention;
    retention.max_bytes = config.storage_max_bytes;
    retention.retain_ms = config.storage_retain_results_hours * 3600 * 1000;
    retention.interval = config.storage_sweep_interval;
    retention.db_path = config.datadir + "/db";
    retention.limits = config.tasks.limits;
    impl->sweeper = std::make_unique<RetentionSweeper>(impl->store.get(), &impl->references, impl->budget.get(),
                                                       &impl->registry, retention);
  }
  {
    // Client identities and budgets: a bad keys file stops the node here, before it serves.
    std::vector<ClientEntry> clients;
    if (!config.clients.keys_file.empty()) {
      auto loaded = LoadClientKeysFile(config.clients.keys_file, config.clients.defaults);
      if (!loaded.ok()) return loaded.status().WithContext("clients.keys_file");
      clients = std::move(loaded).value();
    }
    impl->client_disk = std::make_unique<ClientDiskLedger>(impl->store.get());
    RETURN_IF_ERROR(impl->client_disk->Load().WithContext("reading the clients' disk charges"));
    const size_t client_count = clients.size();
    impl->gate =
        std::make_unique<ClientGate>(config.clients, std::move(clients), &impl->registry, impl->client_disk.get());
    ClientDiskLedger* ledger = impl->client_disk.get();
    impl->sweeper->SetBlobDeleted([ledger](const Hash256& sha256) { ledger->BlobDeleted(sha256); });
    Log(LogLevel::kInfo, "client access",
        {{"auth", config.clients.auth}, {"clients", static_cast<int64_t>(client_count)}});
  }

  if (!config.metrics_listen.empty()) {
    Impl* raw = impl.get();
    auto http =
        HttpServer::Start(config.metrics_listen, [raw](const std::string& path) { return raw->ServeHttp(path); });
    if (!http.ok()) return http.status().WithContext("metrics server on " + config.metrics_listen);
    impl->http = std::move(http).value();
  }

  TaskManagerOptions to = config.tasks;
  to.budget = impl->budget.get();
  to.references = &impl->references;
  to.running_journal_path = config.datadir + "/running-tasks";
  // Fail fast on a backend that cannot work here (e.g. cuda on a machine without a GPU),
  // unless the operator asked for the CPU fallback.
  if (auto probe = kernels::CreateBackend(to.backend); !probe.ok()) {
    if (!config.tasks.fallback_cpu) {
      return probe.status().WithContext("executor backend '" + config.tasks.backend.name +
                                        "' (set fallback_cpu to run on the CPU instead)");
    }
    Log(LogLevel::kWarn, "executor backend unavailable; tasks will run on the CPU",
        {{"backend", config.tasks.backend.name}, {"error", probe.status().message()}});
    impl->backend_device = "unavailable (" + probe.status().message() + "); tasks run on the CPU";
  } else {
    impl->backend_device = (*probe)->description();
    if (config.tasks.backend.name != "cpu") {
      Log(LogLevel::kInfo, "executor backend", {{"backend", impl->backend_device}});
      if (config.selftest) {
        ASSIGN_OR_RETURN(to.backend,
                         SelfTestBackendAtStartup(**probe, to.backend, config.tasks.fallback_cpu, &impl->registry));
        impl->config.tasks.backend.name = to.backend.name;  // node info and the services endpoint say what runs
        if (to.backend.name == "cpu") {  // the self-test failed and fallback_cpu moved every task to the CPU
          auto cpu = kernels::CreateBackend(to.backend);
          impl->backend_device = cpu.ok() ? (*cpu)->description() : "cpu";
        }
      } else {
        Log(LogLevel::kWarn, "backend self-test skipped (executor.selftest = false): results are signed unchecked",
            {{"backend", (*probe)->name()}});
      }
    }
  }
  ExportBackendInfo(&impl->registry, impl->config.tasks.backend.name, impl->backend_device);
  Impl* raw = impl.get();
  const bool network = !config.chain_view.rpc_url.empty();
  Deployment deployment;
  if (network) {
    ASSIGN_OR_RETURN(deployment, LoadDeployment(config.chain_deployment));
    auto chain = RpcChainView::Open(config.chain_view, deployment, &impl->registry);
    if (!chain.ok()) return chain.status().WithContext("chain " + RedactRpcUrl(config.chain_view.rpc_url));
    impl->chain = std::move(chain).value();
    if (config.chain_submit_evidence) {
      ASSIGN_OR_RETURN(impl->evidence,
                       ChainEvidence::Open(config.chain_view, deployment, *impl->operator_key, &impl->registry));
    }
    to.network_mode = true;
    to.on_executed = [raw](const consensus::TaskId& id, const v1::TaskResult& result) {
      if (raw->engine) raw->engine->OnExecuted(id, result);
    };
  }
  if (!config.fault_mode.empty()) {
    ASSIGN_OR_RETURN(FaultMode fault, ParseFaultMode(config.fault_mode));
    impl->faults = NewFaultInjector(fault, config.fault_delay.count());
    Log(LogLevel::kWarn, "FAULT INJECTION ENABLED: this node misbehaves on purpose", {{"fault", config.fault_mode}});
    if (!network) {
      // A single node's unsynced record write: RunTask's new task (crash-before-unsynced-record).
      FaultInjector* faults = impl->faults.get();
      to.before_unsynced_record = [faults](const consensus::TaskId& id) { faults->BeforeUnsyncedRecord(id.Hex()); };
    }
  }
  impl->tasks = std::make_unique<TaskManager>(impl->store.get(), impl->metrics.get(), to);
  {
    // The sweeper deletes tasks through the task manager, under its record locks.
    TaskManager* tasks = impl->tasks.get();
    ClientDiskLedger* ledger = impl->client_disk.get();
    impl->sweeper->SetTaskDeleter([raw, tasks, ledger](const std::string& key) {
      Status deleted = tasks->DeleteUnpinned(key);
      if (deleted.ok()) {
        ledger->TaskDeleted(ToHex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size())));
        // A non-member's outputs of the task are no longer fetched on demand (the sweeper
        // starts after the engine exists; `engine` is not reassigned while it runs).
        if (auto id = consensus::TaskId::FromKey(key); id.ok() && raw->engine) raw->engine->OnTaskDeleted(*id);
      }
      return deleted;
    });
  }
  RETURN_IF_ERROR(impl->tasks->Recover().WithContext("recovering tasks"));
  if (network) {
    ConsensusOptions co = config.consensus;
    co.max_blob_bytes = config.tasks.limits.max_graph_file_bytes;  // limits.max_blob_bytes
    // The deployment's time parameters and replication floor are the network's, not the
    // node's: every node must agree on finality and on what it accepts.
    const DeploymentParams params = impl->chain->deployment_params();
    if (co.max_reference_age != params.max_reference_age ||
        co.challenge_window_blocks != params.challenge_window_blocks) {
      Log(LogLevel::kWarn, "using the deployment's reference age and challenge window, not the config's",
          {{"max_reference_age", static_cast<int64_t>(params.max_reference_age)},
           {"challenge_window_blocks", static_cast<int64_t>(params.challenge_window_blocks)}});
    }
    co.max_reference_age = params.max_reference_age;
    co.evidence_deadline_blocks = params.evidence_deadline_blocks;
    co.challenge_window_blocks = params.challenge_window_blocks;
    co.min_replicas = params.min_replicas;
    if (co.default_replicas < co.min_replicas) {
      return FailedPrecondition("consensus.replicas is " + std::to_string(co.default_replicas) +
                                ", below the deployment's minReplicas of " + std::to_string(co.min_replicas));
    }
    GrpcPeerClientOptions peer_options;
    {
      // Blob requests carry this operator's signature: peers key their stream budget on it.
      const Secp256k1Secret key = *impl->operator_key;
      const PeerRequestDomain domain{deployment.chain_id, deployment.manager};
      peer_options.sign_blob_request = [key, domain](v1::GetBlobRequest* r) { return SignGetBlob(key, domain, r); };
      peer_options.sign_task_request = [key, domain](v1::GetTaskRequest* r) { return SignGetTask(key, domain, r); };
    }
    impl->peers = NewGrpcPeerClient(peer_options);
    EngineParts parts;
    parts.chain = impl->chain.get();
    parts.tasks = impl->tasks.get();
    parts.store = impl->store.get();
    parts.metrics = &impl->registry;
    parts.peers = impl->peers.get();
    parts.evidence = impl->evidence.get();
    parts.faults = impl->faults.get();
    parts.budget = impl->budget.get();
    impl->engine = std::make_unique<ConsensusEngine>(co, *impl->operator_key, parts);
    GossipOptions go = config.gossip;
    go.chain_id = deployment.chain_id;
    go.contract = deployment.manager;  // the EIP-712 verifying contract of attestations too
    go.key = *impl->operator_key;
    go.max_message_bytes = config.rpc_max_message_bytes;  // an envelope travels in one gRPC message
    go.withhold_pulls = impl->faults && impl->faults->RefusesAndFloodsPeers();
    impl->gossip = std::make_unique<GossipNetwork>(
        go,
        [raw](const v1::GossipMessage& m, const Hash256& id, const Address20& sender) {
          return raw->engine->OnMessage(m, id, sender);
        },
        [raw](const Address20& sender) { return raw->chain->IsActiveOperator(sender); }, &impl->registry);
    impl->engine->SetGossip(impl->gossip.get());
  }

  impl->service = std::make_unique<ClientService>(
      impl->store.get(), impl->tasks.get(), impl->metrics.get(), config.tasks.limits.max_graph_file_bytes,
      [raw](v1::NodeInfo* info) {
        const NodeConfig& c = raw->config;
        info->set_version(kProjectVersion);
        info->set_protocol_version(consensus::kProtocolVersion);
        info->set_operator_address(raw->operator_address);
        info->set_backend(c.tasks.backend.name);
        info->set_backend_device(raw->backend_device);
        info->set_workers(static_cast<uint32_t>(c.tasks.workers));
        info->set_queue_capacity(static_cast<uint32_t>(c.tasks.queue_capacity));
        info->set_started_unix_ms(raw->started_unix_ms);
        v1::NodeLimits* l = info->mutable_limits();
        l->set_max_blob_bytes(c.tasks.limits.max_graph_file_bytes);
        l->set_max_task_bytes(c.tasks.limits.max_total_bytes);
        l->set_max_task_flops(c.tasks.limits.max_flops);
        l->set_max_task_seconds(c.tasks.max_task_seconds);
        l->set_max_elements(c.tasks.limits.max_elements_per_tensor);
        l->set_max_ops(c.tasks.limits.max_ops);
        l->set_max_inputs(c.tasks.max_inputs);
        if (raw->chain) {
          v1::ConsensusInfo* ci = info->mutable_consensus();
          const auto domain = raw->chain->domain();
          ci->set_chain_id(domain.chain_id);
          ci->set_service_manager(AddressHex(domain.verifying_contract));
          ci->set_default_replicas(c.consensus.default_replicas);
          ci->set_default_quorum(c.consensus.default_quorum);
          ci->set_max_replicas(c.consensus.max_replicas);
          ci->set_peers(static_cast<uint32_t>(raw->gossip->connected_peers()));
          ci->set_operator_count(raw->chain->active_operators());
          ci->set_chain_head(raw->chain->head());
          ci->set_registered(raw->engine && raw->chain->IsActiveOperator(raw->engine->address()));
        }
      },
      ClientService::CallOptions{.workers = kClientCallWorkers, .max_pending_calls = 16 * config.rpc_max_streams});
  impl->service->SetDiskBudget(impl->budget.get());
  impl->service->SetGate(impl->gate.get());
  if (impl->engine) {
    impl->service->SetSubmitter([raw](const v1::SubmitTaskRequest& r) { return raw->engine->Submit(r); });
  }
  if (impl->faults && impl->faults->StallsServedBlobs()) impl->service->StallServedBlobs();
  if (impl->faults && impl->faults->RefusesAndFloodsPeers()) impl->service->RefusePeers();
  if (impl->faults) {
    FaultInjector* faults = impl->faults.get();
    impl->service->CorruptServedBlobs([faults](const std::string& sha) { return faults->CorruptsServedBlob(sha); });
  }
  if (impl->engine) {
    impl->service->SetMissingBlobFetcher([raw](const Hash256& sha, const std::function<Status()>& admit) {
      return raw->engine->FetchOutputOnDemand(sha, admit);
    });
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second node on the same port would start and take half
  // of the connections (peers' and clients') without a word. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(config.rpc_listen, grpc::InsecureServerCredentials(), &impl->rpc_port);
  builder.RegisterService(impl->service.get());
  const bool own_peer_server = impl->gossip && !config.p2p_listen.empty();
  if (impl->gossip && !own_peer_server) builder.RegisterService(impl->gossip->service());
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.rpc_max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.rpc_max_message_bytes));
  // A bounded number of server threads: beyond it, new RPCs get RESOURCE_EXHAUSTED instead of
  // the node growing without limit.
  grpc::ResourceQuota quota("consensord");
  quota.SetMaxThreads(static_cast<int>(config.rpc_max_streams) + 2);
  builder.SetResourceQuota(quota);
  // gRPC's default keeps at most two idle threads: every RPC that finds them busy (a client's
  // WatchTask holds one) creates a thread, which exits when the call ends. Idle threads stay
  // instead, so a busy node reuses them; their number is still bounded by the quota above.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              static_cast<int>(config.rpc_max_streams) + 2);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->rpc_port == 0) {
    return Unavailable("cannot listen for gRPC on " + config.rpc_listen + " (address in use or invalid?)");
  }
  auto* health = impl->server->GetHealthCheckService();
  health->SetServingStatus("", false);
  health->SetServingStatus("consensor.v1.Client", false);
  if (own_peer_server) {
    // Clients holding every stream of the client server (watches, slow uploads) must not
    // silence gossip: peers get a listener and a thread quota of their own.
    impl->peer_streams = std::make_unique<StreamBudget>(
        StreamBudgetLimits{config.p2p_max_blob_streams_per_host, config.p2p_max_blob_streams_per_operator},
        &impl->registry);
    impl->peer_lookups = std::make_unique<PeerRateBudget>(
        PeerRateLimits{.per_requester = static_cast<double>(config.p2p_max_lookups_per_second_per_operator),
                       .per_host = static_cast<double>(config.p2p_max_lookups_per_second_per_host)},
        LookupBudgetNames(), &impl->registry);
    const PeerRequestDomain domain{deployment.chain_id, deployment.manager};
    auto is_operator = [raw](const Address20& a) { return raw->chain->IsActiveOperator(a); };
    PeerCallGuards guards;
    guards.lookups = impl->peer_lookups.get();
    guards.signature_checks = impl->gossip->signature_checks();
    guards.replays = impl->gossip->signed_request_replays();
    guards.verify_task = [domain, is_operator](const v1::GetTaskRequest& request) {
      return VerifyGetTask(domain, request, UnixMillisNow(), kSignedPeerRequestClockSkew, is_operator);
    };
    guards.verify_node_info = [domain, is_operator](const v1::GetNodeInfoRequest& request) {
      return VerifyGetNodeInfo(domain, request, UnixMillisNow(), kSignedPeerRequestClockSkew, is_operator);
    };
    impl->peer_facing = std::make_unique<PeerFacingClientService>(
        impl->service.get(), impl->peer_streams.get(),
        [domain, is_operator](const v1::GetBlobRequest& request) {
          return VerifyGetBlob(domain, request, UnixMillisNow(), kSignedPeerRequestClockSkew, is_operator);
        },
        std::move(guards));
    grpc::ServerBuilder peer_builder;
    peer_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    peer_builder.AddListeningPort(config.p2p_listen, grpc::InsecureServerCredentials(), &impl->peer_port);
    peer_builder.RegisterService(impl->gossip->service());
    peer_builder.RegisterService(impl->peer_facing.get());
    peer_builder.SetMaxReceiveMessageSize(static_cast<int>(config.rpc_max_message_bytes));
    peer_builder.SetMaxSendMessageSize(static_cast<int>(config.rpc_max_message_bytes));
    grpc::ResourceQuota peer_quota("consensord-peers");
    peer_quota.SetMaxThreads(static_cast<int>(config.p2p_max_streams) + 2);
    peer_builder.SetResourceQuota(peer_quota);
    peer_builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                                     static_cast<int>(config.p2p_max_streams) + 2);  // as above
    impl->peer_server = peer_builder.BuildAndStart();
    if (!impl->peer_server || impl->peer_port == 0) {
      return Unavailable("cannot listen for peers on " + config.p2p_listen + " (address in use or invalid?)");
    }
  }

  // The bound addresses, for scripts and tests that asked for port 0.
  const std::string rpc_addr = HostOf(config.rpc_listen) + ":" + std::to_string(impl->rpc_port);
  impl->rpc_address = rpc_addr;
  std::string metrics_addr = "off";
  if (impl->http) {
    metrics_addr = HostOf(config.metrics_listen) + ":" + std::to_string(impl->http->port());
    RETURN_IF_ERROR(WriteTextFile(config.datadir + "/metrics.addr", metrics_addr + "\n"));
  }
  std::string p2p_addr;
  if (impl->peer_server) {
    p2p_addr = HostOf(config.p2p_listen) + ":" + std::to_string(impl->peer_port);
    RETURN_IF_ERROR(WriteTextFile(config.datadir + "/p2p.addr", p2p_addr + "\n"));
  }
  // rpc.addr last: tools wait for it as the sign that the node serves, so every other address
  // file must already be there.
  RETURN_IF_ERROR(WriteTextFile(config.datadir + "/rpc.addr", rpc_addr + "\n"));

  impl->tasks->Start();
  impl->sweeper->Start();
  if (impl->engine) {
    impl->advertise = !config.p2p_advertise.empty() ? config.p2p_advertise : !p2p_addr.empty() ? p2p_addr : rpc_addr;
    // Peers: the registry's endpoints of the other active operators, plus the bootstrap list.
    auto update_peers = [raw] {
      std::vector<std::string> peers = raw->chain->PeerEndpoints(raw->engine->address());
      for (const std::string& b : raw->config.p2p_bootstrap) peers.push_back(b);
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      peers.erase(std::remove(peers.begin(), peers.end(), raw->advertise), peers.end());
      raw->gossip->SetPeers(peers);
    };
    // A new head seats the committees whose seed block it settles, without waiting for a tick.
    impl->chain->SetHeadListener([raw](uint64_t head) { raw->engine->OnChainHead(head); });
    RETURN_IF_ERROR(impl->chain->Start(update_peers).WithContext("reading the operator set"));
    impl->gossip->Start();
    RETURN_IF_ERROR(impl->engine->Recover().WithContext("recovering consensus rounds"));
    impl->engine->Start();
    if (impl->faults && impl->faults->RefusesAndFloodsPeers()) {
      const Secp256k1Secret key = *impl->operator_key;
      const PeerRequestDomain domain{deployment.chain_id, deployment.manager};
      impl->flooder = std::make_unique<PeerFlooder>(
          PeerFlooderOptions{}, [raw] { return raw->chain->PeerEndpoints(raw->engine->address()); },
          [raw] { return raw->faults->AnnouncedBlobs(); },
          [key, domain](v1::GetBlobRequest* r) { return SignGetBlob(key, domain, r); },
          PeerFlooderSigners{
              .task = [key, domain](v1::GetTaskRequest* r) { return SignGetTask(key, domain, r); },
              .node_info = [key, domain](v1::GetNodeInfoRequest* r) { return SignGetNodeInfo(key, domain, r); },
              .pull =
                  [key, domain](v1::PullRequest* r) {
                    return GossipNetwork::SignPull(key, domain.chain_id, domain.contract, r);
                  }});
      impl->flooder->Start();
    }
    if (!impl->chain->IsActiveOperator(impl->engine->address())) {
      Log(LogLevel::kWarn, "this node's key is not an active operator: peers will ignore its messages",
          {{"operator", impl->operator_address}});
    }
  }
  health->SetServingStatus("", true);
  health->SetServingStatus("consensor.v1.Client", true);
  impl->metrics->up->Set(1);
  impl->health = Health::kHealthy;
  Log(LogLevel::kInfo, "consensord started",
      {{"version", kProjectVersion},
       {"datadir", config.datadir},
       {"rpc", rpc_addr},
       {"p2p", p2p_addr.empty() ? std::string("shared with rpc") : p2p_addr},
       {"metrics", metrics_addr},
       {"backend", config.tasks.backend.name},
       {"chain", network ? RedactRpcUrl(config.chain_view.rpc_url) : std::string("none")},
       {"workers", config.tasks.workers},
       {"queue_capacity", config.tasks.queue_capacity},
       {"storage_max_bytes", config.storage_max_bytes},
       {"storage_min_free_bytes", config.storage_min_free_bytes},
       {"retain_results_hours", config.storage_retain_results_hours},
       {"operator", impl->operator_address.empty() ? std::string("none") : impl->operator_address}});
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

void Node::Shutdown() {
  if (!impl_ || impl_->shut_down) return;
  impl_->shut_down = true;
  Log(LogLevel::kInfo, "shutting down");
  impl_->health = Health::kStopping;
  impl_->metrics->up->Set(0);
  if (impl_->server) {
    auto* health = impl_->server->GetHealthCheckService();
    health->SetServingStatus("", false);
    health->SetServingStatus("consensor.v1.Client", false);
  }
  impl_->sweeper->Stop();
  if (impl_->flooder) impl_->flooder->Stop();
  if (impl_->engine) impl_->engine->Shutdown();
  if (impl_->gossip) impl_->gossip->Shutdown();
  impl_->tasks->Shutdown();  // stops admission, drains running tasks, wakes watchers
  // Tasks have drained and watchers were woken; RPCs still open after a short grace period
  // (uploads, downloads) are cancelled.
  if (impl_->server) impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (impl_->peer_server) impl_->peer_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (impl_->http) impl_->http->Stop();
  if (impl_->chain) impl_->chain->Shutdown();
  impl_->service.reset();
  impl_->tasks.reset();
  impl_->engine.reset();
  impl_->gossip.reset();
  impl_->sweeper.reset();
  impl_->gate.reset();
  impl_->client_disk.reset();
  impl_->store.reset();  // closes RocksDB cleanly
  Log(LogLevel::kInfo, "consensord stopped");
  impl_->lock.reset();
}

}  // namespace consensor::node
