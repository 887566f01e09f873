// Command-line parsing shared by `consensor` subcommands and `consensord`.
// Options either take a value (`--out DIR` or `--out=DIR`) or are boolean flags; anything
// else starting with "--" is an error, so a typo never silently changes behaviour.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/backend_factory.h"

namespace consensor::node {

struct ParsedArgs {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;
  std::vector<std::string> flags;

  bool HasFlag(const std::string& flag) const;
  std::optional<std::string> Option(const std::string& key) const;  // the last one given
  std::vector<std::string> All(const std::string& key) const;       // every value, in order
};

struct ArgSpec {
  std::vector<std::string> value_options;  // e.g. {"--out", "--input"}
  std::vector<std::string> flags;          // e.g. {"--wait", "--help"}
};

StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& raw, const ArgSpec& spec);

// Repeated `NAME=FILE` values of `flag` (e.g. `--input x=x.npy`) as name -> file; every name
// once. Errors are usage errors.
StatusOr<std::map<std::string, std::string>> ParseNamedFiles(const std::vector<std::string>& specs,
                                                             const std::string& flag);

// Strict integer parsing for option values: the whole text must be a number in [min, max].
StatusOr<int64_t> ParseIntOption(const std::string& text, const std::string& what, int64_t min, int64_t max);

// The backend flags shared by `run`, `selftest` and `onnx-test`: --backend, --device,
// --isa and --threads (defaults where absent), with the node config's ranges
// (executor.backend, .device, .isa, .threads). Errors are usage errors.
StatusOr<kernels::BackendOptions> ParseBackendFlags(const ParsedArgs& args);

}  // namespace consensor::node
