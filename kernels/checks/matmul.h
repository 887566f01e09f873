// Checks and batch layout of the matmul family (MatMul f32, MatMulInt8 i8 x i8 -> i32),
// shared by kernels/cpu/matmul.cc and kernels/cuda/matmul.cu.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

// One GEMM of the batch: A [M, K] x B [K, N] -> C [M, N].
struct MatMulDims {
  int64_t M = 0, N = 0, K = 0;
};

// Numpy broadcasting of the batch dims: the output batch dims and, per output batch dim,
// each input's batch-index stride (0 where its dim is 1 or absent). The strides count
// whole matrices, not elements; a_batches / b_batches are the inputs' own batch counts.
// Passed by value to the CUDA kernels.
struct MatMulBatchPlan {
  int nb = 0;  // number of output batch dims
  int64_t dims[kMaxRank] = {};
  int64_t a_stride[kMaxRank] = {};
  int64_t b_stride[kMaxRank] = {};
  int64_t count = 1;  // output batches
  int64_t a_batches = 1, b_batches = 1;
};

struct MatMulPlan {
  MatMulDims dims;
  MatMulBatchPlan batch;
};

// Validates a kMatMul (f32 inputs and output) or kMatMulInt8 (i8 inputs, i32 output) call;
// the caller has checked that the op is one of the two.
StatusOr<MatMulPlan> PlanMatMul(const KernelCall& call);

}  // namespace consensor::kernels
