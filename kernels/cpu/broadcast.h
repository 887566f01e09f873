// Numpy-style broadcast index iteration shared by the elementwise and data-movement
// kernels.
//
// A "strided operand" reads element `sum_d idx[d] * strides[d]` (in elements, relative to
// its base pointer) for output multi-index `idx`; broadcast dims have stride 0 and strides
// may be negative (slice with negative steps). The output is always contiguous row-major.
//
// Everything here lives in an unnamed namespace on purpose: the header is included by
// translation units compiled with different ISA flags (*_avx2.cc gets -mavx2 -mfma), and
// internal linkage guarantees that the linker can never substitute one TU's copy of an
// inline function for another's (which would run AVX2 code on the portable path).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace consensor::kernels::cpu {

inline constexpr int kMaxOperands = 4;

// Layout of an iteration over a contiguous output with up to kMaxOperands strided
// operands. (A plain aggregate with external linkage so that plans containing it can be
// passed between the portable and the AVX2 translation units; it has no code.)
struct StridedLayout {
  int rank = 0;
  int num_operands = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxOperands][kMaxRank] = {};
};

namespace {

// Element strides of a contiguous row-major input of shape in_dims[0..in_rank), aligned
// from the right to an output of rank out_rank >= in_rank. Dims of size 1 that are
// stretched (out dim != 1) get stride 0. Leading (missing) dims get stride 0.
inline void BroadcastStrides(const int64_t* in_dims, int in_rank, const int64_t* out_dims, int out_rank,
                             int64_t* strides) {
  int64_t s = 1;
  for (int d = out_rank - 1; d >= 0; --d) {
    int id = d - (out_rank - in_rank);
    if (id < 0) {
      strides[d] = 0;
      continue;
    }
    strides[d] = (in_dims[id] == 1 && out_dims[d] != 1) ? 0 : s;
    s *= in_dims[id];
  }
}

// Removes output dims of size 1 and merges adjacent dims d, d+1 whenever every operand
// satisfies strides[d] == strides[d+1] * dims[d+1] (so the pair is one linear run).
// Leaves rank >= 1 (a rank-0 output becomes [1]). Does nothing for empty outputs
// (callers return early for them).
inline void CoalesceLayout(StridedLayout& l) {
  int64_t dims[kMaxRank];
  int64_t st[kMaxOperands][kMaxRank];
  int r = 0;
  for (int d = 0; d < l.rank; ++d) {
    if (l.dims[d] == 1) continue;
    if (r > 0) {
      bool mergeable = true;
      for (int k = 0; k < l.num_operands; ++k) {
        if (st[k][r - 1] != l.strides[k][d] * l.dims[d]) mergeable = false;
      }
      if (mergeable) {
        dims[r - 1] *= l.dims[d];
        for (int k = 0; k < l.num_operands; ++k) st[k][r - 1] = l.strides[k][d];
        continue;
      }
    }
    dims[r] = l.dims[d];
    for (int k = 0; k < l.num_operands; ++k) st[k][r] = l.strides[k][d];
    ++r;
  }
  if (r == 0) {
    dims[0] = 1;
    for (int k = 0; k < l.num_operands; ++k) st[k][0] = 0;
    r = 1;
  }
  l.rank = r;
  for (int d = 0; d < r; ++d) {
    l.dims[d] = dims[d];
    for (int k = 0; k < l.num_operands; ++k) l.strides[k][d] = st[k][d];
  }
}

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
