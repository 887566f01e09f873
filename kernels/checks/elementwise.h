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

// Checks call.epilogue (docs/DETERMINISM.md 3.1) against the call's output: an f32 output;
// 1..kMaxEpilogueSteps steps, each an EpilogueOpAllowed op whose operands are earlier values
// of the chain or f32 epilogue inputs that broadcast to the output shape. OK without one.
Status ValidateEpilogue(const KernelCall& call);

// Step `s` of a validated epilogue as an elementwise call over the call's output shape, for
// its broadcast layout. Fills views[0..1] and *out; value operands and the output point at
// the call's output data (the caller substitutes the real pointers).
KernelCall EpilogueStepCall(const KernelCall& call, int s, TensorView* views, TensorView* out);

}  // namespace consensor::kernels
