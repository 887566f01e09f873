// Reduce family (docs/DETERMINISM.md 4.1, 4.3): every CPU path (portable and AVX2, 1/2/8
// threads) must match naive references written from the spec, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/reduce_avx512.h"
#include "kernels/reduction_order.h"
#include "tests/kernels/cumsum_param_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

class ReduceTest : public BackendTest {};

// Terms of each output in the canonical order (row-major over the reduced axes).
std::vector<std::vector<int64_t>> TermIndices(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes) {
  const int rank = static_cast<int>(shape.size());
  std::vector<bool> red(rank, false);
  for (int64_t a : axes) red[a] = true;
  std::vector<int64_t> strides(rank, 1);
  for (int i = rank - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  std::vector<int> kept_axes, red_axes;
  for (int i = 0; i < rank; ++i) (red[i] ? red_axes : kept_axes).push_back(i);
  int64_t n_out = 1, n_terms = 1;
  for (int a : kept_axes) n_out *= shape[a];
  for (int a : red_axes) n_terms *= shape[a];
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    int64_t base = 0, rem = o;
    for (int k = static_cast<int>(kept_axes.size()) - 1; k >= 0; --k) {
      base += (rem % shape[kept_axes[k]]) * strides[kept_axes[k]];
      rem /= shape[kept_axes[k]];
    }
    out[o].resize(static_cast<size_t>(n_terms));
    for (int64_t t = 0; t < n_terms; ++t) {
      int64_t off = base, r = t;
      for (int k = static_cast<int>(red_axes.size()) - 1; k >= 0; --k) {
        off += (r % shape[red_axes[k]]) * strides[red_axes[k]];
        r /= shape[red_axes[k]];
      }
      out[o][t] = off;
    }
  }
  return out;
}

std::vector<int64_t> OutShape(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes, bool keepdims) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < shape.size(); ++i) {
    bool r = false;
    for (int64_t a : axes) r = r || a == static_cast<int64_t>(i);
    if (!r) s.push_back(shape[i]);
    else if (keepdims) s.push_back(1);
  }
  return s;
}

HostTensor RefReduceF32(Op op, const HostTensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  HostTensor y(DType::kF32, OutShape(x.shape, axes, keepdims));
  auto terms = TermIndices(x.shape, axes);
  const float* d = x.as<float>();
  for (size_t o = 0; o < terms.size(); ++o) {
    const auto& t = terms[o];
    const int64_t n = static_cast<int64_t>(t.size());
    float r;
    switch (op) {
      case Op::kReduceSum: r = RefCsum([&](int64_t i) { return d[t[i]]; }, n); break;
      case Op::kReduceMean: r = RefCsum([&](int64_t i) { return d[t[i]]; }, n) / static_cast<float>(n); break;
      case Op::kReduceMax:
        r = -std::numeric_limits<float>::infinity();
        for (int64_t i : t) r = RefMax(r, d[i]);
        break;
      case Op::kReduceProd:  // the spec's sequential chain, in the canonical term order
        r = 1.0f;
        for (int64_t i : t) r = r * d[i];
        break;
      default:
        r = std::numeric_limits<float>::infinity();
        for (int64_t i : t) r = RefMin(r, d[i]);
        break;
    }
    y.as<float>()[o] = Canon(r);
  }
  return y;
}

template <typename T>
HostTensor RefReduceInt(Op op, const HostTensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  HostTensor y(x.dtype, OutShape(x.shape, axes, keepdims));
  auto terms = TermIndices(x.shape, axes);
  const T* d = x.as<T>();
  for (size_t o = 0; o < terms.size(); ++o) {
    T r;
    if (op == Op::kReduceSum) {
      uint64_t s = 0;
      for (int64_t i : terms[o]) s += static_cast<uint64_t>(static_cast<int64_t>(d[i]));
      r = static_cast<T>(s);
    } else if (op == Op::kReduceProd) {
      uint64_t p = 1;
      for (int64_t i : terms[o]) p *= static_cast<uint64_t>(static_cast<int64_t>(d[i]));
      r = static_cast<T>(p);
    } else if (op == Op::kReduceMax) {
      r = std::numeric_limits<T>::min();
      for (int64_t i : terms[o]) r = std::max(r, d[i]);
    } else {
      r = std::numeric_limits<T>::max();
      for (int64_t i : terms[o]) r = std::min(r, d[i]);
    }
    y.as<T>()[o] = r;
  }
  return y;
}

HostTensor RefReduce(Op op, const HostTensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  switch (x.dtype) {
    case DType::kF32: return RefReduceF32(op, x, axes, keepdims);
    case DType::kI32: return RefReduceInt<int32_t>(op, x, axes, keepdims);
    case DType::kI8: return RefReduceInt<int8_t>(op, x, axes, keepdims);
    case DType::kU8: return RefReduceInt<uint8_t>(op, x, axes, keepdims);
    case DType::kI16: return RefReduceInt<int16_t>(op, x, axes, keepdims);
    case DType::kU16: return RefReduceInt<uint16_t>(op, x, axes, keepdims);
    case DType::kU32: return RefReduceInt<uint32_t>(op, x, axes, keepdims);
    case DType::kU64: return RefReduceInt<uint64_t>(op, x, axes, keepdims);
    default: return RefReduceInt<int64_t>(op, x, axes, keepdims);
  }
}

std::string Describe(Op op, const HostTensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  std::string s = std::string(OpName(op)) + " " + std::string(DTypeName(x.dtype)) + " [";
  for (int64_t d : x.shape) s += std::to_string(d) + ",";
  s += "] axes {";
  for (int64_t a : axes) s += std::to_string(a) + ",";
  return s + "} keepdims=" + std::to_string(keepdims);
}

// Runs the op and compares with the reference bit for bit.
void CheckReduce(ReduceTest* t, Op op, HostTensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  OpParams p;
  p.axes = axes;
  p.keepdims = keepdims;
  HostTensor want = RefReduce(op, x, axes, keepdims);
  HostTensor got(want.dtype, want.shape);
  Status s = t->Run(op, p, x, got);
  ASSERT_TRUE(s.ok()) << Describe(op, x, axes, keepdims) << ": " << s.ToString();
  ASSERT_EQ(got.bytes.size(), want.bytes.size());
  if (!want.bytes.empty() && std::memcmp(got.bytes.data(), want.bytes.data(), want.bytes.size()) != 0) {
    size_t first = 0;
    while (got.bytes[first] == want.bytes[first]) ++first;
    FAIL() << Describe(op, x, axes, keepdims) << ": first differing byte " << first;
  }
}

std::vector<std::vector<int64_t>> AllSubsets(int rank) {
  std::vector<std::vector<int64_t>> out;
  for (int m = 0; m < (1 << rank); ++m) {
    std::vector<int64_t> a;
    for (int i = 0; i < rank; ++i)
      if (m & (1 << i)) a.push_back(i);
    out.push_back(a);
  }
  return out;
}

// The row lengths the spec's chunking cares about.
const int64_t kLengths[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 3 * 4096 + 17, 1 << 20};

// ---------------------------------------------------------------------------------------
// Tests.

TEST_P(ReduceTest, SumContiguousLengths) {
  for (int64_t n : kLengths) {
    HostTensor x(DType::kF32, {n});
    FillF32(x, static_cast<uint32_t>(n) + 1);
    CheckReduce(this, Op::kReduceSum, x, {0}, false);
    CheckReduce(this, Op::kReduceMean, x, {0}, true);
    if (n <= 4096 * 4) {
      HostTensor x3(DType::kF32, {3, n});
      FillF32(x3, static_cast<uint32_t>(n) + 7);
      CheckReduce(this, Op::kReduceSum, x3, {1}, true);
      CheckReduce(this, Op::kReduceSum, x3, {0}, false);
      CheckReduce(this, Op::kReduceMean, x3, {0, 1}, false);
    }
  }
}

TEST_P(ReduceTest, SumColumnsLengths) {
  // Reduce over a leading axis with the kept inner dim vectorized; lengths cross chunks.
  for (int64_t n : kLengths) {
    if (n > 4 * 4096) continue;
    for (int64_t cols : {1, 3, 8, 70}) {
      HostTensor x(DType::kF32, {n, cols});
      FillF32(x, static_cast<uint32_t>(n * 131 + cols));
      CheckReduce(this, Op::kReduceSum, x, {0}, false);
      CheckReduce(this, Op::kReduceMean, x, {0}, true);
    }
  }
  HostTensor big(DType::kF32, {2, 4500, 260});  // several chunks, several column blocks
  FillF32(big, 99);
  CheckReduce(this, Op::kReduceSum, big, {1}, false);
  HostTensor single(DType::kF32, {1 << 17, 3});  // few outputs, long sums: parallel chunks
  FillF32(single, 98);
  CheckReduce(this, Op::kReduceSum, single, {0}, false);
}

TEST_P(ReduceTest, AllAxisSubsetsRank3And4) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 5, 7}, {4, 70, 9}, {2, 3, 4, 5}, {3, 1, 4, 2}, {2, 1500, 2, 3}};
  const Op ops[] = {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd};
  uint32_t seed = 1000;
  for (const auto& shape : shapes) {
    for (const auto& axes : AllSubsets(static_cast<int>(shape.size()))) {
      for (bool keep : {false, true}) {
        HostTensor x(DType::kF32, shape);
        FillF32(x, ++seed);
        for (Op op : ops) CheckReduce(this, op, x, axes, keep);
      }
    }
  }
}

// The widening sum (OpParams::sum_widens_i8, made only by compilation for a cast from i8 to
// i32 read only by a reduce_sum): i8 in, i32 out, the same bits as the sum of the cast values,
// over the last axis (the corrections' row sums), other axes, all axes and none; wider than
// i8's range; anything else refused.
// The widening sums of contiguous rows run on vpsadbw in the avx2 configurations
// (WideningI8RowSumsAvx2); the switch puts them back on the generic loop. Both must give the
// i32 sum of the cast values.
TEST_P(ReduceTest, WideningSumOfI8) {
  for (bool fast : {true, false}) {
    cpu::SetWideningSumAvx2ForTesting(fast);
    for (int8_t v : {int8_t{-128}, int8_t{127}, int8_t{-1}}) {
      for (int64_t len : {1, 31, 32, 33, 63, 64, 65, 1152, 4099}) {
        HostTensor x(DType::kI8, {3, len});
        for (int64_t i = 0; i < x.numel(); ++i) x.as<int8_t>()[i] = v;
        x.as<int8_t>()[len + len / 2] = static_cast<int8_t>(v ^ 0x55);  // row 1 differs in one term
        OpParams p;
        p.axes = {1};
        p.keepdims = false;
        p.sum_widens_i8 = true;
        HostTensor y(DType::kI32, {3});
        ASSERT_TRUE(Run(Op::kReduceSum, p, x, y).ok());
        for (int r = 0; r < 3; ++r) {
          int32_t want = 0;
          for (int64_t i = 0; i < len; ++i) want += x.as<int8_t>()[r * len + i];
          EXPECT_EQ(y.as<int32_t>()[r], want)
              << "value " << int{v} << " len " << len << " row " << r << " fast " << fast;
        }
      }
    }
  }
  cpu::SetWideningSumAvx2ForTesting(true);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 5, 1153}, {2, 300, 40}, {7}, {4, 3, 97}}) {
    HostTensor x(DType::kI8, shape);
    FillInt<int8_t>(x, 77);
    HostTensor wide(DType::kI32, shape);
    for (int64_t i = 0; i < x.numel(); ++i) wide.as<int32_t>()[i] = x.as<int8_t>()[i];
    for (const auto& axes : AllSubsets(static_cast<int>(shape.size()))) {
      OpParams p;
      p.axes = axes;
      p.keepdims = true;
      std::vector<int64_t> out_shape = shape;
      for (int64_t a : axes) out_shape[a] = 1;
      HostTensor want(DType::kI32, out_shape), got(DType::kI32, out_shape);
      ASSERT_TRUE(Run(Op::kReduceSum, p, wide, want).ok());
      p.sum_widens_i8 = true;
      ASSERT_TRUE(Run(Op::kReduceSum, p, x, got).ok());
      EXPECT_EQ(got.bytes, want.bytes) << ShapeToString(shape) << " axes " << axes.size();
    }
  }
  HostTensor ones(DType::kI8, {300});
  for (int i = 0; i < 300; ++i) ones.as<int8_t>()[i] = i % 2 ? 127 : -128;
  HostTensor y(DType::kI32, {});
  OpParams p;
  p.axes = {0};
  p.keepdims = false;
  p.sum_widens_i8 = true;
  ASSERT_TRUE(Run(Op::kReduceSum, p, ones, y).ok());
  EXPECT_EQ(y.as<int32_t>()[0], -150);
  HostTensor y8(DType::kI8, {});
  EXPECT_EQ(Run(Op::kReduceSum, p, ones, y8).code(), StatusCode::kInvalidArgument);
  HostTensor u = U8({3}, {1, 2, 3});
  EXPECT_EQ(Run(Op::kReduceSum, p, u, y).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Run(Op::kReduceMax, p, ones, y).code(), StatusCode::kInvalidArgument);
}

TEST_P(ReduceTest, IntegerSumMaxMinWrap) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 5, 7}, {2, 3, 4, 5}, {5000}, {300, 40}};
  uint32_t seed = 5;
  for (DType dt :
       {DType::kI32, DType::kI8, DType::kI64, DType::kU8, DType::kI16, DType::kU16, DType::kU32, DType::kU64}) {
    for (const auto& shape : shapes) {
      for (const auto& axes : AllSubsets(static_cast<int>(shape.size()))) {
        HostTensor x(dt, shape);
        if (dt == DType::kI32) FillInt<int32_t>(x, ++seed);
        if (dt == DType::kI8) FillInt<int8_t>(x, ++seed);
        if (dt == DType::kI64) FillInt<int64_t>(x, ++seed);
        if (dt == DType::kU8) FillInt<uint8_t>(x, ++seed);
        if (dt == DType::kI16) FillInt<int16_t>(x, ++seed);
        if (dt == DType::kU16) FillInt<uint16_t>(x, ++seed);
        if (dt == DType::kU32) FillInt<uint32_t>(x, ++seed);
        if (dt == DType::kU64) FillInt<uint64_t>(x, ++seed);
        for (Op op : {Op::kReduceSum, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd}) {
          CheckReduce(this, op, x, axes, axes.size() % 2);
        }
      }
    }
  }
  // Explicit wrap: 200 * 127 as i8 and INT32_MAX + 1.
  HostTensor a(DType::kI8, {200});
  for (int i = 0; i < 200; ++i) a.as<int8_t>()[i] = 127;
  HostTensor ya(DType::kI8, {});
  OpParams p;
  p.axes = {0};
  p.keepdims = false;
  ASSERT_TRUE(Run(Op::kReduceSum, p, a, ya).ok());
  EXPECT_EQ(ya.as<int8_t>()[0], static_cast<int8_t>(200 * 127 % 256));
  HostTensor b(DType::kI32, {2});
  b.as<int32_t>()[0] = std::numeric_limits<int32_t>::max();
  b.as<int32_t>()[1] = 1;
  HostTensor yb(DType::kI32, {});
  ASSERT_TRUE(Run(Op::kReduceSum, p, b, yb).ok());
  EXPECT_EQ(yb.as<int32_t>()[0], std::numeric_limits<int32_t>::min());
  // Unsigned: 65535 * 65535 modulo 2^16 (no signed promotion), 255 + 1 modulo 2^8, and the
  // maximum / minimum compared as unsigned.
  HostTensor c = U16({2}, {65535, 65535});
  HostTensor yc(DType::kU16, {});
  ASSERT_TRUE(Run(Op::kReduceProd, p, c, yc).ok());
  EXPECT_EQ(yc.as<uint16_t>()[0], 1);
  HostTensor d = U8({3}, {255, 1, 7});
  HostTensor yd(DType::kU8, {});
  ASSERT_TRUE(Run(Op::kReduceSum, p, d, yd).ok());
  EXPECT_EQ(yd.as<uint8_t>()[0], 7);
  ASSERT_TRUE(Run(Op::kReduceMax, p, d, yd).ok());
  EXPECT_EQ(yd.as<uint8_t>()[0], 255);
  HostTensor e = U64({2}, {uint64_t{1} << 63, 3});
  HostTensor ye(DType::kU64, {});
  ASSERT_TRUE(Run(Op::kReduceMin, p, e, ye).ok());
  EXPECT_EQ(ye.as<uint64_t>()[0], 3u);
  ASSERT_TRUE(Run(Op::kReduceMax, p, e, ye).ok());
  EXPECT_EQ(ye.as<uint64_t>()[0], uint64_t{1} << 63);
  // Empty integer max / min: the dtype's minimum / maximum.
  HostTensor empty = U32({0}, {});
  HostTensor yz(DType::kU32, {});
  ASSERT_TRUE(Run(Op::kReduceMin, p, empty, yz).ok());
  EXPECT_EQ(yz.as<uint32_t>()[0], 4294967295u);
  ASSERT_TRUE(Run(Op::kReduceMax, p, empty, yz).ok());
  EXPECT_EQ(yz.as<uint32_t>()[0], 0u);
  // argmax and top_k do not take the unsigned types.
  HostTensor yi(DType::kI64, {});
  OpParams pa;
  pa.axis = 0;
  EXPECT_FALSE(Run(Op::kArgMax, pa, d, yi).ok());
}

TEST_P(ReduceTest, SpecialValues) {
  // NaN payloads, infinities, signed zeros and subnormals mixed in at various rates.
  const std::vector<std::vector<int64_t>> shapes = {{4, 65}, {9, 4097}, {70, 6}, {3, 4, 5, 6}};
  uint32_t seed = 77;
  for (double rate : {0.002, 0.05, 0.5}) {
    for (const auto& shape : shapes) {
      for (const auto& axes : AllSubsets(static_cast<int>(shape.size()))) {
        HostTensor x(DType::kF32, shape);
        FillF32(x, ++seed, rate);
        for (Op op : {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd})
          CheckReduce(this, op, x, axes, true);
      }
    }
  }
}

TEST_P(ReduceTest, SignedZerosAndSubnormals) {
  OpParams p;
  p.axes = {0};
  p.keepdims = false;
  for (int64_t n : {1, 5, 64, 65, 4096, 4097, 9000}) {
    HostTensor x(DType::kF32, {n});
    for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = -0.0f;
    HostTensor y(DType::kF32, {});
    ASSERT_TRUE(Run(Op::kReduceSum, p, x, y).ok());
    EXPECT_EQ(Bits(y.as<float>()[0]), 0x80000000u) << "sum of " << n << " x -0 must be -0";
    ASSERT_TRUE(Run(Op::kReduceMax, p, x, y).ok());
    EXPECT_EQ(Bits(y.as<float>()[0]), 0x80000000u);
    x.as<float>()[n / 2] = 0.0f;
    ASSERT_TRUE(Run(Op::kReduceSum, p, x, y).ok());
    EXPECT_EQ(Bits(y.as<float>()[0]), 0u) << "sum of -0s and one +0 must be +0";
    ASSERT_TRUE(Run(Op::kReduceMax, p, x, y).ok());
    EXPECT_EQ(Bits(y.as<float>()[0]), 0u);
    ASSERT_TRUE(Run(Op::kReduceMin, p, x, y).ok());
    EXPECT_EQ(Bits(y.as<float>()[0]), n == 1 ? 0u : 0x80000000u);
    // Subnormals are honoured (no FTZ/DAZ): n copies of the smallest subnormal.
    for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = FromBits(1);
    ASSERT_TRUE(Run(Op::kReduceSum, p, x, y).ok());
    EXPECT_EQ(Bits(y.as<float>()[0]), static_cast<uint32_t>(n));
    ASSERT_TRUE(Run(Op::kReduceMean, p, x, y).ok());
    EXPECT_EQ(y.as<float>()[0], FromBits(static_cast<uint32_t>(n)) / static_cast<float>(n));
  }
  // Columns and all-(-0) with kept inner dim.
  HostTensor x(DType::kF32, {5000, 9});
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = -0.0f;
  HostTensor y(DType::kF32, {9});
  ASSERT_TRUE(Run(Op::kReduceSum, p, x, y).ok());
  for (int c = 0; c < 9; ++c) EXPECT_EQ(Bits(y.as<float>()[c]), 0x80000000u);
}

// f32 reduce_max / reduce_min of contiguous runs take the AVX-512 key-range loop on a CPU with
// AVX-512F (the avx2 configurations) and the AVX2 build's loop without it: both must give the
// reference's bits. Lengths around the 64-element body, the 16-lane tail and the 16,384-element
// chunks a single run is split into across threads; specials placed in the tail and at chunk
// ends; NaNs of either sign (a negative NaN is below -inf as a key, so a max must still see it).
TEST_P(ReduceTest, MaxMinRunsWithAndWithoutAvx512) {
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t n : {1, 2, 15, 16, 17, 63, 64, 65, 127, 200, 16383, 16384, 16385, 3 * 16384 + 7, 1 << 20})
    shapes.push_back({n});
  shapes.push_back({5, 77});       // several runs, axes {1}
  shapes.push_back({3, 2, 4097});  // runs over two merged axes, axes {1, 2}
  const uint32_t placed[] = {0x7FC00000u, 0xFFC12345u, 0x7F800001u, 0xFF800001u, 0x7F800000u,
                             0xFF800000u, 0x80000000u, 0x00000000u, 0x00000001u, 0x807FFFFFu};
  for (bool avx512 : {true, false}) {
    cpu::SetReduceMaxMinAvx512ForTesting(avx512);
    uint32_t seed = 500;
    for (const auto& shape : shapes) {
      const std::vector<int64_t> axes =
          shape.size() == 1 ? std::vector<int64_t>{0}
                            : (shape.size() == 2 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2});
      for (double rate : {0.0, 0.01}) {
        HostTensor x(DType::kF32, shape);
        FillF32(x, ++seed, rate);
        for (Op op : {Op::kReduceMax, Op::kReduceMin}) CheckReduce(this, op, x, axes, false);
      }
      // One special at a time at the last element (a tail lane) and at the end of the first
      // 16,384-element chunk, over finite values.
      for (uint32_t bits : placed) {
        for (int64_t at : {int64_t{-1}, int64_t{16383}}) {
          HostTensor x(DType::kF32, shape);
          FillF32(x, ++seed);
          const int64_t i = at < 0 ? x.numel() - 1 : at;
          if (i >= x.numel()) continue;
          x.as<float>()[i] = FromBits(bits);
          for (Op op : {Op::kReduceMax, Op::kReduceMin}) CheckReduce(this, op, x, axes, true);
        }
      }
    }
    // Only zeros of both signs, only infinities.
    for (uint32_t a : {0x80000000u, 0x00000000u, 0xFF800000u, 0x7F800000u}) {
      for (uint32_t b : {0x80000000u, 0x00000000u, 0xFF800000u, 0x7F800000u}) {
        HostTensor x(DType::kF32, {33});
        for (int64_t i = 0; i < 33; ++i) x.as<float>()[i] = FromBits(i % 3 ? a : b);
        for (Op op : {Op::kReduceMax, Op::kReduceMin}) CheckReduce(this, op, x, {0}, false);
      }
    }
  }
  cpu::SetReduceMaxMinAvx512ForTesting(true);
}

TEST_P(ReduceTest, NaNIsCanonical) {
  OpParams p;
  p.axes = {1};
  p.keepdims = false;
  HostTensor x(DType::kF32, {4, 100});
  FillF32(x, 3);
  x.as<float>()[7] = FromBits(0xFFC12345u);        // row 0: negative NaN with payload
  x.as<float>()[100 + 5] = FromBits(0x7F800001u);  // row 1: signalling NaN
  x.as<float>()[200] = INFINITY;                   // row 2: +inf - inf = NaN
  x.as<float>()[201] = -INFINITY;
  for (Op op : {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin, Op::kReduceProd}) {
    HostTensor y(DType::kF32, {4});
    ASSERT_TRUE(Run(op, p, x, y).ok());
    for (int r = 0; r < 2; ++r) EXPECT_EQ(Bits(y.as<float>()[r]), 0x7FC00000u) << OpName(op);
    if (op == Op::kReduceSum || op == Op::kReduceMean) {
      EXPECT_EQ(Bits(y.as<float>()[2]), 0x7FC00000u);
    }
  }
}

TEST_P(ReduceTest, ProdIsTheSequentialChain) {
  // (1 * 3) * (1/3) rounds differently from 3 * (1/3 * 1): the order is pinned, and
  // a tree or lane order would differ on some of these rows.
  OpParams p;
  p.axes = {1};
  p.keepdims = false;
  HostTensor x(DType::kF32, {64, 37});
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = dist(rng);
  HostTensor y(DType::kF32, {64});
  ASSERT_TRUE(Run(Op::kReduceProd, p, x, y).ok());
  for (int r = 0; r < 64; ++r) {
    float want = 1.0f;
    for (int c = 0; c < 37; ++c) want = want * x.as<float>()[r * 37 + c];
    EXPECT_EQ(Bits(y.as<float>()[r]), Bits(want)) << "row " << r;
  }
}

TEST_P(ReduceTest, EmptyReductions) {
  // A reduced dim of size 0: sum +0, mean NaN, max -inf, min +inf; zero outputs: no-op.
  OpParams p;
  p.axes = {1};
  p.keepdims = true;
  HostTensor x(DType::kF32, {3, 0, 2});
  struct Case {
    Op op;
    uint32_t bits;
  } cases[] = {{Op::kReduceSum, 0u},
               {Op::kReduceMean, 0x7FC00000u},
               {Op::kReduceMax, 0xFF800000u},
               {Op::kReduceMin, 0x7F800000u},
               {Op::kReduceProd, 0x3F800000u}};
  for (const Case& c : cases) {
    HostTensor y(DType::kF32, {3, 1, 2});
    ASSERT_TRUE(Run(c.op, p, x, y).ok());
    for (int i = 0; i < 6; ++i) EXPECT_EQ(Bits(y.as<float>()[i]), c.bits) << OpName(c.op);
  }
  HostTensor xi(DType::kI32, {3, 0});
  HostTensor yi(DType::kI32, {3, 1});
  ASSERT_TRUE(Run(Op::kReduceSum, p, xi, yi).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(yi.as<int32_t>()[i], 0);
  // Kept dim of size 0: nothing to write.
  HostTensor x0(DType::kF32, {0, 5});
  HostTensor y0(DType::kF32, {0, 1});
  for (Op op : {Op::kReduceSum, Op::kReduceMean, Op::kReduceMax, Op::kReduceMin}) EXPECT_TRUE(Run(op, p, x0, y0).ok());
  // Rank 0 with no axes is the identity (NaN canonicalized).
  HostTensor s(DType::kF32, {});
  s.as<float>()[0] = FromBits(0xFFC00001u);
  HostTensor ys(DType::kF32, {});
  OpParams none;
  ASSERT_TRUE(Run(Op::kReduceSum, none, s, ys).ok());
  EXPECT_EQ(Bits(ys.as<float>()[0]), 0x7FC00000u);
}

TEST_P(ReduceTest, CanonicalOrderPinned) {
  // Lane tree: lanes {1, 2^24, 1}; fold s=2 gives lane0 = 1 + 1 = 2, then 2 + 2^24 = 2^24+2
  // exactly. A sequential (or left-to-right pairwise) sum rounds 2^24 + 1 to 2^24 twice.
  OpParams p;
  p.axes = {0};
  p.keepdims = false;
  HostTensor x(DType::kF32, {3});
  x.as<float>()[0] = 1.0f;
  x.as<float>()[1] = 16777216.0f;
  x.as<float>()[2] = 1.0f;
  HostTensor y(DType::kF32, {});
  ASSERT_TRUE(Run(Op::kReduceSum, p, x, y).ok());
  EXPECT_EQ(y.as<float>()[0], 16777218.0f);
  volatile float seq = 0.0f;
  for (int i = 0; i < 3; ++i) seq = seq + x.as<float>()[i];
  EXPECT_EQ(seq, 16777216.0f);  // the order matters for this input

  // Chunking: x[0] = 1, x[1] = 2^24, x[4096] = 1 (n = 4097). The first chunk's tree gives
  // 1 + 2^24 = 2^24, then 2^24 + 1 = 2^24. One flat 64-lane tree over all 4097 terms would put
  // x[0] and x[4096] in lane 0 (= 2) and give 2^24 + 2.
  HostTensor c(DType::kF32, {4097});
  for (int64_t i = 0; i < 4097; ++i) c.as<float>()[i] = -0.0f;
  c.as<float>()[0] = 1.0f;
  c.as<float>()[1] = 16777216.0f;
  c.as<float>()[4096] = 1.0f;
  ASSERT_TRUE(Run(Op::kReduceSum, p, c, y).ok());
  EXPECT_EQ(y.as<float>()[0], 16777216.0f);
  EXPECT_EQ(LaneTreeSum([&](int64_t i) { return c.as<float>()[i]; }, 4097), 16777218.0f);

  // Columns keep the same per-output order: [3, 2] reduced over axis 0.
  HostTensor col(DType::kF32, {3, 2});
  const float cv[] = {1.0f, 16777216.0f, 16777216.0f, 1.0f, 1.0f, 1.0f};
  std::memcpy(col.as<float>(), cv, sizeof(cv));
  HostTensor yc(DType::kF32, {2});
  ASSERT_TRUE(Run(Op::kReduceSum, p, col, yc).ok());
  EXPECT_EQ(yc.as<float>()[0], 16777218.0f);  // (1 + 1) + 2^24
  EXPECT_EQ(yc.as<float>()[1], 16777216.0f);  // (2^24 + 1) + 1: each add rounds to even
}

TEST_P(ReduceTest, ArgMax) {
  auto ref = [](const HostTensor& x, int64_t axis) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
    for (size_t i = axis + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
    const int64_t n = x.shape[axis];
    std::vector<int64_t> out(static_cast<size_t>(outer * inner));
    for (int64_t p = 0; p < outer; ++p)
      for (int64_t c = 0; c < inner; ++c) {
        int64_t best = 0;
        for (int64_t a = 1; a < n; ++a) {
          const int64_t i = (p * n + a) * inner + c, j = (p * n + best) * inner + c;
          bool greater;
          if (x.dtype == DType::kF32) {
            const float v = x.as<float>()[i], b = x.as<float>()[j];
            greater = !IsNaN(b) && (IsNaN(v) || v > b);
          } else if (x.dtype == DType::kI32) {
            greater = x.as<int32_t>()[i] > x.as<int32_t>()[j];
          } else if (x.dtype == DType::kI8) {
            greater = x.as<int8_t>()[i] > x.as<int8_t>()[j];
          } else {
            greater = x.as<int64_t>()[i] > x.as<int64_t>()[j];
          }
          if (greater) best = a;
        }
        out[p * inner + c] = best;
      }
    return out;
  };
  const std::vector<std::vector<int64_t>> shapes = {{7}, {5, 300}, {4, 9, 300}, {3, 2, 4, 5}, {1000, 3}};
  uint32_t seed = 400;
  for (DType dt : {DType::kF32, DType::kI32, DType::kI8, DType::kI64}) {
    for (const auto& shape : shapes) {
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        for (double rate : {0.0, 0.1}) {
          if (dt != DType::kF32 && rate > 0) continue;
          HostTensor x(dt, shape);
          if (dt == DType::kF32) {
            FillF32(x, ++seed, rate);
            // Ties including -0 / +0.
            if (x.numel() > 3 && rate == 0) {
              x.as<float>()[0] = -0.0f;
              x.as<float>()[1] = 0.0f;
            }
          }
          if (dt == DType::kI32) FillInt<int32_t>(x, ++seed);
          if (dt == DType::kI8) FillInt<int8_t>(x, ++seed);
          if (dt == DType::kI64) FillInt<int64_t>(x, ++seed);
          for (bool keep : {false, true}) {
            OpParams p;
            p.axis = axis;
            p.keepdims = keep;
            HostTensor y(DType::kI64, OutShape(shape, {axis}, keep));
            ASSERT_TRUE(Run(Op::kArgMax, p, x, y).ok());
            auto want = ref(x, axis);
            ASSERT_EQ(0, std::memcmp(want.data(), y.as<int64_t>(), want.size() * 8))
                << DTypeName(dt) << " axis " << axis;
          }
        }
      }
    }
  }
  // Explicit: first NaN wins; -0 and +0 tie (first wins); first of equal maxima.
  OpParams p;
  p.axis = 0;
  p.keepdims = false;
  HostTensor x(DType::kF32, {6});
  const float v[] = {1.0f, -0.0f, FromBits(0xFFC00001u), 5.0f, FromBits(0x7FC00000u), INFINITY};
  std::memcpy(x.as<float>(), v, sizeof(v));
  HostTensor y(DType::kI64, {});
  ASSERT_TRUE(Run(Op::kArgMax, p, x, y).ok());
  EXPECT_EQ(y.as<int64_t>()[0], 2);
  const float z[] = {-1.0f, -0.0f, 0.0f, -0.0f, -2.0f, -3.0f};
  std::memcpy(x.as<float>(), z, sizeof(z));
  ASSERT_TRUE(Run(Op::kArgMax, p, x, y).ok());
  EXPECT_EQ(y.as<int64_t>()[0], 1);
}

// top_k from the spec: a stable sort of each slice's indices by "strictly better" (larger,
// or smaller for !largest; NaN above every number, all NaNs equal; -0 == +0), first k.
std::vector<int64_t> TopKReference(const HostTensor& x, int64_t axis, int64_t k, bool largest) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
  for (size_t i = axis + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
  const int64_t n = x.shape[axis];
  auto value = [&](int64_t i) -> double {  // exact for every i8/i32 and the i64 used here
    switch (x.dtype) {
      case DType::kF32: return x.as<float>()[i];
      case DType::kI32: return x.as<int32_t>()[i];
      case DType::kI8: return x.as<int8_t>()[i];
      default: return 0.0;
    }
  };
  std::vector<int64_t> out(static_cast<size_t>(outer * k * inner));
  for (int64_t p = 0; p < outer; ++p) {
    for (int64_t c = 0; c < inner; ++c) {
      std::vector<int64_t> idx(static_cast<size_t>(n));
      for (int64_t a = 0; a < n; ++a) idx[a] = a;
      auto at = [&](int64_t a) { return (p * n + a) * inner + c; };
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
        if (x.dtype == DType::kI64) {
          const int64_t va = x.as<int64_t>()[at(a)], vb = x.as<int64_t>()[at(b)];
          return largest ? va > vb : va < vb;
        }
        const double va = value(at(a)), vb = value(at(b));
        if (std::isnan(va) || std::isnan(vb)) return largest ? !std::isnan(vb) : !std::isnan(va);
        return largest ? va > vb : va < vb;
      });
      for (int64_t r = 0; r < k; ++r) out[(p * k + r) * inner + c] = idx[r];
    }
  }
  return out;
}

TEST_P(ReduceTest, TopKMatchesAStableSort) {
  const std::vector<std::vector<int64_t>> shapes = {{7}, {5, 300}, {4, 9, 33}, {3, 2, 4, 5}, {1000, 3}};
  uint32_t seed = 900;
  for (DType dt : {DType::kF32, DType::kI32, DType::kI8, DType::kI64}) {
    for (const auto& shape : shapes) {
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
        const int64_t n = shape[axis];
        HostTensor x(dt, shape);
        if (dt == DType::kF32) FillF32(x, ++seed, 0.1);  // NaNs of several payloads, infinities, zeros
        if (dt == DType::kI32) FillInt<int32_t>(x, ++seed);
        if (dt == DType::kI8) FillInt<int8_t>(x, ++seed);
        if (dt == DType::kI64) FillInt<int64_t>(x, ++seed);
        for (int64_t k : {int64_t{0}, int64_t{1}, (n + 1) / 2, n}) {
          for (bool largest : {true, false}) {
            OpParams p;
            p.axis = axis;
            p.k = k;
            p.largest = largest;
            std::vector<int64_t> out_shape = shape;
            out_shape[axis] = k;
            HostTensor y(DType::kI64, out_shape);
            ASSERT_TRUE(Run(Op::kTopK, p, x, y).ok());
            auto want = TopKReference(x, axis, k, largest);
            ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
            if (want.empty()) continue;  // k = 0: no data pointer to compare (memcmp takes none)
            ASSERT_EQ(0, std::memcmp(want.data(), y.as<int64_t>(), want.size() * 8))
                << DTypeName(dt) << " axis " << axis << " k " << k << " largest " << largest;
          }
        }
      }
    }
  }
  // Pinned: NaN first when largest (last when smallest), -0 and +0 tie by index, equal
  // values keep the lower index first.
  HostTensor x(DType::kF32, {7});
  const float v[] = {1.0f, -0.0f, FromBits(0xFFC00001u), 0.0f, 1.0f, INFINITY, FromBits(0x7FC00000u)};
  std::memcpy(x.as<float>(), v, sizeof(v));
  OpParams p;
  p.axis = 0;
  p.k = 7;
  HostTensor y(DType::kI64, {7});
  ASSERT_TRUE(Run(Op::kTopK, p, x, y).ok());
  EXPECT_EQ(std::vector<int64_t>(y.as<int64_t>(), y.as<int64_t>() + 7), (std::vector<int64_t>{2, 6, 5, 0, 4, 1, 3}));
  p.largest = false;
  ASSERT_TRUE(Run(Op::kTopK, p, x, y).ok());
  EXPECT_EQ(std::vector<int64_t>(y.as<int64_t>(), y.as<int64_t>() + 7), (std::vector<int64_t>{1, 3, 0, 4, 5, 2, 6}));
}

TEST_P(ReduceTest, RejectsBadCalls) {
  HostTensor x(DType::kF32, {2, 3});
  FillF32(x, 1);
  OpParams p;
  p.axes = {1, 0};  // not sorted
  HostTensor y(DType::kF32, {1, 1});
  EXPECT_EQ(Run(Op::kReduceSum, p, x, y).code(), StatusCode::kInvalidArgument);
  p.axes = {2};  // out of range
  EXPECT_EQ(Run(Op::kReduceSum, p, x, y).code(), StatusCode::kInvalidArgument);
  p.axes = {1};
  HostTensor wrong(DType::kF32, {2, 2});
  EXPECT_EQ(Run(Op::kReduceSum, p, x, wrong).code(), StatusCode::kInvalidArgument);
  HostTensor xi(DType::kI32, {2, 3});
  HostTensor yi(DType::kI32, {2, 1});
  EXPECT_EQ(Run(Op::kReduceMean, p, xi, yi).code(), StatusCode::kInvalidArgument);
  HostTensor xb(DType::kBool, {2, 3});
  HostTensor yb(DType::kBool, {2, 1});
  EXPECT_EQ(Run(Op::kReduceMax, p, xb, yb).code(), StatusCode::kInvalidArgument);
  OpParams a;
  a.axis = 1;
  HostTensor e(DType::kF32, {2, 0});
  HostTensor ye(DType::kI64, {2, 1});
  EXPECT_EQ(Run(Op::kArgMax, a, e, ye).code(), StatusCode::kInvalidArgument);  // empty axis
  HostTensor yf(DType::kF32, {2, 1});
  EXPECT_EQ(Run(Op::kArgMax, a, x, yf).code(), StatusCode::kInvalidArgument);  // output not i64
  OpParams t;
  t.axis = 1;
  t.k = 4;  // more than the axis holds
  HostTensor yk(DType::kI64, {2, 4});
  EXPECT_EQ(Run(Op::kTopK, t, x, yk).code(), StatusCode::kInvalidArgument);
  t.k = 2;
  HostTensor ys(DType::kI64, {2, 3});  // wrong output shape
  EXPECT_EQ(Run(Op::kTopK, t, x, ys).code(), StatusCode::kInvalidArgument);
  HostTensor yb2(DType::kI64, {2, 2});
  EXPECT_EQ(Run(Op::kTopK, t, xb, yb2).code(), StatusCode::kInvalidArgument);  // bool input
}

// CumSum reference written from DETERMINISM.md 4.6a: per line, acc = -0.0 (0 for integers),
// positions in scan order, one add per step; exclusive outputs hold acc before the step.
template <typename T>
T RefCumSumAdd(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a + b;
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}

template <typename T>
T RefCanon(T v) {
  if constexpr (std::is_same_v<T, float>) return Canon(v);
  if constexpr (std::is_same_v<T, double>) return v != v ? std::bit_cast<double>(uint64_t{0x7FF8000000000000u}) : v;
  return v;
}

template <typename T>
std::vector<T> RefCumSum(const HostTensor& x, int64_t axis, bool exclusive, bool reverse) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
  for (size_t i = axis + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
  const int64_t n = x.shape[axis];
  std::vector<T> y(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      T acc = std::is_floating_point_v<T> ? static_cast<T>(-0.0) : T(0);
      for (int64_t step = 0; step < n; ++step) {
        const int64_t k = reverse ? n - 1 - step : step;
        const int64_t at = (o * n + k) * inner + j;
        const T before = acc;
        acc = RefCumSumAdd(acc, x.at<T>(at));
        y[at] = RefCanon(exclusive ? (step == 0 ? T(0) : before) : acc);
      }
    }
  }
  return y;
}

template <typename T>
void CheckCumSum(ReduceTest& t, DType dt, const std::vector<int64_t>& shape, uint32_t seed) {
  HostTensor x(dt, shape);
  if constexpr (std::is_same_v<T, float>) {
    FillF32(x, seed, 0.05);  // NaNs of several payloads, infinities, signed zeros, subnormals
  } else if constexpr (std::is_same_v<T, double>) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < x.numel(); ++i) {
      x.as<double>()[i] =
          std::ldexp(static_cast<double>(static_cast<int64_t>(rng() >> 11)) / 9e15, static_cast<int>(rng() % 80) - 40);
      if (rng() % 7 == 0) x.as<double>()[i] = -x.as<double>()[i];
    }
  } else {
    FillInt<T>(x, seed);
  }
  for (const OpParams& p : CumSumParamTable(static_cast<int64_t>(shape.size()))) {
    HostTensor y(dt, shape);
    ASSERT_TRUE(t.Run(Op::kCumSum, p, x, y).ok());
    const std::vector<T> want = RefCumSum<T>(x, p.axis, p.exclusive, p.reverse);
    if (want.empty()) continue;
    ASSERT_EQ(0, std::memcmp(want.data(), y.bytes.data(), want.size() * sizeof(T)))
        << DTypeName(dt) << " shape " << ShapeToString(shape) << " axis " << p.axis << " exclusive " << p.exclusive
        << " reverse " << p.reverse;
  }
}

TEST_P(ReduceTest, CumSumMatchesTheSequentialChain) {
  // Lines shorter and longer than the 64-line block, axis innermost or not, empty tensors.
  const std::vector<std::vector<int64_t>> shapes = {{7}, {5, 70}, {4, 9, 33}, {3, 2, 4, 5}, {300, 3}, {2, 0, 3}};
  uint32_t seed = 1200;
  for (const auto& shape : shapes) {
    CheckCumSum<float>(*this, DType::kF32, shape, ++seed);
    CheckCumSum<double>(*this, DType::kF64, shape, ++seed);
    CheckCumSum<int8_t>(*this, DType::kI8, shape, ++seed);
    CheckCumSum<uint8_t>(*this, DType::kU8, shape, ++seed);
    CheckCumSum<int16_t>(*this, DType::kI16, shape, ++seed);
    CheckCumSum<uint16_t>(*this, DType::kU16, shape, ++seed);
    CheckCumSum<int32_t>(*this, DType::kI32, shape, ++seed);
    CheckCumSum<uint32_t>(*this, DType::kU32, shape, ++seed);
    CheckCumSum<int64_t>(*this, DType::kI64, shape, ++seed);
    CheckCumSum<uint64_t>(*this, DType::kU64, shape, ++seed);
  }
}

TEST_P(ReduceTest, CumSumOrderAndZerosPinned) {
  // Sequential: 2^25 + 1 rounds back to 2^25, so the last sum is 1, where a pairwise
  // (tree) prefix would give 2. -0 stays -0 inclusive; an exclusive line starts at +0.
  OpParams p;
  p.axis = 0;
  HostTensor x = F32({5}, {-0.0f, 33554432.0f, 1.0f, -33554432.0f, 1.0f});
  HostTensor y(DType::kF32, {5});
  ASSERT_TRUE(Run(Op::kCumSum, p, x, y).ok());
  EXPECT_EQ(y.vec<float>(), (std::vector<float>{-0.0f, 33554432.0f, 33554432.0f, 0.0f, 1.0f}));
  EXPECT_EQ(Bits(y.at<float>(0)), 0x80000000u);
  p.exclusive = true;
  ASSERT_TRUE(Run(Op::kCumSum, p, x, y).ok());
  EXPECT_EQ(Bits(y.at<float>(0)), 0x00000000u);
  EXPECT_EQ(Bits(y.at<float>(1)), 0x80000000u);
  EXPECT_EQ(y.at<float>(4), 0.0f);
  p.exclusive = false;
  p.reverse = true;
  ASSERT_TRUE(Run(Op::kCumSum, p, x, y).ok());
  EXPECT_EQ(y.vec<float>(), (std::vector<float>{0.0f, 0.0f, -33554432.0f, -33554432.0f, 1.0f}));
}

TEST_P(ReduceTest, CumSumRejectsBadCalls) {
  HostTensor x(DType::kF32, {2, 3});
  FillF32(x, 3);
  OpParams p;
  p.axis = 2;  // out of range
  HostTensor y(DType::kF32, {2, 3});
  EXPECT_EQ(Run(Op::kCumSum, p, x, y).code(), StatusCode::kInvalidArgument);
  p.axis = 1;
  HostTensor wrong(DType::kF32, {3, 2});
  EXPECT_EQ(Run(Op::kCumSum, p, x, wrong).code(), StatusCode::kInvalidArgument);
  HostTensor yi(DType::kI32, {2, 3});
  EXPECT_EQ(Run(Op::kCumSum, p, x, yi).code(), StatusCode::kInvalidArgument);  // dtype changes
  HostTensor xb(DType::kBool, {2, 3});
  HostTensor yb(DType::kBool, {2, 3});
  EXPECT_EQ(Run(Op::kCumSum, p, xb, yb).code(), StatusCode::kInvalidArgument);
  HostTensor s(DType::kF32, {});
  HostTensor ys(DType::kF32, {});
  p.axis = 0;
  EXPECT_EQ(Run(Op::kCumSum, p, s, ys).code(), StatusCode::kInvalidArgument);  // rank 0
}

INSTANTIATE_TEST_SUITE_P(Cpu, ReduceTest, testing::ValuesIn(AllConfigs()), ConfigName);

}  // namespace
}  // namespace consensor::kernels
