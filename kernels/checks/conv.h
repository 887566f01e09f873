// Checks and geometry of the conv family (Conv2D, NCHW), shared by kernels/cpu/conv.cc
// and kernels/cuda/conv.cu.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/op.h"

namespace consensor::kernels {

// Geometry of a validated call: x [N, C, H, W], w [F, Cg, KH, KW], G groups of Fg = F / G
// filters, y [N, F, OH, OW] with P = OH * OW, and Kc = Cg * KH * KW terms per output.
// Passed by value to the CUDA kernels.
struct ConvGeom {
  int64_t N, C, H, W, F, Cg, KH, KW, G, Fg, OH, OW, P, Kc;
  int64_t sh, sw, dh, dw, pt, pl, pb, pr;
  // A zero-stuffed input (OpParams::input_stuffing): H and W above are the virtual input's
  // VH and VW; x is [N, C, XH, XW], stuffed by uh, uw and cropped from row r0, column c0.
  // Otherwise stuffed is false, uh = uw = 1, r0 = c0 = 0, XH = H, XW = W.
  bool stuffed;
  int64_t uh, uw, r0, c0, XH, XW;
};

// weights_prepared: the weights' view may have no data, because the backend reads a copy it
// prepared when the program was loaded (the CPU backend's 16-bit weights, widened and packed once).
// allow_stuffed: the caller runs a zero-stuffed input (the CPU backend); other callers get an
// error for one instead of reading x as if it were the virtual input.
StatusOr<ConvGeom> ValidateConv(const KernelCall& call, bool weights_prepared = false, bool allow_stuffed = false);

}  // namespace consensor::kernels
