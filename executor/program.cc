#include "executor/program.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "executor/serialize.h"

namespace consensor::executor {

StatusOr<std::vector<uint8_t>> DirectoryBlobSource::Get(const Hash256& sha256) {
  std::string path = dir_ + "/" + ToHex(sha256);
  auto bytes = ReadFileBytes(path, max_blob_bytes_);
  if (!bytes.ok()) return bytes.status().WithContext("blob " + ToHex(sha256));
  if (Sha256Of(*bytes) != sha256) return DataLoss("blob file '" + path + "' does not match its hash");
  return bytes;
}

Hash256 MemoryBlobSource::Add(std::vector<uint8_t> bytes) {
  Hash256 h = Sha256Of(bytes);
  blobs_.insert_or_assign(h, std::move(bytes));
  return h;
}

StatusOr<std::vector<uint8_t>> MemoryBlobSource::Get(const Hash256& sha256) {
  auto it = blobs_.find(sha256);
  if (it == blobs_.end()) return NotFound("blob " + ToHex(sha256) + " is not in the in-memory blob source");
  return it->second;
}

namespace {

constexpr int64_t kAlign = 64;

int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Best-fit allocator over one growing arena with coalescing free blocks. Deterministic:
// the plan depends only on the instruction list.
class ArenaPlanner {
 public:
  int64_t Allocate(int64_t bytes) {
    bytes = std::max<int64_t>(kAlign, AlignUp(bytes));
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= bytes && (best == free_.end() || it->second < best->second)) best = it;
    }
    if (best != free_.end()) {
      int64_t offset = best->first;
      int64_t rest = best->second - bytes;
      free_.erase(best);
      if (rest > 0) free_.emplace(offset + bytes, rest);
      return offset;
    }
    // Grow: reuse a free block that ends at the top of the arena.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        int64_t offset = last->first;
        free_.erase(last);
        top_ = offset + bytes;
        return offset;
      }
    }
    int64_t offset = top_;
    top_ += bytes;
    return offset;
  }

  void Free(int64_t offset, int64_t bytes) {
    bytes = std::max<int64_t>(kAlign, AlignUp(bytes));
    auto it = free_.emplace(offset, bytes).first;
    // Merge with the following and preceding blocks.
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  int64_t peak() const { return top_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset -> size
  int64_t top_ = 0;
};

// Container blobs (safetensors) read during one Compile call, with how many constants still
// need each one; a blob's bytes are released when that count reaches zero.
struct ContainerBlob {
  std::vector<uint8_t> bytes;
  SafetensorsIndex index;
  int remaining_uses = 0;
  bool loaded = false;
};
using ContainerCache = std::map<Hash256, ContainerBlob>;

StatusOr<Tensor> ResolveContainerEntry(const ValueDef& v, BlobSource* blobs, ContainerCache& cache) {
  const BlobRef& ref = *v.blob;
  const std::string what =
      "constant '" + v.name + "' (entry '" + ref.entry + "' of safetensors blob " + ToHex(ref.sha256) + ")";
  auto it = cache.find(ref.sha256);
  if (it == cache.end()) return Internal(what + ": container blob was not counted");
  ContainerBlob& c = it->second;
  if (!c.loaded) {
    auto bytes = blobs->Get(ref.sha256);
    if (!bytes.ok()) return bytes.status().WithContext(what);
    c.bytes = std::move(bytes).value();
    auto index = ParseSafetensors(c.bytes);
    if (!index.ok()) {
      return Status(index.status().code(),
                    what + ": blob is not a valid safetensors file: " + index.status().message());
    }
    c.index = std::move(index).value();
    c.loaded = true;
  }
  const SafetensorsEntry* e = c.index.Find(ref.entry);
  if (e == nullptr) return NotFound(what + ": the blob has no tensor named '" + ref.entry + "'");
  if (e->dtype != v.dtype || e->shape != v.shape) {
    return InvalidArgument(what + ": the constant is declared " + std::string(DTypeName(v.dtype)) +
                           ShapeToString(v.shape) + " but the entry is " + std::string(DTypeName(e->dtype)) +
                           ShapeToString(e->shape));
  }
  auto t = ReadSafetensorsTensor(c.bytes, c.index, ref.entry);
  if (!t.ok()) return t.status().WithContext(what);
  if (--c.remaining_uses <= 0) cache.erase(it);
  return t;
}

StatusOr<Tensor> ResolveConstant(const ValueDef& v, BlobSource* blobs, ContainerCache& containers) {
  if (v.inline_data) return *v.inline_data;
  if (!v.blob) return InvalidArgument("constant '" + v.name + "' has no data");
  if (!blobs) {
    return FailedPrecondition("constant '" + v.name + "' is stored in blob " + ToHex(v.blob->sha256) +
                              " but no blob source was given (use --blobs DIR)");
  }
  if (!v.blob->entry.empty()) return ResolveContainerEntry(v, blobs, containers);
  auto bytes = blobs->Get(v.blob->sha256);
  if (!bytes.ok()) return bytes.status().WithContext("constant '" + v.name + "'");
  auto t = Tensor::FromBytes(v.dtype, v.shape, *bytes);
  if (!t.ok()) return t.status().WithContext("constant '" + v.name + "' (blob " + ToHex(v.blob->sha256) + ")");
  return t;
}

}  // namespace

StatusOr<Program> Compile(const Graph& graph, const ValidatedGraph& vg, BlobSource* blobs, const Limits& limits) {
  const auto& values = graph.values();
  Program p;
  p.graph_id = vg.id;
  p.total_flops = vg.total_flops;
  ArenaPlanner planner;
  std::vector<int> buffer_of(values.size(), -1);

  auto new_buffer = [&](int value, BufferRole role) {
    Buffer b;
    b.dtype = vg.types[value].dtype;
    b.shape = vg.types[value].shape;
    b.bytes = NumElements(b.shape) * DTypeSize(b.dtype);
    b.role = role;
    b.offset = planner.Allocate(b.bytes);
    p.buffers.push_back(std::move(b));
    buffer_of[value] = static_cast<int>(p.buffers.size()) - 1;
    return buffer_of[value];
  };

  // Inputs and constants live for the whole run. Check their total against the cap before
  // reading any blob, so an over-cap task never loads its weights.
  int64_t resident = 0;
  for (int v : vg.placeholders) resident += AlignUp(NumElements(vg.types[v].shape) * DTypeSize(vg.types[v].dtype));
  for (int v : vg.constants) resident += AlignUp(NumElements(vg.types[v].shape) * DTypeSize(vg.types[v].dtype));
  if (resident > limits.max_total_bytes) {
    return ResourceExhausted("inputs and weights need " + std::to_string(resident) + " bytes, over the cap of " +
                             std::to_string(limits.max_total_bytes));
  }
  for (int v : vg.placeholders) p.inputs.emplace_back(values[v].name, new_buffer(v, BufferRole::kInput));
  ContainerCache containers;
  for (int v : vg.constants) {
    const ValueDef& def = values[v];
    if (!def.inline_data && def.blob && !def.blob->entry.empty()) ++containers[def.blob->sha256].remaining_uses;
  }
  for (int v : vg.constants) {
    ASSIGN_OR_RETURN(Tensor t, ResolveConstant(values[v], blobs, containers));
    p.constants.emplace_back(new_buffer(v, BufferRole::kConstant), std::move(t));
  }
  containers.clear();  // every container was released by its last use; this is a backstop

  // Last use of every intermediate; outputs are used "after the end".
  const int n = static_cast<int>(vg.order.size());
  std::vector<int> last_use(values.size(), -1);
  for (int i = 0; i < n; ++i) {
    for (int in : vg.order[i].inputs) last_use[in] = i;
  }
  std::set<int> output_values;
  for (const auto& [name, v] : vg.outputs) output_values.insert(v);
  for (int v : output_values) last_use[v] = n;

  for (int i = 0; i < n; ++i) {
    const CanonicalNode& cn = vg.order[i];
    const NodeDef& node = graph.nodes()[cn.node];
    Instruction ins;
    ins.op = cn.schema->op;
    ins.op_name = std::string(cn.schema->name);
    ins.node_label =
        "node " + std::to_string(cn.node) + " (" + node.op + (node.name.empty() ? "" : " '" + node.name + "'") + ")";
    ins.params = cn.inferred.params;
    ins.flops = cn.inferred.flops;
    for (int in : cn.inputs) ins.inputs.push_back(buffer_of[in]);
    // The output is allocated while the inputs are still live, so it never aliases them.
    ins.output = new_buffer(cn.output, BufferRole::kIntermediate);
    if (!cn.inferred.kernel_input_shapes.empty()) {
      ins.input_view_shapes = cn.inferred.kernel_input_shapes;
    } else {
      for (int in : cn.inputs) ins.input_view_shapes.push_back(vg.types[in].shape);
    }
    ins.output_view_shape = cn.inferred.kernel_output_shape.value_or(vg.types[cn.output].shape);
    // Free intermediates whose last use is this instruction (each once).
    std::set<int> seen;
    for (int in : cn.inputs) {
      if (!seen.insert(in).second) continue;
      const Buffer& b = p.buffers[buffer_of[in]];
      if (b.role == BufferRole::kIntermediate && last_use[in] == i) planner.Free(b.offset, b.bytes);
    }
    if (last_use[cn.output] < 0) planner.Free(p.buffers[ins.output].offset, p.buffers[ins.output].bytes);
    p.instructions.push_back(std::move(ins));
  }
  for (const auto& [name, v] : vg.outputs) p.outputs.emplace_back(name, buffer_of[v]);
  p.arena_bytes = planner.peak();
  if (p.arena_bytes > limits.max_total_bytes) {
    return ResourceExhausted("program needs " + std::to_string(p.arena_bytes) +
                             " bytes of memory (inputs, weights and live values), over the cap of " +
                             std::to_string(limits.max_total_bytes));
  }
  return p;
}

StatusOr<Program> CompileGraph(const Graph& graph, BlobSource* blobs, const Limits& limits) {
  ASSIGN_OR_RETURN(ValidatedGraph vg, Validate(graph, limits));
  return Compile(graph, vg, blobs, limits);
}

}  // namespace consensor::executor
