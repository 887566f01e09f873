#include "node/api/api_key.h"

#include <openssl/rand.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace consensor::node {

namespace {
constexpr size_t kMaxKeyBytes = 256;

std::string Trim(std::string s) {
  const char* space = " \t\r\n";
  const size_t begin = s.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(space) - begin + 1);
}
}  // namespace

StatusOr<std::string> NewApiKey() {
  std::array<uint8_t, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return Internal("the system's random number generator failed; no key was made");
  }
  return "cnsr_" + ToHex(bytes);
}

Hash256 ApiKeyHash(std::string_view key) { return Sha256Of(key); }

StatusOr<std::string> ReadApiKey(const std::string& key_file) {
  std::string key;
  if (!key_file.empty()) {
    std::ifstream in(key_file, std::ios::binary);
    if (!in) return InvalidArgument("cannot read the API key file " + key_file);
    std::string text(kMaxKeyBytes + 2, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxKeyBytes + 1) return InvalidArgument("the API key file " + key_file + " is too large");
    key = Trim(text);
    if (key.empty()) return InvalidArgument("the API key file " + key_file + " is empty");
  } else if (const char* env = std::getenv("CONSENSOR_API_KEY"); env != nullptr && *env != '\0') {
    key = Trim(env);
  }
  if (key.size() > kMaxKeyBytes) return InvalidArgument("the API key is longer than 256 bytes");
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7E) {
      return InvalidArgument("the API key contains a character that is not printable ASCII");
    }
  }
  return key;
}

}  // namespace consensor::node
