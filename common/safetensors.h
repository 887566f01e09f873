// safetensors files <-> consensor::Tensor.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON header, then the data
// buffer. The header is an object mapping each tensor name to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// (offsets relative to the start of the data buffer, end exclusive), plus an optional
// "__metadata__" object of string -> string.
//
// Reading is strict: the header must be a JSON object starting with '{' (trailing whitespace
// allowed, as the reference writer pads with spaces), with no duplicate keys at any level,
// exactly the keys dtype/shape/data_offsets in every entry, and entries that tile the data
// buffer exactly (no holes, no overlaps, no trailing bytes). Supported dtypes: F32, I32, I8,
// BOOL and I64; other safetensors dtypes fail with UNIMPLEMENTED. Malformed input yields a
// non-OK Status, never a crash, an exception or a read outside the given bytes.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "common/tensor.h"

namespace consensor {

struct SafetensorsLimits {
  int64_t max_header_bytes = 100 << 20;  // 100 MiB, like the reference implementation
  int64_t max_tensors = 1 << 20;
};

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;
  int64_t begin = 0;  // offsets into the data buffer, end exclusive
  int64_t end = 0;
};

struct SafetensorsIndex {
  std::vector<SafetensorsEntry> entries;  // sorted by data offset (then name)
  std::map<std::string, std::string> metadata;
  int64_t data_start = 0;  // 8 + N
  // Indices into `entries` sorted by name, filled by ParseSafetensors so Find is a binary
  // search. When it does not match `entries` (an index built by hand), Find scans linearly.
  std::vector<uint32_t> by_name;

  const SafetensorsEntry* Find(std::string_view name) const;
};

// The dtype string a safetensors header uses for `dtype` ("F32", ...); empty if invalid.
std::string_view SafetensorsDTypeName(DType dtype);

// Validates everything; never reads outside `file`.
StatusOr<SafetensorsIndex> ParseSafetensors(std::span<const uint8_t> file, const SafetensorsLimits& limits = {});

// Copies one entry out as a Tensor (NOT_FOUND naming the entry if absent). Bool bytes must be
// 0 or 1.
StatusOr<Tensor> ReadSafetensorsTensor(std::span<const uint8_t> file, const SafetensorsIndex& index,
                                       std::string_view name);

// Writes a file: entries in the given order, data laid out back to back in that order (no
// padding between tensors), the header padded with spaces so data_start is a multiple of 8
// (as the reference writer does). Duplicate, empty or reserved ("__metadata__") names, null
// tensors and invalid UTF-8 in names or metadata -> INVALID_ARGUMENT.
StatusOr<std::vector<uint8_t>> WriteSafetensors(const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                                                const std::map<std::string, std::string>& metadata = {});

}  // namespace consensor
