// The CUDA data-movement family (kernels/cuda/data_movement.cu) against the CPU backend,
// bit for bit: the same KernelCall runs on the portable single-threaded CpuBackend, on the
// emulated CUDA backend (the exact kernel source under the SIMT emulation) and, where a
// GPU is usable, on the real CUDA backend. Errors must match in code and message (gather's
// run-time index error reports the first bad index in index order on every backend).
#include <gtest/gtest.h>

#include <bit>
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

// Runs on every backend; statuses must agree (code and message), outputs bit for bit.
// Returns the CPU status.
Status Compare(Op op, std::vector<HostTensor> inputs, DType out_dtype, Shape out_shape, const OpParams& params = {},
               int misalign = 0) {
  CudaCompareOptions options{.out_misalign = misalign, .cpu_must_succeed = false, .same_message = true};
  for (size_t i = 0; i < inputs.size(); ++i) {
    options.input_misalign.push_back(((misalign + static_cast<int>(i)) % 4) * misalign);
  }
  std::string label = std::string(OpName(op)) + " -> " + ShapeToString(out_shape) + " " +
                      std::string(DTypeName(out_dtype)) + " misalign " + std::to_string(misalign) + " inputs";
  for (HostTensor& t : inputs) label += " " + ShapeToString(t.shape);
  HostTensor ref(out_dtype, out_shape);
  return CompareCudaWithCpu(label, op, params, Ptrs(inputs), ref, options);
}

// Distinct random bits of any dtype, NaN payloads and -0 included for f32.
HostTensor Random(DType t, const Shape& shape, uint32_t seed) {
  HostTensor x(t, shape);
  std::mt19937_64 rng(seed);
  if (t == DType::kBool) {
    for (int64_t i = 0; i < x.numel(); ++i) x.as<uint8_t>()[i] = static_cast<uint8_t>(rng() & 1);
  } else if (t == DType::kF32) {
    FillF32(x, seed, 0.3);
  } else {
    for (auto& byte : x.bytes) byte = static_cast<uint8_t>(rng());
  }
  return x;
}

const DType kAllTypes[] = {DType::kF32, DType::kI32, DType::kI8, DType::kBool, DType::kI64};

TEST(CudaDataMovementTest, IdentityAndReshape) {
  uint32_t seed = 1;
  for (DType t : kAllTypes) {
    for (int mis : {0, 1, 3}) {
      EXPECT_TRUE(Compare(Op::kIdentity, {Random(t, {4, 6}, seed++)}, t, {4, 6}, {}, mis).ok());
      EXPECT_TRUE(Compare(Op::kReshape, {Random(t, {4, 6}, seed++)}, t, {3, 2, 4}, {}, mis).ok());
      EXPECT_TRUE(Compare(Op::kIdentity, {Random(t, {}, seed++)}, t, {}, {}, mis).ok());
      EXPECT_TRUE(Compare(Op::kReshape, {Random(t, {0, 3}, seed++)}, t, {3, 0}, {}, mis).ok());
      EXPECT_TRUE(Compare(Op::kReshape, {Random(t, {1001}, seed++)}, t, {7, 11, 13}, {}, mis).ok());
      EXPECT_TRUE(
          Compare(Op::kIdentity, {Random(t, {1, 2, 1, 2, 1, 2, 1, 3}, seed++)}, t, {1, 2, 1, 2, 1, 2, 1, 3}, {}, mis)
              .ok());
    }
  }
  EXPECT_FALSE(Compare(Op::kReshape, {Random(DType::kF32, {3}, 9)}, DType::kF32, {4}).ok());
  EXPECT_FALSE(Compare(Op::kIdentity, {Random(DType::kF32, {3}, 9)}, DType::kI32, {3}).ok());
  EXPECT_FALSE(Compare(Op::kIdentity, {Random(DType::kF32, {3, 1}, 9)}, DType::kF32, {1, 3}).ok());
}

TEST(CudaDataMovementTest, Transpose) {
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
      {{37, 45, 3}, {1, 2, 0}},
      {{3, 4, 5, 6, 7}, {4, 2, 0, 3, 1}},
      {{3, 70, 45}, {0, 2, 1}},
      {{65, 1, 33}, {2, 1, 0}},
      {{2, 3, 33, 35}, {1, 0, 3, 2}},
      {{64, 64}, {1, 0}},
      {{2, 1, 2, 1, 2, 3, 1, 2}, {7, 6, 5, 4, 3, 2, 1, 0}},
      {{2, 2, 2, 2, 2, 2, 2, 2}, {1, 0, 3, 2, 5, 4, 7, 6}},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    Shape out(c.perm.size());
    for (size_t i = 0; i < c.perm.size(); ++i) out[i] = c.shape[c.perm[i]];
    OpParams p;
    p.perm = c.perm;
    for (DType t : kAllTypes) {
      EXPECT_TRUE(Compare(Op::kTranspose, {Random(t, c.shape, seed++)}, t, out, p).ok());
    }
    EXPECT_TRUE(Compare(Op::kTranspose, {Random(DType::kF32, c.shape, seed++)}, DType::kF32, out, p, 1).ok());
  }
  OpParams bad;
  bad.perm = {0, 0};
  EXPECT_FALSE(Compare(Op::kTranspose, {Random(DType::kF32, {2, 2}, 1)}, DType::kF32, {2, 2}, bad).ok());
  bad.perm = {1, 0};
  EXPECT_FALSE(Compare(Op::kTranspose, {Random(DType::kF32, {2, 3}, 1)}, DType::kF32, {2, 3}, bad).ok());
  bad.perm = {0};
  EXPECT_FALSE(Compare(Op::kTranspose, {Random(DType::kF32, {2, 3}, 1)}, DType::kF32, {2, 3}, bad).ok());
  EXPECT_FALSE(Compare(Op::kTranspose, {Random(DType::kF32, {2, 3}, 1)}, DType::kF32, {3, 2}).ok());  // no params
}

TEST(CudaDataMovementTest, SliceRandom) {
  std::mt19937 rng(7);
  const std::vector<Shape> shapes = {{10}, {5, 6}, {3, 4, 5}, {2, 3, 2, 4}, {}, {4, 0, 3}, {2, 2, 1, 3, 2, 1, 2, 3}};
  uint32_t seed = 300;
  for (const Shape& s : shapes) {
    for (int trial = 0; trial < 6; ++trial) {
      OpParams p;
      Shape out(s.size());
      for (size_t d = 0; d < s.size(); ++d) {
        const int64_t dim = s[d];
        if (dim == 0) {
          p.starts.push_back(0);
          p.steps.push_back(1);
          out[d] = 0;
          continue;
        }
        const int64_t steps[] = {1, 2, 3, -1, -2};
        const int64_t step = steps[rng() % 5];
        const int64_t start = static_cast<int64_t>(rng() % dim);
        const int64_t max_count = step > 0 ? (dim - 1 - start) / step + 1 : start / (-step) + 1;
        p.starts.push_back(start);
        p.steps.push_back(step);
        out[d] = static_cast<int64_t>(rng() % (max_count + 1));
        if (trial < 3 && out[d] == 0) out[d] = max_count;
      }
      for (DType t : kAllTypes) {
        EXPECT_TRUE(Compare(Op::kSlice, {Random(t, s, seed++)}, t, out, p, trial % 2).ok());
      }
    }
  }
  // Errors: step 0, reading past the end, before the start.
  OpParams p;
  p.starts = {0};
  p.steps = {0};
  EXPECT_FALSE(Compare(Op::kSlice, {Random(DType::kF32, {5}, 1)}, DType::kF32, {2}, p).ok());
  p.steps = {2};
  p.starts = {1};
  EXPECT_FALSE(Compare(Op::kSlice, {Random(DType::kF32, {5}, 1)}, DType::kF32, {3}, p).ok());
  p.steps = {-1};
  EXPECT_FALSE(Compare(Op::kSlice, {Random(DType::kF32, {5}, 1)}, DType::kF32, {3}, p).ok());
  p.starts = {5};
  p.steps = {1};
  EXPECT_FALSE(Compare(Op::kSlice, {Random(DType::kF32, {5}, 1)}, DType::kF32, {1}, p).ok());
}

TEST(CudaDataMovementTest, Concat) {
  struct Case {
    std::vector<Shape> ins;
    int64_t axis;
    Shape out;
  };
  const Case cases[] = {
      {{{2, 3}, {2, 0}, {2, 5}}, 1, {2, 8}},
      {{{2, 3}, {1, 3}, {4, 3}}, 0, {7, 3}},
      {{{3, 1, 4}, {3, 2, 4}, {3, 3, 4}}, 1, {3, 6, 4}},
      {{{5}, {}, {7}}, 0, {12}},
      {{{2, 3, 5}, {2, 3, 3}}, 2, {2, 3, 8}},
      {{{0, 3}, {0, 2}}, 1, {0, 5}},
      {{{1, 1, 2, 1, 2, 1, 2, 2}, {1, 1, 2, 1, 2, 1, 2, 3}}, 7, {1, 1, 2, 1, 2, 1, 2, 5}},
      {{{8, 16}, {8, 16}}, 1, {8, 32}},
      {{{33, 3}, {33, 5}, {33, 1}}, 1, {33, 9}},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    OpParams p;
    p.axis = c.axis;
    for (DType t : kAllTypes) {
      for (int mis : {0, 1}) {
        std::vector<HostTensor> ins;
        for (const Shape& s : c.ins) {
          // {} in a case list means a zero-size input along the axis (rank matches the output).
          Shape shape = s;
          if (shape.empty()) {
            shape = c.out;
            shape[c.axis] = 0;
          }
          ins.push_back(Random(t, shape, seed++));
        }
        EXPECT_TRUE(Compare(Op::kConcat, std::move(ins), t, c.out, p, mis).ok());
      }
    }
  }
  OpParams p;
  p.axis = 1;
  EXPECT_FALSE(
      Compare(Op::kConcat, {Random(DType::kF32, {2, 3}, 1), Random(DType::kF32, {3, 3}, 2)}, DType::kF32, {2, 6}, p)
          .ok());
  EXPECT_FALSE(
      Compare(Op::kConcat, {Random(DType::kF32, {2, 3}, 1), Random(DType::kF32, {2, 3}, 2)}, DType::kF32, {2, 7}, p)
          .ok());
  EXPECT_FALSE(
      Compare(Op::kConcat, {Random(DType::kF32, {2, 3}, 1), Random(DType::kI32, {2, 3}, 2)}, DType::kF32, {2, 6}, p)
          .ok());
}

HostTensor Indices(DType t, const Shape& shape, const std::vector<int64_t>& v) {
  if (t == DType::kI32) {
    std::vector<int32_t> w(v.begin(), v.end());
    return I32(shape, w);
  }
  return I64(shape, v);
}

TEST(CudaDataMovementTest, Gather) {
  struct Case {
    Shape data;
    int64_t axis;
    Shape idx_shape;
  };
  const Case cases[] = {
      {{5, 3}, 0, {4}},
      {{5, 3}, 1, {2, 2}},
      {{2, 7, 3}, 1, {}},
      {{2, 7, 3}, 2, {5}},
      {{9}, 0, {3, 2}},
      {{4, 0, 2}, 0, {3}},
      {{4, 3}, 0, {0}},
      {{6, 5, 4}, 0, {2, 3}},
      {{2, 1, 2, 3, 1, 2, 2}, 3, {2}},
      {{3, 2, 1, 2, 1, 2, 2, 2}, 0, {2}},
  };
  std::mt19937 rng(11);
  uint32_t seed = 700;
  for (const Case& c : cases) {
    const int64_t dim = c.data[c.axis];
    const int64_t n = NumElements(c.idx_shape);
    Shape out;
    for (int64_t d = 0; d < c.axis; ++d) out.push_back(c.data[d]);
    for (int64_t x : c.idx_shape) out.push_back(x);
    for (size_t d = c.axis + 1; d < c.data.size(); ++d) out.push_back(c.data[d]);
    OpParams p;
    p.axis = c.axis;
    for (DType it : {DType::kI32, DType::kI64}) {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (auto& x : v) x = static_cast<int64_t>(rng() % (2 * dim)) - dim;  // in [-dim, dim)
      for (DType t : kAllTypes) {
        for (int mis : {0, 1}) {
          EXPECT_TRUE(
              Compare(Op::kGather, {Random(t, c.data, seed++), Indices(it, c.idx_shape, v)}, t, out, p, mis).ok());
        }
      }
    }
  }
}

TEST(CudaDataMovementTest, GatherIndexErrors) {
  OpParams p;
  p.axis = 0;
  for (DType it : {DType::kI32, DType::kI64}) {
    // Several bad indices: every backend reports the first in index order.
    Status s = Compare(Op::kGather, {Random(DType::kF32, {4, 3}, 1), Indices(it, {6}, {0, 3, -4, 9, -5, 4})},
                       DType::kF32, {6, 3}, p);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
    EXPECT_NE(s.message().find("index 9 (at indices position 3)"), std::string::npos) << s.ToString();
    // Bad index with an empty outer/inner extent is still an error.
    s = Compare(Op::kGather, {Random(DType::kI8, {4, 0}, 1), Indices(it, {2}, {1, -5})}, DType::kI8, {2, 0}, p);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
    // An axis of size 0: every index is out of range.
    s = Compare(Op::kGather, {Random(DType::kI8, {0, 2}, 1), Indices(it, {1}, {0})}, DType::kI8, {1, 2}, p);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
    // Many indices with the bad ones late and spread (several emulated blocks).
    std::vector<int64_t> v(3000, 1);
    v[2999] = -100;
    v[2500] = 77;
    v[2700] = 4;
    s = Compare(Op::kGather, {Random(DType::kI64, {4}, 1), Indices(it, {3000}, v)}, DType::kI64, {3000}, p);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
    EXPECT_NE(s.message().find("(at indices position 2500)"), std::string::npos) << s.ToString();
  }
  EXPECT_FALSE(Compare(Op::kGather, {Random(DType::kF32, {4}, 1), F32({1}, {0.0f})}, DType::kF32, {1}, p).ok());
  p.axis = 1;
  EXPECT_FALSE(Compare(Op::kGather, {Random(DType::kF32, {4}, 1), I32({1}, {0})}, DType::kF32, {1}, p).ok());
}

TEST(CudaDataMovementTest, Expand) {
  struct Case {
    Shape in, out;
  };
  const Case cases[] = {
      {{}, {3, 4}},     {{1}, {5}},
      {{3, 1}, {3, 4}}, {{1, 4}, {3, 4}},
      {{4}, {2, 3, 4}}, {{2, 1, 3}, {2, 5, 3}},
      {{1, 1}, {0, 3}}, {{3, 1}, {2, 3, 33}},
      {{5, 6}, {5, 6}}, {{2, 1, 2, 1, 2, 1, 2, 1}, {2, 2, 2, 2, 2, 2, 2, 3}},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    for (DType t : kAllTypes) {
      for (int mis : {0, 1}) EXPECT_TRUE(Compare(Op::kExpand, {Random(t, c.in, seed++)}, t, c.out, {}, mis).ok());
    }
  }
  EXPECT_FALSE(Compare(Op::kExpand, {Random(DType::kF32, {3}, 1)}, DType::kF32, {2, 4}).ok());
  EXPECT_FALSE(Compare(Op::kExpand, {Random(DType::kF32, {2, 3}, 1)}, DType::kF32, {3}).ok());
}

TEST(CudaDataMovementTest, Pad) {
  struct Case {
    Shape in;
    std::vector<int64_t> begin, end;
  };
  const Case cases[] = {
      {{3}, {1}, {2}},
      {{2, 3}, {0, 1}, {1, 0}},
      {{2, 3, 4}, {1, 0, 2}, {0, 3, 1}},
      {{}, {}, {}},
      {{0, 2}, {1, 1}, {0, 1}},
      {{2, 0}, {0, 0}, {0, 0}},
      {{4, 5}, {0, 0}, {0, 0}},
      {{1, 2, 1, 2, 1, 2, 1, 2}, {0, 1, 0, 0, 1, 0, 0, 1}, {1, 0, 0, 1, 0, 0, 1, 0}},
      {{3, 33}, {2, 7}, {1, 9}},
  };
  const float values[] = {0.0f,
                          -0.0f,
                          1.5f,
                          -2.75f,
                          1e10f,
                          -1e10f,
                          300.0f,
                          -300.0f,
                          std::bit_cast<float>(0x7FC0BEEFu),
                          std::bit_cast<float>(0xFF800000u)};
  uint32_t seed = 1100;
  int vi = 0;
  for (const Case& c : cases) {
    Shape out(c.in.size());
    for (size_t d = 0; d < c.in.size(); ++d) out[d] = c.in[d] + c.begin[d] + c.end[d];
    for (DType t : kAllTypes) {
      for (int k = 0; k < 3; ++k) {
        OpParams p;
        p.pad_begin = c.begin;
        p.pad_end = c.end;
        p.pad_value = values[vi++ % 10];
        EXPECT_TRUE(Compare(Op::kPad, {Random(t, c.in, seed++)}, t, out, p, k % 2).ok()) << p.pad_value;
      }
    }
  }
  for (float v : values) {
    for (DType t : kAllTypes) {
      OpParams p;
      p.pad_begin = {1};
      p.pad_end = {1};
      p.pad_value = v;
      EXPECT_TRUE(Compare(Op::kPad, {Random(t, {2}, seed++)}, t, {4}, p).ok()) << v;
    }
  }
  OpParams p;
  p.pad_begin = {-1};
  p.pad_end = {2};
  EXPECT_FALSE(Compare(Op::kPad, {Random(DType::kF32, {3}, 1)}, DType::kF32, {4}, p).ok());
  p.pad_begin = {1};
  EXPECT_FALSE(Compare(Op::kPad, {Random(DType::kF32, {3}, 1)}, DType::kF32, {5}, p).ok());
}

TEST(CudaDataMovementTest, LargerCopies) {
  // Several grid-stride iterations per emulated thread; tiled transpose with many tiles.
  OpParams p;
  p.perm = {1, 0};
  EXPECT_TRUE(Compare(Op::kTranspose, {Random(DType::kF32, {200, 150}, 1)}, DType::kF32, {150, 200}, p).ok());
  p.perm = {0, 2, 1};
  EXPECT_TRUE(Compare(Op::kTranspose, {Random(DType::kI8, {3, 77, 91}, 2)}, DType::kI8, {3, 91, 77}, p).ok());
  EXPECT_TRUE(Compare(Op::kReshape, {Random(DType::kI64, {30001}, 3)}, DType::kI64, {30001}, {}).ok());
  EXPECT_TRUE(Compare(Op::kExpand, {Random(DType::kF32, {1, 300}, 4)}, DType::kF32, {100, 300}, {}).ok());
}

TEST(CudaDataMovementTest, RejectsNonDataMovementOps) {
  EXPECT_FALSE(Compare(Op::kAdd, {Random(DType::kF32, {2}, 1)}, DType::kF32, {2}).ok());
}

}  // namespace
}  // namespace consensor::kernels
