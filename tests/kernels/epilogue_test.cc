// Fused epilogues (docs/DETERMINISM.md 3.1): an op with elementwise steps fused into its output
// pass must give the same bits as the op followed by each step as its own kernel call, on every
// CPU configuration (portable/AVX2 x 1, 2, 8 threads), for elementwise and conv2d heads (each
// conv path: direct, 1x1 GEMM, im2col in both scheduling modes), odd shapes, broadcast inputs
// and special values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/checks/elementwise.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

// A HardSwish-style chain, then a residual add, a per-channel affine and a unary op, reading
// value 0 twice and inputs on either side of non-commutative ops. Inputs: 0 = scalar 1/6,
// 1 = scalar 0.5, 2 = scalar 1, 3 = scalar 0, 4 = residual (output shape), 5 = per-channel.
std::vector<EpilogueStep> TestSteps() {
  auto val = [](int i) { return EpilogueOperand{false, i}; };
  auto in = [](int i) { return EpilogueOperand{true, i}; };
  return {
      {Op::kMul, 2, {val(0), in(0)}},   // v1
      {Op::kAdd, 2, {val(1), in(1)}},   // v2
      {Op::kMin, 2, {val(2), in(2)}},   // v3
      {Op::kMax, 2, {val(3), in(3)}},   // v4
      {Op::kMul, 2, {val(0), val(4)}},  // v5
      {Op::kAdd, 2, {in(4), val(5)}},   // v6
      {Op::kSub, 2, {in(5), val(6)}},   // v7
      {Op::kTanh, 1, {val(7)}},         // v8
  };
}

struct EpilogueInputs {
  std::vector<HostTensor> tensors;
  std::vector<TensorView> views;
};

EpilogueInputs MakeInputs(const Shape& out, uint32_t seed) {
  EpilogueInputs e;
  e.tensors.push_back(F32({}, {1.0f / 6.0f}));
  e.tensors.push_back(F32({1}, {0.5f}));
  e.tensors.push_back(F32({1, 1}, {1.0f}));
  e.tensors.push_back(F32({}, {0.0f}));
  HostTensor residual(DType::kF32, out);
  FillF32(residual, seed, 0.02);
  e.tensors.push_back(std::move(residual));
  Shape channel(out.size(), 1);
  channel[1] = out[1];
  HostTensor per_channel(DType::kF32, channel);
  FillF32(per_channel, seed + 1, 0.05);
  e.tensors.push_back(std::move(per_channel));
  for (HostTensor& t : e.tensors) e.views.push_back(t.view());
  return e;
}

// The unfused reference: `head` already holds the op's result; each step is its own call.
HostTensor RunStepsUnfused(Backend& be, const HostTensor& head, const std::vector<EpilogueStep>& steps,
                           EpilogueInputs& inputs) {
  std::vector<HostTensor> values = {head};
  for (const EpilogueStep& s : steps) {
    std::vector<TensorView> in;
    for (int k = 0; k < s.num_operands; ++k) {
      const EpilogueOperand& o = s.operands[k];
      in.push_back(o.is_input ? inputs.views[o.index] : values[o.index].view());
    }
    HostTensor out(DType::kF32, head.shape);
    Status st = RunKernel(be, s.op, OpParams{}, in, out.view());
    EXPECT_TRUE(st.ok()) << st.ToString();
    values.push_back(std::move(out));
  }
  return values.back();
}

// Runs `call` (whose output is `out`) with the steps fused, on a fresh poisoned output.
HostTensor RunFused(Backend& be, KernelCall call, const Shape& out_shape, const std::vector<EpilogueStep>& steps,
                    EpilogueInputs& inputs) {
  HostTensor out(DType::kF32, out_shape);
  TensorView out_view = out.view();
  call.outputs = &out_view;
  Epilogue epilogue{steps.data(), static_cast<int>(steps.size()), inputs.views.data(),
                    static_cast<int>(inputs.views.size())};
  call.epilogue = &epilogue;
  EXPECT_TRUE(be.SupportsEpilogue(call));
  Status st = be.Run(call);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

void ExpectSameBits(const HostTensor& want, const HostTensor& got, const std::string& what) {
  ASSERT_EQ(want.bytes.size(), got.bytes.size()) << what;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (want.at<uint32_t>(i) != got.at<uint32_t>(i)) {
      ADD_FAILURE() << what << ": element " << i << " is " << std::hex << got.at<uint32_t>(i) << ", unfused "
                    << want.at<uint32_t>(i);
      return;
    }
  }
}

TEST(EpilogueTest, ElementwiseHeadMatchesUnfusedStepsOnEveryConfiguration) {
  const std::vector<EpilogueStep> steps = TestSteps();
  // Odd shapes: below one tile, across tile and thread-grain boundaries, one with a 1-dim.
  for (const Shape& shape : std::vector<Shape>{{1, 3, 5, 7}, {2, 5, 37, 61}, {1, 7, 1, 2339}, {3, 4, 129, 67}}) {
    SCOPED_TRACE(ShapeToString(shape));
    HostTensor a(DType::kF32, shape), b(DType::kF32, {shape[1], 1, 1});
    FillF32(a, 11, 0.03);
    FillF32(b, 12, 0.03);
    EpilogueInputs inputs = MakeInputs(shape, 13);
    for (Engine& e : Engines()) {
      HostTensor head(DType::kF32, shape);
      ASSERT_TRUE(RunKernel(*e.backend, Op::kAdd, OpParams{}, {&a, &b}, head).ok());
      const HostTensor want = RunStepsUnfused(*e.backend, head, steps, inputs);
      TensorView in[2] = {a.view(), b.view()};
      OpParams params;
      const HostTensor got = RunFused(*e.backend, MakeCall(Op::kAdd, params, in, 2, nullptr), shape, steps, inputs);
      ExpectSameBits(want, got, e.label);
    }
  }
}

struct ConvCase {
  int64_t N, C, H, W, F, KH, KW, stride, pad, group;
  bool bias;
};

TEST(EpilogueTest, ConvHeadMatchesUnfusedStepsOnEveryPath) {
  const std::vector<EpilogueStep> steps = TestSteps();
  const std::vector<ConvCase> cases = {
      {1, 8, 9, 13, 8, 3, 3, 1, 1, 8, true},     // depthwise: the direct kernel
      {2, 12, 7, 11, 6, 3, 3, 2, 1, 3, false},   // grouped, 4 channels per group: direct
      {2, 5, 9, 7, 7, 1, 1, 1, 0, 1, true},      // 1x1, stride 1, no padding: straight GEMM
      {1, 6, 10, 9, 5, 1, 1, 1, 0, 1, false},    // the same without a bias
      {2, 6, 20, 29, 150, 1, 1, 1, 0, 1, true},  // 1x1: epilogue per GEMM part, 2 row blocks
      {1, 8, 17, 17, 300, 1, 1, 1, 0, 2, true},  // grouped 1x1, 289 columns
      {3, 5, 11, 13, 9, 3, 3, 1, 1, 1, true},    // im2col, many jobs
      {1, 4, 5, 3, 33, 3, 2, 1, 0, 1, true},     // im2col, few jobs (the pool-wide mode at 8 threads)
      {1, 7, 12, 15, 6, 1, 1, 2, 1, 1, true},    // 1x1 with stride and padding: im2col
  };
  for (const ConvCase& c : cases) {
    OpParams params;
    params.kernel = {c.KH, c.KW};
    params.strides = {c.stride, c.stride};
    params.pads = {c.pad, c.pad, c.pad, c.pad};
    params.dilations = {1, 1};
    params.group = c.group;
    const int64_t OH = (c.H + 2 * c.pad - c.KH) / c.stride + 1, OW = (c.W + 2 * c.pad - c.KW) / c.stride + 1;
    const Shape out_shape = {c.N, c.F, OH, OW};
    SCOPED_TRACE(ShapeToString(out_shape) + " k" + std::to_string(c.KH) + "x" + std::to_string(c.KW) + " g" +
                 std::to_string(c.group));
    HostTensor x(DType::kF32, {c.N, c.C, c.H, c.W}), w(DType::kF32, {c.F, c.C / c.group, c.KH, c.KW});
    HostTensor bias(DType::kF32, {c.F});
    FillF32(x, 21, 0.01);
    FillF32(w, 22, 0.01);
    FillF32(bias, 23, 0.02);
    EpilogueInputs inputs = MakeInputs(out_shape, 24);
    std::vector<HostTensor*> conv_in = {&x, &w};
    if (c.bias) conv_in.push_back(&bias);
    for (Engine& e : Engines()) {
      HostTensor head(DType::kF32, out_shape);
      ASSERT_TRUE(RunKernel(*e.backend, Op::kConv2D, params, conv_in, head).ok());
      const HostTensor want = RunStepsUnfused(*e.backend, head, steps, inputs);
      std::vector<TensorView> in;
      for (HostTensor* t : conv_in) in.push_back(t->view());
      const HostTensor got =
          RunFused(*e.backend, MakeCall(Op::kConv2D, params, in.data(), static_cast<int>(in.size()), nullptr),
                   out_shape, steps, inputs);
      ExpectSameBits(want, got, e.label);
    }
  }
}

// Steps that the one-pass AVX-512 epilogue takes (elementwise_avx512.cc): every cheap op, with
// scalar inputs on either side, a full-shape input, values read twice, and the LeakyRelu pair.
// Inputs: 0 = scalar 3, 1 = scalar 0, 2 = scalar 6, 3 = residual (output shape), 4 = scalar -0,
// 5 = scalar 0.01.
std::vector<EpilogueStep> OnePassSteps() {
  auto val = [](int i) { return EpilogueOperand{false, i}; };
  auto in = [](int i) { return EpilogueOperand{true, i}; };
  return {
      {Op::kAdd, 2, {val(0), in(0)}},   // v1 = x + 3       (HardSwish)
      {Op::kMax, 2, {val(1), in(1)}},   // v2 = max(v1, 0)
      {Op::kMin, 2, {in(2), val(2)}},   // v3 = min(6, v2)
      {Op::kMul, 2, {val(0), val(3)}},  // v4 = x * v3
      {Op::kDiv, 2, {val(4), in(2)}},   // v5 = v4 / 6
      {Op::kSub, 2, {in(3), val(5)}},   // v6 = residual - v5
      {Op::kMul, 2, {val(6), in(5)}},   // v7 = v6 * 0.01  (LeakyRelu's pair)
      {Op::kMax, 2, {val(6), val(7)}},  // v8 = max(v6, v7)
  };
}

std::vector<std::vector<EpilogueStep>> OnePassChains() {
  auto val = [](int i) { return EpilogueOperand{false, i}; };
  auto in = [](int i) { return EpilogueOperand{true, i}; };
  std::vector<EpilogueStep> hard_swish = OnePassSteps();
  hard_swish.resize(5);  // exactly HardSwish: a chain the one-pass epilogue runs in registers
  // x * 6, + 0, min 1, max(., zero): with input 1 (+0) a HardSigmoid, run in registers; with
  // input 4 (-0) none.
  auto hard_sigmoid = [&](int zero) -> std::vector<EpilogueStep> {
    return {{Op::kMul, 2, {val(0), in(2)}},
            {Op::kAdd, 2, {val(1), in(1)}},
            {Op::kMin, 2, {val(2), in(8)}},
            {Op::kMax, 2, {val(3), in(zero)}}};
  };
  return {
      OnePassSteps(),
      hard_swish,
      hard_sigmoid(1),
      hard_sigmoid(4),
      {{Op::kRelu, 1, {val(0)}}},
      {{Op::kNeg, 1, {val(0)}},
       {Op::kAbs, 1, {val(1)}},
       {Op::kMin, 2, {val(2), in(4)}},
       {Op::kMax, 2, {in(4), val(0)}},
       {Op::kDiv, 2, {in(1), val(4)}},
       {Op::kAdd, 2, {val(5), val(3)}}},
      // Per-channel inputs (the dequantizing multiply and bias of ConvInteger's lowering).
      {{Op::kMul, 2, {val(0), in(6)}},
       {Op::kAdd, 2, {val(1), in(7)}},
       {Op::kMax, 2, {val(2), in(1)}},
       {Op::kSub, 2, {in(6), val(3)}},
       {Op::kDiv, 2, {val(4), in(7)}}},
  };
}

EpilogueInputs OnePassInputs(const Shape& out, uint32_t seed) {
  EpilogueInputs e;
  e.tensors.push_back(F32({}, {3.0f}));
  e.tensors.push_back(F32({1}, {0.0f}));
  e.tensors.push_back(F32({1, 1}, {6.0f}));
  HostTensor residual(DType::kF32, out);
  FillF32(residual, seed, 0.05);
  e.tensors.push_back(std::move(residual));
  e.tensors.push_back(F32({}, {-0.0f}));
  e.tensors.push_back(F32({}, {0.01f}));
  // One value per channel [C, 1, 1], and per (channel, row) [1, C, H, 1], with specials.
  HostTensor per_channel(DType::kF32, {out[1], 1, 1}), per_row(DType::kF32, {1, out[1], out[2], 1});
  FillF32(per_channel, seed + 1, 0.2);
  FillF32(per_row, seed + 2, 0.2);
  e.tensors.push_back(std::move(per_channel));
  e.tensors.push_back(std::move(per_row));
  e.tensors.push_back(F32({}, {1.0f}));
  for (HostTensor& t : e.tensors) e.views.push_back(t.view());
  return e;
}

// The one-pass AVX-512 epilogue against the steps one by one, and against the per-step fused
// path (SetFastEpilogueForTesting(false)), on heads full of NaNs with payloads, infinities,
// signed zeros and subnormals; lengths around its 16-lane vectors and 256-element tiles, and
// per-channel inputs whose runs (64, 96, 100, 288, 2339 elements, or below 64: the per-step
// path) end inside tiles.
TEST(EpilogueTest, OnePassEpilogueMatchesUnfusedSteps) {
  for (const Shape& shape : std::vector<Shape>{
           {1, 1, 1, 1}, {1, 3, 1, 17}, {2, 5, 3, 96}, {1, 1, 1, 257}, {1, 7, 1, 2339}, {3, 4, 8, 8}, {2, 6, 1, 100}}) {
    SCOPED_TRACE(ShapeToString(shape));
    HostTensor a(DType::kF32, shape), b(DType::kF32, {shape[1], 1, 1});
    FillF32(a, 31, 0.2);
    FillF32(b, 32, 0.0);
    EpilogueInputs inputs = OnePassInputs(shape, 33);
    for (const std::vector<EpilogueStep>& steps : OnePassChains()) {
      for (Engine& e : Engines()) {
        HostTensor head(DType::kF32, shape);
        ASSERT_TRUE(RunKernel(*e.backend, Op::kAdd, OpParams{}, {&a, &b}, head).ok());
        const HostTensor want = RunStepsUnfused(*e.backend, head, steps, inputs);
        TensorView in[2] = {a.view(), b.view()};
        OpParams params;
        for (bool one_pass : {true, false}) {
          cpu::SetFastEpilogueForTesting(one_pass);
          const HostTensor got = RunFused(*e.backend, MakeCall(Op::kAdd, params, in, 2, nullptr), shape, steps, inputs);
          ExpectSameBits(want, got, e.label + (one_pass ? " one pass" : " per step"));
        }
        cpu::SetFastEpilogueForTesting(true);
      }
    }
  }
  // A conv head: the direct kernel's rows in epilogue blocks (a depthwise 5x5 on 2-row planes).
  OpParams params;
  params.kernel = {5, 5};
  params.strides = {1, 1};
  params.pads = {2, 2, 2, 2};
  params.dilations = {1, 1};
  params.group = 40;
  const Shape out_shape = {1, 40, 2, 96};
  HostTensor x(DType::kF32, {1, 40, 2, 96}), w(DType::kF32, {40, 1, 5, 5}), bias(DType::kF32, {40});
  FillF32(x, 41, 0.01);
  FillF32(w, 42, 0.0);
  FillF32(bias, 43, 0.0);
  EpilogueInputs inputs = OnePassInputs(out_shape, 44);
  const std::vector<EpilogueStep> steps = OnePassSteps();
  for (Engine& e : Engines()) {
    HostTensor head(DType::kF32, out_shape);
    ASSERT_TRUE(RunKernel(*e.backend, Op::kConv2D, params, {&x, &w, &bias}, head).ok());
    const HostTensor want = RunStepsUnfused(*e.backend, head, steps, inputs);
    TensorView in[3] = {x.view(), w.view(), bias.view()};
    const HostTensor got =
        RunFused(*e.backend, MakeCall(Op::kConv2D, params, in, 3, nullptr), out_shape, steps, inputs);
    ExpectSameBits(want, got, e.label);
  }
}

cpu::FastEpilogueOperand ChainOperand(cpu::FastEpilogueOperand::Kind kind, int index, float scalar = 0) {
  cpu::FastEpilogueOperand o;
  o.kind = kind;
  o.index = index;
  o.scalar = scalar;
  return o;
}

// The importer's order of HardSwish (the classifier's chains): x + 3, max(., 0), min(., 6), x * .,
// . / 6.
std::vector<cpu::FastEpilogueStep> HardSwishChain() {
  using O = cpu::FastEpilogueOperand;
  return {{Op::kAdd, 2, {ChainOperand(O::kValue, 0), ChainOperand(O::kScalar, 0, 3.0f)}},
          {Op::kMax, 2, {ChainOperand(O::kValue, 1), ChainOperand(O::kScalar, 0, 0.0f)}},
          {Op::kMin, 2, {ChainOperand(O::kValue, 2), ChainOperand(O::kScalar, 0, 6.0f)}},
          {Op::kMul, 2, {ChainOperand(O::kValue, 0), ChainOperand(O::kValue, 3)}},
          {Op::kDiv, 2, {ChainOperand(O::kValue, 4), ChainOperand(O::kScalar, 0, 6.0f)}}};
}

// HardSigmoid as the importer gives it: x * alpha, + beta, min(., 1), max(., 0).
std::vector<cpu::FastEpilogueStep> HardSigmoidChain(float alpha, float beta) {
  using O = cpu::FastEpilogueOperand;
  return {{Op::kMul, 2, {ChainOperand(O::kValue, 0), ChainOperand(O::kScalar, 0, alpha)}},
          {Op::kAdd, 2, {ChainOperand(O::kValue, 1), ChainOperand(O::kScalar, 0, beta)}},
          {Op::kMin, 2, {ChainOperand(O::kValue, 2), ChainOperand(O::kScalar, 0, 1.0f)}},
          {Op::kMax, 2, {ChainOperand(O::kValue, 3), ChainOperand(O::kScalar, 0, 0.0f)}}};
}

// The chain in registers against the same steps one after another in the one-pass tiles
// (SetRegisterChainsForTesting(false)), over the bit patterns 0, stride, 2 * stride, ... and a
// masked tail of specials; false (and a failure naming the first input) on a difference.
bool ChainMatchesSteps(const std::vector<cpu::FastEpilogueStep>& steps, uint64_t stride) {
  constexpr int64_t kChunk = int64_t{1} << 13;  // 32 KiB a buffer: the passes stay in the caches
  std::vector<float> x(kChunk), chain(kChunk), stepwise(kChunk);
  const int num_steps = static_cast<int>(steps.size());
  auto check = [&](int64_t n) {
    std::copy(x.begin(), x.begin() + n, chain.begin());
    std::copy(x.begin(), x.begin() + n, stepwise.begin());
    cpu::RunFastEpilogueAvx512(steps.data(), num_steps, chain.data(), 0, n);
    cpu::SetRegisterChainsForTesting(false);
    cpu::RunFastEpilogueAvx512(steps.data(), num_steps, stepwise.data(), 0, n);
    cpu::SetRegisterChainsForTesting(true);
    if (std::memcmp(chain.data(), stepwise.data(), static_cast<size_t>(n) * sizeof(float)) == 0) return true;
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(&chain[i], &stepwise[i], sizeof(float)) != 0) {
        uint32_t bx, bc, bs;
        std::memcpy(&bx, &x[i], 4), std::memcpy(&bc, &chain[i], 4), std::memcpy(&bs, &stepwise[i], 4);
        ADD_FAILURE() << std::hex << "x = " << bx << ": chain " << bc << ", steps " << bs;
        break;
      }
    }
    return false;
  };
  for (uint64_t u = 0; u <= 0xFFFFFFFFu;) {
    int64_t n = 0;
    for (; n < kChunk && u <= 0xFFFFFFFFu; ++n, u += stride) {
      const uint32_t bits = static_cast<uint32_t>(u);
      std::memcpy(&x[n], &bits, 4);
    }
    if (!check(n)) return false;
  }
  // The specials and the chains' edges (-3, 3, 2.5, -2.5, -inf, NaN with a payload), in a tail.
  const std::vector<float> tail = {-3.0f,          3.0f,  -0.0f,      0.0f, -INFINITY, INFINITY,
                                   std::nanf("7"), -6.0f, 2.9999998f, 2.5f, -2.5f};
  std::copy(tail.begin(), tail.end(), x.begin());
  return check(static_cast<int64_t>(tail.size()));
}

#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kEveryPattern = 61;  // a sanitizer makes a pass about 20x slower
#else
constexpr uint64_t kEveryPattern = 1;
#endif

// The one-pass epilogue runs HardSwish and HardSigmoid in registers (elementwise_avx512.cc,
// RunRegisterChain): the same bits as their steps for every one of the 2^32 inputs (every 61st
// under a sanitizer), and with the operands of the commutative steps in the other order.
TEST(EpilogueTest, HardSwishChainMatchesItsStepsForEveryFloat) {
  if (!cpu::gemm::CpuHasAvx512F()) GTEST_SKIP() << "no AVX-512F";
  ASSERT_TRUE(ChainMatchesSteps(HardSwishChain(), kEveryPattern));
  std::vector<cpu::FastEpilogueStep> swapped = HardSwishChain();
  for (int k : {0, 1, 2, 3}) std::swap(swapped[k].operands[0], swapped[k].operands[1]);
  ASSERT_TRUE(ChainMatchesSteps(swapped, 4099));
}

// HardSigmoid with the classifier's slope (0.2) on every input, MobileNetV3's (1/6) on every 7th; then
// other slopes and offsets (negative, zero, -0, huge, subnormal) on every 4099th input.
TEST(EpilogueTest, HardSigmoidChainMatchesItsStepsForEveryFloat) {
  if (!cpu::gemm::CpuHasAvx512F()) GTEST_SKIP() << "no AVX-512F";
  ASSERT_TRUE(ChainMatchesSteps(HardSigmoidChain(0.2f, 0.5f), kEveryPattern));
  ASSERT_TRUE(ChainMatchesSteps(HardSigmoidChain(1.0f / 6.0f, 0.5f), 7 * kEveryPattern));
  for (float alpha : {-0.37f, 0.0f, -0.0f, 3e38f, 1.0f}) {
    for (float beta : {0.5f, 0.0f, -0.0f, -1.0f, 1e-40f, INFINITY}) {
      SCOPED_TRACE(std::to_string(alpha) + " " + std::to_string(beta));
      ASSERT_TRUE(ChainMatchesSteps(HardSigmoidChain(alpha, beta), 4099));
    }
  }
  std::vector<cpu::FastEpilogueStep> swapped = HardSigmoidChain(0.2f, 0.5f);
  for (int k : {0, 1, 2, 3}) std::swap(swapped[k].operands[0], swapped[k].operands[1]);
  ASSERT_TRUE(ChainMatchesSteps(swapped, 4099));
}

// A gather head (the Resize lowering's taps, DETERMINISM.md 6.2): the naive gather, then each
// step as its own call, against the gather with its steps fused, on every engine, one pass and
// per step. Data full of NaNs with payloads, infinities, signed zeros and subnormals, weights
// too; negative indices. Axes: the last (one element per index: rows of 53 and 160, the
// per-row one-pass operand, and of 9, the per-step path), and outer axes with rows of 37 and 64
// elements (per-channel weights [n, 1]: per-step and one-pass); the larger cases split over
// threads.
TEST(EpilogueTest, GatherHeadMatchesUnfusedSteps) {
  struct GatherCase {
    Shape data;
    int axis;
    int64_t n;  // indices
  };
  auto val = [](int i) { return EpilogueOperand{false, i}; };
  auto in = [](int i) { return EpilogueOperand{true, i}; };
  // Inputs: 0 = the weights (one per index, shaped to broadcast along the axis), 1 = the other
  // tap's product (output shape). y = t * w, then y = other + y, as the lowering's second tap.
  const std::vector<std::vector<EpilogueStep>> chains = {
      {{Op::kMul, 2, {val(0), in(0)}}},
      {{Op::kMul, 2, {val(0), in(0)}}, {Op::kAdd, 2, {in(1), val(1)}}},
      {{Op::kMul, 2, {in(0), val(0)}}, {Op::kAdd, 2, {val(1), in(1)}}, {Op::kTanh, 1, {val(2)}}},
  };
  for (const GatherCase& c : std::vector<GatherCase>{{{2, 5, 7, 37}, 3, 53},
                                                     {{2, 5, 7, 37}, 3, 9},
                                                     {{2, 5, 7, 37}, 2, 13},
                                                     {{1, 3, 20, 64}, 2, 40},
                                                     {{8, 16, 16, 32}, 3, 160},
                                                     {{4, 32, 64, 64}, 2, 128}}) {
    const int rank = static_cast<int>(c.data.size());
    Shape out_shape = c.data;
    out_shape[c.axis] = c.n;
    SCOPED_TRACE(ShapeToString(c.data) + " axis " + std::to_string(c.axis) + " n " + std::to_string(c.n));
    HostTensor data(DType::kF32, c.data);
    FillF32(data, 51, 0.2);
    std::vector<int64_t> index(c.n);
    for (int64_t j = 0; j < c.n; ++j) {
      const int64_t k = (j * 7 + 3) % c.data[c.axis];
      index[j] = j % 3 == 0 ? k - c.data[c.axis] : k;  // every third counted from the end
    }
    HostTensor indices = I64({c.n}, index);
    // The naive gather.
    HostTensor head(DType::kF32, out_shape);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < c.axis; ++d) outer *= c.data[d];
    for (int d = c.axis + 1; d < rank; ++d) inner *= c.data[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < c.n; ++j) {
        const int64_t k = index[j] < 0 ? index[j] + c.data[c.axis] : index[j];
        for (int64_t i = 0; i < inner; ++i) {
          head.as<uint32_t>()[(o * c.n + j) * inner + i] = data.at<uint32_t>((o * c.data[c.axis] + k) * inner + i);
        }
      }
    }
    EpilogueInputs inputs;
    Shape weight_shape(rank - c.axis, 1);
    weight_shape[0] = c.n;
    inputs.tensors.emplace_back(DType::kF32, weight_shape);
    FillF32(inputs.tensors.back(), 52, 0.1);
    inputs.tensors.emplace_back(DType::kF32, out_shape);
    FillF32(inputs.tensors.back(), 53, 0.1);
    for (HostTensor& t : inputs.tensors) inputs.views.push_back(t.view());
    OpParams params;
    params.axis = c.axis;
    TensorView in_views[2] = {data.view(), indices.view()};
    for (const std::vector<EpilogueStep>& steps : chains) {
      for (Engine& e : Engines()) {
        const HostTensor want = RunStepsUnfused(*e.backend, head, steps, inputs);
        for (bool one_pass : {true, false}) {
          cpu::SetFastEpilogueForTesting(one_pass);
          const HostTensor got =
              RunFused(*e.backend, MakeCall(Op::kGather, params, in_views, 2, nullptr), out_shape, steps, inputs);
          ExpectSameBits(want, got, e.label + (one_pass ? " one pass" : " per step"));
        }
        cpu::SetFastEpilogueForTesting(true);
      }
    }
  }
}

TEST(EpilogueTest, InvalidEpiloguesAreRefused) {
  HostTensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorView in[2] = {a.view(), a.view()};
  HostTensor out(DType::kF32, {2, 3});
  TensorView out_view = out.view();
  OpParams params;
  KernelCall call = MakeCall(Op::kAdd, params, in, 2, &out_view);
  HostTensor wide(DType::kF32, {4, 3});
  TensorView extra[1] = {wide.view()};
  auto val = [](int i) { return EpilogueOperand{false, i}; };
  const std::vector<std::pair<std::string, std::vector<EpilogueStep>>> bad = {
      {"a later value", {{Op::kExp, 1, {val(1)}}}},
      {"a missing input", {{Op::kAdd, 2, {val(0), EpilogueOperand{true, 3}}}}},
      {"a comparison", {{Op::kLess, 2, {val(0), val(0)}}}},
      {"a wrong arity", {{Op::kExp, 2, {val(0), val(0)}}}},
      {"an input that does not broadcast", {{Op::kAdd, 2, {val(0), EpilogueOperand{true, 0}}}}},
  };
  CpuBackend& be = *Engines().front().backend;
  for (const auto& [what, steps] : bad) {
    Epilogue epilogue{steps.data(), static_cast<int>(steps.size()), extra, 1};
    call.epilogue = &epilogue;
    EXPECT_FALSE(ValidateEpilogue(call).ok()) << what;
    EXPECT_FALSE(be.SupportsEpilogue(call)) << what;
    EXPECT_FALSE(be.Run(call).ok()) << what;
  }
  // Too many steps, and an epilogue on an op family that takes none.
  std::vector<EpilogueStep> many(kMaxEpilogueSteps + 1, EpilogueStep{Op::kExp, 1, {val(0)}});
  Epilogue too_long{many.data(), static_cast<int>(many.size()), nullptr, 0};
  call.epilogue = &too_long;
  EXPECT_FALSE(be.Run(call).ok());
  Epilogue one{many.data(), 1, nullptr, 0};
  OpParams sm;
  sm.axis = 1;
  KernelCall softmax = MakeCall(Op::kSoftmax, sm, in, 1, &out_view);
  softmax.epilogue = &one;
  EXPECT_FALSE(be.SupportsEpilogue(softmax));
  EXPECT_FALSE(be.Run(softmax).ok());
}

}  // namespace
}  // namespace consensor::kernels
