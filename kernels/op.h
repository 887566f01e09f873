// The arithmetic vocabulary shared by every backend: which operation, its resolved
// parameters, and views of the tensors it reads and writes. Kernels know nothing about
// graphs; the executor validates a graph and lowers each node to one KernelCall whose
// parameters are already normalized (axes non-negative, slices clamped, shapes inferred).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace consensor::kernels {

enum class Op : uint16_t {
  // Unary elementwise (f32 unless noted).
  kNeg,
  kAbs,
  kRelu,  // f32, i32, i8, i64
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kErf,
  kGeluErf,
  kGeluTanh,
  kSin,
  kCos,
  kFloor,  // f32; exact (section 4.2)
  kCeil,
  kRound,     // half to even
  kNot,       // bool
  kIdentity,  // any dtype, copies bits
  kCast,      // params.to
  // Binary elementwise with numpy broadcasting.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kFmod,  // f32, i8, i32, i64: remainder with the sign of the dividend
  kMax,
  kMin,
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,  // -> bool
  kAnd,
  kOr,
  kXor,    // bool
  kWhere,  // (bool cond, a, b)
  // Reductions over params.axes (sorted, unique); output keeps or drops axes per params.keepdims.
  kReduceSum,
  kReduceMean,
  kReduceMax,
  kReduceMin,
  kReduceProd,  // sequential product in row-major term order
  kArgMax,      // over params.axis -> i64
  kTopK,        // i64 indices of the first params.k elements along params.axis (params.largest)
  // Linear algebra and neural-network ops.
  kMatMul,      // f32 batched, numpy broadcasting of batch dims
  kMatMulInt8,  // i8 x i8 -> i32, exact
  kConv2D,      // NCHW x (Cout, Cin/group, kh, kw) [+ bias(Cout)]
  kMaxPool2D,
  kAvgPool2D,  // NCHW
  kSoftmax,    // over params.axis
  kLayerNorm,  // normalizes over dims [params.axis, rank); (x, scale[, bias])
  // Data movement: copies bits exactly.
  kReshape,
  kTranspose,
  kSlice,
  kConcat,
  kGather,
  kExpand,
  kPad,
  // Unary elementwise, f32 (detmath, section 5.15).
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  // Running sum along params.axis (params.exclusive, params.reverse): a sequential chain
  // per line (DETERMINISM.md 4.6a); f32, f64 and every integer dtype.
  kCumSum,
  kNumOps,
};

std::string_view OpName(Op op);

// Kernel families: one source file per family in each backend (kernels/cpu/, kernels/cuda/).
enum class OpFamily { kElementwise, kReduce, kMatMul, kConv, kPool, kNormalization, kDataMovement, kNone };
OpFamily FamilyOf(Op op);

// Resolved parameters. Each op reads only the fields documented for it.
struct OpParams {
  std::vector<int64_t> axes;  // reductions: sorted, unique, in [0, rank)
  bool keepdims = true;       // reductions
  int64_t axis = 0;           // softmax, layernorm, concat, gather, argmax, top_k: in [0, rank)
  int64_t k = 0;              // top_k: in [0, dims[axis]]
  bool largest = true;        // top_k: largest first, else smallest first
  std::vector<int64_t> perm;  // transpose
  // Slice, one entry per input dim: start in [0, dim], step != 0; output dim is given.
  std::vector<int64_t> starts, steps;
  // Conv/pool: 2 entries each (H, W); pads is [top, left, bottom, right].
  std::vector<int64_t> kernel, strides, dilations, pads;
  int64_t group = 1;               // conv
  bool count_include_pad = false;  // avg pool
  float epsilon = 1e-5f;           // layernorm
  // Pad: pad_begin/pad_end per dim (non-negative); constant mode fills with pad_value.
  std::vector<int64_t> pad_begin, pad_end;
  float pad_value = 0.0f;
  DType to = DType::kInvalid;  // cast
  bool exclusive = false;      // cumsum: each output leaves out its own term
  bool reverse = false;        // cumsum: the chain runs from the end of the axis
  // conv2d, set only by compilation (docs/DETERMINISM.md 3.1, zero-stuffed input): empty, or
  // {uh, uw, r0, c0, VH, VW}. The conv then reads the virtual input V [N, C, VH, VW] with
  // V[n, c, r, q] = x[n, c, (r + r0) / uh, (q + c0) / uw] where both divisions are exact and
  // +0.0 elsewhere: x zero-stuffed (uh - 1 rows and uw - 1 columns of zeros after each element)
  // and cropped to rows [r0, r0 + VH) and columns [c0, c0 + VW). Only the CPU backend runs it.
  std::vector<int64_t> input_stuffing;
  // transpose, set only by compilation (docs/DETERMINISM.md 3.1, ConvInteger's im2col): 0, or
  // the number of groups g. The call then reads x [N, C, H, W] (1-byte elements), a row table
  // [R, KH] and a column table [OW, KW] (i32 or i64 gather indices into H and W) and writes
  // [N, g, R, OW, C/g, KH, KW] with out[n, g', y, z, c, i, j] = x[n, g' * C/g + c, rows[y, i],
  // cols[z, j]]: the two gathers, reshape and transpose of the ConvInteger lowering in one
  // pass, with gather's index checks. Only the CPU backend runs it.
  int64_t im2col_groups = 0;
  // reduce_sum, set only by compilation (docs/DETERMINISM.md 3.1, a cast from i8 to i32 read
  // only by the sum): the input is i8 and the output i32, the wrapping i32 sum of the values
  // widened to i32, as the cast and the sum give it. Only the CPU backend runs it.
  bool sum_widens_i8 = false;
  // conv2d of f16 or bf16 values, set only by compilation (docs/DETERMINISM.md 3.1, a conv whose
  // output only a relu reads): the output is that relu's, the relu of section 4.2 of the conv's
  // 16-bit output. Only the CPU backend runs it.
  bool relu_output = false;
};

struct TensorView {
  DType dtype = DType::kInvalid;
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  void* data = nullptr;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  int64_t byte_size() const { return num_elements() * DTypeSize(dtype); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// A fused epilogue (docs/DETERMINISM.md 3.1): f32 elementwise steps applied to each output
// element of a call right after the op computes it, while it is still in cache. Each step is
// the section-4.2 op of the instruction it replaces, on the same operands in the same order,
// so every value rounds exactly as in the unfused program.
struct EpilogueOperand {
  bool is_input = false;  // false: a value of the chain; true: one of Epilogue::inputs
  // A value: 0 is the op's own result, j + 1 the result of step j (j < the reading step).
  // An input: its index in Epilogue::inputs, broadcast (numpy) to the call's output shape.
  int index = 0;
};
struct EpilogueStep {
  Op op = Op::kNumOps;   // a unary or binary f32 op for which EpilogueOpAllowed holds
  int num_operands = 0;  // 1 or 2, the op's arity
  EpilogueOperand operands[2];
};
inline constexpr int kMaxEpilogueSteps = 8;
struct Epilogue {
  const EpilogueStep* steps = nullptr;
  int num_steps = 0;  // 1..kMaxEpilogueSteps
  const TensorView* inputs = nullptr;
  int num_inputs = 0;
};
// The f32 -> f32 elementwise ops an epilogue may hold.
bool EpilogueOpAllowed(Op op, int num_operands);

// A backend's own copy of a call's constant operand, in the layout its kernel reads (the CPU
// GEMM's packed weight panels), made once when a program is loaded (Backend::PrepareConstant)
// and passed back with every call of that instruction. Holds copies of the same values: using
// it changes no bit.
class PreparedOperand {
 public:
  virtual ~PreparedOperand() = default;
  virtual int64_t bytes() const = 0;  // memory it holds
};

struct KernelCall {
  Op op = Op::kNumOps;
  const OpParams* params = nullptr;
  const TensorView* inputs = nullptr;
  int num_inputs = 0;
  TensorView* outputs = nullptr;
  int num_outputs = 0;
  // Null for a plain call. Only backends whose SupportsEpilogue() accepts the call get one.
  const Epilogue* epilogue = nullptr;
  // Null, or what this backend's PrepareConstant returned for this call's constant operand.
  const PreparedOperand* prepared = nullptr;

  const TensorView& in(int i) const { return inputs[i]; }
  TensorView& out(int i = 0) const { return outputs[i]; }
};

}  // namespace consensor::kernels
