// Placeholder: the fiber-based emulator replaces this file.
#include "kernels/cuda/simt.h"

namespace consensor::simt::emu {

namespace {
ThreadState g_state;
std::string g_error;
}  // namespace

const ThreadState& Current() { return g_state; }
void SyncThreads() {}
uint64_t WarpExchange(uint64_t value, int) { return value; }
int LaneId() { return 0; }
void* BlockShared(const void*, size_t) { return nullptr; }
void* BlockDynamicShared() { return nullptr; }
std::string Launch(dim3, dim3, size_t, const std::function<void()>&) {
  g_error = "SIMT emulator not implemented yet";
  return g_error;
}
std::string TakeLastError() {
  std::string e = g_error;
  g_error.clear();
  return e;
}

}  // namespace consensor::simt::emu
