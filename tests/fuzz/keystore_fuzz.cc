// v3 JSON keystores (node/keys/keystore.h): a local file, but one an operator may have been
// handed. The structural check never does KDF work; decryption runs only for inputs whose KDF
// is cheap, since the caps (scrypt up to 1 GiB, pbkdf2 up to 10^7 rounds) are by design far
// beyond a fuzzer's time budget per input.
#include <nlohmann/json.hpp>

#include "node/keys/keystore.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

namespace {

constexpr std::string_view kPassword = "fuzz";

// False when the keystore asks for more KDF work than a fuzz iteration can afford.
bool KdfIsCheap(std::string_view text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return true;  // refused before any KDF work
  for (const char* key : {"crypto", "Crypto"}) {
    auto crypto = doc.find(key);
    if (crypto == doc.end() || !crypto->is_object()) continue;
    auto params = crypto->find("kdfparams");
    if (params == crypto->end() || !params->is_object()) continue;
    auto number = [&](const char* name) -> double {
      auto it = params->find(name);
      return it != params->end() && it->is_number() ? it->get<double>() : 0;
    };
    if (number("n") * std::max(1.0, number("r")) * std::max(1.0, number("p")) > 1 << 14) return false;
    if (number("c") > 1 << 12) return false;
  }
  return true;
}

}  // namespace

CNSR_FUZZ_TARGET(keystore) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto address = KeystoreAddress(json);
  if (!KdfIsCheap(json)) return 0;
  auto key = DecryptKeystore(json, kPassword);
  if (key.ok()) {
    // Decryption checks the address field against the key whenever there is one.
    if (address.ok()) CNSR_FUZZ_CHECK(*address == key->address);
    auto derived = AddressFromSecret(key->secret);
    CNSR_FUZZ_CHECK(derived.ok() && *derived == key->address);
  }
  return 0;
}

CNSR_FUZZ_SEEDS(keystore) {
  std::vector<std::vector<uint8_t>> seeds;
  Secp256k1Secret secret{};
  secret.fill(0x42);
  KdfParams scrypt;
  scrypt.scrypt_n = 16;
  scrypt.scrypt_r = 8;
  scrypt.scrypt_p = 1;
  if (auto json = EncryptKeystore(secret, kPassword, scrypt); json.ok()) seeds.push_back(fuzz::Bytes(*json));
  KdfParams pbkdf2;
  pbkdf2.kdf = Kdf::kPbkdf2;
  pbkdf2.pbkdf2_iterations = 16;
  if (auto json = EncryptKeystore(secret, kPassword, pbkdf2); json.ok()) seeds.push_back(fuzz::Bytes(*json));
  return seeds;
}
