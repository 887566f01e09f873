#include "node/cli/cli_args.h"

#include <algorithm>
#include <charconv>

namespace consensor::node {

bool ParsedArgs::HasFlag(const std::string& flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

std::optional<std::string> ParsedArgs::Option(const std::string& key) const {
  std::optional<std::string> last;
  for (auto [it, end] = options.equal_range(key); it != end; ++it) last = it->second;
  return last;
}

std::vector<std::string> ParsedArgs::All(const std::string& key) const {
  std::vector<std::string> values;
  for (auto [it, end] = options.equal_range(key); it != end; ++it) values.push_back(it->second);
  return values;
}

StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& raw, const ArgSpec& spec) {
  auto contains = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  ParsedArgs a;
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string& s = raw[i];
    if (s.rfind("--", 0) != 0 || s == "--") {
      a.positional.push_back(s);
      continue;
    }
    std::string key = s, value;
    size_t eq = s.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      key = s.substr(0, eq);
      value = s.substr(eq + 1);
    }
    if (contains(spec.value_options, key)) {
      if (!inline_value) {
        if (i + 1 >= raw.size()) return InvalidArgument("option " + key + " needs a value");
        value = raw[++i];
      }
      a.options.emplace(key, value);
    } else if (contains(spec.flags, key) && !inline_value) {
      a.flags.push_back(key);
    } else {
      return InvalidArgument("unknown option '" + s + "'");
    }
  }
  return a;
}

StatusOr<std::map<std::string, std::string>> ParseNamedFiles(const std::vector<std::string>& specs,
                                                             const std::string& flag) {
  std::map<std::string, std::string> files;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return InvalidArgument(flag + " expects NAME=FILE.npy, got '" + spec + "'");
    }
    if (!files.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second) {
      return InvalidArgument("input '" + spec.substr(0, eq) + "' is given twice");
    }
  }
  return files;
}

StatusOr<int64_t> ParseIntOption(const std::string& text, const std::string& what, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < min || v > max) {
    return InvalidArgument(what + " must be an integer between " + std::to_string(min) + " and " + std::to_string(max) +
                           ", got '" + text + "'");
  }
  return v;
}

StatusOr<kernels::BackendOptions> ParseBackendFlags(const ParsedArgs& args) {
  kernels::BackendOptions options;
  options.name = args.Option("--backend").value_or("cpu");
  if (options.name != "cpu" && options.name != "cuda" && options.name != "cuda-emu") {
    return InvalidArgument("--backend must be cpu, cuda or cuda-emu, got '" + options.name + "'");
  }
  options.isa = args.Option("--isa").value_or("auto");
  if (options.isa != "auto" && options.isa != "avx2" && options.isa != "portable") {
    return InvalidArgument("--isa must be auto, avx2 or portable, got '" + options.isa + "'");
  }
  if (auto text = args.Option("--threads")) {
    ASSIGN_OR_RETURN(int64_t threads, ParseIntOption(*text, "--threads", 1, 256));
    options.threads = static_cast<int>(threads);
  }
  if (auto text = args.Option("--device")) {
    ASSIGN_OR_RETURN(int64_t device, ParseIntOption(*text, "--device", 0, 1023));
    options.device = static_cast<int>(device);
  }
  return options;
}

}  // namespace consensor::node
