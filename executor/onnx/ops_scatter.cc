// ONNX scatter ops: ScatterElements, ScatterND, the deprecated Scatter, and MaxUnpool (a scatter
// into zeros, docs/DETERMINISM.md 6.7d; its run-time indices are matched per pooling window
// instead). The scatters' indices must be known at import: the importer turns them into a host-computed plan of rows,
// and the scatter becomes rounds of `gather`, the reduction op and `where` (docs/DETERMINISM.md 6.4, docs/ONNX.md).
// Duplicate targets are applied in ascending update order, and no index is ever used at run time, so nothing can be
// read or written out of bounds.
#include <algorithm>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

// The reduction op applied to (current value, update), or "" for a plain overwrite.
StatusOr<std::string> ReadScatterReduction(const NodeContext& ctx) {
  if (!ctx.has_attr("reduction")) return std::string();
  ASSIGN_OR_RETURN(std::string r, ctx.AttrString("reduction", "none"));
  if (r == "none") return std::string();
  if (r == "add") return std::string("add");
  if (r == "mul") return std::string("mul");
  if (r == "max") return std::string("max");
  if (r == "min") return std::string("min");
  return ctx.Invalid("reduction '" + r + "' is not one of none, add, mul, max, min");
}

// Writes updates (reshaped to [U, T]) into data (reshaped to [P, T]): update row u goes to data
// row target[u]. Round r applies, to every row, the r-th update that targets it in ascending
// u: out = where(has_r, op(out, gather(updates, src_r)), out); without a reduction only the
// last update of each row is applied, in one round.
StatusOr<ValueId> ScatterRows(NodeContext& ctx, ValueId data, ValueId updates, const Ints& target, int64_t rows,
                              int64_t row_size, const std::string& reduction) {
  const Shape data_shape = ctx.type(data).shape;  // copies: Emit may move the value table
  const int64_t count = static_cast<int64_t>(target.size());
  // hits[p]: the updates targeting row p, ascending.
  std::vector<Ints> hits(static_cast<size_t>(rows));
  for (int64_t u = 0; u < count; ++u) hits[static_cast<size_t>(target[u])].push_back(u);
  if (reduction.empty()) {
    for (Ints& h : hits) {
      if (h.size() > 1) h.erase(h.begin(), h.end() - 1);  // the last one wins
    }
  }
  size_t rounds = 0;
  for (const Ints& h : hits) rounds = std::max(rounds, h.size());
  // Each round carries a [P] mask and index table: keep the total within the element cap.
  if (static_cast<double>(rounds) * static_cast<double>(rows) >
      static_cast<double>(ctx.limits().max_elements_per_tensor)) {
    return ctx.Invalid(std::to_string(rounds) + " updates of one element times " + std::to_string(rows) +
                       " rows exceed the element cap");
  }
  ASSIGN_OR_RETURN(ValueId out, ReshapeTo(ctx, data, {rows, row_size}));
  ASSIGN_OR_RETURN(ValueId update_rows, ReshapeTo(ctx, updates, {count, row_size}));
  for (size_t r = 0; r < rounds; ++r) {
    Tensor mask(DType::kBool, {rows, 1});
    Ints source(static_cast<size_t>(rows), 0);
    for (int64_t p = 0; p < rows; ++p) {
      const Ints& h = hits[static_cast<size_t>(p)];
      mask.data()[p] = r < h.size();
      if (r < h.size()) source[static_cast<size_t>(p)] = h[r];
    }
    ASSIGN_OR_RETURN(ValueId picked,
                     ctx.Emit("gather", {update_rows, ctx.Constant(Int64Vector(source))}, {{"axis", int64_t{0}}}));
    if (!reduction.empty()) {
      ASSIGN_OR_RETURN(picked, ctx.Emit(reduction, {out, picked}));
    }
    ASSIGN_OR_RETURN(out, ctx.Emit("where", {ctx.Constant(std::move(mask)), picked, out}));
  }
  if (rounds == 0) {
    ASSIGN_OR_RETURN(out, ctx.Emit("identity", {out}));
  }
  return ReshapeTo(ctx, out, data_shape);
}

// ScatterElements (and Scatter): updates[j] goes to data at j's coordinates with coordinate
// `axis` replaced by indices[j] (negative ones count from the end).
Status ScatterElementsImpl(NodeContext& ctx, bool with_reduction) {
  if (with_reduction) {
    RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "reduction"}));
  } else {
    RETURN_IF_ERROR(ctx.CheckAttributes({"axis"}));
  }
  ASSIGN_OR_RETURN(std::string reduction, ReadScatterReduction(ctx));
  ASSIGN_OR_RETURN(ValueId data, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId updates, ctx.RequiredInput(2));
  RETURN_IF_ERROR(ctx.RequiredInput(1).status());
  const Shape ds = ctx.type(data).shape;
  const Shape is = ctx.type(ctx.input(1)).shape;
  const int64_t rank = static_cast<int64_t>(ds.size());
  if (rank == 0 || static_cast<int64_t>(is.size()) != rank) {
    return ctx.Invalid("data and indices must have the same rank, at least 1");
  }
  if (ctx.type(updates).shape != is) return ctx.Invalid("updates and indices must have the same shape");
  if (ctx.type(updates).dtype != ctx.type(data).dtype) return ctx.Invalid("updates and data must have one dtype");
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.AttrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank, "axis"));
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && is[d] > ds[d]) {
      return ctx.Invalid("indices " + ShapeToString(is) + " exceed data " + ShapeToString(ds) + " on axis " +
                         std::to_string(d));
    }
  }
  ASSIGN_OR_RETURN(Ints idx, ctx.ConstantInts(1, "indices"));
  ASSIGN_OR_RETURN(int64_t data_count, CheckedNumElements(ds));
  Ints strides(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * ds[d + 1];
  Ints target(idx.size());
  Ints coord(static_cast<size_t>(rank), 0);
  const int64_t n = ds[axis];
  for (size_t j = 0; j < idx.size(); ++j) {
    const int64_t i = idx[j] < 0 && idx[j] >= -n ? idx[j] + n : idx[j];
    if (i < 0 || i >= n) {
      return ctx.Invalid("index " + std::to_string(idx[j]) + " at flat position " + std::to_string(j) +
                         " is outside [-" + std::to_string(n) + ", " + std::to_string(n) + ")");
    }
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d) flat += (d == axis ? i : coord[d]) * strides[d];
    target[j] = flat;
    for (int64_t d = rank - 1; d >= 0 && ++coord[d] == is[d]; --d) coord[d] = 0;
  }
  return SetResult(ctx, ScatterRows(ctx, data, updates, target, data_count, 1, reduction));
}

// ScatterND: each index tuple (the last dim of indices, k long) names a slice
// data[i0, ..., ik-1, :, ...]; the matching slice of updates goes there.
Status ScatterNd(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"reduction"}));
  ASSIGN_OR_RETURN(std::string reduction, ReadScatterReduction(ctx));
  ASSIGN_OR_RETURN(ValueId data, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId updates, ctx.RequiredInput(2));
  RETURN_IF_ERROR(ctx.RequiredInput(1).status());
  const Shape ds = ctx.type(data).shape;
  const Shape is = ctx.type(ctx.input(1)).shape;
  const int64_t r = static_cast<int64_t>(ds.size()), q = static_cast<int64_t>(is.size());
  if (r < 1 || q < 1) return ctx.Invalid("data and indices must have rank 1 or more");
  const int64_t k = is[q - 1];
  if (k < 1 || k > r) return ctx.Invalid("the last dim of indices must be between 1 and rank(data)");
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), ds.begin() + k, ds.end());
  if (ctx.type(updates).shape != want) {
    return ctx.Invalid("updates have shape " + ShapeToString(ctx.type(updates).shape) + ", needs " +
                       ShapeToString(want));
  }
  if (ctx.type(updates).dtype != ctx.type(data).dtype) return ctx.Invalid("updates and data must have one dtype");
  ASSIGN_OR_RETURN(Ints idx, ctx.ConstantInts(1, "indices"));
  int64_t rows = 1, row_size = 1;
  Ints strides(static_cast<size_t>(k));
  for (int64_t j = k - 1; j >= 0; --j) {
    strides[j] = rows;
    rows *= ds[j];
  }
  for (int64_t d = k; d < r; ++d) row_size *= ds[d];
  const size_t tuples = idx.size() / static_cast<size_t>(k);
  Ints target(tuples);
  for (size_t t = 0; t < tuples; ++t) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t v = idx[t * k + j], n = ds[j];
      const int64_t i = v < 0 && v >= -n ? v + n : v;
      if (i < 0 || i >= n) {
        return ctx.Invalid("index " + std::to_string(v) + " of tuple " + std::to_string(t) + " is outside [-" +
                           std::to_string(n) + ", " + std::to_string(n) + ")");
      }
      row += i * strides[j];
    }
    target[t] = row;
  }
  return SetResult(ctx, ScatterRows(ctx, data, updates, target, rows, row_size, reduction));
}

// MaxUnpool with indices computed in the task (DETERMINISM.md 6.7d): every output position q
// inside the inferred shape (flat position p there) is covered by a few pooling windows j,
// ascending; slot k of q is its k-th window. Per slot, y = where(I[j] == p, X[j], y) from
// zeros, so the highest matching j wins as in the scatter. Indices are gathered at constant
// tables, so no run-time index addresses memory except in one check: when fewer than all of
// X's elements found their position (an index outside its own window, as MaxPool never
// produces), every X gather is pushed past the end and the task fails.
StatusOr<ValueId> UnpoolAtRunTimeIndices(NodeContext& ctx, ValueId x, const Window& w, const Shape& out_shape,
                                         const Shape& target_shape) {
  const Shape xs = ctx.type(x).shape;
  const DType dtype = ctx.type(x).dtype;
  const ValueId indices = ctx.input(1);
  if (ctx.type(indices).dtype != DType::kI64) return ctx.Invalid("I must be int64");
  const size_t rank = xs.size(), spatial = rank - 2;
  ASSIGN_OR_RETURN(int64_t sources, CheckedNumElements(xs));
  ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(target_shape));
  ASSIGN_OR_RETURN(ValueId zeros, ctx.Emit("expand", {ctx.Scalar(dtype, 0.0)}, {{"shape", target_shape}}));
  if (sources == 0 || count == 0) return zeros;
  // Windows per output position: at most prod(ceil(k / s)) along the spatial dims.
  int64_t slots = 1;
  for (size_t d = 0; d < spatial; ++d) slots *= (w.kernel[d] + w.strides[d] - 1) / w.strides[d];
  if (static_cast<double>(slots) * static_cast<double>(count) >
      static_cast<double>(ctx.limits().max_elements_per_tensor)) {
    return ctx.Invalid(std::to_string(slots) + " overlapping windows per output element times " +
                       std::to_string(count) + " elements exceed the element cap");
  }
  std::vector<Ints> source(static_cast<size_t>(slots), Ints(static_cast<size_t>(count), 0));
  std::vector<Tensor> valid;
  for (int64_t k = 0; k < slots; ++k) valid.emplace_back(DType::kBool, Shape{count});
  Ints position(static_cast<size_t>(count), -1);
  Ints coord(rank);
  std::vector<Ints> per_dim(spatial);
  for (int64_t q = 0; q < count; ++q) {
    int64_t rest = q;
    for (size_t d = rank; d-- > 0;) {
      coord[d] = rest % target_shape[d];
      rest /= target_shape[d];
    }
    bool inside = true;
    int64_t p = 0;
    for (size_t d = 0; d < rank; ++d) {
      inside = inside && coord[d] < out_shape[d];
      p = p * out_shape[d] + coord[d];
    }
    if (!inside) continue;
    position[q] = p;
    // Windows o along dim d cover [o*s - pad_begin, o*s - pad_begin + k).
    for (size_t d = 0; d < spatial; ++d) {
      per_dim[d].clear();
      const int64_t y = coord[d + 2] + w.pads[d];
      for (int64_t o = std::max<int64_t>(0, (y - w.kernel[d]) / w.strides[d]); o < xs[d + 2]; ++o) {
        if (o * w.strides[d] > y) break;
        if (o * w.strides[d] + w.kernel[d] > y) per_dim[d].push_back(o);
      }
    }
    // Their cartesian product in row-major order: ascending flat window index j.
    int64_t k = 0;
    Ints pick(spatial, 0);
    while (true) {
      bool any_empty = false;
      int64_t j = coord[0] * xs[1] + coord[1];
      for (size_t d = 0; d < spatial; ++d) {
        if (per_dim[d].empty()) {
          any_empty = true;
          break;
        }
        j = j * xs[d + 2] + per_dim[d][pick[d]];
      }
      if (any_empty) break;
      source[k][q] = j;
      valid[k].data()[q] = 1;
      ++k;
      size_t d = spatial;
      while (d > 0 && ++pick[d - 1] == static_cast<int64_t>(per_dim[d - 1].size())) pick[--d] = 0;
      if (d == 0) break;
    }
  }
  ASSIGN_OR_RETURN(ValueId x_flat, ReshapeTo(ctx, x, {sources}));
  ASSIGN_OR_RETURN(ValueId i_flat, ReshapeTo(ctx, indices, {sources}));
  const ValueId p_table = ctx.Constant(Int64Vector(position));
  std::vector<ValueId> match;
  ValueId found = -1;
  for (int64_t k = 0; k < slots; ++k) {
    ASSIGN_OR_RETURN(ValueId i_k,
                     ctx.Emit("gather", {i_flat, ctx.Constant(Int64Vector(source[k]))}, {{"axis", int64_t{0}}}));
    ASSIGN_OR_RETURN(ValueId eq, ctx.Emit("equal", {i_k, p_table}));
    ASSIGN_OR_RETURN(ValueId m, ctx.Emit("and", {eq, ctx.Constant(std::move(valid[k]))}));
    match.push_back(m);
    ASSIGN_OR_RETURN(ValueId n, ctx.Emit("cast", {m}, {{"to", DType::kI64}}));
    ASSIGN_OR_RETURN(n, ctx.Emit("reduce_sum", {n}, {{"axes", Ints{0}}, {"keepdims", int64_t{0}}}));
    if (found < 0) {
      found = n;
    } else {
      ASSIGN_OR_RETURN(found, ctx.Emit("add", {found, n}));
    }
  }
  ASSIGN_OR_RETURN(ValueId bad, ctx.Emit("not_equal", {found, ctx.Scalar(DType::kI64, static_cast<double>(sources))}));
  ASSIGN_OR_RETURN(ValueId shift, ctx.Emit("where", {bad, ctx.Scalar(DType::kI64, static_cast<double>(sources)),
                                                     ctx.Scalar(DType::kI64, 0.0)}));
  ASSIGN_OR_RETURN(ValueId y, ReshapeTo(ctx, zeros, {count}));
  for (int64_t k = 0; k < slots; ++k) {
    ASSIGN_OR_RETURN(ValueId at, ctx.Emit("add", {ctx.Constant(Int64Vector(source[k])), shift}));
    ASSIGN_OR_RETURN(ValueId v, ctx.Emit("gather", {x_flat, at}, {{"axis", int64_t{0}}}));
    ASSIGN_OR_RETURN(y, ctx.Emit("where", {match[k], v, y}));
  }
  return ReshapeTo(ctx, y, target_shape);
}

// MaxUnpool: Y starts as zeros of the output shape and X[j] goes to Y's flat position I[j]
// (flat over the whole output, N and C included, as MaxPool's Indices and ONNX Runtime), the
// last j winning on a duplicate. Indices known at import become a scatter plan like the
// scatters'; indices computed in the task take UnpoolAtRunTimeIndices.
Status MaxUnpool(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"kernel_shape", "pads", "strides"}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(ctx.RequiredInput(1).status());
  const Shape xs = ctx.type(x).shape;
  const int64_t rank = static_cast<int64_t>(xs.size());
  if (rank < 3) return ctx.Invalid("X " + ShapeToString(xs) + " must be [N, C, D1, ...]");
  if (ctx.type(ctx.input(1)).shape != xs) return ctx.Invalid("I must have X's shape " + ShapeToString(xs));
  const size_t spatial = static_cast<size_t>(rank - 2);
  ASSIGN_OR_RETURN(Ints kernel, ctx.AttrInts("kernel_shape", {}));
  if (kernel.size() != spatial) return ctx.Invalid("kernel_shape needs one entry per spatial dim");
  ASSIGN_OR_RETURN(Ints strides, ctx.AttrInts("strides", Ints(spatial, 1)));
  ASSIGN_OR_RETURN(Ints pads, ctx.AttrInts("pads", Ints(2 * spatial, 0)));
  if (strides.size() != spatial || pads.size() != 2 * spatial) {
    return ctx.Invalid("strides needs one entry and pads two entries per spatial dim");
  }
  Shape out_shape(xs.begin(), xs.begin() + 2);
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t k = kernel[d], s = strides[d], pb = pads[d], pe = pads[d + spatial];
    constexpr int64_t kBound = int64_t{1} << 31;  // keeps the size arithmetic far from overflow
    if (k < 1 || s < 1 || pb < 0 || pe < 0 || k > kBound || s > kBound || pb > kBound || pe > kBound) {
      return ctx.Invalid("kernel_shape and strides must be positive, pads non-negative (and below 2^31)");
    }
    const int64_t len = (xs[d + 2] - 1) * s + k - pb - pe;
    if (len < 0) return ctx.Invalid("the inferred output size of spatial dim " + std::to_string(d) + " is negative");
    out_shape.push_back(len);
  }
  // I is flat over the inferred shape; a given output_shape (at least as large) holds that
  // result in its leading corner, zeros after it (as ONNX's MaxUnpool test expects).
  Shape target_shape = out_shape;
  if (ctx.has_input(2)) {
    ASSIGN_OR_RETURN(target_shape, ctx.ConstantInts(2, "output_shape"));
    if (static_cast<int64_t>(target_shape.size()) != rank || target_shape[0] != xs[0] || target_shape[1] != xs[1]) {
      return ctx.Invalid("output_shape must have X's rank and X's N and C");
    }
    for (int64_t d = 2; d < rank; ++d) {
      if (target_shape[d] < out_shape[d]) {
        return ctx.Invalid("output_shape " + ShapeToString(target_shape) + " is smaller than the inferred " +
                           ShapeToString(out_shape));
      }
    }
  }
  ASSIGN_OR_RETURN(int64_t inferred_count, CheckedNumElements(out_shape));
  ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(target_shape));
  if (count > ctx.limits().max_elements_per_tensor) return ctx.Invalid("the output exceeds the element cap");
  if (ctx.input_constant(1) == nullptr) {
    return SetResult(
        ctx, UnpoolAtRunTimeIndices(ctx, x, Window{kernel, strides, Ints(spatial, 1), pads}, out_shape, target_shape));
  }
  ASSIGN_OR_RETURN(Ints idx, ctx.ConstantInts(1, "I"));
  for (size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] < 0 || idx[j] >= inferred_count) {
      return ctx.Invalid("index " + std::to_string(idx[j]) + " at flat position " + std::to_string(j) +
                         " is outside the output's " + std::to_string(inferred_count) + " elements");
    }
    // Row-major coordinates in the inferred shape, re-flattened in the target shape.
    int64_t rest = idx[j], flat = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      flat += (rest % out_shape[d]) * stride;
      rest /= out_shape[d];
      stride *= target_shape[d];
    }
    idx[j] = flat;
  }
  ASSIGN_OR_RETURN(ValueId zeros, ctx.Emit("expand", {ctx.Scalar(ctx.type(x).dtype, 0.0)}, {{"shape", target_shape}}));
  return SetResult(ctx, ScatterRows(ctx, zeros, x, idx, count, 1, ""));
}

}  // namespace

const std::vector<OpConverter>& ScatterConverters() {
  static const std::vector<OpConverter> table = {
      {"ScatterElements", [](NodeContext& c) { return ScatterElementsImpl(c, true); }},
      {"Scatter", [](NodeContext& c) { return ScatterElementsImpl(c, false); }},
      {"ScatterND", ScatterNd},
      {"MaxUnpool", MaxUnpool},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
