// Copyright (c) Consensor developers.
//
// Baseline-ISA instance of the detmath array kernels, for the cross-ISA bit-identity test
// in detmath_test.cc. Compile this file with the project's normal flags (no -m options
// beyond the baseline; -ffp-contract=off as everywhere). detmath_isa_avx2.cc is the same
// code compiled with -mavx2 -mfma.
#include <cstddef>

#include "kernels/detmath.h"

namespace consensor::detmath_isa {

// clang-format off: one case per line.
#define CNSR_DETMATH_ISA_BODY                                             \
  namespace dm = ::consensor::detmath;                                    \
  switch (fn) {                                                           \
    case 0:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::exp(x[i]);              \
      break;                                                              \
    case 1:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::log(x[i]);              \
      break;                                                              \
    case 2:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::tanh(x[i]);             \
      break;                                                              \
    case 3:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::sigmoid(x[i]);          \
      break;                                                              \
    case 4:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::erf(x[i]);              \
      break;                                                              \
    case 5:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::gelu_erf(x[i]);         \
      break;                                                              \
    case 6:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::gelu_tanh(x[i]);        \
      break;                                                              \
    case 7:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::rsqrt(x[i]);            \
      break;                                                              \
    case 8:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::sin(x[i]);              \
      break;                                                              \
    case 9:                                                               \
      for (size_t i = 0; i < n; ++i) out[i] = dm::cos(x[i]);              \
      break;                                                              \
    case 10:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::pow(x[i], y[i]);        \
      break;                                                              \
    case 11:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::canonicalize_nan(x[i]); \
      break;                                                              \
    case 12:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::asin(x[i]);             \
      break;                                                              \
    case 13:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::acos(x[i]);             \
      break;                                                              \
    case 14:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::atan(x[i]);             \
      break;                                                              \
    case 15:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::sinh(x[i]);             \
      break;                                                              \
    case 16:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::cosh(x[i]);             \
      break;                                                              \
    case 17:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::asinh(x[i]);            \
      break;                                                              \
    case 18:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::acosh(x[i]);            \
      break;                                                              \
    case 19:                                                              \
      for (size_t i = 0; i < n; ++i) out[i] = dm::atanh(x[i]);            \
      break;                                                              \
    default: break;                                                       \
  }
// clang-format on

// fn: 0 exp, 1 log, 2 tanh, 3 sigmoid, 4 erf, 5 gelu_erf, 6 gelu_tanh, 7 rsqrt, 8 sin,
// 9 cos, 10 pow(x[i], y[i]), 11 canonicalize_nan, 12 asin, 13 acos, 14 atan, 15 sinh,
// 16 cosh, 17 asinh, 18 acosh, 19 atanh.
void ApplyA(int fn, const float* __restrict x, const float* __restrict y, float* __restrict out, size_t n) {
  CNSR_DETMATH_ISA_BODY
}

}  // namespace consensor::detmath_isa
