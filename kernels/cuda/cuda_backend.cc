#include "kernels/cuda/cuda_backend.h"

#include <cstdio>

namespace consensor::kernels {

Status CheckGpuSupported(const GpuProperties& gpu, int device) {
  if (gpu.major >= 8) return OkStatus();
  return FailedPrecondition("GPU " + std::to_string(device) + " (" + gpu.name + ") has compute capability " +
                            std::to_string(gpu.major) + "." + std::to_string(gpu.minor) +
                            "; the CUDA backend needs 8.0 or newer (Ampere, Ada, Hopper or later)");
}

std::string DescribeGpu(const GpuProperties& gpu, int device) {
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(gpu.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  std::string text = "cuda:" + std::to_string(device) + " " + gpu.name + " (sm_" + std::to_string(gpu.major) +
                     std::to_string(gpu.minor) + ", " + std::to_string(gpu.multiprocessors) + " SMs, " + memory;
  if (gpu.driver_version > 0) {
    text += ", driver CUDA " + std::to_string(gpu.driver_version / 1000) + "." +
            std::to_string(gpu.driver_version % 1000 / 10);
  }
  return text + ")";
}

}  // namespace consensor::kernels

#if defined(CNSR_HAVE_CUDA)

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_dispatch.h"

namespace consensor::kernels {

namespace {

Status CudaError(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return OkStatus();
  if (e == cudaErrorMemoryAllocation) {
    return ResourceExhausted(what + ": out of GPU memory (" + cudaGetErrorString(e) + ")");
  }
  return Internal(what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// Pinned host memory through which every transfer goes, so copies run at full speed.
class PinnedStaging {
 public:
  ~PinnedStaging() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  StatusOr<uint8_t*> Get(int64_t bytes) {
    if (bytes > size_) {
      if (ptr_) cudaFreeHost(ptr_);
      ptr_ = nullptr;
      size_ = 0;
      RETURN_IF_ERROR(CudaError(cudaMallocHost(&ptr_, static_cast<size_t>(bytes)), "pinned staging buffer"));
      size_ = bytes;
    }
    return static_cast<uint8_t*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  int64_t size_ = 0;
};

// Transfers go through the staging buffer in chunks, so its size stays bounded.
constexpr int64_t kStagingChunk = int64_t{64} << 20;

class DeviceArena final : public Arena {
 public:
  DeviceArena(uint8_t* base, int64_t size, cudaStream_t stream, PinnedStaging* staging)
      : base_(base), size_(size), stream_(stream), staging_(staging) {}
  ~DeviceArena() override { cudaFree(base_); }
  uint8_t* base() override { return base_; }
  int64_t size() const override { return size_; }

  Status CopyIn(int64_t offset, const void* src, int64_t bytes) override {
    if (offset < 0 || bytes < 0 || offset + bytes > size_) return OutOfRange("arena copy-in out of range");
    for (int64_t done = 0; done < bytes; done += kStagingChunk) {
      int64_t n = std::min(kStagingChunk, bytes - done);
      ASSIGN_OR_RETURN(uint8_t * stage, staging_->Get(std::min(bytes, kStagingChunk)));
      std::memcpy(stage, static_cast<const uint8_t*>(src) + done, static_cast<size_t>(n));
      RETURN_IF_ERROR(
          CudaError(cudaMemcpyAsync(base_ + offset + done, stage, n, cudaMemcpyHostToDevice, stream_), "copy to GPU"));
      RETURN_IF_ERROR(CudaError(cudaStreamSynchronize(stream_), "copy to GPU"));
    }
    return OkStatus();
  }

  Status CopyOut(int64_t offset, void* dst, int64_t bytes) const override {
    if (offset < 0 || bytes < 0 || offset + bytes > size_) return OutOfRange("arena copy-out out of range");
    for (int64_t done = 0; done < bytes; done += kStagingChunk) {
      int64_t n = std::min(kStagingChunk, bytes - done);
      ASSIGN_OR_RETURN(uint8_t * stage, staging_->Get(std::min(bytes, kStagingChunk)));
      RETURN_IF_ERROR(CudaError(cudaMemcpyAsync(stage, base_ + offset + done, n, cudaMemcpyDeviceToHost, stream_),
                                "copy from GPU"));
      RETURN_IF_ERROR(CudaError(cudaStreamSynchronize(stream_), "copy from GPU"));
      std::memcpy(static_cast<uint8_t*>(dst) + done, stage, static_cast<size_t>(n));
    }
    return OkStatus();
  }

 private:
  uint8_t* base_;
  int64_t size_;
  cudaStream_t stream_;
  PinnedStaging* staging_;
};

class GpuScratch final : public DeviceScratch {
 public:
  ~GpuScratch() override {
    if (ptr_) cudaFree(ptr_);
  }
  StatusOr<void*> Get(int64_t bytes) override {
    if (bytes > size_) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = nullptr;
      size_ = 0;
      RETURN_IF_ERROR(CudaError(cudaMalloc(&ptr_, static_cast<size_t>(bytes)), "GPU scratch memory"));
      size_ = bytes;
    }
    return ptr_;
  }

 private:
  void* ptr_ = nullptr;
  int64_t size_ = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, cudaStream_t stream, int sms, std::string description)
      : device_(device), stream_(stream), sms_(sms), description_(std::move(description)) {}
  ~CudaBackend() override { cudaStreamDestroy(stream_); }

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  std::string description() const override { return description_; }
  bool Supports(const KernelCall& call) const override { return cuda_device::Supports(call); }

  StatusOr<std::unique_ptr<Arena>> AllocateArena(int64_t bytes) override {
    RETURN_IF_ERROR(CudaError(cudaSetDevice(device_), "select GPU"));
    void* p = nullptr;
    RETURN_IF_ERROR(CudaError(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 256))),
                              "allocate a " + std::to_string(bytes) + "-byte GPU arena"));
    return std::unique_ptr<Arena>(new DeviceArena(static_cast<uint8_t*>(p), bytes, stream_, &staging_));
  }

  Status Run(const KernelCall& call) override {
    cuda_device::LaunchContext ctx;
    ctx.stream = stream_;
    ctx.scratch = &scratch_;
    ctx.widening = &widening_;
    ctx.multiprocessors = sms_;
    return cuda_device::Dispatch(call, ctx);
  }

  Status Synchronize() override { return CudaError(cudaStreamSynchronize(stream_), "GPU execution"); }

 private:
  int device_;
  cudaStream_t stream_;
  int sms_;
  std::string description_;
  PinnedStaging staging_;
  GpuScratch scratch_;
  GpuScratch widening_;  // f32 copies of f16/bf16 operands
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return FailedPrecondition(std::string("no usable CUDA GPU: ") +
                              (e != cudaSuccess ? cudaGetErrorString(e) : "no devices"));
  }
  if (options.device < 0 || options.device >= count) {
    return InvalidArgument("GPU " + std::to_string(options.device) + " does not exist (" + std::to_string(count) +
                           " found)");
  }
  RETURN_IF_ERROR(CudaError(cudaSetDevice(options.device), "select GPU"));
  cudaDeviceProp prop{};
  RETURN_IF_ERROR(CudaError(cudaGetDeviceProperties(&prop, options.device), "query GPU"));
  GpuProperties gpu;
  gpu.name = prop.name;
  gpu.major = prop.major;
  gpu.minor = prop.minor;
  gpu.multiprocessors = prop.multiProcessorCount;
  gpu.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  if (cudaDriverGetVersion(&gpu.driver_version) != cudaSuccess) gpu.driver_version = 0;
  RETURN_IF_ERROR(CheckGpuSupported(gpu, options.device));
  cudaStream_t stream;
  RETURN_IF_ERROR(CudaError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "create stream"));
  return std::unique_ptr<Backend>(
      new CudaBackend(options.device, stream, prop.multiProcessorCount, DescribeGpu(gpu, options.device)));
}

}  // namespace consensor::kernels

#else  // !CNSR_HAVE_CUDA

namespace consensor::kernels {

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions&) {
  return FailedPrecondition("this build of Consensor has no CUDA support (nvcc was not found at build time)");
}

}  // namespace consensor::kernels

#endif
