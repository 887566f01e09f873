// Conversion between the wire format (proto/consensor/v1/graph.proto) and the IR, and
// graph files on disk. Files are binary protobuf; files ending in .pbtxt are text format.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "consensor/v1/graph.pb.h"
#include "executor/graph.h"
#include "executor/limits.h"

namespace consensor::executor {

constexpr uint32_t kGraphFormatVersion = 1;

// Structural checks only (names resolve, dtypes are known, inline tensors have the right
// size); op semantics are checked by Validate().
StatusOr<Graph> GraphFromProto(const v1::Graph& proto);
v1::Graph GraphToProto(const Graph& graph);

StatusOr<Graph> ParseGraph(std::span<const uint8_t> bytes, bool text_format, const Limits& limits);
StatusOr<Graph> LoadGraphFile(const std::string& path, const Limits& limits);
std::vector<uint8_t> SerializeGraph(const Graph& graph);
// Writes atomically (temp file + rename). Text format when the path ends in .pbtxt.
Status SaveGraphFile(const std::string& path, const Graph& graph);

}  // namespace consensor::executor
