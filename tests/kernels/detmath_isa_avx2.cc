// Copyright (c) Consensor developers.
//
// AVX2+FMA instance of the detmath array kernels, for the cross-ISA bit-identity test
// in detmath_test.cc. Compile this file with -mavx2 -mfma (plus the usual -ffp-contract=off);
// use -O3 (GCC 12 at -O2 only vectorizes loops with a known trip count), so that the loops
// below auto-vectorize and use hardware FMA. detmath_isa_base.cc is
// the same code compiled for the baseline ISA.
#include <cstddef>

#if !defined(__AVX2__) || !defined(__FMA__)
#error "detmath_isa_avx2.cc must be compiled with -mavx2 -mfma (see detmath_test.cc)"
#endif

#include "tests/kernels/detmath_isa_body.h"

namespace consensor::detmath_isa {

// See detmath_isa_body.h for fn.
void ApplyB(int fn, const float* __restrict x, const float* __restrict y, float* __restrict out, size_t n) {
  ApplyInThisIsa(fn, x, y, out, n);
}

}  // namespace consensor::detmath_isa
