// The SIMT emulator: runs CUDA kernel source on the host, one fiber per CUDA thread.
//
// Model
//   * Blocks run one after another on the calling OS thread, in blockIdx order (x fastest),
//     so a launch is deterministic and needs no locks. Every OS thread has its own emulator
//     state (thread_local), so different OS threads can launch concurrently.
//   * A block's threads run on fibers (stacks from a per-OS-thread pool, reused across
//     blocks and launches). A fiber is a worker: it takes the next not-yet-started thread
//     of the block, runs the kernel body for it and, if the body returns without blocking,
//     takes the next one without any context switch. When its thread blocks
//     (__syncthreads, a warp shuffle) or no thread is left to start, the fiber switches
//     directly to what can run next: a released fiber, else a pooled fiber for the next
//     thread to start, else back to the scheduler, which then closes the block. A kernel
//     without barriers runs a whole block on one fiber with two switches per block; a
//     barrier costs about two switches per thread.
//   * __syncthreads: a thread arriving at the barrier waits until every thread of the block
//     waits there; the last one to arrive releases the others and goes on. A thread that
//     returned while others wait at a barrier is a divergent __syncthreads (undefined in
//     CUDA): the launch reports an error, the block is abandoned and the launch stops.
//   * Warp shuffles: lanes are the linearized threadIdx (x fastest) modulo 32. Each lane
//     deposits its value and waits; when every lane of the warp (or of the partial last
//     warp) has deposited, each lane receives the value of its source lane. A source lane
//     that does not exist (past the end of a partial warp, or negative) yields all-ones
//     bits (a NaN for floats) so that reading it shows up in results. A lane that exited
//     while others shuffle is reported as an error, like a divergent barrier.
//   * Shared memory (CNSR_SHARED, CNSR_DYNAMIC_SHARED) is allocated per launch and refilled
//     with 0xFF bytes at the start of every block that uses it, so reading shared memory
//     before writing it gives NaNs / -1 rather than plausible values. Each allocation is a
//     separate heap block of the exact size, so ASan catches overflows.
//
// Rules for kernel code (beyond CUDA's own)
//   * No RAII objects (std::vector, std::string, locks, unique_ptr...) live across a
//     __syncthreads or a shuffle: when a block is abandoned after an error, the frames of
//     its blocked threads are dropped without running destructors.
//   * Stack use per CUDA thread is bounded (64 KiB by default, CNSR_SIMT_STACK_KIB overrides
//     it; 256 KiB under ASan); a 64 KiB guard region turns an overflow into a crash
//     (SIGSEGV). Keep big arrays in shared or global memory, as on a GPU.
//   * Don't launch kernels from kernel code, don't change the floating-point environment in
//     kernel code, and don't let exceptions escape a kernel (they are caught, reported as a
//     launch error, and stop the launch).
//   * Kernel code runs with the floating-point environment of the thread calling Launch.
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cfenv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/simt.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CNSR_SIMT_ASAN 1
#endif
#endif
#if !defined(CNSR_SIMT_ASAN) && defined(__SANITIZE_ADDRESS__)
#define CNSR_SIMT_ASAN 1
#endif
#if defined(CNSR_SIMT_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// Fiber switching. Fibers are created and switched with ucontext (makecontext/swapcontext)
// on every platform, except that on x86-64 the switch is a few instructions that save the
// callee-saved registers and the stack pointer: glibc's swapcontext also saves and restores
// the signal mask, two system calls per switch (about 1 us in a VM), which would dominate
// the cost of every __syncthreads and shuffle. Define CNSR_SIMT_UCONTEXT_ONLY to use
// swapcontext everywhere.
#if defined(__x86_64__) && defined(__linux__) && !defined(CNSR_SIMT_UCONTEXT_ONLY)
#define CNSR_SIMT_FAST_SWITCH 1
// cnsr_simt_switch(&save_sp, new_sp): pushes the callee-saved registers, stores the stack
// pointer in *save_sp, switches to new_sp and pops the registers saved there. The x87 and
// SSE control words are not switched: all fibers of an OS thread share its floating-point
// environment, which is the one of the thread calling Launch.
extern "C" void cnsr_simt_switch(void** save_sp, void* new_sp);
asm(R"(
  .text
  .p2align 4
  .type cnsr_simt_switch,@function
cnsr_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cnsr_simt_switch,.-cnsr_simt_switch
)");
#endif

namespace consensor::simt::emu {

namespace {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimX = 1024;
constexpr unsigned kMaxBlockDimY = 1024;
constexpr unsigned kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridDimX = 2147483647u;
constexpr unsigned kMaxGridDimYZ = 65535u;
constexpr size_t kMaxSharedBytesPerBlock = 228 * 1024;
constexpr unsigned kMaxWarps = kMaxThreadsPerBlock / kWarpSize;
constexpr uint64_t kPoison = ~uint64_t{0};
constexpr size_t kSharedAlignment = 256;

const ThreadState kNoThread{};

template <typename D>
std::string DimString(const D& d) {
  // Appends rather than "(" + ...: GCC 12 warns (-Wrestrict, falsely) on the latter at -O3.
  std::string s = "(";
  s += std::to_string(d.x);
  s += ',';
  s += std::to_string(d.y);
  s += ',';
  s += std::to_string(d.z);
  s += ')';
  return s;
}

size_t PageSize() {
  static const size_t page = [] {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

size_t StackBytes() {
  static const size_t bytes = [] {
#if defined(CNSR_SIMT_ASAN)
    size_t kib = 256;  // ASan frames carry redzones.
#else
    size_t kib = 64;
#endif
    if (const char* env = std::getenv("CNSR_SIMT_STACK_KIB")) {
      char* end = nullptr;
      unsigned long v = std::strtoul(env, &end, 10);
      if (end != env && *end == '\0' && v >= 16 && v <= 64 * 1024) kib = v;
    }
    size_t page = PageSize();
    return (kib * 1024 + page - 1) / page * page;
  }();
  return bytes;
}

enum class Wait : uint8_t { kNone, kBarrier, kShuffle, kIdle };

struct Context {
#if defined(CNSR_SIMT_FAST_SWITCH)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

struct Fiber {
  Context ctx;
  char* map = nullptr;  // guard page, then the stack
  size_t map_bytes = 0;
  char* stack_lo = nullptr;
  size_t stack_bytes = 0;
  size_t color = 0;  // the stack starts this many bytes below its top (cache colouring)
  ThreadState state;
  unsigned linear = 0;  // linearized threadIdx
  Wait wait = Wait::kIdle;
  uint64_t shuffle_result = 0;
  uint64_t fenv_launch = 0;    // ucontext only: the launch whose FP environment this fiber has
  void* fake_stack = nullptr;  // ASan

  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  ~Fiber() {
    if (map == nullptr) return;
#if defined(CNSR_SIMT_ASAN)
    // Frames left on the stack have poisoned redzones; clear them before the pages go.
    __asan_unpoison_memory_region(stack_lo, stack_bytes);
#endif
    munmap(map, map_bytes);
  }
};

constexpr size_t kMaxGatherBytes = 64;

struct WarpState {
  unsigned lanes = 0;    // lanes that exist (32, or fewer in a partial last warp)
  unsigned arrived = 0;  // lanes waiting in the current exchange
  uint64_t value[kWarpSize];
  int src[kWarpSize];
  Fiber* waiter[kWarpSize];
  // The current round is an all-gather (WarpAllGather) rather than a shuffle.
  bool gather_round = false;
  size_t gather_bytes = 0;
  void* gather_out[kWarpSize];
  alignas(16) uint8_t gather_data[kWarpSize * kMaxGatherBytes];
};

struct SharedBuffer {
  const void* key = nullptr;
  size_t bytes = 0;
  void* ptr = nullptr;
  bool used = false;  // allocated by the current block
};

// The emulator state of one OS thread.
struct Emu {
  // Scheduler context (the stack of the thread calling Launch) and the fiber pool.
  Context sched_ctx;
  const void* sched_stack_bottom = nullptr;  // ASan
  size_t sched_stack_size = 0;
  void* sched_fake_stack = nullptr;
  bool switch_from_sched = false;
  std::vector<std::unique_ptr<Fiber>> fibers;  // every fiber of this OS thread
  std::vector<Fiber*> idle;                    // parked in FiberEntry, ready for work

  // Launch.
  bool in_launch = false;
  uint64_t launch_id = 0;
  std::fenv_t fenv;
  const std::function<void()>* body = nullptr;
  dim3 grid, block;
  unsigned nthreads = 0;
  std::string error;       // the first error of the running launch
  bool abort = false;      // stop the launch
  std::string last_error;  // for TakeLastError

  // Block.
  uint3 block_idx;
  unsigned next_thread = 0;  // linear id of the next thread to start
  uint3 next_idx;            // its threadIdx
  unsigned finished = 0;
  std::vector<Fiber*> barrier;  // waiting at __syncthreads, in arrival order
  WarpState warps[kMaxWarps];
  unsigned nwarps = 0;
  std::vector<Fiber*> block_fibers;   // fibers taken from the pool for this block
  Fiber* ready[kMaxThreadsPerBlock];  // FIFO ring of released fibers
  unsigned ready_head = 0, ready_count = 0;

  // Shared memory.
  std::vector<SharedBuffer> shared;
  size_t block_shared_bytes = 0;
  void* dynamic_shared = nullptr;
  size_t dynamic_shared_bytes = 0;

  Emu() {
    barrier.reserve(kMaxThreadsPerBlock);
    block_fibers.reserve(kMaxThreadsPerBlock);
    idle.reserve(kMaxThreadsPerBlock);
  }
  Emu(const Emu&) = delete;
  Emu& operator=(const Emu&) = delete;
  ~Emu() { FreeShared(); }

  void Fail(std::string message) {
    if (error.empty()) error = std::move(message);
  }

  void PushReady(Fiber* f) {
    ready[(ready_head + ready_count) % kMaxThreadsPerBlock] = f;
    ++ready_count;
  }
  Fiber* PopReady() {
    Fiber* f = ready[ready_head];
    ready_head = (ready_head + 1) % kMaxThreadsPerBlock;
    --ready_count;
    return f;
  }

  void FreeShared() {
    for (SharedBuffer& b : shared) std::free(b.ptr);
    shared.clear();
    std::free(dynamic_shared);
    dynamic_shared = nullptr;
    dynamic_shared_bytes = 0;
  }
};

// Hot paths read these; all are constant-initialized (no TLS guard).
thread_local Emu* t_emu = nullptr;      // set while this OS thread runs a launch
thread_local Fiber* t_fiber = nullptr;  // the running fiber, or null in the scheduler
thread_local const ThreadState* t_current = &kNoThread;

Emu& ThisThreadEmu() {
  // On the heap: the state is tens of KiB, too much for static TLS.
  thread_local std::unique_ptr<Emu> emu = std::make_unique<Emu>();
  return *emu;
}

void FiberEntry();

// Sets up a fresh context on the fiber's stack that starts in FiberEntry.
void InitContext(Fiber* f) {
#if defined(CNSR_SIMT_ASAN)
  __asan_unpoison_memory_region(f->stack_lo, f->stack_bytes);
#endif
#if defined(CNSR_SIMT_FAST_SWITCH)
  // What cnsr_simt_switch pops: six registers, then the return address FiberEntry; above
  // it a null return address for FiberEntry (which never returns). On entry to FiberEntry
  // %rsp is 8 mod 16, as the ABI wants after a call.
  uintptr_t top = (reinterpret_cast<uintptr_t>(f->stack_lo) + f->stack_bytes - f->color) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void*>(&FiberEntry);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // %rbp (ends frame-pointer chains), %rbx, %r12-%r15
  f->ctx.sp = sp;
#else
  getcontext(&f->ctx.uc);
  f->ctx.uc.uc_stack.ss_sp = f->stack_lo;
  f->ctx.uc.uc_stack.ss_size = f->stack_bytes - f->color;
  f->ctx.uc.uc_link = nullptr;  // FiberEntry never returns
  makecontext(&f->ctx.uc, &FiberEntry, 0);
#endif
  f->wait = Wait::kIdle;
  f->fake_stack = nullptr;
  f->fenv_launch = 0;
}

Fiber* NewFiber(Emu& e) {
  // A guard of 64 KiB, so that even a frame with a large local array cannot step over it.
  size_t guard = std::max(PageSize(), size_t{64} * 1024);
  size_t stack = StackBytes();
  size_t total = guard + stack;
  void* map =
      mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) return nullptr;
  // The stack grows down: the guard page sits below it, so an overflow faults.
  if (mprotect(map, guard, PROT_NONE) != 0) {
    munmap(map, total);
    return nullptr;
  }
  auto f = std::make_unique<Fiber>();
  f->map = static_cast<char*>(map);
  f->map_bytes = total;
  f->stack_lo = f->map + guard;
  f->stack_bytes = stack;
  // Stacks are a multiple of the page size apart, so the hot top frames of all fibers would
  // compete for the same few cache sets; start each at a different offset.
  f->color = (e.fibers.size() % 64) * 64;
  InitContext(f.get());
  e.fibers.push_back(std::move(f));
  return e.fibers.back().get();
}

// Saves the running context in `from` and continues `to` (a fiber, or the scheduler when
// null); returns when something switches back to `from`.
inline void SwitchTo(Emu& e, Context* from, void** from_fake_stack, Fiber* to) {
  t_fiber = to;
  t_current = to != nullptr ? &to->state : &kNoThread;
#if defined(CNSR_SIMT_ASAN)
  if (to != nullptr) {
    __sanitizer_start_switch_fiber(from_fake_stack, to->stack_lo, to->stack_bytes);
  } else {
    __sanitizer_start_switch_fiber(from_fake_stack, e.sched_stack_bottom, e.sched_stack_size);
  }
#else
  (void)from_fake_stack;
#endif
  Context* target = to != nullptr ? &to->ctx : &e.sched_ctx;
#if defined(CNSR_SIMT_FAST_SWITCH)
  cnsr_simt_switch(&from->sp, target->sp);
#else
  swapcontext(&from->uc, &target->uc);
#endif
}

// In a fiber, right after it was switched in.
inline void FinishSwitchIn(Emu& e, void* fake_stack) {
#if defined(CNSR_SIMT_ASAN)
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  if (e.switch_from_sched) {  // learn the scheduler's stack, to switch back to it
    e.sched_stack_bottom = bottom;
    e.sched_stack_size = size;
  }
#else
  (void)fake_stack;
#endif
  e.switch_from_sched = false;
}

// Scheduler -> the first fiber of a block; returns when no fiber of the block can run.
void RunFromScheduler(Emu& e, Fiber* f) {
  e.switch_from_sched = true;
  SwitchTo(e, &e.sched_ctx, &e.sched_fake_stack, f);
#if defined(CNSR_SIMT_ASAN)
  __sanitizer_finish_switch_fiber(e.sched_fake_stack, nullptr, nullptr);
#endif
}

// What runs next after a fiber blocks or runs out of work: a released fiber, a fiber for
// the next thread to start, or (null) the scheduler when neither is left.
Fiber* NextRunnable(Emu& e) {
  if (e.abort) return nullptr;
  if (e.ready_count > 0) return e.PopReady();
  if (e.next_thread >= e.nthreads) return nullptr;
  Fiber* f;
  if (!e.idle.empty()) {
    f = e.idle.back();
    e.idle.pop_back();
  } else {
    f = NewFiber(e);
    if (f == nullptr) {
      e.Fail("out of memory for fiber stacks");
      e.abort = true;
      return nullptr;
    }
  }
  e.block_fibers.push_back(f);
  return f;
}

// The running fiber `f` stops (its `wait` says why) and something else runs; returns when
// `f` is resumed.
inline void Park(Emu& e, Fiber* f) {
  SwitchTo(e, &f->ctx, &f->fake_stack, NextRunnable(e));
  FinishSwitchIn(e, f->fake_stack);
}

void StartThread(Emu& e, Fiber* f) {
  f->linear = e.next_thread++;
  f->state.thread_idx = e.next_idx;
  f->state.block_idx = e.block_idx;
  f->state.block_dim = e.block;
  f->state.grid_dim = e.grid;
  if (++e.next_idx.x == e.block.x) {
    e.next_idx.x = 0;
    if (++e.next_idx.y == e.block.y) {
      e.next_idx.y = 0;
      ++e.next_idx.z;
    }
  }
}

// A fiber's life: run threads of the current block while some are left to start, then
// park as idle until a later block (or launch) hands it work again.
void FiberEntry() {
  FinishSwitchIn(*t_emu, nullptr);
  for (;;) {
    // Re-read after every switch: the fiber may be resumed by a later launch.
    Emu& e = *t_emu;
    Fiber* f = t_fiber;
#if !defined(CNSR_SIMT_FAST_SWITCH)
    // swapcontext switches the floating-point environment with the context.
    if (f->fenv_launch != e.launch_id) {
      std::fesetenv(&e.fenv);
      f->fenv_launch = e.launch_id;
    }
#endif
    while (e.next_thread < e.nthreads && !e.abort) {
      StartThread(e, f);
      f->wait = Wait::kNone;
      try {
        (*e.body)();
      } catch (const std::exception& x) {
        e.Fail(std::string("exception thrown by kernel code: ") + x.what());
        e.abort = true;
      } catch (...) {
        e.Fail("exception thrown by kernel code");
        e.abort = true;
      }
      ++e.finished;
    }
    f->wait = Wait::kIdle;
    Park(e, f);
  }
}

std::string BlockName(const Emu& e) { return "block " + DimString(e.block_idx); }

// After a block made no more progress with threads unfinished: what went wrong.
std::string DiagnoseStall(const Emu& e) {
  for (unsigned w = 0; w < e.nwarps; ++w) {
    const WarpState& ws = e.warps[w];
    if (ws.arrived == 0) continue;
    return "warp shuffle not reached by every lane: " + BlockName(e) + ", warp " + std::to_string(w) + ": " +
           std::to_string(ws.arrived) + " of " + std::to_string(ws.lanes) +
           " lanes wait at a shuffle; the others exited or wait at __syncthreads (" + std::to_string(e.barrier.size()) +
           " threads of the block at __syncthreads, " + std::to_string(e.finished) + " exited)";
  }
  return "divergent __syncthreads: " + BlockName(e) + ": " + std::to_string(e.barrier.size()) + " of " +
         std::to_string(e.nthreads) + " threads wait at __syncthreads, " + std::to_string(e.finished) +
         " exited without reaching it";
}

// Runs the current block; false when the launch must stop.
bool RunBlock(Emu& e) {
  e.next_thread = 0;
  e.next_idx = uint3{};
  e.finished = 0;
  e.barrier.clear();
  for (unsigned w = 0; w < e.nwarps; ++w) e.warps[w].arrived = 0;
  e.ready_head = e.ready_count = 0;
  for (SharedBuffer& b : e.shared) b.used = false;
  e.block_shared_bytes = e.dynamic_shared_bytes;
  if (e.dynamic_shared_bytes > 0) std::memset(e.dynamic_shared, 0xFF, e.dynamic_shared_bytes);

  if (Fiber* first = NextRunnable(e)) RunFromScheduler(e, first);

  bool ok = !e.abort;
  if (ok && e.finished != e.nthreads) {
    e.Fail(DiagnoseStall(e));
    ok = false;
  }
  // Give the fibers back. Those still blocked are abandoned: their frames are dropped
  // (no destructors run) and their stacks reused from a fresh context.
  for (Fiber* f : e.block_fibers) {
    if (f->wait != Wait::kIdle) InitContext(f);
    e.idle.push_back(f);
  }
  e.block_fibers.clear();
  e.barrier.clear();
  e.ready_count = 0;
  return ok;
}

std::string ValidateLaunch(dim3 grid, dim3 block, size_t dynamic_shared_bytes) {
  if (block.x == 0 || block.y == 0 || block.z == 0)
    return "invalid launch configuration: block dimensions " + DimString(block) + " must be positive";
  if (block.x > kMaxBlockDimX || block.y > kMaxBlockDimY || block.z > kMaxBlockDimZ)
    return "invalid launch configuration: block dimensions " + DimString(block) + " exceed (1024,1024,64)";
  uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads > kMaxThreadsPerBlock)
    return "invalid launch configuration: " + std::to_string(threads) + " threads per block exceed 1024";
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    return "invalid launch configuration: grid dimensions " + DimString(grid) + " must be positive";
  if (grid.x > kMaxGridDimX || grid.y > kMaxGridDimYZ || grid.z > kMaxGridDimYZ)
    return "invalid launch configuration: grid dimensions " + DimString(grid) + " exceed (2^31-1,65535,65535)";
  if (dynamic_shared_bytes > kMaxSharedBytesPerBlock)
    return "invalid launch configuration: " + std::to_string(dynamic_shared_bytes) +
           " bytes of dynamic shared memory exceed " + std::to_string(kMaxSharedBytesPerBlock);
  return {};
}

void* AllocShared(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kSharedAlignment, bytes) != 0) return nullptr;
  return p;
}

}  // namespace

const ThreadState& Current() { return *t_current; }

int LaneId() {
  Fiber* f = t_fiber;
  return f == nullptr ? 0 : static_cast<int>(f->linear % kWarpSize);
}

void SyncThreads() {
  Fiber* f = t_fiber;
  if (f == nullptr) return;  // not in kernel code
  Emu& e = *t_emu;
  if (e.barrier.size() + 1 == e.nthreads) {
    // The last thread to arrive releases the others and goes on.
    for (Fiber* w : e.barrier) {
      w->wait = Wait::kNone;
      e.PushReady(w);
    }
    e.barrier.clear();
    return;
  }
  f->wait = Wait::kBarrier;
  e.barrier.push_back(f);
  Park(e, f);
}

uint64_t WarpExchange(uint64_t value, int src_lane) {
  Fiber* f = t_fiber;
  if (f == nullptr) return value;
  Emu& e = *t_emu;
  unsigned lane = f->linear % kWarpSize;
  WarpState& w = e.warps[f->linear / kWarpSize];
  if (w.arrived == 0) {
    w.gather_round = false;
  } else if (w.gather_round) {
    e.Fail("lanes of a warp meet in different warp collectives (a shuffle and an all-gather)");
  }
  w.value[lane] = value;
  w.src[lane] = src_lane;
  w.waiter[lane] = f;
  w.gather_out[lane] = nullptr;
  if (++w.arrived < w.lanes) {
    f->wait = Wait::kShuffle;
    Park(e, f);
    return f->shuffle_result;
  }
  // The last lane to arrive hands out the results and goes on.
  w.arrived = 0;
  uint64_t mine = 0;
  for (unsigned l = 0; l < w.lanes; ++l) {
    int s = w.src[l];
    uint64_t r = (s >= 0 && static_cast<unsigned>(s) < w.lanes) ? w.value[s] : kPoison;
    if (l == lane) {
      mine = r;
    } else {
      Fiber* other = w.waiter[l];
      other->shuffle_result = r;
      other->wait = Wait::kNone;
      e.PushReady(other);
    }
  }
  return mine;
}

void WarpAllGather(const void* mine, size_t bytes, void* all) {
  Fiber* f = t_fiber;
  if (bytes > kMaxGatherBytes) {
    if (t_emu != nullptr) t_emu->Fail("warp all-gather of more than 64 bytes per lane");
    bytes = kMaxGatherBytes;
  }
  uint8_t* out = static_cast<uint8_t*>(all);
  if (f == nullptr) {  // not in kernel code: a warp of one lane
    std::memset(out, 0xFF, kWarpSize * bytes);
    std::memcpy(out, mine, bytes);
    return;
  }
  Emu& e = *t_emu;
  unsigned lane = f->linear % kWarpSize;
  WarpState& w = e.warps[f->linear / kWarpSize];
  if (w.arrived == 0) {
    w.gather_round = true;
    w.gather_bytes = bytes;
  } else if (!w.gather_round || w.gather_bytes != bytes) {
    e.Fail("lanes of a warp meet in different warp collectives (a shuffle and an all-gather, or sizes)");
    bytes = std::min(bytes, w.gather_bytes);
  }
  std::memcpy(w.gather_data + lane * w.gather_bytes, mine, bytes);
  w.gather_out[lane] = out;
  w.waiter[lane] = f;
  if (++w.arrived < w.lanes) {
    f->wait = Wait::kShuffle;
    Park(e, f);
    return;
  }
  // The last lane to arrive copies the gathered bytes to every lane and goes on. Lanes
  // missing from a partial last warp read as poison, like a shuffle from a missing lane.
  w.arrived = 0;
  const size_t stride = w.gather_bytes;
  for (unsigned l = 0; l < w.lanes; ++l) {
    if (w.gather_out[l] != nullptr) {
      uint8_t* dst = static_cast<uint8_t*>(w.gather_out[l]);
      std::memcpy(dst, w.gather_data, w.lanes * stride);
      std::memset(dst + w.lanes * stride, 0xFF, (kWarpSize - w.lanes) * stride);
    }
    if (l != lane) {
      Fiber* other = w.waiter[l];
      other->shuffle_result = kPoison;  // a lane that called a shuffle in this round
      other->wait = Wait::kNone;
      e.PushReady(other);
    }
  }
}

void* BlockShared(const void* key, size_t bytes) {
  if (t_fiber == nullptr) return nullptr;
  Emu& e = *t_emu;
  SharedBuffer* buf = nullptr;
  for (SharedBuffer& b : e.shared) {
    if (b.key == key) {
      buf = &b;
      break;
    }
  }
  if (buf != nullptr && buf->used) {
    if (bytes != buf->bytes)
      e.Fail("shared array allocated with different sizes (" + std::to_string(buf->bytes) + " and " +
             std::to_string(bytes) + " bytes) by threads of " + BlockName(e));
    return buf->ptr;  // the common case: another thread of the block allocated it
  }
  // First use in this block.
  if (e.block_shared_bytes + bytes > kMaxSharedBytesPerBlock)
    e.Fail("too much shared memory: " + BlockName(e) + " uses " + std::to_string(e.block_shared_bytes + bytes) +
           " bytes, more than " + std::to_string(kMaxSharedBytesPerBlock));
  e.block_shared_bytes += bytes;
  if (buf == nullptr) {
    e.shared.push_back(SharedBuffer{key, 0, nullptr, false});
    buf = &e.shared.back();
  }
  if (buf->ptr == nullptr || buf->bytes != bytes) {
    std::free(buf->ptr);
    buf->ptr = AllocShared(bytes);  // exact size, so ASan sees overflows
    buf->bytes = bytes;
    if (buf->ptr == nullptr) {
      // Out of host memory: report it and stop; this thread still needs some pointer.
      e.Fail("out of memory for shared memory");
      e.abort = true;
      buf->ptr = AllocShared(kSharedAlignment);
      buf->bytes = 0;
      if (buf->ptr == nullptr) std::abort();
    }
  }
  buf->used = true;
  std::memset(buf->ptr, 0xFF, buf->bytes);
  return buf->ptr;
}

void* BlockDynamicShared() {
  if (t_fiber == nullptr) return nullptr;
  return t_emu->dynamic_shared;
}

std::string Launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body) {
  Emu& e = ThisThreadEmu();
  std::string err = ValidateLaunch(grid, block, dynamic_shared_bytes);
  if (err.empty() && e.in_launch) {
    err = "a kernel launch from kernel code is not supported by the emulator";
    e.Fail(err);  // the enclosing launch fails too
  }
  if (err.empty() && !body) err = "launch of an empty kernel function";
  if (!err.empty()) {
    if (e.last_error.empty()) e.last_error = err;
    return err;
  }

  e.in_launch = true;
  t_emu = &e;
  ++e.launch_id;
#if !defined(CNSR_SIMT_FAST_SWITCH)
  std::fegetenv(&e.fenv);
#endif
  e.body = &body;
  e.grid = grid;
  e.block = block;
  e.nthreads = block.x * block.y * block.z;
  e.nwarps = (e.nthreads + kWarpSize - 1) / kWarpSize;
  for (unsigned w = 0; w < e.nwarps; ++w) {
    e.warps[w].lanes = (w + 1 == e.nwarps) ? e.nthreads - w * kWarpSize : kWarpSize;
    e.warps[w].arrived = 0;
  }
  e.error.clear();
  e.abort = false;
  e.dynamic_shared = AllocShared(dynamic_shared_bytes);
  e.dynamic_shared_bytes = dynamic_shared_bytes;
  if (e.dynamic_shared == nullptr && dynamic_shared_bytes > 0) {
    e.Fail("out of memory for dynamic shared memory");
  } else {
    bool ok = true;
    for (unsigned z = 0; ok && z < grid.z; ++z) {
      for (unsigned y = 0; ok && y < grid.y; ++y) {
        for (unsigned x = 0; ok && x < grid.x; ++x) {
          e.block_idx = uint3{x, y, z};
          ok = RunBlock(e);
        }
      }
    }
  }
  e.FreeShared();
  e.body = nullptr;
  t_emu = nullptr;
  e.in_launch = false;
  err = std::move(e.error);
  e.error.clear();
  if (!err.empty() && e.last_error.empty()) e.last_error = err;
  return err;
}

std::string TakeLastError() {
  Emu& e = ThisThreadEmu();
  std::string err = std::move(e.last_error);
  e.last_error.clear();
  return err;
}

}  // namespace consensor::simt::emu
