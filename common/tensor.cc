#include "common/tensor.h"

#include <algorithm>
#include <cstdlib>

#include "common/sha256.h"

namespace consensor {

namespace {
// `zero_from`: the first byte to zero (0 for all; `bytes` for only the padding after the data).
uint8_t* AllocateAligned(int64_t bytes, int64_t zero_from = 0) {
  // 64-byte alignment suits AVX-512 loads and cache lines; round up so size is a multiple.
  size_t size = static_cast<size_t>((bytes + 63) / 64 * 64);
  if (size == 0) size = 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, size));
  const size_t from = std::min(size, static_cast<size_t>(zero_from));
  if (p) std::memset(p + from, 0, size - from);
  return p;
}
}  // namespace

void Tensor::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      num_elements_(NumElements(shape_)),
      data_(AllocateAligned(num_elements_ * DTypeSize(dtype))) {}

Tensor Tensor::Unfilled(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = NumElements(t.shape_);
  t.data_.reset(AllocateAligned(t.byte_size(), t.byte_size()));
  return t;
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      num_elements_(other.num_elements_),
      data_(AllocateAligned(other.byte_size(), other.byte_size())) {
  if (other.byte_size()) std::memcpy(data_.get(), other.data_.get(), other.byte_size());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

StatusOr<Tensor> Tensor::FromBytes(DType dtype, Shape shape, std::span<const uint8_t> bytes) {
  if (!IsValidDType(dtype)) return InvalidArgument("invalid dtype");
  ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  if (static_cast<uint64_t>(n) * DTypeSize(dtype) != bytes.size()) {
    return InvalidArgument("tensor " + std::string(DTypeName(dtype)) + ShapeToString(shape) + " needs " +
                           std::to_string(n * DTypeSize(dtype)) + " bytes, got " + std::to_string(bytes.size()));
  }
  Tensor t(dtype, std::move(shape));
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) {
      if (t.data()[i] > 1) return InvalidArgument("bool tensor element " + std::to_string(i) + " is not 0 or 1");
    }
  }
  return t;
}

Hash256 TensorHash(DType dtype, const Shape& shape, std::span<const uint8_t> data) {
  Sha256 h;
  static constexpr char kTag[] = "consensor.tensor.v1";
  h.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kTag), sizeof(kTag)));  // includes the NUL
  h.UpdateU8(static_cast<uint8_t>(dtype));
  h.UpdateU8(static_cast<uint8_t>(shape.size()));
  for (int64_t d : shape) h.UpdateU64(static_cast<uint64_t>(d));
  h.Update(data);
  return h.Finish();
}

}  // namespace consensor
