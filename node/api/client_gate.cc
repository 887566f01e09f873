#include "node/api/client_gate.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <fstream>
#include <sstream>

// See node/daemon/config.cc: a malformed file must never abort the daemon.
#ifndef TOML_ASSERT
#define TOML_ASSERT(expr) static_assert(true)
#endif
#include <toml++/toml.h>

#include "node/api/api_key.h"

namespace consensor::node {

namespace {

constexpr int64_t kMaxKeysFileBytes = int64_t{4} << 20;
constexpr size_t kMaxClients = 10000;
// Anonymous callers (one state per IP) are forgotten when idle once there are this many.
constexpr size_t kMaxTrackedCallers = 4096;
constexpr std::string_view kAnonymous = "anonymous";

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == kAnonymous) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

std::string Where(const std::string& path, const toml::source_region& region) {
  if (region.begin.line == 0) return path;
  return path + ":" + std::to_string(region.begin.line);
}

// Budget keys of a [[client]] entry, each optional (the [clients] defaults otherwise).
Status ReadBudget(const toml::table& entry, const std::string& where, ClientBudgets* b) {
  for (const auto& [key, node] : entry) {
    const std::string_view k = key.str();
    if (k == "name" || k == "key_sha256") continue;
    if (k == "submissions_per_second") {
      auto v = node.value<double>();
      if (!v || !std::isfinite(*v) || *v < 0 || *v > 1e6) {
        return InvalidArgument(where + ": submissions_per_second must be a number in [0, 1000000]");
      }
      b->submissions_per_second = *v;
      continue;
    }
    int64_t* field = k == "submission_burst"            ? &b->submission_burst
                     : k == "flops_per_minute"          ? &b->flops_per_minute
                     : k == "max_tasks_in_flight"       ? &b->max_tasks_in_flight
                     : k == "max_watches"               ? &b->max_watches
                     : k == "max_disk_bytes"            ? &b->max_disk_bytes
                     : k == "output_fetches_per_minute" ? &b->output_fetches_per_minute
                                                        : nullptr;
    if (field == nullptr) return InvalidArgument(where + ": unknown key '" + std::string(k.substr(0, 64)) + "'");
    // Only an integer node is read as one: toml++ would convert a float like 4e26 with an
    // out-of-range cast (found by the client_keys fuzz target).
    auto v = node.is_integer() ? node.value<int64_t>() : std::nullopt;
    if (!v || *v < 0) {
      return InvalidArgument(where + ": " + std::string(k) + " must be a non-negative integer");
    }
    *field = *v;
  }
  return OkStatus();
}

bool EqualInConstantTime(const Hash256& a, const Hash256& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::string Label(std::string_view id) { return id.starts_with("ip:") ? std::string(kAnonymous) : std::string(id); }

}  // namespace

std::string PeerAddress(std::string_view peer) {
  const size_t scheme = peer.find(':');
  std::string_view rest = scheme == std::string_view::npos ? peer : peer.substr(scheme + 1);
  const size_t port = rest.rfind(':');
  if (port != std::string_view::npos && rest.find(']') != std::string_view::npos) {
    rest = rest.substr(0, rest.rfind(']') + 1);  // [v6]:port
  } else if (port != std::string_view::npos && rest.find(':') == port) {
    rest = rest.substr(0, port);  // v4:port
  }
  return std::string(rest.substr(0, 128));
}

StatusOr<std::vector<ClientEntry>> LoadClientKeysFile(const std::string& path, const ClientBudgets& defaults) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return NotFound("clients.keys_file " + path + " does not exist");
  if (!S_ISREG(st.st_mode)) return InvalidArgument("clients.keys_file " + path + " is not a regular file");
  if ((st.st_mode & (S_IRWXO | S_IWGRP)) != 0) {
    std::ostringstream mode;
    mode << std::oct << (st.st_mode & 0777);
    return FailedPrecondition("clients.keys_file " + path + " has mode 0" + mode.str() +
                              ": it must not be readable or writable by other users, nor writable by the group "
                              "(chmod 600 " +
                              path + ")");
  }
  if (st.st_size > kMaxKeysFileBytes) {
    return InvalidArgument("clients.keys_file " + path + " is larger than " + std::to_string(kMaxKeysFileBytes) +
                           " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return PermissionDenied("cannot read clients.keys_file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseClientKeys(text.str(), path, defaults);
}

StatusOr<std::vector<ClientEntry>> ParseClientKeys(std::string_view text, const std::string& path,
                                                   const ClientBudgets& defaults) {
  if (text.size() > static_cast<uint64_t>(kMaxKeysFileBytes)) {
    return InvalidArgument(path + " is larger than " + std::to_string(kMaxKeysFileBytes) + " bytes");
  }
  std::vector<ClientEntry> clients;
  try {
#if TOML_EXCEPTIONS
    toml::table root;
    try {
      root = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
      return InvalidArgument(Where(path, e.source()) + ": " + std::string(e.description()));
    }
#else
    toml::parse_result result = toml::parse(text, path);
    if (!result)
      return InvalidArgument(Where(path, result.error().source()) + ": " + std::string(result.error().description()));
    toml::table root = std::move(result).table();
#endif
    for (const auto& [key, node] : root) {
      if (key.str() != "client") {
        return InvalidArgument(path + ": unknown key '" + std::string(key.str().substr(0, 64)) +
                               "' (the file holds [[client]] entries only)");
      }
    }
    const toml::node* list_node = root.get("client");
    if (list_node == nullptr) return clients;  // no clients: nobody gets in with auth = "keys"
    const toml::array* list = list_node->as_array();
    if (list == nullptr) return InvalidArgument(path + ": 'client' must be a list of [[client]] tables");
    if (list->size() > kMaxClients) {
      return InvalidArgument(path + ": more than " + std::to_string(kMaxClients) + " clients");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const toml::table* entry = (*list)[i].as_table();
      const std::string where = path + ": client #" + std::to_string(i + 1);
      if (entry == nullptr) return InvalidArgument(where + " is not a table");
      ClientEntry c;
      auto name = (*entry)["name"].value<std::string>();
      if (!name || !ValidName(*name)) {
        return InvalidArgument(where + ": name must be 1 to 64 of [A-Za-z0-9_.-] (and not 'anonymous')");
      }
      c.name = *name;
      const std::string named = where + " ('" + c.name + "')";
      auto hex = (*entry)["key_sha256"].value<std::string>();
      if (!hex) return InvalidArgument(named + ": key_sha256 is missing");
      auto hash = Hash256FromHex(*hex);
      if (!hash.ok()) {
        return InvalidArgument(named +
                               ": key_sha256 must be 64 hex digits, the SHA-256 of the key (`consensor "
                               "client-key new` prints it): " +
                               hash.status().message());
      }
      c.key_sha256 = *hash;
      c.budgets = defaults;
      RETURN_IF_ERROR(ReadBudget(*entry, named, &c.budgets));
      for (const ClientEntry& other : clients) {
        if (other.name == c.name) return InvalidArgument(named + ": the name is used twice");
        if (other.key_sha256 == c.key_sha256) {
          return InvalidArgument(named + ": the same key as client '" + other.name + "'");
        }
      }
      clients.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    return InvalidArgument(path + ": cannot parse the keys file: " + e.what());
  }
  return clients;
}

ClientGate::ClientGate(ClientsConfig config, std::vector<ClientEntry> clients, MetricsRegistry* metrics,
                       ClientDiskLedger* disk, Clock clock)
    : config_(std::move(config)),
      clients_(std::move(clients)),
      metrics_(metrics),
      disk_(disk),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {
  // Every label exists from the start, so dashboards see zeros rather than gaps.
  auto declare = [this](const std::string& label) {
    metrics_->AddGauge("consensor_client_tasks_in_flight", "Tasks a client submitted that have not finished yet.",
                       {{"client", label}});
    metrics_->AddGauge("consensor_client_watches", "Open WatchTask streams, by client.", {{"client", label}});
    metrics_->AddGauge("consensor_client_disk_bytes", "Bytes of uploaded blobs and task records charged to a client.",
                       {{"client", label}});
    metrics_->AddCounter("consensor_client_tasks_accepted_total", "New tasks accepted, by client.",
                         {{"client", label}});
  };
  declare(std::string(kAnonymous));
  for (const ClientEntry& c : clients_) declare(c.name);
  metrics_->AddCounter("consensor_client_unauthenticated_total",
                       "Client API calls refused as UNAUTHENTICATED (no key where one is required, or an unknown "
                       "key).");
}

std::optional<ClientIdentity> ClientGate::Authenticate(std::optional<std::string_view> authorization,
                                                       std::string_view peer, std::string* error) {
  auto refuse = [&](std::string why) -> std::optional<ClientIdentity> {
    metrics_->AddCounter("consensor_client_unauthenticated_total", "")->Increment();
    *error = std::move(why);
    return std::nullopt;
  };
  if (!authorization) {
    if (keys_required()) {
      return refuse(
          "this node requires an API key: send it as 'authorization: Bearer <key>' metadata "
          "(consensor: --api-key-file FILE or $CONSENSOR_API_KEY); the node's operator issues keys");
    }
    return ClientIdentity{"ip:" + PeerAddress(peer), std::string(kAnonymous), config_.defaults};
  }
  std::string_view value = *authorization;
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() || !std::equal(kScheme.begin(), kScheme.end(), value.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    return refuse("the authorization metadata must be 'Bearer <key>'");
  }
  const Hash256 presented = ApiKeyHash(value.substr(kScheme.size()));
  // Every entry is compared, in constant time, so the time taken says nothing about the key.
  const ClientEntry* match = nullptr;
  for (const ClientEntry& c : clients_) {
    if (EqualInConstantTime(c.key_sha256, presented)) match = &c;
  }
  if (match == nullptr) return refuse("the API key is not known to this node");
  return ClientIdentity{match->name, match->name, match->budgets};
}

ClientGate::State& ClientGate::StateOf(const ClientIdentity& client) {
  auto it = states_.find(client.id);
  if (it != states_.end()) return it->second;
  if (states_.size() >= kMaxTrackedCallers) PruneIdleAnonymous();
  State& s = states_[client.id];
  s.refilled = clock_();
  const ClientBudgets& b = client.budgets;
  s.submission_tokens = b.submission_burst > 0 ? static_cast<double>(b.submission_burst)
                                               : std::max(1.0, std::ceil(b.submissions_per_second));
  s.flop_tokens = static_cast<double>(b.flops_per_minute);
  s.output_fetch_tokens = static_cast<double>(b.output_fetches_per_minute);
  return s;
}

void ClientGate::Refill(const ClientBudgets& b, State* s) {
  const auto now = clock_();
  const double seconds = std::chrono::duration<double>(now - s->refilled).count();
  s->refilled = now;
  if (seconds <= 0) return;
  const double burst = b.submission_burst > 0 ? static_cast<double>(b.submission_burst)
                                              : std::max(1.0, std::ceil(b.submissions_per_second));
  s->submission_tokens = std::min(burst, s->submission_tokens + seconds * b.submissions_per_second);
  const double flop_capacity = static_cast<double>(b.flops_per_minute);
  s->flop_tokens = std::min(flop_capacity, s->flop_tokens + seconds * flop_capacity / 60.0);
  const double fetch_capacity = static_cast<double>(b.output_fetches_per_minute);
  s->output_fetch_tokens = std::min(fetch_capacity, s->output_fetch_tokens + seconds * fetch_capacity / 60.0);
}

void ClientGate::PruneIdleAnonymous() {
  for (auto it = states_.begin(); it != states_.end();) {
    const State& s = it->second;
    const bool idle = it->first.starts_with("ip:") && s.in_flight.empty() && s.watches == 0;
    it = idle ? states_.erase(it) : std::next(it);
  }
}

Status ClientGate::AdmitSubmission(const ClientIdentity& client, int64_t flops,
                                   const std::function<bool(const std::string&)>& finished) {
  int64_t taken = 0;
  return AdmitSubmission(
      client, [flops]() -> StatusOr<int64_t> { return flops; }, finished, &taken);
}

Status ClientGate::AdmitSubmission(const ClientIdentity& client, const std::function<StatusOr<int64_t>()>& count_flops,
                                   const std::function<bool(const std::string&)>& finished, int64_t* flops_taken) {
  const ClientBudgets& b = client.budgets;
  *flops_taken = 0;
  std::string refused;
  Status status = OkStatus();
  {
    std::lock_guard<std::mutex> lock(mu_);
    State& s = StateOf(client);
    Refill(b, &s);
    if (b.submissions_per_second > 0 && s.submission_tokens < 1.0) {
      refused = "submissions_per_second";
      status =
          ResourceExhausted("client '" + client.label + "' is over its submission rate (submissions_per_second = " +
                            std::to_string(b.submissions_per_second) + "); retry later");
    }
    if (status.ok() && b.max_tasks_in_flight > 0) {
      for (auto it = s.in_flight.begin(); it != s.in_flight.end();) {
        it = finished(*it) ? s.in_flight.erase(it) : std::next(it);
      }
      if (static_cast<int64_t>(s.in_flight.size()) >= b.max_tasks_in_flight) {
        refused = "max_tasks_in_flight";
        status = ResourceExhausted("client '" + client.label + "' has " + std::to_string(s.in_flight.size()) +
                                   " tasks in flight, its budget (max_tasks_in_flight = " +
                                   std::to_string(b.max_tasks_in_flight) + "); submit more when one finishes");
      }
    }
    // An attempt costs a token whether or not it is admitted, so refused attempts are paced too.
    if (b.submissions_per_second > 0 && s.submission_tokens >= 1.0) s.submission_tokens -= 1.0;
  }
  if (status.ok() && b.flops_per_minute > 0) {
    // Counting compiles the graph: only for a caller within its rate, and outside the lock.
    StatusOr<int64_t> counted = count_flops();
    if (!counted.ok()) return counted.status();
    const int64_t flops = *counted;
    std::lock_guard<std::mutex> lock(mu_);
    State& s = StateOf(client);
    Refill(b, &s);
    if (flops > b.flops_per_minute) {
      refused = "flops_per_minute";
      status =
          ResourceExhausted("the task counts " + std::to_string(flops) + " FLOPs, more than client '" + client.label +
                            "' may use in a minute (flops_per_minute = " + std::to_string(b.flops_per_minute) + ")");
    } else if (static_cast<double>(flops) > s.flop_tokens) {
      refused = "flops_per_minute";
      status = ResourceExhausted("client '" + client.label + "' is over its compute budget (flops_per_minute = " +
                                 std::to_string(b.flops_per_minute) + "; the task counts " + std::to_string(flops) +
                                 " FLOPs, " + std::to_string(static_cast<int64_t>(s.flop_tokens)) +
                                 " are left now); retry later");
    } else {
      s.flop_tokens -= static_cast<double>(flops);
      *flops_taken = flops;
    }
  }
  if (!status.ok()) CountRefusal(client, refused);
  return status;
}

void ClientGate::RefundFlops(const ClientIdentity& client, int64_t flops) {
  if (client.budgets.flops_per_minute <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  State& s = StateOf(client);
  s.flop_tokens = std::min(static_cast<double>(client.budgets.flops_per_minute), s.flop_tokens + flops);
}

void ClientGate::TaskAccepted(const ClientIdentity& client, const std::string& task_id_hex) {
  metrics_->AddCounter("consensor_client_tasks_accepted_total", "", {{"client", client.label}})->Increment();
  if (client.budgets.max_tasks_in_flight <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  StateOf(client).in_flight.insert(task_id_hex);
}

ClientGate::WatchSlot& ClientGate::WatchSlot::operator=(WatchSlot&& other) noexcept {
  if (this != &other) {
    Release();
    gate_ = std::exchange(other.gate_, nullptr);
    id_ = std::move(other.id_);
    label_ = std::move(other.label_);
  }
  return *this;
}

void ClientGate::WatchSlot::Release() {
  if (gate_ == nullptr) return;
  std::lock_guard<std::mutex> lock(gate_->mu_);
  auto it = gate_->states_.find(id_);
  if (it != gate_->states_.end()) --it->second.watches;
  gate_ = nullptr;
}

StatusOr<ClientGate::WatchSlot> ClientGate::OpenWatch(const ClientIdentity& client) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    State& s = StateOf(client);
    const int64_t cap = client.budgets.max_watches;
    if (cap <= 0 || s.watches < cap) {
      ++s.watches;
      WatchSlot slot;
      slot.gate_ = this;
      slot.id_ = client.id;
      slot.label_ = client.label;
      return slot;
    }
  }
  CountRefusal(client, "max_watches");
  return ResourceExhausted("client '" + client.label + "' has " + std::to_string(client.budgets.max_watches) +
                           " WatchTask streams open, its budget (max_watches); close one or poll GetTask");
}

Status ClientGate::AdmitOutputFetch(const ClientIdentity& client) {
  const int64_t budget = client.budgets.output_fetches_per_minute;
  if (budget <= 0) return OkStatus();
  {
    std::lock_guard<std::mutex> lock(mu_);
    State& s = StateOf(client);
    Refill(client.budgets, &s);
    if (s.output_fetch_tokens >= 1.0) {
      s.output_fetch_tokens -= 1.0;
      return OkStatus();
    }
  }
  CountRefusal(client, "output_fetches_per_minute");
  return ResourceExhausted("client '" + client.label +
                           "' is over its budget of outputs this node fetches from their holders for it "
                           "(output_fetches_per_minute = " +
                           std::to_string(budget) + "); retry later, or ask the task's entry node or committee");
}

void ClientGate::CountRefusal(const ClientIdentity& client, std::string_view budget) {
  metrics_
      ->AddCounter("consensor_client_refusals_total",
                   "Client requests refused with RESOURCE_EXHAUSTED by one of the client's budgets, by client and "
                   "budget.",
                   {{"client", client.label}, {"budget", std::string(budget)}})
      ->Increment();
}

void ClientGate::UpdateGauges() {
  std::map<std::string, double> in_flight, watches, disk;
  in_flight[std::string(kAnonymous)] = watches[std::string(kAnonymous)] = disk[std::string(kAnonymous)] = 0;
  for (const ClientEntry& c : clients_) in_flight[c.name] = watches[c.name] = disk[c.name] = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, s] : states_) {
      in_flight[Label(id)] += static_cast<double>(s.in_flight.size());
      watches[Label(id)] += static_cast<double>(s.watches);
    }
  }
  if (disk_ != nullptr) {
    for (const auto& [id, bytes] : disk_->Totals()) {
      const std::string label = Label(id);
      if (disk.count(label)) disk[label] += static_cast<double>(bytes);  // a client removed from the file: not shown
    }
  }
  for (const auto& [label, v] : in_flight) {
    metrics_->AddGauge("consensor_client_tasks_in_flight", "", {{"client", label}})->Set(v);
    metrics_->AddGauge("consensor_client_watches", "", {{"client", label}})->Set(watches[label]);
    metrics_->AddGauge("consensor_client_disk_bytes", "", {{"client", label}})->Set(disk[label]);
  }
}

}  // namespace consensor::node
