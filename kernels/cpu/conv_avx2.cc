// The AVX2+FMA instantiation of kernels/cpu/conv_direct_impl.h (compiled with -mavx2
// -mfma); called only when CpuHasAvx2Fma() is true. Same source and bits as the portable
// path in conv.cc.
#include "kernels/cpu/conv_direct_impl.h"

namespace consensor::kernels::cpu {

void ConvDirectRowsAvx2(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y, int64_t begin,
                        int64_t end) {
  ConvDirectRowsImpl(g, x, w, bias, y, begin, end);
}

}  // namespace consensor::kernels::cpu
