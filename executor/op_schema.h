// The op whitelist: for every op name the graph format accepts, how to check its inputs
// and attributes, infer its output type, and lower it to a kernel call.
#pragma once

#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "executor/graph.h"
#include "kernels/op.h"

namespace consensor::executor {

struct TypeInfo {
  DType dtype = DType::kInvalid;
  Shape shape;
};

struct InferResult {
  TypeInfo output;
  // Resolved kernel parameters (axes non-negative and sorted, slices clamped, ...).
  kernels::OpParams params;
  // The attributes with defaults filled in and values normalized (e.g. negative axes
  // resolved), so two spellings of the same operation get the same canonical graph id.
  Attributes canonical_attrs;
  // Estimated floating-point (or integer) operations, for the FLOPs cap and `inspect`.
  int64_t flops = 0;
  // Optional reinterpretation of the contiguous buffers when lowering to the kernel
  // (e.g. matmul promotes a rank-1 operand to rank 2). Empty means "use the real shapes".
  std::vector<Shape> kernel_input_shapes;
  std::optional<Shape> kernel_output_shape;
};

using InferFn = StatusOr<InferResult> (*)(const std::vector<TypeInfo>& inputs, const Attributes& attrs);

struct OpSchema {
  std::string_view name;  // graph-format name, e.g. "matmul"
  kernels::Op op;
  int min_inputs;
  int max_inputs;                            // -1: variadic
  std::vector<std::string_view> attributes;  // accepted attribute names; others are rejected
  InferFn infer;
};

// nullptr when the op is not on the whitelist.
const OpSchema* FindOpSchema(std::string_view name);
const std::vector<OpSchema>& AllOpSchemas();

}  // namespace consensor::executor
