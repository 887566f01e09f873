#include "common/npy.h"

#include "common/text.h"

#include "common/sha256.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

namespace consensor {

static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kMagicLen = sizeof(kMagic);
constexpr size_t kNpyAlign = 64;
// numpy leaves room after the dict so the first dim can grow in place (GROWTH_AXIS_MAX_DIGITS).
constexpr size_t kGrowthAxisMaxDigits = 21;

// ---------------------------------------------------------------------------------------------
// dtype strings

struct DescrInfo {
  std::string_view descr;
  DType dtype;
};

constexpr DescrInfo kAcceptedDescrs[] = {
    {"<f4", DType::kF32},
    {"<i4", DType::kI32},
    {"|i1", DType::kI8},
    {"i1", DType::kI8},
    {"|b1", DType::kBool},
    {"<i8", DType::kI64},
    {"|u1", DType::kU8},
    {"u1", DType::kU8},
    {"<i2", DType::kI16},
    {"<u2", DType::kU16},
    {"<u4", DType::kU32},
    {"<u8", DType::kU64},
    {"<f8", DType::kF64},
    {"<f2", DType::kF16},
    // npy has no bfloat16: bf16 is stored as 2-byte void elements (numpy's |V2; view the
    // bits with arr.view(np.uint16)). The graph's dtype says they are bf16.
    {"|V2", DType::kBF16},
    {"<V2", DType::kBF16},
};

std::string_view WriteDescr(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kI32: return "<i4";
    case DType::kI8: return "|i1";
    case DType::kBool: return "|b1";
    case DType::kI64: return "<i8";
    case DType::kU8: return "|u1";
    case DType::kI16: return "<i2";
    case DType::kU16: return "<u2";
    case DType::kU32: return "<u4";
    case DType::kU64: return "<u8";
    case DType::kF64: return "<f8";
    case DType::kF16: return "<f2";
    case DType::kBF16: return "|V2";
    default: return "";
  }
}

StatusOr<DType> DTypeFromDescr(std::string_view descr) {
  for (const DescrInfo& d : kAcceptedDescrs) {
    if (d.descr == descr) return d.dtype;
  }
  if (!descr.empty() && descr[0] == '>') {
    return InvalidArgument("big-endian npy arrays are not supported (dtype '" + Printable(descr) +
                           "'); convert with arr.astype(arr.dtype.newbyteorder('<'))");
  }
  return InvalidArgument("unsupported npy dtype '" + Printable(descr) +
                         "' (supported: <f4, <i4, |i1, |b1, <i8, |u1, <i2, <u2, <u4, <u8, <f8, <f2, |V2 for bf16)");
}

// ---------------------------------------------------------------------------------------------
// Header dict parser: a tiny tokenizer for the subset of Python literal syntax numpy writes.

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    Shape shape;
  };

  StatusOr<Header> Parse() {
    for (size_t i = 0; i < s_.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(s_[i]);
      bool ok = (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' || c == '\r';
      if (!ok) return Error("invalid byte 0x" + ToHex(std::span<const uint8_t>(&c, 1)), i);
    }
    if (s_.empty() || s_.back() != '\n') {
      return InvalidArgument("npy header does not end with a newline");
    }

    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipWs();
    RETURN_IF_ERROR(Expect('{', "'{' opening the header dict"));
    while (true) {
      SkipWs();
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      size_t key_pos = pos_;
      ASSIGN_OR_RETURN(std::string key, ParseString("a quoted key"));
      SkipWs();
      RETURN_IF_ERROR(Expect(':', "':' after key '" + Printable(key) + "'"));
      SkipWs();
      if (key == "descr") {
        if (have_descr) return Error("duplicate key 'descr'", key_pos);
        have_descr = true;
        if (Peek() == '[') {
          return InvalidArgument("structured npy dtypes are not supported (descr is a list)");
        }
        ASSIGN_OR_RETURN(h.descr, ParseString("a quoted dtype string for 'descr'"));
      } else if (key == "fortran_order") {
        if (have_fortran) return Error("duplicate key 'fortran_order'", key_pos);
        have_fortran = true;
        ASSIGN_OR_RETURN(h.fortran_order, ParseBool());
      } else if (key == "shape") {
        if (have_shape) return Error("duplicate key 'shape'", key_pos);
        have_shape = true;
        ASSIGN_OR_RETURN(h.shape, ParseShape());
      } else {
        return Error(
            "unexpected key '" + Printable(key) + "' (an npy header has exactly 'descr', 'fortran_order' and 'shape')",
            key_pos);
      }
      SkipWs();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      return Error("expected ',' or '}' after the value of '" + Printable(key) + "'", pos_);
    }
    SkipWs();
    if (pos_ != s_.size()) return Error("unexpected text after the header dict", pos_);
    if (!have_descr) return InvalidArgument("npy header is missing key 'descr'");
    if (!have_fortran) return InvalidArgument("npy header is missing key 'fortran_order'");
    if (!have_shape) return InvalidArgument("npy header is missing key 'shape'");
    return h;
  }

 private:
  static bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static bool IsIdent(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_'; }

  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void SkipWs() {
    while (pos_ < s_.size() && IsWs(s_[pos_])) ++pos_;
  }

  Status Error(const std::string& what, size_t at) const {
    std::string near = at < s_.size() ? " near '" + Printable(s_.substr(at), 20) + "'" : " at end of header";
    return InvalidArgument("malformed npy header: " + what + " at offset " + std::to_string(at) + near);
  }

  Status Expect(char c, const std::string& what) {
    if (Peek() != c) return Error("expected " + what, pos_);
    ++pos_;
    return OkStatus();
  }

  StatusOr<std::string> ParseString(const std::string& what) {
    char q = Peek();
    if (q != '\'' && q != '"') return Error("expected " + what, pos_);
    size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      char c = s_[pos_];
      if (c == '\\') return Error("escape sequences in strings are not supported", pos_);
      if (c == '\n' || c == '\r') return Error("unterminated string", start - 1);
      ++pos_;
    }
    if (pos_ >= s_.size()) return Error("unterminated string", start - 1);
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;  // closing quote
    return out;
  }

  StatusOr<bool> ParseBool() {
    size_t start = pos_;
    while (pos_ < s_.size() && IsIdent(s_[pos_])) ++pos_;
    std::string_view word = s_.substr(start, pos_ - start);
    if (word == "True") return true;
    if (word == "False") return false;
    return Error("expected True or False for 'fortran_order'", start);
  }

  StatusOr<int64_t> ParseDim() {
    size_t start = pos_;
    if (Peek() == '-') return InvalidArgument("npy shape has a negative dimension");
    if (!IsDigit(Peek())) return Error("expected a non-negative integer dimension", pos_);
    if (Peek() == '0' && pos_ + 1 < s_.size() && IsDigit(s_[pos_ + 1])) {
      return Error("integer with leading zeros", pos_);
    }
    int64_t v = 0;
    while (pos_ < s_.size() && IsDigit(s_[pos_])) {
      int d = s_[pos_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) {
        return InvalidArgument("npy shape dimension " + Printable(s_.substr(start), 30) + " is too large");
      }
      v = v * 10 + d;
      ++pos_;
    }
    if (IsIdent(Peek())) return Error("invalid integer literal", start);
    return v;
  }

  StatusOr<Shape> ParseShape() {
    size_t open = pos_;
    if (Peek() == '[') return Error("'shape' must be a tuple, not a list", pos_);
    RETURN_IF_ERROR(Expect('(', "a tuple for 'shape'"));
    Shape shape;
    bool trailing_comma = false;
    while (true) {
      SkipWs();
      if (Peek() == ')') {
        ++pos_;
        break;
      }
      if (shape.size() >= static_cast<size_t>(kMaxRank)) {
        return InvalidArgument("npy shape has more than " + std::to_string(kMaxRank) +
                               " dimensions (the maximum rank)");
      }
      ASSIGN_OR_RETURN(int64_t d, ParseDim());
      shape.push_back(d);
      SkipWs();
      if (Peek() == ',') {
        ++pos_;
        trailing_comma = true;
        continue;
      }
      trailing_comma = false;
      if (Peek() == ')') {
        ++pos_;
        break;
      }
      return Error("expected ',' or ')' in 'shape'", pos_);
    }
    // "(5)" is the integer 5 in Python, not a tuple.
    if (shape.size() == 1 && !trailing_comma) return Error("'shape' (n) is not a tuple; write (n,)", open);
    return shape;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

uint32_t LoadLe(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

std::string ShapeTuple(const Shape& shape) {
  if (shape.empty()) return "()";
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

StatusOr<NpyHeaderInfo> ParseNpyHeader(std::span<const uint8_t> prefix, uint64_t file_size, const NpyLimits& limits) {
  if (prefix.size() > file_size) return InvalidArgument("npy prefix is longer than the file");
  if (file_size == 0) return InvalidArgument("empty npy file (no magic string)");
  if (prefix.size() < kMagicLen || std::memcmp(prefix.data(), kMagic, kMagicLen) != 0) {
    return InvalidArgument("not an npy file: bad magic (expected \\x93NUMPY)");
  }
  if (prefix.size() < kMagicLen + 2) return InvalidArgument("truncated npy file: missing format version");
  const int major = prefix[6], minor = prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return InvalidArgument("unsupported npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                           " (supported: 1.0, 2.0, 3.0)");
  }
  const int len_bytes = major == 1 ? 2 : 4;
  const size_t header_start = kMagicLen + 2 + len_bytes;
  if (prefix.size() < header_start) return InvalidArgument("truncated npy file: missing header length");
  const uint64_t header_len = LoadLe(prefix.data() + 8, len_bytes);
  if (header_len > static_cast<uint64_t>(kNpyMaxHeaderBytes)) {
    return InvalidArgument("npy header length " + std::to_string(header_len) + " exceeds the maximum of " +
                           std::to_string(kNpyMaxHeaderBytes) + " bytes");
  }
  if (header_len > file_size - header_start) {
    return InvalidArgument("truncated npy header: header length " + std::to_string(header_len) +
                           " runs past the end of the file (" + std::to_string(file_size - header_start) +
                           " bytes available)");
  }
  if (header_len > prefix.size() - header_start) {
    return InvalidArgument("npy header is not within the first " + std::to_string(prefix.size()) + " bytes");
  }
  std::string_view header_text(reinterpret_cast<const char*>(prefix.data() + header_start), header_len);
  ASSIGN_OR_RETURN(HeaderParser::Header header, HeaderParser(header_text).Parse());

  ASSIGN_OR_RETURN(DType dtype, DTypeFromDescr(header.descr));
  if (header.fortran_order) {
    return InvalidArgument("npy arrays in Fortran order are not supported; save with np.ascontiguousarray");
  }
  auto n_or = CheckedNumElements(header.shape);
  if (!n_or.ok()) return n_or.status().WithContext("npy shape");
  const int64_t n = *n_or;
  const int64_t itemsize = DTypeSize(dtype);
  const int64_t max_bytes = limits.max_bytes < 0 ? 0 : limits.max_bytes;
  if (n > max_bytes / itemsize) {
    // n * itemsize may overflow int64 here, so report the element count.
    return ResourceExhausted("npy array " + std::string(DTypeName(dtype)) + ShapeToString(header.shape) + " has " +
                             std::to_string(n) + " elements of " + std::to_string(itemsize) +
                             " bytes, over the limit of " + std::to_string(max_bytes) + " bytes");
  }
  const uint64_t expected = static_cast<uint64_t>(n * itemsize);
  const uint64_t actual = file_size - header_start - header_len;
  const std::string desc = std::string(DTypeName(dtype)) + ShapeToString(header.shape);
  if (actual < expected) {
    return InvalidArgument("truncated npy data: " + desc + " needs " + std::to_string(expected) + " bytes, file has " +
                           std::to_string(actual));
  }
  if (actual > expected) {
    return InvalidArgument("npy file has " + std::to_string(actual - expected) + " trailing bytes after the data (" +
                           desc + " needs " + std::to_string(expected) + " bytes, file has " + std::to_string(actual) +
                           ")");
  }
  NpyHeaderInfo info;
  info.dtype = dtype;
  info.shape = std::move(header.shape);
  info.data_offset = static_cast<int64_t>(header_start + header_len);
  info.data_bytes = static_cast<int64_t>(expected);
  return info;
}

StatusOr<Tensor> ParseNpy(std::span<const uint8_t> bytes, const NpyLimits& limits) {
  ASSIGN_OR_RETURN(NpyHeaderInfo info, ParseNpyHeader(bytes, bytes.size(), limits));
  const DType dtype = info.dtype;
  const int64_t n = info.data_bytes / DTypeSize(dtype);
  const uint64_t expected = static_cast<uint64_t>(info.data_bytes);

  // Allocation is bounded by the input size (checked above) and by limits.max_bytes.
  Tensor t(dtype, std::move(info.shape));
  if (expected > 0) {
    if (t.data() == nullptr)
      return ResourceExhausted("out of memory allocating " + std::to_string(expected) + " bytes");
    std::memcpy(t.data(), bytes.data() + info.data_offset, expected);
  }
  if (dtype == DType::kBool) {
    const uint8_t* d = t.data();
    for (int64_t i = 0; i < n; ++i) {
      if (d[i] > 1) {
        return InvalidArgument("npy bool element " + std::to_string(i) + " has byte value " + std::to_string(d[i]) +
                               " (must be 0 or 1)");
      }
    }
  }
  return t;
}

Status CheckNpyTensorHash(std::span<const uint8_t> npy, std::string_view tensor_hash_hex, const NpyLimits& limits) {
  auto tensor = ParseNpy(npy, limits);
  if (!tensor.ok()) return DataLoss("not a valid .npy: " + tensor.status().message());
  if (ToHex(TensorHash(*tensor)) != tensor_hash_hex) return DataLoss("does not match its tensor hash");
  return OkStatus();
}

StatusOr<Tensor> ReadNpyFile(const std::string& path, const NpyLimits& limits) {
  const std::string ctx = "reading npy file '" + path + "'";
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    std::string m = ctx + ": " + ErrnoText(err);
    return err == ENOENT ? NotFound(m) : FailedPrecondition(m);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  // Largest valid file: preamble + header + data.
  const uint64_t max_data = limits.max_bytes < 0 ? 0 : static_cast<uint64_t>(limits.max_bytes);
  const uint64_t cap = max_data + 12 + static_cast<uint64_t>(kNpyMaxHeaderBytes);
  auto too_big = [&]() {
    return ResourceExhausted(ctx + ": file is larger than the limit of " + std::to_string(max_data) +
                             " data bytes plus header");
  };

  constexpr size_t kChunk = 1 << 20;
  std::vector<uint8_t> buf;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (static_cast<uint64_t>(st.st_size) > cap) return too_big();
    // Room for the whole file plus the final read that sees EOF, so the buffer never regrows.
    buf.reserve(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(st.st_size) + kChunk, cap + 1)));
  }
  size_t used = 0;
  while (true) {
    // Read in chunks; never hold more than cap + 1 bytes regardless of what fstat said.
    size_t want = kChunk;
    if (used + want > cap + 1) want = static_cast<size_t>(cap + 1 - used);
    if (buf.size() < used + want) buf.resize(used + want);
    ssize_t r = ::read(fd, buf.data() + used, want);
    if (r < 0) {
      if (errno == EINTR) continue;
      return DataLoss(ctx + ": " + ErrnoText(errno));
    }
    if (r == 0) break;
    used += static_cast<size_t>(r);
    if (used > cap) return too_big();
  }
  buf.resize(used);
  auto t = ParseNpy(buf, limits);
  if (!t.ok()) return t.status().WithContext(ctx);
  return t;
}

std::vector<uint8_t> EncodeNpy(const Tensor& tensor) {
  return EncodeNpy(tensor.dtype(), tensor.shape(), tensor.bytes());
}

std::vector<uint8_t> EncodeNpy(DType dtype, const Shape& shape, std::span<const uint8_t> data) {
  if (static_cast<uint64_t>(NumElements(shape)) * DTypeSize(dtype) != data.size()) return {};
  std::vector<uint8_t> out = EncodeNpyHeader(dtype, shape);
  if (out.empty()) return {};
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> EncodeNpyHeader(DType dtype, const Shape& shape) {
  std::string_view descr = WriteDescr(dtype);
  if (descr.empty()) return {};
  // Same layout as numpy's np.save (format 1.0): keys sorted, "key: repr(value), ", spare
  // spaces for growing the first axis, then padding so the data starts on a 64-byte boundary.
  std::string dict =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + ShapeTuple(shape) + ", }";
  if (!shape.empty()) {
    size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const size_t hlen = dict.size() + 1;  // + '\n'
  const size_t padlen = kNpyAlign - ((kMagicLen + 2 + 2 + hlen) % kNpyAlign);
  dict.append(padlen, ' ');
  dict.push_back('\n');
  // A rank <= 8 shape keeps the header far below the u16 limit.
  const uint16_t header_len = static_cast<uint16_t>(dict.size());

  std::vector<uint8_t> out;
  out.reserve(kMagicLen + 4 + dict.size() + static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype));
  out.insert(out.end(), kMagic, kMagic + kMagicLen);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(header_len & 0xff));
  out.push_back(static_cast<uint8_t>(header_len >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  return out;
}

Status WriteNpyFile(const std::string& path, const Tensor& tensor) {
  const std::string ctx = "writing npy file '" + path + "'";
  if (!IsValidDType(tensor.dtype())) return InvalidArgument(ctx + ": tensor has an invalid dtype");
  std::vector<uint8_t> bytes = EncodeNpy(tensor);

  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return FailedPrecondition(ctx + ": cannot create temporary file: " + ErrnoText(errno));
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return DataLoss(ctx + ": " + what + ": " + ErrnoText(err));
  };
  ::fchmod(fd, 0644);  // mkstemp creates 0600; match what np.save would leave with a usual umask
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return fail("write failed", errno);
    }
    off += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) return fail("fsync failed", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return DataLoss(ctx + ": close failed: " + ErrnoText(err));
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return DataLoss(ctx + ": rename failed: " + ErrnoText(err));
  }
  // Make the rename itself durable (best effort).
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

}  // namespace consensor
