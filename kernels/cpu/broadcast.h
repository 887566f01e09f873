// Iteration over a StridedLayout (kernels/checks/common.h, planned on the host for both
// backends) shared by the elementwise and data-movement kernels.
//
// Everything here lives in an unnamed namespace on purpose: the header is included by
// translation units compiled with different ISA flags (*_avx2.cc gets -mavx2 -mfma), and
// internal linkage guarantees that the linker can never substitute one TU's copy of an
// inline function for another's (which would run AVX2 code on the portable path).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/checks/common.h"

namespace consensor::kernels::cpu {

namespace {

// Visits the output element range [begin, end) of a layout (rank >= 1, coalesced or not)
// as runs along the innermost dim. For each run calls
//   fn(int64_t out_pos, const int64_t* offsets, int64_t n)
// where offsets[k] is operand k's element offset of the run's first element; inside the
// run operand k advances by l.strides[k][rank-1] per element.
template <typename Fn>
inline void ForEachRun(const StridedLayout& l, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const int r = l.rank;
  int64_t idx[kMaxRank];
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % l.dims[d];
    rem /= l.dims[d];
  }
  int64_t offsets[kMaxOperands];
  for (int k = 0; k < l.num_operands; ++k) {
    int64_t o = 0;
    for (int d = 0; d < r; ++d) o += idx[d] * l.strides[k][d];
    offsets[k] = o;
  }
  const int64_t inner = l.dims[r - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = inner - idx[r - 1];
    if (n > end - pos) n = end - pos;
    fn(pos, static_cast<const int64_t*>(offsets), n);
    pos += n;
    if (pos >= end) break;
    // Advance the multi-index by n along the innermost dim (which ends the row here).
    for (int k = 0; k < l.num_operands; ++k) offsets[k] += n * l.strides[k][r - 1];
    idx[r - 1] += n;
    for (int d = r - 1; d > 0 && idx[d] == l.dims[d]; --d) {
      for (int k = 0; k < l.num_operands; ++k) {
        offsets[k] -= idx[d] * l.strides[k][d];
        offsets[k] += l.strides[k][d - 1];
      }
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

}  // namespace
}  // namespace consensor::kernels::cpu
