// SHA-256 (OpenSSL EVP) and hex helpers.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace consensor {

using Hash256 = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::span<const uint8_t> data);
  void Update(std::string_view data) {
    Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
  void UpdateU8(uint8_t v) { Update(std::span<const uint8_t>(&v, 1)); }
  void UpdateU32(uint32_t v);  // little-endian
  void UpdateU64(uint64_t v);  // little-endian
  Hash256 Finish();

 private:
  void* ctx_;
};

Hash256 Sha256Of(std::span<const uint8_t> data);
inline Hash256 Sha256Of(std::string_view data) {
  return Sha256Of(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

std::string ToHex(std::span<const uint8_t> bytes);
// The value of one hex digit (either case), or -1.
int HexDigitValue(char c);
StatusOr<Hash256> Hash256FromHex(std::string_view hex);
// Any even number of hex digits, no prefix.
StatusOr<std::vector<uint8_t>> BytesFromHex(std::string_view hex);
// Exactly `bytes` bytes as hex digits, with an optional 0x prefix; INVALID_ARGUMENT naming `what`.
StatusOr<std::vector<uint8_t>> FixedBytesFromHex(std::string_view hex, size_t bytes, std::string_view what);
// FixedBytesFromHex for a 32-byte hash.
StatusOr<Hash256> HashFieldFromHex(std::string_view hex, std::string_view what);

}  // namespace consensor
