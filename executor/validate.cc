#include "executor/validate.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

namespace consensor::executor {

namespace {

std::string NodeLabel(const Graph& g, int node) {
  const NodeDef& n = g.nodes()[node];
  std::string s = "node " + std::to_string(node) + " (" + n.op;
  if (!n.name.empty()) s += " '" + n.name + "'";
  return s + ")";
}

// The canonical encoding hashed into ids (docs/DETERMINISM.md section 3). Every field is
// length-prefixed or fixed-size so no two different structures encode the same bytes.
void HashShape(Sha256& h, DType dtype, const Shape& shape) {
  h.UpdateU8(static_cast<uint8_t>(dtype));
  h.UpdateU32(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) h.UpdateU64(static_cast<uint64_t>(d));
}

void HashString(Sha256& h, std::string_view s) {
  h.UpdateU32(static_cast<uint32_t>(s.size()));
  h.Update(s);
}

void HashAttributes(Sha256& h, const Attributes& attrs) {
  h.UpdateU32(static_cast<uint32_t>(attrs.size()));
  for (const auto& [name, value] : attrs) {
    HashString(h, name);
    h.UpdateU8(static_cast<uint8_t>(value.index()));
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            h.UpdateU64(static_cast<uint64_t>(x));
          } else if constexpr (std::is_same_v<T, float>) {
            uint32_t bits;
            std::memcpy(&bits, &x, 4);
            h.UpdateU32(bits);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            h.UpdateU32(static_cast<uint32_t>(x.size()));
            for (int64_t i : x) h.UpdateU64(static_cast<uint64_t>(i));
          } else if constexpr (std::is_same_v<T, std::string>) {
            HashString(h, x);
          } else {
            h.UpdateU8(static_cast<uint8_t>(x));
          }
        },
        value);
  }
}

struct HashKey {
  size_t operator()(const Hash256& h) const {
    size_t v;
    std::memcpy(&v, h.data(), sizeof(v));
    return v;
  }
};

}  // namespace

StatusOr<ValidatedGraph> Validate(const Graph& graph, const Limits& limits) {
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  const int num_values = static_cast<int>(values.size());
  ValidatedGraph out;
  out.types.resize(values.size());

  if (static_cast<int64_t>(nodes.size()) > limits.max_ops) {
    return ResourceExhausted("graph has " + std::to_string(nodes.size()) + " nodes, over the cap of " +
                             std::to_string(limits.max_ops));
  }
  if (graph.outputs().empty()) return InvalidArgument("graph has no outputs");

  auto check_elements = [&](const TypeInfo& t, const std::string& what) -> Status {
    ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(t.shape));
    if (n > limits.max_elements_per_tensor) {
      return ResourceExhausted(what + " has " + std::to_string(n) + " elements, over the cap of " +
                               std::to_string(limits.max_elements_per_tensor));
    }
    return OkStatus();
  };

  // Leaf values: declared types, structural hashes.
  std::vector<Hash256> value_hash(values.size());
  std::vector<bool> hashed(values.size(), false);
  std::map<std::string, int> placeholder_by_name;
  for (int i = 0; i < num_values; ++i) {
    const ValueDef& v = values[i];
    if (v.kind == ValueKind::kNodeOutput) {
      if (v.producer < 0 || v.producer >= static_cast<int>(nodes.size()) || nodes[v.producer].output != i) {
        return InvalidArgument("value '" + v.name + "' has no producing node");
      }
      continue;
    }
    std::string what = (v.kind == ValueKind::kPlaceholder ? "input '" : "constant '") + v.name + "'";
    if (!IsValidDType(v.dtype)) return InvalidArgument(what + " has an invalid dtype");
    out.types[i] = TypeInfo{v.dtype, v.shape};
    RETURN_IF_ERROR(check_elements(out.types[i], what));
    Sha256 h;
    if (v.kind == ValueKind::kPlaceholder) {
      if (v.name.empty()) return InvalidArgument("an input has an empty name");
      if (!placeholder_by_name.emplace(v.name, i).second)
        return InvalidArgument("input name '" + v.name + "' is used twice");
      h.Update(std::string_view("placeholder"));
      HashString(h, v.name);
      HashShape(h, v.dtype, v.shape);
    } else {
      h.Update(std::string_view("constant"));
      HashShape(h, v.dtype, v.shape);
      if (v.inline_data) {
        if (v.inline_data->dtype() != v.dtype || v.inline_data->shape() != v.shape) {
          return InvalidArgument(what + ": inline data does not match its declared type");
        }
        // Same content id as a blob holding the raw bytes, so inline and blob spellings agree.
        Hash256 content = Sha256Of(v.inline_data->bytes());
        h.Update(content);
        HashString(h, "");
      } else if (v.blob) {
        h.Update(v.blob->sha256);
        HashString(h, v.blob->entry);
      } else {
        return InvalidArgument(what + " has no data");
      }
    }
    value_hash[i] = h.Finish();
    hashed[i] = true;
  }
  for (const auto& [name, index] : placeholder_by_name) out.placeholders.push_back(index);

  // Outputs sorted by name define the traversal roots.
  std::vector<std::pair<std::string, int>> outputs = graph.outputs();
  std::sort(outputs.begin(), outputs.end());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].first.empty()) return InvalidArgument("an output has an empty name");
    if (i > 0 && outputs[i].first == outputs[i - 1].first) {
      return InvalidArgument("output name '" + outputs[i].first + "' is used twice");
    }
    if (outputs[i].second < 0 || outputs[i].second >= num_values) {
      return InvalidArgument("output '" + outputs[i].first + "' refers to an invalid value");
    }
  }

  // Iterative depth-first post-order from the outputs. State: 0 unvisited, 1 on the stack,
  // 2 done. Meeting a node in state 1 means a cycle.
  std::vector<uint8_t> state(nodes.size(), 0);
  std::vector<int> canonical_value(values.size(), -1);  // value -> representative value
  for (int i = 0; i < num_values; ++i) {
    if (values[i].kind != ValueKind::kNodeOutput) canonical_value[i] = i;
  }
  std::unordered_map<Hash256, int, HashKey> node_by_hash;  // structural hash -> representative value
  std::vector<bool> constant_used(values.size(), false);

  struct Frame {
    int node;
    size_t next_input;
  };
  std::vector<Frame> stack;
  for (const auto& [name, root_value] : outputs) {
    if (values[root_value].kind != ValueKind::kNodeOutput) {
      if (values[root_value].kind == ValueKind::kConstant && !constant_used[root_value]) {
        constant_used[root_value] = true;
        out.constants.push_back(root_value);
      }
      continue;
    }
    int root = values[root_value].producer;
    if (state[root] == 2) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const NodeDef& n = nodes[f.node];
      if (f.next_input < n.inputs.size()) {
        int in = n.inputs[f.next_input++];
        if (in < 0 || in >= num_values) {
          return InvalidArgument(NodeLabel(graph, f.node) + " has an invalid input (a value from another graph?)");
        }
        const ValueDef& iv = values[in];
        if (iv.kind == ValueKind::kConstant && !constant_used[in]) {
          constant_used[in] = true;
          out.constants.push_back(in);
        }
        if (iv.kind != ValueKind::kNodeOutput) continue;
        int producer = iv.producer;
        if (state[producer] == 1) {
          return InvalidArgument("graph has a cycle through " + NodeLabel(graph, producer));
        }
        if (state[producer] == 0) {
          state[producer] = 1;
          stack.push_back({producer, 0});  // invalidates f; loop re-reads back()
        }
        continue;
      }
      // All inputs are done: infer, hash, deduplicate.
      int node_index = f.node;
      stack.pop_back();
      state[node_index] = 2;
      const NodeDef& node = nodes[node_index];
      std::string label = NodeLabel(graph, node_index);
      const OpSchema* schema = FindOpSchema(node.op);
      if (!schema) return InvalidArgument(label + ": unknown op '" + node.op + "'");
      int arity = static_cast<int>(node.inputs.size());
      if (arity < schema->min_inputs || (schema->max_inputs >= 0 && arity > schema->max_inputs)) {
        std::string expected = schema->max_inputs < 0 ? "at least " + std::to_string(schema->min_inputs)
                               : schema->min_inputs == schema->max_inputs
                                   ? std::to_string(schema->min_inputs)
                                   : std::to_string(schema->min_inputs) + " to " + std::to_string(schema->max_inputs);
        return InvalidArgument(label + ": takes " + expected + " inputs, got " + std::to_string(arity));
      }
      for (const auto& [attr_name, attr_value] : node.attrs) {
        if (std::find(schema->attributes.begin(), schema->attributes.end(), attr_name) == schema->attributes.end()) {
          return InvalidArgument(label + ": unknown attribute '" + attr_name + "' for op '" + node.op + "'");
        }
      }
      CanonicalNode cn;
      cn.node = node_index;
      cn.schema = schema;
      std::vector<TypeInfo> input_types;
      for (int in : node.inputs) {
        int rep = canonical_value[in];
        cn.inputs.push_back(rep);
        input_types.push_back(out.types[rep]);
      }
      auto inferred = schema->infer(input_types, node.attrs);
      if (!inferred.ok()) return inferred.status().WithContext(label);
      cn.inferred = std::move(inferred).value();
      RETURN_IF_ERROR(check_elements(cn.inferred.output, label + " output"));

      Sha256 h;
      h.Update(std::string_view("node"));
      HashString(h, schema->name);
      HashAttributes(h, cn.inferred.canonical_attrs);
      h.UpdateU32(static_cast<uint32_t>(cn.inputs.size()));
      for (int rep : cn.inputs) h.Update(value_hash[rep]);
      Hash256 hash = h.Finish();

      auto [it, inserted] = node_by_hash.emplace(hash, node.output);
      canonical_value[node.output] = it->second;
      if (!inserted) continue;  // structurally identical to an earlier node: merged
      value_hash[node.output] = hash;
      out.types[node.output] = cn.inferred.output;
      cn.output = node.output;
      out.total_flops =
          (cn.inferred.flops > INT64_MAX - out.total_flops) ? INT64_MAX : out.total_flops + cn.inferred.flops;
      out.order.push_back(std::move(cn));
    }
  }
  if (out.total_flops > limits.max_flops) {
    return ResourceExhausted("graph needs about " + std::to_string(out.total_flops) + " operations, over the cap of " +
                             std::to_string(limits.max_flops));
  }

  Sha256 id;
  id.Update(std::string_view("consensor.graph.v1"));
  id.UpdateU32(static_cast<uint32_t>(out.placeholders.size()));
  for (int p : out.placeholders) id.Update(value_hash[p]);
  id.UpdateU32(static_cast<uint32_t>(outputs.size()));
  for (const auto& [name, value] : outputs) {
    int rep = canonical_value[value];
    HashString(id, name);
    id.Update(value_hash[rep]);
    out.outputs.emplace_back(name, rep);
  }
  out.id = id.Finish();
  return out;
}

}  // namespace consensor::executor
