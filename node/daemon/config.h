// consensord configuration: a TOML file (--config) overridden by command-line flags.
// Every key is optional. Unknown keys and wrong types are errors that name the key, so a typo in
// an operator's config never goes unnoticed. docs/NODE.md lists every key with its default and
// range; config.cc's key table says which option field each key sets.
//
//   datadir
//   [rpc]       listen  max_message_bytes  max_streams
//   [metrics]   listen
//   [log]       level  format
//   [executor]  backend  threads  isa  device  fallback_cpu  selftest  workers  queue_capacity
//               program_cache_bytes  input_cache_bytes
//   [storage]   max_bytes  min_free_bytes  retain_results_hours  sweep_interval_ms
//   [limits]    max_blob_bytes  max_task_bytes  max_task_flops  max_task_seconds  max_elements
//               max_ops  max_inputs
//   [operator]  keystore  password_file  password_env
//   [chain]     rpc  deployment  confirmations  poll_ms  submit_evidence
//   [p2p]       advertise  bootstrap  fanout  max_messages_per_second
//               max_messages_per_second_per_operator  pull_interval_ms
//               max_pull_requests_per_second_per_ip  max_pull_bytes_per_second_per_operator
//               max_pull_requests_per_second_per_operator  max_signature_checks_per_second_per_host
//               max_lookups_per_second_per_operator  max_lookups_per_second_per_host
//   [consensus] replicas  quorum  max_replicas  member_timeout_ms  max_dispute_committee
//               max_reference_age
//   [clients]   auth  keys_file  submissions_per_second  submission_burst  flops_per_minute
//               max_tasks_in_flight  max_watches  max_disk_bytes
//   [fault]     mode  (testing only: corrupt-output | equivocate | silent | crash-mid-task | ...,
//                     refuse-everywhere; docs/NETWORK.md lists them)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "node/api/client_gate.h"
#include "node/chain/chain_view.h"
#include "node/engine/consensus_options.h"
#include "node/engine/task_manager.h"
#include "node/p2p/gossip.h"

namespace consensor::node {

struct NodeConfig {
  // The daemon's own settings.
  std::string datadir = "~/.consensor";

  std::string rpc_listen = "127.0.0.1:7400";
  // Per gRPC message, and so per gossip envelope; blobs are streamed in chunks.
  int64_t rpc_max_message_bytes = int64_t{4} << 20;
  int64_t rpc_max_streams = 64;  // concurrent RPCs (server threads)

  std::string metrics_listen;  // empty = disabled

  // Disk budget and retention (docs/NODE.md): a quota on what the store holds (0: none), the free
  // space kept on the datadir's filesystem, how long finished tasks and their results are kept
  // (0: until the quota needs the room), and how often the retention job runs.
  int64_t storage_max_bytes = 0;
  int64_t storage_min_free_bytes = int64_t{256} << 20;
  int64_t storage_retain_results_hours = 168;
  std::chrono::milliseconds storage_sweep_interval{600000};

  std::string log_level = "info";
  std::string log_format = "logfmt";

  // A non-CPU backend must reproduce the CPU reference (executor/selftest.h) before the node
  // serves; on a mismatch it refuses to start, or runs on the CPU when fallback_cpu is set.
  bool selftest = true;

  std::string keystore;       // optional v3 keystore file of the operator key
  std::string password_file;  // password for the keystore, from a file...
  std::string password_env;   // ...or from this environment variable

  // Network mode: set chain_view.rpc_url (chain.rpc) to join the operator network of the
  // deployment's contracts; an https RPC behind a private CA also needs chain_view.rpc_ca_file
  // (chain.rpc_ca_file).
  std::string chain_deployment;       // contracts/deployments/<chainid>.json
  bool chain_submit_evidence = true;  // send slashing transactions for evidence this node finds

  // The peer service's own gRPC listener, host:port (empty: it shares rpc.listen's server and
  // thread quota with the client API, so clients holding streams can silence gossip). Peers get
  // their own thread quota, p2p_max_streams; only the calls peers make are served there.
  std::string p2p_listen;
  int64_t p2p_max_streams = 64;
  int64_t p2p_max_blob_streams_per_host = 32;  // GetBlob streams one remote host may hold there
  // ... and one operator (signed requests) or one host's unsigned requests, within the host bound
  int64_t p2p_max_blob_streams_per_operator = 16;
  // GetTask and GetNodeInfo calls per second on the peer port (token buckets, burst 2x): per
  // operator (signed requests; one host's unsigned ones share one), and per remote host over all.
  int64_t p2p_max_lookups_per_second_per_operator = 100;
  int64_t p2p_max_lookups_per_second_per_host = 400;
  std::string p2p_advertise;               // endpoint peers reach this node at (default: p2p.listen, else rpc.listen)
  std::vector<std::string> p2p_bootstrap;  // peers to contact besides the registry's endpoints

  // Client identities and per-client budgets (docs/NODE.md, "Clients"). The keys file is read
  // when the node starts.
  ClientsConfig clients;

  // Fault injection for tests and devnets, empty in every real deployment: the node turns it into
  // the engine's FaultInjector (node/engine/fault_injection.h).
  std::string fault_mode;
  std::chrono::milliseconds fault_delay{10000};  // fault.delay_ms: how late `slow` attests

  // The components' options, with the components' defaults. The node sets their run-time fields
  // (the gossip key and chain id, the task manager's network hooks) and the values another key
  // already gives (gossip.max_message_bytes is rpc.max_message_bytes; consensus.max_blob_bytes is
  // limits.max_blob_bytes, which sets tasks.limits.max_graph_file_bytes).
  TaskManagerOptions tasks;     // [executor] but selftest, [limits]
  ChainViewOptions chain_view;  // chain.rpc, chain.poll_ms
  GossipOptions gossip;         // p2p.fanout, p2p.max_messages_per_second, p2p.pull_interval_ms
  ConsensusOptions consensus;   // [consensus], chain.confirmations

  // Integers given in the file or by a flag that their option field cannot hold (a negative
  // consensus.replicas, say), by dotted key: FinalizeNodeConfig reports them with the value as
  // written. Kept by config.cc; nothing else needs to read it.
  std::map<std::string, int64_t, std::less<>> unrepresentable_integers;
};

// Parses TOML text; `origin` names the source in error messages.
StatusOr<NodeConfig> ParseNodeConfig(const std::string& toml_text, const std::string& origin);
StatusOr<NodeConfig> LoadNodeConfigFile(const std::string& path);
// Sets the setting of a dotted key ("executor.workers") as the same key in the file would;
// command-line flags use it. INVALID_ARGUMENT for an unknown key or a value of the wrong kind.
using NodeSetting = std::variant<std::string, int64_t, bool, std::vector<std::string>>;
Status SetNodeConfigValue(NodeConfig* config, std::string_view key, NodeSetting value);
// Range and consistency checks (after flags are applied). Expands "~/" in paths.
Status FinalizeNodeConfig(NodeConfig* config);

}  // namespace consensor::node
