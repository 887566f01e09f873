#include "executor/onnx/import.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "executor/onnx/context.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "executor/validate.h"
#include "kernels/backend_factory.h"
#include "kernels/half.h"
#include "onnx/onnx_pb.h"

namespace consensor::executor {

namespace onnx_import {

namespace {

const char* OnnxTypeName(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "FLOAT";
    case onnx::TensorProto::UINT8: return "UINT8";
    case onnx::TensorProto::INT8: return "INT8";
    case onnx::TensorProto::UINT16: return "UINT16";
    case onnx::TensorProto::INT16: return "INT16";
    case onnx::TensorProto::INT32: return "INT32";
    case onnx::TensorProto::INT64: return "INT64";
    case onnx::TensorProto::STRING: return "STRING";
    case onnx::TensorProto::BOOL: return "BOOL";
    case onnx::TensorProto::FLOAT16: return "FLOAT16";
    case onnx::TensorProto::DOUBLE: return "DOUBLE";
    case onnx::TensorProto::UINT32: return "UINT32";
    case onnx::TensorProto::UINT64: return "UINT64";
    case onnx::TensorProto::COMPLEX64: return "COMPLEX64";
    case onnx::TensorProto::COMPLEX128: return "COMPLEX128";
    case onnx::TensorProto::BFLOAT16: return "BFLOAT16";
    default: return "UNDEFINED";
  }
}

// Every name a node reads, including those its subgraphs (If, Loop, Scan) read from the
// enclosing graph.
void CollectReads(const onnx::NodeProto& node, std::vector<const std::string*>& reads) {
  for (const auto& in : node.input()) {
    if (!in.empty()) reads.push_back(&in);
  }
  for (const auto& attr : node.attribute()) {
    if (attr.has_g()) {
      for (const auto& inner : attr.g().node()) CollectReads(inner, reads);
    }
    for (const auto& sub : attr.graphs()) {
      for (const auto& inner : sub.node()) CollectReads(inner, reads);
    }
  }
}

// ONNX requires a graph's nodes in topological order, but ONNX Runtime runs graphs that are not
// (onnxconverter-common's float16 conversion appends the Casts it inserts after the nodes that
// read them). The nodes are imported in the stable topological order: at each step the first
// node in file order whose inputs are all defined. A sorted graph keeps its order, hence its
// graph id. Reads of `defined` names (inputs, initializers) add no dependency, and the first
// node that writes a name is its producer. Nodes that never become ready (a cycle, a name that
// nothing defines) follow in file order, and importing them reports the name.
std::vector<int> ImportOrder(const onnx::GraphProto& g, const std::unordered_map<std::string, ValueId>& defined) {
  const int n = g.node_size();
  std::unordered_map<std::string_view, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const auto& out : g.node(i).output()) {
      if (!out.empty() && !defined.count(out)) producer.emplace(out, i);
    }
  }
  std::vector<std::vector<int>> dependents(static_cast<size_t>(n));
  std::vector<int> unmet(static_cast<size_t>(n), 0);
  std::vector<const std::string*> reads;
  std::unordered_set<int> deps;
  for (int i = 0; i < n; ++i) {
    reads.clear();
    deps.clear();
    CollectReads(g.node(i), reads);
    for (const std::string* name : reads) {
      if (defined.count(*name)) continue;
      auto it = producer.find(*name);
      if (it != producer.end() && it->second != i) deps.insert(it->second);
    }
    unmet[i] = static_cast<int>(deps.size());
    for (int d : deps) dependents[d].push_back(i);
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (unmet[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  std::vector<bool> placed(static_cast<size_t>(n), false);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    placed[i] = true;
    for (int j : dependents[i]) {
      if (--unmet[j] == 0) ready.push(j);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!placed[i]) order.push_back(i);
  }
  return order;
}
}  // namespace

// ONNX element type -> DType; anything else is UNIMPLEMENTED ("unsupported dtype ...").
StatusOr<DType> DTypeFromOnnx(int32_t t, std::string_view what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::kF32;
    case onnx::TensorProto::INT32: return DType::kI32;
    case onnx::TensorProto::INT8: return DType::kI8;
    case onnx::TensorProto::BOOL: return DType::kBool;
    case onnx::TensorProto::INT64: return DType::kI64;
    case onnx::TensorProto::UINT8: return DType::kU8;
    case onnx::TensorProto::INT16: return DType::kI16;
    case onnx::TensorProto::UINT16: return DType::kU16;
    case onnx::TensorProto::UINT32: return DType::kU32;
    case onnx::TensorProto::UINT64: return DType::kU64;
    case onnx::TensorProto::DOUBLE: return DType::kF64;
    case onnx::TensorProto::FLOAT16: return DType::kF16;
    case onnx::TensorProto::BFLOAT16: return DType::kBF16;
    default:
      return Unimplemented("unsupported dtype " + std::string(OnnxTypeName(t)) + " for " + std::string(what) +
                           " (Consensor computes in FLOAT, INT32, INT8, BOOL, INT64, UINT8, INT16, UINT16, UINT32, "
                           "UINT64, DOUBLE, FLOAT16 and BFLOAT16)");
  }
}

StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& p, const Limits& limits) {
  const std::string what = "tensor '" + p.name() + "'";
  ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(p.data_type(), what));
  if (p.dims_size() > kMaxRank)
    return Unimplemented(what + " has rank " + std::to_string(p.dims_size()) + " (at most 8)");
  Shape shape;
  for (int64_t d : p.dims()) {
    if (d < 0) return InvalidArgument(what + " has a negative dimension");
    // Also when another dim is 0: an empty tensor with a dim of 10^18 would carry the overflow
    // into every later product of its dims.
    if (d > limits.max_elements_per_tensor) {
      return ResourceExhausted(what + " has a dimension of " + std::to_string(d) + ", over the cap of " +
                               std::to_string(limits.max_elements_per_tensor) + " elements per tensor");
    }
    shape.push_back(d);
  }
  ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  if (n > limits.max_elements_per_tensor) {
    return ResourceExhausted(what + " has " + std::to_string(n) + " elements, over the cap of " +
                             std::to_string(limits.max_elements_per_tensor));
  }
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0) {
    return Unimplemented(what +
                         " keeps its data in an external file; re-export the model with the weights inside "
                         "it (models under 2 GB)");
  }
  if (p.has_segment()) return Unimplemented(what + " is segmented");
  const int64_t size = DTypeSize(dtype);
  Tensor t(dtype, shape);
  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != n * size) {
      return InvalidArgument(what + " has " + std::to_string(p.raw_data().size()) + " bytes of data, expected " +
                             std::to_string(n * size));
    }
    if (n > 0) std::memcpy(t.data(), p.raw_data().data(), static_cast<size_t>(n * size));
  } else {
    auto count_error = [&](int64_t got) {
      return InvalidArgument(what + " has " + std::to_string(got) + " values, expected " + std::to_string(n));
    };
    switch (dtype) {
      case DType::kF32:
        if (p.float_data_size() != n) return count_error(p.float_data_size());
        for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = p.float_data(static_cast<int>(i));
        break;
      case DType::kI64:
        if (p.int64_data_size() != n) return count_error(p.int64_data_size());
        for (int64_t i = 0; i < n; ++i) t.data_as<int64_t>()[i] = p.int64_data(static_cast<int>(i));
        break;
      case DType::kI32:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = p.int32_data(static_cast<int>(i));
        break;
      case DType::kI8:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i) t.data_as<int8_t>()[i] = static_cast<int8_t>(p.int32_data(static_cast<int>(i)));
        break;
      case DType::kBool:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i) t.data()[i] = p.int32_data(static_cast<int>(i)) != 0 ? 1 : 0;
        break;
      // ONNX keeps 8- and 16-bit values in int32_data and UINT32/UINT64 in uint64_data; the
      // low bits are the value.
      case DType::kU8:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i) t.data()[i] = static_cast<uint8_t>(p.int32_data(static_cast<int>(i)));
        break;
      case DType::kI16:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i)
          t.data_as<int16_t>()[i] = static_cast<int16_t>(p.int32_data(static_cast<int>(i)));
        break;
      case DType::kU16:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i) {
          t.data_as<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)));
        }
        break;
      case DType::kU32:
        if (p.uint64_data_size() != n) return count_error(p.uint64_data_size());
        for (int64_t i = 0; i < n; ++i) {
          t.data_as<uint32_t>()[i] = static_cast<uint32_t>(p.uint64_data(static_cast<int>(i)));
        }
        break;
      case DType::kU64:
        if (p.uint64_data_size() != n) return count_error(p.uint64_data_size());
        for (int64_t i = 0; i < n; ++i) t.data_as<uint64_t>()[i] = p.uint64_data(static_cast<int>(i));
        break;
      case DType::kF64:
        if (p.double_data_size() != n) return count_error(p.double_data_size());
        for (int64_t i = 0; i < n; ++i) t.data_as<double>()[i] = p.double_data(static_cast<int>(i));
        break;
      // FLOAT16 and BFLOAT16 keep each element's 16 bits in one int32_data entry.
      case DType::kF16:
      case DType::kBF16:
        if (p.int32_data_size() != n) return count_error(p.int32_data_size());
        for (int64_t i = 0; i < n; ++i) {
          const int32_t bits = p.int32_data(static_cast<int>(i));
          if (bits < 0 || bits > 0xFFFF) {
            return InvalidArgument(what + " has int32_data value " + std::to_string(bits) + " at " + std::to_string(i) +
                                   ", which is not the 16 bits of a " + std::string(OnnxTypeName(p.data_type())));
          }
          t.data_as<uint16_t>()[i] = static_cast<uint16_t>(bits);
        }
        break;
      default: return Internal("unhandled dtype");
    }
  }
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) {
      if (t.data()[i] > 1) return InvalidArgument(what + " has a bool byte other than 0 or 1");
    }
  }
  return t;
}

const std::map<std::string, ConvertFn>& ConverterTable() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, ConvertFn>;
    for (const auto* family : {&ElementwiseConverters(), &NnConverters(), &TensorConverters(), &ResizeConverters(),
                               &LossConverters(), &ScatterConverters(), &RecurrentConverters(), &QuantConverters(),
                               &SampleConverters(), &LinalgConverters(), &EinsumConverters(), &DataShapeConverters()}) {
      for (const OpConverter& c : *family) t->emplace(std::string(c.op_type), c.convert);
    }
    return t;
  }();
  return *table;
}

Tensor Int64Vector(const std::vector<int64_t>& values) {
  return Tensor::FromVector<int64_t>(DType::kI64, {static_cast<int64_t>(values.size())}, values);
}

StatusOr<std::vector<int64_t>> TensorToInts(const Tensor& t) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (t.dtype()) {
      case DType::kI64: out.push_back(t.data_as<int64_t>()[i]); break;
      case DType::kI32: out.push_back(t.data_as<int32_t>()[i]); break;
      case DType::kI8: out.push_back(t.data_as<int8_t>()[i]); break;
      case DType::kU8: out.push_back(t.data()[i]); break;
      case DType::kI16: out.push_back(t.data_as<int16_t>()[i]); break;
      case DType::kU16: out.push_back(t.data_as<uint16_t>()[i]); break;
      case DType::kU32: out.push_back(t.data_as<uint32_t>()[i]); break;
      case DType::kU64: {
        const uint64_t v = t.data_as<uint64_t>()[i];
        if (v > static_cast<uint64_t>(INT64_MAX)) return InvalidArgument("u64 value too large for an index or size");
        out.push_back(static_cast<int64_t>(v));
        break;
      }
      default: return InvalidArgument("expected an integer tensor, got " + std::string(DTypeName(t.dtype())));
    }
  }
  return out;
}

Status SetResult(NodeContext& ctx, StatusOr<ValueId> v) {
  if (!v.ok()) return v.status();
  ctx.SetOutput(0, *v);
  return OkStatus();
}

Status RequireF32(const NodeContext& ctx, ValueId v, std::string_view role) {
  const DType d = ctx.type(v).dtype;
  if (d != DType::kF32) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(d)) + " for " + std::string(role) + " (needs f32)");
  }
  return OkStatus();
}

Status RequireFloat(const NodeContext& ctx, ValueId v, std::string_view role) {
  const DType d = ctx.type(v).dtype;
  if (!IsFloatDType(d) && !IsHalfDType(d)) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(d)) + " for " + std::string(role) +
                           " (needs f32, f64, f16 or bf16)");
  }
  return OkStatus();
}

Status RequireF32OrHalf(const NodeContext& ctx, ValueId v, std::string_view role) {
  const DType d = ctx.type(v).dtype;
  if (d != DType::kF32 && !IsHalfDType(d)) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(d)) + " for " + std::string(role) +
                           " (needs f32, f16 or bf16)");
  }
  return OkStatus();
}

Status LowerThroughF32(NodeContext& ctx, ConvertFn lower) {
  DType half = DType::kInvalid;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || !IsHalfDType(ctx.input_type(i).dtype)) continue;
    if (half != DType::kInvalid && half != ctx.input_type(i).dtype) return ctx.Invalid("inputs mix f16 and bf16");
    half = ctx.input_type(i).dtype;
  }
  if (half == DType::kInvalid) return lower(ctx);
  std::vector<ValueId> wide(static_cast<size_t>(ctx.num_inputs()), -1);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    wide[static_cast<size_t>(i)] = ctx.input(i);
    if (IsHalfDType(ctx.input_type(i).dtype)) {
      ASSIGN_OR_RETURN(wide[static_cast<size_t>(i)], ctx.Emit("cast", {ctx.input(i)}, {{"to", DType::kF32}}));
    }
  }
  NodeContext inner = ctx.WithInputs(std::move(wide));
  RETURN_IF_ERROR(lower(inner));
  for (size_t i = 0; i < inner.outputs().size(); ++i) {
    if (!inner.outputs()[i]) continue;
    ValueId y = *inner.outputs()[i];
    if (ctx.type(y).dtype == DType::kF32) {
      ASSIGN_OR_RETURN(y, ctx.Emit("cast", {y}, {{"to", half}}));
    }
    ctx.SetOutput(static_cast<int>(i), y);
  }
  return OkStatus();
}

StatusOr<ValueId> ReshapeTo(NodeContext& ctx, ValueId v, const Shape& shape) {
  if (ctx.type(v).shape == shape) return v;
  return ctx.Emit("reshape", {v}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

StatusOr<int64_t> NormalizeAxis(const NodeContext& ctx, int64_t axis, int64_t rank, std::string_view what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) {
    return ctx.Invalid(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(rank));
  }
  return a;
}

// The driver: owns the value table and the graph under construction.
class Importer {
 public:
  explicit Importer(const OnnxImportOptions& options) : options_(options) {}

  Status Run(const onnx::ModelProto& model, OnnxImport* out);

  struct Entry {
    TypeInfo type;
    std::optional<Tensor> constant;
    int graph_value = -1;
    std::string name_hint;
    std::optional<EmittedOp> emitted;  // node outputs: how they were computed
    int node = -1;                     // node outputs: index in graph_.nodes()
  };

  ValueId AddConstant(Tensor t, std::string name_hint = "") {
    Entry e;
    e.type.dtype = t.dtype();
    e.type.shape = t.shape();
    e.constant = std::move(t);
    e.name_hint = std::move(name_hint);
    values_.push_back(std::move(e));
    return static_cast<ValueId>(values_.size()) - 1;
  }
  const TypeInfo& type(ValueId v) const { return values_[v].type; }
  const Tensor* constant(ValueId v) const { return values_[v].constant ? &*values_[v].constant : nullptr; }
  bool IsConsumed(const std::string& onnx_name) const { return consumers_.count(onnx_name) > 0; }
  const EmittedOp* producer(ValueId v) const { return values_[v].emitted ? &*values_[v].emitted : nullptr; }
  // Readers of v so far and to come: the consumer counts of every ONNX name bound to v.
  int Readers(ValueId v) const {
    int n = 0;
    for (const auto& [name, id] : by_name_) {
      if (id != v) continue;
      auto it = consumers_.find(name);
      if (it != consumers_.end()) n += it->second;
    }
    return n;
  }
  void Supersede(ValueId v) {
    if (values_[v].node >= 0) superseded_.insert(values_[v].node);
  }
  const Limits& limits() const { return options_.limits; }

  StatusOr<ValueId> Emit(const NodeContext& ctx, std::string_view op, std::vector<ValueId> inputs, Attributes attrs);

 private:
  int Materialize(ValueId v);
  std::string UniqueName(const std::string& base);
  StatusOr<Tensor> Evaluate(std::string_view op, const std::vector<ValueId>& inputs, const Attributes& attrs);
  Status ImportNode(const onnx::NodeProto& node, int index);
  Status ImportIf(const onnx::NodeProto& node, const std::string& label);
  StatusOr<std::vector<ValueId>> InlineBranch(const onnx::NodeProto& node, const std::string& where, bool then_branch);
  Status ImportIfAtRunTime(const onnx::NodeProto& node, const std::string& where, ValueId cond);
  Status ImportLoop(const onnx::NodeProto& node, const std::string& label);
  Status ImportScan(const onnx::NodeProto& node, const std::string& label);
  StatusOr<ValueId> ResolveInput(const onnx::NodeProto& node, int i, const std::string& where);
  // A Loop or Scan body with its initializers read once, instantiated per iteration.
  struct Body {
    const onnx::GraphProto* graph = nullptr;
    std::vector<std::pair<std::string, ValueId>> initializers;
  };
  StatusOr<Body> ReadBody(const onnx::NodeProto& node, const std::string& where, int inputs, int outputs);
  StatusOr<std::vector<ValueId>> InlineIteration(const Body& body, const std::vector<ValueId>& inputs,
                                                 const std::string& where, int64_t iteration);
  StatusOr<ValueId> StackIterations(NodeContext& ctx, const std::vector<ValueId>& parts, int64_t axis, bool reversed);
  void CountConsumers(const onnx::GraphProto& g, int weight);
  Status ExternalizeWeights(OnnxImport* out);
  void DropSuperseded();

  const OnnxImportOptions& options_;
  // A deque, so references handed to converters (ctx.type(v), ctx.constant(v)) stay valid
  // while they emit more values.
  std::deque<Entry> values_;
  std::unordered_map<std::string, ValueId> by_name_;
  std::unordered_map<std::string, int> consumers_;
  std::set<std::string> used_names_;
  // Per base name, the last suffix UniqueName handed out: every smaller one is taken, so the
  // search resumes there instead of rescanning (an unrolled RNN emits thousands of ops per node).
  std::map<std::string, int> last_suffix_;
  Graph graph_;
  int64_t opset_ = 0;
  int64_t folded_ = 0;
  // Nodes of the main graph plus those of inlined If branches, against limits().max_ops.
  int64_t nodes_seen_ = 0;
  int if_depth_ = 0;  // If branches and Loop/Scan bodies being inlined, one inside the other
  std::unique_ptr<kernels::Backend> cpu_;
  std::set<int> superseded_;  // graph node indices replaced by import-time rewrites
};

std::string Importer::UniqueName(const std::string& base) {
  std::string name = base.empty() ? "v" : base;
  if (used_names_.insert(name).second) return name;
  int& last = last_suffix_[name];
  for (int i = last + 1;; ++i) {
    std::string candidate = name + "_" + std::to_string(i);
    if (used_names_.insert(candidate).second) {
      last = i;
      return candidate;
    }
  }
}

int Importer::Materialize(ValueId v) {
  Entry& e = values_[v];
  if (e.graph_value >= 0) return e.graph_value;
  // Only constants lack a graph value.
  Value gv = graph_.constant(*e.constant, UniqueName(e.name_hint.empty() ? "const" : e.name_hint));
  e.graph_value = gv.index();
  return e.graph_value;
}

StatusOr<Tensor> Importer::Evaluate(std::string_view op, const std::vector<ValueId>& inputs, const Attributes& attrs) {
  if (!cpu_) {
    kernels::BackendOptions bo;
    bo.name = "cpu";
    bo.threads = 1;
    ASSIGN_OR_RETURN(cpu_, kernels::CreateBackend(bo));
  }
  // The operands enter as placeholders, so that an op compiled to one kernel call runs on the
  // importer's own tensors in place: the same kernel, the same bits, without copying each
  // operand into the graph, the program and an arena and the result back out (those copies
  // were most of the import of a model with tens of MB of quantized weights).
  {
    Graph g;
    std::vector<Value> in;
    std::map<std::string, const Tensor*> operand_named;  // placeholder name -> the importer's tensor
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = *values_[inputs[i]].constant;
      const std::string name = "operand" + std::to_string(i);
      in.push_back(g.input(name, t.dtype(), t.shape()));
      operand_named[name] = &t;
    }
    g.output("y", g.node(std::string(op), in, attrs));
    auto program = CompileGraph(g, nullptr, options_.limits);
    if (program.ok() && program->instructions.size() == 1 && program->outputs.size() == 1) {
      const Instruction& ins = program->instructions[0];
      std::map<int, const Tensor*> operand_of_buffer;
      for (const auto& [name, buffer] : program->inputs) {
        if (auto it = operand_named.find(name); it != operand_named.end()) operand_of_buffer[buffer] = it->second;
      }
      const Buffer& result = program->buffers[program->outputs[0].second];
      bool in_place = ins.output == program->outputs[0].second && ins.epilogue.empty();
      for (int buffer : ins.inputs) in_place = in_place && operand_of_buffer.count(buffer) != 0;
      if (in_place) {
        auto view = [](const Tensor& t, const Shape& shape) {
          kernels::TensorView v;
          v.dtype = t.dtype();
          v.rank = static_cast<int>(shape.size());
          for (int i = 0; i < v.rank; ++i) v.dims[i] = shape[i];
          v.data = const_cast<uint8_t*>(t.data());  // read only: the output is a tensor of its own
          return v;
        };
        std::vector<kernels::TensorView> views;
        for (size_t k = 0; k < ins.inputs.size(); ++k) {
          views.push_back(view(*operand_of_buffer[ins.inputs[k]], ins.input_view_shapes[k]));
        }
        Tensor out(result.dtype, result.shape);
        kernels::TensorView out_view = view(out, ins.output_view_shape);
        kernels::KernelCall call{ins.op, &ins.params, views.data(), static_cast<int>(views.size()), &out_view, 1};
        RETURN_IF_ERROR(cpu_->Run(call).WithContext(ins.node_label));
        return out;
      }
    }
  }
  Graph g;
  std::vector<Value> in;
  for (ValueId v : inputs) in.push_back(g.constant(*values_[v].constant));
  g.output("y", g.node(std::string(op), in, attrs));
  ASSIGN_OR_RETURN(Program program, CompileGraph(g, nullptr, options_.limits));
  ASSIGN_OR_RETURN(auto loaded, LoadedProgram::Load(program, cpu_.get()));
  ASSIGN_OR_RETURN(RunResult r, loaded->Run({}));
  return std::move(r.outputs[0].tensor);
}

StatusOr<ValueId> Importer::Emit(const NodeContext& ctx, std::string_view op, std::vector<ValueId> inputs,
                                 Attributes attrs) {
  const OpSchema* schema = FindOpSchema(op);
  if (!schema) return Internal(ctx.Where() + ": lowering uses unknown op '" + std::string(op) + "'");
  std::vector<TypeInfo> types;
  bool all_constant = true;
  for (ValueId v : inputs) {
    if (v < 0 || v >= static_cast<ValueId>(values_.size())) return Internal(ctx.Where() + ": bad value in lowering");
    types.push_back(values_[v].type);
    all_constant = all_constant && values_[v].constant.has_value();
  }
  const int n = static_cast<int>(inputs.size());
  if (n < schema->min_inputs || (schema->max_inputs >= 0 && n > schema->max_inputs)) {
    return Internal(ctx.Where() + ": lowering gives " + std::string(op) + " " + std::to_string(n) + " inputs");
  }
  auto inferred = schema->infer(types, attrs);
  if (!inferred.ok()) {
    // An f64 value reaching an op without f64 kernels (DETERMINISM.md 1.2), or an f16/bf16
    // value meeting a lowering's f32 constant, is a dtype Consensor does not support there,
    // not a broken model.
    const std::string_view msg = inferred.status().message();
    for (DType unusual : {DType::kF64, DType::kF16, DType::kBF16}) {
      const bool has_input =
          std::any_of(types.begin(), types.end(), [&](const TypeInfo& t) { return t.dtype == unusual; });
      const std::string name(DTypeName(unusual));
      if (has_input && (msg.find("has dtype " + name) != std::string_view::npos ||
                        msg.find("dtypes differ") != std::string_view::npos)) {
        return ctx.Unsupported("dtype " + name + " in " + std::string(op) + " (" + std::string(msg) + ")");
      }
    }
    return inferred.status().WithContext(ctx.Where() + " (as " + std::string(op) + ")");
  }
  ASSIGN_OR_RETURN(int64_t elements, CheckedNumElements(inferred->output.shape));
  if (elements > options_.limits.max_elements_per_tensor) {
    return ResourceExhausted(ctx.Where() + ": a tensor of " + std::to_string(elements) +
                             " elements is over the cap of " + std::to_string(options_.limits.max_elements_per_tensor));
  }
  if (all_constant) {
    auto value = Evaluate(op, inputs, attrs);
    if (!value.ok()) return value.status().WithContext(ctx.Where() + " (evaluated at import)");
    return AddConstant(std::move(value).value());
  }
  Entry e;
  e.emitted = EmittedOp{std::string(op), inputs, attrs};
  NodeDef node;
  node.op = std::string(op);
  node.attrs = std::move(attrs);
  node.name = ctx.node_name();
  for (ValueId v : inputs) node.inputs.push_back(Materialize(v));
  ValueDef out;
  out.kind = ValueKind::kNodeOutput;
  out.name = UniqueName(ctx.node_name().empty() ? "v" : ctx.node_name());
  node.output = graph_.AddValue(std::move(out));
  e.node = graph_.AddNode(std::move(node));
  e.type = inferred->output;
  e.graph_value = graph_.nodes().back().output;
  values_.push_back(std::move(e));
  return static_cast<ValueId>(values_.size()) - 1;
}

Status Importer::ImportNode(const onnx::NodeProto& node, int index) {
  const std::string label = node.name().empty() ? "#" + std::to_string(index) : node.name();
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return Unimplemented("unsupported op " + node.domain() + "." + node.op_type() + " in node '" + label +
                         "' (only the default ONNX domain is supported)");
  }
  if (node.op_type() == "If") return ImportIf(node, label);
  if (node.op_type() == "Loop") return ImportLoop(node, label);
  if (node.op_type() == "Scan") return ImportScan(node, label);
  const auto& converters = ConverterTable();
  auto it = converters.find(node.op_type());
  if (it == converters.end()) {
    return Unimplemented("unsupported op " + node.op_type() + " in node '" + label +
                         "' (docs/ONNX.md lists the supported ops)");
  }
  std::vector<ValueId> inputs;
  for (const std::string& name : node.input()) {
    if (name.empty()) {
      inputs.push_back(-1);
      continue;
    }
    auto v = by_name_.find(name);
    if (v == by_name_.end()) {
      return InvalidArgument("node '" + label + "' (" + node.op_type() + ") reads '" + name +
                             "', which no earlier node, input or initializer defines");
    }
    inputs.push_back(v->second);
  }
  NodeContext ctx(*this, node, std::move(inputs), opset_);
  RETURN_IF_ERROR(it->second(ctx));
  bool all_constant = true;
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& name = node.output(i);
    if (name.empty()) continue;
    const auto& produced = ctx.outputs()[i];
    if (!produced) {
      if (ctx.wants_output(i)) return ctx.Unsupported("output " + std::to_string(i) + " ('" + name + "')");
      continue;
    }
    all_constant = all_constant && values_[*produced].constant.has_value();
    if (values_[*produced].name_hint.empty()) values_[*produced].name_hint = name;
    by_name_[name] = *produced;
  }
  if (all_constant) ++folded_;
  return OkStatus();
}

// An If whose condition is known at import is replaced by the branch it takes: the branch's
// initializers and nodes are imported in place (they may read any value of the enclosing
// scopes) and the If's outputs become the branch's outputs. Nothing of the other branch is
// imported, so the graph is what ONNX Runtime computes. With a condition computed at run time
// both branches are imported and each output is `where(cond, then, else)`
// (docs/DETERMINISM.md 6.1), when the branches' outputs agree in dtype and shape and no branch
// can fail the task; otherwise the If is refused.
Status Importer::ImportIf(const onnx::NodeProto& node, const std::string& label) {
  const std::string where = "node '" + label + "' (If)";
  if (node.input_size() != 1 || node.input(0).empty())
    return InvalidArgument(where + " takes one input, the condition");
  auto cond_id = by_name_.find(node.input(0));
  if (cond_id == by_name_.end()) {
    return InvalidArgument(where + " reads '" + node.input(0) +
                           "', which no earlier node, input or initializer defines");
  }
  const ValueId cond_value = cond_id->second;
  const TypeInfo cond_type = type(cond_value);
  ASSIGN_OR_RETURN(int64_t cond_elements, CheckedNumElements(cond_type.shape));
  if (cond_elements != 1) return InvalidArgument(where + ": the condition must have one element");
  if (cond_type.dtype != DType::kBool) {
    return InvalidArgument(where + ": the condition must be a bool, not " + std::string(DTypeName(cond_type.dtype)));
  }
  const Tensor* cond = constant(cond_value);
  if (!cond) return ImportIfAtRunTime(node, where, cond_value);
  const bool take_then = cond->data_as<uint8_t>()[0] != 0;
  ASSIGN_OR_RETURN(std::vector<ValueId> outputs, InlineBranch(node, where, take_then));
  for (int i = 0; i < node.output_size(); ++i) {
    if (!node.output(i).empty()) by_name_[node.output(i)] = outputs[i];
  }
  ++folded_;
  return OkStatus();
}

StatusOr<std::vector<ValueId>> Importer::InlineBranch(const onnx::NodeProto& node, const std::string& where,
                                                      bool then_branch) {
  constexpr int kMaxIfDepth = 16;  // published models nest two or three deep
  const std::string name = then_branch ? "then_branch" : "else_branch";
  const onnx::GraphProto* branch = nullptr;
  for (const auto& attr : node.attribute()) {
    if (attr.name() == name && attr.has_g()) branch = &attr.g();
  }
  if (!branch) return InvalidArgument(where + " has no " + name + " graph");
  if (branch->output_size() != node.output_size()) {
    return InvalidArgument(where + ": the branch has " + std::to_string(branch->output_size()) + " outputs, the If " +
                           std::to_string(node.output_size()));
  }
  if (branch->sparse_initializer_size() > 0) return Unimplemented("unsupported sparse initializers in " + where);
  if (if_depth_ >= kMaxIfDepth) {
    return Unimplemented(where + ": If branches nested over " + std::to_string(kMaxIfDepth) + " deep");
  }
  nodes_seen_ += branch->node_size();
  if (nodes_seen_ > options_.limits.max_ops) {
    return ResourceExhausted("the model has over " + std::to_string(options_.limits.max_ops) +
                             " nodes with its If branches inlined");
  }
  for (const auto& init : branch->initializer()) {
    auto t = TensorFromOnnx(init, options_.limits);
    if (!t.ok()) return t.status().WithContext("initializer of " + where);
    by_name_[init.name()] = AddConstant(std::move(t).value(), init.name());
  }
  ++if_depth_;
  for (int i = 0; i < branch->node_size(); ++i) {
    Status s = ImportNode(branch->node(i), i);
    if (!s.ok()) {
      --if_depth_;
      return s.WithContext(std::string(then_branch ? "then" : "else") + " branch of " + where);
    }
  }
  --if_depth_;
  std::vector<ValueId> outputs(static_cast<size_t>(node.output_size()), -1);
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    auto produced = by_name_.find(branch->output(i).name());
    if (produced == by_name_.end()) {
      return InvalidArgument(where + ": branch output '" + branch->output(i).name() + "' is not produced");
    }
    outputs[i] = produced->second;
  }
  return outputs;
}

Status Importer::ImportIfAtRunTime(const onnx::NodeProto& node, const std::string& where, ValueId cond) {
  const std::string refused = "unsupported op If in " + where + ": its condition is computed at run time and ";
  const std::string hint = " (`consensor run --bind NAME=FILE.npy` fixes an input at import)";
  // Each branch sees the enclosing scopes only, not the names the other branch defined.
  const auto scope = by_name_;
  const size_t first_value = values_.size();
  ASSIGN_OR_RETURN(std::vector<ValueId> then_out, InlineBranch(node, where, true));
  by_name_ = scope;
  ASSIGN_OR_RETURN(std::vector<ValueId> else_out, InlineBranch(node, where, false));
  by_name_ = scope;
  // Both branches always run. Every section-4 op is pure and total except a gather at run-time
  // indices, which fails the task when an index is out of range (4.6): in the branch not
  // taken, that would fail a task ONNX runs fine.
  for (size_t v = first_value; v < values_.size(); ++v) {
    const auto& e = values_[v].emitted;
    if (e && e->op == "gather" && e->inputs.size() > 1 && !values_[e->inputs[1]].constant) {
      return Unimplemented(refused +
                           "a branch gathers at run-time indices, which could fail the task on the path "
                           "not taken" +
                           hint);
    }
  }
  NodeContext ctx(*this, node, {cond}, opset_);
  ASSIGN_OR_RETURN(ValueId scalar_cond, ReshapeTo(ctx, cond, {}));
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const TypeInfo& a = type(then_out[i]);
    const TypeInfo& b = type(else_out[i]);
    if (a.dtype != b.dtype || a.shape != b.shape) {
      return Unimplemented(refused + "its output " + std::to_string(i) + " is " + std::string(DTypeName(a.dtype)) +
                           ShapeToString(a.shape) + " in the then branch but " + std::string(DTypeName(b.dtype)) +
                           ShapeToString(b.shape) +
                           " in the else branch (both branches run and `where` selects, "
                           "which needs them equal)" +
                           hint);
    }
    ValueId selected = then_out[i];
    if (then_out[i] != else_out[i]) {
      ASSIGN_OR_RETURN(selected, ctx.Emit("where", {scalar_cond, then_out[i], else_out[i]}));
    }
    by_name_[node.output(i)] = selected;
  }
  return OkStatus();
}

// --- Loop and Scan, unrolled at import (docs/DETERMINISM.md 6.1b) ---
//
// The trip count must be known at import; each iteration's body is imported in place, in
// order, with its inputs bound to the previous iteration's values, as an If branch is. The
// unrolled graph is the graph: nothing is evaluated differently from the body run M times.

namespace {
constexpr int64_t kMaxUnrolledIterations = 256;
constexpr std::string_view kBindHint = " (`consensor run --bind NAME=FILE.npy` fixes an input at import)";
}  // namespace

StatusOr<ValueId> Importer::ResolveInput(const onnx::NodeProto& node, int i, const std::string& where) {
  auto it = by_name_.find(node.input(i));
  if (it == by_name_.end()) {
    return InvalidArgument(where + " reads '" + node.input(i) +
                           "', which no earlier node, input or initializer defines");
  }
  return it->second;
}

StatusOr<Importer::Body> Importer::ReadBody(const onnx::NodeProto& node, const std::string& where, int inputs,
                                            int outputs) {
  Body body;
  for (const auto& attr : node.attribute()) {
    if (attr.name() == "body" && attr.has_g()) body.graph = &attr.g();
  }
  if (!body.graph) return InvalidArgument(where + " has no body graph");
  const onnx::GraphProto& g = *body.graph;
  if (g.input_size() != inputs || g.output_size() != outputs) {
    return InvalidArgument(where + ": the body has " + std::to_string(g.input_size()) + " inputs and " +
                           std::to_string(g.output_size()) + " outputs, the node needs " + std::to_string(inputs) +
                           " and " + std::to_string(outputs));
  }
  for (const auto& value : g.input()) {
    if (value.has_type() && !value.type().has_tensor_type()) {
      return Unimplemented("unsupported non-tensor body input '" + value.name() + "' in " + where +
                           " (sequence, optional and map values are not supported)");
    }
  }
  for (const auto& value : g.output()) {
    if (value.has_type() && !value.type().has_tensor_type()) {
      return Unimplemented("unsupported non-tensor body output '" + value.name() + "' in " + where +
                           " (sequence, optional and map values are not supported)");
    }
  }
  if (g.sparse_initializer_size() > 0) return Unimplemented("unsupported sparse initializers in " + where);
  for (const auto& init : g.initializer()) {
    auto t = TensorFromOnnx(init, options_.limits);
    if (!t.ok()) return t.status().WithContext("initializer of " + where);
    body.initializers.emplace_back(init.name(), AddConstant(std::move(t).value(), init.name()));
  }
  return body;
}

StatusOr<std::vector<ValueId>> Importer::InlineIteration(const Body& body, const std::vector<ValueId>& inputs,
                                                         const std::string& where, int64_t iteration) {
  constexpr int kMaxDepth = 16;
  const onnx::GraphProto& g = *body.graph;
  if (if_depth_ >= kMaxDepth) {
    return Unimplemented(where + ": If branches and loop bodies nested over " + std::to_string(kMaxDepth) + " deep");
  }
  // An iteration counts as one node at least: nested loops of empty bodies must not spin
  // through 256^depth iterations for free.
  nodes_seen_ += std::max(g.node_size(), 1);
  if (nodes_seen_ > options_.limits.max_ops) {
    return ResourceExhausted(where + ": unrolled to iteration " + std::to_string(iteration) + ", the model has over " +
                             std::to_string(options_.limits.max_ops) + " nodes (the op cap, --max-ops)");
  }
  for (const auto& [name, value] : body.initializers) by_name_[name] = value;
  for (int i = 0; i < g.input_size(); ++i) {
    if (!g.input(i).name().empty()) by_name_[g.input(i).name()] = inputs[i];
  }
  ++if_depth_;
  for (int i = 0; i < g.node_size(); ++i) {
    Status s = ImportNode(g.node(i), i);
    if (!s.ok()) {
      --if_depth_;
      return s.WithContext("iteration " + std::to_string(iteration) + " of the body of " + where);
    }
  }
  --if_depth_;
  std::vector<ValueId> outputs;
  for (const auto& o : g.output()) {
    auto produced = by_name_.find(o.name());
    if (produced == by_name_.end()) {
      return InvalidArgument(where + ": body output '" + o.name() + "' is not produced");
    }
    outputs.push_back(produced->second);
  }
  return outputs;
}

// The per-iteration values of a scan output, each given a unit dim at `axis` and concatenated
// along it, last iteration first when `reversed`.
StatusOr<ValueId> Importer::StackIterations(NodeContext& ctx, const std::vector<ValueId>& parts, int64_t axis,
                                            bool reversed) {
  std::vector<ValueId> stacked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const ValueId part = parts[reversed ? parts.size() - 1 - i : i];
    Shape shape = type(part).shape;
    if (axis < 0 || axis > static_cast<int64_t>(shape.size())) {
      return ctx.Invalid("scan output axis " + std::to_string(axis) + " is out of range for a slice of rank " +
                         std::to_string(shape.size()));
    }
    shape.insert(shape.begin() + axis, 1);
    ASSIGN_OR_RETURN(ValueId unit, ReshapeTo(ctx, part, shape));
    stacked.push_back(unit);
  }
  if (stacked.size() == 1) return stacked[0];
  return ctx.Emit("concat", stacked, {{"axis", axis}});
}

// Loop: `for (i = 0; i < M && cond; ++i) { cond, v... , scan... = body(i, cond, v...) }`.
// M, the condition and every condition the body computes must be known at import.
Status Importer::ImportLoop(const onnx::NodeProto& node, const std::string& label) {
  const std::string where = "node '" + label + "' (Loop)";
  const std::string refused = "unsupported op Loop in " + where + ": ";
  if (node.input_size() < 2) return InvalidArgument(where + " needs the inputs M and cond (either may be empty)");
  const int carried = node.input_size() - 2;
  const int scans = node.output_size() - carried;
  if (scans < 0) {
    return InvalidArgument(where + " has " + std::to_string(node.output_size()) + " outputs for " +
                           std::to_string(carried) + " loop-carried values");
  }
  std::vector<ValueId> inputs(static_cast<size_t>(node.input_size()), -1);
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) {
      if (i >= 2) return InvalidArgument(where + ": loop-carried input " + std::to_string(i) + " is empty");
      continue;
    }
    ASSIGN_OR_RETURN(inputs[i], ResolveInput(node, i, where));
  }
  NodeContext ctx(*this, node, inputs, opset_);
  for (const auto& attr : node.attribute()) {
    if (attr.name() != "body") return ctx.Unsupported("attribute '" + attr.name() + "'");
  }
  std::optional<int64_t> trip_count;
  if (inputs[0] >= 0) {
    const Tensor* m = constant(inputs[0]);
    if (!m) {
      return Unimplemented(refused + "its trip count M is " + std::string(kComputedAtRunTime) +
                           " (Loop is unrolled at import and needs it known there)" + std::string(kBindHint));
    }
    if (m->num_elements() != 1 || m->dtype() != DType::kI64) {
      return InvalidArgument(where + ": the trip count M must be one i64 value");
    }
    trip_count = std::max<int64_t>(m->data_as<int64_t>()[0], 0);
  }
  bool running = true;
  if (inputs[1] >= 0) {
    const TypeInfo& t = type(inputs[1]);
    if (t.dtype != DType::kBool || !CheckedNumElements(t.shape).ok() || *CheckedNumElements(t.shape) != 1) {
      return InvalidArgument(where + ": the condition must be one bool value");
    }
    const Tensor* c = constant(inputs[1]);
    if (!c) {
      return Unimplemented(refused + "its condition is " + std::string(kComputedAtRunTime) +
                           " (Loop is unrolled at import and needs it known there)" + std::string(kBindHint));
    }
    running = c->data()[0] != 0;
  }
  if (!trip_count && inputs[1] < 0) {
    return Unimplemented(refused + "it has neither a trip count nor a condition, so it never ends");
  }
  if (trip_count && *trip_count > kMaxUnrolledIterations && inputs[1] < 0) {
    return Unimplemented(refused + "its trip count " + std::to_string(*trip_count) + " is over the unrolling cap of " +
                         std::to_string(kMaxUnrolledIterations) + " iterations");
  }
  ASSIGN_OR_RETURN(Body body, ReadBody(node, where, 2 + carried, 1 + carried + scans));

  const auto scope = by_name_;
  std::vector<ValueId> state(inputs.begin() + 2, inputs.end());
  std::vector<std::vector<ValueId>> scan_parts(static_cast<size_t>(scans));
  ValueId cond_value = inputs[1] >= 0 ? inputs[1] : AddConstant(Tensor::FromVector<uint8_t>(DType::kBool, {}, {1}));
  int64_t i = 0;
  for (; running && (!trip_count || i < *trip_count); ++i) {
    if (i >= kMaxUnrolledIterations) {
      by_name_ = scope;
      return Unimplemented(refused + "it runs over " + std::to_string(kMaxUnrolledIterations) +
                           " iterations, the unrolling cap");
    }
    std::vector<ValueId> body_inputs = {AddConstant(Tensor::FromVector<int64_t>(DType::kI64, {}, {i})), cond_value};
    body_inputs.insert(body_inputs.end(), state.begin(), state.end());
    auto outputs = InlineIteration(body, body_inputs, where, i);
    if (!outputs.ok()) {
      by_name_ = scope;
      return outputs.status();
    }
    std::copy(outputs->begin() + 1, outputs->begin() + 1 + carried, state.begin());
    for (int k = 0; k < scans; ++k) scan_parts[k].push_back((*outputs)[1 + carried + k]);
    // Without a condition input, the body's condition output is ignored (a plain for loop).
    if (inputs[1] >= 0) {
      cond_value = (*outputs)[0];
      const TypeInfo& t = type(cond_value);
      const Tensor* c = constant(cond_value);
      if (t.dtype != DType::kBool || !CheckedNumElements(t.shape).ok() || *CheckedNumElements(t.shape) != 1) {
        by_name_ = scope;
        return InvalidArgument(where + ": the body's condition output must be one bool value");
      }
      if (!c) {
        by_name_ = scope;
        return Unimplemented(refused + "the condition its body computes in iteration " + std::to_string(i) + " is " +
                             std::string(kComputedAtRunTime) +
                             " (Loop is unrolled at import and needs the trip count known there)" +
                             std::string(kBindHint));
      }
      running = c->data()[0] != 0;
    }
  }
  by_name_ = scope;
  for (int k = 0; k < carried; ++k) {
    if (!node.output(k).empty()) by_name_[node.output(k)] = state[k];
  }
  for (int k = 0; k < scans; ++k) {
    const std::string& name = node.output(carried + k);
    if (name.empty()) continue;
    if (scan_parts[k].empty()) {
      return Unimplemented(refused + "it runs no iteration, so its scan output '" + name +
                           "' has no shape to take from the body");
    }
    ASSIGN_OR_RETURN(ValueId stacked, StackIterations(ctx, scan_parts[k], 0, false));
    by_name_[name] = stacked;
  }
  return OkStatus();
}

// Scan: the scan inputs are sliced along their axes, the body runs once per slice with the
// state threaded through, and each scan output's slices are stacked along its axis. Opset 8's
// Scan has a leading batch axis on every input and output: each batch element is scanned on
// its own, in order, and the results are stacked along axis 0.
Status Importer::ImportScan(const onnx::NodeProto& node, const std::string& label) {
  const std::string where = "node '" + label + "' (Scan)";
  const std::string refused = "unsupported op Scan in " + where + ": ";
  const bool batched = opset_ < 9;
  const int first = batched ? 1 : 0;  // opset 8: input 0 is the optional sequence_lens
  std::vector<ValueId> all_inputs(static_cast<size_t>(node.input_size()), -1);
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) {
      if (i < first) continue;
      return InvalidArgument(where + ": input " + std::to_string(i) + " is empty");
    }
    ASSIGN_OR_RETURN(all_inputs[i], ResolveInput(node, i, where));
  }
  NodeContext ctx(*this, node, all_inputs, opset_);
  if (batched) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"body", "num_scan_inputs", "directions"}));
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                                         "scan_output_axes", "scan_output_directions"}));
  }
  if (node.input_size() <= first) return ctx.Invalid("needs at least one scan input");
  const std::vector<ValueId> inputs(all_inputs.begin() + first, all_inputs.end());
  if (!ctx.has_attr("num_scan_inputs")) return ctx.Invalid("attribute 'num_scan_inputs' is required");
  ASSIGN_OR_RETURN(int64_t scan_inputs, ctx.AttrInt("num_scan_inputs", 0));
  const int64_t n_inputs = static_cast<int64_t>(inputs.size());
  if (scan_inputs < 1 || scan_inputs > n_inputs) {
    return ctx.Invalid("num_scan_inputs " + std::to_string(scan_inputs) + " must be in [1, " +
                       std::to_string(n_inputs) + "]");
  }
  const int64_t states = n_inputs - scan_inputs;
  const int64_t scans = node.output_size() - states;
  if (scans < 0) {
    return ctx.Invalid("has " + std::to_string(node.output_size()) + " outputs for " + std::to_string(states) +
                       " state values");
  }
  // Opset 8 scans axis 1 of each batch element's [B, T, ...] input, i.e. axis 0 of its slice.
  ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, ctx.AttrInts("scan_input_axes", std::vector<int64_t>(scan_inputs, 0)));
  ASSIGN_OR_RETURN(std::vector<int64_t> in_dirs, ctx.AttrInts(batched ? "directions" : "scan_input_directions",
                                                              std::vector<int64_t>(scan_inputs, 0)));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, ctx.AttrInts("scan_output_axes", std::vector<int64_t>(scans, 0)));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_dirs,
                   ctx.AttrInts("scan_output_directions", std::vector<int64_t>(scans, 0)));
  if (static_cast<int64_t>(in_axes.size()) != scan_inputs || static_cast<int64_t>(in_dirs.size()) != scan_inputs ||
      static_cast<int64_t>(out_axes.size()) != scans || static_cast<int64_t>(out_dirs.size()) != scans) {
    return ctx.Invalid(
        "scan_input_axes and the input directions need one value per scan input, scan_output_axes "
        "and scan_output_directions one per scan output");
  }
  for (int64_t d : in_dirs) {
    if (d != 0 && d != 1) return ctx.Invalid("a scan direction must be 0 or 1");
  }
  for (int64_t d : out_dirs) {
    if (d != 0 && d != 1) return ctx.Invalid("a scan direction must be 0 or 1");
  }
  int64_t batch = 1;
  if (batched) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Shape& shape = type(inputs[i]).shape;
      if (i == 0 && !shape.empty()) batch = shape[0];
      if (shape.empty() || shape[0] != batch) {
        return ctx.Invalid("every input must have the same batch size in dim 0, got " + ShapeToString(shape));
      }
    }
  }
  int64_t length = -1;
  for (int64_t j = 0; j < scan_inputs; ++j) {
    Shape shape = type(inputs[states + j]).shape;
    if (batched) shape.erase(shape.begin());
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (rank == 0) return ctx.Invalid("scan input " + std::to_string(j) + " has no axis to scan");
    ASSIGN_OR_RETURN(in_axes[j], NormalizeAxis(ctx, in_axes[j], rank, "scan input axis"));
    const int64_t len = shape[in_axes[j]];
    if (length >= 0 && len != length) {
      return ctx.Invalid("the scan inputs have lengths " + std::to_string(length) + " and " + std::to_string(len));
    }
    length = len;
  }
  if (batched && ctx.has_input(0)) {
    // Every batch element must be scanned to the full length: shorter sequences would need
    // ONNX's padding of the outputs, which is not lowered.
    ASSIGN_OR_RETURN(std::vector<int64_t> lens, ctx.ConstantInts(0, "sequence_lens"));
    for (int64_t len : lens) {
      if (len != length) {
        return Unimplemented(refused + "sequence_lens other than the full length " + std::to_string(length));
      }
    }
  }
  if (length > kMaxUnrolledIterations || (length > 0 && batch > kMaxUnrolledIterations / length)) {
    return Unimplemented(refused + "its scan length " + std::to_string(length) +
                         (batched ? " times its batch " + std::to_string(batch) : std::string()) +
                         " is over the unrolling cap of " + std::to_string(kMaxUnrolledIterations) + " iterations");
  }
  ASSIGN_OR_RETURN(Body body, ReadBody(node, where, static_cast<int>(n_inputs), static_cast<int>(node.output_size())));

  const auto scope = by_name_;
  // Per batch element (one without a batch axis): final states and stacked scan outputs.
  std::vector<std::vector<ValueId>> final_states(static_cast<size_t>(states));
  std::vector<std::vector<ValueId>> scan_outputs(static_cast<size_t>(scans));
  auto scan_one = [&](int64_t b) -> Status {
    auto slice_at = [&](ValueId x, int64_t axis, int64_t at) -> StatusOr<ValueId> {
      Shape shape = type(x).shape;
      shape.erase(shape.begin() + axis);
      ASSIGN_OR_RETURN(ValueId part, ctx.Emit("slice", {x},
                                              {{"starts", std::vector<int64_t>{at}},
                                               {"ends", std::vector<int64_t>{at + 1}},
                                               {"axes", std::vector<int64_t>{axis}}}));
      return ReshapeTo(ctx, part, shape);
    };
    std::vector<ValueId> own(inputs);
    if (batched) {
      for (ValueId& v : own) {
        ASSIGN_OR_RETURN(v, slice_at(v, 0, b));
      }
    }
    std::vector<ValueId> state(own.begin(), own.begin() + states);
    std::vector<std::vector<ValueId>> parts(static_cast<size_t>(scans));
    for (int64_t t = 0; t < length; ++t) {
      std::vector<ValueId> body_inputs = state;
      for (int64_t j = 0; j < scan_inputs; ++j) {
        ASSIGN_OR_RETURN(ValueId x_t, slice_at(own[states + j], in_axes[j], in_dirs[j] == 0 ? t : length - 1 - t));
        body_inputs.push_back(x_t);
      }
      ASSIGN_OR_RETURN(std::vector<ValueId> outputs, InlineIteration(body, body_inputs, where, b * length + t));
      std::copy(outputs.begin(), outputs.begin() + states, state.begin());
      for (int64_t k = 0; k < scans; ++k) parts[k].push_back(outputs[states + k]);
    }
    for (int64_t k = 0; k < states; ++k) final_states[k].push_back(state[k]);
    for (int64_t k = 0; k < scans; ++k) {
      if (node.output(static_cast<int>(states + k)).empty()) continue;
      if (parts[k].empty()) {
        return Unimplemented(refused + "its scan length is 0, so its scan output '" +
                             node.output(static_cast<int>(states + k)) + "' has no shape to take from the body");
      }
      const int64_t out_rank = static_cast<int64_t>(type(parts[k][0]).shape.size()) + 1;
      ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, out_axes[k], out_rank, "scan output axis"));
      ASSIGN_OR_RETURN(ValueId stacked, StackIterations(ctx, parts[k], axis, out_dirs[k] == 1));
      scan_outputs[k].push_back(stacked);
    }
    return OkStatus();
  };
  for (int64_t b = 0; b < batch; ++b) {
    Status s = scan_one(b);
    if (!s.ok()) {
      by_name_ = scope;
      return s;
    }
  }
  by_name_ = scope;
  for (int64_t k = 0; k < states + scans; ++k) {
    const std::string& name = node.output(static_cast<int>(k));
    if (name.empty()) continue;
    const auto& per_batch = k < states ? final_states[k] : scan_outputs[k - states];
    if (per_batch.empty()) {
      return Unimplemented(refused + "its batch is empty, so output '" + name + "' has no shape to take from the body");
    }
    if (!batched) {
      by_name_[name] = per_batch[0];
      continue;
    }
    ASSIGN_OR_RETURN(by_name_[name], StackIterations(ctx, per_batch, 0, false));
  }
  return OkStatus();
}

// Counts every read of each name, in If branches too: a fusion that supersedes a value's
// producer when it has one reader must see the reads of a branch that is inlined later. A
// Loop or Scan body is instantiated once per iteration, so its reads count twice: no value it
// reads or computes is ever taken for one with a single reader.
void Importer::CountConsumers(const onnx::GraphProto& g, int weight) {
  for (const auto& node : g.node()) {
    for (const std::string& name : node.input()) consumers_[name] += weight;
    const bool repeated = node.op_type() == "Loop" || node.op_type() == "Scan";
    const int sub_weight = repeated ? std::min(weight * 2, 1 << 20) : weight;
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) CountConsumers(attr.g(), sub_weight);
      for (const auto& sub : attr.graphs()) CountConsumers(sub, sub_weight);
    }
  }
  for (const auto& o : g.output()) consumers_[o.name()] += weight;
}

// Rebuilds graph_ without the superseded nodes, their outputs, and the constants that only
// they read, so replaced weights do not travel in the weights blob. Value and node order is
// otherwise kept (the graph id does not depend on it anyway).
void Importer::DropSuperseded() {
  if (superseded_.empty()) return;
  const auto& values = graph_.values();
  const auto& nodes = graph_.nodes();
  std::vector<bool> keep_value(values.size(), true);
  std::vector<int> reads(values.size(), 0);
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (superseded_.count(n)) {
      keep_value[nodes[n].output] = false;
      continue;
    }
    for (int v : nodes[n].inputs) ++reads[v];
  }
  for (const auto& [name, v] : graph_.outputs()) ++reads[v];
  for (int n : superseded_) {
    for (int v : nodes[n].inputs) {
      if (values[v].kind == ValueKind::kConstant && reads[v] == 0) keep_value[v] = false;
    }
  }
  Graph rebuilt;
  std::vector<int> remap(values.size(), -1);
  for (int v = 0; v < static_cast<int>(values.size()); ++v) {
    if (!keep_value[v]) continue;
    ValueDef def = values[v];
    def.producer = -1;
    remap[v] = rebuilt.AddValue(std::move(def));
  }
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (superseded_.count(n)) continue;
    NodeDef def = nodes[n];
    for (int& v : def.inputs) v = remap[v];
    def.output = remap[def.output];
    rebuilt.AddNode(std::move(def));
  }
  for (const auto& [name, v] : graph_.outputs()) rebuilt.AddOutput(name, remap[v]);
  graph_ = std::move(rebuilt);
  superseded_.clear();
}

Status Importer::ExternalizeWeights(OnnxImport* out) {
  std::vector<int> moved;
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (int i = 0; i < static_cast<int>(graph_.values().size()); ++i) {
    const ValueDef& v = graph_.values()[i];
    if (v.kind == ValueKind::kConstant && v.inline_data && v.inline_data->byte_size() > options_.inline_max_bytes) {
      moved.push_back(i);
      entries.emplace_back(v.name, &*v.inline_data);
    }
  }
  if (moved.empty()) return OkStatus();
  ASSIGN_OR_RETURN(out->weights, WriteSafetensors(entries, {{"format", "consensor.weights.v1"}}));
  out->weights_sha256 = Sha256Of(out->weights);
  for (int i : moved) {
    ValueDef& v = graph_.mutable_values()[i];
    v.blob = BlobRef{out->weights_sha256, v.name};
    v.inline_data.reset();
  }
  return OkStatus();
}

Status Importer::Run(const onnx::ModelProto& model, OnnxImport* out) {
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  if (opset_ == 0) {
    // IR version 3 and later must declare it; older models mean opset 1.
    if (model.opset_import_size() > 0) {
      std::string domains;
      for (const auto& op : model.opset_import()) domains += (domains.empty() ? "" : ", ") + op.domain();
      return Unimplemented("unsupported op domains: the model imports only " + domains);
    }
    if (model.ir_version() >= 3) return InvalidArgument("the model does not import the default ONNX opset");
    opset_ = 1;
  }
  if (opset_ < 1 || opset_ > kMaxOpset) {
    return Unimplemented("unsupported opset " + std::to_string(opset_) + " (Consensor imports opsets 1 to " +
                         std::to_string(kMaxOpset) + ")");
  }
  out->opset = opset_;
  out->producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  if (!model.has_graph()) return InvalidArgument("the model has no graph");
  const onnx::GraphProto& g = model.graph();
  if (g.sparse_initializer_size() > 0) return Unimplemented("unsupported sparse initializers");

  CountConsumers(g, 1);

  for (const auto& init : g.initializer()) {
    auto t = TensorFromOnnx(init, options_.limits);
    if (!t.ok()) return t.status().WithContext("initializer");
    if (by_name_.count(init.name())) return InvalidArgument("initializer '" + init.name() + "' is defined twice");
    by_name_[init.name()] = AddConstant(std::move(t).value(), init.name());
  }

  std::set<std::string> input_names;
  for (const auto& in : g.input()) {
    if (!by_name_.count(in.name())) input_names.insert(in.name());
  }
  for (const auto& [name, shape] : options_.input_shapes) {
    if (!input_names.count(name)) return InvalidArgument("the model has no input named '" + name + "'");
  }
  for (const auto& [name, value] : options_.constant_inputs) {
    if (!input_names.count(name)) return InvalidArgument("the model has no input named '" + name + "'");
  }
  for (const auto& in : g.input()) {
    if (by_name_.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
    const std::string what = "input '" + in.name() + "'";
    if (in.name().empty()) return InvalidArgument("a graph input has no name");
    if (auto bound = options_.constant_inputs.find(in.name()); bound != options_.constant_inputs.end()) {
      by_name_[in.name()] = AddConstant(bound->second, in.name());
      continue;
    }
    if (!in.type().has_tensor_type()) return Unimplemented("unsupported non-tensor " + what);
    const auto& tt = in.type().tensor_type();
    ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(tt.elem_type(), what));
    auto given = options_.input_shapes.find(in.name());
    Shape shape;
    if (given != options_.input_shapes.end()) {
      shape = given->second;
      if (tt.has_shape()) {
        if (tt.shape().dim_size() != static_cast<int>(shape.size())) {
          return InvalidArgument(what + " has rank " + std::to_string(tt.shape().dim_size()) + " in the model, but " +
                                 ShapeToString(shape) + " was given");
        }
        for (int d = 0; d < tt.shape().dim_size(); ++d) {
          const auto& dim = tt.shape().dim(d);
          if (dim.has_dim_value() && dim.dim_value() != shape[d]) {
            return InvalidArgument(what + " has dimension " + std::to_string(d) + " fixed to " +
                                   std::to_string(dim.dim_value()) + " in the model, but " + ShapeToString(shape) +
                                   " was given");
          }
        }
      }
    } else {
      if (!tt.has_shape()) {
        return FailedPrecondition(what + " has no declared shape; give it (for example with an --input .npy file)");
      }
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        if (!dim.has_dim_value() || dim.dim_value() < 0) {
          std::string sym = dim.has_dim_param() ? " '" + dim.dim_param() + "'" : "";
          return FailedPrecondition(what + " has a symbolic dimension" + sym + " (dim " + std::to_string(d) +
                                    "); give the input's shape (for example with an --input .npy file)");
        }
        shape.push_back(dim.dim_value());
      }
    }
    if (shape.size() > static_cast<size_t>(kMaxRank)) return Unimplemented(what + " has rank over 8");
    ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
    if (n > options_.limits.max_elements_per_tensor) return ResourceExhausted(what + " is over the element cap");
    if (by_name_.count(in.name())) return InvalidArgument(what + " is declared twice");
    used_names_.insert(in.name());
    Value v = graph_.input(in.name(), dtype, shape);
    Entry e;
    e.type = {dtype, shape};
    e.graph_value = v.index();
    values_.push_back(std::move(e));
    by_name_[in.name()] = static_cast<ValueId>(values_.size()) - 1;
    out->inputs.push_back(in.name());
  }
  // Output names become graph value names only through outputs; keep them out of the way.
  for (const auto& o : g.output()) used_names_.insert(o.name());

  if (g.node_size() > options_.limits.max_ops) {
    return ResourceExhausted("the model has " + std::to_string(g.node_size()) + " nodes, over the cap of " +
                             std::to_string(options_.limits.max_ops));
  }
  nodes_seen_ = g.node_size();
  for (int i : ImportOrder(g, by_name_)) RETURN_IF_ERROR(ImportNode(g.node(i), i));

  if (g.output_size() == 0) return InvalidArgument("the model has no outputs");
  std::set<std::string> seen_outputs;
  for (const auto& o : g.output()) {
    if (!seen_outputs.insert(o.name()).second) return InvalidArgument("output '" + o.name() + "' is listed twice");
    auto it = by_name_.find(o.name());
    if (it == by_name_.end()) return InvalidArgument("output '" + o.name() + "' is not produced by the graph");
    int gv = Materialize(it->second);
    // A public output must be computed by a node: copy inputs and constants through identity.
    if (graph_.values()[gv].kind != ValueKind::kNodeOutput) {
      NodeDef node;
      node.op = "identity";
      node.inputs = {gv};
      ValueDef v;
      v.name = UniqueName(o.name() + ".out");
      node.output = graph_.AddValue(std::move(v));
      gv = node.output;
      graph_.AddNode(std::move(node));
    }
    graph_.AddOutput(o.name(), gv);
    out->outputs.push_back(o.name());
  }
  DropSuperseded();
  RETURN_IF_ERROR(ExternalizeWeights(out));
  out->folded_nodes = folded_;
  out->graph = std::move(graph_);
  return OkStatus();
}

// --- NodeContext ---

NodeContext::NodeContext(Importer& importer, const onnx::NodeProto& node, std::vector<ValueId> inputs, int64_t opset)
    : importer_(importer), node_(node), inputs_(std::move(inputs)), opset_(opset) {
  outputs_.resize(static_cast<size_t>(node.output_size()));
}

const std::string& NodeContext::op_type() const { return node_.op_type(); }
const std::string& NodeContext::node_name() const { return node_.name(); }
const Limits& NodeContext::limits() const { return importer_.limits(); }

std::string NodeContext::Where() const {
  return "node '" + (node_.name().empty() ? (node_.output_size() ? node_.output(0) : std::string("?")) : node_.name()) +
         "' (" + node_.op_type() + ")";
}

Status NodeContext::Unsupported(std::string_view what) const {
  return Unimplemented("unsupported " + std::string(what) + " in " + Where());
}
Status NodeContext::Invalid(std::string_view what) const { return InvalidArgument(Where() + ": " + std::string(what)); }

StatusOr<ValueId> NodeContext::RequiredInput(int i) const {
  if (!has_input(i)) return Invalid("input " + std::to_string(i) + " is required");
  return input(i);
}

StatusOr<std::vector<int64_t>> NodeContext::ConstantInts(int i, std::string_view what) const {
  if (!has_input(i)) return Invalid(std::string(what) + " (input " + std::to_string(i) + ") is required");
  const Tensor* t = input_constant(i);
  if (!t) {
    return Unsupported(std::string(what) + " " + std::string(kComputedAtRunTime) + " (input " + std::to_string(i) +
                       " must be known at import time)");
  }
  auto ints = TensorToInts(*t);
  if (!ints.ok()) return Invalid(std::string(what) + ": " + ints.status().message());
  return ints;
}

StatusOr<double> NodeContext::ConstantScalar(int i, std::string_view what) const {
  if (!has_input(i)) return Invalid(std::string(what) + " (input " + std::to_string(i) + ") is required");
  const Tensor* t = input_constant(i);
  if (!t) return Unsupported(std::string(what) + " " + std::string(kComputedAtRunTime));
  if (t->num_elements() != 1) return Invalid(std::string(what) + " must have one element");
  switch (t->dtype()) {
    case DType::kF32: return static_cast<double>(t->data_as<float>()[0]);
    case DType::kI32: return static_cast<double>(t->data_as<int32_t>()[0]);
    case DType::kI64: return static_cast<double>(t->data_as<int64_t>()[0]);
    case DType::kI8: return static_cast<double>(t->data_as<int8_t>()[0]);
    case DType::kBool: return static_cast<double>(t->data()[0]);
    case DType::kU8: return static_cast<double>(t->data()[0]);
    case DType::kI16: return static_cast<double>(t->data_as<int16_t>()[0]);
    case DType::kU16: return static_cast<double>(t->data_as<uint16_t>()[0]);
    case DType::kU32: return static_cast<double>(t->data_as<uint32_t>()[0]);
    case DType::kU64: return static_cast<double>(t->data_as<uint64_t>()[0]);
    case DType::kF64: return t->data_as<double>()[0];
    case DType::kF16: return static_cast<double>(half::F16ToF32(t->data_as<uint16_t>()[0]));
    case DType::kBF16: return static_cast<double>(half::BF16ToF32(t->data_as<uint16_t>()[0]));
    default: return Invalid(std::string(what) + " has an unknown dtype");
  }
}

const onnx::AttributeProto* NodeContext::FindAttr(std::string_view name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

Status NodeContext::CheckAttributes(std::initializer_list<std::string_view> accepted) const {
  for (const auto& a : node_.attribute()) {
    if (std::find(accepted.begin(), accepted.end(), a.name()) == accepted.end()) {
      return Unsupported("attribute '" + a.name() + "'");
    }
  }
  return OkStatus();
}

StatusOr<int64_t> NodeContext::AttrInt(std::string_view name, int64_t fallback) const {
  const auto* a = FindAttr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT) return Invalid("attribute '" + std::string(name) + "' must be an int");
  return a->i();
}

StatusOr<float> NodeContext::AttrFloat(std::string_view name, float fallback) const {
  const auto* a = FindAttr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT) return Invalid("attribute '" + std::string(name) + "' must be a float");
  return a->f();
}

StatusOr<std::vector<int64_t>> NodeContext::AttrInts(std::string_view name, std::vector<int64_t> fallback) const {
  const auto* a = FindAttr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INTS) return Invalid("attribute '" + std::string(name) + "' must be ints");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

StatusOr<std::vector<float>> NodeContext::AttrFloats(std::string_view name, std::vector<float> fallback) const {
  const auto* a = FindAttr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOATS) return Invalid("attribute '" + std::string(name) + "' must be floats");
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

StatusOr<std::string> NodeContext::AttrString(std::string_view name, std::string fallback) const {
  const auto* a = FindAttr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING)
    return Invalid("attribute '" + std::string(name) + "' must be a string");
  return a->s();
}

StatusOr<std::vector<std::string>> NodeContext::AttrStrings(std::string_view name,
                                                            std::vector<std::string> fallback) const {
  const auto* a = FindAttr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRINGS)
    return Invalid("attribute '" + std::string(name) + "' must be strings");
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

StatusOr<Tensor> NodeContext::AttrTensor(std::string_view name) const {
  const auto* a = FindAttr(name);
  if (!a) return Invalid("attribute '" + std::string(name) + "' is required");
  if (a->type() != onnx::AttributeProto::TENSOR)
    return Invalid("attribute '" + std::string(name) + "' must be a tensor");
  auto t = TensorFromOnnx(a->t(), importer_.limits());
  if (!t.ok()) return t.status().WithContext(Where() + " attribute '" + std::string(name) + "'");
  return t;
}

StatusOr<ValueId> NodeContext::Emit(std::string_view op, std::vector<ValueId> inputs, Attributes attrs) {
  return importer_.Emit(*this, op, std::move(inputs), std::move(attrs));
}

ValueId NodeContext::Constant(Tensor t) { return importer_.AddConstant(std::move(t)); }
ValueId NodeContext::ScalarF32(float v) { return Constant(Tensor::FromVector<float>(DType::kF32, {}, {v})); }

ValueId NodeContext::Scalar(DType dtype, double v) {
  Tensor t(dtype, {});
  switch (dtype) {
    case DType::kF32: t.data_as<float>()[0] = static_cast<float>(v); break;
    case DType::kF64: t.data_as<double>()[0] = v; break;
    // Through f32, as a cast f32 -> f16/bf16 rounds (DETERMINISM.md 1.3, 1.4).
    case DType::kF16: t.data_as<uint16_t>()[0] = half::F32ToF16(static_cast<float>(v)); break;
    case DType::kBF16: t.data_as<uint16_t>()[0] = half::F32ToBF16(static_cast<float>(v)); break;
    case DType::kI32: t.data_as<int32_t>()[0] = static_cast<int32_t>(v); break;
    case DType::kI64: t.data_as<int64_t>()[0] = static_cast<int64_t>(v); break;
    case DType::kI8: t.data_as<int8_t>()[0] = static_cast<int8_t>(v); break;
    case DType::kBool: t.data()[0] = v != 0 ? 1 : 0; break;
    default:
      if (IsUnsignedIntegerDType(dtype) || dtype == DType::kI16) {
        // Through a 64-bit integer, then modulo 2^bits (a negative v wraps, as a cast would).
        const uint64_t bits = v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
        std::memcpy(t.data(), &bits, static_cast<size_t>(DTypeSize(dtype)));  // little-endian low bytes
      }
      break;
  }
  return Constant(std::move(t));
}

const TypeInfo& NodeContext::type(ValueId v) const { return importer_.type(v); }
const EmittedOp* NodeContext::producer(ValueId v) const { return importer_.producer(v); }
bool NodeContext::SoleReader(int i) const { return has_input(i) && importer_.Readers(input(i)) == 1; }
void NodeContext::Supersede(ValueId v) { importer_.Supersede(v); }
const Tensor* NodeContext::constant(ValueId v) const { return importer_.constant(v); }
int NodeContext::num_outputs() const { return node_.output_size(); }
bool NodeContext::wants_output(int i) const {
  return i < node_.output_size() && !node_.output(i).empty() && importer_.IsConsumed(node_.output(i));
}
void NodeContext::SetOutput(int i, ValueId v) {
  if (i >= 0 && i < static_cast<int>(outputs_.size())) outputs_[i] = v;
}

}  // namespace onnx_import

namespace {

StatusOr<onnx::ModelProto> ParseModel(std::span<const uint8_t> bytes, int64_t max_bytes) {
  if (static_cast<int64_t>(bytes.size()) > max_bytes || bytes.size() > static_cast<size_t>(INT_MAX)) {
    return ResourceExhausted("the model is " + std::to_string(bytes.size()) + " bytes, over the cap of " +
                             std::to_string(max_bytes));
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("not an ONNX model (the protobuf does not parse)");
  }
  return model;
}

}  // namespace

StatusOr<OnnxImport> ImportOnnx(std::span<const uint8_t> bytes, const OnnxImportOptions& options) {
  ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes, options.max_model_bytes));
  OnnxImport out;
  onnx_import::Importer importer(options);
  RETURN_IF_ERROR(importer.Run(model, &out));
  auto validated = Validate(out.graph, options.limits);
  if (!validated.ok()) return validated.status().WithContext("the imported graph");
  return out;
}

StatusOr<OnnxImport> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  ASSIGN_OR_RETURN(auto bytes, ReadFileBytes(path, options.max_model_bytes));
  auto imported = ImportOnnx(bytes, options);
  if (!imported.ok()) return imported.status().WithContext("model '" + path + "'");
  return imported;
}

bool NeedsValueAtImport(const Status& status) {
  return status.code() == StatusCode::kUnimplemented &&
         status.message().find(onnx_import::kComputedAtRunTime) != std::string::npos;
}

StatusOr<OnnxImportForValues> ImportOnnxForValues(std::span<const uint8_t> model,
                                                  const std::map<std::string, Tensor>& values,
                                                  OnnxImportOptions options) {
  // Four tries: nothing bound; the integer inputs bound; also the short float vectors
  // (Resize's scales and roi: at most 2 values per dim of a rank-8 tensor); everything bound.
  constexpr int kLastAttempt = 3;
  for (int attempt = 0; attempt <= kLastAttempt; ++attempt) {
    OnnxImportForValues out;
    for (const auto& [name, t] : values) {
      const bool short_vector = t.shape().size() == 1 && t.num_elements() <= 16;
      const bool bind = attempt == kLastAttempt ||
                        (attempt >= 1 && !IsFloatDType(t.dtype()) && !IsHalfDType(t.dtype())) ||
                        (attempt == 2 && short_vector);
      (bind ? out.bound : out.run_inputs).emplace(name, t);
    }
    options.input_shapes.clear();
    for (const auto& [name, t] : out.run_inputs) options.input_shapes[name] = t.shape();
    options.constant_inputs = out.bound;
    auto imported = ImportOnnx(model, options);
    if (imported.ok()) {
      out.model = std::move(imported).value();
      return out;
    }
    if (!NeedsValueAtImport(imported.status()) || attempt == kLastAttempt) return imported.status();
  }
  return Internal("unreachable");
}

StatusOr<OnnxModelInfo> ReadOnnxModelInfo(std::span<const uint8_t> bytes) {
  ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes, (int64_t{2} << 30) - 1));
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  OnnxModelInfo info;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name())) continue;
    if (!in.type().has_tensor_type()) info.non_tensor = true;
    OnnxInputInfo input;
    input.name = in.name();
    const auto& tt = in.type().tensor_type();
    auto dtype = onnx_import::DTypeFromOnnx(tt.elem_type(), "input '" + in.name() + "'");
    input.dtype = dtype.ok() ? *dtype : DType::kInvalid;
    for (const auto& dim : tt.shape().dim()) input.shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    info.inputs.push_back(std::move(input));
  }
  for (const auto& o : model.graph().output()) {
    if (!o.type().has_tensor_type()) info.non_tensor = true;
    info.outputs.push_back(o.name());
  }
  std::set<std::string> ops;
  for (const auto& node : model.graph().node()) {
    ops.insert(node.domain().empty() || node.domain() == "ai.onnx" ? node.op_type()
                                                                   : node.domain() + "." + node.op_type());
  }
  info.op_types.assign(ops.begin(), ops.end());
  return info;
}

StatusOr<Tensor> ParseOnnxTensor(std::span<const uint8_t> bytes, const Limits& limits) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return ResourceExhausted("tensor file too large");
  onnx::TensorProto p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument("not an ONNX TensorProto (the protobuf does not parse)");
  }
  return onnx_import::TensorFromOnnx(p, limits);
}

std::vector<std::string> SupportedOnnxOps() {
  std::vector<std::string> ops;
  for (const auto& [op, convert] : onnx_import::ConverterTable()) ops.push_back(op);
  // Control flow is the driver's own, not a converter's: its subgraphs are imported in place.
  for (const char* op : {"If", "Loop", "Scan"}) ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

bool IsOnnxPath(const std::string& path) {
  if (path.size() < 5) return false;
  std::string tail = path.substr(path.size() - 5);
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".onnx";
}

}  // namespace consensor::executor
