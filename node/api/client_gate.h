// Who may use the client API, and how much (docs/NODE.md, "Clients"; docs/SECURITY.md,
// "paying for work"). With `clients.auth = "keys"` every call of consensor.v1.Client needs a key
// from the keys file; each client then has budgets of its own: submissions per second (a token
// bucket), FLOPs per minute (the task's counted FLOPs, a token bucket), tasks in flight, open
// WatchTask streams, bytes on disk (ClientDiskLedger) and outputs fetched on demand. In open mode the same budgets
// apply per peer IP address, the only handle an anonymous caller gives. Health and reflection are other services and
// stay open; the peer service authenticates by operator signature.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "node/storage/client_disk_ledger.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

// One client's budgets; 0 means no limit.
struct ClientBudgets {
  double submissions_per_second = 0;  // token bucket refill
  int64_t submission_burst = 0;       // bucket size (0: max(1, ceil(rate)))
  int64_t flops_per_minute = 0;       // counted FLOPs of accepted tasks, as a token bucket
  int64_t max_tasks_in_flight = 0;    // accepted and not yet finished
  int64_t max_watches = 0;            // open WatchTask streams
  int64_t max_disk_bytes = 0;         // uploaded blobs + task records (ClientDiskLedger)
  // Outputs a non-member fetches from their holders because this client asked (GetBlob), per
  // minute, as a token bucket of one minute's worth. Requests that join a fetch in flight, or
  // that the blob's backoff refuses, cost nothing.
  int64_t output_fetches_per_minute = 0;
};

// The [clients] section of the node's config.
struct ClientsConfig {
  std::string auth = "open";  // "open" | "keys"
  std::string keys_file;      // required with auth = "keys", optional in open mode
  ClientBudgets defaults;     // every client's budgets unless its keys-file entry sets them
};

struct ClientEntry {
  std::string name;
  Hash256 key_sha256{};
  ClientBudgets budgets;
};

// gRPC's peer string without the scheme and port: "ipv4:1.2.3.4:5678" -> "1.2.3.4" (at most 128
// characters): the remote host, the only handle an unauthenticated caller gives.
std::string PeerAddress(std::string_view peer);

// Reads and checks the keys file: a TOML file of [[client]] tables (name, key_sha256 and any of
// the budget keys). FAILED_PRECONDITION when the file is readable or writable by others (it
// decides who computes on the operator's machine); INVALID_ARGUMENT, naming the entry, for a
// malformed one, a duplicate name or key, or a name that is not [A-Za-z0-9_.-]{1,64}.
StatusOr<std::vector<ClientEntry>> LoadClientKeysFile(const std::string& path, const ClientBudgets& defaults);
// The keys file's text, checked as above (everything but the file's mode); `path` names it in
// errors. Its own entry point because the text is untrusted input: tests/fuzz/client_keys_fuzz.cc.
StatusOr<std::vector<ClientEntry>> ParseClientKeys(std::string_view text, const std::string& path,
                                                   const ClientBudgets& defaults);

// The caller of one RPC, as the gate sees it.
struct ClientIdentity {
  std::string id;     // budgets are keyed on it: the client's name, or "ip:<address>" when anonymous
  std::string label;  // the metrics label: the client's name, or "anonymous"
  ClientBudgets budgets;
};

class ClientGate {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `disk` may be null (no per-client disk accounting). `clock` is for tests.
  ClientGate(ClientsConfig config, std::vector<ClientEntry> clients, MetricsRegistry* metrics, ClientDiskLedger* disk,
             Clock clock = nullptr);

  bool keys_required() const { return config_.auth == "keys"; }

  // `authorization` is the call's `authorization` metadata (nullopt when absent), `peer` gRPC's
  // peer string ("ipv4:1.2.3.4:5678"). nullopt, with the reason in `error`, means UNAUTHENTICATED:
  // no key where keys are required, or a key that is not in the keys file (in any mode).
  std::optional<ClientIdentity> Authenticate(std::optional<std::string_view> authorization, std::string_view peer,
                                             std::string* error);

  // A submission attempt: one token of the submission rate (spent even when refused), a free slot
  // of tasks in flight, then, only if those pass and the client has a FLOP budget, the task's
  // FLOPs from `count_flops` (which compiles the graph, so it runs outside the gate's lock and
  // never for a caller over its rate). `finished(task_id_hex)` tells which of the client's
  // earlier tasks are done. RESOURCE_EXHAUSTED naming the budget, or count_flops' error;
  // `flops_taken` is what RefundFlops gives back if the submission fails later.
  Status AdmitSubmission(const ClientIdentity& client, const std::function<StatusOr<int64_t>()>& count_flops,
                         const std::function<bool(const std::string& task_id_hex)>& finished, int64_t* flops_taken);
  // The same with a known FLOP count (tests).
  Status AdmitSubmission(const ClientIdentity& client, int64_t flops,
                         const std::function<bool(const std::string& task_id_hex)>& finished);
  // The submission failed after admission: its FLOPs are given back (the rate token is not).
  void RefundFlops(const ClientIdentity& client, int64_t flops);
  // A new task of the client's was accepted: it counts in flight until `finished` says so.
  void TaskAccepted(const ClientIdentity& client, const std::string& task_id_hex);

  // An open WatchTask stream of the client's; the slot is given back when destroyed.
  class WatchSlot {
   public:
    WatchSlot() = default;
    WatchSlot(WatchSlot&& other) noexcept { *this = std::move(other); }
    WatchSlot& operator=(WatchSlot&& other) noexcept;
    ~WatchSlot() { Release(); }
    void Release();

   private:
    friend class ClientGate;
    ClientGate* gate_ = nullptr;
    std::string id_;
    std::string label_;
  };
  StatusOr<WatchSlot> OpenWatch(const ClientIdentity& client);

  // A GetBlob of the client's is about to make this node fetch an output from its holders: one
  // token of output_fetches_per_minute, or RESOURCE_EXHAUSTED naming the budget.
  Status AdmitOutputFetch(const ClientIdentity& client);

  ClientDiskLedger* disk() { return disk_; }
  // Counts a refusal by the disk budget (the ledger refuses; the gate keeps the metrics).
  void CountRefusal(const ClientIdentity& client, std::string_view budget);
  // Sets the per-client gauges (tasks in flight, watches, disk bytes); call before a scrape.
  void UpdateGauges();

 private:
  struct State {
    double submission_tokens = 0;
    double flop_tokens = 0;
    double output_fetch_tokens = 0;
    std::chrono::steady_clock::time_point refilled;
    std::set<std::string> in_flight;
    int64_t watches = 0;
  };
  State& StateOf(const ClientIdentity& client);  // mu_ held
  void Refill(const ClientBudgets& budgets, State* state);
  void PruneIdleAnonymous();  // mu_ held

  ClientsConfig config_;
  std::vector<ClientEntry> clients_;
  MetricsRegistry* metrics_;
  ClientDiskLedger* disk_;
  Clock clock_;
  std::mutex mu_;
  std::map<std::string, State, std::less<>> states_;
};

}  // namespace consensor::node
