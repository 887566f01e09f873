#include "node/daemon/config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string_view>
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
#include "node/telemetry/http_server.h"
#include "node/telemetry/log.h"

namespace consensor::node {
namespace {

constexpr size_t kMaxConfigBytes = size_t{1} << 20;

using Field = std::variant<std::string NodeConfig::*, int64_t NodeConfig::*, bool NodeConfig::*,
                           std::vector<std::string> NodeConfig::*>;

struct KeySpec {
  std::string_view section;  // "" for top-level keys
  std::string_view key;
  Field field;
};

const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec> keys = {
      {"", "datadir", &NodeConfig::datadir},
      {"rpc", "listen", &NodeConfig::rpc_listen},
      {"rpc", "max_message_bytes", &NodeConfig::rpc_max_message_bytes},
      {"rpc", "max_streams", &NodeConfig::rpc_max_streams},
      {"metrics", "listen", &NodeConfig::metrics_listen},
      {"log", "level", &NodeConfig::log_level},
      {"log", "format", &NodeConfig::log_format},
      {"executor", "backend", &NodeConfig::backend},
      {"executor", "threads", &NodeConfig::threads},
      {"executor", "isa", &NodeConfig::isa},
      {"executor", "device", &NodeConfig::device},
      {"executor", "fallback_cpu", &NodeConfig::fallback_cpu},
      {"executor", "selftest", &NodeConfig::selftest},
      {"executor", "workers", &NodeConfig::workers},
      {"executor", "queue_capacity", &NodeConfig::queue_capacity},
      {"limits", "max_blob_bytes", &NodeConfig::max_blob_bytes},
      {"limits", "max_task_bytes", &NodeConfig::max_task_bytes},
      {"limits", "max_task_flops", &NodeConfig::max_task_flops},
      {"limits", "max_task_seconds", &NodeConfig::max_task_seconds},
      {"limits", "max_elements", &NodeConfig::max_elements},
      {"limits", "max_ops", &NodeConfig::max_ops},
      {"limits", "max_inputs", &NodeConfig::max_inputs},
      {"operator", "keystore", &NodeConfig::keystore},
      {"operator", "password_file", &NodeConfig::password_file},
      {"operator", "password_env", &NodeConfig::password_env},
      {"chain", "rpc", &NodeConfig::chain_rpc},
      {"chain", "deployment", &NodeConfig::chain_deployment},
      {"chain", "confirmations", &NodeConfig::chain_confirmations},
      {"chain", "poll_ms", &NodeConfig::chain_poll_ms},
      {"chain", "submit_evidence", &NodeConfig::chain_submit_evidence},
      {"p2p", "advertise", &NodeConfig::p2p_advertise},
      {"p2p", "bootstrap", &NodeConfig::p2p_bootstrap},
      {"p2p", "fanout", &NodeConfig::p2p_fanout},
      {"p2p", "max_messages_per_second", &NodeConfig::p2p_max_messages_per_second},
      {"p2p", "pull_interval_ms", &NodeConfig::p2p_pull_interval_ms},
      {"consensus", "replicas", &NodeConfig::consensus_replicas},
      {"consensus", "quorum", &NodeConfig::consensus_quorum},
      {"consensus", "max_replicas", &NodeConfig::consensus_max_replicas},
      {"consensus", "member_timeout_ms", &NodeConfig::consensus_member_timeout_ms},
      {"consensus", "max_dispute_committee", &NodeConfig::consensus_max_dispute_committee},
      {"consensus", "max_reference_age", &NodeConfig::consensus_max_reference_age},
      {"fault", "mode", &NodeConfig::fault_mode},
  };
  return keys;
}

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
  return InvalidArgument(origin + ": unknown key '" + Printable(DottedName(section, key)) + "'" +
                         LineSuffix(region) + Suggestion(section, key));
}

Status Assign(const std::string& origin, const KeySpec& spec, const toml::key& key, const toml::node& value,
              NodeConfig* config) {
  const std::string name = DottedName(spec.section, spec.key);
  const std::string where = Where(origin, key.source());
  if (auto* s = std::get_if<std::string NodeConfig::*>(&spec.field)) {
    const auto* v = value.as_string();
    if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be a string");
    config->*(*s) = v->get();
  } else if (auto* i = std::get_if<int64_t NodeConfig::*>(&spec.field)) {
    const auto* v = value.as_integer();
    if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be an integer");
    config->*(*i) = v->get();
  } else if (auto* b = std::get_if<bool NodeConfig::*>(&spec.field)) {
    const auto* v = value.as_boolean();
    if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be true or false");
    config->*(*b) = v->get();
  } else if (auto* l = std::get_if<std::vector<std::string> NodeConfig::*>(&spec.field)) {
    const auto* v = value.as_array();
    if (v == nullptr) return InvalidArgument(where + ": '" + name + "' must be an array of strings");
    std::vector<std::string> items;
    for (const auto& item : *v) {
      const auto* str = item.as_string();
      if (str == nullptr) return InvalidArgument(where + ": '" + name + "' must be an array of strings");
      items.push_back(str->get());
    }
    config->*(*l) = std::move(items);
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
    return InvalidArgument(std::string(name) + ": cannot expand '~' in '" + Printable(*path) + "' because $HOME is not set");
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

Status CheckOneOf(const char* name, const std::string& value, std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (std::string_view a : allowed) {
    if (value == a) return OkStatus();
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return InvalidArgument(std::string(name) + " must be one of " + list + " (got '" + Printable(value) + "')");
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
      return InvalidArgument(Where(origin, result.error().source()) + ": " +
                             std::string(result.error().description()));
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

  RETURN_IF_ERROR(CheckOneOf("executor.backend (--backend)", c->backend, {"cpu", "cuda", "cuda-emu"}));
  RETURN_IF_ERROR(CheckRange("executor.threads (--threads)", c->threads, 1, 256));
  RETURN_IF_ERROR(CheckOneOf("executor.isa", c->isa, {"auto", "avx2", "portable"}));
  RETURN_IF_ERROR(CheckRange("executor.device", c->device, 0, 1023));
  RETURN_IF_ERROR(CheckRange("executor.workers (--workers)", c->workers, 1, 256));
  RETURN_IF_ERROR(CheckRange("executor.queue_capacity (--queue)", c->queue_capacity, 1, 1000000));

  RETURN_IF_ERROR(CheckPositive("limits.max_blob_bytes (--max-blob-bytes)", c->max_blob_bytes));
  RETURN_IF_ERROR(CheckPositive("limits.max_task_bytes (--max-task-bytes)", c->max_task_bytes));
  RETURN_IF_ERROR(CheckPositive("limits.max_task_flops (--max-task-flops)", c->max_task_flops));
  RETURN_IF_ERROR(CheckPositive("limits.max_task_seconds (--max-task-seconds)", c->max_task_seconds));
  RETURN_IF_ERROR(CheckPositive("limits.max_elements (--max-elements)", c->max_elements));
  RETURN_IF_ERROR(CheckPositive("limits.max_ops (--max-ops)", c->max_ops));
  RETURN_IF_ERROR(CheckPositive("limits.max_inputs (--max-inputs)", c->max_inputs));

  if (!c->password_file.empty() && !c->password_env.empty()) {
    return InvalidArgument("operator.password_file and operator.password_env are both set; use one");
  }

  RETURN_IF_ERROR(ExpandHome("chain.deployment", &c->chain_deployment));
  RETURN_IF_ERROR(CheckRange("chain.confirmations", c->chain_confirmations, 0, 10000));
  RETURN_IF_ERROR(CheckRange("chain.poll_ms", c->chain_poll_ms, 50, 3600000));
  RETURN_IF_ERROR(CheckListen("p2p.advertise", c->p2p_advertise, true));
  if (c->p2p_bootstrap.size() > 256) return InvalidArgument("p2p.bootstrap lists more than 256 peers");
  for (const std::string& peer : c->p2p_bootstrap) RETURN_IF_ERROR(CheckListen("p2p.bootstrap", peer, false));
  RETURN_IF_ERROR(CheckRange("p2p.fanout", c->p2p_fanout, 1, 64));
  RETURN_IF_ERROR(CheckRange("p2p.max_messages_per_second", c->p2p_max_messages_per_second, 1, 1000000));
  RETURN_IF_ERROR(CheckRange("p2p.pull_interval_ms", c->p2p_pull_interval_ms, 50, 3600000));
  RETURN_IF_ERROR(CheckRange("consensus.max_replicas", c->consensus_max_replicas, 1, 256));
  RETURN_IF_ERROR(CheckRange("consensus.replicas", c->consensus_replicas, 1, c->consensus_max_replicas));
  // The default quorum must itself be a majority of the default committee (consensus/replication.h).
  RETURN_IF_ERROR(CheckRange("consensus.quorum", c->consensus_quorum,
                             static_cast<int64_t>(consensus::SmallestMajority(c->consensus_replicas)),
                             c->consensus_replicas));
  RETURN_IF_ERROR(CheckRange("consensus.member_timeout_ms", c->consensus_member_timeout_ms, 100, 86400000));
  RETURN_IF_ERROR(CheckRange("consensus.max_dispute_committee", c->consensus_max_dispute_committee, 1, 1024));
  RETURN_IF_ERROR(CheckRange("consensus.max_reference_age", c->consensus_max_reference_age, 1, 1000000));
  if (!c->fault_mode.empty()) {
    RETURN_IF_ERROR(CheckOneOf("fault.mode", c->fault_mode, {"corrupt-output", "equivocate", "silent", "crash-mid-task"}));
  }
  if (!c->chain_rpc.empty()) {
    if (c->chain_deployment.empty()) return InvalidArgument("chain.rpc is set but chain.deployment is not");
    if (c->keystore.empty()) return InvalidArgument("network mode (chain.rpc) needs an operator key: set operator.keystore");
  } else if (!c->fault_mode.empty()) {
    return InvalidArgument("fault.mode needs network mode (chain.rpc)");
  }
  return OkStatus();
}

}  // namespace consensor::node
