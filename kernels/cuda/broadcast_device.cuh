// Strided/broadcast iteration shared by the CUDA elementwise and data-movement families
// (both builds: nvcc and the SIMT emulation). The host plans a StridedLayout
// (kernels/checks/common.h: numpy broadcast strides, coalesced dims) and passes it to
// kernels by value; kernels map an output element index to per-operand element offsets.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/checks/common.h"
#include "kernels/cuda/simt.h"

#if defined(__CUDACC__)
#define CNSR_UNROLL _Pragma("unroll")
#else
#define CNSR_UNROLL
#endif

namespace consensor::kernels::CNSR_CUDA_NS {

constexpr int kDevBlock = 256;

// Grid size for `work` independent items with a grid-stride loop; depends on the device
// only through the block count, never the results.
inline unsigned DevBlocks(int64_t work, int multiprocessors, int64_t per_thread = 1) {
  int64_t threads = (work + per_thread - 1) / per_thread;
  int64_t b = (threads + kDevBlock - 1) / kDevBlock;
  int64_t cap = int64_t{multiprocessors < 1 ? 1 : multiprocessors} * 8;
  if (b > cap) b = cap;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b);
}

// Element offsets of output element i for the first NOP operands. `narrow` (every dim
// and i below 2^31) selects 32-bit index arithmetic, which is much cheaper on GPUs.
template <int NOP>
CNSR_DEVICE void DevOffsets(const StridedLayout& l, int64_t i, bool narrow, int64_t* off) {
  CNSR_UNROLL
  for (int k = 0; k < NOP; ++k) off[k] = 0;
  if (narrow) {
    uint32_t rem = static_cast<uint32_t>(i);
    CNSR_UNROLL
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < l.rank) {
        const uint32_t dim = static_cast<uint32_t>(l.dims[d]);
        const uint32_t q = rem / dim;
        const int64_t id = static_cast<int64_t>(rem - q * dim);
        rem = q;
        CNSR_UNROLL
        for (int k = 0; k < NOP; ++k) off[k] += id * l.strides[k][d];
      }
    }
  } else {
    uint64_t rem = static_cast<uint64_t>(i);
    CNSR_UNROLL
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < l.rank) {
        const uint64_t dim = static_cast<uint64_t>(l.dims[d]);
        const uint64_t q = rem / dim;
        const int64_t id = static_cast<int64_t>(rem - q * dim);
        rem = q;
        CNSR_UNROLL
        for (int k = 0; k < NOP; ++k) off[k] += id * l.strides[k][d];
      }
    }
  }
}

CNSR_DEVICE int64_t DevThreadIndex() {
  return static_cast<int64_t>(blockIdx.x) * static_cast<int64_t>(blockDim.x) + static_cast<int64_t>(threadIdx.x);
}
CNSR_DEVICE int64_t DevThreadCount() { return static_cast<int64_t>(gridDim.x) * static_cast<int64_t>(blockDim.x); }

// Aligned vector load/store of V elements (one 16-byte (or smaller) transaction on GPUs).
template <typename T, int V>
struct alignas(sizeof(T) * V) DevVec {
  T v[V];
};

template <typename T, int V>
CNSR_DEVICE void DevLoadVec(const T* p, T* r) {
#if defined(CNSR_SIMT_EMULATION)
  __builtin_memcpy(r, p, sizeof(T) * V);
#else
  const DevVec<T, V> x = *reinterpret_cast<const DevVec<T, V>*>(p);
  CNSR_UNROLL
  for (int i = 0; i < V; ++i) r[i] = x.v[i];
#endif
}

template <typename T, int V>
CNSR_DEVICE void DevStoreVec(T* p, const T* r) {
#if defined(CNSR_SIMT_EMULATION)
  __builtin_memcpy(p, r, sizeof(T) * V);
#else
  DevVec<T, V> x;
  CNSR_UNROLL
  for (int i = 0; i < V; ++i) x.v[i] = r[i];
  *reinterpret_cast<DevVec<T, V>*>(p) = x;
#endif
}

inline bool DevAligned(const void* p, int64_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes)) == 0;
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
