#include "common/safetensors.h"

#include "common/text.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace consensor {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using Json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

// ---------------------------------------------------------------------------------------------
// dtypes

struct DTypeInfo {
  std::string_view name;
  DType dtype;
};

constexpr DTypeInfo kSupported[] = {
    {"F32", DType::kF32}, {"I32", DType::kI32}, {"I8", DType::kI8},     {"BOOL", DType::kBool}, {"I64", DType::kI64},
    {"U8", DType::kU8},   {"I16", DType::kI16}, {"U16", DType::kU16},   {"U32", DType::kU32},   {"U64", DType::kU64},
    {"F64", DType::kF64}, {"F16", DType::kF16}, {"BF16", DType::kBF16},
};

// Valid safetensors dtypes that consensor has no DType for.
constexpr std::string_view kUnsupported[] = {
    "F8_E4M3",
    "F8_E5M2",
    // Added by newer versions of the format.
    "F8_E8M0",
    "F4",
    "F6_E2M3",
    "F6_E3M2",
    "C64",
};

// ---------------------------------------------------------------------------------------------
// helpers

std::string Quoted(std::string_view s) { return "'" + Printable(s, 64) + "'"; }
std::string TensorLabel(std::string_view name) { return "tensor " + Quoted(name); }

Status Invalid(const std::string& what) { return InvalidArgument("invalid safetensors file: " + what); }

uint64_t LoadU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF). Returns the offset
// of the first bad byte, or npos.
size_t FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (n - i < len) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xbf) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// A SAX handler that accepts everything and records the first syntax error; used only to
// explain why the header is not valid JSON.
class JsonErrorSax final : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    position_ = position;
    message_ = ex.what();
    return false;
  }
  const std::string& message() const { return message_; }
  size_t position() const { return position_; }

 private:
  std::string message_;
  size_t position_ = 0;
};

std::string JsonSyntaxError(std::string_view text) {
  JsonErrorSax sax;
  Json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/false);
  if (sax.message().empty()) return "header is not valid JSON";
  return "header is not valid JSON (" + Printable(sax.message(), 200) + ")";
}

StatusOr<DType> ParseDType(const std::string& tensor, const Json& v) {
  if (!v.is_string()) return Invalid(TensorLabel(tensor) + ": 'dtype' must be a string");
  const std::string& s = v.get_ref<const std::string&>();
  for (const DTypeInfo& d : kSupported) {
    if (d.name == s) return d.dtype;
  }
  for (std::string_view u : kUnsupported) {
    if (u == s) {
      return Unimplemented(
          TensorLabel(tensor) + " has dtype " + s +
          ", which consensor does not support (supported: F32, I32, I8, BOOL, I64, U8, I16, U16, U32, U64, F64, F16, BF16)");
    }
  }
  return Invalid(TensorLabel(tensor) + " has unknown dtype " + Quoted(s));
}

StatusOr<Shape> ParseShape(const std::string& tensor, const Json& v) {
  if (!v.is_array()) return Invalid(TensorLabel(tensor) + ": 'shape' must be an array of non-negative integers");
  if (v.size() > static_cast<size_t>(kMaxRank)) {
    return Invalid(TensorLabel(tensor) + " has rank " + std::to_string(v.size()) + ", over the maximum rank of " +
                   std::to_string(kMaxRank));
  }
  Shape shape;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& d = v[i];
    if (!d.is_number_unsigned()) {
      return Invalid(TensorLabel(tensor) + ": shape dimension " + std::to_string(i) + " is " +
                     Printable(d.dump(-1, ' ', false, Json::error_handler_t::replace), 40) +
                     ", not a non-negative integer");
    }
    const uint64_t u = d.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Invalid(TensorLabel(tensor) + ": shape dimension " + std::to_string(i) + " (" + std::to_string(u) +
                     ") is too large");
    }
    shape.push_back(static_cast<int64_t>(u));
  }
  return shape;
}

Status ParseOffsets(const std::string& tensor, const Json& v, uint64_t* begin, uint64_t* end) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_number_unsigned()) {
    return Invalid(TensorLabel(tensor) + ": 'data_offsets' must be an array of two non-negative integers [begin, end]");
  }
  *begin = v[0].get<uint64_t>();
  *end = v[1].get<uint64_t>();
  return OkStatus();
}

StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const Json& v, uint64_t buffer_size) {
  if (!v.is_object()) {
    return Invalid(TensorLabel(name) + ": entry must be an object with 'dtype', 'shape' and 'data_offsets'");
  }
  for (const auto& item : v.items()) {
    const std::string& k = item.key();
    if (k != "dtype" && k != "shape" && k != "data_offsets") {
      return Invalid(TensorLabel(name) + " has unknown key " + Quoted(k) + " (allowed: dtype, shape, data_offsets)");
    }
  }
  auto dtype_it = v.find("dtype");
  auto shape_it = v.find("shape");
  auto offsets_it = v.find("data_offsets");
  if (dtype_it == v.end()) return Invalid(TensorLabel(name) + " is missing 'dtype'");
  if (shape_it == v.end()) return Invalid(TensorLabel(name) + " is missing 'shape'");
  if (offsets_it == v.end()) return Invalid(TensorLabel(name) + " is missing 'data_offsets'");

  SafetensorsEntry e;
  e.name = name;
  ASSIGN_OR_RETURN(e.dtype, ParseDType(name, *dtype_it));
  ASSIGN_OR_RETURN(e.shape, ParseShape(name, *shape_it));
  auto n_or = CheckedNumElements(e.shape);
  if (!n_or.ok()) {
    return Invalid(TensorLabel(name) + " shape " + ShapeToString(e.shape) + ": " + n_or.status().message());
  }
  uint64_t begin = 0, end = 0;
  RETURN_IF_ERROR(ParseOffsets(name, *offsets_it, &begin, &end));
  const std::string offsets = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) return Invalid(TensorLabel(name) + " has reversed data_offsets " + offsets + " (begin > end)");
  if (end > buffer_size) {
    return Invalid(TensorLabel(name) + " data_offsets " + offsets + " run past the end of the data buffer (" +
                   std::to_string(buffer_size) + " bytes)");
  }
  const std::string type = std::string(DTypeName(e.dtype)) + ShapeToString(e.shape);
  uint64_t want = 0;
  const bool overflow =
      __builtin_mul_overflow(static_cast<uint64_t>(*n_or), static_cast<uint64_t>(DTypeSize(e.dtype)), &want);
  if (overflow || want != end - begin) {
    return Invalid(TensorLabel(name) + " (" + type + ") has data_offsets " + offsets + " spanning " +
                   std::to_string(end - begin) + " bytes, but its shape needs " +
                   (overflow ? std::string("more than 2^64") : std::to_string(want)) + " bytes");
  }
  // Both fit: end <= buffer_size <= file size.
  e.begin = static_cast<int64_t>(begin);
  e.end = static_cast<int64_t>(end);
  return e;
}

bool ValidUtf8(std::string_view s) { return FindInvalidUtf8(s) == std::string_view::npos; }

std::string JsonString(const std::string& s) {
  // Caller checked s is valid UTF-8, so the strict handler never fires; `replace` keeps dump
  // from throwing regardless.
  return Json(s).dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace

std::string_view SafetensorsDTypeName(DType dtype) {
  for (const DTypeInfo& d : kSupported) {
    if (d.dtype == dtype) return d.name;
  }
  return "";
}

const SafetensorsEntry* SafetensorsIndex::Find(std::string_view name) const {
  if (by_name.size() == entries.size()) {
    auto it = std::lower_bound(by_name.begin(), by_name.end(), name, [&](uint32_t i, std::string_view n) {
      return i < entries.size() && std::string_view(entries[i].name) < n;
    });
    if (it != by_name.end() && *it < entries.size() && entries[*it].name == name) return &entries[*it];
    // Fall through: by_name may be stale if the index was edited by hand.
  }
  for (const SafetensorsEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

StatusOr<SafetensorsIndex> ParseSafetensors(std::span<const uint8_t> file, const SafetensorsLimits& limits) {
  if (file.size() < 8) {
    return Invalid("the file is " + std::to_string(file.size()) + " bytes, too short for the 8-byte header length");
  }
  const uint64_t n = LoadU64(file.data());
  const uint64_t cap = static_cast<uint64_t>(std::max<int64_t>(0, limits.max_header_bytes));
  if (n > cap) {
    return ResourceExhausted("safetensors header length " + std::to_string(n) + " exceeds the limit of " +
                             std::to_string(cap) + " bytes");
  }
  if (n > file.size() - 8) {
    return Invalid("header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file.size() - 8) + " bytes after the length field)");
  }
  std::string_view text(reinterpret_cast<const char*>(file.data() + 8), static_cast<size_t>(n));
  if (text.empty() || text[0] != '{') return Invalid("header does not start with '{'");
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return Invalid("header is not valid UTF-8 (byte offset " + std::to_string(bad) + " of the header)");
  }

  // nlohmann keeps the last of duplicate keys silently, so collect keys per object as they are
  // parsed. Nothing valid nests deeper than header -> entry -> shape/offsets array -> number;
  // deeper containers are discarded as they are built (bounding memory) and reported.
  std::vector<std::set<std::string>> open_objects;
  std::string top_key;
  std::string structure_error;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= 3) {
          if (structure_error.empty()) {
            structure_error = "header nests too deeply" +
                              (top_key.empty() ? std::string() : " (in the value of " + Quoted(top_key) + ")");
          }
          return false;
        }
        if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
        return true;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        return true;
      case Json::parse_event_t::key: {
        if (!parsed.is_string()) return true;
        const std::string& k = parsed.get_ref<const std::string&>();
        if (depth == 1) top_key = k;
        if (!open_objects.empty() && !open_objects.back().insert(k).second && structure_error.empty()) {
          structure_error = depth == 1 ? (k == kMetadataKey ? "duplicate key '__metadata__' in the header"
                                                            : "duplicate tensor name " + Quoted(k))
                                       : "duplicate key " + Quoted(k) + " in the value of " + Quoted(top_key);
        }
        return true;
      }
      default: return true;
    }
  };
  Json header = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false,
                            /*ignore_comments=*/false);
  if (header.is_discarded()) return Invalid(JsonSyntaxError(text));
  if (!structure_error.empty()) return Invalid(structure_error);
  if (!header.is_object()) return Invalid("header is not a JSON object");
  open_objects.clear();

  SafetensorsIndex index;
  index.data_start = static_cast<int64_t>(8 + n);
  const uint64_t buffer_size = file.size() - 8 - n;
  const bool has_metadata = header.find(std::string(kMetadataKey)) != header.end();
  const size_t num_tensors = header.size() - (has_metadata ? 1 : 0);
  if (num_tensors > static_cast<uint64_t>(std::max<int64_t>(0, limits.max_tensors))) {
    return ResourceExhausted("safetensors header lists " + std::to_string(num_tensors) +
                             " tensors, over the limit of " + std::to_string(limits.max_tensors));
  }
  index.entries.reserve(num_tensors);
  for (const auto& item : header.items()) {
    const std::string& key = item.key();
    const Json& value = item.value();
    if (key == kMetadataKey) {
      if (!value.is_object()) return Invalid("'__metadata__' must be an object of string values");
      for (const auto& m : value.items()) {
        if (!m.value().is_string()) {
          return Invalid("'__metadata__' value of " + Quoted(m.key()) + " is not a string");
        }
        index.metadata.emplace(m.key(), m.value().get_ref<const std::string&>());
      }
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsEntry e, ParseEntry(key, value, buffer_size));
    index.entries.push_back(std::move(e));
  }
  header = Json();  // release the DOM before building the rest

  std::sort(index.entries.begin(), index.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  int64_t pos = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : index.entries) {
    if (e.begin > pos) {
      return Invalid("bytes [" + std::to_string(pos) + ", " + std::to_string(e.begin) +
                     ") of the data buffer belong to no tensor (a hole before " + TensorLabel(e.name) + ")");
    }
    if (e.begin < pos) {
      return Invalid(TensorLabel(e.name) + " data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] overlap " + TensorLabel(prev->name) + " [" + std::to_string(prev->begin) + ", " +
                     std::to_string(prev->end) + "]");
    }
    pos = e.end;
    prev = &e;
  }
  if (static_cast<uint64_t>(pos) != buffer_size) {
    return Invalid(std::to_string(buffer_size - static_cast<uint64_t>(pos)) +
                   " trailing bytes after the last tensor (data buffer is " + std::to_string(buffer_size) +
                   " bytes, tensors cover " + std::to_string(pos) + ")");
  }

  index.by_name.resize(index.entries.size());
  for (size_t i = 0; i < index.entries.size(); ++i) index.by_name[i] = static_cast<uint32_t>(i);
  std::sort(index.by_name.begin(), index.by_name.end(),
            [&](uint32_t a, uint32_t b) { return index.entries[a].name < index.entries[b].name; });
  return index;
}

StatusOr<Tensor> ReadSafetensorsTensor(std::span<const uint8_t> file, const SafetensorsIndex& index,
                                       std::string_view name) {
  const SafetensorsEntry* e = index.Find(name);
  if (e == nullptr) return NotFound("safetensors file has no tensor named " + Quoted(name));
  // The index may come from elsewhere; never trust it for bounds.
  auto n_or = CheckedNumElements(e->shape);
  if (!IsValidDType(e->dtype) || !n_or.ok() || static_cast<int>(e->shape.size()) > kMaxRank || e->begin < 0 ||
      e->begin > e->end || index.data_start < 8 || static_cast<uint64_t>(index.data_start) > file.size() ||
      static_cast<uint64_t>(e->end) > file.size() - static_cast<uint64_t>(index.data_start)) {
    return InvalidArgument("safetensors index entry for " + TensorLabel(name) + " does not fit the file");
  }
  const uint64_t bytes = static_cast<uint64_t>(e->end - e->begin);
  uint64_t want = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(*n_or), static_cast<uint64_t>(DTypeSize(e->dtype)), &want) ||
      want != bytes) {
    return InvalidArgument("safetensors index entry for " + TensorLabel(name) + " has " + std::to_string(bytes) +
                           " bytes, which does not match its shape");
  }
  Tensor t(e->dtype, e->shape);
  if (bytes > 0) {
    if (t.data() == nullptr) return ResourceExhausted("out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memcpy(t.data(), file.data() + index.data_start + e->begin, bytes);
  }
  if (e->dtype == DType::kBool) {
    const uint8_t* d = t.data();
    for (uint64_t i = 0; i < bytes; ++i) {
      if (d[i] > 1) {
        return InvalidArgument("invalid safetensors file: " + TensorLabel(name) + ": bool element " +
                               std::to_string(i) + " has byte value " + std::to_string(d[i]) + " (must be 0 or 1)");
      }
    }
  }
  return t;
}

StatusOr<std::vector<uint8_t>> WriteSafetensors(const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) return InvalidArgument("safetensors tensor names must not be empty");
    if (name == kMetadataKey) return InvalidArgument("'__metadata__' is reserved and cannot name a tensor");
    if (!ValidUtf8(name)) return InvalidArgument("safetensors tensor name " + Quoted(name) + " is not valid UTF-8");
    if (!seen.insert(name).second) return InvalidArgument("duplicate safetensors tensor name " + Quoted(name));
    if (t == nullptr) return InvalidArgument("safetensors " + TensorLabel(name) + " is null");
    if (SafetensorsDTypeName(t->dtype()).empty()) {
      return InvalidArgument("safetensors " + TensorLabel(name) + " has an invalid dtype");
    }
    if (t->byte_size() > 0 && t->data() == nullptr) {
      return InvalidArgument("safetensors " + TensorLabel(name) + " has no data");
    }
  }
  for (const auto& [k, v] : metadata) {
    if (!ValidUtf8(k)) return InvalidArgument("safetensors metadata key " + Quoted(k) + " is not valid UTF-8");
    if (!ValidUtf8(v)) return InvalidArgument("safetensors metadata value of " + Quoted(k) + " is not valid UTF-8");
  }

  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first_m = true;
    for (const auto& [k, v] : metadata) {
      if (!first_m) header += ',';
      first_m = false;
      header += JsonString(k) + ":" + JsonString(v);
    }
    header += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!first) header += ',';
    first = false;
    header += JsonString(name);
    header += ":{\"dtype\":\"";
    header += SafetensorsDTypeName(t->dtype());
    header += "\",\"shape\":[";
    for (size_t i = 0; i < t->shape().size(); ++i) {
      if (i) header += ',';
      header += std::to_string(t->shape()[i]);
    }
    const uint64_t end = offset + static_cast<uint64_t>(t->byte_size());
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += '}';
  while ((8 + header.size()) % 8 != 0) header += ' ';

  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + offset);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (const auto& [name, t] : tensors) {
    if (t->byte_size() > 0) out.insert(out.end(), t->data(), t->data() + t->byte_size());
  }
  return out;
}

}  // namespace consensor
