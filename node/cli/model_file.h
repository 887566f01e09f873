// A model named on the command line: a Consensor graph file (.pb / .pbtxt), or an ONNX model
// (.onnx) imported on the fly. Shared by `run`, `inspect`, `submit` and `import`.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/npy.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/graph.h"
#include "executor/limits.h"
#include "executor/onnx/import.h"
#include "executor/program.h"

namespace consensor::node {

struct ModelFile {
  executor::Graph graph;
  // Set for an imported ONNX model: its weights (one safetensors blob), served from memory.
  std::optional<executor::OnnxImport> onnx;
  std::unique_ptr<executor::MemoryBlobSource> onnx_blobs;
};

// `input_shapes` gives the shapes of the inputs the caller will feed (an ONNX model with
// symbolic dimensions takes them from there); it is ignored for Consensor graph files.
StatusOr<ModelFile> LoadModelFile(const std::string& path, const std::map<std::string, Shape>& input_shapes,
                                  const executor::Limits& limits,
                                  const std::map<std::string, Tensor>& constant_inputs = {});

// Reads each named .npy file; errors name the input and the file.
StatusOr<std::map<std::string, Tensor>> ReadNpyFiles(const std::map<std::string, std::string>& files,
                                                     const NpyLimits& limits);

// Parses repeated `--shape NAME=D0,D1,...` values into `shapes` (later inputs do not override).
Status ParseShapeSpecs(const std::vector<std::string>& specs, std::map<std::string, Shape>* shapes);

}  // namespace consensor::node
