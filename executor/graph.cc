#include "executor/graph.h"

namespace consensor::executor {

std::string Graph::FreshName(const char* prefix) { return std::string(prefix) + std::to_string(next_name_++); }

int Graph::AddValue(ValueDef v) {
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size()) - 1;
}

int Graph::AddNode(NodeDef n) {
  int index = static_cast<int>(nodes_.size());
  if (n.output >= 0 && n.output < static_cast<int>(values_.size())) values_[n.output].producer = index;
  nodes_.push_back(std::move(n));
  return index;
}

Value Graph::input(std::string name, DType dtype, Shape shape) {
  ValueDef v;
  v.kind = ValueKind::kPlaceholder;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  return Value(this, AddValue(std::move(v)));
}

Value Graph::constant(Tensor tensor, std::string name) {
  ValueDef v;
  v.kind = ValueKind::kConstant;
  v.name = name.empty() ? FreshName("const") : std::move(name);
  v.dtype = tensor.dtype();
  v.shape = tensor.shape();
  v.inline_data = std::move(tensor);
  return Value(this, AddValue(std::move(v)));
}

Value Graph::constant_blob(const Hash256& sha256, DType dtype, Shape shape, std::string name, std::string entry) {
  ValueDef v;
  v.kind = ValueKind::kConstant;
  v.name = name.empty() ? FreshName("blob") : std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.blob = BlobRef{sha256, std::move(entry)};
  return Value(this, AddValue(std::move(v)));
}

Value Graph::scalar(float x) { return constant(Tensor::FromVector<float>(DType::kF32, {}, {x})); }

Value Graph::node(std::string op, std::vector<Value> inputs, Attributes attrs, std::string name) {
  NodeDef n;
  n.op = std::move(op);
  n.attrs = std::move(attrs);
  n.name = std::move(name);
  for (const Value& v : inputs) n.inputs.push_back(v.graph() == this ? v.index() : -1);
  ValueDef out;
  out.kind = ValueKind::kNodeOutput;
  out.name = FreshName("v");
  n.output = AddValue(std::move(out));
  AddNode(std::move(n));
  return Value(this, static_cast<int>(values_.size()) - 1);
}

void Graph::output(std::string name, Value v) { AddOutput(std::move(name), v.graph() == this ? v.index() : -1); }

namespace {

// Builder helpers: an op on invalid handles yields an invalid handle, and validation of the
// output that uses it reports the problem.
Value Make(const char* op, std::vector<Value> inputs, Attributes attrs = {}) {
  Graph* g = nullptr;
  for (const Value& v : inputs) {
    if (v.graph()) {
      g = v.graph();
      break;
    }
  }
  if (!g) return Value();
  return g->node(op, std::move(inputs), std::move(attrs));
}

Value Unary(const char* op, Value x) { return Make(op, {x}); }
Value Binary(const char* op, Value a, Value b) { return Make(op, {a, b}); }
}  // namespace

Value neg(Value x) { return Unary("neg", x); }
Value abs(Value x) { return Unary("abs", x); }
Value relu(Value x) { return Unary("relu", x); }
Value exp(Value x) { return Unary("exp", x); }
Value log(Value x) { return Unary("log", x); }
Value sqrt(Value x) { return Unary("sqrt", x); }
Value rsqrt(Value x) { return Unary("rsqrt", x); }
Value tanh(Value x) { return Unary("tanh", x); }
Value sigmoid(Value x) { return Unary("sigmoid", x); }
Value erf(Value x) { return Unary("erf", x); }
Value gelu(Value x) { return Unary("gelu", x); }
Value gelu_tanh(Value x) { return Unary("gelu_tanh", x); }
Value sin(Value x) { return Unary("sin", x); }
Value cos(Value x) { return Unary("cos", x); }
Value asin(Value x) { return Unary("asin", x); }
Value acos(Value x) { return Unary("acos", x); }
Value atan(Value x) { return Unary("atan", x); }
Value sinh(Value x) { return Unary("sinh", x); }
Value cosh(Value x) { return Unary("cosh", x); }
Value asinh(Value x) { return Unary("asinh", x); }
Value acosh(Value x) { return Unary("acosh", x); }
Value atanh(Value x) { return Unary("atanh", x); }
Value floor(Value x) { return Unary("floor", x); }
Value ceil(Value x) { return Unary("ceil", x); }
Value round(Value x) { return Unary("round", x); }
Value logical_not(Value x) { return Unary("not", x); }
Value identity(Value x) { return Unary("identity", x); }
Value cast(Value x, DType to) { return Make("cast", {x}, {{"to", to}}); }

Value operator+(Value a, Value b) { return Binary("add", a, b); }
Value operator-(Value a, Value b) { return Binary("sub", a, b); }
Value operator*(Value a, Value b) { return Binary("mul", a, b); }
Value operator/(Value a, Value b) { return Binary("div", a, b); }
Value operator-(Value a) { return neg(a); }
Value pow(Value a, Value b) { return Binary("pow", a, b); }
Value fmod(Value a, Value b) { return Binary("fmod", a, b); }
Value maximum(Value a, Value b) { return Binary("max", a, b); }
Value minimum(Value a, Value b) { return Binary("min", a, b); }
Value equal(Value a, Value b) { return Binary("equal", a, b); }
Value not_equal(Value a, Value b) { return Binary("not_equal", a, b); }
Value less(Value a, Value b) { return Binary("less", a, b); }
Value less_equal(Value a, Value b) { return Binary("less_equal", a, b); }
Value greater(Value a, Value b) { return Binary("greater", a, b); }
Value greater_equal(Value a, Value b) { return Binary("greater_equal", a, b); }
Value logical_and(Value a, Value b) { return Binary("and", a, b); }
Value logical_or(Value a, Value b) { return Binary("or", a, b); }
Value logical_xor(Value a, Value b) { return Binary("xor", a, b); }
Value where(Value cond, Value a, Value b) { return Make("where", {cond, a, b}); }

namespace {
Value Reduce(const char* op, Value x, std::vector<int64_t> axes, bool keepdims) {
  return Make(op, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}
}  // namespace

Value reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims) {
  return Reduce("reduce_sum", x, std::move(axes), keepdims);
}
Value reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims) {
  return Reduce("reduce_mean", x, std::move(axes), keepdims);
}
Value reduce_max(Value x, std::vector<int64_t> axes, bool keepdims) {
  return Reduce("reduce_max", x, std::move(axes), keepdims);
}
Value reduce_prod(Value x, std::vector<int64_t> axes, bool keepdims) {
  return Reduce("reduce_prod", x, std::move(axes), keepdims);
}
Value reduce_min(Value x, std::vector<int64_t> axes, bool keepdims) {
  return Reduce("reduce_min", x, std::move(axes), keepdims);
}
Value argmax(Value x, int64_t axis, bool keepdims) {
  return Make("argmax", {x}, {{"axis", axis}, {"keepdims", int64_t{keepdims}}});
}
Value top_k(Value x, int64_t k, int64_t axis, bool largest) {
  return Make("top_k", {x}, {{"k", k}, {"axis", axis}, {"largest", int64_t{largest}}});
}
Value cumsum(Value x, int64_t axis, bool exclusive, bool reverse) {
  return Make("cumsum", {x}, {{"axis", axis}, {"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}});
}

Value matmul(Value a, Value b) { return Make("matmul", {a, b}); }
Value matmul_i8(Value a, Value b) { return Make("matmul_i8", {a, b}); }

namespace {
Attributes ConvAttrs(const Conv2DOptions& o) {
  return {{"strides", o.strides}, {"pads", o.pads}, {"dilations", o.dilations}, {"group", o.group}};
}
Attributes PoolAttrs(const Pool2DOptions& o, bool is_avg) {
  Attributes a{{"kernel", o.kernel}, {"strides", o.strides}, {"pads", o.pads}};
  if (is_avg) {
    a["count_include_pad"] = int64_t{o.count_include_pad};
  } else {
    a["dilations"] = o.dilations;
  }
  return a;
}
}  // namespace

Value conv2d(Value x, Value w, const Conv2DOptions& o) { return Make("conv2d", {x, w}, ConvAttrs(o)); }
Value conv2d(Value x, Value w, Value bias, const Conv2DOptions& o) {
  return Make("conv2d", {x, w, bias}, ConvAttrs(o));
}
Value max_pool2d(Value x, const Pool2DOptions& o) { return Make("max_pool2d", {x}, PoolAttrs(o, false)); }
Value avg_pool2d(Value x, const Pool2DOptions& o) { return Make("avg_pool2d", {x}, PoolAttrs(o, true)); }
Value softmax(Value x, int64_t axis) { return Make("softmax", {x}, {{"axis", axis}}); }
Value layer_norm(Value x, Value scale, int64_t axis, float epsilon) {
  return Make("layer_norm", {x, scale}, {{"axis", axis}, {"epsilon", epsilon}});
}
Value layer_norm(Value x, Value scale, Value bias, int64_t axis, float epsilon) {
  return Make("layer_norm", {x, scale, bias}, {{"axis", axis}, {"epsilon", epsilon}});
}

Value reshape(Value x, std::vector<int64_t> shape) { return Make("reshape", {x}, {{"shape", std::move(shape)}}); }
Value transpose(Value x, std::vector<int64_t> perm) { return Make("transpose", {x}, {{"perm", std::move(perm)}}); }
Value slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
            std::vector<int64_t> steps) {
  Attributes a{{"starts", std::move(starts)}, {"ends", std::move(ends)}};
  if (!axes.empty()) a["axes"] = std::move(axes);
  if (!steps.empty()) a["steps"] = std::move(steps);
  return Make("slice", {x}, std::move(a));
}
Value concat(std::vector<Value> xs, int64_t axis) { return Make("concat", std::move(xs), {{"axis", axis}}); }
Value gather(Value data, Value indices, int64_t axis) { return Make("gather", {data, indices}, {{"axis", axis}}); }
Value expand(Value x, std::vector<int64_t> shape) { return Make("expand", {x}, {{"shape", std::move(shape)}}); }
Value pad(Value x, std::vector<int64_t> pads, float value) {
  return Make("pad", {x}, {{"pads", std::move(pads)}, {"value", value}});
}

}  // namespace consensor::executor
