// ONNX recurrent layers: RNN, GRU and LSTM, unrolled over the (static) sequence into the
// section-4 ops. The op sequence of one step is the definition of their bits and is written
// down in docs/DETERMINISM.md 6.5; docs/ONNX.md lists the accepted attributes.
#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

enum class Cell { kRnn, kGru, kLstm };

// Unrolling emits a fixed number of ops per step and direction; these bound the graph an
// import can produce (the per-step work is bounded by limits().max_flops as well).
constexpr int64_t kMaxUnrolledSteps = 4096;  // sequence length x directions, per node

// Fewer ops than a step of the cell ever emits (RNN: slice, matmul, add, activation; GRU and
// LSTM more), so a layer refused for it would also exceed max_ops once emitted. The exact
// count is checked when the graph is validated.
int64_t MinOpsPerStep(Cell c) { return c == Cell::kRnn ? 3 : c == Cell::kGru ? 10 : 12; }

struct Activation {
  std::string name;  // as ONNX spells it
  float alpha = 0.0f;
  float beta = 0.0f;
};

struct ActivationInfo {
  std::string_view name;
  bool uses_alpha, uses_beta;
  float default_alpha, default_beta;
};

// Every activation ONNX lists for the recurrent ops; each has a lowering to section-4 ops.
constexpr ActivationInfo kActivations[] = {
    {"Sigmoid", false, false, 0.0f, 0.0f},   {"Tanh", false, false, 0.0f, 0.0f},
    {"Relu", false, false, 0.0f, 0.0f},      {"Affine", true, true, 1.0f, 0.0f},
    {"LeakyRelu", true, false, 0.01f, 0.0f}, {"ThresholdedRelu", true, false, 1.0f, 0.0f},
    {"ScaledTanh", true, true, 1.0f, 1.0f},  {"HardSigmoid", true, true, 0.2f, 0.5f},
    {"Elu", true, false, 1.0f, 0.0f},        {"Softsign", false, false, 0.0f, 0.0f},
    {"Softplus", false, false, 0.0f, 0.0f},
};

bool SameNameIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

struct Layer {
  Cell cell;
  int64_t gates = 1;  // 1 (RNN), 3 (GRU: z, r, h), 4 (LSTM: i, o, f, c)
  int64_t steps = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  bool reverse = false;      // one direction, run backwards
  bool batch_major = false;  // layout 1
  std::optional<float> clip;
  bool linear_before_reset = false, input_forget = false;
  std::vector<Activation> activations;  // per_direction entries for each direction
  int per_direction = 1;
};

// Resolves `activations`, `activation_alpha` and `activation_beta`: the alphas (betas) are
// consumed in order by the activations that take one; missing ones get the defaults above,
// extra ones are an error.
Status ResolveActivations(NodeContext& ctx, Layer& layer) {
  std::vector<std::string> defaults;
  if (layer.cell == Cell::kRnn) defaults = {"Tanh"};
  if (layer.cell == Cell::kGru) defaults = {"Sigmoid", "Tanh"};
  if (layer.cell == Cell::kLstm) defaults = {"Sigmoid", "Tanh", "Tanh"};
  layer.per_direction = static_cast<int>(defaults.size());
  ASSIGN_OR_RETURN(std::vector<std::string> names, ctx.AttrStrings("activations", {}));
  const size_t want = defaults.size() * static_cast<size_t>(layer.directions);
  if (names.empty()) {
    for (int64_t d = 0; d < layer.directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() != want && !(names.size() == defaults.size() && layer.directions == 2)) {
    return ctx.Invalid("attribute 'activations' has " + std::to_string(names.size()) + " entries, expected " +
                       std::to_string(want) + " (" + std::to_string(defaults.size()) + " per direction)");
  }
  ASSIGN_OR_RETURN(std::vector<float> alphas, ctx.AttrFloats("activation_alpha", {}));
  ASSIGN_OR_RETURN(std::vector<float> betas, ctx.AttrFloats("activation_beta", {}));
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& a : kActivations) {
      if (SameNameIgnoringCase(a.name, name)) info = &a;
    }
    if (!info) return ctx.Unsupported("activation '" + name + "'");
    Activation act{std::string(info->name), info->default_alpha, info->default_beta};
    if (info->uses_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->uses_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    layer.activations.push_back(act);
  }
  if (layer.activations.size() < want) {
    // One set given for a bidirectional layer: both directions use it, alphas and betas too.
    const std::vector<Activation> once = layer.activations;
    layer.activations.insert(layer.activations.end(), once.begin(), once.end());
  }
  if (next_alpha < alphas.size() || next_beta < betas.size()) {
    return ctx.Invalid("attributes 'activation_alpha' / 'activation_beta' have more values (" +
                       std::to_string(alphas.size()) + " / " + std::to_string(betas.size()) +
                       ") than the activations use (" + std::to_string(next_alpha) + " / " + std::to_string(next_beta) +
                       ")");
  }
  return OkStatus();
}

// The activation as section-4 ops (the same lowerings as the ONNX ops of that name, except
// that ThresholdedRelu keeps x at x == alpha, as the recurrent ops' definition says).
StatusOr<ValueId> Activate(NodeContext& ctx, const Activation& a, ValueId x) {
  const std::string& n = a.name;
  if (n == "Sigmoid") return ctx.Emit("sigmoid", {x});
  if (n == "Tanh") return ctx.Emit("tanh", {x});
  if (n == "Relu") return ctx.Emit("relu", {x});
  if (n == "Affine") {
    ASSIGN_OR_RETURN(ValueId ax, ctx.Emit("mul", {x, ctx.ScalarF32(a.alpha)}));
    return ctx.Emit("add", {ax, ctx.ScalarF32(a.beta)});
  }
  if (n == "LeakyRelu") {
    ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("less", {x, ctx.ScalarF32(0.0f)}));
    ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {x, ctx.ScalarF32(a.alpha)}));
    return ctx.Emit("where", {neg, scaled, x});
  }
  if (n == "ThresholdedRelu") {
    ASSIGN_OR_RETURN(ValueId keep, ctx.Emit("greater_equal", {x, ctx.ScalarF32(a.alpha)}));
    return ctx.Emit("where", {keep, x, ctx.ScalarF32(0.0f)});
  }
  if (n == "ScaledTanh") {
    ASSIGN_OR_RETURN(ValueId bx, ctx.Emit("mul", {x, ctx.ScalarF32(a.beta)}));
    ASSIGN_OR_RETURN(ValueId t, ctx.Emit("tanh", {bx}));
    return ctx.Emit("mul", {t, ctx.ScalarF32(a.alpha)});
  }
  if (n == "HardSigmoid") {
    ASSIGN_OR_RETURN(ValueId ax, ctx.Emit("mul", {x, ctx.ScalarF32(a.alpha)}));
    ASSIGN_OR_RETURN(ValueId lin, ctx.Emit("add", {ax, ctx.ScalarF32(a.beta)}));
    ASSIGN_OR_RETURN(ValueId hi, ctx.Emit("min", {lin, ctx.ScalarF32(1.0f)}));
    return ctx.Emit("max", {hi, ctx.ScalarF32(0.0f)});
  }
  if (n == "Elu") {
    ASSIGN_OR_RETURN(ValueId neg, ctx.Emit("less", {x, ctx.ScalarF32(0.0f)}));
    ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {x}));
    ASSIGN_OR_RETURN(ValueId em1, ctx.Emit("sub", {e, ctx.ScalarF32(1.0f)}));
    ASSIGN_OR_RETURN(ValueId scaled, ctx.Emit("mul", {em1, ctx.ScalarF32(a.alpha)}));
    return ctx.Emit("where", {neg, scaled, x});
  }
  if (n == "Softsign") {
    ASSIGN_OR_RETURN(ValueId ab, ctx.Emit("abs", {x}));
    ASSIGN_OR_RETURN(ValueId den, ctx.Emit("add", {ab, ctx.ScalarF32(1.0f)}));
    return ctx.Emit("div", {x, den});
  }
  if (n == "Softplus") {
    ASSIGN_OR_RETURN(ValueId e, ctx.Emit("exp", {x}));
    ASSIGN_OR_RETURN(ValueId s, ctx.Emit("add", {e, ctx.ScalarF32(1.0f)}));
    return ctx.Emit("log", {s});
  }
  return ctx.Unsupported("activation '" + n + "'");
}

// clip(x) = min(max(x, -c), c), applied to every gate's pre-activation.
StatusOr<ValueId> Clip(NodeContext& ctx, const Layer& layer, ValueId x) {
  if (!layer.clip) return x;
  ASSIGN_OR_RETURN(ValueId lo, ctx.Emit("max", {x, ctx.ScalarF32(-*layer.clip)}));
  return ctx.Emit("min", {lo, ctx.ScalarF32(*layer.clip)});
}

StatusOr<ValueId> ActivateClipped(NodeContext& ctx, const Layer& layer, const Activation& a, ValueId x) {
  ASSIGN_OR_RETURN(ValueId c, Clip(ctx, layer, x));
  return Activate(ctx, a, c);
}

// Columns [begin, end) of a 2-D value.
StatusOr<ValueId> Columns(NodeContext& ctx, ValueId v, int64_t begin, int64_t end) {
  return ctx.Emit("slice", {v}, {{"starts", Ints{begin}}, {"ends", Ints{end}}, {"axes", Ints{1}}});
}

// Entry `d` of the leading (direction) axis of v, reshaped to `shape`.
StatusOr<ValueId> DirectionOf(NodeContext& ctx, ValueId v, int64_t d, const Shape& shape) {
  ASSIGN_OR_RETURN(ValueId s, ctx.Emit("slice", {v}, {{"starts", Ints{d}}, {"ends", Ints{d + 1}}, {"axes", Ints{0}}}));
  return ReshapeTo(ctx, s, shape);
}

// Range [begin, end) of v's vector at direction d: a [end - begin] value.
StatusOr<ValueId> VectorPart(NodeContext& ctx, ValueId v, int64_t d, int64_t begin, int64_t end) {
  ASSIGN_OR_RETURN(ValueId s, ctx.Emit("slice", {v},
                                       {{"starts", Ints{d, begin}}, {"ends", Ints{d + 1, end}}, {"axes", Ints{0, 1}}}));
  return ReshapeTo(ctx, s, {end - begin});
}

// X projected onto columns [begin, end) of W[d]^T for every step at once, plus the bias
// part `bias` (absent: no add): a [steps * batch, end - begin] value.
StatusOr<ValueId> InputProjection(NodeContext& ctx, const Layer& L, ValueId x_rows, ValueId w, int64_t d, int64_t begin,
                                  int64_t end, std::optional<ValueId> bias) {
  ASSIGN_OR_RETURN(ValueId wd, DirectionOf(ctx, w, d, {L.gates * L.hidden, L.input}));
  ASSIGN_OR_RETURN(ValueId wpart,
                   ctx.Emit("slice", {wd}, {{"starts", Ints{begin}}, {"ends", Ints{end}}, {"axes", Ints{0}}}));
  ASSIGN_OR_RETURN(ValueId wt, ctx.Emit("transpose", {wpart}, {{"perm", Ints{1, 0}}}));
  ASSIGN_OR_RETURN(ValueId xp, ctx.Emit("matmul", {x_rows, wt}));
  if (bias) return ctx.Emit("add", {xp, *bias});
  return xp;
}

// Rows [begin, end) of R[d], transposed: [hidden, end - begin].
StatusOr<ValueId> RecurrentWeights(NodeContext& ctx, const Layer& L, ValueId r, int64_t d, int64_t begin, int64_t end) {
  ASSIGN_OR_RETURN(ValueId rd, DirectionOf(ctx, r, d, {L.gates * L.hidden, L.hidden}));
  ASSIGN_OR_RETURN(ValueId rpart,
                   ctx.Emit("slice", {rd}, {{"starts", Ints{begin}}, {"ends", Ints{end}}, {"axes", Ints{0}}}));
  return ctx.Emit("transpose", {rpart}, {{"perm", Ints{1, 0}}});
}

// The bias of the input projection for gates [g0, g1): Wb + Rb, or Wb alone when
// `without_recurrent` (GRU's h gate with linear_before_reset).
StatusOr<ValueId> InputBias(NodeContext& ctx, const Layer& L, ValueId b, int64_t d, int64_t g0, int64_t g1,
                            bool without_recurrent) {
  const int64_t gh = L.gates * L.hidden;
  ASSIGN_OR_RETURN(ValueId wb, VectorPart(ctx, b, d, g0 * L.hidden, g1 * L.hidden));
  if (without_recurrent) return wb;
  ASSIGN_OR_RETURN(ValueId rb, VectorPart(ctx, b, d, gh + g0 * L.hidden, gh + g1 * L.hidden));
  return ctx.Emit("add", {wb, rb});
}

struct Direction {
  std::vector<ValueId> outputs;  // H after each step, in step order (masked steps are zero)
  ValueId last_h = -1, last_c = -1;
};

struct LayerInputs {
  ValueId x_rows;  // [steps * batch, input], time-major rows
  ValueId w, r;
  std::optional<ValueId> b, initial_h, initial_c, p;
  // Per-batch sequence lengths: step k's mask [batch, 1] (bool), and the row order that
  // reverses each sequence within its own length (an involution over [steps * batch]).
  std::vector<ValueId> masks;
  std::optional<ValueId> reverse_rows;
};

// Row block of step `t` of a [steps * batch, n] value.
StatusOr<ValueId> StepRows(NodeContext& ctx, const Layer& L, ValueId v, int64_t t) {
  return ctx.Emit("slice", {v}, {{"starts", Ints{t * L.batch}}, {"ends", Ints{(t + 1) * L.batch}}, {"axes", Ints{0}}});
}

StatusOr<Direction> RunDirection(NodeContext& ctx, const Layer& L, const LayerInputs& in, int64_t d, bool backwards) {
  const int64_t H = L.hidden;
  const Activation* acts = &L.activations[static_cast<size_t>(d * L.per_direction)];
  // Input projections for all steps, then reordered when each sequence is reversed within
  // its own length.
  std::vector<ValueId> xp;                          // one per gate group
  std::vector<std::pair<int64_t, int64_t>> groups;  // gate ranges of those groups
  if (L.cell == Cell::kGru) groups = {{0, 2}, {2, 3}};
  else groups = {{0, L.gates}};
  for (auto [g0, g1] : groups) {
    std::optional<ValueId> bias;
    if (in.b) {
      const bool h_gate_alone = L.cell == Cell::kGru && g0 == 2 && L.linear_before_reset;
      ASSIGN_OR_RETURN(bias, InputBias(ctx, L, *in.b, d, g0, g1, h_gate_alone));
    }
    ASSIGN_OR_RETURN(ValueId p, InputProjection(ctx, L, in.x_rows, in.w, d, g0 * H, g1 * H, bias));
    if (backwards && in.reverse_rows) {
      ASSIGN_OR_RETURN(p, ctx.Emit("gather", {p, *in.reverse_rows}, {{"axis", int64_t{0}}}));
    }
    xp.push_back(p);
  }
  std::vector<ValueId> rt;  // recurrent weights per group
  for (auto [g0, g1] : groups) {
    ASSIGN_OR_RETURN(ValueId w, RecurrentWeights(ctx, L, in.r, d, g0 * H, g1 * H));
    rt.push_back(w);
  }
  std::optional<ValueId> rb_h;  // GRU with linear_before_reset: Rbh inside the reset product
  if (L.cell == Cell::kGru && L.linear_before_reset && in.b) {
    ASSIGN_OR_RETURN(rb_h, VectorPart(ctx, *in.b, d, 3 * H + 2 * H, 3 * H + 3 * H));
  }
  std::optional<ValueId> p_i, p_o, p_f;
  if (in.p) {
    ASSIGN_OR_RETURN(p_i, VectorPart(ctx, *in.p, d, 0, H));
    ASSIGN_OR_RETURN(p_o, VectorPart(ctx, *in.p, d, H, 2 * H));
    ASSIGN_OR_RETURN(p_f, VectorPart(ctx, *in.p, d, 2 * H, 3 * H));
  }
  const Shape state_shape = {L.batch, H};
  ValueId zeros;
  ASSIGN_OR_RETURN(zeros, ctx.Emit("expand", {ctx.ScalarF32(0.0f)}, {{"shape", Ints{L.batch, H}}}));
  ValueId h = zeros, c = zeros;
  if (in.initial_h) {
    ASSIGN_OR_RETURN(h, DirectionOf(ctx, *in.initial_h, d, state_shape));
  }
  if (in.initial_c) {
    ASSIGN_OR_RETURN(c, DirectionOf(ctx, *in.initial_c, d, state_shape));
  }
  Direction out;
  for (int64_t k = 0; k < L.steps; ++k) {
    // Plain reversal reads step T-1-k; with sequence lengths the rows are already reordered.
    const int64_t t = backwards && !in.reverse_rows ? L.steps - 1 - k : k;
    std::vector<ValueId> x_t;
    for (ValueId p : xp) {
      ASSIGN_OR_RETURN(ValueId rows, StepRows(ctx, L, p, t));
      x_t.push_back(rows);
    }
    ValueId h_new = -1, c_new = -1;
    if (L.cell == Cell::kRnn) {
      ASSIGN_OR_RETURN(ValueId hr, ctx.Emit("matmul", {h, rt[0]}));
      ASSIGN_OR_RETURN(ValueId a, ctx.Emit("add", {x_t[0], hr}));
      ASSIGN_OR_RETURN(h_new, ActivateClipped(ctx, L, acts[0], a));
    } else if (L.cell == Cell::kGru) {
      ASSIGN_OR_RETURN(ValueId hzr, ctx.Emit("matmul", {h, rt[0]}));
      ASSIGN_OR_RETURN(ValueId azr, ctx.Emit("add", {x_t[0], hzr}));
      ASSIGN_OR_RETURN(ValueId zr, ActivateClipped(ctx, L, acts[0], azr));
      ASSIGN_OR_RETURN(ValueId z, Columns(ctx, zr, 0, H));
      ASSIGN_OR_RETURN(ValueId r, Columns(ctx, zr, H, 2 * H));
      ValueId ah;
      if (L.linear_before_reset) {
        ASSIGN_OR_RETURN(ValueId hh, ctx.Emit("matmul", {h, rt[1]}));
        if (rb_h) {
          ASSIGN_OR_RETURN(hh, ctx.Emit("add", {hh, *rb_h}));
        }
        ASSIGN_OR_RETURN(ValueId reset, ctx.Emit("mul", {r, hh}));
        ASSIGN_OR_RETURN(ah, ctx.Emit("add", {x_t[1], reset}));
      } else {
        ASSIGN_OR_RETURN(ValueId rh, ctx.Emit("mul", {r, h}));
        ASSIGN_OR_RETURN(ValueId hh, ctx.Emit("matmul", {rh, rt[1]}));
        ASSIGN_OR_RETURN(ah, ctx.Emit("add", {x_t[1], hh}));
      }
      ASSIGN_OR_RETURN(ValueId cand, ActivateClipped(ctx, L, acts[1], ah));
      ASSIGN_OR_RETURN(ValueId one_minus_z, ctx.Emit("sub", {ctx.ScalarF32(1.0f), z}));
      ASSIGN_OR_RETURN(ValueId keep_new, ctx.Emit("mul", {one_minus_z, cand}));
      ASSIGN_OR_RETURN(ValueId keep_old, ctx.Emit("mul", {z, h}));
      ASSIGN_OR_RETURN(h_new, ctx.Emit("add", {keep_new, keep_old}));
    } else {
      ASSIGN_OR_RETURN(ValueId hr, ctx.Emit("matmul", {h, rt[0]}));
      ASSIGN_OR_RETURN(ValueId a, ctx.Emit("add", {x_t[0], hr}));
      ValueId i, o_pre, f;
      if (!in.p && !L.input_forget) {
        // i, o and f share the activation f and are adjacent (ONNX order i, o, f, c).
        ASSIGN_OR_RETURN(ValueId aiof, Columns(ctx, a, 0, 3 * H));
        ASSIGN_OR_RETURN(ValueId iof, ActivateClipped(ctx, L, acts[0], aiof));
        ASSIGN_OR_RETURN(i, Columns(ctx, iof, 0, H));
        ASSIGN_OR_RETURN(o_pre, Columns(ctx, iof, H, 2 * H));  // already activated here
        ASSIGN_OR_RETURN(f, Columns(ctx, iof, 2 * H, 3 * H));
      } else {
        ASSIGN_OR_RETURN(ValueId ai, Columns(ctx, a, 0, H));
        ASSIGN_OR_RETURN(o_pre, Columns(ctx, a, H, 2 * H));
        if (p_i) {
          ASSIGN_OR_RETURN(ValueId pc, ctx.Emit("mul", {*p_i, c}));
          ASSIGN_OR_RETURN(ai, ctx.Emit("add", {ai, pc}));
        }
        ASSIGN_OR_RETURN(i, ActivateClipped(ctx, L, acts[0], ai));
        if (L.input_forget) {
          ASSIGN_OR_RETURN(f, ctx.Emit("sub", {ctx.ScalarF32(1.0f), i}));
        } else {
          ASSIGN_OR_RETURN(ValueId af, Columns(ctx, a, 2 * H, 3 * H));
          if (p_f) {
            ASSIGN_OR_RETURN(ValueId pc, ctx.Emit("mul", {*p_f, c}));
            ASSIGN_OR_RETURN(af, ctx.Emit("add", {af, pc}));
          }
          ASSIGN_OR_RETURN(f, ActivateClipped(ctx, L, acts[0], af));
        }
      }
      ASSIGN_OR_RETURN(ValueId ac, Columns(ctx, a, 3 * H, 4 * H));
      ASSIGN_OR_RETURN(ValueId cand, ActivateClipped(ctx, L, acts[1], ac));
      ASSIGN_OR_RETURN(ValueId kept, ctx.Emit("mul", {f, c}));
      ASSIGN_OR_RETURN(ValueId added, ctx.Emit("mul", {i, cand}));
      ASSIGN_OR_RETURN(c_new, ctx.Emit("add", {kept, added}));
      ValueId o = o_pre;
      if (in.p || L.input_forget) {
        ValueId ao = o_pre;
        if (p_o) {
          ASSIGN_OR_RETURN(ValueId pc, ctx.Emit("mul", {*p_o, c_new}));
          ASSIGN_OR_RETURN(ao, ctx.Emit("add", {ao, pc}));
        }
        ASSIGN_OR_RETURN(o, ActivateClipped(ctx, L, acts[0], ao));
      }
      ASSIGN_OR_RETURN(ValueId hc, Activate(ctx, acts[2], c_new));
      ASSIGN_OR_RETURN(h_new, ctx.Emit("mul", {o, hc}));
    }
    ValueId y = h_new;
    if (!in.masks.empty()) {
      // A step past a sequence's end keeps the state and outputs zero.
      const ValueId m = in.masks[static_cast<size_t>(k)];
      ASSIGN_OR_RETURN(y, ctx.Emit("where", {m, h_new, zeros}));
      ASSIGN_OR_RETURN(h_new, ctx.Emit("where", {m, h_new, h}));
      if (L.cell == Cell::kLstm) {
        ASSIGN_OR_RETURN(c_new, ctx.Emit("where", {m, c_new, c}));
      }
    }
    h = h_new;
    if (L.cell == Cell::kLstm) c = c_new;
    out.outputs.push_back(y);
  }
  out.last_h = h;
  out.last_c = c;
  return out;
}

// Input i as an f32 value of the given shape, or an error naming it.
Status CheckOperand(NodeContext& ctx, int i, std::string_view role, const Shape& shape) {
  RETURN_IF_ERROR(RequireF32(ctx, ctx.input(i), role));
  if (ctx.input_type(i).shape != shape) {
    return ctx.Invalid(std::string(role) + " has shape " + ShapeToString(ctx.input_type(i).shape) + ", expected " +
                       ShapeToString(shape));
  }
  return OkStatus();
}

Status ConvertRecurrent(NodeContext& ctx, Cell cell) {
  Layer L;
  L.cell = cell;
  L.gates = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
  RETURN_IF_ERROR(
      ctx.CheckAttributes({"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                           "layout", "output_sequence", "linear_before_reset", "input_forget"}));
  // Attributes of another opset or another cell.
  const std::pair<std::string_view, bool> allowed[] = {{"layout", ctx.opset() >= 14},
                                                       {"output_sequence", ctx.opset() < 7},
                                                       {"linear_before_reset", cell == Cell::kGru},
                                                       {"input_forget", cell == Cell::kLstm}};
  for (const auto& [name, ok] : allowed) {
    if (ctx.has_attr(name) && !ok) return ctx.Unsupported("attribute '" + std::string(name) + "'");
  }

  ASSIGN_OR_RETURN(ValueId x, ctx.RequiredInput(0));
  ASSIGN_OR_RETURN(ValueId w, ctx.RequiredInput(1));
  ASSIGN_OR_RETURN(ValueId r, ctx.RequiredInput(2));
  RETURN_IF_ERROR(RequireF32(ctx, x, "X"));
  ASSIGN_OR_RETURN(int64_t layout, ctx.AttrInt("layout", 0));
  if (layout != 0 && layout != 1) return ctx.Invalid("attribute 'layout' must be 0 or 1");
  L.batch_major = layout == 1;
  ASSIGN_OR_RETURN(std::string direction, ctx.AttrString("direction", "forward"));
  if (direction == "bidirectional") {
    L.directions = 2;
  } else if (direction == "reverse") {
    L.reverse = true;
  } else if (direction != "forward") {
    return ctx.Invalid("attribute 'direction' is '" + direction + "', expected forward, reverse or bidirectional");
  }
  const Shape xs = ctx.type(x).shape;
  if (xs.size() != 3) return ctx.Invalid("X must have rank 3, got " + ShapeToString(xs));
  L.steps = L.batch_major ? xs[1] : xs[0];
  L.batch = L.batch_major ? xs[0] : xs[1];
  L.input = xs[2];
  const Shape rs = ctx.type(r).shape;
  if (rs.size() != 3) return ctx.Invalid("R must have rank 3, got " + ShapeToString(rs));
  L.hidden = rs[2];
  if (ctx.has_attr("hidden_size")) {
    ASSIGN_OR_RETURN(int64_t hs, ctx.AttrInt("hidden_size", 0));
    if (hs != L.hidden) {
      return ctx.Invalid("attribute 'hidden_size' is " + std::to_string(hs) + " but R is " + ShapeToString(rs));
    }
  }
  if (L.steps < 1 || L.batch < 1 || L.hidden < 1 || L.input < 1) {
    return ctx.Invalid("empty sequence, batch, input or hidden size (X " + ShapeToString(xs) + ", R " +
                       ShapeToString(rs) + ")");
  }
  const int64_t D = L.directions, H = L.hidden, G = L.gates;
  RETURN_IF_ERROR(CheckOperand(ctx, 1, "W", {D, G * H, L.input}));
  RETURN_IF_ERROR(CheckOperand(ctx, 2, "R", {D, G * H, H}));
  // Caps on the unrolled graph, checked before anything is emitted.
  if (L.steps * D > kMaxUnrolledSteps) {
    return ctx.Invalid("unrolling " + std::to_string(L.steps) + " steps x " + std::to_string(D) +
                       " directions exceeds the cap of " + std::to_string(kMaxUnrolledSteps) + " unrolled steps");
  }
  if (L.steps * D * MinOpsPerStep(cell) > ctx.limits().max_ops) {
    return ctx.Invalid("unrolling " + std::to_string(L.steps * D) + " steps would emit more than max_ops (" +
                       std::to_string(ctx.limits().max_ops) + ") ops");
  }
  {
    // Multiply-adds of the unrolled layer, in double so that no product overflows.
    const double work = 2.0 * static_cast<double>(L.steps) * static_cast<double>(D) * static_cast<double>(L.batch) *
                        static_cast<double>(G * H) * static_cast<double>(L.input + H);
    if (work > static_cast<double>(ctx.limits().max_flops)) {
      return ctx.Invalid("the unrolled layer's work (" + std::to_string(work) + " flops) exceeds max_flops");
    }
  }
  ASSIGN_OR_RETURN(float clip, ctx.AttrFloat("clip", 0.0f));
  if (ctx.has_attr("clip")) {
    if (!(clip > 0.0f)) return ctx.Invalid("attribute 'clip' must be positive, got " + std::to_string(clip));
    L.clip = clip;
  }
  if (cell == Cell::kGru) {
    ASSIGN_OR_RETURN(int64_t lbr, ctx.AttrInt("linear_before_reset", 0));
    L.linear_before_reset = lbr != 0;
  }
  if (cell == Cell::kLstm) {
    ASSIGN_OR_RETURN(int64_t forget, ctx.AttrInt("input_forget", 0));
    L.input_forget = forget != 0;
  }
  RETURN_IF_ERROR(ResolveActivations(ctx, L));

  LayerInputs in;
  // Time-major rows [steps * batch, input].
  ValueId x_tbi = x;
  if (L.batch_major) {
    ASSIGN_OR_RETURN(x_tbi, ctx.Emit("transpose", {x}, {{"perm", Ints{1, 0, 2}}}));
  }
  ASSIGN_OR_RETURN(in.x_rows, ReshapeTo(ctx, x_tbi, {L.steps * L.batch, L.input}));
  in.w = w;
  in.r = r;
  if (ctx.has_input(3)) {
    RETURN_IF_ERROR(CheckOperand(ctx, 3, "B", {D, 2 * G * H}));
    in.b = ctx.input(3);
  }
  const Shape state = L.batch_major ? Shape{L.batch, D, H} : Shape{D, L.batch, H};
  auto direction_major = [&](int i, std::string_view role) -> StatusOr<ValueId> {
    RETURN_IF_ERROR(CheckOperand(ctx, i, role, state));
    if (!L.batch_major) return ctx.input(i);
    return ctx.Emit("transpose", {ctx.input(i)}, {{"perm", Ints{1, 0, 2}}});
  };
  if (ctx.has_input(5)) {
    ASSIGN_OR_RETURN(in.initial_h, direction_major(5, "initial_h"));
  }
  if (cell == Cell::kLstm && ctx.has_input(6)) {
    ASSIGN_OR_RETURN(in.initial_c, direction_major(6, "initial_c"));
  }
  if (cell == Cell::kLstm && ctx.has_input(7)) {
    RETURN_IF_ERROR(CheckOperand(ctx, 7, "P", {D, 3 * H}));
    in.p = ctx.input(7);
  }
  const int max_inputs = cell == Cell::kLstm ? 8 : 6;
  if (ctx.num_inputs() > max_inputs) return ctx.Invalid("has more than " + std::to_string(max_inputs) + " inputs");

  if (ctx.has_input(4)) {
    // sequence_lens: masks [batch, 1] per step and the per-sequence reversal of rows. Known at
    // import they fold to constants; otherwise they are computed by the graph.
    ValueId lens = ctx.input(4);
    const DType ld = ctx.type(lens).dtype;
    if (ld != DType::kI32 && ld != DType::kI64) return ctx.Invalid("sequence_lens must be int32 or int64");
    if (ctx.type(lens).shape != Shape{L.batch}) {
      return ctx.Invalid("sequence_lens has shape " + ShapeToString(ctx.type(lens).shape) + ", expected [" +
                         std::to_string(L.batch) + "]");
    }
    bool all_full = false;
    if (const Tensor* known = ctx.input_constant(4)) {
      ASSIGN_OR_RETURN(std::vector<int64_t> v, TensorToInts(*known));
      all_full = true;
      for (int64_t n : v) {
        if (n < 1 || n > L.steps) {
          return ctx.Invalid("sequence_lens holds " + std::to_string(n) + ", outside [1, " + std::to_string(L.steps) +
                             "]");
        }
        all_full = all_full && n == L.steps;
      }
    }
    if (!all_full) {
      if (ld != DType::kI64) {
        ASSIGN_OR_RETURN(lens, ctx.Emit("cast", {lens}, {{"to", DType::kI64}}));
      }
      ASSIGN_OR_RETURN(ValueId lens_row, ReshapeTo(ctx, lens, {1, L.batch}));
      std::vector<int64_t> step_index(static_cast<size_t>(L.steps));
      for (int64_t k = 0; k < L.steps; ++k) step_index[static_cast<size_t>(k)] = k;
      ValueId k_col = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {L.steps, 1}, step_index));
      ASSIGN_OR_RETURN(ValueId valid, ctx.Emit("less", {k_col, lens_row}));  // [steps, batch]
      for (int64_t k = 0; k < L.steps; ++k) {
        ASSIGN_OR_RETURN(ValueId row,
                         ctx.Emit("slice", {valid}, {{"starts", Ints{k}}, {"ends", Ints{k + 1}}, {"axes", Ints{0}}}));
        ASSIGN_OR_RETURN(ValueId m, ReshapeTo(ctx, row, {L.batch, 1}));
        in.masks.push_back(m);
      }
      if (L.reverse || D == 2) {
        // Row k * batch + b of the reversed order reads step (len_b - 1 - k) for k < len_b and
        // step k otherwise (those steps are masked).
        ASSIGN_OR_RETURN(ValueId last, ctx.Emit("sub", {lens_row, ctx.Scalar(DType::kI64, 1)}));
        ASSIGN_OR_RETURN(ValueId mirrored, ctx.Emit("sub", {last, k_col}));
        ASSIGN_OR_RETURN(ValueId src, ctx.Emit("where", {valid, mirrored, k_col}));
        ASSIGN_OR_RETURN(ValueId base, ctx.Emit("mul", {src, ctx.Scalar(DType::kI64, static_cast<double>(L.batch))}));
        std::vector<int64_t> batch_index(static_cast<size_t>(L.batch));
        for (int64_t b = 0; b < L.batch; ++b) batch_index[static_cast<size_t>(b)] = b;
        ValueId b_row = ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {1, L.batch}, batch_index));
        ASSIGN_OR_RETURN(ValueId rows, ctx.Emit("add", {base, b_row}));
        ASSIGN_OR_RETURN(in.reverse_rows, ReshapeTo(ctx, rows, {L.steps * L.batch}));
      }
    }
  }

  std::vector<Direction> dirs;
  for (int64_t d = 0; d < D; ++d) {
    const bool backwards = L.reverse || d == 1;
    ASSIGN_OR_RETURN(Direction dir, RunDirection(ctx, L, in, d, backwards));
    dirs.push_back(std::move(dir));
  }

  if (ctx.wants_output(0)) {
    std::vector<ValueId> per_direction;
    for (int64_t d = 0; d < D; ++d) {
      const bool backwards = L.reverse || d == 1;
      std::vector<ValueId> steps;
      for (ValueId y : dirs[static_cast<size_t>(d)].outputs) {
        ASSIGN_OR_RETURN(ValueId y3, ReshapeTo(ctx, y, {1, L.batch, H}));
        steps.push_back(y3);
      }
      // Plain reversal: step k produced time T-1-k.
      if (backwards && !in.reverse_rows) std::reverse(steps.begin(), steps.end());
      ASSIGN_OR_RETURN(ValueId seq, ctx.Emit("concat", steps, {{"axis", int64_t{0}}}));
      if (backwards && in.reverse_rows) {
        // The same involution puts each sequence's steps back in time order.
        ASSIGN_OR_RETURN(ValueId rows, ReshapeTo(ctx, seq, {L.steps * L.batch, H}));
        ASSIGN_OR_RETURN(rows, ctx.Emit("gather", {rows, *in.reverse_rows}, {{"axis", int64_t{0}}}));
        ASSIGN_OR_RETURN(seq, ReshapeTo(ctx, rows, {L.steps, L.batch, H}));
      }
      ASSIGN_OR_RETURN(ValueId seq4, ReshapeTo(ctx, seq, {L.steps, 1, L.batch, H}));
      per_direction.push_back(seq4);
    }
    ValueId y = per_direction[0];
    if (D == 2) {
      ASSIGN_OR_RETURN(y, ctx.Emit("concat", per_direction, {{"axis", int64_t{1}}}));
    }
    if (L.batch_major) {
      ASSIGN_OR_RETURN(y, ctx.Emit("transpose", {y}, {{"perm", Ints{2, 0, 1, 3}}}));
    }
    ctx.SetOutput(0, y);
  }
  auto final_state = [&](bool cell_state) -> StatusOr<ValueId> {
    std::vector<ValueId> parts;
    for (const Direction& dir : dirs) {
      ASSIGN_OR_RETURN(ValueId s, ReshapeTo(ctx, cell_state ? dir.last_c : dir.last_h, {1, L.batch, H}));
      parts.push_back(s);
    }
    ValueId s = parts[0];
    if (D == 2) {
      ASSIGN_OR_RETURN(s, ctx.Emit("concat", parts, {{"axis", int64_t{0}}}));
    }
    if (L.batch_major) {
      ASSIGN_OR_RETURN(s, ctx.Emit("transpose", {s}, {{"perm", Ints{1, 0, 2}}}));
    }
    return s;
  };
  if (ctx.wants_output(1)) {
    ASSIGN_OR_RETURN(ValueId yh, final_state(false));
    ctx.SetOutput(1, yh);
  }
  if (cell == Cell::kLstm && ctx.wants_output(2)) {
    ASSIGN_OR_RETURN(ValueId yc, final_state(true));
    ctx.SetOutput(2, yc);
  }
  return OkStatus();
}

Status Rnn(NodeContext& ctx) { return ConvertRecurrent(ctx, Cell::kRnn); }
Status Gru(NodeContext& ctx) { return ConvertRecurrent(ctx, Cell::kGru); }
Status Lstm(NodeContext& ctx) { return ConvertRecurrent(ctx, Cell::kLstm); }

}  // namespace

const std::vector<OpConverter>& RecurrentConverters() {
  static const std::vector<OpConverter> table = {
      {"RNN", Rnn},
      {"GRU", Gru},
      {"LSTM", Lstm},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
