// f16 and bf16 on the CUDA backends (kernels/cuda/half_operands.cu, docs/DETERMINISM.md 1.3,
// 1.4) against the CPU backend, bit for bit: every op family on 16-bit operands (NaN payloads,
// infinities, subnormals included), calls large enough to run a block of rows at a time, the
// bit-copying ops, the refusals; and the conversions on every 16-bit pattern and on every f32
// rounding boundary against kernels/half.h. The CPU side is checked against the f32 rule at
// 1, 2 and 8 threads by tests/kernels/half_test.cc.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "tests/kernels/cuda_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

const DType kHalfTypes[] = {DType::kF16, DType::kBF16};

// Runs on the CPU reference and every CUDA backend; statuses must agree in code, outputs bit
// for bit. Returns the CPU's output (empty when it failed). Without `status` the call must succeed.
HostTensor Compare(const std::string& what, Op op, const std::vector<HostTensor>& inputs, DType out_dtype,
                   const Shape& out_shape, const OpParams& params = {}, int misalign = 0, Status* status = nullptr) {
  const CudaCompareOptions options{.input_misalign = std::vector<int>(inputs.size(), misalign),
                                   .out_misalign = misalign,
                                   .cpu_must_succeed = status == nullptr};
  const std::string label = what + " (" + std::string(OpName(op)) + " -> " + std::string(DTypeName(out_dtype)) + " " +
                            ShapeToString(out_shape) + ", misalign " + std::to_string(misalign) + ")";
  HostTensor ref(out_dtype, out_shape);
  const Status cs = CompareCudaWithCpu(label, op, params, Ptrs(inputs), ref, options);
  if (status != nullptr) *status = cs;
  return cs.ok() ? ref : HostTensor();
}

// Random 16-bit patterns of every class: NaNs with payloads, infinities, subnormals, zeros.
HostTensor RandomHalf(DType t, const Shape& shape, uint32_t seed) {
  HostTensor x(t, shape);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < x.numel(); ++i) x.as<uint16_t>()[i] = static_cast<uint16_t>(rng());
  return x;
}

// Values in [-4, 4) rounded to 16 bits, with a few specials: arithmetic where random exponents
// would only give inf and 0.
HostTensor ModerateHalf(DType t, const Shape& shape, uint32_t seed) {
  HostTensor x(t, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x7E01, 0xFC00};  // +-0, a subnormal, a NaN, -inf
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = u(rng);
    uint16_t h = t == DType::kF16 ? half::F32ToF16(v) : half::F32ToBF16(v);
    if (rng() % 97 == 0) h = specials[rng() % 5];
    x.as<uint16_t>()[i] = h;
  }
  return x;
}

TEST(CudaHalf, ConversionsMatchTheReferenceOnEveryPattern) {
  HostTensor every(DType::kF16, {0x10000});
  for (uint32_t h = 0; h < 0x10000u; ++h) every.as<uint16_t>()[h] = static_cast<uint16_t>(h);
  OpParams to_f32;
  to_f32.to = DType::kF32;
  for (DType t : kHalfTypes) {
    every.dtype = t;
    const HostTensor wide = Compare("every pattern", Op::kCast, {every}, DType::kF32, {0x10000}, to_f32);
    ASSERT_EQ(wide.numel(), 0x10000);
    for (uint32_t h = 0; h < 0x10000u; ++h) {
      const float ref =
          t == DType::kF16 ? half::F16ToF32(static_cast<uint16_t>(h)) : half::BF16ToF32(static_cast<uint16_t>(h));
      ASSERT_EQ(Bits(wide.at<float>(h)), Bits(ref)) << DTypeName(t) << " " << std::hex << h;
    }
  }
  // f32 -> 16 bits on each f16 value, its neighbours and the midpoints around it, the bf16 ties,
  // and a sweep over all exponents (subnormals, overflow, infinities, NaNs of both signs).
  std::vector<uint32_t> bits;
  for (uint32_t h = 0; h < 0x10000u; h += 3) {
    const uint32_t u = Bits(half::F16ToF32(static_cast<uint16_t>(h)));
    const uint32_t next = Bits(half::F16ToF32(static_cast<uint16_t>(h + 1)));
    const uint32_t mid = u + (next - u) / 2;  // same sign and exponent range: the f32 midpoint
    for (uint32_t b : {u, u + 1, u - 1, mid, mid + 1, mid - 1}) bits.push_back(b);
    for (uint32_t low : {0x7FFFu, 0x8000u, 0x8001u}) bits.push_back((h << 16) | low);
  }
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t b : {0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x33000000u, 0x33000001u, 0x7F7FFFFFu, 0x7F800001u}) {
    bits.push_back(b);
  }
  const int64_t n = static_cast<int64_t>(bits.size());
  HostTensor f = Make(DType::kF32, {n}, bits);
  for (DType t : kHalfTypes) {
    OpParams to_half;
    to_half.to = t;
    const HostTensor narrow = Compare("rounding boundaries", Op::kCast, {f}, t, {n}, to_half, 1);
    ASSERT_EQ(narrow.numel(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float x = FromBits(bits[static_cast<size_t>(i)]);
      ASSERT_EQ(narrow.at<uint16_t>(i), t == DType::kF16 ? half::F32ToF16(x) : half::F32ToBF16(x))
          << DTypeName(t) << " " << std::hex << bits[static_cast<size_t>(i)];
    }
  }
}

TEST(CudaHalf, ElementwiseOps) {
  uint32_t seed = 100;
  for (DType t : kHalfTypes) {
    const HostTensor a = RandomHalf(t, {2, 3, 67}, ++seed);
    const HostTensor b = RandomHalf(t, {2, 3, 67}, ++seed);
    const HostTensor m = ModerateHalf(t, {2, 3, 67}, ++seed);
    for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin, Op::kPow, Op::kFmod}) {
      Compare("random", op, {a, b}, t, {2, 3, 67});
      Compare("moderate", op, {m, a}, t, {2, 3, 67}, {}, 1);
    }
    for (Op op : {Op::kEqual, Op::kNotEqual, Op::kLess, Op::kLessEqual, Op::kGreater, Op::kGreaterEqual}) {
      Compare("compare", op, {a, m}, DType::kBool, {2, 3, 67});
    }
    for (Op op : {Op::kNeg,   Op::kAbs,     Op::kRelu,  Op::kExp,     Op::kLog,      Op::kSqrt, Op::kRsqrt,
                  Op::kTanh,  Op::kSigmoid, Op::kErf,   Op::kGeluErf, Op::kGeluTanh, Op::kSin,  Op::kCos,
                  Op::kFloor, Op::kCeil,    Op::kRound, Op::kAsin,    Op::kAcos,     Op::kAtan, Op::kSinh,
                  Op::kCosh,  Op::kAsinh,   Op::kAcosh, Op::kAtanh}) {
      Compare("unary", op, {a}, t, {2, 3, 67});
      Compare("unary moderate", op, {m}, t, {2, 3, 67}, {}, 3);
    }
    // Broadcasting: a column against a row, a scalar against a tensor.
    Compare("column x row", Op::kMul, {ModerateHalf(t, {5, 1}, ++seed), ModerateHalf(t, {1, 7}, ++seed)}, t, {5, 7});
    Compare("scalar / tensor", Op::kDiv, {ModerateHalf(t, {}, ++seed), m}, t, {2, 3, 67});
    // NaN outputs are the canonical 16-bit NaN, whatever the input's payload.
    const HostTensor nans = t == DType::kF16 ? Make(t, {3}, std::vector<uint16_t>{0x7C01, 0xFE12, 0x7E01})
                                             : Make(t, {3}, std::vector<uint16_t>{0x7F81, 0xFFC1, 0xFF81});
    const HostTensor y = Compare("NaN payloads", Op::kAdd, {nans, nans}, t, {3});
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(y.at<uint16_t>(i), t == DType::kF16 ? 0x7E00u : 0x7FC0u) << i;
  }
}

TEST(CudaHalf, ReductionsArgMaxTopKCumSum) {
  uint32_t seed = 200;
  for (DType t : kHalfTypes) {
    const HostTensor x = ModerateHalf(t, {4, 5, 70}, ++seed);
    const HostTensor r = RandomHalf(t, {4, 5, 70}, ++seed);
    for (Op op : {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd}) {
      for (const std::vector<int64_t>& axes : {std::vector<int64_t>{2}, {0, 2}, {1}}) {
        OpParams p;
        p.axes = axes;
        p.keepdims = true;
        Shape out = {4, 5, 70};
        for (int64_t a : axes) out[static_cast<size_t>(a)] = 1;
        Compare("moderate", op, {x}, t, out, p);
        Compare("random", op, {r}, t, out, p);
      }
    }
    for (int64_t axis : {0, 2}) {
      OpParams p;
      p.axis = axis;
      p.keepdims = false;
      Shape out = {4, 5, 70};
      out.erase(out.begin() + axis);
      Compare("argmax", Op::kArgMax, {r}, DType::kI64, out, p);
      OpParams k;
      k.axis = axis;
      k.k = 3;
      k.largest = axis == 0;
      Shape kout = {4, 5, 70};
      kout[static_cast<size_t>(axis)] = 3;
      Compare("top_k", Op::kTopK, {r}, DType::kI64, kout, k);
      OpParams c;
      c.axis = axis;
      c.exclusive = axis == 2;
      c.reverse = true;
      Compare("cumsum", Op::kCumSum, {x}, t, {4, 5, 70}, c);
    }
  }
}

TEST(CudaHalf, MatMulConvPoolNormalization) {
  uint32_t seed = 300;
  for (DType t : kHalfTypes) {
    Compare("2-D weight", Op::kMatMul, {ModerateHalf(t, {2, 5, 37}, ++seed), ModerateHalf(t, {37, 6}, ++seed)}, t,
            {2, 5, 6});
    Compare("batched", Op::kMatMul, {ModerateHalf(t, {3, 4, 9}, ++seed), ModerateHalf(t, {3, 9, 5}, ++seed)}, t,
            {3, 4, 5});

    const HostTensor x = ModerateHalf(t, {3, 40}, ++seed);
    OpParams sp;
    sp.axis = 1;
    Compare("softmax", Op::kSoftmax, {x}, t, {3, 40}, sp);
    Compare("layer_norm", Op::kLayerNorm, {x, ModerateHalf(t, {40}, ++seed), ModerateHalf(t, {40}, ++seed)}, t, {3, 40},
            sp);

    const HostTensor img = ModerateHalf(t, {2, 4, 7, 6}, ++seed);
    Compare("conv2d", Op::kConv2D, {img, ModerateHalf(t, {6, 2, 3, 3}, ++seed), ModerateHalf(t, {6}, ++seed)}, t,
            {2, 6, 7, 3}, GroupedConv3x3({1, 0, 1, 1}));
    const OpParams pool = Pool2x2({0, 0, 1, 0});
    Compare("max_pool2d", Op::kMaxPool2D, {img}, t, {2, 4, 4, 3}, pool);
    Compare("avg_pool2d", Op::kAvgPool2D, {img}, t, {2, 4, 4, 3}, pool);
  }
}

// Calls over about 16K values per operand run a block of rows at a time (DETERMINISM.md 1.3),
// on the CUDA backends as on the CPU.
TEST(CudaHalf, BlocksOfRowsGiveTheCpusBits) {
  uint32_t seed = 400;
  for (DType t : kHalfTypes) {
    const HostTensor a = ModerateHalf(t, {3, 8200}, ++seed);
    Compare("a row per block, the row operand whole", Op::kAdd, {a, ModerateHalf(t, {8200}, ++seed)}, t, {3, 8200});
    Compare("rows of a column, the line whole", Op::kSub,
            {ModerateHalf(t, {300, 1}, ++seed), ModerateHalf(t, {1, 90}, ++seed)}, t, {300, 90});
    Compare("comparison", Op::kGreater, {a, a}, DType::kBool, {3, 8200});
    OpParams to_f32;
    to_f32.to = DType::kF32;
    Compare("cast", Op::kCast, {a}, DType::kF32, {3, 8200}, to_f32);
    Compare("matmul rows", Op::kMatMul, {ModerateHalf(t, {2, 150, 64}, ++seed), ModerateHalf(t, {64, 70}, ++seed)}, t,
            {2, 150, 70});
    OpParams sp;
    sp.axis = 1;
    const HostTensor x = ModerateHalf(t, {40, 600}, ++seed);
    Compare("softmax rows", Op::kSoftmax, {x}, t, {40, 600}, sp);
    Compare("layer_norm rows", Op::kLayerNorm, {x, ModerateHalf(t, {600}, ++seed), ModerateHalf(t, {600}, ++seed)}, t,
            {40, 600}, sp);
    const HostTensor img = ModerateHalf(t, {3, 2, 100, 90}, ++seed);
    const OpParams pool = Pool2x2({0, 0, 0, 0});
    Compare("pool planes", Op::kMaxPool2D, {img}, t, {3, 2, 50, 45}, pool);
    OpParams conv = pool;  // a 1x1 conv, stride 1
    conv.kernel = {1, 1};
    conv.strides = {1, 1};
    Compare("conv images", Op::kConv2D, {img, ModerateHalf(t, {3, 2, 1, 1}, ++seed)}, t, {3, 3, 100, 90}, conv);
  }
}

TEST(CudaHalf, CastsGoThroughF32) {
  uint32_t seed = 500;
  for (DType t : kHalfTypes) {
    const HostTensor x = RandomHalf(t, {300}, ++seed);
    for (DType to : {DType::kF32, DType::kI32, DType::kI64, DType::kI8, DType::kBool, DType::kU8, DType::kI16,
                     DType::kU16, DType::kU32, DType::kU64, DType::kF16, DType::kBF16}) {
      OpParams p;
      p.to = to;
      const HostTensor y = Compare("from 16 bits", Op::kCast, {x}, to, {300}, p);
      if (to == t) {
        EXPECT_TRUE(y.bytes == x.bytes) << "a cast to the same dtype copies bits";
      }
    }
    OpParams p;
    p.to = t;
    HostTensor f(DType::kF32, {300});
    FillF32(f, ++seed, 0.1);
    Compare("from f32", Op::kCast, {f}, t, {300}, p);
    Compare("from i64 (rounded twice)", Op::kCast, {I64({3}, {int64_t{1} << 40 | 1, -(int64_t{1} << 24) - 3, 65519})},
            t, {3}, p);
    Compare("from i32", Op::kCast, {I32({3}, {65504, 65520, -7})}, t, {3}, p);
    Compare("from i8", Op::kCast, {I8({3}, {-128, 5, 127})}, t, {3}, p);
    Compare("from bool", Op::kCast, {Bool({2}, {0, 1})}, t, {2}, p);
  }
}

TEST(CudaHalf, BitCopyingOpsKeepPayloads) {
  uint32_t seed = 600;
  for (DType t : kHalfTypes) {
    const HostTensor x = RandomHalf(t, {2, 3, 37}, ++seed);
    OpParams tp;
    tp.perm = {2, 0, 1};
    const HostTensor y = Compare("transpose", Op::kTranspose, {x}, t, {37, 2, 3}, tp);
    EXPECT_EQ(y.at<uint16_t>(1), x.at<uint16_t>(37));
    OpParams sl;
    sl.starts = {1, 2, 30};
    sl.steps = {1, -1, -3};
    Compare("slice", Op::kSlice, {x}, t, {1, 2, 10}, sl, 1);
    OpParams cat;
    cat.axis = 1;
    Compare("concat", Op::kConcat, {x, RandomHalf(t, {2, 1, 37}, ++seed)}, t, {2, 4, 37}, cat);
    OpParams g;
    g.axis = 2;
    Compare("gather", Op::kGather, {x, I64({4}, {0, 36, -1, 5})}, t, {2, 3, 4}, g);
    Compare("expand", Op::kExpand, {RandomHalf(t, {3, 1}, ++seed)}, t, {2, 3, 5});
    Compare("identity", Op::kIdentity, {x}, t, {2, 3, 37});
    Compare("reshape", Op::kReshape, {x}, t, {6, 37});
    HostTensor cond = Bool({2, 3, 37}, std::vector<uint8_t>(2 * 3 * 37, 0));
    for (int64_t i = 0; i < cond.numel(); i += 3) cond.as<uint8_t>()[i] = 1;
    const HostTensor w = Compare("where", Op::kWhere, {cond, x, RandomHalf(t, {37}, ++seed)}, t, {2, 3, 37});
    EXPECT_EQ(w.at<uint16_t>(3), x.at<uint16_t>(3));
    OpParams pad;
    pad.pad_begin = {0, 1, 0};
    pad.pad_end = {1, 0, 2};
    for (float fill : {0.1f, 70000.0f, FromBits(0xFFC01234u)}) {
      pad.pad_value = fill;
      const HostTensor p = Compare("pad", Op::kPad, {x}, t, {3, 4, 39}, pad);
      EXPECT_EQ(p.at<uint16_t>(0), t == DType::kF16 ? half::F32ToF16(fill) : half::F32ToBF16(fill));
      EXPECT_EQ(p.at<uint16_t>(39), x.at<uint16_t>(0));
    }
  }
}

// Mismatched dtypes are refused by the CUDA backends as by the CPU, not widened into a result;
// f64, which has no CUDA kernels, stays refused.
TEST(CudaHalf, RefusalsMatchTheCpu) {
  const HostTensor h = ModerateHalf(DType::kF16, {2, 2}, 1);
  const HostTensor bf = ModerateHalf(DType::kBF16, {2, 2}, 2);
  const HostTensor f = F32({2, 2}, {1, 2, 3, 4});
  Status s;
  Compare("f16 x f32", Op::kMatMul, {h, f}, DType::kF16, {2, 2}, {}, 0, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  Compare("f16 x bf16", Op::kAdd, {h, bf}, DType::kF16, {2, 2}, {}, 0, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  Compare("f16 -> f32 output", Op::kAdd, {h, h}, DType::kF32, {2, 2}, {}, 0, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  Compare("f32 -> f16 output", Op::kAdd, {f, f}, DType::kF16, {2, 2}, {}, 0, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  Compare("bad shape", Op::kAdd, {h, ModerateHalf(DType::kF16, {3}, 3)}, DType::kF16, {2, 2}, {}, 0, &s);
  EXPECT_FALSE(s.ok());

  CudaTestBackends& b = GetBackends();
  HostTensor x = ModerateHalf(DType::kF16, {4}, 4);
  HostTensor out(DType::kF16, {4});
  TensorView in[2] = {x.view(), x.view()};
  TensorView o = out.view();
  OpParams p;
  EXPECT_TRUE(b.emu->Supports(MakeCall(Op::kAdd, p, in, 2, &o)));
  HostTensor y(DType::kF64, {4});
  TensorView yo = y.view();
  p.to = DType::kF64;
  EXPECT_FALSE(b.emu->Supports(MakeCall(Op::kCast, p, in, 1, &yo)));
  EXPECT_EQ(RunInArena(*b.emu, Op::kCast, p, {&x}, y).code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace consensor::kernels
