#include "node/chain/rlp.h"

#include <algorithm>

#include <string>
#include <utility>

namespace consensor::node {
namespace {

// Minimal big-endian bytes of v (empty for 0).
void AppendBigEndianMinimal(uint64_t v, std::vector<uint8_t>& out) {
  int n = 0;
  for (uint64_t t = v; t != 0; t >>= 8) ++n;
  for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void AppendHeader(uint8_t short_base, size_t len, std::vector<uint8_t>& out) {
  if (len < 56) {
    out.push_back(static_cast<uint8_t>(short_base + len));
    return;
  }
  std::vector<uint8_t> len_bytes;
  AppendBigEndianMinimal(static_cast<uint64_t>(len), len_bytes);
  out.push_back(static_cast<uint8_t>(short_base + 55 + len_bytes.size()));
  out.insert(out.end(), len_bytes.begin(), len_bytes.end());
}

size_t EncodedSize(const RlpItem& item);

size_t HeaderSize(size_t len) {
  if (len < 56) return 1;
  size_t n = 0;
  for (uint64_t t = len; t != 0; t >>= 8) ++n;
  return 1 + n;
}

size_t ListPayloadSize(const RlpItem& item) {
  size_t total = 0;
  for (const RlpItem& e : item.list) total += EncodedSize(e);
  return total;
}

size_t EncodedSize(const RlpItem& item) {
  if (item.is_list) {
    size_t p = ListPayloadSize(item);
    return HeaderSize(p) + p;
  }
  if (item.bytes.size() == 1 && item.bytes[0] < 0x80) return 1;
  return HeaderSize(item.bytes.size()) + item.bytes.size();
}

void EncodeInto(const RlpItem& item, std::vector<uint8_t>& out) {
  if (!item.is_list) {
    RlpAppendBytes(item.bytes, out);
    return;
  }
  RlpAppendListHeader(ListPayloadSize(item), out);
  for (const RlpItem& e : item.list) EncodeInto(e, out);
}

class Decoder {
 public:
  Decoder(std::span<const uint8_t> data, const RlpLimits& limits) : data_(data), limits_(limits) {}

  // Decodes the item starting at pos_, which must end at or before `end`.
  Status DecodeItem(size_t end, size_t depth, RlpItem& out) {
    if (++items_ > limits_.max_items) {
      return ResourceExhausted("RLP input has more than " + std::to_string(limits_.max_items) + " items");
    }
    const size_t start = pos_;
    if (pos_ >= end) return Err(start, "unexpected end of input");
    const uint8_t b = data_[pos_++];
    if (b < 0x80) {
      out.is_list = false;
      out.bytes.assign(1, b);
      return OkStatus();
    }
    bool is_list = b >= 0xc0;
    uint8_t base = is_list ? 0xc0 : 0x80;
    size_t len = 0;
    if (b - base <= 55) {
      len = static_cast<size_t>(b - base);
    } else {
      size_t len_of_len = static_cast<size_t>(b - base - 55);  // 1..8
      if (len_of_len > end - pos_) return Err(start, "length-of-length runs past the end of the input");
      if (data_[pos_] == 0) return Err(start, "length has a leading zero byte");
      uint64_t l = 0;
      for (size_t i = 0; i < len_of_len; ++i) l = (l << 8) | data_[pos_ + i];
      pos_ += len_of_len;
      if (l < 56) return Err(start, "long-form length used for a payload shorter than 56 bytes");
      if (l > end - pos_) return Err(start, "payload length " + std::to_string(l) + " runs past the end of the input");
      len = static_cast<size_t>(l);
    }
    if (len > end - pos_)
      return Err(start, "payload length " + std::to_string(len) + " runs past the end of the input");
    const size_t payload_end = pos_ + len;
    if (!is_list) {
      if (len == 1 && data_[pos_] < 0x80) return Err(start, "single byte below 0x80 must be encoded as itself");
      out.is_list = false;
      out.bytes.assign(data_.begin() + pos_, data_.begin() + payload_end);
      pos_ = payload_end;
      return OkStatus();
    }
    if (depth + 1 > limits_.max_depth) {
      return ResourceExhausted("RLP lists nested deeper than " + std::to_string(limits_.max_depth));
    }
    out.is_list = true;
    out.list.clear();
    while (pos_ < payload_end) {
      out.list.emplace_back();
      RETURN_IF_ERROR(DecodeItem(payload_end, depth + 1, out.list.back()));
    }
    return OkStatus();
  }

  size_t pos() const { return pos_; }

 private:
  static Status Err(size_t offset, const std::string& what) {
    return InvalidArgument("malformed RLP at byte " + std::to_string(offset) + ": " + what);
  }

  std::span<const uint8_t> data_;
  const RlpLimits& limits_;
  size_t pos_ = 0;
  size_t items_ = 0;
};

}  // namespace

RlpItem RlpItem::Bytes(std::span<const uint8_t> b) {
  RlpItem item;
  item.bytes.assign(b.begin(), b.end());
  return item;
}

RlpItem RlpItem::String(std::string_view s) {
  RlpItem item;
  item.bytes.assign(s.begin(), s.end());
  return item;
}

RlpItem RlpItem::Uint(uint64_t v) {
  RlpItem item;
  AppendBigEndianMinimal(v, item.bytes);
  return item;
}

RlpItem RlpItem::UintBigEndian(std::span<const uint8_t> be) {
  size_t i = 0;
  while (i < be.size() && be[i] == 0) ++i;
  return Bytes(be.subspan(i));
}

RlpItem RlpItem::List(std::vector<RlpItem> items) {
  RlpItem item;
  item.is_list = true;
  item.list = std::move(items);
  return item;
}

void RlpAppendBytes(std::span<const uint8_t> b, std::vector<uint8_t>& out) {
  if (b.size() == 1 && b[0] < 0x80) {
    out.push_back(b[0]);
    return;
  }
  AppendHeader(0x80, b.size(), out);
  out.insert(out.end(), b.begin(), b.end());
}

void RlpAppendListHeader(size_t payload_len, std::vector<uint8_t>& out) { AppendHeader(0xc0, payload_len, out); }

std::vector<uint8_t> RlpEncode(const RlpItem& item) {
  std::vector<uint8_t> out;
  out.reserve(EncodedSize(item));
  EncodeInto(item, out);
  return out;
}

StatusOr<RlpItem> RlpDecode(std::span<const uint8_t> data, const RlpLimits& limits) {
  if (data.size() > limits.max_input) {
    return ResourceExhausted("RLP input of " + std::to_string(data.size()) + " bytes exceeds the limit of " +
                             std::to_string(limits.max_input));
  }
  if (data.empty()) return InvalidArgument("malformed RLP: empty input");
  Decoder d(data, limits);
  RlpItem item;
  RETURN_IF_ERROR(d.DecodeItem(data.size(), 0, item));
  if (d.pos() != data.size()) {
    return InvalidArgument("malformed RLP: " + std::to_string(data.size() - d.pos()) +
                           " trailing bytes after the item");
  }
  return item;
}

StatusOr<uint64_t> RlpToUint64(const RlpItem& item) {
  if (item.is_list) return InvalidArgument("RLP integer expected, got a list");
  if (!item.bytes.empty() && item.bytes[0] == 0) return InvalidArgument("RLP integer has a leading zero byte");
  if (item.bytes.size() > 8) return InvalidArgument("RLP integer wider than 64 bits");
  uint64_t v = 0;
  for (uint8_t b : item.bytes) v = (v << 8) | b;
  return v;
}

StatusOr<std::array<uint8_t, 32>> RlpToUint256(const RlpItem& item) {
  if (item.is_list) return InvalidArgument("RLP integer expected, got a list");
  if (!item.bytes.empty() && item.bytes[0] == 0) return InvalidArgument("RLP integer has a leading zero byte");
  if (item.bytes.size() > 32) return InvalidArgument("RLP integer wider than 256 bits");
  std::array<uint8_t, 32> out{};
  std::copy(item.bytes.begin(), item.bytes.end(), out.begin() + (32 - item.bytes.size()));
  return out;
}

}  // namespace consensor::node
