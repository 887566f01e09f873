// The f16/bf16 rule of docs/DETERMINISM.md 1.3 and 1.4, planned once for every backend: which
// calls compute through f32, the dtype checks the widening would otherwise hide, and how a call
// splits into blocks of independent rows so that its f32 copies stay bounded. The CPU backend
// (kernels/cpu/half_operands.cc) and the CUDA backends (kernels/cuda/half_operands.cu) run the
// same plan, so they hold the same f32 copies and the executor counts them once
// (HalfWideningBytes) for whichever backend runs the program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

// True when `call` reads or writes f16/bf16 and computes (does not only copy bits): every op
// except data movement, identity, where and a cast to the same dtype.
bool ComputesThroughF32(const KernelCall& call);

// Widening would hide a dtype mismatch from the f32 kernel's own checks, so the float operands
// are checked here: a 16-bit float operand makes every float operand (and, except for cast,
// every float output) that same dtype; a 16-bit output needs 16-bit inputs (except for cast).
Status CheckHalfOperands(const KernelCall& call, const std::string& op_name);

// What every backend checks before it widens a call's operands: the call is well formed (at
// least one output, its operand arrays present), has no fused epilogue (16-bit calls take
// none), and passes CheckHalfOperands. `op_name` begins each error message.
Status CheckHalfCall(const KernelCall& call, const std::string& op_name);

// Output elements per block: the f32 copy of one sliced operand's block is at most this many
// values (64 KiB), unless a single row is longer.
inline constexpr int64_t kHalfBlockElems = int64_t{1} << 14;

// The most inputs a split call has (layer_norm and conv2d have 3, where is not split).
inline constexpr int kMaxHalfSplitInputs = 4;

// How a call splits into independent rows: the output's leading axes (and each sliced operand's
// matching axes) flattened into `rows`. Every output element depends only on its own row of
// each sliced operand and on the whole operands, so each block of rows is a smaller call of the
// same op and computes the same bits (the op's f32 rule is per output element, DETERMINISM.md 4).
// Where output rows are independent: elementwise ops over the leading axes, matmul with a 2-D
// right operand over the rows of the left one, conv2d per image, pools per plane, softmax and
// layer_norm over the axes before `axis`. Other calls (reductions, argmax, top_k, cumsum,
// batched matmul) are not split (rows == 0) and widen whole.
struct HalfRowSplit {
  int64_t rows = 0;  // 0: the call is not split
  // Per operand (inputs, then outputs): values per row when sliced, 0 when passed whole.
  std::vector<int64_t> row_elems;
  // Per operand: the view's dims after the row axis (sliced), or the whole view's dims.
  std::vector<std::vector<int64_t>> dims;
  bool leading_one = false;  // pools: a block is viewed as [1, rows, ...] (one image of nb planes)
  bool axis_is_one = false;  // softmax, layer_norm: the block's axis is 1 (the row axis is 0)
};
HalfRowSplit PlanHalfRowSplit(const KernelCall& call);

// Rows per block of a split call (at least 1, at most s.rows).
int64_t HalfBlockRows(const HalfRowSplit& s);

// A view of `dims`, preceded by lead0 and lead1 when they are >= 0.
TensorView ViewWithDims(DType dtype, void* data, const std::vector<int64_t>& dims, int64_t lead0, int64_t lead1);

// The bytes of f32 copies the plan holds at once for `call` (0 when it does not widen): the
// whole-widened operands plus one block of each sliced one. Only shapes, dtypes and params are
// read. The executor counts it against the task's memory cap. (The CPU backend runs elementwise
// blocks on several threads, each with its own block of at most 64 KiB per operand.)
int64_t HalfWideningBytes(const KernelCall& call);

}  // namespace consensor::kernels
