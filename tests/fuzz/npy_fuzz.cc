// NumPy .npy files: clients upload task inputs as .npy blobs, and outputs fetched from peers are
// checked as .npy (common/npy.h). Whatever parses must re-encode to a file that parses to the
// same tensor, and the header-only parser must agree with the full one.
#include <cstring>

#include "common/npy.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;

CNSR_FUZZ_TARGET(npy) {
  const std::span<const uint8_t> bytes(data, size);
  NpyLimits limits;
  limits.max_bytes = 1 << 20;  // larger arrays must be refused before any allocation
  auto parsed = ParseNpy(bytes, limits);
  auto header = ParseNpyHeader(bytes.first(std::min<size_t>(size, kNpyMaxHeaderBytes + 10)), size, limits);
  if (!parsed.ok()) return 0;
  CNSR_FUZZ_CHECK(header.ok());
  CNSR_FUZZ_CHECK(header->dtype == parsed->dtype() && header->shape == parsed->shape());
  CNSR_FUZZ_CHECK(header->data_bytes == parsed->byte_size());

  const std::vector<uint8_t> encoded = EncodeNpy(*parsed);
  auto again = ParseNpy(encoded, limits);
  CNSR_FUZZ_CHECK(again.ok());
  CNSR_FUZZ_CHECK(again->dtype() == parsed->dtype() && again->shape() == parsed->shape());
  CNSR_FUZZ_CHECK(
      std::equal(again->bytes().begin(), again->bytes().end(), parsed->bytes().begin(), parsed->bytes().end()));
  CNSR_FUZZ_CHECK(CheckNpyTensorHash(bytes, ToHex(TensorHash(*parsed)), limits).ok());
  return 0;
}

CNSR_FUZZ_SEEDS(npy) {
  std::vector<std::vector<uint8_t>> seeds;
  seeds.push_back(EncodeNpy(Tensor::FromVector<float>(DType::kF32, {2, 3}, {1, -2, 0.5f, 3, 4, -0.0f})));
  seeds.push_back(EncodeNpy(Tensor::FromVector<int32_t>(DType::kI32, {}, {7})));
  seeds.push_back(EncodeNpy(Tensor::FromVector<int8_t>(DType::kI8, {4}, {-128, 0, 1, 127})));
  seeds.push_back(EncodeNpy(Tensor::FromVector<uint8_t>(DType::kBool, {2, 1}, {0, 1})));
  seeds.push_back(EncodeNpy(Tensor::FromVector<int64_t>(DType::kI64, {0, 3}, {})));
  // Format version 2.0 (a 4-byte header length), as numpy writes for very large headers.
  std::vector<uint8_t> v2 = EncodeNpy(Tensor::FromVector<float>(DType::kF32, {1}, {1.5f}));
  const uint16_t len16 = static_cast<uint16_t>(v2[8] | (v2[9] << 8));
  std::vector<uint8_t> out(v2.begin(), v2.begin() + 6);
  out.push_back(2);
  out.push_back(0);
  const uint32_t len32 = len16 + 2;  // the same header padded with two more spaces
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(len32 >> (8 * i)));
  out.insert(out.end(), v2.begin() + 10, v2.begin() + 10 + len16 - 1);
  out.push_back(' ');
  out.push_back(' ');
  out.push_back('\n');
  out.insert(out.end(), v2.begin() + 10 + len16, v2.end());
  seeds.push_back(out);
  return seeds;
}
