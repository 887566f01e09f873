// u8, i16, u16, u32 and u64 on the CUDA backends (docs/DETERMINISM.md sections 1, 2 and 4)
// against the CPU backend, bit for bit: wrapping arithmetic, division by zero, the integer
// power, comparisons, every cast to and from these dtypes (f32 saturation boundaries, NaN,
// bool, f16/bf16 through f32), the reductions and cumsum, and the bit-copying ops with pad's
// converted fill. The CPU side is pinned by the golden vectors uint_arith, cast_new_ints and
// uint_data_movement (tests/conformance) and by tests/kernels/elementwise_test.cc. f64 has no
// CUDA kernels and stays refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/half.h"
#include "tests/kernels/cuda_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

const DType kIntTypes[] = {DType::kU8, DType::kI16, DType::kU16, DType::kU32, DType::kU64};

// Runs on the CPU reference and every CUDA backend; statuses must agree in code, outputs bit
// for bit. Returns the CPU's output (empty when it failed). Without `status` the call must succeed.
HostTensor Compare(const std::string& what, Op op, const std::vector<HostTensor>& inputs, DType out_dtype,
                   const Shape& out_shape, const OpParams& params = {}, int misalign = 0, Status* status = nullptr) {
  const CudaCompareOptions options{.input_misalign = std::vector<int>(inputs.size(), misalign),
                                   .out_misalign = misalign,
                                   .cpu_must_succeed = status == nullptr};
  const std::string label = what + " (" + std::string(OpName(op)) + " " +
                            (inputs.empty() ? std::string() : std::string(DTypeName(inputs[0].dtype))) + " -> " +
                            std::string(DTypeName(out_dtype)) + " " + ShapeToString(out_shape) + ", misalign " +
                            std::to_string(misalign) + ")";
  HostTensor ref(out_dtype, out_shape);
  const Status cs = CompareCudaWithCpu(label, op, params, Ptrs(inputs), ref, options);
  if (status != nullptr) *status = cs;
  return cs.ok() ? ref : HostTensor();
}

// Random values of the dtype (a quarter of them small, so that zeros, ties and divisions by 0
// occur), with the dtype's edges first: 0, 1, max, min (or max - 1), and all-ones.
HostTensor RandomInt(DType t, const Shape& shape, uint32_t seed) {
  HostTensor x(t, shape);
  switch (t) {
    case DType::kU8: FillInt<uint8_t>(x, seed); break;
    case DType::kI16: FillInt<int16_t>(x, seed); break;
    case DType::kU16: FillInt<uint16_t>(x, seed); break;
    case DType::kU32: FillInt<uint32_t>(x, seed); break;
    case DType::kU64: FillInt<uint64_t>(x, seed); break;
    default: ADD_FAILURE() << "not a new integer dtype"; break;
  }
  const int64_t es = DTypeSize(t);
  const uint64_t max = t == DType::kI16 ? 0x7FFFu : (es == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * es)) - 1);
  const uint64_t min = t == DType::kI16 ? 0x8000u : max - 1;
  const uint64_t edges[] = {0, 1, max, min, ~uint64_t{0}};
  for (int64_t i = 0; i < std::min<int64_t>(x.numel(), 5); ++i) {
    std::memcpy(x.bytes.data() + i * es, &edges[i], static_cast<size_t>(es));  // little-endian: the low bytes
  }
  return x;
}

TEST(CudaInt, ElementwiseOps) {
  uint32_t seed = 100;
  for (DType t : kIntTypes) {
    const HostTensor a = RandomInt(t, {2, 3, 67}, ++seed);
    const HostTensor b = RandomInt(t, {2, 3, 67}, ++seed);
    for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin, Op::kPow, Op::kFmod}) {
      Compare("random", op, {a, b}, t, {2, 3, 67});
      Compare("swapped, misaligned", op, {b, a}, t, {2, 3, 67}, {}, 1);
    }
    for (Op op : {Op::kEqual, Op::kNotEqual, Op::kLess, Op::kLessEqual, Op::kGreater, Op::kGreaterEqual}) {
      Compare("compare", op, {a, b}, DType::kBool, {2, 3, 67});
    }
    for (Op op : {Op::kNeg, Op::kAbs, Op::kRelu}) {
      Compare("unary", op, {a}, t, {2, 3, 67});
      Compare("unary misaligned", op, {b}, t, {2, 3, 67}, {}, 3);
    }
    // Broadcasting: a column against a row (strided kernel), a scalar against a tensor.
    Compare("column x row", Op::kMul, {RandomInt(t, {5, 1}, ++seed), RandomInt(t, {1, 7}, ++seed)}, t, {5, 7});
    Compare("scalar / tensor", Op::kDiv, {RandomInt(t, {}, ++seed), a}, t, {2, 3, 67});
    Compare("tensor % scalar", Op::kFmod, {a, RandomInt(t, {}, ++seed)}, t, {2, 3, 67});
  }
  // The products that promote to a signed int in C++ if computed naively wrap instead.
  const HostTensor sq16 =
      Compare("65535 * 65535", Op::kMul, {U16({2}, {65535, 40000}), U16({2}, {65535, 3})}, DType::kU16, {2});
  EXPECT_EQ(sq16.at<uint16_t>(0), 1u);
  EXPECT_EQ(sq16.at<uint16_t>(1), static_cast<uint16_t>(120000u));
  const HostTensor sq8 = Compare("255 * 255", Op::kMul, {U8({1}, {255}), U8({1}, {255})}, DType::kU8, {1});
  EXPECT_EQ(sq8.at<uint8_t>(0), 1u);
  // Division by zero gives 0, fmod(a, 0) = a, neg wraps, abs of an unsigned value is the value.
  const HostTensor q = Compare("u32 / 0", Op::kDiv, {U32({2}, {7, 9}), U32({2}, {0, 2})}, DType::kU32, {2});
  EXPECT_EQ(q.at<uint32_t>(0), 0u);
  EXPECT_EQ(q.at<uint32_t>(1), 4u);
  const HostTensor r = Compare("u64 fmod 0", Op::kFmod, {U64({2}, {7, 9}), U64({2}, {0, 4})}, DType::kU64, {2});
  EXPECT_EQ(r.at<uint64_t>(0), 7u);
  EXPECT_EQ(r.at<uint64_t>(1), 1u);
  const HostTensor n = Compare("neg u8", Op::kNeg, {U8({2}, {1, 0})}, DType::kU8, {2});
  EXPECT_EQ(n.at<uint8_t>(0), 255u);
  EXPECT_EQ(n.at<uint8_t>(1), 0u);
  const HostTensor d = Compare("i16 MIN / -1", Op::kDiv, {I16({1}, {-32768}), I16({1}, {-1})}, DType::kI16, {1});
  EXPECT_EQ(d.at<int16_t>(0), -32768);
  const HostTensor p = Compare("u8 pow wraps", Op::kPow, {U8({2}, {3, 2}), U8({2}, {5, 8})}, DType::kU8, {2});
  EXPECT_EQ(p.at<uint8_t>(0), 243u);
  EXPECT_EQ(p.at<uint8_t>(1), 0u);
  const HostTensor lt =
      Compare("unsigned order", Op::kLess, {U32({1}, {1}), U32({1}, {0x80000000u})}, DType::kBool, {1});
  EXPECT_EQ(lt.at<uint8_t>(0), 1u);
}

TEST(CudaInt, CastsToAndFromEveryDType) {
  uint32_t seed = 200;
  const DType kAll[] = {DType::kF32, DType::kI32, DType::kI8,  DType::kBool, DType::kI64, DType::kU8,
                        DType::kI16, DType::kU16, DType::kU32, DType::kU64,  DType::kF16, DType::kBF16};
  for (DType t : kIntTypes) {
    const HostTensor x = RandomInt(t, {300}, ++seed);
    for (DType to : kAll) {
      OpParams p;
      p.to = to;
      const HostTensor y = Compare("from an integer", Op::kCast, {x}, to, {300}, p, static_cast<int>(seed % 3));
      if (to == t) {
        EXPECT_TRUE(y.bytes == x.bytes) << "a cast to the same dtype copies bits";
      }
    }
  }
  // f32 -> each integer dtype: NaN, infinities, -1 and (-1, 0), every 2^n boundary and its
  // neighbours, and random values of every magnitude.
  std::vector<float> values = {std::nanf(""), INFINITY, -INFINITY, -1.0f, -0.99f, -0.5f, -0.0f, 0.0f, 0.5f, 1.5f};
  for (int e = 6; e <= 65; ++e) {
    const float b = std::ldexp(1.0f, e);
    for (float v : {b, std::nextafter(b, 0.0f), std::nextafter(b, INFINITY), -b, std::nextafter(-b, 0.0f)}) {
      values.push_back(v);
    }
  }
  HostTensor f = F32({static_cast<int64_t>(values.size())}, values);
  HostTensor r(DType::kF32, {500});
  FillF32(r, ++seed, 0.05);
  for (int64_t i = 0; i < r.numel(); ++i) r.as<float>()[i] *= 1e6f;
  const HostTensor h = Make(DType::kF16, {6}, std::vector<uint16_t>{0x7E00, 0xFC00, 0x7BFF, 0xBC00, 0x3C00, 0x5BFF});
  const HostTensor bools = Bool({2}, {0, 1});
  for (DType to : kIntTypes) {
    OpParams p;
    p.to = to;
    Compare("f32 boundaries", Op::kCast, {f}, to, f.shape, p);
    Compare("f32 random", Op::kCast, {r}, to, r.shape, p, 1);
    Compare("from f16", Op::kCast, {h}, to, h.shape, p);
    Compare("from bool", Op::kCast, {bools}, to, bools.shape, p);
    Compare("from i8", Op::kCast, {I8({3}, {-128, -1, 127})}, to, {3}, p);
    Compare("from i64", Op::kCast, {I64({3}, {std::numeric_limits<int64_t>::min(), -1, 1LL << 40})}, to, {3}, p);
  }
  OpParams u32;
  u32.to = DType::kU32;
  const HostTensor sat = Compare("f32 -> u32 saturates", Op::kCast,
                                 {F32({4}, {4294967296.0f, -1.0f, -0.5f, std::nanf("")})}, DType::kU32, {4}, u32);
  EXPECT_EQ(sat.at<uint32_t>(0), 4294967295u);
  EXPECT_EQ(sat.at<uint32_t>(1), 0u);
  EXPECT_EQ(sat.at<uint32_t>(2), 0u);
  EXPECT_EQ(sat.at<uint32_t>(3), 0u);
  const HostTensor low = Compare("i8 -> u32 keeps the low bits", Op::kCast, {I8({1}, {-1})}, DType::kU32, {1}, u32);
  EXPECT_EQ(low.at<uint32_t>(0), 4294967295u);
  OpParams i16;
  i16.to = DType::kI16;
  const HostTensor wrap = Compare("u16 -> i16", Op::kCast, {U16({1}, {65535})}, DType::kI16, {1}, i16);
  EXPECT_EQ(wrap.at<int16_t>(0), -1);
  OpParams to_f32;
  to_f32.to = DType::kF32;
  const HostTensor big =
      Compare("u64 -> f32 rounds once", Op::kCast, {U64({1}, {(uint64_t{1} << 63) + 1})}, DType::kF32, {1}, to_f32);
  EXPECT_EQ(big.at<float>(0), 9223372036854775808.0f);
  OpParams to_bool;
  to_bool.to = DType::kBool;
  const HostTensor nz = Compare("u16 -> bool", Op::kCast, {U16({3}, {0, 256, 1})}, DType::kBool, {3}, to_bool);
  EXPECT_EQ(nz.vec<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(CudaInt, ReductionsAndCumSum) {
  uint32_t seed = 300;
  for (DType t : kIntTypes) {
    const HostTensor x = RandomInt(t, {4, 5, 70}, ++seed);
    for (Op op : {Op::kReduceSum, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd}) {
      for (const std::vector<int64_t>& axes : {std::vector<int64_t>{2}, {0, 2}, {1}, {0, 1, 2}}) {
        OpParams p;
        p.axes = axes;
        p.keepdims = true;
        Shape out = {4, 5, 70};
        for (int64_t a : axes) out[static_cast<size_t>(a)] = 1;
        Compare("axes", op, {x}, t, out, p);
      }
    }
    // Rows longer than one chunk of 4096 terms go through chunk partials.
    const HostTensor long_rows = RandomInt(t, {3, 5000}, ++seed);
    OpParams last;
    last.axes = {1};
    last.keepdims = false;
    for (Op op : {Op::kReduceSum, Op::kReduceMax, Op::kReduceMin}) Compare("long rows", op, {long_rows}, t, {3}, last);
    OpParams empty = last;
    Compare("empty reduction", Op::kReduceSum, {RandomInt(t, {3, 0}, ++seed)}, t, {3}, empty);
    Compare("empty max", Op::kReduceMax, {RandomInt(t, {3, 0}, ++seed)}, t, {3}, empty);
    for (int64_t axis : {0, 2}) {
      OpParams c;
      c.axis = axis;
      c.exclusive = axis == 2;
      c.reverse = axis == 0;
      Compare("cumsum", Op::kCumSum, {x}, t, {4, 5, 70}, c);
    }
    // argmax and top_k take f32 and the signed i8/i32/i64 only: refused alike.
    OpParams a;
    a.axis = 1;
    Status s;
    Compare("argmax refused", Op::kArgMax, {x}, DType::kI64, {4, 70}, a, 0, &s);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  }
  OpParams all;
  all.axes = {0};
  all.keepdims = false;
  const HostTensor sum = Compare("u8 sum wraps", Op::kReduceSum, {U8({3}, {200, 100, 1})}, DType::kU8, {}, all);
  EXPECT_EQ(sum.at<uint8_t>(0), 45u);
  const HostTensor prod =
      Compare("u16 product wraps", Op::kReduceProd, {U16({2}, {65535, 65535})}, DType::kU16, {}, all);
  EXPECT_EQ(prod.at<uint16_t>(0), 1u);
  const HostTensor mx =
      Compare("u64 max is unsigned", Op::kReduceMax, {U64({2}, {1, ~uint64_t{0}})}, DType::kU64, {}, all);
  EXPECT_EQ(mx.at<uint64_t>(0), ~uint64_t{0});
}

TEST(CudaInt, BitCopyingOpsAndPad) {
  uint32_t seed = 400;
  for (DType t : kIntTypes) {
    const HostTensor x = RandomInt(t, {2, 3, 37}, ++seed);
    OpParams tp;
    tp.perm = {2, 0, 1};
    Compare("transpose", Op::kTranspose, {x}, t, {37, 2, 3}, tp);
    OpParams sl;
    sl.starts = {1, 2, 30};
    sl.steps = {1, -1, -3};
    Compare("slice", Op::kSlice, {x}, t, {1, 2, 10}, sl, 1);
    OpParams cat;
    cat.axis = 1;
    Compare("concat", Op::kConcat, {x, RandomInt(t, {2, 1, 37}, ++seed)}, t, {2, 4, 37}, cat);
    OpParams g;
    g.axis = 2;
    Compare("gather", Op::kGather, {x, I64({4}, {0, 36, -1, 5})}, t, {2, 3, 4}, g);
    Compare("expand", Op::kExpand, {RandomInt(t, {3, 1}, ++seed)}, t, {2, 3, 5});
    Compare("identity", Op::kIdentity, {x}, t, {2, 3, 37});
    Compare("reshape", Op::kReshape, {x}, t, {6, 37});
    HostTensor cond = Bool({2, 3, 37}, std::vector<uint8_t>(2 * 3 * 37, 0));
    for (int64_t i = 0; i < cond.numel(); i += 3) cond.as<uint8_t>()[i] = 1;
    Compare("where", Op::kWhere, {cond, x, RandomInt(t, {37}, ++seed)}, t, {2, 3, 37});
    OpParams pad;
    pad.pad_begin = {0, 1, 0};
    pad.pad_end = {1, 0, 2};
    // The f32 fill converted like cast: truncated, saturated, NaN and x <= -1 -> 0 when unsigned.
    for (float fill : {0.0f, 3.7f, -0.5f, -1.0f, -40000.0f, 70000.0f, 1e30f, std::nanf("")}) {
      pad.pad_value = fill;
      Compare("pad", Op::kPad, {x}, t, {3, 4, 39}, pad);
    }
  }
  OpParams pad;
  pad.pad_begin = {1};
  pad.pad_end = {1};
  pad.pad_value = 300.0f;
  const HostTensor p = Compare("u8 fill saturates", Op::kPad, {U8({1}, {7})}, DType::kU8, {3}, pad);
  EXPECT_EQ(p.vec<uint8_t>(), (std::vector<uint8_t>{255, 7, 255}));
  pad.pad_value = -3.0f;
  const HostTensor q = Compare("u32 fill below 0", Op::kPad, {U32({1}, {7})}, DType::kU32, {3}, pad);
  EXPECT_EQ(q.vec<uint32_t>(), (std::vector<uint32_t>{0, 7, 0}));
}

// Every integer dtype is accepted; f64 has no CUDA kernels: Supports() refuses a call that reads
// or writes it (so the runtime refuses the program at load), and a call that reaches the
// dispatcher anyway gets UNIMPLEMENTED rather than wrong bits.
TEST(CudaInt, IntegersAreSupportedAndF64IsRefused) {
  CudaTestBackends& b = GetBackends();
  std::vector<Backend*> cuda = {b.emu.get()};
  if (b.gpu) cuda.push_back(b.gpu.get());
  for (Backend* be : cuda) {
    for (DType t : kIntTypes) {
      HostTensor a(t, {4}, 0), c(t, {4}, 0), out(t, {4});
      TensorView in[2] = {a.view(), c.view()};
      TensorView o = out.view();
      OpParams p;
      EXPECT_TRUE(be->Supports(MakeCall(Op::kAdd, p, in, 2, &o))) << DTypeName(t);
    }
    HostTensor a(DType::kF64, {4}, 0), c(DType::kF64, {4}, 0), out(DType::kF64, {4});
    TensorView in[2] = {a.view(), c.view()};
    TensorView o = out.view();
    OpParams p;
    EXPECT_FALSE(be->Supports(MakeCall(Op::kAdd, p, in, 2, &o)));
    HostTensor f(DType::kF32, {4}, 0);
    TensorView fin = f.view();
    p.to = DType::kF64;
    EXPECT_FALSE(be->Supports(MakeCall(Op::kCast, p, &fin, 1, &o)));
    EXPECT_EQ(RunInArena(*be, Op::kAdd, OpParams{}, {&a, &c}, out).code(), StatusCode::kUnimplemented);
  }
}

}  // namespace
}  // namespace consensor::kernels
