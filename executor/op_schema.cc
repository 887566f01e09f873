// The op whitelist. One row per graph-format op in the table at the bottom of this file;
// each row names a shape-inference family function. Every family function starts from
// inputs that already passed the common checks in RunInfer (arity, attribute names,
// valid dtypes, rank <= 8, non-negative dims whose product fits), and the common code
// checks the inferred output the same way. Everything a client controls is checked and
// reported as InvalidArgument; arithmetic on dims is overflow-checked.
#include "executor/op_schema.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace consensor::executor {
namespace {

using kernels::Op;
using Inputs = std::vector<TypeInfo>;
using Ints = std::vector<int64_t>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------------------
// Strings for messages.

void Append(std::string& s, std::string_view v) { s += v; }
void Append(std::string& s, const std::string& v) { s += v; }
void Append(std::string& s, const char* v) { s += v; }
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, bool>) void Append(std::string& s,
                                                                                                    T v) {
  s += std::to_string(v);
}

template <typename... Ts>
std::string StrCat(const Ts&... parts) {
  std::string s;
  (Append(s, parts), ...);
  return s;
}

// "f32[4, 16]"
std::string TypeStr(const TypeInfo& t) { return StrCat(DTypeName(t.dtype), ShapeToString(t.shape)); }
std::string IntsStr(const Ints& v) { return ShapeToString(v); }

// ---------------------------------------------------------------------------------------
// Checked arithmetic. Dims are non-negative and their products fit in 2^62 (checked on
// entry), but attributes (pads, strides, shapes, ...) can be anything.

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// Saturating product of non-negative factors, for FLOP estimates.
int64_t SatProduct(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(r, f, &r)) return kInt64Max;
  }
  return r;
}
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kInt64Max : r;
}

int64_t Rank(const TypeInfo& t) { return static_cast<int64_t>(t.shape.size()); }
// Saturating element count: outputs are checked only after inference, so a broadcast or
// an expand may not fit yet.
int64_t Numel(const Shape& s) {
  int64_t r = 1;
  for (int64_t d : s) {
    if (d < 0 || __builtin_mul_overflow(r, d, &r)) return kInt64Max;
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Allowed dtype sets.

enum DTypeMask : uint16_t {
  kMaskNone = 0,
  kMaskF32 = 1 << 0,
  kMaskI32 = 1 << 1,
  kMaskI8 = 1 << 2,
  kMaskBool = 1 << 3,
  kMaskI64 = 1 << 4,
  kMaskU8 = 1 << 5,
  kMaskI16 = 1 << 6,
  kMaskU16 = 1 << 7,
  kMaskU32 = 1 << 8,
  kMaskU64 = 1 << 9,
  kMaskF64 = 1 << 10,
  kMaskF16 = 1 << 11,
  kMaskBF16 = 1 << 12,
  kMaskFloat = kMaskF32 | kMaskF64,
  // f16 and bf16 are accepted wherever f32 is: they compute through the f32 rule (DETERMINISM.md
  // 1.3), so the table rows name only f32 (see WithHalf).
  kMaskHalf = kMaskF16 | kMaskBF16,
  // argmax and top_k order their keys as i64, so not u64; the other 8-to-32-bit types are
  // not wired into them (yet).
  kMaskOrdered = kMaskF32 | kMaskI8 | kMaskI32 | kMaskI64,
  kMaskNumeric = kMaskOrdered | kMaskU8 | kMaskI16 | kMaskU16 | kMaskU32 | kMaskU64 | kMaskF64,
  kMaskIndex = kMaskI32 | kMaskI64,
  kMaskAny = kMaskNumeric | kMaskBool,
};

uint16_t MaskOf(DType t) {
  switch (t) {
    case DType::kF32: return kMaskF32;
    case DType::kI32: return kMaskI32;
    case DType::kI8: return kMaskI8;
    case DType::kBool: return kMaskBool;
    case DType::kI64: return kMaskI64;
    case DType::kU8: return kMaskU8;
    case DType::kI16: return kMaskI16;
    case DType::kU16: return kMaskU16;
    case DType::kU32: return kMaskU32;
    case DType::kU64: return kMaskU64;
    case DType::kF64: return kMaskF64;
    case DType::kF16: return kMaskF16;
    case DType::kBF16: return kMaskBF16;
    default: return kMaskNone;
  }
}

uint16_t WithHalf(uint16_t mask) { return (mask & kMaskF32) ? static_cast<uint16_t>(mask | kMaskHalf) : mask; }

// "f32, i8, i32 or i64"
std::string MaskStr(uint16_t mask) {
  mask = WithHalf(mask);
  std::vector<std::string_view> names;
  for (DType t : {DType::kF32, DType::kI8, DType::kI32, DType::kI64, DType::kU8, DType::kI16, DType::kU16, DType::kU32,
                  DType::kU64, DType::kF64, DType::kF16, DType::kBF16, DType::kBool}) {
    if (mask & MaskOf(t)) names.push_back(DTypeName(t));
  }
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) s += (i + 1 == names.size()) ? " or " : ", ";
    s += names[i];
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// The table row type. `Spec` is what family functions receive: it names the op for
// messages and carries the per-op knobs of the family (dtypes, cost per element).

struct Spec;
using FamilyFn = StatusOr<InferResult> (*)(const Spec& s, const Inputs& in, const Attributes& attrs);

struct Spec {
  OpSchema schema;  // schema.infer is filled in by the table builder
  FamilyFn family;
  uint16_t dtypes;  // allowed dtype(s) of the main input(s)
  int64_t cost;     // estimated operations per output (or input) element

  std::string_view name() const { return schema.name; }
  Op op() const { return schema.op; }
  Status Error(std::string_view what) const { return InvalidArgument(StrCat(name(), ": ", what)); }
};

Status CheckDType(const Spec& s, std::string_view role, const TypeInfo& t, uint16_t allowed) {
  if (MaskOf(t.dtype) & WithHalf(allowed)) return OkStatus();
  return s.Error(StrCat(role, " has dtype ", DTypeName(t.dtype), "; expected ", MaskStr(allowed)));
}

Status CheckSameDType(const Spec& s, std::string_view role_a, const TypeInfo& a, std::string_view role_b,
                      const TypeInfo& b) {
  if (a.dtype == b.dtype) return OkStatus();
  return s.Error(StrCat("dtypes differ: ", role_a, " is ", TypeStr(a), ", ", role_b, " is ", TypeStr(b)));
}

Status CheckRank(const Spec& s, std::string_view role, const TypeInfo& t, int64_t rank) {
  if (Rank(t) == rank) return OkStatus();
  return s.Error(StrCat(role, " must have rank ", rank, ", got ", TypeStr(t)));
}

Status CheckMinRank(const Spec& s, std::string_view role, const TypeInfo& t, int64_t min_rank) {
  if (Rank(t) >= min_rank) return OkStatus();
  return s.Error(StrCat(role, " must have rank >= ", min_rank, ", got ", TypeStr(t)));
}

// ---------------------------------------------------------------------------------------
// Attribute parsing. Each getter checks the variant type; values are validated by the
// caller (ranges depend on the op and the input shapes).

class AttrReader {
 public:
  AttrReader(const Spec& s, const Attributes& attrs) : s_(s), attrs_(attrs) {}

  const AttrValue* Find(std::string_view name) const {
    auto it = attrs_.find(std::string(name));
    return it == attrs_.end() ? nullptr : &it->second;
  }

  StatusOr<std::optional<int64_t>> OptInt(std::string_view name) const {
    const AttrValue* v = Find(name);
    if (!v) return std::optional<int64_t>();
    if (const int64_t* i = std::get_if<int64_t>(v)) return std::optional<int64_t>(*i);
    return TypeError(name, "an int");
  }
  StatusOr<int64_t> Int(std::string_view name, int64_t def) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(name));
    return v.value_or(def);
  }
  // An int that must be 0 or 1.
  StatusOr<bool> Flag(std::string_view name, bool def) const {
    ASSIGN_OR_RETURN(int64_t v, Int(name, def ? 1 : 0));
    if (v != 0 && v != 1) return s_.Error(StrCat("attribute '", name, "' must be 0 or 1, got ", v));
    return v == 1;
  }
  // A float; an int is accepted and converted (round to nearest).
  StatusOr<float> Float(std::string_view name, float def) const {
    const AttrValue* v = Find(name);
    if (!v) return def;
    if (const float* f = std::get_if<float>(v)) return *f;
    if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<float>(*i);
    return TypeError(name, "a float");
  }
  StatusOr<std::optional<Ints>> OptInts(std::string_view name) const {
    const AttrValue* v = Find(name);
    if (!v) return std::optional<Ints>();
    if (const Ints* i = std::get_if<Ints>(v)) return std::optional<Ints>(*i);
    return TypeError(name, "a list of ints");
  }
  StatusOr<Ints> RequiredInts(std::string_view name) const {
    ASSIGN_OR_RETURN(std::optional<Ints> v, OptInts(name));
    if (!v) return Missing(name);
    return *std::move(v);
  }
  // A list of exactly `count` ints, each >= min_value; `def` when absent.
  StatusOr<Ints> FixedInts(std::string_view name, size_t count, int64_t min_value, std::optional<Ints> def) const {
    ASSIGN_OR_RETURN(std::optional<Ints> v, OptInts(name));
    if (!v) {
      if (!def) return Missing(name);
      return *def;
    }
    if (v->size() != count) {
      return s_.Error(
          StrCat("attribute '", name, "' must have ", count, " values, got ", v->size(), ": ", IntsStr(*v)));
    }
    for (int64_t x : *v) {
      if (x < min_value) {
        return s_.Error(StrCat("attribute '", name, "' values must be >= ", min_value, ", got ", IntsStr(*v)));
      }
    }
    return *std::move(v);
  }
  // A dtype, given as a DType or as its name ("f32").
  StatusOr<DType> Type(std::string_view name) const {
    const AttrValue* v = Find(name);
    if (!v) return Missing(name);
    if (const DType* t = std::get_if<DType>(v)) {
      if (!IsValidDType(*t)) {
        return s_.Error(StrCat("attribute '", name, "' is not a valid dtype (code ", static_cast<int>(*t), ")"));
      }
      return *t;
    }
    if (const std::string* str = std::get_if<std::string>(v)) {
      StatusOr<DType> t = DTypeFromName(*str);
      if (!t.ok()) return s_.Error(StrCat("attribute '", name, "': ", t.status().message()));
      return *t;
    }
    return TypeError(name, "a dtype");
  }

 private:
  Status TypeError(std::string_view name, std::string_view what) const {
    return s_.Error(StrCat("attribute '", name, "' must be ", what));
  }
  Status Missing(std::string_view name) const { return s_.Error(StrCat("missing required attribute '", name, "'")); }

  const Spec& s_;
  const Attributes& attrs_;
};

// ---------------------------------------------------------------------------------------
// Shared shape helpers.

StatusOr<int64_t> NormalizeAxis(const Spec& s, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return s.Error(StrCat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// Normalizes, rejects duplicates, sorts.
StatusOr<Ints> NormalizeAxes(const Spec& s, const Ints& axes, int64_t rank, std::string_view attr) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  Ints out;
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(s, a, rank));
    if (seen[n]) return s.Error(StrCat("axis ", n, " appears more than once in '", attr, "' ", IntsStr(axes)));
    seen[n] = true;
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Ints AllAxes(int64_t rank) {
  Ints v(static_cast<size_t>(rank));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// numpy broadcasting of two shapes; nullopt when incompatible.
std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// Broadcasts all the given inputs together.
StatusOr<Shape> BroadcastInputs(const Spec& s, const Inputs& in) {
  Shape out;
  for (const TypeInfo& t : in) {
    std::optional<Shape> b = BroadcastShapes(out, t.shape);
    if (!b) {
      std::string list;
      for (size_t i = 0; i < in.size(); ++i) list += StrCat(i ? ", " : "", TypeStr(in[i]));
      return s.Error(StrCat("shapes cannot be broadcast together: ", list));
    }
    out = *std::move(b);
  }
  return out;
}

// Output size of a sliding window along one spatial dim (conv and pools).
StatusOr<int64_t> WindowOutputDim(const Spec& s, std::string_view dim_name, int64_t in, int64_t pad_begin,
                                  int64_t pad_end, int64_t kernel, int64_t stride, int64_t dilation) {
  std::optional<int64_t> padded = CheckedAdd(in, pad_begin);
  if (padded) padded = CheckedAdd(*padded, pad_end);
  std::optional<int64_t> span = CheckedMul(dilation, kernel - 1);
  if (span) span = CheckedAdd(*span, 1);
  if (!padded || !span) return s.Error(StrCat("padding, kernel or dilation along ", dim_name, " is too large"));
  if (*padded < *span) {
    return s.Error(StrCat("output ", dim_name, " would be empty: padded input ", dim_name, " ", *padded,
                          " is smaller than the dilated kernel ", dim_name, " ", *span));
  }
  return (*padded - *span) / stride + 1;
}

InferResult Result(DType dtype, Shape shape) {
  InferResult r;
  r.output.dtype = dtype;
  r.output.shape = std::move(shape);
  return r;
}

// ---------------------------------------------------------------------------------------
// Elementwise.

bool ProducesBool(Op op) {
  switch (op) {
    case Op::kEqual:
    case Op::kNotEqual:
    case Op::kLess:
    case Op::kLessEqual:
    case Op::kGreater:
    case Op::kGreaterEqual: return true;
    default: return false;
  }
}

StatusOr<InferResult> InferUnary(const Spec& s, const Inputs& in, const Attributes&) {
  RETURN_IF_ERROR(CheckDType(s, "input", in[0], s.dtypes));
  InferResult r = Result(in[0].dtype, in[0].shape);
  r.flops = SatProduct({Numel(r.output.shape), s.cost});
  return r;
}

StatusOr<InferResult> InferCast(const Spec& s, const Inputs& in, const Attributes& attrs) {
  ASSIGN_OR_RETURN(DType to, AttrReader(s, attrs).Type("to"));
  InferResult r = Result(to, in[0].shape);
  r.params.to = to;
  r.canonical_attrs = {{"to", to}};
  r.flops = SatProduct({Numel(r.output.shape), s.cost});
  return r;
}

StatusOr<InferResult> InferBinary(const Spec& s, const Inputs& in, const Attributes&) {
  RETURN_IF_ERROR(CheckDType(s, "input a", in[0], s.dtypes));
  RETURN_IF_ERROR(CheckSameDType(s, "a", in[0], "b", in[1]));
  ASSIGN_OR_RETURN(Shape shape, BroadcastInputs(s, in));
  InferResult r = Result(ProducesBool(s.op()) ? DType::kBool : in[0].dtype, std::move(shape));
  r.flops = SatProduct({Numel(r.output.shape), s.cost});
  return r;
}

StatusOr<InferResult> InferWhere(const Spec& s, const Inputs& in, const Attributes&) {
  RETURN_IF_ERROR(CheckDType(s, "condition", in[0], kMaskBool));
  RETURN_IF_ERROR(CheckSameDType(s, "a", in[1], "b", in[2]));
  ASSIGN_OR_RETURN(Shape shape, BroadcastInputs(s, in));
  InferResult r = Result(in[1].dtype, std::move(shape));
  r.flops = SatProduct({Numel(r.output.shape), s.cost});
  return r;
}

// ---------------------------------------------------------------------------------------
// Reductions.

StatusOr<InferResult> InferReduce(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(std::optional<Ints> axes_attr, ar.OptInts("axes"));
  ASSIGN_OR_RETURN(bool keepdims, ar.Flag("keepdims", true));
  Ints axes;
  if (!axes_attr || axes_attr->empty()) {
    axes = AllAxes(Rank(x));
  } else {
    ASSIGN_OR_RETURN(axes, NormalizeAxes(s, *axes_attr, Rank(x), "axes"));
  }
  Shape out;
  for (int64_t d = 0; d < Rank(x); ++d) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (!reduced) {
      out.push_back(x.shape[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  InferResult r = Result(x.dtype, std::move(out));
  r.params.axes = axes;
  r.params.keepdims = keepdims;
  r.canonical_attrs = {{"axes", axes}, {"keepdims", int64_t{keepdims}}};
  r.flops = SatProduct({Numel(x.shape), s.cost});
  if (s.op() == Op::kReduceMean) r.flops = SatAdd(r.flops, Numel(r.output.shape));
  return r;
}

StatusOr<InferResult> InferArgMax(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(int64_t axis_attr, ar.Int("axis", 0));
  ASSIGN_OR_RETURN(bool keepdims, ar.Flag("keepdims", true));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(x)));
  if (x.shape[axis] == 0) {
    return s.Error(StrCat("cannot take the argmax over empty axis ", axis, " of ", TypeStr(x)));
  }
  Shape out = x.shape;
  if (keepdims) {
    out[axis] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  InferResult r = Result(DType::kI64, std::move(out));
  r.params.axis = axis;
  r.params.keepdims = keepdims;
  r.canonical_attrs = {{"axis", axis}, {"keepdims", int64_t{keepdims}}};
  r.flops = SatProduct({Numel(x.shape), s.cost});
  return r;
}

// top_k(x, k, axis, largest): the i64 indices of the k first elements along `axis`.
StatusOr<InferResult> InferTopK(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(std::optional<int64_t> k, ar.OptInt("k"));
  if (!k) return s.Error("attribute 'k' is required");
  ASSIGN_OR_RETURN(int64_t axis_attr, ar.Int("axis", -1));
  ASSIGN_OR_RETURN(bool largest, ar.Flag("largest", true));
  if (Rank(x) == 0) return s.Error(StrCat("needs an axis, got ", TypeStr(x)));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(x)));
  if (*k < 0 || *k > x.shape[axis]) {
    return s.Error(StrCat("k = ", *k, " is outside [0, ", x.shape[axis], "] for axis ", axis, " of ", TypeStr(x)));
  }
  Shape out = x.shape;
  out[axis] = *k;
  InferResult r = Result(DType::kI64, std::move(out));
  r.params.axis = axis;
  r.params.k = *k;
  r.params.largest = largest;
  r.canonical_attrs = {{"k", *k}, {"axis", axis}, {"largest", int64_t{largest}}};
  // A bounded heap: about log2(k) + 1 comparisons per element.
  r.flops = SatProduct({Numel(x.shape), s.cost, static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(*k))) + 1});
  return r;
}

// cumsum(x, axis, exclusive, reverse): the running sum along `axis`; same dtype and shape.
StatusOr<InferResult> InferCumSum(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(int64_t axis_attr, ar.Int("axis", 0));
  ASSIGN_OR_RETURN(bool exclusive, ar.Flag("exclusive", false));
  ASSIGN_OR_RETURN(bool reverse, ar.Flag("reverse", false));
  if (Rank(x) == 0) return s.Error(StrCat("needs an axis, got ", TypeStr(x)));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(x)));
  InferResult r = Result(x.dtype, x.shape);
  r.params.axis = axis;
  r.params.exclusive = exclusive;
  r.params.reverse = reverse;
  r.canonical_attrs = {{"axis", axis}, {"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}};
  r.flops = SatProduct({Numel(x.shape), s.cost});
  return r;
}

// ---------------------------------------------------------------------------------------
// Linear algebra.

StatusOr<InferResult> InferMatMul(const Spec& s, const Inputs& in, const Attributes&) {
  const TypeInfo& a = in[0];
  const TypeInfo& b = in[1];
  RETURN_IF_ERROR(CheckDType(s, "a", a, s.dtypes));
  RETURN_IF_ERROR(CheckDType(s, "b", b, s.dtypes));
  RETURN_IF_ERROR(CheckSameDType(s, "a", a, "b", b));
  RETURN_IF_ERROR(CheckMinRank(s, "a", a, 1));
  RETURN_IF_ERROR(CheckMinRank(s, "b", b, 1));
  // numpy promotion of rank-1 operands: a [K] -> [1, K], b [K] -> [K, 1].
  Shape ka = a.shape;
  Shape kb = b.shape;
  if (ka.size() == 1) ka.insert(ka.begin(), 1);
  if (kb.size() == 1) kb.push_back(1);
  int64_t m = ka[ka.size() - 2], k = ka[ka.size() - 1];
  int64_t kb_k = kb[kb.size() - 2], n = kb[kb.size() - 1];
  if (k != kb_k) return s.Error(StrCat("inner dimensions differ: a is ", TypeStr(a), ", b is ", TypeStr(b)));
  Shape batch_a(ka.begin(), ka.end() - 2);
  Shape batch_b(kb.begin(), kb.end() - 2);
  std::optional<Shape> batch = BroadcastShapes(batch_a, batch_b);
  if (!batch) {
    return s.Error(StrCat("batch dimensions cannot be broadcast: a is ", TypeStr(a), ", b is ", TypeStr(b)));
  }
  // Kernel view: every operand padded with leading 1s to the output batch rank.
  ka.insert(ka.begin(), batch->size() - batch_a.size(), 1);
  kb.insert(kb.begin(), batch->size() - batch_b.size(), 1);
  Shape kout = *batch;
  kout.push_back(m);
  kout.push_back(n);
  Shape out = *batch;
  if (a.shape.size() > 1) out.push_back(m);
  if (b.shape.size() > 1) out.push_back(n);

  InferResult r = Result(s.op() == Op::kMatMulInt8 ? DType::kI32 : a.dtype, std::move(out));
  r.kernel_input_shapes = {std::move(ka), std::move(kb)};
  r.kernel_output_shape = std::move(kout);
  r.flops = SatProduct({2, Numel(*batch), m, n, k});
  return r;
}

StatusOr<InferResult> InferConv2D(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  const TypeInfo& w = in[1];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  RETURN_IF_ERROR(CheckSameDType(s, "input", x, "weight", w));
  RETURN_IF_ERROR(CheckRank(s, "input (N, C, H, W)", x, 4));
  RETURN_IF_ERROR(CheckRank(s, "weight (F, C/group, KH, KW)", w, 4));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(Ints strides, ar.FixedInts("strides", 2, 1, Ints{1, 1}));
  ASSIGN_OR_RETURN(Ints pads, ar.FixedInts("pads", 4, 0, Ints{0, 0, 0, 0}));
  ASSIGN_OR_RETURN(Ints dilations, ar.FixedInts("dilations", 2, 1, Ints{1, 1}));
  ASSIGN_OR_RETURN(int64_t group, ar.Int("group", 1));
  if (group < 1) return s.Error(StrCat("attribute 'group' must be >= 1, got ", group));

  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t f = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  if (c % group != 0) return s.Error(StrCat("input channels ", c, " are not divisible by group ", group));
  if (f % group != 0) return s.Error(StrCat("output channels ", f, " are not divisible by group ", group));
  if (cg != c / group) {
    return s.Error(StrCat("weight ", TypeStr(w), " has ", cg, " input channels per group, but input ", TypeStr(x),
                          " with group ", group, " needs ", c / group));
  }
  if (kh < 1 || kw < 1) return s.Error(StrCat("weight ", TypeStr(w), " has an empty kernel"));
  if (in.size() == 3) {
    const TypeInfo& bias = in[2];
    RETURN_IF_ERROR(CheckSameDType(s, "input", x, "bias", bias));
    if (bias.shape != Shape{f}) {
      return s.Error(StrCat("bias must have shape [", f, "] (one value per output channel), got ", TypeStr(bias)));
    }
  }
  ASSIGN_OR_RETURN(int64_t oh, WindowOutputDim(s, "height", h, pads[0], pads[2], kh, strides[0], dilations[0]));
  ASSIGN_OR_RETURN(int64_t ow, WindowOutputDim(s, "width", wd, pads[1], pads[3], kw, strides[1], dilations[1]));

  InferResult r = Result(x.dtype, {n, f, oh, ow});
  r.params.kernel = {kh, kw};
  r.params.strides = strides;
  r.params.pads = pads;
  r.params.dilations = dilations;
  r.params.group = group;
  r.canonical_attrs = {{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"group", group}};
  int64_t outputs = SatProduct({n, f, oh, ow});
  r.flops = SatProduct({2, outputs, cg, kh, kw});
  if (in.size() == 3) r.flops = SatAdd(r.flops, outputs);
  return r;
}

// ---------------------------------------------------------------------------------------
// Neural-network ops.

StatusOr<InferResult> InferPool2D(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  const bool is_avg = s.op() == Op::kAvgPool2D;
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  RETURN_IF_ERROR(CheckRank(s, "input (N, C, H, W)", x, 4));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(Ints kernel, ar.FixedInts("kernel", 2, 1, std::nullopt));
  ASSIGN_OR_RETURN(Ints strides, ar.FixedInts("strides", 2, 1, Ints{1, 1}));
  ASSIGN_OR_RETURN(Ints pads, ar.FixedInts("pads", 4, 0, Ints{0, 0, 0, 0}));
  ASSIGN_OR_RETURN(Ints dilations, ar.FixedInts("dilations", 2, 1, Ints{1, 1}));
  bool count_include_pad = false;
  if (is_avg) {
    if (dilations != Ints{1, 1}) {
      return s.Error(StrCat("attribute 'dilations' must be [1, 1] for average pooling, got ", IntsStr(dilations)));
    }
    ASSIGN_OR_RETURN(count_include_pad, ar.Flag("count_include_pad", false));
  }
  ASSIGN_OR_RETURN(int64_t oh,
                   WindowOutputDim(s, "height", x.shape[2], pads[0], pads[2], kernel[0], strides[0], dilations[0]));
  ASSIGN_OR_RETURN(int64_t ow,
                   WindowOutputDim(s, "width", x.shape[3], pads[1], pads[3], kernel[1], strides[1], dilations[1]));

  InferResult r = Result(x.dtype, {x.shape[0], x.shape[1], oh, ow});
  r.params.kernel = kernel;
  r.params.strides = strides;
  r.params.pads = pads;
  r.params.dilations = dilations;
  r.params.count_include_pad = count_include_pad;
  r.canonical_attrs = {{"kernel", kernel}, {"strides", strides}, {"pads", pads}, {"dilations", dilations}};
  if (is_avg) r.canonical_attrs["count_include_pad"] = int64_t{count_include_pad};
  r.flops = SatProduct({Numel(r.output.shape), kernel[0], kernel[1]});
  return r;
}

StatusOr<InferResult> InferSoftmax(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrReader(s, attrs).Int("axis", -1));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(x)));
  InferResult r = Result(x.dtype, x.shape);
  r.params.axis = axis;
  r.canonical_attrs = {{"axis", axis}};
  r.flops = SatProduct({Numel(x.shape), s.cost});
  return r;
}

StatusOr<InferResult> InferLayerNorm(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  RETURN_IF_ERROR(CheckDType(s, "input", x, s.dtypes));
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(int64_t axis_attr, ar.Int("axis", -1));
  ASSIGN_OR_RETURN(float epsilon, ar.Float("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(x)));
  if (!std::isfinite(epsilon) || epsilon < 0.0f) {
    return s.Error(StrCat("attribute 'epsilon' must be finite and non-negative, got ", std::to_string(epsilon)));
  }
  const Shape norm_shape(x.shape.begin() + axis, x.shape.end());
  const char* roles[] = {"input", "scale", "bias"};
  for (size_t i = 1; i < in.size(); ++i) {
    RETURN_IF_ERROR(CheckSameDType(s, "input", x, roles[i], in[i]));
    if (in[i].shape != norm_shape) {
      return s.Error(StrCat(roles[i], " must have shape ", ShapeToString(norm_shape), " (input dims from axis ", axis,
                            "), got ", TypeStr(in[i])));
    }
  }
  InferResult r = Result(x.dtype, x.shape);
  r.params.axis = axis;
  r.params.epsilon = epsilon;
  r.canonical_attrs = {{"axis", axis}, {"epsilon", epsilon}};
  r.flops = SatProduct({Numel(x.shape), s.cost});
  return r;
}

// ---------------------------------------------------------------------------------------
// Data movement. No arithmetic, so no FLOPs.

StatusOr<InferResult> InferIdentity(const Spec&, const Inputs& in, const Attributes&) {
  return Result(in[0].dtype, in[0].shape);
}

StatusOr<InferResult> InferReshape(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  ASSIGN_OR_RETURN(Ints shape, AttrReader(s, attrs).RequiredInts("shape"));
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return s.Error(StrCat("target shape ", IntsStr(shape), " has rank ", shape.size(), "; the maximum is ", kMaxRank));
  }
  int infer_at = -1;
  int64_t known = 1;  // product of the explicit dims
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) return s.Error(StrCat("target shape ", IntsStr(shape), " has more than one -1"));
      infer_at = static_cast<int>(i);
    } else if (shape[i] < -1) {
      return s.Error(StrCat("target shape ", IntsStr(shape), " has a negative dimension"));
    } else {
      std::optional<int64_t> p = CheckedMul(known, shape[i]);
      if (!p) {
        overflow = true;
      } else {
        known = *p;
      }
    }
  }
  const int64_t count = Numel(x.shape);
  if (overflow) return s.Error(StrCat("target shape ", IntsStr(shape), " has too many elements"));
  if (infer_at >= 0) {
    if (known == 0) {
      return s.Error(StrCat("cannot infer the -1 in target shape ", IntsStr(shape), " when the other dims are 0"));
    }
    if (count % known != 0) {
      return s.Error(StrCat("cannot reshape ", TypeStr(x), " (", count, " elements) to ", IntsStr(shape)));
    }
    shape[infer_at] = count / known;
  } else if (known != count) {
    return s.Error(StrCat("cannot reshape ", TypeStr(x), " (", count, " elements) to ", IntsStr(shape), " (", known,
                          " elements)"));
  }
  InferResult r = Result(x.dtype, shape);
  r.canonical_attrs = {{"shape", shape}};
  return r;
}

StatusOr<InferResult> InferTranspose(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  const int64_t rank = Rank(x);
  ASSIGN_OR_RETURN(std::optional<Ints> perm_attr, AttrReader(s, attrs).OptInts("perm"));
  Ints perm = AllAxes(rank);
  if (perm_attr) {
    perm = *perm_attr;
  } else {
    std::reverse(perm.begin(), perm.end());
  }
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return s.Error(StrCat("perm ", IntsStr(perm), " is not a permutation of the ", rank, " dims of ", TypeStr(x)));
  }
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  InferResult r = Result(x.dtype, std::move(out));
  r.params.perm = perm;
  r.canonical_attrs = {{"perm", perm}};
  return r;
}

// ONNX Slice. The canonical form lists every dim: start (resolved), the exact end just
// past the last element taken, and the step; a dim with at most one element taken uses
// step 1, and an empty one start 0.
StatusOr<InferResult> InferSlice(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  const int64_t rank = Rank(x);
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(Ints starts, ar.RequiredInts("starts"));
  ASSIGN_OR_RETURN(Ints ends, ar.RequiredInts("ends"));
  ASSIGN_OR_RETURN(std::optional<Ints> axes_attr, ar.OptInts("axes"));
  ASSIGN_OR_RETURN(std::optional<Ints> steps_attr, ar.OptInts("steps"));
  const size_t count = starts.size();
  if (ends.size() != count) {
    return s.Error(
        StrCat("'starts' and 'ends' must have the same length, got ", IntsStr(starts), " and ", IntsStr(ends)));
  }
  if (axes_attr && axes_attr->size() != count) {
    return s.Error(StrCat("'axes' ", IntsStr(*axes_attr), " must have the same length as 'starts' ", IntsStr(starts)));
  }
  if (steps_attr && steps_attr->size() != count) {
    return s.Error(
        StrCat("'steps' ", IntsStr(*steps_attr), " must have the same length as 'starts' ", IntsStr(starts)));
  }
  if (!axes_attr && static_cast<int64_t>(count) > rank) {
    return s.Error(StrCat("'starts' has ", count, " values but the input ", TypeStr(x), " has rank ", rank));
  }
  Ints axes = AllAxes(static_cast<int64_t>(count));
  if (axes_attr) {
    for (size_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(axes[i], NormalizeAxis(s, (*axes_attr)[i], rank));
      for (size_t j = 0; j < i; ++j) {
        if (axes[j] == axes[i]) {
          return s.Error(StrCat("axis ", axes[i], " appears more than once in 'axes' ", IntsStr(*axes_attr)));
        }
      }
    }
  }
  Ints p_starts(static_cast<size_t>(rank), 0), p_steps(static_cast<size_t>(rank), 1);
  Ints c_ends = x.shape;
  Shape out = x.shape;
  for (size_t i = 0; i < count; ++i) {
    const int64_t axis = axes[i];
    const int64_t dim = x.shape[axis];
    const int64_t step = steps_attr ? (*steps_attr)[i] : 1;
    if (step == 0) return s.Error(StrCat("step for axis ", axis, " must not be 0"));
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;  // cannot overflow: start < 0 <= dim
    if (end < 0) end += dim;
    int64_t n = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) n = (end - start - 1) / step + 1;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // |step| as unsigned: step may be INT64_MIN.
      uint64_t mag = uint64_t{0} - static_cast<uint64_t>(step);
      if (start > end) n = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / mag + 1);
    }
    int64_t c_step = n > 1 ? step : 1;
    int64_t c_start = n > 0 ? start : 0;
    int64_t c_end;
    if (n == 0) {
      c_end = 0;
    } else {
      int64_t last = c_start + (n - 1) * c_step;  // an index in [0, dim): no overflow
      c_end = c_step > 0 ? last + 1 : (last == 0 ? -dim - 1 : last - 1);
    }
    out[axis] = n;
    p_starts[axis] = c_start;
    p_steps[axis] = c_step;
    c_ends[axis] = c_end;
  }
  InferResult r = Result(x.dtype, std::move(out));
  r.params.starts = p_starts;
  r.params.steps = p_steps;
  r.canonical_attrs = {{"starts", p_starts}, {"ends", c_ends}, {"axes", AllAxes(rank)}, {"steps", p_steps}};
  return r;
}

StatusOr<InferResult> InferConcat(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& first = in[0];
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrReader(s, attrs).Int("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(first)));
  Shape out = first.shape;
  for (size_t i = 1; i < in.size(); ++i) {
    const TypeInfo& t = in[i];
    std::string role = StrCat("input ", i);
    RETURN_IF_ERROR(CheckSameDType(s, "input 0", first, role, t));
    bool match = t.shape.size() == first.shape.size();
    for (size_t d = 0; match && d < t.shape.size(); ++d) {
      match = static_cast<int64_t>(d) == axis || t.shape[d] == first.shape[d];
    }
    if (!match) {
      return s.Error(StrCat("input 0 is ", TypeStr(first), " but ", role, " is ", TypeStr(t), "; all dims except axis ",
                            axis, " must match"));
    }
    std::optional<int64_t> sum = CheckedAdd(out[axis], t.shape[axis]);
    if (!sum) return s.Error("concatenated dimension is too large");
    out[axis] = *sum;
  }
  InferResult r = Result(first.dtype, std::move(out));
  r.params.axis = axis;
  r.canonical_attrs = {{"axis", axis}};
  return r;
}

StatusOr<InferResult> InferGather(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& data = in[0];
  const TypeInfo& indices = in[1];
  RETURN_IF_ERROR(CheckDType(s, "indices", indices, kMaskIndex));
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrReader(s, attrs).Int("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(s, axis_attr, Rank(data)));
  if (Rank(data) - 1 + Rank(indices) > kMaxRank) {
    return s.Error(StrCat("output of gathering ", TypeStr(indices), " from ", TypeStr(data), " would have rank ",
                          Rank(data) - 1 + Rank(indices), "; the maximum is ", kMaxRank));
  }
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  InferResult r = Result(data.dtype, std::move(out));
  r.params.axis = axis;
  r.canonical_attrs = {{"axis", axis}};
  return r;
}

StatusOr<InferResult> InferExpand(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  ASSIGN_OR_RETURN(Ints shape, AttrReader(s, attrs).RequiredInts("shape"));
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return s.Error(StrCat("target shape ", IntsStr(shape), " has rank ", shape.size(), "; the maximum is ", kMaxRank));
  }
  for (int64_t d : shape) {
    if (d < 0) return s.Error(StrCat("target shape ", IntsStr(shape), " has a negative dimension"));
  }
  std::optional<Shape> out = BroadcastShapes(x.shape, shape);
  if (!out) return s.Error(StrCat("cannot broadcast ", TypeStr(x), " to shape ", IntsStr(shape)));
  InferResult r = Result(x.dtype, *out);
  r.canonical_attrs = {{"shape", *out}};
  return r;
}

StatusOr<InferResult> InferPad(const Spec& s, const Inputs& in, const Attributes& attrs) {
  const TypeInfo& x = in[0];
  const int64_t rank = Rank(x);
  AttrReader ar(s, attrs);
  ASSIGN_OR_RETURN(Ints pads, ar.FixedInts("pads", static_cast<size_t>(2 * rank), 0, std::nullopt));
  ASSIGN_OR_RETURN(float value, ar.Float("value", 0.0f));
  Ints begin(pads.begin(), pads.begin() + rank), end(pads.begin() + rank, pads.end());
  Shape out = x.shape;
  for (int64_t d = 0; d < rank; ++d) {
    std::optional<int64_t> v = CheckedAdd(out[d], begin[d]);
    if (v) v = CheckedAdd(*v, end[d]);
    if (!v) return s.Error(StrCat("pads ", IntsStr(pads), " are too large for ", TypeStr(x)));
    out[d] = *v;
  }
  InferResult r = Result(x.dtype, std::move(out));
  r.params.pad_begin = std::move(begin);
  r.params.pad_end = std::move(end);
  r.params.pad_value = value;
  r.canonical_attrs = {{"pads", pads}, {"value", value}};
  return r;
}

// ---------------------------------------------------------------------------------------
// The table.

constexpr int64_t kTranscendental = 8;  // rough cost of one detmath function call

std::vector<Spec> BuildSpecs() {
  using A = std::vector<std::string_view>;
  const A none;
  const A reduce = {"axes", "keepdims"};
  const A conv = {"strides", "pads", "dilations", "group"};
  const A pool = {"kernel", "strides", "pads", "dilations"};
  const A avg_pool = {"kernel", "strides", "pads", "dilations", "count_include_pad"};
  struct Row {
    std::string_view name;
    Op op;
    int min_inputs, max_inputs;
    A attrs;
    FamilyFn family;
    uint16_t dtypes;
    int64_t cost;
  };
  const Row rows[] = {
      // Unary elementwise.
      {"neg", Op::kNeg, 1, 1, none, InferUnary, kMaskNumeric, 1},
      {"abs", Op::kAbs, 1, 1, none, InferUnary, kMaskNumeric, 1},
      {"relu", Op::kRelu, 1, 1, none, InferUnary, kMaskNumeric, 1},
      {"exp", Op::kExp, 1, 1, none, InferUnary, kMaskFloat, kTranscendental},
      {"log", Op::kLog, 1, 1, none, InferUnary, kMaskFloat, kTranscendental},
      {"sqrt", Op::kSqrt, 1, 1, none, InferUnary, kMaskFloat, 1},
      {"rsqrt", Op::kRsqrt, 1, 1, none, InferUnary, kMaskFloat, 2},
      {"tanh", Op::kTanh, 1, 1, none, InferUnary, kMaskFloat, kTranscendental},
      {"sigmoid", Op::kSigmoid, 1, 1, none, InferUnary, kMaskFloat, kTranscendental + 2},
      {"erf", Op::kErf, 1, 1, none, InferUnary, kMaskFloat, kTranscendental},
      {"gelu", Op::kGeluErf, 1, 1, none, InferUnary, kMaskFloat, kTranscendental + 4},
      {"gelu_tanh", Op::kGeluTanh, 1, 1, none, InferUnary, kMaskFloat, kTranscendental + 7},
      {"sin", Op::kSin, 1, 1, none, InferUnary, kMaskFloat, kTranscendental},
      {"cos", Op::kCos, 1, 1, none, InferUnary, kMaskFloat, kTranscendental},
      {"floor", Op::kFloor, 1, 1, none, InferUnary, kMaskFloat, 1},
      {"ceil", Op::kCeil, 1, 1, none, InferUnary, kMaskFloat, 1},
      {"round", Op::kRound, 1, 1, none, InferUnary, kMaskFloat, 1},
      {"not", Op::kNot, 1, 1, none, InferUnary, kMaskBool, 1},
      {"identity", Op::kIdentity, 1, 1, none, InferIdentity, kMaskAny, 0},
      {"cast", Op::kCast, 1, 1, {"to"}, InferCast, kMaskAny, 1},
      // Binary elementwise (numpy broadcasting).
      {"add", Op::kAdd, 2, 2, none, InferBinary, kMaskNumeric, 1},
      {"sub", Op::kSub, 2, 2, none, InferBinary, kMaskNumeric, 1},
      {"mul", Op::kMul, 2, 2, none, InferBinary, kMaskNumeric, 1},
      {"div", Op::kDiv, 2, 2, none, InferBinary, kMaskNumeric, 1},
      {"pow", Op::kPow, 2, 2, none, InferBinary, kMaskNumeric, 2 * kTranscendental},
      {"fmod", Op::kFmod, 2, 2, none, InferBinary, kMaskNumeric, 4},
      {"max", Op::kMax, 2, 2, none, InferBinary, kMaskNumeric, 1},
      {"min", Op::kMin, 2, 2, none, InferBinary, kMaskNumeric, 1},
      {"equal", Op::kEqual, 2, 2, none, InferBinary, kMaskAny, 1},
      {"not_equal", Op::kNotEqual, 2, 2, none, InferBinary, kMaskAny, 1},
      {"less", Op::kLess, 2, 2, none, InferBinary, kMaskAny, 1},
      {"less_equal", Op::kLessEqual, 2, 2, none, InferBinary, kMaskAny, 1},
      {"greater", Op::kGreater, 2, 2, none, InferBinary, kMaskAny, 1},
      {"greater_equal", Op::kGreaterEqual, 2, 2, none, InferBinary, kMaskAny, 1},
      {"and", Op::kAnd, 2, 2, none, InferBinary, kMaskBool, 1},
      {"or", Op::kOr, 2, 2, none, InferBinary, kMaskBool, 1},
      {"xor", Op::kXor, 2, 2, none, InferBinary, kMaskBool, 1},
      {"where", Op::kWhere, 3, 3, none, InferWhere, kMaskAny, 1},
      // Reductions. Integer reduce_sum wraps; the others are f32 only (DETERMINISM.md 4.3).
      {"reduce_sum", Op::kReduceSum, 1, 1, reduce, InferReduce, kMaskNumeric, 1},
      {"reduce_mean", Op::kReduceMean, 1, 1, reduce, InferReduce, kMaskFloat, 1},
      {"reduce_max", Op::kReduceMax, 1, 1, reduce, InferReduce, kMaskNumeric, 1},
      {"reduce_min", Op::kReduceMin, 1, 1, reduce, InferReduce, kMaskNumeric, 1},
      {"reduce_prod", Op::kReduceProd, 1, 1, reduce, InferReduce, kMaskNumeric, 1},
      {"argmax", Op::kArgMax, 1, 1, {"axis", "keepdims"}, InferArgMax, kMaskOrdered, 1},
      {"top_k", Op::kTopK, 1, 1, {"k", "axis", "largest"}, InferTopK, kMaskOrdered, 1},
      // Linear algebra.
      {"matmul", Op::kMatMul, 2, 2, none, InferMatMul, kMaskFloat, 2},
      {"matmul_i8", Op::kMatMulInt8, 2, 2, none, InferMatMul, kMaskI8, 2},
      {"conv2d", Op::kConv2D, 2, 3, conv, InferConv2D, kMaskF32, 2},
      // Neural-network ops.
      {"max_pool2d", Op::kMaxPool2D, 1, 1, pool, InferPool2D, kMaskF32, 1},
      {"avg_pool2d", Op::kAvgPool2D, 1, 1, avg_pool, InferPool2D, kMaskF32, 1},
      {"softmax", Op::kSoftmax, 1, 1, {"axis"}, InferSoftmax, kMaskF32, kTranscendental + 4},
      {"layer_norm", Op::kLayerNorm, 2, 3, {"axis", "epsilon"}, InferLayerNorm, kMaskF32, 8},
      // Data movement (any dtype; copies bits).
      {"reshape", Op::kReshape, 1, 1, {"shape"}, InferReshape, kMaskAny, 0},
      {"transpose", Op::kTranspose, 1, 1, {"perm"}, InferTranspose, kMaskAny, 0},
      {"slice", Op::kSlice, 1, 1, {"starts", "ends", "axes", "steps"}, InferSlice, kMaskAny, 0},
      {"concat", Op::kConcat, 1, -1, {"axis"}, InferConcat, kMaskAny, 0},
      {"gather", Op::kGather, 2, 2, {"axis"}, InferGather, kMaskAny, 0},
      {"expand", Op::kExpand, 1, 1, {"shape"}, InferExpand, kMaskAny, 0},
      {"pad", Op::kPad, 1, 1, {"pads", "value"}, InferPad, kMaskAny, 0},
      // Inverse trigonometric and hyperbolic (detmath, DETERMINISM.md 5.15).
      {"asin", Op::kAsin, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      {"acos", Op::kAcos, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      {"atan", Op::kAtan, 1, 1, none, InferUnary, kMaskF32, kTranscendental},
      {"sinh", Op::kSinh, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      {"cosh", Op::kCosh, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      {"asinh", Op::kAsinh, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      {"acosh", Op::kAcosh, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      {"atanh", Op::kAtanh, 1, 1, none, InferUnary, kMaskF32, 2 * kTranscendental},
      // Running sum, a sequential chain per line (DETERMINISM.md 4.6a).
      {"cumsum", Op::kCumSum, 1, 1, {"axis", "exclusive", "reverse"}, InferCumSum, kMaskNumeric, 1},
  };
  std::vector<Spec> specs;
  for (const Row& row : rows) {
    specs.push_back(Spec{OpSchema{row.name, row.op, row.min_inputs, row.max_inputs, row.attrs, nullptr}, row.family,
                         row.dtypes, row.cost});
  }
  return specs;
}

// The public InferFn of op `kOp`: common checks, then the family function.
StatusOr<InferResult> RunInfer(Op op, const Inputs& in, const Attributes& attrs);
template <Op kOp>
StatusOr<InferResult> InferEntry(const Inputs& in, const Attributes& attrs) {
  return RunInfer(kOp, in, attrs);
}
template <size_t... I>
constexpr std::array<InferFn, sizeof...(I)> MakeEntries(std::index_sequence<I...>) {
  return {&InferEntry<static_cast<Op>(I)>...};
}
constexpr size_t kNumOps = static_cast<size_t>(Op::kNumOps);
constexpr std::array<InferFn, kNumOps> kEntries = MakeEntries(std::make_index_sequence<kNumOps>());

const std::vector<Spec>& Specs() {
  static const std::vector<Spec>* specs = [] {
    auto* v = new std::vector<Spec>(BuildSpecs());
    for (Spec& s : *v) s.schema.infer = kEntries[static_cast<size_t>(s.schema.op)];
    return v;
  }();
  return *specs;
}

const Spec* SpecForOp(Op op) {
  static const std::array<const Spec*, kNumOps>* by_op = [] {
    auto* a = new std::array<const Spec*, kNumOps>{};
    for (const Spec& s : Specs()) (*a)[static_cast<size_t>(s.schema.op)] = &s;
    return a;
  }();
  size_t i = static_cast<size_t>(op);
  return i < kNumOps ? (*by_op)[i] : nullptr;
}

Status CheckType(const Spec& s, std::string_view role, const TypeInfo& t) {
  if (!IsValidDType(t.dtype)) {
    return s.Error(StrCat(role, " has an invalid dtype (code ", static_cast<int>(t.dtype), ")"));
  }
  if (t.shape.size() > static_cast<size_t>(kMaxRank)) {
    return s.Error(StrCat(role, " ", TypeStr(t), " has rank ", t.shape.size(), "; the maximum is ", kMaxRank));
  }
  StatusOr<int64_t> n = CheckedNumElements(t.shape);
  if (!n.ok()) return s.Error(StrCat(role, ": ", n.status().message()));
  return OkStatus();
}

StatusOr<InferResult> RunInfer(Op op, const Inputs& in, const Attributes& attrs) {
  const Spec* s = SpecForOp(op);
  if (s == nullptr) return InvalidArgument(StrCat("op ", kernels::OpName(op), " is not on the whitelist"));
  const OpSchema& schema = s->schema;
  const int arity = static_cast<int>(in.size());
  if (arity < schema.min_inputs || (schema.max_inputs >= 0 && arity > schema.max_inputs)) {
    std::string expected = schema.max_inputs < 0 ? StrCat("at least ", schema.min_inputs)
                           : schema.min_inputs == schema.max_inputs
                               ? StrCat(schema.min_inputs)
                               : StrCat(schema.min_inputs, " or ", schema.max_inputs);
    return s->Error(StrCat("expected ", expected, " inputs, got ", arity));
  }
  for (const auto& [name, value] : attrs) {
    if (std::find(schema.attributes.begin(), schema.attributes.end(), name) == schema.attributes.end()) {
      return InvalidArgument(StrCat("unknown attribute '", name, "' for op '", schema.name, "'"));
    }
  }
  for (size_t i = 0; i < in.size(); ++i) RETURN_IF_ERROR(CheckType(*s, StrCat("input ", i), in[i]));
  ASSIGN_OR_RETURN(InferResult r, s->family(*s, in, attrs));
  RETURN_IF_ERROR(CheckType(*s, "output", r.output));
  return r;
}

}  // namespace

const std::vector<OpSchema>& AllOpSchemas() {
  static const std::vector<OpSchema>* all = [] {
    auto* v = new std::vector<OpSchema>();
    for (const Spec& s : Specs()) v->push_back(s.schema);
    return v;
  }();
  return *all;
}

const OpSchema* FindOpSchema(std::string_view name) {
  static const std::unordered_map<std::string_view, const OpSchema*>* by_name = [] {
    auto* m = new std::unordered_map<std::string_view, const OpSchema*>();
    for (const OpSchema& s : AllOpSchemas()) m->emplace(s.name, &s);
    return m;
  }();
  auto it = by_name->find(name);
  return it == by_name->end() ? nullptr : it->second;
}

}  // namespace consensor::executor
