// ONNX import: an ONNX model (as exported by PyTorch) becomes a Consensor graph plus a
// safetensors blob holding its weights.
//
// Every ONNX node is lowered to the ops of docs/DETERMINISM.md section 4; the lowering of
// each ONNX op is written down in docs/ONNX.md. Input shapes must be static: a symbolic
// dimension is taken from `input_shapes` (the CLI fills it from the .npy inputs). Nodes whose
// inputs are all known at import time (shape arithmetic such as Shape -> Gather -> Concat
// -> Reshape, folded weights) are evaluated once, here, with the deterministic CPU
// executor, and become constants.
//
// Errors: a model that is not valid ONNX is INVALID_ARGUMENT; an op, attribute value or
// dtype Consensor does not support is UNIMPLEMENTED, with a message that names the op, the
// node and the attribute.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/graph.h"
#include "executor/limits.h"

namespace consensor::executor {

struct OnnxImportOptions {
  // Shapes for graph inputs whose declared shape has symbolic or missing dimensions; a
  // shape given here must agree with every fixed dimension the model declares.
  std::map<std::string, Shape> input_shapes;
  // Graph inputs bound to values at import: they become constants, not placeholders. For
  // inputs that steer shapes (a Reshape's target, ReduceSum's axes), which Consensor needs
  // to know before the task runs.
  std::map<std::string, Tensor> constant_inputs;
  Limits limits;
  int64_t max_model_bytes = (int64_t{2} << 30) - 1;  // protobuf's own ceiling
  // Constants up to this many bytes stay inline in the graph; larger ones (the weights) go
  // into the safetensors blob, so the graph itself stays small.
  int64_t inline_max_bytes = 1024;
};

struct OnnxImport {
  Graph graph;
  // The weights as one safetensors file (docs/ONNX.md); empty when every constant is inline.
  // Graph constants refer to it by hash and entry name.
  std::vector<uint8_t> weights;
  Hash256 weights_sha256{};
  std::vector<std::string> inputs;   // graph input names, in the model's order
  std::vector<std::string> outputs;  // graph output names, in the model's order
  int64_t opset = 0;                 // of the default ONNX domain
  std::string producer;              // e.g. "pytorch 1.13.1"
  int64_t folded_nodes = 0;          // ONNX nodes evaluated at import time
};

StatusOr<OnnxImport> ImportOnnx(std::span<const uint8_t> model, const OnnxImportOptions& options);
StatusOr<OnnxImport> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options);

// True for the UNIMPLEMENTED error of an input that must be known at import (it steers a
// shape: a Reshape target, ReduceSum's axes, Range's bounds) but is a graph input.
bool NeedsValueAtImport(const Status& status);

// Imports a model that will run on known input values, as an ONNX test case does. When an
// input must be known at import, the integer inputs are bound as constants (`constant_inputs`),
// if that is not enough also the float vectors of at most 16 values (Resize's scales and roi),
// and if that is not enough, every input. `run_inputs` are the values still to feed.
struct OnnxImportForValues {
  OnnxImport model;
  std::map<std::string, Tensor> bound;
  std::map<std::string, Tensor> run_inputs;
};
StatusOr<OnnxImportForValues> ImportOnnxForValues(std::span<const uint8_t> model,
                                                  const std::map<std::string, Tensor>& values,
                                                  OnnxImportOptions options = {});

// What a model declares, without importing it: lets a caller match .npy inputs and
// expected outputs to names before the import.
struct OnnxInputInfo {
  std::string name;
  DType dtype = DType::kInvalid;  // kInvalid: a dtype Consensor does not support
  std::vector<int64_t> shape;     // -1: symbolic or unknown
};
struct OnnxModelInfo {
  std::vector<OnnxInputInfo> inputs;  // initializers excluded, in the model's order
  std::vector<std::string> outputs;   // in the model's order
  std::vector<std::string> op_types;  // distinct, sorted ("domain.Op" outside the default domain)
  bool non_tensor = false;            // some input or output is a sequence, map or optional
};
StatusOr<OnnxModelInfo> ReadOnnxModelInfo(std::span<const uint8_t> model);

// A serialized onnx.TensorProto (the .pb files of the ONNX test suite) as a Tensor.
StatusOr<Tensor> ParseOnnxTensor(std::span<const uint8_t> bytes, const Limits& limits);

// ONNX op types (default domain) the importer lowers, sorted.
std::vector<std::string> SupportedOnnxOps();

// True for a path whose name ends in ".onnx" (case-insensitive): the CLI imports these.
bool IsOnnxPath(const std::string& path);

}  // namespace consensor::executor
