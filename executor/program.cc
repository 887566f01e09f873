#include "executor/program.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "executor/serialize.h"
#include "kernels/checks/half_plan.h"

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

// A run [head, last] of consecutive canonical instructions that can execute as one: the head is
// a conv2d, a gather or an elementwise op with an f32 output that reads no f16/bf16 value, each later one an epilogue
// step (kernels::EpilogueOpAllowed) over f32 values of the head's output shape reading at least one value of the run,
// and every value of the run but the last is read only inside the run and is no graph output (DETERMINISM.md 3.1).
struct FusionRun {
  int head = 0;
  int last = 0;
  // First instruction of each LeakyRelu pattern in the run (FindLeakyRelu): three instructions
  // that become two epilogue steps.
  std::set<int> leaky_relu;
  // A conv2d of f16 or bf16 values and the relu after it (HalfConvRelu): no epilogue, the conv's
  // OpParams::relu_output.
  bool half_relu = false;
};

// A conv2d whose output is f16 or bf16, with every input of that dtype, followed by a relu of
// that value of the same dtype and shape, the relu its only reader and the conv's value no graph
// output (DETERMINISM.md 3.1: the relu's bits are those of the f32 relu before the conv's one
// rounding).
bool HalfConvRelu(const ValidatedGraph& vg, int at, const std::vector<std::vector<int>>& readers,
                  const std::set<int>& output_values) {
  if (at + 1 >= static_cast<int>(vg.order.size())) return false;
  const CanonicalNode& conv = vg.order[at];
  const CanonicalNode& relu = vg.order[at + 1];
  if (conv.schema->op != kernels::Op::kConv2D || relu.schema->op != kernels::Op::kRelu) return false;
  const TypeInfo& out = vg.types[conv.output];
  if (!IsHalfDType(out.dtype) || output_values.count(conv.output) || readers[conv.output] != std::vector<int>{at + 1}) {
    return false;
  }
  for (int in : conv.inputs) {
    if (vg.types[in].dtype != out.dtype) return false;
  }
  if (conv.inferred.kernel_output_shape && *conv.inferred.kernel_output_shape != out.shape) return false;
  return relu.inputs == std::vector<int>{conv.output} && relu.inferred.kernel_input_shapes.empty() &&
         !relu.inferred.kernel_output_shape && vg.types[relu.output].dtype == out.dtype &&
         vg.types[relu.output].shape == out.shape;
}

// The f32 value of a constant of one element, if `value` is one.
std::optional<float> ScalarConstant(int value, const std::map<int, const Tensor*>& constants) {
  auto it = constants.find(value);
  if (it == constants.end() || it->second->dtype() != DType::kF32 || it->second->num_elements() != 1) {
    return std::nullopt;
  }
  return it->second->data_as<float>()[0];
}

// Imported LeakyRelu (ONNX.md): at `at`, `c = less(v, z)`, `m = mul(v, a)`, `y = where(c, m, v)`
// with z a constant zero and a a constant in (0, 1], over f32 values of one shape. It runs as
// the epilogue steps `m = mul(v, a)`, `y = max(v, m)`, which give where's bits for every v that
// is not a NaN with a payload (DETERMINISM.md 3.1); the caller checks that v is not one.
bool FindLeakyRelu(const ValidatedGraph& vg, int at, int v, const std::map<int, const Tensor*>& constants) {
  if (at + 2 >= static_cast<int>(vg.order.size())) return false;
  const CanonicalNode& lt = vg.order[at];
  const CanonicalNode& mul = vg.order[at + 1];
  const CanonicalNode& sel = vg.order[at + 2];
  if (lt.schema->op != kernels::Op::kLess || mul.schema->op != kernels::Op::kMul ||
      sel.schema->op != kernels::Op::kWhere) {
    return false;
  }
  if (lt.inputs.size() != 2 || lt.inputs[0] != v || mul.inputs.size() != 2 || mul.inputs[0] != v ||
      sel.inputs != std::vector<int>{lt.output, mul.output, v}) {
    return false;
  }
  const std::optional<float> zero = ScalarConstant(lt.inputs[1], constants);
  const std::optional<float> alpha = ScalarConstant(mul.inputs[1], constants);
  const Shape& shape = vg.types[v].shape;
  return zero && *zero == 0.0f && alpha && *alpha > 0.0f && *alpha <= 1.0f && vg.types[v].dtype == DType::kF32 &&
         vg.types[mul.output].shape == shape && vg.types[sel.output].shape == shape &&
         vg.types[sel.output].dtype == DType::kF32;
}

bool CanHeadFusion(const CanonicalNode& cn, const ValidatedGraph& vg) {
  const TypeInfo& out = vg.types[cn.output];
  if (out.dtype != DType::kF32) return false;
  // A cast from f16/bf16 computes through the CPU backend's widening, which takes no epilogue.
  for (int in : cn.inputs) {
    if (IsHalfDType(vg.types[in].dtype)) return false;
  }
  if (cn.schema->op == kernels::Op::kConv2D) {
    return !cn.inferred.kernel_output_shape || *cn.inferred.kernel_output_shape == out.shape;
  }
  // A gather of f32 values (the Resize lowering's taps, DETERMINISM.md 6.2): its copy of the bits
  // is the run's first value.
  if (cn.schema->op == kernels::Op::kGather) {
    return cn.inferred.kernel_input_shapes.empty() && !cn.inferred.kernel_output_shape;
  }
  return kernels::FamilyOf(cn.schema->op) == kernels::OpFamily::kElementwise &&
         cn.inferred.kernel_input_shapes.empty() && !cn.inferred.kernel_output_shape;
}

std::vector<FusionRun> PlanFusion(const ValidatedGraph& vg, const std::set<int>& output_values,
                                  const std::map<int, const Tensor*>& constants) {
  const int n = static_cast<int>(vg.order.size());
  std::vector<std::vector<int>> readers(vg.types.size());
  for (int i = 0; i < n; ++i) {
    for (int in : vg.order[i].inputs) readers[in].push_back(i);
  }
  std::vector<FusionRun> runs;
  for (int i = 0; i < n; ++i) {
    if (HalfConvRelu(vg, i, readers, output_values)) {
      runs.push_back({i, i + 1, {}, true});
      ++i;
      continue;
    }
    if (!CanHeadFusion(vg.order[i], vg)) continue;
    const Shape& shape = vg.types[vg.order[i].output].shape;
    std::set<int> run_values = {vg.order[i].output};
    int last = i, steps = 0;
    std::set<int> leaky_relu;
    // Where the run may end: after the head or after a whole step (not inside a pattern).
    std::set<int> ends = {i};
    // The head's value carries no NaN payload when the head is an arithmetic op (a conv2d, or
    // an op an epilogue may hold), which canonicalizes NaNs (DETERMINISM.md 1.1).
    const kernels::Op head_op = vg.order[i].schema->op;
    const bool head_canonical = head_op == kernels::Op::kConv2D || kernels::EpilogueOpAllowed(head_op, 1) ||
                                kernels::EpilogueOpAllowed(head_op, 2);
    while (last + 1 < n && steps < kernels::kMaxEpilogueSteps) {
      if (steps + 2 <= kernels::kMaxEpilogueSteps) {
        bool found = false;
        for (int v : run_values) {
          if ((v != vg.order[i].output || head_canonical) && vg.types[v].shape == shape &&
              FindLeakyRelu(vg, last + 1, v, constants)) {
            found = true;
            break;
          }
        }
        if (found) {
          leaky_relu.insert(last + 1);
          run_values.insert(vg.order[last + 2].output);  // m, the mul's value, is a step's value
          run_values.insert(vg.order[last + 3].output);
          last += 3;
          steps += 2;
          ends.insert(last);
          continue;
        }
      }
      const CanonicalNode& step = vg.order[last + 1];
      const int arity = static_cast<int>(step.inputs.size());
      bool ok = kernels::EpilogueOpAllowed(step.schema->op, arity) && vg.types[step.output].dtype == DType::kF32 &&
                vg.types[step.output].shape == shape && step.inferred.kernel_input_shapes.empty() &&
                !step.inferred.kernel_output_shape;
      bool reads_run = false;
      for (int in : step.inputs) {
        ok = ok && vg.types[in].dtype == DType::kF32;
        reads_run = reads_run || run_values.count(in) != 0;
      }
      if (!ok || !reads_run) break;
      run_values.insert(step.output);
      ++last;
      ++steps;
      ends.insert(last);
    }
    // Shorten the run until no value but its last escapes it.
    for (; last > i; --last) {
      if (!ends.count(last)) continue;
      bool contained = true;
      for (int k = i; k < last && contained; ++k) {
        const int v = vg.order[k].output;
        if (output_values.count(v)) contained = false;
        for (int r : readers[v]) contained = contained && r > k && r <= last;
      }
      if (contained) break;
    }
    if (last > i) {
      std::set<int> patterns;
      for (int at : leaky_relu) {
        if (at < last) patterns.insert(at);
      }
      runs.push_back({i, last, std::move(patterns)});
      i = last;
    }
  }
  return runs;
}

// An op whose output is its input's bytes under another shape (data is row-major and
// contiguous): a reshape (ONNX Reshape, Squeeze, Unsqueeze and Flatten import as one), an
// identity, and the data-movement ops that keep every element where it is: a transpose that
// only moves dims of size 1, a slice with unit steps that takes everything, an expand or a pad
// that adds no element (pads are non-negative, so all are zero; broadcasting never reorders),
// a concat of one input.
bool RelabelsOnly(const CanonicalNode& cn, const ValidatedGraph& vg) {
  if (cn.inputs.size() != 1 || !cn.inferred.kernel_input_shapes.empty() || cn.inferred.kernel_output_shape) {
    return false;
  }
  const TypeInfo& in = vg.types[cn.inputs[0]];
  const TypeInfo& out = vg.types[cn.output];
  if (in.dtype != out.dtype || NumElements(in.shape) != NumElements(out.shape)) return false;
  const kernels::OpParams& params = cn.inferred.params;
  switch (cn.schema->op) {
    case kernels::Op::kReshape:
    case kernels::Op::kIdentity:
    case kernels::Op::kExpand:
    case kernels::Op::kPad:
    case kernels::Op::kConcat: return true;
    case kernels::Op::kSlice:
      // Equal counts with unit steps: every dim is taken whole, from 0.
      return std::all_of(params.steps.begin(), params.steps.end(), [](int64_t step) { return step == 1; });
    case kernels::Op::kTranspose: {
      // The dims longer than 1 keep their order.
      int64_t previous = -1;
      for (int64_t axis : params.perm) {
        if (in.shape[axis] <= 1) continue;
        if (axis < previous) return false;
        previous = axis;
      }
      return true;
    }
    default: return false;
  }
}

// A conv2d whose input is a zero-stuffed tensor, as the ConvTranspose lowering makes it
// (ONNX.md): x -> reshapes -> pad (+0.0 after unit dims) -> reshapes -> [slice -> reshapes] ->
// conv2d with both strides 1. In the fused list the conv reads x itself
// (OpParams::input_stuffing) and the reshapes, pad and slice do not run (DETERMINISM.md 3.1).
struct StuffedConv {
  int conv = 0;                   // canonical index of the conv2d
  int source = 0;                 // value id of x, read in place of the stuffed value
  std::vector<int> dropped;       // canonical indices of the instructions it replaces
  Shape source_view;              // x as [N, C, XH, XW]
  std::vector<int64_t> stuffing;  // OpParams::input_stuffing
};

std::optional<StuffedConv> FindStuffedConv(const ValidatedGraph& vg, int at, const std::vector<int>& producer,
                                           const std::vector<std::vector<int>>& readers,
                                           const std::set<int>& output_values) {
  const CanonicalNode& conv = vg.order[at];
  if (conv.schema->op != kernels::Op::kConv2D || !conv.inferred.kernel_input_shapes.empty() ||
      conv.inferred.kernel_output_shape || conv.inferred.params.strides != std::vector<int64_t>{1, 1}) {
    return std::nullopt;
  }
  for (int in : conv.inputs) {
    if (vg.types[in].dtype != DType::kF32) return std::nullopt;
  }
  const Shape& conv_in = vg.types[conv.inputs[0]].shape;
  if (conv_in.size() != 4) return std::nullopt;
  StuffedConv sc;
  sc.conv = at;
  // A value the fused conv skips must be read by the next instruction of the chain only.
  auto internal = [&](int v, int reader) {
    return !output_values.count(v) && readers[v].size() == 1 && readers[v][0] == reader;
  };
  int v = conv.inputs[0], reader = at, pad_at = -1, slice_at = -1;
  while (pad_at < 0) {
    const int p = producer[v];
    if (p < 0 || !internal(v, reader)) return std::nullopt;
    const kernels::Op op = vg.order[p].schema->op;
    if (op == kernels::Op::kPad) {
      pad_at = p;
    } else if (op == kernels::Op::kSlice && slice_at < 0) {
      slice_at = p;
    } else if (op != kernels::Op::kReshape) {
      return std::nullopt;
    }
    sc.dropped.push_back(p);
    reader = p;
    v = vg.order[p].inputs[0];
  }
  // The reshapes before the pad only rename x's dims: the conv reads x's buffer as it is.
  for (int p = producer[v]; p >= 0 && vg.order[p].schema->op == kernels::Op::kReshape && internal(v, reader);
       p = producer[v]) {
    sc.dropped.push_back(p);
    reader = p;
    v = vg.order[p].inputs[0];
  }
  sc.source = v;

  // The pad: +0.0 (bits 0) after unit dims that follow spatial dims, nothing else.
  const CanonicalNode& pad = vg.order[pad_at];
  const kernels::OpParams& pp = pad.inferred.params;
  const Shape& pin = vg.types[pad.inputs[0]].shape;
  uint32_t fill_bits;
  std::memcpy(&fill_bits, &pp.pad_value, sizeof(fill_bits));
  if (vg.types[pad.output].dtype != DType::kF32 || fill_bits != 0 || pin.size() < 3 ||
      pp.pad_begin != std::vector<int64_t>(pin.size(), 0) || pp.pad_end.size() != pin.size() || pp.pad_end[0] != 0 ||
      pp.pad_end[1] != 0) {
    return std::nullopt;
  }
  Shape spatial;
  std::vector<int64_t> stuff;
  for (size_t d = 2; d < pin.size();) {
    if (pp.pad_end[d] != 0) return std::nullopt;
    spatial.push_back(pin[d]);
    if (d + 1 < pin.size() && pin[d + 1] == 1 && pp.pad_end[d + 1] > 0) {
      stuff.push_back(pp.pad_end[d + 1] + 1);
      d += 2;
    } else {
      stuff.push_back(1);
      d += 1;
    }
  }
  if (spatial.empty() || spatial.size() > 2 ||
      std::all_of(stuff.begin(), stuff.end(), [](int64_t u) { return u == 1; }))
    return std::nullopt;
  const bool one_d = spatial.size() == 1;
  const int64_t xh = one_d ? 1 : spatial[0], uh = one_d ? 1 : stuff[0];
  const int64_t xw = spatial.back(), uw = stuff.back();
  const int64_t n = pin[0], c = pin[1], sh = xh * uh, sw = xw * uw;
  // Rows [r0, r0 + vh) and columns [c0, c0 + vw) of the stuffed [N, C, SH, SW].
  int64_t r0 = 0, c0 = 0, vh = sh, vw = sw;
  if (slice_at >= 0) {
    const CanonicalNode& slice = vg.order[slice_at];
    const Shape& sin = vg.types[slice.inputs[0]].shape;
    const Shape& sout = vg.types[slice.output].shape;
    const kernels::OpParams& sp = slice.inferred.params;
    if (sp.steps != std::vector<int64_t>(sin.size(), 1) || sp.starts.size() != sin.size() || sin.size() < 3 ||
        sp.starts[0] != 0 || sp.starts[1] != 0 || sout[0] != n || sout[1] != c) {
      return std::nullopt;
    }
    if (sin == Shape{n, c, sh, sw}) {
      r0 = sp.starts[2], vh = sout[2], c0 = sp.starts[3], vw = sout[3];
    } else if (sh == 1 && sin == Shape{n, c, sw}) {
      c0 = sp.starts[2], vw = sout[2];
    } else {
      return std::nullopt;
    }
  }
  if (conv_in != Shape{n, c, vh, vw}) return std::nullopt;
  sc.source_view = {n, c, xh, xw};
  sc.stuffing = {uh, uw, r0, c0, vh, vw};
  return sc;
}

// ConvInteger's im2col (ONNX.md): x [N, C, H, W] -> gather(rows [R, KH], axis 2) ->
// gather(columns [OW, KW], axis 4) -> reshape to [N, g, C/g, R, KH, OW, KW] -> transpose
// {0, 1, 3, 5, 2, 4, 6}, over 1-byte elements. In the fused list the transpose reads x and the
// two tables itself (OpParams::im2col_groups) and the gathers and the reshape do not run
// (DETERMINISM.md 3.1).
struct Im2colTranspose {
  int transpose = 0;                   // canonical index of the transpose
  int source = 0, rows = 0, cols = 0;  // value ids of x and the two index tables
  std::vector<int> dropped;            // canonical indices of the gathers and the reshape
  int64_t groups = 0;
};

std::optional<Im2colTranspose> FindIm2colTranspose(const ValidatedGraph& vg, int at, const std::vector<int>& producer,
                                                   const std::vector<std::vector<int>>& readers,
                                                   const std::set<int>& output_values) {
  const CanonicalNode& t = vg.order[at];
  if (t.schema->op != kernels::Op::kTranspose || t.inputs.size() != 1 || !t.inferred.kernel_input_shapes.empty() ||
      t.inferred.kernel_output_shape || t.inferred.params.perm != std::vector<int64_t>{0, 1, 3, 5, 2, 4, 6}) {
    return std::nullopt;
  }
  // Each skipped value is read by the next instruction of the chain only.
  auto step = [&](int v, int reader, kernels::Op op) -> int {
    const int p = producer[v];
    if (p < 0 || output_values.count(v) || readers[v].size() != 1 || readers[v][0] != reader) return -1;
    const CanonicalNode& cn = vg.order[p];
    if (cn.schema->op != op || !cn.inferred.kernel_input_shapes.empty() || cn.inferred.kernel_output_shape) return -1;
    return p;
  };
  const int reshape = step(t.inputs[0], at, kernels::Op::kReshape);
  if (reshape < 0) return std::nullopt;
  const int column_gather = step(vg.order[reshape].inputs[0], reshape, kernels::Op::kGather);
  if (column_gather < 0 || vg.order[column_gather].inputs.size() != 2 ||
      vg.order[column_gather].inferred.params.axis != 4) {
    return std::nullopt;
  }
  const int row_gather = step(vg.order[column_gather].inputs[0], column_gather, kernels::Op::kGather);
  if (row_gather < 0 || vg.order[row_gather].inputs.size() != 2 || vg.order[row_gather].inferred.params.axis != 2) {
    return std::nullopt;
  }
  Im2colTranspose ic;
  ic.transpose = at;
  ic.source = vg.order[row_gather].inputs[0];
  ic.rows = vg.order[row_gather].inputs[1];
  ic.cols = vg.order[column_gather].inputs[1];
  ic.dropped = {row_gather, column_gather, reshape};
  const TypeInfo& x = vg.types[ic.source];
  const Shape& rows = vg.types[ic.rows].shape;
  const Shape& cols = vg.types[ic.cols].shape;
  const Shape& grouped = vg.types[t.inputs[0]].shape;
  if (DTypeSize(x.dtype) != 1 || x.shape.size() != 4 || rows.size() != 2 || cols.size() != 2 || grouped.size() != 7 ||
      grouped[1] < 1 || grouped[1] * grouped[2] != x.shape[1]) {
    return std::nullopt;
  }
  const int64_t n = x.shape[0];
  if (grouped != Shape{n, grouped[1], grouped[2], rows[0], rows[1], cols[0], cols[1]}) return std::nullopt;
  ic.groups = grouped[1];
  return ic;
}

// A `cast` from i8 to i32 read only by a `reduce_sum` (the row sums of the integer products'
// zero-point corrections, ONNX.md): in the fused list the sum reads the i8 values itself
// (OpParams::sum_widens_i8) and the cast does not run (DETERMINISM.md 3.1).
struct WideningSum {
  int sum = 0;     // canonical index of the reduce_sum
  int cast = 0;    // canonical index of the cast
  int source = 0;  // value id of the i8 input
};

std::optional<WideningSum> FindWideningSum(const ValidatedGraph& vg, int at, const std::vector<int>& producer,
                                           const std::vector<std::vector<int>>& readers,
                                           const std::set<int>& output_values) {
  const CanonicalNode& sum = vg.order[at];
  if (sum.schema->op != kernels::Op::kReduceSum || sum.inputs.size() != 1 ||
      !sum.inferred.kernel_input_shapes.empty() || sum.inferred.kernel_output_shape) {
    return std::nullopt;
  }
  const int v = sum.inputs[0];
  const int c = producer[v];
  if (c < 0 || output_values.count(v) || readers[v].size() != 1 || readers[v][0] != at) return std::nullopt;
  const CanonicalNode& cast = vg.order[c];
  if (cast.schema->op != kernels::Op::kCast || cast.inputs.size() != 1 || !cast.inferred.kernel_input_shapes.empty() ||
      cast.inferred.kernel_output_shape || vg.types[cast.inputs[0]].dtype != DType::kI8 ||
      vg.types[v].dtype != DType::kI32 || vg.types[cast.inputs[0]].shape != vg.types[v].shape) {
    return std::nullopt;
  }
  return WideningSum{at, c, cast.inputs[0]};
}

// The quantize step of DynamicQuantizeLinear and QuantizeLinear (ONNX.md): q = div(x, s),
// r = round(q), a = add(r, z), y = cast(a) to u8 or i8, with s and z f32 values of one element.
// In the fused list the cast reads x, s and z itself (three inputs) and the div, round
// and add do not run (DETERMINISM.md 3.1).
struct OnePassQuantize {
  int cast = 0;                         // canonical index of the cast
  int source = 0, scale = 0, zero = 0;  // value ids of x, s and z
  std::vector<int> dropped;             // canonical indices of the div, round and add
};

std::optional<OnePassQuantize> FindOnePassQuantize(const ValidatedGraph& vg, int at, const std::vector<int>& producer,
                                                   const std::vector<std::vector<int>>& readers,
                                                   const std::set<int>& output_values) {
  const CanonicalNode& cast = vg.order[at];
  if (cast.schema->op != kernels::Op::kCast || cast.inputs.size() != 1 || !cast.inferred.kernel_input_shapes.empty() ||
      cast.inferred.kernel_output_shape) {
    return std::nullopt;
  }
  const DType to = vg.types[cast.output].dtype;
  if (to != DType::kU8 && to != DType::kI8) return std::nullopt;
  // Each skipped value is f32 of the cast's shape and read by the next instruction only.
  const Shape& shape = vg.types[cast.output].shape;
  auto step = [&](int v, int reader, kernels::Op op, size_t arity) -> int {
    const int p = producer[v];
    if (p < 0 || output_values.count(v) || readers[v].size() != 1 || readers[v][0] != reader) return -1;
    if (vg.types[v].dtype != DType::kF32 || vg.types[v].shape != shape) return -1;
    const CanonicalNode& cn = vg.order[p];
    if (cn.schema->op != op || cn.inputs.size() != arity || !cn.inferred.kernel_input_shapes.empty() ||
        cn.inferred.kernel_output_shape) {
      return -1;
    }
    return p;
  };
  auto scalar_f32 = [&](int v) { return vg.types[v].dtype == DType::kF32 && NumElements(vg.types[v].shape) == 1; };
  const int add = step(cast.inputs[0], at, kernels::Op::kAdd, 2);
  if (add < 0) return std::nullopt;
  const int round = step(vg.order[add].inputs[0], add, kernels::Op::kRound, 1);
  if (round < 0 || !scalar_f32(vg.order[add].inputs[1])) return std::nullopt;
  const int div = step(vg.order[round].inputs[0], round, kernels::Op::kDiv, 2);
  if (div < 0) return std::nullopt;
  const int x = vg.order[div].inputs[0];
  const int s = vg.order[div].inputs[1];
  if (vg.types[x].dtype != DType::kF32 || vg.types[x].shape != shape || !scalar_f32(s)) return std::nullopt;
  return OnePassQuantize{at, x, s, vg.order[add].inputs[1], {div, round, add}};
}

// The Resize lowering's two taps of one axis (DETERMINISM.md 6.2): t0 = gather(x, i0),
// p0 = mul(t0, w0), t1 = gather(x, i1), p1 = mul(t1, w1), y = add(p0, p1), with 1-D tables and
// weights holding one f32 value per output index along the axis. In the fused list the add
// reads x, i0, w0, i1 and w1 itself (a gather with five inputs) and the gathers and muls do not
// run (DETERMINISM.md 3.1).
struct ResizeTaps {
  int add = 0;               // canonical index of the add
  std::vector<int> inputs;   // value ids of x, i0, w0, i1, w1
  int gather = 0;            // canonical index of the first gather (its parameters)
  std::vector<int> dropped;  // canonical indices of the gathers and muls
};

std::optional<ResizeTaps> FindResizeTaps(const ValidatedGraph& vg, int at, const std::vector<int>& producer,
                                         const std::vector<std::vector<int>>& readers,
                                         const std::set<int>& output_values) {
  const CanonicalNode& add = vg.order[at];
  if (add.schema->op != kernels::Op::kAdd || add.inputs.size() != 2 || !add.inferred.kernel_input_shapes.empty() ||
      add.inferred.kernel_output_shape || vg.types[add.output].dtype != DType::kF32) {
    return std::nullopt;
  }
  const Shape& shape = vg.types[add.output].shape;
  // Each skipped value is f32 of the add's shape and read by one instruction only, `reader`.
  auto step = [&](int v, int reader, kernels::Op op) -> int {
    const int p = producer[v];
    if (p < 0 || output_values.count(v) || readers[v].size() != 1 || readers[v][0] != reader) return -1;
    if (vg.types[v].dtype != DType::kF32 || vg.types[v].shape != shape) return -1;
    const CanonicalNode& cn = vg.order[p];
    if (cn.schema->op != op || cn.inputs.size() != 2 || !cn.inferred.kernel_input_shapes.empty() ||
        cn.inferred.kernel_output_shape) {
      return -1;
    }
    return p;
  };
  ResizeTaps taps;
  taps.add = at;
  int x = -1;
  int64_t axis = -1;
  for (int tap = 0; tap < 2; ++tap) {
    const int mul = step(add.inputs[tap], at, kernels::Op::kMul);
    if (mul < 0) return std::nullopt;
    const int gather = step(vg.order[mul].inputs[0], mul, kernels::Op::kGather);
    if (gather < 0) return std::nullopt;
    const CanonicalNode& g = vg.order[gather];
    const TypeInfo& table = vg.types[g.inputs[1]];
    const int64_t a = g.inferred.params.axis;
    if ((tap == 1 && (g.inputs[0] != x || a != axis)) || vg.types[g.inputs[0]].dtype != DType::kF32 ||
        table.shape.size() != 1 || (table.dtype != DType::kI32 && table.dtype != DType::kI64) || a < 0 ||
        a >= static_cast<int64_t>(shape.size())) {
      return std::nullopt;
    }
    x = g.inputs[0];
    axis = a;
    // The weight: one value per output index along the axis, in its own dims aligned to the
    // output's last ones.
    const int w = vg.order[mul].inputs[1];
    const Shape& ws = vg.types[w].shape;
    if (vg.types[w].dtype != DType::kF32 || ws.size() > shape.size()) return std::nullopt;
    for (size_t d = 0; d < ws.size(); ++d) {
      const int64_t od = static_cast<int64_t>(shape.size() - ws.size() + d);
      if (ws[d] != (od == axis ? shape[axis] : 1)) return std::nullopt;
    }
    if (NumElements(ws) != shape[axis]) return std::nullopt;
    if (tap == 0) taps.gather = gather;
    taps.inputs.push_back(g.inputs[1]);
    taps.inputs.push_back(w);
    taps.dropped.push_back(gather);
    taps.dropped.push_back(mul);
  }
  taps.inputs.insert(taps.inputs.begin(), x);
  return taps;
}

// The fused instruction of a run: the head's instruction with the others as its epilogue.
Instruction FuseRun(const FusionRun& run, const std::vector<Instruction>& instructions, const ValidatedGraph& vg,
                    const std::vector<int>& buffer_of) {
  Instruction fused = instructions[run.head];
  if (run.half_relu) {
    fused.params.relu_output = true;
    fused.flops += instructions[run.last].flops;
    fused.node_label += ", " + instructions[run.last].node_label;
    fused.output = instructions[run.last].output;
    fused.fused_count = 2;
    return fused;
  }
  std::map<int, int> chain_value;  // value id -> index among the chain's values
  chain_value[vg.order[run.head].output] = 0;
  std::map<int, int> input_index;  // value id -> index in epilogue_inputs
  auto operand = [&](int v) -> kernels::EpilogueOperand {
    auto it = chain_value.find(v);
    if (it != chain_value.end()) return {false, it->second};
    auto [in, added] = input_index.emplace(v, static_cast<int>(fused.epilogue_inputs.size()));
    if (added) {
      fused.epilogue_inputs.push_back(buffer_of[v]);
      fused.epilogue_input_shapes.push_back(vg.types[v].shape);
    }
    return {true, in->second};
  };
  for (int k = run.head + 1; k <= run.last; ++k) {
    const CanonicalNode& cn = vg.order[k];
    if (run.leaky_relu.count(k)) {
      // less(v, 0), mul(v, a), where(.., m, v) -> the steps m = mul(v, a), y = max(v, m).
      const CanonicalNode& mul = vg.order[k + 1];
      const CanonicalNode& sel = vg.order[k + 2];
      const int v = mul.inputs[0];
      kernels::EpilogueStep scale;
      scale.op = kernels::Op::kMul;
      scale.num_operands = 2;
      scale.operands[0] = operand(v);
      scale.operands[1] = operand(mul.inputs[1]);
      fused.epilogue.push_back(scale);
      chain_value[mul.output] = static_cast<int>(fused.epilogue.size());
      kernels::EpilogueStep select;
      select.op = kernels::Op::kMax;
      select.num_operands = 2;
      select.operands[0] = operand(v);
      select.operands[1] = {false, chain_value[mul.output]};
      fused.epilogue.push_back(select);
      chain_value[sel.output] = static_cast<int>(fused.epilogue.size());
      for (int j = k; j <= k + 2; ++j) {
        fused.flops += instructions[j].flops;
        fused.node_label += ", " + instructions[j].node_label;
      }
      k += 2;
      continue;
    }
    kernels::EpilogueStep step;
    step.op = cn.schema->op;
    step.num_operands = static_cast<int>(cn.inputs.size());
    for (int a = 0; a < step.num_operands; ++a) step.operands[a] = operand(cn.inputs[a]);
    fused.epilogue.push_back(step);
    chain_value[cn.output] = static_cast<int>(fused.epilogue.size());
    fused.flops += instructions[k].flops;
    fused.node_label += ", " + instructions[k].node_label;
  }
  fused.output = instructions[run.last].output;
  fused.fused_count = run.last - run.head + 1;
  return fused;
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
  // Convolutions of zero-stuffed inputs read x itself in the fused list, so x stays live until
  // the conv (in both lists: they share one plan), and the conv's output never overlaps it.
  std::map<int, StuffedConv> stuffed_at;  // conv index -> its pattern
  // Likewise ConvInteger's im2col transposes read x and the index tables in the fused list.
  std::map<int, Im2colTranspose> im2col_at;  // transpose index -> its pattern
  // And reduce_sums of i8 values cast to i32 read the i8 values.
  std::map<int, WideningSum> widening_at;  // reduce_sum index -> its pattern
  // And casts that end a quantize step read x, s and z.
  std::map<int, OnePassQuantize> quantize_at;  // cast index -> its pattern
  // And the adds that end the Resize lowering's two taps of an axis read x, the tables and weights.
  std::map<int, ResizeTaps> resize_at;  // add index -> its pattern
  std::vector<std::vector<int>> extra_reads(n);
  {
    std::vector<int> producer(values.size(), -1);
    std::vector<std::vector<int>> readers(values.size());
    for (int i = 0; i < n; ++i) {
      producer[vg.order[i].output] = i;
      for (int in : vg.order[i].inputs) readers[in].push_back(i);
    }
    for (int i = 0; i < n; ++i) {
      std::optional<StuffedConv> sc = FindStuffedConv(vg, i, producer, readers, output_values);
      if (!sc) continue;
      if (last_use[sc->source] < i) {
        last_use[sc->source] = i;
        extra_reads[i].push_back(sc->source);
      }
      stuffed_at.emplace(i, std::move(*sc));
    }
    for (int i = 0; i < n; ++i) {
      std::optional<Im2colTranspose> ic = FindIm2colTranspose(vg, i, producer, readers, output_values);
      if (!ic || RelabelsOnly(vg.order[i], vg)) continue;
      for (int v : {ic->source, ic->rows, ic->cols}) {
        if (last_use[v] < i) {
          last_use[v] = i;
          extra_reads[i].push_back(v);
        }
      }
      im2col_at.emplace(i, std::move(*ic));
    }
    for (int i = 0; i < n; ++i) {
      std::optional<WideningSum> ws = FindWideningSum(vg, i, producer, readers, output_values);
      if (!ws) continue;
      if (last_use[ws->source] < i) {
        last_use[ws->source] = i;
        extra_reads[i].push_back(ws->source);
      }
      widening_at.emplace(i, *ws);
    }
    for (int i = 0; i < n; ++i) {
      std::optional<OnePassQuantize> oq = FindOnePassQuantize(vg, i, producer, readers, output_values);
      if (!oq) continue;
      for (int v : {oq->source, oq->scale, oq->zero}) {
        if (last_use[v] < i) {
          last_use[v] = i;
          extra_reads[i].push_back(v);
        }
      }
      quantize_at.emplace(i, std::move(*oq));
    }
    for (int i = 0; i < n; ++i) {
      std::optional<ResizeTaps> rt = FindResizeTaps(vg, i, producer, readers, output_values);
      if (!rt) continue;
      for (int v : rt->inputs) {
        if (last_use[v] < i) {
          last_use[v] = i;
          extra_reads[i].push_back(v);
        }
      }
      resize_at.emplace(i, std::move(*rt));
    }
  }
  // A fused run writes its output while its head runs, and reads the run's other inputs until
  // its last step. So the run's output is allocated with the head's, while all those inputs are
  // still live (they were computed before the head), and never shares memory with them; the
  // unfused instructions run on the same plan. Cost: the output lives from the head on.
  std::map<int, const Tensor*> constant_of;  // value id -> its tensor (the LeakyRelu pattern's scalars)
  {
    std::map<int, int> value_of_buffer;
    for (int v : vg.constants) value_of_buffer[buffer_of[v]] = v;
    for (const auto& [buffer, tensor] : p.constants) constant_of[value_of_buffer[buffer]] = &tensor;
  }
  const std::vector<FusionRun> runs = PlanFusion(vg, output_values, constant_of);
  std::map<int, int> run_output_at;  // head index -> value id of the run's output
  for (const FusionRun& run : runs) run_output_at[run.head] = vg.order[run.last].output;
  // An instruction that only relabels a shape gets no memory of its own: its output shares the
  // memory of its input's root (the value that owns it, following chains of such instructions),
  // and that memory is freed only after the last use of every value sharing it. Nothing writes
  // to a value after the instruction that computes it, so sharing is safe: even a placeholder
  // or a constant can be shared, as no kernel writes to its inputs. A run's output, allocated
  // early at its head, is never an alias (it is an epilogue op's).
  std::vector<bool> is_alias(n, false);
  std::vector<int> root(values.size());
  for (size_t v = 0; v < values.size(); ++v) root[v] = static_cast<int>(v);
  std::vector<int> group_last_use = last_use;  // by root: the last use of any value sharing its memory
  {
    std::set<int> run_outputs;
    for (const auto& [head, value] : run_output_at) run_outputs.insert(value);
    for (int i = 0; i < n; ++i) {
      const CanonicalNode& cn = vg.order[i];
      if (!RelabelsOnly(cn, vg) || run_outputs.count(cn.output)) continue;
      is_alias[i] = true;
      root[cn.output] = root[cn.inputs[0]];
      group_last_use[root[cn.output]] = std::max(group_last_use[root[cn.output]], last_use[cn.output]);
    }
  }
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
    if (is_alias[i]) {
      const int owner = buffer_of[root[cn.output]];
      Buffer b = p.buffers[owner];
      b.shape = vg.types[cn.output].shape;
      b.alias_of = owner;
      p.buffers.push_back(std::move(b));
      buffer_of[cn.output] = static_cast<int>(p.buffers.size()) - 1;
      ins.output = buffer_of[cn.output];
      ins.alias = true;
    } else {
      // Any other output is allocated while the inputs are still live, so it never shares
      // memory with them.
      ins.output = buffer_of[cn.output] >= 0 ? buffer_of[cn.output] : new_buffer(cn.output, BufferRole::kIntermediate);
    }
    if (auto run = run_output_at.find(i); run != run_output_at.end())
      new_buffer(run->second, BufferRole::kIntermediate);
    if (!cn.inferred.kernel_input_shapes.empty()) {
      ins.input_view_shapes = cn.inferred.kernel_input_shapes;
    } else {
      for (int in : cn.inputs) ins.input_view_shapes.push_back(vg.types[in].shape);
    }
    ins.output_view_shape = cn.inferred.kernel_output_shape.value_or(vg.types[cn.output].shape);
    // Free intermediates whose memory (shared by every alias of it) is last used here, each once.
    std::set<int> seen;
    std::vector<int> reads = cn.inputs;
    reads.insert(reads.end(), extra_reads[i].begin(), extra_reads[i].end());
    for (int in : reads) {
      if (!seen.insert(root[in]).second) continue;
      const Buffer& b = p.buffers[buffer_of[root[in]]];
      if (b.role == BufferRole::kIntermediate && group_last_use[root[in]] == i) planner.Free(b.offset, b.bytes);
    }
    if (!is_alias[i] && group_last_use[cn.output] < 0) {
      planner.Free(p.buffers[ins.output].offset, p.buffers[ins.output].bytes);
    }
    p.instructions.push_back(std::move(ins));
  }
  for (const auto& [name, v] : vg.outputs) p.outputs.emplace_back(name, buffer_of[v]);
  // The fused list, checking what the plan above guarantees: a run's output shares no memory
  // with anything the run reads (otherwise the run is left unfused).
  auto disjoint = [&](int a, int b) {
    const Buffer& x = p.buffers[a];
    const Buffer& y = p.buffers[b];
    return x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset;
  };
  // A stuffed conv whose x could share memory with its output (or its run's) stays unfused.
  std::set<int> dropped;
  for (auto it = stuffed_at.begin(); it != stuffed_at.end();) {
    const int source = buffer_of[it->second.source];
    bool ok = disjoint(source, p.instructions[it->first].output);
    for (const FusionRun& run : runs) {
      if (run.head == it->first) ok = ok && disjoint(source, buffer_of[vg.order[run.last].output]);
    }
    if (!ok) {
      it = stuffed_at.erase(it);
      continue;
    }
    dropped.insert(it->second.dropped.begin(), it->second.dropped.end());
    ++it;
  }
  for (auto it = im2col_at.begin(); it != im2col_at.end();) {
    const int out = p.instructions[it->first].output;
    if (!disjoint(buffer_of[it->second.source], out) || !disjoint(buffer_of[it->second.rows], out) ||
        !disjoint(buffer_of[it->second.cols], out)) {
      it = im2col_at.erase(it);
      continue;
    }
    dropped.insert(it->second.dropped.begin(), it->second.dropped.end());
    ++it;
  }
  for (auto it = widening_at.begin(); it != widening_at.end();) {
    if (!disjoint(buffer_of[it->second.source], p.instructions[it->first].output)) {
      it = widening_at.erase(it);
      continue;
    }
    dropped.insert(it->second.cast);
    ++it;
  }
  for (auto it = quantize_at.begin(); it != quantize_at.end();) {
    const int out = p.instructions[it->first].output;
    const OnePassQuantize& q = it->second;
    if (!disjoint(buffer_of[q.source], out) || !disjoint(buffer_of[q.scale], out) ||
        !disjoint(buffer_of[q.zero], out)) {
      it = quantize_at.erase(it);
      continue;
    }
    dropped.insert(q.dropped.begin(), q.dropped.end());
    ++it;
  }
  for (auto it = resize_at.begin(); it != resize_at.end();) {
    const int out = p.instructions[it->first].output;
    bool ok = true;
    for (int v : it->second.inputs) ok = ok && disjoint(buffer_of[v], out);
    if (!ok) {
      it = resize_at.erase(it);
      continue;
    }
    dropped.insert(it->second.dropped.begin(), it->second.dropped.end());
    ++it;
  }
  // An epilogue run over instructions that no longer run is not made (a quantize's div and
  // round form one), nor one headed by the add of two taps in one pass (which takes no epilogue).
  std::vector<FusionRun> kept_runs;
  for (const FusionRun& run : runs) {
    bool overlaps = resize_at.count(run.head) != 0;
    for (int k = run.head; k <= run.last && !overlaps; ++k) overlaps = dropped.count(k) != 0;
    if (!overlaps) kept_runs.push_back(run);
  }
  std::vector<Instruction> fused;
  size_t next = 0;
  for (int i = 0; i < n; ++i) {
    if (dropped.count(i)) continue;
    Instruction f = p.instructions[i];
    int last = i;
    if (next < kept_runs.size() && kept_runs[next].head == i) {
      const FusionRun run = kept_runs[next++];
      Instruction r = FuseRun(run, p.instructions, vg, buffer_of);
      std::vector<int> reads = r.inputs;
      reads.insert(reads.end(), r.epilogue_inputs.begin(), r.epilogue_inputs.end());
      bool ok = true;
      for (int in : reads) ok = ok && disjoint(r.output, in);
      if (ok) {
        f = std::move(r);
        last = run.last;
      }
    }
    if (auto sc = stuffed_at.find(i); sc != stuffed_at.end()) {
      f.inputs[0] = buffer_of[sc->second.source];
      f.input_view_shapes[0] = sc->second.source_view;
      f.params.input_stuffing = sc->second.stuffing;
      f.fused_count += static_cast<int>(sc->second.dropped.size());
      for (int d : sc->second.dropped) f.node_label += ", " + p.instructions[d].node_label;
    }
    if (auto ic = im2col_at.find(i); ic != im2col_at.end()) {
      const Im2colTranspose& t = ic->second;
      f.inputs = {buffer_of[t.source], buffer_of[t.rows], buffer_of[t.cols]};
      f.input_view_shapes = {vg.types[t.source].shape, vg.types[t.rows].shape, vg.types[t.cols].shape};
      f.params.im2col_groups = t.groups;
      f.fused_count += static_cast<int>(t.dropped.size());
      for (int d : t.dropped) f.node_label += ", " + p.instructions[d].node_label;
    }
    if (auto ws = widening_at.find(i); ws != widening_at.end()) {
      f.inputs[0] = buffer_of[ws->second.source];
      f.params.sum_widens_i8 = true;
      f.fused_count += 1;
      f.node_label += ", " + p.instructions[ws->second.cast].node_label;
    }
    if (auto oq = quantize_at.find(i); oq != quantize_at.end()) {
      const OnePassQuantize& q = oq->second;
      f.inputs = {buffer_of[q.source], buffer_of[q.scale], buffer_of[q.zero]};
      f.input_view_shapes = {vg.types[q.source].shape, vg.types[q.scale].shape, vg.types[q.zero].shape};
      f.fused_count += static_cast<int>(q.dropped.size());
      for (int d : q.dropped) f.node_label += ", " + p.instructions[d].node_label;
    }
    if (auto rt = resize_at.find(i); rt != resize_at.end()) {
      const ResizeTaps& t = rt->second;
      const Instruction& gather = p.instructions[t.gather];
      f.op = gather.op;
      f.op_name = gather.op_name;
      f.params = gather.params;
      f.inputs.clear();
      f.input_view_shapes.clear();
      for (int v : t.inputs) {
        f.inputs.push_back(buffer_of[v]);
        f.input_view_shapes.push_back(vg.types[v].shape);
      }
      f.fused_count += static_cast<int>(t.dropped.size());
      for (int d : t.dropped) {
        f.flops += p.instructions[d].flops;
        f.node_label += ", " + p.instructions[d].node_label;
      }
    }
    fused.push_back(std::move(f));
    i = last;
  }
  if (fused.size() < p.instructions.size()) p.fused_instructions = std::move(fused);
  p.arena_bytes = planner.peak();
  if (p.arena_bytes > limits.max_total_bytes) {
    return ResourceExhausted("program needs " + std::to_string(p.arena_bytes) +
                             " bytes of memory (inputs, weights and live values), over the cap of " +
                             std::to_string(limits.max_total_bytes));
  }
  // An f16/bf16 instruction computes on f32 copies of its operands (DETERMINISM.md 1.3), held
  // only while it runs: a block at a time where its rows split, whole otherwise. The largest
  // such need counts against the cap together with the arena.
  int64_t widening = 0;
  size_t widest = 0;
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction& ins = p.instructions[i];
    std::vector<kernels::TensorView> views;
    auto view = [&](int buffer, const Shape& shape) {
      kernels::TensorView v;
      v.dtype = p.buffers[buffer].dtype;
      v.rank = static_cast<int>(shape.size());
      for (int d = 0; d < v.rank && d < kMaxRank; ++d) v.dims[d] = shape[d];
      return v;
    };
    for (size_t k = 0; k < ins.inputs.size(); ++k) views.push_back(view(ins.inputs[k], ins.input_view_shapes[k]));
    kernels::TensorView out = view(ins.output, ins.output_view_shape);
    const kernels::KernelCall call{ins.op, &ins.params, views.data(), static_cast<int>(views.size()), &out, 1};
    const int64_t bytes = kernels::HalfWideningBytes(call);
    if (bytes > widening) {
      widening = bytes;
      widest = i;
    }
  }
  if (widening > 0 && p.arena_bytes + widening > limits.max_total_bytes) {
    const Instruction& ins = p.instructions[widest];
    return ResourceExhausted("program needs " + std::to_string(p.arena_bytes) +
                             " bytes of memory (inputs, weights and live values) plus " + std::to_string(widening) +
                             " bytes of f32 copies of the f16/bf16 operands of " + ins.op_name + " at " +
                             ins.node_label + ", over the cap of " + std::to_string(limits.max_total_bytes));
  }
  return p;
}

StatusOr<Program> CompileGraph(const Graph& graph, BlobSource* blobs, const Limits& limits) {
  ASSIGN_OR_RETURN(ValidatedGraph vg, Validate(graph, limits));
  return Compile(graph, vg, blobs, limits);
}

}  // namespace consensor::executor
