#include "kernels/checks/pool.h"

#include <string>

namespace consensor::kernels {

StatusOr<PoolGeom> ValidatePool(const KernelCall& call) {
  const std::string name(OpName(call.op));
  if (call.op != Op::kMaxPool2D && call.op != Op::kAvgPool2D) return InvalidArgument(name + ": not a pool op");
  if (call.params == nullptr) return InvalidArgument(name + ": missing parameters");
  if (call.num_inputs != 1 || call.num_outputs != 1)
    return InvalidArgument(name + ": expects one input and one output");
  const TensorView& x = call.in(0);
  const TensorView& y = call.out(0);
  const OpParams& p = *call.params;
  if (x.dtype != DType::kF32 || y.dtype != DType::kF32) return InvalidArgument(name + ": f32 only");
  if (x.rank != 4 || y.rank != 4) return InvalidArgument(name + ": input and output must be rank 4 (NCHW)");
  for (int i = 0; i < 4; ++i)
    if (x.dims[i] < 0 || y.dims[i] < 0) return InvalidArgument(name + ": negative dimension");
  if (p.kernel.size() != 2) return InvalidArgument(name + ": kernel must have 2 entries");
  if (!p.strides.empty() && p.strides.size() != 2) return InvalidArgument(name + ": strides must have 2 entries");
  if (!p.dilations.empty() && p.dilations.size() != 2) return InvalidArgument(name + ": dilations must have 2 entries");
  if (!p.pads.empty() && p.pads.size() != 4) return InvalidArgument(name + ": pads must have 4 entries");
  PoolGeom g;
  g.kh = p.kernel[0];
  g.kw = p.kernel[1];
  g.sh = p.strides.empty() ? 1 : p.strides[0];
  g.sw = p.strides.empty() ? 1 : p.strides[1];
  g.dh = p.dilations.empty() ? 1 : p.dilations[0];
  g.dw = p.dilations.empty() ? 1 : p.dilations[1];
  const int64_t top = p.pads.empty() ? 0 : p.pads[0], left = p.pads.empty() ? 0 : p.pads[1];
  const int64_t bottom = p.pads.empty() ? 0 : p.pads[2], right = p.pads.empty() ? 0 : p.pads[3];
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1)
    return InvalidArgument(name + ": kernel, strides and dilations must be positive");
  if (top < 0 || left < 0 || bottom < 0 || right < 0) return InvalidArgument(name + ": pads must be non-negative");
  // Keeps the window arithmetic below far from int64 overflow.
  constexpr int64_t kLimit = int64_t{1} << 40;
  if (g.kh > kLimit || g.kw > kLimit || g.sh > kLimit || g.sw > kLimit || g.dh > kLimit || g.dw > kLimit ||
      top > kLimit || left > kLimit || bottom > kLimit || right > kLimit)
    return InvalidArgument(name + ": attribute too large");
  g.N = x.dims[0];
  g.C = x.dims[1];
  g.H = x.dims[2];
  g.W = x.dims[3];
  g.top = top;
  g.left = left;
  const int64_t span_h = g.H + top + bottom - g.dh * (g.kh - 1) - 1;
  const int64_t span_w = g.W + left + right - g.dw * (g.kw - 1) - 1;
  if (span_h < 0 || span_w < 0) return InvalidArgument(name + ": window larger than the padded input");
  g.OH = span_h / g.sh + 1;
  g.OW = span_w / g.sw + 1;
  if (y.dims[0] != g.N || y.dims[1] != g.C || y.dims[2] != g.OH || y.dims[3] != g.OW)
    return InvalidArgument(name + ": output shape does not match");
  if ((x.num_elements() > 0 && x.data == nullptr) || (y.num_elements() > 0 && y.data == nullptr))
    return InvalidArgument(name + ": missing tensor data");
  return g;
}

}  // namespace consensor::kernels
