// Ethereum v3 JSON keystores (the go-ethereum format): scrypt or pbkdf2-sha256 key derivation,
// aes-128-ctr encryption, and a Keccak-256 MAC. Passwords come from a file or an environment
// variable, never from a command-line flag (flags end up in shell history and `ps`).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/address.h"         // Address20 and its text forms
#include "common/secp256k1_sign.h"  // Secp256k1Secret
#include "common/status.h"

namespace consensor::node {

// secp256k1: INVALID_ARGUMENT when the key is zero or not below the group order.
StatusOr<Address20> AddressFromSecret(const Secp256k1Secret& secret);
// A fresh key from the OS CSPRNG.
StatusOr<Secp256k1Secret> GenerateSecretKey();

enum class Kdf { kScrypt, kPbkdf2 };
struct KdfParams {
  Kdf kdf = Kdf::kScrypt;
  // geth's "standard" parameters; tests and devnets use lighter ones.
  uint64_t scrypt_n = 262144;
  uint32_t scrypt_r = 8;
  uint32_t scrypt_p = 1;
  uint32_t pbkdf2_iterations = 262144;
};
KdfParams LightKdfParams();  // scrypt n=4096 p=6, geth's --lightkdf

// Returns the keystore JSON (version 3, with "address", "id" (a random UUID), "crypto").
StatusOr<std::string> EncryptKeystore(const Secp256k1Secret& secret, std::string_view password,
                                      const KdfParams& params);

struct DecryptedKey {
  Secp256k1Secret secret{};
  Address20 address{};
};
// INVALID_ARGUMENT for malformed JSON or unsupported parameters (with the field named),
// PERMISSION_DENIED for a wrong password (MAC mismatch). KDF work is capped so a hostile file
// cannot demand unbounded memory or time (scrypt n*r*128 bytes <= 1 GiB, pbkdf2 c <= 10^7;
// see Scrypt below for the full scrypt limits). A plaintext shorter than 32 bytes is read as a
// big-endian number, as geth does. When the file has an "address" field it must match the key
// (which also catches an edited iv: the v3 MAC covers only the ciphertext).
StatusOr<DecryptedKey> DecryptKeystore(std::string_view json, std::string_view password);

// The password: exactly one of `file` and `env_var` must be non-empty. One trailing newline
// ("\n" or "\r\n") is stripped from a file, as geth does.
// A password file must pass CheckPrivateFile.
StatusOr<std::string> ReadPassword(const std::string& file, const std::string& env_var);

// Validates a keystore's structure and parameters without a password or any KDF work, and
// returns its "address" field (INVALID_ARGUMENT when the field is missing). The address is not
// covered by the MAC, so it is only a label until the file is decrypted.
StatusOr<Address20> KeystoreAddress(std::string_view json);

// Reads a keystore file, refusing anything over 1 MiB (real ones are about 500 bytes).
StatusOr<std::string> ReadKeystoreFile(const std::string& path);
// CheckPrivateFile + ReadKeystoreFile + DecryptKeystore, with the path in any error. This is how
// every signing key is loaded (consensord, consensor's chain commands, keys inspect).
StatusOr<DecryptedKey> DecryptKeystoreFile(const std::string& path, std::string_view password);

// PERMISSION_DENIED when group or others have any access to `path` (mode & 077), naming the
// file and the fix: a keystore or password file others can read is a key others can copy.
Status CheckPrivateFile(const std::string& path, std::string_view what);

// scrypt (RFC 7914), Botan's. Not OpenSSL's: it enforces RFC 7914's N < 2^(16r), which real
// keystores (geth's wiki vector: n=2^18, r=1) violate. Same caps as DecryptKeystore: n a power
// of two >= 2, n*r*128 <= 1 GiB, p*r*128 <= 64 MiB, n*r*p <= 2^25, and Botan's n <= 2^22,
// r <= 256, p <= 1024; INVALID_ARGUMENT otherwise, RESOURCE_EXHAUSTED when the memory cannot
// be allocated. Exposed for tests.
Status Scrypt(std::string_view password, std::span<const uint8_t> salt, uint64_t n, uint32_t r, uint32_t p,
              std::span<uint8_t> out);

}  // namespace consensor::node
