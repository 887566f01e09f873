// ONNX ops whose output shape depends on input values: NonMaxSuppression, NonZero, Unique.
// Consensor's graphs have static shapes, so these are folded at import: every input they
// read must be known then (a constant, or a graph input bound with --bind), the importer
// computes the result by the rules of docs/DETERMINISM.md 6.8c and it becomes a constant.
// An input computed at run time is refused with the "computed at run time" error, which
// lets `consensor onnx-test` bind the test's values.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "executor/onnx/context.h"
#include "kernels/half.h"

namespace consensor::executor::onnx_import {

namespace {

using Ints = std::vector<int64_t>;

// Pairwise IoU tests one NonMaxSuppression fold may make (B * C * N * min(N, max_out) at
// most); beyond it the import fails instead of running for minutes.
constexpr int64_t kMaxIouTests = int64_t{1} << 30;

StatusOr<const Tensor*> KnownAtImport(const NodeContext& ctx, int i, std::string_view what) {
  const Tensor* t = ctx.input_constant(i);
  if (t == nullptr) {
    return ctx.Unsupported(std::string(what) + " " + std::string(kComputedAtRunTime) + " (input " + std::to_string(i) +
                           " must be known at import: the output shape depends on its values)");
  }
  return t;
}

// --- NonMaxSuppression ---

// ONNX Runtime's std::max / std::min and MaxMin, written out so NaN behaves as specified.
float MaxOf(float a, float b) { return a < b ? b : a; }
float MinOf(float a, float b) { return b < a ? b : a; }
void Order(float a, float b, float& lo, float& hi) {
  if (a >= b) {
    lo = b;
    hi = a;
  } else {
    lo = a;
    hi = b;
  }
}

struct Extent {
  float x_min, x_max, y_min, y_max;
};

// One box's corners in f32: [y1, x1, y2, x2] corners in either order, or
// [x_center, y_center, width, height] (center_point_box = 1).
Extent Corners(const float* b, bool center) {
  Extent e{};
  if (!center) {
    Order(b[1], b[3], e.x_min, e.x_max);
    Order(b[0], b[2], e.y_min, e.y_max);
  } else {
    const float half_w = b[2] / 2.0f, half_h = b[3] / 2.0f;
    e.x_min = b[0] - half_w;
    e.x_max = b[0] + half_w;
    e.y_min = b[1] - half_h;
    e.y_max = b[1] + half_h;
  }
  return e;
}

// True when `a` suppresses `b` (DETERMINISM.md 6.8c): their IoU, in f32 in this order, is
// greater than the threshold. Empty or degenerate overlaps never suppress.
bool Suppresses(const Extent& a, const Extent& b, float iou_threshold) {
  const float ix_min = MaxOf(a.x_min, b.x_min), ix_max = MinOf(a.x_max, b.x_max);
  if (ix_max <= ix_min) return false;
  const float iy_min = MaxOf(a.y_min, b.y_min), iy_max = MinOf(a.y_max, b.y_max);
  if (iy_max <= iy_min) return false;
  const float inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0.0f) return false;
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float uni = (area_a + area_b) - inter;
  if (area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f) return false;
  return inter / uni > iou_threshold;
}

// An optional one-element input: its f32 value, or nullopt when absent.
StatusOr<std::optional<float>> OptionalF32(const NodeContext& ctx, int i, std::string_view what) {
  if (!ctx.has_input(i)) return std::optional<float>();
  ASSIGN_OR_RETURN(const Tensor* t, KnownAtImport(ctx, i, what));
  if (t->dtype() != DType::kF32 || t->num_elements() != 1) {
    return ctx.Invalid(std::string(what) + " must be one float32 value");
  }
  return std::optional<float>(t->data_as<float>()[0]);
}

Status NonMaxSuppression(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"center_point_box"}));
  ASSIGN_OR_RETURN(int64_t center_point_box, ctx.AttrInt("center_point_box", 0));
  if (center_point_box != 0 && center_point_box != 1) return ctx.Invalid("center_point_box must be 0 or 1");
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Invalid("inputs 0 (boxes) and 1 (scores) are required");
  ASSIGN_OR_RETURN(const Tensor* boxes, KnownAtImport(ctx, 0, "boxes"));
  ASSIGN_OR_RETURN(const Tensor* scores, KnownAtImport(ctx, 1, "scores"));
  if (boxes->dtype() != DType::kF32 || scores->dtype() != DType::kF32) {
    return ctx.Unsupported("unsupported dtype: boxes and scores must be float32");
  }
  const Shape& bs = boxes->shape();
  const Shape& ss = scores->shape();
  if (bs.size() != 3 || bs[2] != 4) return ctx.Invalid("boxes must be [batches, boxes, 4], got " + ShapeToString(bs));
  if (ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    return ctx.Invalid("scores must be [" + std::to_string(bs[0]) + ", classes, " + std::to_string(bs[1]) + "], got " +
                       ShapeToString(ss));
  }
  int64_t max_out = 0;
  if (ctx.has_input(2)) {
    ASSIGN_OR_RETURN(const Tensor* m, KnownAtImport(ctx, 2, "max_output_boxes_per_class"));
    ASSIGN_OR_RETURN(Ints v, TensorToInts(*m));
    if (v.size() != 1) return ctx.Invalid("max_output_boxes_per_class must be one integer");
    max_out = std::max<int64_t>(v[0], 0);
  }
  ASSIGN_OR_RETURN(std::optional<float> iou, OptionalF32(ctx, 3, "iou_threshold"));
  ASSIGN_OR_RETURN(std::optional<float> score_threshold, OptionalF32(ctx, 4, "score_threshold"));
  const float iou_threshold = iou.value_or(0.0f);
  if (!(iou_threshold >= 0.0f && iou_threshold <= 1.0f)) return ctx.Invalid("iou_threshold must be in [0, 1]");

  const int64_t batches = bs[0], n = bs[1], classes = ss[1];
  const int64_t keep = std::min(max_out, n);
  // Each candidate is tested against at most `keep` selected boxes.
  if (n > 0 && keep > 0 && classes > 0 && batches > 0 && (batches * classes > kMaxIouTests / n / keep)) {
    return ctx.Invalid(
        "too many boxes: batches * classes * boxes * min(boxes, max_output_boxes_per_class) exceeds 2^30");
  }
  const float* box_data = boxes->data_as<float>();
  const float* score_data = scores->data_as<float>();
  Ints selected;  // rows (batch, class, box)
  std::vector<Extent> extents(static_cast<size_t>(n));
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches && keep > 0; ++b) {
    for (int64_t i = 0; i < n; ++i) extents[i] = Corners(box_data + (b * n + i) * 4, center_point_box == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = score_data + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (!score_threshold || s[i] > *score_threshold) order.push_back(i);
      }
      // Highest score first; equal scores (-0 == +0) by box index; NaN scores last.
      std::sort(order.begin(), order.end(), [s](int64_t i, int64_t j) {
        const bool ni = std::isnan(s[i]), nj = std::isnan(s[j]);
        if (ni != nj) return nj;
        if (!ni && s[i] != s[j]) return s[i] > s[j];
        return i < j;
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= keep) break;
        bool suppressed = false;
        for (int64_t k : kept) {
          if (Suppresses(extents[i], extents[k], iou_threshold)) {
            suppressed = true;
            break;
          }
        }
        if (!suppressed) kept.push_back(i);
      }
      for (int64_t i : kept) selected.insert(selected.end(), {b, c, i});
    }
  }
  const int64_t rows = static_cast<int64_t>(selected.size()) / 3;
  return SetResult(ctx, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {rows, 3}, selected)));
}

// --- NonZero, Unique: element values compared across dtypes ---

// Element i of t as a comparable value. Floats (f16/bf16 widened exactly) compare by value,
// -0 equal to +0, every NaN equal to every other NaN and above every number; integers and
// bool by value. u64 is kept apart so values above 2^63 order correctly.
struct Key {
  enum Kind { kSigned, kUnsigned, kFloat } kind;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
};

Key KeyOf(const Tensor& t, int64_t i) {
  const uint8_t* p = t.data() + i * DTypeSize(t.dtype());
  Key k{Key::kSigned};
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t.dtype()) {
    case DType::kF32: k.kind = Key::kFloat, k.f = load(float{}); break;
    case DType::kF64: k.kind = Key::kFloat, k.f = load(double{}); break;
    case DType::kF16: k.kind = Key::kFloat, k.f = half::F16ToF32(load(uint16_t{})); break;
    case DType::kBF16: k.kind = Key::kFloat, k.f = half::BF16ToF32(load(uint16_t{})); break;
    case DType::kI8: k.i = load(int8_t{}); break;
    case DType::kI16: k.i = load(int16_t{}); break;
    case DType::kI32: k.i = load(int32_t{}); break;
    case DType::kI64: k.i = load(int64_t{}); break;
    case DType::kU8:
    case DType::kBool: k.i = load(uint8_t{}); break;
    case DType::kU16: k.i = load(uint16_t{}); break;
    case DType::kU32: k.i = load(uint32_t{}); break;
    case DType::kU64: k.kind = Key::kUnsigned, k.u = load(uint64_t{}); break;
    default: break;
  }
  return k;
}

// -1, 0 or 1; both keys come from one dtype.
int Compare(const Key& a, const Key& b) {
  switch (a.kind) {
    case Key::kSigned: return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    case Key::kUnsigned: return a.u < b.u ? -1 : a.u > b.u ? 1 : 0;
    case Key::kFloat: {
      const bool na = std::isnan(a.f), nb = std::isnan(b.f);
      if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
      return a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
    }
  }
  return 0;
}

bool IsNonZero(const Key& k) {
  switch (k.kind) {
    case Key::kSigned: return k.i != 0;
    case Key::kUnsigned: return k.u != 0;
    case Key::kFloat: return !(k.f == 0.0);  // NaN is nonzero, -0 is zero
  }
  return false;
}

Status NonZero(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({}));
  if (!ctx.has_input(0)) return ctx.Invalid("input 0 (X) is required");
  ASSIGN_OR_RETURN(const Tensor* x, KnownAtImport(ctx, 0, "X"));
  const Shape& xs = x->shape();
  if (xs.empty()) return ctx.Unsupported("a rank-0 X (ONNX leaves the output's shape open)");
  const int64_t rank = static_cast<int64_t>(xs.size());
  std::vector<Ints> coords(static_cast<size_t>(rank));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    if (!IsNonZero(KeyOf(*x, i))) continue;
    int64_t rest = i;
    for (int64_t d = rank - 1; d >= 0; --d) {
      coords[d].push_back(rest % xs[d]);
      rest /= xs[d];
    }
  }
  const int64_t count = static_cast<int64_t>(coords[0].size());
  Ints flat;
  flat.reserve(static_cast<size_t>(rank * count));
  for (const Ints& c : coords) flat.insert(flat.end(), c.begin(), c.end());
  return SetResult(ctx, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {rank, count}, flat)));
}

// Unique: x viewed as [outer, n, inner] around `axis` (without an axis: flattened, [1, n, 1]);
// slice j is x[:, j, :], compared lexicographically element by element in row-major order.
Status Unique(NodeContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckAttributes({"axis", "sorted"}));
  if (!ctx.has_input(0)) return ctx.Invalid("input 0 (X) is required");
  ASSIGN_OR_RETURN(const Tensor* x, KnownAtImport(ctx, 0, "X"));
  ASSIGN_OR_RETURN(int64_t sorted, ctx.AttrInt("sorted", 1));
  if (sorted != 0 && sorted != 1) return ctx.Invalid("sorted must be 0 or 1");
  const Shape& xs = x->shape();
  const int64_t rank = static_cast<int64_t>(xs.size());
  int64_t outer = 1, n = x->num_elements(), inner = 1;
  int64_t axis = -1;
  if (ctx.has_attr("axis")) {
    ASSIGN_OR_RETURN(int64_t a, ctx.AttrInt("axis", 0));
    if (rank == 0) return ctx.Invalid("axis " + std::to_string(a) + " for a scalar input");
    ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, a, rank, "axis"));
    outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= xs[d];
    n = xs[axis];
  }
  auto compare_slices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t e = 0; e < inner; ++e) {
        const int c = Compare(KeyOf(*x, (o * n + a) * inner + e), KeyOf(*x, (o * n + b) * inner + e));
        if (c != 0) return c;
      }
    }
    return 0;
  };
  // Stable sort of the slice indices: equal slices keep their order, so the first of each
  // run is its first occurrence.
  Ints order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare_slices(a, b) < 0; });
  Ints first, counts, inverse(static_cast<size_t>(n));
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compare_slices(order[k - 1], order[k]) != 0) {
      first.push_back(order[k]);
      counts.push_back(0);
    }
    inverse[order[k]] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  if (sorted == 0) {
    // Unique slices in order of first occurrence; renumber the inverse to match.
    Ints by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    Ints rank_of(first.size()), new_first(first.size()), new_counts(first.size());
    for (size_t r = 0; r < by_first.size(); ++r) {
      rank_of[by_first[r]] = static_cast<int64_t>(r);
      new_first[r] = first[by_first[r]];
      new_counts[r] = counts[by_first[r]];
    }
    for (int64_t& v : inverse) v = rank_of[v];
    first = std::move(new_first);
    counts = std::move(new_counts);
  }
  const int64_t u = static_cast<int64_t>(first.size());
  Shape ys = axis < 0 ? Shape{u} : xs;
  if (axis >= 0) ys[axis] = u;
  Tensor y(x->dtype(), ys);
  const int64_t elem = DTypeSize(x->dtype());
  for (int64_t o = 0; o < outer && inner > 0; ++o) {
    for (int64_t r = 0; r < u; ++r) {
      std::memcpy(y.data() + ((o * u + r) * inner) * elem, x->data() + ((o * n + first[r]) * inner) * elem,
                  static_cast<size_t>(inner * elem));
    }
  }
  if (ctx.wants_output(0)) ctx.SetOutput(0, ctx.Constant(std::move(y)));
  const Ints* extra[] = {&first, &inverse, &counts};
  for (int i = 1; i < 4; ++i) {
    if (ctx.wants_output(i)) {
      const Ints& v = *extra[i - 1];
      ctx.SetOutput(i, ctx.Constant(Tensor::FromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v)));
    }
  }
  return OkStatus();
}

}  // namespace

const std::vector<OpConverter>& DataShapeConverters() {
  static const std::vector<OpConverter> table = {
      {"NonMaxSuppression", NonMaxSuppression},
      {"NonZero", NonZero},
      {"Unique", Unique},
  };
  return table;
}

}  // namespace consensor::executor::onnx_import
