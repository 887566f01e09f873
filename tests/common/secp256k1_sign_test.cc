#include "common/secp256k1_sign.h"
#include "tests/test_hex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/keccak.h"
#include "common/sha256.h"

namespace consensor {
namespace {

using testing_support::Arr;
using testing_support::Hex;

const Secp256k1Secret kAnvilKey = Arr<32>("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
const std::array<uint8_t, 32> kOrder = Arr<32>("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");

// n - s, big-endian.
std::array<uint8_t, 32> Negate(const std::array<uint8_t, 32>& s) {
  std::array<uint8_t, 32> out{};
  int borrow = 0;
  for (int i = 31; i >= 0; --i) {
    int d = kOrder[i] - s[i] - borrow;
    borrow = d < 0;
    out[i] = static_cast<uint8_t>(d + (borrow ? 256 : 0));
  }
  return out;
}

TEST(Secp256k1Sign, AnvilDevKeyAddress) {
  auto addr = AddressFromSecretKey(kAnvilKey);
  ASSERT_TRUE(addr.ok()) << addr.status().ToString();
  EXPECT_EQ(ToHex(*addr), "f39fd6e51aad88f6f4ce6ab8827279cfffb92266");
}

// RFC 6979 deterministic-ECDSA vectors for secp256k1 (the widely published set from the
// bitcointalk thread "Deterministic Usage of DSA and ECDSA", s in low-s form); digest = sha256(msg).
TEST(Secp256k1Sign, Rfc6979KnownVectors) {
  struct V {
    const char* key;
    const char* msg;
    const char* r;
    const char* s;
  } vectors[] = {
      {"0000000000000000000000000000000000000000000000000000000000000001", "Satoshi Nakamoto",
       "934b1ea10a4b3c1757e2b0c017d0b6143ce3c9a7e6a4a49860d7a6ab210ee3d8",
       "2442ce9d2b916064108014783e923ec36b49743e2ffa1c4496f01a512aafd9e5"},
      {"0000000000000000000000000000000000000000000000000000000000000001",
       "All those moments will be lost in time, like tears in rain. Time to die...",
       "8600dbd41e348fe5c9465ab92d23e3db8b98b873beecd930736488696438cb6b",
       "547fe64427496db33bf66019dacbf0039c04199abb0122918601db38a72cfc21"},
      {"fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140", "Satoshi Nakamoto",
       "fd567d121db66e382991534ada77a6bd3106f0a1098c231e47993447cd6af2d0",
       "6b39cd0eb1bc8603e159ef5c20a5c8ad685a45b06ce9bebed3f153d10d93bed5"},
  };
  for (const V& v : vectors) {
    Secp256k1Secret key = Arr<32>(v.key);
    Hash256 digest = Sha256Of(std::string_view(v.msg));
    auto sig = SignDigest(key, digest);
    ASSERT_TRUE(sig.ok()) << sig.status().ToString();
    EXPECT_EQ(ToHex(sig->r), v.r) << v.msg;
    EXPECT_EQ(ToHex(sig->s), v.s) << v.msg;
    auto recovered = RecoverAddress(digest, *sig);
    ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
    EXPECT_EQ(*recovered, *AddressFromSecretKey(key));
  }
}

TEST(Secp256k1Sign, RoundTripDeterministicLowS) {
  for (int i = 0; i < 32; ++i) {
    Hash256 digest = Keccak256("message " + std::to_string(i));
    auto a = SignDigest(kAnvilKey, digest);
    auto b = SignDigest(kAnvilKey, digest);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    EXPECT_TRUE(IsLowS(a->s));
    EXPECT_LE(a->recovery_id, 1);
    auto addr = RecoverAddress(digest, *a);
    ASSERT_TRUE(addr.ok());
    EXPECT_EQ(ToHex(*addr), "f39fd6e51aad88f6f4ce6ab8827279cfffb92266");

    std::array<uint8_t, 65> bytes = ToBytes65(*a);
    EXPECT_EQ(bytes[64], 27 + a->recovery_id);
    auto parsed = FromBytes65(bytes);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, *a);

    // A different digest recovers a different address (or fails).
    Hash256 other = digest;
    other[0] ^= 1;
    auto wrong = RecoverAddress(other, *a);
    if (wrong.ok()) {
      EXPECT_NE(ToHex(*wrong), "f39fd6e51aad88f6f4ce6ab8827279cfffb92266");
    }
  }
}

TEST(Secp256k1Sign, RejectsHighSAndBadRecoveryIds) {
  Hash256 digest = Keccak256("hello");
  auto sig = SignDigest(kAnvilKey, digest);
  ASSERT_TRUE(sig.ok());

  EcdsaSignature high = *sig;
  high.s = Negate(sig->s);
  high.recovery_id ^= 1;  // the malleable twin: a valid ECDSA signature, but high s
  EXPECT_FALSE(IsLowS(high.s));
  EXPECT_EQ(RecoverAddress(digest, high).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(FromBytes65(ToBytes65(high)).ok());

  for (uint8_t recid : {2, 3, 27, 255}) {
    EcdsaSignature bad = *sig;
    bad.recovery_id = recid;
    EXPECT_FALSE(RecoverAddress(digest, bad).ok()) << int(recid);
  }
  EcdsaSignature zero_r = *sig;
  zero_r.r = {};
  EXPECT_FALSE(RecoverAddress(digest, zero_r).ok());
  EcdsaSignature zero_s = *sig;
  zero_s.s = {};
  EXPECT_FALSE(RecoverAddress(digest, zero_s).ok());
  EcdsaSignature big_r = *sig;
  big_r.r = kOrder;
  EXPECT_FALSE(RecoverAddress(digest, big_r).ok());
}

TEST(Secp256k1Sign, FromBytes65Strictness) {
  Hash256 digest = Keccak256("hello");
  auto sig = SignDigest(kAnvilKey, digest);
  ASSERT_TRUE(sig.ok());
  std::array<uint8_t, 65> b = ToBytes65(*sig);

  EXPECT_FALSE(FromBytes65(std::span<const uint8_t>(b.data(), 64)).ok());
  std::vector<uint8_t> longer(b.begin(), b.end());
  longer.push_back(0);
  EXPECT_FALSE(FromBytes65(longer).ok());

  for (uint8_t v : {0, 1, 2, 26, 29, 35, 37, 255}) {
    std::array<uint8_t, 65> c = b;
    c[64] = v;
    EXPECT_FALSE(FromBytes65(c).ok()) << int(v);
  }
  // Raw recovery ids only when explicitly allowed.
  std::array<uint8_t, 65> raw = b;
  raw[64] = sig->recovery_id;
  auto parsed = FromBytes65(raw, /*allow_raw_recovery_id=*/true);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, *sig);
  raw[64] = 2;
  EXPECT_FALSE(FromBytes65(raw, true).ok());

  // s = n (out of range) and s = n/2 + 1 (high).
  std::array<uint8_t, 65> c = b;
  std::copy(kOrder.begin(), kOrder.end(), c.begin() + 32);
  EXPECT_FALSE(FromBytes65(c).ok());
  std::array<uint8_t, 32> half_plus_one = Arr<32>("7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a1");
  std::array<uint8_t, 32> half = Arr<32>("7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0");
  EXPECT_TRUE(IsLowS(half));
  EXPECT_FALSE(IsLowS(half_plus_one));
  std::copy(half_plus_one.begin(), half_plus_one.end(), c.begin() + 32);
  EXPECT_FALSE(FromBytes65(c).ok());
}

TEST(Secp256k1Sign, RejectsInvalidSecrets) {
  Hash256 digest = Keccak256("x");
  Secp256k1Secret zero{};
  EXPECT_EQ(SignDigest(zero, digest).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SignDigest(kOrder, digest).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(AddressFromSecretKey(zero).ok());
  EXPECT_FALSE(AddressFromSecretKey(kOrder).ok());
}

}  // namespace
}  // namespace consensor
