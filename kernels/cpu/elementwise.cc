// Elementwise kernels: the portable instantiation of kernels/cpu/elementwise_impl.h, run
// over the layout planned by kernels/checks/elementwise.h. elementwise_avx2.cc compiles the
// same loops with AVX2.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/checks/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_impl.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/quantize.h"
#include "kernels/half.h"

namespace consensor::kernels::cpu {

void EwRunChunkPortable(const EwPlan& plan, int64_t begin, int64_t end) { EwRunChunkImpl(plan, begin, end); }

void ReluHalfBitsPortable(const uint16_t* x, uint16_t* y, int64_t n, uint16_t infinity, uint16_t nan) {
  ReluHalfBitsImpl(x, y, n, infinity, nan);
}

namespace {

// The kernels address an operand as base + flat output position. A tile's intermediate values
// live in a buffer indexed from the tile's first position `begin`, so the base handed to the
// kernel is the buffer's address moved back by `begin` elements; the kernel only forms
// base + pos for pos in [begin, end), inside the buffer.
float* RebaseForTile(float* buffer, int64_t begin) {
  return reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(buffer) - static_cast<uintptr_t>(begin) * sizeof(float));
}

std::atomic<bool> g_fast_epilogue_enabled{true};

bool FastEpilogueOpSupported(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMax:
    case Op::kMin:
    case Op::kRelu:
    case Op::kNeg:
    case Op::kAbs: return true;
    default: return false;
  }
}

// Whether `in` broadcasts to `out` as one value per channel: its dims, aligned to the output's
// from the right, are 1 except for one contiguous range equal to the output's dims there (a
// bias [C, 1, 1] of [N, C, H, W]); *inner is then the number of output elements per value (the
// product of the output's dims after that range). ValidateEpilogue has checked that it
// broadcasts.
bool PerChannel(const TensorView& in, const TensorView& out, int64_t* inner) {
  const int offset = out.rank - in.rank;
  int first = -1, last = -1;
  for (int d = 0; d < in.rank; ++d) {
    if (in.dims[d] == 1) continue;
    if (in.dims[d] != out.dims[offset + d] || (last >= 0 && last != d - 1)) return false;
    if (first < 0) first = d;
    last = d;
  }
  if (first < 0) return false;
  *inner = 1;
  for (int d = offset + last + 1; d < out.rank; ++d) *inner *= out.dims[d];
  return true;
}

// Per-channel operands with shorter runs than this stay on the per-step path: each run is a
// stretch of the one-pass loop with the operand as a scalar.
constexpr int64_t kMinChannelRun = 64;
// Per-row operands with shorter rows than this stay on the per-step path: a tile ends where a
// row ends.
constexpr int64_t kMinRowLength = 16;

// The epilogue as one-pass steps, or empty when some step or input does not fit that pass.
std::vector<FastEpilogueStep> FastEpilogueSteps(const KernelCall& call) {
  const Epilogue& e = *call.epilogue;
  const int64_t out_elements = call.out().num_elements();
  std::vector<FastEpilogueStep> fast;
  for (int s = 0; s < e.num_steps; ++s) {
    const EpilogueStep& step = e.steps[s];
    if (!FastEpilogueOpSupported(step.op)) return {};
    FastEpilogueStep f;
    f.op = step.op;
    f.num_operands = step.num_operands;
    for (int k = 0; k < step.num_operands; ++k) {
      const EpilogueOperand& o = step.operands[k];
      FastEpilogueOperand& fo = f.operands[k];
      if (!o.is_input) {
        fo.kind = FastEpilogueOperand::kValue;
        fo.index = o.index;
        continue;
      }
      const TensorView& in = e.inputs[o.index];
      if (in.dtype != DType::kF32 || in.data == nullptr) return {};
      // ValidateEpilogue checked that it broadcasts to the output: with one element it is a
      // scalar; with as many elements as the output, no dim was broadcast, so it is laid out
      // as the output.
      if (in.num_elements() == 1) {
        fo.kind = FastEpilogueOperand::kScalar;
        fo.scalar = *in.as<const float>();
      } else if (in.num_elements() == out_elements) {
        fo.kind = FastEpilogueOperand::kFullInput;
        fo.data = in.as<const float>();
      } else if (int64_t inner = 0; PerChannel(in, call.out(), &inner) && inner >= kMinChannelRun) {
        fo.kind = FastEpilogueOperand::kChannel;
        fo.data = in.as<const float>();
        fo.inner = inner;
        fo.channels = in.num_elements();
      } else if (inner == 1 && in.num_elements() >= kMinRowLength) {
        // The range ends at the output's last dim: one value per element of a row, rows repeating.
        fo.kind = FastEpilogueOperand::kRow;
        fo.data = in.as<const float>();
        fo.channels = in.num_elements();
      } else {
        return {};
      }
    }
    fast.push_back(f);
  }
  return fast;
}

}  // namespace

void SetFastEpilogueForTesting(bool enabled) { g_fast_epilogue_enabled.store(enabled); }

namespace {

std::atomic<bool> g_pow_avx512_enabled{true};

// f32 pow whose base has the output's shape and whose exponent is one element or has it too
// (PowF32Avx512): EwPlan::in[1] is read as a scalar when the plan says so.
template <bool kScalarExponent>
void PowChunkAvx512(const EwPlan& plan, int64_t begin, int64_t end) {
  const float* x = static_cast<const float*>(plan.in[0]);
  const float* y = static_cast<const float*>(plan.in[1]);
  PowF32Avx512(x + begin, kScalarExponent ? y : y + begin, kScalarExponent, static_cast<float*>(plan.out) + begin,
               end - begin);
}

std::atomic<bool> g_sigmoid_avx512_enabled{true};

// f32 sigmoid, 16 lanes at a time (SigmoidF32Avx512): the input has the output's shape.
void SigmoidChunkAvx512(const EwPlan& plan, int64_t begin, int64_t end) {
  SigmoidF32Avx512(static_cast<const float*>(plan.in[0]) + begin, static_cast<float*>(plan.out) + begin, end - begin);
}

bool UseSigmoidAvx512(Isa isa) {
  return isa == Isa::kAvx2 && g_sigmoid_avx512_enabled.load(std::memory_order_relaxed) && gemm::CpuHasAvx512F();
}

}  // namespace

void SetPowAvx512ForTesting(bool enabled) { g_pow_avx512_enabled.store(enabled); }

void SetSigmoidAvx512ForTesting(bool enabled) { g_sigmoid_avx512_enabled.store(enabled); }

EpilogueRunner::EpilogueRunner(const KernelCall& call, Isa isa) {
  const Epilogue& e = *call.epilogue;
  y_ = call.out().as<float>();
  chunk_ = isa == Isa::kAvx2 ? &EwRunChunkAvx2 : &EwRunChunkPortable;
  steps_.assign(e.steps, e.steps + e.num_steps);
  if (isa == Isa::kAvx2 && g_fast_epilogue_enabled.load(std::memory_order_relaxed) && gemm::CpuHasAvx512F()) {
    fast_ = FastEpilogueSteps(call);
    if (!fast_.empty()) return;
  }
  for (int i = 0; i < e.num_inputs; ++i) inputs_.push_back(e.inputs[i].data);
  for (int s = 0; s < e.num_steps; ++s) {
    TensorView views[2], out;
    const KernelCall step = EpilogueStepCall(call, s, views, &out);
    EwPlan plan;
    plan.op = step.op;
    plan.num_inputs = step.num_inputs;
    plan.in_dtype = DType::kF32;
    plan.out_dtype = DType::kF32;
    plan.layout = ElementwiseLayout(step);
    plans_.push_back(plan);
    // A sigmoid step reads a value of the chain, which has the output's shape.
    step_chunks_.push_back(step.op == Op::kSigmoid && UseSigmoidAvx512(isa) ? &SigmoidChunkAvx512 : chunk_);
  }
}

EpilogueRunner::~EpilogueRunner() = default;

void EpilogueRunner::Apply(int64_t begin, int64_t end) const {
  if (!fast_.empty()) {
    RunFastEpilogueAvx512(fast_.data(), static_cast<int>(fast_.size()), y_, begin, end);
    return;
  }
  alignas(64) float values[kMaxEpilogueSteps][kTile];  // step j's result for the current tile
  const int n = static_cast<int>(steps_.size());
  for (int64_t b = begin; b < end; b += kTile) {
    const int64_t e = std::min(end, b + kTile);
    for (int s = 0; s < n; ++s) {
      EwPlan plan = plans_[s];
      for (int k = 0; k < plan.num_inputs; ++k) {
        const EpilogueOperand& o = steps_[s].operands[k];
        if (o.is_input) {
          plan.in[k] = inputs_[o.index];
        } else if (o.index == 0) {
          plan.in[k] = y_;  // the op's result, still in place
        } else {
          plan.in[k] = RebaseForTile(values[o.index - 1], b);
        }
      }
      // Only the last step writes the output: until then it holds the op's result (value 0).
      plan.out = s + 1 == n ? static_cast<void*>(y_) : RebaseForTile(values[s], b);
      step_chunks_[s](plan, b, e);
    }
  }
}

Status RunReluHalf(const KernelCall& call, const CpuContext& ctx, bool* ran) {
  *ran = false;
  if (call.op != Op::kRelu || call.epilogue != nullptr || call.num_inputs != 1 || call.num_outputs != 1 ||
      !call.inputs || !call.outputs) {
    return OkStatus();
  }
  const TensorView& in = call.in(0);
  const TensorView& out = call.out(0);
  if (!IsHalfDType(in.dtype) || out.dtype != in.dtype || in.rank != out.rank) return OkStatus();
  for (int d = 0; d < in.rank; ++d) {
    if (in.dims[d] != out.dims[d]) return OkStatus();
  }
  const int64_t n = out.num_elements();
  if (n > 0 && (in.data == nullptr || out.data == nullptr)) return OkStatus();
  *ran = true;
  // The compute rule (widen exactly, x > 0 ? x : +0 with NaN canonical, round once) on the bits:
  // a positive value (+inf included) widens to an f32 that rounds back to itself; +0, -0 and
  // every negative value give +0; every NaN gives the canonical NaN of the type.
  const bool f16 = in.dtype == DType::kF16;
  const uint16_t infinity = f16 ? 0x7C00 : 0x7F80;
  const uint16_t nan = f16 ? half::kCanonicalNaNF16 : half::kCanonicalNaNBF16;
  const uint16_t* x = static_cast<const uint16_t*>(in.data);
  uint16_t* y = static_cast<uint16_t*>(out.data);
  auto bits = ctx.isa == Isa::kAvx2 ? &ReluHalfBitsAvx2 : &ReluHalfBitsPortable;
  auto run = [&](int64_t b, int64_t e) { bits(x + b, y + b, e - b, infinity, nan); };
  if (ctx.pool == nullptr) {
    run(0, n);
  } else {
    ctx.pool->ParallelForWork(n, 4, run);
  }
  return OkStatus();
}

Status RunElementwise(const KernelCall& call, const CpuContext& ctx) {
  // A cast with three inputs is the one-pass quantize of a fused list (quantize.h).
  if (call.op == Op::kCast && call.num_inputs == 3) return RunQuantize(call, ctx);
  RETURN_IF_ERROR(ValidateElementwise(call));
  RETURN_IF_ERROR(ValidateEpilogue(call));
  const TensorView& out = call.out();
  const int64_t n = out.num_elements();
  if (n == 0) return OkStatus();

  EwPlan plan;
  plan.op = call.op;
  plan.num_inputs = call.num_inputs;
  plan.in_dtype = call.op == Op::kWhere ? call.in(1).dtype : call.in(0).dtype;
  plan.out_dtype = out.dtype;
  plan.out = out.data;
  plan.layout = ElementwiseLayout(call);
  for (int i = 0; i < call.num_inputs; ++i) plan.in[i] = call.in(i).data;

  void (*chunk)(const EwPlan&, int64_t, int64_t) = ctx.isa == Isa::kAvx2 ? &EwRunChunkAvx2 : &EwRunChunkPortable;
  // f32 pow, 16 lanes at a time (elementwise_avx512.cc), the same operations as detmath::pow. An
  // operand that broadcasts to the output with as many elements has its shape (up to leading 1s),
  // so element i of it is output element i.
  if (ctx.isa == Isa::kAvx2 && call.op == Op::kPow && call.num_inputs == 2 && out.dtype == DType::kF32 &&
      call.in(0).dtype == DType::kF32 && call.in(1).dtype == DType::kF32 && call.in(0).num_elements() == n &&
      g_pow_avx512_enabled.load(std::memory_order_relaxed) && gemm::CpuHasAvx512F()) {
    if (call.in(1).num_elements() == 1) {
      chunk = &PowChunkAvx512<true>;
    } else if (call.in(1).num_elements() == n) {
      chunk = &PowChunkAvx512<false>;
    }
  }
  if (call.op == Op::kSigmoid && call.num_inputs == 1 && out.dtype == DType::kF32 && call.in(0).dtype == DType::kF32 &&
      call.in(0).num_elements() == n && UseSigmoidAvx512(ctx.isa)) {
    chunk = &SigmoidChunkAvx512;
  }
  // Work per element: the bytes it reads and writes, each epilogue step counted as one more
  // f32 read and write.
  int64_t element_work = DTypeSize(out.dtype);
  for (int i = 0; i < call.num_inputs; ++i) element_work += DTypeSize(call.in(i).dtype);
  if (call.epilogue != nullptr) element_work += 8 * call.epilogue->num_steps;
  if (call.epilogue != nullptr) {
    // The op, then its epilogue, one tile at a time while the tile is in cache.
    const EpilogueRunner epilogue(call, ctx.isa);
    auto fused = [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; t += EpilogueRunner::kTile) {
        const int64_t te = std::min(e, t + EpilogueRunner::kTile);
        chunk(plan, t, te);
        epilogue.Apply(t, te);
      }
    };
    if (ctx.pool == nullptr) {
      fused(0, n);
    } else {
      ctx.pool->ParallelForWork(n, element_work, fused);
    }
    return OkStatus();
  }
  if (ctx.pool == nullptr) {
    chunk(plan, 0, n);
  } else {
    ctx.pool->ParallelForWork(n, element_work, [&](int64_t b, int64_t e) { chunk(plan, b, e); });
  }
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
