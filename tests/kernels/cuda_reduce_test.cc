// CUDA reduce family (kernels/cuda/reduce.cu): the same KernelCall on the CPU backend
// (portable, 1 thread) and on the emulated CUDA backend (and a real GPU when there is one)
// must give identical bytes: canonical sum over one long row (multi-level partials), every
// axis subset of rank-3 tensors, columns longer than a chunk, specials, integer wrap,
// empty reductions, argmax ties and NaN.
#include <gtest/gtest.h>

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
#include "tests/kernels/cumsum_param_table.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

OpParams AxesP(std::vector<int64_t> axes, bool keepdims) {
  OpParams p;
  p.axes = std::move(axes);
  p.keepdims = keepdims;
  return p;
}

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

Shape ReducedShape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdims) {
  Shape s;
  for (size_t i = 0; i < shape.size(); ++i) {
    bool red = false;
    for (int64_t a : axes) red = red || a == static_cast<int64_t>(i);
    if (!red) s.push_back(shape[i]);
    else if (keepdims) s.push_back(1);
  }
  return s;
}

HostTensor RandomTensor(DType dt, const Shape& shape, uint32_t seed, double special_rate = 0.0) {
  HostTensor t(dt, shape);
  switch (dt) {
    case DType::kF32: FillF32(t, seed, special_rate); break;
    case DType::kI32: FillInt<int32_t>(t, seed); break;
    case DType::kI8: FillInt<int8_t>(t, seed); break;
    case DType::kI64: FillInt<int64_t>(t, seed); break;
    default: break;
  }
  return t;
}

void CheckReduce(Op op, const HostTensor& x, const std::vector<int64_t>& axes, bool keepdims, const std::string& tag) {
  OpParams p;
  p.axes = axes;
  p.keepdims = keepdims;
  std::string what = std::string(OpName(op)) + " " + tag + " axes={";
  for (int64_t a : axes) what += std::to_string(a) + ",";
  what += "} keepdims=" + std::to_string(keepdims);
  Compare(what, op, p, {&x}, x.dtype, ReducedShape(x.shape, axes, keepdims));
}

const Op kReduceOps[] = {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd};

TEST(CudaReduce, LongRowsF32) {
  const int64_t lens[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 3 * 4096 + 17, 100003};
  for (int64_t n : lens) {
    HostTensor x = RandomTensor(DType::kF32, {n}, static_cast<uint32_t>(n + 1));
    for (Op op : kReduceOps) CheckReduce(op, x, {0}, false, "n=" + std::to_string(n));
  }
  // Deeper partial levels are exercised through many rows of > 4096 terms as well.
  HostTensor x = RandomTensor(DType::kF32, {3, 9000}, 7);
  CheckReduce(Op::kReduceSum, x, {1}, true, "3x9000");
}

TEST(CudaReduce, SumOfSignedZerosAndSpecials) {
  // All -0: the lane tree keeps -0; a +0 anywhere gives +0.
  HostTensor negz = F32Bits({70}, std::vector<uint32_t>(70, 0x80000000u));
  HostTensor sum = Compare("sum -0", Op::kReduceSum, AxesP({0}, false), {&negz}, DType::kF32, {});
  EXPECT_EQ(sum.at<uint32_t>(0), 0x80000000u);
  std::vector<uint32_t> mixed(5000, 0x80000000u);
  mixed[4500] = 0;
  HostTensor mz = F32Bits({5000}, mixed);
  sum = Compare("sum -0/+0", Op::kReduceSum, AxesP({0}, false), {&mz}, DType::kF32, {});
  EXPECT_EQ(sum.at<uint32_t>(0), 0u);
  // NaN payloads, infinities, denormals.
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    HostTensor x = RandomTensor(DType::kF32, {6000}, seed, 0.002);
    for (Op op : kReduceOps) CheckReduce(op, x, {0}, true, "specials seed " + std::to_string(seed));
  }
  HostTensor infs = F32Bits({2, 3}, {0x7F800000u, 0xFF800000u, 0x3F800000u, 0x00000001u, 0x80000001u, 0x807FFFFFu});
  for (Op op : kReduceOps) {
    CheckReduce(op, infs, {1}, false, "inf/denormal");
    CheckReduce(op, infs, {0}, false, "inf/denormal");
  }
  // A single NaN with a payload among finite values: canonical NaN out.
  std::vector<uint32_t> nanrow(100, 0x3F800000u);
  nanrow[37] = 0xFFC12345u;
  HostTensor nx = F32Bits({100}, nanrow);
  for (Op op : kReduceOps) {
    HostTensor r = Compare("nan", op, AxesP({0}, false), {&nx}, DType::kF32, {});
    EXPECT_EQ(r.at<uint32_t>(0), kCanon) << OpName(op);
  }
}

TEST(CudaReduce, EveryAxisSubsetRank3) {
  const Shape shapes[] = {{3, 5, 70}, {70, 4, 3}, {2, 1, 130}};
  const DType dtypes[] = {DType::kF32, DType::kI32, DType::kI8, DType::kI64};
  uint32_t seed = 100;
  for (const Shape& shape : shapes) {
    for (DType dt : dtypes) {
      HostTensor x = RandomTensor(dt, shape, ++seed, dt == DType::kF32 ? 0.01 : 0.0);
      for (int mask = 0; mask < 8; ++mask) {
        std::vector<int64_t> axes;
        for (int a = 0; a < 3; ++a)
          if (mask & (1 << a)) axes.push_back(a);
        for (bool keep : {true, false}) {
          for (Op op : kReduceOps) {
            if (op == Op::kReduceMean && dt != DType::kF32) continue;
            CheckReduce(op, x, axes, keep, std::string(DTypeName(dt)));
          }
        }
      }
    }
  }
}

TEST(CudaReduce, LongColumnsAndGatheredRows) {
  // Columns with more than one chunk of terms (multi-level column partials).
  HostTensor a = RandomTensor(DType::kF32, {9000, 3}, 11);
  for (Op op : kReduceOps) CheckReduce(op, a, {0}, false, "9000x3");
  HostTensor b = RandomTensor(DType::kF32, {2, 4500, 33}, 12);
  CheckReduce(Op::kReduceSum, b, {1}, true, "2x4500x33");
  // Innermost reduced with several reduced groups: axes {0, 2} and {1, 3}.
  HostTensor c = RandomTensor(DType::kF32, {3, 4, 5, 70}, 13);
  for (Op op : kReduceOps) {
    CheckReduce(op, c, {1, 3}, false, "3x4x5x70");
    CheckReduce(op, c, {0, 2}, true, "3x4x5x70");
    CheckReduce(op, c, {0, 1, 3}, false, "3x4x5x70");
  }
  HostTensor d = RandomTensor(DType::kF32, {3, 2, 2100}, 14);  // gathered, 8400 terms per output
  CheckReduce(Op::kReduceSum, d, {0, 2}, false, "3x2x2100");
}

TEST(CudaReduce, IntegerWrapAndEmpty) {
  std::vector<int32_t> big(5000, std::numeric_limits<int32_t>::max());
  HostTensor x = I32({5000}, big);
  HostTensor r = Compare("i32 wrap", Op::kReduceSum, AxesP({0}, false), {&x}, DType::kI32, {});
  EXPECT_EQ(r.at<int32_t>(0), static_cast<int32_t>(static_cast<uint32_t>(5000) * 0x7FFFFFFFu));
  HostTensor x8 = I8({300}, std::vector<int8_t>(300, 100));
  Compare("i8 wrap", Op::kReduceSum, AxesP({0}, false), {&x8}, DType::kI8, {});
  HostTensor x64 = RandomTensor(DType::kI64, {5000}, 3);
  for (Op op : {Op::kReduceSum, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd}) {
    CheckReduce(op, x64, {0}, false, "i64");
  }
  // Empty reductions: sum 0, mean NaN, max -inf / dtype min, min +inf / dtype max.
  for (DType dt : {DType::kF32, DType::kI32, DType::kI8, DType::kI64}) {
    HostTensor e(dt, {3, 0, 2});
    for (Op op : kReduceOps) {
      if (op == Op::kReduceMean && dt != DType::kF32) continue;
      CheckReduce(op, e, {1}, true, std::string("empty ") + std::string(DTypeName(dt)));
      CheckReduce(op, e, {0, 1, 2}, false, std::string("empty all ") + std::string(DTypeName(dt)));
      CheckReduce(op, e, {0}, false, std::string("no outputs ") + std::string(DTypeName(dt)));
    }
  }
  // Rank 0 and no axes.
  HostTensor s = F32({}, {-0.0f});
  for (Op op : kReduceOps) CheckReduce(op, s, {}, true, "scalar");
  HostTensor n2 = F32Bits({2}, {0xFFC00001u, 0x80000000u});
  for (Op op : kReduceOps) CheckReduce(op, n2, {}, true, "no axes");
}

TEST(CudaReduce, ArgMax) {
  const DType dtypes[] = {DType::kF32, DType::kI32, DType::kI8, DType::kI64};
  uint32_t seed = 500;
  for (DType dt : dtypes) {
    // {2, 9000} and {5000} split rows into 4096-element chunks; {600, 3} and {2, 700, 3}
    // split columns into 256-element chunks.
    for (const Shape& shape : {Shape{4, 5, 70}, Shape{70, 3, 5}, Shape{1, 100}, Shape{5000}, Shape{2, 9000},
                               Shape{600, 3}, Shape{2, 700, 3}}) {
      HostTensor x = RandomTensor(dt, shape, ++seed, dt == DType::kF32 ? 0.02 : 0.0);
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        OpParams p;
        p.axis = axis;
        Shape os;
        for (size_t i = 0; i < shape.size(); ++i)
          if (static_cast<int64_t>(i) != axis) os.push_back(shape[i]);
        Compare("argmax " + std::string(DTypeName(dt)) + " axis " + std::to_string(axis), Op::kArgMax, p, {&x},
                DType::kI64, os);
      }
    }
  }
  // Ties (first wins, -0 == +0) and the first NaN wins.
  HostTensor t = F32Bits({2, 6}, {0x80000000u, 0x00000000u, 0x80000000u, 0xBF800000u, 0x00000000u, 0x80000000u,
                                  0x3F800000u, 0x7FC00001u, 0x7F800000u, 0xFFC00000u, 0x7F800000u, 0x3F800000u});
  HostTensor r = Compare("argmax ties", Op::kArgMax, AxisP(1), {&t}, DType::kI64, {2});
  EXPECT_EQ(r.at<int64_t>(0), 0);
  EXPECT_EQ(r.at<int64_t>(1), 1);
  Compare("argmax ties axis 0", Op::kArgMax, AxisP(0), {&t}, DType::kI64, {6});
  // Across chunk boundaries: the first of equal maxima wins, a later NaN beats an earlier
  // maximum, and -0 == +0.
  {
    const int64_t n = 3 * 4096 + 17;
    std::vector<uint32_t> bits(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      bits[static_cast<size_t>(i)] = (i % 3 == 0) ? 0x80000000u : 0u;  // row 0: zeros of both signs
      bits[static_cast<size_t>(n + i)] = 0u;
    }
    bits[static_cast<size_t>(5000)] = 0x3F800000u;  // row 0: 1.0 at 5000 and 9000
    bits[static_cast<size_t>(9000)] = 0x3F800000u;
    bits[static_cast<size_t>(n + 100)] = 0x7F800000u;  // row 1: +inf early, NaN late
    bits[static_cast<size_t>(n + 11000)] = 0x7FC00000u;
    HostTensor long_rows = F32Bits({2, n}, bits);
    HostTensor got = Compare("argmax long rows", Op::kArgMax, AxisP(1), {&long_rows}, DType::kI64, {2});
    EXPECT_EQ(got.at<int64_t>(0), 5000);
    EXPECT_EQ(got.at<int64_t>(1), 11000);
    std::vector<uint32_t> zeros(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) zeros[static_cast<size_t>(i)] = (i % 2 == 0) ? 0x80000000u : 0u;
    HostTensor signed_zeros = F32Bits({n}, zeros);
    got = Compare("argmax signed zeros", Op::kArgMax, AxisP(0), {&signed_zeros}, DType::kI64, {});
    EXPECT_EQ(got.at<int64_t>(0), 0);

    std::vector<int32_t> col_values(700 * 3, 7);  // column 1: the maximum at rows 300 and 600
    col_values[300 * 3 + 1] = 9;
    col_values[600 * 3 + 1] = 9;
    col_values[650 * 3 + 2] = 8;
    HostTensor cols = I32({700, 3}, col_values);
    got = Compare("argmax long columns", Op::kArgMax, AxisP(0), {&cols}, DType::kI64, {3});
    EXPECT_EQ(got.at<int64_t>(0), 0);
    EXPECT_EQ(got.at<int64_t>(1), 300);
    EXPECT_EQ(got.at<int64_t>(2), 650);
  }
  std::vector<int64_t> mins(100, std::numeric_limits<int64_t>::min());
  HostTensor im = I64({100}, mins);
  r = Compare("argmax all int64 min", Op::kArgMax, AxisP(0), {&im}, DType::kI64, {});
  EXPECT_EQ(r.at<int64_t>(0), 0);
}

TEST(CudaReduce, TopK) {
  uint32_t seed = 700;
  for (DType dt : {DType::kF32, DType::kI32, DType::kI8, DType::kI64}) {
    for (const Shape& shape : {Shape{4, 5, 70}, Shape{70, 3, 5}, Shape{1, 100}, Shape{600, 3}}) {
      HostTensor x = RandomTensor(dt, shape, ++seed, dt == DType::kF32 ? 0.05 : 0.0);
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        const int64_t n = shape[axis];
        for (int64_t k : {int64_t{0}, int64_t{1}, (n + 2) / 3, n}) {
          for (bool largest : {true, false}) {
            OpParams p;
            p.axis = axis;
            p.k = k;
            p.largest = largest;
            Shape os = shape;
            os[axis] = k;
            Compare("top_k " + std::string(DTypeName(dt)) + " axis " + std::to_string(axis) + " k " +
                        std::to_string(k) + (largest ? " largest" : " smallest"),
                    Op::kTopK, p, {&x}, DType::kI64, os);
          }
        }
      }
    }
  }
  // Ties keep index order, -0 == +0, NaN above +inf.
  HostTensor t = F32Bits({2, 6}, {0x80000000u, 0x00000000u, 0x80000000u, 0xBF800000u, 0x00000000u, 0x80000000u,
                                  0x3F800000u, 0x7FC00001u, 0x7F800000u, 0xFFC00000u, 0x7F800000u, 0x3F800000u});
  OpParams p;
  p.axis = 1;
  p.k = 6;
  HostTensor r = Compare("top_k ties", Op::kTopK, p, {&t}, DType::kI64, {2, 6});
  EXPECT_EQ(r.at<int64_t>(0), 0);
  EXPECT_EQ(r.at<int64_t>(5), 3);
  EXPECT_EQ(r.at<int64_t>(6), 1);  // row 1: the two NaNs, then the two infinities
  EXPECT_EQ(r.at<int64_t>(7), 3);
  EXPECT_EQ(r.at<int64_t>(8), 2);
}

TEST(CudaReduce, CumSum) {
  uint32_t seed = 900;
  for (DType dt : {DType::kF32, DType::kI32, DType::kI8, DType::kI64}) {
    for (const Shape& shape : {Shape{4, 5, 70}, Shape{70, 3, 5}, Shape{1, 100}, Shape{2, 0, 3}}) {
      HostTensor x = RandomTensor(dt, shape, ++seed, dt == DType::kF32 ? 0.05 : 0.0);
      for (const OpParams& p : CumSumParamTable(static_cast<int64_t>(shape.size()))) {
        Compare("cumsum " + std::string(DTypeName(dt)) + " axis " + std::to_string(p.axis) +
                    (p.exclusive ? " exclusive" : "") + (p.reverse ? " reverse" : ""),
                Op::kCumSum, p, {&x}, dt, shape);
      }
    }
  }
  // f64 and the unsigned types have no CUDA kernels: refused, as for every other op.
  CudaTestBackends& b = GetBackends();
  HostTensor x(DType::kF64, {2, 3});
  TensorView in = x.view();
  TensorView out = x.view();
  OpParams p;
  KernelCall call = MakeCall(Op::kCumSum, p, &in, 1, &out);
  EXPECT_FALSE(b.emu->Supports(call));
}

TEST(CudaReduce, ValidationMatchesCpu) {
  CudaTestBackends& b = GetBackends();
  HostTensor x = RandomTensor(DType::kF32, {3, 4}, 1);
  HostTensor bad_axes(DType::kF32, {3});
  HostTensor i32x = RandomTensor(DType::kI32, {3, 4}, 2);
  struct Case {
    Op op;
    OpParams p;
    const HostTensor* in;
    DType odt;
    Shape os;
  };
  const Case cases[] = {
      {Op::kReduceSum, AxesP({1, 0}, true), &x, DType::kF32, {1, 1}},   // unsorted
      {Op::kReduceSum, AxesP({2}, true), &x, DType::kF32, {3, 4}},      // out of range
      {Op::kReduceSum, AxesP({1}, true), &x, DType::kF32, {3, 2}},      // bad shape
      {Op::kReduceSum, AxesP({1}, true), &x, DType::kI32, {3, 1}},      // dtype mismatch
      {Op::kReduceMean, AxesP({1}, true), &i32x, DType::kI32, {3, 1}},  // integer mean
      {Op::kArgMax, AxisP(2), &x, DType::kI64, {3}},                    // axis
      {Op::kArgMax, AxisP(1), &x, DType::kI32, {3}},                    // output dtype
  };
  for (const Case& c : cases) {
    HostTensor o1(c.odt, c.os), o2(c.odt, c.os);
    Status s1 = RunInArena(*b.cpu, c.op, c.p, {c.in}, o1);
    Status s2 = RunInArena(*b.emu, c.op, c.p, {c.in}, o2);
    EXPECT_FALSE(s1.ok());
    EXPECT_EQ(s1.ToString(), s2.ToString());
  }
  HostTensor e(DType::kF32, {3, 0});
  HostTensor o1(DType::kI64, {3}), o2(DType::kI64, {3});
  EXPECT_EQ(RunInArena(*b.cpu, Op::kArgMax, AxisP(1), {&e}, o1).ToString(),
            RunInArena(*b.emu, Op::kArgMax, AxisP(1), {&e}, o2).ToString());
}

}  // namespace
}  // namespace consensor::kernels
