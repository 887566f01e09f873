// ONNX Einsum, lowered at import to transpose / reshape / gather / reduce_sum / matmul (or
// mul and reduce_sum for integers). The lowering is a function of the equation string and the
// input shapes alone, so every node builds the same graph; docs/DETERMINISM.md 6.8a defines
// it, docs/ONNX.md lists what is refused.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "executor/onnx/context.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

// A label is a letter (its ASCII code) or one of the broadcast dims of "..." (1, 2, ...,
// counted so that the ellipsis dims of every operand line up from the right).
using Label = int;
using Labels = std::vector<Label>;

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string LabelName(Label l) { return l > 127 || l < 'A' ? "..." : std::string(1, static_cast<char>(l)); }

// One side of the equation: the letters of a term and where "..." stands (-1: nowhere).
struct Term {
  std::string letters;
  int ellipsis_at = -1;  // index into letters before which the ellipsis dims go
};

StatusOr<Term> ParseTerm(const NodeContext& ctx, const std::string& text) {
  Term t;
  for (size_t i = 0; i < text.size();) {
    if (IsLetter(text[i])) {
      t.letters += text[i++];
    } else if (text.compare(i, 3, "...") == 0) {
      if (t.ellipsis_at >= 0) return ctx.Invalid("equation term '" + text + "' has more than one '...'");
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 3;
    } else {
      return ctx.Invalid("equation term '" + text + "' has an invalid character '" + std::string(1, text[i]) +
                         "' (letters and '...' only)");
    }
  }
  return t;
}

struct Operand {
  ValueId v;
  Labels labels;  // one per axis
};

// Applies `perm` unless it is the identity.
StatusOr<ValueId> Permute(NodeContext& ctx, ValueId v, const Ints& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return v;
  return ctx.Emit("transpose", {v}, {{"perm", perm}});
}

// Reorders op's axes to `order` (a permutation of its labels).
StatusOr<ValueId> Arrange(NodeContext& ctx, const Operand& op, const Labels& order) {
  Ints perm;
  for (Label l : order) {
    perm.push_back(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
  }
  return Permute(ctx, op.v, perm);
}

int64_t SizeOf(const std::map<Label, int64_t>& sizes, const Labels& ls) {
  int64_t p = 1;
  for (Label l : ls) p *= sizes.at(l);  // dims of valid shapes, a sub-product of one: fits
  return p;
}

Shape ShapeOf(const std::map<Label, int64_t>& sizes, const Labels& ls) {
  Shape s;
  for (Label l : ls) s.push_back(sizes.at(l));
  return s;
}

// A label repeated within one operand becomes one axis holding the diagonal: the repeated
// axes are moved last (the others keep their order), merged, and gathered at the flat
// positions i * (1 + n + ... + n^(r-1)).
StatusOr<Operand> TakeDiagonals(NodeContext& ctx, Operand op, const std::map<Label, int64_t>& sizes) {
  for (;;) {
    Label repeated = 0;
    for (size_t i = 0; i < op.labels.size() && repeated == 0; ++i) {
      if (std::count(op.labels.begin(), op.labels.end(), op.labels[i]) > 1) repeated = op.labels[i];
    }
    if (repeated == 0) return op;
    Labels others;
    Ints perm;
    int64_t r = 0;
    for (size_t i = 0; i < op.labels.size(); ++i) {
      if (op.labels[i] == repeated) {
        ++r;
      } else {
        others.push_back(op.labels[i]);
        perm.push_back(static_cast<int64_t>(i));
      }
    }
    for (size_t i = 0; i < op.labels.size(); ++i) {
      if (op.labels[i] == repeated) perm.push_back(static_cast<int64_t>(i));
    }
    const int64_t n = sizes.at(repeated);
    int64_t step = 0, power = 1, merged = 1;
    for (int64_t k = 0; k < r; ++k) {
      step += power;
      power *= n;
      merged *= n;
    }
    ASSIGN_OR_RETURN(ValueId v, Permute(ctx, op.v, perm));
    Shape flat = ShapeOf(sizes, others);
    flat.push_back(merged);
    ASSIGN_OR_RETURN(v, ReshapeTo(ctx, v, flat));
    Ints positions;
    for (int64_t i = 0; i < n; ++i) positions.push_back(i * step);
    ASSIGN_OR_RETURN(v, ctx.Emit("gather", {v, ctx.Constant(Int64Vector(positions))},
                                 {{"axis", static_cast<int64_t>(others.size())}}));
    others.push_back(repeated);
    op = Operand{v, others};
  }
}

// Sums the axes whose labels are in `drop` (reduce_sum: csum, or wrapping for integers).
StatusOr<Operand> SumOut(NodeContext& ctx, Operand op, const std::set<Label>& drop) {
  Ints axes;
  Labels kept;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (drop.count(op.labels[i])) {
      axes.push_back(static_cast<int64_t>(i));
    } else {
      kept.push_back(op.labels[i]);
    }
  }
  if (axes.empty()) return op;
  ASSIGN_OR_RETURN(ValueId v, ctx.Emit("reduce_sum", {op.v}, {{"axes", axes}, {"keepdims", int64_t{0}}}));
  return Operand{v, kept};
}

// Contracts a with b. Batch labels: in both and still needed; contracted: in both and not
// needed; then a's own and b's own labels. The result's axes are batch, a-only, b-only.
StatusOr<Operand> Contract(NodeContext& ctx, const Operand& a, const Operand& b, const std::set<Label>& needed,
                           const std::map<Label, int64_t>& sizes) {
  auto in = [](const Labels& ls, Label l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); };
  Labels batch, contracted, a_only, b_only;
  for (Label l : a.labels) {
    if (!in(b.labels, l)) {
      a_only.push_back(l);
    } else if (needed.count(l)) {
      batch.push_back(l);
    } else {
      contracted.push_back(l);
    }
  }
  for (Label l : b.labels) {
    if (!in(a.labels, l)) b_only.push_back(l);
  }
  const int64_t bt = SizeOf(sizes, batch), m = SizeOf(sizes, a_only), n = SizeOf(sizes, b_only);
  const int64_t k = SizeOf(sizes, contracted);
  const bool is_float = IsFloatDType(ctx.type(a.v).dtype);
  Labels a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), a_only.begin(), a_only.end());
  a_order.insert(a_order.end(), contracted.begin(), contracted.end());
  ASSIGN_OR_RETURN(ValueId av, Arrange(ctx, a, a_order));
  ValueId y;
  if (contracted.empty()) {
    // An outer product per batch: one rounded product per element (a matmul over an empty
    // K would add +0.0 and lose a -0.0 product).
    b_order.insert(b_order.end(), b_only.begin(), b_only.end());
    ASSIGN_OR_RETURN(ValueId bv, Arrange(ctx, b, b_order));
    ASSIGN_OR_RETURN(av, ReshapeTo(ctx, av, {bt, m, 1}));
    ASSIGN_OR_RETURN(bv, ReshapeTo(ctx, bv, {bt, 1, n}));
    ASSIGN_OR_RETURN(y, ctx.Emit("mul", {av, bv}));
  } else if (is_float) {
    b_order.insert(b_order.end(), contracted.begin(), contracted.end());
    b_order.insert(b_order.end(), b_only.begin(), b_only.end());
    ASSIGN_OR_RETURN(ValueId bv, Arrange(ctx, b, b_order));
    ASSIGN_OR_RETURN(av, ReshapeTo(ctx, av, {bt, m, k}));
    ASSIGN_OR_RETURN(bv, ReshapeTo(ctx, bv, {bt, k, n}));
    ASSIGN_OR_RETURN(y, ctx.Emit("matmul", {av, bv}));
  } else {
    // Integers wrap, so the sum of products has no order: mul, then reduce_sum over K.
    b_order.insert(b_order.end(), b_only.begin(), b_only.end());
    b_order.insert(b_order.end(), contracted.begin(), contracted.end());
    ASSIGN_OR_RETURN(ValueId bv, Arrange(ctx, b, b_order));
    ASSIGN_OR_RETURN(av, ReshapeTo(ctx, av, {bt, m, 1, k}));
    ASSIGN_OR_RETURN(bv, ReshapeTo(ctx, bv, {bt, 1, n, k}));
    ASSIGN_OR_RETURN(y, ctx.Emit("mul", {av, bv}));
    ASSIGN_OR_RETURN(y, ctx.Emit("reduce_sum", {y}, {{"axes", Ints{3}}, {"keepdims", int64_t{0}}}));
  }
  Labels out = batch;
  out.insert(out.end(), a_only.begin(), a_only.end());
  out.insert(out.end(), b_only.begin(), b_only.end());
  ASSIGN_OR_RETURN(y, ReshapeTo(ctx, y, ShapeOf(sizes, out)));
  return Operand{y, out};
}

Status Einsum(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"equation"}));
  ASSIGN_OR_RETURN(std::string raw, ctx.AttrString("equation", ""));
  std::string eq;
  for (char c : raw) {
    if (c != ' ') eq += c;
  }
  if (eq.empty()) return ctx.Invalid("attribute equation is required");
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos && eq.find("->", arrow + 2) != std::string::npos) {
    return ctx.Invalid("equation '" + raw + "' has more than one '->'");
  }
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    ASSIGN_OR_RETURN(Term t, ParseTerm(ctx, lhs.substr(start, comma - start)));
    terms.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    return ctx.Invalid("equation '" + raw + "' has " + std::to_string(terms.size()) + " input terms for " +
                       std::to_string(ctx.num_inputs()) + " inputs");
  }
  // Operands: shapes checked against their terms, ellipsis dims lined up from the right.
  std::vector<Operand> ops;
  std::map<Label, int64_t> sizes;
  int ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    ASSIGN_OR_RETURN(ValueId v, ctx.RequiredInput(static_cast<int>(i)));
    const DType dtype = ctx.type(v).dtype;
    if (!IsFloatDType(dtype) && !IsIntegerDType(dtype)) {
      return ctx.Unsupported("dtype " + std::string(DTypeName(dtype)) + " for input " + std::to_string(i));
    }
    if (dtype != ctx.type(ctx.input(0)).dtype) return ctx.Invalid("inputs have different dtypes");
    const int64_t rank = static_cast<int64_t>(ctx.type(v).shape.size());
    const int64_t letters = static_cast<int64_t>(terms[i].letters.size());
    if (terms[i].ellipsis_at < 0 ? rank != letters : rank < letters) {
      return ctx.Invalid("input " + std::to_string(i) + " has rank " + std::to_string(rank) +
                         ", which does not match its equation term (equation '" + raw + "')");
    }
    if (terms[i].ellipsis_at >= 0) ellipsis_rank = std::max<int>(ellipsis_rank, static_cast<int>(rank - letters));
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    const ValueId v = ctx.input(static_cast<int>(i));
    const Shape& shape = ctx.type(v).shape;
    const Term& t = terms[i];
    const int e = t.ellipsis_at < 0 ? 0 : static_cast<int>(shape.size() - t.letters.size());
    Labels labels;
    for (int j = 0; j < static_cast<int>(t.letters.size()) + (t.ellipsis_at >= 0 ? 1 : 0); ++j) {
      if (j == t.ellipsis_at) {
        for (int d = 0; d < e; ++d) labels.push_back(1 + ellipsis_rank - e + d);
      }
      if (j < static_cast<int>(t.letters.size())) labels.push_back(t.letters[j]);
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      auto [it, added] = sizes.emplace(labels[d], shape[d]);
      if (added || it->second == shape[d]) continue;
      if (labels[d] < 'A' && (it->second == 1 || shape[d] == 1)) {  // ellipsis dims broadcast
        it->second = std::max(it->second, shape[d]);
        continue;
      }
      return ctx.Invalid("label '" + LabelName(labels[d]) + "' has sizes " + std::to_string(it->second) + " and " +
                         std::to_string(shape[d]));
    }
    ops.push_back(Operand{v, labels});
  }
  // Broadcast ellipsis dims of size 1 up to the common size.
  for (Operand& op : ops) {
    const Shape target = ShapeOf(sizes, op.labels);
    if (ctx.type(op.v).shape != target) {
      ASSIGN_OR_RETURN(op.v, ctx.Emit("expand", {op.v}, {{"shape", Ints(target.begin(), target.end())}}));
    }
  }
  // The output labels: given, or (implicit form) the ellipsis dims then every letter used
  // exactly once, in ASCII order (numpy's rule).
  Labels out;
  if (arrow != std::string::npos) {
    ASSIGN_OR_RETURN(Term t, ParseTerm(ctx, eq.substr(arrow + 2)));
    bool any_ellipsis = false;
    for (const Term& in : terms) any_ellipsis = any_ellipsis || in.ellipsis_at >= 0;
    if (any_ellipsis && t.ellipsis_at < 0 && ellipsis_rank > 0) {
      return ctx.Unsupported("an output without '...' when inputs have '...' dims (equation '" + raw + "')");
    }
    for (int j = 0; j < static_cast<int>(t.letters.size()) + 1; ++j) {
      if (j == t.ellipsis_at) {
        for (int d = 0; d < ellipsis_rank; ++d) out.push_back(1 + d);
      }
      if (j < static_cast<int>(t.letters.size())) {
        const Label l = t.letters[j];
        if (!sizes.count(l)) {
          return ctx.Invalid("output label '" + LabelName(l) + "' appears in no input (equation '" + raw + "')");
        }
        if (std::find(out.begin(), out.end(), l) != out.end()) {
          return ctx.Invalid("output label '" + LabelName(l) + "' appears twice (equation '" + raw + "')");
        }
        out.push_back(l);
      }
    }
  } else {
    for (int d = 0; d < ellipsis_rank; ++d) out.push_back(1 + d);
    std::map<char, int> uses;
    for (const Term& t : terms) {
      for (char c : t.letters) ++uses[c];
    }
    for (const auto& [c, count] : uses) {
      if (count == 1) out.push_back(c);
    }
  }
  // Per operand: diagonals, then the labels no other operand and not the output use.
  const std::set<Label> out_set(out.begin(), out.end());
  for (size_t i = 0; i < ops.size(); ++i) {
    ASSIGN_OR_RETURN(ops[i], TakeDiagonals(ctx, ops[i], sizes));
    std::set<Label> drop;
    for (Label l : ops[i].labels) {
      bool elsewhere = out_set.count(l) > 0;
      for (size_t j = 0; j < ops.size() && !elsewhere; ++j) {
        if (j != i) elsewhere = std::find(ops[j].labels.begin(), ops[j].labels.end(), l) != ops[j].labels.end();
      }
      if (!elsewhere) drop.insert(l);
    }
    ASSIGN_OR_RETURN(ops[i], SumOut(ctx, ops[i], drop));
  }
  // Left to right: ((op0 . op1) . op2) ...
  Operand acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<Label> needed = out_set;
    for (size_t j = i + 1; j < ops.size(); ++j) needed.insert(ops[j].labels.begin(), ops[j].labels.end());
    ASSIGN_OR_RETURN(acc, Contract(ctx, acc, ops[i], needed, sizes));
  }
  ASSIGN_OR_RETURN(ValueId y, Arrange(ctx, acc, out));
  if (y == ctx.input(0)) {
    ASSIGN_OR_RETURN(y, ctx.Emit("identity", {y}));  // every ONNX output is its own value
  }
  return SetResult(ctx, y);
}

}  // namespace

const std::vector<OpConverter>& EinsumConverters() {
  static const std::vector<OpConverter> table = {
      {"Einsum", Einsum},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
