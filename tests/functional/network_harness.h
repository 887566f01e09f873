// A local operator network for functional tests, like scripts/devnet.sh but driven from C++:
// anvil (one block per second), the AVS contracts deployed by the forge script, and N
// consensord processes in network mode. Each node is one of anvil's dev accounts 1..9 with its
// own keystore (imported with `consensor keys import --light-kdf`), datadir, TOML config and a
// loopback port chosen up front (the endpoint is registered on-chain before the node starts),
// registered with `consensor operator register` and equal stake. Nodes can be killed (any
// signal), restarted on the same datadir and config, and configured with a fault mode, a
// member timeout, an unreachable registered endpoint, a bootstrap list, or a key that is never
// registered.
//
// Every wait is a bounded polling loop. Logs go to <dir>/nodeK/consensord.log (appended across
// restarts); the directory is kept when a test failed (or with CNSR_KEEP_TEST_DIRS set).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/npy.h"
#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "executor/graph.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/backend_factory.h"
#include "node/api/client.h"
#include "node/chain/chain_client.h"
#include "node/chain/eth_rpc.h"
#include "node/cli/chain_flags.h"
#include "tests/functional/anvil_harness.h"
#include "tests/functional/daemon_harness.h"
#include "tests/test_paths.h"

namespace consensor::testing_support {

inline Secp256k1Secret AnvilDevKey(int account) { return *node::DevnetKey(static_cast<size_t>(account)); }
inline Address20 AnvilDevAddress(int account) { return *AddressFromSecretKey(AnvilDevKey(account)); }
inline std::string AddressText(const Address20& a) { return "0x" + ToHex(a); }  // lowercase, as the node writes it

// Polls `done` every `step` until it returns true or `timeout` passes; returns its last answer.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(step);
  }
}

// A loopback port that was free a moment ago, below the kernel's ephemeral range. A node keeps
// its port across a restart (the endpoint is registered on-chain), so while it is down the port
// must not be handed out to anyone else: the kernel gives ephemeral ports to every bind to port
// 0 and to every outgoing connection (other tests' nodes, gRPC clients), never ports below
// that range. Random, so that tests running in parallel do not pick the same ones.
// A port no other test process picks while this one runs. Binding a probe socket is not enough:
// ctest runs two network tests at once, and both could pick a port before either daemon binds
// it. So each picked port also holds an flock on /tmp/consensor-test-ports/PORT for the rest of
// the process (the kernel drops it when the process ends, however it ends).
inline int FreeLoopbackPort() {
  int ephemeral_low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> ephemeral_low;
  const int low = 10000;
  if (ephemeral_low <= low + 1000) ephemeral_low = 65536;  // an unusual range: take any free port
  thread_local std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(low, ephemeral_low - 1);
  const std::string lock_dir = "/tmp/consensor-test-ports";
  std::error_code ignored;
  std::filesystem::create_directories(lock_dir, ignored);
  std::filesystem::permissions(lock_dir, std::filesystem::perms::all, ignored);  // shared by every user
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int candidate = pick(rng);
    const std::string lock_path = lock_dir + "/" + std::to_string(candidate);
    const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      if (lock_fd >= 0) close(lock_fd);
      continue;  // another test process holds it
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(candidate));
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    close(fd);
    if (free) return candidate;  // lock_fd stays open: the port stays ours
    close(lock_fd);
  }
  return -1;
}

// The value of one series in a Prometheus exposition, e.g.
// `consensor_p2p_messages_dropped_total{reason="unregistered"}`; -1 when it is absent.
inline double PrometheusValue(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

// ---- tasks

// x[4,8] -> softmax(tanh(x @ w + b)), plus a reduction: a task that runs in well under a millisecond.
inline executor::Graph TinyModel() {
  using executor::Value;
  executor::Graph g;
  Value x = g.input("x", DType::kF32, {4, 8});
  Value h = tanh(matmul(x, g.constant(RandomF32({8, 6}, 1))) + g.constant(RandomF32({6}, 2)));
  g.output("y", softmax(h, -1));
  g.output("s", reduce_sum(h, {0}));
  return g;
}

// `repeats` rounds of h = tanh(h @ w) on an n x n input: a task that keeps a worker busy for a
// while (the time scales with n^3 * repeats).
inline executor::Graph SlowModel(int64_t n, int repeats) {
  using executor::Value;
  executor::Graph g;
  Value x = g.input("x", DType::kF32, {n, n});
  Value w = g.constant(RandomF32({n, n}, 3));
  Value h = x;
  for (int i = 0; i < repeats; ++i) h = tanh(matmul(h, w));
  g.output("y", h);
  return g;
}

// The honest result: the executor run here, in this process, outside any node.
inline StatusOr<executor::RunResult> ExecuteLocally(const executor::Graph& g,
                                                    const std::map<std::string, Tensor>& inputs) {
  ASSIGN_OR_RETURN(auto program, executor::CompileGraph(g, nullptr, executor::Limits()));
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(kernels::BackendOptions()));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, backend.get()));
  executor::RunOptions ro;
  ro.trace = true;
  return loaded->Run(inputs, ro);
}

// Uploads the graph and inputs to `client`'s node; returns the request ready to submit.
inline StatusOr<v1::SubmitTaskRequest> UploadTask(node::NodeClient& client, const executor::Graph& g,
                                                  const std::map<std::string, Tensor>& inputs, uint32_t replicas,
                                                  uint32_t quorum, uint64_t nonce) {
  v1::SubmitTaskRequest request;
  ASSIGN_OR_RETURN(auto graph_blob, client.PutBlob(executor::SerializeGraph(g)));
  request.set_graph_sha256(graph_blob.sha256());
  for (const auto& [name, t] : inputs) {
    ASSIGN_OR_RETURN(auto put, client.PutBlob(EncodeNpy(t)));
    (*request.mutable_inputs())[name] = put.sha256();
  }
  request.mutable_options()->set_nonce(nonce);
  request.mutable_options()->set_replicas(replicas);
  request.mutable_options()->set_quorum(quorum);
  return request;
}

// SUCCEEDED, with a result that has outputs, and a certificate.
inline bool IsCertified(const v1::Task& t) {
  return t.state() == v1::TASK_STATE_SUCCEEDED && t.consensus().has_certificate() && t.has_result() &&
         t.result().outputs_size() > 0;
}

inline std::string Describe(const v1::Task& t) {
  std::ostringstream s;
  s << "task " << t.task_id() << " state " << v1::TaskState_Name(t.state()) << " attempts " << t.attempts()
    << " result_root " << t.result().result_root() << " certificate "
    << (t.consensus().has_certificate() ? "yes" : "no") << " cert_root " << t.consensus().certificate().result_root()
    << " committee " << t.consensus().committee_size() << " votes " << t.consensus().attestations_size() << " disputed "
    << t.consensus().disputed() << " member " << t.consensus().member() << " error " << t.error_code() << " "
    << t.error_message();
  return s.str();
}

// ---- nodes

struct NodeSpec {
  int account = 1;                 // anvil dev account, 1..9 (0 deploys)
  bool registered = true;          // false: the key is never registered on-chain
  std::string fault;               // [fault] mode
  int64_t fault_delay_ms = 10000;  // [fault] delay_ms (the `slow` mode's wait before attesting)
  int64_t member_timeout_ms = 20000;
  int64_t exhausted_grace_ms = 120000;
  bool unreachable = false;    // the registered endpoint is a port nothing listens on (others cannot reach it)
  bool bootstrap_all = false;  // [p2p] bootstrap: every other node's endpoint
  // > 0: the datadir is a tmpfs of this many MiB that the harness mounts (root only: see
  // CanMountTmpfs) and unmounts when the network stops; [storage] min_free_bytes when >= 0.
  int64_t disk_mib = 0;
  int64_t min_free_bytes = -1;
  // TOML appended to the config: whole sections the harness does not write itself.
  std::string extra_config;
  std::string p2p_config;

  NodeSpec& Fault(std::string mode) {
    fault = std::move(mode);
    return *this;
  }
  NodeSpec& FaultDelayMs(int64_t ms) {
    fault_delay_ms = ms;
    return *this;
  }
  NodeSpec& MemberTimeoutMs(int64_t ms) {
    member_timeout_ms = ms;
    return *this;
  }
  NodeSpec& ExhaustedGraceMs(int64_t ms) {
    exhausted_grace_ms = ms;
    return *this;
  }
  NodeSpec& Unregistered() {
    registered = false;
    return *this;
  }
  NodeSpec& Unreachable() {
    unreachable = true;
    return *this;
  }
  NodeSpec& BootstrapAll() {
    bootstrap_all = true;
    return *this;
  }
  // Lines inside the [p2p] table (a TOML table cannot be opened twice, so not ExtraConfig).
  NodeSpec& P2pConfig(std::string lines) {
    p2p_config += lines;
    return *this;
  }
  NodeSpec& ExtraConfig(std::string toml) {
    extra_config += toml;
    return *this;
  }
  NodeSpec& SmallDisk(int64_t mib, int64_t reserve_bytes) {
    disk_mib = mib;
    min_free_bytes = reserve_bytes;
    return *this;
  }
};

// Whether this process may mount a tmpfs (the small-disk tests need root or CAP_SYS_ADMIN).
inline bool CanMountTmpfs(const std::string& scratch_dir) {
  const std::string probe = scratch_dir + "/tmpfs-probe";
  std::filesystem::create_directories(probe);
  const bool ok = mount("tmpfs", probe.c_str(), "tmpfs", 0, "size=1m") == 0;
  if (ok) umount2(probe.c_str(), MNT_DETACH);
  std::filesystem::remove(probe);
  return ok;
}

// Dev account `account` as an operator; chain the setters above for anything else.
inline NodeSpec Operator(int account) {
  NodeSpec spec;
  spec.account = account;
  return spec;
}

class NetworkNode {
 public:
  NetworkNode(std::string name, std::string dir, NodeSpec spec)
      : name_(std::move(name)), dir_(std::move(dir)), spec_(std::move(spec)) {}
  ~NetworkNode() {
    Kill(SIGKILL);
    Unmount();
  }
  NetworkNode(const NetworkNode&) = delete;
  NetworkNode& operator=(const NetworkNode&) = delete;

  // Starts consensord with its config file only; does not wait.
  void Spawn() {
    std::filesystem::create_directories(datadir());
    if (spec_.disk_mib > 0 && !mounted_) {
      const std::string size = "size=" + std::to_string(spec_.disk_mib) + "m";
      mounted_ = mount("tmpfs", datadir().c_str(), "tmpfs", 0, size.c_str()) == 0;
      if (!mounted_) std::cerr << name_ << ": cannot mount a tmpfs at " << datadir() << "\n";
    }
    std::filesystem::remove(datadir() + "/rpc.addr");
    std::filesystem::remove(datadir() + "/metrics.addr");
    pid_ = SpawnWithLog({DaemonBinary(), "--config", config_path(), "--log-level", "debug"}, log_path(),
                        /*append=*/true);
    exit_code_ = -1;
    client_.reset();  // a fresh channel: the old one may sit in gRPC's reconnect backoff
  }
  // Waits until the daemon has written rpc.addr and answers GetNodeInfo, or has exited.
  bool WaitServing(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return WaitUntil(
               [&] {
                 if (Exited()) return true;
                 std::string addr = ReadWholeFile(datadir() + "/rpc.addr");
                 return !addr.empty() && addr.back() == '\n' && client().GetNodeInfo().ok();
               },
               timeout, std::chrono::milliseconds(50)) &&
           running();
  }
  bool Start() {
    Spawn();
    return WaitServing();
  }

  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return true;
    }
    return false;
  }
  bool running() { return !Exited(); }
  // Sends `signal` and waits for the exit; returns the exit code (128+signal when killed by it).
  int Kill(int signal) {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, signal);
    if (!WaitUntil([&] { return Exited(); }, std::chrono::seconds(60), std::chrono::milliseconds(10))) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      exit_code_ = -1;
    }
    return exit_code_;
  }
  // Kills the node and unmounts its small disk, if it has one (a mount would keep the network's
  // directory from being removed).
  void Unmount() {
    if (!mounted_) return;
    Kill(SIGKILL);
    umount2(datadir().c_str(), MNT_DETACH);
    mounted_ = false;
  }
  // Sends a signal without waiting (SIGSTOP / SIGCONT freeze and thaw the node).
  void Signal(int signal) {
    if (pid_ > 0) kill(pid_, signal);
  }
  // The exit code once the process exits by itself within `timeout`; -1 otherwise.
  int WaitExit(std::chrono::milliseconds timeout) {
    WaitUntil([&] { return Exited(); }, timeout, std::chrono::milliseconds(20));
    return pid_ <= 0 ? exit_code_ : -1;
  }

  node::NodeClient& client() {
    if (!client_) client_ = std::make_unique<node::NodeClient>(address(), std::chrono::seconds(30));
    return *client_;
  }
  StatusOr<v1::Task> GetTask(const std::string& id) { return client().GetTask(id); }
  // Peers with a working connection, as the node reports them; -1 when it does not answer.
  int Peers() {
    auto info = client().GetNodeInfo();
    return info.ok() ? static_cast<int>(info->consensus().peers()) : -1;
  }
  std::string MetricsText() {
    std::string addr = ReadWholeFile(datadir() + "/metrics.addr");
    if (addr.empty()) return "";
    auto r = HttpGet(addr.substr(0, addr.size() - 1), "/metrics");
    return r.first == 200 ? r.second : "";
  }
  double Metric(const std::string& series) { return PrometheusValue(MetricsText(), series); }

  const std::string& name() const { return name_; }
  const NodeSpec& spec() const { return spec_; }
  std::string dir() const { return dir_; }
  std::string datadir() const { return dir_ + "/data"; }
  std::string config_path() const { return dir_ + "/consensord.toml"; }
  std::string log_path() const { return dir_ + "/consensord.log"; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }              // where it listens
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(registered_port_); }  // on-chain
  Address20 operator_address() const { return AnvilDevAddress(spec_.account); }
  std::string operator_hex() const { return AddressText(operator_address()); }
  int exit_code() const { return exit_code_; }
  pid_t pid() const { return pid_; }
  std::string Log() const { return ReadWholeFile(log_path()); }
  std::string LogTail(size_t lines) const {
    std::string log = Log();
    size_t at = log.size();
    for (size_t n = 0; n <= lines && at != std::string::npos && at > 0; ++n) at = log.rfind('\n', at - 1);
    return at == std::string::npos ? log : log.substr(at + 1);
  }

 private:
  friend class TestNetwork;
  std::string name_, dir_;
  NodeSpec spec_;
  int port_ = 0;
  int registered_port_ = 0;
  int peer_port_ = 0;  // 0: peers share port_
  std::string keystore_path_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  bool mounted_ = false;  // spec_.disk_mib > 0 and the tmpfs is mounted
  std::unique_ptr<node::NodeClient> client_;
};

struct NetworkOptions {
  int64_t poll_ms = 200;
  bool head_subscription = true;  // chain.rpc_ws: anvil's newHeads over a WebSocket, besides the poll
  int64_t pull_interval_ms = 300;
  uint32_t default_replicas = 3;
  uint32_t default_quorum = 2;
  std::string stake = "10ether";
  std::string deploy_env;  // deploy parameters, e.g. "MIN_REPLICAS=2"
  // Each node gets a peer listener of its own ([p2p] listen), registered on-chain; clients
  // keep using address().
  bool separate_peer_ports = false;
};

class TestNetwork {
 public:
  // The deployment's maxReferenceAge in test networks (blocks of one second).
  static constexpr uint64_t kMaxReferenceAge = 8;
  static constexpr uint64_t kEvidenceDeadline = 64;  // the deployment's evidenceDeadlineBlocks

 public:
  explicit TestNetwork(std::string name, NetworkOptions options = {}) : name_(std::move(name)), options_(options) {
    dir_ =
        (std::filesystem::temp_directory_path() / ("consensor-net-" + std::to_string(getpid()) + "-" + name_)).string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TestNetwork() {
    // MarkFailed() callers have printed the logs already.
    if (::testing::Test::HasFailure() && !failed_) PrintLogs();
    const bool failed = ::testing::Test::HasFailure() || failed_;
    Stop();
    if (!failed && !getenv("CNSR_KEEP_TEST_DIRS")) std::filesystem::remove_all(dir_);
    else std::cerr << "network " << name_ << ": files kept in " << dir_ << "\n";
  }
  TestNetwork(const TestNetwork&) = delete;
  TestNetwork& operator=(const TestNetwork&) = delete;

  // Keeps the files (and skips printing the logs again at destruction).
  void MarkFailed() { failed_ = true; }

  // anvil, contracts, keys, registrations, configs, daemons; then waits until every node sees
  // the operator set and its peers. Returns an empty string on success, else what went wrong.
  std::string Start(const std::vector<NodeSpec>& specs) {
    anvil_ = std::make_unique<AnvilProcess>(dir_ + "/anvil.log");
    if (!anvil_->Start({"--block-time", "1"}))
      return "anvil did not start (scripts/setup.sh installs it): " + anvil_->Log();
    const std::string rel = "deployments/test-network-" + std::to_string(getpid()) + "-" + name_ + ".json";
    // Time parameters that fit a test: R = 8 one-second blocks (a task is announced at
    // head - 6 and its committee drawn from block ref + 9), W = 4. A test's own values follow
    // and win.
    CommandResult deploy =
        DeployContracts(anvil_->url(), rel,
                        "MAX_REFERENCE_AGE=" + std::to_string(kMaxReferenceAge) +
                            " CHALLENGE_WINDOW_BLOCKS=4 EVIDENCE_DEADLINE_BLOCKS=" + std::to_string(kEvidenceDeadline) +
                            " " + options_.deploy_env);
    const std::string written = testing_support::SourceDir() + "/contracts/" + rel;
    if (deploy.exit_code != 0) {
      std::filesystem::remove(written);
      return "deploy failed: " + deploy.out;
    }
    deployment_ = dir_ + "/deployment.json";
    std::error_code ec;
    std::filesystem::copy_file(written, deployment_, std::filesystem::copy_options::overwrite_existing, ec);
    std::filesystem::remove(written);
    if (ec) return "cannot copy the deployment file: " + ec.message();
    auto d = node::LoadDeployment(deployment_);
    if (!d.ok()) return d.status().ToString();
    deployed_ = *d;
    auto transport = node::NewHttpRpcTransport(anvil_->url());
    if (!transport.ok()) return transport.status().ToString();
    rpc_ = std::make_unique<node::EthRpc>(std::move(transport).value());
    chain_ = std::make_unique<node::ChainClient>(rpc_.get(), deployed_, std::nullopt);
    std::ofstream(dir_ + "/password") << "network-test-password\n";
    std::filesystem::permissions(dir_ + "/password",
                                 std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

    for (const NodeSpec& spec : specs) {
      nodes_.push_back(std::make_unique<NetworkNode>("node" + std::to_string(nodes_.size() + 1),
                                                     dir_ + "/node" + std::to_string(nodes_.size() + 1), spec));
      NetworkNode& n = *nodes_.back();
      if (std::string e = PickPorts(n); !e.empty()) return e;
    }
    // Keystores and registrations in parallel: each is its own account.
    std::vector<std::string> errors(nodes_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      threads.emplace_back([this, i, &errors] { errors[i] = Provision(*nodes_[i]); });
    }
    for (auto& t : threads) t.join();
    for (const std::string& e : errors) {
      if (!e.empty()) return e;
    }
    // New stake counts activationDelayBlocks after its deposit: mine them instead of waiting.
    if (std::string e = MineActivationDelay(); !e.empty()) return e;
    // Nodes take the reference block as far as head - R: wait until that block has every
    // registration.
    size_t registered = 0;
    for (const auto& n : nodes_) registered += n->spec().registered ? 1 : 0;
    if (!WaitUntil(
            [&] {
              auto head = rpc_->BlockNumber();
              if (!head.ok() || *head <= kMaxReferenceAge) return false;
              auto set = chain_->OperatorsAt(*head - kMaxReferenceAge);
              return set.ok() && set->size() == registered;
            },
            std::chrono::seconds(60))) {
      return "the registrations did not reach a settled block";
    }
    for (auto& n : nodes_) WriteConfig(*n);
    for (auto& n : nodes_) n->Spawn();
    for (auto& n : nodes_) {
      if (!n->WaitServing()) return n->name() + " did not start (exit code " + std::to_string(n->exit_code()) + ")";
    }
    return WaitConnected();
  }

  // Adds and starts a node after Start (e.g. one with an unregistered key).
  StatusOr<NetworkNode*> AddNode(const NodeSpec& spec) {
    const std::string name = "node" + std::to_string(nodes_.size() + retired_.size() + 1);
    nodes_.push_back(std::make_unique<NetworkNode>(name, dir_ + "/" + name, spec));
    NetworkNode& n = *nodes_.back();
    if (std::string e = PickPorts(n); !e.empty()) return Internal(e);
    if (std::string e = Provision(n); !e.empty()) return Internal(e);
    if (n.spec().registered) {
      if (std::string e = MineActivationDelay(); !e.empty()) return Internal(e);
    }
    WriteConfig(n);
    if (!n.Start()) return Internal(n.name() + " did not start");
    return &n;
  }

  // Every running node reports the registered operators and a working connection to each peer
  // it can reach (the nodes it knows, minus unreachable ones and ones that are not running).
  std::string WaitConnected(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    size_t registered = 0;
    for (const auto& n : nodes_) registered += n->spec().registered ? 1 : 0;
    std::string last;
    bool ok = WaitUntil(
        [&] {
          for (auto& n : nodes_) {
            if (!n->running()) continue;
            auto info = n->client().GetNodeInfo();
            if (!info.ok()) {
              last = n->name() + ": " + info.status().ToString();
              return false;
            }
            const int want = ExpectedPeers(*n);
            if (info->consensus().operator_count() != registered ||
                static_cast<int>(info->consensus().peers()) < want) {
              last = n->name() + " sees " + std::to_string(info->consensus().operator_count()) + " operators and " +
                     std::to_string(info->consensus().peers()) + " peers (want " + std::to_string(registered) +
                     " and " + std::to_string(want) + ")";
              return false;
            }
          }
          return true;
        },
        timeout);
    return ok ? "" : "nodes did not connect: " + last;
  }

  int ExpectedPeers(const NetworkNode& n) const {
    int want = 0;
    for (const auto& other : nodes_) {
      if (other.get() == &n || other->spec().unreachable || other->pid_ <= 0) continue;
      if (other->spec().registered || n.spec().bootstrap_all) ++want;
    }
    return want;
  }

  // Kills a node for good and takes it out of the network's list (its files stay, and its log
  // is still printed when a test fails).
  void Retire(NetworkNode& node) {
    node.Kill(SIGKILL);
    for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
      if (it->get() == &node) {
        retired_.push_back(std::move(*it));
        nodes_.erase(it);
        return;
      }
    }
  }

  // Gives a node another fault mode ("" for none) from its next start: the node must be stopped.
  // Lets a test pick its faulty operators after it has seen a task's committee.
  void SetFault(NetworkNode& n, std::string mode) {
    n.spec_.fault = std::move(mode);
    WriteConfig(n);
  }

  void Stop() {
    for (auto& n : nodes_) n->Kill(SIGKILL);
    for (auto& n : nodes_) n->Unmount();
    for (auto& n : retired_) n->Unmount();
    if (anvil_) anvil_->Stop();
  }

  void PrintLogs(size_t lines = 150) {
    std::vector<NetworkNode*> all;
    for (auto& n : nodes_) all.push_back(n.get());
    for (auto& n : retired_) all.push_back(n.get());
    for (NetworkNode* n : all) {
      std::cerr << "---- " << name_ << "/" << n->name() << " (" << n->operator_hex() << ", fault '" << n->spec().fault
                << "') last " << lines << " lines of " << n->log_path() << "\n"
                << n->LogTail(lines) << "----\n";
    }
  }

  // `consensor ARGS --rpc URL --deployment FILE`
  CommandResult Cli(const std::string& args) const {
    return RunCommand(CliBinary(), args + " --rpc " + anvil_->url() + " --deployment " + deployment_);
  }
  StatusOr<node::OperatorInfo> OperatorInfo(const Address20& a) {
    std::lock_guard<std::mutex> lock(chain_mu_);
    return chain_->GetOperatorInfo(a);
  }
  StatusOr<Hash256> BlockHash(uint64_t block) {
    std::lock_guard<std::mutex> lock(chain_mu_);
    return rpc_->BlockHash(block);
  }
  StatusOr<uint64_t> Head() {
    std::lock_guard<std::mutex> lock(chain_mu_);
    return rpc_->BlockNumber();
  }
  StatusOr<std::vector<consensus::WeightedOperator>> OperatorsAt(uint64_t block) {
    std::lock_guard<std::mutex> lock(chain_mu_);
    return chain_->OperatorsAt(block);
  }
  StatusOr<std::vector<node::SlashEvent>> SlashEvents() {
    std::lock_guard<std::mutex> lock(chain_mu_);
    ASSIGN_OR_RETURN(uint64_t head, rpc_->BlockNumber());
    return chain_->SlashEvents(deployed_.deploy_block, head);
  }

  NetworkNode& node(size_t i) { return *nodes_.at(i); }
  size_t size() const { return nodes_.size(); }
  const std::string& dir() const { return dir_; }
  const std::string& rpc_url() const { return anvil_->url(); }
  const std::string& deployment() const { return deployment_; }
  const node::Deployment& deployed() const { return deployed_; }
  // Mines `blocks` blocks at once (anvil_mine); "" on success.
  std::string Mine(uint64_t blocks) {
    auto mined = rpc_->transport()->Call("anvil_mine", nlohmann::json::array({HexQuantity(blocks)}));
    return mined.ok() ? "" : "anvil_mine: " + mined.status().ToString();
  }
  // anvil mines a block every `seconds` (0: not at all, until set again); "" on success.
  std::string SetBlockInterval(uint64_t seconds) {
    auto set = rpc_->transport()->Call("evm_setIntervalMining", nlohmann::json::array({seconds}));
    return set.ok() ? "" : "evm_setIntervalMining: " + set.status().ToString();
  }

 private:
  // Mines the registry's activationDelayBlocks (anvil_mine), after which every stake deposited
  // so far counts (docs/SECURITY.md, section 5).
  std::string MineActivationDelay() {
    auto a = chain_->ActivationDelayBlocks();
    if (!a.ok()) return a.status().ToString();
    if (*a == 0) return "";
    // A blocks to activate, R more so that a new task's reference block (as far as head - R)
    // already sees the stake.
    auto mined = rpc_->transport()->Call("anvil_mine", nlohmann::json::array({HexQuantity(*a + kMaxReferenceAge)}));
    if (!mined.ok()) return "anvil_mine: " + mined.status().ToString();
    return "";
  }

  // The client port, the peer port (with separate_peer_ports) and the registered one.
  std::string PickPorts(NetworkNode& n) {
    n.port_ = FreeLoopbackPort();
    n.peer_port_ = options_.separate_peer_ports ? FreeLoopbackPort() : 0;
    const int peers_dial = options_.separate_peer_ports ? n.peer_port_ : n.port_;
    n.registered_port_ = n.spec().unreachable ? FreeLoopbackPort() : peers_dial;
    if (n.port_ <= 0 || n.registered_port_ <= 0 || n.peer_port_ < 0) return "no free port";
    return "";
  }

  // Keystore import and (for registered nodes) the on-chain registration, through the CLI.
  std::string Provision(NetworkNode& n) {
    std::filesystem::create_directories(n.dir() + "/keystore");
    const std::string keyfile = n.dir() + "/key.hex";
    std::ofstream(keyfile) << ToHex(AnvilDevKey(n.spec().account)) << "\n";
    CommandResult imported = RunCommand(CliBinary(), "keys import " + keyfile + " --keystore " + n.dir() +
                                                         "/keystore --password-file " + dir_ + "/password --light-kdf");
    std::filesystem::remove(keyfile);
    if (imported.exit_code != 0) return n.name() + ": keys import failed: " + imported.out;
    for (const auto& e : std::filesystem::directory_iterator(n.dir() + "/keystore"))
      n.keystore_path_ = e.path().string();
    if (!n.spec().registered) return "";
    CommandResult reg = Cli("operator register --stake " + options_.stake + " --endpoint " + n.endpoint() +
                            " --keystore " + n.keystore_path_ + " --password-file " + dir_ + "/password");
    if (reg.exit_code != 0) return n.name() + ": operator register failed: " + reg.out;
    return "";
  }

  void WriteConfig(NetworkNode& n) {
    std::ofstream f(n.config_path());
    f << "datadir = \"" << n.datadir() << "\"\n"
      << "[rpc]\nlisten = \"" << n.address() << "\"\n"
      << "[metrics]\nlisten = \"127.0.0.1:0\"\n"
      << "[executor]\nworkers = 2\n"
      << "[operator]\nkeystore = \"" << n.keystore_path_ << "\"\npassword_file = \"" << dir_ << "/password\"\n"
      << "[chain]\nrpc = \"" << anvil_->url() << "\"\ndeployment = \"" << deployment_
      << "\"\npoll_ms = " << options_.poll_ms << "\n";
    if (options_.head_subscription) f << "rpc_ws = \"ws://" << anvil_->url().substr(7) << "\"\n";  // after http://
    f << "[p2p]\npull_interval_ms = " << options_.pull_interval_ms << "\n";
    if (n.peer_port_ > 0) f << "listen = \"127.0.0.1:" << n.peer_port_ << "\"\n";
    f << n.spec().p2p_config;
    if (n.spec().bootstrap_all) {
      f << "bootstrap = [";
      bool first = true;
      for (const auto& other : nodes_) {
        if (other.get() == &n) continue;
        f << (first ? "" : ", ") << "\"" << other->endpoint() << "\"";
        first = false;
      }
      f << "]\n";
    }
    f << "[consensus]\nreplicas = " << options_.default_replicas << "\nquorum = " << options_.default_quorum
      << "\nmember_timeout_ms = " << n.spec().member_timeout_ms << "\nexhausted_grace_ms = "
      << n.spec().exhausted_grace_ms
      // Every member's commitment in before the reveals, even on a loaded CI machine: the fault
      // tests need the honest spare commitment (a 4th member) next to an equivocating one.
      << "\ncommit_grace_ms = 2000\n";
    if (n.spec().min_free_bytes >= 0) f << "[storage]\nmin_free_bytes = " << n.spec().min_free_bytes << "\n";
    if (!n.spec().fault.empty()) {
      f << "[fault]\nmode = \"" << n.spec().fault << "\"\ndelay_ms = " << n.spec().fault_delay_ms << "\n";
    }
    f << n.spec().extra_config;
  }

  std::string name_;
  NetworkOptions options_;
  std::string dir_;
  bool failed_ = false;
  std::unique_ptr<AnvilProcess> anvil_;
  std::string deployment_;
  node::Deployment deployed_;
  std::mutex chain_mu_;
  std::unique_ptr<node::EthRpc> rpc_;
  std::unique_ptr<node::ChainClient> chain_;
  std::vector<std::unique_ptr<NetworkNode>> nodes_;
  std::vector<std::unique_ptr<NetworkNode>> retired_;
};

}  // namespace consensor::testing_support
