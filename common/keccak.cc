#include "common/keccak.h"

#include <botan/hash.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace consensor {
namespace {

// "Keccak-1600(256)" is the 0x01-padded Keccak; Botan's "SHA-3(256)" would be FIPS-202.
constexpr const char* kBotanName = "Keccak-1600(256)";

// Only a Botan built without its keccak module lacks this. No address, signature or digest
// would then be right, and the API has no error path, so the process stops.
[[noreturn]] void NoKeccak(const char* why) {
  std::fprintf(stderr, "fatal: Botan cannot create %s: %s\n", kBotanName, why);
  std::abort();
}

std::unique_ptr<Botan::HashFunction> MakeKeccak() {
  std::unique_ptr<Botan::HashFunction> h;
  try {
    h = Botan::HashFunction::create(kBotanName);
  } catch (const std::exception& e) {
    NoKeccak(e.what());
  } catch (...) {
    NoKeccak("unknown exception");
  }
  if (h == nullptr) NoKeccak("algorithm not available");
  return h;
}

}  // namespace

// update() and final() of Botan's Keccak only absorb and permute a fixed-size state: they
// have no failure path, so they are called without a try.
Keccak256Hasher::Keccak256Hasher() : hash_(MakeKeccak()) {}

Keccak256Hasher::Keccak256Hasher(const Keccak256Hasher& other) : hash_(other.hash_->copy_state()) {}

Keccak256Hasher& Keccak256Hasher::operator=(const Keccak256Hasher& other) {
  if (this != &other) hash_ = other.hash_->copy_state();
  return *this;
}

Keccak256Hasher::~Keccak256Hasher() = default;

void Keccak256Hasher::Update(std::span<const uint8_t> data) { hash_->update(data.data(), data.size()); }

Hash256 Keccak256Hasher::Finish() {
  Hash256 out{};
  hash_->final(out.data());  // also clears the state
  return out;
}

void Keccak256Hasher::Reset() { hash_->clear(); }

Hash256 Keccak256(std::span<const uint8_t> data) {
  Keccak256Hasher h;
  h.Update(data);
  return h.Finish();
}

}  // namespace consensor
