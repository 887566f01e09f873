// Recursive Length Prefix (RLP) encoding, Ethereum yellow paper appendix B.
//
// The decoder is strict: it accepts only the one canonical encoding of each item, so that
// decode(encode(x)) == x and encode(decode(b)) == b for every accepted b. It rejects a single
// byte below 0x80 wrapped in a 0x81 header, the long form for payloads shorter than 56 bytes,
// lengths with leading zero bytes, lengths past the end of the input, trailing bytes after the
// top-level item, nesting deeper than a limit, and more items than a limit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace consensor::node {

struct RlpItem {
  bool is_list = false;
  std::vector<uint8_t> bytes;  // the string payload when !is_list
  std::vector<RlpItem> list;   // the elements when is_list

  static RlpItem Bytes(std::span<const uint8_t> b);
  static RlpItem String(std::string_view s);
  // Minimal big-endian: 0 is the empty string, 1..127 a single byte.
  static RlpItem Uint(uint64_t v);
  // A big-endian integer of any width; leading zero bytes are stripped.
  static RlpItem UintBigEndian(std::span<const uint8_t> be);
  static RlpItem List(std::vector<RlpItem> items);

  bool operator==(const RlpItem&) const = default;
};

std::vector<uint8_t> RlpEncode(const RlpItem& item);
// Appends the encoding of a byte string / a list header for a payload of `payload_len` bytes.
void RlpAppendBytes(std::span<const uint8_t> b, std::vector<uint8_t>& out);
void RlpAppendListHeader(size_t payload_len, std::vector<uint8_t>& out);

struct RlpLimits {
  size_t max_depth = 64;         // lists nested more deeply are rejected
  size_t max_items = 1u << 20;   // total items (strings and lists) in one input
  size_t max_input = 64u << 20;  // input bytes
};

// Decodes exactly one item spanning the whole input. INVALID_ARGUMENT (with the byte offset)
// for any malformed or non-canonical input; RESOURCE_EXHAUSTED when a limit is exceeded.
StatusOr<RlpItem> RlpDecode(std::span<const uint8_t> data, const RlpLimits& limits = {});

// Integer views of a decoded string item. Canonical integers only: no leading zero byte (zero is
// the empty string). INVALID_ARGUMENT for a list, a leading zero, or a value too wide.
StatusOr<uint64_t> RlpToUint64(const RlpItem& item);
StatusOr<std::array<uint8_t, 32>> RlpToUint256(const RlpItem& item);  // big-endian, left-padded

}  // namespace consensor::node
