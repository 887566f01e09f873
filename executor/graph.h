// The in-memory graph IR and the builder API.
//
//   Graph g;
//   Value x = g.input("x", DType::kF32, {4, 16});
//   Value w = g.constant(weights);            // a Tensor
//   Value b = g.constant(bias);
//   Value y = tanh(matmul(x, w) + b);
//   g.output("y", y);
//
// Building never fails: mistakes (wrong shapes, unknown ops…) are reported by Validate()
// with a message naming the node, so graphs loaded from files and graphs built in code go
// through exactly the same checks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/dtype.h"
#include "common/sha256.h"
#include "common/tensor.h"

namespace consensor::executor {

using AttrValue = std::variant<int64_t, float, std::vector<int64_t>, std::string, DType>;
// Ordered by name, so iteration order (and the canonical encoding) is deterministic.
using Attributes = std::map<std::string, AttrValue>;

enum class ValueKind : uint8_t { kPlaceholder, kConstant, kNodeOutput };

// A tensor stored outside the graph, addressed by the SHA-256 of the blob.
struct BlobRef {
  Hash256 sha256{};
  std::string entry;  // empty: raw bytes; otherwise a tensor name inside a safetensors blob
};

struct ValueDef {
  ValueKind kind = ValueKind::kNodeOutput;
  std::string name;
  // Declared type: for placeholders and constants. Node outputs get theirs from inference.
  DType dtype = DType::kInvalid;
  Shape shape;
  std::optional<Tensor> inline_data;  // constants stored in the graph
  std::optional<BlobRef> blob;        // constants stored as blobs
  int producer = -1;                  // node index for kNodeOutput
};

struct NodeDef {
  std::string op;
  std::vector<int> inputs;  // value indices, argument order
  int output = -1;          // value index
  Attributes attrs;
  std::string name;  // for messages only; never part of the identity
};

class Graph;

// A handle to a value of a graph under construction.
class Value {
 public:
  Value() = default;
  Value(Graph* graph, int index) : graph_(graph), index_(index) {}
  Graph* graph() const { return graph_; }
  int index() const { return index_; }
  bool valid() const { return graph_ != nullptr && index_ >= 0; }

 private:
  Graph* graph_ = nullptr;
  int index_ = -1;
};

class Graph {
 public:
  Graph() = default;

  // --- builder ---
  Value input(std::string name, DType dtype, Shape shape);
  Value constant(Tensor tensor, std::string name = "");
  Value constant_blob(const Hash256& sha256, DType dtype, Shape shape, std::string name = "", std::string entry = "");
  Value scalar(float v);  // an f32 constant of shape []
  // Adds a node with one output. Value handles from another graph are recorded as invalid
  // inputs and reported by validation.
  Value node(std::string op, std::vector<Value> inputs, Attributes attrs = {}, std::string name = "");
  void output(std::string name, Value v);

  // --- raw access (serialization, validation) ---
  int AddValue(ValueDef v);
  int AddNode(NodeDef n);  // sets the output value's producer
  void AddOutput(std::string name, int value) { outputs_.emplace_back(std::move(name), value); }

  const std::vector<ValueDef>& values() const { return values_; }
  const std::vector<NodeDef>& nodes() const { return nodes_; }
  const std::vector<std::pair<std::string, int>>& outputs() const { return outputs_; }
  std::vector<ValueDef>& mutable_values() { return values_; }

 private:
  std::string FreshName(const char* prefix);
  std::vector<ValueDef> values_;
  std::vector<NodeDef> nodes_;
  std::vector<std::pair<std::string, int>> outputs_;
  int next_name_ = 0;
};

// --- builder functions that read like the math ---
Value neg(Value x);
Value abs(Value x);
Value relu(Value x);
Value exp(Value x);
Value log(Value x);
Value sqrt(Value x);
Value rsqrt(Value x);
Value tanh(Value x);
Value sigmoid(Value x);
Value erf(Value x);
Value gelu(Value x);
Value gelu_tanh(Value x);
Value sin(Value x);
Value cos(Value x);
Value asin(Value x);
Value acos(Value x);
Value atan(Value x);
Value sinh(Value x);
Value cosh(Value x);
Value asinh(Value x);
Value acosh(Value x);
Value atanh(Value x);
Value floor(Value x);
Value ceil(Value x);
Value round(Value x);  // half to even
Value logical_not(Value x);
Value identity(Value x);
Value cast(Value x, DType to);

Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator-(Value a);
Value pow(Value a, Value b);
Value fmod(Value a, Value b);  // remainder with the sign of a
Value maximum(Value a, Value b);
Value minimum(Value a, Value b);
Value equal(Value a, Value b);
Value not_equal(Value a, Value b);
Value less(Value a, Value b);
Value less_equal(Value a, Value b);
Value greater(Value a, Value b);
Value greater_equal(Value a, Value b);
Value logical_and(Value a, Value b);
Value logical_or(Value a, Value b);
Value logical_xor(Value a, Value b);
Value where(Value cond, Value a, Value b);

Value reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims = false);
Value reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims = false);
Value reduce_max(Value x, std::vector<int64_t> axes, bool keepdims = false);
Value reduce_prod(Value x, std::vector<int64_t> axes, bool keepdims = false);
Value reduce_min(Value x, std::vector<int64_t> axes, bool keepdims = false);
Value argmax(Value x, int64_t axis, bool keepdims = false);
// The i64 indices of the k largest (or smallest) elements along axis, best first.
Value top_k(Value x, int64_t k, int64_t axis = -1, bool largest = true);
// Running sum along `axis` (DETERMINISM.md 4.6a).
Value cumsum(Value x, int64_t axis, bool exclusive = false, bool reverse = false);

Value matmul(Value a, Value b);
Value matmul_i8(Value a, Value b);
struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> pads = {0, 0, 0, 0};  // top, left, bottom, right
  std::vector<int64_t> dilations = {1, 1};
  int64_t group = 1;
};
Value conv2d(Value x, Value w, const Conv2DOptions& options = {});
Value conv2d(Value x, Value w, Value bias, const Conv2DOptions& options = {});
struct Pool2DOptions {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> pads = {0, 0, 0, 0};
  std::vector<int64_t> dilations = {1, 1};
  bool count_include_pad = false;
};
Value max_pool2d(Value x, const Pool2DOptions& options);
Value avg_pool2d(Value x, const Pool2DOptions& options);
Value softmax(Value x, int64_t axis = -1);
Value layer_norm(Value x, Value scale, int64_t axis = -1, float epsilon = 1e-5f);
Value layer_norm(Value x, Value scale, Value bias, int64_t axis = -1, float epsilon = 1e-5f);

Value reshape(Value x, std::vector<int64_t> shape);  // one dim may be -1
Value transpose(Value x, std::vector<int64_t> perm);
// ONNX semantics; empty axes means 0..starts.size()-1, empty steps means all 1.
Value slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes = {},
            std::vector<int64_t> steps = {});
Value concat(std::vector<Value> xs, int64_t axis);
Value gather(Value data, Value indices, int64_t axis = 0);
Value expand(Value x, std::vector<int64_t> shape);
// pads: begin for every dim, then end for every dim (ONNX order).
Value pad(Value x, std::vector<int64_t> pads, float value = 0.0f);

}  // namespace consensor::executor
