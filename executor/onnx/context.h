// What an ONNX op converter sees: the node's inputs (typed, and known at import time when
// they are constants), its attributes, and a builder that emits Consensor ops. Converters
// live in ops_*.cc, one file per op family; the driver is import.cc.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/graph.h"
#include "executor/limits.h"
#include "executor/op_schema.h"

namespace onnx {
class TensorProto;
class NodeProto;
class AttributeProto;
}  // namespace onnx

namespace consensor::executor::onnx_import {

// Index of a value in the importer's table. Every value has a known dtype and static shape;
// a value is either a constant known at import time or a graph value computed at run time.
using ValueId = int;

class Importer;

// A node the importer emitted: its op, inputs and attributes as given to Emit.
struct EmittedOp {
  std::string op;
  std::vector<ValueId> inputs;
  Attributes attrs;
};

class NodeContext {
 public:
  NodeContext(Importer& importer, const onnx::NodeProto& node, std::vector<ValueId> inputs, int64_t opset);
  // The same node seen with other input values (LowerThroughF32 gives a converter f32 copies).
  NodeContext WithInputs(std::vector<ValueId> inputs) const {
    return NodeContext(importer_, node_, std::move(inputs), opset_);
  }

  const std::string& op_type() const;
  const std::string& node_name() const;
  int64_t opset() const { return opset_; }
  // The import's resource caps (a converter that builds a table checks its size first).
  const Limits& limits() const;

  // --- inputs (an optional input left empty in the model is absent) ---
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] >= 0; }
  ValueId input(int i) const { return inputs_[i]; }
  const TypeInfo& input_type(int i) const { return type(input(i)); }
  // Required input i, or an error naming it.
  StatusOr<ValueId> RequiredInput(int i) const;
  // The value of input i when it is known at import time; nullptr otherwise.
  const Tensor* input_constant(int i) const { return has_input(i) ? constant(input(i)) : nullptr; }
  // An integer (i32/i64) input that must be known at import time, e.g. Reshape's shape.
  StatusOr<std::vector<int64_t>> ConstantInts(int i, std::string_view what) const;
  // A scalar or one-element input known at import time, converted to double.
  StatusOr<double> ConstantScalar(int i, std::string_view what) const;

  // --- attributes ---
  // Fails naming the op, the node and the first attribute not in `accepted`.
  Status CheckAttributes(std::initializer_list<std::string_view> accepted) const;
  bool has_attr(std::string_view name) const { return FindAttr(name) != nullptr; }
  StatusOr<int64_t> AttrInt(std::string_view name, int64_t fallback) const;
  StatusOr<float> AttrFloat(std::string_view name, float fallback) const;
  StatusOr<std::vector<int64_t>> AttrInts(std::string_view name, std::vector<int64_t> fallback) const;
  StatusOr<std::vector<float>> AttrFloats(std::string_view name, std::vector<float> fallback) const;
  StatusOr<std::string> AttrString(std::string_view name, std::string fallback) const;
  StatusOr<std::vector<std::string>> AttrStrings(std::string_view name, std::vector<std::string> fallback) const;
  StatusOr<Tensor> AttrTensor(std::string_view name) const;

  // --- errors; messages name the op and the node ---
  Status Unsupported(std::string_view what) const;  // UNIMPLEMENTED
  Status Invalid(std::string_view what) const;      // INVALID_ARGUMENT
  std::string Where() const;                        // "node 'name' (Conv)"

  // --- building ---
  // Emits one Consensor op (op_schema.h names). Shapes and dtypes are checked and inferred
  // right away; when every input is known at import time the op is evaluated now and the
  // result is a constant.
  StatusOr<ValueId> Emit(std::string_view op, std::vector<ValueId> inputs, Attributes attrs = {});
  ValueId Constant(Tensor t);
  ValueId ScalarF32(float v);
  // A rank-0 constant of `dtype` holding `v` (converted like `cast`).
  ValueId Scalar(DType dtype, double v);
  const TypeInfo& type(ValueId v) const;
  const Tensor* constant(ValueId v) const;

  // --- import-time rewrites (BatchNormalization folding, docs/ONNX.md) ---
  // The Consensor op this import emitted to compute v; nullptr for constants and inputs.
  const EmittedOp* producer(ValueId v) const;
  // True when this node is the only reader of input i: no other ONNX node reads it (under
  // any name) and it is not a graph output. Only then may a rewrite replace its producer.
  bool SoleReader(int i) const;
  // Removes v's producer from the graph at the end of the import; for a rewrite that
  // replaced it (v must have no reader left, see SoleReader).
  void Supersede(ValueId v);

  // --- outputs ---
  int num_outputs() const;
  // True when output i exists and something (a later node or a graph output) may read it.
  bool wants_output(int i) const;
  void SetOutput(int i, ValueId v);
  // Outputs a converter does not set are an error when wanted.
  const std::vector<std::optional<ValueId>>& outputs() const { return outputs_; }

 private:
  const onnx::AttributeProto* FindAttr(std::string_view name) const;

  Importer& importer_;
  const onnx::NodeProto& node_;
  std::vector<ValueId> inputs_;
  std::vector<std::optional<ValueId>> outputs_;
  int64_t opset_;
};

using ConvertFn = Status (*)(NodeContext& ctx);

// DETERMINISM.md 6.8b: a node whose inputs include f16 or bf16 values is converted by `lower`
// (its f32 lowering) on f32 copies of those inputs (`cast`, exact), and each f32 output is
// `cast` back to that 16-bit dtype (rounded once). Nodes without 16-bit inputs are converted
// by `lower` unchanged. ThroughF32<F> is the ConvertFn of a table entry.
Status LowerThroughF32(NodeContext& ctx, ConvertFn lower);
template <ConvertFn F>
Status ThroughF32(NodeContext& ctx) {
  return LowerThroughF32(ctx, F);
}

struct OpConverter {
  std::string_view op_type;
  ConvertFn convert;
};

// One table per op family (ops_*.cc).
const std::vector<OpConverter>& ElementwiseConverters();
const std::vector<OpConverter>& NnConverters();
const std::vector<OpConverter>& TensorConverters();
const std::vector<OpConverter>& ResizeConverters();
const std::vector<OpConverter>& LossConverters();
const std::vector<OpConverter>& ScatterConverters();
const std::vector<OpConverter>& RecurrentConverters();
const std::vector<OpConverter>& QuantConverters();
const std::vector<OpConverter>& SampleConverters();
const std::vector<OpConverter>& LinalgConverters();
const std::vector<OpConverter>& EinsumConverters();
const std::vector<OpConverter>& DataShapeConverters();  // ops_data_shape.cc: folded at import

// Every converter by ONNX op type (the families merged).
const std::map<std::string, ConvertFn>& ConverterTable();

// The newest opset of the default domain the importer reads. Every op whose definition changed
// up to it is handled or refuses the new attribute or value by name (docs/ONNX.md).
inline constexpr int64_t kMaxOpset = 21;

// The phrase every "this input must be known at import" error carries (NeedsValueAtImport).
inline constexpr std::string_view kComputedAtRunTime = "computed at run time";

// ops_nn.cc: folds `op` ("mul" or "add") of input `conv_input` (a conv2d output) and
// input 1 - conv_input (a constant per output channel) into the conv's weights and bias
// (docs/DETERMINISM.md 6.1). nullopt when the pattern does not apply.
StatusOr<std::optional<ValueId>> FoldScaleOrShiftIntoConv(NodeContext& ctx, std::string_view op, int conv_input);

// ops_nn.cc: a Conv / pooling window, defaults filled and auto_pad resolved against the
// static input shape x [N, C, spatial...] (ConvInteger and QLinearConv share it).
struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;  // ONNX order: begin of every spatial dim, then end of every spatial dim
};
StatusOr<Window> ReadWindow(const NodeContext& ctx, const Shape& x, const std::vector<int64_t>& kernel);

// Helpers shared by converters.
// ONNX element type -> DType; other types are UNIMPLEMENTED ("unsupported dtype ...").
StatusOr<DType> DTypeFromOnnx(int32_t onnx_type, std::string_view what);
// Normalizes an axis against `rank` (negative counts from the end), or fails naming it.
StatusOr<int64_t> NormalizeAxis(const NodeContext& ctx, int64_t axis, int64_t rank, std::string_view what);
// A constant i64 tensor of shape [n].
Tensor Int64Vector(const std::vector<int64_t>& values);
// Sets output 0 to `v`, or returns its error.
Status SetResult(NodeContext& ctx, StatusOr<ValueId> v);
// Consensor's f32-only ops refuse other dtypes as UNIMPLEMENTED "unsupported dtype ...".
Status RequireF32(const NodeContext& ctx, ValueId v, std::string_view role);
// The same for ops that compute in f32, f64 (DETERMINISM.md 1.2), f16 or bf16 (1.3, 1.4).
Status RequireFloat(const NodeContext& ctx, ValueId v, std::string_view role);
// For f32 ops that also take f16/bf16 through the f32 rule but have no f64 kernel.
Status RequireF32OrHalf(const NodeContext& ctx, ValueId v, std::string_view role);
// A `reshape` unless the shape is already right (keeps the graph small; same value).
StatusOr<ValueId> ReshapeTo(NodeContext& ctx, ValueId v, const Shape& shape);
// Reads an integer tensor (i32/i64) as int64 values.
StatusOr<std::vector<int64_t>> TensorToInts(const Tensor& t);
StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& proto, const Limits& limits);

}  // namespace consensor::executor::onnx_import
