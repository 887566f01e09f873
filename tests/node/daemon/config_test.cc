#include "node/daemon/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/test_files.h"

namespace consensor::node {
namespace {

using testing_support::MakeTempDir;
using testing_support::ReadFile;
using testing_support::WriteFile;

std::string ParseError(const std::string& text) {
  auto config = ParseNodeConfig(text, "config.toml");
  if (config.ok()) return "OK";
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument) << config.status().ToString();
  return config.status().message();
}

std::string FinalizeError(NodeConfig config) {
  const Status status = FinalizeNodeConfig(&config);
  if (status.ok()) return "OK";
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  return status.message();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Sets $HOME for one test and restores it afterwards.
class ScopedHome {
 public:
  explicit ScopedHome(const char* value) {
    if (const char* old = std::getenv("HOME")) old_ = old;
    if (value) {
      ::setenv("HOME", value, 1);
    } else {
      ::unsetenv("HOME");
    }
  }
  ~ScopedHome() {
    if (old_) {
      ::setenv("HOME", old_->c_str(), 1);
    } else {
      ::unsetenv("HOME");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(ConfigTest, FaultModeIsOneOfTheInjectorsNamesAndNeedsNetworkMode) {
  ScopedHome home("/home/op");
  NodeConfig config;
  config.fault_mode = "flaky";
  EXPECT_EQ(
      FinalizeError(config),
      "fault.mode must be one of corrupt-output, equivocate, silent, crash-mid-task, downgrade-replicas, "
      "wrong-trace-root, slow, stale-reference, lazy-copy, withhold-reveal, trickle-blobs, corrupt-served-outputs, "
      "cannot-fetch, refuse-everywhere, crash-before-unsynced-record, lose-own-commitment (got 'flaky')");
  config.fault_mode = "silent";
  EXPECT_EQ(FinalizeError(config), "fault.mode needs network mode (chain.rpc)");
  // The one mode a single node takes: it stops before a RunTask's unsynced record write.
  config.fault_mode = "crash-before-unsynced-record";
  EXPECT_EQ(FinalizeError(config), "OK");
  auto parsed = ParseNodeConfig("[fault]\nmode = \"equivocate\"\n", "config.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->fault_mode, "equivocate");
  parsed = ParseNodeConfig("[fault]\nmode = \"slow\"\ndelay_ms = 2500\n", "config.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->fault_delay.count(), 2500);
  config.fault_delay = std::chrono::milliseconds(-1);
  EXPECT_NE(FinalizeError(config).find("fault.delay_ms"), std::string::npos) << FinalizeError(config);
}

// Issue 18: peers may get a listener (and thread quota) of their own; it needs network mode and
// a port other than the client API's.
TEST(ConfigTest, PeerListenerIsItsOwnPortInNetworkMode) {
  ScopedHome home("/home/op");
  auto parsed = ParseNodeConfig("[p2p]\nlisten = \"0.0.0.0:7401\"\nmax_streams = 32\n", "config.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->p2p_listen, "0.0.0.0:7401");
  EXPECT_EQ(parsed->p2p_max_streams, 32);
  NodeConfig config;
  config.p2p_listen = "127.0.0.1:7401";
  EXPECT_EQ(FinalizeError(config), "p2p.listen (--p2p-listen) needs network mode (chain.rpc)");
  config.chain_view.rpc_url = "http://127.0.0.1:8545";
  config.chain_deployment = "/tmp/deployment.json";
  config.keystore = "/tmp/key.json";
  config.password_env = "PW";
  EXPECT_EQ(FinalizeError(config), "OK");
  config.p2p_listen = config.rpc_listen;
  EXPECT_EQ(FinalizeError(config), "p2p.listen and rpc.listen are both 127.0.0.1:7400; give peers a port of their own");
  config.p2p_listen = "no port";
  EXPECT_TRUE(Contains(FinalizeError(config), "p2p.listen (--p2p-listen)")) << FinalizeError(config);
  config.p2p_listen = "127.0.0.1:7401";
  config.p2p_max_streams = 0;
  EXPECT_TRUE(Contains(FinalizeError(config), "p2p.max_streams")) << FinalizeError(config);
}

// Issue 16, hole 8: a GPU node without a passing self-test never signs. Skipping the self-test
// is refused in network mode (a failed one stops startup or moves tasks to the CPU, see
// node/daemon/startup_selftest.h).
TEST(ConfigTest, NetworkNodeOnAnUncheckedBackendIsRefused) {
  ScopedHome home("/home/op");
  NodeConfig config;
  config.chain_view.rpc_url = "http://127.0.0.1:8545";
  config.chain_deployment = "/tmp/deployment.json";
  config.keystore = "/tmp/key.json";
  config.password_env = "PW";
  config.tasks.backend.name = "cuda";
  config.selftest = false;
  EXPECT_EQ(FinalizeError(config),
            "executor.selftest = false with backend 'cuda' in network mode: a node signs only results its backend "
            "reproduced against the CPU; enable the self-test or use the cpu backend");
  config.selftest = true;
  EXPECT_EQ(FinalizeError(config), "OK");
  config.selftest = false;
  config.tasks.backend.name = "cpu";  // the reference itself needs no check
  EXPECT_EQ(FinalizeError(config), "OK");
  config.tasks.backend.name = "cuda";
  config.chain_view.rpc_url.clear();  // standalone: signs nothing
  config.chain_deployment.clear();
  config.keystore.clear();
  config.password_env.clear();
  EXPECT_EQ(FinalizeError(config), "OK");
}

// Issue 16, hole 9: an https RPC with its own CA file; a malformed chain.rpc is refused at
// startup naming only its redacted form (hosted RPCs keep API keys in the URL).
TEST(ConfigTest, ChainRpcOverHttpsWithACaFileAndNoEchoedSecrets) {
  ScopedHome home("/home/op");
  auto parsed = ParseNodeConfig(
      "[operator]\nkeystore = \"/tmp/key.json\"\npassword_env = \"PW\"\n"
      "[chain]\nrpc = \"https://rpc.example.org/v3/KEY\"\nrpc_ca_file = \"~/rpc-ca.pem\"\n"
      "deployment = \"/tmp/deployment.json\"\n",
      "config.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(FinalizeError(*parsed), "OK");
  NodeConfig config = *parsed;
  ASSERT_TRUE(FinalizeNodeConfig(&config).ok());
  EXPECT_EQ(config.chain_view.rpc_ca_file, "/home/op/rpc-ca.pem");
  EXPECT_EQ(config.chain_view.rpc_url, "https://rpc.example.org/v3/KEY");

  config.chain_view.rpc_url = "wss://user:secret@rpc.example.org/v3/KEY";
  const std::string error = FinalizeError(config);
  EXPECT_EQ(error,
            "chain.rpc (--chain-rpc): RPC URL must start with http:// or https://, got "
            "'wss://***@rpc.example.org/***'");
  EXPECT_FALSE(Contains(error, "secret"));
  EXPECT_FALSE(Contains(error, "KEY"));

  // The head subscription's endpoint: ws or wss, in network mode only, redacted in messages.
  config.chain_view.rpc_url = "https://rpc.example.org/v3/KEY";
  config.chain_view.ws_url = "wss://user:secret@rpc.example.org/ws/KEY";
  EXPECT_EQ(FinalizeError(config), "OK");
  config.chain_view.ws_url = "https://user:secret@rpc.example.org/v3/KEY";
  const std::string ws_error = FinalizeError(config);
  EXPECT_EQ(ws_error,
            "chain.rpc_ws (--chain-rpc-ws): RPC URL must start with ws:// or wss://, got "
            "'https://***@rpc.example.org/***'");
  EXPECT_FALSE(Contains(ws_error, "secret"));
  config.chain_view.rpc_url.clear();
  config.chain_view.ws_url = "ws://127.0.0.1:8545";
  EXPECT_EQ(FinalizeError(config), "chain.rpc_ws (--chain-rpc-ws) needs network mode (chain.rpc)");
  auto with_ws = ParseNodeConfig("[chain]\nrpc_ws = \"ws://127.0.0.1:8545\"\n", "config.toml");
  ASSERT_TRUE(with_ws.ok()) << with_ws.status().ToString();
  EXPECT_EQ(with_ws->chain_view.ws_url, "ws://127.0.0.1:8545");
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  auto config = ParseNodeConfig("", "config.toml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const NodeConfig defaults;
  EXPECT_EQ(config->datadir, "~/.consensor");
  EXPECT_EQ(config->rpc_listen, "127.0.0.1:7400");
  EXPECT_EQ(config->rpc_max_message_bytes, defaults.rpc_max_message_bytes);
  EXPECT_EQ(config->metrics_listen, "");
  EXPECT_EQ(config->log_level, "info");
  EXPECT_EQ(config->log_format, "logfmt");
  EXPECT_EQ(config->tasks.backend.name, "cpu");
  EXPECT_TRUE(config->selftest);
  EXPECT_EQ(config->tasks.workers, 2);
  EXPECT_EQ(config->tasks.queue_capacity, 64);
  EXPECT_EQ(config->tasks.program_cache_bytes, int64_t{1} << 30);
  EXPECT_EQ(config->tasks.input_cache_bytes, int64_t{64} << 20);
  EXPECT_EQ(config->tasks.limits.max_flops, defaults.tasks.limits.max_flops);
  EXPECT_EQ(config->storage_max_bytes, 0);
  EXPECT_EQ(config->storage_min_free_bytes, int64_t{256} << 20);
  EXPECT_EQ(config->storage_retain_results_hours, 168);
  EXPECT_EQ(config->storage_sweep_interval.count(), 600000);

  ScopedHome home("/home/op");
  NodeConfig finalized = *config;
  ASSERT_TRUE(FinalizeNodeConfig(&finalized).ok());
  EXPECT_EQ(finalized.datadir, "/home/op/.consensor");
}

TEST(ConfigTest, FullExample) {
  const std::string text = R"(# every key
datadir = "/var/lib/consensor"

[rpc]
listen = "0.0.0.0:7401"
max_message_bytes = 8_388_608
max_streams = 128

[metrics]
listen = "127.0.0.1:9100"

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
workers = 4
queue_capacity = 1000
program_cache_bytes = 0
input_cache_bytes = 4096

[storage]
max_bytes = 500_000_000_000
min_free_bytes = 0
retain_results_hours = 24
sweep_interval_ms = 30000

[limits]
max_blob_bytes = 2147483648
max_task_bytes = 17179869184
max_task_flops = 100_000_000_000_000
max_task_seconds = 120
max_elements = 1048576
max_ops = 5000
max_inputs = 16

[operator]
keystore = "~/keys/operator.json"
password_file = "/run/secrets/pw"
)";
  auto parsed = ParseNodeConfig(text, "config.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  NodeConfig c = *parsed;
  EXPECT_EQ(c.datadir, "/var/lib/consensor");
  EXPECT_EQ(c.rpc_listen, "0.0.0.0:7401");
  EXPECT_EQ(c.rpc_max_message_bytes, 8388608);
  EXPECT_EQ(c.rpc_max_streams, 128);
  EXPECT_EQ(c.metrics_listen, "127.0.0.1:9100");
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.log_format, "json");
  EXPECT_EQ(c.tasks.backend.name, "cuda");
  EXPECT_EQ(c.tasks.backend.threads, 8);
  EXPECT_EQ(c.tasks.backend.isa, "avx2");
  EXPECT_EQ(c.tasks.backend.device, 1);
  EXPECT_TRUE(c.tasks.fallback_cpu);
  EXPECT_FALSE(c.selftest);
  EXPECT_EQ(c.tasks.workers, 4);
  EXPECT_EQ(c.tasks.queue_capacity, 1000);
  EXPECT_EQ(c.tasks.program_cache_bytes, 0);
  EXPECT_EQ(c.tasks.input_cache_bytes, 4096);
  EXPECT_EQ(c.storage_max_bytes, int64_t{500000000000});
  EXPECT_EQ(c.storage_min_free_bytes, 0);
  EXPECT_EQ(c.storage_retain_results_hours, 24);
  EXPECT_EQ(c.storage_sweep_interval.count(), 30000);
  EXPECT_EQ(c.tasks.limits.max_graph_file_bytes, int64_t{2147483648});
  EXPECT_EQ(c.tasks.limits.max_total_bytes, int64_t{17179869184});
  EXPECT_EQ(c.tasks.limits.max_flops, int64_t{100000000000000});
  EXPECT_EQ(c.tasks.max_task_seconds, 120);
  EXPECT_EQ(c.tasks.limits.max_elements_per_tensor, 1048576);
  EXPECT_EQ(c.tasks.limits.max_ops, 5000);
  EXPECT_EQ(c.tasks.max_inputs, 16);
  EXPECT_EQ(c.keystore, "~/keys/operator.json");
  EXPECT_EQ(c.password_file, "/run/secrets/pw");
  EXPECT_EQ(c.password_env, "");

  ScopedHome home("/home/op/");
  ASSERT_TRUE(FinalizeNodeConfig(&c).ok());
  EXPECT_EQ(c.keystore, "/home/op/keys/operator.json");
  EXPECT_EQ(c.datadir, "/var/lib/consensor");
}

TEST(ConfigTest, DottedKeysAndInlineTables) {
  auto c = ParseNodeConfig("rpc.listen = \"127.0.0.1:1\"\nlog = { level = \"warn\" }\n", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rpc_listen, "127.0.0.1:1");
  EXPECT_EQ(c->log_level, "warn");
}

TEST(ConfigTest, UnknownKeysAreNamed) {
  std::string e = ParseError("[executor]\nworkers = 2\nwokers = 4\n");
  EXPECT_TRUE(Contains(e, "config.toml: unknown key 'executor.wokers'")) << e;
  EXPECT_TRUE(Contains(e, "line 3")) << e;
  EXPECT_TRUE(Contains(e, "did you mean 'executor.workers'")) << e;

  e = ParseError("[executor]\nselftst = false\n");
  EXPECT_TRUE(Contains(e, "did you mean 'executor.selftest'")) << e;

  e = ParseError("datadirr = \"/x\"\n");
  EXPECT_TRUE(Contains(e, "unknown key 'datadirr'")) << e;
  EXPECT_TRUE(Contains(e, "did you mean 'datadir'")) << e;

  e = ParseError("[disk]\npath = \"/x\"\n");
  EXPECT_TRUE(Contains(e, "unknown section [disk]")) << e;
  e = ParseError("[storage]\npath = \"/x\"\n");
  EXPECT_TRUE(Contains(e, "unknown key 'storage.path'")) << e;

  e = ParseError("[limits]\ncompletely_unrelated = 1\n");
  EXPECT_TRUE(Contains(e, "unknown key 'limits.completely_unrelated'")) << e;
  EXPECT_FALSE(Contains(e, "did you mean")) << e;

  e = ParseError("[rpc.tls]\ncert = \"x\"\n");  // a sub-table inside a known section
  EXPECT_TRUE(Contains(e, "unknown key 'rpc.tls'")) << e;
}

TEST(ConfigTest, WrongTypesNameTheKeyAndPosition) {
  std::string e = ParseError("# rpc\n[rpc]\nlisten = 7400\n");
  EXPECT_EQ(e, "config.toml:3:1: 'rpc.listen' must be a string");
  e = ParseError("[executor]\nworkers = \"4\"\n");
  EXPECT_EQ(e, "config.toml:2:1: 'executor.workers' must be an integer");
  e = ParseError("[limits]\nmax_task_flops = 1e13\n");
  EXPECT_TRUE(Contains(e, "'limits.max_task_flops' must be an integer")) << e;
  e = ParseError("[executor]\nfallback_cpu = 1\n");
  EXPECT_TRUE(Contains(e, "'executor.fallback_cpu' must be true or false")) << e;
  e = ParseError("[executor]\nselftest = \"no\"\n");
  EXPECT_TRUE(Contains(e, "'executor.selftest' must be true or false")) << e;
  e = ParseError("datadir = [\"/a\"]\n");
  EXPECT_TRUE(Contains(e, "'datadir' must be a string")) << e;
  e = ParseError("rpc = \"127.0.0.1:1\"\n");
  EXPECT_TRUE(Contains(e, "'rpc' must be a table")) << e;
  e = ParseError("[[executor]]\nworkers = 1\n");
  EXPECT_TRUE(Contains(e, "'executor' must be a table")) << e;
}

TEST(ConfigTest, SyntaxErrorsCarryThePosition) {
  std::string e = ParseError("[rpc]\nlisten = \"unterminated\n");
  EXPECT_TRUE(Contains(e, "config.toml:2:")) << e;
  e = ParseError("[log]\nlevel = \"info\"\nlevel = \"debug\"\n");  // redefinition
  EXPECT_TRUE(Contains(e, "config.toml:3:")) << e;
  e = ParseError(std::string("datadir = \"\xff\"\n"));  // invalid UTF-8
  EXPECT_TRUE(Contains(e, "config.toml:1:")) << e;
  e = ParseError(std::string(200, '['));  // toml++ asserts on "[[[" in debug builds
  EXPECT_TRUE(Contains(e, "config.toml")) << e;
  // Deep nesting must be an error, not a stack overflow.
  e = ParseError("a = " + std::string(100000, '['));
  EXPECT_TRUE(Contains(e, "config.toml")) << e;
  std::string inline_tables = "a = ";
  for (int i = 0; i < 20000; ++i) inline_tables += "{b=";
  e = ParseError(inline_tables);
  EXPECT_TRUE(Contains(e, "config.toml")) << e;
  e = ParseError(std::string("datadir = \"a\0b\"\n", 16));  // NUL inside a string
  EXPECT_TRUE(Contains(e, "config.toml:1:")) << e;
}

TEST(ConfigTest, SizeCap) {
  std::string big = "# " + std::string(size_t{1} << 20, 'x') + "\n";
  std::string e = ParseError(big);
  EXPECT_TRUE(Contains(e, "larger than")) << e;

  const std::string dir = MakeTempDir("consensor_config_test");
  WriteFile(dir + "/big.toml", big);
  auto loaded = LoadNodeConfigFile(dir + "/big.toml");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(loaded.status().message(), "larger than")) << loaded.status().message();
}

TEST(ConfigTest, LoadFile) {
  const std::string dir = MakeTempDir("consensor_config_test");
  const std::string path = dir + "/config.toml";
  WriteFile(path, "[executor]\nworkers = 3\n");
  auto c = LoadNodeConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tasks.workers, 3);

  WriteFile(path, "[executor]\nworkers = \"3\"\n");
  c = LoadNodeConfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status().message(), path + ":2:1: 'executor.workers'")) << c.status().message();

  c = LoadNodeConfigFile(dir + "/missing.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(c.status().message(), "missing.toml")) << c.status().message();

  c = LoadNodeConfigFile(dir);  // a directory
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status().message(), "not a regular file")) << c.status().message();
}

TEST(ConfigTest, FinalizeRangeChecks) {
  ScopedHome home("/home/op");
  NodeConfig base;
  EXPECT_EQ(FinalizeError(base), "OK");

  struct Case {
    void (*mutate)(NodeConfig*);
    const char* key;
  };
  const Case cases[] = {
      {[](NodeConfig* c) { c->tasks.workers = 0; }, "executor.workers"},
      {[](NodeConfig* c) { c->tasks.workers = 257; }, "executor.workers"},
      {[](NodeConfig* c) { c->tasks.queue_capacity = 0; }, "executor.queue_capacity"},
      {[](NodeConfig* c) { c->tasks.queue_capacity = 1000001; }, "executor.queue_capacity"},
      {[](NodeConfig* c) { c->tasks.program_cache_bytes = -1; }, "executor.program_cache_bytes"},
      {[](NodeConfig* c) { c->tasks.input_cache_bytes = -1; }, "executor.input_cache_bytes"},
      {[](NodeConfig* c) { c->tasks.backend.threads = 0; }, "executor.threads"},
      {[](NodeConfig* c) { c->tasks.backend.threads = 1000; }, "executor.threads"},
      {[](NodeConfig* c) { c->tasks.backend.device = -1; }, "executor.device"},
      {[](NodeConfig* c) { c->tasks.backend.name = "tpu"; }, "executor.backend"},
      {[](NodeConfig* c) { c->tasks.backend.isa = "sse"; }, "executor.isa"},
      {[](NodeConfig* c) { c->log_level = "loud"; }, "log.level"},
      {[](NodeConfig* c) { c->log_format = "xml"; }, "log.format"},
      {[](NodeConfig* c) { c->rpc_listen = ""; }, "rpc.listen"},
      {[](NodeConfig* c) { c->rpc_listen = "7400"; }, "rpc.listen"},
      {[](NodeConfig* c) { c->rpc_listen = "127.0.0.1:99999"; }, "rpc.listen"},
      {[](NodeConfig* c) { c->metrics_listen = "localhost"; }, "metrics.listen"},
      {[](NodeConfig* c) { c->rpc_max_message_bytes = 0; }, "rpc.max_message_bytes"},
      {[](NodeConfig* c) { c->rpc_max_streams = 0; }, "rpc.max_streams"},
      {[](NodeConfig* c) { c->tasks.limits.max_graph_file_bytes = 0; }, "limits.max_blob_bytes"},
      {[](NodeConfig* c) { c->tasks.limits.max_total_bytes = -1; }, "limits.max_task_bytes"},
      {[](NodeConfig* c) { c->tasks.limits.max_flops = 0; }, "limits.max_task_flops"},
      {[](NodeConfig* c) { c->tasks.max_task_seconds = 0; }, "limits.max_task_seconds"},
      {[](NodeConfig* c) { c->tasks.limits.max_elements_per_tensor = 0; }, "limits.max_elements"},
      {[](NodeConfig* c) { c->tasks.limits.max_ops = 0; }, "limits.max_ops"},
      {[](NodeConfig* c) { c->tasks.max_inputs = 0; }, "limits.max_inputs"},
      {[](NodeConfig* c) { c->gossip.max_messages_per_second = 0; }, "p2p.max_messages_per_second"},
      {[](NodeConfig* c) { c->gossip.max_messages_per_second_per_operator = 0; },
       "p2p.max_messages_per_second_per_operator"},
      {[](NodeConfig* c) { c->gossip.max_pull_requests_per_second_per_ip = 0; },
       "p2p.max_pull_requests_per_second_per_ip"},
      {[](NodeConfig* c) { c->gossip.max_pull_bytes_per_second_per_operator = 1000; },
       "p2p.max_pull_bytes_per_second_per_operator"},
      {[](NodeConfig* c) { c->datadir = ""; }, "datadir"},
      {[](NodeConfig* c) { c->storage_max_bytes = -1; }, "storage.max_bytes"},
      {[](NodeConfig* c) { c->storage_min_free_bytes = -1; }, "storage.min_free_bytes"},
      {[](NodeConfig* c) { c->storage_retain_results_hours = -1; }, "storage.retain_results_hours"},
      {[](NodeConfig* c) { c->storage_sweep_interval = std::chrono::milliseconds(10); }, "storage.sweep_interval_ms"},
      {[](NodeConfig* c) { c->consensus.seat_poll_interval = std::chrono::milliseconds(-1); }, "chain.seat_poll_ms"},
      {[](NodeConfig* c) { c->consensus.seat_poll_interval = std::chrono::milliseconds(60001); }, "chain.seat_poll_ms"},
      {[](NodeConfig* c) { c->p2p_max_blob_streams_per_host = 0; }, "p2p.max_blob_streams_per_host"},
      {[](NodeConfig* c) { c->p2p_max_blob_streams_per_operator = 0; }, "p2p.max_blob_streams_per_operator"},
      {[](NodeConfig* c) { c->gossip.max_pull_requests_per_second_per_operator = 0; },
       "p2p.max_pull_requests_per_second_per_operator"},
      {[](NodeConfig* c) { c->gossip.max_signature_checks_per_second_per_host = 0; },
       "p2p.max_signature_checks_per_second_per_host"},
      {[](NodeConfig* c) { c->p2p_max_lookups_per_second_per_operator = 0; },
       "p2p.max_lookups_per_second_per_operator"},
      {[](NodeConfig* c) { c->p2p_max_lookups_per_second_per_host = 2000000; }, "p2p.max_lookups_per_second_per_host"},
      {[](NodeConfig* c) { c->consensus.remote_outputs.max_entries = 0; }, "outputs.max_remote_entries"},
      {[](NodeConfig* c) { c->consensus.remote_outputs.max_bytes = 100; }, "outputs.max_remote_bytes"},
      {[](NodeConfig* c) { c->consensus.remote_outputs.max_fetches_in_flight = 0; }, "outputs.max_fetches_in_flight"},
      {[](NodeConfig* c) { c->consensus.remote_outputs.backoff = std::chrono::milliseconds(0); },
       "outputs.fetch_backoff_ms"},
      {[](NodeConfig* c) { c->consensus.remote_outputs.backoff_max = std::chrono::milliseconds(10); },
       "outputs.fetch_backoff_max_ms"},
      {[](NodeConfig* c) { c->consensus.remote_outputs.max_persisted_backoffs = 1000001; },
       "outputs.max_persisted_backoffs"},
      {[](NodeConfig* c) { c->clients.defaults.output_fetches_per_minute = -1; }, "clients.output_fetches_per_minute"},
      {[](NodeConfig* c) {
         c->password_file = "/pw";
         c->password_env = "PW";
       },
       "operator.password_file"},
  };
  for (const Case& tc : cases) {
    NodeConfig c = base;
    tc.mutate(&c);
    const std::string e = FinalizeError(c);
    EXPECT_TRUE(Contains(e, tc.key)) << tc.key << ": " << e;
  }
  // Edges that are allowed.
  NodeConfig edge = base;
  edge.tasks.workers = 256;
  edge.tasks.queue_capacity = 1000000;
  edge.tasks.backend.name = "cuda-emu";
  edge.tasks.backend.isa = "portable";
  edge.metrics_listen = "[::1]:9100";
  edge.rpc_listen = "localhost:0";
  edge.password_env = "CONSENSOR_PASSWORD";
  edge.consensus.seat_poll_interval = std::chrono::milliseconds(0);  // off: only the chain view's poll
  EXPECT_EQ(FinalizeError(edge), "OK");
  auto parsed = ParseNodeConfig("[chain]\nseat_poll_ms = 20\n", "config.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->consensus.seat_poll_interval.count(), 20);
  EXPECT_EQ(NodeConfig().consensus.seat_poll_interval.count(), 50);

  // On-demand outputs: the [outputs] bounds and the client budget, read from the file.
  auto outputs = ParseNodeConfig(
      "[outputs]\nmax_remote_entries = 10\nmax_remote_bytes = 65536\nmax_fetches_in_flight = 2\n"
      "fetch_backoff_ms = 100\nfetch_backoff_max_ms = 800\nmax_persisted_backoffs = 0\n"
      "[clients]\noutput_fetches_per_minute = 30\n",
      "config.toml");
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  const RemoteOutputLimits& limits = outputs->consensus.remote_outputs;
  EXPECT_EQ(limits.max_entries, 10u);
  EXPECT_EQ(limits.max_bytes, 65536);
  EXPECT_EQ(limits.max_fetches_in_flight, 2u);
  EXPECT_EQ(limits.backoff.count(), 100);
  EXPECT_EQ(limits.backoff_max.count(), 800);
  EXPECT_EQ(limits.max_persisted_backoffs, 0u);  // memory only
  EXPECT_EQ(RemoteOutputLimits().max_persisted_backoffs, 10000u);
  EXPECT_EQ(outputs->clients.defaults.output_fetches_per_minute, 30);
  EXPECT_EQ(FinalizeError(*outputs), "OK");
}

TEST(ConfigTest, HomeExpansion) {
  {
    ScopedHome home("/home/op");
    NodeConfig c;
    c.datadir = "~";
    c.keystore = "~/k.json";
    c.password_file = "~/pw.txt";
    ASSERT_EQ(FinalizeError(c), "OK");
    FinalizeNodeConfig(&c).IgnoreError();
    EXPECT_EQ(c.datadir, "/home/op");
    EXPECT_EQ(c.keystore, "/home/op/k.json");
    EXPECT_EQ(c.password_file, "/home/op/pw.txt");

    NodeConfig plain;
    plain.datadir = "/data/~/x";  // only a leading ~ is special
    plain.keystore = "rel/key.json";
    ASSERT_TRUE(FinalizeNodeConfig(&plain).ok());
    EXPECT_EQ(plain.datadir, "/data/~/x");
    EXPECT_EQ(plain.keystore, "rel/key.json");

    NodeConfig other_user;
    other_user.datadir = "~bob/data";
    EXPECT_TRUE(Contains(FinalizeError(other_user), "datadir")) << FinalizeError(other_user);
  }
  {
    ScopedHome home(nullptr);
    NodeConfig c;  // default datadir is under ~
    const std::string e = FinalizeError(c);
    EXPECT_TRUE(Contains(e, "datadir")) << e;
    EXPECT_TRUE(Contains(e, "HOME")) << e;
  }
}

}  // namespace
}  // namespace consensor::node
