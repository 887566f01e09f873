#include "node/chain/abi.h"
#include "tests/test_hex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/keccak.h"
#include "node/chain/chain_client.h"

namespace consensor::node {
namespace {

using testing_support::Hex;

std::string W(std::string_view h) { return std::string(64 - h.size(), '0') + std::string(h); }  // left-padded word

std::vector<uint8_t> Bytes(std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string CallHex(std::string_view sig, std::vector<AbiValue> args) {
  auto r = EncodeCall(sig, args);
  EXPECT_TRUE(r.ok()) << sig << ": " << r.status().ToString();
  return r.ok() ? ToHex(*r) : "";
}

// Decodes `data` (call data with selector) back with `sig` and checks it equals `args`.
void ExpectCallRoundTrip(std::string_view sig, const std::vector<AbiValue>& args, const std::vector<uint8_t>& data) {
  auto dec = DecodeWithSelector(sig, data);
  ASSERT_TRUE(dec.ok()) << sig << ": " << dec.status().ToString();
  EXPECT_EQ(*dec, args) << sig;
}

// ---- Examples from the Solidity ABI specification (docs/abi-spec.rst).

TEST(Abi, SpecSelectors) {
  EXPECT_EQ(ToHex(*FunctionSelector("baz(uint32,bool)")), "cdcd77c0");
  EXPECT_EQ(ToHex(*FunctionSelector("bar(bytes3[2])")), "fce353f6");
  EXPECT_EQ(ToHex(*FunctionSelector("sam(bytes,bool,uint256[])")), "a5643bf2");
  EXPECT_EQ(ToHex(*FunctionSelector("sam(bytes,bool,uint[])")), "a5643bf2");  // uint is uint256
  EXPECT_EQ(ToHex(*FunctionSelector("f(uint256,uint32[],bytes10,bytes)")), "8be65246");
  EXPECT_EQ(ToHex(*FunctionSelector("f(uint,uint32[],bytes10,bytes)")), "8be65246");
  EXPECT_EQ(ToHex(*FunctionSelector("g(uint256[][],string[])")), "2289b18c");
  // Widely published selectors and topics.
  EXPECT_EQ(ToHex(*FunctionSelector("transfer(address,uint256)")), "a9059cbb");
  EXPECT_EQ(ToHex(*FunctionSelector("Error(string)")), "08c379a0");
  EXPECT_EQ(ToHex(*EventTopic("Transfer(address indexed,address indexed,uint256)")),
            "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");
}

TEST(Abi, SpecBaz) {
  std::vector<AbiValue> args = {AbiValue::Uint(69), AbiValue::Bool(true)};
  std::string expect = "cdcd77c0" + W("45") + W("1");
  EXPECT_EQ(CallHex("baz(uint32,bool)", args), expect);
  ExpectCallRoundTrip("baz(uint32,bool)", args, Hex(expect));
}

TEST(Abi, SpecBar) {
  std::vector<AbiValue> args = {
      AbiValue::Array({AbiValue::FixedBytes(Bytes("abc")), AbiValue::FixedBytes(Bytes("def"))})};
  std::string expect =
      "fce353f6"
      "6162630000000000000000000000000000000000000000000000000000000000"
      "6465660000000000000000000000000000000000000000000000000000000000";
  EXPECT_EQ(CallHex("bar(bytes3[2])", args), expect);
  ExpectCallRoundTrip("bar(bytes3[2])", args, Hex(expect));
}

TEST(Abi, SpecSam) {
  std::vector<AbiValue> args = {AbiValue::Bytes(Bytes("dave")), AbiValue::Bool(true),
                                AbiValue::Array({AbiValue::Uint(1), AbiValue::Uint(2), AbiValue::Uint(3)})};
  std::string expect = "a5643bf2" + W("60") + W("1") + W("a0") + W("4") +
                       "6461766500000000000000000000000000000000000000000000000000000000" + W("3") + W("1") + W("2") +
                       W("3");
  EXPECT_EQ(CallHex("sam(bytes,bool,uint256[])", args), expect);
  ExpectCallRoundTrip("sam(bytes,bool,uint256[])", args, Hex(expect));
}

TEST(Abi, SpecDynamicTypesF) {
  std::vector<AbiValue> args = {AbiValue::Uint(0x123), AbiValue::Array({AbiValue::Uint(0x456), AbiValue::Uint(0x789)}),
                                AbiValue::FixedBytes(Bytes("1234567890")), AbiValue::Bytes(Bytes("Hello, world!"))};
  std::string expect =
      "8be65246" + W("123") + W("80") + "3132333435363738393000000000000000000000000000000000000000000000" + W("e0") +
      W("2") + W("456") + W("789") + W("d") + "48656c6c6f2c20776f726c642100000000000000000000000000000000000000";
  EXPECT_EQ(CallHex("f(uint256,uint32[],bytes10,bytes)", args), expect);
  ExpectCallRoundTrip("f(uint256,uint32[],bytes10,bytes)", args, Hex(expect));
}

TEST(Abi, SpecNestedDynamicG) {
  std::vector<AbiValue> args = {
      AbiValue::Array({AbiValue::Array({AbiValue::Uint(1), AbiValue::Uint(2)}), AbiValue::Array({AbiValue::Uint(3)})}),
      AbiValue::Array({AbiValue::String("one"), AbiValue::String("two"), AbiValue::String("three")})};
  std::string expect = "2289b18c" + W("40") + W("140") + W("2") + W("40") + W("a0") + W("2") + W("1") + W("2") +
                       W("1") + W("3") + W("3") + W("60") + W("a0") + W("e0") + W("3") +
                       "6f6e650000000000000000000000000000000000000000000000000000000000" + W("3") +
                       "74776f0000000000000000000000000000000000000000000000000000000000" + W("5") +
                       "7468726565000000000000000000000000000000000000000000000000000000";
  EXPECT_EQ(CallHex("g(uint256[][],string[])", args), expect);
  ExpectCallRoundTrip("g(uint256[][],string[])", args, Hex(expect));
}

// ---- Consensor's own contract shapes.

AbiValue AttestationTuple(uint64_t block) {
  return AbiValue::Tuple({AbiValue::Bytes32(Keccak256("task")), AbiValue::Bytes32(Keccak256("result")),
                          AbiValue::Bytes32(Keccak256("trace")), AbiValue::Uint(block)});
}

TEST(Abi, SlashDisputeRoundTrip) {
  const char* sig = "slashDispute((bytes32,bytes32,bytes32,uint64),bytes,(bytes32,bytes32,bytes32,uint64),bytes[])";
  std::vector<AbiValue> args = {AttestationTuple(100), AbiValue::Bytes(std::vector<uint8_t>(65, 0xab)),
                                AttestationTuple(101),
                                AbiValue::Array({AbiValue::Bytes(Bytes("proof one")), AbiValue::Bytes({}),
                                                 AbiValue::Bytes(std::vector<uint8_t>(64, 7))})};
  auto enc = EncodeCall(sig, args);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  // Static tuples are inline: 4 words each; heads = 4 + 1 + 4 + 1 = 10 words.
  std::vector<uint8_t> body(enc->begin() + 4, enc->end());
  EXPECT_EQ(ToHex(std::span<const uint8_t>(body.data() + 4 * 32, 32)), W("140"));  // offset of bytes = 10 * 32
  ExpectCallRoundTrip(sig, args, *enc);
  // Selector matches the canonical string.
  Hash256 h = Keccak256(std::string_view(sig));
  EXPECT_TRUE(std::equal(h.begin(), h.begin() + 4, enc->begin()));
}

TEST(Abi, EncodeTypeChecks) {
  EXPECT_FALSE(EncodeCall("f(uint8)", std::vector<AbiValue>{AbiValue::Uint(256)}).ok());
  EXPECT_TRUE(EncodeCall("f(uint8)", std::vector<AbiValue>{AbiValue::Uint(255)}).ok());
  EXPECT_FALSE(EncodeCall("f(uint64)", std::vector<AbiValue>{AbiValue::Bool(true)}).ok());
  EXPECT_FALSE(EncodeCall("f(bytes32)", std::vector<AbiValue>{AbiValue::FixedBytes(Bytes("short"))}).ok());
  EXPECT_FALSE(EncodeCall("f(uint8[2])", std::vector<AbiValue>{AbiValue::Array({AbiValue::Uint(1)})}).ok());
  EXPECT_FALSE(EncodeCall("f(uint8,bool)", std::vector<AbiValue>{AbiValue::Uint(1)}).ok());
  EXPECT_FALSE(EncodeCall("f((uint8,bool))", std::vector<AbiValue>{AbiValue::Tuple({AbiValue::Uint(1)})}).ok());
  EXPECT_FALSE(EncodeCall("f(string)", std::vector<AbiValue>{AbiValue::Bytes(Bytes("x"))}).ok());
  Address20 a{};
  a[19] = 1;
  auto enc = EncodeCall("f(address)", std::vector<AbiValue>{AbiValue::Address(a)});
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(ToHex(std::span<const uint8_t>(enc->data() + 4, 32)), W("1"));
}

TEST(Abi, TypeParser) {
  const char* good[] = {"uint8",
                        "uint256",
                        "bool",
                        "address",
                        "bytes1",
                        "bytes32",
                        "bytes",
                        "string",
                        "uint256[]",
                        "uint8[3][]",
                        "(bytes32,uint64)",
                        "(bytes32,uint64)[]",
                        "((uint8,bytes)[],string)[2]"};
  for (const char* t : good) {
    auto r = ParseAbiType(t);
    ASSERT_TRUE(r.ok()) << t << ": " << r.status().ToString();
    EXPECT_EQ(r->Canonical(), t);
  }
  EXPECT_EQ(ParseAbiType("uint")->Canonical(), "uint256");
  const char* bad[] = {"",         "uint7",    "uint0",        "uint264",     "uint08",
                       "int256",   "bytes0",   "bytes33",      "bytes01",     "fixed128x18",
                       "uint256[", "uint256]", "uint256[0]",   "uint256[01]", "uint256[1000000]",
                       "()",       "(uint8",   "(uint8,)",     "(,uint8)",    "uint8 ",
                       " uint8",   "UINT8",    "tuple(uint8)", "uint8[2]x",   "function"};
  for (const char* t : bad) EXPECT_FALSE(ParseAbiType(t).ok()) << t;
  // Depth and size caps.
  std::string deep = "uint8";
  for (int i = 0; i < 20; ++i) deep += "[]";
  EXPECT_FALSE(ParseAbiType(deep).ok());
  std::string deep_tuple = std::string(40, '(') + "uint8" + std::string(40, ')');
  EXPECT_FALSE(ParseAbiType(deep_tuple).ok());
  std::string deep_unbalanced(100000, '(');
  EXPECT_FALSE(ParseAbiType(deep_unbalanced).ok());
  EXPECT_FALSE(ParseAbiType("uint256[1000][1000]").ok());  // 32 MB static type
  std::string wide = "(";
  for (int i = 0; i < 600; ++i) wide += i ? ",uint8" : "uint8";
  EXPECT_FALSE(ParseAbiType(wide + ")").ok());

  EXPECT_FALSE(ParseAbiSignature("f(uint8 indexed)").ok());  // indexed only in events
  EXPECT_TRUE(ParseAbiSignature("E(uint8 indexed)", true).ok());
  EXPECT_FALSE(ParseAbiSignature("f (uint8)").ok());
  EXPECT_FALSE(ParseAbiSignature("1f(uint8)").ok());
  EXPECT_FALSE(ParseAbiSignature("f(uint8)x").ok());
  EXPECT_TRUE(ParseAbiSignature("f()").ok());
  EXPECT_FALSE(ParseAbiTypeList("(uint8").ok());
}

TEST(Abi, Uint256Helpers) {
  auto max = Uint256FromDecimal("115792089237316195423570985008687907853269984665640564039457584007913129639935");
  ASSERT_TRUE(max.ok());
  for (uint8_t b : *max) EXPECT_EQ(b, 0xff);
  EXPECT_EQ(Uint256ToDecimal(*max), "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  EXPECT_EQ(Uint256FromDecimal("115792089237316195423570985008687907853269984665640564039457584007913129639936")
                .status()
                .code(),
            StatusCode::kOutOfRange);
  EXPECT_FALSE(Uint256FromDecimal("").ok());
  EXPECT_FALSE(Uint256FromDecimal("12a").ok());
  EXPECT_FALSE(Uint256FromDecimal("-1").ok());
  EXPECT_EQ(*Uint256FromDecimal("1000000000000000000"), Uint256FromU64(1000000000000000000ull));
  EXPECT_EQ(Uint256ToDecimal(Uint256FromU64(0)), "0");
  EXPECT_EQ(Uint256ToDecimal(Uint256FromU64(1234567890123ull)), "1234567890123");
  EXPECT_EQ(*Uint256FromHex("0x1e8e"), Uint256FromU64(7822));
  EXPECT_EQ(*Uint256FromHex("FF"), Uint256FromU64(255));
  EXPECT_FALSE(Uint256FromHex("0x").ok());
  EXPECT_FALSE(Uint256FromHex("0xg").ok());
  EXPECT_FALSE(Uint256FromHex("0x1" + std::string(64, '0')).ok());
  EXPECT_EQ(Uint256ToHex(Uint256FromU64(0)), "0x0");
  EXPECT_EQ(Uint256ToHex(Uint256FromU64(7822)), "0x1e8e");
  EXPECT_EQ(*Uint256ToU64(Uint256FromU64(~0ull)), ~0ull);
  EXPECT_EQ(Uint256ToU64(*max).status().code(), StatusCode::kOutOfRange);
}

// ---- Hostile decoding.

TEST(Abi, DecodeRejectsDirtyBits) {
  EXPECT_TRUE(AbiDecode("(uint8)", Hex(W("ff"))).ok());
  EXPECT_FALSE(AbiDecode("(uint8)", Hex(W("100"))).ok());
  EXPECT_FALSE(AbiDecode("(uint64)", Hex(W("10000000000000000"))).ok());
  EXPECT_FALSE(AbiDecode("(bool)", Hex(W("2"))).ok());
  EXPECT_FALSE(AbiDecode("(address)", Hex("000000000000000000000001" + std::string(40, 'a'))).ok());
  EXPECT_TRUE(AbiDecode("(address)", Hex("000000000000000000000000" + std::string(40, 'a'))).ok());
  EXPECT_FALSE(AbiDecode("(bytes3)", Hex("61626364" + std::string(56, '0'))).ok());
  // bytes with nonzero padding.
  EXPECT_FALSE(AbiDecode("(bytes)", Hex(W("20") + W("1") + "61" + std::string(60, '0') + "01")).ok());
  EXPECT_TRUE(AbiDecode("(bytes)", Hex(W("20") + W("1") + "61" + std::string(62, '0'))).ok());
}

TEST(Abi, DecodeRejectsBadOffsetsAndLengths) {
  const char* types = "(bytes)";
  EXPECT_FALSE(AbiDecode(types, {}).ok());                                    // empty
  EXPECT_FALSE(AbiDecode(types, Hex(W("20"))).ok());                          // offset to end, no length
  EXPECT_FALSE(AbiDecode(types, Hex(W("40") + W("0"))).ok());                 // offset past end
  EXPECT_FALSE(AbiDecode(types, Hex(std::string(64, 'f'))).ok());             // huge offset
  EXPECT_FALSE(AbiDecode(types, Hex(W("ffffffffffffffff") + W("0"))).ok());   // offset near 2^64
  EXPECT_FALSE(AbiDecode(types, Hex(W("20") + std::string(64, 'f'))).ok());   // huge length
  EXPECT_FALSE(AbiDecode(types, Hex(W("20") + W("ffffffffffffffff"))).ok());  // length near 2^64
  EXPECT_FALSE(AbiDecode(types, Hex(W("20") + W("21") + W("0"))).ok());       // length past end
  EXPECT_FALSE(AbiDecode(types, Hex(W("20") + W("1") + "61")).ok());          // missing padding
  EXPECT_TRUE(AbiDecode(types, Hex(W("20") + W("0"))).ok());                  // empty bytes
  // Arrays: length far beyond the data, truncated elements.
  EXPECT_FALSE(AbiDecode("(uint256[])", Hex(W("20") + W("ffffffff"))).ok());
  EXPECT_FALSE(AbiDecode("(uint256[])", Hex(W("20") + W("2") + W("1"))).ok());
  EXPECT_TRUE(AbiDecode("(uint256[])", Hex(W("20") + W("2") + W("1") + W("2"))).ok());
  EXPECT_FALSE(AbiDecode("(bytes[])", Hex(W("20") + W("1") + W("20"))).ok());
  // Truncated static heads.
  EXPECT_FALSE(AbiDecode("(uint256,uint256)", Hex(W("1"))).ok());
  EXPECT_FALSE(AbiDecode("((bytes32,bytes32,bytes32,uint64))", Hex(W("1") + W("2") + W("3"))).ok());
  // Trailing data is allowed, as in Solidity.
  EXPECT_TRUE(AbiDecode("(uint256)", Hex(W("1") + W("2"))).ok());
}

TEST(Abi, DecodeRejectsAliasedBlowup) {
  // bytes[] of N elements whose offsets all point at the same large payload: a tiny input that
  // would decode to N copies. The decode budget (bounded by the input size) stops it.
  const size_t n = 200;
  std::string data = W("20");  // offset of the array
  char buf[32];
  snprintf(buf, sizeof(buf), "%zx", n);
  data += W(buf);                             // length n
  snprintf(buf, sizeof(buf), "%zx", n * 32);  // every element points past the offset table
  for (size_t i = 0; i < n; ++i) data += W(buf);
  data += W("800");  // bytes length 2048
  data += std::string(2048 * 2, 'a');
  auto r = AbiDecode("(bytes[])", Hex(data));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exceeds the input size"), std::string::npos) << r.status().ToString();
  // The same element pointed to once decodes fine.
  std::string ok = W("20") + W("1") + W("20") + W("800") + std::string(2048 * 2, 'a');
  EXPECT_TRUE(AbiDecode("(bytes[])", Hex(ok)).ok());
}

TEST(Abi, DecodeFuzzNoCrash) {
  const char* sig = "slashDispute((bytes32,bytes32,bytes32,uint64),bytes,(bytes32,bytes32,bytes32,uint64),bytes[])";
  std::vector<AbiValue> args = {AttestationTuple(1), AbiValue::Bytes(std::vector<uint8_t>(65, 1)), AttestationTuple(2),
                                AbiValue::Array({AbiValue::Bytes(Bytes("a")), AbiValue::Bytes(Bytes("bb"))})};
  auto enc = EncodeCall(sig, args);
  ASSERT_TRUE(enc.ok());
  uint64_t x = 12345;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  int ok = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> in = *enc;
    int muts = 1 + static_cast<int>(next() % 3);
    for (int m = 0; m < muts; ++m) {
      size_t pos = 4 + next() % (in.size() - 4);
      switch (next() % 4) {
        case 0: in[pos] = static_cast<uint8_t>(next()); break;
        case 1: in[pos] ^= 0x80; break;
        case 2: in.resize(std::max<size_t>(5, pos)); break;
        default: in[std::min(in.size() - 1, pos - (pos - 4) % 32 + 31)] = static_cast<uint8_t>(next()); break;
      }
    }
    auto r = DecodeWithSelector(sig, in);
    if (r.ok()) {
      ++ok;
      // Whatever decodes re-encodes without error.
      EXPECT_TRUE(EncodeCall(sig, *r).ok());
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(Abi, DecodeRandomWordsNoCrash) {
  // Random inputs built from words likely to be valid offsets and lengths, over nested types,
  // so the decoder's deep paths see hostile values. It must return (ok or error), never crash.
  const char* type_lists[] = {"(bytes[],uint8[3][],(uint8,bytes)[2],string)", "(uint256[][],string[])",
                              "((bytes32,bytes32,bytes32,uint64),bytes,(bytes32,bytes32,bytes32,uint64),bytes[])",
                              "((uint8,bytes[])[],bool)", "(bytes[2][],address)"};
  uint64_t x = 777;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (const char* tl : type_lists) {
    auto types = ParseAbiTypeList(tl);
    ASSERT_TRUE(types.ok()) << tl;
    int ok = 0;
    for (int iter = 0; iter < 3000; ++iter) {
      size_t words = 1 + next() % 24;
      std::vector<uint8_t> data(words * 32, 0);
      for (size_t w = 0; w < words; ++w) {
        uint64_t kind = next() % 8;
        uint64_t v = kind < 5 ? 32 * (next() % (words + 1)) : kind == 5 ? next() % 4 : kind == 6 ? next() : ~0ull;
        for (int b = 0; b < 8; ++b) data[w * 32 + 31 - b] = static_cast<uint8_t>(v >> (8 * b));
        if (next() % 16 == 0) data[w * 32] = 0x80;
      }
      if (next() % 4 == 0) data.resize(data.size() - next() % 32);
      auto r = AbiDecode(*types, data);
      if (r.ok()) {
        ++ok;
        EXPECT_TRUE(AbiEncode(*types, *r).ok());
      }
    }
    EXPECT_GT(ok, 0) << tl;  // some inputs reach the success path
  }
}

// ---- Errors and events.

TEST(Abi, CustomErrorsAndRevertReason) {
  // Error(string) "Not enough Ether provided." as Solidity emits it.
  auto data = EncodeCall("Error(string)", std::vector<AbiValue>{AbiValue::String("Not enough Ether provided.")});
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(ToHex(*data),
            "08c379a0" + W("20") + W("1a") + "4e6f7420656e6f7567682045746865722070726f76696465642e000000000000");
  auto reason = DecodeRevertReason(*data);
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(*reason, "Not enough Ether provided.");

  // A custom error: InsufficientStake(address operator, uint256 have, uint256 want).
  Address20 op{};
  op[0] = 0xaa;
  auto err = EncodeCall("InsufficientStake(address,uint256,uint256)",
                        std::vector<AbiValue>{AbiValue::Address(op), AbiValue::Uint(5), AbiValue::Uint(10)});
  ASSERT_TRUE(err.ok());
  auto dec = DecodeError("InsufficientStake(address,uint256,uint256)", *err);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ((*dec)[0].address, op);
  EXPECT_EQ(*(*dec)[2].AsUint64(), 10u);
  EXPECT_EQ(DecodeError("Error(string)", *err).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(DecodeError("Error(string)", Hex("08c379")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRevertReason(Hex("08c379a0")).status().code(), StatusCode::kInvalidArgument);
}

// What an operator reads when a transaction reverts: the contract's error by name with its
// arguments, Solidity's Error(string), or the data itself.
TEST(Abi, DescribeRevertNamesTheContractError) {
  auto below =
      EncodeCall("StakeBelowMinimum(uint256,uint256)", std::vector<AbiValue>{AbiValue::Uint(5), AbiValue::Uint(10)});
  ASSERT_TRUE(below.ok());
  EXPECT_EQ(DescribeRevert("0x" + ToHex(*below)), "StakeBelowMinimum(5, 10)");
  auto reentrancy = EncodeCall("Reentrancy()", {});
  ASSERT_TRUE(reentrancy.ok());
  EXPECT_EQ(DescribeRevert("0x" + ToHex(*reentrancy)), "Reentrancy()");
  auto reason = EncodeCall("Error(string)", std::vector<AbiValue>{AbiValue::String("no")});
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(DescribeRevert("0x" + ToHex(*reason)), "Error(\"no\")");
  // A known selector with arguments that do not decode, an unknown selector, too few bytes.
  EXPECT_EQ(DescribeRevert("0x" + ToHex(*below).substr(0, 8)).rfind("unknown revert data", 0), 0u);
  EXPECT_EQ(DescribeRevert("0xdeadbeef"), "unknown revert data 0xdeadbeef");
  EXPECT_EQ(DescribeRevert("0x12"), "unknown revert data 0x12");
  EXPECT_EQ(DescribeRevert("0x"), "reverted without a reason");
}

TEST(Abi, EventLogDecoding) {
  // ERC-20 Transfer(address indexed from, address indexed to, uint256 value).
  const char* sig = "Transfer(address indexed,address indexed,uint256)";
  Address20 from{}, to{};
  from[19] = 1;
  to[19] = 2;
  Hash256 t0 = *EventTopic(sig);
  Hash256 t1{}, t2{};
  t1[31] = 1;
  t2[31] = 2;
  std::vector<Hash256> topics = {t0, t1, t2};
  auto r = DecodeEventLog(sig, topics, Hex(W("3e8")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].address, from);
  EXPECT_EQ((*r)[1].address, to);
  EXPECT_EQ(*(*r)[2].AsUint64(), 1000u);

  // Wrong topic count, wrong topic0, dirty indexed address.
  EXPECT_FALSE(DecodeEventLog(sig, std::vector<Hash256>{t0, t1}, Hex(W("3e8"))).ok());
  EXPECT_EQ(DecodeEventLog(sig, std::vector<Hash256>{t1, t1, t2}, Hex(W("3e8"))).status().code(),
            StatusCode::kNotFound);
  Hash256 dirty = t1;
  dirty[0] = 1;
  EXPECT_FALSE(DecodeEventLog(sig, std::vector<Hash256>{t0, dirty, t2}, Hex(W("3e8"))).ok());
  EXPECT_FALSE(DecodeEventLog(sig, std::vector<Hash256>{}, Hex(W("3e8"))).ok());

  // Indexed dynamic parameter comes back as its topic hash; non-indexed dynamic data decodes.
  const char* sig2 = "Submitted(bytes32 indexed,string indexed,bytes)";
  Hash256 task = Keccak256("task");
  Hash256 name_hash = Keccak256("name");
  auto data =
      AbiEncode(std::vector<AbiType>{*ParseAbiType("bytes")}, std::vector<AbiValue>{AbiValue::Bytes(Bytes("xyz"))});
  ASSERT_TRUE(data.ok());
  auto r2 = DecodeEventLog(sig2, std::vector<Hash256>{*EventTopic(sig2), task, name_hash}, *data);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(*(*r2)[0].AsBytes32(), task);
  EXPECT_EQ(*(*r2)[1].AsBytes32(), name_hash);
  EXPECT_EQ(*(*r2)[2].AsString(), "xyz");
  EXPECT_EQ(ToHex(*EventTopic(sig2)), ToHex(Keccak256("Submitted(bytes32,string,bytes)")));
}

}  // namespace
}  // namespace consensor::node
