#include "node/chain/rlp.h"
#include "tests/test_hex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/sha256.h"

namespace consensor::node {
namespace {

using testing_support::Hex;

RlpItem S(std::string_view s) { return RlpItem::String(s); }
RlpItem L(std::vector<RlpItem> v) { return RlpItem::List(std::move(v)); }
RlpItem U(uint64_t v) { return RlpItem::Uint(v); }

// Encodes `item`, compares with the expected hex, and checks the strict decoder gives it back.
void ExpectVector(const RlpItem& item, std::string_view hex, const char* name) {
  std::vector<uint8_t> enc = RlpEncode(item);
  EXPECT_EQ(ToHex(enc), std::string(hex.substr(2))) << name;
  auto dec = RlpDecode(Hex(hex));
  ASSERT_TRUE(dec.ok()) << name << ": " << dec.status().ToString();
  EXPECT_EQ(*dec, item) << name;
}

// Valid vectors from ethereum/tests RLPTests/rlptest.json.
TEST(Rlp, OfficialValidVectors) {
  const std::string lorem55 = "Lorem ipsum dolor sit amet, consectetur adipisicing eli";
  const std::string lorem56 = lorem55 + "t";
  ExpectVector(S(""), "0x80", "emptystring");
  ExpectVector(S(std::string(1, '\0')), "0x00", "bytestring00");
  ExpectVector(S("\x01"), "0x01", "bytestring01");
  ExpectVector(S("\x7f"), "0x7f", "bytestring7F");
  ExpectVector(S("dog"), "0x83646f67", "shortstring");
  ExpectVector(
      S(lorem55),
      "0xb74c6f72656d20697073756d20646f6c6f722073697420616d65742c20636f6e7365637465747572206164697069736963696e6720656c69",
      "shortstring2");
  ExpectVector(
      S(lorem56),
      "0xb8384c6f72656d20697073756d20646f6c6f722073697420616d65742c20636f6e7365637465747572206164697069736963696e6720656c6974",
      "longstring");
  ExpectVector(U(0), "0x80", "zero");
  ExpectVector(U(1), "0x01", "smallint");
  ExpectVector(U(16), "0x10", "smallint2");
  ExpectVector(U(79), "0x4f", "smallint3");
  ExpectVector(U(127), "0x7f", "smallint4");
  ExpectVector(U(128), "0x8180", "mediumint1");
  ExpectVector(U(1000), "0x8203e8", "mediumint2");
  ExpectVector(U(100000), "0x830186a0", "mediumint3");
  // mediumint4 = 83729609699884896815286331701780722 = 0x102030405060708090a0b0c0d0e0f2
  ExpectVector(RlpItem::UintBigEndian(Hex("00102030405060708090a0b0c0d0e0f2")), "0x8f102030405060708090a0b0c0d0e0f2",
               "mediumint4");
  ExpectVector(RlpItem::UintBigEndian(Hex("0100020003000400050006000700080009000a000b000c000d000e01")),
               "0x9c0100020003000400050006000700080009000a000b000c000d000e01", "mediumint5");
  // bigint = 2^256
  ExpectVector(RlpItem::UintBigEndian(Hex("010000000000000000000000000000000000000000000000000000000000000000")),
               "0xa1010000000000000000000000000000000000000000000000000000000000000000", "bigint");
  ExpectVector(L({}), "0xc0", "emptylist");
  ExpectVector(L({S("dog"), S("god"), S("cat")}), "0xcc83646f6783676f6483636174", "stringlist");
  ExpectVector(L({S("zw"), L({U(4)}), U(1)}), "0xc6827a77c10401", "multilist");
  ExpectVector(
      L({S("asdf"), S("qwer"), S("zxcv"), S("asdf"), S("qwer"), S("zxcv"), S("asdf"), S("qwer"), S("zxcv"), S("asdf"),
         S("qwer")}),
      "0xf784617364668471776572847a78637684617364668471776572847a78637684617364668471776572847a78637684617364668471776572",
      "shortListMax1");
  RlpItem triple = L({S("asdf"), S("qwer"), S("zxcv")});
  ExpectVector(
      L({triple, triple, triple, triple}),
      "0xf840cf84617364668471776572847a786376cf84617364668471776572847a786376cf84617364668471776572847a786376cf8461"
      "7364668471776572847a786376",
      "longList1");
  std::string long2 = "0xf90200";
  for (int i = 0; i < 32; ++i) long2 += "cf84617364668471776572847a786376";
  ExpectVector(L(std::vector<RlpItem>(32, triple)), long2, "longList2");
  ExpectVector(L({L({L({}), L({})}), L({})}), "0xc4c2c0c0c0", "listsoflists");
  ExpectVector(L({L({}), L({L({})}), L({L({}), L({L({})})})}), "0xc7c0c1c0c3c0c1c0", "listsoflists2");
  ExpectVector(
      L({L({S("key1"), S("val1")}), L({S("key2"), S("val2")}), L({S("key3"), S("val3")}), L({S("key4"), S("val4")})}),
      "0xecca846b6579318476616c31ca846b6579328476616c32ca846b6579338476616c33ca846b6579348476616c34", "dictTest1");
}

TEST(Rlp, LongString1024) {
  // longstring2 in rlptest.json is a 1024-byte string: header b9 04 00.
  std::string s(1024, 'x');
  std::vector<uint8_t> enc = RlpEncode(S(s));
  ASSERT_EQ(enc.size(), 1027u);
  EXPECT_EQ(enc[0], 0xb9);
  EXPECT_EQ(enc[1], 0x04);
  EXPECT_EQ(enc[2], 0x00);
  auto dec = RlpDecode(enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(*dec, S(s));
}

// Invalid vectors from ethereum/tests RLPTests/invalidRLPTest.json, plus a few more.
TEST(Rlp, OfficialInvalidVectors) {
  const char* invalid[] = {
      "bf0f000000000000021111",                                                    // int32Overflow
      "ff0f000000000000021111",                                                    // int32Overflow2
      "f80180",                                                                    // wrongSizeList
      "f80100",                                                                    // wrongSizeList2
      "b9002100dc2b275d0f74e8a53e6f4ec61b27f24278820be3f82ea2110e582081b0565df0",  // incorrectLengthInArray
      "f861f83eb9002100dc2b275d0f74e8a53e6f4ec61b27f24278820be3f82ea2110e582081b0565df027b90015002d5ef8325ae4d034df55d4b58d0d"
      "fba64d61ddd17be00000b9001a00dae30907045a2f66fa36f2bb8aa9029cbb0b8a7b3b5c435ab331",  // randomRLP
      "8100",                                                                              // bytesShouldBeSingleByte00
      "8101",                                                                              // bytesShouldBeSingleByte01
      "817f",                                                                              // bytesShouldBeSingleByte7F
      "b90040000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435"
      "363738393a3b3c3d3e3f",  // leadingZerosInLongLengthArray1
      "b800",                  // leadingZerosInLongLengthArray2
      "fb00000040000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233"
      "3435363738393a3b3c3d3e3f",              // leadingZerosInLongLengthList1
      "f800",                                  // leadingZerosInLongLengthList2
      "b81000112233445566778899aabbccddeeff",  // nonOptimalLongLengthArray1
      "b801ff",                                // nonOptimalLongLengthArray2
      "f810000102030405060708090a0b0c0d0e0f",  // nonOptimalLongLengthList1
      "f803112233",                            // nonOptimalLongLengthList2
      // Additional: empty input, trailing bytes, truncation, length past end inside a list.
      "",
      "8080",
      "c0c0",
      "83646f",
      "c38364",
      "c483646f6767",  // list payload shorter than its content says? (c4 with 5 bytes: trailing)
      "b8",
      "f9",
      "ffffffffffffffffff",
  };
  for (const char* h : invalid) {
    auto r = RlpDecode(Hex(h));
    EXPECT_FALSE(r.ok()) << h;
    if (!r.ok()) {
      EXPECT_TRUE(r.status().code() == StatusCode::kInvalidArgument) << h << ": " << r.status().ToString();
    }
  }
}

TEST(Rlp, DepthLimit) {
  // 64 nested lists decode; 65 do not.
  auto nested = [](int depth) {
    std::vector<uint8_t> payload;
    for (int i = 0; i < depth; ++i) {
      std::vector<uint8_t> wrapped;
      RlpAppendListHeader(payload.size(), wrapped);
      wrapped.insert(wrapped.end(), payload.begin(), payload.end());
      payload.swap(wrapped);
    }
    return payload;
  };
  EXPECT_TRUE(RlpDecode(nested(64)).ok());
  auto r = RlpDecode(nested(65));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);

  // Very deep nesting (thousands of levels) must fail with an error, not overflow the stack.
  std::vector<uint8_t> payload = nested(3000);
  EXPECT_FALSE(RlpDecode(payload).ok());
}

TEST(Rlp, ItemLimit) {
  RlpLimits limits;
  limits.max_items = 10;
  std::vector<RlpItem> items(20, U(1));
  std::vector<uint8_t> enc = RlpEncode(L(items));
  auto r = RlpDecode(enc, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(RlpDecode(enc).ok());
  limits.max_items = 1000;
  limits.max_input = 8;
  EXPECT_EQ(RlpDecode(enc, limits).status().code(), StatusCode::kResourceExhausted);
}

TEST(Rlp, IntegerViews) {
  EXPECT_EQ(*RlpToUint64(U(0)), 0u);
  EXPECT_EQ(*RlpToUint64(U(0xffffffffffffffffull)), 0xffffffffffffffffull);
  EXPECT_FALSE(RlpToUint64(RlpItem::Bytes(Hex("00"))).ok());                  // leading zero
  EXPECT_FALSE(RlpToUint64(RlpItem::Bytes(Hex("0001"))).ok());                // leading zero
  EXPECT_FALSE(RlpToUint64(RlpItem::Bytes(Hex("010000000000000000"))).ok());  // 9 bytes
  EXPECT_FALSE(RlpToUint64(L({})).ok());
  auto u = RlpToUint256(RlpItem::Bytes(Hex("0102")));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[30], 1);
  EXPECT_EQ((*u)[31], 2);
  EXPECT_FALSE(RlpToUint256(RlpItem::Bytes(std::vector<uint8_t>(33, 1))).ok());
}

TEST(Rlp, FuzzRoundTripAndNoCrash) {
  // Deterministic pseudo-random inputs: the decoder must never crash, and anything it accepts
  // must re-encode to exactly the same bytes (canonical).
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::vector<uint8_t> seed = RlpEncode(L({S("dog"), L({U(4), S(std::string(60, 'a'))}), U(100000)}));
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> in = seed;
    int muts = 1 + static_cast<int>(next() % 4);
    for (int m = 0; m < muts; ++m) {
      size_t pos = next() % in.size();
      switch (next() % 3) {
        case 0: in[pos] = static_cast<uint8_t>(next()); break;
        case 1: in.erase(in.begin() + static_cast<long>(pos)); break;
        default: in.insert(in.begin() + static_cast<long>(pos), static_cast<uint8_t>(next())); break;
      }
      if (in.empty()) in.push_back(0xc0);
    }
    auto r = RlpDecode(in);
    if (r.ok()) {
      ++accepted;
      EXPECT_EQ(RlpEncode(*r), in);
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace consensor::node
