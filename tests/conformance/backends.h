// The backend configurations every conformance check runs on.
#pragma once

#include <vector>

#include "kernels/backend_factory.h"
#include "kernels/cpu/cpu_kernels.h"

namespace consensor::testing {

// Every backend configuration this machine can run: the CPU paths with several thread
// counts, the CUDA kernels under emulation, and a real GPU when there is one.
inline std::vector<kernels::BackendOptions> AvailableBackends() {
  std::vector<kernels::BackendOptions> configs;
  auto cpu = [&](const char* isa, int threads) {
    kernels::BackendOptions o;
    o.isa = isa;
    o.threads = threads;
    configs.push_back(o);
  };
  cpu("portable", 1);
  cpu("portable", 3);
  if (kernels::cpu::CpuHasAvx2Fma()) {
    for (int t : {1, 2, 8}) cpu("avx2", t);
  }
  kernels::BackendOptions emu;
  emu.name = "cuda-emu";
  configs.push_back(emu);
  kernels::BackendOptions gpu;
  gpu.name = "cuda";
  if (kernels::CreateBackend(gpu).ok()) configs.push_back(gpu);
  return configs;
}

}  // namespace consensor::testing
