// Resource caps checked before anything executes. Configurable by the CLI and the node.
#pragma once

#include <cstdint>

namespace consensor::executor {

struct Limits {
  int64_t max_graph_file_bytes = int64_t{1} << 30;               // serialized graph, incl. inline weights
  int64_t max_elements_per_tensor = int64_t{1} << 28;            // any placeholder, constant or node output
  int64_t max_total_bytes = int64_t{8} << 30;                    // planned arena: inputs + weights + live values
  int64_t max_ops = 100000;                                      // nodes in the graph
  int64_t max_flops = int64_t{100} * 1000 * 1000 * 1000 * 1000;  // estimated, 1e14
};

}  // namespace consensor::executor
