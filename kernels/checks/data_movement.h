// Checks and copy plans of the data-movement family (identity, reshape, transpose, slice,
// concat, gather, expand, pad), shared by kernels/cpu/data_movement.cc and
// kernels/cuda/data_movement.cu.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/checks/common.h"
#include "kernels/op.h"

namespace consensor::kernels {

// Everything but gather's index values, which are run-time data that each backend checks
// where it reads them (reporting the first bad one with GatherIndexError).
Status ValidateDataMovement(const KernelCall& call);

Status GatherIndexError(int64_t index, int64_t position, int64_t axis_size);

// Transpose, slice and expand of a validated call as one strided read of the input:
// output multi-index idx reads input element offset + sum_d idx[d] * layout.strides[0][d].
struct StridedRead {
  StridedLayout layout;
  int64_t offset = 0;
};
StridedRead PlanStridedRead(const KernelCall& call);

}  // namespace consensor::kernels
