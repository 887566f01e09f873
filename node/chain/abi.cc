#include "node/chain/abi.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "common/keccak.h"

namespace consensor::node {
namespace {

bool AllZero(std::span<const uint8_t> b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t x) { return x == 0; });
}

// ---------------------------------------------------------------------------------------------
// Type parser

class TypeParser {
 public:
  explicit TypeParser(std::string_view s) : s_(s) {}

  Status ParseType(size_t depth, AbiType& out) {
    if (depth > kAbiMaxTypeDepth) return Err("types nested deeper than " + std::to_string(kAbiMaxTypeDepth));
    if (++nodes_ > kAbiMaxTypeNodes) return Err("more than " + std::to_string(kAbiMaxTypeNodes) + " types");
    if (Peek() == '(') {
      out = AbiType{};
      out.kind = AbiType::Kind::kTuple;
      RETURN_IF_ERROR(ParseList(depth + 1, out.components, nullptr));
      if (out.components.empty()) return Err("empty tuple type");
    } else {
      RETURN_IF_ERROR(ParseElementary(out));
    }
    while (Peek() == '[') {
      ++pos_;
      AbiType arr;
      arr.kind = AbiType::Kind::kArray;
      arr.size = 0;
      if (Peek() != ']') {
        size_t start = pos_;
        uint64_t k = 0;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
          if (pos_ - start >= 6) return Err("fixed array length too large");
          k = k * 10 + static_cast<uint64_t>(s_[pos_] - '0');
          ++pos_;
        }
        if (pos_ == start) return Err("expected an array length or ']'");
        if (s_[start] == '0') return Err("fixed array length must be a positive number without leading zeros");
        arr.kind = AbiType::Kind::kFixedArray;
        arr.size = static_cast<size_t>(k);
      }
      if (Peek() != ']') return Err("expected ']'");
      ++pos_;
      arr.components.push_back(std::move(out));
      out = std::move(arr);
      if (++depth > kAbiMaxTypeDepth) return Err("types nested deeper than " + std::to_string(kAbiMaxTypeDepth));
      if (++nodes_ > kAbiMaxTypeNodes) return Err("more than " + std::to_string(kAbiMaxTypeNodes) + " types");
    }
    if (!out.IsDynamic()) {
      // HeadSize of children is already capped, so this product cannot overflow.
      if (StaticSize(out) > kAbiMaxStaticSize)
        return Err("static type larger than " + std::to_string(kAbiMaxStaticSize) + " bytes");
    }
    return OkStatus();
  }

  // '(' [type [" indexed"] (',' type [" indexed"])*] ')'
  Status ParseList(size_t depth, std::vector<AbiType>& out, std::vector<bool>* indexed) {
    if (Peek() != '(') return Err("expected '('");
    ++pos_;
    if (Peek() == ')') {
      ++pos_;
      return OkStatus();
    }
    while (true) {
      out.emplace_back();
      RETURN_IF_ERROR(ParseType(depth, out.back()));
      if (indexed != nullptr) {
        constexpr std::string_view kIndexed = " indexed";
        bool is_indexed = s_.substr(pos_).starts_with(kIndexed);
        if (is_indexed) pos_ += kIndexed.size();
        indexed->push_back(is_indexed);
      }
      char c = Peek();
      ++pos_;
      if (c == ')') return OkStatus();
      if (c != ',') return Err(c == '\0' ? "unexpected end, expected ',' or ')'" : "expected ',' or ')'");
    }
  }

  Status ParseName(std::string& name) {
    size_t start = pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
                (pos_ > start && c >= '0' && c <= '9');
      if (!ok) break;
      ++pos_;
    }
    if (pos_ == start) return Err("expected a name");
    name.assign(s_.substr(start, pos_ - start));
    return OkStatus();
  }

  bool AtEnd() const { return pos_ == s_.size(); }
  Status Err(const std::string& what) const {
    return InvalidArgument("invalid ABI type string '" + std::string(s_) + "' at position " + std::to_string(pos_) +
                           ": " + what);
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  static size_t StaticSize(const AbiType& t) { return t.HeadSize(); }

  // Parses [0-9]+ without leading zeros into n (at most 3 digits).
  static bool ParseSmallNumber(std::string_view digits, size_t& n) {
    if (digits.empty() || digits.size() > 3 || digits[0] == '0') return false;
    n = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      n = n * 10 + static_cast<size_t>(c - '0');
    }
    return true;
  }

  Status ParseElementary(AbiType& out) {
    size_t start = pos_;
    while (pos_ < s_.size() && ((s_[pos_] >= 'a' && s_[pos_] <= 'z') || (s_[pos_] >= '0' && s_[pos_] <= '9'))) ++pos_;
    std::string_view id = s_.substr(start, pos_ - start);
    if (id.empty()) return Err("expected a type");
    out = AbiType{};
    out.size = 0;
    if (id == "bool") {
      out.kind = AbiType::Kind::kBool;
    } else if (id == "address") {
      out.kind = AbiType::Kind::kAddress;
    } else if (id == "bytes") {
      out.kind = AbiType::Kind::kBytes;
    } else if (id == "string") {
      out.kind = AbiType::Kind::kString;
    } else if (id == "uint") {
      out.kind = AbiType::Kind::kUint;
      out.size = 256;
    } else if (id.starts_with("uint")) {
      size_t n = 0;
      if (!ParseSmallNumber(id.substr(4), n) || n % 8 != 0 || n < 8 || n > 256) {
        return Err("'" + std::string(id) + "' is not uint8..uint256 in steps of 8");
      }
      out.kind = AbiType::Kind::kUint;
      out.size = n;
    } else if (id.starts_with("bytes")) {
      size_t n = 0;
      if (!ParseSmallNumber(id.substr(5), n) || n < 1 || n > 32)
        return Err("'" + std::string(id) + "' is not bytes1..bytes32");
      out.kind = AbiType::Kind::kFixedBytes;
      out.size = n;
    } else {
      return Err("unsupported type '" + std::string(id) + "'");
    }
    return OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t nodes_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Encoder

void AppendWord(const Uint256& w, std::vector<uint8_t>& out) { out.insert(out.end(), w.begin(), w.end()); }
void AppendU64Word(uint64_t v, std::vector<uint8_t>& out) { AppendWord(Uint256FromU64(v), out); }

std::string KindName(AbiValue::Kind k) {
  switch (k) {
    case AbiValue::Kind::kUint: return "uint";
    case AbiValue::Kind::kBool: return "bool";
    case AbiValue::Kind::kAddress: return "address";
    case AbiValue::Kind::kFixedBytes: return "fixed bytes";
    case AbiValue::Kind::kBytes: return "bytes";
    case AbiValue::Kind::kString: return "string";
    case AbiValue::Kind::kArray: return "array";
    case AbiValue::Kind::kTuple: return "tuple";
  }
  return "?";
}

Status EncodeValue(const AbiType& type, const AbiValue& value, std::vector<uint8_t>& out);

// Heads then tails of values[i] typed by type_at(i).
Status EncodeSequence(const std::function<const AbiType&(size_t)>& type_at, std::span<const AbiValue> values,
                      std::vector<uint8_t>& out) {
  size_t head_size = 0;
  for (size_t i = 0; i < values.size(); ++i) head_size += type_at(i).HeadSize();
  std::vector<uint8_t> tail;
  for (size_t i = 0; i < values.size(); ++i) {
    const AbiType& t = type_at(i);
    if (t.IsDynamic()) {
      AppendU64Word(head_size + tail.size(), out);
      RETURN_IF_ERROR(EncodeValue(t, values[i], tail));
    } else {
      RETURN_IF_ERROR(EncodeValue(t, values[i], out));
    }
  }
  out.insert(out.end(), tail.begin(), tail.end());
  return OkStatus();
}

Status Mismatch(const AbiType& type, const AbiValue& value) {
  return InvalidArgument("ABI value of kind " + KindName(value.kind) + " does not match type " + type.Canonical());
}

Status EncodeValue(const AbiType& type, const AbiValue& value, std::vector<uint8_t>& out) {
  using K = AbiType::Kind;
  switch (type.kind) {
    case K::kUint: {
      if (value.kind != AbiValue::Kind::kUint) return Mismatch(type, value);
      size_t high_bytes = 32 - type.size / 8;
      if (!AllZero(std::span<const uint8_t>(value.uint.data(), high_bytes))) {
        return InvalidArgument("value does not fit in " + type.Canonical());
      }
      AppendWord(value.uint, out);
      return OkStatus();
    }
    case K::kBool:
      if (value.kind != AbiValue::Kind::kBool) return Mismatch(type, value);
      AppendU64Word(value.boolean ? 1 : 0, out);
      return OkStatus();
    case K::kAddress: {
      if (value.kind != AbiValue::Kind::kAddress) return Mismatch(type, value);
      Uint256 w{};
      std::copy(value.address.begin(), value.address.end(), w.begin() + 12);
      AppendWord(w, out);
      return OkStatus();
    }
    case K::kFixedBytes: {
      if (value.kind != AbiValue::Kind::kFixedBytes) return Mismatch(type, value);
      if (value.bytes.size() != type.size) {
        return InvalidArgument(type.Canonical() + " needs exactly " + std::to_string(type.size) + " bytes, got " +
                               std::to_string(value.bytes.size()));
      }
      Uint256 w{};
      std::copy(value.bytes.begin(), value.bytes.end(), w.begin());
      AppendWord(w, out);
      return OkStatus();
    }
    case K::kBytes:
    case K::kString: {
      bool ok = type.kind == K::kBytes ? value.kind == AbiValue::Kind::kBytes : value.kind == AbiValue::Kind::kString;
      if (!ok) return Mismatch(type, value);
      AppendU64Word(value.bytes.size(), out);
      out.insert(out.end(), value.bytes.begin(), value.bytes.end());
      out.resize(out.size() + (32 - value.bytes.size() % 32) % 32, 0);
      return OkStatus();
    }
    case K::kArray:
    case K::kFixedArray: {
      if (value.kind != AbiValue::Kind::kArray) return Mismatch(type, value);
      if (type.kind == K::kFixedArray && value.items.size() != type.size) {
        return InvalidArgument(type.Canonical() + " needs exactly " + std::to_string(type.size) + " elements, got " +
                               std::to_string(value.items.size()));
      }
      if (type.kind == K::kArray) AppendU64Word(value.items.size(), out);
      const AbiType& elem = type.components[0];
      return EncodeSequence([&](size_t) -> const AbiType& { return elem; }, value.items, out);
    }
    case K::kTuple: {
      if (value.kind != AbiValue::Kind::kTuple) return Mismatch(type, value);
      if (value.items.size() != type.components.size()) {
        return InvalidArgument(type.Canonical() + " has " + std::to_string(type.components.size()) + " fields, got " +
                               std::to_string(value.items.size()));
      }
      return EncodeSequence([&](size_t i) -> const AbiType& { return type.components[i]; }, value.items, out);
    }
  }
  return Internal("unknown ABI type kind");
}

// ---------------------------------------------------------------------------------------------
// Decoder

class Decoder {
 public:
  explicit Decoder(std::span<const uint8_t> data) : data_(data), budget_(data.size()) {}

  Status DecodeSequence(const std::function<const AbiType&(size_t)>& type_at, size_t count, size_t base,
                        std::vector<AbiValue>& out) {
    size_t head = base;
    out.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const AbiType& t = type_at(i);
      out.emplace_back();
      if (t.IsDynamic()) {
        ASSIGN_OR_RETURN(uint64_t offset, ReadSizeWord(head, "offset"));
        if (base > data_.size() || offset > data_.size() - base) {
          return Err(head, "offset " + std::to_string(offset) + " points past the end of the data");
        }
        RETURN_IF_ERROR(DecodeValue(t, base + static_cast<size_t>(offset), out.back()));
      } else {
        RETURN_IF_ERROR(DecodeValue(t, head, out.back()));
      }
      head += t.HeadSize();
    }
    return OkStatus();
  }

  Status DecodeValue(const AbiType& type, size_t pos, AbiValue& out) {
    using K = AbiType::Kind;
    switch (type.kind) {
      case K::kUint: {
        ASSIGN_OR_RETURN(const uint8_t* w, Word(pos));
        size_t high_bytes = 32 - type.size / 8;
        if (!AllZero(std::span<const uint8_t>(w, high_bytes)))
          return Err(pos, type.Canonical() + " has dirty high bits");
        out = AbiValue{};
        out.kind = AbiValue::Kind::kUint;
        std::memcpy(out.uint.data(), w, 32);
        return Charge(pos, 32);
      }
      case K::kBool: {
        ASSIGN_OR_RETURN(const uint8_t* w, Word(pos));
        if (!AllZero(std::span<const uint8_t>(w, 31)) || w[31] > 1) return Err(pos, "bool is not 0 or 1");
        out = AbiValue::Bool(w[31] == 1);
        return Charge(pos, 32);
      }
      case K::kAddress: {
        ASSIGN_OR_RETURN(const uint8_t* w, Word(pos));
        if (!AllZero(std::span<const uint8_t>(w, 12))) return Err(pos, "address has dirty high bytes");
        Address20 a{};
        std::memcpy(a.data(), w + 12, 20);
        out = AbiValue::Address(a);
        return Charge(pos, 32);
      }
      case K::kFixedBytes: {
        ASSIGN_OR_RETURN(const uint8_t* w, Word(pos));
        if (!AllZero(std::span<const uint8_t>(w + type.size, 32 - type.size))) {
          return Err(pos, type.Canonical() + " has dirty padding");
        }
        out = AbiValue::FixedBytes(std::span<const uint8_t>(w, type.size));
        return Charge(pos, 32);
      }
      case K::kBytes:
      case K::kString: {
        ASSIGN_OR_RETURN(uint64_t len, ReadSizeWord(pos, "length"));
        size_t start = pos + 32;  // ReadSizeWord checked pos + 32 <= size
        size_t avail = data_.size() - start;
        if (len > avail) return Err(pos, "length " + std::to_string(len) + " runs past the end of the data");
        size_t padded = static_cast<size_t>(len) + (32 - static_cast<size_t>(len) % 32) % 32;
        if (padded > avail)
          return Err(pos, "padding of a " + std::to_string(len) + "-byte value runs past the end of the data");
        if (!AllZero(data_.subspan(start + len, padded - len))) return Err(pos, "nonzero padding after bytes/string");
        RETURN_IF_ERROR(Charge(pos, 32 + static_cast<size_t>(len)));
        out = AbiValue{};
        out.kind = type.kind == K::kBytes ? AbiValue::Kind::kBytes : AbiValue::Kind::kString;
        out.bytes.assign(data_.begin() + start, data_.begin() + start + len);
        return OkStatus();
      }
      case K::kArray: {
        ASSIGN_OR_RETURN(uint64_t len, ReadSizeWord(pos, "array length"));
        RETURN_IF_ERROR(Charge(pos, 32));
        const AbiType& elem = type.components[0];
        size_t avail = data_.size() - (pos + 32);
        size_t elem_head = elem.HeadSize();  // >= 32: empty tuples and T[0] are not parsed
        if (len > avail / elem_head || len * 32 > budget_) {
          return Err(pos, "array length " + std::to_string(len) + " exceeds the data");
        }
        out = AbiValue{};
        out.kind = AbiValue::Kind::kArray;
        return DecodeSequence([&](size_t) -> const AbiType& { return elem; }, static_cast<size_t>(len), pos + 32,
                              out.items);
      }
      case K::kFixedArray: {
        const AbiType& elem = type.components[0];
        if (type.size > (data_.size() - std::min(pos, data_.size())) / elem.HeadSize() || type.size * 32 > budget_) {
          return Err(pos, type.Canonical() + " runs past the end of the data");
        }
        out = AbiValue{};
        out.kind = AbiValue::Kind::kArray;
        return DecodeSequence([&](size_t) -> const AbiType& { return elem; }, type.size, pos, out.items);
      }
      case K::kTuple: {
        out = AbiValue{};
        out.kind = AbiValue::Kind::kTuple;
        return DecodeSequence([&](size_t i) -> const AbiType& { return type.components[i]; }, type.components.size(),
                              pos, out.items);
      }
    }
    return Internal("unknown ABI type kind");
  }

 private:
  StatusOr<const uint8_t*> Word(size_t pos) {
    if (pos > data_.size() || data_.size() - pos < 32) return Err(pos, "data truncated (need a 32-byte word)");
    return data_.data() + pos;
  }

  // A word holding an offset or length: must fit comfortably in 64 bits (we then compare it
  // against the data size, which is far smaller).
  StatusOr<uint64_t> ReadSizeWord(size_t pos, const char* what) {
    ASSIGN_OR_RETURN(const uint8_t* w, Word(pos));
    if (!AllZero(std::span<const uint8_t>(w, 24))) return Err(pos, std::string(what) + " is too large");
    uint64_t v = 0;
    for (int i = 24; i < 32; ++i) v = (v << 8) | w[i];
    return v;
  }

  // Every decoded word and byte is charged against the input size: a canonical encoding never
  // exceeds it, while offsets aliasing the same data would multiply the output.
  Status Charge(size_t pos, size_t n) {
    if (n > budget_) return Err(pos, "decoded data exceeds the input size (aliased offsets?)");
    budget_ -= n;
    return OkStatus();
  }

  static Status Err(size_t pos, const std::string& what) {
    return InvalidArgument("malformed ABI data at byte " + std::to_string(pos) + ": " + what);
  }

  std::span<const uint8_t> data_;
  size_t budget_;
};

Status DecodeStaticFromWord(const AbiType& type, const Hash256& word, AbiValue& out) {
  Decoder d(word);
  return d.DecodeValue(type, 0, out);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Types

bool AbiType::IsDynamic() const {
  switch (kind) {
    case Kind::kBytes:
    case Kind::kString:
    case Kind::kArray: return true;
    case Kind::kFixedArray: return components[0].IsDynamic();
    case Kind::kTuple:
      return std::any_of(components.begin(), components.end(), [](const AbiType& t) { return t.IsDynamic(); });
    default: return false;
  }
}

size_t AbiType::HeadSize() const {
  if (IsDynamic()) return 32;
  if (kind == Kind::kFixedArray) return size * components[0].HeadSize();
  if (kind == Kind::kTuple) {
    size_t total = 0;
    for (const AbiType& t : components) total += t.HeadSize();
    return total;
  }
  return 32;
}

std::string AbiType::Canonical() const {
  switch (kind) {
    case Kind::kUint: return "uint" + std::to_string(size);
    case Kind::kBool: return "bool";
    case Kind::kAddress: return "address";
    case Kind::kFixedBytes: return "bytes" + std::to_string(size);
    case Kind::kBytes: return "bytes";
    case Kind::kString: return "string";
    case Kind::kArray: return components[0].Canonical() + "[]";
    case Kind::kFixedArray: return components[0].Canonical() + "[" + std::to_string(size) + "]";
    case Kind::kTuple: {
      std::string s = "(";
      for (size_t i = 0; i < components.size(); ++i) {
        if (i > 0) s += ",";
        s += components[i].Canonical();
      }
      return s + ")";
    }
  }
  return "?";
}

StatusOr<AbiType> ParseAbiType(std::string_view s) {
  if (s.size() > kAbiMaxSignatureLength) return InvalidArgument("ABI type string too long");
  TypeParser p(s);
  AbiType t;
  RETURN_IF_ERROR(p.ParseType(0, t));
  if (!p.AtEnd()) return p.Err("unexpected trailing characters");
  return t;
}

StatusOr<std::vector<AbiType>> ParseAbiTypeList(std::string_view s) {
  if (s.size() > kAbiMaxSignatureLength) return InvalidArgument("ABI type string too long");
  TypeParser p(s);
  std::vector<AbiType> types;
  RETURN_IF_ERROR(p.ParseList(1, types, nullptr));
  if (!p.AtEnd()) return p.Err("unexpected trailing characters");
  return types;
}

std::string AbiSignature::Canonical() const {
  std::string s = name + "(";
  for (size_t i = 0; i < params.size(); ++i) {
    if (i > 0) s += ",";
    s += params[i].Canonical();
  }
  return s + ")";
}

std::array<uint8_t, 4> AbiSignature::Selector() const {
  Hash256 h = Keccak256(Canonical());
  return {h[0], h[1], h[2], h[3]};
}

Hash256 AbiSignature::Topic() const { return Keccak256(Canonical()); }

StatusOr<AbiSignature> ParseAbiSignature(std::string_view s, bool allow_indexed) {
  if (s.size() > kAbiMaxSignatureLength) return InvalidArgument("ABI signature too long");
  TypeParser p(s);
  AbiSignature sig;
  RETURN_IF_ERROR(p.ParseName(sig.name));
  RETURN_IF_ERROR(p.ParseList(1, sig.params, &sig.indexed));
  if (!p.AtEnd()) return p.Err("unexpected trailing characters");
  if (!allow_indexed && std::find(sig.indexed.begin(), sig.indexed.end(), true) != sig.indexed.end()) {
    return p.Err("'indexed' is only allowed in event signatures");
  }
  return sig;
}

StatusOr<std::array<uint8_t, 4>> FunctionSelector(std::string_view signature) {
  ASSIGN_OR_RETURN(AbiSignature sig, ParseAbiSignature(signature));
  return sig.Selector();
}

StatusOr<Hash256> EventTopic(std::string_view signature) {
  ASSIGN_OR_RETURN(AbiSignature sig, ParseAbiSignature(signature, /*allow_indexed=*/true));
  return sig.Topic();
}

// ---------------------------------------------------------------------------------------------
// Values

AbiValue AbiValue::Uint(const Uint256& v) {
  AbiValue x;
  x.kind = Kind::kUint;
  x.uint = v;
  return x;
}
AbiValue AbiValue::Uint(uint64_t v) { return Uint(Uint256FromU64(v)); }
AbiValue AbiValue::Bool(bool b) {
  AbiValue x;
  x.kind = Kind::kBool;
  x.boolean = b;
  return x;
}
AbiValue AbiValue::Address(const Address20& a) {
  AbiValue x;
  x.kind = Kind::kAddress;
  x.address = a;
  return x;
}
AbiValue AbiValue::FixedBytes(std::span<const uint8_t> b) {
  AbiValue x;
  x.kind = Kind::kFixedBytes;
  x.bytes.assign(b.begin(), b.end());
  return x;
}
AbiValue AbiValue::Bytes32(const Hash256& h) { return FixedBytes(h); }
AbiValue AbiValue::Bytes(std::span<const uint8_t> b) {
  AbiValue x;
  x.kind = Kind::kBytes;
  x.bytes.assign(b.begin(), b.end());
  return x;
}
AbiValue AbiValue::String(std::string_view s) {
  AbiValue x;
  x.kind = Kind::kString;
  x.bytes.assign(s.begin(), s.end());
  return x;
}
AbiValue AbiValue::Array(std::vector<AbiValue> items) {
  AbiValue x;
  x.kind = Kind::kArray;
  x.items = std::move(items);
  return x;
}
AbiValue AbiValue::Tuple(std::vector<AbiValue> items) {
  AbiValue x;
  x.kind = Kind::kTuple;
  x.items = std::move(items);
  return x;
}

StatusOr<uint64_t> AbiValue::AsUint64() const {
  if (kind != Kind::kUint) return InvalidArgument("ABI value is a " + KindName(kind) + ", not a uint");
  return Uint256ToU64(uint);
}

StatusOr<Hash256> AbiValue::AsBytes32() const {
  if (kind != Kind::kFixedBytes || bytes.size() != 32) return InvalidArgument("ABI value is not a bytes32");
  Hash256 h{};
  std::copy(bytes.begin(), bytes.end(), h.begin());
  return h;
}

StatusOr<std::string> AbiValue::AsString() const {
  if (kind != Kind::kString && kind != Kind::kBytes)
    return InvalidArgument("ABI value is a " + KindName(kind) + ", not a string");
  return std::string(bytes.begin(), bytes.end());
}

// ---------------------------------------------------------------------------------------------
// Top-level encode / decode

StatusOr<std::vector<uint8_t>> AbiEncode(std::span<const AbiType> types, std::span<const AbiValue> values) {
  if (types.size() != values.size()) {
    return InvalidArgument("ABI encode: " + std::to_string(types.size()) + " types but " +
                           std::to_string(values.size()) + " values");
  }
  std::vector<uint8_t> out;
  RETURN_IF_ERROR(EncodeSequence([&](size_t i) -> const AbiType& { return types[i]; }, values, out));
  return out;
}

StatusOr<std::vector<uint8_t>> EncodeCall(std::string_view signature, std::span<const AbiValue> args) {
  ASSIGN_OR_RETURN(AbiSignature sig, ParseAbiSignature(signature));
  ASSIGN_OR_RETURN(std::vector<uint8_t> body, AbiEncode(sig.params, args));
  std::array<uint8_t, 4> sel = sig.Selector();
  std::vector<uint8_t> out(sel.begin(), sel.end());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

StatusOr<std::vector<AbiValue>> AbiDecode(std::span<const AbiType> types, std::span<const uint8_t> data,
                                          const AbiDecodeLimits& limits) {
  if (data.size() > limits.max_input) {
    return ResourceExhausted("ABI data of " + std::to_string(data.size()) + " bytes exceeds the limit of " +
                             std::to_string(limits.max_input));
  }
  Decoder d(data);
  std::vector<AbiValue> out;
  RETURN_IF_ERROR(d.DecodeSequence([&](size_t i) -> const AbiType& { return types[i]; }, types.size(), 0, out));
  return out;
}

StatusOr<std::vector<AbiValue>> AbiDecode(std::string_view type_list, std::span<const uint8_t> data,
                                          const AbiDecodeLimits& limits) {
  ASSIGN_OR_RETURN(std::vector<AbiType> types, ParseAbiTypeList(type_list));
  return AbiDecode(types, data, limits);
}

StatusOr<std::vector<AbiValue>> DecodeWithSelector(std::string_view signature, std::span<const uint8_t> data) {
  ASSIGN_OR_RETURN(AbiSignature sig, ParseAbiSignature(signature));
  if (data.size() < 4)
    return InvalidArgument("ABI data of " + std::to_string(data.size()) + " bytes has no 4-byte selector");
  std::array<uint8_t, 4> sel = sig.Selector();
  if (!std::equal(sel.begin(), sel.end(), data.begin())) {
    return NotFound("selector 0x" + ToHex(data.first(4)) + " is not " + sig.Canonical() + " (0x" + ToHex(sel) + ")");
  }
  return AbiDecode(sig.params, data.subspan(4));
}

StatusOr<std::string> DecodeRevertReason(std::span<const uint8_t> revert_data) {
  ASSIGN_OR_RETURN(std::vector<AbiValue> v, DecodeWithSelector("Error(string)", revert_data));
  return v[0].AsString();
}

StatusOr<std::vector<AbiValue>> DecodeEventLog(std::string_view signature, std::span<const Hash256> topics,
                                               std::span<const uint8_t> data) {
  ASSIGN_OR_RETURN(AbiSignature sig, ParseAbiSignature(signature, /*allow_indexed=*/true));
  size_t n_indexed = static_cast<size_t>(std::count(sig.indexed.begin(), sig.indexed.end(), true));
  if (n_indexed > 3) return InvalidArgument("an event has at most 3 indexed parameters");
  if (topics.empty()) return InvalidArgument("event log has no topics (anonymous events are not supported)");
  if (topics[0] != sig.Topic()) return NotFound("log topic0 is not the topic of " + sig.Canonical());
  if (topics.size() != 1 + n_indexed) {
    return InvalidArgument("event " + sig.Canonical() + " needs " + std::to_string(1 + n_indexed) +
                           " topics, log has " + std::to_string(topics.size()));
  }
  std::vector<AbiType> data_types;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    if (!sig.indexed[i]) data_types.push_back(sig.params[i]);
  }
  ASSIGN_OR_RETURN(std::vector<AbiValue> data_values, AbiDecode(data_types, data));
  std::vector<AbiValue> out(sig.params.size());
  size_t next_topic = 1, next_data = 0;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    if (!sig.indexed[i]) {
      out[i] = std::move(data_values[next_data++]);
      continue;
    }
    const AbiType& t = sig.params[i];
    const Hash256& topic = topics[next_topic++];
    if (t.IsDynamic()) {
      out[i] = AbiValue::Bytes32(topic);
    } else if (t.kind == AbiType::Kind::kTuple || t.kind == AbiType::Kind::kFixedArray) {
      return Unimplemented("indexed static tuples and fixed arrays are not supported");
    } else {
      RETURN_IF_ERROR(DecodeStaticFromWord(t, topic, out[i]));
    }
  }
  return out;
}

}  // namespace consensor::node
