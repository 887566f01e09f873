// The one-pass quantize (a cast with three inputs, docs/DETERMINISM.md 3.1): y = cast(add(round(div(x,
// s)), z)) with scalar s and z, written once and compiled three times (quantize.cc portable,
// quantize_avx2.cc, quantize_avx512.cc). Each element goes through the elementwise kernels' own
// functors for the four ops (elementwise_impl.h, same linkage discipline), so the bits are
// those of the four canonical instructions; only q, r and a stay in registers.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/elementwise_impl.h"

namespace consensor::kernels::cpu {

// Writes y[i] for i in [begin, end); `to` is u8 or i8 (checked by the caller).
void QuantizeChunkPortable(const float* x, float s, float z, DType to, void* y, int64_t begin, int64_t end);
void QuantizeChunkAvx2(const float* x, float s, float z, DType to, void* y, int64_t begin, int64_t end);
void QuantizeChunkAvx512(const float* x, float s, float z, DType to, void* y, int64_t begin, int64_t end);

namespace {

template <typename T>
CNSR_EW_FLATTEN void QuantizeLoop(const float* x, float s, float z, T* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float r = RoundF::Apply(DivF::Apply(x[i], s));
    y[i] = CastF<T>::Apply(AddF::Apply(r, z));
  }
}

CNSR_EW_FLATTEN void QuantizeChunkImpl(const float* x, float s, float z, DType to, void* y, int64_t begin,
                                       int64_t end) {
  if (to == DType::kU8) {
    QuantizeLoop(x, s, z, static_cast<uint8_t*>(y), begin, end);
  } else {
    QuantizeLoop(x, s, z, static_cast<int8_t*>(y), begin, end);
  }
}

}  // namespace
}  // namespace consensor::kernels::cpu
