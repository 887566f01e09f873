// Checks and iteration layout of the reduce family (ReduceSum/Mean/Max/Min, ArgMax),
// shared by kernels/cpu/reduce.cc and kernels/cuda/reduce.cu.
#pragma once

#include <cstdint>
#include <optional>

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

Status ValidateReduce(const KernelCall& call);

// Dims merged into groups, outermost first: the element offset of a group multi-index is
// sum_k idx[k] * stride[k]. Passed by value to the CUDA kernels.
struct ReduceGroups {
  int n = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};  // in elements
};

// Dims of size 1 are dropped and adjacent dims of the same kind (kept / reduced) merged;
// neither changes the row-major term order of any output.
struct ReduceLayout {
  ReduceGroups kept, red;
  bool inner_reduced = false;  // the innermost group is a reduced one
  int64_t n_out = 1, n_terms = 1;
};

// The layout of a validated ReduceSum/Mean/Max/Min/Prod over params.axes, or nullopt when a
// reduced dim is 0 (every output is the empty reduction).
std::optional<ReduceLayout> PlanReduction(const TensorView& x, const OpParams& params);

}  // namespace consensor::kernels
