// The CUDA elementwise family (kernels/cuda/elementwise.cu) against the CPU backend, bit
// for bit: the same KernelCall runs on the portable single-threaded CpuBackend, on the
// emulated CUDA backend (the exact kernel source under the SIMT emulation) and, where a
// GPU is usable, on the real CUDA backend. Inputs mix random values with specials (NaN
// payloads, infinities, signed zeros, denormals, integer extremes); shapes cover rank 0
// to 8, zero-size tensors, broadcasting patterns and misaligned (non-vector) operands.
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

// Runs on every backend; statuses must agree in code, outputs bit for bit. Returns the
// CPU status.
Status Compare(Op op, std::vector<HostTensor> inputs, DType out_dtype, Shape out_shape, const OpParams& params = {},
               int misalign = 0, const std::string& what = "") {
  const CudaCompareOptions options{
      .input_misalign = std::vector<int>(inputs.size(), misalign), .out_misalign = misalign, .cpu_must_succeed = false};
  const std::string label = std::string(OpName(op)) + " " + ShapeToString(out_shape) + " " +
                            std::string(DTypeName(out_dtype)) + " misalign " + std::to_string(misalign) + " " + what;
  HostTensor ref(out_dtype, out_shape);
  return CompareCudaWithCpu(label, op, params, Ptrs(inputs), ref, options);
}

// Random content of any dtype with a share of special values.
HostTensor RandomTensor(DType t, const Shape& shape, uint32_t seed) {
  HostTensor x(t, shape);
  std::mt19937_64 rng(seed);
  const int64_t n = x.numel();
  switch (t) {
    case DType::kF32: FillF32(x, seed, 0.25); break;
    case DType::kI32: {
      const int32_t sp[] = {0, 1, -1, 2, -2, 7, INT32_MIN, INT32_MAX, INT32_MIN + 1, 16777217, -16777217};
      for (int64_t i = 0; i < n; ++i) {
        x.as<int32_t>()[i] = rng() % 3 == 0 ? sp[rng() % 11] : static_cast<int32_t>(rng());
      }
      break;
    }
    case DType::kI8: {
      const int8_t sp[] = {0, 1, -1, 2, -2, 127, -128, -127};
      for (int64_t i = 0; i < n; ++i) x.as<int8_t>()[i] = rng() % 3 == 0 ? sp[rng() % 8] : static_cast<int8_t>(rng());
      break;
    }
    case DType::kI64: {
      const int64_t sp[] = {
          0, 1, -1, 3, -3, INT64_MIN, INT64_MAX, INT64_MIN + 1, (int64_t{1} << 53) + 1, -(int64_t{1} << 40)};
      for (int64_t i = 0; i < n; ++i) {
        x.as<int64_t>()[i] = rng() % 3 == 0 ? sp[rng() % 10] : static_cast<int64_t>(rng());
      }
      break;
    }
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) x.as<uint8_t>()[i] = static_cast<uint8_t>(rng() & 1);
      break;
    default: break;
  }
  return x;
}

// f32 values that are interesting for casts to integers (around the saturation bounds).
HostTensor CastF32Inputs(const Shape& shape, uint32_t seed) {
  HostTensor x = RandomTensor(DType::kF32, shape, seed);
  const float sp[] = {127.0f,        127.5f,         128.0f,         -128.0f,        -128.5f,       -129.0f,
                      2147483520.0f, 2147483648.0f,  -2147483648.0f, -2147483904.0f, 9.2233715e18f, 9.223372e18f,
                      -9.223372e18f, -9.2233730e18f, 0.5f,           -0.5f,          -0.0f,         1e30f,
                      -1e30f,        255.9f,         3.99f,          -3.99f};
  std::mt19937 rng(seed + 1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (rng() % 2 == 0) x.as<float>()[i] = sp[rng() % (sizeof(sp) / sizeof(sp[0]))];
  }
  return x;
}

const DType kAll[] = {DType::kF32, DType::kI32, DType::kI8, DType::kBool, DType::kI64};
const DType kNumeric[] = {DType::kF32, DType::kI32, DType::kI8, DType::kI64};

// Unary shapes: rank 0, zero-size, odd and vector-sized lengths, rank 8.
const std::vector<Shape>& UnaryShapes() {
  static const std::vector<Shape> s = {{}, {0}, {1}, {7}, {64}, {131}, {3, 0, 2}, {2, 3, 5}, {1, 2, 1, 2, 1, 3, 1, 2}};
  return s;
}

struct BinShape {
  Shape a, b, out;
};
// Broadcast patterns: same shape, scalar either side, row/column vectors, stretched
// middle dims, rank difference, zero-size and rank 8.
const std::vector<BinShape>& BinaryShapes() {
  static const std::vector<BinShape> s = {
      {{}, {}, {}},
      {{37}, {37}, {37}},
      {{64}, {64}, {64}},
      {{}, {33}, {33}},
      {{33}, {}, {33}},
      {{1}, {9}, {9}},
      {{4, 9}, {9}, {4, 9}},
      {{4, 1}, {1, 9}, {4, 9}},
      {{4, 1}, {4, 9}, {4, 9}},
      {{2, 1, 5}, {3, 1}, {2, 3, 5}},
      {{2, 3, 1, 4}, {1, 3, 5, 1}, {2, 3, 5, 4}},
      {{0, 3}, {3}, {0, 3}},
      {{2, 0}, {1, 1}, {2, 0}},
      {{2, 1, 2, 1, 2, 1, 2, 3}, {1, 2, 1, 2, 1, 2, 1, 3}, {2, 2, 2, 2, 2, 2, 2, 3}},
  };
  return s;
}

const Op kNumericUnaryOps[] = {Op::kNeg, Op::kAbs, Op::kRelu};
const Op kFloatUnaryOps[] = {Op::kExp,  Op::kLog,     Op::kSqrt,     Op::kRsqrt, Op::kTanh, Op::kSigmoid,
                             Op::kErf,  Op::kGeluErf, Op::kGeluTanh, Op::kSin,   Op::kCos,  Op::kFloor,
                             Op::kCeil, Op::kRound,   Op::kAsin,     Op::kAcos,  Op::kAtan, Op::kSinh,
                             Op::kCosh, Op::kAsinh,   Op::kAcosh,    Op::kAtanh};
// kPow: f32 (detmath) and the exact integer power.
const Op kNumericBinaryOps[] = {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin, Op::kFmod, Op::kPow};
const Op kCompareOps[] = {Op::kEqual, Op::kNotEqual, Op::kLess, Op::kLessEqual, Op::kGreater, Op::kGreaterEqual};
const Op kLogicalOps[] = {Op::kAnd, Op::kOr, Op::kXor};

TEST(CudaElementwiseTest, NumericUnary) {
  uint32_t seed = 1;
  for (Op op : kNumericUnaryOps) {
    for (DType t : kNumeric) {
      for (const Shape& s : UnaryShapes()) {
        for (int mis : {0, 1}) {
          EXPECT_TRUE(Compare(op, {RandomTensor(t, s, seed++)}, t, s, {}, mis).ok());
        }
      }
    }
  }
}

TEST(CudaElementwiseTest, FloatUnary) {
  uint32_t seed = 100;
  for (Op op : kFloatUnaryOps) {
    for (const Shape& s : UnaryShapes()) {
      for (int mis : {0, 3}) {
        EXPECT_TRUE(Compare(op, {RandomTensor(DType::kF32, s, seed++)}, DType::kF32, s, {}, mis).ok());
      }
    }
  }
}

TEST(CudaElementwiseTest, FloatUnaryAllSpecials) {
  // Every special bit pattern the spec cares about, through every f32 unary op.
  std::vector<uint32_t> bits = {0x7FC00000u, 0x7FC00001u, 0xFFC12345u, 0x7F800001u, 0xFFBFFFFFu, 0x7F800000u,
                                0xFF800000u, 0x80000000u, 0x00000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu,
                                0x807FFFFFu, 0x00800000u, 0x3F800000u, 0xBF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                0x42B17218u, 0xC2CFF1B5u, 0x49742400u, 0x4B000001u};
  const int64_t n = static_cast<int64_t>(bits.size());
  for (Op op : kFloatUnaryOps) EXPECT_TRUE(Compare(op, {F32Bits({n}, bits)}, DType::kF32, {n}).ok());
  for (Op op : kNumericUnaryOps) EXPECT_TRUE(Compare(op, {F32Bits({n}, bits)}, DType::kF32, {n}).ok());
  // pow over the cross product of specials.
  std::vector<uint32_t> a, b;
  for (uint32_t x : bits) {
    for (uint32_t y : {0x00000000u, 0x80000000u, 0x3F800000u, 0xBF800000u, 0x40000000u, 0x3F000000u, 0x7F800000u,
                       0xFF800000u, 0x7FC00001u, 0x40400000u, 0xC0400000u, 0x4B800001u}) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const int64_t m = static_cast<int64_t>(a.size());
  EXPECT_TRUE(Compare(Op::kPow, {F32Bits({m}, a), F32Bits({m}, b)}, DType::kF32, {m}).ok());
  for (Op op : kNumericBinaryOps) EXPECT_TRUE(Compare(op, {F32Bits({m}, a), F32Bits({m}, b)}, DType::kF32, {m}).ok());
  for (Op op : kCompareOps) EXPECT_TRUE(Compare(op, {F32Bits({m}, a), F32Bits({m}, b)}, DType::kBool, {m}).ok());
}

TEST(CudaElementwiseTest, NotAndLogical) {
  uint32_t seed = 300;
  for (const Shape& s : UnaryShapes()) {
    EXPECT_TRUE(Compare(Op::kNot, {RandomTensor(DType::kBool, s, seed++)}, DType::kBool, s).ok());
  }
  for (Op op : kLogicalOps) {
    for (const BinShape& bs : BinaryShapes()) {
      EXPECT_TRUE(Compare(op, {RandomTensor(DType::kBool, bs.a, seed++), RandomTensor(DType::kBool, bs.b, seed++)},
                          DType::kBool, bs.out)
                      .ok());
    }
  }
}

TEST(CudaElementwiseTest, NumericBinary) {
  uint32_t seed = 500;
  for (Op op : kNumericBinaryOps) {
    for (DType t : kNumeric) {
      for (const BinShape& bs : BinaryShapes()) {
        EXPECT_TRUE(Compare(op, {RandomTensor(t, bs.a, seed++), RandomTensor(t, bs.b, seed++)}, t, bs.out).ok());
      }
      // Misaligned contiguous operands (the scalar path of the flat kernel).
      EXPECT_TRUE(Compare(op, {RandomTensor(t, {67}, seed++), RandomTensor(t, {67}, seed++)}, t, {67}, {}, 1).ok());
    }
  }
}

TEST(CudaElementwiseTest, IntegerDivisionEdgeCases) {
  EXPECT_TRUE(Compare(Op::kDiv, {I32({6}, {INT32_MIN, INT32_MIN, 7, -7, 5, 0}), I32({6}, {-1, 0, -2, 2, 0, 0})},
                      DType::kI32, {6})
                  .ok());
  EXPECT_TRUE(Compare(Op::kDiv, {I8({5}, {-128, -128, 127, -7, 3}), I8({5}, {-1, 0, -1, 2, 0})}, DType::kI8, {5}).ok());
  EXPECT_TRUE(
      Compare(Op::kDiv, {I64({4}, {INT64_MIN, INT64_MIN, -9, 9}), I64({4}, {-1, 0, 4, -4})}, DType::kI64, {4}).ok());
  EXPECT_TRUE(Compare(Op::kAbs, {I8({3}, {-128, -1, 127})}, DType::kI8, {3}).ok());
  EXPECT_TRUE(Compare(Op::kNeg, {I64({3}, {INT64_MIN, -1, INT64_MAX})}, DType::kI64, {3}).ok());
  EXPECT_TRUE(Compare(Op::kMul, {I32({2}, {INT32_MAX, INT32_MIN}), I32({2}, {2, -1})}, DType::kI32, {2}).ok());
}

TEST(CudaElementwiseTest, Pow) {
  uint32_t seed = 700;
  for (const BinShape& bs : BinaryShapes()) {
    EXPECT_TRUE(Compare(Op::kPow, {RandomTensor(DType::kF32, bs.a, seed++), RandomTensor(DType::kF32, bs.b, seed++)},
                        DType::kF32, bs.out)
                    .ok());
  }
}

TEST(CudaElementwiseTest, Compare) {
  uint32_t seed = 900;
  for (Op op : kCompareOps) {
    for (DType t : kAll) {
      for (const BinShape& bs : BinaryShapes()) {
        EXPECT_TRUE(
            Compare(op, {RandomTensor(t, bs.a, seed++), RandomTensor(t, bs.b, seed++)}, DType::kBool, bs.out).ok());
      }
    }
  }
}

TEST(CudaElementwiseTest, Where) {
  uint32_t seed = 1100;
  const std::vector<std::vector<Shape>> shapes = {
      {{}, {}, {}, {}},
      {{50}, {50}, {50}, {50}},
      {{64}, {64}, {64}, {64}},
      {{}, {13}, {13}, {13}},
      {{13}, {}, {13}, {13}},
      {{13}, {13}, {}, {13}},
      {{3, 1}, {1, 4}, {4}, {3, 4}},
      {{2, 1, 3}, {4, 1}, {1, 1, 1}, {2, 4, 3}},
      {{0, 2}, {2}, {1}, {0, 2}},
      {{2, 1, 2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 3}, {3}, {2, 2, 2, 2, 2, 2, 2, 3}},
  };
  for (DType t : kAll) {
    for (const auto& s : shapes) {
      for (int mis : {0, 1}) {
        EXPECT_TRUE(Compare(Op::kWhere,
                            {RandomTensor(DType::kBool, s[0], seed++), RandomTensor(t, s[1], seed++),
                             RandomTensor(t, s[2], seed++)},
                            t, s[3], {}, mis)
                        .ok());
      }
    }
  }
}

TEST(CudaElementwiseTest, CastAllPairs) {
  uint32_t seed = 1300;
  for (DType from : kAll) {
    for (DType to : kAll) {
      OpParams p;
      p.to = to;
      for (const Shape& s : {Shape{}, Shape{0}, Shape{45}, Shape{64}, Shape{3, 1, 7}}) {
        HostTensor x = from == DType::kF32 ? CastF32Inputs(s, seed++) : RandomTensor(from, s, seed++);
        EXPECT_TRUE(Compare(Op::kCast, {x}, to, s, p).ok()) << DTypeName(from) << " -> " << DTypeName(to);
      }
      HostTensor x = from == DType::kF32 ? CastF32Inputs({33}, seed++) : RandomTensor(from, {33}, seed++);
      EXPECT_TRUE(Compare(Op::kCast, {x}, to, {33}, p, 1).ok()) << DTypeName(from) << " -> " << DTypeName(to);
    }
  }
}

TEST(CudaElementwiseTest, LargerFlatAndStrided) {
  // Enough elements for several grid-stride iterations per emulated thread.
  EXPECT_TRUE(Compare(Op::kAdd, {RandomTensor(DType::kF32, {40000}, 1), RandomTensor(DType::kF32, {40000}, 2)},
                      DType::kF32, {40000})
                  .ok());
  EXPECT_TRUE(Compare(Op::kMul, {RandomTensor(DType::kF32, {100, 1, 70}, 3), RandomTensor(DType::kF32, {1, 60, 70}, 4)},
                      DType::kF32, {100, 60, 70})
                  .ok());
  EXPECT_TRUE(Compare(Op::kExp, {RandomTensor(DType::kF32, {20011}, 5)}, DType::kF32, {20011}).ok());
}

TEST(CudaElementwiseTest, ErrorsMatchCpu) {
  // Each must fail on every backend with the same code.
  auto expect_error = [](Op op, std::vector<HostTensor> in, DType out, Shape shape, const OpParams& p = {}) {
    Status s = Compare(op, std::move(in), out, std::move(shape), p);
    EXPECT_FALSE(s.ok()) << OpName(op);
  };
  expect_error(Op::kAdd, {F32({3}, {1, 2, 3}), I32({3}, {1, 2, 3})}, DType::kF32, {3});  // dtypes differ
  expect_error(Op::kAdd, {F32({3}, {1, 2, 3}), F32({2}, {1, 2})}, DType::kF32, {3});     // not broadcastable
  expect_error(Op::kAdd, {F32({3}, {1, 2, 3}), F32({3}, {1, 2, 3})}, DType::kF32, {4});  // wrong output shape
  expect_error(Op::kAdd, {F32({3}, {1, 2, 3}), F32({3}, {1, 2, 3})}, DType::kI32, {3});  // wrong output dtype
  expect_error(Op::kExp, {I32({2}, {1, 2})}, DType::kI32, {2});                          // f32 only
  expect_error(Op::kNeg, {Bool({2}, {1, 0})}, DType::kBool, {2});                        // numeric only
  expect_error(Op::kNot, {F32({2}, {1, 0})}, DType::kF32, {2});                          // bool only
  expect_error(Op::kAnd, {I8({2}, {1, 0}), I8({2}, {1, 0})}, DType::kBool, {2});         // bool only
  expect_error(Op::kLess, {F32({2}, {1, 0}), F32({2}, {1, 0})}, DType::kF32, {2});       // -> bool
  expect_error(Op::kPow, {Bool({2}, {1, 0}), Bool({2}, {1, 0})}, DType::kBool, {2});     // numeric only
  expect_error(Op::kPow, {I32({2}, {1, 0}), F32({2}, {1, 0})}, DType::kI32, {2});        // one dtype
  expect_error(Op::kWhere, {I8({2}, {1, 0}), F32({2}, {1, 0}), F32({2}, {1, 0})}, DType::kF32, {2});    // cond
  expect_error(Op::kWhere, {Bool({2}, {1, 0}), F32({2}, {1, 0}), I32({2}, {1, 0})}, DType::kF32, {2});  // values
  expect_error(Op::kAdd, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {1, 2, 3})}, DType::kF32, {3});     // in rank > out
  OpParams p;
  p.to = DType::kI32;
  expect_error(Op::kCast, {F32({2}, {1, 0})}, DType::kI8, {2}, p);  // target differs from output
}

// u8, i16, u16, u32 and u64 on the CUDA backends, and the refusal of f64: tests/kernels/cuda_int_test.cc.

}  // namespace
}  // namespace consensor::kernels
