// Warp-level int8 tensor-core primitives (sm_80+) for the exact int8 GEMM, with their
// emulation. On the GPU each is one PTX instruction; under CNSR_SIMT_EMULATION each is
// computed from the PTX ISA's documented register fragment layouts, with the warp's lanes
// exchanging operands through emu::WarpAllGather.
//
// Only integer MMA is provided: s8 x s8 -> s32 products and sums are exact, and without
// .satfinite the accumulation wraps modulo 2^32, so the result does not depend on the
// order in which the hardware adds the 32 products (docs/DETERMINISM.md 4.4). Float MMA
// (f32/tf32/bf16/f16) is forbidden there and deliberately absent here.
//
// Fragment layout of mma.m16n8k32.row.col.s32.s8.s8.s32, for lane = 4 * g + t
// (g = lane / 4 in 0..7, t = lane % 4); a 32-bit register holds 4 consecutive k values,
// the lowest k in the lowest byte:
//   A (16 x 32, row-major): a[0] = A[g][4t..4t+3]      a[1] = A[g+8][4t..4t+3]
//                           a[2] = A[g][16+4t..]       a[3] = A[g+8][16+4t..]
//   B (32 x 8, "col": k contiguous per column n):
//                           b[0] = B[4t..4t+3][g]      b[1] = B[16+4t..16+4t+3][g]
//   C, D (16 x 8):          c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
// ldmatrix.m8n8.x4.b16: lanes 8j..8j+7 give the row addresses (16 bytes each) of matrix j,
// and every lane receives r[j] = bytes 4t..4t+3 of row g of matrix j, which is exactly the
// A / B fragment word above when a matrix is 8 rows x 16 k-bytes.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/simt.h"

namespace consensor::kernels::CNSR_CUDA_NS::tensor_core {

// d = a * b + c for one m16n8k32 s8 tile, in place on c.
CNSR_DEVICE void MmaS8(int32_t c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(CNSR_SIMT_EMULATION)
  struct Operands {
    uint32_t a[4];
    uint32_t b[2];
  };
  Operands mine = {{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  Operands all[32];
  ::consensor::simt::emu::WarpAllGather(&mine, sizeof(mine), all);
  const int lane = ::consensor::simt::emu::LaneId() % 32;
  const int g = lane >> 2, t = lane & 3;
  // Byte `k % 4` of the word that holds k, as laid out above.
  auto byte_of = [](uint32_t word, int k) { return static_cast<int32_t>(static_cast<int8_t>(word >> (8 * (k & 3)))); };
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0);
    const int col = 2 * t + (i & 1);
    uint32_t sum = static_cast<uint32_t>(c[i]);
    for (int k = 0; k < 32; ++k) {
      const int kh = k >> 4, kt = (k & 15) >> 2;
      const int32_t x = byte_of(all[(row & 7) * 4 + kt].a[(row >> 3) + 2 * kh], k);
      const int32_t y = byte_of(all[col * 4 + kt].b[kh], k);
      sum += static_cast<uint32_t>(x * y);  // wraps modulo 2^32, like the hardware
    }
    c[i] = static_cast<int32_t>(sum);
  }
#else
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Four 8 x 16-byte matrices from shared memory; `row` is this lane's row address
// (16-byte aligned): lanes 8j..8j+7 address rows 0..7 of matrix j.
CNSR_DEVICE void LdMatrixX4(uint32_t r[4], const void* row) {
#if defined(CNSR_SIMT_EMULATION)
  const void* rows[32];
  ::consensor::simt::emu::WarpAllGather(&row, sizeof(row), rows);
  const int lane = ::consensor::simt::emu::LaneId() % 32;
  for (int j = 0; j < 4; ++j) {
    std::memcpy(&r[j], static_cast<const uint8_t*>(rows[8 * j + (lane >> 2)]) + 4 * (lane & 3), 4);
  }
#else
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// Asynchronous 16-byte global -> shared copy; zero-fills the destination when !valid (then
// `src` is not read, but must still be a valid global address). Emulated as a plain copy.
CNSR_DEVICE void CpAsync16(void* dst, const void* src, bool valid) {
#if defined(CNSR_SIMT_EMULATION)
  if (valid) {
    std::memcpy(dst, src, 16);
  } else {
    std::memset(dst, 0, 16);
  }
#else
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 16 : 0) : "memory");
#endif
}

CNSR_DEVICE void CpAsyncCommit() {
#if !defined(CNSR_SIMT_EMULATION)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `Pending` committed groups of this thread are still in flight.
template <int Pending>
CNSR_DEVICE void CpAsyncWait() {
#if !defined(CNSR_SIMT_EMULATION)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

}  // namespace consensor::kernels::CNSR_CUDA_NS::tensor_core
