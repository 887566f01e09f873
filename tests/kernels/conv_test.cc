// Conv2D against a naive reference written straight from docs/DETERMINISM.md 4.4, bit for
// bit, for both ISAs and several thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/kernel_test_util.h"

namespace consensor::kernels {
namespace {

using namespace test_util;

struct Conv {
  int64_t N, C, H, W, F, KH, KW;
  int64_t sh = 1, sw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t dh = 1, dw = 1;
  int64_t group = 1;
  bool bias = false;

  int64_t OH() const { return FloorDiv(H + pt + pb - dh * (KH - 1) - 1, sh) + 1; }
  int64_t OW() const { return FloorDiv(W + pl + pr - dw * (KW - 1) - 1, sw) + 1; }
  static int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
  std::string ToString() const {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] s(%lld,%lld) p(%lld,%lld,%lld,%lld) d(%lld,%lld) "
                  "g%lld bias=%d",
                  (long long)N, (long long)C, (long long)H, (long long)W, (long long)F, (long long)(C / group),
                  (long long)KH, (long long)KW, (long long)sh, (long long)sw, (long long)pt, (long long)pl,
                  (long long)pb, (long long)pr, (long long)dh, (long long)dw, (long long)group, int(bias));
    return buf;
  }
};

// The spec, literally.
std::vector<float> Reference(const Conv& p, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b) {
  const int64_t OH = p.OH(), OW = p.OW(), Cg = p.C / p.group, Fg = p.F / p.group;
  std::vector<float> y(p.N * p.F * OH * OW);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t f = 0; f < p.F; ++f)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t g = f / Fg;
          float acc = +0.0f;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < p.KH; ++kh)
              for (int64_t kw = 0; kw < p.KW; ++kw) {
                const int64_t ih = oh * p.sh - p.pt + kh * p.dh, iw = ow * p.sw - p.pl + kw * p.dw;
                const float xv = (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W)
                                     ? x[((n * p.C + g * Cg + c) * p.H + ih) * p.W + iw]
                                     : +0.0f;
                acc = std::fma(xv, w[((f * Cg + c) * p.KH + kh) * p.KW + kw], acc);
              }
          if (p.bias) acc = acc + b[f];
          if (std::isnan(acc)) acc = FromBits(0x7FC00000u);
          y[((n * p.F + f) * OH + oh) * OW + ow] = acc;
        }
  return y;
}

// prepare: the weights go through Backend::PrepareConstant first (packed once, as a loaded
// program does) and the call carries them.
Status RunConv(Backend& be, const Conv& p, std::vector<float>& x, std::vector<float>& w, std::vector<float>& b,
               std::vector<float>* y, OpParams* override_params = nullptr, std::vector<int64_t> yshape = {},
               bool prepare = false) {
  OpParams params;
  params.strides = {p.sh, p.sw};
  params.pads = {p.pt, p.pl, p.pb, p.pr};
  params.dilations = {p.dh, p.dw};
  params.kernel = {p.KH, p.KW};
  params.group = p.group;
  if (override_params) params = *override_params;
  if (yshape.empty()) yshape = {p.N, p.F, p.OH(), p.OW()};
  std::vector<TensorView> in = {MakeView(DType::kF32, {p.N, p.C, p.H, p.W}, x.data()),
                                MakeView(DType::kF32, {p.F, p.C / p.group, p.KH, p.KW}, w.data())};
  if (p.bias) in.push_back(MakeView(DType::kF32, {p.F}, b.data()));
  TensorView out = MakeView(DType::kF32, yshape, y->data());
  if (!prepare) return RunKernel(be, Op::kConv2D, params, in, out);
  KernelCall call = MakeCall(Op::kConv2D, params, in.data(), static_cast<int>(in.size()), &out);
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedOperand> prepared, be.PrepareConstant(call, 1));
  call.prepared = prepared.get();
  return be.Run(call);
}

std::vector<float> Random(int64_t n, std::mt19937& rng, bool special) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  static const uint32_t kSpecial[] = {0x7FC00000u, 0xFFC00001u, 0x7F800000u, 0xFF800000u, 0x80000000u,
                                      0x00000000u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu};
  std::vector<float> v(n);
  for (auto& x : v) {
    const uint32_t r = rng() % 64;
    if (special && r == 0) {
      x = FromBits(kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))]);
    } else if (special && r == 1) {
      x = u(rng) * 1e-39f;
    } else {
      x = u(rng);
    }
  }
  return v;
}

// Inputs and weights of 1e-30 in magnitude: every product underflows to a signed zero, so the
// sum's sign (and a padding term's +0) shows in the bits. Weights are mostly negative, so each
// filter has both signs.
// With a bias of -0 per filter, checked bit for bit against the reference on every engine;
// `infinite_first_weight`: the first weight +inf, so its padding terms make NaN.
void CheckTinyValuesWithBias(const Conv& c, uint32_t seed, bool infinite_first_weight = false) {
  SCOPED_TRACE(c.ToString());
  std::vector<float> x(c.N * c.C * c.H * c.W), w(c.F * (c.C / c.group) * c.KH * c.KW), b(c.F, -0.0f);
  std::mt19937 rng(seed);
  for (auto& v : x) v = (rng() % 2 ? 1e-30f : -1e-30f);
  for (auto& v : w) v = (rng() % 3 ? -1e-30f : 1e-30f);
  if (infinite_first_weight) w[0] = std::numeric_limits<float>::infinity();
  Conv with_bias = c;
  with_bias.bias = true;
  const auto ref = Reference(with_bias, x, w, b);
  for (auto& e : Engines()) {
    std::vector<float> y(ref.size());
    ASSERT_TRUE(RunConv(*e.backend, with_bias, x, w, b, &y).ok()) << e.label;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(Bits(y[i]), Bits(ref[i])) << e.label << " element " << i;
  }
}

void Check(const Conv& p, uint32_t seed, bool special = false, bool prepare = false) {
  SCOPED_TRACE(p.ToString());
  std::mt19937 rng(seed);
  auto x = Random(p.N * p.C * p.H * p.W, rng, special);
  auto w = Random(p.F * (p.C / p.group) * p.KH * p.KW, rng, special);
  auto b = Random(p.F, rng, special);
  const auto ref = Reference(p, x, w, b);
  for (auto& e : Engines()) {
    std::vector<float> y(ref.size(), FromBits(0x7F81234Fu));
    Status s = RunConv(*e.backend, p, x, w, b, &y, nullptr, {}, prepare);
    ASSERT_TRUE(s.ok()) << e.label << ": " << s.ToString();
    if (!y.empty() && std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) != 0) {
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(Bits(y[i]), Bits(ref[i])) << e.label << " element " << i;
    }
  }
}

const std::vector<Conv>& Cases() {
  static const std::vector<Conv> cases = [] {
    std::vector<Conv> v;
    auto add = [&](Conv c) { v.push_back(c); };
    // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
    add({2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});    // 3x3 same
    add({1, 4, 9, 7, 6, 3, 2, 2, 3, 0, 2, 1, 0, 1, 1, 2, false});   // strides, asymmetric pads, groups
    add({1, 2, 10, 11, 3, 3, 3, 1, 2, 2, 1, 0, 3, 2, 3, 1, true});  // dilations
    add({2, 6, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, true});    // depthwise
    add({1, 4, 6, 5, 8, 3, 3, 2, 1, 1, 0, 1, 2, 1, 1, 4, false});   // depthwise, multiplier 2
    add({2, 5, 6, 7, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true});    // 1x1 (direct GEMM)
    add({2, 6, 5, 4, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3, false});   // grouped 1x1
    add({1, 5, 9, 9, 7, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, true});    // strided 1x1
    add({1, 3, 5, 5, 2, 1, 1, 1, 1, 1, 0, 0, 2, 1, 1, 1, true});    // padded 1x1
    add({1, 2, 4, 4, 3, 3, 3, 1, 1, 4, 4, 4, 4, 1, 1, 1, true});    // windows fully in padding
    add({1, 2, 3, 2, 3, 5, 4, 1, 1, 2, 2, 2, 2, 1, 1, 1, false});   // kernel larger than input
    add({1, 32, 6, 6, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});  // Kc = 288 > one k-block
    // im2col written 256 rows (terms) at a time with AVX2, chains carried through C: Kc = 540
    // (blocks of 256, 256, 28) over 24 filters, 2 groups of Kc = 360, and strided Kc = 270.
    add({1, 60, 9, 37, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});
    add({1, 80, 6, 7, 10, 3, 3, 1, 1, 1, 0, 1, 2, 1, 1, 2, false});
    add({2, 30, 11, 12, 13, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1, true});
    add({3, 8, 13, 17, 16, 3, 5, 2, 1, 2, 0, 1, 2, 1, 2, 2, false});  // odd everything
    add({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false});     // 1x1x1x1
    // 1x1 with a bias: added to each GEMM part as it completes (row blocks of at most 144;
    // column blocks at 2 and 8 threads), grouped and batched.
    add({2, 6, 20, 29, 150, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true});
    add({1, 8, 17, 17, 300, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, true});
    add({1, 3, 20, 20, 14, 4, 4, 3, 3, 0, 1, 2, 0, 1, 1, 1, true});    // stride > 1, M edge tiles
    add({2, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16, true});  // depthwise 16
    // The direct grouped kernel (at most 8 channels per group): column tiles of 128, strides,
    // dilations, asymmetric and oversized padding, multipliers; 9 channels per group go back to
    // im2col.
    add({1, 3, 7, 300, 3, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 3, true});   // depthwise 5x5 s2, 2 tiles
    add({2, 4, 9, 131, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, false});  // depthwise, 131 columns
    add({1, 5, 11, 10, 10, 3, 2, 1, 3, 0, 3, 2, 1, 2, 3, 5, true});  // dilated, strided, multiplier 2
    add({1, 3, 4, 5, 6, 5, 5, 1, 1, 6, 7, 6, 7, 1, 1, 3, true});     // windows fully in padding
    add({1, 16, 6, 7, 4, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 2, true});    // 8 channels per group, direct
    add({1, 18, 6, 7, 4, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 2, false});   // 9 channels per group, im2col
    add({1, 4, 1, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, true});     // 1x1 image, 3x3 depthwise
    // The AVX2 kernel's register blocks of 8 to 64 interior columns (stride 1 in width),
    // next to the scalar edges: rows entirely in padding, dilations, 8 channels per group.
    add({1, 6, 7, 150, 6, 5, 5, 2, 1, 2, 2, 2, 2, 1, 1, 6, true});  // depthwise 5x5 s(2,1)
    add({1, 16, 5, 77, 8, 3, 3, 1, 1, 1, 2, 1, 0, 2, 2, 2, true});  // 8 per group, dilated
    add({2, 4, 4, 45, 8, 3, 3, 1, 1, 3, 1, 3, 1, 1, 1, 4, false});  // multiplier 2, padded rows
    // Masked edge vectors run in pairs: one alone (right edge only), and three (wide padding).
    add({1, 2, 3, 21, 2, 1, 3, 1, 1, 0, 0, 0, 2, 1, 1, 2, true});
    add({1, 3, 4, 12, 3, 3, 3, 1, 1, 1, 9, 1, 1, 1, 1, 3, false});
    add({1, 3, 3, 110, 3, 1, 7, 1, 1, 0, 0, 0, 0, 1, 3, 3, true});  // 1x7 dilated, no padding
    // Stride 1 with OW == W: im2col copies each COL row as one shifted plane, then zeroes the
    // padding positions (the openWakeWord embedding model's 1x3 "same" and 3x1 convolutions).
    add({1, 6, 9, 8, 7, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true});   // 1x3, pads (0, 1)
    add({1, 6, 9, 4, 8, 3, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false});  // 3x1, no padding
    add({1, 3, 7, 5, 4, 3, 3, 1, 1, 2, 2, 0, 2, 2, 2, 1, true});   // dilated 3x3, rows and columns padded
    add({1, 2, 5, 6, 3, 2, 4, 1, 1, 1, 3, 2, 0, 3, 1, 1, true});   // asymmetric pads, windows off the plane
    add({1, 2, 3, 2, 3, 5, 1, 1, 1, 4, 0, 4, 0, 1, 1, 1, false});  // rows entirely in padding
    // Dense convolutions with 12 or more filters: full 12 x 16 GEMM tiles (the AVX-512
    // micro-kernel where the CPU has one; B read in place up to 24 filters, packed above) next
    // to 6-row, few-row and column edge tiles.
    add({1, 7, 11, 13, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});   // 3x3 same, prime plane
    add({2, 5, 9, 10, 37, 3, 3, 2, 2, 1, 0, 1, 1, 1, 1, 1, false});   // stride 2, asymmetric pads
    add({1, 40, 7, 9, 29, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, true});    // dilated, Kc = 360: 2 k-blocks
    add({1, 18, 8, 8, 52, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true});    // 9 channels per group, Fg = 26
    add({1, 3, 17, 19, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});   // 64 filters: 5 full tiles + 4 rows
    add({1, 13, 5, 3, 157, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false});  // 1x1, 157 rows: row blocks of 144
    add({1, 9, 13, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true});   // 24 filters, B in place
    add({2, 30, 7, 19, 13, 3, 3, 1, 1, 0, 1, 2, 1, 1, 1, 1, false});  // 13 filters, Kc = 270
    // One filter per group runs the direct kernel whatever the channel count (the GEMM would
    // have one row): the PP-OCRv4 detector's last ConvTranspose, a 3x3 head, 10 channels per group.
    add({1, 24, 9, 37, 1, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, true});   // 2x2 over a stuffed input
    add({2, 40, 6, 70, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false});  // 3x3, 1 filter, Kc = 360
    add({1, 20, 5, 19, 2, 3, 3, 2, 1, 1, 2, 0, 1, 1, 2, 2, true});   // 10 channels per group, Fg = 1
    // Dense convolutions with at most 32 filters and 32 terms per chain run eight filters per
    // pass on AVX-512F CPUs (conv_avx512.cc): the PP-OCR classifier's and openWakeWord
    // embedding's first convolutions, a filter-group tail, 32-column blocks with tails, stride 2
    // in width over odd widths, dilations, padding wider than the kernel.
    add({1, 3, 48, 192, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true});  // classifier's first conv
    add({1, 1, 76, 32, 24, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, true});  // embedding's first conv
    add({2, 3, 9, 67, 17, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 1, false});  // 17 filters, odd width, stride 2
    add({1, 2, 7, 33, 9, 2, 3, 2, 1, 0, 2, 1, 3, 2, 2, 1, true});    // dilated, 33 columns
    add({1, 4, 5, 20, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true});   // 1x1, 32 filters
    add({1, 1, 3, 40, 3, 3, 5, 1, 2, 4, 6, 4, 6, 1, 1, 1, false});   // padding wider than the kernel
    return v;
  }();
  return cases;
}

TEST(Conv2D, MatchesSpecBits) {
  uint32_t seed = 1;
  for (const Conv& c : Cases()) Check(c, seed++);
}

TEST(Conv2D, WeightsPackedOnceMatchSpecBits) {
  // The AVX2 engines run the GEMM on weights packed by PrepareConstant (the portable ones and
  // the direct kernel get none): every case, then special values, then column tiles.
  uint32_t seed = 100;
  for (const Conv& c : Cases()) Check(c, seed++, false, true);
  for (const Conv& c : Cases()) Check(c, seed++, true, true);
  cpu::SetConvScratchBudgetForTesting(4096);
  Check({1, 4, 9, 7, 5, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true}, seed++, false, true);
  Check({2, 4, 11, 13, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1, 2, false}, seed++, false, true);
  cpu::SetConvScratchBudgetForTesting(0);
}

TEST(Conv2D, PreparedWeightsOnlyOnTheAvx2GemmPath) {
  std::vector<float> w(6 * 4 * 3 * 3, 1.0f), x(4 * 5 * 5, 1.0f), y(6 * 3 * 3);
  for (auto& e : Engines()) {
    for (int64_t group : {1, 2}) {  // group 2: 2 channels per group, the direct kernel
      OpParams params;
      params.strides = {1, 1};
      params.pads = {0, 0, 0, 0};
      params.dilations = {1, 1};
      params.kernel = {3, 3};
      params.group = group;
      std::vector<TensorView> in = {MakeView(DType::kF32, {1, 4, 5, 5}, x.data()),
                                    MakeView(DType::kF32, {6, 4 / group, 3, 3}, w.data())};
      TensorView out = MakeView(DType::kF32, {1, 6, 3, 3}, y.data());
      KernelCall call = MakeCall(Op::kConv2D, params, in.data(), 2, &out);
      auto prepared = e.backend->PrepareConstant(call, 1);
      ASSERT_TRUE(prepared.ok()) << e.label;
      const bool expect = group == 1 && e.backend->name() == "cpu-avx2";
      EXPECT_EQ(*prepared != nullptr, expect) << e.label << " group " << group;
      if (*prepared) {
        EXPECT_EQ((*prepared)->bytes(), int64_t{sizeof(float)} * 6 * 36) << e.label;
      }
      auto other = e.backend->PrepareConstant(call, 0);  // the input is not a weight
      ASSERT_TRUE(other.ok());
      EXPECT_EQ(*other, nullptr);
    }
  }
}

TEST(Conv2D, WithoutTheAvx512KernelTheBitsAreTheSame) {
  // The AVX2 engines on the 256-bit micro-kernel only (the cases above ran on the 512-bit one
  // where the CPU has AVX-512F): both give the spec's bits, with and without packed weights.
  cpu::gemm::SetGemmAvx512ForTesting(false);
  uint32_t seed = 500;
  for (const Conv& c : Cases()) Check(c, seed++, true, true);
  Check({1, 7, 11, 13, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, seed++);
  cpu::gemm::SetGemmAvx512ForTesting(true);
}

TEST(Conv2D, WithoutTheAvx512DirectKernelTheBitsAreTheSame) {
  // The AVX2 engines' direct grouped/depthwise rows on 256-bit registers (the cases above ran
  // the 512-bit rows where the CPU has AVX-512F).
  cpu::SetConvAvx512ForTesting(false);
  uint32_t seed = 700;
  for (const Conv& c : Cases()) Check(c, seed++, true);
  cpu::SetConvAvx512ForTesting(true);
}

TEST(Conv2D, ShiftedPlaneKernelMatchesSpecBits) {
  // Both strides 1 and OW == W on an AVX-512F CPU: the 12-filter x 32-position register tile
  // reads each term from x at a flat shift, padding lanes masked to +0.0 (conv_avx512.cc). The
  // openWakeWord embedding model's 1x3 "same" and 3x1 layers; filter counts around the 12-row
  // tile (1, 5, 6, 7, 12, 13, 25), position counts around 16-lane vectors and 128-position bands
  // (1, 2, 15, 16, 17, 33, 128, 129); planes narrower than a vector, rows entirely in padding,
  // dilations, 3x3 and 5x5 "same", a padded 1x1, groups of 9 and more channels, batches; special
  // values, tiny products that round to -0, with and without weights packed at load.
  uint32_t seed = 900;
  // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
  const std::vector<Conv> cases = {
      {1, 24, 74, 32, 24, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true},  // embedding 1x3
      {1, 24, 74, 32, 24, 3, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true},  // embedding 3x1
      {1, 96, 3, 1, 96, 3, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false},   // its last conv: one position
      {1, 48, 10, 2, 13, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true},   // W = 2, 13 filters
      {2, 9, 5, 3, 25, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},    // 3x3 same, 15 positions
      {1, 7, 4, 4, 7, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true},      // 16 positions
      {1, 5, 17, 1, 6, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, true},     // 17 positions, 1 column
      {1, 4, 11, 3, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true},     // 33 positions, 1x1 "plain" (GEMM)
      {1, 3, 2, 64, 12, 1, 5, 1, 1, 0, 2, 0, 2, 1, 1, 1, true},    // a band of 128
      {1, 3, 3, 43, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},    // 129 positions, 1 filter (direct)
      {1, 6, 9, 37, 14, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1, true},    // 5x5 same, 333 positions
      {1, 4, 8, 11, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, true},     // dilated 3x3 same
      {1, 3, 6, 9, 8, 5, 3, 1, 1, 4, 1, 4, 1, 2, 1, 1, false},     // rows entirely in padding
      {1, 3, 9, 6, 7, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, true},      // padded 1x1
      {2, 18, 7, 8, 26, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, 2, true},    // 2 groups of 9 channels
      {3, 20, 6, 5, 30, 1, 3, 1, 1, 0, 2, 0, 0, 1, 1, 1, true},    // asymmetric width pads, batch 3
  };
  for (const Conv& c : cases) {
    for (bool special : {false, true}) {
      for (bool prepare : {false, true}) Check(c, seed++, special, prepare);
    }
  }
  // Products that underflow to -0 and padding terms that turn it into +0 (fma(+0, w > 0, -0)):
  // x and w tiny with opposite signs, one positive weight per filter for the padding lanes.
  for (const Conv& c : {cases[0], cases[1], cases[4], cases[12]}) CheckTinyValuesWithBias(c, seed++);
}

TEST(Conv2D, FewPositionsKernelMatchesSpecBits) {
  // At most 8 output positions per image, one group, on an AVX-512F CPU: 16 filters per vector,
  // each term broadcast from the image's im2col (conv_avx512.cc). The openWakeWord mel
  // spectrogram's STFT (1x512 filters, stride 192, 5 positions) and the embedding model's last
  // conv (one position); every position count 1 to 8 with filter counts around 16-lane vectors
  // and blocks (1, 15, 16, 17, 49, 65, 97, 130), padding, dilation, strides, batches; special
  // values, with and without weights packed at load; 9 positions go back to the other paths.
  uint32_t seed = 1000;
  // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
  std::vector<Conv> cases = {
      {1, 1, 1, 1280, 257, 1, 512, 1, 192, 0, 0, 0, 0, 1, 1, 1, false},  // mel STFT
      {1, 96, 3, 1, 96, 3, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true},          // embedding's last conv
      {2, 3, 5, 5, 17, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, true},           // 4 positions, batch 2
      {1, 4, 6, 9, 130, 3, 3, 3, 4, 1, 1, 1, 0, 1, 1, 1, true},          // 6 positions, padding
      {1, 2, 7, 7, 1, 3, 3, 2, 3, 0, 1, 0, 1, 2, 2, 1, false},           // 1 filter (direct kernel)
      {1, 5, 1, 20, 33, 1, 4, 1, 3, 0, 2, 0, 2, 1, 2, 1, true},          // 7 positions, dilated
      {1, 3, 2, 2, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},           // 4 positions, all padded windows
      {1, 2, 1, 40, 16, 1, 5, 1, 5, 0, 0, 0, 0, 1, 1, 1, false},         // 8 positions
      {1, 2, 1, 45, 16, 1, 5, 1, 5, 0, 0, 0, 0, 1, 1, 1, false},         // 9 positions: other paths
  };
  for (int64_t positions = 1; positions <= 8; ++positions) {
    for (int64_t F : {15, 16, 49, 65, 97})
      cases.push_back({1, 3, 1, positions, F, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true});
  }
  for (const Conv& c : cases) {
    for (bool special : {false, true}) {
      for (bool prepare : {false, true}) Check(c, seed++, special, prepare);
    }
  }
}

TEST(Conv2D, FewPositionsPaddingTermsArePlusZero) {
  // Im2col position by position (at most 8 positions a COL row, conv.cc) must write +0.0 for
  // a padding term, as the spec reads it. x [1, 2, 1, 3], 20 filters of 2 x 1 x 2, stride 2,
  // one column of right padding: 2 output positions (the few-positions kernel on AVX-512F, a
  // 2-column GEMM tile otherwise). Output column 1 of every filter: channel 0's taps read x =
  // -1e-30 with w = 1e-30 (acc = -0, the product underflows) and then the padding with w = 0.5
  // (fma(+0, 0.5, -0) = +0), then channel 1 the same. A -0 written for the padding keeps -0.
  Conv d{1, 2, 1, 3, 20, 1, 2, 1, 2, 0, 0, 0, 1, 1, 1, 1, false};
  std::vector<float> x = {1.0f, 1.0f, -1e-30f, 1.0f, 1.0f, -1e-30f}, w, b;
  for (int64_t f = 0; f < d.F; ++f) w.insert(w.end(), {1e-30f, 0.5f, 1e-30f, 0.5f});
  const auto ref = Reference(d, x, w, b);
  ASSERT_EQ(ref.size(), 40u);
  for (int64_t f = 0; f < d.F; ++f) EXPECT_EQ(Bits(ref[static_cast<size_t>(f * 2 + 1)]), 0x00000000u);
  for (auto& e : Engines()) {
    for (bool prepare : {false, true}) {
      std::vector<float> y(ref.size(), FromBits(0x7F81234Fu));
      ASSERT_TRUE(RunConv(*e.backend, d, x, w, b, &y, nullptr, {}, prepare).ok());
      EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), sizeof(float) * y.size())) << e.label << " prepare " << prepare;
    }
  }
}

TEST(Conv2D, DepthwisePaddingRowsMatchSpecBits) {
  // Kernel rows entirely in the top/bottom padding (the 512-bit direct rows take each such row's
  // KW terms as one add of +0, or none when every weight is negative): small planes under 5x5
  // and 7x3 kernels, widths around 16-lane vectors and 128-column blocks, with special values.
  uint32_t seed = 800;
  for (int64_t H : {1, 2, 3}) {
    for (int64_t W : {1, 15, 16, 17, 96, 129, 250}) {
      Check({1, 5, H, W, 5, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 5, true}, seed++, true);
      Check({2, 6, H, W, 6, 7, 3, H > 1 ? 2 : 1, 1, 3, 1, 4, 3, 1, 2, 3, false}, seed++, true);
    }
  }
}

TEST(Conv2D, DepthwiseStrideTwoRowsMatchSpecBits) {
  // Stride 2 in width on the 512-bit direct rows (each tap's 16 inputs the even lanes of two
  // masked loads): the PP-OCRv4 detector's stride-2 depthwise layers (3x3 and 5x5, 80, 40, 20
  // and 10 output columns), widths around 16- and 32-column vectors (odd and even), interior
  // vectors read unmasked (OW >= 48), several output rows at a time (dilation 1 in height) and one
  // at a time (dilation 2), stride 1 or 2 in height, asymmetric and oversized padding, dilation
  // in width, multipliers, 2 column blocks (OW > 128), rows entirely in padding; special values.
  uint32_t seed = 1100;
  // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
  std::vector<Conv> cases = {
      {1, 4, 11, 160, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, true},  // detector: 80 columns
      {1, 3, 9, 80, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, false},   // 40 columns
      {1, 5, 20, 20, 5, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 5, true},   // 5x5, 10 columns
      {2, 6, 7, 33, 6, 3, 3, 1, 2, 1, 0, 1, 2, 1, 1, 6, true},    // s(1, 2), asymmetric pads
      {1, 4, 8, 70, 8, 3, 3, 2, 2, 2, 2, 2, 2, 1, 2, 4, true},    // dilated width, multiplier 2
      {1, 2, 9, 64, 2, 3, 3, 2, 2, 2, 1, 2, 1, 2, 1, 2, false},   // dilated height: one row at a time
      {1, 3, 5, 290, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, true},   // 145 columns: two blocks
      {1, 3, 3, 12, 3, 5, 3, 2, 2, 4, 5, 4, 5, 1, 1, 3, false},   // padding wider than the kernel
      {1, 16, 6, 37, 4, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 2, true},   // 8 channels per group
      {1, 2, 4, 1, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true},     // one column
  };
  for (int64_t W : {2, 30, 31, 32, 33, 34, 63, 64, 65, 97, 191, 192, 193}) {
    cases.push_back({1, 3, 6, W, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, true});
  }
  for (bool avx512 : {true, false}) {
    cpu::SetConvAvx512ForTesting(avx512);
    for (const Conv& c : cases) {
      for (bool special : {false, true}) Check(c, seed++, special);
    }
  }
  cpu::SetConvAvx512ForTesting(true);
}

TEST(Conv2D, DepthwiseStrideTwoInteriorRowsMatchSpecBits) {
  // 3x3 stride-2 grouped and depthwise convolutions tall enough that 4-row blocks lie wholly inside
  // the plane, which take RowsBlockInterior (unrolled, conv_avx512.cc) on an AVX-512F CPU: the
  // detector's 80 columns (5 vectors), 1 to 6 vectors with and without a partial last one, no
  // padding and asymmetric padding, multipliers, 2 channels per group, dilation in width, a batch;
  // special values; and the same cases on RowsBlock (SetConvInteriorRowsForTesting(false)).
  uint32_t seed = 1150;
  // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
  const std::vector<Conv> cases = {
      {1, 4, 40, 160, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, true},  // detector: 80 columns, 20 rows
      {1, 3, 33, 70, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, false},  // 35 columns: 3 vectors, a tail
      {2, 2, 24, 33, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true},   // 17 columns, batch 2
      {1, 3, 17, 40, 3, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 3, true},   // no padding: interior from row 0
      {1, 2, 30, 192, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true},  // 96 columns: 6 vectors
      {1, 2, 21, 32, 2, 3, 3, 2, 2, 2, 0, 1, 2, 1, 1, 2, false},  // asymmetric padding
      {1, 3, 26, 50, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, true},   // multiplier 2
      {1, 8, 20, 36, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, true},   // 2 channels per group
      {1, 2, 22, 64, 2, 3, 3, 2, 2, 1, 2, 1, 2, 1, 2, 2, true},   // dilation 2 in width
      {1, 2, 18, 16, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, true},   // 8 columns: one partial vector
  };
  for (bool interior : {true, false}) {
    cpu::SetConvInteriorRowsForTesting(interior);
    for (const Conv& c : cases) {
      for (bool special : {false, true}) Check(c, seed++, special);
    }
  }
  cpu::SetConvInteriorRowsForTesting(true);
}

TEST(Conv2D, DirectPlaneKernelMatchesSpecBits) {
  // Grouped and depthwise convolutions with both strides 1 and OW == W on an AVX-512F CPU: the
  // flattened plane, each term a masked load at a flat shift, padding lanes +0.0 (conv_avx512.cc).
  // The PP-OCRv4 detector's depthwise shapes (fewer channels), planes whose size is not a multiple
  // of 16 and planes of more than 4096 outputs (several units), 8 channels per group, one filter
  // per group with many channels, multipliers, dilations, asymmetric padding, batches; special
  // values; and the same cases on the row kernels (SetConvDirectPlaneForTesting(false)).
  uint32_t seed = 1200;
  // N, C, H, W, F, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group, bias
  const std::vector<Conv> cases = {
      {1, 3, 80, 80, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, true},   // 6400 outputs: two units
      {1, 4, 40, 40, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, true},   // detector 40 x 40
      {1, 5, 20, 20, 5, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 5, false},  // detector 5x5 at 20 x 20
      {2, 6, 10, 10, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 6, true},   // 10 x 10: 100 outputs
      {1, 3, 9, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, false},    // multiplier 2, 63 outputs
      {1, 16, 11, 13, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true},  // 8 channels per group
      {1, 40, 9, 21, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},   // one filter, 40 channels
      {1, 4, 12, 17, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 4, true},   // dilated "same"
      {1, 3, 13, 11, 3, 3, 5, 1, 1, 0, 3, 2, 1, 1, 1, 3, false},  // asymmetric pads, OH != H
      {3, 2, 7, 33, 2, 1, 7, 1, 1, 0, 3, 0, 3, 1, 1, 2, true},    // 1x7, batch 3
      {1, 2, 16, 1, 2, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, 2, true},    // one column
  };
  for (bool plane : {true, false}) {
    cpu::SetConvDirectPlaneForTesting(plane);
    for (const Conv& c : cases) {
      for (bool special : {false, true}) Check(c, seed++, special);
    }
    // Products that underflow to -0 and padding terms that turn it into +0 (fma(+0, w > 0, -0)),
    // and padding terms of an infinite weight (NaN).
    for (const Conv& c : {cases[1], cases[3], cases[7]})
      CheckTinyValuesWithBias(c, seed++, /*infinite_first_weight=*/true);
  }
  cpu::SetConvDirectPlaneForTesting(true);
}

TEST(Conv2D, DepthwisePaddingRowsKeepMinusZeroAndPoisonWithInfinity) {
  // x [1, 1, 1, 1], 3x1 kernel, one row of padding above and below: output = fma(+0, w0, fma(x,
  // w1, fma(+0, w2... in order: fma(+0, w0, +0), fma(x, w1, .), fma(+0, w2, .). With x * w1 an
  // underflowing negative product the middle term gives -0; the bottom padding term keeps -0
  // when w2 is negative and makes +0 when w2 is positive; an infinite w0 makes NaN.
  Conv d{1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, false};
  std::vector<float> x = {-1e-30f}, b;
  const std::vector<std::vector<float>> weights = {{0.5f, 1e-30f, -0.5f},
                                                   {0.5f, 1e-30f, 0.5f},
                                                   {-0.5f, 1e-30f, -0.0f},
                                                   {-0.5f, 1e-30f, 0.0f},
                                                   {std::numeric_limits<float>::infinity(), 1.0f, -0.5f}};
  const uint32_t expect[] = {0x80000000u, 0x00000000u, 0x80000000u, 0x00000000u, 0x7FC00000u};
  for (size_t i = 0; i < weights.size(); ++i) {
    std::vector<float> w = weights[i];
    const auto ref = Reference(d, x, w, b);
    ASSERT_EQ(Bits(ref[0]), expect[i]) << i;
    for (auto& e : Engines()) {
      std::vector<float> y(1, FromBits(0x7F81234Fu));
      ASSERT_TRUE(RunConv(*e.backend, d, x, w, b, &y).ok());
      EXPECT_EQ(Bits(y[0]), expect[i]) << e.label << " weights " << i;
    }
  }
}

TEST(Conv2D, DepthwisePaddingRowsOfSeveralOutputRowsKeepTheirOrder) {
  // Output rows computed together (the 512-bit rows for dilation 1 in height): x [1, 1, 2, 1],
  // a 3x1 kernel, one padding row above and below, so output row 1 takes x0, x1, then a padding
  // term. x * w underflows to -0 in both real terms; the bottom padding term then makes +0 when
  // w2 > 0 and keeps -0 when w2 < 0. The whole plane is repeated in 5 channels (OH = 2 each).
  Conv d{1, 5, 2, 1, 5, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, 5, false};
  std::vector<float> x(10, -1e-30f), b;
  for (float w2 : {0.5f, -0.5f}) {
    std::vector<float> w;
    for (int c = 0; c < 5; ++c) w.insert(w.end(), {1e-30f, 1e-30f, w2});
    const auto ref = Reference(d, x, w, b);
    ASSERT_EQ(Bits(ref[1]), w2 > 0 ? 0x00000000u : 0x80000000u);
    for (auto& e : Engines()) {
      std::vector<float> y(ref.size(), FromBits(0x7F81234Fu));
      ASSERT_TRUE(RunConv(*e.backend, d, x, w, b, &y).ok());
      EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), sizeof(float) * y.size())) << e.label << " w2 " << w2;
    }
  }
}

TEST(Conv2D, SpecialValuesMatchSpecBits) {
  uint32_t seed = 100;
  for (const Conv& c : Cases()) Check(c, seed++, /*special=*/true);
}

TEST(Conv2D, BiasOverflowAndCanonicalNaN) {
  // acc + bias overflowing to inf, and inf + -inf = NaN -> canonical.
  Conv p{1, 1, 1, 2, 3, 1, 1};
  p.bias = true;
  std::vector<float> x = {3e38f, -0.0f}, w = {2.0f, 1.0f, -1.0f}, b = {3e38f, -INFINITY, -0.0f};
  w[1] = std::numeric_limits<float>::infinity();
  const auto ref = Reference(p, x, w, b);
  for (auto& e : Engines()) {
    std::vector<float> y(6);
    ASSERT_TRUE(RunConv(*e.backend, p, x, w, b, &y).ok());
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), 24)) << e.label;
    EXPECT_EQ(Bits(y[2]), 0x7FC00000u) << e.label;  // 3e38*inf + -inf = NaN
    EXPECT_EQ(Bits(y[3]), 0x7FC00000u) << e.label;  // -0*inf = NaN
  }
}

TEST(Conv2D, DepthwisePaddingTermsWithInfiniteWeights) {
  // fma(+0, inf, acc) is NaN: a padding term with an infinite weight poisons the output even
  // though the direct kernel skips padding terms of finite weights.
  Conv p{1, 2, 3, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, true};
  std::vector<float> x(18, 1.0f), w(18, 0.5f), b = {0.25f, -0.0f};
  w[0] = std::numeric_limits<float>::infinity();       // top-left tap of channel 0
  w[9 + 4] = -std::numeric_limits<float>::infinity();  // centre tap of channel 1
  const auto ref = Reference(p, x, w, b);
  EXPECT_EQ(Bits(ref[0]), 0x7FC00000u);  // (0,0) reads padding at the top-left tap
  for (auto& e : Engines()) {
    std::vector<float> y(18);
    ASSERT_TRUE(RunConv(*e.backend, p, x, w, b, &y).ok());
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), sizeof(float) * 18)) << e.label;
  }
}

TEST(Conv2D, DepthwisePaddingTermsTurnMinusZeroIntoPlusZero) {
  // Depthwise, x [1, 2, 1, 2], 1x2 kernel, one column of right padding. Output column 1:
  // tap 0 reads x = -1e-30 with w = 1e-30, a product that underflows, so acc = -0; tap 1 is
  // in the padding with w = 0.5: fma(+0, 0.5, -0) = +0. Skipping the padding term keeps -0.
  Conv d{1, 2, 1, 2, 2, 1, 2, 1, 1, 0, 0, 0, 1, 1, 1, 2, false};
  std::vector<float> x = {1.0f, -1e-30f, 1.0f, -1e-30f}, w = {1e-30f, 0.5f, 1e-30f, 0.5f}, b;
  const auto ref = Reference(d, x, w, b);
  ASSERT_EQ(ref.size(), 4u);
  EXPECT_EQ(Bits(ref[1]), 0x00000000u);
  for (auto& e : Engines()) {
    std::vector<float> y(ref.size());
    ASSERT_TRUE(RunConv(*e.backend, d, x, w, b, &y).ok());
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), sizeof(float) * y.size())) << e.label;
  }
}

TEST(Conv2D, ColumnTilingDoesNotChangeBits) {
  // A tiny scratch budget forces many im2col column tiles (and both parallel modes).
  for (int64_t budget : {int64_t{1}, int64_t{4096}, int64_t{40000}}) {
    cpu::SetConvScratchBudgetForTesting(budget);
    Check({1, 3, 17, 19, 5, 3, 3, 1, 2, 1, 0, 2, 1, 1, 1, 1, true}, 7);
    Check({2, 4, 11, 13, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1, 2, false}, 8);
    Check({1, 5, 8, 40, 6, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1, true}, 9);
    Check({1, 4, 9, 7, 5, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, true}, 10);  // OW == W: tiles split rows
    Check({1, 4, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}, 11);
    Check({1, 40, 7, 9, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, 12);  // Kc = 360: k-blocks per tile
  }
  cpu::SetConvScratchBudgetForTesting(0);
}

TEST(Conv2D, EmptyDims) {
  Check({0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, 1);   // N = 0
  Check({1, 3, 5, 5, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}, 2);  // F = 0
  Check({2, 0, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, 3);   // C = 0: outputs are bias
  Check({1, 2, 0, 3, 2, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, true}, 4);   // H = 0, all padding
  Check({1, 2, 2, 2, 2, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, false}, 5);  // OH = OW = 0
  Check({1, 2, 4, 4, 2, 0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true}, 6);   // KH = 0: empty chain
}

TEST(Conv2D, RejectsBadCalls) {
  Conv p{1, 4, 5, 5, 6, 3, 3};
  std::vector<float> x(100), w(6 * 4 * 9), b(6), y(6 * 9);
  auto& be = *Engines().front().backend;
  OpParams params;
  params.strides = {1, 1};
  params.pads = {0, 0, 0};  // wrong length
  params.dilations = {1, 1};
  EXPECT_EQ(RunConv(be, p, x, w, b, &y, &params).code(), StatusCode::kInvalidArgument);
  params.pads = {0, 0, 0, 0};
  params.strides = {0, 1};
  EXPECT_EQ(RunConv(be, p, x, w, b, &y, &params).code(), StatusCode::kInvalidArgument);
  params.strides = {1, 1};
  params.group = 3;  // does not divide C
  EXPECT_EQ(RunConv(be, p, x, w, b, &y, &params).code(), StatusCode::kInvalidArgument);
  params.group = 1;
  EXPECT_TRUE(RunConv(be, p, x, w, b, &y, &params).ok());
  // Output shape that does not match.
  EXPECT_EQ(RunConv(be, p, x, w, b, &y, &params, {1, 6, 4, 3}).code(), StatusCode::kInvalidArgument);
  // Wrong dtype.
  TensorView in[2] = {MakeView(DType::kF32, {1, 4, 5, 5}, x.data()), MakeView(DType::kF32, {6, 4, 3, 3}, w.data())};
  in[0].dtype = DType::kI32;
  TensorView out = MakeView(DType::kF32, {1, 6, 3, 3}, y.data());
  KernelCall call = MakeCall(Op::kConv2D, params, in, 2, &out);
  EXPECT_EQ(be.Run(call).code(), StatusCode::kInvalidArgument);
  in[0].dtype = DType::kF32;
  in[0].rank = 3;
  EXPECT_EQ(be.Run(call).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace consensor::kernels
