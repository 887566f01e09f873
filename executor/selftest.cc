#include "executor/selftest.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "executor/op_schema.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/half.h"

namespace consensor::executor {

namespace {

using kernels::Op;

// ---------------------------------------------------------------------------------------
// Deterministic inputs. splitmix64 and exact integer-to-float steps, so the input bits are
// the same with every standard library (std:: distributions are implementation-defined).

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-scale, scale): 24 random bits scaled exactly to [-1, 1), then one rounding.
  float Uniform(float scale) { return (static_cast<float>(Next() >> 40) * 0x1p-23f - 1.0f) * scale; }
  int64_t Range(int64_t lo, int64_t hi) {  // inclusive, lo <= hi; unsigned math cannot overflow
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0: all 2^64 values
    const uint64_t offset = span == 0 ? Next() : Next() % span;
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
  }

 private:
  uint64_t state_;
};

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Bit patterns every f32 kernel must get right: signed zeros, infinities, NaNs with payloads
// (quiet and signaling, both signs), subnormals, extremes, and values at the edges of the
// detmath ranges and of the integer conversions.
const std::vector<float>& SpecialF32Values() {
  static const std::vector<float> v = {FromBits(0x00000000),
                                       FromBits(0x80000000),
                                       FromBits(0x7F800000),
                                       FromBits(0xFF800000),
                                       FromBits(0x7FC00000),
                                       FromBits(0xFFC00000),
                                       FromBits(0x7FC12345),
                                       FromBits(0x7F800001),
                                       FromBits(0xFFA00001),
                                       FromBits(0x00000001),
                                       FromBits(0x80000001),
                                       FromBits(0x007FFFFF),
                                       FromBits(0x807FFFFF),
                                       FromBits(0x00800000),
                                       FromBits(0x7F7FFFFF),
                                       FromBits(0xFF7FFFFF),
                                       1.0f,
                                       -1.0f,
                                       0.5f,
                                       -0.5f,
                                       2.5f,
                                       -2.5f,
                                       3.0f,
                                       88.72f,
                                       88.73f,
                                       -87.5f,
                                       -103.0f,
                                       1e-30f,
                                       -1e-30f,
                                       1e30f,
                                       3e37f,
                                       -3e37f,
                                       2147483648.0f,
                                       -2147483904.0f,
                                       9.3e18f,
                                       127.5f,
                                       -128.5f,
                                       255.0f,
                                       0.1f,
                                       65504.0f,
                                       16777216.0f,
                                       -9.5f,
                                       1e-7f};
  return v;
}

// Positions spread over the tensor, so special values land in different tiles and threads.
int64_t SpreadIndex(size_t k, size_t count, int64_t n) {
  const int64_t step = std::max<int64_t>(1, n / static_cast<int64_t>(count));
  return (static_cast<int64_t>(k) * step + static_cast<int64_t>(k) % 3) % n;
}

Tensor F32(const Shape& shape, uint64_t seed, float scale, bool specials = true) {
  Tensor t(DType::kF32, shape);
  Rng rng(seed);
  float* p = t.data_as<float>();
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) p[i] = rng.Uniform(scale);
  if (specials && n > 0) {
    const auto& sp = SpecialF32Values();
    for (size_t k = 0; k < sp.size() && static_cast<int64_t>(k) < n; ++k) p[SpreadIndex(k, sp.size(), n)] = sp[k];
  }
  return t;
}

// Arbitrary 32-bit patterns (every NaN payload, subnormals): for ops that copy bits.
Tensor F32Bits(const Shape& shape, uint64_t seed) {
  Tensor t(DType::kF32, shape);
  Rng rng(seed);
  uint32_t* p = t.data_as<uint32_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = static_cast<uint32_t>(rng.Next());
  return t;
}

template <typename T>
Tensor Ints(DType dtype, const Shape& shape, uint64_t seed, int64_t lo, int64_t hi,
            const std::vector<T>& specials = {}) {
  Tensor t(dtype, shape);
  Rng rng(seed);
  T* p = t.data_as<T>();
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(rng.Range(lo, hi));
  for (size_t k = 0; k < specials.size() && static_cast<int64_t>(k) < n; ++k)
    p[SpreadIndex(k, specials.size(), n)] = specials[k];
  return t;
}

Tensor Bools(const Shape& shape, uint64_t seed) {
  Tensor t(DType::kBool, shape);
  Rng rng(seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = static_cast<uint8_t>(rng.Next() & 1);
  return t;
}

constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min(), kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min(), kI64Max = std::numeric_limits<int64_t>::max();

// Integers of `dtype` over its full range, with its extremes, -1, 0 and 1 spread in.
Tensor FullRangeInts(DType dtype, const Shape& shape, uint64_t seed) {
  switch (dtype) {
    case DType::kI8: return Ints<int8_t>(dtype, shape, seed, -128, 127, {-128, 127, -1, 0, 1, -128});
    case DType::kI32:
      return Ints<int32_t>(dtype, shape, seed, kI32Min, kI32Max, {kI32Min, kI32Max, -1, 0, 1, -kI32Max, 16777217});
    case DType::kI64:
      return Ints<int64_t>(dtype, shape, seed, kI64Min, kI64Max,
                           {kI64Min, kI64Max, -1, 0, 1, -kI64Max, (int64_t{1} << 53) + 1, int64_t{1} << 40});
    case DType::kU8: return Ints<uint8_t>(dtype, shape, seed, 0, 255, {255, 0, 1, 128, 127});
    case DType::kI16: return Ints<int16_t>(dtype, shape, seed, -32768, 32767, {-32768, 32767, -1, 0, 1});
    case DType::kU16: return Ints<uint16_t>(dtype, shape, seed, 0, 65535, {65535, 0, 1, 32768, 256});
    case DType::kU32:
      return Ints<uint32_t>(dtype, shape, seed, 0, 0xFFFFFFFFLL, {0xFFFFFFFFu, 0, 1, 0x80000000u, 16777217});
    case DType::kU64:  // the i64 range read as u64: every bit pattern
      return Ints<uint64_t>(dtype, shape, seed, kI64Min, kI64Max,
                            {~uint64_t{0}, 0, 1, uint64_t{1} << 63, (uint64_t{1} << 53) + 1});
    default: return Tensor(dtype, shape);
  }
}

// Small integers (many ties and zeros), with the dtype's extremes spread in.
Tensor SmallInts(DType dtype, const Shape& shape, uint64_t seed) {
  switch (dtype) {
    case DType::kI8: return Ints<int8_t>(dtype, shape, seed, -4, 4, {-128, 127, -1, -128});
    case DType::kI32: return Ints<int32_t>(dtype, shape, seed, -4, 4, {kI32Min, kI32Max, -1, kI32Min});
    case DType::kI64: return Ints<int64_t>(dtype, shape, seed, -4, 4, {kI64Min, kI64Max, -1, kI64Min});
    case DType::kU8: return Ints<uint8_t>(dtype, shape, seed, 0, 4, {255, 254});
    case DType::kI16: return Ints<int16_t>(dtype, shape, seed, -4, 4, {-32768, 32767, -1, -32768});
    case DType::kU16: return Ints<uint16_t>(dtype, shape, seed, 0, 4, {65535, 65534});
    case DType::kU32: return Ints<uint32_t>(dtype, shape, seed, 0, 4, {0xFFFFFFFFu, 0xFFFFFFFEu});
    case DType::kU64: return Ints<uint64_t>(dtype, shape, seed, 0, 4, {~uint64_t{0}, ~uint64_t{1}});
    default: return Tensor(dtype, shape);
  }
}

// Random data of any dtype for data movement: raw bit patterns for f32, full range for ints.
Tensor AnyData(DType dtype, const Shape& shape, uint64_t seed) {
  if (dtype == DType::kF32) return F32Bits(shape, seed);
  if (dtype == DType::kBool) return Bools(shape, seed);
  return FullRangeInts(dtype, shape, seed);
}

// Copies every `period`-th element of `from` into `to` (same dtype and size), so comparisons
// and max/min see equal operands too.
void ShareElements(const Tensor& from, Tensor* to, int64_t period) {
  const int64_t size = DTypeSize(from.dtype());
  for (int64_t i = 0; i < std::min(from.num_elements(), to->num_elements()); i += period) {
    std::memcpy(to->data() + i * size, from.data() + i * size, static_cast<size_t>(size));
  }
}

// Builds one graph: named inputs with their tensors, named outputs.
class CaseBuilder {
 public:
  explicit CaseBuilder(std::string name) { case_.name = std::move(name); }
  Graph& g() { return case_.graph; }
  Value In(const std::string& name, Tensor tensor) {
    Value v = case_.graph.input(name, tensor.dtype(), tensor.shape());
    case_.inputs.insert_or_assign(name, std::move(tensor));
    return v;
  }
  void Out(const std::string& name, Value v) { case_.graph.output(name, v); }
  SelfTestGraph Take() { return std::move(case_); }

 private:
  SelfTestGraph case_;
};

// The dtypes every backend runs besides f16 and bf16, which HalfPrecision covers, and u8, i16,
// u16, u32 and u64, which NewIntegers covers (the CUDA backends have no f64 kernels).
const DType kSelfTestDTypes[] = {DType::kF32, DType::kI32, DType::kI8, DType::kI64, DType::kBool};
const DType kIntDTypes[] = {DType::kI32, DType::kI8, DType::kI64};
const DType kNewIntDTypes[] = {DType::kU8, DType::kI16, DType::kU16, DType::kU32, DType::kU64};

std::string DTypeStr(DType t) { return std::string(DTypeName(t)); }

// ---------------------------------------------------------------------------------------
// The quick set: every op, every accepted dtype, tile-crossing shapes kept small enough for
// the CUDA emulation.

// Every unary float op, by name.
const std::pair<const char*, Value (*)(Value)> kUnaryOps[] = {
    {"neg", neg},         {"abs", abs},     {"relu", relu},         {"exp", exp},
    {"log", log},         {"sqrt", sqrt},   {"rsqrt", rsqrt},       {"tanh", tanh},
    {"sigmoid", sigmoid}, {"erf", erf},     {"gelu", gelu},         {"gelu_tanh", gelu_tanh},
    {"sin", sin},         {"cos", cos},     {"identity", identity}, {"floor", floor},
    {"ceil", ceil},       {"round", round}, {"asin", asin},         {"acos", acos},
    {"atan", atan},       {"sinh", sinh},   {"cosh", cosh},         {"asinh", asinh},
    {"acosh", acosh},     {"atanh", atanh}};

SelfTestGraph UnaryF32(const Shape& shape, const std::string& name) {
  CaseBuilder b(name);
  Value x = b.In("x", F32(shape, 1, 12.0f));
  Value big = b.In("big", F32(shape, 2, 3000.0f));
  for (const auto& [op, f] : kUnaryOps) b.Out(op, f(x));
  // Wide arguments: argument reduction of sin/cos, large logs and roots.
  b.Out("sin_big", sin(big));
  b.Out("cos_big", cos(big));
  b.Out("log_big", log(big));
  b.Out("sqrt_big", sqrt(big));
  b.Out("rsqrt_big", rsqrt(big));
  return b.Take();
}

SelfTestGraph BinaryF32(const Shape& shape, const std::string& name) {
  CaseBuilder b(name);
  const int64_t rows = shape[0], cols = shape[1];
  Tensor ta = F32(shape, 10, 4.0f);
  Tensor tb = F32(shape, 11, 4.0f);
  ShareElements(ta, &tb, 5);
  Value a = b.In("a", ta);
  Value bb = b.In("b", tb);
  Value row = b.In("row", F32({cols}, 12, 4.0f));
  Value col = b.In("col", F32({rows, 1}, 13, 4.0f));
  // Exponents: integers and halves (both signs) besides random values and specials.
  Tensor te = F32(shape, 14, 4.0f);
  for (int64_t i = 0; i < te.num_elements(); i += 3) te.data_as<float>()[i] = static_cast<float>(i % 9 - 4) * 0.5f;
  Value e = b.In("e", te);
  b.Out("add", a + bb);
  b.Out("sub", a - row);
  b.Out("mul", a * col);
  b.Out("div", a / bb);
  b.Out("pow", pow(a, e));
  b.Out("pow_broadcast", pow(row, a));
  b.Out("fmod", fmod(a, bb));
  b.Out("fmod_broadcast", fmod(a, col));
  b.Out("max", maximum(a, bb));
  b.Out("min", minimum(a, row));
  b.Out("equal", equal(a, bb));
  b.Out("not_equal", not_equal(a, bb));
  b.Out("less", less(a, row));
  b.Out("less_equal", less_equal(a, col));
  b.Out("greater", greater(a, bb));
  b.Out("greater_equal", greater_equal(a, bb));
  // Broadcasting on both sides and across ranks: [7, 1, 33] op [5, 1] -> [7, 5, 33].
  Value p = b.In("p", F32({7, 1, 33}, 15, 4.0f));
  Value q = b.In("q", F32({5, 1}, 16, 4.0f));
  b.Out("sub_3d", p - q);
  b.Out("div_3d", q / p);
  return b.Take();
}

SelfTestGraph IntegerArithmetic() {
  CaseBuilder b("elementwise_int");
  uint64_t seed = 20;
  for (DType t : kIntDTypes) {
    const std::string n = DTypeStr(t);
    Tensor ta = FullRangeInts(t, {19, 37}, seed++);
    Tensor tb = SmallInts(t, {19, 37}, seed++);  // zeros and -1 as divisors, extremes too
    Tensor tc = FullRangeInts(t, {19, 37}, seed++);
    ShareElements(ta, &tc, 4);
    Value a = b.In(n + "_a", ta);
    Value s = b.In(n + "_b", tb);
    Value c = b.In(n + "_c", tc);
    Value row = b.In(n + "_row", FullRangeInts(t, {37}, seed++));
    b.Out(n + "_add", a + c);
    b.Out(n + "_sub", a - row);
    b.Out(n + "_mul", a * c);
    b.Out(n + "_mul_small", a * s);
    b.Out(n + "_div", a / s);
    b.Out(n + "_div_full", c / a);
    b.Out(n + "_fmod", fmod(a, s));
    b.Out(n + "_pow", pow(a, s));  // negative exponents and 0^0 among the small ints
    b.Out(n + "_max", maximum(a, c));
    b.Out(n + "_min", minimum(a, row));
    b.Out(n + "_neg", neg(a));
    b.Out(n + "_abs", abs(a));
    b.Out(n + "_relu", relu(a));
    b.Out(n + "_equal", equal(a, c));
    b.Out(n + "_not_equal", not_equal(a, c));
    b.Out(n + "_less", less(a, c));
    b.Out(n + "_less_equal", less_equal(a, row));
    b.Out(n + "_greater", greater(a, c));
    b.Out(n + "_greater_equal", greater_equal(a, c));
  }
  return b.Take();
}

SelfTestGraph LogicAndWhere() {
  CaseBuilder b("logic_where");
  Value p = b.In("p", Bools({13, 40}, 30));
  Value q = b.In("q", Bools({40}, 31));
  b.Out("not", logical_not(p));
  b.Out("and", logical_and(p, q));
  b.Out("or", logical_or(p, q));
  b.Out("xor", logical_xor(p, q));
  b.Out("bool_equal", equal(p, q));
  b.Out("bool_not_equal", not_equal(p, q));
  b.Out("bool_less", less(p, q));
  b.Out("bool_less_equal", less_equal(p, q));
  b.Out("bool_greater", greater(p, q));
  b.Out("bool_greater_equal", greater_equal(p, q));
  uint64_t seed = 32;
  for (DType t : kSelfTestDTypes) {
    const std::string n = DTypeStr(t);
    Tensor ta = t == DType::kF32 ? F32({13, 40}, seed++, 3.0f) : AnyData(t, {13, 40}, seed++);
    Value a = b.In(n + "_a", ta);
    Value col = b.In(n + "_col", AnyData(t, {13, 1}, seed++));
    b.Out("where_" + n, where(p, a, col));
    b.Out("where_row_cond_" + n, where(q, col, a));
  }
  return b.Take();
}

SelfTestGraph Casts() {
  CaseBuilder b("casts");
  const Shape shape = {13, 61};
  // Fractions (round toward zero), out-of-range values (saturate) and NaN for f32 sources.
  Tensor f = F32(shape, 40, 3e9f);
  const float extra[] = {3.7f, -3.7f, 0.5f, -0.5f, 127.5f, -128.9f, 300.0f, -300.0f, 2147483520.0f, 1e19f, -1e19f};
  for (size_t i = 0; i < std::size(extra); ++i) f.data_as<float>()[100 + 11 * i] = extra[i];
  Tensor small = F32({61}, 41, 200.0f, false);
  std::map<DType, Value> sources = {{DType::kF32, b.In("f32", f)},
                                    {DType::kI32, b.In("i32", FullRangeInts(DType::kI32, shape, 42))},
                                    {DType::kI8, b.In("i8", FullRangeInts(DType::kI8, shape, 43))},
                                    {DType::kI64, b.In("i64", FullRangeInts(DType::kI64, shape, 44))},
                                    {DType::kBool, b.In("bool", Bools(shape, 45))}};
  for (const auto& [from, x] : sources) {
    for (DType to : kSelfTestDTypes) b.Out(DTypeStr(from) + "_to_" + DTypeStr(to), cast(x, to));
  }
  // In-range values for the narrow integer types (the full-range input saturates mostly).
  Value s = b.In("f32_small", small);
  b.Out("f32_small_to_i8", cast(s, DType::kI8));
  return b.Take();
}

SelfTestGraph Reductions() {
  CaseBuilder b("reductions");
  // Rows longer than one 4096-term chunk (multi-chunk path), columns likewise.
  Value rows = b.In("rows", F32({6, 4500}, 50, 100.0f, false));
  b.Out("sum_rows", reduce_sum(rows, {1}));
  b.Out("mean_rows", reduce_mean(rows, {1}, true));
  b.Out("max_rows", reduce_max(rows, {1}));
  b.Out("argmax_rows", argmax(rows, 1));
  Value cols = b.In("cols", F32({4200, 5}, 51, 100.0f, false));
  b.Out("sum_cols", reduce_sum(cols, {0}));
  b.Out("mean_cols", reduce_mean(cols, {0}, true));
  b.Out("min_cols", reduce_min(cols, {0}));
  b.Out("argmax_cols", argmax(cols, 0, true));
  // Non-adjacent reduced axes, all axes, keepdims.
  Value x3 = b.In("x3", F32({4, 33, 40}, 52, 10.0f, false));
  b.Out("sum_outer_inner", reduce_sum(x3, {0, 2}));
  b.Out("sum_all", reduce_sum(x3, {}));
  b.Out("max_middle", reduce_max(x3, {1}, true));
  b.Out("min_outer", reduce_min(x3, {0, 1}));
  b.Out("mean_middle", reduce_mean(x3, {1}));
  // Products of values near 1, so long chains stay finite and every rounding counts.
  Tensor near_one = F32({4, 33, 40}, 55, 0.25f, false);
  for (int64_t i = 0; i < near_one.num_elements(); ++i) near_one.data_as<float>()[i] += 1.0f;
  Value ones = b.In("near_one", std::move(near_one));
  b.Out("prod_inner", reduce_prod(ones, {2}));
  b.Out("prod_outer_inner", reduce_prod(ones, {0, 2}, true));
  b.Out("prod_middle", reduce_prod(ones, {1}));
  // Special values: NaN, infinities, signed zeros.
  Value sp = b.In("specials", F32({9, 37}, 53, 4.0f));
  b.Out("sum_specials", reduce_sum(sp, {1}));
  b.Out("max_specials", reduce_max(sp, {1}));
  b.Out("min_specials", reduce_min(sp, {0}));
  b.Out("prod_specials", reduce_prod(sp, {1}));
  b.Out("argmax_specials", argmax(sp, 1));
  b.Out("argmax_specials_cols", argmax(sp, 0, true));
  // Argmax ties: equal maxima, -0 vs +0, NaN (twice), +inf (twice), a constant row.
  Tensor ties(DType::kF32, {6, 40});
  float* t = ties.data_as<float>();
  for (int i = 0; i < 6 * 40; ++i) t[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  t[0 * 40 + 3] = 9.0f, t[0 * 40 + 30] = 9.0f;
  t[1 * 40 + 5] = FromBits(0x7FC00001), t[1 * 40 + 20] = FromBits(0xFFC00000);
  t[2 * 40 + 7] = std::numeric_limits<float>::infinity(), t[2 * 40 + 8] = std::numeric_limits<float>::infinity();
  for (int i = 0; i < 40; ++i) t[3 * 40 + i] = 1.5f;
  for (int i = 0; i < 40; ++i) t[4 * 40 + i] = (i % 2) ? -0.0f : 0.0f;
  for (int i = 0; i < 40; ++i) t[5 * 40 + i] = -std::numeric_limits<float>::infinity();
  Value tv = b.In("ties", std::move(ties));
  b.Out("argmax_ties", argmax(tv, 1));
  b.Out("argmax_ties_cols", argmax(tv, 0));
  b.Out("max_ties", reduce_max(tv, {1}));
  b.Out("top_k_ties", top_k(tv, 17, 1));
  b.Out("top_k_ties_smallest_cols", top_k(tv, 4, 0, false));
  b.Out("top_k_specials", top_k(sp, 37, 1, false));
  b.Out("cumsum_middle", cumsum(x3, 1));
  b.Out("cumsum_inner_exclusive_reverse", cumsum(x3, 2, true, true));
  b.Out("cumsum_specials", cumsum(sp, 1));
  b.Out("cumsum_specials_cols_reverse", cumsum(sp, 0, false, true));
  // Integers: wrapping sums, extremes, ties.
  uint64_t seed = 54;
  for (DType dt : kIntDTypes) {
    const std::string n = DTypeStr(dt);
    Value full = b.In(n + "_full", FullRangeInts(dt, {33, 70}, seed++));
    Value small = b.In(n + "_small", SmallInts(dt, {33, 70}, seed++));
    b.Out(n + "_sum_rows", reduce_sum(full, {1}));
    b.Out(n + "_sum_cols", reduce_sum(full, {0}, true));
    b.Out(n + "_max", reduce_max(full, {0}));
    b.Out(n + "_min", reduce_min(full, {1}));
    b.Out(n + "_prod", reduce_prod(full, {0}));
    b.Out(n + "_argmax", argmax(small, 1));
    b.Out(n + "_argmax_cols", argmax(small, 0));
    b.Out(n + "_top_k", top_k(small, 9, 1));
    b.Out(n + "_top_k_smallest_cols", top_k(full, 33, 0, false));
    b.Out(n + "_cumsum", cumsum(full, 1));
    b.Out(n + "_cumsum_cols_exclusive", cumsum(full, 0, true));
  }
  Value long_i32 = b.In("i32_long", FullRangeInts(DType::kI32, {2, 5000}, seed++));
  b.Out("i32_sum_long", reduce_sum(long_i32, {1}));
  return b.Take();
}

SelfTestGraph MatMulF32() {
  CaseBuilder b("matmul_f32");
  // M, N just over one 128-row/column tile, K not a multiple of the 8-deep K-tile, a batch,
  // and b broadcast over it.
  Value a = b.In("a", F32({2, 130, 67}, 60, 1.0f, false));
  Value w = b.In("w", F32({67, 129}, 61, 1.0f, false));
  b.Out("batched", matmul(a, w));
  Value v = b.In("v", F32({67}, 62, 1.0f, false));
  b.Out("vector_matrix", matmul(v, w));
  b.Out("matrix_vector", matmul(a, v));
  Value p = b.In("p", F32({2, 1, 7, 9}, 63, 1.0f, false));
  Value q = b.In("q", F32({3, 9, 5}, 64, 1.0f, false));
  b.Out("broadcast_batch", matmul(p, q));
  // N across three column tiles.
  Value wide_a = b.In("wide_a", F32({70, 40}, 69, 1.0f, false));
  Value wide_b = b.In("wide_b", F32({40, 300}, 59, 1.0f, false));
  b.Out("wide", matmul(wide_a, wide_b));
  Value k0a = b.In("k0_a", F32({3, 0}, 65, 1.0f));
  Value k0b = b.In("k0_b", F32({0, 4}, 66, 1.0f));
  b.Out("k0", matmul(k0a, k0b));
  // Special values (NaN, inf, -0, subnormal products) inside the fma chains.
  Value sa = b.In("special_a", F32({9, 20}, 67, 2.0f));
  Value sb = b.In("special_b", F32({20, 11}, 68, 2.0f));
  b.Out("specials", matmul(sa, sb));
  return b.Take();
}

SelfTestGraph MatMulI8() {
  CaseBuilder b("matmul_i8");
  // K = 100 is not a multiple of the 32-byte K-tile; M, N cross 128.
  Value a = b.In("a", FullRangeInts(DType::kI8, {2, 131, 100}, 70));
  Value w = b.In("w", FullRangeInts(DType::kI8, {100, 133}, 71));
  b.Out("batched", matmul_i8(a, w));
  Value v = b.In("v", FullRangeInts(DType::kI8, {100}, 72));
  b.Out("vector_matrix", matmul_i8(v, w));
  // -128 * -128 everywhere: the largest products.
  Tensor lo(DType::kI8, {5, 70});
  std::memset(lo.data(), 0x80, static_cast<size_t>(lo.byte_size()));
  Value l = b.In("min_a", lo);
  Value lw = b.In("min_w", Ints<int8_t>(DType::kI8, {70, 3}, 73, -128, -127));
  b.Out("extremes", matmul_i8(l, lw));
  return b.Take();
}

SelfTestGraph Conv2D() {
  CaseBuilder b("conv2d");
  Value x = b.In("x", F32({2, 6, 19, 17}, 80, 1.0f, false));
  Conv2DOptions grouped;
  grouped.group = 2;
  grouped.strides = {2, 1};
  grouped.pads = {1, 0, 2, 1};
  grouped.dilations = {1, 2};
  Value wg = b.In("w_grouped", F32({8, 3, 3, 3}, 81, 1.0f, false));
  Value bias = b.In("bias", F32({8}, 82, 1.0f, false));
  b.Out("grouped_strided_dilated_bias", conv2d(x, wg, bias, grouped));
  Conv2DOptions depthwise;
  depthwise.group = 6;
  depthwise.pads = {1, 1, 1, 1};
  Value wd = b.In("w_depthwise", F32({6, 1, 3, 3}, 83, 1.0f, false));
  b.Out("depthwise", conv2d(x, wd, depthwise));
  Value w1 = b.In("w_1x1", F32({7, 6, 1, 1}, 84, 1.0f, false));
  b.Out("pointwise", conv2d(x, w1));
  // 400 output positions: more than one 128-wide tile of the implicit GEMM.
  Value x2 = b.In("x_wide", F32({1, 4, 20, 20}, 85, 1.0f, false));
  Value w2 = b.In("w_wide", F32({5, 4, 3, 3}, 86, 1.0f, false));
  Conv2DOptions same;
  same.pads = {1, 1, 1, 1};
  b.Out("padded", conv2d(x2, w2, same));
  // Special values in the chains, including in padded positions' neighbourhoods.
  Value xs = b.In("x_specials", F32({1, 2, 6, 6}, 87, 2.0f));
  Value ws = b.In("w_specials", F32({3, 2, 2, 2}, 88, 2.0f));
  b.Out("specials", conv2d(xs, ws, same));
  return b.Take();
}

SelfTestGraph Pooling() {
  CaseBuilder b("pooling");
  Value x = b.In("x", F32({2, 3, 19, 18}, 90, 4.0f));
  Pool2DOptions strided;
  strided.kernel = {3, 3};
  strided.strides = {2, 2};
  strided.pads = {1, 1, 1, 0};
  Pool2DOptions include_pad = strided;
  include_pad.count_include_pad = true;
  Pool2DOptions dilated;
  dilated.kernel = {2, 2};
  dilated.dilations = {2, 2};
  Pool2DOptions plain;
  plain.kernel = {2, 2};
  plain.strides = {2, 2};
  // Windows lying entirely in the padding.
  Pool2DOptions padding_only;
  padding_only.kernel = {2, 2};
  padding_only.strides = {3, 3};
  padding_only.pads = {2, 2, 2, 2};
  b.Out("max_strided", max_pool2d(x, strided));
  b.Out("max_dilated", max_pool2d(x, dilated));
  b.Out("max_padding_only", max_pool2d(x, padding_only));
  b.Out("avg_strided", avg_pool2d(x, strided));
  b.Out("avg_include_pad", avg_pool2d(x, include_pad));
  b.Out("avg_plain", avg_pool2d(x, plain));
  b.Out("avg_padding_only", avg_pool2d(x, padding_only));
  return b.Take();
}

SelfTestGraph Normalization() {
  CaseBuilder b("normalization");
  // Rows longer than a warp; a row of -inf, one with +inf, one with NaN.
  Tensor t = F32({5, 33}, 100, 20.0f, false);
  float* p = t.data_as<float>();
  for (int i = 0; i < 33; ++i) p[33 + i] = -std::numeric_limits<float>::infinity();
  p[2 * 33 + 4] = std::numeric_limits<float>::infinity();
  p[3 * 33 + 9] = FromBits(0x7FC00001);
  p[4 * 33 + 1] = FromBits(0x00000001);
  Value s1 = b.In("short_rows", t);
  b.Out("softmax_short_rows", softmax(s1, -1));
  b.Out("softmax_columns", softmax(s1, 0));
  // Rows longer than 4096: the multi-launch path.
  Value s2 = b.In("long_rows", F32({3, 4100}, 101, 20.0f, false));
  b.Out("softmax_long_rows", softmax(s2, -1));
  Value s3 = b.In("middle_axis", F32({2, 3, 50}, 102, 10.0f, false));
  b.Out("softmax_middle_axis", softmax(s3, 1));
  // layer_norm: warp rows with bias, long rows, normalization over two dims without bias.
  Value l1 = b.In("ln_x", F32({4, 6, 40}, 103, 5.0f, false));
  Value scale1 = b.In("ln_scale", F32({40}, 104, 1.0f, false));
  Value bias1 = b.In("ln_bias", F32({40}, 105, 1.0f, false));
  b.Out("layer_norm_bias", layer_norm(l1, scale1, bias1, -1, 1e-5f));
  Value scale2 = b.In("ln_scale_2d", F32({6, 40}, 106, 1.0f, false));
  b.Out("layer_norm_two_dims", layer_norm(l1, scale2, 1, 1e-3f));
  Value l2 = b.In("ln_long", F32({2, 4100}, 107, 5.0f, false));
  Value scale3 = b.In("ln_long_scale", F32({4100}, 108, 1.0f, false));
  Value bias3 = b.In("ln_long_bias", F32({4100}, 109, 1.0f, false));
  b.Out("layer_norm_long_rows", layer_norm(l2, scale3, bias3, -1, 1e-5f));
  Value l3 = b.In("ln_specials", F32({3, 48}, 110, 5.0f));
  Value scale4 = b.In("ln_specials_scale", F32({48}, 111, 1.0f, false));
  b.Out("layer_norm_specials", layer_norm(l3, scale4, -1, 0.0f));
  return b.Take();
}

SelfTestGraph DataMovement() {
  CaseBuilder b("data_movement");
  Value idx32 = b.In("indices_i32", Tensor::FromVector<int32_t>(DType::kI32, {2, 3}, {0, 69, -1, -70, 33, 33}));
  Value idx64 = b.In("indices_i64", Tensor::FromVector<int64_t>(DType::kI64, {4}, {44, -45, 0, 2}));
  uint64_t seed = 120;
  for (DType t : kSelfTestDTypes) {
    const std::string n = DTypeStr(t);
    // 45 x 70 crosses the 32 x 32 tiles of the transpose kernel in both dims.
    Value x = b.In(n, AnyData(t, {3, 45, 70}, seed++));
    Value more = b.In(n + "_more", AnyData(t, {3, 5, 70}, seed++));
    Value empty = b.In(n + "_empty", Tensor(t, {3, 0, 70}));
    Value narrow = b.In(n + "_narrow", AnyData(t, {3, 1, 70}, seed++));
    b.Out(n + "_identity", identity(x));
    b.Out(n + "_reshape", reshape(x, {-1, 70}));
    b.Out(n + "_transpose_inner", transpose(x, {0, 2, 1}));
    b.Out(n + "_transpose_rotate", transpose(x, {2, 0, 1}));
    b.Out(n + "_slice", slice(x, {2, 44, 1}, {-100, 0, 70}, {0, 1, 2}, {-1, -3, 2}));
    b.Out(n + "_slice_clamped", slice(x, {-3, 5}, {1000, 9}, {2, 1}));
    b.Out(n + "_concat", concat({x, empty, more, x}, 1));
    b.Out(n + "_gather_i32", gather(x, idx32, 2));
    b.Out(n + "_gather_i64", gather(x, idx64, 1));
    b.Out(n + "_expand", expand(narrow, {2, 3, 4, 70}));
    b.Out(n + "_pad", pad(x, {0, 1, 2, 1, 0, 3}, t == DType::kI8 ? 300.0f : -1.5f));
  }
  return b.Take();
}

// A small transformer block: chained kernels through the memory planner, as real tasks run.
SelfTestGraph TransformerBlock() {
  CaseBuilder b("transformer_block");
  const int64_t T = 12, D = 32, H = 4;
  Value x = b.In("x", F32({T, D}, 130, 1.0f, false));
  auto weight = [&](const char* name, Shape shape, uint64_t seed) { return b.In(name, F32(shape, seed, 0.3f, false)); };
  Value q = reshape(matmul(x, weight("wq", {D, D}, 131)), {T, H, D / H});
  Value k = reshape(matmul(x, weight("wk", {D, D}, 132)), {T, H, D / H});
  Value v = reshape(matmul(x, weight("wv", {D, D}, 133)), {T, H, D / H});
  Value scores = matmul(transpose(q, {1, 0, 2}), transpose(k, {1, 2, 0})) * b.g().scalar(0.35355339f);
  Value attn = transpose(matmul(softmax(scores, -1), transpose(v, {1, 0, 2})), {1, 0, 2});
  Value h = reshape(attn, {T, D}) + x;
  h = layer_norm(h, weight("ln_scale", {D}, 134), weight("ln_bias", {D}, 135));
  Value ff = gelu(matmul(h, weight("w1", {D, 2 * D}, 136)) + weight("b1", {2 * D}, 137));
  b.Out("y", matmul(ff, weight("w2", {2 * D, D}, 138)) + h);
  return b.Take();
}

// f16 and bf16 (DETERMINISM.md 1.3, 1.4): every op on 16-bit operands, whose conversions a GPU
// build compiles from the same integer-only source as the CPU's; raw bit patterns (NaN payloads,
// subnormals, infinities) where ops copy bits or convert, rounded f32 values where they compute.
Tensor Half(DType dtype, const Shape& shape, uint64_t seed, float scale, bool specials = true) {
  const Tensor f = F32(shape, seed, scale, specials);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float v = f.data_as<float>()[i];
    t.data_as<uint16_t>()[i] = dtype == DType::kF16 ? half::F32ToF16(v) : half::F32ToBF16(v);
  }
  return t;
}

Tensor HalfBits(DType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  Rng rng(seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<uint16_t>()[i] = static_cast<uint16_t>(rng.Next());
  return t;
}

SelfTestGraph HalfPrecision() {
  CaseBuilder b("f16_bf16");
  uint64_t seed = 150;
  for (DType t : {DType::kF16, DType::kBF16}) {
    const std::string n = DTypeStr(t);
    Value x = b.In(n + "_x", Half(t, {13, 40}, seed++, 6.0f));
    Value y = b.In(n + "_y", Half(t, {13, 40}, seed++, 6.0f));
    Value row = b.In(n + "_row", Half(t, {40}, seed++, 6.0f));
    Value bits = b.In(n + "_bits", HalfBits(t, {13, 40}, seed++));
    for (const auto& [op, f] : kUnaryOps) b.Out(n + "_" + op, f(x));
    b.Out(n + "_add", x + y);
    b.Out(n + "_sub", x - row);
    b.Out(n + "_mul", bits * y);
    b.Out(n + "_div", x / y);
    b.Out(n + "_pow", pow(x, y));
    b.Out(n + "_fmod", fmod(x, row));
    b.Out(n + "_max", maximum(x, bits));
    b.Out(n + "_min", minimum(x, row));
    b.Out(n + "_equal", equal(x, bits));
    b.Out(n + "_not_equal", not_equal(x, y));
    b.Out(n + "_less", less(x, row));
    b.Out(n + "_less_equal", less_equal(x, y));
    b.Out(n + "_greater", greater(bits, y));
    b.Out(n + "_greater_equal", greater_equal(x, y));
    b.Out(n + "_where", where(less(x, y), bits, row));
    // Casts: from every 16-bit pattern to each dtype, and every dtype to this one.
    for (DType to : kSelfTestDTypes) b.Out(n + "_to_" + DTypeStr(to), cast(bits, to));
    for (DType to : {DType::kF16, DType::kBF16}) b.Out(n + "_to_" + DTypeStr(to), cast(bits, to));
    b.Out("f32_to_" + n, cast(b.In(n + "_from_f32", F32({13, 40}, seed++, 7e4f)), t));
    for (DType from : kIntDTypes) {
      b.Out(DTypeStr(from) + "_to_" + n,
            cast(b.In(n + "_from_" + DTypeStr(from), FullRangeInts(from, {40}, seed++)), t));
    }
    b.Out("bool_to_" + n, cast(b.In(n + "_from_bool", Bools({40}, seed++)), t));
    // Reductions, accumulated in f32.
    b.Out(n + "_sum", reduce_sum(x, {1}));
    b.Out(n + "_mean", reduce_mean(x, {0}, true));
    b.Out(n + "_reduce_max", reduce_max(bits, {1}));
    b.Out(n + "_reduce_min", reduce_min(x, {0}));
    b.Out(n + "_prod", reduce_prod(b.In(n + "_near_one", Half(t, {13, 40}, seed++, 1.25f, false)), {1}));
    b.Out(n + "_argmax", argmax(bits, 1));
    b.Out(n + "_top_k", top_k(x, 5, 1));
    b.Out(n + "_top_k_smallest", top_k(bits, 3, 0, false));
    b.Out(n + "_cumsum", cumsum(x, 1));
    b.Out(n + "_cumsum_exclusive_reverse", cumsum(x, 0, true, true));
    // Linear algebra and NN ops; the 130 x 129 output is over one block of rows (two blocks).
    Value w = b.In(n + "_w", Half(t, {67, 129}, seed++, 1.0f, false));
    b.Out(n + "_matmul", matmul(b.In(n + "_a", Half(t, {130, 67}, seed++, 1.0f, false)), w));
    // Each input in its own statement: the order of a call's arguments is unspecified, and the
    // seeds must not depend on the compiler.
    Value p = b.In(n + "_p", Half(t, {2, 5, 9}, seed++, 2.0f));
    Value q = b.In(n + "_q", Half(t, {2, 9, 4}, seed++, 2.0f));
    b.Out(n + "_matmul_batched", matmul(p, q));
    Value img = b.In(n + "_img", Half(t, {2, 4, 9, 8}, seed++, 2.0f));
    Conv2DOptions grouped;
    grouped.group = 2;
    grouped.pads = {1, 0, 1, 1};
    Value cw = b.In(n + "_cw", Half(t, {6, 2, 3, 3}, seed++, 1.0f, false));
    Value cb = b.In(n + "_cb", Half(t, {6}, seed++, 1.0f, false));
    b.Out(n + "_conv2d", conv2d(img, cw, cb, grouped));
    Pool2DOptions pool;
    pool.kernel = {2, 2};
    pool.strides = {2, 2};
    pool.pads = {0, 0, 1, 0};
    b.Out(n + "_max_pool", max_pool2d(img, pool));
    b.Out(n + "_avg_pool", avg_pool2d(img, pool));
    b.Out(n + "_softmax", softmax(x, -1));
    b.Out(n + "_layer_norm", layer_norm(x, row, b.In(n + "_ln_bias", Half(t, {40}, seed++, 1.0f)), -1, 1e-5f));
    // Bit copies of every pattern.
    Value idx = b.In(n + "_indices", Tensor::FromVector<int64_t>(DType::kI64, {3}, {39, -1, 4}));
    b.Out(n + "_reshape", reshape(bits, {-1, 20}));
    b.Out(n + "_transpose", transpose(bits, {1, 0}));
    b.Out(n + "_slice", slice(bits, {12, 1}, {-100, 40}, {0, 1}, {-2, 3}));
    b.Out(n + "_concat", concat({bits, x}, 0));
    b.Out(n + "_gather", gather(bits, idx, 1));
    b.Out(n + "_expand", expand(row, {3, 40}));
    b.Out(n + "_pad", pad(bits, {1, 0, 0, 2}, 0.1f));
  }
  return b.Take();
}

// u8, i16, u16, u32 and u64: wrapping arithmetic (16-bit products that would overflow a
// promoted int), division by zero, comparisons, casts to and from every other dtype, the
// reductions and cumsum, and the bit-copying ops with pad's converted fill.
SelfTestGraph NewIntegers() {
  CaseBuilder b("integers_u8_i16_u16_u32_u64");
  uint64_t seed = 170;
  Value f = b.In("f32", F32({23, 37}, seed++, 7e4f));
  Value cond = b.In("cond", Bools({23, 37}, seed++));
  Value idx = b.In("indices", Tensor::FromVector<int64_t>(DType::kI64, {3}, {36, -1, 4}));
  for (DType t : kNewIntDTypes) {
    const std::string n = DTypeStr(t);
    Tensor ta = FullRangeInts(t, {23, 37}, seed++);
    Tensor tc = FullRangeInts(t, {23, 37}, seed++);
    ShareElements(ta, &tc, 4);
    Value a = b.In(n + "_a", ta);
    Value c = b.In(n + "_c", tc);
    Value s = b.In(n + "_small", SmallInts(t, {23, 37}, seed++));  // zeros as divisors
    Value row = b.In(n + "_row", FullRangeInts(t, {37}, seed++));
    b.Out(n + "_add", a + c);
    b.Out(n + "_sub", a - row);
    b.Out(n + "_mul", a * c);
    b.Out(n + "_div", a / s);
    b.Out(n + "_div_full", c / a);
    b.Out(n + "_fmod", fmod(a, s));
    b.Out(n + "_pow", pow(a, s));
    b.Out(n + "_max", maximum(a, c));
    b.Out(n + "_min", minimum(a, row));
    b.Out(n + "_neg", neg(a));
    b.Out(n + "_abs", abs(a));
    b.Out(n + "_relu", relu(a));
    b.Out(n + "_equal", equal(a, c));
    b.Out(n + "_not_equal", not_equal(a, c));
    b.Out(n + "_less", less(a, row));
    b.Out(n + "_less_equal", less_equal(a, c));
    b.Out(n + "_greater", greater(a, row));
    b.Out(n + "_greater_equal", greater_equal(a, c));
    b.Out(n + "_where", where(cond, a, row));
    b.Out("f32_to_" + n, cast(f, t));
    for (DType to : kSelfTestDTypes) b.Out(n + "_to_" + DTypeStr(to), cast(a, to));
    for (DType to : kNewIntDTypes) {
      if (to != t) b.Out(n + "_to_" + DTypeStr(to), cast(a, to));
    }
    for (DType to : {DType::kF16, DType::kBF16}) b.Out(n + "_to_" + DTypeStr(to), cast(a, to));
    b.Out(n + "_sum_rows", reduce_sum(a, {1}));
    b.Out(n + "_sum_cols", reduce_sum(a, {0}, true));
    b.Out(n + "_reduce_max", reduce_max(a, {0}));
    b.Out(n + "_reduce_min", reduce_min(a, {1}));
    b.Out(n + "_prod", reduce_prod(a, {0}));
    b.Out(n + "_cumsum", cumsum(a, 1));
    b.Out(n + "_cumsum_cols_exclusive_reverse", cumsum(a, 0, true, true));
    b.Out(n + "_identity", identity(a));
    b.Out(n + "_reshape", reshape(a, {-1, 23}));
    b.Out(n + "_transpose", transpose(a, {1, 0}));
    b.Out(n + "_slice", slice(a, {22, 1}, {-100, 37}, {0, 1}, {-2, 3}));
    b.Out(n + "_concat", concat({a, c}, 0));
    b.Out(n + "_gather", gather(a, idx, 1));
    b.Out(n + "_expand", expand(row, {3, 37}));
    b.Out(n + "_pad", pad(a, {1, 0, 0, 2}, t == DType::kU8 ? 300.0f : -1.5f));
  }
  return b.Take();
}

// ---------------------------------------------------------------------------------------
// Large shapes (full set only): long reductions and rows, big GEMMs and convolutions.

// 1.2M elements: more than one pass of the elementwise grid of a 132-SM GPU (8 blocks of 256
// threads x 4 elements per SM), so the grid-stride loops run there too.
SelfTestGraph GridStride() {
  CaseBuilder b("elementwise_grid_stride");
  Value x = b.In("x", F32({600, 2001}, 190, 8.0f));
  Value y = b.In("y", F32({600, 2001}, 191, 8.0f));
  Value row = b.In("row", F32({2001}, 192, 8.0f));
  b.Out("mul_broadcast", x * row);
  b.Out("where", where(less(x, y), x, row));
  b.Out("cast", cast(y, DType::kI32));
  return b.Take();
}

SelfTestGraph ReductionsLarge() {
  CaseBuilder b("reductions_large");
  Value rows = b.In("rows", F32({3, 70001}, 200, 100.0f, false));
  b.Out("sum_rows", reduce_sum(rows, {1}));
  b.Out("mean_rows", reduce_mean(rows, {1}));
  b.Out("max_rows", reduce_max(rows, {1}));
  b.Out("argmax_rows", argmax(rows, 1));
  Value cols = b.In("cols", F32({9000, 33}, 201, 100.0f, false));
  b.Out("sum_cols", reduce_sum(cols, {0}));
  b.Out("min_cols", reduce_min(cols, {0}));
  b.Out("argmax_cols", argmax(cols, 0));
  Value all = b.In("all", F32({300, 517}, 202, 10.0f, false));
  b.Out("sum_all", reduce_sum(all, {}));
  return b.Take();
}

SelfTestGraph MatMulF32Large() {
  CaseBuilder b("matmul_f32_large");
  Value a = b.In("a", F32({2, 260, 300}, 210, 1.0f, false));
  Value w = b.In("w", F32({300, 200}, 211, 1.0f, false));
  b.Out("batched", matmul(a, w));
  Value la = b.In("long_k_a", F32({8, 4100}, 212, 1.0f, false));
  Value lb = b.In("long_k_b", F32({4100, 24}, 213, 1.0f, false));
  b.Out("long_k", matmul(la, lb));
  return b.Take();
}

SelfTestGraph MatMulI8Large() {
  CaseBuilder b("matmul_i8_large");
  Value a = b.In("a", FullRangeInts(DType::kI8, {260, 1000}, 220));
  Value w = b.In("w", FullRangeInts(DType::kI8, {1000, 200}, 221));
  b.Out("y", matmul_i8(a, w));
  return b.Take();
}

SelfTestGraph Conv2DLarge() {
  CaseBuilder b("conv2d_large");
  Value x = b.In("x", F32({2, 16, 40, 40}, 230, 1.0f, false));
  Value w = b.In("w", F32({32, 16, 3, 3}, 231, 0.5f, false));
  Value bias = b.In("bias", F32({32}, 232, 1.0f, false));
  Conv2DOptions same;
  same.pads = {1, 1, 1, 1};
  b.Out("y", conv2d(x, w, bias, same));
  Pool2DOptions pool;
  pool.kernel = {3, 3};
  pool.strides = {2, 2};
  pool.pads = {1, 1, 1, 1};
  b.Out("max_pool", max_pool2d(x, pool));
  b.Out("avg_pool", avg_pool2d(x, pool));
  return b.Take();
}

SelfTestGraph NormalizationLarge() {
  CaseBuilder b("normalization_large");
  Value s = b.In("x", F32({4, 10000}, 240, 20.0f, false));
  b.Out("softmax", softmax(s, -1));
  Value l = b.In("ln_x", F32({3, 9000}, 241, 5.0f, false));
  Value scale = b.In("ln_scale", F32({9000}, 242, 1.0f, false));
  Value bias = b.In("ln_bias", F32({9000}, 243, 1.0f, false));
  b.Out("layer_norm", layer_norm(l, scale, bias));
  return b.Take();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

StatusOr<RunResult> RunTraced(const Program& program, const std::map<std::string, Tensor>& inputs,
                              kernels::Backend& backend) {
  ASSIGN_OR_RETURN(auto loaded, LoadedProgram::Load(program, &backend));
  RunOptions options;
  options.trace = true;
  return loaded->Run(inputs, options);
}

std::string HexBits(uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

// "y[17]: expected 0x3f800000, got 0x3f800001 (3 of 1024 elements differ)"
std::string FirstDifference(const NamedTensor& expected, const NamedTensor& got) {
  const Tensor& e = expected.tensor;
  const Tensor& g = got.tensor;
  if (e.dtype() != g.dtype() || e.shape() != g.shape()) {
    return expected.name + ": expected " + std::string(DTypeName(e.dtype())) + ShapeToString(e.shape()) + ", got " +
           std::string(DTypeName(g.dtype())) + ShapeToString(g.shape());
  }
  const int64_t size = DTypeSize(e.dtype());
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < e.num_elements(); ++i) {
    if (std::memcmp(e.data() + i * size, g.data() + i * size, static_cast<size_t>(size)) != 0) {
      if (first < 0) first = i;
      ++count;
    }
  }
  if (first < 0) return expected.name + ": same elements, different hash";
  auto bits = [&](const Tensor& t) {
    uint64_t v = 0;
    std::memcpy(&v, t.data() + first * size, static_cast<size_t>(size));  // little-endian hosts
    return HexBits(v, static_cast<int>(2 * size));
  };
  return expected.name + "[" + std::to_string(first) + "]: expected " + bits(e) + ", got " + bits(g) + " (" +
         std::to_string(count) + " of " + std::to_string(e.num_elements()) + " elements differ)";
}

void Compare(const Program& program, const RunResult& ref, const RunResult& got, SelfTestCase* c) {
  c->result_root_matches = ref.result_root == got.result_root;
  c->trace_root_matches = ref.trace_root == got.trace_root;
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    const bool same = i < got.outputs.size() && got.outputs[i].name == ref.outputs[i].name &&
                      got.outputs[i].hash == ref.outputs[i].hash;
    if (same) continue;
    c->differing_outputs.push_back(ref.outputs[i].name);
    if (c->first_difference.empty() && i < got.outputs.size())
      c->first_difference = FirstDifference(ref.outputs[i], got.outputs[i]);
  }
  const size_t n = std::min(ref.trace.size(), got.trace.size());
  for (size_t i = 0; i < n; ++i) {
    if (ref.trace[i] == got.trace[i]) continue;
    const Instruction& ins = program.instructions[i];
    const Buffer& out = program.buffers[ins.output];
    c->first_differing_op = SelfTestOpMismatch{static_cast<int>(i), ins.op_name, ins.node_label,
                                               std::string(DTypeName(out.dtype)) + ShapeToString(out.shape)};
    break;
  }
  c->passed = c->result_root_matches && c->trace_root_matches && c->differing_outputs.empty() &&
              ref.trace.size() == got.trace.size();
}

}  // namespace

std::string_view SelfTestSizeName(SelfTestSize size) { return size == SelfTestSize::kFull ? "full" : "quick"; }

std::vector<SelfTestGraph> BuildSelfTestGraphs(SelfTestSize size) {
  std::vector<SelfTestGraph> graphs;
  // More elements than one pass of the emulation's grid (8 blocks of 256 threads x 4), so the
  // grid-stride loops run; odd row lengths leave vector tails.
  graphs.push_back(UnaryF32({37, 265}, "elementwise_unary_f32"));
  graphs.push_back(BinaryF32({29, 301}, "elementwise_binary_f32"));
  graphs.push_back(IntegerArithmetic());
  graphs.push_back(LogicAndWhere());
  graphs.push_back(Casts());
  graphs.push_back(Reductions());
  graphs.push_back(MatMulF32());
  graphs.push_back(MatMulI8());
  graphs.push_back(Conv2D());
  graphs.push_back(Pooling());
  graphs.push_back(Normalization());
  graphs.push_back(DataMovement());
  graphs.push_back(TransformerBlock());
  graphs.push_back(HalfPrecision());
  graphs.push_back(NewIntegers());
  if (size == SelfTestSize::kFull) {
    graphs.push_back(UnaryF32({128, 517}, "elementwise_unary_f32_large"));
    graphs.push_back(BinaryF32({128, 517}, "elementwise_binary_f32_large"));
    graphs.push_back(GridStride());
    graphs.push_back(ReductionsLarge());
    graphs.push_back(MatMulF32Large());
    graphs.push_back(MatMulI8Large());
    graphs.push_back(Conv2DLarge());
    graphs.push_back(NormalizationLarge());
  }
  return graphs;
}

std::string SelfTestCase::Problem() const {
  if (passed) return "";
  if (!error.empty()) return "the backend failed: " + error;
  std::string s;
  if (first_differing_op) {
    s = "first differing op #" + std::to_string(first_differing_op->index) + " " + first_differing_op->op + " -> " +
        first_differing_op->output_type + " at " + first_differing_op->node_label;
  } else {
    s = "trace differs";
  }
  if (!differing_outputs.empty()) {
    s += "; " + std::to_string(differing_outputs.size()) + " output(s) differ";
    if (!first_difference.empty()) s += ", " + first_difference;
  }
  return s;
}

int SelfTestReport::failed() const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [](const SelfTestCase& c) { return !c.passed; }));
}

const SelfTestCase* SelfTestReport::first_failure() const {
  for (const SelfTestCase& c : cases) {
    if (!c.passed) return &c;
  }
  return nullptr;
}

StatusOr<SelfTestReport> RunBackendSelfTest(kernels::Backend& candidate, const SelfTestOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  kernels::CpuBackendOptions reference_options;
  reference_options.isa = "portable";
  reference_options.num_threads = 1;
  auto reference = kernels::CpuBackend::Create(reference_options);
  if (!reference.ok()) return reference.status().WithContext("self-test reference backend");

  SelfTestReport report;
  report.candidate = candidate.name();
  report.reference = (*reference)->name() + " x1";
  report.size = options.size;
  for (SelfTestGraph& g : BuildSelfTestGraphs(options.size)) {
    auto program = CompileGraph(g.graph, nullptr, Limits{});
    if (!program.ok())
      return Internal("self-test graph '" + g.name + "' does not compile: " + program.status().message());
    SelfTestCase c;
    c.name = g.name;
    c.ops = static_cast<int>(program->instructions.size());
    auto t0 = std::chrono::steady_clock::now();
    auto expected = RunTraced(*program, g.inputs, **reference);
    if (!expected.ok()) {
      return Internal("self-test graph '" + g.name + "' fails on the reference: " + expected.status().message());
    }
    c.reference_seconds = Seconds(t0);
    t0 = std::chrono::steady_clock::now();
    auto got = RunTraced(*program, g.inputs, candidate);
    c.seconds = Seconds(t0);
    if (got.ok()) {
      Compare(*program, *expected, *got, &c);
    } else {
      c.error = got.status().ToString();
    }
    report.total_ops += c.ops;
    if (options.on_case) options.on_case(c);
    report.cases.push_back(std::move(c));
  }
  report.seconds = Seconds(start);
  return report;
}

DType SelfTestOperandDType(kernels::Op op, const std::vector<DType>& input_dtypes) {
  const size_t operand = op == Op::kWhere ? 1 : 0;
  return operand < input_dtypes.size() ? input_dtypes[operand] : DType::kInvalid;
}

StatusOr<SelfTestCoverage> SelfTestCoverageOf(SelfTestSize size) {
  SelfTestCoverage coverage;
  for (const SelfTestGraph& g : BuildSelfTestGraphs(size)) {
    auto program = CompileGraph(g.graph, nullptr, Limits{});
    if (!program.ok())
      return Internal("self-test graph '" + g.name + "' does not compile: " + program.status().message());
    for (const Instruction& ins : program->instructions) {
      std::vector<DType> dtypes;
      for (int buffer : ins.inputs) dtypes.push_back(program->buffers[buffer].dtype);
      coverage.ops.insert(ins.op);
      coverage.op_dtypes.emplace(ins.op, SelfTestOperandDType(ins.op, dtypes));
      if (ins.op == Op::kCast) coverage.casts.emplace(dtypes[0], program->buffers[ins.output].dtype);
    }
  }
  return coverage;
}

StatusOr<std::vector<std::string>> SelfTestUncoveredOps(SelfTestSize size) {
  ASSIGN_OR_RETURN(SelfTestCoverage coverage, SelfTestCoverageOf(size));
  std::vector<std::string> missing;
  for (const OpSchema& schema : AllOpSchemas()) {
    if (!coverage.ops.count(schema.op)) missing.emplace_back(schema.name);
  }
  return missing;
}

}  // namespace consensor::executor
