// Conv2D (NCHW) on CUDA, docs/DETERMINISM.md 4.4, as an implicit GEMM.
//
// For image n and group g:  Y[f, p] = chain over k of fma(W[g*Fg + f, k], X(k, p), acc)
// with k = (c, kh, kw) in exactly that nesting order (row-major of W's trailing dims) and
// X(k, p) the input value at the dilated, strided position of output p, or +0.0 when it
// falls in the padding (padding terms take part in the chain, so 0 * inf = NaN arises as
// on the CPU). No im2col buffer: each thread computes the input coordinates of its B-tile
// elements on the fly. The GEMM itself is the register-tiled main loop of
// gemm_device.cuh (128 x 128 tiles of (f, p), K-tiles of 8, 8 x 8 per thread); (n, g)
// pairs go to gridDim.z. The bias is one add after the chain, then NaN is canonicalized.
#include <cstdint>

#include "kernels/checks/conv.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm_device.cuh"
#include "kernels/cuda/simt.h"
#include "kernels/detmath.h"

namespace consensor::kernels::CNSR_CUDA_NS {

namespace {

using gemm_dev::kBM;
using gemm_dev::kBN;
using gemm_dev::kThreads;

constexpr int64_t kMaxGridYZ = 65535;

// The implicit-GEMM loader needs more registers than matmul's; forcing two blocks per SM
// (128 registers) makes ptxas spill in the main loop, so this kernel asks for one.
#if defined(__CUDACC__)
#define CNSR_CONV_LAUNCH_BOUNDS __launch_bounds__(256, 1)
#else
#define CNSR_CONV_LAUNCH_BOUNDS
#endif

// B operand of the implicit GEMM: B[k, p] = xpad(c, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw).
// Spatial coordinates are 32-bit (RunConv checks that they fit) so that the per-thread
// state stays small enough for the 128-register budget of the main loop.
constexpr int32_t kOutside = -(1 << 30) - 1;  // ih0 of a column past P: every ih < 0

// 32-bit copies of the geometry the B loader needs, read straight from the kernel
// parameters inside the loop (no registers held for them).
struct ConvArgs32 {
  int32_t Kc, KHW, KW, H, W, dh, dw;
};

struct ConvLoaderF32 {
  gemm_dev::RowMajorA a;
  const ConvArgs32& s;
  const float* x = nullptr;          // image n, first channel of group g
  int32_t ih0[4] = {}, iw0[4] = {};  // top-left input coordinate of this thread's 4 columns
  int b_k = 0;

  CNSR_DEVICE void LoadA(int64_t k0, float* r) const { a.Load(k0, r); }
  CNSR_DEVICE void LoadB(int64_t k0, float* r) const {
    const int32_t k = static_cast<int32_t>(k0) + b_k;
    if (k >= s.Kc) {
      r[0] = r[1] = r[2] = r[3] = 0.0f;
      return;
    }
    const int32_t c = k / s.KHW, rem = k - c * s.KHW;
    const int32_t kh = rem / s.KW, kw = rem - kh * s.KW;
    const float* xc = x + static_cast<int64_t>(c) * s.H * s.W;
    const int32_t dy = kh * s.dh, dx = kw * s.dw;
    CNSR_GEMM_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int32_t ih = ih0[j] + dy, iw = iw0[j] + dx;
      r[j] = (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) ? xc[static_cast<int64_t>(ih) * s.W + iw] : 0.0f;
    }
  }
};

CNSR_GLOBAL CNSR_CONV_LAUNCH_BOUNDS void ConvF32Kernel(const float* X, const float* Wt, const float* bias, float* Y,
                                                       ConvGeom g, ConvArgs32 s32, bool vec_a) {
  CNSR_SHARED(gemm_dev::Vec4, as_vec, gemm_dev::kSharedAVec4);
  CNSR_SHARED(gemm_dev::Vec4, bs_vec, gemm_dev::kSharedBVec4);
  float* As = reinterpret_cast<float*>(as_vec);
  float* Bs = reinterpret_cast<float*>(bs_vec);
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int64_t m_tiles = (g.Fg + kBM - 1) / kBM;
  const int64_t p0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t jobs = g.N * g.G;
  for (int64_t z = blockIdx.z; z < jobs; z += gridDim.z) {
    const int64_t n = z / g.G, gi = z % g.G;
    for (int64_t by = blockIdx.y; by < m_tiles; by += gridDim.y) {
      const int64_t f0 = by * kBM;
      ConvLoaderF32 ld{{}, s32};
      const int64_t a_row = f0 + gemm_dev::ARow(tid);
      ld.a.row = (g.Kc > 0 && a_row < g.Fg) ? Wt + (gi * g.Fg + a_row) * g.Kc : nullptr;
      ld.a.K = g.Kc;
      ld.a.a_k = gemm_dev::AK(tid);
      ld.a.vec = vec_a;
      ld.x = g.Kc > 0 ? X + (n * g.C + gi * g.Cg) * g.H * g.W : X;
      ld.b_k = gemm_dev::BK(tid);
      const int64_t pc = p0 + gemm_dev::BCol(tid);
      CNSR_GEMM_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int64_t p = pc + j;
        const int64_t oh = p / g.OW, ow = p - oh * g.OW;
        ld.ih0[j] = p < g.P ? static_cast<int32_t>(oh * g.sh - g.pt) : kOutside;
        ld.iw0[j] = p < g.P ? static_cast<int32_t>(ow * g.sw - g.pl) : kOutside;
      }

      float acc[8][8];
      gemm_dev::MainLoopF32(ld, g.Kc, As, Bs, acc);

      CNSR_GEMM_UNROLL
      for (int i = 0; i < 8; ++i) {
        const int64_t f = f0 + gemm_dev::MicroRow(ty, i);
        if (f >= g.Fg) continue;
        const int64_t fo = gi * g.Fg + f;
        float* yrow = Y + (n * g.F + fo) * g.P;
        const float bv = bias != nullptr ? bias[fo] : 0.0f;
        // Scalar stores (see matmul.cu): one add of the bias after the chain, then NaN
        // canonicalization.
        CNSR_GEMM_UNROLL
        for (int j = 0; j < 8; ++j) {
          const int col = gemm_dev::MicroCol(tx, j);
          if (p0 + col < g.P) {
            const float s = bias != nullptr ? acc[i][j] + bv : acc[i][j];
            yrow[p0 + col] = detmath::canonicalize_nan(s);
          }
        }
      }
    }
  }
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

Status RunConv(const KernelCall& call, const LaunchContext& ctx) {
  ASSIGN_OR_RETURN(const ConvGeom g, ValidateConv(call));
  if (g.N == 0 || g.F == 0 || g.P == 0) return OkStatus();
  // The kernel's 32-bit coordinates: every ih lies in [-pt, H + pb) and every kh*dh below
  // H + pt + pb (likewise for w), and k < Kc. Larger extents would need a padded input of
  // more than 2^30 rows or columns.
  constexpr int64_t kLimit = int64_t{1} << 30;
  if (g.H + g.pt + g.pb >= kLimit || g.W + g.pl + g.pr >= kLimit || g.Kc >= kLimit || g.dh * (g.KH - 1) >= kLimit ||
      g.dw * (g.KW - 1) >= kLimit) {
    return Unimplemented("conv2d: spatial extent or kernel size too large for the CUDA kernel");
  }
  const float* X = call.in(0).as<const float>();
  const float* Wt = call.in(1).as<const float>();
  const float* bias = call.num_inputs == 3 ? call.in(2).as<const float>() : nullptr;
  float* Y = call.out(0).as<float>();
  const int64_t p_tiles = (g.P + kBN - 1) / kBN;
  const int64_t m_tiles = (g.Fg + kBM - 1) / kBM;
  const int64_t jobs = g.N * g.G;
  if (p_tiles > 0x7FFFFFFF) return InvalidArgument("conv2d: output is too large for the CUDA grid");
  const dim3 grid(static_cast<unsigned>(p_tiles), static_cast<unsigned>(m_tiles < kMaxGridYZ ? m_tiles : kMaxGridYZ),
                  static_cast<unsigned>(jobs < kMaxGridYZ ? jobs : kMaxGridYZ));
  const dim3 block(kThreads);
  const bool vec_a = g.Kc % 4 == 0 && Aligned16(Wt);
  ConvArgs32 s32;
  s32.Kc = static_cast<int32_t>(g.Kc);
  s32.KHW = static_cast<int32_t>(g.KH * g.KW);
  s32.KW = static_cast<int32_t>(g.KW);
  s32.H = static_cast<int32_t>(g.H);
  s32.W = static_cast<int32_t>(g.W);
  s32.dh = static_cast<int32_t>(g.dh);
  s32.dw = static_cast<int32_t>(g.dw);
  CNSR_LAUNCH(ConvF32Kernel, grid, block, 0, (cudaStream_t)ctx.stream, X, Wt, bias, Y, g, s32, vec_a);
  return CheckLaunch("conv2d");
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
