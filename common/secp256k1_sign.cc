#include "common/secp256k1_sign.h"

#include <secp256k1.h>
#include <secp256k1_recovery.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "common/keccak.h"

namespace consensor {
namespace {

// The group order n and n/2, big-endian.
constexpr std::array<uint8_t, 32> kOrder = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                            0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xBA, 0xAE, 0xDC, 0xE6, 0xAF, 0x48,
                                            0xA0, 0x3B, 0xBF, 0xD2, 0x5E, 0x8C, 0xD0, 0x36, 0x41, 0x41};
constexpr std::array<uint8_t, 32> kHalfOrder = {0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x5D, 0x57, 0x6E, 0x73, 0x57, 0xA4,
                                                0x50, 0x1D, 0xDF, 0xE9, 0x2F, 0x46, 0x68, 0x1B, 0x20, 0xA0};

bool IsZero(const std::array<uint8_t, 32>& v) {
  return std::all_of(v.begin(), v.end(), [](uint8_t b) { return b == 0; });
}

// Big-endian comparison: <0, 0, >0.
int Compare(const std::array<uint8_t, 32>& a, const std::array<uint8_t, 32>& b) {
  return std::memcmp(a.data(), b.data(), 32);
}

// One context for the process, created on first use (thread-safe static initialization). All
// libsecp256k1 functions used here take a const context and are safe to call concurrently.
const secp256k1_context* Context() {
  static secp256k1_context* ctx = [] {
    secp256k1_context* c = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    unsigned char seed[32];
    if (c != nullptr && RAND_bytes(seed, sizeof(seed)) == 1) {
      // Side-channel blinding only; an unrandomized context is still correct.
      if (secp256k1_context_randomize(c, seed) != 1) {
        // Unreachable with a fresh context; an unrandomized context is still correct.
      }
    }
    OPENSSL_cleanse(seed, sizeof(seed));
    return c;
  }();
  return ctx;
}

Status CheckScalars(const EcdsaSignature& sig) {
  if (IsZero(sig.r) || Compare(sig.r, kOrder) >= 0)
    return InvalidArgument("signature r is zero or not below the curve order");
  if (IsZero(sig.s) || Compare(sig.s, kOrder) >= 0)
    return InvalidArgument("signature s is zero or not below the curve order");
  if (!IsLowS(sig.s))
    return InvalidArgument("signature s is in the upper half of the curve order (malleable, rejected per EIP-2)");
  if (sig.recovery_id > 1)
    return InvalidArgument("signature recovery id must be 0 or 1, got " + std::to_string(sig.recovery_id));
  return OkStatus();
}

}  // namespace

bool IsLowS(const std::array<uint8_t, 32>& s) { return !IsZero(s) && Compare(s, kHalfOrder) <= 0; }

Address20 AddressFromPublicKey64(std::span<const uint8_t, 64> xy) {
  Hash256 h = Keccak256(std::span<const uint8_t>(xy.data(), xy.size()));
  Address20 out{};
  std::copy(h.begin() + 12, h.end(), out.begin());
  return out;
}

namespace {
StatusOr<Address20> AddressFromPubkey(const secp256k1_context* ctx, const secp256k1_pubkey& pubkey) {
  unsigned char serialized[65];
  size_t len = sizeof(serialized);
  if (secp256k1_ec_pubkey_serialize(ctx, serialized, &len, &pubkey, SECP256K1_EC_UNCOMPRESSED) != 1 || len != 65) {
    return Internal("secp256k1 public key serialization failed");
  }
  return AddressFromPublicKey64(std::span<const uint8_t, 64>(serialized + 1, 64));
}
}  // namespace

StatusOr<Address20> AddressFromSecretKey(const Secp256k1Secret& secret) {
  const secp256k1_context* ctx = Context();
  if (ctx == nullptr) return Internal("secp256k1 context could not be created");
  if (secp256k1_ec_seckey_verify(ctx, secret.data()) != 1) {
    return InvalidArgument("not a valid secp256k1 private key (zero, or not below the group order)");
  }
  secp256k1_pubkey pubkey;
  if (secp256k1_ec_pubkey_create(ctx, &pubkey, secret.data()) != 1) return Internal("secp256k1 public key failed");
  return AddressFromPubkey(ctx, pubkey);
}

StatusOr<EcdsaSignature> SignDigest(const Secp256k1Secret& secret, const Hash256& digest) {
  const secp256k1_context* ctx = Context();
  if (ctx == nullptr) return Internal("secp256k1 context could not be created");
  if (secp256k1_ec_seckey_verify(ctx, secret.data()) != 1) {
    return InvalidArgument("not a valid secp256k1 private key (zero, or not below the group order)");
  }
  secp256k1_ecdsa_recoverable_signature sig;
  // nullptr nonce function = RFC 6979 (secp256k1_nonce_function_default).
  if (secp256k1_ecdsa_sign_recoverable(ctx, &sig, digest.data(), secret.data(), nullptr, nullptr) != 1) {
    return Internal("secp256k1 signing failed");
  }
  unsigned char compact[64];
  int recid = 0;
  if (secp256k1_ecdsa_recoverable_signature_serialize_compact(ctx, compact, &recid, &sig) != 1) {
    return Internal("secp256k1 signature serialization failed");
  }
  EcdsaSignature out;
  std::memcpy(out.r.data(), compact, 32);
  std::memcpy(out.s.data(), compact + 32, 32);
  out.recovery_id = static_cast<uint8_t>(recid);
  // libsecp256k1 always produces low s; recovery ids 2 and 3 need r >= p - n, which has
  // negligible probability (~2^-127) and which Ethereum cannot express. Refuse rather than emit.
  if (!IsLowS(out.s) || out.recovery_id > 1) return Internal("secp256k1 produced a non-canonical signature");
  return out;
}

namespace {
std::atomic<uint64_t> recoveries{0};
}  // namespace

uint64_t SignatureRecoveries() { return recoveries.load(std::memory_order_relaxed); }

StatusOr<Address20> RecoverAddress(const Hash256& digest, const EcdsaSignature& sig) {
  RETURN_IF_ERROR(CheckScalars(sig));
  const secp256k1_context* ctx = Context();
  if (ctx == nullptr) return Internal("secp256k1 context could not be created");
  unsigned char compact[64];
  std::memcpy(compact, sig.r.data(), 32);
  std::memcpy(compact + 32, sig.s.data(), 32);
  secp256k1_ecdsa_recoverable_signature parsed;
  if (secp256k1_ecdsa_recoverable_signature_parse_compact(ctx, &parsed, compact, sig.recovery_id) != 1) {
    return InvalidArgument("signature could not be parsed");
  }
  secp256k1_pubkey pubkey;
  recoveries.fetch_add(1, std::memory_order_relaxed);
  if (secp256k1_ecdsa_recover(ctx, &pubkey, &parsed, digest.data()) != 1) {
    return InvalidArgument("no public key recovers from this signature and digest");
  }
  return AddressFromPubkey(ctx, pubkey);
}

std::array<uint8_t, 65> ToBytes65(const EcdsaSignature& sig) {
  std::array<uint8_t, 65> out{};
  std::copy(sig.r.begin(), sig.r.end(), out.begin());
  std::copy(sig.s.begin(), sig.s.end(), out.begin() + 32);
  out[64] = static_cast<uint8_t>(27 + sig.recovery_id);
  return out;
}

StatusOr<EcdsaSignature> FromBytes65(std::span<const uint8_t> bytes, bool allow_raw_recovery_id) {
  if (bytes.size() != 65)
    return InvalidArgument("a signature is 65 bytes (r || s || v), got " + std::to_string(bytes.size()));
  EcdsaSignature sig;
  std::copy(bytes.begin(), bytes.begin() + 32, sig.r.begin());
  std::copy(bytes.begin() + 32, bytes.begin() + 64, sig.s.begin());
  uint8_t v = bytes[64];
  if (v == 27 || v == 28) {
    sig.recovery_id = static_cast<uint8_t>(v - 27);
  } else if (allow_raw_recovery_id && (v == 0 || v == 1)) {
    sig.recovery_id = v;
  } else {
    return InvalidArgument(std::string("signature v must be 27 or 28") + (allow_raw_recovery_id ? " (or 0/1)" : "") +
                           ", got " + std::to_string(v));
  }
  RETURN_IF_ERROR(CheckScalars(sig));
  return sig;
}

}  // namespace consensor
