// Copyright (c) Consensor developers.
//
// The loops of the detmath cross-ISA test (detmath_test.cc). detmath_isa_base.cc and
// detmath_isa_avx2.cc each include this file and compile it with their own ISA flags; the
// function has internal linkage, so each object keeps its own instance.
#ifndef CONSENSOR_TESTS_KERNELS_DETMATH_ISA_BODY_H_
#define CONSENSOR_TESTS_KERNELS_DETMATH_ISA_BODY_H_

#include <cstddef>

#include "kernels/detmath.h"

namespace consensor::detmath_isa {
namespace {

// fn: 0 exp, 1 log, 2 tanh, 3 sigmoid, 4 erf, 5 gelu_erf, 6 gelu_tanh, 7 rsqrt, 8 sin,
// 9 cos, 10 pow(x[i], y[i]), 11 canonicalize_nan, 12 asin, 13 acos, 14 atan, 15 sinh,
// 16 cosh, 17 asinh, 18 acosh, 19 atanh.
void ApplyInThisIsa(int fn, const float* __restrict x, const float* __restrict y, float* __restrict out, size_t n) {
  namespace dm = ::consensor::detmath;
  switch (fn) {
    case 0:
      for (size_t i = 0; i < n; ++i) out[i] = dm::exp(x[i]);
      break;
    case 1:
      for (size_t i = 0; i < n; ++i) out[i] = dm::log(x[i]);
      break;
    case 2:
      for (size_t i = 0; i < n; ++i) out[i] = dm::tanh(x[i]);
      break;
    case 3:
      for (size_t i = 0; i < n; ++i) out[i] = dm::sigmoid(x[i]);
      break;
    case 4:
      for (size_t i = 0; i < n; ++i) out[i] = dm::erf(x[i]);
      break;
    case 5:
      for (size_t i = 0; i < n; ++i) out[i] = dm::gelu_erf(x[i]);
      break;
    case 6:
      for (size_t i = 0; i < n; ++i) out[i] = dm::gelu_tanh(x[i]);
      break;
    case 7:
      for (size_t i = 0; i < n; ++i) out[i] = dm::rsqrt(x[i]);
      break;
    case 8:
      for (size_t i = 0; i < n; ++i) out[i] = dm::sin(x[i]);
      break;
    case 9:
      for (size_t i = 0; i < n; ++i) out[i] = dm::cos(x[i]);
      break;
    case 10:
      for (size_t i = 0; i < n; ++i) out[i] = dm::pow(x[i], y[i]);
      break;
    case 11:
      for (size_t i = 0; i < n; ++i) out[i] = dm::canonicalize_nan(x[i]);
      break;
    case 12:
      for (size_t i = 0; i < n; ++i) out[i] = dm::asin(x[i]);
      break;
    case 13:
      for (size_t i = 0; i < n; ++i) out[i] = dm::acos(x[i]);
      break;
    case 14:
      for (size_t i = 0; i < n; ++i) out[i] = dm::atan(x[i]);
      break;
    case 15:
      for (size_t i = 0; i < n; ++i) out[i] = dm::sinh(x[i]);
      break;
    case 16:
      for (size_t i = 0; i < n; ++i) out[i] = dm::cosh(x[i]);
      break;
    case 17:
      for (size_t i = 0; i < n; ++i) out[i] = dm::asinh(x[i]);
      break;
    case 18:
      for (size_t i = 0; i < n; ++i) out[i] = dm::acosh(x[i]);
      break;
    case 19:
      for (size_t i = 0; i < n; ++i) out[i] = dm::atanh(x[i]);
      break;
    default: break;
  }
}

}  // namespace
}  // namespace consensor::detmath_isa

#endif  // CONSENSOR_TESTS_KERNELS_DETMATH_ISA_BODY_H_
