// Copyright (c) Consensor developers.
//
// Baseline-ISA instance of the detmath array kernels, for the cross-ISA bit-identity test
// in detmath_test.cc. Compile this file with the project's normal flags (no -m options
// beyond the baseline; -ffp-contract=off as everywhere). detmath_isa_avx2.cc is the same
// code compiled with -mavx2 -mfma.
#include <cstddef>

#include "tests/kernels/detmath_isa_body.h"

namespace consensor::detmath_isa {

// See detmath_isa_body.h for fn.
void ApplyA(int fn, const float* __restrict x, const float* __restrict y, float* __restrict out, size_t n) {
  ApplyInThisIsa(fn, x, y, out, n);
}

}  // namespace consensor::detmath_isa
