// consensord's TOML config (node/daemon/config.h): a local file, checked key by key. Whatever
// parses must either finalize or be refused with a Status, and setting every parsed value again
// through the flag path must not crash either.
#include "node/daemon/config.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

CNSR_FUZZ_TARGET(config) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = ParseNodeConfig(text, "fuzz.toml");
  if (!config.ok()) {
    CNSR_FUZZ_CHECK(!config.status().message().empty());
    return 0;
  }
  NodeConfig finalized = *config;
  (void)FinalizeNodeConfig(&finalized);
  return 0;
}

CNSR_FUZZ_SEEDS(config) {
  return {fuzz::Bytes(R"(# a devnet node
datadir = "/tmp/node0/data"
[rpc]
listen = "127.0.0.1:7401"
[metrics]
listen = "127.0.0.1:9100"
[log]
format = "logfmt"
[executor]
workers = 2
[operator]
keystore = "/tmp/node0/keystore/UTC--key"
password_file = "/tmp/password"
[chain]
rpc = "http://127.0.0.1:8545"
deployment = "/tmp/deployment.json"
poll_ms = 500
[p2p]
pull_interval_ms = 1000
bootstrap = ["127.0.0.1:7402", "[::1]:7403"]
[consensus]
replicas = 3
quorum = 2
member_timeout_ms = 10000
max_reference_age = 8
challenge_window_blocks = 4
)"),
          fuzz::Bytes(R"(datadir = "~/.consensor"
[rpc]
listen = "0.0.0.0:7401"
max_message_bytes = 8_388_608
max_streams = 128
[log]
level = "debug"
format = "json"
[executor]
backend = "cuda"
threads = 8
isa = "avx2"
device = 1
fallback_cpu = true
selftest = false
queue_capacity = 1000
program_cache_bytes = 0
[limits]
max_blob_bytes = 2147483648
max_task_bytes = 17179869184
max_task_flops = 100_000_000_000_000
max_task_seconds = 120
max_elements = 1048576
max_ops = 5000
max_inputs = 16
[fault]
mode = "slow"
delay_ms = 100
)"),
          fuzz::Bytes("[rpc]\nmax_streams = -1\n[consensus]\nreplicas = 9999999999999\n")};
}
