// RLP (node/chain/rlp.h), as read back from the chain's JSON-RPC. The decoder accepts only
// canonical encodings, so every input it accepts must re-encode to exactly the same bytes.
#include "node/chain/rlp.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

namespace {

void CheckIntegers(const RlpItem& item, int depth) {
  if (item.is_list) {
    for (const RlpItem& child : item.list) CheckIntegers(child, depth + 1);
    return;
  }
  // Integer views must fail cleanly or round-trip.
  if (auto v = RlpToUint64(item); v.ok()) CNSR_FUZZ_CHECK(RlpItem::Uint(*v) == item);
  (void)RlpToUint256(item);
}

}  // namespace

CNSR_FUZZ_TARGET(rlp) {
  RlpLimits limits;
  limits.max_items = 1 << 16;
  auto item = RlpDecode(std::span<const uint8_t>(data, size), limits);
  if (!item.ok()) return 0;
  const std::vector<uint8_t> again = RlpEncode(*item);
  CNSR_FUZZ_CHECK(again.size() == size && std::equal(again.begin(), again.end(), data));
  CheckIntegers(*item, 0);
  return 0;
}

CNSR_FUZZ_SEEDS(rlp) {
  std::vector<std::vector<uint8_t>> seeds;
  // The shape of an EIP-1559 transaction payload: integers, an address, data, an access list.
  std::vector<uint8_t> to(20, 0xab);
  std::vector<uint8_t> input(70, 0x11);
  seeds.push_back(RlpEncode(
      RlpItem::List({RlpItem::Uint(31337), RlpItem::Uint(7), RlpItem::Uint(1000000000), RlpItem::Uint(30000000000),
                     RlpItem::Uint(21000), RlpItem::Bytes(to), RlpItem::Uint(0), RlpItem::Bytes(input),
                     RlpItem::List({}), RlpItem::Uint(1), RlpItem::Bytes(std::vector<uint8_t>(32, 0x5a)),
                     RlpItem::Bytes(std::vector<uint8_t>(32, 0x33))})));
  seeds.push_back(RlpEncode(RlpItem::String("dog")));
  seeds.push_back(RlpEncode(RlpItem::Uint(0)));
  seeds.push_back(RlpEncode(RlpItem::Uint(0x7f)));
  seeds.push_back(RlpEncode(RlpItem::Bytes(std::vector<uint8_t>(60, 0x42))));  // long string form
  seeds.push_back(RlpEncode(RlpItem::List({RlpItem::List({}), RlpItem::List({RlpItem::List({})})})));
  return seeds;
}
