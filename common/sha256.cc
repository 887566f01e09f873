// The low-level SHA256_* functions, deprecated by OpenSSL 3 in favour of EVP: an EVP hash
// looks up the provider's implementation, allocates two contexts and takes locks every time,
// which is about 1 us a hash on a warm core and some 10 us after an idle gap (mostly cache misses
// in that machinery), against a few hundred bytes of output hashed per small task.
// docs/PERFORMANCE.md, "The small models' warm task: SHA-256 without EVP". Both run OpenSSL's
// same block function (SHA-NI where the CPU has it); the digests are SHA-256's.
#define OPENSSL_SUPPRESS_DEPRECATED

#include "common/sha256.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cctype>

namespace consensor {

Sha256::Sha256() : ctx_(new SHA256_CTX) { SHA256_Init(static_cast<SHA256_CTX*>(ctx_)); }

Sha256::~Sha256() { delete static_cast<SHA256_CTX*>(ctx_); }

void Sha256::Update(std::span<const uint8_t> data) {
  if (!data.empty()) SHA256_Update(static_cast<SHA256_CTX*>(ctx_), data.data(), data.size());
}

void Sha256::UpdateU32(uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  Update(std::span<const uint8_t>(b, 4));
}

void Sha256::UpdateU64(uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  Update(std::span<const uint8_t>(b, 8));
}

Hash256 Sha256::Finish() {
  Hash256 out{};
  SHA256_Final(out.data(), static_cast<SHA256_CTX*>(ctx_));
  return out;
}

Hash256 Sha256Of(std::span<const uint8_t> data) {
  Sha256 h;
  h.Update(data);
  return h.Finish();
}

std::string ToHex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<std::vector<uint8_t>> BytesFromHex(std::string_view hex) {
  if (hex.size() % 2 != 0)
    return InvalidArgument("hex text has an odd number of digits (" + std::to_string(hex.size()) + ")");
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); ++i) {
    const int v = HexDigitValue(hex[i]);
    if (v < 0) return InvalidArgument("invalid hex digit in '" + std::string(hex.substr(0, 140)) + "'");
    out[i / 2] = static_cast<uint8_t>((out[i / 2] << 4) | v);
  }
  return out;
}

StatusOr<std::vector<uint8_t>> FixedBytesFromHex(std::string_view hex, size_t bytes, std::string_view what) {
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
  if (hex.size() != 2 * bytes) {
    return InvalidArgument(std::string(what) + " must be " + std::to_string(2 * bytes) + " hex digits, got " +
                           std::to_string(hex.size()));
  }
  for (char c : hex) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return InvalidArgument(std::string(what) + " has a non-hex digit '" + std::string(1, c) + "'");
    }
  }
  return BytesFromHex(hex);
}

StatusOr<Hash256> HashFieldFromHex(std::string_view hex, std::string_view what) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, FixedBytesFromHex(hex, 32, what));
  Hash256 h{};
  std::copy(bytes.begin(), bytes.end(), h.begin());
  return h;
}

StatusOr<Hash256> Hash256FromHex(std::string_view hex) {
  if (hex.size() != 64) return InvalidArgument("a SHA-256 hash is 64 hex digits, got " + std::to_string(hex.size()));
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, BytesFromHex(hex));
  Hash256 out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

}  // namespace consensor
