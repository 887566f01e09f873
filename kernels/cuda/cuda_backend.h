// The CUDA backend: one device arena per loaded program (a single cudaMalloc sized by the
// memory planner), pinned host staging for transfers, one stream per backend.
// Available only in builds with the CUDA toolkit (CNSR_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace consensor::kernels {

struct CudaBackendOptions {
  int device = 0;
};

// FAILED_PRECONDITION when the build has no CUDA, there is no usable GPU or driver, or the
// GPU is older than the kernels need (CheckGpuSupported).
StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

// What the CUDA runtime reports of a GPU; plain data so that the checks below are testable
// in builds without CUDA.
struct GpuProperties {
  std::string name;          // e.g. "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t memory_bytes = 0;
  int driver_version = 0;  // e.g. 13000 for CUDA 13.0 (cudaDriverGetVersion)
};

// The kernels need compute capability 8.0 or newer: the int8 GEMM uses
// mma.sync.m16n8k32 and cp.async, which older GPUs lack (the build carries sm_80 and sm_90
// code plus sm_90 PTX for newer GPUs). FAILED_PRECONDITION naming the GPU otherwise.
Status CheckGpuSupported(const GpuProperties& gpu, int device);

// One line for logs and node info, e.g.
// "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.2 GiB, driver CUDA 13.0)".
std::string DescribeGpu(const GpuProperties& gpu, int device);

}  // namespace consensor::kernels
