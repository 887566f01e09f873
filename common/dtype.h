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
  kU8 = 6,
  kI16 = 7,
  kU16 = 8,
  kU32 = 9,
  kU64 = 10,
  kF64 = 11,   // IEEE binary64
  kF16 = 12,   // IEEE binary16; storage type, computed through f32 (DETERMINISM.md 1.3)
  kBF16 = 13,  // bfloat16 (top half of a binary32); storage type, computed through f32 (1.4)
};

// Every valid dtype, in wire-code order.
inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kI32, DType::kI8,  DType::kBool, DType::kI64,
                                       DType::kU8,  DType::kI16, DType::kU16, DType::kU32,  DType::kU64,
                                       DType::kF64, DType::kF16, DType::kBF16};

constexpr int kMaxRank = 8;

using Shape = std::vector<int64_t>;

inline int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kI8: return 1;
    case DType::kBool: return 1;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kI16: return 2;
    case DType::kU16: return 2;
    case DType::kU32: return 4;
    case DType::kU64: return 8;
    case DType::kF64: return 8;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    default: return 0;
  }
}

inline bool IsValidDType(DType t) { return DTypeSize(t) != 0; }
inline bool IsSignedIntegerDType(DType t) {
  return t == DType::kI8 || t == DType::kI16 || t == DType::kI32 || t == DType::kI64;
}
inline bool IsUnsignedIntegerDType(DType t) {
  return t == DType::kU8 || t == DType::kU16 || t == DType::kU32 || t == DType::kU64;
}
inline bool IsIntegerDType(DType t) { return IsSignedIntegerDType(t) || IsUnsignedIntegerDType(t); }
// The compute floats: kernels run their arithmetic in these types.
inline bool IsFloatDType(DType t) { return t == DType::kF32 || t == DType::kF64; }
// The 16-bit floats: stored as 2 bytes, widened to f32 exactly, rounded back once per op output.
inline bool IsHalfDType(DType t) { return t == DType::kF16 || t == DType::kBF16; }

std::string_view DTypeName(DType t);  // "f32", "i32", ...
StatusOr<DType> DTypeFromName(std::string_view name);

// Product of dims; fails on negative dims or overflow past 2^62.
StatusOr<int64_t> CheckedNumElements(const Shape& shape);
// Caller guarantees the shape is already validated.
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2, 3]"

}  // namespace consensor
