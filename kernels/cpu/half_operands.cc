#include "kernels/cpu/half_operands.h"

#include <algorithm>
#include <functional>
#include <mutex>
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

bool CpuHasF16c() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
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

namespace {

// Output elements per block: the f32 copy of one sliced operand's block is at most this many
// values (64 KiB), unless a single row is longer.
constexpr int64_t kBlockElems = 1 << 14;

// The most inputs a split call has (layer_norm and conv2d have 3, where is not split).
constexpr int kMaxSplitInputs = 4;

bool IsSplitFamily(Op op) {
  const OpFamily f = FamilyOf(op);
  return f == OpFamily::kElementwise || f == OpFamily::kMatMul || f == OpFamily::kConv || f == OpFamily::kPool ||
         f == OpFamily::kNormalization;
}

// How a call splits into independent rows: the output's leading axes (and each sliced operand's
// matching axes) flattened into `rows`; every output element depends only on its own row of each
// sliced operand and on the whole operands, so each block of rows is a smaller call of the same
// op and computes the same bits (the op's f32 rule is per output element, DETERMINISM.md 4).
struct RowSplit {
  int64_t rows = 0;  // 0: the call is not split
  // Per operand (inputs, then outputs): values per row when sliced, 0 when passed whole.
  std::vector<int64_t> row_elems;
  // Per operand: the view's dims after the row axis (sliced), or the whole view's dims.
  std::vector<std::vector<int64_t>> dims;
  bool leading_one = false;  // pools: a block is viewed as [1, rows, ...] (one image of nb planes)
  bool axis_is_one = false;  // softmax, layer_norm: the block's axis is 1 (the row axis is 0)
};

std::vector<int64_t> DimsOf(const TensorView& v, int from = 0) {
  return std::vector<int64_t>(v.dims + std::min(std::max(from, 0), v.rank), v.dims + v.rank);
}

int64_t Product(const int64_t* d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= d[i];
  return p;
}

// A split of the first `k` axes of every operand whose leading dims are the output's (sliced),
// other operands whole. Only the elementwise plan passes other operands whose leading dims are 1.
RowSplit LeadingAxes(const KernelCall& call, int k, const std::vector<bool>& sliced_inputs) {
  RowSplit s;
  const TensorView& y = call.out(0);
  s.rows = Product(y.dims, k);
  for (int i = 0; i < call.num_inputs; ++i) {
    const TensorView& v = call.in(i);
    if (sliced_inputs[static_cast<size_t>(i)]) {
      s.row_elems.push_back(Product(v.dims + k, v.rank - k));
      s.dims.push_back(DimsOf(v, k));
    } else {
      s.row_elems.push_back(0);
      s.dims.push_back(DimsOf(v));
    }
  }
  for (int j = 0; j < call.num_outputs; ++j) {
    const TensorView& v = call.out(j);
    s.row_elems.push_back(Product(v.dims + k, v.rank - k));
    s.dims.push_back(DimsOf(v, k));
  }
  return s;
}

RowSplit PlanSplit(const KernelCall& call) {
  RowSplit none;
  if (!IsSplitFamily(call.op) || call.num_outputs != 1 || call.num_inputs < 1) return none;
  const TensorView& y = call.out(0);
  if (y.rank < 1 || y.rank > kMaxRank || y.num_elements() <= 0) return none;
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).rank < 0 || call.in(i).rank > kMaxRank) return none;
  }
  const int r = y.rank;
  switch (FamilyOf(call.op)) {
    case OpFamily::kElementwise: {
      for (int i = 0; i < call.num_inputs; ++i) {
        if (call.in(i).rank > r) return none;  // not a valid broadcast: the kernel says so, whole
      }
      // The most leading axes k over which every input either has the output's dims (sliced)
      // or only 1s / no axis (broadcast: passed whole, its leading 1s dropped).
      for (int k = r; k >= 1; --k) {
        std::vector<bool> sliced;
        std::vector<std::vector<int64_t>> whole_dims;
        bool ok = true;
        for (int i = 0; i < call.num_inputs && ok; ++i) {
          const TensorView& v = call.in(i);
          const int offset = r - v.rank;
          bool full = offset == 0;
          bool ones = true;
          for (int a = 0; a < k; ++a) {
            const int ia = a - offset;
            full = full && ia >= 0 && v.dims[ia] == y.dims[a];
            ones = ones && (ia < 0 || v.dims[ia] == 1);
          }
          ok = full || ones;
          sliced.push_back(full);
          whole_dims.push_back(DimsOf(v, k - offset));
        }
        if (!ok) continue;
        RowSplit s = LeadingAxes(call, k, sliced);
        for (int i = 0; i < call.num_inputs; ++i) {
          if (!sliced[static_cast<size_t>(i)]) s.dims[static_cast<size_t>(i)] = whole_dims[static_cast<size_t>(i)];
        }
        return s;
      }
      return none;
    }
    case OpFamily::kMatMul: {
      // [..., M, K] x [K, N]: every row of a (batch dims and M flattened) gives one row of y.
      if (call.op != Op::kMatMul || call.num_inputs != 2) return none;
      const TensorView& a = call.in(0);
      const TensorView& b = call.in(1);
      if (a.rank < 2 || b.rank != 2 || r != a.rank) return none;
      for (int i = 0; i < r - 1; ++i) {
        if (a.dims[i] != y.dims[i]) return none;
      }
      RowSplit s = LeadingAxes(call, r - 1, {true, false});
      return s;
    }
    case OpFamily::kConv: {
      // x [N, C, H, W] and y [N, F, Ho, Wo]: one row per image; weights and bias whole.
      if (r != 4 || call.in(0).rank != 4 || call.in(0).dims[0] != y.dims[0]) return none;
      std::vector<bool> sliced(static_cast<size_t>(call.num_inputs), false);
      sliced[0] = true;
      return LeadingAxes(call, 1, sliced);
    }
    case OpFamily::kPool: {
      // One row per (image, channel) plane; a block of planes is one image of that many channels.
      if (call.num_inputs != 1 || r != 4 || call.in(0).rank != 4 || call.in(0).dims[0] != y.dims[0] ||
          call.in(0).dims[1] != y.dims[1]) {
        return none;
      }
      RowSplit s = LeadingAxes(call, 2, {true});
      s.leading_one = true;
      return s;
    }
    case OpFamily::kNormalization: {
      // The axes before params.axis are independent rows; scale and bias are whole.
      if (call.params == nullptr) return none;
      const int64_t axis = call.params->axis;
      if (axis < 1 || axis >= r || call.in(0).rank != r) return none;
      for (int i = 0; i < r; ++i) {
        if (call.in(0).dims[i] != y.dims[i]) return none;
      }
      std::vector<bool> sliced(static_cast<size_t>(call.num_inputs), false);
      sliced[0] = true;
      RowSplit s = LeadingAxes(call, static_cast<int>(axis), sliced);
      s.axis_is_one = true;
      return s;
    }
    default: return none;
  }
}

int64_t BlockRows(const RowSplit& s) {
  int64_t widest = 1;
  for (int64_t e : s.row_elems) widest = std::max(widest, e);
  return std::max<int64_t>(1, std::min(s.rows, kBlockElems / widest));
}

int64_t F32Bytes(int64_t elements) { return elements * static_cast<int64_t>(sizeof(float)); }

Status RunWhole(const KernelCall& call, const CpuContext& ctx, FamilyRunner run, const std::string& op_name) {
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

TensorView ViewWithDims(DType dtype, void* data, const std::vector<int64_t>& dims, int64_t lead0, int64_t lead1) {
  TensorView v;
  v.dtype = dtype;
  v.data = data;
  if (lead0 >= 0) v.dims[v.rank++] = lead0;
  if (lead1 >= 0) v.dims[v.rank++] = lead1;
  for (int64_t d : dims) v.dims[v.rank++] = d;
  return v;
}

// Rows [r0, r1) of a split call: sliced 16-bit operands widened into `scratch`, the others read
// in place, then the sliced 16-bit output rounded back from its f32 block.
Status RunRows(const KernelCall& call, const RowSplit& s, const std::vector<std::vector<float>>& whole,
               const OpParams* params, int64_t r0, int64_t r1, const CpuContext& ctx, FamilyRunner run,
               std::vector<std::vector<float>>& scratch) {
  const int64_t nb = r1 - r0;
  const size_t num_in = static_cast<size_t>(call.num_inputs);
  TensorView inputs[kMaxSplitInputs];
  TensorView outputs[1];
  for (size_t i = 0; i < num_in + 1; ++i) {
    const TensorView& v = i < num_in ? call.in(static_cast<int>(i)) : call.out(0);
    const bool half = IsHalfDType(v.dtype);
    const DType dtype = half ? DType::kF32 : v.dtype;
    TensorView& view = i < num_in ? inputs[i] : outputs[0];
    const int64_t row = s.row_elems[i];
    if (row == 0) {  // whole: widened once by the caller, or read in place
      view = ViewWithDims(dtype, half ? const_cast<float*>(whole[i].data()) : v.data, s.dims[i], -1, -1);
      continue;
    }
    uint8_t* base = static_cast<uint8_t*>(v.data) + r0 * row * DTypeSize(v.dtype);
    void* data = base;
    if (half) {
      scratch[i].resize(static_cast<size_t>(nb * row));
      if (i < num_in) WidenToF32(v.dtype, base, scratch[i].data(), nb * row, ctx);
      data = scratch[i].data();
    }
    view = s.leading_one ? ViewWithDims(dtype, data, s.dims[i], 1, nb) : ViewWithDims(dtype, data, s.dims[i], nb, -1);
  }
  KernelCall f32_call = call;
  f32_call.inputs = inputs;
  f32_call.outputs = outputs;
  f32_call.prepared = nullptr;
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

int64_t HalfWideningBytes(const KernelCall& call) {
  if (!ComputesThroughF32(call)) return 0;
  const RowSplit s = PlanSplit(call);
  int64_t bytes = 0;
  const int64_t nb = s.rows > 0 ? BlockRows(s) : 0;
  for (int i = 0; i < call.num_inputs + call.num_outputs; ++i) {
    const TensorView& v = i < call.num_inputs ? call.in(i) : call.out(i - call.num_inputs);
    if (!IsHalfDType(v.dtype)) continue;
    const int64_t row = s.rows > 0 ? s.row_elems[static_cast<size_t>(i)] : 0;
    bytes += F32Bytes(row > 0 ? nb * row : v.num_elements());
  }
  return bytes;
}

Status RunThroughF32(const KernelCall& call, const CpuContext& ctx, FamilyRunner run) {
  const std::string op_name(OpName(call.op));
  if (call.epilogue != nullptr) return InvalidArgument(op_name + ": f16/bf16 calls take no fused epilogue");
  if (call.num_inputs < 0 || call.num_outputs < 1 || (call.num_inputs > 0 && call.inputs == nullptr) ||
      call.outputs == nullptr) {
    return InvalidArgument(op_name + ": malformed call");
  }
  RETURN_IF_ERROR(CheckHalfOperands(call, op_name));
  const RowSplit s = call.num_inputs <= kMaxSplitInputs ? PlanSplit(call) : RowSplit{};
  const int64_t block = s.rows > 0 ? BlockRows(s) : 0;
  if (s.rows == 0 || block >= s.rows) return RunWhole(call, ctx, run, op_name);
  for (int i = 0; i < call.num_inputs; ++i) {
    if (call.in(i).num_elements() > 0 && call.in(i).data == nullptr)
      return InvalidArgument(op_name + ": input has no data");
  }
  if (call.out(0).data == nullptr) return InvalidArgument(op_name + ": output has no data");
  // Whole 16-bit inputs (weights, broadcast operands) are widened once for all blocks.
  std::vector<std::vector<float>> whole(static_cast<size_t>(call.num_inputs) + 1);
  for (int i = 0; i < call.num_inputs; ++i) {
    const TensorView& v = call.in(i);
    if (s.row_elems[static_cast<size_t>(i)] != 0 || !IsHalfDType(v.dtype)) continue;
    whole[static_cast<size_t>(i)].resize(static_cast<size_t>(v.num_elements()));
    WidenToF32(v.dtype, v.data, whole[static_cast<size_t>(i)].data(), v.num_elements(), ctx);
  }
  OpParams params;
  if (call.params != nullptr) params = *call.params;
  if (call.op == Op::kCast && IsHalfDType(params.to)) params.to = DType::kF32;
  if (s.axis_is_one) params.axis = 1;
  const int64_t blocks = (s.rows + block - 1) / block;
  const size_t operands = static_cast<size_t>(call.num_inputs) + 1;
  // The first block runs alone, so a call the kernel refuses fails the same way every time.
  std::vector<std::vector<float>> scratch(operands);
  RETURN_IF_ERROR(RunRows(call, s, whole, &params, 0, block, ctx, run, scratch));
  if (FamilyOf(call.op) == OpFamily::kElementwise && ctx.pool != nullptr && ctx.pool->num_threads() > 1) {
    // Elementwise kernels split a block no finer than their own grain: the blocks go to the
    // threads instead, each with its own scratch (one block per thread at a time).
    std::mutex mu;
    Status first_error = OkStatus();
    int64_t error_block = blocks;
    const CpuContext serial{nullptr, ctx.isa};
    ctx.pool->ParallelFor(blocks - 1, 1, [&](int64_t b, int64_t e) {
      std::vector<std::vector<float>> local(operands);
      for (int64_t blk = b + 1; blk < e + 1; ++blk) {
        Status st =
            RunRows(call, s, whole, &params, blk * block, std::min(s.rows, (blk + 1) * block), serial, run, local);
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
    RETURN_IF_ERROR(
        RunRows(call, s, whole, &params, blk * block, std::min(s.rows, (blk + 1) * block), ctx, run, scratch));
  }
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
