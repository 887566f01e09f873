// Element types and shapes shared by every layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace consensor {

// Wire values are part of the graph format and of the tensor hash; never renumber.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32 = 1,
  kI32 = 2,
  kI8 = 3,
  kBool = 4,  // one byte per element, 0 or 1
  kI64 = 5,
};

constexpr int kMaxRank = 8;

using Shape = std::vector<int64_t>;

inline int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kI8: return 1;
    case DType::kBool: return 1;
    case DType::kI64: return 8;
    default: return 0;
  }
}

inline bool IsValidDType(DType t) { return DTypeSize(t) != 0; }
inline bool IsIntegerDType(DType t) { return t == DType::kI32 || t == DType::kI8 || t == DType::kI64; }

std::string_view DTypeName(DType t);  // "f32", "i32", ...
StatusOr<DType> DTypeFromName(std::string_view name);

// Product of dims; fails on negative dims or overflow past 2^62.
StatusOr<int64_t> CheckedNumElements(const Shape& shape);
// Caller guarantees the shape is already validated.
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2, 3]"

}  // namespace consensor
