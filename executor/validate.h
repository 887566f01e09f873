// Validation, shape inference and canonicalization of a graph, before anything runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "executor/graph.h"
#include "executor/limits.h"
#include "executor/op_schema.h"

namespace consensor::executor {

struct CanonicalNode {
  int node = -1;  // index into Graph::nodes()
  const OpSchema* schema = nullptr;
  std::vector<int> inputs;  // value indices after merging duplicates
  int output = -1;          // value index
  InferResult inferred;
};

struct ValidatedGraph {
  // Type of every value (placeholders, constants, node outputs), by value index.
  std::vector<TypeInfo> types;
  // Reachable, deduplicated nodes in canonical order (docs/DETERMINISM.md section 3).
  std::vector<CanonicalNode> order;
  std::vector<int> placeholders;                     // value indices, sorted by name
  std::vector<int> constants;                        // used constants, in first-use order
  std::vector<std::pair<std::string, int>> outputs;  // sorted by name; value indices after merging
  Hash256 id{};                                      // canonical graph id
  int64_t total_flops = 0;
};

StatusOr<ValidatedGraph> Validate(const Graph& graph, const Limits& limits);

}  // namespace consensor::executor
