// Shape helpers and the strided-iteration layout shared by the per-family checks and
// plans in kernels/checks/. Everything in kernels/checks/ runs on the host before a
// kernel starts, and is called by both backends so that they accept the same calls with
// the same errors and plan the same iteration. The headers are also compiled by nvcc
// (C++17) from kernels/cuda/*.cu: host-only code, light includes.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/op.h"

namespace consensor::kernels {

// "[2, 3]"
std::string ShapeString(const TensorView& v);
bool SameShape(const TensorView& a, const TensorView& b);
// Row-major element strides of a contiguous tensor.
void ContiguousStrides(const TensorView& v, int64_t* strides);

// A tensor viewed as [outer, dims[axis], inner]; requires 0 <= axis < rank.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit SplitAtAxis(const TensorView& v, int64_t axis);

// Iteration over a contiguous row-major output with up to kMaxOperands strided operands:
// operand k reads element sum_d idx[d] * strides[k][d] for output multi-index idx. Strides
// may be 0 (broadcast) or negative (slice with negative steps). A plain aggregate, passed
// by value to CUDA kernels.
inline constexpr int kMaxOperands = 3;
struct StridedLayout {
  int rank = 0;
  int num_operands = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxOperands][kMaxRank] = {};
};

// Element strides of a contiguous input aligned from the right to an output of rank
// out_rank >= in_rank. Stretched dims of size 1 and missing leading dims get stride 0.
void BroadcastStrides(const int64_t* in_dims, int in_rank, const int64_t* out_dims, int out_rank, int64_t* strides);

// Drops output dims of size 1 and merges adjacent dims d, d+1 whenever every operand has
// strides[d] == strides[d+1] * dims[d+1] (one linear run). Leaves rank >= 1 (rank 0
// becomes [1]); unused trailing entries become dims 1, strides 0. Call it for non-empty
// outputs only.
void CoalesceLayout(StridedLayout& l);

}  // namespace consensor::kernels
