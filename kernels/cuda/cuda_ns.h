// Everything compiled from kernels/cuda/*.cu lives in a namespace named after the build,
// so the GPU build and the emulated build can be linked into one binary.
#pragma once

#if defined(CNSR_SIMT_EMULATION)
#define CNSR_CUDA_NS cuda_emu
#else
#define CNSR_CUDA_NS cuda_device
#endif
