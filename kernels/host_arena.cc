#include "kernels/host_arena.h"

#include <cstdlib>
#include <cstring>

namespace consensor::kernels {

namespace {

class HostArena final : public Arena {
 public:
  explicit HostArena(int64_t size) : size_(size) {
    size_t alloc = static_cast<size_t>((size + 63) / 64 * 64);
    base_ = static_cast<uint8_t*>(std::aligned_alloc(64, alloc == 0 ? 64 : alloc));
  }
  ~HostArena() override { std::free(base_); }
  bool valid() const { return base_ != nullptr; }
  uint8_t* base() override { return base_; }
  const uint8_t* host_data() const override { return base_; }
  int64_t size() const override { return size_; }
  Status CopyIn(int64_t offset, const void* src, int64_t bytes) override {
    if (offset < 0 || bytes < 0 || offset + bytes > size_) return OutOfRange("arena copy-in out of range");
    if (bytes) std::memcpy(base_ + offset, src, static_cast<size_t>(bytes));
    return OkStatus();
  }
  Status CopyOut(int64_t offset, void* dst, int64_t bytes) const override {
    if (offset < 0 || bytes < 0 || offset + bytes > size_) return OutOfRange("arena copy-out out of range");
    if (bytes) std::memcpy(dst, base_ + offset, static_cast<size_t>(bytes));
    return OkStatus();
  }

 private:
  uint8_t* base_;
  int64_t size_;
};

}  // namespace

StatusOr<std::unique_ptr<Arena>> AllocateHostArena(int64_t bytes) {
  if (bytes < 0) return InvalidArgument("negative arena size");
  auto arena = std::make_unique<HostArena>(bytes);
  if (!arena->valid()) return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  return std::unique_ptr<Arena>(std::move(arena));
}

}  // namespace consensor::kernels
