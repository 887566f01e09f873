// ConvTranspose's convolution over the zero-stuffed input, fused at compilation into one conv2d
// that reads x itself and skips the stuffed zeros (docs/DETERMINISM.md 3.1, "Zero-stuffed
// input"). The fused program must give the unfused lowering's bits on both CPU ISAs at 1, 2 and
// 8 threads, in particular where skipping a zero term would change a bit: a -0 sum (tiny
// products that round to -0, a -0 bias) and weights that are infinite or NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/fusion_testing.h"
#include "tests/executor/onnx/onnx_model_builder.h"

namespace consensor::executor {
namespace {

using consensor::testing::OneNodeModel;
using consensor::testing::OnnxInput;
using consensor::testing::RandomF32;

struct Case {
  std::string name;
  Shape x, w;  // x [N, C, D...], w [C, F/group, K...]
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads, output_padding;
  bool bias = true;
  bool constant_weights = true;  // false: W is an input, so its regrouping runs as instructions
  bool fuses = true;             // 3-D stays unfused
  bool sigmoid = false;          // a Sigmoid node after it (the conv's epilogue once fused)
};

// Input patterns: what x, w and the bias hold.
enum class Pattern { kRandom, kTinyProducts, kZeroInput, kNonFiniteWeights, kNonFiniteInput, kCancelling };

std::string PatternName(Pattern p) {
  switch (p) {
    case Pattern::kRandom: return "random";
    case Pattern::kTinyProducts: return "tiny products";
    case Pattern::kZeroInput: return "zero input";
    case Pattern::kNonFiniteWeights: return "non-finite weights";
    case Pattern::kNonFiniteInput: return "non-finite input";
    case Pattern::kCancelling: return "cancelling partial sums";
  }
  return "";
}

// Values whose products underflow: +-2^-80 times +-2^-80 rounds to a signed zero, so sums of
// such terms are -0 or +0 depending on the order and on which zero terms are taken.
void FillTiny(Tensor& t, uint32_t seed, bool with_normal) {
  std::mt19937 rng(seed);
  float* v = t.data_as<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const uint32_t r = rng() % 8;
    const float tiny = std::ldexp(1.0f, -80);
    if (r < 3) v[i] = -tiny;
    else if (r < 5) v[i] = tiny;
    else if (r == 5) v[i] = -0.0f;
    else if (r == 6) v[i] = 0.0f;
    else v[i] = with_normal ? -0.75f : -tiny;
  }
}

// Values whose partial sums cancel: +-2^24 and small values, weights +-1 and +-0.5, so that a
// term taken out of order, twice or not at all changes the rounded sum.
void FillCancelling(Tensor& t, uint32_t seed) {
  std::mt19937 rng(seed);
  float* v = t.data_as<float>();
  static constexpr float kValues[] = {16777216.0f, -16777216.0f, 1.0f, -0.75f, 3.0f, -16777216.0f, 0.5f};
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = kValues[rng() % 7];
}

// The model with a Sigmoid node reading the ConvTranspose's output.
std::vector<uint8_t> WithSigmoidAfter(const std::vector<uint8_t>& bytes) {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  onnx::GraphProto* g = model.mutable_graph();
  g->mutable_node(0)->set_output(0, "t");
  onnx::NodeProto* sigmoid = g->add_node();
  sigmoid->set_op_type("Sigmoid");
  sigmoid->set_name("sigmoid");
  sigmoid->add_input("t");
  sigmoid->add_output("y");
  const std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

int CountStuffedConvs(const Program& p) {
  int n = 0;
  for (const Instruction& ins : p.fused_instructions) n += ins.params.input_stuffing.empty() ? 0 : 1;
  return n;
}

void CheckCaseOnce(const Case& c, Pattern pattern, uint32_t seed);

// Each case twice: with the kernel's own choice (skip the zeros, or run the GEMM over the
// stuffed input built in scratch memory), and skipping the zeros everywhere.
void CheckCase(const Case& c, Pattern pattern, uint32_t seed) {
  for (bool always_skip : {false, true}) {
    SCOPED_TRACE(always_skip ? "zeros always skipped" : "the kernel's choice");
    kernels::cpu::SetConvAlwaysSkipStuffedZerosForTesting(always_skip);
    CheckCaseOnce(c, pattern, seed);
    kernels::cpu::SetConvAlwaysSkipStuffedZerosForTesting(false);
  }
}

void CheckCaseOnce(const Case& c, Pattern pattern, uint32_t seed) {
  SCOPED_TRACE(c.name + " / " + PatternName(pattern));
  const int64_t f = c.w[1] * c.group;
  Tensor x = RandomF32(c.x, seed, 2.0f);
  Tensor w = RandomF32(c.w, seed + 1);
  Tensor b = RandomF32({f}, seed + 2);
  float* wv = w.data_as<float>();
  float* xv = x.data_as<float>();
  float* bv = b.data_as<float>();
  switch (pattern) {
    case Pattern::kRandom:
      wv[1] = -0.0f;
      xv[0] = 0.0f;
      break;
    case Pattern::kTinyProducts:
      FillTiny(x, seed, false);
      FillTiny(w, seed + 1, true);
      for (int64_t i = 0; i < f; ++i) bv[i] = i % 2 ? -0.0f : 0.0f;
      break;
    case Pattern::kZeroInput:
      for (int64_t i = 0; i < x.num_elements(); ++i) xv[i] = i % 3 ? 0.0f : -0.0f;
      for (int64_t i = 0; i < w.num_elements(); ++i) wv[i] = -std::fabs(wv[i]);
      for (int64_t i = 0; i < f; ++i) bv[i] = -0.0f;
      break;
    case Pattern::kNonFiniteWeights:
      wv[0] = std::numeric_limits<float>::infinity();
      wv[w.num_elements() / 2] = std::bit_cast<float>(0x7FA00001u);  // a signalling NaN with a payload
      wv[w.num_elements() - 1] = -std::numeric_limits<float>::infinity();
      break;
    case Pattern::kCancelling:
      FillCancelling(x, seed);
      for (int64_t i = 0; i < w.num_elements(); ++i) wv[i] = (i * 7 + seed) % 4 == 0 ? 0.5f : (i % 3 ? 1.0f : -1.0f);
      for (int64_t i = 0; i < f; ++i) bv[i] = i % 2 ? 16777216.0f : -0.0f;
      break;
    case Pattern::kNonFiniteInput:
      xv[1] = std::numeric_limits<float>::infinity();
      xv[x.num_elements() / 2] = std::bit_cast<float>(0xFFC12345u);  // a NaN with a payload
      xv[x.num_elements() - 1] = -std::numeric_limits<float>::infinity();
      break;
  }

  std::vector<OnnxInput> inputs = {{"x", onnx::TensorProto::FLOAT, c.x}, {"W", onnx::TensorProto::FLOAT, c.w}};
  if (c.bias) inputs.push_back({"B", onnx::TensorProto::FLOAT, {f}});
  std::map<std::string, consensor::testing::OnnxAttr> attrs;
  if (c.group != 1) attrs["group"] = c.group;
  if (!c.strides.empty()) attrs["strides"] = c.strides;
  if (!c.dilations.empty()) attrs["dilations"] = c.dilations;
  if (!c.pads.empty()) attrs["pads"] = c.pads;
  if (!c.output_padding.empty()) attrs["output_padding"] = c.output_padding;
  std::vector<uint8_t> model = OneNodeModel("ConvTranspose", inputs, attrs, 17);
  if (c.sigmoid) model = WithSigmoidAfter(model);
  OnnxImportOptions options;
  std::map<std::string, Tensor> run_inputs = {{"x", x}};
  if (c.constant_weights) {
    options.constant_inputs["W"] = w;
  } else {
    run_inputs["W"] = w;
  }
  if (c.bias) options.constant_inputs["B"] = b;
  Program program;
  ASSERT_NO_FATAL_FAILURE(testing::CompileOneNodeModel(model, options, &program));
  EXPECT_EQ(CountStuffedConvs(program), c.fuses ? 1 : 0);
  if (c.sigmoid) EXPECT_EQ(program.fused_instructions.size(), 1u) << "the sigmoid is the conv's epilogue";
  if (!program.fused_instructions.empty()) testing::ExpectFusedListCoversEveryInstruction(program);
  RunResult want;
  ASSERT_NO_FATAL_FAILURE(testing::RunUnfusedReference(program, run_inputs, &want));
  // "avx2" runs the AVX-512 kernels (conv_stuffed_avx512.cc) where the CPU has AVX-512F: the
  // one-tap kernel for stride == kernel == 2 and pads 0, the blocks otherwise; "avx2 blocks"
  // the blocks everywhere; "avx2 without avx512" the 256-bit kernels.
  for (const std::string variant : {"portable", "avx2", "avx2 blocks", "avx2 without avx512"}) {
    const std::string isa = variant == "portable" ? "portable" : "avx2";
    if (isa == "avx2" && !kernels::cpu::CpuHasAvx2Fma()) continue;
    if (variant.starts_with("avx2") && variant != "avx2 without avx512" && !kernels::cpu::gemm::CpuHasAvx512F())
      continue;
    kernels::cpu::gemm::SetGemmAvx512ForTesting(variant != "avx2 without avx512");
    kernels::cpu::SetConvStuffedOneTapForTesting(variant != "avx2 blocks");
    for (int threads : {1, 2, 8}) {
      SCOPED_TRACE(variant + " at " + std::to_string(threads) + " threads");
      testing::ExpectFusedRunGivesReferenceBits(program, isa, threads, run_inputs, want);
    }
    kernels::cpu::SetConvStuffedOneTapForTesting(true);
    kernels::cpu::gemm::SetGemmAvx512ForTesting(true);
  }
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // The PP-OCRv4 detector's two: 2x2, stride 2, one filter, and many channels and filters.
      {"stride2_k2_one_filter", {1, 6, 5, 7}, {6, 1, 2, 2}, 1, {2, 2}, {}, {}, {}},
      {"stride2_k2", {1, 5, 4, 6}, {5, 4, 2, 2}, 1, {2, 2}, {}, {}, {}},
      // PyTorch's usual upsampler: 4x4, stride 2, pad 1.
      {"stride2_k4_pad1", {2, 3, 5, 4}, {3, 2, 4, 4}, 1, {2, 2}, {}, {1, 1, 1, 1}, {}},
      {"stride3_k3_output_padding", {1, 2, 4, 5}, {2, 3, 3, 3}, 1, {3, 3}, {}, {1, 0, 0, 1}, {2, 1}},
      {"dilation2", {1, 3, 4, 4}, {3, 2, 3, 3}, 1, {2, 2}, {2, 2}, {0, 1, 1, 0}, {1, 1}},
      {"groups_mixed_strides", {1, 4, 5, 3}, {4, 3, 3, 2}, 2, {2, 3}, {1, 2}, {1, 0, 2, 1}, {1, 0}},
      {"depthwise_no_bias", {2, 3, 4, 4}, {3, 1, 3, 3}, 3, {2, 2}, {}, {}, {}, false},
      // Pads over the kernel span: the stuffed input is sliced before the conv.
      {"pads_become_a_slice", {1, 2, 6, 5}, {2, 2, 2, 2}, 1, {2, 2}, {}, {3, 2, 2, 3}, {}},
      {"stride_in_width_only", {1, 2, 3, 5}, {2, 2, 3, 3}, 1, {1, 3}, {}, {1, 1, 1, 1}, {}},
      {"one_d", {2, 3, 5}, {3, 2, 3}, 1, {2}, {2}, {1, 0}, {1}},
      {"one_d_sliced", {1, 2, 7}, {2, 3, 2}, 1, {3}, {}, {4, 3}, {}},
      {"weights_as_input", {1, 3, 4, 4}, {3, 2, 3, 3}, 1, {2, 2}, {}, {1, 1, 0, 0}, {1, 1}, true, false},
      // Wide enough for the AVX-512 blocks' full and masked 16-lane vectors: 26 filters (blocks of
      // 12, 12 and 2), 13 (12 and 1), one filter over 5 vectors and over 2 whole ones, groups of
      // 10 filters with a stride-3 interleave, and a stride in height only (no column interleave).
      {"wide_26_filters", {1, 5, 3, 37}, {5, 26, 2, 2}, 1, {2, 2}, {}, {}, {}},
      {"wide_k4_pad1_13_filters", {1, 3, 4, 21}, {3, 13, 4, 4}, 1, {2, 2}, {}, {1, 1, 1, 1}, {}},
      {"wide_one_filter", {1, 4, 3, 70}, {4, 1, 2, 2}, 1, {2, 2}, {}, {}, {}},
      {"wide_one_filter_whole_vectors", {1, 3, 2, 32}, {3, 1, 2, 2}, 1, {2, 2}, {}, {}, {}},
      {"wide_groups_stride3", {1, 6, 3, 19}, {6, 10, 3, 3}, 2, {3, 3}, {}, {1, 0, 2, 1}, {1, 0}},
      {"wide_height_stride_only", {2, 3, 3, 33}, {3, 9, 3, 1}, 1, {2, 1}, {}, {1, 0, 1, 0}, {}},
      {"three_d_unfused", {1, 2, 3, 2, 3}, {2, 2, 2, 2, 2}, 1, {2, 1, 2}, {}, {}, {}, true, true, false},
      // Stride == kernel == 2, pads 0 (the one-tap kernel): rows of 7 vectors (blocks of 4 and 3,
      // a 5-column tail), 13 vectors (5, 5, 3), one whole vector, fewer than 16 columns; several
      // filters, images and groups; the detector's last one with its sigmoid epilogue.
      {"one_tap_7_vectors", {1, 5, 3, 101}, {5, 1, 2, 2}, 1, {2, 2}, {}, {}, {}},
      {"one_tap_13_vectors_no_bias", {1, 3, 2, 200}, {3, 1, 2, 2}, 1, {2, 2}, {}, {}, {}, false},
      {"one_tap_whole_vector", {1, 4, 2, 16}, {4, 1, 2, 2}, 1, {2, 2}, {}, {}, {}},
      {"one_tap_filters_images_groups", {2, 6, 3, 9}, {6, 2, 2, 2}, 2, {2, 2}, {}, {}, {}},
      {"one_tap_sigmoid", {1, 24, 4, 40}, {24, 1, 2, 2}, 1, {2, 2}, {}, {}, {}, true, true, true, true},
  };
  return cases;
}

TEST(ConvTransposeFusion, FusedConvGivesTheUnfusedBitsOnRandomValues) {
  uint32_t seed = 1700;
  for (const Case& c : Cases()) CheckCase(c, Pattern::kRandom, seed += 10);
}

// Tiny products round to -0 or +0: the sums the fused conv finds -0 are recomputed with every
// stuffed-zero term, which may turn them into +0.
TEST(ConvTransposeFusion, NegativeZeroSumsAreRecomputedWithTheZeroTerms) {
  uint32_t seed = 2700;
  for (const Case& c : Cases()) CheckCase(c, Pattern::kTinyProducts, seed += 10);
}

TEST(ConvTransposeFusion, SignedZeroInputWithNegativeWeightsAndANegativeZeroBias) {
  uint32_t seed = 3700;
  for (const Case& c : Cases()) CheckCase(c, Pattern::kZeroInput, seed += 10);
}

// fma(+0, inf, acc) is NaN: a filter with an infinite or NaN weight takes every zero term.
TEST(ConvTransposeFusion, NonFiniteWeightsTakeEveryZeroTerm) {
  uint32_t seed = 4700;
  for (const Case& c : Cases()) CheckCase(c, Pattern::kNonFiniteWeights, seed += 10);
}

TEST(ConvTransposeFusion, NonFiniteInputs) {
  uint32_t seed = 5700;
  for (const Case& c : Cases()) CheckCase(c, Pattern::kNonFiniteInput, seed += 10);
}

// Terms of +-2^24 and small values: any other order of the terms rounds differently.
TEST(ConvTransposeFusion, CancellingPartialSums) {
  uint32_t seed = 6700;
  for (const Case& c : Cases()) CheckCase(c, Pattern::kCancelling, seed += 10);
}

}  // namespace
}  // namespace consensor::executor
