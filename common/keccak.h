// Keccak-256 as Ethereum uses it: the original Keccak submission's padding (domain byte 0x01),
// not FIPS-202 SHA3-256 (0x06). The two give different digests for every input. OpenSSL 3.0
// has no Keccak-256, so this is written directly from the Keccak-f[1600] specification.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/sha256.h"  // Hash256

namespace consensor {

class Keccak256Hasher {
 public:
  Keccak256Hasher() { Reset(); }
  void Update(std::span<const uint8_t> data);
  void Update(std::string_view data) {
    Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
  // Returns the digest and resets the hasher, so one object can hash several messages.
  Hash256 Finish();
  void Reset();

 private:
  static constexpr size_t kRate = 136;  // bytes absorbed per permutation: (1600 - 2*256) / 8
  std::array<uint64_t, 25> state_{};
  size_t pos_ = 0;  // bytes of the current block already absorbed
};

Hash256 Keccak256(std::span<const uint8_t> data);
inline Hash256 Keccak256(std::string_view data) {
  return Keccak256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

}  // namespace consensor
