// ONNX Det: the determinant by LU factorization with partial pivoting, unrolled at import into
// section-4 ops (docs/DETERMINISM.md 6.7c). The matrix order is static, so each elimination
// step is a fixed sequence of `argmax` (the pivot), a row-swapping `gather`, and
// `div`/`mul`/`sub` on the rows below; the pivot's row is chosen at run time.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

// Each step emits about 20 ops; this keeps a Det within a few thousand graph nodes.
constexpr int64_t kMaxDetOrder = 64;

Status Det(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  RETURN_IF_ERROR(RequireFloat(ctx, x, "X"));
  const DType dtype = ctx.type(x).dtype;
  const Shape xs = ctx.type(x).shape;
  const size_t rank = xs.size();
  if (rank < 2 || xs[rank - 1] != xs[rank - 2]) {
    return ctx.Invalid("X " + ShapeToString(xs) + " must be [..., M, M] (square matrices)");
  }
  const int64_t n = xs[rank - 1];
  if (n > kMaxDetOrder) {
    return ctx.Unsupported("matrices of order " + std::to_string(n) + " (at most " + std::to_string(kMaxDetOrder) +
                           ")");
  }
  const Shape batch(xs.begin(), xs.end() - 2);
  ASSIGN_OR_RETURN(int64_t b, CheckedNumElements(batch));
  auto emit = [&](std::string_view op, std::vector<ValueId> in, Attributes attrs = {}) {
    return ctx.Emit(op, std::move(in), std::move(attrs));
  };
  auto i64 = [&](int64_t v) { return ctx.Scalar(DType::kI64, static_cast<double>(v)); };
  if (n == 0) {  // the empty product
    return SetResult(ctx, emit("expand", {ctx.Scalar(dtype, 1.0)}, {{"shape", Ints(batch.begin(), batch.end())}}));
  }
  ASSIGN_OR_RETURN(ValueId a, ReshapeTo(ctx, x, {b, n, n}));
  Tensor row_base(DType::kI64, {b, 1});
  for (int64_t i = 0; i < b; ++i) row_base.data_as<int64_t>()[i] = i * n;
  const ValueId row_base_id = ctx.Constant(std::move(row_base));
  Ints iota(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) iota[static_cast<size_t>(i)] = i;
  ASSIGN_OR_RETURN(ValueId row_ids, ReshapeTo(ctx, ctx.Constant(Int64Vector(iota)), {1, n}));
  std::optional<ValueId> odd;  // [B, 1] bool: an odd number of row swaps so far
  std::optional<ValueId> det;
  for (int64_t k = 0; k < n; ++k) {
    if (k + 1 < n) {
      // Pivot: the first row r >= k of the largest |a[r, k]| (argmax's rule, NaN largest).
      ASSIGN_OR_RETURN(ValueId col,
                       emit("slice", {a}, {{"starts", Ints{k, k}}, {"ends", Ints{n, k + 1}}, {"axes", Ints{1, 2}}}));
      ASSIGN_OR_RETURN(col, emit("abs", {col}));
      if (dtype == DType::kF64) {
        // argmax has no f64: mark the rows equal to the column's max, or NaN (reduce_max is
        // NaN then, so only the NaNs are marked), and take the first mark: argmax's rule.
        ASSIGN_OR_RETURN(ValueId top, emit("reduce_max", {col}, {{"axes", Ints{1}}, {"keepdims", int64_t{1}}}));
        ASSIGN_OR_RETURN(ValueId is_top, emit("equal", {col, top}));
        ASSIGN_OR_RETURN(ValueId is_nan, emit("not_equal", {col, col}));
        ASSIGN_OR_RETURN(ValueId mark, emit("or", {is_top, is_nan}));
        ASSIGN_OR_RETURN(col, emit("cast", {mark}, {{"to", DType::kI32}}));
      }
      ASSIGN_OR_RETURN(ValueId offset, emit("argmax", {col}, {{"axis", int64_t{1}}, {"keepdims", int64_t{1}}}));
      ASSIGN_OR_RETURN(offset, ReshapeTo(ctx, offset, {b, 1}));
      ASSIGN_OR_RETURN(ValueId pivot_row, emit("add", {offset, i64(k)}));
      // Swap rows k and pivot_row: row r reads pivot_row if r == k, k if r == pivot_row.
      ASSIGN_OR_RETURN(ValueId is_k, emit("equal", {row_ids, i64(k)}));
      ASSIGN_OR_RETURN(ValueId is_pivot, emit("equal", {row_ids, pivot_row}));
      ASSIGN_OR_RETURN(ValueId source, emit("where", {is_pivot, i64(k), row_ids}));
      ASSIGN_OR_RETURN(source, emit("where", {is_k, pivot_row, source}));
      ASSIGN_OR_RETURN(source, emit("add", {source, row_base_id}));
      ASSIGN_OR_RETURN(ValueId flat, ReshapeTo(ctx, a, {b * n, n}));
      ASSIGN_OR_RETURN(a, emit("gather", {flat, source}, {{"axis", int64_t{0}}}));
      ASSIGN_OR_RETURN(ValueId swapped, emit("not_equal", {offset, i64(0)}));
      if (!odd) {
        odd = swapped;
      } else {
        ASSIGN_OR_RETURN(odd, emit("xor", {*odd, swapped}));
      }
    }
    ASSIGN_OR_RETURN(ValueId pivot,
                     emit("slice", {a}, {{"starts", Ints{k, k}}, {"ends", Ints{k + 1, k + 1}}, {"axes", Ints{1, 2}}}));
    if (k + 1 < n) {
      // Rows below: row -= (a[r, k] / pivot) * row_k, the factor 0 when the pivot is 0 (then
      // the whole column is 0 and the determinant is 0 through the product).
      ASSIGN_OR_RETURN(
          ValueId below,
          emit("slice", {a}, {{"starts", Ints{k + 1, k}}, {"ends", Ints{n, k + 1}}, {"axes", Ints{1, 2}}}));
      ASSIGN_OR_RETURN(ValueId factor, emit("div", {below, pivot}));
      ASSIGN_OR_RETURN(ValueId zero_pivot, emit("equal", {pivot, ctx.Scalar(dtype, 0.0)}));
      ASSIGN_OR_RETURN(factor, emit("where", {zero_pivot, ctx.Scalar(dtype, 0.0), factor}));
      ASSIGN_OR_RETURN(ValueId row_k,
                       emit("slice", {a}, {{"starts", Ints{k}}, {"ends", Ints{k + 1}}, {"axes", Ints{1}}}));
      ASSIGN_OR_RETURN(ValueId rest,
                       emit("slice", {a}, {{"starts", Ints{k + 1}}, {"ends", Ints{n}}, {"axes", Ints{1}}}));
      ASSIGN_OR_RETURN(ValueId scaled, emit("mul", {factor, row_k}));
      ASSIGN_OR_RETURN(rest, emit("sub", {rest, scaled}));
      ASSIGN_OR_RETURN(ValueId top,
                       emit("slice", {a}, {{"starts", Ints{0}}, {"ends", Ints{k + 1}}, {"axes", Ints{1}}}));
      ASSIGN_OR_RETURN(a, emit("concat", {top, rest}, {{"axis", int64_t{1}}}));
    }
    // p = ((u00 * u11) * u22) ...: one rounding per step, in pivot order.
    ASSIGN_OR_RETURN(pivot, ReshapeTo(ctx, pivot, {b, 1}));
    if (!det) {
      det = pivot;
    } else {
      ASSIGN_OR_RETURN(det, emit("mul", {*det, pivot}));
    }
  }
  // An odd number of row swaps flips the sign bit (exact).
  if (odd) {
    ASSIGN_OR_RETURN(ValueId negated, emit("neg", {*det}));
    ASSIGN_OR_RETURN(det, emit("where", {*odd, negated, *det}));
  }
  return SetResult(ctx, ReshapeTo(ctx, *det, batch));
}

}  // namespace

const std::vector<OpConverter>& LinalgConverters() {
  static const std::vector<OpConverter> table = {
      {"Det", Det},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
