// Keccak-256 as Ethereum uses it: the original Keccak submission's padding (domain byte 0x01),
// not FIPS-202 SHA3-256 (0x06). The two give different digests for every input. OpenSSL 3.0
// has no Keccak-256; Botan's "Keccak-1600(256)" is this one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "common/sha256.h"  // Hash256

namespace Botan {
class HashFunction;  // declared only, so that Botan stays a private dependency of common
}

namespace consensor {

class Keccak256Hasher {
 public:
  Keccak256Hasher();
  Keccak256Hasher(const Keccak256Hasher& other);
  Keccak256Hasher& operator=(const Keccak256Hasher& other);
  ~Keccak256Hasher();

  void Update(std::span<const uint8_t> data);
  void Update(std::string_view data) {
    Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
  // Returns the digest and resets the hasher, so one object can hash several messages.
  Hash256 Finish();
  void Reset();

 private:
  std::unique_ptr<Botan::HashFunction> hash_;
};

Hash256 Keccak256(std::span<const uint8_t> data);
inline Hash256 Keccak256(std::string_view data) {
  return Keccak256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

}  // namespace consensor
