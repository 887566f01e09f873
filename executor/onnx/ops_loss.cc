// ONNX loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Both lower to
// existing Consensor ops (one `gather` picks each target's value, `where` drops ignored
// targets, `reduce_sum` / `div` reduce), so every backend already gives the bits of
// docs/DETERMINISM.md 6.3, where the lowering is specified; docs/ONNX.md lists it.
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

enum class Reduction { kNone, kSum, kMean };

StatusOr<Reduction> ReadReduction(const NodeContext& ctx) {
  ASSIGN_OR_RETURN(std::string r, ctx.AttrString("reduction", "mean"));
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  return ctx.Invalid("reduction '" + r + "' is not one of none, sum, mean");
}

// The operands both losses share, checked: scores (or log-probabilities) [N, C, d1..dk],
// target [N, d1..dk] (int32/int64), weight [C] (optional).
struct LossOperands {
  ValueId x = -1;
  ValueId target = -1;
  std::optional<ValueId> weight;
  std::optional<int64_t> ignore_index;
  Reduction reduction = Reduction::kMean;
};

StatusOr<LossOperands> ReadOperands(NodeContext& ctx, std::string_view x_role) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"reduction", "ignore_index"}));
  LossOperands op;
  ASSIGN_OR_RETURN(op.reduction, ReadReduction(ctx));
  if (ctx.has_attr("ignore_index")) {
    ASSIGN_OR_RETURN(int64_t ii, ctx.AttrInt("ignore_index", 0));
    op.ignore_index = ii;
  }
  ASSIGN_OR_RETURN(op.x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(op.target, ctx.RequiredInput(1));
  RETURN_IF_ERROR(RequireF32(ctx, op.x, x_role));
  const Shape xs = ctx.type(op.x).shape;  // copies: Emit may move the value table
  const Shape ts = ctx.type(op.target).shape;
  const DType target_dtype = ctx.type(op.target).dtype;
  if (xs.size() < 2) return ctx.Invalid(std::string(x_role) + " must have shape [N, C, d1, ...] (rank 2 or more)");
  if (target_dtype != DType::kI32 && target_dtype != DType::kI64) {
    return ctx.Invalid("the target must be int32 or int64");
  }
  Shape want = xs;
  want.erase(want.begin() + 1);
  if (ts != want) {
    return ctx.Invalid("the target has shape " + ShapeToString(ts) + ", " + std::string(x_role) + " " +
                       ShapeToString(xs) + " needs " + ShapeToString(want));
  }
  if (ctx.has_input(2)) {
    op.weight = ctx.input(2);
    RETURN_IF_ERROR(RequireF32(ctx, *op.weight, "the weight"));
    if (ctx.type(*op.weight).shape != Shape{xs[1]}) {
      return ctx.Invalid("the weight has shape " + ShapeToString(ctx.type(*op.weight).shape) + ", needs [" +
                         std::to_string(xs[1]) + "]");
    }
  }
  // Targets known at import are checked here, naming the first bad one; run-time targets
  // are checked by `gather` (a task error, never a read out of bounds).
  if (const Tensor* t = ctx.input_constant(1)) {
    ASSIGN_OR_RETURN(Ints values, TensorToInts(*t));
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t v = values[i];
      if (op.ignore_index && v == *op.ignore_index) continue;
      if (v < 0 || v >= xs[1]) {
        return ctx.Invalid("target " + std::to_string(v) + " at flat position " + std::to_string(i) +
                           " is outside [0, " + std::to_string(xs[1]) + ") and is not the ignore_index");
      }
    }
  }
  return op;
}

// The negative log-likelihood of docs/DETERMINISM.md 6.3 over log-probabilities `op.x`.
StatusOr<ValueId> NegativeLogLikelihood(NodeContext& ctx, const LossOperands& op) {
  const Shape xs = ctx.type(op.x).shape;
  const Shape ts = ctx.type(op.target).shape;
  const int64_t classes = xs[1];
  int64_t inner = 1;  // d1 * ... * dk
  for (size_t i = 2; i < xs.size(); ++i) inner *= xs[i];
  ASSIGN_OR_RETURN(int64_t x_count, CheckedNumElements(xs));
  ASSIGN_OR_RETURN(int64_t target_count, CheckedNumElements(ts));

  ValueId t = op.target;
  if (ctx.type(t).dtype != DType::kI64) {
    ASSIGN_OR_RETURN(t, ctx.Emit("cast", {t}, {{"to", DType::kI64}}));
  }
  const ValueId zero_i64 = ctx.Scalar(DType::kI64, 0.0);
  std::optional<ValueId> ignored;
  if (op.ignore_index) {
    const ValueId ii = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {*op.ignore_index}));
    ASSIGN_OR_RETURN(ValueId hit, ctx.Emit("equal", {t, ii}));
    ignored = hit;
    // Ignored targets read class 0; that value is discarded below.
    ASSIGN_OR_RETURN(t, ctx.Emit("where", {hit, zero_i64, t}));
  }
  const ValueId classes_i64 = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {classes}));
  ASSIGN_OR_RETURN(ValueId below, ctx.Emit("less", {t, zero_i64}));
  ASSIGN_OR_RETURN(ValueId above, ctx.Emit("greater_equal", {t, classes_i64}));
  ASSIGN_OR_RETURN(ValueId bad, ctx.Emit("or", {below, above}));

  // Flat position of x[n, t, d] in x reshaped to [N * C * D]: t * D + (n * C * D + d).
  Tensor base(DType::kI64, ts);
  int64_t* b = base.data_as<int64_t>();
  for (int64_t i = 0; i < target_count; ++i) b[i] = (i / inner) * classes * inner + i % inner;
  const ValueId inner_i64 = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {inner}));
  ASSIGN_OR_RETURN(ValueId along, ctx.Emit("mul", {t, inner_i64}));
  ASSIGN_OR_RETURN(ValueId flat, ctx.Emit("add", {along, ctx.Constant(std::move(base))}));
  // An out-of-range target points past the end, so `gather` fails the task.
  const ValueId past_end = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {}, {x_count}));
  ASSIGN_OR_RETURN(flat, ctx.Emit("where", {bad, past_end, flat}));
  ASSIGN_OR_RETURN(ValueId flat_x, ReshapeTo(ctx, op.x, {x_count}));
  ASSIGN_OR_RETURN(ValueId picked, ctx.Emit("gather", {flat_x, flat}, {{"axis", int64_t{0}}}));
  ASSIGN_OR_RETURN(ValueId loss, ctx.Emit("neg", {picked}));

  std::optional<ValueId> picked_weight;
  if (op.weight) {
    ASSIGN_OR_RETURN(ValueId class_index, ctx.Emit("where", {bad, classes_i64, t}));
    ASSIGN_OR_RETURN(ValueId w, ctx.Emit("gather", {*op.weight, class_index}, {{"axis", int64_t{0}}}));
    ASSIGN_OR_RETURN(loss, ctx.Emit("mul", {loss, w}));
    picked_weight = w;
  }
  const ValueId zero_f32 = ctx.ScalarF32(0.0f);
  if (ignored) {
    ASSIGN_OR_RETURN(loss, ctx.Emit("where", {*ignored, zero_f32, loss}));
    if (picked_weight) {
      ASSIGN_OR_RETURN(picked_weight, ctx.Emit("where", {*ignored, zero_f32, *picked_weight}));
    }
  }
  if (op.reduction == Reduction::kNone) return loss;

  Ints all_axes(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) all_axes[i] = static_cast<int64_t>(i);
  const Attributes over_all = {{"axes", all_axes}, {"keepdims", int64_t{0}}};
  if (op.reduction == Reduction::kMean && !picked_weight && !ignored) {
    return ctx.Emit("reduce_mean", {loss}, over_all);  // csum / float(count)
  }
  ASSIGN_OR_RETURN(ValueId total, ctx.Emit("reduce_sum", {loss}, over_all));
  if (op.reduction == Reduction::kSum) return total;
  ValueId divisor;
  if (picked_weight) {
    ASSIGN_OR_RETURN(divisor, ctx.Emit("reduce_sum", {*picked_weight}, over_all));
  } else {
    // Unweighted with an ignore_index: the number of targets not ignored, counted exactly
    // in i64, then converted to f32 (round to nearest even), as reduce_mean's count.
    ASSIGN_OR_RETURN(ValueId kept, ctx.Emit("not", {*ignored}));
    ASSIGN_OR_RETURN(ValueId kept_i64, ctx.Emit("cast", {kept}, {{"to", DType::kI64}}));
    ASSIGN_OR_RETURN(ValueId count, ctx.Emit("reduce_sum", {kept_i64}, over_all));
    ASSIGN_OR_RETURN(divisor, ctx.Emit("cast", {count}, {{"to", DType::kF32}}));
  }
  return ctx.Emit("div", {total, divisor});
}

Status NegativeLogLikelihoodLoss(NodeContext& ctx) {
  ASSIGN_OR_RETURN(LossOperands op, ReadOperands(ctx, "the input"));
  return SetResult(ctx, NegativeLogLikelihood(ctx, op));
}

// SoftmaxCrossEntropyLoss: log_prob = LogSoftmax over axis 1 (the LogSoftmax lowering of
// docs/ONNX.md), then the negative log-likelihood of log_prob.
Status SoftmaxCrossEntropyLoss(NodeContext& ctx) {
  ASSIGN_OR_RETURN(LossOperands op, ReadOperands(ctx, "the scores"));
  const Attributes over_classes = {{"axes", Ints{1}}, {"keepdims", int64_t{1}}};
  ASSIGN_OR_RETURN(ValueId m, ctx.Emit("reduce_max", {op.x}, over_classes));
  ASSIGN_OR_RETURN(ValueId d, ctx.Emit("sub", {op.x, m}));
  ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {d}));
  ASSIGN_OR_RETURN(ValueId s, ctx.Emit("reduce_sum", {e}, over_classes));
  ASSIGN_OR_RETURN(ValueId ls, ctx.Emit("log", {s}));
  ASSIGN_OR_RETURN(ValueId log_prob, ctx.Emit("sub", {d, ls}));
  LossOperands nll = op;
  nll.x = log_prob;
  RETURN_IF_ERROR(SetResult(ctx, NegativeLogLikelihood(ctx, nll)));
  if (ctx.wants_output(1)) ctx.SetOutput(1, log_prob);
  return OkStatus();
}

}  // namespace

const std::vector<OpConverter>& LossConverters() {
  static const std::vector<OpConverter> table = {
      {"NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss},
      {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
