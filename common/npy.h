// NumPy .npy files <-> consensor::Tensor.
//
// Reading accepts format versions 1.0, 2.0 and 3.0; writing produces version 1.0 (byte-identical
// to numpy's np.save for the same array). Supported dtypes: '<f4' (f32), '<i4' (i32), '|i1' or
// 'i1' (i8), '|b1' (bool), '<i8' (i64). Everything in the file is validated strictly: the header
// must be a Python dict literal with exactly the keys 'descr', 'fortran_order' and 'shape', the
// data must be exactly shape x itemsize bytes, and bool bytes must be 0 or 1. Malformed input
// yields a non-OK Status, never a crash, an out-of-bounds read or an allocation sized from an
// unchecked header value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace consensor {

struct NpyLimits {
  // Maximum size of the array data in bytes; larger arrays fail with RESOURCE_EXHAUSTED.
  int64_t max_bytes = int64_t{1} << 32;
};

// Largest header (the dict text after the length field) accepted when reading.
inline constexpr int64_t kNpyMaxHeaderBytes = 64 * 1024;

struct NpyHeaderInfo {
  DType dtype = DType::kInvalid;
  Shape shape;
  int64_t data_offset = 0;  // where the array data starts
  int64_t data_bytes = 0;
};

// Parses and checks the header of an .npy file of `file_size` bytes from its first bytes
// (`prefix` must hold the whole header: 64 KiB + 10 bytes always suffice), including that the
// size matches the shape exactly. Lets a caller validate a large file without reading it.
StatusOr<NpyHeaderInfo> ParseNpyHeader(std::span<const uint8_t> prefix, uint64_t file_size, const NpyLimits& limits);

// Parses a complete .npy file held in memory.
StatusOr<Tensor> ParseNpy(std::span<const uint8_t> bytes, const NpyLimits& limits);
// Reads and parses a .npy file. Never reads more than the limits allow.
// DATA_LOSS unless `npy` is a valid .npy file holding exactly the tensor whose canonical hash
// (TensorHash, lowercase hex) is `tensor_hash_hex`: how outputs fetched from a peer or a node
// are checked against what was signed.
Status CheckNpyTensorHash(std::span<const uint8_t> npy, std::string_view tensor_hash_hex, const NpyLimits& limits);
StatusOr<Tensor> ReadNpyFile(const std::string& path, const NpyLimits& limits);

// Encodes a tensor as a version 1.0 .npy file (data starts at a multiple of 64 bytes).
std::vector<uint8_t> EncodeNpy(const Tensor& tensor);
// The same from a value held elsewhere (`data`: exactly the shape's elements, little-endian).
std::vector<uint8_t> EncodeNpy(DType dtype, const Shape& shape, std::span<const uint8_t> data);
// The part of that file before the data (empty for a dtype .npy cannot hold): a caller that
// writes the data after it into memory it keeps saves a fresh allocation per file.
std::vector<uint8_t> EncodeNpyHeader(DType dtype, const Shape& shape);
// Writes atomically: a temporary file in the same directory, fsync, then rename over `path`.
Status WriteNpyFile(const std::string& path, const Tensor& tensor);

}  // namespace consensor
