// Generates the golden conformance vectors in tests/conformance/vectors/ (committed).
//
//   build/tests/conformance_gen/generate_vectors tests/conformance/vectors
//
// Each vector is a graph, its inputs and the expected hashes. The expected hashes are
// computed with the portable CPU path on one thread, and the generator refuses to write a
// vector unless every other available configuration (AVX2, several thread counts) agrees
// bit for bit. Regenerate only when the specification changes, and review the diff.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <tuple>

#include "common/npy.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/half.h"

using namespace consensor;
using namespace consensor::executor;
namespace fs = std::filesystem;

namespace {

float BitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Values every f32 op must get right: zeros of both signs, infinities, NaNs with several
// payloads and signs, subnormals, extremes, and values near common thresholds.
const std::vector<float>& SpecialValues() {
  static const std::vector<float> v = {0.0f,
                                       -0.0f,
                                       1.0f,
                                       -1.0f,
                                       0.5f,
                                       -0.5f,
                                       2.0f,
                                       -2.0f,
                                       3.0f,
                                       -3.0f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       BitsToFloat(0x7FC00000),
                                       BitsToFloat(0xFFC00000),
                                       BitsToFloat(0x7FC12345),
                                       BitsToFloat(0x7F800001),
                                       BitsToFloat(0x00000001),
                                       BitsToFloat(0x80000001),
                                       BitsToFloat(0x007FFFFF),
                                       BitsToFloat(0x00800000),
                                       std::numeric_limits<float>::max(),
                                       -std::numeric_limits<float>::max(),
                                       88.72f,
                                       88.73f,
                                       -103.0f,
                                       -87.5f,
                                       1e-30f,
                                       -1e-30f,
                                       1e30f,
                                       9.0f,
                                       20.0f,
                                       -20.0f,
                                       0.1f,
                                       1e-7f,
                                       65504.0f,
                                       1e6f,
                                       12345.678f,
                                       -9.5f};
  return v;
}

Tensor F32(const Shape& shape, uint32_t seed, float scale = 2.0f, bool specials = true) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  const auto& sp = SpecialValues();
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    p[i] =
        (specials && i < static_cast<int64_t>(sp.size()) * 3 && (rng() % 3 == 0)) ? sp[rng() % sp.size()] : dist(rng);
  }
  // Guarantee each special appears at least once when there is room.
  if (specials) {
    for (size_t k = 0; k < sp.size() && static_cast<int64_t>(k) * 7 < t.num_elements(); ++k) p[k * 7] = sp[k];
  }
  return t;
}

// f64 values with specials (NaN payloads, infinities, signed zeros, subnormals, ties for
// rounding, values beyond the f32 range) at the front, then random magnitudes.
Tensor F64(const Shape& shape, uint32_t seed, double scale = 4.0) {
  Tensor t(DType::kF64, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  const uint64_t special_bits[] = {0x0000000000000000ull,
                                   0x8000000000000000ull,
                                   0x7FF0000000000000ull,
                                   0xFFF0000000000000ull,
                                   0x7FF8000000000000ull,
                                   0xFFF8000000000123ull,
                                   0x7FF0000000000001ull,
                                   0x0000000000000001ull,
                                   0x800FFFFFFFFFFFFFull,
                                   0x3FE0000000000000ull /* 0.5 */,
                                   0x4004000000000000ull /* 2.5 */,
                                   0x47EFFFFFE0000000ull /* FLT_MAX + half an f32 ulp */,
                                   0x7FEFFFFFFFFFFFFFull /* DBL_MAX */,
                                   0x3FF0000010000000ull /* f32 tie */,
                                   0x4330000000000001ull /* 2^52 + 1 */,
                                   0xC32FFFFFFFFFFFFFull /* -(2^52 - 0.5) */};
  double* p = t.data_as<double>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = dist(rng);
  for (size_t k = 0;
       k < sizeof(special_bits) / sizeof(special_bits[0]) && static_cast<int64_t>(k) * 5 < t.num_elements(); ++k) {
    std::memcpy(&p[k * 5], &special_bits[k], 8);
  }
  return t;
}

// f16 or bf16 values (DETERMINISM.md 1.3, 1.4): specials first (NaN payloads, infinities,
// signed zeros, subnormals, the largest finite value), then random values of +-scale rounded
// from f32.
Tensor Half(DType dtype, const Shape& shape, uint32_t seed, float scale = 4.0f) {
  Tensor t(dtype, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  const bool f16 = dtype == DType::kF16;
  uint16_t* p = t.data_as<uint16_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    p[i] = f16 ? half::F32ToF16(dist(rng)) : half::F32ToBF16(dist(rng));
  }
  const uint16_t f16_specials[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFD23, 0x7C01, 0x0001, 0x83FF, 0x7BFF};
  const uint16_t bf16_specials[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFA3, 0x7F81, 0x0001, 0x807F, 0x7F7F};
  for (size_t k = 0; k < 10 && static_cast<int64_t>(k) * 5 < t.num_elements(); ++k) {
    p[k * 5] = f16 ? f16_specials[k] : bf16_specials[k];
  }
  return t;
}

template <typename T>
Tensor Ints(DType dtype, const Shape& shape, uint32_t seed, int64_t lo, int64_t hi, std::vector<T> specials = {}) {
  Tensor t(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  T* p = t.data_as<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = static_cast<T>(dist(rng));
  for (size_t k = 0; k < specials.size() && static_cast<int64_t>(k) < t.num_elements(); ++k)
    p[k * 3 % t.num_elements()] = specials[k];
  return t;
}

Tensor Bools(const Shape& shape, uint32_t seed) {
  Tensor t(DType::kBool, shape);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = rng() & 1;
  return t;
}

struct Vector {
  Graph graph;
  std::map<std::string, Tensor> inputs;
};
using Builder = std::function<Vector()>;

// One-input f32 vector: y = f(x).
Builder UnaryF32(std::function<Value(Value)> f, Shape shape = {40, 25}, uint32_t seed = 1, float scale = 8.0f) {
  return [=] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, shape);
    v.graph.output("y", f(x));
    v.inputs.emplace("x", F32(shape, seed, scale));
    return v;
  };
}

Builder BinaryF32(std::function<Value(Value, Value)> f, Shape sa, Shape sb, uint32_t seed = 2) {
  return [=] {
    Vector v;
    Value a = v.graph.input("a", DType::kF32, sa);
    Value b = v.graph.input("b", DType::kF32, sb);
    v.graph.output("y", f(a, b));
    v.inputs.emplace("a", F32(sa, seed));
    v.inputs.emplace("b", F32(sb, seed + 100));
    return v;
  };
}

Builder Binary(DType dtype, std::function<Value(Value, Value)> f, Tensor ta, Tensor tb) {
  return [=] {
    Vector v;
    Value a = v.graph.input("a", dtype, ta.shape());
    Value b = v.graph.input("b", dtype, tb.shape());
    v.graph.output("y", f(a, b));
    v.inputs.emplace("a", ta);
    v.inputs.emplace("b", tb);
    return v;
  };
}

Builder OneInput(Tensor t, std::function<Value(Graph&, Value)> f) {
  return [=] {
    Vector v;
    Value x = v.graph.input("x", t.dtype(), t.shape());
    v.graph.output("y", f(v.graph, x));
    v.inputs.emplace("x", t);
    return v;
  };
}

std::map<std::string, Builder> AllVectors() {
  std::map<std::string, Builder> m;
  const int32_t kMin32 = std::numeric_limits<int32_t>::min(), kMax32 = std::numeric_limits<int32_t>::max();

  // --- elementwise unary f32 (specials everywhere) ---
  m["neg"] = UnaryF32([](Value x) { return neg(x); });
  m["abs"] = UnaryF32([](Value x) { return abs(x); });
  m["relu"] = UnaryF32([](Value x) { return relu(x); });
  m["exp"] = UnaryF32([](Value x) { return exp(x); }, {50, 40}, 3, 100.0f);
  m["log"] = UnaryF32([](Value x) { return log(x); }, {50, 40}, 4, 1000.0f);
  m["sqrt"] = UnaryF32([](Value x) { return sqrt(x); }, {40, 25}, 5, 1000.0f);
  m["rsqrt"] = UnaryF32([](Value x) { return rsqrt(x); }, {40, 25}, 6, 1000.0f);
  m["tanh"] = UnaryF32([](Value x) { return tanh(x); }, {50, 40}, 7, 12.0f);
  m["sigmoid"] = UnaryF32([](Value x) { return sigmoid(x); }, {50, 40}, 8, 30.0f);
  m["erf"] = UnaryF32([](Value x) { return erf(x); }, {50, 40}, 9, 5.0f);
  m["gelu"] = UnaryF32([](Value x) { return gelu(x); }, {50, 40}, 10, 8.0f);
  m["gelu_tanh"] = UnaryF32([](Value x) { return gelu_tanh(x); }, {50, 40}, 11, 8.0f);
  m["sin"] = UnaryF32([](Value x) { return sin(x); }, {50, 40}, 12, 1000.0f);
  m["cos"] = UnaryF32([](Value x) { return cos(x); }, {50, 40}, 13, 1000.0f);
  m["sin_huge_args"] = UnaryF32([](Value x) { return sin(x); }, {20, 20}, 14, 3e37f);
  m["floor_ceil_round"] = [] {
    Vector v;
    Tensor t = F32({40, 25}, 16, 20.0f);
    float* p = t.data_as<float>();
    // Ties and near-ties of round half to even, and the 2^23 boundary.
    const float ties[] = {0.5f,         -0.5f,      1.5f,        -1.5f,      2.5f, -2.5f, 0.49999997f,
                          -0.50000006f, 8388607.5f, -8388607.5f, 8388608.0f, 0.3f, -0.3f};
    for (int i = 0; i < 13; ++i) p[500 + i] = ties[i];
    Value x = v.graph.input("x", DType::kF32, {40, 25});
    v.graph.output("floor", floor(x));
    v.graph.output("ceil", ceil(x));
    v.graph.output("round", round(x));
    v.inputs.emplace("x", t);
    return v;
  };
  m["fmod_f32"] = BinaryF32([](Value a, Value b) { return fmod(a, b); }, {30, 20}, {30, 20}, 27);
  m["fmod_f32_broadcast"] = BinaryF32([](Value a, Value b) { return fmod(a * a, b); }, {3, 1, 50}, {4, 1}, 28);
  m["identity_nan_payloads"] = UnaryF32([](Value x) { return identity(x); }, {10, 10}, 15);

  // --- elementwise binary f32 with broadcasting ---
  m["add"] = BinaryF32([](Value a, Value b) { return a + b; }, {30, 20}, {30, 20});
  m["add_broadcast"] = BinaryF32([](Value a, Value b) { return a + b; }, {3, 1, 5}, {4, 1}, 20);
  m["sub"] = BinaryF32([](Value a, Value b) { return a - b; }, {30, 20}, {20}, 21);
  m["mul"] = BinaryF32([](Value a, Value b) { return a * b; }, {30, 20}, {30, 1}, 22);
  m["div"] = BinaryF32([](Value a, Value b) { return a / b; }, {30, 20}, {30, 20}, 23);
  m["pow"] = BinaryF32([](Value a, Value b) { return pow(a, b); }, {30, 20}, {30, 20}, 24);
  m["max"] = BinaryF32([](Value a, Value b) { return maximum(a, b); }, {30, 20}, {30, 20}, 25);
  m["min"] = BinaryF32([](Value a, Value b) { return minimum(a, b); }, {30, 20}, {1, 20}, 26);
  m["max_signed_zero"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kF32, {4});
    Value b = v.graph.input("b", DType::kF32, {4});
    v.graph.output("max", maximum(a, b));
    v.graph.output("min", minimum(a, b));
    v.inputs.emplace("a", Tensor::FromVector<float>(DType::kF32, {4}, {0.0f, -0.0f, -0.0f, BitsToFloat(0xFFC00001)}));
    v.inputs.emplace("b", Tensor::FromVector<float>(DType::kF32, {4}, {-0.0f, 0.0f, -0.0f, 1.0f}));
    return v;
  };
  m["compare"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kF32, {30, 20});
    Value b = v.graph.input("b", DType::kF32, {30, 20});
    v.graph.output("eq", equal(a, b));
    v.graph.output("ne", not_equal(a, b));
    v.graph.output("lt", less(a, b));
    v.graph.output("le", less_equal(a, b));
    v.graph.output("gt", greater(a, b));
    v.graph.output("ge", greater_equal(a, a));
    v.inputs.emplace("a", F32({30, 20}, 30));
    v.inputs.emplace("b", F32({30, 20}, 30 + 1));
    return v;
  };
  m["logical_where"] = [] {
    Vector v;
    Value p = v.graph.input("p", DType::kBool, {6, 7});
    Value q = v.graph.input("q", DType::kBool, {7});
    Value a = v.graph.input("a", DType::kF32, {6, 7});
    Value b = v.graph.input("b", DType::kF32, {1, 7});
    Value c = logical_xor(logical_and(p, q), logical_or(logical_not(p), q));
    v.graph.output("c", c);
    v.graph.output("y", where(c, a, b));
    v.inputs.emplace("p", Bools({6, 7}, 31));
    v.inputs.emplace("q", Bools({7}, 32));
    v.inputs.emplace("a", F32({6, 7}, 33));
    v.inputs.emplace("b", F32({1, 7}, 34));
    return v;
  };

  // --- integers: two's complement wraparound, no traps ---
  m["i32_arith"] = [=] {
    Vector v;
    Tensor a = Ints<int32_t>(DType::kI32, {16, 16}, 40, -1000, 1000, {kMin32, kMax32, kMin32, 7, 0, -7});
    Tensor b = Ints<int32_t>(DType::kI32, {16, 16}, 41, -1000, 1000, {-1, 1, 0, 0, 3, -2});
    Value x = v.graph.input("a", DType::kI32, {16, 16});
    Value y = v.graph.input("b", DType::kI32, {16, 16});
    v.graph.output("add", x + y);
    v.graph.output("sub", x - y);
    v.graph.output("mul", x * y);
    v.graph.output("div", x / y);
    v.graph.output("max", maximum(x, y));
    v.graph.output("neg", neg(x));
    v.graph.output("abs", abs(x));
    v.graph.output("relu", relu(x));
    v.graph.output("lt", less(x, y));
    v.inputs.emplace("a", a);
    v.inputs.emplace("b", b);
    return v;
  };
  m["fmod_int"] = [=] {
    Vector v;
    Tensor a32 = Ints<int32_t>(DType::kI32, {16, 16}, 46, kMin32, kMax32, {kMin32, kMax32, kMin32, 7, -7, 0});
    Tensor b32 = Ints<int32_t>(DType::kI32, {16, 16}, 47, -1000, 1000, {-1, 1, 0, 3, 3, 5});
    Tensor a8 = Ints<int8_t>(DType::kI8, {64}, 48, -128, 127, {-128, 127, -7});
    Tensor b8 = Ints<int8_t>(DType::kI8, {64}, 49, -10, 10, {-1, 0, 2});
    Tensor a64 = Ints<int64_t>(DType::kI64, {64}, 50, -(int64_t{1} << 62), int64_t{1} << 62,
                               {std::numeric_limits<int64_t>::min(), -9});
    Tensor b64 = Ints<int64_t>(DType::kI64, {64}, 51, -100000, 100000, {-1, 4});
    for (const auto& [suffix, dtype, shape] :
         {std::tuple{"32", DType::kI32, Shape{16, 16}}, {"8", DType::kI8, Shape{64}}, {"64", DType::kI64, Shape{64}}}) {
      Value a = v.graph.input(std::string("a") + suffix, dtype, shape);
      Value b = v.graph.input(std::string("b") + suffix, dtype, shape);
      v.graph.output(std::string("i") + suffix, fmod(a, b));
    }
    v.inputs.emplace("a32", a32);
    v.inputs.emplace("b32", b32);
    v.inputs.emplace("a8", a8);
    v.inputs.emplace("b8", b8);
    v.inputs.emplace("a64", a64);
    v.inputs.emplace("b64", b64);
    return v;
  };
  m["i8_arith"] = Binary(
      DType::kI8, [](Value a, Value b) { return a * b + a - b; },
      Ints<int8_t>(DType::kI8, {8, 32}, 42, -128, 127, {-128, 127, -128}),
      Ints<int8_t>(DType::kI8, {8, 32}, 43, -128, 127, {-1, 127, -128}));
  m["i64_arith"] = Binary(
      DType::kI64, [](Value a, Value b) { return minimum(a * b, a / b); },
      Ints<int64_t>(DType::kI64, {8, 8}, 44, -(int64_t{1} << 40), int64_t{1} << 40,
                    {std::numeric_limits<int64_t>::min(), 5}),
      Ints<int64_t>(DType::kI64, {8, 8}, 45, -100, 100, {-1, 0}));

  // --- casts ---
  m["cast_from_f32"] = [] {
    Vector v;
    Tensor t = F32({20, 20}, 50, 3e9f);
    float* p = t.data_as<float>();
    const float extra[] = {2147483648.0f, -2147483904.0f, 3.7f, -3.7f, 0.5f, -0.5f, 127.5f, -128.9f, 300.0f};
    for (int i = 0; i < 9; ++i) p[100 + i] = extra[i];
    Value x = v.graph.input("x", DType::kF32, {20, 20});
    v.graph.output("i32", cast(x, DType::kI32));
    v.graph.output("i8", cast(x, DType::kI8));
    v.graph.output("i64", cast(x, DType::kI64));
    v.graph.output("bool", cast(x, DType::kBool));
    v.inputs.emplace("x", t);
    return v;
  };
  m["cast_from_int"] = [=] {
    Vector v;
    Tensor t = Ints<int32_t>(DType::kI32, {10, 10}, 51, kMin32, kMax32,
                             {16777217, 16777219, -16777217, kMin32, kMax32, 0, 255, 128});
    Value x = v.graph.input("x", DType::kI32, {10, 10});
    v.graph.output("f32", cast(x, DType::kF32));
    v.graph.output("i8", cast(x, DType::kI8));
    v.graph.output("i64", cast(x, DType::kI64));
    v.graph.output("bool_f32", cast(cast(x, DType::kBool), DType::kF32));
    v.inputs.emplace("x", t);
    return v;
  };

  // --- reductions: canonical sum order, NaN, signed zeros, empty ---
  m["reduce_prod"] = [] {
    Vector v;
    // Values near 1 keep long chains finite, so every rounding of the sequential order shows;
    // a second input carries the specials (NaN, inf, signed zeros, subnormals).
    Tensor near_one = F32({6, 50, 9}, 61, 0.3f, false);
    for (int64_t i = 0; i < near_one.num_elements(); ++i) near_one.data_as<float>()[i] += 1.0f;
    Value x = v.graph.input("x", DType::kF32, {6, 50, 9});
    Value s = v.graph.input("s", DType::kF32, {12, 40});
    v.graph.output("inner", reduce_prod(x, {2}));
    v.graph.output("middle", reduce_prod(x, {1}, true));
    v.graph.output("outer_inner", reduce_prod(x, {0, 2}));
    v.graph.output("all", reduce_prod(x, {}));
    v.graph.output("specials", reduce_prod(s, {1}));
    v.inputs.emplace("x", near_one);
    v.inputs.emplace("s", F32({12, 40}, 62, 3.0f));
    return v;
  };
  m["reduce_prod_int"] = [=] {
    Vector v;
    Tensor a = Ints<int32_t>(DType::kI32, {8, 30}, 63, -9, 9, {kMin32, kMax32, -1});
    Tensor b = Ints<int64_t>(DType::kI64, {8, 30}, 64, -(int64_t{1} << 20), int64_t{1} << 20, {});
    Tensor c = Ints<int8_t>(DType::kI8, {8, 30}, 65, -128, 127, {});
    Value x = v.graph.input("a", DType::kI32, {8, 30});
    Value y = v.graph.input("b", DType::kI64, {8, 30});
    Value z = v.graph.input("c", DType::kI8, {8, 30});
    v.graph.output("i32", reduce_prod(x, {1}));
    v.graph.output("i64", reduce_prod(y, {0}));
    v.graph.output("i8", reduce_prod(z, {1}));
    v.inputs.emplace("a", a);
    v.inputs.emplace("b", b);
    v.inputs.emplace("c", c);
    return v;
  };
  m["reduce_sum_axes"] = OneInput(F32({5, 7, 9}, 60, 2.0f, false), [](Graph&, Value x) {
    return reduce_sum(x, {1}) + reduce_sum(reduce_sum(x, {0, 2}, true), {1});
  });
  m["reduce_sum_all"] = OneInput(F32({5, 7, 9}, 61), [](Graph&, Value x) { return reduce_sum(x, {}); });
  m["reduce_sum_long_row"] =
      OneInput(F32({70001}, 62, 100.0f, false), [](Graph&, Value x) { return reduce_sum(x, {0}); });
  m["reduce_sum_columns"] =
      OneInput(F32({300, 17}, 63, 1e4f, false), [](Graph&, Value x) { return reduce_sum(x, {0}); });
  m["reduce_sum_rows_4097"] =
      OneInput(F32({3, 4097}, 64, 1e3f, false), [](Graph&, Value x) { return reduce_sum(x, {1}, true); });
  m["reduce_mean"] = OneInput(F32({6, 100}, 65, 3.0f, false), [](Graph&, Value x) { return reduce_mean(x, {1}); });
  m["reduce_max_min_nan"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {40, 25});
    v.graph.output("max", reduce_max(x, {1}));
    v.graph.output("min", reduce_min(x, {0}));
    v.graph.output("argmax", argmax(x, 1));
    v.inputs.emplace("x", F32({40, 25}, 66));
    return v;
  };
  m["reduce_signed_zero"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {3, 2});
    v.graph.output("sum", reduce_sum(x, {1}));
    v.graph.output("max", reduce_max(x, {1}));
    v.graph.output("min", reduce_min(x, {1}));
    v.inputs.emplace("x", Tensor::FromVector<float>(DType::kF32, {3, 2}, {-0.0f, -0.0f, 0.0f, -0.0f, -0.0f, 0.0f}));
    return v;
  };
  m["reduce_empty"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {0, 3});
    v.graph.output("sum", reduce_sum(x, {0}));
    v.graph.output("max", reduce_max(x, {0}));
    v.graph.output("mean", reduce_mean(x, {0}));
    v.inputs.emplace("x", Tensor(DType::kF32, {0, 3}));
    return v;
  };
  m["reduce_int"] = OneInput(Ints<int32_t>(DType::kI32, {9, 11}, 67, kMin32, kMax32), [](Graph&, Value x) {
    return reduce_sum(x, {0}) + reduce_max(x, {0}) - reduce_min(x, {0});
  });
  m["argmax_ties"] = OneInput(
      Tensor::FromVector<float>(DType::kF32, {2, 5},
                                {1, 3, 3, -0.0f, 0.0f, 2, BitsToFloat(0x7FC00000), 5, BitsToFloat(0xFFC00000), 5}),
      [](Graph&, Value x) { return argmax(x, 1, true); });
  m["top_k"] = [=] {
    Vector v;
    // f32 with NaNs of several payloads, infinities and signed zeros; integers from a small
    // range, so most values tie and the lower-index-first rule shows.
    Value x = v.graph.input("x", DType::kF32, {6, 40, 5});
    Value a = v.graph.input("a", DType::kI32, {7, 50});
    Value b = v.graph.input("b", DType::kI64, {50, 7});
    Value c = v.graph.input("c", DType::kI8, {3, 64});
    v.graph.output("largest_middle", top_k(x, 11, 1));
    v.graph.output("smallest_inner", top_k(x, 5, 2, false));
    v.graph.output("all_outer", top_k(x, 6, 0));
    v.graph.output("none", top_k(x, 0, 1));
    v.graph.output("i32", top_k(a, 20, 1));
    v.graph.output("i64_smallest", top_k(b, 50, 0, false));
    v.graph.output("i8", top_k(c, 64, 1));
    v.inputs.emplace("x", F32({6, 40, 5}, 90, 3.0f));
    v.inputs.emplace("a", Ints<int32_t>(DType::kI32, {7, 50}, 91, -3, 3, {kMin32, kMax32}));
    v.inputs.emplace("b", Ints<int64_t>(DType::kI64, {50, 7}, 92, -4, 4, {}));
    v.inputs.emplace("c", Ints<int8_t>(DType::kI8, {3, 64}, 93, -128, 127, {}));
    return v;
  };

  // --- linear algebra ---
  m["matmul"] = BinaryF32([](Value a, Value b) { return matmul(a, b); }, {33, 65}, {65, 17}, 70);
  m["matmul_batched_broadcast"] = BinaryF32([](Value a, Value b) { return matmul(a, b); }, {2, 1, 7, 9}, {3, 9, 5}, 71);
  m["matmul_vector"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kF32, {16});
    Value b = v.graph.input("b", DType::kF32, {16, 5});
    Value c = v.graph.input("c", DType::kF32, {5});
    Value ab = matmul(a, b);
    v.graph.output("ab", ab);
    v.graph.output("abc", matmul(ab, c));
    v.graph.output("bc", matmul(b, c));
    v.inputs.emplace("a", F32({16}, 72, 2, false));
    v.inputs.emplace("b", F32({16, 5}, 73, 2, false));
    v.inputs.emplace("c", F32({5}, 74, 2, false));
    return v;
  };
  m["matmul_k0"] = BinaryF32([](Value a, Value b) { return matmul(a, b); }, {3, 0}, {0, 4}, 75);
  m["matmul_large_k"] = BinaryF32([](Value a, Value b) { return matmul(a, b); }, {8, 1500}, {1500, 24}, 76);
  m["matmul_i8"] = Binary(
      DType::kI8, [](Value a, Value b) { return matmul_i8(a, b); },
      Ints<int8_t>(DType::kI8, {2, 19, 300}, 77, -128, 127, {-128, -128}),
      Ints<int8_t>(DType::kI8, {300, 23}, 78, -128, 127, {-128, -128}));

  // --- convolution and pooling ---
  m["conv2d"] = BinaryF32([](Value x, Value w) { return conv2d(x, w); }, {1, 3, 9, 9}, {4, 3, 3, 3}, 80);
  m["conv2d_stride_pad_dilation_bias"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {2, 4, 11, 10});
    Value w = v.graph.input("w", DType::kF32, {6, 4, 3, 2});
    Value b = v.graph.input("b", DType::kF32, {6});
    Conv2DOptions o;
    o.strides = {2, 1};
    o.pads = {1, 0, 2, 1};
    o.dilations = {2, 3};
    v.graph.output("y", conv2d(x, w, b, o));
    v.inputs.emplace("x", F32({2, 4, 11, 10}, 81));
    v.inputs.emplace("w", F32({6, 4, 3, 2}, 82, 1, false));
    v.inputs.emplace("b", F32({6}, 83, 1, false));
    return v;
  };
  m["conv2d_groups_depthwise"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {1, 6, 8, 8});
    Value wg = v.graph.input("wg", DType::kF32, {4, 3, 3, 3});
    Value wd = v.graph.input("wd", DType::kF32, {6, 1, 3, 3});
    Conv2DOptions g;
    g.group = 2;
    g.pads = {1, 1, 1, 1};
    Conv2DOptions d;
    d.group = 6;
    v.graph.output("grouped", conv2d(x, wg, g));
    v.graph.output("depthwise", conv2d(x, wd, d));
    v.inputs.emplace("x", F32({1, 6, 8, 8}, 84));
    v.inputs.emplace("wg", F32({4, 3, 3, 3}, 85, 1, false));
    v.inputs.emplace("wd", F32({6, 1, 3, 3}, 86, 1, false));
    return v;
  };
  m["pool2d"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {2, 3, 9, 8});
    Pool2DOptions mp;
    mp.kernel = {3, 3};
    mp.strides = {2, 2};
    mp.pads = {1, 1, 1, 0};
    Pool2DOptions ap = mp;
    Pool2DOptions api = mp;
    api.count_include_pad = true;
    Pool2DOptions dil;
    dil.kernel = {2, 2};
    dil.dilations = {2, 2};
    v.graph.output("max", max_pool2d(x, mp));
    v.graph.output("max_dilated", max_pool2d(x, dil));
    v.graph.output("avg", avg_pool2d(x, ap));
    v.graph.output("avg_include_pad", avg_pool2d(x, api));
    v.inputs.emplace("x", F32({2, 3, 9, 8}, 87));
    return v;
  };

  // --- normalization ---
  m["softmax"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {7, 300});
    v.graph.output("last", softmax(x, -1));
    v.graph.output("first", softmax(x, 0));
    Tensor t = F32({7, 300}, 90, 20.0f, false);
    for (int i = 0; i < 300; ++i) t.data_as<float>()[300 * 2 + i] = -std::numeric_limits<float>::infinity();
    t.data_as<float>()[300 * 3 + 5] = std::numeric_limits<float>::infinity();
    t.data_as<float>()[300 * 4 + 9] = BitsToFloat(0x7FC00001);
    v.inputs.emplace("x", t);
    return v;
  };
  m["layer_norm"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {4, 6, 96});
    Value s = v.graph.input("scale", DType::kF32, {96});
    Value b = v.graph.input("bias", DType::kF32, {96});
    Value s2 = v.graph.input("scale2", DType::kF32, {6, 96});
    v.graph.output("with_bias", layer_norm(x, s, b, -1, 1e-5f));
    v.graph.output("two_axes_no_bias", layer_norm(x, s2, 1, 1e-3f));
    v.inputs.emplace("x", F32({4, 6, 96}, 91, 5.0f, false));
    v.inputs.emplace("scale", F32({96}, 92, 1, false));
    v.inputs.emplace("bias", F32({96}, 93, 1, false));
    v.inputs.emplace("scale2", F32({6, 96}, 94, 1, false));
    return v;
  };

  // --- data movement (bits copied exactly, NaN payloads preserved) ---
  m["reshape_transpose"] = OneInput(F32({2, 3, 4, 5}, 100), [](Graph&, Value x) {
    return transpose(reshape(transpose(x, {3, 1, 0, 2}), {5, -1, 4}), {2, 0, 1});
  });
  m["slice"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {10, 12});
    v.graph.output("basic", slice(x, {1, 2}, {8, 11}));
    v.graph.output("steps", slice(x, {9, -1}, {-100, 0}, {0, 1}, {-2, -3}));
    v.graph.output("clamped", slice(x, {-3}, {1000}, {1}, {2}));
    v.graph.output("empty", slice(x, {5}, {5}, {0}));
    v.inputs.emplace("x", F32({10, 12}, 101));
    return v;
  };
  m["concat"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kF32, {2, 3, 4});
    Value b = v.graph.input("b", DType::kF32, {2, 0, 4});
    Value c = v.graph.input("c", DType::kF32, {2, 5, 4});
    v.graph.output("y", concat({a, b, c, a}, 1));
    v.inputs.emplace("a", F32({2, 3, 4}, 102));
    v.inputs.emplace("b", Tensor(DType::kF32, {2, 0, 4}));
    v.inputs.emplace("c", F32({2, 5, 4}, 103));
    return v;
  };
  m["gather"] = [] {
    Vector v;
    Value d = v.graph.input("data", DType::kF32, {7, 5});
    Value i32 = v.graph.input("i32", DType::kI32, {2, 3});
    Value i64 = v.graph.input("i64", DType::kI64, {4});
    v.graph.output("rows", gather(d, i32, 0));
    v.graph.output("cols", gather(d, i64, 1));
    v.inputs.emplace("data", F32({7, 5}, 104));
    v.inputs.emplace("i32", Tensor::FromVector<int32_t>(DType::kI32, {2, 3}, {0, 6, -1, -7, 3, 3}));
    v.inputs.emplace("i64", Tensor::FromVector<int64_t>(DType::kI64, {4}, {4, -5, 0, 2}));
    return v;
  };
  m["expand_pad"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {3, 1});
    Value i = v.graph.input("i", DType::kI8, {2, 2});
    v.graph.output("expand", expand(x, {2, 3, 4}));
    v.graph.output("pad", pad(x, {1, 2, 0, 3}, -1.5f));
    v.graph.output("pad_i8", pad(i, {0, 1, 2, 0}, 300.0f));
    v.inputs.emplace("x", F32({3, 1}, 105));
    v.inputs.emplace("i", Ints<int8_t>(DType::kI8, {2, 2}, 106, -128, 127));
    return v;
  };

  // --- composites ---
  m["mlp"] = [] {
    Vector v;
    Graph& g = v.graph;
    Value x = g.input("x", DType::kF32, {8, 64});
    Value w1 = g.constant(F32({64, 128}, 110, 0.2f, false), "w1");
    Value b1 = g.constant(F32({128}, 111, 0.1f, false), "b1");
    Value w2 = g.constant(F32({128, 10}, 112, 0.2f, false), "w2");
    Value h = gelu(matmul(x, w1) + b1);
    h = layer_norm(h, g.constant(F32({128}, 113, 1, false)), g.constant(F32({128}, 114, 1, false)));
    g.output("probs", softmax(matmul(h, w2), -1));
    v.inputs.emplace("x", F32({8, 64}, 115, 2.0f, false));
    return v;
  };
  m["attention"] = [] {
    Vector v;
    Graph& g = v.graph;
    const int64_t T = 12, D = 32;
    Value x = g.input("x", DType::kF32, {T, D});
    Value wq = g.constant(F32({D, D}, 120, 0.3f, false));
    Value wk = g.constant(F32({D, D}, 121, 0.3f, false));
    Value wv = g.constant(F32({D, D}, 122, 0.3f, false));
    Value q = reshape(matmul(x, wq), {T, 4, 8});
    Value k = reshape(matmul(x, wk), {T, 4, 8});
    Value val = reshape(matmul(x, wv), {T, 4, 8});
    Value scores = matmul(transpose(q, {1, 0, 2}), transpose(k, {1, 2, 0})) * g.scalar(0.35355339f);
    Value probs = softmax(scores, -1);
    Value out = transpose(matmul(probs, transpose(val, {1, 0, 2})), {1, 0, 2});
    g.output("y", reshape(out, {T, D}) + x);
    v.inputs.emplace("x", F32({T, D}, 123, 1.0f, false));
    return v;
  };
  m["cnn"] = [] {
    Vector v;
    Graph& g = v.graph;
    Value x = g.input("x", DType::kF32, {2, 3, 16, 16});
    Conv2DOptions o;
    o.pads = {1, 1, 1, 1};
    Value h =
        relu(conv2d(x, g.constant(F32({8, 3, 3, 3}, 130, 0.5f, false)), g.constant(F32({8}, 131, 0.1f, false)), o));
    Pool2DOptions p;
    p.kernel = {2, 2};
    p.strides = {2, 2};
    h = max_pool2d(h, p);
    h = reduce_mean(h, {2, 3});
    g.output("logits", matmul(h, g.constant(F32({8, 5}, 132, 0.5f, false))));
    v.inputs.emplace("x", F32({2, 3, 16, 16}, 133, 1.0f, false));
    return v;
  };

  // --- u8, i16, u16, u32, u64 (DETERMINISM.md section 1): modular arithmetic, division
  // by zero, unsigned comparison and reductions, edge casts ---
  m["uint_arith"] = [] {
    Vector v;
    const uint64_t u64max = std::numeric_limits<uint64_t>::max();
    auto add_type = [&](const std::string& s, DType dtype, Tensor a, Tensor b) {
      const Shape shape = a.shape();
      Value x = v.graph.input("a_" + s, dtype, shape);
      Value y = v.graph.input("b_" + s, dtype, shape);
      v.graph.output(s + "_add", x + y);
      v.graph.output(s + "_sub", x - y);
      v.graph.output(s + "_mul", x * y);
      v.graph.output(s + "_div", x / y);
      v.graph.output(s + "_fmod", fmod(x, y));
      v.graph.output(s + "_max", maximum(x, y));
      v.graph.output(s + "_lt", less(x, y));
      v.graph.output(s + "_sum", reduce_sum(x, {1}));
      v.graph.output(s + "_rmin", reduce_min(x * y, {0}));
      v.graph.output(s + "_prod", reduce_prod(y, {1}));
      v.inputs.emplace("a_" + s, std::move(a));
      v.inputs.emplace("b_" + s, std::move(b));
    };
    add_type("u8", DType::kU8, Ints<uint8_t>(DType::kU8, {8, 16}, 140, 0, 255, {255, 200, 0, 7}),
             Ints<uint8_t>(DType::kU8, {8, 16}, 141, 0, 255, {1, 100, 0, 0}));
    add_type("i16", DType::kI16, Ints<int16_t>(DType::kI16, {8, 16}, 142, -32768, 32767, {-32768, 32767, 181, -7}),
             Ints<int16_t>(DType::kI16, {8, 16}, 143, -300, 300, {-1, 1, 182, 0}));
    add_type("u16", DType::kU16, Ints<uint16_t>(DType::kU16, {8, 16}, 144, 0, 65535, {65535, 300, 0, 9}),
             Ints<uint16_t>(DType::kU16, {8, 16}, 145, 0, 65535, {65535, 300, 0, 0}));
    add_type("u32", DType::kU32, Ints<uint32_t>(DType::kU32, {8, 16}, 146, 0, 4294967295LL, {4294967295u, 0, 5}),
             Ints<uint32_t>(DType::kU32, {8, 16}, 147, 0, 70000, {1, 1, 0}));
    add_type("u64", DType::kU64,
             Ints<uint64_t>(DType::kU64, {8, 16}, 148, 0, std::numeric_limits<int64_t>::max(),
                            {u64max, uint64_t{1} << 63, 0, 12345}),
             Ints<uint64_t>(DType::kU64, {8, 16}, 149, 0, 1LL << 40, {2, u64max, 3, 0}));
    return v;
  };
  m["cast_new_ints"] = [] {
    Vector v;
    Tensor t = F32({20, 20}, 150, 1e5f);
    float* p = t.data_as<float>();
    const float extra[] = {4294967296.0f,
                           -1.0f,
                           -0.5f,
                           255.9f,
                           256.0f,
                           65535.5f,
                           65536.0f,
                           4294967040.0f,
                           18446742974197923840.0f,
                           18446744073709551616.0f,
                           -32768.9f,
                           32767.9f,
                           -32769.0f};
    for (int i = 0; i < 13; ++i) p[100 + i] = extra[i];
    Value x = v.graph.input("x", DType::kF32, {20, 20});
    for (const auto& [name, dtype] : {std::pair{"u8", DType::kU8},
                                      {"i16", DType::kI16},
                                      {"u16", DType::kU16},
                                      {"u32", DType::kU32},
                                      {"u64", DType::kU64}}) {
      Value c = cast(x, dtype);
      v.graph.output(std::string("from_f32_") + name, c);
      // Back to f32 (round to nearest even), to bool, and across the integer types (modular).
      v.graph.output(std::string("to_f32_") + name, cast(c, DType::kF32));
      v.graph.output(std::string("to_bool_") + name, cast(c, DType::kBool));
      v.graph.output(std::string("to_i8_") + name, cast(c, DType::kI8));
      v.graph.output(std::string("to_i64_") + name, cast(c, DType::kI64));
      v.graph.output(std::string("to_u16_") + name, cast(c, DType::kU16));
    }
    Value w = v.graph.input("w", DType::kI64, {64});
    for (const auto& [name, dtype] : {std::pair{"u8", DType::kU8},
                                      {"i16", DType::kI16},
                                      {"u16", DType::kU16},
                                      {"u32", DType::kU32},
                                      {"u64", DType::kU64}}) {
      Value c = cast(w, dtype);
      v.graph.output(std::string("from_i64_") + name, c);
      v.graph.output(std::string("from_i64_to_f32_") + name, cast(c, DType::kF32));
    }
    v.inputs.emplace("x", t);
    v.inputs.emplace(
        "w",
        Ints<int64_t>(DType::kI64, {64}, 151, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                      {-1, 65535, 65536 + 7, -32769, (int64_t{1} << 32) + 3, std::numeric_limits<int64_t>::min(),
                       (int64_t{1} << 63) + (int64_t{1} << 39)}));
    return v;
  };
  m["uint_data_movement"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kU16, {3, 5, 7});
    Value b = v.graph.input("b", DType::kI16, {3, 5, 7});
    Value c = v.graph.input("c", DType::kBool, {3, 5, 7});
    v.graph.output("t", transpose(a, {2, 0, 1}));
    v.graph.output("p", pad(b, {0, 1, 2, 1, 0, 3}, -7.0f));
    v.graph.output("pu", pad(a, {1, 0, 0, 0, 0, 1}, 70000.0f));
    v.graph.output("w", where(c, cast(a, DType::kI16), b));
    v.inputs.emplace("a", Ints<uint16_t>(DType::kU16, {3, 5, 7}, 152, 0, 65535));
    v.inputs.emplace("b", Ints<int16_t>(DType::kI16, {3, 5, 7}, 153, -32768, 32767));
    v.inputs.emplace("c", Bools({3, 5, 7}, 154));
    return v;
  };
  // --- f64 (DETERMINISM.md section 1.2) ---
  m["f64_arith"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kF64, {8, 24});
    Value b = v.graph.input("b", DType::kF64, {8, 24});
    v.graph.output("add", a + b);
    v.graph.output("sub", a - b);
    v.graph.output("mul", a * b);
    v.graph.output("div", a / b);
    v.graph.output("fmod", fmod(a, b));
    v.graph.output("max", maximum(a, b));
    v.graph.output("min", minimum(a, b));
    v.graph.output("neg_abs_relu", relu(abs(-a)));
    v.graph.output("sqrt", sqrt(a));
    v.graph.output("rsqrt", rsqrt(b));
    v.graph.output("floor", floor(a));
    v.graph.output("ceil", ceil(a));
    v.graph.output("round", round(a));
    v.graph.output("exp", exp(a));
    v.graph.output("log", log(a));
    v.graph.output("tanh", tanh(a));
    v.graph.output("sigmoid", sigmoid(b));
    v.graph.output("sin", sin(a));
    v.graph.output("pow", pow(abs(a), b));
    v.graph.output("lt", less(a, b));
    v.graph.output("eq", equal(a, b));
    v.graph.output("where", where(greater(a, b), a, b));
    v.inputs.emplace("a", F64({8, 24}, 160));
    v.inputs.emplace("b", F64({8, 24}, 161, 3.0));
    return v;
  };
  m["f64_cast"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF64, {10, 16});
    Value f = v.graph.input("f", DType::kF32, {64});
    Value w = v.graph.input("w", DType::kI64, {32});
    for (const auto& [name, dtype] : {std::pair{"f32", DType::kF32},
                                      {"i32", DType::kI32},
                                      {"i8", DType::kI8},
                                      {"i64", DType::kI64},
                                      {"u8", DType::kU8},
                                      {"u64", DType::kU64},
                                      {"bool", DType::kBool}}) {
      v.graph.output(std::string("to_") + name, cast(x, dtype));
    }
    v.graph.output("from_f32", cast(f, DType::kF64));
    v.graph.output("from_i64", cast(w, DType::kF64));
    v.graph.output("from_bool", cast(greater(f, f * f), DType::kF64));
    Tensor xs = F64({10, 16}, 162, 1e10);
    const double extra[] = {2147483647.9, -2147483648.9, 9223372036854775807.0, -1.0, -0.99, 255.5, 1e300, -1e300};
    for (int i = 0; i < 8; ++i) xs.data_as<double>()[100 + i] = extra[i];
    v.inputs.emplace("x", std::move(xs));
    v.inputs.emplace("f", F32({64}, 163));
    v.inputs.emplace("w", Ints<int64_t>(DType::kI64, {32}, 164, std::numeric_limits<int64_t>::min(),
                                        std::numeric_limits<int64_t>::max(),
                                        {(int64_t{1} << 53) + 1, std::numeric_limits<int64_t>::max(), -3}));
    return v;
  };
  m["f64_reduce_matmul"] = [] {
    Vector v;
    Value x = v.graph.input("x", DType::kF64, {3, 5000});
    Value a = v.graph.input("a", DType::kF64, {2, 9, 40});
    Value b = v.graph.input("b", DType::kF64, {40, 7});
    v.graph.output("sum_long", reduce_sum(x, {1}));  // crosses the 4096-term chunk
    v.graph.output("sum_cols", reduce_sum(x, {0}));
    v.graph.output("mean", reduce_mean(x, {1}));
    v.graph.output("max", reduce_max(x, {1}));
    v.graph.output("min", reduce_min(a, {0, 2}));
    v.graph.output("prod", reduce_prod(a, {2}));
    v.graph.output("matmul", matmul(a, b));
    // Softmax as the importer lowers it for f64.
    Value m1 = reduce_max(a, {2}, true);
    Value e = exp(a - m1);
    v.graph.output("softmax", e / reduce_sum(e, {2}, true));
    Tensor xs = F64({3, 5000}, 165, 1e3);
    v.inputs.emplace("x", std::move(xs));
    v.inputs.emplace("a", F64({2, 9, 40}, 166, 2.0));
    v.inputs.emplace("b", F64({40, 7}, 167, 2.0));
    return v;
  };
  m["f64_data_movement"] = [] {
    Vector v;
    Value a = v.graph.input("a", DType::kF64, {3, 5, 7});
    Value idx = v.graph.input("idx", DType::kI64, {4});
    v.graph.output("t", transpose(a, {2, 0, 1}));
    v.graph.output("p", pad(a, {0, 1, 2, 1, 0, 3}, -7.5f));
    v.graph.output("s", slice(a, {4, 1}, {0, 6}, {1, 2}, {-2, 2}));
    v.graph.output("c", concat({a, a * a}, 1));
    v.graph.output("g", gather(a, idx, 2));
    v.graph.output("r", reshape(a, {7, -1}));
    v.inputs.emplace("a", F64({3, 5, 7}, 168));
    v.inputs.emplace("idx", Ints<int64_t>(DType::kI64, {4}, 169, -7, 6));
    return v;
  };

  // --- f16 and bf16 (DETERMINISM.md 1.3, 1.4): the f32 rule, rounded once per op ---
  for (DType t : {DType::kF16, DType::kBF16}) {
    const std::string prefix = t == DType::kF16 ? "f16" : "bf16";
    const uint32_t seed = t == DType::kF16 ? 180 : 190;
    m[prefix + "_arith"] = [t, seed] {
      Vector v;
      Value a = v.graph.input("a", t, {6, 20});
      Value b = v.graph.input("b", t, {6, 20});
      Value f = v.graph.input("f", DType::kF32, {6, 20});
      v.graph.output("add", a + b);
      v.graph.output("mul", a * b);
      v.graph.output("div", a / b);
      v.graph.output("max", maximum(a, b));
      v.graph.output("neg_abs_relu", relu(abs(-a)));
      v.graph.output("sqrt", sqrt(a));
      v.graph.output("exp", exp(a));
      v.graph.output("tanh", tanh(b));
      v.graph.output("gelu", gelu(a));
      v.graph.output("round", round(a));
      v.graph.output("lt", less(a, b));
      v.graph.output("where", where(greater(a, b), a, b));
      v.graph.output("to_f32", cast(a, DType::kF32));
      v.graph.output("to_i32", cast(a, DType::kI32));
      v.graph.output("from_f32", cast(f, t));
      v.graph.output("to_other", cast(a, t == DType::kF16 ? DType::kBF16 : DType::kF16));
      v.inputs.emplace("a", Half(t, {6, 20}, seed));
      v.inputs.emplace("b", Half(t, {6, 20}, seed + 1, 3.0f));
      Tensor fs = F32({6, 20}, seed + 2, 1e5f);  // beyond the f16 range too
      v.inputs.emplace("f", std::move(fs));
      return v;
    };
    m[prefix + "_nn"] = [t, seed] {
      Vector v;
      Value x = v.graph.input("x", t, {1, 4, 9, 8});
      Value w = v.graph.constant(Half(t, {6, 2, 3, 3}, seed + 3, 0.5f), "w");  // a 2-byte weight
      Value bias = v.graph.constant(Half(t, {6}, seed + 4, 0.5f), "bias");
      Value a = v.graph.input("a", t, {2, 7, 48});
      Value bm = v.graph.input("bm", t, {48, 5});
      Value g = v.graph.input("g", t, {48});
      Conv2DOptions co;
      co.pads = {1, 1, 0, 1};
      co.strides = {2, 1};
      co.group = 2;
      v.graph.output("conv", conv2d(x, w, bias, co));
      Pool2DOptions po;
      po.kernel = {2, 2};
      po.strides = {2, 2};
      v.graph.output("max_pool", max_pool2d(x, po));
      v.graph.output("avg_pool", avg_pool2d(x, po));
      v.graph.output("matmul", matmul(a, bm));
      v.graph.output("softmax", softmax(a, 2));
      v.graph.output("layer_norm", layer_norm(a, g, g, 2));
      v.graph.output("sum", reduce_sum(a, {2}));
      v.graph.output("mean", reduce_mean(a, {0, 2}));
      v.graph.output("argmax", argmax(a, 2));
      v.graph.output("transpose", transpose(a, {2, 0, 1}));
      v.graph.output("pad", pad(a, {0, 1, 2, 1, 0, 3}, 0.1f));
      v.inputs.emplace("x", Half(t, {1, 4, 9, 8}, seed + 5));
      v.inputs.emplace("a", Half(t, {2, 7, 48}, seed + 6, 2.0f));
      v.inputs.emplace("bm", Half(t, {48, 5}, seed + 7, 2.0f));
      v.inputs.emplace("g", Half(t, {48}, seed + 8, 1.0f));
      return v;
    };
  }

  // --- inverse trigonometric and hyperbolic functions (DETERMINISM.md 5.15) ---
  m["inverse_trig"] = [] {
    Vector v;
    Tensor t = F32({40, 25}, 160, 1.25f);  // mostly inside [-1, 1], some outside
    float* p = t.data_as<float>();
    const float edges[] = {1.0f, -1.0f, 0.99999994f, -0.99999994f, 1.0000001f, 0.41421354f, 0.41421357f, 0.5f, -0.5f};
    for (int i = 0; i < 9; ++i) p[600 + i] = edges[i];
    Value x = v.graph.input("x", DType::kF32, {40, 25});
    v.graph.output("asin", asin(x));
    v.graph.output("acos", acos(x));
    v.graph.output("atan", atan(x));
    v.graph.output("atanh", atanh(x));
    v.graph.output("atan_wide", atan(x * v.graph.constant(Tensor::FromVector<float>(DType::kF32, {}, {1000.0f}))));
    v.inputs.emplace("x", t);
    return v;
  };
  m["hyperbolic"] = [] {
    Vector v;
    Tensor t = F32({50, 40}, 161, 100.0f);
    float* p = t.data_as<float>();
    const float edges[] = {2.0f, 1.9999999f, 88.0f, 87.99999f, 89.41598f, 89.416f, 4096.0f, 4095.9998f, 1.0f};
    for (int i = 0; i < 9; ++i) p[900 + i] = edges[i];
    Value x = v.graph.input("x", DType::kF32, {50, 40});
    v.graph.output("sinh", sinh(x));
    v.graph.output("cosh", cosh(x));
    v.graph.output("asinh", asinh(x));
    v.graph.output("acosh", acosh(x));
    v.inputs.emplace("x", t);
    return v;
  };
  // Integer pow (DETERMINISM.md 4.2): exact modulo 2^n, negative exponents.
  m["pow_int"] = [=] {
    Vector v;
    Tensor a32 = Ints<int32_t>(DType::kI32, {16, 16}, 162, -40, 40, {kMin32, kMax32, 0, 1, -1, 2, -2});
    Tensor b32 = Ints<int32_t>(DType::kI32, {16, 16}, 163, -3, 40, {0, 0, 0, -5, -5, 31, 32});
    Tensor a8 = Ints<int8_t>(DType::kI8, {64}, 164, -128, 127, {-128, 127, 0, -1});
    Tensor b8 = Ints<int8_t>(DType::kI8, {64}, 165, -2, 12, {0, 2, -1, 7});
    Tensor a64 = Ints<int64_t>(DType::kI64, {64}, 166, -1000, 1000, {std::numeric_limits<int64_t>::min(), 3, -1});
    Tensor b64 = Ints<int64_t>(DType::kI64, {64}, 167, -2, 100, {1, int64_t{1} << 50, -3});
    for (const auto& [suffix, dtype, shape] :
         {std::tuple{"32", DType::kI32, Shape{16, 16}}, {"8", DType::kI8, Shape{64}}, {"64", DType::kI64, Shape{64}}}) {
      Value a = v.graph.input(std::string("a") + suffix, dtype, shape);
      Value b = v.graph.input(std::string("b") + suffix, dtype, shape);
      v.graph.output(std::string("i") + suffix, pow(a, b));
    }
    v.inputs.emplace("a32", a32);
    v.inputs.emplace("b32", b32);
    v.inputs.emplace("a8", a8);
    v.inputs.emplace("b8", b8);
    v.inputs.emplace("a64", a64);
    v.inputs.emplace("b64", b64);
    return v;
  };
  // cumsum (DETERMINISM.md 4.6a): sequential chains along each axis, both flags, specials,
  // wrapping i32 (checked on cuda-emu too); f64 and u8 in a second vector, CPU-only for its f64.
  m["cumsum"] = [=] {
    Vector v;
    Value x = v.graph.input("x", DType::kF32, {6, 70, 9});
    Value s = v.graph.input("s", DType::kF32, {12, 40});
    Value i = v.graph.input("i", DType::kI32, {8, 30});
    v.graph.output("inner", cumsum(x, 2));
    v.graph.output("middle_exclusive", cumsum(x, 1, true));
    v.graph.output("outer_reverse", cumsum(x, 0, false, true));
    v.graph.output("inner_exclusive_reverse", cumsum(x, 2, true, true));
    v.graph.output("specials", cumsum(s, 1));
    v.graph.output("specials_cols_reverse", cumsum(s, 0, false, true));
    v.graph.output("i32", cumsum(i, 1));
    v.inputs.emplace("x", F32({6, 70, 9}, 171, 1e3f, false));
    v.inputs.emplace("s", F32({12, 40}, 172, 3.0f));
    v.inputs.emplace("i", Ints<int32_t>(DType::kI32, {8, 30}, 174, kMin32, kMax32, {kMin32, kMax32, -1}));
    return v;
  };
  m["cumsum_f64_u8"] = [] {
    Vector v;
    Value d = v.graph.input("d", DType::kF64, {5, 300});
    Value u = v.graph.input("u", DType::kU8, {8, 30});
    v.graph.output("f64", cumsum(d, 1));
    v.graph.output("f64_exclusive_reverse", cumsum(d, 0, true, true));
    v.graph.output("u8_reverse", cumsum(u, 0, false, true));
    v.inputs.emplace("d", F64({5, 300}, 173, 1e3));
    v.inputs.emplace("u", Ints<uint8_t>(DType::kU8, {8, 30}, 175, 0, 255, {255, 200, 0, 7}));
    return v;
  };
  return m;
}

struct Config {
  std::string isa;
  int threads;
};

StatusOr<RunResult> RunWith(const Program& p, const std::map<std::string, Tensor>& inputs, const Config& c) {
  kernels::CpuBackendOptions o;
  o.isa = c.isa;
  o.num_threads = c.threads;
  ASSIGN_OR_RETURN(auto backend, kernels::CpuBackend::Create(o));
  ASSIGN_OR_RETURN(auto loaded, LoadedProgram::Load(p, backend.get()));
  RunOptions ro;
  ro.trace = true;
  return loaded->Run(inputs, ro);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: generate_vectors OUT_DIR [NAME...]\n");
    return 2;
  }
  fs::path out = argv[1];
  std::vector<std::string> only(argv + 2, argv + argc);
  std::vector<Config> others = {{"portable", 3}};
  if (kernels::cpu::CpuHasAvx2Fma()) others.insert(others.end(), {{"avx2", 1}, {"avx2", 2}, {"avx2", 8}});
  int failures = 0;
  for (auto& [name, build] : AllVectors()) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    Vector v = build();
    auto program = CompileGraph(v.graph, nullptr, {});
    if (!program.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), program.status().ToString().c_str());
      ++failures;
      continue;
    }
    auto ref = RunWith(*program, v.inputs, {"portable", 1});
    if (!ref.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), ref.status().ToString().c_str());
      ++failures;
      continue;
    }
    bool agree = true;
    for (const Config& c : others) {
      auto r = RunWith(*program, v.inputs, c);
      if (!r.ok() || r->trace_root != ref->trace_root || r->result_root != ref->result_root) {
        std::fprintf(stderr, "%s: %s x%d disagrees with portable x1\n", name.c_str(), c.isa.c_str(), c.threads);
        agree = false;
      }
    }
    if (!agree) {
      ++failures;
      continue;
    }
    fs::path dir = out / name;
    fs::remove_all(dir);
    fs::create_directories(dir / "inputs");
    Status s = SaveGraphFile((dir / "graph.cgraph").string(), v.graph);
    for (const auto& [in, t] : v.inputs) {
      if (s.ok()) s = WriteNpyFile((dir / "inputs" / (in + ".npy")).string(), t);
    }
    std::ofstream e(dir / "expected.txt");
    for (const auto& o : ref->outputs) e << "output " << o.name << " " << ToHex(o.hash) << "\n";
    e << "result " << ToHex(ref->result_root) << "\n";
    e << "trace " << ToHex(ref->trace_root) << "\n";
    if (!s.ok() || !e.good()) {
      std::fprintf(stderr, "%s: cannot write: %s\n", name.c_str(), s.ToString().c_str());
      ++failures;
    }
  }
  if (failures) std::fprintf(stderr, "%d vector(s) failed\n", failures);
  return failures ? 1 : 0;
}
