#include "kernels/checks/normalization.h"

#include <string>

#include "kernels/checks/common.h"

namespace consensor::kernels {

Status ValidateNormalization(const KernelCall& call) {
  const std::string name(OpName(call.op));
  if (call.op != Op::kSoftmax && call.op != Op::kLayerNorm) return InvalidArgument(name + ": not a normalization op");
  if (call.params == nullptr) return InvalidArgument(name + ": missing parameters");
  const bool ln = call.op == Op::kLayerNorm;
  if (call.num_outputs != 1) return InvalidArgument(name + ": expects one output");
  if (ln ? (call.num_inputs != 2 && call.num_inputs != 3) : call.num_inputs != 1)
    return InvalidArgument(name + (ln ? ": expects inputs (x, scale[, bias])" : ": expects one input"));
  const TensorView& x = call.in(0);
  const TensorView& y = call.out(0);
  if (x.rank < 1 || x.rank > kMaxRank) return InvalidArgument(name + ": input rank must be 1..8");
  for (int i = 0; i < x.rank; ++i)
    if (x.dims[i] < 0) return InvalidArgument(name + ": negative dimension");
  if (x.dtype != DType::kF32 || y.dtype != DType::kF32) return InvalidArgument(name + ": f32 only");
  if (!SameShape(x, y)) return InvalidArgument(name + ": output shape must equal the input shape");
  const int64_t axis = call.params->axis;
  if (axis < 0 || axis >= x.rank) return InvalidArgument(name + ": axis out of range");
  const int64_t count = x.num_elements();
  if (count > 0 && (x.data == nullptr || y.data == nullptr)) return InvalidArgument(name + ": missing tensor data");
  if (ln) {
    // scale and bias have the shape of dims [axis, rank).
    for (int k = 1; k < call.num_inputs; ++k) {
      const TensorView& t = call.in(k);
      if (t.dtype != DType::kF32) return InvalidArgument(name + ": scale and bias must be f32");
      bool ok = t.rank == x.rank - axis;
      for (int i = 0; ok && i < t.rank; ++i) ok = t.dims[i] == x.dims[axis + i];
      if (!ok) return InvalidArgument(name + ": scale and bias must have the shape of the normalized dims");
      if (count > 0 && t.num_elements() > 0 && t.data == nullptr)
        return InvalidArgument(name + ": missing tensor data");
    }
  }
  return OkStatus();
}

}  // namespace consensor::kernels
