// consensord configuration: a TOML file (--config) overridden by command-line flags.
// Every key is optional; defaults are below. Unknown keys and wrong types are errors that
// name the key, so a typo in an operator's config never goes unnoticed.
//
//   datadir = "~/.consensor"
//   [rpc]      listen = "127.0.0.1:7400"   max_message_bytes = 4194304   max_streams = 64
//   [metrics]  listen = ""                 (empty: no HTTP server)
//   [log]      level = "info"              format = "logfmt"   (or "json")
//   [executor] backend = "cpu"  threads = 1  isa = "auto"  device = 0  fallback_cpu = false
//              selftest = true  workers = 2      queue_capacity = 64
//   [limits]   max_blob_bytes, max_task_bytes, max_task_flops, max_task_seconds,
//              max_elements, max_ops, max_inputs
//   [operator] keystore = ""  password_file = ""  password_env = ""
//   [chain]    rpc = ""  (empty: standalone, no network)  deployment = ""  confirmations = 1
//              poll_ms = 1000   submit_evidence = true
//   [p2p]      advertise = ""  bootstrap = []  fanout = 6  max_messages_per_second = 500
//              pull_interval_ms = 2000
//   [consensus] replicas = 3  quorum = 2  max_replicas = 16  member_timeout_ms = 20000
//              max_dispute_committee = 64  max_reference_age = 256
//   [fault]    mode = ""  (testing only: corrupt-output | equivocate | silent | crash-mid-task)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace consensor::node {

struct NodeConfig {
  std::string datadir = "~/.consensor";

  std::string rpc_listen = "127.0.0.1:7400";
  int64_t rpc_max_message_bytes = int64_t{4} << 20;  // per gRPC message; blobs are streamed in chunks
  int64_t rpc_max_streams = 64;                      // concurrent RPCs (server threads)

  std::string metrics_listen;  // empty = disabled

  std::string log_level = "info";
  std::string log_format = "logfmt";

  std::string backend = "cpu";  // cpu | cuda | cuda-emu
  int64_t threads = 1;          // per task, CPU backend
  std::string isa = "auto";     // auto | avx2 | portable
  int64_t device = 0;           // GPU index
  bool fallback_cpu = false;    // rerun on the CPU when the GPU backend fails
  // A non-CPU backend must reproduce the CPU reference (executor/selftest.h) before the node
  // serves; on a mismatch it refuses to start, or runs on the CPU when fallback_cpu is set.
  bool selftest = true;
  int64_t workers = 2;          // tasks executing at once
  int64_t queue_capacity = 64;  // tasks waiting; beyond this SubmitTask gets RESOURCE_EXHAUSTED

  int64_t max_blob_bytes = int64_t{1} << 30;
  int64_t max_task_bytes = int64_t{4} << 30;  // planned arena: inputs + weights + live values
  int64_t max_task_flops = int64_t{10} * 1000 * 1000 * 1000 * 1000;  // 1e13
  int64_t max_task_seconds = 600;             // wall time per task execution
  int64_t max_elements = int64_t{1} << 28;    // per tensor
  int64_t max_ops = 100000;
  int64_t max_inputs = 1024;                  // placeholders per task

  std::string keystore;       // optional v3 keystore file of the operator key
  std::string password_file;  // password for the keystore, from a file...
  std::string password_env;   // ...or from this environment variable

  // Network mode: set chain_rpc to join the operator network of the deployment's contracts.
  std::string chain_rpc;             // JSON-RPC URL of the chain (e.g. http://127.0.0.1:8545)
  std::string chain_deployment;      // contracts/deployments/<chainid>.json
  int64_t chain_confirmations = 1;   // reference block = head - confirmations (a mined, settled block)
  int64_t chain_poll_ms = 1000;      // how often the operator set and head are refreshed
  bool chain_submit_evidence = true; // send slashing transactions for evidence this node finds

  std::string p2p_advertise;                // endpoint peers reach this node at (default: rpc.listen)
  std::vector<std::string> p2p_bootstrap;   // peers to contact besides the registry's endpoints
  int64_t p2p_fanout = 6;
  int64_t p2p_max_messages_per_second = 500;  // per peer
  int64_t p2p_pull_interval_ms = 2000;        // anti-entropy

  int64_t consensus_replicas = 3;        // default committee size
  int64_t consensus_quorum = 2;          // default matching signatures
  int64_t consensus_max_replicas = 16;   // bound on a task's requested replicas
  int64_t consensus_member_timeout_ms = 20000;  // a silent member is replaced after this
  int64_t consensus_max_dispute_committee = 64;
  int64_t consensus_max_reference_age = 256;    // blocks; older announcements are refused

  // Fault injection for tests and devnets; empty in every real deployment.
  std::string fault_mode;
};

// Parses TOML text; `origin` names the source in error messages.
StatusOr<NodeConfig> ParseNodeConfig(const std::string& toml_text, const std::string& origin);
StatusOr<NodeConfig> LoadNodeConfigFile(const std::string& path);
// Range and consistency checks (after flags are applied). Expands "~/" in paths.
Status FinalizeNodeConfig(NodeConfig* config);

}  // namespace consensor::node
