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
#pragma once

#include <cstddef>

namespace consensor::kernels::cpu::scratch {

// What one thread keeps at most: blocks larger than kMaxKeptBytes are freed at once.
inline constexpr size_t kMaxKeptBlocks = 4;
inline constexpr size_t kMaxKeptBytes = size_t{8} << 20;

// A 64-byte aligned block of at least `bytes` bytes (its usable size in *size), from this
// thread's kept blocks when one is large enough, else newly allocated; nullptr if the
// allocation fails.
void* Take(size_t bytes, size_t* size);
// Gives a block from Take back (null is ignored): kept for this thread's next Take within the
// bounds above, else freed. Kept blocks are freed when the thread exits.
void Give(void* block, size_t size);
// Bytes this thread keeps now (for tests).
size_t KeptBytes();

}  // namespace consensor::kernels::cpu::scratch
