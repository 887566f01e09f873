// The one-pass quantize (a cast with three inputs, docs/DETERMINISM.md 3.1): the div, round, add
// and cast of DynamicQuantizeLinear's and QuantizeLinear's quantize step as one call, made only
// in a program's fused list. The portable instantiation of kernels/cpu/quantize_impl.h and the
// call's checks and threading.
#include <atomic>
#include <string>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/quantize_impl.h"

namespace consensor::kernels::cpu {

void QuantizeChunkPortable(const float* x, float s, float z, DType to, void* y, int64_t begin, int64_t end) {
  QuantizeChunkImpl(x, s, z, to, y, begin, end);
}

namespace {
std::atomic<bool> g_quantize_avx512_enabled{true};

Status CheckQuantize(const KernelCall& call) {
  const std::string where = "cast (one-pass quantize): ";
  if (call.op != Op::kCast) return InvalidArgument(where + "op must be cast");
  if (call.num_inputs != 3 || call.num_outputs != 1) return InvalidArgument(where + "takes x, s and z, gives y");
  if (call.epilogue != nullptr) return InvalidArgument(where + "takes no epilogue");
  const TensorView& x = call.in(0);
  const TensorView& out = call.out();
  for (int i = 0; i < 3; ++i) {
    if (call.in(i).dtype != DType::kF32) return InvalidArgument(where + "x, s and z must be f32");
  }
  if (call.in(1).num_elements() != 1 || call.in(2).num_elements() != 1) {
    return InvalidArgument(where + "s and z must have one element each");
  }
  if (out.dtype != DType::kU8 && out.dtype != DType::kI8) return InvalidArgument(where + "y must be u8 or i8");
  if (out.rank != x.rank) return InvalidArgument(where + "y must have x's shape");
  for (int d = 0; d < x.rank; ++d) {
    if (out.dims[d] != x.dims[d]) return InvalidArgument(where + "y must have x's shape");
  }
  return OkStatus();
}
}  // namespace

void SetQuantizeAvx512ForTesting(bool enabled) { g_quantize_avx512_enabled.store(enabled); }

Status RunQuantize(const KernelCall& call, const CpuContext& ctx) {
  RETURN_IF_ERROR(CheckQuantize(call));
  const int64_t n = call.out().num_elements();
  if (n == 0) return OkStatus();
  const float* x = call.in(0).as<const float>();
  const float s = *call.in(1).as<const float>();
  const float z = *call.in(2).as<const float>();
  const DType to = call.out().dtype;
  void* y = call.out().data;
  void (*chunk)(const float*, float, float, DType, void*, int64_t, int64_t) = &QuantizeChunkPortable;
  if (ctx.isa == Isa::kAvx2) {
    chunk = g_quantize_avx512_enabled.load(std::memory_order_relaxed) && gemm::CpuHasAvx512F() ? &QuantizeChunkAvx512
                                                                                               : &QuantizeChunkAvx2;
  }
  // Work per element: 4 bytes read and 1 written, with a division.
  constexpr int64_t kElementWork = 8;
  if (ctx.pool == nullptr) {
    chunk(x, s, z, to, y, 0, n);
  } else {
    ctx.pool->ParallelForWork(n, kElementWork, [&](int64_t b, int64_t e) { chunk(x, s, z, to, y, b, e); });
  }
  return OkStatus();
}

}  // namespace consensor::kernels::cpu
