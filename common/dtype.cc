#include "common/dtype.h"

#include <algorithm>

namespace consensor {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kBool: return "bool";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    default: return "invalid";
  }
}

StatusOr<DType> DTypeFromName(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (DTypeName(t) == name) return t;
  }
  return InvalidArgument("unknown dtype '" + std::string(name) + "'");
}

StatusOr<int64_t> CheckedNumElements(const Shape& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgument("rank " + std::to_string(shape.size()) + " exceeds the maximum of " +
                           std::to_string(kMaxRank));
  }
  // Check every dim first so the answer does not depend on where a zero sits.
  bool has_zero = false;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("negative dimension in shape " + ShapeToString(shape));
    if (d > (int64_t{1} << 62)) return InvalidArgument("shape " + ShapeToString(shape) + " has too many elements");
    has_zero = has_zero || d == 0;
  }
  if (has_zero) return int64_t{0};
  int64_t n = 1;
  for (int64_t d : shape) {
    if (n > (int64_t{1} << 62) / d) {
      return InvalidArgument("shape " + ShapeToString(shape) + " has too many elements");
    }
    n *= d;
  }
  return n;
}

int64_t NumElements(const Shape& shape) {
  // A zero anywhere makes it empty, however large the other dims (CheckedNumElements allows
  // those): multiplying them first could overflow.
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace consensor
