// Checks and broadcast layout of the elementwise family (unary, binary with numpy
// broadcasting, where, cast, logical ops), shared by kernels/cpu/elementwise.cc and
// kernels/cuda/elementwise.cu.
#pragma once

#include "common/status.h"
#include "kernels/checks/common.h"
#include "kernels/op.h"

namespace consensor::kernels {

// Arity and dtypes per op, the output shape being exactly the numpy broadcast of the
// input shapes, and data for every tensor when the output is not empty.
Status ValidateElementwise(const KernelCall& call);

// The coalesced iteration of a validated call with a non-empty output; operand k is input k.
StridedLayout ElementwiseLayout(const KernelCall& call);

}  // namespace consensor::kernels
