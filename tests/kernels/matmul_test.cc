// MatMul (f32) and MatMulInt8 against naive references written straight from
// docs/DETERMINISM.md 4.4, bit for bit, for both ISAs and several thread counts.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

// Numpy broadcasting of the batch dims; returns the output shape.
std::vector<int64_t> OutShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t nb = std::max(a.size(), b.size()) - 2;
  std::vector<int64_t> y(nb + 2);
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

int64_t Numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Offset of the (M,K)/(K,N) matrix of input `in` for output batch index `bi`.
int64_t InputMatrixOffset(const std::vector<int64_t>& in, const std::vector<int64_t>& y, int64_t bi) {
  const size_t nb = y.size() - 2, ni = in.size() - 2;
  int64_t off = 0, stride = in[ni] * in[ni + 1];
  for (size_t j = nb; j-- > 0;) {
    const int64_t idx = bi % y[j];
    bi /= y[j];
    const int64_t ij = static_cast<int64_t>(j) - static_cast<int64_t>(nb - ni);
    if (ij >= 0) {
      if (in[ij] != 1) off += idx * stride;
      stride *= in[ij];
    }
  }
  return off;
}

// The spec: acc = +0; for k: acc = fma(a[m,k], b[k,n], acc); NaN -> 0x7FC00000.
std::vector<float> RefMatMul(const std::vector<float>& a, const std::vector<int64_t>& as, const std::vector<float>& b,
                             const std::vector<int64_t>& bs) {
  const auto ys = OutShape(as, bs);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const int64_t batch = Numel(ys) / std::max<int64_t>(1, M * N);
  std::vector<float> y(Numel(ys));
  if (y.empty()) return y;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const float* pa = a.data() + InputMatrixOffset(as, ys, bi);
    const float* pb = b.data() + InputMatrixOffset(bs, ys, bi);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        float acc = +0.0f;
        for (int64_t k = 0; k < K; ++k) acc = std::fma(pa[m * K + k], pb[k * N + n], acc);
        if (std::isnan(acc)) acc = FromBits(0x7FC00000u);
        y[(bi * M + m) * N + n] = acc;
      }
    }
  }
  return y;
}

std::vector<int32_t> RefMatMulI8(const std::vector<int8_t>& a, const std::vector<int64_t>& as,
                                 const std::vector<int8_t>& b, const std::vector<int64_t>& bs) {
  const auto ys = OutShape(as, bs);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const int64_t batch = Numel(ys) / std::max<int64_t>(1, M * N);
  std::vector<int32_t> y(Numel(ys));
  if (y.empty()) return y;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const int8_t* pa = a.data() + InputMatrixOffset(as, ys, bi);
    const int8_t* pb = b.data() + InputMatrixOffset(bs, ys, bi);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += int64_t{pa[m * K + k]} * int64_t{pb[k * N + n]};
        y[(bi * M + m) * N + n] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));
      }
    }
  }
  return y;
}

// The call with its B (the weights) through Backend::PrepareConstant first, as a loaded program
// does when B is a constant; the call carries the prepared copy (null where the backend has none).
Status RunPrepared(Backend& be, const std::vector<float>& a, const std::vector<int64_t>& as,
                   const std::vector<float>& b, const std::vector<int64_t>& bs, std::vector<float>* y,
                   const std::vector<int64_t>& ys) {
  OpParams params;
  std::vector<TensorView> in = {MakeView(DType::kF32, as, const_cast<float*>(a.data())),
                                MakeView(DType::kF32, bs, const_cast<float*>(b.data()))};
  TensorView out = MakeView(DType::kF32, ys, y->data());
  KernelCall call = MakeCall(Op::kMatMul, params, in.data(), 2, &out);
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedOperand> prepared, be.PrepareConstant(call, 1));
  call.prepared = prepared.get();
  return be.Run(call);
}

template <typename In, typename Out>
Status RunOne(Backend& be, Op op, const std::vector<In>& a, const std::vector<int64_t>& as, const std::vector<In>& b,
              const std::vector<int64_t>& bs, std::vector<Out>* y, const std::vector<int64_t>& ys) {
  const DType in_dt = std::is_same_v<In, float> ? DType::kF32 : DType::kI8;
  const DType out_dt = std::is_same_v<Out, float> ? DType::kF32 : DType::kI32;
  return RunKernel(be, op, OpParams{},
                   {MakeView(in_dt, as, const_cast<In*>(a.data())), MakeView(in_dt, bs, const_cast<In*>(b.data()))},
                   MakeView(out_dt, ys, y->data()));
}

// A mix of ordinary values and, when `special`, NaNs with payloads, infinities, signed
// zeros, subnormals and extreme magnitudes.
std::vector<float> RandomF32(int64_t n, std::mt19937& rng, bool special) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int> pick(0, 15);
  static const uint32_t kSpecial[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7F800000u, 0xFF800000u,
                                      0x80000000u, 0x00000000u, 0x00000001u, 0x807FFFFFu, 0x00400000u,
                                      0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u, 0x1F800000u};
  std::vector<float> v(n);
  for (auto& x : v) {
    const int p = pick(rng);
    if (special && p == 0) {
      x = FromBits(kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))]);
    } else if (special && p == 1) {
      x = u(rng) * 1e-39f;  // subnormal range
    } else {
      x = u(rng);
    }
  }
  return v;
}

void CheckF32(const std::vector<int64_t>& as, const std::vector<int64_t>& bs, bool special, uint32_t seed,
              bool prepare = false) {
  std::mt19937 rng(seed);
  const auto a = RandomF32(Numel(as), rng, special);
  const auto b = RandomF32(Numel(bs), rng, special);
  const auto ys = OutShape(as, bs);
  const auto ref = RefMatMul(a, as, b, bs);
  for (auto& e : Engines()) {
    std::vector<float> y(ref.size(), FromBits(0x7F81234Fu));  // poison
    Status s =
        prepare ? RunPrepared(*e.backend, a, as, b, bs, &y, ys) : RunOne(*e.backend, Op::kMatMul, a, as, b, bs, &y, ys);
    ASSERT_TRUE(s.ok()) << e.label << ": " << s.ToString();
    if (y.empty()) continue;
    if (std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) != 0) {
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(Bits(y[i]), Bits(ref[i]))
            << e.label << " element " << i << " of shape a=" << ::testing::PrintToString(as)
            << " b=" << ::testing::PrintToString(bs);
      }
    }
  }
}

// matmul_i8 of a and b with each operand copied to `offset` bytes past a 64-byte boundary (odd
// offsets put every row at an odd address), on every engine, against the reference. prepare: B
// goes through Backend::PrepareConstant first, as a loaded program's constant B does.
void CheckI8Operands(const std::vector<int8_t>& a, const std::vector<int64_t>& as, const std::vector<int8_t>& b,
                     const std::vector<int64_t>& bs, int64_t offset = 0, bool prepare = false) {
  const auto ys = OutShape(as, bs);
  const auto ref = RefMatMulI8(a, as, b, bs);
  struct alignas(64) Line {
    int8_t bytes[64];
  };
  std::vector<Line> a_buf((a.size() + offset) / 64 + 1), b_buf((b.size() + offset) / 64 + 1);
  int8_t* pa = a_buf.front().bytes + offset;
  int8_t* pb = b_buf.front().bytes + offset;
  std::copy(a.begin(), a.end(), pa);
  std::copy(b.begin(), b.end(), pb);
  for (auto& e : Engines()) {
    std::vector<int32_t> y(ref.size(), 0x5A5A5A5A);
    OpParams params;
    std::vector<TensorView> in = {MakeView(DType::kI8, as, pa), MakeView(DType::kI8, bs, pb)};
    TensorView out = MakeView(DType::kI32, ys, y.data());
    KernelCall call = MakeCall(Op::kMatMulInt8, params, in.data(), 2, &out);
    std::unique_ptr<PreparedOperand> prepared;
    if (prepare) {
      auto p = e.backend->PrepareConstant(call, 1);
      ASSERT_TRUE(p.ok()) << e.label << ": " << p.status().ToString();
      prepared = std::move(p).value();
      call.prepared = prepared.get();
    }
    Status s = e.backend->Run(call);
    ASSERT_TRUE(s.ok()) << e.label << ": " << s.ToString();
    ASSERT_EQ(y, ref) << e.label << " a=" << ::testing::PrintToString(as) << " b=" << ::testing::PrintToString(bs)
                      << " offset " << offset;
  }
}

void CheckI8(const std::vector<int64_t>& as, const std::vector<int64_t>& bs, uint32_t seed, bool extreme = false,
             int64_t offset = 0, bool prepare = false) {
  std::mt19937 rng(seed);
  auto gen = [&](int64_t n) {
    std::vector<int8_t> v(n);
    for (auto& x : v) x = extreme ? (rng() % 4 ? int8_t{-128} : int8_t{127}) : static_cast<int8_t>(rng() & 0xFF);
    return v;
  };
  const auto a = gen(Numel(as));
  const auto b = gen(Numel(bs));
  CheckI8Operands(a, as, b, bs, offset, prepare);
}

const std::vector<std::array<int64_t, 3>>& MatShapes() {
  // {M, K, N}: tiny, odd, exact and off-by-one micro-tile sizes, k-blocks (KC=256),
  // M-blocks (MC=144), N beyond the portable (1024) and AVX2 (4080) N-blocks, empty dims.
  static const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1},    {1, 2, 1},     {2, 1, 3},      {7, 13, 5},    {17, 33, 65}, {6, 16, 16},   {12, 8, 32},
      {5, 7, 15},   {7, 9, 17},    {13, 5, 31},    {6, 1, 16},    {1, 300, 1},  {13, 257, 31}, {8, 256, 24},
      {3, 513, 19}, {145, 40, 47}, {150, 300, 50}, {37, 64, 100}, {2, 3, 4100}, {1, 0, 5},     {4, 0, 17},
      {0, 5, 3},    {4, 5, 0},     {0, 0, 0},      {64, 64, 64},  {19, 1, 33},
  };
  return shapes;
}

TEST(MatMulF32, ShapesMatchSpecBits) {
  uint32_t seed = 1;
  for (const auto& s : MatShapes()) CheckF32({s[0], s[1]}, {s[1], s[2]}, false, seed++);
}

TEST(MatMulF32, SpecialValuesMatchSpecBits) {
  uint32_t seed = 100;
  for (const auto& s : MatShapes()) CheckF32({s[0], s[1]}, {s[1], s[2]}, true, seed++);
}

TEST(MatMulF32, BatchBroadcasting) {
  CheckF32({2, 1, 7, 13}, {1, 3, 13, 5}, false, 7);
  CheckF32({2, 1, 7, 13}, {1, 3, 13, 5}, true, 8);
  CheckF32({3, 9, 20}, {20, 18}, false, 9);
  CheckF32({9, 20}, {4, 20, 18}, false, 10);
  CheckF32({2, 3, 1, 6, 5}, {4, 5, 17}, true, 11);
  CheckF32({5, 1, 1}, {1, 1, 1}, false, 12);
  CheckF32({0, 4, 3}, {3, 2}, false, 13);
  CheckF32({2, 1, 4, 3}, {0, 3, 2}, false, 14);
  CheckF32({16, 8, 0}, {16, 0, 8}, false, 15);
  CheckF32({12, 30, 40}, {12, 40, 33}, false, 16);
}

TEST(MatMulF32, WeightsPackedOnceMatchSpecBits) {
  // The AVX2 engines run on a B packed once by PrepareConstant (the portable ones get none):
  // every shape, special values, then batches of B (own, broadcast, rank 1).
  uint32_t seed = 300;
  for (const auto& s : MatShapes()) CheckF32({s[0], s[1]}, {s[1], s[2]}, false, seed++, true);
  for (const auto& s : MatShapes()) CheckF32({s[0], s[1]}, {s[1], s[2]}, true, seed++, true);
  CheckF32({2, 1, 7, 13}, {1, 3, 13, 5}, true, seed++, true);
  CheckF32({3, 9, 20}, {20, 18}, false, seed++, true);
  CheckF32({9, 20}, {4, 20, 18}, false, seed++, true);
  CheckF32({12, 30, 40}, {12, 40, 33}, false, seed++, true);
  CheckF32({4, 200, 300}, {300, 40}, true, seed++, true);  // M blocks of 144 rows over 2 k-blocks
  CheckF32({3, 50}, {50, 1}, false, seed++, true);         // N = 1: one padded panel
}

TEST(MatMulF32, TwelveRowTilesMatchSpecBitsWithAndWithoutAvx512) {
  // Full 12 x 16 tiles go to the 512-bit micro-kernels where the CPU has AVX-512F (two full
  // panels side by side as one 12 x 32 tile); then the same on the 256-bit kernel alone. Row
  // counts around 12, 24 (at most 24 rows: B read in place, more: B packed) and 144, columns
  // around 16 and 32 (pairs of panels, a lone full panel after them, a partial one), k-blocks of
  // 256, B packed per call and once.
  if (!cpu::gemm::CpuHasAvx512F()) std::printf("note: this CPU has no AVX-512F; only the 256-bit kernel runs\n");
  const std::vector<std::array<int64_t, 3>> shapes = {{25, 7, 16},    {36, 300, 33}, {30, 513, 48}, {157, 257, 100},
                                                      {64, 576, 130}, {27, 1, 17},   {48, 256, 15}, {289, 40, 64},
                                                      {12, 7, 16},    {24, 300, 33}, {17, 513, 48}, {13, 40, 100},
                                                      {23, 257, 31},  {24, 100, 80}, {150, 20, 96}, {37, 270, 81}};
  uint32_t seed = 700;
  for (bool avx512 : {true, false}) {
    cpu::gemm::SetGemmAvx512ForTesting(avx512);
    for (const auto& s : shapes) {
      for (bool prepare : {false, true}) {
        CheckF32({s[0], s[1]}, {s[1], s[2]}, false, seed++, prepare);
        CheckF32({s[0], s[1]}, {s[1], s[2]}, true, seed++, prepare);
      }
    }
  }
  cpu::gemm::SetGemmAvx512ForTesting(true);
}

TEST(MatMulF32, PreparedWeightsOnlyForF32OnAvx2) {
  std::vector<float> a(5 * 40, 1.0f), b(3 * 40 * 20, 0.5f), y(3 * 5 * 20);
  for (auto& e : Engines()) {
    OpParams params;
    std::vector<TensorView> in = {MakeView(DType::kF32, {5, 40}, a.data()),
                                  MakeView(DType::kF32, {3, 40, 20}, b.data())};
    TensorView out = MakeView(DType::kF32, {3, 5, 20}, y.data());
    KernelCall call = MakeCall(Op::kMatMul, params, in.data(), 2, &out);
    auto prepared = e.backend->PrepareConstant(call, 1);
    ASSERT_TRUE(prepared.ok()) << e.label;
    const bool expect = e.backend->name() == "cpu-avx2";
    EXPECT_EQ(*prepared != nullptr, expect) << e.label;
    // Three batches of 40 x 20, columns padded to 32.
    if (*prepared) {
      EXPECT_EQ((*prepared)->bytes(), int64_t{sizeof(float)} * 3 * 40 * 32) << e.label;
    }
    auto other = e.backend->PrepareConstant(call, 0);  // A is not a weight
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(*other, nullptr);
    // A prepared copy that does not fit the call (another B shape) is ignored, not misread.
    if (*prepared) {
      std::vector<float> b2(40 * 20, 0.25f), y2(5 * 20);
      std::vector<TensorView> in2 = {in[0], MakeView(DType::kF32, {40, 20}, b2.data())};
      TensorView out2 = MakeView(DType::kF32, {5, 20}, y2.data());
      KernelCall call2 = MakeCall(Op::kMatMul, params, in2.data(), 2, &out2);
      call2.prepared = prepared->get();
      ASSERT_TRUE(e.backend->Run(call2).ok()) << e.label;
      for (float v : y2) EXPECT_EQ(v, 10.0f) << e.label;  // 40 * 1 * 0.25
    }
  }
}

TEST(MatMulF32, SignedZeroAndCanonicalNaN) {
  // Products that are all -0: the chain starts at +0, so fma(-0 product, +0) = +0.
  std::vector<float> a = {-0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity()};
  std::vector<float> b = {0.0f, -0.0f, 0.0f, 0.0f};  // [2, 2]
  std::vector<float> y(4);
  for (auto& e : Engines()) {
    ASSERT_TRUE(RunOne(*e.backend, Op::kMatMul, a, {2, 2}, b, {2, 2}, &y, {2, 2}).ok());
    EXPECT_EQ(Bits(y[0]), 0x00000000u) << e.label;  // fma(-0,0,+0)=+0, fma(1,0,+0)=+0
    EXPECT_EQ(Bits(y[1]), 0x00000000u) << e.label;
    EXPECT_EQ(Bits(y[2]), 0x7FC00000u) << e.label;  // inf * 0 = NaN, canonical
    EXPECT_EQ(Bits(y[3]), 0x7FC00000u) << e.label;
  }
  // Negative NaN with payload in the input becomes the canonical NaN.
  std::vector<float> a2(40, 1.0f), b2(40 * 20, 0.5f);
  a2[17] = FromBits(0xFFC12345u);
  std::vector<float> y2(20);
  for (auto& e : Engines()) {
    ASSERT_TRUE(RunOne(*e.backend, Op::kMatMul, a2, {1, 40}, b2, {40, 20}, &y2, {1, 20}).ok());
    for (float v : y2) EXPECT_EQ(Bits(v), 0x7FC00000u) << e.label;
  }
}

TEST(MatMulF32, KBlocksCarryTheRunningValue) {
  // A chain where adding per-block partials would round differently: a huge early term
  // that later terms cancel against. The reference is the single sequential chain.
  const int64_t K = 1000;
  std::vector<float> a(K), b(K * 16);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (int64_t k = 0; k < K; ++k) a[k] = k == 0 ? 1e8f : (k == 600 ? -1e8f : u(rng));
  for (auto& x : b) x = u(rng);
  CheckF32({1, K}, {K, 16}, false, 5);  // random as well
  auto ref = RefMatMul(a, {1, K}, b, {K, 16});
  std::vector<float> y(16);
  for (auto& e : Engines()) {
    ASSERT_TRUE(RunOne(*e.backend, Op::kMatMul, a, {1, K}, b, {K, 16}, &y, {1, 16}).ok());
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), 64)) << e.label;
  }
}

TEST(MatMulF32, RejectsBadCalls) {
  std::vector<float> a(12), b(12), y(16);
  auto& be = *Engines().front().backend;
  // Inner dims differ.
  EXPECT_EQ(RunOne(be, Op::kMatMul, a, {3, 4}, b, {3, 4}, &y, {3, 4}).code(), StatusCode::kInvalidArgument);
  // Output shape wrong.
  EXPECT_EQ(RunOne(be, Op::kMatMul, a, {3, 4}, b, {4, 3}, &y, {3, 4}).code(), StatusCode::kInvalidArgument);
  // Rank 1.
  EXPECT_EQ(RunOne(be, Op::kMatMul, a, {12}, b, {12, 1}, &y, {1}).code(), StatusCode::kInvalidArgument);
  // Batch dims that do not broadcast.
  EXPECT_EQ(RunOne(be, Op::kMatMul, a, {2, 2, 3}, b, {3, 1, 4}, &y, {3, 2, 4}).code(), StatusCode::kInvalidArgument);
  // Wrong dtypes.
  std::vector<int8_t> ai(12), bi(12);
  std::vector<float> yf(9);
  EXPECT_EQ(RunOne(be, Op::kMatMul, ai, {3, 4}, bi, {4, 3}, &yf, {3, 3}).code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> yi(9);
  EXPECT_EQ(RunOne(be, Op::kMatMulInt8, a, {3, 4}, b, {4, 3}, &yi, {3, 3}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOne(be, Op::kMatMulInt8, ai, {3, 4}, bi, {4, 3}, &yf, {3, 3}).code(), StatusCode::kInvalidArgument);
}

TEST(MatMulI8, ShapesExact) {
  uint32_t seed = 200;
  for (const auto& s : MatShapes()) CheckI8({s[0], s[1]}, {s[1], s[2]}, seed++);
  CheckI8({2, 1, 7, 13}, {1, 3, 13, 5}, 300);
  CheckI8({3, 9, 21}, {21, 18}, 301);
  CheckI8({12, 30, 513}, {12, 513, 33}, 302);
}

TEST(MatMulI8, ExtremeValuesAndWrap) {
  CheckI8({7, 1001}, {1001, 19}, 400, /*extreme=*/true);
  // -128 * -128 = 16384 summed 140000 times exceeds 2^31: wraps in two's complement.
  const int64_t K = 140000;
  std::vector<int8_t> a(K, -128), b(K * 17, -128);
  b[5] = 127;
  auto ref = RefMatMulI8(a, {1, K}, b, {K, 17});
  EXPECT_EQ(ref[0], static_cast<int32_t>(static_cast<uint32_t>(uint64_t{16384} * K)));
  std::vector<int32_t> y(17);
  for (auto& e : Engines()) {
    ASSERT_TRUE(RunOne(*e.backend, Op::kMatMulInt8, a, {1, K}, b, {K, 17}, &y, {1, 17}).ok());
    EXPECT_EQ(y, ref) << e.label;
  }
}

// The AVX2 engines' int8 kernels: AMX tiles (every block, small ones too, on them), AVX-512 VNNI,
// AVX2 vpmaddwd. Each is turned on only where the CPU has it; elsewhere its pass runs the best
// kernel the CPU has.
enum class I8Kernel { kAmx, kVnni, kAvx2 };

const char* I8KernelName(I8Kernel k) { return k == I8Kernel::kAmx ? "amx" : k == I8Kernel::kVnni ? "vnni" : "avx2"; }

void UseI8Kernel(I8Kernel k) {
  cpu::gemm::SetGemmVnniForTesting(k != I8Kernel::kAvx2);
  cpu::gemm::SetGemmAmxForTesting(k == I8Kernel::kAmx);
  cpu::gemm::SetGemmAmxEveryBlockForTesting(k == I8Kernel::kAmx);
}

void RestoreI8Kernels() {
  cpu::gemm::SetGemmVnniForTesting(true);
  cpu::gemm::SetGemmAmxForTesting(true);
  cpu::gemm::SetGemmAmxEveryBlockForTesting(false);
}

constexpr I8Kernel kI8Kernels[] = {I8Kernel::kAmx, I8Kernel::kVnni, I8Kernel::kAvx2};

TEST(MatMulI8, EveryKernelMatchesSpec) {
  // On a CPU with AMX the AVX2 engines run the tdpbssd kernel (tiles of 16 or 32 rows by 16 or 32
  // columns, A read in place 64 k at a time, the K % 64 tail from a zero-padded copy, the block's
  // last rows in a tile configured with fewer rows); then the vpdpbusd kernel (12-row tiles of 16
  // or 32 columns, A read in place four bytes at a time, equal k-blocks of at most 1024); then the
  // vpmaddwd kernel alone. Rows around 12, 16, 24, 32 and 144, columns around 16 and 32, K from 1
  // to past two k-blocks with every remainder modulo 4 and many modulo 64, operands at odd
  // addresses, B packed per call and once (PrepareConstant, which packs only for the AMX and VNNI
  // kernels).
  if (!cpu::gemm::CpuHasAvx512Vnni()) std::printf("note: this CPU has no AVX-512 VNNI; only the AVX2 kernel runs\n");
  if (!cpu::gemm::CpuHasAmxInt8()) std::printf("note: this CPU (or OS) has no AMX int8; its pass runs VNNI\n");
  const std::vector<std::array<int64_t, 3>> shapes = {
      // {M, K, N}
      {12, 1, 16},   {13, 2, 17},   {11, 3, 15},   {24, 4, 32},    {25, 5, 33},    {12, 7, 1},
      {36, 64, 48},  {23, 511, 31}, {12, 512, 32}, {37, 513, 47},  {150, 515, 65}, {145, 1027, 20},
      {1, 9, 100},   {7, 300, 64},  {49, 576, 64}, {12, 44, 112},  {290, 36, 16},  {19, 1, 33},
      {64, 2051, 3}, {1, 64, 16},   {15, 63, 17},  {16, 65, 16},   {17, 127, 31},  {31, 128, 32},
      {32, 129, 48}, {33, 191, 1},  {48, 62, 50},  {47, 1152, 64}, {97, 27, 64},   {64, 576, 16}};
  uint32_t seed = 900;
  for (I8Kernel kernel : kI8Kernels) {
    UseI8Kernel(kernel);
    SCOPED_TRACE(I8KernelName(kernel));
    for (const auto& s : shapes) {
      for (bool prepare : {false, true}) {
        CheckI8({s[0], s[1]}, {s[1], s[2]}, seed++, false, 0, prepare);
        const int offset = 1 + static_cast<int>(seed % 7);
        CheckI8({s[0], s[1]}, {s[1], s[2]}, seed++, /*extreme=*/true, offset, prepare);
      }
    }
    for (bool prepare : {false, true}) {
      CheckI8({2, 1, 30, 13}, {1, 3, 13, 45}, seed++, false, 3, prepare);  // batches of B, each packed
      CheckI8({3, 40, 99}, {99, 18}, seed++, false, 5, prepare);           // one B for every batch of A
      CheckI8({40, 99}, {3, 99, 18}, seed++, false, 1, prepare);
    }
  }
  RestoreI8Kernels();
}

TEST(MatMulI8, AmxOnlyOnLargeBlocksByDefault) {
  // Without SetGemmAmxEveryBlockForTesting, blocks under 2^20 multiply-adds go to the VNNI kernel
  // (reading B unpacked when its prepared copy is AMX's) and larger ones to AMX: the same bits
  // either way, around the boundary and with the threads splitting the rows.
  RestoreI8Kernels();
  uint32_t seed = 1500;
  for (const auto& s : std::vector<std::array<int64_t, 3>>{{16, 1024, 64}, {17, 1023, 61}, {300, 100, 40}}) {
    for (bool prepare : {false, true}) CheckI8({s[0], s[1]}, {s[1], s[2]}, seed++, false, 3, prepare);
  }
}

TEST(MatMulI8, ExtremesWrapWithFullTiles) {
  // The extremes on full tiles and edge rows, 32-column tiles and 16-column ones: every product
  // -128 x -128 = 16384 (the sum passes 2^31 at this K and wraps), 127 x -128 and -128 x 127,
  // which also drive the VNNI kernel's row correction -128 * sum_k a past 2^31 (it wraps as well).
  // K has a tail of 3 beyond its full quads (and of 3 beyond its full 64-k tiles). 13 rows: one
  // VNNI tile and an edge row, one AMX tile of 13 rows; 45 rows: an AMX tile pair and 13 rows.
  const int64_t K = 133123, N = 48;
  for (const int64_t M : {13, 45}) {
    for (I8Kernel kernel : kI8Kernels) {
      UseI8Kernel(kernel);
      SCOPED_TRACE(std::string(I8KernelName(kernel)) + " M=" + std::to_string(M));
      for (const auto& [av, bv] : std::vector<std::pair<int8_t, int8_t>>{{-128, -128}, {127, -128}, {-128, 127}}) {
        // 45 rows: AMX's tile pair once; the other kernels' tiles and corrections at 13 rows.
        if (M == 45 && (av != -128 || kernel != I8Kernel::kAmx)) continue;
        std::vector<int8_t> a(M * K, av), b(K * N, bv);
        // Row m has m zero terms at its start and column n has n + 1 at its end, so every output
        // av * bv * (K - m - n - 1) differs from the others in its row and column: a row or
        // column computed in another's place (or with another's correction) shows.
        for (int64_t m = 0; m < M; ++m) std::fill(a.begin() + m * K, a.begin() + m * K + m, int8_t{0});
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t k = K - 1 - n; k < K; ++k) b[k * N + n] = 0;
        }
        const auto ref = RefMatMulI8(a, {M, K}, b, {K, N});
        if (av == -128 && bv == -128) {
          EXPECT_EQ(ref[0], static_cast<int32_t>(static_cast<uint32_t>(uint64_t{16384} * (K - 1))));
          EXPECT_LT(ref[0], 0);  // 16384 (K - 1) > 2^31 wrapped
        }
        for (bool prepare : {false, true}) CheckI8Operands(a, {M, K}, b, {K, N}, 1, prepare);
      }
    }
  }
  RestoreI8Kernels();
}

TEST(MatMulI8, PreparedWeightsOnlyForTheAmxAndVnniKernels) {
  // A constant int8 B is packed once only where the AMX or VNNI kernel runs (the AVX2 engines of a
  // CPU with AVX-512 VNNI): 3 batches of 40 x 20 as panels of 32 columns by 40 k (VNNI) or by 64 k
  // (AMX). A prepared copy that does not fit the call (another B shape) is ignored, not misread.
  std::vector<int8_t> a(5 * 40, 1), b(3 * 40 * 20, 2), b2(40 * 20, 3);
  std::vector<int32_t> y(3 * 5 * 20), y2(5 * 20);
  for (I8Kernel kernel : kI8Kernels) {
    UseI8Kernel(kernel);
    const bool vnni = kernel != I8Kernel::kAvx2;
    const bool amx = kernel == I8Kernel::kAmx && cpu::gemm::CpuHasAmxInt8();
    for (auto& e : Engines()) {
      OpParams params;
      std::vector<TensorView> in = {MakeView(DType::kI8, {5, 40}, a.data()),
                                    MakeView(DType::kI8, {3, 40, 20}, b.data())};
      TensorView out = MakeView(DType::kI32, {3, 5, 20}, y.data());
      KernelCall call = MakeCall(Op::kMatMulInt8, params, in.data(), 2, &out);
      auto prepared = e.backend->PrepareConstant(call, 1);
      ASSERT_TRUE(prepared.ok()) << e.label;
      const bool expect = vnni && e.backend->name() == "cpu-avx2" && cpu::gemm::CpuHasAvx512Vnni();
      EXPECT_EQ(*prepared != nullptr, expect) << e.label;
      if (!*prepared) continue;
      EXPECT_EQ((*prepared)->bytes(), int64_t{3} * 32 * (amx ? 64 : 40)) << e.label;
      std::vector<TensorView> in2 = {in[0], MakeView(DType::kI8, {40, 20}, b2.data())};
      TensorView out2 = MakeView(DType::kI32, {5, 20}, y2.data());
      KernelCall call2 = MakeCall(Op::kMatMulInt8, params, in2.data(), 2, &out2);
      call2.prepared = prepared->get();
      ASSERT_TRUE(e.backend->Run(call2).ok()) << e.label;
      for (int32_t v : y2) EXPECT_EQ(v, 120) << e.label;  // 40 * 1 * 3
    }
  }
  RestoreI8Kernels();
}

}  // namespace
}  // namespace consensor::kernels
