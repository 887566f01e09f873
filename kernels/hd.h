// CNSR_HD marks functions compiled for both host and CUDA device from one source, so the
// two run the identical operation sequence (docs/DETERMINISM.md).
#pragma once

#if defined(__CUDACC__)
#define CNSR_HD __host__ __device__ __forceinline__
#else
// always_inline: the functions are small, inlining lets loops over them vectorize, and it
// keeps translation units compiled with different -m flags from sharing out-of-line copies.
#define CNSR_HD [[gnu::always_inline]] inline
#endif
