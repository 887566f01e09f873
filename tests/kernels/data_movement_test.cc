// Data-movement kernels (docs/DETERMINISM.md section 4.6): exact bit copies for every
// dtype, hand-checked shapes and indices, and identical bytes across ISAs and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/data_movement_avx512.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

// Deterministic content of any dtype with distinct values (bool alternates).
HostTensor Iota(DType t, Shape shape) {
  const int64_t n = NumElements(shape);
  switch (t) {
    case DType::kF32: {
      std::vector<uint32_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        v[i] = i % 5 == 4 ? 0x7FC00000u + static_cast<uint32_t>(i)
                          : std::bit_cast<uint32_t>(static_cast<float>(i) + 0.25f);
      return F32Bits(shape, v);
    }
    case DType::kI32: {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i * 7 - 3);
      return I32(shape, v);
    }
    case DType::kI8: {
      std::vector<int8_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int8_t>(i * 37);
      return I8(shape, v);
    }
    case DType::kI64: {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = i * 1000000007LL - (int64_t{1} << 40);
      return I64(shape, v);
    }
    case DType::kU8: {
      std::vector<uint8_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 41 + 3);
      return U8(shape, v);
    }
    case DType::kI16: {
      std::vector<int16_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int16_t>(i * 977 - 20000);
      return I16(shape, v);
    }
    case DType::kU16: {
      std::vector<uint16_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint16_t>(i * 1031 + 7);
      return U16(shape, v);
    }
    case DType::kU32: {
      std::vector<uint32_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(i * 2654435761u);
      return U32(shape, v);
    }
    case DType::kU64: {
      std::vector<uint64_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
      return U64(shape, v);
    }
    default: {
      std::vector<uint8_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 5 / 3) & 1);
      return Bool(shape, v);
    }
  }
}

// Copies element `src_i` of `src` into element `dst_i` of `dst` (raw bytes).
void CopyElem(HostTensor& dst, int64_t dst_i, const HostTensor& src, int64_t src_i) {
  const int64_t es = DTypeSize(src.dtype);
  std::memcpy(dst.bytes.data() + dst_i * es, src.bytes.data() + src_i * es, static_cast<size_t>(es));
}

HostTensor Empty(DType t, Shape shape) { return HostTensor(t, std::move(shape), 0); }

std::vector<int64_t> Strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

// Calls fn(multi_index) for every index of `shape` in row-major order.
template <typename Fn>
void ForEachIndex(const Shape& shape, Fn fn) {
  const int64_t n = NumElements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    fn(idx, i);
  }
}

const DType kAllTypes[] = {DType::kF32, DType::kI32, DType::kI8,  DType::kBool, DType::kI64,
                           DType::kU8,  DType::kI16, DType::kU16, DType::kU32,  DType::kU64};

// ---------------------------------------------------------------------------------------

TEST(DataMovementTest, IdentityAndReshapeCopyBits) {
  for (DType t : kAllTypes) {
    HostTensor x = Iota(t, {4, 6});
    EXPECT_EQ(RunAll(Op::kIdentity, {x}, t, {4, 6}).bytes, x.bytes) << DTypeName(t);
    EXPECT_EQ(RunAll(Op::kReshape, {x}, t, {3, 2, 4}).bytes, x.bytes) << DTypeName(t);
    EXPECT_EQ(RunAll(Op::kReshape, {x}, t, {24}).bytes, x.bytes) << DTypeName(t);
  }
  // NaN payloads and -0 survive untouched.
  HostTensor f = F32Bits({3}, {0x7FC0BEEFu, 0xFF800001u, 0x80000000u});
  EXPECT_EQ(RunAll(Op::kIdentity, {f}, DType::kF32, {3}).bytes, f.bytes);
  EXPECT_EQ(RunAll(Op::kReshape, {F32({0, 3}, {})}, DType::kF32, {3, 0}).numel(), 0);
  EXPECT_EQ(RunStatus(Op::kReshape, {f}, DType::kF32, {4}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunStatus(Op::kIdentity, {f}, DType::kI32, {3}).code(), StatusCode::kInvalidArgument);
  // Large copy split across threads.
  HostTensor big = Iota(DType::kI64, {300001});
  EXPECT_EQ(RunAll(Op::kReshape, {big}, DType::kI64, {1, 300001}).bytes, big.bytes);
}

HostTensor TransposeRef(const HostTensor& x, const std::vector<int64_t>& perm) {
  Shape out_shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out_shape[i] = x.shape[perm[i]];
  HostTensor y = Empty(x.dtype, out_shape);
  std::vector<int64_t> in_st = Strides(x.shape);
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& idx, int64_t i) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d) src += idx[d] * in_st[perm[d]];
    CopyElem(y, i, x, src);
  });
  return y;
}

TEST(DataMovementTest, Transpose) {
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {0, 1, 2}},
      {{5, 7}, {1, 0}},
      {{1, 3, 1, 2}, {3, 2, 1, 0}},
      {{2, 0, 3}, {2, 1, 0}},
      {{}, {}},
      {{67, 129, 33}, {1, 2, 0}},
      {{3, 4, 5, 6, 7}, {4, 2, 0, 3, 1}},
      {{3, 70, 45}, {0, 2, 1}},
      {{129, 1, 67}, {2, 1, 0}},
      {{2, 3, 33, 35}, {1, 0, 3, 2}},
      // The innermost dim stays innermost and is short (runs of 1 to 16 bytes): im2col's
      // [N, C, OH, KH, OW, KW] -> [N, OH, OW, C, KH, KW], and one large enough to be split
      // across threads mid-way through the outer dims.
      {{7, 5, 2}, {1, 0, 2}},
      {{3, 17, 4, 5}, {2, 1, 0, 3}},
      {{1, 3, 5, 3, 4, 3}, {0, 2, 4, 1, 3, 5}},
      {{1, 24, 30, 3, 40, 3}, {0, 2, 4, 1, 3, 5}},
  };
  for (const Case& c : cases) {
    for (DType t : kAllTypes) {
      HostTensor x = Iota(t, c.shape);
      HostTensor want = TransposeRef(x, c.perm);
      OpParams p;
      p.perm = c.perm;
      HostTensor y = RunAll(Op::kTranspose, {x}, t, want.shape, p);
      EXPECT_EQ(y.bytes, want.bytes) << DTypeName(t) << " rank " << c.shape.size();
    }
  }
  OpParams bad;
  bad.perm = {0, 0};
  EXPECT_EQ(RunStatus(Op::kTranspose, {Iota(DType::kF32, {2, 2})}, DType::kF32, {2, 2}, bad).code(),
            StatusCode::kInvalidArgument);
}

HostTensor SliceRef(const HostTensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& steps,
                    const Shape& out) {
  HostTensor y = Empty(x.dtype, out);
  std::vector<int64_t> in_st = Strides(x.shape);
  ForEachIndex(out, [&](const std::vector<int64_t>& idx, int64_t i) {
    int64_t src = 0;
    for (size_t d = 0; d < out.size(); ++d) src += (starts[d] + idx[d] * steps[d]) * in_st[d];
    CopyElem(y, i, x, src);
  });
  return y;
}

TEST(DataMovementTest, SliceWithNegativeSteps) {
  struct Case {
    Shape in;
    std::vector<int64_t> starts, steps;
    Shape out;
  };
  const Case cases[] = {
      {{5, 6}, {4, 5}, {-2, -1}, {3, 6}},  // reverse both dims, every other row
      {{5, 6}, {1, 0}, {1, 2}, {3, 3}},    // plain strided
      {{5, 6}, {0, 2}, {1, 1}, {5, 3}},    // contiguous inner run
      {{4, 3, 2}, {3, 0, 1}, {-1, 1, -1}, {4, 3, 2}},
      {{7}, {6}, {-3}, {3}},                       // 6, 3, 0
      {{4, 4}, {2, 4}, {1, 1}, {2, 0}},            // empty output (start == dim allowed)
      {{301, 257}, {300, 1}, {-1, 3}, {301, 85}},  // large, multi-threaded
  };
  for (const Case& c : cases) {
    for (DType t : kAllTypes) {
      HostTensor x = Iota(t, c.in);
      OpParams p;
      p.starts = c.starts;
      p.steps = c.steps;
      HostTensor y = RunAll(Op::kSlice, {x}, t, c.out, p);
      EXPECT_EQ(y.bytes, SliceRef(x, c.starts, c.steps, c.out).bytes) << DTypeName(t);
    }
  }
  // Hand-checked: [0..6] reversed with step -3 from 6.
  OpParams p;
  p.starts = {6};
  p.steps = {-3};
  EXPECT_EQ(RunAll(Op::kSlice, {I32({7}, {0, 1, 2, 3, 4, 5, 6})}, DType::kI32, {3}, p).vec<int32_t>(),
            (std::vector<int32_t>{6, 3, 0}));
  // Parameters that would read out of bounds are rejected, never executed.
  p.starts = {6};
  p.steps = {-3};
  EXPECT_EQ(RunStatus(Op::kSlice, {I32({7}, {0, 1, 2, 3, 4, 5, 6})}, DType::kI32, {4}, p).code(),
            StatusCode::kInvalidArgument);
  p.starts = {7};
  p.steps = {1};
  EXPECT_EQ(RunStatus(Op::kSlice, {I32({7}, {0, 1, 2, 3, 4, 5, 6})}, DType::kI32, {1}, p).code(),
            StatusCode::kInvalidArgument);
  p.starts = {0};
  p.steps = {0};
  EXPECT_EQ(RunStatus(Op::kSlice, {I32({7}, {0, 1, 2, 3, 4, 5, 6})}, DType::kI32, {1}, p).code(),
            StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, ConcatThreeInputsWithZeroSize) {
  OpParams p;
  p.axis = 1;
  HostTensor a = I32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = I32({2, 0}, {});
  HostTensor c = I32({2, 2}, {7, 8, 9, 10});
  EXPECT_EQ(RunAll(Op::kConcat, {a, b, c}, DType::kI32, {2, 5}, p).vec<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 7, 8, 4, 5, 6, 9, 10}));
  EXPECT_EQ(RunAll(Op::kConcat, {b, a, b, c, b}, DType::kI32, {2, 5}, p).vec<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 7, 8, 4, 5, 6, 9, 10}));
  p.axis = 0;
  EXPECT_EQ(RunAll(Op::kConcat, {I8({1, 2}, {1, 2}), I8({0, 2}, {}), I8({2, 2}, {3, 4, 5, 6})}, DType::kI8, {3, 2}, p)
                .vec<int8_t>(),
            (std::vector<int8_t>{1, 2, 3, 4, 5, 6}));
  // All inputs empty.
  EXPECT_EQ(RunAll(Op::kConcat, {I64({0, 2}, {}), I64({0, 2}, {})}, DType::kI64, {0, 2}, p).numel(), 0);
  // Large, every dtype, against a reference, along each axis.
  for (DType t : kAllTypes) {
    for (int axis = 0; axis < 3; ++axis) {
      Shape s1 = {31, 40, 53}, s2 = s1, s3 = s1;
      s2[axis] = 0;
      s3[axis] = 7;
      Shape so = s1;
      so[axis] = s1[axis] + s3[axis];
      HostTensor x1 = Iota(t, s1), x2 = Empty(t, s2), x3 = Iota(t, s3);
      OpParams q;
      q.axis = axis;
      HostTensor y = RunAll(Op::kConcat, {x1, x2, x3}, t, so, q);
      HostTensor want = Empty(t, so);
      std::vector<int64_t> st1 = Strides(s1), st3 = Strides(s3);
      ForEachIndex(so, [&](const std::vector<int64_t>& idx, int64_t i) {
        std::vector<int64_t> k = idx;
        if (k[axis] < s1[axis]) {
          CopyElem(want, i, x1, k[0] * st1[0] + k[1] * st1[1] + k[2] * st1[2]);
        } else {
          k[axis] -= s1[axis];
          CopyElem(want, i, x3, k[0] * st3[0] + k[1] * st3[1] + k[2] * st3[2]);
        }
      });
      EXPECT_EQ(y.bytes, want.bytes) << DTypeName(t) << " axis " << axis;
    }
  }
  p.axis = 1;
  EXPECT_EQ(RunStatus(Op::kConcat, {a, c}, DType::kI32, {2, 6}, p).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunStatus(Op::kConcat, {a, I32({3, 2}, {1, 2, 3, 4, 5, 6})}, DType::kI32, {2, 5}, p).code(),
            StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, Gather) {
  HostTensor data = I32({3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  OpParams p;
  p.axis = 0;
  EXPECT_EQ(RunAll(Op::kGather, {data, I64({2}, {-1, 0})}, DType::kI32, {2, 4}, p).vec<int32_t>(),
            (std::vector<int32_t>{20, 21, 22, 23, 0, 1, 2, 3}));
  // Scalar index removes the axis.
  EXPECT_EQ(RunAll(Op::kGather, {data, I32({}, {1})}, DType::kI32, {4}, p).vec<int32_t>(),
            (std::vector<int32_t>{10, 11, 12, 13}));
  p.axis = 1;
  EXPECT_EQ(RunAll(Op::kGather, {data, I32({2, 2}, {3, -4, -1, 1})}, DType::kI32, {3, 2, 2}, p).vec<int32_t>(),
            (std::vector<int32_t>{3, 0, 3, 1, 13, 10, 13, 11, 23, 20, 23, 21}));
  // Empty indices.
  EXPECT_EQ(RunAll(Op::kGather, {data, I64({0}, {})}, DType::kI32, {3, 0}, p).numel(), 0);
  // Out-of-range indices are a run-time OutOfRange error naming the index and the bound.
  for (int64_t bad : {int64_t{4}, int64_t{-5}, int64_t{1} << 40, std::numeric_limits<int64_t>::min()}) {
    Status s = RunStatus(Op::kGather, {data, I64({2}, {0, bad})}, DType::kI32, {3, 2}, p);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << bad;
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("size 4"), std::string::npos) << s.message();
  }
  EXPECT_EQ(
      RunStatus(Op::kGather, {data, I32({1}, {std::numeric_limits<int32_t>::max()})}, DType::kI32, {3, 1}, p).code(),
      StatusCode::kOutOfRange);
  EXPECT_EQ(RunStatus(Op::kGather, {data, F32({1}, {0})}, DType::kI32, {3, 1}, p).code(), StatusCode::kInvalidArgument);
  // Every dtype, larger, multi-threaded, against a reference.
  for (DType t : kAllTypes) {
    for (int axis = 0; axis < 3; ++axis) {
      Shape ds = {17, 23, 29};
      const int64_t dim = ds[axis];
      std::vector<int64_t> iv(2 * 311);
      for (size_t j = 0; j < iv.size(); ++j) iv[j] = static_cast<int64_t>((j * 7919) % (2 * dim)) - dim;
      HostTensor x = Iota(t, ds);
      HostTensor ind = I64({2, 311}, iv);
      Shape os;
      for (int d = 0; d < axis; ++d) os.push_back(ds[d]);
      os.push_back(2);
      os.push_back(311);
      for (int d = axis + 1; d < 3; ++d) os.push_back(ds[d]);
      OpParams q;
      q.axis = axis;
      HostTensor y = RunAll(Op::kGather, {x, ind}, t, os, q);
      HostTensor want = Empty(t, os);
      std::vector<int64_t> st = Strides(ds);
      ForEachIndex(os, [&](const std::vector<int64_t>& idx, int64_t i) {
        std::vector<int64_t> src_idx;
        for (int d = 0; d < axis; ++d) src_idx.push_back(idx[d]);
        int64_t k = iv[idx[axis] * 311 + idx[axis + 1]];
        src_idx.push_back(k < 0 ? k + dim : k);
        for (int d = axis + 1; d < 3; ++d) src_idx.push_back(idx[d + 1]);
        CopyElem(want, i, x, src_idx[0] * st[0] + src_idx[1] * st[1] + src_idx[2] * st[2]);
      });
      EXPECT_EQ(y.bytes, want.bytes) << DTypeName(t) << " axis " << axis;
    }
  }
}

// The Resize lowering's two taps of one axis in one pass (a gather with five inputs x, i0, w0,
// i1, w1, made only by compilation; DETERMINISM.md 3.1) against the unfused steps run one by
// one: gather, mul, gather, mul, add. Axes with rows of 1 (the last axis: 512-bit gathers), 3
// (the portable loop on every ISA) and 37 and 185 elements (512-bit rows with a partial
// vector); tables of i32 and i64 with negative indices; x and the weights hold NaNs with
// payloads, infinities, signed zeros, subnormals, products that overflow, underflow to +-0 or
// cancel (to +0, or inf - inf); both ISAs, with and without the AVX-512 loops, at 1, 2 and 8
// threads.
TEST(DataMovementTest, ResizeTwoTapsMatchTheUnfusedSteps) {
  const uint32_t specials[] = {0x7FC00001u, 0xFFC00002u, 0x7F800000u, 0xFF800000u, 0x80000000u, 0x00000000u,
                               0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0x3F800000u, 0x7F800001u, 0xBF800000u};
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (const Shape& xs : {Shape{2, 3, 5, 37}, Shape{1, 4, 3}}) {
    const int rank = static_cast<int>(xs.size());
    for (int axis = rank - 1; axis >= 1; --axis) {
      const int64_t n = xs[axis], m = 2 * n + 1;
      std::vector<uint32_t> xv(static_cast<size_t>(NumElements(xs)));
      for (size_t i = 0; i < xv.size(); ++i) {
        xv[i] = i % 7 == 3 ? specials[(i / 7) % 12] : std::bit_cast<uint32_t>(uniform(rng));
      }
      // Weights: mostly in [0, 1] as the lowering makes them, with special values, a negative
      // one and a pair that cancels the two taps of one output (x's taps equal: w1 = -w0).
      std::vector<uint32_t> w0(static_cast<size_t>(m)), w1(static_cast<size_t>(m));
      std::vector<int32_t> i0(static_cast<size_t>(m));
      std::vector<int64_t> i1(static_cast<size_t>(m));
      for (int64_t j = 0; j < m; ++j) {
        const float r = static_cast<float>(j % 4) / 4.0f;
        w0[j] = std::bit_cast<uint32_t>(1.0f - r);
        w1[j] = std::bit_cast<uint32_t>(r);
        if (j % 9 == 5) w0[j] = specials[(j / 9) % 12];
        if (j % 11 == 7) w1[j] = specials[(j / 11 + 5) % 12];
        if (j % 13 == 2) w1[j] = std::bit_cast<uint32_t>(-1.0e30f);
        const int64_t left = std::min<int64_t>(j / 2, n - 1), right = std::min<int64_t>(j / 2 + 1, n - 1);
        i0[j] = static_cast<int32_t>(j % 3 == 0 ? left - n : left);  // negative: counts from the end
        i1[j] = j % 5 == 0 ? right - n : right;
        if (j % 17 == 8) {  // the same tap twice, weights w and -w: +0, or NaN from inf - inf
          i1[j] = i0[j];
          w1[j] = w0[j] ^ 0x80000000u;
        }
      }
      HostTensor x = F32Bits(xs, xv);
      Shape ws(static_cast<size_t>(rank - axis), 1);
      ws[0] = m;
      HostTensor t0 = I32({m}, i0), t1 = I64({m}, i1), a0 = F32Bits(ws, w0), a1 = F32Bits(ws, w1);
      Shape ys = xs;
      ys[axis] = m;
      OpParams p;
      p.axis = axis;
      // The unfused steps on every engine (RunAll checks that they agree).
      HostTensor g0 = RunAll(Op::kGather, {x, t0}, DType::kF32, ys, p);
      HostTensor p0 = RunAll(Op::kMul, {g0, a0}, DType::kF32, ys);
      HostTensor g1 = RunAll(Op::kGather, {x, t1}, DType::kF32, ys, p);
      HostTensor p1 = RunAll(Op::kMul, {g1, a1}, DType::kF32, ys);
      HostTensor want = RunAll(Op::kAdd, {p0, p1}, DType::kF32, ys);
      for (bool avx512 : {true, false}) {
        cpu::SetResizeTapsAvx512ForTesting(avx512);
        for (Engine& e : Engines()) {
          HostTensor y(DType::kF32, ys);
          ASSERT_TRUE(RunKernel(*e.backend, Op::kGather, p, {&x, &t0, &a0, &t1, &a1}, y).ok());
          int64_t first_diff = -1;
          for (int64_t i = 0; i < y.numel() && first_diff < 0; ++i) {
            if (y.at<uint32_t>(i) != want.at<uint32_t>(i)) first_diff = i;
          }
          EXPECT_EQ(first_diff, -1) << e.label << (avx512 ? " avx512" : "") << " x " << ShapeToString(xs) << " axis "
                                    << axis << ": element " << first_diff << " got 0x" << std::hex
                                    << (first_diff >= 0 ? y.at<uint32_t>(first_diff) : 0) << ", want 0x"
                                    << (first_diff >= 0 ? want.at<uint32_t>(first_diff) : 0);
        }
      }
      cpu::SetResizeTapsAvx512ForTesting(true);
    }
  }
  // Out-of-range indices: the first table's first, as the unfused gathers read them.
  HostTensor x = F32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  HostTensor w = F32({3}, {0.5f, 0.25f, 1.0f});
  OpParams p;
  p.axis = 1;
  Status s = RunStatus(Op::kGather, {x, I64({3}, {0, 1, 2}), w, I64({3}, {1, 9, 3}), w}, DType::kF32, {2, 3}, p);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("index 9"), std::string::npos) << s.message();
  s = RunStatus(Op::kGather, {x, I64({3}, {0, -5, 2}), w, I64({3}, {1, 9, 3}), w}, DType::kF32, {2, 3}, p);
  EXPECT_NE(s.message().find("index -5"), std::string::npos) << s.message();
  // Weights that do not hold one value per output index along the axis are refused.
  EXPECT_EQ(RunStatus(Op::kGather, {x, I64({3}, {0, 1, 2}), F32({3, 1}, {1, 1, 1}), I64({3}, {1, 2, 3}), w},
                      DType::kF32, {2, 3}, p)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RunStatus(Op::kGather, {x, I64({3}, {0, 1, 2}), F32({1}, {1}), I64({3}, {1, 2, 3}), w}, DType::kF32, {2, 3}, p)
          .code(),
      StatusCode::kInvalidArgument);
}

// ConvInteger's im2col as one transpose (OpParams::im2col_groups, made only by compilation):
// out[n, g, y, z, c, i, j] = x[n, g * C/g + c, rows[y, i], cols[z, j]], with gather's index
// rules (negative indices count from the end; out of range is OutOfRange). Columns with a unit
// step, another step and negative indices; more than one tile of 64 pixels; i32 and i64 tables.
TEST(DataMovementTest, Im2colTranspose) {
  const int64_t n = 2, c = 6, h = 7, w = 70, groups = 2, cg = c / groups, r = 3, kh = 2, ow = 67, kw = 3;
  HostTensor x = Iota(DType::kU8, {n, c, h, w});
  const std::vector<int64_t> rows = {0, 2, -1, 3, 6, -7};
  std::vector<int64_t> cols;
  for (int64_t z = 0; z < ow; ++z) {
    cols.push_back(z + 2);        // a unit step
    cols.push_back((z * 5) % w);  // another step
    cols.push_back(z - w);        // negative: z
  }
  const Shape out_shape = {n, groups, r, ow, cg, kh, kw};
  HostTensor want = Empty(DType::kU8, out_shape);
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& idx, int64_t i) {
    int64_t row = rows[idx[2] * kh + idx[5]], col = cols[idx[3] * kw + idx[6]];
    row = row < 0 ? row + h : row;
    col = col < 0 ? col + w : col;
    CopyElem(want, i, x, ((idx[0] * c + idx[1] * cg + idx[4]) * h + row) * w + col);
  });
  OpParams p;
  p.perm = {0, 1, 3, 5, 2, 4, 6};
  p.im2col_groups = groups;
  EXPECT_EQ(RunAll(Op::kTranspose, {x, I64({r, kh}, rows), I64({ow, kw}, cols)}, DType::kU8, out_shape, p).bytes,
            want.bytes);
  std::vector<int32_t> rows32(rows.begin(), rows.end()), cols32(cols.begin(), cols.end());
  HostTensor xi = Iota(DType::kI8, {n, c, h, w});
  EXPECT_EQ(RunAll(Op::kTranspose, {xi, I32({r, kh}, rows32), I32({ow, kw}, cols32)}, DType::kI8, out_shape, p).bytes,
            RunAll(Op::kTranspose, {xi, I64({r, kh}, rows), I64({ow, kw}, cols)}, DType::kI8, out_shape, p).bytes);
  // A bad index is the gathers' error: the row table's first.
  std::vector<int64_t> bad_rows = rows;
  bad_rows[4] = h;
  Status s = RunStatus(Op::kTranspose, {x, I64({r, kh}, bad_rows), I64({ow, kw}, cols)}, DType::kU8, out_shape, p);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("position 4"), std::string::npos) << s.message();
  std::vector<int64_t> bad_cols = cols;
  bad_cols[7] = -w - 1;
  s = RunStatus(Op::kTranspose, {x, I64({r, kh}, rows), I64({ow, kw}, bad_cols)}, DType::kU8, out_shape, p);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find(std::to_string(-w - 1)), std::string::npos) << s.message();
  // Shapes, dtypes and group counts that do not fit are refused.
  EXPECT_EQ(RunStatus(Op::kTranspose, {x, I64({r, kh}, rows), I64({ow, kw}, cols)}, DType::kU8,
                      {n, groups, r, ow, cg, kh, kw + 1}, p)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunStatus(Op::kTranspose, {x, F32({r, kh}, std::vector<float>(r * kh)), I64({ow, kw}, cols)}, DType::kU8,
                      out_shape, p)
                .code(),
            StatusCode::kInvalidArgument);
  HostTensor wide = Iota(DType::kI32, {n, c, h, w});
  EXPECT_EQ(
      RunStatus(Op::kTranspose, {wide, I64({r, kh}, rows), I64({ow, kw}, cols)}, DType::kI32, out_shape, p).code(),
      StatusCode::kInvalidArgument);
  p.im2col_groups = 4;  // does not divide C
  EXPECT_EQ(
      RunStatus(Op::kTranspose, {x, I64({r, kh}, rows), I64({ow, kw}, cols)}, DType::kU8, {n, 4, r, ow, 1, kh, kw}, p)
          .code(),
      StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, Expand) {
  EXPECT_EQ(RunAll(Op::kExpand, {I32({3, 1}, {1, 2, 3})}, DType::kI32, {2, 3, 4}).vec<int32_t>(),
            (std::vector<int32_t>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  HostTensor nan = F32Bits({}, {0x7FC0DEADu});
  HostTensor y = RunAll(Op::kExpand, {nan}, DType::kF32, {5});
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(y.at<uint32_t>(i), 0x7FC0DEADu);
  EXPECT_EQ(RunAll(Op::kExpand, {Bool({1, 3}, {1, 0, 1})}, DType::kBool, {2, 3}).vec<uint8_t>(),
            (std::vector<uint8_t>{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(RunAll(Op::kExpand, {I8({1, 3}, {1, 2, 3})}, DType::kI8, {0, 3}).numel(), 0);
  for (DType t : kAllTypes) {
    HostTensor x = Iota(t, {37, 1, 41});
    Shape os = {3, 37, 59, 41};
    HostTensor want = Empty(t, os);
    ForEachIndex(os, [&](const std::vector<int64_t>& idx, int64_t i) { CopyElem(want, i, x, idx[1] * 41 + idx[3]); });
    EXPECT_EQ(RunAll(Op::kExpand, {x}, t, os).bytes, want.bytes) << DTypeName(t);
  }
  EXPECT_EQ(RunStatus(Op::kExpand, {I32({3}, {1, 2, 3})}, DType::kI32, {4}).code(), StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, Pad) {
  OpParams p;
  p.pad_begin = {1, 0};
  p.pad_end = {0, 2};
  p.pad_value = 7.5f;
  HostTensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(RunAll(Op::kPad, {x}, DType::kF32, {3, 5}, p).vec<float>(),
            (std::vector<float>{7.5f, 7.5f, 7.5f, 7.5f, 7.5f, 1, 2, 3, 7.5f, 7.5f, 4, 5, 6, 7.5f, 7.5f}));
  // The fill value converts like cast: truncation, saturation, NaN -> 0, != 0 for bool.
  p.pad_value = 3.7f;
  EXPECT_EQ(RunAll(Op::kPad, {I32({1, 1}, {-1})}, DType::kI32, {2, 3}, p).vec<int32_t>(),
            (std::vector<int32_t>{3, 3, 3, -1, 3, 3}));
  p.pad_value = 300.0f;
  EXPECT_EQ(RunAll(Op::kPad, {I8({1, 1}, {-1})}, DType::kI8, {2, 3}, p).vec<int8_t>(),
            (std::vector<int8_t>{127, 127, 127, -1, 127, 127}));
  p.pad_value = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(RunAll(Op::kPad, {I64({1, 1}, {-1})}, DType::kI64, {2, 3}, p).vec<int64_t>(),
            (std::vector<int64_t>{0, 0, 0, -1, 0, 0}));
  p.pad_value = 0.5f;
  EXPECT_EQ(RunAll(Op::kPad, {Bool({1, 1}, {0})}, DType::kBool, {2, 3}, p).vec<uint8_t>(),
            (std::vector<uint8_t>{1, 1, 1, 0, 1, 1}));
  // Unsigned targets saturate at 0 and 2^n - 1; u8 is not bool (2.5 -> 2, not 1).
  p.pad_value = 2.5f;
  EXPECT_EQ(RunAll(Op::kPad, {U8({1, 1}, {9})}, DType::kU8, {2, 3}, p).vec<uint8_t>(),
            (std::vector<uint8_t>{2, 2, 2, 9, 2, 2}));
  p.pad_value = 300.0f;
  EXPECT_EQ(RunAll(Op::kPad, {U8({1, 1}, {9})}, DType::kU8, {2, 3}, p).vec<uint8_t>(),
            (std::vector<uint8_t>{255, 255, 255, 9, 255, 255}));
  p.pad_value = -1.0f;
  EXPECT_EQ(RunAll(Op::kPad, {U32({1, 1}, {9})}, DType::kU32, {2, 3}, p).vec<uint32_t>(),
            (std::vector<uint32_t>{0, 0, 0, 9, 0, 0}));
  EXPECT_EQ(RunAll(Op::kPad, {I16({1, 1}, {9})}, DType::kI16, {2, 3}, p).vec<int16_t>(),
            (std::vector<int16_t>{-1, -1, -1, 9, -1, -1}));
  p.pad_value = 70000.0f;
  EXPECT_EQ(RunAll(Op::kPad, {U16({1, 1}, {9})}, DType::kU16, {2, 3}, p).vec<uint16_t>(),
            (std::vector<uint16_t>{65535, 65535, 65535, 9, 65535, 65535}));
  EXPECT_EQ(RunAll(Op::kPad, {U64({1, 1}, {9})}, DType::kU64, {2, 3}, p).vec<uint64_t>(),
            (std::vector<uint64_t>{70000, 70000, 70000, 9, 70000, 70000}));
  p.pad_value = -0.0f;
  HostTensor z = RunAll(Op::kPad, {F32({1, 1}, {1})}, DType::kF32, {2, 3}, p);
  EXPECT_EQ(z.at<uint32_t>(0), 0x80000000u);  // f32 fill copies the attribute's bits
  // Empty input padded to a non-empty output is all fill; a rank-0 tensor is copied.
  p.pad_value = 2.0f;
  EXPECT_EQ(RunAll(Op::kPad, {I32({0, 2}, {})}, DType::kI32, {1, 4}, OpParams{p}).numel(), 4);
  OpParams q = p;
  q.pad_begin = {1, 1};
  q.pad_end = {0, 1};
  EXPECT_EQ(RunAll(Op::kPad, {I32({0, 2}, {})}, DType::kI32, {1, 4}, q).vec<int32_t>(),
            (std::vector<int32_t>{2, 2, 2, 2}));
  OpParams r;
  EXPECT_EQ(RunAll(Op::kPad, {I32({}, {9})}, DType::kI32, {}, r).vec<int32_t>(), (std::vector<int32_t>{9}));
  // Larger 3-D pad, every dtype, against a reference.
  for (DType t : kAllTypes) {
    Shape is = {23, 31, 45};
    OpParams s;
    s.pad_begin = {2, 0, 3};
    s.pad_end = {1, 4, 0};
    s.pad_value = 1.0f;
    Shape os = {26, 35, 48};
    HostTensor xin = Iota(t, is);
    HostTensor fill = Empty(t, {1});
    switch (t) {
      case DType::kF32: {
        float one = 1.0f;
        std::memcpy(fill.bytes.data(), &one, 4);
        break;
      }
      case DType::kI32: {
        int32_t one = 1;
        std::memcpy(fill.bytes.data(), &one, 4);
        break;
      }
      case DType::kI64: {
        int64_t one = 1;
        std::memcpy(fill.bytes.data(), &one, 8);
        break;
      }
      default: fill.bytes[0] = 1; break;
    }
    HostTensor want = Empty(t, os);
    std::vector<int64_t> st = Strides(is);
    ForEachIndex(os, [&](const std::vector<int64_t>& idx, int64_t i) {
      int64_t src = 0;
      bool inside = true;
      for (int d = 0; d < 3; ++d) {
        int64_t k = idx[d] - s.pad_begin[d];
        if (k < 0 || k >= is[d]) inside = false;
        src += k * st[d];
      }
      if (inside) CopyElem(want, i, xin, src);
      else CopyElem(want, i, fill, 0);
    });
    EXPECT_EQ(RunAll(Op::kPad, {xin}, t, os, s).bytes, want.bytes) << DTypeName(t);
  }
  OpParams bad;
  bad.pad_begin = {-1, 0};
  bad.pad_end = {1, 0};
  EXPECT_EQ(RunStatus(Op::kPad, {x}, DType::kF32, {2, 3}, bad).code(), StatusCode::kInvalidArgument);
}

// The fill value `v` (0 or a small positive integer) of dtype t, as the kernel converts it.
HostTensor SmallFill(DType t, int v) {
  HostTensor f = Empty(t, {1});
  if (t == DType::kF32) {
    const float x = static_cast<float>(v);
    std::memcpy(f.bytes.data(), &x, 4);
  } else {
    f.bytes[0] = static_cast<uint8_t>(t == DType::kBool ? v != 0 : v);  // little-endian, v < 128
  }
  return f;
}

// Naive pad: every output element looks up its input element or takes the fill.
HostTensor ReferencePad(const HostTensor& x, const Shape& os, const std::vector<int64_t>& pb, const HostTensor& fill) {
  HostTensor want = Empty(x.dtype, os);
  const std::vector<int64_t> st = Strides(x.shape);
  ForEachIndex(os, [&](const std::vector<int64_t>& idx, int64_t i) {
    int64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < os.size(); ++d) {
      const int64_t k = idx[d] - pb[d];
      if (k < 0 || k >= x.shape[d]) inside = false;
      src += k * st[d];
    }
    if (inside) CopyElem(want, i, x, src);
    else CopyElem(want, i, fill, 0);
  });
  return want;
}

// Shapes that take each path of the canonical pad (merged unpadded dims, short fixed-size
// runs, long runs, long fills by memset or by pattern, ranges that cut rows at 2 and 8
// threads), for every dtype size, against the naive reference.
TEST(DataMovementTest, PadCanonicalPathsMatchReference) {
  struct Case {
    Shape in;
    std::vector<int64_t> pb, pe;
  };
  const Case cases[] = {
      {{1, 3, 5, 1, 7, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1}},  // ConvTranspose stride 2
      {{1, 8, 33, 1, 35, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1}},
      {{2, 4, 1, 5, 1}, {0, 0, 1, 0, 0}, {0, 0, 1, 0, 2}},  // unit dims padded to 3
      {{3, 4, 5}, {1, 2, 0}, {2, 0, 3}},                    // every dim padded
      {{2, 3, 37}, {0, 1, 2}, {1, 0, 5}},                   // long runs
      {{5, 4}, {1, 1}, {0, 2}},
      {{6, 3}, {2, 0}, {1, 1}},
      {{6, 2}, {0, 0}, {0, 1}},
      {{2, 2, 2}, {0, 3, 20}, {4, 0, 17}},  // long fills
      {{3, 1, 4}, {0, 2, 0}, {0, 1, 0}},    // middle dim only
      {{7}, {3}, {2}},
      {{3, 4, 5}, {0, 0, 0}, {0, 0, 0}},  // a plain copy
      {{0, 3}, {1, 0}, {1, 2}},           // empty input
      {{2, 0, 3}, {0, 1, 0}, {0, 1, 1}},
      {{2, 1, 3, 1, 2, 1, 2, 1}, {0, 1, 0, 0, 1, 2, 0, 1}, {1, 0, 0, 2, 0, 1, 1, 0}},
  };
  for (const Case& c : cases) {
    Shape os = c.in;
    for (size_t d = 0; d < os.size(); ++d) os[d] += c.pb[d] + c.pe[d];
    for (DType t : kAllTypes) {
      for (int v : {0, 3}) {
        OpParams p;
        p.pad_begin = c.pb;
        p.pad_end = c.pe;
        p.pad_value = static_cast<float>(v);
        const HostTensor x = Iota(t, c.in);
        EXPECT_EQ(RunAll(Op::kPad, {x}, t, os, p).bytes, ReferencePad(x, os, c.pb, SmallFill(t, v)).bytes)
            << DTypeName(t) << " fill " << v << " input " << ::testing::PrintToString(c.in);
      }
    }
  }
  // Views need not be aligned to their element size: an f32 pad into and from odd addresses.
  OpParams p;
  p.pad_begin = {0, 0, 0, 0};
  p.pad_end = {0, 1, 0, 1};
  p.pad_value = 3.0f;
  const HostTensor x = Iota(DType::kF32, {3, 1, 9, 1});
  const HostTensor want = ReferencePad(x, {3, 2, 9, 2}, p.pad_begin, SmallFill(DType::kF32, 3));
  for (Engine& e : Engines()) {
    std::vector<uint8_t> in_bytes(x.bytes.size() + 1), out_bytes(want.bytes.size() + 1, kPoison);
    std::memcpy(in_bytes.data() + 1, x.bytes.data(), x.bytes.size());
    const TensorView in = MakeView(DType::kF32, x.shape, in_bytes.data() + 1);
    ASSERT_TRUE(
        RunKernel(*e.backend, Op::kPad, p, {in}, MakeView(DType::kF32, {3, 2, 9, 2}, out_bytes.data() + 1)).ok())
        << e.label;
    EXPECT_TRUE(std::equal(want.bytes.begin(), want.bytes.end(), out_bytes.begin() + 1)) << e.label;
  }
}

TEST(DataMovementTest, RejectsNonDataMovementOps) {
  ThreadPool pool(1);
  cpu::CpuContext ctx;
  ctx.pool = &pool;
  HostTensor x = F32({1}, {1});
  HostTensor y = F32({1}, {0});
  TensorView in[2] = {x.view(), x.view()};
  TensorView out = y.view();
  OpParams params;
  KernelCall call = MakeCall(Op::kAdd, params, in, 2, &out);
  EXPECT_EQ(cpu::RunDataMovement(call, ctx).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace consensor::kernels
