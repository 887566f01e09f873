// CUDA normalization family (kernels/cuda/normalization.cu): softmax and layer_norm on the
// CPU backend (portable, 1 thread) and the emulated CUDA backend (and a GPU when there is
// one) must give identical bytes: rows shorter and longer than a chunk (fused warp kernels
// and the multi-launch path), softmax over middle axes, -inf rows, NaN, layer_norm with and
// without bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emulated_backend.h"
#include "tests/kernels/cuda_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

OpParams AxisP(int64_t axis) {
  OpParams p;
  p.axis = axis;
  return p;
}

// Runs on the CPU and the CUDA backends, expects success and identical bytes.
HostTensor Compare(const std::string& what, Op op, const OpParams& p, const std::vector<const HostTensor*>& ins,
                   DType odt, const Shape& oshape) {
  HostTensor ref(odt, oshape);
  CompareCudaWithCpu(what, op, p, ins, ref);
  return ref;
}

void Softmax(const HostTensor& x, int64_t axis, const std::string& tag) {
  OpParams p;
  p.axis = axis;
  Compare("softmax " + tag + " axis " + std::to_string(axis), Op::kSoftmax, p, {&x}, DType::kF32, x.shape);
}

void LayerNorm(const HostTensor& x, int64_t axis, bool with_bias, uint32_t seed, const std::string& tag) {
  Shape ns(x.shape.begin() + axis, x.shape.end());
  HostTensor scale(DType::kF32, ns), bias(DType::kF32, ns);
  FillF32(scale, seed);
  FillF32(bias, seed + 1);
  OpParams p;
  p.axis = axis;
  p.epsilon = 1e-5f;
  std::vector<const HostTensor*> ins = {&x, &scale};
  if (with_bias) ins.push_back(&bias);
  Compare("layer_norm " + tag + " axis " + std::to_string(axis) + (with_bias ? " bias" : ""), Op::kLayerNorm, p, ins,
          DType::kF32, x.shape);
}

HostTensor Rand(const Shape& s, uint32_t seed, double specials = 0.0) {
  HostTensor t(DType::kF32, s);
  FillF32(t, seed, specials);
  return t;
}

TEST(CudaNormalization, SoftmaxRows) {
  const int64_t lens[] = {1, 63, 64, 65, 4095, 4096, 4097, 3 * 4096 + 17};
  uint32_t seed = 1;
  for (int64_t n : lens) {
    const int64_t rows = n > 4096 ? 2 : 3;
    HostTensor x = Rand({rows, n}, ++seed);
    Softmax(x, 1, "n=" + std::to_string(n));
  }
  HostTensor one = Rand({100003}, 77);
  Softmax(one, 0, "n=100003");
  HostTensor sp = Rand({4, 5000}, 78, 0.001);
  Softmax(sp, 1, "specials long");
  HostTensor sp2 = Rand({40, 33}, 79, 0.01);
  Softmax(sp2, 1, "specials short");
}

TEST(CudaNormalization, SoftmaxSpecialRows) {
  const uint32_t ninf = 0xFF800000u, pinf = 0x7F800000u;
  // Row 0: all -inf (NaN out); row 1: one +inf; row 2: -inf and finite; row 3: NaN payload.
  HostTensor x = F32Bits({4, 3}, {ninf, ninf, ninf, pinf, 0x3F800000u, 0x80000000u, ninf, 0x3F800000u, 0x40000000u,
                                  0x3F800000u, 0x7FC12345u, 0x00000001u});
  HostTensor y = Compare("softmax specials", Op::kSoftmax, AxisP(1), {&x}, DType::kF32, {4, 3});
  EXPECT_EQ(y.at<uint32_t>(0), kCanon);
  EXPECT_EQ(y.at<uint32_t>(10), kCanon);
  Softmax(x, 0, "specials");
  std::vector<uint32_t> allninf(5000, ninf);
  HostTensor big = F32Bits({5000}, allninf);
  Softmax(big, 0, "long -inf");
}

TEST(CudaNormalization, SoftmaxColumns) {
  Softmax(Rand({3, 70, 5}, 3), 1, "3x70x5");
  Softmax(Rand({70, 33}, 4, 0.01), 0, "70x33");
  Softmax(Rand({2, 3, 4, 5}, 5), 2, "2x3x4x5");
  Softmax(Rand({2, 3, 4, 5}, 5), 0, "2x3x4x5");
  Softmax(Rand({2, 4500, 3}, 6), 1, "2x4500x3");  // columns longer than a chunk
  HostTensor e(DType::kF32, {2, 0, 3});
  Softmax(e, 1, "empty");
  Softmax(e, 2, "empty");
}

TEST(CudaNormalization, LayerNorm) {
  uint32_t seed = 10;
  for (int64_t n : {1, 63, 64, 65, 4095, 4096, 4097, 3 * 4096 + 17}) {
    const int64_t rows = n > 4096 ? 2 : 3;
    HostTensor x = Rand({rows, n}, ++seed);
    for (bool b : {false, true}) LayerNorm(x, 1, b, seed * 3, "n=" + std::to_string(n));
  }
  HostTensor x = Rand({2, 3, 5, 7}, 40, 0.02);
  for (int64_t axis = 0; axis < 4; ++axis)
    for (bool b : {false, true}) LayerNorm(x, axis, b, 41, "2x3x5x7 specials");
  HostTensor one = Rand({100003}, 42);
  LayerNorm(one, 0, true, 43, "n=100003");
  HostTensor e(DType::kF32, {0, 5});
  LayerNorm(e, 1, true, 44, "empty rows");
  HostTensor e2(DType::kF32, {3, 0});
  LayerNorm(e2, 1, false, 45, "empty row");
  // Constant rows: variance 0, r = 1/sqrt(eps).
  HostTensor c = F32({2, 70}, std::vector<float>(140, 3.0f));
  LayerNorm(c, 1, false, 46, "constant");
}

TEST(CudaNormalization, ValidationMatchesCpu) {
  CudaTestBackends& b = GetBackends();
  HostTensor x = Rand({3, 4}, 1);
  HostTensor bad_scale = Rand({3}, 2);
  HostTensor xi(DType::kI32, {3, 4}, 0);
  struct Case {
    Op op;
    int64_t axis;
    std::vector<const HostTensor*> ins;
  };
  const std::vector<Case> cases = {
      {Op::kSoftmax, 2, {&x}},
      {Op::kSoftmax, 0, {&xi}},
      {Op::kSoftmax, 0, {&x, &x}},
      {Op::kLayerNorm, 1, {&x}},
      {Op::kLayerNorm, 1, {&x, &bad_scale}},
  };
  for (const Case& c : cases) {
    HostTensor o1(DType::kF32, {3, 4}), o2(DType::kF32, {3, 4});
    OpParams p;
    p.axis = c.axis;
    Status s1 = RunInArena(*b.cpu, c.op, p, c.ins, o1);
    Status s2 = RunInArena(*b.emu, c.op, p, c.ins, o2);
    EXPECT_FALSE(s1.ok());
    EXPECT_EQ(s1.ToString(), s2.ToString());
  }
}

}  // namespace
}  // namespace consensor::kernels
