// Shared helpers for the kernel tests in tests/kernels/: host tensors, f32 bit helpers,
// the CPU backend configurations (portable/AVX2 x 1/2/8 threads), kernel-call plumbing,
// random fills and the spec's reference reductions (docs/DETERMINISM.md 1.1, 4.1).
//
// Header-only. The namespace is test_util rather than "testing" so that it does not hide
// gtest's ::testing inside consensor::kernels.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/reduction_order.h"

namespace consensor::kernels::test_util {

// ---------------------------------------------------------------------------------------
// f32 bits.

constexpr uint32_t kCanon = 0x7FC00000u;  // the canonical NaN

inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float FromBits(uint32_t u) { return std::bit_cast<float>(u); }
inline bool IsNaN(float f) { return f != f; }
inline float Canon(float f) { return IsNaN(f) ? FromBits(kCanon) : f; }

// ---------------------------------------------------------------------------------------
// Host tensors.

inline TensorView MakeView(DType dtype, const Shape& shape, void* data) {
  TensorView v;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) v.dims[i] = shape[i];
  v.data = data;
  return v;
}

// Fill byte of fresh output buffers, so that bytes a kernel fails to write show up.
constexpr uint8_t kPoison = 0xCD;

struct HostTensor {
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, Shape s, uint8_t fill = kPoison) : dtype(t), shape(std::move(s)) {
    bytes.assign(static_cast<size_t>(std::max<int64_t>(0, numel()) * DTypeSize(t)), fill);
  }

  int64_t numel() const { return NumElements(shape); }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  template <typename T>
  T at(int64_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  std::vector<T> vec() const {
    std::vector<T> v(static_cast<size_t>(numel()));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  TensorView view() { return MakeView(dtype, shape, bytes.empty() ? nullptr : bytes.data()); }
};

template <typename T>
HostTensor Make(DType dtype, Shape shape, const std::vector<T>& values) {
  HostTensor b(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), b.numel());
  EXPECT_EQ(static_cast<int64_t>(sizeof(T)), DTypeSize(dtype));
  b.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
  return b;
}
inline HostTensor F32(Shape s, const std::vector<float>& v) { return Make(DType::kF32, std::move(s), v); }
inline HostTensor F32Bits(Shape s, const std::vector<uint32_t>& v) { return Make(DType::kF32, std::move(s), v); }
inline HostTensor I32(Shape s, const std::vector<int32_t>& v) { return Make(DType::kI32, std::move(s), v); }
inline HostTensor I8(Shape s, const std::vector<int8_t>& v) { return Make(DType::kI8, std::move(s), v); }
inline HostTensor I64(Shape s, const std::vector<int64_t>& v) { return Make(DType::kI64, std::move(s), v); }
inline HostTensor Bool(Shape s, const std::vector<uint8_t>& v) { return Make(DType::kBool, std::move(s), v); }
inline HostTensor U8(Shape s, const std::vector<uint8_t>& v) { return Make(DType::kU8, std::move(s), v); }
inline HostTensor I16(Shape s, const std::vector<int16_t>& v) { return Make(DType::kI16, std::move(s), v); }
inline HostTensor U16(Shape s, const std::vector<uint16_t>& v) { return Make(DType::kU16, std::move(s), v); }
inline HostTensor U32(Shape s, const std::vector<uint32_t>& v) { return Make(DType::kU32, std::move(s), v); }
inline HostTensor U64(Shape s, const std::vector<uint64_t>& v) { return Make(DType::kU64, std::move(s), v); }

// Random f32 with widely varying magnitudes (so the summation order shows in the bits),
// plus optional specials.
inline void FillF32(HostTensor& t, uint32_t seed, double special_rate = 0.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-24, 24);
  std::uniform_real_distribution<double> p(0.0, 1.0);
  const uint32_t specials[] = {0x7FC00000u, 0x7FC00001u, 0xFFC12345u, 0x7F800001u, 0x7F800000u, 0xFF800000u,
                               0x80000000u, 0x00000000u, 0x00000001u, 0x807FFFFFu, 0x00400000u};
  float* d = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (special_rate > 0 && p(rng) < special_rate) {
      d[i] = FromBits(specials[rng() % (sizeof(specials) / sizeof(specials[0]))]);
    } else {
      d[i] = std::ldexp(u(rng), ex(rng));
    }
  }
}

template <typename T>
void FillInt(HostTensor& t, uint32_t seed) {
  std::mt19937_64 rng(seed);
  T* d = t.as<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t r = rng();
    if (rng() % 4 == 0) r %= 7;  // small values produce ties
    d[i] = static_cast<T>(r);
  }
}

// ---------------------------------------------------------------------------------------
// Spec references shared by several families.

// csum of section 4.1 from the reference pieces of kernels/reduction_order.h. (Calling
// CanonicalSumReference itself with a lambda recurses without bound at compile time: each
// instantiation creates a new lambda type for its partials. std::function stops that.)
inline float RefCsum(const std::function<float(int64_t)>& term, int64_t n) {
  if (n == 0) return 0.0f;
  if (n <= kSumChunk) return LaneTreeSum(term, n);
  const int64_t m = (n + kSumChunk - 1) / kSumChunk;
  std::vector<float> partial(static_cast<size_t>(m));
  for (int64_t c = 0; c < m; ++c) {
    const int64_t begin = c * kSumChunk;
    partial[c] = LaneTreeSum([&](int64_t i) { return term(begin + i); }, std::min(kSumChunk, n - begin));
  }
  return RefCsum([&](int64_t i) { return partial[i]; }, m);
}

// Section 1.1 max/min, written directly.
inline float RefMax(float a, float b) {
  if (IsNaN(a) || IsNaN(b)) return FromBits(kCanon);
  if (a == 0 && b == 0) return (Bits(a) == 0 || Bits(b) == 0) ? 0.0f : -0.0f;
  return a > b ? a : b;
}
inline float RefMin(float a, float b) {
  if (IsNaN(a) || IsNaN(b)) return FromBits(kCanon);
  if (a == 0 && b == 0) return (Bits(a) == 0x80000000u || Bits(b) == 0x80000000u) ? -0.0f : 0.0f;
  return a < b ? a : b;
}

// ---------------------------------------------------------------------------------------
// Backend configurations.

struct Config {
  std::string isa;  // "portable" or "avx2"
  int threads;

  std::string Label() const { return isa + "/t" + std::to_string(threads); }
};

// Every configuration, whether or not this CPU can run it (parameterized suites list all
// of them and skip the unsupported ones, so test names do not depend on the machine).
inline const std::vector<Config>& AllConfigs() {
  static const std::vector<Config> configs = {{"portable", 1}, {"portable", 2}, {"portable", 8},
                                              {"avx2", 1},     {"avx2", 2},     {"avx2", 8}};
  return configs;
}

inline bool IsSupported(const Config& c) { return c.isa != "avx2" || cpu::CpuHasAvx2Fma(); }

// gtest parameter name, e.g. "portable_t2".
inline std::string ConfigName(const ::testing::TestParamInfo<Config>& info) {
  return info.param.isa + "_t" + std::to_string(info.param.threads);
}

inline void PrintTo(const Config& c, std::ostream* os) { *os << c.Label(); }

// With more than one thread, every call is split as finely as the pool allows (a minimum chunk of
// one unit of work), so that the tests' small shapes still run across threads: the node's
// default minimum would keep most of them on the calling thread.
inline StatusOr<std::unique_ptr<CpuBackend>> NewBackend(const Config& c) {
  return CpuBackend::Create(
      {.num_threads = c.threads, .isa = c.isa, .min_chunk_work = c.threads > 1 ? 1 : kMinChunkWork});
}

struct Engine {
  Config config;
  std::string label;  // config.Label()
  std::unique_ptr<CpuBackend> backend;
};

// One backend per supported configuration, created once and shared by all tests.
inline std::vector<Engine>& Engines() {
  static std::vector<Engine>* engines = [] {
    auto* v = new std::vector<Engine>();
    for (const Config& c : AllConfigs()) {
      if (!IsSupported(c)) continue;
      auto b = NewBackend(c);
      EXPECT_TRUE(b.ok()) << c.Label() << ": " << b.status().ToString();
      if (b.ok()) v->push_back({c, c.Label(), std::move(b).value()});
    }
    return v;
  }();
  return *engines;
}

// ---------------------------------------------------------------------------------------
// Kernel calls.

// The conv and pool parameters of the f16/bf16 op-family tests (half_test, cuda_half_test):
// a 3x3 conv, stride (1, 2), 2 groups, and a 2x2 pool, stride 2, each with its own padding.
inline OpParams GroupedConv3x3(decltype(OpParams::pads) pads) {
  OpParams p;
  p.kernel = {3, 3};
  p.strides = {1, 2};
  p.dilations = {1, 1};
  p.pads = std::move(pads);
  p.group = 2;
  return p;
}

// A 3x3 convolution, stride 1, padding 1 ("same"), one group.
inline OpParams SameConv3x3() {
  OpParams p;
  p.kernel = {3, 3};
  p.strides = {1, 1};
  p.dilations = {1, 1};
  p.pads = {1, 1, 1, 1};
  p.group = 1;
  return p;
}

inline OpParams Pool2x2(decltype(OpParams::pads) pads) {
  OpParams p;
  p.kernel = {2, 2};
  p.strides = {2, 2};
  p.dilations = {1, 1};
  p.pads = std::move(pads);
  return p;
}

inline KernelCall MakeCall(Op op, const OpParams& params, const TensorView* inputs, int num_inputs, TensorView* outputs,
                           int num_outputs = 1) {
  KernelCall call;
  call.op = op;
  call.params = &params;
  call.inputs = inputs;
  call.num_inputs = num_inputs;
  call.outputs = outputs;
  call.num_outputs = num_outputs;
  return call;
}

inline Status RunKernel(Backend& be, Op op, const OpParams& params, const std::vector<TensorView>& inputs,
                        TensorView output) {
  KernelCall call = MakeCall(op, params, inputs.data(), static_cast<int>(inputs.size()), &output);
  return be.Run(call);
}

inline Status RunKernel(Backend& be, Op op, const OpParams& params, const std::vector<HostTensor*>& inputs,
                        HostTensor& output) {
  std::vector<TensorView> in;
  for (HostTensor* t : inputs) in.push_back(t->view());
  return RunKernel(be, op, params, in, output.view());
}

// Runs on every engine, checks that each succeeds and that all produce identical bytes
// (outputs start as kPoison), and returns the first engine's result.
inline HostTensor RunAll(Op op, std::vector<HostTensor> inputs, DType out_dtype, Shape out_shape,
                         const OpParams& params = {}) {
  std::vector<HostTensor*> in;
  for (HostTensor& t : inputs) in.push_back(&t);
  HostTensor first;
  bool have = false;
  for (Engine& e : Engines()) {
    HostTensor out(out_dtype, out_shape);
    Status s = RunKernel(*e.backend, op, params, in, out);
    EXPECT_TRUE(s.ok()) << OpName(op) << " on " << e.label << ": " << s.ToString();
    if (!have) {
      first = std::move(out);
      have = true;
    } else {
      EXPECT_TRUE(first.bytes == out.bytes) << OpName(op) << " differs on " << e.label;
    }
  }
  return first;
}

// Runs on the first engine (output zero-filled) and returns the status.
inline Status RunStatus(Op op, std::vector<HostTensor> inputs, DType out_dtype, Shape out_shape,
                        const OpParams& params = {}) {
  std::vector<HostTensor*> in;
  for (HostTensor& t : inputs) in.push_back(&t);
  HostTensor out(out_dtype, std::move(out_shape), 0);
  return RunKernel(*Engines().front().backend, op, params, in, out);
}

// Parameterized over AllConfigs(): a fresh backend per test, skipped where the CPU lacks
// the ISA. Instantiate with
//   INSTANTIATE_TEST_SUITE_P(Cpu, Suite, testing::ValuesIn(AllConfigs()), ConfigName);
class BackendTest : public ::testing::TestWithParam<Config> {
 public:
  void SetUp() override {
    if (!IsSupported(GetParam())) GTEST_SKIP() << "no AVX2/FMA on this CPU";
    auto b = NewBackend(GetParam());
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b.value());
  }

  Status Run(Op op, const OpParams& p, HostTensor& x, HostTensor& y) { return RunKernel(*backend_, op, p, {&x}, y); }
  Status Run(Op op, const OpParams& p, const std::vector<HostTensor*>& ins, HostTensor& y) {
    return RunKernel(*backend_, op, p, ins, y);
  }

  std::unique_ptr<CpuBackend> backend_;
};

}  // namespace consensor::kernels::test_util
