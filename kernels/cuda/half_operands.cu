// f16 and bf16 on the CUDA backends (docs/DETERMINISM.md 1.3, 1.4), as the CPU backend runs
// them (kernels/cpu/half_operands.cc) and with the same plan (kernels/checks/half_plan.h): each
// 16-bit operand widened to f32 in device memory, the family's f32 kernel unchanged, each
// 16-bit output rounded once. The conversions are kernels/half.h, integer operations only and
// one source for host and device, so NaN payloads, subnormals and overflow come out as on the
// CPU without trusting the GPU's half-precision instructions (none is used).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/checks/half_plan.h"
#include "kernels/cuda/broadcast_device.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/half.h"

namespace consensor::kernels::CNSR_CUDA_NS {
namespace {

template <bool kBF16>
CNSR_GLOBAL void WidenKernel(const uint16_t* src, float* dst, int64_t n) {
  const int64_t step = DevThreadCount();
  for (int64_t i = DevThreadIndex(); i < n; i += step) {
    dst[i] = kBF16 ? half::BF16ToF32(src[i]) : half::F16ToF32(src[i]);
  }
}

template <bool kBF16>
CNSR_GLOBAL void NarrowKernel(const float* src, uint16_t* dst, int64_t n) {
  const int64_t step = DevThreadCount();
  for (int64_t i = DevThreadIndex(); i < n; i += step) {
    dst[i] = kBF16 ? half::F32ToBF16(src[i]) : half::F32ToF16(src[i]);
  }
}

Status Widen(DType from, const void* src, float* dst, int64_t n, const LaunchContext& ctx) {
  if (n == 0) return OkStatus();
  cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
  (void)stream;  // unused by the emulation
  const dim3 grid(DevBlocks(n, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  auto* kernel = from == DType::kBF16 ? &WidenKernel<true> : &WidenKernel<false>;
  CNSR_LAUNCH(kernel, grid, block, 0, stream, s, dst, n);
  return CheckLaunch("f16/bf16 -> f32");
}

Status Narrow(DType to, const float* src, void* dst, int64_t n, const LaunchContext& ctx) {
  if (n == 0) return OkStatus();
  cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
  (void)stream;
  const dim3 grid(DevBlocks(n, ctx.multiprocessors));
  const dim3 block(kDevBlock);
  uint16_t* d = static_cast<uint16_t*>(dst);
  auto* kernel = to == DType::kBF16 ? &NarrowKernel<true> : &NarrowKernel<false>;
  CNSR_LAUNCH(kernel, grid, block, 0, stream, src, d, n);
  return CheckLaunch("f32 -> f16/bf16");
}

// Each f32 copy starts on a 256-byte boundary, as arena buffers do, so the f32 kernels take
// their aligned (vector) paths.
int64_t Align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// One operand (input or output) of the call as the f32 kernel sees it.
struct Operand {
  const TensorView* original = nullptr;
  bool is_input = false;
  bool half = false;          // widened (input) or rounded back (output)
  int64_t row = 0;            // values per row when sliced by the plan, 0 when whole
  std::vector<int64_t> dims;  // as HalfRowSplit::dims, or the whole view's dims
  float* wide = nullptr;      // the f32 copy (a block of rows when sliced)
};

}  // namespace

Status RunThroughF32(const KernelCall& call, const LaunchContext& ctx, FamilyRunner run) {
  const std::string op_name(OpName(call.op));
  RETURN_IF_ERROR(CheckHalfCall(call, op_name));
  if (ctx.widening == nullptr) return Internal(op_name + ": no device memory for the f32 copies");
  HalfRowSplit s = call.num_inputs <= kMaxHalfSplitInputs ? PlanHalfRowSplit(call) : HalfRowSplit{};
  const int64_t block = s.rows > 0 ? HalfBlockRows(s) : 0;
  // A call that fits in one block runs whole, with its own views and params, as on the CPU.
  if (s.rows > 0 && block >= s.rows) s = HalfRowSplit{};
  const bool split = s.rows > 0;

  const int num_operands = call.num_inputs + call.num_outputs;
  std::vector<Operand> operands(static_cast<size_t>(num_operands));
  std::vector<int64_t> offsets(static_cast<size_t>(num_operands), 0);
  int64_t scratch_bytes = 0;
  for (int i = 0; i < num_operands; ++i) {
    Operand& o = operands[static_cast<size_t>(i)];
    o.is_input = i < call.num_inputs;
    o.original = o.is_input ? &call.in(i) : &call.out(i - call.num_inputs);
    const TensorView& v = *o.original;
    if (v.num_elements() > 0 && v.data == nullptr) {
      return InvalidArgument(op_name + (o.is_input ? ": input has no data" : ": output has no data"));
    }
    o.half = IsHalfDType(v.dtype);
    o.row = split ? s.row_elems[static_cast<size_t>(i)] : 0;
    o.dims = split ? s.dims[static_cast<size_t>(i)] : std::vector<int64_t>(v.dims, v.dims + v.rank);
    if (!o.half) continue;
    offsets[static_cast<size_t>(i)] = scratch_bytes;
    scratch_bytes += Align256((o.row > 0 ? block * o.row : v.num_elements()) * static_cast<int64_t>(sizeof(float)));
  }
  if (scratch_bytes > 0) {
    ASSIGN_OR_RETURN(void* base, ctx.widening->Get(scratch_bytes));
    for (int i = 0; i < num_operands; ++i) {
      Operand& o = operands[static_cast<size_t>(i)];
      if (o.half) o.wide = reinterpret_cast<float*>(static_cast<uint8_t*>(base) + offsets[static_cast<size_t>(i)]);
    }
  }
  // Whole 16-bit inputs (all of them when the call is not split; weights and broadcast
  // operands when it is) are widened once.
  for (const Operand& o : operands) {
    if (o.is_input && o.half && o.row == 0) {
      RETURN_IF_ERROR(Widen(o.original->dtype, o.original->data, o.wide, o.original->num_elements(), ctx));
    }
  }

  OpParams params;
  if (call.params != nullptr) params = *call.params;
  if (call.op == Op::kCast && IsHalfDType(params.to)) params.to = DType::kF32;  // then rounded once below
  if (s.axis_is_one) params.axis = 1;
  std::vector<TensorView> inputs(static_cast<size_t>(call.num_inputs));
  std::vector<TensorView> outputs(static_cast<size_t>(call.num_outputs));
  const int64_t rows = split ? s.rows : 1;
  const int64_t step = split ? block : 1;
  for (int64_t r0 = 0; r0 < rows; r0 += step) {
    const int64_t nb = std::min(step, rows - r0);
    for (int i = 0; i < num_operands; ++i) {
      const Operand& o = operands[static_cast<size_t>(i)];
      const TensorView& v = *o.original;
      const DType dtype = o.half ? DType::kF32 : v.dtype;
      TensorView& view =
          o.is_input ? inputs[static_cast<size_t>(i)] : outputs[static_cast<size_t>(i - call.num_inputs)];
      if (o.row == 0) {
        void* data = o.half ? o.wide : v.data;
        if (split) {
          view = ViewWithDims(dtype, data, o.dims, -1, -1);
        } else {
          view = v;
          view.dtype = dtype;
          view.data = data;
        }
        continue;
      }
      uint8_t* rows_data = static_cast<uint8_t*>(v.data) + r0 * o.row * DTypeSize(v.dtype);
      void* data = rows_data;
      if (o.half) {
        if (o.is_input) RETURN_IF_ERROR(Widen(v.dtype, rows_data, o.wide, nb * o.row, ctx));
        data = o.wide;
      }
      view = s.leading_one ? ViewWithDims(dtype, data, o.dims, 1, nb) : ViewWithDims(dtype, data, o.dims, nb, -1);
    }
    KernelCall f32_call = call;
    f32_call.inputs = inputs.data();
    f32_call.outputs = outputs.data();
    f32_call.prepared = nullptr;
    f32_call.params = split || call.params != nullptr ? &params : nullptr;
    RETURN_IF_ERROR(run(f32_call, ctx));
    for (const Operand& o : operands) {
      if (o.is_input || !o.half || o.row == 0) continue;
      uint8_t* rows_data = static_cast<uint8_t*>(o.original->data) + r0 * o.row * DTypeSize(o.original->dtype);
      RETURN_IF_ERROR(Narrow(o.original->dtype, o.wide, rows_data, nb * o.row, ctx));
    }
  }
  for (const Operand& o : operands) {
    if (o.is_input || !o.half || o.row != 0) continue;
    RETURN_IF_ERROR(Narrow(o.original->dtype, o.wide, o.original->data, o.original->num_elements(), ctx));
  }
  return OkStatus();
}

}  // namespace consensor::kernels::CNSR_CUDA_NS
