// CUDA pool family (kernels/cuda/pool.cu): max_pool2d and avg_pool2d on the CPU backend
// (portable, 1 thread) and the emulated CUDA backend (and a GPU when there is one) must
// give identical bytes: pads, strides, dilations, count_include_pad, all-padding windows,
// NaN payloads (the first NaN's bits are copied), signed zeros.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emulated_backend.h"
#include "tests/kernels/cuda_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

// Runs on the CPU and the CUDA backends, expects success and identical bytes.
HostTensor Compare(const std::string& what, Op op, const OpParams& p, const std::vector<const HostTensor*>& ins,
                   DType odt, const Shape& oshape) {
  HostTensor ref(odt, oshape);
  CompareCudaWithCpu(what, op, p, ins, ref);
  return ref;
}

int64_t OutDim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

void Pool(Op op, const HostTensor& x, std::vector<int64_t> kernel, std::vector<int64_t> strides,
          std::vector<int64_t> dil, std::vector<int64_t> pads, bool include_pad) {
  OpParams p;
  p.kernel = kernel;
  p.strides = strides;
  p.dilations = dil;
  p.pads = pads;
  p.count_include_pad = include_pad;
  const int64_t sh = strides.empty() ? 1 : strides[0], sw = strides.empty() ? 1 : strides[1];
  const int64_t dh = dil.empty() ? 1 : dil[0], dw = dil.empty() ? 1 : dil[1];
  const int64_t t = pads.empty() ? 0 : pads[0], l = pads.empty() ? 0 : pads[1];
  const int64_t bo = pads.empty() ? 0 : pads[2], r = pads.empty() ? 0 : pads[3];
  Shape os = {x.shape[0], x.shape[1], OutDim(x.shape[2], kernel[0], sh, dh, t, bo),
              OutDim(x.shape[3], kernel[1], sw, dw, l, r)};
  std::string what = std::string(OpName(op)) + " k=" + std::to_string(kernel[0]) + "x" + std::to_string(kernel[1]) +
                     " s=" + std::to_string(sh) + "," + std::to_string(sw) + " d=" + std::to_string(dh) + "," +
                     std::to_string(dw) + " pads=" + std::to_string(t) + "," + std::to_string(l) + "," +
                     std::to_string(bo) + "," + std::to_string(r) + " cip=" + std::to_string(include_pad);
  Compare(what, op, p, {&x}, DType::kF32, os);
}

TEST(CudaPool, Configurations) {
  HostTensor x(DType::kF32, {2, 3, 9, 11});
  FillF32(x, 1, 0.03);
  struct Cfg {
    std::vector<int64_t> k, s, d, pads;
  };
  const std::vector<Cfg> cfgs = {
      {{2, 2}, {2, 2}, {}, {}},
      {{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{3, 2}, {2, 3}, {2, 1}, {2, 0, 1, 3}},
      {{1, 1}, {}, {}, {}},
      {{4, 4}, {3, 2}, {2, 3}, {3, 3, 3, 3}},
      {{9, 11}, {}, {}, {}},
      {{2, 2}, {5, 5}, {1, 1}, {4, 4, 4, 4}},  // windows entirely in padding
  };
  for (const Cfg& c : cfgs) {
    for (Op op : {Op::kMaxPool2D, Op::kAvgPool2D}) {
      for (bool cip : {false, true}) Pool(op, x, c.k, c.s, c.d, c.pads, cip);
    }
  }
}

TEST(CudaPool, SpecialWindows) {
  // The first NaN (with payload) is copied; -0 vs +0; all-padding windows.
  HostTensor x = F32Bits({1, 1, 2, 3}, {0x80000000u, 0x00000000u, 0x7FC12345u, 0xFFC00001u, 0x80000000u, 0x00000001u});
  OpParams p;
  p.kernel = {2, 2};
  HostTensor y = Compare("max nan", Op::kMaxPool2D, p, {&x}, DType::kF32, {1, 1, 1, 2});
  EXPECT_EQ(y.at<uint32_t>(0), 0xFFC00001u);
  EXPECT_EQ(y.at<uint32_t>(1), 0x7FC12345u);
  p.kernel = {1, 1};
  p.pads = {2, 2, 2, 2};
  p.strides = {3, 3};
  for (Op op : {Op::kMaxPool2D, Op::kAvgPool2D}) {
    for (bool cip : {false, true}) {
      p.count_include_pad = cip;
      Compare(std::string(OpName(op)) + " padding-only", op, p, {&x}, DType::kF32, {1, 1, 2, 3});
    }
  }
  HostTensor z = F32Bits({1, 1, 1, 2}, {0x80000000u, 0x80000000u});
  OpParams q;
  q.kernel = {1, 2};
  y = Compare("avg -0", Op::kAvgPool2D, q, {&z}, DType::kF32, {1, 1, 1, 1});
  EXPECT_EQ(y.at<uint32_t>(0), 0x80000000u);
  // Empty planes and empty inputs.
  HostTensor e(DType::kF32, {0, 3, 4, 4});
  q.kernel = {2, 2};
  Compare("max empty", Op::kMaxPool2D, q, {&e}, DType::kF32, {0, 3, 3, 3});
  HostTensor e2(DType::kF32, {1, 2, 0, 4});
  q.pads = {1, 0, 1, 0};
  Compare("max H=0", Op::kMaxPool2D, q, {&e2}, DType::kF32, {1, 2, 1, 3});
  Compare("avg H=0", Op::kAvgPool2D, q, {&e2}, DType::kF32, {1, 2, 1, 3});
}

TEST(CudaPool, ValidationMatchesCpu) {
  CudaTestBackends& b = GetBackends();
  HostTensor x(DType::kF32, {1, 1, 4, 4}, 0);
  std::vector<OpParams> cases(4);
  cases[0].kernel = {2};
  cases[1].kernel = {5, 5};
  cases[2].kernel = {2, 2};
  cases[2].strides = {0, 1};
  cases[3].kernel = {2, 2};
  cases[3].pads = {-1, 0, 0, 0};
  for (const OpParams& p : cases) {
    HostTensor o1(DType::kF32, {1, 1, 3, 3}), o2(DType::kF32, {1, 1, 3, 3});
    Status s1 = RunInArena(*b.cpu, Op::kMaxPool2D, p, {&x}, o1);
    Status s2 = RunInArena(*b.emu, Op::kMaxPool2D, p, {&x}, o2);
    EXPECT_FALSE(s1.ok());
    EXPECT_EQ(s1.ToString(), s2.ToString());
  }
  HostTensor o1(DType::kF32, {1, 1, 2, 2}), o2(DType::kF32, {1, 1, 2, 2});
  OpParams p;
  p.kernel = {2, 2};
  EXPECT_EQ(RunInArena(*b.cpu, Op::kAvgPool2D, p, {&x}, o1).ToString(),
            RunInArena(*b.emu, Op::kAvgPool2D, p, {&x}, o2).ToString());
}

}  // namespace
}  // namespace consensor::kernels
