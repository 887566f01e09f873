// The one-pass quantize of a program's fused list (docs/DETERMINISM.md 3.1, "Quantize in one
// pass"): a `cast` with three inputs x (f32), s and z (f32, one element each) writes y (u8 or
// i8, x's shape) with y = cast(add(round(div(x, s)), z)), each op as the elementwise kernels
// compute it. Compilation makes it; only the CPU backend runs it (RunElementwise sends it here).
#pragma once

#include "common/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op.h"

namespace consensor::kernels::cpu {

Status RunQuantize(const KernelCall& call, const CpuContext& ctx);

// Tests: false makes the one-pass quantize use its AVX2 loop on an AVX-512 CPU.
void SetQuantizeAvx512ForTesting(bool enabled);

}  // namespace consensor::kernels::cpu
