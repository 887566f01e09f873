// ONNX tensor-manipulation ops: shape queries and constants (Shape, Size, Constant,
// ConstantOfShape, Range), views and copies (Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Slice, Concat, Gather, Expand, Split, Tile, Pad, DepthToSpace, SpaceToDepth).
// Shapes are static, so every shape-like input (Reshape's shape, Slice's starts, Tile's
// repeats, ...) must be known at import time. Everything here lowers to Consensor's
// data-movement ops, which copy bits exactly (docs/DETERMINISM.md 4.6); only Range computes
// values, and it does so on the host at import time. Lowerings are written down in
// docs/ONNX.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/context.h"
#include "kernels/detmath.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

std::string IntsStr(const Ints& v) { return ShapeToString(v); }

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];  // dims of a valid shape: fits
  return p;
}

// Outputs that are a node's input unchanged still go through identity, so every ONNX
// output is its own value.
StatusOr<ValueId> ReshapeOrCopy(NodeContext& ctx, ValueId x, const Shape& shape) {
  if (ctx.type(x).shape == shape) return ctx.Emit("identity", {x});
  return ctx.Emit("reshape", {x}, {{"shape", Ints(shape)}});
}

// A constant of `shape` filled with the one element of `value`. Built with `expand` so the
// importer's element cap applies before anything is allocated.
StatusOr<ValueId> Filled(NodeContext& ctx, const Tensor& value, const Ints& shape) {
  Tensor scalar(value.dtype(), {});
  std::memcpy(scalar.data(), value.data(), static_cast<size_t>(DTypeSize(value.dtype())));
  return ctx.Emit("expand", {ctx.Constant(std::move(scalar))}, {{"shape", shape}});
}

// Normalizes a list of axes against `rank`; duplicates are an error naming the list. A scalar
// has no axis to name (NormalizeAxis alone would take 0 for it).
StatusOr<Ints> NormalizeAxes(const NodeContext& ctx, const Ints& axes, int64_t rank, std::string_view what) {
  if (rank == 0 && !axes.empty()) return ctx.Invalid(std::string(what) + " " + IntsStr(axes) + " for a scalar");
  Ints out;
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, what));
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return ctx.Invalid(std::string(what) + " " + IntsStr(axes) + " names axis " + std::to_string(n) + " twice");
    }
    out.push_back(n);
  }
  return out;
}

// --- shape queries and constants -----------------------------------------------------

// Shapes are static, so Shape is a constant: consumers (Gather, Concat, Reshape...) then
// fold at import time too.
Status ShapeOp(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"start", "end"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const Shape shape = ctx.type(x).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  ASSIGN_OR_RETURN(int64_t start, ctx.AttrInt("start", 0));
  ASSIGN_OR_RETURN(int64_t end, ctx.AttrInt("end", rank));
  // Opset 15: negative values count from the end, then both are clamped to [0, rank].
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  Ints dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(shape[i]);
  ctx.SetOutput(0, ctx.Constant(Int64Vector(dims)));
  return OkStatus();
}

// Size is a constant for the same reason as Shape.
Status Size(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const int64_t n = Product(ctx.type(x).shape, 0, ctx.type(x).shape.size());
  ctx.SetOutput(0, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {n})));
  return OkStatus();
}

// The attribute becomes a constant; exactly one of the value attributes must be present.
Status ConstantOp(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"value", "value_float", "value_floats", "value_int", "value_ints",
                                       "value_string", "value_strings", "sparse_value"}));
  int present = 0;
  for (std::string_view a : {"value", "value_float", "value_floats", "value_int", "value_ints", "value_string",
                             "value_strings", "sparse_value"}) {
    present += ctx.has_attr(a) ? 1 : 0;
  }
  if (present != 1) {
    return ctx.Invalid("needs exactly one value attribute, got " + std::to_string(present));
  }
  if (ctx.has_attr("sparse_value")) return ctx.Unsupported("attribute 'sparse_value' (sparse tensors)");
  if (ctx.has_attr("value_string")) return ctx.Unsupported("attribute 'value_string' (dtype STRING)");
  if (ctx.has_attr("value_strings")) return ctx.Unsupported("attribute 'value_strings' (dtype STRING)");
  if (ctx.has_attr("value_floats")) {
    ASSIGN_OR_RETURN(std::vector<float> v, ctx.AttrFloats("value_floats", {}));
    ctx.SetOutput(0, ctx.Constant(Tensor::FromVector<float>(DType::kF32, {static_cast<int64_t>(v.size())}, v)));
    return OkStatus();
  }
  if (ctx.has_attr("value_float")) {
    ASSIGN_OR_RETURN(float v, ctx.AttrFloat("value_float", 0.0f));
    ctx.SetOutput(0, ctx.Constant(Tensor::FromVector<float>(DType::kF32, {}, {v})));
    return OkStatus();
  }
  if (ctx.has_attr("value_int")) {
    ASSIGN_OR_RETURN(int64_t v, ctx.AttrInt("value_int", 0));
    ctx.SetOutput(0, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {v})));
    return OkStatus();
  }
  if (ctx.has_attr("value_ints")) {
    ASSIGN_OR_RETURN(Ints v, ctx.AttrInts("value_ints", {}));
    ctx.SetOutput(0, ctx.Constant(Int64Vector(v)));
    return OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor t, ctx.AttrTensor("value"));
  ctx.SetOutput(0, ctx.Constant(std::move(t)));
  return OkStatus();
}

// The one-element `value` expanded to the shape; a constant, since the shape is known.
Status ConstantOfShape(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"value"}));
  ASSIGN_OR_RETURN(Ints shape, ctx.ConstantInts(0, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Invalid("shape " + IntsStr(shape) + " has a negative dimension");
  }
  Tensor value = Tensor::FromVector<float>(DType::kF32, {1}, {0.0f});
  if (ctx.has_attr("value")) {
    ASSIGN_OR_RETURN(value, ctx.AttrTensor("value"));
    if (value.num_elements() != 1) {
      return ctx.Invalid("attribute 'value' must have one element, got " + std::to_string(value.num_elements()));
    }
  }
  return SetResult(ctx, Filled(ctx, value, shape));
}

// Computed on the host: the bounds must be constants, so the output is one too. Integers
// are exact. For f32, following the ONNX definition output[i] = start + i * delta, each
// element is fl(start + fl(float(i) * delta)): two binary32 operations, each rounded to
// nearest even (no fma; float(i) is exact below 2^24). The count is
// max(ceil((limit - start) / delta), 0) with limit - start rounded to binary32 and the
// division done in binary64 (as onnxruntime does).
Status Range(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  const char* names[3] = {"start", "limit", "delta"};
  const Tensor* t[3];
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.Invalid(std::string(names[i]) + " (input " + std::to_string(i) + ") is required");
    t[i] = ctx.input_constant(i);
    if (!t[i]) return ctx.Unsupported(std::string(names[i]) + " " + std::string(kComputedAtRunTime));
    if (t[i]->num_elements() != 1) {
      return ctx.Invalid(std::string(names[i]) + " must be a scalar, got shape " + ShapeToString(t[i]->shape()));
    }
    if (t[i]->dtype() != t[0]->dtype()) {
      return ctx.Invalid("start, limit and delta must have the same dtype, got " +
                         std::string(DTypeName(t[0]->dtype())) + " and " + std::string(DTypeName(t[i]->dtype())));
    }
  }
  const DType dtype = t[0]->dtype();
  // Rejects counts over the element cap before anything is allocated. It emits, which may
  // move the value table: t[] is not read after it.
  auto check_count = [&](int64_t n) -> Status {
    const Tensor zero(dtype, {});
    return Filled(ctx, zero, {n}).status();
  };
  if (dtype == DType::kF32) {
    const float start = t[0]->data_as<float>()[0], limit = t[1]->data_as<float>()[0], delta = t[2]->data_as<float>()[0];
    if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
      return ctx.Invalid("start, limit and delta must be finite");
    }
    if (delta == 0.0f) return ctx.Invalid("delta must not be 0");
    const float diff = limit - start;
    const double count = std::ceil(static_cast<double>(diff) / static_cast<double>(delta));
    if (!(count < 4.0e18)) return ctx.Invalid("the range has too many elements");
    const int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
    RETURN_IF_ERROR(check_count(n));
    Tensor out(DType::kF32, {n});
    float* o = out.data_as<float>();
    for (int64_t i = 0; i < n; ++i) {
      const float step = static_cast<float>(i) * delta;
      o[i] = start + step;
    }
    ctx.SetOutput(0, ctx.Constant(std::move(out)));
    return OkStatus();
  }
  if (dtype != DType::kI32 && dtype != DType::kI64) {
    return ctx.Unsupported("dtype " + std::string(DTypeName(dtype)) + " for Range (needs float, int32 or int64)");
  }
  ASSIGN_OR_RETURN(Ints start, TensorToInts(*t[0]));
  ASSIGN_OR_RETURN(Ints limit, TensorToInts(*t[1]));
  ASSIGN_OR_RETURN(Ints delta, TensorToInts(*t[2]));
  if (delta[0] == 0) return ctx.Invalid("delta must not be 0");
  // Exact: ceil((limit - start) / delta) in 128-bit arithmetic.
  const __int128 diff = static_cast<__int128>(limit[0]) - start[0];
  const __int128 d = delta[0];
  __int128 q = diff / d;
  if (q * d != diff && ((diff > 0) == (d > 0))) ++q;  // round the quotient up
  if (q < 0) q = 0;
  if (q > (__int128{1} << 62)) return ctx.Invalid("the range has too many elements");
  const int64_t n = static_cast<int64_t>(q);
  RETURN_IF_ERROR(check_count(n));
  Tensor out(dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(static_cast<__int128>(start[0]) + static_cast<__int128>(i) * d);
    if (dtype == DType::kI64) {
      out.data_as<int64_t>()[i] = v;
    } else {
      out.data_as<int32_t>()[i] = static_cast<int32_t>(v);  // within [start, limit): fits
    }
  }
  ctx.SetOutput(0, ctx.Constant(std::move(out)));
  return OkStatus();
}

// --- views ---------------------------------------------------------------------------

// The ONNX 0 ("copy the input dim") is resolved here; the -1 is left to Consensor's
// reshape, which infers it the same way.
// Before opset 5 the shape is an attribute.
Status Reshape(NodeContext& ctx) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  Ints shape;
  int64_t allowzero = 0;
  if (ctx.opset() < 5) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"shape", "consumed_inputs"}));
    if (!ctx.has_attr("shape")) return ctx.Invalid("attribute 'shape' is required");
    ASSIGN_OR_RETURN(shape, ctx.AttrInts("shape", {}));
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({"allowzero"}));
    ASSIGN_OR_RETURN(allowzero, ctx.AttrInt("allowzero", 0));
    ASSIGN_OR_RETURN(shape, ctx.ConstantInts(1, "shape"));
  }
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  if (allowzero == 0) {
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] != 0) continue;
      if (i >= in.size()) {
        return ctx.Invalid("shape " + IntsStr(shape) + " copies dim " + std::to_string(i) + " (a 0) but the input " +
                           ShapeToString(in) + " has rank " + std::to_string(in.size()));
      }
      shape[i] = in[i];
    }
  }
  return SetResult(ctx, ctx.Emit("reshape", {x}, {{"shape", shape}}));
}

// A reshape to [prod(dims before axis), prod(dims from axis)].
Status Flatten(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  const int64_t rank = static_cast<int64_t>(in.size());
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", 1));
  // Unlike most axes, axis == rank is allowed (the output is [numel, 1]).
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis > rank) {
    return ctx.Invalid("axis " + std::to_string(axis_attr) + " is out of range for rank " + std::to_string(rank));
  }
  const Shape out = {Product(in, 0, static_cast<size_t>(axis)), Product(in, static_cast<size_t>(axis), in.size())};
  return SetResult(ctx, ctx.Emit("reshape", {x}, {{"shape", Ints(out)}}));
}

// Axes come from an attribute before opset 13 and from input 1 from opset 13.
StatusOr<std::optional<Ints>> AxesOf(NodeContext& ctx) {
  if (ctx.opset() < 13) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"axes"}));
    if (!ctx.has_attr("axes")) return std::optional<Ints>();
    ASSIGN_OR_RETURN(Ints axes, ctx.AttrInts("axes", {}));
    return std::optional<Ints>(std::move(axes));
  }
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  if (!ctx.has_input(1)) return std::optional<Ints>();
  ASSIGN_OR_RETURN(Ints axes, ctx.ConstantInts(1, "axes"));
  return std::optional<Ints>(std::move(axes));
}

// Dropping size-1 dims does not move any element: a reshape.
Status Squeeze(NodeContext& ctx) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(std::optional<Ints> axes_in, AxesOf(ctx));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (!axes_in) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    ASSIGN_OR_RETURN(Ints axes, NormalizeAxes(ctx, *axes_in, rank, "axes"));
    for (int64_t a : axes) {
      if (in[a] != 1) {
        return ctx.Invalid("cannot squeeze axis " + std::to_string(a) + " of shape " + ShapeToString(in) +
                           ": its size is " + std::to_string(in[a]) + ", not 1");
      }
      drop[a] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  return SetResult(ctx, ctx.Emit("reshape", {x}, {{"shape", Ints(out)}}));
}

// Inserting size-1 dims does not move any element: a reshape. Axes index the output.
Status Unsqueeze(NodeContext& ctx) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(std::optional<Ints> axes_in, AxesOf(ctx));
  if (!axes_in) return ctx.Invalid("axes are required");
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  const int64_t out_rank = static_cast<int64_t>(in.size() + axes_in->size());
  if (out_rank > kMaxRank) {
    return ctx.Unsupported("output rank " + std::to_string(out_rank) + " (at most " + std::to_string(kMaxRank) + ")");
  }
  ASSIGN_OR_RETURN(Ints axes, NormalizeAxes(ctx, *axes_in, out_rank, "axes"));
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end()) {
      out.push_back(1);
    } else {
      out.push_back(in[next++]);
    }
  }
  return SetResult(ctx, ctx.Emit("reshape", {x}, {{"shape", Ints(out)}}));
}

// Same semantics as Consensor's transpose, default (reversed dims) included.
Status Transpose(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"perm"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  Attributes attrs;
  if (ctx.has_attr("perm")) {
    ASSIGN_OR_RETURN(Ints perm, ctx.AttrInts("perm", {}));
    attrs["perm"] = perm;
  }
  return SetResult(ctx, ctx.Emit("transpose", {x}, std::move(attrs)));
}

// Consensor's slice has ONNX semantics (negative indices, clamping, negative steps), so
// only where the parameters come from differs: attributes before opset 10, inputs after.
Status Slice(NodeContext& ctx) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  Attributes attrs;
  if (ctx.opset() < 10) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"starts", "ends", "axes"}));
    if (!ctx.has_attr("starts") || !ctx.has_attr("ends")) {
      return ctx.Invalid("attributes 'starts' and 'ends' are required");
    }
    ASSIGN_OR_RETURN(Ints starts, ctx.AttrInts("starts", {}));
    ASSIGN_OR_RETURN(Ints ends, ctx.AttrInts("ends", {}));
    attrs["starts"] = starts;
    attrs["ends"] = ends;
    if (ctx.has_attr("axes")) {
      ASSIGN_OR_RETURN(Ints axes, ctx.AttrInts("axes", {}));
      attrs["axes"] = axes;
    }
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({}));
    ASSIGN_OR_RETURN(Ints starts, ctx.ConstantInts(1, "starts"));
    ASSIGN_OR_RETURN(Ints ends, ctx.ConstantInts(2, "ends"));
    attrs["starts"] = starts;
    attrs["ends"] = ends;
    if (ctx.has_input(3)) {
      ASSIGN_OR_RETURN(Ints axes, ctx.ConstantInts(3, "axes"));
      attrs["axes"] = axes;
    }
    if (ctx.has_input(4)) {
      ASSIGN_OR_RETURN(Ints steps, ctx.ConstantInts(4, "steps"));
      attrs["steps"] = steps;
    }
  }
  return SetResult(ctx, ctx.Emit("slice", {x}, std::move(attrs)));
}

// Same semantics as Consensor's concat.
Status Concat(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  // Required from opset 4; before, it defaults to 1.
  if (ctx.opset() >= 4 && !ctx.has_attr("axis")) return ctx.Invalid("attribute 'axis' is required");
  ASSIGN_OR_RETURN(int64_t axis, ctx.AttrInt("axis", 1));
  std::vector<ValueId> inputs;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(ValueId v, ctx.RequiredInput(i));
    inputs.push_back(v);
  }
  if (inputs.empty()) return ctx.Invalid("needs at least one input");
  return SetResult(ctx, ctx.Emit("concat", std::move(inputs), {{"axis", axis}}));
}

// Same semantics as Consensor's gather (negative indices count from the end; an index out
// of range is an error, at import when the indices are constants, else at run time).
Status Gather(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(int64_t axis, ctx.AttrInt("axis", 0));
  ASSIGN_OR_RETURN(ValueId data, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId indices, ctx.RequiredInput(1));
  return SetResult(ctx, ctx.Emit("gather", {data, indices}, {{"axis", axis}}));
}

// GatherElements: one `gather` from the flattened data at flat positions
// idx' * stride[axis] + base, where idx' = where(less(idx, 0), add(idx, n), idx) and base is
// a constant holding every other coordinate's share. An idx' outside [0, n) is replaced by
// the element count, so `gather` fails the task (or the import, for constant indices) as an
// out-of-range index instead of reading a neighbouring row.
Status GatherElements(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId data, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId indices, ctx.RequiredInput(1));
  const Shape ds = ctx.type(data).shape;  // copies: Emit may move the value table
  const Shape is = ctx.type(indices).shape;
  const DType index_dtype = ctx.type(indices).dtype;
  const int64_t rank = static_cast<int64_t>(ds.size());
  if (rank == 0 || static_cast<int64_t>(is.size()) != rank) {
    return ctx.Invalid("data and indices must have the same rank, at least 1");
  }
  if (index_dtype != DType::kI32 && index_dtype != DType::kI64) return ctx.Invalid("indices must be int32 or int64");
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank, "axis"));
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && is[d] > ds[d]) {
      return ctx.Invalid("indices " + ShapeToString(is) + " exceed data " + ShapeToString(ds) + " on axis " +
                         std::to_string(d));
    }
  }
  ASSIGN_OR_RETURN(int64_t data_count, CheckedNumElements(ds));
  ASSIGN_OR_RETURN(int64_t index_count, CheckedNumElements(is));
  Ints strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * ds[d + 1];
  // base[i] = sum over d != axis of i_d * strides[d], in row-major order of the indices.
  Tensor base(DType::kI64, is);
  int64_t* b = base.data_as<int64_t>();
  Ints coord(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < index_count; ++i) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis) offset += coord[d] * strides[d];
    }
    b[i] = offset;
    for (int64_t d = rank - 1; d >= 0 && ++coord[d] == is[d]; --d) coord[d] = 0;
  }
  const int64_t n = ds[axis];
  ValueId idx = indices;
  if (index_dtype != DType::kI64) {
    ASSIGN_OR_RETURN(idx, ctx.Emit("cast", {indices}, {{"to", DType::kI64}}));
  }
  const ValueId zero = ctx.Scalar(DType::kI64, 0.0);
  const ValueId n_value = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {n}));
  ASSIGN_OR_RETURN(ValueId negative, ctx.Emit("less", {idx, zero}));
  ASSIGN_OR_RETURN(ValueId wrapped, ctx.Emit("add", {idx, n_value}));
  ASSIGN_OR_RETURN(idx, ctx.Emit("where", {negative, wrapped, idx}));
  ASSIGN_OR_RETURN(ValueId below, ctx.Emit("less", {idx, zero}));
  ASSIGN_OR_RETURN(ValueId above, ctx.Emit("greater_equal", {idx, n_value}));
  ASSIGN_OR_RETURN(ValueId out_of_range, ctx.Emit("or", {below, above}));
  const ValueId stride = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {strides[axis]}));
  ASSIGN_OR_RETURN(ValueId along, ctx.Emit("mul", {idx, stride}));
  ASSIGN_OR_RETURN(ValueId flat_index, ctx.Emit("add", {along, ctx.Constant(std::move(base))}));
  const ValueId past_end = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {data_count}));
  ASSIGN_OR_RETURN(flat_index, ctx.Emit("where", {out_of_range, past_end, flat_index}));
  ASSIGN_OR_RETURN(ValueId flat_data, ReshapeTo(ctx, data, {data_count}));
  return SetResult(ctx, ctx.Emit("gather", {flat_data, flat_index}, {{"axis", int64_t{0}}}));
}

// GatherND: the data reshaped to [B * R, T] (B the batch dims, R the k indexed dims, T the
// rest); each index tuple becomes one row number, reduce_sum(mul(i', strides)) over the
// tuple plus a constant batch offset, and one `gather` on axis 0 fetches the rows. As for
// GatherElements, a tuple with any component outside [0, dim) after wrapping negatives is
// replaced by B * R, so `gather` refuses it.
Status GatherNd(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"batch_dims"}));
  ASSIGN_OR_RETURN(int64_t batch_dims, ctx.AttrInt("batch_dims", 0));
  ASSIGN_OR_RETURN(ValueId data, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId indices, ctx.RequiredInput(1));
  const Shape ds = ctx.type(data).shape;  // copies: Emit may move the value table
  const Shape is = ctx.type(indices).shape;
  const DType index_dtype = ctx.type(indices).dtype;
  const int64_t r = static_cast<int64_t>(ds.size()), q = static_cast<int64_t>(is.size());
  if (index_dtype != DType::kI32 && index_dtype != DType::kI64) return ctx.Invalid("indices must be int32 or int64");
  if (r < 1 || q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return ctx.Invalid("needs data and indices of rank 1 or more and 0 <= batch_dims < min(their ranks)");
  }
  const int64_t k = is[q - 1];
  if (k < 1 || k > r - batch_dims) {
    return ctx.Invalid("the last dim of indices must be between 1 and rank(data) - batch_dims");
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (is[d] != ds[d]) return ctx.Invalid("the batch dims of data and indices differ");
  }
  int64_t batches = 1, rows_per_batch = 1;
  for (int64_t d = 0; d < batch_dims; ++d) batches *= ds[d];
  Ints dims_k(static_cast<size_t>(k)), strides_k(static_cast<size_t>(k));
  for (int64_t j = k - 1; j >= 0; --j) {
    dims_k[j] = ds[batch_dims + j];
    strides_k[j] = rows_per_batch;
    rows_per_batch *= dims_k[j];
  }
  Shape tuple_shape(is.begin(), is.end() - 1);
  Shape out_shape = tuple_shape;
  int64_t tail = 1;
  for (int64_t d = batch_dims + k; d < r; ++d) {
    tail *= ds[d];
    out_shape.push_back(ds[d]);
  }
  ASSIGN_OR_RETURN(int64_t tuple_count, CheckedNumElements(tuple_shape));
  // batch_base[t] = (the batch of tuple t) * rows_per_batch; tuples of one batch are contiguous.
  Tensor batch_base(DType::kI64, tuple_shape);
  const int64_t tuples_per_batch = batches == 0 ? 0 : tuple_count / batches;
  int64_t* base = batch_base.data_as<int64_t>();
  for (int64_t t = 0; t < tuple_count; ++t) base[t] = (t / tuples_per_batch) * rows_per_batch;
  ValueId idx = indices;
  if (index_dtype != DType::kI64) {
    ASSIGN_OR_RETURN(idx, ctx.Emit("cast", {indices}, {{"to", DType::kI64}}));
  }
  const ValueId zero = ctx.Scalar(DType::kI64, 0.0);
  const ValueId dims = ctx.Constant(Int64Vector(dims_k));
  ASSIGN_OR_RETURN(ValueId negative, ctx.Emit("less", {idx, zero}));
  ASSIGN_OR_RETURN(ValueId wrapped, ctx.Emit("add", {idx, dims}));
  ASSIGN_OR_RETURN(idx, ctx.Emit("where", {negative, wrapped, idx}));
  ASSIGN_OR_RETURN(ValueId below, ctx.Emit("less", {idx, zero}));
  ASSIGN_OR_RETURN(ValueId above, ctx.Emit("greater_equal", {idx, dims}));
  ASSIGN_OR_RETURN(ValueId bad, ctx.Emit("or", {below, above}));
  ASSIGN_OR_RETURN(ValueId bad_count, ctx.Emit("cast", {bad}, {{"to", DType::kI64}}));
  const Attributes over_tuple = {{"axes", Ints{q - 1}}, {"keepdims", int64_t{0}}};
  ASSIGN_OR_RETURN(ValueId any_bad, ctx.Emit("reduce_max", {bad_count}, over_tuple));
  ASSIGN_OR_RETURN(ValueId any_bad_bool, ctx.Emit("greater", {any_bad, zero}));
  ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {idx, ctx.Constant(Int64Vector(strides_k))}));
  ASSIGN_OR_RETURN(ValueId row, ctx.Emit("reduce_sum", {scaled}, over_tuple));
  ASSIGN_OR_RETURN(row, ctx.Emit("add", {row, ctx.Constant(std::move(batch_base))}));
  const ValueId past_end = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {batches * rows_per_batch}));
  ASSIGN_OR_RETURN(row, ctx.Emit("where", {any_bad_bool, past_end, row}));
  ASSIGN_OR_RETURN(ValueId table, ReshapeTo(ctx, data, {batches * rows_per_batch, tail}));
  ASSIGN_OR_RETURN(ValueId gathered, ctx.Emit("gather", {table, row}, {{"axis", int64_t{0}}}));
  return SetResult(ctx, ReshapeTo(ctx, gathered, out_shape));
}

// ONNX Expand broadcasts both ways (a 1 in `shape` keeps the input's dim), while
// Consensor's expand targets a shape: give it broadcast(input shape, shape).
Status Expand(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(Ints shape, ctx.ConstantInts(1, "shape"));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  const size_t rank = std::max(in.size(), shape.size());
  Ints out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i < rank - in.size() ? 1 : in[i - (rank - in.size())];
    const int64_t b = i < rank - shape.size() ? 1 : shape[i - (rank - shape.size())];
    if (b < 0) return ctx.Invalid("shape " + IntsStr(shape) + " has a negative dimension");
    if (a == b || b == 1) {
      out[i] = a;
    } else if (a == 1) {
      out[i] = b;
    } else {
      return ctx.Invalid("cannot broadcast the input " + ShapeToString(in) + " with shape " + IntsStr(shape));
    }
  }
  return SetResult(ctx, ctx.Emit("expand", {x}, {{"shape", out}}));
}

// Each output is one slice along the axis. Sizes: input 1 (opset 1 and from 13), attribute
// 'split' (opsets 1 to 12), num_outputs (opset 18), or equal parts.
Status Split(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "split", "num_outputs"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(in.size()), "axis"));
  if (in.empty()) return ctx.Invalid("cannot split a scalar");
  const int64_t dim = in[axis];
  const int64_t n_out = ctx.num_outputs();
  if (n_out < 1) return ctx.Invalid("needs at least one output");
  Ints sizes;
  if (ctx.opset() >= 13 && ctx.has_attr("split")) return ctx.Unsupported("attribute 'split' (an input from opset 13)");
  if (ctx.opset() >= 2 && ctx.opset() < 13 && ctx.has_input(1)) {
    return ctx.Invalid("split sizes are an attribute in opsets 2 to 12");
  }
  if (ctx.has_input(1)) {
    ASSIGN_OR_RETURN(sizes, ctx.ConstantInts(1, "split"));
  } else if (ctx.has_attr("split")) {
    ASSIGN_OR_RETURN(sizes, ctx.AttrInts("split", {}));
  } else if (ctx.has_attr("num_outputs")) {
    // Opset 18: ceil(dim / n) per output, the last one takes what is left.
    ASSIGN_OR_RETURN(int64_t n, ctx.AttrInt("num_outputs", 0));
    if (n != n_out) {
      return ctx.Invalid("num_outputs " + std::to_string(n) + " differs from the node's " + std::to_string(n_out) +
                         " outputs");
    }
    const int64_t chunk = (dim + n - 1) / n;
    int64_t left = dim;
    for (int64_t i = 0; i < n; ++i) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
  } else {
    if (dim % n_out != 0) {
      return ctx.Invalid("axis " + std::to_string(axis) + " of size " + std::to_string(dim) + " cannot be split into " +
                         std::to_string(n_out) + " equal parts");
    }
    sizes.assign(static_cast<size_t>(n_out), dim / n_out);
  }
  if (static_cast<int64_t>(sizes.size()) != n_out) {
    return ctx.Invalid("split " + IntsStr(sizes) + " has " + std::to_string(sizes.size()) + " sizes for " +
                       std::to_string(n_out) + " outputs");
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return ctx.Invalid("split " + IntsStr(sizes) + " has a negative size");
    total += s;
    if (total > dim) break;
  }
  if (total != dim) {
    return ctx.Invalid("split " + IntsStr(sizes) + " does not add up to the size " + std::to_string(dim) + " of axis " +
                       std::to_string(axis));
  }
  int64_t offset = 0;
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t size = sizes[i];
    if (ctx.wants_output(static_cast<int>(i))) {
      ASSIGN_OR_RETURN(
          ValueId part,
          ctx.Emit("slice", {x}, {{"starts", Ints{offset}}, {"ends", Ints{offset + size}}, {"axes", Ints{axis}}}));
      ctx.SetOutput(static_cast<int>(i), part);
    }
    offset += size;
  }
  return OkStatus();
}

// Tiling only copies bits. A dim d repeated r times becomes [1, d] (a reshape), broadcast
// to [r, d] (expand), merged back to r*d (a reshape): row-major order makes that exactly
// r copies of the dim one after another. A dim of size 1 needs no extra axis (expand
// repeats it directly), nor does r == 1. When the extra axes would pass rank 8, the
// copies are concatenated along each repeated axis instead.
Status Tile(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  Ints repeats;
  if (ctx.opset() < 6) {
    // Opsets 1 to 5: one count (input 1) for one axis (input 2).
    ASSIGN_OR_RETURN(Ints tiles, ctx.ConstantInts(1, "tiles"));
    ASSIGN_OR_RETURN(Ints axis_in, ctx.ConstantInts(2, "axis"));
    if (tiles.size() != 1 || axis_in.size() != 1) return ctx.Invalid("tiles and axis must be scalars");
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_in[0], static_cast<int64_t>(in.size()), "axis"));
    repeats.assign(in.size(), 1);
    if (!in.empty()) repeats[axis] = tiles[0];
  } else {
    ASSIGN_OR_RETURN(repeats, ctx.ConstantInts(1, "repeats"));
  }
  if (repeats.size() != in.size()) {
    return ctx.Invalid("repeats " + IntsStr(repeats) + " must have one value per dim of the input " +
                       ShapeToString(in));
  }
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] < 0) return ctx.Invalid("repeats " + IntsStr(repeats) + " has a negative value");
    if (__builtin_mul_overflow(in[i], repeats[i], &out[i])) {
      return ctx.Invalid("repeats " + IntsStr(repeats) + " make dim " + std::to_string(i) + " too large");
    }
  }
  Shape split, target;  // the input with the extra axes; what they are broadcast to
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] != 1 && in[i] != 1) {
      split.push_back(1);
      target.push_back(repeats[i]);
    }
    split.push_back(in[i]);
    target.push_back(in[i] == 1 ? repeats[i] : in[i]);
  }
  if (static_cast<int64_t>(split.size()) <= kMaxRank) {
    ASSIGN_OR_RETURN(ValueId v, ReshapeTo(ctx, x, split));
    if (target != split) {
      ASSIGN_OR_RETURN(v, ctx.Emit("expand", {v}, {{"shape", Ints(target)}}));
    }
    return SetResult(ctx, ReshapeOrCopy(ctx, v, out));
  }
  ValueId v = x;
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] == 1) continue;
    if (repeats[i] == 0 || in[i] == 0) {
      // Nothing to copy along this axis: an empty slice has the right shape.
      ASSIGN_OR_RETURN(
          v, ctx.Emit("slice", {v}, {{"starts", Ints{0}}, {"ends", Ints{0}}, {"axes", Ints{static_cast<int64_t>(i)}}}));
      continue;
    }
    // r copies by binary doubling: O(log r) concats, each checked against the caps.
    const Attributes axis_attr = {{"axis", static_cast<int64_t>(i)}};
    std::optional<ValueId> acc;
    ValueId power = v;  // 2^k copies
    for (int64_t r = repeats[i];;) {
      if (r & 1) {
        if (acc) {
          ASSIGN_OR_RETURN(acc, ctx.Emit("concat", {*acc, power}, axis_attr));
        } else {
          acc = power;
        }
      }
      r >>= 1;
      if (r == 0) break;
      ASSIGN_OR_RETURN(power, ctx.Emit("concat", {power, power}, axis_attr));
    }
    v = *acc;
  }
  if (v == x) {
    ASSIGN_OR_RETURN(v, ctx.Emit("identity", {x}));
  }
  ctx.SetOutput(0, v);
  return OkStatus();
}

// --- Pad -----------------------------------------------------------------------------

// The source index along one axis for output position j (which runs from -pad_begin to
// dim + pad_end - 1 in input coordinates) in the edge, reflect and wrap modes.
int64_t SourceIndex(const std::string& mode, int64_t j, int64_t dim) {
  if (j >= 0 && j < dim) return j;
  if (mode == "edge") return std::clamp<int64_t>(j, 0, dim - 1);
  if (mode == "wrap") return ((j % dim) + dim) % dim;
  // reflect: mirror about the first and last elements, which are not repeated (numpy).
  if (dim == 1) return 0;
  const int64_t period = 2 * (dim - 1);
  const int64_t k = ((j % period) + period) % period;
  return k < dim ? k : period - k;
}

// Constant mode lowers to Consensor's pad, whose fill value is an f32 attribute converted
// like `cast`. When the fill is computed at run time, or is an integer that does not
// survive the trip through f32, the tensor is padded with 0 and the fill is chosen with
// `where` from a constant mask (true inside the original tensor): still exact. Negative
// pads remove elements: a slice after the pad. Edge, reflect and wrap modes copy existing
// elements, so each padded axis is one gather with constant indices.
Status PadImpl(NodeContext& ctx, ValueId x, Ints pads, const std::string& mode, std::optional<ValueId> fill) {
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  const int64_t rank = static_cast<int64_t>(in.size());
  const DType dtype = ctx.type(x).dtype;
  if (static_cast<int64_t>(pads.size()) != 2 * rank) {
    return ctx.Invalid("pads " + IntsStr(pads) + " must have 2 values per dim of the input " + ShapeToString(in));
  }
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t big = int64_t{1} << 40;  // far above any element cap; keeps the sums below exact
    if (pads[d] > big || pads[d + rank] > big || pads[d] < -big || pads[d + rank] < -big) {
      return ctx.Invalid("pads " + IntsStr(pads) + " are too large");
    }
    if (in[d] + pads[d] + pads[d + rank] < 0) {
      return ctx.Invalid("pads " + IntsStr(pads) + " remove more than dim " + std::to_string(d) + " of the input " +
                         ShapeToString(in));
    }
  }
  if (mode == "edge" || mode == "reflect" || mode == "wrap") {
    ValueId v = x;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t pb = pads[d], pe = pads[d + rank];
      if (pb == 0 && pe == 0) continue;
      const int64_t n = in[d] + pb + pe;
      if (in[d] == 0 && n > 0) {
        return ctx.Invalid("cannot pad the empty dim " + std::to_string(d) + " in mode '" + mode + "'");
      }
      RETURN_IF_ERROR(Filled(ctx, Tensor(DType::kI64, {}), {n}).status());  // element cap on the indices
      Ints idx;
      for (int64_t j = -pb; j < in[d] + pe; ++j) idx.push_back(SourceIndex(mode, j, in[d]));
      ASSIGN_OR_RETURN(v, ctx.Emit("gather", {v, ctx.Constant(Int64Vector(idx))}, {{"axis", d}}));
    }
    if (v == x) {
      ASSIGN_OR_RETURN(v, ctx.Emit("identity", {x}));
    }
    return SetResult(ctx, v);
  }
  if (mode != "constant") return ctx.Unsupported("mode '" + mode + "'");

  // The fill as an f32 attribute, when that is exact (0 when absent).
  float attr_value = 0.0f;
  bool use_attr = true;
  if (fill) {
    const TypeInfo fill_type = ctx.type(*fill);
    if (fill_type.dtype != dtype) {
      return ctx.Invalid("constant_value has dtype " + std::string(DTypeName(fill_type.dtype)) + " but the data is " +
                         std::string(DTypeName(dtype)));
    }
    if (Product(fill_type.shape, 0, fill_type.shape.size()) != 1) {
      return ctx.Invalid("constant_value must have one element, got shape " + ShapeToString(fill_type.shape));
    }
    use_attr = false;
    if (const Tensor* t = ctx.constant(*fill)) {
      if (dtype == DType::kF32) {
        attr_value = t->data_as<float>()[0];
        use_attr = true;
      } else if (dtype == DType::kBool) {
        attr_value = static_cast<float>(t->data()[0]);
        use_attr = true;
      } else {
        ASSIGN_OR_RETURN(Ints iv, TensorToInts(*t));
        attr_value = static_cast<float>(iv[0]);
        use_attr = std::fabs(attr_value) < 9.2e18f && static_cast<int64_t>(attr_value) == iv[0];
      }
    }
  }
  // Negative pads are applied after the pad, as a slice of the grown tensor.
  Ints grow(pads.size()), starts(static_cast<size_t>(rank)), ends(static_cast<size_t>(rank));
  bool shrink = false;
  for (int64_t d = 0; d < rank; ++d) {
    grow[d] = std::max<int64_t>(pads[d], 0);
    grow[d + rank] = std::max<int64_t>(pads[d + rank], 0);
    shrink = shrink || pads[d] < 0 || pads[d + rank] < 0;
    // Never negative, so slice's from-the-end rule does not apply.
    starts[d] = std::max<int64_t>(-pads[d], 0);
    ends[d] = in[d] + grow[d] + pads[d + rank];
  }
  ValueId v = x;
  const bool grows = std::any_of(grow.begin(), grow.end(), [](int64_t p) { return p > 0; });
  if (grows) {
    if (use_attr) {
      ASSIGN_OR_RETURN(v, ctx.Emit("pad", {x}, {{"pads", grow}, {"value", attr_value}}));
    } else {
      ASSIGN_OR_RETURN(ValueId padded, ctx.Emit("pad", {x}, {{"pads", grow}, {"value", 0.0f}}));
      const Tensor one = Tensor::FromVector<uint8_t>(DType::kBool, {}, {1});
      ASSIGN_OR_RETURN(ValueId inside, Filled(ctx, one, Ints(in)));
      ASSIGN_OR_RETURN(ValueId mask, ctx.Emit("pad", {inside}, {{"pads", grow}, {"value", 0.0f}}));
      ASSIGN_OR_RETURN(ValueId fill_value, ReshapeTo(ctx, *fill, {}));
      ASSIGN_OR_RETURN(v, ctx.Emit("where", {mask, padded, fill_value}));
    }
  }
  if (shrink) {
    ASSIGN_OR_RETURN(v, ctx.Emit("slice", {v}, {{"starts", starts}, {"ends", ends}}));
  }
  if (v == x) {
    ASSIGN_OR_RETURN(v, ctx.Emit("identity", {x}));
  }
  return SetResult(ctx, v);
}

Status Pad(NodeContext& ctx) {
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  const int64_t rank = static_cast<int64_t>(ctx.type(x).shape.size());
  if (ctx.opset() < 11) {
    // Opsets 1 to 10: attributes ('paddings' in opset 1).
    const char* pads_name = ctx.opset() < 2 ? "paddings" : "pads";
    RETURN_IF_ERROR(ctx.CheckAttributes({pads_name, "value", "mode"}));
    ASSIGN_OR_RETURN(std::string mode, ctx.AttrString("mode", "constant"));
    if (!ctx.has_attr(pads_name)) return ctx.Invalid("attribute '" + std::string(pads_name) + "' is required");
    ASSIGN_OR_RETURN(Ints pads, ctx.AttrInts(pads_name, {}));
    ASSIGN_OR_RETURN(float value, ctx.AttrFloat("value", 0.0f));
    // The attribute is a float; converted to the data's dtype like `cast`.
    ValueId fill = ctx.ScalarF32(value);
    if (ctx.type(x).dtype != DType::kF32) {
      ASSIGN_OR_RETURN(fill, ctx.Emit("cast", {fill}, {{"to", ctx.type(x).dtype}}));
    }
    return PadImpl(ctx, x, std::move(pads), mode, fill);
  }
  RETURN_IF_ERROR(ctx.CheckAttributes({"mode"}));
  ASSIGN_OR_RETURN(std::string mode, ctx.AttrString("mode", "constant"));
  ASSIGN_OR_RETURN(Ints pads_in, ctx.ConstantInts(1, "pads"));
  std::optional<ValueId> fill;
  if (ctx.has_input(2)) fill = ctx.input(2);
  Ints pads = pads_in;
  if (ctx.has_input(3)) {
    // Opset 18: pads are given for the listed axes only.
    ASSIGN_OR_RETURN(Ints axes_in, ctx.ConstantInts(3, "axes"));
    ASSIGN_OR_RETURN(Ints axes, NormalizeAxes(ctx, axes_in, rank, "axes"));
    if (pads_in.size() != 2 * axes.size()) {
      return ctx.Invalid("pads " + IntsStr(pads_in) + " must have 2 values per axis in " + IntsStr(axes_in));
    }
    pads.assign(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      pads[axes[i]] = pads_in[i];
      pads[axes[i] + rank] = pads_in[i + axes.size()];
    }
  }
  return PadImpl(ctx, x, std::move(pads), mode, fill);
}

// --- depth <-> space -----------------------------------------------------------------

// Pure index permutations: reshape to 6-D, transpose, reshape back.
Status DepthToSpace(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"blocksize", "mode"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  if (!ctx.has_attr("blocksize")) return ctx.Invalid("attribute 'blocksize' is required");
  ASSIGN_OR_RETURN(int64_t b, ctx.AttrInt("blocksize", 0));
  ASSIGN_OR_RETURN(std::string mode, ctx.AttrString("mode", "DCR"));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  if (in.size() != 4) return ctx.Invalid("the input must have rank 4, got " + ShapeToString(in));
  if (b <= 0) return ctx.Invalid("blocksize must be positive, got " + std::to_string(b));
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  if (b > (int64_t{1} << 20) || c % (b * b) != 0) {
    return ctx.Invalid("channels " + std::to_string(c) + " are not a multiple of blocksize^2 (blocksize " +
                       std::to_string(b) + ")");
  }
  const int64_t oc = c / (b * b);
  Shape six;
  Ints perm;
  if (mode == "DCR") {
    six = {n, b, b, oc, h, w};
    perm = {0, 3, 4, 1, 5, 2};
  } else if (mode == "CRD") {
    six = {n, oc, b, b, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    return ctx.Unsupported("mode '" + mode + "'");
  }
  ASSIGN_OR_RETURN(ValueId v, ctx.Emit("reshape", {x}, {{"shape", Ints(six)}}));
  ASSIGN_OR_RETURN(v, ctx.Emit("transpose", {v}, {{"perm", perm}}));
  return SetResult(ctx, ctx.Emit("reshape", {v}, {{"shape", Ints{n, oc, h * b, w * b}}}));
}

Status SpaceToDepth(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"blocksize"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  if (!ctx.has_attr("blocksize")) return ctx.Invalid("attribute 'blocksize' is required");
  ASSIGN_OR_RETURN(int64_t b, ctx.AttrInt("blocksize", 0));
  const Shape in = ctx.type(x).shape;  // a copy: Emit may move the value table
  if (in.size() != 4) return ctx.Invalid("the input must have rank 4, got " + ShapeToString(in));
  if (b <= 0) return ctx.Invalid("blocksize must be positive, got " + std::to_string(b));
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  if (h % b != 0 || w % b != 0) {
    return ctx.Invalid("height " + std::to_string(h) + " and width " + std::to_string(w) +
                       " must be multiples of blocksize " + std::to_string(b));
  }
  ASSIGN_OR_RETURN(ValueId v, ctx.Emit("reshape", {x}, {{"shape", Ints{n, c, h / b, b, w / b, b}}}));
  ASSIGN_OR_RETURN(v, ctx.Emit("transpose", {v}, {{"perm", Ints{0, 3, 5, 1, 2, 4}}}));
  return SetResult(ctx, ctx.Emit("reshape", {v}, {{"shape", Ints{n, c * b * b, h / b, w / b}}}));
}

// Trilu: where(mask, x, 0) with a constant [M, N] mask over the last two dims, true where
// j - i >= k (upper) or j - i <= k (lower). k must be known at import.
Status Trilu(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"upper"}));
  ASSIGN_OR_RETURN(int64_t upper, ctx.AttrInt("upper", 1));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    ASSIGN_OR_RETURN(Ints ks, ctx.ConstantInts(1, "k"));
    if (ks.size() != 1) return ctx.Invalid("k must be a scalar");
    k = ks[0];
  }
  const Shape& xs = ctx.type(x).shape;
  if (xs.size() < 2) return ctx.Invalid("input must have rank 2 or more");
  const int64_t rows = xs[xs.size() - 2], cols = xs[xs.size() - 1];
  Tensor mask(DType::kBool, {rows, cols});  // no larger than x, whose shape passed the caps
  uint8_t* m = mask.data();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      // j - i cannot overflow (both are dims); k may be any int64.
      const int64_t diagonal = j - i;
      m[i * cols + j] = upper != 0 ? diagonal >= k : diagonal <= k;
    }
  }
  const ValueId zero = ctx.Scalar(ctx.type(x).dtype, 0.0);
  return SetResult(ctx, ctx.Emit("where", {ctx.Constant(std::move(mask)), x, zero}));
}

// OneHot: indices (cast to i64, truncating floats), negative ones + depth, compared with a
// constant iota [depth] on the new axis: where(equal(idx, iota), on, off). Indices outside
// [-depth, depth) match nothing and give an all-`off` row, as ONNX says. depth must be known
// at import.
Status OneHot(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId indices, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId values, ctx.RequiredInput(2));
  ASSIGN_OR_RETURN(double depth_value, ctx.ConstantScalar(1, "depth"));
  const Shape is = ctx.type(indices).shape;
  ASSIGN_OR_RETURN(int64_t index_count, CheckedNumElements(is));
  // The cap keeps the iota table and the output bounded before anything is allocated.
  const double cap = static_cast<double>(ctx.limits().max_elements_per_tensor);
  if (!(depth_value >= 1.0) || depth_value > cap ||
      depth_value * static_cast<double>(std::max<int64_t>(index_count, 1)) > cap) {
    return ctx.Invalid("depth must be at least 1 and the output within the element cap");
  }
  const int64_t depth = static_cast<int64_t>(depth_value);
  if (ctx.type(values).shape.size() != 1 || ctx.type(values).shape[0] != 2) {
    return ctx.Invalid("values must have shape [2] (off, on)");
  }
  const int64_t out_rank = static_cast<int64_t>(is.size()) + 1;
  if (out_rank > kMaxRank) return ctx.Unsupported("an output rank over 8");
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", -1));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, out_rank, "axis"));
  const DType index_dtype = ctx.type(indices).dtype;
  if (index_dtype == DType::kBool) return ctx.Invalid("indices must be numeric");
  ValueId idx = indices;
  if (index_dtype != DType::kI64) {
    ASSIGN_OR_RETURN(idx, ctx.Emit("cast", {indices}, {{"to", DType::kI64}}));
  }
  const ValueId depth_i64 = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {depth}));
  ASSIGN_OR_RETURN(ValueId negative, ctx.Emit("less", {idx, ctx.Scalar(DType::kI64, 0.0)}));
  ASSIGN_OR_RETURN(ValueId wrapped, ctx.Emit("add", {idx, depth_i64}));
  ASSIGN_OR_RETURN(idx, ctx.Emit("where", {negative, wrapped, idx}));
  Shape expanded = is;
  expanded.insert(expanded.begin() + axis, 1);
  ASSIGN_OR_RETURN(idx, ReshapeTo(ctx, idx, expanded));
  Ints positions(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i) positions[static_cast<size_t>(i)] = i;
  Shape iota_shape(static_cast<size_t>(out_rank - axis), 1);
  iota_shape[0] = depth;
  ASSIGN_OR_RETURN(ValueId iota, ReshapeTo(ctx, ctx.Constant(Int64Vector(positions)), iota_shape));
  ASSIGN_OR_RETURN(ValueId hit, ctx.Emit("equal", {idx, iota}));
  ASSIGN_OR_RETURN(ValueId off,
                   ctx.Emit("slice", {values}, {{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{0}}}));
  ASSIGN_OR_RETURN(ValueId on,
                   ctx.Emit("slice", {values}, {{"starts", Ints{1}}, {"ends", Ints{2}}, {"axes", Ints{0}}}));
  ASSIGN_OR_RETURN(off, ReshapeTo(ctx, off, {}));
  ASSIGN_OR_RETURN(on, ReshapeTo(ctx, on, {}));
  return SetResult(ctx, ctx.Emit("where", {hit, on, off}));
}

// EyeLike: only x's shape matters, and shapes are static, so the result is a constant
// folded at import: cast(mask, dtype) with the bool mask true where j - i == k.
Status EyeLike(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"dtype", "k"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(int64_t k, ctx.AttrInt("k", 0));
  DType dtype = ctx.type(x).dtype;
  if (ctx.has_attr("dtype")) {
    ASSIGN_OR_RETURN(int64_t onnx_type, ctx.AttrInt("dtype", 0));
    if (onnx_type < 0 || onnx_type > std::numeric_limits<int32_t>::max()) {
      return ctx.Invalid("dtype " + std::to_string(onnx_type) + " is not an ONNX element type");
    }
    ASSIGN_OR_RETURN(dtype, DTypeFromOnnx(static_cast<int32_t>(onnx_type), "the dtype of " + ctx.Where()));
  }
  const Shape xs = ctx.type(x).shape;
  if (xs.size() != 2) return ctx.Invalid("input must have rank 2, got " + ShapeToString(xs));
  Tensor mask(DType::kBool, xs);  // no larger than x, whose shape passed the caps
  uint8_t* m = mask.data();
  for (int64_t i = 0; i < xs[0]; ++i) {
    for (int64_t j = 0; j < xs[1]; ++j) m[i * xs[1] + j] = j - i == k;  // j - i cannot overflow
  }
  return SetResult(ctx, ctx.Emit("cast", {ctx.Constant(std::move(mask))}, {{"to", dtype}}));
}

}  // namespace

// HannWindow, HammingWindow, BlackmanWindow (DETERMINISM.md 6.6): the window is folded to a
// constant at import, in f32 with detmath::cos, so size must be known at import. With
// N = size (periodic) or size - 1 (symmetric) and x_k = (k * 2pi * n) / N for n in
// [0, size): y = a0 - a1 * cos(x_1) + a2 * cos(x_2), each product and sum rounded in order.
struct WindowCoefficients {
  float a0, a1, a2;
};

Status Window(NodeContext& ctx, WindowCoefficients w) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"periodic", "output_datatype"}));
  ASSIGN_OR_RETURN(int64_t periodic, ctx.AttrInt("periodic", 1));
  ASSIGN_OR_RETURN(int64_t onnx_dtype, ctx.AttrInt("output_datatype", 1));
  ASSIGN_OR_RETURN(DType out_dtype, DTypeFromOnnx(static_cast<int32_t>(onnx_dtype), "output_datatype"));
  if (out_dtype != DType::kF32 && !IsIntegerDType(out_dtype)) {
    return ctx.Unsupported("output_datatype " + std::string(DTypeName(out_dtype)));
  }
  ASSIGN_OR_RETURN(ValueId size_input, ctx.RequiredInput(0));
  const TypeInfo& st = ctx.type(size_input);
  if (!IsIntegerDType(st.dtype) || !st.shape.empty()) return ctx.Invalid("size must be an integer scalar");
  ASSIGN_OR_RETURN(double size_value, ctx.ConstantScalar(0, "size"));
  // 2^24 keeps n and N exact in f32; the element cap bounds the allocation.
  const double cap = std::min<double>(static_cast<double>(ctx.limits().max_elements_per_tensor), 0x1p24);
  if (!(size_value >= 0.0) || size_value > cap) {
    return ctx.Invalid("size " + std::to_string(static_cast<int64_t>(size_value)) + " is outside [0, " +
                       std::to_string(static_cast<int64_t>(cap)) + "]");
  }
  const int64_t size = static_cast<int64_t>(size_value);
  const float big_n = static_cast<float>(periodic != 0 ? size : size - 1);  // 0 / 0 = NaN for size 1
  constexpr float kTwoPi = 0x1.921fb6p+2f;
  constexpr float kFourPi = 0x1.921fb6p+3f;
  Tensor out(DType::kF32, {size});
  float* o = out.data_as<float>();
  for (int64_t n = 0; n < size; ++n) {
    const float nf = static_cast<float>(n);
    const float c1 = detmath::cos((kTwoPi * nf) / big_n);
    const float c2 = detmath::cos((kFourPi * nf) / big_n);
    o[n] = detmath::canonicalize_nan((w.a0 - w.a1 * c1) + w.a2 * c2);
  }
  const ValueId window = ctx.Constant(std::move(out));
  if (out_dtype == DType::kF32) return SetResult(ctx, window);
  return SetResult(ctx, ctx.Emit("cast", {window}, {{"to", out_dtype}}));
}

namespace {

// --- Compress, ReverseSequence ---

// Compress: the output's length is the number of true conditions, so the condition must be
// known at import; then it is one `gather` of the selected positions (bits copied). Without
// an axis the input is flattened first. Condition entries past the axis length must be false
// (numpy's compress refuses a true one there).
Status Compress(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  if (!ctx.has_input(1)) return ctx.Invalid("input 1 (condition) is required");
  const Tensor* cond = ctx.input_constant(1);
  if (cond == nullptr) {
    return ctx.Unsupported("condition " + std::string(kComputedAtRunTime) +
                           " (input 1 must be known at import: the output shape depends on its values)");
  }
  if (cond->dtype() != DType::kBool) return ctx.Invalid("condition must be bool");
  if (cond->shape().size() != 1) return ctx.Invalid("condition must be 1-D, got " + IntsStr(cond->shape()));
  int64_t axis = 0;
  if (ctx.has_attr("axis")) {
    ASSIGN_OR_RETURN(int64_t a, ctx.AttrInt("axis", 0));
    if (ctx.type(x).shape.empty()) return ctx.Invalid("axis " + std::to_string(a) + " for a scalar input");
    ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, a, static_cast<int64_t>(ctx.type(x).shape.size()), "axis"));
  } else {
    const Shape& xs = ctx.type(x).shape;
    ASSIGN_OR_RETURN(x, ReshapeTo(ctx, x, {Product(xs, 0, xs.size())}));
  }
  const int64_t n = ctx.type(x).shape[axis];
  Ints picked;
  for (int64_t i = 0; i < cond->num_elements(); ++i) {
    if (cond->data()[i] == 0) continue;
    if (i >= n) {
      return ctx.Invalid("condition is true at position " + std::to_string(i) + ", past the axis length " +
                         std::to_string(n));
    }
    picked.push_back(i);
  }
  return SetResult(ctx, ctx.Emit("gather", {x, ctx.Constant(Int64Vector(picked))}, {{"axis", axis}}));
}

// ReverseSequence: one `gather` of rows. With x viewed as [B, T, R] (batch, time, the rest),
// row (b, t) reads row (b, src) with src = where(t < L[b], L[b] - 1 - t, t), all in i64; an
// L[b] > T points the whole batch past the end, so the gather fails (at import for constant
// lengths, else at run time) instead of reading another batch's rows. L[b] <= 0 copies.
Status ReverseSequence(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"batch_axis", "time_axis"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId lens, ctx.RequiredInput(1));
  ASSIGN_OR_RETURN(int64_t batch_axis, ctx.AttrInt("batch_axis", 1));
  ASSIGN_OR_RETURN(int64_t time_axis, ctx.AttrInt("time_axis", 0));
  const Shape xs = ctx.type(x).shape;
  if (xs.size() < 2) return ctx.Invalid("input must have rank 2 or more, got " + IntsStr(xs));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return ctx.Invalid("batch_axis and time_axis must be 0 and 1 in some order");
  }
  const DType lens_dtype = ctx.type(lens).dtype;
  if (lens_dtype != DType::kI64 && lens_dtype != DType::kI32) return ctx.Invalid("sequence_lens must be int64");
  const int64_t b = xs[batch_axis], t = xs[time_axis];
  if (ctx.type(lens).shape != Shape{b}) {
    return ctx.Invalid("sequence_lens must have shape [" + std::to_string(b) + "], got " +
                       IntsStr(ctx.type(lens).shape));
  }
  Ints perm(xs.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[0], perm[1]);
  const int64_t rest = Product(xs, 2, xs.size());
  if (batch_axis == 1) {
    ASSIGN_OR_RETURN(x, ctx.Emit("transpose", {x}, {{"perm", perm}}));
  }
  ASSIGN_OR_RETURN(ValueId rows, ReshapeTo(ctx, x, {b * t, rest}));
  if (lens_dtype != DType::kI64) {
    ASSIGN_OR_RETURN(lens, ctx.Emit("cast", {lens}, {{"to", DType::kI64}}));
  }
  ASSIGN_OR_RETURN(ValueId len, ReshapeTo(ctx, lens, {b, 1}));
  Ints time(static_cast<size_t>(t)), base(static_cast<size_t>(b));
  for (int64_t i = 0; i < t; ++i) time[i] = i;
  for (int64_t i = 0; i < b; ++i) base[i] = i * t;
  const ValueId tv = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {1, t}, time));
  ASSIGN_OR_RETURN(ValueId inside, ctx.Emit("less", {tv, len}));
  ASSIGN_OR_RETURN(ValueId last, ctx.Emit("sub", {len, ctx.Scalar(DType::kI64, 1)}));
  ASSIGN_OR_RETURN(ValueId back, ctx.Emit("sub", {last, tv}));
  ASSIGN_OR_RETURN(ValueId src, ctx.Emit("where", {inside, back, tv}));
  ASSIGN_OR_RETURN(ValueId flat,
                   ctx.Emit("add", {src, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {b, 1}, base))}));
  ASSIGN_OR_RETURN(ValueId too_long, ctx.Emit("greater", {len, ctx.Scalar(DType::kI64, static_cast<double>(t))}));
  ASSIGN_OR_RETURN(flat, ctx.Emit("where", {too_long, ctx.Scalar(DType::kI64, static_cast<double>(b * t)), flat}));
  ASSIGN_OR_RETURN(flat, ReshapeTo(ctx, flat, {b * t}));
  ASSIGN_OR_RETURN(ValueId y, ctx.Emit("gather", {rows, flat}, {{"axis", int64_t{0}}}));
  Shape ys = xs;
  if (batch_axis == 1) std::swap(ys[0], ys[1]);
  ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, ys));
  if (batch_axis == 1) {
    ASSIGN_OR_RETURN(y, ctx.Emit("transpose", {y}, {{"perm", perm}}));
  }
  return SetResult(ctx, y);
}

}  // namespace

const std::vector<OpConverter>& TensorConverters() {
  static const std::vector<OpConverter> table = {
      {"Shape", ShapeOp},
      {"Size", Size},
      {"Constant", ConstantOp},
      {"ConstantOfShape", ConstantOfShape},
      {"Range", Range},
      {"Reshape", Reshape},
      {"Flatten", Flatten},
      {"Squeeze", Squeeze},
      {"Unsqueeze", Unsqueeze},
      {"Transpose", Transpose},
      {"Slice", Slice},
      {"Concat", Concat},
      {"Gather", Gather},
      {"GatherElements", GatherElements},
      {"GatherND", GatherNd},
      {"Expand", Expand},
      {"Split", Split},
      {"Tile", Tile},
      {"Pad", Pad},
      {"DepthToSpace", DepthToSpace},
      {"Trilu", Trilu},
      {"OneHot", OneHot},
      {"SpaceToDepth", SpaceToDepth},
      {"EyeLike", EyeLike},
      {"HannWindow",
       [](NodeContext& c) {
         return Window(c, {0.5f, 0.5f, 0.0f});
       }},
      {"HammingWindow",
       [](NodeContext& c) {
         return Window(c, {0x1.1642c8p-1f, 0x1.d37a70p-2f, 0.0f});
       }},
      {"BlackmanWindow",
       [](NodeContext& c) {
         return Window(c, {0x1.ae147ap-2f, 0.5f, 0x1.47ae14p-4f});
       }},
      {"Compress", Compress},
      {"ReverseSequence", ReverseSequence},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
