#include "kernels/checks/conv.h"

#include <string>

namespace consensor::kernels {

namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

StatusOr<ConvGeom> ValidateConv(const KernelCall& call, bool weights_prepared, bool allow_stuffed) {
  if (call.op != Op::kConv2D) return InvalidArgument("RunConv: unexpected op " + std::string(OpName(call.op)));
  if ((call.num_inputs != 2 && call.num_inputs != 3) || call.num_outputs != 1 || !call.inputs || !call.outputs) {
    return InvalidArgument("conv2d: expects 2 or 3 inputs and 1 output");
  }
  if (!call.params) return InvalidArgument("conv2d: missing parameters");
  const OpParams& p = *call.params;
  const TensorView& x = call.in(0);
  const TensorView& w = call.in(1);
  const TensorView& y = call.out(0);
  if (x.dtype != DType::kF32 || w.dtype != DType::kF32 || y.dtype != DType::kF32 ||
      (call.num_inputs == 3 && call.in(2).dtype != DType::kF32)) {
    return InvalidArgument("conv2d: expects f32 tensors");
  }
  if (x.rank != 4 || w.rank != 4 || y.rank != 4 || (call.num_inputs == 3 && call.in(2).rank != 1)) {
    return InvalidArgument("conv2d: expects x, w, y of rank 4 and bias of rank 1");
  }
  if (p.strides.size() != 2 || p.dilations.size() != 2 || p.pads.size() != 4) {
    return InvalidArgument("conv2d: expects 2 strides, 2 dilations and 4 pads");
  }
  for (const TensorView* t : {&x, &w, &y}) {
    for (int i = 0; i < 4; ++i) {
      if (t->dims[i] < 0) return InvalidArgument("conv2d: negative dimension");
    }
  }
  ConvGeom g;
  g.N = x.dims[0], g.C = x.dims[1], g.H = x.dims[2], g.W = x.dims[3];
  g.stuffed = false;
  g.uh = g.uw = 1, g.r0 = g.c0 = 0, g.XH = g.H, g.XW = g.W;
  if (!p.input_stuffing.empty()) {
    if (!allow_stuffed) return InvalidArgument("conv2d: this backend does not run a zero-stuffed input");
    const std::vector<int64_t>& u = p.input_stuffing;
    if (u.size() != 6) return InvalidArgument("conv2d: input_stuffing must have 6 values");
    constexpr int64_t kMax = int64_t{1} << 31;
    for (int64_t v : u) {
      if (v < 0 || v >= kMax) return InvalidArgument("conv2d: input_stuffing values must be in [0, 2^31)");
    }
    g.stuffed = true;
    g.uh = u[0], g.uw = u[1], g.r0 = u[2], g.c0 = u[3], g.H = u[4], g.W = u[5];
    if (g.uh < 1 || g.uw < 1 || g.XH < 0 || g.XW < 0 || g.r0 + g.H > g.XH * g.uh || g.c0 + g.W > g.XW * g.uw) {
      return InvalidArgument("conv2d: the cropped stuffed input does not fit the input");
    }
  }
  g.F = w.dims[0], g.Cg = w.dims[1], g.KH = w.dims[2], g.KW = w.dims[3];
  g.G = p.group;
  g.sh = p.strides[0], g.sw = p.strides[1], g.dh = p.dilations[0], g.dw = p.dilations[1];
  g.pt = p.pads[0], g.pl = p.pads[1], g.pb = p.pads[2], g.pr = p.pads[3];
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.pt < 0 || g.pl < 0 || g.pb < 0 || g.pr < 0) {
    return InvalidArgument("conv2d: strides and dilations must be >= 1, pads >= 0");
  }
  if (g.G < 1 || g.C % g.G != 0 || g.F % g.G != 0 || g.Cg != g.C / g.G) {
    return InvalidArgument("conv2d: group " + std::to_string(g.G) + " does not fit C=" + std::to_string(g.C) +
                           ", F=" + std::to_string(g.F) + ", w.dims[1]=" + std::to_string(g.Cg));
  }
  if (call.num_inputs == 3 && call.in(2).dims[0] != g.F) return InvalidArgument("conv2d: bias must have F elements");
  g.Fg = g.F / g.G;
  g.OH = FloorDiv(g.H + g.pt + g.pb - g.dh * (g.KH - 1) - 1, g.sh) + 1;
  g.OW = FloorDiv(g.W + g.pl + g.pr - g.dw * (g.KW - 1) - 1, g.sw) + 1;
  if (g.OH < 0 || g.OW < 0 || y.dims[0] != g.N || y.dims[1] != g.F || y.dims[2] != g.OH || y.dims[3] != g.OW) {
    return InvalidArgument("conv2d: output shape does not match the input, kernel and attributes");
  }
  g.P = g.OH * g.OW;
  g.Kc = g.Cg * g.KH * g.KW;
  if (y.num_elements() > 0) {
    bool missing = !y.data;
    for (int i = 0; i < call.num_inputs; ++i) {
      if (i == 1 && weights_prepared) continue;
      missing |= call.in(i).num_elements() > 0 && !call.in(i).data;
    }
    if (missing) return InvalidArgument("conv2d: missing tensor data");
  }
  return g;
}

}  // namespace consensor::kernels
