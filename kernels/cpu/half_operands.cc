#include "kernels/cpu/half_operands.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/checks/half_plan.h"
#include "kernels/cpu/scratch_cache.h"
#include "kernels/half.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int64_t kConvertGrain = 1 << 15;

void ForRanges(const CpuContext& ctx, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (ctx.pool == nullptr || n < 2 * kConvertGrain) {
    fn(0, n);
    return;
  }
  ctx.pool->ParallelFor(n, kConvertGrain, fn);
}

}  // namespace

bool CpuHasF16c() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    // F16C is CPUID leaf 1, ECX bit 29: asked directly, because clang's
    // __builtin_cpu_supports does not know "f16c" (the libFuzzer build is clang's).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    return f16c && __builtin_cpu_supports("avx2");
  }();
  return has;
#else
  return false;
#endif
}

void WidenToF32(DType from, const void* src, float* dst, int64_t n, const CpuContext& ctx) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  const bool simd = ctx.isa == Isa::kAvx2 && CpuHasF16c();
  if (from == DType::kF16) {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      if (simd) return F16ToF32Avx2(s + b, dst + b, e - b);
      for (int64_t i = b; i < e; ++i) dst[i] = half::F16ToF32(s[i]);
    });
  } else {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      if (simd) return BF16ToF32Avx2(s + b, dst + b, e - b);
      for (int64_t i = b; i < e; ++i) dst[i] = half::BF16ToF32(s[i]);
    });
  }
}

void NarrowFromF32(DType to, const float* src, void* dst, int64_t n, const CpuContext& ctx) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const bool simd = ctx.isa == Isa::kAvx2 && CpuHasF16c();
  if (to == DType::kF16) {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      if (simd) return F32ToF16Avx2(src + b, d + b, e - b);
      for (int64_t i = b; i < e; ++i) d[i] = half::F32ToF16(src[i]);
    });
  } else {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      if (simd) return F32ToBF16Avx2(src + b, d + b, e - b);
      for (int64_t i = b; i < e; ++i) d[i] = half::F32ToBF16(src[i]);
    });
  }
}

KeptF32Copy::~KeptF32Copy() { scratch::Give(block_, size_, scratch::Kind::kWidened); }

float* KeptF32Copy::Reserve(int64_t n) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(std::max<int64_t>(n, 1));
  if (block_ == nullptr || size_ < bytes) {
    scratch::Give(block_, size_, scratch::Kind::kWidened);
    block_ = scratch::Take(bytes, &size_, scratch::Kind::kWidened);
    if (block_ == nullptr) size_ = 0;
  }
  return static_cast<float*>(block_);
}

namespace {

// conv2d's 16-bit weights widened and packed once when the program was loaded
// (PrepareConvWeights): its f32 form reads the packed panels, so they are not widened per call;
// the f32 view of the weights then has no data.
bool WeightsPreparedWide(const KernelCall& call, size_t input) {
  return input == 1 && call.op == Op::kConv2D && call.prepared != nullptr && call.num_inputs >= 2 &&
         IsHalfDType(call.in(1).dtype);
}

// What the f32 form of a call may keep of the backend's prepared operand.
const PreparedOperand* PreparedForF32(const KernelCall& call) {
  return WeightsPreparedWide(call, 1) ? call.prepared : nullptr;
}

Status RunWhole(const KernelCall& call, const CpuContext& ctx, FamilyRunner run, const std::string& op_name) {
  std::vector<TensorView> inputs(call.inputs, call.inputs + call.num_inputs);
  std::vector<TensorView> outputs(call.outputs, call.outputs + call.num_outputs);
  std::unique_ptr<KeptF32Copy[]> wide(new KeptF32Copy[inputs.size() + outputs.size()]);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorView& v = inputs[i];
    if (!IsHalfDType(v.dtype)) continue;
    const int64_t n = v.num_elements();
    if (n > 0 && v.data == nullptr) return InvalidArgument(op_name + ": input has no data");
    if (WeightsPreparedWide(call, i)) {
      v.dtype = DType::kF32;
      v.data = nullptr;
      continue;
    }
    float* copy = wide[i].Reserve(n);
    if (copy == nullptr) return ResourceExhausted(op_name + ": cannot allocate the f32 copy of an input");
    WidenToF32(v.dtype, v.data, copy, n, ctx);
    v.dtype = DType::kF32;
    v.data = n > 0 ? copy : nullptr;
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    TensorView& v = outputs[j];
    if (!IsHalfDType(v.dtype)) continue;
    const int64_t n = v.num_elements();
    if (n > 0 && v.data == nullptr) return InvalidArgument(op_name + ": output has no data");
    float* copy = wide[inputs.size() + j].Reserve(n);
    if (copy == nullptr) return ResourceExhausted(op_name + ": cannot allocate the f32 copy of an output");
    v.dtype = DType::kF32;
    v.data = n > 0 ? copy : nullptr;
  }
  OpParams params;
  KernelCall f32_call = call;
  f32_call.inputs = inputs.data();
  f32_call.outputs = outputs.data();
  f32_call.prepared = PreparedForF32(call);  // other prepared copies were made for 16-bit operands
  if (call.op == Op::kCast && call.params != nullptr && IsHalfDType(call.params->to)) {
    params = *call.params;
    params.to = DType::kF32;  // cast to f32, then round once to the 16-bit type below
    f32_call.params = &params;
  }
  RETURN_IF_ERROR(run(f32_call, ctx));
  for (size_t j = 0; j < outputs.size(); ++j) {
    const TensorView& original = call.out(static_cast<int>(j));
    if (!IsHalfDType(original.dtype)) continue;
    NarrowFromF32(original.dtype, wide[inputs.size() + j].data(), original.data, original.num_elements(), ctx);
  }
  return OkStatus();
}

// Rows [r0, r1) of a split call: sliced 16-bit operands widened into `scratch`, the others read
// in place, then the sliced 16-bit output rounded back from its f32 block.
Status RunRows(const KernelCall& call, const HalfRowSplit& s, const KeptF32Copy* whole, const OpParams* params,
               int64_t r0, int64_t r1, const CpuContext& ctx, FamilyRunner run, KeptF32Copy* scratch) {
  const int64_t nb = r1 - r0;
  const size_t num_in = static_cast<size_t>(call.num_inputs);
  TensorView inputs[kMaxHalfSplitInputs];
  TensorView outputs[1];
  for (size_t i = 0; i < num_in + 1; ++i) {
    const TensorView& v = i < num_in ? call.in(static_cast<int>(i)) : call.out(0);
    const bool half = IsHalfDType(v.dtype);
    const DType dtype = half ? DType::kF32 : v.dtype;
    TensorView& view = i < num_in ? inputs[i] : outputs[0];
    const int64_t row = s.row_elems[i];
    if (row == 0) {  // whole: widened once by the caller, or read in place, or prepared wide
      void* data = half ? whole[i].data() : v.data;
      if (half && WeightsPreparedWide(call, i)) data = nullptr;
      view = ViewWithDims(dtype, data, s.dims[i], -1, -1);
      continue;
    }
    uint8_t* base = static_cast<uint8_t*>(v.data) + r0 * row * DTypeSize(v.dtype);
    void* data = base;
    if (half) {
      float* copy = scratch[i].Reserve(nb * row);
      if (copy == nullptr) return ResourceExhausted(std::string(OpName(call.op)) + ": cannot allocate an f32 block");
      if (i < num_in) WidenToF32(v.dtype, base, copy, nb * row, ctx);
      data = copy;
    }
    view = s.leading_one ? ViewWithDims(dtype, data, s.dims[i], 1, nb) : ViewWithDims(dtype, data, s.dims[i], nb, -1);
  }
  KernelCall f32_call = call;
  f32_call.inputs = inputs;
  f32_call.outputs = outputs;
  f32_call.prepared = PreparedForF32(call);
  f32_call.params = params;
  RETURN_IF_ERROR(run(f32_call, ctx));
  const TensorView& y = call.out(0);
  if (IsHalfDType(y.dtype)) {
    const int64_t row = s.row_elems[num_in];
    NarrowFromF32(y.dtype, scratch[num_in].data(), static_cast<uint8_t*>(y.data) + r0 * row * 2, nb * row, ctx);
  }
  return OkStatus();
}

}  // namespace

Status RunThroughF32(const KernelCall& call, const CpuContext& ctx, FamilyRunner run) {
  const std::string op_name(OpName(call.op));
  RETURN_IF_ERROR(CheckHalfCall(call, op_name));
  const HalfRowSplit s = call.num_inputs <= kMaxHalfSplitInputs ? PlanHalfRowSplit(call) : HalfRowSplit{};
  const int64_t block = s.rows > 0 ? HalfBlockRows(s) : 0;
  if (s.rows == 0 || block >= s.rows) return RunWhole(call, ctx, run, op_name);
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).num_elements() > 0 && call.in(i).data == nullptr)
      return InvalidArgument(op_name + ": input has no data");
  }
  if (call.out(0).data == nullptr) return InvalidArgument(op_name + ": output has no data");
  // Whole 16-bit inputs (weights, broadcast operands) are widened once for all blocks.
  const size_t operands = static_cast<size_t>(call.num_inputs) + 1;
  std::unique_ptr<KeptF32Copy[]> whole(new KeptF32Copy[operands]);
  for (int i = 0; i < call.num_inputs; ++i) {
    const TensorView& v = call.in(i);
    if (s.row_elems[static_cast<size_t>(i)] != 0 || !IsHalfDType(v.dtype)) continue;
    if (WeightsPreparedWide(call, static_cast<size_t>(i))) continue;
    float* copy = whole[static_cast<size_t>(i)].Reserve(v.num_elements());
    if (copy == nullptr) return ResourceExhausted(op_name + ": cannot allocate the f32 copy of an input");
    WidenToF32(v.dtype, v.data, copy, v.num_elements(), ctx);
  }
  OpParams params;
  if (call.params != nullptr) params = *call.params;
  if (call.op == Op::kCast && IsHalfDType(params.to)) params.to = DType::kF32;
  if (s.axis_is_one) params.axis = 1;
  const int64_t blocks = (s.rows + block - 1) / block;
  // The first block runs alone, so a call the kernel refuses fails the same way every time.
  std::unique_ptr<KeptF32Copy[]> scratch(new KeptF32Copy[operands]);
  RETURN_IF_ERROR(RunRows(call, s, whole.get(), &params, 0, block, ctx, run, scratch.get()));
  if (FamilyOf(call.op) == OpFamily::kElementwise && ctx.pool != nullptr && ctx.pool->num_threads() > 1) {
    // Elementwise kernels split a block no finer than their own grain: the blocks go to the
    // threads instead, each with its own scratch (one block per thread at a time).
    std::mutex mu;
    Status first_error = OkStatus();
    int64_t error_block = blocks;
    const CpuContext serial{nullptr, ctx.isa};
    ctx.pool->ParallelFor(blocks - 1, 1, [&](int64_t b, int64_t e) {
      std::unique_ptr<KeptF32Copy[]> local(new KeptF32Copy[operands]);
      for (int64_t blk = b + 1; blk < e + 1; ++blk) {
        Status st = RunRows(call, s, whole.get(), &params, blk * block, std::min(s.rows, (blk + 1) * block), serial,
                            run, local.get());
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (blk < error_block) {
            error_block = blk;
            first_error = st;
          }
          return;
        }
      }
    });
    return first_error;
  }
  for (int64_t blk = 1; blk < blocks; ++blk) {
    RETURN_IF_ERROR(RunRows(call, s, whole.get(), &params, blk * block, std::min(s.rows, (blk + 1) * block), ctx, run,
                            scratch.get()));
  }
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
