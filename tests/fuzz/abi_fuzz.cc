// Solidity ABI decoding (node/chain/abi.h) of what a JSON-RPC endpoint returns: call results,
// revert data and event logs. The first input byte picks one of the type lists the chain client
// decodes (or, past the table, a type list written in the input up to a newline); the rest is
// the data. Decoded values must encode again, and that encoding must decode to the same values.
#include <string_view>

#include "node/chain/abi.h"
#include "node/chain/chain_client.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

namespace {

constexpr const char* kTypeLists[] = {
    "(uint8,bool,uint256,uint256,uint256,string)",  // operator info
    "(address[],uint256[])",                        // operator set
    "(uint256)",
    "(uint256,uint256,bool)",
    "(bool)",
    "(address)",
    "(bytes32,bytes,uint64[2][],(address,string)[])",  // nesting the client does not use yet
};
constexpr size_t kTypeListCount = sizeof(kTypeLists) / sizeof(kTypeLists[0]);
constexpr const char* kEvent =
    "DisputeSlashed(address indexed,bytes32 indexed,uint256,address indexed,uint256,bytes32,uint256)";

}  // namespace

CNSR_FUZZ_TARGET(abi) {
  if (size == 0) return 0;
  std::string_view type_list = kTypeLists[data[0] % kTypeListCount];
  std::span<const uint8_t> rest(data + 1, size - 1);
  if (data[0] >= 0x80) {
    const std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());
    const size_t newline = text.find('\n');
    if (newline == std::string_view::npos) return 0;
    type_list = text.substr(0, newline);
    rest = rest.subspan(newline + 1);
  }
  auto types = ParseAbiTypeList(type_list);
  if (types.ok()) {
    auto values = AbiDecode(*types, rest);
    if (values.ok()) {
      auto encoded = AbiEncode(*types, *values);
      CNSR_FUZZ_CHECK(encoded.ok());
      auto again = AbiDecode(*types, *encoded);
      CNSR_FUZZ_CHECK(again.ok() && *again == *values);
    }
  }
  // The same bytes as revert data and as an event log (three indexed topics, then the data).
  (void)DescribeRevert("0x" + ToHex(rest));
  if (rest.size() >= 4 * 32) {
    std::vector<Hash256> topics(4);
    auto topic0 = EventTopic(kEvent);
    CNSR_FUZZ_CHECK(topic0.ok());
    topics[0] = *topic0;
    for (size_t i = 1; i < 4; ++i)
      std::copy_n(rest.begin() + static_cast<ptrdiff_t>(32 * (i - 1)), 32, topics[i].begin());
    (void)DecodeEventLog(kEvent, topics, rest.subspan(3 * 32));
  }
  return 0;
}

CNSR_FUZZ_SEEDS(abi) {
  std::vector<std::vector<uint8_t>> seeds;
  auto add = [&](uint8_t selector, std::string_view types, const std::vector<AbiValue>& values) {
    auto parsed = ParseAbiTypeList(types);
    if (!parsed.ok()) return;
    auto encoded = AbiEncode(*parsed, values);
    if (!encoded.ok()) return;
    std::vector<uint8_t> seed{selector};
    if (selector >= 0x80) {
      seed.insert(seed.end(), types.begin(), types.end());
      seed.push_back('\n');
    }
    seed.insert(seed.end(), encoded->begin(), encoded->end());
    seeds.push_back(seed);
  };
  Address20 a{};
  a.fill(0x11);
  add(0, kTypeLists[0],
      {AbiValue::Uint(1), AbiValue::Bool(true), AbiValue::Uint(5), AbiValue::Uint(6), AbiValue::Uint(7),
       AbiValue::String("127.0.0.1:7401")});
  add(1, kTypeLists[1],
      {AbiValue::Array({AbiValue::Address(a), AbiValue::Address(a)}),
       AbiValue::Array({AbiValue::Uint(10), AbiValue::Uint(20)})});
  add(3, kTypeLists[3], {AbiValue::Uint(1), AbiValue::Uint(2), AbiValue::Bool(false)});
  add(6, kTypeLists[6],
      {AbiValue::Bytes32(Hash256{}), AbiValue::Bytes(std::vector<uint8_t>{1, 2, 3}),
       AbiValue::Array({AbiValue::Array({AbiValue::Uint(1), AbiValue::Uint(2)})}),
       AbiValue::Array({AbiValue::Tuple({AbiValue::Address(a), AbiValue::String("x")})})});
  add(0x80, "(string,uint16[])", {AbiValue::String("hello"), AbiValue::Array({AbiValue::Uint(3)})});
  // An Error(string) revert: selector 0x08c379a0 then the string.
  auto reason = EncodeCall("Error(string)", std::vector<AbiValue>{AbiValue::String("not an operator")});
  if (reason.ok()) {
    std::vector<uint8_t> seed{2};
    seed.insert(seed.end(), reason->begin(), reason->end());
    seeds.push_back(seed);
  }
  return seeds;
}
