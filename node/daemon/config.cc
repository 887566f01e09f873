#include "node/daemon/config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

// toml++ 3.3 trips an internal assert on some malformed input (e.g. "[[[") when built without
// NDEBUG, where release builds (and the shared library) report a parse error. A config typo must
// never abort the daemon, so use the release behaviour in every build.
#ifndef TOML_ASSERT
#define TOML_ASSERT(expr) static_assert(true)
#endif
#include <toml++/toml.h>

#include "consensus/replication.h"
#include "node/chain/eth_rpc.h"
#include "node/engine/fault_injection.h"
#include "node/telemetry/http_server.h"
#include "node/telemetry/log.h"

namespace consensor::node {
namespace {

constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// Where a key's value goes: the field, inside NodeConfig or one of the component options it
// holds. The field's type says how the TOML value is read: string, integer (int64_t, a narrower
// integer or double, or std::chrono::milliseconds for the *_ms keys), true/false, or an array of
// strings.
template <typename T>
using FieldOf = T& (*)(NodeConfig&);
using Field =
    std::variant<FieldOf<std::string>, FieldOf<bool>, FieldOf<std::vector<std::string>>, FieldOf<int64_t>, FieldOf<int>,
                 FieldOf<uint32_t>, FieldOf<uint64_t>, FieldOf<double>, FieldOf<std::chrono::milliseconds>>;

struct KeySpec {
  std::string_view section;  // "" for top-level keys
  std::string_view key;
  Field field;
};

// The field of NodeConfig that `member` names, as a Field.
#define CONFIG_FIELD(member)     \
  +[](NodeConfig & c) -> auto& { \
    return c.member;             \
  }

const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec> keys = {
      {"", "datadir", CONFIG_FIELD(datadir)},
      {"rpc", "listen", CONFIG_FIELD(rpc_listen)},
      {"rpc", "max_message_bytes", CONFIG_FIELD(rpc_max_message_bytes)},
      {"rpc", "max_streams", CONFIG_FIELD(rpc_max_streams)},
      {"metrics", "listen", CONFIG_FIELD(metrics_listen)},
      {"log", "level", CONFIG_FIELD(log_level)},
      {"log", "format", CONFIG_FIELD(log_format)},
      {"executor", "backend", CONFIG_FIELD(tasks.backend.name)},
      {"executor", "threads", CONFIG_FIELD(tasks.backend.threads)},
      {"executor", "isa", CONFIG_FIELD(tasks.backend.isa)},
      {"executor", "device", CONFIG_FIELD(tasks.backend.device)},
      {"executor", "fallback_cpu", CONFIG_FIELD(tasks.fallback_cpu)},
      {"executor", "selftest", CONFIG_FIELD(selftest)},
      {"executor", "workers", CONFIG_FIELD(tasks.workers)},
      {"executor", "queue_capacity", CONFIG_FIELD(tasks.queue_capacity)},
      {"executor", "program_cache_bytes", CONFIG_FIELD(tasks.program_cache_bytes)},
      {"executor", "input_cache_bytes", CONFIG_FIELD(tasks.input_cache_bytes)},
      {"storage", "max_bytes", CONFIG_FIELD(storage_max_bytes)},
      {"storage", "min_free_bytes", CONFIG_FIELD(storage_min_free_bytes)},
      {"storage", "retain_results_hours", CONFIG_FIELD(storage_retain_results_hours)},
      {"storage", "sweep_interval_ms", CONFIG_FIELD(storage_sweep_interval)},
      {"limits", "max_blob_bytes", CONFIG_FIELD(tasks.limits.max_graph_file_bytes)},
      {"limits", "max_task_bytes", CONFIG_FIELD(tasks.limits.max_total_bytes)},
      {"limits", "max_task_flops", CONFIG_FIELD(tasks.limits.max_flops)},
      {"limits", "max_task_seconds", CONFIG_FIELD(tasks.max_task_seconds)},
      {"limits", "max_elements", CONFIG_FIELD(tasks.limits.max_elements_per_tensor)},
      {"limits", "max_ops", CONFIG_FIELD(tasks.limits.max_ops)},
      {"limits", "max_inputs", CONFIG_FIELD(tasks.max_inputs)},
      {"operator", "keystore", CONFIG_FIELD(keystore)},
      {"operator", "password_file", CONFIG_FIELD(password_file)},
      {"operator", "password_env", CONFIG_FIELD(password_env)},
      {"chain", "rpc", CONFIG_FIELD(chain_view.rpc_url)},
      {"chain", "rpc_ca_file", CONFIG_FIELD(chain_view.rpc_ca_file)},
      {"chain", "rpc_ws", CONFIG_FIELD(chain_view.ws_url)},
      {"chain", "deployment", CONFIG_FIELD(chain_deployment)},
      {"chain", "confirmations", CONFIG_FIELD(consensus.confirmations)},
      {"consensus", "reference_margin_blocks", CONFIG_FIELD(consensus.reference_margin_blocks)},
      {"chain", "poll_ms", CONFIG_FIELD(chain_view.poll_interval)},
      {"chain", "seat_poll_ms", CONFIG_FIELD(consensus.seat_poll_interval)},
      {"chain", "submit_evidence", CONFIG_FIELD(chain_submit_evidence)},
      {"p2p", "listen", CONFIG_FIELD(p2p_listen)},
      {"p2p", "max_streams", CONFIG_FIELD(p2p_max_streams)},
      {"p2p", "max_blob_streams_per_host", CONFIG_FIELD(p2p_max_blob_streams_per_host)},
      {"p2p", "max_blob_streams_per_operator", CONFIG_FIELD(p2p_max_blob_streams_per_operator)},
      {"p2p", "advertise", CONFIG_FIELD(p2p_advertise)},
      {"p2p", "bootstrap", CONFIG_FIELD(p2p_bootstrap)},
      {"p2p", "fanout", CONFIG_FIELD(gossip.fanout)},
      {"p2p", "max_messages_per_second", CONFIG_FIELD(gossip.max_messages_per_second)},
      {"p2p", "max_messages_per_second_per_operator", CONFIG_FIELD(gossip.max_messages_per_second_per_operator)},
      {"p2p", "max_pull_requests_per_second_per_ip", CONFIG_FIELD(gossip.max_pull_requests_per_second_per_ip)},
      {"p2p", "max_pull_bytes_per_second_per_operator", CONFIG_FIELD(gossip.max_pull_bytes_per_second_per_operator)},
      {"p2p", "max_pull_requests_per_second_per_operator",
       CONFIG_FIELD(gossip.max_pull_requests_per_second_per_operator)},
      {"p2p", "max_signature_checks_per_second_per_host",
       CONFIG_FIELD(gossip.max_signature_checks_per_second_per_host)},
      {"p2p", "max_lookups_per_second_per_operator", CONFIG_FIELD(p2p_max_lookups_per_second_per_operator)},
      {"p2p", "max_lookups_per_second_per_host", CONFIG_FIELD(p2p_max_lookups_per_second_per_host)},
      {"p2p", "pull_interval_ms", CONFIG_FIELD(gossip.pull_interval)},
      {"consensus", "replicas", CONFIG_FIELD(consensus.default_replicas)},
      {"consensus", "quorum", CONFIG_FIELD(consensus.default_quorum)},
      {"consensus", "max_replicas", CONFIG_FIELD(consensus.max_replicas)},
      {"consensus", "member_timeout_ms", CONFIG_FIELD(consensus.member_timeout)},
      {"consensus", "exhausted_grace_ms", CONFIG_FIELD(consensus.exhausted_grace)},
      {"consensus", "commit_grace_ms", CONFIG_FIELD(consensus.commit_grace)},
      {"consensus", "max_dispute_committee", CONFIG_FIELD(consensus.max_dispute_committee)},
      {"consensus", "max_reference_age", CONFIG_FIELD(consensus.max_reference_age)},
      {"consensus", "challenge_window_blocks", CONFIG_FIELD(consensus.challenge_window_blocks)},
      {"outputs", "max_remote_entries", CONFIG_FIELD(consensus.remote_outputs.max_entries)},
      {"outputs", "max_remote_bytes", CONFIG_FIELD(consensus.remote_outputs.max_bytes)},
      {"outputs", "max_fetches_in_flight", CONFIG_FIELD(consensus.remote_outputs.max_fetches_in_flight)},
      {"outputs", "fetch_backoff_ms", CONFIG_FIELD(consensus.remote_outputs.backoff)},
      {"outputs", "fetch_backoff_max_ms", CONFIG_FIELD(consensus.remote_outputs.backoff_max)},
      {"outputs", "max_persisted_backoffs", CONFIG_FIELD(consensus.remote_outputs.max_persisted_backoffs)},
      {"clients", "auth", CONFIG_FIELD(clients.auth)},
      {"clients", "keys_file", CONFIG_FIELD(clients.keys_file)},
      {"clients", "submissions_per_second", CONFIG_FIELD(clients.defaults.submissions_per_second)},
      {"clients", "submission_burst", CONFIG_FIELD(clients.defaults.submission_burst)},
      {"clients", "flops_per_minute", CONFIG_FIELD(clients.defaults.flops_per_minute)},
      {"clients", "max_tasks_in_flight", CONFIG_FIELD(clients.defaults.max_tasks_in_flight)},
      {"clients", "max_watches", CONFIG_FIELD(clients.defaults.max_watches)},
      {"clients", "max_disk_bytes", CONFIG_FIELD(clients.defaults.max_disk_bytes)},
      {"clients", "output_fetches_per_minute", CONFIG_FIELD(clients.defaults.output_fetches_per_minute)},
      {"fault", "mode", CONFIG_FIELD(fault_mode)},
      {"fault", "delay_ms", CONFIG_FIELD(fault_delay)},
  };
  return keys;
}

#undef CONFIG_FIELD

bool IsSection(std::string_view name) {
  return std::any_of(Keys().begin(), Keys().end(),
                     [&](const KeySpec& k) { return !k.section.empty() && k.section == name; });
}

const KeySpec* FindKey(std::string_view section, std::string_view key) {
  for (const KeySpec& k : Keys()) {
    if (k.section == section && k.key == key) return &k;
  }
  return nullptr;
}

std::string DottedName(std::string_view section, std::string_view key) {
  return section.empty() ? std::string(key) : std::string(section) + "." + std::string(key);
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'executor.workers'?)" for a near miss, so typos are quick to fix.
std::string Suggestion(std::string_view section, std::string_view key) {
  if (key.size() > 64) return "";
  const KeySpec* best = nullptr;
  size_t best_distance = 3;
  for (const KeySpec& k : Keys()) {
    if (k.section != section) continue;
    const size_t d = EditDistance(key, k.key);
    if (d < best_distance) best = &k, best_distance = d;
  }
  return best ? " (did you mean '" + DottedName(best->section, best->key) + "'?)" : "";
}

// Keys from a hostile file could be long or contain control characters; keep messages sane.
std::string Printable(std::string_view s) {
  std::string out;
  for (char ch : s.substr(0, 100)) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(c < 0x20 || c == 0x7F ? '?' : ch);
  }
  if (s.size() > 100) out += "...";
  return out;
}

std::string Where(const std::string& origin, const toml::source_region& region) {
  if (region.begin.line == 0) return origin;
  return origin + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
}

std::string LineSuffix(const toml::source_region& region) {
  if (region.begin.line == 0) return "";
  return " (line " + std::to_string(region.begin.line) + ", column " + std::to_string(region.begin.column) + ")";
}

Status UnknownKey(const std::string& origin, std::string_view section, std::string_view key,
                  const toml::source_region& region) {
  return InvalidArgument(origin + ": unknown key '" + Printable(DottedName(section, key)) + "'" + LineSuffix(region) +
                         Suggestion(section, key));
}

enum class Kind { kString, kInteger, kBool, kStringList };

template <typename T>
constexpr Kind KindOfType() {
  if constexpr (std::is_same_v<T, std::string>) return Kind::kString;
  else if constexpr (std::is_same_v<T, bool>) return Kind::kBool;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return Kind::kStringList;
  else return Kind::kInteger;
}

// The type of the field an accessor reaches.
template <typename Accessor>
using FieldType = std::remove_reference_t<std::invoke_result_t<Accessor, NodeConfig&>>;

Kind KindOf(const Field& field) {
  return std::visit([](auto accessor) { return KindOfType<FieldType<decltype(accessor)>>(); }, field);
}

Kind KindOf(const NodeSetting& value) {
  return std::visit([](const auto& v) { return KindOfType<std::decay_t<decltype(v)>>(); }, value);
}

// Whether an integer option field of type T holds `value` exactly.
template <typename T>
bool Holds(int64_t value) {
  if constexpr (std::is_same_v<T, double>) return value >= -(int64_t{1} << 53) && value <= (int64_t{1} << 53);
  else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) return std::in_range<typename T::rep>(value);
  else return std::in_range<T>(value);
}

template <typename T>
int64_t ToInteger(const T& field) {
  if constexpr (std::is_same_v<T, std::chrono::milliseconds>) return static_cast<int64_t>(field.count());
  else return static_cast<int64_t>(field);
}

// Stores a value whose kind matches the key's field (callers check).
void StoreSetting(NodeConfig* config, const KeySpec& spec, NodeSetting value) {
  std::visit(
      [&](auto accessor) {
        using T = FieldType<decltype(accessor)>;
        T& field = accessor(*config);
        if constexpr (KindOfType<T>() != Kind::kInteger) {
          field = std::get<T>(std::move(value));
        } else {
          const int64_t number = std::get<int64_t>(value);
          const std::string name = DottedName(spec.section, spec.key);
          if (Holds<T>(number)) {
            field = static_cast<T>(number);
            config->unrepresentable_integers.erase(name);
          } else {
            config->unrepresentable_integers[name] = number;
          }
        }
      },
      spec.field);
}

const KeySpec* FindDottedKey(std::string_view dotted) {
  const size_t dot = dotted.find('.');
  if (dot == std::string_view::npos) return FindKey("", dotted);
  return FindKey(dotted.substr(0, dot), dotted.substr(dot + 1));
}

// An integer setting as it was written, for range checks of fields narrower than int64_t (a
// uint32_t cannot hold the -1 an error message must show).
int64_t AsWritten(NodeConfig* config, std::string_view dotted) {
  if (auto it = config->unrepresentable_integers.find(dotted); it != config->unrepresentable_integers.end()) {
    return it->second;
  }
  const KeySpec* spec = FindDottedKey(dotted);
  return std::visit(
      [&](auto accessor) -> int64_t {
        using T = FieldType<decltype(accessor)>;
        if constexpr (KindOfType<T>() == Kind::kInteger) return ToInteger(accessor(*config));
        else return 0;  // not an integer key; never asked
      },
      spec->field);
}

Status Assign(const std::string& origin, const KeySpec& spec, const toml::key& key, const toml::node& value,
              NodeConfig* config) {
  const std::string name = DottedName(spec.section, spec.key);
  const std::string where = Where(origin, key.source());
  switch (KindOf(spec.field)) {
    case Kind::kString: {
      const auto* v = value.as_string();
      if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be a string");
      StoreSetting(config, spec, v->get());
      break;
    }
    case Kind::kInteger: {
      const auto* v = value.as_integer();
      if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be an integer");
      StoreSetting(config, spec, v->get());
      break;
    }
    case Kind::kBool: {
      const auto* v = value.as_boolean();
      if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be true or false");
      StoreSetting(config, spec, v->get());
      break;
    }
    case Kind::kStringList: {
      const auto* v = value.as_array();
      if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be an array of strings");
      std::vector<std::string> items;
      for (const auto& item : *v) {
        const auto* str = item.as_string();
        if (str == nullptr) return InvalidArgument(where + ": '" + name + "' must be an array of strings");
        items.push_back(str->get());
      }
      StoreSetting(config, spec, std::move(items));
      break;
    }
  }
  return OkStatus();
}

Status ApplyTable(const toml::table& root, const std::string& origin, NodeConfig* config) {
  for (const auto& [key, node] : root) {
    const std::string_view name = key.str();
    if (IsSection(name)) {
      const toml::table* section = node.as_table();
      if (section == nullptr) {
        return InvalidArgument(Where(origin, key.source()) + ": '" + std::string(name) + "' must be a table ([" +
                               std::string(name) + "])");
      }
      for (const auto& [sub_key, sub_node] : *section) {
        const KeySpec* spec = FindKey(name, sub_key.str());
        if (spec == nullptr) return UnknownKey(origin, name, sub_key.str(), sub_key.source());
        RETURN_IF_ERROR(Assign(origin, *spec, sub_key, sub_node, config));
      }
      continue;
    }
    const KeySpec* spec = FindKey("", name);
    if (spec == nullptr) {
      if (node.is_table()) {
        return InvalidArgument(origin + ": unknown section [" + Printable(name) + "]" + LineSuffix(key.source()));
      }
      return UnknownKey(origin, "", name, key.source());
    }
    RETURN_IF_ERROR(Assign(origin, *spec, key, node, config));
  }
  return OkStatus();
}

// "~" and "~/x" become $HOME and $HOME/x; other paths are left alone.
Status ExpandHome(const char* name, std::string* path) {
  if (path->empty() || (*path)[0] != '~') return OkStatus();
  if (path->size() > 1 && (*path)[1] != '/') {
    return InvalidArgument(std::string(name) + ": '" + Printable(*path) +
                           "' is not supported; only '~/' (your own home) is expanded");
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0') {
    return InvalidArgument(std::string(name) + ": cannot expand '~' in '" + Printable(*path) +
                           "' because $HOME is not set");
  }
  std::string expanded = home;
  while (expanded.size() > 1 && expanded.back() == '/') expanded.pop_back();
  *path = expanded + path->substr(1);
  return OkStatus();
}

Status CheckRange(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max) {
    return InvalidArgument(std::string(name) + " must be between " + std::to_string(min) + " and " +
                           std::to_string(max) + " (got " + std::to_string(value) + ")");
  }
  return OkStatus();
}

Status CheckPositive(const char* name, int64_t value) {
  if (value <= 0) return InvalidArgument(std::string(name) + " must be positive (got " + std::to_string(value) + ")");
  return OkStatus();
}

Status CheckOneOf(const char* name, const std::string& value, std::span<const std::string_view> allowed) {
  std::string list;
  for (std::string_view a : allowed) {
    if (value == a) return OkStatus();
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return InvalidArgument(std::string(name) + " must be one of " + list + " (got '" + Printable(value) + "')");
}

Status CheckOneOf(const char* name, const std::string& value, std::initializer_list<std::string_view> allowed) {
  return CheckOneOf(name, value, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}

Status CheckListen(const char* name, const std::string& value, bool allow_empty) {
  if (value.empty()) {
    if (allow_empty) return OkStatus();
    return InvalidArgument(std::string(name) + " must not be empty (expected host:port)");
  }
  auto split = SplitHostPort(value);
  if (!split.ok()) return InvalidArgument(std::string(name) + ": " + split.status().message());
  return OkStatus();
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

StatusOr<NodeConfig> ParseNodeConfig(const std::string& toml_text, const std::string& origin) {
  if (toml_text.size() > kMaxConfigBytes) {
    return InvalidArgument(origin + ": config is larger than " + std::to_string(kMaxConfigBytes) + " bytes");
  }
  NodeConfig config;
  try {
#if TOML_EXCEPTIONS
    toml::table root;
    try {
      root = toml::parse(toml_text, origin);
    } catch (const toml::parse_error& e) {
      return InvalidArgument(Where(origin, e.source()) + ": " + std::string(e.description()));
    }
#else
    toml::parse_result result = toml::parse(toml_text, origin);
    if (!result) {
      return InvalidArgument(Where(origin, result.error().source()) + ": " + std::string(result.error().description()));
    }
    toml::table root = std::move(result).table();
#endif
    RETURN_IF_ERROR(ApplyTable(root, origin, &config));
  } catch (const std::exception& e) {
    return InvalidArgument(origin + ": cannot parse config: " + e.what());
  }
  return config;
}

StatusOr<NodeConfig> LoadNodeConfigFile(const std::string& path) {
  // O_NONBLOCK so a FIFO given by mistake cannot hang startup; it is rejected below.
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("config file " + path + " does not exist");
    if (err == EACCES) return PermissionDenied("cannot open config file " + path + ": " + ErrnoText(err));
    return FailedPrecondition("cannot open config file " + path + ": " + ErrnoText(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("config file " + path + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigBytes) {
    ::close(fd);
    return InvalidArgument("config file " + path + " is larger than " + std::to_string(kMaxConfigBytes) + " bytes");
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return FailedPrecondition("cannot read config file " + path + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) {  // the file grew after fstat
      ::close(fd);
      return InvalidArgument("config file " + path + " is larger than " + std::to_string(kMaxConfigBytes) + " bytes");
    }
  }
  ::close(fd);
  return ParseNodeConfig(text, path);
}

Status SetNodeConfigValue(NodeConfig* config, std::string_view key, NodeSetting value) {
  const KeySpec* spec = FindDottedKey(key);
  if (spec == nullptr) return InvalidArgument("unknown config key '" + Printable(key) + "'");
  if (KindOf(spec->field) != KindOf(value)) {
    return InvalidArgument("wrong kind of value for config key '" + std::string(key) + "'");
  }
  StoreSetting(config, *spec, std::move(value));
  return OkStatus();
}

Status FinalizeNodeConfig(NodeConfig* c) {
  RETURN_IF_ERROR(ExpandHome("datadir", &c->datadir));
  RETURN_IF_ERROR(ExpandHome("operator.keystore", &c->keystore));
  RETURN_IF_ERROR(ExpandHome("operator.password_file", &c->password_file));
  if (c->datadir.empty()) return InvalidArgument("datadir (--datadir) must not be empty");

  RETURN_IF_ERROR(CheckListen("rpc.listen (--listen)", c->rpc_listen, false));
  RETURN_IF_ERROR(CheckRange("rpc.max_message_bytes", c->rpc_max_message_bytes, 1024, 2147483647));
  RETURN_IF_ERROR(CheckRange("rpc.max_streams", c->rpc_max_streams, 1, 4096));
  RETURN_IF_ERROR(CheckListen("metrics.listen (--metrics)", c->metrics_listen, true));

  if (auto level = ParseLogLevel(c->log_level); !level.ok()) {
    return InvalidArgument("log.level (--log-level): " + level.status().message());
  }
  if (auto format = ParseLogFormat(c->log_format); !format.ok()) {
    return InvalidArgument("log.format (--log-format): " + format.status().message());
  }

  RETURN_IF_ERROR(CheckOneOf("executor.backend (--backend)", c->tasks.backend.name, {"cpu", "cuda", "cuda-emu"}));
  RETURN_IF_ERROR(CheckRange("executor.threads (--threads)", AsWritten(c, "executor.threads"), 1, 256));
  RETURN_IF_ERROR(CheckOneOf("executor.isa", c->tasks.backend.isa, {"auto", "avx2", "portable"}));
  RETURN_IF_ERROR(CheckRange("executor.device", AsWritten(c, "executor.device"), 0, 1023));
  RETURN_IF_ERROR(CheckRange("executor.workers (--workers)", AsWritten(c, "executor.workers"), 1, 256));
  RETURN_IF_ERROR(CheckRange("executor.queue_capacity (--queue)", AsWritten(c, "executor.queue_capacity"), 1, 1000000));
  RETURN_IF_ERROR(CheckRange("executor.program_cache_bytes (--program-cache-bytes)", c->tasks.program_cache_bytes, 0,
                             int64_t{1} << 50));
  RETURN_IF_ERROR(
      CheckRange("executor.input_cache_bytes (--input-cache-bytes)", c->tasks.input_cache_bytes, 0, int64_t{1} << 50));

  RETURN_IF_ERROR(CheckRange("storage.max_bytes (--storage-max-bytes)", c->storage_max_bytes, 0, int64_t{1} << 60));
  RETURN_IF_ERROR(
      CheckRange("storage.min_free_bytes (--min-free-bytes)", c->storage_min_free_bytes, 0, int64_t{1} << 60));
  RETURN_IF_ERROR(CheckRange("storage.retain_results_hours (--retain-results-hours)", c->storage_retain_results_hours,
                             0, 24 * 365 * 100));
  RETURN_IF_ERROR(
      CheckRange("storage.sweep_interval_ms (--sweep-interval-ms)", c->storage_sweep_interval.count(), 50, 86400000));
  RETURN_IF_ERROR(CheckPositive("limits.max_blob_bytes (--max-blob-bytes)", c->tasks.limits.max_graph_file_bytes));
  RETURN_IF_ERROR(CheckPositive("limits.max_task_bytes (--max-task-bytes)", c->tasks.limits.max_total_bytes));
  RETURN_IF_ERROR(CheckPositive("limits.max_task_flops (--max-task-flops)", c->tasks.limits.max_flops));
  RETURN_IF_ERROR(CheckPositive("limits.max_task_seconds (--max-task-seconds)", c->tasks.max_task_seconds));
  RETURN_IF_ERROR(CheckPositive("limits.max_elements (--max-elements)", c->tasks.limits.max_elements_per_tensor));
  RETURN_IF_ERROR(CheckPositive("limits.max_ops (--max-ops)", c->tasks.limits.max_ops));
  RETURN_IF_ERROR(CheckPositive("limits.max_inputs (--max-inputs)", c->tasks.max_inputs));

  if (!c->password_file.empty() && !c->password_env.empty()) {
    return InvalidArgument("operator.password_file and operator.password_env are both set; use one");
  }

  RETURN_IF_ERROR(ExpandHome("chain.deployment", &c->chain_deployment));
  RETURN_IF_ERROR(ExpandHome("chain.rpc_ca_file", &c->chain_view.rpc_ca_file));
  RETURN_IF_ERROR(CheckRange("chain.confirmations", AsWritten(c, "chain.confirmations"), 0, 10000));
  RETURN_IF_ERROR(
      CheckRange("consensus.reference_margin_blocks", AsWritten(c, "consensus.reference_margin_blocks"), 0, 1000000));
  RETURN_IF_ERROR(CheckRange("chain.poll_ms", c->chain_view.poll_interval.count(), 50, 3600000));
  RETURN_IF_ERROR(CheckRange("chain.seat_poll_ms", c->consensus.seat_poll_interval.count(), 0, 60000));
  RETURN_IF_ERROR(CheckListen("p2p.listen (--p2p-listen)", c->p2p_listen, true));
  RETURN_IF_ERROR(CheckRange("p2p.max_streams", c->p2p_max_streams, 1, 4096));
  RETURN_IF_ERROR(CheckRange("p2p.max_blob_streams_per_host", c->p2p_max_blob_streams_per_host, 1, 4096));
  RETURN_IF_ERROR(CheckRange("p2p.max_blob_streams_per_operator", c->p2p_max_blob_streams_per_operator, 1, 4096));
  RETURN_IF_ERROR(CheckListen("p2p.advertise", c->p2p_advertise, true));
  if (c->p2p_bootstrap.size() > 256) return InvalidArgument("p2p.bootstrap lists more than 256 peers");
  for (const std::string& peer : c->p2p_bootstrap) RETURN_IF_ERROR(CheckListen("p2p.bootstrap", peer, false));
  RETURN_IF_ERROR(CheckRange("p2p.fanout", AsWritten(c, "p2p.fanout"), 1, 64));
  RETURN_IF_ERROR(CheckRange("p2p.max_messages_per_second", AsWritten(c, "p2p.max_messages_per_second"), 1, 1000000));
  RETURN_IF_ERROR(CheckRange("p2p.max_messages_per_second_per_operator",
                             AsWritten(c, "p2p.max_messages_per_second_per_operator"), 1, 1000000));
  RETURN_IF_ERROR(CheckRange("p2p.max_pull_requests_per_second_per_ip",
                             AsWritten(c, "p2p.max_pull_requests_per_second_per_ip"), 1, 1000000));
  RETURN_IF_ERROR(CheckRange("p2p.max_pull_requests_per_second_per_operator",
                             AsWritten(c, "p2p.max_pull_requests_per_second_per_operator"), 1, 1000000));
  RETURN_IF_ERROR(CheckRange("p2p.max_signature_checks_per_second_per_host",
                             AsWritten(c, "p2p.max_signature_checks_per_second_per_host"), 1, 1000000));
  RETURN_IF_ERROR(
      CheckRange("p2p.max_lookups_per_second_per_operator", c->p2p_max_lookups_per_second_per_operator, 1, 1000000));
  RETURN_IF_ERROR(
      CheckRange("p2p.max_lookups_per_second_per_host", c->p2p_max_lookups_per_second_per_host, 1, 1000000));
  RETURN_IF_ERROR(CheckRange("p2p.max_pull_bytes_per_second_per_operator",
                             AsWritten(c, "p2p.max_pull_bytes_per_second_per_operator"), 65536, int64_t{1} << 40));
  RETURN_IF_ERROR(CheckRange("p2p.pull_interval_ms", c->gossip.pull_interval.count(), 50, 3600000));
  RETURN_IF_ERROR(CheckRange("consensus.max_replicas", AsWritten(c, "consensus.max_replicas"), 1, 256));
  RETURN_IF_ERROR(CheckRange("consensus.replicas", AsWritten(c, "consensus.replicas"), 1, c->consensus.max_replicas));
  // The default quorum must itself be a majority of the default committee (consensus/replication.h).
  RETURN_IF_ERROR(CheckRange("consensus.quorum", AsWritten(c, "consensus.quorum"),
                             static_cast<int64_t>(consensus::SmallestMajority(c->consensus.default_replicas)),
                             c->consensus.default_replicas));
  RETURN_IF_ERROR(CheckRange("consensus.member_timeout_ms", c->consensus.member_timeout.count(), 100, 86400000));
  RETURN_IF_ERROR(CheckRange("consensus.exhausted_grace_ms", c->consensus.exhausted_grace.count(), 100, 86400000));
  RETURN_IF_ERROR(CheckRange("consensus.commit_grace_ms", c->consensus.commit_grace.count(), 0, 600000));
  RETURN_IF_ERROR(
      CheckRange("consensus.max_dispute_committee", AsWritten(c, "consensus.max_dispute_committee"), 1, 1024));
  RETURN_IF_ERROR(CheckRange("consensus.max_reference_age", AsWritten(c, "consensus.max_reference_age"), 1, 1000000));
  RETURN_IF_ERROR(
      CheckRange("consensus.challenge_window_blocks", AsWritten(c, "consensus.challenge_window_blocks"), 1, 1000000));
  RETURN_IF_ERROR(CheckOneOf("clients.auth (--client-auth)", c->clients.auth, {"open", "keys"}));
  RETURN_IF_ERROR(ExpandHome("clients.keys_file", &c->clients.keys_file));
  if (c->clients.auth == "keys" && c->clients.keys_file.empty()) {
    return InvalidArgument("clients.auth = \"keys\" needs clients.keys_file (--client-keys-file)");
  }
  {
    const double rate = c->clients.defaults.submissions_per_second;
    if (!(rate >= 0 && rate <= 1e6)) {
      return InvalidArgument("clients.submissions_per_second must be in [0, 1000000] (got " + std::to_string(rate) +
                             ")");
    }
  }
  RETURN_IF_ERROR(CheckRange("clients.submission_burst", c->clients.defaults.submission_burst, 0, 1000000));
  RETURN_IF_ERROR(CheckRange("clients.flops_per_minute", c->clients.defaults.flops_per_minute, 0, INT64_MAX));
  RETURN_IF_ERROR(CheckRange("clients.max_tasks_in_flight", c->clients.defaults.max_tasks_in_flight, 0, 1000000));
  RETURN_IF_ERROR(CheckRange("clients.max_watches", c->clients.defaults.max_watches, 0, 1000000));
  RETURN_IF_ERROR(CheckRange("clients.max_disk_bytes", c->clients.defaults.max_disk_bytes, 0, int64_t{1} << 60));
  RETURN_IF_ERROR(
      CheckRange("clients.output_fetches_per_minute", c->clients.defaults.output_fetches_per_minute, 0, 1000000));
  const RemoteOutputLimits& outputs = c->consensus.remote_outputs;
  RETURN_IF_ERROR(CheckRange("outputs.max_remote_entries", AsWritten(c, "outputs.max_remote_entries"), 1, 100000000));
  RETURN_IF_ERROR(CheckRange("outputs.max_remote_bytes", outputs.max_bytes, 4096, int64_t{1} << 40));
  RETURN_IF_ERROR(CheckRange("outputs.max_fetches_in_flight", AsWritten(c, "outputs.max_fetches_in_flight"), 1, 4096));
  RETURN_IF_ERROR(
      CheckRange("outputs.max_persisted_backoffs", AsWritten(c, "outputs.max_persisted_backoffs"), 0, 1000000));
  RETURN_IF_ERROR(CheckRange("outputs.fetch_backoff_ms", outputs.backoff.count(), 1, 86400000));
  RETURN_IF_ERROR(
      CheckRange("outputs.fetch_backoff_max_ms", outputs.backoff_max.count(), outputs.backoff.count(), 86400000));
  RETURN_IF_ERROR(CheckRange("fault.delay_ms", c->fault_delay.count(), 0, 600000));
  if (!c->fault_mode.empty()) {
    RETURN_IF_ERROR(CheckOneOf("fault.mode", c->fault_mode, FaultModeNames()));
  }
  if (!c->chain_view.rpc_url.empty()) {
    if (c->chain_deployment.empty()) return InvalidArgument("chain.rpc is set but chain.deployment is not");
    // Messages name the URL only redacted: hosted RPCs carry API keys in it.
    if (auto url = ParseRpcUrl(c->chain_view.rpc_url); !url.ok()) {
      return InvalidArgument("chain.rpc (--chain-rpc): " + url.status().message());
    }
    if (!c->chain_view.ws_url.empty()) {
      if (auto url = ParseWsRpcUrl(c->chain_view.ws_url); !url.ok()) {
        return InvalidArgument("chain.rpc_ws (--chain-rpc-ws): " + url.status().message());
      }
    }
    if (c->keystore.empty())
      return InvalidArgument("network mode (chain.rpc) needs an operator key: set operator.keystore");
    // A networked node signs what it computes. Results of a backend that was never checked
    // against the CPU reference could differ by a bit, and that bit is a slashed stake
    // (docs/SECURITY.md, versions): such a node does not start.
    if (c->tasks.backend.name != "cpu" && !c->selftest) {
      return InvalidArgument("executor.selftest = false with backend '" + c->tasks.backend.name +
                             "' in network mode: a node signs only results its backend reproduced against the CPU; "
                             "enable the self-test or use the cpu backend");
    }
  } else if (!c->chain_view.ws_url.empty()) {
    return InvalidArgument("chain.rpc_ws (--chain-rpc-ws) needs network mode (chain.rpc)");
  } else if (!c->fault_mode.empty() && c->fault_mode != "crash-before-unsynced-record") {
    // crash-before-unsynced-record also stops a single node (before RunTask's record write).
    return InvalidArgument("fault.mode needs network mode (chain.rpc)");
  } else if (!c->p2p_listen.empty()) {
    return InvalidArgument("p2p.listen (--p2p-listen) needs network mode (chain.rpc)");
  }
  if (c->clients.auth == "keys" && !c->chain_view.rpc_url.empty() && c->p2p_listen.empty()) {
    // Peers fetch blobs and results with the client API's calls; on a shared port they would
    // need client keys. On their own listener they are served without one.
    return InvalidArgument(
        "clients.auth = \"keys\" in network mode needs p2p.listen (--p2p-listen): peers "
        "fetch blobs and results without client keys, on a port of their own");
  }
  if (!c->p2p_listen.empty() && c->p2p_listen == c->rpc_listen) {
    return InvalidArgument("p2p.listen and rpc.listen are both " + c->rpc_listen + "; give peers a port of their own");
  }
  // Unreachable while every key with a field narrower than int64_t has a range check above;
  // a new key without one must not pass with its field left unset.
  if (!c->unrepresentable_integers.empty()) {
    const auto& [key, value] = *c->unrepresentable_integers.begin();
    return InvalidArgument(key + " is out of range (got " + std::to_string(value) + ")");
  }
  return OkStatus();
}

}  // namespace consensor::node
