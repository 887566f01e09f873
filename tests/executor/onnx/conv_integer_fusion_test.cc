// ConvInteger's im2col (two constant-index gathers, a reshape and a transpose), fused at
// compilation into one transpose that reads the padded input and the index tables itself
// (docs/DETERMINISM.md 3.1, "ConvInteger's im2col"). The fused program must give the unfused
// lowering's bits (output, result root, and the traced run's trace root) on both CPU ISAs, with
// and without the VNNI int8 kernel, at 1, 2 and 8 threads, for i8 and u8 operands, zero points
// per tensor and per channel (constant or run-time), groups, strides, dilations, pads, 1-D
// inputs, batches and banded im2col matrices.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "tests/executor/onnx/fusion_testing.h"
#include "tests/executor/onnx/onnx_model_builder.h"

namespace consensor::executor {
namespace {

using consensor::testing::OneNodeModel;
using consensor::testing::OnnxInput;

struct Case {
  std::string name;
  Shape x, w;  // x [N, C, D...], w [F, C/group, K...]
  DType x_type = DType::kU8, w_type = DType::kU8;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;
  bool x_zero_point = true;
  bool w_zero_point_per_channel = false;
  bool x_zero_point_constant = false;  // bound at import, as a static quantizer's
  int bands = 1;                       // fused transposes expected: one per band
};

Tensor RandomQuantized(DType d, const Shape& shape, std::mt19937& rng) {
  Tensor t(d, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = static_cast<uint8_t>(rng());
  return t;
}

int32_t OnnxElem(DType d) { return d == DType::kU8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8; }

int CountIm2colTransposes(const Program& p) {
  int n = 0;
  for (const Instruction& ins : p.fused_instructions) n += ins.params.im2col_groups != 0 ? 1 : 0;
  return n;
}

int CountWideningSums(const Program& p) {
  int n = 0;
  for (const Instruction& ins : p.fused_instructions) n += ins.params.sum_widens_i8 ? 1 : 0;
  return n;
}

void CheckCase(const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(seed);
  const int64_t f = c.w[0];
  const Tensor x = RandomQuantized(c.x_type, c.x, rng);
  const Tensor w = RandomQuantized(c.w_type, c.w, rng);
  const Tensor zx = RandomQuantized(c.x_type, {}, rng);
  const Tensor zw = RandomQuantized(c.w_type, c.w_zero_point_per_channel ? Shape{f} : Shape{}, rng);

  std::vector<OnnxInput> inputs = {{"x", OnnxElem(c.x_type), c.x}, {"w", OnnxElem(c.w_type), c.w}};
  if (c.x_zero_point) {  // without one, the weights' zero point is left out too
    inputs.push_back({"zx", OnnxElem(c.x_type), {}});
    inputs.push_back({"zw", OnnxElem(c.w_type), zw.shape()});
  }
  std::map<std::string, consensor::testing::OnnxAttr> attrs;
  if (c.group != 1) attrs["group"] = c.group;
  if (!c.strides.empty()) attrs["strides"] = c.strides;
  if (!c.dilations.empty()) attrs["dilations"] = c.dilations;
  if (!c.pads.empty()) attrs["pads"] = c.pads;
  const std::vector<uint8_t> model = OneNodeModel("ConvInteger", inputs, attrs, 13);
  OnnxImportOptions options;
  options.constant_inputs["w"] = w;
  if (c.x_zero_point) options.constant_inputs["zw"] = zw;
  std::map<std::string, Tensor> run_inputs = {{"x", x}};
  if (c.x_zero_point && c.x_zero_point_constant) options.constant_inputs["zx"] = zx;
  if (c.x_zero_point && !c.x_zero_point_constant) run_inputs["zx"] = zx;
  Program program;
  ASSERT_NO_FATAL_FAILURE(testing::CompileOneNodeModel(model, options, &program));
  EXPECT_EQ(CountIm2colTransposes(program), c.bands);
  // The weights' zero point offset (128 - zw for u8, -zw for i8) is a nonzero constant here, so
  // each band's row sums are a cast of the im2col matrix and a reduce_sum: one widening sum.
  EXPECT_EQ(CountWideningSums(program), c.bands);
  testing::ExpectFusedListCoversEveryInstruction(program);
  RunResult want;
  ASSERT_NO_FATAL_FAILURE(testing::RunUnfusedReference(program, run_inputs, &want));
  for (const std::string isa : {"portable", "avx2"}) {
    if (isa == "avx2" && !kernels::cpu::CpuHasAvx2Fma()) continue;
    // The int8 GEMM on the vpmaddwd kernel, on VNNI, and on AMX tiles for every block.
    for (const std::string kernel : {"", "VNNI", "AMX"}) {
      if (!kernel.empty() && isa == "portable") continue;
      kernels::cpu::gemm::SetGemmVnniForTesting(!kernel.empty());
      kernels::cpu::gemm::SetGemmAmxForTesting(kernel == "AMX");
      kernels::cpu::gemm::SetGemmAmxEveryBlockForTesting(kernel == "AMX");
      for (int threads : {1, 2, 8}) {
        SCOPED_TRACE(isa + (kernel.empty() ? "" : " with " + kernel) + " at " + std::to_string(threads) + " threads");
        testing::ExpectFusedRunGivesReferenceBits(program, isa, threads, run_inputs, want);
      }
    }
    kernels::cpu::gemm::SetGemmVnniForTesting(true);
    kernels::cpu::gemm::SetGemmAmxForTesting(true);
    kernels::cpu::gemm::SetGemmAmxEveryBlockForTesting(false);
  }
}

TEST(ConvIntegerFusion, FusedIm2colGivesTheUnfusedBits) {
  const std::vector<Case> cases = {
      // IS-Net's usual one: 3x3, pad 1, u8 x with a run-time zero point, u8 weights.
      {"3x3_pad1", {1, 5, 9, 11}, {4, 5, 3, 3}, DType::kU8, DType::kU8, 1, {}, {}, {1, 1, 1, 1}},
      // 72 output pixels by 40 filters by K = 72: the AMX kernel's 32 x 32 tiles, its last 8 rows
      // and 8 columns, and a k-tail of 8.
      {"many_filters", {1, 8, 8, 9}, {40, 8, 3, 3}, DType::kU8, DType::kU8, 1, {}, {}, {1, 1, 1, 1}},
      // Wider than a tile of 64 output pixels, with a column count that is not a multiple of 8.
      {"wide_rows", {1, 3, 4, 150}, {2, 3, 3, 3}, DType::kU8, DType::kU8, 1, {}, {}, {1, 1, 1, 1}},
      // Enough channels that a tile holds only part of one pixel's window.
      {"many_channels", {1, 700, 4, 5}, {3, 700, 3, 3}, DType::kI8, DType::kU8, 1, {}, {}, {1, 1, 1, 1}},
      {"i8_x_i8_w_per_channel",
       {2, 4, 6, 7},
       {6, 4, 3, 2},
       DType::kI8,
       DType::kI8,
       1,
       {},
       {},
       {0, 1, 2, 0},
       true,
       true},
      {"groups_strides",
       {1, 6, 9, 8},
       {6, 2, 3, 3},
       DType::kU8,
       DType::kI8,
       3,
       {2, 3},
       {},
       {1, 1, 1, 1},
       true,
       true,
       true},
      // IS-Net's RSU blocks dilate: column tables with a step other than one.
      {"dilated", {1, 4, 12, 13}, {3, 4, 3, 3}, DType::kU8, DType::kU8, 1, {}, {2, 3}, {2, 3, 2, 3}},
      {"depthwise_no_zero_points", {2, 5, 6, 6}, {5, 1, 3, 3}, DType::kU8, DType::kU8, 5, {}, {}, {1, 1, 1, 1}, false},
      {"one_by_one_strided", {1, 8, 7, 9}, {4, 8, 1, 1}, DType::kI8, DType::kU8, 1, {2, 2}, {}, {}},
      {"one_d", {2, 3, 17}, {4, 3, 5}, DType::kU8, DType::kU8, 1, {2}, {2}, {3, 1}},
      // 180 x 180 outputs of 64 channels: an im2col matrix over 16 Mi elements, in two bands.
      {"bands",
       {1, 64, 180, 180},
       {3, 64, 3, 3},
       DType::kU8,
       DType::kU8,
       1,
       {},
       {},
       {1, 1, 1, 1},
       true,
       true,
       false,
       2},
  };
  uint32_t seed = 1900;
  for (const Case& c : cases) CheckCase(c, seed += 10);
}

}  // namespace
}  // namespace consensor::executor
