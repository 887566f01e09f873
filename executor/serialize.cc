#include "executor/serialize.h"

#include "common/file_io.h"

#include <filesystem>

#include <google/protobuf/text_format.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <unordered_map>

namespace consensor::executor {

namespace {

StatusOr<DType> DTypeFromProto(int value, const std::string& what) {
  DType t = static_cast<DType>(value);
  if (value <= 0 || value > 255 || !IsValidDType(t)) {
    return InvalidArgument(what + " has unknown dtype code " + std::to_string(value));
  }
  return t;
}

StatusOr<Shape> ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& dims, const std::string& what) {
  Shape shape(dims.begin(), dims.end());
  auto n = CheckedNumElements(shape);
  if (!n.ok()) return n.status().WithContext(what);
  return shape;
}

StatusOr<AttrValue> AttrFromProto(const v1::Attribute& a) {
  switch (a.value_case()) {
    case v1::Attribute::kI: return AttrValue(static_cast<int64_t>(a.i()));
    case v1::Attribute::kF: return AttrValue(a.f());
    case v1::Attribute::kInts:
      return AttrValue(std::vector<int64_t>(a.ints().values().begin(), a.ints().values().end()));
    case v1::Attribute::kS: return AttrValue(a.s());
    case v1::Attribute::kDtype: {
      ASSIGN_OR_RETURN(DType t, DTypeFromProto(a.dtype(), "attribute '" + a.name() + "'"));
      return AttrValue(t);
    }
    case v1::Attribute::VALUE_NOT_SET: break;
  }
  return InvalidArgument("attribute '" + a.name() + "' has no value");
}

}  // namespace

StatusOr<Graph> GraphFromProto(const v1::Graph& proto) {
  if (proto.format_version() != kGraphFormatVersion) {
    return InvalidArgument("unsupported graph format version " + std::to_string(proto.format_version()) +
                           " (this build reads version " + std::to_string(kGraphFormatVersion) + ")");
  }
  Graph g;
  std::unordered_map<std::string, int> by_name;
  auto define = [&](const std::string& name, ValueDef v, const char* what) -> StatusOr<int> {
    if (name.empty()) return InvalidArgument(std::string(what) + " has an empty name");
    if (by_name.count(name)) return InvalidArgument("value name '" + name + "' is defined more than once");
    v.name = name;
    int index = g.AddValue(std::move(v));
    by_name.emplace(name, index);
    return index;
  };

  for (const auto& p : proto.inputs()) {
    ValueDef v;
    v.kind = ValueKind::kPlaceholder;
    std::string what = "input '" + p.name() + "'";
    ASSIGN_OR_RETURN(v.dtype, DTypeFromProto(p.dtype(), what));
    ASSIGN_OR_RETURN(v.shape, ShapeFromProto(p.shape(), what));
    RETURN_IF_ERROR(define(p.name(), std::move(v), "an input").status());
  }
  for (const auto& c : proto.constants()) {
    ValueDef v;
    v.kind = ValueKind::kConstant;
    std::string what = "constant '" + c.name() + "'";
    if (c.has_inline_()) {
      ASSIGN_OR_RETURN(v.dtype, DTypeFromProto(c.inline_().dtype(), what));
      ASSIGN_OR_RETURN(v.shape, ShapeFromProto(c.inline_().shape(), what));
      const std::string& data = c.inline_().data();
      auto tensor = Tensor::FromBytes(
          v.dtype, v.shape, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
      if (!tensor.ok()) return tensor.status().WithContext(what);
      v.inline_data = std::move(tensor).value();
    } else if (c.has_blob()) {
      ASSIGN_OR_RETURN(v.dtype, DTypeFromProto(c.blob().dtype(), what));
      ASSIGN_OR_RETURN(v.shape, ShapeFromProto(c.blob().shape(), what));
      if (c.blob().sha256().size() != 32) return InvalidArgument(what + ": blob hash must be 32 bytes");
      BlobRef ref;
      std::copy(c.blob().sha256().begin(), c.blob().sha256().end(), ref.sha256.begin());
      ref.entry = c.blob().entry();
      v.blob = std::move(ref);
    } else {
      return InvalidArgument(what + " has neither inline data nor a blob reference");
    }
    RETURN_IF_ERROR(define(c.name(), std::move(v), "a constant").status());
  }
  // Node outputs first, so nodes may reference each other in any order.
  std::vector<int> node_outputs;
  for (int i = 0; i < proto.nodes_size(); ++i) {
    const auto& n = proto.nodes(i);
    std::string what = "node " + std::to_string(i) + (n.name().empty() ? "" : " ('" + n.name() + "')");
    if (n.outputs_size() != 1) {
      return InvalidArgument(what + " (" + n.op() + ") must have exactly one output, has " +
                             std::to_string(n.outputs_size()));
    }
    ValueDef v;
    v.kind = ValueKind::kNodeOutput;
    ASSIGN_OR_RETURN(int index, define(n.outputs(0), std::move(v), "a node output"));
    node_outputs.push_back(index);
  }
  for (int i = 0; i < proto.nodes_size(); ++i) {
    const auto& n = proto.nodes(i);
    NodeDef node;
    node.op = n.op();
    node.name = n.name();
    node.output = node_outputs[i];
    for (const auto& in : n.inputs()) {
      auto it = by_name.find(in);
      if (it == by_name.end()) {
        return InvalidArgument("node " + std::to_string(i) + " (" + n.op() + ") uses undefined value '" + in + "'");
      }
      node.inputs.push_back(it->second);
    }
    for (const auto& a : n.attributes()) {
      if (node.attrs.count(a.name())) {
        return InvalidArgument("node " + std::to_string(i) + " (" + n.op() + ") repeats attribute '" + a.name() + "'");
      }
      auto value = AttrFromProto(a);
      if (!value.ok()) return value.status().WithContext("node " + std::to_string(i) + " (" + n.op() + ")");
      node.attrs.emplace(a.name(), std::move(value).value());
    }
    g.AddNode(std::move(node));
  }
  std::set<std::string> output_names;
  for (const auto& o : proto.outputs()) {
    if (o.name().empty()) return InvalidArgument("an output has an empty name");
    if (!output_names.insert(o.name()).second) return InvalidArgument("output name '" + o.name() + "' is used twice");
    auto it = by_name.find(o.value());
    if (it == by_name.end())
      return InvalidArgument("output '" + o.name() + "' refers to undefined value '" + o.value() + "'");
    g.AddOutput(o.name(), it->second);
  }
  return g;
}

v1::Graph GraphToProto(const Graph& graph) {
  v1::Graph proto;
  proto.set_format_version(kGraphFormatVersion);
  const auto& values = graph.values();
  auto name_of = [&](int index) -> std::string {
    if (index < 0 || index >= static_cast<int>(values.size())) return "";
    return values[index].name;
  };
  for (const ValueDef& v : values) {
    if (v.kind == ValueKind::kPlaceholder) {
      auto* p = proto.add_inputs();
      p->set_name(v.name);
      p->set_dtype(static_cast<v1::DType>(v.dtype));
      for (int64_t d : v.shape) p->add_shape(d);
    } else if (v.kind == ValueKind::kConstant) {
      auto* c = proto.add_constants();
      c->set_name(v.name);
      if (v.inline_data) {
        auto* t = c->mutable_inline_();
        t->set_dtype(static_cast<v1::DType>(v.dtype));
        for (int64_t d : v.shape) t->add_shape(d);
        t->set_data(v.inline_data->data(), v.inline_data->byte_size());
      } else if (v.blob) {
        auto* b = c->mutable_blob();
        b->set_sha256(v.blob->sha256.data(), v.blob->sha256.size());
        b->set_dtype(static_cast<v1::DType>(v.dtype));
        for (int64_t d : v.shape) b->add_shape(d);
        b->set_entry(v.blob->entry);
      }
    }
  }
  for (const NodeDef& n : graph.nodes()) {
    auto* p = proto.add_nodes();
    p->set_op(n.op);
    p->set_name(n.name);
    for (int in : n.inputs) p->add_inputs(name_of(in));
    p->add_outputs(name_of(n.output));
    for (const auto& [name, value] : n.attrs) {
      auto* a = p->add_attributes();
      a->set_name(name);
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, int64_t>) a->set_i(x);
            else if constexpr (std::is_same_v<T, float>) a->set_f(x);
            else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
              auto* ints = a->mutable_ints();
              for (int64_t i : x) ints->add_values(i);
            } else if constexpr (std::is_same_v<T, std::string>) a->set_s(x);
            else a->set_dtype(static_cast<v1::DType>(x));
          },
          value);
    }
  }
  for (const auto& [name, value] : graph.outputs()) {
    auto* o = proto.add_outputs();
    o->set_name(name);
    o->set_value(name_of(value));
  }
  return proto;
}

StatusOr<Graph> ParseGraph(std::span<const uint8_t> bytes, bool text_format, const Limits& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_graph_file_bytes) {
    return ResourceExhausted("graph is " + std::to_string(bytes.size()) + " bytes, over the cap of " +
                             std::to_string(limits.max_graph_file_bytes));
  }
  v1::Graph proto;
  if (text_format) {
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (!google::protobuf::TextFormat::ParseFromString(text, &proto)) {
      return InvalidArgument("graph is not valid protobuf text format");
    }
  } else {
    if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
        !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return InvalidArgument("graph is not a valid serialized consensor.v1.Graph (malformed or truncated protobuf)");
    }
  }
  return GraphFromProto(proto);
}

static bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StatusOr<Graph> LoadGraphFile(const std::string& path, const Limits& limits) {
  ASSIGN_OR_RETURN(auto bytes, ReadFileBytes(path, limits.max_graph_file_bytes));
  auto g = ParseGraph(bytes, EndsWith(path, ".pbtxt"), limits);
  if (!g.ok()) return g.status().WithContext("graph '" + path + "'");
  return g;
}

std::vector<uint8_t> SerializeGraph(const Graph& graph) {
  std::string s = GraphToProto(graph).SerializeAsString();
  return std::vector<uint8_t>(s.begin(), s.end());
}

Status SaveGraphFile(const std::string& path, const Graph& graph) {
  if (EndsWith(path, ".pbtxt")) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(GraphToProto(graph), &text);
    return WriteFileAtomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  auto bytes = SerializeGraph(graph);
  return WriteFileAtomic(path, bytes);
}

}  // namespace consensor::executor
