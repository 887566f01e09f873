// One source for CUDA kernels, compiled two ways:
//   * by nvcc for the GPU (the CUDA backend), where everything here is a pass-through to
//     the CUDA built-ins;
//   * by the host C++ compiler with CNSR_SIMT_EMULATION defined (the emulated CUDA backend),
//     where blocks, threads, shared memory, __syncthreads and warp shuffles are emulated
//     with one fiber per CUDA thread (kernels/cuda/simt_emulator.cc).
// CI machines have nvcc but no GPU, so the emulated build is how every CI run executes the
// exact kernel code that runs on GPUs and checks it against the conformance vectors.
//
// Kernel code uses only: threadIdx/blockIdx/blockDim/gridDim, __syncthreads(),
// __shfl_{down,xor,sync}_sync with a full mask, CNSR_SHARED / CNSR_DYNAMIC_SHARED for shared
// memory, CNSR_GLOBAL / CNSR_DEVICE qualifiers, CNSR_LAUNCH to launch, and detmath.
// Float atomics are forbidden by docs/DETERMINISM.md and are not provided.
//
// Rules the emulation enforces or relies on (a GPU relies on most of them too):
//   * every thread of a block reaches every __syncthreads; every live lane joins every
//     shuffle (a violation is a launch error, not a hang);
//   * no RAII objects alive across a barrier or shuffle (an abandoned block drops frames);
//   * shared memory starts as 0xFF bytes, not zero; a shuffle moves at most 8 bytes;
//   * about 64 KiB of stack per thread (keep big arrays in shared or global memory);
//   * no order between blocks may be assumed;
//   * CNSR_LAUNCH(kernel<A, B>, ...) breaks on template commas: take a function pointer
//     first (`auto* k = &Kernel<A, B>; CNSR_LAUNCH(k, ...)`).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_ns.h"
#include "kernels/hd.h"

#if defined(CNSR_SIMT_EMULATION) && defined(__CUDACC__)
#error "CNSR_SIMT_EMULATION is for the host compiler, not nvcc"
#endif

// ---------------------------------------------------------------------------------------
#if !defined(CNSR_SIMT_EMULATION)  // nvcc: the real thing.

#include <cuda_runtime.h>

#define CNSR_GLOBAL __global__
#define CNSR_DEVICE __device__ __forceinline__
#define CNSR_SHARED(type, name, count) __shared__ type name[count]
#define CNSR_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define CNSR_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)
#define CNSR_FULL_MASK 0xffffffffu

// ---------------------------------------------------------------------------------------
#else  // Host emulation.

#include <cstddef>
#include <functional>
#include <string>

namespace consensor::simt {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

using cudaStream_t = void*;

namespace emu {

// The state of the CUDA thread currently running on this OS thread (a fiber).
struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
const ThreadState& Current();

void SyncThreads();
// Warp exchange: every active lane of the warp deposits `value` and receives the value of
// lane `src_lane` (lanes are threadIdx linearized, 32 per warp). All 32 lanes (or all lanes
// of a partial last warp) must call it together, as CUDA requires with a full mask.
uint64_t WarpExchange(uint64_t value, int src_lane);
int LaneId();
// Warp all-gather: every lane deposits `bytes` bytes (at most 64) and receives all 32
// lanes' deposits, lane by lane, in `all` (32 * bytes). Lanes missing from a partial last
// warp read as 0xFF bytes. Emulates the warp-wide operand exchange of ldmatrix and mma.
void WarpAllGather(const void* mine, size_t bytes, void* all);

// Per-block shared memory: the same pointer for every thread of the block. `key` tells
// the static allocations of a kernel apart.
void* BlockShared(const void* key, size_t bytes);
void* BlockDynamicShared();

// Runs `body` for every thread of every block; returns an error message for a misuse
// that CUDA leaves undefined (a __syncthreads not reached by every thread of the block,
// too many threads per block, too much shared memory), or an empty string.
std::string Launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body);
// The first error of the launches since the last call, then cleared (like cudaGetLastError).
std::string TakeLastError();

template <typename T>
T Shuffle(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = WarpExchange(bits, src_lane);
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace emu
}  // namespace consensor::simt

using consensor::simt::cudaStream_t;
using consensor::simt::dim3;
using consensor::simt::uint3;

#define threadIdx (::consensor::simt::emu::Current().thread_idx)
#define blockIdx (::consensor::simt::emu::Current().block_idx)
#define blockDim (::consensor::simt::emu::Current().block_dim)
#define gridDim (::consensor::simt::emu::Current().grid_dim)
#define __syncthreads() ::consensor::simt::emu::SyncThreads()

template <typename T>
inline T __shfl_sync(unsigned, T v, int src_lane, int width = 32) {
  int lane = ::consensor::simt::emu::LaneId();
  return ::consensor::simt::emu::Shuffle(v, (lane / width) * width + (src_lane % width));
}
template <typename T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  int lane = ::consensor::simt::emu::LaneId();
  int src = lane + static_cast<int>(delta);
  // Like CUDA: a source past the segment end returns the caller's own value.
  if ((src / width) != (lane / width)) src = lane;
  return ::consensor::simt::emu::Shuffle(v, src);
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
  int lane = ::consensor::simt::emu::LaneId();
  int src = lane ^ lane_mask;
  if ((src / width) != (lane / width)) src = lane;
  return ::consensor::simt::emu::Shuffle(v, src);
}

#define CNSR_GLOBAL
#define CNSR_DEVICE inline
#define CNSR_SHARED(type, name, count)     \
  static const char name##_shared_key = 0; \
  type* name = static_cast<type*>(::consensor::simt::emu::BlockShared(&name##_shared_key, sizeof(type) * (count)))
#define CNSR_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::consensor::simt::emu::BlockDynamicShared())
#define CNSR_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  ::consensor::simt::emu::Launch((grid), (block), (shared_bytes), [&] { kernel(__VA_ARGS__); })
#define CNSR_FULL_MASK 0xffffffffu

#endif  // CNSR_SIMT_EMULATION
