#include "node/chain/eth_tx.h"
#include "tests/test_hex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/keccak.h"
#include "node/chain/rlp.h"
#include "node/keys/keystore.h"

namespace consensor::node {
namespace {

using testing_support::Arr;
using testing_support::Hex;

const Secp256k1Secret kAnvilKey = Arr<32>("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");

TEST(EthTx, AnvilDevKeyAddressAndKeystoreInterop) {
  auto a = AddressFromSecretKey(kAnvilKey);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(AddressToChecksumHex(*a), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
  auto b = AddressFromSecret(kAnvilKey);  // node/keys/keystore.h: the same type, the same answer
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
}

// Vectors from ethereumjs-monorepo packages/tx/test/json/eip1559.json (chainId 7822 = 0x1e8e,
// to 0x...aaaa, empty data and access list). There "signedTransactionRLP" is the raw typed
// transaction wrapped once more as an RLP string (b8 xx header), which we strip.
struct Vector1559 {
  uint64_t nonce, value, gas_limit, max_priority, max_fee;
  const char* signed_rlp;
};
const Vector1559 kVectors[] = {
    {819, 43203529, 35552, 75853, 121212,
     "b87302f870821e8e8203338301284d8301d97c828ae094000000000000000000000000000000000000aaaa8402933bc980c080a0d067f2167008c59219"
     "652f91cbf8788dbca5f771f6e91e2b7657e85b78b472e0a01d305af9fe81fdba43f0dfcd400ed24dcace0a7e30d4e85701dcaaf484cd079e"},
    {353, 61901619, 32593, 38850, 136295,
     "b87202f86f821e8e8201618297c283021467827f5194000000000000000000000000000000000000aaaa8403b08b3380c001a004205678f13fc1d7b10f"
     "eea6513dfa76e24418b6e08097d95c6f93a3b64e536da01d45ad61bfece43862de2cce7d2575a8c1d08c26c87f3cb5f26d7b0be54a91b2"},
    {985, 32531825, 68541, 66377, 136097,
     "b87402f871821e8e8203d983010349830213a183010bbd94000000000000000000000000000000000000aaaa8401f0657180c001a0e6d23c5ecc0f388a"
     "4d41a9523c3ad171e98083a61288c340b968dfe0903a6741a07319e8d54a4fd8f0c081d3ce093d869f9df598481991c8534bfd8f2c163884b4"},
    {623, 21649799, 57725, 74140, 81173,
     "b87302f870821e8e82026f8301219c83013d1582e17d94000000000000000000000000000000000000aaaa84014a598780c080a0b107893e4590e177e2"
     "44493a3f2b59d63619ddd82772105d8c96b7fc85ff683da07dc9b9dc054d2f69f9cc540688f6c0da3b54dd8bd8323f06d0ca26b546a480f1"},
    {119, 65456115, 62341, 24721, 107729,
     "b87002f86d821e8e778260918301a4d182f38594000000000000000000000000000000000000aaaa8403e6c7f380c001a0e38e239770801eb995498c82"
     "1e55ac9c19ae09184bb27b34be105e02fe3b7615a067c64ca6bd6d9107e85fd581ab2e70a14b637eb36505bb40861ef9d6e800cab6"},
};
const Secp256k1Secret kVectorKey = Arr<32>("8f2a55949038a9610f50fb23b5883af3b4ecb3c3bb792cbcefbd1542c692be63");

Eip1559Transaction FromVector(const Vector1559& v) {
  Eip1559Transaction tx;
  tx.chain_id = 7822;
  tx.nonce = v.nonce;
  tx.max_priority_fee_per_gas = Uint256FromU64(v.max_priority);
  tx.max_fee_per_gas = Uint256FromU64(v.max_fee);
  tx.gas_limit = v.gas_limit;
  tx.to = Arr<20>("000000000000000000000000000000000000aaaa");
  tx.value = Uint256FromU64(v.value);
  return tx;
}

TEST(EthTx, EthereumJsEip1559Vectors) {
  auto sender = AddressFromSecretKey(kVectorKey);
  ASSERT_TRUE(sender.ok());
  for (const Vector1559& v : kVectors) {
    // Strip the outer RLP string header (0xb8, length).
    std::vector<uint8_t> wrapped = Hex(v.signed_rlp);
    auto outer = RlpDecode(wrapped);
    ASSERT_TRUE(outer.ok());
    const std::vector<uint8_t>& raw = outer->bytes;

    Eip1559Transaction tx = FromVector(v);
    auto signed_tx = SignTransaction(kVectorKey, tx);
    ASSERT_TRUE(signed_tx.ok()) << signed_tx.status().ToString();
    EXPECT_EQ(ToHex(*signed_tx), ToHex(raw)) << "nonce " << v.nonce;

    auto dec = DecodeSignedTransaction(raw);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_EQ(dec->tx, tx);
    EXPECT_EQ(dec->sender, *sender);
    EXPECT_EQ(dec->hash, Keccak256(raw));
    EXPECT_EQ(dec->hash, TransactionHash(*signed_tx));
    EXPECT_EQ(EncodeSignedTransaction(dec->tx, dec->signature), raw);
  }
}

TEST(EthTx, SignDecodeRoundTripWithCallDataCreateAndAccessList) {
  Eip1559Transaction tx;
  tx.chain_id = 31337;
  tx.nonce = 0;
  tx.max_priority_fee_per_gas = Uint256FromU64(1'000'000'000);
  tx.max_fee_per_gas = *Uint256FromDecimal("300000000000");
  tx.gas_limit = 3'000'000;
  tx.to = Arr<20>("5FbDB2315678afecb367f032d93F642f64180aa3");
  tx.value = *Uint256FromDecimal("1000000000000000000");
  tx.data = std::vector<uint8_t>(300, 0x5a);  // long enough for a long-form RLP header
  AccessListEntry e;
  e.address = Arr<20>("000000000000000000000000000000000000beef");
  e.storage_keys = {Keccak256("slot0"), Keccak256("slot1")};
  tx.access_list = {e};

  auto raw = SignTransaction(kAnvilKey, tx);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ((*raw)[0], 0x02);
  auto dec = DecodeSignedTransaction(*raw);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->tx, tx);
  EXPECT_EQ(AddressToChecksumHex(dec->sender), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
  EXPECT_TRUE(IsLowS(dec->signature.s));

  // Contract creation: empty `to`.
  Eip1559Transaction create = tx;
  create.to.reset();
  create.access_list.clear();
  auto raw2 = SignTransaction(kAnvilKey, create);
  ASSERT_TRUE(raw2.ok());
  auto dec2 = DecodeSignedTransaction(*raw2);
  ASSERT_TRUE(dec2.ok()) << dec2.status().ToString();
  EXPECT_FALSE(dec2->tx.to.has_value());
  EXPECT_EQ(dec2->tx, create);

  // The signing hash covers every field.
  Eip1559Transaction other = tx;
  other.nonce = 1;
  EXPECT_NE(SigningHash(other), SigningHash(tx));
  EXPECT_EQ(UnsignedTransactionBytes(tx)[0], 0x02);
  EXPECT_EQ(SigningHash(tx), Keccak256(UnsignedTransactionBytes(tx)));
}

// Re-encodes a decoded field list with one field replaced, as a typed transaction.
std::vector<uint8_t> WithField(const std::vector<uint8_t>& raw, size_t index, const RlpItem& replacement) {
  auto item = RlpDecode(std::span<const uint8_t>(raw).subspan(1));
  EXPECT_TRUE(item.ok());
  RlpItem root = *item;
  root.list[index] = replacement;
  std::vector<uint8_t> out{0x02};
  std::vector<uint8_t> body = RlpEncode(root);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

TEST(EthTx, DecodeRejectsHostileInput) {
  Eip1559Transaction tx = FromVector(kVectors[0]);
  auto raw_or = SignTransaction(kVectorKey, tx);
  ASSERT_TRUE(raw_or.ok());
  const std::vector<uint8_t>& raw = *raw_or;
  ASSERT_TRUE(DecodeSignedTransaction(raw).ok());

  EXPECT_FALSE(DecodeSignedTransaction({}).ok());
  std::vector<uint8_t> legacy = raw;
  legacy[0] = 0x01;
  EXPECT_FALSE(DecodeSignedTransaction(legacy).ok());
  EXPECT_FALSE(DecodeSignedTransaction(std::span<const uint8_t>(raw.data(), 1)).ok());
  for (size_t cut = 1; cut < raw.size(); cut += 7) {
    EXPECT_FALSE(DecodeSignedTransaction(std::span<const uint8_t>(raw.data(), cut)).ok()) << cut;
  }
  std::vector<uint8_t> trailing = raw;
  trailing.push_back(0);
  EXPECT_FALSE(DecodeSignedTransaction(trailing).ok());

  // Field-level violations.
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 1, RlpItem::Bytes(Hex("000333")))).ok());  // leading zero nonce
  EXPECT_FALSE(
      DecodeSignedTransaction(WithField(raw, 0, RlpItem::Bytes(Hex("010000000000000000")))).ok());  // 9-byte u64
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 5, RlpItem::Bytes(Hex("00aaaa")))).ok());     // short `to`
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 5, RlpItem::List({}))).ok());
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 7, RlpItem::List({}))).ok());
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 8, RlpItem::Bytes({}))).ok());
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 8, RlpItem::List({RlpItem::List({})}))).ok());
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 9, RlpItem::Uint(2))).ok());     // y parity
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 10, RlpItem::Bytes({}))).ok());  // r = 0
  EXPECT_FALSE(DecodeSignedTransaction(WithField(raw, 11, RlpItem::Bytes(std::vector<uint8_t>(33, 1)))).ok());
  // High s (the malleable twin with flipped parity) is rejected.
  auto dec = DecodeSignedTransaction(raw);
  ASSERT_TRUE(dec.ok());
  std::array<uint8_t, 32> n = Arr<32>("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");
  std::array<uint8_t, 32> high{};
  int borrow = 0;
  for (int i = 31; i >= 0; --i) {
    int d = n[i] - dec->signature.s[i] - borrow;
    borrow = d < 0;
    high[i] = static_cast<uint8_t>(d + (borrow ? 256 : 0));
  }
  std::vector<uint8_t> twin = WithField(raw, 11, RlpItem::UintBigEndian(high));
  twin = WithField(twin, 9, RlpItem::Uint(dec->signature.recovery_id ^ 1u));
  EXPECT_FALSE(DecodeSignedTransaction(twin).ok());

  // Eleven fields (unsigned) and thirteen fields.
  auto item = RlpDecode(std::span<const uint8_t>(raw).subspan(1));
  ASSERT_TRUE(item.ok());
  RlpItem root = *item;
  root.list.pop_back();
  std::vector<uint8_t> eleven{0x02};
  std::vector<uint8_t> body = RlpEncode(root);
  eleven.insert(eleven.end(), body.begin(), body.end());
  EXPECT_FALSE(DecodeSignedTransaction(eleven).ok());

  // Mutation fuzz: never crashes; anything accepted re-encodes to the same bytes.
  uint64_t x = 99;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> in = raw;
    size_t pos = 1 + next() % (in.size() - 1);
    switch (next() % 3) {
      case 0: in[pos] = static_cast<uint8_t>(next()); break;
      case 1: in.erase(in.begin() + static_cast<long>(pos)); break;
      default: in.insert(in.begin() + static_cast<long>(pos), static_cast<uint8_t>(next())); break;
    }
    auto d = DecodeSignedTransaction(in);
    if (d.ok()) {
      EXPECT_EQ(EncodeSignedTransaction(d->tx, d->signature), in);
    }
  }
}

// The worked example in EIP-155 itself.
TEST(EthTx, Eip155LegacyExample) {
  LegacyTransaction tx;
  tx.nonce = 9;
  tx.gas_price = Uint256FromU64(20'000'000'000);
  tx.gas_limit = 21000;
  tx.to = Arr<20>("3535353535353535353535353535353535353535");
  tx.value = *Uint256FromDecimal("1000000000000000000");
  tx.chain_id = 1;
  EXPECT_EQ(ToHex(LegacySigningPayload(tx)),
            "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080018080");
  EXPECT_EQ(ToHex(LegacySigningHash(tx)), "daf5a779ae972f972197303d7b574746c7ef83eadac0f2791ad23db92e4c8e53");
  Secp256k1Secret key = Arr<32>("4646464646464646464646464646464646464646464646464646464646464646");
  auto raw = SignLegacyTransaction(key, tx);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(
      ToHex(*raw),
      "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe5375"
      "67866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83");
  auto dec = DecodeSignedLegacyTransaction(*raw);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->tx, tx);
  EXPECT_EQ(ToHex(dec->sender), "9d8a62f656a8d1615c1294fd71e9cfb3e4855a4f");

  // Round trip on another chain id with a contract creation.
  LegacyTransaction create = tx;
  create.to.reset();
  create.chain_id = 31337;
  create.data = {0x60, 0x80};
  auto raw2 = SignLegacyTransaction(kAnvilKey, create);
  ASSERT_TRUE(raw2.ok());
  auto dec2 = DecodeSignedLegacyTransaction(*raw2);
  ASSERT_TRUE(dec2.ok()) << dec2.status().ToString();
  EXPECT_EQ(dec2->tx, create);
  EXPECT_EQ(AddressToChecksumHex(dec2->sender), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

  // Refusals.
  LegacyTransaction bad = tx;
  bad.chain_id = 0;
  EXPECT_FALSE(SignLegacyTransaction(key, bad).ok());
  bad.chain_id = UINT64_MAX / 2;
  EXPECT_FALSE(SignLegacyTransaction(key, bad).ok());
  std::vector<uint8_t> pre155 = *raw;
  pre155[43] = 0x1b;  // v = 27 in place of 37 (0x25)
  ASSERT_EQ((*raw)[43], 0x25);
  EXPECT_FALSE(DecodeSignedLegacyTransaction(pre155).ok());
  EXPECT_FALSE(DecodeSignedLegacyTransaction(std::span<const uint8_t>(raw->data(), raw->size() - 1)).ok());
  EXPECT_FALSE(DecodeSignedLegacyTransaction({}).ok());
  // A typed transaction is not a legacy one, and vice versa.
  auto typed = SignTransaction(kAnvilKey, FromVector(kVectors[0]));
  ASSERT_TRUE(typed.ok());
  EXPECT_FALSE(DecodeSignedLegacyTransaction(*typed).ok());
  EXPECT_FALSE(DecodeSignedTransaction(*raw).ok());
}

}  // namespace
}  // namespace consensor::node
