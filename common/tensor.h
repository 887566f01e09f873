// A host tensor: dtype, shape and little-endian row-major bytes in 64-byte aligned storage.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "common/dtype.h"
#include "common/sha256.h"
#include "common/status.h"

namespace consensor {

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor. Caller must have validated the shape (see CheckedNumElements).
  Tensor(DType dtype, Shape shape);
  // A tensor whose data the caller writes in full before anything reads it: no zero fill (a
  // pass over fresh memory that a copy into it makes again). Only the padding after the data is
  // zeroed.
  static Tensor Unfilled(DType dtype, Shape shape);
  static StatusOr<Tensor> FromBytes(DType dtype, Shape shape, std::span<const uint8_t> bytes);
  template <typename T>
  static Tensor FromVector(DType dtype, Shape shape, const std::vector<T>& values) {
    Tensor t(dtype, std::move(shape));
    // memcpy with a null pointer is undefined even for 0 bytes (an empty vector may have one).
    const size_t bytes = std::min<size_t>(t.byte_size(), values.size() * sizeof(T));
    if (bytes > 0) std::memcpy(t.data(), values.data(), bytes);
    return t;
  }

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const { return num_elements_; }
  int64_t byte_size() const { return num_elements_ * DTypeSize(dtype_); }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data_.get());
  }
  std::span<const uint8_t> bytes() const { return {data(), static_cast<size_t>(byte_size())}; }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::unique_ptr<uint8_t[], FreeDeleter> data_;
};

// Canonical tensor hash (docs/DETERMINISM.md, "Tensor hash"): SHA-256 over
// "consensor.tensor.v1\0", u8 dtype, u8 rank, rank x u64 LE dims, then the data bytes.
Hash256 TensorHash(DType dtype, const Shape& shape, std::span<const uint8_t> data);
inline Hash256 TensorHash(const Tensor& t) { return TensorHash(t.dtype(), t.shape(), t.bytes()); }

}  // namespace consensor
