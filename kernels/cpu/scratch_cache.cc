#include "kernels/cpu/scratch_cache.h"

#include <cstdlib>

namespace consensor::kernels::cpu::scratch {
namespace {

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
};

class KeptBlocks {
 public:
  explicit KeptBlocks(size_t max_bytes) : max_bytes_(max_bytes) {}
  KeptBlocks(const KeptBlocks&) = delete;
  KeptBlocks& operator=(const KeptBlocks&) = delete;
  ~KeptBlocks() {
    for (size_t i = 0; i < count_; ++i) std::free(blocks_[i].ptr);
  }

  // The smallest kept block of at least `bytes`, removed from the kept set.
  Block TakeFitting(size_t bytes) {
    size_t best = count_;
    for (size_t i = 0; i < count_; ++i) {
      if (blocks_[i].size >= bytes && (best == count_ || blocks_[i].size < blocks_[best].size)) best = i;
    }
    if (best == count_) return Block{};
    Block found = blocks_[best];
    RemoveAt(best);
    return found;
  }

  void Keep(Block block) {
    if (block.size > max_bytes_) {
      std::free(block.ptr);
      return;
    }
    // Make room by freeing the smallest kept blocks: a large block serves small requests too.
    while (count_ == kMaxKeptBlocks || bytes_ + block.size > max_bytes_) {
      size_t smallest = 0;
      for (size_t i = 1; i < count_; ++i) {
        if (blocks_[i].size < blocks_[smallest].size) smallest = i;
      }
      if (blocks_[smallest].size > block.size) {  // every kept block is larger: drop the new one
        std::free(block.ptr);
        return;
      }
      std::free(blocks_[smallest].ptr);
      RemoveAt(smallest);
    }
    blocks_[count_++] = block;
    bytes_ += block.size;
  }

  size_t bytes() const { return bytes_; }

 private:
  void RemoveAt(size_t i) {
    bytes_ -= blocks_[i].size;
    blocks_[i] = blocks_[--count_];
  }

  const size_t max_bytes_;
  Block blocks_[kMaxKeptBlocks];
  size_t count_ = 0;
  size_t bytes_ = 0;
};

KeptBlocks& ThisThread(Kind kind) {
  thread_local KeptBlocks kernel(kMaxKeptBytes);
  thread_local KeptBlocks widened(kMaxKeptWidenedBytes);
  return kind == Kind::kWidened ? widened : kernel;
}

}  // namespace

void* Take(size_t bytes, size_t* size, Kind kind) {
  Block found = ThisThread(kind).TakeFitting(bytes);
  if (found.ptr == nullptr) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    found.size = rounded == 0 ? 64 : rounded;
    found.ptr = std::aligned_alloc(64, found.size);
    if (found.ptr == nullptr) found.size = 0;
  }
  *size = found.size;
  return found.ptr;
}

void Give(void* block, size_t size, Kind kind) {
  if (block == nullptr) return;
  ThisThread(kind).Keep(Block{block, size});
}

size_t KeptBytes(Kind kind) { return ThisThread(kind).bytes(); }

}  // namespace consensor::kernels::cpu::scratch
