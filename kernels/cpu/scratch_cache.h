// Scratch memory that a thread keeps between kernel calls.
//
// Kernels take scratch (im2col columns, packed panels) per call and give it back at the end of the
// call. Handed straight back to malloc, a block of a few hundred KiB often comes back from the
// next call at fresh addresses (the heap moved on, or glibc returned the pages to the kernel),
// and every page of it is then faulted in again: on the VM these figures come from, a minor
// fault costs some 15 us, and a warm node task of the openWakeWord embedding model took 4 ms
// instead of 1.2 ms while that happened (docs/PERFORMANCE.md, "Warm tasks without fresh pages").
// So each thread keeps a few recently used blocks, bounded in count and bytes, and serves the
// next request of at most their size from them. Scratch contents are never read before they are
// written, so reuse changes no bit.
//
// A second, separate set holds the f32 copies of 16-bit operands (half_operands.cc): a dense f16
// convolution's widened input and f32 output are whole planes of several MiB (IS-Net f16: 8 and
// 4 MiB), which neither fit the first set's bound nor should evict its im2col tiles.
#pragma once

#include <cstddef>

namespace consensor::kernels::cpu::scratch {

// Which of a thread's two kept sets a block belongs to.
enum class Kind {
  kKernel,   // im2col tiles, packed panels (gemm::Workspace)
  kWidened,  // f32 copies of f16/bf16 operands and outputs (RunThroughF32)
};

// What one thread keeps at most per set: blocks larger than the byte bound are freed at once.
inline constexpr size_t kMaxKeptBlocks = 4;
inline constexpr size_t kMaxKeptBytes = size_t{8} << 20;
inline constexpr size_t kMaxKeptWidenedBytes = size_t{32} << 20;

// A 64-byte aligned block of at least `bytes` bytes (its usable size in *size), from this
// thread's kept blocks of `kind` when one is large enough, else newly allocated; nullptr if the
// allocation fails. Its contents are unspecified.
void* Take(size_t bytes, size_t* size, Kind kind = Kind::kKernel);
// Gives a block from Take back (null is ignored): kept for this thread's next Take of the same
// kind within the bounds above, else freed. Kept blocks are freed when the thread exits.
void Give(void* block, size_t size, Kind kind = Kind::kKernel);
// Bytes this thread keeps now in the set of `kind` (for tests).
size_t KeptBytes(Kind kind = Kind::kKernel);

}  // namespace consensor::kernels::cpu::scratch
