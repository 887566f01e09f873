// The CUDA matmul family (kernels/cuda/matmul.cu) against the CPU backend, bit for bit:
// the same KernelCall runs on the portable single-threaded CpuBackend, on the emulated
// CUDA backend (the exact kernel source under the SIMT emulation) and, where a GPU is
// usable, on the real CUDA backend. Shapes straddle the 128 x 128 x 8 (f32) and
// 128 x 128 x 64 (i8, tensor cores, 3-stage pipeline, K padded to 16) tiles of the kernels.
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

Shape BroadcastOut(const Shape& a, const Shape& b) {
  const size_t nb = std::max(a.size(), b.size()) - 2;
  Shape y(nb + 2);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t ia = static_cast<int64_t>(i) - static_cast<int64_t>(nb - (a.size() - 2));
    const int64_t ib = static_cast<int64_t>(i) - static_cast<int64_t>(nb - (b.size() - 2));
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    y[i] = da == 1 ? db : da;
  }
  y[nb] = a[a.size() - 2];
  y[nb + 1] = b.back();
  return y;
}

void CheckF32(const Shape& as, const Shape& bs, uint32_t seed, double special_rate = 0.0) {
  SCOPED_TRACE("matmul " + ShapeToString(as) + " x " + ShapeToString(bs));
  HostTensor a(DType::kF32, as), b(DType::kF32, bs);
  FillF32(a, seed, special_rate);
  FillF32(b, seed + 7919, special_rate);
  Compare(Op::kMatMul, {a, b}, DType::kF32, BroadcastOut(as, bs));
}

void CheckI8(const Shape& as, const Shape& bs, uint32_t seed) {
  SCOPED_TRACE("matmul_i8 " + ShapeToString(as) + " x " + ShapeToString(bs));
  HostTensor a(DType::kI8, as), b(DType::kI8, bs);
  FillInt<int8_t>(a, seed);
  FillInt<int8_t>(b, seed + 7919);
  Compare(Op::kMatMulInt8, {a, b}, DType::kI32, BroadcastOut(as, bs));
}

TEST(CudaMatMul, F32TinyAndOdd) {
  uint32_t seed = 1;
  CheckF32({1, 1}, {1, 1}, seed++);
  CheckF32({7, 5}, {5, 13}, seed++);
  CheckF32({3, 8}, {8, 4}, seed++);  // exactly one K-tile, vector loads
  CheckF32({5, 9}, {9, 3}, seed++);  // one full K-tile plus a tail of 1
  CheckF32({2, 16}, {16, 2}, seed++);
  CheckF32({1, 33}, {33, 1}, seed++);
  CheckF32({1, 4}, {4, 200}, seed++);  // N over two tiles, vector paths
}

TEST(CudaMatMul, F32EdgeTiles) {
  uint32_t seed = 20;
  CheckF32({129, 17}, {17, 131}, seed++);
  CheckF32({128, 8}, {8, 128}, seed++);
  CheckF32({130, 12}, {12, 127}, seed++);
  CheckF32({64, 40}, {40, 132}, seed++);  // N % 4 == 0 with a partial second tile
}

TEST(CudaMatMul, F32EmptyDims) {
  uint32_t seed = 40;
  CheckF32({0, 5}, {5, 3}, seed++);  // M = 0
  CheckF32({4, 0}, {0, 3}, seed++);  // K = 0: all +0.0
  CheckF32({4, 5}, {5, 0}, seed++);  // N = 0
  CheckF32({2, 0, 5}, {5, 3}, seed++);
  CheckF32({0, 4, 5}, {5, 3}, seed++);  // empty batch
}

TEST(CudaMatMul, F32BatchBroadcast) {
  uint32_t seed = 60;
  CheckF32({2, 3, 5, 7}, {2, 3, 7, 4}, seed++);
  CheckF32({2, 1, 5, 7}, {1, 3, 7, 4}, seed++);
  CheckF32({3, 5, 7}, {7, 4}, seed++);
  CheckF32({5, 7}, {2, 2, 7, 4}, seed++);
  CheckF32({4, 1, 6, 9}, {3, 9, 10}, seed++);
}

TEST(CudaMatMul, F32SpecialValues) {
  uint32_t seed = 80;
  CheckF32({9, 11}, {11, 10}, seed++, 0.15);
  CheckF32({33, 21}, {21, 35}, seed++, 0.05);
  // Hand-made: inf * 0 = NaN, inf - inf = NaN, -0 sums, denormal products.
  HostTensor a = F32Bits({2, 3}, {0x7F800000u, 0x00000000u, 0x3F800000u,    // inf, 0, 1
                                  0x80000000u, 0x00000001u, 0xFF800000u});  // -0, denorm, -inf
  HostTensor b = F32Bits({3, 3}, {0x00000000u, 0x3F800000u, 0x80000000u, 0x7FC12345u, 0x3F800000u, 0x80000000u,
                                  0x80000000u, 0x7F800000u, 0x00800000u});
  Compare(Op::kMatMul, {a, b}, DType::kF32, {2, 3});
}

TEST(CudaMatMul, I8) {
  uint32_t seed = 100;
  CheckI8({1, 1}, {1, 1}, seed++);
  CheckI8({7, 5}, {5, 13}, seed++);
  CheckI8({129, 37}, {37, 131}, seed++);  // K tail of 5 after one 32-byte tile
  CheckI8({3, 64}, {64, 5}, seed++);
  CheckI8({4, 0}, {0, 3}, seed++);
  CheckI8({0, 3}, {3, 3}, seed++);
  CheckI8({2, 1, 5, 7}, {1, 3, 7, 4}, seed++);
  CheckI8({3, 5, 6}, {6, 2}, seed++);
}

TEST(CudaMatMul, I8TensorCoreTiles) {
  uint32_t seed = 140;
  CheckI8({128, 64}, {64, 128}, seed++);             // one whole tile, A used in place
  CheckI8({200, 200}, {200, 136}, seed++);           // K % 16 = 8: A padded; 4 K-tiles wrap the 3 stages
  CheckI8({64, 256}, {256, 72}, seed++);             // in place, 4 K-tiles
  CheckI8({257, 48}, {48, 9}, seed++);               // three row tiles, N under one MMA column group
  CheckI8({3, 33, 80}, {3, 80, 40}, seed++);         // batches, in place
  CheckI8({2, 1, 17, 96}, {1, 3, 96, 130}, seed++);  // broadcast batches, N over one tile
  CheckI8({5, 17}, {2, 17, 3}, seed++);              // A broadcast over B's batches, padded
}

TEST(CudaMatMul, I8Extremes) {
  // -128 * -128 = 16384 per term, over many K-tiles and a tail. (Overflowing int32 would
  // need more than 2^17 terms: too slow under the emulation; integer sums are exact and
  // wrap by construction there.)
  const int64_t K = 4099;
  HostTensor a(DType::kI8, {2, K}), b(DType::kI8, {K, 3});
  for (int64_t i = 0; i < a.numel(); ++i) a.as<int8_t>()[i] = i < K ? -128 : 127;
  for (int64_t i = 0; i < b.numel(); ++i) b.as<int8_t>()[i] = (i % 3 == 2) ? 127 : -128;
  Compare(Op::kMatMulInt8, {a, b}, DType::kI32, {2, 3});
  HostTensor y(DType::kI32, {2, 3});
  ASSERT_TRUE(RunInArena(*GetBackends().emu, Op::kMatMulInt8, {}, {&a, &b}, y).ok());
  EXPECT_EQ(y.as<int32_t>()[0], static_cast<int32_t>(K * 16384));
  EXPECT_EQ(y.as<int32_t>()[2], static_cast<int32_t>(K * -128 * 127));
}

TEST(CudaMatMul, I8SumsWrapOnTheGpu) {
  // More than 2^17 terms of -128 * -128 overflow int32: the tensor-core accumulation must
  // wrap exactly like the CPU. Too slow under the emulation (its MMA wraps by construction,
  // see SimtTensorCore.MmaS8MatchesThePtxFragmentLayout), so this runs on a real GPU only.
  if (!GetBackends().gpu) GTEST_SKIP() << "no GPU";
  const int64_t K = 131200;
  HostTensor a(DType::kI8, {1, K}), b(DType::kI8, {K, 2});
  for (int64_t i = 0; i < a.numel(); ++i) a.as<int8_t>()[i] = -128;
  for (int64_t i = 0; i < b.numel(); ++i) b.as<int8_t>()[i] = (i % 2) ? 127 : -128;
  HostTensor y(DType::kI32, {1, 2});
  ASSERT_TRUE(RunInArena(*GetBackends().gpu, Op::kMatMulInt8, {}, {&a, &b}, y).ok());
  EXPECT_EQ(y.as<int32_t>()[0], static_cast<int32_t>(static_cast<uint32_t>(K * 16384)));
  EXPECT_EQ(y.as<int32_t>()[1], static_cast<int32_t>(K * -128 * 127));
  HostTensor ref(DType::kI32, {1, 2});
  ASSERT_TRUE(RunInArena(*GetBackends().cpu, Op::kMatMulInt8, {}, {&a, &b}, ref).ok());
  EXPECT_EQ(y.bytes, ref.bytes);
}

TEST(CudaMatMul, InvalidArgumentsMatchCpu) {
  CudaTestBackends& be = GetBackends();
  auto status = [&](Backend& bk, Op op, std::vector<HostTensor> ins, DType od, const Shape& os) {
    HostTensor out(od, os);
    return RunInArena(bk, op, {}, Ptrs(ins), out).code();
  };
  struct Case {
    Op op;
    std::vector<HostTensor> ins;
    DType od;
    Shape os;
  };
  std::vector<Case> cases;
  cases.push_back(
      {Op::kMatMul, {HostTensor(DType::kF32, {2, 3}), HostTensor(DType::kF32, {4, 5})}, DType::kF32, {2, 5}});
  cases.push_back(
      {Op::kMatMul, {HostTensor(DType::kF32, {2, 3}), HostTensor(DType::kF32, {3, 5})}, DType::kF32, {2, 4}});
  cases.push_back(
      {Op::kMatMul, {HostTensor(DType::kI8, {2, 3}), HostTensor(DType::kF32, {3, 5})}, DType::kF32, {2, 5}});
  cases.push_back({Op::kMatMul, {HostTensor(DType::kF32, {3}), HostTensor(DType::kF32, {3, 5})}, DType::kF32, {1, 5}});
  cases.push_back(
      {Op::kMatMul, {HostTensor(DType::kF32, {2, 2, 3}), HostTensor(DType::kF32, {3, 3, 5})}, DType::kF32, {3, 2, 5}});
  cases.push_back(
      {Op::kMatMulInt8, {HostTensor(DType::kI8, {2, 3}), HostTensor(DType::kI8, {3, 5})}, DType::kF32, {2, 5}});
  for (auto& c : cases) {
    const StatusCode want = status(*be.cpu, c.op, c.ins, c.od, c.os);
    EXPECT_EQ(want, StatusCode::kInvalidArgument);
    EXPECT_EQ(status(*be.emu, c.op, c.ins, c.od, c.os), want);
  }
}

}  // namespace
}  // namespace consensor::kernels
