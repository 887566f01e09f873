// The CUDA backend's GPU checks, which are plain functions of what the CUDA runtime reports
// and so run in every build: GPUs older than compute capability 8.0 are refused by name,
// and the description operators see in the log names the model, capability and memory.
#include <gtest/gtest.h>

#include "kernels/backend_factory.h"
#include "kernels/cuda/cuda_backend.h"

namespace consensor::kernels {
namespace {

GpuProperties Gpu(const char* name, int major, int minor, int sms, int64_t memory, int driver) {
  GpuProperties g;
  g.name = name;
  g.major = major;
  g.minor = minor;
  g.multiprocessors = sms;
  g.memory_bytes = memory;
  g.driver_version = driver;
  return g;
}

TEST(CudaBackendGpu, OlderThanAmpereIsRefusedByName) {
  const Status turing = CheckGpuSupported(Gpu("Tesla T4", 7, 5, 40, int64_t{15} << 30, 12040), 1);
  EXPECT_EQ(turing.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(turing.message(),
            "GPU 1 (Tesla T4) has compute capability 7.5; the CUDA backend needs 8.0 or newer (Ampere, Ada, Hopper or "
            "later)");
  EXPECT_FALSE(CheckGpuSupported(Gpu("Tesla V100-SXM2-16GB", 7, 0, 80, int64_t{16} << 30, 0), 0).ok());
  for (const GpuProperties& ok : {Gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108, int64_t{80} << 30, 13000),
                                  Gpu("NVIDIA L4", 8, 9, 58, int64_t{22} << 30, 13000),
                                  Gpu("NVIDIA H100 80GB HBM3", 9, 0, 132, int64_t{80} << 30, 13000),
                                  Gpu("NVIDIA B200", 10, 0, 148, int64_t{180} << 30, 13000)}) {
    EXPECT_TRUE(CheckGpuSupported(ok, 0).ok()) << ok.name;
  }
}

TEST(CudaBackendGpu, DescriptionNamesModelCapabilityAndMemory) {
  EXPECT_EQ(DescribeGpu(Gpu("NVIDIA H100 80GB HBM3", 9, 0, 132, 85520809984, 13000), 0),
            "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.6 GiB, driver CUDA 13.0)");
  EXPECT_EQ(DescribeGpu(Gpu("NVIDIA L4", 8, 9, 58, int64_t{23} << 30, 12080), 3),
            "cuda:3 NVIDIA L4 (sm_89, 58 SMs, 23.0 GiB, driver CUDA 12.8)");
  EXPECT_EQ(DescribeGpu(Gpu("x", 8, 0, 1, 0, 0), 0), "cuda:0 x (sm_80, 1 SMs, 0.0 GiB)");  // no driver version
}

TEST(CudaBackendGpu, BackendsDescribeThemselves) {
  BackendOptions emu;
  emu.name = "cuda-emu";
  auto backend = CreateBackend(emu);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  EXPECT_EQ((*backend)->description(), "cuda-emu (the CUDA kernels under the SIMT emulation, on the CPU)");
  BackendOptions cpu;
  cpu.isa = "portable";
  backend = CreateBackend(cpu);
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ((*backend)->description(), "cpu-portable");
}

}  // namespace
}  // namespace consensor::kernels
