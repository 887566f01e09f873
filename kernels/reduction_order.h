// The canonical summation order (docs/DETERMINISM.md, "Canonical sum").
//
// A sum over n terms x[0..n) is defined as:
//   * n == 0: +0.0
//   * n <= kSumChunk: LaneTree(x, n): 64 lanes start at -0.0 (the exact additive identity);
//     term i is added to lane i % 64 in increasing i; then lanes are folded pairwise:
//     for s = 32, 16, 8, 4, 2, 1: lane[j] = lane[j] + lane[j + s] for j < s. Result lane[0].
//   * n > kSumChunk: split x into chunks of kSumChunk consecutive terms (the last may be
//     short), reduce each chunk with LaneTree, then sum the chunk results with this same
//     definition, recursively.
//
// Why this order: 64 lanes are 8 AVX2 registers (8 independent dependency chains, enough
// to hide add latency) and one CUDA warp holding two lanes per thread, whose fold is
// exactly a shfl_down tree. Chunks of 4096 give a GPU one warp per chunk for very long
// reductions. Adding -0.0 is an exact identity, so lanes that receive no term may be
// skipped by an implementation without changing any bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/hd.h"

namespace consensor::kernels {

constexpr int kSumLanes = 64;
constexpr int64_t kSumChunk = 4096;

// Reference implementation over an accessor: term(i) returns x[i] for i in [0, n).
// Optimized kernels must produce the same bits; tests compare them against this.
template <typename Term>
CNSR_HD float LaneTreeSum(const Term& term, int64_t n) {
  float lane[kSumLanes];
  for (int j = 0; j < kSumLanes; ++j) lane[j] = -0.0f;
  for (int64_t i = 0; i < n; ++i) lane[i % kSumLanes] = lane[i % kSumLanes] + term(i);
  for (int s = kSumLanes / 2; s >= 1; s /= 2) {
    for (int j = 0; j < s; ++j) lane[j] = lane[j] + lane[j + s];
  }
  return lane[0];
}

// Canonical sum of a contiguous array; defined below.
inline float CanonicalSumOfArray(const float* x, int64_t n);

// Canonical sum over n terms, host reference. Each level turns n terms into
// ceil(n / kSumChunk) chunk sums; levels repeat until one chunk remains.
template <typename Term>
inline float CanonicalSumReference(const Term& term, int64_t n) {
  if (n == 0) return 0.0f;
  if (n <= kSumChunk) return LaneTreeSum(term, n);
  int64_t m = (n + kSumChunk - 1) / kSumChunk;
  std::vector<float> partial(static_cast<std::size_t>(m));
  for (int64_t c = 0; c < m; ++c) {
    int64_t begin = c * kSumChunk;
    int64_t len = (n - begin < kSumChunk) ? n - begin : kSumChunk;
    partial[c] = LaneTreeSum([&](int64_t i) { return term(begin + i); }, len);
  }
  // The next levels sum plain arrays; a non-template recursion keeps instantiation finite.
  return CanonicalSumOfArray(partial.data(), m);
}

inline float CanonicalSumOfArray(const float* x, int64_t n) {
  return CanonicalSumReference([x](int64_t i) { return x[i]; }, n);
}

}  // namespace consensor::kernels
