#include "consensus/committee.h"

#include <algorithm>

#include "common/keccak.h"

namespace consensor::consensus {

namespace {

using u128 = unsigned __int128;

void AppendBe(std::vector<uint8_t>* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Exactly uniform in [0, bound) by rejection; bound > 0.
u128 UniformBelow(const Hash256& task_id, uint64_t reference_block, const Hash256& seed_block_hash, uint32_t draw,
                  u128 bound) {
  // floor((2^128 - 1) / bound) * bound values of x are accepted: a multiple of bound.
  const u128 limit = (~u128{0} / bound) * bound;
  static constexpr char kTag[] = "consensor.committee.v2";
  for (uint32_t k = 0;; ++k) {
    std::vector<uint8_t> msg(kTag, kTag + sizeof(kTag) - 1);
    msg.insert(msg.end(), task_id.begin(), task_id.end());
    AppendBe(&msg, reference_block, 8);
    msg.insert(msg.end(), seed_block_hash.begin(), seed_block_hash.end());
    AppendBe(&msg, draw, 4);
    AppendBe(&msg, k, 4);
    const Hash256 seed = Keccak256(msg);
    u128 x = 0;
    for (int i = 0; i < 16; ++i) x = (x << 8) | seed[i];
    if (x < limit) return x % bound;
  }
}

}  // namespace

StatusOr<unsigned __int128> StakeToU128(const Uint256& stake) {
  for (int i = 0; i < 16; ++i) {
    if (stake[i] != 0) return InvalidArgument("an operator's stake does not fit in 128 bits");
  }
  u128 v = 0;
  for (int i = 16; i < 32; ++i) v = (v << 8) | stake[i];
  return v;
}

StatusOr<std::vector<Address20>> CommitteeOrder(const Hash256& task_id, uint64_t reference_block,
                                                const Hash256& seed_block_hash, std::vector<WeightedOperator> operators,
                                                size_t count) {
  std::sort(operators.begin(), operators.end(),
            [](const WeightedOperator& a, const WeightedOperator& b) { return a.address < b.address; });
  for (size_t i = 1; i < operators.size(); ++i) {
    if (operators[i].address == operators[i - 1].address) {
      return InvalidArgument("operator " + ToHex(operators[i].address) + " appears twice in the operator set");
    }
  }
  struct Remaining {
    Address20 address;
    u128 stake;
  };
  std::vector<Remaining> remaining;
  u128 total = 0;
  const u128 kMaxTotal = u128{1} << 127;
  for (const auto& op : operators) {
    ASSIGN_OR_RETURN(u128 stake, StakeToU128(op.stake));
    if (stake == 0) continue;
    total += stake;
    if (stake >= kMaxTotal || total >= kMaxTotal) return InvalidArgument("total stake must be below 2^127 wei");
    remaining.push_back({op.address, stake});
  }
  std::vector<Address20> order;
  for (uint32_t draw = 0; order.size() < count && !remaining.empty(); ++draw) {
    const u128 r = UniformBelow(task_id, reference_block, seed_block_hash, draw, total);
    u128 cumulative = 0;
    for (size_t i = 0; i < remaining.size(); ++i) {
      cumulative += remaining[i].stake;
      if (r < cumulative) {
        order.push_back(remaining[i].address);
        total -= remaining[i].stake;
        remaining.erase(remaining.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  return order;
}

}  // namespace consensor::consensus
