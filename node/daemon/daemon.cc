#include "node/daemon/daemon.h"

#include <absl/synchronization/mutex.h>
#include <pthread.h>
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common/version.h"
#include "node/cli/cli_args.h"
#include "node/daemon/config.h"
#include "node/daemon/node.h"
#include "node/telemetry/log.h"
#include "node/telemetry/protobuf_log.h"

namespace consensor::node {

namespace {

constexpr char kDaemonUsage[] = R"(usage: consensord [options]

Runs a Consensor node: the gRPC client API, durable task storage and the deterministic
executor. Settings come from a TOML file (--config) and are overridden by flags.

options:
  --config FILE          TOML configuration (docs/NODE.md lists every key)
  --datadir DIR          data directory, locked by one node at a time (default ~/.consensor)
  --listen ADDR          gRPC address, host:port (default 127.0.0.1:7400; port 0 picks one)
  --metrics ADDR         HTTP address for /metrics and /eigen/node/* (default: off)
  --log-level LEVEL      debug | info | warn | error
  --log-format FORMAT    logfmt | json
  --backend NAME         cpu | cuda | cuda-emu
  --threads N            CPU threads per task
  --workers N            tasks executing at once
  --queue N              tasks waiting before SubmitTask answers RESOURCE_EXHAUSTED
  --program-cache-bytes N
                         compiled programs and weights kept between tasks (0: off)
  --input-cache-bytes N  decoded task inputs kept in memory (0: off)
  --fallback-cpu         rerun on the CPU when the GPU backend fails, and run on the CPU
                         when the backend fails its startup self-test
  --no-selftest          skip the startup self-test of a non-CPU backend (executor.selftest)
  --storage-max-bytes N  storage quota: blobs, tasks and results (0: none; storage.max_bytes)
  --min-free-bytes N     free space kept on the datadir's filesystem (storage.min_free_bytes)
  --retain-results-hours N
                         finished tasks and results kept this long (0: until the quota needs room)
  --sweep-interval-ms N  how often the retention job runs (storage.sweep_interval_ms)
  --max-blob-bytes N  --max-task-bytes N  --max-task-flops N  --max-task-seconds N
  --max-elements N  --max-ops N  --max-inputs N
                         per-task caps (docs/NODE.md)
  --keystore FILE        operator key (v3 keystore); password from --password-file FILE
  --password-file FILE   or from the environment variable named by --password-env VAR
  --password-env VAR
  --chain-rpc URL        join the network of this chain (JSON-RPC URL, http:// or https://);
                         needs --deployment
  --chain-rpc-ca-file FILE
                         https/wss: trust the CAs in this PEM file instead of the system store
  --chain-rpc-ws URL     also subscribe to new heads at this ws:// or wss:// endpoint, so that
                         blocks are seen when mined rather than at the next poll (chain.rpc_ws)
  --deployment FILE      contracts/deployments/<chainid>.json
  --p2p-listen ADDR      a gRPC listener of its own for peers (gossip, blob and result fetches),
                         host:port, with its own thread quota (default: peers share --listen)
  --advertise ADDR       endpoint peers reach this node at (default: --p2p-listen, else --listen)
  --bootstrap LIST       comma-separated peer endpoints besides the on-chain registry's
  --client-auth MODE     open | keys: whether client API calls need a key from the keys file
                         (clients.auth; per-client budgets are set in [clients] and the file)
  --client-keys-file FILE
                         the clients' names, key hashes and budgets (clients.keys_file)
  --version              print the version and exit
)";

int Usage(std::ostream& err, const std::string& message) {
  err << "consensord: " << message << "\n\n" << kDaemonUsage;
  return 2;
}

}  // namespace

int RunDaemon(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  // Debian's Abseil is built with lock-order (deadlock) tracking on, and gRPC locks an
  // absl::Mutex many times per call: the tracking's global graph cost the node a few percent of
  // its CPU on tiny tasks. It only reports lock inversions in Abseil's own mutexes, which the
  // node does not use; gRPC's behaviour does not depend on it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ArgSpec spec;
  spec.value_options = {"--config",
                        "--datadir",
                        "--listen",
                        "--metrics",
                        "--log-level",
                        "--log-format",
                        "--backend",
                        "--threads",
                        "--workers",
                        "--queue",
                        "--max-blob-bytes",
                        "--max-task-bytes",
                        "--max-task-flops",
                        "--max-task-seconds",
                        "--max-elements",
                        "--max-ops",
                        "--max-inputs",
                        "--keystore",
                        "--password-file",
                        "--password-env",
                        "--chain-rpc",
                        "--chain-rpc-ca-file",
                        "--chain-rpc-ws",
                        "--deployment",
                        "--advertise",
                        "--bootstrap",
                        "--program-cache-bytes",
                        "--input-cache-bytes",
                        "--p2p-listen",
                        "--storage-max-bytes",
                        "--min-free-bytes",
                        "--retain-results-hours",
                        "--sweep-interval-ms",
                        "--client-auth",
                        "--client-keys-file"};
  spec.flags = {"--help", "--version", "--fallback-cpu", "--no-selftest"};
  auto parsed = ParseArgs(raw, spec);
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) {
    out << kDaemonUsage;
    return 0;
  }
  if (a.HasFlag("--version")) {
    out << "consensord " << kProjectVersion << "\n";
    return 0;
  }
  if (!a.positional.empty()) return Usage(err, "unexpected argument '" + a.positional[0] + "'");

  NodeConfig config;
  if (auto file = a.Option("--config")) {
    auto loaded = LoadNodeConfigFile(*file);
    if (!loaded.ok()) {
      err << "consensord: " << loaded.status().message() << "\n";
      return 1;
    }
    config = std::move(loaded).value();
  }
  // Flags override the file, through the same keys.
  struct FlagKey {
    const char* flag;
    const char* key;
  };
  const FlagKey string_flags[] = {{"--datadir", "datadir"},
                                  {"--listen", "rpc.listen"},
                                  {"--metrics", "metrics.listen"},
                                  {"--log-level", "log.level"},
                                  {"--log-format", "log.format"},
                                  {"--backend", "executor.backend"},
                                  {"--keystore", "operator.keystore"},
                                  {"--password-file", "operator.password_file"},
                                  {"--password-env", "operator.password_env"},
                                  {"--chain-rpc", "chain.rpc"},
                                  {"--chain-rpc-ca-file", "chain.rpc_ca_file"},
                                  {"--chain-rpc-ws", "chain.rpc_ws"},
                                  {"--deployment", "chain.deployment"},
                                  {"--advertise", "p2p.advertise"},
                                  {"--p2p-listen", "p2p.listen"},
                                  {"--client-auth", "clients.auth"},
                                  {"--client-keys-file", "clients.keys_file"}};
  const FlagKey int_flags[] = {{"--threads", "executor.threads"},
                               {"--workers", "executor.workers"},
                               {"--queue", "executor.queue_capacity"},
                               {"--program-cache-bytes", "executor.program_cache_bytes"},
                               {"--input-cache-bytes", "executor.input_cache_bytes"},
                               {"--max-blob-bytes", "limits.max_blob_bytes"},
                               {"--max-task-bytes", "limits.max_task_bytes"},
                               {"--max-task-flops", "limits.max_task_flops"},
                               {"--max-task-seconds", "limits.max_task_seconds"},
                               {"--max-elements", "limits.max_elements"},
                               {"--max-ops", "limits.max_ops"},
                               {"--max-inputs", "limits.max_inputs"},
                               {"--storage-max-bytes", "storage.max_bytes"},
                               {"--min-free-bytes", "storage.min_free_bytes"},
                               {"--retain-results-hours", "storage.retain_results_hours"},
                               {"--sweep-interval-ms", "storage.sweep_interval_ms"}};
  std::vector<std::pair<const char*, NodeSetting>> overrides;
  for (const auto& f : string_flags) {
    if (auto v = a.Option(f.flag)) overrides.emplace_back(f.key, *v);
  }
  for (const auto& f : int_flags) {
    if (auto v = a.Option(f.flag)) {
      // Every count and cap is at least 1, except a cache budget, where 0 turns the cache off.
      // The storage quota, reserve and retention take 0 for "none" too.
      const std::string_view flag(f.flag);
      const int64_t min =
          (flag == "--program-cache-bytes" || flag == "--input-cache-bytes" || flag == "--storage-max-bytes" ||
           flag == "--min-free-bytes" || flag == "--retain-results-hours")
              ? 0
              : 1;
      auto n = ParseIntOption(*v, f.flag, min, INT64_MAX);
      if (!n.ok()) return Usage(err, n.status().message());
      overrides.emplace_back(f.key, *n);
    }
  }
  if (a.HasFlag("--fallback-cpu")) overrides.emplace_back("executor.fallback_cpu", true);
  if (a.HasFlag("--no-selftest")) overrides.emplace_back("executor.selftest", false);
  if (auto list = a.Option("--bootstrap")) {
    std::vector<std::string> peers;
    size_t start = 0;
    while (start <= list->size()) {
      size_t comma = list->find(',', start);
      if (comma == std::string::npos) comma = list->size();
      if (comma > start) peers.push_back(list->substr(start, comma - start));
      start = comma + 1;
    }
    overrides.emplace_back("p2p.bootstrap", std::move(peers));
  }
  for (auto& [key, value] : overrides) {
    if (Status s = SetNodeConfigValue(&config, key, std::move(value)); !s.ok()) {
      err << "consensord: " << s.message() << "\n";
      return 1;
    }
  }
  if (Status s = FinalizeNodeConfig(&config); !s.ok()) {
    err << "consensord: " << s.message() << "\n";
    return 1;
  }
  auto level = ParseLogLevel(config.log_level);
  auto format = ParseLogFormat(config.log_format);
  ConfigureLogging(level.ok() ? *level : LogLevel::kInfo, format.ok() ? *format : LogFormat::kLogfmt, 2);
  RouteProtobufLogs();  // parse errors quote bytes from peers and clients: rate-limited

  // Block the shutdown signals in every thread; the main thread waits for them with sigwait,
  // so no work happens inside a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto node = Node::Start(config);
  if (!node.ok()) {
    Log(LogLevel::kError, "startup failed", {{"error", node.status().message()}});
    err << "consensord: " << node.status().message() << "\n";
    return 1;
  }
  int received = 0;
  sigwait(&signals, &received);
  Log(LogLevel::kInfo, "signal received", {{"signal", received == SIGINT ? "SIGINT" : "SIGTERM"}});
  (*node)->Shutdown();
  return 0;
}

}  // namespace consensor::node
