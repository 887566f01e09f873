// Hand-made operators for the protocol-rule tests: deterministic keys, addresses and stakes,
// and votes signed with them.
#pragma once

#include <string>
#include <vector>

#include "common/keccak.h"
#include "common/secp256k1_sign.h"
#include "common/uint256.h"
#include "consensus/attestation.h"
#include "consensus/operator_set.h"
#include "consensus/quorum.h"

namespace consensor::consensus::fixture {

inline Secp256k1Secret Key(int i) { return Keccak256("protocol rule operator " + std::to_string(i)); }
inline Address20 Addr(int i) { return *AddressFromSecretKey(Key(i)); }

inline Hash256 H(uint8_t v) {
  Hash256 h{};
  h[0] = 0xc0;
  h[31] = v;
  return h;
}

inline Uint256 Ether(uint64_t n) { return *Uint256FromDecimal(std::to_string(n) + "000000000000000000"); }

inline Eip712Domain Domain() { return {31337, Address20{0x51}}; }

// Operators 1..n with `ether(i)` ether each (1 ether each by default).
inline std::vector<WeightedOperator> Registry(int n, uint64_t (*ether)(int) = nullptr) {
  std::vector<WeightedOperator> registry;
  for (int i = 1; i <= n; ++i) registry.push_back({Addr(i), Ether(ether ? ether(i) : 1)});
  return registry;
}

inline SignedAttestation Vote(int signer, const Hash256& task, uint64_t block, uint8_t result, uint8_t trace = 3,
                              const Eip712Domain& domain = Domain()) {
  SignedAttestation v;
  v.attestation = {task, H(result), H(trace), block};
  v.signature = *SignAttestation(Key(signer), domain, v.attestation);
  return v;
}

// The operator number (1..n) of an address, 0 when it is none of them.
inline int OperatorNumber(const Address20& a, int n) {
  for (int i = 1; i <= n; ++i) {
    if (Addr(i) == a) return i;
  }
  return 0;
}

}  // namespace consensor::consensus::fixture
