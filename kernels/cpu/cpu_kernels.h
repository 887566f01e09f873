// Entry points of the CPU kernel families, one source file per family. Each returns
// InvalidArgument/Unimplemented for a call it cannot handle instead of misbehaving.
// Files named *_avx2.cc are compiled with -mavx2 -mfma and are only called when the
// CPU supports both; the portable code must produce the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/op.h"
#include "kernels/thread_pool.h"

namespace consensor::kernels::cpu {

enum class Isa { kPortable, kAvx2 };

struct CpuContext {
  ThreadPool* pool = nullptr;
  Isa isa = Isa::kPortable;
};

// elementwise.cc: unary, binary (numpy broadcasting), where, cast, logical ops.
Status RunElementwise(const KernelCall& call, const CpuContext& ctx);
// reduce.cc: ReduceSum/Mean/Max/Min/Prod, ArgMax, TopK.
Status RunReduce(const KernelCall& call, const CpuContext& ctx);
// matmul.cc: MatMul (f32), MatMulInt8. call.prepared, if set, must come from PrepareMatMulB on
// the same B.
Status RunMatMul(const KernelCall& call, const CpuContext& ctx);
// matmul.cc: the B operand (the weights) of an f32 matmul call, packed once into the AVX2 GEMM's
// B panels, each of B's own batch matrices, or of an int8 matmul call into the AVX-512 VNNI
// kernel's (where that kernel runs); null for the portable ISA or any other call.
StatusOr<std::unique_ptr<PreparedOperand>> PrepareMatMulB(const KernelCall& call, const CpuContext& ctx);
// conv.cc: Conv2D. call.prepared, if set, must come from PrepareConvWeights on the same weights.
Status RunConv(const KernelCall& call, const CpuContext& ctx);
// conv.cc: an f16 conv2d (DETERMINISM.md 1.3) on the AVX-512 shifted-plane kernel (both strides
// 1, OW == W, not the unpadded 1x1; conv_direct_impl.h), each image's input widened exactly and
// each output rounded once to f16 by the kernel as it stores it. Sets *ran to false, doing
// nothing, for any call that does not take this path (RunThroughF32 then runs it, and refuses it
// if it is malformed); the bits are those of RunThroughF32 with RunConv.
Status RunConvF16Shifted(const KernelCall& call, const CpuContext& ctx, bool* ran);
// conv.cc: the weights of a conv2d call that runs through the AVX2 GEMM, packed once into the
// GEMM's A panels; null for the direct kernel, the portable ISA or a non-f32 call.
StatusOr<std::unique_ptr<PreparedOperand>> PrepareConvWeights(const KernelCall& call, const CpuContext& ctx);
// pool.cc: MaxPool2D, AvgPool2D.
Status RunPool(const KernelCall& call, const CpuContext& ctx);
// pool.cc: max_pool2d of f16 or bf16 values (DETERMINISM.md 1.3, 1.4, 4.5) taken on their bits,
// with the bits of RunThroughF32 with RunPool: no f32 copies. Sets *ran to false, doing nothing,
// for any other call.
Status RunMaxPoolHalf(const KernelCall& call, const CpuContext& ctx, bool* ran);
// normalization.cc: Softmax, LayerNorm.
Status RunNormalization(const KernelCall& call, const CpuContext& ctx);
// data_movement.cc: Identity, Reshape, Transpose, Slice, Concat, Gather, Expand, Pad.
Status RunDataMovement(const KernelCall& call, const CpuContext& ctx);

// elementwise.cc: relu of f16 or bf16 values (DETERMINISM.md 1.3, 1.4) computed on their bits, one
// pass, with the bits of RunThroughF32 with RunElementwise. Sets *ran to false, doing nothing, for
// any other call (an input and output of different shapes or dtypes included: the general path
// refuses those).
Status RunReluHalf(const KernelCall& call, const CpuContext& ctx, bool* ran);
// elementwise.cc: a call's validated epilogue (ValidateEpilogue), prepared once per call with one
// broadcast plan per step. Apply runs the steps over an output range in tiles of kTile
// elements whose intermediate values stay in a stack buffer; the op's own result is read from
// the output and the last step's result written back over it.
struct EwPlan;
// An epilogue operand as the one-pass AVX-512 epilogue reads it: a value of the chain (0: the
// op's result), an input of one element, an input with the output's shape (flat index =
// output index), or a per-channel input (one value per run of `inner` output elements, the
// runs taking data[0..channels) in turn: a bias [C, 1, 1] of an [N, C, H, W] output), or a
// per-row input (the output's innermost `channels` elements, repeated: the Resize lowering's
// weights [W] of an [N, C, H, W] output; output element i reads data[i % channels]).
struct FastEpilogueOperand {
  enum Kind : uint8_t { kValue, kScalar, kFullInput, kChannel, kRow };
  Kind kind = kValue;
  int index = 0;                // kValue
  float scalar = 0.0f;          // kScalar
  const float* data = nullptr;  // kFullInput, kChannel, kRow
  int64_t inner = 0;            // kChannel
  int64_t channels = 0;         // kChannel; kRow: the row's length
};
struct FastEpilogueStep {
  Op op = Op::kNumOps;  // add, sub, mul, div, max, min, relu, neg or abs (FastEpilogueOpSupported)
  int num_operands = 0;
  FastEpilogueOperand operands[2];
};
// elementwise_avx512.cc (call only when gemm::CpuHasAvx512F()): the steps over output elements
// [begin, end) of y, with the bits of running them one by one (elementwise_impl.h).
void RunFastEpilogueAvx512(const FastEpilogueStep* steps, int num_steps, float* y, int64_t begin, int64_t end);
// elementwise_avx512.cc (call only when gemm::CpuHasAvx512F()): out[i] = pow(x[i], y) (y_scalar:
// y[0] for every i, else y[i]) for i < n, f32, with the bits of detmath::pow and PowF.
void PowF32Avx512(const float* x, const float* y, bool y_scalar, float* out, int64_t n);
// elementwise_avx512.cc (call only when gemm::CpuHasAvx512F()): out[i] = sigmoid(x[i]) for
// i < n, f32, with the bits of detmath::sigmoid and SigmoidF. x and out may be the same array.
void SigmoidF32Avx512(const float* x, float* out, int64_t n);
// elementwise.cc: false keeps f32 pow on the scalar detmath loop even where AVX-512F is present
// (for tests comparing the two; the bits are the same).
void SetPowAvx512ForTesting(bool enabled);
// elementwise.cc: false keeps f32 sigmoid (the op and epilogue steps) on the detmath loop even
// where AVX-512F is present (for tests comparing the two; the bits are the same).
void SetSigmoidAvx512ForTesting(bool enabled);
// elementwise_avx512.cc: false runs the HardSwish and HardSigmoid chains step by step in the
// one-pass epilogue instead of in registers (tests and benchmarks; the bits are the same).
void SetRegisterChainsForTesting(bool enabled);
// elementwise.cc: false keeps every epilogue on the per-step path even where AVX-512F is
// present (for tests comparing the two; the bits are the same).
void SetFastEpilogueForTesting(bool enabled);

class EpilogueRunner {
 public:
  static constexpr int64_t kTile = 1024;
  EpilogueRunner(const KernelCall& call, Isa isa);
  ~EpilogueRunner();
  EpilogueRunner(const EpilogueRunner&) = delete;
  EpilogueRunner& operator=(const EpilogueRunner&) = delete;
  // Output elements [begin, end) (flat, row-major) hold the op's result; on return they hold
  // the epilogue's. Runs on the calling thread; disjoint ranges may run concurrently.
  void Apply(int64_t begin, int64_t end) const;

 private:
  std::vector<EwPlan> plans_;
  std::vector<EpilogueStep> steps_;
  std::vector<const void*> inputs_;
  // Non-empty when the whole epilogue runs in one AVX-512 pass (RunFastEpilogueAvx512).
  std::vector<FastEpilogueStep> fast_;
  float* y_ = nullptr;
  void (*chunk_)(const EwPlan&, int64_t, int64_t) = nullptr;
  // Per step: chunk_, or the 16-lane f32 sigmoid where the step is one.
  std::vector<void (*)(const EwPlan&, int64_t, int64_t)> step_chunks_;
};

// True when the running CPU has AVX2 and FMA.
bool CpuHasAvx2Fma();

}  // namespace consensor::kernels::cpu
