#include "node/keys/keystore.h"

#include "common/secp256k1_sign.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <botan/exceptn.h>
#include <botan/scrypt.h>
#include <nlohmann/json.hpp>

#include "common/keccak.h"
#include "common/sha256.h"

namespace consensor::node {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxScryptMemory = uint64_t{1} << 30;       // n*r*128 bytes
constexpr uint64_t kMaxScryptBlockMemory = uint64_t{1} << 26;  // p*r*128 bytes
constexpr uint64_t kMaxScryptWork = uint64_t{1} << 25;         // n*r*p, 16x geth's standard
constexpr uint64_t kMaxBotanScryptN = uint64_t{1} << 22;       // Botan::Scrypt throws above these
constexpr uint64_t kMaxBotanScryptR = 256;
constexpr uint64_t kMaxBotanScryptP = 1024;
constexpr uint64_t kMaxPbkdf2Iterations = 10'000'000;
constexpr size_t kMaxKeystoreBytes = size_t{1} << 20;
constexpr size_t kMaxPasswordFileBytes = size_t{64} << 10;
constexpr size_t kMaxJsonDepth = 16;  // real keystores nest 3 deep
constexpr size_t kDerivedKeyLen = 32;
constexpr size_t kIvLen = 16;
constexpr size_t kMaxSaltLen = 1024;

// Wipes secrets when they go out of scope, on every return path.
template <typename T>
struct Wiper {
  T& buf;
  ~Wiper() { OPENSSL_cleanse(buf.data(), buf.size() * sizeof(buf[0])); }
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::vector<uint8_t>> DecodeHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

// OpenSSL wants a non-null pointer even for an empty password.
const char* PasswordPtr(std::string_view password) { return password.empty() ? "" : password.data(); }

Status CheckScryptParams(uint64_t n, uint64_t r, uint64_t p) {
  if (n < 2 || (n & (n - 1)) != 0) return InvalidArgument("must be a power of two >= 2");
  if (r < 1 || p < 1) return InvalidArgument("r and p must be >= 1");
  if (r > kMaxScryptMemory / 128 || n > kMaxScryptMemory / 128 / r) {
    return InvalidArgument("n*r*128 exceeds the 1 GiB memory cap");
  }
  if (p > kMaxScryptBlockMemory / 128 / r) return InvalidArgument("p*r*128 exceeds the 64 MiB cap");
  if (n * r * p > kMaxScryptWork) return InvalidArgument("n*r*p exceeds the work cap of 2^25");
  // Botan's own limits. Within the caps above they refuse only n = 2^23 (with r = 1), r > 256
  // and p > 1024, which geth never writes; checked here so that validation without KDF work
  // refuses the same files as decryption.
  if (n > kMaxBotanScryptN) return InvalidArgument("n above 2^22 is not supported");
  if (r > kMaxBotanScryptR) return InvalidArgument("r above 256 is not supported");
  if (p > kMaxBotanScryptP) return InvalidArgument("p above 1024 is not supported");
  return OkStatus();
}

Status Pbkdf2Sha256(std::string_view password, std::span<const uint8_t> salt, uint64_t iterations,
                    std::span<uint8_t> out) {
  if (password.size() > INT_MAX || salt.size() > INT_MAX || out.size() > INT_MAX || iterations > INT_MAX) {
    return InvalidArgument("pbkdf2 input too large");
  }
  static const uint8_t kEmpty = 0;
  if (PKCS5_PBKDF2_HMAC(PasswordPtr(password), static_cast<int>(password.size()), salt.empty() ? &kEmpty : salt.data(),
                        static_cast<int>(salt.size()), static_cast<int>(iterations), EVP_sha256(),
                        static_cast<int>(out.size()), out.data()) != 1) {
    return Internal("PBKDF2-HMAC-SHA256 failed");
  }
  return OkStatus();
}

Status Aes128Ctr(std::span<const uint8_t> key, std::span<const uint8_t> iv, std::span<const uint8_t> in,
                 std::vector<uint8_t>& out) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  if (!ctx || key.size() != 16 || iv.size() != kIvLen || in.size() > INT_MAX)
    return Internal("aes-128-ctr setup failed");
  out.assign(in.size() + 16, 0);
  int len = 0, final_len = 0;
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ctr(), nullptr, key.data(), iv.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out.data(), &len, in.data(), static_cast<int>(in.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), out.data() + len, &final_len) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return Internal("aes-128-ctr failed");
  }
  out.resize(static_cast<size_t>(len + final_len));
  return OkStatus();
}

Hash256 KeystoreMac(std::span<const uint8_t> derived_key, std::span<const uint8_t> ciphertext) {
  Keccak256Hasher h;
  h.Update(derived_key.subspan(16, 16));
  h.Update(ciphertext);
  return h.Finish();
}

// ---------------------------------------------------------------------------------------------
// Keystore JSON

struct ParsedKeystore {
  Kdf kdf = Kdf::kScrypt;
  uint64_t n = 0, r = 0, p = 0, c = 0;
  std::vector<uint8_t> salt, iv, ciphertext;
  std::vector<uint8_t> mac;
  std::optional<Address20> address;
};

Status FieldError(std::string_view field, std::string_view problem) {
  return InvalidArgument("keystore field \"" + std::string(field) + "\": " + std::string(problem));
}

// Deeply nested input could exhaust the stack in a recursive parser or destructor; reject it
// before parsing. Brackets inside strings do not count.
bool NestingWithin(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth) return false;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

StatusOr<const json*> Member(const json& obj, const char* key, std::string_view path) {
  auto it = obj.find(key);
  if (it == obj.end()) return FieldError(path, "missing");
  return &*it;
}

StatusOr<const json*> ObjectMember(const json& obj, const char* key, std::string_view path) {
  ASSIGN_OR_RETURN(const json* v, Member(obj, key, path));
  if (!v->is_object()) return FieldError(path, "must be an object");
  return v;
}

StatusOr<std::string> StringMember(const json& obj, const char* key, std::string_view path) {
  ASSIGN_OR_RETURN(const json* v, Member(obj, key, path));
  if (!v->is_string()) return FieldError(path, "must be a string");
  return v->get<std::string>();
}

StatusOr<uint64_t> UintMember(const json& obj, const char* key, std::string_view path) {
  ASSIGN_OR_RETURN(const json* v, Member(obj, key, path));
  if (!v->is_number_unsigned()) return FieldError(path, "must be a non-negative integer");
  return v->get<uint64_t>();
}

StatusOr<std::vector<uint8_t>> HexMember(const json& obj, const char* key, std::string_view path, size_t min_len,
                                         size_t max_len) {
  ASSIGN_OR_RETURN(std::string text, StringMember(obj, key, path));
  std::optional<std::vector<uint8_t>> bytes = DecodeHex(text);
  if (!bytes) return FieldError(path, "must be an even number of hex digits without 0x");
  if (bytes->size() < min_len || bytes->size() > max_len) {
    std::string want =
        min_len == max_len ? std::to_string(min_len) : std::to_string(min_len) + " to " + std::to_string(max_len);
    return FieldError(path, "must be " + want + " bytes, got " + std::to_string(bytes->size()));
  }
  return std::move(*bytes);
}

StatusOr<ParsedKeystore> ParseKeystoreJson(std::string_view text) {
  if (text.size() > kMaxKeystoreBytes) return InvalidArgument("keystore is larger than 1 MiB");
  if (!NestingWithin(text, kMaxJsonDepth)) return InvalidArgument("keystore JSON is nested too deeply");
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("keystore is not valid JSON");
  if (!doc.is_object()) return InvalidArgument("keystore JSON must be an object");

  ParsedKeystore k;
  ASSIGN_OR_RETURN(const json* version, Member(doc, "version", "version"));
  if (!version->is_number_integer() || version->get<int64_t>() != 3) {
    return FieldError("version", "only version 3 keystores are supported");
  }
  if (auto it = doc.find("address"); it != doc.end()) {
    if (!it->is_string()) return FieldError("address", "must be a string");
    StatusOr<Address20> address = AddressFromHex(it->get<std::string>());
    if (!address.ok()) return FieldError("address", address.status().message());
    k.address = *address;
  }
  if (auto it = doc.find("id"); it != doc.end() && !it->is_string()) return FieldError("id", "must be a string");

  // geth matches field names case-insensitively; "Crypto" appears in files from old clients.
  const bool has_lower = doc.contains("crypto"), has_upper = doc.contains("Crypto");
  if (has_lower && has_upper) return FieldError("crypto", "present as both \"crypto\" and \"Crypto\"");
  if (!has_lower && !has_upper) return FieldError("crypto", "missing");
  ASSIGN_OR_RETURN(const json* crypto, ObjectMember(doc, has_lower ? "crypto" : "Crypto", "crypto"));

  ASSIGN_OR_RETURN(std::string cipher, StringMember(*crypto, "cipher", "crypto.cipher"));
  if (cipher != "aes-128-ctr") return FieldError("crypto.cipher", "unsupported cipher '" + cipher + "'");
  ASSIGN_OR_RETURN(const json* cipherparams, ObjectMember(*crypto, "cipherparams", "crypto.cipherparams"));
  ASSIGN_OR_RETURN(k.iv, HexMember(*cipherparams, "iv", "crypto.cipherparams.iv", kIvLen, kIvLen));
  ASSIGN_OR_RETURN(k.ciphertext, HexMember(*crypto, "ciphertext", "crypto.ciphertext", 1, 32));
  ASSIGN_OR_RETURN(k.mac, HexMember(*crypto, "mac", "crypto.mac", 32, 32));

  ASSIGN_OR_RETURN(std::string kdf, StringMember(*crypto, "kdf", "crypto.kdf"));
  ASSIGN_OR_RETURN(const json* kp, ObjectMember(*crypto, "kdfparams", "crypto.kdfparams"));
  ASSIGN_OR_RETURN(uint64_t dklen, UintMember(*kp, "dklen", "crypto.kdfparams.dklen"));
  if (dklen != kDerivedKeyLen) return FieldError("crypto.kdfparams.dklen", "must be 32");
  ASSIGN_OR_RETURN(k.salt, HexMember(*kp, "salt", "crypto.kdfparams.salt", 1, kMaxSaltLen));
  if (kdf == "scrypt") {
    k.kdf = Kdf::kScrypt;
    ASSIGN_OR_RETURN(k.n, UintMember(*kp, "n", "crypto.kdfparams.n"));
    ASSIGN_OR_RETURN(k.r, UintMember(*kp, "r", "crypto.kdfparams.r"));
    ASSIGN_OR_RETURN(k.p, UintMember(*kp, "p", "crypto.kdfparams.p"));
    Status s = CheckScryptParams(k.n, k.r, k.p);
    if (!s.ok()) return FieldError("crypto.kdfparams.n/r/p", s.message());
  } else if (kdf == "pbkdf2") {
    k.kdf = Kdf::kPbkdf2;
    ASSIGN_OR_RETURN(k.c, UintMember(*kp, "c", "crypto.kdfparams.c"));
    if (k.c < 1 || k.c > kMaxPbkdf2Iterations) return FieldError("crypto.kdfparams.c", "must be between 1 and 10^7");
    ASSIGN_OR_RETURN(std::string prf, StringMember(*kp, "prf", "crypto.kdfparams.prf"));
    if (prf != "hmac-sha256") return FieldError("crypto.kdfparams.prf", "unsupported prf '" + prf + "'");
  } else {
    return FieldError("crypto.kdf", "unsupported kdf '" + kdf + "'");
  }
  return k;
}

StatusOr<ParsedKeystore> ParseKeystore(std::string_view text) {
  // nlohmann may throw on allocation failure even with parse exceptions off.
  try {
    return ParseKeystoreJson(text);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("keystore could not be parsed: ") + e.what());
  }
}

StatusOr<std::string> ReadSmallFile(const std::string& path, size_t cap, std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    std::string msg = "cannot open " + std::string(what) + " '" + path + "': " + std::strerror(e);
    return e == ENOENT ? NotFound(msg) : FailedPrecondition(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(std::string(what) + " '" + path + "' is a directory");
  }
  // Read at most cap+1 bytes whatever the file claims, so /dev/zero or a growing file is safe.
  std::string data;
  // Reserve up front so a password is not left behind in buffers freed by reallocation.
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    data.reserve(std::min(cap, static_cast<size_t>(st.st_size)) + 1);
  }
  char buf[4096];
  while (true) {
    ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      OPENSSL_cleanse(buf, sizeof(buf));
      OPENSSL_cleanse(data.data(), data.size());
      return FailedPrecondition("cannot read " + std::string(what) + " '" + path + "': " + std::strerror(e));
    }
    if (got == 0) break;
    if (data.size() + static_cast<size_t>(got) > cap) {
      ::close(fd);
      OPENSSL_cleanse(buf, sizeof(buf));
      OPENSSL_cleanse(data.data(), data.size());
      return InvalidArgument(std::string(what) + " '" + path + "' is larger than " + std::to_string(cap) + " bytes");
    }
    data.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  OPENSSL_cleanse(buf, sizeof(buf));
  return data;
}

std::string NewUuid() {
  uint8_t b[16];
  if (RAND_bytes(b, sizeof(b)) != 1) std::memset(b, 0, sizeof(b));  // the id is a label, not a secret
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);                // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);                // RFC 4122 variant
  std::string hex = ToHex(b);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Addresses

StatusOr<Address20> AddressFromSecret(const Secp256k1Secret& secret) { return AddressFromSecretKey(secret); }

StatusOr<Secp256k1Secret> GenerateSecretKey() {
  Secp256k1Secret key{};
  // A random 256-bit value is out of range with probability ~2^-128; retry rather than reduce.
  for (int attempt = 0; attempt < 16; ++attempt) {
    if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
      return Internal("the OS random number generator failed");
    }
    if (AddressFromSecret(key).ok()) return key;
  }
  OPENSSL_cleanse(key.data(), key.size());
  return Internal("could not generate a valid secp256k1 key");
}

KdfParams LightKdfParams() {
  KdfParams p;
  p.kdf = Kdf::kScrypt;
  p.scrypt_n = 4096;
  p.scrypt_r = 8;
  p.scrypt_p = 6;
  p.pbkdf2_iterations = 4096;
  return p;
}

// ---------------------------------------------------------------------------------------------
// scrypt

Status Scrypt(std::string_view password, std::span<const uint8_t> salt, uint64_t n, uint32_t r, uint32_t p,
              std::span<uint8_t> out) {
  Status params = CheckScryptParams(n, r, p);
  if (!params.ok())
    return InvalidArgument("scrypt parameters n=" + std::to_string(n) + " r=" + std::to_string(r) +
                           " p=" + std::to_string(p) + ": " + params.message());
  if (out.empty() || out.size() > 4096) return InvalidArgument("scrypt output must be 1 to 4096 bytes");
  // Botan scrubs its scratch (secure_vector) when it frees it, on every path.
  try {
    Botan::scrypt(out.data(), out.size(), password.data(), password.size(), salt.data(), salt.size(), n, r, p);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("scrypt needs " + std::to_string(n * r * 128) + " bytes of memory");
  } catch (const Botan::Invalid_Argument& e) {
    return InvalidArgument(std::string("scrypt refused its parameters: ") + e.what());
  } catch (const std::exception& e) {
    return Internal(std::string("scrypt failed: ") + e.what());
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Keystore files

StatusOr<std::string> EncryptKeystore(const Secp256k1Secret& secret, std::string_view password,
                                      const KdfParams& params) {
  ASSIGN_OR_RETURN(Address20 address, AddressFromSecret(secret));
  if (params.kdf == Kdf::kScrypt) {
    RETURN_IF_ERROR(
        CheckScryptParams(params.scrypt_n, params.scrypt_r, params.scrypt_p).WithContext("scrypt parameters"));
  } else if (params.pbkdf2_iterations < 1 || params.pbkdf2_iterations > kMaxPbkdf2Iterations) {
    return InvalidArgument("pbkdf2 iterations must be between 1 and 10^7");
  }

  std::array<uint8_t, 32> salt{};
  std::array<uint8_t, kIvLen> iv{};
  if (RAND_bytes(salt.data(), salt.size()) != 1 || RAND_bytes(iv.data(), iv.size()) != 1) {
    return Internal("the OS random number generator failed");
  }
  std::array<uint8_t, kDerivedKeyLen> dk{};
  Wiper<std::array<uint8_t, kDerivedKeyLen>> wipe_dk{dk};
  if (params.kdf == Kdf::kScrypt) {
    RETURN_IF_ERROR(Scrypt(password, salt, params.scrypt_n, params.scrypt_r, params.scrypt_p, dk));
  } else {
    RETURN_IF_ERROR(Pbkdf2Sha256(password, salt, params.pbkdf2_iterations, dk));
  }
  std::vector<uint8_t> ciphertext;
  RETURN_IF_ERROR(Aes128Ctr(std::span<const uint8_t>(dk).first(16), iv, secret, ciphertext));
  const Hash256 mac = KeystoreMac(dk, ciphertext);

  try {
    json kdfparams;
    kdfparams["dklen"] = kDerivedKeyLen;
    kdfparams["salt"] = ToHex(salt);
    if (params.kdf == Kdf::kScrypt) {
      kdfparams["n"] = params.scrypt_n;
      kdfparams["r"] = params.scrypt_r;
      kdfparams["p"] = params.scrypt_p;
    } else {
      kdfparams["c"] = params.pbkdf2_iterations;
      kdfparams["prf"] = "hmac-sha256";
    }
    json crypto;
    crypto["cipher"] = "aes-128-ctr";
    crypto["ciphertext"] = ToHex(ciphertext);
    crypto["cipherparams"]["iv"] = ToHex(iv);
    crypto["kdf"] = params.kdf == Kdf::kScrypt ? "scrypt" : "pbkdf2";
    crypto["kdfparams"] = std::move(kdfparams);
    crypto["mac"] = ToHex(mac);
    json doc;
    doc["address"] = ToHex(address);
    doc["crypto"] = std::move(crypto);
    doc["id"] = NewUuid();
    doc["version"] = 3;
    return doc.dump();
  } catch (const std::exception& e) {
    return Internal(std::string("keystore JSON could not be built: ") + e.what());
  }
}

StatusOr<DecryptedKey> DecryptKeystore(std::string_view json_text, std::string_view password) {
  ASSIGN_OR_RETURN(ParsedKeystore k, ParseKeystore(json_text));
  std::array<uint8_t, kDerivedKeyLen> dk{};
  Wiper<std::array<uint8_t, kDerivedKeyLen>> wipe_dk{dk};
  if (k.kdf == Kdf::kScrypt) {
    RETURN_IF_ERROR(Scrypt(password, k.salt, k.n, static_cast<uint32_t>(k.r), static_cast<uint32_t>(k.p), dk));
  } else {
    RETURN_IF_ERROR(Pbkdf2Sha256(password, k.salt, k.c, dk));
  }
  const Hash256 mac = KeystoreMac(dk, k.ciphertext);
  if (CRYPTO_memcmp(mac.data(), k.mac.data(), mac.size()) != 0) {
    return PermissionDenied("wrong password for keystore (MAC mismatch)");
  }
  std::vector<uint8_t> plain;
  Wiper<std::vector<uint8_t>> wipe_plain{plain};
  RETURN_IF_ERROR(Aes128Ctr(std::span<const uint8_t>(dk).first(16), k.iv, k.ciphertext, plain));
  DecryptedKey out;
  // Shorter plaintexts are big-endian numbers with their leading zero bytes dropped.
  std::memcpy(out.secret.data() + (out.secret.size() - plain.size()), plain.data(), plain.size());
  StatusOr<Address20> address = AddressFromSecret(out.secret);
  if (!address.ok()) {
    OPENSSL_cleanse(out.secret.data(), out.secret.size());
    return InvalidArgument("keystore decrypts to an invalid secp256k1 key");
  }
  out.address = *address;
  if (k.address && *k.address != out.address) {
    OPENSSL_cleanse(out.secret.data(), out.secret.size());
    return FieldError("address",
                      "says " + AddressToHex(*k.address) + " but the key's address is " + AddressToHex(out.address));
  }
  return out;
}

StatusOr<Address20> KeystoreAddress(std::string_view json_text) {
  ASSIGN_OR_RETURN(ParsedKeystore k, ParseKeystore(json_text));
  if (!k.address) return FieldError("address", "missing");
  return *k.address;
}

StatusOr<std::string> ReadKeystoreFile(const std::string& path) {
  return ReadSmallFile(path, kMaxKeystoreBytes, "keystore file");
}

Status CheckPrivateFile(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return OkStatus();  // the read that follows reports it
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return PermissionDenied(std::string(what) + " '" + path + "' is accessible by group or others (mode " + mode +
                            "); it holds a secret: run chmod 600 '" + path + "'");
  }
  return OkStatus();
}

StatusOr<DecryptedKey> DecryptKeystoreFile(const std::string& path, std::string_view password) {
  RETURN_IF_ERROR(CheckPrivateFile(path, "keystore file"));
  ASSIGN_OR_RETURN(std::string text, ReadKeystoreFile(path));
  StatusOr<DecryptedKey> key = DecryptKeystore(text, password);
  if (!key.ok()) return key.status().WithContext("keystore '" + path + "'");
  return key;
}

StatusOr<std::string> ReadPassword(const std::string& file, const std::string& env_var) {
  if (file.empty() == env_var.empty()) {
    return InvalidArgument("give exactly one of a password file and a password environment variable");
  }
  if (!env_var.empty()) {
    const char* value = std::getenv(env_var.c_str());
    if (value == nullptr) return NotFound("environment variable " + env_var + " is not set");
    return std::string(value);
  }
  RETURN_IF_ERROR(CheckPrivateFile(file, "password file"));
  ASSIGN_OR_RETURN(std::string password, ReadSmallFile(file, kMaxPasswordFileBytes, "password file"));
  if (password.size() >= 2 && password.compare(password.size() - 2, 2, "\r\n") == 0) {
    password.resize(password.size() - 2);
  } else if (!password.empty() && password.back() == '\n') {
    password.pop_back();
  }
  return password;
}

}  // namespace consensor::node
