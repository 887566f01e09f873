// The client keys file (node/api/client_gate.h): a local TOML file, but one that decides who
// computes on the operator's machine, and that an operator may assemble from entries clients
// send in. Whatever parses must give entries the gate can serve; the same bytes are also tried
// as a caller's authorization metadata and gRPC peer string, the two strings a client controls.
#include <string>
#include <string_view>

#include "node/api/client_gate.h"
#include "node/telemetry/metrics.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

CNSR_FUZZ_TARGET(client_keys) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ClientBudgets defaults;
  defaults.max_watches = 4;
  auto clients = ParseClientKeys(text, "fuzz.toml", defaults);
  if (!clients.ok()) {
    CNSR_FUZZ_CHECK(!clients.status().message().empty());
    clients = std::vector<ClientEntry>{};
  }
  for (const ClientEntry& c : *clients) {
    CNSR_FUZZ_CHECK(!c.name.empty() && c.name.size() <= 64);
  }
  MetricsRegistry metrics;
  ClientsConfig config;
  config.auth = "keys";
  ClientGate gate(config, *clients, &metrics, nullptr);
  std::string error;
  auto identity = gate.Authenticate(text, text, &error);
  CNSR_FUZZ_CHECK(identity.has_value() || !error.empty());
  (void)gate.Authenticate(std::nullopt, text, &error);
  return 0;
}

CNSR_FUZZ_SEEDS(client_keys) {
  return {fuzz::Bytes(R"([[client]]
name = "alice"
key_sha256 = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
submissions_per_second = 5.0
submission_burst = 10
flops_per_minute = 1_000_000_000
max_tasks_in_flight = 8
max_watches = 4
max_disk_bytes = 1073741824

[[client]]
name = "bob.ci-runner_2"
key_sha256 = "FCDE2B2EDBA56BF408601FB721FE9B5C338D10EE429EA04FAE5511B68FBF8FB9"
)"),
          fuzz::Bytes("[[client]]\nname = \"alice\"\nkey_sha256 = \"00\"\n"),
          fuzz::Bytes("[[client]]\nname = \"a\"\nkey_sha256 = \"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e"
                      "886266e7ae\"\n[[client]]\nname = \"a\"\nkey_sha256 = \"2c26b46b68ffc68ff99b453c1d304134134"
                      "22d706483bfa0f98a5e886266e7ae\"\nmax_watches = -1\n"),
          fuzz::Bytes("Bearer k3y"),
          fuzz::Bytes("ipv6:[::1]:5000"),
          fuzz::Bytes("client = 3\n")};
}
