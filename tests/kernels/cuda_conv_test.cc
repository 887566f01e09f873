// The CUDA conv family (kernels/cuda/conv.cu, an implicit GEMM) against the CPU backend,
// bit for bit: the same KernelCall runs on the portable single-threaded CpuBackend, on the
// emulated CUDA backend (the exact kernel source under the SIMT emulation) and, where a GPU
// is usable, on the real CUDA backend. Covers strides, asymmetric pads, dilations, groups,
// depthwise, bias, windows in the padding, special values and the validation errors.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emulated_backend.h"
#include "tests/kernels/cuda_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

// Runs on the CPU reference and on every CUDA backend; expects identical bytes.
void Compare(Op op, std::vector<HostTensor> inputs, DType out_dtype, const Shape& out_shape,
             const OpParams& params = {}) {
  HostTensor ref(out_dtype, out_shape);
  CompareCudaWithCpu(std::string(OpName(op)) + " " + ShapeToString(out_shape), op, params, Ptrs(inputs), ref);
}

struct Conv {
  int64_t N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group;
  bool bias;
  int64_t OH() const { return (H + pt + pb - dh * (KH - 1) - 1) / sh + 1; }
  int64_t OW() const { return (W + pl + pr - dw * (KW - 1) - 1) / sw + 1; }
  OpParams Params() const {
    OpParams p;
    p.strides = {sh, sw};
    p.dilations = {dh, dw};
    p.pads = {pt, pl, pb, pr};
    p.kernel = {KH, KW};
    p.group = group;
    return p;
  }
  std::string ToString() const {
    return "N" + std::to_string(N) + " C" + std::to_string(C) + " H" + std::to_string(H) + " W" + std::to_string(W) +
           " F" + std::to_string(F) + " k" + std::to_string(KH) + "x" + std::to_string(KW) + " s" + std::to_string(sh) +
           "," + std::to_string(sw) + " p" + std::to_string(pt) + "," + std::to_string(pl) + "," + std::to_string(pb) +
           "," + std::to_string(pr) + " d" + std::to_string(dh) + "," + std::to_string(dw) + " g" +
           std::to_string(group) + (bias ? " bias" : "");
  }
};

void Check(const Conv& c, uint32_t seed, double special_rate = 0.0) {
  SCOPED_TRACE(c.ToString());
  HostTensor x(DType::kF32, {c.N, c.C, c.H, c.W});
  HostTensor w(DType::kF32, {c.F, c.C / c.group, c.KH, c.KW});
  FillF32(x, seed, special_rate);
  FillF32(w, seed + 101, special_rate);
  std::vector<HostTensor> ins = {x, w};
  if (c.bias) {
    HostTensor b(DType::kF32, {c.F});
    FillF32(b, seed + 202, special_rate);
    ins.push_back(b);
  }
  Compare(Op::kConv2D, ins, DType::kF32, {c.N, c.F, c.OH(), c.OW()}, c.Params());
}

const std::vector<Conv>& Cases() {
  static const std::vector<Conv> cases = {
      // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
      {2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},      // 3x3 same
      {1, 4, 9, 7, 6, 3, 2, 2, 3, 0, 2, 1, 0, 1, 1, 2, false},     // strides, asymmetric pads, groups
      {1, 2, 10, 11, 3, 3, 3, 1, 2, 2, 1, 0, 3, 2, 3, 1, true},    // dilations
      {2, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, true},      // depthwise
      {1, 4, 6, 5, 8, 3, 3, 2, 1, 1, 0, 1, 2, 1, 1, 4, false},     // depthwise, multiplier 2
      {2, 5, 6, 7, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true},      // 1x1
      {2, 6, 5, 4, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3, false},     // grouped 1x1
      {1, 3, 5, 5, 2, 1, 1, 1, 1, 1, 0, 0, 2, 1, 1, 1, true},      // padded 1x1
      {1, 2, 4, 4, 3, 3, 3, 1, 1, 4, 4, 4, 4, 1, 1, 1, true},      // windows fully in padding
      {1, 2, 3, 2, 3, 5, 4, 1, 1, 2, 2, 2, 2, 1, 1, 1, false},     // kernel larger than input
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false},     // 1x1x1x1
      {1, 3, 12, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},    // P = 156 > one 128 tile, Kc = 27
      {1, 1, 12, 12, 130, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1, true},  // F = 130 > one 128 tile
      {1, 12, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},    // Kc = 108, K tail 4
      {2, 4, 7, 9, 4, 3, 5, 2, 1, 2, 0, 1, 2, 1, 2, 2, true},      // odd everything
  };
  return cases;
}

TEST(CudaConv, MatchesCpu) {
  uint32_t seed = 1;
  for (const Conv& c : Cases()) Check(c, seed++);
}

TEST(CudaConv, SpecialValuesMatchCpu) {
  uint32_t seed = 100;
  for (const Conv& c : Cases()) Check(c, seed++, /*special_rate=*/0.1);
}

TEST(CudaConv, EmptyShapes) {
  Check({0, 3, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, 7);   // N = 0
  Check({1, 3, 5, 5, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}, 8);  // F = 0
  Check({1, 0, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, 9);   // C = 0: bias only
  Check({1, 2, 3, 3, 2, 4, 4, 1, 1, 0, 0, 0, 0, 1, 1, 1, true}, 10);  // OH = OW = 0
}

TEST(CudaConv, InvalidArgumentsMatchCpu) {
  CudaTestBackends& be = GetBackends();
  auto code = [&](Backend& bk, const OpParams& p, const Shape& xs, const Shape& ws, const Shape& ys, int bias_n) {
    std::vector<HostTensor> ins = {HostTensor(DType::kF32, xs), HostTensor(DType::kF32, ws)};
    if (bias_n >= 0) ins.push_back(HostTensor(DType::kF32, {bias_n}));
    HostTensor out(DType::kF32, ys);
    return RunInArena(bk, Op::kConv2D, p, Ptrs(ins), out).code();
  };
  const Conv base{1, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false};
  OpParams good = base.Params();
  OpParams bad_stride = good;
  bad_stride.strides = {0, 1};
  OpParams bad_pads = good;
  bad_pads.pads = {1, 1, 1};
  OpParams bad_group = good;
  bad_group.group = 3;
  OpParams neg_pad = good;
  neg_pad.pads = {-1, 0, 0, 0};
  struct Case {
    OpParams p;
    Shape xs, ws, ys;
    int bias_n;
  };
  const std::vector<Case> cases = {
      {bad_stride, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 4, 6, 6}, -1},
      {bad_pads, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 4, 6, 6}, -1},
      {bad_group, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 4, 6, 6}, -1},
      {neg_pad, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 4, 6, 6}, -1},
      {good, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 4, 5, 6}, -1},  // wrong output shape
      {good, {1, 4, 6, 6}, {4, 2, 3, 3}, {1, 4, 6, 6}, -1},  // w.dims[1] != C / group
      {good, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 4, 6, 6}, 3},   // bias size
      {good, {4, 6, 6}, {4, 4, 3, 3}, {1, 4, 6, 6}, -1},     // rank
  };
  for (const Case& c : cases) {
    const StatusCode want = code(*be.cpu, c.p, c.xs, c.ws, c.ys, c.bias_n);
    EXPECT_EQ(want, StatusCode::kInvalidArgument);
    EXPECT_EQ(code(*be.emu, c.p, c.xs, c.ws, c.ys, c.bias_n), want);
  }
}

}  // namespace
}  // namespace consensor::kernels
