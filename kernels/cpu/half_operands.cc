#include "kernels/cpu/half_operands.h"

#include <functional>
#include <string>
#include <vector>

#include "kernels/half.h"

namespace consensor::kernels::cpu {

namespace {

constexpr int64_t kConvertGrain = 1 << 15;

bool TouchesHalf(const KernelCall& call) {
  for (int i = 0; i < call.num_inputs; ++i) {
    if (IsHalfDType(call.in(i).dtype)) return true;
  }
  for (int i = 0; i < call.num_outputs; ++i) {
    if (IsHalfDType(call.out(i).dtype)) return true;
  }
  return call.op == Op::kCast && call.params != nullptr && IsHalfDType(call.params->to);
}

void ForRanges(const CpuContext& ctx, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (ctx.pool == nullptr || n < 2 * kConvertGrain) {
    fn(0, n);
    return;
  }
  ctx.pool->ParallelFor(n, kConvertGrain, fn);
}

// Widening would hide a dtype mismatch from the f32 kernel's own checks, so the float
// operands are checked here: a 16-bit float operand makes every float operand (and, except
// for cast, every float output) that same dtype.
Status CheckHalfOperands(const KernelCall& call, const std::string& op_name) {
  DType half = DType::kInvalid;
  for (int i = 0; i < call.num_inputs && half == DType::kInvalid; ++i) {
    if (IsHalfDType(call.in(i).dtype)) half = call.in(i).dtype;
  }
  auto is_float = [](DType t) { return IsFloatDType(t) || IsHalfDType(t); };
  if (half != DType::kInvalid) {
    for (int i = 0; i < call.num_inputs; ++i) {
      if (is_float(call.in(i).dtype) && call.in(i).dtype != half) {
        return InvalidArgument(op_name + ": input dtypes differ (" + std::string(DTypeName(half)) + " vs " +
                               std::string(DTypeName(call.in(i).dtype)) + ")");
      }
    }
    if (call.op != Op::kCast) {
      for (int i = 0; i < call.num_outputs; ++i) {
        if (is_float(call.out(i).dtype) && call.out(i).dtype != half) {
          return InvalidArgument(op_name + ": output dtype " + std::string(DTypeName(call.out(i).dtype)) +
                                 " differs from input dtype " + std::string(DTypeName(half)));
        }
      }
    }
  }
  if (half == DType::kInvalid && call.op != Op::kCast) {
    for (int i = 0; i < call.num_outputs; ++i) {
      if (IsHalfDType(call.out(i).dtype)) {
        return InvalidArgument(op_name + ": a " + std::string(DTypeName(call.out(i).dtype)) +
                               " output needs inputs of that dtype");
      }
    }
  }
  if (call.op == Op::kCast &&
      (call.params == nullptr || call.num_outputs != 1 || call.out().dtype != call.params->to)) {
    return InvalidArgument(op_name + ": the output dtype must be the cast's target dtype");
  }
  return OkStatus();
}

}  // namespace

bool ComputesThroughF32(const KernelCall& call) {
  if (!TouchesHalf(call)) return false;
  if (FamilyOf(call.op) == OpFamily::kDataMovement) return false;
  if (call.op == Op::kIdentity || call.op == Op::kWhere) return false;
  if (call.op == Op::kCast && call.num_inputs == 1 && call.num_outputs == 1 && call.in(0).dtype == call.out().dtype) {
    return false;  // a cast to the same dtype copies bits
  }
  return true;
}

void WidenToF32(DType from, const void* src, float* dst, int64_t n, const CpuContext& ctx) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (from == DType::kF16) {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = half::F16ToF32(s[i]);
    });
  } else {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = half::BF16ToF32(s[i]);
    });
  }
}

void NarrowFromF32(DType to, const float* src, void* dst, int64_t n, const CpuContext& ctx) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (to == DType::kF16) {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = half::F32ToF16(src[i]);
    });
  } else {
    ForRanges(ctx, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = half::F32ToBF16(src[i]);
    });
  }
}

Status RunThroughF32(const KernelCall& call, const CpuContext& ctx, FamilyRunner run) {
  const std::string op_name(OpName(call.op));
  if (call.epilogue != nullptr) return InvalidArgument(op_name + ": f16/bf16 calls take no fused epilogue");
  if (call.num_inputs < 0 || call.num_outputs < 1 || (call.num_inputs > 0 && call.inputs == nullptr) ||
      call.outputs == nullptr) {
    return InvalidArgument(op_name + ": malformed call");
  }
  RETURN_IF_ERROR(CheckHalfOperands(call, op_name));
  std::vector<TensorView> inputs(call.inputs, call.inputs + call.num_inputs);
  std::vector<TensorView> outputs(call.outputs, call.outputs + call.num_outputs);
  std::vector<std::vector<float>> wide(inputs.size() + outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorView& v = inputs[i];
    if (!IsHalfDType(v.dtype)) continue;
    const int64_t n = v.num_elements();
    if (n > 0 && v.data == nullptr) return InvalidArgument(op_name + ": input has no data");
    wide[i].resize(static_cast<size_t>(n));
    WidenToF32(v.dtype, v.data, wide[i].data(), n, ctx);
    v.dtype = DType::kF32;
    v.data = n > 0 ? wide[i].data() : nullptr;
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    TensorView& v = outputs[j];
    if (!IsHalfDType(v.dtype)) continue;
    const int64_t n = v.num_elements();
    if (n > 0 && v.data == nullptr) return InvalidArgument(op_name + ": output has no data");
    std::vector<float>& buffer = wide[inputs.size() + j];
    buffer.resize(static_cast<size_t>(n));
    v.dtype = DType::kF32;
    v.data = n > 0 ? buffer.data() : nullptr;
  }
  OpParams params;
  KernelCall f32_call = call;
  f32_call.inputs = inputs.data();
  f32_call.outputs = outputs.data();
  f32_call.prepared = nullptr;  // a backend's prepared copy was made for the 16-bit operand, if any
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

}  // namespace consensor::kernels::cpu
