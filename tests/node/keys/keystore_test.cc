// Ethereum v3 keystores: the go-ethereum test vectors, scrypt against RFC 7914 and OpenSSL,
// addresses and EIP-55 checksums, hostile files, and password sources.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "node/keys/keystore.h"

namespace consensor::node {
namespace {

using nlohmann::json;

// go-ethereum accounts/keystore/testdata/v3_test_vector.json (test data, verbatim).
constexpr const char* kGethVectors = R"JSON({
  "wikipage_test_vector_scrypt": {
    "json": {
      "crypto": {
        "cipher": "aes-128-ctr",
        "cipherparams": {
          "iv": "83dbcc02d8ccb40e466191a123791e0e"
        },
        "ciphertext": "d172bf743a674da9cdad04534d56926ef8358534d458fffccd4e6ad2fbde479c",
        "kdf": "scrypt",
        "kdfparams": {
          "dklen": 32,
          "n": 262144,
          "r": 1,
          "p": 8,
          "salt": "ab0c7876052600dd703518d6fc3fe8984592145b591fc8fb5c6d43190334ba19"
        },
        "mac": "2103ac29920d71da29f15d75b4a16dbe95cfd7ff8faea1056c33131d846e3097"
      },
      "id": "3198bc9c-6672-5ab3-d995-4942343ae5b6",
      "version": 3
    },
    "password": "testpassword",
    "priv": "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"
  },
  "wikipage_test_vector_pbkdf2": {
    "json": {
      "crypto": {
        "cipher": "aes-128-ctr",
        "cipherparams": {
          "iv": "6087dab2f9fdbbfaddc31a909735c1e6"
        },
        "ciphertext": "5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46",
        "kdf": "pbkdf2",
        "kdfparams": {
          "c": 262144,
          "dklen": 32,
          "prf": "hmac-sha256",
          "salt": "ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd"
        },
        "mac": "517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2"
      },
      "id": "3198bc9c-6672-5ab3-d995-4942343ae5b6",
      "version": 3
    },
    "password": "testpassword",
    "priv": "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"
  },
  "31_byte_key": {
    "json": {
      "crypto": {
        "cipher": "aes-128-ctr",
        "cipherparams": {
          "iv": "e0c41130a323adc1446fc82f724bca2f"
        },
        "ciphertext": "9517cd5bdbe69076f9bf5057248c6c050141e970efa36ce53692d5d59a3984",
        "kdf": "scrypt",
        "kdfparams": {
          "dklen": 32,
          "n": 2,
          "r": 8,
          "p": 1,
          "salt": "711f816911c92d649fb4c84b047915679933555030b3552c1212609b38208c63"
        },
        "mac": "d5e116151c6aa71470e67a7d42c9620c75c4d23229847dcc127794f0732b0db5"
      },
      "id": "fecfc4ce-e956-48fd-953b-30f8b52ed66c",
      "version": 3
    },
    "password": "foo",
    "priv": "fa7b3db73dc7dfdf8c5fbdb796d741e4488628c41fc4febd9160a866ba0f35"
  },
  "30_byte_key": {
    "json": {
      "crypto": {
        "cipher": "aes-128-ctr",
        "cipherparams": {
          "iv": "3ca92af36ad7c2cd92454c59cea5ef00"
        },
        "ciphertext": "108b7d34f3442fc26ab1ab90ca91476ba6bfa8c00975a49ef9051dc675aa",
        "kdf": "scrypt",
        "kdfparams": {
          "dklen": 32,
          "n": 2,
          "r": 8,
          "p": 1,
          "salt": "d0769e608fb86cda848065642a9c6fa046845c928175662b8e356c77f914cd3b"
        },
        "mac": "75d0e6759f7b3cefa319c3be41680ab6beea7d8328653474bd06706d4cc67420"
      },
      "id": "a37e1559-5955-450d-8075-7b8931b392b2",
      "version": 3
    },
    "password": "foo",
    "priv": "81c29e8142bb6a81bef5a92bda7a8328a5c85bb2f9542e76f9b0f94fc018"
  }
})JSON";

const json& Vectors() {
  static const json v = json::parse(kGethVectors);
  return v;
}

std::string VectorJson(const char* name) { return Vectors()[name]["json"].dump(); }

// The private key as 32 bytes: geth's short vectors are numbers with leading zeros dropped.
std::string PaddedPrivHex(const char* name) {
  std::string priv = Vectors()[name]["priv"].get<std::string>();
  return std::string(64 - priv.size(), '0') + priv;
}

Secp256k1Secret SecretFromHex(const std::string& hex) {
  auto h = Hash256FromHex(hex);
  EXPECT_TRUE(h.ok()) << hex;
  Secp256k1Secret k{};
  if (h.ok()) k = *h;
  return k;
}

// Decrypts a geth vector and checks the key; returns the result for further checks.
DecryptedKey ExpectDecrypts(const char* name) {
  const std::string password = Vectors()[name]["password"].get<std::string>();
  auto key = DecryptKeystore(VectorJson(name), password);
  EXPECT_TRUE(key.ok()) << name << ": " << key.status().ToString();
  if (!key.ok()) return {};
  EXPECT_EQ(ToHex(key->secret), PaddedPrivHex(name)) << name;
  auto address = AddressFromSecret(key->secret);
  EXPECT_TRUE(address.ok());
  if (address.ok()) {
    EXPECT_EQ(key->address, *address);
  }
  return *key;
}

// ------------------------------------------------------------------------------------------
// go-ethereum vectors

TEST(KeystoreTest, GethVectorScrypt) {
  // n=2^18 with r=1 breaks RFC 7914's N < 2^(16r), so this also proves we do not rely on
  // OpenSSL's scrypt (which refuses it).
  DecryptedKey key = ExpectDecrypts("wikipage_test_vector_scrypt");
  EXPECT_EQ(AddressToHex(key.address), "0x008aeeda4d805471df9b2a5b0f38a0c3bcba786b");
}

TEST(KeystoreTest, GethVectorPbkdf2) {
  DecryptedKey key = ExpectDecrypts("wikipage_test_vector_pbkdf2");
  EXPECT_EQ(AddressToHex(key.address), "0x008aeeda4d805471df9b2a5b0f38a0c3bcba786b");
}

TEST(KeystoreTest, GethVectorsShortKeys) {
  ExpectDecrypts("31_byte_key");
  ExpectDecrypts("30_byte_key");
}

TEST(KeystoreTest, WrongPasswordIsPermissionDenied) {
  auto key = DecryptKeystore(VectorJson("31_byte_key"), "bar");
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), StatusCode::kPermissionDenied) << key.status().ToString();
  auto empty = DecryptKeystore(VectorJson("31_byte_key"), "");
  EXPECT_EQ(empty.status().code(), StatusCode::kPermissionDenied);
}

// ------------------------------------------------------------------------------------------
// scrypt

TEST(ScryptTest, Rfc7914Vectors) {
  std::vector<uint8_t> out(64);
  ASSERT_TRUE(Scrypt("", {}, 16, 1, 1, out).ok());
  EXPECT_EQ(ToHex(out),
            "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442"
            "fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906");
  const std::string salt = "NaCl";
  ASSERT_TRUE(
      Scrypt("password", std::span(reinterpret_cast<const uint8_t*>(salt.data()), salt.size()), 1024, 8, 16, out).ok());
  EXPECT_EQ(ToHex(out),
            "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
            "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640");
}

TEST(ScryptTest, MatchesOpenSsl) {
  struct Params {
    uint64_t n;
    uint32_t r, p;
  };
  const uint8_t salt[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (Params prm : {Params{2, 1, 1}, Params{4096, 8, 6}, Params{64, 3, 5}, Params{1024, 2, 2}}) {
    std::vector<uint8_t> ours(32), theirs(32);
    ASSERT_TRUE(Scrypt("pass phrase", salt, prm.n, prm.r, prm.p, ours).ok());
    ASSERT_EQ(EVP_PBE_scrypt("pass phrase", 11, salt, sizeof(salt), prm.n, prm.r, prm.p, uint64_t{1} << 30,
                             theirs.data(), theirs.size()),
              1);
    EXPECT_EQ(ours, theirs) << "n=" << prm.n << " r=" << prm.r << " p=" << prm.p;
  }
}

TEST(ScryptTest, RejectsBadAndExcessiveParameters) {
  std::vector<uint8_t> out(32);
  const uint8_t salt[] = {1};
  struct Params {
    uint64_t n;
    uint32_t r, p;
  };
  for (Params prm : {Params{0, 8, 1}, Params{1, 8, 1}, Params{3, 8, 1}, Params{1024, 0, 1}, Params{1024, 8, 0},
                     Params{uint64_t{1} << 21, 8, 1} /* 2 GiB */, Params{uint64_t{1} << 62, 8, 1},
                     Params{2, 1, 1u << 30} /* huge p */, Params{2, 0xffffffffu, 1},
                     Params{uint64_t{1} << 20, 8, 8} /* 1 GiB but too much work */}) {
    auto start = std::chrono::steady_clock::now();
    Status s = Scrypt("pw", salt, prm.n, prm.r, prm.p, out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "n=" << prm.n << " r=" << prm.r << " p=" << prm.p;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  }
}

TEST(ScryptTest, RejectsWhatBotanRefusesWithinTheCaps) {
  std::vector<uint8_t> out(32);
  const uint8_t salt[] = {1};
  struct Params {
    uint64_t n;
    uint32_t r, p;
  };
  // Each fits the memory and work caps; Botan's scrypt refuses n > 2^22, r > 256, p > 1024.
  for (Params prm : {Params{uint64_t{1} << 23, 1, 1}, Params{2, 257, 1}, Params{2, 1, 1025}}) {
    Status s = Scrypt("pw", salt, prm.n, prm.r, prm.p, out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "n=" << prm.n << " r=" << prm.r << " p=" << prm.p;
  }
  // The largest values Botan takes still work.
  EXPECT_TRUE(Scrypt("pw", salt, 2, 256, 1, out).ok());
  EXPECT_TRUE(Scrypt("pw", salt, 2, 1, 1024, out).ok());
}

// ------------------------------------------------------------------------------------------
// Addresses

TEST(AddressTest, KnownSecrets) {
  Secp256k1Secret one{};
  one[31] = 1;
  auto a = AddressFromSecret(one);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(AddressToChecksumHex(*a), "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf");
  EXPECT_EQ(AddressToHex(*a), "0x7e5f4552091a69125d5dfcb7b8c2659029395bdf");

  auto wiki = AddressFromSecret(SecretFromHex("7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"));
  ASSERT_TRUE(wiki.ok());
  EXPECT_EQ(AddressToHex(*wiki), "0x008aeeda4d805471df9b2a5b0f38a0c3bcba786b");
}

TEST(AddressTest, RejectsOutOfRangeSecrets) {
  Secp256k1Secret zero{};
  EXPECT_EQ(AddressFromSecret(zero).status().code(), StatusCode::kInvalidArgument);
  // The group order n, n+1 and 2^256-1 are invalid; n-1 is the largest valid key.
  const std::string order = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";
  EXPECT_EQ(AddressFromSecret(SecretFromHex(order)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AddressFromSecret(SecretFromHex("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364142"))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  Secp256k1Secret ff;
  ff.fill(0xff);
  EXPECT_EQ(AddressFromSecret(ff).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      AddressFromSecret(SecretFromHex("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140")).ok());
}

TEST(AddressTest, Eip55Vectors) {
  // From EIP-55.
  for (const char* expected :
       {"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        "0x52908400098527886E0F7030069857D2E4169EE7", "0xde709f2102306220921060314715629080e2fb77",
        "0x27b1fdb04752bbc536007a920d24acb045561c26"}) {
    auto a = AddressFromHex(expected);
    ASSERT_TRUE(a.ok()) << expected << ": " << a.status().ToString();
    EXPECT_EQ(AddressToChecksumHex(*a), expected);
    std::string lower = expected;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(AddressToHex(*a), lower);
  }
}

TEST(AddressTest, FromHex) {
  auto lower = AddressFromHex("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed");
  ASSERT_TRUE(lower.ok());
  auto upper = AddressFromHex("0X5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED");
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(*lower, *upper);
  // One letter's case flipped: a checksum error, not silently accepted.
  EXPECT_EQ(AddressFromHex("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(AddressFromHex("0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea").ok());      // short
  EXPECT_FALSE(AddressFromHex("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed00").ok());  // long
  EXPECT_FALSE(AddressFromHex("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg").ok());    // non-hex
  EXPECT_FALSE(AddressFromHex("").ok());
}

TEST(AddressTest, GeneratedKeysAreValidAndDistinct) {
  auto a = GenerateSecretKey();
  auto b = GenerateSecretKey();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(AddressFromSecret(*a).ok());
}

// ------------------------------------------------------------------------------------------
// Round trips

Secp256k1Secret TestSecret() {
  return SecretFromHex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318");
}

TEST(KeystoreTest, RoundTripScrypt) {
  const Secp256k1Secret secret = TestSecret();
  auto text = EncryptKeystore(secret, "correct horse", LightKdfParams());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  json doc = json::parse(*text);
  EXPECT_EQ(doc["version"], 3);
  EXPECT_EQ(doc["crypto"]["kdf"], "scrypt");
  EXPECT_EQ(doc["crypto"]["kdfparams"]["n"], 4096);
  EXPECT_EQ(doc["crypto"]["kdfparams"]["p"], 6);
  EXPECT_EQ(doc["crypto"]["cipher"], "aes-128-ctr");
  const std::string id = doc["id"].get<std::string>();
  ASSERT_EQ(id.size(), 36u);
  EXPECT_EQ(id[8], '-');
  EXPECT_EQ(id[14], '4');  // UUID version 4
  auto address = AddressFromSecret(secret);
  ASSERT_TRUE(address.ok());
  EXPECT_EQ("0x" + doc["address"].get<std::string>(), AddressToHex(*address));

  auto key = DecryptKeystore(*text, "correct horse");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->secret, secret);
  EXPECT_EQ(key->address, *address);
  auto label = KeystoreAddress(*text);
  ASSERT_TRUE(label.ok());
  EXPECT_EQ(*label, *address);
  EXPECT_EQ(DecryptKeystore(*text, "correct horse ").status().code(), StatusCode::kPermissionDenied);
}

TEST(KeystoreTest, RoundTripPbkdf2AndEmptyPassword) {
  const Secp256k1Secret secret = TestSecret();
  KdfParams params = LightKdfParams();
  params.kdf = Kdf::kPbkdf2;
  params.pbkdf2_iterations = 1000;
  auto text = EncryptKeystore(secret, "", params);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  json doc = json::parse(*text);
  EXPECT_EQ(doc["crypto"]["kdf"], "pbkdf2");
  EXPECT_EQ(doc["crypto"]["kdfparams"]["c"], 1000);
  EXPECT_EQ(doc["crypto"]["kdfparams"]["prf"], "hmac-sha256");
  auto key = DecryptKeystore(*text, "");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->secret, secret);
  EXPECT_EQ(DecryptKeystore(*text, "x").status().code(), StatusCode::kPermissionDenied);
}

TEST(KeystoreTest, EncryptRejectsBadInputs) {
  Secp256k1Secret zero{};
  EXPECT_EQ(EncryptKeystore(zero, "pw", LightKdfParams()).status().code(), StatusCode::kInvalidArgument);
  KdfParams heavy = LightKdfParams();
  heavy.scrypt_n = uint64_t{1} << 40;
  EXPECT_EQ(EncryptKeystore(TestSecret(), "pw", heavy).status().code(), StatusCode::kInvalidArgument);
  KdfParams odd = LightKdfParams();
  odd.scrypt_n = 1000;
  EXPECT_EQ(EncryptKeystore(TestSecret(), "pw", odd).status().code(), StatusCode::kInvalidArgument);
  KdfParams pbkdf2 = LightKdfParams();
  pbkdf2.kdf = Kdf::kPbkdf2;
  pbkdf2.pbkdf2_iterations = 0;
  EXPECT_EQ(EncryptKeystore(TestSecret(), "pw", pbkdf2).status().code(), StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------------------------------
// Hostile and malformed files: each mutation of a valid (cheap) keystore must be rejected as
// INVALID_ARGUMENT naming the field, before any expensive KDF work.

json CheapKeystore() { return Vectors()["31_byte_key"]["json"]; }

void ExpectRejected(const json& doc, const std::string& field, const std::string& what) {
  const std::string text = doc.dump();
  auto start = std::chrono::steady_clock::now();
  auto key = DecryptKeystore(text, "foo");
  ASSERT_FALSE(key.ok()) << what;
  EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument) << what << ": " << key.status().ToString();
  EXPECT_NE(key.status().message().find(field), std::string::npos)
      << what << ": message '" << key.status().message() << "' does not name " << field;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << what;
}

TEST(KeystoreMalformedTest, MissingFields) {
  struct Case {
    std::vector<std::string> path;
    std::string field;
  };
  const Case cases[] = {
      {{"version"}, "version"},
      {{"crypto"}, "crypto"},
      {{"crypto", "cipher"}, "crypto.cipher"},
      {{"crypto", "cipherparams"}, "crypto.cipherparams"},
      {{"crypto", "cipherparams", "iv"}, "crypto.cipherparams.iv"},
      {{"crypto", "ciphertext"}, "crypto.ciphertext"},
      {{"crypto", "mac"}, "crypto.mac"},
      {{"crypto", "kdf"}, "crypto.kdf"},
      {{"crypto", "kdfparams"}, "crypto.kdfparams"},
      {{"crypto", "kdfparams", "salt"}, "crypto.kdfparams.salt"},
      {{"crypto", "kdfparams", "dklen"}, "crypto.kdfparams.dklen"},
      {{"crypto", "kdfparams", "n"}, "crypto.kdfparams.n"},
      {{"crypto", "kdfparams", "r"}, "crypto.kdfparams.r"},
      {{"crypto", "kdfparams", "p"}, "crypto.kdfparams.p"},
  };
  for (const Case& c : cases) {
    json doc = CheapKeystore();
    json* parent = &doc;
    for (size_t i = 0; i + 1 < c.path.size(); ++i) parent = &(*parent)[c.path[i]];
    parent->erase(c.path.back());
    ExpectRejected(doc, c.field, "missing " + c.field);
  }
}

TEST(KeystoreMalformedTest, WrongTypes) {
  auto mutate = [](auto fn) {
    json doc = CheapKeystore();
    fn(doc);
    return doc;
  };
  ExpectRejected(mutate([](json& d) { d["version"] = "3"; }), "version", "string version");
  ExpectRejected(mutate([](json& d) { d["version"] = 1; }), "version", "version 1");
  ExpectRejected(mutate([](json& d) { d["crypto"] = "x"; }), "crypto", "crypto string");
  ExpectRejected(mutate([](json& d) { d["crypto"]["cipher"] = 5; }), "crypto.cipher", "numeric cipher");
  ExpectRejected(mutate([](json& d) { d["crypto"]["cipherparams"] = json::array(); }), "crypto.cipherparams",
                 "cipherparams array");
  ExpectRejected(mutate([](json& d) { d["crypto"]["cipherparams"]["iv"] = nullptr; }), "crypto.cipherparams.iv",
                 "null iv");
  ExpectRejected(mutate([](json& d) {
                   d["crypto"]["ciphertext"] = json::array({1, 2});
                 }),
                 "crypto.ciphertext", "array ciphertext");
  ExpectRejected(mutate([](json& d) { d["crypto"]["kdfparams"]["n"] = "262144"; }), "crypto.kdfparams.n", "string n");
  ExpectRejected(mutate([](json& d) { d["crypto"]["kdfparams"]["n"] = 2.5; }), "crypto.kdfparams.n", "float n");
  ExpectRejected(mutate([](json& d) { d["crypto"]["kdfparams"]["r"] = -8; }), "crypto.kdfparams.r", "negative r");
  ExpectRejected(mutate([](json& d) { d["crypto"]["kdfparams"]["dklen"] = true; }), "crypto.kdfparams.dklen",
                 "bool dklen");
  ExpectRejected(mutate([](json& d) { d["crypto"]["kdfparams"]["dklen"] = 16; }), "crypto.kdfparams.dklen", "dklen 16");
  ExpectRejected(mutate([](json& d) { d["address"] = 7; }), "address", "numeric address");
  ExpectRejected(mutate([](json& d) { d["id"] = 7; }), "id", "numeric id");
}

TEST(KeystoreMalformedTest, BadHexAndLengths) {
  auto with = [](const char* a, const char* b, const char* c, const std::string& v) {
    json doc = CheapKeystore();
    if (c != nullptr) doc[a][b][c] = v;
    else doc[a][b] = v;
    return doc;
  };
  ExpectRejected(with("crypto", "cipherparams", "iv", "e0c41130a323adc1446fc82f724bca"), "crypto.cipherparams.iv",
                 "15-byte iv");
  ExpectRejected(with("crypto", "cipherparams", "iv", "e0c41130a323adc1446fc82f724bca2f00"), "crypto.cipherparams.iv",
                 "17-byte iv");
  ExpectRejected(with("crypto", "cipherparams", "iv", "zz c41130a323adc1446fc82f724bca2"), "crypto.cipherparams.iv",
                 "non-hex iv");
  ExpectRejected(with("crypto", "cipherparams", "iv", "0xe0c41130a323adc1446fc82f724bca2f"), "crypto.cipherparams.iv",
                 "0x iv");
  ExpectRejected(with("crypto", "ciphertext", nullptr, "abc"), "crypto.ciphertext", "odd-length ciphertext");
  ExpectRejected(with("crypto", "ciphertext", nullptr, ""), "crypto.ciphertext", "empty ciphertext");
  ExpectRejected(with("crypto", "ciphertext", nullptr, std::string(66, 'a')), "crypto.ciphertext",
                 "33-byte ciphertext");
  ExpectRejected(with("crypto", "mac", nullptr, "d5e116151c6aa71470e67a7d42c9620c"), "crypto.mac", "short mac");
  ExpectRejected(with("crypto", "kdfparams", "salt", "xyz1"), "crypto.kdfparams.salt", "bad salt");
  json bad_address = CheapKeystore();
  bad_address["address"] = "not an address";
  ExpectRejected(bad_address, "address", "bad address");
}

TEST(KeystoreMalformedTest, UnsupportedAlgorithms) {
  json cipher = CheapKeystore();
  cipher["crypto"]["cipher"] = "aes-256-gcm";
  ExpectRejected(cipher, "crypto.cipher", "cipher");
  json kdf = CheapKeystore();
  kdf["crypto"]["kdf"] = "argon2id";
  ExpectRejected(kdf, "crypto.kdf", "kdf");
  json prf = Vectors()["wikipage_test_vector_pbkdf2"]["json"];
  prf["crypto"]["kdfparams"]["prf"] = "hmac-sha512";
  ExpectRejected(prf, "crypto.kdfparams.prf", "prf");
  json missing_c = Vectors()["wikipage_test_vector_pbkdf2"]["json"];
  missing_c["crypto"]["kdfparams"].erase("c");
  ExpectRejected(missing_c, "crypto.kdfparams.c", "missing c");
}

TEST(KeystoreMalformedTest, ExcessiveKdfCostRejectedWithoutWork) {
  for (uint64_t n : {uint64_t{1} << 24, uint64_t{1} << 40, uint64_t{1} << 63, uint64_t{3}, uint64_t{0}}) {
    json doc = CheapKeystore();
    doc["crypto"]["kdfparams"]["n"] = n;
    ExpectRejected(doc, "crypto.kdfparams.n", "n=" + std::to_string(n));
  }
  json huge_number = CheapKeystore();
  std::string text = huge_number.dump();
  // A number beyond uint64 parses as a float and must still be rejected cleanly.
  text.replace(text.find("\"n\":2"), 5, "\"n\":1000000000000000000000000");
  auto key = DecryptKeystore(text, "foo");
  EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument) << key.status().ToString();

  json p = CheapKeystore();
  p["crypto"]["kdfparams"]["p"] = 1u << 31;
  ExpectRejected(p, "crypto.kdfparams", "huge p");
  json c = Vectors()["wikipage_test_vector_pbkdf2"]["json"];
  c["crypto"]["kdfparams"]["c"] = 10'000'001;
  ExpectRejected(c, "crypto.kdfparams.c", "huge c");
  c["crypto"]["kdfparams"]["c"] = 0;
  ExpectRejected(c, "crypto.kdfparams.c", "zero c");
}

TEST(KeystoreMalformedTest, ScryptLimitsOfBotanRejectedWithoutWork) {
  json doc = CheapKeystore();
  doc["crypto"]["kdfparams"]["n"] = uint64_t{1} << 23;  // 1 GiB with r = 1: within the memory cap
  doc["crypto"]["kdfparams"]["r"] = 1;
  doc["crypto"]["kdfparams"]["p"] = 1;
  ExpectRejected(doc, "crypto.kdfparams.n", "n=2^23 r=1");
  EXPECT_EQ(KeystoreAddress(doc.dump()).status().code(), StatusCode::kInvalidArgument);
}

TEST(KeystoreMalformedTest, NotJsonOrWrongShape) {
  for (const std::string& text :
       {std::string(""), std::string("{"), std::string("[]"), std::string("3"), std::string("null"),
        std::string("{\"version\":3,"), std::string("\xff\xfe"), std::string(100000, '['), std::string(100000, '{'),
        std::string("{\"a\":") + std::string(50, '[') + std::string(50, ']') + "}"}) {
    auto key = DecryptKeystore(text, "foo");
    EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument) << text.substr(0, 40);
  }
  EXPECT_EQ(DecryptKeystore(std::string(2 << 20, ' '), "foo").status().code(), StatusCode::kInvalidArgument);
}

TEST(KeystoreMalformedTest, CapitalisedCryptoAndAddressChecks) {
  json doc = CheapKeystore();
  doc["Crypto"] = doc["crypto"];
  doc.erase("crypto");
  auto key = DecryptKeystore(doc.dump(), "foo");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(ToHex(key->secret), PaddedPrivHex("31_byte_key"));

  doc["crypto"] = doc["Crypto"];
  ExpectRejected(doc, "crypto", "both crypto and Crypto");

  // The address field is outside the MAC: one that disagrees with the key is an error.
  json labelled = CheapKeystore();
  labelled["address"] = "7e5f4552091a69125d5dfcb7b8c2659029395bdf";
  ExpectRejected(labelled, "address", "mismatched address");
  labelled["address"] = ToHex(key->address);
  EXPECT_TRUE(DecryptKeystore(labelled.dump(), "foo").ok());
  EXPECT_EQ(KeystoreAddress(CheapKeystore().dump()).status().code(), StatusCode::kInvalidArgument);
}

TEST(KeystoreMalformedTest, RandomMutationsNeverCrash) {
  // Single-byte edits of a cheap valid keystore (deterministic): every result is either a clean
  // error or, when the edit was harmless, the right key. The v3 MAC does not cover the iv, so the
  // "address" field is what catches an edited iv.
  const std::string expected = PaddedPrivHex("31_byte_key");
  json doc = CheapKeystore();
  auto address = AddressFromSecret(SecretFromHex(expected));
  ASSERT_TRUE(address.ok());
  doc["address"] = ToHex(*address);
  const std::string base = doc.dump();
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const char alphabet[] = "0123456789abcdefx\"{}[]:,. -e\\\x00\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = next() % text.size();
      const char ch = alphabet[next() % (sizeof(alphabet) - 1)];
      switch (next() % 4) {
        case 0: text[at] = ch; break;
        case 1: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), ch); break;
        case 2: text.erase(at, 1); break;
        default: text.resize(at); break;
      }
    }
    auto key = DecryptKeystore(text, "foo");
    if (key.ok()) {
      EXPECT_EQ(ToHex(key->secret), expected) << text;
    } else {
      EXPECT_FALSE(key.status().message().empty());
    }
    (void)KeystoreAddress(text).ok();
  }
}

// ------------------------------------------------------------------------------------------
// Passwords and files

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "keystore_test_XXXXXX").string();
    char* made = mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Private (0600), as secrets must be.
  std::string File(const std::string& name, const std::string& contents) const {
    std::string p = (std::filesystem::path(path_) / name).string();
    std::ofstream(p, std::ios::binary) << contents;
    std::filesystem::permissions(p, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(PasswordTest, FromFile) {
  TempDir dir;
  EXPECT_EQ(*ReadPassword(dir.File("a", "secret\n"), ""), "secret");
  EXPECT_EQ(*ReadPassword(dir.File("b", "secret\r\n"), ""), "secret");
  EXPECT_EQ(*ReadPassword(dir.File("c", "secret"), ""), "secret");
  EXPECT_EQ(*ReadPassword(dir.File("d", "secret\n\n"), ""), "secret\n");  // only one newline
  EXPECT_EQ(*ReadPassword(dir.File("e", " with spaces \n"), ""), " with spaces ");
  EXPECT_EQ(*ReadPassword(dir.File("f", ""), ""), "");
  EXPECT_EQ(ReadPassword(dir.File("big", std::string(100 << 10, 'x')), "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadPassword(dir.path() + "/missing", "").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ReadPassword(dir.path(), "").ok());  // a directory
}

// Issue 16, hole 9: a secret others can read is a key others can copy. Refused with the fix.
TEST(KeystoreFiles, SecretsReadableByOthersAreRefused) {
  TempDir dir;
  const std::string password = dir.File("pw", "secret\n");
  std::filesystem::permissions(password, std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  auto refused = ReadPassword(password, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("password file '" + password +
                                            "' is accessible by group or others (mode "
                                            "0640)"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("chmod 600 '" + password + "'"), std::string::npos);

  auto encrypted = EncryptKeystore(TestSecret(), "pw", LightKdfParams());
  ASSERT_TRUE(encrypted.ok()) << encrypted.status().ToString();
  const std::string keystore = dir.File("key.json", *encrypted);
  EXPECT_TRUE(DecryptKeystoreFile(keystore, "pw").ok());
  std::filesystem::permissions(keystore, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
  auto open = DecryptKeystoreFile(keystore, "pw");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(open.status().message().find("keystore file '" + keystore + "'"), std::string::npos)
      << open.status().message();
}

TEST(PasswordTest, FromEnvironment) {
  ASSERT_EQ(setenv("CONSENSOR_KEYSTORE_TEST_PW", "from env", 1), 0);
  EXPECT_EQ(*ReadPassword("", "CONSENSOR_KEYSTORE_TEST_PW"), "from env");
  unsetenv("CONSENSOR_KEYSTORE_TEST_PW");
  auto unset = ReadPassword("", "CONSENSOR_KEYSTORE_TEST_PW");
  ASSERT_FALSE(unset.ok());
  EXPECT_NE(unset.status().message().find("CONSENSOR_KEYSTORE_TEST_PW"), std::string::npos);
}

TEST(PasswordTest, ExactlyOneSource) {
  EXPECT_EQ(ReadPassword("", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadPassword("/some/file", "SOME_VAR").status().code(), StatusCode::kInvalidArgument);
}

TEST(KeystoreFileTest, ReadAndDecrypt) {
  TempDir dir;
  const std::string path = dir.File("key.json", VectorJson("31_byte_key"));
  auto key = DecryptKeystoreFile(path, "foo");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(ToHex(key->secret), PaddedPrivHex("31_byte_key"));
  auto wrong = DecryptKeystoreFile(path, "bar");
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.status().message().find(path), std::string::npos);
  EXPECT_EQ(ReadKeystoreFile(dir.File("huge.json", std::string((1 << 20) + 1, ' '))).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadKeystoreFile(dir.path() + "/nope.json").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace consensor::node
