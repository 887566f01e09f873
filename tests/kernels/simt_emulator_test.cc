// Tests of the SIMT emulator (kernels/cuda/simt_emulator.cc): the host emulation of the
// CUDA execution model that runs kernels/cuda/*.cu on machines without a GPU.
#define CNSR_SIMT_EMULATION 1
#include "kernels/cuda/simt.h"
#include "kernels/cuda/tensor_core.cuh"

#include <gtest/gtest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_TEST_ASAN 1
#endif
#endif
#if !defined(SIMT_TEST_ASAN) && defined(__SANITIZE_ADDRESS__)
#define SIMT_TEST_ASAN 1
#endif
#if !defined(SIMT_TEST_ASAN)
#define SIMT_TEST_ASAN 0
#endif

namespace {

namespace emu = ::consensor::simt::emu;

// ---------------------------------------------------------------------------------------
// Kernels, written as they would be in a .cu file.

struct Index {
  unsigned tx, ty, tz, bx, by, bz, bdx, bdy, bdz, gdx, gdy, gdz;
};

CNSR_GLOBAL void RecordIndexKernel(Index* out) {
  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  out[bid * n + tid] = Index{threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z,
                             blockDim.x,  blockDim.y,  blockDim.z,  gridDim.x,  gridDim.y,  gridDim.z};
}

// Tree reduction in shared memory; blockDim.x a power of two <= 1024.
CNSR_GLOBAL void BlockSumKernel(const int* in, int* out) {
  CNSR_SHARED(int, partial, 1024);
  unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

CNSR_DEVICE float WarpSumDown(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(CNSR_FULL_MASK, v, offset);
  return v;
}

CNSR_GLOBAL void WarpSumKernel(const float* in, float* out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = WarpSumDown(in[i]);
  if (threadIdx.x % 32 == 0) out[i / 32] = v;
}

CNSR_GLOBAL void ButterflyKernel(const int64_t* in, int64_t* out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t v = in[i];
  for (int mask = 1; mask < 32; mask *= 2) v += __shfl_xor_sync(CNSR_FULL_MASK, v, mask);
  out[i] = v;  // every lane holds the warp sum
}

// blockDim.x == 40: warp 0 has 32 lanes, warp 1 has 8. Sum over segments of 8 lanes.
CNSR_GLOBAL void PartialWarpKernel(const int* in, int* seg_sum, int* lane_id, int* far_read) {
  unsigned t = threadIdx.x;
  int v = in[t];
  for (int offset = 4; offset > 0; offset /= 2) v += __shfl_down_sync(CNSR_FULL_MASK, v, offset, 8);
  seg_sum[t] = v;
  lane_id[t] = ::consensor::simt::emu::LaneId();
  // Reading a lane past the end of the partial warp gives poison (all ones).
  far_read[t] = __shfl_sync(CNSR_FULL_MASK, static_cast<int>(t), 20);
}

CNSR_GLOBAL void DynamicSharedKernel(const double* in, double* out, unsigned* fresh) {
  CNSR_DYNAMIC_SHARED(double, buf);
  unsigned t = threadIdx.x, n = blockDim.x;
  uint64_t bits;
  std::memcpy(&bits, &buf[t], sizeof(bits));
  fresh[blockIdx.x * n + t] = bits == ~uint64_t{0} ? 1u : 0u;  // 0xFF filled at block start
  __syncthreads();
  buf[t] = in[blockIdx.x * n + t];
  __syncthreads();
  out[blockIdx.x * n + t] = buf[n - 1 - t];  // reversed within the block
}

CNSR_GLOBAL void TwoSharedKernel(int* out, const void** ptrs) {
  CNSR_SHARED(int, a, 64);
  CNSR_SHARED(int, b, 64);
  unsigned t = threadIdx.x;
  a[t] = static_cast<int>(t);
  b[t] = -static_cast<int>(t);
  __syncthreads();
  out[t] = a[63 - t] * 1000 + b[63 - t];
  ptrs[2 * t] = a;
  ptrs[2 * t + 1] = b;
}

CNSR_GLOBAL void DivergentBarrierKernel(int* after) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  after[threadIdx.x] = 1;
}

CNSR_GLOBAL void DivergentShuffleKernel(int* out) {
  if (threadIdx.x == 31) return;
  out[threadIdx.x] = __shfl_down_sync(CNSR_FULL_MASK, static_cast<int>(threadIdx.x), 1);
}

CNSR_GLOBAL void MixedShuffleBarrierKernel(int* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = __shfl_xor_sync(CNSR_FULL_MASK, 1, 1);
  } else {
    __syncthreads();
  }
}

CNSR_GLOBAL void CountKernel(std::atomic<int>* count) { count->fetch_add(1, std::memory_order_relaxed); }

CNSR_GLOBAL void SharedTooBigKernel(int* out) {
  CNSR_SHARED(char, big, 200 * 1024);
  big[threadIdx.x] = 1;
  out[threadIdx.x] = big[threadIdx.x];
}

CNSR_GLOBAL void ThrowingKernel(int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 3) throw std::runtime_error("boom");
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

CNSR_GLOBAL void RoundingKernel(int* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = std::fegetround(); }

CNSR_GLOBAL void EmptyKernel(int* out) {
  if (out != nullptr) out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

CNSR_GLOBAL void OneBarrierKernel(int* out) {
  CNSR_SHARED(int, s, 1024);
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

// A 1024-thread block: barrier, then a warp sum per warp, then a block sum of warp sums.
CNSR_GLOBAL void BigBlockKernel(const int* in, int* out) {
  CNSR_SHARED(int, warp_sums, 32);
  unsigned t = threadIdx.x + blockDim.x * threadIdx.y;  // block (32, 32)
  int v = in[t];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(CNSR_FULL_MASK, v, o);
  if (t % 32 == 0) warp_sums[t / 32] = v;
  __syncthreads();
  if (t < 32) {
    int w = warp_sums[t];
    for (int o = 16; o > 0; o /= 2) w += __shfl_down_sync(CNSR_FULL_MASK, w, o);
    if (t == 0) *out = w;
  }
}

CNSR_GLOBAL void NestedLaunchKernel(std::atomic<int>* count, int* nested_failed) {
  std::string err = CNSR_LAUNCH(CountKernel, dim3(1), dim3(1), 0, nullptr, count);
  if (!err.empty()) nested_failed[threadIdx.x] = 1;
}

// Uses 24 KiB of stack per thread across a barrier: every fiber has its own stack.
CNSR_GLOBAL void BigFrameKernel(int64_t* out) {
  volatile int64_t local[3072];
  for (int i = 0; i < 3072; ++i) local[i] = static_cast<int64_t>(threadIdx.x) * i;
  __syncthreads();
  int64_t sum = 0;
  for (int i = 0; i < 3072; ++i) sum += local[i];
  out[threadIdx.x] = sum;
}

[[gnu::noinline]] int Recurse(int depth) {
  volatile char pad[1024];
  pad[0] = static_cast<char>(depth);
  if (depth == 0) return pad[0];
  return Recurse(depth - 1) + pad[0];
}

CNSR_GLOBAL void StackOverflowKernel(int* out) { out[threadIdx.x] = Recurse(1 << 20); }

CNSR_GLOBAL void BroadcastKernel(const double* in, double* out, int8_t* bytes) {
  unsigned t = threadIdx.x;
  // width 16: each half-warp gets the value of its lane 3.
  out[t] = __shfl_sync(CNSR_FULL_MASK, in[t], 3, 16);
  bytes[t] = __shfl_xor_sync(CNSR_FULL_MASK, static_cast<int8_t>(-static_cast<int>(t)), 31);
}

// Writes the block index into shared memory after checking it is 0xFF-filled.
CNSR_GLOBAL void SharedRefillKernel(int* dirty) {
  CNSR_SHARED(unsigned, s, 128);
  if (s[threadIdx.x] != 0xFFFFFFFFu) dirty[blockIdx.x] = 1;
  __syncthreads();
  s[threadIdx.x] = blockIdx.x;
}

#if SIMT_TEST_ASAN
CNSR_GLOBAL void SharedOverflowKernel(int* out) {
  CNSR_SHARED(int, s, 32);
  s[threadIdx.x] = 1;  // launched with 33 threads: thread 32 writes past the end
  out[0] = s[0];
}
#endif

// ---------------------------------------------------------------------------------------

TEST(SimtEmulator, IndexMathMultiDim) {
  dim3 grid(3, 2, 2), block(4, 3, 2);
  unsigned n = block.x * block.y * block.z, blocks = grid.x * grid.y * grid.z;
  std::vector<Index> out(n * blocks);
  std::string err = CNSR_LAUNCH(RecordIndexKernel, grid, block, 0, nullptr, out.data());
  ASSERT_EQ(err, "");
  EXPECT_EQ(emu::TakeLastError(), "");
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              unsigned bid = bx + grid.x * (by + grid.y * bz), tid = tx + block.x * (ty + block.y * tz);
              const Index& r = out[bid * n + tid];
              EXPECT_EQ(r.tx, tx);
              EXPECT_EQ(r.ty, ty);
              EXPECT_EQ(r.tz, tz);
              EXPECT_EQ(r.bx, bx);
              EXPECT_EQ(r.by, by);
              EXPECT_EQ(r.bz, bz);
              EXPECT_EQ(r.bdx, 4u);
              EXPECT_EQ(r.bdy, 3u);
              EXPECT_EQ(r.bdz, 2u);
              EXPECT_EQ(r.gdx, 3u);
              EXPECT_EQ(r.gdy, 2u);
              EXPECT_EQ(r.gdz, 2u);
            }
  // Outside a launch there is no current thread.
  EXPECT_EQ(emu::Current().block_dim.x, 1u);
  EXPECT_EQ(emu::Current().thread_idx.x, 0u);
}

TEST(SimtEmulator, SharedMemoryBlockReduction) {
  for (unsigned threads : {1u, 2u, 64u, 256u, 1024u}) {
    unsigned blocks = 5;
    std::vector<int> in(threads * blocks), out(blocks, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7 % 13) - 6;
    ASSERT_EQ(CNSR_LAUNCH(BlockSumKernel, dim3(blocks), dim3(threads), 0, nullptr, in.data(), out.data()), "");
    for (unsigned b = 0; b < blocks; ++b) {
      int want = 0;
      for (unsigned t = 0; t < threads; ++t) want += in[b * threads + t];
      EXPECT_EQ(out[b], want) << "threads " << threads << " block " << b;
    }
  }
}

TEST(SimtEmulator, WarpShuffleDownTree) {
  unsigned blocks = 3, threads = 128;
  std::vector<float> in(blocks * threads), out(blocks * threads / 32);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 17) * 0.5f;
  ASSERT_EQ(CNSR_LAUNCH(WarpSumKernel, dim3(blocks), dim3(threads), 0, nullptr, in.data(), out.data()), "");
  for (size_t w = 0; w < out.size(); ++w) {
    // The shfl_down tree order: ((v0+v16)+(v8+v24))... computed the same way on the host.
    float v[32];
    for (int l = 0; l < 32; ++l) v[l] = in[w * 32 + l];
    for (int o = 16; o > 0; o /= 2)
      for (int l = 0; l < 32; ++l) v[l] = v[l] + (l + o < 32 ? v[l + o] : v[l]);
    EXPECT_EQ(out[w], v[0]) << "warp " << w;
    float plain = 0;
    for (int l = 0; l < 32; ++l) plain += in[w * 32 + l];
    EXPECT_EQ(out[w], plain);  // exact here: small integers and halves
  }
}

TEST(SimtEmulator, WarpShuffleXorButterfly) {
  unsigned blocks = 2, threads = 96;
  std::vector<int64_t> in(blocks * threads), out(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(i) * 1000003 - (int64_t{1} << 40);
  ASSERT_EQ(CNSR_LAUNCH(ButterflyKernel, dim3(blocks), dim3(threads), 0, nullptr, in.data(), out.data()), "");
  for (size_t i = 0; i < in.size(); ++i) {
    size_t w = i / 32;
    int64_t want = 0;
    for (int l = 0; l < 32; ++l) want += in[w * 32 + l];
    EXPECT_EQ(out[i], want) << i;
  }
}

TEST(SimtEmulator, PartialWarp) {
  unsigned threads = 40;
  std::vector<int> in(threads), seg(threads), lane(threads), far(threads);
  for (unsigned i = 0; i < threads; ++i) in[i] = static_cast<int>(i * i);
  ASSERT_EQ(CNSR_LAUNCH(PartialWarpKernel, dim3(1), dim3(threads), 0, nullptr, in.data(), seg.data(), lane.data(),
                        far.data()),
            "");
  for (unsigned t = 0; t < threads; ++t) {
    EXPECT_EQ(lane[t], static_cast<int>(t % 32));
    if (t % 8 == 0) {
      int want = 0;
      for (unsigned l = t; l < t + 8; ++l) want += in[l];
      EXPECT_EQ(seg[t], want) << t;
    }
    if (t < 32) {
      EXPECT_EQ(far[t], 20 + static_cast<int>(t / 32) * 32) << t;
    } else {
      EXPECT_EQ(far[t], -1) << t;  // lane 20 of the 8-lane warp does not exist
    }
  }
}

TEST(SimtEmulator, DynamicSharedMemory) {
  unsigned blocks = 4, threads = 100;
  std::vector<double> in(blocks * threads), out(blocks * threads);
  std::vector<unsigned> fresh(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i) + 0.25;
  ASSERT_EQ(CNSR_LAUNCH(DynamicSharedKernel, dim3(blocks), dim3(threads), threads * sizeof(double), nullptr, in.data(),
                        out.data(), fresh.data()),
            "");
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t) {
      EXPECT_EQ(out[b * threads + t], in[b * threads + threads - 1 - t]);
      EXPECT_EQ(fresh[b * threads + t], 1u) << "shared memory not refilled with 0xFF at block " << b;
    }
}

TEST(SimtEmulator, StaticSharedArraysAreDistinct) {
  std::vector<int> out(64);
  std::vector<const void*> ptrs(128);
  ASSERT_EQ(CNSR_LAUNCH(TwoSharedKernel, dim3(1), dim3(64), 0, nullptr, out.data(), ptrs.data()), "");
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], (63 - t) * 1000 - (63 - t));
  for (int t = 0; t < 64; ++t) {
    EXPECT_EQ(ptrs[2 * t], ptrs[0]);  // the same buffer for every thread
    EXPECT_EQ(ptrs[2 * t + 1], ptrs[1]);
  }
  EXPECT_NE(ptrs[0], ptrs[1]);
}

TEST(SimtEmulator, DivergentSyncThreadsIsAnError) {
  std::vector<int> after(64, 0);
  std::string err = CNSR_LAUNCH(DivergentBarrierKernel, dim3(3), dim3(64), 0, nullptr, after.data());
  EXPECT_NE(err.find("divergent __syncthreads"), std::string::npos) << err;
  EXPECT_EQ(emu::TakeLastError(), err);
  EXPECT_EQ(emu::TakeLastError(), "");  // cleared
  for (int v : after) EXPECT_EQ(v, 0);  // the waiting threads were abandoned
  // The emulator is usable again afterwards.
  std::vector<int> in(256, 1), out(1);
  EXPECT_EQ(CNSR_LAUNCH(BlockSumKernel, dim3(1), dim3(256), 0, nullptr, in.data(), out.data()), "");
  EXPECT_EQ(out[0], 256);
}

TEST(SimtEmulator, DivergentShuffleIsAnError) {
  std::vector<int> out(32);
  std::string err = CNSR_LAUNCH(DivergentShuffleKernel, dim3(2), dim3(32), 0, nullptr, out.data());
  EXPECT_NE(err.find("warp shuffle"), std::string::npos) << err;
  EXPECT_EQ(emu::TakeLastError(), err);
  err = CNSR_LAUNCH(MixedShuffleBarrierKernel, dim3(1), dim3(32), 0, nullptr, out.data());
  EXPECT_NE(err.find("warp shuffle"), std::string::npos) << err;
  EXPECT_EQ(emu::TakeLastError(), err);
}

TEST(SimtEmulator, InvalidLaunchConfigurations) {
  std::atomic<int> count{0};
  struct Case {
    dim3 grid, block;
    size_t shared;
  };
  const Case cases[] = {
      {dim3(1), dim3(0), 0},        {dim3(1), dim3(1, 0, 1), 0},     {dim3(0), dim3(32), 0},
      {dim3(1, 1, 0), dim3(32), 0}, {dim3(1), dim3(1025), 0},        {dim3(1), dim3(32, 33), 0},
      {dim3(1), dim3(1, 1, 65), 0}, {dim3(1), dim3(2048, 1, 1), 0},  {dim3(2147483648u), dim3(1), 0},
      {dim3(1, 65536), dim3(1), 0}, {dim3(1, 1, 65536), dim3(1), 0}, {dim3(1), dim3(1), 228 * 1024 + 1},
  };
  for (const Case& c : cases) {
    std::string err = CNSR_LAUNCH(CountKernel, c.grid, c.block, c.shared, nullptr, &count);
    EXPECT_NE(err.find("invalid launch configuration"), std::string::npos) << err;
    EXPECT_EQ(emu::TakeLastError(), err);
  }
  EXPECT_EQ(count.load(), 0);
  // The first error is kept until taken.
  std::string first = CNSR_LAUNCH(CountKernel, dim3(0), dim3(1), 0, nullptr, &count);
  std::string second = CNSR_LAUNCH(CountKernel, dim3(1), dim3(0), 0, nullptr, &count);
  EXPECT_NE(first, second);
  EXPECT_EQ(CNSR_LAUNCH(CountKernel, dim3(2), dim3(3), 0, nullptr, &count), "");
  EXPECT_EQ(emu::TakeLastError(), first);
  EXPECT_EQ(count.load(), 6);
  // Limits themselves are fine.
  EXPECT_EQ(CNSR_LAUNCH(CountKernel, dim3(1, 2, 3), dim3(1024), 228 * 1024, nullptr, &count), "");
  EXPECT_EQ(CNSR_LAUNCH(CountKernel, dim3(1), dim3(1, 1, 64), 0, nullptr, &count), "");
  EXPECT_EQ(count.load(), 6 + 6 * 1024 + 64);
  // Static + dynamic shared memory over the limit.
  std::vector<int> out(32);
  std::string err = CNSR_LAUNCH(SharedTooBigKernel, dim3(1), dim3(32), 40 * 1024, nullptr, out.data());
  EXPECT_NE(err.find("too much shared memory"), std::string::npos) << err;
  EXPECT_EQ(emu::TakeLastError(), err);
  EXPECT_EQ(CNSR_LAUNCH(SharedTooBigKernel, dim3(1), dim3(32), 20 * 1024, nullptr, out.data()), "");
}

TEST(SimtEmulator, ExceptionInKernelIsReported) {
  std::vector<int> out(4 * 8, 0);
  std::string err = CNSR_LAUNCH(ThrowingKernel, dim3(4), dim3(8), 0, nullptr, out.data());
  EXPECT_NE(err.find("boom"), std::string::npos) << err;
  EXPECT_EQ(emu::TakeLastError(), err);
  for (int t = 0; t < 8; ++t) EXPECT_EQ(out[t], 1);       // block 0 ran
  for (int t = 8 * 2; t < 32; ++t) EXPECT_EQ(out[t], 0);  // the launch stopped
}

TEST(SimtEmulator, ThousandTwentyFourThreadBlock) {
  std::vector<int> in(1024);
  for (int i = 0; i < 1024; ++i) in[i] = i * 3 - 1000;
  int out = 0;
  ASSERT_EQ(CNSR_LAUNCH(BigBlockKernel, dim3(1), dim3(32, 32), 0, nullptr, in.data(), &out), "");
  int want = 0;
  for (int v : in) want += v;
  EXPECT_EQ(out, want);
}

TEST(SimtEmulator, KernelsRunInTheCallersFloatEnvironment) {
  std::vector<int> out(64);
  // The first launch creates the fibers; the second reuses them under another rounding mode.
  ASSERT_EQ(CNSR_LAUNCH(RoundingKernel, dim3(2), dim3(32), 0, nullptr, out.data()), "");
  for (int v : out) EXPECT_EQ(v, FE_TONEAREST);
  ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
  std::string err = CNSR_LAUNCH(RoundingKernel, dim3(2), dim3(32), 0, nullptr, out.data());
  std::fesetround(FE_TONEAREST);
  ASSERT_EQ(err, "");
  for (int v : out) EXPECT_EQ(v, FE_UPWARD);
  ASSERT_EQ(CNSR_LAUNCH(RoundingKernel, dim3(2), dim3(32), 0, nullptr, out.data()), "");
  for (int v : out) EXPECT_EQ(v, FE_TONEAREST);
}

TEST(SimtEmulator, NestedLaunchIsAnError) {
  std::atomic<int> count{0};
  std::vector<int> failed(4, 0);
  std::string err = CNSR_LAUNCH(NestedLaunchKernel, dim3(1), dim3(4), 0, nullptr, &count, failed.data());
  EXPECT_NE(err.find("kernel code"), std::string::npos) << err;
  EXPECT_EQ(count.load(), 0);
  for (int f : failed) EXPECT_EQ(f, 1);
  EXPECT_FALSE(emu::TakeLastError().empty());
}

TEST(SimtEmulator, EachThreadHasItsOwnStack) {
  std::vector<int64_t> out(256);
  ASSERT_EQ(CNSR_LAUNCH(BigFrameKernel, dim3(2), dim3(256), 0, nullptr, out.data()), "");
  for (int64_t t = 0; t < 256; ++t) EXPECT_EQ(out[t], t * (3071 * 3072 / 2));
}

TEST(SimtEmulator, ShuffleWidthsAndTypes) {
  std::vector<double> in(64), out(64);
  std::vector<int8_t> bytes(64);
  for (int i = 0; i < 64; ++i) in[i] = i * 1.5 - 7;
  ASSERT_EQ(CNSR_LAUNCH(BroadcastKernel, dim3(1), dim3(64), 0, nullptr, in.data(), out.data(), bytes.data()), "");
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(out[i], in[i / 16 * 16 + 3]) << i;
    int src = (i & ~31) | ((i % 32) ^ 31);
    EXPECT_EQ(bytes[i], static_cast<int8_t>(-src)) << i;
  }
}

TEST(SimtEmulator, SharedMemoryIsRefilledForEveryBlock) {
  std::vector<int> dirty(50, 0);
  ASSERT_EQ(CNSR_LAUNCH(SharedRefillKernel, dim3(50), dim3(128), 0, nullptr, dirty.data()), "");
  for (int d : dirty) EXPECT_EQ(d, 0);
}

TEST(SimtEmulatorDeathTest, StackOverflowCrashesLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<int> out(1);
  EXPECT_DEATH((void)CNSR_LAUNCH(StackOverflowKernel, dim3(1), dim3(1), 0, nullptr, out.data()), "");
}

#if SIMT_TEST_ASAN
TEST(SimtEmulatorDeathTest, AsanSeesSharedMemoryOverflow) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<int> out(1);
  EXPECT_DEATH((void)CNSR_LAUNCH(SharedOverflowKernel, dim3(1), dim3(33), 0, nullptr, out.data()),
               "heap-buffer-overflow");
}
#endif

TEST(SimtEmulator, LaunchesFromSeveralOsThreads) {
  constexpr int kThreads = 4;
  std::vector<int> ok(kThreads, 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([w, &ok] {
      int good = 1;
      for (int rep = 0; rep < 20; ++rep) {
        unsigned threads = 64u << (rep % 4);
        std::vector<int> in(threads * 8), out(8);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i) + w;
        if (CNSR_LAUNCH(BlockSumKernel, dim3(8), dim3(threads), 0, nullptr, in.data(), out.data()) != "") good = 0;
        for (unsigned b = 0; b < 8; ++b) {
          int want = 0;
          for (unsigned t = 0; t < threads; ++t) want += in[b * threads + t];
          if (out[b] != want) good = 0;
        }
        if (rep % 5 == 0) {  // errors stay on their own OS thread
          std::vector<int> after(64);
          if (CNSR_LAUNCH(DivergentBarrierKernel, dim3(1), dim3(64), 0, nullptr, after.data()).empty()) good = 0;
          if (emu::TakeLastError().empty()) good = 0;
        }
      }
      if (!emu::TakeLastError().empty()) good = 0;
      ok[w] = good;
    });
  }
  for (auto& t : workers) t.join();
  for (int w = 0; w < kThreads; ++w) EXPECT_EQ(ok[w], 1) << "OS thread " << w;
}

TEST(SimtEmulator, ThroughputReport) {
  const unsigned blocks = 4096, threads = 256;
  std::vector<int> out(size_t{blocks} * threads);
  auto time = [&](auto&& launch) {
    launch();  // warm the fiber pool
    auto t0 = std::chrono::steady_clock::now();
    std::string err = launch();
    auto t1 = std::chrono::steady_clock::now();
    EXPECT_EQ(err, "");
    return std::chrono::duration<double>(t1 - t0).count();
  };
  double plain = time([&] { return CNSR_LAUNCH(EmptyKernel, dim3(blocks), dim3(threads), 0, nullptr, out.data()); });
  double barrier =
      time([&] { return CNSR_LAUNCH(OneBarrierKernel, dim3(blocks), dim3(threads), 0, nullptr, out.data()); });
  for (unsigned i = 0; i < threads; ++i) EXPECT_EQ(out[i], static_cast<int>(threads - 1 - i));
  std::vector<float> in(size_t{blocks} * threads, 1.0f), sums(size_t{blocks} * threads / 32);
  double shuffle =
      time([&] { return CNSR_LAUNCH(WarpSumKernel, dim3(blocks), dim3(threads), 0, nullptr, in.data(), sums.data()); });
  double n = double{blocks} * threads;
  std::printf(
      "[ simt     ] %.0f threads in %u blocks of %u: no barrier %.1f ms (%.1f ns/thread), "
      "one barrier %.1f ms (%.1f ns/thread), 5-step shuffle tree %.1f ms (%.1f ns/thread)\n",
      n, blocks, threads, plain * 1e3, plain * 1e9 / n, barrier * 1e3, barrier * 1e9 / n, shuffle * 1e3,
      shuffle * 1e9 / n);
}

// ---------------------------------------------------------------------------------------
// Tensor-core primitives (kernels/cuda/tensor_core.cuh). The operand fragments are built
// here from the PTX ISA's per-element description of mma.m16n8k32 (element i of a lane's
// fragment), independently of the register-wise formulas in tensor_core.cuh.

namespace tc = ::consensor::kernels::cuda_emu::tensor_core;

struct MmaCase {
  int8_t a[16][32];  // row-major M x K
  int8_t b[32][8];   // K x N
  int32_t c[16][8];
};

// Byte i (0..15) of lane's A fragment: row = g for i in [0,4) or [8,12), else g + 8;
// col = 4t + (i % 4) for i < 8, 4t + (i % 4) + 16 otherwise.
uint32_t AFragmentWord(const MmaCase& m, int lane, int reg) {
  const int g = lane / 4, t = lane % 4;
  uint32_t w = 0;
  for (int byte = 0; byte < 4; ++byte) {
    const int i = reg * 4 + byte;
    const int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
    const int col = t * 4 + (i % 4) + (i >= 8 ? 16 : 0);
    w |= static_cast<uint32_t>(static_cast<uint8_t>(m.a[row][col])) << (8 * byte);
  }
  return w;
}

// Byte i (0..7) of lane's B fragment: row (k) = 4t + (i % 4) (+16 for i >= 4), col = g.
uint32_t BFragmentWord(const MmaCase& m, int lane, int reg) {
  const int g = lane / 4, t = lane % 4;
  uint32_t w = 0;
  for (int byte = 0; byte < 4; ++byte) {
    const int i = reg * 4 + byte;
    const int k = t * 4 + (i % 4) + (i >= 4 ? 16 : 0);
    w |= static_cast<uint32_t>(static_cast<uint8_t>(m.b[k][g])) << (8 * byte);
  }
  return w;
}

CNSR_GLOBAL void MmaKernel(const uint32_t* a_frag, const uint32_t* b_frag, int32_t* c_frag) {
  const int lane = static_cast<int>(threadIdx.x);
  uint32_t a[4], b[2];
  int32_t c[4];
  for (int r = 0; r < 4; ++r) a[r] = a_frag[lane * 4 + r];
  for (int r = 0; r < 2; ++r) b[r] = b_frag[lane * 2 + r];
  for (int r = 0; r < 4; ++r) c[r] = c_frag[lane * 4 + r];
  tc::MmaS8(c, a, b);
  for (int r = 0; r < 4; ++r) c_frag[lane * 4 + r] = c[r];
}

TEST(SimtTensorCore, MmaS8MatchesThePtxFragmentLayout) {
  std::mt19937 rng(7);
  MmaCase m;
  for (auto& row : m.a)
    for (auto& v : row) v = static_cast<int8_t>(rng());
  for (auto& row : m.b)
    for (auto& v : row) v = static_cast<int8_t>(rng());
  for (auto& row : m.c)
    for (auto& v : row) v = static_cast<int32_t>(rng());
  m.a[0][0] = -128;  // extremes, and an accumulator that wraps past INT32_MAX
  m.b[0][0] = -128;
  m.c[0][0] = 2147483647;
  std::vector<uint32_t> a(32 * 4), b(32 * 2);
  std::vector<int32_t> c(32 * 4);
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) a[lane * 4 + r] = AFragmentWord(m, lane, r);
    for (int r = 0; r < 2; ++r) b[lane * 2 + r] = BFragmentWord(m, lane, r);
    // C element i: row = g (+8 for i >= 2), col = 2t + (i % 2).
    for (int i = 0; i < 4; ++i) c[lane * 4 + i] = m.c[lane / 4 + (i >= 2 ? 8 : 0)][2 * (lane % 4) + i % 2];
  }
  ASSERT_EQ(emu::Launch(dim3(1), dim3(32), 0, [&] { MmaKernel(a.data(), b.data(), c.data()); }), "");
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const int row = lane / 4 + (i >= 2 ? 8 : 0), col = 2 * (lane % 4) + i % 2;
      uint32_t want = static_cast<uint32_t>(m.c[row][col]);
      for (int k = 0; k < 32; ++k) want += static_cast<uint32_t>(int32_t{m.a[row][k]} * int32_t{m.b[k][col]});
      EXPECT_EQ(c[lane * 4 + i], static_cast<int32_t>(want)) << "lane " << lane << " element " << i;
    }
  }
  EXPECT_LT(c[0], 0) << "C[0][0] must wrap past INT32_MAX";
}

// Four 8 x 16-byte matrices in shared memory, rows addressed by lanes 8j..8j+7.
CNSR_GLOBAL void LdMatrixKernel(const uint8_t* src, uint32_t* out) {
  CNSR_SHARED(uint8_t, sh, 4 * 8 * 32);  // rows padded to 32 bytes: not contiguous matrices
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = 0; i < 32; ++i) sh[lane * 32 + i] = src[lane * 32 + i];
  __syncthreads();
  uint32_t r[4];
  const int matrix = lane / 8, row = lane % 8;
  tc::LdMatrixX4(r, sh + (matrix * 8 + row) * 32 + 16);  // the second 16 bytes of each row
  for (int j = 0; j < 4; ++j) out[lane * 4 + j] = r[j];
}

TEST(SimtTensorCore, LdMatrixGivesEachLaneItsFragmentWord) {
  std::vector<uint8_t> src(4 * 8 * 32);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);
  std::vector<uint32_t> out(32 * 4);
  ASSERT_EQ(emu::Launch(dim3(1), dim3(32), 0, [&] { LdMatrixKernel(src.data(), out.data()); }), "");
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      // Register j: matrix j, row lane / 4, bytes 4 * (lane % 4) .. +3.
      const uint8_t* p = src.data() + (j * 8 + lane / 4) * 32 + 16 + 4 * (lane % 4);
      const uint32_t want = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
      EXPECT_EQ(out[lane * 4 + j], want) << "lane " << lane << " register " << j;
    }
  }
}

CNSR_GLOBAL void CpAsyncKernel(const uint8_t* src, uint8_t* out) {
  CNSR_SHARED(uint8_t, sh, 64);
  const int t = static_cast<int>(threadIdx.x);
  tc::CpAsync16(sh + 16 * t, src + 16 * t, t % 2 == 0);  // odd chunks zero-filled
  tc::CpAsyncCommit();
  tc::CpAsyncWait<0>();
  __syncthreads();
  for (int i = 0; i < 16; ++i) out[16 * t + i] = sh[16 * t + i];
}

TEST(SimtTensorCore, CpAsyncCopiesOrZeroFills) {
  std::vector<uint8_t> src(64), out(64, 0xAA);
  for (int i = 0; i < 64; ++i) src[i] = static_cast<uint8_t>(i + 1);
  ASSERT_EQ(emu::Launch(dim3(1), dim3(4), 0, [&] { CpAsyncKernel(src.data(), out.data()); }), "");
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], (i / 16) % 2 == 0 ? src[i] : 0) << i;
}

CNSR_GLOBAL void MixedCollectivesKernel(int* out) {
  uint32_t word = threadIdx.x;
  if (threadIdx.x == 5) {
    out[threadIdx.x] = __shfl_sync(CNSR_FULL_MASK, static_cast<int>(word), 0);
  } else {
    uint32_t all[32];
    ::consensor::simt::emu::WarpAllGather(&word, sizeof(word), all);
    out[threadIdx.x] = static_cast<int>(all[0]);
  }
}

TEST(SimtTensorCore, MixingAShuffleAndAnAllGatherIsAnError) {
  std::vector<int> out(32);
  const std::string err = emu::Launch(dim3(1), dim3(32), 0, [&] { MixedCollectivesKernel(out.data()); });
  EXPECT_NE(err.find("different warp collectives"), std::string::npos) << err;
}

}  // namespace
